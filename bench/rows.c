/* The rows of `make bench` below the forward table: one analyze with the defaults in
 * forward-pass equivalents, peak memory of the CLI, and corpus throughput of the CLI. */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "headscope/forward.h"
#include "headscope/importance.h"
#include "headscope/npy.h"
#include "headscope/report.h"
#include "bench.h"
#include "core/core.h"

static void remove_dir(const char *dir)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "hs-bench: could not remove %s\n", dir);
}

typedef struct loss_run {
    hs_loss_eval *ev;
    double loss;
    hs_error err;
} loss_run;

static int loss_once(void *ctx)
{
    loss_run *r = ctx;
    return hs_loss_eval_run(r->ev, NULL, &r->loss, &r->err) != HS_OK;
}

/* Median seconds of one whole loss pass on ids (n tokens, all threads): the forward pass, the
 * LM head on every row and the next-token (or MLM) loss, from the embeddings every time (no
 * cached prefix): what `analyze` counts as one of its forward passes. -1 on failure. */
static double loss_pass_median(const hs_model *m, const int32_t *ids, int n, int reps)
{
    const hs_model_config *c = hs_model_config_of(m);
    hs_loss_input li = {.ids = ids, .n = n, .no_cache = 1,
                        .kind = c->has_lm_head && c->causal ? HS_LOSS_LM : HS_LOSS_REPR};
    loss_run r = {0};
    double med = -1;
    if (!hs_loss_eval_new(m, &li, &r.ev, &r.err))
        med = bench_time_median(loss_once, &r, reps);
    if (med < 0)
        fprintf(stderr, "hs-bench: loss pass: %s\n", r.err.msg);
    hs_loss_eval_free(r.ev);
    return med;
}

void bench_analyze_rows(const hs_model *m, double fwd128)
{
    const hs_model_config *c = hs_model_config_of(m);
    hs_error err = {{0}};
    int n = c->n_ctx < 128 ? c->n_ctx : 128;
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)((i * 7919 + 13) % c->vocab_size);
    hs_analyze_opts ao;
    hs_analyze_opts_default(&ao);
    ao.hash_files = 0;
    hs_analyze_input in = {.ids = ids, .n = n};
    hs_analysis *a = NULL;
    char dir[] = "/tmp/hs-bench-XXXXXX";
    char **files = NULL;
    int n_files = 0;
    double t0 = bench_now();
    if (hs_analyze_run(m, &in, &ao, &a, &err) != HS_OK) {
        fprintf(stderr, "hs-bench: %s\n", err.msg);
        goto done;
    }
    double t_an = bench_now() - t0;
    if (!mkdtemp(dir)) {
        fprintf(stderr, "hs-bench: cannot create a temporary folder\n");
        goto done;
    }
    t0 = bench_now();
    if (hs_pictures_write(a, dir, 64, 0, &files, &n_files, &err) != HS_OK)
        fprintf(stderr, "hs-bench: %s\n", err.msg);
    double t_pic = bench_now() - t0;
    remove_dir(dir);
    for (int i = 0; i < n_files; i++)
        free(files[i]);
    free(files);
    double u = fwd128 > 0 ? fwd128 : a->seconds_forward;
    double lp = loss_pass_median(m, ids, n, 5);
    if (lp <= 0)
        lp = u;
    printf("\nanalyze with the defaults, n = %d, %d heads, all threads (one run), in forward-pass "
           "equivalents:\n  pass = one loss pass, %.1f ms (forward + LM head + loss from the "
           "embeddings, what analyze counts in forward_passes; the engine issue's unit)\n"
           "  fwd  = one recorded forward without the LM head, %.1f ms (the table above)\n",
           n, a->n_heads, lp * 1e3, u * 1e3);
    printf("  whole analysis:                   %8.2f s = %6.1f pass (target <= 150) = %6.1f fwd; "
           "%ld loss passes counted\n", t_an, t_an / lp, t_an / u, a->forward_passes);
    printf("  exact ablation sweep:             %8.2f s = %6.1f pass (target <= 100) = %6.1f fwd; "
           "%d heads\n", a->seconds_ablation, a->seconds_ablation / lp, a->seconds_ablation / u,
           a->n_heads);
    printf("  gradient importance (all heads):  %8.2f s = %6.1f pass = %6.1f fwd\n",
           a->seconds_gradient, a->seconds_gradient / lp, a->seconds_gradient / u);
    printf("  pruning (%s, %d rounds of %d):  %8.2f s = %6.1f pass = %6.1f fwd\n",
           a->prune_method_used == HS_PRUNE_GREEDY ? "greedy" : "gradient",
           a->n_curve ? a->curve[a->n_curve - 1].round + 1 : 0, a->prune_round_heads,
           a->seconds_pruning, a->seconds_pruning / lp, a->seconds_pruning / u);
    const struct { const char *name; double s; } rest[] = {
        {"probe ablation:", a->seconds_probe_ablation},
        {"composition (weights):", a->seconds_composition},
        {"text's recorded pass:", a->seconds_forward},
        {"probe pass:", a->seconds_probe},
        {"rollout and flow:", a->seconds_rollout},
        {"diversity, similarity, clusters:", a->seconds_pairwise}};
    double named = a->seconds_ablation + a->seconds_gradient + a->seconds_pruning;
    for (size_t i = 0; i < sizeof rest / sizeof *rest; i++) {
        printf("  %-34s%8.2f s = %6.1f pass\n", rest[i].name, rest[i].s, rest[i].s / lp);
        named += rest[i].s;
    }
    printf("  %-34s%8.2f s = %6.1f pass\n", "the rest (losses, set-up, metrics):",
           t_an - named, (t_an - named) / lp);
    printf("  pictures (%d PNGs, not in the whole): %5.2f s = %6.1f pass = %6.1f fwd\n", n_files,
           t_pic, t_pic / lp, t_pic / u);
