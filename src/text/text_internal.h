/*
 * src/text/text_internal.h — internals shared by the tokenizer files in src/text/; never
 * installed. tokenizer.c holds the constructors, file loaders and accessors, encode.c the
 * encoding pipeline and templates, bpe.c BPE (byte-level and SentencePiece-style), pretok.c
 * the pre-tokenizer patterns, pretok_seq.c the Sequences of Split(Regex) and Digits steps
 * (regex.c and regex_run.c their regex engine, regex.h), normalize.c the BPE and Unigram
 * normalizers, tokenizer_json.c and tj_components.c tokenizer.json, wordpiece.c BERT,
 * unigram.c SentencePiece Unigram, unicode.c UTF-8 and character classes, strtab.c the string
 * and pair hash tables, added.c the added tokens and their matcher.
 */
#ifndef HEADSCOPE_TEXT_INTERNAL_H
#define HEADSCOPE_TEXT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "headscope/tokenizer.h"

/* Where the chunk of s that starts at from should end for a bounded encoding
 * (hs_tokenizer_encode_max): at the first space at or after from + size that stands
 * between an ASCII letter or digit and an ASCII letter (no pre-tokenizer, normalizer or
 * added token of the GPT-2 or BERT families joins across it; the chunk that follows starts
 * with the space, as the pre-token does), or at len. */
size_t hs_tok_chunk_end(const char *s, size_t len, size_t from, size_t size);

/* Limits on what a loader accepts. */
#define HS_TOK_MAX_VOCAB ((size_t)1 << 21)
#define HS_TOK_MAX_MERGES ((size_t)1 << 21)
#define HS_TOK_MAX_TOKEN_BYTES 1024
#define HS_TOK_MAX_FILE ((size_t)1 << 28)

/* Makes room for need elements of elem bytes in *p (capacity *cap elements, doubling from
 * first), keeping its contents. HS_E_NOMEM on overflow or allocation failure (*p unchanged). */
hs_status hs_tok_grow(void **p, size_t *cap, size_t need, size_t elem, size_t first);

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

/* Normalizer steps, applied in order to the text between added tokens (the Hugging Face
 * normalizers of the same names). WordPiece runs CLEAN .. MARKS on code points (BertNormalizer
 * is CLEAN CJK NFD STRIP LOWER with the steps it enables); BPE runs NFC, PREPEND and REPLACE
 * on UTF-8 (normalize.c) before the added tokens with normalized=true are looked for. */
enum hs_norm_step {
    HS_NORM_CLEAN = 1, /* drop NUL, U+FFFD and controls; whitespace becomes ' ' */
    HS_NORM_CJK,       /* spaces around CJK ideographs */
    HS_NORM_NFD,       /* canonical decomposition */
    HS_NORM_STRIP,     /* drop nonspacing marks (BertNormalizer's strip_accents) */
    HS_NORM_LOWER,     /* per-character full lowercase */
    HS_NORM_MARKS,     /* drop combining marks (the StripAccents normalizer) */
    HS_NORM_NFC,       /* canonical decomposition, then composition */
    HS_NORM_PREPEND,   /* t->prepend before a non-empty text (Prepend) */
    HS_NORM_REPLACE,   /* every t->rep_from becomes t->rep_to (Replace with a String pattern) */
    HS_NORM_TRIM,      /* whitespace off the start / end (Strip: t->trim_left, t->trim_right) */
    HS_NORM_SPACES,    /* each run of 2 or more ' ' becomes t->spaces_to (Replace " {2,}") */
    HS_NORM_PRECOMPILED /* SentencePiece's charsmap (precompiled.c) */
};
#define HS_TOK_MAX_NORM 8
#define HS_TOK_MAX_ADDED 65536
#define HS_TOK_MAX_ADDED_BYTES (1 << 22) /* all added tokens' bytes together */
#define HS_TOK_MAX_PREFIX 16

