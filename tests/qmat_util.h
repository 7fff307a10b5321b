/* Stored matrices for the suites of products on stored weights (test_qgemm.c, test_gemv.c):
 * every stored type with where its f16 scales sit, random rows with small finite scales,
 * their float32 decoding by the decoders the float32 path has always used, and a
 * registered hs_qmat over them, with its type's one-row kernel where it has one, as the
 * weight cache makes it (header-only, test code only). */
#ifndef HEADSCOPE_QMAT_UTIL_H
#define HEADSCOPE_QMAT_UTIL_H

#include "core/qgemm.h"
#include "headscope/gguf.h"
#include "model/model_internal.h"
#include "model/quant.h"
#include "testutil.h"

/* A stored type and where its f16 scales sit in a block (-1: none more). */
typedef struct qtype {
    hs_dtype dt;
    uint32_t ggml;
    int scale_at[2];
} qtype;

static const qtype TYPES[] = {
    {HS_DT_F16, HS_GGML_F16, {-1, -1}},      {HS_DT_BF16, HS_GGML_BF16, {-1, -1}},
    {HS_DT_Q8_0, HS_GGML_Q8_0, {0, -1}},     {HS_DT_Q4_0, HS_GGML_Q4_0, {0, -1}},
    {HS_DT_Q4_1, HS_GGML_Q4_1, {0, 2}},      {HS_DT_Q5_0, HS_GGML_Q5_0, {0, -1}},
    {HS_DT_Q5_1, HS_GGML_Q5_1, {0, 2}},      {HS_DT_Q2_K, HS_GGML_Q2_K, {80, 82}},
    {HS_DT_Q3_K, HS_GGML_Q3_K, {108, -1}},   {HS_DT_Q4_K, HS_GGML_Q4_K, {0, 2}},
    {HS_DT_Q5_K, HS_GGML_Q5_K, {0, 2}},      {HS_DT_Q6_K, HS_GGML_Q6_K, {208, -1}},
    {HS_DT_IQ4_NL, HS_GGML_IQ4_NL, {0, -1}}, {HS_DT_IQ4_XS, HS_GGML_IQ4_XS, {0, -1}},
};
#define N_TYPES (sizeof TYPES / sizeof TYPES[0])

static uint64_t rng = 88172645463325252ull;
static inline uint32_t next_u32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static inline float uniform(float lo, float hi) { return lo + (hi - lo) * (float)(next_u32() >> 8) / 16777216.0f; }

/* count floats drawn uniformly from [-1, 1), malloc'd. */
static inline float *random_floats(size_t count)
{
    float *x = malloc(count * sizeof *x);
    cr_assert_not_null(x);
    for (size_t i = 0; i < count; i++)
        x[i] = uniform(-1, 1);
    return x;
}

/* out stored rows of `in` elements of type q: random bytes, every f16 scale a small finite
 * value (F16 / BF16: every element). Returns the bytes (row after row). */
static inline unsigned char *random_rows(const qtype *q, int in, int out, size_t *row_bytes)
{
    size_t elems = 1, bytes = 2;
    hs_quant_block(q->ggml, &elems, &bytes);
    *row_bytes = (size_t)in / elems * bytes;
    size_t total = *row_bytes * (size_t)out;
    unsigned char *p = malloc(total);
    cr_assert_not_null(p);
    for (size_t i = 0; i < total; i++)
        p[i] = (unsigned char)next_u32();
    if (q->dt == HS_DT_F16 || q->dt == HS_DT_BF16) {
        for (size_t i = 0; i < total; i += 2) {
            float v = uniform(-0.1f, 0.1f);
            uint16_t h = q->dt == HS_DT_F16 ? hs_f32_to_f16(v) : hs_f32_to_bf16(v);
            p[i] = (unsigned char)h, p[i + 1] = (unsigned char)(h >> 8);
        }
        return p;
    }
    for (size_t b = 0; b < total; b += bytes)
        for (int s = 0; s < 2; s++)
            if (q->scale_at[s] >= 0) {
                uint16_t h = hs_f32_to_f16(uniform(-0.02f, 0.02f));
                p[b + (size_t)q->scale_at[s]] = (unsigned char)h;
                p[b + (size_t)q->scale_at[s] + 1] = (unsigned char)(h >> 8);
            }
    return p;
}

/* The decoded matrix (in, out), column j from stored row j, by the decoders the float32
 * path has always used (the element converters one by one for F16 and BF16). */
static inline float *decoded(const qtype *q, const unsigned char *p, size_t row_bytes, int in, int out)
{
    float *w = malloc((size_t)in * (size_t)out * sizeof *w), *row = malloc((size_t)in * sizeof *row);
    cr_assert(w && row);
    for (int j = 0; j < out; j++) {
        const unsigned char *r = p + (size_t)j * row_bytes;
        if (q->dt == HS_DT_F16 || q->dt == HS_DT_BF16)
            for (int i = 0; i < in; i++)
                row[i] = q->dt == HS_DT_F16 ? hs_f16_to_f32(hs_le16(r + 2 * i))
                                            : hs_bf16_to_f32(hs_le16(r + 2 * i));
        else
            hs_quant_decode(q->ggml, r, row, (size_t)in);
        for (int i = 0; i < in; i++)
            w[(size_t)i * (size_t)out + (size_t)j] = row[i];
    }
    free(row);
    return w;
}

/* A registered hs_qmat over the stored rows p; wq: the pointer hs_op_linear takes for it. From
 * stored_random, also the rows (own_p) and their float32 decoding w, freed by stored_free. */
typedef struct stored {
    hs_tensor_view t;
    hs_qcol *cols;
    hs_qmat q;
    const float *wq;
    unsigned char *own_p;
    float *w;
} stored;

static inline void stored_init(stored *s, const qtype *q, const unsigned char *p, size_t row_bytes,
                        int in, int out)
{
    s->t = (hs_tensor_view){.name = "w", .dtype = q->dt, .ndim = 2, .shape = {out, in},
                            .data = p, .nbytes = row_bytes * (size_t)out};
    s->cols = malloc((size_t)out * sizeof *s->cols);
    for (int j = 0; j < out; j++)
        s->cols[j] = (hs_qcol){&s->t, (size_t)j * (size_t)in, hs_dtype_block(q->dt)};
    s->q = (hs_qmat){.in = in, .out = out, .col = s->cols, .decode = hs_tensor_decode,
                     .rows = hs_tensor_rows_fn(&s->t)}; /* as the weight cache makes it */
    s->wq = (const float *)(const void *)&s->q;
    s->own_p = NULL;
    s->w = NULL;
    cr_assert_eq(hs_qmat_register(&s->q, 1), 0);
}

/* out random stored rows of `in` elements of type q (random_rows), registered, and w. */
static inline void stored_random(stored *s, const qtype *q, int in, int out)
{
    size_t rb;
    unsigned char *p = random_rows(q, in, out, &rb);
    stored_init(s, q, p, rb, in, out);
    s->own_p = p;
    s->w = decoded(q, p, rb, in, out);
}

static inline void stored_free(stored *s)
{
    hs_qmat_unregister(&s->q);
    free(s->cols);
    free(s->own_p);
    free(s->w);
}

#endif
