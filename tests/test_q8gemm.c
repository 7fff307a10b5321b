/* Products by block-quantised matrices with 8-bit activations (src/core/q8gemm.c, the
 * integer forms of src/model/quant_i8.c): --activations q8.
 *
 * References that do not come from the code under test: fixtures/q8gemm/, written by
 * fixtures/ref/make_q8gemm_golden.py (the activations quantised by the documented rule in
 * numpy, the weights dequantised by quant_ref.py from their byte layouts, the products in
 * float64), which the kernel must equal to float32 rounding (its integer sums are exact);
 * blocks built by hand whose products are worked out below; hs_quant_decode's values (each
 * checked against quant_ref.py in test_quant.c) for the integer forms. Every instruction
 * set the CPU has runs (AVX-512 VNNI, AVX2, portable C) and must give the same bits, on one
 * thread and on several. */
#include <math.h>
#include <omp.h>

#include "core/q8gemm.h"
#include "headscope/forward.h"
#include "model/model_internal.h"
#include "model/quant.h"
#include "testutil.h"

#define DIR "fixtures/q8gemm/"
#define N 5
#define IN 512
#define OUT 20

static const struct {
    const char *name;
    uint32_t type;
} TYPES[] = {{"Q4_0", HS_QUANT_Q4_0}, {"Q4_1", HS_QUANT_Q4_1},     {"Q5_0", HS_QUANT_Q5_0},
             {"Q5_1", HS_QUANT_Q5_1}, {"Q8_0", HS_QUANT_Q8_0},     {"Q2_K", HS_QUANT_Q2_K},
             {"Q3_K", HS_QUANT_Q3_K}, {"Q4_K", HS_QUANT_Q4_K},     {"Q5_K", HS_QUANT_Q5_K},
             {"Q6_K", HS_QUANT_Q6_K}, {"IQ4_NL", HS_QUANT_IQ4_NL}, {"IQ4_XS", HS_QUANT_IQ4_XS}};
#define NTYPES (sizeof TYPES / sizeof TYPES[0])

/* a stored matrix as the test's decoder takes it: a type and its rows' bytes */
typedef struct tmat {
    uint32_t type;
    const unsigned char *bytes;
} tmat;

static int decode_i8(const void *src, size_t from, int8_t *q, float *d, float *m, size_t count)
{
    const tmat *t = src;
    size_t elems = 0, bytes = 0;
    hs_quant_block(t->type, &elems, &bytes);
    return hs_quant_decode_i8(t->type, t->bytes + from / elems * bytes, q, d, m, count);
}

/* an hs_qmat of `out` stored rows of `in` elements of t */
static hs_qmat make_qmat(const tmat *t, int in, int out, hs_qcol *cols)
{
    size_t elems = 0, bytes = 0;
    cr_assert(hs_quant_block(t->type, &elems, &bytes));
    for (int j = 0; j < out; j++)
        cols[j] = (hs_qcol){t, (size_t)j * (size_t)in, (int)elems};
    return (hs_qmat){.in = in, .out = out, .col = cols, .decode_i8 = decode_i8};
}

static void *slurp(const char *name, size_t want)
{
    char path[256];
    snprintf(path, sizeof path, DIR "%s", name);
    size_t len = 0;
    void *p = tu_slurp(path, &len);
    cr_assert_eq(len, want, "%s: %zu bytes, expected %zu", path, len, want);
    return p;
}

/* TYPES[k]'s OUT x IN matrix of blocks, its block's elements and bytes */
static unsigned char *type_blocks(size_t k, size_t *elems, size_t *bytes)
{
    hs_quant_block(TYPES[k].type, elems, bytes);
    char name[32];
    snprintf(name, sizeof name, "%s.blocks", TYPES[k].name);
    return slurp(name, (size_t)OUT * IN / *elems * *bytes);
}

/* The activations quantised as make_q8gemm_golden.py does, bit for bit: halves away from
 * zero, a block of zeros, scales in float32. */
Test(q8gemm, activations_quantised_as_the_reference)
{
    float *x = slurp("x.f32", N * IN * 4), *xa = slurp("xa.f32", N * IN / 32 * 4);
    int8_t *xq = slurp("xq.i8", N * IN);
    for (int r = 0; r < N; r++) {
        int8_t q[IN];
        float a[IN / 32];
        int32_t s[IN / 16];
        hs_q8_quantize_row(x + r * IN, IN, q, a, s);
        cr_assert(!memcmp(q, xq + r * IN, IN), "row %d: integers differ", r);
        cr_assert(!memcmp(a, xa + r * (IN / 32), sizeof a), "row %d: scales differ", r);
        for (int t = 0; t < IN / 16; t++) {
            int32_t sum = 0;
            for (int j = 0; j < 16; j++)
                sum += q[16 * t + j];
            cr_assert_eq(s[t], sum, "row %d: sum of 16 #%d", r, t);
        }
    }
    free(x), free(xa), free(xq);
}

