/* One row through a linear layer, y (1, out) = x (1, in) W (in, out) + b: the same sums
 * whether W is float32 in memory or in its stored type.
 *
 * A one-token pass (the load's first token, a patched layer's metric row) spends its time
 * reading W. OpenBLAS's kernels for a row sum in an order of their own that depends on how
 * b is laid out, so a stored W had to be decoded into a block of W's float32 layout first,
 * transposed in memory, and only then handed to them: the decode, the transpose and the
 * product each a pass over the weights. Here the order is ours and fixed, so four stored
 * rows of W are decoded 512 elements at a time into a buffer L1 keeps and multiplied as they
 * are, the partial sums held in registers: each output j is
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
 * the same bits (tests/test_gemv.c). Where the model layer gives the stored type its own
 * kernel (hs_qmat.rows: Q8_0, F16, BF16, src/model/quant_rows.c), the four rows' partials
 * come from it instead: the weights made in registers from the stored bytes and multiplied
 * at once, in this order, without the buffer (half the time of decode-then-multiply or
 * less). */
#include <stddef.h>
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

/* 16 floats as one value (GCC's vector extension: one register with AVX-512, four with SSE):
 * the partial sums are kept in registers, where an array was stored and loaded again at
 * every step, one add waiting on the store before it. */
typedef float v16 __attribute__((vector_size(LANES * sizeof(float))));
typedef float v16u __attribute__((vector_size(LANES * sizeof(float)), aligned(4), may_alias));
#define LOAD16(p) (*(const v16u *)(const void *)(p)) /* 16 floats from any float address */

/* x times ROWS stored rows of W at once, columns j .. j + ROWS (j + nr - 1 repeated where
 * fewer are left: their sums are not used), each column's 16 partials the lanes of one
 * vector. A stored row is decoded KC elements at a time into buf (ROWS x KC floats, which L1
 * keeps) and multiplied at once; four rows give four independent chains of adds, where one
 * row waits on each add before the next. */
#define ROWS 4
#define KC 512 /* a multiple of every block (32, 256): a piece of a row is whole blocks */
HS_CLONES static void rows_stored(const float *x, const hs_qmat *q, int j, int nr, int in,
                                  float *buf, float sums[ROWS])
{
    v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    int k16 = in / LANES * LANES, last = 0;
    for (int k0 = 0; k0 < in; k0 += KC) {
        int len = in - k0 < KC ? in - k0 : KC;
        for (int c = 0; c < ROWS; c++) {
            const hs_qcol *col = &q->col[j + (c < nr ? c : nr - 1)];
            q->decode(col->src, col->first + (size_t)k0, buf + c * KC, (size_t)len);
        }
        int vec = k16 - k0 < len ? k16 - k0 : len;
        for (int k = 0; k < vec; k += LANES) {
            v16 xv = LOAD16(x + k0 + k);
            a0 += xv * LOAD16(buf + k);
            a1 += xv * LOAD16(buf + KC + k);
            a2 += xv * LOAD16(buf + 2 * KC + k);
            a3 += xv * LOAD16(buf + 3 * KC + k);
        }
        last = k0;
    }
    float p[ROWS][LANES];
    memcpy(p[0], &a0, sizeof p[0]);
    memcpy(p[1], &a1, sizeof p[1]);
    memcpy(p[2], &a2, sizeof p[2]);
    memcpy(p[3], &a3, sizeof p[3]);
    for (int c = 0; c < ROWS; c++) { /* the tail, in the last piece's buffer */
        for (int k = k16; k < in; k++)
            p[c][k - k16] += x[k] * buf[c * KC + (k - last)];
        sums[c] = tree(p[c]);
    }
}

/* The same sums by the type's own kernel (hs_qmat.rows: the weights decoded in registers
 * and multiplied at once, no buffer), which gives the partials in this order. */
static void rows_kernel(const float *x, const hs_qmat *q, int j, int nr, int in,
                        float sums[ROWS])
{
    const hs_qcol *col[ROWS];
    float p[ROWS][LANES];
    for (int c = 0; c < ROWS; c++)
        col[c] = &q->col[j + (c < nr ? c : nr - 1)];
    q->rows(x, col, in, p);
    for (int c = 0; c < ROWS; c++)
        sums[c] = tree(p[c]);
}

/* One-row products that took hs_qmat.rows since the start (a test's proof). */
static long kernel_calls;

long hs_gemv_kernel_calls(void)
{
    return __atomic_load_n(&kernel_calls, __ATOMIC_RELAXED);
}

void hs_gemv_linear(const float *x, const float *w, const hs_qmat *q, const float *b, float *y,
                    int in, int out, int add)
{
    if (q)
        hs_qmat_count_fill();
    if (q && q->rows)
        __atomic_fetch_add(&kernel_calls, 1, __ATOMIC_RELAXED);
    int blocks = (out + COLS - 1) / COLS;
#pragma omp parallel for schedule(static) if ((size_t)in * (size_t)out >= 4 * PAR_MIN)
    for (int t = 0; t < blocks; t++) {
        int j0 = t * COLS, cols = out - j0 < COLS ? out - j0 : COLS;
        float sums[COLS];
        if (q) { /* ROWS stored rows at a time, a piece of each decoded into L1 */
            float buf[ROWS * KC];
            for (int j = 0; j < cols; j += ROWS) {
                float s4[ROWS];
                int nr = cols - j < ROWS ? cols - j : ROWS;
                if (q->rows)
                    rows_kernel(x, q, j0 + j, nr, in, s4);
                else
                    rows_stored(x, q, j0 + j, nr, in, buf, s4);
                memcpy(sums + j, s4, (size_t)nr * sizeof *s4);
            }
        } else {
            cols_in_memory(x, w + j0, (size_t)out, in, cols, sums);
        }
        for (int j = 0; j < cols; j++)
            put(y + j0 + j, b ? b + j0 + j : NULL, add, sums[j]);
    }
}
