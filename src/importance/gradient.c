/* Gradient head importance (Michel et al. 2019): I_{l,h} = |dL/dxi_{l,h}| at xi = 1, where
 * xi is the head mask (context_h = xi_h * P_h V_h). One forward pass that keeps what the
 * backward needs, then reverse mode written out by hand (no autodiff) from the loss down to
 * layer 0. Only gradients with respect to activations are formed, never weight gradients.
 *
 * The forward half is the forward pass's own block (src/nn/block.c) asked to keep the
 * activations the backward needs, so the loss differentiated is the loss hs_loss_eval_run
 * computes. The backward reads the same descriptor: pre- or post-norm blocks, LayerNorm or
 * RMSNorm, an MLP of any activation gated or not, sequential or parallel residual, rotary
 * queries and keys, grouped key/value heads (one K/V head too: multi-query), each layer's
 * visibility (causal, sliding window, bidirectional, prefix), heads of any width; the
 * loaders refuse what the descriptor can say but neither pass implements. ALiBi's bias is a
 * constant added to the scores: the kept probabilities include it, and it has no
 * derivative of its own (dS reaches Q and K alone). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "headscope/importance.h"
#include "importance/gradient_back.h"
#include "importance/gradient_mla.h"
#include "importance/importance_internal.h"
#include "model/emb_stored.h"
#include "model/model_internal.h"
#include "nn/block.h"
#include "nn/ops.h"

/* Every layer's activations are kept for the backward while they fit in keep_limit bytes;
 * past it (long texts: H n^2 floats a layer) only the stream entering each layer is kept and
 * the backward recomputes one layer's activations at a time from it (one more forward pass,
 * the same numbers). */
static size_t keep_limit = (size_t)512 << 20;

size_t hs_gradient_set_keep_limit(size_t bytes)
{
    size_t old = keep_limit;
    keep_limit = bytes;
    return old;
}

/* Logit rows of the head taken at once: (head_rows, V) floats, 26 MB at GPT-2's vocabulary,
 * whatever the number of loss rows (tests set fewer, to run several blocks on short texts). */
static int head_rows = 128;

int hs_gradient_set_head_rows(int rows)
{
    int old = head_rows;
    head_rows = rows >= 1 ? rows : 128;
    return old;
}

/* ---- the pass ----------------------------------------------------------------------- */

static hs_status check_input(const hs_model *m, const hs_loss_input *in, const hs_grad_taps *taps,
                             hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    const char *beyond = hs_arch_beyond_base(c->arch, c);
    if (beyond) /* the loaders refuse these; a descriptor changed by hand may not be */
        return hs_fail(err, HS_E_UNSUPPORTED, "gradient importance: the backward pass of %s "
                       "(architecture '%s') is not implemented", beyond, c->arch->name);
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
    if (in->kind == HS_LOSS_LM && in->n < 2 && !taps)
        return hs_fail(err, HS_E_INPUT, "the language-model loss needs at least 2 tokens");
    if (taps && (taps->row < 0 || taps->row >= in->n))
        return hs_fail(err, HS_E_ARG, "gradient: metric row %d outside %d tokens", taps->row,
                       in->n);
    hs_status st = taps ? HS_OK : hs_loss_rows_check(c, in, err);
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
    return hs_gradient_capped(m, in, head_mask, INFINITY, g, loss, NULL, err);
}

void hs_grad_scratch_free(hs_grad_scratch *s)
{
    if (!s)
        return;
    free(s->buf);
    hs_forward_ws_free(s->ws);
    *s = (hs_grad_scratch){0};
}

static hs_status gradient_pass(const hs_model *m, const hs_loss_input *in, const float *head_mask,
                               double cap, double *g, double *loss, hs_grad_scratch *keep,
                               const hs_grad_taps *taps, hs_error *err);

hs_status hs_gradient_capped(const hs_model *m, const hs_loss_input *in, const float *head_mask,
                             double cap, double *g, double *loss, hs_grad_scratch *keep,
                             hs_error *err)
{
    return gradient_pass(m, in, head_mask, cap, g, loss, keep, NULL, err);
}

