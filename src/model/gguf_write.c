/* GGUF v3 writer: a loaded GPT-2 or BERT model as llama.cpp's converter would write it
 * (keys and value types, tensor names, ne order, storage-type rules, tokenizer metadata
 * with BERT's "▁" rewrite), packed at 32-byte alignment. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/emb_stored.h"
#include "model/gguf_arch.h"
#include "model/gguf_deepseek.h"
#include "model/gguf_internal.h"
#include "model/gguf_moe.h"
#include "model/gguf_norms.h"
#include "model/gguf_t5.h"
#include "model/quant.h"
#include "nn/ops.h"

#define ALIGN 32u

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

struct hs_gguf_meta {
    sink s;        /* memory sink holding the KV section */
    uint64_t n_kv;
};
typedef hs_gguf_meta meta;

static void kv_head(meta *m, const char *key, hs_gguf_type t)
{
    put_str(&m->s, key);
    put_u32(&m->s, (uint32_t)t);
    m->n_kv++;
}

void hs_meta_u32(meta *m, const char *key, uint32_t v)
{
    kv_head(m, key, HS_GGUF_UINT32);
    put_u32(&m->s, v);
}

void hs_meta_f32(meta *m, const char *key, float v)
{
    kv_head(m, key, HS_GGUF_FLOAT32);
    hs_meta_elem_f32(m, v);
}

void hs_meta_bool(meta *m, const char *key, int v)
{
    unsigned char b = v ? 1 : 0;
    kv_head(m, key, HS_GGUF_BOOL);
    put(&m->s, &b, 1);
}

void hs_meta_str(meta *m, const char *key, const char *v)
{
    kv_head(m, key, HS_GGUF_STRING);
    put_str(&m->s, v);
}

void hs_meta_array(meta *m, const char *key, hs_gguf_type elem, uint64_t n)
{
    kv_head(m, key, HS_GGUF_ARRAY);
    put_u32(&m->s, (uint32_t)elem);
    put_u64(&m->s, n);
}

void hs_meta_elem_str(meta *m, const char *str) { put_str(&m->s, str); }

void hs_meta_elem_strn(meta *m, const char *prefix, const char *str)
{
    put_u64(&m->s, strlen(prefix) + strlen(str));
    put(&m->s, prefix, strlen(prefix));
    put(&m->s, str, strlen(str));
}

void hs_meta_elem_u32(meta *m, uint32_t v) { put_u32(&m->s, v); }

void hs_meta_elem_bytes(meta *m, const void *p, size_t n) { put(&m->s, p, n); }

void hs_meta_elem_f32(meta *m, float v)
{
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    put_u32(&m->s, b);
}

/* ---- the tensor plan ---------------------------------------------------------------- */

/* One GGUF tensor: `rows` rows of `cols` contiguous values (ne = {cols, rows}, or
 * ne = {cols} when rows == 0). Value (r, c) is src[r * ld + c] as stored, or with
 * transpose src[c * ld + r] (a normalised (in, out) matrix written as (out, in)). */
typedef struct plan_t {
    char name[64];
    const float *src; /* a layer's tensor: NULL until written (below) */
    int layer;        /* -1, or the layer whose slot `slot` holds it from column `off` */
    hs_slot slot;
    size_t off;
    size_t rows, cols, ld;
    int transpose;
    size_t rope_dh;  /* > 0: Llama's Q or K, rows (elements of a vector) in llama.cpp's
                        adjacent-pair order: GGUF row h dh + 2 i + j is row h dh + j dh/2 + i */
    size_t ne2, bstride; /* > 0: ne2 blocks of rows x cols, block b from src + b bstride */
    uint32_t type;
    uint64_t nbytes, offset;
} plan_t;

typedef struct hs_gguf_plan {
    plan_t *t;
    size_t n, cap;
    hs_gguf_ftype ftype;
    int nomem;
    float rope_freqs[HS_ROTARY_MAX_DIMS / 2]; /* Llama 3's divisors, rope_freqs.weight */
} plan;

/* The row of the normalised tensor that GGUF row r holds (Llama's Q/K permutation). */
static size_t src_row(const plan_t *t, size_t r)
{
    if (!t->rope_dh)
        return r;
    size_t dh = t->rope_dh, half = dh / 2, k = r % dh;
    return r / dh * dh + k % 2 * half + k / 2;
}

