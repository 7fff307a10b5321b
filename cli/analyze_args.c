/* headscope analyze's command line: the help text, the options and their checks. What a
 * run does with them is in cmd_analyze.c. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "headscope/corpus.h"

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
    "      --text-pair TEXT2      second segment (BERT, RoBERTa, Llama: a pair template)\n"
    "  -o, --output OUTDIR        output folder (created if missing)\n"
    "      --json                 print the report on stdout instead of the summary\n"
    "  -q, --quiet                print nothing on success, no progress\n"
    "      --truncate             keep the first n_ctx tokens of a longer text\n"
    "      --max-tokens N         keep the first N tokens (at most n_ctx) of a longer text\n"
    "      --layers SPEC          analyse only these layers, e.g. 0,2-3 (default: all)\n"
    "      --no-ablation          skip the ablation sweep and the pruning curve\n"
    "      --ablation KIND        what an ablated head's output becomes: zero (default), mean\n"
    "                             (its mean over the text's positions; with --corpus, over\n"
    "                             every token of the corpus) or resample (its output\n"
    "                             on the text's tokens shuffled, specials kept in place)\n"
    "      --resample-seed N      the shuffle's seed for --ablation resample (default 1)\n"
    "      --loss-span SPAN       the positions whose next-token losses count in the loss,\n"
    "                             ablation, gradient and pruning: all (default), repeated (the\n"
    "                             tokens seen before, where induction can act) or A:B\n"
    "      --probe-ablation KIND  each head's ablation cost on the probe's second half: mean\n"
    "                             (default), zero, resample or none (causal models)\n"
    "      --no-pruning           skip the pruning curve\n"
    "      --no-gradient          skip gradient importance (Michel et al. 2019)\n"
    "      --no-composition       skip the composition scores from the weights (decoders)\n"
    "      --no-dla               skip direct logit attribution (decoders)\n"
    "      --no-norm-based        skip the norm-based attention summaries (Kobayashi et al.)\n"
    "      --word-level           also word-level maps (subword keys summed, queries averaged;\n"
    "                             Clark et al.) in the report and heads/L{l}_H{h}.words.png\n"
    "      --no-rollout           skip attention rollout and flow (Abnar & Zuidema 2020)\n"
    "      --flow-max-tokens N    attention flow only up to N tokens (default 64; 0: never)\n"
    ;
/* (split: ISO C compilers need only take string literals of 4095 bytes) */
static const char usage_text2[] =
    "      --similarity METHOD    pearson (default) or js (Jensen-Shannon, Clark et al.)\n"
    "      --cluster-threshold X  cut the dendrogram at distance X (default 0.5)\n"
    "      --exclude-sinks        leave the sinks out of entropy (detectors report both)\n"
    "      --sink-punct           punctuation tokens are sinks too (position 0, [CLS], [SEP])\n"
    ;
/* (then --label-thresholds, its types from the library's metric table: label_types_help) */
static const char usage_text3[] =
    "      --probe-seed N         induction probe seed (default 1)\n"
    "      --probe-len N          tokens in each half of the probe (default 32)\n"
    "      --prune-tol X          candidate when |ablation delta| < X (default 0.01)\n"
    "      --prune-stop X         stop the curve past loss*(1+X) (repr: loss+X) (default 0.1)\n"
    "      --prune-method M       gradient (default: Michel et al. 2019, rounds by gradient\n"
    "                             importance) or greedy (lazy greedy on measured losses)\n"
    "      --prune-round X        gradient: heads per round as a fraction of the heads (0.1)\n"
    "      --prune-beam N         greedy: heads re-evaluated per step (default 8)\n"
    "      --prune-max-steps N    at most N removals (default 64)\n"
    "      --no-images            write no PNG pictures\n"
    "      --max-tokens-in-images N  label every token up to N per picture axis, the picture\n"
    "                             growing with the text (default 128); above N every k-th\n"
    "      --svg                  also write each head's map as heads/L{l}_H{h}.svg\n"
    "      --no-hash              leave the model files' SHA-256 digests out of the report\n"
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
    "      --resume               go on from the checkpoint in OUTDIR\n"
    "      --progress[=MODE]      auto (default: a line when stderr is a terminal), json (JSON\n"
    "                             lines on stderr) or none\n";

