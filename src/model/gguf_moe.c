/* Mixtures of experts in GGUF (gguf_moe.h).
 * The experts of deepseek2 and qwen3moe, as llama.cpp's converters stack them: per layer
 * blk.N.ffn_gate_inp.weight (ne {d, E}, F32), V3's blk.N.exp_probs_b.bias (ne {E}),
 * blk.N.ffn_{gate,up}_exps.weight (ne {d, f, E}), blk.N.ffn_down_exps.weight (ne {f, d, E})
 * and the shared experts blk.N.ffn_{gate,up,down}_shexp.weight (2-D); written from the
 * model's arenas by hs_gguf_moe_experts, read back for moe_weights.c by hs_gguf_moe_lookup
 * (expert e: rows [e out, (e + 1) out) of the stacked tensor), block-quantised experts too.
 * qwen3moe's keys, as llama.cpp's qwen3moe reads them: <arch>.expert_count,
 * .expert_used_count and .expert_feed_forward_length (absent: feed_forward_length /
 * expert_used_count, llama.cpp's fallback); every layer sparse, the router's softmax over
 * the experts, the chosen ones' weights renormalised to sum 1 (llama.cpp passes norm_w
 * true for qwen3moe whatever the checkpoint's norm_topk_prob); no shared experts, no bias.
 * deepseek2's keys: gguf_deepseek.c. */
#include <stdio.h>
#include <string.h>

#include "model/gguf_moe.h"

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
    if (a->moe_experts <= 0 || a->mla_kv_lora > 0) /* deepseek2's: gguf_deepseek.c */
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

/* ---- the stacked experts ---------------------------------------------------------------- */

void hs_gguf_moe_experts(hs_gguf_plan *p, const hs_model *m)
{
    const hs_model_config *c = &m->cfg;
    const hs_arch *a = c->arch;
    size_t d = (size_t)c->d_model, E = (size_t)a->moe_experts, f = (size_t)a->moe_ff;
    size_t fs = (size_t)a->moe_shared * f;
    char name[64];
    /* the arenas hold (in, out) row-major, written transposed: the router (d, E); expert e's
       [gate | up] at moe_fc + e d 2f, (d, 2f); its down at moe_proj + e f d, (f, d) */
    for (int l = 0; l < c->n_layer; l++) {
        if (!hs_moe_layer(c, l))
            continue;
        const hs_layer *L = &m->layers[l];
#define NM(fmt) hs_names_format(fmt, l, name, sizeof name)
        hs_gguf_plan_add(p, NM("blk.%d.ffn_gate_inp.weight"), L->moe_gate, -1, 0, 0, E, d, E, 1, 0, 0);
        if (L->moe_bias)
            hs_gguf_plan_add(p, NM("blk.%d.exp_probs_b.bias"), L->moe_bias, -1, 0, 0, 0, E, E, 0, 0, 0);
        hs_gguf_plan_add(p, NM("blk.%d.ffn_gate_exps.weight"), L->moe_fc, -1, 0, 0, f, d, 2 * f, 1, E, 2 * d * f);
        hs_gguf_plan_add(p, NM("blk.%d.ffn_down_exps.weight"), L->moe_proj, -1, 0, 0, d, f, d, 1, E, d * f);
        hs_gguf_plan_add(p, NM("blk.%d.ffn_up_exps.weight"), L->moe_fc + f, -1, 0, 0, f, d, 2 * f, 1, E, 2 * d * f);
        if (fs > 0) {
            hs_gguf_plan_add(p, NM("blk.%d.ffn_gate_shexp.weight"), L->moe_sfc, -1, 0, 0, fs, d, 2 * fs, 1, 0, 0);
            hs_gguf_plan_add(p, NM("blk.%d.ffn_down_shexp.weight"), L->moe_sproj, -1, 0, 0, d, fs, d, 1, 0, 0);
            hs_gguf_plan_add(p, NM("blk.%d.ffn_up_shexp.weight"), L->moe_sfc + fs, -1, 0, 0, fs, d, 2 * fs, 1, 0, 0);
        }
#undef NM
    }
}

/* The GGUF tensor name (set in name) of what moe_weights.c asks for by hf; *e: the expert of a
 * stacked tensor (-1: none); 0 when hf is not an expert's, a router's or an MLP's. */
static int gguf_name(const char *hf, char *name, size_t cap, int *e)
{
    int l, x = -1, n = 0;
    char proj[8] = "";
    *e = -1;
    if (sscanf(hf, "layers.%d.mlp.experts.%d.%4[a-z]_proj.weight%n", &l, &x, proj, &n) == 3 && !hf[n]) {
        *e = x;
        snprintf(name, cap, "blk.%d.ffn_%s_exps.weight", l, proj);
    } else if (sscanf(hf, "layers.%d.mlp.shared_experts.%4[a-z]_proj.weight%n", &l, proj, &n) == 2 && !hf[n])
        snprintf(name, cap, "blk.%d.ffn_%s_shexp.weight", l, proj);
    else if (sscanf(hf, "layers.%d.mlp.gate.weight%n", &l, &n) == 1 && !hf[n])
        snprintf(name, cap, "blk.%d.ffn_gate_inp.weight", l);
    else if (sscanf(hf, "layers.%d.mlp.gate.e_score_correction_bias%n", &l, &n) == 1 && !hf[n])
        snprintf(name, cap, "blk.%d.exp_probs_b.bias", l);
    else if (sscanf(hf, "layers.%d.mlp.%4[a-z]_proj.weight%n", &l, proj, &n) == 2 && !hf[n])
        snprintf(name, cap, "blk.%d.ffn_%s.weight", l, proj);
    else
        return 0;
    return 1;
}

const hs_tensor_view *hs_gguf_moe_lookup(const hs_gguf *g, const hs_model_config *c,
                                         const char *hf, const hs_tensor_ref *r,
                                         hs_gguf_scratch *s, int *handled)
{
    char name[96];
    int e;
    *handled = 0;
    if (!c->arch || c->arch->moe_experts <= 0 || r->e->gguf || !gguf_name(hf, name, sizeof name, &e))
        return NULL;
    *handled = 1;
    const hs_gguf_tensor *t = hs_gguf_find_tensor(g, name);
    if (!t) {
        snprintf(s->bad, sizeof s->bad, "missing tensor '%s'", name);
        return NULL;
    }
    if (e < 0)
        return hs_gguf_rows_view(t, 0, t->n_dims == 1 ? 1 : (size_t)t->ne[1], s);
    if (t->n_dims > 3 || t->ne[2] != c->arch->moe_experts) {
        snprintf(s->bad, sizeof s->bad, "tensor '%s' must stack %d experts (ne[2] %lld)", name,
                 c->arch->moe_experts, (long long)t->ne[2]);
        return NULL;
    }
    size_t rows = (size_t)t->ne[1]; /* f for gate and up, d for down */
    return hs_gguf_rows_view(t, (size_t)e * rows, rows, s);
}
