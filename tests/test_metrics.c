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
#include "core/core.h"
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
        cr_assert(m->src != HS_SRC_TABLE || (m->detect && m->slot >= 0 &&
                                             m->slot < HS_DETECT_EXTRA),
                  "%s: table-computed without a detector", m->key);
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

/* ---- positional_offset: hand-computed maps and the float64 reference ----------------- */

static const hs_metric *row_of(const char *key)
{
    for (int i = 0; i < hs_n_metrics; i++)
        if (!strcmp(hs_metrics[i].key, key))
            return &hs_metrics[i];
    cr_assert_fail("no metric '%s'", key);
    return NULL;
}

/* positional_offset of one map through the public detector pass. */
static void offset_of(const float *a, int n, int causal, const unsigned char *sink,
                      double *score, double *k)
{
    int32_t ids[8] = {10, 11, 12, 13, 14, 15, 16, 17};
    hs_detect d;
    cr_assert_eq(hs_detect_compute(a, 1, n, hs_vis_from_causal(causal), seq_of(ids, -1), sink, &d, NULL), HS_OK);
    const hs_metric *m = row_of("positional_offset");
    *score = hs_metric_get(m, &d, NULL, NULL);
    *k = hs_metric_param(m, &d);
}

Test(positional_offset, finds_the_offset_two_ahead)
{
    /* rows 0 and 1 put 0.7 on key i + 2: s(+2) = 0.7; s(-1) = (0.1 + 0.25 + 0.25) / 3 = 0.2,
     * s(+1) = (0.1 + 0.1 + 0.25) / 3 = 0.15, s(-2) = 0.25, s(+3) = 0.1, s(-3) = 0.25 */
    const float a[16] = {0.1f,  0.1f,  0.7f,  0.1f,  0.1f,  0.1f,  0.1f,  0.7f,
                         0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f};
    double s, k;
    offset_of(a, 4, 0, NULL, &s, &k);
    near(s, 0.7, 1e-7, "score");
    cr_assert_eq(k, 2.0);
}

Test(positional_offset, causal_maps_see_only_earlier_keys)
{
    /* rows: [1], [0.4 0.6], [0.5 0.2 0.3]: s(-1) = (0.4 + 0.2) / 2 = 0.3, s(-2) = 0.5 (row
     * 2 alone); no positive offset is visible, although the upper triangle holds 0.9 */
    const float a[9] = {1, 0.9f, 0.9f, 0.4f, 0.6f, 0.9f, 0.5f, 0.2f, 0.3f};
    double s, k;
    offset_of(a, 3, 1, NULL, &s, &k);
    near(s, 0.5, 1e-7, "score");
    cr_assert_eq(k, -2.0);
}

Test(positional_offset, ties_go_to_the_nearer_then_the_earlier_key)
{
    const float third = 1.0f / 3;
    const float a[9] = {third, third, third, third, third, third, third, third, third};
    double s, k;
    offset_of(a, 3, 0, NULL, &s, &k);
    near(s, third, 1e-12, "score");
    cr_assert_eq(k, -1.0);
}

Test(positional_offset, without_sinks_rows_are_renormalised)
{
    /* sink at 0: row 0 left out, key 0 dropped. Row 1 [0.5 .1 .3 .1] keeps 0.5 (x2), row 2
     * [.6 .2 .1 .1] keeps 0.4 (x2.5), row 3 [.2 .2 .4 .2] keeps 0.8 (x1.25):
     * s(-1) = (0.2·2.5 + 0.4·1.25) / 2 = 0.5, s(+1) = (0.3·2 + 0.1·2.5) / 2
     * = 0.425, s(+2) = 0.1·2 = 0.2, s(-2) = 0.2·1.25 = 0.25 */
    const float a[16] = {0.7f, 0.1f, 0.1f, 0.1f, 0.5f, 0.1f, 0.3f, 0.1f,
                         0.6f, 0.2f, 0.1f, 0.1f, 0.2f, 0.2f, 0.4f, 0.2f};
    const unsigned char sink[4] = {1, 0, 0, 0};
    double s, k;
    offset_of(a, 4, 0, sink, &s, &k);
    near(s, 0.5, 1e-6, "score");
    cr_assert_eq(k, -1.0);
    /* on all attention the sink's column wins: s(-2) = (0.6 + 0.2) / 2 = 0.4 beats
     * s(-1) = (0.5 + 0.2 + 0.4) / 3 = 0.367 and s(+1) = (0.1 + 0.3 + 0.1) / 3 */
    offset_of(a, 4, 0, NULL, &s, &k);
    near(s, 0.4, 1e-6, "score, all attention");
    cr_assert_eq(k, -2.0);
}

