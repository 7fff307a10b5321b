/* GGUF v3 writer: a loaded GPT-2 or BERT model as llama.cpp's converter would write it
 * (keys and value types, tensor names, ne order, storage-type rules, tokenizer metadata
 * with BERT's "▁" rewrite), packed at 32-byte alignment. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "headscope/gguf.h"
#include "model/model_internal.h"

#define ALIGN 32u
#define PHANTOM "\xe2\x96\x81" /* U+2581 */

/* ---- output sinks ------------------------------------------------------------------- */

typedef struct sink {
    FILE *f;            /* file sink, or NULL for memory */
    unsigned char *buf; /* memory sink */
    size_t len, cap;
    uint64_t written;
    int failed; /* an error is already in err */
    hs_error *err;
    const char *path;
} sink;

static void put(sink *s, const void *p, size_t n)
{
    if (s->failed || n == 0)
        return;
    s->written += n;
    if (s->f) {
        if (fwrite(p, 1, n, s->f) != n) {
            hs_fail(s->err, HS_E_IO, "cannot write '%s': %s", s->path, strerror(errno));
            s->failed = 1;
        }
        return;
    }
    if (n > s->cap - s->len) {
        size_t cap = s->cap ? s->cap : 4096;
        while (n > cap - s->len) {
            if (cap > SIZE_MAX / 2) {
                hs_fail(s->err, HS_E_NOMEM, "out of memory encoding gguf");
                s->failed = 1;
                return;
            }
            cap *= 2;
        }
        unsigned char *nb = realloc(s->buf, cap);
        if (!nb) {
            hs_fail(s->err, HS_E_NOMEM, "out of memory encoding gguf");
            s->failed = 1;
            return;
        }
        s->buf = nb;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
}

static void put_u32(sink *s, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    put(s, b, 4);
}

static void put_u64(sink *s, uint64_t v)
{
    put_u32(s, (uint32_t)v);
    put_u32(s, (uint32_t)(v >> 32));
}

static void put_str(sink *s, const char *str)
{
    size_t n = strlen(str);
    put_u64(s, n);
    put(s, str, n);
}

static void put_zeros(sink *s, size_t n)
{
    static const unsigned char z[ALIGN] = {0};
    while (n > 0) {
        size_t k = n < sizeof z ? n : sizeof z;
        put(s, z, k);
        n -= k;
    }
}

/* ---- metadata ------------------------------------------------------------------------ */

typedef struct meta {
    sink s;        /* memory sink holding the KV section */
    uint64_t n_kv;
} meta;

static void kv_head(meta *m, const char *key, hs_gguf_type t)
{
    put_str(&m->s, key);
    put_u32(&m->s, (uint32_t)t);
    m->n_kv++;
}

static void kv_u32(meta *m, const char *key, uint32_t v)
{
    kv_head(m, key, HS_GGUF_UINT32);
    put_u32(&m->s, v);
}

static void kv_f32(meta *m, const char *key, float v)
{
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    kv_head(m, key, HS_GGUF_FLOAT32);
    put_u32(&m->s, b);
}

static void kv_bool(meta *m, const char *key, int v)
{
    unsigned char b = v ? 1 : 0;
    kv_head(m, key, HS_GGUF_BOOL);
    put(&m->s, &b, 1);
}

static void kv_str(meta *m, const char *key, const char *v)
{
    kv_head(m, key, HS_GGUF_STRING);
    put_str(&m->s, v);
}

static void kv_array_head(meta *m, const char *key, hs_gguf_type elem, uint64_t n)
{
    kv_head(m, key, HS_GGUF_ARRAY);
    put_u32(&m->s, (uint32_t)elem);
    put_u64(&m->s, n);
}

static int is_special(const hs_arch *a, const char *tok)
{
    for (int i = 0; i < a->n_specials; i++)
        if (!strcmp(tok, a->specials[i]))
            return 1;
    return 0;
}

/* "[...]": stored verbatim in a BERT vocabulary ([unused0], [PAD17], ...), as llama.cpp's
 * converter and its ggml-vocab-bert-bge.gguf store them. */
static int is_bracketed(const char *tok)
{
    size_t n = strlen(tok);
    return n >= 2 && tok[0] == '[' && tok[n - 1] == ']';
}

static hs_status write_tokenizer(meta *mt, const hs_model *m, hs_error *err)
{
    const hs_tokenizer *t = m->tok;
    size_t V = (size_t)m->cfg.vocab_size, n_tok = hs_tokenizer_vocab_size(t);
    if (n_tok > V)
        return hs_fail(err, HS_E_SHAPE,
                       "the tokenizer has %zu tokens but the embedding has only %zu rows", n_tok, V);
    char pad[32];
    if (m->cfg.arch->tokenizer == HS_TOK_BPE) {
        kv_str(mt, "tokenizer.ggml.model", m->cfg.arch->names->gguf_tokenizer);
        kv_str(mt, "tokenizer.ggml.pre", "gpt-2");
        kv_array_head(mt, "tokenizer.ggml.tokens", HS_GGUF_STRING, V);
        for (size_t i = 0; i < V; i++) {
            const char *s = hs_tokenizer_token(t, (int32_t)i);
            if (!s) {
                snprintf(pad, sizeof pad, "[PAD%zu]", i);
                s = pad;
            }
            put_str(&mt->s, s);
        }
        kv_array_head(mt, "tokenizer.ggml.token_type", HS_GGUF_INT32, V);
        for (size_t i = 0; i < V; i++) {
            const char *s = hs_tokenizer_token(t, (int32_t)i);
            put_u32(&mt->s, !s ? 5u : is_special(m->cfg.arch, s) ? 3u : 1u);
        }
        size_t n_merges = hs_tokenizer_merge_count(t);
        kv_array_head(mt, "tokenizer.ggml.merges", HS_GGUF_STRING, n_merges);
        for (size_t r = 0; r < n_merges; r++)
            put_str(&mt->s, hs_tokenizer_merge(t, r));
        const hs_arch *a = m->cfg.arch;
        if (a->cls_token) { /* RoBERTa, as llama.cpp's RobertaModel: <s> text </s> */
            static const char *const ids[] = {"tokenizer.ggml.bos_token_id",
                                              "tokenizer.ggml.eos_token_id",
                                              "tokenizer.ggml.padding_token_id",
                                              "tokenizer.ggml.mask_token_id"};
            const char *tok[] = {a->cls_token, a->sep_token, a->pad_token, a->mask_token};
            for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
                int32_t id = tok[k] ? hs_tokenizer_id(t, tok[k]) : -1;
                if (id >= 0)
                    kv_u32(mt, ids[k], (uint32_t)id);
            }
            kv_bool(mt, "tokenizer.ggml.add_bos_token", 1);
            kv_bool(mt, "tokenizer.ggml.add_eos_token", 1);
        } else {
            int32_t eot = hs_tokenizer_id(t, "<|endoftext|>");
            if (eot >= 0) {
                kv_u32(mt, "tokenizer.ggml.bos_token_id", (uint32_t)eot);
                kv_u32(mt, "tokenizer.ggml.eos_token_id", (uint32_t)eot);
            }
        }
        if (a->token_types)
            kv_u32(mt, "tokenizer.ggml.token_type_count", (uint32_t)m->cfg.type_vocab_size);
        return HS_OK;
    }
    for (size_t i = 0; i < V; i++) {
        const char *s = hs_tokenizer_token(t, (int32_t)i);
        if (s && !strncmp(s, "##", 2) && is_bracketed(s + 2))
            return hs_fail(err, HS_E_UNSUPPORTED,
                           "token %zu '%.64s' cannot be stored: a GGUF BERT vocabulary keeps "
                           "'[...]' verbatim, so it would read back as '%.64s'", i, s, s + 2);
    }
    kv_str(mt, "tokenizer.ggml.model", m->cfg.arch->names->gguf_tokenizer);
    kv_str(mt, "tokenizer.ggml.pre", "jina-v2-en");
    kv_array_head(mt, "tokenizer.ggml.tokens", HS_GGUF_STRING, V);
    for (size_t i = 0; i < V; i++) {
        const char *s = hs_tokenizer_token(t, (int32_t)i);
        if (!s) {
            snprintf(pad, sizeof pad, "[PAD%zu]", i);
            put_str(&mt->s, pad);
        } else if (is_bracketed(s)) {
            put_str(&mt->s, s);
        } else if (!strncmp(s, "##", 2)) {
            put_str(&mt->s, s + 2);
        } else {
            put_u64(&mt->s, strlen(s) + 3);
            put(&mt->s, PHANTOM, 3);
            put(&mt->s, s, strlen(s));
        }
    }
    kv_array_head(mt, "tokenizer.ggml.token_type", HS_GGUF_INT32, V);
    for (size_t i = 0; i < V; i++) {
        const char *s = hs_tokenizer_token(t, (int32_t)i);
        put_u32(&mt->s, !s ? 5u : is_special(m->cfg.arch, s) ? 3u : 1u);
    }
    kv_u32(mt, "tokenizer.ggml.token_type_count", (uint32_t)m->cfg.type_vocab_size);
    kv_bool(mt, "tokenizer.ggml.normalizer.lowercase", hs_tokenizer_lowercase(t));
    /* no eos_token_id: llama.cpp would take [SEP] for an end-of-generation token */
    static const char *const ids[][2] = {
        {"tokenizer.ggml.bos_token_id", "[CLS]"},     {"tokenizer.ggml.unknown_token_id", "[UNK]"},
        {"tokenizer.ggml.seperator_token_id", "[SEP]"}, {"tokenizer.ggml.padding_token_id", "[PAD]"},
        {"tokenizer.ggml.mask_token_id", "[MASK]"},
    };
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
        int32_t id = hs_tokenizer_id(t, ids[k][1]);
        if (id >= 0)
            kv_u32(mt, ids[k][0], (uint32_t)id);
    }
    return HS_OK;
}

