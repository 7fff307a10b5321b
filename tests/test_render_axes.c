/* The grid of per-head values with rows and columns of its own (viz/viz_internal.h's
 * hs_viz_importance_render_axes): `headscope patch --positions each`'s
 * patching_positions.png names its rows layer.head ("1.0"; a site without heads: the layer)
 * and its columns token positions ("2"), not "L1" and "H2"; axes naming them as the public
 * renderer does draw its picture bit for bit. Labels are found pixel for pixel in the
 * picture decoded from its PNG bytes (render_util.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "headscope/render.h"
#include "../viz/canvas.h"
#include "../viz/plot.h"
#include "../viz/viz_internal.h"
#include "render_util.h"

/* Whether text s, drawn at scale sc in ink on the background, stands somewhere in r. */
static int text_at(const decoded *d, hs_rect r, const char *s, int sc)
{
    hs_image t = {0};
    int tw = hs_text_width(s, sc, 0), th = HS_FONT_H * sc, found = 0;
    cr_assert_eq(hs_cv_new(&t, tw, th, hs_viz_bg), 0);
    hs_cv_text(&t, 0, 0, s, sc, hs_viz_ink, 0, 0);
    for (int y = r.y; y + th <= r.y + r.h && !found; y++)
        for (int x = r.x; x + tw <= r.x + r.w && !found; x++) {
            int same = 1;
            for (int ty = 0; ty < th && same; ty++)
                same = !memcmp(px(d, x, y + ty), t.rgb + (size_t)ty * (size_t)tw * 3,
                               (size_t)tw * 3);
            found = same;
        }
    hs_image_free(&t);
    return found;
}

static int text_in(const decoded *d, hs_rect r, const char *s)
{
    return text_at(d, r, s, 1) || text_at(d, r, s, 2);
}

/* The picture of a (rows, cols) grid named by hs_viz_unit_label over units a layer and
 * hs_viz_index_label, decoded from its PNG; its layout in *lay. */
static decoded positions_picture(int rows, int cols, int units, hs_layout *lay)
{
    float *v = calloc((size_t)rows * (size_t)cols, sizeof *v);
    cr_assert_not_null(v);
    for (int i = 0; i < rows * cols; i++)
        v[i] = (float)(i % 5) * 0.25f - 0.5f;
    hs_importance_opts o = {.subtitle = "rows: layer.head (layer-major), columns: position",
                            .cmap = HS_CMAP_DIVERGING};
    hs_viz_axes ax = {hs_viz_unit_label, hs_viz_index_label, &units};
    hs_image img = {0};
    hs_error err = {{0}};
    cr_assert_eq(hs_viz_importance_render_axes(v, rows, cols, &o, &ax, &img, lay, &err), HS_OK,
                 "%s", err.msg);
    cr_assert_eq(lay->rows, rows);
    cr_assert_eq(lay->cols, cols);
    decoded d = via_png(&img);
    hs_image_free(&img);
    free(v);
    return d;
}

Test(render_axes, patching_positions_rows_are_layer_head_and_columns_positions)
{
    hs_layout lay;
    decoded d = positions_picture(4, 3, 2, &lay); /* 2 layers x 2 heads, 3 positions */
    hs_rect left = {0, 0, lay.grid.x, d.h}, top = {lay.grid.x, 0, lay.grid.w, lay.grid.y};
    static const char *const rows[4] = {"0.0", "0.1", "1.0", "1.1"};
    for (int r = 0; r < 4; r++)
        cr_assert(text_in(&d, left, rows[r]), "row %d is not labelled '%s'", r, rows[r]);
    for (int c = 0; c < 3; c++) {
        char want[8];
        snprintf(want, sizeof want, "%d", c);
        cr_assert(text_in(&d, top, want), "column %d is not labelled '%s'", c, want);
    }
    cr_assert(!text_in(&d, left, "L1") && !text_in(&d, left, "L3"), "rows labelled as layers");
    cr_assert(!text_in(&d, top, "H0") && !text_in(&d, top, "H2"), "columns labelled as heads");
    free(d.rgb);
}

Test(render_axes, a_site_without_heads_names_its_rows_by_layer)
{
    hs_layout lay;
    decoded d = positions_picture(3, 2, 0, &lay); /* 3 layers, 2 positions */
    hs_rect left = {0, 0, lay.grid.x, d.h};
    cr_assert(text_in(&d, left, "0") && text_in(&d, left, "2"), "rows are not the layers");
    cr_assert(!text_in(&d, left, "0.0") && !text_in(&d, left, "L2"));
    free(d.rgb);
}

static const char *lh(const void *ctx, int i, char *buf, size_t cap)
{
    snprintf(buf, cap, "%c%d", *(const char *)ctx, i);
    return buf;
}

static const char *row_lh(const void *ctx, int i, char *buf, size_t cap)
{
    (void)ctx;
    return lh("L", i, buf, cap);
}

static const char *col_lh(const void *ctx, int i, char *buf, size_t cap)
{
    (void)ctx;
    return lh("H", i, buf, cap);
}

Test(render_axes, layers_and_heads_named_as_the_public_renderer_draw_its_picture)
{
    const float v[12] = {0.1f, -0.2f, 0.3f, 0.0f, 0.05f, -0.1f, 1.5f, 0.2f, 0.0f, 0.4f, -1.0f, 0.7f};
    hs_importance_opts o = {.title = "ablation", .subtitle = "rows: layer, columns: head"};
    hs_viz_axes ax = {row_lh, col_lh, NULL};
    hs_image a = {0}, b = {0};
    hs_layout la, lb;
    hs_error err = {{0}};
    cr_assert_eq(hs_importance_render(v, 3, 4, &o, &a, &la, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_viz_importance_render_axes(v, 3, 4, &o, &ax, &b, &lb, &err), HS_OK, "%s",
                 err.msg);
    cr_assert(a.w == b.w && a.h == b.h && !memcmp(a.rgb, b.rgb, (size_t)a.w * (size_t)a.h * 3),
              "the same names drew another picture");
    cr_assert_eq(memcmp(&la, &lb, sizeof la), 0);
    hs_image_free(&a);
    hs_image_free(&b);
}
