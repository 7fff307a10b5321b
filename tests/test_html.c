/* out/index.html: embedding of the report and the maps, escaping, offline page, errors. */
#include <cJSON.h>

#include "headscope/html.h"
#include "testutil.h"

/* Two heads, two tokens. */
static const char report2[] =
    "{\"schema\": \"headscope.report/3\", \"input\": {\"n_tokens\": 2, \"display_tokens\": "
    "[\"a\", \" b\"]}, \"heads\": [{\"id\": \"0.0\", \"layer\": 0, \"head\": 0}, "
    "{\"id\": \"0.1\", \"layer\": 0, \"head\": 1}], \"files\": [\"report.json\"]}";

/* (2, 2, 2) */
static const float maps2[8] = {1, 0, 0.5f, 0.5f, 0.25f, 0.75f, 0, 1};

static size_t count(const char *hay, const char *needle)
{
    size_t c = 0, nl = strlen(needle);
    for (const char *p = strstr(hay, needle); p; p = strstr(p + nl, needle))
        c++;
    return c;
}

static char *encode_ok(const hs_html_input *in, size_t *len_out)
{
    char *page = NULL;
    size_t len = 0;
    hs_error err = {{0}};
    hs_status st = hs_html_encode(in, &page, &len, &err);
    cr_assert_eq(st, HS_OK, "encode failed: %s", err.msg);
    cr_assert_not_null(page);
    cr_assert_eq(strlen(page), len);
    if (len_out)
        *len_out = len;
    return page;
}

/* The text of the element that starts with open (up to the next "</script>"), malloc'd. */
static char *element_text(const char *page, const char *open)
{
    const char *p = strstr(page, open);
    cr_assert_not_null(p, "no %s in the page", open);
    p += strlen(open);
    const char *e = strstr(p, "</script>");
    cr_assert_not_null(e);
    char *s = malloc((size_t)(e - p) + 1);
    cr_assert_not_null(s);
    memcpy(s, p, (size_t)(e - p));
    s[e - p] = '\0';
    return s;
}

/* Standard base64 decoder written for the test (independent of the encoder). */
static unsigned char *b64_decode(const char *s, size_t *n)
{
    size_t len = strlen(s);
    unsigned char *out = malloc(len / 4 * 3 + 1);
    cr_assert_not_null(out);
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len && s[i] != '='; i++) {
        const char *digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const char *d = strchr(digits, s[i]);
        cr_assert(d && *d, "bad base64 character '%c'", s[i]);
        acc = (acc << 6) | (unsigned)(d - digits);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    *n = o;
    return out;
}

/* Expects the record of class cls for head k to decode to want[0..count). */
static void expect_record(const char *page, const char *cls, int k, const unsigned char *want,
                          size_t count)
{
    char open[96];
    snprintf(open, sizeof open, "class=\"%s\" data-index=\"%d\">", cls, k);
    char *b64 = element_text(page, open);
    size_t n = 0;
    unsigned char *bytes = b64_decode(b64, &n);
    cr_assert_eq(n, count, "%s %d: %zu bytes, want %zu", cls, k, n, count);
    for (size_t i = 0; i < count; i++)
        cr_expect_eq(bytes[i], want[i], "%s %d value %zu: byte %d, want %d", cls, k, i, bytes[i], want[i]);
    free(bytes);
    free(b64);
}

Test(html, embeds_report_exactly_once)
{
    hs_html_input in = {.report_json = report2, .attn = maps2, .n_maps = 2, .n = 2};
    char *page = encode_ok(&in, NULL);
    cr_expect_eq(count(page, report2), 1);
    cr_expect_eq(count(page, "id=\"hs-report\""), 1);
    cr_expect_eq(strncmp(page, "<!DOCTYPE html>", 15), 0);
    cr_expect_not_null(strstr(page, "</html>\n"));
    free(page);
}

