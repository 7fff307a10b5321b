/* llama.cpp's deepseek2 (DeepSeek-V2, V2-Lite and the V3 layout), as its converter
 * (DeepseekV2Model) writes it and its loader reads it (gguf_deepseek.h):
 *   - keys: attention.q_lora_rank (absent or 0: q_proj), .kv_lora_rank, .key_length_mla
 *     (nope + rope), .value_length_mla (v_head_dim), rope.dimension_count (the decoupled rotary
 *     key), leading_dense_block_count, expert_{count,used_count,shared_count,
 *     feed_forward_length,weights_scale,weights_norm,gating_func (1 softmax, 2 sigmoid),
 *     group_count,group_used_count}, YaRN as rope.scaling.{type,factor,
 *     original_context_length,yarn_beta_fast,yarn_beta_slow} with
 *     rope.scaling.yarn_log_multiplier = 0.1 mscale_all_dim (the softmax scale
 *     mscale(factor, mscale_all_dim)^2); attention.head_count_kv 1, key_length / value_length
 *     the latent's (kv_lora + rope, kv_lora), as the converter writes them;
 *   - tensors: attn_q_a / attn_q_a_norm / attn_q_b (or attn_q), attn_kv_a_mqa, attn_kv_a_norm,
 *     kv_b_proj split per head into attn_k_b {nope, kv_lora, H} (each head's block transposed)
 *     and attn_v_b {kv_lora, v, H} (older files: the whole attn_kv_b, read too); the experts
 *     stacked into ffn_{gate,up,down}_exps {.., .., E}, the router ffn_gate_inp (F32, as the
 *     converter keeps it) and V3's exp_probs_b.bias, the shared experts ffn_*_shexp (read and
 *     written by gguf_moe.c, as qwen3moe's). The rotary halves are stored as transformers
 *     keeps them (interleaved pairs, llama.cpp's NORM rope).
 * One architecture holds both: a file whose router is sigmoid opens as deepseek_v3 (V3's
 * router), any other as deepseek_v2.
 * llama.cpp scores a group of experts by its two best (V3's rule) whatever the gating; a
 * softmax router with groups is read as DeepSeek-V2's group-limited routing (the best expert
 * a group), which is what the checkpoint was trained with. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf_deepseek.h"
#include "model/hf_config.h" /* hs_cfg_yarn_mscale */
#include "model/quant.h"

/* ---- reading -------------------------------------------------------------------------- */

/* The router from expert_gating_func, the groups and exp_probs_b. */
static hs_status read_router(const hs_gguf *g, const char *a, int gating, hs_arch *own,
                             hs_error *err)
{
    char name[64];
    int has_bias = hs_gguf_find_tensor(g, hs_names_format("blk.%d.exp_probs_b.bias",
                                                          own->moe_first_dense, name,
                                                          sizeof name)) != NULL;
    if (gating != 1 && gating != 2)
        return hs_fail(err, HS_E_UNSUPPORTED, "%s.expert_gating_func = %d is not supported "
                       "(expected 1, softmax, or 2, sigmoid)", a, gating);
    int grouped = own->moe_groups > 1;
    if (gating == 1) {
        if (has_bias)
            return hs_fail(err, HS_E_UNSUPPORTED, "%s: exp_probs_b.bias with softmax gating is "
                           "not supported (DeepSeek-V3's correction bias goes with sigmoid)", a);
        own->moe_scoring = HS_MOE_SOFTMAX;
        own->moe_routing = grouped ? HS_MOE_GROUP_LIMITED : HS_MOE_GREEDY;
    } else {
        if (!has_bias)
            return hs_fail(err, HS_E_UNSUPPORTED, "%s: sigmoid gating without exp_probs_b.bias is "
                           "not supported (expected DeepSeek-V3's noaux_tc routing)", a);
        own->moe_scoring = HS_MOE_SIGMOID;
        own->moe_routing = HS_MOE_NOAUX_TC;
        if (!grouped)
            own->moe_groups = own->moe_topk_groups = 1;
    }
    int E = own->moe_experts, gr = own->moe_groups, tg = own->moe_topk_groups;
    if (own->moe_routing != HS_MOE_GREEDY &&
        (gr < 1 || gr > 256 || tg < 1 || tg > gr || E % gr || own->moe_top_k > tg * (E / gr) ||
         (own->moe_routing == HS_MOE_NOAUX_TC && E / gr < 2)))
        return hs_fail(err, HS_E_VALUE, "%s.expert_group_count %d / expert_group_used_count %d "
                       "do not fit %d experts, %d used", a, gr, tg, E, own->moe_top_k);
    return HS_OK;
}

