/* GGUF keys of Qwen3, OLMo-2, Gemma 2 and Gemma 3 (gguf_norms.h), as llama.cpp's converter
 * writes them and its loader reads them: <arch>.attention.sliding_window (Gemma 2: 4096 when
 * absent), <arch>.attn_logit_softcapping and .final_logit_softcapping (Gemma 2: 50 and 30 when
 * absent; Gemma 3: none), the local layers' rotary base <arch>.rope.freq_base_swa (Gemma 3:
 * 10000) and Gemma 3's pattern of one global layer in 6. llama.cpp has no key for the scores'
 * scale: it takes 1 / sqrt(embedding_length / head_count) for the 27B models (Gemma 2: 46
 * layers, Gemma 3: 62) and 1 / sqrt(key_length) otherwise, and so does headscope unless the
 * file has <arch>.attention.scale (which headscope writes when the scale is neither). The
 * embeddings are scaled by sqrt(embedding_length) in float32 (llama.cpp's ggml_scale), and
 * Gemma's norm weights are stored as 1 + w (llama.cpp's converter adds the 1). */
#include <math.h>
#include <string.h>

#include "model/gguf_norms.h"

int hs_gguf_norms_family(const hs_arch *a)
{
    return a->family == HS_FAMILY_QWEN3 || a->family == HS_FAMILY_QWEN3_MOE ||
           a->family == HS_FAMILY_OLMO2 ||
           a->family == HS_FAMILY_GEMMA2 || a->family == HS_FAMILY_GEMMA3;
}

/* llama.cpp's score scale of a Gemma model. */
static float llamacpp_scale(const hs_model_config *c)
{
    int big = c->family == HS_FAMILY_GEMMA2 ? c->n_layer == 46 : c->n_layer == 62;
    return big ? 1.0f / sqrtf((float)(c->d_model / c->n_head)) : 1.0f / sqrtf((float)c->d_head);
}

hs_status hs_gguf_norms_read(const hs_gguf *g, const char *a, int window, hs_model_config *cfg,
                             hs_arch *own, hs_error *err)
{
    char key[128];
    hs_status st;
    int gemma = own->family == HS_FAMILY_GEMMA2 || own->family == HS_FAMILY_GEMMA3;
    if (!gemma) { /* every layer's queries see the last `window` keys (none when 0) */
        own->sliding_window = window;
        own->global_every = 0;
        return HS_OK;
    }
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    float scale = 0, base_swa = own->local_rotary_base;
    int pattern = own->global_every;
    if ((st = hs_gguf_get_f32(g, KEY("attn_logit_softcapping"), 0, &own->attn_softcap, err)) ||
        (st = hs_gguf_get_f32(g, KEY("final_logit_softcapping"), 0, &own->final_softcap, err)) ||
        (st = hs_gguf_get_f32(g, KEY("attention.scale"), 0, &scale, err)) ||
        (own->local_rotary_base > 0 &&
         (st = hs_gguf_get_f32(g, KEY("rope.freq_base_swa"), 0, &base_swa, err))) ||
        (st = hs_gguf_get_u32(g, KEY("attention.sliding_window_pattern"), 0, &pattern, err)))
        return st;
    if (!(own->attn_softcap >= 0) || !(own->final_softcap >= 0) || !(scale >= 0) ||
        !(base_swa >= 0) || (own->local_rotary_base > 0 && !(base_swa > 0)) || pattern < 1)
        return hs_fail(err, HS_E_VALUE, "%s: a softcap, attention.scale, rope.freq_base_swa or "
                       "attention.sliding_window_pattern out of range", a);
#undef KEY
    if (window)
        own->sliding_window = window;
    own->global_every = pattern;
    own->local_rotary_base = base_swa;
    own->query_scale = scale > 0 ? scale : llamacpp_scale(cfg);
    own->emb_scale = sqrtf((float)cfg->d_model);
    return HS_OK;
}

void hs_gguf_norms_write(hs_gguf_meta *mt, const hs_model_config *c, const char *arch)
{
    const hs_arch *a = c->arch;
    char key[128];
    if (a->family != HS_FAMILY_GEMMA2 && a->family != HS_FAMILY_GEMMA3)
        return;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)
    if (a->family == HS_FAMILY_GEMMA2 || a->attn_softcap > 0)
        hs_meta_f32(mt, KEY("attn_logit_softcapping"), a->attn_softcap);
    if (a->family == HS_FAMILY_GEMMA2 || a->final_softcap > 0)
        hs_meta_f32(mt, KEY("final_logit_softcapping"), a->final_softcap);
    if (a->query_scale != llamacpp_scale(c))
        hs_meta_f32(mt, KEY("attention.scale"), a->query_scale);
    if (a->local_rotary_base > 0)
        hs_meta_f32(mt, KEY("rope.freq_base_swa"), a->local_rotary_base);
    if (a->global_every != hs_arch_of(a->family)->global_every)
        hs_meta_u32(mt, KEY("attention.sliding_window_pattern"), (uint32_t)a->global_every);
#undef KEY
}
