/* Path patching (include/headscope/patch.h, docs/patching.md): per pair, the source and
 * target runs' head outputs cached; then per sender layer one batched pass from the target's
 * stream entering it, copy c with sender c's z from the source and every other head's z
 * frozen at the target's, which keeps the receiver's input at its layer; then one batched
 * pass from the receiver's layer with that input patched in. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "headscope/forward.h"
#include "importance/patch_internal.h"
#include "nn/block.h"

/* The hooks of both passes at one sender layer: copies are the senders first.. of layer
 * sl; recv: (copies, n, w) the receiver unit's input of each copy, w = d_head. */
typedef struct {
    const hs_patch_path *path;
    int sl, first, stage; /* stage 0: freeze and keep the input, 1: patch it in */
    int unit;             /* the receiver's column block at the input site */
    const float *src_z, *tgt_z; /* (L, n * A) */
    size_t per_layer;
    float *recv;
    int n, dh;
} path_spec;

static int path_hook(void *user, const hs_hook_call *k)
{
    path_spec *p = user;
    if (k->site == HS_SITE_Z && p->stage == 0) { /* every head frozen but the sender */
        const float *t = p->tgt_z + (size_t)k->layer * p->per_layer;
        int sender = k->layer == p->sl ? p->first + k->copy : -1;
        for (int i = 0; i < k->rows; i++) {
            float *row = k->x + (size_t)i * (size_t)k->ld;
            memcpy(row, t + (size_t)i * (size_t)k->cols, (size_t)k->cols * sizeof *row);
            if (sender >= 0)
                memcpy(row + (size_t)sender * (size_t)p->dh,
                       p->src_z + (size_t)k->layer * p->per_layer + (size_t)i * k->cols +
                           (size_t)sender * (size_t)p->dh,
                       (size_t)p->dh * sizeof *row);
        }
        return 0;
    }
    if (k->site != p->path->input || k->layer != p->path->receiver_layer)
        return 0;
    float *r = p->recv + (size_t)k->copy * (size_t)p->n * (size_t)p->dh;
    for (int i = 0; i < k->rows; i++) {
        float *col = k->x + (size_t)i * (size_t)k->ld + (size_t)p->unit * (size_t)p->dh;
        float *kept = r + (size_t)i * (size_t)p->dh;
        memcpy(p->stage ? col : kept, p->stage ? kept : col, (size_t)p->dh * sizeof *col);
    }
    return 0;
}

typedef struct {
    float *src_z, *tgt_z, *x_layers, *logits, *recv;
    hs_forward_ws *ws;
} path_bufs;

static void path_bufs_free(path_bufs *b)
{
    free(b->src_z);
    free(b->tgt_z);
    free(b->x_layers);
    free(b->logits);
    free(b->recv);
    hs_forward_ws_free(b->ws);
}

/* Sender layer sl of pair pi (its senders first..first+count-1): both passes, the first
 * restarting at the target's contexts of layer sl (the hook sets every head's but the
 * sender's to them anyway). */
static hs_status sender_layer(const hs_model *m, const hs_patch_pair *p, int pi,
                              const hs_patch_opts *o, const int32_t *tgt_ids, path_spec *ps,
                              path_bufs *b, int count, hs_patch_result *r, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    int n = p->n, d = c->d_model, V = c->vocab_size;
    int lr = ps->path->receiver_layer, sl = ps->sl;
    int32_t row = p->pos;
    hs_forward_opts fo = {.logits = b->logits, .logit_rows = &row, .n_logit_rows = 1,
                          .start_layer = sl, .x_start = b->x_layers + (size_t)sl * n * d,
                          .batch = count, .hook = path_hook, .hook_user = ps,
                          .hook_sites = HS_SITE_BIT(HS_SITE_Z) | HS_SITE_BIT(ps->path->input)};
    ps->stage = 0;
    b->ws->ctx_start = ps->tgt_z + (size_t)sl * ps->per_layer;
    hs_status st = hs_forward(m, tgt_ids, NULL, n, &fo, b->ws, err);
    b->ws->ctx_start = NULL;
    if (st)
        return st;
    ps->stage = 1;
    fo.start_layer = lr;
    fo.x_start = b->x_layers + (size_t)lr * n * d;
    fo.hook_sites = HS_SITE_BIT(ps->path->input);
    if ((st = hs_forward(m, tgt_ids, NULL, n, &fo, b->ws, err)))
        return st;
    for (int k = 0; k < count; k++) {
        size_t at = (size_t)hs_patch_index(r, sl, ps->first + k, 0) * r->n_pairs + (size_t)pi;
        r->patched[at] = hs_patch_metric_of(b->logits + (size_t)k * V, V, p, o->metric);
    }
    double head = hs_patch_head_flops(c, count, V);
    r->passes += (hs_patch_pass_flops(c, n, sl, count, HS_PATCH_START_CTX, n) + head +
                  hs_patch_pass_flops(c, n, lr, count, HS_PATCH_START_LAYER, n) + head) /
                 hs_patch_forward_flops(c, n);
    return HS_OK;
}

