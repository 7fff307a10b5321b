/* One head's attention map as a labelled heatmap with a colour bar. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/core.h"
#include "plot.h"

#define MAX_N 16384
#define MAX_CELL 48
#define TARGET_GRID 640  /* small maps get cells up to MAX_CELL so the grid is ~this */
#define LABEL_GLYPHS 14  /* longest label drawn before the ellipsis */
#define BAR_GAP 20
#define BAR_W 16
#define BAR_MIN_H 120
#define TITLE_GAP 14
#define AXIS_GAP 8

typedef struct token_labels {
    const char *const *labels; /* (n) or NULL */
} token_labels;

static const char *token_label(const void *ctx, int i, char *buf, size_t cap)
{
    const token_labels *t = ctx;
    if (t->labels)
        return t->labels[i] ? t->labels[i] : "";
    snprintf(buf, cap, "%d", i);
    return buf;
}

/* dst: (t_rows, t_cols) the mean of the cells of src: (rows, cols) under each pixel. */
static void resample_rect(const float *src, int rows, int cols, int t_rows, int t_cols,
                          float *dst)
{
    for (int y = 0; y < t_rows; y++) {
        int r0 = (int)((long)y * rows / t_rows), r1 = (int)((long)(y + 1) * rows / t_rows);
        r1 = r1 > r0 ? r1 : r0 + 1;
        for (int x = 0; x < t_cols; x++) {
            int c0 = (int)((long)x * cols / t_cols), c1 = (int)((long)(x + 1) * cols / t_cols);
            double s = 0;
            int cnt = 0;
            c1 = c1 > c0 ? c1 : c0 + 1;
            for (int r = r0; r < r1 && r < rows; r++)
                for (int c = c0; c < c1 && c < cols; c++, cnt++)
                    s += src[(size_t)r * (size_t)cols + (size_t)c];
            dst[(size_t)y * (size_t)t_cols + (size_t)x] = cnt ? (float)(s / cnt) : NAN;
        }
    }
}

/* The whole picture of a (rows, cols) map: hs_heatmap_render's square map is rows = cols with
 * one set of labels; a rectangular one (T5's cross-attention) has its own labels and axis
 * titles per axis. */
