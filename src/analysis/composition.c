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
#include "model/emb_stored.h"
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

/* g += p over the rows of (d, d) (upper: the blocks on and above the diagonal alone) */
static void add_product(double *g, const float *p, int d, int upper)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < d; i++)
        for (int j = upper ? i : 0; j < d; j++)
            g[(size_t)i * d + j] += (double)p[(size_t)i * d + j];
}

/* g: (d, d) = dec^T wte over the vocabulary (dec: the decoder, (V, d)), the copying
 * circuit's W_U W_E before the final norm's scale, summed over blocks of chunk rows of both
 * tables in their order: each block's product in float (hs_sgemm_fixed, the rows taken from
 * the float32 tables or decoded from the stored ones into a buffer, the same values), added
 * to g in double. No table is converted whole (2.1 GB each at Llama-3-8B's shape), and the
 * bits are the same whichever way the tables are kept. Tied embeddings (dec is wte, GPT-2)
 * give a symmetric G: only the blocks on and above the diagonal are computed, in 256-row
 * bands (each band a product of its own shape, so its bits are fixed by the shape as any
 * other), and mirrored; the one table's blocks are of 2 chunk rows (the two buffers' memory).
 * On 2 cores with 8,192-row blocks: at d 2,048 and 3,072 the bands take 0.7 of the whole
 * product's time, at GPT-2's 768 about as long (64-row bands: 0.8 at 2,048, and at 768
 * from 1 to 3 times as long with 4,096-row blocks, the narrow products cut along K). */
