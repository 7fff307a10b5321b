/* Products by block-quantised matrices with 8-bit activations (q8gemm.h states the result).
 *
 * W's columns are taken 16 at a time (a tile, one task of the parallel loop): each column's
 * stored row is decoded to its integers and sub-block scales (hs_qmat.decode_i8) and laid
 * out as a panel, per block of 32 elements 8 groups of 4: group g holds, for each of the 16
 * columns, its 4 integers 4g.. 4g + 3 (64 bytes: one 512-bit register, 4 bytes a column),
 * then the block's scales (d of each 16 of each column, then m). Every row of x then runs
 * through the panel: per block, the integer sums of each column in one 32-bit lane, then
 * the float steps of q8gemm.h on 16 lanes at once.
 *
 * Integer sums are exact on every path (|q_w| <= 128, |q_x| <= 127, at most 32 terms), and
 * each float step is the same single operation (product, or fused multiply-add, rounded once)
 * in the same order on every path, so the three paths give the same bits:
 *   AVX-512 VNNI: vpdpbusd multiplies unsigned by signed bytes: the weights are offset by 128
 *   (q_w + 128 in 0..255) and 128 t subtracted from the sum;
 *   AVX2: vpmaddubsw (unsigned by signed, pairs summed to 16 bits with saturation) on |q_w|
 *   and q_x with q_w's sign, a pair at most 2 x 128 x 127 < 2^15, then vpmaddwd by ones;
 *   portable C: the sums as written. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/q8gemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define Q8_X86 1
#endif

#define NC 16          /* columns of a tile */
#define PB (32 * NC)   /* panel bytes of a block */
#define SB (4 * NC)    /* panel scales of a block: d of each 16, then m of each 16 */
/* make_panel's decoded columns lie this many bytes apart beyond their length: at a stride of
 * a power of two their lines would share a few L1 sets and evict each other */
#define ROW_PAD 64

static long calls;
static int isa_cap = -1;

long hs_q8gemm_calls(void)
{
    return __atomic_load_n(&calls, __ATOMIC_RELAXED);
}

static int isa_best(void)
{
#ifdef Q8_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma"))
        return 2;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return 1;
#endif
    return 0;
}

int hs_q8gemm_isa(void)
{
    int best = isa_best(), cap = __atomic_load_n(&isa_cap, __ATOMIC_RELAXED);
    return cap >= 0 && cap < best ? cap : best;
}

int hs_q8gemm_set_isa(int isa)
{
    __atomic_store_n(&isa_cap, isa, __ATOMIC_RELAXED);
    return hs_q8gemm_isa();
}

void hs_q8_quantize_row(const float *x, int in, int8_t *q, float *a, int32_t *s16)
{
    for (int b = 0; b < in / 32; b++) {
        const float *xb = x + 32 * b;
        float amax = 0.0f;
        int bad = 0;
        for (int j = 0; j < 32; j++) {
            float v = fabsf(xb[j]);
            bad |= !(v <= 3.4028234663852886e38f); /* NaN or infinity */
            amax = v > amax ? v : amax;
        }
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        if (!(id <= 3.4028234663852886e38f)) /* max |x| below 1.5e-36: 1 / d overflows */
            d = id = 0.0f;
        int8_t *qb = q + 32 * b;
        for (int j = 0; j < 32; j++)
            qb[j] = bad ? 0 : (int8_t)roundf(xb[j] * id);
        a[b] = bad ? NAN : d;
        for (int h = 0; h < 2; h++) {
            int32_t s = 0;
            for (int j = 16 * h; j < 16 * h + 16; j++)
                s += qb[j];
            s16[2 * b + h] = s;
        }
    }
}

/* x quantised: row r's integers at q + r in; per block b of row r, at 4 (r nb + b): in o the
 * sums t of its 32, first 16 and second 16 integers times 128 (what the VNNI path's offset
 * weights add), in f the same sums as floats, then the block's scale */
typedef struct qrows {
    const int8_t *q;
    const int32_t *o;
    const float *f;
    int in, nb;
} qrows;

