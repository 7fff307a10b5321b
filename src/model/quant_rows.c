/* Four stored rows times one activation row with each weight made in registers
 * (hs_qrows_fn, for the one-row product of src/nn/gemv.c): Q8_0, F16 and BF16.
 *
 * The generic path decodes a piece of each row into a buffer (hs_tensor_decode) and then
 * multiplies: every weight is stored to L1 and loaded again, and the decoder's loop and the
 * product's are two passes over it. Here the weights of a group of neighbouring elements are
 * made in one vector from the stored bytes and multiplied by x at once. The values and the
 * order are gemv.c's: each weight exactly what the decoder gives (Q8_0: d * (float)q rounded,
 * d the block's f16 scale; F16, BF16: the exact conversion), each product x_k w rounded, then
 * added into partial l = k mod 16 in increasing k, from +0. No fused multiply-add (none
 * under -std=c11), so every path gives the same bits; tests/test_gemv.c checks each against
 * the order written out one scalar at a time.
 *
 * Two paths, chosen once per matrix by the CPU's features (as q8gemm.c's): AVX-512 (16
 * lanes a vector) and AVX2 with F16C (8), equally fast on the development machine's Zen 4:
 * a 1 GB matrix of depth 2048 (5632) in 0.09 s (0.08) as Q8_0 and 0.066 s (0.058) as F16 on
 * one thread, where decoding into L1 and multiplying takes 0.23 (0.15) and 0.14 (0.14);
 * BF16 in 0.08 s, which weights.c decodes an element at a time (0.78 s). Elsewhere (no
 * AVX2, another compiler or CPU) there is no kernel and gemv.c decodes: written in portable
 * C, the kernel took 0.60 s. GCC 12 widens 16 bytes to 16 floats through its vector
 * extension in ten instructions where vpmovsxbd and vcvtdq2ps take two, so the widening
 * (and the halves' conversion: vcvtph2ps; BF16's vpmovzxwd and a shift) are intrinsics; the
 * rest is the vector extension's plain arithmetic. vcvtph2ps gives hs_f16_to_f32_fast's
 * value for every half but a signalling NaN, which it quiets (as the product does anyway;
 * the load refuses non-finite weights). HS_CLONES_NO_V4 leaves the AVX-512 path out, as it
 * does the clones. */
#include <string.h>

#include "core/core.h"
#include "core/qgemm.h"
#include "model/model_internal.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(HS_NO_CLONES)
#include <immintrin.h> /* where HS_CLONES makes clones (src/nn/fastmath.h) */
#define ROWS_X86 1
#endif

#define LANES 16   /* partial sums a column */
#define Q8_BYTES 34 /* a Q8_0 block: f16 d, 32 int8 q */
#define Q8_ELEMS 32
#define PIECE 128  /* blocks of each row whose scales are made at a time */

static int isa_cap = -1;

int hs_qrows_isa(void)
{
    int best = 0, cap = __atomic_load_n(&isa_cap, __ATOMIC_RELAXED);
#ifdef ROWS_X86
    __builtin_cpu_init();
    best = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#ifndef HS_CLONES_NO_V4
    best = __builtin_cpu_supports("avx512f") ? 2 : best;
#endif
#endif
    return cap >= 0 && cap < best ? cap : best;
}

int hs_qrows_set_isa(int isa)
{
    __atomic_store_n(&isa_cap, isa, __ATOMIC_RELAXED);
    return hs_qrows_isa();
}

#ifdef ROWS_X86
static void row_starts(const hs_qcol *const col[4], size_t bytes, size_t elems,
                       const unsigned char *r[4])
{
    for (int c = 0; c < 4; c++) {
        const hs_tensor_view *t = col[c]->src;
        r[c] = t->data + col[c]->first / elems * bytes;
    }
}

/* The scales of blocks b0 .. b0 + nb of the four rows r as decode_q8_0 makes them, d[c][b]:
 * the halves gathered, then converted in one vectorised loop. */
