/* Activation patching (include/headscope/patch.h) against the independent float64 reference
 * fixtures/ref/patch_ref.py (fixtures/golden/patching.json): every site, the three metrics,
 * both directions, per position, on fixtures/trained-gpt2, tiny-gpt2 and tiny-bert; the
 * normalised effects and their bootstrap intervals within 1e-4, the raw metrics within 1e-4
 * relative. And the input checks, by hand. */
#include "headscope/patch.h"
#include "testutil.h"

#define EFFECT_TOL 1e-4

static cJSON *golden(void)
{
    static cJSON *g;
    if (!g) {
        size_t len;
        char *text = tu_slurp("fixtures/golden/patching.json", &len);
        g = cJSON_ParseWithLength(text, len);
        free(text);
        cr_assert_not_null(g);
    }
    return g;
}

static int32_t *ids_of(const cJSON *a, int *n)
{
    *n = cJSON_GetArraySize(a);
    int32_t *ids = malloc((size_t)*n * sizeof *ids);
    for (int i = 0; i < *n; i++)
        ids[i] = (int32_t)cJSON_GetArrayItem(a, i)->valuedouble;
    return ids;
}

/* The golden's pairs of model into pairs (ids malloc'd; free with free_pairs). */
static int load_pairs(const char *model, hs_patch_pair *pairs)
{
    const cJSON *list = cJSON_GetObjectItem(cJSON_GetObjectItem(golden(), "pairs"), model);
    int count = cJSON_GetArraySize(list);
    for (int i = 0; i < count; i++) {
        const cJSON *p = cJSON_GetArrayItem(list, i);
        int n2;
        pairs[i].clean = ids_of(cJSON_GetObjectItem(p, "clean"), &pairs[i].n);
        pairs[i].corrupt = ids_of(cJSON_GetObjectItem(p, "corrupt"), &n2);
        cr_assert_eq(n2, pairs[i].n);
        pairs[i].answer = (int32_t)cJSON_GetObjectItem(p, "answer")->valuedouble;
        pairs[i].wrong = (int32_t)cJSON_GetObjectItem(p, "wrong")->valuedouble;
        pairs[i].pos = (int)cJSON_GetObjectItem(p, "pos")->valuedouble;
    }
    return count;
}

static void free_pairs(hs_patch_pair *pairs, int count)
{
    for (int i = 0; i < count; i++) {
        free((void *)(uintptr_t)pairs[i].clean);
        free((void *)(uintptr_t)pairs[i].corrupt);
    }
}

/* The k-th value of a nested JSON array read flat (null: NaN). */
static void flatten(const cJSON *a, double *out, size_t *k)
{
    if (cJSON_IsArray(a)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, a)
            flatten(e, out, k);
        return;
    }
    out[(*k)++] = cJSON_IsNumber(a) ? a->valuedouble : NAN;
}

static void expect_close(const char *what, const cJSON *ref, const double *got, size_t count,
                         double tol, int relative, int ci)
{
    double *want = malloc(count * 2 * sizeof *want);
    size_t k = 0;
    flatten(ref, want, &k);
    cr_assert_eq(k, count, "case %d: %s has %zu values, expected %zu", ci, what, k, count);
    for (size_t i = 0; i < count; i++) {
        if (isnan(want[i])) {
            cr_assert(isnan(got[i]), "case %d: %s[%zu] = %g, reference NaN", ci, what, i, got[i]);
            continue;
        }
        double t = relative ? tol * fmax(1.0, fabs(want[i])) : tol;
        cr_assert_leq(fabs(got[i] - want[i]), t, "case %d: %s[%zu] = %.8g, reference %.8g", ci,
                      what, i, got[i], want[i]);
    }
    free(want);
}

static const char *METRICS[] = {"logit-diff", "prob", "loss"};