Test(html, escapes_script_end_inside_strings)
{
    const char *json = "{\"input\": {\"text\": \"a</script><script>alert(1)</SCRIPT> <!-- b\"}, "
                       "\"heads\": []}";
    hs_html_input in = {.report_json = json};
    char *page = encode_ok(&in, NULL);
    cr_expect_null(strstr(page, "</script><script>alert"));
    cr_expect_null(strstr(page, "</SCRIPT>"));
    cr_expect_null(strstr(page, "<!--"));
    /* every "</script" closes a script element the page made: as many as without the text */
    hs_html_input plain = {.report_json = "{\"heads\": []}"};
    char *plain_page = encode_ok(&plain, NULL);
    cr_expect_eq(count(page, "</script"), count(plain_page, "</script"));
    free(plain_page);
    /* the embedded text still parses to the same string */
    char *data = element_text(page, "<script type=\"application/json\" id=\"hs-report\">");
    cr_expect_not_null(strstr(data, "a<\\/script>"));
    cJSON *r = cJSON_Parse(data);
    cr_assert_not_null(r, "embedded report does not parse: %s", data);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "input"), "text");
    cr_assert(cJSON_IsString(t));
    cr_expect_str_eq(t->valuestring, "a</script><script>alert(1)</SCRIPT> <!-- b");
    cJSON_Delete(r);
    free(data);
    free(page);
}

Test(html, references_nothing_on_the_network)
{
    hs_html_input in = {.report_json = report2, .attn = maps2, .n_maps = 2, .n = 2};
    char *page = encode_ok(&in, NULL);
    cr_expect_null(strstr(page, "http://"));
    cr_expect_null(strstr(page, "https://"));
    cr_expect_null(strstr(page, "//cdn"));
    cr_expect_null(strstr(page, "@import"));
    cr_expect_null(strstr(page, "url("));
    /* every src= / href= attribute is a data: URL */
    const char *attrs[] = {"src=", "href="};
    for (int a = 0; a < 2; a++) {
        for (const char *p = strstr(page, attrs[a]); p; p = strstr(p + 1, attrs[a])) {
            const char *v = p + strlen(attrs[a]);
            cr_expect_eq(strncmp(v, "\"data:", 6), 0, "%s%.30s is not a data: URL", attrs[a], v);
        }
    }
    free(page);
}

Test(html, one_map_record_per_head)
{
    hs_html_input in = {.report_json = report2, .attn = maps2, .n_maps = 2, .n = 2};
    char *page = encode_ok(&in, NULL);
    cr_expect_eq(count(page, "class=\"hs-map\""), 2);
    cr_expect_eq(count(page, "class=\"hs-map\" data-index=\"0\""), 1);
    cr_expect_eq(count(page, "class=\"hs-map\" data-index=\"1\""), 1);
    cr_expect_eq(count(page, "class=\"hs-thumb\""), 2);
    char *info = element_text(page, "id=\"hs-maps-info\">");
    cJSON *j = cJSON_Parse(info);
    cr_assert_not_null(j);
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "embedded")));
    cr_expect_eq(cJSON_GetObjectItemCaseSensitive(j, "n")->valueint, 2);
    cr_expect_eq(cJSON_GetObjectItemCaseSensitive(j, "count")->valueint, 2);
    cr_expect_eq(cJSON_GetObjectItemCaseSensitive(j, "levels")->valueint, 254);
    cJSON_Delete(j);
    free(info);
    /* head 1 is {0.25, 0.75, 0, 1}: bytes round(v * 254) = 64 (63.5 rounds up), 191, 0, 254 */
    const unsigned char want[4] = {64, 191, 0, 254};
    expect_record(page, "hs-map", 1, want, 4);
    free(page);
}

Test(html, quantises_clamps_and_marks_non_finite)
{
    const char *json = "{\"input\": {\"n_tokens\": 3}, \"heads\": [{\"id\": \"0.0\"}]}";
    /* (1, 3, 3); expected bytes worked out by hand: clamp to [0, 1], round(v * 254), NaN/Inf 255 */
    const float m[9] = {0.5f, -1.0f, 2.0f, NAN, INFINITY, 1.0f / 254.0f, 0.001f, 0.999f, 0.0f};
    const unsigned char want[9] = {127, 0, 254, 255, 255, 1, 0, 254, 0};
    hs_html_input in = {.report_json = json, .attn = m, .n_maps = 1, .n = 3};
    char *page = encode_ok(&in, NULL);
    char *b64 = element_text(page, "class=\"hs-map\" data-index=\"0\">");
    cr_expect_eq(strlen(b64), 12); /* 9 bytes → 12 characters, no padding */
    free(b64);
    expect_record(page, "hs-map", 0, want, 9);
    free(page);
}

