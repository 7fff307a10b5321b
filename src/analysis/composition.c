/* Composition scores between heads and OV copying scores, from the weights (Elhage et al.
 * 2021). Every norm is taken in the factored form: with W_OV^a = V_a O_a (V_a: (d, dh),
 * O_a: (dh, d)) and W_QK^b = Q_b K_b^T,
 *   ||W_OV^a W_QK^b||^2   = tr(M^T Gv_a M Gk_b),  M = O_a Q_b  (dh, dh)
 *   ||W_OV^a W_QK^b^T||^2 = tr(M^T Gv_a M Gq_b),  M = O_a K_b
 *   ||W_OV^a W_OV^b||^2   = tr(M^T Gv_a M Go_b),  M = O_a V_b
 * with the Gram matrices Gv = V^T V, Gq = Q^T Q, Gk = K^T K, Go = O O^T (dh, dh), so no
 * (d, d) matrix per head is ever formed. With a square root F of each Gram (F^T F = G, from
 * its eigenvalues), tr(M^T Gv M G) = ||Fv_a O_a R_b F_b^T||^2: the rows Fv_a O_a of every
 * head of a layer, times the columns R_b F_b^T of every head of a later layer and of all
 * three kinds, is one (A, 3A) product per pair of layers, and each score the sum of squares
 * of one (dh, dh) block of it. A = n_head dh is the attention's width (hs_model_attn_width),
 * d_model unless the heads are wider (an explicit head_dim): W_O is (A, d), the readers
 * (d, A). */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis_internal.h"
#include "core/core.h"
#include "headscope/composition.h"
#include "model/model_internal.h"

/* LAPACK's general eigenvalue solver (OpenBLAS ships it). */
void dgeev_(const char *jobvl, const char *jobvr, const int *n, double *a, const int *lda,
            double *wr, double *wi, double *vl, const int *ldvl, double *vr, const int *ldvr,
            double *work, const int *lwork, int *info);
/* and its symmetric one */
void dsyev_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda,
            double *w, double *work, const int *lwork, int *info);

/* The layer matrices composition reads (through the weight cache, model_internal.h): W_Q,
 * W_K, W_V and W_O, never the MLP's, which are converted for no reader here. */
#define UNITS_QKV_O ((1u << HS_WU_QKV) | (1u << HS_WU_O))

/* Rows of the vocabulary a block of the copying circuit's G (hs_composition_gram) */
#ifndef HS_GRAM_CHUNK
#define HS_GRAM_CHUNK 4096
#endif

/* A square root of the symmetric positive semi-definite g (n, n): f (n, n) with f^T f = g,
 * f = diag(sqrt(lambda)) U^T from g = U diag(lambda) U^T (eigenvalues below 0, rounding,
 * taken as 0). work: 36 n + n * n doubles. Returns LAPACK's info (0: done). */
static int gram_root(const double *g, int n, float *f, double *work)
{
    double *u = work, *w = u + (size_t)n * n, *wk = w + n;
    int lwork = 35 * n, info = 0;
    memcpy(u, g, (size_t)n * n * sizeof *u);
    dsyev_("V", "U", &n, u, &n, w, wk, &lwork, &info); /* column j of U: u[j*n ..] */
    for (int j = 0; j < n && !info; j++) {
        double s = w[j] > 0 ? sqrt(w[j]) : 0.0;
        for (int i = 0; i < n; i++)
            f[(size_t)j * n + i] = (float)(s * u[(size_t)j * n + i]);
    }
    return info;
}

/* 1 when every one of x[0..n) is finite: LAPACK's solvers refuse a NaN or an infinity with
 * a bare argument number (and a line of their own on stderr), so the cause is named first. */
