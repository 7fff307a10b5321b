/* Whether OpenBLAS sums a float product the same way with b given transposed: the layout
 * verdict of hs_gemm_run's filled path (src/core/gemm.c, run_filled).
 *
 * A stored matrix's block is cheapest to make transposed (a stored row of W is a column of
 * b), and for most shapes OpenBLAS packs either layout of b into the same panel and runs the
 * same kernel on it, so c = a bᵀ-from-the-transposed-block has the bits of c = a b. Not for
 * every shape: on SkylakeX, OpenBLAS 0.3.21 sends a small product with alpha 1, beta 0 and
 * both operands untransposed to its "direct" kernel, and other small products to
 * small-matrix kernels of their own per layout, each summing in its own order (a 17-token
 * pass through a 64-wide model differed by 2e-6 in its maps). Which kernels a build and a
 * CPU pick is not ours to know, so the question is asked of the library: the two layouts
 * are run once on operands of the shape and compared bit for bit, and the answer is kept
 * for the shape. Operands are pseudo-random floats of mixed magnitudes, so two orders of a
 * sum show in almost every cell; a shape found the same is the same for any values (a
 * kernel's order of a sum does not depend on them). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "core/core.h"

#define LAYOUT_SHAPES 1024 /* verdicts kept; past them, the untransposed block */

typedef struct layout_key {
    int rows, cols, k;
    float alpha, beta;
} layout_key;

static struct {
    layout_key key;
    int same;
} layout_tab[LAYOUT_SHAPES];
static int layout_n;
static pthread_mutex_t layout_lock = PTHREAD_MUTEX_INITIALIZER;

static int layout_find(const layout_key *k)
{
    for (int i = 0; i < layout_n; i++) {
        const layout_key *t = &layout_tab[i].key;
        if (t->rows == k->rows && t->cols == k->cols && t->k == k->k && t->alpha == k->alpha &&
            t->beta == k->beta)
            return i;
    }
    return -1;
}

/* A float in ±[1/16, 16): a uniform mantissa and a power of two from 2^-4 to 2^3. */
static float probe_value(uint64_t *state)
{
    uint64_t z = hs_splitmix64(state);
    float m = 1.0f + (float)(z >> 40) / (float)(1u << 24);
    float v = m * (float)(1 << ((z >> 8) & 7)) / 16.0f;
    return z & 1 ? -v : v;
}

/* 1 if c = alpha a b + beta c has the same bits with b (k, cols) row-major as with its
 * transpose (cols, k) given as op(b) = bᵀ, both on one thread; 0 if not, or if the
 * operands cannot be had. */
static int measure(int rows, int cols, int k, float alpha, float beta)
{
    size_t na = (size_t)rows * (size_t)k, nb = (size_t)k * (size_t)cols;
    size_t nc = (size_t)rows * (size_t)cols;
    float *a = malloc((na + 2 * nb + 3 * nc) * sizeof *a);
    if (!a)
        return 0;
    float *b = a + na, *bt = b + nb, *c0 = bt + nb, *c1 = c0 + nc, *c2 = c1 + nc;
    uint64_t state = 0x6c61796f7574ULL ^ ((uint64_t)rows << 40) ^ ((uint64_t)cols << 20) ^
                     (uint64_t)k;
    for (size_t i = 0; i < na; i++)
        a[i] = probe_value(&state);
    for (int r = 0; r < k; r++)
        for (int j = 0; j < cols; j++)
            bt[(size_t)j * (size_t)k + (size_t)r] = b[(size_t)r * (size_t)cols + (size_t)j] =
                probe_value(&state);
    for (size_t i = 0; i < nc; i++)
        c0[i] = probe_value(&state);
    memcpy(c1, c0, nc * sizeof *c1);
    memcpy(c2, c0, nc * sizeof *c2);
    /* inside a parallel region, as the filled path's calls: OpenBLAS on one thread */
#pragma omp parallel num_threads(2)
#pragma omp single
    {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, cols, k, alpha, a, k, b,
                    cols, beta, c1, cols);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, k, alpha, a, k, bt, k,
                    beta, c2, cols);
    }
    int same = memcmp(c1, c2, nc * sizeof *c1) == 0;
    free(a);
    return same;
}

int hs_gemm_layout_same(int rows, int cols, int k, float alpha, float beta)
{
    if (rows < 1 || cols < 1 || k < 1)
        return 0;
    layout_key key = {rows, cols, k, alpha, beta};
    pthread_mutex_lock(&layout_lock);
    int slot = layout_find(&key), full = layout_n >= LAYOUT_SHAPES;
    int same = slot >= 0 ? layout_tab[slot].same : -1;
    pthread_mutex_unlock(&layout_lock);
    if (same >= 0)
        return same;
    if (full)
        return 0;
    same = measure(rows, cols, k, alpha, beta);
    pthread_mutex_lock(&layout_lock);
    if (layout_find(&key) < 0 && layout_n < LAYOUT_SHAPES) {
        layout_tab[layout_n].key = key;
        layout_tab[layout_n++].same = same;
    }
    pthread_mutex_unlock(&layout_lock);
    return same;
}
