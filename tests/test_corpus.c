/* Corpus mode: the reader (lines, JSONL, folders, bad records), streaming statistics
 * (Welford against two-pass sums, Student-t quantiles against an independent numerical
 * integration and against printed tables), reservoir sampling and the aggregator. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "headscope/corpus.h"
#include "headscope/model.h"
#include "testutil.h"

/* ---- reader -------------------------------------------------------------------------- */

typedef struct rec {
    long line;
    hs_corpus_skip skip;
    char text[256], pair[256];
    int has_pair;
} rec;

/* Reads every record of a memory buffer as fmt into out (at most cap); returns the count. */
static int read_mem(const char *data, size_t len, hs_corpus_format fmt, rec *out, int cap,
                    long *empty, hs_corpus_format *used)
{
    FILE *f = fmemopen((void *)(uintptr_t)data, len, "rb");
    cr_assert(f);
    hs_corpus_reader *r = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_corpus_open_stream(f, fmt, &r, &err), HS_OK, "%s", err.msg);
    int n = 0, done = 0;
    hs_corpus_item it;
    while (n < cap) {
        cr_assert_eq(hs_corpus_next(r, &it, &done, &err), HS_OK, "%s", err.msg);
        if (done)
            break;
        out[n].line = it.line;
        out[n].skip = it.skip;
        out[n].has_pair = it.pair != NULL;
        snprintf(out[n].text, sizeof out[n].text, "%s", it.text ? it.text : "");
        snprintf(out[n].pair, sizeof out[n].pair, "%s", it.pair ? it.pair : "");
        n++;
    }
    if (empty)
        *empty = hs_corpus_empty(r);
    if (used)
        *used = hs_corpus_reader_format(r);
    hs_corpus_close(r);
    fclose(f);
    return n;
}

Test(corpus_reader, lines_skip_empty_and_blank_lines_and_strip_cr)
{
    const char d[] = "\xEF\xBB\xBFone\r\n\n   \ntwo words\n\t\nthree";
    rec r[8];
    long empty = 0;
    hs_corpus_format used;
    int n = read_mem(d, sizeof d - 1, HS_CORPUS_AUTO, r, 8, &empty, &used);
    cr_assert_eq(n, 3);
    cr_assert_eq(used, HS_CORPUS_LINES);
    cr_assert_str_eq(r[0].text, "one");
    cr_assert_eq(r[0].line, 1);
    cr_assert_str_eq(r[1].text, "two words");
    cr_assert_eq(r[1].line, 4);
    cr_assert_str_eq(r[2].text, "three");
    cr_assert_eq(r[2].line, 6);
    cr_assert_eq(empty, 3);
}

Test(corpus_reader, invalid_utf8_line_is_marked_with_its_line)
{
    const char d[] = "fine\nbad \xC3\x28 byte\nalso fine\n";
    rec r[8];
    int n = read_mem(d, sizeof d - 1, HS_CORPUS_LINES, r, 8, NULL, NULL);
    cr_assert_eq(n, 3);
    cr_assert_eq(r[0].skip, HS_SKIP_NONE);
    cr_assert_eq(r[1].skip, HS_SKIP_UTF8);
    cr_assert_eq(r[1].line, 2);
    cr_assert_str_eq(r[1].text, "");
    cr_assert_eq(r[2].skip, HS_SKIP_NONE);
}

