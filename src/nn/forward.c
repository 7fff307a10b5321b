/* The instrumented forward pass: one block for GPT-2 (pre-LN, causal) and BERT
 * (post-LN, bidirectional), every projection an OpenBLAS sgemm on (in, out) weights. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"
#include "headscope/forward.h"
#include "nn/ops.h"

struct hs_forward_ws {
    int max_n, n_head;
    float *x;     /* (n, d) residual stream */
    float *h;     /* (n, d) normalised input / scratch */
    float *qkv;   /* (n, 3d) */
    float *probs; /* (n_head, n, n) */
    float *ctx;   /* (n, d) */
    float *ff;    /* (n, d_ff) */
};

hs_status hs_forward_ws_new(const hs_model *m, int max_n, hs_forward_ws **out, hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    *out = NULL;
    if (!m->has_weights)
        return hs_fail(err, HS_E_ARG, "the model was opened without its weights");
    if (max_n < 1 || max_n > c->n_ctx)
        return hs_fail(err, HS_E_ARG, "workspace for %d tokens (model context is %d)", max_n,
                       c->n_ctx);
    hs_forward_ws *ws = calloc(1, sizeof *ws);
    if (!ws)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    size_t n = (size_t)max_n, d = (size_t)c->d_model;
    ws->max_n = max_n;
    ws->n_head = c->n_head;
    ws->x = malloc(n * d * sizeof(float));
    ws->h = malloc(n * d * sizeof(float));
    ws->qkv = malloc(n * 3 * d * sizeof(float));
    ws->probs = malloc((size_t)c->n_head * n * n * sizeof(float));
    ws->ctx = malloc(n * d * sizeof(float));
    ws->ff = malloc(n * (size_t)c->d_ff * sizeof(float));
    if (!ws->x || !ws->h || !ws->qkv || !ws->probs || !ws->ctx || !ws->ff) {
        hs_forward_ws_free(ws);
        return hs_fail(err, HS_E_NOMEM, "out of memory for a %d-token workspace", max_n);
    }
    *out = ws;
    return HS_OK;
}

void hs_forward_ws_free(hs_forward_ws *ws)
{
    if (!ws)
        return;
    free(ws->x);
    free(ws->h);
    free(ws->qkv);
    free(ws->probs);
    free(ws->ctx);
    free(ws->ff);
    free(ws);
}


float *hs_forward_ws_spare(hs_forward_ws *ws, size_t *floats)
{
    *floats = (size_t)ws->n_head * (size_t)ws->max_n * (size_t)ws->max_n;
    return ws->probs;
}

void hs_lm_logits(const hs_model *m, const float *x, const int32_t *idx, int rows,
                  float *scratch, float *logits)
{
    const hs_model_config *c = &m->cfg;
    int d = c->d_model, V = c->vocab_size;
    const float *src = x, *bias = NULL;
    if (idx) { /* gather the rows wanted: (rows, d) */
        for (int r = 0; r < rows; r++)
            memcpy(scratch + (size_t)r * (size_t)d, x + (size_t)idx[r] * (size_t)d,
                   (size_t)d * sizeof *x);
        src = scratch;
    }
    size_t rd = (size_t)rows * (size_t)d;
    if (c->family == HS_FAMILY_BERT) { /* MLM transform (row-wise): dense, gelu, LayerNorm */
        float *h = scratch + rd;
        hs_op_linear(src, m->mlm_w, m->mlm_b, h, rows, d, d);
        hs_op_gelu(h, h, rd, c->act);
        hs_op_layernorm(h, m->mlm_ln_w, m->mlm_ln_b, h, NULL, NULL, rows, d, c->ln_eps);
        src = h;
        bias = m->mlm_bias;
    }
    for (int i = 0; i < rows; i++) {
        float *row = logits + (size_t)i * (size_t)V;
        if (bias)
            memcpy(row, bias, (size_t)V * sizeof *row);
        else
            memset(row, 0, (size_t)V * sizeof *row);
    }
    hs_op_gemm(1, rows, V, d, 1.0f, src, d, m->decoder, d, 1.0f, logits, V);
}

