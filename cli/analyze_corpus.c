/* headscope analyze --corpus: every text of a corpus analysed in turn, statistics over
 * texts streamed into an aggregate (docs/corpus.md), texts.jsonl and report.json. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "corpus_run.h"
#include "pipeline/pipeline.h"

#define MAX_SKIP_MESSAGES 50

typedef struct kept {
    long line;
    char *text, *pair;
    size_t len, pair_len;
} kept;

/* A bad record (text: found after selection, by the tokenizer or a length limit). */
static void skipped(cli_corpus_run *r, long line, hs_corpus_skip why, const char *detail,
                    int text)
{
    if (r->means_pass || r->pack_probe) /* counted and said by the analysing pass */
        return;
    (text ? r->info.skipped_text : r->info.skipped)[why]++;
    if (r->quiet || r->selected < r->resume.cp.position) /* said before the checkpoint */
        return;
    cli_progress_end(&r->prog); /* the message on a line of its own */
    if (r->messages < MAX_SKIP_MESSAGES)
        cli_error(r->cmd, "'%s' %s %ld: %s%s%s, skipped", r->co->path,
                  r->info.format == HS_CORPUS_DIR ? "file" : "line", line,
                  hs_corpus_skip_name(why), *detail ? ": " : "", detail);
    else if (r->messages == MAX_SKIP_MESSAGES)
        cli_error(r->cmd, "more records skipped (counts in report.json)");
    r->messages++;
}

/* The first text this process analyses: it starts the aggregate, or is checked against the
 * one resumed. Returns 0 or EXIT_FAIL after printing the error. */
static int check_first(cli_corpus_run *r, const hs_analysis *a)
{
    hs_error err = {{0}};
    hs_corpus_agg *g = NULL;
    r->checked = 1;
    if (hs_corpus_agg_new(a, &g, &err) != HS_OK) {
        cli_error(r->cmd, "%s", err.msg);
        return EXIT_FAIL;
    }
    if (!r->agg) {
        r->agg = g;
        return 0;
    }
    hs_status st = hs_corpus_agg_check(r->agg, g, &err);
    hs_corpus_agg_free(g);
    if (st) {
        cli_error(r->cmd, "cannot resume: the checkpoint in '%s' was %s", r->outdir, err.msg);
        return EXIT_FAIL;
    }
    return 0;
}

int cli_corpus_encode(cli_corpus_run *r, long line, const char *text, size_t len,
                      const char *pair, size_t pair_len, hs_encoding *enc, int *truncated)
{
    const hs_tokenizer *tok = hs_model_tokenizer(r->m);
    const hs_model_config *c = hs_model_config_of(r->m);
    const hs_arch *ar = c->arch;
    /* the specials the tokenizer adds: [CLS] a [SEP] (b [SEP]); a pair needs a separator */
    size_t wrap = (size_t)(ar->cls_token != NULL) + (size_t)(ar->sep_token != NULL);
    hs_error err = {{0}};
    *truncated = 0;
    if (pair && !ar->sep_token) {
        skipped(r, line, HS_SKIP_PAIR, "the model takes a single text", 1);
        return 0;
    }
    size_t special = wrap + (pair ? 1 : 0), max = (size_t)r->info.max_tokens;
    /* a long text is tokenised only as far as max needs */
    if (hs_tokenizer_encode_max(tok, text, len, pair, pair_len, max, enc, &err) != HS_OK) {
        skipped(r, line, HS_SKIP_UTF8, err.msg, 1);
        return 0;
    }
    if (enc->n <= special) {
        skipped(r, line, HS_SKIP_NO_TOKENS, "", 1);
        return 0;
    }
    if (enc->n > max) {
        if (r->co->skip_long) {
            char d[64];
            snprintf(d, sizeof d, "more than %zu tokens", max);
            skipped(r, line, HS_SKIP_TOO_LONG, d, 1);
            return 0;
        }
        hs_encoding_truncate(tok, enc, max);
        *truncated = 1;
    }
    if (c->causal && enc->n < 2) {
        skipped(r, line, HS_SKIP_TOO_SHORT, "one token; the next-token loss needs two", 1);
        return 0;
    }
    return 1;
}

