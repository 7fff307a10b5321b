/*
 * src/text/regex.h — the small regex engine of tokenizer.json's Split pre-tokenizers (regex.c),
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

typedef struct hs_rx_range {
    int32_t lo, hi;
} hs_rx_range;

/* the generated Unicode classes (regex_tables.c) */
extern const hs_rx_range hs_rx_punct[], hs_rx_symbol[], hs_rx_mark[];
extern const size_t hs_rx_punct_n, hs_rx_symbol_n, hs_rx_mark_n;

typedef struct hs_rx hs_rx;

/* Compiles pattern (NUL-terminated UTF-8). HS_E_UNSUPPORTED naming the construct for what
 * the engine does not take (and for a pattern that can match the empty text), HS_E_FORMAT
 * for a malformed one; the message starts with what. Free with hs_rx_free. */
hs_status hs_rx_compile(const char *pattern, const char *what, hs_rx **out, hs_error *err);
void hs_rx_free(hs_rx *rx);

/* The first match in s[0..n) that starts at or after from (s[0..n) is the whole subject:
 * $ and lookaheads see n as its end): 1 with [*ms, *me), 0 for none, -1 out of memory. */
int hs_rx_search(const hs_rx *rx, const unsigned char *s, size_t n, size_t from, size_t *ms,
                 size_t *me);

#endif
