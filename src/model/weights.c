/* Weight builder: resolves every logical tensor through a format reader, checks its
 * shape against the config, converts it to float32 into one arena in the normalised
 * (in, out) layout, and rejects NaN/Inf. */
#define _DEFAULT_SOURCE /* madvise, MADV_DONTNEED */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/arch_norms.h"
#include "model/emb_stored.h"
#include "model/model_internal.h"
#include "model/quant.h"
#include "nn/ops.h"

hs_status hs_config_validate(hs_model_config *c, hs_error *err)
{
#define CHECK_RANGE(field, name, lo, hi)                                                       \
    if (c->field < (lo) || c->field > (hi))                                                    \
        return hs_fail(err, HS_E_VALUE, "config: %s = %d is out of range [%d, %d]", name,      \
                       c->field, (int)(lo), (int)(hi));
    CHECK_RANGE(n_layer, "n_layer", 1, 1024)
    CHECK_RANGE(n_head, "n_head", 1, 1024)
    CHECK_RANGE(d_model, "d_model", 1, 65536)
    CHECK_RANGE(d_ff, "d_ff", 1, 1 << 20)
    CHECK_RANGE(n_ctx, "n_ctx", 1, 1 << 20)
    CHECK_RANGE(vocab_size, "vocab_size", 1, 1 << 24)
    if (!c->arch)
        c->arch = hs_arch_of(c->family);
    if (!c->arch)
        return hs_fail(err, HS_E_UNSUPPORTED, "config: model family %d is not supported "
                       "(expected %s)", (int)c->family, hs_arch_list());
    if (c->arch->token_types) {
        CHECK_RANGE(type_vocab_size, "type_vocab_size", 1, 1024)
    }
#undef CHECK_RANGE
    if (c->d_head == 0 && c->d_model % c->n_head != 0)
        return hs_fail(err, HS_E_VALUE, "config: d_model %d is not divisible by n_head %d",
                       c->d_model, c->n_head);
    if (c->d_head < 0 || c->d_head > 65536 || (size_t)c->d_head * (size_t)c->n_head > 65536)
        return hs_fail(err, HS_E_VALUE, "config: head_dim = %d is out of range [1, 65536 / "
                       "n_head]", c->d_head);
    if (!(c->ln_eps > 0.0f) || !isfinite(c->ln_eps))
        return hs_fail(err, HS_E_VALUE, "config: layer norm epsilon must be positive");
    if (c->d_head == 0) /* the reader found no head width of its own */
        c->d_head = c->d_model / c->n_head;
    c->gated = c->arch->gated;
    c->causal = 1; /* no layer's query sees a later key */
    for (int l = 0; l < c->n_layer; l++)
        c->causal = c->causal && hs_vis_is_causal(hs_model_layer_visibility(c, l));
    c->n_kv_head = c->arch->n_kv_head > 0 ? c->arch->n_kv_head : c->n_head;
    return hs_arch_check(c->arch, c, err);
}

/* ---- conversion ---------------------------------------------------------------- */

/* Stored rows decoded at a time before a transposed write: 16 floats of each destination
 * row, one cache line, written together. */
#define TRANSPOSE_ROWS 16

