/* report.json ("headscope.report/3") from an hs_analysis; atomic file writes.
 * docs/report-schema.md documents every field. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "headscope/report.h"
#include "analysis/analysis_internal.h"
#include "core/core.h"
#include "io/io_internal.h"

static void add_num(cJSON *o, const char *k, double v)
{
    cJSON_AddItemToObject(o, k, hs_json_num(v));
}

/* The map entries the similarity compares (report.json's similarity.entries): "all" when
 * every analysed layer is bidirectional, "lower_triangle" when every one is causal, else
 * "visible" (the cells both heads see). */
static const char *similarity_entries(const hs_analysis *a)
{
    const hs_model_config *c = hs_model_config_of(a->model);
    int bidir = 0, causal = 0, other = 0;
    for (int k = 0; k < a->n_heads; k++) {
        hs_visibility v = hs_model_layer_visibility(c, a->head_index[k] / c->n_head);
        bidir |= v.kind == HS_VIS_BIDIRECTIONAL;
        causal |= v.kind == HS_VIS_CAUSAL;
        other |= v.kind != HS_VIS_BIDIRECTIONAL && v.kind != HS_VIS_CAUSAL;
    }
    return other || (bidir && causal) ? "visible" : causal ? "lower_triangle" : "all";
}

/* input.sinks: the attention-sink positions of metrics.md (position 0; every [CLS] and
 * [SEP] of a family that has them), found with hs_sinks_mark from their ids in the text. */
static cJSON *sinks_json(const hs_analysis *a, const hs_arch *ar)
{
    int32_t cls = -1, sep = -1;
    cJSON *arr = cJSON_CreateArray();
    unsigned char *sink = malloc(a->n > 0 ? (size_t)a->n : 1);
    for (int i = 0; a->tokens && i < a->n; i++) {
        if (ar->cls_token && !strcmp(a->tokens[i], ar->cls_token))
            cls = a->ids[i];
        else if (ar->sep_token && !strcmp(a->tokens[i], ar->sep_token))
            sep = a->ids[i];
    }
    if (arr && sink && hs_sinks_mark(a->ids, a->n, cls, sep, sink, NULL) == HS_OK)
        for (int i = 0; i < a->n; i++)
            if (sink[i])
                cJSON_AddItemToArray(arr, cJSON_CreateNumber(i));
    free(sink);
    return arr;
}

/* input.word_ids: the word of each token, as the word-level maps found them (--word-level)
 * or found here the same way (hs_word_ids). */
static cJSON *word_ids_json(const hs_analysis *a)
{
    if (a->word_ids)
        return hs_json_ints(a->word_ids, a->n);
    int32_t *w = malloc((size_t)a->n * sizeof *w);
    cJSON *arr = NULL;
    if (w) {
        hs_word_ids((const char *const *)a->tokens, (const char *const *)a->display, a->ids,
                    a->n, hs_model_config_of(a->model)->arch->tokenizer == HS_TOK_WORDPIECE,
                    hs_model_tokenizer(a->model), w);
        arr = hs_json_ints(w, a->n);
    }
    free(w);
    return arr;
}