/* Tokenizes and analyses one text (the means pass: adds its contexts to the sums), folds
 * it into the aggregate and writes its line. Returns 0, or EXIT_FAIL after printing the
 * error. */
static int one_text(cli_corpus_run *r, long line, const char *text, size_t len,
                    const char *pair, size_t pair_len)
{
    hs_encoding enc = {0};
    hs_error err = {{0}};
    hs_analysis *a = NULL;
    char *js = NULL;
    int rc = EXIT_FAIL, truncated = 0;
    if (!cli_corpus_encode(r, line, text, len, pair, pair_len, &enc, &truncated)) {
        hs_encoding_free(&enc);
        return 0;
    }
    if (r->means_pass) {
        hs_status st = hs_ablation_means_add(r->m, enc.ids, enc.type_ids, (int)enc.n, r->z_sum, &err);
        r->z_tokens += (long)enc.n;
        hs_encoding_free(&enc);
        if (st)
            cli_error(r->cmd, "'%s' %s %ld: %s", r->co->path,
                      r->info.format == HS_CORPUS_DIR ? "file" : "line", line, err.msg);
        return st ? EXIT_FAIL : 0;
    }
    hs_analyze_opts ao = r->ao;
    ao.hash_files = !r->checked && r->ao.hash_files;
    ao.probe = !r->checked;
    hs_analyze_input in = {.ids = enc.ids, .type_ids = enc.type_ids, .n = (int)enc.n,
                           .truncated = truncated};
    const float *maps = r->pack_maps && r->pack_n == (int)enc.n ? r->pack_maps : NULL;
    if (hs_analyze_run_maps(r->m, &in, maps, &ao, &a, &err) != HS_OK) {
        cli_error(r->cmd, "'%s' %s %ld: %s", r->co->path,
                  r->info.format == HS_CORPUS_DIR ? "file" : "line", line, err.msg);
        goto done;
    }
    if (!r->checked && check_first(r, a))
        goto done;
    if (hs_corpus_agg_add(r->agg, a, &err) != HS_OK) {
        cli_error(r->cmd, "%s", err.msg);
        goto done;
    }
    r->done_here++;
    r->tokens_here += a->n;
    if (!(js = hs_corpus_text_json(a, r->agg->n_texts - 1, line))) {
        cli_error(r->cmd, "out of memory");
        goto done;
    }
    if (fputs(js, r->out) == EOF || fputc('\n', r->out) == EOF) {
        cli_error(r->cmd, "cannot write texts.jsonl: %s", strerror(errno));
        goto done;
    }
    rc = 0;
done:
    free(js);
    hs_analysis_free(a);
    hs_encoding_free(&enc);
    return rc;
}

/* One selected record, in corpus order: its digest; analysed when it is this shard's and
 * not already in the resumed checkpoint; then a checkpoint when one is due. */
