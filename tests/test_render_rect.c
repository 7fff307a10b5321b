/* The rectangular heatmap (hs_heatmap_rect_render: an encoder-decoder's cross-attention,
 * decoder queries x encoder keys): cells where the layout says, the grid as wide as the
 * columns and as high as the rows, each axis with its own labels and title, a square map
 * drawn as hs_heatmap_render draws it, and the refusals. Pixels are read from the PNG
 * decoded again by libpng (render_util.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "headscope/render.h"
#include "../viz/canvas.h"
#include "../viz/plot.h"
#include "render_util.h"

static const char *const dec2[2] = {"<pad>", " The"};
static const char *const enc3[3] = {" The", " cat", "</s>"};

Test(heatmap_rect, cells_rows_and_columns_where_the_layout_says)
{
    const float map[6] = {1.0f, 0.0f, 0.25f, 0.5f, 0.75f, 0.0f};
    hs_heatmap_axes ax = {2, 3, dec2, enc3, "query (decoder)", "key (encoder)"};
    hs_heatmap_opts o = {.title = "cross0.0"};
    hs_image img = {0};
    hs_layout lay;
    hs_error err = {{0}};
    cr_assert_eq(hs_heatmap_rect_render(map, &ax, &o, &img, &lay, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(lay.rows, 2);
    cr_assert_eq(lay.cols, 3);
    cr_assert_gt(lay.cell_w, 10);
    cr_assert_eq(lay.grid.w, 3 * lay.cell_w);
    cr_assert_eq(lay.grid.h, 2 * lay.cell_h);
    decoded d = via_png(&img);
    for (int q = 0; q < 2; q++)
        for (int k = 0; k < 3; k++) {
            hs_rect c = centre_of(hs_layout_cell(&lay, q, k));
            assert_cmap_at(&d, c.x, c.y, HS_CMAP_VIRIDIS, map[q * 3 + k], "cell");
        }
    /* the key axis's title below the grid, the query axis's at the left: ink in both */
    hs_rect below = {lay.grid.x, lay.grid.y + lay.grid.h + 2, lay.grid.w, img.h - lay.grid.y - lay.grid.h - 2};
    hs_rect left = {0, lay.grid.y, lay.grid.x - 2, lay.grid.h};
    cr_assert_gt(ink_in(&d, below), 0);
    cr_assert_gt(ink_in(&d, left), 0);
    free(d.rgb);
    hs_image_free(&img);
}

Test(heatmap_rect, a_square_map_is_hs_heatmap_render_s_picture)
{
    const float map[9] = {1.0f, 0.0f, 0.0f, 0.5f, 0.5f, 0.0f, 0.0f, 0.25f, 0.75f};
    const char *const tok3[3] = {"The", " cat", "\n"};
    hs_heatmap_axes ax = {3, 3, tok3, tok3, NULL, NULL};
    hs_heatmap_opts o = {.title = "L0.H0", .subtitle = "a square map"};
    hs_image a = {0}, b = {0};
    cr_assert_eq(hs_heatmap_render(map, 3, tok3, &o, &a, NULL, NULL), HS_OK);
    cr_assert_eq(hs_heatmap_rect_render(map, &ax, &o, &b, NULL, NULL), HS_OK);
    cr_assert_eq(a.w, b.w);
    cr_assert_eq(a.h, b.h);
    cr_assert(!memcmp(a.rgb, b.rgb, (size_t)a.w * a.h * 3));
    hs_image_free(&a);
    hs_image_free(&b);
}

Test(heatmap_rect, a_wide_map_past_the_picture_s_budget_is_area_averaged)
{
    int rows = 4, cols = 3000;
    float *map = malloc((size_t)rows * cols * sizeof *map);
    for (int i = 0; i < rows * cols; i++) /* row q: q / 3 everywhere */
        map[i] = (float)(i / cols) / 3.0f;
    hs_heatmap_axes ax = {rows, cols, NULL, NULL, NULL, NULL};
    hs_image img = {0};
    hs_layout lay;
    cr_assert_eq(hs_heatmap_rect_render(map, &ax, NULL, &img, &lay, NULL), HS_OK);
    cr_assert_eq(lay.cell_w, 0);
    cr_assert_lt(lay.grid.w, cols);
    cr_assert_lt(lay.grid.h, lay.grid.w);
    decoded d = via_png(&img);
    for (int q = 0; q < rows; q++) { /* the middle of each row's band, any column */
        int y = lay.grid.y + (2 * q + 1) * lay.grid.h / (2 * rows);
        assert_cmap_at(&d, lay.grid.x + lay.grid.w / 2, y, HS_CMAP_VIRIDIS, (float)q / 3.0f, "band");
    }
    free(d.rgb);
    hs_image_free(&img);
    free(map);
}

Test(heatmap_rect, refuses_bad_shapes_with_a_message)
{
    const float map[2] = {0.5f, 0.5f};
    hs_heatmap_axes ax = {0, 2, NULL, NULL, NULL, NULL};
    hs_image img = {0};
    hs_error err = {{0}};
    cr_assert_eq(hs_heatmap_rect_render(map, &ax, NULL, &img, NULL, &err), HS_E_SHAPE);
    cr_assert_str_eq(err.msg, "heatmap: map has 0 x 2 tokens, expected 1..16384 each");
    cr_assert_null(img.rgb);
    cr_assert_eq(hs_heatmap_rect_render(map, NULL, NULL, &img, NULL, &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "heatmap: axes is NULL");
}
