/*
 * The regex engine of tokenizer.json's Split pre-tokenizers (regex.h): a parser into a small
 * tree and a compiler into a backtracking program (regex_run.c searches with it).
 */
#include <stdlib.h>
#include <string.h>

#include "text/regex.h"
#include "text/text_internal.h"

#define RX_MAX_NODES 4096
#define RX_MAX_CLASSES 1024
#define RX_MAX_PROG 65536
#define RX_MAX_DEPTH 64
#define RX_MAX_REPEAT 1000

enum { N_EMPTY, N_CLASS, N_CAT, N_ALT, N_REP, N_EOL, N_LOOK };
typedef struct rx_node {
    int kind, cls, min, max, neg; /* max -1: no bound; neg: (?!..) */
    int a, b;                     /* children (node indices) */
} rx_node;

typedef struct rx_parse {
    const unsigned char *p, *end;
    const char *what;
    hs_error *err;
    hs_rx *rx;
    rx_node *node;
    int nnode;
    size_t cap_cls;
    hs_status st; /* the first failure */
} rx_parse;

static int fail(rx_parse *ps, hs_status st, const char *msg)
{
    if (ps->st == HS_OK)
        ps->st = hs_fail(ps->err, st, "%s: %s", ps->what, msg);
    return -1;
}

static int unsupported(rx_parse *ps, const char *construct)
{
    if (ps->st == HS_OK)
        ps->st = hs_fail(ps->err, HS_E_UNSUPPORTED, "%s: the regex construct %s is not supported", ps->what,
                         construct);
    return -1;
}

static int new_node(rx_parse *ps, int kind, int a, int b)
{
    if (ps->nnode == RX_MAX_NODES)
        return fail(ps, HS_E_UNSUPPORTED, "the regex is too long");
    rx_node *n = &ps->node[ps->nnode];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->a = a;
    n->b = b;
    return ps->nnode++;
}

/* One code point of the pattern (valid UTF-8), or -1. */
static int32_t pat_char(rx_parse *ps)
{
    const unsigned char *p = ps->p;
    size_t left = (size_t)(ps->end - p), len = p[0] < 0x80 ? 1 : p[0] < 0xC2 ? 0 : p[0] < 0xE0 ? 2
                                                              : p[0] < 0xF0 ? 3 : p[0] < 0xF5 ? 4 : 0;
    if (!len || len > left || !hs_utf8_valid((const char *)p, len, &(size_t){0}))
        return fail(ps, HS_E_FORMAT, "the regex is not valid UTF-8");
    size_t i = 0;
    int32_t cp = hs_utf8_next(p, &i);
    ps->p += i;
    return cp;
}

/* ---- classes ------------------------------------------------------------------------------ */

