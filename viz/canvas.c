/* RGB canvas primitives and bitmap-font text (see canvas.h). */
#include <stdlib.h>
#include <string.h>

#include "canvas.h"
#include "core/core.h"

int hs_cv_new(hs_image *img, int w, int h, const uint8_t rgb[3])
{
    img->w = img->h = 0;
    img->rgb = NULL;
    size_t n;
    if (w < 1 || h < 1 || hs_mul_size((size_t)w * 3, (size_t)h, &n) != 0)
        return -1;
    img->rgb = malloc(n);
    if (!img->rgb)
        return -1;
    img->w = w;
    img->h = h;
    hs_cv_fill(img, rgb);
    return 0;
}

void hs_cv_pixel(hs_image *img, int x, int y, const uint8_t rgb[3])
{
    if (x < 0 || y < 0 || x >= img->w || y >= img->h)
        return;
    uint8_t *p = img->rgb + ((size_t)y * (size_t)img->w + (size_t)x) * 3;
    p[0] = rgb[0];
    p[1] = rgb[1];
    p[2] = rgb[2];
}

void hs_cv_blend(hs_image *img, int x, int y, const uint8_t rgb[3], float a)
{
    if (x < 0 || y < 0 || x >= img->w || y >= img->h)
        return;
    uint8_t *p = img->rgb + ((size_t)y * (size_t)img->w + (size_t)x) * 3;
    for (int c = 0; c < 3; c++)
        p[c] = (uint8_t)((float)p[c] + a * ((float)rgb[c] - (float)p[c]) + 0.5f);
}

void hs_cv_fill(hs_image *img, const uint8_t rgb[3])
{
    hs_cv_rect(img, 0, 0, img->w, img->h, rgb);
}

void hs_cv_rect(hs_image *img, int x, int y, int w, int h, const uint8_t rgb[3])
{
    int x0 = x < 0 ? 0 : x, y0 = y < 0 ? 0 : y;
    /* compute ends in long long so x + w cannot overflow int */
    long long x1 = (long long)x + w, y1 = (long long)y + h;
    if (x1 > img->w)
        x1 = img->w;
    if (y1 > img->h)
        y1 = img->h;
    if (x0 >= x1 || y0 >= y1)
        return;
    for (int yy = y0; yy < (int)y1; yy++) {
        uint8_t *p = img->rgb + ((size_t)yy * (size_t)img->w + (size_t)x0) * 3;
        for (int xx = x0; xx < (int)x1; xx++, p += 3) {
            p[0] = rgb[0];
            p[1] = rgb[1];
            p[2] = rgb[2];
        }
    }
}

void hs_cv_frame(hs_image *img, int x, int y, int w, int h, const uint8_t rgb[3])
{
    if (w < 1 || h < 1)
        return;
    hs_cv_rect(img, x, y, w, 1, rgb);
    hs_cv_rect(img, x, y + h - 1, w, 1, rgb);
    hs_cv_rect(img, x, y, 1, h, rgb);
    hs_cv_rect(img, x + w - 1, y, 1, h, rgb);
}

void hs_cv_line(hs_image *img, int x0, int y0, int x1, int y1, const uint8_t rgb[3])
{
    long long dx = llabs((long long)x1 - x0), dy = -llabs((long long)y1 - y0);
    int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    long long e = dx + dy;
    for (;;) {
        hs_cv_pixel(img, x0, y0, rgb);
        if (x0 == x1 && y0 == y1)
            break;
        long long e2 = 2 * e;
        if (e2 >= dy) {
            e += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            e += dx;
            y0 += sy;
        }
    }
}

/* ---- text -------------------------------------------------------------- */

/* Decodes one UTF-8 code point at s; sets *len to the bytes used (>= 1). Returns
 * the code point, or 0xFFFD for an invalid, overlong, surrogate or truncated
 * sequence (consuming one byte). */
static uint32_t utf8_next(const unsigned char *s, int *len)
{
    unsigned char c = s[0];
    *len = 1;
    if (c < 0x80)
        return c;
    int n;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 1;
        cp = c & 0x1Fu;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 2;
        cp = c & 0x0Fu;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 3;
        cp = c & 0x07u;
        min = 0x10000;
    } else {
        return 0xFFFD;
    }
    for (int i = 1; i <= n; i++) {
        if ((s[i] & 0xC0) != 0x80) /* also stops at the NUL */
            return 0xFFFD;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0xFFFD;
    *len = n + 1;
    return cp;
}

static int push(const hs_glyph **out, int n, int cap, const hs_glyph *g)
{
    if (n < cap)
        out[n++] = g;
    return n;
}

