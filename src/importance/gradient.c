/* Gradient head importance (Michel et al. 2019): I_{l,h} = |dL/dxi_{l,h}| at xi = 1, where
 * xi is the head mask (context_h = xi_h * P_h V_h). One forward pass that keeps what the
 * backward needs, then reverse mode written out by hand (no autodiff) from the loss down to
 * layer 0. Only gradients with respect to activations are formed, never weight gradients.
 *
 * The forward half is the forward pass's own block (src/nn/block.c) asked to keep the
 * activations the backward needs, so the loss differentiated is the loss hs_loss_eval_run
 * computes. The backward reads the same descriptor: pre- or post-norm LayerNorm blocks with
 * a gelu MLP; the loaders refuse what the descriptor can say but neither pass implements. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "headscope/importance.h"
#include "internal.h"
#include "nn/block.h"
#include "nn/ops.h"

/* ---- the backward kernels ------------------------------------------------------------ */

/* dx: (n, in) = dy: (n, out) · w^T, w: (in, out); accumulate adds to dx. */
static void linear_back(const float *dy, const float *w, float *dx, int n, int in, int out,
                        int accumulate)
{
    hs_op_gemm(1, n, in, out, 1.0f, dy, out, w, out, accumulate ? 1.0f : 0.0f, dx, in);
}

/* LayerNorm backward, y = xhat * w + b: with g = dy * w,
 * dx = rstd * (g - mean(g) - xhat * mean(g * xhat)). dx may alias dy; accumulate adds. */
static void layernorm_back(const float *xhat, const float *rstd, const float *w, const float *dy,
                           float *dx, int n, int d, int accumulate)
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
        double mg = sg / d, mgh = sgh / d, r = rstd[i];
        for (int k = 0; k < d; k++) {
            float v = (float)(r * ((double)gi[k] * w[k] - mg - hi[k] * mgh));
            xi[k] = accumulate ? xi[k] + v : v;
        }
    }
}

/* dy: (count) *= GELU'(x: (count)).
 *   erf:  0.5 (1 + erf(x/√2)) + x φ(x), φ(x) = exp(-x²/2) / √(2π)
 *   tanh: 0.5 (1 + tanh u) + 0.5 x (1 - tanh² u) √(2/π) (1 + 3·0.044715 x²),
 *         u = √(2/π) (x + 0.044715 x³) */
static void gelu_back(const float *x, float *dy, size_t count, hs_activation act)
{
    if (act == HS_ACT_GELU_ERF) {
#pragma omp parallel for schedule(static) if (count >= 32768)
        for (size_t i = 0; i < count; i++) {
            double v = x[i];
            double dg = 0.5 * (1.0 + erf(v * 0.70710678118654752)) +
                        v * exp(-0.5 * v * v) * 0.39894228040143268;
            dy[i] = (float)(dy[i] * dg);
        }
    } else {
        const double k = 0.79788456080286536;
#pragma omp parallel for schedule(static) if (count >= 32768)
        for (size_t i = 0; i < count; i++) {
            double v = x[i], t = tanh(k * (v + 0.044715 * v * v * v));
            double dg = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * k * (1.0 + 3 * 0.044715 * v * v);
            dy[i] = (float)(dy[i] * dg);
        }
    }
}


/* Attention backward of one layer: dctx: (n, d) → dqkv: (n, 3d). dp: (H, n, n) scratch.
 * Heads run in parallel (each writes its own columns of dqkv).
 * ctx_h = P_h V_h, P_h = softmax(scale Q_h K_h^T):
 *   dV = P^T dctx;  dP = dctx V^T;  dS = P ⊙ (dP − rowsum(dP ⊙ P));
 *   dQ = scale dS K;  dK = scale dS^T Q.  Causal entries have P = 0, so dS = 0 there. */
static void attention_back(const hs_model_config *c, const float *qkv, const float *probs,
                           const float *dctx, float *dqkv, float *dps, int n)
{
    int d = c->d_model, dh = c->d_head;
    float scale = 1.0f / sqrtf((float)dh);
    size_t nn = (size_t)n * (size_t)n;
#pragma omp parallel for schedule(dynamic) if (c->n_head > 1 && nn * (size_t)c->n_head >= 32768)
    for (int h = 0; h < c->n_head; h++) {
        size_t off = (size_t)h * (size_t)dh;
        const float *q = qkv + off, *k = qkv + (size_t)d + off, *v = qkv + 2 * (size_t)d + off;
        const float *p = probs + (size_t)h * nn, *dc = dctx + off;
        float *dp = dps + (size_t)h * nn;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, dh, n, 1.0f, p, n, dc, d, 0.0f,
                    dqkv + 2 * (size_t)d + off, 3 * d);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, dh, 1.0f, dc, d, v, 3 * d, 0.0f,
                    dp, n);
        for (int i = 0; i < n; i++) {
            const float *pi = p + (size_t)i * (size_t)n;
            float *di = dp + (size_t)i * (size_t)n;
            int w = c->causal ? i + 1 : n;
            double s = 0;
            for (int j = 0; j < w; j++)
                s += (double)di[j] * pi[j];
            for (int j = 0; j < w; j++)
                di[j] = (float)(pi[j] * ((double)di[j] - s));
            for (int j = w; j < n; j++)
                di[j] = 0.0f;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dh, n, scale, dp, n, k, 3 * d,
                    0.0f, dqkv + off, 3 * d);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, dh, n, scale, dp, n, q, 3 * d,
                    0.0f, dqkv + (size_t)d + off, 3 * d);
    }
}


