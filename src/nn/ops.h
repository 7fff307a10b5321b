/* Kernels shared by the forward pass (forward.c) and the backward pass (gradient.c);
 * private to the library. Flat row-major float arrays with explicit sizes. */
#ifndef HEADSCOPE_OPS_H
#define HEADSCOPE_OPS_H

#include <stddef.h>

#include "headscope/model.h"

/* y: (n, out) = x: (n, in) · w: (in, out) + b: (out); y may not alias x. */
void hs_op_linear(const float *x, const float *w, const float *b, float *y, int n, int in, int out);

/* y: (n, d) = LayerNorm(x) * w + b, row-wise (mean and variance in double); y may alias x.
 * xhat: (n, d) and rstd: (n) receive the normalised input and 1/std when not NULL. */
void hs_op_layernorm(const float *x, const float *w, const float *b, float *y, float *xhat,
                     float *rstd, int n, int d, float eps);

/* y: (count) = GELU(x); y may alias x. The tanh form uses 1 + tanh u = 2 − 2/(e^{2u} + 1),
 * a few times faster than tanhf and within 1e-7 of it (absolute). */
void hs_op_gelu(const float *x, float *y, size_t count, hs_activation act);

/* Row-wise softmax of s: (n, n) in place; causal rows over keys 0..i, the rest set to 0. */
void hs_op_softmax_rows(float *s, int n, int causal);

/* x: (count) += y: (count). */
void hs_op_add(float *x, const float *y, size_t count);

#endif
