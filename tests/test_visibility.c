/* The analyses under a sliding window and a prefix LM: every metric of the cases of
 * fixtures/visibility-golden/visibility.json (float64 NumPy, fixtures/ref/
 * make_visibility_golden.py, whose maps hold junk in the cells a row cannot see) within
 * 1e-9, and small hand-worked cases. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "headscope/analysis.h"
#include "analysis_util.h"
#include "testutil.h"

#define VIS_TOL 1e-9
#define MAX_LAYERS 8

typedef struct vcase {
    const cJSON *json;
    const char *name;
    int L, H, n, n_words;
    hs_visibility vis[MAX_LAYERS];
    float *attn;                     /* (L, H, n, n) */
    int32_t *ids, *type_ids, *word;  /* (n) */
    unsigned char *punct, *sink;     /* (n) */
} vcase;

static double *doubles(const cJSON *arr, size_t want, const char *what)
{
    cr_assert(cJSON_IsArray(arr), "%s missing", what);
    cr_assert_eq((size_t)cJSON_GetArraySize(arr), want, "%s", what);
    double *v = malloc(want * sizeof *v);
    size_t k = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, arr) v[k++] = x->valuedouble;
    return v;
}

static int32_t *ints(const cJSON *arr, int n, const char *what)
{
    double *d = doubles(arr, (size_t)n, what);
    int32_t *v = malloc((size_t)n * sizeof *v);
    for (int i = 0; i < n; i++)
        v[i] = (int32_t)d[i];
    free(d);
    return v;
}

static unsigned char *flags(const cJSON *arr, int n, const char *what)
{
    int32_t *d = ints(arr, n, what);
    unsigned char *v = malloc((size_t)n);
    for (int i = 0; i < n; i++)
        v[i] = (unsigned char)d[i];
    free(d);
    return v;
}

static hs_visibility vis_of(const cJSON *v)
{
    const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(v, "kind"));
    cr_assert_not_null(kind);
    if (!strcmp(kind, "sliding"))
        return hs_vis_sliding(cJSON_GetObjectItem(v, "window")->valueint);
    if (!strcmp(kind, "prefix"))
        return hs_vis_prefix(cJSON_GetObjectItem(v, "prefix")->valueint);
    if (!strcmp(kind, "causal"))
        return hs_vis_causal();
    cr_assert_str_eq(kind, "bidirectional");
    return hs_vis_bidirectional();
}

/* Loads every case; returns the count (the root is in *root, freed by the caller). */
static int load(vcase *c, int cap, cJSON **root)
{
    *root = tu_json_file("fixtures/visibility-golden/visibility.json");
    const cJSON *cases = cJSON_GetObjectItem(*root, "cases"), *j;
    int count = 0;
    cJSON_ArrayForEach(j, cases) {
        cr_assert_lt(count, cap);
        vcase *v = &c[count++];
        v->json = j;
        v->name = cJSON_GetStringValue(cJSON_GetObjectItem(j, "name"));
        v->L = cJSON_GetObjectItem(j, "L")->valueint;
        v->H = cJSON_GetObjectItem(j, "H")->valueint;
        v->n = cJSON_GetObjectItem(j, "n")->valueint;
        cr_assert_leq(v->L, MAX_LAYERS);
        const cJSON *vis = cJSON_GetObjectItem(j, "vis");
        cr_assert_eq(cJSON_GetArraySize(vis), v->L);
        for (int l = 0; l < v->L; l++)
            v->vis[l] = vis_of(cJSON_GetArrayItem(vis, l));
        size_t count_attn = (size_t)v->L * (size_t)v->H * (size_t)v->n * (size_t)v->n;
        double *a = doubles(cJSON_GetObjectItem(j, "attn"), count_attn, "attn");
        v->attn = malloc(count_attn * sizeof *v->attn);
        for (size_t k = 0; k < count_attn; k++)
            v->attn[k] = (float)a[k]; /* the reference's values are float32 already */
        free(a);
        v->ids = ints(cJSON_GetObjectItem(j, "ids"), v->n, "ids");
        v->type_ids = ints(cJSON_GetObjectItem(j, "type_ids"), v->n, "type_ids");
        v->word = ints(cJSON_GetObjectItem(j, "word"), v->n, "word");
        v->punct = flags(cJSON_GetObjectItem(j, "punct"), v->n, "punct");
        v->sink = flags(cJSON_GetObjectItem(j, "sink"), v->n, "sink");
        v->n_words = 0;
        for (int i = 0; i < v->n; i++)
            if (v->word[i] + 1 > v->n_words)
                v->n_words = v->word[i] + 1;
    }
    return count;
}

