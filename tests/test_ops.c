/* Kernels of src/nn/ops.c and src/core/gemm.c that no golden model covers yet (RMSNorm, gated SiLU, rotary
 * embeddings), each against values worked out by hand from its definition. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "headscope/version.h"
#include "nn/ops.h"
#include "testutil.h"

/* The next value of a xorshift32 sequence (state *x), an integer in -1000..1000 divided by
 * scale: operands whose products round, the same on every machine. */
static float uniform(uint32_t *x, float scale)
{
    *x ^= *x << 13, *x ^= *x >> 17, *x ^= *x << 5;
    return (float)((int)(*x % 2001u) - 1000) / scale;
}

#define NEAR(got, want) cr_assert(fabs((double)(got) - (want)) < 1e-6, "%.9g, want %.9g", (double)(got), (double)(want))

Test(ops, rmsnorm_divides_by_the_root_mean_square)
{
    /* row (3, 4): mean of squares 12.5, rms sqrt(12.5 + 0.5) = sqrt(13); w = (1, 2)
     * row (0, 0): 0 / sqrt(0.5) = 0 */
    const float x[4] = {3, 4, 0, 0}, w[2] = {1, 2};
    float y[4];
    hs_op_rmsnorm(x, w, y, NULL, NULL, 2, 2, 0.5f);
    NEAR(y[0], 3 / sqrt(13.0));
    NEAR(y[1], 8 / sqrt(13.0));
    NEAR(y[2], 0);
    NEAR(y[3], 0);
}

Test(ops, swiglu_is_gate_sigmoid_gate_times_up)
{
    /* SiLU(0) = 0; SiLU(ln 3) = ln 3 * 3/4 (sigmoid(ln 3) = 3/4); SiLU(-ln 3) = -ln 3 / 4;
     * one row [gate | up] */
    const float gu[6] = {0.0f, (float)log(3.0), (float)-log(3.0), 5, 2, -4};
    float y[3];
    hs_op_swiglu(gu, y, 1, 3);
    NEAR(y[0], 0);
    NEAR(y[1], (double)(float)log(3.0) * 0.75 * 2);
    NEAR(y[2], (double)(float)-log(3.0) * 0.25 * -4);
}

/* The gated MLP's backward against central differences of SiLU(g) u in long double (expl;
 * step 1e-4 relative), on rows [gate | up] with gates from -30 to 30, the forward's values
 * against the same function; d loss / d out = a per element. */
static long double silu_ld(long double g) { return g / (1.0L + expl(-g)); }

Test(ops, swiglu_backward_matches_central_differences)
{
    enum { R = 3, F = 401 };
    static float gu[R * 2 * F], a[R * F], dgu[R * 2 * F], y[R * F];
    for (int i = 0; i < R; i++)
        for (int k = 0; k < F; k++) {
            gu[i * 2 * F + k] = (float)(-30.0 + 60.0 * k / (F - 1)) + 0.01f * (float)i;
            gu[i * 2 * F + F + k] = (float)(1.5 - 0.01 * k);
            a[i * F + k] = (float)(i + 1) * 0.5f;
        }
    hs_op_swiglu(gu, y, R, F);
    hs_op_swiglu_back(gu, a, dgu, R, F);
    for (int i = 0; i < R; i++)
        for (int k = 0; k < F; k++) {
            long double g = gu[i * 2 * F + k], u = gu[i * 2 * F + F + k], ak = a[i * F + k];
            long double h = 1e-4L * (fabsl(g) > 1 ? fabsl(g) : 1);
            double want_y = (double)(silu_ld(g) * u);
            double want_dg = (double)(ak * u * (silu_ld(g + h) - silu_ld(g - h)) / (2 * h));
            double want_du = (double)(ak * silu_ld(g));
            cr_assert(fabs(y[i * F + k] - want_y) <= 1e-6 * fmax(1.0, fabs(want_y)),
                      "SiLU(%.7g) * %.7g = %.9g, want %.9g", (double)g, (double)u,
                      (double)y[i * F + k], want_y);
            cr_assert(fabs(dgu[i * 2 * F + k] - want_dg) <= 1e-6 * fmax(1.0, fabs(want_dg)),
                      "d gate at %.7g: %.9g, want %.9g", (double)g, (double)dgu[i * 2 * F + k],
                      want_dg);
            cr_assert(fabs(dgu[i * 2 * F + F + k] - want_du) <= 1e-6 * fmax(1.0, fabs(want_du)),
                      "d up at %.7g: %.9g, want %.9g", (double)g,
                      (double)dgu[i * 2 * F + F + k], want_du);
        }
}

