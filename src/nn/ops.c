/* Kernels shared by the forward and backward passes (see ops.h).
 *
 * Threads: every loop here is an OpenMP loop over independent rows (or heads × row blocks),
 * each row computed by one thread with the same code, so results do not depend on the
 * thread count. BLAS calls made inside those loops run single-threaded (OpenBLAS's OpenMP
 * build checks omp_in_parallel); the big projections outside them use BLAS's own threads. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "nn/fastmath.h"
#include "core/core.h"
#include "core/q8gemm.h"
#include "core/qgemm.h"
#include "nn/ops.h"

/* The products run by the one tiling rule of src/core/gemm.c (hs_gemm_run): tiles cut by
 * the shape alone, and K chunks for a product of few tiles. */
void hs_op_gemm(int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                const float *b, int ldb, float beta, float *c, int ldc)
{
    hs_gemm g = {.trans_b = trans_b, .m = m, .n = n, .k = k, .alpha = alpha, .beta = beta,
                 .a = a, .lda = lda, .b = b, .ldb = ldb, .c = c, .ldc = ldc};
    hs_gemm_run(&g);
}

/* with a bias each tile first sets its block of y to the bias rows (add: adds them), then
 * accumulates the product into it: the broadcast in parallel, on a block the product reads
 * next, instead of a serial pass over the whole output (a quarter of the MLP's time at 16
 * threads) */
static void linear(const float *x, const float *w, const float *b, float *y, int n, int in,
                   int out, int add)
{
    const hs_qmat *q = hs_qmat_find(w); /* a layer matrix in its stored type */
    if (q && q->decode_i8) { /* with 8-bit activations (--activations q8), every row count */
        hs_q8gemm_run(q, x, b, y, n, add);
        return;
    }
    if (n == 1) { /* one row: our own fixed order, the same for W in memory and stored */
        hs_gemv_linear(x, w, q, b, y, in, out, add);
        return;
    }
    hs_gemm g = {.m = n, .n = out, .k = in, .alpha = 1.0, .beta = add ? 1.0 : 0.0, .a = x,
                 .lda = in, .b = w, .ldb = out, .c = y, .ldc = out, .bias = b, .add = add};
    if (q) {
        g.b_fill = hs_qmat_fill;
        g.b_fill_kn = hs_qmat_fill_kn;
        g.b_ctx = q;
    }
    hs_gemm_run(&g);
}

void hs_op_linear_back(const float *dy, const float *w, float *dx, int n, int in, int out,
                       int accumulate)
{
    hs_gemm g = {.trans_b = 1, .m = n, .n = in, .k = out, .alpha = 1.0,
                 .beta = accumulate ? 1.0 : 0.0, .a = dy, .lda = out, .b = w, .ldb = out,
                 .c = dx, .ldc = in};
    const hs_qmat *q = hs_qmat_find(w);
    if (q) { /* op(b) = wᵀ made a block at a time: rows of w are its columns */
        g.trans_b = 0;
        g.b_fill = hs_qmat_fill_t;
        g.b_fill_as = HS_GEMM_FILL_NT;
        g.b_ctx = q;
    }
    hs_gemm_run(&g);
}

void hs_op_linear(const float *x, const float *w, const float *b, float *y, int n, int in, int out)
{
    linear(x, w, b, y, n, in, out, 0);
}

void hs_op_linear_add(const float *x, const float *w, const float *b, float *y, int n, int in,
                      int out)
{
    linear(x, w, b, y, n, in, out, 1);
}

/* One row's LayerNorm; its two sums in double, over vector lanes (each clone its own order,
 * the same on any thread count). */
