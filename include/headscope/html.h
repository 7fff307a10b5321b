/*
 * headscope/html.h — out/index.html: one self-contained page over an analysis.
 *
 * The page embeds report.json verbatim and, optionally, the analysed heads' attention
 * maps (quantised to one byte per value, base64, one record per head, within a byte
 * budget), a thumbnail of every head, and word-level maps when the report has words.
 * All CSS and JavaScript are inline; the page loads nothing from the network, so it
 * works opened straight from disk (file://). Pictures that the report lists in its
 * "files" (gallery.png, similarity.png, importance.png, heads/L{l}_H{h}.png) are
 * shown by relative path when present. See docs/html.md.
 *
 *     hs_error err = {0};
 *     // maps: (n_heads, n, n) — the heads in report "heads" order, row = query
 *     hs_html_input in = {.report_json = json, .attn = maps, .n_maps = n_heads, .n = n};
 *     if (hs_html_write("out/index.html", &in, &err) != HS_OK)
 *         fprintf(stderr, "headscope: %s\n", err.msg);
 *
 *     char *page = NULL; size_t len = 0;           // or to memory, for tests
 *     hs_html_encode(&in, &page, &len, &err);
 *     free(page);
 */
#ifndef HEADSCOPE_HTML_H
#define HEADSCOPE_HTML_H

#include <stddef.h>

#include "headscope/analysis.h"
#include "headscope/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Maps of more than this many tokens are never embedded (the page says so); the
 * report is still shown in full. */
#define HS_HTML_MAX_N 2048

/* The page's byte budget for full maps: their base64 text (and that of the word-level
 * maps, when the report has input.word_ids) stays within this many bytes. When every
 * analysed head does not fit, the heads are taken in order of |ablation_delta| (then
 * gradient_importance, then report order) until the next would not fit, and the page
 * names the rest. With the thumbnails and the report, a GPT-2-small page at 512 tokens
 * stays under 15 MB (docs/html.md). */
#define HS_HTML_MAP_BUDGET ((size_t)12 << 20)

/* Every head also gets a thumbnail of at most HS_HTML_THUMB x HS_HTML_THUMB values, each
 * the largest weight of the cells it covers, for the model view. */
#define HS_HTML_THUMB 48

/* A corpus page embeds texts.jsonl up to this many bytes (whole lines; the page says
 * how many texts were left out). */
#define HS_HTML_MAX_TEXTS_BYTES ((size_t)8 << 20)

/* Quantisation of embedded maps: a value v in [0, 1] is stored as the byte
 * round(v * HS_HTML_LEVELS) (values outside [0, 1] are clamped); a NaN or
 * infinite value is stored as HS_HTML_NAN_BYTE and drawn grey. Maps of causal models
 * (report model.causal true) store only the lower triangle, row by row. */
#define HS_HTML_LEVELS 254
#define HS_HTML_NAN_BYTE 255

typedef struct hs_html_input {
    const char *report_json; /* report.json text (schema headscope.report/3), embedded
                              * verbatim except that "</" becomes "<\/" and "<!--"
                              * becomes "\u003c!--", so it cannot end the script element */
    const float *attn;       /* (n_maps, n, n) maps of the heads in report "heads" order,
                              * row = query, column = key; or NULL */
    hs_map_fn map_fn;        /* or the maps read one at a time: map k of that order (used
                              * when attn is NULL; its failure is returned as is) */
    void *map_user;          /* passed to map_fn */
    int n_maps, n;           /* ignored when attn and map_fn are NULL (no maps) */
    const char *texts_jsonl; /* corpus reports: texts.jsonl, shown as the per-text list;
                              * or NULL */
} hs_html_input;

/* Builds the page in memory. report_json must be a JSON object (a single-text report,
 * or a corpus report with "corpus", which takes no maps); when maps are given, n_maps
 * must equal the length of its "heads" array and n its input.n_tokens (when present).
 * Maps with n > HS_HTML_MAX_N are left out, and the heads beyond HS_HTML_MAP_BUDGET;
 * the page says why.
 * Returns HS_OK and a malloc'd, NUL-terminated page in *out (caller frees) with its
 * length, excluding the NUL, in *len; on failure *out is NULL and *len 0:
 * HS_E_ARG for a NULL in, out, len or report_json, maps with n_maps or n < 1, or maps
 * with a corpus report;
 * HS_E_FORMAT when report_json is not a JSON object; HS_E_SHAPE when n_maps or n
 * disagree with the report; HS_E_NOMEM when out of memory or a size overflows. */
hs_status hs_html_encode(const hs_html_input *in, char **out, size_t *len, hs_error *err);

/* Builds the page and writes it to path atomically (a new temporary file beside it, then rename), so a
 * failure never leaves a partial file under path. Returns the statuses of
 * hs_html_encode, or HS_E_IO (with the path and reason) when the file cannot be
 * written, or HS_E_ARG for a NULL path. */
hs_status hs_html_write(const char *path, const hs_html_input *in, hs_error *err);

/* ---- the patching page: headscope patch's index.html ---------------------------------- */

/* Builds the page of a patching report (patching.json, schema headscope.patching/1: the
 * effect heatmap, the head x position view with "positions", the paths list; docs/html.md
 * and docs/patching.md) in memory: the report is embedded as hs_html_encode embeds one.
 * Returns HS_OK and a malloc'd, NUL-terminated page in *out (caller frees) with its
 * length in *len; HS_E_ARG for a NULL argument, HS_E_FORMAT when patching_json is not a
 * JSON object whose "schema" begins "headscope.patching/", HS_E_NOMEM. */
hs_status hs_html_patching_encode(const char *patching_json, char **out, size_t *len,
                                  hs_error *err);

/* hs_html_patching_encode, written to path atomically as hs_html_write. */
hs_status hs_html_patching_write(const char *path, const char *patching_json, hs_error *err);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_HTML_H */
