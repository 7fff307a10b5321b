/*
 * headscope/gguf.h — reading and writing GGUF (v2/v3, little-endian), the single-file
 * model container used by llama.cpp, for GPT-2 and BERT.
 *
 * hs_model_load() opens GGUF files by itself (detected by the "GGUF" magic); this header
 * is for inspecting a file (metadata and tensor table, as gguf-dump shows them) and for
 * writing one from a loaded model, as `headscope convert` does:
 *
 *     hs_error err = {0};
 *     hs_gguf *g = NULL;
 *     if (hs_gguf_open("model.bin", &g, &err) != HS_OK) return fprintf(stderr, "%s\n", err.msg), 1;
 *     for (size_t i = 0; i < hs_gguf_kv_count(g); i++) {
 *         hs_gguf_value v;
 *         hs_gguf_kv_get(g, i, 0, &v);           // first element / the scalar
 *         printf("%s %s\n", hs_gguf_kv_key(g, i), hs_gguf_type_name(hs_gguf_kv_type(g, i)));
 *     }
 *     for (size_t i = 0; i < hs_gguf_tensor_count(g); i++)
 *         printf("%s\n", hs_gguf_tensor_at(g, i)->name);
 *     hs_gguf_free(g);
 *
 *     hs_gguf_write_options opt = {.ftype = HS_GGUF_FTYPE_F16};
 *     hs_gguf_write(model, "model.bin", &opt, &err);   // atomic: a new temporary file, then rename
 *
 * Reader rules (see docs/gguf.md): versions 2 and 3 only; every count, length and offset
 * is checked against limits and the bytes left before anything is allocated; keys must
 * be non-empty printable ASCII and unique; no nested arrays; BOOL bytes must be 0 or 1;
 * tensor names 1..63 bytes and unique, 1..4 dimensions, every ne > 0; tensor types F32,
 * F16, BF16 and Q8_0; offsets aligned to general.alignment (UINT32, a power of two,
 * default 32), inside the file and not overlapping. Gaps between tensors are accepted
 * (the GGUF spec allows them; ggml itself insists on packed offsets).
 */
#ifndef HEADSCOPE_GGUF_H
#define HEADSCOPE_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "headscope/model.h"
#include "headscope/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hs_gguf hs_gguf;

/* Metadata value types, numbered as in the file. */
typedef enum hs_gguf_type {
    HS_GGUF_UINT8 = 0,
    HS_GGUF_INT8 = 1,
    HS_GGUF_UINT16 = 2,
    HS_GGUF_INT16 = 3,
    HS_GGUF_UINT32 = 4,
    HS_GGUF_INT32 = 5,
    HS_GGUF_FLOAT32 = 6,
    HS_GGUF_BOOL = 7,
    HS_GGUF_STRING = 8,
    HS_GGUF_ARRAY = 9,
    HS_GGUF_UINT64 = 10,
    HS_GGUF_INT64 = 11,
    HS_GGUF_FLOAT64 = 12
} hs_gguf_type;

/* The ggml tensor types headscope reads (ggml's numbering); it writes F32, F16, BF16 and
 * Q8_0. The block layouts are in docs/gguf.md. */
typedef enum hs_ggml_type {
    HS_GGML_F32 = 0,
    HS_GGML_F16 = 1,
    HS_GGML_Q4_0 = 2,  /* blocks of 32 along ne[0]: fp16 d, 16 bytes of nibbles; x = d (q - 8) */
    HS_GGML_Q4_1 = 3,  /* blocks of 32: fp16 d and m, 16 bytes of nibbles; x = d q + m */
    HS_GGML_Q5_0 = 6,  /* blocks of 32: fp16 d, 5-bit q; x = d (q - 16) */
    HS_GGML_Q5_1 = 7,  /* blocks of 32: fp16 d and m, 5-bit q; x = d q + m */
    HS_GGML_Q8_0 = 8,  /* blocks of 32 along ne[0]: fp16 scale d, 32 int8; x = d * q */
    HS_GGML_Q2_K = 10, /* super-blocks of 256: 16 sub-blocks with 4-bit scales and mins, 2-bit q */
    HS_GGML_Q3_K = 11, /* super-blocks of 256: 16 sub-blocks with 6-bit scales, 3-bit q */
    HS_GGML_Q4_K = 12, /* super-blocks of 256: 8 sub-blocks with 6-bit scales and mins */
    HS_GGML_Q5_K = 13, /* super-blocks of 256: as Q4_K with a fifth bit */
    HS_GGML_Q6_K = 14, /* super-blocks of 256: 16 sub-blocks with int8 scales, 6-bit q */
    HS_GGML_IQ4_NL = 20, /* blocks of 32: fp16 d, 4-bit indices into a 16-value grid */
    HS_GGML_IQ4_XS = 23, /* super-blocks of 256: IQ4_NL's grid, 8 sub-blocks' 6-bit scales */
    HS_GGML_BF16 = 30
} hs_ggml_type;

/* general.file_type values written by `convert` (llama.cpp's LlamaFileType). */
typedef enum hs_gguf_ftype {
    HS_GGUF_FTYPE_F32 = 0,
    HS_GGUF_FTYPE_F16 = 1,
    HS_GGUF_FTYPE_Q8_0 = 7,
    HS_GGUF_FTYPE_BF16 = 32
} hs_gguf_ftype;

