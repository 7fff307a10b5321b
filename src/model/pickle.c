/* Restricted unpickler: the opcodes of protocol 2 (what torch.save writes) plus the few that
 * protocol 4 adds for the same data (FRAME, SHORT_BINUNICODE, BINUNICODE8, STACK_GLOBAL,
 * MEMOIZE). It builds data nodes only; see pickle.h. Opcode meanings follow the pickle
 * specification (Python's Lib/pickletools.py documents each one). */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "model/pickle.h"

#define PK_NAME_MAX 255 /* bytes in a GLOBAL module or attribute name */
#define PK_NIL UINT32_MAX

typedef struct pk_state {
    const unsigned char *buf;
    size_t len, pos, op_at;
    unsigned char op;
    const pk_allow *allow;
    size_t n_allow;
    pk_doc *doc;
    uint32_t *stack; /* node indices */
    size_t sp, stack_cap;
    size_t marks[PK_MARK_MAX];
    int n_marks;
    uint32_t *memo; /* node indices, PK_NIL when unset */
    size_t memo_cap, memo_count;
    hs_error *err;
} pk_state;

const char *pk_kind_name(int kind)
{
    static const char *const names[] = {"None", "bool", "int", "float", "str", "tuple",
                                        "list", "dict", "global", "call", "persistent id"};
    return kind >= 0 && kind < (int)(sizeof names / sizeof names[0]) ? names[kind] : "?";
}

static const char *op_name(unsigned char op)
{
    switch (op) {
    case 0x80: return "PROTO";
    case 0x95: return "FRAME";
    case '.': return "STOP";
    case '}': return "EMPTY_DICT";
    case ')': return "EMPTY_TUPLE";
    case ']': return "EMPTY_LIST";
    case '(': return "MARK";
    case 't': return "TUPLE";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 'X': return "BINUNICODE";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'M': return "BININT2";
    case 0x8a: return "LONG1";
    case 'G': return "BINFLOAT";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 'N': return "NONE";
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 'Q': return "BINPERSID";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 0x94: return "MEMOIZE";
    case 'h': return "BINGET";
    case 'j': return "LONG_BINGET";
    case 's': return "SETITEM";
    case 'u': return "SETITEMS";
    case 'a': return "APPEND";
    case 'e': return "APPENDS";
    }
    return NULL;
}

/* Fails with "<OPNAME> at offset N: <msg>". */
static hs_status pk_fail(pk_state *s, hs_status st, const char *msg)
{
    const char *nm = op_name(s->op);
    return hs_fail(s->err, st, "%s at offset %zu: %s", nm ? nm : "opcode", s->op_at, msg);
}

/* Makes sure k more bytes follow. */
static hs_status need(pk_state *s, size_t k)
{
    if (k > s->len - s->pos) {
        const char *nm = op_name(s->op);
        return hs_fail(s->err, HS_E_FORMAT,
                       "%s at offset %zu needs %zu bytes but only %zu are left (truncated pickle?)",
                       nm ? nm : "opcode", s->op_at, k, s->len - s->pos);
    }
    return HS_OK;
}

static hs_status new_node(pk_state *s, pk_kind kind, uint32_t *id)
{
    pk_doc *d = s->doc;
    if (d->n == d->cap) {
        if (d->cap >= PK_NODES_MAX)
            return pk_fail(s, HS_E_FORMAT, "more values than the limit of 2097152");
        size_t cap = d->cap ? 2 * d->cap : 256;
        pk_node *nn = realloc(d->nodes, cap * sizeof *nn);
        if (!nn)
            return hs_fail(s->err, HS_E_NOMEM, "out of memory");
        d->nodes = nn;
        d->cap = cap;
    }
    memset(&d->nodes[d->n], 0, sizeof d->nodes[0]);
    d->nodes[d->n].kind = (uint8_t)kind;
    *id = (uint32_t)d->n++;
    return HS_OK;
}

static hs_status push(pk_state *s, uint32_t id)
{
    if (s->sp == s->stack_cap) {
        if (s->stack_cap >= PK_STACK_MAX)
            return pk_fail(s, HS_E_FORMAT, "stack deeper than the limit of 65536");
        size_t cap = s->stack_cap ? 2 * s->stack_cap : 64;
        uint32_t *ns = realloc(s->stack, cap * sizeof *ns);
        if (!ns)
            return hs_fail(s->err, HS_E_NOMEM, "out of memory");
        s->stack = ns;
        s->stack_cap = cap;
    }
    s->stack[s->sp++] = id;
    return HS_OK;
}

