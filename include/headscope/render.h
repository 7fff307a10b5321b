/*
 * headscope/render.h — pictures of attention: PNG encoding, colour maps and four
 * renderers (one head's heatmap, a layer × head gallery, a head-similarity matrix
 * and a head-importance grid). Inputs are plain float arrays; nothing here needs a
 * model. Text is drawn with a built-in bitmap font, so there are no font files.
 *
 *     hs_error err = {0};
 *     hs_heatmap_opts o = {0};                  // zero = defaults (viridis, 0..1)
 *     o.title = "L4.H11 previous token";
 *     o.subtitle = "prev-token score 0.93";
 *     // map: (n, n) attention probabilities, row = query, column = key
 *     if (hs_heatmap_write("head.png", map, n, labels, &o, &err) != HS_OK)
 *         fprintf(stderr, "headscope: %s\n", err.msg);
 *
 *     hs_image img = {0};                       // or render to memory and inspect
 *     hs_layout lay;
 *     hs_heatmap_render(map, n, labels, &o, &img, &lay, &err);
 *     hs_rect c = hs_layout_cell(&lay, 2, 1);   // where cell (query 2, key 1) is
 *     hs_image_free(&img);
 *
 * Every function validates its inputs and returns an hs_status; none prints or
 * aborts. Images are 8-bit RGB, row-major, (h, w, 3), origin at the top left.
 * Token labels are UTF-8 display strings (hs_tokenizer_display): ' ' is drawn as
 * a visible-space mark, '\n' as a return mark, '\t' as an arrow; accented Latin
 * letters (U+00C0..U+017F) are drawn as their base letter, and anything else the
 * font lacks as a hollow box.
 */
#ifndef HEADSCOPE_RENDER_H
#define HEADSCOPE_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "headscope/analysis.h"
#include "headscope/composition.h"
#include "headscope/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest width or height of an image that hs_png_encode accepts. */
#define HS_PNG_MAX_SIDE 16384

/* The colour of NaN cells in every colour map: a neutral grey that none of the
 * maps contains. */
#define HS_NAN_R 128
#define HS_NAN_G 128
#define HS_NAN_B 128

/* An 8-bit RGB image; rgb is (h, w, 3), row-major, owned by the image. */
typedef struct hs_image {
    int w, h;
    uint8_t *rgb;
} hs_image;

/* A rectangle in image pixels: columns x..x+w-1, rows y..y+h-1. */
typedef struct hs_rect {
    int x, y, w, h;
} hs_rect;

/* Where a renderer put things, so callers and tests can find cells and bands.
 * Fields a picture does not have are zero. */
typedef struct hs_layout {
    hs_rect grid;       /* the whole matrix of cells (thumbnails for the gallery) */
    int rows, cols;     /* cells in the grid: n × n, L × H or m × m */
    int cell_w, cell_h; /* size of one cell in pixels; 0 when the grid is
                         * downsampled (more cells than pixels) */
    int gap;            /* pixels between neighbouring cells (gallery only) */
    hs_rect title;      /* band holding the title and subtitle (h = 0 without one) */
    hs_rect colorbar;   /* the colour-bar gradient: top row is vmax, bottom vmin
                         * (the gallery's key is horizontal: left vmin, right vmax) */
    float vmin, vmax;   /* values at the bottom and top of the colour scale */
    int label_stride;   /* every label_stride-th row/column is labelled */
} hs_layout;

/* Colour maps. Viridis and magma are matplotlib's (perceptually uniform,
 * readable in greyscale and by most colour-blind readers); HS_CMAP_DIVERGING is
 * blue (t = 0) – white (t = 0.5) – red (t = 1), for signed values. */
typedef enum hs_cmap {
    HS_CMAP_VIRIDIS = 0,
    HS_CMAP_MAGMA = 1,
    HS_CMAP_DIVERGING = 2
} hs_cmap;

/* ---- images and PNG ---------------------------------------------------- */

/* Frees img->rgb and zeroes the image; accepts NULL and a zeroed image. */
void hs_image_free(hs_image *img);

/* Encodes rgb (h, w, 3) as an 8-bit RGB PNG in memory. 1 <= w, h <=
 * HS_PNG_MAX_SIDE, else HS_E_ARG. On success *out is a malloc'd buffer of
 * *out_len bytes that the caller frees with free(); on failure *out is NULL. */
hs_status hs_png_encode(const uint8_t *rgb, int w, int h, uint8_t **out, size_t *out_len,
                        hs_error *err);

/* Encodes rgb (h, w, 3) as PNG and writes it to path atomically: the bytes go to
 * "<path>.tmp", which is renamed over path only when complete, and removed on any
 * failure, so no partial file is ever left. HS_E_IO when the file cannot be
 * written (message names the path and the system error). */
