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

void hs_op_attn_probs(const hs_model_config *c, const float *qkv, float *probs, int n)
{
    int d = c->d_model, dh = c->d_head;
    float scale = 1.0f / sqrtf((float)dh);
    size_t nn = (size_t)n * (size_t)n;
    for (int h = 0; h < c->n_head; h++) {
        const float *q = qkv + (size_t)h * (size_t)dh;
        const float *k = qkv + (size_t)d + (size_t)h * (size_t)dh;
        float *p = probs + (size_t)h * nn;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, dh, scale, q, 3 * d, k, 3 * d,
                    0.0f, p, n);
        hs_op_softmax_rows(p, n, c->causal);
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
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dh, n, 1.0f, p, n, v, 3 * d,
                    0.0f, ctx + (size_t)h * (size_t)dh, d);
    }
}

void hs_op_add(float *x, const float *y, size_t count)
{
    for (size_t i = 0; i < count; i++)
        x[i] += y[i];
}
