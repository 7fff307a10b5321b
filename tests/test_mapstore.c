/* The map store of analyze (in memory and spilled to a file), the pairwise comparisons read
 * from it in row blocks, and analyze's results with the maps in memory or in a file. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/mapstore.h"
#include "headscope/analysis.h"
#include "headscope/forward.h"
#include "headscope/report.h"
#include "testutil.h"

/* A distinct value for entry e of map k. */
static float entry(int k, size_t e) { return (float)k * 1000.0f + (float)e * 0.25f; }

static void check_store(size_t mem_limit, int want_spilled)
{
    enum { L = 3, H = 2, N = 7 };
    hs_error err = {{0}};
    hs_mapstore *s = NULL;
    float layer[H * N * N], map[N * N], rows[3 * 2 * N];
    cr_assert_eq(hs_mapstore_new(L * H, N, mem_limit, NULL, &s, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_mapstore_spilled(s), want_spilled);
    for (int l = L - 1; l >= 0; l--) { /* any order */
        for (int h = 0; h < H; h++)
            for (size_t e = 0; e < N * N; e++)
                layer[(size_t)h * N * N + e] = entry(l * H + h, e);
        cr_assert_eq(hs_mapstore_put(s, l * H, H, layer, &err), HS_OK, "%s", err.msg);
    }
    for (int k = 0; k < L * H; k++) {
        cr_assert_eq(hs_mapstore_get(s, k, map, &err), HS_OK, "%s", err.msg);
        for (size_t e = 0; e < N * N; e++)
            cr_assert_eq(map[e], entry(k, e), "map %d entry %zu", k, e);
    }
    int idx[3] = {5, 0, 3};
    cr_assert_eq(hs_mapstore_rows(s, idx, 3, 4, 2, rows, &err), HS_OK, "%s", err.msg);
    for (int c = 0; c < 3; c++)
        for (size_t e = 0; e < 2 * N; e++)
            cr_assert_eq(rows[(size_t)c * 2 * N + e], entry(idx[c], 4 * N + e));
    cr_assert_eq(hs_mapstore_put(s, 5, 2, layer, &err), HS_E_ARG);
    cr_assert_eq(hs_mapstore_rows(s, idx, 3, 6, 2, rows, &err), HS_E_ARG);
    idx[0] = L * H;
    cr_assert_eq(hs_mapstore_rows(s, idx, 1, 0, 1, rows, &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "map store: map 6 of 6");
    hs_mapstore_free(s);
}

Test(mapstore, keeps_small_maps_in_memory)
{
    check_store(HS_MAPSTORE_MEM_DEFAULT, 0);
}

Test(mapstore, spilled_maps_read_back_the_same)
{
    check_store(0, 1);
}

Test(mapstore, unwritable_folder_is_a_one_line_io_error)
{
    hs_error err = {{0}};
    hs_mapstore *s = NULL;
    cr_assert_eq(hs_mapstore_new(4, 8, 0, "/nonexistent-headscope-dir", &s, &err), HS_E_IO);
    cr_assert_null(s);
    cr_assert_str_eq(err.msg, "cannot create a temporary file for 0 MB of attention maps in "
                              "'/nonexistent-headscope-dir': No such file or directory");
    cr_assert_eq(hs_mapstore_new(0, 8, 0, NULL, &s, &err), HS_E_ARG);
}

/* ---- pairwise comparisons over several row blocks, against direct double loops ------- */

/* maps: (M, n, n) random causal rows that sum to 1 (the last map equals the first). */
static float *random_maps(int M, int n, uint64_t seed)
{
    float *x = calloc((size_t)M * n * n, sizeof *x);
    for (int k = 0; k < M; k++)
        for (int i = 0; i < n; i++) {
            float *row = x + ((size_t)k * n + i) * n;
            double s = 0;
            for (int j = 0; j <= i; j++) {
                seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                row[j] = (float)((seed >> 40) % 1000) * (k == 1 && j > 0 ? 0.0f : 1.0f) + 1.0f;
                s += row[j];
            }
            for (int j = 0; j <= i; j++)
                row[j] = (float)(row[j] / s);
        }
    memcpy(x + (size_t)(M - 1) * n * n, x, (size_t)n * n * sizeof *x);
    return x;
}

Test(mapstore, pairwise_over_many_row_blocks_matches_direct_sums)
{
    enum { M = 8, n = 600 }; /* 8 x 600 entries a row: blocks of 109 rows */
    float *x = random_maps(M, n, 7);
    hs_error err = {{0}};
    double *r = malloc(M * M * sizeof *r), *js = malloc(M * M * sizeof *js);
    double *fr = malloc(M * M * sizeof *fr), layer[2];
    cr_assert_eq(hs_similarity_compute(x, M, n, TU_CAUSAL, 1, HS_SIM_PEARSON, r,
                                       &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_similarity_compute(x, M, n, TU_CAUSAL, 1, HS_SIM_JS, js,
                                       &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_diversity_compute(x, 2, 4, n, TU_BIDIR, 1, layer, fr,
                                      &err), HS_OK, "%s", err.msg);
    size_t per = (size_t)n * n, vis = (size_t)n * (n + 1) / 2;
    for (int a = 0; a < M; a++)
        for (int b = 0; b < M; b++) {
            const float *p = x + a * per, *q = x + b * per;
            double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0, d2 = 0, jsd = 0;
            for (int i = 0; i < n; i++)
                for (int j = 0; j <= i; j++) {
                    ma += p[i * n + j];
                    mb += q[i * n + j];
                }
            ma /= (double)vis;
            mb /= (double)vis;
            for (int i = 0; i < n; i++) {
                double row = 0;
                for (int j = 0; j < n; j++) {
                    double u = p[i * n + j], v = q[i * n + j];
                    d2 += (u - v) * (u - v);
                    if (j > i)
                        continue;
                    sab += (u - ma) * (v - mb);
                    saa += (u - ma) * (u - ma);
                    sbb += (v - mb) * (v - mb);
                    double mm = 0.5 * (u + v);
                    row += (u > 0 ? 0.5 * u * log(u / mm) : 0) + (v > 0 ? 0.5 * v * log(v / mm) : 0);
                }
                jsd += row;
            }
            double want_r = a == b ? 1.0 : sab / sqrt(saa * sbb);
            cr_assert_float_eq(r[a * M + b], want_r, 1e-9, "r %d %d", a, b);
            cr_assert_float_eq(js[a * M + b], a == b ? 0.0 : jsd / n, 1e-9, "js %d %d", a, b);
            cr_assert_float_eq(fr[a * M + b], sqrt(d2), 1e-9, "frobenius %d %d", a, b);
        }
    cr_assert_eq(fr[(M - 1) * M], 0.0); /* identical maps: summed directly, exactly 0 */
    double l0 = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            l0 += fr[a * M + b];
    cr_assert_float_eq(layer[0], l0 / 16, 1e-12);
    free(x);
    free(r);
    free(js);
    free(fr);
}

/* ---- analyze with the maps in memory and in a file -------------------------------- */

static const int32_t text_ids[] = {464, 3797, 3332, 319, 262, 2603, 13, 383, 3797, 3332,
                                   319, 262, 2603, 13, 383, 3290, 4966, 287, 262, 3952, 13};

static hs_analysis *run(const hs_model *m, size_t mem, hs_sim_method sim, int keep)
{
    hs_error err = {{0}};
    hs_analyze_opts o;
    hs_analyze_opts_default(&o);
    o.hash_files = 0;
    o.pruning = 0;
    o.maps_memory_max = mem;
    o.similarity = sim;
    o.keep_maps = keep;
    hs_analyze_input in = {.ids = text_ids, .n = (int)(sizeof text_ids / sizeof *text_ids)};
    hs_analysis *a = NULL;
    cr_assert_eq(hs_analyze_run(m, &in, &o, &a, &err), HS_OK, "%s", err.msg);
    return a;
}

Test(mapstore, analyze_spilled_equals_in_memory_and_the_trace)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load("fixtures/tiny-gpt2", &m, &err), HS_OK, "%s", err.msg);
    int n = (int)(sizeof text_ids / sizeof *text_ids);
    hs_trace *t = NULL;
    cr_assert_eq(hs_trace_new(m, n, &t, &err), HS_OK);
    hs_forward_opts fo = {.on_attn = hs_trace_observe, .user = t};
    cr_assert_eq(hs_forward(m, text_ids, NULL, n, &fo, NULL, &err), HS_OK, "%s", err.msg);
    int N = t->n_layer * t->n_head;
    size_t per = (size_t)n * n;
    double *sim = malloc((size_t)N * N * sizeof *sim);
    float *map = malloc(per * sizeof *map);
    for (int s = 0; s < 2; s++) {
        hs_sim_method meth = s ? HS_SIM_JS : HS_SIM_PEARSON;
        hs_analysis *mem = run(m, HS_MAPSTORE_MEM_DEFAULT, meth, 1), *file = run(m, 0, meth, 1);
        cr_assert_eq(file->n_heads, N);
        for (int k = 0; k < N; k++) {
            const hs_head_result *x = &mem->heads[k], *y = &file->heads[k];
            cr_assert(!memcmp(&x->entropy, &y->entropy, sizeof x->entropy));
            cr_assert(!memcmp(&x->text_scores, &y->text_scores, sizeof x->text_scores));
            cr_assert_eq(memcmp(&x->ablation_delta, &y->ablation_delta, sizeof(double)), 0);
            cr_assert_eq(hs_analysis_map(file, k, map, &err), HS_OK, "%s", err.msg);
            cr_assert(!memcmp(map, t->attn + (size_t)k * per, per * sizeof *map), "map %d", k);
        }
        cr_assert(!memcmp(mem->similarity, file->similarity, (size_t)N * N * sizeof(double)));
        cr_assert(!memcmp(mem->frobenius, file->frobenius, (size_t)N * N * sizeof(double)));
        /* the same numbers as the array functions on the recorded trace */
        cr_assert_eq(hs_similarity_compute(t->attn, N, n, TU_CAUSAL, 1, meth, sim, &err), HS_OK);
        cr_assert(!memcmp(sim, file->similarity, (size_t)N * N * sizeof *sim));
        hs_analysis_free(mem);
        hs_analysis_free(file);
    }
    hs_analysis *none = run(m, 0, HS_SIM_PEARSON, 0);
    cr_assert_null(none->maps);
    cr_assert_eq(hs_analysis_map(none, 0, map, &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "the analysis kept no attention maps");
    hs_analysis_free(none);
    free(map);
    free(sim);
    hs_trace_free(t);
    hs_model_free(m);
}

Test(mapstore, analyze_reports_an_unwritable_maps_folder)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load("fixtures/tiny-gpt2", &m, &err), HS_OK, "%s", err.msg);
    hs_analyze_opts o;
    hs_analyze_opts_default(&o);
    o.hash_files = 0;
    o.ablation = 0;
    o.maps_memory_max = 0;
    o.maps_dir = "/nonexistent-headscope-dir";
    hs_analyze_input in = {.ids = text_ids, .n = 5};
    hs_analysis *a = NULL;
    cr_assert_eq(hs_analyze_run(m, &in, &o, &a, &err), HS_E_IO);
    cr_assert_null(a);
    cr_assert_str_eq(err.msg, "cannot create a temporary file for 0 MB of attention maps in "
                              "'/nonexistent-headscope-dir': No such file or directory");
    hs_model_free(m);
}
