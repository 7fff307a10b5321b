/* Gradient importance of an encoder-decoder (T5): the signed derivative of the decoder's
 * teacher-forced loss by every head's mask at all ones, for the self-attention heads of both
 * stacks and the decoder's cross-attention heads (importance.h), by a forward pass that keeps
 * each layer's activations and the hand-written backward:
 *   x_a = x + attn(norm1 x) W_o;  [decoder] x_b = x_a + cross(normx x_a, enc) W_xo;
 *   x' = x_b + mlp(norm2 x_b);  enc = norm_e(encoder's last stream);  logits = s norm_f(y) E^T.
 * dL/d xi_h = sum over the head's context of dctx_h * (P_h V_h); the cross-attention's dK and
 * dV flow into the encoder's output, whose gradient runs the encoder's backward. The relative
 * position bias is a constant of the scores and needs no term of its own. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "core/core.h"
#include "headscope/importance.h"
#include "importance/importance_internal.h"
#include "model/emb_stored.h"
#include "model/model_internal.h"
#include "nn/block.h"
#include "nn/ops.h"

/* What one layer's backward reads (n rows of its stack; the cross-attention's only in a
 * decoder layer). */
typedef struct kept {
    float *xh1, *r1, *qkv, *p, *pv;   /* (n, d), (n), (n, 3A), (H, n, n), (n, A) */
    float *xhx, *rx, *q, *kv, *px, *pvx; /* (n, d), (n), (n, A), (ne, 2A), (H, n, ne), (n, A) */
    float *xh2, *r2, *pre;            /* (n, d), (n), (n, F) */
} kept;

typedef struct run {
    const hs_model *m;
    const hs_model_config *c;
    int d, A, F, H;
    kept *k;       /* (n_layer) */
    float *tmp;    /* (rows, max(d, 3A, F, 3 d_ff)) scratch */
    float *tmp2;   /* the same */
    float *dp;     /* (rows, rows) */
    const float *hm, *xhm; /* (n_layer, n_head) the heads' masks, or NULL (all ones) */
} run;

/* ctx: (n, A) = xi_h pv_h for every head h (xi: (H), NULL: ones, ctx then pv itself). */
static const float *masked(const run *r, const float *xi, const float *pv, float *ctx, int n)
{
    if (!xi)
        return pv;
    int dh = r->c->d_head;
    for (int i = 0; i < n; i++)
        for (int h = 0; h < r->H; h++)
            for (int e = 0; e < dh; e++) {
                size_t o = (size_t)i * r->A + (size_t)h * dh + e;
                ctx[o] = xi[h] * pv[o];
            }
    return ctx;
}

/* The mask row of layer l in mask (n_layer, n_head), or NULL. */
static const float *mask_row(const run *r, const float *mask, int l)
{
    return mask ? mask + (size_t)l * (size_t)r->H : NULL;
}

static void kept_free(kept *k)
{
    float **f[] = {&k->xh1, &k->r1, &k->qkv, &k->p, &k->pv, &k->xhx, &k->rx, &k->q, &k->kv,
                   &k->px, &k->pvx, &k->xh2, &k->r2, &k->pre};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        free(*f[i]);
}

static int kept_alloc(const run *r, kept *k, int n, int ne, int cross)
{
    size_t nd = (size_t)n * r->d, nA = (size_t)n * r->A, H = (size_t)r->H;
    size_t sz[] = {nd, (size_t)n, 3 * nA, H * n * n, nA, nd, (size_t)n, nA,
                   (size_t)ne * 2 * r->A, H * n * ne, nA, nd, (size_t)n, (size_t)n * r->F};
    float **f[] = {&k->xh1, &k->r1, &k->qkv, &k->p, &k->pv, &k->xhx, &k->rx, &k->q, &k->kv,
                   &k->px, &k->pvx, &k->xh2, &k->r2, &k->pre};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if ((cross || i < 5 || i > 10) && !(*f[i] = malloc(sz[i] * sizeof(float))))
            return -1;
    return 0;
}

