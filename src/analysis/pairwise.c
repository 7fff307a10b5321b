/* Pairwise head comparisons: Frobenius distances and per-layer diversity, Pearson
 * similarity, Jensen-Shannon divergence. Maps are read in blocks of rows of every map
 * (hs_map_source), so they may live in an array or in the map store's file, and memory
 * beyond the outputs is one block. The Frobenius and Pearson matrices are Gram matrices
 * accumulated in double block by block (BLAS dsyrk); Pearson's means come from a first
 * pass, so the Gram matrix is of centred entries. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "analysis/pairwise.h"
#include "core/core.h"
#include "headscope/analysis.h"

/* Entries of every map in one row block (about 2 MB of floats and 4 MB of doubles). */
#define BLOCK_VALUES ((size_t)1 << 19)
/* Jensen-Shannon: threads when a block has this many (pair, cell) terms. */
#define JS_MIN_PARALLEL ((double)(1 << 20))

typedef struct pw {
    const hs_map_source *src;
    int N, n, causal, R; /* R: rows per block */
    int *all;            /* (N) 0..N-1 */
    float *blk;          /* (N, R, n) */
    double *Z;           /* (N, R * n) */
    double *pl;          /* (N, R) JS: sum_j p ln p of each row of the block */
} pw;

static hs_status read_block(pw *w, int r0, int rows, hs_error *err)
{
    return w->src->rows(w->src->user, w->all, w->N, r0, rows, w->blk, err);
}

/* Z: (N, R*n) gets the entries of the block's rows r0..r0+rows-1, row-major, the visible
 * ones (j <= i) when lower_only, else all, each minus mean[a] (mean NULL: 0). Returns the
 * entries per map. */
static size_t fill_z(pw *w, int r0, int rows, int lower_only, const double *mean)
{
    size_t ldz = (size_t)w->R * (size_t)w->n, cols = 0;
    for (int a = 0; a < w->N; a++) {
        double mu = mean ? mean[a] : 0.0, *z = w->Z + (size_t)a * ldz;
        size_t c = 0;
        for (int i = 0; i < rows; i++) {
            const float *row = w->blk + ((size_t)a * (size_t)rows + (size_t)i) * (size_t)w->n;
            int nk = lower_only ? r0 + i + 1 : w->n;
            for (int j = 0; j < nk; j++)
                z[c++] = (double)row[j] - mu;
        }
        cols = c;
    }
    return cols;
}

static void gram_add(pw *w, size_t cols, double *G)
{
    if (cols > 0)
        cblas_dsyrk(CblasRowMajor, CblasLower, CblasNoTrans, w->N, (int)cols, 1.0, w->Z,
                    w->R * w->n, 1.0, G, w->N);
}

/* mean: (N) mean of each map over its visible entries (causal: j <= i). */
static hs_status means(pw *w, double *mean, hs_error *err)
{
    int n = w->n;
    for (int a = 0; a < w->N; a++)
        mean[a] = 0;
    for (int r0 = 0; r0 < n; r0 += w->R) {
        int rows = n - r0 < w->R ? n - r0 : w->R;
        hs_status st = read_block(w, r0, rows, err);
        if (st)
            return st;
        for (int a = 0; a < w->N; a++)
            for (int i = 0; i < rows; i++) {
                const float *row = w->blk + ((size_t)a * (size_t)rows + (size_t)i) * (size_t)n;
                int nk = w->causal ? r0 + i + 1 : n;
                for (int j = 0; j < nk; j++)
                    mean[a] += (double)row[j];
            }
    }
    size_t m = w->causal ? (size_t)n * ((size_t)n + 1) / 2 : (size_t)n * (size_t)n;
    for (int a = 0; a < w->N; a++)
        mean[a] /= (double)m;
    return HS_OK;
}

/* Jensen-Shannon terms of the block's rows added to the lower triangle of out (row order
 * per pair, so the sums do not depend on the block size or the thread count). */
