/* The normalised decoders' descriptors (src/model/arch_norms.c): Qwen3, OLMo-2, Gemma 2 and
 * Gemma 3, whose blocks add norms on queries and keys or on the sublayers' outputs, (1 + w)
 * RMSNorm, softcapping and scaled embeddings to Llama's. Private to src/model/. */
#ifndef HEADSCOPE_ARCH_NORMS_H
#define HEADSCOPE_ARCH_NORMS_H

#include "model/model_internal.h"

extern const struct hs_names hs_qwen3_table, hs_olmo2_table, hs_gemma2_table, hs_gemma3_table;
extern const struct hs_names hs_qwen3_moe_table;
/* Gemma 3's language model inside a gemma3 (image-text) checkpoint */
extern const struct hs_names hs_gemma3_mm_table;
extern const char *const hs_qwen3_specials[];

/* Their rows of families[] (src/model/arch.c); per-model values from config.json
 * (src/model/hf_config_norms.c). */
#define HS_NORMS_FAMILIES                                                                    \
    {                                                                                         \
        .family = HS_FAMILY_QWEN3, .name = "qwen3",                                           \
        .norm_place = HS_NORM_PRE, .norm_kind = HS_NORM_RMS, .act = HS_ACT_SILU, .gated = 1,  \
        .pos = HS_POS_ROTARY, .rotary_frac = 1.0f, .rotary_base = 10000.0f,                  \
        .vis = {HS_VIS_CAUSAL, 0, 0}, .head = HS_HEAD_DECODER, .tokenizer = HS_TOK_BPE,       \
        .specials = hs_qwen3_specials, .n_specials = 3, .names = &hs_qwen3_table,             \
        .qk_norm = HS_QK_NORM_HEAD,                                                           \
    },                                                                                        \
    {                                                                                         \
        .family = HS_FAMILY_OLMO2, .name = "olmo2",                                           \
        .norm_place = HS_NORM_PRE, .norm_kind = HS_NORM_RMS, .act = HS_ACT_SILU, .gated = 1,  \
        .pos = HS_POS_ROTARY, .rotary_frac = 1.0f, .rotary_base = 10000.0f,                  \
        .vis = {HS_VIS_CAUSAL, 0, 0}, .head = HS_HEAD_DECODER, .tokenizer = 0,                \
        .names = &hs_olmo2_table,                                                             \
        .qk_norm = HS_QK_NORM_FULL, .post_norms = 1, .no_pre_norm = 1,                        \
    },                                                                                        \
    {                                                                                         \
        .family = HS_FAMILY_GEMMA2, .name = "gemma2",                                         \
        .norm_place = HS_NORM_PRE, .norm_kind = HS_NORM_RMS, .act = HS_ACT_GELU_TANH,         \
        .gated = 1, .pos = HS_POS_ROTARY, .rotary_frac = 1.0f, .rotary_base = 10000.0f,      \
        .vis = {HS_VIS_CAUSAL, 0, 0}, .sliding_window = 4096, .global_every = 2,              \
        .tied_embeddings = 1, .head = HS_HEAD_DECODER, .tokenizer = 0,                        \
        .names = &hs_gemma2_table,                                                           \
        .post_norms = 1, .norm_offset = 1.0f, .attn_softcap = 50.0f, .final_softcap = 30.0f,  \
    },                                                                                        \
    {                                                                                         \
        .family = HS_FAMILY_GEMMA3, .name = "gemma3_text", .gguf_name = "gemma3",             \
        .norm_place = HS_NORM_PRE, .norm_kind = HS_NORM_RMS, .act = HS_ACT_GELU_TANH,         \
        .gated = 1, .pos = HS_POS_ROTARY, .rotary_frac = 1.0f, .rotary_base = 1000000.0f,    \
        .vis = {HS_VIS_CAUSAL, 0, 0}, .sliding_window = 4096, .global_every = 6,              \
        .local_rotary_base = 10000.0f, .tied_embeddings = 1, .head = HS_HEAD_DECODER,         \
        .tokenizer = 0,                                                                       \
        .names = &hs_gemma3_table, .qk_norm = HS_QK_NORM_HEAD, .post_norms = 1,               \
        .norm_offset = 1.0f,                                                                  \
    },

/* Qwen3-MoE (after T5 in families[]): Qwen3's row with routed experts, softmax over the
 * experts, the top k greedily (hs_arch.moe_*, from config.json or GGUF). */
#define HS_QWEN3_MOE_FAMILY                                                                  \
    {                                                                                         \
        .family = HS_FAMILY_QWEN3_MOE, .name = "qwen3_moe", .gguf_name = "qwen3moe",          \
        .norm_place = HS_NORM_PRE, .norm_kind = HS_NORM_RMS, .act = HS_ACT_SILU, .gated = 1,  \
        .pos = HS_POS_ROTARY, .rotary_frac = 1.0f, .rotary_base = 10000.0f,                  \
        .vis = {HS_VIS_CAUSAL, 0, 0}, .head = HS_HEAD_DECODER, .tokenizer = HS_TOK_BPE,       \
        .specials = hs_qwen3_specials, .n_specials = 3, .names = &hs_qwen3_moe_table,         \
        .qk_norm = HS_QK_NORM_HEAD, .moe_scoring = HS_MOE_SOFTMAX,                           \
        .moe_routing = HS_MOE_GREEDY, .moe_scale = 1.0f,                                      \
    },

/* The Q (is_k 0) or K norm's shape: (d_head), or the projection's width under
 * HS_QK_NORM_FULL. */
hs_tensor_shape hs_qk_norm_shape(const hs_model_config *c, int is_k);

/* The first of the normalised decoders' features a's combination cannot compute, or NULL
 * (hs_arch_beyond_base's tail). */
const char *hs_arch_norms_beyond(const hs_arch *a);

/* 1 when slot s is an RMSNorm weight that hs_arch.norm_offset applies to. */
int hs_slot_is_norm_weight(hs_slot s);

#endif
