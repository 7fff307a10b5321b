/* LongRoPE in a GGUF file, as llama.cpp's converter writes Phi-3's (Phi3MiniModel): the
 * factors as two F32 tensors of rope.dimension_count / 2 values, rope_factors_long.weight and
 * rope_factors_short.weight, {arch}.rope.scaling.attn_factor the scale of cos and sin, and
 * {arch}.rope.scaling.original_context_length the pre-training context. headscope picks the
 * factors by the text's length as transformers does (long past the original context); llama.cpp
 * picks them by the context size it is run with. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/gguf_internal.h"
#include "model/model_internal.h"

/* One factor tensor into dst: F32, half values, each finite and positive. */
static hs_status read_factors(const hs_gguf_tensor *t, const char *name, int half, float *dst,
                              hs_error *err)
{
    if (!t)
        return hs_fail(err, HS_E_FORMAT, "missing tensor '%s' (longrope needs both factor tensors)",
                       name);
    if (t->type != HS_GGML_F32 || t->ne[0] != half || t->ne[1] != 1 || t->ne[2] != 1 ||
        t->ne[3] != 1 || half > HS_ROPE_MAX_FACTORS)
        return hs_fail(err, HS_E_SHAPE, "tensor '%s' must be F32 of %d values "
                       "(rope.dimension_count / 2)", name, half);
    for (int k = 0; k < half; k++) {
        uint32_t b = hs_le32(t->data + 4 * (size_t)k);
        float v;
        memcpy(&v, &b, sizeof v);
        if (!isfinite(v) || !(v > 0))
            return hs_fail(err, HS_E_VALUE, "%s[%d] = %g: a rope factor must be a positive number",
                           name, k, (double)v);
        dst[k] = v;
    }
    return HS_OK;
}

hs_status hs_gguf_longrope(const hs_gguf *g, const char *arch, float attn_factor, int n_ctx,
                           hs_arch *own, hs_error *err)
{
    static const char *const names[2] = {"rope_factors_long.weight", "rope_factors_short.weight"};
    if (own->family != HS_FAMILY_PHI3)
        return hs_fail(err, HS_E_UNSUPPORTED, "%s / %s (longrope scaling) in a %s file are not "
                       "supported", names[0], names[1], arch);
    if (own->rope_scaling != HS_ROPE_PLAIN)
        return hs_fail(err, HS_E_UNSUPPORTED, "longrope factors with another rope scaling are not "
                       "supported");
    int half = own->rotary_dims / 2, orig = 0;
    char key[128];
    hs_status st;
    snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", arch);
    if ((st = read_factors(hs_gguf_find_tensor(g, names[0]), names[0], half, own->rope_long, err)) ||
        (st = read_factors(hs_gguf_find_tensor(g, names[1]), names[1], half, own->rope_short, err)) ||
        (st = hs_gguf_get_u32(g, key, 1, &orig, err)))
        return st;
    if (orig < 1 || !(attn_factor > 0))
        return hs_fail(err, HS_E_VALUE, "%s must be at least 1 and %s.rope.scaling.attn_factor "
                       "positive", key, arch);
    own->rope_scaling = HS_ROPE_LONGROPE;
    own->rope_orig_ctx = orig;
    own->rope_factor = (float)n_ctx / (float)orig;
    own->rope_attn_factor = attn_factor;
    return HS_OK;
}