static hs_status path_pair(const hs_model *m, const hs_patch_pair *p, int pi,
                           const hs_patch_opts *o, const hs_patch_path *path,
                           hs_patch_result *r, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    int L = c->n_layer, H = c->n_head, V = c->vocab_size, n = p->n, d = c->d_model;
    size_t per_layer = (size_t)n * (size_t)hs_model_attn_width(c);
    path_bufs b = {0};
    hs_status st;
    b.src_z = malloc((size_t)L * per_layer * sizeof(float));
    b.tgt_z = malloc((size_t)L * per_layer * sizeof(float));
    b.x_layers = malloc((size_t)L * (size_t)n * (size_t)d * sizeof(float));
    b.logits = malloc((size_t)H * (size_t)V * sizeof(float));
    b.recv = malloc((size_t)H * (size_t)n * (size_t)c->d_head * sizeof(float));
    if (!b.src_z || !b.tgt_z || !b.x_layers || !b.logits || !b.recv) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory for pair %d's activations", pi + 1);
        goto done;
    }
    if ((st = hs_forward_ws_new_batch(m, n, H, &b.ws, err)))
        goto done;
    const int32_t *src_ids = o->noise ? p->corrupt : p->clean;
    const int32_t *tgt_ids = o->noise ? p->clean : p->corrupt;
    int32_t row = p->pos;
    double mm[2];
    for (int k = 0; k < 2; k++) { /* the source's and the target's z, their metrics */
        hs_patch_cache pc = {HS_SITE_Z, k ? b.tgt_z : b.src_z, per_layer};
        hs_forward_opts fo = {.logits = b.logits, .logit_rows = &row, .n_logit_rows = 1,
                              .x_layers = k ? b.x_layers : NULL, .hook = hs_patch_cache_hook,
                              .hook_user = &pc, .hook_sites = HS_SITE_BIT(HS_SITE_Z)};
        if ((st = hs_forward(m, k ? tgt_ids : src_ids, NULL, n, &fo, b.ws, err)))
            goto done;
        mm[k] = hs_patch_metric_of(b.logits, V, p, o->metric);
    }
    r->clean[pi] = o->noise ? mm[1] : mm[0];
    r->corrupt[pi] = o->noise ? mm[0] : mm[1];
    r->passes += 2 * hs_patch_plain_passes(c, n);
    int unit = path->input == HS_SITE_Q ? path->receiver_head
                                        : hs_model_kv_head(c, path->receiver_head);
    for (int sl = 0; sl < path->receiver_layer; sl++) {
        if (path->sender_layer >= 0 && sl != path->sender_layer)
            continue;
        int first = path->sender_layer >= 0 ? path->sender_head : 0;
        int count = path->sender_layer >= 0 ? 1 : H;
        path_spec ps = {path, sl, first, 0, unit, b.src_z, b.tgt_z, per_layer, b.recv, n,
                        c->d_head};
        if ((st = sender_layer(m, p, pi, o, tgt_ids, &ps, &b, count, r, err)))
            goto done;
    }
done:
    if (st)
        hs_error_prefix(err, "pair %d", pi + 1);
    path_bufs_free(&b);
    return st;
}

hs_status hs_patch_path_run(const hs_model *m, const hs_patch_pair *pairs, int n_pairs,
                            const hs_patch_opts *o, const hs_patch_path *path,
                            hs_patch_result **out, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    *out = NULL;
    hs_patch_opts po = *o;
    po.site = HS_SITE_Z, po.each_position = 0, po.method = HS_PATCH_EXACT;
    hs_status st = hs_patch_check_pairs(c, pairs, n_pairs, &po, err);
    if (st)
        return st;
    const hs_patch_path *q = path;
    if (q->receiver_layer < 1 || q->receiver_layer >= c->n_layer || q->receiver_head < 0 ||
        q->receiver_head >= c->n_head ||
        (q->input != HS_SITE_Q && q->input != HS_SITE_K && q->input != HS_SITE_V))
        return hs_fail(err, HS_E_ARG, "path patching: receiver %d.%d (layer 1 to %d, head 0 to "
                       "%d) with input q, k or v", q->receiver_layer, q->receiver_head,
                       c->n_layer - 1, c->n_head - 1);
    if ((q->sender_layer != -1 || q->sender_head != -1) &&
        (q->sender_layer < 0 || q->sender_layer >= q->receiver_layer || q->sender_head < 0 ||
         q->sender_head >= c->n_head))
        return hs_fail(err, HS_E_ARG, "path patching: sender %d.%d is not a head of a layer "
                       "before the receiver's (%d)", q->sender_layer, q->sender_head,
                       q->receiver_layer);
    hs_patch_result *r = NULL;
    if ((st = hs_patch_result_new(q->receiver_layer, c->n_head, 1, n_pairs, 0, &r, err)))
        return st;
    size_t cells = (size_t)r->n_layer * (size_t)r->n_units;
    for (size_t k = 0; k < cells * (size_t)n_pairs; k++)
        r->patched[k] = NAN; /* the senders not asked */
    for (int i = 0; i < n_pairs; i++) {
        if ((st = path_pair(m, &pairs[i], i, &po, q, r, err)))
            goto fail;
        if (o->progress && o->progress(o->progress_user, i + 1, n_pairs)) {
            st = hs_fail(err, HS_E_ARG, "stopped");
            goto fail;
        }
    }
    if ((st = hs_patch_summarise(r, r->patched, r->effect, r->ci_lo, r->ci_hi, &po, err)))
        goto fail;
    *out = r;
    return HS_OK;
fail:
    hs_patch_result_free(r);
    return st;
}