int cli_corpus_selected(cli_corpus_run *r, long line, const char *text, size_t len,
                        const char *pair, size_t pair_len)
{
    if (r->means_pass) /* every selected text, whatever the shard or checkpoint */
        return one_text(r, line, text, len, pair, pair_len);
    char head[64];
    long j = r->selected;
    int n = snprintf(head, sizeof head, "%ld\t%zu\t%zu\t", line, len, pair ? pair_len : (size_t)-1);
    hs_sha256_update(&r->digest, head, (size_t)n);
    hs_sha256_update(&r->digest, text, len);
    if (pair)
        hs_sha256_update(&r->digest, pair, pair_len);
    if (j < r->resume.cp.position) {
        r->selected++;
        if (r->selected == r->resume.cp.position) {
            char hex[65];
            cli_corpus_digest_hex(r, hex);
            if (strcmp(hex, r->resume.info.digest)) {
                cli_error(r->cmd, "cannot resume: '%s' has changed since the checkpoint in '%s'",
                          r->co->path, r->outdir);
                return EXIT_FAIL;
            }
        }
        return 0;
    }
    if (r->co->n_shards > 1 && j % r->co->n_shards != r->co->shard - 1) {
        r->selected++;
        return 0;
    }
    long before = r->done_here;
    int rc = one_text(r, line, text, len, pair, pair_len);
    r->selected++;
    r->dealt++;
    if (rc || r->done_here == before)
        return rc;
    cli_progress_update(&r->prog, r->dealt, r->total, r->done_here, r->tokens_here, 0);
    if (r->stop_after && r->done_here >= r->stop_after) {
        if (cli_corpus_checkpoint(r))
            return EXIT_FAIL;
        cli_progress_end(&r->prog);
        cli_error(r->cmd, "stopped after %ld texts (HEADSCOPE_TEST_STOP_AFTER)", r->done_here);
        return EXIT_FAIL;
    }
    rc = r->every && r->done_here % r->every == 0 ? cli_corpus_checkpoint(r) : 0;
    if (r->signal_after && r->done_here == r->signal_after)
        raise(SIGINT); /* HEADSCOPE_TEST_SIGNAL_AFTER: as a Ctrl-C after this text */
    return rc;
}

static int cmp_kept(const void *x, const void *y)
{
    const kept *a = x, *b = y;
    return (a->line > b->line) - (a->line < b->line);
}

/* Reads every record; analyses each (or, with a sample, keeps a reservoir and analyses it
 * afterwards in corpus order). Returns 0 or an exit status. */
static int read_all(cli_corpus_run *r, hs_corpus_reader *rd)
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
            skipped(r, it.line, it.skip, it.detail, 0);
            continue;
        }
        if (!k) {
            valid++;
            rc = r->pack ? cli_pack_push(r, it.line, it.text, it.len, it.pair, it.pair_len)
                         : cli_corpus_selected(r, it.line, it.text, it.len, it.pair, it.pair_len);
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
        long N = r->co->n_shards > 1 ? r->co->n_shards : 1, I = r->co->n_shards > 1 ? r->co->shard : 1;
        r->total = n / N + (n % N >= I);
        for (long i = 0; i < n && !rc; i++)
            rc = r->pack ? cli_pack_push(r, res[i].line, res[i].text, res[i].len, res[i].pair,
                                         res[i].pair_len)
                         : cli_corpus_selected(r, res[i].line, res[i].text, res[i].len,
                                               res[i].pair, res[i].pair_len);
        for (long i = 0; i < k; i++) {
            free(res[i].text);
            free(res[i].pair);
        }
        free(res);
    }
    return rc;
}

/* This shard's selected records, counted by reading the corpus once before the analysis
 * (the reader's checks only, no tokenizer): r->total; -1 for a corpus on stdin, which is
 * read once. Returns 0, or EXIT_FAIL after printing the error. */
static int count_total(cli_corpus_run *r)
{
    hs_corpus_reader *rd = NULL;
    hs_corpus_item it;
    hs_error err = {{0}};
    long valid = 0;
    int done = 0;
    r->total = -1;
    if (!strcmp(r->co->path, "-"))
        return 0;
    if (hs_corpus_open(r->co->path, (hs_corpus_format)r->co->format, &rd, &err) != HS_OK) {
        cli_error(r->cmd, "%s", err.msg);
        return EXIT_FAIL;
    }
    while (!r->co->max_texts || valid < r->co->max_texts) {
        if (hs_corpus_next(rd, &it, &done, &err) != HS_OK) {
            hs_corpus_close(rd);
            cli_error(r->cmd, "'%s': %s", r->co->path, err.msg);
            return EXIT_FAIL;
        }
        if (done)
            break;
        valid += !it.skip;
    }
    hs_corpus_close(rd);
    long n = r->co->sample && r->co->sample < valid ? r->co->sample : valid;
    long N = r->co->n_shards > 1 ? r->co->n_shards : 1, I = r->co->n_shards > 1 ? r->co->shard : 1;
    r->total = n / N + (n % N >= I); /* the selected j with j mod N = I - 1 */
    return 0;
}