HS_CLONES static void layernorm_row(const float *xi, const float *w, const float *b, float *yi,
                                    float *hi, float *rstd, int d, float eps)
{
    double mean = 0, var = 0;
#pragma omp simd reduction(+ : mean)
    for (int k = 0; k < d; k++)
        mean += xi[k];
    mean /= d;
#pragma omp simd reduction(+ : var)
    for (int k = 0; k < d; k++) {
        double t = xi[k] - mean;
        var += t * t;
    }
    var /= d;
    float inv = (float)(1.0 / sqrt(var + (double)eps));
    float mu = (float)mean;
    if (rstd)
        *rstd = inv;
    for (int k = 0; k < d; k++) {
        float h = (xi[k] - mu) * inv;
        if (hi)
            hi[k] = h;
        yi[k] = h * w[k] + b[k];
    }
}

void hs_op_layernorm(const float *x, const float *w, const float *b, float *y, float *xhat,
                     float *rstd, int n, int d, float eps)
{
#pragma omp parallel for schedule(static) if ((size_t)n * (size_t)d >= PAR_MIN)
    for (int i = 0; i < n; i++) {
        size_t o = (size_t)i * (size_t)d;
        layernorm_row(x + o, w, b, y + o, xhat ? xhat + o : NULL, rstd ? rstd + i : NULL, d, eps);
    }
}

/* max r[0..w); inlined into the cloned kernels below, so it vectorises with each. */
static inline float row_max(const float *r, int w)
{
    float mx = r[0];
#pragma omp simd reduction(max : mx)
    for (int j = 1; j < w; j++)
        mx = r[j] > mx ? r[j] : mx;
    return mx;
}

/* r[0..w) = exp(r - max) and returns their sum, in double. */
HS_CLONES static double exp_shifted(float *r, int w, float *max)
{
    float mx = row_max(r, w);
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < w; j++) {
        r[j] = exp_fast(r[j] - mx);
        sum += r[j];
    }
    if (max)
        *max = mx;
    return sum;
}

HS_CLONES static double log_sum_exp(const float *r, int w)
{
    float mx = row_max(r, w);
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < w; j++)
        sum += exp_fast(r[j] - mx);
    return log(sum) + (double)mx;
}

double hs_op_exp_shift(float *r, int w, float *max) { return exp_shifted(r, w, max); }

double hs_op_log_sum_exp(const float *r, int w) { return log_sum_exp(r, w); }

/* Softmax of rows r0..r0+rows-1 of an (n, n) score matrix whose first row is s; row i
 * covers its visible keys [hs_vis_lo, hs_vis_hi) (causal: 0..i) and is 0 outside them.
 * Returns the first of these rows (0-based within the block) whose probabilities are not
 * finite, or -1. A row's sum of exponentials is at least 1 (its maximum gives e^0) and
 * finite unless a score is NaN or infinite (max - max is then NaN, and NaN carries through
 * exp_fast), so a finite sum is a finite row. */
static int softmax_block(float *s, int r0, int rows, int n, hs_visibility vis)
{
    int bad = -1;
    for (int i = 0; i < rows; i++) {
        float *r = s + (size_t)i * (size_t)n;
        int lo = hs_vis_lo(vis, r0 + i), hi = hs_vis_hi(vis, r0 + i, n), w = hi - lo;
        double sum = exp_shifted(r + lo, w, NULL);
        if (bad < 0 && !isfinite(sum))
            bad = i;
        float inv = (float)(1.0 / sum);
#pragma omp simd
        for (int j = lo; j < hi; j++)
            r[j] *= inv;
        if (lo > 0)
            memset(r, 0, (size_t)lo * sizeof *r);
        if (hi < n)
            memset(r + hi, 0, (size_t)(n - hi) * sizeof *r);
    }
    return bad;
}

void hs_op_softmax_rows(float *s, int n, hs_visibility vis)
{
    (void)softmax_block(s, 0, n, n, vis);
}

float hs_attn_scale(const hs_model_config *c)
{
    if (c->arch && c->arch->query_scale > 0)
        return c->arch->query_scale;
    return 1.0f / sqrtf((float)c->d_head);
}

