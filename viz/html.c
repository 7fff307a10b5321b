/* out/index.html: the report and the attention maps in one self-contained page. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "headscope/html.h"
#include "headscope/report.h"
#include "html_page.h"
#include "internal.h"

/* A growing output buffer; on the first failure ok drops to 0 and later appends do
 * nothing, so callers check once at the end. */
typedef struct buf {
    char *p;
    size_t len, cap;
    int ok;
} buf;

static void buf_reserve(buf *b, size_t extra)
{
    size_t need, cap;
    if (!b->ok)
        return;
    if (hs_add_size(b->len, extra, &need) || hs_add_size(need, 1, &need)) {
        b->ok = 0;
        return;
    }
    if (need <= b->cap)
        return;
    cap = b->cap ? b->cap : 4096;
    while (cap < need) {
        if (hs_mul_size(cap, 2, &cap)) {
            cap = need;
            break;
        }
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->ok = 0;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void buf_add(buf *b, const char *s, size_t n)
{
    buf_reserve(b, n);
    if (!b->ok)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_str(buf *b, const char *s) { buf_add(b, s, strlen(s)); }

static void buf_lines(buf *b, const char *const *lines)
{
    for (; *lines; lines++)
        buf_str(b, *lines);
}

/* The report text with "</" → "<\/" and "<!--" → "\u003c!--". Both can only occur
 * inside JSON strings, where the replacements are escapes of the same characters,
 * so JSON.parse returns the same value. */
static void buf_json(buf *b, const char *json)
{
    const char *p = json, *run = json;
    for (; *p; p++) {
        if (p[0] != '<')
            continue;
        if (p[1] == '/') {
            buf_add(b, run, (size_t)(p - run));
            buf_str(b, "<\\/");
            run = p + 2;
            p++;
        } else if (p[1] == '!' && p[2] == '-' && p[3] == '-') {
            buf_add(b, run, (size_t)(p - run));
            buf_str(b, "\\u003c");
            run = p + 1;
        }
    }
    buf_add(b, run, (size_t)(p - run));
}

static unsigned char quantise(float v)
{
    if (!isfinite(v))
        return HS_HTML_NAN_BYTE;
    if (v <= 0.0f)
        return 0;
    if (v >= 1.0f)
        return HS_HTML_LEVELS;
    return (unsigned char)(v * (float)HS_HTML_LEVELS + 0.5f);
}

/* One map: count values, quantised, as base64 (RFC 4648, padded). */
static void buf_map_base64(buf *b, const float *map, size_t count)
{
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t out_len;
    if (hs_mul_size((count + 2) / 3, 4, &out_len)) {
        b->ok = 0;
        return;
    }
    buf_reserve(b, out_len);
    if (!b->ok)
        return;
    char *o = b->p + b->len;
    for (size_t i = 0; i < count; i += 3) {
        size_t rest = count - i;
        unsigned v = (unsigned)quantise(map[i]) << 16;
        if (rest > 1)
            v |= (unsigned)quantise(map[i + 1]) << 8;
        if (rest > 2)
            v |= quantise(map[i + 2]);
        *o++ = digits[(v >> 18) & 63];
        *o++ = digits[(v >> 12) & 63];
        *o++ = rest > 1 ? digits[(v >> 6) & 63] : '=';
        *o++ = rest > 2 ? digits[v & 63] : '=';
    }
    b->len += out_len;
    b->p[b->len] = '\0';
}

/* Checks the report against the maps; sets *embed (and the reason why not). */
static hs_status check_report(const hs_html_input *in, int *embed, char *reason, size_t cap,
                              hs_error *err)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(in->report_json, &end, 1);
    hs_status st = HS_OK;
    *embed = 0;
    if (!root) {
        size_t at = end && end >= in->report_json ? (size_t)(end - in->report_json) : 0;
        return hs_fail(err, HS_E_FORMAT, "html: report is not valid JSON (near byte %zu)", at);
    }
    if (!cJSON_IsObject(root)) {
        st = hs_fail(err, HS_E_FORMAT, "html: report is not a JSON object");
        goto done;
    }
    if (!in->attn && !in->map_fn) {
        snprintf(reason, cap, "no attention maps were given to the page writer");
        goto done;
    }
    const cJSON *heads = cJSON_GetObjectItemCaseSensitive(root, "heads");
    int n_heads = cJSON_IsArray(heads) ? cJSON_GetArraySize(heads) : 0;
    if (n_heads != in->n_maps) {
        st = hs_fail(err, HS_E_SHAPE, "html: %d attention maps for %d heads in the report",
                     in->n_maps, n_heads);
        goto done;
    }
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(root, "input");
    const cJSON *nt = cJSON_GetObjectItemCaseSensitive(input, "n_tokens");
    if (cJSON_IsNumber(nt) && nt->valuedouble != (double)in->n) {
        st = hs_fail(err, HS_E_SHAPE, "html: maps of %d tokens for a report of %g tokens", in->n,
                     nt->valuedouble);
        goto done;
    }
    size_t values;
    if (hs_mul_size((size_t)in->n, (size_t)in->n, &values) ||
        hs_mul_size(values, (size_t)in->n_maps, &values)) {
        st = hs_fail(err, HS_E_NOMEM, "html: %d maps of %d x %d values overflow", in->n_maps,
                     in->n, in->n);
        goto done;
    }
    if (in->n > HS_HTML_MAX_N)
        snprintf(reason, cap, "the text has %d tokens; maps are embedded up to %d tokens", in->n,
                 HS_HTML_MAX_N);
    else if (values > HS_HTML_MAX_MAP_VALUES)
        snprintf(reason, cap, "%d maps of %d x %d values are more than the %zu values embedded",
                 in->n_maps, in->n, in->n, HS_HTML_MAX_MAP_VALUES);
    else
        *embed = 1;
done:
    cJSON_Delete(root);
    return st;
}

hs_status hs_html_encode(const hs_html_input *in, char **out, size_t *len, hs_error *err)
{
    buf b = {NULL, 0, 0, 1};
    char reason[256] = "";
    char num[96];
    int embed = 0;
    hs_status st;
    if (out)
        *out = NULL;
    if (len)
        *len = 0;
    if (!in || !out || !len)
        return hs_fail(err, HS_E_ARG, "html: %s is NULL", !in ? "input" : !out ? "out" : "len");
    if (!in->report_json)
        return hs_fail(err, HS_E_ARG, "html: report_json is NULL");
    if ((in->attn || in->map_fn) && (in->n_maps < 1 || in->n < 1))
        return hs_fail(err, HS_E_ARG, "html: %d maps of %d tokens, expected at least 1 of each",
                       in->n_maps, in->n);
    if ((st = check_report(in, &embed, reason, sizeof reason, err)) != HS_OK)
        return st;

    buf_lines(&b, hs_html_head);
    buf_lines(&b, hs_html_css);
    buf_lines(&b, hs_html_body);
    buf_str(&b, "<script type=\"application/json\" id=\"hs-report\">");
    buf_json(&b, in->report_json);
    buf_str(&b, "</script>\n<script type=\"application/json\" id=\"hs-maps-info\">");
    if (embed) {
        snprintf(num, sizeof num, "{\"embedded\": true, \"n\": %d, \"count\": %d, ", in->n,
                 in->n_maps);
        buf_str(&b, num);
        snprintf(num, sizeof num, "\"levels\": %d, \"nan\": %d}", HS_HTML_LEVELS,
                 HS_HTML_NAN_BYTE);
        buf_str(&b, num);
    } else {
        /* reason is our own text: no quotes, backslashes or '<' to escape */
        buf_str(&b, "{\"embedded\": false, \"reason\": \"");
        buf_str(&b, reason);
        buf_str(&b, "\"}");
    }
    buf_str(&b, "</script>\n");
    if (embed) {
        size_t nn = (size_t)in->n * (size_t)in->n;
        float *map = in->attn ? NULL : malloc(nn * sizeof *map); /* (n, n) from map_fn */
        if (!in->attn && !map)
            b.ok = 0;
        for (int k = 0; k < in->n_maps && b.ok; k++) {
            if (map && (st = in->map_fn(in->map_user, k, map, err)) != HS_OK) {
                free(map);
                free(b.p);
                return st;
            }
            snprintf(num, sizeof num, "<script type=\"text/plain\" class=\"hs-map\" data-index=\"%d\">", k);
            buf_str(&b, num);
            buf_map_base64(&b, map ? map : in->attn + (size_t)k * nn, nn);
            buf_str(&b, "</script>\n");
        }
        free(map);
    }
    buf_str(&b, "<script>\n");
    buf_lines(&b, hs_html_js);
    buf_str(&b, "</script>\n</body>\n</html>\n");
    if (!b.ok) {
        free(b.p);
        return hs_fail(err, HS_E_NOMEM, "html: out of memory building the page");
    }
    *out = b.p;
    *len = b.len;
    return HS_OK;
}

hs_status hs_html_write(const char *path, const hs_html_input *in, hs_error *err)
{
    char *page = NULL;
    size_t len = 0;
    hs_status st;
    if (!path)
        return hs_fail(err, HS_E_ARG, "html: path is NULL");
    if ((st = hs_html_encode(in, &page, &len, err)) != HS_OK)
        return st;
    st = hs_file_write_atomic(path, page, len, err);
    free(page);
    return st;
}