/* The mixture of experts (none without expert_count, or every layer dense). */
static hs_status read_moe(const hs_gguf *g, const char *a, hs_model_config *cfg, hs_arch *own,
                          hs_error *err)
{
    char key[128];
    hs_status st;
    int gating = 1;
    float scale = 1.0f;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    own->moe_experts = 0;
    own->moe_first_dense = 0; /* llama.cpp's default: every layer's MLP the experts */
    own->moe_norm_topk = 0;
    own->moe_groups = own->moe_topk_groups = 0;
    if ((st = hs_gguf_get_u32(g, KEY("leading_dense_block_count"), 0, &own->moe_first_dense, err)) ||
        (st = hs_gguf_get_u32(g, KEY("expert_count"), 0, &own->moe_experts, err)) ||
        (st = hs_gguf_get_u32(g, KEY("expert_used_count"), 0, &own->moe_top_k, err)) ||
        (st = hs_gguf_get_u32(g, KEY("expert_shared_count"), 0, &own->moe_shared, err)) ||
        (st = hs_gguf_get_u32(g, KEY("expert_feed_forward_length"), 0, &own->moe_ff, err)) ||
        (st = hs_gguf_get_f32(g, KEY("expert_weights_scale"), 0, &scale, err)) ||
        (st = hs_gguf_get_bool(g, KEY("expert_weights_norm"), 0, &own->moe_norm_topk, err)) ||
        (st = hs_gguf_get_u32(g, KEY("expert_gating_func"), 0, &gating, err)) ||
        (st = hs_gguf_get_u32(g, KEY("expert_group_count"), 0, &own->moe_groups, err)) ||
        (st = hs_gguf_get_u32(g, KEY("expert_group_used_count"), 0, &own->moe_topk_groups, err)))
        return st;
#undef KEY
    if (own->moe_experts < 1 || own->moe_first_dense >= cfg->n_layer) {
        own->moe_experts = 0;
        return HS_OK;
    }
    if (own->moe_top_k < 1 || own->moe_top_k > own->moe_experts || own->moe_ff < 1 ||
        own->moe_shared < 0 || !(scale > 0) ||
        (size_t)own->moe_experts * (size_t)own->moe_ff > 100000000u)
        return hs_fail(err, HS_E_VALUE, "%s: expert_used_count must be in [1, expert_count %d], "
                       "expert_feed_forward_length positive, expert_weights_scale positive", a,
                       own->moe_experts);
    own->moe_scale = scale;
    return read_router(g, a, gating, own, err);
}

/* YaRN from rope.scaling.*: the softmax scale mscale(factor, mscale_all_dim)^2 from the
 * yarn_log_multiplier (0.1 mscale_all_dim), cos and sin unscaled (DeepSeek's mscale equal to
 * its mscale_all_dim) unless yarn_attn_factor says otherwise. */
