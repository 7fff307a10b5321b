/* hs_gguf_load: a GPT-2 or BERT model from a GGUF file written by llama.cpp's converter
 * or `headscope convert`. Fills the config from {arch}.* keys (exact value types, as
 * llama.cpp checks them), maps the HF tensor names the weight builder asks for onto the
 * GGUF names (blk.N.attn_qkv, ...), and rebuilds the tokenizer from tokenizer.ggml.*. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/gguf.h"
#include "model/model_internal.h"

/* ---- typed metadata ---------------------------------------------------------------- */

/* Finds key with exactly type want. *idx = -1 when absent (not an error unless required). */
static hs_status find_typed(const hs_gguf *g, const char *key, hs_gguf_type want, int required,
                            long *idx, hs_error *err)
{
    *idx = hs_gguf_find_kv(g, key);
    if (*idx < 0)
        return required ? hs_fail(err, HS_E_FORMAT, "missing key '%s'", key) : HS_OK;
    hs_gguf_type t = hs_gguf_kv_type(g, (size_t)*idx);
    if (t != want)
        return hs_fail(err, HS_E_FORMAT, "key '%s' has type %s, expected %s", key,
                       hs_gguf_type_name(t), hs_gguf_type_name(want));
    return HS_OK;
}

/* A required or optional UINT32 that must fit an int; *out keeps its value when absent. */
static hs_status get_u32(const hs_gguf *g, const char *key, int required, int *out, hs_error *err)
{
    long i;
    hs_status st = find_typed(g, key, HS_GGUF_UINT32, required, &i, err);
    if (st || i < 0)
        return st;
    hs_gguf_value v;
    hs_gguf_kv_get(g, (size_t)i, 0, &v);
    if (v.u > INT_MAX)
        return hs_fail(err, HS_E_VALUE, "key '%s' = %llu is out of range", key,
                       (unsigned long long)v.u);
    *out = (int)v.u;
    return HS_OK;
}

/* An array of element type want; *idx = -1 when absent and optional. */
static hs_status find_array(const hs_gguf *g, const char *key, hs_gguf_type want, int required,
                            long *idx, hs_error *err)
{
    hs_status st = find_typed(g, key, HS_GGUF_ARRAY, required, idx, err);
    if (st || *idx < 0)
        return st;
    hs_gguf_type et = hs_gguf_kv_elem_type(g, (size_t)*idx);
    if (et != want)
        return hs_fail(err, HS_E_FORMAT, "key '%s' is an array of %s, expected %s", key,
                       hs_gguf_type_name(et), hs_gguf_type_name(want));
    return HS_OK;
}

static hs_status load_config(const hs_gguf *g, hs_model_config *cfg, hs_error *err)
{
    long i;
    hs_status st;
    if ((st = find_typed(g, "general.architecture", HS_GGUF_STRING, 1, &i, err)))
        return st;
    hs_gguf_value arch;
    hs_gguf_kv_get(g, (size_t)i, 0, &arch);
    memset(cfg, 0, sizeof *cfg);
    if (!strcmp(arch.str, "gpt2")) {
        cfg->family = HS_FAMILY_GPT2;
        cfg->act = HS_ACT_GELU_TANH;
    } else if (!strcmp(arch.str, "bert")) {
        cfg->family = HS_FAMILY_BERT;
        cfg->act = HS_ACT_GELU_ERF;
    } else {
        return hs_fail(err, HS_E_UNSUPPORTED,
                       "general.architecture '%.64s' is not supported (expected gpt2 or bert)",
                       arch.str);
    }
    const char *a = arch.str;
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    if ((st = get_u32(g, KEY("block_count"), 1, &cfg->n_layer, err)) ||
        (st = get_u32(g, KEY("context_length"), 1, &cfg->n_ctx, err)) ||
        (st = get_u32(g, KEY("embedding_length"), 1, &cfg->d_model, err)) ||
        (st = get_u32(g, KEY("feed_forward_length"), 1, &cfg->d_ff, err)) ||
        (st = get_u32(g, KEY("attention.head_count"), 1, &cfg->n_head, err)))
        return st;
    int n_kv_head = cfg->n_head;
    if ((st = get_u32(g, KEY("attention.head_count_kv"), 0, &n_kv_head, err)))
        return st;
    if (n_kv_head != cfg->n_head)
        return hs_fail(err, HS_E_UNSUPPORTED, "%s = %d differs from head_count %d (grouped "
                       "attention is not supported)", key, n_kv_head, cfg->n_head);
    if ((st = find_typed(g, KEY("attention.layer_norm_epsilon"), HS_GGUF_FLOAT32, 1, &i, err)))
        return st;
    hs_gguf_value v;
    hs_gguf_kv_get(g, (size_t)i, 0, &v);
    cfg->ln_eps = (float)v.f;
    if (cfg->family == HS_FAMILY_BERT) {
        if ((st = find_typed(g, "bert.attention.causal", HS_GGUF_BOOL, 0, &i, err)))
            return st;
        if (i >= 0) {
            hs_gguf_kv_get(g, (size_t)i, 0, &v);
            if (v.u)
                return hs_fail(err, HS_E_UNSUPPORTED,
                               "bert.attention.causal is true (headscope's BERT is bidirectional)");
        }
        if ((st = get_u32(g, "tokenizer.ggml.token_type_count", 1, &cfg->type_vocab_size, err)))
            return st;
    }
#undef KEY
    const hs_gguf_tensor *emb = hs_gguf_find_tensor(g, "token_embd.weight");
    uint64_t n_vocab;
    if (emb) {
        n_vocab = emb->ne[1];
    } else if (hs_gguf_tensor_count(g) == 0) {
        /* vocabulary only (llama.cpp's models/ggml-vocab-*.gguf): as many tokens as listed */
        if ((st = find_array(g, "tokenizer.ggml.tokens", HS_GGUF_STRING, 0, &i, err)))
            return st;
        if (i < 0)
            return hs_fail(err, HS_E_FORMAT,
                           "the file holds neither tensors nor a vocabulary (tokenizer.ggml.tokens)");
        n_vocab = hs_gguf_kv_len(g, (size_t)i);
    } else {
        return hs_fail(err, HS_E_FORMAT, "missing tensor 'token_embd.weight'");
    }
    if (n_vocab > INT_MAX)
        return hs_fail(err, HS_E_VALUE, "the vocabulary has %llu tokens", (unsigned long long)n_vocab);
    cfg->vocab_size = (int)n_vocab;
    return hs_config_validate(cfg, err);
}

