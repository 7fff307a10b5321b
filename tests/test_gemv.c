/* One row through a linear layer (src/nn/gemv.c, hs_op_linear with n = 1).
 *
 * References that do not come from the code under test: the order of the sums as
 * docs/architecture.md and gemv.c's header state it, written again here one scalar at a
 * time (16 partial sums over k = l, l + 16, ..., each product rounded then added; the
 * partials added l with l + 8, + 4, + 2, + 1; then the bias or y); hand sums of values
 * whose sums are exact; a float64 product. The stored path must give the float32 path's
 * bits for every stored type. */
#include <math.h>

#include "nn/ops.h"
#include "qmat_util.h"
#include "testutil.h"

/* The stated order, one scalar at a time (volatile: no contraction, no reassociation). */
static float stated_sum(const float *x, const float *w, int ldw, int j, int in)
{
    float p[16] = {0};
    for (int k = 0; k < in; k++) {
        volatile float t = x[k] * w[(size_t)k * (size_t)ldw + (size_t)j];
        p[k % 16] = p[k % 16] + t;
    }
    for (int s = 8; s >= 1; s /= 2)
        for (int l = 0; l < s; l++)
            p[l] = p[l] + p[l + s];
    return p[0];
}

/* Every type, depths and widths that are and are not multiples of the 16 partials and of
 * the 4 stored rows and 512-element pieces the stored path takes at a time (depths 37 and
 * 1061 for F16 and BF16, whose blocks are one element: a tail in the first piece and in the
 * second): with a bias, without, added onto y; the stored path's bits are the float32
 * path's, and both are the stated order's. */
Test(gemv, stored_and_float32_give_the_stated_order_bit_for_bit)
{
    const int ins[] = {37, 256, 768, 1061}, outs[] = {70, 16, 5};
    float b[70];
    for (int j = 0; j < 70; j++)
        b[j] = uniform(-1, 1);
    for (size_t t = 0; t < N_TYPES; t++)
        for (size_t a = 0; a < 4; a++)
            for (size_t o = 0; o < 3; o++) {
                const qtype *q = &TYPES[t];
                int in = ins[a], out = outs[o];
                if (in % hs_dtype_block(q->dt))
                    continue;
                stored s;
                stored_random(&s, q, in, out);
                const float *w = s.w, *wq = s.wq;
                float x[1061], y0[70], y1[70], want[70];
                for (int k = 0; k < in; k++)
                    x[k] = uniform(-1, 1);
                for (int mode = 0; mode < 3; mode++) { /* no bias, bias, added with bias */
                    const float *bias = mode ? b : NULL;
                    for (int j = 0; j < out; j++) {
                        y0[j] = y1[j] = uniform(-1, 1);
                        float sum = stated_sum(x, w, out, j, in);
                        want[j] = mode == 0 ? sum : mode == 1 ? b[j] + sum : (y0[j] + b[j]) + sum;
                    }
                    if (mode == 2) {
                        hs_op_linear_add(x, w, bias, y0, 1, in, out);
                        hs_op_linear_add(x, wq, bias, y1, 1, in, out);
                    } else {
                        hs_op_linear(x, w, bias, y0, 1, in, out);
                        hs_op_linear(x, wq, bias, y1, 1, in, out);
                    }
                    cr_assert(!memcmp(y0, want, (size_t)out * sizeof *y0),
                              "%s, %d x %d, mode %d: float32 W not in the stated order",
                              hs_dtype_name(q->dt), in, out, mode);
                    cr_assert(!memcmp(y1, want, (size_t)out * sizeof *y1),
                              "%s, %d x %d, mode %d: stored W not in the stated order",
                              hs_dtype_name(q->dt), in, out, mode);
                    for (int j = 0; j < out && mode == 1; j++) {
                        double acc = b[j], mag = fabs(b[j]);
                        for (int k = 0; k < in; k++) {
                            double v = (double)x[k] * w[(size_t)k * (size_t)out + (size_t)j];
                            acc += v, mag += fabs(v);
                        }
                        cr_assert_leq(fabs(y0[j] - acc) / (mag > 0 ? mag : 1), 1e-6);
                    }
                }
                stored_free(&s);
            }
}

/* Hand sums: x = 1, 2, ..., 40 and W (40, 3) with columns 1, -1 and (k - 1) mod 3 at x = k:
 * sums 820, -820 and the third counted in integers (every partial an integer below 2^24,
 * so exact in any order); then added onto y with a bias. */
