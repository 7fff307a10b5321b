/* Multi-head latent attention (DeepSeek-V2, §2.1), the block's attention for a descriptor
 * with mla_kv_lora > 0 (src/nn/mla.c). Private to the library. */
#ifndef HEADSCOPE_MLA_H
#define HEADSCOPE_MLA_H

#include <stddef.h>

#include "model/model_internal.h"

/* One layer's attention from qkv: (n, hs_mla_qkv_width) = the normalised stream times
 * [q (or q_a) | kv_a]: every head's query [q_nope | q_rope] (through q_a's RMSNorm and q_b
 * when q_lora > 0), the latent RMSNorm'd and taken by kv_b to every head's [k_nope | v],
 * the rotary key shared by every head; q_rope and k_rope turned pairwise (dimensions 2k,
 * 2k + 1) by position i times inv_freq[k] and scaled by rope->attn_factor (0: 1); scores
 * (q_nope k_nope + q_rope k_rope) mla_scale / sqrt(nope + rope), softmax over the keys vis
 * shows → ctx: (n, A), head h in columns h d_head.. = head_mask[h] (NULL: 1) P_h V_h, and
 * probs (n_head, n, n) before the mask when not NULL. *bad_row as hs_op_attn_probs gives it.
 * pos_share (n_head) when not NULL gets each head's mean, over the visible cells, of
 * |rope part| / (|nope part| + |rope part|) of the logits (cells where both are 0 left out).
 * HS_E_NOMEM when its buffers cannot be had. */
hs_status hs_mla_attn(const hs_model_config *c, const hs_layer *L, const hs_rope *rope,
                      const double *inv_freq, hs_visibility vis, const float *qkv, float *ctx,
                      int n, const float *head_mask, float *probs, size_t *bad_row,
                      double *pos_share);

/* share: (n_layer, n_head) = hs_mla_attn's pos_share of every layer's heads on the text ids
 * (n tokens): the share of each attention logit that comes from the rotary (position)
 * part rather than the latent (content) part, averaged over the visible cells. Fails
 * (HS_E_UNSUPPORTED) for a model without latent attention. */
hs_status hs_mla_position_share(const hs_model *m, const int32_t *ids, int n, double *share,
                                hs_error *err);

#endif