Test(patch, matches_the_float64_reference)
{
    const cJSON *cases = cJSON_GetObjectItem(golden(), "cases"), *c;
    hs_model *models[3] = {0}; /* one load a model */
    static const char *names[3] = {"trained-gpt2", "tiny-gpt2", "tiny-bert"};
    int ci = 0;
    cJSON_ArrayForEach(c, cases)
    {
        const char *model = cJSON_GetObjectItem(c, "model")->valuestring;
        int mi = 0;
        while (mi < 2 && strcmp(names[mi], model))
            mi++;
        char path[64];
        snprintf(path, sizeof path, "fixtures/%s", model);
        if (!models[mi])
            models[mi] = tu_load(path);
        hs_model *m = models[mi];
        hs_patch_pair pairs[8];
        int count = load_pairs(model, pairs);
        hs_patch_opts o = hs_patch_opts_default();
        o.site = (hs_site)hs_site_from_key(cJSON_GetObjectItem(c, "site")->valuestring);
        for (int k = 0; k < 3; k++)
            if (!strcmp(METRICS[k], cJSON_GetObjectItem(c, "metric")->valuestring))
                o.metric = (hs_patch_metric)k;
        o.noise = cJSON_IsTrue(cJSON_GetObjectItem(c, "noise"));
        o.each_position = cJSON_IsTrue(cJSON_GetObjectItem(c, "each"));
        if (!strcmp(cJSON_GetObjectItem(c, "method")->valuestring, "attribution"))
            o.method = HS_PATCH_ATTRIBUTION;
        hs_patch_result *r = NULL;
        hs_error err = {{0}};
        cr_assert_eq(hs_patch_run(m, pairs, count, &o, &r, &err), HS_OK, "case %d: %s", ci,
                     err.msg);
        size_t cells = (size_t)r->n_layer * r->n_units * r->n_pos;
        expect_close("clean", cJSON_GetObjectItem(c, "clean"), r->clean, count, 1e-4, 1, ci);
        expect_close("corrupt", cJSON_GetObjectItem(c, "corrupt"), r->corrupt, count, 1e-4, 1, ci);
        expect_close("patched", cJSON_GetObjectItem(c, "patched"), r->patched, cells * count,
                     1e-4, 1, ci);
        expect_close("effect", cJSON_GetObjectItem(c, "effect"), r->effect, cells, EFFECT_TOL, 0,
                     ci);
        expect_close("ci_lo", cJSON_GetObjectItem(c, "ci_lo"), r->ci_lo, cells, EFFECT_TOL, 0, ci);
        expect_close("ci_hi", cJSON_GetObjectItem(c, "ci_hi"), r->ci_hi, cells, EFFECT_TOL, 0, ci);
        hs_patch_result_free(r);
        free_pairs(pairs, count);
        ci++;
    }
    for (int k = 0; k < 3; k++)
        hs_model_free(models[k]);
    cr_assert_geq(ci, 30);
}

/* The golden case of model, site, metric, direction, per position and method. */
static const cJSON *golden_case(const char *model, const char *site, const char *metric,
                                int noise, int each, const char *method)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(golden(), "cases"))
        if (!strcmp(cJSON_GetObjectItem(c, "model")->valuestring, model) &&
            !strcmp(cJSON_GetObjectItem(c, "site")->valuestring, site) &&
            !strcmp(cJSON_GetObjectItem(c, "metric")->valuestring, metric) &&
            cJSON_IsTrue(cJSON_GetObjectItem(c, "noise")) == noise &&
            cJSON_IsTrue(cJSON_GetObjectItem(c, "each")) == each &&
            !strcmp(cJSON_GetObjectItem(c, "method")->valuestring, method))
            return c;
    cr_assert_fail("no golden case %s %s %s %s", model, site, metric, method);
    return NULL;
}

/* The work of GPT-2-shaped passes in floating-point operations (two a multiply-add), by
 * hand: a layer's Q, K, V (3 d columns) and its attention over the n (n + 1) / 2 causal
 * (query, key) pairs, scores and P V of d_head each for every head; its output projection
 * and MLP (d_ff = 4 d) on r rows; the LM head on r rows and k columns. The unit, one plain
 * forward with logits at every position: L (attn + post(n)) + head(n, V). */
