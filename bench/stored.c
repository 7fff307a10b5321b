/* The rows of GGUF files of one model in several storage types (make bench: TinyLlama-1.1B's
 * shape at F16, Q8_0 and Q4_K_M): `headscope attn --ids` at n = 128 and 512 in a child
 * process, its layers multiplied in their stored type (--weight-memory stored), converted
 * once at load (all) and converted again in every pass (0): the wall time, the forward alone
 * (less a 1-token run of the same mode: the load) and the peak RSS, beside the file's size.
 * llama.cpp's llama-bench on the same files when LLAMACPP names its bin folder. */
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

static const char *const modes[N_MODES] = {"stored", "all", "0"};
static const char *const mode_names[N_MODES] = {"stored type", "converted at load",
                                                "converted every pass"};

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

/* One run: wall seconds into *t, peak RSS MB returned (-1: failed). */
static double attn_run(const char *headscope, const char *file, const char *ids, const char *npy,
                       const char *mode, const char *threads, double *t)
{
    const char *argv[] = {headscope, "attn", file, "--ids", ids, "-o", npy, "-q",
                          "--weight-memory", mode, "--threads", threads, NULL};
    return bench_peak_rss_mb(argv, t);
}

static void llamacpp_rows(const char *files[], int n_files, int threads)
{
    const char *dir = getenv("LLAMACPP");
    if (!dir || !*dir) {
        printf("  llama.cpp: skipped (LLAMACPP= not set: make bench LLAMACPP=path/to/llama.cpp/"
               "build/bin runs llama-bench -p 128,512 -n 0 on the same files)\n");
        return;
    }
    for (int f = 0; f < n_files; f++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "'%s/llama-bench' -m '%s' -p 128,512 -n 0 -t %d -r 3", dir,
                 files[f], threads);
        printf("  %s\n", cmd);
        fflush(stdout);
        if (system(cmd) != 0)
            printf("  (llama-bench failed)\n");
    }
}

void bench_stored_rows(const char *headscope, const char *files[], int n_files, int threads)
{
    char dir[] = "/tmp/hs-bench-stored-XXXXXX";
    if (!mkdtemp(dir))
        return;
    static const int ns[3] = {1, 128, 512};
    char ids[3][96], npy[96], thr[16];
    snprintf(npy, sizeof npy, "%s/a.npy", dir);
    snprintf(thr, sizeof thr, "%d", threads);
    hs_model *m = NULL;
    hs_error err = {{0}};
    int ok = n_files > 0 && hs_model_open(files[0], HS_OPEN_NO_WEIGHTS, &m, &err) == HS_OK;
    int vocab = ok ? hs_model_config_of(m)->vocab_size : 1;
    hs_model_free(m);
    for (int i = 0; i < 3; i++) {
        snprintf(ids[i], sizeof ids[i], "%s/ids%d.npy", dir, ns[i]);
        ok = ok && write_ids(ids[i], ns[i], vocab) == 0;
    }
    if (!ok)
        printf("\nweights in their stored type: not measured (%s)\n", err.msg[0] ? err.msg : "ids");
    printf("\nweights in their stored type: headscope attn --ids (every map recorded), %d "
           "threads, one run each; forward = the run less a 1-token run (the load):\n", threads);
    printf("%-28s %8s  %-22s %9s %9s %9s %9s\n", "file", "size", "layers", "load", "n=128",
           "n=512", "peak RSS");
    for (int f = 0; ok && f < n_files; f++) {
        struct stat sb;
        double size_mb = stat(files[f], &sb) == 0 ? (double)sb.st_size / 1048576.0 : -1;
        const char *base = strrchr(files[f], '/') ? strrchr(files[f], '/') + 1 : files[f];
        for (int mo = 0; mo < N_MODES; mo++) {
            double t[3] = {-1, -1, -1}, rss = -1;
            for (int i = 0; i < 3; i++) {
                double r = attn_run(headscope, files[f], ids[i], npy, modes[mo], thr, &t[i]);
                if (r < 0) {
                    t[i] = -1;
                    break;
                }
                rss = r > rss ? r : rss;
            }
            printf("%-28.28s %6.0f MB  %-22s", base, size_mb, mode_names[mo]);
            for (int i = 0; i < 3; i++) {
                if (t[i] < 0 || t[0] < 0) {
                    printf(" %9s", "failed");
                    continue;
                }
                double v = i == 0 ? t[0] : t[i] - t[0]; /* below the noise: 0 */
                printf(" %7.2f s", v > 0 ? v : 0.0);
            }
            printf(" %6.0f MB\n", rss);
            fflush(stdout);
        }
    }
    llamacpp_rows(files, n_files, threads);
    unlink(npy);
    for (int i = 0; i < 3; i++)
        unlink(ids[i]);
    rmdir(dir);
}
