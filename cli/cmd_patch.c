/* headscope patch: activation patching over pairs of prompts (docs/patching.md). Its
 * options are one table, from which the getopt_long table and the help are built. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "patch_cli.h"

static const char *const metric_names[] = {"logit-diff", "prob", "loss", NULL};
static const char *const site_names[] = {"z", "q", "k", "v", "pattern", "resid_pre", "attn_out",
                                         "mlp_out", NULL};
static const char *const position_names[] = {"all", "each", NULL};
static const char *const direction_names[] = {"denoise", "noise", NULL};
static const char *const method_names[] = {"exact", "attribution", "both", NULL};

/* The options: long name, short letter (0: none), value (metavar, NULL: a flag), the
 * names an enum takes (NULL: any value), help. */
enum { O_PAIRS, O_OUT, O_METRIC, O_SITE, O_POSITIONS, O_DIRECTION, O_METHOD, O_PATH,
       O_PATH_SENDERS, O_RECEIVER, O_SHARD, O_RESAMPLES, O_SEED, O_NO_IMAGES, O_QUIET, O_HELP, O_COUNT };
static const char *const sender_names[] = {"all", NULL};
static const struct patch_opt {
    const char *name;
    char letter;
    const char *metavar;
    const char *const *names;
    const char *help;
} opts[O_COUNT] = {
    {"pairs", 'p', "PAIRS.jsonl", NULL, "the pairs, one JSON object a line (required)"},
    {"output", 'o', "OUTDIR", NULL, "output folder, created if missing (required)"},
    {"metric", 0, "M", metric_names, "logit-diff (default: answer minus wrong), prob, loss"},
    {"site", 0, "S", site_names, "what is patched: z (default), q, k, v, pattern, resid_pre,\n"
     "                           attn_out, mlp_out"},
    {"positions", 0, "P", position_names, "all (default) or each: also one effect a position"},
    {"direction", 0, "D", direction_names, "denoise (default: clean into corrupt) or noise"},
    {"method", 0, "M", method_names, "exact (default), attribution (one forward and one\n"
     "                           backward pass a prompt) or both (and their correlation)"},
    {"path", 0, "S:R:I", NULL, "path patching from sender head S into receiver head R's\n"
     "                           input I (q, k or v), e.g. 2.3:3.0:k"},
    {"path-senders", 0, "all", sender_names, "path patching from every head before the receiver"},
    {"receiver", 0, "R:I", NULL, "the receiver of --path-senders all, e.g. 3.0:k"},
    {"shard", 0, "I/N", NULL, "only the pairs j (0, 1, ... in the file) with j mod N = I - 1;\n"
     "                           headscope merge joins the N shards' folders"},
    {"resamples", 0, "N", NULL, "bootstrap resamples for ci95 (default 1000; 0: none)"},
    {"seed", 0, "N", NULL, "the bootstrap's seed (default 24301)"},
    {"no-images", 0, NULL, NULL, "write no picture"},
    {"quiet", 'q', NULL, NULL, "print nothing on success, no progress"},
    {"help", 'h', NULL, NULL, "show this help"},
};

static void usage(FILE *f)
{
    fputs("usage: headscope patch MODEL --pairs PAIRS.jsonl -o OUTDIR [options]\n\n"
          "Activation patching: for each pair of a clean and a corrupt prompt (the same number\n"
          "of tokens), each head's (or the site's) activation of one run is put into the other,\n"
          "and the effect on the metric, normalised on the means over the pairs, is written to\n"
          "OUTDIR/patching.json with an L x H heatmap, OUTDIR/patching.png (docs/patching.md).\n"
          "A line: {\"clean\": \"...\", \"corrupt\": \"...\", \"answer\": \" Mary\", "
          "\"wrong\": \" John\"}\n(clean_ids, corrupt_ids, answer_id, wrong_id instead: token ids).\n\n", f);
    for (int i = 0; i < O_COUNT; i++) {
        char left[64];
        int k = snprintf(left, sizeof left, "%c%c%c --%s%s%s", opts[i].letter ? '-' : ' ',
                         opts[i].letter ? opts[i].letter : ' ', opts[i].letter ? ',' : ' ',
                         opts[i].name, opts[i].metavar ? " " : "",
                         opts[i].metavar ? opts[i].metavar : "");
        fprintf(f, "  %s%*s %s\n", left, k < 24 ? 24 - k : 0, "", opts[i].help);
    }
}

