/* Every head at a glance: an n_layer × n_head grid of attention thumbnails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "plot.h"
#include "viz_internal.h"

#define MAX_LH 256
#define MAX_N 16384
#define MAX_THUMB 128
#define MIN_THUMB 4
#define TITLE_GAP 12
#define LABEL_GAP 6
#define KEY_GAP 16 /* between the grid and the colour key below it */
#define KEY_W 160
#define KEY_H 12


/* Thumbnail side for count thumbnails in avail pixels with gap between them. */
static int thumb_side(int avail, int count, int gap)
{
    return (avail - (count - 1) * gap) / count;
}

/* hs_map_fn over maps: (count, n, n) in one array. */
typedef struct mem_maps {
    const float *maps;
    size_t nn;
} mem_maps;

static hs_status mem_map(void *user, int k, float *out, hs_error *err)
{
    (void)err;
    const mem_maps *mm = user;
    memcpy(out, mm->maps + (size_t)k * mm->nn, mm->nn * sizeof *out);
    return HS_OK;
}

hs_status hs_gallery_render(const float *maps, int n_layer, int n_head, int n,
                            const hs_gallery_opts *opts, hs_image *out, hs_layout *layout,
                            hs_error *err)
{
    if (out) {
        out->w = out->h = 0;
        out->rgb = NULL;
    }
    if (out && !maps)
        return hs_fail(err, HS_E_ARG, "gallery: maps is NULL");
    mem_maps mm = {maps, (size_t)(n > 0 ? n : 0) * (size_t)(n > 0 ? n : 0)};
    return hs_gallery_render_from(mem_map, &mm, n_layer, n_head, n, opts, out, layout, err);
}

hs_status hs_gallery_render_from(hs_map_fn get, void *user, int n_layer, int n_head, int n,
                                 const hs_gallery_opts *opts, hs_image *out,
                                 hs_layout *layout, hs_error *err)
{
    return hs_viz_gallery_render_marked(get, user, n_layer, n_head, n, opts, NULL, out, layout,
                                        err);
}

/* Where everything of one gallery goes: the thumbnails (side t, gap between them, cell
 * pixels a token when the maps are drawn whole, 0 when resampled), the labels (scale ls,
 * every row_stride-th layer and col_stride-th head), the grid at (gx, gy) of gw x gh
 * under the KV band at band_y, the key at key_y, the title (th high, tw wide), the local
 * legend (lg high) and the image's w x h. */
typedef struct gallery_geom {
    int t, gap, cell, pitch, ls;
    hs_viz_lh rowl, coll;
    int row_stride, col_stride;
    int gx, gy, gw, gh, band_y, key_y, key_h, th, tw, lg, w, h;
} gallery_geom;

/* hs_viz_gallery_render_marked's stages, defined below it in the order it runs them */
static hs_status gallery_check(int n_layer, int n_head, int n, const hs_gallery_opts *opts,
                               int *max_size, hs_error *err);
static void gallery_thumbs(gallery_geom *g, int max_size, int n_layer, int n_head, int n,
                           const hs_gallery_opts *opts);
static void gallery_place(gallery_geom *g, int n_layer, int n_head, const int *layer_window,
                          const hs_gallery_opts *opts);
static void draw_thumb(hs_image *out, const gallery_geom *g, hs_cmap cmap, const float *m,
                       int n, float *small, int x0, int y0);
static int draw_frame(hs_image *out, const gallery_geom *g, int n_layer, int n_head, int grp,
                      hs_cmap cmap);