/* A block by hand: max 127, so the scale is 1 and x / 1 is exact; 2.5 -> 3, -2.5 -> -3,
 * 0.5 -> 1, -0.5 -> -1 (halves away from zero, not to even); a NaN makes its block's scale
 * NaN and its integers 0. */
Test(q8gemm, hand_quantised_block)
{
    float x[96] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.49f, -126.5f};
    x[40] = NAN;
    x[64] = 1e-37f; /* 1 / (1e-37 / 127) overflows: the block counts as zeros */
    x[65] = -1e-38f;
    int8_t q[96];
    float a[3];
    int32_t s[6];
    hs_q8_quantize_row(x, 96, q, a, s);
    cr_assert(a[2] == 0.0f && q[64] == 0 && q[65] == 0 && s[4] == 0, "a tiny block: %g %d", (double)a[2], q[64]);
    static const int8_t want[7] = {127, 3, -3, 1, -1, 1, -127};
    cr_assert(!memcmp(q, want, 7), "q = %d %d %d %d %d %d %d", q[0], q[1], q[2], q[3], q[4], q[5], q[6]);
    cr_assert_eq(a[0], 1.0f);
    cr_assert_eq(s[0], 127 + 3 - 3 + 1 - 1 + 1 - 127);
    cr_assert(isnan(a[1]), "a NaN's block has a NaN scale");
    for (int j = 32; j < 64; j++)
        cr_assert_eq(q[j], 0);
}

/* The integer forms give hs_quant_decode's values: d q + m within a rounding of them; a
 * type without one (Q8_1, Q8_K, F16's code) says so. */
Test(q8gemm, integer_forms_are_the_decoded_values)
{
    static const uint32_t none[] = {0, 1, 9, 15, 16, 30};
    for (size_t k = 0; k < sizeof none / sizeof none[0]; k++)
        cr_assert_eq(hs_quant_sub_block(none[k]), 0, "type %u", (unsigned)none[k]);
    for (size_t k = 0; k < NTYPES; k++) {
        size_t elems = 0, bytes = 0;
        unsigned char *b = type_blocks(k, &elems, &bytes);
        static int8_t q[IN];
        static float v[IN], d[IN / 16], m[IN / 16];
        for (int row = 0; row < OUT; row++) {
            const unsigned char *src = b + (size_t)row * IN / elems * bytes;
            int sub = hs_quant_decode_i8(TYPES[k].type, src, q, d, m, IN);
            cr_assert_eq(sub, hs_quant_sub_block(TYPES[k].type));
            cr_assert_eq(sub, TYPES[k].type == HS_QUANT_Q2_K || TYPES[k].type == HS_QUANT_Q3_K ||
                                      TYPES[k].type == HS_QUANT_Q6_K ? 16 : 32, "%s", TYPES[k].name);
            hs_quant_decode(TYPES[k].type, src, v, IN);
            for (int i = 0; i < IN; i++) {
                double e = (double)d[i / 16] * q[i] + m[i / 16];
                double tol = 0x1p-23 * (fabs((double)d[i / 16] * q[i]) + fabs(m[i / 16]));
                cr_assert(fabs(e - v[i]) <= tol, "%s row %d element %d: d q + m = %.9g, decoded %.9g",
                          TYPES[k].name, row, i, e, (double)v[i]);
                if (sub == 32 && i % 32 < 16)
                    cr_assert(d[i / 16] == d[i / 16 + 1] && m[i / 16] == m[i / 16 + 1]);
            }
        }
        free(b);
    }
}

/* y for every type on one isa and thread count */
static void run_all(float *y /* NTYPES x N x OUT */, const float *x)
{
    hs_qcol cols[OUT];
    for (size_t k = 0; k < NTYPES; k++) {
        size_t elems = 0, bytes = 0;
        unsigned char *b = type_blocks(k, &elems, &bytes);
        tmat t = {TYPES[k].type, b};
        hs_qmat w = make_qmat(&t, IN, OUT, cols);
        hs_q8gemm_run(&w, x, NULL, y + k * N * OUT, N, 0);
        free(b);
    }
}

