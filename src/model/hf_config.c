/* config.json of a Hugging Face folder → hs_model_config, with transformers' defaults. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "model/arch_mqa.h" /* includes hf_config.h */
#include "model/model_internal.h"

#define CONFIG_MAX_BYTES (4u << 20)
/* Every integer field, and a default derived from one, is at most this. */
#define CONFIG_INT_MAX 1000000000

/* Reads an integer field. required: a missing field is an error; else *out keeps its default. */
static hs_status get_int(const cJSON *root, const char *key, int required, int *out, hs_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) {
        if (required)
            return hs_fail(err, HS_E_FORMAT, "config.json: missing required field '%s'", key);
        return HS_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 ||
        v->valuedouble > CONFIG_INT_MAX)
        return hs_fail(err, HS_E_FORMAT, "config.json: field '%s' must be a non-negative integer",
                       key);
    *out = (int)v->valuedouble;
    return HS_OK;
}

static hs_status get_float(const cJSON *root, const char *key, float *out, hs_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v))
        return HS_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble <= 0 || v->valuedouble > 1)
        return hs_fail(err, HS_E_FORMAT, "config.json: field '%s' must be a number in (0, 1]", key);
    *out = (float)v->valuedouble;
    return HS_OK;
}

static const char *get_str(const cJSON *root, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A boolean field that must have the given value for headscope to compute the same thing
 * as transformers (absent = transformers' default). */
static hs_status require_bool(const cJSON *root, const char *key, int want, hs_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v))
        return HS_OK;
    if (!cJSON_IsBool(v))
        return hs_fail(err, HS_E_FORMAT, "config.json: field '%s' must be true or false", key);
    if (cJSON_IsTrue(v) != want)
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: '%s': %s is not supported", key,
                       want ? "false" : "true");
    return HS_OK;
}

static hs_status parse_act(const char *name, hs_activation *act, hs_error *err)
{
    if (!name)
        return HS_OK;
    if (!strcmp(name, "gelu_new") || !strcmp(name, "gelu_pytorch_tanh"))
        *act = HS_ACT_GELU_TANH;
    else if (!strcmp(name, "gelu"))
        *act = HS_ACT_GELU_ERF;
    else
        return hs_fail(err, HS_E_UNSUPPORTED,
                       "config.json: activation '%s' is not supported (expected gelu_new, "
                       "gelu_pytorch_tanh or gelu)", name);
    return HS_OK;
}

static hs_status parse_gpt2(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    (void)a;
    hs_status st;
    int n_inner = 0;
    c->family = HS_FAMILY_GPT2;
    c->ln_eps = 1e-5f;
    c->act = HS_ACT_GELU_TANH;
    c->n_ctx = 1024;
    if ((st = get_int(root, "n_layer", 1, &c->n_layer, err)) ||
        (st = get_int(root, "n_head", 1, &c->n_head, err)) ||
        (st = get_int(root, "n_embd", 1, &c->d_model, err)) ||
        (st = get_int(root, "vocab_size", 1, &c->vocab_size, err)) ||
        (st = get_int(root, "n_positions", 0, &c->n_ctx, err)) ||
        (st = get_int(root, "n_inner", 0, &n_inner, err)) ||
        (st = get_float(root, "layer_norm_epsilon", &c->ln_eps, err)) ||
        (st = parse_act(get_str(root, "activation_function"), &c->act, err)) ||
        (st = require_bool(root, "scale_attn_weights", 1, err)) ||
        (st = require_bool(root, "scale_attn_by_inverse_layer_idx", 0, err)))
        return st;
    if (n_inner <= 0 && c->d_model > CONFIG_INT_MAX / 4)
        return hs_fail(err, HS_E_FORMAT, "config.json: field 'n_embd' (%d) is too large: "
                       "its default n_inner, 4 x n_embd, passes 1e9", c->d_model);
    c->d_ff = n_inner > 0 ? n_inner : 4 * c->d_model;
    c->type_vocab_size = 0;
    return HS_OK;
}

/* The config.json keys of an encoder's dimensions, which each family names its own way;
 * the maximum positions and the activation are optional (the defaults already in c). */
