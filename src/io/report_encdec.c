/* report.json of an encoder-decoder (T5): the three kinds of heads (the encoder's
 * self-attention, the decoder's self-attention, the cross-attention), each head saying its
 * kind. docs/report-schema.md § Encoder-decoders documents every field. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "core/core.h"
#include "io/io_internal.h"
#include "pipeline/encdec_result.h"

static void add_num(cJSON *o, const char *k, double v)
{
    cJSON_AddItemToObject(o, k, hs_json_num(v));
}

static cJSON *strings(const char *const *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
    return a;
}

/* "enc0.1", "dec1.0", "cross1.1": a head of a kind by its stack's layer and head. */
static void head_id(int kind, int layer, int head, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%d.%d", hs_encdec_kind_prefix(kind), layer, head);
}

static cJSON *head_ref(int kind, int index, int H)
{
    char id[48];
    cJSON *o = cJSON_CreateObject();
    head_id(kind, index / H, index % H, id, sizeof id);
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "kind", hs_encdec_kind_name(kind));
    cJSON_AddNumberToObject(o, "layer", index / H);
    cJSON_AddNumberToObject(o, "head", index % H);
    return o;
}

static cJSON *scores_json(int kind, const hs_detect *d)
{
    cJSON *s = cJSON_CreateObject();
    int cross = kind == HS_ED_CROSS;
    add_num(s, "previous_token", d->prev_token);
    add_num(s, "next_token", d->next_token);
    add_num(s, "self", d->self);
    add_num(s, "first_token", d->first_token);
    add_num(s, "eos", d->sep);
    add_num(s, "duplicate_token", cross ? NAN : d->duplicate);
    add_num(s, "induction", d->induction);
    add_num(s, "same_token", cross ? d->duplicate : NAN);
    add_num(s, "positional_offset", d->extra[0]);
    add_num(s, "positional_offset_k", d->extra_param[0]);
    return s;
}

static cJSON *head_json(const hs_encdec_kind *k, int kind, int index, int H)
{
    cJSON *o = head_ref(kind, index, H);
    cJSON_AddNumberToObject(o, "model_layer", k->first_layer + index / H);
    cJSON *shape = cJSON_AddArrayToObject(o, "map_shape");
    cJSON_AddItemToArray(shape, cJSON_CreateNumber(k->rows));
    cJSON_AddItemToArray(shape, cJSON_CreateNumber(k->cols));
    const hs_entropy *e = &k->entropy[index];
    add_num(o, "entropy_nats", e->nats);
    add_num(o, "entropy_bits", e->bits);
    add_num(o, "entropy_norm", e->norm);
    add_num(o, "max_weight_mean", e->rowmax);
    cJSON_AddItemToObject(o, "scores", scores_json(kind, &k->scores[index]));
    add_num(o, "ablation_delta", k->ablation[index]);
    add_num(o, "gradient_importance", k->gradient[index]);
    add_num(o, "gradient_raw", k->gradient_raw[index]);
    return o;
}

static const char *const queries_of[HS_ED_KINDS] = {"encoder", "decoder", "decoder"};
static const char *const keys_of[HS_ED_KINDS] = {"encoder", "decoder", "encoder"};
static const char *const vis_of[HS_ED_KINDS] = {"bidirectional", "causal", "all_encoder"};

static cJSON *kinds_json(const hs_encdec_result *r)
{
    cJSON *arr = cJSON_CreateArray();
    for (int t = 0; arr && t < HS_ED_KINDS; t++) {
        const hs_encdec_kind *k = &r->kinds[t];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddStringToObject(o, "kind", hs_encdec_kind_name(t));
        cJSON_AddStringToObject(o, "id_prefix", hs_encdec_kind_prefix(t));
        cJSON_AddNumberToObject(o, "n_layer", k->n_layer);
        cJSON_AddNumberToObject(o, "first_model_layer", k->first_layer);
        cJSON_AddStringToObject(o, "queries", queries_of[t]);
        cJSON_AddStringToObject(o, "keys", keys_of[t]);
        cJSON_AddStringToObject(o, "visibility", vis_of[t]);
        cJSON *shape = cJSON_AddArrayToObject(o, "map_shape");
        cJSON_AddItemToArray(shape, cJSON_CreateNumber(k->rows));
        cJSON_AddItemToArray(shape, cJSON_CreateNumber(k->cols));
        cJSON *div = cJSON_AddArrayToObject(o, "diversity");
        for (int l = 0; l < k->n_layer; l++)
            cJSON_AddItemToArray(div, hs_json_num(k->diversity[l]));
    }
    return arr;
}

