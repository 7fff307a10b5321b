/* The token embeddings and the LM head kept in their stored type (emb_stored.h): a view
 * into the file mapping per table, its rows decoded where a reader asks for rows, the
 * logits a product with the stored rows, a float32 copy made only for a reader that asks
 * for the whole matrix at once (the GGUF writer).
 *
 * The decoder (V, d) is stored as V rows of d, and the float32 path's logits are
 * c += alpha h dec^T, an NT product (hs_op_gemm(1, ...)): a tile of its output is a range of
 * the decoder's rows, decoded into a buffer and handed to the same OpenBLAS call. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "core/qgemm.h"
#include "model/emb_stored.h"
#include "nn/ops.h"

typedef struct stable {
    hs_tensor_view t;  /* data in map or own; name, dtype_name not kept */
    void *map;          /* the retained file mapping holding t.data, or NULL */
    unsigned char *own; /* else a copy of the bytes */
    char name[96];
    float *f32;         /* the whole table converted, on demand (hs_model_*_f32) */
    hs_qcol *cols;      /* the table as the LM head's matrix (in d, out V), on demand */
    hs_qmat qm;
} stable;

struct hs_emb_stored {
    pthread_mutex_t lock;
    stable emb, dec;
    int has_emb, has_dec;
    int tied; /* the decoder is emb */
};

int hs_emb_stored_wants(const hs_model *m, const hs_tensor_name *e, const hs_tensor_view *t)
{
    return m->stored_gemm && t && (e->slot == HS_S_TOK_EMB || e->slot == HS_S_DECODER) &&
           t->dtype != HS_DT_F32 && t->dtype != HS_DT_OTHER;
}

hs_status hs_tensor_check_rows(const hs_tensor_view *t, size_t rows, size_t in, int mapped,
                               const char *name, hs_error *err)
{
    size_t bad = (size_t)-1;
    int nomem = 0;
#pragma omp parallel reduction(min : bad) if (rows * in >= 65536)
    {
        float *buf = malloc(in * sizeof *buf);
        if (!buf) {
#pragma omp atomic write
            nomem = 1;
        }
#pragma omp for schedule(static)
        for (size_t r = 0; r < rows; r++) {
            if (!buf || hs_tensor_surely_finite(t, r * in, in))
                continue;
            hs_tensor_decode(t, r * in, buf, in);
            size_t f = hs_op_first_nonfinite(buf, in);
            if (f != (size_t)-1 && r * in + f < bad)
                bad = r * in + f;
        }
        free(buf);
    }
    if (mapped)
        hs_release_pages(t->data, t->nbytes);
    if (nomem)
        return hs_fail(err, HS_E_NOMEM, "out of memory checking '%s'", name);
    if (bad != (size_t)-1) {
        int blk = hs_dtype_block(t->dtype);
        size_t from = bad / (size_t)blk * (size_t)blk;
        float v[256];
        hs_tensor_decode(t, from, v, (size_t)blk);
        return hs_fail(err, HS_E_VALUE, "tensor '%s' holds a non-finite value (%s) at element %zu",
                       name, v[bad - from] != v[bad - from] ? "NaN" : "Inf", bad);
    }
    return HS_OK;
}

static void table_free(stable *s)
{
    if (s->map)
        hs_file_unmap(s->map, 0);
    free(s->own);
    free(s->f32);
    free(s->cols);
    memset(s, 0, sizeof *s);
}