typedef struct dim_keys {
    const char *layers, *heads, *d_model, *d_ff, *n_ctx, *act;
} dim_keys;

static hs_status get_dims(const cJSON *root, const dim_keys *k, hs_model_config *c, hs_error *err)
{
    hs_status st;
    if ((st = get_int(root, k->layers, 1, &c->n_layer, err)) ||
        (st = get_int(root, k->heads, 1, &c->n_head, err)) ||
        (st = get_int(root, k->d_model, 1, &c->d_model, err)) ||
        (st = get_int(root, k->d_ff, 1, &c->d_ff, err)) ||
        (st = get_int(root, "vocab_size", 1, &c->vocab_size, err)) ||
        (st = get_int(root, k->n_ctx, 0, &c->n_ctx, err)))
        return st;
    return parse_act(get_str(root, k->act), &c->act, err);
}

static hs_status parse_bert(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    static const dim_keys keys = {"num_hidden_layers", "num_attention_heads", "hidden_size",
                                  "intermediate_size", "max_position_embeddings", "hidden_act"};
    (void)a;
    hs_status st;
    c->family = HS_FAMILY_BERT;
    c->ln_eps = 1e-12f;
    c->act = HS_ACT_GELU_ERF;
    c->n_ctx = 512;
    c->type_vocab_size = 2;
    if ((st = get_dims(root, &keys, c, err)) ||
        (st = get_int(root, "type_vocab_size", 0, &c->type_vocab_size, err)) ||
        (st = get_float(root, "layer_norm_eps", &c->ln_eps, err)))
        return st;
    const char *pe = get_str(root, "position_embedding_type");
    if (pe && strcmp(pe, "absolute"))
        return hs_fail(err, HS_E_UNSUPPORTED,
                       "config.json: position_embedding_type '%s' is not supported (expected "
                       "absolute)", pe);
    return HS_OK;
}

/* ---- the rotary decoders ----------------------------------------------------------- */

/* A number field in [lo, hi]; absent or null leaves *out alone. */
static hs_status get_num(const cJSON *obj, const char *where, const char *key, double lo,
                         double hi, double *out, hs_error *err)
{
    const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
    if (!v || cJSON_IsNull(v))
        return HS_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > hi)
        return hs_fail(err, HS_E_FORMAT, "config.json: %s'%s' must be a number in [%g, %g]",
                       where, key, lo, hi);
    *out = v->valuedouble;
    return HS_OK;
}

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
    if ((st = get_num(sc, where, "original_max_position_embeddings", 1, 1 << 24, &orig, err)) ||
        (!orig && (st = get_num(root, "", "original_max_position_embeddings", 1, 1 << 24, &orig,
                                err))) ||
        (st = get_num(sc, where, "factor", 1e-6, 1e6, &factor, err)) ||
        (st = get_num(sc, where, "attention_factor", 1e-6, 1e6, &attn, err)))
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
static double yarn_mscale(double factor, double m)
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
    if ((st = get_num(sc, where, "beta_fast", 1e-6, 1e6, &fast, err)) ||
        (st = get_num(sc, where, "beta_slow", 1e-6, 1e6, &slow, err)) ||
        (st = get_num(sc, where, "original_max_position_embeddings", 1, 1 << 24, &orig, err)) ||
        (st = get_num(sc, where, "mscale", 0, 1e6, &ms, err)) ||
        (st = get_num(sc, where, "mscale_all_dim", 0, 1e6, &ms_all, err)) ||
        (st = get_num(sc, where, "attention_factor", 1e-6, 1e6, &af, err)) ||
        (st = require_bool(sc, "truncate", 1, err)))
        return st;
    if (!(fast > slow))
        return hs_fail(err, HS_E_FORMAT, "config.json: %s'beta_fast' must exceed 'beta_slow'",
                       where);
    if (!(af > 0))
        af = ms > 0 && ms_all > 0 ? yarn_mscale(a->rope_factor, ms) /
                                        yarn_mscale(a->rope_factor, ms_all)
                                  : yarn_mscale(a->rope_factor, 1);
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
static hs_status parse_rope(const cJSON *root, hs_arch *a, int d_head, const char *theta_key,
                            const char *frac_key, int max_pos, hs_error *err)
{
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    if (rp && !cJSON_IsNull(rp) && !cJSON_IsObject(rp))
        return hs_fail(err, HS_E_FORMAT, "config.json: 'rope_parameters' must be an object");
    rp = cJSON_IsObject(rp) ? rp : NULL;
    double theta = a->rotary_base, frac = a->rotary_frac;
    hs_status st;
    if ((st = get_num(root, "", theta_key, 1e-6, 1e12, &theta, err)) ||
        (st = get_num(rp, "rope_parameters.", "rope_theta", 1e-6, 1e12, &theta, err)) ||
        (st = get_num(root, "", frac_key, 0, 1, &frac, err)) ||
        (st = get_num(rp, "rope_parameters.", "partial_rotary_factor", 0, 1, &frac, err)))
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
    const char *kind = sc ? get_str(sc, "rope_type") : NULL;
    if (sc && !kind)
        kind = get_str(sc, "type");
    a->rope_scaling = HS_ROPE_PLAIN;
    if (!kind || !strcmp(kind, "default"))
        return HS_OK;
    if (!strcmp(kind, "longrope") || !strcmp(kind, "su"))
        return parse_longrope(root, sc, where, max_pos, a, err);
    double factor = 0, low = 0, high = 0, orig = 0;
    if ((st = get_num(sc, where, "factor", 1e-6, 1e6, &factor, err)))
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
    if ((st = get_num(sc, where, "low_freq_factor", 1e-6, 1e6, &low, err)) ||
        (st = get_num(sc, where, "high_freq_factor", 1e-6, 1e6, &high, err)) ||
        (st = get_num(sc, where, "original_max_position_embeddings", 1, 1 << 24, &orig, err)))
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

/* A boolean field into *out; absent or null leaves *out alone. */
static hs_status get_bool(const cJSON *root, const char *key, int *out, hs_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v))
        return HS_OK;
    if (!cJSON_IsBool(v))
        return hs_fail(err, HS_E_FORMAT, "config.json: field '%s' must be true or false", key);
    *out = cJSON_IsTrue(v);
    return HS_OK;
}