static int cmp_range(const void *a, const void *b)
{
    const hs_uni_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int new_class(rx_parse *ps)
{
    hs_rx *rx = ps->rx;
    if (rx->ncls == RX_MAX_CLASSES)
        return fail(ps, HS_E_UNSUPPORTED, "the regex has too many character classes");
    if (hs_tok_grow((void **)&rx->cls, &ps->cap_cls, rx->ncls + 1, sizeof *rx->cls, 16) != HS_OK)
        return fail(ps, HS_E_NOMEM, "out of memory");
    memset(&rx->cls[rx->ncls], 0, sizeof *rx->cls);
    return (int)rx->ncls++;
}

static int add_range(rx_parse *ps, hs_rx_class *c, size_t *cap, int32_t lo, int32_t hi)
{
    if (hs_tok_grow((void **)&c->r, cap, c->nr + 1, sizeof *c->r, 8) != HS_OK)
        return fail(ps, HS_E_NOMEM, "out of memory");
    c->r[c->nr++] = (hs_uni_range){lo, hi, 1};
    return 0;
}

/* Sorts and merges a class's ranges. */
static void class_finish(hs_rx_class *c)
{
    if (!c->nr)
        return;
    qsort(c->r, c->nr, sizeof *c->r, cmp_range);
    size_t k = 0;
    for (size_t i = 1; i < c->nr; i++) {
        if (c->r[i].lo <= c->r[k].hi + 1) {
            if (c->r[i].hi > c->r[k].hi)
                c->r[k].hi = c->r[i].hi;
        } else {
            c->r[++k] = c->r[i];
        }
    }
    c->nr = k + 1;
}

/* ---- parser ------------------------------------------------------------------------------- */

/* After '\': a property or class escape into props / nprops (1), a literal into *cp (0), or -1. */
static int parse_escape(rx_parse *ps, int32_t *cp, unsigned *props, unsigned *nprops)
{
    if (ps->p == ps->end)
        return fail(ps, HS_E_FORMAT, "the regex ends with '\\'");
    unsigned char c = *ps->p;
    if (c == 's' || c == 'S') {
        ps->p++;
        *(c == 's' ? props : nprops) |= HS_RX_SPACE;
        return 1;
    }
    if (c == 'p' || c == 'P') {
        static const struct { const char *name; unsigned bit; } known[] = {
            {"{L}", HS_RX_L}, {"{N}", HS_RX_N}, {"{P}", HS_RX_P}, {"{S}", HS_RX_S}, {"{M}", HS_RX_M}};
        for (size_t k = 0; k < sizeof known / sizeof *known; k++)
            if ((size_t)(ps->end - ps->p - 1) >= 3 && memcmp(ps->p + 1, known[k].name, 3) == 0) {
                ps->p += 4;
                *(c == 'p' ? props : nprops) |= known[k].bit;
                return 1;
            }
        return unsupported(ps, "\\p or \\P with a property other than {L}, {N}, {P}, {S}, {M}");
    }
    static const char ctl[] = "rntfv", val[] = "\r\n\t\f\v";
    const char *k = c ? strchr(ctl, c) : NULL;
    if (k) {
        ps->p++;
        *cp = (unsigned char)val[k - ctl];
        return 0;
    }
    if (c < 0x80 && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
        ps->p++;
        *cp = c;
        return 0;
    }
    static const char msg[] = "the escape \\? (only \\r \\n \\t \\f \\v \\s \\S \\p \\P and escaped punctuation)";
    char shown[sizeof msg];
    memcpy(shown, msg, sizeof msg);
    *strchr(shown, '?') = c < 0x80 ? (char)c : '?';
    return unsupported(ps, shown);
}

/* One member of a class at ps->p (a character, a range, an escape): into c. */
static int class_item(rx_parse *ps, hs_rx_class *c, size_t *cap)
{
    int32_t lo;
    if (*ps->p == '[')
        return unsupported(ps, "'[' inside a class (a nested class or a set operation)");
    if (ps->end - ps->p >= 2 && ps->p[0] == '&' && ps->p[1] == '&')
        return unsupported(ps, "'&&' (class intersection)");
    if (*ps->p == '\\') {
        ps->p++;
        int e = parse_escape(ps, &lo, &c->props, &c->nprops);
        if (e)
            return e < 0 ? -1 : 0;
    } else if ((lo = pat_char(ps)) < 0) {
        return -1;
    }
    int32_t hi = lo;
    if (ps->end - ps->p >= 2 && ps->p[0] == '-' && ps->p[1] != ']') {
        ps->p++;
        if (*ps->p == '\\') {
            unsigned pr = 0, npr = 0;
            ps->p++;
            int e = parse_escape(ps, &hi, &pr, &npr);
            if (e)
                return e < 0 ? -1 : unsupported(ps, "a range that ends with a class escape");
        } else if (*ps->p == '[') {
            return unsupported(ps, "'[' inside a class (a nested class or a set operation)");
        } else if ((hi = pat_char(ps)) < 0) {
            return -1;
        }
        if (hi < lo)
            return fail(ps, HS_E_FORMAT, "a class range is out of order");
    }
    return add_range(ps, c, cap, lo, hi);
}

/* After '[': the class up to its ']'. */
static int parse_class(rx_parse *ps)
{
    int k = new_class(ps);
    if (k < 0)
        return -1;
    hs_rx_class *c = &ps->rx->cls[k];
    size_t cap = 0;
    if (ps->p < ps->end && *ps->p == '^') {
        c->neg = 1;
        ps->p++;
    }
    int first = 1;
    while (ps->p < ps->end && (*ps->p != ']' || first)) {
        if (class_item(ps, c, &cap) < 0)
            return -1;
        first = 0;
    }
    if (ps->p == ps->end)
        return fail(ps, HS_E_FORMAT, "a class '[' is not closed");
    ps->p++;
    class_finish(c);
    int n = new_node(ps, N_CLASS, -1, -1);
    if (n >= 0)
        ps->node[n].cls = k;
    return n;
}

/* A class node of one escape or one character (c->props etc. from an escape). */
static int single(rx_parse *ps, int32_t cp, unsigned props, unsigned nprops)
{
    int k = new_class(ps);
    if (k < 0)
        return -1;
    hs_rx_class *c = &ps->rx->cls[k];
    size_t cap = 0;
    c->props = props;
    c->nprops = nprops;
    if (cp >= 0 && add_range(ps, c, &cap, cp, cp) < 0)
        return -1;
    int n = new_node(ps, N_CLASS, -1, -1);
    if (n >= 0)
        ps->node[n].cls = k;
    return n;
}

static int parse_alt(rx_parse *ps, int depth);

/* After '(': a group, or a lookahead of one class. */
static int parse_group(rx_parse *ps, int depth)
{
    int look = 0, neg = 0;
    if (ps->p < ps->end && *ps->p == '?') {
        unsigned char c = ps->p + 1 < ps->end ? ps->p[1] : 0;
        if (c == ':')
            ps->p += 2;
        else if (c == '!' || c == '=') {
            look = 1;
            neg = c == '!';
            ps->p += 2;
        } else if (c == '<')
            return unsupported(ps, "'(?<' (a lookbehind or a named group)");
        else
            return unsupported(ps, "'(?' with options or another kind of group (only (?: (?! (?=)");
    }
    int n = parse_alt(ps, depth + 1);
    if (n < 0)
        return -1;
    if (ps->p == ps->end || *ps->p != ')')
        return fail(ps, HS_E_FORMAT, "a group '(' is not closed");
    ps->p++;
    if (!look)
        return n;
    if (ps->node[n].kind != N_CLASS)
        return unsupported(ps, "a lookahead other than of one character or class");
    int l = new_node(ps, N_LOOK, -1, -1);
    if (l >= 0) {
        ps->node[l].cls = ps->node[n].cls;
        ps->node[l].neg = neg;
    }
    return l;
}

static int parse_atom(rx_parse *ps, int depth)
{
    unsigned char c = *ps->p;
    int32_t cp = -1;
    unsigned props = 0, nprops = 0;
    switch (c) {
    case '(': ps->p++; return parse_group(ps, depth);
    case '[': ps->p++; return parse_class(ps);
    case '$': ps->p++; return new_node(ps, N_EOL, -1, -1);
    case '.': return unsupported(ps, "'.' (any character)");
    case '^': return unsupported(ps, "'^' (a line start)");
    case ')': return fail(ps, HS_E_FORMAT, "a ')' without its '('");
    case '*': case '+': case '?': case '{': return fail(ps, HS_E_FORMAT, "a repetition of nothing");
    case '\\': {
        ps->p++;
        int e = parse_escape(ps, &cp, &props, &nprops);
        if (e < 0)
            return -1;
        return single(ps, e ? -1 : cp, props, nprops);
    }
    default:
        if ((cp = pat_char(ps)) < 0)
            return -1;
        return single(ps, cp, 0, 0);
    }
}

static int parse_int(rx_parse *ps, int *v)
{
    if (ps->p == ps->end || *ps->p < '0' || *ps->p > '9')
        return 0;
    long x = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9' && x <= RX_MAX_REPEAT)
        x = x * 10 + (*ps->p++ - '0');
    *v = (int)x;
    return 1;
}

/* A quantifier after an atom: ? * + {m} {m,} {m,n}; 1 with min/max, 0 for none, -1. */
static int parse_quant(rx_parse *ps, int *min, int *max)
{
    if (ps->p == ps->end)
        return 0;
    unsigned char c = *ps->p;
    if (c == '?' || c == '*' || c == '+') {
        ps->p++;
        *min = c == '+';
        *max = c == '?' ? 1 : -1;
    } else if (c == '{') {
        ps->p++;
        if (!parse_int(ps, min))
            return unsupported(ps, "'{' that does not start a repetition {m}, {m,} or {m,n}");
        *max = *min;
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            if (!parse_int(ps, max))
                *max = -1;
        }
        if (ps->p == ps->end || *ps->p != '}')
            return unsupported(ps, "'{' that does not start a repetition {m}, {m,} or {m,n}");
        ps->p++;
        if (*min > RX_MAX_REPEAT || *max > RX_MAX_REPEAT)
            return unsupported(ps, "a repetition count above 1000");
        if (*max >= 0 && *max < *min)
            return fail(ps, HS_E_FORMAT, "a repetition {m,n} with n < m");
    } else {
        return 0;
    }
    if (ps->p < ps->end && (*ps->p == '?' || *ps->p == '+'))
        return unsupported(ps, *ps->p == '?' ? "a lazy quantifier" : "a possessive quantifier");
    return 1;
}