static hs_status read_yarn(const hs_gguf *g, const char *a, hs_arch *own, hs_error *err)
{
    char key[128];
    long i;
    hs_status st;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    if ((st = hs_gguf_find_typed(g, KEY("rope.scaling.type"), HS_GGUF_STRING, 0, &i, err)))
        return st;
    own->rope_scaling = HS_ROPE_PLAIN;
    if (i < 0)
        return HS_OK;
    hs_gguf_value v;
    hs_gguf_kv_get(g, (size_t)i, 0, &v);
    if (!strcmp(v.str, "none"))
        return HS_OK;
    if (strcmp(v.str, "yarn"))
        return hs_fail(err, HS_E_UNSUPPORTED, "%s.rope.scaling.type '%.40s' is not supported for "
                       "deepseek2 (expected none or yarn)", a, v.str);
    float factor = 0, log_mul = 0, attn = 0, fast = 32.0f, slow = 1.0f;
    if ((st = hs_gguf_get_f32(g, KEY("rope.scaling.factor"), 1, &factor, err)) ||
        (st = hs_gguf_get_u32(g, KEY("rope.scaling.original_context_length"), 1,
                              &own->rope_orig_ctx, err)) ||
        (st = hs_gguf_get_f32(g, KEY("rope.scaling.yarn_log_multiplier"), 0, &log_mul, err)) ||
        (st = hs_gguf_get_f32(g, KEY("rope.scaling.yarn_attn_factor"), 0, &attn, err)) ||
        (st = hs_gguf_get_f32(g, KEY("rope.scaling.yarn_beta_fast"), 0, &fast, err)) ||
        (st = hs_gguf_get_f32(g, KEY("rope.scaling.yarn_beta_slow"), 0, &slow, err)))
        return st;
#undef KEY
    if (!(factor > 0) || own->rope_orig_ctx < 1 || !(log_mul >= 0) || !(attn >= 0))
        return hs_fail(err, HS_E_VALUE, "%s: YaRN's factor, original_context_length, "
                       "yarn_log_multiplier or yarn_attn_factor out of range", a);
    own->rope_scaling = HS_ROPE_YARN;
    own->rope_factor = factor;
    own->rope_beta_fast = fast;
    own->rope_beta_slow = slow;
    double ms_all = log_mul / 0.1f; /* llama.cpp divides by 0.1f */
    double m = hs_cfg_yarn_mscale(factor, ms_all);
    own->mla_scale = log_mul > 0 ? (float)(m * m) : 1.0f;
    own->rope_attn_factor = attn > 0 ? attn : log_mul > 0 ? 1.0f : (float)hs_cfg_yarn_mscale(factor, 1);
    return HS_OK;
}

hs_status hs_gguf_deepseek_read(const hs_gguf *g, const char *a, hs_model_config *cfg,
                                hs_arch *own, hs_error *err)
{
    char key[128];
    hs_status st;
    int q_lora = 0, kv_lora = 0, klen = 0, vlen = 0, rope = 0;
    float base = 10000.0f;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    if ((st = hs_gguf_get_u32(g, KEY("attention.q_lora_rank"), 0, &q_lora, err)) ||
        (st = hs_gguf_get_u32(g, KEY("attention.kv_lora_rank"), 1, &kv_lora, err)) ||
        (st = hs_gguf_get_u32(g, KEY("attention.key_length_mla"), 1, &klen, err)) ||
        (st = hs_gguf_get_u32(g, KEY("attention.value_length_mla"), 1, &vlen, err)) ||
        (st = hs_gguf_get_u32(g, KEY("rope.dimension_count"), 1, &rope, err)) ||
        (st = hs_gguf_get_f32(g, KEY("rope.freq_base"), 0, &base, err)) ||
        (st = hs_gguf_get_f32(g, KEY("attention.layer_norm_rms_epsilon"), 1, &cfg->ln_eps, err)))
        return st;
#undef KEY
    if (kv_lora < 1 || vlen < 1 || rope < 2 || rope % 2 || rope > HS_ROTARY_MAX_DIMS ||
        klen <= rope || !(base > 0))
        return hs_fail(err, HS_E_VALUE, "%s: attention.kv_lora_rank, value_length_mla, "
                       "rope.dimension_count (even, at most %d, below key_length_mla) or "
                       "rope.freq_base out of range", a, HS_ROTARY_MAX_DIMS);
    cfg->d_head = vlen;
    own->mla_q_lora = q_lora;
    own->mla_kv_lora = kv_lora;
    own->mla_nope = klen - rope;
    own->mla_scale = 1.0f;
    own->rotary_dims = rope;
    own->rotary_frac = 1.0f;
    own->rotary_base = base;
    own->n_kv_head = cfg->n_head; /* the file's 1 is the latent's, shared by every head */
    own->tied_embeddings = 1;     /* no output.weight: the token embeddings, as llama.cpp */
    if ((st = read_yarn(g, a, own, err)) || (st = read_moe(g, a, cfg, own, err)))
        return st;
    if (own->moe_experts > 0 && own->moe_scoring == HS_MOE_SIGMOID) { /* V3's router: V3 */
        own->family = cfg->family = HS_FAMILY_DEEPSEEK_V3;
        own->name = hs_family_name(HS_FAMILY_DEEPSEEK_V3);
    }
    return HS_OK;
}

