/* GGUF v3 writer: a loaded model as llama.cpp's converter would write it (keys and value
 * types: gguf_write_keys.c; tensor names, ne order, storage-type rules: gguf_write_plan.c;
 * tokenizer metadata: gguf_tokenizer_write.c), packed at 32-byte alignment: the output
 * sinks, the key/value section, the tensors' encoding and the file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf_internal.h"
#include "model/gguf_moe.h"
#include "model/gguf_write.h"
#include "model/quant.h"

#define ALIGN HS_GGUF_ALIGN

typedef hs_gguf_ptensor plan_t;
typedef hs_gguf_plan plan;

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

/* ---- encoding ------------------------------------------------------------------------- */

/* The row of the normalised tensor that GGUF row r holds (Llama's Q/K permutation). */
static size_t src_row(const plan_t *t, size_t r)
{
    if (!t->rope_dh)
        return r;
    size_t dh = t->rope_dh, half = dh / 2, k = r % dh;
    return r / dh * dh + k % 2 * half + k / 2;
}

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

/* The whole file into s. */
static hs_status emit(sink *s, const hs_model *m, const hs_gguf_write_options *opt, hs_error *err)
{
    hs_gguf_write_options def = {.ftype = HS_GGUF_FTYPE_F32};
    if (!opt)
        opt = &def;
    hs_status st = hs_gguf_writable(m, err);
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

    hs_gguf_model_keys(&mt, m, opt, arch);
    if ((st = hs_gguf_tokenizer_write(&mt, m, err)))
        goto fail;
    hs_meta_u32(&mt, "general.quantization_version", 2);
    if (mt.s.failed) {
        st = HS_E_NOMEM;
        goto fail;
    }
    if ((st = hs_gguf_plan_build(&p, m, opt, err)))
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
    hs_status st = hs_gguf_writable(m, err); /* before the file is created */
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