void hs_emb_stored_free(hs_emb_stored *s)
{
    if (!s)
        return;
    table_free(&s->emb);
    table_free(&s->dec);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

hs_status hs_emb_stored_add(hs_model *m, hs_slot slot, const hs_tensor_view *t,
                            const char *name, hs_error *err)
{
    int V = m->cfg.vocab_size, d = m->cfg.d_model;
    if (!m->es) {
        if (!(m->es = calloc(1, sizeof *m->es)))
            return hs_fail(err, HS_E_NOMEM, "out of memory");
        if (pthread_mutex_init(&m->es->lock, NULL) != 0) {
            free(m->es);
            m->es = NULL;
            return hs_fail(err, HS_E_NOMEM, "out of memory");
        }
    }
    stable *s = slot == HS_S_TOK_EMB ? &m->es->emb : &m->es->dec;
    table_free(s);
    s->t = *t;
    s->t.name = NULL;
    s->t.dtype_name = NULL;
    snprintf(s->name, sizeof s->name, "%s", name);
    s->map = hs_file_map_retain(t->data, t->nbytes);
    if (!s->map) { /* a reader's own buffer */
        if (!(s->own = malloc(t->nbytes ? t->nbytes : 1)))
            return hs_fail(err, HS_E_NOMEM, "out of memory keeping '%s'", name);
        memcpy(s->own, t->data, t->nbytes);
        s->t.data = s->own;
    }
    hs_status st = hs_tensor_check_rows(&s->t, (size_t)V, (size_t)d, s->map != NULL, name, err);
    if (st)
        return st;
    if (slot == HS_S_TOK_EMB)
        m->es->has_emb = 1;
    else
        m->es->has_dec = 1;
    return HS_OK;
}

void hs_emb_stored_tie(hs_model *m)
{
    if (m->es && m->es->has_emb)
        m->es->tied = 1;
}

/* The decoder's stored table, or NULL (float32 in m->decoder). */
static stable *dec_table(const hs_model *m)
{
    if (!m->es)
        return NULL;
    if (m->es->has_dec)
        return &m->es->dec;
    return m->es->tied ? &m->es->emb : NULL;
}


/* s's float32 copy once made, or NULL (a reader then takes it over the stored bytes). */
static const float *copy_of(const stable *s)
{
    return __atomic_load_n(&s->f32, __ATOMIC_ACQUIRE);
}

/* s's whole table in float32, converted once (s->f32 written under the lock); the file's
 * pages of the table are dropped then, every reader taking the copy from there on. */
static const float *whole(const hs_model *m, stable *s, hs_error *err)
{
    int V = m->cfg.vocab_size, d = m->cfg.d_model;
    pthread_mutex_lock(&m->es->lock);
    if (!s->f32) {
        float *buf = hs_alloc_large((size_t)V * (size_t)d * sizeof *buf);
        if (buf) {
            hs_tensor_shape sh = {HS_K_ROWS, V, d, d, 0, (size_t)V * (size_t)d};
            hs_error e2;
            if (hs_tensor_convert(&s->t, 0, sh, buf, s->name, &e2) == HS_OK) {
                __atomic_store_n(&s->f32, buf, __ATOMIC_RELEASE); /* finite: checked at load */
                if (s->map)
                    hs_release_pages(s->t.data, s->t.nbytes);
            } else {
                free(buf);
            }
        }
    }
    const float *p = s->f32;
    pthread_mutex_unlock(&m->es->lock);
    if (!p)
        hs_fail(err, HS_E_NOMEM, "out of memory converting '%s' (%zu MB) to float32", s->name,
                (size_t)V * (size_t)d * sizeof(float) >> 20);
    return p;
}

void hs_model_emb_row(const hs_model *m, int32_t id, float *dst)
{
    size_t d = (size_t)m->cfg.d_model;
    const float *f = m->wte ? m->wte : copy_of(&m->es->emb);
    if (f)
        memcpy(dst, f + (size_t)id * d, d * sizeof *dst);
    else
        hs_tensor_decode(&m->es->emb.t, (size_t)id * d, dst, d);
}

void hs_model_decoder_row(const hs_model *m, int32_t id, int from, int count, float *dst)
{
    size_t at = (size_t)id * (size_t)m->cfg.d_model + (size_t)from;
    const stable *s = dec_table(m);
    const float *f = s ? copy_of(s) : m->decoder;
    if (f)
        memcpy(dst, f + at, (size_t)count * sizeof *dst);
    else
        hs_tensor_decode(&s->t, at, dst, (size_t)count);
}

/* Rows r0 .. r0 + n of s decoded into buf, in parallel when they are many. */
static const float *decode_rows(const stable *s, size_t d, int r0, int n, float *buf)
{
    const int step = 16; /* rows a task */
#pragma omp parallel for schedule(static) if ((size_t)n * d >= 65536)
    for (int i = 0; i < n; i += step)
        hs_tensor_decode(&s->t, (size_t)(r0 + i) * d, buf + (size_t)i * d,
                         (size_t)(n - i < step ? n - i : step) * d);
    return buf;
}

const float *hs_model_wte_rows(const hs_model *m, int r0, int n, float *buf)
{
    size_t d = (size_t)m->cfg.d_model;
    const float *f = m->wte ? m->wte : copy_of(&m->es->emb);
    return f ? f + (size_t)r0 * d : decode_rows(&m->es->emb, d, r0, n, buf);
}

const float *hs_model_decoder_rows(const hs_model *m, int r0, int n, float *buf)
{
    size_t d = (size_t)m->cfg.d_model;
    const stable *s = dec_table(m);
    const float *f = s ? copy_of(s) : m->decoder;
    return f ? f + (size_t)r0 * d : decode_rows(s, d, r0, n, buf);
}

int hs_model_decoder_is_wte(const hs_model *m)
{
    const stable *s = dec_table(m);
    return s ? s == &m->es->emb : m->decoder && m->decoder == m->wte;
}

int hs_model_emb_copies(const hs_model *m)
{
    return m->es ? (copy_of(&m->es->emb) != NULL) + (copy_of(&m->es->dec) != NULL) : 0;
}

/* The float32 path's tiling of the logits' product (src/core/gemm.c, hs_gemm_run, on
 * hs_op_gemm(1, rows, V, d, ...)): tiles of HEAD_TM rows by HEAD_TN columns, and no K split,
 * once the vocabulary has HEAD_WIDE columns or more (HEAD_TILES column tiles: GEMM_TILES,
 * or gemm.c's tuning knob HS_GEMM_SPLIT_BELOW where a build sets it higher). */
#define HEAD_TM 128
#define HEAD_TN 512
#if defined(HS_GEMM_SPLIT_BELOW) && HS_GEMM_SPLIT_BELOW > 32
#define HEAD_TILES HS_GEMM_SPLIT_BELOW
#else
#define HEAD_TILES 32
#endif
#define HEAD_WIDE ((HEAD_TILES - 1) * HEAD_TN + 1)

/* logits (rows, V) += scale h dec^T as the float32 path's tiles compute it (V >= HEAD_WIDE):
 * for each HEAD_TN column tile, its rows of the decoder decoded once into the thread's
 * buffer, then for each HEAD_TM row tile the same cblas_sgemm (NT, the decoder's rows as b
 * transposed, ldb d) as gemm.c's piece; a tile whose buffer cannot be had is NaN, which
 * the pass refuses as non-finite, as gemm.c's. Always a parallel loop, as gemm.c's tiles:
 * OpenBLAS runs a call made inside one on the calling thread alone (how it splits a call
 * over threads changes the bits). */
static void tiles_nt(const stable *s, const float *h, int d, int V, int rows, float scale,
                     float *logits)
{
    int ntile = (V + HEAD_TN - 1) / HEAD_TN;
#pragma omp parallel
    {
        float *buf = malloc((size_t)HEAD_TN * (size_t)d * sizeof *buf);
#pragma omp for schedule(dynamic)
        for (int t = 0; t < ntile; t++) {
            int c0 = t * HEAD_TN, cols = V - c0 < HEAD_TN ? V - c0 : HEAD_TN;
            if (buf)
                hs_tensor_decode(&s->t, (size_t)c0 * (size_t)d, buf, (size_t)cols * (size_t)d);
            for (int r0 = 0; r0 < rows; r0 += HEAD_TM) {
                int r = rows - r0 < HEAD_TM ? rows - r0 : HEAD_TM;
                float *c = logits + (size_t)r0 * (size_t)V + (size_t)c0;
                if (buf)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, cols, d, scale,
                                h + (size_t)r0 * (size_t)d, d, buf, d, 1.0f, c, V);
                else
                    for (int i = 0; i < r; i++)
                        for (int j = 0; j < cols; j++)
                            c[(size_t)i * (size_t)V + (size_t)j] = NAN;
            }
        }
        free(buf);
    }
}

