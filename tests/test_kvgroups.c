/* Similarity within and across KV groups (hs_kv_similarity_compute, analyze's
 * kv_groups.similarity): a hand-worked matrix, Holm's adjustment worked by hand, the
 * refusals, and the grouped-query fixtures
 * (tiny-llama: 8 query heads on 2 KV heads; tiny-qwen2: 4 on 1) against the float64 NumPy
 * computation of fixtures/ref/make_kv_golden.py from the reference's recorded maps
 * (fixtures/family-golden/kv_similarity.json): from those maps through headscope's similarity
 * (1e-9), and end to end from headscope's own forward pass (1e-4: maps within 1e-5); the
 * pictures grouped by KV head (the gallery and importance grids, the similarity SVG, which
 * files the analysis writes), and a failed picture's clean-up. */
#include <dirent.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "analysis/analysis_internal.h"
#include "headscope/analysis.h"
#include "headscope/render.h"
#include "headscope/report.h"
#include "testutil.h"

#define GOLD "fixtures/family-golden/"

/* The NaN-aware comparison of a value with a golden number or null. */
static void expect_num(const char *what, double got, const cJSON *want, double tol)
{
    if (cJSON_IsNull(want)) {
        cr_expect(isnan(got), "%s: %.10g, expected undefined (null)", what, got);
        return;
    }
    cr_assert(cJSON_IsNumber(want), "%s: golden is not a number", what);
    cr_expect(fabs(got - want->valuedouble) <= tol, "%s: %.10g, reference %.10g (tol %g)", what,
              got, want->valuedouble, tol);
}

static void expect_array(const char *what, const double *got, const cJSON *want, int n, double tol)
{
    char name[128];
    cr_assert_eq(cJSON_GetArraySize(want), n, "%s: golden has %d entries, expected %d", what,
                 cJSON_GetArraySize(want), n);
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s[%d]", what, i);
        expect_num(name, got[i], cJSON_GetArrayItem(want, i), tol);
    }
}

/* Every measure of kv against the golden object of one case and method; p-values within
 * p_tol (a count of the 999 orders; their Holm adjustment within n_layer times that), the
 * cluster measures within tol. */
static void expect_kv(const char *what, const hs_kv_similarity *kv, const cJSON *g, double tol,
                      double p_tol)
{
    char name[160];
    int L = kv->n_layer, G = kv->n_kv_head;
    snprintf(name, sizeof name, "%s within", what);
    expect_array(name, kv->within, cJSON_GetObjectItem(g, "within"), L, tol);
    snprintf(name, sizeof name, "%s across", what);
    expect_array(name, kv->across, cJSON_GetObjectItem(g, "across"), L, tol);
    snprintf(name, sizeof name, "%s p_value", what);
    expect_array(name, kv->p_value, cJSON_GetObjectItem(g, "p_value"), L, p_tol);
    /* Holm multiplies a p by at most the number of layers */
    snprintf(name, sizeof name, "%s p_value_holm", what);
    expect_array(name, kv->p_holm, cJSON_GetObjectItem(g, "p_value_holm"), L, p_tol * L);
    snprintf(name, sizeof name, "%s within_mean", what);
    expect_num(name, kv->within_mean, cJSON_GetObjectItem(g, "within_mean"), tol);
    snprintf(name, sizeof name, "%s across_mean", what);
    expect_num(name, kv->across_mean, cJSON_GetObjectItem(g, "across_mean"), tol);
    snprintf(name, sizeof name, "%s other_layers_mean", what);
    expect_num(name, kv->other_layers_mean, cJSON_GetObjectItem(g, "other_layers_mean"), tol);
    cr_expect_eq(kv->n_within, cJSON_GetObjectItem(g, "n_within_pairs")->valueint, "%s", what);
    cr_expect_eq(kv->n_across, cJSON_GetObjectItem(g, "n_across_pairs")->valueint, "%s", what);
    const cJSON *gr = cJSON_GetObjectItem(g, "groups");
    for (int l = 0; l < L; l++)
        for (int a = 0; a < G; a++) {
            snprintf(name, sizeof name, "%s groups[%d][%d]", what, l, a);
            expect_array(name, kv->groups + ((size_t)l * G + a) * G,
                         cJSON_GetArrayItem(cJSON_GetArrayItem(gr, l), a), G, tol);
        }
    const cJSON *cl = cJSON_GetObjectItem(g, "clusters");
    snprintf(name, sizeof name, "%s adjusted_rand", what);
    expect_num(name, kv->adjusted_rand, cJSON_GetObjectItem(cl, "adjusted_rand"), 1e-12);
    snprintf(name, sizeof name, "%s same_cluster_within", what);
    expect_num(name, kv->same_cluster_within, cJSON_GetObjectItem(cl, "same_cluster_within"), 1e-12);
    snprintf(name, sizeof name, "%s same_cluster_across", what);
    expect_num(name, kv->same_cluster_across, cJSON_GetObjectItem(cl, "same_cluster_across"), 1e-12);
}