static void js_block(pw *w, int r0, int rows, double *out)
{
    int N = w->N, n = w->n;
    for (int a = 0; a < N; a++)
        for (int i = 0; i < rows; i++) {
            const float *row = w->blk + ((size_t)a * (size_t)rows + (size_t)i) * (size_t)n;
            int nk = w->causal ? r0 + i + 1 : n;
            double s = 0;
            for (int j = 0; j < nk; j++) {
                double p = (double)row[j];
                if (p > 0)
                    s += p * log(p);
            }
            w->pl[(size_t)a * (size_t)w->R + (size_t)i] = s;
        }
    double work = 0.5 * (double)N * (double)(N - 1) * (double)rows * (double)n;
#pragma omp parallel for schedule(dynamic) if (work >= JS_MIN_PARALLEL)
    for (int a = 1; a < N; a++) {
        for (int b = 0; b < a; b++) {
            double total = out[(size_t)a * N + b];
            for (int i = 0; i < rows; i++) {
                size_t off = (size_t)i * (size_t)n;
                const float *p = w->blk + (size_t)a * (size_t)rows * (size_t)n + off;
                const float *q = w->blk + (size_t)b * (size_t)rows * (size_t)n + off;
                int nk = w->causal ? r0 + i + 1 : n;
                double mlogm = 0;
                for (int j = 0; j < nk; j++) {
                    double mj = 0.5 * ((double)p[j] + (double)q[j]);
                    if (mj > 0)
                        mlogm += mj * log(mj);
                }
                /* JS = 1/2 KL(P||M) + 1/2 KL(Q||M) = 1/2 sum p ln p + 1/2 sum q ln q - sum m ln m */
                total += 0.5 * (w->pl[(size_t)a * (size_t)w->R + (size_t)i] +
                                w->pl[(size_t)b * (size_t)w->R + (size_t)i]) -
                         mlogm;
            }
            out[(size_t)a * N + b] = total;
        }
    }
}

/* Frobenius distances from the Gram matrix in the lower triangle of D; near-identical
 * pairs, where the Gram form cancels, are summed directly from the two maps. */
static hs_status frob_finish(pw *w, double *D, hs_error *err)
{
    int N = w->N;
    size_t per = (size_t)w->n * (size_t)w->n;
    float *pair = NULL;
    for (int a = 0; a < N; a++) {
        double gaa = D[(size_t)a * N + a];
        for (int b = 0; b < a; b++) {
            double gbb = D[(size_t)b * N + b];
            double d2 = gaa + gbb - 2.0 * D[(size_t)a * N + b];
            if (d2 <= 1e-6 * (gaa + gbb)) {
                int ab[2] = {a, b};
                if (!pair && !(pair = malloc(2 * per * sizeof *pair)))
                    return hs_fail(err, HS_E_NOMEM, "out of memory for two maps");
                hs_status st = w->src->rows(w->src->user, ab, 2, 0, w->n, pair, err);
                if (st) {
                    free(pair);
                    return st;
                }
                d2 = 0;
                for (size_t e = 0; e < per; e++) {
                    double t = (double)pair[e] - (double)pair[per + e];
                    d2 += t * t;
                }
            }
            D[(size_t)a * N + b] = sqrt(d2 > 0 ? d2 : 0);
        }
    }
    free(pair);
    for (int a = 0; a < N; a++) {
        D[(size_t)a * N + a] = 0;
        for (int b = 0; b < a; b++)
            D[(size_t)b * N + a] = D[(size_t)a * N + b];
    }
    return HS_OK;
}

/* Pearson r from the centred Gram matrix in the lower triangle of out. */
static void pearson_finish(int N, double *out)
{
    for (int a = 0; a < N; a++) {
        double va = out[(size_t)a * N + a];
        for (int b = 0; b < a; b++) {
            double vb = out[(size_t)b * N + b];
            double r = 0; /* zero variance on either side: no linear relation */
            if (va > 0 && vb > 0) {
                r = out[(size_t)a * N + b] / sqrt(va * vb);
                r = r > 1 ? 1 : r < -1 ? -1 : r;
            }
            out[(size_t)a * N + b] = r;
            out[(size_t)b * N + a] = r;
        }
    }
    for (int a = 0; a < N; a++)
        out[(size_t)a * N + a] = 1;
}

