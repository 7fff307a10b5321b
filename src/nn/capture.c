/* Every activation of one run (hs_activations_run): the forward pass with a hook at each site
 * the caller wants (include/headscope/hooks.h), copying the values into the arrays of
 * include/headscope/activations.h. */
#include <stdlib.h>
#include <string.h>

#include "headscope/activations.h"
#include "headscope/hooks.h"
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

/* The hook of hs_activations_run: each site's rows into its array (qkv: Q, K and V at their
 * columns of the fused (n, W) rows), the last layer's resid_post into resid_final. */
static int capture_hook(void *user, const hs_hook_call *k)
{
    hs_activations *a = user;
    size_t l = (size_t)k->layer, n = (size_t)a->n, d = (size_t)a->d_model;
    size_t W = (size_t)a->qkv_width, A = (size_t)a->n_head * (size_t)a->d_head;
    size_t kvA = (size_t)a->n_kv_head * (size_t)a->d_head, dld = (size_t)k->cols;
    float *dst = NULL;
    switch (k->site) {
    case HS_SITE_RESID_PRE: dst = a->resid_pre + l * n * d; break;
    case HS_SITE_Q: case HS_SITE_K: case HS_SITE_V:
        dst = a->qkv + l * n * W + (k->site == HS_SITE_Q ? 0 : k->site == HS_SITE_K ? A : A + kvA);
        dld = W;
        break;
    case HS_SITE_PATTERN: dst = a->pattern + l * (size_t)a->n_head * n * n; break;
    case HS_SITE_Z: dst = a->z + l * n * A; break;
    case HS_SITE_ATTN_OUT: dst = a->attn_out + l * n * d; break;
    case HS_SITE_MLP_OUT: dst = a->mlp_out + l * n * d; break;
    case HS_SITE_RESID_POST:
        dst = (int)l == a->n_layer - 1 ? a->resid_final : NULL;
        break;
    default: break;
    }
    for (int i = 0; dst && i < k->rows; i++)
        memcpy(dst + (size_t)i * dld, k->x + (size_t)i * (size_t)k->ld,
               (size_t)k->cols * sizeof *dst);
    return 0;
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
    if (bad) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory for the activations of %d tokens", n);
        goto fail;
    }
    if ((st = hs_forward_ws_new(m, n, &ws, err)))
        goto fail;
    static const struct { unsigned capture; hs_site site; } sites[] = {
        {HS_CAPTURE_RESID_PRE, HS_SITE_RESID_PRE}, {HS_CAPTURE_QKV, HS_SITE_Q},
        {HS_CAPTURE_QKV, HS_SITE_K}, {HS_CAPTURE_QKV, HS_SITE_V},
        {HS_CAPTURE_PATTERN, HS_SITE_PATTERN}, {HS_CAPTURE_Z, HS_SITE_Z},
        {HS_CAPTURE_ATTN_OUT, HS_SITE_ATTN_OUT}, {HS_CAPTURE_MLP_OUT, HS_SITE_MLP_OUT}};
    unsigned bits = HS_SITE_BIT(HS_SITE_RESID_POST);
    for (size_t i = 0; i < sizeof sites / sizeof *sites; i++)
        if (what & sites[i].capture)
            bits |= HS_SITE_BIT(sites[i].site);
    hs_forward_opts o = {.hook = capture_hook, .hook_user = a, .hook_sites = bits};
    int pre = c->arch->norm_place == HS_NORM_PRE;
    ws->final_rstd = pre ? a->final_rstd : NULL; /* the final norm's, or 1 without one */
    if ((st = hs_forward(m, ids, type_ids, n, &o, ws, err)))
        goto fail;
    for (int i = 0; !pre && i < n; i++)
        a->final_rstd[i] = 1.0f;
    *out = a;
    a = NULL;
fail:
    hs_forward_ws_free(ws);
    hs_activations_free(a);
    return st;
}
