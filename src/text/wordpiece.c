/*
 * BERT WordPiece as BertTokenizer (transformers 4.x, slow):
 *   PreTrainedTokenizer.tokenize: with do_lower_case, every character outside the special
 *     tokens is lowercased ON ITS OWN (str.lower() of one character: Σ -> σ, never final ς;
 *     U+0130 -> "i̇"), then the special tokens [PAD] [UNK] [CLS] [SEP] [MASK] are split out;
 *   BasicTokenizer: clean, space out CJK ideographs, NFC, whitespace split, per word lower +
 *     NFD + drop Mn (lowercasing only), punctuation split;
 *   WordpieceTokenizer: greedy longest match first with "##" continuations, [UNK] for a word
 *     over 100 characters or one that cannot be covered.
 */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/text_internal.h"

#define WP_MAX_WORD_CHARS 100

typedef struct cpbuf {
    int32_t *v;
    size_t n, cap;
} cpbuf;

typedef struct wp_work {
    cpbuf a, b, dec;       /* segment after lowercasing, after cleaning; scratch */
    char *utf8;            /* (4 * WP_MAX_WORD_CHARS) the word being matched */
    size_t off[WP_MAX_WORD_CHARS + 1];
} wp_work;

static hs_status cp_reserve(cpbuf *b, size_t extra)
{
    if (extra <= b->cap - b->n)
        return HS_OK;
    size_t need, cap = b->cap ? b->cap : 256;
    if (hs_add_size(b->n, extra, &need) != 0)
        return HS_E_NOMEM;
    while (cap < need) {
        if (cap > SIZE_MAX / 2 / sizeof *b->v)
            return HS_E_NOMEM;
        cap *= 2;
    }
    int32_t *v = realloc(b->v, cap * sizeof *v);
    if (!v)
        return HS_E_NOMEM;
    b->v = v;
    b->cap = cap;
    return HS_OK;
}

static hs_status cp_push(cpbuf *b, int32_t cp)
{
    if (b->n == b->cap && cp_reserve(b, 1) != HS_OK)
        return HS_E_NOMEM;
    b->v[b->n++] = cp;
    return HS_OK;
}

/* ---- character classes as BertTokenizer defines them --------------------------------------- */

