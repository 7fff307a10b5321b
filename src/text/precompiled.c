/*
 * SentencePiece's Precompiled normalizer (the "precompiled_charsmap" of T5's, ALBERT's and
 * XLM-R's tokenizer.json: an NFKC-like map compiled into a double-array trie), as Hugging
 * Face's tokenizers library applies it:
 *   - the charsmap is a little-endian u32 (the trie's size in bytes), the trie's u32 units,
 *     then the replacement strings, each ended by a NUL; a key's value is the offset of its
 *     replacement;
 *   - the text is cut into extended grapheme clusters (UAX #29, grapheme_tables.c); a cluster
 *     shorter than 6 bytes whose bytes start with a key is replaced whole by the replacement
 *     of the SHORTEST such key; otherwise each of its characters is replaced by its own
 *     (shortest-key) replacement or kept.
 */
#include <stdlib.h>
#include <string.h>

#include "text/text_internal.h"

/* ---- loading ------------------------------------------------------------------------------ */

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Standard base64 with its padding into a malloc'd block; NULL when s is not that. */
static unsigned char *b64_decode(const char *s, size_t *out_len)
{
    size_t n = strlen(s), pad = 0, w = 0;
    if (n % 4 != 0)
        return NULL;
    while (pad < 2 && n > pad && s[n - 1 - pad] == '=')
        pad++;
    unsigned char *out = malloc(n / 4 * 3 + 1);
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i += 4) {
        unsigned v = 0;
        for (size_t k = 0; k < 4; k++) {
            int d = i + k >= n - pad ? 0 : b64_value((unsigned char)s[i + k]);
            if (d < 0) {
                free(out);
                return NULL;
            }
            v = v << 6 | (unsigned)d;
        }
        out[w++] = (unsigned char)(v >> 16);
        out[w++] = (unsigned char)(v >> 8);
        out[w++] = (unsigned char)v;
    }
    *out_len = w - pad;
    return out;
}

