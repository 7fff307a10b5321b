/*
 * src/model/gguf_internal.h — what the GGUF reader (gguf_load.c), writer (gguf_write.c) and
 * their tokenizer halves (gguf_tokenizer.c) share: typed metadata lookups with llama.cpp's
 * exact value types, and the key/value section being written.
 */
#ifndef HEADSCOPE_GGUF_INTERNAL_H
#define HEADSCOPE_GGUF_INTERNAL_H

#include "headscope/gguf.h"
#include "model/model_internal.h"

/* ---- reading ---------------------------------------------------------------------------- */

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

/* The tokenizer of tokenizer.ggml.* into m->tok (left NULL when the file has no
 * tokenizer.ggml.model): GPT-2's and RoBERTa's byte-level BPE, BERT's WordPiece with the
 * "▁" rewrite undone, and for the rotary decoders a "gpt2" vocabulary with its pre-tokenizer
 * or a SentencePiece-style "llama" one with scores (src/model/gguf_tokenizer.c). */
hs_status hs_gguf_tokenizer_load(hs_model *m, const hs_gguf *g, hs_error *err);

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

/* tokenizer.ggml.* of m (which has a tokenizer) as llama.cpp's converter writes them for its
 * family (src/model/gguf_tokenizer.c); HS_E_UNSUPPORTED naming what cannot be written. */
hs_status hs_gguf_tokenizer_write(hs_gguf_meta *mt, const hs_model *m, hs_error *err);

#endif /* HEADSCOPE_GGUF_INTERNAL_H */
