/* headscope benchmark: forward pass with every attention map recorded, against the sgemm
 * throughput measured on the same machine in the same run, against OpenBLAS alone on the
 * same pass's projections and against the same forward pass in PyTorch
 * (bench/torch_forward.py), at 1 thread and at all threads.
 *
 *   build/hs-bench [MODEL_DIR...] [--family MODEL_DIR...] [--stored GGUF...] [--reps N] [--quick]
 *                  [--headscope PATH] [--torch SCRIPT] [--python PATH] [--no-torch]
 *                  [--threads LIST] [--breakdown] [--forward-only] [--packed-only]
 *                  [--patch-only] [--t5 DIR] [--stored-only] [--big GGUF]
 *
 * The header measures the machine's float32 and 8-bit arithmetic roofs (bench/roof.c); the
 * forward table and the stored table hold times against them.
 * MODEL_DIR defaults to build/bench/gpt2-small (`make bench` passes it and
 * build/bench/bert-base). The analyze, memory and corpus rows use the first model.
 * --family: models of the other families (`make bench` passes roberta-base,
 * distilbert-base, pythia-160m, tinyllama-1.1b, falcon7b-2L and starcoder-1b),
 * run at n = 128 and 512 only, each with
 * the peak memory of `headscope attn --ids` on 512 ids beside its F32 weights.
 * --stored: GGUF files of one model in several storage types, run with their layers in their
 * stored type, converted at load and converted in every pass (bench/stored.c; llama.cpp's
 * llama-bench beside them when LLAMACPP is set). Options after --family or --stored belong
 * to the list they follow until the next one. --stored-only: only the --stored files' table
 * against llama.cpp (medians of --reps runs at 1 thread and all threads), then --big.
 * --big GGUF: one recorded forward at n = 128 of a large file with stored layers, its time
 * and peak RSS (`make bench-8b`: the Llama-3-8B shape at Q4_K_M).
 * --quick: 1 repetition, n = 128 only, no analyze, memory or ablation rows (for tests).
 * --breakdown: one layer's kernels timed apart (bench/breakdown.c) after each GPT-2/BERT
 * model's rows. --forward-only: the forward table alone. --no-torch: no PyTorch columns.
 * After each GPT-2/BERT model's rows (not with --forward-only), corpus throughput one text a
 * pass against packed passes (bench/packed.c); --packed-only: those rows alone (with
 * --threads, at its first count only).
 * --patch-only: the patching rows (bench/patch_rows.c) alone, on the first model.
 * Prints medians of N repetitions and ratios beside the targets; no pass/fail
 * (docs/bench.md explains the numbers). */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "headscope/forward.h"
#include "headscope/model.h"
#include "headscope/version.h"
#include "model/model_internal.h"
#include "bench.h"

#define MAX_MODELS 8
#define N_SIZES 3
#define MAX_THR 8
#define FAMILY_MAX_N 512 /* --family models: the sizes up to this */

static const int sizes[N_SIZES] = {128, 512, 1024};

double bench_now(void)
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

double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double bench_time_median(int (*run)(void *ctx), void *ctx, int reps)
{
    double times[64];
    reps = reps < 1 ? 1 : reps > 64 ? 64 : reps;
    if (run(ctx))
        return -1;
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        if (run(ctx))
            return -1;
        times[r] = bench_now() - t0;
    }
    return bench_median(times, reps);
}

/* Median GFLOP/s of C(m,n) = A(m,k) B(k,n). */
hs_status bench_load(const char *path, hs_model **m, hs_error *err)
{
    hs_open_opts o = {.weight_memory = HS_WEIGHT_MEMORY_ALL};
    return hs_model_open2(path, &o, m, err);
}

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
        double t0 = bench_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a, k, b, n, 0, c, n);
        t[r] = bench_now() - t0;
    }
    free(a);
    free(b);
    free(c);
    return 2.0 * m * n * k / bench_median(t, reps) / 1e9;
}

/* FLOPs of the projections of one forward pass without the LM head: per layer the Q, K, V
 * projections 2nd(d + 2 n_kv d_head) (6nd² without grouped KV heads), the output
 * projection 2nd², the MLP 4nd·d_ff (6nd·d_ff gated: gate, up and down). */
