/*
 * BPE as the Hugging Face tokenizers library runs it on the (normalized) text between added
 * tokens: the pre-tokenizer cuts words (pretok.c's patterns, Metaspace, or none), then each
 * word starts as symbols and is merged by rank.
 *   byte-level (HS_TOK_BPE: GPT-2, RoBERTa, GPT-NeoX, Llama 3, Qwen2): an optional prefix
 *     space, each byte of a word one symbol (the printable character GPT-2 maps it to);
 *   SentencePiece-style (HS_TOK_SPM_BPE: Llama 2, TinyLlama): each character one symbol,
 *     a character outside the vocabulary its bytes as <0xNN> tokens (byte_fallback) or the
 *     unknown token (consecutive ones fused with fuse_unk).
 * With ignore_merges a word found whole in the vocabulary is one token.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/text_internal.h"

/* ---- byte-level alphabet ---------------------------------------------------------------- */

/* GPT-2 keeps the printable Latin-1 bytes (0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF) as themselves and
 * gives the other 68 the characters U+0100.. in byte order: 0x00-0x20, 0x7F-0xA0, 0xAD. */
static int32_t byte_to_char(unsigned b)
{
    if (b <= 0x20)
        return (int32_t)(0x100 + b);
    if (b >= 0x7F && b <= 0xA0)
        return (int32_t)(0x100 + 33 + (b - 0x7F));
    if (b == 0xAD)
        return 0x100 + 67;
    return (int32_t)b;
}

int hs_bpe_char_to_byte(int32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp >= 0x100 && cp < 0x100 + 33)
        return (int)(cp - 0x100);
    if (cp >= 0x100 + 33 && cp < 0x100 + 67)
        return (int)(cp - 0x100 - 33 + 0x7F);
    if (cp == 0x100 + 67)
        return 0xAD;
    return -1;
}

/* ---- building the merge table ------------------------------------------------------------ */

/* Symbol id of a string: its model vocabulary id, or a merge-only symbol after the vocabulary
 * (never an added token: the model does not know those). */
static hs_status intern(hs_tokenizer *t, const char *s, size_t len, int32_t *sym)
{
    *sym = hs_strtab_find(&t->syms, s, len);
    if (*sym >= 0 && ((size_t)*sym < t->n_model || (size_t)*sym >= t->n_vocab))
        return HS_OK;
    return hs_strtab_push(&t->syms, s, len, sym);
}

static void merge_where(char *buf, size_t cap, const size_t *lines, size_t i)
{
    if (lines)
        snprintf(buf, cap, "line %zu", lines[i]);
    else
        snprintf(buf, cap, "merge %zu", i);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* t->right_first from the merges (already checked: "left right", valid UTF-8): the first
 * character of each right symbol, unless the left one ends with the same character (Llama's
 * "▁▁" runs join only across a "▁" that follows another). */
static hs_status right_firsts(hs_tokenizer *t, const char *const *merges, size_t n)
{
    size_t m = 0;
    free(t->right_first);
    t->n_right_first = 0;
    if (!(t->right_first = malloc((n ? n : 1) * sizeof *t->right_first)))
        return HS_E_NOMEM;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *u = (const unsigned char *)merges[i];
        size_t sp = (size_t)(strchr(merges[i], ' ') - merges[i]), k = sp + 1, last = sp - 1;
        while (last > 0 && (u[last] & 0xC0) == 0x80)
            last--;
        int32_t first = hs_utf8_next(u, &k), left_last = hs_utf8_next(u, &last);
        if (left_last != first)
            t->right_first[m++] = first;
    }
    n = m;
    qsort(t->right_first, n, sizeof *t->right_first, cmp_i32);
    for (size_t i = 0; i < n; i++)
        if (t->n_right_first == 0 || t->right_first[t->n_right_first - 1] != t->right_first[i])
            t->right_first[t->n_right_first++] = t->right_first[i];
    return HS_OK;
}

