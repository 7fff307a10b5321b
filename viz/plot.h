/*
 * viz/plot.h — private pieces shared by the renderers: the palette, title bands,
 * colour bars with "nice" ticks, area-averaging resampling and the cell
 * geometry. Never installed.
 */
#ifndef HEADSCOPE_VIZ_PLOT_H
#define HEADSCOPE_VIZ_PLOT_H

#include "canvas.h"
#include "headscope/render.h"

/* The palette: white page, near-black text, grey secondary text and frames. */
extern const uint8_t hs_viz_bg[3];
extern const uint8_t hs_viz_ink[3];
extern const uint8_t hs_viz_muted[3];
extern const uint8_t hs_viz_frame[3];

#define HS_VIZ_MARGIN 24
#define HS_VIZ_TITLE_SCALE 2

/* Size of the title band for title (at HS_VIZ_TITLE_SCALE) and subtitle (at
 * sub_scale); either may be NULL or empty, both absent gives 0. And its drawing
 * with the top-left corner at (x, y). */
int hs_viz_title_height(const char *title, const char *subtitle, int sub_scale);
int hs_viz_title_width(const char *title, const char *subtitle, int sub_scale);
void hs_viz_title_draw(hs_image *img, int x, int y, const char *title, const char *subtitle,
                       int sub_scale);

/* Colour of value v on a scale from vmin to vmax; non-finite v is the NaN grey. */
void hs_viz_value_rgb(hs_cmap cmap, float v, float vmin, float vmax, uint8_t rgb[3]);

/* Up to max tick values between vmin and vmax at a 1/2/2.5/5 × 10^k step, about
 * target intervals, and at least three when the range allows (the step is made finer
 * until three multiples fall inside). Returns the count written. */
int hs_viz_ticks(float vmin, float vmax, int target, double *ticks, int max);

/* Formats a tick value with no more decimals than step needs ("0", "0.2", "-0.5"). */
void hs_viz_tick_label(double v, double step, char *buf, size_t cap);

/* Horizontal room the tick labels of a vertical colour bar bar_h pixels high need
 * right of the bar. */
int hs_viz_colorbar_label_width(float vmin, float vmax, int scale, int bar_h);

/* Draws a vertical colour bar in bar (top = vmax) with a frame, tick marks and
 * labels at the right, at text scale. */
void hs_viz_colorbar(hs_image *img, hs_rect bar, hs_cmap cmap, float vmin, float vmax, int scale);

/* Area-averages src (n, n) into dst (t, t): each output pixel is the weighted mean
 * of the source cells it covers; non-finite cells are left out, and a pixel that
 * covers only non-finite cells is NaN. Works for t > n too (then it repeats
 * cells, blending only where a pixel straddles two). */
void hs_viz_resample(const float *src, int n, int t, float *dst);

/* First pixel of cell i when n cells share px pixels: cell i covers pixels
 * hs_viz_edge(i, n, px) .. hs_viz_edge(i + 1, n, px) - 1. */
static inline int hs_viz_edge(int i, int n, int px)
{
    return (int)(((long long)i * px) / n);
}

/* Axis labels. fn returns the label of item i (a static string, or one it wrote
 * into buf); flags are hs_cv_text flags (HS_TEXT_MARKS for tokens). */
typedef const char *(*hs_viz_label_fn)(const void *ctx, int i, char *buf, size_t cap);

#define HS_VIZ_TICK 4     /* tick mark length */
#define HS_VIZ_TICK_GAP 3 /* between tick and label */

/* Label every stride-th of n items when each has cellf pixels: enough room for
 * a line of text at scale, and at most max_labels labels (0 = no limit). Strides
 * above 5 are rounded up to 10, 20, 25, 50, 100, ... */
int hs_viz_label_stride(int n, double cellf, int scale, int max_labels);

/* Widest drawn label among items 0, stride, 2 stride, ... (each cut to max_w). */
int hs_viz_labels_extent(hs_viz_label_fn fn, const void *ctx, int n, int stride, int scale,
                         int flags, int max_w);

/* Draws tick marks and labels left of grid (right-aligned, centred on the rows)
 * or below it (rotated, reading upward, ending at the grid). */
void hs_viz_labels_left(hs_image *img, hs_rect grid, hs_viz_label_fn fn, const void *ctx, int n,
                        int stride, int scale, int flags, int max_w);
void hs_viz_labels_bottom(hs_image *img, hs_rect grid, hs_viz_label_fn fn, const void *ctx,
                          int n, int stride, int scale, int flags, int max_w);

/* Key/value groups of grouped-query attention over a grid of n_head columns (column c at
 * x0 + c * pitch, its cell cell pixels wide), s heads per group: hs_viz_kv_band is the height
 * of the band of group names ("KV0", ...; 0 when s <= 1 or s does not divide n_head), and
 * hs_viz_kv_groups draws the names centred over their groups at band_y with a bracket under
 * each, and a 2-pixel rule between neighbouring groups from top to bottom (the grid). */
int hs_viz_kv_band(int n_head, int s, int scale);
void hs_viz_kv_groups(hs_image *img, int x0, int pitch, int cell, int n_head, int s,
                      int band_y, int top, int bottom, int scale);

/* Layer and head labels of the L x H grids: "L3", "H5" (prefix and index); with window
 * set and window[i] > 0 a layer is local (a sliding window of that many keys) and reads
 * "L3 w4096". */
typedef struct hs_viz_lh {
    char prefix;
    const int *window; /* (n_layer) or NULL */
} hs_viz_lh;
const char *hs_viz_lh_label(const void *ctx, int i, char *buf, size_t cap);

/* The legend line under an L x H grid with local layers: its height at scale (0 when no
 * window[l] > 0, so a grid without local layers is drawn as before), its width, and its
 * drawing at (x, y). */
int hs_viz_local_legend_height(const int *window, int n_layer, int scale);
int hs_viz_local_legend_width(int scale);
void hs_viz_local_legend_draw(hs_image *img, int x, int y, int scale);

/* Resolves an options max_size (0 = def) into *out, checking 200..HS_PNG_MAX_SIDE;
 * what names the renderer in the message. */
hs_status hs_viz_check_size(int max_size, int def, const char *what, int *out, hs_error *err);

/* 1 when v is neither NaN nor infinite. */
int hs_viz_is_finite(float v);

#endif /* HEADSCOPE_VIZ_PLOT_H */
