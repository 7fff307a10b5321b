/*
 * viz/viz_internal.h: the renderers' forms that only the library's pictures use (never
 * installed; the public structs do not grow within a major version, docs/install.md).
 */
#ifndef HEADSCOPE_VIZ_INTERNAL_H
#define HEADSCOPE_VIZ_INTERNAL_H

#include "headscope/render.h"

/* hs_gallery_render_from / hs_gallery_write_from and hs_importance_render /
 * hs_importance_write with the local layers marked: layer_window (n_layer) or NULL, layer l
 * with layer_window[l] > 0 local (its queries see the last layer_window[l] keys): its label
 * reads "L3 w4096" and a line under the picture says what "wN" means. NULL, or no entry
 * above 0: the public function's picture, bit for bit. */
hs_status hs_viz_gallery_render_marked(hs_map_fn get, void *user, int n_layer, int n_head,
                                       int n, const hs_gallery_opts *opts,
                                       const int *layer_window, hs_image *out,
                                       hs_layout *layout, hs_error *err);
hs_status hs_viz_gallery_write_marked(const char *path, hs_map_fn get, void *user, int n_layer,
                                      int n_head, int n, const hs_gallery_opts *opts,
                                      const int *layer_window, hs_error *err);
hs_status hs_viz_importance_render_marked(const float *values, int n_layer, int n_head,
                                          const hs_importance_opts *opts,
                                          const int *layer_window, hs_image *out,
                                          hs_layout *layout, hs_error *err);
hs_status hs_viz_importance_write_marked(const char *path, const float *values, int n_layer,
                                         int n_head, const hs_importance_opts *opts,
                                         const int *layer_window, hs_error *err);

/* Names of a grid's rows and columns in place of "L3" and "H5": row(ctx, i, buf, cap) and
 * col(ctx, j, buf, cap) return the label of row i and column j (written into buf, or a
 * string of their own). */
typedef struct hs_viz_axes {
    const char *(*row)(const void *ctx, int i, char *buf, size_t cap);
    const char *(*col)(const void *ctx, int j, char *buf, size_t cap);
    const void *ctx;
} hs_viz_axes;

/* Labels for hs_viz_axes: hs_viz_unit_label names row i of a grid with *(const int *)ctx
 * units per layer, layer-major, "3.1" (layer.unit; units 0: "3", the layer);
 * hs_viz_index_label names item i "17" (a token position), whatever ctx. */
const char *hs_viz_unit_label(const void *ctx, int i, char *buf, size_t cap);
const char *hs_viz_index_label(const void *ctx, int i, char *buf, size_t cap);

/* hs_importance_render / hs_importance_write of a rows x cols grid whose rows and columns
 * axes names (1 <= rows, cols <= 256; the per-position patching picture: rows layer.head,
 * columns positions); no local layers marked. */
hs_status hs_viz_importance_render_axes(const float *values, int rows, int cols,
                                        const hs_importance_opts *opts, const hs_viz_axes *axes,
                                        hs_image *out, hs_layout *layout, hs_error *err);
hs_status hs_viz_importance_write_axes(const char *path, const float *values, int rows,
                                       int cols, const hs_importance_opts *opts,
                                       const hs_viz_axes *axes, hs_error *err);

#endif /* HEADSCOPE_VIZ_INTERNAL_H */
