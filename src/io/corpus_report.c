/* Corpus mode: folding per-text analyses into streaming statistics (memory independent of
 * the number of texts), texts.jsonl lines, and the corpus report. docs/corpus.md defines
 * every statistic; docs/report-schema.md every field. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "core/core.h"
#include "headscope/corpus.h"
#include "io/io_internal.h"
#include "analysis/metrics.h"

/* The quantities are the metric table's rows with a corpus index (src/analysis/metrics.c). */
const char *hs_corpus_quantity_name(int q)
{
    const hs_metric *m = q < HS_CQ_COUNT ? hs_metric_of_quantity(q) : NULL;
    return m ? m->key : "unknown";
}

/* Text metrics read the run's entropy (h->entropy: with or without sinks as the run chose)
 * and its detector scores on all attention or without sinks. */
double hs_corpus_quantity(const hs_head_result *h, int exclude_sinks, int q)
{
    const hs_metric *m = q < HS_CQ_COUNT ? hs_metric_of_quantity(q) : NULL;
    if (!m)
        return NAN;
    return hs_metric_get(m, exclude_sinks ? &h->text_free : &h->text_scores, &h->entropy, h);
}

/* The rows a quantity's token-weighted mean weights by (0: not weighted). */
static double quantity_weight(const hs_head_result *h, int q)
{
    return q == HS_CQ_ENTROPY || q == HS_CQ_MAX_WEIGHT ? (double)h->entropy.rows : 0.0;
}

void hs_corpus_agg_free(hs_corpus_agg *g)
{
    if (!g)
        return;
    free(g->head_index);
    free(g->stats);
    free(g->sim_sum);
    free(g->importance);
    free(g->similarity);
    hs_linkage_free(g->linkage);
    free(g->labels);
    free(g->model_json);
    free(g->probe_ids);
    free(g->probe_dup);
    free(g->probe_ind);
    free(g);
}

hs_status hs_corpus_agg_alloc(int nh, int probe_len, hs_corpus_agg **out, hs_error *err)
{
    *out = NULL;
    if (nh < 1 || nh > 1 << 16)
        return hs_fail(err, HS_E_ARG, "corpus: %d heads", nh);
    if (probe_len < 0 || probe_len > 1 << 20)
        return hs_fail(err, HS_E_ARG, "corpus: a probe of %d tokens", probe_len);
    hs_corpus_agg *g = calloc(1, sizeof *g);
    size_t n = (size_t)nh;
    if (!g || !(g->head_index = malloc(n * sizeof *g->head_index)) ||
        !(g->stats = calloc(n * HS_CQ_COUNT, sizeof *g->stats)) ||
        !(g->sim_sum = calloc(n * n, sizeof *g->sim_sum)) ||
        !(g->importance = malloc(n * sizeof *g->importance)) ||
        !(g->similarity = malloc(n * n * sizeof *g->similarity)) ||
        !(g->labels = malloc(n * sizeof *g->labels)) ||
        !(g->probe_ids = malloc(((size_t)probe_len + 1) * sizeof *g->probe_ids)) ||
        !(g->probe_dup = malloc(n * sizeof *g->probe_dup)) ||
        !(g->probe_ind = malloc(n * sizeof *g->probe_ind))) {
        hs_corpus_agg_free(g);
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    }
    g->n_heads = nh;
    g->probe_len = probe_len;
    *out = g;
    return HS_OK;
}