/* Creates a node of kind and pushes it; *id may be NULL. */
static hs_status push_new(pk_state *s, pk_kind kind, uint32_t *id)
{
    uint32_t k;
    hs_status st = new_node(s, kind, &k);
    if (!st)
        st = push(s, k);
    if (id)
        *id = k;
    return st;
}

/* The items above the innermost MARK are all a plain pop can reach. */
static size_t floor_of(const pk_state *s)
{
    return s->n_marks ? s->marks[s->n_marks - 1] : 0;
}

static hs_status pop(pk_state *s, uint32_t *id)
{
    *id = 0;
    if (s->sp <= floor_of(s))
        return pk_fail(s, HS_E_FORMAT, "stack underflow");
    *id = s->stack[--s->sp];
    return HS_OK;
}

static hs_status pop_mark(pk_state *s, size_t *start)
{
    *start = 0;
    if (!s->n_marks)
        return pk_fail(s, HS_E_FORMAT, "no MARK to pop to");
    *start = s->marks[--s->n_marks];
    return HS_OK;
}

/* Appends kid to the node parent, keeping the nesting depth bounded. */
static hs_status add_kid(pk_state *s, uint32_t parent, uint32_t kid)
{
    pk_node *p = &s->doc->nodes[parent];
    unsigned kd = s->doc->nodes[kid].depth;
    if (kd + 1 > PK_DEPTH_MAX)
        return pk_fail(s, HS_E_FORMAT, "values nested deeper than the limit of 32");
    if (p->n == p->cap) {
        uint32_t cap = p->cap ? 2 * p->cap : 4;
        uint32_t *nk = realloc(p->kids, (size_t)cap * sizeof *nk);
        if (!nk)
            return hs_fail(s->err, HS_E_NOMEM, "out of memory");
        p->kids = nk;
        p->cap = cap;
    }
    p->kids[p->n++] = kid;
    if (kd + 1 > p->depth)
        p->depth = (uint8_t)(kd + 1);
    return HS_OK;
}

/* A tuple of the stack items [start, sp), which are popped. */
static hs_status make_tuple(pk_state *s, size_t start)
{
    uint32_t t;
    hs_status st = new_node(s, PK_TUPLE, &t);
    for (size_t i = start; i < s->sp && !st; i++)
        st = add_kid(s, t, s->stack[i]);
    if (st)
        return st;
    s->sp = start;
    return push(s, t);
}

static hs_status push_int(pk_state *s, pk_kind kind, int64_t v)
{
    uint32_t id;
    hs_status st = push_new(s, kind, &id);
    if (!st)
        s->doc->nodes[id].u.i = v;
    return st;
}

static hs_status push_str(pk_state *s, size_t n)
{
    hs_status st;
    if (n > PK_STR_MAX)
        return pk_fail(s, HS_E_FORMAT, "string longer than the limit of 1 MiB");
    if ((st = need(s, n)))
        return st;
    uint32_t id;
    if ((st = push_new(s, PK_STR, &id)))
        return st;
    s->doc->nodes[id].u.s.p = (const char *)s->buf + s->pos;
    s->doc->nodes[id].u.s.len = n;
    s->pos += n;
    return HS_OK;
}

/* Copies at most cap-1 bytes of a name for a message, non-printable bytes as '?'. */
static void printable(char *dst, size_t cap, const char *p, size_t n)
{
    size_t k = n < cap - 1 ? n : cap - 1;
    for (size_t i = 0; i < k; i++)
        dst[i] = (p[i] >= 0x20 && p[i] < 0x7f) ? p[i] : '?';
    dst[k] = '\0';
}

/* Resolves module.name against the allow-list and pushes a PK_GLOBAL node. */
static hs_status push_global(pk_state *s, const char *mod, size_t ml, const char *nm, size_t nl)
{
    for (size_t i = 0; i < s->n_allow; i++) {
        const pk_allow *a = &s->allow[i];
        if (strlen(a->module) == ml && !memcmp(a->module, mod, ml) && strlen(a->name) == nl &&
            !memcmp(a->name, nm, nl)) {
            uint32_t id;
            hs_status st = push_new(s, PK_GLOBAL, &id);
            if (!st)
                s->doc->nodes[id].u.global = i;
            return st;
        }
    }
    char pm[64], pn[64];
    printable(pm, sizeof pm, mod, ml);
    printable(pn, sizeof pn, nm, nl);
    return hs_fail(s->err, HS_E_UNSUPPORTED,
                   "refusing global '%s.%s' (only tensor state dicts are read)", pm, pn);
}

