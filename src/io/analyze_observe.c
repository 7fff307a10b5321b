/* The forward-pass observers of `analyze`: detector scores of the induction probe, and on
 * the text per-head metrics taken layer by layer while every layer's maps go to the map
 * store; the store's reader for the pairwise statistics, and hs_analysis_map. */
#include "headscope/analysis.h"
#include "headscope/report.h"
#include "internal.h"
#include "io/analyze_observe.h"

int hs_probe_observe(void *user, int layer, const float *probs, int n_head, int n)
{
    probe_obs *p = user;
    if (p->layers && !p->layers[layer])
        return 0;
    int first = -1;
    for (int k = 0; k < p->a->n_heads; k++)
        if (p->a->head_index[k] == layer * n_head) {
            first = k;
            break;
        }
    if (first < 0)
        return 0;
    p->st = hs_detect_compute(probs, n_head, n, p->causal, p->a->probe_ids, p->sep_id, p->sink,
                              p->out + first, p->err);
    return p->st != HS_OK;
}

int hs_text_observe(void *user, int layer, const float *probs, int n_head, int n)
{
    text_obs *t = user;
    if (!t->layers || t->layers[layer]) {
        int k = t->next;
        t->next += n_head;
        t->st = hs_entropy_compute(probs, n_head, n, t->causal, t->sink, t->ent + k, t->err);
        if (!t->st)
            t->st = hs_detect_compute(probs, n_head, n, t->causal, t->a->ids, t->sep_id, t->sink,
                                      t->det + k, t->err);
    }
    if (!t->st)
        t->st = hs_mapstore_put(t->store, layer * n_head, n_head, probs, t->err);
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
    if (!a->maps)
        return hs_fail(err, HS_E_ARG, "the analysis kept no attention maps");
    return hs_mapstore_get(a->maps, index, out, err);
}