/* The dimensions every rotary decoder config names the same way. */
static hs_status get_decoder_dims(const cJSON *root, hs_model_config *c, hs_error *err)
{
    hs_status st;
    if ((st = get_int(root, "num_hidden_layers", 1, &c->n_layer, err)) ||
        (st = get_int(root, "num_attention_heads", 1, &c->n_head, err)) ||
        (st = get_int(root, "hidden_size", 1, &c->d_model, err)) ||
        (st = get_int(root, "intermediate_size", 1, &c->d_ff, err)) ||
        (st = get_int(root, "vocab_size", 1, &c->vocab_size, err)) ||
        (st = get_int(root, "max_position_embeddings", 0, &c->n_ctx, err)))
        return st;
    if (c->n_head < 1 || (!c->d_head && c->d_model % c->n_head))
        return hs_fail(err, HS_E_VALUE, "config: d_model %d is not divisible by n_head %d",
                       c->d_model, c->n_head);
    return HS_OK;
}

static hs_status parse_gpt_neox(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    hs_status st;
    c->family = HS_FAMILY_GPT_NEOX;
    c->ln_eps = 1e-5f;
    c->act = HS_ACT_GELU_ERF;
    c->n_ctx = 2048;
    if ((st = get_bool(root, "use_parallel_residual", &a->parallel_residual, err)) ||
        (st = get_decoder_dims(root, c, err)) ||
        (st = get_float(root, "layer_norm_eps", &c->ln_eps, err)) ||
        (st = parse_act(get_str(root, "hidden_act"), &c->act, err)) ||
        (st = require_bool(root, "attention_bias", 1, err)) ||
        (st = get_bool(root, "tie_word_embeddings", &a->tied_embeddings, err)) ||
        (st = parse_rope(root, a, c->d_model / c->n_head, "rotary_emb_base", "rotary_pct",
                         c->n_ctx, err)))
        return st;
    return HS_OK;
}