Test(ops, rotary_turns_the_rotated_pairs_and_leaves_the_rest)
{
    /* 2 rows (positions 0 and 1), 2 heads of 6 dims, 4 rotated: pairs (0, 2) at angle
     * p * 4^0 = p and (1, 3) at p * 4^(-2/4) = p / 2; dims 4, 5 pass. Position 0 is the
     * identity. Position 1: (a, b) = (1, 0) turns to (cos 1, sin 1); (0, 1) by 0.5 turns
     * to (-sin 0.5, cos 0.5). */
    float x[24];
    for (int i = 0; i < 24; i++)
        x[i] = (float)(i + 1);
    const float row1[6] = {1, 0, 0, 1, 7, 8};
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 6; k++)
            x[12 + 6 * h + k] = row1[k];
    const double inv[2] = {1.0, 0.5}; /* base 4: 4^0, 4^(-2/4) */
    hs_op_rotary(x, 2, 2, 6, 12, 4, inv, 0, 0);
    for (int i = 0; i < 12; i++)
        NEAR(x[i], i + 1);
    const double c1 = 0.5403023058681398, s1 = 0.8414709848078965;
    const double ch = 0.8775825618903728, sh = 0.479425538604203;
    for (int h = 0; h < 2; h++) {
        const float *r = x + 12 + 6 * h;
        NEAR(r[0], c1);
        NEAR(r[2], s1);
        NEAR(r[1], -sh);
        NEAR(r[3], ch);
        NEAR(r[4], 7);
        NEAR(r[5], 8);
    }
    /* pos0 shifts the positions: row 0 at position 1 turns as row 1 did */
    float y[6] = {1, 0, 0, 1, 7, 8};
    hs_op_rotary(y, 1, 1, 6, 6, 4, inv, 1, 0);
    NEAR(y[0], c1);
    NEAR(y[3], ch);
}

/* The scaled turn (longrope's attention factor s): s times the plain turn; scale 1 is
 * hs_op_rotary bit for bit; the inverse is the transpose, so forward then inverse gives s^2 x. */
Test(ops, rotary_scaled_is_the_turn_times_the_scale)
{
    const double inv[2] = {1.0, 0.5};
    float a[6] = {1, 0, 0, 1, 7, 8}, b[6], c[6], x0[6];
    memcpy(b, a, sizeof a);
    memcpy(c, a, sizeof a);
    memcpy(x0, a, sizeof a);
    hs_op_rotary(a, 1, 1, 6, 6, 4, inv, 1, 0);
    hs_op_rotary_scaled(b, 1, 1, 6, 6, 4, inv, 1.0, 1, 0);
    cr_expect_arr_eq(a, b, sizeof a);
    hs_op_rotary_scaled(c, 1, 1, 6, 6, 4, inv, 1.5, 1, 0);
    NEAR(c[0], 1.5 * 0.5403023058681398);  /* 1.5 (cos 1) */
    NEAR(c[2], 1.5 * 0.8414709848078965);  /* 1.5 (sin 1) */
    NEAR(c[1], -1.5 * 0.479425538604203);  /* 1.5 (-sin 0.5) */
    NEAR(c[3], 1.5 * 0.8775825618903728);  /* 1.5 (cos 0.5) */
    NEAR(c[4], 7);                         /* past the rotated dimensions: untouched */
    hs_op_rotary_scaled(c, 1, 1, 6, 6, 4, inv, 1.5, 1, 1);
    for (int k = 0; k < 4; k++)
        NEAR(c[k], 2.25 * x0[k]);
}

/* GELU with erf (BERT): x/2 (1 + erf(x / sqrt 2)) against libm's double-precision erfc
 * (glibc, an implementation independent of the kernel's fitted polynomials) on a dense grid
 * of [-12, 12], both branches of the kernel (|x| / sqrt 2 below and above 1 and past 4), and
 * against hand values: GELU(0) = 0, GELU(x) - GELU(-x) = x. The bound is float32's, in units
 * of 2^-24 relative: a few roundings, amplified up to erf(1) / erfc(1) = 5.4 times by the
 * cancellation in 1 + erf(z) just above z = -1 (20 units), plus the rounding of z = x / sqrt 2
 * itself carried through erfc, whose logarithmic slope is -2a (a = |z|): 2a^2 units, with a
 * margin (4a^2). The old 1 + erff(z) failed it on the negative side (5e-5 relative at
 * x = -3.4, 100% past x = -5.5). */