/* ---- the pass ----------------------------------------------------------------------- */

static hs_status check_input(const hs_model *m, const hs_loss_input *in, hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    if (c->arch->pos == HS_POS_ROTARY) /* TEMP */
        return hs_fail(err, HS_E_UNSUPPORTED, "gradient importance: the backward pass of %s "
                       "(architecture '%s') is not implemented", "rotary", c->arch->name);
    if (in->kind == HS_LOSS_REPR)
        return hs_fail(err, HS_E_UNSUPPORTED, "gradient importance: the representation loss has "
                       "zero gradient at xi = 1 (it is at its minimum); use ablation importance");
    if (in->kind != HS_LOSS_LM && in->kind != HS_LOSS_MLM)
        return hs_fail(err, HS_E_ARG, "gradient importance: unknown loss kind %d", (int)in->kind);
    if (in->n < 1 || !in->ids)
        return hs_fail(err, HS_E_ARG, "gradient importance: no tokens");
    if (in->n > c->n_ctx)
        return hs_fail(err, HS_E_INPUT, "%d tokens exceed the model's context of %d", in->n,
                       c->n_ctx);
    if (!c->has_lm_head)
        return hs_fail(err, HS_E_INPUT, in->kind == HS_LOSS_LM
                                            ? "the model has no language-model head"
                                            : "the model has no MLM head");
    if (in->kind == HS_LOSS_LM && in->n < 2)
        return hs_fail(err, HS_E_INPUT, "the language-model loss needs at least 2 tokens");
    hs_status st = hs_loss_mlm_check(c, in, err);
    if (st)
        return st;
    for (int i = 0; i < in->n; i++) {
        if (in->ids[i] < 0 || in->ids[i] >= c->vocab_size)
            return hs_fail(err, HS_E_INPUT, "token id %d at position %d is outside the vocabulary "
                           "(size %d)", (int)in->ids[i], i, c->vocab_size);
        if (in->type_ids && c->arch->token_types &&
            (in->type_ids[i] < 0 || in->type_ids[i] >= c->type_vocab_size))
            return hs_fail(err, HS_E_INPUT, "token type %d at position %d is out of range",
                           (int)in->type_ids[i], i);
    }
    return HS_OK;
}

hs_status hs_gradient_signed(const hs_model *m, const hs_loss_input *in, double *g, double *loss,
                             hs_error *err)
{
    return hs_gradient_signed_masked(m, in, NULL, g, loss, err);
}

