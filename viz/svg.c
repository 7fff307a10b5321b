/* One head's attention map, and a head-similarity matrix, as SVG: the cells as an embedded PNG
 * (one pixel per cell, drawn unsmoothed), every label, title and tick as SVG text, so the
 * picture scales and its text can be searched and copied. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "plot.h"

#define SVG_MAX_N 4096
#define CELL 12.0     /* user units per token */
#define FONT 10.0     /* label font size */
#define LABEL_CHARS 14

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static void putf(sbuf *b, const char *fmt, ...) HS_PRINTF(2, 3);
static void putf(sbuf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* s as XML text: markup characters escaped; other control characters as U+FFFD. For a
 * token label (cut): space, newline and tab drawn as the marks the PNG pictures use, and cut
 * after LABEL_CHARS characters with an ellipsis. */
static void put_text(sbuf *b, const char *s, int cut)
{
    int marks = cut; /* token labels: marks for white space; titles: plain spaces */
    int chars = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p & 0xC0) != 0x80 && cut && ++chars > LABEL_CHARS) {
            put(b, "\xE2\x80\xA6", 3);
            return;
        }
        switch (*p) {
        case '&': puts_(b, "&amp;"); break;
        case '<': puts_(b, "&lt;"); break;
        case '>': puts_(b, "&gt;"); break;
        case '"': puts_(b, "&quot;"); break;
        case ' ':
            if (marks)
                put(b, "\xE2\x90\xA3", 3); /* U+2423 open box */
            else
                put(b, " ", 1);
            break;
        case '\n': put(b, "\xE2\x86\xB5", 3); break; /* U+21B5 */
        case '\t': put(b, "\xE2\x86\x92", 3); break; /* U+2192 */
        default:
            if (*p < 0x20 || *p == 0x7F)
                put(b, "\xEF\xBF\xBD", 3);
            else
                put(b, (const char *)p, 1);
        }
    }
}

static void put_base64(sbuf *b, const uint8_t *d, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char q[4];
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0) |
                     (i + 2 < n ? d[i + 2] : 0);
        q[0] = tab[v >> 18 & 63];
        q[1] = tab[v >> 12 & 63];
        q[2] = i + 1 < n ? tab[v >> 6 & 63] : '=';
        q[3] = i + 2 < n ? tab[v & 63] : '=';
        put(b, q, 4);
    }
}

static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; s && *s; s++)
        n += (*s & 0xC0) != 0x80;
    return n;
}

/* What a square matrix picture shows: values (n, n) in display order, coloured from vmin to
 * vmax, labels (n) or NULL (numbers), every stride-th labelled, the two axes' names, and
 * group (n) or NULL: a rule between neighbouring rows/columns of different groups and a frame
 * around each run of two or more on the diagonal. */
typedef struct matrix_svg {
    const float *values;
    int n, stride;
    const char *const *labels;
    const char *title, *subtitle, *rows, *cols;
    hs_cmap cmap;
    float vmin, vmax;
    const int *group;
} matrix_svg;

