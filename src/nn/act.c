/* The MLP's activations (see ops.h): GELU in its tanh and erf forms, SiLU, each alone or
 * gating (act(gate) * up), and their derivatives for the backward pass. Split from ops.c,
 * whose exponential (fastmath.h) they share. */
#include <math.h>
#include <stddef.h>

#include "nn/fastmath.h"
#include "nn/ops.h"

HS_CLONES static void gelu_tanh(const float *x, float *y, size_t count)
{
    const float k = 0.79788456080286536f; /* sqrt(2/pi) */
#pragma omp simd
    for (size_t i = 0; i < count; i++) {
        float v = x[i];
        float u = k * (v + 0.044715f * v * v * v);
        y[i] = v - v / (exp_fast(2.0f * u) + 1.0f); /* 0.5 v (1 + tanh u) */
    }
}

/* dy *= GELU'(x), tanh form: 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2), t = tanh u.
 * With E = e^{2u} and s = 1 / (E + 1): 1 + t = 2 E s and 1 - t^2 = 4 E s^2, neither a
 * difference, so the negative tail keeps its relative accuracy (1 + t from t itself is 0
 * past x = -5 in float); 2u is capped at 40, where 1 + t is 2 in float. */
HS_CLONES static void gelu_tanh_back(const float *x, float *dy, size_t count)
{
    const float k = 0.79788456080286536f;
#pragma omp simd
    for (size_t i = 0; i < count; i++) {
        float v = x[i];
        float u2 = 2.0f * k * (v + 0.044715f * v * v * v);
        float e = exp_fast(u2 < 40.0f ? u2 : 40.0f), s = 1.0f / (e + 1.0f), es = e * s;
        float dg = es + 2.0f * v * es * s * k * (1.0f + 0.134145f * v * v);
        dy[i] *= dg;
    }
}

/* 0.5 x (1 + erf(x / sqrt 2)) without a libm call, so the loop vectorises. With z = x / sqrt 2
 * and a = |z|: 1 + erf(z) = 1 + z P(z^2) for a < 1; beyond, erfc(a) = exp(-a^2) Q(1/a), Q a
 * fit of the scaled complementary error function exp(a^2) erfc(a) on [1, 9] (in s, 1/a
 * mapped onto [-1, 1], where its coefficients are small and Horner's rule stable), giving
 * 2 - erfc(a) for z > 0 and erfc(a) itself for z < 0 (no cancellation in 1 + erf, so the
 * negative tail keeps its relative accuracy); erfc(9) = 4e-37, taken as 0 past 9. Fits and
 * their float32 error: fixtures/ref/fit_erf.py (absolute error of GELU at most 3.8e-7 on
 * [-12, 12], as for 1 + erff; relative 1.2e-6 where |GELU| > 1e-3, against 5e-5 for 1 + erff,
 * most of it the rounding of z itself, which erfc's slope -2a amplifies). */
static const float ERF_SMALL[7] = {
    1.128379166e+00f, -3.761262557e-01f, 1.128358228e-01f, -2.685369186e-02f,
    5.188099769e-03f, -8.008193336e-04f, 7.847262432e-05f};
static const float ERFCX_LARGE[12] = { /* in s = 9/4 (1/a) - 5/4, on [-1, 1] */
    2.785600958e-01f, 1.808104956e-01f, -3.568687398e-02f, 3.046580873e-03f,
    1.681155373e-03f, -1.169169403e-03f, 4.292798317e-04f, -9.111032693e-05f,
    -2.231119771e-05f, 4.150299551e-05f, -1.569789896e-05f, -3.754861823e-07f};

