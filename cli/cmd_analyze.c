/* headscope analyze: what every head does, how heads group, which heads can go. The
 * command line is read by cli/analyze_args.c; a corpus run goes on in cli/analyze_corpus.c. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "headscope/html.h"
#include "headscope/report.h"
#include "pipeline/encdec_result.h"

/* Test hook: with HEADSCOPE_TEST_SIGNAL_AT=STEP the worker sends SIGTERM to its supervisor
 * after STEP ("analyze", "pictures", "report") and waits, so tests/cli.sh can check that an
 * interrupted run leaves the output folder as it was; with HEADSCOPE_TEST_HOLD_AT=STEP it
 * only waits (tests/cli_outdir.sh kills both processes, as kill -9 would). */
static void test_signal_at(const char *step)
{
    const char *at = getenv("HEADSCOPE_TEST_SIGNAL_AT"), *hold = getenv("HEADSCOPE_TEST_HOLD_AT");
    if (hold && !strcmp(hold, step))
        for (;;)
            pause();
    if (!at || strcmp(at, step))
        return;
    kill(getppid(), SIGTERM);
    for (;;)
        pause();
}

/* hs_map_fn over the analysed heads: map k of the report's "heads" order. */
static hs_status head_map(void *user, int k, float *out, hs_error *err)
{
    const hs_analysis *a = user;
    return hs_analysis_map(a, a->head_index[k], out, err);
}

/* out/index.html with the report and the analysed heads' maps, read one at a time. */
static hs_status write_page(const hs_analysis *a, const char *json, const char *outdir,
                            hs_error *err)
{
    char *path = malloc(strlen(outdir) + 16);
    if (!path) {
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return HS_E_NOMEM;
    }
    hs_html_input hin = {.report_json = json, .map_fn = head_map, .map_user = (void *)(uintptr_t)a,
                         .n_maps = a->n_heads, .n = a->n};
    sprintf(path, "%s/index.html", outdir);
    hs_status st = a->encdec ? hs_html_encdec_write(path, json, a, err) /* T5's three kinds */
                             : hs_html_write(path, &hin, err);
    free(path);
    return st;
}

/* report.json at path (in the staging folder: the run's commit makes it final), written as
 * it is made. */
static hs_status write_report(const hs_analysis *a, const char *const *files, int n_files,
                              const char *path, hs_error *err)
{
    FILE *f = fopen(path, "wb");
    hs_status st = f ? hs_report_write(a, files, n_files, HS_REPORT_PRETTY, f, err) : HS_E_IO;
    if ((!f || fclose(f) != 0) && !st)
        st = HS_E_IO;
    if (st == HS_E_IO)
        snprintf(err->msg, sizeof err->msg, "cannot write '%s': %s", path, strerror(errno));
    return st;
}

/* The progress a run shows on stderr: --progress's, else on a terminal unless -q. */
static int progress_wanted(const cli_analyze_args *g)
{
    return g->progress_mode >= 0                 ? g->progress_mode
           : !g->quiet && isatty(STDERR_FILENO) ? CLI_PROGRESS_TTY
                                                : CLI_PROGRESS_NONE;
}

/* The options checked against the model cfg (an encoder-decoder's corpus mode and --target,
 * --layers' range); *on: --layers' marks (the caller frees them). 0, else the exit status
 * (the message printed). */
static int check_model(const char *C, cli_analyze_args *g, const hs_model_config *cfg,
                       unsigned char **on)
{
    if (cfg->n_enc_layer && g->co.path) {
        cli_error(C, "'%s' is an encoder-decoder: its corpus mode is not implemented (analyze "
                  "one text with --text and --target)", cli_shown(g->model));
        return EXIT_FAIL;
    }
    if (g->target && !*g->target)
        return cli_usage_error(C, "--target is empty (the decoder needs at least one token)");
    if (!cfg->n_enc_layer != !g->target) /* before the text is tokenised */
        return cli_usage_error(C, cfg->n_enc_layer ? "'%s' is an encoder-decoder (%s): give its "
                               "decoder's target with --target TEXT" : "--target is for an "
                               "encoder-decoder's decoder ('%s' is %s, not one)",
                               cli_shown(g->model), cfg->arch->name);
    if (g->opt.layers) {
        int bad;
        *on = calloc((size_t)cfg->n_layer, 1);
        if (!*on)
            return EXIT_FAIL;
        hs_layers_mark(g->opt.layers, cfg->n_layer, *on, &bad);
        if (bad >= 0) {
            cli_error(C, "layer %d is out of range (the model has layers 0-%d)", bad, cfg->n_layer - 1);
            return EXIT_FAIL;
        }
        g->opt.ao.layers = *on;
    }
    return 0;
}

