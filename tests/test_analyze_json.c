/* hs_analyze_json (the entry point of the Python package): options by name, the report of
 * one text, the corpus report of several, and every refusal with its status and message.
 * The numbers themselves are the pipeline's, tested in test_analysis.c and tests/cli.sh. */
#include <cJSON.h>

#include "headscope/report.h"
#include "testutil.h"

#define TEXT "The cat sat on the mat. The cat sat on the mat."

static hs_model *model;

static void load(void)
{
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load("fixtures/tiny-gpt2", &model, &err), HS_OK, "%s", err.msg);
}

static void unload(void) { hs_model_free(model); }

/* Runs hs_analyze_json on one text; returns the parsed report or NULL with *st set. */
static cJSON *run(const char *options, hs_status *st, hs_error *err)
{
    const char *texts[] = {TEXT};
    char *out = NULL;
    *st = hs_analyze_json(model, texts, NULL, 1, options, &out, err);
    if (*st != HS_OK) {
        cr_assert_null(out);
        return NULL;
    }
    cJSON *j = cJSON_Parse(out);
    hs_free(out);
    cr_assert_not_null(j);
    return j;
}

TestSuite(analyze_json, .init = load, .fini = unload);

Test(analyze_json, one_text_gives_the_report_with_the_options)
{
    hs_status st;
    hs_error err = {{0}};
    cJSON *j = run("{\"ablation\": false, \"layers\": [1], \"probe_seed\": 7}", &st, &err);
    cr_assert_eq(st, HS_OK, "%s", err.msg);
    cr_assert_str_eq(cJSON_GetObjectItem(j, "schema")->valuestring, HS_REPORT_SCHEMA);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "heads")), 4); /* layer 1 only */
    const cJSON *o = cJSON_GetObjectItem(j, "options");
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(o, "ablation")));
    const cJSON *gen = cJSON_GetObjectItem(j, "generator");
    cr_assert_str_eq(cJSON_GetObjectItem(gen, "version")->valuestring, hs_version());
    cJSON_Delete(j);
}

Test(analyze_json, loss_span_and_probe_ablation_by_name)
{
    hs_status st;
    hs_error err = {{0}};
    /* "The cat sat on the mat. The cat sat on the mat.": The cat sat on the mat . The cat
       sat on the mat . (GPT-2 BPE, " The" at 7 is not "The" at 0): " cat" ... " mat" at 8 to
       12 occurred before; "." at 13 too, but the last token predicts nothing */
    cJSON *j = run("{\"loss_span\": \"repeated\", \"probe_ablation_kind\": \"none\", "
                   "\"pruning\": false}", &st, &err);
    cr_assert_eq(st, HS_OK, "%s", err.msg);
    const cJSON *lo = cJSON_GetObjectItem(j, "loss");
    cr_assert_str_eq(cJSON_GetObjectItem(lo, "span")->valuestring, "repeated");
    const cJSON *rows = cJSON_GetObjectItem(lo, "rows");
    static const int want[] = {8, 9, 10, 11, 12};
    cr_assert_eq(cJSON_GetArraySize(rows), 5);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(cJSON_GetArrayItem(rows, i)->valueint, want[i], "row %d", i);
    const cJSON *pa = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "probe"), "ablation");
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(pa, "available")));
    cJSON_Delete(j);
}

Test(analyze_json, several_texts_give_the_corpus_report)
{
    const char *texts[] = {TEXT, "A dog ran home.", "Birds fly south in winter."};
    size_t lens[] = {strlen(texts[0]), strlen(texts[1]), 5}; /* "Birds" */
    char *out = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_analyze_json(model, texts, lens, 3, "{\"gradient\": false}", &out, &err),
                 HS_OK, "%s", err.msg);
    cJSON *j = cJSON_Parse(out);
    hs_free(out);
    const cJSON *c = cJSON_GetObjectItem(j, "corpus");
    cr_assert_not_null(c);
    cr_assert_eq(cJSON_GetObjectItem(c, "n_texts")->valueint, 3);
    cJSON_Delete(j);
}