static int is_cjk(int32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* space, \t, \n, \r or category Zs */
static int is_bert_space(int32_t cp)
{
    if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r')
        return 1;
    return cp >= 0x80 && utf8proc_category(cp) == UTF8PROC_CATEGORY_ZS;
}

/* any category C* (Cc Cf Cs Co Cn) except \t \n \r, as transformers' _is_control */
static int is_bert_control(int32_t cp)
{
    if (cp == '\t' || cp == '\n' || cp == '\r')
        return 0;
    if (cp < 0x80)
        return cp < 0x20 || cp == 0x7F;
    utf8proc_category_t c = utf8proc_category(cp);
    return c == UTF8PROC_CATEGORY_CN || c >= UTF8PROC_CATEGORY_CC;
}

static int is_bert_punct(int32_t cp)
{
    if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
        (cp >= 123 && cp <= 126))
        return 1;
    if (cp < 0x80)
        return 0;
    utf8proc_category_t c = utf8proc_category(cp);
    return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

/* ---- normalisation ----------------------------------------------------------------------- */

/* Appends the canonical decomposition (NFD) of src[0..n) to dst, with canonical ordering. */
static hs_status nfd_append(const int32_t *src, size_t n, cpbuf *dst)
{
    for (size_t i = 0; i < n; i++) {
        if (src[i] < 0xC0) {
            if (cp_push(dst, src[i]) != HS_OK)
                return HS_E_NOMEM;
            continue;
        }
        for (;;) {
            if (cp_reserve(dst, 8) != HS_OK)
                return HS_E_NOMEM;
            utf8proc_ssize_t r = utf8proc_decompose_char(src[i], dst->v + dst->n,
                                                         (utf8proc_ssize_t)(dst->cap - dst->n),
                                                         UTF8PROC_DECOMPOSE, NULL);
            if (r < 0)
                return HS_E_INPUT; /* not reached for valid scalar values */
            if ((size_t)r <= dst->cap - dst->n) {
                dst->n += (size_t)r;
                break;
            }
            if (cp_reserve(dst, (size_t)r) != HS_OK)
                return HS_E_NOMEM;
        }
    }
    /* canonical ordering: stable sort of each run of non-starters by combining class */
    for (size_t i = 1; i < dst->n; i++) {
        int32_t c = dst->v[i];
        int cc = utf8proc_get_property(c)->combining_class;
        if (cc == 0)
            continue;
        size_t j = i;
        while (j > 0) {
            int pc = utf8proc_get_property(dst->v[j - 1])->combining_class;
            if (pc <= cc)
                break;
            dst->v[j] = dst->v[j - 1];
            j--;
        }
        dst->v[j] = c;
    }
    return HS_OK;
}

/* NFC of b in place, using dec as scratch. */
static hs_status nfc_inplace(cpbuf *b, cpbuf *dec)
{
    size_t i = 0;
    while (i < b->n && b->v[i] < 0x300)
        i++;
    if (i == b->n)
        return HS_OK; /* nothing below U+0300 decomposes or composes */
    dec->n = 0;
    if (nfd_append(b->v, b->n, dec) != HS_OK)
        return HS_E_NOMEM;
    utf8proc_ssize_t r = utf8proc_normalize_utf32(dec->v, (utf8proc_ssize_t)dec->n, UTF8PROC_COMPOSE);
    if (r < 0)
        return HS_E_NOMEM;
    cpbuf t = *b;
    *b = *dec;
    b->n = (size_t)r;
    *dec = t;
    return HS_OK;
}

/* ---- WordPiece --------------------------------------------------------------------------- */

static hs_status wordpiece(const hs_tokenizer *t, const int32_t *w, size_t n, wp_work *k,
                           hs_idvec *out)
{
    const int32_t unk = t->special[HS_BERT_UNK];
    if (n == 0)
        return HS_OK;
    if (n > WP_MAX_WORD_CHARS)
        return hs_idvec_push(out, unk);
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        k->off[i] = len;
        len += hs_utf8_put(w[i], k->utf8 + len);
    }
    k->off[n] = len;
    size_t first = out->n, start = 0;
    while (start < n) {
        size_t end = n;
        int32_t id = -1;
        for (; end > start; end--) {
            const char *p = k->utf8 + k->off[start];
            size_t plen = k->off[end] - k->off[start];
            id = start > 0 ? hs_strtab_find2(&t->syms, "##", 2, p, plen)
                           : hs_strtab_find(&t->syms, p, plen);
            if (id >= 0)
                break;
        }
        if (id < 0) {
            out->n = first; /* the whole word becomes [UNK] */
            return hs_idvec_push(out, unk);
        }
        if (hs_idvec_push(out, id) != HS_OK)
            return HS_E_NOMEM;
        start = end;
    }
    return HS_OK;
}

static int is_special_word(const int32_t *w, size_t n)
{
    for (int s = 0; s < HS_BERT_N_SPECIAL; s++) {
        const char *sp = hs_bert_specials[s];
        size_t i = 0;
        while (i < n && sp[i] && w[i] == (unsigned char)sp[i])
            i++;
        if (i == n && sp[i] == '\0')
            return 1;
    }
    return 0;
}

/* One whitespace-separated word of BasicTokenizer: lower/strip accents, punctuation split,
 * then WordPiece on each part. */
static hs_status basic_word(const hs_tokenizer *t, const int32_t *w, size_t n, wp_work *k,
                            hs_idvec *out)
{
    if (is_special_word(w, n))
        return wordpiece(t, w, n, k, out);
    if (t->lowercase) {
        /* lower() again is a no-op on text lowercased character by character (then NFC'd) */
        k->dec.n = 0;
        if (nfd_append(w, n, &k->dec) != HS_OK)
            return HS_E_NOMEM;
        size_t m = 0;
        for (size_t i = 0; i < k->dec.n; i++)
            if (utf8proc_category(k->dec.v[i]) != UTF8PROC_CATEGORY_MN)
                k->dec.v[m++] = k->dec.v[i];
        w = k->dec.v;
        n = m;
    }
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_bert_punct(w[i]))
            continue;
        if (wordpiece(t, w + start, i - start, k, out) != HS_OK ||
            wordpiece(t, w + i, 1, k, out) != HS_OK)
            return HS_E_NOMEM;
        start = i + 1;
    }
    return wordpiece(t, w + start, n - start, k, out);
}