/* 1 + erf(z), inlined into the cloned kernels below so that it vectorises with each */
static inline float one_plus_erf(float z)
{
    const float *P = ERF_SMALL, *Q = ERFCX_LARGE;
    float a = fabsf(z), u = z * z;
    /* Horner's rule written out: a loop over the coefficients would not vectorise */
    float p = ((((((P[6] * u + P[5]) * u + P[4]) * u + P[3]) * u + P[2]) * u + P[1]) * u + P[0]);
    float ac = a < 1.0f ? 1.0f : a > 9.0f ? 9.0f : a, s = 2.25f / ac - 1.25f;
    float q = Q[11] * s + Q[10];
    q = ((((q * s + Q[9]) * s + Q[8]) * s + Q[7]) * s + Q[6]) * s + Q[5];
    q = ((((q * s + Q[4]) * s + Q[3]) * s + Q[2]) * s + Q[1]) * s + Q[0];
    float e = exp_fast(-(ac * ac)) * q; /* erfc(a) */
    e = a >= 9.0f ? 0.0f : e;
    return a < 1.0f ? 1.0f + z * p : z > 0.0f ? 2.0f - e : e;
}

HS_CLONES static void gelu_erf(const float *x, float *y, size_t count)
{
#pragma omp simd
    for (size_t i = 0; i < count; i++) {
        float v = x[i];
        y[i] = 0.5f * v * one_plus_erf(v * 0.70710678118654752f);
    }
}

/* dy *= GELU'(x), erf form: 0.5 (1 + erf(x / sqrt 2)) + x phi(x), phi(x) = e^{-x^2/2} / sqrt(2 pi). */
HS_CLONES static void gelu_erf_back(const float *x, float *dy, size_t count)
{
#pragma omp simd
    for (size_t i = 0; i < count; i++) {
        float v = x[i];
        float dg = 0.5f * one_plus_erf(v * 0.70710678118654752f) +
                   v * exp_fast(-0.5f * v * v) * 0.39894228040143268f;
        dy[i] *= dg;
    }
}