static void print_summary(const cli_corpus_run *r, const char *report_path)
{
    const hs_corpus_agg *g = r->agg;
    long n_skipped = 0;
    for (int s = 1; s < HS_SKIP_COUNT; s++)
        n_skipped += r->info.skipped[s] + r->info.skipped_text[s];
    if (r->info.n_shards > 1)
        printf("%s: shard %d/%d: ", cli_shown(r->co->path), r->info.shard, r->info.n_shards);
    else
        printf("%s: ", cli_shown(r->co->path));
    printf("%ld texts analysed (%ld skipped, %ld truncated), %ld tokens\n", g ? g->n_texts : 0,
           n_skipped, g ? g->truncated : 0, g ? g->tokens : 0);
    if (!report_path) {
        printf("wrote %s/partial.json (merge the shards with 'headscope merge')\n", cli_shown(r->outdir));
        return;
    }
    hs_summary s;
    hs_stat_summary(&g->loss, &s);
    if (s.n > 0)
        printf("loss (%s): mean %.4f, 95%% CI [%.4f, %.4f], sd %.4f over %ld texts\n",
               hs_loss_kind_name((hs_loss_kind)g->loss_kind), s.mean, s.ci_low, s.ci_high, s.sd, s.n);
    printf("clusters at distance %.3g (mean similarity over texts): %d\n", g->cluster_threshold,
           g->n_clusters);
    printf("wrote %s\n", cli_shown(report_path));
}

/* Mean ablation's means over the corpus: a first pass over every selected text (sampled and
 * limited as the analysis will be, every shard's), each head's context summed over every
 * token of the loss passes' input (hs_ablation_means_add), divided by the token count; the
 * counts the pass makes are left to the analysing pass. Returns 0 or EXIT_FAIL. */
static int corpus_means(cli_corpus_run *r)
{
    const hs_model_config *c = hs_model_config_of(r->m);
    size_t ld = (size_t)c->n_layer * (size_t)hs_model_attn_width(c);
    hs_error err = {{0}};
    hs_corpus_reader *rd = NULL;
    hs_corpus_info keep = r->info;
    long total = r->total;
    r->z_sum = calloc(ld, sizeof *r->z_sum);
    r->means = malloc(ld * sizeof *r->means);
    if (!r->z_sum || !r->means) {
        cli_error(r->cmd, "out of memory");
        return EXIT_FAIL;
    }
    if (hs_corpus_open(r->co->path, (hs_corpus_format)r->co->format, &rd, &err) != HS_OK) {
        cli_error(r->cmd, "%s", err.msg);
        return EXIT_FAIL;
    }
    r->means_pass = 1;
    int rc = read_all(r, rd);
    r->means_pass = 0;
    hs_corpus_close(rd);
    r->info = keep;
    r->total = total;
    if (rc)
        return rc;
    if (r->z_tokens == 0) {
        cli_error(r->cmd, "'%s' has no text to take the ablation means over", r->co->path);
        return EXIT_FAIL;
    }
    for (size_t k = 0; k < ld; k++)
        r->means[k] = (float)(r->z_sum[k] / (double)r->z_tokens);
    r->ao.ablation_means = r->means;
    return 0;
}

