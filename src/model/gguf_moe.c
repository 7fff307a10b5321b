/* Qwen3-MoE in GGUF (gguf_norms.h), as llama.cpp's qwen3moe reads it: <arch>.expert_count,
 * .expert_used_count and .expert_feed_forward_length (absent: feed_forward_length /
 * expert_used_count, llama.cpp's fallback); every layer sparse, the router's softmax over
 * the experts, the chosen ones' weights renormalised to sum 1 (llama.cpp passes norm_w
 * true for qwen3moe whatever the checkpoint's norm_topk_prob). Per layer
 * blk.N.ffn_gate_inp.weight (ne {d, E}) and every expert in one tensor,
 * blk.N.ffn_{gate,up}_exps.weight (ne {d, f, E}) and blk.N.ffn_down_exps.weight
 * (ne {f, d, E}), as its converter stacks them. */
#include "model/gguf_norms.h"

hs_status hs_gguf_moe_read(const hs_gguf *g, const char *a, int experts, hs_model_config *cfg,
                           hs_arch *own, hs_error *err)
{
    char key[128];
    hs_status st;
    if (own->family != HS_FAMILY_QWEN3_MOE) {
        if (experts)
            return hs_fail(err, HS_E_UNSUPPORTED, "%s.expert_count = %d: mixtures of experts "
                           "are not supported in a %s file", a, experts, a);
        return HS_OK;
    }
    int used = 0, ff = 0;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    if ((st = hs_gguf_get_u32(g, KEY("expert_count"), 1, &experts, err)) ||
        (st = hs_gguf_get_u32(g, KEY("expert_used_count"), 1, &used, err)) ||
        (st = hs_gguf_get_u32(g, KEY("expert_feed_forward_length"), 0, &ff, err)))
        return st;
    if (experts < 1 || used < 1 || used > experts || used > 64)
        return hs_fail(err, HS_E_VALUE, "%s.expert_used_count %d must be in [1, expert_count %d] "
                       "and at most 64", a, used, experts);
#undef KEY
    if (!ff)
        ff = cfg->d_ff / used;
    if (ff < 1 || (size_t)experts * (size_t)ff > 100000000u)
        return hs_fail(err, HS_E_VALUE, "%s: %d experts of %d are out of range", a, experts, ff);
    own->moe_experts = experts;
    own->moe_top_k = used;
    own->moe_ff = ff;
    own->moe_norm_topk = 2;
    own->moe_scale = 1.0f;
    return HS_OK;
}

hs_status hs_gguf_moe_writable(const hs_model_config *c, hs_error *err)
{
    const hs_arch *a = c->arch;
    if (a->moe_experts <= 0)
        return HS_OK;
    int dense = 0;
    for (int l = 0; l < c->n_layer; l++)
        dense += !hs_moe_layer(c, l);
    if (a->family != HS_FAMILY_QWEN3_MOE)
        return hs_fail(err, HS_E_UNSUPPORTED, "a %s model's experts cannot be written to GGUF yet",
                       a->name);
    if (dense || a->moe_norm_topk != 2)
        return hs_fail(err, HS_E_UNSUPPORTED, "this qwen3_moe model has %s, and llama.cpp's "
                       "qwen3moe has experts in every layer and renormalises their weights; it "
                       "cannot be written to GGUF",
                       dense ? "dense layers (mlp_only_layers or decoder_sparse_step)"
                             : "norm_topk_prob false");
    return HS_OK;
}

void hs_gguf_moe_write(hs_gguf_meta *mt, const hs_model_config *c, const char *arch)
{
    const hs_arch *a = c->arch;
    char key[128];
    if (a->moe_experts <= 0)
        return;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)
    hs_meta_u32(mt, KEY("expert_count"), (uint32_t)a->moe_experts);
    hs_meta_u32(mt, KEY("expert_used_count"), (uint32_t)a->moe_top_k);
    hs_meta_u32(mt, KEY("expert_feed_forward_length"), (uint32_t)a->moe_ff);
#undef KEY
}

int hs_gguf_moe_tensors(const hs_model_config *c, const hs_layer *L, int l,
                        hs_gguf_moe_tensor out[4])
{
    if (!hs_moe_layer(c, l) || !L->moe_gate)
        return 0;
    size_t d = (size_t)c->d_model, E = (size_t)c->arch->moe_experts, f = (size_t)c->arch->moe_ff;
    /* matrices (in, out) row-major, written (out, in): the router (d, E); expert e's
     * [gate | up] at moe_fc + e d 2f, (d, 2f); its down at moe_proj + e f d, (f, d) */
    const hs_gguf_moe_tensor t[4] = {
        {"blk.%d.ffn_gate_inp.weight", L->moe_gate, 0, E, d, E, 0, {0}},
        {"blk.%d.ffn_gate_exps.weight", L->moe_fc, E, f, d, 2 * f, d * 2 * f, {0}},
        {"blk.%d.ffn_up_exps.weight", L->moe_fc + f, E, f, d, 2 * f, d * 2 * f, {0}},
        {"blk.%d.ffn_down_exps.weight", L->moe_proj, E, d, f, d, f * d, {0}},
    };
    for (int k = 0; k < 4; k++) {
        out[k] = t[k];
        hs_names_format(t[k].pattern, l, out[k].name, sizeof out[k].name);
    }
    return 4;
}