/* probe.ablation: each head's ablation cost on the probe's second half. */
static void add_probe_ablation(cJSON *pr, const hs_analysis *a)
{
    const hs_model_config *c = hs_model_config_of(a->model);
    cJSON *pa = cJSON_AddObjectToObject(pr, "ablation");
    cJSON_AddBoolToObject(pa, "available", a->probe_ablation != NULL);
    if (!a->probe_ablation) {
        cJSON_AddStringToObject(pa, "reason",
                                !a->opts.ablation || !a->probe_ids || !a->opts.probe_ablation
                                    ? "not asked for (--no-ablation, --probe-ablation none)"
                                : !c->causal || !c->has_lm_head
                                    ? "needs a next-token loss (a causal model with an LM head)"
                                    : "the probe is too short");
        return;
    }
    hs_ablation_kind kind = a->opts.probe_ablation_kind;
    cJSON_AddStringToObject(pa, "kind", hs_ablation_kind_name(kind));
    if (kind == HS_ABLATION_RESAMPLE) {
        cJSON_AddNumberToObject(pa, "resample_seed", (double)a->opts.resample_seed);
        cJSON_AddItemToObject(pa, "resample_ids", hs_json_ints(a->probe_resample_ids, a->probe_len));
    }
    cJSON_AddItemToObject(pa, "loss_rows", hs_json_ints(a->probe_rows, 2));
    add_num(pa, "loss", a->probe_loss);
    add_num(pa, "first_half_loss", a->probe_loss_first);
    cJSON *hs = cJSON_AddArrayToObject(pa, "heads");
    for (int k = 0; k < a->n_heads; k++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "layer", a->heads[k].layer);
        cJSON_AddNumberToObject(e, "head", a->heads[k].head);
        add_num(e, "delta", a->probe_ablation[a->head_index[k]]);
        cJSON_AddItemToArray(hs, e);
    }
}

static cJSON *head_json(const hs_analysis *a, const hs_head_result *h)
{
    char name[32];
    const hs_model_config *c = hs_model_config_of(a->model);
    cJSON *o = cJSON_CreateObject();
    snprintf(name, sizeof name, "%d.%d", h->layer, h->head);
    cJSON_AddStringToObject(o, "id", name);
    cJSON_AddNumberToObject(o, "layer", h->layer);
    cJSON_AddNumberToObject(o, "head", h->head);
    cJSON_AddNumberToObject(o, "kv_head", hs_model_kv_head(c, h->head));
    hs_report_head_values(o, h); /* entropy_nats ... gradient_raw: the metric table's */
    cJSON_AddNumberToObject(o, "cluster", h->cluster);
    hs_report_head_types(o, h, &a->opts, c->arch->sep_token != NULL);
    add_num(o, "ov_copying", a->composition
                                 ? a->composition->copying[h->layer * c->n_head + h->head]
                                 : NAN);
    add_num(o, "dla_total", a->dla ? a->dla->total[h->layer * c->n_head + h->head] : NAN);
    cJSON *nb = cJSON_AddObjectToObject(o, "norm_based");
    add_num(nb, "first_token_share", h->norm_first_token);
    add_num(nb, "mass", h->norm_mass);
    add_num(nb, "value_norm", h->value_norm);
    return o;
}

/* {"layer": l, "head": h} of flat index l*n_head + h: what a program reads instead of the
 * "l.h" name ("0.1" and "0.10" are one number, and sort wrongly as strings). */
static cJSON *head_pair(int index, int n_head)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "layer", index / n_head);
    cJSON_AddNumberToObject(o, "head", index % n_head);
    return o;
}

/* A head by name and by its two integers, under keys prefix, prefix_layer, prefix_head. */
static void add_head_ref(cJSON *o, const char *prefix, int index, int n_head)
{
    char name[32], key[32];
    snprintf(name, sizeof name, "%d.%d", index / n_head, index % n_head);
    cJSON_AddStringToObject(o, prefix, name);
    snprintf(key, sizeof key, "%s_layer", prefix);
    cJSON_AddNumberToObject(o, key, index / n_head);
    snprintf(key, sizeof key, "%s_head", prefix);
    cJSON_AddNumberToObject(o, key, index % n_head);
}

/* An (n_heads, n_heads) matrix as a large array, or nothing in the lean copy (big NULL). */
static void add_head_matrix(cJSON *o, const char *k, hs_json_big *big, const double *m, int n)
{
    if (big)
        cJSON_AddItemToObject(o, k, hs_json_big_matrix(big, m, n, n));
}

