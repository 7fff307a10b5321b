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

/* report_json with every '<' as \u003c (only inside JSON strings there): its length, and the
 * text written to out when out is not NULL. */
static size_t escaped(const char *json, char *out)
{
    size_t n = 0;
    for (const char *p = json; *p; p++) {
        const char *piece = *p == '<' ? "\\u003c" : NULL;
        size_t len = piece ? 6 : 1;
        if (out)
            memcpy(out + n, piece ? piece : p, len);
        n += len;
    }
    return n;
}

static unsigned char level(float v)
{
    return !isfinite(v) ? HS_HTML_NAN_BYTE
           : v <= 0     ? 0
           : v >= 1     ? HS_HTML_LEVELS
                        : (unsigned char)(v * (float)HS_HTML_LEVELS + 0.5f);
}

/* A map's cells as quantised bytes in base64 at out, three cells per four characters;
 * returns the characters written. */
static size_t base64_map(const float *map, size_t cells, char *out)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = out;
    for (size_t i = 0; i < cells; i += 3) {
        unsigned v[3] = {level(map[i]), i + 1 < cells ? level(map[i + 1]) : 0,
                         i + 2 < cells ? level(map[i + 2]) : 0};
        unsigned x = v[0] << 16 | v[1] << 8 | v[2];
        for (int q = 0; q < 4; q++)
            o[q] = b64[(x >> (18 - 6 * q)) & 63];
        if (i + 1 >= cells)
            o[2] = '=';
        if (i + 2 >= cells)
            o[3] = '=';
        o += 4;
    }
    return (size_t)(o - out);
}

#define RECORD_OPEN "<script type=\"text/plain\" class=\"hs-xmap\" data-kind=\"%s\" data-index=\"%d\">"
#define RECORD_CLOSE "</script>\n"

/* The map records of the heads that fit the budget into out (NULL: only counted); returns
 * their length, *kept and *total the heads embedded and all. */
static size_t records(const hs_encdec_result *e, int H, char *out, int *kept, int *total)
{
    size_t used = 0, len = 0;
    *kept = *total = 0;
    for (int k = 0; k < HS_ED_KINDS; k++) {
        const hs_encdec_kind *kd = &e->kinds[k];
        size_t cells = (size_t)kd->rows * (size_t)kd->cols, b = (cells + 2) / 3 * 4;
        for (int i = 0; i < kd->n_layer * H; i++, (*total)++) {
            if (used + b > HS_HTML_MAP_BUDGET)
                continue;
            char open[160];
            int n = snprintf(open, sizeof open, RECORD_OPEN, hs_encdec_kind_name(k), i);
            used += b;
            (*kept)++;
            if (out) {
                memcpy(out + len, open, (size_t)n);
                base64_map(hs_encdec_map(kd, H, i), cells, out + len + n);
                memcpy(out + len + n + b, RECORD_CLOSE, strlen(RECORD_CLOSE));
            }
            len += (size_t)n + b + strlen(RECORD_CLOSE);
        }
    }
    return len;
}

hs_status hs_html_encdec_write(const char *path, const char *report_json, const hs_analysis *a,
                               hs_error *err)
{
    static const char rep_open[] = "<script type=\"application/json\" id=\"hs-report\">";
    const hs_encdec_result *e = a->encdec;
    int H = hs_model_config_of(a->model)->n_head, kept, total;
    char info[320];
    size_t rec_len = records(e, H, NULL, &kept, &total), json_len = escaped(report_json, NULL);
    char *json = malloc(json_len + 1), *rec = malloc(rec_len + 1);
    if (!json || !rec) {
        free(json);
        free(rec);
        return hs_fail(err, HS_E_NOMEM, "html: out of memory building the page");
    }
    escaped(report_json, json);
    records(e, H, rec, &kept, &total);
    int info_len = snprintf(info, sizeof info, "</script>\n<script type=\"application/json\" "
                            "id=\"hs-encdec-info\">{\"levels\": %d, \"nan\": %d, \"count\": %d, "
                            "\"of\": %d, \"budget\": %zu}</script>\n", HS_HTML_LEVELS,
                            HS_HTML_NAN_BYTE, kept, total, HS_HTML_MAP_BUDGET);
    const void *parts[] = {hs_page_before, rep_open, json, info, rec, hs_page_after};
    size_t lens[] = {hs_page_before_len, strlen(rep_open), json_len, (size_t)info_len, rec_len,
                     hs_page_after_len};
    hs_status st = hs_file_write_atomic_parts(path, parts, lens, 6, err);
    free(json);
    free(rec);
    return st;
}
