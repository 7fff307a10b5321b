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

/* The thread counts the tables run at, with each one's sgemm and float32 roof GFLOP/s. */
typedef struct bench_threads {
    int thr[MAX_THR], n;
    double peak[MAX_THR], roof[MAX_THR];
} bench_threads;

/* One model's forward-table measurements, [size][thread count]. */
typedef struct forward_table {
    int m_sizes;                   /* the sizes this model runs */
    double hs[N_SIZES][MAX_THR];   /* hs_forward's median seconds */
    double blas[N_SIZES][MAX_THR]; /* OpenBLAS alone on the projections, GFLOP/s (-1: none) */
    double tt[N_SIZES][MAX_THR];   /* PyTorch's median seconds (0: none) */
    int have_torch;
} forward_table;

/* --threads LIST into t: increasing counts, each 1..all; all cores added at the end. 0, or
 * 2 with the message printed. */
static int parse_threads(const char *list, int all, bench_threads *t)
{
    t->n = 0;
    for (const char *q = list; *q && t->n < MAX_THR;) {
        char *end;
        long n = strtol(q, &end, 10);
        if (end == q || n < 1 || n > all || (t->n && n <= t->thr[t->n - 1])) {
            fprintf(stderr, "hs-bench: --threads wants increasing counts from 1 to %d, "
                    "comma-separated\n", all);
            return 2;
        }
        t->thr[t->n++] = (int)n;
        q = *end == ',' ? end + 1 : end;
    }
    if (t->thr[t->n - 1] != all) /* the later rows' unit is the all-threads forward */
        t->thr[t->n < MAX_THR ? t->n++ : t->n - 1] = all;
    return 0;
}

/* --packed-only: the packed rows of each GPT-2/BERT model (--threads: at its first count). */
static int packed_only_main(const bench_args *o, const bench_threads *t)
{
    for (int mi = 0; mi < o->n_models; mi++) {
        hs_error err = {{0}};
        hs_model *m = NULL;
        if (!o->family[mi] && bench_load(o->paths[mi], &m, &err) != HS_OK) {
            fprintf(stderr, "hs-bench: %s\n", err.msg);
            return 1;
        }
        if (m)
            bench_packed_rows(m, base_name(o->paths[mi]), o->reps, o->quick, t->thr,
                              o->thread_list ? 1 : t->n); /* --threads: its first count */
        hs_model_free(m);
    }
    return fflush(stdout) != 0 || ferror(stdout);
}

/* --patch-only: the patching rows alone, on the first model (--threads: its first). */
static int patch_only_main(const bench_args *o, const bench_threads *t)
{
    hs_error err = {{0}};
    hs_model *m = NULL;
    if (bench_load(o->paths[0], &m, &err) != HS_OK) {
        fprintf(stderr, "hs-bench: %s\n", err.msg);
        return 1;
    }
    bench_patch_rows(m, o->reps, o->thread_list ? t->thr[0] : 0);
    hs_model_free(m);
    return fflush(stdout) != 0 || ferror(stdout);
}

/* The header: the kernels, sgemm's GFLOP/s (t->peak) and the roofs (t->roof) at each thread
 * count, then the forward table's legend. */
static void print_header(int reps, int all, bench_threads *t)
{
    printf("headscope bench — %d reps, medians; %d cores online; OpenBLAS kernels %s", reps, all,
           hs_blas_corename());
    if (hs_blas_detected())
        printf(" (OpenBLAS chose %s; OPENBLAS_CORETYPE set by headscope)", hs_blas_detected());
    printf(", threading %s\n", hs_blas_threading());
    for (int i = 0; i < t->n; i++) {
        hs_set_threads(t->thr[i]);
        t->peak[i] = sgemm_gflops(1024, 1024, 1024, reps);
        printf("sgemm 1024x1024x1024, %d thread%s: %7.1f GFLOP/s (reference throughput)\n",
               t->thr[i], t->thr[i] > 1 ? "s" : " ", t->peak[i]);
    }
    bench_print_roofs(t->thr, t->n, t->roof);
    for (int i = 0; i < t->n; i++) /* no GEMM outruns the FMA units: a load in the run */
        if (t->roof[i] > 0 && t->peak[i] > t->roof[i])
            printf("  note: sgemm on %d thread%s ran faster than the roof measured: the machine "
                   "was busy while the roof was timed; read %% roof with care\n", t->thr[i],
                   t->thr[i] > 1 ? "s" : "");
    printf("\nforward pass recording every attention map (no LM head); targets: >= 70%% of "
           "sgemm at equal threads, torch/headscope >= 2.0\n"
           "  BLAS GF: OpenBLAS alone on the same pass's projections, one call a product "
           "(GFLOP/s); %% roof: of the float32 FMA roof;\n"
           "  torch/roof: torch's time over the pass's FLOPs at that roof, the most torch/hs "
           "any float32 pass can reach\n");
}