/* ---- tensor names ------------------------------------------------------------------ */

typedef struct map_entry {
    const char *hf;   /* suffix after the layer prefix, or a whole name */
    const char *gguf; /* GGUF base without .weight/.bias */
} map_entry;

static const map_entry gpt2_top[] = {
    {"wte", "token_embd"}, {"wpe", "position_embd"}, {"ln_f", "output_norm"}, {"lm_head", "output"},
};
static const map_entry gpt2_layer[] = {
    {"ln_1", "attn_norm"},       {"attn.c_attn", "attn_qkv"}, {"attn.c_proj", "attn_output"},
    {"ln_2", "ffn_norm"},        {"mlp.c_fc", "ffn_up"},      {"mlp.c_proj", "ffn_down"},
};
static const map_entry bert_top[] = {
    {"embeddings.word_embeddings", "token_embd"},
    {"embeddings.position_embeddings", "position_embd"},
    {"embeddings.token_type_embeddings", "token_types"},
    {"embeddings.LayerNorm", "token_embd_norm"},
};
static const map_entry bert_layer[] = {
    {"attention.self.query", "attn_q"},
    {"attention.self.key", "attn_k"},
    {"attention.self.value", "attn_v"},
    {"attention.output.dense", "attn_output"},
    {"attention.output.LayerNorm", "attn_output_norm"},
    {"intermediate.dense", "ffn_up"},
    {"output.dense", "ffn_down"},
    {"output.LayerNorm", "layer_output_norm"},
};

/* Splits "base.weight" / "base.bias"; returns the suffix (".weight" / ".bias") or NULL. */
static const char *param_suffix(const char *name, size_t *base_len)
{
    size_t n = strlen(name);
    if (n > 7 && !strcmp(name + n - 7, ".weight")) {
        *base_len = n - 7;
        return ".weight";
    }
    if (n > 5 && !strcmp(name + n - 5, ".bias")) {
        *base_len = n - 5;
        return ".bias";
    }
    return NULL;
}

static const char *map_base(const map_entry *t, size_t n, const char *base, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(t[i].hf) == len && !memcmp(t[i].hf, base, len))
            return t[i].gguf;
    return NULL;
}

/* Maps an HF name to its GGUF name. *rank is the PyTorch rank the builder expects;
 * *part is 0..2 for a BERT Q/K/V tensor (for the fused-QKV fallback), else -1.
 * Returns 0 on success, -1 for a name GGUF does not hold. */
