/* One product of TinyLlama's MLP shape (n x 2048 by 2048 x 11264: gate and up together), on
 * one thread, with W in each stored type (decoded a block at a time inside the GEMM,
 * src/core/qgemm.c) against OpenBLAS on the same W converted to float32 beforehand: the
 * best of reps runs in CPU seconds (a loaded machine's other processes do not count), and
 * the decoders alone in ns a weight. Random bytes with small finite f16 scales. */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/core.h"
#include "core/qgemm.h"
#include "headscope/gguf.h"
#include "headscope/version.h"
#include "model/model_internal.h"
#include "model/quant.h"
#include "nn/ops.h"
#include "bench.h"

#define QB_IN 2048
#define QB_OUT 11264

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct qb_type {
    hs_dtype dt;
    uint32_t ggml;
    int scale_at[2]; /* f16 scales in a block (-1: none); F16: every element */
    const char *name;
} qb_type;

static const qb_type QB_TYPES[] = {
    {HS_DT_F16, HS_GGML_F16, {-1, -1}, "F16"},   {HS_DT_Q8_0, HS_GGML_Q8_0, {0, -1}, "Q8_0"},
    {HS_DT_Q4_0, HS_GGML_Q4_0, {0, -1}, "Q4_0"}, {HS_DT_Q4_K, HS_GGML_Q4_K, {0, 2}, "Q4_K"},
    {HS_DT_Q5_K, HS_GGML_Q5_K, {0, 2}, "Q5_K"},  {HS_DT_Q6_K, HS_GGML_Q6_K, {208, -1}, "Q6_K"},
};

/* The stored rows of W: random bytes, every f16 scale (F16: value) small and finite. */
static unsigned char *qb_rows(const qb_type *q, size_t *total)
{
    size_t elems = 1, bytes = 2;
    hs_quant_block(q->ggml, &elems, &bytes);
    *total = (size_t)QB_IN / elems * bytes * QB_OUT;
    unsigned char *p = malloc(*total);
    if (!p)
        return NULL;
    uint32_t s = 2463534242u;
    for (size_t i = 0; i < *total; i++) {
        s ^= s << 13, s ^= s >> 17, s ^= s << 5;
        p[i] = (unsigned char)s;
    }
    for (size_t b = 0; b < *total; b += bytes)
        for (int k = 0; k < 2; k++) {
            int at = q->dt == HS_DT_F16 ? k == 0 ? 0 : -1 : q->scale_at[k];
            if (at < 0)
                continue;
            uint16_t h = hs_f32_to_f16(q->dt == HS_DT_F16 ? 0.01f * (float)(p[b] % 7) : 0.01f);
            p[b + (size_t)at] = (unsigned char)h, p[b + (size_t)at + 1] = (unsigned char)(h >> 8);
        }
    return p;
}

/* Best CPU seconds of reps products y = x W (W an hs_qmat or float32). */
static double qb_product(const float *x, const float *w, float *y, int n, int reps)
{
    double best = -1;
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_now();
        hs_op_linear(x, w, NULL, y, n, QB_IN, QB_OUT);
        double t = cpu_now() - t0;
        best = best < 0 || t < best ? t : best;
    }
    return best;
}

void bench_qgemm_rows(int reps)
{
    static const int ns[2] = {128, 512};
    float *x = malloc((size_t)512 * QB_IN * sizeof *x);
    float *y = malloc((size_t)512 * QB_OUT * sizeof *y);
    float *w = malloc((size_t)QB_IN * QB_OUT * sizeof *w), *row = malloc(QB_IN * sizeof *row);
    hs_qcol *cols = malloc(QB_OUT * sizeof *cols);
    if (!x || !y || !w || !row || !cols)
        goto done;
    for (size_t i = 0; i < (size_t)512 * QB_IN; i++)
        x[i] = (float)(i % 251) / 251.0f - 0.5f;
    hs_set_threads(1);
    printf("\none product of the MLP's shape (n x 2048 by 2048 x 11264), 1 thread, best of %d, "
           "CPU ms: W decoded a block at a time inside the GEMM against OpenBLAS on W converted "
           "beforehand; decode alone in ns a weight; q8: --activations q8's product (8-bit "
           "activations, integer sums)\n%-6s %10s %10s %10s %10s %9s %10s %10s\n", reps,
           "type", "n=128", "float32", "n=512", "float32", "decode", "q8 128", "q8 512");
    for (size_t ti = 0; ti < sizeof QB_TYPES / sizeof QB_TYPES[0]; ti++) {
        const qb_type *q = &QB_TYPES[ti];
        size_t total;
        unsigned char *p = qb_rows(q, &total);
        if (!p)
            break;
        hs_tensor_view t = {.name = "w", .dtype = q->dt, .ndim = 2, .shape = {QB_OUT, QB_IN},
                            .data = p, .nbytes = total};
        for (int j = 0; j < QB_OUT; j++)
            cols[j] = (hs_qcol){&t, (size_t)j * QB_IN, hs_dtype_block(q->dt)};
        hs_qmat qm = {.in = QB_IN, .out = QB_OUT, .col = cols, .decode = hs_tensor_decode};
        double dec = -1;
        for (int r = 0; r < reps; r++) {
            double t0 = cpu_now();
            for (int j = 0; j < QB_OUT; j++)
                hs_tensor_decode(&t, (size_t)j * QB_IN, row, QB_IN);
            double d = cpu_now() - t0;
            dec = dec < 0 || d < dec ? d : dec;
        }
        for (int j = 0; j < QB_OUT; j++) { /* the float32 W, (in, out) */
            hs_tensor_decode(&t, (size_t)j * QB_IN, row, QB_IN);
            for (int i = 0; i < QB_IN; i++)
                w[(size_t)i * QB_OUT + (size_t)j] = row[i];
        }
        printf("%-6s", q->name);
        if (hs_qmat_register(&qm, 1) == 0) {
            for (int k = 0; k < 2; k++)
                printf(" %7.1f ms %7.1f ms",
                       1e3 * qb_product(x, (const float *)(const void *)&qm, y, ns[k], reps),
                       1e3 * qb_product(x, w, y, ns[k], reps));
            hs_qmat_unregister(&qm);
        }
        printf(" %6.2f ns", 1e9 * dec / ((double)QB_IN * QB_OUT));
        hs_qmat q8 = qm; /* the same matrix with 8-bit activations (block types only) */
        q8.decode_i8 = hs_tensor_sub_block(&t) ? hs_tensor_decode_i8 : NULL;
        if (q8.decode_i8 && hs_qmat_register(&q8, 1) == 0) {
            for (int k = 0; k < 2; k++)
                printf(" %7.1f ms", 1e3 * qb_product(x, (const float *)(const void *)&q8, y, ns[k], reps));
            hs_qmat_unregister(&q8);
        }
        printf("\n");
        fflush(stdout);
        free(p);
    }
    hs_set_threads(0);
done:
    free(x), free(y), free(w), free(row), free(cols);
}