hs_status hs_forward(const hs_model *m, const int32_t *ids, const int32_t *type_ids, int n,
                     const hs_forward_opts *o, hs_forward_ws *ws, hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    if (!m->has_weights)
        return hs_fail(err, HS_E_ARG, "the model was opened without its weights");
    if (n < 1)
        return hs_fail(err, HS_E_INPUT, "no tokens to run");
    if (n > c->n_ctx)
        return hs_fail(err, HS_E_INPUT, "%d tokens exceed the model's context of %d", n, c->n_ctx);
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= c->vocab_size)
            return hs_fail(err, HS_E_INPUT, "token id %d at position %d is outside the vocabulary "
                           "(size %d)", (int)ids[i], i, c->vocab_size);
        if (type_ids && c->family == HS_FAMILY_BERT &&
            (type_ids[i] < 0 || type_ids[i] >= c->type_vocab_size))
            return hs_fail(err, HS_E_INPUT, "token type %d at position %d is out of range",
                           (int)type_ids[i], i);
    }
    if (o && o->logits && !c->has_lm_head)
        return hs_fail(err, HS_E_UNSUPPORTED, "the model has no language-model head");
    if (o && o->logit_rows) {
        if (o->n_logit_rows < 1 || o->n_logit_rows > n)
            return hs_fail(err, HS_E_ARG, "%d logit rows for %d tokens", o->n_logit_rows, n);
        for (int r = 0; r < o->n_logit_rows; r++)
            if (o->logit_rows[r] < 0 || o->logit_rows[r] >= n)
                return hs_fail(err, HS_E_ARG, "logit row %d is outside the %d tokens",
                               (int)o->logit_rows[r], n);
    }

    hs_forward_ws *own = NULL;
    if (!ws || ws->max_n < n) {
        hs_status st = hs_forward_ws_new(m, n, &own, err);
        if (st)
            return st;
        ws = own;
    }
    int d = c->d_model, f = c->d_ff;
    size_t nd = (size_t)n * (size_t)d;
    float *x = ws->x, *h = ws->h;

    int l0 = o ? o->start_layer : 0;
    if (l0 < 0 || l0 >= c->n_layer || (l0 > 0 && !o->x_start)) {
        hs_forward_ws_free(own);
        return hs_fail(err, HS_E_ARG, "start layer %d needs a stream (model has %d layers)", l0,
                       c->n_layer);
    }
    /* Embeddings. */
    for (int i = 0; i < n && l0 == 0; i++) {
        float *xi = x + (size_t)i * (size_t)d;
        const float *te = m->wte + (size_t)ids[i] * (size_t)d;
        const float *pe = m->wpe + (size_t)i * (size_t)d;
        for (int k = 0; k < d; k++)
            xi[k] = te[k] + pe[k];
        if (c->family == HS_FAMILY_BERT) {
            const float *tt = m->wtt + (size_t)(type_ids ? type_ids[i] : 0) * (size_t)d;
            for (int k = 0; k < d; k++)
                xi[k] += tt[k];
        }
    }
    if (c->family == HS_FAMILY_BERT && l0 == 0)
        hs_op_layernorm(x, m->emb_ln_w, m->emb_ln_b, x, NULL, NULL, n, d, c->ln_eps);
    if (l0 > 0)
        memcpy(x, o->x_start, nd * sizeof *x);

    const float *hmask = o ? o->head_mask : NULL;
    for (int l = l0; l < c->n_layer; l++) {
        const hs_layer *L = &m->layers[l];
        if (o && o->x_layers)
            memcpy(o->x_layers + (size_t)l * nd, x, nd * sizeof *x);
        const float *hm_l = hmask ? hmask + (size_t)l * (size_t)c->n_head : NULL;
        if (c->family == HS_FAMILY_GPT2) {
            hs_op_layernorm(x, L->ln1_w, L->ln1_b, h, NULL, NULL, n, d, c->ln_eps);
            hs_op_linear(h, L->w_qkv, L->b_qkv, ws->qkv, n, d, 3 * d);
        } else {
            hs_op_linear(x, L->w_qkv, L->b_qkv, ws->qkv, n, d, 3 * d);
        }
        /* probs are reported before the head mask scales them */
        hs_op_attn_probs(c, ws->qkv, ws->probs, n);
        if (o && o->on_attn && o->on_attn(o->user, l, ws->probs, c->n_head, n)) {
            hs_forward_ws_free(own);
            return hs_fail(err, HS_E_ARG, "stopped by observer");
        }
        hs_op_attn_context(c, ws->qkv, ws->probs, ws->ctx, n, hm_l);
        hs_op_linear(ws->ctx, L->w_o, L->b_o, h, n, d, d);
        hs_op_add(x, h, nd);
        if (c->family == HS_FAMILY_GPT2) {
            hs_op_layernorm(x, L->ln2_w, L->ln2_b, h, NULL, NULL, n, d, c->ln_eps);
            hs_op_linear(h, L->w_fc, L->b_fc, ws->ff, n, d, f);
        } else {
            hs_op_layernorm(x, L->ln1_w, L->ln1_b, x, NULL, NULL, n, d, c->ln_eps);
            hs_op_linear(x, L->w_fc, L->b_fc, ws->ff, n, d, f);
        }
        hs_op_gelu(ws->ff, ws->ff, (size_t)n * (size_t)f, c->act);
        hs_op_linear(ws->ff, L->w_proj, L->b_proj, h, n, f, d);
        hs_op_add(x, h, nd);
        if (c->family == HS_FAMILY_BERT)
            hs_op_layernorm(x, L->ln2_w, L->ln2_b, x, NULL, NULL, n, d, c->ln_eps);
    }
    if (c->family == HS_FAMILY_GPT2)
        hs_op_layernorm(x, m->lnf_w, m->lnf_b, x, NULL, NULL, n, d, c->ln_eps);
    if (o && o->hidden)
        memcpy(o->hidden, x, nd * sizeof *x);
    if (o && o->logits) /* ws->qkv: (n, 3d) holds the (2, rows, d) scratch */
        hs_lm_logits(m, x, o->logit_rows, o->logit_rows ? o->n_logit_rows : n, ws->qkv, o->logits);
    hs_forward_ws_free(own);
    return HS_OK;
}