/* Attention work is split into tasks of one head × ATTN_ROWS query rows; a task multiplies
 * against the keys its rows see only (causal: up to its last row, about half the
 * multiply-adds of the full n × n at large n; a sliding window: about the window). */
#define ATTN_ROWS 64

/* Grouped-query attention: query head h reads key/value head h / (n_head / n_kv_head),
 * whose K and V columns follow the n_head query heads in the fused qkv rows. */
static inline size_t kv_col(const hs_model_config *c, int h)
{
    int kv = c->n_kv_head > 0 ? c->n_kv_head : c->n_head;
    return (size_t)(h / (c->n_head / kv)) * (size_t)c->d_head;
}

static inline int qkv_ld(const hs_model_config *c)
{
    int kv = c->n_kv_head > 0 ? c->n_kv_head : c->n_head;
    return c->n_head * c->d_head + 2 * kv * c->d_head;
}

/* The keys [*k0, *k1) that some query row r0..r1-1 sees (lo and hi grow with the row). */
static inline void task_keys(hs_visibility vis, int r0, int r1, int n, int *k0, int *k1)
{
    *k0 = hs_vis_lo(vis, r0);
    *k1 = hs_vis_hi(vis, r1 - 1, n);
}

double hs_alibi_slope(int n_head, int h)
{
    int p = 1;
    while (p * 2 <= n_head)
        p *= 2;
    return h < p ? exp2(-8.0 * (h + 1) / p) : exp2(-4.0 * (2 * (h - p) + 1) / p);
}

/* x rounded to the nearest bfloat16, ties to even (x finite). */
static float round_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

float hs_alibi_bias(int n_head, int h, int j)
{
    return round_bf16(round_bf16((float)hs_alibi_slope(n_head, h)) * (float)j);
}

/* ALiBi: rows r0..r1-1 of head h's scores p (rows of n floats) += the bias of each visible
 * key (hs_alibi_bias), scaled as the scores are. */
static void alibi_block(const hs_model_config *c, hs_visibility vis, float *p, int n, int h,
                        int r0, int r1)
{
    float scale = hs_attn_scale(c);
    float m = round_bf16((float)hs_alibi_slope(c->n_head, h));
    for (int i = r0; i < r1; i++) {
        float *r = p + (size_t)(i - r0) * (size_t)n;
        for (int j = hs_vis_lo(vis, i), hi = hs_vis_hi(vis, i, n); j < hi; j++)
            r[j] += scale * round_bf16(m * (float)j);
    }
}

/* One task's scores and softmax: query rows r0..r1-1 of head h into p (rows of n floats,
 * keys a row does not see set to 0); returns the first bad row within the task, or -1. */
static int probs_task(const hs_model_config *c, hs_visibility vis, const float *qkv, float *p,
                      int n, int h, int r0)
{
    int A = c->n_head * c->d_head, dh = c->d_head, W = qkv_ld(c), k0, k1;
    int r1 = r0 + ATTN_ROWS < n ? r0 + ATTN_ROWS : n;
    task_keys(vis, r0, r1, n, &k0, &k1);
    const float *q = qkv + (size_t)h * (size_t)dh;
    const float *k = qkv + (size_t)A + kv_col(c, h) + (size_t)k0 * (size_t)W;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, k1 - k0, dh,
                hs_attn_scale(c), q + (size_t)r0 * (size_t)W, W, k, W, 0.0f, p + k0, n);
    if (c->arch && c->arch->pos == HS_POS_ALIBI)
        alibi_block(c, vis, p, n, h, r0, r1);
    float cap = c->arch ? c->arch->attn_softcap : 0.0f;
    if (cap > 0) /* Gemma 2: cap tanh(s / cap), before the mask (never with ALiBi: arch.c) */
        for (int i = r0; i < r1; i++) {
            float *pi = p + (size_t)(i - r0) * (size_t)n;
            for (int j = k0; j < k1; j++)
                pi[j] = cap * tanhf(pi[j] / cap);
        }
    return softmax_block(p, r0, r1 - r0, n, vis); /* zeroes the keys a row does not see */
}

