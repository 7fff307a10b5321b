/* The release and the commit the library was built from (the Makefile passes
 * HS_GIT_COMMIT when it builds from a git checkout). */
#include "headscope/version.h"

#ifndef HS_GIT_COMMIT
#define HS_GIT_COMMIT ""
#endif

const char *hs_version(void) { return HS_VERSION; }
const char *hs_build_commit(void) { return HS_GIT_COMMIT; }
