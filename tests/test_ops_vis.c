/* The attention kernels under every visibility (visibility.h) and the MLP's activations
 * alone or gating, against double-precision computations written out here from their
 * definitions: softmax over the keys a query sees, exactly 0 elsewhere; SiLU, GELU (tanh,
 * erf) and their derivatives by central differences. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/visibility.h"
#include "core/core.h"
#include "nn/ops.h"
#include "testutil.h"

enum { N = 150, H = 3, KV = 1, DH = 8 }; /* three row blocks of the kernels (64 rows each) */

static float uniform(uint32_t *x, float scale)
{
    *x ^= *x << 13, *x ^= *x >> 17, *x ^= *x << 5;
    return (float)((int)(*x % 2001u) - 1000) / scale;
}

/* Query i sees key j under v, from the definitions in visibility.h written out again. */
static int sees(hs_visibility v, int i, int j)
{
    switch (v.kind) {
    case HS_VIS_BIDIRECTIONAL: return 1;
    case HS_VIS_CAUSAL: return j <= i;
    case HS_VIS_SLIDING: return i - v.window < j && j <= i;
    case HS_VIS_PREFIX: return j <= i || j < v.prefix;
    }
    return 0;
}

/* Maps and contexts of one visibility against double precision; the masked cells exactly 0;
 * the fused kernel the same bits as probabilities then context, with a head mask too. */
static void check_visibility(hs_visibility v)
{
    /* d_model 10 is not n_head d_head (24): the kernels read the heads' own width */
    hs_model_config c = {.d_model = 10, .n_head = H, .d_head = DH, .n_kv_head = KV};
    int A = H * DH, W = A + 2 * KV * DH;
    float *qkv = malloc(sizeof(float) * N * W), *probs = malloc(sizeof(float) * H * N * N);
    float *maps = malloc(sizeof(float) * H * N * N), *ctx1 = malloc(sizeof(float) * N * A);
    float *ctx2 = malloc(sizeof(float) * N * A), *ctx3 = malloc(sizeof(float) * N * A);
    double *row = malloc(sizeof(double) * N);
    cr_assert(qkv && probs && maps && ctx1 && ctx2 && ctx3 && row);
    uint32_t x = 2024u;
    for (int i = 0; i < N * W; i++)
        qkv[i] = uniform(&x, 400.0f);
    const float mask[H] = {1.0f, 0.5f, 0.0f};
    cr_assert_eq(hs_op_attn_probs(&c, v, qkv, probs, N), (size_t)-1);
    memcpy(maps, probs, sizeof(float) * H * N * N);
    hs_op_attn_context(&c, v, qkv, maps, ctx1, N, mask); /* scales the copy by the mask */
    size_t bad = 0;
    memset(maps, 0xff, sizeof(float) * H * N * N); /* NaN: every cell must be written */
    cr_assert_eq(hs_op_attn_fused(&c, v, qkv, ctx2, N, mask, maps, &bad), HS_OK);
    cr_assert_eq(bad, (size_t)-1);
    cr_assert_eq(hs_op_attn_fused(&c, v, qkv, ctx3, N, NULL, NULL, &bad), HS_OK);
    cr_assert(!memcmp(ctx1, ctx2, sizeof(float) * N * A), "fused context differs");
    double worst_p = 0, worst_c = 0;
    for (int h = 0; h < H; h++)
        for (int i = 0; i < N; i++) {
            const float *q = qkv + (size_t)i * W + h * DH, *k = qkv + A, *val = qkv + A + KV * DH;
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int e = 0; e < DH; e++)
                    s += (double)q[e] * k[(size_t)j * W + e];
                row[j] = sees(v, i, j) ? s / sqrt((double)DH) : -INFINITY;
                mx = row[j] > mx ? row[j] : mx;
            }
            for (int j = 0; j < N; j++)
                sum += row[j] = exp(row[j] - mx);
            for (int j = 0; j < N; j++) {
                float got = maps[((size_t)h * N + i) * N + j];
                cr_assert_eq(got, probs[((size_t)h * N + i) * N + j], "maps differ");
                if (!sees(v, i, j))
                    cr_assert(got == 0.0f, "head %d (%d, %d) = %g, not seen", h, i, j, got);
                worst_p = fmax(worst_p, fabs(got - row[j] / sum));
            }
            for (int e = 0; e < DH; e++) {
                double s = 0;
                for (int j = 0; j < N; j++)
                    s += row[j] / sum * val[(size_t)j * W + e];
                worst_c = fmax(worst_c, fabs(ctx3[(size_t)i * A + h * DH + e] - s));
                worst_c = fmax(worst_c, fabs(ctx2[(size_t)i * A + h * DH + e] - mask[h] * s));
            }
        }
    cr_expect_leq(worst_p, 1e-6, "kind %d: probabilities off by %g", (int)v.kind, worst_p);
    cr_expect_leq(worst_c, 1e-5, "kind %d: contexts off by %g", (int)v.kind, worst_c);
    free(qkv), free(probs), free(maps), free(ctx1), free(ctx2), free(ctx3), free(row);
}

