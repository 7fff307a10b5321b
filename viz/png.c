/* PNG encoding to memory through libpng write callbacks, and atomic PNG files. */
#include <errno.h>
#include <fcntl.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "headscope/render.h"

/* Growable output buffer and error state shared with the libpng callbacks. The
 * struct lives in the caller of png_encode_rows, so nothing it holds is a local
 * of the function that calls setjmp. */
typedef struct png_sink {
    uint8_t *buf;
    size_t len, cap;
    int nomem;
    char msg[200];
} png_sink;

static void sink_write(png_structp png, png_bytep data, size_t n)
{
    png_sink *s = png_get_io_ptr(png);
    size_t need;
    if (hs_add_size(s->len, n, &need) != 0) {
        s->nomem = 1;
        png_error(png, "png output size overflows");
    }
    if (need > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < need) {
            if (cap > SIZE_MAX / 2) {
                cap = need;
                break;
            }
            cap *= 2;
        }
        uint8_t *nb = realloc(s->buf, cap);
        if (!nb) {
            s->nomem = 1;
            png_error(png, "out of memory growing png buffer");
        }
        s->buf = nb;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, data, n);
    s->len = need;
}

static void sink_flush(png_structp png) { (void)png; }

/* libpng reports fatal errors here: keep the message, then unwind to setjmp. */
static void on_png_error(png_structp png, png_const_charp msg)
{
    png_sink *s = png_get_error_ptr(png);
    if (s)
        snprintf(s->msg, sizeof s->msg, "%s", msg ? msg : "unknown libpng error");
    png_longjmp(png, 1);
}

/* Warnings are not errors, and the library never prints. */
static void on_png_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

/* Runs the libpng write. Returns 0 on success, -1 after a libpng error (message in
 * s->msg). Only w, h, rgb (set before setjmp, never changed) and the struct behind
 * s are used after a longjmp, so no local needs to be volatile. */
static int png_encode_rows(png_structp png, png_infop info, const uint8_t *rgb, int w, int h)
{
    if (setjmp(png_jmpbuf(png)))
        return -1;
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_compression_level(png, 6);
    /* One filter, "up" (each row as its difference from the row above), in place of libpng's
     * default of trying all five on every row: the pictures are cells drawn as blocks of
     * equal rows, which "up" turns into rows of zeros. GPT-2's 150 pictures at n = 128 on
     * two threads: 5.2 -> 2.95 s, 1.3% more bytes. */
    png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_UP);
    png_write_info(png, info);
    size_t stride = (size_t)w * 3;
    for (int y = 0; y < h; y++)
        png_write_row(png, rgb + (size_t)y * stride);
    png_write_end(png, info);
    return 0;
}

hs_status hs_png_encode(const uint8_t *rgb, int w, int h, uint8_t **out, size_t *out_len,
                        hs_error *err)
{
    if (!out || !out_len)
        return hs_fail(err, HS_E_ARG, "png: output pointers must not be NULL");
    *out = NULL;
    *out_len = 0;
    if (!rgb)
        return hs_fail(err, HS_E_ARG, "png: pixel buffer is NULL");
    if (w < 1 || h < 1 || w > HS_PNG_MAX_SIDE || h > HS_PNG_MAX_SIDE)
        return hs_fail(err, HS_E_ARG, "png: image size %dx%d is outside 1..%d", w, h,
                       HS_PNG_MAX_SIDE);
    size_t bytes;
    if (hs_mul_size((size_t)w * 3, (size_t)h, &bytes) != 0)
        return hs_fail(err, HS_E_NOMEM, "png: image size %dx%d overflows", w, h);

    png_sink sink = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &sink, on_png_error,
                                              on_png_warning);
    if (!png)
        return hs_fail(err, HS_E_NOMEM, "png: cannot create libpng write struct");
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        return hs_fail(err, HS_E_NOMEM, "png: cannot create libpng info struct");
    }
    png_set_write_fn(png, &sink, sink_write, sink_flush);

    int rc = png_encode_rows(png, info, rgb, w, h);
    png_destroy_write_struct(&png, &info);
    if (rc != 0) {
        free(sink.buf);
        if (sink.nomem)
            return hs_fail(err, HS_E_NOMEM, "png: %s", sink.msg);
        return hs_fail(err, HS_E_FORMAT, "png: libpng: %s", sink.msg);
    }
    *out = sink.buf;
    *out_len = sink.len;
    return HS_OK;
}


hs_status hs_png_write(const char *path, const uint8_t *rgb, int w, int h, hs_error *err)
{
    if (!path || !*path)
        return hs_fail(err, HS_E_ARG, "png: output path is empty");
    uint8_t *png = NULL;
    size_t len = 0;
    hs_status st = hs_png_encode(rgb, w, h, &png, &len, err);
    if (st != HS_OK)
        return st;
    hs_out o;
    if ((st = hs_out_open(path, &o, err)) == HS_OK) {
        int bad = fwrite(png, 1, len, o.f) != len; /* a short write makes the close fail */
        st = hs_out_close(&o, !bad, err);
        if (bad && st == HS_OK)
            st = hs_fail(err, HS_E_IO, "cannot write '%s': %s", path, strerror(errno));
    }
    free(png);
    return st;
}

void hs_image_free(hs_image *img)
{
    if (!img)
        return;
    free(img->rgb);
    img->rgb = NULL;
    img->w = img->h = 0;
}