/* A piece of text with no special tokens in it: s[0..len), valid UTF-8. */
static hs_status basic_segment(const hs_tokenizer *t, const unsigned char *s, size_t len,
                               wp_work *k, hs_idvec *out)
{
    /* lowercase character by character (full mapping: U+0130 is "i" + U+0307) */
    k->a.n = 0;
    if (cp_reserve(&k->a, len) != HS_OK)
        return HS_E_NOMEM;
    for (size_t i = 0; i < len;) {
        int32_t c = hs_utf8_next(s, &i);
        if (t->lowercase) {
            if (c == 0x130) {
                if (cp_push(&k->a, 'i') != HS_OK || cp_push(&k->a, 0x307) != HS_OK)
                    return HS_E_NOMEM;
                continue;
            }
            c = c < 0x80 ? ((c >= 'A' && c <= 'Z') ? c + 32 : c) : utf8proc_tolower(c);
        }
        if (cp_push(&k->a, c) != HS_OK)
            return HS_E_NOMEM;
    }
    /* clean, whitespace to space, spaces around CJK ideographs */
    k->b.n = 0;
    for (size_t i = 0; i < k->a.n; i++) {
        int32_t c = k->a.v[i];
        if (c == 0 || c == 0xFFFD || is_bert_control(c))
            continue;
        if (is_bert_space(c))
            c = ' ';
        if (cp_reserve(&k->b, 3) != HS_OK)
            return HS_E_NOMEM;
        if (is_cjk(c)) {
            k->b.v[k->b.n++] = ' ';
            k->b.v[k->b.n++] = c;
            k->b.v[k->b.n++] = ' ';
        } else {
            k->b.v[k->b.n++] = c;
        }
    }
    /* NFC; when lowercasing the NFD that follows makes it a no-op, so skip it */
    if (!t->lowercase && nfc_inplace(&k->b, &k->dec) != HS_OK)
        return HS_E_NOMEM;
    /* split on str.split() whitespace */
    const int32_t *v = k->b.v;
    size_t n = k->b.n, i = 0;
    while (i < n) {
        while (i < n && hs_uni_is_py_space(v[i]))
            i++;
        size_t start = i;
        while (i < n && !hs_uni_is_py_space(v[i]))
            i++;
        if (i > start && basic_word(t, v + start, i - start, k, out) != HS_OK)
            return HS_E_NOMEM;
    }
    return HS_OK;
}

/* Length of the special token starting at s[i], or 0. */
static size_t special_at(const char *s, size_t len, size_t i, int *which)
{
    for (int k = 0; k < HS_BERT_N_SPECIAL; k++) {
        size_t n = strlen(hs_bert_specials[k]);
        if (len - i >= n && memcmp(s + i, hs_bert_specials[k], n) == 0) {
            *which = k;
            return n;
        }
    }
    return 0;
}

hs_status hs_wordpiece_encode(const hs_tokenizer *t, const char *text, size_t len, hs_idvec *out,
                              hs_error *err)
{
    wp_work k = {0};
    hs_status st = HS_E_NOMEM; /* the only way to fail */
    size_t piece = 0, i = 0;
    k.utf8 = malloc(4 * WP_MAX_WORD_CHARS);
    if (!k.utf8)
        goto fail;
    while (i < len) {
        const char *p = memchr(text + i, '[', len - i);
        if (!p)
            break;
        size_t at = (size_t)(p - text), n;
        int which;
        if ((n = special_at(text, len, at, &which)) > 0) {
            if (basic_segment(t, (const unsigned char *)text + piece, at - piece, &k, out) != HS_OK ||
                hs_idvec_push(out, t->special[which]) != HS_OK)
                goto fail;
            i = piece = at + n;
        } else {
            i = at + 1;
        }
    }
    if (basic_segment(t, (const unsigned char *)text + piece, len - piece, &k, out) != HS_OK)
        goto fail;
    st = HS_OK;
fail:
    free(k.utf8);
    free(k.dec.v);
    free(k.b.v);
    free(k.a.v);
    if (st != HS_OK)
        hs_fail(err, st, "out of memory encoding %zu bytes of text", len);
    return st;
}
