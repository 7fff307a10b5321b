/* Composition scores as three head-by-head panels (Q, K, V): rows are the writing (earlier)
 * head, columns the reading (later) head, with the strongest pairs of each panel framed
 * and listed beneath. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/core.h"
#include "plot.h"

#define PANEL_GAP 28
#define BAR_GAP 20
#define BAR_W 16
#define TITLE_GAP 14
#define TARGET_PANEL 360
#define MAX_CELL 28

static const uint8_t top_rgb[3] = {230, 30, 30};

typedef struct head_names {
    int n_head;
} head_names;

static const char *head_label(const void *ctx, int i, char *buf, size_t cap)
{
    int H = ((const head_names *)ctx)->n_head;
    snprintf(buf, cap, "%d.%d", i / H, i % H);
    return buf;
}

hs_status hs_composition_render(const hs_composition *c, const char *title, int top,
                                hs_image *out, hs_error *err)
{
    if (!out)
        return hs_fail(err, HS_E_ARG, "composition: output image is NULL");
    out->w = out->h = 0;
    out->rgb = NULL;
    if (!c || c->n_heads < 1 || c->n_heads > 4096)
        return hs_fail(err, HS_E_ARG, "composition: no scores to draw");
    int N = c->n_heads;
    if (top < 0)
        top = 0;
    if (top > 64)
        top = 64;
    const double *m[3] = {c->q, c->k, c->v};
    static const char *const names[3] = {"Q-composition", "K-composition", "V-composition"};
    float vmax = 0;
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < (size_t)N * N; i++)
            if (m[k][i] == m[k][i] && (float)m[k][i] > vmax)
                vmax = (float)m[k][i];
    if (!(vmax > 0))
        vmax = 1;

    int cell = TARGET_PANEL / N;
    if (cell > MAX_CELL)
        cell = MAX_CELL;
    if (cell < 1)
        cell = 1;
    int g = N * cell;
    int ls = 1;
    head_names hn = {c->n_head};
    int stride = hs_viz_label_stride(N, cell, ls, 0);
    if (stride > 1 && c->n_head > 1) /* label whole layers: stride a multiple of n_head */
        stride = ((stride + c->n_head - 1) / c->n_head) * c->n_head;
    int lab_w = hs_viz_labels_extent(head_label, &hn, N, stride, ls, 0, 0);
    const int M = HS_VIZ_MARGIN;
    int lead = HS_VIZ_TICK + HS_VIZ_TICK_GAP + 1;
    int th = hs_viz_title_height(title, "rows: writing head (earlier layer); columns: reading "
                                        "head; framed: the strongest pairs", ls);
    int head_h = HS_FONT_H * ls + 6; /* panel names */
    int gy = M + (th ? th + TITLE_GAP : 0) + head_h;
    int px0 = M + lab_w + lead;
    int bar_x = px0 + 3 * g + 2 * PANEL_GAP + BAR_GAP;
    int w = bar_x + BAR_W + 1 + hs_viz_colorbar_label_width(0, vmax, ls, g) + M;
    int tw = hs_viz_title_width(title, NULL, ls);
    if (M + tw + M > w)
        w = M + tw + M;
    int list_lines = top ? top + 1 : 0;
    int h = gy + g + lab_w + lead + 8 + list_lines * (HS_FONT_H + 4) + M;
    if (w > HS_PNG_MAX_SIDE || h > HS_PNG_MAX_SIDE)
        return hs_fail(err, HS_E_ARG, "composition: image would be %dx%d, over %d", w, h,
                       HS_PNG_MAX_SIDE);
    if (hs_cv_new(out, w, h, hs_viz_bg) != 0)
        return hs_fail(err, HS_E_NOMEM, "composition: out of memory for a %dx%d image", w, h);
    hs_viz_title_draw(out, M, M, title, "rows: writing head (earlier layer); columns: reading "
                                        "head; framed: the strongest pairs", ls);

    int *from = malloc((size_t)(top ? top : 1) * sizeof *from);
    int *to = malloc((size_t)(top ? top : 1) * sizeof *to);
    if (!from || !to) {
        free(from);
        free(to);
        hs_image_free(out);
        return hs_fail(err, HS_E_NOMEM, "composition: out of memory");
    }
    int ly = gy + g + lab_w + lead + 8;
    char buf[96];
    if (top) {
        hs_cv_text(out, M, ly, "strongest (score, from -> to):", ls, hs_viz_ink, 0, 0);
        ly += HS_FONT_H + 4;
    }
    for (int k = 0; k < 3; k++) {
        int gx = px0 + k * (g + PANEL_GAP);
        hs_cv_text(out, gx, gy - head_h, names[k], ls, hs_viz_ink, 0, 0);
        for (int a = 0; a < N; a++)
            for (int b = 0; b < N; b++) {
                uint8_t rgb[3];
                hs_viz_value_rgb(HS_CMAP_VIRIDIS, (float)m[k][(size_t)a * N + b], 0, vmax, rgb);
                hs_cv_rect(out, gx + b * cell, gy + a * cell, cell, cell, rgb);
            }
        for (int l = 1; l < c->n_layer && cell * c->n_head >= 4; l++) { /* layer rules */
            int p = l * c->n_head * cell;
            hs_cv_rect(out, gx + p, gy, 1, g, hs_viz_bg);
            hs_cv_rect(out, gx, gy + p, g, 1, hs_viz_bg);
        }
        hs_cv_frame(out, gx - 1, gy - 1, g + 2, g + 2, hs_viz_frame);
        hs_rect grid = {gx, gy, g, g};
        if (k == 0)
            hs_viz_labels_left(out, grid, head_label, &hn, N, stride, ls, 0, 0);
        hs_viz_labels_bottom(out, grid, head_label, &hn, N, stride, ls, 0, 0);
        int n = hs_composition_strongest(c, k, from, to, top);
        for (int i = 0; i < n; i++) {
            int fw = cell >= 5 ? cell + 2 : 5;
            hs_cv_frame(out, gx + to[i] * cell + cell / 2 - fw / 2,
                        gy + from[i] * cell + cell / 2 - fw / 2, fw, fw, top_rgb);
            snprintf(buf, sizeof buf, "%.3f %d.%d->%d.%d", m[k][(size_t)from[i] * N + to[i]],
                     from[i] / c->n_head, from[i] % c->n_head, to[i] / c->n_head,
                     to[i] % c->n_head);
            hs_cv_text(out, gx, ly + i * (HS_FONT_H + 4), buf, ls, hs_viz_ink, 0, 0);
        }
    }
    free(from);
    free(to);
    hs_rect bar = {bar_x, gy, BAR_W, g};
    hs_viz_colorbar(out, bar, HS_CMAP_VIRIDIS, 0, vmax, ls);
    return HS_OK;
}
