/*
 * headscope/version.h — the release and the build.
 *
 *     printf("headscope %s (%s)\n", hs_version(), hs_build_commit());
 */
#ifndef HEADSCOPE_VERSION_H
#define HEADSCOPE_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

#define HS_VERSION "0.1.0" /* headscope release, written into reports */

/* The release the library was built as (HS_VERSION of the library, which may differ from
 * the header a program was compiled against). Static string. */
const char *hs_version(void);

/* The git commit the library was built from ("0123456789ab", with "-dirty" when the
 * checkout had uncommitted changes), or "" when it was not built from a git checkout.
 * Static string. */
const char *hs_build_commit(void);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_VERSION_H */
