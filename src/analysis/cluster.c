/* Agglomerative clustering with average linkage (UPGMA), SciPy linkage convention,
 * flat clusters at a distance threshold, dendrogram leaf order. */
#include <math.h>
#include <stdlib.h>

#include "core/core.h"
#include "headscope/analysis.h"

#define LINKAGE_MAX_N (1 << 16)

hs_status hs_linkage_build(const double *dist, int n, hs_linkage **out, hs_error *err)
{
    if (!out)
        return hs_fail(err, HS_E_ARG, "linkage: NULL output");
    *out = NULL;
    if (n < 1 || n > LINKAGE_MAX_N)
        return hs_fail(err, HS_E_ARG, "linkage: n is %d, expected 1..%d", n, LINKAGE_MAX_N);
    if (!dist)
        return hs_fail(err, HS_E_ARG, "linkage: NULL distance matrix");
    size_t N = (size_t)n;
    for (size_t a = 0; a < N; a++)
        for (size_t b = 0; b < a; b++) {
            double d = dist[a * N + b], e = dist[b * N + a];
            if (!isfinite(d) || d < 0)
                return hs_fail(err, HS_E_VALUE,
                               "linkage: distance (%zu, %zu) is %g, expected finite and >= 0",
                               a, b, d);
            if (!(fabs(d - e) <= 1e-12 * (fabs(d) > 1 ? fabs(d) : 1)))
                return hs_fail(err, HS_E_VALUE,
                               "linkage: distance matrix is not symmetric at (%zu, %zu): %g vs %g",
                               a, b, d, e);
        }

    /* One block: the struct, merges (n-1), order (n). */
    size_t nm = N - 1;
    size_t bytes = sizeof(hs_linkage) + nm * sizeof(hs_merge) + N * sizeof(int);
    hs_linkage *lk = malloc(bytes);
    double *D = malloc(N * N * sizeof *D);  /* working distances between slots */
    int *id = malloc(N * sizeof *id);       /* cluster id held by each slot, -1 when merged away */
    int *size = malloc(N * sizeof *size);
    int *stack = malloc((2 * N) * sizeof *stack);
    hs_status st = HS_OK;
    if (!lk || !D || !id || !size || !stack) {
        st = hs_fail(err, HS_E_NOMEM, "linkage: out of memory for %d heads", n);
        goto fail;
    }
    lk->n = n;
    lk->merges = (hs_merge *)(lk + 1);
    lk->order = (int *)(lk->merges + nm);
    for (size_t a = 0; a < N; a++) {
        for (size_t b = 0; b < N; b++)
            D[a * N + b] = a > b ? dist[a * N + b] : dist[b * N + a];
        id[a] = (int)a;
        size[a] = 1;
    }

    for (size_t k = 0; k < nm; k++) {
        /* Closest pair of live slots; exact ties by (lower id, higher id). */
        size_t bi = 0, bj = 0;
        double bd = INFINITY;
        int blo = 0, bhi = 0, found = 0;
        for (size_t i = 0; i < N; i++) {
            if (id[i] < 0)
                continue;
            for (size_t j = 0; j < i; j++) {
                if (id[j] < 0)
                    continue;
                double d = D[i * N + j];
                int lo = id[i] < id[j] ? id[i] : id[j], hi = id[i] < id[j] ? id[j] : id[i];
                if (!found || d < bd || (d == bd && (lo < blo || (lo == blo && hi < bhi)))) {
                    found = 1;
                    bd = d;
                    bi = i;
                    bj = j;
                    blo = lo;
                    bhi = hi;
                }
            }
        }
        int si = size[bi], sj = size[bj];
        lk->merges[k].a = blo;
        lk->merges[k].b = bhi;
        lk->merges[k].dist = bd;
        lk->merges[k].size = si + sj;
        /* The new cluster takes slot bj (the lower slot); average-linkage update. */
        for (size_t t = 0; t < N; t++) {
            if (id[t] < 0 || t == bi || t == bj)
                continue;
            double d = ((double)si * D[bi * N + t] + (double)sj * D[bj * N + t]) / (double)(si + sj);
            D[bj * N + t] = d;
            D[t * N + bj] = d;
        }
        id[bj] = n + (int)k;
        size[bj] = si + sj;
        id[bi] = -1;
    }

    /* Leaf order: pre-order walk from the root, a before b. */
    size_t top = 0, pos = 0;
    stack[top++] = 2 * n - 2; /* root (the only leaf 0 when n == 1) */
    while (top) {
        int c = stack[--top];
        if (c < n) {
            lk->order[pos++] = c;
        } else {
            const hs_merge *m = &lk->merges[c - n];
            stack[top++] = m->b;
            stack[top++] = m->a;
        }
    }
    free(stack);
    free(size);
    free(id);
    free(D);
    *out = lk;
    return HS_OK;
fail:
    free(stack);
    free(size);
    free(id);
    free(D);
    free(lk);
    return st;
}

void hs_linkage_free(hs_linkage *lk) { free(lk); }

static int uf_find(int *parent, int x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

hs_status hs_linkage_cut(const hs_linkage *lk, double threshold, int *labels, int *n_clusters,
                         hs_error *err)
{
    if (!lk || !labels)
        return hs_fail(err, HS_E_ARG, "linkage cut: NULL argument");
    if (!isfinite(threshold) || threshold < 0)
        return hs_fail(err, HS_E_ARG, "linkage cut: threshold is %g, expected finite and >= 0",
                       threshold);
    int n = lk->n;
    if (n < 1 || n > LINKAGE_MAX_N || (n > 1 && !lk->merges))
        return hs_fail(err, HS_E_ARG, "linkage cut: linkage has %d leaves", n);
    for (int k = 0; k < n - 1; k++) {
        const hs_merge *m = &lk->merges[k];
        if (m->a < 0 || m->a >= m->b || m->b >= n + k)
            return hs_fail(err, HS_E_ARG, "linkage cut: merge %d joins %d and %d", k, m->a, m->b);
    }
    /* parent over leaves; rep[c] = one leaf of cluster c (leaves and merges). */
    int *parent = malloc((size_t)n * sizeof *parent);
    int *rep = malloc((size_t)(2 * n) * sizeof *rep);
    if (!parent || !rep) {
        free(rep);
        free(parent);
        return hs_fail(err, HS_E_NOMEM, "linkage cut: out of memory");
    }
    for (int i = 0; i < n; i++) {
        parent[i] = i;
        rep[i] = i;
    }
    for (int k = 0; k < n - 1; k++) {
        const hs_merge *m = &lk->merges[k];
        rep[n + k] = rep[m->a];
        if (m->dist <= threshold) {
            int x = uf_find(parent, rep[m->a]), y = uf_find(parent, rep[m->b]);
            if (x != y)
                parent[x < y ? y : x] = x < y ? x : y;
        }
    }
    /* Number components by first appearance: a root's label is assigned when first met. */
    int count = 0;
    for (int i = 0; i < n; i++)
        rep[i] = -1; /* reuse: label of each root */
    for (int i = 0; i < n; i++) {
        int r = uf_find(parent, i);
        if (rep[r] < 0)
            rep[r] = count++;
        labels[i] = rep[r];
    }
    if (n_clusters)
        *n_clusters = count;
    free(rep);
    free(parent);
    return HS_OK;
}
