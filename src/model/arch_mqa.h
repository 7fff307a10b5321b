/* The multi-query families (Falcon, GPT-BigCode): their tensor-name tables, descriptors
 * (rows of arch.c's families[]) and config.json parsers (hf_config.c's parsers[]). Private to src/model/. */
#ifndef HEADSCOPE_ARCH_MQA_H
#define HEADSCOPE_ARCH_MQA_H

#include <cJSON.h>

#include "model/hf_config.h" /* the config.json readers */
#include "model/model_internal.h"

/* Falcon's three block layouts differ only in their norms' names: a sequential block
 * (parallel_attn false: input_layernorm, post_attention_layernorm), one norm feeding
 * attention and MLP (input_layernorm read into both norm slots) and two (ln_attn, ln_mlp:
 * new_decoder_architecture). */
extern const struct hs_names hs_falcon_names_seq, hs_falcon_names_shared, hs_falcon_names_two;
extern const struct hs_names hs_bigcode_names;
extern const char *const hs_endoftext_specials[1];

/* One fused query_key_value stored by KV group ([q .. q k v] per group, HS_TN_QKV_HEADS):
 * multi_query is one group, the per-head [q k v] of Falcon-RW one group a head. */
#define HS_ARCH_FALCON                                                                        \
    {                                                                                         \
        .family = HS_FAMILY_FALCON, .name = "falcon",                                         \
        .norm_place = HS_NORM_PRE, .norm_kind = HS_NORM_LAYER, .act = HS_ACT_GELU_ERF,        \
        .pos = HS_POS_ROTARY, .rotary_frac = 1.0f, .rotary_base = 10000.0f,                   \
        .vis = {HS_VIS_CAUSAL, 0, 0}, .parallel_residual = 1, .biases = 0,                    \
        .tied_embeddings = 1, .n_kv_head = 1, .head = HS_HEAD_DECODER, .head_optional = 0,    \
        .tokenizer = HS_TOK_BPE, .specials = hs_endoftext_specials, .n_specials = 1,          \
        .names = &hs_falcon_names_shared,                                                     \
    }

#define HS_ARCH_GPT_BIGCODE                                                                   \
    {                                                                                         \
        .family = HS_FAMILY_GPT_BIGCODE, .name = "gpt_bigcode", .gguf_name = "starcoder",     \
        .norm_place = HS_NORM_PRE, .norm_kind = HS_NORM_LAYER, .act = HS_ACT_GELU_TANH,       \
        .pos = HS_POS_LEARNED, .pos_offset = 0, .vis = {HS_VIS_CAUSAL, 0, 0},                 \
        .parallel_residual = 0, .biases = 1, .tied_embeddings = 1, .n_kv_head = 1,            \
        .head = HS_HEAD_DECODER, .head_optional = 0, .tokenizer = HS_TOK_BPE,                 \
        .specials = hs_endoftext_specials, .n_specials = 1, .names = &hs_bigcode_names,       \
    }

/* config.json → the dimensions and the per-model descriptor values (hf_config.c's parsers). */
hs_status hs_parse_falcon(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err);
hs_status hs_parse_gpt_bigcode(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err);

#endif