/* The index of s among names, or a usage error naming them (-1). */
static int pick(const struct patch_opt *o, const char *s)
{
    for (int i = 0; o->names[i]; i++)
        if (!strcmp(o->names[i], s))
            return i;
    char list[160] = "";
    for (int i = 0; o->names[i]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                 o->names[i]);
    cli_usage_error(PATCH_CMD, "--%s '%s' is not one of %s", o->name, s, list);
    return -1;
}

typedef struct {
    const char *model, *pairs, *out, *val[O_COUNT];
    int quiet, no_images, is_path, shard, n_shards;
    hs_patch_opts o;
    hs_patch_path path;
} patch_args;

/* "L.H" into *l, *h; 0 or -1. */
static int parse_head(const char *s, size_t len, int *l, int *h)
{
    char buf[32];
    long a, b;
    const char *dot = memchr(s, '.', len);
    if (!dot || len >= sizeof buf)
        return -1;
    snprintf(buf, sizeof buf, "%.*s", (int)(dot - s), s);
    if (cli_parse_long(buf, 0, 1 << 20, &a))
        return -1;
    snprintf(buf, sizeof buf, "%.*s", (int)(len - (size_t)(dot - s) - 1), dot + 1);
    if (cli_parse_long(buf, 0, 1 << 20, &b))
        return -1;
    *l = (int)a, *h = (int)b;
    return 0;
}

/* --path S:R:I or --receiver R:I into a->path (the heads' range is checked by the library,
 * once the model is known). */