/* A corpus run on m into g->outdir (cli/analyze_corpus.c), then what it replaced there said
 * unless -q or --resume; its exit status. */
static int run_corpus(const char *C, hs_model *m, cli_analyze_args *g, cli_outdir *od)
{
    g->opt.ao.progress = NULL;
    g->co.progress = progress_wanted(g);
    int rc = cli_analyze_corpus(C, m, &g->co, &g->opt.ao, g->outdir, od->created, g->quiet,
                                g->json);
    od->created = 0; /* cli_analyze_corpus removed what it wrote */
    if (rc == EXIT_OK && !g->quiet && !g->co.resume)
        cli_outdir_replaced(C, g->outdir, od->earlier, od->earlier_list);
    return rc;
}

/* *files (*n of them, the pictures') with index.html and report.json added: 0, or -1 out of
 * memory (printed), *files and *n still what is to be freed. */
static int list_files(const char *C, char ***files, int *n)
{
    char **listed = realloc(*files, (size_t)(*n + 2) * sizeof *listed);
    if (listed)
        *files = listed;
    if (!listed || !((*files)[*n] = strdup("index.html")) ||
        !((*files)[*n + 1] = strdup("report.json"))) {
        if (listed && (*files)[*n])
            (*n)++;
        cli_error(C, "out of memory");
        return -1;
    }
    *n += 2;
    return 0;
}

/* Frees the n names of files and the list. */
static void free_files(char **files, int n)
{
    for (int i = 0; i < n; i++)
        free(files[i]);
    free(files);
}

/* index.html (with json, the lean report) then report.json (at path, plen bytes) written
 * into stage: a complete report.json means a complete run. 0, or -1 (the message printed). */
static int stage_page_and_report(const char *C, const hs_analysis *a, const char *json,
                                 const char *stage, const char *const *files, int n_files,
                                 char *path, size_t plen, hs_error *err)
{
    test_signal_at("pictures");
    cli_phase_progress(NULL, "the page and report.json", 0, 0);
    if (write_page(a, json, stage, err) != HS_OK) {
        cli_error(C, "%s", err->msg);
        return -1;
    }
    snprintf(path, plen, "%s/report.json", stage);
    if (write_report(a, files, n_files, path, err) != HS_OK) {
        cli_error(C, "%s", err->msg);
        return -1;
    }
    return 0;
}

/* A single text's run on m (in: its tokens; trunc and keep: how --target's text is cut,
 * as the text was): the analysis, the pictures, the page and report.json staged in
 * od->stage and committed to g->outdir, then the report or the summary on stdout. Its exit
 * status. */
static int analyze_text(const char *C, hs_model *m, cli_analyze_args *g,
                        const hs_analyze_input *in, int trunc, size_t keep, cli_outdir *od)
{
    const char *stage = od->stage;
    hs_encoding tenc = {0};
    cli_text tt = {0};
    hs_analysis *a = NULL;
    char *json_text = NULL, *report_path = NULL, **files = NULL;
    int n_files = 0, rc = EXIT_FAIL;
    hs_error err = {{0}};
    if (g->target && (cli_text_get(C, g->target, NULL, NULL, &tt) ||
                      cli_encode(C, m, &tt, trunc, keep, 0, &tenc, NULL)))
        goto done;
    hs_analyze_target tg = {.ids = tenc.ids, .n = (int)tenc.n, .text = g->target};
    hs_status ast = hs_analyze_run_target(m, in, g->target ? &tg : NULL, &g->opt.ao, &a, &err);
    if (ast != HS_OK) {
        cli_error(C, "%s", err.msg);
        goto done;
    }
    test_signal_at("analyze");
    cli_phase_progress(NULL, "pictures", 0, 0);
    if (g->images &&
        hs_pictures_write(a, stage, g->max_tokens, g->formats, &files, &n_files, &err) != HS_OK) {
        cli_error(C, "%s", err.msg);
        goto done;
    }
    if (list_files(C, &files, &n_files))
        goto done;
    /* the page embeds the report without its arrays of n x n and n_heads x n numbers */
    const char *const *listed_files = (const char *const *)files;
    json_text = hs_report_json(a, listed_files, n_files, HS_REPORT_LEAN);
    size_t plen = strlen(stage) + 16; /* the staging folder's path is the longer */
    report_path = malloc(plen);
    if (!json_text || !report_path) {
        cli_error(C, "out of memory");
        goto done;
    }
    if (stage_page_and_report(C, a, json_text, stage, listed_files, n_files, report_path, plen,
                              &err))
        goto done;
    test_signal_at("report");
    cli_phase_progress_end(); /* the commit may say what it replaced */
    if ((rc = cli_outdir_commit(C, od, listed_files, n_files)) != EXIT_OK)
        goto done;
    /* the run is in the folder: a stdout that cannot take the report does not undo it */
    cli_stdout_after_commit();
    snprintf(report_path, plen, "%s/report.json", g->outdir);
    int failed = 0;
    if (g->json)
        failed = hs_report_write(a, listed_files, n_files, HS_REPORT_PRETTY, stdout, &err) != HS_OK ||
                 putchar('\n') == EOF;
    else if (!g->quiet)
        cli_analyze_summary(a, report_path);
    rc = cli_finish_stdout_committed(C, g->outdir, failed);
done:
    free_files(files, n_files);
    free(report_path);
    free(json_text);
    hs_analysis_free(a);
    hs_encoding_free(&tenc);
    cli_text_free(&tt);
    return rc;
}

