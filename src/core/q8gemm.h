/* Products by block-quantised matrices with the activations quantised to 8 bits, as
 * llama.cpp computes them (src/core/q8gemm.c; docs/gguf.md, "8-bit activations"): the
 * opt-in --activations q8. Core knows no storage type: hs_qmat.decode_i8 gives the
 * weights' integers. */
#ifndef HEADSCOPE_Q8GEMM_H
#define HEADSCOPE_Q8GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "core/qgemm.h"

/* One activation row of `in` floats (a multiple of 32) quantised per block b of 32: a[b] =
 * max |x| / 127 (float), q = x / a[b] (x times the float 1 / a[b]) rounded to the nearest
 * integer, halves away from zero (ggml's quantize_row_q8_0 rule, the scale kept in float32
 * as its Q8_K keeps it, not rounded to f16); a block of zeros has a[b] = 0 and q = 0, and so
 * has a block whose max |x| is below 1.5e-36 (where 1 / a[b] would overflow). s16[t]
 * is the sum of the 16 integers t. A block holding a NaN or an infinity gets q = 0 and
 * a[b] = NaN, so that the products it enters are NaN (as the float path's would be). */
void hs_q8_quantize_row(const float *x, int in, int8_t *q, float *a, int32_t *s16);

/* y (n, out) = x (n, in) W + bias, W an hs_qmat with decode_i8, its columns decoded 16 at a
 * time into integer panels, x quantised row by row (hs_q8_quantize_row). Output cell (r, j):
 * for each sub-block s of S elements (S = 32 where all 16 columns of j's panel have 32, else
 * 16), in order, with the exact integer sums i = sum q_w q_x and t = sum q_x over s:
 *   u = (float)i * d_s;  u = fma(m_s, (float)t, u);  acc = fma(a_b, u, acc)   (acc from 0)
 * then acc + bias[j] where bias is given, and y + that with add (else it is stored). The
 * same bits on every thread count and every instruction set (hs_q8gemm_isa). */
void hs_q8gemm_run(const hs_qmat *w, const float *x, const float *bias, float *y, int n, int add);

/* The instruction set the products run on: 0 portable C, 1 AVX2, 2 AVX-512 VNNI (the best
 * the CPU has, at most what hs_q8gemm_set_isa allowed). */
int hs_q8gemm_isa(void);
/* For tests: allow at most isa (-1: no limit); returns hs_q8gemm_isa() after. */
int hs_q8gemm_set_isa(int isa);
/* Products run by hs_q8gemm_run since the start, for tests. */
long hs_q8gemm_calls(void);

#endif /* HEADSCOPE_Q8GEMM_H */