/* The analysis options and the source settings of a corpus run, from its options. */
static void settings(cli_corpus_run *r, const hs_model_config *c)
{
    const cli_corpus_opts *co = r->co;
    int sharded = co->n_shards > 1;
    r->ao.ablation = co->ablation;
    r->ao.pruning = 0;
    r->ao.diversity = 0;
    r->ao.composition = 0; /* a property of the weights: the single-text report has it */
    r->ao.dla = 0;         /* per text and position: the single-text report has it */
    r->ao.norm_based = 0;
    r->ao.word_level = 0;
    r->ao.rollout = 0;     /* a per-text n x n matrix: not aggregated */
    r->ao.keep_maps = 0; /* no pictures or page per text */
    r->ao.progress = NULL;
    r->info.path = co->path;
    r->info.format = (hs_corpus_format)co->format;
    r->info.max_texts = co->max_texts;
    r->info.sample = co->sample;
    r->info.seed = co->seed;
    r->info.max_tokens = co->max_tokens > 0 && co->max_tokens < c->n_ctx ? co->max_tokens : c->n_ctx;
    r->info.skip_long = co->skip_long;
    r->info.ablation = co->ablation;
    r->info.shard = sharded ? co->shard : 1;
    r->info.n_shards = sharded ? co->n_shards : 1;
}

