/* The encoder-decoder pass (T5): the encoder's blocks on the encoder's tokens, its final
 * norm, then the decoder's blocks on the decoder's tokens, each with a cross-attention to
 * the encoder's output (block.c's cross-attention step), the decoder's final norm and the
 * LM head. The attention of both stacks, unscaled with T5's relative position bias, and the
 * cross-attention run through one kernel, hs_encdec_attn. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/forward.h"
#include "nn/block.h"
#include "nn/ops.h"

int hs_t5_bucket(int rel, int bidirectional, int num_buckets, int max_distance)
{
    int bucket = 0, n;
    if (bidirectional) {
        num_buckets /= 2;
        bucket = rel > 0 ? num_buckets : 0;
        n = rel < 0 ? -rel : rel;
    } else {
        n = rel < 0 ? -rel : 0; /* a later key (rel > 0) is masked anyway: bucket 0 */
    }
    int exact = num_buckets / 2;
    if (n < exact)
        return bucket + n;
    /* in float, as transformers computes it (the bucket boundaries depend on its rounding) */
    float large = logf((float)n / (float)exact) / logf((float)max_distance / (float)exact) *
                  (float)(num_buckets - exact);
    int v = exact + (int)large;
    return bucket + (v < num_buckets - 1 ? v : num_buckets - 1);
}

/* bucket: (2n - 1), bucket[j - i + n - 1] the bucket of key j seen from query i. */
static void stack_buckets(const hs_arch *a, int bidirectional, int n, int32_t *bucket)
{
    for (int r = -(n - 1); r <= n - 1; r++)
        bucket[r + n - 1] = hs_t5_bucket(r, bidirectional, a->rel_buckets, a->rel_max_distance);
}

/* Row i of one head's scores s: (nk) → its probabilities over the keys [lo, hi), 0 elsewhere. */
static void softmax_row(float *s, int nk, int lo, int hi)
{
    for (int j = 0; j < lo; j++)
        s[j] = 0.0f;
    for (int j = hi; j < nk; j++)
        s[j] = 0.0f;
    if (hi <= lo)
        return;
    float inv = (float)(1.0 / hs_op_exp_shift(s + lo, hi - lo, NULL));
    for (int j = lo; j < hi; j++)
        s[j] *= inv;
}

hs_status hs_encdec_attn(const hs_model_config *c, const float *q, int ldq, const float *k,
                         const float *v, int ldkv, int nq, int nk, hs_visibility vis,
                         const float *rel, const int32_t *bucket, const float *hm, float *probs,
                         float *ctx, size_t *bad_row)
{
    int H = c->n_head, dh = c->d_head, A = hs_model_attn_width(c);
    size_t per = (size_t)nq * (size_t)nk;
    float *own = probs ? NULL : malloc(per * sizeof *own);
    *bad_row = (size_t)-1;
    if (!probs && !own)
        return HS_E_NOMEM;
    float scale = c->arch->attn_unscaled ? 1.0f : (float)(1.0 / sqrt((double)dh));
    for (int h = 0; h < H; h++) {
        float *p = probs ? probs + (size_t)h * per : own;
        hs_op_gemm(1, nq, nk, dh, scale, q + (size_t)h * dh, ldq, k + (size_t)h * dh, ldkv, 0.0f,
                   p, nk);
#pragma omp parallel for schedule(static) if (per >= 32768)
        for (int i = 0; i < nq; i++) {
            float *row = p + (size_t)i * (size_t)nk;
            if (rel) /* square: key j seen from query i is bucket[j - i + nq - 1] */
                for (int j = 0; j < nk; j++)
                    row[j] += rel[(size_t)bucket[j - i + nq - 1] * (size_t)H + (size_t)h];
            softmax_row(row, nk, hs_vis_lo(vis, i), hs_vis_hi(vis, i, nk));
        }
        size_t bad = hs_op_first_nonfinite(p, per);
        if (bad != (size_t)-1 && *bad_row == (size_t)-1)
            *bad_row = (size_t)h * (size_t)nq + bad / (size_t)nk;
        /* context_h = xi_h P_h V_h (Hugging Face's head mask: no renormalisation) */
        hs_op_gemm(0, nq, dh, nk, hm ? hm[h] : 1.0f, p, nk, v + (size_t)h * dh, ldkv, 0.0f,
                   ctx + (size_t)h * dh, A);
    }
    free(own);
    return HS_OK;
}

