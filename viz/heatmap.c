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

/* Where everything of one heatmap goes: the grid (cell pixels a token, 0 when
 * area-averaged; gw x gh at (gx, gy)), the labels (scale ls, every stride_r-th row and
 * stride_c-th column, lab_max wide at most), the colour bar at bar_x (bar_h high), the band
 * below the grid, the NaN swatch at nan_y, the title (th high, tw wide) and the image's
 * w x h. */
typedef struct heat_geom {
    int cell, gw, gh, ls, stride_r, stride_c, lab_max;
    int gx, gy, bar_x, bar_h, below, nan_y, th, tw, w, h;
} heat_geom;

/* render's stages, defined below it in the order it runs them */
static hs_status heat_check(int rows, int cols, int n, const hs_heatmap_opts *opts,
                            int *max_size, hs_error *err);
static float heat_vmax(const float *map, size_t nn, int scale_to_max, int *any_nan);
static void heat_grid(heat_geom *g, int rows, int cols, int n, int max_size, int max_labels);
static void heat_place(heat_geom *g, const hs_heatmap_axes *ax, const token_labels *tr,
                       const token_labels *tc, const hs_heatmap_opts *opts, int max_labels,
                       float vmax, int any_nan);
static hs_status heat_cells(hs_image *out, const heat_geom *g, const float *map, int rows,
                            int cols, int n, hs_cmap cmap, float vmax, hs_error *err);
static void heat_axes(hs_image *out, const heat_geom *g, const hs_heatmap_axes *ax,
                      const token_labels *tr, const token_labels *tc, hs_cmap cmap, float vmax,
                      int any_nan);

/* The whole picture of a (rows, cols) map: hs_heatmap_render's square map is rows = cols with
 * one set of labels; a rectangular one (T5's cross-attention) has its own labels and axis
 * titles per axis. */
static hs_status render(const float *map, const hs_heatmap_axes *ax, const hs_heatmap_opts *opts,
                        hs_image *out, hs_layout *layout, hs_error *err)
{
    static const hs_heatmap_opts defaults = {0};
    hs_status st;
    int rows = ax->rows, cols = ax->cols, n = rows > cols ? rows : cols;
    if (!out)
        return hs_fail(err, HS_E_ARG, "heatmap: output image is NULL");
    out->w = out->h = 0;
    out->rgb = NULL;
    if (!map)
        return hs_fail(err, HS_E_ARG, "heatmap: map is NULL");
    if (!opts)
        opts = &defaults;
    int max_size;
    if ((st = heat_check(rows, cols, n, opts, &max_size, err)) != HS_OK)
        return st;
    int max_labels = opts->max_labels ? opts->max_labels : 64;
    int any_nan;
    float vmax = heat_vmax(map, (size_t)rows * (size_t)cols, opts->scale_to_max, &any_nan);
    heat_geom g;
    token_labels tr = {ax->row_labels}, tc = {ax->col_labels};
    heat_grid(&g, rows, cols, n, max_size, max_labels);
    heat_place(&g, ax, &tr, &tc, opts, max_labels, vmax, any_nan);
    const int M = HS_VIZ_MARGIN;
    if (g.w > HS_PNG_MAX_SIDE || g.h > HS_PNG_MAX_SIDE)
        return hs_fail(err, HS_E_ARG, "heatmap: image would be %dx%d, over %d", g.w, g.h,
                       HS_PNG_MAX_SIDE);

    if (hs_cv_new(out, g.w, g.h, hs_viz_bg) != 0)
        return hs_fail(err, HS_E_NOMEM, "heatmap: out of memory for a %dx%d image", g.w, g.h);

    /* title: over the grid when it fits there, else from the margin */
    int title_x = g.gx + g.tw + M <= g.w ? g.gx : M;
    hs_viz_title_draw(out, title_x, M, opts->title, opts->subtitle, g.ls);
    if ((st = heat_cells(out, &g, map, rows, cols, n, opts->cmap, vmax, err)) != HS_OK) {
        hs_image_free(out);
        return st;
    }
    heat_axes(out, &g, ax, &tr, &tc, opts->cmap, vmax, any_nan);

    if (layout)
        *layout = (hs_layout){.grid = {g.gx, g.gy, g.gw, g.gh}, .rows = rows, .cols = cols,
                              .cell_w = g.cell, .cell_h = g.cell,
                              .title = {title_x, M, g.th ? g.tw : 0, g.th},
                              .colorbar = {g.bar_x, g.gy, BAR_W, g.bar_h}, .vmin = 0.0f,
                              .vmax = vmax, .label_stride = g.stride_r};
    return HS_OK;
}

/* The arguments' checks for a (rows, cols) map, n the longer side: opts not NULL;
 * *max_size the picture's largest side. */
