/* The token embeddings and the LM head kept in their stored type (emb_stored.h): a view
 * into the file mapping per table, its rows decoded where a reader asks for rows, the
 * logits a product with the stored rows, a float32 copy made only for a reader of the
 * whole matrix.
 *
 * The decoder (V, d) is stored as V rows of d: row j is column j of the logits' product,
 * which is the layout of an hs_qmat (src/core/qgemm.h, W (in, out) with column j a stored
 * row), so the logits are hs_gemm_run with hs_qmat_fill as the filler of b, the float32
 * path's product c += alpha h dec^T run by the same tiling rule. */
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
    hs_qmat qm;         /* (in d, out V): column j is row j */
    hs_qcol *cols;
    float *f32;         /* the whole table converted, on demand (hs_model_*_f32) */
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
    free(s->cols);
    free(s->f32);
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
    if (!(s->cols = malloc((size_t)V * sizeof *s->cols)))
        return hs_fail(err, HS_E_NOMEM, "out of memory keeping '%s'", name);
    int blk = hs_dtype_block(s->t.dtype);
    for (int j = 0; j < V; j++)
        s->cols[j] = (hs_qcol){&s->t, (size_t)j * (size_t)d, blk};
    s->qm = (hs_qmat){.in = d, .out = V, .col = s->cols, .decode = hs_tensor_decode};
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

void hs_model_emb_row(const hs_model *m, int32_t id, float *dst)
{
    size_t d = (size_t)m->cfg.d_model;
    if (m->wte)
        memcpy(dst, m->wte + (size_t)id * d, d * sizeof *dst);
    else
        hs_tensor_decode(&m->es->emb.t, (size_t)id * d, dst, d);
}

void hs_model_decoder_row(const hs_model *m, int32_t id, int from, int count, float *dst)
{
    size_t at = (size_t)id * (size_t)m->cfg.d_model + (size_t)from;
    const stable *s = dec_table(m);
    if (s)
        hs_tensor_decode(&s->t, at, dst, (size_t)count);
    else
        memcpy(dst, m->decoder + at, (size_t)count * sizeof *dst);
}

/* s's whole table in float32, converted once (s->f32 under the lock). */
static const float *whole(const hs_model *m, stable *s, hs_error *err)
{
    int V = m->cfg.vocab_size, d = m->cfg.d_model;
    pthread_mutex_lock(&m->es->lock);
    if (!s->f32) {
        float *buf = hs_alloc_large((size_t)V * (size_t)d * sizeof *buf);
        if (buf) {
            hs_tensor_shape sh = {HS_K_ROWS, V, d, d, 0, (size_t)V * (size_t)d};
            hs_error e2;
            if (hs_tensor_convert(&s->t, 0, sh, buf, s->name, &e2) == HS_OK)
                s->f32 = buf; /* checked finite at load: fails only on memory */
            else
                free(buf);
        }
    }
    const float *p = s->f32;
    pthread_mutex_unlock(&m->es->lock);
    if (!p)
        hs_fail(err, HS_E_NOMEM, "out of memory converting '%s' (%zu MB) to float32", s->name,
                (size_t)V * (size_t)d * sizeof(float) >> 20);
    return p;
}

/* The float32 path's tiling of the logits' product (src/core/gemm.c, hs_gemm_run): tiles of
 * HEAD_TM rows by HEAD_TN columns, and no K split, once the vocabulary has HEAD_WIDE
 * columns or more (32 column tiles: GEMM_TILES). */
#define HEAD_TM 128
#define HEAD_TN 512
#define HEAD_WIDE (31 * HEAD_TN + 1)

/* logits (rows, V), rows i0.. i0 + ni, columns j0.. j0 + nj += scale h dec^T, as the float32
 * path's tiles compute them: for each HEAD_TN column tile and each HEAD_TM row tile, one
 * cblas_sgemm with the decoder's rows as a (cols, d) b transposed, each thread decoding its
 * tile's rows. */