/* 2 layers x 4 heads, 2 KV heads (heads 0,1 | 2,3); symmetric, entries chosen by hand. */
static const double HAND[8 * 8] = {
    /*        0.0   0.1   0.2   0.3   1.0   1.1   1.2   1.3 */
    /* 0.0 */ 1.0,  0.8,  0.1,  0.3,  0.0,  0.2,  0.4,  0.6,
    /* 0.1 */ 0.8,  1.0,  0.5, -0.1,  0.1,  0.1,  0.1,  0.1,
    /* 0.2 */ 0.1,  0.5,  1.0,  0.6,  0.2,  0.2,  0.2,  0.2,
    /* 0.3 */ 0.3, -0.1,  0.6,  1.0,  0.3,  0.3,  0.3,  0.3,
    /* 1.0 */ 0.0,  0.1,  0.2,  0.3,  1.0, -0.2,  0.0,  0.0,
    /* 1.1 */ 0.2,  0.1,  0.2,  0.3, -0.2,  1.0,  0.4,  0.2,
    /* 1.2 */ 0.4,  0.1,  0.2,  0.3,  0.0,  0.4,  1.0,  0.9,
    /* 1.3 */ 0.6,  0.1,  0.2,  0.3,  0.0,  0.2,  0.9,  1.0,
};

