/* Packed passes (hs_forward_packed, headscope/forward.h): several texts stacked as the rows
 * of one sequence, so the projections, the MLP and the LM head are GEMMs over all of them,
 * each text's attention over its own rows from position 0 (the block's loop over copies
 * runs over the texts: hs_forward_ws.seg_len). Corpus mode's throughput. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#include "headscope/forward.h"
#include "nn/block.h"
#include "nn/ops.h"

/* The block calls on_attn once per text, layer after layer, texts in order: the count of
 * calls within the layer names the text. */
typedef struct packed_tramp {
    const hs_packed_opts *po;
    int n_texts, layer, text;
} packed_tramp;

static int tramp_attn(void *user, int layer, const float *probs, int n_head, int n)
{
    packed_tramp *t = user;
    if (layer != t->layer) {
        t->layer = layer;
        t->text = 0;
    }
    return t->po->on_attn(t->po->user, layer, t->text++, probs, n_head, n);
}

/* The checks of hs_forward_packed's arguments; *total and *longest of the texts. */
static hs_status packed_check(const hs_model *m, const int32_t *ids, const int32_t *type_ids,
                              const int *lens, int n_texts, hs_forward_ws *ws, size_t *total,
                              int *longest, hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    if (c->arch->enc_dec)
        return hs_fail(err, HS_E_UNSUPPORTED, "model '%s' is an encoder-decoder: its texts run "
                       "one at a time (hs_forward_encdec)", c->arch->name);
    if (n_texts < 1 || n_texts > HS_FORWARD_MAX_BATCH || !lens)
        return hs_fail(err, HS_E_ARG, "a packed pass of %d texts (1 to %d)", n_texts,
                       HS_FORWARD_MAX_BATCH);
    if (ws && (ws->on_ctx || ws->final_rstd || ws->out_rows || ws->mla_pos_share ||
               ws->moe_route || ws->rel || ws->n_seg))
        return hs_fail(err, HS_E_ARG, "a packed pass takes a workspace without observers");
    *total = 0;
    *longest = 0;
    for (int t = 0; t < n_texts; t++) {
        hs_status st = hs_forward_check(m, ids + *total, type_ids ? type_ids + *total : NULL,
                                        lens[t], err);
        if (st) {
            hs_error_prefix(err, "text %d of the pack", t);
            return st;
        }
        *total += (size_t)lens[t];
        if (lens[t] > *longest)
            *longest = lens[t];
    }
    if (*total > (size_t)INT_MAX / 4)
        return hs_fail(err, HS_E_ARG, "%zu tokens in one packed pass", *total);
    return HS_OK;
}

hs_status hs_forward_packed(const hs_model *m, const int32_t *ids, const int32_t *type_ids,
                            const int *lens, int n_texts, const hs_packed_opts *po,
                            hs_forward_ws *ws, hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    hs_packed_opts none = {0};
    size_t total = 0;
    int longest = 0;
    hs_status st = packed_check(m, ids, type_ids, lens, n_texts, ws, &total, &longest, err);
    if (st)
        return st;
    if (!po)
        po = &none;
    if (po->logits && !c->has_lm_head)
        return hs_fail(err, HS_E_UNSUPPORTED, "the model has no language-model head");
    int copies = (int)((total + (size_t)longest - 1) / (size_t)longest), N = (int)total;
    hs_forward_ws *own = NULL;
    if (!ws || ws->max_n < longest || (size_t)ws->max_n * (size_t)ws->max_batch < total) {
        if ((st = hs_forward_ws_new_batch(m, longest, copies, &own, err)))
            return st;
        own->stop_after_attn = !po->logits && !po->hidden; /* the maps are all it gives */
        ws = own;
    }
    int d = c->d_model;
    for (size_t r0 = 0, t = 0; t < (size_t)n_texts; r0 += (size_t)lens[t], t++)
        hs_embed(m, ids + r0, type_ids ? type_ids + r0 : NULL, lens[t], ws->x + r0 * (size_t)d);
    packed_tramp tr = {po, n_texts, -1, 0};
    hs_forward_opts o = {.on_attn = po->on_attn ? tramp_attn : NULL, .user = &tr,
                         .allow_nonfinite = po->allow_nonfinite};
    ws->seg_len = lens;
    ws->n_seg = n_texts;
    for (int l = 0; l < c->n_layer && !st; l++)
        st = hs_block_forward(m, l, ws, N, 1, NULL, 0, &o, NULL, err);
    ws->seg_len = NULL;
    ws->n_seg = 0;
    if (!st && !ws->stop_after_attn) {
        hs_final_norm(m, ws->x, ws->x, NULL, NULL, N);
        if (po->hidden)
            memcpy(po->hidden, ws->x, total * (size_t)d * sizeof *ws->x);
        if (po->logits)
            hs_lm_logits(m, ws->x, NULL, N, ws->qkv, po->logits);
    }
    hs_forward_ws_free(own);
    return st;
}