static hs_status render(const float *map, const hs_heatmap_axes *ax, const hs_heatmap_opts *opts,
                        hs_image *out, hs_layout *layout, hs_error *err)
{
    static const hs_heatmap_opts defaults = {0};
    float *small = NULL;
    hs_status st;
    int rows = ax->rows, cols = ax->cols, n = rows > cols ? rows : cols;
    if (!out)
        return hs_fail(err, HS_E_ARG, "heatmap: output image is NULL");
    out->w = out->h = 0;
    out->rgb = NULL;
    if (!map)
        return hs_fail(err, HS_E_ARG, "heatmap: map is NULL");
    if (rows < 1 || cols < 1 || n > MAX_N) {
        if (rows == cols)
            return hs_fail(err, HS_E_SHAPE, "heatmap: map has %d tokens, expected 1..%d", n,
                           MAX_N);
        return hs_fail(err, HS_E_SHAPE, "heatmap: map has %d x %d tokens, expected 1..%d each",
                       rows, cols, MAX_N);
    }
    if (!opts)
        opts = &defaults;
    if (!hs_colormap_name(opts->cmap))
        return hs_fail(err, HS_E_ARG, "heatmap: unknown colour map %d", (int)opts->cmap);
    if (opts->max_labels < 0)
        return hs_fail(err, HS_E_ARG, "heatmap: max_labels is %d, expected >= 0",
                       opts->max_labels);
    int max_size;
    if ((st = hs_viz_check_size(opts->max_size, 2000, "heatmap", &max_size, err)) != HS_OK)
        return st;
    int max_labels = opts->max_labels ? opts->max_labels : 64;

    /* colour scale, and whether there is anything to show as "nan" */
    size_t nn = (size_t)rows * (size_t)cols;
    float vmax = 1.0f;
    int any_nan = 0;
    float mx = -INFINITY;
    for (size_t i = 0; i < nn; i++) {
        if (!hs_viz_is_finite(map[i]))
            any_nan = 1;
        else if (map[i] > mx)
            mx = map[i];
    }
    if (opts->scale_to_max && mx > 0.0f)
        vmax = mx;

    /* grid geometry (by the longer side): integer cells while they fit, else area-averaged
       pixels */
    int budget = max_size * 4 / 5;
    int cell = 0, gw, gh;
    if (n <= budget) {
        cell = TARGET_GRID / n;
        if (cell > MAX_CELL)
            cell = MAX_CELL;
        /* when every token is to be labelled, a text line per cell: the picture grows with n
           rather than skipping labels */
        if (cell < HS_FONT_H + 2 && n <= max_labels && n * (HS_FONT_H + 2) <= budget)
            cell = HS_FONT_H + 2;
        if (cell < 1)
            cell = 1;
        gw = cols * cell;
        gh = rows * cell;
    } else {
        /* the longer side gets the budget, the shorter its share, at least a pixel a token */
        gw = cols == n ? budget : (int)((long)budget * cols / n);
        gh = rows == n ? budget : (int)((long)budget * rows / n);
        gw = gw < cols && cols <= budget ? cols : gw;
        gh = gh < rows && rows <= budget ? rows : gh;
    }
    double cellr = (double)gh / rows, cellc = (double)gw / cols;
    int ls = (cellr < cellc ? cellr : cellc) >= 22.0 ? 2 : 1;
    int stride_r = hs_viz_label_stride(rows, cellr, ls, max_labels);
    int stride_c = hs_viz_label_stride(cols, cellc, ls, max_labels);
    int lab_max = ((LABEL_GLYPHS - 1) * HS_FONT_ADV + HS_FONT_W) * ls;
    token_labels tr = {ax->row_labels}, tc = {ax->col_labels};
    int lab_wr = hs_viz_labels_extent(token_label, &tr, rows, stride_r, ls, HS_TEXT_MARKS, lab_max);
    int lab_wc = hs_viz_labels_extent(token_label, &tc, cols, stride_c, ls, HS_TEXT_MARKS, lab_max);

    /* horizontal: margin, "query", labels, ticks, grid, bar, bar labels, margin */
    const int M = HS_VIZ_MARGIN;
    int axis_w = HS_FONT_H * ls; /* rotated axis title */
    int lead = HS_VIZ_TICK + HS_VIZ_TICK_GAP + 1;
    int gx = M + axis_w + AXIS_GAP + lab_wr + lead;
    int bar_x = gx + gw + BAR_GAP;
    int bar_h = gh >= BAR_MIN_H ? gh : BAR_MIN_H;
    int bar_lab = hs_viz_colorbar_label_width(0.0f, vmax, ls, bar_h);
    int w = bar_x + BAR_W + 1 + bar_lab + M;
    int tw = hs_viz_title_width(opts->title, opts->subtitle, ls);
    if (M + tw + M > w)
        w = M + tw + M;

    /* vertical: margin, title band, grid, ticks, rotated labels, "key", margin */
    int th = hs_viz_title_height(opts->title, opts->subtitle, ls);
    int gy = M + (th ? th + TITLE_GAP : 0);
    int below = lead + lab_wc + AXIS_GAP + HS_FONT_H * ls;
    int h = gy + gh + below + M;
    int nan_y = gy + bar_h + 14;
    if (any_nan && nan_y + 10 + M > h)
        h = nan_y + 10 + M;
    if (gy + bar_h + 8 + M > h)
        h = gy + bar_h + 8 + M;
    if (w > HS_PNG_MAX_SIDE || h > HS_PNG_MAX_SIDE)
        return hs_fail(err, HS_E_ARG, "heatmap: image would be %dx%d, over %d", w, h,
                       HS_PNG_MAX_SIDE);

    if (hs_cv_new(out, w, h, hs_viz_bg) != 0)
        return hs_fail(err, HS_E_NOMEM, "heatmap: out of memory for a %dx%d image", w, h);

    /* title: over the grid when it fits there, else from the margin */
    int title_x = gx + tw + M <= w ? gx : M;
    hs_viz_title_draw(out, title_x, M, opts->title, opts->subtitle, ls);

    /* cells */
    if (cell > 0) {
        for (int q = 0; q < rows; q++) {
            for (int k = 0; k < cols; k++) {
                uint8_t rgb[3];
                hs_viz_value_rgb(opts->cmap, map[(size_t)q * cols + k], 0.0f, vmax, rgb);
                hs_cv_rect(out, gx + k * cell, gy + q * cell, cell, cell, rgb);
            }
        }
    } else {
        small = malloc((size_t)gw * (size_t)gh * sizeof *small);
        if (!small) {
            st = hs_fail(err, HS_E_NOMEM, "heatmap: out of memory downsampling %d tokens", n);
            goto fail;
        }
        if (rows == cols)
            hs_viz_resample(map, n, gw, small);
        else
            resample_rect(map, rows, cols, gh, gw, small);
        for (int y = 0; y < gh; y++) {
            for (int x = 0; x < gw; x++) {
                uint8_t rgb[3];
                hs_viz_value_rgb(opts->cmap, small[(size_t)y * gw + x], 0.0f, vmax, rgb);
                hs_cv_pixel(out, gx + x, gy + y, rgb);
            }
        }
        free(small);
        small = NULL;
    }
    hs_rect grid = {gx, gy, gw, gh};
    hs_cv_frame(out, gx - 1, gy - 1, gw + 2, gh + 2, hs_viz_frame);

    /* axis labels and titles */
    hs_viz_labels_left(out, grid, token_label, &tr, rows, stride_r, ls, HS_TEXT_MARKS, lab_max);
    hs_viz_labels_bottom(out, grid, token_label, &tc, cols, stride_c, ls, HS_TEXT_MARKS, lab_max);
    int qw = hs_text_width(ax->row_title, ls, 0);
    hs_cv_text(out, M, gy + (gh - qw) / 2, ax->row_title, ls, hs_viz_muted, HS_TEXT_ROT90, 0);
    int kw = hs_text_width(ax->col_title, ls, 0);
    hs_cv_text(out, gx + (gw - kw) / 2, gy + gh + below - HS_FONT_H * ls, ax->col_title, ls,
               hs_viz_muted, 0, 0);

    /* colour bar, and a swatch for NaN cells when there are any */
    hs_rect bar = {bar_x, gy, BAR_W, bar_h};
    hs_viz_colorbar(out, bar, opts->cmap, 0.0f, vmax, ls);
    if (any_nan) {
        uint8_t grey[3];
        hs_colormap_rgb(opts->cmap, NAN, grey);
        hs_cv_rect(out, bar_x, nan_y, BAR_W, 10, grey);
        hs_cv_frame(out, bar_x - 1, nan_y - 1, BAR_W + 2, 12, hs_viz_frame);
        hs_cv_text(out, bar_x + BAR_W + 1 + HS_VIZ_TICK + HS_VIZ_TICK_GAP, nan_y, "nan", 1,
                   hs_viz_ink, 0, 0);
    }

    if (layout) {
        hs_layout l = {0};
        l.grid = grid;
        l.rows = rows;
        l.cols = cols;
        l.cell_w = l.cell_h = cell;
        l.title.x = title_x;
        l.title.y = M;
        l.title.w = th ? tw : 0;
        l.title.h = th;
        l.colorbar = bar;
        l.vmin = 0.0f;
        l.vmax = vmax;
        l.label_stride = stride_r;
        *layout = l;
    }
    return HS_OK;

fail:
    free(small);
    hs_image_free(out);
    return st;
}

