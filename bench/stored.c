/* The rows of GGUF files of one model in several storage types (make bench: TinyLlama-1.1B's
 * shape at F16, Q8_0 and Q4_K_M): `headscope attn --ids` at n = 1, 128 and 512 in a child
 * process with its layers multiplied in their stored type (--weight-memory stored), at 1
 * thread and all threads, the medians of several runs: the load (the 1-token run), the
 * forward alone (the run less the 1-token run) and the peak RSS, beside llama.cpp's
 * llama-bench on the same files when LLAMACPP names its bin folder: its prompt processing
 * at the same n and threads (the median of its samples), its time to the first token (a
 * 1-token llama-bench run without warm-up, start to exit) and its peak RSS. With `modes`,
 * one run each of the layers converted once at load (all) and again in every pass (0).
 * Each block-quantised file also has a row of headscope with --activations q8 (8-bit
 * activations for the products, as llama.cpp; run in the same rounds, interleaved).
 * The --big row: one run at n = 128 of a large file (the Llama-3-8B shape). */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "headscope/model.h"
#include "headscope/npy.h"
#include "bench.h"

#define N_MODES 3
#define N_NS 3
#define MAX_REPS 16

static const char *const modes[N_MODES] = {"stored", "all", "0"};
static const char *const mode_names[N_MODES] = {"stored type", "converted at load",
                                                "converted every pass"};
static const int ns[N_NS] = {1, 128, 512};

static int write_ids(const char *path, int n, int vocab)
{
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    if (!ids)
        return -1;
    for (int i = 0; i < n; i++) /* the forward table's ids */
        ids[i] = (int32_t)((i * 7919) % vocab);
    hs_error err = {{0}};
    size_t shape[1] = {(size_t)n}, len = 0;
    unsigned char *bytes = NULL;
    int rc = hs_npy_encode(ids, HS_NPY_I32, shape, 1, &bytes, &len, &err) == HS_OK ? 0 : -1;
    FILE *f = rc ? NULL : fopen(path, "wb");
    rc = f && fwrite(bytes, 1, len, f) == len ? 0 : -1;
    if (f && fclose(f) != 0)
        rc = -1;
    free(bytes);
    free(ids);
    return rc;
}

/* The scratch folder: ids files for each n, the maps' file, llama-bench's output. */
typedef struct scratch {
    char dir[64], ids[N_NS][96], npy[96], out[96];
} scratch;

static int scratch_make(scratch *s, const char *file)
{
    snprintf(s->dir, sizeof s->dir, "/tmp/hs-bench-stored-XXXXXX");
    if (!mkdtemp(s->dir))
        return -1;
    snprintf(s->npy, sizeof s->npy, "%s/a.npy", s->dir);
    snprintf(s->out, sizeof s->out, "%s/llama.jsonl", s->dir);
    hs_model *m = NULL;
    hs_error err = {{0}};
    int ok = hs_model_open(file, HS_OPEN_NO_WEIGHTS, &m, &err) == HS_OK;
    int vocab = ok ? hs_model_config_of(m)->vocab_size : 1;
    hs_model_free(m);
    for (int i = 0; i < N_NS; i++) {
        snprintf(s->ids[i], sizeof s->ids[i], "%s/ids%d.npy", s->dir, ns[i]);
        ok = ok && write_ids(s->ids[i], ns[i], vocab) == 0;
    }
    if (!ok)
        printf("\nweights in their stored type: not measured (%s)\n", err.msg[0] ? err.msg : "ids");
    return ok ? 0 : -1;
}

static void scratch_free(scratch *s)
{
    unlink(s->npy);
    unlink(s->out);
    for (int i = 0; i < N_NS; i++)
        unlink(s->ids[i]);
    rmdir(s->dir);
}

/* One run: wall seconds into *t (CPU seconds into *cpu unless NULL), peak RSS MB returned
 * (-1: failed). The previous run's maps are deleted first, untimed: replacing them inside
 * the run (0.7 GB after n = 512) cost the next 1-token run 0.13 s of freeing pages. */
static double attn_run(const char *headscope, const char *file, const char *ids, const char *npy,
                       const char *mode, int threads, double *t, double *cpu)
{
    unlink(npy);
    char thr[16];
    snprintf(thr, sizeof thr, "%d", threads);
    int q8 = !strcmp(mode, "q8"); /* --activations q8 (the stored type implied) */
    const char *argv[] = {headscope, "attn", file, "--ids", ids, "-o", npy, "-q",
                          q8 ? "--activations" : "--weight-memory", q8 ? "q8" : mode,
                          "--threads", thr, NULL};
    return bench_run_rss_mb(argv, t, NULL, cpu);
}

