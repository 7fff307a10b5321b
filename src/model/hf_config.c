/* config.json of a Hugging Face folder → hs_model_config, with transformers' defaults. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "model/arch_mqa.h" /* includes hf_config.h */
#include "model/model_internal.h"

#define CONFIG_MAX_BYTES (4u << 20)

hs_status hs_cfg_gpt2_dims(const cJSON *root, hs_model_config *c, int *n_inner, hs_error *err)
{
    hs_status st;
    c->ln_eps = 1e-5f;
    c->act = HS_ACT_GELU_TANH;
    c->n_ctx = 1024;
    *n_inner = 0;
    if ((st = hs_cfg_int(root, "n_layer", 1, &c->n_layer, err)) ||
        (st = hs_cfg_int(root, "n_head", 1, &c->n_head, err)) ||
        (st = hs_cfg_int(root, "n_embd", 1, &c->d_model, err)) ||
        (st = hs_cfg_int(root, "vocab_size", 1, &c->vocab_size, err)) ||
        (st = hs_cfg_int(root, "n_positions", 0, &c->n_ctx, err)) ||
        (st = hs_cfg_int(root, "n_inner", 0, n_inner, err)) ||
        (st = hs_cfg_unit(root, "layer_norm_epsilon", &c->ln_eps, err)))
        return st;
    return hs_cfg_act(hs_cfg_str(root, "activation_function"), &c->act, err);
}

hs_status hs_cfg_gpt2_ff(hs_model_config *c, int n_inner, hs_error *err)
{
    if (n_inner <= 0 && c->d_model > HS_CFG_INT_MAX / 4)
        return hs_fail(err, HS_E_FORMAT, "config.json: field 'n_embd' (%d) is too large: "
                       "its default n_inner, 4 x n_embd, passes 1e9", c->d_model);
    c->d_ff = n_inner > 0 ? n_inner : 4 * c->d_model;
    return HS_OK;
}

static hs_status parse_gpt2(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    (void)a;
    hs_status st;
    int n_inner;
    c->family = HS_FAMILY_GPT2;
    if ((st = hs_cfg_gpt2_dims(root, c, &n_inner, err)) ||
        (st = hs_cfg_require(root, "scale_attn_weights", 1, err)) ||
        (st = hs_cfg_require(root, "scale_attn_by_inverse_layer_idx", 0, err)) ||
        (st = hs_cfg_gpt2_ff(c, n_inner, err)))
        return st;
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
    if ((st = hs_cfg_int(root, k->layers, 1, &c->n_layer, err)) ||
        (st = hs_cfg_int(root, k->heads, 1, &c->n_head, err)) ||
        (st = hs_cfg_int(root, k->d_model, 1, &c->d_model, err)) ||
        (st = hs_cfg_int(root, k->d_ff, 1, &c->d_ff, err)) ||
        (st = hs_cfg_int(root, "vocab_size", 1, &c->vocab_size, err)) ||
        (st = hs_cfg_int(root, k->n_ctx, 0, &c->n_ctx, err)))
        return st;
    return hs_cfg_act(hs_cfg_str(root, k->act), &c->act, err);
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
        (st = hs_cfg_int(root, "type_vocab_size", 0, &c->type_vocab_size, err)) ||
        (st = hs_cfg_unit(root, "layer_norm_eps", &c->ln_eps, err)))
        return st;
    const char *pe = hs_cfg_str(root, "position_embedding_type");
    if (pe && strcmp(pe, "absolute"))
        return hs_fail(err, HS_E_UNSUPPORTED,
                       "config.json: position_embedding_type '%s' is not supported (expected "
                       "absolute)", pe);
    return HS_OK;
}

/* ---- the rotary decoders ----------------------------------------------------------- */

/* The dimensions every rotary decoder config names the same way. */
static hs_status get_decoder_dims(const cJSON *root, hs_model_config *c, hs_error *err)
{
    hs_status st;
    if ((st = hs_cfg_int(root, "num_hidden_layers", 1, &c->n_layer, err)) ||
        (st = hs_cfg_int(root, "num_attention_heads", 1, &c->n_head, err)) ||
        (st = hs_cfg_int(root, "hidden_size", 1, &c->d_model, err)) ||
        (st = hs_cfg_int(root, "intermediate_size", 1, &c->d_ff, err)) ||
        (st = hs_cfg_int(root, "vocab_size", 1, &c->vocab_size, err)) ||
        (st = hs_cfg_int(root, "max_position_embeddings", 0, &c->n_ctx, err)))
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
    if ((st = hs_cfg_bool(root, "use_parallel_residual", &a->parallel_residual, err)) ||
        (st = get_decoder_dims(root, c, err)) ||
        (st = hs_cfg_unit(root, "layer_norm_eps", &c->ln_eps, err)) ||
        (st = hs_cfg_act(hs_cfg_str(root, "hidden_act"), &c->act, err)) ||
        (st = hs_cfg_require(root, "attention_bias", 1, err)) ||
        (st = hs_cfg_bool(root, "tie_word_embeddings", &a->tied_embeddings, err)) ||
        (st = hs_cfg_rope(root, a, c->d_model / c->n_head, "rotary_emb_base", "rotary_pct",
                          c->n_ctx, err)))
        return st;
    return HS_OK;
}