static inline void q8_0_scales(const unsigned char *const r[4], int b0, int nb,
                               float d[4][PIECE])
{
    uint16_t h[4][PIECE];
    for (int c = 0; c < 4; c++)
        for (int b = 0; b < nb; b++)
            h[c][b] = hs_le16(r[c] + (size_t)(b0 + b) * Q8_BYTES);
    for (int c = 0; c < 4; c++) {
#pragma omp simd
        for (int b = 0; b < nb; b++)
            d[c][b] = hs_f16_to_f32_fast(h[c][b]);
    }
}

/* Each kernel is written once over vectors VT of VN lanes (16 or 8):
 * a[c][v] holds lanes v VN .. v VN + VN of row c's 16 partials; LOADX(p) is VN floats of x
 * at p; WIDEN(p) the VN int8 at p as floats (Q8_0), CONVERT(p) the VN halves at p as floats
 * (F16). The loops over a block's groups and the four rows are unrolled (UNROLL), so that
 * the accumulators are registers, not an array in memory. */
#define UNROLL _Pragma("GCC unroll 32")
#define V_ACC(VT, VN)    \
    VT a[4][LANES / VN]; \
    memset(a, 0, sizeof a)
#define V_STORE(VN)                                                                      \
    for (int c = 0; c < 4; c++)                                                          \
        for (int v = 0; v < LANES / VN; v++)                                             \
            memcpy(&part[c][v * VN], &a[c][v], sizeof a[c][v])

/* Q8_0: in a multiple of 32 (whole blocks), so nothing is left after the 16-lane groups.
 * Gathering a piece's scales reads its cache lines before the products do, so memory and
 * arithmetic would take turns: each block's step asks for the same place in the next four
 * stored rows (gemv.c's next call; a tensor's rows follow one another, and a prefetch past
 * its end does not fault), whose gather then finds them in cache. A 1 GB matrix on one
 * thread: 0.10 -> 0.09 s at depth 2048, 0.15 -> 0.08 s at 5632 (F16, read as it comes,
 * gains nothing from it). */
#define Q8_0_KERNEL(name, attr, VT, VN, LOADX, WIDEN)                                    \
    attr static void name(const float *x, const hs_qcol *const col[4], int in,           \
                          float part[4][LANES])                                          \
    {                                                                                    \
        const unsigned char *r[4];                                                       \
        float d[4][PIECE];                                                               \
        V_ACC(VT, VN);                                                                   \
        size_t ahead = (size_t)in / Q8_ELEMS * Q8_BYTES * 4; /* the next four rows */  \
        row_starts(col, Q8_BYTES, Q8_ELEMS, r);                                          \
        for (int b0 = 0; b0 < in / Q8_ELEMS; b0 += PIECE) {                              \
            int nb = in / Q8_ELEMS - b0 < PIECE ? in / Q8_ELEMS - b0 : PIECE;            \
            q8_0_scales(r, b0, nb, d);                                                   \
            for (int b = 0; b < nb; b++) {                                               \
                const float *xb = x + (size_t)(b0 + b) * Q8_ELEMS;                       \
                size_t o = (size_t)(b0 + b) * Q8_BYTES + 2;                              \
                UNROLL for (int c = 0; c < 4; c++)                                       \
                    __builtin_prefetch(r[c] + o + ahead);                                \
                UNROLL for (int g = 0; g < Q8_ELEMS / VN; g++) {                         \
                    VT xv = LOADX(xb + g * VN);                                          \
                    UNROLL for (int c = 0; c < 4; c++)                                   \
                        a[c][g % (LANES / VN)] += xv * (d[c][b] * WIDEN(r[c] + o + g * VN)); \
                }                                                                        \
            }                                                                            \
        }                                                                                \
        V_STORE(VN);                                                                     \
    }

/* F16 and BF16 (2 bytes an element; SCALAR(p) the one at p as a float): any in; the elements
 * after the last whole group of 16 are added last, element k into partial k - in / 16 * 16
 * (the last term of its partial). */
