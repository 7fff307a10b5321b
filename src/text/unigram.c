/*
 * SentencePiece Unigram (T5's tokenizer.json model): each word cut into the pieces whose
 * scores (log probabilities) add up to the most, by Viterbi over the positions of the word,
 * as Hugging Face's tokenizers library does it:
 *   - the pieces starting at a position are those of the vocabulary that prefix the rest of
 *     the word (all of the model's pieces, special ones included);
 *   - a character no one-character piece covers is an unknown piece of its own, scored the
 *     vocabulary's lowest score minus 10;
 *   - on equal totals the path found first is kept (earlier start, then shorter piece, then
 *     the unknown piece);
 *   - consecutive unknown pieces are fused into one, which is then the vocabulary's piece of
 *     that text if there is one, else its bytes as <0xNN> pieces (byte_fallback, when every
 *     byte has one), else the unknown token.
 * The pre-tokenizer runs first: WhitespaceSplit (words between whitespace), then Metaspace
 * (' ' to "▁", "▁" put first, words cut before each "▁" when split).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/text_internal.h"

#define UNK_PENALTY 10.0

/* The trie of the model's pieces: node 0 is the root; the entry (node, byte) leads to the
 * next node, its rank the piece that ends there (-1: none). */
hs_status hs_unigram_build(hs_tokenizer *t, const double *scores, hs_error *err)
{
    double lo = 0.0;
    int32_t nodes = 1;
    if (!(t->uni_score = malloc(t->n_model * sizeof *t->uni_score)))
        return hs_fail(err, HS_E_NOMEM, "out of memory building the Unigram model");
    for (size_t i = 0; i < t->n_model; i++) {
        t->uni_score[i] = scores[i];
        if (i == 0 || scores[i] < lo)
            lo = scores[i];
    }
    t->uni_unk_score = lo - UNK_PENALTY;
    for (size_t i = 0; i < t->n_model; i++) {
        const unsigned char *s = (const unsigned char *)hs_strtab_str(&t->syms, (int32_t)i);
        size_t len = t->syms.len[i];
        int32_t node = 0;
        for (size_t k = 0; k < len; k++) {
            const hs_pair_entry *e = hs_pairmap_get(&t->uni_trie, node, s[k]);
            int32_t next = e ? e->result : nodes++;
            int32_t piece = k + 1 == len ? (int32_t)i : e ? e->rank : -1;
            if ((!e || piece != e->rank) && hs_pairmap_put(&t->uni_trie, node, s[k], piece, next) != HS_OK)
                return hs_fail(err, HS_E_NOMEM, "out of memory building the Unigram model");
            node = next;
        }
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        int32_t id = hs_strtab_find(&t->syms, name, 6);
        t->byte_fb[b] = id >= 0 && (size_t)id < t->n_model ? id : -1;
    }
    return HS_OK;
}

/* The best path ending at each byte of a word: its score, the start of its last piece (-1:
 * none yet) and that piece's id. */
typedef struct uni_node {
    double score;
    int32_t from;
    int32_t id;
} uni_node;

typedef struct uni_work {
    uni_node *node;
    size_t cap;
} uni_work;

static size_t char_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

static void relax(uni_node *to, double score, int32_t from, int32_t id)
{
    if (to->from < 0 || score > to->score)
        *to = (uni_node){score, from, id};
}

/* The ids of a fused run of unknown pieces s[0..n). */
static hs_status put_unknown(const hs_tokenizer *t, const unsigned char *s, size_t n, hs_idvec *out)
{
    int32_t id = hs_strtab_find(&t->syms, (const char *)s, n);
    if (id >= 0 && (size_t)id < t->n_model)
        return hs_idvec_push(out, id);
    size_t k = 0;
    while (t->byte_fallback && k < n && t->byte_fb[s[k]] >= 0)
        k++;
    if (!t->byte_fallback || k < n)
        return hs_idvec_push(out, t->unk);
    for (k = 0; k < n; k++)
        if (hs_idvec_push(out, t->byte_fb[s[k]]) != HS_OK)
            return HS_E_NOMEM;
    return HS_OK;
}

/* The ids of the path that ends at n, first to last: the links are turned around first
 * (node[e].from becomes the end of the piece that starts at e), then followed forwards. */