/* ---- the tensor plan ---------------------------------------------------------------- */

/* One GGUF tensor: `rows` rows of `cols` contiguous values (ne = {cols, rows}, or
 * ne = {cols} when rows == 0). Value (r, c) is src[r * ld + c] as stored, or with
 * transpose src[c * ld + r] (a normalised (in, out) matrix written as (out, in)). */
typedef struct plan_t {
    char name[64];
    const float *src;
    size_t rows, cols, ld;
    int transpose;
    uint32_t type;
    uint64_t nbytes, offset;
} plan_t;

typedef struct plan {
    plan_t *t;
    size_t n, cap;
    hs_gguf_ftype ftype;
    int nomem;
} plan;

static uint32_t storage_type(const char *name, size_t rows, size_t cols, hs_gguf_ftype ft)
{
    size_t n = strlen(name);
    if (rows == 0 || (n >= 12 && !strcmp(name + n - 12, "_norm.weight")) ||
        n < 7 || strcmp(name + n - 7, ".weight") || !strcmp(name, "position_embd.weight") ||
        !strcmp(name, "token_types.weight"))
        return HS_GGML_F32;
    switch (ft) {
    case HS_GGUF_FTYPE_F16: return HS_GGML_F16;
    case HS_GGUF_FTYPE_BF16: return HS_GGML_BF16;
    case HS_GGUF_FTYPE_Q8_0: return cols % 32 ? HS_GGML_F16 : HS_GGML_Q8_0;
    case HS_GGUF_FTYPE_F32: break;
    }
    return HS_GGML_F32;
}