hs_status hs_corpus_agg_new(const hs_analysis *first, hs_corpus_agg **out, hs_error *err)
{
    hs_corpus_agg *g = NULL;
    hs_status st = hs_corpus_agg_alloc(first->n_heads, first->probe_len, &g, err);
    if (st)
        return st;
    size_t n = (size_t)first->n_heads;
    const hs_model_config *c = hs_model_config_of(first->model);
    const hs_analyze_opts *o = &first->opts;
    g->n_head = c->n_head;
    memcpy(g->head_index, first->head_index, n * sizeof *g->head_index);
    if (first->probe_len > 0)
        memcpy(g->probe_ids, first->probe_ids, (size_t)first->probe_len * sizeof *g->probe_ids);
    for (size_t k = 0; k < n; k++) {
        const hs_detect *p = o->exclude_sinks ? &first->heads[k].probe_free
                                              : &first->heads[k].probe_scores;
        g->probe_dup[k] = p->duplicate;
        g->probe_ind[k] = p->induction;
    }
    g->family = (int)c->family;
    g->loss_kind = (int)first->loss_kind;
    g->exclude_sinks = o->exclude_sinks;
    g->ablation = o->ablation;
    g->ablation_kind = (int)o->ablation_kind;
    g->gradient = o->gradient;
    g->sim_method = (int)o->similarity;
    memcpy(g->label_thresholds, o->label_thresholds, sizeof g->label_thresholds);
    g->sink_threshold = o->sink_threshold;
    g->cluster_threshold = o->cluster_threshold;
    g->probe_seed = o->probe_seed;
    cJSON *mo = hs_report_model_json(first);
    g->model_json = mo ? cJSON_PrintUnformatted(mo) : NULL;
    cJSON_Delete(mo);
    if (!g->model_json) {
        hs_corpus_agg_free(g);
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    }
    *out = g;
    return HS_OK;
}

hs_status hs_corpus_agg_add(hs_corpus_agg *g, const hs_analysis *a, hs_error *err)
{
    if (a->n_heads != g->n_heads || memcmp(a->head_index, g->head_index,
                                           (size_t)g->n_heads * sizeof *g->head_index))
        return hs_fail(err, HS_E_ARG, "corpus: the analysis has other heads than the first");
    size_t nh = (size_t)g->n_heads;
    for (size_t k = 0; k < nh; k++)
        for (int q = 0; q < HS_CQ_COUNT; q++)
            hs_stat_add(&g->stats[k * HS_CQ_COUNT + (size_t)q],
                        hs_corpus_quantity(&a->heads[k], a->opts.exclude_sinks, q), quantity_weight(&a->heads[k], q));
    for (size_t i = 0; i < nh * nh; i++)
        g->sim_sum[i] += a->similarity[i];
    g->n_sim++;
    double w = a->loss_kind == HS_LOSS_LM ? a->n - 1 : a->loss_kind == HS_LOSS_MLM ? a->n_mlm : 1;
    hs_stat_add(&g->loss, a->loss, w);
    if (g->n_texts == 0 || a->n < g->tokens_min)
        g->tokens_min = a->n;
    if (a->n > g->tokens_max)
        g->tokens_max = a->n;
    g->n_texts++;
    g->tokens += a->n;
    g->truncated += a->truncated != 0;
    return HS_OK;
}

hs_status hs_corpus_agg_finish(hs_corpus_agg *g, hs_sim_method method, double threshold,
                               hs_error *err)
{
    if (g->n_texts < 1)
        return hs_fail(err, HS_E_INPUT, "corpus: no texts were analysed");
    size_t nh = (size_t)g->n_heads;
    /* Michel et al.: mean over texts of |dL/d xi_h|, then each layer divided by its L2 norm */
    for (size_t k = 0; k < nh;) {
        int layer = g->head_index[k] / g->n_head;
        size_t e = k;
        double ss = 0;
        int any = 0;
        for (; e < nh && g->head_index[e] / g->n_head == layer; e++) {
            const hs_stat *s = &g->stats[e * HS_CQ_COUNT + HS_CQ_GRAD_RAW];
            if (s->n > 0) {
                ss += s->mean * s->mean;
                any = 1;
            }
        }
        for (; k < e; k++) {
            const hs_stat *s = &g->stats[k * HS_CQ_COUNT + HS_CQ_GRAD_RAW];
            g->importance[k] = !any || s->n == 0 ? NAN : ss > 0 ? s->mean / sqrt(ss) : 0.0;
        }
    }
    for (size_t i = 0; i < nh * nh; i++)
        g->similarity[i] = g->sim_sum[i] / (double)g->n_sim;
    hs_linkage_free(g->linkage);
    g->linkage = NULL;
    if (nh < 2) {
        g->labels[0] = 0;
        g->n_clusters = 1;
        return HS_OK;
    }
    double *dist = malloc(nh * nh * sizeof *dist);
    if (!dist)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    hs_status st = hs_similarity_distance(g->similarity, g->n_heads, method, dist, err);
    if (!st)
        st = hs_linkage_build(dist, g->n_heads, &g->linkage, err);
    if (!st)
        st = hs_linkage_cut(g->linkage, threshold, g->labels, &g->n_clusters, err);
    free(dist);
    return st;
}

