/* DeepSeek-V2's tensor names and the slots of multi-head latent attention (MLA; DeepSeek-V2
 * §2.1): hooked into arch.c's families[], hs_names_shape and hs_layer_slot_ptr. The names
 * are those transformers' DeepseekV2ForCausalLM saves (model.layers.N.self_attn.*). */
#include <stddef.h>

#include "model/model_internal.h"

#define NL "layers.%d."
/* q_proj, or q_a_proj when the config has a q_lora_rank (the row's second name: the slot's
 * width follows the config, so a checkpoint holding the other is refused by its shape). */
static const hs_tensor_name deepseek_names[] = {
    {HS_S_TOK_EMB, -1, "embed_tokens.weight", NULL, "token_embd.weight", NULL, 0},
    {HS_S_NORM1_W, -1, NL "input_layernorm.weight", NULL, "blk.%d.attn_norm.weight", NULL, 0},
    {HS_S_QKV_W, 0, NL "self_attn.q_proj.weight", NL "self_attn.q_a_proj.weight",
     "blk.%d.attn_q.weight", NULL, 0},
    {HS_S_MLA_QA_NORM_W, -1, NL "self_attn.q_a_layernorm.weight", NULL,
     "blk.%d.attn_q_a_norm.weight", NULL, 0},
    {HS_S_MLA_QB_W, -1, NL "self_attn.q_b_proj.weight", NULL, "blk.%d.attn_q_b.weight", NULL, 0},
    {HS_S_QKV_W, 1, NL "self_attn.kv_a_proj_with_mqa.weight", NULL,
     "blk.%d.attn_kv_a_mqa.weight", NULL, 0},
    {HS_S_MLA_KVA_NORM_W, -1, NL "self_attn.kv_a_layernorm.weight", NULL,
     "blk.%d.attn_kv_a_norm.weight", NULL, 0},
    {HS_S_MLA_KVB_W, -1, NL "self_attn.kv_b_proj.weight", NULL, "blk.%d.attn_kv_b.weight", NULL,
     0},
    {HS_S_O_W, -1, NL "self_attn.o_proj.weight", NULL, "blk.%d.attn_output.weight", NULL, 0},
    /* the dense MLP: absent from a mixture-of-experts layer (src/model/moe_weights.c checks
     * a dense layer's) */
    HS_LLAMA_MLP_HEAD_ROWS(NL, HS_TN_OPTIONAL)
};
#undef NL

/* llama.cpp's deepseek2 (src/model/gguf_deepseek.c: attn_q_a, kv_b's split halves and the
 * experts, which these GGUF names do not say), tokenizer.ggml.model "gpt2". */
const struct hs_names hs_deepseek_v2_names = {
    deepseek_names, sizeof deepseek_names / sizeof deepseek_names[0], "model.", 1, "gpt2"};

int hs_mla_q_width(const hs_model_config *c)
{
    const hs_arch *a = c->arch;
    return a->mla_q_lora > 0 ? a->mla_q_lora : c->n_head * (a->mla_nope + a->rotary_dims);
}

int hs_mla_qkv_width(const hs_model_config *c)
{
    return hs_mla_q_width(c) + c->arch->mla_kv_lora + c->arch->rotary_dims;
}

int hs_mla_shape(const hs_model_config *c, const hs_tensor_name *e, hs_tensor_shape *sh)
{
    const hs_arch *a = c->arch;
    if (!a || a->mla_kv_lora <= 0)
        return 0;
    int H = c->n_head, dqk = a->mla_nope + a->rotary_dims, W = hs_mla_qkv_width(c);
    int Q = hs_mla_q_width(c), kv = a->mla_kv_lora;
    switch (e->slot) {
    case HS_S_QKV_W: /* part 0: q (or q_a), part 1: kv_a */
        *sh = (hs_tensor_shape){HS_K_MAT, c->d_model, e->part == 0 ? Q : kv + a->rotary_dims, W,
                                e->part == 0 ? 0 : Q, 0};
        sh->slot_floats = (size_t)c->d_model * (size_t)W;
        return 1;
    case HS_S_MLA_QA_NORM_W: *sh = (hs_tensor_shape){HS_K_VEC, 1, a->mla_q_lora, a->mla_q_lora, 0, 0}; break;
    case HS_S_MLA_QB_W: *sh = (hs_tensor_shape){HS_K_MAT, a->mla_q_lora, H * dqk, H * dqk, 0, 0}; break;
    case HS_S_MLA_KVA_NORM_W: *sh = (hs_tensor_shape){HS_K_VEC, 1, kv, kv, 0, 0}; break;
    case HS_S_MLA_KVB_W: {
        int w = H * (a->mla_nope + c->d_head);
        *sh = (hs_tensor_shape){HS_K_MAT, kv, w, w, 0, 0};
        break;
    }
    default: return 0;
    }
    sh->slot_floats = (size_t)sh->rows * (size_t)sh->cols;
    return 1;
}

const float **hs_mla_slot_ptr(hs_layer *L, hs_slot s)
{
    static const struct {
        hs_slot slot;
        size_t off;
    } at[] = {{HS_S_MLA_QA_NORM_W, offsetof(hs_layer, mla_qa_norm)},
              {HS_S_MLA_QB_W, offsetof(hs_layer, mla_qb)},
              {HS_S_MLA_KVA_NORM_W, offsetof(hs_layer, mla_kva_norm)},
              {HS_S_MLA_KVB_W, offsetof(hs_layer, mla_kvb)}};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
        if (at[i].slot == s)
            return (const float **)(void *)((char *)L + at[i].off);
    return NULL;
}
