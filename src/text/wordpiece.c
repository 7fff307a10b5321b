/*
 * WordPiece as the Hugging Face tokenizers library runs BERT (transformers 5's BertTokenizer):
 *   normalizer: the steps in t->norm, each over the whole segment between added tokens
 *     (BertNormalizer: clean_text, handle_chinese_chars, NFD + strip accents, lowercase);
 *   BertPreTokenizer: split on whitespace (dropped) and punctuation (kept as one-character
 *     words);
 *   WordPiece: greedy longest match first with t->prefix ("##") continuations, the unknown
 *     token for a word over t->max_chars characters or one that cannot be covered.
 * Character classes and mappings come from the library's own tables (unicode_tables.c).
 */
#include <stdlib.h>
#include <string.h>

#include "text/text_internal.h"

typedef struct cpbuf {
    int32_t *v;
    size_t n, cap;
} cpbuf;

typedef struct wp_work {
    cpbuf a, b;      /* the segment; scratch for the next step */
    char *utf8;      /* (4 * max_chars) the word being matched */
    size_t *off;     /* (max_chars + 1) byte offset of each character of the word */
} wp_work;

static hs_status cp_reserve(cpbuf *b, size_t extra)
{
    size_t need;
    void *v = b->v;
    if (hs_add_size(b->n, extra, &need) != 0 || hs_tok_grow(&v, &b->cap, need, sizeof *b->v, 256) != HS_OK)
        return HS_E_NOMEM;
    b->v = v;
    return HS_OK;
}

/* ---- normalizer steps: k->a -> k->b, then swapped ---------------------------------------- */

static hs_status norm_step(int step, wp_work *k)
{
    const cpbuf *a = &k->a;
    cpbuf *b = &k->b;
    int32_t m[HS_UNI_MAX_MAP];
    b->n = 0;
    if (cp_reserve(b, a->n) != HS_OK)
        return HS_E_NOMEM;
    for (size_t i = 0; i < a->n; i++) {
        int32_t c = a->v[i];
        size_t n = 1;
        m[0] = c;
        switch (step) {
        case HS_NORM_CLEAN: {
            int f = hs_uni_bert_flags(c);
            if (f & HS_BF_CTRL)
                n = 0;
            else if (f & HS_BF_CLEAN_SPACE)
                m[0] = ' ';
            break;
        }
        case HS_NORM_CJK:
            if (hs_uni_bert_flags(c) & HS_BF_CJK) {
                m[0] = ' ', m[1] = c, m[2] = ' ';
                n = 3;
            }
            break;
        case HS_NORM_NFD:
            n = hs_uni_nfd(c, m);
            break;
        case HS_NORM_STRIP:
            if (hs_uni_bert_flags(c) & HS_BF_MN)
                n = 0;
            break;
        case HS_NORM_MARKS:
            if (hs_uni_bert_flags(c) & HS_BF_MARK)
                n = 0;
            break;
        case HS_NORM_LOWER:
            n = hs_uni_lower(c, m);
            break;
        default:
            break;
        }
        if (cp_reserve(b, n) != HS_OK)
            return HS_E_NOMEM;
        memcpy(b->v + b->n, m, n * sizeof *m);
        b->n += n;
    }
    if (step == HS_NORM_NFD && hs_uni_canonical_order(b->v, b->n) != HS_OK)
        return HS_E_NOMEM;
    cpbuf t = k->a;
    k->a = *b;
    *b = t;
    return HS_OK;
}

/* ---- WordPiece --------------------------------------------------------------------------- */

static hs_status wordpiece(const hs_tokenizer *t, const int32_t *w, size_t n, wp_work *k,
                           hs_idvec *out)
{
    size_t plen = strlen(t->prefix);
    if (n == 0)
        return HS_OK;
    if (n > t->max_chars)
        return t->unk >= 0 ? hs_idvec_push(out, t->unk) : HS_OK;
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
            size_t blen = k->off[end] - k->off[start];
            id = start > 0 ? hs_strtab_find2(&t->syms, t->prefix, plen, p, blen)
                           : hs_strtab_find(&t->syms, p, blen);
            if (id >= 0 && (size_t)id < t->n_model)
                break;
            id = -1;
        }
        if (id < 0) {
            out->n = first; /* the whole word becomes the unknown token */
            return t->unk >= 0 ? hs_idvec_push(out, t->unk) : HS_OK;
        }
        if (hs_idvec_push(out, id) != HS_OK)
            return HS_E_NOMEM;
        start = end;
    }
    return HS_OK;
}

hs_status hs_wordpiece_encode(const hs_tokenizer *t, const char *text, size_t len, hs_idvec *out)
{
    const unsigned char *s = (const unsigned char *)text;
    wp_work k = {0};
    hs_status st = HS_E_NOMEM; /* the only way to fail */
    k.utf8 = malloc(4 * t->max_chars + 4);
    k.off = malloc((t->max_chars + 1) * sizeof *k.off);
    if (!k.utf8 || !k.off || cp_reserve(&k.a, len) != HS_OK)
        goto fail;
    for (size_t i = 0; i < len;)
        k.a.v[k.a.n++] = hs_utf8_next(s, &i);
    for (size_t i = 0; i < t->n_norm; i++)
        if (norm_step(t->norm[i], &k) != HS_OK)
            goto fail;
    /* BertPreTokenizer, then WordPiece on each word */
    const int32_t *v = k.a.v;
    size_t n = k.a.n, start = 0;
    for (size_t i = 0; i <= n; i++) {
        int f = i < n ? hs_uni_bert_flags(v[i]) : HS_BF_SPACE;
        if (!(f & (HS_BF_SPACE | HS_BF_PUNCT)))
            continue;
        if (wordpiece(t, v + start, i - start, &k, out) != HS_OK)
            goto fail;
        if ((f & HS_BF_PUNCT) && wordpiece(t, v + i, 1, &k, out) != HS_OK)
            goto fail;
        start = i + 1;
    }
    st = HS_OK;
fail:
    free(k.off);
    free(k.utf8);
    free(k.b.v);
    free(k.a.v);
    return st;
}