hs_status hs_png_write(const char *path, const uint8_t *rgb, int w, int h, hs_error *err);

/* ---- colour maps ------------------------------------------------------- */

/* Writes the colour of t under cmap to rgb[0..2]. t is clamped to [0, 1]; NaN
 * gives (HS_NAN_R, HS_NAN_G, HS_NAN_B). Viridis and magma are 256-entry tables
 * indexed by min(255, floor(256 t)), as matplotlib does; the diverging map is
 * piecewise linear. An unknown cmap gives the NaN grey. */
void hs_colormap_rgb(hs_cmap cmap, float t, uint8_t rgb[3]);

/* Returns a static name for cmap ("viridis", "magma", "diverging") or NULL. */
const char *hs_colormap_name(hs_cmap cmap);

/* ---- layout helper ----------------------------------------------------- */

/* The rectangle of cell (row, col) of a rendered grid (for a gallery, of the
 * thumbnail of layer row, head col). Works for downsampled grids too, where a
 * cell may be a fraction of a pixel wide (then w or h may be 0). Out-of-range
 * indices give an empty rectangle. */
hs_rect hs_layout_cell(const hs_layout *layout, int row, int col);

/* ---- single-head heatmap ----------------------------------------------- */

/* Options for hs_heatmap_render; a zeroed struct means the defaults. */
typedef struct hs_heatmap_opts {
    const char *title;    /* large text at the top, e.g. "L5.H1 previous token"; may be NULL */
    const char *subtitle; /* smaller line below it, e.g. key numbers; may be NULL */
    hs_cmap cmap;         /* default HS_CMAP_VIRIDIS */
    int scale_to_max;     /* 0: colours span 0..1; 1: 0..max(map) (finite cells) */
    int max_labels;       /* label at most this many tokens per axis, striding when
                           * n is larger; 0 means 64 */
    int max_size;         /* longest side of the image, roughly; 0 means 2000 */
} hs_heatmap_opts;

/* Renders one head's attention map as a heatmap.
 * map: (n, n), row = query, column = key; values are clamped to [0, 1] (or to
 *      [0, max] with scale_to_max); non-finite cells (NaN, ±Inf) are grey and
 *      add a "nan" swatch under the colour bar.
 * labels: (n) UTF-8 token strings, or NULL to number the tokens; a NULL entry is
 *      an empty label. Labels longer than 14 characters are cut with an ellipsis.
 * The picture has the title band, query labels on the left, key labels rotated
 * below, and a colour bar with ticks on the right. Cells are square, 640 / n px
 * (between 1 and 48) while n <= 4/5 max_size; above that the map is
 * area-averaged into a 4/5 max_size square (layout->cell_w is then 0). Labels
 * are 2x when cells are 22 px or more; every k-th token is labelled when they
 * would overlap or exceed max_labels. 1 <= n <= 16384.
 * On success *out holds a new image (free with hs_image_free) and, if layout is
 * non-NULL, *layout tells where the cells are. On failure *out is zeroed. */
hs_status hs_heatmap_render(const float *map, int n, const char *const *labels,
                            const hs_heatmap_opts *opts, hs_image *out, hs_layout *layout,
                            hs_error *err);

/* hs_heatmap_render, then hs_png_write to path. opts may be NULL. */
hs_status hs_heatmap_write(const char *path, const float *map, int n,
                           const char *const *labels, const hs_heatmap_opts *opts,
                           hs_error *err);

/* A rectangular map's axes (an encoder-decoder's cross-attention: decoder queries x encoder
 * keys): its rows and columns (1..16384 each), each axis's labels ((rows) and (cols), or NULL
 * for the indices) and its title (NULL: "query" and "key"). */
typedef struct hs_heatmap_axes {
    int rows, cols;
    const char *const *row_labels;
    const char *const *col_labels;
    const char *row_title, *col_title;
} hs_heatmap_axes;

/* hs_heatmap_render of a (rows, cols) map, row = query: the cells square, the grid as wide
 * as cols and as high as rows; hs_heatmap_render(map, n, labels) draws what this draws with
 * rows = cols = n and labels on both axes. Ownership as hs_heatmap_render. */
hs_status hs_heatmap_rect_render(const float *map, const hs_heatmap_axes *axes,
                                 const hs_heatmap_opts *opts, hs_image *out, hs_layout *layout,
                                 hs_error *err);

/* hs_heatmap_rect_render, then hs_png_write to path. opts may be NULL. */
hs_status hs_heatmap_rect_write(const char *path, const float *map, const hs_heatmap_axes *axes,
                                const hs_heatmap_opts *opts, hs_error *err);