/* Layer l on x: (n, d) in place, keeping what its backward reads. */
static hs_status layer_forward(run *r, int l, float *x, int n, const float *enc, int ne,
                               const float *rel, const int32_t *bucket, hs_error *err)
{
    const hs_model_config *c = r->c;
    int d = r->d, A = r->A, F = r->F, f = c->d_ff;
    kept *k = &r->k[l];
    hs_layer W;
    hs_status st = hs_layer_get(r->m, l, &W, err);
    if (st)
        return st;
    size_t bad;
    hs_op_rmsnorm(x, W.ln1_w, r->tmp, k->xh1, k->r1, n, d, c->ln_eps);
    hs_op_linear(r->tmp, W.w_qkv, NULL, k->qkv, n, d, 3 * A);
    if (hs_encdec_attn(c, k->qkv, 3 * A, k->qkv + A, k->qkv + 2 * A, 3 * A, n, n,
                       hs_model_layer_visibility(c, l), rel, bucket, NULL, k->p, k->pv, &bad))
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
    if (!st)
        hs_op_linear_add(masked(r, mask_row(r, r->hm, l), k->pv, r->tmp2, n), W.w_o, NULL, x,
                         n, A, d);
    if (!st && W.w_xqkv) {
        hs_op_rmsnorm(x, W.xln_w, r->tmp, k->xhx, k->rx, n, d, c->ln_eps);
        hs_op_gemm(0, n, A, d, 1.0f, r->tmp, d, W.w_xqkv, 3 * A, 0.0f, k->q, A);
        hs_op_gemm(0, ne, 2 * A, d, 1.0f, enc, d, W.w_xqkv + A, 3 * A, 0.0f, k->kv, 2 * A);
        if (hs_encdec_attn(c, k->q, A, k->kv, k->kv + A, 2 * A, n, ne, hs_vis_from_causal(0),
                           NULL, NULL, NULL, k->px, k->pvx, &bad))
            st = hs_fail(err, HS_E_NOMEM, "out of memory");
        if (!st)
            hs_op_linear_add(masked(r, mask_row(r, r->xhm, l), k->pvx, r->tmp2, n), W.w_xo,
                             NULL, x, n, A, d);
    }
    if (!st) {
        hs_op_rmsnorm(x, W.ln2_w, r->tmp, k->xh2, k->r2, n, d, c->ln_eps);
        hs_op_linear(r->tmp, W.w_fc, NULL, k->pre, n, d, F);
        if (c->gated)
            hs_op_glu(k->pre, r->tmp2, n, f, c->act);
        else
            hs_op_gelu(k->pre, r->tmp2, (size_t)n * (size_t)f, c->act);
        hs_op_linear_add(r->tmp2, W.w_proj, NULL, x, n, f, d);
    }
    hs_layer_put(r->m, l);
    return st;
}

/* One attention's backward, every head: q: (nq, ldq), k and v: (nk, ldkv), head h at h
 * d_head; p: (H, nq, nk); dctx: (nq, A) → g[h] += sum dctx_h * pv_h (the head mask's
 * derivative at 1), dq: (nq, ldq), dk and dv: (nk, ldkv) at the same columns. Every row of
 * p is 0 where the query does not see the key, so dS is too. Unscaled scores (T5). */