hs_status hs_heatmap_render(const float *map, int n, const char *const *labels,
                            const hs_heatmap_opts *opts, hs_image *out, hs_layout *layout,
                            hs_error *err)
{
    hs_heatmap_axes ax = {n, n, labels, labels, "query", "key"};
    return render(map, &ax, opts, out, layout, err);
}

hs_status hs_heatmap_rect_render(const float *map, const hs_heatmap_axes *axes,
                                 const hs_heatmap_opts *opts, hs_image *out, hs_layout *layout,
                                 hs_error *err)
{
    if (!axes)
        return hs_fail(err, HS_E_ARG, "heatmap: axes is NULL");
    hs_heatmap_axes ax = *axes;
    ax.row_title = ax.row_title ? ax.row_title : "query";
    ax.col_title = ax.col_title ? ax.col_title : "key";
    return render(map, &ax, opts, out, layout, err);
}

hs_status hs_heatmap_rect_write(const char *path, const float *map, const hs_heatmap_axes *axes,
                                const hs_heatmap_opts *opts, hs_error *err)
{
    hs_image img = {0};
    hs_status st = hs_heatmap_rect_render(map, axes, opts, &img, NULL, err);
    if (st != HS_OK)
        return st;
    st = hs_png_write(path, img.rgb, img.w, img.h, err);
    hs_image_free(&img);
    return st;
}

hs_status hs_heatmap_write(const char *path, const float *map, int n,
                           const char *const *labels, const hs_heatmap_opts *opts,
                           hs_error *err)
{
    hs_image img = {0};
    hs_status st = hs_heatmap_render(map, n, labels, opts, &img, NULL, err);
    if (st != HS_OK)
        return st;
    st = hs_png_write(path, img.rgb, img.w, img.h, err);
    hs_image_free(&img);
    return st;
}