#define XT(x, r, b) (4 * ((size_t)(r) * (size_t)(x)->nb + (size_t)(b)))

/* A tile's panel: nb blocks of PB bytes and SB floats; sub 32 or 16. */
typedef struct panel {
    const int8_t *q;
    const float *f;
    int nb, sub;
} panel;

/* One float step of a sub-block: acc + a ((float)i d + m t) as q8gemm.h writes it. */
static inline float step(float acc, float a, int32_t i, float t, float d, float m)
{
    float u = (float)i * d;
    u = fmaf(m, t, u);
    return fmaf(a, u, acc);
}

/* rows r0.. r0 + nr of x through the panel: acc (nr, NC) */
static void rows_c(const panel *p, const qrows *x, int r0, int nr, float *acc)
{
    for (int i = 0; i < nr; i++) {
        const int8_t *xq = x->q + (size_t)(r0 + i) * (size_t)x->in;
        for (int c = 0; c < NC; c++) {
            float v = 0.0f;
            for (int b = 0; b < p->nb; b++) {
                const int8_t *w = p->q + (size_t)b * PB + 4 * c;
                const float *f = p->f + (size_t)b * SB;
                int32_t dot[2] = {0, 0};
                for (int k = 0; k < 32; k++)
                    dot[k / 16] += (int32_t)w[(k / 4) * 4 * NC + k % 4] * xq[32 * b + k];
                const float *xf = x->f + XT(x, r0 + i, b);
                if (p->sub == 32)
                    v = step(v, xf[3], dot[0] + dot[1], xf[0], f[c], f[2 * NC + c]);
                else
                    for (int h = 0; h < 2; h++)
                        v = step(v, xf[3], dot[h], xf[1 + h], f[h * NC + c], f[(2 + h) * NC + c]);
            }
            acc[i * NC + c] = v;
        }
    }
}

#ifdef Q8_X86
static inline int32_t load4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni,fma")))
#define AVX2_TARGET __attribute__((target("avx2,fma")))

/* MR rows through the panel, 16 columns in a 512-bit register: one function per MR and
 * sub-block, its loops unrolled so that the sums stay in registers. G groups of 4 per sum
 * (8: sub-blocks of 32, 4: of 16), K the sums' first entry in qrows.o / f (0: of 32, 1: of
 * the first 16). */
#define VNNI_HALF(MR, G, H, K)                                                                   \
    {                                                                                            \
        __m512i s[MR];                                                                           \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) s[i] = _mm512_setzero_si512();      \
        _Pragma("GCC unroll 8") for (int g = (H) * (G); g < (H) * (G) + (G); g++)                \
        {                                                                                        \
            __m512i wg = _mm512_xor_si512(_mm512_loadu_si512((const void *)(w + g * 4 * NC)), off); \
            _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) s[i] = _mm512_dpbusd_epi32(     \
                s[i], wg, _mm512_set1_epi32(load4(xq[i] + 32 * b + 4 * g)));                     \
        }                                                                                        \
        __m512 d = _mm512_loadu_ps(f + (H) * NC), m = _mm512_loadu_ps(f + (2 + (H)) * NC);       \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                     \
        {                                                                                        \
            size_t at = XT(x, r0 + i, b) + (K) + (H);                                            \
            __m512i is = _mm512_sub_epi32(s[i], _mm512_set1_epi32(x->o[at]));                    \
            __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(is), d);                                 \
            u = _mm512_fmadd_ps(m, _mm512_set1_ps(x->f[at]), u);                                 \
            v[i] = _mm512_fmadd_ps(_mm512_set1_ps(x->f[at - (K) - (H) + 3]), u, v[i]);           \
        }                                                                                        \
    }
