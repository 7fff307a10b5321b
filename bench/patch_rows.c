/* The patching rows of `make bench`: activation patching of z of every head and attribution
 * patching, n = 64, in forward-pass equivalents per pair (issue 38's bounds: L H / 2 + 3 and
 * 3), timed and as the library counts them. The unit is one plain forward pass of the pair's
 * tokens with logits at every position, as `headscope` runs it; the count is the passes'
 * floating-point operations over that pass's (src/importance/patch_cost.c). */
#include <stdio.h>
#include <stdlib.h>

#include "headscope/forward.h"
#include "headscope/patch.h"
#include "headscope/version.h"
#include "importance/patch_internal.h"
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
    hs_forward_opts o = {.logits = f->logits};
    return hs_forward(f->m, f->ids, NULL, f->n, &o, NULL, &err) != HS_OK;
}

typedef struct {
    const hs_model *m;
    const hs_patch_pair *pairs;
    int count;
    hs_patch_opts o;
    double passes;
} patch_run;

static int patch_once(void *ctx)
{
    patch_run *p = ctx;
    hs_patch_result *r = NULL;
    hs_error err = {{0}};
    if (hs_patch_run(p->m, p->pairs, p->count, &p->o, &r, &err) != HS_OK) {
        fprintf(stderr, "hs-bench: patching: %s\n", err.msg);
        return 1;
    }
    p->passes = r->passes / p->count;
    hs_patch_result_free(r);
    return 0;
}

void bench_patch_rows(const hs_model *m, int reps, int threads)
{
    const hs_model_config *c = hs_model_config_of(m);
    enum { PAIRS = 2 };
    int n = c->n_ctx < 64 ? c->n_ctx : 64, half = n / 2;
    int32_t *ids = malloc((size_t)PAIRS * 2 * (size_t)n * sizeof *ids);
    float *logits = malloc((size_t)n * (size_t)c->vocab_size * sizeof *logits);
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
    hs_set_threads(threads);
    fwd_run f = {m, ids, n, logits};
    double pass = bench_time_median(fwd_once, &f, reps), unit = hs_patch_forward_flops(c, n);
    int r3 = reps < 3 ? reps : 3; /* a patching run is tens of passes: no warm-up run */
    char thr[32] = "all threads";
    if (threads > 0)
        snprintf(thr, sizeof thr, "%d thread%s", threads, threads > 1 ? "s" : "");
    printf("\npatching over %d pairs, n = %d, %d layers x %d heads, %s, per pair in forward "
           "passes, median of %d runs,\n  each timed against the pass just before it (pass = "
           "one forward with logits at every\n  position, %.1f ms, %.2f GFLOP):\n",
           PAIRS, n, c->n_layer, c->n_head, thr, r3, pass * 1e3, unit / 1e9);
    static const char *const names[] = {"exact, z of every head", "attribution, z"};
    for (int k = 0; k < 2; k++) {
        patch_run pr = {m, pairs, PAIRS, hs_patch_opts_default(), 0};
        pr.o.resamples = 0;
        pr.o.method = k ? HS_PATCH_ATTRIBUTION : HS_PATCH_EXACT;
        double ts[3], ratio[3];
        int bad = 0;
        for (int i = 0; i < r3 && !bad; i++) { /* a loaded machine's speed drifts */
            double p1 = bench_time_median(fwd_once, &f, 3), t0 = bench_now();
            bad = patch_once(&pr) || p1 <= 0;
            ts[i] = (bench_now() - t0) / PAIRS;
            ratio[i] = bad ? 0 : ts[i] / p1;
        }
        if (bad)
            break;
        double t = bench_median(ts, r3), timed = bench_median(ratio, r3);
        double b = k ? 3 : c->n_layer * c->n_head / 2.0 + 3;
        printf("  %-24s %8.3f s = %6.1f pass timed, %6.1f counted (%.1f GFLOP; target <= %.0f)\n",
               names[k], t, timed, pr.passes, pr.passes * unit / 1e9, b);
    }
done:
    hs_set_threads(0);
    fflush(stdout);
    free(ids);
    free(logits);
}
