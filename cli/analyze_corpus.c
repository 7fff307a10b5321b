/* headscope analyze --corpus: every text of a corpus analysed in turn, statistics over
 * texts streamed into an aggregate (docs/corpus.md), texts.jsonl and report.json. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "headscope/corpus.h"
#include "internal.h"

#define MAX_SKIP_MESSAGES 50

typedef struct kept {
    long line;
    char *text, *pair;
    size_t len, pair_len;
} kept;

typedef struct run {
    const char *cmd;
    const cli_corpus_opts *co;
    const hs_model *m;
    hs_analyze_opts ao;
    hs_corpus_info info;
    hs_corpus_agg *agg;
    hs_analysis *first;
    FILE *out;          /* texts.jsonl's temporary file */
    int quiet, messages;
    double t0;
} run;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void skipped(run *r, long line, hs_corpus_skip why, const char *detail)
{
    r->info.skipped[why]++;
    if (r->quiet)
        return;
    if (r->messages < MAX_SKIP_MESSAGES)
        cli_error(r->cmd, "'%s' %s %ld: %s%s%s, skipped", r->co->path,
                  r->info.format == HS_CORPUS_DIR ? "file" : "line", line,
                  hs_corpus_skip_name(why), *detail ? ": " : "", detail);
    else if (r->messages == MAX_SKIP_MESSAGES)
        cli_error(r->cmd, "more records skipped (counts in report.json)");
    r->messages++;
}

/* Tokenizes and analyses one text, folds it into the aggregate and writes its line.
 * Returns 0, or EXIT_FAIL after printing the error. */
static int one_text(run *r, long line, const char *text, size_t len, const char *pair,
                    size_t pair_len)
{
    const hs_tokenizer *tok = hs_model_tokenizer(r->m);
    const hs_model_config *c = hs_model_config_of(r->m);
    int bert = hs_tokenizer_get_kind(tok) == HS_TOK_WORDPIECE;
    hs_encoding enc = {0};
    hs_error err = {{0}};
    hs_analysis *a = NULL;
    char *js = NULL;
    int rc = EXIT_FAIL;
    if (pair && !bert) {
        skipped(r, line, HS_SKIP_PAIR, "the model takes a single text");
        return 0;
    }
    if (hs_tokenizer_encode(tok, text, len, pair, pair_len, &enc, &err) != HS_OK) {
        skipped(r, line, HS_SKIP_UTF8, err.msg);
        return 0;
    }
    size_t special = bert ? (pair ? 3 : 2) : 0, max = (size_t)r->info.max_tokens;
    int truncated = 0;
    if (enc.n <= special) {
        skipped(r, line, HS_SKIP_NO_TOKENS, "");
        rc = 0;
        goto done;
    }
    if (enc.n > max) {
        if (r->co->skip_long) {
            char d[64];
            snprintf(d, sizeof d, "%zu tokens, more than %zu", enc.n, max);
            skipped(r, line, HS_SKIP_TOO_LONG, d);
            rc = 0;
            goto done;
        }
        cli_truncate_encoding(tok, &enc, max);
        truncated = 1;
    }
    if (c->family == HS_FAMILY_GPT2 && enc.n < 2) {
        skipped(r, line, HS_SKIP_TOO_SHORT, "one token; the next-token loss needs two");
        rc = 0;
        goto done;
    }
    hs_analyze_opts ao = r->ao;
    ao.hash_files = r->first == NULL && r->ao.hash_files;
    ao.probe = r->first == NULL;
    hs_analyze_input in = {.ids = enc.ids, .type_ids = enc.type_ids, .n = (int)enc.n,
                           .tokens = (const char *const *)enc.tokens, .truncated = truncated};
    if (hs_analyze_run(r->m, &in, &ao, &a, &err) != HS_OK) {
        cli_error(r->cmd, "'%s' %s %ld: %s", r->co->path,
                  r->info.format == HS_CORPUS_DIR ? "file" : "line", line, err.msg);
        goto done;
    }
    if (!r->agg && hs_corpus_agg_new(a, &r->agg, &err) != HS_OK) {
        cli_error(r->cmd, "%s", err.msg);
        goto done;
    }
    if (hs_corpus_agg_add(r->agg, a, &err) != HS_OK) {
        cli_error(r->cmd, "%s", err.msg);
        goto done;
    }
    if (!(js = hs_corpus_text_json(a, r->agg->n_texts - 1, line))) {
        cli_error(r->cmd, "out of memory");
        goto done;
    }
    if (fputs(js, r->out) == EOF || fputc('\n', r->out) == EOF) {
        cli_error(r->cmd, "cannot write texts.jsonl: %s", strerror(errno));
        goto done;
    }
    if (!r->first) {
        r->first = a;
        a = NULL;
    }
    rc = 0;
done:
    free(js);
    hs_analysis_free(a);
    hs_encoding_free(&enc);
    return rc;
}

