/*
 * headscope/version.h — the release, the build and the threads it computes with.
 *
 *     printf("headscope %s (%s)\n", hs_version(), hs_build_commit());
 */
#ifndef HEADSCOPE_VERSION_H
#define HEADSCOPE_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

#define HS_VERSION "3.2.1" /* headscope release, written into reports */

/* The release the library was built as (HS_VERSION of the library, which may differ from
 * the header a program was compiled against). Static string. */
const char *hs_version(void);

/* The git commit the library was built from ("0123456789ab", with "-dirty" when the
 * checkout had uncommitted changes), or "" when it was not built from a git checkout.
 * Static string. */
const char *hs_build_commit(void);

/* Threads: hs_set_threads(n) makes every later computation use n threads (n < 1: one per
 * online core, the default); hs_threads() says how many are in use, hs_threads_available()
 * how many cores are online. Process-wide; call it before starting work, not during. */
void hs_set_threads(int n);
int hs_threads(void);
int hs_threads_available(void);

/* The CPU kernel family the BLAS library chose for this machine (OpenBLAS's core name,
 * e.g. "Haswell", "SkylakeX", "Zen"), for benchmarks. Static string. */
const char *hs_blas_corename(void);

/* OpenBLAS picks its kernels once, when it loads, from the CPU's identification; a CPU it
 * does not know (a virtual machine's generic "Intel Xeon Processor", say) gets a kernel for
 * an old one: SSE3 "Prescott" on an AVX-512 Xeon runs sgemm 5-7 times slower.
 * hs_blas_better_core() names the best OpenBLAS kernel family this CPU runs ("SkylakeX",
 * "Haswell", "Sandybridge") when it is newer than the one in use, else NULL. The choice can
 * only be changed before OpenBLAS loads, by OPENBLAS_CORETYPE in the environment:
 * hs_blas_reexec(argv), called first thing in a program's main, sets it and executes the
 * program again (/proc/self/exe, the same argv) when OPENBLAS_CORETYPE is unset and a better
 * kernel exists; it returns at once otherwise, or when the exec fails. hs_blas_detected()
 * then gives the family OpenBLAS had chosen by itself, NULL when no re-exec happened.
 * Static strings. */
const char *hs_blas_better_core(void);
void hs_blas_reexec(char **argv);
const char *hs_blas_detected(void);

/* How the BLAS library runs its threads: "OpenMP" (the build headscope is made for: its own
 * parallel loops and BLAS share one team), "pthreads" or "sequential". Static string. */
const char *hs_blas_threading(void);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_VERSION_H */
