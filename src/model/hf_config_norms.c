/* config.json of the normalised decoders (Qwen3, OLMo-2, Gemma 2, Gemma 3 text), with
 * transformers' defaults; everything these readers cannot compute exactly is refused by name. */
#include <math.h>
#include <string.h>

#include "model/arch_norms.h"
#include "model/hf_config.h"

/* Qwen3's attention (Qwen3 and Qwen3-MoE): Llama's keys, no window, no biases; kv the
 * default of num_key_value_heads. */
static hs_status qwen3_like(const cJSON *root, hs_family f, int kv, hs_model_config *c,
                            hs_arch *a, hs_error *err)
{
    hs_status st;
    if ((st = hs_cfg_require(root, "use_sliding_window", 0, err)) ||
        (st = hs_cfg_require(root, "attention_bias", 0, err)))
        return st;
    c->family = f;
    c->n_ctx = 32768;
    a->n_kv_head = kv;
    return hs_cfg_llama_like(root, c, a, err);
}

hs_status hs_parse_qwen3(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    c->d_head = 128; /* Qwen3Config's head_dim default, 32 its num_key_value_heads' */
    return qwen3_like(root, HS_FAMILY_QWEN3, 32, c, a, err);
}

hs_status hs_parse_olmo2(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    hs_status st = hs_cfg_require(root, "attention_bias", 0, err);
    if (st)
        return st;
    c->family = HS_FAMILY_OLMO2;
    c->n_ctx = 2048;
    if ((st = hs_cfg_llama_like(root, c, a, err)))
        return st;
    if (!cJSON_GetObjectItemCaseSensitive(root, "rms_norm_eps"))
        c->ln_eps = 1e-5f; /* Olmo2Config's default */
    return HS_OK;
}

/* A softcap key: absent or null 0 (none), else a positive number. */
static hs_status softcap(const cJSON *root, const char *key, float *out, hs_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (v && cJSON_IsNull(v)) {
        *out = 0.0f;
        return HS_OK;
    }
    double cap = *out;
    hs_status st = hs_cfg_num(root, "", key, 1e-3, 1e6, &cap, err);
    *out = (float)cap;
    return st;
}

/* Which layers are local: layer_types (transformers 4.53 on) when present, checked to be the
 * repeating pattern the descriptor holds (global_every); else sliding_window_pattern (Gemma 3)
 * or the family's default. */
static hs_status layer_pattern(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    double pat = a->global_every;
    hs_status st = hs_cfg_num(root, "", "sliding_window_pattern", 1, 1e6, &pat, err);
    if (st)
        return st;
    a->global_every = (int)pat;
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    if (!lt || cJSON_IsNull(lt))
        return HS_OK;
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->n_layer)
        return hs_fail(err, HS_E_FORMAT, "config.json: 'layer_types' must be a list of %d "
                       "strings", c->n_layer);
    int first_full = -1, l = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, lt) {
        int full = cJSON_IsString(t) && !strcmp(t->valuestring, "full_attention");
        if (!full && !(cJSON_IsString(t) && !strcmp(t->valuestring, "sliding_attention")))
            return hs_fail(err, HS_E_UNSUPPORTED, "config.json: layer_types[%d] is not "
                           "'sliding_attention' or 'full_attention'", l);
        if (full && first_full < 0)
            first_full = l;
        l++;
    }
    a->global_every = first_full < 0 ? 0 : first_full + 1;
    l = 0;
    cJSON_ArrayForEach(t, lt) {
        int local = !strcmp(t->valuestring, "sliding_attention");
        if (local != hs_model_layer_is_local(c, l))
            return hs_fail(err, HS_E_UNSUPPORTED, "config.json: layer_types: layer %d is %s, "
                           "out of the repeating pattern of one global layer in %d", l,
                           t->valuestring, a->global_every);
        l++;
    }
    return HS_OK;
}

/* The rotary keys; transformers 5 writes Gemma 3's per layer type, rope_parameters
 * {"full_attention": {...}, "sliding_attention": {...}}: the first is read as the global
 * layers' parameters, the second's rope_theta as the local layers' base, which must be
 * unscaled. */