hs_status hs_bpe_build(hs_tokenizer *t, const char *const *merges, const int32_t *ranks,
                       const size_t *merge_lines, size_t n_merges, const char *what,
                       hs_error *err)
{
    char where[64];
    char *cat = NULL;
    hs_status st = HS_OK;
    if (n_merges > HS_TOK_MAX_MERGES) {
        st = hs_fail(err, HS_E_FORMAT, "%s: %zu merges is more than the limit of %zu", what,
                     n_merges, HS_TOK_MAX_MERGES);
        goto fail;
    }
    cat = malloc(2 * HS_TOK_MAX_TOKEN_BYTES + 1);
    if (!cat) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory building the merge table");
        goto fail;
    }
    for (size_t i = 0; i < n_merges; i++) {
        const char *m = merges[i];
        if (!m) {
            st = hs_fail(err, HS_E_ARG, "%s: merge %zu is NULL", what, i);
            goto fail;
        }
        size_t len = strlen(m), bad;
        const char *sp = memchr(m, ' ', len);
        if (!sp || sp == m || sp + 1 == m + len || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - m))) {
            merge_where(where, sizeof where, merge_lines, i);
            st = hs_fail(err, HS_E_FORMAT, "%s %s: expected two symbols separated by one space",
                         what, where);
            goto fail;
        }
        if (len > 2 * HS_TOK_MAX_TOKEN_BYTES) {
            merge_where(where, sizeof where, merge_lines, i);
            st = hs_fail(err, HS_E_FORMAT, "%s %s: merge is longer than %d bytes", what, where,
                         2 * HS_TOK_MAX_TOKEN_BYTES);
            goto fail;
        }
        if (!hs_utf8_valid(m, len, &bad)) {
            merge_where(where, sizeof where, merge_lines, i);
            st = hs_fail(err, HS_E_FORMAT, "%s %s: invalid utf-8 at byte %zu", what, where, bad);
            goto fail;
        }
        size_t llen = (size_t)(sp - m), rlen = len - llen - 1;
        int32_t left, right, result;
        memcpy(cat, m, llen);
        memcpy(cat + llen, sp + 1, rlen);
        if (intern(t, m, llen, &left) != HS_OK || intern(t, sp + 1, rlen, &right) != HS_OK ||
            intern(t, cat, llen + rlen, &result) != HS_OK ||
            hs_pairmap_put(&t->merges, left, right, ranks ? ranks[i] : (int32_t)i, result) != HS_OK ||
            hs_strtab_push(&t->merge_text, m, len, NULL) != HS_OK) {
            st = hs_fail(err, HS_E_NOMEM, "out of memory building the merge table");
            goto fail;
        }
    }
    if ((st = right_firsts(t, merges, n_merges)) != HS_OK) {
        hs_fail(err, st, "out of memory building the merge table");
        goto fail;
    }
    for (unsigned b = 0; b < 256; b++) {
        char u[8];
        int32_t sym = hs_strtab_find(&t->syms, u, hs_utf8_put(byte_to_char(b), u));
        t->byte_sym[b] = sym >= 0 && (size_t)sym < t->n_model ? sym : -1;
        snprintf(u, sizeof u, "<0x%02X>", b);
        sym = hs_strtab_find(&t->syms, u, 6);
        t->byte_fb[b] = sym >= 0 && (size_t)sym < t->n_model ? sym : -1;
    }
    free(cat);
    return HS_OK;
fail:
    free(cat);
    return st;
}

/* ---- merging ------------------------------------------------------------------------------- */

typedef struct cand {
    int32_t rank, pos, left, right;
} cand;

typedef struct bpe_work {
    int32_t *sym, *next, *prev; /* (cap) per byte position of the pre-token */
    cand *heap;                 /* (3 * cap): m - 1 pairs, then at most 2 a merge */
    size_t cap, n_heap;
} bpe_work;

#define SYM_DEAD (-2)

static int cand_before(const cand *a, const cand *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(bpe_work *w, cand c)
{
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_before(&c, &w->heap[p]))
            break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = c;
}

static cand heap_pop(bpe_work *w)
{
    cand top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        const cand *best = &last;
        if (l < n && cand_before(&w->heap[l], best)) {
            m = l;
            best = &w->heap[l];
        }
        if (l + 1 < n && cand_before(&w->heap[l + 1], best))
            m = l + 1;
        if (m == i)
            break;
        w->heap[i] = w->heap[m];
        i = m;
    }
    if (n > 0)
        w->heap[i] = last;
    return top;
}