/* DeepSeek's latent attention and experts (hs_arch.mla_*, moe_*): per layer the fused
 * [q | kv_a] projection 2nd·W, q_b 2n·q_lora·H·d_qk, kv_b 2n·kv_lora·H(nope + d_v), the output
 * 2n·H·d_v·d; a dense MLP 6nd·d_ff, an expert layer's router 2nd·E, its top_k experts and
 * shared ones 6nd·f each (f = moe_ff, shared: n_shared·moe_ff). */
static double deepseek_flops(const hs_model_config *c, int n)
{
    const hs_arch *a = c->arch;
    double d = c->d_model, N = n, H = c->n_head, dqk = a->mla_nope + a->rotary_dims;
    double attn = 2.0 * N * d * hs_qkv_width(c) + 2.0 * N * a->mla_q_lora * H * dqk +
                  2.0 * N * a->mla_kv_lora * H * (a->mla_nope + c->d_head) +
                  2.0 * N * H * c->d_head * d;
    double moe = 2.0 * N * d * a->moe_experts +
                 6.0 * N * d * a->moe_ff * (a->moe_top_k + a->moe_shared);
    double total = 0;
    for (int l = 0; l < c->n_layer; l++)
        total += attn + (hs_moe_layer(c, l) ? moe : 6.0 * N * d * c->d_ff);
    return total;
}

double bench_projection_flops(const hs_model_config *c, int n)
{
    double d = c->d_model, f = c->d_ff, N = n, kv = (double)c->n_kv_head * c->d_head;
    double mlp = (c->gated ? 6.0 : 4.0) * N * d * f;
    if (c->arch->mla_kv_lora > 0)
        return deepseek_flops(c, n);
    return c->n_layer * (2.0 * N * d * (d + 2.0 * kv) + 2.0 * N * d * d + mlp);
}

/* The projections and scores and context, 4n²d a layer (the whole n × n); latent
 * attention 2n²·H(d_qk + d_v). */
static double forward_flops(const hs_model_config *c, int n)
{
    const hs_arch *a = c->arch;
    double qk_v = a->mla_kv_lora > 0
                      ? (double)c->n_head * (a->mla_nope + a->rotary_dims + c->d_head) / 2.0
                      : (double)c->d_model;
    return bench_projection_flops(c, n) + c->n_layer * 4.0 * n * (double)n * qk_v;
}

typedef struct blas_run {
    const hs_model *m;
    int n;
    float *x, *y;
} blas_run;

static int blas_once(void *ctx)
{
    blas_run *b = ctx;
    const hs_model_config *c = hs_model_config_of(b->m);
    int n = b->n, d = c->d_model, W = hs_qkv_width(c), F = hs_ff_width(c);
    for (int l = 0; l < c->n_layer; l++) {
        const hs_layer *L = &b->m->layers[l];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, W, d, 1, b->x, d, L->w_qkv, W,
                    0, b->y, W);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, d, d, 1, b->x, d, L->w_o, d, 0,
                    b->y, d);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, F, d, 1, b->x, d, L->w_fc, F, 0,
                    b->y, F);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, d, c->d_ff, 1, b->x, c->d_ff,
                    L->w_proj, d, 0, b->y, d);
    }
    return 0;
}

/* GFLOP/s of OpenBLAS alone on the pass's projections: every layer's Q/K/V, output, MLP-in
 * and MLP-out products of n rows as one cblas_sgemm each, on the model's own float32
 * weights (read from memory as a pass reads them), OpenBLAS's own threads: what handing each
 * product to the library whole gives. -1 where some layer's float32 weights are not held
 * between passes (converted layers taking turns within the weight memory,
 * docs/bench.md#weight-memory). */
static double blas_alone_gflops(const hs_model *m, int n, int reps)
{
    const hs_model_config *c = hs_model_config_of(m);
    if (c->arch->mla_kv_lora > 0) /* latent attention's products are others */
        return -1;
    for (int l = 0; l < c->n_layer; l++) {
        const hs_layer *L = &m->layers[l];
        if (!L->w_qkv || !L->w_o || !L->w_fc || !L->w_proj)
            return -1;
    }
    size_t wide = (size_t)(hs_qkv_width(c) > hs_ff_width(c) ? hs_qkv_width(c) : hs_ff_width(c));
    wide = wide > (size_t)c->d_ff ? wide : (size_t)c->d_ff;
    blas_run b = {.m = m, .n = n, .x = malloc((size_t)n * wide * sizeof(float)),
                  .y = malloc((size_t)n * wide * sizeof(float))};
    double med = -1;
    if (b.x && b.y) {
        for (size_t i = 0; i < (size_t)n * wide; i++)
            b.x[i] = (float)(i % 13) * 0.05f - 0.3f;
        med = bench_time_median(blas_once, &b, reps);
    }
    free(b.x);
    free(b.y);
    return med > 0 ? bench_projection_flops(c, n) / med / 1e9 : -1;
}