hs_status hs_gradient_tapped(const hs_model *m, const hs_loss_input *in, const hs_grad_taps *taps,
                             hs_grad_scratch *keep, double *g, double *metric, hs_error *err)
{
    return gradient_pass(m, in, NULL, INFINITY, g, metric, keep, taps, err);
}

/* What the pass's phases share: the model and its sizes, the input, and the buffers carved
 * from one allocation (pass_alloc): each layer's kept activations, the loss rows' head
 * values, and the backward's scratch. */
typedef struct grad_pass {
    const hs_model *m;
    const hs_model_config *c;
    const hs_loss_input *in;
    const float *head_mask;   /* (L, H) xi, or NULL: 1 */
    const hs_grad_taps *taps; /* or NULL: the loss */
    hs_forward_ws *ws;
    hs_forward_opts ro;       /* the replacement of mean / resample ablation */
    int n, d, H, L, A, Wq, R, HB;
    int pre, pre_in, rms, par, post, qkn;
    size_t nd, nA, rd;
    hs_block_keep *lay;       /* (L) what each layer keeps (not set: not kept) */
    float *xs;                /* (L, n, d) the streams entering the layers, or NULL */
    float *hrows;             /* (R, d) final hidden rows the loss uses, final-normed */
    float *fxhat;             /* (R, d) final norm normalised input */
    float *hpre;              /* (R, d) head transform pre-activation */
    float *hxhat;             /* (R, d) head transform norm normalised input */
    float *hy;                /* (R, d) head transform output */
    float *frstd, *hrstd;     /* (R) */
    float *logits;            /* (HB, V), then d loss / d logits */
    float *dx;                /* (n, d) */
    float *dh;                /* (n, d) or (n, A) */
    float *dqkv;              /* (n, W) */
    float *dff;               /* (n, F), then the gated product's (n, f) */
    float *dp;                /* (H, n, n) */
    float *dx2;               /* (n, d): the parallel MLP's part of d loss / d x_in, or NULL */
    float *dpost;             /* (n, d): d loss / d (a sublayer's output before its norm) */
    float *dpat;              /* (H, n, n) a pattern tap's d / d probs */
    int *rows, *tgt;          /* (R) the loss rows and their targets */
    double *row_loss;         /* (R) */
} grad_pass;

/* One allocation: per layer kept 2nd + nA + nW + 2n + Hn² + nF floats (every layer's, or
 * one layer's and each layer's input stream, nd), then the head and the backward scratch,
 * in sc (grown when too small), carved into p's buffers; lay, rows, tgt, row_loss of their
 * own (freed by the caller, as own). */
