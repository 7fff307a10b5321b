/* Kernels of src/nn/ops.c that no golden model covers yet (RMSNorm, gated SiLU, rotary
 * embeddings), each against values worked out by hand from its definition. */
#include <math.h>

#include "nn/ops.h"
#include "testutil.h"

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

Test(ops, silu_mul_is_g_sigmoid_g_times_u)
{
    /* SiLU(0) = 0; SiLU(ln 3) = ln 3 * 3/4 (sigmoid(ln 3) = 3/4); SiLU(-ln 3) = -ln 3 / 4 */
    const float g[3] = {0.0f, (float)log(3.0), (float)-log(3.0)}, u[3] = {5, 2, -4};
    float y[3];
    hs_op_silu_mul(g, u, y, 3);
    NEAR(y[0], 0);
    NEAR(y[1], (double)(float)log(3.0) * 0.75 * 2);
    NEAR(y[2], (double)(float)-log(3.0) * 0.25 * -4);
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
