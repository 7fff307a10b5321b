/* Hugging Face model folder: config.json, model.safetensors, tokenizer files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "model/model_internal.h"
#include "model/safetensors.h"
#include "model/torchbin.h"


/* Shards of a sharded checkpoint: at most this many files. */
#define MAX_SHARDS 1024

typedef struct hf_ctx {
    const hs_safetensors *st; /* model.safetensors, or */
    hs_safetensors **shards;  /* the n_shards files of model.safetensors.index.json, or */
    const hs_torchbin *tb;    /* pytorch_model.bin */
    hs_tensor_view skipped;   /* a view standing for a tensor of a dtype not computed with */
    int n_shards;
    const struct hs_names *names;
    char buf[512], skip_name[512];
} hf_ctx;

/* The stored tensor for a name as written. */
static const hs_tensor_view *find(hf_ctx *c, const char *name)
{
    if (c->st)
        return hs_safetensors_find(c->st, name);
    if (c->shards) {
        for (int i = 0; i < c->n_shards; i++) {
            const hs_tensor_view *t = hs_safetensors_find(c->shards[i], name);
            if (t)
                return t;
        }
        return NULL;
    }
    const hs_tensor_view *t = hs_torchbin_find(c->tb, name);
    const char *dt = t ? NULL : hs_torchbin_skipped(c->tb, name);
    if (!dt)
        return t;
    /* present, but an integer/bool/float64 tensor: the builder refuses it by name */
    c->skipped = (hs_tensor_view){.dtype = HS_DT_OTHER, .dtype_name = dt};
    snprintf(c->skip_name, sizeof c->skip_name, "%s", name);
    c->skipped.name = c->skip_name;
    return &c->skipped;
}

/* The name as written, then with the family prefix ("transformer.", "bert."), except for
 * the heads that sit outside the base model (HS_TN_BARE: lm_head.*, cls.*). */
static const hs_tensor_view *find_prefixed(hf_ctx *c, const char *name, unsigned flags)
{
    const hs_tensor_view *t = find(c, name);
    if (t || (flags & HS_TN_BARE))
        return t;
    snprintf(c->buf, sizeof c->buf, "%s%s", c->names->hf_prefix, name);
    return find(c, c->buf);
}

/* Resolves a logical HF name, trying the family prefix and, for every LayerNorm parameter
 * (embeddings, encoder layers and the MLM head's transform alike), the legacy gamma/beta
 * names that the hub's bert-base-uncased file still uses. */
static const hs_tensor_view *hf_lookup(void *ctx, const char *name, const hs_tensor_ref *r,
                                       int *out_in)
{
    hf_ctx *c = ctx;
    *out_in = c->names->hf_out_in; /* GPT-2 Conv1D is (in, out); nn.Linear (out, in) */
    const hs_tensor_view *t = find_prefixed(c, name, r->e->flags);
    if (t || !strstr(name, "LayerNorm."))
        return t;
    char legacy[512];
    size_t len = strlen(name);
    if (len > 7 && !strcmp(name + len - 7, ".weight"))
        snprintf(legacy, sizeof legacy, "%.*s.gamma", (int)(len - 7), name);
    else if (len > 5 && !strcmp(name + len - 5, ".bias"))
        snprintf(legacy, sizeof legacy, "%.*s.beta", (int)(len - 5), name);
    else
        return NULL;
    return find_prefixed(c, legacy, r->e->flags);
}

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The weights of folder dir from pytorch_model.bin (torch.save's zip format, read by a
 * restricted unpickler that never runs code). */
static hs_status load_torchbin(hs_model *m, const char *path, hs_error *err)
{
    hs_torchbin *tb = NULL;
    hs_status st = hs_torchbin_open(path, &tb, err);
    if (st)
        return st;
    hf_ctx ctx = {.tb = tb, .names = m->cfg.arch->names};
    st = hs_weights_build(m, hf_lookup, &ctx, err);
    hs_torchbin_close(tb);
    return st;
}

