/* out/index.html: the report, the attention maps and the page's own HTML, CSS and JavaScript
 * (viz/page/, compiled in by viz/page/pagegen.c) in one self-contained file. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "core/core.h"
#include "headscope/html.h"
#include "html_page.h"

/* A growing output buffer; on the first failure ok drops to 0 and later appends do
 * nothing, so callers check once at the end. With f, what it holds goes to f whenever it
 * passes BUF_SPILL bytes (hs_html_write: the page is never whole in memory; at 704 heads
 * it is tens of megabytes); io then tells a failed write from a failed allocation. */
typedef struct buf {
    char *p;
    size_t len, cap;
    int ok;
    FILE *f;
    int io; /* errno of the failed write */
} buf;

#define BUF_SPILL ((size_t)1 << 20)

static void buf_spill(buf *b, size_t at_least)
{
    if (!b->f || !b->ok || b->len < at_least)
        return;
    if (b->len && fwrite(b->p, 1, b->len, b->f) != b->len)
        b->ok = 0, b->io = errno ? errno : EIO;
    b->len = 0;
}

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
    buf_spill(b, BUF_SPILL);
}

static void buf_str(buf *b, const char *s) { buf_add(b, s, strlen(s)); }


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

static size_t b64_len(size_t count) { return (count + 2) / 3 * 4; }

/* count bytes as base64 (RFC 4648, padded). */
static void buf_base64(buf *b, const unsigned char *v, size_t count)
{
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t out_len = b64_len(count);
    buf_reserve(b, out_len);
    if (!b->ok)
        return;
    char *o = b->p + b->len;
    for (size_t i = 0; i < count; i += 3) {
        size_t rest = count - i;
        unsigned x = (unsigned)v[i] << 16;
        if (rest > 1)
            x |= (unsigned)v[i + 1] << 8;
        if (rest > 2)
            x |= v[i + 2];
        *o++ = digits[(x >> 18) & 63];
        *o++ = digits[(x >> 12) & 63];
        *o++ = rest > 1 ? digits[(x >> 6) & 63] : '=';
        *o++ = rest > 2 ? digits[x & 63] : '=';
    }
    b->len += out_len;
    b->p[b->len] = '\0';
    buf_spill(b, BUF_SPILL);
}

/* What the report says about the page: checked against the maps, and the heads whose
 * full maps fit the budget. */
typedef struct plan {
    int corpus;          /* a corpus report: no maps, the per-text list */
    int causal;          /* store lower triangles (causal and sliding-window maps; a prefix
                            LM's report says causal: false and its maps are stored whole) */
    int maps;            /* maps were given (thumbnails for every head) */
    int n_full;          /* heads with full maps */
    unsigned char *full; /* (n_maps) 1 = full map embedded */
    int32_t *word;       /* (n) word of each token, or NULL */
    int n_words;
    char reason[256];    /* why maps (of some heads) are left out; "" when none are */
} plan;

static void plan_free(plan *p)
{
    free(p->full);
    free(p->word);
}

static double num_or(const cJSON *o, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) ? v->valuedouble : dflt;
}

/* input.word_ids when it is a valid word index of n tokens (starts at 0, steps by 0 or
 * 1); *n_words 0 otherwise. */
static int32_t *word_ids(const cJSON *input, int n, int *n_words)
{
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(input, "word_ids"), *e;
    int32_t *word = NULL;
    int i = 0, prev = -1;
    *n_words = 0;
    if (!cJSON_IsArray(w) || cJSON_GetArraySize(w) != n || !(word = malloc((size_t)n * sizeof *word)))
        return NULL;
    cJSON_ArrayForEach(e, w) {
        if (!cJSON_IsNumber(e) || (e->valuedouble != prev && e->valuedouble != prev + 1)) {
            free(word);
            return NULL;
        }
        prev = word[i++] = (int32_t)e->valuedouble;
    }
    *n_words = prev + 1;
    return word;
}

/* Heads ranked for full maps: |ablation_delta| descending, then gradient_importance
 * descending, then report order. */
typedef struct rank {
    double delta, grad;
    int k;
} rank;

static int rank_cmp(const void *pa, const void *pb)
{
    const rank *a = pa, *b = pb;
    if (a->delta != b->delta)
        return a->delta > b->delta ? -1 : 1;
    if (a->grad != b->grad)
        return a->grad > b->grad ? -1 : 1;
    return (a->k > b->k) - (a->k < b->k);
}

