/* Head types and scores in report.json: a head's labels, sink types and score objects, the
 * options' thresholds, and the report's "metrics" list, all written from the metric table
 * (src/analysis/metrics.c). docs/metrics.md § Head types defines them; docs/report-schema.md
 * the fields. */
#include <math.h>
#include <stdio.h>

#include <cJSON.h>

#include "core/core.h"
#include "analysis/metrics.h"
#include "headscope/report.h"
#include "io/io_internal.h"

/* One set of detector scores as a JSON object: the table's score rows the model reports
 * (e NULL: the probe, without the entropy-based ones), each with its parameter. */
static cJSON *scores_json(const hs_detect *d, const hs_entropy *e, int bert)
{
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; i < hs_n_metrics; i++) {
        const hs_metric *m = &hs_metrics[i];
        if (m->group != HS_MG_SCORES || (m->bert_only && !bert) || (m->src == HS_SRC_ENTROPY && !e))
            continue;
        cJSON_AddItemToObject(o, m->key, hs_json_num(hs_metric_get(m, d, e, NULL)));
        if (m->param) {
            char key[64];
            snprintf(key, sizeof key, "%s_%s", m->key, m->param);
            cJSON_AddItemToObject(o, key, hs_json_num(hs_metric_param(m, d)));
        }
    }
    return o;
}

static cJSON *pair_json(const hs_detect *all, const hs_entropy *ea, const hs_detect *free_,
                        const hs_entropy *ef, int bert)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "all", scores_json(all, ea, bert));
    cJSON_AddItemToObject(o, "no_sinks", scores_json(free_, ef, bert));
    return o;
}

void hs_report_head_values(cJSON *o, const hs_head_result *h)
{
    for (int i = 0; i < hs_n_metrics; i++)
        if (hs_metrics[i].group == HS_MG_HEAD)
            cJSON_AddItemToObject(o, hs_metrics[i].path,
                                  hs_json_num(hs_metric_get(&hs_metrics[i], NULL, &h->entropy, h)));
}

void hs_report_head_types(cJSON *o, const hs_head_result *h, const hs_analyze_opts *opts, int bert)
{
    cJSON_AddStringToObject(o, "label", h->label);
    cJSON *ls = cJSON_AddArrayToObject(o, "labels");
    for (int k = 0; k < HS_LABEL_COUNT; k++) {
        if (!(h->labels & (1u << k)))
            continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "type", hs_label_name(k));
        cJSON_AddItemToObject(e, "score", hs_json_num(hs_label_score(h, k)));
        cJSON_AddItemToObject(e, "threshold", hs_json_num(opts->label_thresholds[k]));
        cJSON_AddStringToObject(e, "measured_on",
                                hs_metric_of_label(k)->on == HS_ON_PROBE ? "probe" : "text");
        cJSON_AddStringToObject(e, "attention", "no_sinks");
        cJSON_AddItemToArray(ls, e);
    }
    cJSON *sk = cJSON_AddObjectToObject(o, "sinks");
    cJSON_AddItemToObject(sk, "mass", hs_json_num(h->text_free.sink));
    for (int k = 0; k < HS_SINK_COUNT; k++)
        if (bert || !hs_metric_of_sink(k)->bert_only)
            cJSON_AddItemToObject(sk, hs_sink_name(k), hs_json_num(hs_sink_score(h, k)));
    cJSON_AddItemToObject(sk, "probe_mass", hs_json_num(h->probe_free.sink));
    cJSON *ty = cJSON_AddArrayToObject(sk, "types");
    for (int k = 0; k < HS_SINK_COUNT; k++)
        if (h->sink_types & (1u << k))
            cJSON_AddItemToArray(ty, cJSON_CreateString(hs_sink_name(k)));
    cJSON_AddItemToObject(o, "text_scores", pair_json(&h->text_scores, &h->entropy_all,
                                                      &h->text_free, &h->entropy_free, bert));
    cJSON_AddItemToObject(o, "probe_scores", pair_json(&h->probe_scores, NULL, &h->probe_free,
                                                       NULL, bert));
}

void hs_report_label_options(cJSON *op, const hs_analyze_opts *o)
{
    cJSON *th = cJSON_AddObjectToObject(op, "label_thresholds");
    for (int k = 0; k < HS_LABEL_COUNT; k++)
        cJSON_AddItemToObject(th, hs_label_name(k), hs_json_num(o->label_thresholds[k]));
    cJSON_AddItemToObject(op, "sink_threshold", hs_json_num(o->sink_threshold));
}

static const char *on_name(hs_metric_on on)
{
    return on == HS_ON_PROBE ? "probe" : on == HS_ON_LOSS ? "loss" : "text";
}

/* Which attention the value at the metric's path was measured on: "no_sinks" (the score
 * objects' no_sinks, which the head types read), "all" (the raw map: sinks, or a corpus
 * run's text scores without --exclude-sinks), by the run's --exclude-sinks for entropy;
 * NULL for the loss. */
static const char *attention_of(const hs_metric *m, int exclude_sinks, int corpus)
{
    if (m->on == HS_ON_LOSS)
        return NULL;
    if (m->group == HS_MG_SINK)
        return "all";
    if (m->group == HS_MG_SCORES && !corpus)
        return "no_sinks";
    return exclude_sinks ? "no_sinks" : "all";
}

void hs_report_add_metrics(cJSON *r, const double *thr, double sink_thr, int exclude_sinks,
                           int bert, int corpus)
{
    cJSON *ms = cJSON_AddArrayToObject(r, "metrics");
    for (int i = 0; i < hs_n_metrics; i++) {
        const hs_metric *m = &hs_metrics[i];
        if ((m->bert_only && !bert && !corpus) || (corpus && m->corpus < 0))
            continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "key", m->key);
        cJSON_AddStringToObject(e, "name", m->name);
        cJSON_AddStringToObject(e, "description", m->title);
        /* corpus mode aggregates each text's values, the probe's too */
        cJSON_AddStringToObject(e, "measured_on",
                                corpus && m->on == HS_ON_PROBE ? "text" : on_name(m->on));
        const char *att = attention_of(m, exclude_sinks, corpus);
        cJSON_AddItemToObject(e, "attention", att ? cJSON_CreateString(att) : cJSON_CreateNull());
        cJSON_AddStringToObject(e, "kind", m->group == HS_MG_SINK     ? "sink"
                                           : !isnan(m->threshold)     ? "head_type"
                                           : m->group == HS_MG_SCORES ? "score"
                                                                      : "value");
        double t = m->group == HS_MG_SINK ? sink_thr
                   : m->group == HS_MG_SCORES && m->label >= 0 ? thr[m->label]
                                                               : NAN;
        cJSON_AddItemToObject(e, "threshold", hs_json_num(t));
        cJSON_AddBoolToObject(e, "corpus", m->corpus >= 0);
        cJSON_AddStringToObject(e, "path", corpus ? m->key : m->path);
        if (m->param && !corpus) {
            char key[64];
            snprintf(key, sizeof key, "%s_%s", m->path, m->param);
            cJSON_AddStringToObject(e, "param", m->param);
            cJSON_AddStringToObject(e, "param_path", key);
        }
        cJSON_AddItemToArray(ms, e);
    }
}