static void add_composition(cJSON *r, const hs_analysis *a, hs_json_big *big)
{
    const hs_composition *cp = a->composition;
    const hs_model_config *c = hs_model_config_of(a->model);
    cJSON *co = cJSON_AddObjectToObject(r, "composition");
    if (!cp) {
        cJSON_AddBoolToObject(co, "available", 0);
        const char *why = c->arch->mla_kv_lora
                              ? "not defined for latent attention (its keys come from a shared "
                                "latent and a rotary key, not one W_K per head)"
                              : hs_composition_norms_undefined(c);
        cJSON_AddStringToObject(co, "reason", why ? why : !hs_composition_defined(c)
                                                  ? "defined for pre-norm decoders; this model "
                                                    "is post-norm (the residual stream is "
                                                    "renormalised after every sublayer, so the "
                                                    "weights alone do not say how much of a "
                                                    "head's output reaches a later head)"
                                                  : "not computed (--no-composition)");
        return;
    }
    cJSON_AddBoolToObject(co, "available", 1);
    cJSON_AddStringToObject(co, "weights", "the attention norm's scale (ln_1, input_layernorm) "
                                           "folded into W_Q, W_K, W_V; the final norm's into "
                                           "W_U; biases left out");
    cJSON_AddStringToObject(co, "positions", c->arch->pos == HS_POS_ROTARY
                                                 ? "rotary: left out, W_Q W_K^T is the QK circuit "
                                                   "without rotation (query and key at the same "
                                                   "position), as TransformerLens computes it"
                                             : c->arch->pos == HS_POS_ALIBI
                                                 ? "ALiBi: the score bias of each key's position "
                                                   "is left out, W_Q W_K^T is the content part"
                                                 : "learned: in the residual stream, not in the "
                                                   "weights");
    cJSON_AddStringToObject(co, "kv_heads", c->n_kv_head < c->n_head
                                                ? "grouped: each query head reads its KV head's "
                                                  "W_K and W_V"
                                                : "one per query head");
    static const char *const kinds[3] = {"q", "k", "v"};
    const double *m[3] = {cp->q, cp->k, cp->v};
    for (int k = 0; k < 3; k++)
        add_head_matrix(co, kinds[k], big, m[k], cp->n_heads);
    cJSON *cpy = cJSON_AddArrayToObject(co, "copying");
    for (int k = 0; k < cp->n_heads; k++)
        cJSON_AddItemToArray(cpy, hs_json_num(cp->copying[k]));
    cJSON *st = cJSON_AddArrayToObject(co, "strongest");
    int from[HS_COMPOSITION_TOP], to[HS_COMPOSITION_TOP];
    for (int k = 0; k < 3; k++) {
        int n = hs_composition_strongest(cp, k, from, to, HS_COMPOSITION_TOP);
        for (int i = 0; i < n; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "kind", kinds[k]);
            add_head_ref(e, "from", from[i], cp->n_head);
            add_head_ref(e, "to", to[i], cp->n_head);
            add_num(e, "score", m[k][(size_t)from[i] * cp->n_heads + to[i]]);
            cJSON_AddItemToArray(st, e);
        }
    }
}

/* "direct_logit_attribution": per analysed head and position, with the targets, the
 * per-token loss and the full run's logits of the targets beside them. */