/* A shard's file name from the index: a plain name inside the folder. */
static int shard_name_ok(const char *s)
{
    return s[0] && s[0] != '.' && !strchr(s, '/') && !strchr(s, '\\') && strlen(s) < 256;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* m->shards: a copy of the n shard names, sorted. */
static hs_status keep_shard_names(hs_model *m, const char *const *names, int n, hs_error *err)
{
    if (!(m->shards = calloc((size_t)n, sizeof *m->shards)))
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    for (; m->n_shards < n; m->n_shards++)
        if (!(m->shards[m->n_shards] = strdup(names[m->n_shards])))
            return hs_fail(err, HS_E_NOMEM, "out of memory");
    qsort(m->shards, (size_t)n, sizeof *m->shards, by_name);
    return HS_OK;
}

/* The weights of a sharded checkpoint: model.safetensors.index.json's weight_map
 * ({tensor name: shard file}) names the shards; each is opened once, and every tensor the
 * index names must be in the shard it names and in no other. */
static hs_status load_shards(hs_model *m, const char *dir, const char *index, hs_error *err)
{
    char *text = NULL, path[4400];
    size_t len = 0;
    cJSON *root = NULL;
    hf_ctx ctx = {.names = m->cfg.arch->names};
    hs_status st = hs_read_file(index, 64u << 20, &text, &len, err);
    if (st)
        return st;
    if ((st = hs_json_parse(text, len, 1u << 22, "model.safetensors.index.json", &root, err)))
        goto done;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map"), *e;
    if (!cJSON_IsObject(wm) || !wm->child) {
        st = hs_fail(err, HS_E_FORMAT, "model.safetensors.index.json: 'weight_map' must be a "
                     "non-empty object");
        goto done;
    }
    ctx.shards = calloc(MAX_SHARDS, sizeof *ctx.shards);
    const char **names = calloc(MAX_SHARDS, sizeof *names);
    if (!ctx.shards || !names) {
        free(names);
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
        goto done;
    }
    cJSON_ArrayForEach(e, wm) {
        if (!cJSON_IsString(e) || !shard_name_ok(e->valuestring)) {
            st = hs_fail(err, HS_E_FORMAT, "model.safetensors.index.json: tensor '%.200s' has "
                         "no valid shard file name", e->string);
            break;
        }
        int k = 0;
        while (k < ctx.n_shards && strcmp(names[k], e->valuestring))
            k++;
        if (k == ctx.n_shards) { /* a new shard */
            if (k == MAX_SHARDS) {
                st = hs_fail(err, HS_E_FORMAT, "model.safetensors.index.json: more than %d shards",
                             MAX_SHARDS);
                break;
            }
            snprintf(path, sizeof path, "%s/%s", dir, e->valuestring);
            if ((st = hs_safetensors_open(path, &ctx.shards[k], err)))
                break;
            names[k] = e->valuestring;
            ctx.n_shards++;
        }
        if (!hs_safetensors_find(ctx.shards[k], e->string)) {
            st = hs_fail(err, HS_E_FORMAT, "model.safetensors.index.json names tensor '%.200s' "
                         "in '%.200s', which does not hold it", e->string, e->valuestring);
            break;
        }
    }
    /* every tensor of every shard in no other, whether the index names it there, in another
       shard opened later, or not at all */
    for (int i = 0; i < ctx.n_shards && !st; i++)
        for (size_t t = 0; t < ctx.shards[i]->n && !st; t++)
            for (int o = i + 1; o < ctx.n_shards && !st; o++)
                if (hs_safetensors_find(ctx.shards[o], ctx.shards[i]->tensors[t].name)) {
                    int f = strcmp(names[i], names[o]) < 0; /* the shards named in order */
                    st = hs_fail(err, HS_E_FORMAT, "tensor '%.200s' is in two shards ('%.200s' "
                                 "and '%.200s')", ctx.shards[i]->tensors[t].name,
                                 names[f ? i : o], names[f ? o : i]);
                }
    if (st == HS_OK)
        st = keep_shard_names(m, names, ctx.n_shards, err);
    free(names);
    if (st == HS_OK) {
        m->release_src = 1; /* every shard is a private mapping: pages dropped once copied */
        for (int i = 0; i < ctx.n_shards; i++)
            m->release_src &= ctx.shards[i]->map != NULL;
        st = hs_weights_build(m, hf_lookup, &ctx, err);
    }
done:
    for (int i = 0; ctx.shards && i < ctx.n_shards; i++)
        hs_safetensors_close(ctx.shards[i]);
    free(ctx.shards);
    cJSON_Delete(root);
    free(text);
    return st;
}

/* The weights of folder dir: model.safetensors, else the shards of
 * model.safetensors.index.json, else pytorch_model.bin. */
static hs_status load_weights(hs_model *m, const char *dir, hs_error *err)
{
    char path[4096];
    hs_safetensors *st_file = NULL;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (!file_exists(path)) {
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        if (file_exists(path)) {
            m->weights_file = "model.safetensors.index.json";
            return load_shards(m, dir, path, err);
        }
        snprintf(path, sizeof path, "%s/pytorch_model.bin", dir);
        if (file_exists(path)) {
            m->weights_file = "pytorch_model.bin";
            return load_torchbin(m, path, err);
        }
        return hs_fail(err, HS_E_IO, "'%s' has no model.safetensors, model.safetensors.index.json "
                       "or pytorch_model.bin", dir);
    }
    m->weights_file = "model.safetensors";
    hs_status st = hs_safetensors_open(path, &st_file, err);
    if (st)
        return st;
    hf_ctx ctx = {.st = st_file, .names = m->cfg.arch->names};
    m->inplace_ok = st_file->map && (m->open_flags & HS_OPEN_MAP_WEIGHTS);
    m->release_src = st_file->map != NULL; /* file pages dropped once copied */
    st = hs_weights_build(m, hf_lookup, &ctx, err);
    if (st == HS_OK && m->inplace_floats > 0)
        hs_safetensors_take_map(st_file, &m->map, &m->map_len);
    hs_safetensors_close(st_file);
    return st;
}

hs_status hs_hf_load(hs_model *m, const char *dir, hs_error *err)
{
    char path[4096];
    hs_status st;

    if (strlen(dir) > 4000)
        return hs_fail(err, HS_E_ARG, "model path is too long");
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (!file_exists(path))
        return hs_fail(err, HS_E_IO, "'%s' has no config.json (not a Hugging Face model folder)",
                       dir);
    if ((st = hs_hf_config_load(path, &m->cfg, &m->arch, err)))
        return st;
    m->format = HS_FORMAT_HF;
    if (!(m->open_flags & HS_OPEN_TOKENIZER) && (st = load_weights(m, dir, err)))
        return st;
    return hs_hf_tokenizer_load(dir, m->cfg.arch, &m->tok, err);
}