/* Llama and Qwen2: RMSNorm (rms_norm_eps), num_key_value_heads, a gated SiLU MLP, rope_theta. */
hs_status hs_cfg_llama_like(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    hs_status st;
    int kv = a->n_kv_head;
    c->ln_eps = 1e-6f;
    c->act = HS_ACT_SILU; /* gated: the family's descriptor */
    /* head_dim as transformers reads it: the query/key/value width of a head, queries
     * num_attention_heads * head_dim wide (not necessarily hidden_size); absent or null:
     * hidden_size / num_attention_heads */
    if ((st = hs_cfg_int(root, "head_dim", 0, &c->d_head, err)) ||
        (st = get_decoder_dims(root, c, err)) ||
        (st = hs_cfg_int(root, "num_key_value_heads", 0, &kv, err)) ||
        (st = hs_cfg_unit(root, "rms_norm_eps", &c->ln_eps, err)) ||
        (st = hs_cfg_require(root, "mlp_bias", 0, err)) ||
        (st = hs_cfg_bool(root, "tie_word_embeddings", &a->tied_embeddings, err)) ||
        (st = hs_cfg_rope(root, a, c->d_head ? c->d_head : c->d_model / c->n_head, "rope_theta",
                          "partial_rotary_factor", c->n_ctx, err)))
        return st;
    const char *act = hs_cfg_str(root, "hidden_act");
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
    hs_status st = hs_cfg_bool(root, "attention_bias", &a->qkv_bias, err);
    if (st)
        return st;
    a->o_bias = a->qkv_bias; /* q, k, v and o biases */
    c->family = HS_FAMILY_LLAMA;
    c->n_ctx = 2048;
    return hs_cfg_llama_like(root, c, a, err);
}

static hs_status parse_qwen2(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    hs_status st = hs_cfg_require(root, "use_sliding_window", 0, err);
    if (st)
        return st;
    c->family = HS_FAMILY_QWEN2;
    c->n_ctx = 32768;
    a->n_kv_head = 32; /* transformers' Qwen2Config default */
    return hs_cfg_llama_like(root, c, a, err);
}

/* sliding_window: every layer's queries see the last W keys, themselves included
 * (transformers' mask: key j visible from query i when i - W < j <= i); null: no window;
 * absent: dflt (0: none). */
static hs_status parse_window(const cJSON *root, int dflt, hs_arch *a, hs_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    int w = v ? 0 : dflt;
    hs_status st = hs_cfg_int(root, "sliding_window", 0, &w, err);
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
    return hs_cfg_llama_like(root, c, a, err);
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
    if ((st = hs_cfg_llama_like(root, c, a, err)))
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
    if (st || (st = hs_cfg_int(root, "pad_token_id", 0, &pad, err)))
        return st;
    c->family = HS_FAMILY_ROBERTA;
    if (c->act != HS_ACT_GELU_ERF)
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: hidden_act '%s' is not supported for "
                       "RoBERTa (expected gelu)", hs_cfg_str(root, "hidden_act"));
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
    const char *ff = hs_cfg_str(root, "feed_forward_proj");
    hs_status st;
    c->family = HS_FAMILY_T5;
    c->ln_eps = 1e-6f;
    c->n_ctx = 32768;
    c->vocab_size = 32128;
    if ((st = hs_cfg_int(root, "num_layers", 1, &c->n_enc_layer, err)) ||
        (st = hs_cfg_int(root, "num_decoder_layers", 0, &n_dec, err)) ||
        (st = hs_cfg_int(root, "num_heads", 1, &c->n_head, err)) ||
        (st = hs_cfg_int(root, "d_model", 1, &c->d_model, err)) ||
        (st = hs_cfg_int(root, "d_kv", 1, &c->d_head, err)) ||
        (st = hs_cfg_int(root, "d_ff", 1, &c->d_ff, err)) ||
        (st = hs_cfg_int(root, "vocab_size", 0, &c->vocab_size, err)) ||
        (st = hs_cfg_int(root, "relative_attention_num_buckets", 0, &a->rel_buckets, err)) ||
        (st = hs_cfg_int(root, "relative_attention_max_distance", 0, &a->rel_max_distance, err)) ||
        (st = hs_cfg_int(root, "decoder_start_token_id", 0, &c->decoder_start_id, err)) ||
        (st = hs_cfg_unit(root, "layer_norm_epsilon", &c->ln_eps, err)) ||
        (st = hs_cfg_bool(root, "tie_word_embeddings", &tied, err)))
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
    const char *mt = hs_cfg_str(root, "model_type");
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

hs_status hs_cfg_llama_dims(const cJSON *root, hs_model_config *c, hs_arch *a, int rope_dims,
                            hs_error *err)
{
    hs_status st;
    if ((st = get_decoder_dims(root, c, err)) ||
        (st = hs_cfg_unit(root, "rms_norm_eps", &c->ln_eps, err)) ||
        (st = hs_cfg_require(root, "mlp_bias", 0, err)) ||
        (st = hs_cfg_bool(root, "tie_word_embeddings", &a->tied_embeddings, err)) ||
        (st = hs_cfg_rope(root, a, rope_dims, "rope_theta", "partial_rotary_factor", c->n_ctx,
                          err)))
        return st;
    const char *act = hs_cfg_str(root, "hidden_act");
    if (act && strcmp(act, "silu"))
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: hidden_act '%s' is not supported "
                       "(expected silu)", act);
    return HS_OK;
}