Test(html, pads_base64_of_short_maps)
{
    const char *json = "{\"heads\": [{\"id\": \"0.0\"}]}";
    const float m[1] = {1.0f};
    hs_html_input in = {.report_json = json, .attn = m, .n_maps = 1, .n = 1};
    char *page = encode_ok(&in, NULL);
    char *b64 = element_text(page, "class=\"hs-map\" data-index=\"0\">");
    cr_expect_str_eq(b64, "/g=="); /* 0xFE */
    free(b64);
    free(page);
}

Test(html, says_why_maps_are_absent)
{
    hs_html_input in = {.report_json = report2};
    char *page = encode_ok(&in, NULL);
    cr_expect_eq(count(page, "class=\"hs-map\""), 0);
    char *info = element_text(page, "id=\"hs-maps-info\">");
    cJSON *j = cJSON_Parse(info);
    cr_assert_not_null(j, "map index does not parse: %s", info);
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "embedded")));
    cr_expect(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "reason")));
    cJSON_Delete(j);
    free(info);
    free(page);
}

Test(html, leaves_out_maps_above_max_tokens)
{
    int n = HS_HTML_MAX_N + 1;
    float *m = calloc((size_t)n * (size_t)n, sizeof *m);
    cr_assert_not_null(m);
    char json[128];
    snprintf(json, sizeof json, "{\"input\": {\"n_tokens\": %d}, \"heads\": [{\"id\": \"0.0\"}]}", n);
    hs_html_input in = {.report_json = json, .attn = m, .n_maps = 1, .n = n};
    size_t len = 0;
    char *page = encode_ok(&in, &len);
    cr_expect_eq(count(page, "class=\"hs-map\""), 0);
    cr_expect_not_null(strstr(page, "\"embedded\": false"));
    cr_expect_not_null(strstr(page, "2049 tokens; maps are embedded up to 2048"));
    cr_expect_eq(count(page, "class=\"hs-thumb\""), 1); /* the thumbnail stays */
    cr_expect_lt(len, (size_t)200000);
    free(page);
    /* at the limit they are embedded */
    n = HS_HTML_MAX_N;
    snprintf(json, sizeof json, "{\"input\": {\"n_tokens\": %d}, \"heads\": [{\"id\": \"0.0\"}]}", n);
    in.n = n;
    page = encode_ok(&in, NULL);
    cr_expect_eq(count(page, "class=\"hs-map\""), 1);
    free(page);
    free(m);
}

/* map k of the GPT-2-small test: a causal pattern that differs per head */
static hs_status small_map(void *user, int k, float *out, hs_error *err)
{
    int n = *(const int *)user;
    (void)err;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            out[(size_t)i * (size_t)n + (size_t)j] = j <= i ? (float)((i * 7 + j * 3 + k) % 97) / 96.0f : 0.0f;
    return HS_OK;
}

Test(html, gpt2_small_at_512_tokens_stays_under_15_mb)
{
    int n = 512, heads = 144;
    size_t cap = 256 + (size_t)heads * 96 + 8 * (size_t)n;
    char *json = malloc(cap);
    cr_assert_not_null(json);
    /* two tokens a word: the word maps do not fit beside every head's map, so they are left out */
    size_t o = (size_t)snprintf(json, cap, "{\"model\": {\"causal\": true}, \"input\": {\"n_tokens\": %d, \"word_ids\": [", n);
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(json + o, cap - o, "%s%d", i ? ", " : "", i / 2);
    o += (size_t)snprintf(json + o, cap - o, "]}, \"heads\": [");
    /* |ablation_delta| grows with k, with alternating signs: the largest are the last heads */
    for (int k = 0; k < heads; k++)
        o += (size_t)snprintf(json + o, cap - o, "%s{\"id\": \"%d.%d\", \"ablation_delta\": %g}",
                              k ? ", " : "", k / 12, k % 12, (k % 2 ? -1 : 1) * 0.001 * k);
    snprintf(json + o, cap - o, "]}");
    hs_html_input in = {.report_json = json, .map_fn = small_map, .map_user = &n, .n_maps = heads, .n = n};
    size_t len = 0;
    char *page = encode_ok(&in, &len);
    /* a lower triangle is 512 * 513 / 2 = 131328 bytes, 175104 in base64; the 12 MiB budget
     * holds floor(12582912 / 175104) = 71 of them: heads 73..143 */
    cr_expect_eq(count(page, "class=\"hs-map\""), 71);
    cr_expect_eq(count(page, "class=\"hs-map\" data-index=\"143\""), 1);
    cr_expect_eq(count(page, "class=\"hs-map\" data-index=\"73\""), 1);
    cr_expect_eq(count(page, "class=\"hs-map\" data-index=\"72\""), 0);
    cr_expect_eq(count(page, "class=\"hs-thumb\""), (size_t)heads);
    cr_expect_eq(count(page, "class=\"hs-wmap\""), 0);
    cr_expect_not_null(strstr(page, "\"words\": 0"));
    cr_expect_not_null(strstr(page, "the maps of 71 of 144 heads fit"));
    cr_expect_lt(len, (size_t)15000000, "page is %zu bytes", len);
    char *b64 = element_text(page, "class=\"hs-map\" data-index=\"100\">");
    cr_expect_eq(strlen(b64), (size_t)175104);
    free(b64);
    /* written to a file it goes out a piece at a time (a megabyte each), the same bytes */
    char dir[64], path[128];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/index.html", dir);
    hs_error err = {{0}};
    cr_assert_eq(hs_html_write(path, &in, &err), HS_OK, "%s", err.msg);
    char *got = NULL;
    size_t got_len = 0;
    cr_assert_eq(hs_read_file(path, 1 << 26, &got, &got_len, &err), HS_OK, "%s", err.msg);
    cr_expect(got_len == len && !memcmp(got, page, len), "the file is not the encoded page");
    free(got);
    tu_rm_rf(dir);
    free(page);
    free(json);
}