Test(kvgroups, hand_worked_matrix)
{
    int idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int clusters[8] = {0, 0, 1, 1, 2, 3, 4, 4}; /* within pairs 0.0-0.1, 0.2-0.3, 1.2-1.3 */
    hs_kv_similarity *kv = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_kv_similarity_compute(HAND, 8, idx, 2, 4, 2, HS_SIM_PEARSON, clusters, &kv,
                                          &err), HS_OK, "%s", err.msg);
    /* layer 0: within (0.8 + 0.6) / 2, across (0.1 + 0.3 + 0.5 - 0.1) / 4;
     * layer 1: within (-0.2 + 0.9) / 2, across (0 + 0 + 0.4 + 0.2) / 4 */
    cr_expect(fabs(kv->within[0] - 0.7) < 1e-12 && fabs(kv->across[0] - 0.2) < 1e-12);
    cr_expect(fabs(kv->within[1] - 0.35) < 1e-12 && fabs(kv->across[1] - 0.15) < 1e-12);
    cr_expect(fabs(kv->within_mean - 0.525) < 1e-12 && fabs(kv->across_mean - 0.175) < 1e-12);
    cr_expect_eq(kv->n_within, 4);
    cr_expect_eq(kv->n_across, 8);
    /* the 16 pairs of different layers: rows 0.0..0.3 of columns 1.0..1.3 sum to
     * 1.2 + 0.4 + 0.8 + 1.2 = 3.6 */
    cr_expect(fabs(kv->other_layers_mean - 3.6 / 16) < 1e-12, "%g", kv->other_layers_mean);
    /* groups[0]: [[0.8, 0.2], [0.2, 0.6]]; groups[1]: [[-0.2, 0.15], [0.15, 0.9]] */
    const double want[8] = {0.8, 0.2, 0.2, 0.6, -0.2, 0.15, 0.15, 0.9};
    for (int e = 0; e < 8; e++)
        cr_expect(fabs(kv->groups[e] - want[e]) < 1e-12, "groups entry %d: %g", e, kv->groups[e]);
    /* 28 pairs: 4 in one KV group, 3 in one cluster, 3 in both:
     * ARI = (3 - 4*3/28) / (3.5 - 4*3/28) = (72/28) / (86/28) = 36/43 */
    cr_expect(fabs(kv->adjusted_rand - 36.0 / 43.0) < 1e-12, "%g", kv->adjusted_rand);
    cr_expect(fabs(kv->same_cluster_within - 0.75) < 1e-12);
    cr_expect(fabs(kv->same_cluster_across - 0.0) < 1e-12);
    /* 3 ways to split 4 heads into 2 pairs; layer 0's (0.7) is the most alike, and the
     * random orders land on it a third of the time */
    cr_expect(kv->p_value[0] > 0.25 && kv->p_value[0] < 0.42, "p %g", kv->p_value[0]);
    /* two layers tested: the smaller p doubled, the larger at least that */
    double lo = fmin(kv->p_value[0], kv->p_value[1]), hi = fmax(kv->p_value[0], kv->p_value[1]);
    int at_lo = kv->p_value[0] <= kv->p_value[1] ? 0 : 1;
    cr_expect(fabs(kv->p_holm[at_lo] - fmin(1.0, 2 * lo)) < 1e-15, "Holm %g, p %g",
              kv->p_holm[at_lo], lo);
    cr_expect(fabs(kv->p_holm[1 - at_lo] - fmin(1.0, fmax(2 * lo, hi))) < 1e-15, "Holm %g, p %g",
              kv->p_holm[1 - at_lo], hi);
    hs_kv_similarity_free(kv);

    /* clusters equal to the KV groups: ARI 1; as a divergence, smaller is more alike */
    int same[8] = {0, 0, 1, 1, 2, 2, 3, 3};
    cr_assert_eq(hs_kv_similarity_compute(HAND, 8, idx, 2, 4, 2, HS_SIM_JS, same, &kv, &err), HS_OK);
    cr_expect(fabs(kv->adjusted_rand - 1.0) < 1e-12);
    cr_expect(kv->p_value[0] == 1.0, "layer 0 is the least alike split as a divergence: %g",
              kv->p_value[0]);
    hs_kv_similarity_free(kv);

    /* one layer analysed (--layers 1), whose heads are alike as layer 0's above: layer 0
     * undefined, no other-layer pairs */
    double one[16];
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            one[a * 4 + b] = HAND[a * 8 + b];
    cr_assert_eq(hs_kv_similarity_compute(one, 4, idx + 4, 2, 4, 2, HS_SIM_PEARSON, NULL, &kv,
                                          &err), HS_OK, "%s", err.msg);
    cr_expect(isnan(kv->within[0]) && isnan(kv->p_value[0]) && isnan(kv->other_layers_mean));
    cr_expect(isnan(kv->p_holm[0]) && kv->p_holm[1] == kv->p_value[1], "one layer tested: as is");
    cr_expect(isnan(kv->adjusted_rand), "no clusters given: undefined");
    cr_expect(fabs(kv->within[1] - 0.7) < 1e-12, "%g", kv->within[1]);
    hs_kv_similarity_free(kv);

    /* multi-query: one KV head per layer, no across pairs */
    cr_assert_eq(hs_kv_similarity_compute(HAND, 8, idx, 2, 4, 1, HS_SIM_PEARSON, NULL, &kv,
                                          &err), HS_OK, "%s", err.msg);
    cr_expect(isnan(kv->across[0]) && isnan(kv->across_mean) && isnan(kv->p_value[1]));
    cr_expect(isnan(kv->p_holm[0]) && isnan(kv->p_holm[1]), "no test, nothing to adjust");
    cr_expect(fabs(kv->within[0] - (0.8 + 0.1 + 0.3 + 0.5 - 0.1 + 0.6) / 6) < 1e-12);
    cr_expect_eq(kv->n_across, 0);
    hs_kv_similarity_free(kv);
}

/* Holm (1979) worked by hand: sort the tested p ascending, multiply the i-th of m by
 * m - i + 1, take the running maximum, cap at 1; untested (NaN) entries are not counted. */