int cmd_analyze(int argc, char **argv)
{
    const char *C = "analyze";
    cli_analyze_args g;
    int rc = cli_analyze_args_parse(argc, argv, &g), was_truncated = 0;
    if (rc >= 0)
        return rc;
    cli_text t = {0};
    rc = g.co.path ? 0 : cli_text_get(C, g.text, g.file, g.opt.text_pair, &t);
    if (rc)
        return rc;
    /* the output folder, locked; a single-text run is staged and supervised (a failed or
     * interrupted run leaves the folder as it was), before anything has started threads */
    cli_outdir od;
    int worker;
    rc = cli_outdir_open(C, g.outdir, (g.co.path ? 0 : CLI_OUTDIR_STAGED) |
                                          (g.quiet ? CLI_OUTDIR_QUIET : 0) |
                                          (g.no_clobber ? CLI_OUTDIR_NO_CLOBBER : 0),
                         &od, &worker);
    if (!worker) {
        cli_text_free(&t);
        return rc;
    }
    /* a single text's phases: on a terminal unless -q, or as --progress says */
    int phases = g.co.path ? CLI_PROGRESS_NONE : progress_wanted(&g);
    cli_phase_progress_start(phases);
    cli_phase_progress(NULL, "loading the model", 0, 0);
    hs_model *m = cli_model_load(C, g.model);
    cli_phase_progress(NULL, "tokenizing", 0, 0);
    hs_encoding enc = {0};
    unsigned char *on = NULL;
    rc = EXIT_FAIL;
    if (!m)
        goto done;
    const hs_model_config *cfg = hs_model_config_of(m);
    if ((rc = check_model(C, &g, cfg, &on)))
        goto done;
    rc = EXIT_FAIL;
    /* --max-tokens N keeps the first N tokens (at most the context), as --truncate keeps n_ctx */
    int cut = g.co.max_tokens;
    size_t keep = cut > 0 && cut < cfg->n_ctx ? (size_t)cut : 0;
    if (!g.co.path && cli_encode(C, m, &t, g.opt.truncate || cut > 0, keep, 0, &enc, &was_truncated))
        goto done;
    g.opt.ao.progress = phases != CLI_PROGRESS_NONE ? cli_phase_progress : NULL;
    g.opt.ao.command_line = cli_command_line(&g.opt.ao.command_line_argc);
    if (g.co.path) {
        rc = run_corpus(C, m, &g, &od);
        goto done;
    }
    hs_analyze_input in = {.ids = enc.ids, .type_ids = enc.type_ids, .n = (int)enc.n,
                           .text = t.text, .text_len = t.len, .text_pair = t.pair,
                           .truncated = was_truncated};
    rc = analyze_text(C, m, &g, &in, g.opt.truncate || cut > 0, keep, &od);
done:
    cli_phase_progress_end(); /* before a message: the line ends */
    cli_outdir_close(&od); /* after a failure: the staging folder goes, and the folder if new */
    free(on);
    hs_encoding_free(&enc);
    hs_model_free(m);
    cli_text_free(&t);
    return rc;
}
