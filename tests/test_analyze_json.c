/* hs_analyze_json (the entry point of the Python package): options by name, the report of
 * one text, the corpus report of several, and every refusal with its status and message.
 * hs_analyze_files (the files of analyze -o and the page). The numbers themselves are the
 * pipeline's, tested in test_analysis.c and tests/cli.sh. */
#include <sys/stat.h>

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

/* The number of entries of folder d (without . and ..), counted recursively. */
static int count_files(const char *d)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "find '%s' -type f | wc -l", d);
    FILE *p = popen(cmd, "r");
    int n = -1;
    cr_assert_not_null(p);
    cr_assert_eq(fscanf(p, "%d", &n), 1);
    pclose(p);
    return n;
}

Test(analyze_json, files_are_those_of_analyze_o_and_the_page_the_one_written)
{
    char dir[256], path[320];
    tu_mkdtemp(dir, sizeof dir);
    char *report = NULL, *page = NULL;
    size_t page_len = 0;
    hs_error err = {{0}};
    cr_assert_eq(hs_analyze_files(model, TEXT, strlen(TEXT), "{\"ablation\": false}", dir,
                                  &report, &page, &page_len, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(strlen(page), page_len);
    cJSON *j = cJSON_Parse(report);
    const cJSON *files = cJSON_GetObjectItem(j, "files");
    int n = cJSON_GetArraySize(files);
    /* 8 heads, gallery, similarity, dla, rollout, flow, composition, index.html, report.json */
    cr_assert_eq(n, 16, "%d files", n);
    cr_assert_str_eq(cJSON_GetArrayItem(files, n - 1)->valuestring, "report.json");
    cr_assert_eq(count_files(dir), n);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, cJSON_GetArrayItem(files, i)->valuestring);
        cr_assert_eq(access(path, R_OK), 0, "%s", path);
    }
    char *text;
    size_t len;
    snprintf(path, sizeof path, "%s/index.html", dir);
    cr_assert_eq(hs_read_file(path, 1 << 26, &text, &len, &err), HS_OK, "%s", err.msg);
    cr_assert(len == page_len && !memcmp(text, page, len), "index.html is not the page");
    free(text);
    snprintf(path, sizeof path, "%s/report.json", dir);
    cJSON *written = tu_json_file(path);
    cr_assert(cJSON_Compare(written, j, 1), "report.json is not the report");
    cJSON_Delete(written);
    cJSON_Delete(j);
    hs_free(report);
    hs_free(page);
    /* the page alone: no files listed, nothing written */
    cr_assert_eq(hs_analyze_files(model, TEXT, strlen(TEXT), "{\"ablation\": false}", NULL,
                                  &report, &page, &page_len, &err), HS_OK, "%s", err.msg);
    j = cJSON_Parse(report);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "files")), 0);
    cr_assert(strstr(page, "<!DOCTYPE html>") == page);
    cJSON_Delete(j);
    hs_free(report);
    hs_free(page);
    tu_rm_rf(dir);
}

/* The JSON in the page's <script id="hs-report"> element, "<\\/" read back as "</". */
static cJSON *page_report(const char *page)
{
    const char *tag = "<script type=\"application/json\" id=\"hs-report\">";
    const char *from = strstr(page, tag), *to = from ? strstr(from, "</script>") : NULL;
    cr_assert(from && to, "the page embeds no report");
    from += strlen(tag);
    char *s = malloc((size_t)(to - from) + 1), *w = s;
    for (const char *p = from; p < to; p++)
        if (!(p[0] == '<' && p[1] == '\\'))
            *w++ = *p;
    *w = '\0';
    cJSON *j = cJSON_Parse(s);
    free(s);
    cr_assert_not_null(j);
    return j;
}

/* Removes object.key (docs/html.md's list); fails the test when the report lacks it. */
static void cut(cJSON *r, const char *object, const char *key)
{
    cJSON *o = cJSON_GetObjectItemCaseSensitive(r, object);
    cr_assert(cJSON_HasObjectItem(o, key), "report.json has no %s.%s", object, key);
    cJSON_DeleteItemFromObjectCaseSensitive(o, key);
}

Test(analyze_json, the_page_embeds_the_report_without_its_n_by_n_and_head_by_head_arrays)
{
    char *report = NULL, *page = NULL;
    size_t page_len = 0;
    hs_error err = {{0}};
    cr_assert_eq(hs_analyze_files(model, TEXT, strlen(TEXT),
                                  "{\"ablation\": false, \"word_level\": true}", NULL, &report,
                                  &page, &page_len, &err), HS_OK, "%s", err.msg);
    cJSON *full = cJSON_Parse(report), *lean = page_report(page);
    /* what the page leaves out: n x n (rollout, flow, word maps, DLA per position) and
     * n_heads x n_heads (Frobenius distances, similarity, composition) */
    cut(full, "rollout", "matrix");
    cut(full, "flow", "matrix");
    cut(full, "word_level", "maps");
    cut(full, "diversity", "pairwise_frobenius");
    cut(full, "similarity", "matrix");
    cut(full, "composition", "q");
    cut(full, "composition", "k");
    cut(full, "composition", "v");
    cJSON *dla = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(full, "direct_logit_attribution"), "heads");
    cr_assert_gt(cJSON_GetArraySize(dla), 0);
    cJSON *h;
    cJSON_ArrayForEach(h, dla)
    {
        cr_assert(cJSON_HasObjectItem(h, "per_position"));
        cJSON_DeleteItemFromObjectCaseSensitive(h, "per_position");
    }
    /* and nothing else: the rest is the same, key for key and number for number */
    cr_assert(cJSON_Compare(full, lean, 1), "the page's report is not report.json less those arrays");
    cJSON_Delete(full);
    cJSON_Delete(lean);
    hs_free(report);
    hs_free(page);
}

Test(analyze_json, files_refusals_leave_nothing)
{
    char dir[256], sub[300];
    tu_mkdtemp(dir, sizeof dir);
    char *report = (char *)1, *page = (char *)1;
    size_t len = 1;
    hs_error err = {{0}};
    /* a folder that is missing: the pictures cannot be written */
    snprintf(sub, sizeof sub, "%s/missing", dir);
    cr_assert_eq(hs_analyze_files(model, TEXT, strlen(TEXT), "{\"ablation\": false}", sub,
                                  &report, &page, &len, &err), HS_E_IO, "%s", err.msg);
    cr_assert_null(report);
    cr_assert_null(page);
    cr_assert_eq(count_files(dir), 0);
    /* report.json cannot be written (a folder of that name): the pictures and the page go */
    snprintf(sub, sizeof sub, "%s/report.json", dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    cr_assert_eq(hs_analyze_files(model, TEXT, strlen(TEXT), "{\"ablation\": false}", dir,
                                  &report, NULL, NULL, &err), HS_E_IO);
    cr_assert(strstr(err.msg, "report.json"), "%s", err.msg);
    cr_assert_null(report);
    cr_assert_eq(count_files(dir), 0);
    cr_assert_eq(hs_analyze_files(model, TEXT, strlen(TEXT), "{\"nope\": 1}", NULL, &report,
                                  &page, &len, &err), HS_E_ARG);
    cr_assert(strstr(err.msg, "nope"), "%s", err.msg);
    cr_assert_eq(hs_analyze_files(model, TEXT, strlen(TEXT), NULL, NULL, &report, NULL, NULL,
                                  &err), HS_E_ARG);
    cr_assert_eq(hs_analyze_files(model, "", 0, NULL, NULL, &report, &page, &len, &err),
                 HS_E_INPUT);
    tu_rm_rf(dir);
}
