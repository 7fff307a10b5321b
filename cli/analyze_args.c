/* headscope analyze's command line: the help text, the options and their checks. What a
 * run does with them is in cmd_analyze.c. */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "headscope/corpus.h"
#include "pipeline/options.h"

static const char usage_text[] =
    "usage: headscope analyze MODEL (--text TEXT | --file PATH|-) [--text-pair TEXT2] -o OUTDIR\n"
    "                         [options]\n"
    "       headscope analyze MODEL --corpus PATH|- -o OUTDIR [corpus options] [options]\n\n"
    "Records every head's attention map on the text and computes per-head entropy, detector\n"
    "scores on all attention and on the attention not parked on sinks (previous/next token,\n"
    "self, broad, other segment on the text; duplicate-token, induction on a seeded probe),\n"
    "head types with the sink mass beside them, Frobenius diversity, head similarity and\n"
    "clusters, ablation and gradient importance, a pruning curve (by default Michel et al.'s\n"
    "rounds) and pruning candidates. Writes OUTDIR/report.json (schema headscope.report/3,\n"
    "docs/report-schema.md), PNG pictures and an offline page OUTDIR/index.html, and prints a\n"
    "summary.\n\n"
    "  -t, --text TEXT            the input text\n"
    "  -f, --file PATH            read the text from a file as raw bytes ('-' for stdin)\n"
    "      --target TEXT          an encoder-decoder's (T5's) decoder target: the text goes\n"
    "                             to the encoder, the target to the decoder (teacher\n"
    "                             forcing); required for one, refused for other models\n"
    "  -o, --output OUTDIR        output folder (created with its parents if missing); an\n"
    "                             earlier run's outputs there are replaced\n"
    "      --no-clobber           refuse an OUTDIR that holds an earlier run's outputs\n"
    "      --json                 print the report on stdout instead of the summary\n"
    "  -q, --quiet                print nothing on success, no progress\n"
    "      --progress[=MODE]      auto (default: a line on stderr when it is a terminal, for\n"
    "                             every phase over a second, or every corpus text), json\n"
    "                             (JSON lines on stderr, docs/analyze.md) or none\n"
    "      --max-tokens N         keep the first N tokens (at most n_ctx) of a longer text\n"
    ;
/* (then the analysis options, from the table in src/pipeline/options.c) */
static const char usage_images[] =
    "      --no-images            write no PNG pictures\n"
    "      --max-tokens-in-images N  label every token up to N per picture axis, the picture\n"
    "                             growing with the text (default 128); above N every k-th\n"
    "      --svg                  also write each head's map as heads/L{l}_H{h}.svg\n"
    "  -h, --help                 show this help\n\n";
static const char usage_corpus[] =
    "Corpus mode (docs/corpus.md): every text of PATH analysed in turn; OUTDIR/texts.jsonl\n"
    "holds each text's per-head values, OUTDIR/report.json their count, mean, sd and 95%\n"
    "confidence interval per head, corpus importance and clusters on the mean similarity.\n"
    "      --corpus PATH          a text file (one text per line), a JSONL file ({\"text\": ...,\n"
    "                             \"text_pair\": ...} per line), a folder of .txt files, or -\n"
    "      --corpus-format F      auto (default), lines, jsonl or folder\n"
    "      --max-texts N          read at most the first N texts\n"
    "      --max-tokens N         truncate each text to N tokens (default: the context)\n"
    "      --skip-long            skip texts longer than --max-tokens instead\n"
    "      --sample N             analyse a uniform sample of N texts (reservoir sampling)\n"
    "      --seed S               the sample's seed (default 1)\n"
    "      --corpus-ablation      also the ablation sweep on every text (L*H passes per text)\n"
    "      --shard I/N            analyse only the selected texts whose index mod N is I-1;\n"
    "                             writes OUTDIR/partial.json for 'headscope merge'\n"
    "      --checkpoint-every N   save OUTDIR/partial.json every N texts (default 50, 0: never)\n"
    "      --pack-tokens N        record the maps of several texts in one pass, up to N\n"
    "                             tokens (default 0: one text a pass; 512 suits short texts)\n"
    "      --resume               go on from the checkpoint in OUTDIR\n"
    "      --restart              discard an unfinished run's checkpoint in OUTDIR and start\n"
    "                             again (without --resume or --restart it is refused)\n"
    ;