static uint64_t type_bytes(uint32_t type, uint64_t count)
{
    uint64_t blck = 1, bytes = 4;
    hs_ggml_block(type, &blck, &bytes);
    return count / blck * bytes;
}

static void add(plan *p, const char *name, const float *src, size_t rows, size_t cols,
                size_t ld, int transpose)
{
    if (p->nomem)
        return;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        plan_t *nt = realloc(p->t, cap * sizeof *nt);
        if (!nt) {
            p->nomem = 1;
            return;
        }
        p->t = nt;
        p->cap = cap;
    }
    plan_t *t = &p->t[p->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->src = src;
    t->rows = rows;
    t->cols = cols;
    t->ld = ld;
    t->transpose = transpose;
    t->type = storage_type(name, rows, cols, p->ftype);
    t->nbytes = type_bytes(t->type, (uint64_t)(rows ? rows : 1) * cols);
}

static void add_vec(plan *p, const char *name, const float *v, size_t n)
{
    add(p, name, v, 0, n, n, 0);
}

/* A normalised (in, out) matrix block written as (out, in): ne = {in, out}. */
static void add_lin(plan *p, const char *name, const float *w, size_t in, size_t out, size_t ld)
{
    add(p, name, w, out, in, ld, 1);
}

typedef struct plan_ctx {
    plan *p;
    const hs_model *m;
    const hs_gguf_write_options *opt;
} plan_ctx;