Test(html, stores_lower_triangles_of_causal_maps)
{
    const char *json = "{\"model\": {\"causal\": true}, \"heads\": [{\"id\": \"0.0\"}]}";
    /* (1, 3, 3); entries above the diagonal are left out: rows {1}, {0.5, 0.5}, {0, 0.25, 0.75} */
    const float m[9] = {1, 0.9f, 0.9f, 0.5f, 0.5f, 0.9f, 0, 0.25f, 0.75f};
    const unsigned char want[6] = {254, 127, 127, 0, 64, 191};
    hs_html_input in = {.report_json = json, .attn = m, .n_maps = 1, .n = 3};
    char *page = encode_ok(&in, NULL);
    cr_expect_not_null(strstr(page, "\"packing\": \"lower\""));
    expect_record(page, "hs-map", 0, want, 6);
    free(page);
}

Test(html, thumbnails_keep_the_largest_weight_of_each_block)
{
    /* 96 tokens on a 48 x 48 thumbnail: each pixel covers 2 x 2 cells */
    int n = 96;
    float *m = calloc((size_t)n * (size_t)n, sizeof *m);
    cr_assert_not_null(m);
    m[5 * n + 7] = 0.5f;  /* pixel (2, 3) */
    m[5 * n + 6] = 0.25f; /* the same pixel, smaller */
    m[95 * n + 95] = 1.0f; /* pixel (47, 47) */
    const char *json = "{\"heads\": [{\"id\": \"0.0\"}]}";
    hs_html_input in = {.report_json = json, .attn = m, .n_maps = 1, .n = n};
    char *page = encode_ok(&in, NULL);
    cr_expect_not_null(strstr(page, "\"thumb\": 48"));
    unsigned char want[48 * 48] = {0};
    want[2 * 48 + 3] = 127;
    want[47 * 48 + 47] = 254;
    expect_record(page, "hs-thumb", 0, want, sizeof want);
    free(page);
    free(m);
}

