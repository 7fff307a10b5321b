/* Picture layer, the pieces under the renderers: PNG encoding, the colour maps (against
 * matplotlib's values) and the bitmap font. Images are checked by decoding the encoded PNG
 * with libpng's simplified read API (an independent decoder path) and looking at exact
 * pixels. */
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
#include "testutil.h"

/* Removes a test's temporary folder (tu_mkdtemp's) and checks that it went. */
static void remove_tree(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* ---- png ---------------------------------------------------------------- */

Test(png, round_trip_of_random_image_is_pixel_exact)
{
    int w = 37, h = 23;
    uint8_t *rgb = malloc((size_t)w * h * 3);
    unsigned s = 12345;
    for (int i = 0; i < w * h * 3; i++) {
        s = s * 1103515245u + 12345u;
        rgb[i] = (uint8_t)(s >> 16);
    }
    uint8_t *png = NULL;
    size_t len = 0;
    hs_error err = {{0}};
    cr_assert_eq(hs_png_encode(rgb, w, h, &png, &len, &err), HS_OK, "%s", err.msg);
    cr_assert_gt(len, 8);
    cr_assert_eq(memcmp(png, "\x89PNG\r\n\x1a\n", 8), 0);
    decoded d = decode_png(png, len);
    cr_assert_eq(d.w, w);
    cr_assert_eq(d.h, h);
    cr_assert_eq(memcmp(d.rgb, rgb, (size_t)w * h * 3), 0);
    free(d.rgb);
    free(png);
    free(rgb);
}

Test(png, one_pixel_image_round_trips)
{
    uint8_t rgb[3] = {1, 2, 3};
    uint8_t *png = NULL;
    size_t len = 0;
    cr_assert_eq(hs_png_encode(rgb, 1, 1, &png, &len, NULL), HS_OK);
    decoded d = decode_png(png, len);
    cr_assert_eq(memcmp(d.rgb, rgb, 3), 0);
    free(d.rgb);
    free(png);
}

Test(png, rejects_bad_sizes_and_null_buffers)
{
    uint8_t rgb[3] = {0};
    uint8_t *png = (uint8_t *)1;
    size_t len = 99;
    hs_error err = {{0}};
    cr_assert_eq(hs_png_encode(rgb, 0, 1, &png, &len, &err), HS_E_ARG);
    cr_assert_null(png);
    cr_assert_eq(len, 0);
    cr_assert(strstr(err.msg, "0x1"), "message: %s", err.msg);
    cr_assert_eq(hs_png_encode(rgb, 1, -3, &png, &len, &err), HS_E_ARG);
    cr_assert_eq(hs_png_encode(rgb, HS_PNG_MAX_SIDE + 1, 1, &png, &len, &err), HS_E_ARG);
    cr_assert(strstr(err.msg, "16384"), "message: %s", err.msg);
    cr_assert_eq(hs_png_encode(NULL, 1, 1, &png, &len, &err), HS_E_ARG);
    cr_assert_eq(hs_png_encode(rgb, 1, 1, NULL, &len, &err), HS_E_ARG);
    cr_assert_eq(hs_png_write("", rgb, 1, 1, &err), HS_E_ARG);
}

Test(png, write_into_missing_directory_fails_and_leaves_nothing)
{
    char dir[64], path[128], tmp[160], sub[96];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/no-such-dir", dir);
    snprintf(path, sizeof path, "%s/out.png", sub);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    uint8_t rgb[12] = {0};
    hs_error err = {{0}};
    cr_assert_eq(hs_png_write(path, rgb, 2, 2, &err), HS_E_IO);
    cr_assert(strstr(err.msg, "cannot write '") && strstr(err.msg, "out.png'") &&
                  strstr(err.msg, "No such file"), "message: %s", err.msg);
    cr_assert(!file_exists(path));
    cr_assert(!file_exists(tmp));
    cr_assert(!file_exists(sub));
    remove_tree(dir);
}

Test(png, write_produces_a_valid_file_and_no_temporary)
{
    char dir[64], path[128], tmp[160];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/a.png", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    uint8_t rgb[5 * 4 * 3];
    for (size_t i = 0; i < sizeof rgb; i++)
        rgb[i] = (uint8_t)(i * 7);
    hs_error err = {{0}};
    cr_assert_eq(hs_png_write(path, rgb, 5, 4, &err), HS_OK, "%s", err.msg);
    cr_assert(file_exists(path));
    cr_assert(!file_exists(tmp));
    /* overwriting goes through the temporary too */
    cr_assert_eq(hs_png_write(path, rgb, 5, 4, &err), HS_OK, "%s", err.msg);
    cr_assert(!file_exists(tmp));

    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    uint8_t buf[4096];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    decoded d = decode_png(buf, len);
    cr_assert_eq(memcmp(d.rgb, rgb, sizeof rgb), 0);
    free(d.rgb);

    if (access("/usr/bin/pngcheck", X_OK) == 0) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "/usr/bin/pngcheck -q '%s' >/dev/null", path);
        cr_assert_eq(system(cmd), 0, "pngcheck rejected %s", path);
    }
    remove_tree(dir);
}

