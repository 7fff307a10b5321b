/* `make bench`'s packed rows: corpus throughput of the recorded forward pass, one text a
 * pass (hs_forward, every map kept in a trace) against several texts a pass
 * (hs_forward_packed, every text's maps copied into its own trace: the same maps kept), on
 * K texts of corpus length (32, 64 and 128 tokens), at a few token budgets a pack: texts/s
 * and the ratio to one text a pass, at one thread and at all threads. One thread is timed
 * in the process's CPU time, which other programs on a loaded machine do not inflate (it is
 * the wall time on a quiet one); all threads in wall time. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "headscope/forward.h"
#include "headscope/version.h"
#include "bench.h"

#define PACK_TEXTS 16

typedef struct pack_run {
    const hs_model *m;
    int32_t *ids;      /* (K * len) */
    int len, k, per;   /* per: texts a pack (1: hs_forward a text) */
    hs_trace **traces; /* (k) */
    int base;          /* the pack's first text */
} pack_run;

static int keep_text(void *user, int layer, int text, const float *probs, int n_head, int n)
{
    pack_run *r = user;
    hs_trace *t = r->traces[r->base + text];
    size_t per = (size_t)n_head * (size_t)n * (size_t)n;
    memcpy(t->attn + (size_t)layer * per, probs, per * sizeof *probs);
    return 0;
}

static int run_texts(void *ctx)
{
    pack_run *r = ctx;
    hs_error err = {{0}};
    int lens[PACK_TEXTS];
    for (int i = 0; i < PACK_TEXTS; i++)
        lens[i] = r->len;
    for (int t0 = 0; t0 < r->k; t0 += r->per) {
        int cnt = r->k - t0 < r->per ? r->k - t0 : r->per;
        const int32_t *ids = r->ids + (size_t)t0 * (size_t)r->len;
        hs_status st;
        if (r->per == 1) {
            hs_forward_opts o = {.on_attn = hs_trace_observe, .user = r->traces[t0]};
            st = hs_forward(r->m, ids, NULL, r->len, &o, NULL, &err);
        } else {
            r->base = t0;
            hs_packed_opts po = {.on_attn = keep_text, .user = r};
            st = hs_forward_packed(r->m, ids, NULL, lens, cnt, &po, NULL, &err);
        }
        if (st) {
            fprintf(stderr, "hs-bench: packed: %s\n", err.msg);
            return 1;
        }
    }
    return 0;
}

/* Median seconds of reps runs after a warm-up: CPU time of the process (cpu) or wall time;
 * -1 when a run fails. */
static double median_run(pack_run *r, int reps, int cpu)
{
    double v[64];
    if (reps > 64)
        reps = 64;
    if (run_texts(r))
        return -1;
    for (int i = 0; i < reps; i++) {
        struct timespec a, b;
        clockid_t id = cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC;
        clock_gettime(id, &a);
        if (run_texts(r))
            return -1;
        clock_gettime(id, &b);
        v[i] = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    }
    return bench_median(v, reps);
}

/* The rows of one thread count. */
static void packed_rows(const hs_model *m, const char *name, int reps, int quick, int threads)
{
    static const int lens[] = {32, 64, 128}, budgets[] = {256, 512, 1024};
    const hs_model_config *c = hs_model_config_of(m);
    int n_lens = quick ? 1 : 3, k = quick ? 4 : PACK_TEXTS;
    printf("\n%s: corpus texts a second, recorded forward (every map kept), %d thread%s (%s "
           "time); %d texts of n tokens, one a pass against packs of up to B tokens\n", name,
           threads, threads > 1 ? "s" : "", threads > 1 ? "wall" : "CPU", k);
    printf("%-12s %5s %4s %14s", "model", "n", "thr", "1 a pass");
    for (int b = 0; b < 3; b++)
        printf("   B=%-4d texts/s  ratio", budgets[b]);
    printf("\n");
    for (int li = 0; li < n_lens && lens[li] <= c->n_ctx; li++) {
        int len = lens[li];
        pack_run r = {m, malloc((size_t)k * (size_t)len * sizeof(int32_t)), len, k, 1,
                      calloc((size_t)k, sizeof(hs_trace *)), 0};
        hs_error err = {{0}};
        int ok = r.ids && r.traces;
        for (size_t i = 0; ok && i < (size_t)k * (size_t)len; i++)
            r.ids[i] = (int32_t)((1000 + 7919 * i) % (size_t)(c->vocab_size - 100)) + 10;
        for (int t = 0; ok && t < k; t++)
            ok = hs_trace_new(m, len, &r.traces[t], &err) == HS_OK;
        double one = ok ? median_run(&r, reps, threads == 1) : -1;
        printf("%-12.12s %5d %4d %8.1f texts/s", name, len, threads, one > 0 ? k / one : 0.0);
        for (int b = 0; b < 3 && ok && one > 0; b++) {
            r.per = budgets[b] / len < PACK_TEXTS ? budgets[b] / len : PACK_TEXTS;
            double s = r.per > 1 ? median_run(&r, reps, threads == 1) : -1;
            if (s > 0)
                printf("   %14.1f %6.2f", k / s, one / s);
            else
                printf("   %14s %6s", "-", "-");
        }
        printf("\n");
        fflush(stdout);
        for (int t = 0; r.traces && t < k; t++)
            hs_trace_free(r.traces[t]);
        free(r.traces);
        free(r.ids);
    }
}

void bench_packed_rows(const hs_model *m, const char *name, int reps, int quick, const int *thr,
                       int n_thr)
{
    for (int i = 0; i < n_thr; i++) {
        hs_set_threads(thr[i]);
        packed_rows(m, name, reps, quick, thr[i]);
    }
    hs_set_threads(0);
}
