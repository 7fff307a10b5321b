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
#include "analysis/vis.h"
#include "core/core.h"
#include "headscope/analysis.h"

/* Entries of every map in one row block (about 2 MB of floats and 4 MB of doubles). */
#define BLOCK_VALUES ((size_t)1 << 19)
/* Jensen-Shannon: threads when a block has this many (pair, cell) terms. */
#define JS_MIN_PARALLEL ((double)(1 << 20))

typedef struct pw {
    const hs_map_source *src;
    const hs_visibility *vis; /* (N) each map's */
    hs_visibility common;     /* Pearson: the cells every map of src shows */
    int N, n, R;              /* R: rows per block */
    int *all;            /* (N) 0..N-1 */
    float *blk;          /* (N, R, n) */
    double *Z;           /* (N, R * n) */
    double *pl;          /* (N, R) JS: sum_j p ln p of each row of the block */
} pw;

static hs_status read_block(pw *w, int r0, int rows, hs_error *err)
{
    return w->src->rows(w->src->user, w->all, w->N, r0, rows, w->blk, err);
}

/* Z: (N, R*n) gets the entries of the block's rows r0..r0+rows-1, row-major: Pearson
 * (mean given): the cells w->common shows, each minus mean[a]; Frobenius (mean NULL): all
 * n, those map a cannot see as 0. Returns the entries per map. */