/* n floats of tensor t decoded into a fresh buffer (NULL: a type headscope does not decode,
 * or no memory). */
static float *decode_all(const hs_gguf_tensor *t, size_t n)
{
    size_t elems = 0, bytes = 0;
    int half = t->type == HS_GGML_F16 || t->type == HS_GGML_BF16;
    if (t->type != HS_GGML_F32 && !half && (!hs_quant_block(t->type, &elems, &bytes) || n % elems))
        return NULL;
    float *f = malloc(n * sizeof *f);
    if (!f)
        return NULL;
    for (size_t i = 0; t->type == HS_GGML_F32 && i < n; i++) {
        uint32_t b = hs_le32(t->data + 4 * i);
        memcpy(&f[i], &b, sizeof b);
    }
    for (size_t i = 0; half && i < n; i++) {
        uint16_t h = (uint16_t)(t->data[2 * i] | t->data[2 * i + 1] << 8);
        f[i] = t->type == HS_GGML_F16 ? hs_f16_to_f32(h) : hs_bf16_to_f32(h);
    }
    if (elems)
        hs_quant_decode(t->type, t->data, f, n);
    return f;
}

/* kv_b_proj (H (nope + v), kv_lora), nn.Linear's (out, in), from attn_k_b and attn_v_b. */
static const hs_tensor_view *kv_b(const hs_gguf *g, const hs_model_config *c, int layer,
                                  hs_gguf_scratch *s)
{
    const hs_arch *a = c->arch;
    size_t H = (size_t)c->n_head, kv = (size_t)a->mla_kv_lora, nope = (size_t)a->mla_nope;
    size_t v = (size_t)c->d_head, w = nope + v;
    char nk[64], nv[64];
    const hs_gguf_tensor *tk = hs_gguf_find_tensor(g, hs_names_format("blk.%d.attn_k_b.weight", layer, nk, sizeof nk));
    const hs_gguf_tensor *tv = hs_gguf_find_tensor(g, hs_names_format("blk.%d.attn_v_b.weight", layer, nv, sizeof nv));
    if (!tk || !tv) {
        snprintf(s->bad, sizeof s->bad, "missing tensor '%s'", !tk ? nk : nv);
        return NULL;
    }
    if ((size_t)tk->ne[0] != nope || (size_t)tk->ne[1] != kv || (size_t)tk->ne[2] != H ||
        (size_t)tv->ne[0] != kv || (size_t)tv->ne[1] != v || (size_t)tv->ne[2] != H) {
        snprintf(s->bad, sizeof s->bad, "tensors '%s' / '%s' must be {%zu, %zu, %zu} / {%zu, "
                 "%zu, %zu}", nk, nv, nope, kv, H, kv, v, H);
        return NULL;
    }
    float *k = decode_all(tk, nope * kv * H), *vb = decode_all(tv, kv * v * H);
    float *out = realloc(s->buf, H * w * kv * sizeof *out);
    if (out)
        s->buf = out;
    if (!k || !vb || !out) {
        snprintf(s->bad, sizeof s->bad, "cannot decode '%s' / '%s' (type or memory)", nk, nv);
        free(k);
        free(vb);
        return NULL;
    }
    for (size_t h = 0; h < H; h++)
        for (size_t j = 0; j < w; j++)
            for (size_t i = 0; i < kv; i++)
                out[(h * w + j) * kv + i] = j < nope ? k[(h * kv + i) * nope + j]
                                                     : vb[(h * v + j - nope) * kv + i];
    free(k);
    free(vb);
    s->v = (hs_tensor_view){.name = tk->name, .dtype = HS_DT_F32, .ndim = 2,
                            .shape = {(int64_t)(H * w), (int64_t)kv}, .data = (void *)out,
                            .nbytes = H * w * kv * sizeof *out};
    return &s->v;
}

