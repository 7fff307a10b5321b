/*
 * src/text/text_internal.h — internals shared by the tokenizer files in src/text/; never
 * installed. tokenizer.c holds the public API, bpe.c GPT-2 byte-level BPE, wordpiece.c BERT,
 * unicode.c UTF-8 and character classes, strtab.c the string and pair hash tables.
 */
#ifndef HEADSCOPE_TEXT_INTERNAL_H
#define HEADSCOPE_TEXT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "headscope/tokenizer.h"
#include "internal.h"

/* Limits on what a loader accepts. */
#define HS_TOK_MAX_VOCAB ((size_t)1 << 24)
#define HS_TOK_MAX_MERGES ((size_t)1 << 24)
#define HS_TOK_MAX_TOKEN_BYTES 1024
#define HS_TOK_MAX_FILE ((size_t)1 << 28)

/* ---- string table: interned byte strings with a hash index ------------------------------ */

/* Strings are stored NUL-terminated in one growing buffer; entry i is (off[i], len[i]).
 * The index maps a string to the LAST entry added with that content. */
typedef struct hs_strtab {
    char *buf;      /* (buf_len) bytes of all strings, each followed by a NUL */
    size_t buf_len, buf_cap;
    size_t *off;    /* (n) offset of entry i in buf */
    uint32_t *len;  /* (n) length of entry i in bytes */
    size_t n, n_cap;
    int32_t *slots; /* (slot_cap) entry index or -1; slot_cap is a power of two */
    size_t slot_cap;
} hs_strtab;

/* Appends s as a new entry (also when equal content exists: the index then points to the new
 * entry) and stores its index in *idx (may be NULL). HS_E_NOMEM on allocation failure. */
hs_status hs_strtab_push(hs_strtab *t, const char *s, size_t len, int32_t *idx);

/* Index of the entry equal to prefix||s (prefix may be NULL), or -1. */
int32_t hs_strtab_find2(const hs_strtab *t, const char *prefix, size_t plen, const char *s,
                        size_t len);
static inline int32_t hs_strtab_find(const hs_strtab *t, const char *s, size_t len)
{
    return hs_strtab_find2(t, NULL, 0, s, len);
}
static inline const char *hs_strtab_str(const hs_strtab *t, int32_t i) { return t->buf + t->off[i]; }
void hs_strtab_free(hs_strtab *t);

/* ---- pair table: (left symbol, right symbol) -> (merge rank, merged symbol) -------------- */

typedef struct hs_pair_entry {
    uint64_t key;   /* (uint64)left << 32 | right; UINT64_MAX marks an empty slot */
    int32_t rank;
    int32_t result;
} hs_pair_entry;

typedef struct hs_pairmap {
    hs_pair_entry *slots; /* (cap) power of two */
    size_t cap, n;
} hs_pairmap;

/* Inserts or overwrites (a later merge of the same pair wins, as in a Python dict). */
hs_status hs_pairmap_put(hs_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t result);
const hs_pair_entry *hs_pairmap_get(const hs_pairmap *m, int32_t left, int32_t right);
void hs_pairmap_free(hs_pairmap *m);

/* ---- the tokenizer ------------------------------------------------------------------------ */

#define HS_BERT_N_SPECIAL 5
extern const char *const hs_bert_specials[HS_BERT_N_SPECIAL]; /* [PAD] [UNK] [CLS] [SEP] [MASK] */
#define HS_GPT2_EOT "<|endoftext|>"

struct hs_tokenizer {
    hs_tokenizer_kind kind;
    int lowercase;           /* WordPiece: lowercase + strip accents */
    size_t n_vocab;          /* ids 0..n_vocab-1 are entries 0..n_vocab-1 of syms */
    hs_strtab syms;          /* vocabulary; BPE: then merge strings that are not in it */
    /* BPE */
    hs_pairmap merges;
    hs_strtab merge_text;    /* entry r is merge rank r as "left right" */
    int32_t byte_sym[256];   /* symbol of each byte's byte-level character, -1 if none */
    int32_t eot;             /* id of <|endoftext|>, also the unknown token */
    /* WordPiece */
    int32_t special[HS_BERT_N_SPECIAL]; /* ids of hs_bert_specials */
};