enum {
    OPT_JSON = 256, OPT_SVG, OPT_NOIMG, OPT_MAXTOK, OPT_CORPUS, OPT_CFORMAT, OPT_MAXTEXTS,
    OPT_MAXTOKENS, OPT_SKIPLONG, OPT_SAMPLE, OPT_CSEED, OPT_CABL, OPT_SHARD, OPT_CKPT,
    OPT_RESUME, OPT_PROGRESS, OPT_RESTART, OPT_NOCLOBBER, OPT_TARGET, OPT_PACK,
    OPT_TABLE = 0x1000 /* + the row of src/pipeline/options.c's table */
};

/* "I/N" with 1 <= I <= N <= 10^6. */
int cli_parse_shard(const char *s, int *i, int *n)
{
    char *end;
    errno = 0;
    long a = strtol(s, &end, 10);
    if (errno || end == s || *end != '/' || a < 1)
        return -1;
    const char *p = end + 1;
    long b = strtol(p, &end, 10);
    if (errno || end == p || *end || b < a || b > 1000000L)
        return -1;
    *i = (int)a;
    *n = (int)b;
    return 0;
}

/* The command's own options, then a row of the table's for each option it has. */
static const struct option own_opts[] = {
    {"text", required_argument, NULL, 't'},     {"file", required_argument, NULL, 'f'},
    {"output", required_argument, NULL, 'o'},   {"json", no_argument, NULL, OPT_JSON},
    {"quiet", no_argument, NULL, 'q'},          {"svg", no_argument, NULL, OPT_SVG},
    {"no-images", no_argument, NULL, OPT_NOIMG},
    {"max-tokens-in-images", required_argument, NULL, OPT_MAXTOK},
    {"corpus", required_argument, NULL, OPT_CORPUS},
    {"corpus-format", required_argument, NULL, OPT_CFORMAT},
    {"max-texts", required_argument, NULL, OPT_MAXTEXTS},
    {"max-tokens", required_argument, NULL, OPT_MAXTOKENS},
    {"skip-long", no_argument, NULL, OPT_SKIPLONG},
    {"sample", required_argument, NULL, OPT_SAMPLE},
    {"seed", required_argument, NULL, OPT_CSEED},
    {"corpus-ablation", no_argument, NULL, OPT_CABL},
    {"shard", required_argument, NULL, OPT_SHARD},
    {"checkpoint-every", required_argument, NULL, OPT_CKPT},
    {"pack-tokens", required_argument, NULL, OPT_PACK},
    {"resume", no_argument, NULL, OPT_RESUME},
    {"restart", no_argument, NULL, OPT_RESTART},
    {"no-clobber", no_argument, NULL, OPT_NOCLOBBER},
    {"target", required_argument, NULL, OPT_TARGET},
    {"progress", optional_argument, NULL, OPT_PROGRESS},
    {"help", no_argument, NULL, 'h'}};
#define N_OWN (sizeof own_opts / sizeof own_opts[0])
#define MAX_TABLE 96

static int print_help(const char *C)
{
    char *table = hs_options_help();
    if (!table) {
        cli_error(C, "out of memory");
        return EXIT_FAIL;
    }
    fputs(usage_text, stdout);
    fputs(table, stdout);
    fputs(usage_images, stdout);
    fputs(usage_corpus, stdout);
    free(table);
    return cli_finish_stdout(C);
}

/* An option of the table: its value read as the JSON options read it. */
static int table_option(const char *C, const hs_option *o, const char *value,
                        cli_analyze_args *g)
{
    hs_error e = {{0}};
    if (hs_option_set_text(o, value, &g->opt, &e) != HS_OK) {
        char msg[sizeof e.msg + 64];
        return cli_usage_error(C, "%s", hs_option_cli_message(o, &e, msg, sizeof msg));
    }
    return 0;
}

/* The corpus options (c one of OPT_CORPUS..OPT_PROGRESS but --max-tokens); 0 or the exit
 * status of a usage error. */
