/*
 * Encoding (hs_tokenizer_encode / hs_tokenizer_encode_max), the same pipeline for every kind:
 * added tokens taken out of the raw text, the pieces between them normalised (BPE), the added
 * tokens with normalized=true taken out of those, the rest through the model (bpe.c or
 * wordpiece.c), then the post-processor's template around the texts.
 */
#include <stdlib.h>
#include <string.h>

#include "text/text_internal.h"

/* ---- encoding --------------------------------------------------------------------------------- */

/* The model's ids of a segment without added tokens. */
static hs_status encode_model(const hs_tokenizer *t, const char *s, size_t len, int first,
                              hs_idvec *out)
{
    if (len == 0)
        return HS_OK;
    if (t->kind == HS_TOK_UNIGRAM)
        return hs_unigram_encode(t, s, len, first, out);
    return t->kind == HS_TOK_WORDPIECE ? hs_wordpiece_encode(t, s, len, out)
                                       : hs_bpe_encode(t, s, len, first, out);
}

size_t hs_tok_space_before(const char *s, size_t from, size_t end)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t p = end;
    while (p > from) {
        size_t q = p - 1, k;
        while (q > from && (u[q] & 0xC0) == 0x80)
            q--;
        k = q;
        if (!hs_uni_white_space(hs_utf8_next(u, &k)))
            break;
        p = q;
    }
    return end - p;
}

size_t hs_tok_space_after(const char *s, size_t at, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t p = at;
    while (p < len) {
        size_t k = p;
        if (!hs_uni_white_space(hs_utf8_next(u, &k)))
            break;
        p = k;
    }
    return p - at;
}

static hs_status encode_added(const hs_tokenizer *t, const char *s, size_t len, int pass,
                              int first, hs_idvec *out);

/* What pass 0 left between two added tokens: normalized (BPE), then pass 1. */
static hs_status encode_normalized(const hs_tokenizer *t, const char *s, size_t len, int first,
                                   hs_idvec *out)
{
    char *norm = NULL;
    size_t nlen = 0;
    int cut = 0;
    if (len == 0)
        return HS_OK;
    if (hs_tok_normalize(t, s, len, &norm, &nlen, &cut) != HS_OK)
        return HS_E_NOMEM;
    first = first && !cut;
    hs_status st = norm ? encode_added(t, norm, nlen, 1, first, out) : encode_added(t, s, len, 1, first, out);
    free(norm);
    return st;
}

/* Splits s on the added tokens of pass (leftmost, then longest), as the library's
 * AddedVocabulary does: pass 0 on the raw text (normalized=false tokens), pass 1 on the
 * normalized text that pass 0 left (normalized=true). A token with lstrip / rstrip takes the
 * whitespace before / after it (not past the previous token). first: s starts its text. */
static hs_status encode_added(const hs_tokenizer *t, const char *s, size_t len, int pass,
                              int first, hs_idvec *out)
{
    size_t piece = 0, i = 0, at;
    hs_status st;
    hs_added_scan sc;
    hs_added_scan_init(&sc, t, pass, s, len);
    int32_t k;
    while (i < len && (k = hs_added_scan_next(&sc, i, &at)) >= 0) {
        int32_t id = t->added[k];
        unsigned flags = t->added_flags[k];
        size_t start = at, stop = at + t->syms.len[id];
        if (flags & HS_ADD_LSTRIP)
            start -= hs_tok_space_before(s, piece, at);
        if (flags & HS_ADD_RSTRIP)
            stop += hs_tok_space_after(s, stop, len);
        st = pass == 0 ? encode_normalized(t, s + piece, start - piece, first && piece == 0, out)
                       : encode_model(t, s + piece, start - piece, first && piece == 0, out);
        if (st != HS_OK || hs_idvec_push(out, id) != HS_OK)
            return HS_E_NOMEM;
        i = piece = stop;
    }
    st = pass == 0 ? encode_normalized(t, s + piece, len - piece, first && piece == 0, out)
                   : encode_model(t, s + piece, len - piece, first && piece == 0, out);
    return st;
}

/* Bytes of text encoded at a time by a bounded encoding. */
#define CHUNK_BYTES 4096

/* Whether a text may be encoded a chunk at a time (hs_tok_chunk_end's cut points): not when
 * an added token holds a space (a chunk could cut through it), nor for a SentencePiece-style
 * or Unigram model (no pre-tokenizer or Metaspace: a word may run across the cut, and Prepend
 * or Strip would act on every chunk). */
static int chunkable(const hs_tokenizer *t)
{
    if (t->kind == HS_TOK_SPM_BPE || t->kind == HS_TOK_UNIGRAM ||
        (t->pre == HS_PRE_NONE && t->kind != HS_TOK_WORDPIECE) || t->pre == HS_PRE_SEQ)
        return 0;
    for (size_t k = 0; k < t->n_norm; k++)
        if (t->norm[k] == HS_NORM_PREPEND || t->norm[k] == HS_NORM_REPLACE)
            return 0;
    for (size_t k = 0; k < t->n_added; k++)
        if (memchr(hs_strtab_str(&t->syms, t->added[k]), ' ', t->syms.len[t->added[k]]))
            return 0;
    return 1;
}