static uint32_t storage_type(const char *name, size_t rows, size_t cols, hs_gguf_ftype ft)
{
    size_t n = strlen(name);
    if (rows == 0 || (n >= 12 && !strcmp(name + n - 12, "_norm.weight")) ||
        n < 7 || strcmp(name + n - 7, ".weight") || !strcmp(name, "position_embd.weight") ||
        !strcmp(name, "token_types.weight") || strstr(name, ".ffn_gate_inp")) /* the router */
        return HS_GGML_F32;
    if (ft == HS_GGUF_FTYPE_Q8_0 && (strstr(name, "_exps.") || strstr(name, "_shexp.")))
        return HS_GGML_F16; /* the experts kept F16, as before qwen3moe (read in any ggml type) */
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
    t->layer = -1;
    t->rows = rows;
    t->cols = cols;
    t->ld = ld;
    t->transpose = transpose;
    t->type = storage_type(name, rows, cols, p->ftype);
    t->nbytes = type_bytes(t->type, (uint64_t)(rows ? rows : 1) * cols);
}

void hs_gguf_plan_add(plan *p, const char *name, const float *src, int layer, hs_slot slot,
                      size_t off, size_t rows, size_t cols, size_t ld, int transpose, size_t ne2,
                      size_t bstride)
{
    add(p, name, src, rows, cols, ld, transpose);
    if (p->nomem)
        return;
    plan_t *t = &p->t[p->n - 1];
    t->layer = layer;
    t->slot = slot;
    t->off = off;
    t->ne2 = ne2;
    t->bstride = bstride;
    if (ne2 > 0)
        t->nbytes = type_bytes(t->type, (uint64_t)rows * cols * ne2);
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
    if ((e->flags & HS_TN_HEAD) && !(pc->opt->keep_mlm && m->cfg.has_lm_head && m->mlm_w))
        return HS_OK;
    /* a layer's tensors are looked up when written (the weight cache converts them); the
     * embeddings and head kept in their stored type are converted once (emb_stored.h) */
    const float *src = NULL, *wte = NULL;
    hs_status st = hs_model_slot_f32(m, HS_S_TOK_EMB, &wte, err);
    if (st || (layer < 0 && (st = hs_model_slot_f32(m, e->slot, &src, err))))
        return st;
    int copy = src && (e->flags & HS_TN_GGUF_COPY) && !pc->opt->no_output_copy;
    const char *gname = e->gguf;
    if (hs_gguf_deepseek_row(pc->p, m, e, layer, &gname)) /* kv_b's halves, the experts' */
        return HS_OK;
    if ((e->flags & HS_TN_OPTIONAL) && (!src || src == wte) && !copy &&
        !(layer >= 0 && m->cfg.arch->mla_kv_lora > 0)) /* a dense layer's MLP (deepseek) */
        return HS_OK;
    hs_tensor_shape sh = hs_names_shape(&m->cfg, e);
    char nm[64];
    hs_names_format(gname, hs_names_index(&m->cfg, e, layer), nm, sizeof nm); /* T5: per stack */
    for (size_t i = 0; i < pc->p->n; i++) /* one tensor read into two slots (Falcon-7B's norm) */
        if (!strcmp(pc->p->t[i].name, nm))
            return HS_OK;
    size_t rows = (size_t)sh.rows, cols = (size_t)sh.cols, ld = (size_t)sh.ld, off = (size_t)sh.off;
    if (e->slot == HS_S_POS_EMB) { /* from the first row a text uses, as llama.cpp's converter
                                      writes RoBERTa's (the loader reads it from row 0) */
        off += (size_t)m->cfg.arch->pos_offset * cols;
        rows = (size_t)m->cfg.n_ctx;
    }
    src = src ? src + off : NULL;
    if (sh.kind == HS_K_VEC)
        add_vec(pc->p, nm, src, cols);
    else if (sh.kind == HS_K_MAT)
        add_lin(pc->p, nm, src, rows, cols, ld);
    else
        add(pc->p, nm, src, rows, cols, cols, 0);
    if (pc->p->nomem)
        return HS_OK;
    plan_t *t = &pc->p->t[pc->p->n - 1];
    if (layer >= 0) {
        t->layer = layer;
        t->slot = e->slot;
        t->off = off;
    }
    /* llama.cpp's rope turns adjacent pairs: Llama's Q and K rows are permuted (its
     * converter's LlamaModel.permute); Qwen2 and GPT-NeoX run rotate-half as stored */
    if (m->cfg.family == HS_FAMILY_LLAMA && (e->slot == HS_S_QKV_W || e->slot == HS_S_QKV_B) &&
        (e->part == 0 || e->part == 1))
        t->rope_dh = (size_t)m->cfg.d_head;
    /* Llama 3's rope scaling as llama.cpp's converter stores it: a divisor per frequency */
    if (e->slot == HS_S_TOK_EMB && m->cfg.arch->rope_scaling == HS_ROPE_LLAMA3) {
        const hs_arch *a = m->cfg.arch;
        double inv[HS_ROTARY_MAX_DIMS / 2];
        hs_op_rope_freqs(a, inv);
        for (int k = 0; k < a->rotary_dims / 2; k++)
            pc->p->rope_freqs[k] = (float)(pow((double)a->rotary_base, -2.0 * k / a->rotary_dims) / inv[k]);
        add_vec(pc->p, "rope_freqs.weight", pc->p->rope_freqs, (size_t)a->rotary_dims / 2);
    }
    if (e->slot == HS_S_TOK_EMB && m->cfg.arch->rope_scaling == HS_ROPE_LONGROPE) { /* Phi-3's */
        add_vec(pc->p, "rope_factors_long.weight", m->cfg.arch->rope_long,
                (size_t)m->cfg.arch->rotary_dims / 2);
        add_vec(pc->p, "rope_factors_short.weight", m->cfg.arch->rope_short,
                (size_t)m->cfg.arch->rotary_dims / 2);
    }
    return HS_OK;
}

