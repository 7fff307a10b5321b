/* Kernels shared by the forward pass (forward.c) and the backward pass (gradient.c);
 * private to the library. Flat row-major float arrays with explicit sizes. */
#ifndef HEADSCOPE_OPS_H
#define HEADSCOPE_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "headscope/model.h"

/* c: (m, n) = alpha a: (m, k) · op(b) + beta c, row-major with leading dimensions; op(b) is
 * b: (k, n), or b^T for b: (n, k) when trans_b. Parallel over tiles (and, for a product of
 * few tiles, chunks of k summed in order) cut by the shape alone, so the result is the same
 * bits for every thread count. */
void hs_op_gemm(int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                const float *b, int ldb, float beta, float *c, int ldc);

/* The workspace's attention buffer, (n_head, max_n, max_n) floats, which no pass needs once
 * it has returned: callers may use it as scratch between passes. *floats gets its size: 0
 * (and NULL) when no pass on the workspace has recorded maps, so none was allocated. */
struct hs_forward_ws;
float *hs_forward_ws_spare(struct hs_forward_ws *ws, size_t *floats);

/* logits: (rows, vocab) of the LM head (BERT: the MLM transform, then the decoder and its
 * bias) on rows idx[0..rows-1] of the final hidden states x: (n, d_model), or on rows
 * 0..rows-1 when idx is NULL. scratch: (2 * rows * d_model) floats. */
void hs_lm_logits(const hs_model *m, const float *x, const int32_t *idx, int rows,
                  float *scratch, float *logits);

/* hs_op_linear(_add) of one row (n = 1; add: y +=): W float32 in memory, or q, the
 * registered stored matrix hs_op_linear found for w (NULL: none), in a fixed order of the
 * sums, the same bits for both (src/nn/gemv.c). */
struct hs_qmat;
void hs_gemv_linear(const float *x, const float *w, const struct hs_qmat *q, const float *b,
                    float *y, int in, int out, int add);
/* hs_gemv_linear calls since the start whose stored matrix had its type's own kernel
 * (hs_qmat.rows): a test's proof that the kernel ran. */
long hs_gemv_kernel_calls(void);

/* y: (n, out) = x: (n, in) · w: (in, out) + b: (out) (b NULL: no bias); y may not alias x.
 * w may be a registered hs_qmat (src/core/qgemm.h: a layer matrix in its stored type, from
 * hs_layer_get_linear), multiplied a block at a time with the bits its float32 form gives;
 * so may hs_op_linear_add's. One row (n = 1) goes to hs_gemv_linear. */
void hs_op_linear(const float *x, const float *w, const float *b, float *y, int n, int in, int out);

/* y: (n, out) += x: (n, in) · w: (in, out) + b: (out) (b NULL: no bias). */
void hs_op_linear_add(const float *x, const float *w, const float *b, float *y, int n, int in,
                      int out);

/* The backward of hs_op_linear: dx: (n, in) = dy: (n, out) · wᵀ (accumulate: dx +=), w as
 * hs_op_linear takes it (float32, or a registered stored matrix: its block of wᵀ decoded from
 * the stored rows, the float32 product's bits; hs_gemm.b_fill_as). */
void hs_op_linear_back(const float *dy, const float *w, float *dx, int n, int in, int out,
                       int accumulate);

/* y: (n, d) = LayerNorm(x) * w + b, row-wise (mean and variance in double); y may alias x.
 * xhat: (n, d) and rstd: (n) receive the normalised input and 1/std when not NULL. */
void hs_op_layernorm(const float *x, const float *w, const float *b, float *y, float *xhat,
                     float *rstd, int n, int d, float eps);

/* y: (count) = act(x), GELU (either form) or SiLU (src/nn/act.c); y may alias x. The tanh
 * form uses 1 + tanh u = 2 − 2/(e^{2u} + 1), a few times faster than tanhf and within 1e-7
 * of it (absolute). */
void hs_op_gelu(const float *x, float *y, size_t count, hs_activation act);
/* dy: (count) *= act'(x: (count)), the derivative of hs_op_gelu's form (act), in float
 * with the same exp and erf evaluations (the gradient's backward through the MLP). */
void hs_op_gelu_back(const float *x, float *dy, size_t count, hs_activation act);

