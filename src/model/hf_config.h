/* The config.json readers of src/model/hf_config.c for the parsers in other files
 * (hf_config_norms.c), and those parsers' rows of its parsers[] table. Private to
 * src/model/. */
#ifndef HEADSCOPE_HF_CONFIG_H
#define HEADSCOPE_HF_CONFIG_H

#include <cJSON.h>

#include "model/model_internal.h"

/* An integer field (required: a missing one is an error; else *out keeps its default). */
hs_status hs_cfg_int(const cJSON *root, const char *key, int required, int *out, hs_error *err);
/* A number in [lo, hi]; absent or null leaves *out alone. */
hs_status hs_cfg_num(const cJSON *obj, const char *key, double lo, double hi, double *out,
                     hs_error *err);
/* A boolean; absent or null leaves *out alone. */
hs_status hs_cfg_bool(const cJSON *root, const char *key, int *out, hs_error *err);
/* A boolean that must be want (absent: transformers' default, taken to be want). */
hs_status hs_cfg_require_bool(const cJSON *root, const char *key, int want, hs_error *err);
/* rope_theta, partial_rotary_factor and rope_scaling / rope_parameters (default, linear,
 * llama3; every other type refused by name). */
hs_status hs_cfg_rope(const cJSON *root, hs_arch *a, int d_head, hs_error *err);
/* Llama's keys: dimensions, head_dim, num_key_value_heads, rms_norm_eps, mlp_bias,
 * tie_word_embeddings, rope, hidden_act silu. */
hs_status hs_cfg_llama_like(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err);

hs_status hs_parse_qwen3(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err);
hs_status hs_parse_olmo2(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err);
hs_status hs_parse_gemma2(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err);
hs_status hs_parse_gemma3(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err);
hs_status hs_parse_gemma3_mm(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err);

#define HS_NORMS_PARSERS                                                                     \
    {"qwen3", HS_FAMILY_QWEN3, hs_parse_qwen3}, {"olmo2", HS_FAMILY_OLMO2, hs_parse_olmo2},  \
    {"gemma2", HS_FAMILY_GEMMA2, hs_parse_gemma2},                                           \
    {"gemma3_text", HS_FAMILY_GEMMA3, hs_parse_gemma3},                                      \
    {"gemma3", HS_FAMILY_GEMMA3, hs_parse_gemma3_mm},

#endif
