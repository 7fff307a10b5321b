/*
 * src/model/gguf_internal.h — what the GGUF parser (gguf.c) and its queries (gguf_query.c),
 * the reader (gguf_load.c), writer (gguf_write.c) and their tokenizer halves
 * (gguf_tokenizer.c) share: the parsed file, typed metadata lookups with llama.cpp's
 * exact value types, and the key/value section being written.
 */
#ifndef HEADSCOPE_GGUF_INTERNAL_H
#define HEADSCOPE_GGUF_INTERNAL_H

#include "headscope/gguf.h"
#include "model/model_internal.h"

/* ---- the parsed file -------------------------------------------------------------------- */

#define GGML_TYPE_COUNT 43u /* ggml type ids below this: named; at or above: refused */

/* What gguf.c's parser records, read by the queries of gguf_query.c. */
typedef struct gstr {
    const char *s; /* NUL-terminated copy */
    size_t len;
} gstr;

typedef struct gkv {
    size_t key;    /* index into strs */
    uint32_t type; /* hs_gguf_type */
    uint32_t elem; /* element type (== type for scalars) */
    uint64_t n;    /* element count (1 for scalars) */
    size_t val;    /* offset of the first element's bytes in the image */
    size_t str0;   /* index into strs of the first string value */
} gkv;

struct hs_gguf {
    const unsigned char *data;
    size_t len;
    void *map;            /* mmap'd image, or NULL */
    unsigned char *owned; /* malloc'd image, or NULL */

    uint32_t version;
    uint32_t alignment;
    uint64_t data_off;

    size_t n_kv;
    gkv *kv;
    size_t n_tensors;
    hs_gguf_tensor *tensors;
    const hs_gguf_tensor **by_name; /* tensors sorted by name, for lookups */

    size_t n_strs;
    gstr *strs;
    char *chars;
};

/* Size in bytes of a fixed-width value type, 0 for STRING/ARRAY/unknown. */
size_t hs_gguf_value_size(uint32_t t);

/* ---- reading ---------------------------------------------------------------------------- */

/* A vocabulary-only file opened with HS_OPEN_TOKENIZER whose general.architecture headscope
 * does not run, with a "gpt2" or "llama" vocabulary: *done = 1 and cfg / own describe a
 * tokenizer-only model (src/model/gguf_vocab.c); *done = 0 for any other file. */
hs_status hs_gguf_vocab_config(const hs_gguf *g, int flags, hs_model_config *cfg, hs_arch *own, int *done,
                               hs_error *err);

/* Finds key with exactly type want. *idx = -1 when absent (an error only when required). */
hs_status hs_gguf_find_typed(const hs_gguf *g, const char *key, hs_gguf_type want, int required,
                             long *idx, hs_error *err);

/* A UINT32 that must fit an int; *out keeps its value when the key is absent and optional. */
hs_status hs_gguf_get_u32(const hs_gguf *g, const char *key, int required, int *out, hs_error *err);

/* A FLOAT32 / BOOL; *out keeps its value when absent and optional. */
hs_status hs_gguf_get_f32(const hs_gguf *g, const char *key, int required, float *out, hs_error *err);
hs_status hs_gguf_get_bool(const hs_gguf *g, const char *key, int required, int *out, hs_error *err);

/* An array of element type want; *idx = -1 when absent and optional. */
hs_status hs_gguf_find_array(const hs_gguf *g, const char *key, hs_gguf_type want, int required,
                             long *idx, hs_error *err);

/* LongRoPE of a phi3 file (llama.cpp's rope_factors_long/short.weight, attn_factor the value
 * of {arch}.rope.scaling.attn_factor, original_context_length) into own, whose rotary_dims
 * are set; n_ctx its context_length (src/model/gguf_longrope.c). */
hs_status hs_gguf_longrope(const hs_gguf *g, const char *arch, float attn_factor, int n_ctx,
                           hs_arch *own, hs_error *err);

/* The tokenizer of tokenizer.ggml.* into m->tok (left NULL when the file has no
 * tokenizer.ggml.model): GPT-2's and RoBERTa's byte-level BPE, BERT's WordPiece with the
 * "▁" rewrite undone, and for the rotary decoders a "gpt2" vocabulary with its pre-tokenizer
 * or a SentencePiece-style "llama" one with scores (src/model/gguf_tokenizer.c). */
hs_status hs_gguf_tokenizer_load(hs_model *m, const hs_gguf *g, hs_error *err);