/* One newline-terminated line of a GLOBAL operand. */
static hs_status read_line(pk_state *s, const char **p, size_t *n)
{
    size_t left = s->len - s->pos, lim = left < PK_NAME_MAX + 1 ? left : PK_NAME_MAX + 1;
    const unsigned char *nl = memchr(s->buf + s->pos, '\n', lim);
    if (!nl)
        return pk_fail(s, HS_E_FORMAT, lim == left ? "name is truncated"
                                                   : "name longer than 255 bytes");
    *p = (const char *)s->buf + s->pos;
    *n = (size_t)(nl - (s->buf + s->pos));
    s->pos += *n + 1;
    return HS_OK;
}

static hs_status memo_put(pk_state *s, uint64_t idx)
{
    if (!s->sp || s->sp <= floor_of(s))
        return pk_fail(s, HS_E_FORMAT, "nothing on the stack to memoize");
    if (idx >= PK_MEMO_MAX || idx >= s->len)
        return pk_fail(s, HS_E_FORMAT, "memo index larger than the pickle allows");
    if (idx >= s->memo_cap) {
        size_t cap = s->memo_cap ? s->memo_cap : 64;
        while (cap <= idx)
            cap *= 2;
        uint32_t *nm = realloc(s->memo, cap * sizeof *nm);
        if (!nm)
            return hs_fail(s->err, HS_E_NOMEM, "out of memory");
        for (size_t i = s->memo_cap; i < cap; i++)
            nm[i] = PK_NIL;
        s->memo = nm;
        s->memo_cap = cap;
    }
    if (s->memo[idx] == PK_NIL)
        s->memo_count++;
    s->memo[idx] = s->stack[s->sp - 1];
    return HS_OK;
}

static hs_status memo_get(pk_state *s, uint64_t idx)
{
    if (idx >= s->memo_cap || s->memo[idx] == PK_NIL)
        return pk_fail(s, HS_E_FORMAT, "memo slot was never stored");
    return push(s, s->memo[idx]);
}

/* The container just below the items of a MARK that SETITEMS/APPENDS pops. */
static hs_status mark_target(pk_state *s, size_t start, pk_kind kind, uint32_t *id)
{
    if (start == 0 || start - 1 < floor_of(s))
        return pk_fail(s, HS_E_FORMAT, "no container below the MARK");
    *id = s->stack[start - 1];
    if (s->doc->nodes[*id].kind != kind)
        return pk_fail(s, HS_E_FORMAT, kind == PK_DICT ? "target is not a dict"
                                                       : "target is not a list");
    return HS_OK;
}

static hs_status op_reduce(pk_state *s)
{
    uint32_t args = 0, fn = 0, id;
    hs_status st;
    if ((st = pop(s, &args)) || (st = pop(s, &fn)))
        return st;
    const pk_node *f = &s->doc->nodes[fn], *a = &s->doc->nodes[args];
    if (f->kind != PK_GLOBAL)
        return pk_fail(s, HS_E_UNSUPPORTED, "only allow-listed globals can be called");
    if (a->kind != PK_TUPLE)
        return pk_fail(s, HS_E_FORMAT, "arguments are not a tuple");
    if (s->allow[f->u.global].makes_dict) {
        if (a->n != 0)
            return pk_fail(s, HS_E_UNSUPPORTED, "OrderedDict called with arguments");
        if ((st = push_new(s, PK_DICT, &id)))
            return st;
        s->doc->nodes[id].ordered = 1;
        return HS_OK;
    }
    if ((st = new_node(s, PK_CALL, &id)) || (st = add_kid(s, id, fn)) ||
        (st = add_kid(s, id, args)))
        return st;
    return push(s, id);
}

