/* The backward pass of multi-head latent attention (gradient_mla.c) and the RMSNorm
 * backward it shares with gradient.c. Private to src/importance/. */
#ifndef HEADSCOPE_GRADIENT_MLA_H
#define HEADSCOPE_GRADIENT_MLA_H

#include "model/model_internal.h"

/* dx: (n, d) = d loss / d x of y = xhat w, xhat = x rstd (RMSNorm), from dy: (n, d); dx may
 * alias dy (gradient_back.c). */
void hs_grad_rms_back(const float *xhat, const float *rstd, const float *w, const float *dy,
                      float *dx, int n, int d);

/* Layer `layer`'s latent attention backward: dctx: (n, A), d loss / d (every head's P V,
 * the head mask already applied) → dqkv: (n, hs_mla_qkv_width) = d loss / d [q (or q_a) |
 * kv_a], from qkv: (n, hs_mla_qkv_width) the layer's projection and probs: (H, n, n) its
 * probabilities, both kept by the forward. HS_E_NOMEM when its buffers cannot be had. */
hs_status hs_mla_attn_back(const hs_model_config *c, const hs_layer *L, int layer,
                           const float *qkv, const float *probs, const float *dctx, float *dqkv,
                           int n);

/* A mixture-of-experts layer's backward (gradient_moe.c): dy: (n, d) = d loss / d (its
 * output) → dx: (n, d) = d loss / d (its input xhat lnw, xhat: (n, d) the norm's kept
 * normalised input), through the chosen experts, the shared ones and the gates. HS_E_NOMEM
 * when its buffers cannot be had. */
hs_status hs_moe_back(const hs_model_config *c, const hs_layer *L, const float *xhat,
                      const float *lnw, const float *dy, float *dx, int n);

#endif