Test(ops, gelu_erf_matches_libm_double)
{
    enum { N = 24001 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(-12.0 + 24.0 * i / (N - 1));
    hs_op_gelu(x, y, N, HS_ACT_GELU_ERF);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double v = x[i], want = 0.5 * v * erfc(-v / sqrt(2.0));
        double a = fabs(v) / sqrt(2.0);
        double tol = fabs(want) * ldexp(20.0 + 4.0 * a * a, -24) + 1e-37;
        double e = fabs((double)y[i] - want);
        worst = e / tol > worst ? e / tol : worst;
        cr_assert(e <= tol, "GELU(%.7g) = %.9g, want %.9g", v, (double)y[i], want);
    }
    cr_log_info("worst error %.2f of the bound", worst);
    const float h[4] = {0.0f, 1.0f, -1.0f, 2.5f};
    float g[4];
    hs_op_gelu(h, g, 4, HS_ACT_GELU_ERF);
    NEAR(g[0], 0);
    NEAR(g[1] - g[2], 1.0);
    NEAR(g[1], 0.8413447460685429);
}

/* GELU's derivative, both forms, against central differences of the function itself in long
 * double (erfcl, expl; step 1e-5: truncation ~1e-11, rounding ~1e-14): the derivative's
 * formula is not taken from the code. The kernel multiplies dy in place: dy = 1, then dy = 3
 * (three times the derivative). Bounds: float rounding of terms of size ~1 (5e-7 absolute),
 * and 1e-4 relative where |GELU'| < 1e-3 (the tails, down to 1e-30 at x = -12; taking
 * 1 + tanh u as 1 + t gave 0 there past x = -5); below 1e-34 0 will do (the tanh form's
 * e^{2u} is 0 in float past 2u = -87.3). */
static long double gelu_ld(long double x, int erf_form)
{
    /* 1 + erf(z) = erfc(-z) and 1 + tanh u = 2 / (1 + e^{-2u}): no cancellation in the tails */
    if (erf_form)
        return 0.5L * x * erfcl(-x / sqrtl(2.0L));
    long double k = sqrtl(2.0L / 3.14159265358979323846264338327950288L);
    return x / (1.0L + expl(-2.0L * k * (x + 0.044715L * x * x * x)));
}

Test(ops, gelu_derivative_matches_central_differences)
{
    enum { N = 4801 };
    static float x[N], dy[N], dy3[N];
    for (int form = 0; form < 2; form++) {
        hs_activation act = form ? HS_ACT_GELU_ERF : HS_ACT_GELU_TANH;
        for (int i = 0; i < N; i++) {
            x[i] = (float)(-12.0 + 24.0 * i / (N - 1));
            dy[i] = 1.0f;
            dy3[i] = 3.0f;
        }
        hs_op_gelu_back(x, dy, N, act);
        hs_op_gelu_back(x, dy3, N, act);
        double worst = 0;
        for (int i = 0; i < N; i++) {
            long double v = x[i], h = 1e-5L;
            double want = (double)((gelu_ld(v + h, form) - gelu_ld(v - h, form)) / (2 * h));
            double e = fabs((double)dy[i] - want);
            worst = e > worst ? e : worst;
            /* absolute near 1, relative in the tails, where GELU' falls to 1e-30 */
            cr_assert(e <= 5e-7 && (fabs(want) > 1e-3 || e <= 1e-4 * fabs(want) + 1e-34),
                      "%s GELU'(%.7g) = %.9g, want %.9g", form ? "erf" : "tanh", (double)v,
                      (double)dy[i], want);
            cr_assert(fabs((double)dy3[i] - 3 * want) <= 3e-6, "%s: 3 GELU'(%.7g) = %.9g",
                      form ? "erf" : "tanh", (double)v, (double)dy3[i]);
        }
        cr_log_info("%s form: worst error %.3g", form ? "erf" : "tanh", worst);
    }
    /* by hand: GELU'(0) = 1/2 in both forms; erf form GELU'(1) = Phi(1) + phi(1) */
    float z[2] = {0.0f, 1.0f}, d[2] = {1.0f, 1.0f};
    hs_op_gelu_back(z, d, 2, HS_ACT_GELU_ERF);
    NEAR(d[0], 0.5);
    NEAR(d[1], 0.8413447460685429 + 0.24197072451914337);
}

