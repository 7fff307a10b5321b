/* The pieces activation patching (src/importance/patch.c) shares with path patching
 * (src/importance/patch_path.c); private to the importance layer. */
#ifndef HEADSCOPE_PATCH_INTERNAL_H
#define HEADSCOPE_PATCH_INTERNAL_H

#include "headscope/patch.h"

/* A site's values at every layer, filled by hs_patch_cache_hook: (L, per_layer) floats,
 * each layer's rows packed (rows * cols). */
typedef struct {
    hs_site site;
    float *buf;
    size_t per_layer;
} hs_patch_cache;
int hs_patch_cache_hook(void *user, const hs_hook_call *k);

/* The metric of pair p on one row of logits lg: (V), in double. */
double hs_patch_metric_of(const float *lg, int V, const hs_patch_pair *p, hs_patch_metric metric);

/* The checks of hs_patch_run's input (pairs, site, metric, method; an LM head). */
hs_status hs_patch_check_pairs(const hs_model_config *c, const hs_patch_pair *pairs,
                               int n_pairs, const hs_patch_opts *o, hs_error *err);

/* effect, ci_lo, ci_hi of patched (cells, n_pairs) on r's clean and corrupt metrics: the
 * effect on the means over the pairs; bootstrap resample s draws n_pairs pairs with
 * replacement (hs_rand_below from o->seed, one stream for all cells), each cell's effect on
 * the resample's means; ci95 = the sorted effects at floor(0.025 R) and ceil(0.975 R) - 1
 * (R the resamples whose effect is defined). */
hs_status hs_patch_summarise(const hs_patch_result *r, const double *patched, double *effect,
                             double *ci_lo, double *ci_hi, const hs_patch_opts *o,
                             hs_error *err);

#endif