/* f->hs and f->blas at each of f->m_sizes sizes and each thread count; -1 when a pass failed
 * (its message printed), else 0. */
static int measure_forward(const hs_model *m, const bench_threads *t, int reps, forward_table *f)
{
    for (int s = 0; s < f->m_sizes; s++)
        for (int i = 0; i < t->n; i++) {
            hs_set_threads(t->thr[i]);
            f->hs[s][i] = forward_median(m, sizes[s], reps);
            if (f->hs[s][i] < 0)
                return -1;
            f->blas[s][i] = blas_alone_gflops(m, sizes[s], reps);
        }
    hs_set_threads(0);
    return 0;
}

/* One model's rows of the forward table: time, GFLOP/s, % of sgemm and of the roof,
 * OpenBLAS's GFLOP/s, PyTorch's time and ratios where it ran, the maps' MB. */
static void print_forward_rows(const char *name, const hs_model_config *c,
                               const bench_threads *t, const forward_table *f)
{
    for (int s = 0; s < f->m_sizes; s++)
        for (int i = 0; i < t->n; i++) {
            int n = sizes[s];
            double flops = forward_flops(c, n), gf = flops / f->hs[s][i] / 1e9;
            printf("%-12.12s %5d %4d %8.1f ms %8.1f %7.0f%% ", name, n, t->thr[i],
                   f->hs[s][i] * 1e3, gf, 100.0 * gf / t->peak[i]);
            if (t->roof[i] > 0)
                printf("%6.0f%% ", 100.0 * gf / t->roof[i]);
            else
                printf("%7s ", "-");
            if (f->blas[s][i] > 0)
                printf("%8.1f ", f->blas[s][i]);
            else
                printf("%8s ", "-");
            double floor_s = t->roof[i] > 0 ? flops / (t->roof[i] * 1e9) : 0;
            if (f->have_torch && f->tt[s][i] > 0)
                printf("%7.1f ms %9.2f", f->tt[s][i] * 1e3, f->tt[s][i] / f->hs[s][i]);
            else
                printf("%10s %9s", "-", "-");
            if (f->have_torch && f->tt[s][i] > 0 && floor_s > 0)
                printf(" %10.2f", f->tt[s][i] / floor_s);
            else
                printf(" %10s", "-");
            printf(" %9.1f\n", (double)c->n_layer * c->n_head * n * n * 4 / 1e6);
        }
}

/* Model mi's rows: the forward table's (at the first n_sizes sizes, up to FAMILY_MAX_N for a
 * --family model; the table's header before the first model's), then its breakdown, packed
 * and memory rows. Returns the model, or NULL after an error (printed); *fwd128: its median
 * at n = 128 on all threads (0 if it runs no size). */