static void unload(vcase *c, int count, cJSON *root)
{
    for (int k = 0; k < count; k++) {
        free(c[k].attn);
        free(c[k].ids);
        free(c[k].type_ids);
        free(c[k].word);
        free(c[k].punct);
        free(c[k].sink);
    }
    cJSON_Delete(root);
}

static vcase cases[8];
static int n_cases;
static cJSON *cases_root;

static void cases_load(void) { n_cases = load(cases, 8, &cases_root); }
static void cases_free(void) { unload(cases, n_cases, cases_root); }

TestSuite(visibility, .init = cases_load, .fini = cases_free);

/* got against the reference value v (null: NaN). */
static void check(double got, const cJSON *v, const char *cname, int k, const char *what)
{
    cr_assert_not_null(v, "%s head %d: %s missing", cname, k, what);
    if (cJSON_IsNull(v))
        cr_assert(isnan(got), "%s head %d %s: got %.17g, reference null", cname, k, what, got);
    else
        cr_assert(fabs(got - v->valuedouble) <= VIS_TOL,
                  "%s head %d %s: got %.17g, reference %.17g", cname, k, what, got,
                  v->valuedouble);
}

static void check_all(const double *got, const cJSON *arr, size_t count, const char *cname,
                      const char *what)
{
    double *want = doubles(arr, count, what);
    for (size_t k = 0; k < count; k++)
        cr_assert(fabs(got[k] - want[k]) <= VIS_TOL, "%s %s[%zu]: got %.17g, reference %.17g",
                  cname, what, k, got[k], want[k]);
    free(want);
}

static const cJSON *head_item(const vcase *c, int k, const char *group, const char *key)
{
    const cJSON *h = cJSON_GetArrayItem(cJSON_GetObjectItem(c->json, "heads"), k);
    return cJSON_GetObjectItem(cJSON_GetObjectItem(h, group), key);
}

Test(visibility, entropy_and_detectors_match_the_reference)
{
    cr_assert_geq(n_cases, 4);
    for (int t = 0; t < n_cases; t++) {
        const vcase *v = &cases[t];
        size_t per = (size_t)v->H * (size_t)v->n * (size_t)v->n;
        hs_detect_seq seq = {v->ids, 5, 6, v->type_ids, v->punct};
        for (int l = 0; l < v->L; l++) { /* one layer at a time, as the pipeline does */
            hs_entropy e[16], ef[16];
            hs_detect d[16], df[16];
            const float *maps = v->attn + (size_t)l * per;
            hs_error err = {{0}};
            cr_assert_eq(hs_entropy_compute(maps, v->H, v->n, v->vis[l], NULL, e, &err), HS_OK,
                         "%s", err.msg);
            cr_assert_eq(hs_entropy_compute(maps, v->H, v->n, v->vis[l], v->sink, ef, &err),
                         HS_OK, "%s", err.msg);
            cr_assert_eq(hs_detect_compute(maps, v->H, v->n, v->vis[l], &seq, NULL, d, &err),
                         HS_OK, "%s", err.msg);
            cr_assert_eq(hs_detect_compute(maps, v->H, v->n, v->vis[l], &seq, v->sink, df, &err),
                         HS_OK, "%s", err.msg);
            for (int h = 0; h < v->H; h++) {
                int k = l * v->H + h;
                const hs_entropy *es[2] = {&e[h], &ef[h]};
                const char *eg[2] = {"entropy", "entropy_free"};
                for (int s = 0; s < 2; s++) {
                    check(es[s]->nats, head_item(v, k, eg[s], "nats"), v->name, k, "nats");
                    check(es[s]->norm, head_item(v, k, eg[s], "norm"), v->name, k, "norm");
                    check(es[s]->rowmax, head_item(v, k, eg[s], "rowmax"), v->name, k, "rowmax");
                    cr_assert_eq(es[s]->rows, head_item(v, k, eg[s], "rows")->valueint);
                }
                const hs_detect *ds[2] = {&d[h], &df[h]};
                const char *dg[2] = {"detect", "detect_free"};
                for (int s = 0; s < 2; s++) {
                    const hs_detect *x = ds[s];
                    /* first_token, cls, sep and sink are the raw map's in both passes */
                    const char *names[11] = {"prev_token", "next_token", "self", "first_token",
                                             "cls", "sep", "duplicate", "induction", "punct",
                                             "other_segment", "sink"};
                    double got[11] = {x->prev_token, x->next_token, x->self, x->first_token,
                                      x->cls, x->sep, x->duplicate, x->induction, x->punct,
                                      x->other_segment, x->sink};
                    for (int q = 0; q < 11; q++) {
                        if (s == 0 && q == 10) { /* sink: NaN without sink positions */
                            cr_assert(isnan(got[q]));
                            continue;
                        }
                        check(got[q], head_item(v, k, dg[s], names[q]), v->name, k, names[q]);
                    }
                }
            }
        }
    }
}