Test(html, embeds_word_maps_when_the_report_has_words)
{
    /* tokens 0, 1 form word 0 and token 2 word 1; keys summed, queries averaged:
     * rows (1, 0, 0) and (0.5, 0.5, 0) of word 0 give (1, 0); row (0.2, 0.3, 0.5) gives
     * (0.5, 0.5) */
    const char *json = "{\"input\": {\"n_tokens\": 3, \"word_ids\": [0, 0, 1]}, \"heads\": [{\"id\": \"0.0\"}]}";
    const float m[9] = {1, 0, 0, 0.5f, 0.5f, 0, 0.2f, 0.3f, 0.5f};
    hs_html_input in = {.report_json = json, .attn = m, .n_maps = 1, .n = 3};
    char *page = encode_ok(&in, NULL);
    cr_expect_not_null(strstr(page, "\"words\": 2"));
    const unsigned char want[4] = {254, 0, 127, 127};
    expect_record(page, "hs-wmap", 0, want, 4);
    free(page);
    /* word ids that skip a word are not a word index: no word maps */
    const char *gap = "{\"input\": {\"n_tokens\": 3, \"word_ids\": [0, 2, 2]}, \"heads\": [{\"id\": \"0.0\"}]}";
    in.report_json = gap;
    page = encode_ok(&in, NULL);
    cr_expect_eq(count(page, "class=\"hs-wmap\""), 0);
    cr_expect_not_null(strstr(page, "\"words\": 0"));
    free(page);
    /* causal: the word map's lower triangle, (1), (0.5, 0.5) */
    const char *causal = "{\"model\": {\"causal\": true}, \"input\": {\"n_tokens\": 3, "
                         "\"word_ids\": [0, 0, 1]}, \"heads\": [{\"id\": \"0.0\"}]}";
    in.report_json = causal;
    page = encode_ok(&in, NULL);
    const unsigned char lower[3] = {254, 127, 127};
    expect_record(page, "hs-wmap", 0, lower, 3);
    free(page);
}

Test(html, corpus_page_embeds_the_texts)
{
    const char *json = "{\"corpus\": {\"heads\": [{\"id\": \"0.0\", \"layer\": 0, \"head\": 0}]}}";
    const char *texts = "{\"index\": 0, \"line\": 1}\n\n{\"index\": 1, \"line\": 3, \"x\": \"</script>\"}\n";
    hs_html_input in = {.report_json = json, .texts_jsonl = texts};
    char *page = encode_ok(&in, NULL);
    char *t = element_text(page, "id=\"hs-texts\">");
    cr_expect_str_eq(t, "{\"index\": 0, \"line\": 1}\n\n{\"index\": 1, \"line\": 3, \"x\": \"<\\/script>\"}\n");
    free(t);
    cr_expect_not_null(strstr(page, "\"texts\": {\"embedded\": 2, \"total\": 2}"));
    cr_expect_not_null(strstr(page, "a corpus report has no maps"));
    free(page);
    /* a corpus report takes no maps */
    const float m[1] = {1};
    hs_html_input bad = {.report_json = json, .attn = m, .n_maps = 1, .n = 1};
    char *out = NULL;
    size_t len = 0;
    hs_error err = {{0}};
    cr_expect_eq(hs_html_encode(&bad, &out, &len, &err), HS_E_ARG);
    cr_expect_not_null(strstr(err.msg, "a corpus report takes no maps"));
    cr_expect_null(out);
}

static void expect_fail(const hs_html_input *in, hs_status want, const char *msg_part)
{
    static char untouched[] = "untouched";
    char *page = untouched;
    size_t len = 99;
    hs_error err = {{0}};
    hs_status st = hs_html_encode(in, &page, &len, &err);
    cr_expect_eq(st, want, "status %d, want %d (%s)", st, want, err.msg);
    cr_expect_null(page);
    cr_expect_eq(len, 0);
    cr_expect_not_null(strstr(err.msg, msg_part), "message '%s' lacks '%s'", err.msg, msg_part);
}

Test(html, rejects_null_arguments)
{
    hs_html_input in = {.report_json = NULL};
    expect_fail(&in, HS_E_ARG, "report_json is NULL");
    expect_fail(NULL, HS_E_ARG, "input is NULL");
    hs_error err = {{0}};
    size_t len;
    char *page;
    in.report_json = report2;
    cr_expect_eq(hs_html_encode(&in, NULL, &len, &err), HS_E_ARG);
    cr_expect_eq(hs_html_encode(&in, &page, NULL, &err), HS_E_ARG);
    cr_expect_eq(hs_html_encode(&in, &page, NULL, NULL), HS_E_ARG); /* err may be NULL */
    cr_expect_eq(hs_html_write(NULL, &in, &err), HS_E_ARG);
    cr_expect_str_eq(err.msg, "html: path is NULL");
}

Test(html, rejects_maps_without_sizes)
{
    hs_html_input in = {.report_json = report2, .attn = maps2, .n_maps = 0, .n = 2};
    expect_fail(&in, HS_E_ARG, "0 maps of 2 tokens");
    in.n_maps = 2;
    in.n = -1;
    expect_fail(&in, HS_E_ARG, "2 maps of -1 tokens");
}

