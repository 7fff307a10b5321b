/* The small config every family is fuzzed with by the weight-builder harnesses
 * (fuzz_safetensors.c, fuzz_torchbin.c): 2 layers, 2 heads, d 16; the rotary decoders with
 * 4 rotated dims and, for the gated ones, one KV head (grouped-query); Falcon and GPT-BigCode
 * multi-query, as their descriptors say; DeepSeek-V2's latent
 * attention with a latent of 8, and V3's with a mixture of experts in layer 1 (its experts
 * read by src/model/moe_weights.c), as Qwen3-MoE's (decoder_sparse_step 2); T5 one encoder
 * and one decoder layer. */
#ifndef HEADSCOPE_FUZZ_FAMILIES_H
#define HEADSCOPE_FUZZ_FAMILIES_H

#include "model/model_internal.h"

static const hs_family fz_families[] = {HS_FAMILY_GPT2, HS_FAMILY_BERT, HS_FAMILY_ROBERTA,
                                        HS_FAMILY_DISTILBERT, HS_FAMILY_GPT_NEOX,
                                        HS_FAMILY_LLAMA, HS_FAMILY_QWEN2, HS_FAMILY_FALCON,
                                        HS_FAMILY_GPT_BIGCODE, HS_FAMILY_PHI3,
                                        HS_FAMILY_DEEPSEEK_V2, HS_FAMILY_DEEPSEEK_V3, HS_FAMILY_T5,
                                        HS_FAMILY_QWEN3, HS_FAMILY_OLMO2, HS_FAMILY_GEMMA2,
                                        HS_FAMILY_GEMMA3, HS_FAMILY_QWEN3_MOE};
#define FZ_N_FAMILIES (sizeof fz_families / sizeof fz_families[0])

/* Fills m's config for family k of fz_families (its descriptor copied into m->arch) and
 * validates it; aborts if the config is refused (a harness bug). */
static void fz_family_config(hs_model *m, size_t k)
{
    hs_error err = {{0}};
    m->arch = *hs_arch_of(fz_families[k]);
    if (m->arch.pos == HS_POS_ROTARY)
        m->arch.rotary_dims = 4;
    if (m->arch.gated && !m->arch.mla_kv_lora)
        m->arch.n_kv_head = 1;
    if (m->arch.mla_kv_lora) { /* latent attention: a latent of 8, 4 dims without rotary */
        m->arch.mla_kv_lora = 8;
        m->arch.mla_nope = 4;
    }
    if (fz_families[k] == HS_FAMILY_QWEN3_MOE) { /* layer 0 dense, layer 1: 2 experts of 8 */
        m->arch.moe_experts = 2;
        m->arch.moe_top_k = 1;
        m->arch.moe_ff = 8;
        m->arch.moe_every = 2;
        m->arch.moe_norm_topk = 2;
    }
    if (fz_families[k] == HS_FAMILY_DEEPSEEK_V3) { /* layer 1: 2 experts of 8, 1 shared */
        m->arch.moe_experts = 2;
        m->arch.moe_top_k = 1;
        m->arch.moe_ff = 8;
        m->arch.moe_shared = 1;
        m->arch.moe_first_dense = 1;
        m->arch.moe_scale = 1.0f;
    }
    m->cfg = (hs_model_config){.family = fz_families[k], .n_layer = 2, .n_head = 2,
                               .d_model = 16, .d_ff = 64, .n_ctx = 16, .vocab_size = 100,
                               .type_vocab_size = 2, .ln_eps = 1e-5f,
                               .act = m->arch.act == HS_ACT_SILU || m->arch.act == HS_ACT_RELU
                                          ? m->arch.act
                                          : HS_ACT_GELU_TANH,
                               .n_enc_layer = m->arch.enc_dec, /* T5: one encoder layer */
                               .arch = &m->arch};
    if (hs_config_validate(&m->cfg, &err) != HS_OK)
        abort();
}

#endif