Test(corpus_reader, jsonl_text_and_pair_and_bad_records)
{
    const char d[] = "{\"text\": \"caf\\u00e9\", \"id\": 3}\n"
                     "{\"text\": \"a\", \"text_pair\": \"b\"}\n"
                     "{\"text\": 5}\n"
                     "not json\n"
                     "[\"text\"]\n"
                     "{\"text\": \"x\"} trailing\n"
                     "{\"text\": \"y\", \"text_pair\": null}\n"
                     "{\"text\": \"\\ud800\"}\n";
    rec r[16];
    hs_corpus_format used;
    int n = read_mem(d, sizeof d - 1, HS_CORPUS_AUTO, r, 16, NULL, &used);
    cr_assert_eq(used, HS_CORPUS_JSONL);
    cr_assert_eq(n, 8);
    cr_assert_eq(r[0].skip, HS_SKIP_NONE);
    cr_assert_str_eq(r[0].text, "caf\xC3\xA9");
    cr_assert_eq(r[0].has_pair, 0);
    cr_assert_str_eq(r[1].text, "a");
    cr_assert_str_eq(r[1].pair, "b");
    cr_assert_eq(r[2].skip, HS_SKIP_JSON);
    cr_assert_eq(r[3].skip, HS_SKIP_JSON);
    cr_assert_eq(r[4].skip, HS_SKIP_JSON);
    cr_assert_eq(r[5].skip, HS_SKIP_JSON);
    cr_assert_eq(r[6].skip, HS_SKIP_NONE);
    cr_assert_eq(r[6].has_pair, 0);
    cr_assert_neq(r[7].skip, HS_SKIP_NONE); /* a lone surrogate is not text */
    cr_assert_eq(r[7].line, 8);
}

Test(corpus_reader, parse_reports_details)
{
    char *t, *p, detail[160];
    size_t tl, pl;
    cr_assert_eq(hs_corpus_parse("{\"txt\": \"a\"}", 12, HS_CORPUS_JSONL, &t, &tl, &p, &pl,
                                 detail, sizeof detail), HS_SKIP_JSON);
    cr_assert(t == NULL && p == NULL);
    cr_assert(strstr(detail, "\"text\" is missing"), "%s", detail);
    cr_assert_eq(hs_corpus_parse("ab\xFF", 3, HS_CORPUS_LINES, &t, &tl, &p, &pl, detail,
                                 sizeof detail), HS_SKIP_UTF8);
    cr_assert(strstr(detail, "byte 2"), "%s", detail);
    cr_assert_eq(hs_corpus_parse("a\0b", 3, HS_CORPUS_LINES, &t, &tl, &p, &pl, detail,
                                 sizeof detail), HS_SKIP_NONE);
    cr_assert_eq(tl, 3);
    cr_assert(t[1] == '\0' && t[2] == 'b');
    free(t);
}

Test(corpus_reader, overlong_line_is_skipped_and_reading_goes_on)
{
    size_t big = HS_CORPUS_MAX_LINE + 10;
    char *d = malloc(big + 16);
    memset(d, 'a', big);
    memcpy(d + big, "\nnext\n", 6);
    rec r[4];
    int n = read_mem(d, big + 6, HS_CORPUS_LINES, r, 4, NULL, NULL);
    free(d);
    cr_assert_eq(n, 2);
    cr_assert_eq(r[0].skip, HS_SKIP_LINE_LONG);
    cr_assert_eq(r[1].skip, HS_SKIP_NONE);
    cr_assert_str_eq(r[1].text, "next");
    cr_assert_eq(r[1].line, 2);
}

static void write_file(const char *path, const char *s)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    fputs(s, f);
    fclose(f);
}

Test(corpus_reader, folder_of_txt_files_sorted_by_name)
{
    char dir[] = "/tmp/hs-corpus-XXXXXX", p[64];
    cr_assert(mkdtemp(dir));
    const char *names[] = {"b.txt", "a.txt", "c.md", "d.txt"};
    const char *texts[] = {"second\n", "first\r\n", "ignored", " \n"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        write_file(p, texts[i]);
    }
    hs_corpus_reader *r = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_corpus_open(dir, HS_CORPUS_AUTO, &r, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_corpus_reader_format(r), HS_CORPUS_DIR);
    hs_corpus_item it;
    int done = 0;
    cr_assert_eq(hs_corpus_next(r, &it, &done, &err), HS_OK);
    cr_assert_str_eq(it.text, "first");
    cr_assert_str_eq(it.name, "a.txt");
    cr_assert_eq(hs_corpus_next(r, &it, &done, &err), HS_OK);
    cr_assert_str_eq(it.text, "second");
    cr_assert_eq(it.line, 2);
    cr_assert_eq(hs_corpus_next(r, &it, &done, &err), HS_OK);
    cr_assert_eq(done, 1);
    cr_assert_eq(hs_corpus_empty(r), 1);
    hs_corpus_close(r);
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    cr_assert_eq(hs_corpus_open(dir, HS_CORPUS_AUTO, &r, &err), HS_E_INPUT);
    cr_assert(strstr(err.msg, "no .txt files"), "%s", err.msg);
    rmdir(dir);
}