static hs_status gemma_rope(const cJSON *root, hs_arch *a, int d_head, int max_pos,
                            double *local_base, hs_error *err)
{
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    const cJSON *full = cJSON_GetObjectItemCaseSensitive(rp, "full_attention");
    const cJSON *slide = cJSON_GetObjectItemCaseSensitive(rp, "sliding_attention");
    if (!full && !slide)
        return hs_cfg_rope(root, a, d_head, "rope_theta", "partial_rotary_factor", max_pos,
                           err);
    if (!cJSON_IsObject(full) || !cJSON_IsObject(slide))
        return hs_fail(err, HS_E_FORMAT, "config.json: 'rope_parameters' per layer type needs "
                       "'full_attention' and 'sliding_attention' objects");
    const char *kind = hs_cfg_str(slide, "rope_type");
    if (kind && strcmp(kind, "default"))
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: rope_parameters.sliding_attention."
                       "rope_type '%.40s' is not supported (the local layers turn unscaled)", kind);
    hs_status st = hs_cfg_num(slide, "", "rope_theta", 1e-6, 1e12, local_base, err);
    cJSON *global = st ? NULL : cJSON_Duplicate(root, 1);
    if (st)
        return st;
    if (!global)
        return hs_fail(err, HS_E_NOMEM, "out of memory reading config.json");
    cJSON_ReplaceItemInObjectCaseSensitive(global, "rope_parameters", cJSON_Duplicate(full, 1));
    st = hs_cfg_rope(global, a, d_head, "rope_theta", "partial_rotary_factor", max_pos,
                     err);
    cJSON_Delete(global);
    return st;
}

/* Gemma 2 and 3: the (1 + w) RMSNorm block with pre- and post-norms, GeGLU, scaled
 * embeddings, query_pre_attn_scalar, softcaps, local and global layers. */
static hs_status parse_gemma(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    hs_status st;
    int kv = a->n_kv_head, window = a->sliding_window;
    double qpas = 256, local_base = a->local_rotary_base;
    /* Gemma2Config's and Gemma3TextConfig's defaults (a gemma3 folder's text_config leaves
     * most keys out) */
    c->ln_eps = 1e-6f;
    c->act = HS_ACT_GELU_TANH;
    c->d_head = 256;
    c->n_layer = 26;
    c->n_head = 8;
    c->d_model = 2304;
    c->d_ff = 9216;
    kv = 4;
    if ((st = hs_cfg_int(root, "num_hidden_layers", 0, &c->n_layer, err)) ||
        (st = hs_cfg_int(root, "num_attention_heads", 0, &c->n_head, err)) ||
        (st = hs_cfg_int(root, "hidden_size", 0, &c->d_model, err)) ||
        (st = hs_cfg_int(root, "intermediate_size", 0, &c->d_ff, err)) ||
        (st = hs_cfg_int(root, "vocab_size", 0, &c->vocab_size, err)) ||
        (st = hs_cfg_int(root, "max_position_embeddings", 0, &c->n_ctx, err)) ||
        (st = hs_cfg_int(root, "head_dim", 0, &c->d_head, err)) ||
        (st = hs_cfg_int(root, "num_key_value_heads", 0, &kv, err)) ||
        (st = hs_cfg_int(root, "sliding_window", 0, &window, err)) ||
        (st = hs_cfg_num(root, "", "query_pre_attn_scalar", 1e-6, 1e9, &qpas, err)) ||
        (st = hs_cfg_num(root, "", "rope_local_base_freq", 1e-6, 1e12, &local_base, err)) ||
        (st = softcap(root, "attn_logit_softcapping", &a->attn_softcap, err)) ||
        (st = softcap(root, "final_logit_softcapping", &a->final_softcap, err)) ||
        (st = hs_cfg_require(root, "attention_bias", 0, err)) ||
        (st = hs_cfg_require(root, "use_bidirectional_attention", 0, err)) ||
        (st = hs_cfg_bool(root, "tie_word_embeddings", &a->tied_embeddings, err)))
        return st;
    double eps = c->ln_eps;
    if ((st = hs_cfg_num(root, "", "rms_norm_eps", 1e-30, 1, &eps, err)) ||
        (st = gemma_rope(root, a, c->d_head, c->n_ctx, &local_base, err)))
        return st;
    c->ln_eps = (float)eps;
    a->n_kv_head = kv > 0 ? kv : c->n_head;
    if (c->n_head % a->n_kv_head)
        return hs_fail(err, HS_E_VALUE, "config.json: num_attention_heads %d is not a multiple of "
                       "num_key_value_heads %d", c->n_head, a->n_kv_head);
    /* the MLP's activation: hidden_activation (hidden_act in older configs) */
    const char *act = hs_cfg_str(root, "hidden_activation");
    if (!act)
        act = hs_cfg_str(root, "hidden_act");
    if (act && !strcmp(act, "gelu"))
        c->act = HS_ACT_GELU_ERF;
    else if (act && strcmp(act, "gelu_pytorch_tanh") && strcmp(act, "gelu_new"))
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: hidden_activation '%.40s' is not "
                       "supported (expected gelu_pytorch_tanh, gelu_new or gelu)", act);
    if (window < 1)
        return hs_fail(err, HS_E_FORMAT, "config.json: 'sliding_window' must be at least 1");
    a->sliding_window = window;
    a->local_rotary_base = (float)local_base;
    a->query_scale = (float)(1.0 / sqrt(qpas));
    a->emb_scale = (float)sqrt((double)c->d_model); /* rounded to the stored type at load */
    return layer_pattern(root, c, a, err);
}