Test(kvgroups, holm_adjustment_worked_by_hand)
{
    int order[5];
    double out[5];
    /* m = 4: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> max 0.06 */
    const double p[5] = {0.01, NAN, 0.04, 0.03, 0.005};
    const double want[5] = {0.03, NAN, 0.06, 0.06, 0.02};
    hs_holm_adjust(p, 5, order, out);
    for (int i = 0; i < 5; i++) {
        if (isnan(want[i]))
            cr_expect(isnan(out[i]), "entry %d: %g, want NaN (not tested)", i, out[i]);
        else
            cr_expect(fabs(out[i] - want[i]) < 1e-15, "entry %d: %.17g, want %g", i, out[i], want[i]);
    }
    /* ties: 0.02*3 = 0.06 for both (in either order), 0.5*1; capped at 1: 0.6*2, 0.7 */
    const double tie[3] = {0.02, 0.5, 0.02}, tie_want[3] = {0.06, 0.5, 0.06};
    hs_holm_adjust(tie, 3, order, out);
    for (int i = 0; i < 3; i++)
        cr_expect(fabs(out[i] - tie_want[i]) < 1e-15, "tie entry %d: %.17g", i, out[i]);
    const double big[2] = {0.7, 0.6};
    hs_holm_adjust(big, 2, order, out);
    cr_expect(out[0] == 1.0 && out[1] == 1.0, "capped: %g %g", out[0], out[1]);
    /* one test: unchanged; none: all NaN */
    const double one[3] = {NAN, 0.25, NAN};
    hs_holm_adjust(one, 3, order, out);
    cr_expect(isnan(out[0]) && out[1] == 0.25 && isnan(out[2]));
}

Test(kvgroups, refuses_what_is_not_grouped_query)
{
    int idx[8] = {0, 1, 2, 3, 4, 5, 6, 7}, bad[2] = {3, 1};
    hs_kv_similarity *kv = (hs_kv_similarity *)&kv;
    hs_error err = {{0}};
    cr_expect_eq(hs_kv_similarity_compute(HAND, 8, idx, 2, 4, 3, HS_SIM_PEARSON, NULL, &kv, &err),
                 HS_E_ARG);
    cr_expect(strstr(err.msg, "4 query heads and 3 KV heads"), "%s", err.msg);
    cr_expect_null(kv, "the output is cleared on failure");
    cr_expect_eq(hs_kv_similarity_compute(HAND, 8, idx, 2, 4, 4, HS_SIM_PEARSON, NULL, &kv, &err),
                 HS_E_ARG);
    cr_expect_eq(hs_kv_similarity_compute(HAND, 2, bad, 2, 4, 2, HS_SIM_PEARSON, NULL, &kv, &err),
                 HS_E_ARG);
    cr_expect(strstr(err.msg, "out of order"), "%s", err.msg);
    cr_expect_eq(hs_kv_similarity_compute(HAND, 8, idx, 1, 4, 2, HS_SIM_PEARSON, NULL, &kv, &err),
                 HS_E_ARG, "head 1.0 in a 1-layer model");
    hs_kv_similarity_free(NULL);
}

/* The analysed heads of a golden case: its "layers", all heads of each. */
static int case_heads(const cJSON *e, int H, int *idx)
{
    int N = 0;
    const cJSON *l;
    cJSON_ArrayForEach(l, cJSON_GetObjectItem(e, "layers"))
        for (int h = 0; h < H; h++)
            idx[N++] = l->valueint * H + h;
    return N;
}

/* From the reference's recorded maps: headscope's similarity and KV measures of the maps, its
 * clustering at the golden cut, against the NumPy computation. */
