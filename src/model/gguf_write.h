/* The GGUF writer's pieces shared by its files: gguf_write.c writes the file (header, keys,
 * tensor infos, tensor data), gguf_write_plan.c lays out its tensors from the family's name
 * table, gguf_write_keys.c says what llama.cpp can hold and writes each architecture's
 * hyperparameter keys. Private to src/model/. */
#ifndef HEADSCOPE_GGUF_WRITE_H
#define HEADSCOPE_GGUF_WRITE_H

#include "model/gguf_internal.h"

/* The alignment of the tensor data and of each tensor in it. */
#define HS_GGUF_ALIGN 32u

/* One GGUF tensor: `rows` rows of `cols` contiguous values (ne = {cols, rows}, or
 * ne = {cols} when rows == 0). Value (r, c) is src[r * ld + c] as stored, or with
 * transpose src[c * ld + r] (a normalised (in, out) matrix written as (out, in)). */
typedef struct hs_gguf_ptensor {
    char name[64];
    const float *src; /* a layer's tensor: NULL until written (gguf_write.c) */
    int layer;        /* -1, or the layer whose slot `slot` holds it from column `off` */
    hs_slot slot;
    size_t off;
    size_t rows, cols, ld;
    int transpose;
    size_t rope_dh;  /* > 0: Llama's Q or K, rows (elements of a vector) in llama.cpp's
                        adjacent-pair order: GGUF row h dh + 2 i + j is row h dh + j dh/2 + i */
    size_t ne2, bstride; /* > 0: ne2 blocks of rows x cols, block b from src + b bstride */
    uint32_t type;
    uint64_t nbytes, offset;
} hs_gguf_ptensor;

/* The tensors of the file in order (hs_gguf_plan_add, gguf_internal.h). */
struct hs_gguf_plan {
    hs_gguf_ptensor *t;
    size_t n, cap;
    hs_gguf_ftype ftype;
    int nomem;
    float rope_freqs[HS_ROTARY_MAX_DIMS / 2]; /* Llama 3's divisors, rope_freqs.weight */
};

/* The plan of m's tensors into p (p->ftype set): every row of the name table that applies,
 * llama.cpp's extra tensors, the experts, each tensor's storage type, size and offset. */
hs_status hs_gguf_plan_build(hs_gguf_plan *p, const hs_model *m, const hs_gguf_write_options *opt,
                             hs_error *err);

/* What llama.cpp cannot hold of m (a rotary decoder's, Falcon-RW's, deepseek2's, T5's),
 * refused by name before anything is written. */
hs_status hs_gguf_writable(const hs_model *m, hs_error *err);

/* general.* and the hyperparameter keys of m's architecture arch (its GGUF name), in the
 * order of llama.cpp's converter. */
void hs_gguf_model_keys(hs_gguf_meta *mt, const hs_model *m, const hs_gguf_write_options *opt,
                        const char *arch);

#endif
