/* Multi-head latent attention (see mla.h): the latent and query expanded per head, the
 * decoupled rotary key shared by the heads, then scores, softmax and P V head by head with
 * the library's GEMM. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/block.h"
#include "nn/mla.h"
#include "nn/ops.h"

/* The norm DeepSeek-V2 puts on the compressed query and latent: RMSNorm with eps 1e-6
 * (transformers' DeepseekV2RMSNorm default; not the config's rms_norm_eps). */
#define MLA_NORM_EPS 1e-6f

/* dst: (n, w) = columns [off, off + w) of src: (n, ld). */
static void take_cols(const float *src, int ld, int off, int w, float *dst, int n)
{
    for (int i = 0; i < n; i++)
        memcpy(dst + (size_t)i * (size_t)w, src + (size_t)i * (size_t)ld + off,
               (size_t)w * sizeof *dst);
}

/* Pairs (2k, 2k + 1) of the rot dimensions at x + col in each of n rows of x: (n, ld),
 * count blocks of them stride apart in a row, turned by i inv_freq[k] and scaled by f. */
static void turn_pairs(float *x, int n, int ld, int col, int count, int stride, int rot,
                       const double *inv_freq, float f)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < rot / 2; k++) {
            double ang = (double)i * inv_freq[k], cs = cos(ang) * f, sn = sin(ang) * f;
            for (int b = 0; b < count; b++) {
                float *p = x + (size_t)i * (size_t)ld + col + (size_t)b * (size_t)stride + 2 * k;
                double u = p[0], v = p[1];
                p[0] = (float)(u * cs - v * sn);
                p[1] = (float)(u * sn + v * cs);
            }
        }
}

/* Each head's mean |rope| / (|nope| + |rope|) over the visible cells of c (the nope part)
 * and r (the rope part), both (n, n). */
static double share_of(const float *c, const float *r, int n, hs_visibility vis)
{
    double sum = 0;
    long cells = 0;
    for (int i = 0; i < n; i++)
        for (int j = hs_vis_lo(vis, i); j < hs_vis_hi(vis, i, n); j++) {
            double a = fabs(c[(size_t)i * n + j]), b = fabs(r[(size_t)i * n + j]);
            if (a + b > 0) {
                sum += b / (a + b);
                cells++;
            }
        }
    return cells ? sum / (double)cells : 0;
}

hs_status hs_mla_attn(const hs_model_config *c, const hs_layer *L, const hs_rope *rope,
                      const double *inv_freq, hs_visibility vis, const float *qkv, float *ctx,
                      int n, const float *head_mask, float *probs, size_t *bad_row,
                      double *pos_share)
{
    const hs_arch *a = c->arch;
    int H = c->n_head, dn = a->mla_nope, dr = a->rotary_dims, dqk = dn + dr, dv = c->d_head;
    int W = hs_mla_qkv_width(c), Qw = hs_mla_q_width(c), kvl = a->mla_kv_lora;
    int Hq = H * dqk, Hkv = H * (dn + dv), A = H * dv;
    size_t nn = (size_t)n * (size_t)n;
    float *q = malloc((size_t)n * (size_t)Hq * sizeof *q);
    float *kv = malloc((size_t)n * (size_t)Hkv * sizeof *kv);
    float *lat = malloc((size_t)n * (size_t)(kvl > Qw ? kvl : Qw) * sizeof *lat);
    float *kpe = malloc((size_t)n * (size_t)dr * sizeof *kpe);
    float *s = probs ? NULL : malloc(nn * sizeof *s);
    float *rp = pos_share ? malloc(2 * nn * sizeof *rp) : NULL;
    hs_status st = HS_OK;
    *bad_row = (size_t)-1;
    if (!q || !kv || !lat || !kpe || (!probs && !s) || (pos_share && !rp)) {
        st = HS_E_NOMEM;
        goto done;
    }
    if (a->mla_q_lora > 0) { /* q = RMSNorm(x W_qa) W_qb */
        take_cols(qkv, W, 0, Qw, lat, n);
        hs_op_rmsnorm(lat, L->mla_qa_norm, lat, NULL, NULL, n, Qw, MLA_NORM_EPS);
        hs_op_linear(lat, L->mla_qb, NULL, q, n, Qw, Hq);
    } else {
        take_cols(qkv, W, 0, Hq, q, n);
    }
    take_cols(qkv, W, Qw, kvl, lat, n); /* the latent, its norm, every head's [k_nope | v] */
    hs_op_rmsnorm(lat, L->mla_kva_norm, lat, NULL, NULL, n, kvl, MLA_NORM_EPS);
    hs_op_linear(lat, L->mla_kvb, NULL, kv, n, kvl, Hkv);
    take_cols(qkv, W, Qw + kvl, dr, kpe, n);
    float f = rope->attn_factor > 0 ? rope->attn_factor : 1.0f;
    turn_pairs(q, n, Hq, dn, H, dqk, dr, inv_freq, f);
    turn_pairs(kpe, n, dr, 0, 1, dr, dr, inv_freq, f);
    float scale = (float)(a->mla_scale / sqrt((double)dqk));
    for (int h = 0; h < H; h++) {
        float *sh = probs ? probs + (size_t)h * nn : s;
        const float *qh = q + (size_t)h * (size_t)dqk, *kh = kv + (size_t)h * (size_t)(dn + dv);
        if (pos_share) { /* the two parts apart, then their sum */
            hs_op_gemm(1, n, n, dn, scale, qh, Hq, kh, Hkv, 0.0f, rp, n);
            hs_op_gemm(1, n, n, dr, scale, qh + dn, Hq, kpe, dr, 0.0f, rp + nn, n);
            pos_share[h] = share_of(rp, rp + nn, n, vis);
            for (size_t k = 0; k < nn; k++)
                sh[k] = rp[k] + rp[nn + k];
        } else {
            hs_op_gemm(1, n, n, dn, scale, qh, Hq, kh, Hkv, 0.0f, sh, n);
            hs_op_gemm(1, n, n, dr, scale, qh + dn, Hq, kpe, dr, 1.0f, sh, n);
        }
        hs_op_softmax_rows(sh, n, vis);
        size_t bad = hs_op_first_nonfinite(sh, nn);
        if (bad != (size_t)-1 && *bad_row == (size_t)-1)
            *bad_row = (size_t)h * (size_t)n + bad / (size_t)n;
        float xi = head_mask ? head_mask[h] : 1.0f;
        hs_op_gemm(0, n, dv, n, xi, sh, n, kh + dn, Hkv, 0.0f, ctx + (size_t)h * (size_t)dv, A);
    }
done:
    free(q);
    free(kv);
    free(lat);
    free(kpe);
    free(s);
    free(rp);
    return st;
}

hs_status hs_mla_position_share(const hs_model *m, const int32_t *ids, int n, double *share,
                                hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    if (!c->arch->mla_kv_lora)
        return hs_fail(err, HS_E_UNSUPPORTED, "the position share of attention logits is "
                       "defined for latent attention; architecture '%s' has none",
                       c->arch->name);
    hs_forward_ws *ws = NULL;
    hs_status st = hs_forward_ws_new(m, n, &ws, err);
    if (st)
        return st;
    ws->mla_pos_share = share;
    ws->stop_after_attn = 1;
    st = hs_forward(m, ids, NULL, n, NULL, ws, err);
    hs_forward_ws_free(ws);
    return st;
}