static int all_finite(const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

void hs_composition_free(hs_composition *c)
{
    free(c);
}

/* The column of the fused QKV slot (hs_qkv_width columns: [Q | K | V]) that query head h's
 * j-th column of part p (0 Q, 1 K, 2 V) reads, col = h*dh + j: with grouped-query
 * attention a query head reads the K and V columns of its KV head. */
static int qkv_col(const hs_model_config *c, int p, int col)
{
    int dh = c->d_head, g = hs_model_kv_head(c, col / dh);
    return p == 0 ? col : hs_model_attn_width(c) + ((p == 2 ? c->n_kv_head : 0) + g) * dh + col % dh;
}

/* The fused QKV column (qkv_col) of every column of part p (0 Q, 1 K, 2 V): cols (A). */
static void reader_cols(const hs_model_config *c, int p, int *cols)
{
    for (int j = 0; j < hs_model_attn_width(c); j++)
        cols[j] = qkv_col(c, p, j);
}

/* The reading weights of layer ly, part p, with the attention's norm scale (ln_1,
 * input_layernorm) folded in, every query head with its own copy of its KV head's columns:
 * out (d, A) row-major, column h*dh + j is head h's j-th column; cols from reader_cols. In
 * double (out) or float (outf): one of them is NULL. */
static void reader(const hs_model *m, const hs_layer *ly, const int *cols, double *out,
                   float *outf)
{
    int d = m->cfg.d_model, W = hs_qkv_width(&m->cfg), A = hs_model_attn_width(&m->cfg);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < d; i++) {
        const float *row = ly->w_qkv + (size_t)i * W;
        if (out)
            for (int j = 0; j < A; j++)
                out[(size_t)i * A + j] = (double)ly->ln1_w[i] * (double)row[cols[j]];
        else
            for (int j = 0; j < A; j++)
                outf[(size_t)i * A + j] = ly->ln1_w[i] * row[cols[j]];
    }
}

/* dst = (double)src, n floats, in parallel */
static void widen(const float *src, double *dst, size_t n)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        dst[i] = (double)src[i];
}

/* c = op(a) op(b) as one single-threaded OpenBLAS call: every use below runs inside a
 * parallel loop over heads, where OpenBLAS does not thread, so the bits do not depend on the
 * thread count (src/core/gemm.c); one parallel region per batch of heads, not per call. */
