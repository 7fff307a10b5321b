/* config.json readers shared by hf_config.c and the family parsers in their own files
 * (hf_config_deepseek.c, hf_config_norms.c, arch_falcon.c, arch_bigcode.c), and those
 * parsers' rows of its parsers[] table: the field readers (hf_config_read.c), the rotary
 * parameters (hf_config_rope.c) and Llama's keys (hf_config.c). Private to src/model/. */
#ifndef HEADSCOPE_HF_CONFIG_H
#define HEADSCOPE_HF_CONFIG_H

#include <cJSON.h>

#include "model/model_internal.h"

/* Every integer field, and a default derived from one, is at most this. */
#define HS_CFG_INT_MAX 1000000000

/* A non-negative integer field into *out (required: a missing field fails; else absent or
 * null: *out kept). */
hs_status hs_cfg_int(const cJSON *root, const char *key, int required, int *out, hs_error *err);
/* A number field of obj in [lo, hi] (messages name it where + key); absent: *out kept. */
hs_status hs_cfg_num(const cJSON *obj, const char *where, const char *key, double lo, double hi,
                     double *out, hs_error *err);
hs_status hs_cfg_bool(const cJSON *root, const char *key, int *out, hs_error *err);
/* A number in (0, 1]. */
hs_status hs_cfg_unit(const cJSON *root, const char *key, float *out, hs_error *err);
/* A boolean that must be want when present, refused by name otherwise. */
hs_status hs_cfg_require(const cJSON *root, const char *key, int want, hs_error *err);
/* The activation's name. */
hs_status hs_cfg_act(const char *name, hs_activation *act, hs_error *err);
/* GPT-2's config.json dimensions, shared with GPT-BigCode: n_layer, n_head, n_embd,
 * vocab_size, n_positions, n_inner (0 when absent), layer_norm_epsilon, activation_function,
 * with transformers' defaults; then d_ff from n_inner (4 n_embd when absent). */
hs_status hs_cfg_gpt2_dims(const cJSON *root, hs_model_config *c, int *n_inner, hs_error *err);
hs_status hs_cfg_gpt2_ff(hs_model_config *c, int n_inner, hs_error *err);
/* The rotary parameters (theta_key, frac_key, rope_scaling / rope_parameters; max_pos:
 * max_position_embeddings). */
hs_status hs_cfg_rope(const cJSON *root, hs_arch *a, int d_head, const char *theta_key,
                      const char *frac_key, int max_pos, hs_error *err);
const char *hs_cfg_str(const cJSON *root, const char *key);
/* YaRN's 0.1 m ln(factor) + 1 (1 when factor <= 1). */
double hs_cfg_yarn_mscale(double factor, double m);
/* Llama's keys: the five dimensions, max_position_embeddings, rms_norm_eps, mlp_bias
 * (false), tie_word_embeddings, hidden_act (silu) and the rotary parameters over rope_dims. */
hs_status hs_cfg_llama_dims(const cJSON *root, hs_model_config *c, hs_arch *a, int rope_dims,
                            hs_error *err);

/* deepseek_v2 and deepseek_v3 configs (hf_config_deepseek.c). */
hs_status hs_parse_deepseek_v2(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err);
hs_status hs_parse_deepseek_v3(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err);
/* Llama's keys as parse_llama reads them: hs_cfg_llama_dims' and head_dim,
 * num_key_value_heads (default a->n_kv_head, else num_attention_heads). */
hs_status hs_cfg_llama_like(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err);

/* qwen3, olmo2, gemma2, gemma3_text, gemma3 and qwen3_moe configs (hf_config_norms.c). */
hs_status hs_parse_qwen3(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err);
hs_status hs_parse_olmo2(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err);
hs_status hs_parse_gemma2(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err);
hs_status hs_parse_gemma3(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err);
hs_status hs_parse_gemma3_mm(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err);
hs_status hs_parse_qwen3_moe(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err);

#define HS_NORMS_PARSERS                                                                     \
    {"qwen3", HS_FAMILY_QWEN3, hs_parse_qwen3}, {"olmo2", HS_FAMILY_OLMO2, hs_parse_olmo2},  \
    {"gemma2", HS_FAMILY_GEMMA2, hs_parse_gemma2},                                           \
    {"gemma3_text", HS_FAMILY_GEMMA3, hs_parse_gemma3},                                      \
    {"gemma3", HS_FAMILY_GEMMA3, hs_parse_gemma3_mm},                                        \
    {"qwen3_moe", HS_FAMILY_QWEN3_MOE, hs_parse_qwen3_moe},

#endif
