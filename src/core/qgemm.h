/* A matrix used in its stored type: y = x W with W made a block at a time from the bytes it
 * is stored in (ggml's block formats, F16, BF16), never converted whole (src/core/qgemm.c).
 * Core knows no storage type: the model layer supplies the decoder. */
#ifndef HEADSCOPE_QGEMM_H
#define HEADSCOPE_QGEMM_H

#include <stddef.h>
#include <stdint.h>

/* Decodes count elements of a stored tensor, from flat element index `from` (a multiple of
 * the tensor's block), into dst; src is the decoder's own description of the tensor. */
typedef void (*hs_qdecode_fn)(const void *src, size_t from, float *dst, size_t count);

/* Column j of W (output j): the stored row that holds it. */
typedef struct hs_qcol {
    const void *src; /* the tensor, as the decoder takes it */
    size_t first;    /* its row's first element, flat */
    int blk;         /* elements per block of its type (1: F16, BF16, F32) */
} hs_qcol;

/* The integer form of count elements of a stored tensor from flat index `from` (a multiple
 * of its block): q[i] signed 8-bit, and per 16 elements t a scale d[t] and offset m[t],
 * element i = d[i / 16] q[i] + m[i / 16]. Returns the sub-block of the type: 32 (d and m the
 * same for both 16s of a 32) or 16; 0 when it has no integer form. */
typedef int (*hs_qdecode_i8_fn)(const void *src, size_t from, int8_t *q, float *d, float *m,
                                size_t count);

/* One activation row x (in) times four columns col[0 .. 4) of W in the order of the one-row
 * product (src/nn/gemv.c): part[c][l] = the sum over k = l, l + 16, l + 32, ... (k < in) of
 * x_k W_kj, j col[c]'s column, in increasing k from +0, each weight what decode gives, each
 * product rounded, then added. For a type whose weights the model layer makes in registers
 * and multiplies at once (src/model/quant_rows.c: Q8_0, F16, BF16), where decode stores
 * them first. */
typedef void (*hs_qrows_fn)(const float *x, const hs_qcol *const col[4], int in,
                            float part[4][16]);

/* W: (in, out) logically, column j from col[j], in elements each (a whole number of blocks
 * of each column's type). decode_i8, when set (every column block-quantised, in a multiple
 * of 32, and 8-bit activations asked for): hs_op_linear multiplies by W with its activations
 * quantised to 8 bits (src/core/q8gemm.c) instead of through decode. rows, when set (every
 * column of one type that has it): a one-row product takes its sums from it instead of
 * through decode (the same bits). */
typedef struct hs_qmat {
    int in, out;
    const hs_qcol *col;
    hs_qdecode_fn decode;
    hs_qdecode_i8_fn decode_i8;
    hs_qrows_fn rows;
} hs_qmat;

/* The block of W at rows k0.. k0 + kl, columns j0.. j0 + cols into dst transposed:
 * (cols, kl) row-major, each value what decode gives for it (hs_gemm.b_fill for a const
 * hs_qmat *). */
void hs_qmat_fill(const void *qmat, int k0, int kl, int j0, int cols, float *dst);
/* The same block untransposed, (kl, cols) row-major (hs_gemm.b_fill_kn: a product of one
 * row or one column, which OpenBLAS sums by another kernel for each layout). */
void hs_qmat_fill_kn(const void *qmat, int k0, int kl, int j0, int cols, float *dst);
/* The block of Wᵀ (out, in) at rows k0.. k0 + kl (outputs of W), columns j0.. j0 + cols
 * (inputs of W) into dst transposed: (cols, kl) row-major, which is W's own block in its
 * (in, out) layout (hs_qmat_fill_kn with the ranges exchanged): hs_gemm.b_fill of a
 * product x Wᵀ (HS_GEMM_FILL_NT). */
void hs_qmat_fill_t(const void *qmat, int k0, int kl, int j0, int cols, float *dst);
/* The same block of Wᵀ untransposed, (kl, cols) row-major: W's stored rows k0.. k0 + kl
 * decoded at elements j0.. j0 + cols (hs_qmat_fill with the ranges exchanged). */
void hs_qmat_fill_t_kn(const void *qmat, int k0, int kl, int j0, int cols, float *dst);
/* Blocks hs_qmat_fill and hs_qmat_fill_kn have made, and one-row products that decoded W
 * themselves (src/nn/gemv.c, each counted once with hs_qmat_count_fill), since the start:
 * a test's proof that a product took the stored path. */
long hs_qmat_fills(void);
void hs_qmat_count_fill(void);

/* The matrices hs_op_linear takes in place of a float32 W: a layer's slot may point at an
 * hs_qmat registered here (an array of n of them), and hs_op_linear finds it by address.
 * Registered and unregistered by the weight cache of a model that uses its layers' stored
 * types (src/model/wcache.c). Thread-safe. Register returns 0, or -1 when the table (64
 * arrays) is full. */
int hs_qmat_register(const hs_qmat *arr, size_t n);
void hs_qmat_unregister(const hs_qmat *arr);
/* The registered hs_qmat at w, or NULL: a float32 matrix. */
const hs_qmat *hs_qmat_find(const void *w);

#endif /* HEADSCOPE_QGEMM_H */