static int make_cand(const hs_tokenizer *t, const bpe_work *w, int32_t pos, cand *c)
{
    int32_t r = w->next[pos];
    const hs_pair_entry *e = hs_pairmap_get(&t->merges, w->sym[pos], w->sym[r]);
    if (!e)
        return 0;
    c->rank = e->rank;
    c->pos = pos;
    c->left = w->sym[pos];
    c->right = w->sym[r];
    return 1;
}

static hs_status work_reserve(bpe_work *w, size_t m)
{
    if (m <= w->cap)
        return HS_OK;
    size_t cap = w->cap ? w->cap : 64;
    while (cap < m)
        cap *= 2;
    if (cap > (size_t)INT32_MAX || cap > SIZE_MAX / (3 * sizeof(cand)))
        return HS_E_NOMEM;
    free(w->sym);
    free(w->next);
    free(w->prev);
    free(w->heap);
    w->sym = malloc(cap * sizeof *w->sym);
    w->next = malloc(cap * sizeof *w->next);
    w->prev = malloc(cap * sizeof *w->prev);
    w->heap = malloc(3 * cap * sizeof *w->heap);
    w->cap = cap;
    if (!w->sym || !w->next || !w->prev || !w->heap) {
        w->cap = 0;
        return HS_E_NOMEM;
    }
    return HS_OK;
}

/* A final symbol: itself when the model has it, else the unknown token, else nothing. */
static hs_status push_sym(const hs_tokenizer *t, int32_t s, hs_idvec *out)
{
    if (s >= 0 && (size_t)s < t->n_model)
        return hs_idvec_push(out, s);
    return t->unk >= 0 ? hs_idvec_push(out, t->unk) : HS_OK;
}

/* The model's id of a word found whole in its vocabulary, or -1. */
static int32_t whole_word(const hs_tokenizer *t, const char *s, size_t len)
{
    int32_t id = hs_strtab_find(&t->syms, s, len);
    return id >= 0 && (size_t)id < t->n_model ? id : -1;
}

/* The symbols of a byte-level word: one per byte. A byte whose character is not in the
 * vocabulary is the unknown token, or, without one, left out: the library drops it before
 * merging, so its neighbours may merge (Falcon's vocabulary lacks some control bytes:
 * " \x1e\u2732" gives "\u0120\u00e2\u013e" whole). */
static size_t byte_symbols(const hs_tokenizer *t, const unsigned char *b, size_t m, bpe_work *w)
{
    size_t n = 0;
    for (size_t k = 0; k < m; k++)
        if (t->byte_sym[b[k]] >= 0 || t->unk >= 0)
            w->sym[n++] = t->byte_sym[b[k]];
    return n;
}

/* The symbols of a SentencePiece-style word: one per character found in the vocabulary; else
 * its bytes as <0xNN> when all of them are there (byte_fallback); else the unknown token,
 * consecutive ones fused with fuse_unk. As the library does, a pending unknown token is put
 * down before the next known character but not before <0xNN> tokens. */
static size_t char_symbols(const hs_tokenizer *t, const unsigned char *s, size_t len, bpe_work *w)
{
    size_t m = 0;
    int pending = 0;
    for (size_t i = 0; i < len;) {
        size_t at = i;
        (void)hs_utf8_next(s, &i);
        int32_t id = whole_word(t, (const char *)s + at, i - at);
        if (id >= 0) {
            if (pending)
                w->sym[m++] = t->unk;
            pending = 0;
            w->sym[m++] = id;
            continue;
        }
        int all = t->byte_fallback;
        for (size_t k = at; all && k < i; k++)
            all = t->byte_fb[s[k]] >= 0;
        if (all) {
            for (size_t k = at; k < i; k++)
                w->sym[m++] = t->byte_fb[s[k]];
            continue;
        }
        if (t->unk < 0)
            continue;
        if (pending && !t->fuse_unk)
            w->sym[m++] = t->unk;
        pending = 1;
    }
    if (pending)
        w->sym[m++] = t->unk;
    return m;
}

/*
 * BPE over the m symbols in w->sym, as the library's Word::merge_all: candidates sit in a
 * heap ordered by (rank, position); the first is merged, and the pairs it forms with its
 * neighbours join the heap at once, so a pair formed by a merge competes with the pairs of
 * its own rank that are still waiting (a SentencePiece vocabulary whose scores are all
 * equal puts every merge on one rank: "Hello" gives "▁H ell o", the leftmost pair first,
 * as llama.cpp and the library do). O(m log m).
 */