/* Executes the opcode at s->pos; *stop is set by STOP. */
static hs_status step(pk_state *s, int *stop)
{
    hs_status st;
    uint32_t a = 0, b = 0, id = 0;
    size_t start = 0, n;
    const char *p1, *p2;
    size_t l1, l2;
    s->op_at = s->pos;
    s->op = 0;
    if ((st = need(s, 1)))
        return hs_fail(s->err, HS_E_FORMAT, "pickle ends at offset %zu without STOP (truncated?)",
                       s->pos);
    s->op = s->buf[s->pos++];
    switch (s->op) {
    case 0x80: /* PROTO */
        if ((st = need(s, 1)))
            return st;
        if (s->buf[s->pos] < 2 || s->buf[s->pos] > 5)
            return pk_fail(s, HS_E_UNSUPPORTED, "pickle protocol is not 2 to 5");
        s->pos++;
        return HS_OK;
    case 0x95: /* FRAME: a length hint only */
        if ((st = need(s, 8)))
            return st;
        s->pos += 8;
        return HS_OK;
    case '.':
        if ((st = pop(s, &a)))
            return st;
        if (s->sp || s->n_marks)
            return pk_fail(s, HS_E_FORMAT, "values left on the stack");
        s->doc->root = a;
        *stop = 1;
        return HS_OK;
    case '}': return push_new(s, PK_DICT, NULL);
    case ')': return push_new(s, PK_TUPLE, NULL);
    case ']': return push_new(s, PK_LIST, NULL);
    case 'N': return push_new(s, PK_NONE, NULL);
    case 0x88: return push_int(s, PK_BOOL, 1);
    case 0x89: return push_int(s, PK_BOOL, 0);
    case '(':
        if (s->n_marks >= PK_MARK_MAX)
            return pk_fail(s, HS_E_FORMAT, "MARKs nested deeper than the limit of 32");
        s->marks[s->n_marks++] = s->sp;
        return HS_OK;
    case 't':
        if ((st = pop_mark(s, &start)))
            return st;
        return make_tuple(s, start);
    case 0x85:
    case 0x86:
    case 0x87:
        n = (size_t)(s->op - 0x84);
        if (s->sp < floor_of(s) + n)
            return pk_fail(s, HS_E_FORMAT, "stack underflow");
        return make_tuple(s, s->sp - n);
    case 'X':
        if ((st = need(s, 4)))
            return st;
        n = hs_le32(s->buf + s->pos);
        s->pos += 4;
        return push_str(s, n);
    case 0x8c:
        if ((st = need(s, 1)))
            return st;
        n = s->buf[s->pos++];
        return push_str(s, n);
    case 0x8d: {
        if ((st = need(s, 8)))
            return st;
        uint64_t n64 = hs_le64(s->buf + s->pos);
        s->pos += 8;
        if (n64 > PK_STR_MAX)
            return pk_fail(s, HS_E_FORMAT, "string longer than the limit of 1 MiB");
        return push_str(s, (size_t)n64);
    }
    case 'J':
        if ((st = need(s, 4)))
            return st;
        s->pos += 4;
        return push_int(s, PK_INT, (int32_t)hs_le32(s->buf + s->pos - 4));
    case 'K':
        if ((st = need(s, 1)))
            return st;
        return push_int(s, PK_INT, s->buf[s->pos++]);
    case 'M':
        if ((st = need(s, 2)))
            return st;
        s->pos += 2;
        return push_int(s, PK_INT, hs_le16(s->buf + s->pos - 2));
    case 0x8a: { /* LONG1: n bytes, little-endian two's complement */
        if ((st = need(s, 1)))
            return st;
        n = s->buf[s->pos++];
        if (n > PK_INT_BYTES_MAX)
            return pk_fail(s, HS_E_FORMAT, "integer does not fit in 64 bits");
        if ((st = need(s, n)))
            return st;
        uint64_t u = 0;
        for (size_t i = 0; i < n; i++)
            u |= (uint64_t)s->buf[s->pos + i] << (8 * i);
        if (n > 0 && n < 8 && (s->buf[s->pos + n - 1] & 0x80))
            u |= ~(uint64_t)0 << (8 * n);
        s->pos += n;
        int64_t v;
        memcpy(&v, &u, sizeof v);
        return push_int(s, PK_INT, v);
    }
    case 'G': { /* BINFLOAT: big-endian IEEE double */
        if ((st = need(s, 8)))
            return st;
        uint64_t u = 0;
        for (int i = 0; i < 8; i++)
            u = (u << 8) | s->buf[s->pos + (size_t)i];
        s->pos += 8;
        if ((st = push_new(s, PK_FLOAT, &id)))
            return st;
        memcpy(&s->doc->nodes[id].u.f, &u, sizeof u);
        return HS_OK;
    }
    case 'c':
        if ((st = read_line(s, &p1, &l1)) || (st = read_line(s, &p2, &l2)))
            return st;
        return push_global(s, p1, l1, p2, l2);
    case 0x93: {
        if ((st = pop(s, &b)) || (st = pop(s, &a)))
            return st;
        const pk_node *m = &s->doc->nodes[a], *nm = &s->doc->nodes[b];
        if (m->kind != PK_STR || nm->kind != PK_STR)
            return pk_fail(s, HS_E_FORMAT, "module and name are not strings");
        return push_global(s, m->u.s.p, m->u.s.len, nm->u.s.p, nm->u.s.len);
    }
    case 'R': return op_reduce(s);
    case 'b':
        if ((st = pop(s, &a)))
            return st;
        if (s->sp <= floor_of(s))
            return pk_fail(s, HS_E_FORMAT, "stack underflow");
        id = s->stack[s->sp - 1];
        if (s->doc->nodes[id].kind != PK_DICT || !s->doc->nodes[id].ordered)
            return pk_fail(s, HS_E_UNSUPPORTED, "only an OrderedDict's state can be set");
        return HS_OK; /* the state (a module's _metadata) is not needed */
    case 'Q':
        if ((st = pop(s, &a)) || (st = new_node(s, PK_PERSID, &id)) || (st = add_kid(s, id, a)))
            return st;
        return push(s, id);
    case 'q':
        if ((st = need(s, 1)))
            return st;
        return memo_put(s, s->buf[s->pos++]);
    case 'r':
        if ((st = need(s, 4)))
            return st;
        s->pos += 4;
        return memo_put(s, hs_le32(s->buf + s->pos - 4));
    case 0x94: return memo_put(s, s->memo_count);
    case 'h':
        if ((st = need(s, 1)))
            return st;
        return memo_get(s, s->buf[s->pos++]);
    case 'j':
        if ((st = need(s, 4)))
            return st;
        s->pos += 4;
        return memo_get(s, hs_le32(s->buf + s->pos - 4));
    case 's':
        if ((st = pop(s, &b)) || (st = pop(s, &a)))
            return st;
        if (s->sp <= floor_of(s) || s->doc->nodes[s->stack[s->sp - 1]].kind != PK_DICT)
            return pk_fail(s, HS_E_FORMAT, "target is not a dict");
        id = s->stack[s->sp - 1];
        if ((st = add_kid(s, id, a)))
            return st;
        return add_kid(s, id, b);
    case 'u':
        if ((st = pop_mark(s, &start)) || (st = mark_target(s, start, PK_DICT, &id)))
            return st;
        if ((s->sp - start) % 2)
            return pk_fail(s, HS_E_FORMAT, "odd number of items (a key without a value)");
        for (size_t i = start; i < s->sp; i++)
            if ((st = add_kid(s, id, s->stack[i])))
                return st;
        s->sp = start;
        return HS_OK;
    case 'a':
        if ((st = pop(s, &a)))
            return st;
        if (s->sp <= floor_of(s) || s->doc->nodes[s->stack[s->sp - 1]].kind != PK_LIST)
            return pk_fail(s, HS_E_FORMAT, "target is not a list");
        return add_kid(s, s->stack[s->sp - 1], a);
    case 'e':
        if ((st = pop_mark(s, &start)) || (st = mark_target(s, start, PK_LIST, &id)))
            return st;
        for (size_t i = start; i < s->sp; i++)
            if ((st = add_kid(s, id, s->stack[i])))
                return st;
        s->sp = start;
        return HS_OK;
    }
    return hs_fail(s->err, HS_E_UNSUPPORTED,
                   "opcode 0x%02x at offset %zu is not supported (only tensor state dicts are "
                   "read)", s->op, s->op_at);
}

hs_status pk_parse(const unsigned char *buf, size_t len, const pk_allow *allow, size_t n_allow,
                   pk_doc *doc, hs_error *err)
{
    memset(doc, 0, sizeof *doc);
    pk_state s = {.buf = buf, .len = len, .allow = allow, .n_allow = n_allow, .doc = doc,
                  .err = err};
    hs_status st = HS_OK;
    int stop = 0;
    while (!stop && !st)
        st = step(&s, &stop);
    free(s.stack);
    free(s.memo);
    return st;
}

void pk_free(pk_doc *doc)
{
    for (size_t i = 0; i < doc->n; i++)
        free(doc->nodes[i].kids);
    free(doc->nodes);
    memset(doc, 0, sizeof *doc);
}
