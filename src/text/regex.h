/*
 * src/text/regex.h — the small regex engine of tokenizer.json's Split pre-tokenizers (regex.c
 * compiles, regex_run.c searches),
 * with Oniguruma's meaning (the engine inside Hugging Face's tokenizers library) for the
 * constructs the published patterns use: literals, escapes (\r \n \t \f \v and escaped
 * punctuation), classes [...] and [^...] with ranges, \s \S \p{L} \p{N} \p{P} \p{S} \p{M}
 * (and \P{..}), non-capturing and plain groups, alternation, the greedy quantifiers ? * + {m}
 * {m,} {m,n}, $ (the end, or before a line feed) and a lookahead (?!..) / (?=..) of one
 * character class. Every other construct is refused by name. Matching is leftmost-first
 * backtracking with each (instruction, position) tried at most once per search, so a search
 * takes time proportional to the program times the text it looks at.
 */
#ifndef HEADSCOPE_TEXT_REGEX_H
#define HEADSCOPE_TEXT_REGEX_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "text/text_internal.h"

/* \p{P}, \p{S} and \p{M}: sorted ranges with their class's bit (HS_RX_P, HS_RX_S, HS_RX_M),
 * generated into regex_tables.c */
extern const hs_uni_range hs_rx_classes[];
extern const size_t hs_rx_classes_n;

typedef struct hs_rx hs_rx;

/* Compiles pattern (NUL-terminated UTF-8). HS_E_UNSUPPORTED naming the construct for what
 * the engine does not take (and for a pattern that can match the empty text), HS_E_FORMAT
 * for a malformed one; the message starts with what. Free with hs_rx_free. */
hs_status hs_rx_compile(const char *pattern, const char *what, hs_rx **out, hs_error *err);
void hs_rx_free(hs_rx *rx);

/* The first match in s[0..n) that starts at or after from (s[0..n) is the whole subject:
 * $ and lookaheads see n as its end): 1 with [*ms, *me), 0 for none, -1 out of memory (also
 * when one search would hold more than 2^26 tried states, 1 GiB: a pattern of a thousand
 * instructions over a megabyte could). */
int hs_rx_search(const hs_rx *rx, const unsigned char *s, size_t n, size_t from, size_t *ms,
                 size_t *me);

/* ---- the compiled form (regex.c writes it, regex_run.c runs it) ---------------------------- */

enum { HS_RX_L = 1, HS_RX_N = 2, HS_RX_P = 4, HS_RX_S = 8, HS_RX_M = 16, HS_RX_SPACE = 32 };

typedef struct hs_rx_class {
    hs_uni_range *r; /* sorted, disjoint (v unused) */
    size_t nr;
    unsigned props, nprops; /* \p{X} and \P{X} (\s and \S) inside it: HS_RX_* bits */
    int neg;                /* [^...] */
} hs_rx_class;

/* CLASS x: a character of class x; SPLIT x y: x, else y; JMP x; MATCH; EOL: $; NLOOK / PLOOK x:
 * the next character is not / is of class x (or, for NLOOK, there is none) */
enum { HS_RX_OP_CLASS, HS_RX_OP_SPLIT, HS_RX_OP_JMP, HS_RX_OP_MATCH, HS_RX_OP_EOL, HS_RX_OP_NLOOK,
       HS_RX_OP_PLOOK };
typedef struct hs_rx_inst {
    int op, x, y;
} hs_rx_inst;

struct hs_rx {
    hs_rx_class *cls;
    size_t ncls;
    hs_rx_inst *prog; /* starts at 0 */
    size_t nprog;
};

#endif