/* ---- trace recorder --------------------------------------------------------------- */

hs_status hs_trace_new(const hs_model *m, int n, hs_trace **out, hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    *out = NULL;
    size_t count;
    if (n < 1 || hs_mul_size((size_t)c->n_layer * (size_t)c->n_head, (size_t)n * (size_t)n, &count))
        return hs_fail(err, HS_E_ARG, "bad trace size");
    hs_trace *t = calloc(1, sizeof *t);
    if (!t || !(t->attn = malloc(count * sizeof(float)))) {
        free(t);
        return hs_fail(err, HS_E_NOMEM, "out of memory for %zu MB of attention maps",
                       count * sizeof(float) >> 20);
    }
    t->n_layer = c->n_layer;
    t->n_head = c->n_head;
    t->n = n;
    *out = t;
    return HS_OK;
}

void hs_trace_free(hs_trace *t)
{
    if (!t)
        return;
    free(t->attn);
    free(t);
}

int hs_trace_observe(void *trace, int layer, const float *probs, int n_head, int n)
{
    hs_trace *t = trace;
    if (n != t->n || n_head != t->n_head || layer < 0 || layer >= t->n_layer)
        return 1;
    size_t per = (size_t)n_head * (size_t)n * (size_t)n;
    memcpy(t->attn + (size_t)layer * per, probs, per * sizeof *probs);
    return 0;
}
