/* Helpers shared by the Criterion suites (header-only, test code only). */
#ifndef HEADSCOPE_TESTUTIL_H
#define HEADSCOPE_TESTUTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>
#include <criterion/criterion.h>

#include "core/core.h"
#include "headscope/importance.h"
#include "headscope/model.h"
#include "headscope/npy.h"
#include "headscope/visibility.h"

/* One visibility for every map or layer: the (vis, n_vis) of the trace-wide analyses
 * (similarity, diversity, rollout, flow) as (TU_CAUSAL, 1). */
static const hs_visibility TU_CAUSAL[1] = {{HS_VIS_CAUSAL, 0, 0}};
static const hs_visibility TU_BIDIR[1] = {{HS_VIS_BIDIRECTIONAL, 0, 0}};

/* Shared models (../shared beside the checkout) and committed fixtures. */
#define SHARED_MODELS "../shared/models"

/* Loads a model (folder or GGUF file) or fails the test. */
static inline hs_model *tu_load(const char *path)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    hs_status st = hs_model_load(path, &m, &err);
    cr_assert_eq(st, HS_OK, "cannot load %s: %s", path, err.msg);
    return m;
}

/* A whole file into a malloc'd, NUL-terminated buffer (text or bytes), or fails the test. */
static inline void *tu_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

/* Loads a .npy or fails the test. */
static inline hs_npy tu_npy(const char *path)
{
    hs_npy a;
    hs_error err = {{0}};
    hs_status st = hs_npy_read(path, &a, &err);
    cr_assert_eq(st, HS_OK, "cannot read %s: %s", path, err.msg);
    return a;
}

/* The golden array <dir><name>.<what>.npy, or an empty one when optional and absent. */
static inline hs_npy tu_golden_npy(const char *dir, const char *name, const char *what,
                                   int optional)
{
    char path[256];
    snprintf(path, sizeof path, "%s%s.%s.npy", dir, name, what);
    if (optional && access(path, R_OK) != 0)
        return (hs_npy){0};
    return tu_npy(path);
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

/* The JSON file at path (up to 16 MB), parsed, or the test fails. cJSON_Delete it. */
static inline cJSON *tu_json_file(const char *path)
{
    char *text;
    size_t len;
    hs_error err = {{0}};
    cr_assert_eq(hs_read_file(path, 1 << 24, &text, &len, &err), HS_OK, "%s", err.msg);
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    cr_assert_not_null(j, "bad json %s", path);
    return j;
}

/* -log softmax(row: (V))[target], in double. */
static inline double tu_nll(const float *row, int V, int target)
{
    double mx = row[0];
    for (int v = 1; v < V; v++)
        mx = row[v] > mx ? row[v] : mx;
    double s = 0;
    for (int v = 0; v < V; v++)
        s += exp((double)row[v] - mx);
    return -((double)row[target] - mx - log(s));
}

/* The analytic signed gradient importance of every head of m on in against the central
 * difference (L(xi_h = 1 + eps) - L(xi_h = 1 - eps)) / 2 eps, eps = 1e-2, through the
 * ordinary forward pass. The O(eps^2) truncation and float32 loss noise (~1e-6 / 2e-2) fit
 * |fd - g| <= 2e-2 (|g| + 1e-2); at least half the heads must have |g| > 1e-3. */
static inline void tu_check_finite_difference(const hs_model *m, const hs_loss_input *in,
                                              const char *name)
{
    const hs_model_config *c = hs_model_config_of(m);
    int lh = c->n_layer * c->n_head;
    double *sg = malloc((size_t)lh * sizeof *sg), loss;
    hs_error err = {{0}};
    cr_assert_eq(hs_gradient_signed(m, in, sg, &loss, &err), HS_OK, "%s", err.msg);
    hs_loss_eval *ev;
    cr_assert_eq(hs_loss_eval_new(m, in, &ev, &err), HS_OK, "%s", err.msg);
    float *mask = malloc((size_t)lh * sizeof *mask);
    for (int k = 0; k < lh; k++)
        mask[k] = 1.0f;
    const double eps = 1e-2;
    int nonzero = 0;
    for (int k = 0; k < lh; k++) {
        double up, down;
        mask[k] = (float)(1.0 + eps);
        cr_assert_eq(hs_loss_eval_run(ev, mask, &up, &err), HS_OK, "%s", err.msg);
        mask[k] = (float)(1.0 - eps);
        cr_assert_eq(hs_loss_eval_run(ev, mask, &down, &err), HS_OK, "%s", err.msg);
        mask[k] = 1.0f;
        double fd = (up - down) / (2 * eps);
        cr_expect(fabs(fd - sg[k]) <= 2e-2 * (fabs(sg[k]) + 1e-2),
                  "%s: head %d.%d finite difference %.6f, analytic %.6f", name, k / c->n_head,
                  k % c->n_head, fd, sg[k]);
        nonzero += fabs(sg[k]) > 1e-3;
    }
    cr_expect(nonzero >= lh / 2, "%s: only %d of %d gradients are clearly non-zero", name, nonzero, lh);
    free(mask);
    hs_loss_eval_free(ev);
    free(sg);
}

/* A fresh temporary directory (removed by tu_rm_rf). */
static inline void tu_mkdtemp(char *buf, size_t cap)
{
    snprintf(buf, cap, "/tmp/hs-test-XXXXXX");
    cr_assert_not_null(mkdtemp(buf), "mkdtemp failed");
}

/* Removes dir and everything in it (clean-up: rm's exit status is not checked). */
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