static size_t packed(int n, int causal)
{
    return causal ? (size_t)n * ((size_t)n + 1) / 2 : (size_t)n * (size_t)n;
}

/* Word maps come with every head's map or not at all: when all heads' maps and word maps
 * do not fit, the word maps are dropped so that more heads' maps fit. */
static hs_status choose_heads(const cJSON *heads, const hs_html_input *in, plan *p, hs_error *err)
{
    size_t cost = b64_len(packed(in->n, p->causal));
    if (p->word && (size_t)in->n_maps * (cost + b64_len(packed(p->n_words, p->causal))) > HS_HTML_MAP_BUDGET) {
        free(p->word);
        p->word = NULL;
        p->n_words = 0;
    }
    if (p->word)
        cost += b64_len(packed(p->n_words, p->causal));
    size_t fit = HS_HTML_MAP_BUDGET / cost;
    rank *r = malloc((size_t)in->n_maps * sizeof *r);
    p->full = calloc((size_t)in->n_maps, 1);
    if (!r || !p->full) {
        free(r);
        return hs_fail(err, HS_E_NOMEM, "html: out of memory");
    }
    int k = 0;
    const cJSON *h;
    cJSON_ArrayForEach(h, heads) {
        r[k].delta = fabs(num_or(h, "ablation_delta", -1.0));
        if (!cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(h, "ablation_delta")))
            r[k].delta = -1.0;
        r[k].grad = num_or(h, "gradient_importance", -1.0);
        r[k].k = k;
        k++;
    }
    qsort(r, (size_t)in->n_maps, sizeof *r, rank_cmp);
    p->n_full = fit < (size_t)in->n_maps ? (int)fit : in->n_maps;
    for (k = 0; k < p->n_full; k++)
        p->full[r[k].k] = 1;
    free(r);
    if (p->n_full == 0)
        snprintf(p->reason, sizeof p->reason,
                 "one map of %d x %d values is more than the page's budget of %zu bytes", in->n,
                 in->n, HS_HTML_MAP_BUDGET);
    else if (p->n_full < in->n_maps)
        snprintf(p->reason, sizeof p->reason,
                 "the maps of %d of %d heads fit the page's budget of %zu MiB (the heads with "
                 "the largest |ablation delta|, without word-level maps); the others show only "
                 "their thumbnail",
                 p->n_full, in->n_maps, HS_HTML_MAP_BUDGET >> 20);
    return HS_OK;
}

/* Checks the report against the maps and fills the plan. */
static hs_status check_report(const hs_html_input *in, plan *p, hs_error *err)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(in->report_json, &end, 1);
    hs_status st = HS_OK;
    if (!root) {
        size_t at = end && end >= in->report_json ? (size_t)(end - in->report_json) : 0;
        return hs_fail(err, HS_E_FORMAT, "html: report is not valid JSON (near byte %zu)", at);
    }
    if (!cJSON_IsObject(root)) {
        st = hs_fail(err, HS_E_FORMAT, "html: report is not a JSON object");
        goto done;
    }
    p->corpus = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "corpus"));
    if (!in->attn && !in->map_fn) {
        snprintf(p->reason, sizeof p->reason, "%s",
                 p->corpus ? "a corpus report has no maps; analyze one text to see them"
                           : "no attention maps were given to the page writer");
        goto done;
    }
    if (p->corpus) {
        st = hs_fail(err, HS_E_ARG, "html: a corpus report takes no maps");
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
    p->maps = 1;
    p->causal = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(root, "model"), "causal"));
    if (in->n > HS_HTML_MAX_N) {
        snprintf(p->reason, sizeof p->reason,
                 "the text has %d tokens; maps are embedded up to %d tokens", in->n, HS_HTML_MAX_N);
        goto done;
    }
    p->word = word_ids(input, in->n, &p->n_words);
    st = choose_heads(heads, in, p, err);
done:
    cJSON_Delete(root);
    return st;
}

/* A script element of class cls for head k holding count bytes as base64. */
static void buf_record(buf *b, const char *cls, int k, const unsigned char *v, size_t count)
{
    char open[128];
    snprintf(open, sizeof open, "<script type=\"text/plain\" class=\"%s\" data-index=\"%d\">", cls, k);
    buf_str(b, open);
    buf_base64(b, v, count);
    buf_str(b, "</script>\n");
}

