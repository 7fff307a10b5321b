/* Pairwise head comparisons: Frobenius distances and per-layer diversity, Pearson
 * similarity, Jensen-Shannon divergence. The Frobenius and Pearson matrices come from a
 * Gram matrix accumulated in double over chunks of entries (BLAS dsyrk), so memory beyond
 * the outputs is one (n_maps x chunk) block however long the sequence. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include <cblas.h>

#include "headscope/analysis.h"
#include "internal.h"

/* Chunk block of about 4 MB of doubles. */
#define GRAM_BLOCK_DOUBLES ((size_t)1 << 19)

/* G: (N, N), lower triangle (j <= i) set to sum_e z_a(e) z_b(e) over the entries e of
 * maps: (N, n, n) -- the visible ones (j <= i) when lower_only, else all -- where
 * z_a(e) = x_a(e) - mean[a] (mean may be NULL for 0). */
static hs_status gram(const float *maps, int N, int n, int lower_only, const double *mean,
                      double *G, hs_error *err)
{
    size_t per = (size_t)n * (size_t)n;
    size_t m = lower_only ? (size_t)n * ((size_t)n + 1) / 2 : per;
    size_t C = GRAM_BLOCK_DOUBLES / (size_t)N;
    if (C < 256)
        C = 256;
    if (C > m)
        C = m;
    double *Z = malloc((size_t)N * C * sizeof *Z);
    if (!Z)
        return hs_fail(err, HS_E_NOMEM, "out of memory for a %d x %zu block", N, C);
    for (size_t k = 0; k < (size_t)N * (size_t)N; k++)
        G[k] = 0;
    /* The chunk starts at entry (i0, j0) of the visible set, row-major. */
    int i0 = 0, j0 = 0;
    size_t done = 0;
    while (done < m) {
        size_t cols = m - done < C ? m - done : C;
        int i1 = i0, j1 = j0;
        for (int a = 0; a < N; a++) {
            const float *x = maps + (size_t)a * per;
            double mu = mean ? mean[a] : 0.0;
            double *z = Z + (size_t)a * C;
            int i = i0, j = j0;
            for (size_t c = 0; c < cols; c++) {
                z[c] = (double)x[(size_t)i * (size_t)n + (size_t)j] - mu;
                if (++j > (lower_only ? i : n - 1)) {
                    j = 0;
                    i++;
                }
            }
            i1 = i;
            j1 = j;
        }
        cblas_dsyrk(CblasRowMajor, CblasLower, CblasNoTrans, N, (int)cols, 1.0, Z, (int)C, 1.0,
                    G, N);
        done += cols;
        i0 = i1;
        j0 = j1;
    }
    free(Z);
    return HS_OK;
}

/* D: (N, N) Frobenius distances of maps: (N, n, n) over all entries, symmetric. */
static hs_status frobenius(const float *maps, int N, int n, double *D, hs_error *err)
{
    hs_status st = gram(maps, N, n, 0, NULL, D, err);
    if (st)
        return st;
    size_t per = (size_t)n * (size_t)n;
    for (int a = 0; a < N; a++) {
        double gaa = D[(size_t)a * N + a];
        for (int b = 0; b < a; b++) {
            double gbb = D[(size_t)b * N + b];
            double d2 = gaa + gbb - 2.0 * D[(size_t)a * N + b];
            if (d2 <= 1e-6 * (gaa + gbb)) {
                /* Near-identical maps: the Gram form cancels; sum the differences. */
                const float *x = maps + (size_t)a * per, *y = maps + (size_t)b * per;
                d2 = 0;
                for (size_t e = 0; e < per; e++) {
                    double t = (double)x[e] - (double)y[e];
                    d2 += t * t;
                }
            }
            D[(size_t)a * N + b] = sqrt(d2 > 0 ? d2 : 0);
        }
    }
    for (int a = 0; a < N; a++) {
        D[(size_t)a * N + a] = 0;
        for (int b = 0; b < a; b++)
            D[(size_t)b * N + a] = D[(size_t)a * N + b];
    }
    return HS_OK;
}

