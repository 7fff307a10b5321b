/* How many threads headscope computes with (today: OpenBLAS's pool, which runs every
 * projection and attention product). */
#include <cblas.h>
#include <unistd.h>

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
    openblas_set_num_threads(n);
}

int hs_threads(void) { return openblas_get_num_threads(); }

const char *hs_blas_corename(void)
{
    const char *s = openblas_get_corename();
    return s ? s : "?";
}
