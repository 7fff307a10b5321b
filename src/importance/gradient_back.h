/* The backward kernels of gradient.c's pass (gradient_back.c) that only it calls; the norm's
 * and the MLP's are in importance_internal.h, RMSNorm's in gradient_mla.h. Private to
 * src/importance/. */
#ifndef HEADSCOPE_GRADIENT_BACK_H
#define HEADSCOPE_GRADIENT_BACK_H

#include "model/model_internal.h"
#include "nn/block.h"

/* dx: (n, in) = dy: (n, out) · w^T, w: (in, out); accumulate adds to dx. */
void hs_grad_linear_back(const float *dy, const float *w, float *dx, int n, int in, int out,
                         int accumulate);

/* Back through the query/key norm (hs_qk_normalise), dqkv: (n, W) in place; gl: the layer's
 * kept activations. */
void hs_grad_qk_norm_back(const hs_model_config *c, const hs_layer *W, const hs_block_keep *gl,
                          float *dqkv, int n);

/* Attention backward of one layer under visibility vis: dctx: (n, A) → dqkv: (n, W); qkv:
 * (n, W) and probs: (H, n, n) kept by the forward; dps: (H, n, n) scratch; dpat: (H, n, n)
 * d loss / d probs when not NULL (gradient_back.c has the formulas). */
void hs_grad_attention_back(const hs_model_config *c, hs_visibility vis, const float *qkv,
                            const float *probs, const float *dctx, float *dqkv, float *dps,
                            float *dpat, int n);

/* d loss / d logits: (V) in row, where the softcapped logits were, made d loss / d (the
 * logits before the cap); mx, inv: the row's max and its softmax's 1 / (sum R); tgt, target:
 * the target's id and logit. */
void hs_grad_final_softcap_back(float *row, int V, float mx, float inv, float cap, int tgt,
                                float target);

#endif