/* Two heads of width 1, n = 3, causal: head h's query i scores key j as q_i k_j. A finite
 * layer returns (size_t)-1; an infinite query at head 1, query 2 (its scores inf and -inf:
 * max - max is NaN) and a NaN at head 0, query 1 give the first such row, head * n + query,
 * whatever the other heads hold; a row past which nothing is wrong stays a softmax. */
static size_t probs_bad_row(float q_inf_h1, float q_nan_h0)
{
    hs_model_config c = {.d_model = 2, .n_head = 2, .d_head = 1, .n_kv_head = 2, .causal = 1};
    hs_visibility vis = hs_vis_from_causal(c.causal);
    /* rows [q0 q1 | k0 k1 | v0 v1], W = 6 */
    float qkv[3 * 6] = {1, 1, 1, -1, 0, 0,
                        q_nan_h0, 2, 2, 1, 0, 0,
                        1, q_inf_h1, 1, 1, 0, 0};
    float probs[2 * 3 * 3];
    size_t bad = hs_op_attn_probs(&c, vis, qkv, probs, 3);
    /* head 0, query 2 scores keys (1, 2, 1) / sqrt(1): softmax e^(s - 2) / sum */
    double e1 = exp(-1.0), sum = 2 * e1 + 1;
    NEAR(probs[2 * 3 + 0], e1 / sum);
    NEAR(probs[2 * 3 + 1], 1 / sum);
    return bad;
}

Test(ops, attn_probs_names_the_first_row_that_is_not_finite)
{
    cr_assert_eq(probs_bad_row(1, 1), (size_t)-1);
    cr_assert_eq(probs_bad_row(INFINITY, 1), (size_t)(1 * 3 + 2));
    cr_assert_eq(probs_bad_row(1, NAN), (size_t)(0 * 3 + 1));
    cr_assert_eq(probs_bad_row(INFINITY, NAN), (size_t)(0 * 3 + 1));
}

/* ALiBi's slopes by the paper's rule, worked by hand: 8 heads 2^-1 .. 2^-8; 12 heads those
 * 8, then every other slope of the 16-head sequence (2^-0.5, 2^-1.5, ...); 32 heads 2^-0.25
 * first. The bias of key j as Falcon-RW forms it: 2^-0.5 = 0.70710678 is 0.70703125 in
 * bfloat16 (8 significant bits, 0.10110101b), times 3 = 2.12109375 (10.00011111b), rounded
 * to 8 bits: 2.125. */
Test(ops, alibi_slopes_and_bias_by_hand)
{
    for (int h = 0; h < 8; h++)
        cr_expect_eq(hs_alibi_slope(8, h), ldexp(1.0, -(h + 1)), "8 heads, slope %d", h);
    for (int h = 0; h < 4; h++)
        NEAR(hs_alibi_slope(12, 8 + h), pow(2.0, -0.5 - h));
    cr_expect_eq(hs_alibi_slope(12, 7), 1.0 / 256);
    NEAR(hs_alibi_slope(32, 0), pow(2.0, -0.25));
    NEAR(hs_alibi_slope(3, 2), 0.25); /* 2 heads 2^-4, 2^-8, then 2^-2 */
    cr_expect_eq(hs_alibi_bias(12, 8, 1), 0.70703125f);
    cr_expect_eq(hs_alibi_bias(12, 8, 3), 2.125f);
    cr_expect_eq(hs_alibi_bias(12, 8, 0), 0.0f);
    cr_expect_eq(hs_alibi_bias(2, 0, 255), 255.0f / 16); /* exact in bfloat16 */
}

/* ALiBi in the attention kernel, multi-query: two heads of width 1 on one K/V head, queries
 * 0, so every score is the bias alone: head h's query i attends to key j <= i in proportion
 * to e^(m_h j) (m = 2^-4, 2^-8); invisible keys exactly 0. */
Test(ops, attn_probs_add_alibi_bias)
{
    hs_arch a = *hs_arch_of(HS_FAMILY_FALCON);
    a.pos = HS_POS_ALIBI;
    hs_model_config c = {.d_model = 2, .n_head = 2, .d_head = 1, .n_kv_head = 1, .causal = 1,
                         .arch = &a};
    float qkv[3 * 4] = {0, 0, 1, 5, 0, 0, -2, 6, 0, 0, 3, 7}; /* [q0 q1 | k | v] */
    float probs[2 * 3 * 3];
    cr_assert_eq(hs_op_attn_probs(&c, hs_vis_from_causal(1), qkv, probs, 3), (size_t)-1);
    for (int h = 0; h < 2; h++) {
        double m = h ? 1.0 / 256 : 1.0 / 16, sum = 1 + exp(m) + exp(2 * m);
        const float *row2 = probs + (size_t)h * 9 + 6;
        NEAR(row2[0], 1 / sum);
        NEAR(row2[1], exp(m) / sum);
        NEAR(row2[2], exp(2 * m) / sum);
        NEAR(probs[(size_t)h * 9 + 3], 1 / (1 + exp(m)));
        cr_expect_eq(probs[(size_t)h * 9 + 5], 0.0f);
    }
}