Test(visibility, word_maps_match_the_reference)
{
    for (int t = 0; t < n_cases; t++) {
        const vcase *v = &cases[t];
        size_t ww = (size_t)v->n_words * (size_t)v->n_words, nn = (size_t)v->n * (size_t)v->n;
        float *out = malloc(ww * sizeof *out);
        double *got = malloc(ww * sizeof *got);
        for (int k = 0; k < v->L * v->H; k++) {
            cr_assert_eq(hs_wordmap_compute(v->attn + (size_t)k * nn, 1, v->n, v->vis[k / v->H],
                                            v->word, v->n_words, out, NULL), HS_OK);
            for (size_t e = 0; e < ww; e++)
                got[e] = out[e];
            /* the output is float: its rounding, not the sums', sets the tolerance */
            const cJSON *h = cJSON_GetArrayItem(cJSON_GetObjectItem(v->json, "heads"), k);
            double *want = doubles(cJSON_GetObjectItem(h, "word_map"), ww, "word_map");
            for (size_t e = 0; e < ww; e++)
                cr_assert(fabs(got[e] - want[e]) <= 1e-6,
                          "%s head %d word map [%zu]: %.9g, %.9g", v->name, k, e, got[e],
                          want[e]);
            free(want);
        }
        free(got);
        free(out);
    }
}

Test(visibility, similarity_diversity_rollout_and_flow_match_the_reference)
{
    for (int t = 0; t < n_cases; t++) {
        const vcase *v = &cases[t];
        int N = v->L * v->H, n = v->n;
        hs_visibility each[64];
        cr_assert_leq(N, 64);
        for (int k = 0; k < N; k++)
            each[k] = v->vis[k / v->H];
        double *r = malloc((size_t)N * N * sizeof *r), *js = malloc((size_t)N * N * sizeof *js);
        double *fr = malloc((size_t)N * N * sizeof *fr);
        double *roll = malloc((size_t)n * n * sizeof *roll);
        double *flow = malloc((size_t)n * n * sizeof *flow);
        hs_error err = {{0}};
        cr_assert_eq(hs_similarity_compute(v->attn, N, n, each, N, HS_SIM_PEARSON, r, &err),
                     HS_OK, "%s", err.msg);
        check_all(r, cJSON_GetObjectItem(v->json, "pearson"), (size_t)N * N, v->name, "pearson");
        cr_assert_eq(hs_similarity_compute(v->attn, N, n, each, N, HS_SIM_JS, js, &err), HS_OK);
        check_all(js, cJSON_GetObjectItem(v->json, "js"), (size_t)N * N, v->name, "js");
        cr_assert_eq(hs_diversity_compute(v->attn, v->L, v->H, n, v->vis, v->L, NULL, fr, &err),
                     HS_OK, "%s", err.msg);
        check_all(fr, cJSON_GetObjectItem(v->json, "frobenius"), (size_t)N * N, v->name, "frob");
        cr_assert_eq(hs_rollout_compute(v->attn, v->L, v->H, n, v->vis, v->L, 0.5, roll, &err),
                     HS_OK, "%s", err.msg);
        check_all(roll, cJSON_GetObjectItem(v->json, "rollout"), (size_t)n * n, v->name,
                  "rollout");
        cr_assert_eq(hs_attention_flow(v->attn, v->L, v->H, n, v->vis, v->L, 0.5, flow, &err),
                     HS_OK, "%s", err.msg);
        check_all(flow, cJSON_GetObjectItem(v->json, "flow"), (size_t)n * n, v->name, "flow");
        free(r);
        free(js);
        free(fr);
        free(roll);
        free(flow);
    }
}

/* ---- hand-worked cases ------------------------------------------------------------- */

#define J 0.9f /* junk in a cell the row cannot see */

Test(visibility, entropy_of_a_sliding_window_is_normalised_by_its_keys)
{
    /* W = 2: row 0 sees key 0, rows 1 and 2 two keys each, spread evenly; (2, 0) is junk.
     * nats = (0 + ln 2 + ln 2) / 3, norm = mean over rows 1, 2 of ln 2 / ln 2 = 1 (a causal
     * reading would divide row 2 by ln 3 and count the junk). */
    const float m[9] = {1, J, J, 0.5f, 0.5f, J, J, 0.5f, 0.5f};
    hs_entropy e;
    cr_assert_eq(hs_entropy_compute(m, 1, 3, hs_vis_sliding(2), NULL, &e, NULL), HS_OK);
    near(e.nats, 2 * log(2.0) / 3, 1e-12, "nats");
    near(e.norm, 1.0, 1e-12, "norm");
    near(e.rowmax, (1 + 0.5 + 0.5) / 3, 1e-12, "rowmax");
    cr_assert_eq(e.rows, 3);
}

