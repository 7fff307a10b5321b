/* The fast float exponential and the kernels' multi-versioning shared by the kernels of
 * ops.c and act.c; private to src/nn. */
#ifndef HEADSCOPE_FASTMATH_H
#define HEADSCOPE_FASTMATH_H

#include <stdint.h>

/* Loops over fewer elements than this stay on one thread (a parallel region costs a few
 * microseconds). */
#define PAR_MIN 32768

/* The elementwise kernels are compiled three times on x86-64 GCC, for the baseline, the
 * x86-64-v3 level (AVX2, FMA: Intel Haswell and AMD Zen and later) and the x86-64-v4 level
 * (AVX-512: Intel Skylake-SP and AMD Zen 4 and later; half the time of v3 for the GELUs),
 * and the loader picks one by the CPU's features. Each element's arithmetic is the same in
 * all three (no contraction into FMA under -std=c11); the sums of softmax and of the norms
 * (in double) add their lanes in another order. HS_CLONES_NO_V4 leaves the AVX-512 one
 * out: the unit tests' second build, which runs the AVX2 kernels on a machine that has
 * AVX-512. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(HS_NO_CLONES)
#ifdef HS_CLONES_NO_V4
#define HS_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define HS_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
#else
#define HS_CLONES
#endif

/* e^x in float without a libm call or a branch, so loops of it vectorise: x = k ln2 + r with
 * |r| <= ln2/2, e^r by its Taylor polynomial to r^7 (truncation < 6e-9 relative), 2^k put
 * into the exponent bits. Relative error about 2 ulp; 0 below -87.3 (where expf is
 * subnormal); saturates at e^88.3 (3e38) above; NaN for NaN. The clamp sends NaN to -87.3,
 * so that k always converts to an int (a NaN there is undefined behaviour, which the
 * fuzzers' UBSan caught on a model with NaN weights), and the NaN is put back at the end. */
static inline float exp_fast(float x)
{
    const float log2e = 1.44269504088896341f, ln2_hi = 0.693145751953125f,
                ln2_lo = 1.42860682030941723e-6f;
    const float round = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float xc = x > -87.3f ? x : -87.3f;
    xc = xc > 88.3f ? 88.3f : xc;
    float k = (xc * log2e + round) - round;
    float r = (xc - k * ln2_hi) - k * ln2_lo;
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    union { uint32_t u; float f; } s = {.u = (uint32_t)((int32_t)k + 127) << 23};
    float y = p * s.f;
    return x < -87.3f ? 0.0f : x == x ? y : x;
}

#endif
