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

#define HS_VERSION "1.1.0" /* headscope release, written into reports */

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

/* How the BLAS library runs its threads: "OpenMP" (the build headscope is made for: its own
 * parallel loops and BLAS share one team), "pthreads" or "sequential". Static string. */
const char *hs_blas_threading(void);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_VERSION_H */