static int parse_path(patch_args *a)
{
    const char *s = a->val[O_PATH] ? a->val[O_PATH] : a->val[O_RECEIVER];
    const char *opt = a->val[O_PATH] ? "--path" : "--receiver";
    const char *c1 = strchr(s, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    const char *rec = s, *inp = c1 ? c1 + 1 : NULL;
    int ok = c1 != NULL;
    a->path.sender_layer = a->path.sender_head = -1;
    if (a->val[O_PATH]) {
        ok = ok && c2 && !strchr(c2 + 1, ':') &&
             !parse_head(s, (size_t)(c1 - s), &a->path.sender_layer, &a->path.sender_head);
        rec = c1 + 1, inp = c2 ? c2 + 1 : NULL;
    } else {
        ok = ok && !strchr(c1 + 1, ':');
    }
    ok = ok && !parse_head(rec, (size_t)(inp - 1 - rec), &a->path.receiver_layer,
                           &a->path.receiver_head);
    int site = ok ? hs_site_from_key(inp) : -1;
    if (site != HS_SITE_Q && site != HS_SITE_K && site != HS_SITE_V)
        return cli_usage_error(PATCH_CMD, "%s '%s' is not %s (heads as L.H, the input q, k "
                               "or v)", opt, s, a->val[O_PATH] ? "SENDER:RECEIVER:INPUT, e.g. "
                               "2.3:3.0:k" : "RECEIVER:INPUT, e.g. 3.0:k");
    a->path.input = (hs_site)site;
    a->is_path = 1;
    return -1;
}

/* argv into *a; -1 to go on, else the exit status (help: 0; usage errors: 2, printed). */
static int parse_args(int argc, char **argv, patch_args *a)
{
    struct option lo[O_COUNT + 1];
    char shorts[2 * O_COUNT + 2] = ":";
    for (int i = 0; i < O_COUNT; i++) {
        lo[i] = (struct option){opts[i].name, opts[i].metavar ? required_argument : no_argument,
                                NULL, 256 + i};
        if (opts[i].letter) {
            size_t k = strlen(shorts);
            shorts[k] = opts[i].letter;
            shorts[k + 1] = opts[i].metavar ? ':' : '\0';
        }
    }
    lo[O_COUNT] = (struct option){NULL, 0, NULL, 0};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
        int k = c >= 256 ? c - 256 : -1;
        for (int i = 0; k < 0 && i < O_COUNT; i++)
            if (opts[i].letter && c == opts[i].letter)
                k = i;
        if (c == ':')
            return cli_usage_error(PATCH_CMD, "option '%s' needs a value", argv[optind - 1]);
        if (k < 0)
            return cli_usage_error(PATCH_CMD, "unknown option '%s'", argv[optind - 1]);
        if (k == O_HELP) {
            usage(stdout);
            return cli_finish_stdout(PATCH_CMD);
        }
        a->val[k] = opts[k].metavar ? optarg : "";
    }
    if (optind != argc - 1)
        return cli_usage_error(PATCH_CMD, optind >= argc ? "no MODEL given"
                                                         : "more than one MODEL given");
    a->model = argv[optind];
    if (!(a->pairs = a->val[O_PAIRS]))
        return cli_usage_error(PATCH_CMD, "no pairs (use --pairs PAIRS.jsonl)");
    if (!(a->out = a->val[O_OUT]))
        return cli_usage_error(PATCH_CMD, "no output folder (use -o OUTDIR)");
    a->o = hs_patch_opts_default();
    int v[O_COUNT] = {0};
    for (int i = O_METRIC; i <= O_METHOD; i++)
        if (a->val[i] && (v[i] = pick(&opts[i], a->val[i])) < 0)
            return EXIT_USAGE;
    a->o.metric = (hs_patch_metric)v[O_METRIC];
    a->o.site = (hs_site)hs_site_from_key(site_names[v[O_SITE]]);
    a->o.each_position = v[O_POSITIONS];
    a->o.noise = v[O_DIRECTION];
    a->o.method = (hs_patch_method)v[O_METHOD];
    long n;
    int rc;
    if (a->val[O_RESAMPLES]) {
        if (cli_parse_long(a->val[O_RESAMPLES], 0, 100000, &n))
            return cli_usage_error(PATCH_CMD, "--resamples '%s' is not a number in [0, 100000]",
                                   a->val[O_RESAMPLES]);
        a->o.resamples = (int)n;
    }
    if (a->val[O_SEED]) {
        if (cli_parse_long(a->val[O_SEED], 0, 0x7fffffffL, &n))
            return cli_usage_error(PATCH_CMD, "--seed '%s' is not a number in [0, 2147483647]",
                                   a->val[O_SEED]);
        a->o.seed = (uint64_t)n;
    }
    if (a->val[O_PATH] && (a->val[O_PATH_SENDERS] || a->val[O_RECEIVER]))
        return cli_usage_error(PATCH_CMD, "--path and --path-senders/--receiver exclude each other");
    if (!a->val[O_PATH_SENDERS] != !a->val[O_RECEIVER])
        return cli_usage_error(PATCH_CMD, "--path-senders all and --receiver R:I go together");
    if ((a->val[O_PATH_SENDERS] && pick(&opts[O_PATH_SENDERS], a->val[O_PATH_SENDERS]) < 0))
        return EXIT_USAGE;
    if ((a->val[O_PATH] || a->val[O_RECEIVER]) &&
        (a->val[O_SITE] || a->val[O_POSITIONS] || a->val[O_METHOD]))
        return cli_usage_error(PATCH_CMD, "path patching takes no --site, --positions or --method");
    if ((a->val[O_PATH] || a->val[O_RECEIVER]) && (rc = parse_path(a)) >= 0)
        return rc;
    if (a->val[O_SHARD] && cli_parse_shard(a->val[O_SHARD], &a->shard, &a->n_shards))
        return cli_usage_error(PATCH_CMD, "--shard '%s' is not I/N with 1 <= I <= N <= 10^6",
                               a->val[O_SHARD]);
    a->quiet = a->val[O_QUIET] != NULL;
    a->no_images = a->val[O_NO_IMAGES] != NULL;
    return -1;
}