/* One row of the family's name table: its slot's floats (a Q, K or V block of the fused
 * slot for a part) under its GGUF name. An untied decoder is written; a tied one only as a
 * copy of the token embeddings where the row asks for it (HS_TN_GGUF_COPY: llama.cpp
 * before March 2025 requires GPT-2's output.weight) and opt->no_output_copy is not set
 * (the loader ties a copy again); the rows of the MLM head only with opt->keep_mlm. */
static hs_status plan_row(void *ctx, const hs_tensor_name *e, int layer, hs_error *err)
{
    plan_ctx *pc = ctx;
    const hs_model *m = pc->m;
    (void)err;
    if ((e->flags & HS_TN_HEAD) && !(pc->opt->keep_mlm && m->cfg.has_lm_head && m->mlm_w))
        return HS_OK;
    const float *src = *hs_slot_ptr((hs_model *)(uintptr_t)m, e->slot, layer);
    int copy = src && (e->flags & HS_TN_GGUF_COPY) && !pc->opt->no_output_copy;
    if ((e->flags & HS_TN_OPTIONAL) && (!src || src == m->wte) && !copy)
        return HS_OK;
    hs_tensor_shape sh = hs_names_shape(&m->cfg, e);
    char nm[64];
    hs_names_format(e->gguf, layer, nm, sizeof nm);
    size_t rows = (size_t)sh.rows, cols = (size_t)sh.cols, ld = (size_t)sh.ld;
    src += sh.off;
    if (e->slot == HS_S_POS_EMB) { /* from the first row a text uses, as llama.cpp's converter
                                      writes RoBERTa's (the loader reads it from row 0) */
        src += (size_t)m->cfg.arch->pos_offset * cols;
        rows = (size_t)m->cfg.n_ctx;
    }
    if (sh.kind == HS_K_VEC)
        add_vec(pc->p, nm, src, cols);
    else if (sh.kind == HS_K_MAT)
        add_lin(pc->p, nm, src, rows, cols, ld);
    else
        add(pc->p, nm, src, rows, cols, cols, 0);
    return HS_OK;
}

static hs_status build_plan(plan *p, const hs_model *m, const hs_gguf_write_options *opt,
                            hs_error *err)
{
    plan_ctx pc = {p, m, opt};
    hs_status st = hs_names_walk(&m->cfg, plan_row, &pc, err);
    if (st)
        return st;
    if (p->nomem)
        return hs_fail(err, HS_E_NOMEM, "out of memory planning the gguf tensors");
    uint64_t off = 0;
    for (size_t i = 0; i < p->n; i++) {
        p->t[i].offset = off;
        off += (p->t[i].nbytes + ALIGN - 1) / ALIGN * ALIGN;
    }
    return HS_OK;
}

/* ---- encoding ------------------------------------------------------------------------- */

static void le16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

/* Q8_0, as ggml's reference quantizer: d = max|x| / 127, q = roundf(x / d). */
static void q8_0_block(const float *x, unsigned char *out)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
        float a = fabsf(x[j]);
        if (a > amax)
            amax = a;
    }
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    le16(out, hs_f32_to_f16(d));
    for (int j = 0; j < 32; j++)
        out[2 + j] = (unsigned char)(int8_t)roundf(x[j] * id);
}

