/* A head-by-head similarity matrix in a given (e.g. dendrogram) order, with
 * cluster boundaries. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/core.h"
#include "plot.h"

#define MAX_M 4096
#define MAX_CELL 40
#define TARGET_GRID 960
#define LABEL_GLYPHS 10
#define TITLE_GAP 14
#define BAR_GAP 20
#define BAR_W 16
#define BAR_MIN_H 120

static const uint8_t boundary_rgb[3] = {15, 15, 15};

typedef struct item_labels {
    const char *const *labels; /* (m) or NULL */
    const int *order;          /* (m) display position -> item */
    int n_head;
} item_labels;

static const char *item_label(const void *ctx, int p, char *buf, size_t cap)
{
    const item_labels *il = ctx;
    int i = il->order ? il->order[p] : p;
    if (il->labels)
        return il->labels[i] ? il->labels[i] : "";
    if (il->n_head > 0)
        snprintf(buf, cap, "%d.%d", i / il->n_head, i % il->n_head);
    else
        snprintf(buf, cap, "%d", i);
    return buf;
}

/* The colour scale: a similarity in [-1, 1] on the diverging map, or a divergence in
 * [0, vmax] on viridis. */
typedef struct sim_scale {
    hs_cmap cmap;
    float vmin, vmax;
} sim_scale;

static void sim_rgb(const sim_scale *sc, float v, uint8_t rgb[3])
{
    hs_viz_value_rgb(sc->cmap, v, sc->vmin, sc->vmax, rgb);
}

/* Where everything of one similarity picture goes: the grid (cell pixels an item, 0 when
 * area-averaged; side g at (gx, gy), cellf pixels an item), the labels (scale ls, every
 * stride-th item, lab_max wide at most), the colour bar at bar_x (bar_h high), the title
 * (th high, tw wide) and the image's w x h. */
typedef struct sim_geom {
    int cell, g, ls, stride, lab_max, gx, gy, bar_x, bar_h, th, tw, w, h;
    double cellf;
} sim_geom;

/* hs_similarity_render's stages, defined below it in the order it runs them */
static hs_status sim_check(int m, const int *order, const hs_similarity_opts *opts,
                           int *max_size, hs_error *err);
static void sim_grid(sim_geom *gm, int m, int max_size);
static void sim_place(sim_geom *gm, int m, const item_labels *il, const sim_scale *sc,
                      const char *title);
static hs_status sim_cells(hs_image *out, const sim_geom *gm, const float *sim, int m,
                           const int *order, const sim_scale *sc, hs_error *err);
static void sim_clusters(hs_image *out, const sim_geom *gm, int m, const int *order,
                         const int *clusters);

hs_status hs_similarity_render(const float *sim, int m, const int *order, const int *clusters,
                               const char *const *labels, const hs_similarity_opts *opts,
                               hs_image *out, hs_layout *layout, hs_error *err)
{
    static const hs_similarity_opts defaults = {0};
    hs_status st;
    if (!out)
        return hs_fail(err, HS_E_ARG, "similarity: output image is NULL");
    out->w = out->h = 0;
    out->rgb = NULL;
    if (!sim)
        return hs_fail(err, HS_E_ARG, "similarity: matrix is NULL");
    if (m < 1 || m > MAX_M)
        return hs_fail(err, HS_E_SHAPE, "similarity: %d items, expected 1..%d", m, MAX_M);
    if (!opts)
        opts = &defaults;
    int max_size;
    if ((st = sim_check(m, order, opts, &max_size, err)) != HS_OK)
        return st;
    sim_scale sc = {HS_CMAP_DIVERGING, -1.0f, 1.0f};
    if (opts->divergence_max > 0)
        sc = (sim_scale){HS_CMAP_VIRIDIS, 0.0f, opts->divergence_max};
    sim_geom gm;
    item_labels il = {labels, order, opts->n_head};
    sim_grid(&gm, m, max_size);
    sim_place(&gm, m, &il, &sc, opts->title);
    const int M = HS_VIZ_MARGIN;
    int gx = gm.gx, gy = gm.gy, g = gm.g, w = gm.w, h = gm.h;
    if (w > HS_PNG_MAX_SIDE || h > HS_PNG_MAX_SIDE)
        return hs_fail(err, HS_E_ARG, "similarity: image would be %dx%d, over %d", w, h,
                       HS_PNG_MAX_SIDE);

    if (hs_cv_new(out, w, h, hs_viz_bg) != 0)
        return hs_fail(err, HS_E_NOMEM, "similarity: out of memory for a %dx%d image", w, h);
    int title_x = gx + gm.tw + M <= w ? gx : M;
    hs_viz_title_draw(out, title_x, M, opts->title, NULL, gm.ls);
    if ((st = sim_cells(out, &gm, sim, m, order, &sc, err)) != HS_OK) {
        hs_image_free(out);
        return st;
    }
    hs_rect grid = {gx, gy, g, g};
    hs_cv_frame(out, gx - 1, gy - 1, g + 2, g + 2, hs_viz_frame);
    if (clusters)
        sim_clusters(out, &gm, m, order, clusters);

    hs_viz_labels_left(out, grid, item_label, &il, m, gm.stride, gm.ls, HS_TEXT_MARKS,
                       gm.lab_max);
    hs_viz_labels_bottom(out, grid, item_label, &il, m, gm.stride, gm.ls, HS_TEXT_MARKS,
                         gm.lab_max);

    hs_rect bar = {gm.bar_x, gy, BAR_W, gm.bar_h};
    hs_viz_colorbar(out, bar, sc.cmap, sc.vmin, sc.vmax, gm.ls);

    if (layout)
        *layout = (hs_layout){.grid = grid, .rows = m, .cols = m, .cell_w = gm.cell,
                              .cell_h = gm.cell, .title = {title_x, M, gm.th ? gm.tw : 0, gm.th},
                              .colorbar = bar, .vmin = sc.vmin, .vmax = sc.vmax,
                              .label_stride = gm.stride};
    return HS_OK;
}

