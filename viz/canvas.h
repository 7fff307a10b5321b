/*
 * viz/canvas.h — private drawing primitives for the renderers: an RGB canvas
 * (hs_image) with clipped fills, rectangles, lines and pixels, and text drawn with
 * the built-in bitmap font (viz/font.c). Never installed.
 *
 * The font: glyphs are HS_FONT_W × HS_FONT_H pixels on an HS_FONT_ADV-pixel
 * advance. Rows 0..6 hold capitals and digits (baseline under row 6), rows 7..8
 * descenders. A text box is HS_FONT_H * scale pixels high.
 */
#ifndef HEADSCOPE_VIZ_CANVAS_H
#define HEADSCOPE_VIZ_CANVAS_H

#include <stdint.h>

#include "headscope/render.h"

#define HS_FONT_W 5
#define HS_FONT_H 9
#define HS_FONT_ADV 6

/* Text flags for hs_cv_text / hs_text_width. */
enum {
    HS_TEXT_MARKS = 1, /* show ' ' as a visible-space mark, '\n' as a return mark,
                        * '\t' as an arrow (token labels); otherwise blanks */
    HS_TEXT_ROT90 = 2, /* rotate 90 degrees counter-clockwise: reads bottom to top */
    HS_TEXT_BOLD = 4   /* thicken strokes by one pixel to the right (titles) */
};

/* One glyph: HS_FONT_H rows of HS_FONT_W characters, '#' for ink, '.' blank. */
typedef struct hs_glyph {
    char art[HS_FONT_W * HS_FONT_H + 1];
    int dim; /* a marker glyph (space/return/tab/box): drawn half-transparent */
} hs_glyph;

/* Longest run of glyphs one string can expand to when laid out. */
#define HS_TEXT_MAX_GLYPHS 512

/* The glyph of an ASCII printable character (32..126) or of a marker. */
const hs_glyph *hs_font_ascii(int c);
const hs_glyph *hs_font_space_mark(void);
const hs_glyph *hs_font_return_mark(void);
const hs_glyph *hs_font_tab_mark(void);
const hs_glyph *hs_font_box(void);
const hs_glyph *hs_font_ellipsis(void);
const hs_glyph *hs_font_middle_dot(void);

/* Base-letter spelling ("a", "AE", ...) of an accented Latin letter in
 * U+00C0..U+017F, or of a common typographic character (quotes, dashes), or NULL
 * when there is none. */
const char *hs_font_translit(uint32_t cp);

/* Decodes s (UTF-8, NUL-terminated) into at most cap glyphs; invalid bytes become
 * boxes. Returns the number of glyphs written. */
int hs_text_layout(const char *s, int flags, const hs_glyph **out, int cap);

/* Width in pixels of s drawn at scale (its length along the text direction). */
int hs_text_width(const char *s, int scale, int flags);

/* Width hs_cv_text would draw for s with the same scale, flags and max_w. */
int hs_text_fit_width(const char *s, int scale, int flags, int max_w);

/* Allocates a w × h canvas filled with rgb. Returns 0, or -1 when out of memory. */
int hs_cv_new(hs_image *img, int w, int h, const uint8_t rgb[3]);

void hs_cv_pixel(hs_image *img, int x, int y, const uint8_t rgb[3]);

/* Mixes rgb into the pixel with weight a in [0, 1]. */
void hs_cv_blend(hs_image *img, int x, int y, const uint8_t rgb[3], float a);

/* Fills the whole canvas / the rectangle (x, y, w, h), clipped to the canvas. */
void hs_cv_fill(hs_image *img, const uint8_t rgb[3]);
void hs_cv_rect(hs_image *img, int x, int y, int w, int h, const uint8_t rgb[3]);

/* Outline of a rectangle, 1 px. */
void hs_cv_frame(hs_image *img, int x, int y, int w, int h, const uint8_t rgb[3]);

/* A 1-px line from (x0, y0) to (x1, y1) inclusive (Bresenham), clipped. */
void hs_cv_line(hs_image *img, int x0, int y0, int x1, int y1, const uint8_t rgb[3]);

/* Draws s with its box's top-left corner at (x, y): horizontal text runs right
 * from there; HS_TEXT_ROT90 text occupies (x .. x + HS_FONT_H*scale - 1) × (y .. y +
 * width - 1) and reads upward, starting at the bottom. If max_w > 0 and the text
 * is wider, it is cut and ends with an ellipsis so that it fits. Returns the
 * width drawn. */
int hs_cv_text(hs_image *img, int x, int y, const char *s, int scale, const uint8_t rgb[3],
            int flags, int max_w);

#endif /* HEADSCOPE_VIZ_CANVAS_H */