hs_status hs_diversity_compute(const float *attn, int n_layer, int n_head, int n, double *layer,
                               double *pairwise, hs_error *err)
{
    if (n_layer < 1 || n_head < 1)
        return hs_fail(err, HS_E_ARG, "diversity: %d layers x %d heads, expected >= 1 each",
                       n_layer, n_head);
    if ((size_t)n_layer * (size_t)n_head > (size_t)INT32_MAX / 2)
        return hs_fail(err, HS_E_ARG, "diversity: %d x %d heads is too many", n_layer, n_head);
    int N = n_layer * n_head;
    hs_status st = hs_maps_check(attn, N, n, err);
    if (st) {
        hs_error_prefix(err, "diversity");
        return st;
    }
    if (!layer && !pairwise)
        return hs_fail(err, HS_E_ARG, "diversity: no output requested");
    size_t per = (size_t)n * (size_t)n;
    double *own = NULL;
    if (pairwise) {
        st = frobenius(attn, N, n, pairwise, err);
        if (st)
            goto fail;
    } else {
        own = malloc((size_t)n_head * (size_t)n_head * sizeof *own);
        if (!own) {
            st = hs_fail(err, HS_E_NOMEM, "out of memory");
            goto fail;
        }
    }
    if (layer) {
        for (int l = 0; l < n_layer; l++) {
            double s = 0;
            if (own) {
                st = frobenius(attn + (size_t)l * (size_t)n_head * per, n_head, n, own, err);
                if (st)
                    goto fail;
                for (int a = 0; a < n_head; a++)
                    for (int b = 0; b < n_head; b++)
                        s += own[(size_t)a * n_head + b];
            } else {
                for (int a = 0; a < n_head; a++)
                    for (int b = 0; b < n_head; b++)
                        s += pairwise[(size_t)(l * n_head + a) * N + (size_t)(l * n_head + b)];
            }
            layer[l] = s / ((double)n_head * (double)n_head);
        }
    }
    free(own);
    return HS_OK;
fail:
    free(own);
    hs_error_prefix(err, "diversity");
    return st;
}

/* out: (N, N) Pearson r over visible entries. */
static hs_status pearson(const float *maps, int N, int n, int causal, double *out, hs_error *err)
{
    size_t per = (size_t)n * (size_t)n;
    size_t m = causal ? (size_t)n * ((size_t)n + 1) / 2 : per;
    double *mean = calloc((size_t)N, sizeof *mean);
    if (!mean)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    for (int a = 0; a < N; a++) {
        const float *x = maps + (size_t)a * per;
        double s = 0;
        for (int i = 0; i < n; i++) {
            int nk = causal ? i + 1 : n;
            for (int j = 0; j < nk; j++)
                s += (double)x[(size_t)i * (size_t)n + (size_t)j];
        }
        mean[a] = s / (double)m;
    }
    hs_status st = gram(maps, N, n, causal, mean, out, err);
    free(mean);
    if (st)
        return st;
    for (int a = 0; a < N; a++) {
        double va = out[(size_t)a * N + a];
        for (int b = 0; b < a; b++) {
            double vb = out[(size_t)b * N + b];
            double r = 0; /* zero variance on either side: no linear relation */
            if (va > 0 && vb > 0) {
                r = out[(size_t)a * N + b] / sqrt(va * vb);
                r = r > 1 ? 1 : r < -1 ? -1 : r;
            }
            out[(size_t)a * N + b] = r;
            out[(size_t)b * N + a] = r;
        }
    }
    for (int a = 0; a < N; a++)
        out[(size_t)a * N + a] = 1;
    return HS_OK;
}

/* Jensen-Shannon work shared by the threads: rows a = first, first + step, ... of the
 * lower triangle, so every pair is computed by one thread in a fixed order and the result
 * does not depend on the thread count. */
typedef struct js_job {
    const float *maps;
    const double *plogp; /* (N, n): sum_j p ln p of each row */
    double *out;
    int N, n, causal, first, step;
} js_job;

static void *js_rows(void *arg)
{
    const js_job *jb = arg;
    int N = jb->N, n = jb->n;
    size_t per = (size_t)n * (size_t)n;
    for (int a = jb->first; a < N; a += jb->step) {
        for (int b = 0; b < a; b++) {
            const float *x = jb->maps + (size_t)a * per, *y = jb->maps + (size_t)b * per;
            double total = 0;
            for (int i = 0; i < n; i++) {
                const float *p = x + (size_t)i * (size_t)n, *q = y + (size_t)i * (size_t)n;
                int nk = jb->causal ? i + 1 : n;
                double mlogm = 0;
                for (int j = 0; j < nk; j++) {
                    double mj = 0.5 * ((double)p[j] + (double)q[j]);
                    if (mj > 0)
                        mlogm += mj * log(mj);
                }
                /* JS = 1/2 KL(P||M) + 1/2 KL(Q||M) = 1/2 sum p ln p + 1/2 sum q ln q - sum m ln m */
                total += 0.5 * (jb->plogp[(size_t)a * (size_t)n + (size_t)i] +
                                jb->plogp[(size_t)b * (size_t)n + (size_t)i]) -
                         mlogm;
            }
            double js = total / n;
            if (js < 0) /* rounding when the rows are (nearly) equal */
                js = 0;
            jb->out[(size_t)a * N + b] = js;
            jb->out[(size_t)b * N + a] = js;
        }
    }
    return NULL;
}

