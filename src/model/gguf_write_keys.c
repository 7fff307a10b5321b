/* The keys of a GGUF file written (gguf_write.h): what llama.cpp cannot hold, refused before
 * anything is written, and general.* with each architecture's hyperparameters, with the
 * value types llama.cpp checks. */
#include <stdio.h>

#include "model/gguf_arch.h"
#include "model/gguf_deepseek.h"
#include "model/gguf_moe.h"
#include "model/gguf_norms.h"
#include "model/gguf_t5.h"
#include "model/gguf_write.h"

static uint32_t file_type(hs_gguf_ftype ft) { return (uint32_t)ft; }

hs_status hs_gguf_writable(const hs_model *m, hs_error *err)
{
    const hs_arch *a = m->cfg.arch;
    int norms = hs_gguf_norms_family(a); /* Gemma's windows and GeGLU are llama.cpp's */
    hs_status st = hs_gguf_mqa_writable(m, err); /* Falcon-RW, biases */
    if (st || (st = hs_gguf_deepseek_writable(m, err)) || (st = hs_gguf_t5_writable(m, err)))
        return st;
    if ((a->sliding_window > 0 && !norms && (a->global_every > 0 || a->pos != HS_POS_ROTARY)) ||
        a->vis.kind != hs_arch_of(a->family)->vis.kind ||
        (m->cfg.gated && m->cfg.act != HS_ACT_SILU && !norms && !a->enc_dec))
        return hs_fail(err, HS_E_UNSUPPORTED, "a sliding window on some layers only, another "
                       "visibility than the family's or a MLP gated by another activation than "
                       "SiLU cannot be written to GGUF");
    if (a->pos != HS_POS_ROTARY)
        return HS_OK;
    if (a->rope_scaling == HS_ROPE_LONGROPE && a->family != HS_FAMILY_PHI3)
        return hs_fail(err, HS_E_UNSUPPORTED, "longrope scaling in a %s model cannot be written to "
                       "GGUF (llama.cpp reads rope_factors_*.weight for phi3 only)", a->name);
    if (a->family == HS_FAMILY_LLAMA && a->rotary_dims != m->cfg.d_head)
        return hs_fail(err, HS_E_UNSUPPORTED, "this Llama model rotates %d of its %d head "
                       "dimensions, and llama.cpp's llama architecture rotates all of them; it "
                       "cannot be written to GGUF", a->rotary_dims, m->cfg.d_head);
    if (a->rope_scaling == HS_ROPE_YARN && a->mla_kv_lora <= 0) /* deepseek2's is written */
        return hs_fail(err, HS_E_UNSUPPORTED, "YaRN rope scaling cannot be written to GGUF yet");
    if (a->rope_scaling == HS_ROPE_LLAMA3 && a->family != HS_FAMILY_LLAMA)
        return hs_fail(err, HS_E_UNSUPPORTED, "Llama 3 rope scaling in a %s model cannot be "
                       "written to GGUF (llama.cpp reads rope_freqs.weight for llama only)", a->name);
    if (a->family == HS_FAMILY_GPT_NEOX && m->cfg.n_kv_head != m->cfg.n_head)
        return hs_fail(err, HS_E_UNSUPPORTED, "grouped key/value heads in a GPT-NeoX model cannot "
                       "be written to GGUF");
    return HS_OK;
}

void hs_gguf_dim_keys(hs_gguf_meta *mt, const hs_model_config *c, const char *arch)
{
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)
    hs_meta_u32(mt, KEY("context_length"), (uint32_t)c->n_ctx);
    hs_meta_u32(mt, KEY("embedding_length"), (uint32_t)c->d_model);
    hs_meta_u32(mt, KEY("block_count"), (uint32_t)c->n_layer);
    hs_meta_u32(mt, KEY("feed_forward_length"), (uint32_t)c->d_ff);
    hs_meta_u32(mt, KEY("attention.head_count"), (uint32_t)c->n_head);
#undef KEY
}

/* The hyperparameters of gptneox, llama and qwen2, with the value types llama.cpp checks (in
 * the order of llama.cpp's converter). Llama 3's rope scaling is rope_freqs.weight (plan_row);
 * linear scaling is rope.scaling.type and .factor. */
