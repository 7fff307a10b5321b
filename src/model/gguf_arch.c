/* GGUF of the multi-query families (gguf_arch.h), as llama.cpp's converter writes them and its
 * loader reads them:
 *   falcon (FalconModel): a parallel block, rotary embeddings turned as rotate-half (llama.cpp's
 *     NEOX rope: no permutation), no biases; the fused query_key_value regrouped from its
 *     K/V groups [q .. q k v] into [Q | K | V] (the "jploski" layout, the normalised one),
 *     attention.head_count_kv the K/V heads; attn_norm the MLP's norm (and the attention's in
 *     Falcon-7B's one-norm block), attn_norm_2 Falcon-40B's ln_attn. Falcon-RW (ALiBi, a
 *     sequential block, biases) has no llama.cpp form: refused by name.
 *   starcoder (StarCoderModel, GPT-BigCode): GPT-2's tensors with a fused attn_qkv in
 *     [Q | K | V] and attention.head_count_kv. llama.cpp's converter always writes 1 K/V
 *     head and the tensor as stored; headscope writes the model's K/V heads and regroups a
 *     multi-head c_attn (multi_query false, stored per head [q k v]) into [Q | K | V], which
 *     llama.cpp's loader reads as it reads any grouped file. */
#include <stdio.h>
#include <string.h>

#include "model/arch_mqa.h"
#include "model/gguf_arch.h"

void hs_gguf_mqa_read(const hs_gguf *g, hs_arch *own)
{
    if (own->family != HS_FAMILY_FALCON)
        return;
    char name[64];
    /* llama.cpp's falcon: a parallel block without biases; two norms when attn_norm_2 is there */
    own->parallel_residual = 1;
    own->biases = 0;
    own->names = hs_gguf_find_tensor(g, hs_names_format("blk.%d.attn_norm_2.weight", 0, name,
                                                        sizeof name))
                     ? &hs_falcon_names_two
                     : &hs_falcon_names_shared;
}

hs_status hs_gguf_mqa_writable(const hs_model *m, hs_error *err)
{
    const hs_arch *a = m->cfg.arch;
    if (a->family != HS_FAMILY_FALCON)
        return HS_OK;
    if (a->pos == HS_POS_ALIBI || !a->parallel_residual)
        return hs_fail(err, HS_E_UNSUPPORTED, "this Falcon model (%s) has no GGUF form: llama.cpp's "
                       "falcon runs rotary positions in a parallel block only (Falcon-7B/40B); use "
                       "the Hugging Face folder", a->pos == HS_POS_ALIBI
                           ? "Falcon-RW's layout: ALiBi positions" : "a sequential block");
    if (a->biases)
        return hs_fail(err, HS_E_UNSUPPORTED, "this Falcon model has biases (config.json bias "
                       "true), and llama.cpp's falcon has none; it cannot be written to GGUF");
    if (a->rotary_dims != m->cfg.d_head || a->rope_scaling != HS_ROPE_PLAIN)
        return hs_fail(err, HS_E_UNSUPPORTED, "this Falcon model rotates %d of its %d head "
                       "dimensions%s, and llama.cpp's falcon rotates all of them, unscaled; it "
                       "cannot be written to GGUF", a->rotary_dims, m->cfg.d_head,
                       a->rope_scaling != HS_ROPE_PLAIN ? " with rope scaling" : "");
    return HS_OK;
}

void hs_gguf_mqa_write(hs_gguf_meta *mt, const hs_model_config *c, const char *arch)
{
    char key[96];
    if (c->family == HS_FAMILY_GPT_BIGCODE) { /* falcon's: the rotary keys' */
        snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
        hs_meta_u32(mt, key, (uint32_t)c->n_kv_head);
    }
}
