/* The backward pass of multi-head latent attention (src/nn/mla.c's forward), for gradient
 * importance: d loss / d context → d loss / d [q (or q_a) | kv_a], the fused slot's
 * columns, from the layer's kept projection and probabilities; the expanded queries, keys
 * and values are recomputed from the projection (the forward's arithmetic). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "importance/gradient_mla.h"
#include "nn/ops.h"

#define MLA_NORM_EPS 1e-6f /* as src/nn/mla.c */

/* Columns [off, off + w) of src: (n, ld) into dst: (n, w), or dst into them (back). */
static void cols(float *src, int ld, int off, int w, float *dst, int n, int back)
{
    for (int i = 0; i < n; i++) {
        float *a = src + (size_t)i * (size_t)ld + off, *b = dst + (size_t)i * (size_t)w;
        memcpy(back ? a : b, back ? b : a, (size_t)w * sizeof *a);
    }
}

/* Adjacent pairs of rot dims at col in each of count blocks stride apart of x: (n, ld),
 * turned by sign i inv_freq[k] and scaled by f (sign -1: the forward turn's transpose). */
static void turn(float *x, int n, int ld, int col, int count, int stride, int rot,
                 const double *inv_freq, float f, double sign)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < rot / 2; k++) {
            double ang = (double)i * inv_freq[k], cs = cos(ang) * f, sn = sign * sin(ang) * f;
            for (int b = 0; b < count; b++) {
                float *p = x + (size_t)i * (size_t)ld + col + (size_t)b * (size_t)stride + 2 * k;
                double u = p[0], v = p[1];
                p[0] = (float)(u * cs - v * sn);
                p[1] = (float)(u * sn + v * cs);
            }
        }
}

