/* Similarity within and across key/value groups of grouped- and multi-query attention: the
 * means of the head-similarity matrix over the pairs of query heads that share a KV head and
 * over those of one layer that do not, per group pair, a permutation test per layer, and how
 * the flat clusters agree with the groups (docs/metrics.md § Similarity within and across KV
 * groups); the layers' p-values adjusted together by Holm's method. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis_internal.h"
#include "core/core.h"
#include "headscope/analysis.h"

void hs_kv_similarity_free(hs_kv_similarity *kv)
{
    if (!kv)
        return;
    free(kv->within);
    free(kv->across);
    free(kv->p_value);
    free(kv->p_holm);
    free(kv->groups);
    free(kv);
}

static double mean_or_nan(double sum, long count)
{
    return count > 0 ? sum / (double)count : NAN;
}

/* The permutation test of one layer: item: (H) the matrix index of each head of the layer,
 * s heads per group. Returns p, or NaN with a single group. */
static double layer_p_value(const double *sim, int m, const int *item, int H, int s, int smaller,
                            uint64_t seed, int *lab)
{
    if (s >= H)
        return NAN;
    double obs = 0.0;
    for (int a = 0; a < H; a++)
        for (int b = a + 1; b < H; b++)
            if (a / s == b / s)
                obs += sim[(size_t)item[a] * (size_t)m + (size_t)item[b]];
    double tol = 1e-9 * (fabs(obs) > 1.0 ? fabs(obs) : 1.0);
    uint64_t state = seed;
    long hits = 0;
    for (int r = 0; r < HS_KV_PERMUTATIONS; r++) {
        for (int h = 0; h < H; h++)
            lab[h] = h / s;
        for (int i = H - 1; i >= 1; i--) { /* Fisher-Yates from the end */
            int j = (int)hs_rand_below(&state, (uint64_t)i + 1), t = lab[i];
            lab[i] = lab[j];
            lab[j] = t;
        }
        double v = 0.0;
        for (int a = 0; a < H; a++)
            for (int b = a + 1; b < H; b++)
                if (lab[a] == lab[b])
                    v += sim[(size_t)item[a] * (size_t)m + (size_t)item[b]];
        hits += smaller ? v <= obs + tol : v >= obs - tol;
    }
    return (double)(1 + hits) / (double)(1 + HS_KV_PERMUTATIONS);
}