static int progress(void *user, int done, int total)
{
    cli_progress *p = user;
    cli_progress_update(p, done, total, 1, 0, done == total);
    return 0;
}

/* Both runs: every position, then (each) one position at a time. */
static int run(const hs_model *m, const patch_pairs *pp, patch_args *a, hs_patch_result **r,
               hs_patch_result **re)
{
    cli_progress pr;
    hs_error err = {{0}};
    int tty = !a->quiet && isatty(STDERR_FILENO);
    for (int k = 0; k <= a->o.each_position; k++) {
        hs_patch_opts o = a->o;
        o.each_position = k;
        if (tty) {
            cli_progress_start(&pr, CLI_PROGRESS_TTY);
            o.progress = progress, o.progress_user = &pr;
        }
        hs_status st = a->is_path ? hs_patch_path_run(m, pp->pairs, pp->count, &o, &a->path, r, &err)
                                  : hs_patch_run(m, pp->pairs, pp->count, &o, k ? re : r, &err);
        if (tty)
            cli_progress_end(&pr);
        if (st) {
            cli_error(PATCH_CMD, "%s", err.msg);
            return EXIT_FAIL;
        }
    }
    return 0;
}

int cmd_patch(int argc, char **argv)
{
    patch_args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    cli_outdir od;
    int worker;
    rc = cli_outdir_open(PATCH_CMD, a.out, 1, &od, &worker);
    if (!worker)
        return rc;
    hs_model *m = cli_model_load(PATCH_CMD, a.model);
    patch_pairs pp = {0};
    hs_patch_result *r = NULL, *re = NULL;
    char **names = NULL;
    int n_names = 0;
    rc = EXIT_FAIL;
    if (!m || patch_pairs_read(m, a.pairs, a.o.metric == HS_METRIC_LOGIT_DIFF, &pp))
        goto done;
    if (a.n_shards && patch_pairs_shard(a.pairs, &pp, a.shard, a.n_shards))
        goto done;
    if (!hs_model_config_of(m)->has_lm_head) {
        cli_error(PATCH_CMD, "'%s' has no language-model head, which the metric reads",
                  cli_shown(a.model));
        goto done;
    }
    if (run(m, &pp, &a, &r, &re))
        goto done;
    patch_request q = {a.model, a.pairs, metric_names[a.o.metric], hs_site_get(a.o.site)->key,
                       position_names[a.o.each_position], direction_names[a.o.noise],
                       a.is_path ? "path" : method_names[a.o.method], &a.o,
                       a.is_path ? &a.path : NULL, a.shard, a.n_shards};
    if ((rc = patch_write(m, &q, &pp, r, re, od.stage, a.no_images, &names, &n_names)))
        goto done;
    if ((rc = cli_outdir_commit(PATCH_CMD, &od, (const char *const *)names, n_names)))
        goto done;
    cli_stdout_after_commit();
    if (!a.quiet)
        printf("patched %s of %d layers over %d pairs (%.1f forward passes a pair): see "
               "%s/patching.json\n", a.is_path ? "paths" : hs_site_get(a.o.site)->key, r->n_layer,
               pp.count,
               (r->passes + (re ? re->passes : 0)) / pp.count, cli_shown(a.out));
    rc = cli_finish_stdout_committed(PATCH_CMD, a.out, 0);
done:
    cli_outdir_close(&od);
    for (int i = 0; i < n_names; i++)
        free(names[i]);
    free(names);
    hs_patch_result_free(r);
    hs_patch_result_free(re);
    patch_pairs_free(&pp);
    hs_model_free(m);
    return rc;
}