Test(corpus_reader, open_errors_name_the_path)
{
    hs_corpus_reader *r = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_corpus_open("/nonexistent/corpus.txt", HS_CORPUS_AUTO, &r, &err), HS_E_IO);
    cr_assert(strstr(err.msg, "'/nonexistent/corpus.txt'"), "%s", err.msg);
    cr_assert_null(r);
    cr_assert_eq(hs_corpus_open("fixtures/corpus/licenses.txt", HS_CORPUS_DIR, &r, &err), HS_E_INPUT);
    cr_assert(strstr(err.msg, "not a folder"), "%s", err.msg);
}

/* ---- statistics ----------------------------------------------------------------------- */

Test(stats, hand_computed_mean_sd_and_interval)
{
    /* 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sum of squares 32, sample variance 32/7 */
    const double x[] = {2, 4, 4, 4, 5, 5, 7, 9};
    hs_stat s = {0};
    for (int i = 0; i < 8; i++)
        hs_stat_add(&s, x[i], 1);
    hs_stat_add(&s, NAN, 1); /* ignored */
    hs_summary m;
    hs_stat_summary(&s, &m);
    cr_assert_eq(m.n, 8);
    cr_assert_float_eq(m.mean, 5.0, 1e-15);
    cr_assert_float_eq(m.sd, sqrt(32.0 / 7.0), 1e-14);
    double half = 2.36462425159279 * sqrt(32.0 / 7.0) / sqrt(8.0); /* t_{0.975,7} */
    cr_assert_float_eq(m.ci_low, 5.0 - half, 1e-13);
    cr_assert_float_eq(m.ci_high, 5.0 + half, 1e-13);
    cr_assert_float_eq(m.wmean, 5.0, 1e-15);
}

Test(stats, weighted_mean_and_small_counts)
{
    hs_stat s = {0};
    hs_summary m;
    hs_stat_summary(&s, &m);
    cr_assert(m.n == 0 && isnan(m.mean) && isnan(m.sd) && isnan(m.wmean));
    hs_stat_add(&s, 1.0, 3);
    hs_stat_summary(&s, &m);
    cr_assert(m.n == 1 && m.mean == 1.0 && isnan(m.sd) && isnan(m.ci_low));
    hs_stat_add(&s, 5.0, 1);
    hs_stat_summary(&s, &m);
    cr_assert_float_eq(m.wmean, (3 * 1.0 + 5.0) / 4, 1e-15); /* 2 */
    cr_assert_float_eq(m.mean, 3.0, 1e-15);
    cr_assert_float_eq(m.sd, sqrt(8.0), 1e-14);
}

