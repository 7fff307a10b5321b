/* Per-head values (e.g. ablation loss increase) as a coloured, annotated grid. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "plot.h"
#include "viz_internal.h"

#define MAX_LH 256
#define TITLE_GAP 14
#define LABEL_GAP 6
#define BAR_GAP 20
#define BAR_W 16
#define BAR_MIN_H 120

/* Prints v with dec decimals; "nan" for non-finite, and no "-0.00". */
static void format_value(float v, int dec, char *buf, size_t cap)
{
    if (!hs_viz_is_finite(v)) {
        snprintf(buf, cap, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
        return;
    }
    snprintf(buf, cap, "%.*f", dec, (double)v);
    if (buf[0] == '-' && strspn(buf + 1, "0.") == strlen(buf + 1))
        memmove(buf, buf + 1, strlen(buf));
}


const char *hs_viz_unit_label(const void *ctx, int i, char *buf, size_t cap)
{
    int units = *(const int *)ctx;
    if (units > 0)
        snprintf(buf, cap, "%d.%d", i / units, i % units);
    else
        snprintf(buf, cap, "%d", i);
    return buf;
}

const char *hs_viz_index_label(const void *ctx, int i, char *buf, size_t cap)
{
    (void)ctx;
    snprintf(buf, cap, "%d", i);
    return buf;
}

/* The n_layer x n_head cells, cell (l, h) cw x ch pixels at (x0 + h cw, y0 + l ch) (grid:
 * x0, y0, cw, ch), each coloured by its value on cmap over [vmin, vmax] and, with s > 0,
 * the value printed with dec decimals at scale s. */
static void draw_cells(hs_image *out, const float *values, int n_layer, int n_head,
                       hs_rect grid, hs_cmap cmap, float vmin, float vmax, int s, int dec)
{
    int cw = grid.w, ch = grid.h;
    char buf[64];
    for (int l = 0; l < n_layer; l++) {
        for (int hd = 0; hd < n_head; hd++) {
            float v = values[(size_t)l * n_head + hd];
            uint8_t rgb[3];
            hs_viz_value_rgb(cmap, v, vmin, vmax, rgb);
            int x = grid.x + hd * cw, y = grid.y + l * ch;
            /* a 1-px white rule between cells when they are big enough */
            int rule = cw >= 6 && ch >= 6;
            hs_cv_rect(out, x, y, cw - rule, ch - rule, rgb);
            if (!s)
                continue;
            /* light text on dark cells, dark text on light ones */
            float lum = 0.299f * rgb[0] + 0.587f * rgb[1] + 0.114f * rgb[2];
            const uint8_t *ink = lum < 140.0f ? hs_viz_bg : hs_viz_ink;
            format_value(v, dec, buf, sizeof buf);
            int tw_ = hs_text_width(buf, s, 0);
            hs_cv_text(out, x + (cw - rule - tw_) / 2, y + (ch - rule - 7 * s) / 2, buf, s, ink, 0, 0);
        }
    }
}

/* The grid of hs_viz_importance_render_marked, its rows and columns named by axes (NULL:
 * "L3" and "H5", local layers marked by layer_window). */
static hs_status render(const float *values, int n_layer, int n_head,
                        const hs_importance_opts *opts, const int *layer_window,
                        const hs_viz_axes *axes, hs_image *out, hs_layout *layout,
                        hs_error *err)
{
    static const hs_importance_opts defaults = {0};
    hs_status st;
    if (!out)
        return hs_fail(err, HS_E_ARG, "importance: output image is NULL");
    out->w = out->h = 0;
    out->rgb = NULL;
    if (!values)
        return hs_fail(err, HS_E_ARG, "importance: values is NULL");
    if (n_layer < 1 || n_layer > MAX_LH || n_head < 1 || n_head > MAX_LH)
        return hs_fail(err, HS_E_SHAPE, "importance: %d layers x %d heads, expected 1..%d each",
                       n_layer, n_head, MAX_LH);
    if (!opts)
        opts = &defaults;
    if (!hs_colormap_name(opts->cmap))
        return hs_fail(err, HS_E_ARG, "importance: unknown colour map %d", (int)opts->cmap);
    int max_size;
    if ((st = hs_viz_check_size(opts->max_size, 2000, "importance", &max_size, err)) != HS_OK)
        return st;
    int grp = opts->heads_per_group;
    if (grp < 0 || (grp > 1 && n_head % grp))
        return hs_fail(err, HS_E_ARG, "importance: %d heads per KV group do not divide %d heads",
                       grp, n_head);
    int dec = opts->decimals == 0 ? 2 : opts->decimals < 0 ? 0 : opts->decimals;
    if (dec > 6)
        dec = 6;

    /* colour scale: sequential 0..max, or symmetric diverging around 0 */
    size_t count = (size_t)n_layer * (size_t)n_head;
    float mx = 0.0f, amax = 0.0f;
    int negative = opts->cmap == HS_CMAP_DIVERGING; /* asked for: centred on 0 always */
    for (size_t i = 0; i < count; i++) {
        float v = values[i];
        if (!hs_viz_is_finite(v))
            continue;
        if (v < 0.0f)
            negative = 1;
        if (v > mx)
            mx = v;
        if (fabsf(v) > amax)
            amax = fabsf(v);
    }
    if (amax == 0.0f)
        amax = 1.0f;
    hs_cmap cmap = negative ? HS_CMAP_DIVERGING : opts->cmap;
    float vmin = negative ? -amax : 0.0f;
    float vmax = negative ? amax : (mx > 0.0f ? mx : 1.0f);

    /* cell size from the widest printed value; drop to scale 1, then to no text */
    int text_w = 0;
    for (size_t i = 0; i < count; i++) {
        char buf[64];
        format_value(values[i], dec, buf, sizeof buf);
        int tw = hs_text_width(buf, 1, 0);
        if (tw > text_w)
            text_w = tw;
    }
    int budget = max_size * 4 / 5;
    int s = 0, cw = 0, ch = 0;
    for (int sc = 2; sc >= 1; sc--) {
        int w_ = text_w * sc + 10 * sc, h_ = HS_FONT_H * sc + 7 * sc;
        if (w_ < h_)
            w_ = h_;
        if (n_head * w_ <= budget && n_layer * h_ <= budget) {
            s = sc;
            cw = w_;
            ch = h_;
            break;
        }
    }
    if (!s) {
        int a = budget / n_head, b = budget / n_layer;
        cw = ch = a < b ? a : b;
        if (cw < 2)
            cw = ch = 2;
    }
    int ls = s ? s : 1;

    hs_viz_lh rowl = {'L', layer_window}, coll = {'H', NULL};
    hs_viz_label_fn rowf = axes ? axes->row : hs_viz_lh_label;
    hs_viz_label_fn colf = axes ? axes->col : hs_viz_lh_label;
    const void *rowc = axes ? axes->ctx : (const void *)&rowl;
    const void *colc = axes ? axes->ctx : (const void *)&coll;
    int row_stride = hs_viz_label_stride(n_layer, ch, ls, 0);
    char buf[64];
    int col_lab_w = axes ? hs_viz_labels_extent(colf, colc, n_head, 1, ls, 0, 0)
                         : hs_text_width(hs_viz_lh_label(&coll, n_head - 1, buf, sizeof buf), ls, 0);
    int col_stride = (col_lab_w + 6 + cw - 1) / cw;
    int row_lab_w = hs_viz_labels_extent(rowf, rowc, n_layer, row_stride, ls, 0, 0);

    const int M = HS_VIZ_MARGIN;
    int th = hs_viz_title_height(opts->title, opts->subtitle, ls);
    int gx = M + row_lab_w + LABEL_GAP;
    int band_y = M + (th ? th + TITLE_GAP : 0);
    int gy = band_y + hs_viz_kv_band(n_head, grp, ls) + HS_FONT_H * ls + LABEL_GAP;
    int gw = n_head * cw, gh = n_layer * ch;
    int bar_x = gx + gw + BAR_GAP;
    int bar_h = gh >= BAR_MIN_H ? gh : BAR_MIN_H;
    int w = bar_x + BAR_W + 1 + hs_viz_colorbar_label_width(vmin, vmax, ls, bar_h) + M;
    int tw = hs_viz_title_width(opts->title, opts->subtitle, ls);
    if (M + tw + M > w)
        w = M + tw + M;
    int lg = hs_viz_local_legend_height(layer_window, n_layer, ls);
    if (lg && gx + hs_viz_local_legend_width(ls) + M > w)
        w = gx + hs_viz_local_legend_width(ls) + M;
    int h = gy + (gh > bar_h ? gh : bar_h) + 8 + lg + M;
    if (w > HS_PNG_MAX_SIDE || h > HS_PNG_MAX_SIDE)
        return hs_fail(err, HS_E_ARG, "importance: image would be %dx%d, over %d", w, h,
                       HS_PNG_MAX_SIDE);

    if (hs_cv_new(out, w, h, hs_viz_bg) != 0)
        return hs_fail(err, HS_E_NOMEM, "importance: out of memory for a %dx%d image", w, h);
    hs_viz_title_draw(out, M, M, opts->title, opts->subtitle, ls);

    hs_rect grid = {gx, gy, cw, ch};
    draw_cells(out, values, n_layer, n_head, grid, cmap, vmin, vmax, s, dec);
    hs_cv_frame(out, gx - 1, gy - 1, gw + 2, gh + 2, hs_viz_frame);
    hs_viz_kv_groups(out, gx, cw, cw - (cw >= 6 && ch >= 6), n_head, grp, band_y, gy, gy + gh, ls);

    for (int l = 0; l < n_layer; l += row_stride) {
        const char *lab = rowf(rowc, l, buf, sizeof buf);
        int lw = hs_text_width(lab, ls, 0);
        hs_cv_text(out, gx - LABEL_GAP - lw, gy + l * ch + (ch - 7 * ls) / 2, lab, ls, hs_viz_ink,
                   0, 0);
    }
    for (int hd = 0; hd < n_head; hd += col_stride) {
        const char *lab = colf(colc, hd, buf, sizeof buf);
        int lw = hs_text_width(lab, ls, 0);
        hs_cv_text(out, gx + hd * cw + (cw - lw) / 2, gy - LABEL_GAP - 7 * ls, lab, ls,
                   hs_viz_ink, 0, 0);
    }

    hs_rect bar = {bar_x, gy, BAR_W, bar_h};
    hs_viz_colorbar(out, bar, cmap, vmin, vmax, ls);
    if (lg)
        hs_viz_local_legend_draw(out, gx, gy + (gh > bar_h ? gh : bar_h) + 8, ls);

    if (layout)
        *layout = (hs_layout){.grid = {gx, gy, gw, gh}, .rows = n_layer, .cols = n_head,
                              .cell_w = cw, .cell_h = ch, .title = {M, M, th ? tw : 0, th},
                              .colorbar = bar, .vmin = vmin, .vmax = vmax,
                              .label_stride = row_stride > col_stride ? row_stride : col_stride};
    return HS_OK;
}

hs_status hs_importance_render(const float *values, int n_layer, int n_head,
                               const hs_importance_opts *opts, hs_image *out,
                               hs_layout *layout, hs_error *err)
{
    return render(values, n_layer, n_head, opts, NULL, NULL, out, layout, err);
}

hs_status hs_viz_importance_render_marked(const float *values, int n_layer, int n_head,
                                          const hs_importance_opts *opts,
                                          const int *layer_window, hs_image *out,
                                          hs_layout *layout, hs_error *err)
{
    return render(values, n_layer, n_head, opts, layer_window, NULL, out, layout, err);
}

hs_status hs_viz_importance_render_axes(const float *values, int rows, int cols,
                                        const hs_importance_opts *opts, const hs_viz_axes *axes,
                                        hs_image *out, hs_layout *layout, hs_error *err)
{
    return render(values, rows, cols, opts, NULL, axes, out, layout, err);
}

/* The picture of render into path. */
static hs_status write_png(const char *path, const float *values, int n_layer, int n_head,
                           const hs_importance_opts *opts, const int *layer_window,
                           const hs_viz_axes *axes, hs_error *err)
{
    hs_image img = {0};
    hs_status st = render(values, n_layer, n_head, opts, layer_window, axes, &img, NULL, err);
    if (st != HS_OK)
        return st;
    st = hs_png_write(path, img.rgb, img.w, img.h, err);
    hs_image_free(&img);
    return st;
}

hs_status hs_importance_write(const char *path, const float *values, int n_layer, int n_head,
                              const hs_importance_opts *opts, hs_error *err)
{
    return write_png(path, values, n_layer, n_head, opts, NULL, NULL, err);
}

hs_status hs_viz_importance_write_marked(const char *path, const float *values, int n_layer,
                                         int n_head, const hs_importance_opts *opts,
                                         const int *layer_window, hs_error *err)
{
    return write_png(path, values, n_layer, n_head, opts, layer_window, NULL, err);
}

hs_status hs_viz_importance_write_axes(const char *path, const float *values, int rows,
                                       int cols, const hs_importance_opts *opts,
                                       const hs_viz_axes *axes, hs_error *err)
{
    return write_png(path, values, rows, cols, opts, NULL, axes, err);
}