enum {
    OPT_PAIR = 256, OPT_JSON, OPT_TRUNC, OPT_LAYERS, OPT_NOABL, OPT_NOPRUNE, OPT_SIM, OPT_THR,
    OPT_SINKS, OPT_SINKPUNCT, OPT_LTHR, OPT_NOCOMP, OPT_NOROLL, OPT_FLOWMAX, OPT_SVG, OPT_SEED, OPT_PLEN, OPT_PTOL, OPT_PSTOP, OPT_PBEAM, OPT_PMAX, OPT_NOIMG, OPT_MAXTOK, OPT_NOGRAD,
    OPT_NOHASH, OPT_PMETHOD, OPT_PROUND, OPT_CORPUS, OPT_CFORMAT, OPT_MAXTEXTS, OPT_MAXTOKENS,
    OPT_SKIPLONG, OPT_SAMPLE, OPT_CSEED, OPT_CABL, OPT_SHARD, OPT_CKPT, OPT_RESUME, OPT_PROGRESS,
    OPT_ABLKIND, OPT_RSEED, OPT_NODLA, OPT_NONORM, OPT_WORDS, OPT_LSPAN, OPT_PABL
};

/* The --label-thresholds help: every head type with its default threshold, then the
 * sink threshold's, words wrapped at 92 columns under the help's description column. */
static void label_types_help(FILE *f)
{
    double thr[HS_LABEL_COUNT];
    hs_analyze_opts d;
    hs_analyze_opts_default(&d);
    hs_label_thresholds_default(thr);
    char line[128] = "      --label-thresholds SPEC  X for every head type, or TYPE=X,... (types:";
    size_t len = strlen(line);
    for (int k = 0; k <= HS_LABEL_COUNT; k++) {
        char word[64];
        if (k < HS_LABEL_COUNT)
            snprintf(word, sizeof word, "%s %g%s", hs_label_name(k), thr[k],
                     k + 1 < HS_LABEL_COUNT ? "," : ";");
        else
            snprintf(word, sizeof word, "sink %g)", d.sink_threshold);
        for (char *w = word, *sp; w; w = sp ? sp + 1 : NULL) { /* name and number apart */
            sp = strchr(w, ' ');
            size_t wl = sp ? (size_t)(sp - w) : strlen(w);
            if (len + 1 + wl > 92) {
                fprintf(f, "%s\n", line);
                len = (size_t)snprintf(line, sizeof line, "%28s", "");
            }
            len += (size_t)snprintf(line + len, sizeof line - len, " %.*s", (int)wl, w);
        }
    }
    fprintf(f, "%s\n", line);
}

/* "I/N" with 1 <= I <= N <= 10^6. */
static int parse_shard(const char *s, int *i, int *n)
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

static int parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int cli_parse_layers(const char *spec, int n_layer, unsigned char *on, int *bad_layer)
{
    const char *p = spec;
    *bad_layer = -1;
    if (!*p)
        return -1;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b;
        if (end == p || a < 0)
            return -1;
        p = end;
        if (*p == '-') {
            p++;
            b = strtol(p, &end, 10);
            if (end == p || b < a)
                return -1;
            p = end;
        } else {
            b = a;
        }
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
        for (long l = a; l <= b; l++) {
            if (l >= n_layer) {
                *bad_layer = (int)l;
                return 0;
            }
            if (on)
                on[l] = 1;
        }
    }
    return 0;
}

