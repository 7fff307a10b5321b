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

static hs_status load_config(const hs_gguf *g, hs_model_config *cfg, hs_arch *own, hs_error *err)
{
    long i;
    hs_status st;
    if ((st = find_typed(g, "general.architecture", HS_GGUF_STRING, 1, &i, err)))
        return st;
    hs_gguf_value arch;
    hs_gguf_kv_get(g, (size_t)i, 0, &arch);
    memset(cfg, 0, sizeof *cfg);
    long ti;
    if ((st = find_typed(g, "tokenizer.ggml.model", HS_GGUF_STRING, 0, &ti, err)))
        return st;
    hs_gguf_value tok_model = {0};
    if (ti >= 0)
        hs_gguf_kv_get(g, (size_t)ti, 0, &tok_model);
    /* RoBERTa is filed as "bert" with a "gpt2" tokenizer, as llama.cpp's converter does */
    const hs_arch *ar = hs_arch_find_gguf(arch.str, ti >= 0 ? tok_model.str : NULL);
    if (!ar)
        return hs_fail(err, HS_E_UNSUPPORTED,
                       "general.architecture '%.64s' is not supported (expected %s)", arch.str,
                       hs_arch_gguf_list());
    if ((st = hs_arch_gguf_check(ar, err)))
        return st;
    *own = *ar;
    /* A GGUF position table starts at the first row a text uses (llama.cpp's converter drops
     * RoBERTa's first pad_token_id + 1 rows), and llama.cpp numbers positions 0, 1, ... */
    own->pos_offset = 0;
    own->pos_skips_pad = 0;
    cfg->arch = own;
    cfg->family = ar->family;
    cfg->act = ar->act;
    const char *a = arch.str;
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    if ((st = get_u32(g, KEY("block_count"), 1, &cfg->n_layer, err)) ||
        (st = get_u32(g, KEY("context_length"), 1, &cfg->n_ctx, err)) ||
        (st = get_u32(g, KEY("embedding_length"), 1, &cfg->d_model, err)) ||
        (st = get_u32(g, KEY("feed_forward_length"), 1, &cfg->d_ff, err)) ||
        (st = get_u32(g, KEY("attention.head_count"), 1, &cfg->n_head, err)))
        return st;
    own->n_kv_head = cfg->n_head;
    if ((st = get_u32(g, KEY("attention.head_count_kv"), 0, &own->n_kv_head, err)))
        return st;
    if (own->n_kv_head != cfg->n_head) /* the GPT-2 and BERT layouts have one per head */
        return hs_fail(err, HS_E_UNSUPPORTED, "%s.attention.head_count_kv = %d differs from "
                       "head_count %d: grouped key/value heads are not read from GGUF files "
                       "yet", a, own->n_kv_head, cfg->n_head);
    if ((st = find_typed(g, KEY("attention.layer_norm_epsilon"), HS_GGUF_FLOAT32, 1, &i, err)))
        return st;
    hs_gguf_value v;
    hs_gguf_kv_get(g, (size_t)i, 0, &v);
    cfg->ln_eps = (float)v.f;
    if (!ar->causal) {
        if ((st = find_typed(g, KEY("attention.causal"), HS_GGUF_BOOL, 0, &i, err)))
            return st;
        if (i >= 0) {
            hs_gguf_kv_get(g, (size_t)i, 0, &v);
            if (v.u)
                return hs_fail(err, HS_E_UNSUPPORTED, "%s is true (headscope's %s is "
                               "bidirectional)", key, ar->name);
        }
    }
    if (ar->token_types &&
        (st = get_u32(g, "tokenizer.ggml.token_type_count", 1, &cfg->type_vocab_size, err)))
        return st;
#undef KEY
    const char *emb_name = hs_names_row(ar, HS_S_TOK_EMB)->gguf;
    const hs_gguf_tensor *emb = hs_gguf_find_tensor(g, emb_name);
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
        return hs_fail(err, HS_E_FORMAT, "missing tensor '%s'", emb_name);
    }
    if (n_vocab > INT_MAX)
        return hs_fail(err, HS_E_VALUE, "the vocabulary has %llu tokens", (unsigned long long)n_vocab);
    cfg->vocab_size = (int)n_vocab;
    return hs_config_validate(cfg, err);
}

