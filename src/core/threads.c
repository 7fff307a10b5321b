/* How many threads headscope computes with. One OpenMP team runs everything: headscope's
 * parallel loops over heads and rows (src/nn/ops.c) and, outside them, OpenBLAS's own
 * threads (its OpenMP build runs single-threaded when called inside a parallel loop). */
#include <cblas.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "headscope/version.h"

int hs_threads_available(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void hs_set_threads(int n)
{
    if (n < 1)
        n = hs_threads_available();
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    openblas_set_num_threads(n);
}

int hs_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return openblas_get_num_threads();
#endif
}

const char *hs_blas_corename(void)
{
    const char *s = openblas_get_corename();
    return s ? s : "?";
}

const char *hs_blas_threading(void)
{
    switch (openblas_get_parallel()) {
    case 0: return "sequential";
    case 1: return "pthreads";
    case 2: return "OpenMP";
    default: return "?";
    }
}