static hs_status build_plan(plan *p, const hs_model *m, const hs_gguf_write_options *opt,
                            hs_error *err)
{
    plan_ctx pc = {p, m, opt};
    hs_status st = hs_names_walk(&m->cfg, plan_row, &pc, err);
    if (st)
        return st;
    if (m->cfg.arch->moe_experts > 0)
        hs_gguf_moe_experts(p, m); /* gguf_moe.c: deepseek2's and qwen3moe's */
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

/* Writes one tensor: gathers its rows in GGUF order, encodes, pads. */
static void write_tensor(sink *s, const plan_t *t, float *row, unsigned char *enc)
{
    if (t->ne2 > 0) { /* each block as a 2-D tensor of its own, then the padding */
        plan_t b = *t;
        b.ne2 = 0;
        b.nbytes = 0; /* no padding between blocks */
        for (size_t k = 0; k < t->ne2; k++, b.src += t->bstride)
            write_tensor(s, &b, row, enc);
        put_zeros(s, (size_t)((ALIGN - t->nbytes % ALIGN) % ALIGN));
        return;
    }
    size_t rows = t->rows ? t->rows : 1, cols = t->cols;
    for (size_t r = 0; r < rows; r++) {
        size_t sr = src_row(t, r);
        if (t->transpose)
            for (size_t c = 0; c < cols; c++)
                row[c] = t->src[c * t->ld + sr];
        else if (!t->rows && t->rope_dh)
            for (size_t c = 0; c < cols; c++)
                row[c] = t->src[src_row(t, c)];
        else
            memcpy(row, t->src + sr * t->ld, cols * sizeof *row);
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
                hs_quant_q8_0_encode(row + 32 * b, enc + 34 * b);
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

/* What llama.cpp cannot hold of a rotary decoder, refused before anything is written. */
static hs_status writable(const hs_model *m, hs_error *err)
{
    const hs_arch *a = m->cfg.arch;
    int norms = hs_gguf_norms_family(a); /* Gemma's windows and GeGLU are llama.cpp's */
    hs_status st = hs_gguf_mqa_writable(m, err); /* Falcon-RW, biases */
    if (st || (st = hs_gguf_deepseek_writable(m, err)) || (st = hs_gguf_t5_writable(m, err)))
        return st;
    if ((a->sliding_window > 0 && !norms && (a->global_every > 0 || a->pos != HS_POS_ROTARY)) ||
        a->vis.kind != hs_arch_of(a->family)->vis.kind ||
        (m->cfg.gated && m->cfg.act != HS_ACT_SILU && !norms && !a->enc_dec))
        return hs_fail(err, HS_E_UNSUPPORTED, "a sliding window on some layers only, another "
                       "visibility than the family's or a MLP gated by another activation than "
                       "SiLU cannot be written to GGUF");
    if (a->pos != HS_POS_ROTARY)
        return HS_OK;
    if (a->rope_scaling == HS_ROPE_LONGROPE && a->family != HS_FAMILY_PHI3)
        return hs_fail(err, HS_E_UNSUPPORTED, "longrope scaling in a %s model cannot be written to "
                       "GGUF (llama.cpp reads rope_factors_*.weight for phi3 only)", a->name);
    if (a->family == HS_FAMILY_LLAMA && a->rotary_dims != m->cfg.d_head)
        return hs_fail(err, HS_E_UNSUPPORTED, "this Llama model rotates %d of its %d head "
                       "dimensions, and llama.cpp's llama architecture rotates all of them; it "
                       "cannot be written to GGUF", a->rotary_dims, m->cfg.d_head);
    if (a->rope_scaling == HS_ROPE_YARN && a->mla_kv_lora <= 0) /* deepseek2's is written */
        return hs_fail(err, HS_E_UNSUPPORTED, "YaRN rope scaling cannot be written to GGUF yet");
    if (a->rope_scaling == HS_ROPE_LLAMA3 && a->family != HS_FAMILY_LLAMA)
        return hs_fail(err, HS_E_UNSUPPORTED, "Llama 3 rope scaling in a %s model cannot be "
                       "written to GGUF (llama.cpp reads rope_freqs.weight for llama only)", a->name);
    if (a->family == HS_FAMILY_GPT_NEOX && m->cfg.n_kv_head != m->cfg.n_head)
        return hs_fail(err, HS_E_UNSUPPORTED, "grouped key/value heads in a GPT-NeoX model cannot "
                       "be written to GGUF");
    return HS_OK;
}

void hs_gguf_dim_keys(meta *mt, const hs_model_config *c, const char *arch)
{
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)
    hs_meta_u32(mt, KEY("context_length"), (uint32_t)c->n_ctx);
    hs_meta_u32(mt, KEY("embedding_length"), (uint32_t)c->d_model);
    hs_meta_u32(mt, KEY("block_count"), (uint32_t)c->n_layer);
    hs_meta_u32(mt, KEY("feed_forward_length"), (uint32_t)c->d_ff);
    hs_meta_u32(mt, KEY("attention.head_count"), (uint32_t)c->n_head);
#undef KEY
}

/* The hyperparameters of gptneox, llama and qwen2, with the value types llama.cpp checks (in
 * the order of llama.cpp's converter). Llama 3's rope scaling is rope_freqs.weight (plan_row);
 * linear scaling is rope.scaling.type and .factor. */
static void rotary_keys(meta *mt, const hs_model_config *c, const char *arch)
{
    const hs_arch *a = c->arch;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)
    hs_gguf_dim_keys(mt, c, arch);
    if (a->family != HS_FAMILY_GPT_NEOX)
        hs_meta_u32(mt, KEY("attention.head_count_kv"), (uint32_t)c->n_kv_head);
    if (c->d_head * c->n_head != c->d_model) { /* heads not splitting d_model: their width */
        hs_meta_u32(mt, KEY("attention.key_length"), (uint32_t)c->d_head);
        hs_meta_u32(mt, KEY("attention.value_length"), (uint32_t)c->d_head);
    }
    if (a->sliding_window > 0) /* every layer's (writable) */
        hs_meta_u32(mt, KEY("attention.sliding_window"), (uint32_t)a->sliding_window);
    hs_meta_u32(mt, KEY("rope.dimension_count"), (uint32_t)a->rotary_dims);
    hs_meta_f32(mt, KEY("rope.freq_base"), a->rotary_base);
    if (a->norm_kind == HS_NORM_LAYER) {
        if (a->family == HS_FAMILY_GPT_NEOX) /* llama.cpp's falcon is always parallel */
            hs_meta_bool(mt, KEY("use_parallel_residual"), a->parallel_residual);
        hs_meta_f32(mt, KEY("attention.layer_norm_epsilon"), c->ln_eps);
    } else {
        hs_meta_f32(mt, KEY("attention.layer_norm_rms_epsilon"), c->ln_eps);
        hs_meta_u32(mt, KEY("vocab_size"), (uint32_t)c->vocab_size);
    }
    if (a->rope_scaling == HS_ROPE_LINEAR) {
        hs_meta_str(mt, KEY("rope.scaling.type"), "linear");
        hs_meta_f32(mt, KEY("rope.scaling.factor"), a->rope_factor);
    }
    if (a->rope_scaling == HS_ROPE_LONGROPE) { /* and the factor tensors (plan_row) */
        hs_meta_u32(mt, KEY("rope.scaling.original_context_length"), (uint32_t)a->rope_orig_ctx);
        hs_meta_f32(mt, KEY("rope.scaling.attn_factor"), a->rope_attn_factor);
    }
    hs_gguf_norms_write(mt, c, arch);
    hs_gguf_moe_write(mt, c, arch);
#undef KEY
}

/* The whole file into s. */
static hs_status emit(sink *s, const hs_model *m, const hs_gguf_write_options *opt, hs_error *err)
{
    hs_gguf_write_options def = {.ftype = HS_GGUF_FTYPE_F32};
    if (!opt)
        opt = &def;
    hs_status st = writable(m, err);
    if (st || (st = hs_gguf_moe_writable(&m->cfg, err)))
        return st;
    if (opt->ftype != HS_GGUF_FTYPE_F32 && opt->ftype != HS_GGUF_FTYPE_F16 &&
        opt->ftype != HS_GGUF_FTYPE_BF16 && opt->ftype != HS_GGUF_FTYPE_Q8_0)
        return hs_fail(err, HS_E_ARG, "unsupported output type %d", (int)opt->ftype);
    const hs_model_config *c = &m->cfg;
    const char *arch = hs_arch_gguf_name(c->arch);
    if (!arch)
        return hs_fail(err, HS_E_UNSUPPORTED, "architecture '%s' has no GGUF form (%s); use the "
                       "Hugging Face folder", c->arch->name,
                       c->arch->enc_dec ? "headscope writes no encoder-decoder GGUF file yet"
                                        : "llama.cpp has no such architecture");
    if (!m->tok)
        return hs_fail(err, HS_E_UNSUPPORTED,
                       "the model has no tokenizer, and llama.cpp needs tokenizer.ggml.* in a gguf file");
    meta mt = {.s = {.err = err}};
    plan p = {.ftype = opt->ftype};
    float *row = NULL;
    unsigned char *enc = NULL;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)

    hs_meta_str(&mt, "general.architecture", arch);
    hs_meta_str(&mt, "general.type", "model");
    if (opt->name && *opt->name)
        hs_meta_str(&mt, "general.name", opt->name);
    if (c->arch->pos == HS_POS_ROTARY) {
        hs_meta_u32(&mt, "general.file_type", file_type(opt->ftype));
        if (c->arch->mla_kv_lora > 0)
            hs_gguf_deepseek_keys(&mt, c, arch);
        else
            rotary_keys(&mt, c, arch);
    } else if (c->arch->enc_dec) {
        hs_gguf_t5_keys(&mt, c, arch, file_type(opt->ftype));
    } else {
        hs_meta_u32(&mt, KEY("block_count"), (uint32_t)c->n_layer);
        hs_meta_u32(&mt, KEY("context_length"), (uint32_t)c->n_ctx);
        hs_meta_u32(&mt, KEY("embedding_length"), (uint32_t)c->d_model);
        hs_meta_u32(&mt, KEY("feed_forward_length"), (uint32_t)c->d_ff);
        hs_meta_u32(&mt, KEY("attention.head_count"), (uint32_t)c->n_head);
        hs_gguf_mqa_write(&mt, c, arch); /* starcoder's K/V heads */
        hs_meta_f32(&mt, KEY("attention.layer_norm_epsilon"), c->ln_eps);
        hs_meta_u32(&mt, "general.file_type", file_type(opt->ftype));
        if (c->arch->vis.kind == HS_VIS_BIDIRECTIONAL)
            hs_meta_bool(&mt, KEY("attention.causal"), 0);
    }
#undef KEY
    if ((st = hs_gguf_tokenizer_write(&mt, m, err)))
        goto fail;
    hs_meta_u32(&mt, "general.quantization_version", 2);
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
        put_u32(s, t->ne2 ? 3 : t->rows ? 2 : 1);
        put_u64(s, t->cols);
        if (t->rows)
            put_u64(s, t->rows);
        if (t->ne2)
            put_u64(s, t->ne2);
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
    hs_layer ly;
    int held = -1; /* the layer pinned in the weight cache, its float32 weights in ly */
    for (size_t i = 0; i < p.n && !s->failed; i++) {
        plan_t *t = &p.t[i];
        if (held != t->layer && held >= 0)
            hs_layer_put(m, held);
        if (held != t->layer && t->layer >= 0 && (st = hs_layer_get(m, t->layer, &ly, err)))
            goto fail;
        if ((held = t->layer) >= 0)
            t->src = *hs_layer_slot_ptr(&ly, t->slot) + t->off;
        write_tensor(s, t, row, enc);
    }
    if (held >= 0)
        hs_layer_put(m, held);
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
    hs_status st = writable(m, err); /* before the file is created */
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