static int parse_cat(rx_parse *ps, int depth)
{
    int acc = -1;
    while (ps->p < ps->end && *ps->p != '|' && *ps->p != ')') {
        int a = parse_atom(ps, depth), min, max;
        if (a < 0)
            return -1;
        int q = parse_quant(ps, &min, &max);
        if (q < 0)
            return -1;
        if (q) {
            int r = new_node(ps, N_REP, a, -1);
            if (r < 0)
                return -1;
            ps->node[r].min = min;
            ps->node[r].max = max;
            a = r;
        }
        acc = acc < 0 ? a : new_node(ps, N_CAT, acc, a);
        if (acc < 0)
            return -1;
    }
    return acc < 0 ? new_node(ps, N_EMPTY, -1, -1) : acc;
}

static int parse_alt(rx_parse *ps, int depth)
{
    if (depth > RX_MAX_DEPTH)
        return unsupported(ps, "groups nested deeper than 64");
    int root = parse_cat(ps, depth), tail = -1; /* a|b|c as a|(b|c): tail the last N_ALT */
    while (root >= 0 && ps->p < ps->end && *ps->p == '|') {
        ps->p++;
        int c = parse_cat(ps, depth);
        if (c < 0)
            return -1;
        int alt = new_node(ps, N_ALT, tail < 0 ? root : ps->node[tail].b, c);
        if (alt < 0)
            return -1;
        if (tail < 0)
            root = alt;
        else
            ps->node[tail].b = alt;
        tail = alt;
    }
    return root;
}

