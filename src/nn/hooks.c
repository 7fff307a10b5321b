/* The hook sites (include/headscope/hooks.h): the one table of names and shapes, and the
 * call the block and the forward pass make at each site (the block's stream and q, k, v
 * sites among them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/hooks.h"
#include "nn/block.h"

const hs_site_info hs_sites[HS_SITE_COUNT] = {
    {HS_SITE_RESID_PRE, "blocks.%d.hook_resid_pre", "resid_pre", 1, HS_HEADS_NONE, "(n, d_model)"},
    {HS_SITE_Q, "blocks.%d.attn.hook_q", "q", 1, HS_HEADS_QUERY, "(n, n_head, d_head)"},
    {HS_SITE_K, "blocks.%d.attn.hook_k", "k", 1, HS_HEADS_KV, "(n, n_kv_head, d_head)"},
    {HS_SITE_V, "blocks.%d.attn.hook_v", "v", 1, HS_HEADS_KV, "(n, n_kv_head, d_head)"},
    {HS_SITE_PATTERN, "blocks.%d.attn.hook_pattern", "pattern", 1, HS_HEADS_QUERY,
     "(n_head, n, n)"},
    {HS_SITE_Z, "blocks.%d.attn.hook_z", "z", 1, HS_HEADS_QUERY, "(n, n_head, d_head)"},
    {HS_SITE_RESULT, "blocks.%d.attn.hook_result", "result", 1, HS_HEADS_QUERY,
     "(n, n_head, d_model)"},
    {HS_SITE_ATTN_OUT, "blocks.%d.hook_attn_out", "attn_out", 1, HS_HEADS_NONE, "(n, d_model)"},
    {HS_SITE_MLP_OUT, "blocks.%d.hook_mlp_out", "mlp_out", 1, HS_HEADS_NONE, "(n, d_model)"},
    {HS_SITE_RESID_POST, "blocks.%d.hook_resid_post", "resid_post", 1, HS_HEADS_NONE,
     "(n, d_model)"},
    {HS_SITE_LN_FINAL, "ln_final.hook_normalized", "ln_final", 0, HS_HEADS_NONE, "(n, d_model)"},
    {HS_SITE_LOGITS, "logits", "logits", 0, HS_HEADS_NONE, "(n, vocab)"},
};

const hs_site_info *hs_site_get(hs_site s)
{
    return (unsigned)s < HS_SITE_COUNT ? &hs_sites[s] : NULL;
}

int hs_site_from_key(const char *key)
{
    for (int s = 0; s < HS_SITE_COUNT; s++)
        if (!strcmp(hs_sites[s].key, key))
            return s;
    return -1;
}

hs_status hs_site_parse(const char *name, int n_layer, hs_site *site, int *layer, hs_error *err)
{
    for (int s = 0; s < HS_SITE_COUNT; s++) {
        const hs_site_info *si = &hs_sites[s];
        if (!si->per_layer) {
            if (!strcmp(name, si->name)) {
                *site = (hs_site)s;
                *layer = -1;
                return HS_OK;
            }
            continue;
        }
        /* "blocks.<digits>.<rest>": the digits, then the rest against the pattern's */
        const char *rest = strchr(si->name, '%') + 2;
        if (strncmp(name, "blocks.", 7))
            continue;
        const char *p = name + 7;
        long l = 0;
        int digits = 0;
        while (*p >= '0' && *p <= '9' && digits < 9)
            l = l * 10 + (*p++ - '0'), digits++;
        if (!digits || (digits > 1 && name[7] == '0') || strcmp(p, rest))
            continue;
        if (l >= n_layer)
            return hs_fail(err, HS_E_ARG, "hook site '%s': layer %ld, the model has %d", name,
                           l, n_layer);
        *site = (hs_site)s;
        *layer = (int)l;
        return HS_OK;
    }
    return hs_fail(err, HS_E_ARG, "'%s' is not a hook site (blocks.L.hook_resid_pre, "
                   "blocks.L.attn.hook_q|k|v|pattern|z|result, blocks.L.hook_attn_out|mlp_out|"
                   "resid_post, ln_final.hook_normalized, logits)", name);
}