hs_status hs_tensor_convert(const hs_tensor_view *t, int out_in, hs_tensor_shape sh,
                            float *dst, const char *name, hs_error *err)
{
    int transpose = hs_rows_are_columns(sh, out_in);
    /* stored as (outer, inner): a vector is one row; a transposed matrix (out, in) */
    size_t outer = sh.kind == HS_K_VEC ? 1 : transpose ? (size_t)sh.cols : (size_t)sh.rows;
    size_t inner = sh.kind == HS_K_VEC ? (size_t)sh.cols : transpose ? (size_t)sh.rows
                                                                     : (size_t)sh.cols;
    size_t ld = sh.kind == HS_K_VEC ? inner : (size_t)sh.ld, off = (size_t)sh.off;
    size_t bad = (size_t)-1; /* the first non-finite element, row r's element i as r inner + i */
    int nomem = 0, par = outer * inner >= 65536;
    if (!transpose) { /* row r (stored row hs_view_row(t, r)) is row r of the slot */
#pragma omp parallel for schedule(static) reduction(min : bad) if (par)
        for (size_t r = 0; r < outer; r++) {
            float *o = dst + r * ld + off;
            hs_tensor_decode(t, hs_view_row(t, r) * inner, o, inner);
            size_t f = hs_op_first_nonfinite(o, inner);
            if (f != (size_t)-1 && r * inner + f < bad)
                bad = r * inner + f;
        }
    } else { /* stored row o (an output) is column o of the slot */
#pragma omp parallel if (par) reduction(min : bad)
        {
            float *buf = malloc(TRANSPOSE_ROWS * inner * sizeof *buf);
            if (!buf) {
#pragma omp atomic write
                nomem = 1;
            }
#pragma omp for schedule(static)
            for (size_t o0 = 0; o0 < outer; o0 += TRANSPOSE_ROWS) {
                if (!buf)
                    continue;
                size_t k = outer - o0 < TRANSPOSE_ROWS ? outer - o0 : TRANSPOSE_ROWS;
                if (t->pair_rows) /* each row from its place */
                    for (size_t j = 0; j < k; j++)
                        hs_tensor_decode(t, hs_view_row(t, o0 + j) * inner, buf + j * inner, inner);
                else
                    hs_tensor_decode(t, o0 * inner, buf, k * inner);
                size_t f = hs_op_first_nonfinite(buf, k * inner);
                if (f != (size_t)-1 && o0 * inner + f < bad)
                    bad = o0 * inner + f;
                for (size_t i = 0; i < inner; i++) {
                    float *d = dst + i * ld + off + o0;
                    for (size_t j = 0; j < k; j++)
                        d[j] = buf[j * inner + i];
                }
            }
            free(buf);
        }
    }
    if (nomem)
        return hs_fail(err, HS_E_NOMEM, "out of memory converting '%s'", name);
    if (bad != (size_t)-1) {
        size_t r = bad / inner, i = bad % inner; /* row and column; the element as stored: */
        int nan = isnan(transpose ? dst[i * ld + off + r] : dst[r * ld + off + i]);
        return hs_fail(err, HS_E_VALUE, "tensor '%s' holds a non-finite value (%s) at element %zu",
                       name, nan ? "NaN" : "Inf", hs_view_row(t, r) * inner + i);
    }
    return HS_OK;
}

void hs_release_pages(const void *p, size_t n)
{
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0)
        return;
    uintptr_t lo = (uintptr_t)p, hi = lo + n;
    uintptr_t a = (lo + (uintptr_t)pg - 1) / (uintptr_t)pg * (uintptr_t)pg;
    uintptr_t e = hi / (uintptr_t)pg * (uintptr_t)pg;
    if (e > a)
        madvise((void *)a, e - a, MADV_DONTNEED);
}

/* ---- the tensor plan -------------------------------------------------------------- */

enum { CACHED = 1, UNSTORABLE = 2 };

typedef struct builder {
    hs_model *m;
    hs_tensor_lookup lookup;
    void *ctx;
    size_t largest; /* element count of the largest matrix seen, for storage_dtype */
    int dry;        /* check names, shapes, dtypes and sizes only; write nothing */
    size_t arena_need;    /* dry pass: floats the arena must hold */
    size_t inplace_count; /* dry pass: floats used in place */
    float *cur;           /* the arena cursor (NULL in the dry pass) */
    int has_head;         /* the optional LM head's first row is present */
    unsigned char *cached; /* (n_layer, HS_WU_N): the layer matrix is stored in another type
                              than F32 and goes to the weight cache (CACHED), and a part of
                              it cannot be used in its stored type (| UNSTORABLE) */
    size_t cached_floats, stored_floats; /* dry pass: floats cached; kept stored (emb_stored) */
} builder;

/* The stored tensor of a table row, trying its second HF name; *name gets the name for
 * messages (the HF one). */
static const hs_tensor_view *find(builder *b, const hs_tensor_name *e, int layer, int *out_in,
                                  char *name, size_t cap)
{
    hs_tensor_ref r = {e, layer, 0};
    int k = hs_names_index(&b->m->cfg, e, layer); /* a decoder row's number (T5) */
    const hs_tensor_view *t = b->lookup(b->ctx, hs_names_format(e->hf, k, name, cap), &r,
                                        out_in);
    if (!t && e->hf_alt) {
        char alt[160];
        r.alt = 1;
        t = b->lookup(b->ctx, hs_names_format(e->hf_alt, k, alt, sizeof alt), &r, out_in);
    }
    return t;
}