static int quantity_on_flags(int has_sep, int ablation, int gradient, int q)
{
    if (q == HS_CQ_SEP)
        return has_sep;
    if (q == HS_CQ_ABLATION)
        return ablation;
    if (q == HS_CQ_GRAD || q == HS_CQ_GRAD_RAW)
        return gradient;
    return 1;
}

static int quantity_on(const hs_analysis *a, int q)
{
    return quantity_on_flags(hs_model_config_of(a->model)->arch->sep_token != NULL,
                             a->opts.ablation, a->opts.gradient, q);
}

char *hs_corpus_text_json(const hs_analysis *a, long index, long line)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "index", (double)index);
    cJSON_AddNumberToObject(o, "line", (double)line);
    cJSON_AddNumberToObject(o, "n_tokens", a->n);
    cJSON_AddBoolToObject(o, "truncated", a->truncated);
    cJSON_AddItemToObject(o, "ids", hs_json_ints(a->ids, a->n));
    if (a->text_pair)
        cJSON_AddItemToObject(o, "type_ids", hs_json_ints(a->type_ids, a->n));
    cJSON_AddItemToObject(o, "loss", hs_json_num(a->loss));
    cJSON *h = cJSON_AddObjectToObject(o, "heads");
    cJSON *rows = cJSON_AddArrayToObject(h, "rows");
    for (int k = 0; k < a->n_heads; k++)
        cJSON_AddItemToArray(rows, cJSON_CreateNumber(a->heads[k].entropy.rows));
    for (int q = 0; q < HS_CQ_COUNT; q++) {
        if (!quantity_on(a, q))
            continue;
        cJSON *arr = cJSON_AddArrayToObject(h, hs_corpus_quantity_name(q));
        for (int k = 0; k < a->n_heads; k++)
            cJSON_AddItemToArray(arr, hs_json_num(hs_corpus_quantity(&a->heads[k], a->opts.exclude_sinks, q)));
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static cJSON *summary_json(const hs_stat *s, int weighted)
{
    hs_summary m;
    hs_stat_summary(s, &m);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n", (double)m.n);
    cJSON_AddItemToObject(o, "mean", hs_json_num(m.mean));
    cJSON_AddItemToObject(o, "sd", hs_json_num(m.sd));
    cJSON_AddItemToObject(o, "ci_low", hs_json_num(m.ci_low));
    cJSON_AddItemToObject(o, "ci_high", hs_json_num(m.ci_high));
    if (weighted)
        cJSON_AddItemToObject(o, "token_weighted_mean", hs_json_num(m.wmean));
    return o;
}

static void add_source(cJSON *co, const hs_corpus_info *info)
{
    cJSON *src = cJSON_AddObjectToObject(co, "source");
    cJSON_AddStringToObject(src, "path", info->path ? info->path : "-");
    cJSON_AddStringToObject(src, "format", hs_corpus_format_name(info->format));
    cJSON_AddItemToObject(src, "max_texts", info->max_texts ? cJSON_CreateNumber((double)info->max_texts) : cJSON_CreateNull());
    cJSON_AddNumberToObject(src, "max_tokens", info->max_tokens);
    cJSON_AddBoolToObject(src, "skip_long", info->skip_long);
    cJSON_AddItemToObject(src, "sample", info->sample ? cJSON_CreateNumber((double)info->sample) : cJSON_CreateNull());
    cJSON_AddNumberToObject(src, "seed", (double)info->seed);
}

char *hs_corpus_report_json(const hs_corpus_agg *g, const hs_corpus_info *info,
                            const char *const *argv, int argc, const char *const *files,
                            int n_files, int pretty)
{
    const hs_arch *ar = hs_arch_of((hs_family)g->family);
    int has_sep = ar && ar->sep_token;
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return NULL;
    hs_report_add_generator(r, argv, argc);
    cJSON *mo = cJSON_Parse(g->model_json);
    if (!mo) {
        cJSON_Delete(r);
        return NULL;
    }
    cJSON_AddItemToObject(r, "model", mo);
    cJSON *op = cJSON_AddObjectToObject(r, "options");
    cJSON *layers = cJSON_AddArrayToObject(op, "layers");
    for (int k = 0, prev = -1; k < g->n_heads; k++) {
        int layer = g->head_index[k] / g->n_head;
        if (layer != prev)
            cJSON_AddItemToArray(layers, cJSON_CreateNumber(layer));
        prev = layer;
    }
    cJSON_AddBoolToObject(op, "exclude_sinks", g->exclude_sinks);
    cJSON_AddBoolToObject(op, "ablation", g->ablation);
    cJSON_AddStringToObject(op, "ablation_kind", hs_ablation_kind_name((hs_ablation_kind)g->ablation_kind));
    if (g->ablation_kind == HS_ABLATION_MEAN)
        cJSON_AddStringToObject(op, "ablation_means", "corpus");
    cJSON_AddBoolToObject(op, "gradient", g->gradient);
    hs_analyze_opts lopt;
    memcpy(lopt.label_thresholds, g->label_thresholds, sizeof lopt.label_thresholds);
    lopt.sink_threshold = g->sink_threshold;
    hs_report_label_options(op, &lopt);
    hs_report_add_metrics(r, g->label_thresholds, g->sink_threshold, g->exclude_sinks, has_sep,
                          1);

    cJSON *co = cJSON_AddObjectToObject(r, "corpus");
    add_source(co, info);
    cJSON_AddNumberToObject(co, "n_records", (double)info->n_records);
    cJSON_AddNumberToObject(co, "n_texts", (double)g->n_texts);
    cJSON_AddNumberToObject(co, "n_empty", (double)info->n_empty);
    long n_skipped = 0;
    cJSON *sk = cJSON_CreateObject();
    for (int s = 1; s < HS_SKIP_COUNT; s++) {
        long k = info->skipped[s] + info->skipped_text[s];
        n_skipped += k;
        cJSON_AddNumberToObject(sk, hs_corpus_skip_name((hs_corpus_skip)s), (double)k);
    }
    cJSON_AddNumberToObject(co, "n_skipped", (double)n_skipped);
    cJSON_AddItemToObject(co, "skipped", sk);
    cJSON_AddNumberToObject(co, "n_truncated", (double)g->truncated);
    cJSON *tk = cJSON_AddObjectToObject(co, "tokens");
    cJSON_AddNumberToObject(tk, "total", (double)g->tokens);
    cJSON_AddNumberToObject(tk, "min", g->tokens_min);
    cJSON_AddNumberToObject(tk, "max", g->tokens_max);
    cJSON_AddItemToObject(tk, "mean", hs_json_num(g->n_texts ? (double)g->tokens / (double)g->n_texts : NAN));
    cJSON *ci = cJSON_AddObjectToObject(co, "interval");
    cJSON_AddNumberToObject(ci, "level", 0.95);
    cJSON_AddStringToObject(ci, "method", "student_t");
    cJSON *lo = summary_json(&g->loss, 1);
    cJSON_AddStringToObject(lo, "kind", hs_loss_kind_name((hs_loss_kind)g->loss_kind));
    cJSON_AddItemToObject(co, "loss", lo);

    cJSON *heads = cJSON_AddArrayToObject(co, "heads");
    for (int k = 0; k < g->n_heads; k++) {
        const hs_stat *st = &g->stats[(size_t)k * HS_CQ_COUNT];
        int idx = g->head_index[k];
        char name[32];
        snprintf(name, sizeof name, "%d.%d", idx / g->n_head, idx % g->n_head);
        cJSON *h = cJSON_CreateObject();
        cJSON_AddItemToArray(heads, h);
        cJSON_AddStringToObject(h, "id", name);
        cJSON_AddNumberToObject(h, "layer", idx / g->n_head);
        cJSON_AddNumberToObject(h, "head", idx % g->n_head);
        for (int q = 0; q < HS_CQ_COUNT; q++)
            cJSON_AddItemToObject(h, hs_corpus_quantity_name(q), quantity_on_flags(has_sep, g->ablation, g->gradient, q)
                                  ? summary_json(&st[q], q == HS_CQ_ENTROPY || q == HS_CQ_MAX_WEIGHT)
                                  : cJSON_CreateNull());
        cJSON_AddItemToObject(h, "importance", hs_json_num(g->importance[k]));
        cJSON *ps = cJSON_AddObjectToObject(h, "probe_scores");
        cJSON_AddItemToObject(ps, "duplicate_token", hs_json_num(g->probe_dup[k]));
        cJSON_AddItemToObject(ps, "induction", hs_json_num(g->probe_ind[k]));
        hs_head_result mean;
        memset(&mean, 0, sizeof mean);
        mean.probe_scores.duplicate = g->probe_dup[k];
        mean.probe_scores.induction = g->probe_ind[k];
        /* the single-text rule on the means of the text scores the corpus aggregates (on
           all attention, or without sinks with --exclude-sinks) and the probe's */
        hs_detect none = hs_detect_none();
        mean.text_free = mean.text_scores = none;
        mean.probe_free = mean.probe_scores = none;
        mean.entropy_free.norm = st[HS_CQ_ENTROPY_NORM].n ? st[HS_CQ_ENTROPY_NORM].mean : NAN;
        mean.probe_free.duplicate = g->probe_dup[k];
        mean.probe_free.induction = g->probe_ind[k];
        mean.text_free.prev_token = st[HS_CQ_PREV].n ? st[HS_CQ_PREV].mean : NAN;
        mean.text_free.self = st[HS_CQ_SELF].n ? st[HS_CQ_SELF].mean : NAN;
        mean.text_scores.first_token = st[HS_CQ_FIRST].n ? st[HS_CQ_FIRST].mean : NAN;
        mean.text_scores.sep = st[HS_CQ_SEP].n ? st[HS_CQ_SEP].mean : NAN;
        hs_head_classify(&mean, g->label_thresholds, g->sink_threshold, has_sep);
        cJSON_AddStringToObject(h, "label", mean.label);
        cJSON_AddNumberToObject(h, "cluster", g->labels[k]);
    }

    cJSON *sim = cJSON_AddObjectToObject(co, "similarity");
    cJSON_AddStringToObject(sim, "method", g->sim_method == HS_SIM_JS ? "jensen_shannon" : "pearson");
    cJSON_AddStringToObject(sim, "aggregate", "mean_over_texts");
    cJSON_AddNumberToObject(sim, "n_texts", (double)g->n_sim);
    hs_json_big *big = hs_json_big_new(); /* (n_heads, n_heads): no cJSON node per number */
    cJSON_AddItemToObject(sim, "matrix", big ? hs_json_big_matrix(big, g->similarity, g->n_heads,
                                                                  g->n_heads)
                                             : NULL);
    hs_report_add_clusters(co, g->linkage, g->labels, g->n_heads, g->n_clusters, g->sim_method,
                           g->cluster_threshold);
    /* grouped-query models: the KV groups on the mean similarity (n_kv_head from the model
       object; a partial from before it was recorded has none) */
    const cJSON *nkv = cJSON_GetObjectItem(mo, "n_kv_head"), *nl = cJSON_GetObjectItem(mo, "n_layer");
    hs_kv_similarity *ks = NULL;
    if (cJSON_IsNumber(nkv) && cJSON_IsNumber(nl) && nkv->valueint < g->n_head &&
        hs_kv_similarity_compute(g->similarity, g->n_heads, g->head_index, nl->valueint,
                                 g->n_head, nkv->valueint, (hs_sim_method)g->sim_method, g->labels,
                                 &ks, NULL) == HS_OK)
        hs_report_add_kv_groups(co, ks, g->sim_method, NULL, 1);
    hs_kv_similarity_free(ks);
    cJSON *pr = cJSON_AddObjectToObject(co, "probe");
    cJSON_AddNumberToObject(pr, "seed", (double)g->probe_seed);
    cJSON_AddItemToObject(pr, "ids", hs_json_ints(g->probe_ids, g->probe_len));

    cJSON *tm = cJSON_AddObjectToObject(r, "timing");
    cJSON_AddItemToObject(tm, "seconds", hs_json_num(info->seconds));
    cJSON *fl = cJSON_AddArrayToObject(r, "files");
    for (int i = 0; i < n_files; i++)
        cJSON_AddItemToArray(fl, cJSON_CreateString(files[i]));
    char *s = !big ? NULL : pretty ? cJSON_Print(r) : cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    char *full = s ? hs_json_big_string(s, big, pretty) : NULL;
    free(s);
    hs_json_big_free(big);
    return full;
}