/* One task's context: rows r0..r1-1 of head h's probabilities p (scaled in place by hm when
 * it is not 1) times its values, into ctx's columns of head h. */
static void context_task(const hs_model_config *c, hs_visibility vis, const float *qkv,
                         float *p, float *ctx, int n, int h, int r0, float hm)
{
    int A = c->n_head * c->d_head, dh = c->d_head, W = qkv_ld(c), kvd = (W - A) / 2, k0, k1;
    int r1 = r0 + ATTN_ROWS < n ? r0 + ATTN_ROWS : n;
    task_keys(vis, r0, r1, n, &k0, &k1);
    const float *v = qkv + (size_t)A + (size_t)kvd + kv_col(c, h); /* V follows K */
    if (hm != 1.0f)
        for (size_t i = 0; i < (size_t)(r1 - r0) * (size_t)n; i++)
            p[i] *= hm;
    /* probs outside the block's keys are 0 */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, dh, k1 - k0, 1.0f, p + k0, n,
                v + (size_t)k0 * (size_t)W, W, 0.0f,
                ctx + (size_t)r0 * (size_t)A + (size_t)h * (size_t)dh, A);
}

/* Keeps the smallest row found bad (head * n + query) in *first. */
static void note_bad(size_t *first, int bad, int n, int h, int r0)
{
    if (bad < 0)
        return;
    size_t row = (size_t)h * (size_t)n + (size_t)(r0 + bad);
#pragma omp critical(hs_attn_bad_row)
    *first = row < *first ? row : *first;
}

size_t hs_op_attn_probs(const hs_model_config *c, hs_visibility vis, const float *qkv,
                        float *probs, int n)
{
    int nb = (n + ATTN_ROWS - 1) / ATTN_ROWS, tasks = c->n_head * nb;
    size_t nn = (size_t)n * (size_t)n, first_bad = (size_t)-1;
#pragma omp parallel for schedule(dynamic) if (tasks > 1 && nn * (size_t)c->n_head >= PAR_MIN)
    for (int t = 0; t < tasks; t++) {
        int h = t / nb, r0 = (t % nb) * ATTN_ROWS;
        float *p = probs + (size_t)h * nn + (size_t)r0 * (size_t)n;
        note_bad(&first_bad, probs_task(c, vis, qkv, p, n, h, r0), n, h, r0);
    }
    return first_bad;
}

void hs_op_attn_context(const hs_model_config *c, hs_visibility vis, const float *qkv,
                        float *probs, float *ctx, int n, const float *head_mask)
{
    int nb = (n + ATTN_ROWS - 1) / ATTN_ROWS, tasks = c->n_head * nb;
    size_t nn = (size_t)n * (size_t)n;
#pragma omp parallel for schedule(dynamic) if (tasks > 1 && nn * (size_t)c->n_head >= PAR_MIN)
    for (int t = 0; t < tasks; t++) {
        int h = t / nb, r0 = (t % nb) * ATTN_ROWS;
        float *p = probs + (size_t)h * nn + (size_t)r0 * (size_t)n;
        context_task(c, vis, qkv, p, ctx, n, h, r0, head_mask ? head_mask[h] : 1.0f);
    }
}