/* Writes one tensor: gathers its rows in GGUF order, encodes, pads. */
static void write_tensor(sink *s, const plan_t *t, float *row, unsigned char *enc)
{
    size_t rows = t->rows ? t->rows : 1, cols = t->cols;
    for (size_t r = 0; r < rows; r++) {
        if (t->transpose)
            for (size_t c = 0; c < cols; c++)
                row[c] = t->src[c * t->ld + r];
        else
            memcpy(row, t->src + r * t->ld, cols * sizeof *row);
        size_t nb = 0;
        switch (t->type) {
        case HS_GGML_F16:
            for (size_t c = 0; c < cols; c++)
                le16(enc + 2 * c, hs_f32_to_f16(row[c]));
            nb = 2 * cols;
            break;
        case HS_GGML_BF16:
            for (size_t c = 0; c < cols; c++)
                le16(enc + 2 * c, hs_f32_to_bf16(row[c]));
            nb = 2 * cols;
            break;
        case HS_GGML_Q8_0:
            for (size_t b = 0; b < cols / 32; b++)
                q8_0_block(row + 32 * b, enc + 34 * b);
            nb = cols / 32 * 34;
            break;
        default:
            for (size_t c = 0; c < cols; c++) {
                uint32_t u;
                memcpy(&u, &row[c], 4);
                enc[4 * c] = (unsigned char)u;
                enc[4 * c + 1] = (unsigned char)(u >> 8);
                enc[4 * c + 2] = (unsigned char)(u >> 16);
                enc[4 * c + 3] = (unsigned char)(u >> 24);
            }
            nb = 4 * cols;
        }
        put(s, enc, nb);
    }
    put_zeros(s, (size_t)((ALIGN - t->nbytes % ALIGN) % ALIGN));
}

static uint32_t file_type(hs_gguf_ftype ft) { return (uint32_t)ft; }

/* The whole file into s. */
static hs_status emit(sink *s, const hs_model *m, const hs_gguf_write_options *opt, hs_error *err)
{
    hs_gguf_write_options def = {.ftype = HS_GGUF_FTYPE_F32};
    if (!opt)
        opt = &def;
    if (hs_arch_gguf_check(m->cfg.arch, err))
        return HS_E_UNSUPPORTED;
    if (opt->ftype != HS_GGUF_FTYPE_F32 && opt->ftype != HS_GGUF_FTYPE_F16 &&
        opt->ftype != HS_GGUF_FTYPE_BF16 && opt->ftype != HS_GGUF_FTYPE_Q8_0)
        return hs_fail(err, HS_E_ARG, "unsupported output type %d", (int)opt->ftype);
    const hs_model_config *c = &m->cfg;
    const char *arch = hs_arch_gguf_name(c->arch);
    if (!arch)
        return hs_fail(err, HS_E_UNSUPPORTED, "architecture '%s' has no GGUF form (llama.cpp has "
                       "no such architecture); use the Hugging Face folder", c->arch->name);
    if (!m->tok)
        return hs_fail(err, HS_E_UNSUPPORTED,
                       "the model has no tokenizer, and llama.cpp needs tokenizer.ggml.* in a gguf file");
    meta mt = {.s = {.err = err}};
    plan p = {.ftype = opt->ftype};
    float *row = NULL;
    unsigned char *enc = NULL;
    hs_status st;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)

    kv_str(&mt, "general.architecture", arch);
    kv_str(&mt, "general.type", "model");
    if (opt->name && *opt->name)
        kv_str(&mt, "general.name", opt->name);
    kv_u32(&mt, KEY("block_count"), (uint32_t)c->n_layer);
    kv_u32(&mt, KEY("context_length"), (uint32_t)c->n_ctx);
    kv_u32(&mt, KEY("embedding_length"), (uint32_t)c->d_model);
    kv_u32(&mt, KEY("feed_forward_length"), (uint32_t)c->d_ff);
    kv_u32(&mt, KEY("attention.head_count"), (uint32_t)c->n_head);
    kv_f32(&mt, KEY("attention.layer_norm_epsilon"), c->ln_eps);
    kv_u32(&mt, "general.file_type", file_type(opt->ftype));
    if (!c->arch->causal)
        kv_bool(&mt, KEY("attention.causal"), 0);
