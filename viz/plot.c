/* Shared renderer pieces: palette, title band, colour bar, ticks, resampling. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "plot.h"

const uint8_t hs_viz_bg[3] = {255, 255, 255};
const uint8_t hs_viz_ink[3] = {30, 30, 30};
const uint8_t hs_viz_muted[3] = {105, 105, 105};
const uint8_t hs_viz_frame[3] = {70, 70, 70};

#define SUBTITLE_GAP 6

static int present(const char *s) { return s && *s; }

int hs_viz_title_height(const char *title, const char *subtitle, int sub_scale)
{
    int h = 0;
    if (present(title))
        h += HS_FONT_H * HS_VIZ_TITLE_SCALE;
    if (present(subtitle))
        h += (h ? SUBTITLE_GAP : 0) + HS_FONT_H * sub_scale;
    return h;
}

int hs_viz_title_width(const char *title, const char *subtitle, int sub_scale)
{
    int a = present(title) ? hs_text_width(title, HS_VIZ_TITLE_SCALE, 0) : 0;
    int b = present(subtitle) ? hs_text_width(subtitle, sub_scale, 0) : 0;
    return a > b ? a : b;
}

void hs_viz_title_draw(hs_image *img, int x, int y, const char *title, const char *subtitle,
                       int sub_scale)
{
    int max_w = img->w - x - HS_VIZ_MARGIN / 2;
    if (present(title)) {
        hs_cv_text(img, x, y, title, HS_VIZ_TITLE_SCALE, hs_viz_ink, HS_TEXT_BOLD, max_w);
        y += HS_FONT_H * HS_VIZ_TITLE_SCALE + SUBTITLE_GAP;
    }
    if (present(subtitle))
        hs_cv_text(img, x, y, subtitle, sub_scale, hs_viz_muted, 0, max_w);
}

int hs_viz_is_finite(float v) { return !isnan(v) && !isinf(v); }

void hs_viz_value_rgb(hs_cmap cmap, float v, float vmin, float vmax, uint8_t rgb[3])
{
    if (!hs_viz_is_finite(v)) {
        hs_colormap_rgb(cmap, NAN, rgb);
        return;
    }
    float t = vmax > vmin ? (v - vmin) / (vmax - vmin) : 0.0f;
    hs_colormap_rgb(cmap, t, rgb);
}

#define MAX_TICKS_ANY 64

/* A step of 1, 2, 2.5 or 5 × 10^k giving about target intervals over range. */
static double nice_step(double range, int target)
{
    double raw = range / target;
    double mag = pow(10.0, floor(log10(raw)));
    double f = raw / mag;
    double m = f < 1.5 ? 1.0 : f < 2.25 ? 2.0 : f < 3.5 ? 2.5 : f < 7.5 ? 5.0 : 10.0;
    return m * mag;
}

/* Ticks at multiples of step from vmin to vmax (at most max); returns the count. */
static int ticks_at(double vmin, double vmax, double step, double *ticks, int max)
{
    double first = ceil(vmin / step - 1e-9) * step;
    int n = 0;
    for (int k = 0; n < max; k++) {
        double v = first + k * step;
        if (v > vmax + step * 1e-6)
            break;
        if (fabs(v) < step * 1e-9)
            v = 0.0;
        ticks[n++] = v;
    }
    return n;
}

/* The step the ticks use: nice_step, made finer (5 -> 2.5 -> 2 -> 1 x 10^k ...) until at least
 * three ticks fall inside the range. A coarse step on a range that does not start and end on
 * its multiples can leave a single tick: -1.97..1.97 at step 2 has only 0. */
static double tick_step(double vmin, double vmax, int target)
{
    double step = nice_step(vmax - vmin, target), t[MAX_TICKS_ANY];
    for (int i = 0; i < 8 && ticks_at(vmin, vmax, step, t, MAX_TICKS_ANY) < 3; i++) {
        double mag = pow(10.0, floor(log10(step) + 1e-9)), f = step / mag;
        step = (f > 5.5 ? 5.0 : f > 2.75 ? 2.5 : f > 2.25 ? 2.0 : f > 1.5 ? 1.0 : 0.5) * mag;
    }
    return step;
}

