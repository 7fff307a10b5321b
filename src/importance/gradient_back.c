/* The backward kernels of gradient.c's pass (importance/gradient_back.h): linear maps,
 * LayerNorm and RMSNorm, the MLP, the query/key norms, attention and the final softcap, each
 * from d loss / d (its output) to d loss / d (its input). Only gradients with respect to
 * activations are formed, never weight gradients. */
#include <math.h>
#include <string.h>

#include <cblas.h>

#include "importance/gradient_back.h"
#include "importance/gradient_mla.h"
#include "importance/importance_internal.h"
#include "nn/ops.h"

/* dx: (n, in) = dy: (n, out) · w^T, w: (in, out), float32 or a layer matrix in its stored
 * type (hs_op_linear_back); accumulate adds to dx. */
void hs_grad_linear_back(const float *dy, const float *w, float *dx, int n, int in, int out,
                         int accumulate)
{
    hs_op_linear_back(dy, w, dx, n, in, out, accumulate);
}

/* LayerNorm backward, y = xhat * w + b: with g = dy * w,
 * dx = rstd * (g - mean(g) - xhat * mean(g * xhat)); RMSNorm (rms), y = x rstd w:
 * dx = rstd * (g - xhat * mean(g * xhat)). dx may alias dy; accumulate adds. */
void hs_grad_norm_back(int rms, const float *xhat, const float *rstd, const float *w,
                       const float *dy, float *dx, int n, int d, int accumulate)
{
#pragma omp parallel for schedule(static) if ((size_t)n * (size_t)d >= 32768)
    for (int i = 0; i < n; i++) {
        const float *hi = xhat + (size_t)i * (size_t)d, *gi = dy + (size_t)i * (size_t)d;
        float *xi = dx + (size_t)i * (size_t)d;
        double sg = 0, sgh = 0;
        for (int k = 0; k < d; k++) {
            double gk = (double)gi[k] * w[k];
            sg += gk;
            sgh += gk * hi[k];
        }
        double mg = rms ? 0.0 : sg / d, mgh = sgh / d, r = rstd[i];
        for (int k = 0; k < d; k++) {
            float v = (float)(r * ((double)gi[k] * w[k] - mg - hi[k] * mgh));
            xi[k] = accumulate ? xi[k] + v : v;
        }
    }
}

void hs_grad_rms_back(const float *xhat, const float *rstd, const float *w, const float *dy,
                      float *dx, int n, int d)
{
    hs_grad_norm_back(1, xhat, rstd, w, dy, dx, n, d, 0);
}

/* The MLP backward: dy: (n, d) = d loss / d (MLP output) → din: (n, d) = d loss / d (MLP
 * input); pre: (n, F) the kept first projection; dff: (n, F) scratch, and (n, d_ff) more
 * after it for the gated MLP. */
void hs_grad_mlp_back(const hs_model_config *c, const hs_layer *W, const float *pre,
                      const float *dy, float *dff, float *din, int n)
{
    int d = c->d_model, f = c->d_ff, F = hs_ff_width(c);
    if (c->gated) {
        float *da = dff + (size_t)n * (size_t)F;
        hs_grad_linear_back(dy, W->w_proj, da, n, f, d, 0);
        hs_op_glu_back(pre, da, dff, n, f, c->act);
    } else {
        hs_grad_linear_back(dy, W->w_proj, dff, n, f, d, 0);
        hs_op_gelu_back(pre, dff, (size_t)n * (size_t)f, c->act);
    }
    hs_grad_linear_back(dff, W->w_fc, din, n, d, F, 0);
}

/* dS: (keys) of query row q over keys [lo, hi) times the softcap's derivative
 * 1 - tanh^2(s / cap), s = scale q . k_j (the forward's score, recomputed). */
static void softcap_back(const float *q, const float *k, int W, int dh, float scale, float cap,
                         float *ds, int lo, int hi)
{
    for (int j = lo; j < hi; j++) {
        const float *kj = k + (size_t)j * (size_t)W;
        float s = 0.0f;
        for (int e = 0; e < dh; e++)
            s += q[e] * kj[e];
        float t = tanhf(scale * s / cap);
        ds[j] *= 1.0f - t * t;
    }
}

/* Back through the query/key norm (hs_qk_normalise), dqkv: (n, W) in place. */
void hs_grad_qk_norm_back(const hs_model_config *c, const hs_layer *W, const hs_block_keep *gl,
                          float *dqkv, int n)
{
    int A = hs_model_attn_width(c), K = c->n_kv_head * c->d_head, Wq = hs_qkv_width(c);
    int per = c->arch->qk_norm == HS_QK_NORM_HEAD, nr = hs_qk_norms(c);
    int nq = per ? c->n_head : 1, nk = per ? c->n_kv_head : 1;
    int wq = per ? c->d_head : A, wk = per ? c->d_head : K;
    for (int i = 0; i < n; i++) {
        float *g = dqkv + (size_t)i * (size_t)Wq;
        const float *xh = gl->qk_xhat + (size_t)i * (size_t)(A + K);
        const float *rs = gl->qk_rstd + (size_t)i * (size_t)nr;
        hs_grad_norm_back(1, xh, rs, W->q_norm_w, g, g, nq, wq, 0);
        hs_grad_norm_back(1, xh + A, rs + nq, W->k_norm_w, g + A, g + A, nk, wk, 0);
    }
}