hs_status hs_viz_gallery_render_marked(hs_map_fn get, void *user, int n_layer, int n_head,
                                       int n, const hs_gallery_opts *opts,
                                       const int *layer_window, hs_image *out,
                                       hs_layout *layout, hs_error *err)
{
    static const hs_gallery_opts defaults = {0};
    float *small = NULL, *m = NULL;
    hs_status st;
    if (!out)
        return hs_fail(err, HS_E_ARG, "gallery: output image is NULL");
    out->w = out->h = 0;
    out->rgb = NULL;
    if (!get)
        return hs_fail(err, HS_E_ARG, "gallery: maps is NULL");
    if (!opts)
        opts = &defaults;
    int max_size;
    if ((st = gallery_check(n_layer, n_head, n, opts, &max_size, err)) != HS_OK)
        return st;
    gallery_geom g;
    gallery_thumbs(&g, max_size, n_layer, n_head, n, opts);
    gallery_place(&g, n_layer, n_head, layer_window, opts);
    const int M = HS_VIZ_MARGIN;
    int t = g.t, w = g.w, h = g.h;
    if (w > HS_PNG_MAX_SIDE || h > HS_PNG_MAX_SIDE)
        return hs_fail(err, HS_E_ARG, "gallery: image would be %dx%d, over %d", w, h,
                       HS_PNG_MAX_SIDE);

    if (!g.cell) {
        small = malloc((size_t)t * (size_t)t * sizeof *small);
        if (!small)
            return hs_fail(err, HS_E_NOMEM, "gallery: out of memory for a %dx%d thumbnail", t,
                           t);
    }
    m = malloc((size_t)n * (size_t)n * sizeof *m); /* (n, n) the map at hand */
    if (!m) {
        st = hs_fail(err, HS_E_NOMEM, "gallery: out of memory for a %d x %d map", n, n);
        goto fail;
    }
    if (hs_cv_new(out, w, h, hs_viz_bg) != 0) {
        st = hs_fail(err, HS_E_NOMEM, "gallery: out of memory for a %dx%d image", w, h);
        goto fail;
    }
    hs_viz_title_draw(out, M, M, opts->title, NULL, 1);
    for (int l = 0; l < n_layer; l++)
        for (int hd = 0; hd < n_head; hd++) {
            if ((st = get(user, l * n_head + hd, m, err)) != HS_OK)
                goto fail;
            draw_thumb(out, &g, opts->cmap, m, n, small, g.gx + hd * g.pitch, g.gy + l * g.pitch);
        }
    int kx = draw_frame(out, &g, n_layer, n_head, opts->heads_per_group, opts->cmap);

    if (layout)
        *layout = (hs_layout){.grid = {g.gx, g.gy, g.gw, g.gh}, .rows = n_layer, .cols = n_head,
                              .cell_w = t, .cell_h = t, .gap = g.gap,
                              .title = {M, M, g.th ? g.tw : 0, g.th},
                              .colorbar = {kx, g.key_y, KEY_W * g.ls, g.key_h}, .vmin = 0.0f,
                              .vmax = 1.0f,
                              .label_stride = g.row_stride > g.col_stride ? g.row_stride
                                                                          : g.col_stride};
    free(m);
    free(small);
    return HS_OK;

fail:
    free(m);
    free(small);
    hs_image_free(out);
    return st;
}

/* The arguments' checks, before anything is drawn: opts not NULL; *max_size the picture's
 * largest side. */
static hs_status gallery_check(int n_layer, int n_head, int n, const hs_gallery_opts *opts,
                               int *max_size, hs_error *err)
{
    hs_status st;
    if (n_layer < 1 || n_layer > MAX_LH || n_head < 1 || n_head > MAX_LH)
        return hs_fail(err, HS_E_SHAPE, "gallery: %d layers x %d heads, expected 1..%d each",
                       n_layer, n_head, MAX_LH);
    if (n < 1 || n > MAX_N)
        return hs_fail(err, HS_E_SHAPE, "gallery: maps have %d tokens, expected 1..%d", n,
                       MAX_N);
    if (!hs_colormap_name(opts->cmap))
        return hs_fail(err, HS_E_ARG, "gallery: unknown colour map %d", (int)opts->cmap);
    if ((st = hs_viz_check_size(opts->max_size, 2400, "gallery", max_size, err)) != HS_OK)
        return st;
    int grp = opts->heads_per_group;
    if (grp < 0 || (grp > 1 && n_head % grp))
        return hs_fail(err, HS_E_ARG, "gallery: %d heads per KV group do not divide %d heads",
                       grp, n_head);
    size_t total;
    if (hs_mul_size((size_t)n * (size_t)n, (size_t)n_layer * (size_t)n_head, &total) != 0)
        return hs_fail(err, HS_E_NOMEM, "gallery: %d x %d maps of %d tokens overflow", n_layer,
                       n_head, n);
    return HS_OK;
}

/* The thumbnail size (g->t, gap, cell, pitch, ls): fit both directions with room for
 * labels, title and key (estimated at label scale 2), then snap to whole cells when
 * upsampling. */
