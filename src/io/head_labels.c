/* Head types: the per-type thresholds, which score each type reads, a head's labels and
 * sink types, and their part of a head's object in report.json. docs/metrics.md § Head
 * types defines them; docs/report-schema.md the fields. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "core/core.h"
#include "headscope/report.h"
#include "io/io_internal.h"

static const char *const label_names[HS_LABEL_COUNT] = {
    "previous_token", "next_token", "self", "broad", "other_segment", "duplicate_token",
    "induction"};
static const char *const sink_names[HS_SINK_COUNT] = {"first_token", "cls", "sep",
                                                      "punctuation"};
/* Defaults: docs/metrics.md § Head types says why. */
static const double label_default[HS_LABEL_COUNT] = {0.3, 0.3, 0.4, 0.9, 0.5, 0.3, 0.3};

const char *hs_label_name(int kind)
{
    return kind >= 0 && kind < HS_LABEL_COUNT ? label_names[kind] : "unknown";
}

const char *hs_sink_name(int kind)
{
    return kind >= 0 && kind < HS_SINK_COUNT ? sink_names[kind] : "unknown";
}

void hs_label_thresholds_default(double *thr)
{
    memcpy(thr, label_default, sizeof label_default);
}

static hs_status parse_unit(const char *s, size_t len, double *out, hs_error *err)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return hs_fail(err, HS_E_ARG, "label threshold '%.*s' is not a number in [0, 1]",
                       (int)len, s);
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (*end || errno || !(v >= 0 && v <= 1))
        return hs_fail(err, HS_E_ARG, "label threshold '%s' is not a number in [0, 1]", buf);
    *out = v;
    return HS_OK;
}

hs_status hs_label_thresholds_parse(const char *spec, double *thr, double *sink_thr,
                                    hs_error *err)
{
    if (!spec || !thr || !sink_thr)
        return hs_fail(err, HS_E_ARG, "label thresholds: NULL argument");
    double t[HS_LABEL_COUNT], st = *sink_thr;
    memcpy(t, thr, sizeof t);
    if (!strchr(spec, '=')) { /* one number for every type */
        double v;
        hs_status s = parse_unit(spec, strlen(spec), &v, err);
        if (s)
            return s;
        for (int k = 0; k < HS_LABEL_COUNT; k++)
            thr[k] = v;
        return HS_OK;
    }
    for (const char *p = spec; *p;) {
        const char *end = strchr(p, ','), *eq = strchr(p, '=');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (!eq || eq >= p + len)
            return hs_fail(err, HS_E_ARG, "label threshold '%.*s' is not NAME=X", (int)len, p);
        size_t nl = (size_t)(eq - p);
        double v;
        hs_status s = parse_unit(eq + 1, len - nl - 1, &v, err);
        if (s)
            return s;
        int k = -1;
        for (int i = 0; i < HS_LABEL_COUNT; i++)
            if (strlen(label_names[i]) == nl && !memcmp(p, label_names[i], nl))
                k = i;
        if (k >= 0)
            t[k] = v;
        else if (nl == 4 && !memcmp(p, "sink", 4))
            st = v;
        else
            return hs_fail(err, HS_E_ARG,
                           "unknown head type '%.*s' (previous_token, next_token, self, broad, "
                           "other_segment, duplicate_token, induction or sink)",
                           (int)nl, p);
        p += len + (end ? 1 : 0);
        if (end && !*p)
            return hs_fail(err, HS_E_ARG, "label thresholds '%s' end with a comma", spec);
    }
    memcpy(thr, t, sizeof t);
    *sink_thr = st;
    return HS_OK;
}

/* The measurement behind each type: the pass (text or probe) and the detector field. */
static int label_on_probe(int k) { return k == HS_LABEL_DUP || k == HS_LABEL_IND; }

static double pick(const hs_detect *d, const hs_entropy *e, int k)
{
    switch (k) {
    case HS_LABEL_PREV: return d->prev_token;
    case HS_LABEL_NEXT: return d->next_token;
    case HS_LABEL_SELF: return d->self;
    case HS_LABEL_BROAD: return e ? e->norm : NAN;
    case HS_LABEL_OTHER_SEG: return d->other_segment;
    case HS_LABEL_DUP: return d->duplicate;
    case HS_LABEL_IND: return d->induction;
    default: return NAN;
    }
}

double hs_label_score(const hs_head_result *h, int k)
{
    return label_on_probe(k) ? pick(&h->probe_free, NULL, k)
                             : pick(&h->text_free, &h->entropy_free, k);
}