static hs_status pass_alloc(grad_pass *p, hs_grad_scratch *sc, hs_error *err)
{
    const hs_model_config *c = p->c;
    const int n = p->n, H = p->H, L = p->L, R = p->R, HB = p->HB, A = p->A;
    const int F = hs_ff_width(c), V = c->vocab_size, qkn = p->qkn, post = p->post;
    const size_t nd = p->nd, nA = p->nA, rd = p->rd, nF = (size_t)n * (size_t)F;
    const size_t ndA = nd > nA ? nd : nA; /* a buffer of either width */
    const size_t nW = (size_t)n * (size_t)p->Wq, nn = (size_t)n * (size_t)n;
    const size_t nfa = c->gated ? (size_t)n * (size_t)c->d_ff : 0;
    const size_t nqk = qkn ? (size_t)n * (size_t)(A + c->n_kv_head * c->d_head) : 0;
    const size_t npost = post ? 2 * (nd + (size_t)n) : 0; /* the post-norms' statistics */
    size_t per_layer = 2 * nd + nA + nW + 2 * (size_t)n + (size_t)H * nn + nF + nqk +
                       (size_t)n * (size_t)qkn + npost;
    size_t head = 5 * rd + 2 * (size_t)R + (size_t)HB * (size_t)V;
    /* dx, dh, dqkv, dff (+ the gated product's), dp, the parallel MLP's dx */
    size_t scratch = nd + ndA + nW + nF + nfa + (size_t)H * nn + (p->par ? nd : 0) +
                     (post ? nd : 0);
    if (p->taps && p->taps->site == HS_SITE_PATTERN)
        scratch += (size_t)H * nn; /* d / d probs */
    size_t total, layers_sz;
    if (hs_mul_size(per_layer, (size_t)L, &layers_sz) ||
        hs_mul_size(layers_sz, sizeof(float), &total))
        return hs_fail(err, HS_E_NOMEM, "gradient importance: size overflow");
    const int recompute = total > keep_limit && L > 1; /* keep the streams, not the layers */
    if (recompute)
        layers_sz = per_layer + nd * (size_t)L;
    if (hs_add_size(layers_sz, head, &total) || hs_add_size(total, scratch, &total) ||
        hs_mul_size(total, sizeof(float), &total))
        return hs_fail(err, HS_E_NOMEM, "gradient importance: size overflow");
    if (sc->bytes < total) {
        free(sc->buf);
        sc->bytes = (sc->buf = hs_alloc_large(total)) ? total : 0;
    }
    float *q = sc->buf;
    p->lay = calloc((size_t)L, sizeof *p->lay);
    p->rows = malloc((size_t)R * sizeof *p->rows);
    p->tgt = malloc((size_t)R * sizeof *p->tgt);
    p->row_loss = malloc((size_t)R * sizeof *p->row_loss);
    if (!q || !p->lay || !p->rows || !p->tgt || !p->row_loss)
        return hs_fail(err, HS_E_NOMEM, "out of memory for gradient importance (%zu MB)",
                       total >> 20);
    for (int l = 0; l < L; l++) {
        hs_block_keep *gl = &p->lay[l];
        if (recompute && l > 0) { /* one set of activations, rewritten layer by layer */
            *gl = p->lay[0];
            continue;
        }
        gl->xhat1 = q, q += nd;
        gl->rstd1 = q, q += n;
        gl->qkv = q, q += nW;
        gl->probs = q, q += (size_t)H * nn;
        gl->ctx = q, q += nA;
        gl->xhat2 = q, q += nd;
        gl->rstd2 = q, q += n;
        gl->ff = q, q += nF;
        if (qkn) {
            gl->qk_xhat = q, q += nqk;
            gl->qk_rstd = q, q += (size_t)n * (size_t)qkn;
        }
        if (post) {
            gl->xhat_pa = q, q += nd;
            gl->xhat_pm = q, q += nd;
            gl->rstd_pa = q, q += n;
            gl->rstd_pm = q, q += n;
        }
    }
    p->xs = recompute ? q : NULL;
    q += recompute ? nd * (size_t)L : 0;
    p->hrows = q, q += rd;
    p->fxhat = q, q += rd;
    p->hpre = q, q += rd;
    p->hxhat = q, q += rd;
    p->hy = q, q += rd;
    p->frstd = q, q += R;
    p->hrstd = q, q += R;
    p->logits = q, q += (size_t)HB * (size_t)V;
    p->dx = q, q += nd;
    p->dh = q, q += ndA;
    p->dqkv = q, q += nW;
    p->dff = q, q += nF + nfa;
    p->dp = q, q += (size_t)H * nn;
    p->dx2 = p->par ? q : NULL;
    q += p->par ? nd : 0;
    p->dpost = post ? q : NULL;
    q += post ? nd : 0;
    p->dpat = q;
    return HS_OK;
}

/* The forward pass keeping each layer's activations (a masked head's context is
 * xi P V + (1 - xi) r under a replacement r, mean / resample ablation), then the head on the
 * loss rows only (the final norm and the head transform are row-wise): HB rows at a time,
 * the logits, each row's loss and d loss / d logits = (softmax - onehot) / R in their place,
 * then d hy = dlogits · decoder (decoder: (V, d)) into the block's rows of hy, which the
 * block no longer reads (hdec may be hy). The backward's first step is taken before the
 * loss is known; a pass stopped at the cap wastes it. *loss: the mean over the rows (a
 * tap's metric). */