static hs_status matrix_svg_text(const matrix_svg *v, char **out, size_t *out_len, hs_error *err)
{
    int n = v->n;
    size_t nn = (size_t)n * (size_t)n;
    /* the cells as an n x n PNG */
    uint8_t *rgb = malloc(nn * 3), *png = NULL;
    size_t png_len = 0;
    if (!rgb)
        return hs_fail(err, HS_E_NOMEM, "svg: out of memory for %d rows", n);
    for (size_t i = 0; i < nn; i++)
        hs_viz_value_rgb(v->cmap, v->values[i], v->vmin, v->vmax, rgb + 3 * i);
    hs_status st = hs_png_encode(rgb, n, n, &png, &png_len, err);
    free(rgb);
    if (st)
        return st;

    double g = n * CELL, lab = LABEL_CHARS * FONT * 0.62 + 8, M = 24;
    double gx = M + FONT + 8 + lab, th = (v->title ? 24 : 0) + (v->subtitle ? 16 : 0);
    double gy = M + th + (th > 0 ? 10 : 0), bar_x = gx + g + 20, bar_h = g < 120 ? 120 : g;
    double w = bar_x + 16 + 60 + M, h = gy + (g > bar_h ? g : bar_h) + 8 + lab + FONT + 8 + M;
    double tw = M + 16 * 0.62 * utf8_chars(v->title) + M; /* the title at 16 units */
    if (tw > w)
        w = tw;
    sbuf b = {0};
    putf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
             "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans "
             "Mono, monospace\" font-size=\"%.0f\">\n<rect width=\"100%%\" height=\"100%%\" "
             "fill=\"#fff\"/>\n", w, h, w, h, FONT);
    if (v->title) {
        puts_(&b, "<title>");
        put_text(&b, v->title, 0);
        puts_(&b, "</title>\n");
        putf(&b, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"16\" font-weight=\"bold\">", M, M + 14);
        put_text(&b, v->title, 0);
        puts_(&b, "</text>\n");
    }
    if (v->subtitle) {
        putf(&b, "<text x=\"%.0f\" y=\"%.0f\" fill=\"#666\">", M, M + (v->title ? 34 : 12));
        put_text(&b, v->subtitle, 0);
        puts_(&b, "</text>\n");
    }
    putf(&b, "<image x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" preserveAspectRatio="
             "\"none\" style=\"image-rendering:pixelated\" href=\"data:image/png;base64,",
         gx, gy, g, g);
    put_base64(&b, png, png_len);
    free(png);
    putf(&b, "\"/>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
             "stroke=\"#999\"/>\n", gx - 0.5, gy - 0.5, g + 1, g + 1);
    for (int i = 0, run = 0; v->group && i < n; i++) { /* groups: rules and frames */
        if (i > 0 && v->group[i] != v->group[i - 1])
            putf(&b, "<path d=\"M%.1f %.1fV%.1fM%.1f %.1fH%.1f\" stroke=\"#333\" "
                     "stroke-width=\"1.5\"/>\n", gx + i * CELL, gy, gy + g, gx, gy + i * CELL,
                 gx + g);
        if (i + 1 == n || v->group[i + 1] != v->group[i]) {
            if (i - run >= 1)
                putf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                         "fill=\"none\" stroke=\"#000\" stroke-width=\"2\"/>\n", gx + run * CELL,
                     gy + run * CELL, (i + 1 - run) * CELL, (i + 1 - run) * CELL);
            run = i + 1;
        }
    }
    puts_(&b, "<g xml:space=\"preserve\">\n");
    char num[32];
    for (int i = 0; i < n; i += v->stride) {
        const char *t = v->labels ? (v->labels[i] ? v->labels[i] : "")
                                  : (snprintf(num, sizeof num, "%d", i), num);
        double c = (i + 0.5) * CELL;
        putf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" dominant-baseline=\"central\">",
             gx - 4, gy + c);
        put_text(&b, t, 1);
        putf(&b, "</text><text transform=\"translate(%.1f %.1f) rotate(-90)\" text-anchor=\"end\" "
                 "dominant-baseline=\"central\">", gx + c, gy + g + 4);
        put_text(&b, t, 1);
        puts_(&b, "</text>\n");
    }
    puts_(&b, "</g>\n");
    putf(&b, "<text transform=\"translate(%.0f %.1f) rotate(-90)\" text-anchor=\"middle\" "
             "fill=\"#666\">%s</text>\n<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" "
             "fill=\"#666\">%s</text>\n", M + FONT, gy + g / 2, v->rows, gx + g / 2, h - M, v->cols);
    /* colour bar: a gradient through 17 samples of the map, ticks as in the PNG */
    puts_(&b, "<defs><linearGradient id=\"cbar\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">");
    for (int k = 0; k <= 16; k++) {
        uint8_t c[3];
        hs_colormap_rgb(v->cmap, (float)k / 16.0f, c);
        putf(&b, "<stop offset=\"%.4f\" stop-color=\"#%02x%02x%02x\"/>", k / 16.0, c[0], c[1], c[2]);
    }
    putf(&b, "</linearGradient></defs>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"%.1f\" "
             "fill=\"url(#cbar)\" stroke=\"#999\"/>\n", bar_x, gy, bar_h);
    double t[16];
    int nt = hs_viz_ticks(v->vmin, v->vmax, 5, t, 16);
    double step = nt > 1 ? t[1] - t[0] : 1.0;
    for (int k = 0; k < nt; k++) {
        double y = gy + (1.0 - (t[k] - v->vmin) / (v->vmax - v->vmin)) * bar_h;
        hs_viz_tick_label(t[k], step, num, sizeof num);
        putf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\"/><text "
                 "x=\"%.1f\" y=\"%.1f\" dominant-baseline=\"central\">%s</text>\n",
             bar_x + 16, y, bar_x + 20, y, bar_x + 23, y, num);
    }
    puts_(&b, "</svg>\n");
    if (b.oom) {
        free(b.p);
        return hs_fail(err, HS_E_NOMEM, "svg: out of memory");
    }
    *out = b.p;
    if (out_len)
        *out_len = b.len;
    return HS_OK;
}

static hs_status svg_write(const char *path, char *s, size_t len, hs_status st, hs_error *err)
{
    if (!st)
        st = hs_file_write_atomic(path, s, len, err);
    free(s);
    return st;
}

