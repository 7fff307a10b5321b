/* Attention rollout and attention flow (Abnar & Zuidema 2020) on maps worked by hand; the
 * arithmetic is in the comments. */
#include <math.h>
#include <stdlib.h>

#include "headscope/analysis.h"
#include "testutil.h"

static void near_all(const double *got, const double *want, int count, double tol,
                     const char *what)
{
    for (int k = 0; k < count; k++)
        cr_assert(fabs(got[k] - want[k]) <= tol, "%s[%d]: got %.17g, want %.17g", what, k,
                  got[k], want[k]);
}

Test(rollout, two_causal_layers_with_the_residual)
{
    /* A0 = [[1,0],[.5,.5]], A1 = [[1,0],[.2,.8]], residual 0.5:
     * B0 = [[1,0],[.25,.75]], B1 = [[1,0],[.1,.9]]
     * rollout = B1 B0 = [[1,0],[.1 + .9 * .25, .9 * .75]] = [[1,0],[.325,.675]]
     * flow into the top position 1: from input 0 along 0->0->1 (min(1, .1)) and 0->1->1
     * (min(.25, .9)): .35; from input 1 along 1->1->1: min(.75, .9) = .75. Top 0: 1, 0. */
    const float attn[8] = {1, 0, 0.5f, 0.5f, 1, 0, 0.2f, 0.8f};
    double r[4], f[4];
    cr_assert_eq(hs_rollout_compute(attn, 2, 1, 2, TU_CAUSAL, 1, 0.5, r, NULL), HS_OK);
    near_all(r, (const double[]){1, 0, 0.325, 0.675}, 4, 1e-7, "rollout");
    cr_assert_eq(hs_attention_flow(attn, 2, 1, 2, TU_CAUSAL, 1, 0.5, f, NULL), HS_OK);
    near_all(f, (const double[]){1, 0, 0.35, 0.75}, 4, 1e-7, "flow");
}

Test(rollout, one_layer_averages_the_heads)
{
    /* bidirectional, two heads: mean [[.4,.6],[.8,.2]]; B = .5 mean + .5 I =
     * [[.7,.3],[.4,.6]]; with one layer rollout and flow are both B (one edge per pair) */
    const float attn[8] = {0.2f, 0.8f, 0.6f, 0.4f, 0.6f, 0.4f, 1, 0};
    double r[4], f[4];
    const double b[4] = {0.7, 0.3, 0.4, 0.6};
    cr_assert_eq(hs_rollout_compute(attn, 1, 2, 2, TU_BIDIR, 1, 0.5, r, NULL), HS_OK);
    near_all(r, b, 4, 1e-7, "rollout");
    cr_assert_eq(hs_attention_flow(attn, 1, 2, 2, TU_BIDIR, 1, 0.5, f, NULL), HS_OK);
    near_all(f, b, 4, 1e-7, "flow");
}

Test(rollout, flow_is_not_rollout_where_paths_share_no_bottleneck)
{
    /* causal, 3 tokens, residual 0:
     * A0 = [[1,0,0],[1,0,0],[.5,0,.5]], A1 = [[1,0,0],[.5,.5,0],[.2,.3,.5]]
     * rollout row 2 = .2 A0[0] + .3 A0[1] + .5 A0[2] = [.75, 0, .25]
     * flow into top 2 from input 0: via middle 0 (min(1, .2)), middle 1 (min(1, .3)),
     * middle 2 (min(.5, .5)) = 1; from input 2: via middle 2, min(.5, .5) = .5; input 1
     * has no edge (A0[.][1] = 0): 0. Row 1 of the flow: from 0 via middles 0 and 1
     * (.5 + .5) = 1, rollout row 1 = .5 A0[0] + .5 A0[1] = [1, 0, 0]. */
    const float attn[18] = {1, 0, 0, 1, 0, 0, 0.5f, 0, 0.5f,
                            1, 0, 0, 0.5f, 0.5f, 0, 0.2f, 0.3f, 0.5f};
    double r[9], f[9];
    cr_assert_eq(hs_rollout_compute(attn, 2, 1, 3, TU_CAUSAL, 1, 0.0, r, NULL), HS_OK);
    near_all(r, (const double[]){1, 0, 0, 1, 0, 0, 0.75, 0, 0.25}, 9, 1e-7, "rollout");
    cr_assert_eq(hs_attention_flow(attn, 2, 1, 3, TU_CAUSAL, 1, 0.0, f, NULL), HS_OK);
    near_all(f, (const double[]){1, 0, 0, 1, 0, 0, 1, 0, 0.5}, 9, 1e-7, "flow");
}

Test(rollout, swapping_twice_without_residual_is_the_identity)
{
    /* A0 = A1 = [[0,1],[1,0]] (bidirectional), residual 0: rollout = I; flow from input 0
     * to top 0 runs 0 -> middle 1 -> top 0 (1), from input 1 to top 0 needs middle 0 -> top
     * 0, capacity 0: flow = I */
    const float attn[8] = {0, 1, 1, 0, 0, 1, 1, 0};
    double r[4], f[4];
    cr_assert_eq(hs_rollout_compute(attn, 2, 1, 2, TU_BIDIR, 1, 0.0, r, NULL), HS_OK);
    near_all(r, (const double[]){1, 0, 0, 1}, 4, 0, "rollout");
    cr_assert_eq(hs_attention_flow(attn, 2, 1, 2, TU_BIDIR, 1, 0.0, f, NULL), HS_OK);
    near_all(f, (const double[]){1, 0, 0, 1}, 4, 0, "flow");
}

Test(rollout, rejects_bad_arguments)
{
    const float attn[4] = {1, 0, 0.5f, 0.5f};
    const float bad[4] = {1, 0, NAN, 0.5f};
    double r[4];
    hs_error err = {{0}};
    cr_assert_eq(hs_rollout_compute(attn, 1, 1, 2, TU_CAUSAL, 1, 1.5, r, &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "rollout: residual weight 1.5, expected 0..1");
    cr_assert_eq(hs_attention_flow(attn, 1, 1, 2, TU_CAUSAL, 1, 0.5, NULL, &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "attention flow: NULL output");
    cr_assert_eq(hs_rollout_compute(bad, 1, 1, 2, TU_CAUSAL, 1, 0.5, r, &err), HS_E_VALUE);
    cr_assert_str_eq(err.msg, "rollout: maps: entry (map 0, row 1, col 0) is nan, expected a "
                              "finite probability >= 0");
    cr_assert_eq(hs_rollout_compute(attn, 0, 1, 2, TU_CAUSAL, 1, 0.5, r, &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "rollout: 0 layers x 1 heads, expected >= 1 each");
}
