/* Partial aggregates (src/io/corpus_partial.c): the pairwise merge of running statistics
 * against two-pass sums, merged aggregates against one aggregate of every text, partial.json
 * read back to the same bits, and every refusal of a bad or foreign partial. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "headscope/corpus.h"
#include "headscope/model.h"

/* ---- hs_stat_merge -------------------------------------------------------------------- */

/* Two-pass mean and sum of squared deviations of x[lo..hi), and the weighted mean. */
static void two_pass(const double *x, const double *w, int lo, int hi, double *mean, double *m2,
                     double *wmean)
{
    double s = 0, sw = 0, swx = 0;
    for (int i = lo; i < hi; i++) {
        s += x[i];
        sw += w[i];
        swx += w[i] * x[i];
    }
    *mean = s / (hi - lo);
    *m2 = 0;
    for (int i = lo; i < hi; i++)
        *m2 += (x[i] - *mean) * (x[i] - *mean);
    *wmean = swx / sw;
}

Test(stat_merge, pairwise_merge_matches_two_pass_over_the_union)
{
    enum { N = 1000 };
    double x[N], w[N];
    uint64_t st = 7;
    for (int i = 0; i < N; i++) { /* shifted data: spread 1e-3 about 1e4 */
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = 1e4 + 1e-3 * ((double)(st >> 11) / 9007199254740992.0 - 0.5);
        w[i] = 1 + (double)(i % 7);
    }
    const int cuts[] = {0, 1, 2, 333, 334, 700, N};
    hs_stat merged = {0};
    for (size_t c = 0; c + 1 < sizeof cuts / sizeof cuts[0]; c++) {
        hs_stat part = {0};
        for (int i = cuts[c]; i < cuts[c + 1]; i++)
            hs_stat_add(&part, x[i], w[i]);
        hs_stat_merge(&merged, &part);
    }
    double mean, m2, wmean;
    two_pass(x, w, 0, N, &mean, &m2, &wmean);
    cr_assert_eq(merged.n, N);
    cr_assert(fabs(merged.mean - mean) <= 1e-12 * fabs(mean), "%.17g %.17g", merged.mean, mean);
    cr_assert(fabs(merged.m2 - m2) <= 1e-6 * m2, "%.17g %.17g", merged.m2, m2);
    cr_assert(fabs(merged.wmean - wmean) <= 1e-12 * fabs(wmean));
}

Test(stat_merge, hand_computed_and_empty_sides)
{
    hs_stat a = {0}, b = {0}, e = {0};
    hs_stat_add(&a, 1, 1);
    hs_stat_add(&a, 2, 1);
    hs_stat_add(&b, 6, 2);
    hs_stat a0 = a;
    hs_stat_merge(&a, &e); /* nothing to add: unchanged */
    cr_assert(!memcmp(&a, &a0, sizeof a));
    hs_stat_merge(&e, &a); /* into an empty one: a copy */
    cr_assert(!memcmp(&e, &a0, sizeof a));
    hs_stat_merge(&a, &b); /* {1, 2, 6}: mean 3, M2 4 + 1 + 9 = 14; weights 1, 1, 2: 15 / 4 */
    cr_assert_eq(a.n, 3);
    cr_assert_float_eq(a.mean, 3.0, 1e-15);
    cr_assert_float_eq(a.m2, 14.0, 1e-13);
    cr_assert_float_eq(a.wmean, 3.75, 1e-15);
    cr_assert_float_eq(a.wsum, 4.0, 0);
}

/* ---- aggregates and partial.json on a real model --------------------------------------- */

static hs_model *model;
static hs_analysis *an[3];

static void load(void)
{
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load("fixtures/tiny-gpt2", &model, &err), HS_OK, "%s", err.msg);
    static const int32_t t0[] = {464, 3797, 3332, 319, 262, 2603, 13}, t1[] = {15496, 995, 11, 995},
                         t2[] = {40, 1842, 616, 3290, 290, 616, 3797, 13, 40, 1842};
    const int32_t *ids[3] = {t0, t1, t2};
    const int ns[3] = {7, 4, 10};
    hs_analyze_opts o;
    hs_analyze_opts_default(&o);
    o.ablation = 0;
    o.diversity = 0;
    for (int i = 0; i < 3; i++) {
        hs_analyze_input in = {.ids = ids[i], .n = ns[i]};
        o.hash_files = i == 0;
        cr_assert_eq(hs_analyze_run(model, &in, &o, &an[i], &err), HS_OK, "%s", err.msg);
    }
}

static void unload(void)
{
    for (int i = 0; i < 3; i++)
        hs_analysis_free(an[i]);
    hs_model_free(model);
}

/* An aggregate of the analyses [lo, hi). */
static hs_corpus_agg *agg_of(int lo, int hi)
{
    hs_error err = {{0}};
    hs_corpus_agg *g = NULL;
    cr_assert_eq(hs_corpus_agg_new(an[0], &g, &err), HS_OK, "%s", err.msg);
    for (int i = lo; i < hi; i++)
        cr_assert_eq(hs_corpus_agg_add(g, an[i], &err), HS_OK, "%s", err.msg);
    return g;
}

