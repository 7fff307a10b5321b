/* UTF-8 validation, encoding and repair; the character classes the tokenizers need. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/text_internal.h"

/* Length of the valid UTF-8 sequence at s[i..len), or 0 if it is invalid; *sub is then the
 * length of its maximal valid prefix (at least 1), the unit Python replaces by one U+FFFD. */
static size_t utf8_seq(const unsigned char *s, size_t len, size_t i, size_t *sub)
{
    unsigned c = s[i];
    size_t need;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    *sub = 1;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* above U+10FFFF */
    } else {
        return 0;
    }
    for (size_t k = 1; k < need; k++) {
        if (i + k >= len)
            return 0;
        unsigned b = s[i + k];
        unsigned l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
        if (b < l || b > h)
            return 0;
        *sub = k + 1;
    }
    return need;
}

int hs_utf8_valid(const char *s, size_t len, size_t *bad)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        size_t sub, n = utf8_seq(u, len, i, &sub);
        if (n == 0) {
            *bad = i;
            return 0;
        }
        i += n;
    }
    return 1;
}

size_t hs_utf8_put(int32_t cp, char *out)
{
    uint32_t c = (uint32_t)cp;
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xC0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xE0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (c >> 18));
    out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

size_t hs_utf8_sanitize(const char *s, size_t len, char *buf, size_t cap)
{
    static const char repl[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, w = 0;
    if (cap == 0)
        return 0;
    while (i < len) {
        size_t sub, n = utf8_seq(u, len, i, &sub);
        const char *src = n ? s + i : repl;
        size_t m = n ? n : sizeof repl;
        if (w + m + 1 > cap)
            break;
        memcpy(buf + w, src, m);
        w += m;
        i += n ? n : sub;
    }
    buf[w] = '\0';
    return w;
}

int32_t hs_uni_range_value(const hs_uni_range *r, size_t n, int32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < r[mid].lo)
            hi = mid;
        else if (cp > r[mid].hi)
            lo = mid + 1;
        else
            return r[mid].v;
    }
    return 0;
}

int hs_uni_gpt2_class(int32_t cp)
{
    return (int)hs_uni_range_value(hs_gpt2_classes, hs_gpt2_classes_n, cp);
}

int hs_uni_bert_flags(int32_t cp)
{
    return (int)hs_uni_range_value(hs_bert_flags, hs_bert_flags_n, cp);
}

int hs_uni_grapheme_class(int32_t cp)
{
    return (int)hs_uni_range_value(hs_grapheme_classes, hs_grapheme_classes_n, cp);
}

static size_t map_char(const hs_uni_map *m, size_t n, const int32_t *data, int32_t cp,
                       int32_t *out)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < m[mid].cp) {
            hi = mid;
        } else if (cp > m[mid].cp) {
            lo = mid + 1;
        } else {
            memcpy(out, data + m[mid].off, m[mid].len * sizeof *out);
            return m[mid].len;
        }
    }
    out[0] = cp;
    return 1;
}

size_t hs_uni_nfd(int32_t cp, int32_t *out)
{
    /* Hangul syllables decompose by arithmetic (Unicode 3.12) */
    if (cp >= 0xAC00 && cp < 0xAC00 + 11172) {
        int32_t s = cp - 0xAC00;
        out[0] = 0x1100 + s / 588;
        out[1] = 0x1161 + (s % 588) / 28;
        if (s % 28 == 0)
            return 2;
        out[2] = 0x11A7 + s % 28;
        return 3;
    }
    if (cp < 0xC0) {
        out[0] = cp;
        return 1;
    }
    return map_char(hs_nfd_map, hs_nfd_map_n, hs_nfd_map_data, cp, out);
}

size_t hs_uni_lower(int32_t cp, int32_t *out)
{
    if (cp < 0x80) {
        out[0] = cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
        return 1;
    }
    return map_char(hs_lower_map, hs_lower_map_n, hs_lower_map_data, cp, out);
}