hs_status hs_gradient_signed_masked(const hs_model *m, const hs_loss_input *in,
                                    const float *head_mask, double *g, double *loss, hs_error *err)
{
    hs_status st = check_input(m, in, err);
    if (st)
        return st;
    const hs_model_config *c = &m->cfg;
    const int n = in->n, d = c->d_model, f = c->d_ff, H = c->n_head, L = c->n_layer;
    const int V = c->vocab_size, pre = c->arch->norm_place == HS_NORM_PRE;
    const int R = in->kind == HS_LOSS_LM ? n - 1 : in->n_pos; /* loss rows */
    const size_t nd = (size_t)n * (size_t)d, nf = (size_t)n * (size_t)f;
    const size_t nn = (size_t)n * (size_t)n, rd = (size_t)R * (size_t)d;
    hs_forward_ws *ws = NULL;
    if ((st = hs_forward_ws_new(m, n, &ws, err)))
        return st;

    /* One allocation: per layer 6nd + 2n + Hn² + n·f floats, then the head and the
     * backward scratch. */
    size_t per_layer = 6 * nd + 2 * (size_t)n + (size_t)H * nn + nf;
    size_t head = 5 * rd + 2 * (size_t)R + (size_t)R * (size_t)V;
    size_t scratch = 2 * nd + 3 * nd + nf + (size_t)H * nn; /* dx, dh, dqkv, dff, dp */
    size_t total, layers_sz;
    if (hs_mul_size(per_layer, (size_t)L, &layers_sz) || hs_add_size(layers_sz, head, &total) ||
        hs_add_size(total, scratch, &total) || hs_mul_size(total, sizeof(float), &total)) {
        hs_forward_ws_free(ws);
        return hs_fail(err, HS_E_NOMEM, "gradient importance: size overflow");
    }
    float *buf = malloc(total);
    hs_block_keep *lay = malloc((size_t)L * sizeof *lay);
    int *rows = malloc((size_t)R * sizeof *rows), *tgt = malloc((size_t)R * sizeof *tgt);
    double *row_loss = malloc((size_t)R * sizeof *row_loss);
    if (!buf || !lay || !rows || !tgt || !row_loss) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory for gradient importance (%zu MB)", total >> 20);
        goto fail;
    }
    float *p = buf;
    for (int l = 0; l < L; l++) {
        hs_block_keep *gl = &lay[l];
        gl->xhat1 = p, p += nd;
        gl->rstd1 = p, p += n;
        gl->qkv = p, p += 3 * nd;
        gl->probs = p, p += (size_t)H * nn;
        gl->ctx = p, p += nd;
        gl->xhat2 = p, p += nd;
        gl->rstd2 = p, p += n;
        gl->ff = p, p += nf;
    }
    float *hrows = p; p += rd;    /* (R, d) final hidden rows the loss uses, final-normed */
    float *fxhat = p; p += rd;    /* (R, d) final norm normalised input */
    float *hpre = p; p += rd;     /* (R, d) head transform pre-activation */
    float *hxhat = p; p += rd;    /* (R, d) head transform norm normalised input */
    float *hy = p; p += rd;       /* (R, d) head transform output */
    float *frstd = p; p += R;     /* (R) */
    float *hrstd = p; p += R;     /* (R) */
    float *logits = p; p += (size_t)R * (size_t)V; /* (R, V), then d loss / d logits */
    float *dx = p; p += nd;       /* (n, d) */
    float *dh = p; p += nd;       /* (n, d) */
    float *dqkv = p; p += 3 * nd; /* (n, 3d) */
    float *dff = p; p += nf;      /* (n, f) */
    float *dp = p; p += (size_t)H * nn; /* (H, n, n) */
    float *x = ws->x;             /* (n, d) residual stream */

    for (int r = 0; r < R; r++) {
        rows[r] = in->kind == HS_LOSS_LM ? r : in->positions[r];
        tgt[r] = in->kind == HS_LOSS_LM ? in->ids[r + 1] : in->targets[r];
    }

    /* Forward, keeping each layer's activations. */
    hs_embed(m, in->ids, in->type_ids, n, x);
    for (int l = 0; l < L; l++) {
        const float *xi = head_mask ? head_mask + (size_t)l * (size_t)H : NULL;
        if ((st = hs_block_forward(m, l, ws, n, 1, xi, 0, NULL, &lay[l], err)))
            goto fail;
    }
    /* Head on the loss rows only (the final norm and the head transform are row-wise). */
    for (int r = 0; r < R; r++)
        memcpy(hrows + (size_t)r * (size_t)d, x + (size_t)rows[r] * (size_t)d, (size_t)d * sizeof *x);
    hs_final_norm(m, hrows, hrows, fxhat, frstd, R);
    const float *hdec = hs_head_transform(m, hrows, hy, hpre, hxhat, hrstd, R);
    hs_head_decode(m, hdec, R, logits);

    /* Loss and d loss / d logits = (softmax - onehot) / R, row by row. */
    /* rows in parallel, their losses summed in row order (the same value on any thread count) */
