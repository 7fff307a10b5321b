/* out/index.html of an encoder-decoder's analysis (T5): the page of viz/page/ with the report
 * and every head's map of each kind (rows x cols bytes, base64), which viz/page/encdec.js
 * shows as three kinds of heads. Maps are quantised as hs_html_encode's (headscope/html.h:
 * round(v * HS_HTML_LEVELS), HS_HTML_NAN_BYTE for a NaN), kept whole (no triangle packing),
 * within HS_HTML_MAP_BUDGET bytes of base64 in the report's head order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "headscope/html.h"
#include "html_page.h"
#include "pipeline/encdec_result.h"

typedef struct text {
    char *p;
    size_t len, cap;
    int ok;
} text;

static void put(text *t, const char *s, size_t n)
{
    if (!t->ok)
        return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 1 << 16;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p) {
            t->ok = 0;
            return;
        }
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
}

static void puts_(text *t, const char *s) { put(t, s, strlen(s)); }

/* JSON text inside a script element: every '<' as \u003c (only inside strings there). */
static void put_json(text *t, const char *s)
{
    for (const char *run = s;; s++) {
        if (*s && *s != '<')
            continue;
        put(t, run, (size_t)(s - run));
        if (!*s)
            return;
        puts_(t, "\\u003c");
        run = s + 1;
    }
}

static unsigned char level(float v)
{
    return !isfinite(v) ? HS_HTML_NAN_BYTE
           : v <= 0     ? 0
           : v >= 1     ? HS_HTML_LEVELS
                        : (unsigned char)(v * (float)HS_HTML_LEVELS + 0.5f);
}

/* A map's cells as quantised bytes in base64, three cells per four characters. */
static void put_map(text *t, const float *map, size_t cells)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char quad[4];
    for (size_t i = 0; i < cells && t->ok; i += 3) {
        unsigned v[3] = {level(map[i]), i + 1 < cells ? level(map[i + 1]) : 0,
                         i + 2 < cells ? level(map[i + 2]) : 0};
        unsigned x = v[0] << 16 | v[1] << 8 | v[2];
        for (int q = 0; q < 4; q++)
            quad[q] = b64[(x >> (18 - 6 * q)) & 63];
        if (i + 1 >= cells)
            quad[2] = '=';
        if (i + 2 >= cells)
            quad[3] = '=';
        put(t, quad, 4);
    }
}

hs_status hs_html_encdec_write(const char *path, const char *report_json, const hs_analysis *a,
                               hs_error *err)
{
    const hs_encdec_result *e = a->encdec;
    int H = hs_model_config_of(a->model)->n_head, total = 0, kept = 0;
    size_t used = 0;
    text t = {NULL, 0, 0, 1}, maps = {NULL, 0, 0, 1};
    char line[256];
    for (int k = 0; k < HS_ED_KINDS; k++) {
        const hs_encdec_kind *kd = &e->kinds[k];
        size_t cells = (size_t)kd->rows * (size_t)kd->cols, b = (cells + 2) / 3 * 4;
        for (int i = 0; i < kd->n_layer * H; i++, total++) {
            if (used + b > HS_HTML_MAP_BUDGET)
                continue;
            used += b;
            kept++;
            snprintf(line, sizeof line, "<script type=\"text/plain\" class=\"hs-xmap\" "
                     "data-kind=\"%s\" data-index=\"%d\">", hs_encdec_kind_name(k), i);
            puts_(&maps, line);
            put_map(&maps, hs_encdec_map(kd, H, i), cells);
            puts_(&maps, "</script>\n");
        }
    }
    put(&t, (const char *)hs_page_before, hs_page_before_len);
    puts_(&t, "<script type=\"application/json\" id=\"hs-report\">");
    put_json(&t, report_json);
    puts_(&t, "</script>\n<script type=\"application/json\" id=\"hs-encdec-info\">");
    snprintf(line, sizeof line, "{\"levels\": %d, \"nan\": %d, \"count\": %d, \"of\": %d, "
             "\"budget\": %zu}", HS_HTML_LEVELS, HS_HTML_NAN_BYTE, kept, total,
             HS_HTML_MAP_BUDGET);
    puts_(&t, line);
    puts_(&t, "</script>\n");
    if (maps.p)
        put(&t, maps.p, maps.len);
    put(&t, (const char *)hs_page_after, hs_page_after_len);
    hs_status st = t.ok && maps.ok ? hs_file_write_atomic(path, t.p, t.len, err)
                                   : hs_fail(err, HS_E_NOMEM, "html: out of memory building the "
                                             "page");
    free(t.p);
    free(maps.p);
    return st;
}