static double g2_scores(double d, double n) { return 2.0 * 2.0 * d * n * (n + 1) / 2; }
static double g2_attn(double d, double n) { return 2.0 * n * d * 3 * d + g2_scores(d, n); }
static double g2_post(double d, double r) { return 2.0 * r * d * d + 2.0 * 2.0 * r * d * 4 * d; }
static double g2_head(double d, double r, double k) { return 2.0 * r * d * k; }

/* Both methods at once: each as alone, the attribution's in the _attr arrays, and their
 * correlation; attribution costs one forward pass of the source and one forward and one
 * backward of the target (each product's input gradient, attention's two products twice). */
Test(patch, both_methods_and_attribution_cost)
{
    hs_model *m = tu_load("fixtures/trained-gpt2");
    hs_patch_pair pairs[8];
    int count = load_pairs("trained-gpt2", pairs);
    hs_patch_opts o = hs_patch_opts_default();
    o.method = HS_PATCH_BOTH;
    hs_patch_result *r = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_patch_run(m, pairs, count, &o, &r, &err), HS_OK, "%s", err.msg);
    size_t cells = (size_t)r->n_layer * r->n_units;
    const cJSON *ex = golden_case("trained-gpt2", "z", "logit-diff", 0, 0, "exact");
    const cJSON *at = golden_case("trained-gpt2", "z", "logit-diff", 0, 0, "attribution");
    expect_close("effect", cJSON_GetObjectItem(ex, "effect"), r->effect, cells, EFFECT_TOL, 0, 0);
    expect_close("effect_attr", cJSON_GetObjectItem(at, "effect"), r->effect_attr, cells,
                 EFFECT_TOL, 0, 1);
    expect_close("ci_hi_attr", cJSON_GetObjectItem(at, "ci_hi"), r->ci_hi_attr, cells,
                 EFFECT_TOL, 0, 1);
    /* Pearson's r of the golden effects, computed here */
    double a[64], b[64], sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    size_t k = 0;
    flatten(cJSON_GetObjectItem(ex, "effect"), a, &k);
    k = 0;
    flatten(cJSON_GetObjectItem(at, "effect"), b, &k);
    for (size_t i = 0; i < cells; i++)
        sa += a[i] / cells, sb += b[i] / cells;
    for (size_t i = 0; i < cells; i++)
        saa += (a[i] - sa) * (a[i] - sa), sbb += (b[i] - sb) * (b[i] - sb),
            sab += (a[i] - sa) * (b[i] - sb);
    cr_assert_float_eq(r->correlation, sab / sqrt(saa * sbb), 1e-4);
    hs_patch_result_free(r);
    o.method = HS_PATCH_ATTRIBUTION;
    o.resamples = 0;
    cr_assert_eq(hs_patch_run(m, pairs, count, &o, &r, &err), HS_OK, "%s", err.msg);
    const hs_model_config *mc = hs_model_config_of(m);
    double L = mc->n_layer, d = mc->d_model, V = mc->vocab_size, want = 0;
    for (int i = 0; i < count; i++) {
        double n = pairs[i].n, plain = L * (g2_attn(d, n) + g2_post(d, n)) + g2_head(d, 1, V);
        double back = L * (g2_attn(d, n) + g2_scores(d, n) + g2_post(d, n)) + g2_head(d, 1, V);
        want += (2 * plain + back) / (L * (g2_attn(d, n) + g2_post(d, n)) + g2_head(d, n, V));
    }
    cr_assert_float_eq(r->passes, want, 1e-9 * want, "%g, by hand %g", r->passes, want);
    cr_assert_leq(r->passes / count, 3.0);
    cr_assert_null(r->effect_attr);
    hs_patch_result_free(r);
    free_pairs(pairs, count);
    hs_model_free(m);
}