Test(html, rejects_report_that_is_not_a_json_object)
{
    hs_html_input in = {.report_json = "{\"heads\": [}"};
    expect_fail(&in, HS_E_FORMAT, "report is not valid JSON");
    in.report_json = "";
    expect_fail(&in, HS_E_FORMAT, "report is not valid JSON");
    in.report_json = "{} trailing";
    expect_fail(&in, HS_E_FORMAT, "report is not valid JSON");
    in.report_json = "[1, 2]";
    expect_fail(&in, HS_E_FORMAT, "report is not a JSON object");
}

Test(html, rejects_maps_that_disagree_with_the_report)
{
    static const float m3[12] = {0};
    hs_html_input in = {.report_json = report2, .attn = m3, .n_maps = 3, .n = 2};
    expect_fail(&in, HS_E_SHAPE, "3 attention maps for 2 heads");
    in.n_maps = 2;
    in.n = 3;
    expect_fail(&in, HS_E_SHAPE, "maps of 3 tokens for a report of 2 tokens");
    in.report_json = "{\"input\": {}}"; /* no heads array */
    in.n = 2;
    expect_fail(&in, HS_E_SHAPE, "2 attention maps for 0 heads");
}

Test(html, writes_the_encoded_page_atomically)
{
    char dir[64], path[128], bad[160];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/index.html", dir);
    hs_html_input in = {.report_json = report2, .attn = maps2, .n_maps = 2, .n = 2};
    hs_error err = {{0}};
    cr_assert_eq(hs_html_write(path, &in, &err), HS_OK, "%s", err.msg);
    size_t len = 0;
    char *want = encode_ok(&in, &len);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    char *got = malloc(len + 1);
    cr_assert_not_null(got);
    cr_expect_eq(fread(got, 1, len + 1, f), len);
    fclose(f);
    cr_expect_eq(memcmp(got, want, len), 0);
    free(got);
    free(want);
    /* a failed write leaves nothing behind and names the path */
    snprintf(bad, sizeof bad, "%s/missing/index.html", dir);
    cr_expect_eq(hs_html_write(bad, &in, &err), HS_E_IO);
    cr_expect_not_null(strstr(err.msg, bad), "%s", err.msg);
    /* a bad report writes nothing */
    char other[160];
    snprintf(other, sizeof other, "%s/other.html", dir);
    in.report_json = "not json";
    cr_expect_eq(hs_html_write(other, &in, &err), HS_E_FORMAT);
    cr_expect_eq(access(other, F_OK), -1);
    tu_rm_rf(dir);
}

/* hs_map_fn over maps2, failing at map fail_at. */
typedef struct map_src {
    int fail_at, calls;
} map_src;

static hs_status read_map2(void *user, int k, float *out, hs_error *err)
{
    map_src *s = user;
    s->calls++;
    if (k == s->fail_at) {
        snprintf(err->msg, sizeof err->msg, "cannot read map %d", k);
        return HS_E_IO;
    }
    memcpy(out, maps2 + (size_t)k * 4, 4 * sizeof *out);
    return HS_OK;
}

Test(html, maps_read_one_at_a_time_give_the_same_page)
{
    hs_html_input arr = {.report_json = report2, .attn = maps2, .n_maps = 2, .n = 2};
    map_src src = {-1, 0};
    hs_html_input fn = {.report_json = report2, .map_fn = read_map2, .map_user = &src,
                        .n_maps = 2, .n = 2};
    char *a = encode_ok(&arr, NULL), *b = encode_ok(&fn, NULL);
    cr_expect_str_eq(a, b);
    cr_expect_eq(src.calls, 2);
    free(a);
    free(b);
    src.fail_at = 1;
    char *page = (char *)1;
    size_t len = 1;
    hs_error err = {{0}};
    cr_assert_eq(hs_html_encode(&fn, &page, &len, &err), HS_E_IO);
    cr_expect_str_eq(err.msg, "cannot read map 1");
    cr_expect_null(page);
    cr_expect_eq(len, 0);
    /* written to a file: the reader's message, and no file left behind */
    char dir[64], path[128];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/index.html", dir);
    cr_assert_eq(hs_html_write(path, &fn, &err), HS_E_IO);
    cr_expect_str_eq(err.msg, "cannot read map 1");
    cr_expect_eq(access(path, F_OK), -1);
    cr_expect_eq(rmdir(dir), 0, "the folder holds a file");
}
