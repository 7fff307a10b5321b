/* The instrumented forward pass: embeddings, the block of src/nn/block.c layer after
 * layer (batched copies under head masks, restarts from a stored stream), the final norm
 * and the LM head a block of rows at a time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/forward.h"
#include "nn/block.h"
#include "nn/ops.h"

hs_status hs_forward_ws_new(const hs_model *m, int max_n, hs_forward_ws **out, hs_error *err)
{
    return hs_forward_ws_new_batch(m, max_n, 1, out, err);
}

hs_status hs_forward_ws_new_batch(const hs_model *m, int max_n, int max_batch,
                                  hs_forward_ws **out, hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    *out = NULL;
    if (!m->has_weights)
        return hs_fail(err, HS_E_ARG, "the model was opened without its weights");
    if (max_n < 1 || max_n > c->n_ctx)
        return hs_fail(err, HS_E_ARG, "workspace for %d tokens (model context is %d)", max_n,
                       c->n_ctx);
    if (max_batch < 1 || max_batch > HS_FORWARD_MAX_BATCH)
        return hs_fail(err, HS_E_ARG, "workspace for a batch of %d (1 to %d)", max_batch,
                       HS_FORWARD_MAX_BATCH);
    hs_forward_ws *ws = calloc(1, sizeof *ws);
    if (!ws)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    size_t n = (size_t)max_n, rows = n * (size_t)max_batch, d = (size_t)c->d_model;
    size_t A = (size_t)hs_model_attn_width(c), dA = d > A ? d : A; /* contexts: (rows, A) */
    ws->max_n = max_n;
    ws->max_batch = max_batch;
    ws->n_head = c->n_head;
    ws->x = malloc(rows * d * sizeof(float));
    ws->h = malloc(rows * dA * sizeof(float));
    size_t W = (size_t)hs_qkv_width(c), F = (size_t)c->d_ff;
    if (c->gated)
        F *= 3; /* [gate | up] and the product */
    ws->qkv = malloc(rows * (W > 3 * d ? W : 3 * d) * sizeof(float));
    ws->probs_floats = (size_t)c->n_head * n * n; /* ws->probs: when a pass records maps */
    ws->ctx = malloc(rows * dA * sizeof(float));
    ws->ff = malloc((rows < HS_MLP_ROWS ? rows : HS_MLP_ROWS) * F * sizeof(float));
    if (!ws->x || !ws->h || !ws->qkv || !ws->ctx || !ws->ff) {
        hs_forward_ws_free(ws);
        return hs_fail(err, HS_E_NOMEM, "out of memory for a %d-token workspace (batch %d)",
                       max_n, max_batch);
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
    *floats = ws->probs ? ws->probs_floats : 0;
    return ws->probs;
}

void hs_lm_logits(const hs_model *m, const float *x, const int32_t *idx, int rows,
                  float *scratch, float *logits)
{
    int d = m->cfg.d_model;
    const float *src = x;
    if (idx) { /* gather the rows wanted: (rows, d) */
        for (int r = 0; r < rows; r++)
            memcpy(scratch + (size_t)r * (size_t)d, x + (size_t)idx[r] * (size_t)d,
                   (size_t)d * sizeof *x);
        src = scratch;
    }
    src = hs_head_transform(m, src, scratch + (size_t)rows * (size_t)d, NULL, NULL, NULL, rows);
    hs_head_decode(m, src, rows, logits);
}

/* The LM head on rows of x: (batch * n, d), all of them (one GEMM over every copy) or each
 * copy's logit_rows → logits: (batch * rows, V). ws->qkv: (batch * n, >= 3d) is the scratch. */
static void lm_head(const hs_model *m, hs_forward_ws *ws, int n, int batch,
                    const hs_forward_opts *o)
{
    size_t d = (size_t)m->cfg.d_model, V = (size_t)m->cfg.vocab_size;
    if (!o->logit_rows) {
        hs_lm_logits(m, ws->x, NULL, batch * n, ws->qkv, o->logits);
        return;
    }
    for (int b = 0; b < batch; b++)
        hs_lm_logits(m, ws->x + (size_t)b * (size_t)n * d, o->logit_rows, o->n_logit_rows,
                     ws->qkv, o->logits + (size_t)b * (size_t)o->n_logit_rows * V);
}

/* The final norm's site, ln_final.hook_normalized, on each copy's rpc rows of ws->x. */
static hs_status final_hooks(const hs_model *m, const hs_forward_opts *o, hs_forward_ws *ws, int n,
                             int batch, int rpc, hs_error *err)
{
    unsigned hk = o && o->hook ? o->hook_sites : 0;
    return hs_hook_stream(&m->cfg, o, hk, HS_SITE_LN_FINAL, -1, ws->x, batch, (size_t)rpc, n,
                          err);
}

hs_status hs_forward_check(const hs_model *m, const int32_t *ids, const int32_t *type_ids,
                           int n, hs_error *err)
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
        if (type_ids && c->arch->token_types &&
            (type_ids[i] < 0 || type_ids[i] >= c->type_vocab_size))
            return hs_fail(err, HS_E_INPUT, "token type %d at position %d is out of range",
                           (int)type_ids[i], i);
    }
    return HS_OK;
}