Test(kvgroups, measures_of_the_recorded_maps_match_numpy)
{
    cJSON *gold = tu_json_file(GOLD "kv_similarity.json");
    const cJSON *e;
    int cases = 0;
    cJSON_ArrayForEach(e, gold) {
        char path[256], what[160];
        snprintf(path, sizeof path, GOLD "%s.attn.npy",
                 cJSON_GetObjectItem(e, "case")->valuestring);
        hs_npy A = tu_npy(path);
        int L = (int)A.shape[0], H = (int)A.shape[1], n = (int)A.shape[2];
        int G = cJSON_GetObjectItem(e, "n_kv_head")->valueint, idx[64];
        int N = case_heads(e, H, idx);
        size_t nn = (size_t)n * n;
        float *maps = malloc((size_t)N * nn * sizeof *maps);
        for (int k = 0; k < N; k++)
            memcpy(maps + k * nn, (const float *)A.data + (size_t)idx[k] * nn, nn * sizeof *maps);
        for (int meth = 0; meth < 2; meth++) {
            const cJSON *g = cJSON_GetObjectItem(e, meth ? "js" : "pearson");
            const cJSON *cl = cJSON_GetObjectItem(g, "clusters");
            hs_sim_method sm = meth ? HS_SIM_JS : HS_SIM_PEARSON;
            double *sim = malloc((size_t)N * N * sizeof *sim), *dist = malloc((size_t)N * N * sizeof *dist);
            int labels[64], nc;
            hs_error err = {{0}};
            cr_assert_eq(hs_similarity_compute(maps, N, n, TU_CAUSAL, 1, sm, sim,
                                               &err), HS_OK, "%s", err.msg);
            cr_assert_eq(hs_similarity_distance(sim, N, sm, dist, &err), HS_OK);
            hs_linkage *lk = NULL;
            cr_assert_eq(hs_linkage_build(dist, N, &lk, &err), HS_OK);
            cr_assert_eq(hs_linkage_cut(lk, cJSON_GetObjectItem(cl, "threshold")->valuedouble,
                                        labels, &nc, &err), HS_OK);
            snprintf(what, sizeof what, "%s %s", e->string, meth ? "js" : "pearson");
            const cJSON *wl = cJSON_GetObjectItem(cl, "labels");
            for (int k = 0; k < N; k++)
                cr_expect_eq(labels[k], cJSON_GetArrayItem(wl, k)->valueint,
                             "%s: head %d in cluster %d, reference %d", what, k, labels[k],
                             cJSON_GetArrayItem(wl, k)->valueint);
            hs_kv_similarity *kv = NULL;
            cr_assert_eq(hs_kv_similarity_compute(sim, N, idx, L, H, G, sm, labels, &kv, &err),
                         HS_OK, "%s", err.msg);
            expect_kv(what, kv, g, 1e-9, 0.0);
            hs_kv_similarity_free(kv);
            hs_linkage_free(lk);
            free(sim);
            free(dist);
        }
        free(maps);
        hs_npy_free(&A);
        cases++;
    }
    cr_expect_eq(cases, 5, "the golden file holds %d cases", cases);
    cJSON_Delete(gold);
}

/* End to end: hs_analyze_run on the golden ids, from headscope's own pass. */
static void analyze_case(const char *name, const char *model_dir, int meth)
{
    cJSON *gold = tu_json_file(GOLD "kv_similarity.json");
    const cJSON *e = cJSON_GetObjectItem(gold, name);
    const cJSON *g = cJSON_GetObjectItem(e, meth ? "js" : "pearson");
    char path[256];
    snprintf(path, sizeof path, GOLD "%s.ids.npy", cJSON_GetObjectItem(e, "case")->valuestring);
    hs_npy ids = tu_npy(path);
    hs_error err = {{0}};
    hs_model *m = NULL;
    cr_assert_eq(hs_model_load(model_dir, &m, &err), HS_OK, "%s: %s", model_dir, err.msg);
    int L = hs_model_config_of(m)->n_layer;
    unsigned char layers[16] = {0};
    const cJSON *l;
    cJSON_ArrayForEach(l, cJSON_GetObjectItem(e, "layers"))
        layers[l->valueint] = 1;
    hs_analyze_opts o;
    hs_analyze_opts_default(&o);
    o.ablation = o.gradient = o.probe = o.composition = o.rollout = o.dla = o.norm_based = 0;
    o.hash_files = 0;
    o.layers = layers;
    o.similarity = meth ? HS_SIM_JS : HS_SIM_PEARSON;
    o.cluster_threshold = cJSON_GetObjectItem(cJSON_GetObjectItem(g, "clusters"), "threshold")->valuedouble;
    hs_analyze_input in = {.ids = ids.data, .n = (int)ids.count};
    hs_analysis *a = NULL;
    cr_assert_eq(hs_analyze_run(m, &in, &o, &a, &err), HS_OK, "%s", err.msg);
    cr_assert_not_null(a->kv_similarity, "%s: a grouped-query model has kv_similarity", name);
    cr_expect_eq(a->kv_similarity->n_layer, L);
    char what[96];
    snprintf(what, sizeof what, "analyze %s %s", name, meth ? "js" : "pearson");
    expect_kv(what, a->kv_similarity, g, 1e-4, 0.0021);
    char *json = hs_report_json(a, NULL, 0, 0);
    cJSON *r = cJSON_Parse(json);
    const cJSON *ks = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "kv_groups"), "similarity");
    cr_assert(cJSON_IsObject(ks), "%s: report has kv_groups.similarity", what);
    cr_expect_str_eq(cJSON_GetObjectItem(ks, "method")->valuestring, meth ? "jensen_shannon" : "pearson");
    expect_array("report within", a->kv_similarity->within, cJSON_GetObjectItem(ks, "within"), L,
                 1e-15); /* cJSON prints 15 digits when they read back within an epsilon */
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(ks, "groups")), L);
    cJSON_Delete(r);
    free(json);
    hs_analysis_free(a);
    hs_model_free(m);
    hs_npy_free(&ids);
    cJSON_Delete(gold);
}

