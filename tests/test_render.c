/* Picture layer: the renderers (heatmap, gallery, similarity, importance, ticks, SVG).
 * Pictures are checked by decoding the encoded PNG with libpng's simplified read
 * API (an independent decoder path) and looking at exact pixels where the layout
 * says cells, bands and bars are; PNG encoding, colour maps and the font are
 * test_render_basics.c's. */
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "headscope/render.h"
#include "../viz/canvas.h"
#include "../viz/plot.h"
#include "render_util.h"

/* ---- heatmap ------------------------------------------------------------ */

static const char *const tok3[3] = {"The", " cat", "\n"};

Test(heatmap, cells_show_the_colour_map_values)
{
    const float map[9] = {1.0f, 0.0f, 0.0f, 0.5f, 0.5f, 0.0f, 0.0f, 0.25f, 0.75f};
    hs_heatmap_opts o = {0};
    o.title = "L0.H0 test";
    hs_image img = {0};
    hs_layout lay;
    hs_error err = {{0}};
    cr_assert_eq(hs_heatmap_render(map, 3, tok3, &o, &img, &lay, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(lay.rows, 3);
    cr_assert_eq(lay.cols, 3);
    cr_assert_gt(lay.cell_w, 10);
    cr_assert_eq(lay.grid.w, 3 * lay.cell_w);
    decoded d = via_png(&img);
    for (int q = 0; q < 3; q++)
        for (int k = 0; k < 3; k++) {
            hs_rect c = centre_of(hs_layout_cell(&lay, q, k));
            char what[32];
            snprintf(what, sizeof what, "cell (%d, %d)", q, k);
            assert_cmap_at(&d, c.x, c.y, HS_CMAP_VIRIDIS, map[q * 3 + k], what);
        }
    /* the corners of a cell too: no grid lines drawn over cells */
    hs_rect c00 = hs_layout_cell(&lay, 0, 0);
    assert_cmap_at(&d, c00.x, c00.y, HS_CMAP_VIRIDIS, 1.0f, "cell (0,0) corner");
    assert_cmap_at(&d, c00.x + c00.w - 1, c00.y + c00.h - 1, HS_CMAP_VIRIDIS, 1.0f,
                   "cell (0,0) far corner");
    free(d.rgb);
    hs_image_free(&img);
}

Test(heatmap, title_band_has_ink_and_is_absent_without_a_title)
{
    const float map[9] = {0};
    hs_heatmap_opts o = {0};
    o.title = "Previous token";
    o.subtitle = "score 0.93";
    hs_image img = {0};
    hs_layout lay;
    cr_assert_eq(hs_heatmap_render(map, 3, tok3, &o, &img, &lay, NULL), HS_OK);
    cr_assert_gt(lay.title.h, 0);
    cr_assert_lt(lay.title.y + lay.title.h, lay.grid.y);
    decoded d = via_png(&img);
    cr_assert_gt(ink_in(&d, lay.title), 100);
    free(d.rgb);
    hs_image_free(&img);

    cr_assert_eq(hs_heatmap_render(map, 3, tok3, NULL, &img, &lay, NULL), HS_OK);
    cr_assert_eq(lay.title.h, 0);
    hs_image_free(&img);
}

/* Index i such that the pixel is exactly cmap(i / 256 + epsilon), or -1. */
static int lut_index(const uint8_t *p, hs_cmap cmap)
{
    for (int i = 0; i < 256; i++) {
        uint8_t c[3];
        hs_colormap_rgb(cmap, ((float)i + 0.5f) / 256.0f, c);
        if (c[0] == p[0] && c[1] == p[1] && c[2] == p[2])
            return i;
    }
    return -1;
}

Test(heatmap, colour_bar_runs_monotonically_from_max_to_zero)
{
    float map[16];
    for (int i = 0; i < 16; i++)
        map[i] = (float)i / 15.0f;
    hs_heatmap_opts o = {0};
    o.cmap = HS_CMAP_MAGMA;
    hs_image img = {0};
    hs_layout lay;
    cr_assert_eq(hs_heatmap_render(map, 4, NULL, &o, &img, &lay, NULL), HS_OK);
    decoded d = via_png(&img);
    hs_rect b = lay.colorbar;
    cr_assert_geq(b.h, 100);
    int x = b.x + b.w / 2;
    assert_cmap_at(&d, x, b.y, HS_CMAP_MAGMA, 1.0f, "bar top");
    assert_cmap_at(&d, x, b.y + b.h - 1, HS_CMAP_MAGMA, 0.0f, "bar bottom");
    int prev = 256;
    for (int y = b.y; y < b.y + b.h; y++) {
        int i = lut_index(px(&d, x, y), HS_CMAP_MAGMA);
        cr_assert_geq(i, 0, "bar row %d is not a magma colour", y);
        cr_assert_leq(i, prev, "bar not monotone at row %d", y);
        prev = i;
        /* the bar is uniform across its width */
        assert_rgb(px(&d, b.x, y), px(&d, b.x + b.w - 1, y), "bar row");
    }
    /* tick labels to the right of the bar */
    hs_rect labels = {b.x + b.w + 2, b.y - 8, d.w - (b.x + b.w + 2), b.h + 16};
    cr_assert_gt(ink_in(&d, labels), 50);
    free(d.rgb);
    hs_image_free(&img);
}

Test(heatmap, scale_to_max_and_nan_cells)
{
    const float map[4] = {0.5f, NAN, 0.25f, 0.0f};
    hs_heatmap_opts o = {0};
    o.scale_to_max = 1;
    hs_image img = {0};
    hs_layout lay;
    cr_assert_eq(hs_heatmap_render(map, 2, NULL, &o, &img, &lay, NULL), HS_OK);
    cr_assert_float_eq(lay.vmax, 0.5f, 0.0f);
    decoded d = via_png(&img);
    hs_rect c = centre_of(hs_layout_cell(&lay, 0, 0));
    assert_cmap_at(&d, c.x, c.y, HS_CMAP_VIRIDIS, 1.0f, "max cell");
    c = centre_of(hs_layout_cell(&lay, 1, 0));
    assert_cmap_at(&d, c.x, c.y, HS_CMAP_VIRIDIS, 0.5f, "half cell");
    c = centre_of(hs_layout_cell(&lay, 0, 1));
    const uint8_t grey[3] = {HS_NAN_R, HS_NAN_G, HS_NAN_B};
    assert_rgb(px(&d, c.x, c.y), grey, "nan cell");
    free(d.rgb);
    hs_image_free(&img);
}

Test(heatmap, long_sequences_stride_labels_and_downsample)
{
    int n = 200;
    float *map = calloc((size_t)n * n, sizeof *map);
    for (int q = 0; q < n; q++)
        map[q * n + (q ? q - 1 : 0)] = 1.0f;
    hs_image img = {0};
    hs_layout lay;
    cr_assert_eq(hs_heatmap_render(map, n, NULL, NULL, &img, &lay, NULL), HS_OK);
    cr_assert_gt(lay.label_stride, 1);
    cr_assert_leq((n + lay.label_stride - 1) / lay.label_stride, 64);
    cr_assert_leq(img.w, 2000);
    cr_assert_leq(img.h, 2000);
    hs_image_free(&img);
    free(map);

    n = 2500; /* more tokens than the pixel budget: area-averaged */
    map = malloc((size_t)n * n * sizeof *map);
    for (size_t i = 0; i < (size_t)n * n; i++)
        map[i] = 0.6f;
    cr_assert_eq(hs_heatmap_render(map, n, NULL, NULL, &img, &lay, NULL), HS_OK);
    cr_assert_eq(lay.cell_w, 0);
    cr_assert_lt(lay.grid.w, n);
    cr_assert_leq(img.w, 2000);
    cr_assert_leq(img.h, 2000);
    decoded d = via_png(&img);
    assert_cmap_at(&d, lay.grid.x + lay.grid.w / 3, lay.grid.y + lay.grid.h / 2,
                   HS_CMAP_VIRIDIS, 0.6f, "averaged pixel");
    free(d.rgb);
    hs_image_free(&img);
    free(map);
}

Test(heatmap, strange_labels_render)
{
    const char *labels[6] = {"\xe6\x97\xa5\xe6\x9c\xac", "caf\xc3\xa9", "\xff\xfe", NULL, "",
                             "averyveryverylongtokenthatdoesnotfit"};
    float map[36] = {0};
    hs_image img = {0};
    cr_assert_eq(hs_heatmap_render(map, 6, labels, NULL, &img, NULL, NULL), HS_OK);
    hs_image_free(&img);
}

Test(heatmap, rejects_bad_input_with_a_message)
{
    float map[4] = {0};
    hs_image img = {(int)7, (int)7, (uint8_t *)map};
    hs_error err = {{0}};
    cr_assert_eq(hs_heatmap_render(NULL, 2, NULL, NULL, &img, NULL, &err), HS_E_ARG);
    cr_assert_null(img.rgb);
    cr_assert_eq(img.w, 0);
    cr_assert(strstr(err.msg, "map is NULL"), "%s", err.msg);
    cr_assert_eq(hs_heatmap_render(map, 0, NULL, NULL, &img, NULL, &err), HS_E_SHAPE);
    cr_assert(strstr(err.msg, "0 tokens"), "%s", err.msg);
    hs_heatmap_opts o = {0};
    o.cmap = (hs_cmap)9;
    cr_assert_eq(hs_heatmap_render(map, 2, NULL, &o, &img, NULL, &err), HS_E_ARG);
    cr_assert(strstr(err.msg, "colour map 9"), "%s", err.msg);
    o.cmap = HS_CMAP_VIRIDIS;
    o.max_labels = -1;
    cr_assert_eq(hs_heatmap_render(map, 2, NULL, &o, &img, NULL, &err), HS_E_ARG);
    o.max_labels = 0;
    o.max_size = 50;
    cr_assert_eq(hs_heatmap_render(map, 2, NULL, &o, &img, NULL, &err), HS_E_ARG);
    cr_assert(strstr(err.msg, "max_size 50"), "%s", err.msg);
    cr_assert_eq(hs_heatmap_render(map, 2, NULL, NULL, NULL, NULL, &err), HS_E_ARG);
}

Test(heatmap, write_to_missing_directory_is_io_error)
{
    float map[4] = {0};
    hs_error err = {{0}};
    cr_assert_eq(hs_heatmap_write("/nonexistent-hs-dir/x.png", map, 2, NULL, NULL, &err),
                 HS_E_IO);
    cr_assert(!file_exists("/nonexistent-hs-dir/x.png.tmp"));
}

/* ---- gallery ------------------------------------------------------------ */

Test(gallery, grid_of_thumbnails_with_labels)
{
    int L = 3, H = 4, n = 5;
    size_t nn = (size_t)n * n;
    float *maps = calloc((size_t)L * H * nn, sizeof *maps);
    /* head (l, h) has its maximum at cell (l, h); its scale varies */
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            float *m = maps + ((size_t)l * H + h) * nn;
            float s = 0.1f * (float)(1 + l + h);
            m[l * n + h] = s;
            m[(n - 1) * n + (n - 1)] = 0.5f * s;
        }
    hs_gallery_opts o = {0};
    o.title = "all heads";
    hs_image img = {0};
    hs_layout lay;
    hs_error err = {{0}};
    cr_assert_eq(hs_gallery_render(maps, L, H, n, &o, &img, &lay, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(lay.rows, L);
    cr_assert_eq(lay.cols, H);
    cr_assert_eq(lay.cell_w % n, 0, "thumbnail %d is whole cells of %d", lay.cell_w, n);
    cr_assert_eq(lay.grid.w, H * lay.cell_w + (H - 1) * lay.gap);
    cr_assert_eq(lay.grid.h, L * lay.cell_h + (L - 1) * lay.gap);
    cr_assert_leq(img.w, 2400);
    decoded d = via_png(&img);
    int cell = lay.cell_w / n;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            hs_rect t = hs_layout_cell(&lay, l, h);
            /* normalised to its own max: the peak is the top colour, the half-peak
             * the middle colour, everything else the bottom one */
            assert_cmap_at(&d, t.x + h * cell + cell / 2, t.y + l * cell + cell / 2,
                           HS_CMAP_VIRIDIS, 1.0f, "peak");
            assert_cmap_at(&d, t.x + (n - 1) * cell + cell / 2, t.y + (n - 1) * cell + cell / 2,
                           HS_CMAP_VIRIDIS, 0.5f, "half peak");
            int ox = h == 0 ? 1 : 0;
            assert_cmap_at(&d, t.x + ox * cell + cell / 2, t.y + (l == 2 ? 3 : 2) * cell + 1,
                           HS_CMAP_VIRIDIS, 0.0f, "zero");
        }
    /* row labels left of the grid, column labels above it, title at the top */
    hs_rect left = {0, lay.grid.y, lay.grid.x - 1, lay.grid.h};
    hs_rect above = {lay.grid.x, lay.title.y + lay.title.h + 2, lay.grid.w,
                     lay.grid.y - (lay.title.y + lay.title.h + 2)};
    cr_assert_gt(ink_in(&d, left), 3 * 20);
    cr_assert_gt(ink_in(&d, above), 4 * 20);
    cr_assert_gt(ink_in(&d, lay.title), 50);
    /* between thumbnails: white gap */
    hs_rect t00 = hs_layout_cell(&lay, 0, 0);
    if (lay.gap > 0) {
        const uint8_t white[3] = {255, 255, 255};
        assert_rgb(px(&d, t00.x + t00.w, t00.y + 2), white, "gap");
    }
    free(d.rgb);
    hs_image_free(&img);
    free(maps);
}

Test(gallery, large_maps_are_area_averaged)
{
    int L = 12, H = 12, n = 256;
    size_t nn = (size_t)n * n;
    float *maps = malloc((size_t)L * H * nn * sizeof *maps);
    /* a checkerboard of 0.3 and 0.9: any 2x2 average is 0.6, 2/3 of the max */
    for (size_t m = 0; m < (size_t)L * H; m++)
        for (int q = 0; q < n; q++)
            for (int k = 0; k < n; k++)
                maps[m * nn + (size_t)q * n + k] = (q + k) & 1 ? 0.9f : 0.3f;
    hs_image img = {0};
    hs_layout lay;
    cr_assert_eq(hs_gallery_render(maps, L, H, n, NULL, &img, &lay, NULL), HS_OK);
    cr_assert_lt(lay.cell_w, n);
    cr_assert_geq(lay.cell_w, 4);
    cr_assert_leq(img.w, 2400);
    cr_assert_leq(img.h, 2400);
    decoded d = via_png(&img);
    if (n % lay.cell_w == 0 && (n / lay.cell_w) % 2 == 0) {
        hs_rect t = hs_layout_cell(&lay, 5, 7);
        assert_cmap_at(&d, t.x + t.w / 2, t.y + t.h / 2, HS_CMAP_VIRIDIS, 0.6f / 0.9f, "average");
    }
    free(d.rgb);
    hs_image_free(&img);
    free(maps);
}

/* hs_map_fn over an (L*H, n, n) array, failing at map fail_at. */
typedef struct gal_src {
    const float *maps;
    size_t nn;
    int fail_at;
} gal_src;

static hs_status gal_map(void *user, int k, float *out, hs_error *err)
{
    const gal_src *s = user;
    if (k == s->fail_at) {
        snprintf(err->msg, sizeof err->msg, "no map %d", k);
        return HS_E_IO;
    }
    memcpy(out, s->maps + (size_t)k * s->nn, s->nn * sizeof *out);
    return HS_OK;
}

Test(gallery, maps_read_one_at_a_time_draw_the_same_image)
{
    int L = 2, H = 3, n = 5;
    size_t nn = (size_t)n * n;
    float maps[2 * 3 * 25];
    for (size_t e = 0; e < sizeof maps / sizeof *maps; e++)
        maps[e] = (float)((e * 7) % 11) / 10.0f;
    hs_image a = {0}, b = {0};
    hs_error err = {{0}};
    gal_src src = {maps, nn, -1};
    cr_assert_eq(hs_gallery_render(maps, L, H, n, NULL, &a, NULL, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_gallery_render_from(gal_map, &src, L, H, n, NULL, &b, NULL, &err), HS_OK);
    cr_assert_eq(a.w, b.w);
    cr_assert_eq(a.h, b.h);
    cr_assert(!memcmp(a.rgb, b.rgb, (size_t)a.w * a.h * 3));
    hs_image_free(&a);
    hs_image_free(&b);
    src.fail_at = 4;
    cr_assert_eq(hs_gallery_render_from(gal_map, &src, L, H, n, NULL, &b, NULL, &err), HS_E_IO);
    cr_assert_str_eq(err.msg, "no map 4");
    cr_assert_null(b.rgb);
}

Test(gallery, rejects_bad_shapes)
{
    float m[1] = {0};
    hs_image img = {0};
    hs_error err = {{0}};
    cr_assert_eq(hs_gallery_render(m, 0, 1, 1, NULL, &img, NULL, &err), HS_E_SHAPE);
    cr_assert(strstr(err.msg, "0 layers"), "%s", err.msg);
    cr_assert_eq(hs_gallery_render(m, 1, 1, 0, NULL, &img, NULL, &err), HS_E_SHAPE);
    cr_assert_eq(hs_gallery_render(NULL, 1, 1, 1, NULL, &img, NULL, &err), HS_E_ARG);
    cr_assert_eq(hs_gallery_render(m, 1, 1, 1, NULL, &img, NULL, &err), HS_OK);
    hs_image_free(&img);
}

/* ---- similarity --------------------------------------------------------- */

static void sim_colour(float v, uint8_t rgb[3])
{
    hs_colormap_rgb(HS_CMAP_DIVERGING, (v + 1.0f) / 2.0f, rgb);
}

Test(similarity, order_permutes_rows_and_columns)
{
    /* distinct values so every cell is identifiable */
    const float sim[9] = {1.0f, 0.5f, -0.5f, 0.5f, 1.0f, 0.0f, -0.5f, 0.0f, 0.75f};
    const int order[3] = {2, 0, 1};
    hs_similarity_opts o = {0};
    o.n_head = 2;
    hs_image img = {0};
    hs_layout lay;
    hs_error err = {{0}};
    cr_assert_eq(hs_similarity_render(sim, 3, order, NULL, NULL, &o, &img, &lay, &err), HS_OK,
                 "%s", err.msg);
    decoded d = via_png(&img);
    for (int p = 0; p < 3; p++)
        for (int q = 0; q < 3; q++) {
            uint8_t want[3];
            sim_colour(sim[order[p] * 3 + order[q]], want);
            hs_rect c = centre_of(hs_layout_cell(&lay, p, q));
            char what[48];
            snprintf(what, sizeof what, "shown (%d, %d) = item (%d, %d)", p, q, order[p],
                     order[q]);
            assert_rgb(px(&d, c.x, c.y), want, what);
        }
    /* the known move: item 2's self-similarity 0.75 is now at the top left */
    uint8_t want[3];
    sim_colour(0.75f, want);
    hs_rect c = centre_of(hs_layout_cell(&lay, 0, 0));
    assert_rgb(px(&d, c.x, c.y), want, "top-left");
    cr_assert_float_eq(lay.vmin, -1.0f, 0.0f);
    cr_assert_float_eq(lay.vmax, 1.0f, 0.0f);
    free(d.rgb);
    hs_image_free(&img);
}

Test(similarity, boundaries_between_clusters_only)
{
    float sim[16];
    for (int i = 0; i < 16; i++)
        sim[i] = 0.0f;
    const int clusters[4] = {0, 0, 1, 1};
    hs_image img = {0};
    hs_layout lay;
    cr_assert_eq(hs_similarity_render(sim, 4, NULL, clusters, NULL, NULL, &img, &lay, NULL),
                 HS_OK);
    decoded d = via_png(&img);
    uint8_t white[3];
    sim_colour(0.0f, white);
    int y = lay.grid.y + lay.grid.h / 4 + 1; /* a row inside the first cluster */
    hs_rect c2 = hs_layout_cell(&lay, 0, 2);
    hs_rect c1 = hs_layout_cell(&lay, 0, 1);
    const uint8_t *b = px(&d, c2.x, y);
    cr_assert(b[0] < 60 && b[1] < 60 && b[2] < 60, "boundary before position 2 is dark");
    b = px(&d, c2.x - 1, y);
    cr_assert(b[0] < 60, "boundary is 2 px wide");
    assert_rgb(px(&d, c1.x, y), white, "no boundary inside a cluster");
    assert_rgb(px(&d, c1.x - 1, y), white, "no boundary inside a cluster");
    /* and the horizontal line above position 2 */
    b = px(&d, lay.grid.x + 3, hs_layout_cell(&lay, 2, 0).y);
    cr_assert(b[0] < 60, "horizontal boundary");
    free(d.rgb);
    hs_image_free(&img);
}

Test(similarity, rejects_a_non_permutation)
{
    float sim[9] = {0};
    const int bad[3] = {0, 2, 2};
    const int range[3] = {0, 1, 3};
    hs_image img = {0};
    hs_error err = {{0}};
    cr_assert_eq(hs_similarity_render(sim, 3, bad, NULL, NULL, NULL, &img, NULL, &err), HS_E_ARG);
    cr_assert(strstr(err.msg, "order[2] is 2") && strstr(err.msg, "permutation"), "%s", err.msg);
    cr_assert_eq(hs_similarity_render(sim, 3, range, NULL, NULL, NULL, &img, NULL, &err),
                 HS_E_ARG);
    cr_assert_null(img.rgb);
    cr_assert_eq(hs_similarity_render(sim, 0, NULL, NULL, NULL, NULL, &img, NULL, &err),
                 HS_E_SHAPE);
}

/* ---- importance --------------------------------------------------------- */

Test(importance, max_value_cell_has_the_top_colour_and_a_printed_value)
{
    float v[6] = {0.1f, 0.2f, 2.0f, 0.0f, 1.0f, NAN};
    hs_importance_opts o = {0};
    o.title = "ablation";
    hs_image img = {0};
    hs_layout lay;
    hs_error err = {{0}};
    cr_assert_eq(hs_importance_render(v, 2, 3, &o, &img, &lay, &err), HS_OK, "%s", err.msg);
    cr_assert_float_eq(lay.vmin, 0.0f, 0.0f);
    cr_assert_float_eq(lay.vmax, 2.0f, 0.0f);
    decoded d = via_png(&img);
    hs_rect c = hs_layout_cell(&lay, 0, 2);
    assert_cmap_at(&d, c.x + 1, c.y + 1, HS_CMAP_VIRIDIS, 1.0f, "max cell");
    c = hs_layout_cell(&lay, 1, 0);
    assert_cmap_at(&d, c.x + 1, c.y + 1, HS_CMAP_VIRIDIS, 0.0f, "zero cell");
    c = hs_layout_cell(&lay, 1, 1);
    assert_cmap_at(&d, c.x + 1, c.y + 1, HS_CMAP_VIRIDIS, 0.5f, "half cell");
    const uint8_t grey[3] = {HS_NAN_R, HS_NAN_G, HS_NAN_B};
    c = hs_layout_cell(&lay, 1, 2);
    assert_rgb(px(&d, c.x + 1, c.y + 1), grey, "nan cell");
    /* the value is printed: the max cell holds pixels that are not its colour */
    c = hs_layout_cell(&lay, 0, 2);
    uint8_t top[3];
    hs_colormap_rgb(HS_CMAP_VIRIDIS, 1.0f, top);
    int text = 0;
    for (int y = c.y; y < c.y + c.h - 1; y++)
        for (int x = c.x; x < c.x + c.w - 1; x++) {
            const uint8_t *p = px(&d, x, y);
            text += p[0] != top[0] || p[1] != top[1] || p[2] != top[2];
        }
    cr_assert_gt(text, 20, "value text in the max cell");
    free(d.rgb);
    hs_image_free(&img);
}

Test(importance, negative_values_use_the_symmetric_diverging_map)
{
    float v[4] = {-0.5f, 0.0f, 0.25f, 0.5f};
    hs_image img = {0};
    hs_layout lay;
    cr_assert_eq(hs_importance_render(v, 2, 2, NULL, &img, &lay, NULL), HS_OK);
    cr_assert_float_eq(lay.vmin, -0.5f, 0.0f);
    cr_assert_float_eq(lay.vmax, 0.5f, 0.0f);
    decoded d = via_png(&img);
    hs_rect c = hs_layout_cell(&lay, 0, 0);
    assert_cmap_at(&d, c.x + 1, c.y + 1, HS_CMAP_DIVERGING, 0.0f, "-max");
    c = hs_layout_cell(&lay, 0, 1);
    assert_cmap_at(&d, c.x + 1, c.y + 1, HS_CMAP_DIVERGING, 0.5f, "zero");
    c = hs_layout_cell(&lay, 1, 1);
    assert_cmap_at(&d, c.x + 1, c.y + 1, HS_CMAP_DIVERGING, 1.0f, "+max");
    free(d.rgb);
    hs_image_free(&img);
}

Test(importance, many_heads_fit_and_rejects_bad_shapes)
{
    float *v = calloc(48 * 25, sizeof *v);
    hs_image img = {0};
    hs_layout lay;
    cr_assert_eq(hs_importance_render(v, 48, 25, NULL, &img, &lay, NULL), HS_OK);
    cr_assert_leq(img.w, 2000);
    cr_assert_leq(img.h, 2000);
    hs_image_free(&img);
    free(v);
    hs_error err = {{0}};
    float one = 1.0f;
    cr_assert_eq(hs_importance_render(&one, 1, 0, NULL, &img, NULL, &err), HS_E_SHAPE);
    cr_assert(strstr(err.msg, "0 heads"), "%s", err.msg);
    cr_assert_eq(hs_importance_render(NULL, 1, 1, NULL, &img, NULL, &err), HS_E_ARG);
}

Test(ticks, at_least_three_inside_a_range_that_misses_the_coarse_step)
{
    /* -1.97..1.97 with about 2 intervals: the nice step 2 leaves only 0 inside (the
     * importance picture showed a bar labelled "0" alone); step 1 gives -1, 0, 1 */
    double t[12];
    int n = hs_viz_ticks(-1.97f, 1.97f, 2, t, 12);
    cr_assert_eq(n, 3);
    cr_assert(t[0] == -1 && t[1] == 0 && t[2] == 1, "%g %g %g", t[0], t[1], t[2]);
    char buf[32];
    hs_viz_tick_label(t[0], 1.0, buf, sizeof buf);
    cr_assert_str_eq(buf, "-1");
    /* 0..1 with 5 intervals keeps its step 0.2 */
    n = hs_viz_ticks(0.0f, 1.0f, 5, t, 12);
    cr_assert_eq(n, 6);
    cr_assert(fabs(t[1] - 0.2) < 1e-12 && t[5] == 1.0);
    /* 0.013..0.017 (as floats): the step 0.002 gives 0.014, 0.016 only; 0.001 gives more */
    n = hs_viz_ticks(0.013f, 0.017f, 2, t, 12);
    cr_assert_geq(n, 3);
    for (int i = 0; i < n; i++)
        cr_assert(t[i] >= 0.013f - 1e-9 && t[i] <= 0.017f + 1e-9, "%g", t[i]);
}

Test(heatmap, every_token_labelled_up_to_max_labels_the_grid_grows)
{
    /* 120 tokens with max_labels 128: a text line (11 px) per cell, stride 1; 640/120
     * would be 5 px cells and every 3rd label. With the default 64 labels it strides. */
    int n = 120;
    float *m = calloc((size_t)n * n, sizeof *m);
    for (int i = 0; i < n; i++)
        m[(size_t)i * n + i] = 1.0f;
    hs_image img = {0};
    hs_layout lay;
    hs_heatmap_opts o = {.max_labels = 128};
    cr_assert_eq(hs_heatmap_render(m, n, NULL, &o, &img, &lay, NULL), HS_OK);
    cr_assert_eq(lay.cell_w, 11);
    cr_assert_eq(lay.label_stride, 1);
    hs_image_free(&img);
    o.max_labels = 0;
    cr_assert_eq(hs_heatmap_render(m, n, NULL, &o, &img, &lay, NULL), HS_OK);
    cr_assert_eq(lay.cell_w, 5);
    cr_assert_gt(lay.label_stride, 1);
    hs_image_free(&img);
    free(m);
}

Test(heatmap, svg_holds_escaped_labels_and_the_cells_as_png)
{
    const float m[9] = {1, 0, 0, 0.5f, 0.5f, 0, 0.2f, 0.3f, 0.5f};
    const char *labels[3] = {"<a&", " b", "c\"\n"};
    hs_heatmap_opts o = {.title = "L0.H1 \"x\" & y"};
    char *s = NULL;
    size_t len = 0;
    cr_assert_eq(hs_heatmap_svg(m, 3, labels, &o, &s, &len, NULL), HS_OK);
    cr_assert_eq(strlen(s), len);
    cr_assert(strstr(s, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
    cr_assert(strstr(s, "&lt;a&amp;</text>"), "label escaped");
    cr_assert(strstr(s, "\xE2\x90\xA3" "b</text>"), "a leading space drawn as the open box");
    cr_assert(strstr(s, "c&quot;\xE2\x86\xB5</text>"), "quote escaped, newline mark");
    cr_assert(strstr(s, "<title>L0.H1 &quot;x&quot; &amp; y</title>"), "title keeps spaces");
    cr_assert(strstr(s, "href=\"data:image/png;base64,iVBORw0KGgo"), "cells as a PNG");
    cr_assert(len > 7 && !strcmp(s + len - 7, "</svg>\n"));
    free(s);
    hs_error err = {{0}};
    cr_assert_eq(hs_heatmap_svg(m, 0, NULL, NULL, &s, NULL, &err), HS_E_SHAPE);
    cr_assert_str_eq(err.msg, "heatmap svg: map has 0 tokens, expected 1..4096");
}
