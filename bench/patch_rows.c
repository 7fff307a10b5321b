/* The patching rows of `make bench`: activation patching of z of every head and attribution
 * patching, n = 64, in forward-pass equivalents per pair (issue 38's bounds: L H / 2 + 3 and
 * 3), timed and as the library counts them. */
#include <stdio.h>
#include <stdlib.h>

#include "headscope/forward.h"
#include "headscope/patch.h"
#include "bench.h"

typedef struct {
    const hs_model *m;
    const int32_t *ids;
    int n;
    float *logits;
} fwd_run;

static int fwd_once(void *ctx)
{
    fwd_run *f = ctx;
    hs_error err = {{0}};
    int32_t row = f->n - 1;
    hs_forward_opts o = {.logits = f->logits, .logit_rows = &row, .n_logit_rows = 1};
    return hs_forward(f->m, f->ids, NULL, f->n, &o, NULL, &err) != HS_OK;
}

void bench_patch_rows(const hs_model *m)
{
    const hs_model_config *c = hs_model_config_of(m);
    enum { PAIRS = 4 };
    int n = c->n_ctx < 64 ? c->n_ctx : 64, half = n / 2;
    int32_t *ids = malloc((size_t)PAIRS * 2 * (size_t)n * sizeof *ids);
    float *logits = malloc((size_t)c->vocab_size * sizeof *logits);
    hs_patch_pair pairs[PAIRS];
    if (!ids || !logits || !c->has_lm_head)
        goto done;
    for (int p = 0; p < PAIRS; p++) { /* clean A A, corrupt B A: repeated random tokens */
        int32_t *cl = ids + (size_t)p * 2 * n, *co = cl + n;
        for (int i = 0; i < half; i++) {
            cl[i] = cl[i + half] = co[i + half] = (int32_t)((i * 7919 + p * 104729 + 13) % c->vocab_size);
            co[i] = (int32_t)((i * 6271 + p * 15485863 + 7) % c->vocab_size);
        }
        if (n % 2)
            cl[n - 1] = co[n - 1] = 11;
        pairs[p] = (hs_patch_pair){cl, co, n, cl[1], co[1], n - 1};
    }
    fwd_run f = {m, ids, n, logits};
    double pass = bench_time_median(fwd_once, &f, 5);
    printf("\npatching over %d pairs, n = %d, %d layers x %d heads, all threads, per pair in "
           "forward passes\n  (pass = one forward with the LM head on the last row, %.1f ms):\n",
           PAIRS, n, c->n_layer, c->n_head, pass * 1e3);
    static const char *const names[] = {"exact, z of every head", "attribution, z"};
    static const double bound[2] = {-1, 3};
    for (int k = 0; k < 2; k++) {
        hs_patch_opts o = hs_patch_opts_default();
        o.resamples = 0;
        o.method = k ? HS_PATCH_ATTRIBUTION : HS_PATCH_EXACT;
        hs_patch_result *r = NULL;
        hs_error err = {{0}};
        double t0 = bench_now();
        if (hs_patch_run(m, pairs, PAIRS, &o, &r, &err) != HS_OK) {
            fprintf(stderr, "hs-bench: patching: %s\n", err.msg);
            break;
        }
        double t = (bench_now() - t0) / PAIRS;
        double b = k ? bound[k] : c->n_layer * c->n_head / 2.0 + 3;
        printf("  %-24s %8.3f s = %6.1f pass timed, %6.1f counted (target <= %.0f)\n", names[k],
               t, pass > 0 ? t / pass : 0, r->passes / PAIRS, b);
        hs_patch_result_free(r);
    }
done:
    fflush(stdout);
    free(ids);
    free(logits);
}