static void add_dla(cJSON *r, const hs_analysis *a, hs_json_big *big)
{
    const hs_dla *d = a->dla;
    cJSON *o = cJSON_AddObjectToObject(r, "direct_logit_attribution");
    cJSON_AddBoolToObject(o, "available", d != NULL);
    if (!d) {
        const char *why = hs_dla_undefined(a->model);
        cJSON_AddStringToObject(o, "reason", why ? why
                                             : !a->opts.dla ? "not computed (--no-dla)"
                                                            : "needs at least 2 tokens");
        return;
    }
    const hs_arch *ar = hs_model_config_of(a->model)->arch;
    cJSON_AddStringToObject(o, "convention", ar->post_norms || ar->final_softcap > 0
        ? "head output z_h W_O^h (no bias), through the attention output's norm with the full "
          "run's scale, divided by the full run's final-norm scale, times its weight, dotted "
          "with the target's unembedding row, times a final logit softcap's slope at the full "
          "run's logit where there is one (docs/metrics.md)"
        : "head output z_h W_O^h (no bias), centred, divided by the full run's final-norm std, "
          "times ln_f's weight, dotted with the target's unembedding row");
    cJSON_AddItemToObject(o, "targets", hs_json_ints(d->targets, d->n_pos));
    cJSON *tl = cJSON_AddArrayToObject(o, "token_loss"), *lg = cJSON_AddArrayToObject(o, "logit");
    for (int i = 0; i < d->n_pos; i++) {
        cJSON_AddItemToArray(tl, hs_json_num(d->token_loss[i]));
        cJSON_AddItemToArray(lg, hs_json_num(d->logit[i]));
    }
    cJSON *hs = cJSON_AddArrayToObject(o, "heads");
    for (int k = 0; k < a->n_heads; k++) {
        int idx = a->head_index[k];
        cJSON *e = head_pair(idx, d->n_head);
        add_num(e, "total", d->total[idx]);
        if (big)
            cJSON_AddItemToObject(e, "per_position",
                                  hs_json_big_vector(big, d->per_pos + (size_t)idx * d->n_pos,
                                                     d->n_pos));
        cJSON_AddItemToArray(hs, e);
    }
}

/* "input": the text, its tokens and ids, the sinks and the words. */
static void add_input(cJSON *r, const hs_analysis *a, const hs_model_config *c)
{
    cJSON *in = cJSON_AddObjectToObject(r, "input");
    if (a->text)
        cJSON_AddStringToObject(in, "text", a->text);
    else
        cJSON_AddNullToObject(in, "text");
    if (a->text_pair)
        cJSON_AddStringToObject(in, "text_pair", a->text_pair);
    else
        cJSON_AddNullToObject(in, "text_pair");
    cJSON_AddNumberToObject(in, "n_tokens", a->n);
    cJSON_AddBoolToObject(in, "truncated", a->truncated);
    cJSON_AddItemToObject(in, "ids", hs_json_ints(a->ids, a->n));
    cJSON_AddItemToObject(in, "tokens", hs_json_strs((const char *const *)a->tokens, a->n));
    cJSON_AddItemToObject(in, "display_tokens", hs_json_strs((const char *const *)a->display, a->n));
    cJSON_AddItemToObject(in, "type_ids", hs_json_ints(a->type_ids, a->n));
    cJSON_AddItemToObject(in, "sinks", sinks_json(a, c->arch));
    if (a->tokens && a->display)
        cJSON_AddItemToObject(in, "word_ids", word_ids_json(a));
}

/* "options": what the run was asked for. */
static void add_options(cJSON *r, const hs_analysis *a, const hs_model_config *c)
{
    const hs_analyze_opts *o = &a->opts;
    cJSON *op = cJSON_AddObjectToObject(r, "options");
    cJSON *layers = cJSON_AddArrayToObject(op, "layers");
    for (int l = 0, prev = -1; l < a->n_heads; l++) {
        int layer = a->heads[l].layer;
        if (layer != prev)
            cJSON_AddItemToArray(layers, cJSON_CreateNumber(layer));
        prev = layer;
    }
    cJSON_AddBoolToObject(op, "exclude_sinks", o->exclude_sinks);
    cJSON *sinks = cJSON_AddArrayToObject(op, "sinks");
    cJSON_AddItemToArray(sinks, cJSON_CreateString("first_token"));
    if (c->arch->cls_token)
        cJSON_AddItemToArray(sinks, cJSON_CreateString("cls"));
    if (c->arch->sep_token)
        cJSON_AddItemToArray(sinks, cJSON_CreateString("sep"));
    if (o->sink_punct)
        cJSON_AddItemToArray(sinks, cJSON_CreateString("punctuation"));
    cJSON_AddBoolToObject(op, "ablation", o->ablation);
    cJSON_AddStringToObject(op, "ablation_kind", hs_ablation_kind_name(o->ablation_kind));
    if (o->ablation_kind == HS_ABLATION_RESAMPLE) {
        cJSON_AddNumberToObject(op, "resample_seed", (double)o->resample_seed);
        if (a->resample_ids)
            cJSON_AddItemToObject(op, "resample_ids", hs_json_ints(a->resample_ids, a->n));
        else
            cJSON_AddNullToObject(op, "resample_ids");
    }
    char span[32];
    cJSON_AddStringToObject(op, "loss_span", hs_loss_span_format(&o->loss_span, span, sizeof span));
    cJSON_AddStringToObject(op, "probe_ablation_kind", o->probe_ablation
                                ? hs_ablation_kind_name(o->probe_ablation_kind) : "none");
    cJSON_AddBoolToObject(op, "pruning", o->ablation && o->pruning);
    cJSON_AddBoolToObject(op, "gradient", o->gradient);
    hs_report_label_options(op, o);
}

