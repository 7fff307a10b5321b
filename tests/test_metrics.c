/* The metric table (src/analysis/metrics.c) and what reads it: docs/metrics.md's head-type
 * table against the library's names, passes and default thresholds; report.json's
 * "metrics" list against the heads it describes (every path present in every head, every
 * score listed, the thresholds those in force) for GPT-2 and BERT, single text and corpus;
 * the table-computed detectors on hand-computed maps and against the float64 reference of
 * fixtures/ref/make_offset_golden.py. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "analysis/metrics.h"
#include "headscope/analysis.h"
#include "headscope/corpus.h"
#include "headscope/model.h"
#include "headscope/report.h"
#include "internal.h"
#include "analysis_util.h"
#include "testutil.h"

/* ---- docs/metrics.md ---------------------------------------------------------------- */

Test(metric_table, head_types_in_the_docs_are_the_library_s)
{
    size_t len;
    char *doc = tu_slurp("docs/metrics.md", &len);
    cr_assert_not_null(doc, "cannot read docs/metrics.md (run from the repository root)");
    const char *sec = strstr(doc, "\n## Head types\n");
    cr_assert_not_null(sec, "no Head types section");
    for (int k = 0; k < HS_LABEL_COUNT; k++) {
        const hs_metric *m = hs_metric_of_label(k);
        cr_assert_not_null(m, "label %d has no row", k);
        char start[64];
        snprintf(start, sizeof start, "\n| `%s` | `%s`", m->key, m->path);
        const char *row = strstr(sec, start);
        cr_assert_not_null(row, "docs/metrics.md: no row '%s'", start + 1);
        const char *end = strchr(row + 1, '\n');
        char want[96];
        snprintf(want, sizeof want, "| %s | %g |",
                 m->on == HS_ON_PROBE ? "the probe" : "the text", m->threshold);
        cr_assert(end && end - row > (long)strlen(want) &&
                      !strncmp(end - strlen(want), want, strlen(want)),
                  "docs/metrics.md: the row of %s does not end with '%s'", m->key, want);
    }
    free(doc);
}

Test(metric_table, rows_are_consistent)
{
    int labels = 0, sinks = 0, quantities = 0;
    for (int i = 0; i < hs_n_metrics; i++) {
        const hs_metric *m = &hs_metrics[i];
        for (int j = 0; j < i; j++)
            cr_assert_str_neq(m->key, hs_metrics[j].key, "two rows '%s'", m->key);
        cr_assert(m->get || (m->detect && m->slot >= 0 && m->slot < HS_DETECT_EXTRA),
                  "%s: no getter and no detector", m->key);
        if (m->group == HS_MG_SCORES && m->label >= 0) {
            labels++;
            cr_assert(m->threshold >= 0 && m->threshold <= 1, "%s", m->key);
        }
        if (m->group == HS_MG_SINK)
            sinks++;
        quantities += m->corpus >= 0;
    }
    cr_assert_eq(labels, HS_LABEL_COUNT);
    cr_assert_eq(sinks, HS_SINK_COUNT);
    cr_assert_eq(quantities, HS_CQ_COUNT);
}

/* ---- report.json's "metrics" -------------------------------------------------------- */

static cJSON *at_path(cJSON *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = strtok(buf, "."); p && o; p = strtok(NULL, "."))
        o = cJSON_GetObjectItem(o, p);
    return o;
}

/* The report of model on text (or, corpus, on three texts) as JSON. */
static cJSON *report_of(const char *model, int corpus, const char *options)
{
    hs_error err = {{0}};
    hs_model *m = NULL;
    cr_assert_eq(hs_model_load(model, &m, &err), HS_OK, "%s", err.msg);
    const char *texts[3] = {"The cat sat on the mat. The cat sat.", "A dog ran home.",
                            "Birds fly south, then north."};
    char *out = NULL;
    cr_assert_eq(hs_analyze_json(m, texts, NULL, corpus ? 3 : 1, options, &out, &err), HS_OK,
                 "%s", err.msg);
    cJSON *r = cJSON_Parse(out);
    hs_free(out);
    hs_model_free(m);
    cr_assert_not_null(r);
    return r;
}

/* Every listed path is a number or null in every head; every score of text_scores.all is
 * listed; thresholds are the options'. */
static void check_list(cJSON *r, int corpus, int bert)
{
    cJSON *ms = cJSON_GetObjectItem(r, "metrics");
    cr_assert(cJSON_IsArray(ms), "no metrics list");
    cJSON *heads = corpus ? cJSON_GetObjectItem(cJSON_GetObjectItem(r, "corpus"), "heads")
                          : cJSON_GetObjectItem(r, "heads");
    cJSON *thr = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "options"), "label_thresholds");
    int next = 0, n = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, ms) {
        const char *key = cJSON_GetStringValue(cJSON_GetObjectItem(e, "key"));
        const char *path = cJSON_GetStringValue(cJSON_GetObjectItem(e, "path"));
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(e, "kind"));
        cr_assert(key && path && kind);
        n++;
        next |= !strcmp(key, "next_token");
        if (!strcmp(kind, "head_type"))
            cr_assert_eq(cJSON_GetObjectItem(e, "threshold")->valuedouble,
                         cJSON_GetObjectItem(thr, key)->valuedouble, "%s", key);
        cJSON *h;
        cJSON_ArrayForEach(h, heads) {
            cJSON *v = at_path(h, path);
            cr_assert(v && (cJSON_IsNumber(v) || cJSON_IsNull(v) ||
                            (corpus && cJSON_IsObject(v))),
                      "%s: '%s' is not in head %s", key, path,
                      cJSON_GetStringValue(cJSON_GetObjectItem(h, "id")));
        }
    }
    cr_assert_eq(next, bert && !corpus, "next_token listed: %d", next);
    int want = 0; /* every row the model reports, or the corpus's */
    for (int i = 0; i < hs_n_metrics; i++)
        want += corpus ? hs_metrics[i].corpus >= 0 : bert || !hs_metrics[i].bert_only;
    cr_assert_eq(n, want);
    if (corpus)
        return;
    cJSON *s;
    cJSON_ArrayForEach(s, at_path(cJSON_GetArrayItem(heads, 0), "text_scores.all")) {
        int listed = 0;
        cJSON_ArrayForEach(e, ms) {
            const char *key = cJSON_GetStringValue(cJSON_GetObjectItem(e, "key"));
            const char *param = cJSON_GetStringValue(cJSON_GetObjectItem(e, "param"));
            char pk[96];
            snprintf(pk, sizeof pk, "%s_%s", key, param ? param : "");
            listed |= !strcmp(key, s->string) || (param && !strcmp(pk, s->string));
        }
        cr_assert(listed, "text_scores.all.%s is not in the metrics list", s->string);
    }
}

Test(metric_list, describes_the_heads_of_gpt2_and_bert_reports, .timeout = 300)
{
    const char *opt = "{\"ablation\": false, \"gradient\": false, "
                      "\"label_thresholds\": \"self=0.7\"}";
    cJSON *r = report_of("fixtures/tiny-gpt2", 0, opt);
    check_list(r, 0, 0);
    cJSON_Delete(r);
    r = report_of("fixtures/tiny-bert", 0, opt);
    check_list(r, 0, 1);
    cJSON *self = NULL, *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(r, "metrics"))
        if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "key")), "self"))
            self = e;
    cr_assert_eq(cJSON_GetObjectItem(self, "threshold")->valuedouble, 0.7);
    cJSON_Delete(r);
    r = report_of("fixtures/tiny-bert", 1, "{\"gradient\": false}");
    check_list(r, 1, 1);
    cJSON_Delete(r);
}