/* Loads one tensor into dst (row stride ld, column offset off). */
static hs_status place(builder *b, const hs_tensor_view *t, int out_in, const char *name,
                       hs_tensor_shape sh, float *dst, hs_error *err)
{
    hs_tensor_kind kind = sh.kind;
    int rows = sh.rows, cols = sh.cols;
    if (!t)
        return hs_fail(err, HS_E_FORMAT, "missing tensor '%s'", name);
    if (t->dtype == HS_DT_OTHER)
        return hs_fail(err, HS_E_DTYPE, "tensor '%s' has dtype '%s'; weights must be F32, F16 "
                       "or BF16", t->name, t->dtype_name ? t->dtype_name : "?");
    int64_t want[2] = {0, 0};
    int want_nd = kind == HS_K_VEC ? 1 : 2;
    if (kind == HS_K_VEC) {
        want[0] = cols;
    } else if (kind == HS_K_MAT && out_in) {
        want[0] = cols;
        want[1] = rows;
    } else {
        want[0] = rows;
        want[1] = cols;
    }
    if (t->ndim != want_nd || t->shape[0] != want[0] || (want_nd == 2 && t->shape[1] != want[1])) {
        char got[96] = "", w[64];
        int pos = 0;
        for (int i = 0; i < t->ndim && pos < (int)sizeof got - 24; i++)
            pos += snprintf(got + pos, sizeof got - (size_t)pos, "%s%lld", i ? ", " : "",
                            (long long)t->shape[i]);
        if (want_nd == 1)
            snprintf(w, sizeof w, "%lld", (long long)want[0]);
        else
            snprintf(w, sizeof w, "%lld, %lld", (long long)want[0], (long long)want[1]);
        return hs_fail(err, HS_E_SHAPE, "tensor '%s' has shape (%s), expected (%s) from the config",
                       t->name, got, w);
    }
    size_t count = (size_t)rows * (size_t)cols;
    size_t blk_elems, blk_bytes;
    if (hs_quant_block(hs_dtype_ggml_quant(t->dtype), &blk_elems, &blk_bytes) &&
        t->shape[t->ndim - 1] % (int64_t)blk_elems != 0)
        return hs_fail(err, HS_E_FORMAT, "tensor '%s': %s rows must be a multiple of %zu",
                       t->name, hs_dtype_name(t->dtype), blk_elems);
    if (t->nbytes < hs_dtype_bytes(t->dtype, count))
        return hs_fail(err, HS_E_FORMAT, "tensor '%s': %zu bytes, expected %zu", t->name,
                       t->nbytes, hs_dtype_bytes(t->dtype, count));
    if (kind == HS_K_MAT && count > b->largest) {
        b->largest = count;
        snprintf(b->m->storage_dtype, sizeof b->m->storage_dtype, "%s", hs_dtype_name(t->dtype));
    }
    if (b->dry || !dst) /* dry pass, or a check of a tensor used in place */
        return HS_OK;
    hs_status st = hs_tensor_convert(t, out_in, sh, dst, t->name, err);
    if (b->m->release_src)
        hs_release_pages(t->data, t->nbytes);
    return st;
}

/* A fused QKV stored by K/V group, each row [g0: q .. q k v][g1: q .. q k v]... with
 * n_head / n_kv_head queries a group (GPT-NeoX: one a head, [h0: q k v][h1: q k v]...;
 * multi-query: one group, already [Q | K | V]), reordered in place into [Q | K | V]: x:
 * (rows, ld), the first W = hs_qkv_width columns of each row. */
