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

#include "core/core.h"
#include "nn/ops.h"

/* Loops over fewer elements than this stay on one thread (a parallel region costs a few
 * microseconds). */
#define PAR_MIN 32768

/* The elementwise kernels are compiled three times on x86-64 GCC, for the baseline, the
 * x86-64-v3 level (AVX2, FMA: Intel Haswell and AMD Zen and later) and the x86-64-v4 level
 * (AVX-512: Intel Skylake-SP and AMD Zen 4 and later; half the time of v3 for the GELUs),
 * and the loader picks one by the CPU's features. Each element's arithmetic is the same in
 * all three (no contraction into FMA under -std=c11); the sums of softmax and of the norms
 * (in double) add their lanes in another order. HS_CLONES_NO_V4 leaves the AVX-512 one
 * out: the unit tests' second build, which runs the AVX2 kernels on a machine that has
 * AVX-512. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(HS_NO_CLONES)
#ifdef HS_CLONES_NO_V4
#define HS_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define HS_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
#else
#define HS_CLONES
#endif

/* e^x in float without a libm call or a branch, so loops of it vectorise: x = k ln2 + r with
 * |r| <= ln2/2, e^r by its Taylor polynomial to r^7 (truncation < 6e-9 relative), 2^k put
 * into the exponent bits. Relative error about 2 ulp; 0 below -87.3 (where expf is
 * subnormal); saturates at e^88.3 (3e38) above; NaN for NaN. The clamp sends NaN to -87.3,
 * so that k always converts to an int (a NaN there is undefined behaviour, which the
 * fuzzers' UBSan caught on a model with NaN weights), and the NaN is put back at the end. */
static inline float exp_fast(float x)
{
    const float log2e = 1.44269504088896341f, ln2_hi = 0.693145751953125f,
                ln2_lo = 1.42860682030941723e-6f;
    const float round = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float xc = x > -87.3f ? x : -87.3f;
    xc = xc > 88.3f ? 88.3f : xc;
    float k = (xc * log2e + round) - round;
    float r = (xc - k * ln2_hi) - k * ln2_lo;
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    union { uint32_t u; float f; } s = {.u = (uint32_t)((int32_t)k + 127) << 23};
    float y = p * s.f;
    return x < -87.3f ? 0.0f : x == x ? y : x;
}

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
    hs_gemm g = {.m = n, .n = out, .k = in, .alpha = 1.0, .beta = add ? 1.0 : 0.0, .a = x,
                 .lda = in, .b = w, .ldb = out, .c = y, .ldc = out, .bias = b, .add = add};
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

HS_CLONES static void gelu_tanh(const float *x, float *y, size_t count)
{
    const float k = 0.79788456080286536f; /* sqrt(2/pi) */
#pragma omp simd
    for (size_t i = 0; i < count; i++) {
        float v = x[i];
        float u = k * (v + 0.044715f * v * v * v);
        y[i] = v - v / (exp_fast(2.0f * u) + 1.0f); /* 0.5 v (1 + tanh u) */
    }
}

/* dy *= GELU'(x), tanh form: 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2), t = tanh u.
 * With E = e^{2u} and s = 1 / (E + 1): 1 + t = 2 E s and 1 - t^2 = 4 E s^2, neither a
 * difference, so the negative tail keeps its relative accuracy (1 + t from t itself is 0
 * past x = -5 in float); 2u is capped at 40, where 1 + t is 2 in float. */
HS_CLONES static void gelu_tanh_back(const float *x, float *dy, size_t count)
{
    const float k = 0.79788456080286536f;
#pragma omp simd
    for (size_t i = 0; i < count; i++) {
        float v = x[i];
        float u2 = 2.0f * k * (v + 0.044715f * v * v * v);
        float e = exp_fast(u2 < 40.0f ? u2 : 40.0f), s = 1.0f / (e + 1.0f), es = e * s;
        float dg = es + 2.0f * v * es * s * k * (1.0f + 0.134145f * v * v);
        dy[i] *= dg;
    }
}