/* Pre-tokenizers of BPE models: where the text between added tokens is cut into words. */
enum hs_pre {
    HS_PRE_NONE = 0,  /* the whole text is one word (Llama 2's tokenizer.json) */
    HS_PRE_GPT2,      /* ByteLevel(use_regex=true): GPT-2's pattern */
    HS_PRE_LLAMA3,    /* Split on Llama 3's pattern (\p{N}{1,3}), Isolated */
    HS_PRE_QWEN2,     /* Split on Qwen2's pattern (\p{N}), Isolated */
    HS_PRE_METASPACE, /* Metaspace: ' ' becomes t->meta_rep, words start at it when split */
    HS_PRE_DIGITS_GPT2, /* Sequence [Digits(individual_digits), ByteLevel(use_regex)]: every
                           \p{N} character a word, GPT-2's pattern between them (StarCoder) */
    HS_PRE_FALCON,      /* Sequence [Punctuation(Contiguous), ByteLevel(use_regex), Digits,
                           Split([0-9][0-9][0-9], Isolated)] (Falcon) */
    HS_PRE_SEQ          /* Sequence [Split(Regex) and Digits steps, ByteLevel] (DeepSeek's;
                           t->pre_seq, pretok_seq.c) */
};
enum { HS_META_ALWAYS, HS_META_FIRST, HS_META_NEVER }; /* Metaspace prepend_scheme */

/* A post-processor's template: special tokens and the two texts, with their type ids
 * (Hugging Face's TemplateProcessing; BertProcessing and RobertaProcessing are templates). */
#define HS_TMPL_MAX 16
#define HS_TMPL_A (-1) /* the text */
#define HS_TMPL_B (-2) /* the pair */
typedef struct hs_template {
    int32_t id[HS_TMPL_MAX];       /* a special token's id, or HS_TMPL_A / HS_TMPL_B */
    unsigned char type[HS_TMPL_MAX]; /* its type id */
    size_t n;
} hs_template;

/* added token flags (Hugging Face's AddedToken options) */
enum { HS_ADD_NORMALIZED = 1, HS_ADD_LSTRIP = 2, HS_ADD_RSTRIP = 4 };

struct hs_tokenizer {
    hs_tokenizer_kind kind;
    int lowercase;           /* a lowercasing step is present */
    size_t n_vocab;          /* ids 0..n_vocab-1 are entries 0..n_vocab-1 of syms */
    size_t n_model;          /* ids below it are the model's; n_model.. are added tokens */
    hs_strtab syms;          /* vocabulary; BPE: then merge strings that are not in it */
    int32_t unk;             /* unknown token, -1 for none (BPE then drops what it cannot cover) */
    /* added tokens, matched whole in the raw text (leftmost, then longest; added.c) */
    int32_t *added;          /* (n_added) ids sorted by first byte, then longest first, then id */
    unsigned char *added_flags; /* (n_added) HS_ADD_*: NORMALIZED ones are matched in the
                                 * normalized text pass 0 (the raw text) left; LSTRIP / RSTRIP
                                 * take the whitespace before / after them */
    size_t n_added;
    struct hs_added_ac *added_ac[2]; /* the matchers of pass 0 and 1 (NULL: no such token) */
    /* post-processor: the texts and special tokens in the order of the template */
    hs_template single, pair;
    int has_pair;            /* the post-processor defines a pair encoding */
    const char *post_name;   /* its name for messages: "TemplateProcessing", ..., "none" */
    /* BPE */
    hs_pairmap merges;
    hs_strtab merge_text;    /* entry r is merge rank r as "left right" */
    int32_t byte_sym[256];   /* symbol of each byte's byte-level character, -1 if none */
    int add_prefix_space;    /* ByteLevel(add_prefix_space=true) */
    int pre;                 /* hs_pre */
    struct hs_pre_seq *pre_seq; /* HS_PRE_SEQ's steps (pretok_seq.c) */
    int byte_level;          /* words are bytes mapped to GPT-2's characters (HS_TOK_BPE) */
    int meta_scheme, meta_split; /* Metaspace prepend_scheme (HS_META_*) and split */
    int ignore_merges;       /* a word found whole in the vocabulary is one token */
    int byte_fallback;       /* a character outside the vocabulary becomes <0xNN> tokens */
    int fuse_unk;            /* consecutive unknown characters are one unknown token */
    int32_t byte_fb[256];    /* id of "<0xNN>" for each byte, -1 if absent */
    int32_t *right_first;    /* (n_right_first) the first code points of the merges' right
                              * symbols, sorted, each once (where a long word may be cut) */
    size_t n_right_first;
    char prepend[HS_TOK_MAX_PREFIX + 1];  /* Prepend's text */
    char meta_rep[HS_TOK_MAX_PREFIX + 1]; /* Metaspace's replacement ("▁") */
    char rep_from[HS_TOK_MAX_PREFIX + 1], rep_to[HS_TOK_MAX_PREFIX + 1]; /* Replace */
    int trim_left, trim_right;                 /* Strip */
    char spaces_to[HS_TOK_MAX_PREFIX + 1];     /* Replace with the regex " {2,}" */
    /* Unigram (unigram.c) */
    double *uni_score;       /* (n_model) each piece's score (a log probability) */
    double uni_unk_score;    /* an unknown character's: the lowest score - 10 */
    hs_pairmap uni_trie;     /* (node, byte) -> child node; rank: the piece ending there or -1 */
    int ws_split;            /* WhitespaceSplit before Metaspace */
    /* Precompiled (precompiled.c): the decoded charsmap, its trie's units, its replacements */
    unsigned char *pc_blob;
    size_t pc_units;
    const char *pc_norm;
    size_t pc_norm_len;
    /* WordPiece */
    unsigned char norm[HS_TOK_MAX_NORM]; /* hs_norm_step, n_norm of them */
    size_t n_norm;
    char prefix[HS_TOK_MAX_PREFIX + 1];  /* continuing-subword prefix, "##" */
    size_t max_chars;                    /* longer words are the unknown token (100) */
};