/* Patching z of every head: a layer's heads in one batch from that layer's contexts on
 * (its output projection and MLP, then every later layer), the last layer's output
 * projection and MLP on the metric's row, two logits a copy; beside the plain source and
 * target runs (logits on the metric's row). */
Test(patch, cost_in_forward_passes)
{
    hs_model *m = tu_load("fixtures/trained-gpt2");
    hs_patch_pair pairs[8];
    int count = load_pairs("trained-gpt2", pairs);
    hs_patch_opts o = hs_patch_opts_default();
    o.resamples = 0;
    hs_patch_result *r = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_patch_run(m, pairs, count, &o, &r, &err), HS_OK, "%s", err.msg);
    int L = r->n_layer, H = r->n_units;
    double d = hs_model_config_of(m)->d_model, V = hs_model_config_of(m)->vocab_size, want = 0;
    for (int i = 0; i < count; i++) {
        double n = pairs[i].n, layers = L * (g2_attn(d, n) + g2_post(d, n));
        double work = 2 * (layers + g2_head(d, 1, V));
        for (int l = 0; l < L; l++) {
            work += H * (g2_post(d, l == L - 1 ? 1 : n) + g2_head(d, 1, 2));
            for (int k = l + 1; k < L; k++)
                work += H * (g2_attn(d, n) + g2_post(d, k == L - 1 ? 1 : n));
        }
        want += work / (layers + g2_head(d, n, V));
    }
    cr_assert_float_eq(r->passes, want, 1e-9 * want, "%g, by hand %g", r->passes, want);
    cr_assert(isnan(r->ci_lo[0]));
    hs_patch_result_free(r);
    free_pairs(pairs, count);
    hs_model_free(m);
}

/* Path patching against the reference's: every sender into a receiver's q, k or v. */
Test(patch, paths_match_the_float64_reference)
{
    const cJSON *c;
    int ci = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(golden(), "paths"))
    {
        const char *model = cJSON_GetObjectItem(c, "model")->valuestring;
        char path[64];
        snprintf(path, sizeof path, "fixtures/%s", model);
        hs_model *m = tu_load(path);
        hs_patch_pair pairs[8];
        int count = load_pairs(model, pairs);
        hs_patch_opts o = hs_patch_opts_default();
        for (int k = 0; k < 3; k++)
            if (!strcmp(METRICS[k], cJSON_GetObjectItem(c, "metric")->valuestring))
                o.metric = (hs_patch_metric)k;
        o.noise = cJSON_IsTrue(cJSON_GetObjectItem(c, "noise"));
        const cJSON *rec = cJSON_GetObjectItem(c, "receiver");
        hs_patch_path pp = {(int)cJSON_GetArrayItem(rec, 0)->valuedouble,
                            (int)cJSON_GetArrayItem(rec, 1)->valuedouble,
                            (hs_site)hs_site_from_key(cJSON_GetObjectItem(c, "input")->valuestring),
                            -1, -1};
        hs_patch_result *r = NULL;
        hs_error err = {{0}};
        cr_assert_eq(hs_patch_path_run(m, pairs, count, &o, &pp, &r, &err), HS_OK, "path %d: %s",
                     ci, err.msg);
        size_t cells = (size_t)r->n_layer * r->n_units;
        cr_assert_eq(r->n_layer, pp.receiver_layer);
        expect_close("patched", cJSON_GetObjectItem(c, "patched"), r->patched, cells * count,
                     1e-4, 1, ci);
        expect_close("effect", cJSON_GetObjectItem(c, "effect"), r->effect, cells, EFFECT_TOL, 0,
                     ci);
        expect_close("ci_lo", cJSON_GetObjectItem(c, "ci_lo"), r->ci_lo, cells, EFFECT_TOL, 0, ci);
        /* one sender alone: that cell as in the sweep, the others NaN */
        hs_patch_path one = pp;
        one.sender_layer = pp.receiver_layer - 1, one.sender_head = 1;
        hs_patch_result *r1 = NULL;
        o.resamples = 0;
        cr_assert_eq(hs_patch_path_run(m, pairs, count, &o, &one, &r1, &err), HS_OK, "%s", err.msg);
        int k1 = hs_patch_index(r1, one.sender_layer, 1, 0);
        cr_assert_float_eq(r1->effect[k1], r->effect[k1], 1e-9);
        cr_assert(isnan(r1->effect[0]));
        hs_patch_result_free(r1);
        hs_patch_result_free(r);
        free_pairs(pairs, count);
        hs_model_free(m);
        ci++;
    }
    cr_assert_eq(ci, 3);
}