Test(visibility, detectors_of_a_sliding_window_count_rows_that_see_the_cell)
{
    /* W = 2, n = 3: row 0 [1], row 1 [.3 .7], row 2 [. .6 .4]. first_token and sink (sink
     * at 0): rows 0 and 1, (1 + .3) / 2; prev_token: rows 1, 2: (.3 + .6) / 2; self:
     * (1 + .7 + .4) / 3; next_token: never visible. */
    const float m[9] = {1, J, J, 0.3f, 0.7f, J, J, 0.6f, 0.4f};
    const int32_t ids[3] = {1, 2, 3};
    const unsigned char sink[3] = {1, 0, 0};
    hs_detect d;
    cr_assert_eq(hs_detect_compute(m, 1, 3, hs_vis_sliding(2), seq_of(ids, -1), sink, &d, NULL),
                 HS_OK);
    near(d.first_token, (1 + 0.3) / 2, 1e-7, "first_token");
    near(d.sink, (1 + 0.3) / 2, 1e-7, "sink");
    /* without sinks: row 1 renormalised over key 1 alone (prev cell is the sink: no row);
     * row 2: .6 / 1 */
    near(d.prev_token, 0.6, 1e-7, "prev_token without sinks");
    near(d.self, (1.0 + 0.4) / 2, 1e-7, "self without sinks");
    cr_assert(isnan(d.next_token));
    cr_assert_eq(hs_detect_compute(m, 1, 3, hs_vis_sliding(2), seq_of(ids, -1), NULL, &d, NULL),
                 HS_OK);
    near(d.prev_token, (0.3 + 0.6) / 2, 1e-7, "prev_token");
    near(d.self, (1 + 0.7 + 0.4) / 3, 1e-7, "self");
}

Test(visibility, a_prefix_lm_sees_the_next_token_inside_the_prefix)
{
    /* prefix 2, n = 4: rows 0 and 1 see keys 0, 1; row 2 keys 0..2; row 3 all. next_token:
     * only cell (0, 1) is visible: .6. prev_token: (.3 + .2 + .25) / 3; self: (.4 + .7 + .7
     * + .25) / 4; first_token: (.4 + .3 + .1 + .25) / 4. */
    const float m[16] = {0.4f, 0.6f, J, J,   0.3f, 0.7f, J, J,
                         0.1f, 0.2f, 0.7f, J, 0.25f, 0.25f, 0.25f, 0.25f};
    const int32_t ids[4] = {1, 2, 3, 4};
    hs_detect d;
    cr_assert_eq(hs_detect_compute(m, 1, 4, hs_vis_prefix(2), seq_of(ids, -1), NULL, &d, NULL),
                 HS_OK);
    near(d.next_token, 0.6, 1e-7, "next_token");
    near(d.prev_token, 0.75 / 3, 1e-7, "prev_token");
    near(d.self, 2.05 / 4, 1e-7, "self");
    near(d.first_token, 1.05 / 4, 1e-7, "first_token");
    hs_entropy e;
    cr_assert_eq(hs_entropy_compute(m, 1, 4, hs_vis_prefix(2), NULL, &e, NULL), HS_OK);
    double h0 = -(0.4 * log(0.4) + 0.6 * log(0.6)), h1 = -(0.3 * log(0.3) + 0.7 * log(0.7));
    double h2 = -(0.1 * log(0.1) + 0.2 * log(0.2) + 0.7 * log(0.7)), h3 = log(4.0);
    near(e.nats, (h0 + h1 + h2 + h3) / 4, 1e-6, "nats");
    near(e.norm, (h0 / log(2.0) + h1 / log(2.0) + h2 / log(3.0) + 1) / 4, 1e-6, "norm");
}