int hs_viz_ticks(float vmin, float vmax, int target, double *ticks, int max)
{
    if (!(vmax > vmin) || max < 1) {
        if (max >= 1) {
            ticks[0] = vmin;
            return 1;
        }
        return 0;
    }
    return ticks_at(vmin, vmax, tick_step(vmin, vmax, target), ticks, max);
}

void hs_viz_tick_label(double v, double step, char *buf, size_t cap)
{
    int dec = 0;
    while (dec < 6 && fabs(step * pow(10.0, dec) - floor(step * pow(10.0, dec) + 0.5)) > 1e-6)
        dec++;
    snprintf(buf, cap, "%.*f", dec, v);
    if (strcmp(buf, "-0") == 0 || (buf[0] == '-' && strspn(buf + 1, "0.") == strlen(buf + 1)))
        memmove(buf, buf + 1, strlen(buf)); /* no "-0.0" */
}

/* About how many tick intervals a bar of bar_h pixels holds with labels at
 * scale: one label per three text heights, 2..5. */
static int bar_target(int bar_h, int scale)
{
    int t = bar_h / (HS_FONT_H * scale * 3);
    return t < 2 ? 2 : t > 5 ? 5 : t;
}

/* Tick step used by the colour bar, so labels and positions agree. */
static double bar_step(float vmin, float vmax, int target)
{
    return vmax > vmin ? tick_step(vmin, vmax, target) : 1.0;
}

#define BAR_TICK 4
#define BAR_TEXT_GAP 4
#define MAX_TICKS 12

int hs_viz_colorbar_label_width(float vmin, float vmax, int scale, int bar_h)
{
    double t[MAX_TICKS];
    int target = bar_target(bar_h, scale);
    int n = hs_viz_ticks(vmin, vmax, target, t, MAX_TICKS);
    double step = bar_step(vmin, vmax, target);
    int w = 0;
    for (int i = 0; i < n; i++) {
        char buf[32];
        hs_viz_tick_label(t[i], step, buf, sizeof buf);
        int tw = hs_text_width(buf, scale, 0);
        if (tw > w)
            w = tw;
    }
    return BAR_TICK + BAR_TEXT_GAP + w;
}

void hs_viz_colorbar(hs_image *img, hs_rect bar, hs_cmap cmap, float vmin, float vmax, int scale)
{
    if (bar.w < 1 || bar.h < 2)
        return;
    for (int y = 0; y < bar.h; y++) {
        uint8_t rgb[3];
        hs_colormap_rgb(cmap, (float)(bar.h - 1 - y) / (float)(bar.h - 1), rgb);
        hs_cv_rect(img, bar.x, bar.y + y, bar.w, 1, rgb);
    }
    hs_cv_frame(img, bar.x - 1, bar.y - 1, bar.w + 2, bar.h + 2, hs_viz_frame);

    double t[MAX_TICKS];
    int target = bar_target(bar.h, scale);
    int n = hs_viz_ticks(vmin, vmax, target, t, MAX_TICKS);
    double step = bar_step(vmin, vmax, target);
    for (int i = 0; i < n; i++) {
        double f = vmax > vmin ? (t[i] - vmin) / ((double)vmax - vmin) : 0.0;
        int y = bar.y + (int)floor((1.0 - f) * (bar.h - 1) + 0.5);
        hs_cv_rect(img, bar.x + bar.w + 1, y, BAR_TICK, 1, hs_viz_frame);
        char buf[32];
        hs_viz_tick_label(t[i], step, buf, sizeof buf);
        /* centre the body of the digits (rows 0..6) on the tick */
        int ty = y - (7 * scale) / 2;
        hs_cv_text(img, bar.x + bar.w + 1 + BAR_TICK + BAR_TEXT_GAP, ty, buf, scale, hs_viz_ink,
                   0, 0);
    }
}