static void gallery_thumbs(gallery_geom *g, int max_size, int n_layer, int n_head, int n,
                           const hs_gallery_opts *opts)
{
    const int M = HS_VIZ_MARGIN;
    int th = hs_viz_title_height(opts->title, NULL, 1);
    int head_room = (th ? th + TITLE_GAP : 0) + 2 * HS_FONT_H + LABEL_GAP +
                    hs_viz_kv_band(n_head, opts->heads_per_group, 2);
    int avail_w = max_size - 2 * M - 4 * 2 * HS_FONT_ADV - LABEL_GAP;
    int avail_h = max_size - 2 * M - head_room - KEY_GAP - 2 * KEY_H;
    int gap = 4, t = 0;
    for (;;) {
        int tw_ = thumb_side(avail_w, n_head, gap), th_ = thumb_side(avail_h, n_layer, gap);
        t = tw_ < th_ ? tw_ : th_;
        if (t >= 24 || gap == 1)
            break;
        gap = gap == 4 ? 2 : 1;
    }
    if (t > MAX_THUMB)
        t = MAX_THUMB;
    if (t < MIN_THUMB)
        t = MIN_THUMB;
    if (n <= t)
        t = n * (t / n);
    g->t = t;
    g->gap = gap;
    g->cell = n <= t ? t / n : 0;
    g->pitch = t + gap;
    g->ls = t >= 40 ? 2 : 1;
}

/* The labels, the grid, the key and the image's size (g->row_stride .. g->h) around the
 * thumbnails of gallery_thumbs. */
static void gallery_place(gallery_geom *g, int n_layer, int n_head, const int *layer_window,
                          const hs_gallery_opts *opts)
{
    const int M = HS_VIZ_MARGIN;
    int ls = g->ls, pitch = g->pitch, grp = opts->heads_per_group;
    char buf[32];
    /* labels: "L0".. at the left, "H0".. above; stride when they do not fit */
    g->rowl = (hs_viz_lh){'L', layer_window};
    g->coll = (hs_viz_lh){'H', NULL};
    g->row_stride = hs_viz_label_stride(n_layer, pitch, ls, 0);
    int col_lab_w = hs_text_width(hs_viz_lh_label(&g->coll, n_head - 1, buf, sizeof buf), ls, 0);
    g->col_stride = (col_lab_w + 6 + pitch - 1) / pitch;
    if (g->col_stride < 1)
        g->col_stride = 1;
    int row_lab_w =
        hs_viz_labels_extent(hs_viz_lh_label, &g->rowl, n_layer, g->row_stride, ls, 0, 0);

    g->th = hs_viz_title_height(opts->title, NULL, 1);
    g->gx = M + row_lab_w + LABEL_GAP;
    g->band_y = M + (g->th ? g->th + TITLE_GAP : 0);
    g->gy = g->band_y + hs_viz_kv_band(n_head, grp, ls) + HS_FONT_H * ls + LABEL_GAP;
    g->gw = n_head * pitch - g->gap;
    g->gh = n_layer * pitch - g->gap;
    g->key_y = g->gy + g->gh + KEY_GAP;
    g->key_h = KEY_H * ls;
    int w = g->gx + g->gw + M;
    int key_right = g->gx + hs_text_width("0", ls, 0) + 6 + KEY_W * ls + 6 +
                    hs_text_width("max of each head", ls, 0) + M;
    if (key_right > w)
        w = key_right;
    g->tw = hs_viz_title_width(opts->title, NULL, 1);
    if (M + g->tw + M > w)
        w = M + g->tw + M;
    g->lg = hs_viz_local_legend_height(layer_window, n_layer, ls);
    if (g->lg && g->gx + hs_viz_local_legend_width(ls) + M > w)
        w = g->gx + hs_viz_local_legend_width(ls) + M;
    g->w = w;
    g->h = g->key_y + g->key_h + g->lg + M;
}

/* One thumbnail of the map m: (n, n) at (x0, y0), each map from 0 to its own maximum:
 * cell-pixel squares a token, or resampled into small (t, t). */
static void draw_thumb(hs_image *out, const gallery_geom *g, hs_cmap cmap, const float *m,
                       int n, float *small, int x0, int y0)
{
    size_t nn = (size_t)n * (size_t)n;
    int cell = g->cell, t = g->t;
    float mx = 0.0f;
    for (size_t i = 0; i < nn; i++)
        if (hs_viz_is_finite(m[i]) && m[i] > mx)
            mx = m[i];
    float scale = mx > 0.0f ? mx : 1.0f;
    if (cell) {
        for (int q = 0; q < n; q++) {
            for (int k = 0; k < n; k++) {
                uint8_t rgb[3];
                float v = m[(size_t)q * n + k];
                /* an all-zero map draws as 0; 0 * v keeps NaN grey */
                hs_viz_value_rgb(cmap, mx > 0.0f ? v : 0.0f * v, 0.0f, scale, rgb);
                hs_cv_rect(out, x0 + k * cell, y0 + q * cell, cell, cell, rgb);
            }
        }
    } else {
        hs_viz_resample(m, n, t, small);
        for (int y = 0; y < t; y++) {
            for (int x = 0; x < t; x++) {
                uint8_t rgb[3];
                float v = small[(size_t)y * t + x];
                hs_viz_value_rgb(cmap, mx > 0.0f ? v : 0.0f * v, 0.0f, scale, rgb);
                hs_cv_pixel(out, x0 + x, y0 + y, rgb);
            }
        }
    }
}