typedef struct forward_run {
    const hs_model *m;
    const int32_t *ids;
    int n;
    hs_forward_opts o;
    hs_forward_ws *ws;
    hs_error err;
} forward_run;

static int forward_once(void *ctx)
{
    forward_run *f = ctx;
    return hs_forward(f->m, f->ids, NULL, f->n, &f->o, f->ws, &f->err) != HS_OK;
}

/* Median seconds of hs_forward on n tokens recording every map (hs_trace), or -1. */
static double forward_median(const hs_model *m, int n, int reps)
{
    const hs_model_config *c = hs_model_config_of(m);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)((i * 7919) % c->vocab_size);
    hs_trace *t = NULL;
    forward_run f = {.m = m, .ids = ids, .n = n, .o = {.on_attn = hs_trace_observe}};
    double med = -1;
    if (!hs_trace_new(m, n, &t, &f.err) && !hs_forward_ws_new(m, n, &f.ws, &f.err)) {
        f.o.user = t;
        med = bench_time_median(forward_once, &f, reps);
    }
    if (med < 0)
        fprintf(stderr, "hs-bench: %s\n", f.err.msg);
    hs_forward_ws_free(f.ws);
    hs_trace_free(t);
    free(ids);
    return med;
}

/* Runs the PyTorch script on the model; fills tt[size][thread] with its medians (0 where it
 * printed none). Returns 1 with torch rows, 0 without (the reason printed). */
static int torch_medians(const char *python, const char *script, const char *model,
                         const int *thr, int n_thr, int n_sizes, int reps,
                         double tt[N_SIZES][MAX_THR])
{
    char cmd[1024], sz[64] = "", th[64] = "", line[512], last[512] = "";
    for (int s = 0; s < n_sizes; s++)
        snprintf(sz + strlen(sz), sizeof sz - strlen(sz), "%s%d", s ? "," : "", sizes[s]);
    for (int i = 0; i < n_thr; i++)
        snprintf(th + strlen(th), sizeof th - strlen(th), "%s%d", i ? "," : "", thr[i]);
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' --sizes %s --threads %s --reps %d 2>&1", python,
             script, model, sz, th, reps);
    memset(tt, 0, sizeof(double) * N_SIZES * MAX_THR);
    FILE *p = popen(cmd, "r");
    if (!p) {
        printf("  PyTorch: cannot run %s\n", python);
        return 0;
    }
    static int said_version;
    int rows = 0, notorch = 0;
    while (fgets(line, sizeof line, p)) {
        char fam[32];
        int n, t;
        double sec;
        if (sscanf(line, "row %31s %d %d %lf", fam, &n, &t, &sec) == 4) {
            for (int s = 0; s < N_SIZES; s++)
                for (int i = 0; i < n_thr; i++)
                    if (sizes[s] == n && thr[i] == t)
                        tt[s][i] = sec, rows++;
        } else if (!strncmp(line, "notorch", 7)) {
            notorch = 1;
        } else if (!strncmp(line, "torch ", 6) && !said_version) {
            said_version = 1;
            line[strcspn(line, "\n")] = 0;
            printf("  PyTorch: %s, eager, float32, no_grad, every layer's probabilities kept\n",
                   line + 6);
        }
        snprintf(last, sizeof last, "%s", line);
    }
    int rc = pclose(p);
    if (notorch) {
        if (!said_version++)
            printf("  PyTorch: not available (python3-torch is not installed; "
                   "apt-get install python3-torch); torch columns left empty\n");
        return 0;
    }
    if (rc != 0 || rows == 0) {
        last[strcspn(last, "\n")] = 0;
        printf("  PyTorch: %s failed (status %d): %s\n", script, rc, last);
        return rows > 0;
    }
    return 1;
}

static const char *base_name(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    const char *s = path + n;
    while (s > path && s[-1] != '/')
        s--;
    return s;
}