/* Llama and Qwen2: RMSNorm (rms_norm_eps), num_key_value_heads, a gated SiLU MLP, rope_theta. */
static hs_status parse_llama_like(const cJSON *root, hs_model_config *c, hs_arch *a,
                                  hs_error *err)
{
    hs_status st;
    int kv = a->n_kv_head;
    c->ln_eps = 1e-6f;
    c->act = HS_ACT_SILU; /* gated: the family's descriptor */
    /* head_dim as transformers reads it: the query/key/value width of a head, queries
     * num_attention_heads * head_dim wide (not necessarily hidden_size); absent or null:
     * hidden_size / num_attention_heads */
    if ((st = get_int(root, "head_dim", 0, &c->d_head, err)) ||
        (st = get_decoder_dims(root, c, err)) ||
        (st = get_int(root, "num_key_value_heads", 0, &kv, err)) ||
        (st = get_float(root, "rms_norm_eps", &c->ln_eps, err)) ||
        (st = require_bool(root, "mlp_bias", 0, err)) ||
        (st = get_bool(root, "tie_word_embeddings", &a->tied_embeddings, err)) ||
        (st = parse_rope(root, a, c->d_head ? c->d_head : c->d_model / c->n_head, "rope_theta",
                         "partial_rotary_factor", c->n_ctx, err)))
        return st;
    const char *act = get_str(root, "hidden_act");
    if (act && strcmp(act, "silu"))
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: hidden_act '%s' is not supported "
                       "(expected silu)", act);
    a->n_kv_head = kv > 0 ? kv : c->n_head;
    if (c->n_head % a->n_kv_head)
        return hs_fail(err, HS_E_VALUE, "config.json: num_attention_heads %d is not a multiple of "
                       "num_key_value_heads %d", c->n_head, a->n_kv_head);
    return HS_OK;
}

static hs_status parse_llama(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    hs_status st = get_bool(root, "attention_bias", &a->qkv_bias, err);
    if (st)
        return st;
    a->o_bias = a->qkv_bias; /* q, k, v and o biases */
    c->family = HS_FAMILY_LLAMA;
    c->n_ctx = 2048;
    return parse_llama_like(root, c, a, err);
}

static hs_status parse_qwen2(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    hs_status st = require_bool(root, "use_sliding_window", 0, err);
    if (st)
        return st;
    c->family = HS_FAMILY_QWEN2;
    c->n_ctx = 32768;
    a->n_kv_head = 32; /* transformers' Qwen2Config default */
    return parse_llama_like(root, c, a, err);
}

/* sliding_window: every layer's queries see the last W keys, themselves included
 * (transformers' mask: key j visible from query i when i - W < j <= i); null: no window;
 * absent: dflt (0: none). */
static hs_status parse_window(const cJSON *root, int dflt, hs_arch *a, hs_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    int w = v ? 0 : dflt;
    hs_status st = get_int(root, "sliding_window", 0, &w, err);
    if (st)
        return st;
    if (v && !cJSON_IsNull(v) && w < 1)
        return hs_fail(err, HS_E_FORMAT, "config.json: field 'sliding_window' must be at least 1 "
                       "(or null: no window)");
    a->sliding_window = w;
    a->global_every = 0; /* every layer local */
    return HS_OK;
}

/* Mistral: Llama's block (no biases) with 8 KV heads by default and a sliding window on
 * every layer (transformers' default 4096 when the key is absent); opened as the llama
 * family, which is how llama.cpp files it. */
static hs_status parse_mistral(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    hs_status st = parse_window(root, 4096, a, err);
    if (st)
        return st;
    c->family = HS_FAMILY_LLAMA;
    c->n_ctx = 4096 * 32;
    a->n_kv_head = 8; /* transformers' MistralConfig default */
    return parse_llama_like(root, c, a, err);
}

/* Phi-3: Llama's block with fused qkv_proj and gate_up_proj (its name table), no biases, a
 * sliding window where configured, longrope ("su") scaling (parse_rope). */
static hs_status parse_phi3(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    hs_status st = parse_window(root, 0, a, err);
    if (st)
        return st;
    c->family = HS_FAMILY_PHI3;
    c->n_ctx = 4096;
    if ((st = parse_llama_like(root, c, a, err)))
        return st;
    if (a->rope_scaling == HS_ROPE_YARN || a->rope_scaling == HS_ROPE_LLAMA3)
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: rope scaling type '%s' is not "
                       "supported for phi3 (expected default, linear or longrope)",
                       a->rope_scaling == HS_ROPE_YARN ? "yarn" : "llama3");
    return HS_OK;
}