/* The records of head k from its (n, n) map; q is scratch of n*n bytes, wmap of
 * n_words^2 floats. */
static void buf_head(buf *b, const plan *p, int k, const float *map, int n, unsigned char *q,
                     float *wmap)
{
    int side = n < HS_HTML_THUMB ? n : HS_HTML_THUMB;
    size_t c = 0;
    /* thumbnail: the largest finite weight under each pixel, NaN when none is finite */
    float thumb[HS_HTML_THUMB * HS_HTML_THUMB];
    for (int t = 0; t < side * side; t++)
        thumb[t] = NAN;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float v = map[(size_t)i * (size_t)n + (size_t)j];
            float *t = &thumb[(i * side / n) * side + j * side / n];
            if (isfinite(v) && !(*t >= v))
                *t = v;
        }
    for (int t = 0; t < side * side; t++)
        q[t] = quantise(thumb[t]);
    buf_record(b, "hs-thumb", k, q, (size_t)side * (size_t)side);
    if (!p->full || !p->full[k])
        return;
    for (int i = 0; i < n; i++)
        for (int j = 0, nj = p->causal ? i + 1 : n; j < nj; j++)
            q[c++] = quantise(map[(size_t)i * (size_t)n + (size_t)j]);
    buf_record(b, "hs-map", k, q, c);
    if (p->word && wmap && hs_wordmap_compute(map, 1, n, hs_vis_from_causal(p->causal), p->word,
                                              p->n_words, wmap, NULL) == HS_OK) {
        int w = p->n_words;
        c = 0;
        for (int u = 0; u < w; u++) /* causal: no word attends to a later word */
            for (int v = 0, nv = p->causal ? u + 1 : w; v < nv; v++)
                q[c++] = quantise(wmap[(size_t)u * (size_t)w + (size_t)v]);
        buf_record(b, "hs-wmap", k, q, c);
    }
}

/* texts.jsonl up to HS_HTML_MAX_TEXTS_BYTES of whole lines; counts the lines kept and all. */
static void buf_texts(buf *b, const char *texts, long *kept, long *total)
{
    size_t cut = 0;
    int room = 1;
    *kept = *total = 0;
    for (const char *p = texts; *p;) {
        const char *eol = strchr(p, '\n');
        size_t end = eol ? (size_t)(eol - texts) + 1 : strlen(texts);
        int blank = eol == p || (eol == p + 1 && *p == '\r');
        room = room && end <= HS_HTML_MAX_TEXTS_BYTES;
        if (!blank)
            (*total)++;
        if (room) {
            cut = end;
            *kept += !blank;
        }
        p = texts + end;
    }
    char *part = malloc(cut + 1);
    if (!part) {
        b->ok = 0;
        return;
    }
    memcpy(part, texts, cut);
    part[cut] = '\0';
    buf_json(b, part);
    free(part);
}

static void buf_info(buf *b, const hs_html_input *in, const plan *p, long kept, long total)
{
    char num[160];
    buf_str(b, "{\"embedded\": ");
    buf_str(b, p->maps && p->n_full > 0 ? "true" : "false");
    if (p->maps) {
        snprintf(num, sizeof num, ", \"n\": %d, \"of\": %d, \"count\": %d, \"levels\": %d, \"nan\": %d",
                 in->n, in->n_maps, p->n_full, HS_HTML_LEVELS, HS_HTML_NAN_BYTE);
        buf_str(b, num);
        snprintf(num, sizeof num, ", \"packing\": \"%s\", \"thumb\": %d, \"words\": %d, \"budget\": %zu",
                 p->causal ? "lower" : "full", in->n < HS_HTML_THUMB ? in->n : HS_HTML_THUMB,
                 p->full ? p->n_words : 0, HS_HTML_MAP_BUDGET);
        buf_str(b, num);
    }
    if (p->corpus && in->texts_jsonl) {
        snprintf(num, sizeof num, ", \"texts\": {\"embedded\": %ld, \"total\": %ld}", kept, total);
        buf_str(b, num);
    }
    /* reason is our own text: no quotes, backslashes or '<' to escape */
    if (p->reason[0]) {
        buf_str(b, ", \"reason\": \"");
        buf_str(b, p->reason);
        buf_str(b, "\"");
    }
    buf_str(b, "}");
}

