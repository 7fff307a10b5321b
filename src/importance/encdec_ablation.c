/* Head importance of an encoder-decoder (T5) by zero ablation: the decoder's teacher-forced
 * loss with one head off minus the loss with every head on, for every self-attention head of
 * both stacks and every cross-attention head (importance.h). One full pass a head. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/forward.h"
#include "core/core.h"
#include "headscope/importance.h"
#include "nn/ops.h"

/* The mean negative log-likelihood of target (n) from the decoder's logits (n, V). */
static double target_nll(const float *logits, const int32_t *target, int n, int V)
{
    double sum = 0;
    for (int i = 0; i < n; i++) {
        const float *row = logits + (size_t)i * (size_t)V;
        sum += hs_op_log_sum_exp(row, V) - (double)row[target[i]];
    }
    return sum / n;
}

/* The loss under the masks hm and xhm (n_layer, n_head each). */
static hs_status loss_at(const hs_model *m, const int32_t *src, int n_src, const int32_t *dec,
                         const int32_t *target, int n, const float *hm, const float *xhm,
                         float *logits, hs_forward_ws *ws, double *loss, hs_error *err)
{
    hs_forward_opts o = {.head_mask = hm, .cross_head_mask = xhm, .logits = logits};
    hs_status st = hs_forward_encdec(m, src, n_src, dec, n, &o, ws, err);
    if (!st)
        *loss = target_nll(logits, target, n, hs_model_config_of(m)->vocab_size);
    return st;
}

hs_status hs_encdec_ablation(const hs_model *m, const int32_t *src, int n_src,
                             const int32_t *target, int n_tgt, double *base, double *self_delta,
                             double *cross_delta, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    if (!c->n_enc_layer)
        return hs_fail(err, HS_E_ARG, "model '%s' is not an encoder-decoder", c->arch->name);
    if (n_tgt < 1)
        return hs_fail(err, HS_E_INPUT, "no target tokens");
    for (int i = 0; i < n_tgt; i++)
        if (target[i] < 0 || target[i] >= c->vocab_size)
            return hs_fail(err, HS_E_INPUT, "target token id %d at position %d is outside the "
                           "vocabulary (size %d)", (int)target[i], i, c->vocab_size);
    size_t LH = (size_t)c->n_layer * (size_t)c->n_head;
    int nmax = n_src > n_tgt ? n_src : n_tgt;
    int32_t *dec = malloc((size_t)n_tgt * sizeof *dec);
    float *ones = malloc(2 * LH * sizeof *ones), *logits = NULL;
    hs_forward_ws *ws = NULL;
    hs_status st = !dec || !ones ? hs_fail(err, HS_E_NOMEM, "out of memory") : HS_OK;
    if (!st && !(logits = malloc((size_t)n_tgt * (size_t)c->vocab_size * sizeof *logits)))
        st = hs_fail(err, HS_E_NOMEM, "out of memory for the decoder's logits");
    if (!st && nmax <= c->n_ctx)
        st = hs_forward_ws_new(m, nmax, &ws, err);
    if (st)
        goto done;
    dec[0] = c->decoder_start_id; /* teacher forcing */
    memcpy(dec + 1, target, (size_t)(n_tgt - 1) * sizeof *dec);
    for (size_t k = 0; k < 2 * LH; k++)
        ones[k] = 1.0f;
    float *hm = ones, *xhm = ones + LH;
    if ((st = loss_at(m, src, n_src, dec, target, n_tgt, NULL, NULL, logits, ws, base, err)))
        goto done;
    for (size_t k = 0; k < LH && !st; k++) {
        int layer = (int)(k / (size_t)c->n_head);
        double loss;
        hm[k] = 0.0f;
        st = loss_at(m, src, n_src, dec, target, n_tgt, hm, xhm, logits, ws, &loss, err);
        hm[k] = 1.0f;
        self_delta[k] = loss - *base;
        cross_delta[k] = NAN; /* an encoder layer has no cross-attention */
        if (st || layer < c->n_enc_layer)
            continue;
        xhm[k] = 0.0f;
        st = loss_at(m, src, n_src, dec, target, n_tgt, hm, xhm, logits, ws, &loss, err);
        xhm[k] = 1.0f;
        cross_delta[k] = loss - *base;
    }
done:
    hs_forward_ws_free(ws);
    free(logits);
    free(ones);
    free(dec);
    return st;
}
