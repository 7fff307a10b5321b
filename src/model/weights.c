/* Weight builder: resolves every logical tensor through a format reader, checks its
 * shape against the config, converts it to float32 into one arena in the normalised
 * (in, out) layout, and rejects NaN/Inf. */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/model_internal.h"

const char *hs_dtype_name(hs_dtype dt)
{
    switch (dt) {
    case HS_DT_F32: return "F32";
    case HS_DT_F16: return "F16";
    case HS_DT_BF16: return "BF16";
    case HS_DT_Q8_0: return "Q8_0";
    case HS_DT_OTHER: break;
    }
    return "?";
}

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
    if (c->family == HS_FAMILY_BERT) {
        CHECK_RANGE(type_vocab_size, "type_vocab_size", 1, 1024)
    }
#undef CHECK_RANGE
    if (c->d_model % c->n_head != 0)
        return hs_fail(err, HS_E_VALUE, "config: d_model %d is not divisible by n_head %d",
                       c->d_model, c->n_head);
    if (!(c->ln_eps > 0.0f) || !isfinite(c->ln_eps))
        return hs_fail(err, HS_E_VALUE, "config: layer norm epsilon must be positive");
    c->d_head = c->d_model / c->n_head;
    c->causal = c->family == HS_FAMILY_GPT2;
    return HS_OK;
}

/* ---- conversion ---------------------------------------------------------------- */

static size_t dtype_bytes(hs_dtype dt, size_t count)
{
    switch (dt) {
    case HS_DT_F32: return count * 4;
    case HS_DT_F16:
    case HS_DT_BF16: return count * 2;
    case HS_DT_Q8_0: return count / 32 * 34;
    case HS_DT_OTHER: break;
    }
    return 0;
}

/* Decodes count elements of t (flat, stored order) into out. */
static void decode(const hs_tensor_view *t, float *out, size_t count)
{
    const unsigned char *p = t->data;
    switch (t->dtype) {
    case HS_DT_F32:
        for (size_t i = 0; i < count; i++) {
            uint32_t b = hs_le32(p + 4 * i);
            memcpy(&out[i], &b, 4);
        }
        break;
    case HS_DT_F16:
        for (size_t i = 0; i < count; i++)
            out[i] = hs_f16_to_f32(hs_le16(p + 2 * i));
        break;
    case HS_DT_BF16:
        for (size_t i = 0; i < count; i++)
            out[i] = hs_bf16_to_f32(hs_le16(p + 2 * i));
        break;
    case HS_DT_Q8_0:
        for (size_t blk = 0; blk < count / 32; blk++) {
            const unsigned char *b = p + blk * 34;
            float d = hs_f16_to_f32(hs_le16(b));
            for (int j = 0; j < 32; j++)
                out[blk * 32 + (size_t)j] = d * (float)(int8_t)b[2 + j];
        }
        break;
    case HS_DT_OTHER: break; /* refused by place() before decoding */
    }
}

/* Drops the whole pages of a tensor's bytes from a private read-only file mapping once
 * they are converted, so a load's peak is about one copy of the weights, not two (pages
 * read again later are simply faulted in from the file again). */
static void release_pages(const hs_tensor_view *t)
{
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0)
        return;
    uintptr_t lo = (uintptr_t)t->data, hi = lo + t->nbytes;
    uintptr_t a = (lo + (uintptr_t)pg - 1) / (uintptr_t)pg * (uintptr_t)pg;
    uintptr_t e = hi / (uintptr_t)pg * (uintptr_t)pg;
    if (e > a)
        madvise((void *)a, e - a, MADV_DONTNEED);
}

/* ---- the tensor plan -------------------------------------------------------------- */

enum kind {
    K_VEC,  /* (cols) */
    K_ROWS, /* (rows, cols), stored as is: embeddings and decoders */
    K_MAT   /* logical (in = rows, out = cols); stored (in, out) or (out, in) */
};

typedef struct builder {
    hs_model *m;
    hs_tensor_lookup lookup;
    void *ctx;
    float *tmp; /* scratch for transposed matrices */
    size_t tmp_len;
    size_t largest; /* element count of the largest matrix seen, for storage_dtype */
    int dry;        /* check names, shapes, dtypes and sizes only; write nothing */
    size_t arena_need;    /* dry pass: floats the arena must hold */
    size_t inplace_count; /* dry pass: floats used in place */
} builder;