/* The gated MLP's activation for any act: gu: (rows, 2f), each row [gate | up] → y: (rows,
 * f) = act(gate) * up (SiLU: hs_op_swiglu); y may not alias gu. */
void hs_op_glu(const float *gu, float *y, int rows, int f, hs_activation act);

/* Its backward: da: (rows, f) → dgu: (rows, 2f), each row [d gate | d up]: d gate = da up
 * act'(gate), d up = da act(gate) (SiLU: hs_op_swiglu_back). */
void hs_op_glu_back(const float *gu, const float *da, float *dgu, int rows, int f,
                    hs_activation act);

/* r: (w) = exp(r - max r), returning the sum in double and max r in *max (if not NULL). */
double hs_op_exp_shift(float *r, int w, float *max);

/* log sum_j exp r_j, in double (exponentials summed in double after the max is taken out). */
double hs_op_log_sum_exp(const float *r, int w);

/* Index of the first NaN or infinity in x: (count), or (size_t)-1 when all are finite.
 * One vectorised pass (x * 0 is 0 for every finite x) and a scan only on failure. */
size_t hs_op_first_nonfinite(const float *x, size_t count);

/* Row-wise softmax of s: (n, n) in place, row i over its visible keys [hs_vis_lo(vis, i),
 * hs_vis_hi(vis, i, n)) (causal: 0..i), the rest set to 0. */
void hs_op_softmax_rows(float *s, int n, hs_visibility vis);

/* The scale of a layer's attention scores: hs_arch.query_scale, else 1 / sqrt(d_head). Scores
 * are then softcapped where hs_arch.attn_softcap says, cap tanh(s / cap), before the mask. */
float hs_attn_scale(const hs_model_config *c);

/* Attention probabilities of every head of one layer: qkv: (n, W), W = A + 2 n_kv d_head,
 * A = n_head d_head, columns [Q | K | V] with query head h at h*d_head and its key/value
 * head g = h / (n_head / n_kv_head) at A + g*d_head (K) and A + (n_kv + g)*d_head (V) →
 * probs: (n_head, n, n) = softmax(Q_h K_g^T / sqrt(d_head)), row i over the keys vis lets
 * it see, exactly 0 elsewhere (an HS_POS_ALIBI model's scores biased: hs_alibi_bias). Returns
 * the first row h * n + i (head h, query i) whose
 * probabilities are not finite (scores that overflow float32), or (size_t)-1 when every one
 * is: the check made while the row is in cache. */
size_t hs_op_attn_probs(const hs_model_config *c, hs_visibility vis, const float *qkv,
                        float *probs, int n);

/* Context of every query head: probs: (n_head, n, n) of visibility vis, scaled in place by
 * head_mask: (n_head) when not NULL (Hugging Face semantics: no renormalisation) → ctx:
 * (n, A), head h in columns h*d_head.. = probs_h V_g. */
void hs_op_attn_context(const hs_model_config *c, hs_visibility vis, const float *qkv,
                        float *probs, float *ctx, int n, const float *head_mask);

/* hs_op_attn_probs then hs_op_attn_context, one task of ATTN_ROWS query rows of one head at
 * a time, the task's probabilities in a buffer of the thread's own (ATTN_ROWS x n floats)
 * while they are in cache: the same bits in ctx, and in probs (n_head, n, n) when it is not
 * NULL (the maps before the head mask scales them, each row written once, where
 * hs_op_attn_probs's products first clear their rows of the maps and hs_op_attn_context
 * reads them back). *bad_row as hs_op_attn_probs returns it. HS_E_NOMEM when a thread's
 * buffer cannot be had (ctx and probs then incomplete). */
hs_status hs_op_attn_fused(const hs_model_config *c, hs_visibility vis, const float *qkv,
                           float *ctx, int n, const float *head_mask, float *probs,
                           size_t *bad_row);

/* ALiBi (Press et al. 2022, "Train short, test long"): the slope of query head h of n_head,
 * the paper's geometric sequence for the largest power of two p <= n_head, m_h =
 * 2^(-8 (h + 1) / p) for h < p, and for the other heads every other slope of the sequence for
 * 2p, m_h = 2^(-4 (2 (h - p) + 1) / p) (the rule of the paper's code; exact, in double). */
double hs_alibi_slope(int n_head, int h);