static hs_status pass_forward(grad_pass *p, double *loss, hs_error *err)
{
    const hs_model *m = p->m;
    const hs_loss_input *in = p->in;
    const hs_grad_taps *taps = p->taps;
    const int n = p->n, d = p->d, H = p->H, R = p->R, HB = p->HB, V = p->c->vocab_size;
    const float fcap = p->c->arch->final_softcap;
    float *x = p->ws->x; /* (n, d) residual stream */
    hs_status st;
    for (int r = 0; r < R && !taps; r++) {
        int32_t row, target;
        hs_loss_row_at(in, r, &row, &target);
        p->rows[r] = row;
        p->tgt[r] = target;
    }
    if (taps)
        p->rows[0] = taps->row, p->tgt[0] = 0;
    hs_embed(m, in->ids, in->type_ids, n, x);
    for (int l = 0; l < p->L; l++) {
        const float *xi = p->head_mask ? p->head_mask + (size_t)l * (size_t)H : NULL;
        if (p->xs)
            memcpy(p->xs + (size_t)l * p->nd, x, p->nd * sizeof *x);
        if ((st = hs_block_forward(m, l, p->ws, n, 1, xi, 0, in->replace ? &p->ro : NULL,
                                   &p->lay[l], err)))
            return st;
    }
    for (int r = 0; r < R; r++)
        memcpy(p->hrows + (size_t)r * (size_t)d, x + (size_t)p->rows[r] * (size_t)d,
               (size_t)d * sizeof *x);
    hs_final_norm(m, p->hrows, p->hrows, p->fxhat, p->frstd, R);
    const float *hdec = hs_head_transform(m, p->hrows, p->hy, p->hpre, p->hxhat, p->hrstd, R);
    /* a tap's metric under a final softcap: the capped logits kept to take its derivative */
    float *ycap = taps && fcap > 0 ? malloc((size_t)HB * (size_t)V * sizeof *ycap) : NULL;
    if (taps && fcap > 0 && !ycap)
        return hs_fail(err, HS_E_NOMEM, "out of memory for the softcapped logits");
    for (int r0 = 0; r0 < R; r0 += HB) {
        int nb = R - r0 < HB ? R - r0 : HB;
        float *logits = p->logits;
        hs_head_decode(m, hdec + (size_t)r0 * (size_t)d, nb, logits);
        if (ycap)
            memcpy(ycap, logits, (size_t)nb * (size_t)V * sizeof *ycap);
        /* rows in parallel, their losses summed in row order below (the same value on any
         * thread count) */
#pragma omp parallel for schedule(static) if (nb > 1)
        for (int b = 0; b < nb; b++) {
            int r = r0 + b;
            float *row = logits + (size_t)b * (size_t)V, mx;
            if (taps) { /* the metric and its gradient in the row's place */
                p->row_loss[r] = taps->dlogits(taps->user, row, V);
                for (int v = 0; ycap && v < V; v++) { /* y = cap tanh(z / cap) */
                    float t = ycap[(size_t)b * (size_t)V + (size_t)v] / fcap;
                    row[v] *= 1.0f - t * t;
                }
                continue;
            }
            float target = row[p->tgt[r]];
            double s = hs_op_exp_shift(row, V, &mx); /* row = exp(logit - max) */
            p->row_loss[r] = log(s) - (double)(target - mx);
            float inv = (float)(1.0 / (s * R));
            for (int v = 0; v < V; v++)
                row[v] *= inv;
            row[p->tgt[r]] -= (float)(1.0 / R);
            if (fcap > 0)
                hs_grad_final_softcap_back(row, V, mx, inv, fcap, p->tgt[r], target);
        }
        st = hs_model_decoder_back(m, logits, nb, 1.0f, p->hy + (size_t)r0 * (size_t)d, err);
        if (st) {
            free(ycap);
            return st;
        }
    }
    free(ycap);
    double sum = 0;
    for (int r = 0; r < R; r++)
        sum += p->row_loss[r];
    *loss = sum / R;
    if (!isfinite(*loss))
        return hs_fail(err, HS_E_VALUE, "the loss is not finite");
    return HS_OK;
}

/* Backward through the head transform and the final norm, those the model has: dx becomes
 * d loss / d (the stream leaving the last layer). */