static int corpus_option(const char *C, int c, const char *arg, cli_analyze_args *g)
{
    long lv;
    switch (c) {
    case OPT_CORPUS: g->co.path = arg; break;
    case OPT_CFORMAT:
        if (!strcmp(arg, "auto"))
            g->co.format = HS_CORPUS_AUTO;
        else if (!strcmp(arg, "lines"))
            g->co.format = HS_CORPUS_LINES;
        else if (!strcmp(arg, "jsonl"))
            g->co.format = HS_CORPUS_JSONL;
        else if (!strcmp(arg, "folder"))
            g->co.format = HS_CORPUS_DIR;
        else
            return cli_usage_error(C, "--corpus-format '%s' is not auto, lines, jsonl or folder",
                                   arg);
        break;
    case OPT_MAXTEXTS:
    case OPT_SAMPLE:
        if (cli_parse_long(arg, 1, 100000000L, &lv))
            return cli_usage_error(C, "--%s '%s' is not a number in [1, 10^8]",
                                   c == OPT_SAMPLE ? "sample" : "max-texts", arg);
        if (c == OPT_SAMPLE && lv > 1000000L)
            return cli_usage_error(C, "--sample '%s' is more than 10^6", arg);
        *(c == OPT_SAMPLE ? &g->co.sample : &g->co.max_texts) = lv;
        break;
    case OPT_SKIPLONG: g->co.skip_long = 1; break;
    case OPT_CSEED:
        if (cli_parse_long(arg, 0, 0x7fffffffL, &lv))
            return cli_usage_error(C, "--seed '%s' is not a number in [0, 2^31)", arg);
        g->co.seed = (uint64_t)lv;
        break;
    case OPT_CABL: g->co.ablation = 1; break;
    case OPT_SHARD:
        if (cli_parse_shard(arg, &g->co.shard, &g->co.n_shards))
            return cli_usage_error(C, "--shard '%s' is not I/N with 1 <= I <= N <= 10^6", arg);
        break;
    case OPT_CKPT:
        if (cli_parse_long(arg, 0, 100000000L, &lv))
            return cli_usage_error(C, "--checkpoint-every '%s' is not a number in [0, 10^8]", arg);
        g->co.checkpoint_every = lv;
        break;
    case OPT_PACK:
        if (cli_parse_long(arg, 0, 1 << 20, &lv))
            return cli_usage_error(C, "--pack-tokens '%s' is not a number in [0, 2^20]", arg);
        g->co.pack_tokens = (int)lv;
        break;
    case OPT_RESUME: g->co.resume = 1; break;
    case OPT_RESTART: g->co.restart = 1; break;
    }
    return 0;
}

/* The checks across options once all are read; the exit status of a usage error, or 0. */
static int check_combinations(const char *C, cli_analyze_args *g, int corpus_only)
{
    const hs_analyze_opts *ao = &g->opt.ao;
    if (g->co.path && (g->text || g->file || g->opt.text_pair))
        return cli_usage_error(C, "give --corpus or --text/--file/--text-pair, not both");
    if (g->co.path && g->target)
        return cli_usage_error(C, "--target is for a single text, not --corpus (an "
                               "encoder-decoder's corpus mode is not implemented)");
    if (g->co.path && (ao->word_level || ao->ablation_kind == HS_ABLATION_RESAMPLE ||
                       ao->loss_span.kind != HS_SPAN_ALL))
        return cli_usage_error(C, "%s is for a single text, not --corpus",
                               ao->word_level                        ? "--word-level"
                               : ao->loss_span.kind != HS_SPAN_ALL ? "--loss-span"
                                                                     : "--ablation resample");
    if (g->co.path && ao->ablation_kind == HS_ABLATION_MEAN && !g->co.ablation)
        return cli_usage_error(C, "--ablation mean with --corpus needs --corpus-ablation");
    if (g->co.path && ao->ablation_kind == HS_ABLATION_MEAN && !strcmp(g->co.path, "-"))
        return cli_usage_error(C, "--ablation mean reads the corpus twice (its means first); "
                               "give a file or folder, not stdin");
    if (!g->co.path && corpus_only)
        return cli_usage_error(C, "corpus options need --corpus PATH");
    if (g->co.resume && g->co.restart)
        return cli_usage_error(C, "give --resume or --restart, not both");
    if (g->co.resume && g->no_clobber)
        return cli_usage_error(C, "--resume goes on writing into OUTDIR: not with --no-clobber");
    if (g->co.resume && g->co.path && !strcmp(g->co.path, "-"))
        return cli_usage_error(C, "--resume needs a corpus file or folder, not stdin");
    return 0;
}

