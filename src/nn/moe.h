/* DeepSeek's mixture-of-experts MLP (src/nn/moe.c), the block's MLP in the layers
 * hs_moe_layer names. Private to the library. */
#ifndef HEADSCOPE_MOE_H
#define HEADSCOPE_MOE_H

#include <stdint.h>

#include "model/model_internal.h"

/* out: (rows, d) = the mixture of experts of layer L on in: (rows, d) (out may alias in):
 * the router's logits in W_gate scored (softmax, or sigmoid with the correction bias added
 * for the choice only), the top_k experts chosen greedily, or after the scores outside the
 * topk_groups best groups are set to 0 (group score: the best score, or with noaux_tc the
 * sum of the two best; transformers' masking: 0, not minus infinity), their
 * scores as weights (softmax: normalised to sum 1 when norm_topk and top_k > 1, else times
 * moe_scale; sigmoid: normalised when norm_topk, then times moe_scale), plus the shared
 * experts. route: (rows, top_k) receives each row's experts, best first, when not NULL.
 * HS_E_NOMEM when its buffers cannot be had. */
hs_status hs_moe_forward(const hs_model_config *c, const hs_layer *L, const float *in,
                         float *out, int rows, int32_t *route);

/* 1 when the chosen experts' weights are normalised to sum 1: moe_norm_topk 2 always
 * (Qwen3-MoE), 1 under sigmoid scoring or with more than one expert a token (DeepSeek). */
static inline int hs_moe_normalises(const hs_arch *a)
{
    return a->moe_norm_topk == 2 ||
           (a->moe_norm_topk && (a->moe_scoring == HS_MOE_SIGMOID || a->moe_top_k > 1));
}

/* One row's routing: logits (E) → experts e (top_k, best first) and their weights w;
 * score (E) receives the scores (softmax or sigmoid), choice (E) the scores the experts are
 * chosen by (with the correction bias); ok: E bytes and gok: 256 bytes of scratch. */
void hs_moe_route_row(const hs_arch *a, const float *logits, const float *bias, int *e,
                      double *w, double *score, double *choice, unsigned char *ok,
                      unsigned char *gok);

/* route: (n_layer, n, top_k) = the experts the router of every layer chooses for each of
 * the n tokens ids (best first; -1 in a dense layer). Fails (HS_E_UNSUPPORTED) for a model
 * without a mixture of experts. */
hs_status hs_moe_routes(const hs_model *m, const int32_t *ids, int n, int32_t *route,
                        hs_error *err);

#endif