static void head_back(grad_pass *p)
{
    const hs_model *m = p->m;
    const int R = p->R, d = p->d;
    float *hy = p->hy;
    if (p->c->arch->head == HS_HEAD_MLM) {
        hs_grad_norm_back(0, p->hxhat, p->hrstd, m->mlm_ln_w, hy, hy, R, d, 0);
        hs_op_gelu_back(p->hpre, hy, p->rd, p->c->act);
        hs_grad_linear_back(hy, m->mlm_w, p->hrows, R, d, d, 0);
        memcpy(hy, p->hrows, p->rd * sizeof *hy);
    }
    if (p->pre)
        hs_grad_norm_back(p->rms, p->fxhat, p->frstd, m->lnf_w, hy, hy, R, d, 0);
    memset(p->dx, 0, p->nd * sizeof *p->dx);
    for (int r = 0; r < R; r++)
        hs_op_add(p->dx + (size_t)p->rows[r] * (size_t)d, hy + (size_t)r * (size_t)d,
                  (size_t)d);
}

/* The values tapped at site s: the tap's callback with the activation and its gradient. */
#define TAP(s, act, grad, rows, cols, ld)                                                        \
    do {                                                                                       \
        if (taps && taps->site == (s))                                                         \
            taps->on_grad(taps->user, l, (act), (grad), (rows), (cols), (ld));                 \
    } while (0)

/* Back through the MLP of layer l (W its weights, gl what it kept): dx holds d loss / d (the
 * stream leaving the layer) and becomes d loss / d (ctx W_O + b_O), the attention's output
 * (x_mid with post norms). */
static hs_status mlp_part_back(grad_pass *p, int l, const hs_layer *W, const hs_block_keep *gl,
                               hs_error *err)
{
    const hs_model_config *c = p->c;
    const hs_grad_taps *taps = p->taps;
    const int n = p->n, d = p->d, rms = p->rms, post = p->post;
    float *dx = p->dx, *dh = p->dh;
    if (!p->pre) /* x_out = LN2(z), z = a + MLP(a) */
        hs_grad_norm_back(rms, gl->xhat2, gl->rstd2, W->ln2_w, dx, dx, n, d, 0);
    TAP(HS_SITE_MLP_OUT, NULL, dx, n, d, d); /* d / d (the MLP's output, post-normed) */
    if (post) /* x_out = x_mid + PN2(MLP(...)) */
        hs_grad_norm_back(1, gl->xhat_pm, gl->rstd_pm, W->post2_w, dx, p->dpost, n, d, 0);
    if (W->moe_gate) { /* a mixture of experts (pre-norm: its input is xhat2 ln2_w) */
        if (hs_moe_back(c, W, gl->xhat2, W->ln2_w, dx, dh, n))
            return hs_fail(err, HS_E_NOMEM, "out of memory for the experts' backward");
    } else { /* dh = d loss / d (the MLP's input) */
        hs_grad_mlp_back(c, W, gl->ff, post ? p->dpost : dx, p->dff, dh, n);
    }
    if (p->pre && !p->pre_in) { /* x_out = x_mid + PN2(MLP(x_mid)) */
        hs_op_add(dx, dh, p->nd);
    } else if (p->par) {   /* x_out = x_in + attn(LN1(x_in)) + MLP(LN2(x_in)) */
        hs_grad_norm_back(rms, gl->xhat2, gl->rstd2, W->ln2_w, dh, p->dx2, n, d, 0);
    } else if (p->pre) { /* x_out = x_mid + MLP(LN2(x_mid)) */
        hs_grad_norm_back(rms, gl->xhat2, gl->rstd2, W->ln2_w, dh, dx, n, d, 1);
    } else {     /* a = LN1(x_in + attn), da = dz + MLP'; then through LN1 */
        hs_op_add(dx, dh, p->nd);
        hs_grad_norm_back(rms, gl->xhat1, gl->rstd1, W->ln1_w, dx, dx, n, d, 0);
    }
    return HS_OK;
}

/* Back through layer l (its float32 weights W, what it kept in p->lay[l]): dx holds d loss /
 * d (the stream leaving it) and becomes d loss / d (the stream entering it); g[l H + h] gets
 * d loss / d xi of its heads. *done: layer 0's heads have their gradient and no tap needs the
 * stream below them. */