static void small_gemm(int ta, int tb, int m, int n, int k, const double *a, int lda,
                       const double *b, int ldb, double *c, int ldc)
{
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
                n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

static double trace_prod(const double *a, const double *b, int n) /* tr(A B) */
{
    double s = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            s += a[(size_t)i * n + j] * b[(size_t)j * n + i];
    return s;
}

int hs_composition_defined(const hs_model_config *c)
{
    const hs_arch *a = c->arch;
    /* pre-norm: every head reads the stream through its own layer's norm, whose scale folds
       into W_Q, W_K, W_V; rotary positions are left out of W_Q W_K^T (docs/metrics.md) */
    return a->norm_place == HS_NORM_PRE && a->head == HS_HEAD_DECODER && !a->mla_kv_lora &&
           !hs_composition_norms_undefined(c);
}

const char *hs_composition_norms_undefined(const hs_model_config *c)
{
    const hs_arch *a = c->arch;
    if (a->qk_norm)
        return "queries and keys are normalised after their projections, so W_Q W_K^T is not "
               "the map from the stream to the scores";
    if (a->post_norms || a->no_pre_norm)
        return "each sublayer's output is normalised before it is added, so the weights alone "
               "do not say how much of a head's output reaches a later head";
    return NULL;
}

hs_status hs_composition_compute(const hs_model *m, hs_composition **out, hs_error *err)
{
    return hs_composition_run(m, NULL, NULL, out, err);
}

/* One hs_composition_run: the model's shape and the scratch every stage shares. gram: one
 * layer's Gram matrices Gq, Gk, Gv, Go per head (4, H, dh, dh); root: every head's square
 * roots of them (4, N, dh, dh), float; in double W_O wo (A, d), a reader rd (d, A), the
 * copying circuit's G mm (d, d) and W_O G tt (A, d); in float a reader rf (d, A), the three
 * readers times the roots yf (d, 3A), an earlier layer's rows Fv O xf (A, d) and their
 * product pf (A, 3A); cols: the fused QKV column of every reader column (3, A). */
typedef struct comp_run {
    const hs_model *m;
    int L, H, d, dh, N, A;
    size_t dd, da, g2;
    double *gram, *wo, *rd, *mm, *tt;
    float *root, *rf, *yf, *xf, *pf;
    int *cols;
    void (*progress)(void *user, const char *what, int done, int total);
    void *user;
} comp_run;

/* Gram matrix kind (0 Gq, 1 Gk, 2 Gv, 3 Go) of head h of the layer at hand: (dh, dh) */
static double *gram_at(const comp_run *w, int kind, int h)
{
    return w->gram + ((size_t)kind * w->H + (size_t)h) * w->g2;
}

/* The square root of Gram matrix kind of head (layer * H + h) of the model: (dh, dh) */
static float *root_at(const comp_run *w, int kind, int head)
{
    return w->root + ((size_t)kind * w->N + (size_t)head) * w->g2;
}

/* The progress steps: each layer's Grams, each pair of layers, the copying scores */
static void comp_progress(const comp_run *w, int done)
{
    if (w->progress)
        w->progress(w->user, "composition", done, w->L + w->L * (w->L - 1) / 2 + 1);
}

/* Allocates w's scratch for model m: 0, or -1 with whatever was allocated left for
 * comp_free. */
static int comp_alloc(comp_run *w, const hs_model *m)
{
    const hs_model_config *c = &m->cfg;
    w->m = m;
    w->L = c->n_layer;
    w->H = c->n_head;
    w->d = c->d_model;
    w->dh = c->d_head;
    w->N = w->L * w->H;
    w->A = hs_model_attn_width(c);
    w->dd = (size_t)w->d * w->d;
    w->da = (size_t)w->d * w->A;
    w->g2 = (size_t)w->dh * w->dh;
    size_t da = w->da, g2 = w->g2;
    w->gram = malloc(4 * (size_t)w->H * g2 * sizeof *w->gram);
    w->root = malloc(4 * (size_t)w->N * g2 * sizeof *w->root);
    w->wo = malloc(da * sizeof *w->wo);
    w->rd = malloc(da * sizeof *w->rd);
    w->mm = malloc(w->dd * sizeof *w->mm);
    w->tt = malloc(da * sizeof *w->tt);
    w->rf = malloc(da * sizeof *w->rf);
    w->yf = malloc(3 * da * sizeof *w->yf);
    w->xf = malloc(da * sizeof *w->xf);
    w->pf = malloc(3 * (size_t)w->A * w->A * sizeof *w->pf);
    w->cols = malloc(3 * (size_t)w->A * sizeof *w->cols);
    int ok = w->gram && w->root && w->wo && w->rd && w->mm && w->tt && w->rf && w->yf && w->xf &&
             w->pf && w->cols;
    return ok ? 0 : -1;
}

/* Frees w's scratch (comp_alloc), allocated or not */
static void comp_free(comp_run *w)
{
    void *all[] = {w->gram, w->root, w->wo, w->rd, w->mm, w->tt, w->rf, w->yf, w->xf, w->pf,
                   w->cols};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

/* Points r's arrays into its one allocation (q, k, v: (N, N); copying, ov_norm, qk_norm:
 * (N)) and marks every composition score NaN until it is computed. */
static void result_init(hs_composition *r, int L, int H)
{
    int N = L * H;
    size_t nn = (size_t)N * N;
    r->n_layer = L;
    r->n_head = H;
    r->n_heads = N;
    r->q = (double *)(r + 1);
    r->k = r->q + nn;
    r->v = r->k + nn;
    r->copying = r->v + nn;
    r->ov_norm = r->copying + N;
    r->qk_norm = r->ov_norm + N;
    for (size_t i = 0; i < 3 * nn; i++)
        r->q[i] = NAN;
}

/* Layer l's four Gram matrices per head (w->gram), its heads' OV and QK norms (r->ov_norm,
 * r->qk_norm) and the square roots of the Grams (w->root), W_Q, W_K, W_V and W_O read
 * through the weight cache. */
static hs_status layer_grams(comp_run *w, hs_composition *r, int l, hs_error *err)
{
    int H = w->H, d = w->d, dh = w->dh, A = w->A;
    hs_layer ly;
    hs_status st;
    if ((st = hs_layer_get_units(w->m, l, UNITS_QKV_O, &ly, err)))
        return st;
    for (int p = 0; p < 3; p++) {
        reader(w->m, &ly, w->cols + (size_t)p * A, w->rd, NULL);
#pragma omp parallel for
        for (int h = 0; h < H; h++) /* X^T X over head h's columns */
            small_gemm(1, 0, dh, dh, d, w->rd + h * dh, A, w->rd + h * dh, A, gram_at(w, p, h),
                       dh);
    }
    widen(ly.w_o, w->wo, w->da);
    hs_layer_put_units(w->m, l, UNITS_QKV_O);
#pragma omp parallel for
    for (int h = 0; h < H; h++) /* Go = O O^T: rows h*dh.. of W_O */
        small_gemm(0, 1, dh, dh, d, w->wo + (size_t)h * dh * d, d, w->wo + (size_t)h * dh * d, d,
                   gram_at(w, 3, h), dh);
    for (int h = 0; h < H; h++) {
        int a = l * H + h;
        r->ov_norm[a] = sqrt(fmax(0.0, trace_prod(gram_at(w, 2, h), gram_at(w, 3, h), dh)));
        r->qk_norm[a] = sqrt(fmax(0.0, trace_prod(gram_at(w, 0, h), gram_at(w, 1, h), dh)));
    }
    if (!all_finite(w->gram, 4 * (size_t)H * w->g2))
        return hs_fail(err, HS_E_VALUE, "composition: layer %d's Gram matrices are not "
                       "finite (W_Q, W_K, W_V or W_O hold an infinity or a NaN)", l);
    int info = 0;
#pragma omp parallel for schedule(dynamic) reduction(| : info)
    for (int t = 0; t < 4 * H; t++) { /* the four Grams of every head of the layer */
        int kind = t / H, h = t % H;
        double *work = malloc((36 + (size_t)dh) * (size_t)dh * sizeof *work);
        info |= work ? gram_root(gram_at(w, kind, h), dh, root_at(w, kind, l * H + h), work) : -1;
        free(work);
    }
    if (info)
        return info < 0 ? hs_fail(err, HS_E_NOMEM, "composition: out of memory")
                        : hs_fail(err, HS_E_VALUE, "composition: the eigenvalue solver failed "
                                  "on layer %d's Gram matrices (info %d)", l, info);
    return HS_OK;
}

/* The reading layer lb's columns R_b F_b^T of all three kinds, w->yf (d, 3A): Q with Gk's
 * root, K with Gq's, V with Go's, in float. */
static hs_status far_columns(comp_run *w, int lb, hs_error *err)
{
    static const int far_kind[3] = {1, 0, 3};
    int H = w->H, d = w->d, dh = w->dh, A = w->A;
    size_t d3 = 3 * (size_t)A;
    hs_layer lr;
    hs_status st;
    if ((st = hs_layer_get_units(w->m, lb, 1u << HS_WU_QKV, &lr, err)))
        return st;
    for (int mode = 0; mode < 3; mode++) {
        reader(w->m, &lr, w->cols + (size_t)mode * A, NULL, w->rf);
#pragma omp parallel for schedule(static)
        for (int hb = 0; hb < H; hb++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d, dh, dh, 1.0f,
                        w->rf + (size_t)hb * dh, A, root_at(w, far_kind[mode], lb * H + hb), dh,
                        0.0f, w->yf + (size_t)mode * A + (size_t)hb * dh, (int)d3);
    }
    hs_layer_put_units(w->m, lb, 1u << HS_WU_QKV);
    return HS_OK;
}

/* The writing layer la's rows Fv_a O_a, w->xf (A, d), in float. */
static hs_status near_rows(comp_run *w, int la, hs_error *err)
{
    int H = w->H, d = w->d, dh = w->dh;
    hs_layer ly;
    hs_status st;
    if ((st = hs_layer_get_units(w->m, la, 1u << HS_WU_O, &ly, err)))
        return st;
#pragma omp parallel for schedule(static)
    for (int ha = 0; ha < H; ha++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, dh, d, dh, 1.0f,
                    root_at(w, 2, la * H + ha), dh, ly.w_o + (size_t)ha * dh * d, d, 0.0f,
                    w->xf + (size_t)ha * dh * d, d);
    hs_layer_put_units(w->m, la, 1u << HS_WU_O);
    return HS_OK;
}

/* The composition scores of every head of layer la on every head of layer lb (r->q, r->k,
 * r->v at (la H + ha, lb H + hb)): the rows w->xf times the columns w->yf, w->pf (A, 3A), in
 * float (its rounding, ~1e-7 relative, is far below what the scores are read at); every
 * (dh, dh) block's sum of squares in double, over the norms of the two heads. */
static void pair_scores(comp_run *w, hs_composition *r, int la, int lb)
{
    int H = w->H, d = w->d, dh = w->dh, A = w->A, N = w->N;
    size_t d3 = 3 * (size_t)A;
    const float *pf = w->pf;
    hs_sgemm_fixed(0, 0, A, (int)d3, d, w->xf, d, w->yf, (int)d3, w->pf, (int)d3);
#pragma omp parallel for collapse(2) schedule(static)
    for (int mode = 0; mode < 3; mode++)
        for (int ha = 0; ha < H; ha++)
            for (int hb = 0; hb < H; hb++) {
                double sum = 0;
                for (int i = ha * dh; i < (ha + 1) * dh; i++) {
                    const float *row = pf + (size_t)i * d3 + (size_t)mode * A + (size_t)hb * dh;
                    for (int j = 0; j < dh; j++)
                        sum += (double)row[j] * (double)row[j];
                }
                int a = la * H + ha, b = lb * H + hb;
                double *dst = mode == 0 ? r->q : mode == 1 ? r->k : r->v;
                double nb = mode == 2 ? r->ov_norm[b] : r->qk_norm[b];
                double den = r->ov_norm[a] * nb;
                dst[(size_t)a * N + b] = den > 0 ? sqrt(sum) / den : NAN;
            }
}

/* The composition scores of every pair of layers la < lb: the reading layer's columns built
 * once, then each earlier layer's rows times them. */
static hs_status all_pairs(comp_run *w, hs_composition *r, hs_error *err)
{
    int L = w->L;
    hs_status st;
    for (int lb = 1; lb < L; lb++) {
        if ((st = far_columns(w, lb, err)))
            return st;
        for (int la = 0; la < lb; la++) {
            if ((st = near_rows(w, la, err)))
                return st;
            pair_scores(w, r, la, lb);
            comp_progress(w, L + lb * (lb - 1) / 2 + la + 1);
        }
    }
    return HS_OK;
}

/* The copying scores' token circuit, w->mm (d, d): G = diag(ln_f) W_U W_E = diag(ln_f)
 * dec^T wte, which must be finite. */
static hs_status token_circuit(comp_run *w, hs_error *err)
{
    int d = w->d;
    hs_status st;
    if ((st = hs_composition_gram(w->m, HS_GRAM_CHUNK, w->mm, err)))
        return st;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++)
            w->mm[(size_t)i * d + j] *= (double)w->m->lnf_w[i];
    if (!all_finite(w->mm, w->dd)) /* float's W_U W_E overflowed (embeddings near 1e+36) */
        return hs_fail(err, HS_E_VALUE, "composition: the token circuit diag(ln_f) W_U W_E of "
                       "the copying scores is not finite (the embedding or unembedding "
                       "weights are too large for float: their products overflow)");
    return HS_OK;
}

/* The copying scores of layer l's heads (r->copying): the eigenvalues of O_h G V_h with G
 * the token circuit (w->mm), from LAPACK's dgeev; its scratch per head cm (H, dh, dh), wr
 * (H, 2 dh), work (H, lwork). Or's the solvers' infos into *info, 1 << 30 for a matrix that
 * is not finite. */
static hs_status copying_layer(comp_run *w, hs_composition *r, int l, double *cm, double *wr,
                               double *work, int lwork, int *info_out, hs_error *err)
{
    int H = w->H, d = w->d, dh = w->dh, A = w->A, n = dh, info = 0;
    size_t g2 = w->g2;
    hs_layer ly;
    hs_status st;
    if ((st = hs_layer_get_units(w->m, l, UNITS_QKV_O, &ly, err)))
        return st;
    widen(ly.w_o, w->wo, w->da);
    reader(w->m, &ly, w->cols + 2 * (size_t)A, w->rd, NULL);
    hs_layer_put_units(w->m, l, UNITS_QKV_O);
    /* T = W_O G: (A, d), rows h*dh.. are O_h G */
    hs_dgemm_fixed(0, 0, A, d, d, w->wo, d, w->mm, d, w->tt, d);
#pragma omp parallel for reduction(| : info)
    for (int h = 0; h < H; h++) {
        /* cm = O_h G V_h, row-major; dgeev reads its transpose, which has the
           same eigenvalues */
        double *ch = cm + (size_t)h * g2, *wh = wr + (size_t)h * 2 * dh;
        int hi = 0;
        small_gemm(0, 0, dh, dh, d, w->tt + (size_t)h * dh * d, d, w->rd + (size_t)h * dh, A, ch,
                   dh);
        if (!all_finite(ch, g2)) {
            info |= 1 << 30; /* named by copying_scores, before LAPACK sees it */
            continue;
        }
        dgeev_("N", "N", &n, ch, &n, wh, wh + dh, NULL, &n, NULL, &n,
               work + (size_t)h * lwork, &lwork, &hi);
        double sum = 0, mag = 0;
        for (int i = 0; i < dh; i++) {
            sum += wh[i];
            mag += hypot(wh[i], wh[dh + i]);
        }
        r->copying[l * H + h] = mag > 0 ? sum / mag : NAN;
        info |= hi;
    }
    *info_out |= info;
    return HS_OK;
}

/* copying: every head's copying score (r->copying), the eigenvalues of O_a G V_a with
 * G = diag(ln_f) W_U W_E = diag(ln_f) dec^T wte */
static hs_status copying_scores(comp_run *w, hs_composition *r, hs_error *err)
{
    int H = w->H, dh = w->dh, lwork = 8 * dh, info = 0, bad_layer = -1;
    hs_status st = HS_OK;
    double *cm = malloc((size_t)H * w->g2 * sizeof *cm);
    double *wr = malloc((size_t)H * 2 * (size_t)dh * sizeof *wr);
    double *work = malloc((size_t)H * (size_t)lwork * sizeof *work);
    if (!cm || !wr || !work)
        st = hs_fail(err, HS_E_NOMEM, "composition: out of memory");
    else
        st = token_circuit(w, err);
    for (int l = 0; !st && l < w->L && !info; l++) {
        if ((st = copying_layer(w, r, l, cm, wr, work, lwork, &info, err)))
            break;
        if (info & 1 << 30)
            bad_layer = l;
    }
    free(cm);
    free(wr);
    free(work);
    if (st)
        return st;
    if (info & 1 << 30)
        return hs_fail(err, HS_E_VALUE, "composition: layer %d's copying matrices O G V are "
                       "not finite (its W_O or W_V times the token circuit overflows)",
                       bad_layer);
    if (info)
        return hs_fail(err, HS_E_VALUE, "composition: the eigenvalue solver failed (info %d)",
                       info);
    return HS_OK;
}

hs_status hs_composition_run(const hs_model *m,
                             void (*progress)(void *user, const char *what, int done, int total),
                             void *user, hs_composition **out, hs_error *err)
{
    *out = NULL;
    const hs_model_config *c = &m->cfg;
    if (!hs_composition_defined(c))
        return hs_composition_norms_undefined(c)
                   ? hs_fail(err, HS_E_UNSUPPORTED, "composition scores: architecture '%s': %s",
                             c->arch->name, hs_composition_norms_undefined(c))
                   : hs_fail(err, HS_E_UNSUPPORTED, "composition scores are defined for "
                             "pre-norm decoders; %s renormalises the residual stream after "
                             "every sublayer", c->arch->name);
    if (!m->has_weights)
        return hs_fail(err, HS_E_ARG, "composition: the model was opened without weights");
    hs_status st = HS_OK;
    int L = c->n_layer, H = c->n_head, N = L * H;
    size_t nn = (size_t)N * N;
    size_t total = sizeof(hs_composition) + (3 * nn + 3 * (size_t)N) * sizeof(double);
    hs_composition *r = calloc(1, total);
    comp_run w = {0};
    w.progress = progress;
    w.user = user;
    if (comp_alloc(&w, m) || !r) {
        free(r);
        r = NULL;
        st = hs_fail(err, HS_E_NOMEM, "composition: out of memory for %d heads of d_model %d", N,
                     c->d_model);
        goto done;
    }
    result_init(r, L, H);
    /* every layer's weights through the weight cache (model_internal.h), at most two at once */
    for (int p = 0; p < 3; p++)
        reader_cols(c, p, w.cols + (size_t)p * w.A);
    for (int l = 0; l < L; l++) {
        if ((st = layer_grams(&w, r, l, err)))
            goto fail;
        comp_progress(&w, l + 1);
    }
    if ((st = all_pairs(&w, r, err)) || (st = copying_scores(&w, r, err)))
        goto fail;
    comp_progress(&w, L + L * (L - 1) / 2 + 1);
    goto done;
fail:
    free(r);
    r = NULL;
done:
    comp_free(&w);
    *out = r;
    return st;
}

int hs_composition_strongest(const hs_composition *cp, int kind, int *from, int *to, int max)
{
    const double *s = kind == 0 ? cp->q : kind == 1 ? cp->k : cp->v;
    int N = cp->n_heads, n = 0;
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++) {
            double v = s[(size_t)a * N + b];
            if (!(v == v))
                continue;
            int at = n < max ? n++ : max; /* insertion into a descending list */
            if (at == max && !(v > s[(size_t)from[max - 1] * N + to[max - 1]]))
                continue;
            if (at == max)
                at = max - 1;
            while (at > 0 && v > s[(size_t)from[at - 1] * N + to[at - 1]]) {
                from[at] = from[at - 1];
                to[at] = to[at - 1];
                at--;
            }
            from[at] = a;
            to[at] = b;
        }
    return n;
}