Test(gemv, hand_sums)
{
    float x[40], w[40 * 3], y[3];
    long third = 0;
    for (int k = 0; k < 40; k++) {
        x[k] = (float)(k + 1);
        w[k * 3] = 1, w[k * 3 + 1] = -1, w[k * 3 + 2] = (float)(k % 3);
        third += (long)(k + 1) * (k % 3);
    }
    hs_op_linear(x, w, NULL, y, 1, 40, 3);
    cr_assert_eq(y[0], 820.0f);
    cr_assert_eq(y[1], -820.0f);
    cr_assert_eq(y[2], (float)third);
    float bias[3] = {0.5f, 0.25f, -1};
    hs_op_linear_add(x, w, bias, y, 1, 40, 3); /* y + b + x W */
    cr_assert_eq(y[0], 1640.5f);
    cr_assert_eq(y[1], -1639.75f);
    cr_assert_eq(y[2], (float)(2 * third - 1));
}

/* The one-row kernels that make Q8_0, F16 and BF16 weights in registers (hs_qmat.rows,
 * src/model/quant_rows.c), on every instruction set this CPU has a kernel for (AVX-512,
 * AVX2; none below, where gemv.c decodes): the stated order's bits, and the generic path's
 * (rows cleared: decode into a buffer) whose bits they replace; the kernel counted, so the
 * test knows it ran. Depths past a
 * 512-element piece and past the kernel's 128 blocks of scales (4096 elements) and not a
 * multiple of either; F16 and BF16 also in the middle of a 16-lane group (37, 531, 4131:
 * the tail added last; Q8_0's depth is whole 32-element blocks, so it never ends inside a
 * group); widths ending inside a group of 4 stored rows and inside a block of 256 columns
 * (259). */
Test(gemv, stored_type_kernels_give_the_stated_order_on_every_isa)
{
    const int q8_ins[] = {32, 544, 4160}, half_ins[] = {37, 531, 4131}, outs[] = {5, 259};
    const qtype *types[] = {&TYPES[2], &TYPES[0], &TYPES[1]}; /* Q8_0, F16, BF16 */
    cr_assert_eq(types[0]->dt, HS_DT_Q8_0);
    cr_assert_eq(types[1]->dt, HS_DT_F16);
    cr_assert_eq(types[2]->dt, HS_DT_BF16);
    int best = hs_qrows_set_isa(-1);
    float *x = random_floats(4160), b[259], y[259], yg[259], want[259];
    for (int j = 0; j < 259; j++)
        b[j] = uniform(-1, 1);
    for (int isa = best; isa >= 0; isa--) {
        cr_assert_eq(hs_qrows_set_isa(isa), isa);
        if (isa == 0) { /* no kernel: the generic path */
            cr_assert_null(hs_tensor_rows_fn(&(hs_tensor_view){.dtype = HS_DT_Q8_0}));
            cr_assert_null(hs_tensor_rows_fn(&(hs_tensor_view){.dtype = HS_DT_F16}));
            cr_assert_null(hs_tensor_rows_fn(&(hs_tensor_view){.dtype = HS_DT_BF16}));
            break;
        }
        for (int t = 0; t < 3; t++)
            for (int a = 0; a < 3; a++)
                for (int o = 0; o < 2; o++) {
                    int in = t ? half_ins[a] : q8_ins[a], out = outs[o];
                    stored s;
                    stored_random(&s, types[t], in, out);
                    cr_assert_not_null(s.q.rows, "%s has a kernel", hs_dtype_name(types[t]->dt));
                    for (int j = 0; j < out; j++)
                        want[j] = b[j] + stated_sum(x, s.w, out, j, in);
                    long calls = hs_gemv_kernel_calls();
                    hs_op_linear(x, s.wq, b, y, 1, in, out);
                    cr_assert_eq(hs_gemv_kernel_calls(), calls + 1, "the kernel ran");
                    cr_assert(!memcmp(y, want, (size_t)out * sizeof *y),
                              "isa %d, %s, %d x %d: not the stated order", isa,
                              hs_dtype_name(types[t]->dt), in, out);
                    s.q.rows = NULL; /* the generic path */
                    hs_op_linear(x, s.wq, b, yg, 1, in, out);
                    cr_assert_eq(hs_gemv_kernel_calls(), calls + 1);
                    cr_assert(!memcmp(y, yg, (size_t)out * sizeof *y),
                              "isa %d, %s, %d x %d: not the generic path's bits", isa,
                              hs_dtype_name(types[t]->dt), in, out);
                    stored_free(&s);
                }
    }
    hs_qrows_set_isa(-1);
    free(x);
}
