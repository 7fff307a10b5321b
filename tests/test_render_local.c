/* Local (sliding-window) layers marked in the L x H grids (viz/viz_internal.h's
 * hs_viz_gallery_render_marked and hs_viz_importance_render_marked): a local layer's label
 * reads "L1 w48", a legend line under the picture says what "wN" means, and a grid without
 * local layers is drawn bit for bit as the public renderers draw it; analyze's gallery.png
 * of a Gemma 2 (layer 0 local, window 64) is drawn so. Pictures are decoded from their PNG
 * bytes (render_util.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "headscope/analysis.h"
#include "headscope/model.h"
#include "headscope/render.h"
#include "headscope/report.h"
#include "../viz/canvas.h"
#include "../viz/plot.h"
#include "../viz/viz_internal.h"
#include "render_util.h"
#include "testutil.h"

enum { L = 3, H = 2, N = 6 };

static float *maps(void)
{
    float *m = calloc((size_t)L * H * N * N, sizeof *m);
    for (int k = 0; k < L * H; k++)
        for (int q = 0; q < N; q++)
            m[(size_t)k * N * N + (size_t)q * N + (q + k) % N] = 1.0f;
    return m;
}

typedef struct mem_maps {
    const float *maps;
} mem_maps;

static hs_status get_map(void *user, int k, float *out, hs_error *err)
{
    (void)err;
    memcpy(out, ((const mem_maps *)user)->maps + (size_t)k * N * N, (size_t)N * N * sizeof *out);
    return HS_OK;
}

static int same_image(const hs_image *a, const hs_image *b)
{
    return a->w == b->w && a->h == b->h &&
           !memcmp(a->rgb, b->rgb, (size_t)a->w * (size_t)a->h * 3);
}

/* Ink left of the grid in the band of row r (the row's label). */
static int label_ink(const decoded *d, const hs_layout *lay, int r)
{
    hs_rect c = hs_layout_cell(lay, r, 0);
    hs_rect band = {0, c.y, lay->grid.x - 1, c.h};
    return ink_in(d, band);
}

/* The label of row 1 ("L1 w48") has more ink than those of rows 0 and 2 ("L0", "L2"), and
 * the legend line under the key or colour bar (below bottom) has ink. */
static void check_marked(const hs_image *img, const hs_layout *lay, int bottom)
{
    decoded d = via_png(img);
    int i0 = label_ink(&d, lay, 0), i1 = label_ink(&d, lay, 1), i2 = label_ink(&d, lay, 2);
    cr_assert_gt(i1, i0 + 40, "local layer's label ink %d, global's %d", i1, i0);
    cr_assert_gt(i1, i2 + 40, "local layer's label ink %d, global's %d", i1, i2);
    hs_rect legend = {0, bottom, d.w, d.h - bottom};
    cr_assert_gt(ink_in(&d, legend), 200, "no legend under the picture");
    free(d.rgb);
}

static const int none[L] = {0, 0, 0}, mixed[L] = {0, 48, 0};