static int nullable(const rx_node *nd, int n)
{
    const rx_node *x = &nd[n];
    switch (x->kind) {
    case N_CLASS: return 0;
    case N_CAT: return nullable(nd, x->a) && nullable(nd, x->b);
    case N_ALT: return nullable(nd, x->a) || nullable(nd, x->b);
    case N_REP: return x->min == 0 || nullable(nd, x->a);
    default: return 1;
    }
}

/* ---- compiler ----------------------------------------------------------------------------- */

typedef struct rx_emit {
    hs_rx_inst *prog;
    size_t n, cap;
    int full;
} rx_emit;

static size_t emit(rx_emit *e, int op, int x, int y)
{
    if (e->n == RX_MAX_PROG || hs_tok_grow((void **)&e->prog, &e->cap, e->n + 1, sizeof *e->prog, 64) != HS_OK) {
        e->full = 1;
        return 0;
    }
    e->prog[e->n] = (hs_rx_inst){op, x, y};
    return e->n++;
}

static void compile(rx_emit *e, const rx_node *nd, int n, int depth)
{
    const rx_node *x = &nd[n];
    if (e->full)
        return;
    switch (x->kind) {
    case N_CLASS: emit(e, HS_RX_OP_CLASS, x->cls, 0); break;
    case N_EOL: emit(e, HS_RX_OP_EOL, 0, 0); break;
    case N_LOOK: emit(e, x->neg ? HS_RX_OP_NLOOK : HS_RX_OP_PLOOK, x->cls, 0); break;
    case N_CAT:
        compile(e, nd, x->a, depth + 1);
        compile(e, nd, x->b, depth + 1);
        break;
    case N_ALT: {
        size_t s = emit(e, HS_RX_OP_SPLIT, 0, 0);
        e->prog[s].x = (int)e->n;
        compile(e, nd, x->a, depth + 1);
        size_t j = emit(e, HS_RX_OP_JMP, 0, 0);
        if (e->full)
            return;
        e->prog[s].y = (int)e->n;
        compile(e, nd, x->b, depth + 1);
        e->prog[j].x = (int)e->n;
        break;
    }
    case N_REP: {
        for (int i = 0; i < x->min && !e->full; i++)
            compile(e, nd, x->a, depth + 1);
        if (x->max < 0) {
            size_t s = emit(e, HS_RX_OP_SPLIT, 0, 0);
            e->prog[s].x = (int)e->n;
            compile(e, nd, x->a, depth + 1);
            emit(e, HS_RX_OP_JMP, (int)s, 0);
            if (!e->full)
                e->prog[s].y = (int)e->n;
            break;
        }
        size_t first = e->n; /* the optional copies' splits all leave to the end */
        for (int i = x->min; i < x->max && !e->full; i++) {
            size_t s = emit(e, HS_RX_OP_SPLIT, 0, 0);
            e->prog[s].x = (int)e->n;
            compile(e, nd, x->a, depth + 1);
        }
        for (size_t k = first; !e->full && k < e->n; k++)
            if (e->prog[k].op == HS_RX_OP_SPLIT && e->prog[k].y == 0 && e->prog[k].x == (int)k + 1)
                e->prog[k].y = (int)e->n;
        break;
    }
    default: break;
    }
}