void hs_holm_adjust(const double *p, int n, int *order, double *out)
{
    int m = 0;
    for (int i = 0; i < n; i++) { /* the tested entries, ascending (ties: lower index first) */
        out[i] = NAN;
        if (isnan(p[i]))
            continue;
        int j = m++;
        for (; j > 0 && p[order[j - 1]] > p[i]; j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    double run = 0.0;
    for (int k = 0; k < m; k++) { /* rank k + 1: factor m - (k + 1) + 1 */
        double v = (double)(m - k) * p[order[k]];
        run = v > run ? v : run;
        out[order[k]] = run < 1.0 ? run : 1.0;
    }
}

hs_status hs_kv_similarity_compute(const double *sim, int n_items, const int *head_index,
                                   int n_layer, int n_head, int n_kv_head, hs_sim_method method,
                                   const int *clusters, hs_kv_similarity **out, hs_error *err)
{
    if (!out)
        return hs_fail(err, HS_E_ARG, "kv similarity: NULL output");
    *out = NULL;
    if (!sim || !head_index || n_items < 1)
        return hs_fail(err, HS_E_ARG, "kv similarity: no heads");
    if (n_layer < 1 || n_head < 2 || n_kv_head < 1 || n_kv_head >= n_head ||
        n_head % n_kv_head)
        return hs_fail(err, HS_E_ARG, "kv similarity: %d query heads and %d KV heads are not "
                       "grouped-query attention", n_head, n_kv_head);
    if (method != HS_SIM_PEARSON && method != HS_SIM_JS)
        return hs_fail(err, HS_E_ARG, "kv similarity: unknown method %d", (int)method);
    for (int k = 0; k < n_items; k++)
        if (head_index[k] < 0 || head_index[k] / n_head >= n_layer ||
            (k > 0 && head_index[k] <= head_index[k - 1]))
            return hs_fail(err, HS_E_ARG, "kv similarity: head index %d at %d is out of range "
                           "or out of order", head_index[k], k);
    int L = n_layer, H = n_head, G = n_kv_head, s = n_head / n_kv_head, m = n_items;
    size_t gg = (size_t)G * (size_t)G, lgg = (size_t)L * gg;
    hs_kv_similarity *kv = calloc(1, sizeof *kv);
    double *gsum = calloc(lgg, sizeof *gsum);
    long *gcount = calloc(lgg, sizeof *gcount);
    int *item = malloc((size_t)H * sizeof *item), *lab = malloc((size_t)H * sizeof *lab);
    int *order = malloc((size_t)L * sizeof *order);
    hs_status st = HS_OK;
    if (!kv || !gsum || !gcount || !item || !lab || !order)
        goto nomem;
    kv->n_layer = L;
    kv->n_kv_head = G;
    kv->heads_per_group = s;
    kv->within = malloc((size_t)L * sizeof *kv->within);
    kv->across = malloc((size_t)L * sizeof *kv->across);
    kv->p_value = malloc((size_t)L * sizeof *kv->p_value);
    kv->p_holm = malloc((size_t)L * sizeof *kv->p_holm);
    kv->groups = malloc(lgg * sizeof *kv->groups);
    if (!kv->within || !kv->across || !kv->p_value || !kv->p_holm || !kv->groups)
        goto nomem;

    /* every unordered pair once: the group blocks and the cluster agreement */
    double sw = 0.0, sa = 0.0, so = 0.0;
    long n_other = 0, same_kv = 0, same_cl = 0, cl_within = 0, cl_across = 0;
    for (int a = 0; a < m; a++) {
        int la = head_index[a] / H, ga = head_index[a] % H / s;
        for (int b = a + 1; b < m; b++) {
            int lb = head_index[b] / H, gb = head_index[b] % H / s;
            int sc = clusters && clusters[a] == clusters[b];
            same_cl += sc;
            double v = sim[(size_t)a * (size_t)m + (size_t)b];
            if (la != lb) {
                so += v;
                n_other++;
                continue;
            }
            size_t e = (size_t)la * gg + (size_t)ga * (size_t)G + (size_t)gb;
            gsum[e] += v;
            gcount[e]++;
            if (ga == gb) {
                sw += v;
                kv->n_within++;
                same_kv++;
                cl_within += sc;
            } else {
                sa += v;
                kv->n_across++;
                cl_across += sc;
            }
        }
    }
    kv->within_mean = mean_or_nan(sw, kv->n_within);
    kv->across_mean = mean_or_nan(sa, kv->n_across);
    kv->other_layers_mean = mean_or_nan(so, n_other);
    for (int l = 0; l < L; l++) {
        double w = 0.0, x = 0.0;
        long nw = 0, nx = 0;
        for (int g = 0; g < G; g++)
            for (int f = 0; f < G; f++) {
                /* pairs were counted with a < b, so group f < g sits in [l][f][g] */
                size_t e = (size_t)l * gg + (size_t)(g < f ? g : f) * (size_t)G +
                           (size_t)(g < f ? f : g);
                kv->groups[(size_t)l * gg + (size_t)g * (size_t)G + (size_t)f] =
                    mean_or_nan(gsum[e], gcount[e]);
                if (g == f) {
                    w += gsum[e];
                    nw += gcount[e];
                } else if (g < f) {
                    x += gsum[e];
                    nx += gcount[e];
                }
            }
        kv->within[l] = mean_or_nan(w, nw);
        kv->across[l] = mean_or_nan(x, nx);
        kv->p_value[l] = NAN;
    }
    for (int k = 0; k < m;) { /* the analysed layers, each with all of its heads */
        int l = head_index[k] / H, c = 0;
        for (; k < m && head_index[k] / H == l; k++)
            item[c++] = k;
        if (c == H)
            kv->p_value[l] = layer_p_value(sim, m, item, H, s, method == HS_SIM_JS,
                                           HS_KV_PERM_SEED + (uint64_t)l, lab);
    }
    hs_holm_adjust(kv->p_value, L, order, kv->p_holm);

    /* adjusted Rand index by pair counts: pairs together in both partitions, in the KV
     * groups, in the clusters, out of all pairs */
    kv->adjusted_rand = kv->same_cluster_within = kv->same_cluster_across = NAN;
    if (clusters) {
        double pairs = 0.5 * (double)m * (double)(m - 1);
        double expect = pairs > 0 ? (double)same_kv * (double)same_cl / pairs : 0.0;
        double top = 0.5 * ((double)same_kv + (double)same_cl);
        if (top - expect != 0.0)
            kv->adjusted_rand = ((double)cl_within - expect) / (top - expect);
        kv->same_cluster_within = mean_or_nan((double)cl_within, kv->n_within);
        kv->same_cluster_across = mean_or_nan((double)cl_across, kv->n_across);
    }
    *out = kv;
    kv = NULL;
    goto done;
nomem:
    st = hs_fail(err, HS_E_NOMEM, "kv similarity: out of memory for %d heads", m);
done:
    hs_kv_similarity_free(kv);
    free(gsum);
    free(gcount);
    free(item);
    free(lab);
    free(order);
    return st;
}