static int map_name(hs_family fam, const char *hf, char *out, size_t cap, int *rank, int *part)
{
    size_t blen;
    const char *suffix = param_suffix(hf, &blen);
    *part = -1;
    if (!suffix)
        return -1;
    *rank = !strcmp(suffix, ".bias") || strstr(hf, "LayerNorm") || strstr(hf, "ln_") ? 1 : 2;
    if (fam == HS_FAMILY_BERT && !strncmp(hf, "cls.predictions.", 16)) {
        /* headscope-only MLM head: stored under its HF name */
        if (!strcmp(hf, "cls.predictions.bias"))
            *rank = 1;
        snprintf(out, cap, "%s", hf);
        return 0;
    }
    const char *lp = fam == HS_FAMILY_GPT2 ? "h." : "encoder.layer.";
    size_t lpl = strlen(lp);
    const char *g = NULL;
    if (!strncmp(hf, lp, lpl) && hf[lpl] >= '0' && hf[lpl] <= '9') {
        char *end;
        long layer = strtol(hf + lpl, &end, 10);
        if (*end != '.' || layer > 100000)
            return -1;
        const char *rest = end + 1;
        size_t rlen = blen - (size_t)(rest - hf);
        if (rest > hf + blen)
            return -1;
        if (fam == HS_FAMILY_GPT2) {
            g = map_base(gpt2_layer, sizeof gpt2_layer / sizeof gpt2_layer[0], rest, rlen);
        } else {
            g = map_base(bert_layer, sizeof bert_layer / sizeof bert_layer[0], rest, rlen);
            if (g && !strncmp(rest, "attention.self.", 15))
                *part = rest[15] == 'q' ? 0 : rest[15] == 'k' ? 1 : 2;
        }
        if (!g)
            return -1;
        snprintf(out, cap, "blk.%ld.%s%s", layer, g, suffix);
        return 0;
    }
    if (fam == HS_FAMILY_GPT2)
        g = map_base(gpt2_top, sizeof gpt2_top / sizeof gpt2_top[0], hf, blen);
    else
        g = map_base(bert_top, sizeof bert_top / sizeof bert_top[0], hf, blen);
    if (!g)
        return -1;
    snprintf(out, cap, "%s%s", g, suffix);
    return 0;
}

typedef struct gguf_ctx {
    const hs_gguf *g;
    hs_family family;
    hs_tensor_view *views; /* 4 slots per tensor: whole, Q, K, V slices */
    char missing[128];     /* GGUF name of the last tensor looked for and not found */
} gguf_ctx;

static hs_dtype to_dtype(uint32_t t)
{
    switch (t) {
    case HS_GGML_F16: return HS_DT_F16;
    case HS_GGML_BF16: return HS_DT_BF16;
    case HS_GGML_Q8_0: return HS_DT_Q8_0;
    default: return HS_DT_F32;
    }
}

/* Bytes of one ne[0]-long row. */
static size_t row_bytes(const hs_gguf_tensor *t)
{
    size_t ne0 = (size_t)t->ne[0];
    switch (t->type) {
    case HS_GGML_F16:
    case HS_GGML_BF16: return ne0 * 2;
    case HS_GGML_Q8_0: return ne0 / 32 * 34;
    default: return ne0 * 4;
    }
}

/* A view of t with PyTorch shape: the ne order reversed, padded or trimmed to rank when
 * the dimensions that differ are 1 (ggml drops trailing 1s when it writes n_dims). */
static void make_view(hs_tensor_view *v, const hs_gguf_tensor *t, int rank)
{
    int nd = (int)t->n_dims;
    for (int d = rank; d < nd; d++)
        if (t->ne[d] != 1)
            rank = nd; /* leave the real rank, so the builder reports the shape */
    v->name = t->name;
    v->dtype = to_dtype(t->type);
    v->ndim = rank;
    for (int k = 0; k < rank; k++)
        v->shape[k] = t->ne[rank - 1 - k];
    v->data = t->data;
    v->nbytes = (size_t)t->nbytes;
}