/* The float32 path is hs_op_gemm(1, ...) (NT): on the stored rows its tiles are made as it
 * makes them (tiles_nt), not through hs_op_linear's filler, whose products are the NN ones
 * of a layer and whose calls of one row or one column OpenBLAS sums by other kernels. Below
 * HEAD_WIDE columns the float32 tiling depends on the rows and may cut K: the decoder is
 * then converted whole, once (at most HEAD_WIDE x d floats), and multiplied as float32. */
void hs_model_decoder_gemm(const hs_model *m, const float *h, int rows, float scale,
                           float *logits)
{
    int d = m->cfg.d_model, V = m->cfg.vocab_size;
    stable *s = dec_table(m);
    const float *f32 = s ? copy_of(s) : m->decoder; /* a stored table converted by a reader */
    hs_error e;
    if (!f32 && V >= HEAD_WIDE) {
        tiles_nt(s, h, d, V, rows, scale, logits);
        return;
    }
    if (!f32 && !(f32 = whole(m, s, &e))) {
        for (size_t i = 0; i < (size_t)rows * (size_t)V; i++) /* out of memory: NaN */
            logits[i] = NAN;
        return;
    }
    hs_op_gemm(1, rows, V, d, scale, h, d, f32, d, 1.0f, logits, V);
}

