/*
 * Added tokens: the list a tokenizer matches whole in the text, and the automaton that finds
 * them in time linear in the text.
 *
 * The rule (Hugging Face's AddedVocabulary, leftmost-longest): from a position, the match
 * that starts first wins, the longest one starting there, the lowest id among equal strings.
 * Checking every token at every position costs the number of tokens times their length per
 * byte (1,022 tokens a^i b against a run of "a" is quadratic); instead, for each position the
 * longest token that STARTS there is found by an Aho-Corasick automaton over the reversed
 * tokens, run backwards over a block of the text: after it has read s[p..e) backwards, the
 * longest reversed token that ends its state's string is the longest token that is a prefix
 * of s[p..e). A block of HS_ADDED_BLOCK positions needs the longest token's length of text
 * after it; the scan is then a forward walk over the block's answers.
 */
#include <stdlib.h>
#include <string.h>

#include "text/text_internal.h"

/* One automaton: the tokens of one pass (NORMALIZED or not), reversed, in a trie with failure
 * links. State 0 is the root; its transitions are a table, the others' a hash of
 * (state, byte). */
typedef struct hs_added_ac {
    size_t n;         /* states */
    int32_t *fail;    /* (n) the state of the longest proper suffix of the state's string */
    int32_t *out;     /* (n) index into t->added of the longest token ending the state's
                       * string (the state's own when it is one), -1 for none */
    int32_t root[256]; /* the root's child on each byte, 0 for none */
    uint64_t *keys;   /* (cap) ((uint64)state << 8 | byte) + 1, 0 for an empty slot */
    int32_t *child;   /* (cap) the child of keys[i] */
    size_t cap;       /* power of two, at least twice the states */
    size_t max_len;   /* longest token in bytes */
} hs_added_ac;

static size_t slot_of(const hs_added_ac *a, uint64_t key)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 32)) & (a->cap - 1);
}

/* The child of state s (not the root) on byte c, or -1. */
static int32_t child_of(const hs_added_ac *a, int32_t s, unsigned char c)
{
    uint64_t key = (((uint64_t)s << 8) | c) + 1;
    for (size_t i = slot_of(a, key);; i = (i + 1) & (a->cap - 1)) {
        if (a->keys[i] == key)
            return a->child[i];
        if (a->keys[i] == 0)
            return -1;
    }
}

static void put_child(hs_added_ac *a, int32_t s, unsigned char c, int32_t v)
{
    uint64_t key = (((uint64_t)s << 8) | c) + 1;
    size_t i = slot_of(a, key);
    while (a->keys[i] != 0)
        i = (i + 1) & (a->cap - 1);
    a->keys[i] = key;
    a->child[i] = v;
}

/* The state after reading byte c in state s. */
static int32_t step(const hs_added_ac *a, int32_t s, unsigned char c)
{
    for (;;) {
        if (s == 0)
            return a->root[c];
        int32_t x = child_of(a, s, c);
        if (x >= 0)
            return x;
        s = a->fail[s];
    }
}

static void ac_free(hs_added_ac *a)
{
    if (!a)
        return;
    free(a->fail);
    free(a->out);
    free(a->keys);
    free(a->child);
    free(a);
}

/* Inserts the reversed tokens of t->added whose NORMALIZED flag is want; parent[] and
 * pbyte[] record each state's place in the trie and depth[] its length. Tokens come longest
 * first, then by id, so the first of equal strings keeps the state. */