static void attn_back(const run *r, const float *q, int ldq, const float *k, const float *v,
                      int ldkv, const float *p, const float *pv, const float *xi, int nq,
                      int nk, float *dctx, float *dq, float *dk, float *dv, double *g)
{
    int A = r->A, dh = r->c->d_head;
    float scale = r->c->arch->attn_unscaled ? 1.0f : 1.0f / sqrtf((float)dh);
    for (int h = 0; h < r->H; h++) {
        size_t off = (size_t)h * (size_t)dh;
        const float *ph = p + (size_t)h * nq * nk;
        float *dc = dctx + off;
        double s = 0;
        for (int i = 0; i < nq; i++)
            for (int e = 0; e < dh; e++)
                s += (double)dc[(size_t)i * A + e] * pv[(size_t)i * A + off + e];
        g[h] += s;
        if (xi) /* d loss / d (P V)_h = xi_h dctx_h */
            for (int i = 0; i < nq; i++)
                for (int e = 0; e < dh; e++)
                    dctx[(size_t)i * A + off + e] *= xi[h];
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, dh, nq, 1.0f, ph, nk, dc, A,
                    0.0f, dv + off, ldkv);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, dh, 1.0f, dc, A, v + off,
                    ldkv, 0.0f, r->dp, nk);
        for (int i = 0; i < nq; i++) {
            const float *pi = ph + (size_t)i * nk;
            float *di = r->dp + (size_t)i * nk;
            double rs = 0;
            for (int j = 0; j < nk; j++)
                rs += (double)di[j] * pi[j];
            for (int j = 0; j < nk; j++)
                di[j] = (float)(pi[j] * ((double)di[j] - rs));
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, dh, nk, scale, r->dp, nk,
                    k + off, ldkv, 0.0f, dq + off, ldq);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, dh, nq, scale, r->dp, nk,
                    q + off, ldq, 0.0f, dk + off, ldkv);
    }
}

/* Layer l's backward: dx: (n, d), the loss's gradient by its output stream, becomes the
 * gradient by its input; denc (ne, d) gains the cross-attention's; gself / gcross (H). */
static hs_status layer_back(run *r, int l, float *dx, int n, float *denc, int ne,
                            double *gself, double *gcross, hs_error *err)
{
    const hs_model_config *c = r->c;
    int d = r->d, A = r->A;
    kept *k = &r->k[l];
    hs_layer W;
    hs_status st = hs_layer_get(r->m, l, &W, err);
    if (st)
        return st;
    float *dh = r->tmp, *buf = r->tmp2; /* (n, d); (n, 3A) and more */
    hs_grad_mlp_back(c, &W, k->pre, dx, buf, dh, n);
    hs_grad_norm_back(1, k->xh2, k->r2, W.ln2_w, dh, dx, n, d, 1);
    if (W.w_xqkv) {
        float *dctx = buf, *dq = buf + (size_t)n * A, *dkv = dq + (size_t)n * A;
        hs_op_gemm(1, n, A, d, 1.0f, dx, d, W.w_xo, d, 0.0f, dctx, A);
        attn_back(r, k->q, A, k->kv, k->kv + A, 2 * A, k->px, k->pvx, mask_row(r, r->xhm, l),
                  n, ne, dctx, dq, dkv, dkv + A, gcross);
        hs_op_gemm(1, n, d, A, 1.0f, dq, A, W.w_xqkv, 3 * A, 0.0f, dh, d);
        hs_op_gemm(1, ne, d, 2 * A, 1.0f, dkv, 2 * A, W.w_xqkv + A, 3 * A, 1.0f, denc, d);
        hs_grad_norm_back(1, k->xhx, k->rx, W.xln_w, dh, dx, n, d, 1);
    }
    float *dctx = buf, *dqkv = buf + (size_t)n * A;
    hs_op_gemm(1, n, A, d, 1.0f, dx, d, W.w_o, d, 0.0f, dctx, A);
    attn_back(r, k->qkv, 3 * A, k->qkv + A, k->qkv + 2 * A, 3 * A, k->p, k->pv,
              mask_row(r, r->hm, l), n, n, dctx, dqkv, dqkv + A, dqkv + 2 * A, gself);
    hs_op_gemm(1, n, d, 3 * A, 1.0f, dqkv, 3 * A, W.w_qkv, 3 * A, 0.0f, dh, d);
    hs_grad_norm_back(1, k->xh1, k->r1, W.ln1_w, dh, dx, n, d, 1);
    hs_layer_put(r->m, l);
    return st;
}

/* The buffers of one gradient: the streams, the logits and what each layer keeps. */
typedef struct bufs {
    float *x, *enc, *y, *logits, *denc; /* (ns, d), (ns, d), (nt, d), (nt, V), (ns, d) */
    float *xhe, *re, *xhf, *rf;         /* the final norms' statistics */
    int32_t *bucket;                    /* (2 max(ns, nt) - 1) */
} bufs;