/* "loss": its kind, value and rows (the masked positions of an MLM loss). */
static void add_loss(cJSON *r, const hs_analysis *a)
{
    cJSON *lo = cJSON_AddObjectToObject(r, "loss");
    cJSON_AddStringToObject(lo, "kind", hs_loss_kind_name(a->loss_kind));
    add_num(lo, "value", a->loss);
    if (a->loss_kind == HS_LOSS_MLM) {
        cJSON_AddItemToObject(lo, "masked_positions", hs_json_ints(a->mlm_positions, a->n_mlm));
        cJSON_AddItemToObject(lo, "masked_ids", hs_json_ints(a->mlm_targets, a->n_mlm));
    }
    if (a->loss_kind == HS_LOSS_LM) {
        char span[32];
        cJSON_AddStringToObject(lo, "span",
                                hs_loss_span_format(&a->opts.loss_span, span, sizeof span));
        if (a->loss_rows) {
            cJSON_AddItemToObject(lo, "rows", hs_json_ints(a->loss_rows, a->n_loss_rows));
        } else { /* every row */
            cJSON *rows = cJSON_AddArrayToObject(lo, "rows");
            for (int i = 0; i + 1 < a->n; i++)
                cJSON_AddItemToArray(rows, cJSON_CreateNumber(i));
        }
    }
}

/* "pruning": the candidates and the curve, one entry per round. */
static void add_pruning(cJSON *r, const hs_analysis *a, const hs_model_config *c)
{
    const hs_analyze_opts *o = &a->opts;
    char name[32];
    cJSON *pu = cJSON_AddObjectToObject(r, "pruning");
    hs_prune_method method = a->prune_method_used ? a->prune_method_used : o->prune_method;
    cJSON_AddStringToObject(pu, "method", method == HS_PRUNE_GREEDY ? "greedy" : "gradient");
    cJSON_AddNumberToObject(pu, "round_heads", a->prune_round_heads);
    add_num(pu, "tolerance", o->prune_tol);
    add_num(pu, "stop", o->prune_stop);
    cJSON_AddNumberToObject(pu, "beam", o->prune_beam);
    cJSON_AddNumberToObject(pu, "max_steps", o->prune_max_steps);
    cJSON *cand = cJSON_AddArrayToObject(pu, "candidates");
    for (int k = 0; k < a->n_candidates; k++)
        cJSON_AddItemToArray(cand, cJSON_CreateString(hs_head_label(a->candidates[k], c->n_head, name, sizeof name)));
    cJSON *candh = cJSON_AddArrayToObject(pu, "candidate_heads");
    for (int k = 0; k < a->n_candidates; k++)
        cJSON_AddItemToArray(candh, head_pair(a->candidates[k], c->n_head));
    cJSON *curve = cJSON_AddArrayToObject(pu, "curve");
    for (int s = 0; s < a->n_curve;) { /* one entry per round */
        cJSON *e = cJSON_CreateObject(), *rm = cJSON_AddArrayToObject(e, "removed");
        cJSON *rmh = cJSON_AddArrayToObject(e, "removed_heads");
        int t = s;
        for (; t < a->n_curve && a->curve[t].round == a->curve[s].round; t++) {
            cJSON_AddItemToArray(rm, cJSON_CreateString(hs_head_label(a->curve[t].head, c->n_head, name,
                                                                      sizeof name)));
            cJSON_AddItemToArray(rmh, head_pair(a->curve[t].head, c->n_head));
        }
        cJSON_AddNumberToObject(e, "heads_left", a->curve[t - 1].heads_left);
        add_num(e, "loss", a->curve[t - 1].loss);
        cJSON_AddItemToArray(curve, e);
        s = t;
    }
}