static size_t fill_z(pw *w, int r0, int rows, const double *mean)
{
    size_t ldz = (size_t)w->R * (size_t)w->n, cols = 0;
    for (int a = 0; a < w->N; a++) {
        double mu = mean ? mean[a] : 0.0, *z = w->Z + (size_t)a * ldz;
        hs_visibility v = mean ? w->common : w->vis[a];
        size_t c = 0;
        for (int i = 0; i < rows; i++) {
            const float *row = w->blk + ((size_t)a * (size_t)rows + (size_t)i) * (size_t)w->n;
            int lo = hs_vis_lo(v, r0 + i), hi = hs_vis_hi(v, r0 + i, w->n);
            if (!mean)
                for (int j = 0; j < lo; j++)
                    z[c++] = 0;
            for (int j = lo; j < hi; j++)
                z[c++] = (double)row[j] - mu;
            if (!mean)
                for (int j = hi; j < w->n; j++)
                    z[c++] = 0;
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

/* mean: (N) mean of each map over the entries w->common shows (causal: j <= i). */
static hs_status means(pw *w, double *mean, hs_error *err)
{
    int n = w->n;
    size_t m = 0;
    for (int i = 0; i < n; i++)
        m += (size_t)(hs_vis_hi(w->common, i, n) - hs_vis_lo(w->common, i));
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
                int hi = hs_vis_hi(w->common, r0 + i, n);
                for (int j = hs_vis_lo(w->common, r0 + i); j < hi; j++)
                    mean[a] += (double)row[j];
            }
    }
    for (int a = 0; a < w->N; a++)
        mean[a] /= (double)m;
    return HS_OK;
}

/* Jensen-Shannon terms of the block's rows added to the lower triangle of out (row order
 * per pair, so the sums do not depend on the block size or the thread count). Each map's
 * row is a distribution over the keys it sees, 0 elsewhere; a pair's M over the keys either
 * sees (every range holds key i, so their union is one range). */
static void js_block(pw *w, int r0, int rows, double *out)
{
    int N = w->N, n = w->n;
    for (int a = 0; a < N; a++)
        for (int i = 0; i < rows; i++) {
            const float *row = w->blk + ((size_t)a * (size_t)rows + (size_t)i) * (size_t)n;
            int hi = hs_vis_hi(w->vis[a], r0 + i, n);
            double s = 0;
            for (int j = hs_vis_lo(w->vis[a], r0 + i); j < hi; j++) {
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
                int r = r0 + i;
                int alo = hs_vis_lo(w->vis[a], r), ahi = hs_vis_hi(w->vis[a], r, n);
                int blo = hs_vis_lo(w->vis[b], r), bhi = hs_vis_hi(w->vis[b], r, n);
                double mlogm = 0;
                for (int j = alo < blo ? alo : blo, hi = ahi > bhi ? ahi : bhi; j < hi; j++) {
                    double pj = j >= alo && j < ahi ? (double)p[j] : 0.0;
                    double qj = j >= blo && j < bhi ? (double)q[j] : 0.0;
                    double mj = 0.5 * (pj + qj);
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
                    int i = (int)(e / (size_t)w->n), j = (int)(e % (size_t)w->n);
                    double x = hs_vis_sees(w->vis[a], i, j, w->n) ? (double)pair[e] : 0.0;
                    double y = hs_vis_sees(w->vis[b], i, j, w->n) ? (double)pair[per + e] : 0.0;
                    double t = x - y;
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

/* One pass over the maps of src: frob (or NULL) with each map's visibility vis: (N), Pearson
 * over the cells common shows into pearson (or NULL), Jensen-Shannon with vis into js (or
 * NULL); vis may be NULL when only pearson is asked for. */
static hs_status pass(const hs_map_source *src, const hs_visibility *vis, hs_visibility common,
                      double *frob, double *pearson, double *js, hs_error *err)
{
    int N = src->n_maps, n = src->n;
    size_t r = BLOCK_VALUES / ((size_t)N * (size_t)n);
    pw w = {src, vis, common, N, n, r < 1 ? 1 : r > (size_t)n ? n : (int)r, NULL, NULL, NULL,
            NULL};
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
        if (pearson)
            pearson[k] = 0;
        if (js)
            js[k] = 0;
    }
    if (pearson && (st = means(&w, mean, err)))
        goto done;
    for (int r0 = 0; r0 < n; r0 += w.R) {
        int rows = n - r0 < w.R ? n - r0 : w.R;
        if ((st = read_block(&w, r0, rows, err)))
            goto done;
        if (frob)
            gram_add(&w, fill_z(&w, r0, rows, NULL), frob);
        if (pearson)
            gram_add(&w, fill_z(&w, r0, rows, mean), pearson);
        if (js)
            js_block(&w, r0, rows, js);
    }
    if (frob && (st = frob_finish(&w, frob, err)))
        goto done;
    if (pearson)
        pearson_finish(N, pearson);
    if (js)
        js_finish(N, n, js);
done:
    free(mean);
    free(w.pl);
    free(w.Z);
    free(w.blk);
    free(w.all);
    return st;
}

/* The maps member[0..count-1] of a source, as a source of count maps. */
typedef struct sub_maps {
    const hs_map_source *src;
    const int *member;
    int *idx; /* (count) scratch */
} sub_maps;

static hs_status sub_rows(void *user, const int *idx, int count, int r0, int rows, float *out,
                          hs_error *err)
{
    sub_maps *s = user;
    for (int c = 0; c < count; c++)
        s->idx[c] = s->member[idx[c]];
    return s->src->rows(s->src->user, s->idx, count, r0, rows, out, err);
}

/* Pearson of maps of different visibilities: cls: (N) each map's class (the first map with
 * its visibility); for each two classes g <= h, one pass over their maps on the cells both
 * show, whose entries for a map of g and one of h go to sim. */
static hs_status pearson_mixed(const hs_map_source *src, const hs_visibility *vis,
                               const int *cls, double *sim, hs_error *err)
{
    int N = src->n_maps;
    hs_status st = HS_OK;
    int *member = malloc((size_t)N * sizeof *member), *idx = malloc((size_t)N * sizeof *idx);
    double *part = malloc((size_t)N * (size_t)N * sizeof *part);
    if (!member || !idx || !part)
        st = hs_fail(err, HS_E_NOMEM, "out of memory for %d maps", N);
    for (int g = 0; g < N && !st; g++) {
        if (cls[g] != g)
            continue;
        for (int h = g; h < N && !st; h++) {
            if (cls[h] != h)
                continue;
            int M = 0;
            for (int a = 0; a < N; a++)
                if (cls[a] == g || cls[a] == h)
                    member[M++] = a;
            sub_maps sm = {src, member, idx};
            hs_map_source sub = {sub_rows, &sm, M, src->n};
            if ((st = pass(&sub, NULL, hs_vis_intersect(vis[g], vis[h]), NULL, part, NULL, err)))
                break;
            for (int x = 0; x < M; x++)
                for (int y = 0; y < M; y++) {
                    int a = member[x], b = member[y];
                    if ((cls[a] == g && cls[b] == h) || (cls[a] == h && cls[b] == g))
                        sim[(size_t)a * N + b] = part[(size_t)x * M + y];
                }
        }
    }
    free(part);
    free(idx);
    free(member);
    return st;
}

hs_status hs_pairwise_compute(const hs_map_source *src, const hs_visibility *vis, double *frob,
                              hs_sim_method method, double *sim, hs_error *err)
{
    int N = src->n_maps, n = src->n;
    if (N < 1 || n < 1)
        return hs_fail(err, HS_E_ARG, "%d maps of %d tokens", N, n);
    if (sim && method != HS_SIM_PEARSON && method != HS_SIM_JS)
        return hs_fail(err, HS_E_ARG, "unknown method %d", (int)method);
    hs_status st = hs_vis_args(vis, N, N, "pairwise", err);
    if (st)
        return st;
    int pearson = sim && method == HS_SIM_PEARSON, js = sim && method == HS_SIM_JS;
    int *cls = malloc((size_t)N * sizeof *cls), classes = 0;
    if (!cls)
        return hs_fail(err, HS_E_NOMEM, "out of memory for %d maps", N);
    for (int a = 0; a < N; a++) {
        cls[a] = a;
        for (int b = 0; b < a && cls[a] == a; b++)
            if (cls[b] == b && hs_vis_same(vis[a], vis[b]))
                cls[a] = b;
        classes += cls[a] == a;
    }
    if (classes == 1) /* one pass on the cells every map shows */
        st = pass(src, vis, vis[0], frob, pearson ? sim : NULL, js ? sim : NULL, err);
    else {
        st = frob || js ? pass(src, vis, vis[0], frob, NULL, js ? sim : NULL, err) : HS_OK;
        if (!st && pearson)
            st = pearson_mixed(src, vis, cls, sim, err);
    }
    free(cls);
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

/* A visibility per map: (n_maps) from vis: (n_vis), one for all or one per group of per maps
 * (a layer's heads); NULL when out of memory. */
static hs_visibility *per_map(const hs_visibility *vis, int n_vis, int n_maps, int per)
{
    hs_visibility *v = malloc((size_t)n_maps * sizeof *v);
    for (int k = 0; v && k < n_maps; k++)
        v[k] = hs_vis_at(vis, n_vis, k / per);
    return v;
}

hs_status hs_diversity_compute(const float *attn, int n_layer, int n_head, int n,
                               const hs_visibility *vis, int n_vis, double *layer,
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
    if ((st = hs_vis_args(vis, n_vis, n_layer, "diversity", err)))
        return st;
    hs_visibility *each = per_map(vis, n_vis, N, n_head);
    if (!each)
        return hs_fail(err, HS_E_NOMEM, "diversity: out of memory");
    mem_maps mm = {attn, n};
    hs_map_source src = {mem_rows, &mm, N, n};
    if (pairwise) {
        st = hs_pairwise_compute(&src, each, pairwise, HS_SIM_PEARSON, NULL, err);
        if (!st && layer)
            hs_diversity_layers(pairwise, n_layer, n_head, layer);
    } else {
        double *own = malloc((size_t)n_head * (size_t)n_head * sizeof *own);
        if (!own)
            st = hs_fail(err, HS_E_NOMEM, "out of memory");
        src.n_maps = n_head;
        for (int l = 0; l < n_layer && !st; l++) {
            mm.maps = attn + (size_t)l * (size_t)n_head * (size_t)n * (size_t)n;
            st = hs_pairwise_compute(&src, each + (size_t)l * (size_t)n_head, own,
                                     HS_SIM_PEARSON, NULL, err);
            if (!st)
                hs_diversity_layers(own, 1, n_head, &layer[l]);
        }
        free(own);
    }
    free(each);
    if (st)
        hs_error_prefix(err, "diversity");
    return st;
}

hs_status hs_similarity_compute(const float *maps, int n_maps, int n, const hs_visibility *vis,
                                int n_vis, hs_sim_method method, double *out, hs_error *err)
{
    hs_status st = hs_maps_check(maps, n_maps, n, err);
    if (st) {
        hs_error_prefix(err, "similarity");
        return st;
    }
    if (!out)
        return hs_fail(err, HS_E_ARG, "similarity: NULL output");
    if ((st = hs_vis_args(vis, n_vis, n_maps, "similarity", err)))
        return st;
    hs_visibility *each = per_map(vis, n_vis, n_maps, 1);
    if (!each)
        return hs_fail(err, HS_E_NOMEM, "similarity: out of memory");
    mem_maps mm = {maps, n};
    hs_map_source src = {mem_rows, &mm, n_maps, n};
    st = hs_pairwise_compute(&src, each, NULL, method, out, err);
    free(each);
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