int hs_site_head_count(const hs_model_config *c, hs_site s)
{
    switch (hs_sites[s].heads) {
    case HS_HEADS_QUERY:
        return c->n_head;
    case HS_HEADS_KV:
        return c->n_kv_head;
    default:
        return 0;
    }
}

int hs_site_shape(const hs_model_config *c, hs_site s, int n, int dims[3])
{
    dims[0] = n;
    switch (s) {
    case HS_SITE_PATTERN:
        dims[0] = c->n_head, dims[1] = n, dims[2] = n;
        return 3;
    case HS_SITE_Q: case HS_SITE_K: case HS_SITE_V: case HS_SITE_Z:
        dims[1] = hs_site_head_count(c, s), dims[2] = c->d_head;
        return 3;
    case HS_SITE_RESULT:
        dims[1] = c->n_head, dims[2] = c->d_model;
        return 3;
    case HS_SITE_LOGITS:
        dims[1] = c->vocab_size;
        return 2;
    default:
        dims[1] = c->d_model;
        return 2;
    }
}

int hs_head_mask_hook(void *user, const hs_hook_call *k)
{
    const hs_head_mask *s = user;
    const float *xi = s->hm + (size_t)k->copy * s->hm_stride;
    for (int h = 0; h < k->heads; h++) {
        if (xi[h] == 1.0f)
            continue;
        float w = 1.0f - xi[h];
        for (int i = 0; i < k->rows; i++) {
            size_t o = (size_t)h * (size_t)k->head_width;
            float *x = k->x + (size_t)i * (size_t)k->ld + o;
            const float *r = s->replace ? s->replace + (size_t)i * (size_t)k->cols + o : NULL;
            if (s->scale)
                for (int e = 0; e < k->head_width; e++)
                    x[e] = xi[h] * x[e];
            if (r)
                for (int e = 0; e < k->head_width; e++)
                    x[e] += w * r[e];
        }
    }
    return 0;
}

hs_status hs_hook_copies(const hs_model_config *c, const hs_forward_opts *o, hs_site s, int l,
                         float *x, int batch, size_t stride, int rows, int cols, int ld, int n,
                         hs_error *err)
{
    int heads = hs_site_head_count(c, s);
    int hw = s == HS_SITE_RESULT ? c->d_model : heads ? c->d_head : 0;
    for (int b = 0; b < batch; b++) {
        hs_hook_call k = {.site = s, .layer = l, .copy = b, .x = x + (size_t)b * stride,
                          .rows = rows, .cols = cols, .ld = ld, .heads = heads,
                          .head_width = s == HS_SITE_PATTERN ? n : hw, .n = n};
        if (o->hook(o->hook_user, &k))
            return hs_fail(err, HS_E_ARG, "stopped by hook");
    }
    return HS_OK;
}

hs_status hs_hook_stream(const hs_model_config *c, const hs_forward_opts *o, unsigned hk,
                         hs_site s, int l, float *x, int batch, size_t cn, int n, hs_error *err)
{
    if (!(hk & HS_SITE_BIT(s)))
        return HS_OK;
    int d = c->d_model;
    return hs_hook_copies(c, o, s, l, x, batch, cn * (size_t)d, (int)cn, d, d, n, err);
}

hs_status hs_hook_qkv(const hs_model_config *c, const hs_forward_opts *o, unsigned hk, int l,
                      float *qkv, int b, int n, hs_error *err)
{
    int W = hs_qkv_width(c), A = hs_model_attn_width(c), kvA = c->n_kv_head * c->d_head;
    static const hs_site sites[3] = {HS_SITE_Q, HS_SITE_K, HS_SITE_V};
    for (int k = 0; k < 3; k++) {
        if (!(hk & HS_SITE_BIT(sites[k])))
            continue;
        hs_hook_call call = {.site = sites[k], .layer = l, .copy = b,
                             .x = qkv + (k == 0 ? 0 : k == 1 ? A : A + kvA), .rows = n,
                             .cols = k ? kvA : A, .ld = W, .heads = k ? c->n_kv_head : c->n_head,
                             .head_width = c->d_head, .n = n};
        if (o->hook(o->hook_user, &call))
            return hs_fail(err, HS_E_ARG, "stopped by hook");
    }
    return HS_OK;
}