/* --stored-only: the llama.cpp table of the --stored files (no modes table), at 1 thread and
 * all threads, reps runs each; the --big row after it. */
static int stored_only_main(const char *headscope, const char *stored[], int n_stored,
                            const char *big, int reps)
{
    int all = hs_threads_available(), thr[2] = {1, all};
    if (n_stored) {
        bench_qgemm_rows(reps);
        bench_stored_rows(headscope, stored, n_stored, thr, all > 1 ? 2 : 1, reps, 0);
    }
    if (big)
        bench_big_row(headscope, big, all);
    return fflush(stdout) != 0 || ferror(stdout) ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *paths[MAX_MODELS];
    int family[MAX_MODELS] = {0}; /* 1: a --family model (n <= FAMILY_MAX_N, memory row) */
    const char *stored[MAX_MODELS]; /* --stored GGUF files (bench/stored.c) */
    int n_stored = 0, in_stored = 0, stored_only = 0;
    const char *big = NULL; /* --big GGUF: the 8B row (bench/stored.c) */
    int n_models = 0, reps = 5, quick = 0, in_family = 0, breakdown = 0, fwd_only = 0;
    int packed_only = 0;
    int patch_only = 0;
    const char *headscope = NULL; /* the command, for the memory and corpus rows */
    const char *script = "bench/torch_forward.py", *python = "/usr/bin/python3";
    const char *thread_list = NULL; /* --threads 1,4,16 (default: 1 and every core) */
    const char *t5 = NULL;          /* --t5 DIR: the encoder-decoder row (bench/t5_row.c) */
    hs_blas_reexec(argv); /* the kernels headscope's CLI runs with (docs/bench.md) */
    setvbuf(stdout, NULL, _IOLBF, 0); /* rows reach a file as they come (a run cut short) */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--headscope") && i + 1 < argc)
            headscope = argv[++i];
        else if (!strcmp(argv[i], "--torch") && i + 1 < argc)
            script = argv[++i];
        else if (!strcmp(argv[i], "--python") && i + 1 < argc)
            python = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            thread_list = argv[++i];
        else if (!strcmp(argv[i], "--t5") && i + 1 < argc)
            t5 = argv[++i];
        else if (!strcmp(argv[i], "--forward-only"))
            fwd_only = 1;
        else if (!strcmp(argv[i], "--packed-only"))
            packed_only = 1;
        else if (!strcmp(argv[i], "--patch-only"))
            patch_only = 1;
        else if (!strcmp(argv[i], "--no-torch"))
            script = NULL;
        else if (!strcmp(argv[i], "--breakdown"))
            breakdown = 1;
        else if (!strcmp(argv[i], "--family"))
            in_family = 1;
        else if (!strcmp(argv[i], "--stored"))
            in_stored = 1;
        else if (!strcmp(argv[i], "--stored-only"))
            stored_only = 1;
        else if (!strcmp(argv[i], "--big") && i + 1 < argc)
            big = argv[++i];
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: hs-bench [MODEL_DIR...] [--family MODEL_DIR...] [--stored GGUF...] [--reps N] [--quick]\n"
                   "                [--headscope PATH] [--torch SCRIPT] [--python PATH] [--patch-only] "
                   "[--no-torch]\n"
                   "                [--threads LIST] [--breakdown] [--forward-only] [--t5 DIR]\n"
                   "                [--packed-only] [--stored-only] [--big GGUF]\n"
                   "The engine benchmark: sgemm reference, the forward pass recording every map "
                   "against\nPyTorch, analyze in forward-pass equivalents, peak memory, corpus "
                   "throughput.\ndocs/bench.md explains every option and number.\n");
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            fprintf(stderr, "hs-bench: unknown option '%s' (hs-bench --help)\n", argv[i]);
            return 2;
        } else if (in_stored) {
            if (n_stored < MAX_MODELS)
                stored[n_stored++] = argv[i];
        } else if (n_models < MAX_MODELS)
            family[n_models] = in_family, paths[n_models++] = argv[i];
    }
    if (stored_only && headscope) /* the stored rows alone (and the big row when given) */
        return stored_only_main(headscope, stored, n_stored, big, reps);
    if (!n_models || family[0]) { /* the first model is the GPT-2 the later rows use */
        fprintf(stderr, "hs-bench: give a GPT-2 or BERT model before --family\n");
        if (n_models)
            return 2;
        paths[n_models++] = "build/bench/gpt2-small";
    }
    if (quick)
        reps = 1;
    if (reps < 1 || reps > 64)
        reps = 5;
    int n_sizes = quick ? 1 : N_SIZES;
    int all = hs_threads_available();
    int thr[MAX_THR] = {1, all}, n_thr = all > 1 ? 2 : 1;
    if (thread_list) { /* increasing counts, each 1..all; all cores added at the end */
        n_thr = 0;
        for (const char *q = thread_list; *q && n_thr < MAX_THR;) {
            char *end;
            long t = strtol(q, &end, 10);
            if (end == q || t < 1 || t > all || (n_thr && t <= thr[n_thr - 1])) {
                fprintf(stderr, "hs-bench: --threads wants increasing counts from 1 to %d, "
                        "comma-separated\n", all);
                return 2;
            }
            thr[n_thr++] = (int)t;
            q = *end == ',' ? end + 1 : end;
        }
        if (thr[n_thr - 1] != all) /* the later rows' unit is the all-threads forward */
            thr[n_thr < MAX_THR ? n_thr++ : n_thr - 1] = all;
    }

    for (int mi = 0; packed_only && mi < n_models; mi++) {
        hs_error err = {{0}};
        hs_model *m = NULL;
        if (!family[mi] && bench_load(paths[mi], &m, &err) != HS_OK) {
            fprintf(stderr, "hs-bench: %s\n", err.msg);
            return 1;
        }
        if (m)
            bench_packed_rows(m, base_name(paths[mi]), reps, quick, thr,
                              thread_list ? 1 : n_thr); /* --threads: its first count */
        hs_model_free(m);
    }
    if (packed_only)
        return fflush(stdout) != 0 || ferror(stdout);
    if (patch_only) { /* the patching rows alone, on the first model (--threads: its first) */
        hs_error err = {{0}};
        hs_model *m = NULL;
        if (bench_load(paths[0], &m, &err) != HS_OK) {
            fprintf(stderr, "hs-bench: %s\n", err.msg);
            return 1;
        }
        bench_patch_rows(m, reps, thread_list ? thr[0] : 0);
        hs_model_free(m);
        return fflush(stdout) != 0 || ferror(stdout);
    }
    printf("headscope bench — %d reps, medians; %d cores online; OpenBLAS kernels %s", reps, all,
           hs_blas_corename());
    if (hs_blas_detected())
        printf(" (OpenBLAS chose %s; OPENBLAS_CORETYPE set by headscope)", hs_blas_detected());
    printf(", threading %s\n", hs_blas_threading());
    double peak[MAX_THR];
    for (int i = 0; i < n_thr; i++) {
        hs_set_threads(thr[i]);
        peak[i] = sgemm_gflops(1024, 1024, 1024, reps);
        printf("sgemm 1024x1024x1024, %d thread%s: %7.1f GFLOP/s (reference throughput)\n",
               thr[i], thr[i] > 1 ? "s" : " ", peak[i]);
    }
    double roof[MAX_THR];
    bench_print_roofs(thr, n_thr, roof);
    for (int i = 0; i < n_thr; i++) /* no GEMM outruns the FMA units: a load in the run */
        if (roof[i] > 0 && peak[i] > roof[i])
            printf("  note: sgemm on %d thread%s ran faster than the roof measured: the machine "
                   "was busy while the roof was timed; read %% roof with care\n", thr[i],
                   thr[i] > 1 ? "s" : "");
    printf("\nforward pass recording every attention map (no LM head); targets: >= 70%% of "
           "sgemm at equal threads, torch/headscope >= 2.0\n"
           "  BLAS GF: OpenBLAS alone on the same pass's projections, one call a product "
           "(GFLOP/s); %% roof: of the float32 FMA roof;\n"
           "  torch/roof: torch's time over the pass's FLOPs at that roof, the most torch/hs "
           "any float32 pass can reach\n");

    hs_model *first = NULL;
    double fwd128 = 0; /* first model, n = 128, all threads: the unit of the rows below */
    for (int mi = 0; mi < n_models; mi++) {
        hs_error err = {{0}};
        hs_model *m = NULL;
        if (bench_load(paths[mi], &m, &err) != HS_OK) {
            fprintf(stderr, "hs-bench: %s\n", err.msg);
            return 1;
        }
        const hs_model_config *c = hs_model_config_of(m);
        double hs[N_SIZES][MAX_THR] = {{0}}, tt[N_SIZES][MAX_THR], blas[N_SIZES][MAX_THR];
        int max_n = family[mi] && FAMILY_MAX_N < c->n_ctx ? FAMILY_MAX_N : c->n_ctx;
        int m_sizes = 0; /* the sizes this model runs */
        while (m_sizes < n_sizes && sizes[m_sizes] <= max_n)
            m_sizes++;
        for (int s = 0; s < m_sizes; s++)
            for (int i = 0; i < n_thr; i++) {
                hs_set_threads(thr[i]);
                hs[s][i] = forward_median(m, sizes[s], reps);
                if (hs[s][i] < 0)
                    return 1;
                blas[s][i] = blas_alone_gflops(m, sizes[s], reps);
            }
        hs_set_threads(0);
        int have_torch = script && torch_medians(python, script, paths[mi], thr, n_thr, m_sizes,
                                                 reps, tt);
        if (mi == 0)
            printf("%-12s %5s %4s %10s %8s %8s %7s %8s %10s %9s %10s %9s\n", "model", "n",
                   "thr", "headscope", "GFLOP/s", "% sgemm", "% roof", "BLAS GF", "torch",
                   "torch/hs", "torch/roof", "maps MB");
        for (int s = 0; s < m_sizes; s++)
            for (int i = 0; i < n_thr; i++) {
                int n = sizes[s];
                double gf = forward_flops(c, n) / hs[s][i] / 1e9;
                printf("%-12.12s %5d %4d %8.1f ms %8.1f %7.0f%% ", base_name(paths[mi]), n,
                       thr[i], hs[s][i] * 1e3, gf, 100.0 * gf / peak[i]);
                if (roof[i] > 0)
                    printf("%6.0f%% ", 100.0 * gf / roof[i]);
                else
                    printf("%7s ", "-");
                if (blas[s][i] > 0)
                    printf("%8.1f ", blas[s][i]);
                else
                    printf("%8s ", "-");
                double floor_s = roof[i] > 0 ? forward_flops(c, n) / (roof[i] * 1e9) : 0;
                if (have_torch && tt[s][i] > 0)
                    printf("%7.1f ms %9.2f", tt[s][i] * 1e3, tt[s][i] / hs[s][i]);
                else
                    printf("%10s %9s", "-", "-");
                if (have_torch && tt[s][i] > 0 && floor_s > 0)
                    printf(" %10.2f", tt[s][i] / floor_s);
                else
                    printf(" %10s", "-");
                printf(" %9.1f\n", (double)c->n_layer * c->n_head * n * n * 4 / 1e6);
            }
        if (breakdown && !family[mi])
            bench_breakdown(c, base_name(paths[mi]), sizes, m_sizes, thr, n_thr, reps);
        if (!family[mi] && !fwd_only)
            bench_packed_rows(m, base_name(paths[mi]), reps, quick, thr, n_thr);
        if (family[mi] && headscope && !quick)
            bench_family_memory_row(headscope, paths[mi], m, FAMILY_MAX_N);
        fflush(stdout);
        if (mi == 0) {
            first = m;
            fwd128 = hs[0][n_thr - 1];
        } else {
            hs_model_free(m);
        }
    }
    if (!quick && !fwd_only)
        bench_analyze_rows(first, fwd128);
    if (!quick && !fwd_only)
        bench_patch_rows(first, reps, 0);
    if (headscope && !quick && !fwd_only)
        bench_memory_rows(headscope, paths[0], first);
    if (headscope && !fwd_only && hs_model_config_of(first)->causal)
        bench_corpus_rows(headscope, paths[0], quick ? 2 : 10, quick ? 0 : 1, fwd128);
    hs_model_free(first);
    if (n_stored && !quick)
        bench_qgemm_rows(reps > 3 ? 3 : reps);
    if (headscope && n_stored && !quick)
        bench_stored_rows(headscope, stored, n_stored, thr, n_thr, reps > 3 ? 3 : reps, 1);
    if (headscope && big)
        bench_big_row(headscope, big, all);
    if (t5 && !quick)
        bench_t5_rows(t5, reps);
    if (fflush(stdout) != 0 || ferror(stdout))
        return 1;
    return 0;
}