static hs_status layer_back(grad_pass *p, int l, const hs_layer *W, double *g, int *done,
                            hs_error *err)
{
    const hs_model_config *c = p->c;
    const hs_grad_taps *taps = p->taps;
    const int n = p->n, d = p->d, H = p->H, A = p->A, Wq = p->Wq;
    hs_block_keep *gl = &p->lay[l];
    float *dx = p->dx, *dh = p->dh, *dqkv = p->dqkv;
    double inv_freq[HS_ROTARY_MAX_DIMS / 2];
    hs_status st = mlp_part_back(p, l, W, gl, err);
    if (st)
        return st;
    /* dx is now d loss / d (ctx W_O + b_O), the attention's output (x_mid with post
       norms: then through PN1 first) */
    TAP(HS_SITE_ATTN_OUT, NULL, dx, n, d, d);
    if (p->post)
        hs_grad_norm_back(1, gl->xhat_pa, gl->rstd_pa, W->post1_w, dx, p->dpost, n, d, 0);
    /* dh = d loss / d ctx: (n, A) */
    hs_grad_linear_back(p->post ? p->dpost : dx, W->w_o, dh, n, A, d, 0);
    TAP(HS_SITE_Z, gl->ctx, dh, n, A, A);
    /* d ctx / d xi = P V - r (r = 0 without a replacement) */
    const float *rl = p->in->replace ? p->in->replace + (size_t)l * p->nA : NULL;
    for (int hh = 0; hh < H; hh++) {
        double s = 0;
        for (int i = 0; i < n; i++) {
            size_t o = (size_t)i * (size_t)A + (size_t)hh * (size_t)c->d_head;
            const float *a = dh + o, *b = gl->ctx + o;
            for (int e = 0; e < c->d_head; e++)
                s += (double)a[e] * ((double)b[e] - (rl ? rl[o + (size_t)e] : 0.0));
        }
        g[l * H + hh] = s;
    }
    if (l == 0 && !(taps && taps->site != HS_SITE_Z && taps->site != HS_SITE_ATTN_OUT &&
                    taps->site != HS_SITE_MLP_OUT)) {
        *done = 1;
        return HS_OK;
    }
    const float *head_mask = p->head_mask;
    if (head_mask) /* d loss / d (P V) = xi_h d loss / d context */
        for (int i = 0; i < n; i++)
            for (int hh = 0; hh < H; hh++) {
                float xv = head_mask[(size_t)l * (size_t)H + (size_t)hh];
                float *a = dh + (size_t)i * (size_t)A + (size_t)hh * (size_t)c->d_head;
                for (int e = 0; e < c->d_head; e++)
                    a[e] *= xv;
            }
    hs_rope rope = hs_model_layer_rope(c, l);
    if (c->arch->mla_kv_lora) { /* latent attention, its turns included */
        if (hs_mla_attn_back(c, W, l, gl->qkv, gl->probs, dh, dqkv, n))
            return hs_fail(err, HS_E_NOMEM, "out of memory for latent attention's backward");
        rope.dims = 0;
    } else {
        float *dpat = taps && taps->site == HS_SITE_PATTERN ? p->dpat : NULL;
        hs_grad_attention_back(c, hs_model_layer_visibility(c, l), gl->qkv, gl->probs, dh,
                               dqkv, p->dp, dpat, n);
        if (dpat)
            TAP(HS_SITE_PATTERN, gl->probs, dpat, H * n, n, n);
        if (taps && (taps->site == HS_SITE_Q || taps->site == HS_SITE_K ||
                     taps->site == HS_SITE_V)) {
            size_t off = taps->site == HS_SITE_Q ? 0 : taps->site == HS_SITE_K
                             ? (size_t)A : (size_t)A + (size_t)c->n_kv_head * c->d_head;
            TAP(taps->site, gl->qkv + off, dqkv + off, n,
                taps->site == HS_SITE_Q ? A : c->n_kv_head * c->d_head, Wq);
        }
    }
    if (rope.dims) { /* back through the turn of Q and K (and its scale): its transpose */
        int rot = rope.dims;
        double rsc = hs_op_rope_freqs_at(&rope, n, inv_freq);
        hs_op_rotary_scaled(dqkv, n, H, c->d_head, Wq, rot, inv_freq, rsc, 0, 1);
        hs_op_rotary_scaled(dqkv + A, n, c->n_kv_head, c->d_head, Wq, rot, inv_freq, rsc, 0, 1);
    }
    if (p->qkn)
        hs_grad_qk_norm_back(c, W, gl, dqkv, n);
    if (p->pre_in) {
        hs_grad_linear_back(dqkv, W->w_qkv, dh, n, d, Wq, 0);
        hs_grad_norm_back(p->rms, gl->xhat1, gl->rstd1, W->ln1_w, dh, dx, n, d, 1);
    } else {
        hs_grad_linear_back(dqkv, W->w_qkv, dx, n, d, Wq, 1);
    }
    if (p->par)
        hs_op_add(dx, p->dx2, p->nd);
    TAP(HS_SITE_RESID_PRE, NULL, dx, n, d, d); /* d / d (the stream entering l) */
    return HS_OK;
}