hs_status hs_qkv_heads_reorder(const hs_model_config *c, float *x, int rows, int ld,
                               hs_error *err)
{
    int G = c->n_kv_head, s = c->n_head / G, dh = c->d_head, A = hs_model_attn_width(c);
    size_t W = (size_t)hs_qkv_width(c), hd = (size_t)dh * sizeof *x;
    if (G == 1) /* [q .. q k v] is [Q | K | V] */
        return HS_OK;
    float *row = malloc(W * sizeof *row);
    if (!row)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    for (int r = 0; r < rows; r++) {
        float *xr = x + (size_t)r * (size_t)ld;
        memcpy(row, xr, W * sizeof *row);
        for (int g = 0; g < G; g++) {
            const float *src = row + (size_t)g * (size_t)(s + 2) * (size_t)dh;
            for (int j = 0; j < s; j++) /* query head g s + j */
                memcpy(xr + (size_t)(g * s + j) * (size_t)dh, src + (size_t)j * (size_t)dh, hd);
            memcpy(xr + (size_t)A + (size_t)g * (size_t)dh, src + (size_t)s * (size_t)dh, hd);
            memcpy(xr + (size_t)A + (size_t)(G + g) * (size_t)dh,
                   src + (size_t)(s + 1) * (size_t)dh, hd);
        }
    }
    free(row);
    return HS_OK;
}

void hs_sinusoids(float *pe, int rows, int d)
{
    for (int p = 0; p < rows; p++)
        for (int k = 0; k < d; k++) {
            double angle = p / pow(10000.0, (double)(k - k % 2) / d);
            pe[(size_t)p * (size_t)d + (size_t)k] = (float)(k % 2 ? cos(angle) : sin(angle));
        }
}

/* Carves n floats from the arena cursor (a NULL cursor, in the dry pass, stays NULL). */
static float *carve(float **cur, size_t n)
{
    float *p = *cur;
    if (p)
        *cur += n;
    return p;
}