const hs_tensor_view *hs_gguf_deepseek_lookup(const hs_gguf *g, const hs_model_config *c,
                                              const hs_tensor_ref *r,
                                              hs_gguf_scratch *s, int *handled)
{
    char name[64];
    *handled = 0;
    if (!c->arch || c->arch->mla_kv_lora <= 0)
        return NULL;
    if (r->e->slot == HS_S_QKV_W && r->e->part == 0 && c->arch->mla_q_lora > 0) {
        const hs_gguf_tensor *t =
            hs_gguf_find_tensor(g, hs_names_format("blk.%d.attn_q_a.weight", r->layer, name, sizeof name));
        *handled = 1;
        return t && !r->alt ? hs_gguf_rows_view(t, 0, (size_t)t->ne[1], s) : NULL;
    }
    if (r->e->slot == HS_S_MLA_KVB_W && !r->alt &&
        !hs_gguf_find_tensor(g, hs_names_format(r->e->gguf, r->layer, name, sizeof name))) {
        *handled = 1; /* llama.cpp's split halves (an older file's attn_kv_b is read as named) */
        return kv_b(g, c, r->layer, s);
    }
    return NULL;
}

/* ---- writing ------------------------------------------------------------------------------ */

hs_status hs_gguf_deepseek_writable(const hs_model *m, hs_error *err)
{
    const hs_arch *a = m->cfg.arch;
    if (a->mla_kv_lora <= 0)
        return HS_OK;
    if (a->rope_scaling != HS_ROPE_PLAIN && a->rope_scaling != HS_ROPE_YARN)
        return hs_fail(err, HS_E_UNSUPPORTED, "this DeepSeek model's rope scaling has no deepseek2 "
                       "GGUF form (llama.cpp's deepseek2 reads YaRN only)");
    if (a->rope_scaling == HS_ROPE_YARN && !(a->rope_factor > 1) && a->mla_scale != 1.0f)
        return hs_fail(err, HS_E_UNSUPPORTED, "YaRN with factor %g <= 1 and a softmax mscale "
                       "cannot be written to GGUF", (double)a->rope_factor);
    if (a->moe_experts > 0 && a->moe_routing == HS_MOE_NOAUX_TC && a->moe_scoring != HS_MOE_SIGMOID)
        return hs_fail(err, HS_E_UNSUPPORTED, "noaux_tc routing without sigmoid scores has no "
                       "deepseek2 GGUF form");
    return HS_OK;
}