/* The bias ALiBi adds to head h's score of key j (position j, counted from 0) before the
 * 1/sqrt(d_head) scale, as Falcon-RW's code computes it: the slope rounded to bfloat16,
 * times j, the product rounded to bfloat16 again (each row's common part m i is left out:
 * the softmax does not see it). HS_POS_ALIBI models add scale times this to every score. */
float hs_alibi_bias(int n_head, int h, int j);

/* y: (n, d) = x / sqrt(mean(x^2) + eps) * w, row-wise (mean in double); y may alias x.
 * xhat: (n, d) = x / rms and rstd: (n) = 1 / rms when not NULL. */
void hs_op_rmsnorm(const float *x, const float *w, float *y, float *xhat, float *rstd, int n,
                   int d, float eps);

/* The gated MLP's activation: gu: (rows, 2f), each row [gate | up] → y: (rows, f) =
 * SiLU(gate) * up; y may not alias gu. */
void hs_op_swiglu(const float *gu, float *y, int rows, int f);

/* Its backward: da: (rows, f) = d loss / d (SiLU(gate) * up) → dgu: (rows, 2f), each row
 * [d gate | d up]: d gate = da up SiLU'(gate), d up = da SiLU(gate), SiLU'(g) = s (1 + g (1 -
 * s)), s = sigmoid(g); in float with the forward's exp. */
void hs_op_swiglu_back(const float *gu, const float *da, float *dgu, int rows, int f);

/* inv: (a->rotary_dims / 2) rotary inverse frequencies theta_k = base^(-2k/rotary_dims),
 * rescaled as a->rope_scaling says: linear theta/factor; llama3 (Llama 3.1's reference
 * code), with wavelength 2 pi/theta and old = rope_orig_ctx: kept below old/high_freq,
 * theta/factor above old/low_freq, (1 - s) theta/factor + s theta between, s = (old /
 * wavelength - low) / (high - low); yarn as hs_rope_scaling says (the attention factor
 * is the caller's: hs_op_rotary_scale). */
void hs_op_rope_freqs(const hs_arch *a, double *inv);

/* The same for the parameters of one layer (hs_model_layer_rope): inv: (r->dims / 2); for
 * longrope the frequencies of a text of at most orig_ctx tokens (its short factors). */
void hs_op_rope_freqs_of(const hs_rope *r, double *inv);

/* The frequencies a text of n tokens is turned with, inv: (r->dims / 2): as above, and for
 * longrope theta_k / short_factor[k] when n <= orig_ctx, theta_k / long_factor[k] beyond
 * (transformers' choice by the sequence's length). Returns the scale of cos and sin:
 * longrope's attention factor, else 1. */
double hs_op_rope_freqs_at(const hs_rope *r, int n, double *inv);

/* Rotary position embeddings (Su et al. 2021, the "rotate half" layout of GPT-NeoX and
 * Llama) in place on x: (n, ld), head h in columns h*d_head..: in each head the first
 * rot_dims dimensions (even, <= d_head) of row i, at position p = pos0 + i, turn pairwise:
 * (a_k, b_k) = (x[k], x[k + rot_dims/2]), k < rot_dims/2, by the angle p * inv_freq[k]:
 * a' = a cos - b sin, b' = b cos + a sin; inverse: by minus the angle (the transpose,
 * which the backward pass applies to gradients). The rest of the head is left as it is. */
void hs_op_rotary(float *x, int n, int n_head, int d_head, int ld, int rot_dims,
                  const double *inv_freq, int pos0, int inverse);

/* hs_op_rotary with cos and sin times scale (longrope's attention factor): a' = s (a cos -
 * b sin), b' = s (b cos + a sin); inverse: the transpose, s times the turn back (what the
 * backward pass applies to gradients). scale 1 is hs_op_rotary bit for bit. */
void hs_op_rotary_scaled(float *x, int n, int n_head, int d_head, int ld, int rot_dims,
                         const double *inv_freq, double scale, int pos0, int inverse);
/* The first rot_dims dimensions of every head of x: (n, ld) scaled by f (YaRN's attention
 * factor, which multiplies the rotation's cos and sin). */
void hs_op_rotary_scale(float *x, int n, int n_head, int d_head, int ld, int rot_dims, float f);

/* x: (count) += y: (count). */
void hs_op_add(float *x, const float *y, size_t count);

#endif