/* Growable id list used while encoding. From HS_IDVEC_MAP_BYTES on (Linux) its block is an
 * anonymous mapping grown by mremap: never copied, so a growth does not hold the old block
 * beside the new, and only the pages written count in the resident memory. Release it with
 * hs_idvec_free (not free) when mapped is set. */
typedef struct hs_idvec {
    int32_t *v;
    size_t n, cap;
    int mapped;
} hs_idvec;
#define HS_IDVEC_MAP_BYTES ((size_t)1 << 20)
hs_status hs_idvec_push(hs_idvec *v, int32_t id);
void hs_idvec_free(hs_idvec *v);

/* An empty tokenizer of a kind with the defaults of the vocabulary-file loaders. */
hs_tokenizer *hs_tok_alloc(hs_tokenizer_kind kind);

/* Validates vocabulary strings and builds t->syms; shared by both kinds. reject_dups: a
 * repeated token is HS_E_FORMAT (BPE) rather than "last one wins" (WordPiece, as HF). */
hs_status hs_tok_build_vocab(hs_tokenizer *t, const char *const *tokens, size_t n, int reject_dups,
                             const char *what, hs_error *err);

/* Sets the added tokens: ids into the vocabulary (none empty) and their HS_ADD_* flags (NULL:
 * all 0), and builds their matchers. HS_E_NOMEM or HS_E_FORMAT. */
hs_status hs_tok_set_added(hs_tokenizer *t, const int32_t *ids, const unsigned char *flags,
                           size_t n, hs_error *err);
/* Frees the added tokens and their matchers (the tokenizer's destructor). */
void hs_added_free(hs_tokenizer *t);

/* A scan of one text for the added tokens of a pass (0: those without HS_ADD_NORMALIZED,
 * 1: those with it), in time linear in the text. */
#define HS_ADDED_BLOCK 2048
typedef struct hs_added_scan {
    const struct hs_added_ac *ac;
    const unsigned char *s;
    size_t len, lo, hi;
    int32_t found[HS_ADDED_BLOCK]; /* (hi - lo) the longest token starting at lo + i, or -1 */
} hs_added_scan;
void hs_added_scan_init(hs_added_scan *sc, const hs_tokenizer *t, int pass, const char *s,
                        size_t len);