/* Every type against the float64 reference, to float32 rounding: the integer sums are
 * exact, and each of the at most 2 IN / 16 + 2 float steps of a cell rounds once; the
 * reference's weights are quant_ref.py's float32 values (one rounding of d q + m each). */
Test(q8gemm, every_type_equals_the_float64_reference, .timeout = 60)
{
    float *x = slurp("x.f32", N * IN * 4);
    static float y[NTYPES * N * OUT];
    int best = hs_q8gemm_set_isa(-1);
    for (int isa = best; isa >= 0; isa--) {
        cr_assert_eq(hs_q8gemm_set_isa(isa), isa);
        run_all(y, x);
        for (size_t k = 0; k < NTYPES; k++) {
            char name[32];
            snprintf(name, sizeof name, "%s.ref.f64", TYPES[k].name);
            double *ref = slurp(name, N * OUT * 8);
            snprintf(name, sizeof name, "%s.l1.f64", TYPES[k].name);
            double *l1 = slurp(name, N * OUT * 8);
            for (int i = 0; i < N * OUT; i++) {
                double tol = (2.0 * IN / 16 + 4) * 0x1p-24 * l1[i] + 1e-30;
                double e = fabs((double)y[k * N * OUT + i] - ref[i]);
                cr_assert(e <= tol, "isa %d %s row %d col %d: %.9g, reference %.9g (error %.3g, "
                          "bound %.3g)", isa, TYPES[k].name, i / OUT, i % OUT,
                          (double)y[k * N * OUT + i], ref[i], e, tol);
            }
            free(ref), free(l1);
        }
    }
    hs_q8gemm_set_isa(-1);
    free(x);
}

/* The same bits on every instruction set and on 1 and 2 threads. */
Test(q8gemm, same_bits_on_every_isa_and_thread_count, .timeout = 60)
{
    float *x = slurp("x.f32", N * IN * 4);
    static float y0[NTYPES * N * OUT], y1[NTYPES * N * OUT];
    int best = hs_q8gemm_set_isa(-1);
    omp_set_num_threads(1);
    hs_q8gemm_set_isa(0);
    run_all(y0, x);
    for (int isa = best; isa >= 1; isa--)
        for (int threads = 1; threads <= 2; threads++) {
            omp_set_num_threads(threads);
            hs_q8gemm_set_isa(isa);
            run_all(y1, x);
            for (size_t i = 0; i < NTYPES * N * OUT; i++)
                cr_assert(!memcmp(&y0[i], &y1[i], sizeof y0[i]), "isa %d, %d threads, %s cell %zu: "
                          "%.9g, portable C %.9g", isa, threads, TYPES[i / (N * OUT)].name,
                          i % (N * OUT), (double)y1[i], (double)y0[i]);
        }
    if (best < 2)
        cr_log_info("this CPU has no AVX-512 VNNI: its path was not run");
    hs_q8gemm_set_isa(-1);
    free(x);
}

static void put16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)(v & 0xFF);
    p[1] = (unsigned char)(v >> 8);
}

/* Products by hand. Q8_0, d = 1, weights 1, 2, 3, ...: the activations above quantise to
 * 127, 3, -3, 1, -1 (scale 1), so y = 127 + 6 - 9 + 4 - 5 = 123 exactly (rounding halves to
 * even would give 127 + 4 - 6 = 125). Q4_1, d = 0.5, m = 1, every nibble 2 (w = 2), with
 * x = 1 everywhere (q = 127, scale 1/127): y = 32 x 2 = 64, up to the rounding of 1/127;
 * a bias of 0.5 and add on top of 1. Q6_K, the one sub-block scale 1 and d = 0.25, value
 * 33 (w = 0.25) at element 16 only: y = 0.25 x 127 for x with 127 there. */
