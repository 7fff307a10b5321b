/* headscope merge: the shards of a corpus run (analyze --corpus --shard I/N) combined into
 * the report.json, texts.jsonl and partial.json that one run over the whole corpus writes
 * (docs/corpus.md#sharding-and-merging). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "core/core.h"
#include "headscope/corpus.h"
#include "io/io_internal.h"
#include "patch_cli.h"

static const char usage_text[] =
    "usage: headscope merge PART... -o OUTDIR [--json] [-q]\n\n"
    "Combines the partial aggregates of the shards of one corpus run (headscope analyze\n"
    "--corpus --shard I/N -o PART) into OUTDIR/report.json, OUTDIR/texts.jsonl (every text\n"
    "in corpus order) and OUTDIR/partial.json, as one run over the whole corpus writes them\n"
    "(means equal up to the order of floating-point sums; docs/corpus.md). Every shard 1..N\n"
    "must be given once, made with the same model, options and corpus.\n\n"
    "The shards of headscope patch --shard I/N (folders, or their patching.json) merge into\n"
    "OUTDIR/patching.json as one run over the whole pairs file writes it (no pictures).\n\n"
    "  PART                   a shard's output folder, or its partial.json\n"
    "  -o, --output OUTDIR    output folder (created with its parents if missing); an\n"
    "                         earlier run's outputs there are replaced\n"
    "      --no-clobber       refuse an OUTDIR that holds an earlier run's outputs\n"
    "      --json             print the report on stdout instead of the summary\n"
    "  -q, --quiet            print nothing on success\n"
    "  -h, --help             show this help\n";

/* What a merge writes, report.json last. */
static const char *const merge_files[] = {"texts.jsonl", "partial.json", "index.html", "report.json"};

typedef struct part {
    const char *arg;
    char *partial, *texts;  /* paths */
    hs_corpus_partial p;
    hs_texts_reader t;      /* its texts.jsonl while merging */
} part;

/* The partial's path and its texts.jsonl beside it. */
static int locate(const char *C, part *pt)
{
    struct stat sb;
    if (stat(pt->arg, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        pt->partial = cli_path_join(pt->arg, "partial.json");
        pt->texts = cli_path_join(pt->arg, "texts.jsonl");
    } else {
        const char *slash = strrchr(pt->arg, '/');
        size_t n = slash ? (size_t)(slash - pt->arg) : 1;
        char *dir = malloc(n + 1);
        if (dir) {
            memcpy(dir, slash ? pt->arg : ".", n);
            dir[n] = 0;
        }
        pt->partial = strdup(pt->arg);
        pt->texts = dir ? cli_path_join(dir, "texts.jsonl") : NULL;
        free(dir);
    }
    if (!pt->partial || !pt->texts) {
        cli_error(C, "out of memory");
        return EXIT_FAIL;
    }
    return 0;
}

static int load(const char *C, part *pt)
{
    hs_error err = {{0}};
    if (locate(C, pt))
        return EXIT_FAIL;
    if (hs_corpus_partial_read(pt->partial, &pt->p, &err) != HS_OK) {
        cli_error(C, "%s", err.msg);
        return EXIT_FAIL;
    }
    if (pt->p.cp.position) {
        cli_error(C, "'%s' is the checkpoint of an unfinished run (finish it with --resume)",
                  pt->partial);
        return EXIT_FAIL;
    }
    pt->t.n_texts = pt->p.agg ? pt->p.agg->n_texts : 0;
    return 0;
}

/* path for reading into *f, refused by name unless a regular file (O_NONBLOCK: a FIFO is
 * not waited on). Returns 0, or EXIT_FAIL after the message. */
static int open_regular(const char *C, const char *path, FILE **f)
{
    struct stat sb;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0 && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))) {
        close(fd);
        cli_error(C, "'%s' is not a regular file", path);
        return EXIT_FAIL;
    }
    if (fd < 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 ||
        !(*f = fdopen(fd, "rb"))) {
        cli_error(C, "cannot open '%s': %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return EXIT_FAIL;
    }
    return 0;
}

/* Every shard's texts.jsonl, merged by source line into out, renumbered from 0. */
static int merge_texts(const char *C, part *parts, int n, FILE *out)
{
    hs_error err = {{0}};
    hs_texts_reader **t = malloc((size_t)n * sizeof *t);
    int rc = EXIT_FAIL;
    if (!t) {
        cli_error(C, "out of memory");
        return EXIT_FAIL;
    }
    for (int i = 0; i < n; i++) {
        t[i] = &parts[i].t;
        parts[i].t.name = parts[i].texts;
        if (open_regular(C, parts[i].texts, &parts[i].t.f))
            goto done;
        if (hs_texts_next(&parts[i].t, &err)) {
            cli_error(C, "%s", err.msg);
            goto done;
        }
    }
    if (hs_texts_merge(t, n, out, &err) != HS_OK)
        cli_error(C, "%s", err.msg);
    else
        rc = 0;
done:
    free(t);
    return rc;
}

