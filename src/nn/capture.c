/* Every activation of one run (hs_activations_run): the forward pass's own block, layer after
 * layer, asked to keep what the caller wants (the arrays of include/headscope/activations.h
 * are written in place by the block where it can, copied otherwise). */
#include <stdlib.h>
#include <string.h>

#include "headscope/activations.h"
#include "nn/block.h"
#include "nn/ops.h"

void hs_activations_free(hs_activations *a)
{
    if (!a)
        return;
    free(a->resid_pre);
    free(a->qkv);
    free(a->pattern);
    free(a->z);
    free(a->attn_out);
    free(a->mlp_out);
    free(a->resid_final);
    free(a->final_rstd);
    free(a);
}

/* A (count) float array when asked (want), else NULL; *bad set when allocation fails. */
static float *maybe(int want, size_t count, int *bad)
{
    if (!want)
        return NULL;
    float *p = malloc(count * sizeof *p);
    *bad |= !p;
    return p;
}

hs_status hs_activations_run(const hs_model *m, const int32_t *ids, const int32_t *type_ids,
                             int n, unsigned what, hs_activations **out, hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    *out = NULL;
    hs_status st = hs_forward_check(m, ids, type_ids, n, err);
    if (st)
        return st;
    if ((what & HS_CAPTURE_QKV) && c->arch->mla_kv_lora)
        return hs_fail(err, HS_E_UNSUPPORTED, "activations: q, k and v are not recorded for "
                       "multi-head latent attention (architecture '%s')", c->arch->name);
    int L = c->n_layer, H = c->n_head, d = c->d_model, W = hs_qkv_width(c);
    size_t nd = (size_t)n * (size_t)d, nn = (size_t)n * (size_t)n, Ld = (size_t)L * nd;
    size_t nA = (size_t)n * (size_t)hs_model_attn_width(c); /* one layer's contexts */
    size_t nw = (size_t)n * (size_t)W; /* one layer's queries, keys and values */
    size_t per_pat, all_pat;
    if (hs_mul_size((size_t)H, nn, &per_pat) || hs_mul_size(per_pat, (size_t)L, &all_pat))
        return hs_fail(err, HS_E_NOMEM, "activations: size overflow");
    hs_activations *a = calloc(1, sizeof *a);
    hs_forward_ws *ws = NULL;
    float *scratch = NULL;
    if (!a)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    *a = (hs_activations){.n_layer = L, .n_head = H, .n = n, .d_model = d, .d_head = c->d_head,
                          .what = what, .n_kv_head = c->n_kv_head, .qkv_width = W};
    int bad = 0;
    a->resid_pre = maybe(what & HS_CAPTURE_RESID_PRE, Ld, &bad);
    a->qkv = maybe(what & HS_CAPTURE_QKV, (size_t)L * nw, &bad);
    a->pattern = maybe(what & HS_CAPTURE_PATTERN, all_pat, &bad);
    a->z = maybe(what & HS_CAPTURE_Z, (size_t)L * nA, &bad);
    a->attn_out = maybe(what & HS_CAPTURE_ATTN_OUT, Ld, &bad);
    a->mlp_out = maybe(what & HS_CAPTURE_MLP_OUT, Ld, &bad);
    a->resid_final = maybe(1, nd, &bad);
    a->final_rstd = maybe(1, (size_t)n, &bad);
    /* the block's own buffers for what is not kept: qkv, probs, ctx, the MLP's first
     * projection (gated: [gate | up]) */
    scratch = maybe(1, nw + per_pat + nA + (size_t)n * (size_t)hs_ff_width(c), &bad);
    if (bad) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory for the activations of %d tokens", n);
        goto fail;
    }
    if ((st = hs_forward_ws_new(m, n, &ws, err)))
        goto fail;
    float *s_qkv = scratch, *s_probs = s_qkv + nw, *s_ctx = s_probs + per_pat;
    float *s_ff = s_ctx + nA;
    hs_embed(m, ids, type_ids, n, ws->x);
    for (int l = 0; l < L; l++) {
        size_t lo = (size_t)l * nd;
        if (a->resid_pre)
            memcpy(a->resid_pre + lo, ws->x, nd * sizeof *ws->x);
        hs_block_keep k = {
            .qkv = a->qkv ? a->qkv + (size_t)l * nw : s_qkv,
            .probs = a->pattern ? a->pattern + (size_t)l * per_pat : s_probs,
            .ctx = a->z ? a->z + (size_t)l * nA : s_ctx,
            .ff = s_ff,
            .attn_out = a->attn_out ? a->attn_out + lo : NULL,
            .mlp_out = a->mlp_out ? a->mlp_out + lo : NULL,
        };
        if ((st = hs_block_forward(m, l, ws, n, 1, NULL, 0, NULL, &k, err)))
            goto fail;
    }
    memcpy(a->resid_final, ws->x, nd * sizeof *ws->x);
    if (c->arch->norm_place == HS_NORM_PRE)
        hs_final_norm(m, ws->x, ws->h, NULL, a->final_rstd, n);
    else
        for (int i = 0; i < n; i++)
            a->final_rstd[i] = 1.0f;
    *out = a;
    a = NULL;
fail:
    free(scratch);
    hs_forward_ws_free(ws);
    hs_activations_free(a);
    return st;
}