Test(kvgroups, analyze_llama_matches_numpy) { analyze_case("tiny_llama_text", "fixtures/family-models/tiny-llama", 0); }
Test(kvgroups, analyze_llama_js_matches_numpy) { analyze_case("tiny_llama_rand", "fixtures/family-models/tiny-llama", 1); }
Test(kvgroups, analyze_llama_layers_match_numpy) { analyze_case("tiny_llama_text_layers12", "fixtures/family-models/tiny-llama", 1); }
Test(kvgroups, analyze_qwen2_multi_query_matches_numpy) { analyze_case("tiny_qwen2_text", "fixtures/family-models/tiny-qwen2", 0); }
Test(kvgroups, analyze_qwen2_js_matches_numpy) { analyze_case("tiny_qwen2_rand", "fixtures/family-models/tiny-qwen2", 1); }

/* The model of model_dir (*m, the caller frees) analysed on six ids (a repeated triple), with
 * only the text's pass and the pairwise measures. */
static hs_analysis *quick_analysis(const char *model_dir, hs_model **m)
{
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load(model_dir, m, &err), HS_OK, "%s: %s", model_dir, err.msg);
    int32_t ids[6] = {464, 797, 332, 464, 797, 332};
    hs_analyze_opts o;
    hs_analyze_opts_default(&o);
    o.ablation = o.gradient = o.probe = o.composition = o.rollout = o.dla = o.norm_based = 0;
    o.hash_files = 0;
    hs_analyze_input in = {.ids = ids, .n = 6};
    hs_analysis *a = NULL;
    cr_assert_eq(hs_analyze_run(*m, &in, &o, &a, &err), HS_OK, "%s", err.msg);
    return a;
}

Test(kvgroups, absent_without_shared_kv_heads)
{
    hs_model *m = NULL;
    hs_analysis *a = quick_analysis("fixtures/tiny-gpt2", &m);
    cr_expect_null(a->kv_similarity);
    char *json = hs_report_json(a, NULL, 0, 0);
    cJSON *r = cJSON_Parse(json);
    cr_expect(cJSON_IsNull(cJSON_GetObjectItem(r, "kv_groups")), "kv_groups is null, not zeros");
    cJSON_Delete(r);
    free(json);
    hs_analysis_free(a);
    hs_model_free(m);
}

/* ---- pictures ------------------------------------------------------------------------ */

static const uint8_t *pix(const hs_image *img, int x, int y)
{
    return img->rgb + 3 * ((size_t)y * (size_t)img->w + (size_t)x);
}

static int dark(const uint8_t *p) { return p[0] < 80 && p[1] < 80 && p[2] < 80; }
static int white(const uint8_t *p) { return p[0] == 255 && p[1] == 255 && p[2] == 255; }