static void rotary_keys(hs_gguf_meta *mt, const hs_model_config *c, const char *arch)
{
    const hs_arch *a = c->arch;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)
    hs_gguf_dim_keys(mt, c, arch);
    if (a->family != HS_FAMILY_GPT_NEOX)
        hs_meta_u32(mt, KEY("attention.head_count_kv"), (uint32_t)c->n_kv_head);
    if (c->d_head * c->n_head != c->d_model) { /* heads not splitting d_model: their width */
        hs_meta_u32(mt, KEY("attention.key_length"), (uint32_t)c->d_head);
        hs_meta_u32(mt, KEY("attention.value_length"), (uint32_t)c->d_head);
    }
    if (a->sliding_window > 0) /* every layer's (writable) */
        hs_meta_u32(mt, KEY("attention.sliding_window"), (uint32_t)a->sliding_window);
    hs_meta_u32(mt, KEY("rope.dimension_count"), (uint32_t)a->rotary_dims);
    hs_meta_f32(mt, KEY("rope.freq_base"), a->rotary_base);
    if (a->norm_kind == HS_NORM_LAYER) {
        if (a->family == HS_FAMILY_GPT_NEOX) /* llama.cpp's falcon is always parallel */
            hs_meta_bool(mt, KEY("use_parallel_residual"), a->parallel_residual);
        hs_meta_f32(mt, KEY("attention.layer_norm_epsilon"), c->ln_eps);
    } else {
        hs_meta_f32(mt, KEY("attention.layer_norm_rms_epsilon"), c->ln_eps);
        hs_meta_u32(mt, KEY("vocab_size"), (uint32_t)c->vocab_size);
    }
    if (a->rope_scaling == HS_ROPE_LINEAR) {
        hs_meta_str(mt, KEY("rope.scaling.type"), "linear");
        hs_meta_f32(mt, KEY("rope.scaling.factor"), a->rope_factor);
    }
    if (a->rope_scaling == HS_ROPE_LONGROPE) { /* and the factor tensors (plan_row) */
        hs_meta_u32(mt, KEY("rope.scaling.original_context_length"), (uint32_t)a->rope_orig_ctx);
        hs_meta_f32(mt, KEY("rope.scaling.attn_factor"), a->rope_attn_factor);
    }
    hs_gguf_norms_write(mt, c, arch);
    hs_gguf_moe_write(mt, c, arch);
#undef KEY
}

void hs_gguf_model_keys(hs_gguf_meta *mt, const hs_model *m, const hs_gguf_write_options *opt,
                        const char *arch)
{
    const hs_model_config *c = &m->cfg;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)
    hs_meta_str(mt, "general.architecture", arch);
    hs_meta_str(mt, "general.type", "model");
    if (opt->name && *opt->name)
        hs_meta_str(mt, "general.name", opt->name);
    if (c->arch->pos == HS_POS_ROTARY) {
        hs_meta_u32(mt, "general.file_type", file_type(opt->ftype));
        if (c->arch->mla_kv_lora > 0)
            hs_gguf_deepseek_keys(mt, c, arch);
        else
            rotary_keys(mt, c, arch);
    } else if (c->arch->enc_dec) {
        hs_gguf_t5_keys(mt, c, arch, file_type(opt->ftype));
    } else {
        hs_meta_u32(mt, KEY("block_count"), (uint32_t)c->n_layer);
        hs_meta_u32(mt, KEY("context_length"), (uint32_t)c->n_ctx);
        hs_meta_u32(mt, KEY("embedding_length"), (uint32_t)c->d_model);
        hs_meta_u32(mt, KEY("feed_forward_length"), (uint32_t)c->d_ff);
        hs_meta_u32(mt, KEY("attention.head_count"), (uint32_t)c->n_head);
        hs_gguf_mqa_write(mt, c, arch); /* starcoder's K/V heads */
        hs_meta_f32(mt, KEY("attention.layer_norm_epsilon"), c->ln_eps);
        hs_meta_u32(mt, "general.file_type", file_type(opt->ftype));
        if (c->arch->vis.kind == HS_VIS_BIDIRECTIONAL)
            hs_meta_bool(mt, KEY("attention.causal"), 0);
    }
#undef KEY
}