/* The forward with its keeps; *loss and, in b->logits, d loss / d logits. */
static hs_status forward_keep(run *r, bufs *b, const int32_t *src, int ns, const int32_t *dec,
                              const int32_t *target, int nt, double *loss, hs_error *err)
{
    const hs_model *m = r->m;
    const hs_model_config *c = r->c;
    int d = r->d, V = c->vocab_size, Le = c->n_enc_layer;
    hs_status st = HS_OK;
    for (int i = -(ns - 1); i < ns; i++)
        b->bucket[i + ns - 1] = hs_t5_bucket(i, 1, c->arch->rel_buckets, c->arch->rel_max_distance);
    hs_embed(m, src, NULL, ns, b->x);
    for (int l = 0; !st && l < Le; l++)
        st = layer_forward(r, l, b->x, ns, NULL, 0, m->rel_enc, b->bucket, err);
    if (st)
        return st;
    hs_op_rmsnorm(b->x, m->enc_lnf_w, b->enc, b->xhe, b->re, ns, d, c->ln_eps);
    for (int i = -(nt - 1); i < nt; i++)
        b->bucket[i + nt - 1] = hs_t5_bucket(i, 0, c->arch->rel_buckets, c->arch->rel_max_distance);
    hs_embed(m, dec, NULL, nt, b->y);
    for (int l = Le; !st && l < c->n_layer; l++)
        st = layer_forward(r, l, b->y, nt, b->enc, ns, m->rel_dec, b->bucket, err);
    if (st)
        return st;
    hs_op_rmsnorm(b->y, m->lnf_w, r->tmp, b->xhf, b->rf, nt, d, c->ln_eps);
    hs_head_decode(m, r->tmp, nt, b->logits);
    double sum = 0;
    for (int i = 0; i < nt; i++) { /* the row becomes (softmax - onehot) / nt */
        float *row = b->logits + (size_t)i * V, mx, t = row[target[i]];
        double z = hs_op_exp_shift(row, V, &mx);
        sum += log(z) + (double)mx - (double)t;
        for (int j = 0; j < V; j++)
            row[j] = (float)((double)row[j] / z / nt);
        row[target[i]] -= 1.0f / (float)nt;
    }
    *loss = sum / nt;
    return HS_OK;
}

/* The backward from d loss / d logits (b->logits) to every head's mask. */
static hs_status backward(run *r, bufs *b, int ns, int nt, double *gs, double *gx, hs_error *err)
{
    const hs_model *m = r->m;
    const hs_model_config *c = r->c;
    int d = r->d, Le = c->n_enc_layer, H = r->H;
    float scale = c->arch->head_scale > 0 ? c->arch->head_scale : 1.0f;
    hs_status st = hs_model_decoder_back(m, b->logits, nt, scale, r->tmp, err);
    if (st)
        return st;
    hs_grad_norm_back(1, b->xhf, b->rf, m->lnf_w, r->tmp, b->y, nt, d, 0);
    memset(b->denc, 0, (size_t)ns * d * sizeof *b->denc);
    for (int l = c->n_layer - 1; !st && l >= Le; l--)
        st = layer_back(r, l, b->y, nt, b->denc, ns, gs + (size_t)l * H, gx + (size_t)l * H, err);
    if (st)
        return st;
    hs_grad_norm_back(1, b->xhe, b->re, m->enc_lnf_w, b->denc, b->x, ns, d, 0);
    for (int l = Le - 1; !st && l >= 0; l--)
        st = layer_back(r, l, b->x, ns, NULL, 0, gs + (size_t)l * H, NULL, err);
    return st;
}