Test(kvgroups, gallery_rules_the_groups_apart_and_names_them)
{
    int L = 2, H = 4, n = 3;
    float maps[2 * 4 * 9];
    for (int i = 0; i < 2 * 4 * 9; i++)
        maps[i] = 0.1f * (float)(i % 7);
    hs_gallery_opts o = {.heads_per_group = 2};
    hs_image img = {0}, plain = {0};
    hs_layout lay, lp;
    hs_error err = {{0}};
    cr_assert_eq(hs_gallery_render(maps, L, H, n, &o, &img, &lay, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_gallery_render(maps, L, H, n, NULL, &plain, &lp, &err), HS_OK);
    /* between heads 1 and 2 (KV0 | KV1): a dark rule down the whole grid, in the gap */
    hs_rect h1 = hs_layout_cell(&lay, 0, 1), h2 = hs_layout_cell(&lay, 0, 2);
    hs_rect h0 = hs_layout_cell(&lay, 0, 0);
    cr_assert_gt(lay.gap, 1, "gap %d", lay.gap);
    for (int y = lay.grid.y; y < lay.grid.y + lay.grid.h; y++)
        cr_expect(dark(pix(&img, h2.x - lay.gap / 2 - 1, y)) || dark(pix(&img, h2.x - lay.gap / 2, y)),
                  "rule at row %d", y);
    int mid = lay.grid.y + lay.cell_h / 2;
    cr_expect(white(pix(&img, h1.x - 1, mid)), "no rule between heads 0 and 1 of one group");
    cr_expect(white(pix(&plain, hs_layout_cell(&lp, 0, 2).x - 1, mid)), "no rule without groups");
    /* the group names sit in a band above the head labels, over each group */
    cr_expect_gt(lay.grid.y, lp.grid.y, "the band moves the grid down");
    int ink0 = 0, ink1 = 0;
    for (int y = lay.grid.y - (lay.grid.y - lp.grid.y) - 14; y < lay.grid.y - 14; y++)
        for (int x = h0.x; x < h1.x + h1.w; x++)
            ink0 += !white(pix(&img, x, y)), ink1 += !white(pix(&img, x + (h2.x - h0.x), y));
    cr_expect(ink0 > 20 && ink1 > 20, "names over both groups: %d, %d", ink0, ink1);
    hs_image_free(&img);
    hs_image_free(&plain);

    o.heads_per_group = 3;
    cr_expect_eq(hs_gallery_render(maps, L, H, n, &o, &img, NULL, &err), HS_E_ARG);
    cr_expect(strstr(err.msg, "3 heads per KV group do not divide 4 heads"), "%s", err.msg);
    cr_expect_null(img.rgb);
}

Test(kvgroups, importance_grid_rules_the_groups_apart)
{
    float v[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
    hs_importance_opts o = {.heads_per_group = 2};
    hs_image img = {0};
    hs_layout lay;
    hs_error err = {{0}};
    cr_assert_eq(hs_importance_render(v, 2, 4, &o, &img, &lay, &err), HS_OK, "%s", err.msg);
    hs_rect c2 = hs_layout_cell(&lay, 1, 2), c1 = hs_layout_cell(&lay, 1, 1);
    int y = c2.y + 2; /* away from the printed value */
    cr_expect(dark(pix(&img, c2.x - 1, y)) && dark(pix(&img, c2.x, y)), "rule before head 2");
    cr_expect(!dark(pix(&img, c1.x, y)), "no rule inside a group");
    hs_image_free(&img);
    o.heads_per_group = 3;
    cr_expect_eq(hs_importance_render(v, 2, 4, &o, &img, NULL, &err), HS_E_ARG);
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

Test(kvgroups, similarity_svg_frames_each_group)
{
    const float sim[16] = {1, 0.5f, 0, 0, 0.5f, 1, 0, 0, 0, 0, 1, -0.5f, 0, 0, -0.5f, 1};
    const int groups[4] = {0, 0, 1, 1}, order[4] = {2, 3, 0, 1}, bad[4] = {0, 1, 1, 2};
    const char *labels[4] = {"0.0\xC2\xB7KV0", "0.1\xC2\xB7KV0", "0.2<KV1>", "0.3\xC2\xB7KV1"};
    hs_similarity_opts o = {.title = "by group"};
    char *s = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_similarity_svg(sim, 4, order, groups, labels, &o, &s, NULL, &err), HS_OK,
                 "%s", err.msg);
    cr_expect_eq(count(s, "stroke-width=\"2\""), 2, "one frame per group of two");
    cr_expect_eq(count(s, "stroke-width=\"1.5\""), 1, "one rule between the groups");
    cr_expect(strstr(s, "0.2&lt;KV1&gt;") && strstr(s, "0.1\xC2\xB7KV0"), "labels as text");
    cr_expect(strstr(s, "0.2&lt;KV1&gt;") < strstr(s, "0.0\xC2\xB7KV0"), "order: item 2 first");
    uint8_t lo[3];
    hs_colormap_rgb(HS_CMAP_DIVERGING, 0.0f, lo);
    char stop[64];
    snprintf(stop, sizeof stop, "stop-color=\"#%02x%02x%02x\"", lo[0], lo[1], lo[2]);
    cr_expect(strstr(s, stop), "the diverging map from -1: %s", stop);
    free(s);
    o.divergence_max = 0.69f;
    cr_assert_eq(hs_similarity_svg(sim, 4, NULL, NULL, NULL, &o, &s, NULL, &err), HS_OK);
    hs_colormap_rgb(HS_CMAP_VIRIDIS, 0.0f, lo);
    snprintf(stop, sizeof stop, "stop-color=\"#%02x%02x%02x\"", lo[0], lo[1], lo[2]);
    cr_expect(strstr(s, stop), "a divergence on viridis");
    cr_expect_eq(count(s, "stroke-width=\"2\""), 0, "no groups, no frames");
    free(s);
    cr_expect_eq(hs_similarity_svg(sim, 4, bad, NULL, NULL, &o, &s, NULL, &err), HS_E_ARG);
    cr_expect(strstr(err.msg, "not a permutation"), "%s", err.msg);
    cr_expect_null(s);
}

/* The analysis's pictures: kv_similarity.png/.svg for a grouped-query model only. */
static int listed(char **files, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(files[i], name))
            return 1;
    return 0;
}

static void pictures_of(const char *model_dir, int want_kv)
{
    hs_error err = {{0}};
    hs_model *m = NULL;
    hs_analysis *a = quick_analysis(model_dir, &m);
    char dir[64], path[128];
    tu_mkdtemp(dir, sizeof dir);
    char **files = NULL;
    int nf = 0;
    cr_assert_eq(hs_pictures_write(a, dir, 0, HS_PICTURES_PNG | HS_PICTURES_SVG, &files, &nf, &err),
                 HS_OK, "%s", err.msg);
    cr_expect_eq(listed(files, nf, "kv_similarity.png"), want_kv, "%s", model_dir);
    cr_expect_eq(listed(files, nf, "kv_similarity.svg"), want_kv, "%s", model_dir);
    snprintf(path, sizeof path, "%s/kv_similarity.png", dir);
    cr_expect_eq(access(path, R_OK) == 0, want_kv);
    for (int i = 0; i < nf; i++)
        free(files[i]);
    free(files);
    tu_rm_rf(dir);
    hs_analysis_free(a);
    hs_model_free(m);
}

Test(kvgroups, kv_picture_for_grouped_query_models_only)
{
    pictures_of("fixtures/family-models/tiny-llama", 1);
    pictures_of("fixtures/tiny-gpt2", 0);
}

/* Entries of folder dir (not . or ..). */
static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    int k = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        k += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return k;
}

