/* Stage "pairwise" of the analysis of one text (the table in analyze.c): how the analysed
 * heads compare on the text's maps (diversity, similarity, clusters, grouped-query
 * similarity) and each head's types. */
#include <math.h>
#include <stdlib.h>

#include "analysis/analysis_internal.h"
#include "analysis/metrics.h"
#include "analysis/pairwise.h"
#include "core/core.h"
#include "headscope/report.h"
#include "pipeline/analyze_observe.h"
#include "pipeline/pipeline.h"

/* Stage "pairwise": diversity, similarity and clustering from row blocks of the stored
 * maps (dropped after it unless kept), grouped-query similarity, and the head types. */
hs_status hs_stage_pairwise(hs_run *r, hs_error *err)
{
    hs_analysis *a = r->a;
    const hs_model_config *c = r->c;
    const hs_analyze_opts *o = r->o;
    int L = r->L, H = r->H, n = r->n, n_layers_on = r->n_layers_on;
    size_t nh = r->nh;
    double t0 = hs_pipeline_now();
    hs_status st;
    double *per_layer = malloc((size_t)n_layers_on * sizeof *per_layer);
    store_rows sr = {a->maps, a->head_index, malloc(nh * sizeof(int))};
    hs_visibility *vis = malloc(nh * sizeof *vis);
    if (!per_layer || !sr.idx || !vis) {
        free(per_layer);
        free(sr.idx);
        free(vis);
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < nh; k++)
        vis[k] = hs_model_layer_visibility(c, a->head_index[k] / H);
    hs_map_source src = {hs_store_read_rows, &sr, a->n_heads, n};
    st = hs_pairwise_compute(&src, vis, o->diversity ? a->frobenius : NULL, o->similarity,
                             a->similarity, err);
    free(vis);
    free(sr.idx);
    if (!o->keep_maps) { /* nothing reads them after this */
        hs_mapstore_free(a->maps);
        a->maps = NULL;
    }
    if (!st && o->diversity) {
        hs_diversity_layers(a->frobenius, n_layers_on, H, per_layer);
    } else {
        for (int l = 0; l < n_layers_on; l++)
            per_layer[l] = NAN;
        for (size_t k = 0; k < nh * nh; k++)
            a->frobenius[k] = NAN;
    }
    for (int l = 0, j = 0; l < L; l++)
        a->layer_diversity[l] = (o->layers && !o->layers[l]) ? NAN : per_layer[j++];
    free(per_layer);
    if (!st)
        st = hs_similarity_distance(a->similarity, a->n_heads, o->similarity, r->dist, err);
    if (!st && a->n_heads >= 2)
        st = hs_linkage_build(r->dist, a->n_heads, &a->linkage, err);
    if (!st && a->linkage)
        st = hs_linkage_cut(a->linkage, o->cluster_threshold, a->labels, &a->n_clusters, err);
    else if (!st) {
        a->labels[0] = 0;
        a->n_clusters = 1;
    }
    if (st)
        return st;
    if (c->n_kv_head < H && /* grouped-query attention: heads that share keys and values */
        (st = hs_kv_similarity_compute(a->similarity, a->n_heads, a->head_index, L, H,
                                       c->n_kv_head, o->similarity, a->labels,
                                       &a->kv_similarity, err)))
        return st;
    for (size_t k = 0; k < nh; k++) {
        a->heads[k].cluster = a->labels[k];
        hs_head_classify(&a->heads[k], o->label_thresholds, o->sink_threshold,
                         c->arch->sep_token != NULL);
    }
    a->seconds_pairwise = hs_pipeline_now() - t0;
    return HS_OK;
}