/* Families transformers has that the block cannot express, each with the reason. */
static const struct {
    const char *model_type, *why;
} refused[] = {
    {"gpt_neo", "GPT-Neo alternates global and local (windowed) attention layers and leaves "
                "its attention scores unscaled"},
};


/* RoBERTa (and XLM-R): BERT's keys; positions start at padding_idx + 1 = pad_token_id + 1
 * (fairseq's make_positions), so max_position_embeddings - pad - 1 tokens fit. Its MLM head
 * applies the exact GELU whatever hidden_act says, so another activation is refused. */
static hs_status parse_roberta(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    int pad = 1;
    hs_status st = parse_bert(root, c, a, err);
    if (st || (st = get_int(root, "pad_token_id", 0, &pad, err)))
        return st;
    c->family = HS_FAMILY_ROBERTA;
    if (c->act != HS_ACT_GELU_ERF)
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: hidden_act '%s' is not supported for "
                       "RoBERTa (expected gelu)", get_str(root, "hidden_act"));
    if (pad + 1 >= c->n_ctx)
        return hs_fail(err, HS_E_VALUE, "config.json: max_position_embeddings %d leaves no "
                       "position after pad_token_id %d + 1", c->n_ctx, pad);
    a->pos_offset = pad + 1;
    c->n_ctx -= pad + 1;
    return HS_OK;
}

/* DistilBERT: its own keys (dim, n_layers, n_heads, hidden_dim, activation); LayerNorm eps
 * 1e-12 (not a config key); no token types. sinusoidal_pos_embds: transformers saves the
 * sinusoidal table as position_embeddings like a learned one, and headscope reads it from
 * the file; a checkpoint without it gets the table computed, as transformers initialises it. */
static hs_status parse_distilbert(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    static const dim_keys keys = {"n_layers", "n_heads", "dim", "hidden_dim",
                                  "max_position_embeddings", "activation"};
    c->family = HS_FAMILY_DISTILBERT;
    c->ln_eps = 1e-12f;
    c->act = HS_ACT_GELU_ERF;
    c->n_ctx = 512;
    c->type_vocab_size = 0;
    hs_status st = get_dims(root, &keys, c, err);
    if (st)
        return st;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "sinusoidal_pos_embds");
    if (v && !cJSON_IsNull(v) && !cJSON_IsBool(v))
        return hs_fail(err, HS_E_FORMAT, "config.json: field 'sinusoidal_pos_embds' must be true "
                       "or false");
    a->pos_sinusoidal = cJSON_IsTrue(v);
    return HS_OK;
}

/* T5 (t5-small/base, v1.1, Flan-T5): d_kv is the head width (n_head d_kv may differ from
 * d_model); feed_forward_proj "relu" (v1.0) or "gated-gelu" (v1.1, gelu_new gated), as
 * transformers' T5Config reads it ("gated-" then the activation); tie_word_embeddings
 * (default true) ties the LM head to the embeddings and scales the final states by
 * d_model^-0.5 before it. No position limit of its own: relative buckets. */