/* ---- colormap ----------------------------------------------------------- */

/* matplotlib 3.6 _viridis_data / _magma_data at indices 0, 128, 255, each
 * channel round(255 * v). */
Test(colormap, viridis_and_magma_match_matplotlib)
{
    static const struct {
        hs_cmap cmap;
        float t;
        uint8_t rgb[3];
    } ref[] = {
        {HS_CMAP_VIRIDIS, 0.0f, {68, 1, 84}},     {HS_CMAP_VIRIDIS, 0.5f, {33, 145, 140}},
        {HS_CMAP_VIRIDIS, 1.0f, {253, 231, 37}},  {HS_CMAP_VIRIDIS, 0.25f, {59, 82, 139}},
        {HS_CMAP_MAGMA, 0.0f, {0, 0, 4}},         {HS_CMAP_MAGMA, 0.5f, {183, 55, 121}},
        {HS_CMAP_MAGMA, 1.0f, {252, 253, 191}},   {HS_CMAP_MAGMA, 0.25f, {81, 18, 124}},
    };
    for (size_t i = 0; i < sizeof ref / sizeof ref[0]; i++) {
        uint8_t got[3];
        hs_colormap_rgb(ref[i].cmap, ref[i].t, got);
        char what[64];
        snprintf(what, sizeof what, "%s(%g)", hs_colormap_name(ref[i].cmap), (double)ref[i].t);
        assert_rgb(got, ref[i].rgb, what);
    }
}

Test(colormap, nan_is_grey_and_out_of_range_clamps)
{
    const uint8_t grey[3] = {HS_NAN_R, HS_NAN_G, HS_NAN_B};
    uint8_t a[3], b[3];
    for (int c = 0; c <= HS_CMAP_DIVERGING; c++) {
        hs_colormap_rgb((hs_cmap)c, NAN, a);
        assert_rgb(a, grey, "nan");
        hs_colormap_rgb((hs_cmap)c, -3.0f, a);
        hs_colormap_rgb((hs_cmap)c, 0.0f, b);
        assert_rgb(a, b, "clamp low");
        hs_colormap_rgb((hs_cmap)c, 7.0f, a);
        hs_colormap_rgb((hs_cmap)c, 1.0f, b);
        assert_rgb(a, b, "clamp high");
    }
    hs_colormap_rgb((hs_cmap)42, 0.5f, a);
    assert_rgb(a, grey, "unknown map");
    cr_assert_null(hs_colormap_name((hs_cmap)42));
}

Test(colormap, diverging_is_blue_white_red)
{
    uint8_t lo[3], mid[3], hi[3];
    hs_colormap_rgb(HS_CMAP_DIVERGING, 0.0f, lo);
    hs_colormap_rgb(HS_CMAP_DIVERGING, 0.5f, mid);
    hs_colormap_rgb(HS_CMAP_DIVERGING, 1.0f, hi);
    cr_assert(lo[2] > lo[0] + 60, "low end is blue");
    cr_assert(hi[0] > hi[2] + 60, "high end is red");
    cr_assert(mid[0] > 235 && mid[1] > 235 && mid[2] > 235, "middle is near white");
}

/* ---- font --------------------------------------------------------------- */

Test(font, every_glyph_is_five_by_nine_of_dots_and_hashes)
{
    for (int c = 32; c <= 126; c++) {
        const hs_glyph *g = hs_font_ascii(c);
        cr_assert_not_null(g);
        cr_assert_eq(strlen(g->art), HS_FONT_W * HS_FONT_H, "glyph %d", c);
        cr_assert_eq(strspn(g->art, ".#"), HS_FONT_W * HS_FONT_H, "glyph %d", c);
        if (c != ' ')
            cr_assert(strchr(g->art, '#'), "glyph %d has no ink", c);
    }
    cr_assert_null(hs_font_ascii(31));
    cr_assert_null(hs_font_ascii(127));
}