/* The leftmost token of the scan's pass that starts at or after i (the longest there, the
 * first in t->added among equal strings): its index into t->added, its start in *at; -1 for
 * none. Successive calls must not go back (i at least the previous call's). */
int32_t hs_added_scan_next(hs_added_scan *sc, size_t i, size_t *at);

/* The BERT template: [CLS] $A [SEP] / [CLS] $A [SEP] $B:1 [SEP]:1. */
void hs_tok_set_bert_template(hs_tokenizer *t, int32_t cls, int32_t sep);

/* Bytes of whitespace (Rust's char::is_whitespace) that end s[from..end) / start s[at..len)
 * (valid UTF-8): lstrip / rstrip, Strip. */
size_t hs_tok_space_before(const char *s, size_t from, size_t end);
size_t hs_tok_space_after(const char *s, size_t at, size_t len);

/* Runs the BPE and Unigram normalizer steps of t (NFC, PREPEND, REPLACE, TRIM, SPACES) on
 * s[0..len) (valid UTF-8) into *out (malloc'd, *out_len bytes; *out NULL and s to be used as
 * it is when t has none). *cut_start (may be NULL) is set when a Strip took characters off
 * the start: the normalized text then no longer starts where s does (Metaspace's "first").
 * HS_E_NOMEM only. */
hs_status hs_tok_normalize(const hs_tokenizer *t, const char *s, size_t len, char **out,
                           size_t *out_len, int *cut_start);

/* End of the pre-token that starts at s[i] (i < n, valid UTF-8) under pre-tokenizer pre
 * (HS_PRE_GPT2, HS_PRE_LLAMA3, HS_PRE_QWEN2, HS_PRE_DIGITS_GPT2 or HS_PRE_FALCON): the
 * patterns of pretok.c, as the regex engine matches them at one position (HS_PRE_FALCON's
 * words may end inside a character: i may be any byte its previous word ended at). */
size_t hs_pretoken_end(int pre, const unsigned char *s, size_t n, size_t i);

/* HS_PRE_SEQ (pretok_seq.c): hs_pre_seq_parse reads a pre_tokenizer Sequence's list of Split
 * (Regex, Isolated) and Digits steps ending with ByteLevel (add_prefix_space false) into
 * t->pre_seq, or refuses it naming the step; hs_pre_seq_words calls fn on each word of
 * s[0..n) in order (HS_E_NOMEM, or fn's failure). */
typedef struct hs_pre_seq hs_pre_seq;
typedef hs_status (*hs_pre_word_fn)(const unsigned char *s, size_t len, void *ctx);
hs_status hs_pre_seq_parse(hs_tokenizer *t, const struct cJSON *list, hs_error *err);
hs_status hs_pre_seq_words(const hs_tokenizer *t, const unsigned char *s, size_t n, hs_pre_word_fn fn,
                           void *ctx);
void hs_pre_seq_free(hs_pre_seq *q);
/* 1 when a and b cut every text alike: the same steps, patterns spelled the same. */
int hs_pre_seq_equal(const hs_pre_seq *a, const hs_pre_seq *b);
/* pretok_named.c: the named Sequences a GGUF file's tokenizer.ggml.pre stands for (DeepSeek's
 * three, HS_SPEC_PRE_DEEPSEEK_*). hs_pre_seq_named sets t's pre-tokenizer to that of spec_pre;
 * hs_pre_seq_spec sets *spec_pre to the HS_SPEC_PRE_* of t's Sequence, or -1 for none of
 * them. HS_E_NOMEM (or HS_E_ARG for a spec_pre that names no Sequence). */
hs_status hs_pre_seq_named(struct hs_tokenizer *t, int spec_pre, hs_error *err);
hs_status hs_pre_seq_spec(const struct hs_tokenizer *t, int *spec_pre, hs_error *err);

/* Appends the ids of a segment without added tokens (validated UTF-8, len bytes, normalized)
 * to out. first: the segment starts its text (Metaspace's prepend_scheme "first"). */
hs_status hs_bpe_encode(const hs_tokenizer *t, const char *text, size_t len, int first,
                        hs_idvec *out);