#define VNNI_ROWS(MR, SUB, G, K)                                                                 \
    VNNI_TARGET static void vnni_rows##MR##_##SUB(const panel *p, const qrows *x, int r0,        \
                                                  float *acc)                                    \
    {                                                                                            \
        const __m512i off = _mm512_set1_epi8((char)0x80);                                        \
        __m512 v[MR];                                                                            \
        const int8_t *xq[MR];                                                                    \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                     \
        {                                                                                        \
            v[i] = _mm512_setzero_ps();                                                          \
            xq[i] = x->q + (size_t)(r0 + i) * (size_t)x->in;                                     \
        }                                                                                        \
        for (int b = 0; b < p->nb; b++) {                                                        \
            const int8_t *w = p->q + (size_t)b * PB;                                             \
            const float *f = p->f + (size_t)b * SB;                                              \
            VNNI_HALF(MR, G, 0, K)                                                               \
            if (G == 4)                                                                          \
                VNNI_HALF(MR, G, 1, K)                                                           \
        }                                                                                        \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) _mm512_storeu_ps(acc + i * NC, v[i]); \
    }
VNNI_ROWS(8, 32, 8, 0)
VNNI_ROWS(1, 32, 8, 0)
VNNI_ROWS(8, 16, 4, 1)
VNNI_ROWS(1, 16, 4, 1)

VNNI_TARGET static void rows_vnni(const panel *p, const qrows *x, int r0, int nr, float *acc)
{
    int i = 0;
    for (; i + 8 <= nr; i += 8)
        (p->sub == 32 ? vnni_rows8_32 : vnni_rows8_16)(p, x, r0 + i, acc + i * NC);
    for (; i < nr; i++)
        (p->sub == 32 ? vnni_rows1_32 : vnni_rows1_16)(p, x, r0 + i, acc + i * NC);
}

/* MR rows through 8 columns (half hc of the panel) in a 256-bit register (as VNNI_HALF) */
#define AVX2_HALF(MR, G, H, K)                                                                   \
    {                                                                                            \
        __m256i s[MR];                                                                           \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) s[i] = _mm256_setzero_si256();      \
        _Pragma("GCC unroll 8") for (int g = (H) * (G); g < (H) * (G) + (G); g++)                \
        {                                                                                        \
            __m256i wq = _mm256_loadu_si256((const void *)(w + g * 4 * NC));                     \
            __m256i wa = _mm256_abs_epi8(wq);                                                    \
            _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                 \
            {                                                                                    \
                __m256i sx = _mm256_sign_epi8(_mm256_set1_epi32(load4(xq[i] + 32 * b + 4 * g)), wq); \
                s[i] = _mm256_add_epi32(s[i], _mm256_madd_epi16(_mm256_maddubs_epi16(wa, sx), ones)); \
            }                                                                                    \
        }                                                                                        \
        __m256 d = _mm256_loadu_ps(f + (H) * NC), m = _mm256_loadu_ps(f + (2 + (H)) * NC);       \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                     \
        {                                                                                        \
            size_t at = XT(x, r0 + i, b) + (K) + (H);                                            \
            __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(s[i]), d);                               \
            u = _mm256_fmadd_ps(m, _mm256_set1_ps(x->f[at]), u);                                 \
            v[i] = _mm256_fmadd_ps(_mm256_set1_ps(x->f[at - (K) - (H) + 3]), u, v[i]);           \
        }                                                                                        \
    }
#define AVX2_ROWS(MR, SUB, G, K)                                                                 \
    AVX2_TARGET static void avx2_rows##MR##_##SUB(const panel *p, const qrows *x, int r0,        \
                                                  int hc, float *acc)                            \
    {                                                                                            \
        const __m256i ones = _mm256_set1_epi16(1);                                               \
        __m256 v[MR];                                                                            \
        const int8_t *xq[MR];                                                                    \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                     \
        {                                                                                        \
            v[i] = _mm256_setzero_ps();                                                          \
            xq[i] = x->q + (size_t)(r0 + i) * (size_t)x->in;                                     \
        }                                                                                        \
        for (int b = 0; b < p->nb; b++) {                                                        \
            const int8_t *w = p->q + (size_t)b * PB + 32 * hc;                                   \
            const float *f = p->f + (size_t)b * SB + 8 * hc;                                     \
            AVX2_HALF(MR, G, 0, K)                                                               \
            if (G == 4)                                                                          \
                AVX2_HALF(MR, G, 1, K)                                                           \
        }                                                                                        \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                     \
            _mm256_storeu_ps(acc + i * NC + 8 * hc, v[i]);                                       \
    }