#undef KEY
    if ((st = write_tokenizer(&mt, m, err)))
        goto fail;
    kv_u32(&mt, "general.quantization_version", 2);
    if (mt.s.failed) {
        st = HS_E_NOMEM;
        goto fail;
    }
    if ((st = build_plan(&p, m, opt, err)))
        goto fail;

    /* header, metadata, tensor infos, padding */
    size_t max_cols = 1;
    put(s, "GGUF", 4);
    put_u32(s, 3);
    put_u64(s, p.n);
    put_u64(s, mt.n_kv);
    put(s, mt.s.buf, mt.s.len);
    for (size_t i = 0; i < p.n; i++) {
        const plan_t *t = &p.t[i];
        put_str(s, t->name);
        put_u32(s, t->rows ? 2 : 1);
        put_u64(s, t->cols);
        if (t->rows)
            put_u64(s, t->rows);
        put_u32(s, t->type);
        put_u64(s, t->offset);
        if (t->cols > max_cols)
            max_cols = t->cols;
    }
    put_zeros(s, (size_t)((ALIGN - s->written % ALIGN) % ALIGN));

    row = malloc(max_cols * sizeof *row);
    enc = malloc(max_cols * 4);
    if (!row || !enc) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory encoding tensors");
        goto fail;
    }
    for (size_t i = 0; i < p.n && !s->failed; i++)
        write_tensor(s, &p.t[i], row, enc);
    st = s->failed ? (s->f ? HS_E_IO : HS_E_NOMEM) : HS_OK;
fail:
    free(enc);
    free(row);
    free(p.t);
    free(mt.s.buf);
    return st;
}

/* ---- public API ------------------------------------------------------------------------ */

hs_status hs_gguf_ftype_parse(const char *s, hs_gguf_ftype *out)
{
    static const struct {
        const char *name;
        hs_gguf_ftype t;
    } names[] = {{"f32", HS_GGUF_FTYPE_F32}, {"f16", HS_GGUF_FTYPE_F16},
                 {"bf16", HS_GGUF_FTYPE_BF16}, {"q8_0", HS_GGUF_FTYPE_Q8_0}};
    if (!s || !out)
        return HS_E_ARG;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t k = 0;
        while (s[k] && names[i].name[k] &&
               (s[k] >= 'A' && s[k] <= 'Z' ? s[k] - 'A' + 'a' : s[k]) == names[i].name[k])
            k++;
        if (!s[k] && !names[i].name[k]) {
            *out = names[i].t;
            return HS_OK;
        }
    }
    return HS_E_ARG;
}

hs_status hs_gguf_encode(const hs_model *m, const hs_gguf_write_options *opt,
                         unsigned char **out, size_t *len, hs_error *err)
{
    if (!m || !out || !len)
        return hs_fail(err, HS_E_ARG, "hs_gguf_encode: null argument");
    *out = NULL;
    *len = 0;
    sink s = {.err = err};
    hs_status st = emit(&s, m, opt, err);
    if (st) {
        free(s.buf);
        return st;
    }
    *out = s.buf;
    *len = s.len;
    return HS_OK;
}

hs_status hs_gguf_write(const hs_model *m, const char *path, const hs_gguf_write_options *opt,
                        hs_error *err)
{
    if (!m || !path)
        return hs_fail(err, HS_E_ARG, "hs_gguf_write: null argument");
    hs_status st = hs_arch_gguf_check(m->cfg.arch, err); /* before the file is created */
    if (st)
        return st;
    hs_out o;
    st = hs_out_open(path, &o, err);
    if (st)
        return st;
    sink s = {.f = o.f, .err = err, .path = path};
    st = emit(&s, m, opt, err);
    hs_status st2 = hs_out_close(&o, st == HS_OK, err);
    return st ? st : st2;
}
