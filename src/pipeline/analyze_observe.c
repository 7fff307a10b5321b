/* The forward-pass observer of `analyze`: per-head metrics taken layer by layer (detector
 * scores on the probe; entropy and detector scores on the text, while every layer's maps
 * go to the map store); the store's reader for the pairwise statistics, and
 * hs_analysis_map. */
#include <stdlib.h>

#include "analysis/analysis_internal.h"
#include "core/core.h"
#include "headscope/analysis.h"
#include "headscope/report.h"
#include "model/model_internal.h"
#include "nn/block.h"
#include "pipeline/analyze_observe.h"
#include "pipeline/pipeline.h"

int hs_layer_observe(void *user, int layer, const float *probs, int n_head, int n)
{
    layer_obs *t = user;
    if (!t->layers || t->layers[layer]) {
        int k = t->next;
        hs_visibility vis = hs_model_layer_visibility(t->cfg, layer);
        t->next += n_head;
        if (t->ent)
            t->st = hs_entropy_compute(probs, n_head, n, vis, NULL, t->ent + k, t->err);
        if (!t->st && t->ent_free)
            t->st = hs_entropy_compute(probs, n_head, n, vis, t->sink, t->ent_free + k, t->err);
        if (!t->st)
            t->st = hs_detect_compute(probs, n_head, n, vis, t->seq, NULL, t->det + k, t->err);
        if (!t->st)
            t->st = hs_detect_compute(probs, n_head, n, vis, t->seq, t->sink, t->det_free + k,
                                      t->err);
    }
    if (!t->st && t->store)
        t->st = hs_mapstore_put(t->store, layer * n_head, n_head, probs, t->err);
    if (!t->st && t->fnorm) /* batch 1: the layer's qkv is the workspace's, rows of width W */
        t->st = hs_norm_values_layer(t->m, layer, t->ws->qkv,
                                     hs_qkv_width(hs_model_config_of(t->m)), n,
                                     t->fnorm + (size_t)layer * (size_t)n_head * (size_t)n, t->err);
    if (!t->st && t->progress)
        t->progress(t->progress_user, "forward", layer + 1, t->cfg->n_layer);
    return t->st != HS_OK;
}

hs_status hs_store_read_rows(void *user, const int *idx, int count, int r0, int rows,
                             float *out, hs_error *err)
{
    store_rows *sr = user;
    for (int c = 0; c < count; c++)
        sr->idx[c] = sr->head_index[idx[c]];
    return hs_mapstore_rows(sr->store, sr->idx, count, r0, rows, out, err);
}

hs_status hs_analysis_map(const hs_analysis *a, int index, float *out, hs_error *err)
{
    return hs_mapstore_get(a->maps, index, out, err);
}

static hs_status store_map(void *user, int k, float *out, hs_error *err)
{
    return hs_mapstore_get(user, k, out, err);
}

hs_status hs_analysis_rollout(hs_analysis *a, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(a->model);
    size_t nn = (size_t)a->n * (size_t)a->n;
    a->rollout = malloc(nn * sizeof *a->rollout);
    if (a->n <= a->opts.flow_max_tokens)
        a->flow = malloc(nn * sizeof *a->flow);
    hs_visibility *vis = malloc((size_t)c->n_layer * sizeof *vis);
    if (!a->rollout || (a->n <= a->opts.flow_max_tokens && !a->flow) || !vis) {
        free(vis);
        return hs_fail(err, HS_E_NOMEM, "out of memory for the attention rollout");
    }
    for (int l = 0; l < c->n_layer; l++)
        vis[l] = hs_model_layer_visibility(c, l);
    hs_status st = hs_rollout_source(store_map, a->maps, c->n_layer, c->n_head, a->n, vis,
                                     c->n_layer, a->opts.rollout_residual, a->rollout, a->flow,
                                     err);
    free(vis);
    return st;
}