/* Every picture is a task of one parallel loop: a failed one leaves no other behind, whether
 * the heads fail (heads/ is a file), one of the others (gallery.png is a folder) or the
 * second file of a task that wrote one already (kv_similarity.png, after similarity.png). */
Test(pictures, a_failed_picture_removes_every_picture_written)
{
    hs_error err = {{0}};
    hs_model *m = NULL;
    hs_analysis *a = quick_analysis("fixtures/family-models/tiny-llama", &m);
    char dir[64], path[128];
    static const char *const block[] = {"heads", "gallery.png", "kv_similarity.png"};
    for (int which = 0; which < 3; which++) {
        tu_mkdtemp(dir, sizeof dir);
        snprintf(path, sizeof path, "%s/%s", dir, block[which]);
        if (which)
            cr_assert_eq(mkdir(path, 0777), 0);
        else
            fclose(fopen(path, "w"));
        char **files = (char **)1;
        int nf = -1;
        cr_assert_neq(hs_pictures_write(a, dir, 0, HS_PICTURES_PNG | HS_PICTURES_SVG, &files, &nf,
                                        &err), HS_OK);
        cr_expect(strstr(err.msg, which ? block[which] : "heads/L"), "%s", err.msg);
        cr_expect_null(files);
        cr_expect_eq(nf, 0);
        /* left: the blocking entry (and, unless it was heads, heads/ emptied) */
        cr_expect_eq(entries(dir), which ? 2 : 1, "%s blocked", block[which]);
        snprintf(path, sizeof path, "%s/heads", dir);
        if (which)
            cr_expect_eq(entries(path), 0, "a head's picture left behind");
        tu_rm_rf(dir);
    }
    hs_analysis_free(a);
    hs_model_free(m);
}