int cli_analyze_args_parse(int argc, char **argv, cli_analyze_args *g)
{
    static const struct option opts[] = {
        {"text", required_argument, NULL, 't'},     {"file", required_argument, NULL, 'f'},
        {"text-pair", required_argument, NULL, OPT_PAIR}, {"output", required_argument, NULL, 'o'},
        {"json", no_argument, NULL, OPT_JSON},       {"quiet", no_argument, NULL, 'q'},
        {"truncate", no_argument, NULL, OPT_TRUNC},  {"layers", required_argument, NULL, OPT_LAYERS},
        {"no-ablation", no_argument, NULL, OPT_NOABL}, {"no-pruning", no_argument, NULL, OPT_NOPRUNE},
        {"similarity", required_argument, NULL, OPT_SIM},
        {"cluster-threshold", required_argument, NULL, OPT_THR},
        {"exclude-sinks", no_argument, NULL, OPT_SINKS},
        {"sink-punct", no_argument, NULL, OPT_SINKPUNCT},
        {"no-composition", no_argument, NULL, OPT_NOCOMP},
        {"no-dla", no_argument, NULL, OPT_NODLA},
        {"no-norm-based", no_argument, NULL, OPT_NONORM},
        {"word-level", no_argument, NULL, OPT_WORDS},
        {"ablation", required_argument, NULL, OPT_ABLKIND},
        {"resample-seed", required_argument, NULL, OPT_RSEED},
        {"loss-span", required_argument, NULL, OPT_LSPAN},
        {"probe-ablation", required_argument, NULL, OPT_PABL},
        {"no-rollout", no_argument, NULL, OPT_NOROLL},
        {"svg", no_argument, NULL, OPT_SVG},
        {"flow-max-tokens", required_argument, NULL, OPT_FLOWMAX},
        {"label-thresholds", required_argument, NULL, OPT_LTHR},
        {"probe-seed", required_argument, NULL, OPT_SEED},
        {"probe-len", required_argument, NULL, OPT_PLEN},
        {"prune-tol", required_argument, NULL, OPT_PTOL},
        {"prune-stop", required_argument, NULL, OPT_PSTOP},
        {"prune-beam", required_argument, NULL, OPT_PBEAM},
        {"prune-method", required_argument, NULL, OPT_PMETHOD},
        {"prune-round", required_argument, NULL, OPT_PROUND},
        {"prune-max-steps", required_argument, NULL, OPT_PMAX},
        {"no-images", no_argument, NULL, OPT_NOIMG},
        {"no-gradient", no_argument, NULL, OPT_NOGRAD},
        {"no-hash", no_argument, NULL, OPT_NOHASH},
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
        {"resume", no_argument, NULL, OPT_RESUME},
        {"progress", optional_argument, NULL, OPT_PROGRESS},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
    const char *C = "analyze";
    *g = (cli_analyze_args){.images = 1, .max_tokens = 128, .formats = HS_PICTURES_PNG,
                            .progress_mode = -1, /* auto */
                            .co = {.seed = 1, .checkpoint_every = 50}};
    hs_analyze_opts_default(&g->ao);
    int corpus_only = 0; /* a corpus option was given */
    int c;
    long lv;
    double dv;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":t:f:o:qh", opts, NULL)) != -1) {
        switch (c) {
        case 't': g->text = optarg; break;
        case 'f': g->file = optarg; break;
        case OPT_PAIR: g->pair = optarg; break;
        case 'o': g->outdir = optarg; break;
        case OPT_JSON: g->json = 1; break;
        case 'q': g->quiet = 1; break;
        case OPT_TRUNC: g->truncate = 1; break;
        case OPT_LAYERS:
            if (cli_parse_layers(optarg, 1 << 20, NULL, &(int){0}))
                return cli_usage_error(C, "--layers '%s' is not a list like 0,2-3", optarg);
            g->layers = optarg;
            break;
        case OPT_NOABL: g->ao.ablation = 0; break;
        case OPT_NOPRUNE: g->ao.pruning = 0; break;
        case OPT_NOGRAD: g->ao.gradient = 0; break;
        case OPT_NOHASH: g->ao.hash_files = 0; break;
        case OPT_SIM:
            if (!strcmp(optarg, "pearson"))
                g->ao.similarity = HS_SIM_PEARSON;
            else if (!strcmp(optarg, "js"))
                g->ao.similarity = HS_SIM_JS;
            else
                return cli_usage_error(C, "--similarity '%s' is not pearson or js", optarg);
            break;
        case OPT_THR:
            if (parse_double(optarg, 0, 2, &dv))
                return cli_usage_error(C, "--cluster-threshold '%s' is not a number in [0, 2]", optarg);
            g->ao.cluster_threshold = dv;
            break;
        case OPT_SINKS: g->ao.exclude_sinks = 1; break;
        case OPT_SINKPUNCT: g->ao.sink_punct = 1; break;
        case OPT_NOCOMP: g->ao.composition = 0; break;
        case OPT_NODLA: g->ao.dla = 0; break;
        case OPT_NONORM: g->ao.norm_based = 0; break;
        case OPT_WORDS: g->ao.word_level = 1; break;
        case OPT_ABLKIND: {
            int kind = hs_ablation_kind_parse(optarg);
            if (kind < 0)
                return cli_usage_error(C, "--ablation '%s' is not zero, mean or resample", optarg);
            g->ao.ablation_kind = (hs_ablation_kind)kind;
            break;
        }
        case OPT_LSPAN: {
            hs_error e = {{0}};
            if (hs_loss_span_parse(optarg, &g->ao.loss_span, &e))
                return cli_usage_error(C, "%s", e.msg);
            break;
        }
        case OPT_PABL: {
            int kind = hs_ablation_kind_parse(optarg);
            g->ao.probe_ablation = strcmp(optarg, "none") != 0;
            if (kind < 0 && g->ao.probe_ablation)
                return cli_usage_error(C, "--probe-ablation '%s' is not mean, zero, resample or "
                                       "none", optarg);
            if (kind >= 0)
                g->ao.probe_ablation_kind = (hs_ablation_kind)kind;
            break;
        }
        case OPT_RSEED:
            if (cli_parse_long(optarg, 0, 0x7fffffffL, &lv))
                return cli_usage_error(C, "--resample-seed '%s' is not a number in [0, 2^31)", optarg);
            g->ao.resample_seed = (uint64_t)lv;
            break;
        case OPT_NOROLL: g->ao.rollout = 0; break;
        case OPT_SVG: g->formats |= HS_PICTURES_SVG; break;
        case OPT_FLOWMAX:
            if (cli_parse_long(optarg, 0, 4096, &lv))
                return cli_usage_error(C, "--flow-max-tokens '%s' is not a number in [0, 4096]",
                                       optarg);
            g->ao.flow_max_tokens = (int)lv;
            break;
        case OPT_LTHR: {
            hs_error e = {{0}};
            if (hs_label_thresholds_parse(optarg, g->ao.label_thresholds, &g->ao.sink_threshold, &e))
                return cli_usage_error(C, "--label-thresholds: %s", e.msg);
            break;
        }
        case OPT_SEED:
            if (cli_parse_long(optarg, 0, 0x7fffffffL, &lv))
                return cli_usage_error(C, "--probe-seed '%s' is not a number in [0, 2^31)", optarg);
            g->ao.probe_seed = (uint64_t)lv;
            break;
        case OPT_PLEN:
            if (cli_parse_long(optarg, 1, 4096, &lv))
                return cli_usage_error(C, "--probe-len '%s' is not a number in [1, 4096]", optarg);
            g->ao.probe_half_len = (int)lv;
            break;
        case OPT_PTOL:
            if (parse_double(optarg, 0, 1e6, &dv))
                return cli_usage_error(C, "--prune-tol '%s' is not a number >= 0", optarg);
            g->ao.prune_tol = dv;
            break;
        case OPT_PSTOP:
            if (parse_double(optarg, 0, 1e6, &dv))
                return cli_usage_error(C, "--prune-stop '%s' is not a number >= 0", optarg);
            g->ao.prune_stop = dv;
            break;
        case OPT_PMETHOD:
            if (!strcmp(optarg, "gradient"))
                g->ao.prune_method = HS_PRUNE_GRADIENT;
            else if (!strcmp(optarg, "greedy"))
                g->ao.prune_method = HS_PRUNE_GREEDY;
            else
                return cli_usage_error(C, "--prune-method '%s' is not gradient or greedy", optarg);
            break;
        case OPT_PROUND:
            if (parse_double(optarg, 1e-9, 1, &dv))
                return cli_usage_error(C, "--prune-round '%s' is not a number in (0, 1]", optarg);
            g->ao.prune_round = dv;
            break;
        case OPT_PBEAM:
            if (cli_parse_long(optarg, 1, 1 << 20, &lv))
                return cli_usage_error(C, "--prune-beam '%s' is not a number >= 1", optarg);
            g->ao.prune_beam = (int)lv;
            break;
        case OPT_PMAX:
            if (cli_parse_long(optarg, 0, 1 << 20, &lv))
                return cli_usage_error(C, "--prune-max-steps '%s' is not a number >= 0", optarg);
            g->ao.prune_max_steps = (int)lv;
            break;
        case OPT_NOIMG: g->images = 0; break;
        case OPT_MAXTOK:
            if (cli_parse_long(optarg, 1, 100000, &lv))
                return cli_usage_error(C, "--max-tokens-in-images '%s' is not a number >= 1", optarg);
            g->max_tokens = (int)lv;
            break;
        case OPT_CORPUS: g->co.path = optarg; break;
        case OPT_CFORMAT:
            corpus_only = 1;
            if (!strcmp(optarg, "auto"))
                g->co.format = HS_CORPUS_AUTO;
            else if (!strcmp(optarg, "lines"))
                g->co.format = HS_CORPUS_LINES;
            else if (!strcmp(optarg, "jsonl"))
                g->co.format = HS_CORPUS_JSONL;
            else if (!strcmp(optarg, "folder"))
                g->co.format = HS_CORPUS_DIR;
            else
                return cli_usage_error(C, "--corpus-format '%s' is not auto, lines, jsonl or folder", optarg);
            break;
        case OPT_MAXTEXTS:
        case OPT_SAMPLE:
            corpus_only = 1;
            if (cli_parse_long(optarg, 1, 100000000L, &lv))
                return cli_usage_error(C, "--%s '%s' is not a number in [1, 10^8]",
                                       c == OPT_SAMPLE ? "sample" : "max-texts", optarg);
            if (c == OPT_SAMPLE && lv > 1000000L)
                return cli_usage_error(C, "--sample '%s' is more than 10^6", optarg);
            *(c == OPT_SAMPLE ? &g->co.sample : &g->co.max_texts) = lv;
            break;
        case OPT_MAXTOKENS: /* a corpus's texts, or the single text */
            if (cli_parse_long(optarg, 1, 1 << 20, &lv))
                return cli_usage_error(C, "--max-tokens '%s' is not a number >= 1", optarg);
            g->co.max_tokens = (int)lv;
            break;
        case OPT_SKIPLONG: corpus_only = 1; g->co.skip_long = 1; break;
        case OPT_CSEED:
            corpus_only = 1;
            if (cli_parse_long(optarg, 0, 0x7fffffffL, &lv))
                return cli_usage_error(C, "--seed '%s' is not a number in [0, 2^31)", optarg);
            g->co.seed = (uint64_t)lv;
            break;
        case OPT_CABL: corpus_only = 1; g->co.ablation = 1; break;
        case OPT_SHARD:
            corpus_only = 1;
            if (parse_shard(optarg, &g->co.shard, &g->co.n_shards))
                return cli_usage_error(C, "--shard '%s' is not I/N with 1 <= I <= N <= 10^6", optarg);
            break;
        case OPT_CKPT:
            corpus_only = 1;
            if (cli_parse_long(optarg, 0, 100000000L, &lv))
                return cli_usage_error(C, "--checkpoint-every '%s' is not a number in [0, 10^8]", optarg);
            g->co.checkpoint_every = lv;
            break;
        case OPT_RESUME: corpus_only = 1; g->co.resume = 1; break;
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
        case 'h':
            fputs(usage_text, stdout);
            fputs(usage_text2, stdout);
            label_types_help(stdout);
            fputs(usage_text3, stdout);
            fputs(usage_corpus, stdout);
            return cli_finish_stdout(C);
        case ':': return cli_usage_error(C, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(C, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return cli_usage_error(C, optind >= argc ? "no MODEL given" : "more than one MODEL given");
    if (!g->outdir)
        return cli_usage_error(C, "no output folder (use -o OUTDIR)");

    if (g->co.path && (g->text || g->file || g->pair))
        return cli_usage_error(C, "give --corpus or --text/--file/--text-pair, not both");
    if (g->co.path && (g->ao.word_level || g->ao.ablation_kind == HS_ABLATION_RESAMPLE ||
                       g->ao.loss_span.kind != HS_SPAN_ALL))
        return cli_usage_error(C, "%s is for a single text, not --corpus",
                               g->ao.word_level                        ? "--word-level"
                               : g->ao.loss_span.kind != HS_SPAN_ALL ? "--loss-span"
                                                                     : "--ablation resample");
    if (g->co.path && g->ao.ablation_kind == HS_ABLATION_MEAN && !g->co.ablation)
        return cli_usage_error(C, "--ablation mean with --corpus needs --corpus-ablation");
    if (g->co.path && g->ao.ablation_kind == HS_ABLATION_MEAN && !strcmp(g->co.path, "-"))
        return cli_usage_error(C, "--ablation mean reads the corpus twice (its means first); "
                               "give a file or folder, not stdin");
    if (!g->co.path && corpus_only)
        return cli_usage_error(C, "corpus options need --corpus PATH");
    if (g->co.resume && g->co.path && !strcmp(g->co.path, "-"))
        return cli_usage_error(C, "--resume needs a corpus file or folder, not stdin");
    g->model = argv[optind];
    return -1;
}