static void tiles_nt(const stable *s, const float *h, int d, int V, int i0, int ni, int j0,
                     int nj, float scale, float *logits)
{
    int ntile = (nj + HEAD_TN - 1) / HEAD_TN;
    /* always a parallel loop, as gemm.c's tiles: OpenBLAS runs a call made inside one on
     * the calling thread alone (how it splits a call over threads changes the bits) */
#pragma omp parallel for schedule(dynamic)
    for (int t = 0; t < ntile; t++) {
        int c0 = j0 + t * HEAD_TN, cols = j0 + nj - c0 < HEAD_TN ? j0 + nj - c0 : HEAD_TN;
        float *buf = malloc((size_t)cols * (size_t)d * sizeof *buf);
        if (buf)
            hs_tensor_decode(&s->t, (size_t)c0 * (size_t)d, buf, (size_t)cols * (size_t)d);
        for (int r0 = i0; r0 < i0 + ni; r0 += HEAD_TM) {
            int r = i0 + ni - r0 < HEAD_TM ? i0 + ni - r0 : HEAD_TM;
            float *c = logits + (size_t)r0 * (size_t)V + (size_t)c0;
            if (!buf) { /* NaN: the pass fails on non-finite values, as gemm.c's */
                for (int i = 0; i < r; i++)
                    for (int j = 0; j < cols; j++)
                        c[(size_t)i * (size_t)V + (size_t)j] = NAN;
                continue;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, cols, d, scale,
                        h + (size_t)r0 * (size_t)d, d, buf, d, 1.0f, c, V);
        }
        free(buf);
    }
}

/* The product with the stored rows: hs_gemm_run with b made a block at a time from them,
 * whose calls are the float32 path's (c += h dec^T is run_filled's product) except a call of
 * one row or one column, which it makes untransposed (the float32 path of hs_op_linear, NN):
 * the float32 path here is NT, so its last row tile of one row (rows % HEAD_TM == 1) and its
 * last column tile of one column (V % HEAD_TN == 1) are made again as the float32 path's
 * tiles (tiles_nt), from what c held. Below HEAD_WIDE columns (the tiling then depends on
 * the rows and may split K) such a product converts the decoder whole instead. */
void hs_model_decoder_gemm(const hs_model *m, const float *h, int rows, float scale,
                           float *logits)
{
    int d = m->cfg.d_model, V = m->cfg.vocab_size;
    stable *s = dec_table(m);
    int one_row = rows % HEAD_TM == 1, one_col = V % HEAD_TN == 1;
    const float *f32 = m->decoder;
    hs_error e;
    if (s && (one_row || one_col) && V < HEAD_WIDE && !(f32 = whole(m, s, &e))) {
        for (size_t i = 0; i < (size_t)rows * (size_t)V; i++) /* out of memory: NaN */
            logits[i] = NAN;
        return;
    }
    if (f32) {
        hs_op_gemm(1, rows, V, d, scale, h, d, f32, d, 1.0f, logits, V);
        return;
    }
    float *row = one_row ? malloc((size_t)V * sizeof *row) : NULL;
    float *col = one_col ? malloc((size_t)rows * sizeof *col) : NULL;
    float *last = logits + (size_t)(rows - 1) * (size_t)V;
    if (row)
        memcpy(row, last, (size_t)V * sizeof *row);
    for (int i = 0; col && i < rows; i++)
        col[i] = logits[(size_t)i * (size_t)V + (size_t)(V - 1)];
    hs_gemm g = {.m = rows, .n = V, .k = d, .alpha = scale, .beta = 1.0, .a = h, .lda = d,
                 .c = logits, .ldc = V, .b_fill = hs_qmat_fill, .b_fill_kn = hs_qmat_fill_kn,
                 .b_ctx = &s->qm};
    hs_gemm_run(&g);
    if ((one_row && !row) || (one_col && !col)) { /* out of memory: NaN */
        for (size_t i = 0; i < (size_t)rows * (size_t)V; i++)
            logits[i] = NAN;
    } else {
        if (row) {
            memcpy(last, row, (size_t)V * sizeof *row);
            tiles_nt(s, h, d, V, rows - 1, 1, 0, V, scale, logits);
        }
        for (int i = 0; col && i < rows; i++)
            logits[(size_t)i * (size_t)V + (size_t)(V - 1)] = col[i];
        if (col)
            tiles_nt(s, h, d, V, 0, rows, V - 1, 1, scale, logits);
    }
    free(row);
    free(col);
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

hs_status hs_model_decoder_back(const hs_model *m, const float *dlogits, int rows, float scale,
                                float *dh, hs_error *err)
{
    int d = m->cfg.d_model, V = m->cfg.vocab_size;
    const float *dec = hs_model_decoder_f32(m, err); /* a stored table converted once */
    if (!dec)
        return HS_E_NOMEM;
    hs_op_gemm(0, rows, d, V, scale, dlogits, V, dec, d, 0.0f, dh, d);
    return HS_OK;
}