static hs_status heat_check(int rows, int cols, int n, const hs_heatmap_opts *opts,
                            int *max_size, hs_error *err)
{
    if (rows < 1 || cols < 1 || n > MAX_N) {
        if (rows == cols)
            return hs_fail(err, HS_E_SHAPE, "heatmap: map has %d tokens, expected 1..%d", n,
                           MAX_N);
        return hs_fail(err, HS_E_SHAPE, "heatmap: map has %d x %d tokens, expected 1..%d each",
                       rows, cols, MAX_N);
    }
    if (!hs_colormap_name(opts->cmap))
        return hs_fail(err, HS_E_ARG, "heatmap: unknown colour map %d", (int)opts->cmap);
    if (opts->max_labels < 0)
        return hs_fail(err, HS_E_ARG, "heatmap: max_labels is %d, expected >= 0",
                       opts->max_labels);
    return hs_viz_check_size(opts->max_size, 2000, "heatmap", max_size, err);
}

/* The top of the colour scale for map: (nn) cells (1, or the largest finite cell with
 * scale_to_max when it is above 0); *any_nan: whether a cell is to be shown as "nan". */
static float heat_vmax(const float *map, size_t nn, int scale_to_max, int *any_nan)
{
    float mx = -INFINITY;
    *any_nan = 0;
    for (size_t i = 0; i < nn; i++) {
        if (!hs_viz_is_finite(map[i]))
            *any_nan = 1;
        else if (map[i] > mx)
            mx = map[i];
    }
    return scale_to_max && mx > 0.0f ? mx : 1.0f;
}

/* The grid's size (g->cell, gw, gh), by the longer side n: integer cells while they fit,
 * else area-averaged pixels. */
static void heat_grid(heat_geom *g, int rows, int cols, int n, int max_size, int max_labels)
{
    int budget = max_size * 4 / 5;
    g->cell = 0;
    if (n <= budget) {
        int cell = TARGET_GRID / n;
        if (cell > MAX_CELL)
            cell = MAX_CELL;
        /* when every token is to be labelled, a text line per cell: the picture grows with n
           rather than skipping labels */
        if (cell < HS_FONT_H + 2 && n <= max_labels && n * (HS_FONT_H + 2) <= budget)
            cell = HS_FONT_H + 2;
        if (cell < 1)
            cell = 1;
        g->cell = cell;
        g->gw = cols * cell;
        g->gh = rows * cell;
    } else {
        /* the longer side gets the budget, the shorter its share, at least a pixel a token */
        int gw = cols == n ? budget : (int)((long)budget * cols / n);
        int gh = rows == n ? budget : (int)((long)budget * rows / n);
        g->gw = gw < cols && cols <= budget ? cols : gw;
        g->gh = gh < rows && rows <= budget ? rows : gh;
    }
}

/* The labels, the grid's place, the colour bar and the image's size (g->ls .. g->h) around
 * the grid of heat_grid. */
static void heat_place(heat_geom *g, const hs_heatmap_axes *ax, const token_labels *tr,
                       const token_labels *tc, const hs_heatmap_opts *opts, int max_labels,
                       float vmax, int any_nan)
{
    int rows = ax->rows, cols = ax->cols;
    double cellr = (double)g->gh / rows, cellc = (double)g->gw / cols;
    int ls = (cellr < cellc ? cellr : cellc) >= 22.0 ? 2 : 1;
    g->ls = ls;
    g->stride_r = hs_viz_label_stride(rows, cellr, ls, max_labels);
    g->stride_c = hs_viz_label_stride(cols, cellc, ls, max_labels);
    g->lab_max = ((LABEL_GLYPHS - 1) * HS_FONT_ADV + HS_FONT_W) * ls;
    int lab_wr = hs_viz_labels_extent(token_label, tr, rows, g->stride_r, ls, HS_TEXT_MARKS,
                                      g->lab_max);
    int lab_wc = hs_viz_labels_extent(token_label, tc, cols, g->stride_c, ls, HS_TEXT_MARKS,
                                      g->lab_max);

    /* horizontal: margin, "query", labels, ticks, grid, bar, bar labels, margin */
    const int M = HS_VIZ_MARGIN;
    int axis_w = HS_FONT_H * ls; /* rotated axis title */
    int lead = HS_VIZ_TICK + HS_VIZ_TICK_GAP + 1;
    g->gx = M + axis_w + AXIS_GAP + lab_wr + lead;
    g->bar_x = g->gx + g->gw + BAR_GAP;
    g->bar_h = g->gh >= BAR_MIN_H ? g->gh : BAR_MIN_H;
    int bar_lab = hs_viz_colorbar_label_width(0.0f, vmax, ls, g->bar_h);
    int w = g->bar_x + BAR_W + 1 + bar_lab + M;
    g->tw = hs_viz_title_width(opts->title, opts->subtitle, ls);
    if (M + g->tw + M > w)
        w = M + g->tw + M;

    /* vertical: margin, title band, grid, ticks, rotated labels, "key", margin */
    g->th = hs_viz_title_height(opts->title, opts->subtitle, ls);
    g->gy = M + (g->th ? g->th + TITLE_GAP : 0);
    g->below = lead + lab_wc + AXIS_GAP + HS_FONT_H * ls;
    int h = g->gy + g->gh + g->below + M;
    g->nan_y = g->gy + g->bar_h + 14;
    if (any_nan && g->nan_y + 10 + M > h)
        h = g->nan_y + 10 + M;
    if (g->gy + g->bar_h + 8 + M > h)
        h = g->gy + g->bar_h + 8 + M;
    g->w = w;
    g->h = h;
}