/* Each refusal: options, the status and the exact message. */
static const struct {
    const char *options, *msg;
} bad[] = {
    {"{\"no_such\": 1}", "unknown option 'no_such'"},
    {"{\"ablation\": 1}", "option 'ablation' has a bad value"},
    {"{\"similarity\": \"cosine\"}", "option 'similarity' has a bad value"},
    {"{\"prune_method\": 3}", "option 'prune_method' has a bad value"},
    {"{\"probe_half_len\": 2.5}", "option 'probe_half_len' has a bad value"},
    {"{\"label_threshold\": 0.4}", "unknown option 'label_threshold'"},
    {"{\"label_thresholds\": 2}", "option 'label_thresholds' has a bad value"},
    {"{\"label_thresholds\": \"self=2\"}",
     "option 'label_thresholds': label threshold '2' is not a number in [0, 1]"},
    {"{\"sink_punct\": 1}", "option 'sink_punct' has a bad value"},
    {"{\"loss_span\": \"half\"}",
     "option 'loss_span': loss span 'half' is not 'all', 'repeated', 'A:B' or 'A:' (positions, 0-based)"},
    {"{\"loss_span\": 3}", "option 'loss_span' has a bad value"},
    {"{\"probe_ablation_kind\": \"half\"}", "option 'probe_ablation_kind' has a bad value"},
    {"{\"layers\": [2]}", "option 'layers': expected layers 0..1"},
    {"{\"layers\": []}", "option 'layers': expected a non-empty list of layers"},
    {"[1, 2]", "options: expected a JSON object"},
    {"{\"text_pair\": \"x\"}", "text_pair: a text pair needs a tokenizer whose post-processor defines a pair encoding; this model's byte-level BPE tokenizer (post-processor none) takes a single text"},
};

Test(analyze_json, refuses_bad_options_with_a_message)
{
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hs_status st;
        hs_error err = {{0}};
        cr_assert_null(run(bad[i].options, &st, &err));
        cr_assert_lt(st, 0);
        cr_assert_str_eq(err.msg, bad[i].msg, "%s: got '%s'", bad[i].options, err.msg);
    }
    hs_status st;
    hs_error err = {{0}};
    cr_assert_null(run("{\"ablation\": ", &st, &err));
    cr_assert_eq(st, HS_E_FORMAT, "%s", err.msg);
}

Test(analyze_json, refuses_bad_texts_and_arguments)
{
    char *out = NULL;
    hs_error err = {{0}};
    const char *empty[] = {""}, *bad_utf8[] = {"ab\xff"}, *two[] = {TEXT, NULL};
    cr_assert_eq(hs_analyze_json(model, empty, NULL, 1, NULL, &out, &err), HS_E_INPUT);
    cr_assert_str_eq(err.msg, "the text is empty");
    cr_assert_eq(hs_analyze_json(model, bad_utf8, NULL, 1, NULL, &out, &err), HS_E_INPUT);
    cr_assert_eq(hs_analyze_json(model, two, NULL, 2, NULL, &out, &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "hs_analyze_json: text 1 is NULL");
    cr_assert_eq(hs_analyze_json(NULL, empty, NULL, 1, NULL, &out, &err), HS_E_ARG);
    const char *texts[] = {TEXT, TEXT};
    cr_assert_eq(hs_analyze_json(model, texts, NULL, 2, "{\"text_pair\": \"x\"}", &out, &err),
                 HS_E_ARG);
    cr_assert_str_eq(err.msg, "option 'text_pair' needs a single text");
    const char *texts2[] = {TEXT, ""};
    cr_assert_eq(hs_analyze_json(model, texts2, NULL, 2, NULL, &out, &err), HS_E_INPUT);
    cr_assert_str_eq(err.msg, "text 1: the text is empty");
    cr_assert_null(out);
    hs_free(NULL);
}

Test(analyze_json, long_text_is_refused_or_truncated)
{
    size_t n = 2000;
    char *text = malloc(n + 1);
    for (size_t i = 0; i < n; i += 4)
        memcpy(text + i, "cat ", 4);
    text[n] = 0;
    const char *texts[] = {text};
    char *out = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_analyze_json(model, texts, NULL, 1, "{\"ablation\": false}", &out, &err),
                 HS_E_INPUT);
    cr_assert(strstr(err.msg, "more than the model's context of 128"), "%s", err.msg);
    cr_assert_eq(hs_analyze_json(model, texts, NULL, 1,
                                 "{\"ablation\": false, \"gradient\": false, \"truncate\": true}",
                                 &out, &err), HS_OK, "%s", err.msg);
    cJSON *j = cJSON_Parse(out);
    const cJSON *in = cJSON_GetObjectItem(j, "input");
    cr_assert_eq(cJSON_GetObjectItem(in, "n_tokens")->valueint, 128);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(in, "truncated")));
    cJSON_Delete(j);
    hs_free(out);
    free(text);
}