/* Attention backward of one layer: dctx: (n, A) → dqkv: (n, W) (hs_qkv_width, A =
 * hs_model_attn_width). dp: (H, n, n)
 * scratch. Key/value groups run in parallel, the query heads of a group one after the
 * other, each adding its part to the group's dK and dV (each group writes its own columns).
 * ctx_h = P_h V_g, P_h = softmax(scale Q_h K_g^T), g the KV head of query head h:
 *   dV_g += P_h^T dctx_h;  dP = dctx_h V_g^T;  dS = P ⊙ (dP − rowsum(dP ⊙ P));
 *   dQ_h = scale dS K_g;  dK_g += scale dS^T Q_h.  The softmax of row i runs over its visible
 * keys [lo_i, hi_i) only (vis), so the sum and dS cover those; the masked entries have P = 0
 * and dS = 0 (the scores there do not reach the loss).
 * Q and K are the rotated ones (the rotation's transpose is applied to dQ, dK after). */
void hs_grad_attention_back(const hs_model_config *c, hs_visibility vis, const float *qkv,
                            const float *probs, const float *dctx, float *dqkv, float *dps,
                            float *dpat, int n)
{
    int d = hs_model_attn_width(c), dh = c->d_head, W = hs_qkv_width(c), KV = c->n_kv_head;
    int G = c->n_head / KV;
    float scale = hs_attn_scale(c), cap = c->arch->attn_softcap;
    size_t nn = (size_t)n * (size_t)n, koff = (size_t)d, voff = (size_t)d + (size_t)KV * (size_t)dh;
#pragma omp parallel for schedule(dynamic) if (KV > 1 && nn * (size_t)c->n_head >= 32768)
    for (int kv = 0; kv < KV; kv++)
    for (int m = 0; m < G; m++) {
        int h = kv * G + m;
        float beta = m ? 1.0f : 0.0f; /* the group's first query head sets dK, dV */
        size_t off = (size_t)h * (size_t)dh, goff = (size_t)kv * (size_t)dh;
        const float *q = qkv + off, *k = qkv + koff + goff, *v = qkv + voff + goff;
        const float *p = probs + (size_t)h * nn, *dc = dctx + off;
        float *dp = dps + (size_t)h * nn;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, dh, n, 1.0f, p, n, dc, d, beta,
                    dqkv + voff + goff, W);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, dh, 1.0f, dc, d, v, W, 0.0f,
                    dp, n);
        if (dpat) /* d / d probs, asked for by a tap (hook_pattern) */
            memcpy(dpat + (size_t)h * nn, dp, nn * sizeof *dp);
        for (int i = 0; i < n; i++) {
            const float *pi = p + (size_t)i * (size_t)n;
            float *di = dp + (size_t)i * (size_t)n;
            int lo = hs_vis_lo(vis, i), hi = hs_vis_hi(vis, i, n);
            double s = 0;
            for (int j = lo; j < hi; j++)
                s += (double)di[j] * pi[j];
            for (int j = lo; j < hi; j++)
                di[j] = (float)(pi[j] * ((double)di[j] - s));
            for (int j = 0; j < lo; j++)
                di[j] = 0.0f;
            for (int j = hi; j < n; j++)
                di[j] = 0.0f;
            if (cap > 0) /* through cap tanh(s / cap): times 1 - tanh^2, s recomputed */
                softcap_back(q + (size_t)i * (size_t)W, k, W, dh, scale, cap, di, lo, hi);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dh, n, scale, dp, n, k, W,
                    0.0f, dqkv + off, W);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, dh, n, scale, dp, n, q, W,
                    beta, dqkv + koff + goff, W);
    }
}


/* d loss / d logits: (V) (softmax - onehot) / R, held where the softcapped logits y = cap
 * tanh(z / cap) were, made d loss / d z: times 1 - (y / cap)^2. Each y is read back from its
 * probability, y = max + log(row_v / inv) (a probability that underflowed to 0 has no
 * gradient), the target's is target. */
void hs_grad_final_softcap_back(float *row, int V, float mx, float inv, float cap, int tgt,
                                float target)
{
    for (int v = 0; v < V; v++) {
        float e = row[v] / inv, y = v == tgt ? target : e > 0 ? mx + logf(e) : 0.0f;
        float t = y / cap;
        row[v] *= 1.0f - t * t;
    }
}