/* The cells of map: (rows, cols), n the longer side, on the grid: squares of g->cell
 * pixels, or the map area-averaged to the grid's pixels. */
static hs_status heat_cells(hs_image *out, const heat_geom *g, const float *map, int rows,
                            int cols, int n, hs_cmap cmap, float vmax, hs_error *err)
{
    int cell = g->cell, gx = g->gx, gy = g->gy, gw = g->gw, gh = g->gh;
    if (cell > 0) {
        for (int q = 0; q < rows; q++) {
            for (int k = 0; k < cols; k++) {
                uint8_t rgb[3];
                hs_viz_value_rgb(cmap, map[(size_t)q * cols + k], 0.0f, vmax, rgb);
                hs_cv_rect(out, gx + k * cell, gy + q * cell, cell, cell, rgb);
            }
        }
        return HS_OK;
    }
    float *small = malloc((size_t)gw * (size_t)gh * sizeof *small); /* (gh, gw) */
    if (!small)
        return hs_fail(err, HS_E_NOMEM, "heatmap: out of memory downsampling %d tokens", n);
    if (rows == cols)
        hs_viz_resample(map, n, gw, small);
    else
        resample_rect(map, rows, cols, gh, gw, small);
    for (int y = 0; y < gh; y++) {
        for (int x = 0; x < gw; x++) {
            uint8_t rgb[3];
            hs_viz_value_rgb(cmap, small[(size_t)y * gw + x], 0.0f, vmax, rgb);
            hs_cv_pixel(out, gx + x, gy + y, rgb);
        }
    }
    free(small);
    return HS_OK;
}

/* The grid's frame, the axis labels and titles, the colour bar and, when there are NaN
 * cells, a swatch for them. */
static void heat_axes(hs_image *out, const heat_geom *g, const hs_heatmap_axes *ax,
                      const token_labels *tr, const token_labels *tc, hs_cmap cmap, float vmax,
                      int any_nan)
{
    const int M = HS_VIZ_MARGIN;
    int gx = g->gx, gy = g->gy, gw = g->gw, gh = g->gh, ls = g->ls, bar_x = g->bar_x;
    hs_rect grid = {gx, gy, gw, gh};
    hs_cv_frame(out, gx - 1, gy - 1, gw + 2, gh + 2, hs_viz_frame);

    /* axis labels and titles */
    hs_viz_labels_left(out, grid, token_label, tr, ax->rows, g->stride_r, ls, HS_TEXT_MARKS,
                       g->lab_max);
    hs_viz_labels_bottom(out, grid, token_label, tc, ax->cols, g->stride_c, ls, HS_TEXT_MARKS,
                         g->lab_max);
    int qw = hs_text_width(ax->row_title, ls, 0);
    hs_cv_text(out, M, gy + (gh - qw) / 2, ax->row_title, ls, hs_viz_muted, HS_TEXT_ROT90, 0);
    int kw = hs_text_width(ax->col_title, ls, 0);
    hs_cv_text(out, gx + (gw - kw) / 2, gy + gh + g->below - HS_FONT_H * ls, ax->col_title, ls,
               hs_viz_muted, 0, 0);

    /* colour bar, and a swatch for NaN cells when there are any */
    hs_rect bar = {bar_x, gy, BAR_W, g->bar_h};
    hs_viz_colorbar(out, bar, cmap, 0.0f, vmax, ls);
    if (any_nan) {
        uint8_t grey[3];
        hs_colormap_rgb(cmap, NAN, grey);
        hs_cv_rect(out, bar_x, g->nan_y, BAR_W, 10, grey);
        hs_cv_frame(out, bar_x - 1, g->nan_y - 1, BAR_W + 2, 12, hs_viz_frame);
        hs_cv_text(out, bar_x + BAR_W + 1 + HS_VIZ_TICK + HS_VIZ_TICK_GAP, g->nan_y, "nan", 1,
                   hs_viz_ink, 0, 0);
    }
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