Test(stats, welford_matches_two_pass_on_shifted_data)
{
    /* values near 1e6 with small spread: the naive sum-of-squares formula loses digits,
     * the two-pass and Welford results agree */
    enum { N = 10000 };
    static double x[N];
    uint64_t z = 12345;
    hs_stat s = {0};
    double sum = 0, wsum = 0, wx = 0;
    for (int i = 0; i < N; i++) {
        z = z * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = 1e6 + (double)(z >> 11) / 9007199254740992.0;
        double w = (double)(i % 7 + 1);
        hs_stat_add(&s, x[i], w);
        sum += x[i];
        wsum += w;
        wx += w * x[i];
    }
    double mean = sum / N, ss = 0;
    for (int i = 0; i < N; i++)
        ss += (x[i] - mean) * (x[i] - mean);
    hs_summary m;
    hs_stat_summary(&s, &m);
    cr_assert(fabs(m.mean - mean) < 1e-14 * mean, "%.17g vs %.17g", m.mean, mean);
    cr_assert(fabs(m.sd - sqrt(ss / (N - 1))) < 1e-9 * sqrt(ss / (N - 1)) + 1e-12);
    cr_assert(fabs(m.wmean - wx / wsum) < 1e-14 * mean);
}

/* P(0 < T < t) for Student's t with df degrees of freedom, by composite Simpson on the
 * density (an independent check of the quantile). */
static double t_mass(double t, long df)
{
    double v = (double)df;
    double c = exp(lgamma((v + 1) / 2) - lgamma(v / 2)) / sqrt(v * 3.14159265358979323846);
    int n = 20000;
    double h = t / n, s = 0;
    for (int i = 0; i <= n; i++) {
        double x = i * h, f = c * pow(1 + x * x / v, -(v + 1) / 2);
        s += f * (i == 0 || i == n ? 1 : i % 2 ? 4 : 2);
    }
    return s * h / 3;
}

Test(stats, t_quantile_by_numerical_integration)
{
    const long dfs[] = {1, 2, 3, 5, 7, 10, 20, 29, 30, 31, 35, 50, 100, 1000, 100000};
    for (size_t i = 0; i < sizeof dfs / sizeof dfs[0]; i++) {
        double t = hs_t_quantile_975(dfs[i]);
        double mass = t_mass(t, dfs[i]);
        cr_assert(fabs(mass - 0.475) < 1e-8, "df %ld: t %.15g has mass %.12g", dfs[i], t, mass);
    }
    cr_assert(isnan(hs_t_quantile_975(0)));
}

Test(stats, t_quantile_against_printed_tables)
{
    /* two-sided 95% critical values of printed t tables (3 decimals) */
    const struct { long df; double t; } tab[] = {
        {1, 12.706}, {2, 4.303}, {5, 2.571}, {10, 2.228}, {15, 2.131}, {20, 2.086},
        {30, 2.042}, {40, 2.021}, {60, 2.000}, {120, 1.980}, {1000000, 1.960}};
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        cr_assert(fabs(hs_t_quantile_975(tab[i].df) - tab[i].t) < 6e-4, "df %ld: %.6f", tab[i].df,
                  hs_t_quantile_975(tab[i].df));
    /* df just past the table: continuous with it and within 1e-9 of the mpmath value */
    cr_assert(fabs(hs_t_quantile_975(31) - 2.03951344639641) < 1e-9);
    cr_assert(fabs(hs_t_quantile_975(50) - 2.00855911210076) < 1e-9);
}

Test(sample, reservoir_is_deterministic_complete_and_uniform)
{
    /* k >= n keeps everything in order */
    uint64_t st = 7;
    for (long i = 0; i < 5; i++)
        cr_assert_eq(hs_reservoir_slot(&st, i, 10), i);
    /* same seed, same sample */
    long a[3], b[3];
    for (int rep = 0; rep < 2; rep++) {
        long *s = rep ? b : a;
        uint64_t state = 42;
        for (long i = 0; i < 100; i++) {
            long slot = hs_reservoir_slot(&state, i, 3);
            if (slot >= 0)
                s[slot] = i;
        }
    }
    cr_assert(a[0] == b[0] && a[1] == b[1] && a[2] == b[2]);
    /* each of 10 items lands in a 3-sample with probability 0.3 */
    int hits[10] = {0};
    for (uint64_t seed = 0; seed < 20000; seed++) {
        uint64_t state = seed;
        long s[3];
        for (long i = 0; i < 10; i++) {
            long slot = hs_reservoir_slot(&state, i, 3);
            if (slot >= 0)
                s[slot] = i;
        }
        for (int j = 0; j < 3; j++)
            hits[s[j]]++;
    }
    for (int i = 0; i < 10; i++) /* 6000 expected, sd about 65 */
        cr_assert(abs(hits[i] - 6000) < 400, "item %d: %d", i, hits[i]);
}