void hs_viz_resample(const float *src, int n, int t, float *dst)
{
    double r = (double)n / t;
    for (int oy = 0; oy < t; oy++) {
        double y0 = oy * r, y1 = (oy + 1) * r;
        int sy0 = (int)floor(y0), sy1 = (int)ceil(y1);
        if (sy1 > n)
            sy1 = n;
        for (int ox = 0; ox < t; ox++) {
            double x0 = ox * r, x1 = (ox + 1) * r;
            int sx0 = (int)floor(x0), sx1 = (int)ceil(x1);
            if (sx1 > n)
                sx1 = n;
            double sum = 0.0, wsum = 0.0;
            for (int sy = sy0; sy < sy1; sy++) {
                double wy = fmin(y1, sy + 1.0) - fmax(y0, (double)sy);
                if (wy <= 0.0)
                    continue;
                const float *row = src + (size_t)sy * (size_t)n;
                for (int sx = sx0; sx < sx1; sx++) {
                    double wx = fmin(x1, sx + 1.0) - fmax(x0, (double)sx);
                    if (wx <= 0.0 || !hs_viz_is_finite(row[sx]))
                        continue;
                    sum += wx * wy * row[sx];
                    wsum += wx * wy;
                }
            }
            dst[(size_t)oy * (size_t)t + (size_t)ox] = wsum > 0.0 ? (float)(sum / wsum) : NAN;
        }
    }
}

hs_rect hs_layout_cell(const hs_layout *l, int row, int col)
{
    hs_rect r = {0, 0, 0, 0};
    if (!l || row < 0 || col < 0 || row >= l->rows || col >= l->cols)
        return r;
    if (l->cell_w > 0 && l->cell_h > 0) {
        r.x = l->grid.x + col * (l->cell_w + l->gap);
        r.y = l->grid.y + row * (l->cell_h + l->gap);
        r.w = l->cell_w;
        r.h = l->cell_h;
        return r;
    }
    int x0 = hs_viz_edge(col, l->cols, l->grid.w), x1 = hs_viz_edge(col + 1, l->cols, l->grid.w);
    int y0 = hs_viz_edge(row, l->rows, l->grid.h), y1 = hs_viz_edge(row + 1, l->rows, l->grid.h);
    r.x = l->grid.x + x0;
    r.y = l->grid.y + y0;
    r.w = x1 - x0;
    r.h = y1 - y0;
    return r;
}

int hs_viz_label_stride(int n, double cellf, int scale, int max_labels)
{
    double line = (double)(HS_FONT_H + 2) * scale;
    int s = cellf > 0.0 ? (int)ceil(line / cellf - 1e-9) : n;
    if (s < 1)
        s = 1;
    if (max_labels > 0) {
        int m = (n + max_labels - 1) / max_labels;
        if (m > s)
            s = m;
    }
    if (s <= 5)
        return s;
    /* round up to 10, 20, 25, 50 × 10^k so the labelled indices are round numbers */
    for (long long mag = 1; mag <= 100000000; mag *= 10) {
        static const int steps[] = {10, 20, 25, 50};
        for (int i = 0; i < 4; i++)
            if (steps[i] * mag >= s)
                return (int)(steps[i] * mag);
    }
    return s;
}

int hs_viz_labels_extent(hs_viz_label_fn fn, const void *ctx, int n, int stride, int scale,
                         int flags, int max_w)
{
    int w = 0;
    for (int i = 0; i < n; i += stride) {
        char buf[32];
        int tw = hs_text_fit_width(fn(ctx, i, buf, sizeof buf), scale, flags, max_w);
        if (tw > w)
            w = tw;
    }
    return w;
}

/* Pixel centre of item i of n spread over px pixels starting at origin. */
static int item_centre(int origin, int i, int n, int px)
{
    return origin + (hs_viz_edge(i, n, px) + hs_viz_edge(i + 1, n, px)) / 2;
}

void hs_viz_labels_left(hs_image *img, hs_rect grid, hs_viz_label_fn fn, const void *ctx, int n,
                        int stride, int scale, int flags, int max_w)
{
    for (int i = 0; i < n; i += stride) {
        char buf[32];
        const char *s = fn(ctx, i, buf, sizeof buf);
        int cy = item_centre(grid.y, i, n, grid.h);
        hs_cv_rect(img, grid.x - 1 - HS_VIZ_TICK, cy, HS_VIZ_TICK, 1, hs_viz_frame);
        int w = hs_text_fit_width(s, scale, flags, max_w);
        int x = grid.x - 1 - HS_VIZ_TICK - HS_VIZ_TICK_GAP - w;
        hs_cv_text(img, x, cy - (7 * scale) / 2, s, scale, hs_viz_ink, flags, max_w);
    }
}