Test(visibility, pearson_of_a_window_and_a_causal_head_uses_the_band)
{
    /* n = 2; map a: causal [1 .; .5 .5]; map b: window 1 [1 .; J 1]. The cells both see
     * are the diagonal: a (1, .5), b (1, 1): b is constant there, r = 0. Jensen-Shannon,
     * row 0: equal, 0; row 1: P = (.5, .5), Q = (0, 1), M = (.25, .75):
     * 1/2 (.5 ln 2 + .5 ln(2/3)) + 1/2 ln(4/3); mean over 2 rows. */
    const float m[8] = {1, 0, 0.5f, 0.5f, 1, 0, J, 1};
    const hs_visibility vis[2] = {hs_vis_causal(), hs_vis_sliding(1)};
    double r[4], js[4];
    cr_assert_eq(hs_similarity_compute(m, 2, 2, vis, 2, HS_SIM_PEARSON, r, NULL), HS_OK);
    near(r[1], 0.0, 0, "r");
    near(r[0], 1.0, 0, "r diagonal");
    cr_assert_eq(hs_similarity_compute(m, 2, 2, vis, 2, HS_SIM_JS, js, NULL), HS_OK);
    double row1 = 0.5 * (0.5 * log(2.0) + 0.5 * log(2.0 / 3)) + 0.5 * log(4.0 / 3);
    near(js[1], row1 / 2, 1e-12, "js");
    near(js[2], row1 / 2, 1e-12, "js symmetric");
}

Test(visibility, rollout_of_a_window_of_one_is_the_identity)
{
    /* W = 1: each row sees itself only, so B = (1 - r) I + r I whatever the junk */
    const float m[8] = {1, J, J, 1, 1, J, J, 1};
    double out[4];
    cr_assert_eq(hs_rollout_compute(m, 2, 1, 2, (const hs_visibility[]){hs_vis_sliding(1)}, 1,
                                    0.5, out, NULL), HS_OK);
    const double eye[4] = {1, 0, 0, 1};
    for (int k = 0; k < 4; k++)
        near(out[k], eye[k], 0, "rollout");
}

/* Windows that cover the text and a prefix of at most one token read as causal, a prefix of
 * the whole text as bidirectional: the same bits. */
Test(visibility, degenerate_windows_and_prefixes_give_the_same_bits)
{
    const vcase *v = &cases[0];
    int N = v->L * v->H, n = v->n;
    hs_entropy a[64], b[64];
    cr_assert_leq(N, 64);
    const hs_visibility same[3][2] = {{hs_vis_sliding(n), hs_vis_causal()},
                                      {hs_vis_prefix(1), hs_vis_causal()},
                                      {hs_vis_prefix(n), hs_vis_bidirectional()}};
    for (int s = 0; s < 3; s++) {
        cr_assert_eq(hs_entropy_compute(v->attn, N, n, same[s][0], v->sink, a, NULL), HS_OK);
        cr_assert_eq(hs_entropy_compute(v->attn, N, n, same[s][1], v->sink, b, NULL), HS_OK);
        for (int k = 0; k < N; k++) /* field by field: the struct has padding */
            cr_assert(!memcmp(&a[k].nats, &b[k].nats, sizeof(double)) &&
                          !memcmp(&a[k].norm, &b[k].norm, sizeof(double)) &&
                          !memcmp(&a[k].rowmax, &b[k].rowmax, sizeof(double)) &&
                          a[k].rows == b[k].rows,
                      "case %d head %d", s, k);
    }
}

Test(visibility, bad_visibilities_are_refused_by_name)
{
    const float m[4] = {1, 0, 0.5f, 0.5f};
    hs_entropy e;
    hs_error err = {{0}};
    cr_assert_eq(hs_entropy_compute(m, 1, 2, hs_vis_sliding(0), NULL, &e, &err), HS_E_ARG);
    cr_assert(strstr(err.msg, "sliding window"), "%s", err.msg);
    cr_assert_eq(hs_entropy_compute(m, 1, 2, hs_vis_prefix(-1), NULL, &e, &err), HS_E_ARG);
    cr_assert_eq(hs_entropy_compute(m, 1, 2, (hs_visibility){(hs_vis_kind)9, 0, 0}, NULL, &e,
                                    &err), HS_E_ARG);
    double r[1], out[4];
    cr_assert_eq(hs_similarity_compute(m, 1, 2, NULL, 1, HS_SIM_PEARSON, r, &err), HS_E_ARG);
    cr_assert_eq(hs_similarity_compute(m, 1, 2, TU_CAUSAL, 2, HS_SIM_PEARSON, r, &err), HS_E_ARG);
    cr_assert(strstr(err.msg, "2 visibilities, expected 1 or 1"), "%s", err.msg);
    cr_assert_eq(hs_rollout_compute(m, 1, 1, 2, TU_CAUSAL, 0, 0.5, out, &err), HS_E_ARG);
    cr_assert_eq(hs_diversity_compute(m, 1, 1, 2, NULL, 1, NULL, out, &err), HS_E_ARG);
}