static hs_status parse_t5(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    int n_dec = -1, tied = 1;
    const char *ff = get_str(root, "feed_forward_proj");
    hs_status st;
    c->family = HS_FAMILY_T5;
    c->ln_eps = 1e-6f;
    c->n_ctx = 32768;
    c->vocab_size = 32128;
    if ((st = get_int(root, "num_layers", 1, &c->n_enc_layer, err)) ||
        (st = get_int(root, "num_decoder_layers", 0, &n_dec, err)) ||
        (st = get_int(root, "num_heads", 1, &c->n_head, err)) ||
        (st = get_int(root, "d_model", 1, &c->d_model, err)) ||
        (st = get_int(root, "d_kv", 1, &c->d_head, err)) ||
        (st = get_int(root, "d_ff", 1, &c->d_ff, err)) ||
        (st = get_int(root, "vocab_size", 0, &c->vocab_size, err)) ||
        (st = get_int(root, "relative_attention_num_buckets", 0, &a->rel_buckets, err)) ||
        (st = get_int(root, "relative_attention_max_distance", 0, &a->rel_max_distance, err)) ||
        (st = get_int(root, "decoder_start_token_id", 0, &c->decoder_start_id, err)) ||
        (st = get_float(root, "layer_norm_epsilon", &c->ln_eps, err)) ||
        (st = get_bool(root, "tie_word_embeddings", &tied, err)))
        return st;
    if (c->d_head < 1)
        return hs_fail(err, HS_E_VALUE, "config.json: d_kv must be positive");
    c->n_layer = c->n_enc_layer + (n_dec < 0 ? c->n_enc_layer : n_dec);
    const char *act = ff && !strncmp(ff, "gated-", 6) ? ff + 6 : ff;
    a->gated = act != ff;
    if (!ff || !strcmp(act, "relu"))
        c->act = HS_ACT_RELU;
    else if (!strcmp(act, "gelu"))
        c->act = a->gated ? HS_ACT_GELU_TANH : HS_ACT_GELU_ERF; /* T5Config: gated-gelu is gelu_new */
    else if (!strcmp(act, "gelu_new"))
        c->act = HS_ACT_GELU_TANH;
    else if (!strcmp(act, "silu"))
        c->act = HS_ACT_SILU;
    else
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: feed_forward_proj '%s' is not "
                       "supported (expected relu, gated-gelu, gelu or gated-silu)", ff);
    a->tied_embeddings = tied;
    a->head_scale = tied ? (float)(1.0 / sqrt((double)c->d_model)) : 0.0f;
    if (c->decoder_start_id >= c->vocab_size)
        return hs_fail(err, HS_E_VALUE, "config.json: decoder_start_token_id %d is outside the "
                       "vocabulary (%d)", c->decoder_start_id, c->vocab_size);
    return HS_OK;
}

/* The config.json reader of each family: its model_type and a parser that fills the
 * dimensions and the per-model values of the descriptor a (a copy of the family's). */
static const struct {
    const char *model_type;
    hs_family family;
    hs_status (*parse)(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err);
} parsers[] = {
    {"gpt2", HS_FAMILY_GPT2, parse_gpt2},
    {"bert", HS_FAMILY_BERT, parse_bert},
    {"roberta", HS_FAMILY_ROBERTA, parse_roberta},
    {"xlm-roberta", HS_FAMILY_ROBERTA, parse_roberta}, /* the same computation */
    {"distilbert", HS_FAMILY_DISTILBERT, parse_distilbert},
    {"gpt_neox", HS_FAMILY_GPT_NEOX, parse_gpt_neox},
    {"llama", HS_FAMILY_LLAMA, parse_llama},
    {"qwen2", HS_FAMILY_QWEN2, parse_qwen2},
    {"falcon", HS_FAMILY_FALCON, hs_parse_falcon},
    {"gpt_bigcode", HS_FAMILY_GPT_BIGCODE, hs_parse_gpt_bigcode},
    {"mistral", HS_FAMILY_LLAMA, parse_mistral}, /* llama with a window */
    {"phi3", HS_FAMILY_PHI3, parse_phi3},
    {"deepseek_v2", HS_FAMILY_DEEPSEEK_V2, hs_parse_deepseek_v2}, /* hf_config_deepseek.c */
    {"deepseek_v3", HS_FAMILY_DEEPSEEK_V3, hs_parse_deepseek_v3},
    {"t5", HS_FAMILY_T5, parse_t5},
    HS_NORMS_PARSERS /* qwen3, olmo2, gemma2, gemma3_text, gemma3: hf_config_norms.c */
};

