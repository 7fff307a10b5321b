/* Helpers shared by the Criterion suites (header-only, test code only). */
#ifndef HEADSCOPE_TESTUTIL_H
#define HEADSCOPE_TESTUTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "headscope/npy.h"

/* Shared models (../shared beside the checkout) and committed fixtures. */
#define SHARED_MODELS "../shared/models"

/* Loads a .npy or fails the test. */
static inline hs_npy tu_npy(const char *path)
{
    hs_npy a;
    hs_error err = {{0}};
    hs_status st = hs_npy_read(path, &a, &err);
    cr_assert_eq(st, HS_OK, "cannot read %s: %s", path, err.msg);
    return a;
}

/* max |a - b| over count floats; *where gets the index of the largest difference. */
static inline double tu_max_abs_diff(const float *a, const float *b, size_t count, size_t *where)
{
    double m = 0;
    size_t w = 0;
    for (size_t i = 0; i < count; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > m || d != d) {
            m = d;
            w = i;
        }
    }
    if (where)
        *where = w;
    return m;
}

/* A fresh temporary directory (removed by tu_rmdir). */
static inline void tu_mkdtemp(char *buf, size_t cap)
{
    snprintf(buf, cap, "/tmp/hs-test-XXXXXX");
    cr_assert_not_null(mkdtemp(buf), "mkdtemp failed");
}

static inline void tu_rm_rf(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    int rc = system(cmd);
    (void)rc;
}

/* Writes bytes to path or fails the test. */
static inline void tu_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot create %s", path);
    cr_assert_eq(fwrite(data, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

#endif