/* Loads one tensor into dst (row stride ld, column offset off). */
static hs_status place(builder *b, const char *name, enum kind kind, int rows, int cols,
                       float *dst, int ld, int off, hs_error *err)
{
    int out_in = 0;
    const hs_tensor_view *t = b->lookup(b->ctx, name, &out_in);
    if (!t)
        return hs_fail(err, HS_E_FORMAT, "missing tensor '%s'", name);
    if (t->dtype == HS_DT_OTHER)
        return hs_fail(err, HS_E_DTYPE, "tensor '%s' has dtype '%s'; weights must be F32, F16 "
                       "or BF16", t->name, t->dtype_name ? t->dtype_name : "?");
    int64_t want[2] = {0, 0};
    int want_nd = kind == K_VEC ? 1 : 2;
    if (kind == K_VEC) {
        want[0] = cols;
    } else if (kind == K_MAT && out_in) {
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
    if (t->dtype == HS_DT_Q8_0 && (t->shape[t->ndim - 1] % 32) != 0)
        return hs_fail(err, HS_E_FORMAT, "tensor '%s': Q8_0 rows must be a multiple of 32",
                       t->name);
    if (t->nbytes < dtype_bytes(t->dtype, count))
        return hs_fail(err, HS_E_FORMAT, "tensor '%s': %zu bytes, expected %zu", t->name,
                       t->nbytes, dtype_bytes(t->dtype, count));
    if (kind == K_MAT && count > b->largest) {
        b->largest = count;
        snprintf(b->m->storage_dtype, sizeof b->m->storage_dtype, "%s", hs_dtype_name(t->dtype));
    }
    if (b->dry || !dst) { /* dry pass, or a check of a tensor used in place */
        b->arena_need += b->dry ? count : 0;
        return HS_OK;
    }
    int transpose = kind == K_MAT && out_in;
    int direct = !transpose && (kind == K_VEC || (ld == cols && off == 0));
    float *src = direct ? dst + off : b->tmp;
    if (!direct && count > b->tmp_len) {
        float *nt = realloc(b->tmp, count * sizeof *nt);
        if (!nt)
            return hs_fail(err, HS_E_NOMEM, "out of memory converting '%s'", t->name);
        b->tmp = nt;
        b->tmp_len = count;
        src = nt;
    }
    decode(t, src, count);
    if (b->m->release_src)
        release_pages(t);
    for (size_t i = 0; i < count; i++)
        if (!isfinite(src[i]))
            return hs_fail(err, HS_E_VALUE, "tensor '%s' holds a non-finite value (%s) at element %zu",
                           t->name, isnan(src[i]) ? "NaN" : "Inf", i);
    if (direct)
        return HS_OK;
    if (kind == K_VEC) {
        memcpy(dst + off, src, count * sizeof *src);
    } else if (transpose) { /* stored (out = cols, in = rows) */
        for (int o = 0; o < cols; o++)
            for (int i = 0; i < rows; i++)
                dst[(size_t)i * (size_t)ld + (size_t)off + (size_t)o] = src[(size_t)o * (size_t)rows + (size_t)i];
    } else {
        for (int i = 0; i < rows; i++)
            memcpy(dst + (size_t)i * (size_t)ld + off, src + (size_t)i * (size_t)cols,
                   (size_t)cols * sizeof *src);
    }
    return HS_OK;
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

/* Places a tensor that has a buffer of its own (row stride = cols, no column offset) and
 * points *slot at it: at the tensor's bytes in the file when the reader allows it and the
 * tensor is F32, stored in the normalised layout and aligned; otherwise in floats carved
 * from *cur (NULL in the dry pass). */
static hs_status place_own(builder *b, const char *name, enum kind kind, int rows, int cols,
                           const float **slot, float **cur, hs_error *err)
{
    int out_in = 0;
    const hs_tensor_view *t = b->lookup(b->ctx, name, &out_in);
    size_t count = (size_t)rows * (size_t)cols;
    int inplace = t && b->m->inplace_ok && t->dtype == HS_DT_F32 && little_endian() &&
                  !(kind == K_MAT && out_in) && ((uintptr_t)t->data % sizeof(float)) == 0;
    if (!inplace) {
        float *dst = carve(cur, count);
        *slot = dst;
        return place(b, name, kind, rows, cols, dst, cols, 0, err);
    }
    hs_status st = place(b, name, kind, rows, cols, NULL, cols, 0, err); /* checks only */
    if (b->dry) {
        b->arena_need -= count; /* place() counted it */
        b->inplace_count += count;
    }
    if (st || b->dry)
        return st;
    const float *src = (const float *)(const void *)t->data;
    for (size_t i = 0; i < count; i++)
        if (!isfinite(src[i]))
            return hs_fail(err, HS_E_VALUE, "tensor '%s' holds a non-finite value (%s) at element %zu",
                           t->name, isnan(src[i]) ? "NaN" : "Inf", i);
    *slot = src;
    return HS_OK;
}

static int present(builder *b, const char *name)
{
    int out_in;
    return b->lookup(b->ctx, name, &out_in) != NULL;
}

/* One block's buffers, carved in a fixed order; L gets the same pointers. */
typedef struct layer_bufs {
    float *ln1_w, *ln1_b, *w_qkv, *b_qkv, *w_o, *b_o, *ln2_w, *ln2_b, *w_fc, *b_fc, *w_proj, *b_proj;
} layer_bufs;

static layer_bufs carve_layer(float **cur, hs_layer *L, size_t d, size_t f)
{
    layer_bufs B;
    B.ln1_w = carve(cur, d);
    B.ln1_b = carve(cur, d);
    B.w_qkv = carve(cur, d * 3 * d);
    B.b_qkv = carve(cur, 3 * d);
    B.w_o = carve(cur, d * d);
    B.b_o = carve(cur, d);
    B.ln2_w = carve(cur, d);
    B.ln2_b = carve(cur, d);
    B.w_fc = carve(cur, d * f);
    B.b_fc = carve(cur, f);
    B.w_proj = carve(cur, f * d);
    B.b_proj = carve(cur, d);
    *L = (hs_layer){B.ln1_w, B.ln1_b, B.w_qkv, B.b_qkv, B.w_o, B.b_o,
                    B.ln2_w, B.ln2_b, B.w_fc, B.b_fc, B.w_proj, B.b_proj};
    return B;
}

static size_t layer_floats(const hs_model_config *c)
{
    size_t d = (size_t)c->d_model, f = (size_t)c->d_ff;
    return 2 * d + d * 3 * d + 3 * d + d * d + d + 2 * d + d * f + f + f * d + d;
}

#define NAME(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)

static hs_status build_gpt2(builder *b, int has_lm_head, float *cur, hs_error *err)
{
    hs_model *m = b->m;
    const hs_model_config *c = &m->cfg;
    int d = c->d_model, f = c->d_ff, V = c->vocab_size;
    char nm[128];
    hs_status st;
    if ((st = place_own(b, "wte.weight", K_ROWS, V, d, &m->wte, &cur, err)) ||
        (st = place_own(b, "wpe.weight", K_ROWS, c->n_ctx, d, &m->wpe, &cur, err)))
        return st;
    for (int l = 0; l < c->n_layer; l++) {
        hs_layer *L = &m->layers[l];
        if ((st = place_own(b, NAME("h.%d.ln_1.weight", l), K_VEC, 1, d, &L->ln1_w, &cur, err)) ||
            (st = place_own(b, NAME("h.%d.ln_1.bias", l), K_VEC, 1, d, &L->ln1_b, &cur, err)) ||
            (st = place_own(b, NAME("h.%d.attn.c_attn.weight", l), K_MAT, d, 3 * d, &L->w_qkv, &cur, err)) ||
            (st = place_own(b, NAME("h.%d.attn.c_attn.bias", l), K_VEC, 1, 3 * d, &L->b_qkv, &cur, err)) ||
            (st = place_own(b, NAME("h.%d.attn.c_proj.weight", l), K_MAT, d, d, &L->w_o, &cur, err)) ||
            (st = place_own(b, NAME("h.%d.attn.c_proj.bias", l), K_VEC, 1, d, &L->b_o, &cur, err)) ||
            (st = place_own(b, NAME("h.%d.ln_2.weight", l), K_VEC, 1, d, &L->ln2_w, &cur, err)) ||
            (st = place_own(b, NAME("h.%d.ln_2.bias", l), K_VEC, 1, d, &L->ln2_b, &cur, err)) ||
            (st = place_own(b, NAME("h.%d.mlp.c_fc.weight", l), K_MAT, d, f, &L->w_fc, &cur, err)) ||
            (st = place_own(b, NAME("h.%d.mlp.c_fc.bias", l), K_VEC, 1, f, &L->b_fc, &cur, err)) ||
            (st = place_own(b, NAME("h.%d.mlp.c_proj.weight", l), K_MAT, f, d, &L->w_proj, &cur, err)) ||
            (st = place_own(b, NAME("h.%d.mlp.c_proj.bias", l), K_VEC, 1, d, &L->b_proj, &cur, err)))
            return st;
    }
    if ((st = place_own(b, "ln_f.weight", K_VEC, 1, d, &m->lnf_w, &cur, err)) ||
        (st = place_own(b, "ln_f.bias", K_VEC, 1, d, &m->lnf_b, &cur, err)))
        return st;
    m->decoder = m->wte;
    if (has_lm_head && (st = place_own(b, "lm_head.weight", K_ROWS, V, d, &m->decoder, &cur, err)))
        return st;
    return HS_OK;
}

static hs_status build_bert(builder *b, int has_mlm, int has_decoder, float *cur, hs_error *err)
{
    hs_model *m = b->m;
    const hs_model_config *c = &m->cfg;
    int d = c->d_model, f = c->d_ff, V = c->vocab_size;
    char nm[160];
    hs_status st;
    if ((st = place_own(b, "embeddings.word_embeddings.weight", K_ROWS, V, d, &m->wte, &cur, err)) ||
        (st = place_own(b, "embeddings.position_embeddings.weight", K_ROWS, c->n_ctx, d, &m->wpe, &cur, err)) ||
        (st = place_own(b, "embeddings.token_type_embeddings.weight", K_ROWS, c->type_vocab_size, d,
                        &m->wtt, &cur, err)) ||
        (st = place_own(b, "embeddings.LayerNorm.weight", K_VEC, 1, d, &m->emb_ln_w, &cur, err)) ||
        (st = place_own(b, "embeddings.LayerNorm.bias", K_VEC, 1, d, &m->emb_ln_b, &cur, err)))
        return st;
    static const char *const qkv[3] = {"query", "key", "value"};
    for (int l = 0; l < c->n_layer; l++) {
        layer_bufs B = carve_layer(&cur, &m->layers[l], (size_t)d, (size_t)f);
        for (int k = 0; k < 3; k++) {
            if ((st = place(b, NAME("encoder.layer.%d.attention.self.%s.weight", l, qkv[k]), K_MAT,
                            d, d, B.w_qkv, 3 * d, k * d, err)) ||
                (st = place(b, NAME("encoder.layer.%d.attention.self.%s.bias", l, qkv[k]), K_VEC,
                            1, d, B.b_qkv, 3 * d, k * d, err)))
                return st;
        }
        if ((st = place(b, NAME("encoder.layer.%d.attention.output.dense.weight", l), K_MAT, d, d, B.w_o, d, 0, err)) ||
            (st = place(b, NAME("encoder.layer.%d.attention.output.dense.bias", l), K_VEC, 1, d, B.b_o, d, 0, err)) ||
            (st = place(b, NAME("encoder.layer.%d.attention.output.LayerNorm.weight", l), K_VEC, 1, d, B.ln1_w, d, 0, err)) ||
            (st = place(b, NAME("encoder.layer.%d.attention.output.LayerNorm.bias", l), K_VEC, 1, d, B.ln1_b, d, 0, err)) ||
            (st = place(b, NAME("encoder.layer.%d.intermediate.dense.weight", l), K_MAT, d, f, B.w_fc, f, 0, err)) ||
            (st = place(b, NAME("encoder.layer.%d.intermediate.dense.bias", l), K_VEC, 1, f, B.b_fc, f, 0, err)) ||
            (st = place(b, NAME("encoder.layer.%d.output.dense.weight", l), K_MAT, f, d, B.w_proj, d, 0, err)) ||
            (st = place(b, NAME("encoder.layer.%d.output.dense.bias", l), K_VEC, 1, d, B.b_proj, d, 0, err)) ||
            (st = place(b, NAME("encoder.layer.%d.output.LayerNorm.weight", l), K_VEC, 1, d, B.ln2_w, d, 0, err)) ||
            (st = place(b, NAME("encoder.layer.%d.output.LayerNorm.bias", l), K_VEC, 1, d, B.ln2_b, d, 0, err)))
            return st;
    }
    if (!has_mlm)
        return HS_OK;
    float *mw = carve(&cur, (size_t)d * d), *mb = carve(&cur, d);
    float *mlw = carve(&cur, d), *mlb = carve(&cur, d), *mbias = carve(&cur, V);
    m->mlm_w = mw;
    m->mlm_b = mb;
    m->mlm_ln_w = mlw;
    m->mlm_ln_b = mlb;
    m->mlm_bias = mbias;
    const char *bias_name = present(b, "cls.predictions.bias") ? "cls.predictions.bias"
                                                               : "cls.predictions.decoder.bias";
    if ((st = place(b, "cls.predictions.transform.dense.weight", K_MAT, d, d, mw, d, 0, err)) ||
        (st = place(b, "cls.predictions.transform.dense.bias", K_VEC, 1, d, mb, d, 0, err)) ||
        (st = place(b, "cls.predictions.transform.LayerNorm.weight", K_VEC, 1, d, mlw, d, 0, err)) ||
        (st = place(b, "cls.predictions.transform.LayerNorm.bias", K_VEC, 1, d, mlb, d, 0, err)) ||
        (st = place(b, bias_name, K_VEC, 1, V, mbias, V, 0, err)))
        return st;
    m->decoder = m->wte;
    if (has_decoder) {
        if ((st = place_own(b, "cls.predictions.decoder.weight", K_ROWS, V, d, &m->decoder, &cur, err)))
            return st;
    }
    return HS_OK;
}

/* The weights arena: 2 MB aligned and marked for transparent huge pages, which the GEMMs
 * that stream through every weight matrix run measurably faster on. free() releases it. */
static float *arena_alloc(size_t floats)
{
    size_t bytes = (floats ? floats : 1) * sizeof(float), huge = (size_t)2 << 20;
    if (bytes < huge)
        return malloc(bytes);
    void *p = NULL;
    if (posix_memalign(&p, huge, (bytes + huge - 1) / huge * huge) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, (bytes + huge - 1) / huge * huge, MADV_HUGEPAGE);
#endif
    return p;
}

hs_status hs_weights_build(hs_model *m, hs_tensor_lookup lookup, void *ctx, hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    builder b = {.m = m, .lookup = lookup, .ctx = ctx};
    size_t d = (size_t)c->d_model, V = (size_t)c->vocab_size, total = 0, t;
    int has_head = 0, has_decoder = 0;

    if (c->family == HS_FAMILY_GPT2) {
        has_head = present(&b, "lm_head.weight");
        /* embeddings + layers + ln_f (+ untied decoder) */
        total = V * d + (size_t)c->n_ctx * d + 2 * d + (has_head ? V * d : 0);
    } else {
        has_head = present(&b, "cls.predictions.transform.dense.weight");
        has_decoder = has_head && present(&b, "cls.predictions.decoder.weight");
        total = V * d + (size_t)c->n_ctx * d + (size_t)c->type_vocab_size * d + 2 * d;
        if (has_head)
            total += d * d + 3 * d + V + (has_decoder ? V * d : 0);
    }
    if (hs_mul_size(layer_floats(c), (size_t)c->n_layer, &t) || hs_add_size(total, t, &total) ||
        total > ((size_t)1 << 34))
        return hs_fail(err, HS_E_VALUE, "config: the model would need more than 64 GiB of weights");

    /* Dry pass: every tensor present with the right shape, dtype and size before the arena
     * is allocated (layers gets a scratch table the dry pass fills with NULLs). */
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->layers)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    b.dry = 1;
    hs_status st = c->family == HS_FAMILY_GPT2 ? build_gpt2(&b, has_head, NULL, err)
                                               : build_bert(&b, has_head, has_decoder, NULL, err);
    if (st)
        return st;
    m->n_params = total;
    if (b.arena_need + b.inplace_count != total)
        return hs_fail(err, HS_E_ARG, "weights: internal size mismatch (%zu + %zu != %zu)",
                       b.arena_need, b.inplace_count, total);
    if (m->open_flags & HS_OPEN_NO_WEIGHTS) { /* the table is checked; read nothing */
        free(b.tmp);
        m->cfg.has_lm_head = c->family == HS_FAMILY_GPT2 ? 1 : has_head;
        return HS_OK;
    }
    b.dry = 0;
    b.largest = 0;
    m->arena = arena_alloc(b.arena_need);
    if (!m->arena)
        return hs_fail(err, HS_E_NOMEM, "out of memory allocating %zu MB of weights",
                       b.arena_need * sizeof(float) >> 20);
    m->arena_floats = b.arena_need;
    m->inplace_floats = b.inplace_count;
    st = c->family == HS_FAMILY_GPT2 ? build_gpt2(&b, has_head, m->arena, err)
                                     : build_bert(&b, has_head, has_decoder, m->arena, err);
    free(b.tmp);
    if (st == HS_OK) {
        m->cfg.has_lm_head = c->family == HS_FAMILY_GPT2 ? 1 : has_head;
        m->has_weights = 1;
    }
    return st;
}