/* 0.5 x (1 + erf(x / sqrt 2)) without a libm call, so the loop vectorises. With z = x / sqrt 2
 * and a = |z|: 1 + erf(z) = 1 + z P(z^2) for a < 1; beyond, erfc(a) = exp(-a^2) Q(1/a), Q a
 * fit of the scaled complementary error function exp(a^2) erfc(a) on [1, 9] (in s, 1/a
 * mapped onto [-1, 1], where its coefficients are small and Horner's rule stable), giving
 * 2 - erfc(a) for z > 0 and erfc(a) itself for z < 0 (no cancellation in 1 + erf, so the
 * negative tail keeps its relative accuracy); erfc(9) = 4e-37, taken as 0 past 9. Fits and
 * their float32 error: fixtures/ref/fit_erf.py (absolute error of GELU at most 3.8e-7 on
 * [-12, 12], as for 1 + erff; relative 1.2e-6 where |GELU| > 1e-3, against 5e-5 for 1 + erff,
 * most of it the rounding of z itself, which erfc's slope -2a amplifies). */
static const float ERF_SMALL[7] = {
    1.128379166e+00f, -3.761262557e-01f, 1.128358228e-01f, -2.685369186e-02f,
    5.188099769e-03f, -8.008193336e-04f, 7.847262432e-05f};
static const float ERFCX_LARGE[12] = { /* in s = 9/4 (1/a) - 5/4, on [-1, 1] */
    2.785600958e-01f, 1.808104956e-01f, -3.568687398e-02f, 3.046580873e-03f,
    1.681155373e-03f, -1.169169403e-03f, 4.292798317e-04f, -9.111032693e-05f,
    -2.231119771e-05f, 4.150299551e-05f, -1.569789896e-05f, -3.754861823e-07f};

/* 1 + erf(z), inlined into the cloned kernels below so that it vectorises with each */
static inline float one_plus_erf(float z)
{
    const float *P = ERF_SMALL, *Q = ERFCX_LARGE;
    float a = fabsf(z), u = z * z;
    /* Horner's rule written out: a loop over the coefficients would not vectorise */
    float p = ((((((P[6] * u + P[5]) * u + P[4]) * u + P[3]) * u + P[2]) * u + P[1]) * u + P[0]);
    float ac = a < 1.0f ? 1.0f : a > 9.0f ? 9.0f : a, s = 2.25f / ac - 1.25f;
    float q = Q[11] * s + Q[10];
    q = ((((q * s + Q[9]) * s + Q[8]) * s + Q[7]) * s + Q[6]) * s + Q[5];
    q = ((((q * s + Q[4]) * s + Q[3]) * s + Q[2]) * s + Q[1]) * s + Q[0];
    float e = exp_fast(-(ac * ac)) * q; /* erfc(a) */
    e = a >= 9.0f ? 0.0f : e;
    return a < 1.0f ? 1.0f + z * p : z > 0.0f ? 2.0f - e : e;
}

HS_CLONES static void gelu_erf(const float *x, float *y, size_t count)
{
#pragma omp simd
    for (size_t i = 0; i < count; i++) {
        float v = x[i];
        y[i] = 0.5f * v * one_plus_erf(v * 0.70710678118654752f);
    }
}

/* dy *= GELU'(x), erf form: 0.5 (1 + erf(x / sqrt 2)) + x phi(x), phi(x) = e^{-x^2/2} / sqrt(2 pi). */
HS_CLONES static void gelu_erf_back(const float *x, float *dy, size_t count)
{
#pragma omp simd
    for (size_t i = 0; i < count; i++) {
        float v = x[i];
        float dg = 0.5f * one_plus_erf(v * 0.70710678118654752f) +
                   v * exp_fast(-0.5f * v * v) * 0.39894228040143268f;
        dy[i] *= dg;
    }
}

