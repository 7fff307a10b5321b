/* Norm-based attention (Kobayashi et al. 2020) of the text, summarised per analysed head:
 * ||f_h(x_j)|| = ||(x_j W_V^h + b_V^h) W_O^h||, taken from the values of the text's own pass
 * layer by layer (hs_norm_values_layer, in the pass's observer), each head's map from the
 * store. */
#include <math.h>
#include <stdlib.h>

#include "core/core.h"
#include "nn/mla.h"
#include "pipeline/pipeline.h"

hs_status hs_analysis_norm_based(hs_analysis *a, const float *fn, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(a->model);
    int n = a->n;
    hs_status st = HS_OK;
    float *map = malloc((size_t)n * (size_t)n * sizeof *map);
    if (!map)
        return hs_fail(err, HS_E_NOMEM, "out of memory for norm-based attention");
    for (int k = 0; k < a->n_heads && !st; k++) {
        int idx = a->head_index[k];
        if ((st = hs_analysis_map(a, idx, map, err)))
            break;
        const float *f = fn + (size_t)idx * (size_t)n; /* (n) ||f(x_j)|| of head l.h */
        hs_visibility vis = hs_model_layer_visibility(c, idx / c->n_head);
        double first = 0, mass = 0, fsum = 0;
        for (int j = 0; j < n; j++)
            fsum += f[j];
        for (int i = 0; i < n; i++) {
            const float *row = map + (size_t)i * (size_t)n;
            double s = 0;
            for (int j = hs_vis_lo(vis, i), hi = hs_vis_hi(vis, i, n); j < hi; j++)
                s += (double)row[j] * f[j];
            first += s > 0 ? (double)row[0] * f[0] / s : 0.0;
            mass += s;
        }
        hs_head_result *h = &a->heads[k];
        h->norm_first_token = first / n;
        h->norm_mass = mass / n;
        h->value_norm = fsum / n;
    }
    free(map);
    return st;
}

hs_status hs_analysis_position_share(hs_analysis *a, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(a->model);
    if (!c->arch->mla_kv_lora)
        return HS_OK;
    double *share = malloc((size_t)c->n_layer * (size_t)c->n_head * sizeof *share);
    if (!share)
        return hs_fail(err, HS_E_NOMEM, "out of memory for the position shares");
    hs_status st = hs_mla_position_share(a->model, a->ids, a->n, share, err);
    for (int k = 0; k < a->n_heads && !st; k++)
        a->heads[k].position_share = share[a->head_index[k]];
    free(share);
    return st;
}
