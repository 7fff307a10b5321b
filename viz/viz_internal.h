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

#endif /* HEADSCOPE_VIZ_INTERNAL_H */
