/* The small config every family is fuzzed with by the weight-builder harnesses
 * (fuzz_safetensors.c, fuzz_torchbin.c): 2 layers, 2 heads, d 16; the rotary decoders with
 * 4 rotated dims and, for the gated ones, one KV head (grouped-query). */
#ifndef HEADSCOPE_FUZZ_FAMILIES_H
#define HEADSCOPE_FUZZ_FAMILIES_H

#include "model/model_internal.h"

static const hs_family fz_families[] = {HS_FAMILY_GPT2, HS_FAMILY_BERT, HS_FAMILY_ROBERTA,
                                        HS_FAMILY_DISTILBERT, HS_FAMILY_GPT_NEOX,
                                        HS_FAMILY_LLAMA, HS_FAMILY_QWEN2, HS_FAMILY_QWEN3,
                                        HS_FAMILY_OLMO2, HS_FAMILY_GEMMA2, HS_FAMILY_GEMMA3};
#define FZ_N_FAMILIES (sizeof fz_families / sizeof fz_families[0])

/* Fills m's config for family k of fz_families (its descriptor copied into m->arch) and
 * validates it; aborts if the config is refused (a harness bug). */
static void fz_family_config(hs_model *m, size_t k)
{
    hs_error err = {{0}};
    m->arch = *hs_arch_of(fz_families[k]);
    if (m->arch.pos == HS_POS_ROTARY)
        m->arch.rotary_dims = 4;
    if (m->arch.gated)
        m->arch.n_kv_head = 1;
    m->cfg = (hs_model_config){.family = fz_families[k], .n_layer = 2, .n_head = 2,
                               .d_model = 16, .d_ff = 64, .n_ctx = 16, .vocab_size = 100,
                               .type_vocab_size = 2, .ln_eps = 1e-5f,
                               .act = m->arch.act == HS_ACT_SILU ? HS_ACT_SILU
                                                                 : HS_ACT_GELU_TANH,
                               .arch = &m->arch};
    if (hs_config_validate(&m->cfg, &err) != HS_OK)
        abort();
}

#endif
