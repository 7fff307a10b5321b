/* What the activations of one run say about each head (include/headscope/activations.h):
 * direct logit attribution (Elhage et al. 2021, the TransformerLens convention: the final
 * norm's scale frozen at the full run; a norm on the attention's output frozen likewise, and
 * a final logit softcap replaced by its tangent at the full run's logit) and the norms of
 * norm-based attention (Kobayashi et al. 2020). Heads may be wider than d_model / n_head:
 * the output projection's n_head d_head rows are read (hs_model_attn_width). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis_internal.h"
#include "core/core.h"
#include "headscope/activations.h"
#include "model/emb_stored.h"
#include "model/model_internal.h"
#include "nn/block.h"
#include "nn/ops.h"

/* Rows of logits for the per-token loss computed at a time. */
#define DLA_ROWS 64

const char *hs_dla_undefined(const hs_model *m)
{
    const hs_model_config *c = &m->cfg;
    const hs_arch *a = c->arch;
    if (!c->has_lm_head)
        return "the model has no language-model head";
    if (!c->causal)
        return "the model is not causal: there is no next token to attribute (an MLM head "
               "predicts masked tokens through a non-linear transform)";
    if (a->norm_place != HS_NORM_PRE)
        return "post-norm blocks renormalise the residual stream after every sublayer, so a "
               "head's output reaches the logits only through data-dependent rescaling";
    if (a->head != HS_HEAD_DECODER)
        return "a non-linear transform lies between the residual stream and the unembedding";
    return NULL;
}

void hs_dla_free(hs_dla *d)
{
    if (!d)
        return;
    free(d->targets);
    free(d->per_pos);
    free(d->total);
    free(d->token_loss);
    free(d->logit);
    free(d);
}

/* token_loss and logit of every position from the final normalised stream h: (n, d) of the
 * full run, the LM head some rows at a time: as many as fit in the pass's spare buffer
 * (its maps' room, free once the pass is through), at least DLA_ROWS. */
static hs_status token_losses(const hs_model *m, const float *h, hs_forward_ws *ws, hs_dla *d,
                              hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    size_t V = (size_t)c->vocab_size, dm = (size_t)c->d_model, spare = 0;
    float *logits = hs_forward_ws_spare(ws, &spare), *own = NULL;
    size_t rows = spare / (V + 2 * dm);
    if (rows > (size_t)d->n_pos)
        rows = (size_t)d->n_pos;
    if (rows < DLA_ROWS) {
        rows = DLA_ROWS;
        if (!(logits = own = malloc(rows * (V + 2 * dm) * sizeof *logits)))
            return hs_fail(err, HS_E_NOMEM, "out of memory for the per-token loss");
    }
    float *scratch = logits + rows * V; /* (2 rows, d) */
    for (int r0 = 0; r0 < d->n_pos; r0 += (int)rows) {
        int cnt = d->n_pos - r0 < (int)rows ? d->n_pos - r0 : (int)rows;
        hs_lm_logits(m, h + (size_t)r0 * dm, NULL, cnt, scratch, logits);
        for (int j = 0; j < cnt; j++) {
            const float *row = logits + (size_t)j * V;
            int32_t t = d->targets[r0 + j];
            d->logit[r0 + j] = row[t];
            d->token_loss[r0 + j] = hs_op_log_sum_exp(row, (int)V) - (double)row[t];
        }
    }
    free(own);
    return HS_OK;
}

/* The attribution being taken in a pass: d->per_pos holds each head's z . (W_O u~_i), the
 * frozen 1/s_i applied at the end (it is a per-position scalar of the final norm, known
 * once the pass is through). */
struct hs_dla_acc {
    const hs_model *m;
    hs_dla *d;
    double *u, *g, *wo; /* (DLA_ROWS, d), (DLA_ROWS, d), (d, d) */
    hs_forward_ws *ws; /* the pass's, and its final norm's 1/s */
    const float *final_rstd;
    double *zd, *post; /* post-norms: (DLA_ROWS, A) contexts, (DLA_ROWS, d) their output */
    float *post_w;     /* (d): the attention output norm's weight */
    hs_status st;
    hs_error *err;
};