hs_status hs_wordpiece_encode(const hs_tokenizer *t, const char *text, size_t len, hs_idvec *out);
hs_status hs_unigram_encode(const hs_tokenizer *t, const char *text, size_t len, int first,
                            hs_idvec *out);

/* Builds the Unigram tables (the pieces' trie, scores, byte pieces) of a tokenizer whose
 * vocabulary is set: scores[i] is piece i's score (finite). HS_E_NOMEM only. */
hs_status hs_unigram_build(hs_tokenizer *t, const double *scores, hs_error *err);

/* SentencePiece's Precompiled normalizer (precompiled.c): the base64 charsmap into t (checked:
 * HS_E_FORMAT naming the problem), and the normalization of text[0..n) (valid UTF-8), each
 * piece of output passed to put(out, bytes, len). */
hs_status hs_precompiled_load(hs_tokenizer *t, const char *b64, hs_error *err);
/* The same from the map's bytes (GGUF's tokenizer.ggml.precompiled_charsmap); what names it. */
hs_status hs_precompiled_load_bytes(hs_tokenizer *t, const unsigned char *map, size_t len,
                                    const char *what, hs_error *err);
hs_status hs_precompiled_apply(const hs_tokenizer *t, const char *text, size_t n,
                               hs_status (*put)(void *, const char *, size_t), void *out);
/* Grapheme_Cluster_Break classes (grapheme_tables.c, fixtures/tokenizer/gen_grapheme_tables.js). */
enum { HS_GB_OTHER, HS_GB_CR, HS_GB_LF, HS_GB_CONTROL, HS_GB_EXTEND, HS_GB_ZWJ, HS_GB_SPACING,
       HS_GB_PREPEND, HS_GB_L, HS_GB_V, HS_GB_T, HS_GB_LV, HS_GB_LVT, HS_GB_RI, HS_GB_PICT };

/* Metaspace on s[0..len): every ' ' becomes t->meta_rep, which is put first when the scheme
 * asks for it (first: s starts its text). A malloc'd copy (*out_len bytes), NULL when out of
 * memory. */
unsigned char *hs_tok_metaspace(const hs_tokenizer *t, const unsigned char *s, size_t len,
                                int first, size_t *out_len);

/* Builds the BPE tables (merges, byte symbols) of a tokenizer whose vocabulary is set.
 * merges[i] is "left right" with rank ranks[i] (NULL: rank i; equal ranks are taken
 * leftmost first); errors name merge_lines[i] as a file line when merge_lines is not NULL,
 * else the index i. what names the source in messages. */
hs_status hs_bpe_build(hs_tokenizer *t, const char *const *merges, const int32_t *ranks,
                       const size_t *merge_lines, size_t n_merges, const char *what,
                       hs_error *err);

/* The byte encoded by GPT-2's byte-level character cp, or -1. */
int hs_bpe_char_to_byte(int32_t cp);

/* tokenizer.json's components (tj_components.c), for tokenizer_json.c: each reads one
 * object (NULL or json null: none) into t, refusing what headscope does not run with
 * HS_E_UNSUPPORTED and a message naming it. The pre-tokenizer sets t->kind to HS_TOK_BPE or
 * HS_TOK_SPM_BPE for a BPE model; hs_tj_check_template checks the template's ids against
 * the vocabulary. */
struct cJSON;
hs_status hs_tj_normalizer(hs_tokenizer *t, const struct cJSON *n, hs_error *err);
hs_status hs_tj_pre_tokenizer(hs_tokenizer *t, const struct cJSON *p, hs_error *err);
/* A Split pre-tokenizer on a String (read as none by hs_tj_pre_tokenizer) is accepted only
 * where the normalizer (read after it) replaces that string, which leaves nothing to split:
 * Gemma's Split(" ") after Replace(" ", "\u2581"). Fails naming it otherwise. */