double hs_sink_score(const hs_head_result *h, int k)
{
    switch (k) {
    case HS_SINK_FIRST: return h->text_scores.first_token;
    case HS_SINK_CLS: return h->text_scores.cls;
    case HS_SINK_SEP: return h->text_scores.sep;
    case HS_SINK_PUNCT: return h->text_scores.punct;
    default: return NAN;
    }
}

void hs_head_classify(hs_head_result *h, const double *thr, double sink_thr, int bert)
{
    h->labels = 0;
    h->sink_types = 0;
    h->label = "none";
    double best = 0;
    for (int k = 0; k < HS_LABEL_COUNT; k++) {
        double v = hs_label_score(h, k);
        if (!(v >= thr[k]))
            continue;
        h->labels |= 1u << k;
        double r = thr[k] > 0 ? v / thr[k] : INFINITY;
        if (r > best || h->label[0] == 'n') { /* ties: the earlier type */
            best = r;
            h->label = label_names[k];
        }
    }
    for (int k = 0; k < HS_SINK_COUNT; k++) {
        if (k == HS_SINK_FIRST && bert) /* BERT's key 0 is [CLS]: reported as cls */
            continue;
        double v = hs_sink_score(h, k);
        if (v >= sink_thr)
            h->sink_types |= 1u << k;
    }
}

/* One set of detector scores as a JSON object (keys per family: docs/report-schema.md). */
static cJSON *scores_json(const hs_detect *d, const hs_entropy *e, int bert)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "previous_token", hs_json_num(d->prev_token));
    if (bert)
        cJSON_AddItemToObject(o, "next_token", hs_json_num(d->next_token));
    cJSON_AddItemToObject(o, "self", hs_json_num(d->self));
    if (e)
        cJSON_AddItemToObject(o, "broad", hs_json_num(e->norm));
    if (bert)
        cJSON_AddItemToObject(o, "other_segment", hs_json_num(d->other_segment));
    cJSON_AddItemToObject(o, "duplicate_token", hs_json_num(d->duplicate));
    cJSON_AddItemToObject(o, "induction", hs_json_num(d->induction));
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

void hs_report_head_types(cJSON *o, const hs_head_result *h, const hs_analyze_opts *opts, int bert)
{
    cJSON_AddStringToObject(o, "label", h->label);
    cJSON *ls = cJSON_AddArrayToObject(o, "labels");
    for (int k = 0; k < HS_LABEL_COUNT; k++) {
        if (!(h->labels & (1u << k)))
            continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "type", label_names[k]);
        cJSON_AddItemToObject(e, "score", hs_json_num(hs_label_score(h, k)));
        cJSON_AddItemToObject(e, "threshold", hs_json_num(opts->label_thresholds[k]));
        cJSON_AddStringToObject(e, "measured_on", label_on_probe(k) ? "probe" : "text");
        cJSON_AddStringToObject(e, "attention", "no_sinks");
        cJSON_AddItemToArray(ls, e);
    }
    cJSON *sk = cJSON_AddObjectToObject(o, "sinks");
    cJSON_AddItemToObject(sk, "mass", hs_json_num(h->text_free.sink));
    for (int k = 0; k < HS_SINK_COUNT; k++)
        if (bert || (k != HS_SINK_CLS && k != HS_SINK_SEP))
            cJSON_AddItemToObject(sk, sink_names[k], hs_json_num(hs_sink_score(h, k)));
    cJSON_AddItemToObject(sk, "probe_mass", hs_json_num(h->probe_free.sink));
    cJSON *ty = cJSON_AddArrayToObject(sk, "types");
    for (int k = 0; k < HS_SINK_COUNT; k++)
        if (h->sink_types & (1u << k))
            cJSON_AddItemToArray(ty, cJSON_CreateString(sink_names[k]));
    cJSON_AddItemToObject(o, "text_scores", pair_json(&h->text_scores, &h->entropy_all,
                                                      &h->text_free, &h->entropy_free, bert));
    cJSON_AddItemToObject(o, "probe_scores", pair_json(&h->probe_scores, NULL, &h->probe_free,
                                                       NULL, bert));
}

void hs_report_label_options(cJSON *op, const hs_analyze_opts *o)
{
    cJSON *th = cJSON_AddObjectToObject(op, "label_thresholds");
    for (int k = 0; k < HS_LABEL_COUNT; k++)
        cJSON_AddItemToObject(th, label_names[k], hs_json_num(o->label_thresholds[k]));
    cJSON_AddItemToObject(op, "sink_threshold", hs_json_num(o->sink_threshold));
}
