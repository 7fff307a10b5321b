/*
 * headscope/hooks.h — named hook sites in the forward pass: read a site (cache), replace
 * it (patch) or add to it (steer), from one callback.
 *
 * The sites carry TransformerLens's names. One callback, hs_forward_opts.hook, is called at
 * every site whose bit is in hs_forward_opts.hook_sites, for every layer and every copy of
 * a batch, with the site's values in the pass's own buffer: the callback may read them,
 * overwrite them or add to them, and the pass goes on with what it leaves there.
 *
 *     hs_forward_opts o = {0};
 *     o.hook = my_hook;  o.hook_user = &state;   // int my_hook(void *, const hs_hook_call *)
 *     o.hook_sites = HS_SITE_BIT(HS_SITE_Z) | HS_SITE_BIT(HS_SITE_RESID_PRE);
 *     hs_forward(model, ids, NULL, n, &o, NULL, &err);
 *
 * my_hook sees call->site, call->layer, call->copy and the values call->x (call->rows rows
 * of call->cols floats, row r at call->x + r * call->ld) and returns 0 to go on.
 *
 * docs/patching.md lists the sites with their shapes per family.
 */
#ifndef HEADSCOPE_HOOKS_H
#define HEADSCOPE_HOOKS_H

#include "headscope/model.h"
#include "headscope/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The sites, in the order a pass reaches them in a layer (then after the last layer). */
typedef enum hs_site {
    HS_SITE_RESID_PRE,  /* blocks.L.hook_resid_pre: the stream entering layer L */
    HS_SITE_Q,          /* blocks.L.attn.hook_q: queries (rotary models: after the turn,
                           TransformerLens's hook_rot_q, as headscope dump writes them) */
    HS_SITE_K,          /* blocks.L.attn.hook_k: keys, per KV head (after the turn) */
    HS_SITE_V,          /* blocks.L.attn.hook_v: values, per KV head */
    HS_SITE_PATTERN,    /* blocks.L.attn.hook_pattern: probabilities, before the head mask */
    HS_SITE_Z,          /* blocks.L.attn.hook_z: each head's context, under the head mask */
    HS_SITE_RESULT,     /* blocks.L.attn.hook_result: each head's z_h W_O^h, without b_O */
    HS_SITE_ATTN_OUT,   /* blocks.L.hook_attn_out: z W_O + b_O as added to the stream */
    HS_SITE_MLP_OUT,    /* blocks.L.hook_mlp_out: the MLP's output as added to the stream */
    HS_SITE_RESID_POST, /* blocks.L.hook_resid_post: the stream leaving layer L */
    HS_SITE_LN_FINAL,   /* ln_final.hook_normalized: after the final norm (post-norm
                           models: the last layer's output, which no norm follows) */
    HS_SITE_LOGITS,     /* logits: the LM head's output, the rows the pass computes */
    HS_SITE_COUNT
} hs_site;

#define HS_SITE_BIT(s) (1u << (unsigned)(s))

/* Which heads a site is split into. */
typedef enum hs_site_heads {
    HS_HEADS_NONE,  /* one vector a row */
    HS_HEADS_QUERY, /* n_head heads of d_head columns (pattern: n_head maps) */
    HS_HEADS_KV     /* n_kv_head heads of d_head columns (grouped-query attention) */
} hs_site_heads;

/* A row of the table of sites (hs_site_get). */
typedef struct hs_site_info {
    hs_site site;
    const char *name;  /* printf pattern of the layer: "blocks.%d.attn.hook_q"; no %d for
                          the sites after the last layer */
    const char *key;   /* short name: "q", "resid_pre", "logits" */
    int per_layer;     /* 1: one site per layer */
    hs_site_heads heads;
    const char *shape; /* the values' shape, TransformerLens's order: "(n, n_head, d_head)" */
} hs_site_info;

/* Row s of the one table of sites (src/nn/hooks.c), or NULL when s is no site. */
const hs_site_info *hs_site_get(hs_site s);

/* The values at a site: rows x cols floats, row r at x + r * ld (q, k, v are columns of the
 * pass's fused [Q | K | V] rows, so ld > cols there; pattern: rows = n_head * n, cols = n).
 * copy: the copy of a batched pass (0 otherwise). layer: -1 after the last layer. heads and
 * head_width: the site's heads (0 when it has none), head h in columns h * head_width.. (the
 * pattern: rows h * n..). */
typedef struct hs_hook_call {
    hs_site site;
    int layer, copy;
    float *x;
    int rows, cols, ld;
    int heads, head_width;
    int n; /* the pass's tokens (a copy's rows, unless the pass keeps fewer at the end) */
} hs_hook_call;

/* Called at each site asked for; returns 0 to go on, non-zero to stop the pass
 * (hs_forward then fails with HS_E_ARG, "stopped by hook"). */
typedef int (*hs_hook_fn)(void *user, const hs_hook_call *call);

/* The site named name ("blocks.3.attn.hook_z", "ln_final.hook_normalized", "logits"), or a
 * short key with a layer ("z" with layer 3 given apart: see hs_site_from_key): *site and
 * *layer (-1 for a site after the last layer). HS_E_ARG naming the text when it is no site
 * or the layer is not below n_layer. */
hs_status hs_site_parse(const char *name, int n_layer, hs_site *site, int *layer, hs_error *err);

/* The site whose short key is key ("z", "resid_pre"), or -1. */
int hs_site_from_key(const char *key);

/* The site's shape for model config c and n tokens: dims[0..rank-1] (TransformerLens's
 * order, as hs_site_info.shape), returns rank (2 or 3). */
int hs_site_shape(const hs_model_config *c, hs_site s, int n, int dims[3]);

/* The number of heads of site s in config c (n_head, n_kv_head, or 0). */
int hs_site_head_count(const hs_model_config *c, hs_site s);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_HOOKS_H */