done:
    fflush(stdout);
    hs_analysis_free(a);
    free(ids);
}

/* 1 if this kernel takes the CLI's request for huge pages on advised memory only
 * (hs_thp_advised_only), tried in a child so the bench's own process is left as it is. */
static int thp_advised_only(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(hs_thp_advised_only() == 0 ? 0 : 1);
    int status = 0;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

/* The kernel's transparent-huge-page mode ("always", "madvise", "never"; "?" unknown): with
 * "always", every thread's OpenBLAS buffer takes whole 2 MB pages; and whether the CLI's
 * request above is taken. */
static const char *thp_mode(char *buf, size_t cap)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128] = "";
    int ok = f && fgets(line, sizeof line, f);
    if (f)
        fclose(f);
    char *a = ok ? strchr(line, '[') : NULL, *b = a ? strchr(a, ']') : NULL;
    snprintf(buf, cap, "%.*s%s", a && b ? (int)(b - a - 1) : 1, a && b ? a + 1 : "?",
             thp_advised_only() ? ", the CLI's on advised memory only"
                                : ", the CLI's everywhere the mode says (kernel before 6.18)");
    return buf;
}

/* Peak RSS of `attn` and of `analyze` (maps, metrics, report; no ablation, gradient or
 * pictures) at n = 1024 tokens (or the context), beside the F32 size of the weights; analyze
 * again on 2 threads beside it (the difference is per thread: OpenBLAS's buffers). */