hs_status hs_forward_encdec_check(const hs_model *m, const hs_forward_opts *o,
                                  const hs_forward_ws *ws, hs_error *err)
{
    if (!m->cfg.arch->enc_dec)
        return hs_fail(err, HS_E_ARG, "model '%s' is not an encoder-decoder: run it with "
                       "hs_forward", m->cfg.arch->name);
    if (o && (o->batch > 1 || o->start_layer || o->x_start || o->x_layers || o->head_replace ||
              o->hook))
        return hs_fail(err, HS_E_UNSUPPORTED, "an encoder-decoder pass runs one copy from the "
                       "embeddings (no batch, restart, stored streams, replacement contexts or "
                       "hooks)");
    if (ws && (ws->out_rows || ws->final_rstd || ws->on_ctx))
        return hs_fail(err, HS_E_UNSUPPORTED, "an encoder-decoder pass takes no final rows, "
                       "final-norm statistics or context observer");
    return HS_OK;
}

/* One stack's layers [l0, l1) on ws->x: (n, d), self-attention heads under head_mask. */
static hs_status run_stack(const hs_model *m, int l0, int l1, hs_forward_ws *ws, int n,
                           const hs_forward_opts *o, hs_error *err)
{
    const float *hmask = o ? o->head_mask : NULL;
    for (int l = l0; l < l1; l++) {
        const float *hm = hmask ? hmask + (size_t)l * (size_t)m->cfg.n_head : NULL;
        hs_status st = hs_block_forward(m, l, ws, n, 1, hm, 0, o, NULL, err);
        if (st)
            return st;
    }
    return HS_OK;
}

hs_status hs_forward_encdec(const hs_model *m, const int32_t *enc_ids, int n_enc,
                            const int32_t *dec_ids, int n_dec, const hs_forward_opts *o,
                            hs_forward_ws *ws, hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    hs_status st = hs_forward_encdec_check(m, o, ws, err);
    if (st || (st = hs_forward_check(m, enc_ids, NULL, n_enc, err)) ||
        (st = hs_forward_check(m, dec_ids, NULL, n_dec, err)))
        return st;
    if (o && o->logits && !c->has_lm_head)
        return hs_fail(err, HS_E_UNSUPPORTED, "the model has no language-model head");
    if (o && o->logit_rows) {
        if (o->n_logit_rows < 1 || o->n_logit_rows > n_dec)
            return hs_fail(err, HS_E_ARG, "%d logit rows for %d decoder tokens", o->n_logit_rows,
                           n_dec);
        for (int r = 0; r < o->n_logit_rows; r++)
            if (o->logit_rows[r] < 0 || o->logit_rows[r] >= n_dec)
                return hs_fail(err, HS_E_ARG, "logit row %d is outside the %d decoder tokens",
                               (int)o->logit_rows[r], n_dec);
    }
    int nmax = n_enc > n_dec ? n_enc : n_dec, d = c->d_model;
    hs_forward_ws *own = NULL;
    if (!ws || ws->max_n < nmax) {
        if ((st = hs_forward_ws_new(m, nmax, &own, err)))
            return st;
        ws = own;
    }
    float *enc = malloc((size_t)n_enc * (size_t)d * sizeof *enc);
    int32_t *bucket = malloc((size_t)(2 * nmax - 1) * sizeof *bucket);
    if (!enc || !bucket) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory for the encoder's output");
        goto done;
    }
    /* the encoder: bidirectional buckets, its own bias table (its first layer's) */
    stack_buckets(c->arch, 1, n_enc, bucket);
    ws->rel = m->rel_enc;
    ws->rel_bucket = bucket;
    hs_embed(m, enc_ids, NULL, n_enc, ws->x);
    if ((st = run_stack(m, 0, c->n_enc_layer, ws, n_enc, o, err)))
        goto done;
    hs_op_rmsnorm(ws->x, m->enc_lnf_w, enc, NULL, NULL, n_enc, d, c->ln_eps);
    if (o && o->enc_hidden)
        memcpy(o->enc_hidden, enc, (size_t)n_enc * (size_t)d * sizeof *enc);
    /* the decoder: unidirectional buckets, cross-attention to enc */
    stack_buckets(c->arch, 0, n_dec, bucket);
    ws->rel = m->rel_dec;
    ws->enc = enc;
    ws->n_enc = n_enc;
    hs_embed(m, dec_ids, NULL, n_dec, ws->x);
    if ((st = run_stack(m, c->n_enc_layer, c->n_layer, ws, n_dec, o, err)))
        goto done;
    hs_final_norm(m, ws->x, ws->x, NULL, NULL, n_dec);
    if (o && o->hidden)
        memcpy(o->hidden, ws->x, (size_t)n_dec * (size_t)d * sizeof *enc);
    if (o && o->logits)
        hs_lm_logits(m, ws->x, o->logit_rows, o->logit_rows ? o->n_logit_rows : n_dec, ws->qkv,
                     o->logits);
done:
    ws->rel = NULL;
    ws->rel_bucket = NULL;
    ws->enc = NULL;
    ws->n_enc = 0;
    free(bucket);
    free(enc);
    hs_forward_ws_free(own);
    return st;
}