Test(patch, refuses_bad_paths)
{
    hs_model *m = tu_load("fixtures/tiny-gpt2");
    int32_t a[] = {10, 11, 12}, b[] = {13, 14, 15};
    hs_patch_pair p = {a, b, 3, 5, 6, 2};
    hs_patch_opts o = hs_patch_opts_default();
    hs_patch_result *r = NULL;
    hs_error err = {{0}};
    hs_patch_path bad[] = {{0, 0, HS_SITE_K, -1, -1}, {2, 0, HS_SITE_K, -1, -1},
                           {1, 4, HS_SITE_Q, -1, -1}, {1, 0, HS_SITE_Z, -1, -1},
                           {1, 0, HS_SITE_V, 1, 0}, {1, 0, HS_SITE_V, 0, 4}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        cr_assert_eq(hs_patch_path_run(m, &p, 1, &o, &bad[k], &r, &err), HS_E_ARG, "case %zu", k);
        cr_assert_null(r);
    }
    cr_assert_str_eq(err.msg, "path patching: sender 0.4 is not a head of a layer before the "
                              "receiver's (1)");
    hs_model_free(m);
}

Test(patch, normalisation_by_hand)
{
    cr_assert_float_eq(hs_patch_normalise(3.0, 1.0, 2.0, 0), 0.5, 1e-15);
    cr_assert_float_eq(hs_patch_normalise(3.0, 1.0, 2.5, 1), 0.25, 1e-15);
    cr_assert_float_eq(hs_patch_normalise(3.0, 1.0, 1.0, 0), 0.0, 1e-15);
    cr_assert(isnan(hs_patch_normalise(2.0, 2.0, 1.0, 0)));
}

Test(patch, refuses_bad_pairs)
{
    hs_model *m = tu_load("fixtures/tiny-gpt2");
    int32_t a[] = {10, 11, 12}, b[] = {13, 14, 15}, c4[] = {1, 2, 3, 4};
    hs_patch_pair p[2] = {{a, b, 3, 5, 6, 2}, {a, c4, 4, 5, 6, 3}};
    hs_patch_opts o = hs_patch_opts_default();
    hs_patch_result *r = NULL;
    hs_error err = {{0}};
    o.each_position = 1;
    p[1].clean = c4;
    cr_assert_eq(hs_patch_run(m, p, 2, &o, &r, &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "pair 2: 4 tokens, pair 1 has 3 (positions each needs the same "
                              "number in every pair)");
    o.each_position = 0;
    p[0].pos = 3;
    cr_assert_eq(hs_patch_run(m, p, 2, &o, &r, &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "pair 1: position 3 outside its 3 tokens");
    p[0].pos = 2;
    p[0].wrong = 50257;
    cr_assert_eq(hs_patch_run(m, p, 2, &o, &r, &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "pair 1: answer or wrong id outside the vocabulary (size 50257)");
    o.metric = HS_METRIC_PROB; /* wrong unused */
    b[1] = 60000;
    cr_assert_eq(hs_patch_run(m, p, 1, &o, &r, &err), HS_E_INPUT);
    cr_assert(strstr(err.msg, "pair 1: token id 60000 at position 1"), "%s", err.msg);
    o.site = HS_SITE_RESULT;
    cr_assert_eq(hs_patch_run(m, p, 1, &o, &r, &err), HS_E_ARG);
    cr_assert_null(r);
    hs_model_free(m);
}