/* The fused attention gives the same bits as probabilities then context, causal and not,
 * with a head mask and grouped key/value heads, at a length that is not a multiple of the
 * row block, without the maps and with them (written out before the mask scales them: the
 * probabilities' own bits, unmasked); and names the same first bad row. */
static void fused_matches(int causal, int n_kv, int poison)
{
    enum { N = 150, H = 4, DH = 8 };
    hs_model_config c = {.d_model = H * DH, .n_head = H, .d_head = DH, .n_kv_head = n_kv,
                         .causal = causal};
    hs_visibility vis = hs_vis_from_causal(c.causal);
    int W = H * DH + 2 * n_kv * DH;
    float *qkv = malloc(sizeof(float) * N * (size_t)W), *probs = malloc(sizeof(float) * H * N * N);
    float *ctx1 = malloc(sizeof(float) * N * H * DH), *ctx2 = malloc(sizeof(float) * N * H * DH);
    cr_assert(qkv && probs && ctx1 && ctx2);
    uint32_t r = 12345;
    for (int i = 0; i < N * W; i++) {
        r = r * 1664525u + 1013904223u;
        qkv[i] = (float)((int)(r >> 9) % 2001 - 1000) / 250.0f;
    }
    if (poison)
        qkv[(size_t)77 * (size_t)W + 2 * DH] = INFINITY; /* head 2, query 77 */
    const float mask[H] = {1.0f, 0.0f, 0.5f, 1.0f};
    size_t bad1 = hs_op_attn_probs(&c, vis, qkv, probs, N), bad2 = 0, bad3 = 0;
    float *maps = malloc(sizeof(float) * H * N * N), *ctx3 = malloc(sizeof(float) * N * H * DH);
    cr_assert(maps && ctx3);
    memset(maps, 0xff, sizeof(float) * H * N * N); /* NaN everywhere: every cell must be written */
    cr_assert_eq(hs_op_attn_fused(&c, vis, qkv, ctx3, N, mask, maps, &bad3), HS_OK);
    if (!poison)
        cr_assert(!memcmp(maps, probs, sizeof(float) * H * N * N), "written maps differ");
    hs_op_attn_context(&c, vis, qkv, probs, ctx1, N, mask);
    cr_assert_eq(hs_op_attn_fused(&c, vis, qkv, ctx2, N, mask, NULL, &bad2), HS_OK);
    cr_assert_eq(bad1, bad2);
    cr_assert_eq(bad1, bad3);
    cr_assert_eq(bad1, poison ? (size_t)(2 * N + 77) : (size_t)-1);
    if (!poison) {
        cr_assert(!memcmp(ctx1, ctx2, sizeof(float) * N * H * DH), "fused context differs");
        cr_assert(!memcmp(ctx1, ctx3, sizeof(float) * N * H * DH), "context with maps differs");
    }
    free(maps);
    free(ctx3);
    free(qkv);
    free(probs);
    free(ctx1);
    free(ctx2);
}

Test(ops, fused_attention_is_probabilities_then_context_bit_for_bit)
{
    fused_matches(1, 4, 0);
    fused_matches(0, 4, 0);
    fused_matches(1, 2, 0);
    fused_matches(0, 1, 0);
    fused_matches(1, 4, 1);
    fused_matches(0, 2, 1);
}

/* The projections, whole or cut along K into partial products summed afterwards (the output
 * and MLP-down shapes of a 128-token pass, 12 tiles, split in 4 chunks; odd sizes; one row),
 * against a double-precision product: within 1e-5 of the sum of |terms|, for the bias set,
 * the bias added, and a transposed product with alpha and beta; and the same bits with 1 and
 * 3 threads. */