AVX2_ROWS(4, 32, 8, 0)
AVX2_ROWS(1, 32, 8, 0)
AVX2_ROWS(4, 16, 4, 1)
AVX2_ROWS(1, 16, 4, 1)

AVX2_TARGET static void rows_avx2(const panel *p, const qrows *x, int r0, int nr, float *acc)
{
    for (int hc = 0; hc < 2; hc++) {
        int i = 0;
        for (; i + 4 <= nr; i += 4)
            (p->sub == 32 ? avx2_rows4_32 : avx2_rows4_16)(p, x, r0 + i, hc, acc + i * NC);
        for (; i < nr; i++)
            (p->sub == 32 ? avx2_rows1_32 : avx2_rows1_16)(p, x, r0 + i, hc, acc + i * NC);
    }
}
#endif

/* The panel of columns j0.. j0 + NC (those past out: zero) from the hs_qmat; rows, d, m:
 * the thread's buffers of NC × (in + ROW_PAD) bytes and NC × in / 16 floats each. The
 * columns are decoded first, one after the other, then laid out a group at a time (the 16
 * columns' words of a group are 64 contiguous bytes of the panel, where writing a column at
 * a time scattered 4-byte stores 64 bytes apart). Returns the panel's sub-block. */
static int make_panel(const hs_qmat *w, int j0, int8_t *pq, float *pf, int8_t *rows, float *d,
                      float *m)
{
    int in = w->in, nb = in / 32, nd = in / 16, sub = 32;
    size_t stride = (size_t)in + ROW_PAD;
    for (int c = 0; c < NC; c++) {
        int8_t *row = rows + (size_t)c * stride;
        float *dc = d + (size_t)c * (size_t)nd, *mc = m + (size_t)c * (size_t)nd;
        if (j0 + c >= w->out) {
            memset(row, 0, (size_t)in);
            memset(dc, 0, (size_t)nd * sizeof *dc);
            memset(mc, 0, (size_t)nd * sizeof *mc);
            continue;
        }
        const hs_qcol *col = &w->col[j0 + c];
        int s = w->decode_i8(col->src, col->first, row, dc, mc, (size_t)in);
        sub = s == 16 ? 16 : sub;
    }
    for (int b = 0; b < nb; b++) {
        int8_t *pb = pq + (size_t)b * PB;
        for (int g = 0; g < 8; g++)
            for (int c = 0; c < NC; c++)
                memcpy(pb + g * 4 * NC + 4 * c, rows + (size_t)c * stride + 32 * b + 4 * g, 4);
        float *f = pf + (size_t)b * SB;
        for (int c = 0; c < NC; c++) {
            size_t at = (size_t)c * (size_t)nd + 2 * (size_t)b;
            f[c] = d[at];
            f[NC + c] = d[at + 1];
            f[2 * NC + c] = m[at];
            f[3 * NC + c] = m[at + 1];
        }
    }
    return sub;
}

/* A tile's sums acc (nr, NC) into y's columns j0.. j0 + cols: + bias[j], then added to y
 * (add) or stored, each case its own loop. */
static void store_tile(const float *acc, int nr, int cols, const float *bias, float *y,
                       size_t out, int j0, int add)
{
    for (int i = 0; i < nr; i++) {
        const float *a = acc + i * NC;
        float *yr = y + (size_t)i * out + (size_t)j0;
        if (bias && add)
            for (int c = 0; c < cols; c++)
                yr[c] = yr[c] + (a[c] + bias[j0 + c]);
        else if (bias)
            for (int c = 0; c < cols; c++)
                yr[c] = a[c] + bias[j0 + c];
        else if (add)
            for (int c = 0; c < cols; c++)
                yr[c] = yr[c] + a[c];
        else
            memcpy(yr, a, (size_t)cols * sizeof *yr);
    }
}