int cli_analyze_corpus(const char *cmd, hs_model *m, const cli_corpus_opts *co,
                       const hs_analyze_opts *ao, const char *outdir, int created_dir,
                       int quiet, int json)
{
    cli_corpus_run r = {.cmd = cmd, .co = co, .m = m, .ao = *ao, .quiet = quiet,
                        .t0 = cli_now(), .outdir = outdir, .total = -1,
                        .created_dir = created_dir};
    hs_corpus_reader *rd = NULL;
    hs_error err = {{0}};
    char *texts = cli_path_join(outdir, "texts.jsonl");
    hs_out outf = {0};
    char *report = cli_path_join(outdir, "report.json"), *js = NULL;
    int rc = EXIT_FAIL, texts_done = 0, sharded = co->n_shards > 1;
    const char *const files[] = {"texts.jsonl", "partial.json", "index.html", "report.json"};
    const hs_model_config *c = hs_model_config_of(m);
    const char *stop = getenv("HEADSCOPE_TEST_STOP_AFTER");
    r.stop_after = stop ? atol(stop) : 0;
    const char *sig_after = getenv("HEADSCOPE_TEST_SIGNAL_AFTER");
    r.signal_after = sig_after ? atol(sig_after) : 0;
    r.every = strcmp(co->path, "-") ? co->checkpoint_every : 0;
    hs_sha256_init(&r.digest);
    cli_progress_start(&r.prog, co->progress);
    settings(&r, c);
    if (!texts || !report) {
        cli_error(cmd, "out of memory");
        goto done;
    }
    if ((!co->resume && cli_corpus_unfinished(&r)) || count_total(&r))
        goto done;
    if (r.ao.ablation && r.ao.ablation_kind == HS_ABLATION_MEAN && corpus_means(&r))
        goto done;
    if (hs_corpus_open(co->path, (hs_corpus_format)co->format, &rd, &err) != HS_OK) {
        cli_error(cmd, "%s", err.msg);
        goto done;
    }
    if (co->resume ? cli_corpus_resume_open(&r, texts, &outf)
                   : hs_out_open(texts, &outf, &err) != HS_OK) {
        if (!co->resume)
            cli_error(cmd, "%s", err.msg);
        goto done;
    }
    r.texts_tmp = strrchr(outf.tmp, '/') ? strrchr(outf.tmp, '/') + 1 : outf.tmp;
    r.texts_tmp_path = outf.tmp;
    r.out = outf.f;
    if (r.resume.cp.position > 0) { /* this shard's records of the checkpoint */
        long P = r.resume.cp.position, N = sharded ? co->n_shards : 1, I = sharded ? co->shard : 1;
        r.dealt = P / N + (P % N >= I);
    }
    cli_corpus_signal_note(&r);
    if (co->pack_tokens > 1 && !(r.pack = cli_pack_new(co->pack_tokens))) {
        cli_error(cmd, "out of memory");
        goto done;
    }
    if (read_all(&r, rd) || (r.pack && cli_pack_flush(&r)))
        goto done;
    if (r.selected < r.resume.cp.position) {
        cli_error(cmd, "cannot resume: '%s' has changed since the checkpoint in '%s'", co->path, outdir);
        goto done;
    }
    if (r.info.format == HS_CORPUS_AUTO && r.resume.cp.position)
        r.info.format = r.resume.info.format;
    cli_progress_update(&r.prog, r.dealt, r.total, r.done_here, r.tokens_here, 1);
    if (!r.agg && !sharded) {
        long n_skipped = 0;
        for (int s = 1; s < HS_SKIP_COUNT; s++)
            n_skipped += r.info.skipped[s] + r.info.skipped_text[s];
        cli_error(cmd, "'%s' has no text to analyse (%ld records skipped, %ld empty)", co->path,
                  n_skipped, r.info.n_empty);
        goto done;
    }
    if (r.agg && hs_corpus_agg_finish(r.agg, (hs_sim_method)r.agg->sim_method,
                                      r.agg->cluster_threshold, &err) != HS_OK) {
        cli_error(cmd, "%s", err.msg);
        goto done;
    }
    r.info.seconds = r.resume.info.seconds + (cli_now() - r.t0);
    if (!sharded && !(js = hs_corpus_report_json(r.agg, &r.info, ao->command_line,
                                                 ao->command_line_argc, files, 4, 1))) {
        cli_error(cmd, "out of memory");
        goto done;
    }
    /* texts.jsonl first, then partial.json and index.html, report.json last: a complete
       report.json means a complete run */
    r.out = NULL;
    if (hs_out_close(&outf, 1, &err) != HS_OK) {
        cli_error(cmd, "%s", err.msg);
        goto done;
    }
    texts_done = 1;
    /* an earlier run's outputs that this one does not write again go (only headscope's names) */
    cli_outdir_prune(outdir, files, sharded ? 2 : 4);
    if (cli_corpus_write_partial(&r, NULL))
        goto done;
    r.checkpointed = 0;
    cli_corpus_drop_old_tmp(&r); /* no checkpoint names it now */
    if (!sharded && cli_corpus_page(cmd, outdir, js))
        goto done;
    if (!sharded && hs_file_write_atomic(report, js, strlen(js), &err) != HS_OK) {
        cli_error(cmd, "%s", err.msg);
        goto done;
    }
    if (json && js)
        puts(js);
    else if (!quiet)
        print_summary(&r, sharded ? NULL : report);
    rc = cli_finish_stdout(cmd);
done:
    hs_tmp_on_signal(NULL, NULL, 0); /* what follows says it */
    cli_progress_end(&r.prog);
    if (rc != EXIT_OK && r.checkpointed) {
        if (r.old_tmp) /* the checkpoint resumed from names its own texts, which stay */
            hs_out_close(&outf, 0, NULL);
        hs_out_keep(&outf); /* the checkpoint's texts */
        if (!quiet)
            fprintf(stderr, "hint: the checkpoint in '%s' lets 'headscope analyze ... --resume' go on\n",
                    outdir);
    }
    hs_out_close(&outf, 0, NULL); /* nothing left when it was committed or kept */
    if (rc != EXIT_OK && !r.checkpointed) {
        char *partial = cli_path_join(outdir, "partial.json");
        char *page = cli_path_join(outdir, "index.html");
        if (texts && texts_done)
            unlink(texts);
        if (partial && texts_done)
            unlink(partial);
        if (page && texts_done)
            unlink(page);
        free(page);
        if (report && texts_done)
            unlink(report);
        free(partial);
        if (created_dir)
            cli_output_dir_remove(outdir, created_dir);
    }
    hs_corpus_close(rd);
    cli_pack_free(&r);
    free(r.z_sum);
    free(r.means);
    hs_corpus_agg_free(r.agg);
    hs_corpus_partial_free(&r.resume);
    free(r.old_tmp);
    free(js);
    free(texts);
    free(report);
    return rc;
}
