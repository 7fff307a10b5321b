/* config.json's rotary parameters (model/hf_config.h): the base, the rotated fraction and
 * the frequency scaling (linear, llama3, longrope, yarn), as transformers reads them. */
#include <math.h>
#include <string.h>

#include <cJSON.h>

#include "model/hf_config.h"

/* LongRoPE (transformers' "longrope"; "su" in Phi-3's first configs) from the scaling
 * object sc: short_factor and long_factor, rotary_dims / 2 positive numbers each, dividing
 * theta_k (hs_op_rope_freqs_at picks one by the text's length);
 * original_max_position_embeddings from sc or the config (else max_pos); attention_factor
 * as given, else from factor (as given, else max_pos / original): 1 when factor <= 1, else
 * sqrt(1 + ln factor / ln original), the scale of cos and sin. */
static hs_status parse_longrope(const cJSON *root, const cJSON *sc, const char *where,
                                int max_pos, hs_arch *a, hs_error *err)
{
    static const char *const keys[2] = {"short_factor", "long_factor"};
    float *dst[2] = {a->rope_short, a->rope_long};
    int half = a->rotary_dims / 2;
    for (int j = 0; j < 2; j++) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(sc, keys[j]), *v;
        if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != half || half > HS_ROPE_MAX_FACTORS)
            return hs_fail(err, HS_E_FORMAT, "config.json: %s'%s' must be a list of %d numbers "
                           "(one per rotary frequency)", where, keys[j], half);
        int k = 0;
        cJSON_ArrayForEach(v, arr) {
            if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || !(v->valuedouble > 0) ||
                v->valuedouble > 1e6)
                return hs_fail(err, HS_E_FORMAT, "config.json: %s'%s'[%d] must be a number in "
                               "(0, 1e6]", where, keys[j], k);
            dst[j][k++] = (float)v->valuedouble;
        }
    }
    double orig = 0, factor = 0, attn = 0;
    hs_status st;
    if ((st = hs_cfg_num(sc, where, "original_max_position_embeddings", 1, 1 << 24, &orig, err)) ||
        (!orig && (st = hs_cfg_num(root, "", "original_max_position_embeddings", 1, 1 << 24, &orig,
                                   err))) ||
        (st = hs_cfg_num(sc, where, "factor", 1e-6, 1e6, &factor, err)) ||
        (st = hs_cfg_num(sc, where, "attention_factor", 1e-6, 1e6, &attn, err)))
        return st;
    orig = orig >= 1 ? floor(orig) : max_pos;
    factor = factor > 0 ? factor : max_pos / orig;
    if (!(attn > 0))
        attn = factor <= 1 ? 1 : sqrt(1 + log(factor) / log(orig));
    if (!(orig >= 1) || !isfinite(attn))
        return hs_fail(err, HS_E_FORMAT, "config.json: longrope scaling needs "
                       "original_max_position_embeddings of at least 2 (or an attention_factor)");
    a->rope_scaling = HS_ROPE_LONGROPE;
    a->rope_orig_ctx = (int)orig;
    a->rope_factor = (float)factor;
    a->rope_attn_factor = (float)attn;
    return HS_OK;
}

/* YaRN's mscale: 0.1 m ln(factor) + 1 (1 when factor <= 1). */
double hs_cfg_yarn_mscale(double factor, double m)
{
    return factor <= 1 ? 1.0 : 0.1 * m * log(factor) + 1.0;
}

/* YaRN's parameters (a->rope_factor already set), as transformers' _compute_yarn_parameters
 * reads them: beta_fast 32 and beta_slow 1 by default, original_max_position_embeddings else
 * the model's maximum positions (set after parsing, hs_hf_config_load), the attention factor
 * given, else mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are given,
 * else mscale(factor, 1). */
static hs_status parse_yarn(const cJSON *sc, const char *where, hs_arch *a, hs_error *err)
{
    double fast = 32, slow = 1, orig = 0, ms = 0, ms_all = 0, af = 0;
    hs_status st;
    if ((st = hs_cfg_num(sc, where, "beta_fast", 1e-6, 1e6, &fast, err)) ||
        (st = hs_cfg_num(sc, where, "beta_slow", 1e-6, 1e6, &slow, err)) ||
        (st = hs_cfg_num(sc, where, "original_max_position_embeddings", 1, 1 << 24, &orig, err)) ||
        (st = hs_cfg_num(sc, where, "mscale", 0, 1e6, &ms, err)) ||
        (st = hs_cfg_num(sc, where, "mscale_all_dim", 0, 1e6, &ms_all, err)) ||
        (st = hs_cfg_num(sc, where, "attention_factor", 1e-6, 1e6, &af, err)) ||
        (st = hs_cfg_require(sc, "truncate", 1, err)))
        return st;
    if (!(fast > slow))
        return hs_fail(err, HS_E_FORMAT, "config.json: %s'beta_fast' must exceed 'beta_slow'",
                       where);
    if (!(af > 0))
        af = ms > 0 && ms_all > 0 ? hs_cfg_yarn_mscale(a->rope_factor, ms) /
                                        hs_cfg_yarn_mscale(a->rope_factor, ms_all)
                                  : hs_cfg_yarn_mscale(a->rope_factor, 1);
    a->rope_scaling = HS_ROPE_YARN;
    a->rope_orig_ctx = (int)orig; /* 0: the model's maximum positions */
    a->rope_beta_fast = (float)fast;
    a->rope_beta_slow = (float)slow;
    a->rope_attn_factor = (float)af;
    return HS_OK;
}