/* One scalar: a whole scalar value, or one element of an array. */
typedef struct hs_gguf_value {
    hs_gguf_type type; /* never HS_GGUF_ARRAY */
    uint64_t u;        /* UINT8, UINT16, UINT32, UINT64, BOOL (0 or 1) */
    int64_t i;         /* INT8, INT16, INT32, INT64 */
    double f;          /* FLOAT32, FLOAT64 */
    const char *str;   /* STRING: a NUL-terminated copy owned by the hs_gguf */
    size_t len;        /* STRING: length in bytes (the string may hold NUL bytes) */
} hs_gguf_value;

/* One entry of the tensor table. */
typedef struct hs_gguf_tensor {
    const char *name;          /* NUL-terminated, owned by the hs_gguf */
    uint32_t type;             /* an hs_ggml_type */
    uint32_t n_dims;           /* as stored, 1..4 */
    int64_t ne[4];             /* ne[0] is contiguous; dimensions past n_dims are 1 */
    uint64_t offset;           /* from the start of the data section */
    uint64_t nbytes;           /* bytes of data, without padding */
    const unsigned char *data; /* the bytes, inside the file image */
} hs_gguf_tensor;

/* Opens and validates a GGUF file (memory-mapped, or read whole where mapping is not
 * possible). On success *out owns the file image; free with hs_gguf_free. Errors:
 * HS_E_IO, HS_E_FORMAT (malformed), HS_E_DTYPE (a tensor type other than F32, F16, BF16,
 * Q8_0), HS_E_UNSUPPORTED (version), HS_E_NOMEM. */
hs_status hs_gguf_open(const char *path, hs_gguf **out, hs_error *err);

/* Parses and validates a GGUF image in memory, with the rules of hs_gguf_open. The
 * bytes are borrowed: data must stay valid and unchanged until hs_gguf_free. */
hs_status hs_gguf_parse(const void *data, size_t len, hs_gguf **out, hs_error *err);

/* Frees a parsed file (and unmaps/frees an image it owns); accepts NULL. */
void hs_gguf_free(hs_gguf *g);

/* File-level facts: the version (2 or 3), the alignment in force, where the data
 * section starts and the size of the image in bytes. */
uint32_t hs_gguf_version(const hs_gguf *g);
uint32_t hs_gguf_alignment(const hs_gguf *g);
uint64_t hs_gguf_data_offset(const hs_gguf *g);
uint64_t hs_gguf_size(const hs_gguf *g);

/* Metadata in file order. Index i must be < hs_gguf_kv_count(g). The key is owned by g. */
size_t hs_gguf_kv_count(const hs_gguf *g);
const char *hs_gguf_kv_key(const hs_gguf *g, size_t i);
hs_gguf_type hs_gguf_kv_type(const hs_gguf *g, size_t i);

/* For an array: its element type and length. For a scalar: its own type and 1, so a
 * scalar reads as a one-element array. */
hs_gguf_type hs_gguf_kv_elem_type(const hs_gguf *g, size_t i);
size_t hs_gguf_kv_len(const hs_gguf *g, size_t i);

/* Reads element j of entry i (j = 0 for a scalar) into *out. Returns HS_OK, or HS_E_ARG
 * when i or j is out of range. */
hs_status hs_gguf_kv_get(const hs_gguf *g, size_t i, size_t j, hs_gguf_value *out);

/* The index of key, or -1 when absent. */
long hs_gguf_find_kv(const hs_gguf *g, const char *key);

/* The tensor table in file order; hs_gguf_tensor_at returns NULL when i is out of
 * range, hs_gguf_find_tensor NULL when no tensor has that name. Owned by g. */
size_t hs_gguf_tensor_count(const hs_gguf *g);
const hs_gguf_tensor *hs_gguf_tensor_at(const hs_gguf *g, size_t i);
const hs_gguf_tensor *hs_gguf_find_tensor(const hs_gguf *g, const char *name);

/* Names: "UINT32", "STRING", ... for value types; "F32", "Q4_K", ... for any ggml type
 * code ggml defines (NULL for a code it does not). Static strings. */
const char *hs_gguf_type_name(hs_gguf_type t);
const char *hs_ggml_type_name(uint32_t type);

/* ---- writing ---------------------------------------------------------------------- */

typedef struct hs_gguf_write_options {
    hs_gguf_ftype ftype; /* type of the 2-D weights; the rest follows llama.cpp's rules */
    int keep_mlm;        /* BERT, RoBERTa: also write the MLM head (headscope-only tensors
                          * under their HF names, cls.predictions.* / lm_head.*; llama.cpp
                          * rejects such files) */
    const char *name;    /* general.name; NULL: none */
    int no_output_copy;  /* GPT-2 with a tied head: leave out output.weight, the copy of
                          * token_embd that llama.cpp before March 2025 (b4747 included)
                          * requires; newer llama.cpp and headscope read the file either way */
} hs_gguf_write_options;

/* Parses "f32", "f16", "bf16", "q8_0" (case-insensitive). Returns HS_OK or HS_E_ARG. */
hs_status hs_gguf_ftype_parse(const char *s, hs_gguf_ftype *out);

/* Encodes m as a GGUF v3 image in memory, with the keys, tensor names, shapes and
 * storage types llama.cpp's converter writes. On success *out is malloc'd (caller
 * frees) and *len is its size. opt may be NULL (F32, no MLM head, no name). */
hs_status hs_gguf_encode(const hs_model *m, const hs_gguf_write_options *opt,
                         unsigned char **out, size_t *len, hs_error *err);

/* Writes the same image to path atomically: to a new temporary file beside it (O_EXCL,
 * never through a planted symlink), flushed and fsync'd, then renamed over path. On
 * failure path is untouched and no temporary file is left. */
hs_status hs_gguf_write(const hs_model *m, const char *path, const hs_gguf_write_options *opt,
                        hs_error *err);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_GGUF_H */