hs_status hs_tj_split_string_check(const hs_tokenizer *t, const struct cJSON *p, hs_error *err);
hs_status hs_tj_post_processor(hs_tokenizer *t, const struct cJSON *pp, hs_error *err);
hs_status hs_tj_check_template(const hs_tokenizer *t, hs_error *err);
/* Members: "type" (or NULL); a boolean (dflt when absent or null, -1 for another type); an
 * integer in lo..hi (1, or 0 when it is not one). */
const char *hs_tj_type(const struct cJSON *o);
int hs_tj_bool(const struct cJSON *o, const char *key, int dflt);
int hs_tj_int(const struct cJSON *v, long long lo, long long hi, long long *out);

/* The file loaders' shared pieces (tokenizer.c), for tokenizer_json.c. */
hs_status hs_tok_read_text_file(const char *path, char **buf, size_t *len, hs_error *err);
const char *hs_tok_show(const char *s, char *buf, size_t cap);

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

/* Character classes and mappings of the Hugging Face tokenizers library, from the tables that
 * fixtures/tokenizer/gen_unicode_tables.js writes into unicode_tables.c. */
typedef struct hs_uni_range {
    int32_t lo, hi, v;
} hs_uni_range;
typedef struct hs_uni_map {
    int32_t cp;
    uint16_t off; /* into the table's _data array */
    uint16_t len;
} hs_uni_map;

/* GPT-2's pre-tokenizer pattern classes (Oniguruma \p{L}, \p{N}, \s). */
enum { HS_GC_OTHER, HS_GC_LETTER, HS_GC_NUMBER, HS_GC_SPACE };
/* BERT flags: removed by clean_text; made ' ' by clean_text; punctuation and whitespace to
 * BertPreTokenizer; a nonspacing mark (Mn) that BertNormalizer's strip_accents drops; a CJK
 * ideograph; a combining mark (Mn Mc Me) that the StripAccents normalizer drops. */
enum { HS_BF_CTRL = 1, HS_BF_CLEAN_SPACE = 2, HS_BF_PUNCT = 4, HS_BF_SPACE = 8, HS_BF_MN = 16,
       HS_BF_CJK = 32, HS_BF_MARK = 64 };
#define HS_UNI_MAX_MAP 16 /* longest result of hs_uni_nfd / hs_uni_lower */

extern const hs_uni_range hs_gpt2_classes[], hs_bert_flags[], hs_grapheme_classes[];
extern const size_t hs_grapheme_classes_n;
extern const size_t hs_gpt2_classes_n, hs_bert_flags_n;
extern const hs_uni_map hs_nfd_map[], hs_lower_map[];
extern const size_t hs_nfd_map_n, hs_lower_map_n;
extern const int32_t hs_nfd_map_data[], hs_lower_map_data[];

/* The v of the range of r (n sorted, disjoint ranges) that holds cp, 0 for none. */
int32_t hs_uni_range_value(const hs_uni_range *r, size_t n, int32_t cp);
int hs_uni_gpt2_class(int32_t cp);
int hs_uni_bert_flags(int32_t cp);
int hs_uni_grapheme_class(int32_t cp); /* HS_GB_* */
/* The canonical decomposition / lowercase of cp written to out (HS_UNI_MAX_MAP); returns the
 * count (1 and cp itself when it maps to itself). */
size_t hs_uni_nfd(int32_t cp, int32_t *out);
size_t hs_uni_lower(int32_t cp, int32_t *out);
/* Canonical combining class (utf8proc). */
int hs_uni_ccc(int32_t cp);
/* Canonical ordering: a stable sort of each run of non-starters by combining class, in time
 * linear in n. HS_E_NOMEM only (v then partly ordered). */
hs_status hs_uni_canonical_order(int32_t *v, size_t n);
/* Canonical composition of a canonically ordered decomposition v[0..n) in place (NFC's second
 * half); returns the new length. */
size_t hs_uni_compose(int32_t *v, size_t n);
/* White_Space as Rust's char::is_whitespace (added tokens' lstrip / rstrip). */
int hs_uni_white_space(int32_t cp);

typedef struct hs_uni_comp {
    int32_t first, second, composite;
} hs_uni_comp;
extern const hs_uni_comp hs_comp_table[];
extern const size_t hs_comp_table_n;