/* One segment into out, a chunk at a time where the tokenizer allows it (so that what the
 * normalizer and pre-tokenizer hold stays near CHUNK_BYTES whatever the text), with max > 0
 * until it has more than max ids. */
static hs_status encode_segment(const hs_tokenizer *t, const char *s, size_t len, size_t max,
                                hs_idvec *out)
{
    if (!chunkable(t))
        return encode_added(t, s, len, 0, 1, out);
    size_t first = out->n;
    for (size_t at = 0; at < len && (max == 0 || out->n - first <= max);) {
        size_t end = hs_tok_chunk_end(s, len, at, CHUNK_BYTES);
        if (encode_added(t, s + at, end - at, 0, at == 0, out) != HS_OK)
            return HS_E_NOMEM;
        at = end;
    }
    return HS_OK;
}

hs_status hs_tokenizer_encode(const hs_tokenizer *t, const char *text, size_t len,
                              const char *pair, size_t pair_len, hs_encoding *out,
                              hs_error *err)
{
    return hs_tokenizer_encode_max(t, text, len, pair, pair_len, 0, out, err);
}

/* v's elements in a malloc'd block of their own size (v is left empty); NULL when no block
 * can be had (v is then kept). A mapped vector is copied out and unmapped. */
static int32_t *shrink(hs_idvec *v)
{
    int32_t *p;
    if (v->mapped || v->n == 0) {
        if (!(p = malloc(v->n ? v->n * sizeof *p : sizeof *p)))
            return NULL;
        if (v->n)
            memcpy(p, v->v, v->n * sizeof *p);
        hs_idvec_free(v);
        return p;
    }
    if (!(p = realloc(v->v, v->n * sizeof *p)))
        p = v->v; /* a block that cannot shrink is kept as it is */
    v->v = NULL;
    v->n = v->cap = 0;
    return p;
}

hs_status hs_tokenizer_encode_max(const hs_tokenizer *t, const char *text, size_t len,
                                  const char *pair, size_t pair_len, size_t max_tokens,
                                  hs_encoding *out, hs_error *err)
{
    hs_idvec ids = {0};
    size_t end[HS_TMPL_MAX]; /* where each of the template's parts ends in ids */
    hs_encoding e = {0};
    size_t bad, seg_len[2] = {0, 0};
    hs_status st;
    if (out)
        memset(out, 0, sizeof *out);
    if (!t || !out || (!text && len) || (!pair && pair_len)) {
        st = hs_fail(err, HS_E_ARG, "hs_tokenizer_encode: NULL argument");
        goto fail;
    }
    if (!text)
        text = "";
    if (!hs_utf8_valid(text, len, &bad)) {
        st = hs_fail(err, HS_E_INPUT, "text is not valid utf-8 (byte offset %zu)", bad);
        goto fail;
    }
    if (pair && !hs_utf8_valid(pair, pair_len, &bad)) {
        st = hs_fail(err, HS_E_INPUT, "pair text is not valid utf-8 (byte offset %zu)", bad);
        goto fail;
    }
    /* the post-processor's template: special tokens and the texts in its order */
    const hs_template *tm = pair ? &t->pair : &t->single;
    for (size_t k = 0; k < tm->n; k++) {
        int32_t id = tm->id[k];
        size_t before = ids.n;
        if (id >= 0 ? hs_idvec_push(&ids, id) != HS_OK
                    : encode_segment(t, id == HS_TMPL_A ? text : pair, id == HS_TMPL_A ? len : pair_len,
                                     max_tokens, &ids) != HS_OK)
            goto nomem;
        if (id < 0)
            seg_len[id == HS_TMPL_B] = ids.n - before;
        end[k] = ids.n;
    }
    /* the ids become the encoding's (cut to size), then the type ids are set part by part */
    size_t n = ids.n;
    if (!(e.ids = shrink(&ids)) || !(e.type_ids = malloc((n ? n : 1) * sizeof *e.type_ids)))
        goto nomem;
    for (size_t k = 0, i = 0; k < tm->n; k++)
        for (; i < end[k]; i++)
            e.type_ids[i] = tm->type[k];
    e.n = n;
    e.n_text = seg_len[0];
    e.n_pair = seg_len[1];
    e.paired = pair != NULL;
    *out = e;
    return HS_OK;
nomem:
    st = hs_fail(err, HS_E_NOMEM, "out of memory encoding %zu bytes of text", len);
fail:
    hs_encoding_free(&e);
    hs_idvec_free(&ids);
    return st;
}

