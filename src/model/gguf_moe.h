/* Mixtures of experts in GGUF (src/model/gguf_moe.c) for gguf_load.c and gguf_write.c: the
 * stacked experts of deepseek2 and qwen3moe, read and written one way, and qwen3moe's expert
 * keys (deepseek2's: gguf_deepseek.h). Private to src/model/. */
#ifndef HEADSCOPE_GGUF_MOE_H
#define HEADSCOPE_GGUF_MOE_H

#include "model/gguf_internal.h"
#include "model/model_internal.h"

/* Qwen3-MoE's expert keys: read after the rotary keys (experts: <arch>.expert_count as read,
 * 0 when absent; refused in any other rotary family). */
hs_status hs_gguf_moe_read(const hs_gguf *g, const char *a, int experts, hs_model_config *cfg,
                           hs_arch *own, hs_error *err);
/* What llama.cpp's qwen3moe cannot hold (dense layers, weights not renormalised) and another
 * family's experts without a GGUF form, refused in one line; HS_OK for a model without
 * experts and for deepseek2's (hs_gguf_deepseek_writable). */
hs_status hs_gguf_moe_writable(const hs_model_config *c, hs_error *err);
/* qwen3moe's expert keys of c (nothing without experts). */
void hs_gguf_moe_write(hs_gguf_meta *mt, const hs_model_config *c, const char *arch);

/* Every mixture-of-experts layer's router ffn_gate_inp, correction bias exp_probs_b (V3's),
 * stacked experts ffn_{gate,down,up}_exps (ne {in, out, E}) and shared experts
 * ffn_*_shexp, appended to the plan. */
void hs_gguf_moe_experts(hs_gguf_plan *p, const hs_model *m);

/* The tensors moe_weights.c asks for by their Hugging Face names (hf, the row's GGUF name
 * NULL) in a model with experts: the router, the bias, expert e's slice of a stacked tensor,
 * the shared experts and a dense layer's MLP. *handled = 1 when the answer (a view in s, or
 * NULL) is this function's; s->bad names a missing or misshapen GGUF tensor. */
const hs_tensor_view *hs_gguf_moe_lookup(const hs_gguf *g, const hs_model_config *c,
                                         const char *hf, const hs_tensor_ref *r,
                                         hs_gguf_scratch *s, int *handled);

#endif