void hs_dla_acc_free(hs_dla_acc *acc)
{
    if (!acc)
        return;
    free(acc->u);
    free(acc->g);
    free(acc->wo);
    free(acc->zd);
    free(acc->post);
    free(acc->post_w);
    hs_dla_free(acc->d);
    free(acc);
}

hs_status hs_dla_acc_status(const hs_dla_acc *acc)
{
    return acc->st;
}

hs_status hs_dla_begin(const hs_model *m, const int32_t *ids, int n, hs_dla_acc **out,
                       hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    *out = NULL;
    const char *why = hs_dla_undefined(m);
    if (why)
        return hs_fail(err, HS_E_UNSUPPORTED, "direct logit attribution: %s", why);
    if (n < 2)
        return hs_fail(err, HS_E_INPUT, "direct logit attribution needs at least 2 tokens");
    int L = c->n_layer, H = c->n_head, P = n - 1, post = c->arch->post_norms;
    size_t lh = (size_t)L * (size_t)H, dm = (size_t)c->d_model, A = (size_t)hs_model_attn_width(c);
    hs_dla_acc *acc = calloc(1, sizeof *acc);
    hs_dla *d = calloc(1, sizeof *d);
    if (acc) {
        acc->m = m;
        acc->d = d;
        acc->u = malloc(DLA_ROWS * dm * sizeof *acc->u);
        acc->g = malloc(DLA_ROWS * A * sizeof *acc->g);
        acc->wo = malloc(A * dm * sizeof *acc->wo);
        if (post) {
            acc->zd = malloc(DLA_ROWS * A * sizeof *acc->zd);
            acc->post = malloc(DLA_ROWS * dm * sizeof *acc->post);
            acc->post_w = malloc(dm * sizeof *acc->post_w);
        }
    } else {
        free(d);
    }
    if (!acc || !d || !acc->u || !acc->g || !acc->wo ||
        (post && (!acc->zd || !acc->post || !acc->post_w))) {
        hs_dla_acc_free(acc);
        return hs_fail(err, HS_E_NOMEM, "out of memory for direct logit attribution");
    }
    *d = (hs_dla){L, H, (int)lh, P, NULL, NULL, NULL, NULL, NULL};
    d->targets = malloc((size_t)P * sizeof *d->targets);
    d->per_pos = malloc(lh * (size_t)P * sizeof *d->per_pos);
    d->total = calloc(lh, sizeof *d->total);
    d->token_loss = malloc((size_t)P * sizeof *d->token_loss);
    d->logit = malloc((size_t)P * sizeof *d->logit);
    if (!d->targets || !d->per_pos || !d->total || !d->token_loss || !d->logit) {
        hs_dla_acc_free(acc);
        return hs_fail(err, HS_E_NOMEM, "out of memory for direct logit attribution");
    }
    memcpy(d->targets, ids + 1, (size_t)P * sizeof *ids);
    *out = acc;
    return HS_OK;
}

/* Post-norms: u~ (cnt, d) of rows r0.. times the attention output norm's weight and its
 * 1/s at each row, s the full run's RMS of that row's output z W_O (z: (n, A), rows r0..). */
static void post_norm_scale(hs_dla_acc *acc, const float *z, int r0, int cnt)
{
    const hs_model_config *c = &acc->m->cfg;
    int dm = c->d_model, A = hs_model_attn_width(c);
    for (size_t k = 0; k < (size_t)cnt * (size_t)A; k++)
        acc->zd[k] = z[(size_t)r0 * A + k];
    hs_dgemm_fixed(0, 0, cnt, dm, A, acc->zd, A, acc->wo, dm, acc->post, dm);
    for (int j = 0; j < cnt; j++) {
        const double *o = acc->post + (size_t)j * dm;
        double ss = 0;
        for (int k = 0; k < dm; k++)
            ss += o[k] * o[k];
        double r = 1.0 / sqrt(ss / dm + (double)c->ln_eps);
        double *uj = acc->u + (size_t)j * dm;
        for (int k = 0; k < dm; k++)
            uj[k] *= (double)acc->post_w[k] * r;
    }
}