static hs_status bpe_merge(const hs_tokenizer *t, size_t m, bpe_work *w, hs_idvec *out)
{
    if (m == 0)
        return HS_OK;
    for (size_t k = 0; k < m; k++) {
        w->prev[k] = (int32_t)k - 1;
        w->next[k] = k + 1 < m ? (int32_t)k + 1 : -1;
    }
    w->n_heap = 0;
    for (size_t k = 0; k + 1 < m; k++) {
        cand c;
        if (make_cand(t, w, (int32_t)k, &c))
            heap_push(w, c);
    }
    while (w->n_heap > 0) {
        cand c = heap_pop(w);
        int32_t p = c.pos, r = w->next[p];
        if (w->sym[p] != c.left || r < 0 || w->sym[r] != c.right)
            continue; /* stale: one side was merged since */
        w->sym[p] = hs_pairmap_get(&t->merges, c.left, c.right)->result;
        w->sym[r] = SYM_DEAD;
        w->next[p] = w->next[r];
        if (w->next[p] >= 0)
            w->prev[w->next[p]] = p;
        cand nc;
        if (w->prev[p] >= 0 && make_cand(t, w, w->prev[p], &nc))
            heap_push(w, nc);
        if (w->next[p] >= 0 && make_cand(t, w, p, &nc))
            heap_push(w, nc);
    }
    for (int32_t k = 0; k >= 0; k = w->next[k]) {
        if (push_sym(t, w->sym[k], out) != HS_OK)
            return HS_E_NOMEM;
    }
    return HS_OK;
}

/* One word (len bytes) into ids. */
static hs_status bpe_word(const hs_tokenizer *t, const unsigned char *s, size_t len, bpe_work *w,
                          hs_idvec *out)
{
    if (len == 0)
        return HS_OK;
    if (work_reserve(w, len) != HS_OK)
        return HS_E_NOMEM;
    if (t->ignore_merges) {
        /* the word as the vocabulary spells it: byte-level characters (at most 2 bytes each) */
        const char *spelled = (const char *)s;
        size_t n = len;
        if (t->byte_level) {
            char *p = (char *)w->heap; /* (3 * len cands) free until bpe_merge */
            n = 0;
            for (size_t k = 0; k < len; k++)
                n += hs_utf8_put(byte_to_char(s[k]), p + n);
            spelled = p;
        }
        int32_t id = whole_word(t, spelled, n);
        if (id >= 0)
            return hs_idvec_push(out, id);
    }
    size_t m = t->byte_level ? byte_symbols(t, s, len, w) : char_symbols(t, s, len, w);
    return bpe_merge(t, m, w, out);
}

/* Words longer than this are cut where no merge can join (cut_mark). */
#define CUT_BYTES 4096

/* The string before which a SentencePiece-style word without a pre-tokenizer (the whole text
 * between added tokens, Llama 2) may be cut without changing its ids, when the character
 * before the cut is not its first one, or NULL: the metaspace ("▁"), when its first
 * character is a symbol of its own (so that nothing pending is put down differently) and no
 * merge's right symbol starts with it but after a left one ending with it (so that no merge
 * joins across). A piece of at least CUT_BYTES is never a whole vocabulary entry either
 * (ignore_merges). */
static const char *cut_mark(const hs_tokenizer *t)
{
    const char *rep = t->pre == HS_PRE_METASPACE ? t->meta_rep : NULL;
    for (size_t k = 0; !rep && k < t->n_norm; k++)
        if (t->norm[k] == HS_NORM_REPLACE)
            rep = t->rep_to;
    if (t->byte_level || !rep || !rep[0] || (t->pre != HS_PRE_NONE && t->pre != HS_PRE_METASPACE))
        return NULL;
    size_t k = 0;
    int32_t cp = hs_utf8_next((const unsigned char *)rep, &k);
    if (whole_word(t, rep, k) < 0 ||
        bsearch(&cp, t->right_first, t->n_right_first, sizeof cp, cmp_i32))
        return NULL;
    return rep;
}