hs_status hs_heatmap_svg(const float *map, int n, const char *const *labels,
                         const hs_heatmap_opts *opts, char **out, size_t *out_len, hs_error *err)
{
    static const hs_heatmap_opts defaults = {0};
    if (!out)
        return hs_fail(err, HS_E_ARG, "heatmap svg: output is NULL");
    *out = NULL;
    if (!map)
        return hs_fail(err, HS_E_ARG, "heatmap svg: map is NULL");
    if (n < 1 || n > SVG_MAX_N)
        return hs_fail(err, HS_E_SHAPE, "heatmap svg: map has %d tokens, expected 1..%d", n,
                       SVG_MAX_N);
    if (!opts)
        opts = &defaults;
    if (!hs_colormap_name(opts->cmap) || opts->max_labels < 0)
        return hs_fail(err, HS_E_ARG, "heatmap svg: bad options");
    size_t nn = (size_t)n * (size_t)n;
    float vmax = 1.0f, mx = 0.0f;
    for (size_t i = 0; i < nn; i++)
        if (hs_viz_is_finite(map[i]) && map[i] > mx)
            mx = map[i];
    if (opts->scale_to_max && mx > 0.0f)
        vmax = mx;
    int max_labels = opts->max_labels ? opts->max_labels : 64;
    matrix_svg v = {map, n, n <= max_labels ? 1 : (n + max_labels - 1) / max_labels, labels,
                    opts->title, opts->subtitle, "query", "key", opts->cmap, 0.0f, vmax, NULL};
    return matrix_svg_text(&v, out, out_len, err);
}

hs_status hs_similarity_svg(const float *sim, int m, const int *order, const int *clusters,
                            const char *const *labels, const hs_similarity_opts *opts, char **out,
                            size_t *out_len, hs_error *err)
{
    static const hs_similarity_opts defaults = {0};
    if (!out)
        return hs_fail(err, HS_E_ARG, "similarity svg: output is NULL");
    *out = NULL;
    if (!sim)
        return hs_fail(err, HS_E_ARG, "similarity svg: matrix is NULL");
    if (m < 1 || m > SVG_MAX_N)
        return hs_fail(err, HS_E_SHAPE, "similarity svg: %d items, expected 1..%d", m, SVG_MAX_N);
    if (!opts)
        opts = &defaults;
    if (!(opts->divergence_max >= 0.0f))
        return hs_fail(err, HS_E_ARG, "similarity svg: divergence_max must be >= 0");
    size_t mm = (size_t)m * (size_t)m;
    float *vals = malloc(mm * sizeof *vals);
    int *pos = malloc((size_t)m * sizeof *pos), *grp = clusters ? malloc((size_t)m * sizeof *grp) : NULL;
    const char **lab = malloc((size_t)m * sizeof *lab);
    char (*num)[24] = labels ? NULL : malloc((size_t)m * sizeof *num);
    hs_status st = HS_OK;
    if (!vals || !pos || (clusters && !grp) || !lab || (!labels && !num)) {
        st = hs_fail(err, HS_E_NOMEM, "similarity svg: out of memory for %d items", m);
        goto done;
    }
    for (int p = 0; p < m; p++)
        pos[p] = -1;
    for (int p = 0; p < m; p++) { /* display position p shows item order[p] */
        int it = order ? order[p] : p;
        if (it < 0 || it >= m || pos[it] >= 0) {
            st = hs_fail(err, HS_E_ARG, "similarity svg: order is not a permutation of 0..%d", m - 1);
            goto done;
        }
        pos[it] = p;
    }
    for (int p = 0; p < m; p++) {
        int it = order ? order[p] : p;
        for (int q = 0; q < m; q++)
            vals[(size_t)p * m + q] = sim[(size_t)it * m + (size_t)(order ? order[q] : q)];
        if (grp)
            grp[p] = clusters[it];
        if (labels) {
            lab[p] = labels[it];
        } else {
            if (opts->n_head > 0)
                snprintf(num[p], sizeof num[p], "%d.%d", it / opts->n_head, it % opts->n_head);
            else
                snprintf(num[p], sizeof num[p], "%d", it);
            lab[p] = num[p];
        }
    }
    int div = opts->divergence_max > 0.0f;
    matrix_svg v = {vals, m, 1, lab, opts->title, NULL, "head", "head",
                    div ? HS_CMAP_VIRIDIS : HS_CMAP_DIVERGING, div ? 0.0f : -1.0f,
                    div ? opts->divergence_max : 1.0f, grp};
    st = matrix_svg_text(&v, out, out_len, err);
done:
    free(vals);
    free(pos);
    free(grp);
    free(lab);
    free(num);
    return st;
}

hs_status hs_similarity_svg_write(const char *path, const float *sim, int m, const int *order,
                                  const int *clusters, const char *const *labels,
                                  const hs_similarity_opts *opts, hs_error *err)
{
    char *s = NULL;
    size_t len = 0;
    hs_status st = hs_similarity_svg(sim, m, order, clusters, labels, opts, &s, &len, err);
    return svg_write(path, s, len, st, err);
}

hs_status hs_heatmap_svg_write(const char *path, const float *map, int n,
                               const char *const *labels, const hs_heatmap_opts *opts,
                               hs_error *err)
{
    char *s = NULL;
    size_t len = 0;
    hs_status st = hs_heatmap_svg(map, n, labels, opts, &s, &len, err);
    return svg_write(path, s, len, st, err);
}