void bench_memory_rows(const char *headscope, const char *model, const hs_model *m)
{
    const hs_model_config *c = hs_model_config_of(m);
    char dir[] = "/tmp/hs-bench-mem-XXXXXX";
    if (!mkdtemp(dir))
        return;
    char text[96], npy[96], out[96];
    snprintf(text, sizeof text, "%s/text.txt", dir);
    snprintf(npy, sizeof npy, "%s/a.npy", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    int n = c->n_ctx < 1024 ? c->n_ctx : 1024;
    double f32_mb = (double)hs_model_param_count(m) * 4 / 1048576.0;
    if (bench_write_text(text, 2 * n) == 0) {
        const char *attn[] = {headscope, "attn", model, "--file", text, "--truncate", "-o", npy, NULL};
        const char *an[] = {headscope, "analyze", model, "--file", text, "--truncate", "-o", out, "-q",
                      "--no-ablation", "--no-gradient", "--no-images", "--no-hash", NULL};
        const char *an2[] = {headscope, "analyze", model, "--file", text, "--truncate", "-o", out,
                             "-q", "--no-ablation", "--no-gradient", "--no-images", "--no-hash",
                             "--threads", "2", NULL};
        double ta = 0, tb = 0, t2 = 0;
        double ra = bench_peak_rss_mb(attn, &ta), rb = bench_peak_rss_mb(an, &tb);
        remove_dir(out); /* a rerun into a folder would read the earlier report */
        double r2 = bench_peak_rss_mb(an2, &t2);
        char thp[128];
        printf("\npeak memory, n = %d (F32 weights %.0f MB; one layer's maps %.0f MB; "
               "transparent huge pages: %s):\n", n, f32_mb,
               (double)c->n_head * n * n * 4 / 1048576.0, thp_mode(thp, sizeof thp));
        printf("  attn:                              %8.0f MB in %.1f s (target <= %.0f MB)\n",
               ra, ta, 1.15 * f32_mb + 64);
        printf("  analyze (no ablation/gradient/pictures): %5.0f MB in %.1f s (target <= %.0f MB)\n",
               rb, tb, f32_mb + (double)c->n_head * n * n * 4 / 1048576.0 + 64);
        printf("  the same analyze on 2 threads:           %5.0f MB in %.1f s\n", r2, t2);
    }
    fflush(stdout);
    remove_dir(dir);
}

/* Writes ids (n) as a 1-D '<i4' .npy file; 0 on success. */
static int write_ids(const char *path, const int32_t *ids, int n)
{
    hs_error err = {{0}};
    size_t shape[1] = {(size_t)n}, len = 0;
    unsigned char *bytes = NULL;
    if (hs_npy_encode(ids, HS_NPY_I32, shape, 1, &bytes, &len, &err) != HS_OK)
        return -1;
    FILE *f = fopen(path, "wb");
    int rc = f && fwrite(bytes, 1, len, f) == len ? 0 : -1;
    if (f && fclose(f) != 0)
        rc = -1;
    free(bytes);
    return rc;
}

void bench_family_memory_row(const char *headscope, const char *model, const hs_model *m, int n)
{
    const hs_model_config *c = hs_model_config_of(m);
    char dir[] = "/tmp/hs-bench-fam-XXXXXX";
    if (!mkdtemp(dir))
        return;
    char ids_path[96], npy[96];
    snprintf(ids_path, sizeof ids_path, "%s/ids.npy", dir);
    snprintf(npy, sizeof npy, "%s/a.npy", dir);
    n = c->n_ctx < n ? c->n_ctx : n;
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    for (int i = 0; ids && i < n; i++) /* the forward table's ids */
        ids[i] = (int32_t)((i * 7919) % c->vocab_size);
    double f32_mb = (double)hs_model_param_count(m) * 4 / 1048576.0, t = 0;
    const char *attn[] = {headscope, "attn", model, "--ids", ids_path, "-o", npy, "-q",
                          NULL, NULL, NULL};
    int ok = ids && write_ids(ids_path, ids, n) == 0;
    double r = ok ? bench_peak_rss_mb(attn, &t) : -1;
    if (r < 0)
        printf("  peak memory of attn: not measured (the command failed)\n");
    else
        printf("  peak memory of attn, %d tokens: %.0f MB in %.1f s (F32 weights %.0f MB, one "
               "layer's maps %.0f MB)\n", n, r, t, f32_mb,
               (double)c->n_head * n * n * 4 / 1048576.0);
    /* a checkpoint stored as F16/BF16/quantised: also its layers converted one at a time,
     * again in every pass (docs/architecture.md#memory) */
    size_t conv = hs_model_converted_bytes(m);
    if (ok && conv > 0) {
        attn[8] = "--weight-memory";
        attn[9] = "0";
        r = bench_peak_rss_mb(attn, &t);
        if (r < 0)
            printf("  ... with --weight-memory 0: not measured (the command failed)\n");
        else
            printf("  ... with --weight-memory 0 (one layer of the %.0f MB of float32 layers at a "
                   "time): %.0f MB in %.1f s\n", (double)conv / 1048576.0, r, t);
    }
    fflush(stdout);
    free(ids);
    remove_dir(dir);
}

enum { RUN_ABLATION = 1, RUN_PACKED = 2, RUN_NO_GRADIENT = 4 };

/* Wall time of `headscope analyze MODEL --corpus FILE --max-texts k --max-tokens 128`
 * (RUN_ABLATION: with --corpus-ablation; RUN_PACKED: --pack-tokens 512; RUN_NO_GRADIENT:
 * --no-gradient), or -1 when it failed. */
static double corpus_run(const char *headscope, const char *model, const char *file,
                         const char *out, int k, int how)
{
    char kk[16];
    snprintf(kk, sizeof kk, "%d", k);
    const char *argv[18] = {headscope, "analyze", model, "--corpus", file, "--max-texts", kk,
                            "--max-tokens", "128", "-o", out, "-q", "--no-hash"};
    int a = 13; /* 13 + at most 4 flags + the NULL that ends them */
    if (how & RUN_ABLATION)
        argv[a++] = "--corpus-ablation";
    if (how & RUN_PACKED)
        argv[a++] = "--pack-tokens", argv[a++] = "512";
    if (how & RUN_NO_GRADIENT)
        argv[a++] = "--no-gradient";
    double t = -1;
    if (bench_peak_rss_mb(argv, &t) < 0)
        return -1;
    return t;
}

void bench_corpus_rows(const char *headscope, const char *model, int k, int k_abl, double fwd128)
{
    char dir[] = "/tmp/hs-bench-corpus-XXXXXX";
    if (!mkdtemp(dir))
        return;
    char file[96], out[96];
    snprintf(file, sizeof file, "%s/corpus.txt", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    printf("\ncorpus throughput: headscope analyze --corpus (%d texts of >= 200 words, "
           "--max-tokens 128), all threads, one run each:\n", k);
    if (k < 2 || bench_write_corpus(file, k, 200) != 0) {
        printf("  (could not write the corpus)\n");
        remove_dir(dir);
        return;
    }
    /* One text and k texts: the difference is k - 1 texts without the load, the tokenizer
     * set-up and the report; that fixed part is subtracted from the ablation run too. */
    double t1 = corpus_run(headscope, model, file, out, 1, 0);
    double tk = corpus_run(headscope, model, file, out, k, 0);
    double ta = k_abl > 0 ? corpus_run(headscope, model, file, out, k_abl, RUN_ABLATION) : -1;
    /* the maps' passes packed (--pack-tokens 512: 4 texts a pass) against one text a pass
     * (the default), with the gradient and without it (then half the work is the maps) */
    double tpk = corpus_run(headscope, model, file, out, k, RUN_PACKED);
    double t1ng = corpus_run(headscope, model, file, out, k, RUN_NO_GRADIENT);
    double tng = corpus_run(headscope, model, file, out, k, RUN_NO_GRADIENT | RUN_PACKED);
    if (t1 < 0 || tk < 0) {
        printf("  (headscope analyze --corpus failed)\n");
        remove_dir(dir);
        return;
    }
    double per = (tk - t1) / (k - 1), fixed = t1 - per;
    if (per <= 0 || fixed < 0) /* noise larger than a text: no split */
        fixed = 0, per = tk / k;
    printf("  fixed cost (load, set-up, report):  %6.2f s (1 text took %.2f s)\n", fixed, t1);
    printf("  without ablation:  %2d texts in %6.1f s: %6.2f s/text, %6.3f texts/s, %6.1f tokens/s, "
           "%5.1f fwd/text (target <= 10)\n", k, tk, per, 1 / per, 128 / per, per / fwd128);
    if (tpk > 0 && tng > 0 && t1ng > 0) {
        printf("  packed (--pack-tokens 512) against one text a pass (the default), texts/s: "
               "%.3f / %.3f (%.2fx); --no-gradient: %.3f / %.3f (%.2fx)\n",
               k / (tpk - fixed), k / (tk - fixed), (tk - fixed) / (tpk - fixed),
               k / (tng - fixed), k / (t1ng - fixed), (t1ng - fixed) / (tng - fixed));
    }
    if (ta >= 0) {
        double pa = (ta - fixed) / k_abl;
        printf("  --corpus-ablation: %2d text%s in %6.1f s: %6.2f s/text, %6.3f texts/s, %6.1f tokens/s, "
               "%5.1f fwd/text\n", k_abl, k_abl > 1 ? "s" : " ", ta, pa, 1 / pa, 128 / pa, pa / fwd128);
    } else if (k_abl > 0) {
        printf("  --corpus-ablation: failed\n");
    }
    printf("  (fwd = the median recorded forward pass at n = 128, all threads: %.1f ms)\n",
           fwd128 * 1e3);
    remove_dir(dir);
}
