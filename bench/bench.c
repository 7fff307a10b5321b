/* headscope benchmark: forward pass with every attention map recorded, against the
 * sgemm throughput measured on the same machine in the same run.
 *
 *   build/hs-bench [MODEL_DIR] [--reps N]
 *
 * MODEL_DIR defaults to build/bench/gpt2-small (made by `make bench`). Prints medians of
 * N repetitions and ratios; no pass/fail, numbers only (docs/bench.md explains them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "headscope/forward.h"
#include "headscope/model.h"
#include "headscope/report.h"
#include "rss.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Median GFLOP/s of C(m,n) = A(m,k) B(k,n). */
static double sgemm_gflops(int m, int n, int k, int reps)
{
    float *a = malloc((size_t)m * k * sizeof *a), *b = malloc((size_t)k * n * sizeof *b);
    float *c = malloc((size_t)m * n * sizeof *c);
    for (size_t i = 0; i < (size_t)m * k; i++)
        a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)k * n; i++)
        b[i] = (float)(i % 5) * 0.1f;
    double t[64];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a, k, b, n, 0, c, n);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a, k, b, n, 0, c, n);
        t[r] = now() - t0;
    }
    free(a);
    free(b);
    free(c);
    return 2.0 * m * n * k / median(t, reps) / 1e9;
}

/* FLOPs of one forward pass without the LM head: per layer QKV 6nd², scores and context
 * 4n²d, output projection 2nd², MLP 4nd·d_ff. */
static double forward_flops(const hs_model_config *c, int n)
{
    double d = c->d_model, f = c->d_ff, N = n;
    return c->n_layer * (8.0 * N * d * d + 4.0 * N * N * d + 4.0 * N * d * f);
}

/* Peak RSS of `attn` and of `analyze` (maps, metrics, report; no ablation, gradient or
 * pictures) at n = 1024 tokens (or the context), beside the F32 size of the weights. */