#define HALF_KERNEL(name, attr, VT, VN, LOADX, CONVERT, SCALAR)                          \
    attr static void name(const float *x, const hs_qcol *const col[4], int in,           \
                          float part[4][LANES])                                          \
    {                                                                                    \
        const unsigned char *r[4];                                                       \
        V_ACC(VT, VN);                                                                   \
        row_starts(col, 2, 1, r);                                                        \
        int k16 = in / LANES * LANES;                                                    \
        for (int k = 0; k < k16; k += LANES)                                             \
            UNROLL for (int v = 0; v < LANES / VN; v++) {                                \
                VT xv = LOADX(x + k + v * VN);                                           \
                UNROLL for (int c = 0; c < 4; c++)                                       \
                    a[c][v] += xv * CONVERT(r[c] + 2 * (size_t)(k + v * VN));            \
            }                                                                            \
        V_STORE(VN);                                                                     \
        for (int c = 0; c < 4; c++)                                                      \
            for (int k = k16; k < in; k++)                                               \
                part[c][k - k16] += x[k] * SCALAR(r[c] + 2 * (size_t)k);                  \
    }

#define F16_1(p) hs_f16_to_f32_fast(hs_le16(p))
#define BF16_1(p) hs_bf16_to_f32(hs_le16(p))

/* vectors of N floats, and N floats loaded from any address */
#define VEC(N)                                                                           \
    typedef float v##N __attribute__((vector_size(N * sizeof(float))));                 \
    typedef float v##N##_any __attribute__((vector_size(N * sizeof(float)), aligned(1), may_alias))
#define M128(p) ((const __m128i *)(const void *)(p))
#define AVX2 __attribute__((target("avx2,f16c")))
VEC(8);
#define X8(p) (*(const v8_any *)(const void *)(p))
#define Q8_8(p) ((v8)_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(M128(p)))))
#define F16_8(p) ((v8)_mm256_cvtph_ps(_mm_loadu_si128(M128(p))))
#define BF16_8(p) ((v8)_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(M128(p))), 16))
Q8_0_KERNEL(q8_0_rows_avx2, AVX2, v8, 8, X8, Q8_8)
HALF_KERNEL(f16_rows_avx2, AVX2, v8, 8, X8, F16_8, F16_1)
HALF_KERNEL(bf16_rows_avx2, AVX2, v8, 8, X8, BF16_8, BF16_1)

#ifndef HS_CLONES_NO_V4
#define AVX512 __attribute__((target("avx512f")))
VEC(16);
#define X16(p) (*(const v16_any *)(const void *)(p))
#define Q8_16(p) ((v16)_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(M128(p)))))
#define M256(p) ((const __m256i *)(const void *)(p))
#define F16_16(p) ((v16)_mm512_cvtph_ps(_mm256_loadu_si256(M256(p))))
#define BF16_16(p) ((v16)_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(M256(p))), 16))
Q8_0_KERNEL(q8_0_rows_avx512, AVX512, v16, 16, X16, Q8_16)
HALF_KERNEL(f16_rows_avx512, AVX512, v16, 16, X16, F16_16, F16_1)
HALF_KERNEL(bf16_rows_avx512, AVX512, v16, 16, X16, BF16_16, BF16_1)
#endif
#endif /* ROWS_X86 */

hs_qrows_fn hs_tensor_rows_fn(const void *t)
{
    hs_dtype dt = ((const hs_tensor_view *)t)->dtype;
    hs_qrows_fn q8 = NULL, f16 = NULL, bf16 = NULL; /* NULL: gemv.c decodes, multiplies */
#ifdef ROWS_X86
    switch (hs_qrows_isa()) {
#ifndef HS_CLONES_NO_V4
    case 2: q8 = q8_0_rows_avx512, f16 = f16_rows_avx512, bf16 = bf16_rows_avx512; break;
#endif
    case 1: q8 = q8_0_rows_avx2, f16 = f16_rows_avx2, bf16 = bf16_rows_avx2; break;
    default: break;
    }
#endif
    return dt == HS_DT_Q8_0 ? q8 : dt == HS_DT_F16 ? f16 : dt == HS_DT_BF16 ? bf16 : NULL;
}