/* hs_gradient_capped, or with taps the metric's gradient (hs_gradient_tapped). */
static hs_status gradient_pass(const hs_model *m, const hs_loss_input *in, const float *head_mask,
                               double cap, double *g, double *loss, hs_grad_scratch *keep,
                               const hs_grad_taps *taps, hs_error *err)
{
    hs_status st = check_input(m, in, taps, err);
    if (st)
        return st;
    const hs_model_config *c = &m->cfg;
    const int n = in->n, R = taps ? 1 : hs_loss_row_count(in); /* loss rows (a tap's: one) */
    grad_pass p = {
        .m = m, .c = c, .in = in, .head_mask = head_mask, .taps = taps,
        .ro = {.head_replace = in->replace},
        .n = n, .d = c->d_model, .H = c->n_head, .L = c->n_layer, .A = hs_model_attn_width(c),
        .Wq = hs_qkv_width(c), .R = R, .HB = R < head_rows ? R : head_rows, /* rows at once */
        .pre = c->arch->norm_place == HS_NORM_PRE,
        .rms = c->arch->norm_kind == HS_NORM_RMS, .par = c->arch->parallel_residual,
        .post = c->arch->post_norms, .qkn = hs_qk_norms(c),
    };
    p.pre_in = p.pre && !c->arch->no_pre_norm; /* the sublayers read the normed stream */
    p.nd = (size_t)n * (size_t)p.d;
    p.nA = (size_t)n * (size_t)p.A;
    p.rd = (size_t)R * (size_t)p.d;
    hs_grad_scratch own = {0}, *sc = keep ? keep : &own;
    if (sc->ws && sc->ws_n != n) {
        hs_forward_ws_free(sc->ws);
        sc->ws = NULL;
    }
    if (!sc->ws && (st = hs_forward_ws_new(m, n, &sc->ws, err)))
        return st;
    sc->ws_n = n;
    p.ws = sc->ws;
    double lossv = 0;
    if ((st = pass_alloc(&p, sc, err)) || (st = pass_forward(&p, &lossv, err)))
        goto fail;
    if (lossv > cap) { /* past the caller's stop: no backward through the layers */
        for (int k = 0; k < p.L * p.H; k++)
            g[k] = NAN;
        goto done;
    }
    head_back(&p);
    /* Backward through the layers; dx holds d loss / d (stream leaving layer l). */
    for (int l = p.L - 1, stop = 0; l >= 0 && !stop; l--) {
        if (p.xs && l < p.L - 1) { /* this layer's activations again, from its input stream */
            memcpy(p.ws->x, p.xs + (size_t)l * p.nd, p.nd * sizeof *p.ws->x);
            if ((st = hs_block_forward(m, l, p.ws, n, 1,
                                       head_mask ? head_mask + (size_t)l * p.H : NULL, 0,
                                       in->replace ? &p.ro : NULL, &p.lay[l], err)))
                goto fail;
        }
        hs_layer W; /* the layer's matrices, in their stored type where the model keeps them
                     * so (hs_op_linear_back decodes Wᵀ's blocks), else float32 */
        if ((st = hs_layer_get_linear(m, l, &W, err)))
            goto fail;
        st = layer_back(&p, l, &W, g, &stop, err);
        hs_layer_put(m, l);
        if (st)
            goto fail;
    }
done:
    if (loss)
        *loss = lossv;
    st = HS_OK;
fail:
    free(p.tgt);
    free(p.rows);
    free(p.row_loss);
    free(p.lay);
    hs_grad_scratch_free(&own);
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
