/*
 * The normalizers of BPE tokenizer.json files, run on the text between added tokens before the
 * added tokens with normalized=true are looked for (Hugging Face's AddedVocabulary then the
 * model): NFC (GPT-NeoX, Qwen2), Prepend and Replace (Llama 2's "▁" metaspace), Strip and
 * Replace " {2,}" (T5's Unigram, after which runs of spaces are one "▁"). WordPiece's
 * steps run on code points in wordpiece.c.
 */
#include <stdlib.h>
#include <string.h>

#include "text/text_internal.h"

typedef struct sbuf {
    char *v;
    size_t n, cap;
} sbuf;

static hs_status sb_reserve(sbuf *b, size_t extra)
{
    size_t need;
    void *v = b->v;
    if (hs_add_size(b->n, extra, &need) != 0 || hs_tok_grow(&v, &b->cap, need, 1, 256) != HS_OK)
        return HS_E_NOMEM;
    b->v = v;
    return HS_OK;
}

static hs_status sb_put(sbuf *b, const char *s, size_t n)
{
    if (n == 0)
        return HS_OK;
    if (sb_reserve(b, n) != HS_OK)
        return HS_E_NOMEM;
    memcpy(b->v + b->n, s, n);
    b->n += n;
    return HS_OK;
}

/* NFC of s[0..len) appended to out: each run from one starter to the next is decomposed,
 * ordered and composed on its own (composition never reaches back past a starter that
 * composes with nothing before it, so runs can be cut at every starter of class 0 that NFD
 * leaves alone; cutting at each ASCII character is enough and keeps the buffer small). */
static hs_status nfc(const char *s, size_t len, sbuf *out)
{
    const unsigned char *u = (const unsigned char *)s;
    int32_t *cp = NULL, m[HS_UNI_MAX_MAP];
    size_t n = 0, cap = 0;
    hs_status st = HS_E_NOMEM;
    for (size_t i = 0; i <= len;) {
        /* flush the run before an ASCII character and at the end */
        if (i == len || u[i] < 0x80) {
            if (hs_uni_canonical_order(cp, n) != HS_OK)
                goto fail;
            n = hs_uni_compose(cp, n);
            char enc[4];
            for (size_t k = 0; k < n; k++)
                if (sb_put(out, enc, hs_utf8_put(cp[k], enc)) != HS_OK)
                    goto fail;
            n = 0;
            if (i == len)
                break;
        }
        size_t d = hs_uni_nfd(hs_utf8_next(u, &i), m);
        void *grown = cp;
        if (hs_tok_grow(&grown, &cap, n + d, sizeof *cp, 64) != HS_OK)
            goto fail;
        cp = grown;
        memcpy(cp + n, m, d * sizeof *m);
        n += d;
    }
    st = HS_OK;
fail:
    free(cp);
    return st;
}

/* Strip: the whitespace at the start (left) and the end (right) of s left out; *cut set when
 * some was at the start. */
static hs_status trim(const char *s, size_t len, int left, int right, sbuf *out, int *cut)
{
    size_t a = left ? hs_tok_space_after(s, 0, len) : 0;
    size_t b = right ? len - hs_tok_space_before(s, a, len) : len;
    *cut |= a > 0;
    return sb_put(out, s + a, b - a);
}

/* Every run of two or more ' ' becomes to (Replace with the regex " {2,}"). */
static hs_status space_runs(const char *s, size_t len, const char *to, sbuf *out)
{
    size_t tl = strlen(to);
    for (size_t i = 0; i < len;) {
        size_t k = i;
        while (k < len && s[k] == ' ')
            k++;
        if (k - i >= 2) {
            if (sb_put(out, to, tl) != HS_OK)
                return HS_E_NOMEM;
            i = k;
        } else if (sb_put(out, s + i++, 1) != HS_OK) {
            return HS_E_NOMEM;
        }
    }
    return HS_OK;
}

/* Every occurrence of from (non-empty), left to right without overlaps, becomes to. */
static hs_status replace(const char *s, size_t len, const char *from, const char *to, sbuf *out)
{
    size_t fl = strlen(from), tl = strlen(to), i = 0;
    while (i < len) {
        if (len - i >= fl && memcmp(s + i, from, fl) == 0) {
            if (sb_put(out, to, tl) != HS_OK)
                return HS_E_NOMEM;
            i += fl;
        } else if (sb_put(out, s + i++, 1) != HS_OK) {
            return HS_E_NOMEM;
        }
    }
    return HS_OK;
}

static hs_status put_cb(void *b, const char *s, size_t n) { return sb_put(b, s, n); }

hs_status hs_tok_normalize(const hs_tokenizer *t, const char *s, size_t len, char **out,
                           size_t *out_len, int *cut_start)
{
    sbuf a = {0}, b = {0};
    int cut = 0;
    *out = NULL;
    *out_len = 0;
    if (cut_start)
        *cut_start = 0;
    if (t->kind == HS_TOK_WORDPIECE || t->n_norm == 0)
        return HS_OK;
    if (sb_put(&a, s, len) != HS_OK)
        goto fail;
    for (size_t k = 0; k < t->n_norm; k++) {
        b.n = 0;
        switch (t->norm[k]) {
        case HS_NORM_NFC:
            if (nfc(a.v, a.n, &b) != HS_OK)
                goto fail;
            break;
        case HS_NORM_PREPEND:
            if ((a.n && sb_put(&b, t->prepend, strlen(t->prepend)) != HS_OK) || sb_put(&b, a.v, a.n) != HS_OK)
                goto fail;
            break;
        case HS_NORM_REPLACE:
            if (replace(a.v, a.n, t->rep_from, t->rep_to, &b) != HS_OK)
                goto fail;
            break;
        case HS_NORM_TRIM:
            if (trim(a.v, a.n, t->trim_left, t->trim_right, &b, &cut) != HS_OK)
                goto fail;
            break;
        case HS_NORM_PRECOMPILED:
            if (hs_precompiled_apply(t, a.v, a.n, put_cb, &b) != HS_OK)
                goto fail;
            break;
        case HS_NORM_SPACES:
            if (space_runs(a.v, a.n, t->spaces_to, &b) != HS_OK)
                goto fail;
            break;
        default: /* the loader allows no other step with BPE */
            if (sb_put(&b, a.v, a.n) != HS_OK)
                goto fail;
            break;
        }
        sbuf x = a;
        a = b;
        b = x;
    }
    free(b.v);
    if (sb_reserve(&a, 1) != HS_OK) /* never a zero-byte block */
        goto fail;
    *out = a.v;
    *out_len = a.n;
    if (cut_start)
        *cut_start = cut;
    return HS_OK;
fail:
    free(a.v);
    free(b.v);
    return HS_E_NOMEM;
}
