/* One row through a linear layer, y (1, out) = x (1, in) W (in, out) + b: the same sums
 * whether W is float32 in memory or in its stored type.
 *
 * A one-token pass (the load's first token, a patched layer's metric row) spends its time
 * reading W. OpenBLAS's kernels for a row sum in an order of their own that depends on how
 * b is laid out, so a stored W had to be decoded into a block of W's float32 layout first,
 * transposed in memory, and only then handed to them: the decode, the transpose and the
 * product each a pass over the weights. Here the order is ours and fixed, so a stored row
 * of W is decoded into a cache-resident buffer and multiplied as it is: each output j is
 *
 *     s_l = sum over k = l, l + 16, l + 32, ... (k < in) of x_k W_kj, in increasing k,
 *           each term x_k * W_kj rounded, then added (no fused multiply-add, so every
 *           clone and the scalar baseline give the same bits),
 *     y_j = start_j + ((((s_0 + s_8) + (s_4 + s_12)) + ...)): the 16 partial sums added
 *           pairwise, l with l + 8, then l with l + 4, l + 2, l + 1 (a fixed tree),
 *
 * where start_j is b_j (y_j + b_j when adding), y_j when adding without a bias, and the sum
 * alone otherwise. With W in memory (in, out) the 16 partials of 16 neighbouring columns
 * are kept side by side; with W stored, a column of W is a stored row and its 16 partials
 * are the lanes of one vector. Both give each partial the same terms in the same order:
 * the same bits (tests/test_gemv.c). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/qgemm.h"
#include "nn/fastmath.h"
#include "nn/ops.h"

#define LANES 16 /* partial sums a column */
#define COLS 256 /* columns of W at a time */

/* The fixed tree over p[0 .. LANES) (p overwritten): l with l + 8, + 4, + 2, + 1. */
static inline float tree(float *p)
{
    for (int s = LANES / 2; s >= 1; s /= 2)
        for (int l = 0; l < s; l++)
            p[l] += p[l + s];
    return p[0];
}

static inline void put(float *y, const float *b, int add, float sum)
{
    if (b)
        *y = (add ? *y + *b : *b) + sum;
    else
        *y = add ? *y + sum : sum;
}

/* Columns j0 .. j0 + cols (cols <= COLS) of x W, W in memory (in, out), row stride ldw: the
 * 16 partials of each column side by side (16 KB), W read a row segment at a time. */
HS_CLONES static void cols_in_memory(const float *x, const float *w, size_t ldw, int in, int cols,
                                     float sums[COLS])
{
    static _Thread_local float acc[LANES][COLS];
    memset(acc, 0, sizeof acc);
    int k16 = in / LANES * LANES;
    for (int k0 = 0; k0 < k16; k0 += LANES)
        for (int l = 0; l < LANES; l++) {
            float xk = x[k0 + l], *al = acc[l];
            const float *row = w + (size_t)(k0 + l) * ldw;
#pragma omp simd
            for (int j = 0; j < cols; j++)
                al[j] += xk * row[j];
        }
    for (int k = k16; k < in; k++)
        for (int j = 0; j < cols; j++)
            acc[k - k16][j] += x[k] * w[(size_t)k * ldw + (size_t)j];
    for (int j = 0; j < cols; j++) {
        float p[LANES];
        for (int l = 0; l < LANES; l++)
            p[l] = acc[l][j];
        sums[j] = tree(p);
    }
}

/* x times one stored row r of W (a column), decoded: its 16 partials as the lanes. */
HS_CLONES static float row_stored(const float *x, const float *r, int in)
{
    float p[LANES];
    memset(p, 0, sizeof p);
    int k16 = in / LANES * LANES;
    for (int k0 = 0; k0 < k16; k0 += LANES)
#pragma omp simd
        for (int l = 0; l < LANES; l++)
            p[l] += x[k0 + l] * r[k0 + l];
    for (int k = k16; k < in; k++)
        p[k - k16] += x[k] * r[k];
    return tree(p);
}

/* The thread's decoded stored row: `in` floats, grown as needed and kept. */
static _Thread_local float *rows_buf;
static _Thread_local size_t rows_cap;

void hs_gemv_linear(const float *x, const float *w, const hs_qmat *q, const float *b, float *y,
                    int in, int out, int add)
{
    int blocks = (out + COLS - 1) / COLS;
#pragma omp parallel for schedule(static) if ((size_t)in * (size_t)out >= 4 * PAR_MIN)
    for (int t = 0; t < blocks; t++) {
        int j0 = t * COLS, cols = out - j0 < COLS ? out - j0 : COLS;
        float sums[COLS];
        if (q) { /* a stored row at a time, decoded into a buffer L1 keeps */
            if ((size_t)in > rows_cap) {
                float *p = realloc(rows_buf, (size_t)in * sizeof *p);
                if (!p) { /* NaN: the pass fails on non-finite values, as gemm.c's buffers */
                    for (int j = 0; j < cols; j++)
                        y[j0 + j] = NAN;
                    continue;
                }
                rows_buf = p;
                rows_cap = (size_t)in;
            }
            for (int j = 0; j < cols; j++) {
                hs_qmat_fill(q, 0, in, j0 + j, 1, rows_buf);
                sums[j] = row_stored(x, rows_buf, in);
            }
        } else {
            cols_in_memory(x, w + j0, (size_t)out, in, cols, sums);
        }
        for (int j = 0; j < cols; j++)
            put(y + j0 + j, b ? b + j0 + j : NULL, add, sums[j]);
    }
}