void hs_rx_free(hs_rx *rx)
{
    if (!rx)
        return;
    for (size_t k = 0; k < rx->ncls; k++)
        free(rx->cls[k].r);
    free(rx->cls);
    free(rx->prog);
    free(rx);
}

hs_status hs_rx_compile(const char *pattern, const char *what, hs_rx **out, hs_error *err)
{
    *out = NULL;
    hs_rx *rx = calloc(1, sizeof *rx);
    rx_node *node = malloc(RX_MAX_NODES * sizeof *node);
    rx_parse ps = {(const unsigned char *)pattern, (const unsigned char *)pattern + strlen(pattern), what, err,
                   rx, node, 0, 0, HS_OK};
    if (!rx || !node) {
        free(node);
        free(rx);
        return hs_fail(err, HS_E_NOMEM, "%s: out of memory", what);
    }
    int root = parse_alt(&ps, 0);
    if (root >= 0 && ps.p != ps.end)
        root = fail(&ps, HS_E_FORMAT, "a ')' without its '('");
    if (root >= 0 && nullable(node, root))
        root = unsupported(&ps, "of a pattern that can match the empty text");
    rx_emit e = {0};
    if (root >= 0) {
        compile(&e, node, root, 0);
        emit(&e, HS_RX_OP_MATCH, 0, 0);
        if (e.full)
            root = fail(&ps, HS_E_UNSUPPORTED, "the regex is too long once its repetitions are written out");
    }
    free(node);
    if (root < 0) {
        free(e.prog);
        hs_rx_free(rx);
        return ps.st;
    }
    rx->prog = e.prog;
    rx->nprog = e.n;
    *out = rx;
    return HS_OK;
}