int cli_analyze_args_parse(int argc, char **argv, cli_analyze_args *g)
{
    static struct option opts[N_OWN + MAX_TABLE + 1];
    size_t n_opts = N_OWN;
    memcpy(opts, own_opts, sizeof own_opts);
    for (int i = 0; i < hs_option_count && n_opts < N_OWN + MAX_TABLE; i++)
        if (hs_options[i].cli)
            opts[n_opts++] = (struct option){hs_options[i].cli,
                                             hs_options[i].type == HS_OPT_BOOL ? no_argument
                                                                              : required_argument,
                                             NULL, OPT_TABLE + i};
    opts[n_opts] = (struct option){NULL, 0, NULL, 0};
    const char *C = "analyze";
    *g = (cli_analyze_args){.images = 1, .max_tokens = 128, .formats = HS_PICTURES_PNG,
                            .progress_mode = -1, /* auto */
                            .co = {.seed = 1, .checkpoint_every = 50,
                                                         .pack_tokens = CLI_PACK_TOKENS}};
    hs_analyze_args_default(&g->opt);
    int corpus_only = 0; /* a corpus option was given */
    int c, rc;
    long lv;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":t:f:o:qh", opts, NULL)) != -1) {
        if (c >= OPT_TABLE && c < OPT_TABLE + hs_option_count) {
            if ((rc = table_option(C, &hs_options[c - OPT_TABLE], optarg, g)))
                return rc;
            continue;
        }
        switch (c) {
        case 't': g->text = optarg; break;
        case 'f': g->file = optarg; break;
        case 'o': g->outdir = optarg; break;
        case OPT_JSON: g->json = 1; break;
        case 'q': g->quiet = 1; break;
        case OPT_SVG: g->formats |= HS_PICTURES_SVG; break;
        case OPT_NOIMG: g->images = 0; break;
        case OPT_NOCLOBBER: g->no_clobber = 1; break;
        case OPT_TARGET: g->target = optarg; break;
        case OPT_MAXTOK:
            if (cli_parse_long(optarg, 1, 100000, &lv))
                return cli_usage_error(C, "--max-tokens-in-images '%s' is not a number in "
                                       "[1, 100000]", optarg);
            g->max_tokens = (int)lv;
            break;
        case OPT_MAXTOKENS: /* a corpus's texts, or the single text */
            if (cli_parse_long(optarg, 1, 1 << 20, &lv))
                return cli_usage_error(C, "--max-tokens '%s' is not a number in [1, 2^20]",
                                       optarg);
            g->co.max_tokens = (int)lv;
            break;
        case OPT_CORPUS: case OPT_CFORMAT: case OPT_MAXTEXTS: case OPT_SAMPLE:
        case OPT_SKIPLONG: case OPT_CSEED: case OPT_CABL: case OPT_SHARD: case OPT_CKPT:
        case OPT_RESUME: case OPT_RESTART: case OPT_PACK:
            corpus_only |= c != OPT_CORPUS;
            if ((rc = corpus_option(C, c, optarg, g)))
                return rc;
            break;
        case OPT_PROGRESS:
            if (!optarg || !strcmp(optarg, "auto"))
                g->progress_mode = -1;
            else if (!strcmp(optarg, "json"))
                g->progress_mode = CLI_PROGRESS_JSON;
            else if (!strcmp(optarg, "none"))
                g->progress_mode = CLI_PROGRESS_NONE;
            else
                return cli_usage_error(C, "--progress '%s' is not auto, json or none", optarg);
            break;
        case 'h': return print_help(C);
        case ':':
        default: return cli_option_error(C, c, argc, argv, opts);
        }
    }
    if (optind != argc - 1)
        return cli_usage_error(C, optind >= argc ? "no MODEL given" : "more than one MODEL given");
    if (!g->outdir)
        return cli_usage_error(C, "no output folder (use -o OUTDIR)");
    if ((rc = check_combinations(C, g, corpus_only)))
        return rc;
    g->model = argv[optind];
    return -1;
}
