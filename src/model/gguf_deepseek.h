/* llama.cpp's deepseek2 GGUF form of DeepSeek-V2/V3 (src/model/gguf_deepseek.c), for
 * gguf_load.c and gguf_write.c. Private to src/model/. */
#ifndef HEADSCOPE_GGUF_DEEPSEEK_H
#define HEADSCOPE_GGUF_DEEPSEEK_H

#include "model/gguf_internal.h"
#include "model/model_internal.h"

/* Latent attention's keys, YaRN and the experts of a deepseek2 file (arch a) into cfg / own,
 * after the generic keys; what headscope does not run (another gating function, sigmoid
 * without exp_probs_b, rope scaling other than YaRN) refused by name. */
hs_status hs_gguf_deepseek_read(const hs_gguf *g, const char *a, hs_model_config *cfg,
                                hs_arch *own, hs_error *err);

/* The tensors the name table cannot name in a deepseek2 file: attn_q_a and kv_b from its
 * split halves (the experts: hs_gguf_moe_lookup, gguf_moe.h). *handled = 1 when the answer
 * (a view in s, or NULL: absent) is this function's; s->bad says why a present tensor could
 * not be read. */
const hs_tensor_view *hs_gguf_deepseek_lookup(const hs_gguf *g, const hs_model_config *c,
                                              const hs_tensor_ref *r,
                                              hs_gguf_scratch *s, int *handled);

/* What deepseek2 cannot hold, refused by name; HS_OK for other families. */
hs_status hs_gguf_deepseek_writable(const hs_model *m, hs_error *err);

/* deepseek2's hyperparameters, in the converter's order. */
void hs_gguf_deepseek_keys(hs_gguf_meta *mt, const hs_model_config *c, const char *arch);

/* A row of the name table in a latent-attention model's plan: 1 when handled here (kv_b
 * written as attn_k_b and attn_v_b, a MoE layer's dense rows skipped), 0 to plan it as
 * usual, under *gguf (attn_q_a for q_a_proj). */
int hs_gguf_deepseek_row(hs_gguf_plan *p, const hs_model *m, const hs_tensor_name *e, int layer,
                         const char **gguf);


#endif