Test(ops, gemm_whole_or_split_along_k_matches_double_at_every_thread_count)
{
    static const int shapes[][3] = {{128, 768, 3072}, {128, 768, 768}, {100, 200, 1000},
                                    {1, 70, 400}, {300, 64, 50}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        size_t mk = (size_t)m * k, kn = (size_t)k * n, mn = (size_t)m * n;
        float *a = malloc(mk * sizeof *a), *w = malloc(kn * sizeof *w), *bias = malloc((size_t)n * sizeof *bias);
        float *c0 = malloc(mn * sizeof *c0), *c1 = malloc(mn * sizeof *c1), *c3 = malloc(mn * sizeof *c3);
        uint32_t x = 12345u + (uint32_t)s;
        for (size_t i = 0; i < mk; i++)
            a[i] = uniform(&x, 1000.0f);
        for (size_t i = 0; i < kn; i++)
            w[i] = uniform(&x, 1000.0f);
        for (int j = 0; j < n; j++)
            bias[j] = uniform(&x, 1000.0f);
        for (size_t i = 0; i < mn; i++)
            c0[i] = uniform(&x, 1000.0f);
        for (int variant = 0; variant < 3; variant++) { /* linear, linear_add, gemm^T */
            float alpha = variant == 2 ? 0.5f : 1.0f, beta = variant == 2 ? 0.25f : 0.0f;
            float *outs[2] = {c1, c3};
            int thr[2] = {1, 3};
            for (int r = 0; r < 2; r++) {
                hs_set_threads(thr[r]);
                memcpy(outs[r], c0, mn * sizeof *c0);
                if (variant == 0)
                    hs_op_linear(a, w, bias, outs[r], m, k, n);
                else if (variant == 1)
                    hs_op_linear_add(a, w, bias, outs[r], m, k, n);
                else /* w read as (n, k): c = alpha a w^T + beta c */
                    hs_op_gemm(1, m, n, k, alpha, a, k, w, k, beta, outs[r], n);
            }
            hs_set_threads(0);
            cr_assert_arr_eq(c1, c3, mn * sizeof *c1, "shape %d x %d x %d variant %d: 1 and 3 threads differ", m, n, k, variant);
            double worst = 0;
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    double sum = 0, mag = 0;
                    for (int q = 0; q < k; q++) {
                        double t = (double)a[(size_t)i * k + q] *
                                   (variant == 2 ? w[(size_t)j * k + q] : w[(size_t)q * n + j]);
                        sum += t;
                        mag += fabs(t);
                    }
                    double c = c0[(size_t)i * n + j];
                    double want = variant == 0 ? sum + bias[j] : variant == 1 ? c + bias[j] + sum
                                                                              : alpha * sum + beta * c;
                    double err = fabs(c1[(size_t)i * n + j] - want) / (mag + fabs(c) + fabs(bias[j]));
                    worst = err > worst ? err : worst;
                }
            cr_assert(worst < 1e-5, "shape %d x %d x %d variant %d: relative error %g", m, n, k, variant, worst);
        }
        free(a);
        free(w);
        free(bias);
        free(c0);
        free(c1);
        free(c3);
    }
}

/* The analyses' products (hs_dgemm_fixed, hs_sgemm_fixed: src/core/gemm.c, the forward's
 * tiling rule) with either operand transposed, on shapes that are one tile, many tiles, and
 * few tiles with a long K (split into chunks: 384 x 384 x 384 is 18 tiles, K in 2 chunks;
 * 96 x 768 x 5000 is 12 tiles, K in 4), against a long-double sum of the same terms: double
 * within 1e-13 and float within 1e-5 of the sum of |terms|, and the same bits on 1 and 3
 * threads. */
