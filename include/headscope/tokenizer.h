/*
 * headscope/tokenizer.h — the tokenizers of the model families headscope reads (GPT-2,
 * RoBERTa, GPT-NeoX, Llama 3 and Qwen2 byte-level BPE; Llama 2 SentencePiece-style BPE; BERT
 * WordPiece; T5 SentencePiece Unigram) reproducing the ids of Hugging Face's tokenizers
 * library exactly.
 *
 *     hs_tokenizer *tok = NULL;
 *     hs_error err = {0};
 *     if (hs_tokenizer_load_gpt2("m/vocab.json", "m/merges.txt", &tok, &err) != HS_OK) return 1;
 *     hs_encoding enc = {0};
 *     hs_tokenizer_encode(tok, "Hello world", 11, NULL, 0, &enc, &err);
 *     // enc.n == 2, enc.ids = {15496, 995}; hs_tokenizer_token(tok, 995) == "Ġworld"
 *     hs_encoding_free(&enc);
 *     hs_tokenizer_free(tok);
 *
 * Special tokens written in the text ("<|endoftext|>", "[CLS]", "[SEP]", "[MASK]",
 * "[PAD]", "[UNK]", exact case; a tokenizer.json's added tokens) are recognised whole.
 * The post-processor puts in the special tokens and type ids: BERT [CLS] a [SEP] (b [SEP]:1),
 * RoBERTa <s> a </s> (</s> b </s>, all type 0), Llama <s> a (<s>:1 b:1); GPT-2 nothing. The
 * ids are those of Hugging Face's tokenizers library (the Rust code behind transformers 5).
 */
#ifndef HEADSCOPE_TOKENIZER_H
#define HEADSCOPE_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "headscope/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hs_tokenizer hs_tokenizer;

typedef enum hs_tokenizer_kind {
    HS_TOK_BPE = 1,       /* byte-level BPE: GPT-2, RoBERTa, GPT-NeoX, Llama 3, Qwen2 */
    HS_TOK_WORDPIECE = 2, /* BERT WordPiece */
    HS_TOK_SPM_BPE = 3    /* SentencePiece-style BPE with byte fallback and the "▁"
                           * metaspace: Llama 2, TinyLlama (from tokenizer.json) */,
    HS_TOK_UNIGRAM = 4    /* SentencePiece Unigram (Viterbi over scored pieces, the "▁"
                           * metaspace): T5, Flan-T5 (from tokenizer.json) */
} hs_tokenizer_kind;

/* The result of one encode call; release with hs_encoding_free. 8 bytes a token: a token's
 * vocabulary string is hs_tokenizer_token(t, ids[i]) (raw, GPT-2 byte-level "Ġworld") and its
 * display form hs_tokenizer_display. */
typedef struct hs_encoding {
    size_t n;          /* number of tokens */
    int32_t *ids;      /* (n) vocabulary ids */
    int32_t *type_ids; /* (n) token type ids: 0 for the first text, 1 for the pair */
    size_t n_text;     /* tokens of the text, special tokens excluded */
    size_t n_pair;     /* tokens of the pair text, special tokens excluded */
    int paired;        /* 1 when encoded with a pair (the pair template) */
} hs_encoding;

/* Builds a BPE tokenizer from tokens in id order (byte-level strings) and merges in
 * rank order, each "left right". Copies what it needs; *out is freed with
 * hs_tokenizer_free. */
hs_status hs_tokenizer_new_bpe(const char *const *tokens, size_t n_tokens,
                               const char *const *merges, size_t n_merges,
                               hs_tokenizer **out, hs_error *err);

/* Builds a WordPiece tokenizer from tokens in id order ("##" marks continuations);
 * lowercase != 0 lowercases and strips accents as BertTokenizer(do_lower_case=True).
 * The tokens must include [PAD] [UNK] [CLS] [SEP] [MASK]. */
hs_status hs_tokenizer_new_wordpiece(const char *const *tokens, size_t n_tokens, int lowercase,
                                     hs_tokenizer **out, hs_error *err);

/* Loads GPT-2 vocab.json + merges.txt. */
hs_status hs_tokenizer_load_gpt2(const char *vocab_json_path, const char *merges_path,
                                 hs_tokenizer **out, hs_error *err);

/* Loads a BERT vocab.txt (one token per line, id = line number). */
hs_status hs_tokenizer_load_bert(const char *vocab_txt_path, int lowercase,
                                 hs_tokenizer **out, hs_error *err);

/* Loads a Hugging Face tokenizer.json (the fast-tokenizer file that hub models ship).
 * Accepted (docs/tokenizers.md lists every option):
 *   BPE with the ByteLevel pre-tokenizer, or Split on the Llama 3 / Qwen2 pattern followed by
 *     ByteLevel (byte-level BPE: GPT-2, RoBERTa, GPT-NeoX, Llama 3, Qwen2), or with no
 *     pre-tokenizer or Metaspace (SentencePiece-style: Llama 2), with byte_fallback, fuse_unk
 *     and ignore_merges; normalizers NFC, Prepend, Replace (a string) alone or in a Sequence;
 *   WordPiece with BertPreTokenizer and a normalizer made of BertNormalizer / NFD / Lowercase
 *     / StripAccents;
 *   Unigram (T5) with Metaspace, WhitespaceSplit, both in a Sequence, or no pre-tokenizer,
 *     byte_fallback, and normalizers Precompiled (SentencePiece's map), NFC, Prepend, Replace
 *     (a string or the regex " {2,}"), Strip;
 *   post-processors ByteLevel, BertProcessing, RobertaProcessing, TemplateProcessing, or a
 *     Sequence of them;
 *   added_tokens matched whole in the text (normalized ones in the normalized text), lstrip
 *     and rstrip as Hugging Face does them.
 * The decoder is ignored. Any other component is refused with HS_E_UNSUPPORTED and a message
 * naming it ("tokenizer.json: pre_tokenizer 'Whitespace' is not supported ..."); malformed
 * files give HS_E_FORMAT, unreadable ones HS_E_IO. On success *out is freed with
 * hs_tokenizer_free. */