static const hs_tensor_view *gguf_lookup(void *vctx, const char *hf, int *out_in)
{
    gguf_ctx *c = vctx;
    char name[128];
    int rank, part;
    *out_in = 1; /* every GGUF matrix is stored (out, in): ne = {in, out} */
    if (map_name(c->family, hf, name, sizeof name, &rank, &part))
        return NULL;
    const hs_gguf_tensor *t = hs_gguf_find_tensor(c->g, name);
    size_t idx;
    if (t && !strcmp(name, "output.weight")) {
        /* Older converters wrote GPT-2's tied decoder as a copy of token_embd: keep it tied. */
        const hs_gguf_tensor *e = hs_gguf_find_tensor(c->g, "token_embd.weight");
        if (e && e->type == t->type && !memcmp(e->ne, t->ne, sizeof e->ne) &&
            e->nbytes == t->nbytes && !memcmp(e->data, t->data, (size_t)t->nbytes))
            return NULL;
    }
    if (!t)
        snprintf(c->missing, sizeof c->missing, "%s", name);
    if (t) {
        idx = (size_t)(t - hs_gguf_tensor_at(c->g, 0));
        make_view(&c->views[4 * idx], t, rank);
        return &c->views[4 * idx];
    }
    if (part < 0)
        return NULL;
    /* Newer llama.cpp also accepts BERT with a fused blk.N.attn_qkv {E, 3E}: Q, K, V are
     * row blocks of it, so each is a contiguous slice. */
    char *dot = strstr(name, ".attn_");
    if (!dot)
        return NULL;
    char fused[128];
    snprintf(fused, sizeof fused, "%.*s.attn_qkv%s", (int)(dot - name), name,
             rank == 1 ? ".bias" : ".weight");
    t = hs_gguf_find_tensor(c->g, fused);
    if (!t)
        return NULL;
    idx = (size_t)(t - hs_gguf_tensor_at(c->g, 0));
    hs_tensor_view *v = &c->views[4 * idx + 1 + (size_t)part];
    make_view(v, t, rank);
    if (rank == 1 && t->n_dims == 1 && t->ne[0] % 3 == 0) {
        size_t n = (size_t)t->ne[0] / 3;
        v->shape[0] = (int64_t)n;
        v->nbytes = (size_t)t->nbytes / 3;
        v->data = t->data + (size_t)part * v->nbytes;
    } else if (rank == 2 && t->n_dims == 2 && t->ne[1] % 3 == 0) {
        size_t rows = (size_t)t->ne[1] / 3;
        v->shape[0] = (int64_t)rows;
        v->nbytes = rows * row_bytes(t);
        v->data = t->data + (size_t)part * v->nbytes;
    }
    return v;
}

/* ---- tokenizer ----------------------------------------------------------------------- */

static hs_status string_array(const hs_gguf *g, long idx, const char *key, const char ***out,
                              size_t *n, hs_error *err)
{
    *n = hs_gguf_kv_len(g, (size_t)idx);
    *out = calloc(*n ? *n : 1, sizeof **out);
    if (!*out)
        return hs_fail(err, HS_E_NOMEM, "out of memory reading '%s'", key);
    for (size_t j = 0; j < *n; j++) {
        hs_gguf_value v;
        hs_gguf_kv_get(g, (size_t)idx, j, &v);
        if (strlen(v.str) != v.len) {
            free(*out);
            *out = NULL;
            return hs_fail(err, HS_E_FORMAT, "%s[%zu] holds a NUL byte", key, j);
        }
        (*out)[j] = v.str;
    }
    return HS_OK;
}

#define PHANTOM "\xe2\x96\x81" /* U+2581, llama.cpp's word-start marker */

/* Undoes the converter's WordPiece rewrite: CONTROL tokens and every "[...]" token
 * ([unused0], whatever its type) verbatim, "▁x" → "x", and a bare "x" → "##x". */
static hs_status bert_vocab(const hs_gguf *g, const char *const *tok, size_t n, char ***out,
                            hs_error *err)
{
    long ti;
    hs_status st = find_array(g, "tokenizer.ggml.token_type", HS_GGUF_INT32, 0, &ti, err);
    if (st)
        return st;
    if (ti >= 0 && hs_gguf_kv_len(g, (size_t)ti) < n)
        return hs_fail(err, HS_E_SHAPE, "tokenizer.ggml.token_type has %zu entries for %zu tokens",
                       hs_gguf_kv_len(g, (size_t)ti), n);
    char **v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return hs_fail(err, HS_E_NOMEM, "out of memory rebuilding the vocabulary");
    for (size_t j = 0; j < n; j++) {
        const char *s = tok[j];
        size_t len = strlen(s);
        int control = len >= 2 && s[0] == '[' && s[len - 1] == ']';
        if (ti >= 0 && !control) {
            hs_gguf_value tv;
            hs_gguf_kv_get(g, (size_t)ti, j, &tv);
            control = tv.i == 3;
        }
        const char *pre = "", *body = s;
        if (!control && !strncmp(s, PHANTOM, 3))
            body = s + 3;
        else if (!control)
            pre = "##";
        size_t need = strlen(pre) + strlen(body) + 1;
        if ((v[j] = malloc(need)))
            snprintf(v[j], need, "%s%s", pre, body);
        if (!v[j]) {
            for (size_t k = 0; k < j; k++)
                free(v[k]);
            free(v);
            return hs_fail(err, HS_E_NOMEM, "out of memory rebuilding the vocabulary");
        }
    }
    *out = v;
    return HS_OK;
}

