/* Head types: the names, default thresholds and scores of the types and sink types (all
 * from the metric table, src/analysis/metrics.c), the thresholds' parser, and the
 * classifier, a pure function of a head's scores. docs/metrics.md § Head types defines
 * them. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/metrics.h"
#include "headscope/report.h"
#include "core/core.h"

const char *hs_label_name(int kind)
{
    const hs_metric *m = kind < HS_LABEL_COUNT ? hs_metric_of_label(kind) : NULL;
    return m ? m->key : "unknown";
}

const char *hs_sink_name(int kind)
{
    const hs_metric *m = kind < HS_SINK_COUNT ? hs_metric_of_sink(kind) : NULL;
    return m ? m->key : "unknown";
}

void hs_label_thresholds_default(double *thr)
{
    for (int k = 0; k < HS_LABEL_COUNT; k++)
        thr[k] = hs_metric_of_label(k)->threshold;
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

/* "unknown head type 'X' (previous_token, ..., induction or sink)" */
static hs_status unknown_type(const char *p, size_t nl, hs_error *err)
{
    char names[512];
    size_t at = 0;
    for (int k = 0; k < HS_LABEL_COUNT && at < sizeof names; k++)
        at += (size_t)snprintf(names + at, sizeof names - at, "%s, ", hs_label_name(k));
    if (at >= 2 && at < sizeof names)
        names[at - 2] = '\0';
    return hs_fail(err, HS_E_ARG, "unknown head type '%.*s' (%s or sink)", (int)nl, p, names);
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
            if (strlen(hs_label_name(i)) == nl && !memcmp(p, hs_label_name(i), nl))
                k = i;
        if (k >= 0)
            t[k] = v;
        else if (nl == 4 && !memcmp(p, "sink", 4))
            st = v;
        else
            return unknown_type(p, nl, err);
        p += len + (end ? 1 : 0);
        if (end && !*p)
            return hs_fail(err, HS_E_ARG, "label thresholds '%s' end with a comma", spec);
    }
    memcpy(thr, t, sizeof t);
    *sink_thr = st;
    return HS_OK;
}

double hs_label_score(const hs_head_result *h, int k)
{
    const hs_metric *m = k < HS_LABEL_COUNT ? hs_metric_of_label(k) : NULL;
    if (!m)
        return NAN;
    return m->on == HS_ON_PROBE ? hs_metric_get(m, &h->probe_free, NULL, h)
                                : hs_metric_get(m, &h->text_free, &h->entropy_free, h);
}

double hs_sink_score(const hs_head_result *h, int k)
{
    const hs_metric *m = k < HS_SINK_COUNT ? hs_metric_of_sink(k) : NULL;
    return m ? hs_metric_get(m, &h->text_scores, NULL, h) : NAN;
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
            h->label = hs_label_name(k);
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