/* The page into b (in memory, or through to b->f). */
static hs_status encode(const hs_html_input *in, buf *b, hs_error *err)
{
    plan p = {0};
    float *map = NULL, *wmap = NULL;
    unsigned char *q = NULL;
    long kept = 0, total = 0;
    hs_status st;
    if (!in->report_json)
        return hs_fail(err, HS_E_ARG, "html: report_json is NULL");
    if ((in->attn || in->map_fn) && (in->n_maps < 1 || in->n < 1))
        return hs_fail(err, HS_E_ARG, "html: %d maps of %d tokens, expected at least 1 of each",
                       in->n_maps, in->n);
    if ((st = check_report(in, &p, err)) != HS_OK)
        goto fail;

    buf_add(b, (const char *)hs_page_before, hs_page_before_len);
    buf_str(b, "<script type=\"application/json\" id=\"hs-report\">");
    buf_json(b, in->report_json);
    buf_str(b, "</script>\n");
    if (p.corpus && in->texts_jsonl) {
        buf_str(b, "<script type=\"application/x-ndjson\" id=\"hs-texts\">");
        buf_texts(b, in->texts_jsonl, &kept, &total);
        buf_str(b, "</script>\n");
    }
    buf_str(b, "<script type=\"application/json\" id=\"hs-maps-info\">");
    buf_info(b, in, &p, kept, total);
    buf_str(b, "</script>\n");
    if (p.maps) {
        size_t nn = (size_t)in->n * (size_t)in->n;
        map = in->attn ? NULL : malloc(nn * sizeof *map); /* (n, n) from map_fn */
        q = malloc(nn > HS_HTML_THUMB * HS_HTML_THUMB ? nn : HS_HTML_THUMB * HS_HTML_THUMB);
        wmap = p.word ? malloc((size_t)p.n_words * (size_t)p.n_words * sizeof *wmap) : NULL;
        if ((!in->attn && !map) || !q || (p.word && !wmap))
            b->ok = 0;
        for (int k = 0; k < in->n_maps && b->ok; k++) {
            if (map && (st = in->map_fn(in->map_user, k, map, err)) != HS_OK)
                goto fail;
            buf_head(b, &p, k, map ? map : in->attn + (size_t)k * nn, in->n, q, wmap);
        }
    }
    buf_add(b, (const char *)hs_page_after, hs_page_after_len);
    buf_spill(b, 1);
    if (!b->ok && !b->io)
        st = hs_fail(err, HS_E_NOMEM, "html: out of memory building the page");
    else if (!b->ok)
        st = hs_fail(err, HS_E_IO, "html: cannot write the page");
    else
        st = HS_OK;
fail:
    free(map);
    free(wmap);
    free(q);
    plan_free(&p);
    return st;
}

hs_status hs_html_encode(const hs_html_input *in, char **out, size_t *len, hs_error *err)
{
    if (out)
        *out = NULL;
    if (len)
        *len = 0;
    if (!in || !out || !len)
        return hs_fail(err, HS_E_ARG, "html: %s is NULL", !in ? "input" : !out ? "out" : "len");
    buf b = {NULL, 0, 0, 1, NULL, 0};
    hs_status st = encode(in, &b, err);
    if (st != HS_OK) {
        free(b.p);
        return st;
    }
    *out = b.p;
    *len = b.len;
    return HS_OK;
}


hs_status hs_html_write(const char *path, const hs_html_input *in, hs_error *err)
{
    if (!path)
        return hs_fail(err, HS_E_ARG, "html: path is NULL");
    if (!in)
        return hs_fail(err, HS_E_ARG, "html: input is NULL");
    hs_out o;
    hs_status st = hs_out_open(path, &o, err);
    if (st != HS_OK)
        return st;
    buf b = {NULL, 0, 0, 1, o.f, 0};
    st = encode(in, &b, err);
    free(b.p);
    if (st == HS_E_IO && b.io) { /* a failed write, named as hs_out_close names it */
        hs_out_close(&o, 0, NULL);
        return hs_fail(err, HS_E_IO, "cannot write '%s': %s", path, strerror(b.io));
    }
    if (st != HS_OK) {
        hs_out_close(&o, 0, NULL);
        return st;
    }
    return hs_out_close(&o, 1, err);
}