Test(render_local, gallery_marks_local_layers_and_draws_the_legend)
{
    float *m = maps();
    hs_gallery_opts o = {.title = "all heads"};
    hs_image plain = {0}, zero = {0}, marked = {0};
    hs_layout lp, lz, lm;
    hs_error err = {{0}};
    mem_maps mm = {m};
    cr_assert_eq(hs_gallery_render(m, L, H, N, &o, &plain, &lp, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_viz_gallery_render_marked(get_map, &mm, L, H, N, &o, none, &zero, &lz, &err),
                 HS_OK, "%s", err.msg);
    cr_assert(same_image(&plain, &zero), "no local layer: not the picture without the option");
    cr_assert_eq(hs_viz_gallery_render_marked(get_map, &mm, L, H, N, &o, mixed, &marked, &lm, &err),
                 HS_OK, "%s", err.msg);
    /* the wider label moves the grid right; the legend adds a line under the key */
    cr_assert_gt(lm.grid.x, lp.grid.x);
    cr_assert_eq(lm.cell_w, lp.cell_w);
    cr_assert_geq(marked.h, plain.h + HS_FONT_H);
    check_marked(&marked, &lm, plain.h - HS_VIZ_MARGIN);
    /* the thumbnails are the same pixels, shifted */
    decoded a = via_png(&plain), b = via_png(&marked);
    for (int r = 0; r < L; r++)
        for (int c = 0; c < H; c++) {
            hs_rect ta = hs_layout_cell(&lp, r, c), tb = hs_layout_cell(&lm, r, c);
            for (int y = 0; y < ta.h; y++)
                cr_assert_eq(memcmp(px(&a, ta.x, ta.y + y), px(&b, tb.x, tb.y + y),
                                    (size_t)ta.w * 3), 0, "thumbnail (%d, %d) row %d", r, c, y);
        }
    free(a.rgb);
    free(b.rgb);
    hs_image_free(&plain);
    hs_image_free(&zero);
    hs_image_free(&marked);
    free(m);
}

Test(render_local, importance_marks_local_layers_and_draws_the_legend)
{
    const float v[L * H] = {0.1f, -0.2f, 0.3f, 0.0f, 0.05f, -0.1f};
    hs_importance_opts o = {.title = "ablation"};
    hs_image plain = {0}, zero = {0}, marked = {0};
    hs_layout lp, lz, lm;
    hs_error err = {{0}};
    cr_assert_eq(hs_importance_render(v, L, H, &o, &plain, &lp, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_viz_importance_render_marked(v, L, H, &o, none, &zero, &lz, &err), HS_OK, "%s",
                 err.msg);
    cr_assert(same_image(&plain, &zero), "no local layer: not the picture without the option");
    cr_assert_eq(hs_viz_importance_render_marked(v, L, H, &o, mixed, &marked, &lm, &err), HS_OK,
                 "%s", err.msg);
    cr_assert_gt(lm.grid.x, lp.grid.x);
    cr_assert_geq(marked.h, plain.h + HS_FONT_H);
    check_marked(&marked, &lm, plain.h - HS_VIZ_MARGIN);
    /* cells keep their colours */
    decoded d = via_png(&marked);
    hs_rect c = hs_layout_cell(&lm, 0, 1);
    assert_cmap_at(&d, c.x + 1, c.y + 1, HS_CMAP_DIVERGING, 1.0f / 6.0f, "-0.2 of +-0.3");
    c = hs_layout_cell(&lm, 1, 0);
    assert_cmap_at(&d, c.x + 1, c.y + 1, HS_CMAP_DIVERGING, 1.0f, "+0.3");
    free(d.rgb);
    hs_image_free(&plain);
    hs_image_free(&zero);
    hs_image_free(&marked);
}

static hs_status zero_map(void *user, int k, float *out, hs_error *err)
{
    (void)user, (void)k, (void)err;
    memset(out, 0, 36 * sizeof *out);
    return HS_OK;
}

/* Width and height of the PNG file at path (its IHDR). */
static void png_size(const char *path, int *w, int *h)
{
    unsigned char b[24];
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "no %s", path);
    cr_assert_eq(fread(b, 1, 24, f), 24u);
    fclose(f);
    *w = (b[16] << 24) | (b[17] << 16) | (b[18] << 8) | b[19];
    *h = (b[20] << 24) | (b[21] << 16) | (b[22] << 8) | b[23];
}

Test(render_local, analyze_marks_the_local_layers_of_gemma2)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load("fixtures/family-models/tiny-gemma2", &m, &err), HS_OK, "%s", err.msg);
    int32_t ids[6] = {2, 40, 41, 42, 40, 41};
    hs_analyze_opts o;
    hs_analyze_opts_default(&o);
    o.ablation = o.gradient = o.probe = o.composition = o.rollout = o.dla = o.norm_based = 0;
    hs_analyze_input in = {.ids = ids, .n = 6};
    hs_analysis *a = NULL;
    cr_assert_eq(hs_analyze_run(m, &in, &o, &a, &err), HS_OK, "%s", err.msg);
    char dir[64], path[128], **files = NULL;
    int nf = 0;
    tu_mkdtemp(dir, sizeof dir);
    cr_assert_eq(hs_pictures_write(a, dir, 0, HS_PICTURES_PNG, &files, &nf, &err), HS_OK, "%s", err.msg);
    snprintf(path, sizeof path, "%s/gallery.png", dir);
    int w, h;
    png_size(path, &w, &h);
    /* the same grid (2 layers x 2 heads of 6 tokens, one KV head) drawn with and without
     * layer 0 marked local: the file is the marked one's size */
    float *z = calloc(4 * 36, sizeof *z);
    const int win[2] = {64, 0};
    hs_gallery_opts g = {.title = "attention of every head (each scaled to its own maximum), "
                                  "grouped by the key/value head it reads",
                         .heads_per_group = 2};
    hs_image plain = {0}, marked = {0};
    cr_assert_eq(hs_gallery_render(z, 2, 2, 6, &g, &plain, NULL, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_viz_gallery_render_marked(zero_map, NULL, 2, 2, 6, &g, win, &marked, NULL, &err),
                 HS_OK, "%s", err.msg);
    cr_assert(marked.w != plain.w || marked.h != plain.h);
    cr_assert(w == marked.w && h == marked.h, "gallery.png is %dx%d: the marked grid is %dx%d, "
              "the plain %dx%d", w, h, marked.w, marked.h, plain.w, plain.h);
    hs_image_free(&plain);
    hs_image_free(&marked);
    free(z);
    for (int i = 0; i < nf; i++)
        free(files[i]);
    free(files);
    tu_rm_rf(dir);
    hs_analysis_free(a);
    hs_model_free(m);
}