hs_status hs_tokenizer_load_json(const char *path, hs_tokenizer **out, hs_error *err);

/* Encodes text (len bytes, need not be NUL-terminated, may contain NUL) and an optional pair
 * (pair == NULL for none), with the special tokens and type ids of the post-processor's
 * template (without one, the pair follows the text with type id 1; hs_tokenizer_has_pair
 * tells whether the tokenizer defines a pair encoding). Invalid UTF-8 is HS_E_INPUT.
 * On success *out owns its arrays (release with hs_encoding_free). */
hs_status hs_tokenizer_encode(const hs_tokenizer *t, const char *text, size_t len,
                              const char *pair, size_t pair_len, hs_encoding *out,
                              hs_error *err);

/* As hs_tokenizer_encode, but each segment is encoded only until it holds more than
 * max_tokens tokens (0: no limit), a chunk of text at a time (chunks end at a space between
 * two ASCII words, where a cut cannot change any token): work and memory stay near
 * max_tokens however long the text. hs_encoding_truncate(t, e, m) with m <= max_tokens +
 * the special tokens then gives exactly what it gives on the full encoding (truncation keeps
 * each segment's first tokens and looks only at lengths capped at m); e->n > m tells that
 * the text was longer than m, though not by how much. */
hs_status hs_tokenizer_encode_max(const hs_tokenizer *t, const char *text, size_t len,
                                  const char *pair, size_t pair_len, size_t max_tokens,
                                  hs_encoding *out, hs_error *err);

/* Cuts an encoding of t to at most max tokens (max >= the template's special tokens) as
 * Hugging Face's tokenizers library does with truncation="longest_first": the special tokens
 * stay, a single text keeps its first tokens, a pair is balanced on its lengths (GPT-2 keeps
 * the first max tokens). Nothing is reallocated:
 * only e->n and the order of the arrays' entries change, so hs_encoding_free still frees
 * everything. Does nothing when e->n <= max. */
void hs_encoding_truncate(const hs_tokenizer *t, hs_encoding *e, size_t max);

/* Frees the arrays of an encoding and zeroes it; accepts NULL and a zeroed encoding. */
void hs_encoding_free(hs_encoding *e);

/* Frees a tokenizer; accepts NULL. */
void hs_tokenizer_free(hs_tokenizer *t);

hs_tokenizer_kind hs_tokenizer_get_kind(const hs_tokenizer *t);

/* "byte-level BPE", "WordPiece", "SentencePiece-style BPE" (static strings). */
const char *hs_tokenizer_kind_name(hs_tokenizer_kind kind);

/* 1 when the tokenizer's post-processor defines how a pair of texts is encoded (BERT,
 * RoBERTa, Llama templates), 0 when it does not (GPT-2, GPT-NeoX, Qwen2: ByteLevel or none). */
int hs_tokenizer_has_pair(const hs_tokenizer *t);

/* HS_OK when t defines a pair encoding; otherwise HS_E_INPUT with a message naming t's kind
 * and post-processor ("a text pair needs a tokenizer whose post-processor defines a pair
 * encoding; this model's byte-level BPE tokenizer (post-processor ByteLevel) takes a single
 * text"). The one check every command makes before encoding a pair. */
hs_status hs_tokenizer_check_pair(const hs_tokenizer *t, hs_error *err);

/* The post-processor's name as tokenizer.json spells it ("TemplateProcessing",
 * "RobertaProcessing", "BertProcessing", "ByteLevel") or "none" (static or owned by t). */
const char *hs_tokenizer_post_processor(const hs_tokenizer *t);

/* 1 when id is an added token (special or not: <|endoftext|>, [CLS], <s>, <mask>, GPT-NeoX's
 * space runs) or one the post-processor adds; 0 otherwise and for t NULL. */
int hs_tokenizer_is_special(const hs_tokenizer *t, int32_t id);

/* Special tokens the post-processor adds around one text (pair = 0) or a pair (pair = 1). */
size_t hs_tokenizer_special_count(const hs_tokenizer *t, int pair);
size_t hs_tokenizer_vocab_size(const hs_tokenizer *t);
int hs_tokenizer_lowercase(const hs_tokenizer *t);

/* The raw vocabulary string of id, or NULL when out of range. Owned by t. */
const char *hs_tokenizer_token(const hs_tokenizer *t, int32_t id);

/* The id of a raw vocabulary string, or -1. */
int32_t hs_tokenizer_id(const hs_tokenizer *t, const char *token);

/* BPE merges (both kinds) in rank order (0 = applied first), each "left right" as in
 * merges.txt; 0 and NULL for WordPiece or an out-of-range rank. Owned by t. */
size_t hs_tokenizer_merge_count(const hs_tokenizer *t);
const char *hs_tokenizer_merge(const hs_tokenizer *t, size_t rank);

/* Writes a display form of token id into buf (always NUL-terminated when cap > 0):
 * byte-level strings decoded to their bytes, SentencePiece-style "▁" as a space and <0xNN>
 * as its byte, with bytes that do not form valid UTF-8 shown as U+FFFD; WordPiece tokens as
 * they are. Returns the length written. */
size_t hs_tokenizer_display(const hs_tokenizer *t, int32_t id, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_TOKENIZER_H */
