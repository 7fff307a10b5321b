/* How many threads headscope computes with. One OpenMP team runs everything: headscope's
 * parallel loops over heads and rows (src/nn/ops.c) and, outside them, OpenBLAS's own
 * threads (its OpenMP build runs single-threaded when called inside a parallel loop). */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

/* Kernel tiers: 0 SSE only, 1 AVX, 2 AVX2 + FMA, 3 AVX-512 (F, BW, VL, DQ), for the names
 * OpenBLAS gives its x86-64 kernel families in dynamic-arch builds; a name not listed (a
 * newer OpenBLAS's, another architecture's) counts as the best tier, never replaced. */
static int core_tier(const char *name)
{
    static const struct { const char *name; int tier; } known[] = {
        {"Katmai", 0}, {"Coppermine", 0}, {"Northwood", 0}, {"Banias", 0}, {"Athlon", 0},
        {"Prescott", 0}, {"Core2", 0}, {"Penryn", 0}, {"Dunnington", 0}, {"Nehalem", 0},
        {"Atom", 0}, {"Nano", 0}, {"Opteron", 0}, {"Opteron_SSE3", 0}, {"Barcelona", 0},
        {"Bobcat", 0}, {"Sandybridge", 1}, {"Bulldozer", 1}, {"Piledriver", 1},
        {"Steamroller", 1}, {"Haswell", 2}, {"Zen", 2}, {"Excavator", 2}, {"SkylakeX", 3},
        {"Cooperlake", 3}, {"SapphireRapids", 3}};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcasecmp(name, known[i].name))
            return known[i].tier;
    return 3;
}

/* The kernel family OpenBLAS chose, or the one HEADSCOPE_TEST_BLAS_CORE names (tests: as if
 * OpenBLAS had chosen it). */
static const char *chosen_core(void)
{
    const char *name = getenv("HEADSCOPE_TEST_BLAS_CORE");
    return name && *name ? name : hs_blas_corename();
}

const char *hs_blas_better_core(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    int cpu = 0;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        cpu = 3;
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        cpu = 2;
    else if (__builtin_cpu_supports("avx"))
        cpu = 1;
    static const char *const names[] = {NULL, "Sandybridge", "Haswell", "SkylakeX"};
    return core_tier(chosen_core()) < cpu ? names[cpu] : NULL;
#else
    return NULL;
#endif
}

const char *hs_blas_detected(void)
{
    const char *s = getenv("HEADSCOPE_BLAS_DETECTED");
    return s && *s ? s : NULL;
}

void hs_blas_reexec(char **argv)
{
    const char *better = getenv("OPENBLAS_CORETYPE") ? NULL : hs_blas_better_core();
    if (!better || getenv("HEADSCOPE_BLAS_DETECTED"))
        return;
    if (setenv("HEADSCOPE_BLAS_DETECTED", chosen_core(), 1) ||
        setenv("OPENBLAS_CORETYPE", better, 1))
        return;
    execv("/proc/self/exe", argv); /* returns only on failure: go on with the kernels we have */
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("HEADSCOPE_BLAS_DETECTED");
}