typedef struct seq_word {
    const hs_tokenizer *t;
    bpe_work *w;
    hs_idvec *out;
} seq_word;

static hs_status seq_word_ids(const unsigned char *s, size_t len, void *ctx)
{
    seq_word *c = ctx;
    return bpe_word(c->t, s, len, c->w, c->out);
}

/* A text into words (the pre-tokenizer), each into ids. */
static hs_status encode_words(const hs_tokenizer *t, const unsigned char *s, size_t n,
                              bpe_work *w, hs_idvec *out)
{
    if (t->pre == HS_PRE_SEQ) {
        seq_word c = {t, w, out};
        return hs_pre_seq_words(t, s, n, seq_word_ids, &c) == HS_OK ? HS_OK : HS_E_NOMEM;
    }
    size_t i = 0;
    const char *rep = t->meta_rep, *cut = n > CUT_BYTES ? cut_mark(t) : NULL;
    size_t rl = strlen(rep), cl = cut ? strlen(cut) : 0, c1 = 0;
    if (cut)
        (void)hs_utf8_next((const unsigned char *)cut, &c1); /* bytes of its first character */
    while (i < n) {
        size_t e = n;
        if (cut && (t->pre == HS_PRE_NONE || !t->meta_split) && n - i > CUT_BYTES) {
            /* before the first cut mark at least CUT_BYTES in, not after its first character */
            for (e = i + CUT_BYTES; e < n && !(n - e >= cl && memcmp(s + e, cut, cl) == 0 &&
                                               memcmp(s + e - c1, cut, c1) != 0); e++)
                ;
        } else if (t->pre == HS_PRE_METASPACE && t->meta_split && rl) {
            /* each replacement starts a word (MergedWithNext) */
            for (e = i + 1; e < n && !(n - e >= rl && memcmp(s + e, rep, rl) == 0); e++)
                ;
        } else if (t->pre != HS_PRE_METASPACE && t->pre != HS_PRE_NONE) {
            e = hs_pretoken_end(t->pre, s, n, i);
        }
        if (bpe_word(t, s + i, e - i, w, out) != HS_OK)
            return HS_E_NOMEM;
        i = e;
    }
    return HS_OK;
}

/* Metaspace: ' ' becomes the replacement, which is put first when the scheme asks for it
 * (also unigram.c's). */
unsigned char *hs_tok_metaspace(const hs_tokenizer *t, const unsigned char *s, size_t len,
                                int first, size_t *out_len)
{
    const char *rep = t->meta_rep;
    size_t rl = strlen(rep), n = 0;
    if (len > (SIZE_MAX - rl) / (rl + 1))
        return NULL;
    unsigned char *o = malloc(len * (rl + 1) + rl + 1);
    if (!o)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') {
            memcpy(o + n, rep, rl);
            n += rl;
        } else {
            o[n++] = s[i];
        }
    }
    int put = t->meta_scheme == HS_META_ALWAYS || (t->meta_scheme == HS_META_FIRST && first);
    if (put && !(n >= rl && memcmp(o, rep, rl) == 0)) {
        memmove(o + rl, o, n);
        memcpy(o, rep, rl);
        n += rl;
    }
    *out_len = n;
    return o;
}

hs_status hs_bpe_encode(const hs_tokenizer *t, const char *text, size_t len, int first,
                        hs_idvec *out)
{
    const unsigned char *s = (const unsigned char *)text;
    unsigned char *own = NULL;
    bpe_work w = {0};
    hs_status st = HS_E_NOMEM; /* the only way to fail */
    if (len > 0 && t->byte_level && t->add_prefix_space && s[0] != ' ') {
        if (len == SIZE_MAX || !(own = malloc(len + 1)))
            goto fail;
        own[0] = ' ';
        memcpy(own + 1, s, len);
        s = own;
        len++;
    } else if (t->pre == HS_PRE_METASPACE) {
        if (!(own = hs_tok_metaspace(t, s, len, first, &len)))
            goto fail;
        s = own;
    }
    if (encode_words(t, s, len, &w, out) != HS_OK)
        goto fail;
    st = HS_OK;
fail:
    free(own);
    free(w.sym);
    free(w.next);
    free(w.prev);
    free(w.heap);
    return st;
}