int hs_dla_layer(void *user, int l, const float *z, int n)
{
    hs_dla_acc *acc = user;
    const hs_model *m = acc->m;
    const hs_model_config *c = &m->cfg;
    hs_dla *d = acc->d;
    int H = c->n_head, dm = c->d_model, dh = c->d_head, P = d->n_pos, A = hs_model_attn_width(c);
    size_t wn = (size_t)A * dm;
    if (n != P + 1) {
        acc->st = hs_fail(acc->err, HS_E_ARG, "direct logit attribution of %d tokens given a "
                          "pass of %d", P + 1, n);
        return 1;
    }
    hs_layer ly; /* W_O alone, through the weight cache (model_internal.h) */
    if ((acc->st = hs_layer_get_units(m, l, 1u << HS_WU_O, &ly, acc->err)))
        return 1;
    for (size_t k = 0; k < wn; k++) /* (A, d): row c is context column c */
        acc->wo[k] = ly.w_o[k];
    if (acc->post_w)
        memcpy(acc->post_w, ly.post1_w, (size_t)dm * sizeof *acc->post_w);
    hs_layer_put_units(m, l, 1u << HS_WU_O);
    /* u~_i = w_f * U[t_i] - mean: the direction a head's output o is read along, o's own
     * mean removed by centring u instead (sum_k (o_k - mean o) v_k = o . (v - mean v)) */
    int centre = c->arch->norm_kind == HS_NORM_LAYER;
    for (int r0 = 0; r0 < P; r0 += DLA_ROWS) {
        int cnt = P - r0 < DLA_ROWS ? P - r0 : DLA_ROWS;
        for (int j = 0; j < cnt; j++) {
            double *uj = acc->u + (size_t)j * dm, mean = 0;
            float ut[256]; /* U[t], 256 values at a time (decoded where stored) */
            for (int k0 = 0; k0 < dm; k0 += 256) {
                int kn = dm - k0 < 256 ? dm - k0 : 256;
                hs_model_decoder_row(m, d->targets[r0 + j], k0, kn, ut);
                for (int k = k0; k < k0 + kn; k++) {
                    uj[k] = (double)m->lnf_w[k] * ut[k - k0];
                    mean += uj[k];
                }
            }
            mean = centre ? mean / dm : 0.0;
            for (int k = 0; k < dm; k++)
                uj[k] -= mean;
        }
        if (acc->post_w) /* through the attention output's norm, its 1/s frozen */
            post_norm_scale(acc, z, r0, cnt);
        /* g_j = W_O u~_j: (cnt, A), then each head's slice of z_j . g_j */
        hs_dgemm_fixed(0, 1, cnt, A, dm, acc->u, dm, acc->wo, dm, acc->g, A);
        for (int h = 0; h < H; h++) {
            double *out = d->per_pos + ((size_t)l * H + h) * (size_t)P + r0;
            for (int j = 0; j < cnt; j++) {
                const float *zj = z + (size_t)(r0 + j) * A + (size_t)h * dh;
                const double *gj = acc->g + (size_t)j * A + (size_t)h * dh;
                double s = 0;
                for (int e = 0; e < dh; e++)
                    s += (double)zj[e] * gj[e];
                out[j] = s;
            }
        }
    }
    return 0;
}

hs_status hs_dla_end(hs_dla_acc *acc, hs_dla **out, hs_error *err)
{
    const float *final_rstd = acc->final_rstd;
    const float *hidden = acc->ws->x; /* the pass leaves the final normalised stream there */
    *out = NULL;
    hs_status st = acc->st;
    hs_dla *d = acc->d;
    if (st) { /* the layer's message is in the pass's error already */
        hs_dla_acc_free(acc);
        return st;
    }
    if ((st = token_losses(acc->m, hidden, acc->ws, d, err))) {
        hs_dla_acc_free(acc);
        return st;
    }
    double cap = acc->m->cfg.arch->final_softcap;
    for (int k = 0; k < d->n_heads; k++) {
        double *row = d->per_pos + (size_t)k * (size_t)d->n_pos;
        for (int i = 0; i < d->n_pos; i++) {
            row[i] *= final_rstd[i];
            if (cap > 0) { /* the softcap's slope at the full run's logit: 1 - tanh^2 */
                double t = d->logit[i] / cap;
                row[i] *= 1.0 - t * t;
            }
            d->total[k] += row[i];
        }
    }
    acc->d = NULL;
    hs_dla_acc_free(acc);
    *out = d;
    return HS_OK;
}

