/* What the activations of one run say about each head (include/headscope/activations.h):
 * direct logit attribution (Elhage et al. 2021, the TransformerLens convention: the final
 * norm's scale frozen at the full run) and the norms of norm-based attention (Kobayashi et
 * al. 2020). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/activations.h"
#include "internal.h"
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
    if (!a->causal)
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

/* token_loss and logit of every position from the final stream x: (n, d) of the full run:
 * the final norm, the LM head DLA_ROWS rows at a time. */
static hs_status token_losses(const hs_model *m, const float *x, int n, hs_dla *d, hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    size_t V = (size_t)c->vocab_size, dm = (size_t)c->d_model;
    float *h = malloc((size_t)n * dm * sizeof *h);
    float *scratch = malloc(2 * DLA_ROWS * dm * sizeof *scratch);
    float *logits = malloc(DLA_ROWS * V * sizeof *logits);
    if (!h || !scratch || !logits) {
        free(h);
        free(scratch);
        free(logits);
        return hs_fail(err, HS_E_NOMEM, "out of memory for the per-token loss");
    }
    hs_final_norm(m, x, h, NULL, NULL, n);
    for (int r0 = 0; r0 < d->n_pos; r0 += DLA_ROWS) {
        int cnt = d->n_pos - r0 < DLA_ROWS ? d->n_pos - r0 : DLA_ROWS;
        hs_lm_logits(m, h + (size_t)r0 * dm, NULL, cnt, scratch, logits);
        for (int j = 0; j < cnt; j++) {
            const float *row = logits + (size_t)j * V;
            int32_t t = d->targets[r0 + j];
            d->logit[r0 + j] = row[t];
            d->token_loss[r0 + j] = hs_op_log_sum_exp(row, (int)V) - (double)row[t];
        }
    }
    free(h);
    free(scratch);
    free(logits);
    return HS_OK;
}

hs_status hs_dla_compute(const hs_model *m, const int32_t *ids, int n, hs_dla **out,
                         hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    *out = NULL;
    const char *why = hs_dla_undefined(m);
    if (why)
        return hs_fail(err, HS_E_UNSUPPORTED, "direct logit attribution: %s", why);
    if (n < 2)
        return hs_fail(err, HS_E_INPUT, "direct logit attribution needs at least 2 tokens");
    hs_activations *act = NULL;
    hs_status st = hs_activations_run(m, ids, NULL, n, HS_CAPTURE_Z, &act, err);
    if (st)
        return st;
    int L = c->n_layer, H = c->n_head, dm = c->d_model, dh = c->d_head, P = n - 1;
    size_t lh = (size_t)L * (size_t)H, pd = (size_t)P * (size_t)dm, dd = (size_t)dm * dm;
    hs_dla *d = calloc(1, sizeof *d);
    double *u = malloc(pd * sizeof *u), *g = malloc(pd * sizeof *g), *wo = malloc(dd * sizeof *wo);
    if (!d || !u || !g || !wo)
        goto nomem;
    *d = (hs_dla){L, H, (int)lh, P, NULL, NULL, NULL, NULL, NULL};
    d->targets = malloc((size_t)P * sizeof *d->targets);
    d->per_pos = malloc(lh * (size_t)P * sizeof *d->per_pos);
    d->total = calloc(lh, sizeof *d->total);
    d->token_loss = malloc((size_t)P * sizeof *d->token_loss);
    d->logit = malloc((size_t)P * sizeof *d->logit);
    if (!d->targets || !d->per_pos || !d->total || !d->token_loss || !d->logit)
        goto nomem;
    memcpy(d->targets, ids + 1, (size_t)P * sizeof *ids);

    /* u_i = (w_f * U[t_i] - mean) / s_i: the direction a head's output o is read along,
     * o's own mean removed by centring u instead (sum_k (o_k - mean o) v_k = o . (v - mean v)) */
    int centre = c->arch->norm_kind == HS_NORM_LAYER;
    for (int i = 0; i < P; i++) {
        const float *ut = m->decoder + (size_t)d->targets[i] * (size_t)dm;
        double *ui = u + (size_t)i * dm, mean = 0;
        for (int k = 0; k < dm; k++) {
            ui[k] = (double)m->lnf_w[k] * ut[k];
            mean += ui[k];
        }
        mean = centre ? mean / dm : 0.0;
        for (int k = 0; k < dm; k++)
            ui[k] = (ui[k] - mean) * act->final_rstd[i];
    }
    for (int l = 0; l < L; l++) {
        hs_layer ly; /* through the weight cache (model_internal.h) */
        if ((st = hs_layer_get(m, l, &ly, err)))
            goto fail;
        for (size_t k = 0; k < dd; k++) /* (d, d): row c is context column c */
            wo[k] = ly.w_o[k];
        hs_layer_put(m, l);
        /* g_i = W_O u_i: (P, d), then each head's slice of z_i . g_i */
        hs_dgemm_fixed(0, 1, P, dm, dm, u, dm, wo, dm, g, dm);
        const float *z = act->z + (size_t)l * (size_t)n * dm;
        for (int h = 0; h < H; h++) {
            size_t k = (size_t)l * H + h;
            for (int i = 0; i < P; i++) {
                const float *zi = z + (size_t)i * dm + (size_t)h * dh;
                const double *gi = g + (size_t)i * dm + (size_t)h * dh;
                double s = 0;
                for (int e = 0; e < dh; e++)
                    s += (double)zi[e] * gi[e];
                d->per_pos[k * (size_t)P + (size_t)i] = s;
                d->total[k] += s;
            }
        }
    }
    if ((st = token_losses(m, act->resid_final, n, d, err)))
        goto fail;
    *out = d;
    d = NULL;
    goto fail;
nomem:
    st = hs_fail(err, HS_E_NOMEM, "out of memory for direct logit attribution");
fail:
    free(u);
    free(g);
    free(wo);
    hs_dla_free(d);
    hs_activations_free(act);
    return st;
}

hs_status hs_norm_values_layer(const hs_model *m, int l, const float *qkv, int ld, int n,
                               float *fnorm, hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    int dm = c->d_model, dh = c->d_head;
    float *f = malloc((size_t)n * (size_t)dm * sizeof *f);
    hs_layer ly; /* through the weight cache (model_internal.h) */
    hs_status st = f ? hs_layer_get(m, l, &ly, err)
                     : hs_fail(err, HS_E_NOMEM, "out of memory for norm-based attention");
    if (st) {
        free(f);
        return st;
    }
    for (int h = 0; h < c->n_head; h++) {
        /* f: (n, d) = V_h: (n, dh) . W_O^h: (dh, d), the value's bias included; V_h is the
         * value of the KV head query head h reads */
        size_t v = (size_t)dm + (size_t)(c->n_kv_head + hs_model_kv_head(c, h)) * (size_t)dh;
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
    hs_layer_put(m, l);
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