hs_status hs_op_attn_fused(const hs_model_config *c, hs_visibility vis, const float *qkv,
                           float *ctx, int n, const float *head_mask, float *probs,
                           size_t *bad_row)
{
    int nb = (n + ATTN_ROWS - 1) / ATTN_ROWS, tasks = c->n_head * nb, failed = 0;
    size_t nn = (size_t)n * (size_t)n, first_bad = (size_t)-1;
#pragma omp parallel if (tasks > 1 && nn * (size_t)c->n_head >= PAR_MIN)
    {
        float *p = malloc((size_t)ATTN_ROWS * (size_t)n * sizeof *p); /* this thread's rows */
        if (!p) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic)
        for (int t = 0; t < tasks; t++) {
            int h = t / nb, r0 = (t % nb) * ATTN_ROWS;
            int rows = n - r0 < ATTN_ROWS ? n - r0 : ATTN_ROWS;
            if (!p)
                continue;
            note_bad(&first_bad, probs_task(c, vis, qkv, p, n, h, r0), n, h, r0);
            if (probs) /* the maps, before the head mask scales them: one write of the rows */
                memcpy(probs + (size_t)h * nn + (size_t)r0 * (size_t)n, p,
                       (size_t)rows * (size_t)n * sizeof *p);
            context_task(c, vis, qkv, p, ctx, n, h, r0, head_mask ? head_mask[h] : 1.0f);
        }
        free(p);
    }
    *bad_row = first_bad;
    return failed ? HS_E_NOMEM : HS_OK;
}

HS_CLONES static void rmsnorm_row(const float *xi, const float *w, float *yi, float *hi,
                                  float *rstd, int d, float eps)
{
    double ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int k = 0; k < d; k++)
        ss += (double)xi[k] * xi[k];
    float inv = (float)(1.0 / sqrt(ss / d + (double)eps));
    if (rstd)
        *rstd = inv;
    for (int k = 0; k < d; k++) {
        float h = xi[k] * inv;
        if (hi)
            hi[k] = h;
        yi[k] = h * w[k];
    }
}

void hs_op_rmsnorm(const float *x, const float *w, float *y, float *xhat, float *rstd, int n,
                   int d, float eps)
{
#pragma omp parallel for schedule(static) if ((size_t)n * (size_t)d >= PAR_MIN)
    for (int i = 0; i < n; i++) {
        size_t o = (size_t)i * (size_t)d;
        rmsnorm_row(x + o, w, y + o, xhat ? xhat + o : NULL, rstd ? rstd + i : NULL, d, eps);
    }
}

void hs_op_rope_freqs(const hs_arch *a, double *inv)
{
    hs_rope r = {a->rotary_dims, a->rotary_base, a->rope_scaling, a->rope_factor,
                 a->rope_low_freq, a->rope_high_freq, a->rope_orig_ctx, a->rope_short,
                 a->rope_long, a->rope_attn_factor,
                 a->rope_beta_fast, a->rope_beta_slow};
    hs_op_rope_freqs_of(&r, inv);
}

/* YaRN's ramp (Peng et al. 2023, §3.2): the dimension pair whose wavelength makes `rot`
 * rotations in the original context is k = r ln(old / (2 pi rot)) / (2 ln base); pairs
 * below floor(k(beta_fast)) keep theta, pairs above ceil(k(beta_slow)) take theta / factor,
 * linearly between (the bounds clamped to [0, r - 1]). */
static void yarn_freqs(const hs_rope *rp, double *inv)
{
    const double two_pi = 6.283185307179586476925;
    int r = rp->dims, half = r / 2;
    double lb = log((double)rp->base), old = rp->orig_ctx;
    double lo = floor(r * log(old / (two_pi * rp->beta_fast)) / (2 * lb));
    double hi = ceil(r * log(old / (two_pi * rp->beta_slow)) / (2 * lb));
    lo = lo < 0 ? 0 : lo;
    hi = hi > r - 1 ? r - 1 : hi;
    if (hi == lo)
        hi += 0.001;
    for (int k = 0; k < half; k++) {
        double th = pow((double)rp->base, -2.0 * k / r);
        double ramp = ((double)k - lo) / (hi - lo);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        inv[k] = th / rp->factor * ramp + th * (1 - ramp);
    }
}

void hs_op_rope_freqs_of(const hs_rope *rp, double *inv)
{
    (void)hs_op_rope_freqs_at(rp, 0, inv);
}

