/* Matrix products whose every bit is the same for any thread count: the product is cut into
 * tiles by its shape alone, and each tile is one single-threaded OpenBLAS call inside a
 * parallel loop (OpenBLAS's OpenMP build does not thread a call made inside one). The same
 * rule as hs_op_gemm (src/nn/ops.c), for the analyses that run outside the forward pass. */
#include <cblas.h>

#include "internal.h"

#define TILE_M 64
#define TILE_N 256

/* The tiles of an (m, n) product, each one single-threaded BLAS call; dbl: double or float. */
static void gemm_tiles(int dbl, int trans_a, int trans_b, int m, int n, int k, const void *a,
                       int lda, const void *b, int ldb, void *c, int ldc)
{
    int mt = (m + TILE_M - 1) / TILE_M, nt = (n + TILE_N - 1) / TILE_N;
    CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
    CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
#pragma omp parallel for schedule(dynamic)
    for (int t = 0; t < mt * nt; t++) {
        int i0 = (t / nt) * TILE_M, j0 = (t % nt) * TILE_N;
        int rows = i0 + TILE_M < m ? TILE_M : m - i0, cols = j0 + TILE_N < n ? TILE_N : n - j0;
        size_t ao = trans_a ? (size_t)i0 : (size_t)i0 * (size_t)lda;
        size_t bo = trans_b ? (size_t)j0 * (size_t)ldb : (size_t)j0;
        size_t co = (size_t)i0 * (size_t)ldc + (size_t)j0;
        if (dbl)
            cblas_dgemm(CblasRowMajor, ta, tb, rows, cols, k, 1.0, (const double *)a + ao, lda,
                        (const double *)b + bo, ldb, 0.0, (double *)c + co, ldc);
        else
            cblas_sgemm(CblasRowMajor, ta, tb, rows, cols, k, 1.0f, (const float *)a + ao, lda,
                        (const float *)b + bo, ldb, 0.0f, (float *)c + co, ldc);
    }
}

void hs_dgemm_fixed(int trans_a, int trans_b, int m, int n, int k, const double *a, int lda,
                    const double *b, int ldb, double *c, int ldc)
{
    gemm_tiles(1, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
}

void hs_sgemm_fixed(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
                    const float *b, int ldb, float *c, int ldc)
{
    gemm_tiles(0, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
}