enum { HS_BERT_PAD, HS_BERT_UNK, HS_BERT_CLS, HS_BERT_SEP, HS_BERT_MASK };

/* Growable id list used while encoding. */
typedef struct hs_idvec {
    int32_t *v;
    size_t n, cap;
} hs_idvec;
hs_status hs_idvec_push(hs_idvec *v, int32_t id);

/* Validates vocabulary strings and builds t->syms; shared by both kinds. reject_dups: a
 * repeated token is HS_E_FORMAT (BPE) rather than "last one wins" (WordPiece, as HF). */
hs_status hs_tok_build_vocab(hs_tokenizer *t, const char *const *tokens, size_t n, int reject_dups,
                             const char *what, hs_error *err);

/* Appends the ids of text (validated UTF-8, len bytes) to out. */
hs_status hs_bpe_encode(const hs_tokenizer *t, const char *text, size_t len, hs_idvec *out,
                        hs_error *err);
hs_status hs_wordpiece_encode(const hs_tokenizer *t, const char *text, size_t len, hs_idvec *out,
                              hs_error *err);

/* Builds the BPE tables (merges, byte symbols) of a tokenizer whose vocabulary is set.
 * merges[i] is "left right"; errors name merge_lines[i] as a file line when merge_lines is
 * not NULL, else the index i. what names the source in messages. */
hs_status hs_bpe_build(hs_tokenizer *t, const char *const *merges, const size_t *merge_lines,
                       size_t n_merges, const char *what, hs_error *err);

/* The byte encoded by GPT-2's byte-level character cp, or -1. */
int hs_bpe_char_to_byte(int32_t cp);

/* ---- UTF-8 and Unicode -------------------------------------------------------------------- */

/* Returns 1 when s[0..len) is valid UTF-8 (no overlongs, surrogates or values above
 * U+10FFFF); otherwise 0 with *bad set to the offset of the first invalid sequence. */
int hs_utf8_valid(const char *s, size_t len, size_t *bad);

/* Decodes one code point of VALID UTF-8 at s[*i] and advances *i. */
static inline int32_t hs_utf8_next(const unsigned char *s, size_t *i)
{
    unsigned c = s[*i];
    if (c < 0x80) {
        *i += 1;
        return (int32_t)c;
    }
    if (c < 0xE0) {
        int32_t cp = (int32_t)(((c & 0x1Fu) << 6) | (s[*i + 1] & 0x3Fu));
        *i += 2;
        return cp;
    }
    if (c < 0xF0) {
        int32_t cp = (int32_t)(((c & 0x0Fu) << 12) | ((s[*i + 1] & 0x3Fu) << 6) | (s[*i + 2] & 0x3Fu));
        *i += 3;
        return cp;
    }
    int32_t cp = (int32_t)(((c & 0x07u) << 18) | ((s[*i + 1] & 0x3Fu) << 12) |
                           ((s[*i + 2] & 0x3Fu) << 6) | (s[*i + 3] & 0x3Fu));
    *i += 4;
    return cp;
}

/* Writes the UTF-8 form of cp (a valid scalar value) to out; returns its length (1..4). */
size_t hs_utf8_put(int32_t cp, char *out);

/* Copies s[0..len) to buf (capacity cap, always NUL-terminated when cap > 0), replacing every
 * maximal invalid subsequence with U+FFFD as Python's errors="replace" does, and never cutting
 * a character. Returns the bytes written, without the NUL. */
size_t hs_utf8_sanitize(const char *s, size_t len, char *buf, size_t cap);

/* Character classes. */
int hs_uni_is_letter(int32_t cp);     /* Lu Ll Lt Lm Lo */
int hs_uni_is_number(int32_t cp);     /* Nd Nl No */
int hs_uni_is_white_space(int32_t cp); /* the White_Space property (regex \s) */
int hs_uni_is_py_space(int32_t cp);   /* Python str.isspace() */

#endif /* HEADSCOPE_TEXT_INTERNAL_H */