static int cmp_shard(const void *x, const void *y)
{
    const part *a = x, *b = y;
    return (a->p.info.shard > b->p.info.shard) - (a->p.info.shard < b->p.info.shard);
}

/* Shards 1..N each once, made alike; the aggregate and counts of all of them into *g, *in. */
static int combine(const char *C, part *parts, int n, hs_corpus_agg **g, hs_corpus_info *in)
{
    hs_error err = {{0}};
    int N = parts[0].p.info.n_shards;
    for (int i = 1; i < n; i++)
        if (hs_corpus_partial_check(&parts[0].p, &parts[i].p, &err) != HS_OK) {
            cli_error(C, "'%s' was %s than '%s'", parts[i].partial, err.msg, parts[0].partial);
            return EXIT_FAIL;
        }
    qsort(parts, (size_t)n, sizeof *parts, cmp_shard);
    for (int i = 1; i < n; i++)
        if (parts[i].p.info.shard == parts[i - 1].p.info.shard) {
            cli_error(C, "shard %d/%d is given twice ('%s', '%s')", parts[i].p.info.shard, N,
                      parts[i - 1].partial, parts[i].partial);
            return EXIT_FAIL;
        }
    for (int i = 0; i < N; i++) /* sorted, distinct, each in 1..N */
        if (i >= n || parts[i].p.info.shard != i + 1) {
            cli_error(C, "shard %d/%d is missing", i + 1, N);
            return EXIT_FAIL;
        }
    *in = parts[0].p.info;
    in->shard = in->n_shards = 1;
    in->seconds = 0;
    memset(in->skipped_text, 0, sizeof in->skipped_text);
    for (int i = 0; i < n; i++) {
        const hs_corpus_info *x = &parts[i].p.info;
        for (int s = 0; s < HS_SKIP_COUNT; s++)
            in->skipped_text[s] += x->skipped_text[s];
        in->seconds += x->seconds;
        if (x->format != HS_CORPUS_AUTO)
            in->format = x->format;
        if (!parts[i].p.agg)
            continue;
        if (!*g) {
            *g = parts[i].p.agg; /* taken over */
            parts[i].p.agg = NULL;
        } else if (hs_corpus_agg_merge(*g, parts[i].p.agg, &err) != HS_OK) {
            cli_error(C, "'%s' was %s than '%s'", parts[i].partial, err.msg, parts[0].partial);
            return EXIT_FAIL;
        }
    }
    if (!*g) {
        cli_error(C, "no shard analysed a text");
        return EXIT_FAIL;
    }
    return 0;
}

/* Writes texts.jsonl, partial.json, index.html, report.json (last) into dir (the staging
 * folder: the commit moves them into OUTDIR); *report: the report's text. */
static int write_outputs(const char *C, part *parts, int n, hs_corpus_agg *g,
                         const hs_corpus_info *in, const char *dir, char **report)
{
    hs_error err = {{0}};
    hs_out texts = {0};
    char *paths[4] = {NULL, NULL, NULL, NULL}, *partial = NULL;
    int argc = 0, rc = EXIT_FAIL;
    const char *const *argv = cli_command_line(&argc);
    for (int i = 0; i < 4; i++)
        if (!(paths[i] = cli_path_join(dir, merge_files[i])))
            goto done;
    if (hs_corpus_agg_finish(g, (hs_sim_method)g->sim_method, g->cluster_threshold, &err)) {
        cli_error(C, "%s", err.msg);
        goto done;
    }
    *report = hs_corpus_report_json(g, in, argv, argc, merge_files, 4, 1);
    partial = hs_corpus_partial_json(g, in, NULL);
    if (!*report || !partial) {
        cli_error(C, "out of memory");
        goto done;
    }
    if (hs_out_open(paths[0], &texts, &err) != HS_OK) {
        cli_error(C, "%s", err.msg);
        goto done;
    }
    if (merge_texts(C, parts, n, texts.f))
        goto done;
    if (hs_out_close(&texts, 1, &err) != HS_OK ||
        hs_file_write_atomic(paths[1], partial, strlen(partial), &err) != HS_OK) {
        cli_error(C, "%s", err.msg);
        goto done;
    }
    if (cli_corpus_page(C, dir, *report))
        goto done;
    if (hs_file_write_atomic(paths[3], *report, strlen(*report), &err) != HS_OK) {
        cli_error(C, "%s", err.msg);
        goto done;
    }
    rc = EXIT_OK;
done:
    hs_out_close(&texts, 0, NULL);
    for (int i = 0; i < 4; i++)
        free(paths[i]);
    free(partial);
    return rc;
}