static int little_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* 1 when e is a norm weight a Hugging Face folder stores without the family's offset
 * (Gemma's RMSNorm multiplies by 1 + w; GGUF files hold 1 + w). */
static int norm_offset_applies(const hs_model *m, const hs_tensor_name *e)
{
    return m->cfg.arch->norm_offset != 0 && m->format == HS_FORMAT_HF &&
           hs_slot_is_norm_weight(e->slot);
}

/* After a row is converted: the norm offset added (as the reference does, in float32), and
 * the embedding scale (hs_arch.emb_scale) rounded to the token embeddings' stored type, as
 * transformers multiplies them in that type (a GGUF file's stays float32, as llama.cpp's). */
static void scale_row(hs_model *m, const hs_tensor_name *e, const hs_tensor_view *t, float *dst,
                      size_t count, int offset)
{
    if (offset)
        for (size_t i = 0; i < count; i++)
            dst[i] = m->arch.norm_offset + dst[i];
    if (e->slot == HS_S_TOK_EMB && m->arch.emb_scale > 0 && t && m->format == HS_FORMAT_HF) {
        if (t->dtype == HS_DT_BF16)
            m->arch.emb_scale = hs_bf16_to_f32(hs_f32_to_bf16(m->arch.emb_scale));
        else if (t->dtype == HS_DT_F16)
            m->arch.emb_scale = hs_f16_to_f32(hs_f32_to_f16(m->arch.emb_scale));
    }
}

/* One row of the name table: a whole slot points at the tensor's bytes in the file when
 * the reader allows it and the tensor is F32, stored in the normalised layout and aligned,
 * else at floats carved from the arena; a Q, K or V part goes into its block of the fused
 * slot, carved when the first part comes. An optional decoder that is absent is the token
 * embeddings (a family with tied_embeddings = 0 fails naming it); the rows of an LM head
 * that is absent are skipped; an absent position table is computed where the descriptor
 * says it is sinusoidal (pos_sinusoidal), else missing. */
static hs_status build_row(void *ctx, const hs_tensor_name *e, int layer, hs_error *err)
{
    builder *b = ctx;
    hs_model *m = b->m;
    const hs_model_config *c = &m->cfg;
    if ((e->flags & HS_TN_HEAD) && !b->has_head)
        return HS_OK;
    char name[160];
    int out_in = 0;
    const hs_tensor_view *t = find(b, e, layer, &out_in, name, sizeof name);
    const float **slot = hs_slot_ptr(m, e->slot, layer);
    hs_tensor_shape sh = hs_names_shape(c, e);
    size_t count = (size_t)sh.rows * (size_t)sh.cols;
    if (!t && e->slot == HS_S_POS_EMB && c->arch->pos_sinusoidal) { /* not stored: computed */
        float *dst = carve(&b->cur, count);
        *slot = dst;
        if (b->dry)
            b->arena_need += count;
        else
            hs_sinusoids(dst, sh.rows, sh.cols);
        return HS_OK;
    }
    if (!t && (e->flags & HS_TN_OPTIONAL)) {
        if (e->slot != HS_S_DECODER)
            return HS_OK;
        if (c->arch->tied_embeddings) {
            *slot = m->wte;
            hs_emb_stored_tie(m);
            return HS_OK;
        } /* an untied family's decoder is required: place() names it missing */
    }
    if (hs_emb_stored_wants(m, e, t)) { /* kept in its stored type (emb_stored.h) */
        hs_status st = place(b, t, out_in, name, sh, NULL, err); /* checks only */
        b->stored_floats += b->dry ? count : 0;
        if (!st && !b->dry)
            scale_row(m, e, t, NULL, 0, 0);
        return st || b->dry ? st : hs_emb_stored_add(m, e->slot, t, t->name, err);
    }
    int kind = layer >= 0 ? hs_wunit_kind(e->slot) : -1;
    if (kind >= 0 && (b->cached[(size_t)layer * HS_WU_N + (size_t)kind] & CACHED)) { /* stored */
        hs_status st = place(b, t, out_in, name, sh, NULL, err); /* checks only */
        if (b->dry)
            b->cached_floats += count;
        if (st || b->dry)
            return st;
        return hs_wcache_add(m->wc, layer, kind, t, out_in, sh,
                             (e->flags & HS_TN_QKV_HEADS) != 0, name, err);
    }
    if (e->part >= 0) {
        if (e->part == 0)
            *slot = carve(&b->cur, sh.slot_floats);
        if (b->dry)
            b->arena_need += count;
        return place(b, t, out_in, name, sh, (float *)(uintptr_t)*slot, err);
    }
    /* The layers and the head of a family whose matrices are stored (out, in) are copied
     * whole, so each lies in one block of the arena beside its transposed matrices. */
    int grouped = (layer >= 0 || (e->flags & HS_TN_HEAD)) && c->arch->names->hf_out_in;
    int offset = norm_offset_applies(m, e); /* the norm's weight + offset, in the arena */
    int inplace = t && m->inplace_ok && !grouped && !offset && !(e->flags & HS_TN_QKV_HEADS) &&
                  t->dtype == HS_DT_F32 && little_endian() &&
                  !(sh.kind == HS_K_MAT && out_in) && ((uintptr_t)t->data % sizeof(float)) == 0;
    if (!inplace) {
        float *dst = carve(&b->cur, count);
        *slot = dst;
        if (b->dry)
            b->arena_need += count;
        hs_status st = place(b, t, out_in, name, sh, dst, err);
        if (!st && !b->dry)
            scale_row(m, e, t, dst, count, offset);
        if (st || b->dry || !(e->flags & HS_TN_QKV_HEADS))
            return st;
        return hs_qkv_heads_reorder(c, dst, sh.kind == HS_K_VEC ? 1 : sh.rows, sh.ld, err);
    }
    hs_status st = place(b, t, out_in, name, sh, NULL, err); /* checks only */
    if (b->dry)
        b->inplace_count += count;
    if (st || b->dry)
        return st;
    const float *src = (const float *)(const void *)t->data;
    size_t i = hs_op_first_nonfinite(src, count);
    if (i != (size_t)-1)
        return hs_fail(err, HS_E_VALUE, "tensor '%s' holds a non-finite value (%s) at element %zu",
                       t->name, isnan(src[i]) ? "NaN" : "Inf", i);
    *slot = src;
    return HS_OK;
}

/* Marks the layer matrices whose stored tensors are not all F32: they go to the weight
 * cache (a QKV whose Q is F16 and K Q8_0 is one cached matrix). */
static hs_status classify_row(void *ctx, const hs_tensor_name *e, int layer, hs_error *err)
{
    builder *b = ctx;
    (void)err;
    int kind = layer >= 0 ? hs_wunit_kind(e->slot) : -1;
    if (kind < 0 || ((e->flags & HS_TN_HEAD) && !b->has_head))
        return HS_OK;
    char name[160];
    int out_in = 0;
    const hs_tensor_view *t = find(b, e, layer, &out_in, name, sizeof name);
    unsigned char *cached = &b->cached[(size_t)layer * HS_WU_N + (size_t)kind];
    if (t && t->dtype != HS_DT_F32 && t->dtype != HS_DT_OTHER)
        *cached |= CACHED;
    if (t && !hs_rows_are_columns(hs_names_shape(&b->m->cfg, e), out_in))
        *cached |= UNSTORABLE; /* not usable in its stored type (wcache.c, storable) */
    return HS_OK;
}

/* 1 when the family's optional LM head is in the file (its first row present). */
static int head_present(builder *b)
{
    const hs_arch *a = b->m->cfg.arch;
    const struct hs_names *t = a->names;
    for (size_t i = 0; i < t->n; i++)
        if (t->t[i].flags & HS_TN_HEAD) {
            char name[160];
            int out_in;
            return find(b, &t->t[i], -1, &out_in, name, sizeof name) != NULL;
        }
    return 0;
}

hs_status hs_weights_build(hs_model *m, hs_tensor_lookup lookup, void *ctx, hs_error *err)
{
    hs_model_config *c = &m->cfg;
    builder b = {.m = m, .lookup = lookup, .ctx = ctx};
    if (!c->arch && (c->arch = hs_arch_of(c->family)) == NULL)
        return hs_fail(err, HS_E_UNSUPPORTED, "model family %d is not supported (expected %s)",
                       (int)c->family, hs_arch_list());
    b.has_head = head_present(&b);
    int has_lm_head = !c->arch->head_optional || b.has_head;

    /* Dry pass: every tensor present with the right shape, dtype and size before the arena
     * is allocated (layers gets a scratch table the dry pass fills with NULLs). */
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    b.cached = calloc((size_t)c->n_layer * HS_WU_N, 1);
    hs_status st = HS_OK;
    if (!m->layers || !b.cached) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
        goto done;
    }
    if ((st = hs_names_walk(c, classify_row, &b, err)))
        goto done;
    int storable_units = 0;
    for (size_t i = 0; i < (size_t)c->n_layer * HS_WU_N; i++) {
        storable_units += b.cached[i] == CACHED;
        m->unstorable_units += b.cached[i] == (CACHED | UNSTORABLE);
    }
    /* The default (hs_open_opts.weight_memory 0, no HEADSCOPE_WEIGHT_MEMORY): as `stored`
     * (the layers, embeddings and LM head multiplied in their stored type; none converted
     * but one layer at a time for the readers that need float32) when a layer matrix can be
     * used in its stored type; else (GPT-2's Conv1D matrices stored (in, out) as F16) the
     * default budget converts what fits, once, at load, and the tables are converted too. */
    if (m->weight_auto && storable_units)
        m->weight_memory = 1;
    else if (m->weight_auto)
        m->stored_gemm = 0;
    b.dry = 1;
    if ((st = hs_names_walk(c, build_row, &b, err)))
        goto done;
    size_t total = b.arena_need + b.inplace_count + b.cached_floats + b.stored_floats;
    if (total > ((size_t)1 << 34)) {
        st = hs_fail(err, HS_E_VALUE, "config: the model would need more than 64 GiB of weights");
        goto done;
    }
    m->n_params = total;
    m->converted_bytes = b.cached_floats * sizeof(float);
    if (m->open_flags & HS_OPEN_NO_WEIGHTS) { /* the table is checked; read nothing */
        c->has_lm_head = has_lm_head;
        st = hs_moe_weights_build(m, lookup, ctx, err);
        goto done;
    }
    b.dry = 0;
    b.largest = 0;
    m->arena = hs_alloc_large(b.arena_need * sizeof(float));
    if (!m->arena || (b.cached_floats && !(m->wc = hs_wcache_new(m, m->weight_memory)))) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory allocating %zu MB of weights",
                     b.arena_need * sizeof(float) >> 20);
        goto done;
    }
    m->arena_floats = b.arena_need;
    m->inplace_floats = b.inplace_count;
    b.cur = m->arena;
    if ((st = hs_names_walk(c, build_row, &b, err)))
        goto done;
    if (m->wc && (st = hs_wcache_prepare(m, err)))
        goto done;
    if ((st = hs_moe_weights_build(m, lookup, ctx, err)))
        goto done;
    c->has_lm_head = has_lm_head;
    m->has_weights = 1;
done:
    free(b.cached);
    return st;
}