static hs_status put_path(const hs_tokenizer *t, const unsigned char *s, size_t n, uni_node *node,
                          hs_idvec *out)
{
    /* reverse the links: after[start] = end of the piece that starts there */
    int32_t next = (int32_t)n;
    for (int32_t at = (int32_t)n; at > 0;) {
        int32_t from = node[at].from;
        node[at].from = next; /* now: where the following piece ends (n for the last) */
        next = at;
        at = from;
    }
    node[0].from = next;
    for (int32_t at = 0; at < (int32_t)n;) {
        int32_t end = node[at].from;
        if (node[end].id != t->unk) {
            if (hs_idvec_push(out, node[end].id) != HS_OK)
                return HS_E_NOMEM;
            at = end;
            continue;
        }
        int32_t stop = end; /* fuse the unknown pieces that follow */
        while (stop < (int32_t)n && node[node[stop].from].id == t->unk)
            stop = node[stop].from;
        if (put_unknown(t, s + at, (size_t)(stop - at), out) != HS_OK)
            return HS_E_NOMEM;
        at = stop;
    }
    return HS_OK;
}

/* One word (n > 0 bytes of valid UTF-8) into ids. */
static hs_status viterbi(const hs_tokenizer *t, const unsigned char *s, size_t n, uni_work *w,
                         hs_idvec *out)
{
    if (n >= (size_t)INT32_MAX)
        return HS_E_NOMEM;
    void *grown = w->node;
    if (hs_tok_grow(&grown, &w->cap, n + 1, sizeof *w->node, 256) != HS_OK)
        return HS_E_NOMEM;
    w->node = grown;
    uni_node *node = w->node;
    for (size_t i = 0; i <= n; i++)
        node[i] = (uni_node){0.0, -1, -1};
    for (size_t at = 0, mb; at < n; at += mb) {
        double here = node[at].score;
        int single = 0;
        int32_t cur = 0;
        mb = char_len(s[at]);
        for (size_t k = at; k < n; k++) {
            const hs_pair_entry *e = hs_pairmap_get(&t->uni_trie, cur, s[k]);
            if (!e)
                break;
            cur = e->result;
            if (e->rank < 0)
                continue;
            relax(&node[k + 1], t->uni_score[e->rank] + here, (int32_t)at, e->rank);
            single |= k + 1 - at == mb;
        }
        if (!single)
            relax(&node[at + mb], t->uni_unk_score + here, (int32_t)at, t->unk);
    }
    return put_path(t, s, n, node, out);
}

/* Metaspace (when set) on one piece of text, then each of its words through the model. */
static hs_status encode_piece(const hs_tokenizer *t, const unsigned char *s, size_t n, int first,
                              uni_work *w, hs_idvec *out)
{
    unsigned char *own = NULL;
    hs_status st = HS_OK;
    if (t->pre == HS_PRE_METASPACE) {
        if (!(own = hs_tok_metaspace(t, s, n, first, &n)))
            return HS_E_NOMEM;
        s = own;
    }
    const char *rep = t->meta_rep;
    size_t rl = t->pre == HS_PRE_METASPACE && t->meta_split ? strlen(rep) : 0;
    for (size_t i = 0, e; i < n && st == HS_OK; i = e) {
        e = n;
        if (rl) /* each replacement starts a word (MergedWithNext) */
            for (e = i + 1; e < n && !(n - e >= rl && memcmp(s + e, rep, rl) == 0); e++)
                ;
        st = viterbi(t, s + i, e - i, w, out);
    }
    free(own);
    return st;
}

hs_status hs_unigram_encode(const hs_tokenizer *t, const char *text, size_t len, int first,
                            hs_idvec *out)
{
    const unsigned char *s = (const unsigned char *)text;
    uni_work w = {0};
    hs_status st = HS_OK;
    if (!t->ws_split) {
        st = encode_piece(t, s, len, first, &w, out);
    } else { /* WhitespaceSplit: the runs of characters that are not whitespace */
        for (size_t i = 0; i < len && st == HS_OK;) {
            size_t k = i, start;
            if (hs_uni_white_space(hs_utf8_next(s, &k))) {
                i = k;
                continue;
            }
            for (start = i, i = k; i < len; i = k) {
                k = i;
                if (hs_uni_white_space(hs_utf8_next(s, &k)))
                    break;
            }
            st = encode_piece(t, s + start, i - start, first && start == 0, &w, out);
        }
    }
    free(w.node);
    return st;
}
