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

/* The work the passes do (src/importance/patch_cost.c): floating-point operations of the
 * matrix products, two a multiply-add. hs_patch_result.passes counts them over
 * hs_patch_forward_flops. */
/* One plain forward pass of n tokens with logits at every position: the unit. */
double hs_patch_forward_flops(const hs_model_config *c, int n);
/* The LM head on rows rows, cols of its columns (vocab_size, or the two a logit
 * difference reads). */
double hs_patch_head_flops(const hs_model_config *c, int rows, int cols);
/* How a pass from layer l0 begins: every copy its own attention there, the copies sharing
 * one (their streams are the same), or at the contexts (the block's ctx_start). */
typedef enum { HS_PATCH_START_LAYER, HS_PATCH_START_SHARED, HS_PATCH_START_CTX } hs_patch_start;
/* The layers of a batched pass of batch copies from layer l0 to the last, whose output
 * projection and MLP run on last_rows rows a copy (n, or the metric's row); no LM head. */
double hs_patch_pass_flops(const hs_model_config *c, int n, int l0, int batch,
                           hs_patch_start start, int last_rows);
/* A plain pass of n tokens with logits on one row, in units of hs_patch_forward_flops. */
double hs_patch_plain_passes(const hs_model_config *c, int n);
/* The backward pass of a gradient pass on n tokens, the metric's one row of logits: each
 * product's input gradient (the attention's scores and P V two products each). */
double hs_patch_backward_flops(const hs_model_config *c, int n);

#endif