static cJSON *text_or_null(const char *s)
{
    return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static void add_input(cJSON *r, const hs_analysis *a, const hs_encdec_result *e)
{
    cJSON *in = cJSON_AddObjectToObject(r, "input");
    cJSON_AddItemToObject(in, "text", text_or_null(a->text));
    cJSON_AddNumberToObject(in, "n_tokens", a->n);
    cJSON_AddBoolToObject(in, "truncated", a->truncated);
    cJSON_AddItemToObject(in, "ids", hs_json_ints(a->ids, a->n));
    cJSON_AddItemToObject(in, "tokens", strings((const char *const *)a->tokens, a->n));
    cJSON_AddItemToObject(in, "display_tokens", strings((const char *const *)a->display, a->n));
    cJSON_AddItemToObject(in, "target", text_or_null(e->target));
    cJSON_AddNumberToObject(in, "n_target_tokens", e->n_dec);
    cJSON_AddItemToObject(in, "target_ids", hs_json_ints(e->target_ids, e->n_dec));
    cJSON_AddItemToObject(in, "target_tokens", strings((const char *const *)e->target_tokens, e->n_dec));
    cJSON_AddItemToObject(in, "decoder_ids", hs_json_ints(e->dec_ids, e->n_dec));
    cJSON_AddItemToObject(in, "decoder_tokens", strings((const char *const *)e->dec_tokens, e->n_dec));
    cJSON_AddItemToObject(in, "decoder_display_tokens", strings((const char *const *)e->dec_display, e->n_dec));
}

static void add_pruning(cJSON *r, const hs_analysis *a, const hs_encdec_result *e, int L, int H)
{
    const hs_analyze_opts *o = &a->opts;
    cJSON *pu = cJSON_AddObjectToObject(r, "pruning");
    cJSON_AddStringToObject(pu, "method", "gradient");
    cJSON_AddNumberToObject(pu, "round_heads", e->round_heads);
    add_num(pu, "tolerance", o->prune_tol);
    cJSON *cand = cJSON_AddObjectToObject(pu, "candidates");
    for (int t = 0; t < HS_ED_KINDS; t++) {
        const hs_encdec_kind *k = &e->kinds[t];
        cJSON *list = cJSON_AddArrayToObject(cand, hs_encdec_kind_name(t));
        for (int i = 0; i < k->n_candidates; i++)
            cJSON_AddItemToArray(list, head_ref(t, k->candidates[i], H));
    }
    cJSON *curve = cJSON_AddArrayToObject(pu, "curve");
    int LH = L * H, left = e->n_pruned;
    for (int s = 0; e->prune_order && s < e->n_rounds; s++) {
        cJSON *c = cJSON_CreateObject(), *rm = cJSON_AddArrayToObject(c, "removed");
        cJSON_AddItemToArray(curve, c);
        for (int i = s * e->round_heads; i < (s + 1) * e->round_heads && i < e->n_pruned; i++) {
            int x = e->prune_order[i], cross = x >= LH, idx = x % LH;
            int layer = idx / H, t = cross ? HS_ED_CROSS : layer < e->kinds[HS_ED_DEC].first_layer
                                                               ? HS_ED_ENC : HS_ED_DEC;
            int first = e->kinds[t].first_layer;
            cJSON_AddItemToArray(rm, head_ref(t, (layer - first) * H + idx % H, H));
            left--;
        }
        cJSON_AddNumberToObject(c, "heads_left", left);
        add_num(c, "loss", e->prune_loss[s + 1]);
    }
}

static cJSON *tree(const hs_analysis *a, const char *const *files, int n_files)
{
    const hs_encdec_result *e = a->encdec;
    const hs_model_config *c = hs_model_config_of(a->model);
    const hs_analyze_opts *o = &a->opts;
    int H = c->n_head;
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return NULL;
    hs_report_add_header(r, a);
    cJSON *mo = cJSON_GetObjectItem(r, "model");
    cJSON_AddNumberToObject(mo, "n_enc_layer", c->n_enc_layer);
    cJSON_AddNumberToObject(mo, "n_dec_layer", c->n_layer - c->n_enc_layer);
    cJSON_AddNumberToObject(mo, "decoder_start_id", c->decoder_start_id);
    add_input(r, a, e);
    cJSON *op = cJSON_AddObjectToObject(r, "options");
    cJSON_AddBoolToObject(op, "ablation", o->ablation);
    cJSON_AddStringToObject(op, "ablation_kind", hs_ablation_kind_name(o->ablation_kind));
    cJSON_AddBoolToObject(op, "pruning", o->ablation && o->pruning);
    cJSON_AddBoolToObject(op, "gradient", o->gradient);
    cJSON *lo = cJSON_AddObjectToObject(r, "loss");
    cJSON_AddStringToObject(lo, "kind", "target_nll");
    add_num(lo, "value", e->loss);
    cJSON_AddItemToObject(r, "kinds", kinds_json(e));
    cJSON *heads = cJSON_AddArrayToObject(r, "heads");
    for (int t = 0; t < HS_ED_KINDS; t++)
        for (int i = 0; i < e->kinds[t].n_layer * H; i++)
            cJSON_AddItemToArray(heads, head_json(&e->kinds[t], t, i, H));
    add_pruning(r, a, e, c->n_layer, H);
    static const char *const times[] = {"forward_seconds", "ablation_seconds", "pruning_seconds",
                                         "gradient_seconds", "hash_seconds", "total_seconds"};
    const double secs[] = {e->seconds_forward, e->seconds_ablation, e->seconds_pruning,
                           e->seconds_gradient, a->seconds_hash, a->seconds_total};
    cJSON *tm = cJSON_AddObjectToObject(r, "timing");
    cJSON_AddNumberToObject(tm, "forward_passes", (double)a->forward_passes);
    for (size_t i = 0; i < sizeof times / sizeof *times; i++)
        add_num(tm, times[i], secs[i]);
    cJSON_AddItemToObject(r, "files", strings(files, n_files));
    return r;
}

char *hs_report_encdec_text(const hs_analysis *a, const char *const *files, int n_files,
                            int flags)
{
    cJSON *r = tree(a, files, n_files);
    char *s = !r ? NULL : (flags & HS_REPORT_PRETTY) ? cJSON_Print(r) : cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    return s;
}