void hs_dla_attach(hs_dla_acc *acc, hs_forward_ws *ws, float *final_rstd, hs_error *err)
{
    acc->err = err;
    acc->ws = ws;
    acc->final_rstd = final_rstd;
    ws->on_ctx = hs_dla_layer;
    ws->ctx_user = acc;
    ws->final_rstd = final_rstd;
}

hs_status hs_dla_compute(const hs_model *m, const int32_t *ids, int n, hs_dla **out,
                         hs_error *err)
{
    *out = NULL;
    hs_dla_acc *acc = NULL;
    hs_forward_ws *ws = NULL;
    hs_status st = hs_dla_begin(m, ids, n, &acc, err);
    if (st)
        return st;
    if ((st = hs_forward_check(m, ids, NULL, n, err))) {
        hs_dla_acc_free(acc);
        return st;
    }
    float *rstd = malloc((size_t)n * sizeof *rstd);
    if (!rstd)
        st = hs_fail(err, HS_E_NOMEM, "out of memory for direct logit attribution");
    hs_error lerr = {{0}}; /* a layer's own message (the pass's is "stopped by observer") */
    if (!st && !(st = hs_forward_ws_new(m, n, &ws, err))) {
        hs_dla_attach(acc, ws, rstd, &lerr);
        st = hs_forward(m, ids, NULL, n, NULL, ws, err);
        if (acc->st && (st = acc->st) && err)
            *err = lerr;
    }
    if (!st)
        st = hs_dla_end(acc, out, err);
    else
        hs_dla_acc_free(acc);
    hs_forward_ws_free(ws);
    free(rstd);
    return st;
}

hs_status hs_norm_values_layer(const hs_model *m, int l, const float *qkv, int ld, int n,
                               float *fnorm, hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    int dm = c->d_model, dh = c->d_head;
    float *f = malloc((size_t)n * (size_t)dm * sizeof *f);
    hs_layer ly; /* through the weight cache (model_internal.h) */
    hs_status st = f ? hs_layer_get_units(m, l, 1u << HS_WU_O, &ly, err) /* W_O alone */
                     : hs_fail(err, HS_E_NOMEM, "out of memory for norm-based attention");
    if (st) {
        free(f);
        return st;
    }
    for (int h = 0; h < c->n_head; h++) {
        /* f: (n, d) = V_h: (n, dh) . W_O^h: (dh, d), the value's bias included; V_h is the
         * value of the KV head query head h reads */
        size_t v = (size_t)hs_model_attn_width(c) +
                   (size_t)(c->n_kv_head + hs_model_kv_head(c, h)) * (size_t)dh;
        hs_op_gemm(0, n, dm, dh, 1.0f, qkv + v, ld, ly.w_o + (size_t)h * dh * (size_t)dm, dm,
                   0.0f, f, dm);
        float *out = fnorm + (size_t)h * (size_t)n;
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < dm; k++)
                s += (double)f[(size_t)j * dm + k] * f[(size_t)j * dm + k];
            out[j] = (float)sqrt(s);
        }
    }
    hs_layer_put_units(m, l, 1u << HS_WU_O);
    free(f);
    return HS_OK;
}

hs_status hs_norm_values(const hs_model *m, const hs_activations *a, float *fnorm,
                         hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    if (!a->qkv)
        return hs_fail(err, HS_E_ARG, "norm-based attention needs the values (HS_CAPTURE_QKV)");
    hs_status st = HS_OK;
    for (int l = 0; l < c->n_layer && !st; l++)
        st = hs_norm_values_layer(m, l, a->qkv + (size_t)l * (size_t)a->n * (size_t)a->qkv_width,
                                  a->qkv_width, a->n, fnorm + (size_t)l * c->n_head * (size_t)a->n,
                                  err);
    return st;
}