/* ---- gallery of all heads ---------------------------------------------- */

/* Options for hs_gallery_render; a zeroed struct means the defaults. */
typedef struct hs_gallery_opts {
    const char *title; /* may be NULL */
    hs_cmap cmap;      /* default HS_CMAP_VIRIDIS */
    int max_size;      /* longest side of the image, roughly; 0 means 2400 */
    int heads_per_group; /* grouped-query attention: > 1 consecutive heads share a key/value
                          * head; their groups are named ("KV0", ...) over the columns and
                          * ruled apart. 0 or 1: none. Must divide n_head (HS_E_ARG) */
} hs_gallery_opts;

/* Renders an n_layer × n_head grid of thumbnails, one per head, rows labelled
 * "L0".."L{L-1}" and columns "H0".."H{H-1}", with a horizontal colour key below.
 * maps: (n_layer, n_head, n, n), each map row = query, column = key.
 * Each thumbnail is normalised to its own maximum (so the pattern, not the
 * strength, is compared); a map whose finite cells are all <= 0 is drawn as 0.
 * Thumbnails are as large as max_size allows, at most 128 px and at least 4 px;
 * when n fits they are a whole number of pixels per cell, else the map is
 * downsampled by area averaging (non-finite cells are left out of the average;
 * an area with none finite is grey). 1 <= n_layer, n_head <= 256 and
 * 1 <= n <= 16384. layout->grid covers the thumbnails, cell_w/cell_h is the
 * thumbnail size and gap the space between them, so hs_layout_cell(layout, l, h)
 * is the thumbnail of layer l, head h. Ownership as hs_heatmap_render. */
hs_status hs_gallery_render(const float *maps, int n_layer, int n_head, int n,
                            const hs_gallery_opts *opts, hs_image *out, hs_layout *layout,
                            hs_error *err);

/* hs_gallery_render with the maps read one at a time: get(user, l * n_head + h, map)
 * fills one (n, n) map (its failure is returned as is), so memory is one map. */
hs_status hs_gallery_render_from(hs_map_fn get, void *user, int n_layer, int n_head, int n,
                                 const hs_gallery_opts *opts, hs_image *out,
                                 hs_layout *layout, hs_error *err);

/* hs_gallery_render, then hs_png_write to path. opts may be NULL. */
hs_status hs_gallery_write(const char *path, const float *maps, int n_layer, int n_head,
                           int n, const hs_gallery_opts *opts, hs_error *err);

/* hs_gallery_render_from, then hs_png_write to path. opts may be NULL. */
hs_status hs_gallery_write_from(const char *path, hs_map_fn get, void *user, int n_layer,
                                int n_head, int n, const hs_gallery_opts *opts, hs_error *err);

/* ---- head similarity matrix -------------------------------------------- */

/* Options for hs_similarity_render; a zeroed struct means the defaults. */
typedef struct hs_similarity_opts {
    const char *title; /* may be NULL */
    int n_head;        /* when labels is NULL and n_head > 0, item i is labelled
                        * "L.H" = "<i / n_head>.<i % n_head>"; otherwise "i" */
    int max_size;      /* longest side of the image, roughly; 0 means 2000 */
    float divergence_max; /* 0: a similarity in [-1, 1]; > 0: a divergence (0 = identical)
                           * drawn with viridis from 0 to this (ln 2 for Jensen-Shannon) */
} hs_similarity_opts;

/* Renders an m × m similarity matrix with the diverging colour map (-1 blue,
 * 0 white, +1 red; values clamped to [-1, 1], non-finite cells grey), or with
 * opts->divergence_max > 0 a divergence matrix on viridis from 0 to that maximum.
 * Every cluster of two or more items (runs of one label in display order) is framed
 * on the diagonal. Cells are 22 px, with labels at 2x, when the size allows.
 * sim: (m, m), sim[i * m + j] compares items i and j.
 * order: (m) a permutation of 0..m-1: display position p shows item order[p]
 *      (e.g. dendrogram leaf order); NULL keeps 0..m-1. A non-permutation is
 *      HS_E_ARG.
 * clusters: (m) cluster id of each item (indexed by item, not position), or NULL;
 *      a line is drawn between neighbouring display positions whose items are in
 *      different clusters.
 * labels: (m) item labels, or NULL (see n_head).
 * Displayed cell (row p, col q) is sim[order[p] * m + order[q]]. Cells aim at a
 * ~960 px grid (at most 40 px, and at least a text line when max_size allows);
 * above 4/5 max_size items the matrix is area-averaged. 1 <= m <= 4096.
 * Ownership as hs_heatmap_render. */