static void ac_insert(hs_added_ac *a, const hs_tokenizer *t, unsigned want, int32_t *parent,
                      unsigned char *pbyte, uint32_t *depth)
{
    for (size_t k = 0; k < t->n_added; k++) {
        if ((t->added_flags[k] & HS_ADD_NORMALIZED) != want)
            continue;
        const unsigned char *s = (const unsigned char *)hs_strtab_str(&t->syms, t->added[k]);
        size_t len = t->syms.len[t->added[k]];
        int32_t st = 0;
        for (size_t p = len; p-- > 0;) {
            int32_t x = st == 0 ? (a->root[s[p]] ? a->root[s[p]] : -1) : child_of(a, st, s[p]);
            if (x < 0) {
                x = (int32_t)a->n++;
                parent[x] = st;
                pbyte[x] = s[p];
                depth[x] = depth[st] + 1;
                a->out[x] = -1;
                if (st == 0)
                    a->root[s[p]] = x;
                else
                    put_child(a, st, s[p], x);
            }
            st = x;
        }
        if (a->out[st] < 0)
            a->out[st] = (int32_t)k;
        if (len > a->max_len)
            a->max_len = len;
    }
}

/* Failure links and outputs, the states taken in order of depth (a counting sort). */
static hs_status ac_links(hs_added_ac *a, const int32_t *parent, const unsigned char *pbyte,
                          const uint32_t *depth)
{
    size_t *start = calloc(a->max_len + 2, sizeof *start);
    int32_t *order = malloc(a->n * sizeof *order);
    if (!start || !order) {
        free(start);
        free(order);
        return HS_E_NOMEM;
    }
    for (size_t s = 0; s < a->n; s++)
        start[depth[s] + 1]++;
    for (size_t d = 1; d <= a->max_len + 1; d++)
        start[d] += start[d - 1];
    for (size_t s = 0; s < a->n; s++)
        order[start[depth[s]]++] = (int32_t)s;
    a->fail[0] = 0;
    a->out[0] = -1;
    for (size_t k = 1; k < a->n; k++) {
        int32_t u = order[k], p = parent[u];
        a->fail[u] = p == 0 ? 0 : step(a, a->fail[p], pbyte[u]);
        if (a->out[u] < 0)
            a->out[u] = a->out[a->fail[u]];
    }
    free(start);
    free(order);
    return HS_OK;
}

/* The automaton of one pass's tokens into *out (NULL when the pass has none). */
static hs_status ac_build(const hs_tokenizer *t, unsigned want, hs_added_ac **out)
{
    size_t bytes = 0;
    *out = NULL;
    for (size_t k = 0; k < t->n_added; k++)
        if ((t->added_flags[k] & HS_ADD_NORMALIZED) == want)
            bytes += t->syms.len[t->added[k]];
    if (bytes == 0)
        return HS_OK;
    size_t states = bytes + 1, cap = 16;
    while (cap < 2 * states)
        cap *= 2;
    hs_added_ac *a = calloc(1, sizeof *a);
    int32_t *parent = malloc(states * sizeof *parent);
    unsigned char *pbyte = malloc(states);
    uint32_t *depth = malloc(states * sizeof *depth);
    hs_status st = HS_E_NOMEM;
    if (!a || !parent || !pbyte || !depth || states > INT32_MAX)
        goto done;
    a->cap = cap;
    a->fail = malloc(states * sizeof *a->fail);
    a->out = malloc(states * sizeof *a->out);
    a->keys = calloc(cap, sizeof *a->keys);
    a->child = malloc(cap * sizeof *a->child);
    if (!a->fail || !a->out || !a->keys || !a->child)
        goto done;
    a->n = 1;
    depth[0] = 0;
    ac_insert(a, t, want, parent, pbyte, depth);
    if ((st = ac_links(a, parent, pbyte, depth)) != HS_OK)
        goto done;
    *out = a;
    a = NULL;
done:
    ac_free(a);
    free(parent);
    free(pbyte);
    free(depth);
    return st;
}

void hs_added_free(hs_tokenizer *t)
{
    free(t->added);
    free(t->added_flags);
    ac_free(t->added_ac[0]);
    ac_free(t->added_ac[1]);
    t->added = NULL;
    t->added_flags = NULL;
    t->added_ac[0] = t->added_ac[1] = NULL;
    t->n_added = 0;
}

