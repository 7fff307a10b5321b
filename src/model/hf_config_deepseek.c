/* deepseek_v2 and deepseek_v3 configs: multi-head latent attention and the mixture of
 * experts, with transformers' defaults for each (DeepseekV2Config, DeepseekV3Config) and
 * DeepSeek's published keys (scoring_func, topk_method, moe_layer_freq). */
#include <stdio.h>
#include <string.h>

#include "model/hf_config.h"

typedef struct ds_defaults {
    hs_family family;
    int q_lora, kv_lora, nope, rope, v, experts, shared, moe_ff, first_dense, top_k;
    int groups, topk_groups, norm_topk;
    double scale;
    const char *scoring, *routing;
} ds_defaults;

static const ds_defaults v2 = {HS_FAMILY_DEEPSEEK_V2, 1536, 512, 128, 64, 128, 64, 2, 1407, 0,
                               0, 0, 0, 0, 1.0, "softmax", "greedy"};
static const ds_defaults v3 = {HS_FAMILY_DEEPSEEK_V3, 1536, 512, 128, 64, 128, 256, 1, 2048, 3,
                               8, 8, 4, 1, 2.5, "sigmoid", "noaux_tc"};

/* An integer field that may be null (then 0: none). */
static hs_status int_or_null(const cJSON *root, const char *key, int *out, hs_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (v && cJSON_IsNull(v)) {
        *out = 0;
        return HS_OK;
    }
    return hs_cfg_int(root, key, 0, out, err);
}

/* The router: scoring_func and topk_method by name (softmax with greedy or
 * group_limited_greedy, sigmoid with noaux_tc), the groups they need. */
static hs_status parse_router(const cJSON *root, const ds_defaults *df, hs_arch *a, hs_error *err)
{
    const char *sc = hs_cfg_str(root, "scoring_func"), *tm = hs_cfg_str(root, "topk_method");
    sc = sc ? sc : df->scoring;
    tm = tm ? tm : df->routing;
    if (strcmp(sc, "softmax") && strcmp(sc, "sigmoid"))
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: scoring_func '%.40s' is not "
                       "supported (expected softmax or sigmoid)", sc);
    a->moe_scoring = !strcmp(sc, "sigmoid") ? HS_MOE_SIGMOID : HS_MOE_SOFTMAX;
    if (!strcmp(tm, "greedy") && a->moe_scoring == HS_MOE_SOFTMAX)
        a->moe_routing = HS_MOE_GREEDY;
    else if (!strcmp(tm, "group_limited_greedy") && a->moe_scoring == HS_MOE_SOFTMAX)
        a->moe_routing = HS_MOE_GROUP_LIMITED;
    else if (!strcmp(tm, "noaux_tc") && a->moe_scoring == HS_MOE_SIGMOID)
        a->moe_routing = HS_MOE_NOAUX_TC;
    else
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: topk_method '%.40s' with "
                       "scoring_func '%s' is not supported (expected greedy or "
                       "group_limited_greedy with softmax, noaux_tc with sigmoid)", tm, sc);
    if (a->moe_routing == HS_MOE_GREEDY)
        return HS_OK;
    int E = a->moe_experts, g = a->moe_groups, tg = a->moe_topk_groups;
    if (g < 1 || g > 256 || tg < 1 || tg > g || E % g || a->moe_top_k > tg * (E / g) ||
        (a->moe_routing == HS_MOE_NOAUX_TC && E / g < 2))
        return hs_fail(err, HS_E_VALUE, "config.json: %s routing needs n_group dividing "
                       "n_routed_experts (%d), at most 256, 1 <= topk_group <= n_group and "
                       "num_experts_per_tok (%d) experts in topk_group groups%s", tm, E,
                       a->moe_top_k, a->moe_routing == HS_MOE_NOAUX_TC ? " of 2 or more" : "");
    return HS_OK;
}

/* The mixture of experts: none when n_routed_experts is null (or 0) or every layer is
 * before first_k_dense_replace; moe_layer_freq other than 1 is refused. */