const float *hs_model_wte_f32(const hs_model *m, hs_error *err)
{
    if (m->wte || !m->es || !m->es->has_emb)
        return m->wte;
    return whole(m, &m->es->emb, err);
}

const float *hs_model_decoder_f32(const hs_model *m, hs_error *err)
{
    stable *s = dec_table(m);
    return s ? whole(m, s, err) : m->decoder;
}

hs_status hs_model_slot_f32(const hs_model *m, hs_slot s, const float **out, hs_error *err)
{
    if (s == HS_S_TOK_EMB || s == HS_S_DECODER) {
        const float *p = s == HS_S_TOK_EMB ? hs_model_wte_f32(m, err) : hs_model_decoder_f32(m, err);
        int stored = s == HS_S_TOK_EMB ? m->es && m->es->has_emb : dec_table(m) != NULL;
        *out = p;
        return stored && !p ? HS_E_NOMEM : HS_OK;
    }
    *out = *hs_slot_ptr((hs_model *)(uintptr_t)m, s, -1);
    return HS_OK;
}

/* s as the LM head's stored matrix (in d, out V: column v is row v of the table), made once
 * under the lock; NULL without memory. */
static const hs_qmat *head_qmat(const hs_model *m, stable *s)
{
    int V = m->cfg.vocab_size, d = m->cfg.d_model;
    pthread_mutex_lock(&m->es->lock);
    if (!s->cols && (s->cols = malloc((size_t)V * sizeof *s->cols))) {
        int blk = hs_dtype_block(s->t.dtype);
        for (int v = 0; v < V; v++)
            s->cols[v] = (hs_qcol){&s->t, (size_t)v * (size_t)d, blk};
        s->qm = (hs_qmat){.in = d, .out = V, .col = s->cols, .decode = hs_tensor_decode};
    }
    const hs_qmat *q = s->cols ? &s->qm : NULL;
    pthread_mutex_unlock(&m->es->lock);
    return q;
}

/* dh = scale dlogits dec: the float32 path is hs_op_gemm(0, ...) (NN, the decoder (V, d) as
 * b in memory); on the stored rows every call takes the same block untransposed, decoded
 * from the rows it covers (HS_GEMM_FILL_NN), so the bits are the float32 path's and no
 * float32 copy of the table is made (2.1 GB at Llama-3-8B's head). */
hs_status hs_model_decoder_back(const hs_model *m, const float *dlogits, int rows, float scale,
                                float *dh, hs_error *err)
{
    int d = m->cfg.d_model, V = m->cfg.vocab_size;
    stable *s = dec_table(m);
    const float *dec = s ? copy_of(s) : m->decoder;
    hs_gemm g = {.m = rows, .n = d, .k = V, .alpha = scale, .beta = 0.0, .a = dlogits,
                 .lda = V, .b = dec, .ldb = d, .c = dh, .ldc = d};
    if (!dec) {
        const hs_qmat *q = head_qmat(m, s);
        if (!q)
            return hs_fail(err, HS_E_NOMEM, "out of memory for the LM head's backward");
        g.b_fill = hs_qmat_fill_t;
        g.b_fill_kn = hs_qmat_fill_t_kn;
        g.b_fill_as = HS_GEMM_FILL_NN;
        g.b_ctx = q;
    }
    hs_gemm_run(&g);
    return HS_OK;
}
