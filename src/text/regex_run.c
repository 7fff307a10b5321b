/*
 * The search of the Split pre-tokenizers' regex engine (regex.h): leftmost-first backtracking
 * over the compiled program that tries each (instruction, position) once per search (a state
 * that failed once fails again: there are no captures or back-references for it to depend
 * on, and the states of one start stay failed for the next).
 */
#include <stdlib.h>
#include <string.h>

#include "text/regex.h"
#include "text/text_internal.h"

static unsigned props_of(int32_t cp)
{
    int g = hs_uni_gpt2_class(cp);
    unsigned p = g == HS_GC_LETTER ? HS_RX_L : g == HS_GC_NUMBER ? HS_RX_N : g == HS_GC_SPACE ? HS_RX_SPACE : 0;
    return p | (unsigned)hs_uni_range_value(hs_rx_classes, hs_rx_classes_n, cp);
}

static int class_has(const hs_rx_class *c, int32_t cp)
{
    int in = hs_uni_range_value(c->r, c->nr, cp) != 0;
    if (!in && (c->props | c->nprops)) {
        unsigned p = props_of(cp);
        in = (p & c->props) || (~p & c->nprops);
    }
    return in != c->neg;
}

/* At most this many slots (8 bytes each) of tried states in one search: 1 GiB. */
#define RX_MAX_SEEN ((size_t)1 << 27)

/* ---- search -------------------------------------------------------------------------------- */

/* The (instruction, position) states tried in one search: an open-addressing set. */
typedef struct rx_seen {
    uint64_t *key; /* key + 1; 0 empty */
    size_t cap, n;
} rx_seen;

/* 1 when newly added, 0 when there, -1 out of memory. */
static int seen_add(rx_seen *v, uint64_t key)
{
    if (2 * (v->n + 1) > v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 256;
        if (cap > RX_MAX_SEEN)
            return -1; /* a pattern that tries this many states on one piece: refused as out of memory */
        uint64_t *k = calloc(cap, sizeof *k);
        if (!k)
            return -1;
        for (size_t i = 0; i < v->cap; i++)
            if (v->key[i])
                for (size_t h = (size_t)(v->key[i] * 0x9E3779B97F4A7C15u) & (cap - 1);; h = (h + 1) & (cap - 1))
                    if (!k[h]) {
                        k[h] = v->key[i];
                        break;
                    }
        free(v->key);
        v->key = k;
        v->cap = cap;
    }
    key++;
    for (size_t h = (size_t)(key * 0x9E3779B97F4A7C15u) & (v->cap - 1);; h = (h + 1) & (v->cap - 1)) {
        if (v->key[h] == key)
            return 0;
        if (!v->key[h]) {
            v->key[h] = key;
            v->n++;
            return 1;
        }
    }
}

typedef struct rx_thread {
    size_t pc, pos;
} rx_thread;

/* The end of the match that starts at start, (size_t)-1 for none, (size_t)-2 out of memory. */
static size_t match_at(const hs_rx *rx, const unsigned char *s, size_t n, size_t start, rx_seen *seen,
                       rx_thread **stack, size_t *cap)
{
    size_t top = 0;
    (*stack)[top++] = (rx_thread){0, start};
    while (top) {
        rx_thread t = (*stack)[--top];
        for (;;) {
            int fresh = seen_add(seen, ((uint64_t)t.pc << 40) | t.pos);
            if (fresh <= 0) {
                if (fresh < 0)
                    return (size_t)-2;
                break;
            }
            const hs_rx_inst *in = &rx->prog[t.pc];
            size_t next = t.pos;
            if (in->op == HS_RX_OP_MATCH)
                return t.pos;
            if (in->op == HS_RX_OP_JMP) {
                t.pc = (size_t)in->x;
                continue;
            }
            if (in->op == HS_RX_OP_SPLIT) {
                if (hs_tok_grow((void **)stack, cap, top + 1, sizeof **stack, 64) != HS_OK)
                    return (size_t)-2;
                (*stack)[top++] = (rx_thread){(size_t)in->y, t.pos};
                t.pc = (size_t)in->x;
                continue;
            }
            if (in->op == HS_RX_OP_EOL) {
                if (t.pos < n && s[t.pos] != '\n')
                    break;
                t.pc++;
                continue;
            }
            int has = t.pos < n && class_has(&rx->cls[in->x], hs_utf8_next(s, &next));
            if (in->op == HS_RX_OP_CLASS ? !has : (in->op == HS_RX_OP_NLOOK) == has)
                break;
            if (in->op == HS_RX_OP_CLASS)
                t.pos = next;
            t.pc++;
        }
    }
    return (size_t)-1;
}

int hs_rx_search(const hs_rx *rx, const unsigned char *s, size_t n, size_t from, size_t *ms, size_t *me)
{
    rx_seen seen = {0};
    size_t cap = 64;
    rx_thread *stack = malloc(cap * sizeof *stack);
    int r = stack ? 0 : -1;
    for (size_t q = from; r == 0 && q < n;) {
        size_t e = match_at(rx, s, n, q, &seen, &stack, &cap);
        if (e == (size_t)-2) {
            r = -1;
        } else if (e != (size_t)-1) {
            *ms = q;
            *me = e;
            r = 1;
        } else {
            (void)hs_utf8_next(s, &q);
        }
    }
    free(seen.key);
    free(stack);
    return r;
}