/* ---- aggregation on a real model -------------------------------------------------------- */

Test(corpus_agg, means_over_texts_equal_the_per_text_analyses)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load("fixtures/tiny-gpt2", &m, &err), HS_OK, "%s", err.msg);
    const int32_t t1[] = {464, 3797, 3332, 319, 262, 2603, 13}, t2[] = {15496, 995, 11, 995};
    const int32_t *ids[2] = {t1, t2};
    int ns[2] = {7, 4};
    hs_analyze_opts o;
    hs_analyze_opts_default(&o);
    o.ablation = 0;
    o.hash_files = 0;
    o.diversity = 0;
    hs_analysis *a[2] = {NULL, NULL};
    hs_corpus_agg *g = NULL;
    for (int i = 0; i < 2; i++) {
        hs_analyze_input in = {.ids = ids[i], .n = ns[i]};
        cr_assert_eq(hs_analyze_run(m, &in, &o, &a[i], &err), HS_OK, "%s", err.msg);
        if (!g)
            cr_assert_eq(hs_corpus_agg_new(a[i], &g, &err), HS_OK);
        cr_assert_eq(hs_corpus_agg_add(g, a[i], &err), HS_OK);
    }
    cr_assert_eq(hs_corpus_agg_finish(g, HS_SIM_PEARSON, 0.5, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(g->n_texts, 2);
    cr_assert_eq(g->tokens, 11);
    for (int k = 0; k < g->n_heads; k++) {
        double e0 = a[0]->heads[k].entropy.nats, e1 = a[1]->heads[k].entropy.nats;
        const hs_stat *s = &g->stats[(size_t)k * HS_CQ_COUNT + HS_CQ_ENTROPY];
        hs_summary sm;
        hs_stat_summary(s, &sm);
        cr_assert_float_eq(sm.mean, (e0 + e1) / 2, 1e-12);
        cr_assert_float_eq(sm.sd, fabs(e0 - e1) / sqrt(2.0), 1e-12);
        cr_assert_float_eq(sm.wmean, (7 * e0 + 4 * e1) / 11, 1e-12); /* rows: n each */
        for (int j = 0; j < g->n_heads; j++) {
            size_t ij = (size_t)k * (size_t)g->n_heads + (size_t)j;
            cr_assert_float_eq(g->similarity[ij], (a[0]->similarity[ij] + a[1]->similarity[ij]) / 2, 1e-12);
        }
    }
    /* corpus importance: per-layer L2 normalisation of the mean raw gradient */
    int H = g->n_head;
    for (int l = 0; l < g->n_heads / H; l++) {
        double ss = 0, mr[64];
        for (int h = 0; h < H; h++) {
            int k = l * H + h;
            mr[h] = (a[0]->heads[k].gradient_raw + a[1]->heads[k].gradient_raw) / 2;
            ss += mr[h] * mr[h];
        }
        for (int h = 0; h < H; h++)
            cr_assert_float_eq(g->importance[l * H + h], mr[h] / sqrt(ss), 1e-12);
    }
    char *line = hs_corpus_text_json(a[1], 1, 9);
    cr_assert(line && strstr(line, "\"index\":1,\"line\":9,\"n_tokens\":4"), "%s", line);
    cr_assert(!strchr(line, '\n'));
    free(line);
    hs_corpus_agg_free(g);
    hs_analysis_free(a[0]);
    hs_analysis_free(a[1]);
    hs_model_free(m);
}