hs_status hs_encdec_gradient(const hs_model *m, const int32_t *src, int n_src,
                             const int32_t *target, int n_tgt, const float *head_mask,
                             const float *cross_head_mask, double *loss, double *self_grad,
                             double *cross_grad, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    if (!c->n_enc_layer)
        return hs_fail(err, HS_E_ARG, "model '%s' is not an encoder-decoder", c->arch->name);
    if (!c->has_lm_head)
        return hs_fail(err, HS_E_UNSUPPORTED, "the model has no language-model head");
    int ns = n_src, nt = n_tgt, nmax = ns > nt ? ns : nt, L = c->n_layer;
    run r = {.m = m, .c = c, .d = c->d_model, .A = hs_model_attn_width(c), .F = hs_ff_width(c),
             .H = c->n_head, .hm = head_mask, .xhm = cross_head_mask};
    bufs b = {0};
    int32_t *dec = malloc((size_t)(nt > 0 ? nt : 1) * sizeof *dec);
    hs_status st = dec ? hs_forward_check(m, src, NULL, ns, err) : hs_fail(err, HS_E_NOMEM, "out of memory");
    if (!st && nt >= 1) {
        dec[0] = c->decoder_start_id; /* teacher forcing */
        memcpy(dec + 1, target, (size_t)(nt - 1) * sizeof *dec);
        for (int i = 0; !st && i < nt; i++)
            if (target[i] < 0 || target[i] >= c->vocab_size)
                st = hs_fail(err, HS_E_INPUT, "target token id %d at position %d is outside the "
                             "vocabulary (size %d)", (int)target[i], i, c->vocab_size);
    }
    if (!st)
        st = hs_forward_check(m, dec, NULL, nt, err);
    if (st) {
        free(dec);
        return st;
    }
    size_t rows = (size_t)nmax, d = (size_t)r.d, wide = 3 * (size_t)c->d_ff + 6 * (size_t)r.A;
    r.k = calloc((size_t)L, sizeof *r.k);
    r.tmp = malloc(rows * (d > (size_t)r.F ? d : (size_t)r.F) * sizeof(float));
    r.tmp2 = malloc(rows * (wide + d) * sizeof(float));
    r.dp = malloc(rows * rows * sizeof(float));
    b.x = malloc((size_t)ns * d * sizeof(float));
    b.enc = malloc((size_t)ns * d * sizeof(float));
    b.denc = malloc((size_t)ns * d * sizeof(float));
    b.y = malloc((size_t)nt * d * sizeof(float));
    b.logits = malloc((size_t)nt * (size_t)c->vocab_size * sizeof(float));
    b.xhe = malloc((size_t)ns * d * sizeof(float));
    b.re = malloc((size_t)ns * sizeof(float));
    b.xhf = malloc((size_t)nt * d * sizeof(float));
    b.rf = malloc((size_t)nt * sizeof(float));
    b.bucket = malloc((2 * rows - 1) * sizeof *b.bucket);
    int bad = !r.k || !r.tmp || !r.tmp2 || !r.dp || !b.x || !b.enc || !b.denc || !b.y ||
              !b.logits || !b.xhe || !b.re || !b.xhf || !b.rf || !b.bucket;
    for (int l = 0; !bad && l < L; l++)
        bad = l < c->n_enc_layer ? kept_alloc(&r, &r.k[l], ns, 0, 0)
                                 : kept_alloc(&r, &r.k[l], nt, ns, 1);
    st = bad ? hs_fail(err, HS_E_NOMEM, "out of memory for the gradient's activations") : HS_OK;
    double *gx = NULL;
    if (!st && !(gx = calloc((size_t)L * r.H, sizeof *gx)))
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
    if (!st) {
        memset(self_grad, 0, (size_t)L * r.H * sizeof *self_grad);
        st = forward_keep(&r, &b, src, ns, dec, target, nt, loss, err);
    }
    if (!st)
        st = backward(&r, &b, ns, nt, self_grad, gx, err);
    for (int i = 0; !st && i < L * r.H; i++)
        cross_grad[i] = i / r.H < c->n_enc_layer ? NAN : gx[i];
    for (int l = 0; r.k && l < L; l++)
        kept_free(&r.k[l]);
    free(r.k);
    free(r.tmp);
    free(r.tmp2);
    free(r.dp);
    float *fb[] = {b.x, b.enc, b.denc, b.y, b.logits, b.xhe, b.re, b.xhf, b.rf};
    for (size_t i = 0; i < sizeof fb / sizeof fb[0]; i++)
        free(fb[i]);
    free(b.bucket);
    free(gx);
    free(dec);
    return st;
}