/* One run each at n = 1, 128, 512: wall seconds into t[] (-1: failed), the largest peak
 * RSS returned. */
static double attn_round(const char *headscope, const char *file, const scratch *s,
                         const char *mode, int threads, double t[N_NS])
{
    double rss = -1;
    for (int i = 0; i < N_NS; i++)
        t[i] = -1;
    for (int i = 0; i < N_NS; i++) {
        double m = attn_run(headscope, file, s->ids[i], s->npy, mode, threads, &t[i], NULL);
        if (m < 0)
            return -1;
        rss = m > rss ? m : rss;
    }
    return rss;
}

/* The median of llama-bench's samples for n_prompt n in its jsonl output text (-1: none). */
static double llama_sample_median(const char *text, int n)
{
    char key[48];
    snprintf(key, sizeof key, "\"n_prompt\": %d,", n);
    const char *line = strstr(text, key);
    const char *p = line ? strstr(line, "\"samples_ns\": [") : NULL;
    if (!p)
        return -1;
    p += strlen("\"samples_ns\": [");
    double v[64];
    int k = 0;
    while (k < 64) {
        char *end;
        double x = strtod(p, &end);
        if (end == p)
            break;
        v[k++] = x * 1e-9;
        p = end;
        while (*p == ' ' || *p == ',')
            p++;
    }
    return k ? bench_median(v, k) : -1;
}

/* One round of llama-bench on file at `threads`: its time to the first token (a 1-token
 * run without warm-up, start to exit) into t[0], its prompt processing at n = 128 and 512
 * (-p 128,512 -r 1) into t[1], t[2]; its peak RSS MB returned (-1: failed). */
static double llama_round(const char *dir, const char *file, const scratch *s, int threads,
                          double t[N_NS])
{
    char bin[1024], thr[16];
    snprintf(bin, sizeof bin, "%s/llama-bench", dir);
    snprintf(thr, sizeof thr, "%d", threads);
    t[0] = t[1] = t[2] = -1;
    double wall;
    const char *load[] = {bin, "-m", file, "-p", "1", "-n", "0", "-t", thr, "-r", "1",
                          "--no-warmup", NULL};
    if (bench_run_rss_mb(load, &t[0], NULL, NULL) < 0)
        return -1;
    const char *argv[] = {bin, "-m", file, "-p", "128,512", "-n", "0", "-t", thr, "-r", "1",
                          "-o", "jsonl", NULL};
    double rss = bench_run_rss_mb(argv, &wall, s->out, NULL);
    FILE *f = rss < 0 ? NULL : fopen(s->out, "rb");
    char text[16384];
    size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f)
        fclose(f);
    text[len] = '\0';
    t[1] = llama_sample_median(text, 128);
    t[2] = llama_sample_median(text, 512);
    return t[1] < 0 || t[2] < 0 ? -1 : rss;
}

/* reps rounds of headscope (h; with q8 also --activations q8 into h8) then llama.cpp (l,
 * when dir), interleaved so that a change of the machine's load falls on all; medians into
 * h[], h8[] and l[] (headscope's forward: the run less the 1-token run, each round's), the
 * largest peak RSS into rss[0], rss[1], rss[2] (q8). */