/* Rows of x run through a panel at a time: their integers stay in cache across the panel */
#define ROWS 64

void hs_q8gemm_run(const hs_qmat *w, const float *x, const float *bias, float *y, int n, int add)
{
    __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
    int in = w->in, out = w->out, nb = in / 32, tiles = (out + NC - 1) / NC;
    size_t nx = (size_t)n * (size_t)in;
    size_t nt = 4 * (size_t)n * (size_t)nb + 1;
    int8_t *xq = malloc(nx ? nx : 1);
    int32_t *xo = malloc(nt * sizeof *xo);
    float *xf = malloc(nt * sizeof *xf);
    float *xa = malloc(((size_t)n * (size_t)nb + 1) * sizeof *xa);
    int32_t *xs = malloc(((size_t)n * 2 * (size_t)nb + 1) * sizeof *xs);
    int nomem = !xq || !xo || !xf || !xa || !xs;
    qrows xr = {xq, xo, xf, in, nb};
    if (!nomem) {
#pragma omp parallel for schedule(static) if (nx >= 65536)
        for (int r = 0; r < n; r++) {
            float *a = xa + (size_t)r * (size_t)nb;
            int32_t *s16 = xs + (size_t)r * 2 * (size_t)nb;
            hs_q8_quantize_row(x + (size_t)r * (size_t)in, in, xq + (size_t)r * (size_t)in, a, s16);
            for (int b = 0; b < nb; b++) {
                size_t at = XT(&xr, r, b);
                int32_t t[3] = {s16[2 * b] + s16[2 * b + 1], s16[2 * b], s16[2 * b + 1]};
                for (int k = 0; k < 3; k++) {
                    xo[at + (size_t)k] = 128 * t[k];
                    xf[at + (size_t)k] = (float)t[k];
                }
                xo[at + 3] = 0;
                xf[at + 3] = a[b];
            }
        }
    }
    int isa = hs_q8gemm_isa();
#pragma omp parallel if (!nomem && tiles > 1 && (size_t)n * (size_t)in * (size_t)out >= 262144)
    {
        int8_t *pq = malloc((size_t)nb * PB + (size_t)NC * ((size_t)in + ROW_PAD));
        float *pf = malloc(((size_t)nb * SB + (size_t)NC * (size_t)in / 8 + ROWS * NC) *
                           sizeof *pf);
        int ok = !nomem && pq && pf;
#pragma omp for schedule(dynamic)
        for (int t = 0; t < tiles; t++) {
            int j0 = t * NC, cols = out - j0 < NC ? out - j0 : NC;
            if (!ok) { /* NaN: the pass fails on non-finite values, as gemm.c's own buffer */
                for (int r = 0; r < n; r++)
                    for (int c = 0; c < cols; c++)
                        y[(size_t)r * (size_t)out + (size_t)(j0 + c)] = NAN;
                continue;
            }
            float *d = pf + (size_t)nb * SB, *m = d + (size_t)NC * (size_t)in / 16;
            float *acc = m + (size_t)NC * (size_t)in / 16;
            panel p = {pq, pf, nb, make_panel(w, j0, pq, pf, pq + (size_t)nb * PB, d, m)};
            for (int r0 = 0; r0 < n; r0 += ROWS) {
                int nr = n - r0 < ROWS ? n - r0 : ROWS;
#ifdef Q8_X86
                if (isa == 2)
                    rows_vnni(&p, &xr, r0, nr, acc);
                else if (isa == 1)
                    rows_avx2(&p, &xr, r0, nr, acc);
                else
#endif
                    rows_c(&p, &xr, r0, nr, acc);
                store_tile(acc, nr, cols, bias, y + (size_t)r0 * (size_t)out, (size_t)out, j0,
                           add);
            }
        }
        free(pq);
        free(pf);
    }
    (void)isa;
    free(xq);
    free(xo);
    free(xf);
    free(xa);
    free(xs);
}