static hs_corpus_info info_of(void)
{
    hs_corpus_info in = {.path = "corpus.txt", .format = HS_CORPUS_LINES, .seed = 1,
                         .max_tokens = 256, .shard = 2, .n_shards = 3, .n_records = 5,
                         .n_selected = 3, .seconds = 1.25};
    in.skipped[HS_SKIP_JSON] = 1;
    in.skipped_text[HS_SKIP_TOO_SHORT] = 1;
    strcpy(in.digest, "ab12");
    return in;
}

TestSuite(partial, .init = load, .fini = unload);

Test(partial, merged_aggregates_equal_one_aggregate_of_every_text)
{
    hs_error err = {{0}};
    hs_corpus_agg *all = agg_of(0, 3), *a = agg_of(0, 1), *b = agg_of(1, 3);
    cr_assert_eq(hs_corpus_agg_merge(a, b, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(a->n_texts, 3);
    cr_assert_eq(a->tokens, 21);
    cr_assert_eq(a->tokens_min, 4);
    cr_assert_eq(a->tokens_max, 10);
    cr_assert_eq(a->n_sim, 3);
    size_t nh = (size_t)a->n_heads;
    for (size_t i = 0; i < nh * HS_CQ_COUNT; i++) {
        const hs_stat *x = &a->stats[i], *y = &all->stats[i];
        cr_assert_eq(x->n, y->n);
        cr_assert(fabs(x->mean - y->mean) <= 1e-12 * fmax(1, fabs(y->mean)), "%zu", i);
        cr_assert(fabs(x->m2 - y->m2) <= 1e-10 * fmax(1, fabs(y->m2)), "%zu", i);
        cr_assert(fabs(x->wmean - y->wmean) <= 1e-12 * fmax(1, fabs(y->wmean)), "%zu", i);
    }
    for (size_t i = 0; i < nh * nh; i++)
        cr_assert(fabs(a->sim_sum[i] - all->sim_sum[i]) <= 1e-12 * fmax(1, fabs(all->sim_sum[i])));
    hs_corpus_agg_free(all);
    hs_corpus_agg_free(a);
    hs_corpus_agg_free(b);
}

Test(partial, reads_back_to_the_same_bits)
{
    hs_error err = {{0}};
    hs_corpus_agg *g = agg_of(0, 3);
    hs_corpus_info in = info_of();
    hs_corpus_checkpoint cp = {.position = 3, .texts_bytes = 1234};
    strcpy(cp.texts_tmp, "texts.jsonl.tmp-abcdef");
    char *js = hs_corpus_partial_json(g, &in, &cp);
    cr_assert(js);
    hs_corpus_partial p;
    cr_assert_eq(hs_corpus_partial_parse(js, strlen(js), &p, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(p.cp.position, 3);
    cr_assert_eq(p.cp.texts_bytes, 1234);
    cr_assert_str_eq(p.cp.texts_tmp, "texts.jsonl.tmp-abcdef");
    cr_assert_eq(p.info.shard, 2);
    cr_assert_eq(p.info.n_shards, 3);
    cr_assert_eq(p.info.skipped[HS_SKIP_JSON], 1);
    cr_assert_eq(p.info.skipped_text[HS_SKIP_TOO_SHORT], 1);
    cr_assert_str_eq(p.info.path, "corpus.txt");
    size_t nh = (size_t)g->n_heads;
    cr_assert(!memcmp(p.agg->stats, g->stats, nh * HS_CQ_COUNT * sizeof *g->stats));
    cr_assert(!memcmp(p.agg->sim_sum, g->sim_sum, nh * nh * sizeof *g->sim_sum));
    cr_assert(!memcmp(&p.agg->loss, &g->loss, sizeof g->loss));
    cr_assert_eq(hs_corpus_agg_check(g, p.agg, &err), HS_OK, "%s", err.msg);
    char *again = hs_corpus_partial_json(p.agg, &p.info, &p.cp);
    cr_assert_str_eq(again, js);
    free(again);
    free(js);
    hs_corpus_partial_free(&p);
    hs_corpus_agg_free(g);
}

Test(partial, check_names_what_differs)
{
    hs_error err = {{0}};
    hs_corpus_agg *a = agg_of(0, 1), *b = agg_of(1, 2);
    cr_assert_eq(hs_corpus_agg_check(a, b, &err), HS_OK);
    b->sim_method = HS_SIM_JS;
    cr_assert_eq(hs_corpus_agg_check(a, b, &err), HS_E_INPUT);
    cr_assert(strstr(err.msg, "--similarity"), "%s", err.msg);
    b->sim_method = a->sim_method;
    b->model_json[2] ^= 1;
    cr_assert_eq(hs_corpus_agg_merge(a, b, &err), HS_E_INPUT);
    cr_assert(strstr(err.msg, "different model"), "%s", err.msg);
    cr_assert_eq(a->n_texts, 1, "a refused merge changes nothing");
    b->model_json[2] ^= 1;
    hs_corpus_partial pa = {.agg = a, .info = info_of()}, pb = {.agg = b, .info = info_of()};
    cr_assert_eq(hs_corpus_partial_check(&pa, &pb, &err), HS_OK, "%s", err.msg);
    pb.info.seed = 2;
    cr_assert_eq(hs_corpus_partial_check(&pa, &pb, &err), HS_E_INPUT);
    cr_assert(strstr(err.msg, "selection"), "%s", err.msg);
    pb.info = info_of();
    strcpy(pb.info.digest, "cd34");
    cr_assert_eq(hs_corpus_partial_check(&pa, &pb, &err), HS_E_INPUT);
    cr_assert(strstr(err.msg, "corpus content"), "%s", err.msg);
    pb.info = info_of();
    pb.info.n_shards = 4;
    cr_assert_eq(hs_corpus_partial_check(&pa, &pb, &err), HS_E_INPUT);
    cr_assert(strstr(err.msg, "--shard"), "%s", err.msg);
    hs_corpus_agg_free(a);
    hs_corpus_agg_free(b);
}

/* Parses js with the first occurrence of from replaced by to; returns the status. */
static hs_status parse_edited(const char *js, const char *from, const char *to, hs_error *err)
{
    const char *at = strstr(js, from);
    cr_assert(at, "'%s' not in the partial", from);
    size_t n = strlen(js) + strlen(to) + 1, k = (size_t)(at - js);
    char *e = malloc(n);
    memcpy(e, js, k);
    strcpy(e + k, to);
    strcat(e, at + strlen(from));
    hs_corpus_partial p;
    hs_status st = hs_corpus_partial_parse(e, strlen(e), &p, err);
    if (st == HS_OK)
        hs_corpus_partial_free(&p);
    free(e);
    return st;
}

Test(partial, refuses_bad_partials_naming_the_field)
{
    hs_error err = {{0}};
    hs_corpus_agg *g = agg_of(0, 2);
    hs_corpus_info in = info_of();
    char *js = hs_corpus_partial_json(g, &in, NULL);
    static const struct {
        const char *from, *to, *msg;
    } cases[] = {
        {"headscope.partial/1", "headscope.report/3", "not a headscope partial"},
        {"\"n_texts\":2", "\"n_texts\":-2", "'n_texts'"},
        {"\"n_texts\":2", "\"n_texts\":1", "not an integer in [0, 1]"},
        {"\"n_sim\":2", "\"n_sim\":\"2\"", "'n_sim'"},
        {"\"index\":2", "\"index\":7", "'index'"},
        {"\"similarity\":\"pearson\"", "\"similarity\":\"cosine\"", "'similarity'"},
        {"\"family\":\"gpt2\",\"loss_kind\"", "\"family\":\"bart\",\"loss_kind\"", "'family'"},
        {"\"complete\":true", "\"complete\":false", "'checkpoint'"},
        {"\"sim_sum\":[[", "\"sim_sum\":[[1,", "'sim_sum' row 0"},
        {"\"entropy_nats\":[[2,", "\"entropy_nats\":[[-2,", "bad count"},
        {"\"head_index\":[0,1", "\"head_index\":[1,1", "not increasing"},
        /* fuzz_partial: an empty list was HS_E_ARG, the programmer-error code */
        {"\"head_index\":[0,1,2,3,4,5,6,7]", "\"head_index\":[]", "'head_index' lists 0 heads"},
        {"\"head_index\":[0,1,2,3,4,5,6,7]", "\"head_index\":[0,1,2,3,4,5,6,8]", "not increasing in [0, 8)"},
        {"\"head_index\":[0,1,2,3,4,5,6,7]", "\"head_index\":[0,1,2,3,4,5,6,7,8]", "lists 9 heads, not 1 to 8"},
        {"\"n_layer\":2", "\"n_layer\":0", "'n_layer'"},
        {"{\"schema\"", "[{\"schema\"", "not a headscope partial"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(parse_edited(js, cases[i].from, cases[i].to, &err), HS_E_INPUT, "case %zu", i);
        cr_assert(strstr(err.msg, cases[i].msg), "case %zu: %s", i, err.msg);
    }
    hs_corpus_checkpoint cp = {.position = 1};
    strcpy(cp.texts_tmp, "../evil");
    char *bad = hs_corpus_partial_json(g, &in, &cp);
    hs_corpus_partial p;
    cr_assert_eq(hs_corpus_partial_parse(bad, strlen(bad), &p, &err), HS_E_INPUT);
    cr_assert(strstr(err.msg, "texts_tmp"), "%s", err.msg);
    cr_assert_eq(hs_corpus_partial_parse(js, strlen(js) / 2, &p, &err), HS_E_INPUT);
    free(bad);
    free(js);
    hs_corpus_agg_free(g);
}
