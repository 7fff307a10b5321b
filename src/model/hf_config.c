/* config.json of a Hugging Face folder → hs_model_config, with transformers' defaults. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "model/model_internal.h"

#define CONFIG_MAX_BYTES (4u << 20)

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
        v->valuedouble > 1e9)
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
};

hs_status hs_hf_config_load(const char *path, hs_model_config *cfg, hs_arch *arch, hs_error *err)
{
    char *text = NULL;
    size_t len = 0;
    hs_status st = hs_read_file(path, CONFIG_MAX_BYTES, &text, &len, err);
    if (st)
        return st;
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root || !cJSON_IsObject(root)) {
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
        else
            st = hs_fail(err, HS_E_UNSUPPORTED, "config.json: model_type '%s' is not supported "
                         "(expected %s)", mt, hs_arch_list());
    }
    if (st == HS_OK)
        st = hs_config_validate(cfg, err);
done:
    cJSON_Delete(root);
    free(text);
    return st;
}