Test(q8gemm, hand_products)
{
    for (int isa = hs_q8gemm_set_isa(-1); isa >= 0; isa--) {
        hs_q8gemm_set_isa(isa);
        hs_qcol cols[1];
        unsigned char b8[34] = {0};
        put16(b8, 0x3C00);
        for (int j = 0; j < 32; j++)
            b8[2 + j] = (unsigned char)(j + 1);
        tmat t8 = {HS_QUANT_Q8_0, b8};
        hs_qmat w = make_qmat(&t8, 32, 1, cols);
        float x[32] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f}, y = -1;
        hs_q8gemm_run(&w, x, NULL, &y, 1, 0);
        cr_assert_eq(y, 123.0f, "isa %d: Q8_0 by hand: %.9g", isa, (double)y);

        unsigned char b41[20] = {0};
        put16(b41, 0x3800);
        put16(b41 + 2, 0x3C00);
        memset(b41 + 4, 0x22, 16);
        tmat t41 = {HS_QUANT_Q4_1, b41};
        w = make_qmat(&t41, 32, 1, cols);
        for (int j = 0; j < 32; j++)
            x[j] = 1.0f;
        hs_q8gemm_run(&w, x, NULL, &y, 1, 0);
        cr_assert(fabsf(y - 64.0f) <= 64.0f * 1e-6f, "isa %d: Q4_1 by hand: %.9g", isa, (double)y);
        float bias = 0.5f;
        y = 1.0f;
        hs_q8gemm_run(&w, x, &bias, &y, 1, 1);
        cr_assert(fabsf(y - 65.5f) <= 64.0f * 1e-6f, "isa %d: Q4_1 with bias, added: %.9g", isa, (double)y);

        unsigned char b6[210] = {0}; /* every 6-bit value 0 (w = -32 d s) but element 16 */
        b6[192 + 1] = 1;            /* sub-block 1 (elements 16..31): scale 1, the rest 0 */
        put16(b6 + 208, 0x3400);    /* d = 0.25 */
        b6[16] = 1;                 /* element 16: low 4 bits 1, high 2 bits 0 -> q 1 - 32 */
        tmat t6 = {HS_QUANT_Q6_K, b6};
        w = make_qmat(&t6, 256, 1, cols);
        float x6[256] = {0};
        x6[16] = 127.0f;
        hs_q8gemm_run(&w, x6, NULL, &y, 1, 0);
        cr_assert_eq(y, 0.25f * -31.0f * 127.0f, "isa %d: Q6_K by hand: %.9g", isa, (double)y);
    }
    hs_q8gemm_set_isa(-1);
}

/* A model opened with HS_OPEN_Q8_ACTIVATIONS multiplies its block-quantised layers by 8-bit
 * activations and its F16 layers by the float path (the stored path's bits, which
 * test_qgemm holds equal to the converted layers'). */
Test(q8gemm, models_take_the_q8_path_for_block_types_only, .timeout = 60)
{
    static const struct {
        const char *path;
        int q8;
    } files[] = {{"fixtures/gguf/families/tiny-llama.q8_0.gguf", 1},
                 {"fixtures/gguf/families/tiny-qwen2.q4_k_m_fallback.gguf", 1},
                 {"fixtures/gguf/families/tiny-qwen2.f16.gguf", 0}};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        hs_model *m = NULL, *s = NULL;
        hs_error err = {{0}};
        hs_open_opts o = {.flags = HS_OPEN_Q8_ACTIVATIONS, .weight_memory = HS_WEIGHT_MEMORY_ALL};
        cr_assert_eq(hs_model_open2(files[f].path, &o, &m, &err), HS_OK, "%s", err.msg);
        cr_assert(hs_model_stored_weights(m), "q8 implies the stored type");
        hs_open_opts os = {.weight_memory = HS_WEIGHT_MEMORY_STORED};
        cr_assert_eq(hs_model_open2(files[f].path, &os, &s, &err), HS_OK, "%s", err.msg);
        const hs_model_config *c = hs_model_config_of(m);
        int n = 24;
        int32_t ids[24];
        for (int i = 0; i < n; i++)
            ids[i] = (int32_t)(((uint64_t)i * 7919 + 13) % (uint64_t)c->vocab_size);
        size_t nl = (size_t)n * (size_t)c->vocab_size;
        float *l0 = malloc(nl * sizeof *l0), *l1 = malloc(nl * sizeof *l1);
        hs_forward_opts fo = {.logits = l0};
        cr_assert_eq(hs_forward(s, ids, NULL, n, &fo, NULL, &err), HS_OK, "%s", err.msg);
        long calls = hs_q8gemm_calls();
        fo.logits = l1;
        cr_assert_eq(hs_forward(m, ids, NULL, n, &fo, NULL, &err), HS_OK, "%s", err.msg);
        int took = hs_q8gemm_calls() > calls, same = !memcmp(l0, l1, nl * sizeof *l0);
        cr_assert_eq(took, files[f].q8, "%s: 8-bit products %s", files[f].path, took ? "ran" : "did not run");
        cr_assert_eq(same, !files[f].q8, "%s: logits %s the float path's", files[f].path,
                     same ? "equal" : "differ from");
        free(l0), free(l1);
        hs_model_free(m);
        hs_model_free(s);
    }
}