/* ---- tokenizers described field by field (src/text/tokenizer_spec.c) -------------------
 * What a GGUF file's tokenizer.ggml.* keys say, in terms of the pieces headscope's BPE
 * tokenizers are made of (the pipeline tokenizer.json builds): the GGUF reader builds a
 * tokenizer from a spec, the writer asks a tokenizer for its spec. */
enum {
    HS_SPEC_PRE_NONE = 0, /* no pre-tokenizer (SentencePiece-style: the text is one word) */
    HS_SPEC_PRE_GPT2,     /* GPT-2's pattern (ByteLevel use_regex) */
    HS_SPEC_PRE_LLAMA3,   /* Llama 3's (\p{N}{1,3} digit groups) */
    HS_SPEC_PRE_QWEN2,    /* Qwen2's (single digits) */
    HS_SPEC_PRE_FALCON,   /* Falcon's Sequence (HS_PRE_FALCON) */
    HS_SPEC_PRE_STARCODER, /* Digits(individual_digits), ByteLevel (HS_PRE_DIGITS_GPT2) */
    HS_SPEC_PRE_DEEPSEEK_LLM,   /* DeepSeek's three Sequences of Split and Digits steps */
    HS_SPEC_PRE_DEEPSEEK_CODER, /* (HS_PRE_SEQ, the steps as the hub files spell them: */
    HS_SPEC_PRE_DEEPSEEK_V3     /* pretok_named.c) */
};
enum {
    HS_SPEC_SPACE_NONE = 0, /* SentencePiece-style: spaces become U+2581, nothing prepended */
    HS_SPEC_SPACE_EACH,     /* ... and U+2581 before every piece between added tokens */
    HS_SPEC_SPACE_FIRST     /* ... before the first piece of a text only (Metaspace "first") */
};
typedef struct hs_tok_spec {
    int kind;                  /* hs_tokenizer_kind: HS_TOK_BPE (byte-level) or HS_TOK_SPM_BPE */
    const char *const *tokens; /* (n_tokens) in id order */
    size_t n_tokens;
    const char *const *merges; /* (n_merges) "left right" in rank order (byte-level) */
    size_t n_merges;
    const float *scores;       /* SentencePiece-style, instead of merges: (n_tokens) scores;
                                  every split of a piece into two pieces is a merge, the
                                  higher-scored result first, equal scores by position
                                  (llama.cpp's "llama" vocabulary) */
    const int32_t *added;      /* (n_added) ids matched whole in the text */
    const unsigned char *added_normalized; /* (n_added) 1: matched in the normalized text */
    size_t n_added;
    int pre;                   /* HS_SPEC_PRE_* */
    int nfc;                   /* an NFC normalizer */
    int ignore_merges;         /* a pre-token found whole in the vocabulary is one token */
    int space;                 /* SentencePiece-style: HS_SPEC_SPACE_* */
    int byte_fallback;         /* <0xNN> tokens for characters outside the vocabulary */
    int32_t unk;               /* unknown token, -1 for none */
    int32_t bos, eos;          /* put before / after every text, -1 for none */
    const char *post_name;     /* static name for messages */
} hs_tok_spec;
struct hs_tokenizer;
/* A tokenizer from a spec (copies what it needs); without a pair encoding. HS_E_FORMAT
 * naming the problem for a bad vocabulary, merge or id. */
hs_status hs_tokenizer_new_spec(const hs_tok_spec *spec, struct hs_tokenizer **out, hs_error *err);
/* The spec of a BPE tokenizer (tokens and merges left NULL: hs_tokenizer_token and
 * hs_tokenizer_merge give them; added and added_normalized point into t). HS_E_UNSUPPORTED
 * naming what a spec cannot say: WordPiece, normalizers other than NFC and the
 * SentencePiece space handling, lstrip/rstrip on an added token, more than one token put
 * before or after a text. */
hs_status hs_tokenizer_get_spec(const struct hs_tokenizer *t, hs_tok_spec *spec, hs_error *err);


#endif /* HEADSCOPE_TEXT_INTERNAL_H */