static uint32_t unit(const hs_tokenizer *t, size_t i) /* i < t->pc_units */
{
    const unsigned char *p = t->pc_blob + 4 + 4 * i;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The decoded map b (len bytes, malloc'd) into t, which owns it from here; what names the map
 * in messages. */
static hs_status adopt(hs_tokenizer *t, unsigned char *b, size_t len, const char *what, hs_error *err)
{
    size_t bad;
    t->pc_blob = b;
    size_t size = len >= 4 ? ((size_t)b[0] | (size_t)b[1] << 8 | (size_t)b[2] << 16 | (size_t)b[3] << 24) : 0;
    if (len < 4 || size / 4 == 0 || size / 4 > (len - 4) / 4)
        return hs_fail(err, HS_E_FORMAT, "%s is malformed (its trie is empty or longer than the map)", what);
    t->pc_units = size / 4;
    t->pc_norm = (const char *)b + 4 + 4 * t->pc_units;
    t->pc_norm_len = len - 4 - 4 * t->pc_units;
    if (!hs_utf8_valid(t->pc_norm, t->pc_norm_len, &bad))
        return hs_fail(err, HS_E_FORMAT, "%s's replacements are not valid utf-8", what);
    return HS_OK;
}

hs_status hs_precompiled_load(hs_tokenizer *t, const char *b64, hs_error *err)
{
    size_t len = 0;
    if (t->pc_blob)
        return hs_fail(err, HS_E_UNSUPPORTED, "tokenizer.json: more than one normalizer 'Precompiled' is not "
                                              "supported");
    unsigned char *b = b64_decode(b64, &len);
    if (!b)
        return hs_fail(err, HS_E_FORMAT, "tokenizer.json: Precompiled precompiled_charsmap is not base64");
    return adopt(t, b, len, "tokenizer.json: Precompiled precompiled_charsmap", err);
}

hs_status hs_precompiled_load_bytes(hs_tokenizer *t, const unsigned char *map, size_t len,
                                    const char *what, hs_error *err)
{
    unsigned char *b = malloc(len ? len : 1);
    if (!b)
        return hs_fail(err, HS_E_NOMEM, "out of memory reading %s", what);
    memcpy(b, map, len);
    return adopt(t, b, len, what, err);
}

/* ---- the trie ----------------------------------------------------------------------------- */

/* The replacement of the shortest key that starts s[0..n) (a key never holds a NUL byte), as
 * an offset into t->pc_norm and a length; 0 when there is none (or the map points outside
 * itself or inside a character). */
static int transform(const hs_tokenizer *t, const unsigned char *s, size_t n, size_t *at, size_t *rlen)
{
    size_t pos = 0;
    uint32_t u = unit(t, 0);
    pos ^= (size_t)(u >> 10) << ((u & (1u << 9)) >> 6);
    for (size_t i = 0; i < n && s[i]; i++) {
        pos ^= s[i];
        if (pos >= t->pc_units)
            return 0;
        u = unit(t, pos);
        if ((u & ((1u << 31) | 0xFFu)) != s[i])
            return 0;
        pos ^= (size_t)(u >> 10) << ((u & (1u << 9)) >> 6);
        if ((u >> 8) & 1) {
            if (pos >= t->pc_units)
                return 0;
            size_t v = unit(t, pos) & ((1u << 31) - 1), e = v;
            if (v > t->pc_norm_len || (v < t->pc_norm_len && (t->pc_norm[v] & 0xC0) == 0x80))
                return 0;
            while (e < t->pc_norm_len && t->pc_norm[e])
                e++;
            *at = v;
            *rlen = e - v;
            return 1;
        }
    }
    return 0;
}

/* ---- grapheme clusters -------------------------------------------------------------------- */

static int joins(int prev, int cur, int ep_zwj, size_t ri)
{
    if (prev == HS_GB_CR && cur == HS_GB_LF)
        return 1;
    if (prev == HS_GB_CR || prev == HS_GB_LF || prev == HS_GB_CONTROL || cur == HS_GB_CR || cur == HS_GB_LF ||
        cur == HS_GB_CONTROL)
        return 0;
    if ((prev == HS_GB_L && (cur == HS_GB_L || cur == HS_GB_V || cur == HS_GB_LV || cur == HS_GB_LVT)) ||
        ((prev == HS_GB_LV || prev == HS_GB_V) && (cur == HS_GB_V || cur == HS_GB_T)) ||
        ((prev == HS_GB_LVT || prev == HS_GB_T) && cur == HS_GB_T))
        return 1;
    if (cur == HS_GB_EXTEND || cur == HS_GB_ZWJ || cur == HS_GB_SPACING || prev == HS_GB_PREPEND)
        return 1;
    return (ep_zwj && cur == HS_GB_PICT) || (prev == HS_GB_RI && cur == HS_GB_RI && ri % 2 == 1);
}

/* The end of the extended grapheme cluster that starts at s[i] (i < n, valid UTF-8). */
static size_t cluster_end(const unsigned char *s, size_t n, size_t i)
{
    int prev = hs_uni_grapheme_class(hs_utf8_next(s, &i));
    int ep = prev == HS_GB_PICT, ep_zwj = 0;
    size_t ri = prev == HS_GB_RI;
    while (i < n) {
        size_t k = i;
        int cur = hs_uni_grapheme_class(hs_utf8_next(s, &k));
        if (!joins(prev, cur, ep_zwj, ri))
            break;
        ep_zwj = cur == HS_GB_ZWJ && ep;
        ep = cur == HS_GB_PICT || (ep && cur == HS_GB_EXTEND);
        ri = cur == HS_GB_RI ? ri + 1 : 0;
        prev = cur;
        i = k;
    }
    return i;
}

/* ---- normalizing -------------------------------------------------------------------------- */

hs_status hs_precompiled_apply(const hs_tokenizer *t, const char *text, size_t n,
                               hs_status (*put)(void *, const char *, size_t), void *out)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t at, rl;
    for (size_t i = 0; i < n;) {
        size_t j = cluster_end(s, n, i);
        if (j - i < 6 && transform(t, s + i, j - i, &at, &rl)) {
            if (put(out, t->pc_norm + at, rl) != HS_OK)
                return HS_E_NOMEM;
            i = j;
            continue;
        }
        while (i < j) {
            size_t k = i;
            (void)hs_utf8_next(s, &k);
            hs_status st = transform(t, s + i, k - i, &at, &rl) ? put(out, t->pc_norm + at, rl)
                                                                 : put(out, text + i, k - i);
            if (st != HS_OK)
                return HS_E_NOMEM;
            i = k;
        }
    }
    return HS_OK;
}