/* The rotary parameters as transformers reads them: the base (theta_key, or transformers 5's
 * rope_parameters.rope_theta), the rotated fraction of each head (frac_key, or
 * rope_parameters.partial_rotary_factor) and the frequency scaling (rope_scaling, or
 * rope_parameters with a rope_type other than "default"): none, "linear", "llama3" or
 * "longrope" ("su"; max_pos: max_position_embeddings) or "yarn"; every other type (dynamic,
 * ...) is refused. */
hs_status hs_cfg_rope(const cJSON *root, hs_arch *a, int d_head, const char *theta_key,
                      const char *frac_key, int max_pos, hs_error *err)
{
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    if (rp && !cJSON_IsNull(rp) && !cJSON_IsObject(rp))
        return hs_fail(err, HS_E_FORMAT, "config.json: 'rope_parameters' must be an object");
    rp = cJSON_IsObject(rp) ? rp : NULL;
    double theta = a->rotary_base, frac = a->rotary_frac;
    hs_status st;
    if ((st = hs_cfg_num(root, "", theta_key, 1e-6, 1e12, &theta, err)) ||
        (st = hs_cfg_num(rp, "rope_parameters.", "rope_theta", 1e-6, 1e12, &theta, err)) ||
        (st = hs_cfg_num(root, "", frac_key, 0, 1, &frac, err)) ||
        (st = hs_cfg_num(rp, "rope_parameters.", "partial_rotary_factor", 0, 1, &frac, err)))
        return st;
    a->rotary_base = (float)theta;
    a->rotary_frac = (float)frac;
    a->rotary_dims = (int)((double)d_head * frac);
    a->rotary_dims -= a->rotary_dims % 2;

    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (sc && !cJSON_IsNull(sc) && !cJSON_IsObject(sc))
        return hs_fail(err, HS_E_FORMAT, "config.json: 'rope_scaling' must be an object");
    const char *where = "rope_scaling.";
    if (!cJSON_IsObject(sc)) {
        sc = rp;
        where = "rope_parameters.";
    }
    const char *kind = sc ? hs_cfg_str(sc, "rope_type") : NULL;
    if (sc && !kind)
        kind = hs_cfg_str(sc, "type");
    a->rope_scaling = HS_ROPE_PLAIN;
    if (!kind || !strcmp(kind, "default"))
        return HS_OK;
    if (!strcmp(kind, "longrope") || !strcmp(kind, "su"))
        return parse_longrope(root, sc, where, max_pos, a, err);
    double factor = 0, low = 0, high = 0, orig = 0;
    if ((st = hs_cfg_num(sc, where, "factor", 1e-6, 1e6, &factor, err)))
        return st;
    if (!(factor > 0))
        return hs_fail(err, HS_E_FORMAT, "config.json: %s'factor' is missing", where);
    a->rope_factor = (float)factor;
    if (!strcmp(kind, "linear")) {
        a->rope_scaling = HS_ROPE_LINEAR;
        return HS_OK;
    }
    if (!strcmp(kind, "yarn"))
        return parse_yarn(sc, where, a, err);
    if (strcmp(kind, "llama3"))
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: rope scaling type '%.40s' is not "
                       "supported (expected default, linear, llama3, longrope or yarn)", kind);
    if ((st = hs_cfg_num(sc, where, "low_freq_factor", 1e-6, 1e6, &low, err)) ||
        (st = hs_cfg_num(sc, where, "high_freq_factor", 1e-6, 1e6, &high, err)) ||
        (st = hs_cfg_num(sc, where, "original_max_position_embeddings", 1, 1 << 24, &orig, err)))
        return st;
    if (!(low > 0) || !(high > low) || !(orig >= 1))
        return hs_fail(err, HS_E_FORMAT, "config.json: llama3 rope scaling needs "
                       "low_freq_factor < high_freq_factor and original_max_position_embeddings");
    a->rope_scaling = HS_ROPE_LLAMA3;
    a->rope_low_freq = (float)low;
    a->rope_high_freq = (float)high;
    a->rope_orig_ctx = (int)orig;
    return HS_OK;
}