/* ---- tensor names ------------------------------------------------------------------ */

/* The GGUF names come from the family's name table (src/model/arch.c). */

typedef struct gguf_ctx {
    const hs_gguf *g;
    const hs_model_config *cfg;
    hs_tensor_view *views; /* 4 slots per tensor: whole, Q, K, V slices */
    char missing[128];     /* GGUF name of the last tensor looked for and not found */
} gguf_ctx;

static hs_dtype to_dtype(uint32_t t)
{
    switch (t) {
    case HS_GGML_F16: return HS_DT_F16;
    case HS_GGML_BF16: return HS_DT_BF16;
    case HS_GGML_Q8_0: return HS_DT_Q8_0;
    case HS_GGML_Q4_0: return HS_DT_Q4_0;
    case HS_GGML_Q4_K: return HS_DT_Q4_K;
    case HS_GGML_Q6_K: return HS_DT_Q6_K;
    default: return HS_DT_F32;
    }
}

/* Bytes of one ne[0]-long row (the type was checked when the file was opened). */
static size_t row_bytes(const hs_gguf_tensor *t)
{
    uint64_t blck = 1, bytes = 4;
    hs_ggml_block(t->type, &blck, &bytes);
    return (size_t)((uint64_t)t->ne[0] / blck * bytes);
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

static const hs_tensor_view *gguf_lookup(void *vctx, const char *hf, const hs_tensor_ref *r,
                                         int *out_in)
{
    gguf_ctx *c = vctx;
    char name[128];
    (void)hf;
    *out_in = 1; /* every GGUF matrix is stored (out, in): ne = {in, out} */
    if (r->alt) /* a GGUF file has one name per tensor */
        return NULL;
    int rank = hs_names_shape(c->cfg, r->e).kind == HS_K_VEC ? 1 : 2, part = r->e->part;
    hs_names_format(r->e->gguf, r->layer, name, sizeof name);
    const hs_gguf_tensor *t = hs_gguf_find_tensor(c->g, name);
    size_t idx;
    if (t && r->e->slot == HS_S_DECODER) {
        /* Older converters wrote GPT-2's tied decoder as a copy of token_embd: keep it tied. */
        const hs_gguf_tensor *e =
            hs_gguf_find_tensor(c->g, hs_names_row(c->cfg->arch, HS_S_TOK_EMB)->gguf);
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
    if (part < 0 || !r->e->gguf_fused)
        return NULL;
    /* Newer llama.cpp also accepts BERT with a fused blk.N.attn_qkv {E, 3E}: Q, K, V are
     * row blocks of it, so each is a contiguous slice. */
    char fused[128];
    t = hs_gguf_find_tensor(c->g, hs_names_format(r->e->gguf_fused, r->layer, fused, sizeof fused));
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
    const char *want = m->cfg.arch->names->gguf_tokenizer;
    if (strcmp(model.str, want))
        return hs_fail(err, HS_E_UNSUPPORTED,
                       "tokenizer.ggml.model '%.64s' is not supported for %s (expected '%s')",
                       model.str, hs_family_name(m->cfg.family), want);
    if ((st = find_array(g, "tokenizer.ggml.tokens", HS_GGUF_STRING, 1, &ti, err)))
        return st;
    size_t n_tok = hs_gguf_kv_len(g, (size_t)ti);
    if (n_tok != (size_t)m->cfg.vocab_size)
        return hs_fail(err, HS_E_SHAPE,
                       "tokenizer.ggml.tokens has %zu entries but %s has %d rows", n_tok,
                       hs_names_row(m->cfg.arch, HS_S_TOK_EMB)->gguf, m->cfg.vocab_size);
    const char **tok = NULL, **merges = NULL;
    size_t n_merges = 0;
    if ((st = string_array(g, ti, "tokenizer.ggml.tokens", &tok, &n_tok, err)))
        return st;
    if (m->cfg.arch->tokenizer == HS_TOK_BPE) {
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
    if ((st = load_config(g, &m->cfg, &m->arch, err)))
        goto fail;
    m->format = HS_FORMAT_GGUF;
    ctx.g = g;
    ctx.cfg = &m->cfg;
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