/* The options' checks after the shape's, and that order, when given, is a permutation of
 * 0..m-1; *max_size the picture's largest side. */
static hs_status sim_check(int m, const int *order, const hs_similarity_opts *opts,
                           int *max_size, hs_error *err)
{
    hs_status st;
    if (opts->n_head < 0)
        return hs_fail(err, HS_E_ARG, "similarity: n_head is %d, expected >= 0", opts->n_head);
    if (opts->divergence_max < 0 || !(opts->divergence_max == opts->divergence_max) ||
        isinf(opts->divergence_max))
        return hs_fail(err, HS_E_ARG, "similarity: divergence_max is %g, expected >= 0",
                       (double)opts->divergence_max);
    if ((st = hs_viz_check_size(opts->max_size, 2000, "similarity", max_size, err)) != HS_OK)
        return st;
    if (order) {
        unsigned char *seen = calloc((size_t)m, 1);
        if (!seen)
            return hs_fail(err, HS_E_NOMEM, "similarity: out of memory checking the order");
        for (int p = 0; p < m; p++) {
            int i = order[p];
            if (i < 0 || i >= m || seen[i]) {
                st = hs_fail(err, HS_E_ARG,
                             "similarity: order[%d] is %d, expected a permutation of 0..%d", p, i,
                             m - 1);
                free(seen);
                return st;
            }
            seen[i] = 1;
        }
        free(seen);
    }
    return HS_OK;
}

/* The grid's side (gm->cell, g, cellf) for m items in max_size pixels. */
static void sim_grid(sim_geom *gm, int m, int max_size)
{
    int budget = max_size * 4 / 5;
    int cell = 0, g;
    if (m <= budget) {
        /* aim for a ~960 px grid, but give every label a line when that fits, at 2x
           (22 px cells) when the size allows it */
        cell = TARGET_GRID / m;
        int label_cell = budget / m >= 22 ? 22 : budget / m < HS_FONT_H + 2 ? budget / m
                                                                             : HS_FONT_H + 2;
        if (cell < label_cell)
            cell = label_cell;
        if (cell > MAX_CELL)
            cell = MAX_CELL;
        if (cell < 1)
            cell = 1;
        g = m * cell;
    } else {
        g = budget;
    }
    gm->cell = cell;
    gm->g = g;
    gm->cellf = (double)g / m;
}

/* The labels, the grid's place, the colour bar and the image's size (gm->ls .. h) around
 * the grid of sim_grid. */
static void sim_place(sim_geom *gm, int m, const item_labels *il, const sim_scale *sc,
                      const char *title)
{
    int g = gm->g;
    int ls = gm->cellf >= 22.0 ? 2 : 1;
    gm->ls = ls;
    gm->stride = hs_viz_label_stride(m, gm->cellf, ls, 0);
    gm->lab_max = ((LABEL_GLYPHS - 1) * HS_FONT_ADV + HS_FONT_W) * ls;
    int lab_w =
        hs_viz_labels_extent(item_label, il, m, gm->stride, ls, HS_TEXT_MARKS, gm->lab_max);

    const int M = HS_VIZ_MARGIN;
    int lead = HS_VIZ_TICK + HS_VIZ_TICK_GAP + 1;
    gm->gx = M + lab_w + lead;
    gm->bar_x = gm->gx + g + BAR_GAP;
    gm->bar_h = g >= BAR_MIN_H ? g : BAR_MIN_H;
    int bar_lab = hs_viz_colorbar_label_width(sc->vmin, sc->vmax, ls, gm->bar_h);
    int w = gm->bar_x + BAR_W + 1 + bar_lab + M;
    gm->tw = hs_viz_title_width(title, NULL, ls);
    if (M + gm->tw + M > w)
        w = M + gm->tw + M;
    gm->th = hs_viz_title_height(title, NULL, ls);
    gm->gy = M + (gm->th ? gm->th + TITLE_GAP : 0);
    int h = gm->gy + g + lead + lab_w + M;
    if (gm->gy + gm->bar_h + 8 + M > h)
        h = gm->gy + gm->bar_h + 8 + M;
    gm->w = w;
    gm->h = h;
}