hs_status hs_mla_attn_back(const hs_model_config *c, const hs_layer *L, int layer,
                           const float *qkv, const float *probs, const float *dctx, float *dqkv,
                           int n)
{
    const hs_arch *a = c->arch;
    int H = c->n_head, dn = a->mla_nope, dr = a->rotary_dims, dqk = dn + dr, dv = c->d_head;
    int W = hs_mla_qkv_width(c), Qw = hs_mla_q_width(c), kvl = a->mla_kv_lora;
    int Hq = H * dqk, Hkv = H * (dn + dv), A = H * dv, ql = a->mla_q_lora;
    size_t nn = (size_t)n * (size_t)n;
    hs_visibility vis = hs_model_layer_visibility(c, layer);
    hs_rope rope = hs_model_layer_rope(c, layer);
    double inv[HS_ROTARY_MAX_DIMS / 2];
    hs_op_rope_freqs_of(&rope, inv);
    float af = rope.attn_factor > 0 ? rope.attn_factor : 1.0f;
    float scale = (float)(a->mla_scale / sqrt((double)dqk));
    int wide = kvl > Qw ? kvl : Qw;
    float *q = malloc((size_t)n * Hq * sizeof *q), *dq = calloc((size_t)n * Hq, sizeof *dq);
    float *kv = malloc((size_t)n * Hkv * sizeof *kv), *dkv = calloc((size_t)n * Hkv, sizeof *dkv);
    float *xh = malloc((size_t)n * wide * sizeof *xh), *lat = malloc((size_t)n * wide * sizeof *lat);
    float *dlat = malloc((size_t)n * wide * sizeof *dlat), *rstd = malloc((size_t)n * sizeof *rstd);
    float *kpe = malloc((size_t)n * dr * sizeof *kpe), *dkpe = calloc((size_t)n * dr, sizeof *dkpe);
    float *ds = malloc(nn * sizeof *ds);
    hs_status st = HS_OK;
    if (!q || !dq || !kv || !dkv || !xh || !lat || !dlat || !rstd || !kpe || !dkpe || !ds) {
        st = HS_E_NOMEM;
        goto done;
    }
    /* the forward's queries, keys and values again */
    float *src = (float *)(uintptr_t)qkv;
    if (ql > 0) {
        cols(src, W, 0, Qw, lat, n, 0);
        hs_op_rmsnorm(lat, L->mla_qa_norm, lat, NULL, NULL, n, Qw, MLA_NORM_EPS);
        hs_op_linear(lat, L->mla_qb, NULL, q, n, Qw, Hq);
    } else {
        cols(src, W, 0, Hq, q, n, 0);
    }
    cols(src, W, Qw, kvl, lat, n, 0);
    hs_op_rmsnorm(lat, L->mla_kva_norm, lat, xh, rstd, n, kvl, MLA_NORM_EPS);
    hs_op_linear(lat, L->mla_kvb, NULL, kv, n, kvl, Hkv);
    cols(src, W, Qw + kvl, dr, kpe, n, 0);
    turn(q, n, Hq, dn, H, dqk, dr, inv, af, 1.0);
    turn(kpe, n, dr, 0, 1, dr, dr, inv, af, 1.0);
    for (int h = 0; h < H; h++) { /* dV, dS, then dq, dk_nope and the shared dk_rope */
        const float *p = probs + (size_t)h * nn, *dc = dctx + (size_t)h * dv;
        const float *qh = q + (size_t)h * dqk, *kh = kv + (size_t)h * (dn + dv);
        float *dqh = dq + (size_t)h * dqk, *dkh = dkv + (size_t)h * (dn + dv);
        for (int i = 0; i < n; i++) /* P^T, then dV = P^T dctx */
            for (int j = 0; j < n; j++)
                ds[(size_t)j * n + i] = p[(size_t)i * n + j];
        hs_op_gemm(0, n, dv, n, 1.0f, ds, n, dc, A, 0.0f, dkh + dn, Hkv);
        hs_op_gemm(1, n, n, dv, 1.0f, dc, A, kh + dn, Hkv, 0.0f, ds, n); /* dP */
        for (int i = 0; i < n; i++) {
            const float *pi = p + (size_t)i * n;
            float *di = ds + (size_t)i * n;
            int lo = hs_vis_lo(vis, i), hi = hs_vis_hi(vis, i, n);
            double s = 0;
            for (int j = lo; j < hi; j++)
                s += (double)di[j] * pi[j];
            for (int j = 0; j < n; j++)
                di[j] = j >= lo && j < hi ? (float)(pi[j] * ((double)di[j] - s)) : 0.0f;
        }
        hs_op_gemm(0, n, dn, n, scale, ds, n, kh, Hkv, 0.0f, dqh, Hq);
        hs_op_gemm(0, n, dr, n, scale, ds, n, kpe, dr, 0.0f, dqh + dn, Hq);
        for (int i = 0; i < n; i++) /* dS^T: the transposes by hand (hs_op_gemm's a is not) */
            for (int j = i + 1; j < n; j++) {
                float t = ds[(size_t)i * n + j];
                ds[(size_t)i * n + j] = ds[(size_t)j * n + i];
                ds[(size_t)j * n + i] = t;
            }
        hs_op_gemm(0, n, dn, n, scale, ds, n, qh, Hq, 0.0f, dkh, Hkv);
        hs_op_gemm(0, n, dr, n, scale, ds, n, qh + dn, Hq, 1.0f, dkpe, dr);
    }
    turn(dq, n, Hq, dn, H, dqk, dr, inv, af, -1.0);
    turn(dkpe, n, dr, 0, 1, dr, dr, inv, af, -1.0);
    cols(dqkv, W, Qw + kvl, dr, dkpe, n, 1);
    /* the latent: back through kv_b and its norm */
    hs_op_gemm(1, n, kvl, Hkv, 1.0f, dkv, Hkv, L->mla_kvb, Hkv, 0.0f, dlat, kvl);
    hs_grad_rms_back(xh, rstd, L->mla_kva_norm, dlat, dlat, n, kvl);
    cols(dqkv, W, Qw, kvl, dlat, n, 1);
    if (ql > 0) { /* the query through q_b and q_a's norm */
        cols(src, W, 0, Qw, lat, n, 0);
        hs_op_rmsnorm(lat, L->mla_qa_norm, lat, xh, rstd, n, Qw, MLA_NORM_EPS);
        hs_op_gemm(1, n, Qw, Hq, 1.0f, dq, Hq, L->mla_qb, Hq, 0.0f, dlat, Qw);
        hs_grad_rms_back(xh, rstd, L->mla_qa_norm, dlat, dlat, n, Qw);
        cols(dqkv, W, 0, Qw, dlat, n, 1);
    } else {
        cols(dqkv, W, 0, Hq, dq, n, 1);
    }
done:
    free(q);
    free(dq);
    free(kv);
    free(dkv);
    free(xh);
    free(lat);
    free(dlat);
    free(rstd);
    free(kpe);
    free(dkpe);
    free(ds);
    return st;
}