static void rounds(const char *headscope, const char *dir, const char *file, const scratch *s,
                   int threads, int reps, int q8, double h[N_NS], double h8[N_NS], double l[N_NS],
                   double rss[3])
{
    double hv[N_NS][MAX_REPS], h8v[N_NS][MAX_REPS], lv[N_NS][MAX_REPS];
    int hn = 0, h8n = 0, ln = 0;
    rss[0] = rss[1] = rss[2] = -1;
    for (int r = 0; r < reps; r++) {
        double t[N_NS];
        double m = attn_round(headscope, file, s, "stored", threads, t);
        if (m >= 0) {
            for (int i = 0; i < N_NS; i++)
                hv[i][hn] = i == 0 ? t[0] : t[i] - t[0];
            hn++;
            rss[0] = m > rss[0] ? m : rss[0];
        }
        m = q8 ? attn_round(headscope, file, s, "q8", threads, t) : -1;
        if (m >= 0) {
            for (int i = 0; i < N_NS; i++)
                h8v[i][h8n] = i == 0 ? t[0] : t[i] - t[0];
            h8n++;
            rss[2] = m > rss[2] ? m : rss[2];
        }
        m = dir ? llama_round(dir, file, s, threads, t) : -1;
        if (m >= 0) {
            for (int i = 0; i < N_NS; i++)
                lv[i][ln] = t[i];
            ln++;
            rss[1] = m > rss[1] ? m : rss[1];
        }
    }
    for (int i = 0; i < N_NS; i++) {
        h[i] = hn ? bench_median(hv[i], hn) : -1;
        h8[i] = h8n ? bench_median(h8v[i], h8n) : -1;
        l[i] = ln ? bench_median(lv[i], ln) : -1;
    }
}

static void print_secs(double v)
{
    if (v < 0)
        printf(" %7s", "failed");
    else
        printf(" %5.2f s", v > 0 ? v : 0.0); /* the forward below the noise: 0 */
}

/* One run each of every mode on all threads (the modes table). */
static void mode_rows(const char *headscope, const char *file, const scratch *s, int threads)
{
    struct stat sb;
    double size_mb = stat(file, &sb) == 0 ? (double)sb.st_size / 1048576.0 : -1;
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    for (int mo = 0; mo < N_MODES; mo++) {
        double t[N_NS];
        double rss = attn_round(headscope, file, s, modes[mo], threads, t);
        printf("%-28.28s %6.0f MB  %-22s", base, size_mb, mode_names[mo]);
        for (int i = 0; i < N_NS; i++)
            print_secs(rss < 0 ? -1 : i == 0 ? t[0] : t[i] - t[0]);
        printf(" %6.0f MB\n", rss);
        fflush(stdout);
    }
}

/* 1 when the file's layers are block-quantised (its --activations q8 row is run); flops[k]:
 * its linear layers' FLOPs at ns[k] tokens (0 when the file does not open). */
static int block_quantised(const char *file, double flops[N_NS])
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    for (int k = 0; k < N_NS; k++)
        flops[k] = 0;
    if (hs_model_open(file, HS_OPEN_NO_WEIGHTS, &m, &err) != HS_OK)
        return 0;
    const char *dt = hs_model_storage_dtype(m);
    int q = dt && (dt[0] == 'Q' || !strncmp(dt, "IQ", 2));
    for (int k = 0; k < N_NS; k++)
        flops[k] = bench_projection_flops(hs_model_config_of(m), ns[k]);
    hs_model_free(m);
    return q;
}

/* Under a thread count's rows: the shortest forward any float32 pass can take (the linear
 * layers' FLOPs at the measured float32 roof) at n = 128 and 512, and which of llama.cpp's
 * times are below it (no float32 pass, exact or not, can then match llama.cpp). */
static void print_floor(const double flops[N_NS], double roof, const double l[N_NS], int llama)
{
    if (roof <= 0 || flops[1] <= 0)
        return;
    printf("%-28s %4s float32 floor (linear layers at %.0f GFLOP/s):", "", "", roof);
    for (int k = 1; k < N_NS; k++) {
        double floor_s = flops[k] / (roof * 1e9);
        printf(" n=%d %.2f s", ns[k], floor_s);
        if (llama && l[k] > 0)
            printf(" (llama.cpp %s it: %.2f)", l[k] < floor_s ? "BELOW" : "above", l[k] / floor_s);
        printf(k + 1 < N_NS ? ";" : "\n");
    }
}

/* One row of the llama.cpp table: headscope's medians h, llama.cpp's l, ratios. */
static void print_row(const char *label, int threads, const double h[N_NS], const double l[N_NS],
                      double rss_h, double rss_l, int llama)
{
    printf("%-28.28s %4d", label, threads);
    for (int k = 0; k < N_NS; k++) {
        print_secs(h[k]);
        if (!llama) {
            printf(" %9s %6s", "-", "-");
            continue;
        }
        print_secs(l[k]);
        if (h[k] >= 0 && l[k] > 0)
            printf(" %6.2f", h[k] / l[k]);
        else
            printf(" %6s", "-");
    }
    double rss[2] = {rss_h, rss_l};
    for (int k = 0; k < 2; k++)
        if (rss[k] >= 0)
            printf(" %5.0f MB", rss[k]);
        else
            printf(" %8s", k == 1 && !llama ? "-" : "failed");
    printf("\n");
    fflush(stdout);
}