#define JS_MAX_THREADS 16
#define JS_MIN_CELLS_PER_THREAD ((double)(1 << 22))

/* out: (N, N) mean over rows of the JS divergence between row distributions (nats). */
static hs_status jensen_shannon(const float *maps, int N, int n, int causal, double *out,
                                hs_error *err)
{
    size_t per = (size_t)n * (size_t)n;
    double *plogp = malloc((size_t)N * (size_t)n * sizeof *plogp);
    if (!plogp)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    for (int a = 0; a < N; a++)
        for (int i = 0; i < n; i++) {
            const float *row = maps + (size_t)a * per + (size_t)i * (size_t)n;
            int nk = causal ? i + 1 : n;
            double s = 0;
            for (int j = 0; j < nk; j++) {
                double p = (double)row[j];
                if (p > 0)
                    s += p * log(p);
            }
            plogp[(size_t)a * (size_t)n + (size_t)i] = s;
        }
    for (int a = 0; a < N; a++)
        out[(size_t)a * N + a] = 0;

    /* Threads only when there is enough work (one log per visible cell and pair). */
    double cells = 0.5 * (double)N * (double)(N - 1) * (double)per * (causal ? 0.5 : 1.0);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int T = ncpu > 1 ? (int)(ncpu < JS_MAX_THREADS ? ncpu : JS_MAX_THREADS) : 1;
    if (cells / T < JS_MIN_CELLS_PER_THREAD)
        T = (int)(cells / JS_MIN_CELLS_PER_THREAD) > 1 ? (int)(cells / JS_MIN_CELLS_PER_THREAD) : 1;
    if (T > N)
        T = N;
    js_job jobs[JS_MAX_THREADS];
    pthread_t tid[JS_MAX_THREADS];
    int started = 0;
    for (int t = 0; t < T; t++)
        jobs[t] = (js_job){maps, plogp, out, N, n, causal, t, T};
    for (int t = 1; t < T; t++) {
        if (pthread_create(&tid[t], NULL, js_rows, &jobs[t]) != 0)
            break;
        started = t;
    }
    /* Rows of threads that could not start are done here, after this thread's own. */
    js_rows(&jobs[0]);
    for (int t = started + 1; t < T; t++)
        js_rows(&jobs[t]);
    for (int t = 1; t <= started; t++)
        pthread_join(tid[t], NULL);
    free(plogp);
    return HS_OK;
}

hs_status hs_similarity_compute(const float *maps, int n_maps, int n, int causal,
                                hs_sim_method method, double *out, hs_error *err)
{
    hs_status st = hs_maps_check(maps, n_maps, n, err);
    if (st) {
        hs_error_prefix(err, "similarity");
        return st;
    }
    if (!out)
        return hs_fail(err, HS_E_ARG, "similarity: NULL output");
    if (method == HS_SIM_PEARSON)
        st = pearson(maps, n_maps, n, causal, out, err);
    else if (method == HS_SIM_JS)
        st = jensen_shannon(maps, n_maps, n, causal, out, err);
    else
        return hs_fail(err, HS_E_ARG, "similarity: unknown method %d", (int)method);
    if (st)
        hs_error_prefix(err, "similarity");
    return st;
}

hs_status hs_similarity_distance(const double *sim, int n_maps, hs_sim_method method,
                                 double *dist, hs_error *err)
{
    if (n_maps < 1)
        return hs_fail(err, HS_E_ARG, "similarity distance: n_maps is %d, expected >= 1", n_maps);
    if (!sim || !dist)
        return hs_fail(err, HS_E_ARG, "similarity distance: NULL buffer");
    if (method != HS_SIM_PEARSON && method != HS_SIM_JS)
        return hs_fail(err, HS_E_ARG, "similarity distance: unknown method %d", (int)method);
    size_t N = (size_t)n_maps;
    for (size_t a = 0; a < N; a++)
        for (size_t b = 0; b < N; b++) {
            double s = sim[a * N + b];
            dist[a * N + b] = a == b ? 0.0 : method == HS_SIM_PEARSON ? 1.0 - s : s;
        }
    return HS_OK;
}
