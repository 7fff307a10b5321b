/* The machine's arithmetic roofs, measured in the run: the most float32 multiply-adds a thread
 * can issue (independent FMA chains in registers, no memory traffic) and the most 8-bit
 * multiply-adds (VNNI's vpdpbusd, what llama.cpp's quantised kernels use on this CPU).
 *
 * A forward pass's products cost 2·n·(the weights of its linear layers) FLOPs whatever the
 * implementation, so FLOPs / (roof × threads) is the shortest time any float32 pass can take:
 * the floor the tables beside it compare llama.cpp's and PyTorch's times with. Each kernel
 * keeps 12 accumulators (enough to cover the FMA latency × ports of current x86 cores) and
 * takes the widest vectors the CPU runs at full rate; the roof is the best variant's rate. */
#include <stdio.h>

#include "bench.h"

#define ROOF_ITERS 20000000L /* multiply-add rounds a thread a timing (about 0.1 s) */
#define ROOF_REPS 3

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* A kernel: 12 independent chains of OP(acc, x, y) on VEC registers, `rounds` times (fully
 * unrolled: the chains stay in registers); the chains folded by FOLD and returned through
 * RET, which keeps them live. */
#define ROOF_KERNEL(NAME, TARGET, VEC, INIT, X, Y, OP, FOLD, RET)                              \
    __attribute__((target(TARGET))) static float NAME(long rounds)                           \
    {                                                                                        \
        VEC a[12], x = X, y = Y;                                                             \
        for (int i = 0; i < 12; i++)                                                         \
            a[i] = INIT(i);                                                                  \
        for (long r = 0; r < rounds; r++) {                                                  \
            _Pragma("GCC unroll 12") for (int i = 0; i < 12; i++) a[i] = OP(a[i], x, y);     \
        }                                                                                    \
        for (int i = 1; i < 12; i++)                                                         \
            a[0] = FOLD(a[0], a[i]);                                                         \
        return RET(a[0]);                                                                    \
    }

__attribute__((target("avx2"))) static inline float first_256(__m256 v)
{
    return _mm_cvtss_f32(_mm256_castps256_ps128(v));
}

/* the 8-bit sums wrap: folded by bits, no signed overflow */
__attribute__((target("avx512f"))) static inline float bits_512(__m512i v)
{
    return (float)(_mm512_reduce_or_epi32(v) & 0xFFFF);
}

#define SET_PS512(i) _mm512_set1_ps((float)(i))
#define SET_PS256(i) _mm256_set1_ps((float)(i))
#define SET_EPI512(i) _mm512_set1_epi32(i)

/* 16-lane FMAs: 384 FLOPs a round */
ROOF_KERNEL(fma_512, "avx512f", __m512, SET_PS512, _mm512_set1_ps(1.0000001f),
            _mm512_set1_ps(-1e-7f), _mm512_fmadd_ps, _mm512_add_ps, _mm512_reduce_add_ps)
/* 8-lane FMAs: 192 FLOPs a round */
ROOF_KERNEL(fma_256, "avx2,fma", __m256, SET_PS256, _mm256_set1_ps(1.0000001f),
            _mm256_set1_ps(-1e-7f), _mm256_fmadd_ps, _mm256_add_ps, first_256)
/* vpdpbusd: 12 × 64 8-bit multiply-adds (2 ops each) a round */
ROOF_KERNEL(dot8_512, "avx512f,avx512vnni", __m512i, SET_EPI512, _mm512_set1_epi8(3),
            _mm512_set1_epi8(-2), _mm512_dpbusd_epi32, _mm512_xor_si512, bits_512)

static int has_avx512(void)
{
    return __builtin_cpu_supports("avx512f");
}

static int has_avx2_fma(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static int has_vnni512(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
}

typedef struct variant {
    int (*supported)(void);
    float (*run)(long rounds);
    double ops_a_round; /* FLOPs (float32) or ops (8-bit: a multiply-add is 2) */
    int int8;
} variant;

static const variant variants[] = {
    {has_avx512, fma_512, 12 * 16 * 2, 0},
    {has_avx2_fma, fma_256, 12 * 8 * 2, 0},
    {has_vnni512, dot8_512, 12 * 64 * 2, 1},
};
#define N_VARIANTS (sizeof variants / sizeof variants[0])

/* G ops a second of variant v on `threads` threads together (median of ROOF_REPS timings
 * after one warm-up); 0 when it cannot run here. */
static double variant_rate(const variant *v, int threads)
{
    __builtin_cpu_init();
    if (!v->supported())
        return 0;
    double t[ROOF_REPS];
    volatile float sink = 0;
    for (int r = -1; r < ROOF_REPS; r++) {
        double t0 = bench_now();
#pragma omp parallel num_threads(threads)
        {
            float s = v->run(ROOF_ITERS);
#pragma omp atomic
            sink += s;
        }
        if (r >= 0)
            t[r] = bench_now() - t0;
    }
    (void)sink;
    double secs = bench_median(t, ROOF_REPS);
    return v->ops_a_round * ROOF_ITERS * threads / secs / 1e9;
}

static double best_rate(int threads, int int8)
{
    double best = 0;
    for (size_t i = 0; i < N_VARIANTS; i++)
        if (variants[i].int8 == int8) {
            double g = variant_rate(&variants[i], threads);
            best = g > best ? g : best;
        }
    return best;
}
#else
static double best_rate(int threads, int int8)
{
    (void)threads;
    (void)int8;
    return 0;
}
#endif

#define ROOF_KEPT 256 /* thread counts whose roofs a run keeps */

/* The roof at `threads` (int8: the 8-bit one), measured once a run: the forward table and
 * the stored table hold their times against the same number. */
static double roof(int threads, int int8)
{
    static double kept[2][ROOF_KEPT + 1]; /* 0: not measured yet */
    threads = threads < 1 ? 1 : threads;
    if (threads > ROOF_KEPT)
        return best_rate(threads, int8);
    if (kept[int8][threads] == 0) {
        double g = best_rate(threads, int8);
        kept[int8][threads] = g > 0 ? g : -1; /* -1: cannot be measured here */
    }
    return kept[int8][threads] > 0 ? kept[int8][threads] : 0;
}

void bench_print_roofs(const int *thr, int n_thr, double *fp32)
{
    for (int i = 0; i < n_thr; i++)
        fp32[i] = roof(thr[i], 0);
    if (fp32[0] <= 0) {
        printf("arithmetic roofs: not measured on this CPU (x86 with AVX2 or AVX-512 only)\n");
        return;
    }
    printf("arithmetic roofs (registers only, no memory):");
    for (int i = 0; i < n_thr; i++) {
        double i8 = roof(thr[i], 1);
        printf("%s %d thread%s: float32 FMA %.1f GFLOP/s", i ? ";" : "", thr[i],
               thr[i] > 1 ? "s" : "", fp32[i]);
        if (i8 > 0)
            printf(", 8-bit dot (VNNI) %.1f GOP/s", i8);
    }
    printf("\n");
}