hs_status hs_parse_gemma2(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    c->family = HS_FAMILY_GEMMA2;
    c->n_ctx = 8192;
    c->vocab_size = 256000;
    a->local_rotary_base = 0; /* one rotary base for every layer */
    hs_status st = parse_gemma(root, c, a, err);
    if (!st && a->local_rotary_base != 0)
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: 'rope_local_base_freq' is not a "
                       "Gemma 2 key");
    return st;
}

hs_status hs_parse_gemma3(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    c->family = HS_FAMILY_GEMMA3;
    c->n_ctx = 131072;
    c->vocab_size = 262208;
    a->attn_softcap = a->final_softcap = 0; /* Gemma3TextConfig: None */
    return parse_gemma(root, c, a, err);
}

/* A gemma3 folder (Gemma3ForConditionalGeneration): its text_config is a gemma3_text config,
 * its language model's tensors under language_model.model. (model.language_model. from
 * transformers 4.52); the vision tower is not read. */
hs_status hs_parse_gemma3_mm(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (!cJSON_IsObject(tc))
        return hs_fail(err, HS_E_FORMAT, "config.json: model_type 'gemma3' needs a "
                       "'text_config' object");
    const char *mt = hs_cfg_str(tc, "model_type");
    if (mt && strcmp(mt, "gemma3_text"))
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: text_config.model_type '%.40s' is "
                       "not supported (expected gemma3_text)", mt);
    a->names = &hs_gemma3_mm_table;
    return hs_parse_gemma3(tc, c, a, err);
}

/* Qwen3-MoE's experts (Qwen3MoeConfig's keys and defaults): num_experts routed experts
 * (num_local_experts is its alias), num_experts_per_tok of them a token, each a gated SiLU
 * MLP moe_intermediate_size wide, softmax over the experts, their weights renormalised when
 * norm_topk_prob; layer l has them when (l + 1) % decoder_sparse_step == 0 and l is not in
 * mlp_only_layers, the other layers a dense MLP intermediate_size wide. */
static hs_status parse_qwen3_experts(const cJSON *root, const hs_model_config *c, hs_arch *a,
                                     hs_error *err)
{
    int E = 128, norm = 0, every = 1;
    a->moe_top_k = 8;
    a->moe_ff = 768;
    hs_status st;
    if ((st = hs_cfg_int(root, "num_local_experts", 0, &E, err)) ||
        (st = hs_cfg_int(root, "num_experts", 0, &E, err)) ||
        (st = hs_cfg_int(root, "num_experts_per_tok", 0, &a->moe_top_k, err)) ||
        (st = hs_cfg_int(root, "moe_intermediate_size", 0, &a->moe_ff, err)) ||
        (st = hs_cfg_int(root, "decoder_sparse_step", 0, &every, err)) ||
        (st = hs_cfg_bool(root, "norm_topk_prob", &norm, err)))
        return st;
    if (E < 1 || a->moe_top_k < 1 || a->moe_top_k > E || a->moe_top_k > 64 || a->moe_ff < 1 ||
        every < 1)
        return hs_fail(err, HS_E_VALUE, "config.json: num_experts_per_tok must be in [1, "
                       "num_experts %d] and at most 64, moe_intermediate_size and "
                       "decoder_sparse_step positive", E);
    if ((size_t)E * (size_t)a->moe_ff > 100000000u)
        return hs_fail(err, HS_E_VALUE, "config.json: %d experts of %d are too many", E,
                       a->moe_ff);
    const cJSON *only = cJSON_GetObjectItemCaseSensitive(root, "mlp_only_layers"), *v;
    if (only && !cJSON_IsNull(only) && !cJSON_IsArray(only))
        return hs_fail(err, HS_E_FORMAT, "config.json: 'mlp_only_layers' must be a list of layer "
                       "indices");
    if (!cJSON_IsArray(only))
        only = NULL;
    cJSON_ArrayForEach(v, only) {
        double l = cJSON_IsNumber(v) ? v->valuedouble : -1;
        if (l < 0 || l >= c->n_layer || l != (int)l || l >= HS_MOE_MAX_LAYERS)
            return hs_fail(err, HS_E_VALUE, "config.json: mlp_only_layers holds something that is "
                           "not a layer index below %d", c->n_layer);
        a->moe_dense[(int)l / 64] |= (uint64_t)1 << ((int)l % 64);
    }
    a->moe_experts = E;
    a->moe_every = every;
    a->moe_norm_topk = norm ? 2 : 0; /* renormalised even when one expert is chosen */
    a->moe_scale = 1.0f;
    return HS_OK;
}

/* Qwen3-MoE: Qwen3's attention (head_dim defaults to hidden_size / num_attention_heads
 * here: Qwen3MoeConfig has no head_dim of its own) and the experts above. */
hs_status hs_parse_qwen3_moe(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    c->vocab_size = 151936;
    hs_status st = qwen3_like(root, HS_FAMILY_QWEN3_MOE, 4, c, a, err);
    return st ? st : parse_qwen3_experts(root, c, a, err);
}