/* U+2581, llama.cpp's word-start marker in a "bert" vocabulary. */
#define HS_GGUF_PHANTOM "\xe2\x96\x81"

/* tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
enum {
    HS_TT_NORMAL = 1, HS_TT_UNKNOWN = 2, HS_TT_CONTROL = 3, HS_TT_USER_DEFINED = 4,
    HS_TT_UNUSED = 5, HS_TT_BYTE = 6
};

/* A tokenizer.ggml.pre value of a "gpt2" (byte-level) vocabulary and the Hugging Face
 * pipeline it stands for (src/model/gguf_tokenizer.c's table): the pre-tokenizer
 * (HS_SPEC_PRE_*), NFC, ignore_merges, and whether a BOS is added. */
typedef struct hs_gguf_pre {
    const char *name;
    int pre, nfc, ignore_merges, add_bos;
} hs_gguf_pre;
/* The row named name, or NULL. */
const hs_gguf_pre *hs_gguf_pre_find(const char *name);
/* The name of the first row with pre, nfc and ignore_merges, or NULL. */
const char *hs_gguf_pre_name(int pre, int nfc, int ignore_merges);

/* ---- writing ---------------------------------------------------------------------------- */

/* The key/value section, built in memory (gguf_write.c). */
typedef struct hs_gguf_meta hs_gguf_meta;
void hs_meta_u32(hs_gguf_meta *m, const char *key, uint32_t v);
void hs_meta_f32(hs_gguf_meta *m, const char *key, float v);
void hs_meta_bool(hs_gguf_meta *m, const char *key, int v);
void hs_meta_str(hs_gguf_meta *m, const char *key, const char *v);
/* An array's key, element type and count; its n elements follow with hs_meta_elem_*. */
void hs_meta_array(hs_gguf_meta *m, const char *key, hs_gguf_type elem, uint64_t n);
void hs_meta_elem_str(hs_gguf_meta *m, const char *s);
void hs_meta_elem_strn(hs_gguf_meta *m, const char *prefix, const char *s); /* prefix + s */
void hs_meta_elem_u32(hs_gguf_meta *m, uint32_t v); /* also INT32 and FLOAT32 bits */
void hs_meta_elem_f32(hs_gguf_meta *m, float v);
void hs_meta_elem_bytes(hs_gguf_meta *m, const void *p, size_t n); /* n UINT8 / INT8 elements */

/* {arch}.context_length, .embedding_length, .block_count, .feed_forward_length and
 * .attention.head_count of c, in that order (gguf_write.c). */
void hs_gguf_dim_keys(hs_gguf_meta *mt, const hs_model_config *c, const char *arch);

/* The tensors being written (gguf_write.c): one more, rows x cols values (ne = {cols, rows},
 * or {cols} when rows is 0; with ne2 > 0, ne2 blocks of rows x cols, ne = {cols, rows, ne2},
 * block b read from src + b * bstride). Value (r, c) of a block is src[r * ld + c], or with
 * transpose src[c * ld + r]; src NULL: layer's slot, from column off, when written. */
typedef struct hs_gguf_plan hs_gguf_plan;
void hs_gguf_plan_add(hs_gguf_plan *p, const char *name, const float *src, int layer, hs_slot slot,
                      size_t off, size_t rows, size_t cols, size_t ld, int transpose, size_t ne2,
                      size_t bstride);

/* A reader's scratch (gguf_load.c's context): one view, the floats of a tensor put together
 * from others (deepseek2's kv_b), and why a tensor could not be read. */
typedef struct hs_gguf_scratch {
    hs_tensor_view v;
    float *buf;
    char bad[320];
} hs_gguf_scratch;

/* A view in s->v of rows [r0, r0 + rows) of t's 2-D (or stacked 3-D) data, shape
 * (rows, ne[0]) (a vector when t is one and rows is 1); NULL past its end (gguf_load.c). */
const hs_tensor_view *hs_gguf_rows_view(const hs_gguf_tensor *t, size_t r0, size_t rows,
                                        hs_gguf_scratch *s);

/* tokenizer.ggml.* of m (which has a tokenizer) as llama.cpp's converter writes them for its
 * family (src/model/gguf_tokenizer_write.c); HS_E_UNSUPPORTED naming what cannot be written. */
hs_status hs_gguf_tokenizer_write(hs_gguf_meta *mt, const hs_model *m, hs_error *err);

#endif /* HEADSCOPE_GGUF_INTERNAL_H */