Test(ops, fixed_products_transposed_and_split_match_a_long_double_sum)
{
    static const int shapes[][3] = {{384, 384, 384}, {96, 768, 5000}, {7, 5, 3}, {300, 200, 100}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        size_t mk = (size_t)m * k, kn = (size_t)k * n, mn = (size_t)m * n;
        double *a = malloc(mk * sizeof *a), *b = malloc(kn * sizeof *b);
        double *d1 = malloc(mn * sizeof *d1), *d3 = malloc(mn * sizeof *d3);
        float *af = malloc(mk * sizeof *af), *bf = malloc(kn * sizeof *bf);
        float *f1 = malloc(mn * sizeof *f1), *f3 = malloc(mn * sizeof *f3);
        uint32_t x = 777u + (uint32_t)s;
        for (size_t i = 0; i < mk; i++)
            a[i] = af[i] = uniform(&x, 1000.0f);
        for (size_t i = 0; i < kn; i++)
            b[i] = bf[i] = uniform(&x, 1000.0f);
        for (int tr = 0; tr < 4; tr++) { /* trans_a = bit 0, trans_b = bit 1 */
            int ta = tr & 1, tb = tr >> 1;
            int lda = ta ? m : k, ldb = tb ? k : n; /* a: (k, m) or (m, k); b: (n, k) or (k, n) */
            hs_set_threads(1);
            hs_dgemm_fixed(ta, tb, m, n, k, a, lda, b, ldb, d1, n);
            hs_sgemm_fixed(ta, tb, m, n, k, af, lda, bf, ldb, f1, n);
            hs_set_threads(3);
            hs_dgemm_fixed(ta, tb, m, n, k, a, lda, b, ldb, d3, n);
            hs_sgemm_fixed(ta, tb, m, n, k, af, lda, bf, ldb, f3, n);
            hs_set_threads(0);
            cr_assert_arr_eq(d1, d3, mn * sizeof *d1, "double %dx%dx%d t%d: 1 and 3 threads differ", m, n, k, tr);
            cr_assert_arr_eq(f1, f3, mn * sizeof *f1, "float %dx%dx%d t%d: 1 and 3 threads differ", m, n, k, tr);
            double worst_d = 0, worst_f = 0;
            for (int i = 0; i < m; i += 1 + m / 40)
                for (int j = 0; j < n; j += 1 + n / 40) {
                    long double sum = 0, mag = 0;
                    for (int q = 0; q < k; q++) {
                        double av = ta ? a[(size_t)q * m + i] : a[(size_t)i * k + q];
                        double bv = tb ? b[(size_t)j * k + q] : b[(size_t)q * n + j];
                        sum += (long double)av * bv;
                        mag += fabsl((long double)av * bv);
                    }
                    double ed = (double)(fabsl(d1[(size_t)i * n + j] - sum) / mag);
                    double ef = (double)(fabsl(f1[(size_t)i * n + j] - sum) / mag);
                    worst_d = ed > worst_d ? ed : worst_d;
                    worst_f = ef > worst_f ? ef : worst_f;
                }
            cr_assert(worst_d < 1e-13, "double %dx%dx%d t%d: relative error %g", m, n, k, tr, worst_d);
            cr_assert(worst_f < 1e-5, "float %dx%dx%d t%d: relative error %g", m, n, k, tr, worst_f);
        }
        free(a);
        free(b);
        free(d1);
        free(d3);
        free(af);
        free(bf);
        free(f1);
        free(f3);
    }
}

/* Merged calls (src/core/gemm.c): with few threads the tiles of a block go to one call where
 * that gives the tiles' bits for the shape. The Q/K/V and output projections of GPT-2 at
 * n = 1024 and an MLP block (rows merged), the Q/K/V, output and MLP-down projections at
 * n = 128 (one row of tiles: columns merged; the last two also cut along K), with a bias,
 * on 1 thread (one call a K chunk where merged), 2 and 16 (the tiles themselves): the same
 * bits, and within 1e-5 of a double sum on sampled elements. Merging happens only with
 * kernels that pass the check: with OpenBLAS's SkylakeX ones (`make unit` runs this suite
 * again with them where the CPU has AVX-512) every shape's one-thread product must have
 * merged. */