static void js_finish(int N, int n, double *out)
{
    for (int a = 0; a < N; a++) {
        out[(size_t)a * N + a] = 0;
        for (int b = 0; b < a; b++) {
            double js = out[(size_t)a * N + b] / n;
            if (js < 0) /* rounding when the rows are (nearly) equal */
                js = 0;
            out[(size_t)a * N + b] = js;
            out[(size_t)b * N + a] = js;
        }
    }
}

hs_status hs_pairwise_compute(const hs_map_source *src, int causal, double *frob,
                              hs_sim_method method, double *sim, hs_error *err)
{
    int N = src->n_maps, n = src->n;
    if (N < 1 || n < 1)
        return hs_fail(err, HS_E_ARG, "%d maps of %d tokens", N, n);
    if (sim && method != HS_SIM_PEARSON && method != HS_SIM_JS)
        return hs_fail(err, HS_E_ARG, "unknown method %d", (int)method);
    int pearson = sim && method == HS_SIM_PEARSON, js = sim && method == HS_SIM_JS;
    size_t r = BLOCK_VALUES / ((size_t)N * (size_t)n);
    pw w = {src, N, n, causal, r < 1 ? 1 : r > (size_t)n ? n : (int)r, NULL, NULL, NULL, NULL};
    size_t vals = (size_t)N * (size_t)w.R * (size_t)n;
    double *mean = NULL;
    hs_status st = HS_OK;
    w.all = malloc((size_t)N * sizeof *w.all);
    w.blk = malloc(vals * sizeof *w.blk);
    w.Z = frob || pearson ? malloc(vals * sizeof *w.Z) : NULL;
    w.pl = js ? malloc((size_t)N * (size_t)w.R * sizeof *w.pl) : NULL;
    mean = pearson ? malloc((size_t)N * sizeof *mean) : NULL;
    if (!w.all || !w.blk || ((frob || pearson) && !w.Z) || (js && !w.pl) || (pearson && !mean)) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory for a block of %d x %d rows", N, w.R);
        goto done;
    }
    for (int a = 0; a < N; a++)
        w.all[a] = a;
    for (size_t k = 0; k < (size_t)N * (size_t)N; k++) {
        if (frob)
            frob[k] = 0;
        if (sim)
            sim[k] = 0;
    }
    if (pearson && (st = means(&w, mean, err)))
        goto done;
    for (int r0 = 0; r0 < n; r0 += w.R) {
        int rows = n - r0 < w.R ? n - r0 : w.R;
        if ((st = read_block(&w, r0, rows, err)))
            goto done;
        if (frob)
            gram_add(&w, fill_z(&w, r0, rows, 0, NULL), frob);
        if (pearson)
            gram_add(&w, fill_z(&w, r0, rows, causal, mean), sim);
        if (js)
            js_block(&w, r0, rows, sim);
    }
    if (frob && (st = frob_finish(&w, frob, err)))
        goto done;
    if (pearson)
        pearson_finish(N, sim);
    if (js)
        js_finish(N, n, sim);
done:
    free(mean);
    free(w.pl);
    free(w.Z);
    free(w.blk);
    free(w.all);
    return st;
}

void hs_diversity_layers(const double *pairwise, int n_layer, int n_head, double *layer)
{
    size_t N = (size_t)n_layer * (size_t)n_head;
    for (int l = 0; l < n_layer; l++) {
        double s = 0;
        for (int a = 0; a < n_head; a++)
            for (int b = 0; b < n_head; b++)
                s += pairwise[(size_t)(l * n_head + a) * N + (size_t)(l * n_head + b)];
        layer[l] = s / ((double)n_head * (double)n_head);
    }
}

/* ---- maps in an array -------------------------------------------------------------- */