static void memory_rows(const char *headscope, const char *model, const hs_model *m)
{
    const hs_model_config *c = hs_model_config_of(m);
    char dir[] = "/tmp/hs-bench-mem-XXXXXX";
    if (!mkdtemp(dir))
        return;
    char text[96], npy[96], out[96], cmd[160];
    snprintf(text, sizeof text, "%s/text.txt", dir);
    snprintf(npy, sizeof npy, "%s/a.npy", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    int n = c->n_ctx < 1024 ? c->n_ctx : 1024;
    double f32_mb = (double)hs_model_param_count(m) * 4 / 1048576.0;
    if (bench_write_text(text, 2 * n) == 0) {
        const char *attn[] = {headscope, "attn", model, "--file", text, "--truncate", "-o", npy, NULL};
        const char *an[] = {headscope, "analyze", model, "--file", text, "--truncate", "-o", out, "-q",
                      "--no-ablation", "--no-gradient", "--no-images", "--no-hash", NULL};
        double ta = 0, tb = 0;
        double ra = bench_peak_rss_mb(attn, &ta), rb = bench_peak_rss_mb(an, &tb);
        printf("\npeak memory, n = %d (F32 weights %.0f MB; one layer's maps %.0f MB):\n", n,
               f32_mb, (double)c->n_head * n * n * 4 / 1048576.0);
        printf("  attn:                              %8.0f MB in %.1f s (target <= %.0f MB)\n",
               ra, ta, 1.15 * f32_mb + 64);
        printf("  analyze (no ablation/gradient/pictures): %5.0f MB in %.1f s (target <= %.0f MB)\n",
               rb, tb, f32_mb + (double)c->n_head * n * n * 4 / 1048576.0 + 64);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "hs-bench: could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
    const char *path = "build/bench/gpt2-small";
    int reps = 5;
    const char *headscope = NULL; /* the command, for the memory rows */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--headscope") && i + 1 < argc)
            headscope = argv[++i];
        else
            path = argv[i];
    }
    if (reps < 1 || reps > 64)
        reps = 5;
    hs_error err = {{0}};
    hs_model *m = NULL;
    if (hs_model_load(path, &m, &err) != HS_OK) {
        fprintf(stderr, "hs-bench: %s\n", err.msg);
        return 1;
    }
    const hs_model_config *c = hs_model_config_of(m);
    printf("headscope bench — model %s (%s, %d layers x %d heads, d=%d), %d reps, medians\n",
           path, hs_family_name(c->family), c->n_layer, c->n_head, c->d_model, reps);
    printf("threads: %d of %d cores; OpenBLAS kernels: %s\n", hs_threads(),
           hs_threads_available(), hs_blas_corename());
    double peak = sgemm_gflops(1024, 1024, 1024, reps);
    printf("sgemm 1024x1024x1024: %.1f GFLOP/s (reference throughput)\n\n", peak);
    printf("%6s %12s %10s %10s %12s %14s\n", "n", "forward ms", "GFLOP/s", "vs sgemm",
           "maps MB", "mlp-shape sgemm");
    static const int sizes[] = {128, 512, 1024};
    double fwd_first = 0; /* median forward at the first size: the unit of the analyze block */
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        if (n > c->n_ctx)
            continue;
        int32_t *ids = malloc((size_t)n * sizeof *ids);
        for (int i = 0; i < n; i++)
            ids[i] = (int32_t)((i * 7919) % c->vocab_size);
        hs_trace *t = NULL;
        hs_forward_ws *ws = NULL;
        if (hs_trace_new(m, n, &t, &err) || hs_forward_ws_new(m, n, &ws, &err)) {
            fprintf(stderr, "hs-bench: %s\n", err.msg);
            return 1;
        }
        hs_forward_opts o = {.on_attn = hs_trace_observe, .user = t};
        double times[64];
        hs_forward(m, ids, NULL, n, &o, ws, &err); /* warm-up */
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            if (hs_forward(m, ids, NULL, n, &o, ws, &err)) {
                fprintf(stderr, "hs-bench: %s\n", err.msg);
                return 1;
            }
            times[r] = now() - t0;
        }
        double med = median(times, reps);
        if (fwd_first == 0)
            fwd_first = med;
        double gf = forward_flops(c, n) / med / 1e9;
        double mlp = sgemm_gflops(n, c->d_ff, c->d_model, reps);
        printf("%6d %12.1f %10.1f %9.0f%% %12.1f %10.1f GF/s\n", n, med * 1e3, gf,
               100.0 * gf / peak, (double)c->n_layer * c->n_head * n * n * 4 / 1e6, mlp);
        hs_forward_ws_free(ws);
        hs_trace_free(t);
        free(ids);
    }
    /* analyze at n = 128 with the defaults (ablation sweep, gradient importance, Michel
     * pruning rounds) and the pictures, in forward-pass equivalents (the median forward pass
     * above, every map recorded) */
    int n = c->n_ctx < 128 ? c->n_ctx : 128;
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)((i * 7919 + 13) % c->vocab_size);
    hs_analyze_opts ao;
    hs_analyze_opts_default(&ao);
    ao.hash_files = 0;
    hs_analyze_input in = {.ids = ids, .n = n};
    hs_analysis *a = NULL;
    double t0 = now();
    if (hs_analyze_run(m, &in, &ao, &a, &err) != HS_OK) {
        fprintf(stderr, "hs-bench: %s\n", err.msg);
        return 1;
    }
    double t_an = now() - t0;
    char dir[] = "/tmp/hs-bench-XXXXXX";
    char **files = NULL;
    int n_files = 0;
    if (!mkdtemp(dir)) {
        fprintf(stderr, "hs-bench: cannot create a temporary folder\n");
        return 1;
    }
    t0 = now();
    if (hs_pictures_write(a, dir, 64, &files, &n_files, &err) != HS_OK) {
        fprintf(stderr, "hs-bench: %s\n", err.msg);
        return 1;
    }
    double t_pic = now() - t0;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "hs-bench: could not remove %s\n", dir);
    for (int i = 0; i < n_files; i++)
        free(files[i]);
    free(files);
    double u = fwd_first > 0 ? fwd_first : a->seconds_forward;
    printf("\nanalyze with the defaults, n = %d, %d heads (one run), in forward-pass "
           "equivalents (%.1f ms):\n", n, a->n_heads, u * 1e3);
    printf("  whole analysis:                   %8.2f s = %6.1f fwd (target <= 150), %ld loss passes\n",
           t_an, t_an / u, a->forward_passes);
    printf("  exact ablation sweep:             %8.2f s = %6.1f fwd (target <= 100; %d loss passes "
           "with logits)\n", a->seconds_ablation, a->seconds_ablation / u, a->n_heads);
    printf("  gradient importance (all heads):  %8.2f s = %6.1f fwd\n", a->seconds_gradient,
           a->seconds_gradient / u);
    printf("  pruning (%s, %d rounds of %d):  %8.2f s = %6.1f fwd\n",
           a->prune_method_used == HS_PRUNE_GREEDY ? "greedy" : "gradient",
           a->n_curve ? a->curve[a->n_curve - 1].round + 1 : 0, a->prune_round_heads,
           a->seconds_pruning, a->seconds_pruning / u);
    printf("  pictures (%d PNGs):              %8.2f s = %6.1f fwd\n", n_files, t_pic, t_pic / u);
    hs_analysis_free(a);
    free(ids);
    if (headscope)
        memory_rows(headscope, path, m);
    hs_model_free(m);
    return 0;
}