hs_status hs_composition_gram(const hs_model *m, int chunk, double *g, hs_error *err)
{
    int d = m->cfg.d_model, V = m->cfg.vocab_size, tied = hs_model_decoder_is_wte(m);
    const int band = 256;
    size_t dd = (size_t)d * d;
    chunk = tied ? 2 * chunk : chunk;
    chunk = chunk < V ? chunk : V;
    /* p: one block's product (d, d); eb, db: its rows of each table (chunk, d) when stored
     * (pages never touched otherwise) */
    float *p = malloc(dd * sizeof *p), *eb = malloc((size_t)chunk * d * sizeof *eb);
    float *db = tied ? eb : malloc((size_t)chunk * d * sizeof *db);
    if (!p || !eb || !db) {
        free(p);
        free(eb);
        if (db != eb)
            free(db);
        return hs_fail(err, HS_E_NOMEM, "composition: out of memory");
    }
    memset(g, 0, dd * sizeof *g);
    for (int c0 = 0; c0 < V; c0 += chunk) {
        int rows = V - c0 < chunk ? V - c0 : chunk;
        const float *w = hs_model_wte_rows(m, c0, rows, eb);
        const float *dc = tied ? w : hs_model_decoder_rows(m, c0, rows, db);
        if (!tied)
            hs_sgemm_fixed(1, 0, d, d, rows, dc, d, w, d, p, d);
        for (int i0 = 0; tied && i0 < d; i0 += band)
            hs_sgemm_fixed(1, 0, d - i0 < band ? d - i0 : band, d - i0, rows, w + i0, d, w + i0,
                           d, p + (size_t)i0 * d + i0, d);
        add_product(g, p, d, tied);
    }
    for (int i = 0; tied && i < d; i++) /* the lower triangle from the upper */
        for (int j = 0; j < i; j++)
            g[(size_t)i * d + j] = g[(size_t)j * d + i];
    free(p);
    free(eb);
    if (db != eb)
        free(db);
    return HS_OK;
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
    int L = c->n_layer, H = c->n_head, d = c->d_model, dh = c->d_head, N = L * H;
    int A = hs_model_attn_width(c);
    size_t dd = (size_t)d * d, da = (size_t)d * A, g2 = (size_t)dh * dh, nn = (size_t)N * N;
    size_t total = sizeof(hs_composition) + (3 * nn + 3 * (size_t)N) * sizeof(double);
    hs_composition *r = calloc(1, total);
    /* scratch: one layer's Gram matrices Gq, Gk, Gv, Go per head, and every head's square
     * roots of them (float); W_O (A, d) and a reader (d, A) in double, and the copying
     * circuit's G (d, d) and W_O G (A, d); in float a reader (d, A), the three readers times
     * the roots (d, 3A), an earlier layer's rows Fv O (A, d) and their product (A, 3A) */
    double *gram = malloc(4 * (size_t)H * g2 * sizeof *gram);
    float *root = malloc(4 * (size_t)N * g2 * sizeof *root);
    double *wo = malloc(da * sizeof *wo), *rd = malloc(da * sizeof *rd);
    double *mm = malloc(dd * sizeof *mm), *tt = malloc(da * sizeof *tt);
    float *rf = malloc(da * sizeof *rf), *yf = malloc(3 * da * sizeof *yf);
    float *xf = malloc(da * sizeof *xf), *pf = malloc(3 * (size_t)A * A * sizeof *pf);
    int *cols = malloc(3 * (size_t)A * sizeof *cols);
    if (!r || !gram || !root || !wo || !rd || !mm || !tt || !rf || !yf || !xf || !pf ||
        !cols) {
        free(r);
        r = NULL;
        st = hs_fail(err, HS_E_NOMEM, "composition: out of memory for %d heads of d_model %d", N,
                     d);
        goto done;
    }
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
    /* every layer's weights through the weight cache (model_internal.h), at most two at once */
    hs_layer ly, lr;
#define GRAM(kind, h) (gram + ((size_t)(kind) * H + (size_t)(h)) * g2) /* head h of the layer */
#define ROOT(kind, head) (root + ((size_t)(kind) * N + (size_t)(head)) * g2)
    for (int p = 0; p < 3; p++)
        reader_cols(c, p, cols + (size_t)p * A);
    for (int l = 0; l < L; l++) {
        if ((st = hs_layer_get_units(m, l, UNITS_QKV_O, &ly, err)))
            goto fail;
        for (int p = 0; p < 3; p++) {
            reader(m, &ly, cols + (size_t)p * A, rd, NULL);
#pragma omp parallel for
            for (int h = 0; h < H; h++) /* X^T X over head h's columns */
                small_gemm(1, 0, dh, dh, d, rd + h * dh, A, rd + h * dh, A, GRAM(p, h), dh);
        }
        widen(ly.w_o, wo, da);
        hs_layer_put_units(m, l, UNITS_QKV_O);
#pragma omp parallel for
        for (int h = 0; h < H; h++) /* Go = O O^T: rows h*dh.. of W_O */
            small_gemm(0, 1, dh, dh, d, wo + (size_t)h * dh * d, d, wo + (size_t)h * dh * d, d,
                       GRAM(3, h), dh);
        for (int h = 0; h < H; h++) {
            int a = l * H + h;
            r->ov_norm[a] = sqrt(fmax(0.0, trace_prod(GRAM(2, h), GRAM(3, h), dh)));
            r->qk_norm[a] = sqrt(fmax(0.0, trace_prod(GRAM(0, h), GRAM(1, h), dh)));
        }
        if (!all_finite(gram, 4 * (size_t)H * g2)) {
            st = hs_fail(err, HS_E_VALUE, "composition: layer %d's Gram matrices are not "
                         "finite (W_Q, W_K, W_V or W_O hold an infinity or a NaN)", l);
            goto fail;
        }
        int info = 0;
#pragma omp parallel for schedule(dynamic) reduction(| : info)
        for (int t = 0; t < 4 * H; t++) { /* the four Grams of every head of the layer */
            int kind = t / H, h = t % H;
            double *work = malloc((36 + (size_t)dh) * (size_t)dh * sizeof *work);
            info |= work ? gram_root(GRAM(kind, h), dh, ROOT(kind, l * H + h), work) : -1;
            free(work);
        }
        if (info) {
            st = info < 0 ? hs_fail(err, HS_E_NOMEM, "composition: out of memory")
                          : hs_fail(err, HS_E_VALUE, "composition: the eigenvalue solver failed "
                                    "on layer %d's Gram matrices (info %d)", l, info);
            goto fail;
        }
        if (progress) /* steps: each layer's Grams, each pair of layers, the copying scores */
            progress(user, "composition", l + 1, L + L * (L - 1) / 2 + 1);
    }
    /* every pair of layers la < lb: the reading layer's columns R_b F_b^T of all three kinds
       built once (yf: Q with Gk's root, K with Gq's, V with Go's), then each earlier layer's
       rows Fv_a O_a (xf) times them (pf), in float (its rounding, ~1e-7 relative, is far
       below what the scores are read at); every block's sum of squares in double */
    static const int far_kind[3] = {1, 0, 3};
    size_t d3 = 3 * (size_t)A;
    for (int lb = 1; lb < L; lb++) {
        if ((st = hs_layer_get_units(m, lb, 1u << HS_WU_QKV, &lr, err)))
            goto fail;
        for (int mode = 0; mode < 3; mode++) {
            reader(m, &lr, cols + (size_t)mode * A, NULL, rf);
#pragma omp parallel for schedule(static)
            for (int hb = 0; hb < H; hb++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d, dh, dh, 1.0f,
                            rf + (size_t)hb * dh, A, ROOT(far_kind[mode], lb * H + hb), dh, 0.0f,
                            yf + (size_t)mode * A + (size_t)hb * dh, (int)d3);
        }
        hs_layer_put_units(m, lb, 1u << HS_WU_QKV);
        for (int la = 0; la < lb; la++) {
            if ((st = hs_layer_get_units(m, la, 1u << HS_WU_O, &ly, err)))
                goto fail;
#pragma omp parallel for schedule(static)
            for (int ha = 0; ha < H; ha++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, dh, d, dh, 1.0f,
                            ROOT(2, la * H + ha), dh, ly.w_o + (size_t)ha * dh * d, d, 0.0f,
                            xf + (size_t)ha * dh * d, d);
            hs_layer_put_units(m, la, 1u << HS_WU_O);
            hs_sgemm_fixed(0, 0, A, (int)d3, d, xf, d, yf, (int)d3, pf, (int)d3);
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
            if (progress)
                progress(user, "composition", L + lb * (lb - 1) / 2 + la + 1,
                         L + L * (L - 1) / 2 + 1);
        }
    }
    /* copying: eigenvalues of O_a G V_a with G = diag(ln_f) W_U W_E = diag(ln_f) dec^T wte */
    {
        int n = dh, lwork = 8 * dh, info = 0;
        double *cm = malloc((size_t)H * g2 * sizeof *cm);
        double *wr = malloc((size_t)H * 2 * (size_t)dh * sizeof *wr);
        double *work = malloc((size_t)H * (size_t)lwork * sizeof *work);
        if (!cm || !wr || !work || (st = hs_composition_gram(m, HS_GRAM_CHUNK, mm, err))) {
            free(cm);
            free(wr);
            free(work);
            st = st ? st : hs_fail(err, HS_E_NOMEM, "composition: out of memory");
            goto fail;
        }
#pragma omp parallel for schedule(static)
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++)
                mm[(size_t)i * d + j] *= (double)m->lnf_w[i];
        if (!all_finite(mm, dd)) { /* float's W_U W_E overflowed (embeddings near 1e+36) */
            free(cm);
            free(wr);
            free(work);
            st = hs_fail(err, HS_E_VALUE, "composition: the token circuit diag(ln_f) W_U W_E of "
                         "the copying scores is not finite (the embedding or unembedding "
                         "weights are too large for float: their products overflow)");
            goto fail;
        }
        int bad_layer = -1;
        for (int l = 0; l < L && !info; l++) {
            if ((st = hs_layer_get_units(m, l, UNITS_QKV_O, &ly, err)))
                break;
            widen(ly.w_o, wo, da);
            reader(m, &ly, cols + 2 * (size_t)A, rd, NULL);
            hs_layer_put_units(m, l, UNITS_QKV_O);
            /* T = W_O G: (A, d), rows h*dh.. are O_h G */
            hs_dgemm_fixed(0, 0, A, d, d, wo, d, mm, d, tt, d);
#pragma omp parallel for reduction(| : info)
            for (int h = 0; h < H; h++) {
                /* cm = O_h G V_h, row-major; dgeev reads its transpose, which has the
                   same eigenvalues */
                double *ch = cm + (size_t)h * g2, *wh = wr + (size_t)h * 2 * dh;
                int hi = 0;
                small_gemm(0, 0, dh, dh, d, tt + (size_t)h * dh * d, d, rd + (size_t)h * dh, A, ch,
                           dh);
                if (!all_finite(ch, g2)) {
                    info |= 1 << 30; /* named below, before LAPACK sees it */
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
            if (info & 1 << 30)
                bad_layer = l;
        }
        free(cm);
        free(wr);
        free(work);
        if (st)
            goto fail;
        if (info & 1 << 30) {
            st = hs_fail(err, HS_E_VALUE, "composition: layer %d's copying matrices O G V are "
                         "not finite (its W_O or W_V times the token circuit overflows)",
                         bad_layer);
            goto fail;
        }
        if (info) {
            st = hs_fail(err, HS_E_VALUE, "composition: the eigenvalue solver failed (info %d)",
                         info);
            goto fail;
        }
    }
#undef GRAM
    if (progress)
        progress(user, "composition", L + L * (L - 1) / 2 + 1, L + L * (L - 1) / 2 + 1);
    goto done;
fail:
    free(r);
    r = NULL;
done:
    free(gram);
    free(root);
    free(wo);
    free(rd);
    free(mm);
    free(tt);
    free(rf);
    free(yf);
    free(xf);
    free(pf);
    free(cols);
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