void hs_gguf_deepseek_keys(hs_gguf_meta *mt, const hs_model_config *c, const char *arch)
{
    const hs_arch *a = c->arch;
    char key[128];
    int moe = a->moe_experts > 0;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)
    hs_gguf_dim_keys(mt, c, arch);
    hs_meta_u32(mt, KEY("attention.head_count_kv"), 1); /* the latent, as the converter says */
    hs_meta_f32(mt, KEY("rope.freq_base"), a->rotary_base);
    hs_meta_f32(mt, KEY("attention.layer_norm_rms_epsilon"), c->ln_eps);
    if (moe) {
        hs_meta_u32(mt, KEY("expert_used_count"), (uint32_t)a->moe_top_k);
        if (a->moe_routing != HS_MOE_GREEDY && a->moe_groups > 1) {
            hs_meta_u32(mt, KEY("expert_group_count"), (uint32_t)a->moe_groups);
            hs_meta_u32(mt, KEY("expert_group_used_count"), (uint32_t)a->moe_topk_groups);
        }
        hs_meta_u32(mt, KEY("expert_gating_func"), a->moe_scoring == HS_MOE_SIGMOID ? 2u : 1u);
    }
    hs_meta_u32(mt, KEY("leading_dense_block_count"),
                (uint32_t)(moe ? a->moe_first_dense : c->n_layer));
    hs_meta_u32(mt, KEY("vocab_size"), (uint32_t)c->vocab_size);
    /* written as 0 without q_lora (V2-Lite): llama.cpp requires the key unless the model has
       V2-Lite's 27 layers, and takes 0 as no q_lora */
    hs_meta_u32(mt, KEY("attention.q_lora_rank"), (uint32_t)a->mla_q_lora);
    hs_meta_u32(mt, KEY("attention.kv_lora_rank"), (uint32_t)a->mla_kv_lora);
    hs_meta_u32(mt, KEY("attention.key_length"), (uint32_t)(a->mla_kv_lora + a->rotary_dims));
    hs_meta_u32(mt, KEY("attention.value_length"), (uint32_t)a->mla_kv_lora);
    hs_meta_u32(mt, KEY("attention.key_length_mla"), (uint32_t)(a->mla_nope + a->rotary_dims));
    hs_meta_u32(mt, KEY("attention.value_length_mla"), (uint32_t)c->d_head);
    hs_meta_u32(mt, KEY("expert_feed_forward_length"), (uint32_t)(moe ? a->moe_ff : c->d_ff));
    if (moe)
        hs_meta_u32(mt, KEY("expert_count"), (uint32_t)a->moe_experts);
    hs_meta_u32(mt, KEY("expert_shared_count"), (uint32_t)(moe ? a->moe_shared : 0));
    if (moe) {
        hs_meta_f32(mt, KEY("expert_weights_scale"), a->moe_scale);
        if (a->moe_norm_topk)
            hs_meta_bool(mt, KEY("expert_weights_norm"), 1);
    }
    hs_meta_u32(mt, KEY("rope.dimension_count"), (uint32_t)a->rotary_dims);
    if (a->rope_scaling == HS_ROPE_YARN) {
        hs_meta_str(mt, KEY("rope.scaling.type"), "yarn");
        hs_meta_f32(mt, KEY("rope.scaling.factor"), a->rope_factor);
        hs_meta_u32(mt, KEY("rope.scaling.original_context_length"), (uint32_t)a->rope_orig_ctx);
        hs_meta_f32(mt, KEY("rope.scaling.yarn_beta_fast"), a->rope_beta_fast);
        hs_meta_f32(mt, KEY("rope.scaling.yarn_beta_slow"), a->rope_beta_slow);
        if (a->mla_scale != 1.0f) /* 0.1 mscale_all_dim, from mscale(factor, m)^2 */
            hs_meta_f32(mt, KEY("rope.scaling.yarn_log_multiplier"),
                        (float)((sqrt((double)a->mla_scale) - 1) / log((double)a->rope_factor)));
        if (a->rope_attn_factor != 1.0f && a->rope_attn_factor > 0)
            hs_meta_f32(mt, KEY("rope.scaling.yarn_attn_factor"), a->rope_attn_factor);
    }
#undef KEY
}

int hs_gguf_deepseek_row(hs_gguf_plan *p, const hs_model *m, const hs_tensor_name *e, int layer,
                         const char **gguf)
{
    const hs_model_config *c = &m->cfg;
    const hs_arch *a = c->arch;
    if (a->mla_kv_lora <= 0 || layer < 0)
        return 0;
    if ((e->slot == HS_S_FC_W || e->slot == HS_S_PROJ_W) && hs_moe_layer(c, layer))
        return 1; /* the experts' (hs_gguf_moe_experts, gguf_moe.c) */
    if (e->slot == HS_S_QKV_W && e->part == 0 && a->mla_q_lora > 0)
        *gguf = "blk.%d.attn_q_a.weight";
    if (e->slot != HS_S_MLA_KVB_W)
        return 0;
    /* kv_b (in kv_lora, out H (nope + v)) per head: k_b {nope, kv_lora, H}, its block
       transposed; v_b {kv_lora, v, H} */
    size_t H = (size_t)c->n_head, kv = (size_t)a->mla_kv_lora, nope = (size_t)a->mla_nope;
    size_t v = (size_t)c->d_head, W = H * (nope + v);
    char name[64];
    hs_gguf_plan_add(p, hs_names_format("blk.%d.attn_k_b.weight", layer, name, sizeof name), NULL,
                     layer, e->slot, 0, kv, nope, W, 0, H, nope + v);
    hs_gguf_plan_add(p, hs_names_format("blk.%d.attn_v_b.weight", layer, name, sizeof name), NULL,
                     layer, e->slot, nope, v, kv, W, 1, H, nope + v);
    return 1;
}