void bench_stored_rows(const char *headscope, const char *files[], int n_files, const int *thr,
                       int n_thr, int reps, int modes_too)
{
    scratch s;
    if (n_files < 1 || scratch_make(&s, files[0]) != 0)
        return;
    reps = reps < 1 ? 1 : reps > MAX_REPS ? MAX_REPS : reps;
    int all = thr[n_thr - 1];
    if (modes_too) {
        printf("\nweights in their stored type: headscope attn --ids (every map recorded), %d "
               "threads, one run each; forward = the run less a 1-token run (the load):\n", all);
        printf("%-28s %8s  %-22s %8s %8s %8s %9s\n", "file", "size", "layers", "load", "n=128",
               "n=512", "peak RSS");
        for (int f = 0; f < n_files; f++)
            mode_rows(headscope, files[f], &s, all);
    }
    const char *dir = getenv("LLAMACPP");
    int llama = dir && *dir;
    printf("\nstored layers against llama.cpp: headscope attn --ids --weight-memory stored "
           "(every map recorded) and llama-bench -p 128,512 -n 0, medians of %d runs;\n"
           "load = a 1-token run (headscope attn; llama-bench -p 1 -r 1 --no-warmup), start "
           "to exit; n = the forward alone (headscope: the run less the load); ratio = "
           "headscope / llama.cpp; 'q8': headscope --activations q8 (8-bit activations, as "
           "llama.cpp)\n", reps);
    if (!llama)
        printf("  llama.cpp: skipped (LLAMACPP= not set: make bench LLAMACPP=path/to/llama.cpp/"
               "build/bin runs llama-bench on the same files)\n");
    double roof[8];
    n_thr = n_thr > 8 ? 8 : n_thr;
    bench_print_roofs(thr, n_thr, roof);
    printf("%-28s %4s %9s %9s %6s %9s %9s %6s %9s %9s %6s %8s %8s\n", "file", "thr", "load hs",
           "llama", "ratio", "128 hs", "llama", "ratio", "512 hs", "llama", "ratio", "RSS hs",
           "llama");
    for (int f = 0; f < n_files; f++) {
        const char *base = strrchr(files[f], '/') ? strrchr(files[f], '/') + 1 : files[f];
        double flops[N_NS];
        int q8 = block_quantised(files[f], flops);
        for (int i = 0; i < n_thr; i++) {
            double h[N_NS], h8[N_NS], l[N_NS], rss[3];
            rounds(headscope, llama ? dir : NULL, files[f], &s, thr[i], reps, q8, h, h8, l, rss);
            for (int row = 0; row < 1 + q8; row++) {
                char label[64];
                snprintf(label, sizeof label, "%.24s%s", base, row ? " q8" : "");
                print_row(label, thr[i], row ? h8 : h, l, row ? rss[2] : rss[0], rss[1], llama);
            }
            print_floor(flops, roof[i], l, llama);
        }
    }
    scratch_free(&s);
}

void bench_big_row(const char *headscope, const char *file, int threads)
{
    scratch s;
    if (scratch_make(&s, file) != 0)
        return;
    struct stat sb;
    double size_mb = stat(file, &sb) == 0 ? (double)sb.st_size / 1048576.0 : -1;
    double t1 = -1, t = -1, c1 = -1, c = -1;
    printf("\nthe big row: headscope attn --ids --weight-memory stored at n = 1 and 128, %d "
           "threads, one run each; wall (CPU user + system) seconds:\n", threads);
    double r1 = attn_run(headscope, file, s.ids[0], s.npy, "stored", threads, &t1, &c1);
    double r = r1 < 0 ? -1 : attn_run(headscope, file, s.ids[1], s.npy, "stored", threads, &t, &c);
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    if (r < 0) {
        printf("%-28.28s %7.0f MB  failed\n", base, size_mb);
    } else {
        printf("%-28.28s %7.0f MB  load %.1f s (%.1f)  n=128 %.1f s (%.1f), forward %.1f s "
               "(%.1f)  peak RSS %.0f MB\n", base, size_mb, t1, c1, t, c, t - t1, c - c1,
               r > r1 ? r : r1);
    }
    scratch_free(&s);
}