Test(ops, merged_calls_give_the_tiles_bits_at_every_thread_count)
{
    static const int shapes[][3] = {{1024, 768, 2304}, {1024, 768, 768}, {256, 768, 3072},
                                    {128, 768, 2304}, {128, 768, 768}, {128, 3072, 768}};
    int skylakex = strcmp(hs_blas_corename(), "SkylakeX") == 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
        size_t mk = (size_t)m * k, kn = (size_t)k * n, mn = (size_t)m * n;
        float *a = malloc(mk * sizeof *a), *w = malloc(kn * sizeof *w), *bias = malloc((size_t)n * sizeof *bias);
        float *c[3] = {malloc(mn * sizeof(float)), malloc(mn * sizeof(float)), malloc(mn * sizeof(float))};
        uint32_t x = 99u + (uint32_t)s;
        for (size_t i = 0; i < mk; i++)
            a[i] = uniform(&x, 1000.0f);
        for (size_t i = 0; i < kn; i++)
            w[i] = uniform(&x, 1000.0f);
        for (int j = 0; j < n; j++)
            bias[j] = (float)j / (float)n;
        static const int thr[3] = {1, 2, 16};
        for (int r = 0; r < 3; r++) {
            hs_set_threads(thr[r]);
            long before = hs_gemm_merged_calls();
            hs_op_linear(a, w, bias, c[r], m, k, n);
            if (r == 0 && skylakex)
                cr_assert(hs_gemm_merged_calls() > before, "%dx%dx%d: not merged on 1 thread with SkylakeX kernels", m, k, n);
        }
        hs_set_threads(0);
        cr_assert_arr_eq(c[0], c[2], mn * sizeof(float), "%dx%dx%d: 1 and 16 threads differ", m, k, n);
        cr_assert_arr_eq(c[1], c[2], mn * sizeof(float), "%dx%dx%d: 2 and 16 threads differ", m, k, n);
        double worst = 0;
        for (int i = 0; i < m; i += 37)
            for (int j = 0; j < n; j += 29) {
                double sum = bias[j], mag = fabs(bias[j]);
                for (int q = 0; q < k; q++) {
                    double t = (double)a[(size_t)i * k + q] * w[(size_t)q * n + j];
                    sum += t;
                    mag += fabs(t);
                }
                double e = fabs(c[0][(size_t)i * n + j] - sum) / mag;
                worst = e > worst ? e : worst;
            }
        cr_assert(worst < 1e-5, "%dx%dx%d: relative error %g", m, k, n, worst);
        free(a);
        free(w);
        free(bias);
        for (int r = 0; r < 3; r++)
            free(c[r]);
    }
}

/* A merge check measures on the operands of the shape's first product. Operands on which
 * every order of the sums gives the same bits (zeros; small integers, summed exactly) say
 * nothing about the kernels, and must not decide the shape: a first product on zeros, a
 * second on small integers, then products on operands that round on 1, 2 and 16 threads
 * give the same bits (with the Haswell kernels, whose merged call gives other bits, a
 * check on zeros found a match and merged the 1-thread product). In float and in
 * double. */
Test(ops, merge_check_on_exact_operands_decides_nothing)
{
    enum { M = 512, K = 768, N = 768 };
    size_t mk = (size_t)M * K, kn = (size_t)K * N, mn = (size_t)M * N;
    float *a = calloc(mk, sizeof *a), *w = calloc(kn, sizeof *w), *c[3];
    double *ad = calloc(mk, sizeof *ad), *wd = calloc(kn, sizeof *wd), *cd[3];
    for (int r = 0; r < 3; r++) {
        c[r] = malloc(mn * sizeof(float));
        cd[r] = malloc(mn * sizeof(double));
    }
    cr_assert(a && w && ad && wd && c[0] && c[1] && c[2] && cd[0] && cd[1] && cd[2]);
    static const int thr[3] = {1, 2, 16};
    for (int exact = 0; exact < 2; exact++) { /* zeros first, then small integers */
        for (size_t i = 0; i < mk; i++)
            ad[i] = a[i] = exact ? (float)(i % 5) - 2.0f : 0.0f;
        for (size_t i = 0; i < kn; i++)
            wd[i] = w[i] = exact ? (float)(i % 3) - 1.0f : 0.0f;
        hs_set_threads(1); /* the first products of the shapes, on these operands */
        hs_sgemm_fixed(0, 0, M, N, K, a, K, w, N, c[0], N);
        hs_dgemm_fixed(0, 0, M, N, K, ad, K, wd, N, cd[0], N);
    }
    uint32_t x = 4242u;
    for (size_t i = 0; i < mk; i++)
        ad[i] = a[i] = uniform(&x, 997.0f);
    for (size_t i = 0; i < kn; i++)
        wd[i] = w[i] = uniform(&x, 1009.0f);
    for (int r = 0; r < 3; r++) {
        hs_set_threads(thr[r]);
        hs_sgemm_fixed(0, 0, M, N, K, a, K, w, N, c[r], N);
        hs_dgemm_fixed(0, 0, M, N, K, ad, K, wd, N, cd[r], N);
    }
    hs_set_threads(0);
    for (int r = 0; r < 2; r++) {
        cr_assert_arr_eq(c[r], c[2], mn * sizeof(float), "float: %d and 16 threads differ",
                         thr[r]);
        cr_assert_arr_eq(cd[r], cd[2], mn * sizeof(double), "double: %d and 16 threads differ",
                         thr[r]);
    }
    free(a);
    free(w);
    free(ad);
    free(wd);
    for (int r = 0; r < 3; r++) {
        free(c[r]);
        free(cd[r]);
    }
}