Test(positional_offset, undefined_on_one_token)
{
    const float a[1] = {1};
    double s, k;
    offset_of(a, 1, 0, NULL, &s, &k);
    cr_assert(isnan(s) && isnan(k));
}

static double num_or_nan(const cJSON *v) { return cJSON_IsNumber(v) ? v->valuedouble : NAN; }

Test(positional_offset, matches_the_float64_reference)
{
    size_t len;
    char *text = tu_slurp("fixtures/golden/positional_offset.json", &len);
    cr_assert_not_null(text, "cannot read fixtures/golden/positional_offset.json");
    cJSON *g = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(g);
    const hs_metric *m = row_of("positional_offset");
    int checked = 0;
    cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(g, "cases")) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
        char path[256];
        snprintf(path, sizeof path, "fixtures/golden/%s.attn.npy", name);
        hs_npy attn = tu_npy(path);
        snprintf(path, sizeof path, "fixtures/golden/%s.ids.npy", name);
        hs_npy ids = tu_npy(path);
        int n = (int)attn.shape[2], nm = (int)(attn.shape[0] * attn.shape[1]);
        unsigned char *sink = calloc((size_t)n, 1);
        hs_detect *all = calloc((size_t)nm, sizeof *all), *fr = calloc((size_t)nm, sizeof *fr);
        cr_assert(sink && all && fr);
        cJSON *s;
        cJSON_ArrayForEach(s, cJSON_GetObjectItem(c, "sink"))
            sink[s->valueint] = 1;
        int causal = cJSON_IsTrue(cJSON_GetObjectItem(c, "causal"));
        const hs_detect_seq *q = seq_of(ids.data, -1);
        cr_assert_eq(hs_detect_compute(attn.data, nm, n, hs_vis_from_causal(causal), q, NULL, all, NULL), HS_OK);
        cr_assert_eq(hs_detect_compute(attn.data, nm, n, hs_vis_from_causal(causal), q, sink, fr, NULL), HS_OK);
        cJSON *heads = cJSON_GetObjectItem(c, "heads");
        cr_assert_eq(cJSON_GetArraySize(heads), nm);
        for (int k = 0; k < nm; k++) {
            const hs_detect *d[2] = {&all[k], &fr[k]};
            const char *which[2] = {"all", "no_sinks"};
            for (int w = 0; w < 2; w++) {
                cJSON *ref = cJSON_GetObjectItem(cJSON_GetArrayItem(heads, k), which[w]);
                double want = num_or_nan(cJSON_GetArrayItem(ref, 0));
                double got = hs_metric_get(m, d[w], NULL, NULL);
                cr_assert(fabs(got - want) <= 1e-9, "%s head %d %s: got %.17g, want %.17g",
                          name, k, which[w], got, want);
                cr_assert_eq(hs_metric_param(m, d[w]), num_or_nan(cJSON_GetArrayItem(ref, 1)),
                             "%s head %d %s: k", name, k, which[w]);
                checked++;
            }
        }
        free(sink);
        free(all);
        free(fr);
        hs_npy_free(&attn);
        hs_npy_free(&ids);
    }
    cr_assert_eq(checked, 2 * (16 + 16));
    cJSON_Delete(g);
}