double hs_op_rope_freqs_at(const hs_rope *rp, int n, double *inv)
{
    const double two_pi = 6.283185307179586476925;
    int r = rp->dims, half = r / 2;
    double f = rp->factor, lo = rp->low_freq, hi = rp->high_freq;
    double old = rp->orig_ctx;
    if (rp->scaling == HS_ROPE_YARN) {
        yarn_freqs(rp, inv);
        return rp->attn_factor > 0 ? (double)rp->attn_factor : 1.0;
    }
    /* longrope: the long factors once the text is longer than the original context */
    const float *ext = rp->scaling != HS_ROPE_LONGROPE ? NULL
                       : n > rp->orig_ctx              ? rp->long_factor
                                                       : rp->short_factor;
    for (int k = 0; k < half; k++) {
        double th = pow((double)rp->base, -2.0 * k / r);
        if (rp->scaling == HS_ROPE_LINEAR) {
            th /= f;
        } else if (rp->scaling == HS_ROPE_LLAMA3) {
            double wl = two_pi / th;
            if (wl > old / lo) {
                th /= f;
            } else if (wl >= old / hi) { /* between the bands: blended */
                double s = (old / wl - lo) / (hi - lo);
                th = (1 - s) * th / f + s * th;
            }
        } else if (ext) {
            th /= (double)ext[k];
        }
        inv[k] = th;
    }
    return rp->scaling == HS_ROPE_LONGROPE && rp->attn_factor > 0 ? (double)rp->attn_factor : 1.0;
}

void hs_op_rotary(float *x, int n, int n_head, int d_head, int ld, int rot_dims,
                  const double *inv_freq, int pos0, int inverse)
{
    hs_op_rotary_scaled(x, n, n_head, d_head, ld, rot_dims, inv_freq, 1.0, pos0, inverse);
}

void hs_op_rotary_scaled(float *x, int n, int n_head, int d_head, int ld, int rot_dims,
                         const double *inv_freq, double scale, int pos0, int inverse)
{
    int half = rot_dims / 2;
    double sign = inverse ? -1.0 : 1.0;
#pragma omp parallel for schedule(static) if ((size_t)n * (size_t)n_head * (size_t)rot_dims >= PAR_MIN)
    for (int i = 0; i < n; i++)
        for (int k = 0; k < half; k++) {
            double ang = (double)(pos0 + i) * inv_freq[k];
            double c = cos(ang), s = sign * sin(ang);
            if (scale != 1.0) { /* longrope's attention factor; 1: the plain turn, untouched */
                c *= scale;
                s *= scale;
            }
            for (int h = 0; h < n_head; h++) {
                float *xh = x + (size_t)i * (size_t)ld + (size_t)h * (size_t)d_head;
                double a = xh[k], b = xh[k + half];
                xh[k] = (float)(a * c - b * s);
                xh[k + half] = (float)(b * c + a * s);
            }
        }
}

void hs_op_add(float *x, const float *y, size_t count)
{
#pragma omp parallel for schedule(static) if (count >= PAR_MIN)
    for (size_t i = 0; i < count; i++)
        x[i] += y[i];
}

size_t hs_op_first_nonfinite(const float *x, size_t count)
{
    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
    for (size_t i = 0; i < count; i++)
        acc += x[i] * 0.0f;
    if (acc == 0.0f)
        return (size_t)-1;
    for (size_t i = 0; i < count; i++)
        if (!isfinite(x[i]))
            return i;
    return (size_t)-1;
}

void hs_op_rotary_scale(float *x, int n, int n_head, int d_head, int ld, int rot_dims, float f)
{
    for (int i = 0; i < n; i++)
        for (int h = 0; h < n_head; h++) {
            float *xh = x + (size_t)i * (size_t)ld + (size_t)h * (size_t)d_head;
            for (int k = 0; k < rot_dims; k++)
                xh[k] *= f;
        }
}