#pragma omp parallel for schedule(static) if (R > 1)
    for (int r = 0; r < R; r++) {
        float *row = logits + (size_t)r * (size_t)V, mx;
        float target = row[tgt[r]];
        double s = hs_op_exp_shift(row, V, &mx); /* row = exp(logit - max) */
        row_loss[r] = log(s) - (double)(target - mx);
        float inv = (float)(1.0 / (s * R));
        for (int v = 0; v < V; v++)
            row[v] *= inv;
        row[tgt[r]] -= (float)(1.0 / R);
    }
    double sum = 0;
    for (int r = 0; r < R; r++)
        sum += row_loss[r];
    double lossv = sum / R;
    if (!isfinite(lossv)) {
        st = hs_fail(err, HS_E_VALUE, "the loss is not finite");
        goto fail;
    }

    /* Backward through the head: d hy = dlogits · decoder, decoder: (V, d); then back
     * through the head transform and the final norm, those the model has. */
    hs_op_gemm(0, R, d, V, 1.0f, logits, V, m->decoder, d, 0.0f, hy, d);
    if (c->arch->head == HS_HEAD_MLM) {
        layernorm_back(hxhat, hrstd, m->mlm_ln_w, hy, hy, R, d, 0);
        gelu_back(hpre, hy, rd, c->act);
        linear_back(hy, m->mlm_w, hrows, R, d, d, 0);
        memcpy(hy, hrows, rd * sizeof *hy);
    }
    if (pre)
        layernorm_back(fxhat, frstd, m->lnf_w, hy, hy, R, d, 0);
    memset(dx, 0, nd * sizeof *dx); /* d loss / d (stream leaving the last layer) */
    for (int r = 0; r < R; r++)
        hs_op_add(dx + (size_t)rows[r] * (size_t)d, hy + (size_t)r * (size_t)d, (size_t)d);

    /* Backward through the layers; dx holds d loss / d (stream leaving layer l). */
    for (int l = L - 1; l >= 0; l--) {
        const hs_layer *W = &m->layers[l];
        hs_block_keep *gl = &lay[l];
        if (!pre) /* x_out = LN2(z), z = a + MLP(a) */
            layernorm_back(gl->xhat2, gl->rstd2, W->ln2_w, dx, dx, n, d, 0);
        linear_back(dx, W->w_proj, dff, n, f, d, 0);
        gelu_back(gl->ff, dff, nf, c->act);
        if (pre) { /* x_out = x_mid + MLP(LN2(x_mid)) */
            linear_back(dff, W->w_fc, dh, n, d, f, 0);
            layernorm_back(gl->xhat2, gl->rstd2, W->ln2_w, dh, dx, n, d, 1);
        } else {     /* a = LN1(x_in + attn), da = dz + MLP'; then through LN1 */
            linear_back(dff, W->w_fc, dx, n, d, f, 1);
            layernorm_back(gl->xhat1, gl->rstd1, W->ln1_w, dx, dx, n, d, 0);
        }
        /* dx is now d loss / d (x_in + ctx W_O + b_O). */
        linear_back(dx, W->w_o, dh, n, d, d, 0); /* dh = d loss / d ctx */
        for (int hh = 0; hh < H; hh++) {
            double s = 0;
            for (int i = 0; i < n; i++) {
                const float *a = dh + (size_t)i * (size_t)d + (size_t)hh * (size_t)c->d_head;
                const float *b = gl->ctx + (size_t)i * (size_t)d + (size_t)hh * (size_t)c->d_head;
                for (int e = 0; e < c->d_head; e++)
                    s += (double)a[e] * b[e];
            }
            g[l * H + hh] = s;
        }
        if (l == 0)
            break;
        if (head_mask) /* d loss / d (P V) = xi_h d loss / d context */
            for (int i = 0; i < n; i++)
                for (int hh = 0; hh < H; hh++) {
                    float xv = head_mask[(size_t)l * (size_t)H + (size_t)hh];
                    float *a = dh + (size_t)i * (size_t)d + (size_t)hh * (size_t)c->d_head;
                    for (int e = 0; e < c->d_head; e++)
                        a[e] *= xv;
                }
        attention_back(c, gl->qkv, gl->probs, dh, dqkv, dp, n);
        if (pre) {
            linear_back(dqkv, W->w_qkv, dh, n, d, 3 * d, 0);
            layernorm_back(gl->xhat1, gl->rstd1, W->ln1_w, dh, dx, n, d, 1);
        } else {
            linear_back(dqkv, W->w_qkv, dx, n, d, 3 * d, 1);
        }
    }
    if (loss)
        *loss = lossv;
    st = HS_OK;
fail:
    free(tgt);
    free(rows);
    free(row_loss);
    free(lay);
    free(buf);
    hs_forward_ws_free(ws);
    return st;
}

hs_status hs_gradient_importance(const hs_model *m, const hs_loss_input *in, double *raw,
                                 double *norm, hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    int H = c->n_head, L = c->n_layer;
    double *g = malloc((size_t)L * (size_t)H * sizeof *g);
    if (!g)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    hs_status st = hs_gradient_signed(m, in, g, NULL, err);
    if (st == HS_OK) {
        for (int l = 0; l < L; l++) {
            double ss = 0;
            for (int h = 0; h < H; h++)
                ss += g[l * H + h] * g[l * H + h];
            double nrm = sqrt(ss);
            for (int h = 0; h < H; h++) {
                double a = fabs(g[l * H + h]);
                if (raw)
                    raw[l * H + h] = a;
                if (norm)
                    norm[l * H + h] = nrm > 0 ? a / nrm : 0.0;
            }
        }
    }
    free(g);
    return st;
}
