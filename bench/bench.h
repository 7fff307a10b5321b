/* Shared pieces of build/hs-bench: bench/bench.c (sgemm and forward table), bench/rows.c
 * (analyze, memory and corpus rows), bench/rss.c (child processes and test texts),
 * bench/args.c (the command line). */
#ifndef HEADSCOPE_BENCH_H
#define HEADSCOPE_BENCH_H

#include "headscope/model.h"

/* hs-bench's command line (bench/args.c). */
#define BENCH_MAX_MODELS 8
typedef struct bench_args {
    const char *paths[BENCH_MAX_MODELS];
    int family[BENCH_MAX_MODELS]; /* 1: a --family model (n <= FAMILY_MAX_N, memory row) */
    int n_models;
    const char *stored[BENCH_MAX_MODELS]; /* --stored GGUF files (bench/stored.c) */
    int n_stored, stored_only;
    const char *big; /* --big GGUF: the 8B row (bench/stored.c) */
    int reps, quick, breakdown, fwd_only, packed_only, patch_only;
    const char *headscope; /* the command, for the memory and corpus rows */
    const char *script, *python; /* --torch, --python; script NULL: --no-torch */
    const char *thread_list; /* --threads 1,4,16 (default: 1 and every core) */
    const char *t5;          /* --t5 DIR: the encoder-decoder row (bench/t5_row.c) */
} bench_args;

/* argv into o (the defaults where not given): -1 to go on, else main's exit status (0 after
 * --help, its text on stdout; 2 for an unknown option, the message on stderr). */
int bench_args_parse(int argc, char **argv, bench_args *o);

/* Monotonic seconds. */
double bench_now(void);

/* A model with its layers converted to float32 at load (no bound on the weight memory):
 * the float32 path the rows against PyTorch and OpenBLAS measure, whatever the default. */
hs_status bench_load(const char *path, hs_model **m, hs_error *err);

/* FLOPs of a pass's linear layers at n tokens: 2·n·(their weights), the experts a token
 * uses (bench/bench.c). */
double bench_projection_flops(const hs_model_config *c, int n);

/* The machine's arithmetic roofs (bench/roof.c): the most float32 FLOPs (FMA) and 8-bit ops
 * (VNNI dot products) a second that thr[i] threads issue from registers, in G a second,
 * measured once a run, printed for each of the n_thr thread counts on one line; fp32[i] =
 * the float32 roof at thr[i] (0 where not measured). */
void bench_print_roofs(const int *thr, int n_thr, double *fp32);

/* Median of v[0..n) (sorts v in place). */
double bench_median(double *v, int n);

/* Median seconds of reps calls of run(ctx) after one untimed warm-up call (reps at most 64);
 * -1 as soon as a call returns non-zero. */
double bench_time_median(int (*run)(void *ctx), void *ctx, int reps);

/* Runs argv (argv[0] a path) with stdout/stderr to /dev/null; returns its peak resident set
 * in MB and its wall time in *seconds (may be NULL), or -1 when it failed. */
double bench_peak_rss_mb(const char *const argv[], double *seconds);
/* The same with stdout to the file out (NULL: /dev/null), and its CPU seconds (user +
 * system) into *cpu (may be NULL). */
double bench_run_rss_mb(const char *const argv[], double *seconds, const char *out, double *cpu);

/* Writes about n tokens of plain English words to path; 0 on success. */
int bench_write_text(const char *path, int n);

/* Writes k lines of about n_words words each (every line a different word order), a corpus
 * for `analyze --corpus`; 0 on success. */
int bench_write_corpus(const char *path, int k, int n_words);

/* analyze at n = 128 with the defaults, each phase in units of fwd128 seconds (the median
 * recorded forward pass at n = 128, all threads). */
void bench_analyze_rows(const hs_model *m, double fwd128);

/* Activation (z, every head) and attribution patching at n = 64 in forward passes a pair,
 * timed (medians of up to 3 of reps runs) and counted, on threads threads (0: all)
 * (bench/patch_rows.c). */
void bench_patch_rows(const hs_model *m, int reps, int threads);

/* Peak RSS of `headscope attn` and `headscope analyze` at n = 1024 (or the context). */
void bench_memory_rows(const char *headscope, const char *model, const hs_model *m);

/* Peak RSS of `headscope attn --ids` on n token ids (at most the context), beside the F32
 * weights. */
void bench_family_memory_row(const char *headscope, const char *model, const hs_model *m, int n);

/* `headscope analyze MODEL --corpus` throughput on k texts of >= 128 tokens, with and
 * without --corpus-ablation (k_abl texts), in texts/s, tokens/s and units of fwd128. */
void bench_corpus_rows(const char *headscope, const char *model, int k, int k_abl, double fwd128);

/* Corpus throughput of the recorded forward pass: one text a pass against several texts a
 * pass (hs_forward_packed) at a few token budgets, texts of 32, 64 and 128 tokens, at each
 * of the n_thr thread counts (bench/packed.c); quick: 32 tokens, 4 texts. */
void bench_packed_rows(const hs_model *m, const char *name, int reps, int quick, const int *thr,
                       int n_thr);

/* --breakdown: one layer's kernels timed apart on buffers of c's shapes, at each size and
 * thread count (bench/breakdown.c). */
void bench_breakdown(const hs_model_config *c, const char *name, const int *sizes, int n_sizes,
                     const int *thr, int n_thr, int reps);

/* --stored: each GGUF file's `headscope attn --ids` at n = 1, 128 and 512 with its layers in
 * their stored type at each of the n_thr thread counts, the medians of reps runs, beside
 * llama-bench's prompt processing on the same files when LLAMACPP is set; with modes, also
 * one run each of the converted layers (at load, every pass) on all threads
 * (bench/stored.c). */
void bench_stored_rows(const char *headscope, const char *files[], int n_files, const int *thr,
                       int n_thr, int reps, int modes);

/* One product of TinyLlama's MLP shape on one thread, W in each stored type against
 * OpenBLAS on W converted beforehand, and the decoders alone (bench/qgemm_rows.c). */
void bench_qgemm_rows(int reps);

/* --big: one `headscope attn --ids` at n = 128 on all threads with stored layers (the 8B
 * row: time and peak RSS beside the file's size; bench/stored.c). */
void bench_big_row(const char *headscope, const char *file, int threads);

/* --t5 DIR: an encoder-decoder's forward at n = 128 + 128, all threads (bench/t5_row.c). */
void bench_t5_rows(const char *path, int reps);

#endif