static hs_status load_tokenizer(hs_model *m, const hs_gguf *g, hs_error *err)
{
    long mi, ti, gi;
    hs_status st;
    if ((st = find_typed(g, "tokenizer.ggml.model", HS_GGUF_STRING, 0, &mi, err)))
        return st;
    if (mi < 0)
        return HS_OK; /* weights only */
    hs_gguf_value model;
    hs_gguf_kv_get(g, (size_t)mi, 0, &model);
    const char *want = m->cfg.family == HS_FAMILY_GPT2 ? "gpt2" : "bert";
    if (strcmp(model.str, want))
        return hs_fail(err, HS_E_UNSUPPORTED,
                       "tokenizer.ggml.model '%.64s' is not supported for %s (expected '%s')",
                       model.str, hs_family_name(m->cfg.family), want);
    if ((st = find_array(g, "tokenizer.ggml.tokens", HS_GGUF_STRING, 1, &ti, err)))
        return st;
    size_t n_tok = hs_gguf_kv_len(g, (size_t)ti);
    if (n_tok != (size_t)m->cfg.vocab_size)
        return hs_fail(err, HS_E_SHAPE,
                       "tokenizer.ggml.tokens has %zu entries but token_embd.weight has %d rows",
                       n_tok, m->cfg.vocab_size);
    const char **tok = NULL, **merges = NULL;
    size_t n_merges = 0;
    if ((st = string_array(g, ti, "tokenizer.ggml.tokens", &tok, &n_tok, err)))
        return st;
    if (m->cfg.family == HS_FAMILY_GPT2) {
        if (!(st = find_array(g, "tokenizer.ggml.merges", HS_GGUF_STRING, 1, &gi, err)) &&
            !(st = string_array(g, gi, "tokenizer.ggml.merges", &merges, &n_merges, err)))
            st = hs_tokenizer_new_bpe(tok, n_tok, merges, n_merges, &m->tok, err);
        free(merges);
        free(tok);
        return st;
    }
    int lower = 1;
    if ((st = find_typed(g, "tokenizer.ggml.normalizer.lowercase", HS_GGUF_BOOL, 0, &gi, err))) {
        free(tok);
        return st;
    }
    if (gi >= 0) {
        hs_gguf_value v;
        hs_gguf_kv_get(g, (size_t)gi, 0, &v);
        lower = v.u != 0;
    }
    char **vocab = NULL;
    st = bert_vocab(g, tok, n_tok, &vocab, err);
    free(tok);
    if (st)
        return st;
    st = hs_tokenizer_new_wordpiece((const char *const *)vocab, n_tok, lower, &m->tok, err);
    for (size_t j = 0; j < n_tok; j++)
        free(vocab[j]);
    free(vocab);
    return st;
}

/* ---- entry point ---------------------------------------------------------------------- */

hs_status hs_gguf_load(hs_model *m, const char *path, hs_error *err)
{
    hs_gguf *g = NULL;
    gguf_ctx ctx = {0};
    hs_status st = hs_gguf_open(path, &g, err); /* its messages name the path */
    if (st)
        return st;
    if ((st = load_config(g, &m->cfg, err)))
        goto fail;
    m->format = HS_FORMAT_GGUF;
    ctx.g = g;
    ctx.family = m->cfg.family;
    ctx.views = calloc(4 * hs_gguf_tensor_count(g) + 1, sizeof *ctx.views);
    if (!ctx.views) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
        goto fail;
    }
    if (hs_gguf_tensor_count(g) == 0) { /* vocabulary only */
        snprintf(m->storage_dtype, sizeof m->storage_dtype, "none");
        if (!(m->open_flags & (HS_OPEN_TOKENIZER | HS_OPEN_NO_WEIGHTS))) {
            st = hs_fail(err, HS_E_UNSUPPORTED, "the file holds a vocabulary and no tensors; "
                         "it serves tokenize and info, not a forward pass");
            goto fail;
        }
    } else if (!(m->open_flags & HS_OPEN_TOKENIZER) &&
               (st = hs_weights_build(m, gguf_lookup, &ctx, err))) {
        if (err && !strncmp(err->msg, "missing tensor", 14) && ctx.missing[0])
            hs_fail(err, st, "missing tensor '%s'", ctx.missing);
        goto fail;
    }
    st = load_tokenizer(m, g, err);
fail:
    if (st)
        hs_error_prefix(err, "'%s'", path);
    free(ctx.views);
    hs_gguf_free(g);
    return st;
}