/* kernel(x, y, len) over count elements in chunks of 4096, the chunks on the threads */
static void by_chunks(void (*kernel)(const float *, float *, size_t), const float *x, float *y,
                      size_t count)
{
    const size_t chunk = 4096;
    size_t chunks = (count + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (count >= PAR_MIN)
    for (size_t c = 0; c < chunks; c++) {
        size_t lo = c * chunk, len = count - lo < chunk ? count - lo : chunk;
        kernel(x + lo, y + lo, len);
    }
}

void hs_op_gelu(const float *x, float *y, size_t count, hs_activation act)
{
    by_chunks(act == HS_ACT_GELU_ERF ? gelu_erf : gelu_tanh, x, y, count);
}

void hs_op_gelu_back(const float *x, float *dy, size_t count, hs_activation act)
{
    by_chunks(act == HS_ACT_GELU_ERF ? gelu_erf_back : gelu_tanh_back, x, dy, count);
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

/* Softmax of rows r0..r0+rows-1 of an (n, n) score matrix whose first row is s; causal row i
 * covers keys 0..i and is 0 past them. Returns the first of these rows (0-based within the
 * block) whose probabilities are not finite, or -1. A row's sum of exponentials is at least
 * 1 (its maximum gives e^0) and finite unless a score is NaN or infinite (max - max is then
 * NaN, and NaN carries through exp_fast), so a finite sum is a finite row. */
static int softmax_block(float *s, int r0, int rows, int n, int causal)
{
    int bad = -1;
    for (int i = 0; i < rows; i++) {
        float *r = s + (size_t)i * (size_t)n;
        int w = causal ? r0 + i + 1 : n;
        double sum = exp_shifted(r, w, NULL);
        if (bad < 0 && !isfinite(sum))
            bad = i;
        float inv = (float)(1.0 / sum);
#pragma omp simd
        for (int j = 0; j < w; j++)
            r[j] *= inv;
        if (w < n)
            memset(r + w, 0, (size_t)(n - w) * sizeof *r);
    }
    return bad;
}

void hs_op_softmax_rows(float *s, int n, int causal)
{
    (void)softmax_block(s, 0, n, n, causal);
}

/* Attention work is split into tasks of one head × ATTN_ROWS query rows; causal blocks
 * multiply against the keys up to their last row only (about half the multiply-adds of
 * the full n × n at large n). */
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
    return c->d_model + 2 * kv * c->d_head;
}

/* One task's scores and softmax: query rows r0..r1-1 of head h into p (rows of n floats,
 * keys past a causal row set to 0); returns the first bad row within the task, or -1. */
static int probs_task(const hs_model_config *c, const float *qkv, float *p, int n, int h, int r0)
{
    int d = c->d_model, dh = c->d_head, W = qkv_ld(c);
    int r1 = r0 + ATTN_ROWS < n ? r0 + ATTN_ROWS : n, keys = c->causal ? r1 : n;
    const float *q = qkv + (size_t)h * (size_t)dh;
    const float *k = qkv + (size_t)d + kv_col(c, h);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, keys, dh,
                1.0f / sqrtf((float)dh), q + (size_t)r0 * (size_t)W, W, k, W, 0.0f, p, n);
    return softmax_block(p, r0, r1 - r0, n, c->causal); /* zeroes keys past the query */
}

/* One task's context: rows r0..r1-1 of head h's probabilities p (scaled in place by hm when
 * it is not 1) times its values, into ctx's columns of head h. */
static void context_task(const hs_model_config *c, const float *qkv, float *p, float *ctx, int n,
                         int h, int r0, float hm)
{
    int d = c->d_model, dh = c->d_head, W = qkv_ld(c), kvd = (W - d) / 2; /* V follows K */
    int r1 = r0 + ATTN_ROWS < n ? r0 + ATTN_ROWS : n, keys = c->causal ? r1 : n;
    const float *v = qkv + (size_t)d + (size_t)kvd + kv_col(c, h);
    if (hm != 1.0f)
        for (size_t i = 0; i < (size_t)(r1 - r0) * (size_t)n; i++)
            p[i] *= hm;
    /* probs past the block's last row are 0 */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, dh, keys, 1.0f, p, n, v, W,
                0.0f, ctx + (size_t)r0 * (size_t)d + (size_t)h * (size_t)dh, d);
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

size_t hs_op_attn_probs(const hs_model_config *c, const float *qkv, float *probs, int n)
{
    int nb = (n + ATTN_ROWS - 1) / ATTN_ROWS, tasks = c->n_head * nb;
    size_t nn = (size_t)n * (size_t)n, first_bad = (size_t)-1;
#pragma omp parallel for schedule(dynamic) if (tasks > 1 && nn * (size_t)c->n_head >= PAR_MIN)
    for (int t = 0; t < tasks; t++) {
        int h = t / nb, r0 = (t % nb) * ATTN_ROWS;
        float *p = probs + (size_t)h * nn + (size_t)r0 * (size_t)n;
        note_bad(&first_bad, probs_task(c, qkv, p, n, h, r0), n, h, r0);
    }
    return first_bad;
}

