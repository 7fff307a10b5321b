/* The descriptors of the DeepSeek families, rows of arch.c's families[] (the name table and
 * the slots of latent attention are in arch_deepseek.c). Private to src/model/. */
#ifndef HEADSCOPE_ARCH_DEEPSEEK_H
#define HEADSCOPE_ARCH_DEEPSEEK_H

#include "model/model_internal.h"

#define HS_DEEPSEEK_FAMILY_ROWS \
    {   /* multi-head latent attention (src/model/arch_deepseek.c; dimensions per model) */ \
        .family = HS_FAMILY_DEEPSEEK_V2, .name = "deepseek_v2", .gguf_name = "deepseek2", \
        .norm_place = HS_NORM_PRE, .norm_kind = HS_NORM_RMS, .act = HS_ACT_SILU, .gated = 1, \
        .pos = HS_POS_ROTARY, .rotary_frac = 1.0f, .rotary_base = 10000.0f, \
        .vis = {HS_VIS_CAUSAL, 0, 0}, .head = HS_HEAD_DECODER, .tokenizer = 0, \
        .mla_kv_lora = 1, .mla_scale = 1.0f, .names = &hs_deepseek_v2_names, \
    }, \
    {   /* DeepSeek-V2's block (V3's defaults and routing: hf_config_deepseek.c) */ \
        .family = HS_FAMILY_DEEPSEEK_V3, .name = "deepseek_v3", .gguf_name = "deepseek2", \
        .norm_place = HS_NORM_PRE, .norm_kind = HS_NORM_RMS, .act = HS_ACT_SILU, .gated = 1, \
        .pos = HS_POS_ROTARY, .rotary_frac = 1.0f, .rotary_base = 10000.0f, \
        .vis = {HS_VIS_CAUSAL, 0, 0}, .head = HS_HEAD_DECODER, .tokenizer = 0, \
        .mla_kv_lora = 1, .mla_scale = 1.0f, .names = &hs_deepseek_v2_names, \
    },

#endif