/* The report's tree, its large arrays in big (NULL: left out, HS_REPORT_LEAN). */
static cJSON *report_tree(const hs_analysis *a, const char *const *files, int n_files,
                          hs_json_big *big)
{
    const hs_model *m = a->model;
    const hs_model_config *c = hs_model_config_of(m);
    const hs_analyze_opts *o = &a->opts;
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return NULL;
    hs_report_add_header(r, a);

    add_input(r, a, c);
    add_options(r, a, c);
    add_loss(r, a);

    if (a->kv_similarity) /* grouped-query attention: the groups, their ablation */
        hs_report_add_kv_groups(r, a->kv_similarity, o->similarity, a->ablation_kv, 0);
    else
        cJSON_AddNullToObject(r, "kv_groups");

    hs_report_add_metrics(r, o->label_thresholds, o->sink_threshold, o->exclude_sinks,
                          hs_model_config_of(a->model)->arch->sep_token != NULL, 0);
    cJSON *heads = cJSON_AddArrayToObject(r, "heads");
    for (int k = 0; k < a->n_heads; k++)
        cJSON_AddItemToArray(heads, head_json(a, &a->heads[k]));

    cJSON *div = cJSON_AddObjectToObject(r, "diversity");
    cJSON *pl = cJSON_AddArrayToObject(div, "per_layer");
    for (int l = 0; l < c->n_layer; l++)
        cJSON_AddItemToArray(pl, hs_json_num(a->layer_diversity[l]));
    add_head_matrix(div, "pairwise_frobenius", big, a->frobenius, a->n_heads);

    cJSON *sim = cJSON_AddObjectToObject(r, "similarity");
    cJSON_AddStringToObject(sim, "method", o->similarity == HS_SIM_JS ? "jensen_shannon" : "pearson");
    cJSON_AddStringToObject(sim, "entries", similarity_entries(a));
    add_head_matrix(sim, "matrix", big, a->similarity, a->n_heads);

    hs_report_add_clusters(r, a->linkage, a->labels, a->n_heads, a->n_clusters, o->similarity,
                           o->cluster_threshold);
    add_composition(r, a, big);
    add_dla(r, a, big);
    cJSON *wl = cJSON_AddObjectToObject(r, "word_level");
    cJSON_AddBoolToObject(wl, "available", a->word_maps != NULL);
    if (a->word_maps) {
        size_t ww = (size_t)a->n_words * (size_t)a->n_words;
        cJSON_AddItemToObject(wl, "words", hs_json_strs((const char *const *)a->words, a->n_words));
        cJSON *maps = big ? cJSON_AddArrayToObject(wl, "maps") : NULL;
        for (int k = 0; maps && k < a->n_heads; k++)
            cJSON_AddItemToArray(maps, hs_json_big_matrix_f(big, a->word_maps + (size_t)k * ww,
                                                            a->n_words, a->n_words));
    } else {
        cJSON_AddStringToObject(wl, "reason", "not asked for (--word-level)");
    }
    cJSON *ro = cJSON_AddObjectToObject(r, "rollout");
    add_num(ro, "residual", o->rollout_residual);
    if (a->rollout && big)
        cJSON_AddItemToObject(ro, "matrix", hs_json_big_matrix(big, a->rollout, a->n, a->n));
    else if (!a->rollout)
        cJSON_AddNullToObject(ro, "matrix");
    cJSON *fo = cJSON_AddObjectToObject(r, "flow");
    cJSON_AddNumberToObject(fo, "max_tokens", o->flow_max_tokens);
    if (a->flow && big)
        cJSON_AddItemToObject(fo, "matrix", hs_json_big_matrix(big, a->flow, a->n, a->n));
    else if (!a->flow)
        cJSON_AddNullToObject(fo, "matrix");

    cJSON *pr = cJSON_AddObjectToObject(r, "probe");
    cJSON_AddNumberToObject(pr, "seed", (double)o->probe_seed);
    int wrap = (c->arch->cls_token != NULL) + (c->arch->sep_token != NULL);
    cJSON_AddNumberToObject(pr, "half_len", (a->probe_len - wrap) / 2);
    cJSON_AddItemToObject(pr, "ids", hs_json_ints(a->probe_ids, a->probe_len));
    add_probe_ablation(pr, a);

    add_pruning(r, a, c);

    cJSON *tm = cJSON_AddObjectToObject(r, "timing");
    cJSON_AddNumberToObject(tm, "forward_passes", (double)a->forward_passes);
    add_num(tm, "forward_seconds", a->seconds_forward);
    add_num(tm, "ablation_seconds", a->seconds_ablation);
    add_num(tm, "pruning_seconds", a->seconds_pruning);
    add_num(tm, "gradient_seconds", a->seconds_gradient);
    add_num(tm, "probe_ablation_seconds", a->seconds_probe_ablation);
    add_num(tm, "probe_seconds", a->seconds_probe);
    add_num(tm, "rollout_seconds", a->seconds_rollout);
    add_num(tm, "pairwise_seconds", a->seconds_pairwise);
    add_num(tm, "composition_seconds", a->seconds_composition);
    add_num(tm, "hash_seconds", a->seconds_hash);
    add_num(tm, "total_seconds", a->seconds_total);

    cJSON *fl = cJSON_AddArrayToObject(r, "files");
    for (int i = 0; i < n_files; i++)
        cJSON_AddItemToArray(fl, cJSON_CreateString(files[i]));

    return r;
}