/* kernel(x, y, len) over count elements in chunks of 4096, the chunks on the threads */
static void by_chunks(void (*kernel)(const float *, float *, size_t), const float *x, float *y,
                      size_t count)
{
    const size_t chunk = 4096;
    size_t chunks = (count + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (count >= PAR_MIN)
    for (size_t c = 0; c < chunks; c++) {
        size_t lo = c * chunk, len = count - lo < chunk ? count - lo : chunk;
        kernel(x + lo, y + lo, len);
    }
}

/* y = SiLU(x) = x sigmoid(x), with exp_fast (see silu_mul below) */
HS_CLONES static void silu(const float *x, float *y, size_t count)
{
#pragma omp simd
    for (size_t i = 0; i < count; i++)
        y[i] = x[i] / (1.0f + exp_fast(-x[i]));
}

/* dy *= SiLU'(x) = s (1 + x (1 - s)), s = sigmoid(x) */
HS_CLONES static void silu_back(const float *x, float *dy, size_t count)
{
#pragma omp simd
    for (size_t i = 0; i < count; i++) {
        float s = 1.0f / (1.0f + exp_fast(-x[i]));
        dy[i] *= s * (1.0f + x[i] * (1.0f - s));
    }
}

/* y = ReLU(x) = max(x, 0) (T5 v1.0) */
HS_CLONES static void relu(const float *x, float *y, size_t count)
{
#pragma omp simd
    for (size_t i = 0; i < count; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* dy *= ReLU'(x): 1 where x > 0, else 0 */
HS_CLONES static void relu_back(const float *x, float *dy, size_t count)
{
#pragma omp simd
    for (size_t i = 0; i < count; i++)
        dy[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

typedef void (*act_kernel)(const float *, float *, size_t);

static act_kernel forward_kernel(hs_activation act)
{
    if (act == HS_ACT_RELU)
        return relu;
    return act == HS_ACT_GELU_ERF ? gelu_erf : act == HS_ACT_SILU ? silu : gelu_tanh;
}

static act_kernel back_kernel(hs_activation act)
{
    if (act == HS_ACT_RELU)
        return relu_back;
    return act == HS_ACT_GELU_ERF ? gelu_erf_back : act == HS_ACT_SILU ? silu_back
                                                                        : gelu_tanh_back;
}

void hs_op_gelu(const float *x, float *y, size_t count, hs_activation act)
{
    by_chunks(forward_kernel(act), x, y, count);
}

void hs_op_gelu_back(const float *x, float *dy, size_t count, hs_activation act)
{
    by_chunks(back_kernel(act), x, dy, count);
}

/* y = SiLU(g) u = g / (1 + e^-g) u, exp_fast so that the loop vectorises (e^-g saturating
 * at 3e38 gives 0 for the far negative gates, 0 gives g for the far positive ones) */
HS_CLONES static void silu_mul(const float *g, const float *u, float *y, int count)
{
#pragma omp simd
    for (int i = 0; i < count; i++)
        y[i] = g[i] / (1.0f + exp_fast(-g[i])) * u[i];
}

/* SiLU(g) u's backward, a = d loss / d (SiLU(g) u): dg = a u s (1 + g (1 - s)), du = a SiLU(g),
 * s = sigmoid(g) */
HS_CLONES static void silu_mul_back(const float *g, const float *u, const float *a, float *dg,
                                    float *du, int count)
{
#pragma omp simd
    for (int i = 0; i < count; i++) {
        float s = 1.0f / (1.0f + exp_fast(-g[i]));
        dg[i] = a[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
        du[i] = a[i] * g[i] * s;
    }
}

void hs_op_swiglu(const float *gu, float *y, int rows, int f)
{
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)f >= PAR_MIN)
    for (int i = 0; i < rows; i++) {
        const float *g = gu + (size_t)i * 2 * (size_t)f;
        silu_mul(g, g + f, y + (size_t)i * (size_t)f, f);
    }
}

void hs_op_swiglu_back(const float *gu, const float *da, float *dgu, int rows, int f)
{
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)f >= PAR_MIN)
    for (int i = 0; i < rows; i++) {
        const float *g = gu + (size_t)i * 2 * (size_t)f;
        float *dg = dgu + (size_t)i * 2 * (size_t)f;
        silu_mul_back(g, g + f, da + (size_t)i * (size_t)f, dg, dg + f, f);
    }
}


void hs_op_glu(const float *gu, float *y, int rows, int f, hs_activation act)
{
    if (act == HS_ACT_SILU) { /* the fused kernel of the Llama families */
        hs_op_swiglu(gu, y, rows, f);
        return;
    }
    act_kernel k = forward_kernel(act);
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)f >= PAR_MIN)
    for (int i = 0; i < rows; i++) {
        const float *g = gu + (size_t)i * 2 * (size_t)f, *u = g + f;
        float *yi = y + (size_t)i * (size_t)f;
        k(g, yi, (size_t)f);
        for (int j = 0; j < f; j++)
            yi[j] *= u[j];
    }
}

void hs_op_glu_back(const float *gu, const float *da, float *dgu, int rows, int f,
                    hs_activation act)
{
    if (act == HS_ACT_SILU) {
        hs_op_swiglu_back(gu, da, dgu, rows, f);
        return;
    }
    act_kernel k = forward_kernel(act), kb = back_kernel(act);
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)f >= PAR_MIN)
    for (int i = 0; i < rows; i++) {
        const float *g = gu + (size_t)i * 2 * (size_t)f, *u = g + f;
        const float *a = da + (size_t)i * (size_t)f;
        float *dg = dgu + (size_t)i * 2 * (size_t)f, *du = dg + f;
        for (int j = 0; j < f; j++)
            dg[j] = a[j] * u[j];
        kb(g, dg, (size_t)f); /* d gate = da up act'(gate) */
        k(g, du, (size_t)f);  /* d up = da act(gate) */
        for (int j = 0; j < f; j++)
            du[j] *= a[j];
    }
}
