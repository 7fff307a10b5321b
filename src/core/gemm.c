/* Matrix products whose every bit is the same for any thread count: the product is cut into
 * tiles by its shape alone, and each tile is one single-threaded OpenBLAS call inside a
 * parallel loop (OpenBLAS's OpenMP build does not thread a call made inside one). The same
 * rule as hs_op_gemm (src/nn/ops.c), for the analyses that run outside the forward pass. */
#include <cblas.h>

#include "internal.h"

#define TILE_M 64
#define TILE_N 256

void hs_dgemm_fixed(int trans_a, int trans_b, int m, int n, int k, const double *a, int lda,
                    const double *b, int ldb, double *c, int ldc)
{
    int mt = (m + TILE_M - 1) / TILE_M, nt = (n + TILE_N - 1) / TILE_N;
#pragma omp parallel for schedule(dynamic)
    for (int t = 0; t < mt * nt; t++) {
        int i0 = (t / nt) * TILE_M, j0 = (t % nt) * TILE_N;
        int rows = i0 + TILE_M < m ? TILE_M : m - i0, cols = j0 + TILE_N < n ? TILE_N : n - j0;
        cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                    trans_b ? CblasTrans : CblasNoTrans, rows, cols, k, 1.0,
                    trans_a ? a + i0 : a + (size_t)i0 * (size_t)lda, lda,
                    trans_b ? b + (size_t)j0 * (size_t)ldb : b + j0, ldb, 0.0,
                    c + (size_t)i0 * (size_t)ldc + j0, ldc);
    }
}

void hs_sgemm_fixed(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
                    const float *b, int ldb, float *c, int ldc)
{
    int mt = (m + TILE_M - 1) / TILE_M, nt = (n + TILE_N - 1) / TILE_N;
#pragma omp parallel for schedule(dynamic)
    for (int t = 0; t < mt * nt; t++) {
        int i0 = (t / nt) * TILE_M, j0 = (t % nt) * TILE_N;
        int rows = i0 + TILE_M < m ? TILE_M : m - i0, cols = j0 + TILE_N < n ? TILE_N : n - j0;
        cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                    trans_b ? CblasTrans : CblasNoTrans, rows, cols, k, 1.0f,
                    trans_a ? a + i0 : a + (size_t)i0 * (size_t)lda, lda,
                    trans_b ? b + (size_t)j0 * (size_t)ldb : b + j0, ldb, 0.0f,
                    c + (size_t)i0 * (size_t)ldc + j0, ldc);
    }
}