hs_status hs_similarity_render(const float *sim, int m, const int *order, const int *clusters,
                               const char *const *labels, const hs_similarity_opts *opts,
                               hs_image *out, hs_layout *layout, hs_error *err);

/* hs_similarity_render, then hs_png_write to path. opts may be NULL. */
hs_status hs_similarity_write(const char *path, const float *sim, int m, const int *order,
                              const int *clusters, const char *const *labels,
                              const hs_similarity_opts *opts, hs_error *err);

/* ---- head importance grid ---------------------------------------------- */

/* Options for hs_importance_render; a zeroed struct means the defaults. */
typedef struct hs_importance_opts {
    const char *title;    /* may be NULL */
    const char *subtitle; /* may be NULL */
    hs_cmap cmap;         /* used when no value is negative; default viridis;
                             HS_CMAP_DIVERGING: always -a..+a, 0 white (patching effects) */
    int decimals;         /* digits after the point in the cells; 0 means 2,
                           * a negative value means 0 */
    int max_size;         /* longest side of the image, roughly; 0 means 2000 */
    int heads_per_group;  /* as hs_gallery_opts: KV groups named and ruled apart */
} hs_importance_opts;

/* Renders an n_layer × n_head grid of per-head values (e.g. the loss increase
 * when the head is ablated), each cell coloured and printed with its value.
 * values: (n_layer, n_head). With no negative value the colours span 0..max
 * with opts->cmap; with any negative value they span -a..+a (a = max |value|)
 * with the diverging map, so 0 is white. Non-finite cells are grey and print
 * "nan" / "inf". Values are printed in 2x text when the grid fits in 4/5
 * max_size, else in 1x text, else (about 45+ heads or 100+ layers at the
 * default size) not at all; the text is white on dark cells and black on light
 * ones. 1 <= n_layer, n_head <= 256. Ownership as hs_heatmap_render. */
hs_status hs_importance_render(const float *values, int n_layer, int n_head,
                               const hs_importance_opts *opts, hs_image *out,
                               hs_layout *layout, hs_error *err);

/* hs_importance_render, then hs_png_write to path. opts may be NULL. */
hs_status hs_importance_write(const char *path, const float *values, int n_layer, int n_head,
                              const hs_importance_opts *opts, hs_error *err);

/* ---- SVG ------------------------------------------------------------------ */

/* The heatmap of hs_heatmap_render as SVG text: the cells as an embedded PNG with one pixel
 * per cell (drawn unsmoothed at 12 units per token), the title, subtitle, axis titles, every
 * token label (every k-th above opts->max_labels; cut after 14 characters) and the colour
 * bar's ticks as SVG text. opts as for the PNG (max_size is ignored). 1 <= n <= 4096.
 * On success *out is a NUL-terminated malloc'd string of *out_len bytes (out_len may be
 * NULL) that the caller frees. hs_heatmap_svg_write writes it to path atomically. */
hs_status hs_heatmap_svg(const float *map, int n, const char *const *labels,
                         const hs_heatmap_opts *opts, char **out, size_t *out_len, hs_error *err);
hs_status hs_heatmap_svg_write(const char *path, const float *map, int n,
                               const char *const *labels, const hs_heatmap_opts *opts,
                               hs_error *err);

/* A similarity matrix as hs_similarity_render draws it (order, clusters, labels and opts the
 * same: the diverging map from -1 to 1, or viridis from 0 to divergence_max), as SVG text: the
 * cells an embedded PNG at 12 units per item, each cluster of two or more framed on the
 * diagonal and a rule between neighbouring clusters, every label as SVG text (cut after 14
 * characters). max_size is ignored. 1 <= m <= 4096. Ownership as hs_heatmap_svg;
 * hs_similarity_svg_write writes it to path atomically. */
hs_status hs_similarity_svg(const float *sim, int m, const int *order, const int *clusters,
                            const char *const *labels, const hs_similarity_opts *opts, char **out,
                            size_t *out_len, hs_error *err);
hs_status hs_similarity_svg_write(const char *path, const float *sim, int m, const int *order,
                                  const int *clusters, const char *const *labels,
                                  const hs_similarity_opts *opts, hs_error *err);

/* ---- composition -------------------------------------------------------- */

/* Draws c's Q-, K- and V-composition matrices side by side (rows: the writing head,
 * columns: the reading head, NaN grey where the reader is not in a later layer; viridis
 * from 0 to the largest score of the three), frames the top strongest pairs of each
 * (hs_composition_strongest, top in 0..64) and lists them beneath, under title (may be
 * NULL). On success out owns a new image (hs_image_free). */
hs_status hs_composition_render(const hs_composition *c, const char *title, int top,
                                hs_image *out, hs_error *err);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_RENDER_H */