/* The summary (or --json's report) of a merge committed into outdir. */
static int print_result(const char *C, const hs_corpus_agg *g, const hs_corpus_info *in, int n,
                        const char *report, const char *outdir, int json, int quiet)
{
    cli_stdout_after_commit(); /* the merge is in place: a closed stdout is said in one line */
    if (json) {
        puts(report);
    } else if (!quiet) {
        hs_summary s;
        hs_stat_summary(&g->loss, &s);
        printf("%s: %d shards, %ld texts analysed, %ld tokens\n", cli_shown(in->path), n,
               g->n_texts, g->tokens);
        if (s.n > 0)
            printf("loss (%s): mean %.4f, 95%% CI [%.4f, %.4f], sd %.4f over %ld texts\n",
                   hs_loss_kind_name((hs_loss_kind)g->loss_kind), s.mean, s.ci_low, s.ci_high,
                   s.sd, s.n);
        printf("wrote %s/report.json\n", cli_shown(outdir));
    }
    return cli_finish_stdout_committed(C, outdir, 0);
}

int cmd_merge(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'}, {"json", no_argument, NULL, 'j'},
        {"quiet", no_argument, NULL, 'q'},        {"help", no_argument, NULL, 'h'},
        {"no-clobber", no_argument, NULL, 'n'},   {NULL, 0, NULL, 0}};
    const char *C = "merge", *outdir = NULL;
    int json = 0, quiet = 0, no_clobber = 0, c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":o:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'o': outdir = optarg; break;
        case 'j': json = 1; break;
        case 'q': quiet = 1; break;
        case 'n': no_clobber = 1; break;
        case 'h': fputs(usage_text, stdout); return cli_finish_stdout(C);
        case ':':
        default: return cli_option_error(C, c, argc, argv, opts);
        }
    }
    int n = argc - optind;
    if (n < 1)
        return cli_usage_error(C, "no PART given");
    if (!outdir)
        return cli_usage_error(C, "no output folder (use -o OUTDIR)");
    /* OUTDIR locked (one writer at a time) and the merge staged in it: a failed or
     * interrupted merge leaves it as it was */
    cli_outdir od;
    int worker;
    int rc = cli_outdir_open(C, outdir, CLI_OUTDIR_STAGED | (quiet ? CLI_OUTDIR_QUIET : 0) |
                                            (no_clobber ? CLI_OUTDIR_NO_CLOBBER : 0),
                             &od, &worker);
    if (!worker)
        return rc;
    part *parts = calloc((size_t)n, sizeof *parts);
    hs_corpus_agg *g = NULL;
    hs_corpus_info in;
    char *report = NULL;
    rc = EXIT_FAIL;
    if (!parts) {
        cli_error(C, "out of memory");
        goto done;
    }
    if (patch_merge_is(argv[optind])) { /* headscope patch's shards */
        char **names = NULL;
        int n_names = 0;
        rc = patch_merge(C, argv + optind, n, od.stage, &names, &n_names);
        if (!rc && !(rc = cli_outdir_commit(C, &od, (const char *const *)names, n_names))) {
            cli_stdout_after_commit();
            if (!quiet && !json)
                printf("merged %d shards into %s/patching.json\n", n, cli_shown(outdir));
            rc = cli_finish_stdout_committed(C, outdir, 0);
        }
        for (int i = 0; i < n_names; i++)
            free(names[i]);
        free(names);
        goto done;
    }
    for (int i = 0; i < n; i++)
        parts[i].arg = argv[optind + i];
    for (int i = 0; i < n; i++)
        if (load(C, &parts[i]))
            goto done;
    if (combine(C, parts, n, &g, &in) || write_outputs(C, parts, n, g, &in, od.stage, &report))
        goto done;
    if ((rc = cli_outdir_commit(C, &od, merge_files, 4)) == EXIT_OK)
        rc = print_result(C, g, &in, n, report, outdir, json, quiet);
done:
    cli_outdir_close(&od);
    for (int i = 0; parts && i < n; i++) {
        free(parts[i].partial);
        free(parts[i].texts);
        free(parts[i].t.buf);
        if (parts[i].t.f)
            fclose(parts[i].t.f);
        hs_corpus_partial_free(&parts[i].p);
    }
    free(parts);
    free(report);
    hs_corpus_agg_free(g);
    return rc;
}