static hs_status parse_moe(const cJSON *root, const hs_model_config *c, const ds_defaults *df,
                           hs_arch *a, hs_error *err)
{
    int E = df->experts, freq = 1, norm = df->norm_topk;
    double scale = df->scale;
    a->moe_shared = df->shared;
    a->moe_ff = df->moe_ff;
    a->moe_first_dense = df->first_dense;
    a->moe_top_k = df->top_k;
    a->moe_groups = df->groups;
    a->moe_topk_groups = df->topk_groups;
    hs_status st;
    if ((st = int_or_null(root, "n_routed_experts", &E, err)) ||
        (st = int_or_null(root, "n_shared_experts", &a->moe_shared, err)) ||
        (st = hs_cfg_int(root, "moe_intermediate_size", 0, &a->moe_ff, err)) ||
        (st = hs_cfg_int(root, "first_k_dense_replace", 0, &a->moe_first_dense, err)) ||
        (st = int_or_null(root, "num_experts_per_tok", &a->moe_top_k, err)) ||
        (st = int_or_null(root, "n_group", &a->moe_groups, err)) ||
        (st = int_or_null(root, "topk_group", &a->moe_topk_groups, err)) ||
        (st = hs_cfg_int(root, "moe_layer_freq", 0, &freq, err)) ||
        (st = hs_cfg_bool(root, "norm_topk_prob", &norm, err)) ||
        (st = hs_cfg_num(root, "", "routed_scaling_factor", 0, 1e6, &scale, err)))
        return st;
    if (E < 1 || a->moe_first_dense >= c->n_layer) {
        a->moe_experts = 0;
        return HS_OK;
    }
    if (freq != 1)
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: moe_layer_freq %d is not supported "
                       "(expected 1: every layer from first_k_dense_replace on)", freq);
    if (a->moe_top_k < 1 || a->moe_top_k > E || a->moe_ff < 1)
        return hs_fail(err, HS_E_VALUE, "config.json: num_experts_per_tok must be in [1, "
                       "n_routed_experts %d] and moe_intermediate_size positive", E);
    if ((size_t)E * (size_t)a->moe_ff > 100000000u)
        return hs_fail(err, HS_E_VALUE, "config.json: %d experts of %d are too many", E,
                       a->moe_ff);
    a->moe_experts = E;
    a->moe_norm_topk = norm;
    a->moe_scale = (float)scale;
    return parse_router(root, df, a, err);
}

/* Latent attention's dimensions, the Llama keys, and under YaRN the softmax scale's
 * mscale(factor, mscale_all_dim)^2 (DeepSeek's modelling code). */
static hs_status parse_deepseek(const cJSON *root, const ds_defaults *df, hs_model_config *c,
                                hs_arch *a, hs_error *err)
{
    hs_status st;
    int q_lora = df->q_lora, kv_lora = df->kv_lora, nope = df->nope, rope = df->rope, v = df->v;
    c->family = df->family;
    c->n_ctx = df->family == HS_FAMILY_DEEPSEEK_V3 ? 4096 : 2048;
    c->ln_eps = 1e-6f;
    c->act = HS_ACT_SILU;
    if ((st = int_or_null(root, "q_lora_rank", &q_lora, err)) ||
        (st = hs_cfg_int(root, "kv_lora_rank", 0, &kv_lora, err)) ||
        (st = hs_cfg_int(root, "qk_nope_head_dim", 0, &nope, err)) ||
        (st = hs_cfg_int(root, "qk_rope_head_dim", 0, &rope, err)) ||
        (st = hs_cfg_int(root, "v_head_dim", 0, &v, err)) ||
        (st = hs_cfg_require(root, "attention_bias", 0, err)) ||
        (st = hs_cfg_require(root, "rope_interleave", 1, err)))
        return st;
    if (kv_lora < 1 || rope < 2 || v < 1 || rope > HS_ROTARY_MAX_DIMS)
        return hs_fail(err, HS_E_VALUE, "config.json: kv_lora_rank, qk_rope_head_dim (even, at "
                       "most %d) and v_head_dim must be positive", HS_ROTARY_MAX_DIMS);
    c->d_head = v;
    if ((st = hs_cfg_llama_dims(root, c, a, rope, err)) ||
        (st = parse_moe(root, c, df, a, err)))
        return st;
    a->mla_q_lora = q_lora;
    a->mla_kv_lora = kv_lora;
    a->mla_nope = nope;
    a->n_kv_head = c->n_head;
    a->mla_scale = 1.0f;
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (!cJSON_IsObject(sc))
        sc = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    double ms_all = 0;
    if (a->rope_scaling == HS_ROPE_YARN && cJSON_IsObject(sc) &&
        (st = hs_cfg_num(sc, "rope_scaling.", "mscale_all_dim", 0, 1e6, &ms_all, err)))
        return st;
    if (ms_all > 0) {
        double m = hs_cfg_yarn_mscale(a->rope_factor, ms_all);
        a->mla_scale = (float)(m * m);
    }
    return HS_OK;
}

hs_status hs_parse_deepseek_v2(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    return parse_deepseek(root, &v2, c, a, err);
}

hs_status hs_parse_deepseek_v3(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    return parse_deepseek(root, &v3, c, a, err);
}