static hs_model *model_rows(const bench_args *o, int mi, int n_sizes, const bench_threads *t,
                            double *fwd128)
{
    hs_error err = {{0}};
    hs_model *m = NULL;
    if (bench_load(o->paths[mi], &m, &err) != HS_OK) {
        fprintf(stderr, "hs-bench: %s\n", err.msg);
        return NULL;
    }
    const hs_model_config *c = hs_model_config_of(m);
    const char *name = base_name(o->paths[mi]);
    forward_table f = {0};
    int max_n = o->family[mi] && FAMILY_MAX_N < c->n_ctx ? FAMILY_MAX_N : c->n_ctx;
    while (f.m_sizes < n_sizes && sizes[f.m_sizes] <= max_n)
        f.m_sizes++;
    if (measure_forward(m, t, o->reps, &f)) {
        hs_model_free(m);
        return NULL;
    }
    f.have_torch = o->script && torch_medians(o->python, o->script, o->paths[mi], t->thr, t->n,
                                              f.m_sizes, o->reps, f.tt);
    if (mi == 0)
        printf("%-12s %5s %4s %10s %8s %8s %7s %8s %10s %9s %10s %9s\n", "model", "n",
               "thr", "headscope", "GFLOP/s", "% sgemm", "% roof", "BLAS GF", "torch",
               "torch/hs", "torch/roof", "maps MB");
    print_forward_rows(name, c, t, &f);
    if (o->breakdown && !o->family[mi])
        bench_breakdown(c, name, sizes, f.m_sizes, t->thr, t->n, o->reps);
    if (!o->family[mi] && !o->fwd_only)
        bench_packed_rows(m, name, o->reps, o->quick, t->thr, t->n);
    if (o->family[mi] && o->headscope && !o->quick)
        bench_family_memory_row(o->headscope, o->paths[mi], m, FAMILY_MAX_N);
    fflush(stdout);
    *fwd128 = f.hs[0][t->n - 1];
    return m;
}

/* The rows after the forward table, on the first model (fwd128: its all-threads forward at
 * n = 128, their unit): analyze, patching, memory and corpus. */
static void later_rows(const bench_args *o, const hs_model *first, double fwd128)
{
    if (!o->quick && !o->fwd_only)
        bench_analyze_rows(first, fwd128);
    if (!o->quick && !o->fwd_only)
        bench_patch_rows(first, o->reps, 0);
    if (o->headscope && !o->quick && !o->fwd_only)
        bench_memory_rows(o->headscope, o->paths[0], first);
    if (o->headscope && !o->fwd_only && hs_model_config_of(first)->causal)
        bench_corpus_rows(o->headscope, o->paths[0], o->quick ? 2 : 10, o->quick ? 0 : 1, fwd128);
}

int main(int argc, char **argv)
{
    bench_args o;
    hs_blas_reexec(argv); /* the kernels headscope's CLI runs with (docs/bench.md) */
    setvbuf(stdout, NULL, _IOLBF, 0); /* rows reach a file as they come (a run cut short) */
    int rc = bench_args_parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.stored_only && o.headscope) /* the stored rows alone (and the big row when given) */
        return stored_only_main(o.headscope, o.stored, o.n_stored, o.big, o.reps);
    if (!o.n_models || o.family[0]) { /* the first model is the GPT-2 the later rows use */
        fprintf(stderr, "hs-bench: give a GPT-2 or BERT model before --family\n");
        if (o.n_models)
            return 2;
        o.paths[o.n_models++] = "build/bench/gpt2-small";
    }
    if (o.quick)
        o.reps = 1;
    if (o.reps < 1 || o.reps > 64)
        o.reps = 5;
    int n_sizes = o.quick ? 1 : N_SIZES;
    int all = hs_threads_available();
    bench_threads t = {.thr = {1, all}, .n = all > 1 ? 2 : 1};
    if (o.thread_list && parse_threads(o.thread_list, all, &t))
        return 2;
    if (o.packed_only)
        return packed_only_main(&o, &t);
    if (o.patch_only)
        return patch_only_main(&o, &t);
    print_header(o.reps, all, &t);

    hs_model *first = NULL;
    double fwd128 = 0; /* first model, n = 128, all threads: the unit of the rows below */
    for (int mi = 0; mi < o.n_models; mi++) {
        double f128;
        hs_model *m = model_rows(&o, mi, n_sizes, &t, &f128);
        if (!m) {
            hs_model_free(first);
            return 1;
        }
        if (mi == 0) {
            first = m;
            fwd128 = f128;
        } else {
            hs_model_free(m);
        }
    }
    later_rows(&o, first, fwd128);
    hs_model_free(first);
    if (o.n_stored && !o.quick)
        bench_qgemm_rows(o.reps > 3 ? 3 : o.reps);
    if (o.headscope && o.n_stored && !o.quick)
        bench_stored_rows(o.headscope, o.stored, o.n_stored, t.thr, t.n, o.reps > 3 ? 3 : o.reps,
                          1);
    if (o.headscope && o.big)
        bench_big_row(o.headscope, o.big, all);
    if (o.t5 && !o.quick)
        bench_t5_rows(o.t5, o.reps);
    if (fflush(stdout) != 0 || ferror(stdout))
        return 1;
    return 0;
}