static int cmp_kept(const void *x, const void *y)
{
    const kept *a = x, *b = y;
    return (a->line > b->line) - (a->line < b->line);
}

/* Reads every record; analyses each (or, with a sample, keeps a reservoir and analyses it
 * afterwards in corpus order). Returns 0 or an exit status. */
static int read_all(run *r, hs_corpus_reader *rd)
{
    hs_error err = {{0}};
    hs_corpus_item it;
    int done = 0, rc = 0;
    long valid = 0, k = r->co->sample;
    kept *res = k ? calloc((size_t)k, sizeof *res) : NULL;
    uint64_t state = r->co->seed;
    if (k && !res) {
        cli_error(r->cmd, "out of memory");
        return EXIT_FAIL;
    }
    while (!rc) {
        if (r->co->max_texts && valid >= r->co->max_texts)
            break;
        if (hs_corpus_next(rd, &it, &done, &err) != HS_OK) {
            cli_error(r->cmd, "'%s': %s", r->co->path, err.msg);
            rc = EXIT_FAIL;
            break;
        }
        if (done)
            break;
        r->info.format = hs_corpus_reader_format(rd);
        r->info.n_records++;
        if (it.skip) {
            skipped(r, it.line, it.skip, it.detail);
            continue;
        }
        if (!k) {
            valid++;
            rc = one_text(r, it.line, it.text, it.len, it.pair, it.pair_len);
            continue;
        }
        long slot = hs_reservoir_slot(&state, valid++, k);
        if (slot < 0)
            continue;
        kept *s = &res[slot];
        free(s->text);
        free(s->pair);
        s->line = it.line;
        s->len = it.len;
        s->pair_len = it.pair_len;
        s->text = malloc(it.len + 1);
        s->pair = it.pair ? malloc(it.pair_len + 1) : NULL;
        if (!s->text || (it.pair && !s->pair)) {
            cli_error(r->cmd, "out of memory");
            rc = EXIT_FAIL;
            break;
        }
        memcpy(s->text, it.text, it.len + 1);
        if (it.pair)
            memcpy(s->pair, it.pair, it.pair_len + 1);
    }
    r->info.n_empty = hs_corpus_empty(rd);
    if (k) {
        long n = valid < k ? valid : k;
        qsort(res, (size_t)n, sizeof *res, cmp_kept);
        for (long i = 0; i < n && !rc; i++)
            rc = one_text(r, res[i].line, res[i].text, res[i].len, res[i].pair, res[i].pair_len);
        for (long i = 0; i < k; i++) {
            free(res[i].text);
            free(res[i].pair);
        }
        free(res);
    }
    return rc;
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void print_summary(const run *r, const char *report_path)
{
    const hs_corpus_agg *g = r->agg;
    long n_skipped = 0;
    for (int s = 1; s < HS_SKIP_COUNT; s++)
        n_skipped += r->info.skipped[s];
    printf("%s: %ld texts analysed (%ld skipped, %ld truncated), %ld tokens\n", r->co->path,
           g->n_texts, n_skipped, g->truncated, g->tokens);
    hs_summary s;
    hs_stat_summary(&g->loss, &s);
    if (s.n > 0)
        printf("loss (%s): mean %.4f, 95%% CI [%.4f, %.4f], sd %.4f over %ld texts\n",
               hs_loss_kind_name(r->first->loss_kind), s.mean, s.ci_low, s.ci_high, s.sd, s.n);
    printf("clusters at distance %.3g (mean similarity over texts): %d\n",
           r->first->opts.cluster_threshold, g->n_clusters);
    printf("wrote %s\n", report_path);
}

int cli_analyze_corpus(const char *cmd, hs_model *m, const cli_corpus_opts *co,
                       const hs_analyze_opts *ao, const char *outdir, int created_dir,
                       int quiet, int json)
{
    run r = {.cmd = cmd, .co = co, .m = m, .ao = *ao, .quiet = quiet, .t0 = now()};
    hs_corpus_reader *rd = NULL;
    hs_error err = {{0}};
    char *texts = join(outdir, "texts.jsonl");
    hs_out outf = {0};
    char *report = join(outdir, "report.json"), *js = NULL;
    int rc = EXIT_FAIL, texts_done = 0;
    const hs_model_config *c = hs_model_config_of(m);
    r.ao.ablation = co->ablation;
    r.ao.pruning = 0;
    r.ao.diversity = 0;
    r.ao.keep_maps = 0; /* no pictures or page per text */
    r.ao.progress = NULL;
    r.info.path = co->path;
    r.info.format = (hs_corpus_format)co->format;
    r.info.max_texts = co->max_texts;
    r.info.sample = co->sample;
    r.info.seed = co->seed;
    r.info.max_tokens = co->max_tokens > 0 && co->max_tokens < c->n_ctx ? co->max_tokens : c->n_ctx;
    r.info.skip_long = co->skip_long;
    r.info.ablation = co->ablation;
    if (!texts || !report) {
        cli_error(cmd, "out of memory");
        goto done;
    }
    if (hs_corpus_open(co->path, (hs_corpus_format)co->format, &rd, &err) != HS_OK) {
        cli_error(cmd, "%s", err.msg);
        goto done;
    }
    if (hs_out_open(texts, &outf, &err) != HS_OK) {
        cli_error(cmd, "%s", err.msg);
        goto done;
    }
    r.out = outf.f;
    if (read_all(&r, rd))
        goto done;
    if (!r.agg) {
        long n_skipped = 0;
        for (int s = 1; s < HS_SKIP_COUNT; s++)
            n_skipped += r.info.skipped[s];
        cli_error(cmd, "'%s' has no text to analyse (%ld records skipped, %ld empty)", co->path,
                  n_skipped, r.info.n_empty);
        goto done;
    }
    if (hs_corpus_agg_finish(r.agg, r.ao.similarity, r.ao.cluster_threshold, &err) != HS_OK) {
        cli_error(cmd, "%s", err.msg);
        goto done;
    }
    r.info.seconds = now() - r.t0;
    const char *files[] = {"texts.jsonl", "report.json"};
    if (!(js = hs_corpus_report_json(r.agg, r.first, &r.info, files, 2, 1))) {
        cli_error(cmd, "out of memory");
        goto done;
    }
    /* texts.jsonl first, report.json last: a complete report.json means a complete run */
    r.out = NULL;
    if (hs_out_close(&outf, 1, &err) != HS_OK) {
        cli_error(cmd, "%s", err.msg);
        goto done;
    }
    texts_done = 1;
    if (hs_file_write_atomic(report, js, strlen(js), &err) != HS_OK) {
        cli_error(cmd, "%s", err.msg);
        goto done;
    }
    if (json)
        puts(js);
    else if (!quiet)
        print_summary(&r, report);
    rc = cli_finish_stdout(cmd);
done:
    hs_out_close(&outf, 0, NULL); /* nothing left when it was committed */
    if (rc != EXIT_OK) {
        if (texts && texts_done)
            unlink(texts);
        if (report && texts_done)
            unlink(report);
        if (created_dir)
            rmdir(outdir);
    }
    hs_corpus_close(rd);
    hs_corpus_agg_free(r.agg);
    hs_analysis_free(r.first);
    free(js);
    free(texts);
    free(report);
    return rc;
}