typedef struct added_key {
    unsigned first;
    uint32_t len;
    int32_t id;
    unsigned char flags;
} added_key;

/* Sort order of added tokens: by first byte, then longest first, then by id. */
static int added_cmp(const void *pa, const void *pb)
{
    const added_key *a = pa, *b = pb;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

hs_status hs_tok_set_added(hs_tokenizer *t, const int32_t *ids, const unsigned char *flags,
                           size_t n, hs_error *err)
{
    if (n > HS_TOK_MAX_ADDED)
        return hs_fail(err, HS_E_FORMAT, "%zu added tokens is more than the limit of %d", n,
                       HS_TOK_MAX_ADDED);
    hs_added_free(t);
    t->added = malloc((n ? n : 1) * sizeof *t->added);
    t->added_flags = malloc(n ? n : 1);
    added_key *keys = malloc((n ? n : 1) * sizeof *keys);
    if (!t->added || !t->added_flags || !keys) {
        free(keys);
        return hs_fail(err, HS_E_NOMEM, "out of memory adding tokens");
    }
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= t->n_vocab || t->syms.len[ids[i]] == 0) {
            free(keys);
            return hs_fail(err, HS_E_FORMAT, "added token %zu (id %d) is empty or out of range",
                           i, ids[i]);
        }
        if ((bytes += t->syms.len[ids[i]]) > HS_TOK_MAX_ADDED_BYTES) {
            free(keys);
            return hs_fail(err, HS_E_FORMAT, "the added tokens hold more than %d bytes, the limit "
                           "(their matcher takes about 32 bytes a byte)", HS_TOK_MAX_ADDED_BYTES);
        }
        keys[i].first = (unsigned char)hs_strtab_str(&t->syms, ids[i])[0];
        keys[i].len = t->syms.len[ids[i]];
        keys[i].id = ids[i];
        keys[i].flags = flags ? flags[i] : 0;
    }
    qsort(keys, n, sizeof *keys, added_cmp);
    for (size_t i = 0; i < n; i++) {
        t->added[i] = keys[i].id;
        t->added_flags[i] = keys[i].flags;
    }
    free(keys);
    t->n_added = n;
    if (ac_build(t, 0, &t->added_ac[0]) != HS_OK ||
        ac_build(t, HS_ADD_NORMALIZED, &t->added_ac[1]) != HS_OK)
        return hs_fail(err, HS_E_NOMEM, "out of memory adding tokens");
    return HS_OK;
}

/* ---- scanning ------------------------------------------------------------------------------ */

void hs_added_scan_init(hs_added_scan *sc, const hs_tokenizer *t, int pass, const char *s,
                        size_t len)
{
    sc->ac = t->added_ac[pass != 0];
    sc->s = (const unsigned char *)s;
    sc->len = len;
    sc->lo = sc->hi = 0;
}

/* The longest token starting at each position of the block [lo, lo + HS_ADDED_BLOCK). */
static void scan_block(hs_added_scan *sc, size_t lo)
{
    const hs_added_ac *a = sc->ac;
    size_t hi = sc->len - lo < HS_ADDED_BLOCK ? sc->len : lo + HS_ADDED_BLOCK;
    size_t end = sc->len - hi < a->max_len ? sc->len : hi + a->max_len;
    int32_t st = 0;
    for (size_t p = end; p-- > lo;) {
        st = step(a, st, sc->s[p]);
        if (p < hi)
            sc->found[p - lo] = a->out[st];
    }
    sc->lo = lo;
    sc->hi = hi;
}

int32_t hs_added_scan_next(hs_added_scan *sc, size_t i, size_t *at)
{
    if (!sc->ac)
        return -1;
    while (i < sc->len) {
        if (i < sc->lo || i >= sc->hi)
            scan_block(sc, i);
        for (; i < sc->hi; i++)
            if (sc->found[i - sc->lo] >= 0) {
                *at = i;
                return sc->found[i - sc->lo];
            }
    }
    return -1;
}