/* The glyph of an ASCII character, with whitespace marks when flags ask. */
static const hs_glyph *ascii_glyph(uint32_t c, int flags)
{
    int marks = flags & HS_TEXT_MARKS;
    switch (c) {
    case ' ': return marks ? hs_font_space_mark() : hs_font_ascii(' ');
    case '\n': case '\r': return marks ? hs_font_return_mark() : hs_font_ascii(' ');
    case '\t': return marks ? hs_font_tab_mark() : hs_font_ascii(' ');
    default: break;
    }
    const hs_glyph *g = hs_font_ascii((int)c);
    return g ? g : hs_font_box();
}

int hs_text_layout(const char *s, int flags, const hs_glyph **out, int cap)
{
    int n = 0;
    if (!s)
        return 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p && n < cap) {
        int len;
        uint32_t cp = utf8_next(p, &len);
        p += len;
        if (cp < 0x80) {
            n = push(out, n, cap, ascii_glyph(cp, flags));
            continue;
        }
        switch (cp) {
        case 0x2423: n = push(out, n, cap, hs_font_space_mark()); continue;
        case 0x21B5: n = push(out, n, cap, hs_font_return_mark()); continue;
        case 0x2192: n = push(out, n, cap, hs_font_tab_mark()); continue;
        case 0x2026: n = push(out, n, cap, hs_font_ellipsis()); continue;
        case 0x00B7: case 0x2022: case 0x22C5: n = push(out, n, cap, hs_font_middle_dot()); continue;
        default: break;
        }
        const char *t = hs_font_translit(cp);
        if (t) {
            for (; *t; t++)
                n = push(out, n, cap, ascii_glyph((unsigned char)*t, flags));
        } else {
            n = push(out, n, cap, hs_font_box());
        }
    }
    return n;
}

/* Ink width of n glyphs: the advance of all but the last, plus one glyph. */
static int glyphs_width(int n, int scale)
{
    return n > 0 ? ((n - 1) * HS_FONT_ADV + HS_FONT_W) * scale : 0;
}

int hs_text_width(const char *s, int scale, int flags)
{
    const hs_glyph *g[HS_TEXT_MAX_GLYPHS];
    return glyphs_width(hs_text_layout(s, flags, g, HS_TEXT_MAX_GLYPHS), scale);
}

static void draw_glyph(hs_image *img, int x, int y, int u0, int box_w, const hs_glyph *g,
                       int scale, const uint8_t rgb[3], int flags)
{
    int rot = flags & HS_TEXT_ROT90;
    int wide = scale + ((flags & HS_TEXT_BOLD) ? 1 : 0);
    for (int r = 0; r < HS_FONT_H; r++) {
        for (int c = 0; c < HS_FONT_W; c++) {
            if (g->art[r * HS_FONT_W + c] != '#')
                continue;
            for (int dy = 0; dy < scale; dy++) {
                for (int dx = 0; dx < wide; dx++) {
                    int u = u0 + c * scale + dx, v = r * scale + dy;
                    int px = rot ? x + v : x + u;
                    int py = rot ? y + box_w - 1 - u : y + v;
                    if (g->dim)
                        hs_cv_blend(img, px, py, rgb, 0.55f);
                    else
                        hs_cv_pixel(img, px, py, rgb);
                }
            }
        }
    }
}

/* Lays s out into g (room for HS_TEXT_MAX_GLYPHS + 1) and, when max_w > 0 and it
 * is too wide, cuts it to end with an ellipsis; returns the glyph count (0 when
 * not even the ellipsis fits). */
static int layout_fit(const char *s, int scale, int flags, int max_w, const hs_glyph **g)
{
    int n = hs_text_layout(s, flags, g, HS_TEXT_MAX_GLYPHS);
    if (max_w > 0 && glyphs_width(n, scale) > max_w) {
        /* keep k glyphs and an ellipsis: k + 1 glyphs must fit */
        int k = n;
        while (k > 0 && glyphs_width(k + 1, scale) > max_w)
            k--;
        if (glyphs_width(k + 1, scale) > max_w)
            return 0;
        g[k] = hs_font_ellipsis();
        n = k + 1;
    }
    return n;
}

int hs_text_fit_width(const char *s, int scale, int flags, int max_w)
{
    const hs_glyph *g[HS_TEXT_MAX_GLYPHS + 1];
    if (scale < 1)
        scale = 1;
    return glyphs_width(layout_fit(s, scale, flags, max_w, g), scale);
}

int hs_cv_text(hs_image *img, int x, int y, const char *s, int scale, const uint8_t rgb[3],
               int flags, int max_w)
{
    const hs_glyph *g[HS_TEXT_MAX_GLYPHS + 1];
    if (scale < 1)
        scale = 1;
    int n = layout_fit(s, scale, flags, max_w, g);
    int w = glyphs_width(n, scale);
    for (int i = 0; i < n; i++)
        draw_glyph(img, x, y, i * HS_FONT_ADV * scale, w, g[i], scale, rgb, flags);
    return w;
}