/* The tree printed (its large arrays as markers when big is given), or NULL. */
static char *report_text(const hs_analysis *a, const char *const *files, int n_files, int flags,
                         hs_json_big **big)
{
    *big = NULL;
    if (a->encdec) /* T5's three kinds of heads: report_encdec.c */
        return hs_report_encdec_text(a, files, n_files, flags);
    if (!(flags & HS_REPORT_LEAN) && !(*big = hs_json_big_new()))
        return NULL;
    cJSON *r = report_tree(a, files, n_files, *big);
    char *s = !r ? NULL : (flags & HS_REPORT_PRETTY) ? cJSON_Print(r) : cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    if (!s) {
        hs_json_big_free(*big);
        *big = NULL;
    }
    return s;
}

char *hs_report_json(const hs_analysis *a, const char *const *files, int n_files, int flags)
{
    hs_json_big *big = NULL;
    char *s = report_text(a, files, n_files, flags, &big), *full = s;
    if (s && big) {
        full = hs_json_big_string(s, big, flags & HS_REPORT_PRETTY);
        free(s);
    }
    hs_json_big_free(big);
    return full;
}

hs_status hs_report_write(const hs_analysis *a, const char *const *files, int n_files, int flags,
                          FILE *f, hs_error *err)
{
    hs_json_big *big = NULL;
    char *s = report_text(a, files, n_files, flags, &big);
    if (!s)
        return hs_fail(err, HS_E_NOMEM, "out of memory for the report");
    hs_status st = hs_json_big_write(s, big, flags & HS_REPORT_PRETTY, f, err);
    free(s);
    hs_json_big_free(big);
    return st;
}
