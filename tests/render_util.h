/* Helpers of the picture suites (test_render.c, test_render_basics.c): a PNG decoded again
 * with libpng's simplified read API (an independent decoder path), exact pixels, ink in a
 * rectangle (header-only, test code only). */
#ifndef HEADSCOPE_RENDER_UTIL_H
#define HEADSCOPE_RENDER_UTIL_H

#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <criterion/criterion.h>

#include "headscope/render.h"
#include "../viz/canvas.h"

typedef struct decoded {
    int w, h;
    uint8_t *rgb; /* (h, w, 3) */
} decoded;

static inline decoded decode_png(const uint8_t *png, size_t len)
{
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    cr_assert(png_image_begin_read_from_memory(&im, png, len), "libpng: %s", im.message);
    im.format = PNG_FORMAT_RGB;
    decoded d = {(int)im.width, (int)im.height, malloc(PNG_IMAGE_SIZE(im))};
    cr_assert_not_null(d.rgb);
    cr_assert(png_image_finish_read(&im, NULL, d.rgb, 0, NULL), "libpng: %s", im.message);
    return d;
}

/* Encodes img as PNG and decodes it again: what a viewer of the file would see. */
static inline decoded via_png(const hs_image *img)
{
    uint8_t *png = NULL;
    size_t len = 0;
    hs_error err = {{0}};
    cr_assert_eq(hs_png_encode(img->rgb, img->w, img->h, &png, &len, &err), HS_OK, "%s", err.msg);
    decoded d = decode_png(png, len);
    free(png);
    cr_assert_eq(d.w, img->w);
    cr_assert_eq(d.h, img->h);
    return d;
}

static inline const uint8_t *px(const decoded *d, int x, int y)
{
    cr_assert(x >= 0 && y >= 0 && x < d->w && y < d->h, "pixel (%d, %d) outside %dx%d", x, y,
              d->w, d->h);
    return d->rgb + ((size_t)y * d->w + x) * 3;
}

static inline void assert_rgb(const uint8_t *got, const uint8_t *want, const char *what)
{
    cr_assert(got[0] == want[0] && got[1] == want[1] && got[2] == want[2],
              "%s: got (%d,%d,%d), want (%d,%d,%d)", what, got[0], got[1], got[2], want[0],
              want[1], want[2]);
}

static inline void assert_cmap_at(const decoded *d, int x, int y, hs_cmap cmap, float t, const char *what)
{
    uint8_t want[3];
    hs_colormap_rgb(cmap, t, want);
    assert_rgb(px(d, x, y), want, what);
}

static inline hs_rect centre_of(hs_rect r)
{
    hs_rect c = {r.x + r.w / 2, r.y + r.h / 2, 1, 1};
    return c;
}

/* Pixels in r that are not white. */
static inline int ink_in(const decoded *d, hs_rect r)
{
    int n = 0;
    for (int y = r.y; y < r.y + r.h; y++)
        for (int x = r.x; x < r.x + r.w; x++) {
            const uint8_t *p = px(d, x, y);
            n += !(p[0] == 255 && p[1] == 255 && p[2] == 255);
        }
    return n;
}

static inline int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

#endif
