/*
 * src/model/pickle.h — a restricted unpickler (private to the torch.save reader).
 *
 * pk_parse interprets the pickle opcodes that a tensor state dict uses and builds a graph of
 * plain data nodes. It never calls or imports anything: GLOBAL only resolves a name against
 * the caller's allow-list (anything else is refused by name), REDUCE only records "call this
 * allow-listed global with these arguments" for the caller to interpret, and BINPERSID only
 * records the persistent id. Every length, count, memo index, stack and mark depth and nesting
 * level is bounded (PK_* below) and checked against the bytes left. Nothing recurses, so a
 * hostile graph (shared or cyclic through the memo) costs no more than its nodes.
 *
 *     pk_doc doc;
 *     if (pk_parse(buf, len, allow, n_allow, &doc, &err) == HS_OK) {
 *         const pk_node *root = &doc.nodes[doc.root];
 *         ...
 *     }
 *     pk_free(&doc);
 */
#ifndef HEADSCOPE_PICKLE_H
#define HEADSCOPE_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "headscope/status.h"


#define PK_NODES_MAX (1u << 21)  /* values in one pickle (a state dict uses ~25 per tensor) */
#define PK_STACK_MAX (1u << 16)  /* operand stack entries */
#define PK_MARK_MAX 32           /* open MARKs */
#define PK_DEPTH_MAX 32          /* container nesting */
#define PK_MEMO_MAX (1u << 22)   /* memo slots */
#define PK_STR_MAX (1u << 20)    /* bytes in one string */
#define PK_INT_BYTES_MAX 8       /* LONG1 integers must fit int64 */

typedef enum pk_kind {
    PK_NONE,
    PK_BOOL,
    PK_INT,
    PK_FLOAT,
    PK_STR,
    PK_TUPLE,
    PK_LIST,
    PK_DICT,   /* kids: key0, value0, key1, value1, ... in insertion order */
    PK_GLOBAL, /* u.global: index into the allow-list */
    PK_CALL,   /* an allow-listed global applied to a tuple: kids = {global, args} */
    PK_PERSID  /* a persistent id: kids = {pid} */
} pk_kind;

/* One allow-listed global. A global with makes_dict called with () yields an empty PK_DICT
 * (collections.OrderedDict); BUILD is accepted on such dicts and its state ignored. */
typedef struct pk_allow {
    const char *module;
    const char *name;
    int makes_dict;
} pk_allow;

typedef struct pk_node {
    uint8_t kind;    /* pk_kind */
    uint8_t depth;   /* nesting below this node (0 for scalars) */
    uint8_t ordered; /* PK_DICT made by a makes_dict global */
    uint32_t n;      /* kids in use */
    uint32_t cap;
    uint32_t *kids;  /* node indices */
    union {
        int64_t i; /* PK_BOOL, PK_INT */
        double f;  /* PK_FLOAT */
        struct {
            const char *p; /* into the pickle bytes, not NUL-terminated */
            size_t len;
        } s;               /* PK_STR */
        size_t global;     /* PK_GLOBAL */
    } u;
} pk_node;

typedef struct pk_doc {
    pk_node *nodes;
    size_t n, cap;
    uint32_t root; /* the value STOP returned */
} pk_doc;

/* Parses len bytes of pickle into doc (owned by the caller, freed with pk_free even on
 * failure). allow lists the n_allow globals GLOBAL/STACK_GLOBAL may name. Messages start
 * with the failing opcode's offset where one helps; the caller prefixes the file name. */
hs_status pk_parse(const unsigned char *buf, size_t len, const pk_allow *allow, size_t n_allow,
                   pk_doc *doc, hs_error *err);

/* Frees the nodes of doc; accepts a zeroed doc. */
void pk_free(pk_doc *doc);

/* "int", "str", "tuple", ... for messages. */
const char *pk_kind_name(int kind);

#endif /* HEADSCOPE_PICKLE_H */