/* The layer and head labels, the KV groups' band and the colour key with the local legend:
 * returns the key's gradient's left edge. */
static int draw_frame(hs_image *out, const gallery_geom *g, int n_layer, int n_head, int grp,
                      hs_cmap cmap)
{
    int ls = g->ls, pitch = g->pitch, t = g->t, gx = g->gx, gy = g->gy;
    char buf[32];
    for (int l = 0; l < n_layer; l += g->row_stride) {
        const char *s = hs_viz_lh_label(&g->rowl, l, buf, sizeof buf);
        int lw = hs_text_width(s, ls, 0);
        int cy = gy + l * pitch + t / 2;
        hs_cv_text(out, gx - LABEL_GAP - lw, cy - (7 * ls) / 2, s, ls, hs_viz_ink, 0, 0);
    }
    for (int hd = 0; hd < n_head; hd += g->col_stride) {
        const char *s = hs_viz_lh_label(&g->coll, hd, buf, sizeof buf);
        int lw = hs_text_width(s, ls, 0);
        int cx = gx + hd * pitch + t / 2;
        hs_cv_text(out, cx - lw / 2, gy - LABEL_GAP - HS_FONT_H * ls + 2 * ls, s, ls, hs_viz_ink,
                   0, 0);
    }

    hs_viz_kv_groups(out, gx, pitch, t, n_head, grp, g->band_y, gy, gy + g->gh, ls);

    /* colour key: each thumbnail runs from 0 to its own maximum */
    int key_y = g->key_y, key_h = g->key_h;
    int kx = gx, kw = KEY_W * ls, ty = key_y + (key_h - 7 * ls) / 2;
    kx += hs_cv_text(out, kx, ty, "0", ls, hs_viz_ink, 0, 0) + 6;
    for (int x = 0; x < kw; x++) {
        uint8_t rgb[3];
        hs_colormap_rgb(cmap, (float)x / (float)(kw - 1), rgb);
        hs_cv_rect(out, kx + x, key_y, 1, key_h, rgb);
    }
    hs_cv_frame(out, kx - 1, key_y - 1, kw + 2, key_h + 2, hs_viz_frame);
    hs_cv_text(out, kx + kw + 6, ty, "max of each head", ls, hs_viz_ink, 0, 0);
    if (g->lg)
        hs_viz_local_legend_draw(out, gx, key_y + key_h, ls);
    return kx;
}

hs_status hs_gallery_write(const char *path, const float *maps, int n_layer, int n_head, int n,
                           const hs_gallery_opts *opts, hs_error *err)
{
    if (!maps)
        return hs_fail(err, HS_E_ARG, "gallery: maps is NULL");
    mem_maps mm = {maps, (size_t)(n > 0 ? n : 0) * (size_t)(n > 0 ? n : 0)};
    return hs_gallery_write_from(path, mem_map, &mm, n_layer, n_head, n, opts, err);
}

hs_status hs_gallery_write_from(const char *path, hs_map_fn get, void *user, int n_layer,
                                int n_head, int n, const hs_gallery_opts *opts, hs_error *err)
{
    return hs_viz_gallery_write_marked(path, get, user, n_layer, n_head, n, opts, NULL, err);
}

hs_status hs_viz_gallery_write_marked(const char *path, hs_map_fn get, void *user, int n_layer,
                                      int n_head, int n, const hs_gallery_opts *opts,
                                      const int *layer_window, hs_error *err)
{
    hs_image img = {0};
    hs_status st = hs_viz_gallery_render_marked(get, user, n_layer, n_head, n, opts, layer_window,
                                                &img, NULL, err);
    if (st != HS_OK)
        return st;
    st = hs_png_write(path, img.rgb, img.w, img.h, err);
    hs_image_free(&img);
    return st;
}