/* The cells of sim: (m, m) in the display order on the grid: squares of gm->cell pixels,
 * or reordered into perm (m, m) and area-averaged to the grid's pixels. */
static hs_status sim_cells(hs_image *out, const sim_geom *gm, const float *sim, int m,
                           const int *order, const sim_scale *sc, hs_error *err)
{
    int cell = gm->cell, g = gm->g, gx = gm->gx, gy = gm->gy;
    if (cell > 0) {
        for (int p = 0; p < m; p++) {
            size_t row = (size_t)(order ? order[p] : p) * (size_t)m;
            for (int q = 0; q < m; q++) {
                uint8_t rgb[3];
                sim_rgb(sc, sim[row + (size_t)(order ? order[q] : q)], rgb);
                hs_cv_rect(out, gx + q * cell, gy + p * cell, cell, cell, rgb);
            }
        }
        return HS_OK;
    }
    /* reorder, then area-average down to the pixel budget */
    float *perm = malloc((size_t)m * (size_t)m * sizeof *perm);
    float *small = malloc((size_t)g * (size_t)g * sizeof *small); /* (g, g) */
    if (!perm || !small) {
        free(perm);
        free(small);
        return hs_fail(err, HS_E_NOMEM, "similarity: out of memory downsampling %d items", m);
    }
    for (int p = 0; p < m; p++) {
        size_t row = (size_t)(order ? order[p] : p) * (size_t)m;
        for (int q = 0; q < m; q++)
            perm[(size_t)p * m + q] = sim[row + (size_t)(order ? order[q] : q)];
    }
    hs_viz_resample(perm, m, g, small);
    for (int y = 0; y < g; y++) {
        for (int x = 0; x < g; x++) {
            uint8_t rgb[3];
            sim_rgb(sc, small[(size_t)y * g + x], rgb);
            hs_cv_pixel(out, gx + x, gy + y, rgb);
        }
    }
    free(perm);
    free(small);
    return HS_OK;
}

/* clusters: a frame around the diagonal block of every cluster of two or more items
   (runs of display positions in one cluster; a dendrogram order keeps each cluster in
   one run). Lines across the whole matrix at every boundary hid the matrix when most
   clusters are single heads (144 heads, 114 clusters). */
static void sim_clusters(hs_image *out, const sim_geom *gm, int m, const int *order,
                         const int *clusters)
{
    int g = gm->g, gx = gm->gx, gy = gm->gy;
    int thick = gm->cellf >= 4.0 ? 2 : 1;
    for (int p0 = 0, p1; p0 < m; p0 = p1) {
        int c0 = clusters[order ? order[p0] : p0];
        for (p1 = p0 + 1; p1 < m && clusters[order ? order[p1] : p1] == c0; p1++)
            ;
        if (p1 - p0 < 2)
            continue;
        int e0 = hs_viz_edge(p0, m, g), e1 = hs_viz_edge(p1, m, g);
        int a0 = thick == 2 && e0 > 0 ? e0 - 1 : e0, a1 = thick == 2 ? e1 - 1 : e1;
        if (a1 + thick > g)
            a1 = g - thick;
        int len = a1 + thick - a0;
        hs_cv_rect(out, gx + a0, gy + a0, thick, len, boundary_rgb);
        hs_cv_rect(out, gx + a1, gy + a0, thick, len, boundary_rgb);
        hs_cv_rect(out, gx + a0, gy + a0, len, thick, boundary_rgb);
        hs_cv_rect(out, gx + a0, gy + a1, len, thick, boundary_rgb);
    }
}

hs_status hs_similarity_write(const char *path, const float *sim, int m, const int *order,
                              const int *clusters, const char *const *labels,
                              const hs_similarity_opts *opts, hs_error *err)
{
    hs_image img = {0};
    hs_status st = hs_similarity_render(sim, m, order, clusters, labels, opts, &img, NULL, err);
    if (st != HS_OK)
        return st;
    st = hs_png_write(path, img.rgb, img.w, img.h, err);
    hs_image_free(&img);
    return st;
}