void hs_viz_labels_bottom(hs_image *img, hs_rect grid, hs_viz_label_fn fn, const void *ctx,
                          int n, int stride, int scale, int flags, int max_w)
{
    int y = grid.y + grid.h + 1;
    for (int i = 0; i < n; i += stride) {
        char buf[32];
        const char *s = fn(ctx, i, buf, sizeof buf);
        int cx = item_centre(grid.x, i, n, grid.w);
        hs_cv_rect(img, cx, y, 1, HS_VIZ_TICK, hs_viz_frame);
        hs_cv_text(img, cx - (7 * scale) / 2, y + HS_VIZ_TICK + HS_VIZ_TICK_GAP, s, scale,
                   hs_viz_ink, flags | HS_TEXT_ROT90, max_w);
    }
}

hs_status hs_viz_check_size(int max_size, int def, const char *what, int *out, hs_error *err)
{
    if (max_size == 0)
        max_size = def;
    if (max_size < 200 || max_size > HS_PNG_MAX_SIDE)
        return hs_fail(err, HS_E_ARG, "%s: max_size %d is outside 200..%d", what, max_size,
                       HS_PNG_MAX_SIDE);
    *out = max_size;
    return HS_OK;
}

int hs_viz_kv_band(int n_head, int s, int scale)
{
    return s > 1 && n_head % s == 0 ? HS_FONT_H * scale + 4 + 3 : 0;
}

void hs_viz_kv_groups(hs_image *img, int x0, int pitch, int cell, int n_head, int s,
                      int band_y, int top, int bottom, int scale)
{
    if (!hs_viz_kv_band(n_head, s, scale))
        return;
    int G = n_head / s, span = s * pitch - (pitch - cell);
    char buf[32];
    snprintf(buf, sizeof buf, "KV%d", G - 1);
    int stride = 1; /* names every stride-th group when they would not fit */
    while (stride < G && hs_text_width(buf, scale, 0) + 4 > stride * s * pitch)
        stride++;
    int by = band_y + HS_FONT_H * scale + 2; /* the bracket */
    for (int g = 0; g < G; g++) {
        int gx = x0 + g * s * pitch;
        hs_cv_rect(img, gx, by, span, 1, hs_viz_frame);
        hs_cv_rect(img, gx, by, 1, 4, hs_viz_frame);
        hs_cv_rect(img, gx + span - 1, by, 1, 4, hs_viz_frame);
        if (g % stride == 0) {
            snprintf(buf, sizeof buf, "KV%d", g);
            int lw = hs_text_width(buf, scale, 0);
            hs_cv_text(img, gx + (span - lw) / 2, band_y + scale, buf, scale, hs_viz_ink, 0, 0);
        }
        if (g > 0) { /* in the gap before the group, or over the cells' edges */
            int x = gx - (pitch - cell + 2) / 2;
            hs_cv_rect(img, x, top, 2, bottom - top, hs_viz_ink);
        }
    }
}

const char *hs_viz_lh_label(const void *ctx, int i, char *buf, size_t cap)
{
    const hs_viz_lh *lh = ctx;
    if (lh->window && lh->window[i] > 0)
        snprintf(buf, cap, "%c%d w%d", lh->prefix, i, lh->window[i]);
    else
        snprintf(buf, cap, "%c%d", lh->prefix, i);
    return buf;
}

#define LOCAL_LEGEND "wN: a local layer, its queries see only the last N keys"
#define LOCAL_LEGEND_GAP 10

int hs_viz_local_legend_height(const int *window, int n_layer, int scale)
{
    for (int l = 0; window && l < n_layer; l++)
        if (window[l] > 0)
            return LOCAL_LEGEND_GAP + HS_FONT_H * scale;
    return 0;
}

int hs_viz_local_legend_width(int scale) { return hs_text_width(LOCAL_LEGEND, scale, 0); }

void hs_viz_local_legend_draw(hs_image *img, int x, int y, int scale)
{
    hs_cv_text(img, x, y + LOCAL_LEGEND_GAP, LOCAL_LEGEND, scale, hs_viz_ink, 0, 0);
}