Test(font, accented_latin_letters_transliterate_to_base_letters)
{
    static const struct {
        uint32_t cp;
        const char *want;
    } t[] = {
        {0x00C0, "A"}, {0x00C7, "C"},  {0x00D1, "N"}, {0x00DF, "ss"}, {0x00E9, "e"},
        {0x00F8, "o"}, {0x00FF, "y"},  {0x0100, "A"}, {0x010D, "c"},  {0x011F, "g"},
        {0x0120, "G"}, {0x0131, "i"},  {0x0141, "L"}, {0x0142, "l"},  {0x0153, "oe"},
        {0x0161, "s"}, {0x017E, "z"},  {0x017F, "s"}, {0x2019, "'"},  {0x2014, "-"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const char *got = hs_font_translit(t[i].cp);
        cr_assert_not_null(got, "U+%04X", t[i].cp);
        cr_assert_str_eq(got, t[i].want, "U+%04X", t[i].cp);
    }
    cr_assert_null(hs_font_translit(0x00F7)); /* division sign */
    cr_assert_null(hs_font_translit(0x03B1)); /* Greek alpha */
    cr_assert_null(hs_font_translit(0x65E5)); /* CJK */
}

Test(font, token_whitespace_becomes_visible_marks)
{
    const hs_glyph *g[16];
    int n = hs_text_layout(" cat\n", HS_TEXT_MARKS, g, 16);
    cr_assert_eq(n, 5);
    cr_assert_eq(g[0], hs_font_space_mark());
    cr_assert_eq(g[1], hs_font_ascii('c'));
    cr_assert_eq(g[3], hs_font_ascii('t'));
    cr_assert_eq(g[4], hs_font_return_mark());
    n = hs_text_layout(" \t", 0, g, 16);
    cr_assert_eq(n, 2);
    cr_assert_eq(g[0], hs_font_ascii(' '));
    cr_assert_eq(g[1], hs_font_ascii(' '));
    n = hs_text_layout("\t", HS_TEXT_MARKS, g, 16);
    cr_assert_eq(g[0], hs_font_tab_mark());
}

Test(font, unknown_and_invalid_characters_are_boxes)
{
    const hs_glyph *g[16];
    /* CJK, invalid byte, overlong '/', lone surrogate, e-acute */
    int n = hs_text_layout("\xe6\x97\xa5|\xff|\xc0\xaf|\xed\xa0\x80|\xc3\xa9", 0, g, 16);
    cr_assert_eq(g[0], hs_font_box());
    cr_assert_eq(g[1], hs_font_ascii('|'));
    cr_assert_eq(g[2], hs_font_box());
    cr_assert_eq(g[n - 1], hs_font_ascii('e'));
    /* a sequence cut by the terminator */
    n = hs_text_layout("a\xe6\x97", 0, g, 16);
    cr_assert_eq(g[0], hs_font_ascii('a'));
    cr_assert_eq(g[1], hs_font_box());
}

Test(font, long_text_is_cut_with_an_ellipsis)
{
    const char *s = "internationalisation";
    int full = hs_text_width(s, 1, 0);
    cr_assert_eq(full, (20 - 1) * HS_FONT_ADV + HS_FONT_W);
    int cut = hs_text_fit_width(s, 1, 0, 40);
    cr_assert_leq(cut, 40);
    cr_assert_gt(cut, 30);
    hs_image img = {0};
    const uint8_t white[3] = {255, 255, 255}, black[3] = {0, 0, 0};
    cr_assert_eq(hs_cv_new(&img, 80, 12, white), 0);
    cr_assert_eq(hs_cv_text(&img, 0, 0, s, 1, black, 0, 40), cut);
    /* the last glyph is the ellipsis: three dots on row 6, nothing above */
    int x0 = cut - HS_FONT_W;
    for (int c = 0; c < HS_FONT_W; c++) {
        const uint8_t *p = img.rgb + ((size_t)6 * img.w + x0 + c) * 3;
        cr_assert_eq(p[0] == 0, c % 2 == 0, "ellipsis column %d", c);
        const uint8_t *q = img.rgb + ((size_t)2 * img.w + x0 + c) * 3;
        cr_assert_eq(q[0], 255);
    }
    hs_image_free(&img);
    hs_image_free(NULL);
}

Test(font, rotated_text_reads_upward_in_a_tall_box)
{
    hs_image img = {0};
    const uint8_t white[3] = {255, 255, 255}, black[3] = {0, 0, 0};
    cr_assert_eq(hs_cv_new(&img, 30, 60, white), 0);
    int w = hs_cv_text(&img, 5, 10, "LLL", 1, black, HS_TEXT_ROT90, 0);
    cr_assert_eq(w, 17);
    int minx = 99, maxx = -1, miny = 99, maxy = -1;
    for (int y = 0; y < img.h; y++)
        for (int x = 0; x < img.w; x++)
            if (img.rgb[((size_t)y * img.w + x) * 3] == 0) {
                minx = x < minx ? x : minx;
                maxx = x > maxx ? x : maxx;
                miny = y < miny ? y : miny;
                maxy = y > maxy ? y : maxy;
            }
    /* 'L' is 7 rows tall and 5 wide: rotated, the ink spans 7 columns, 17 rows */
    cr_assert_eq(minx, 5);
    cr_assert_eq(maxx, 5 + 6);
    cr_assert_eq(miny, 10);
    cr_assert_eq(maxy, 10 + 16);
    /* the first 'L' is at the bottom; its foot (row 6 of the glyph) is along x = 11 */
    for (int y = 10 + 12; y <= 10 + 16; y++)
        cr_assert_eq(img.rgb[((size_t)y * img.w + 11) * 3], 0, "row %d", y);
    hs_image_free(&img);
}