Test(ops_vis, attention_sees_only_the_visible_keys)
{
    check_visibility(hs_vis_bidirectional());
    check_visibility(hs_vis_causal());
    check_visibility(hs_vis_sliding(1));
    check_visibility(hs_vis_sliding(20));  /* a block's first keys fall out of the window */
    check_visibility(hs_vis_sliding(100)); /* wider than a block */
    check_visibility(hs_vis_prefix(70));   /* the prefix ends inside the second block */
    check_visibility(hs_vis_prefix(1000)); /* every key */
}

Test(ops_vis, softmax_rows_zero_what_a_query_does_not_see)
{
    /* row i of ones: 1 / (number of keys seen) on those keys, 0 elsewhere */
    enum { n = 5 };
    hs_visibility vs[] = {hs_vis_sliding(2), hs_vis_prefix(3)};
    for (int t = 0; t < 2; t++) {
        float s[n * n];
        for (int k = 0; k < n * n; k++)
            s[k] = 1.0f;
        hs_op_softmax_rows(s, n, vs[t]);
        for (int i = 0; i < n; i++) {
            int seen = 0;
            for (int j = 0; j < n; j++)
                seen += sees(vs[t], i, j);
            for (int j = 0; j < n; j++)
                cr_assert_float_eq(s[i * n + j], sees(vs[t], i, j) ? 1.0f / (float)seen : 0.0f,
                                   1e-7, "vis %d (%d, %d)", t, i, j);
        }
    }
}

/* ---- activations ------------------------------------------------------------------ */

static long double act_ld(hs_activation a, long double x)
{
    if (a == HS_ACT_SILU)
        return x / (1.0L + expl(-x));
    if (a == HS_ACT_GELU_ERF)
        return 0.5L * x * (1.0L + erfl(x / sqrtl(2.0L)));
    long double k = sqrtl(2.0L / 3.14159265358979323846L);
    return 0.5L * x * (1.0L + tanhl(k * (x + 0.044715L * x * x * x)));
}

/* act alone and gating (act(g) u), forward and backward, on gates from -12 to 12 against
 * long double and its central differences. */
static void check_activation(hs_activation a)
{
    enum { F = 241 };
    static float g[F], y[F], dy[F], gu[2 * F], da[F], dgu[2 * F], yg[F];
    for (int k = 0; k < F; k++) {
        g[k] = (float)(-12.0 + 24.0 * k / (F - 1));
        gu[k] = g[k];
        gu[F + k] = (float)(1.25 - 0.01 * k);
        da[k] = dy[k] = 0.75f;
    }
    hs_op_gelu(g, y, F, a);
    hs_op_gelu_back(g, dy, F, a);
    hs_op_glu(gu, yg, 1, F, a);
    hs_op_glu_back(gu, da, dgu, 1, F, a);
    for (int k = 0; k < F; k++) {
        long double x = g[k], u = gu[F + k], h = 1e-4L * (fabsl(x) > 1 ? fabsl(x) : 1);
        long double f = act_ld(a, x), df = (act_ld(a, x + h) - act_ld(a, x - h)) / (2 * h);
        double tol = 2e-6 * (1 + fabs((double)f)), dtol = 1e-5 * (1 + fabs((double)df));
        cr_expect(fabs(y[k] - (double)f) <= tol, "act %d (%g) = %.9g, want %.9Lg", (int)a,
                  (double)x, (double)y[k], f);
        cr_expect(fabs(dy[k] - 0.75 * (double)df) <= dtol, "act' %d (%g) = %.9g, want %.9Lg",
                  (int)a, (double)x, (double)dy[k], 0.75L * df);
        cr_expect(fabs(yg[k] - (double)(f * u)) <= tol * 2, "glu %d (%g)", (int)a, (double)x);
        cr_expect(fabs(dgu[k] - (double)(0.75L * u * df)) <= dtol * 2, "glu d gate %d (%g) = "
                  "%.9g, want %.9Lg", (int)a, (double)x, (double)dgu[k], 0.75L * u * df);
        cr_expect(fabs(dgu[F + k] - (double)(0.75L * f)) <= tol, "glu d up %d (%g)", (int)a,
                  (double)x);
    }
}

Test(ops_vis, activations_alone_and_gating_match_their_definitions)
{
    check_activation(HS_ACT_SILU);
    check_activation(HS_ACT_GELU_TANH);
    check_activation(HS_ACT_GELU_ERF);
}