void hs_op_attn_context(const hs_model_config *c, const float *qkv, float *probs, float *ctx,
                        int n, const float *head_mask)
{
    int nb = (n + ATTN_ROWS - 1) / ATTN_ROWS, tasks = c->n_head * nb;
    size_t nn = (size_t)n * (size_t)n;
#pragma omp parallel for schedule(dynamic) if (tasks > 1 && nn * (size_t)c->n_head >= PAR_MIN)
    for (int t = 0; t < tasks; t++) {
        int h = t / nb, r0 = (t % nb) * ATTN_ROWS;
        float *p = probs + (size_t)h * nn + (size_t)r0 * (size_t)n;
        context_task(c, qkv, p, ctx, n, h, r0, head_mask ? head_mask[h] : 1.0f);
    }
}

hs_status hs_op_attn_fused(const hs_model_config *c, const float *qkv, float *ctx, int n,
                           const float *head_mask, float *probs, size_t *bad_row)
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
            note_bad(&first_bad, probs_task(c, qkv, p, n, h, r0), n, h, r0);
            if (probs) /* the maps, before the head mask scales them: one write of the rows */
                memcpy(probs + (size_t)h * nn + (size_t)r0 * (size_t)n, p,
                       (size_t)rows * (size_t)n * sizeof *p);
            context_task(c, qkv, p, ctx, n, h, r0, head_mask ? head_mask[h] : 1.0f);
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

/* y = SiLU(g) u = g / (1 + e^-g) u, exp_fast so that the loop vectorises (e^-g saturating
 * at 3e38 gives 0 for the far negative gates, 0 gives g for the far positive ones) */
HS_CLONES static void silu_mul(const float *g, const float *u, float *y, int count)
{
#pragma omp simd
    for (int i = 0; i < count; i++)
        y[i] = g[i] / (1.0f + exp_fast(-g[i])) * u[i];
}

/* SiLU(g) u's backward, a = d loss / d (SiLU(g) u): dg = a u s (1 + g (1 - s)), du = a SiLU(g),
 * s = sigmoid(g) */
HS_CLONES static void silu_mul_back(const float *g, const float *u, const float *a, float *dg,
                                    float *du, int count)
{
#pragma omp simd
    for (int i = 0; i < count; i++) {
        float s = 1.0f / (1.0f + exp_fast(-g[i]));
        dg[i] = a[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
        du[i] = a[i] * g[i] * s;
    }
}

void hs_op_swiglu(const float *gu, float *y, int rows, int f)
{
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)f >= PAR_MIN)
    for (int i = 0; i < rows; i++) {
        const float *g = gu + (size_t)i * 2 * (size_t)f;
        silu_mul(g, g + f, y + (size_t)i * (size_t)f, f);
    }
}

void hs_op_swiglu_back(const float *gu, const float *da, float *dgu, int rows, int f)
{
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)f >= PAR_MIN)
    for (int i = 0; i < rows; i++) {
        const float *g = gu + (size_t)i * 2 * (size_t)f;
        float *dg = dgu + (size_t)i * 2 * (size_t)f;
        silu_mul_back(g, g + f, da + (size_t)i * (size_t)f, dg, dg + f, f);
    }
}

void hs_op_rope_freqs(const hs_arch *a, double *inv)
{
    const double two_pi = 6.283185307179586476925;
    int r = a->rotary_dims, half = r / 2;
    double f = a->rope_factor, lo = a->rope_low_freq, hi = a->rope_high_freq;
    double old = a->rope_orig_ctx;
    for (int k = 0; k < half; k++) {
        double th = pow((double)a->rotary_base, -2.0 * k / r);
        if (a->rope_scaling == HS_ROPE_LINEAR) {
            th /= f;
        } else if (a->rope_scaling == HS_ROPE_LLAMA3) {
            double wl = two_pi / th;
            if (wl > old / lo) {
                th /= f;
            } else if (wl >= old / hi) { /* between the bands: blended */
                double s = (old / wl - lo) / (hi - lo);
                th = (1 - s) * th / f + s * th;
            }
        }
        inv[k] = th;
    }
}

void hs_op_rotary(float *x, int n, int n_head, int d_head, int ld, int rot_dims,
                  const double *inv_freq, int pos0, int inverse)
{
    int half = rot_dims / 2;
    double sign = inverse ? -1.0 : 1.0;
#pragma omp parallel for schedule(static) if ((size_t)n * (size_t)n_head * (size_t)rot_dims >= PAR_MIN)
    for (int i = 0; i < n; i++)
        for (int k = 0; k < half; k++) {
            double ang = (double)(pos0 + i) * inv_freq[k];
            double c = cos(ang), s = sign * sin(ang);
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
