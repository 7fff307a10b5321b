/* Kernels shared by the forward and backward passes (see ops.h). */
#include <math.h>
#include <string.h>

#include <cblas.h>

#include "nn/ops.h"

void hs_op_linear(const float *x, const float *w, const float *b, float *y, int n, int in, int out)
{
    for (int i = 0; i < n; i++)
        memcpy(y + (size_t)i * (size_t)out, b, (size_t)out * sizeof *b);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, out, in, 1.0f, x, in, w, out, 1.0f,
                y, out);
}

void hs_op_layernorm(const float *x, const float *w, const float *b, float *y, float *xhat,
                     float *rstd, int n, int d, float eps)
{
    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * (size_t)d;
        float *yi = y + (size_t)i * (size_t)d;
        float *hi = xhat ? xhat + (size_t)i * (size_t)d : NULL;
        double mean = 0, var = 0;
        for (int k = 0; k < d; k++)
            mean += xi[k];
        mean /= d;
        for (int k = 0; k < d; k++) {
            double t = xi[k] - mean;
            var += t * t;
        }
        var /= d;
        float inv = (float)(1.0 / sqrt(var + (double)eps));
        float mu = (float)mean;
        if (rstd)
            rstd[i] = inv;
        for (int k = 0; k < d; k++) {
            float h = (xi[k] - mu) * inv;
            if (hi)
                hi[k] = h;
            yi[k] = h * w[k] + b[k];
        }
    }
}

void hs_op_gelu(const float *x, float *y, size_t count, hs_activation act)
{
    if (act == HS_ACT_GELU_ERF) {
        for (size_t i = 0; i < count; i++)
            y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
    } else {
        const float k = 0.79788456080286536f; /* sqrt(2/pi) */
        for (size_t i = 0; i < count; i++) {
            float v = x[i];
            float u = k * (v + 0.044715f * v * v * v);
            y[i] = v - v / (expf(2.0f * u) + 1.0f); /* 0.5 v (1 + tanh u) */
        }
    }
}

void hs_op_softmax_rows(float *s, int n, int causal)
{
    for (int i = 0; i < n; i++) {
        float *r = s + (size_t)i * (size_t)n;
        int w = causal ? i + 1 : n;
        float mx = r[0];
        for (int j = 1; j < w; j++)
            mx = r[j] > mx ? r[j] : mx;
        double sum = 0;
        for (int j = 0; j < w; j++) {
            r[j] = expf(r[j] - mx);
            sum += r[j];
        }
        float inv = (float)(1.0 / sum);
        for (int j = 0; j < w; j++)
            r[j] *= inv;
        for (int j = w; j < n; j++)
            r[j] = 0.0f;
    }
}

/* Causal products are computed in blocks of CAUSAL_BLOCK query rows, each against the keys
 * up to its last row only: about half the multiply-adds of the full n x n at large n. */
#define CAUSAL_BLOCK 128

void hs_op_attn_probs(const hs_model_config *c, const float *qkv, float *probs, int n)
{
    int d = c->d_model, dh = c->d_head;
    float scale = 1.0f / sqrtf((float)dh);
    size_t nn = (size_t)n * (size_t)n;
    for (int h = 0; h < c->n_head; h++) {
        const float *q = qkv + (size_t)h * (size_t)dh;
        const float *k = qkv + (size_t)d + (size_t)h * (size_t)dh;
        float *p = probs + (size_t)h * nn;
        int step = c->causal ? CAUSAL_BLOCK : n;
        for (int r0 = 0; r0 < n; r0 += step) { /* rows r0..r1-1 against keys 0..r1-1 */
            int r1 = r0 + step < n ? r0 + step : n, keys = c->causal ? r1 : n;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, keys, dh, scale,
                        q + (size_t)r0 * 3 * (size_t)d, 3 * d, k, 3 * d, 0.0f,
                        p + (size_t)r0 * (size_t)n, n);
        }
        hs_op_softmax_rows(p, n, c->causal); /* zeroes every key past the query */
    }
}

void hs_op_attn_context(const hs_model_config *c, const float *qkv, float *probs, float *ctx,
                        int n, const float *head_mask)
{
    int d = c->d_model, dh = c->d_head;
    size_t nn = (size_t)n * (size_t)n;
    for (int h = 0; h < c->n_head; h++) {
        const float *v = qkv + 2 * (size_t)d + (size_t)h * (size_t)dh;
        float *p = probs + (size_t)h * nn;
        float hm = head_mask ? head_mask[h] : 1.0f;
        if (hm != 1.0f)
            for (size_t i = 0; i < nn; i++)
                p[i] *= hm;
        int step = c->causal ? CAUSAL_BLOCK : n;
        for (int r0 = 0; r0 < n; r0 += step) { /* probs past the block's last row are 0 */
            int r1 = r0 + step < n ? r0 + step : n, keys = c->causal ? r1 : n;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, dh, keys, 1.0f,
                        p + (size_t)r0 * (size_t)n, n, v, 3 * d, 0.0f,
                        ctx + (size_t)r0 * (size_t)d + (size_t)h * (size_t)dh, d);
        }
    }
}

void hs_op_add(float *x, const float *y, size_t count)
{
    for (size_t i = 0; i < count; i++)
        x[i] += y[i];
}