int hs_uni_ccc(int32_t cp)
{
    return cp < 0x300 ? 0 : utf8proc_get_property(cp)->combining_class;
}

/* Runs of non-starters up to this length are ordered by insertion (at most this many moves a
 * character); longer ones by counting their classes (256 counters a run). */
#define ORDER_INSERTION_MAX 32

static void order_insertion(int32_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        int32_t c = v[i];
        int cc = hs_uni_ccc(c);
        size_t j = i;
        while (j > 0 && hs_uni_ccc(v[j - 1]) > cc) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = c;
    }
}

/* A stable counting sort of v[0..n) by combining class through tmp (n elements). */
static void order_counting(int32_t *v, size_t n, int32_t *tmp)
{
    size_t at[257] = {0};
    for (size_t i = 0; i < n; i++)
        at[hs_uni_ccc(v[i]) + 1]++;
    for (int c = 1; c <= 256; c++)
        at[c] += at[c - 1];
    for (size_t i = 0; i < n; i++)
        tmp[at[hs_uni_ccc(v[i])]++] = v[i];
    memcpy(v, tmp, n * sizeof *v);
}

hs_status hs_uni_canonical_order(int32_t *v, size_t n)
{
    int32_t *tmp = NULL;
    size_t tmp_cap = 0;
    for (size_t i = 0; i < n;) {
        if (hs_uni_ccc(v[i]) == 0) {
            i++;
            continue;
        }
        size_t start = i;
        while (i < n && hs_uni_ccc(v[i]) != 0)
            i++;
        size_t len = i - start;
        if (len <= ORDER_INSERTION_MAX) {
            order_insertion(v + start, len);
            continue;
        }
        if (len > tmp_cap) {
            free(tmp);
            tmp_cap = len;
            if (!(tmp = malloc(len * sizeof *tmp)))
                return HS_E_NOMEM;
        }
        order_counting(v + start, len, tmp);
    }
    free(tmp);
    return HS_OK;
}

/* The primary composite of (a, b), or -1 (Unicode 3.12 for Hangul, else the table). */
static int32_t compose_pair(int32_t a, int32_t b)
{
    if (a >= 0x1100 && a < 0x1100 + 19 && b >= 0x1161 && b < 0x1161 + 21)
        return 0xAC00 + ((a - 0x1100) * 21 + (b - 0x1161)) * 28;
    if (a >= 0xAC00 && a < 0xAC00 + 11172 && (a - 0xAC00) % 28 == 0 && b > 0x11A7 && b < 0x11A7 + 28)
        return a + (b - 0x11A7);
    size_t lo = 0, hi = hs_comp_table_n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const hs_uni_comp *c = &hs_comp_table[mid];
        if (a < c->first || (a == c->first && b < c->second))
            hi = mid;
        else if (a > c->first || b > c->second)
            lo = mid + 1;
        else
            return c->composite;
    }
    return -1;
}

/* The canonical composition algorithm (UAX #15): each character composes with the last
 * starter when nothing between them blocks it (a starter, or a mark of the same or a higher
 * combining class). */
size_t hs_uni_compose(int32_t *v, size_t n)
{
    size_t starter = SIZE_MAX, w = 0; /* no starter yet: leading marks compose with nothing */
    int last = 0;                     /* class of the last character kept after the starter */
    for (size_t i = 0; i < n; i++) {
        int32_t c = v[i];
        int cc = hs_uni_ccc(c);
        if (starter != SIZE_MAX && (last < cc || last == 0)) {
            int32_t p = (w == starter + 1 || cc != 0) ? compose_pair(v[starter], c) : -1;
            if (p >= 0) {
                v[starter] = p;
                continue;
            }
        }
        if (cc == 0) {
            starter = w;
            last = 0;
        } else {
            last = cc;
        }
        v[w++] = c;
    }
    return w;
}

int hs_uni_white_space(int32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}