hs_status hs_forward(const hs_model *m, const int32_t *ids, const int32_t *type_ids, int n,
                     const hs_forward_opts *o, hs_forward_ws *ws, hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    hs_status st0 = hs_forward_check(m, ids, type_ids, n, err);
    if (st0)
        return st0;
    if (c->arch->enc_dec)
        return hs_fail(err, HS_E_UNSUPPORTED, "model '%s' is an encoder-decoder: it runs on an "
                       "encoder text and a decoder target (hs_forward_encdec)", c->arch->name);
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
    if (ws && ws->out_rows && ((o && o->logits) || ws->final_rstd || ws->n_out_rows < 1 ||
                               ws->n_out_rows > n))
        return hs_fail(err, HS_E_ARG, "final rows wanted with logits or a final norm's "
                       "statistics, or %d of %d rows", ws->n_out_rows, n);
    int batch = o && o->batch > 1 ? o->batch : 1;
    if (o && (o->batch < 0 || o->batch > HS_FORWARD_MAX_BATCH))
        return hs_fail(err, HS_E_ARG, "batch of %d copies (0 to %d)", o->batch,
                       HS_FORWARD_MAX_BATCH);
    if (batch > 1 && o->on_attn)
        return hs_fail(err, HS_E_ARG, "an attention observer needs a batch of 1, not %d", batch);

    hs_forward_ws *own = NULL;
    if (!ws || ws->max_n < n || ws->max_batch < batch) {
        hs_status st = hs_forward_ws_new_batch(m, n, batch, &own, err);
        if (st)
            return st;
        if (ws) { /* a workspace too small still brings its in-pass observers */
            own->on_ctx = ws->on_ctx;
            own->ctx_user = ws->ctx_user;
            own->final_rstd = ws->final_rstd;
            own->out_rows = ws->out_rows;
            own->n_out_rows = ws->n_out_rows;
            own->ctx_start = ws->ctx_start;
        }
        /* the caller's maps are all such a pass gives (block.h) */
        own->stop_after_attn = !ws && !(o && (o->logits || o->hidden || o->hook));
        ws = own;
    }
    int d = c->d_model, rows = batch * n;
    size_t nd = (size_t)n * (size_t)d, xd = (size_t)rows * (size_t)d;
    float *x = ws->x;

    int l0 = o ? o->start_layer : 0;
    if (l0 < 0 || l0 >= c->n_layer || (l0 > 0 && !o->x_start)) {
        hs_forward_ws_free(own);
        return hs_fail(err, HS_E_ARG, "start layer %d needs a stream (model has %d layers)", l0,
                       c->n_layer);
    }
    if (l0 == 0) /* embeddings (copy 0) */
        hs_embed(m, ids, type_ids, n, x);
    if (l0 > 0)
        memcpy(x, o->x_start, nd * sizeof *x);
    for (int b = 1; b < batch; b++) /* every copy starts from the same stream */
        memcpy(x + (size_t)b * nd, x, nd * sizeof *x);

    const float *hmask = o ? o->head_mask : NULL;
    size_t lh = (size_t)c->n_layer * (size_t)c->n_head;
    for (int l = l0; l < c->n_layer; l++) {
        if (o && o->x_layers)
            memcpy(o->x_layers + (size_t)l * xd, x, xd * sizeof *x);
        const float *hm_l = hmask ? hmask + (size_t)l * (size_t)c->n_head : NULL;
        ws->same_input = l == l0 && batch > 1;
        ws->ctx_in = l == l0 ? ws->ctx_start : NULL;
        hs_status st = hs_block_forward(m, l, ws, n, batch, hm_l, lh, o, NULL, err);
        ws->same_input = 0;
        ws->ctx_in = NULL;
        if (st) {
            hs_forward_ws_free(own);
            return st;
        }
    }
    if (ws->stop_after_attn) {
        hs_forward_ws_free(own);
        return HS_OK;
    }
    if (ws->out_rows) /* the last layer left the wanted rows only, compacted */
        rows = batch * ws->n_out_rows, xd = (size_t)rows * (size_t)d;
    hs_final_norm(m, x, x, NULL, batch == 1 ? ws->final_rstd : NULL, rows);
    hs_status st = final_hooks(m, o, ws, n, batch, rows / batch, err);
    if (st) {
        hs_forward_ws_free(own);
        return st;
    }
    if (o && o->hidden)
        memcpy(o->hidden, x, xd * sizeof *x);
    if (o && o->logits)
        lm_head(m, ws, n, batch, o);
    if (o && o->logits && o->hook && (o->hook_sites & HS_SITE_BIT(HS_SITE_LOGITS))) {
        int lr = o->logit_rows ? o->n_logit_rows : n, V = c->vocab_size;
        st = hs_hook_copies(c, o, HS_SITE_LOGITS, -1, o->logits, batch, (size_t)lr * (size_t)V,
                            lr, V, V, n, err);
    }
    hs_forward_ws_free(own);
    return st;
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
    if (!t || !(t->attn = hs_alloc_large(count * sizeof(float)))) {
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
    size_t per = (size_t)n_head * (size_t)n * (size_t)n, chunk = (size_t)1 << 18;
    size_t chunks = (per + chunk - 1) / chunk;
    float *dst = t->attn + (size_t)layer * per;
    if (probs == dst) /* the pass wrote them here itself (block.c) */
        return 0;
    /* 50 MB a layer for GPT-2 at n = 1024: one thread's copy took a quarter of the pass */
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (size_t k = 0; k < chunks; k++) {
        size_t lo = k * chunk, len = per - lo < chunk ? per - lo : chunk;
        memcpy(dst + lo, probs + lo, len * sizeof *probs);
    }
    return 0;
}