hs_status hs_hf_config_load(const char *path, hs_model_config *cfg, hs_arch *arch, hs_error *err)
{
    char *text = NULL;
    size_t len = 0;
    hs_status st = hs_read_file(path, CONFIG_MAX_BYTES, &text, &len, err);
    if (st)
        return st;
    char bad[96];
    cJSON *root = hs_json_parse_strict(text, len, bad, sizeof bad);
    if (!root) {
        st = hs_fail(err, HS_E_FORMAT, "'%s' is not a JSON object (not valid JSON: %s)", path, bad);
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        st = hs_fail(err, HS_E_FORMAT, "'%s' is not a JSON object", path);
        goto done;
    }
    memset(cfg, 0, sizeof *cfg);
    const char *mt = get_str(root, "model_type");
    if (!mt) {
        st = hs_fail(err, HS_E_FORMAT, "config.json: missing required field 'model_type'");
    } else {
        size_t k = 0;
        while (k < sizeof parsers / sizeof parsers[0] && strcmp(parsers[k].model_type, mt))
            k++;
        if (k < sizeof parsers / sizeof parsers[0]) {
            *arch = *hs_arch_of(parsers[k].family);
            cfg->arch = arch;
            st = parsers[k].parse(root, cfg, arch, err);
        }
        else {
            const char *why = NULL;
            for (size_t r = 0; r < sizeof refused / sizeof refused[0]; r++)
                if (!strcmp(refused[r].model_type, mt))
                    why = refused[r].why;
            if (why)
                st = hs_fail(err, HS_E_UNSUPPORTED, "config.json: model_type '%s' is not "
                             "supported: %s", mt, why);
            else
                st = hs_fail(err, HS_E_UNSUPPORTED, "config.json: model_type '%s' is not "
                             "supported (expected %s)", mt, hs_arch_list());
        }
    }
    if (st == HS_OK && arch->rope_scaling == HS_ROPE_YARN && !arch->rope_orig_ctx)
        arch->rope_orig_ctx = cfg->n_ctx; /* YaRN's original context: the model's */
    if (st == HS_OK)
        st = hs_config_validate(cfg, err);
done:
    cJSON_Delete(root);
    free(text);
    return st;
}

/* ---- the readers for parsers in other files (model/hf_config.h) ---------------------------- */

hs_status hs_cfg_int(const cJSON *root, const char *key, int required, int *out, hs_error *err)
{
    return get_int(root, key, required, out, err);
}

hs_status hs_cfg_num(const cJSON *obj, const char *where, const char *key, double lo, double hi,
                     double *out, hs_error *err)
{
    return get_num(obj, where, key, lo, hi, out, err);
}

hs_status hs_cfg_bool(const cJSON *root, const char *key, int *out, hs_error *err)
{
    return get_bool(root, key, out, err);
}

hs_status hs_cfg_unit(const cJSON *root, const char *key, float *out, hs_error *err)
{
    return get_float(root, key, out, err);
}

hs_status hs_cfg_require(const cJSON *root, const char *key, int want, hs_error *err)
{
    return require_bool(root, key, want, err);
}

hs_status hs_cfg_act(const char *name, hs_activation *act, hs_error *err)
{
    return parse_act(name, act, err);
}

hs_status hs_cfg_rope(const cJSON *root, hs_arch *a, int d_head, const char *theta_key,
                      const char *frac_key, int max_pos, hs_error *err)
{
    return parse_rope(root, a, d_head, theta_key, frac_key, max_pos, err);
}

const char *hs_cfg_str(const cJSON *root, const char *key) { return get_str(root, key); }

double hs_cfg_yarn_mscale(double factor, double m) { return yarn_mscale(factor, m); }

hs_status hs_cfg_llama_dims(const cJSON *root, hs_model_config *c, hs_arch *a, int rope_dims,
                            hs_error *err)
{
    hs_status st;
    if ((st = get_decoder_dims(root, c, err)) ||
        (st = get_float(root, "rms_norm_eps", &c->ln_eps, err)) ||
        (st = require_bool(root, "mlp_bias", 0, err)) ||
        (st = get_bool(root, "tie_word_embeddings", &a->tied_embeddings, err)) ||
        (st = parse_rope(root, a, rope_dims, "rope_theta", "partial_rotary_factor", c->n_ctx,
                         err)))
        return st;
    const char *act = get_str(root, "hidden_act");
    if (act && strcmp(act, "silu"))
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: hidden_act '%s' is not supported "
                       "(expected silu)", act);
    return HS_OK;
}

hs_status hs_cfg_llama_like(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    return parse_llama_like(root, c, a, err);
}