typedef struct mem_maps {
    const float *maps; /* (n_maps, n, n) */
    int n;
} mem_maps;

static hs_status mem_rows(void *user, const int *idx, int count, int r0, int rows, float *out,
                          hs_error *err)
{
    (void)err;
    const mem_maps *mm = user;
    size_t n = (size_t)mm->n, len = (size_t)rows * n;
    for (int c = 0; c < count; c++)
        memcpy(out + (size_t)c * len, mm->maps + (size_t)idx[c] * n * n + (size_t)r0 * n,
               len * sizeof *out);
    return HS_OK;
}

hs_status hs_diversity_compute(const float *attn, int n_layer, int n_head, int n, double *layer,
                               double *pairwise, hs_error *err)
{
    if (n_layer < 1 || n_head < 1)
        return hs_fail(err, HS_E_ARG, "diversity: %d layers x %d heads, expected >= 1 each",
                       n_layer, n_head);
    if ((size_t)n_layer * (size_t)n_head > (size_t)INT32_MAX / 2)
        return hs_fail(err, HS_E_ARG, "diversity: %d x %d heads is too many", n_layer, n_head);
    int N = n_layer * n_head;
    hs_status st = hs_maps_check(attn, N, n, err);
    if (st) {
        hs_error_prefix(err, "diversity");
        return st;
    }
    if (!layer && !pairwise)
        return hs_fail(err, HS_E_ARG, "diversity: no output requested");
    mem_maps mm = {attn, n};
    hs_map_source src = {mem_rows, &mm, N, n};
    if (pairwise) {
        st = hs_pairwise_compute(&src, 0, pairwise, HS_SIM_PEARSON, NULL, err);
        if (!st && layer)
            hs_diversity_layers(pairwise, n_layer, n_head, layer);
    } else {
        double *own = malloc((size_t)n_head * (size_t)n_head * sizeof *own);
        if (!own)
            st = hs_fail(err, HS_E_NOMEM, "out of memory");
        src.n_maps = n_head;
        for (int l = 0; l < n_layer && !st; l++) {
            mm.maps = attn + (size_t)l * (size_t)n_head * (size_t)n * (size_t)n;
            st = hs_pairwise_compute(&src, 0, own, HS_SIM_PEARSON, NULL, err);
            if (!st)
                hs_diversity_layers(own, 1, n_head, &layer[l]);
        }
        free(own);
    }
    if (st)
        hs_error_prefix(err, "diversity");
    return st;
}

hs_status hs_similarity_compute(const float *maps, int n_maps, int n, int causal,
                                hs_sim_method method, double *out, hs_error *err)
{
    hs_status st = hs_maps_check(maps, n_maps, n, err);
    if (st) {
        hs_error_prefix(err, "similarity");
        return st;
    }
    if (!out)
        return hs_fail(err, HS_E_ARG, "similarity: NULL output");
    mem_maps mm = {maps, n};
    hs_map_source src = {mem_rows, &mm, n_maps, n};
    st = hs_pairwise_compute(&src, causal, NULL, method, out, err);
    if (st)
        hs_error_prefix(err, "similarity");
    return st;
}

hs_status hs_similarity_distance(const double *sim, int n_maps, hs_sim_method method,
                                 double *dist, hs_error *err)
{
    if (n_maps < 1)
        return hs_fail(err, HS_E_ARG, "similarity distance: n_maps is %d, expected >= 1", n_maps);
    if (!sim || !dist)
        return hs_fail(err, HS_E_ARG, "similarity distance: NULL buffer");
    if (method != HS_SIM_PEARSON && method != HS_SIM_JS)
        return hs_fail(err, HS_E_ARG, "similarity distance: unknown method %d", (int)method);
    size_t N = (size_t)n_maps;
    for (size_t a = 0; a < N; a++)
        for (size_t b = 0; b < N; b++) {
            double s = sim[a * N + b];
            dist[a * N + b] = a == b ? 0.0 : method == HS_SIM_PEARSON ? 1.0 - s : s;
        }
    return HS_OK;
}
