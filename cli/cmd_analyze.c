/* headscope analyze: what every head does, how heads group, which heads can go. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "headscope/corpus.h"
#include "headscope/html.h"
#include "headscope/report.h"

static const char usage_text[] =
    "usage: headscope analyze MODEL (--text TEXT | --file PATH|-) [--text-pair TEXT2] -o OUTDIR\n"
    "                         [options]\n"
    "       headscope analyze MODEL --corpus PATH|- -o OUTDIR [corpus options] [options]\n\n"
    "Records every head's attention map on the text and computes per-head entropy, detector\n"
    "scores on all attention and on the attention not parked on sinks (previous/next token,\n"
    "self, broad, other segment on the text; duplicate-token, induction on a seeded probe),\n"
    "head types with the sink mass beside them, Frobenius diversity, head similarity and clusters, ablation importance, a\n"
    "greedy pruning curve and pruning candidates. Writes OUTDIR/report.json (schema\n"
    "headscope.report/3, docs/report-schema.md), PNG pictures and an offline page\n"
    "OUTDIR/index.html, and prints a summary.\n\n"
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
    "      --label-thresholds SPEC  X for every head type, or TYPE=X,... (types: previous_token\n"
    "                             0.3, next_token 0.3, self 0.4, broad 0.9, other_segment 0.5,\n"
    "                             duplicate_token 0.3, induction 0.3; sink 0.5)\n"
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

/* "0,2-3" → bounds [lo, hi] pairs; checks syntax only (the model's range comes later). */
static int parse_layers(const char *spec, int n_layer, unsigned char *on, int *bad_layer)
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

/* Test hook: with HEADSCOPE_TEST_SIGNAL_AT=STEP the worker sends SIGTERM to its supervisor
 * after STEP ("analyze", "pictures", "report") and waits, so tests/cli.sh can check that an
 * interrupted run leaves the output folder as it was. */
static void test_signal_at(const char *step)
{
    const char *at = getenv("HEADSCOPE_TEST_SIGNAL_AT");
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
    hs_status st = hs_html_write(path, &hin, err);
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

int cmd_analyze(int argc, char **argv)
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
    int images = 1, max_tokens = 128, formats = HS_PICTURES_PNG;
    const char *text = NULL, *file = NULL, *pair = NULL, *outdir = NULL, *layers = NULL;
    int json = 0, quiet = 0, truncate = 0, was_truncated = 0, c;
    hs_analyze_opts ao;
    hs_analyze_opts_default(&ao);
    cli_corpus_opts co = {.seed = 1, .checkpoint_every = 50};
    int progress_mode = -1; /* -1: auto */
    int corpus_only = 0; /* a corpus option was given */
    long lv;
    double dv;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":t:f:o:qh", opts, NULL)) != -1) {
        switch (c) {
        case 't': text = optarg; break;
        case 'f': file = optarg; break;
        case OPT_PAIR: pair = optarg; break;
        case 'o': outdir = optarg; break;
        case OPT_JSON: json = 1; break;
        case 'q': quiet = 1; break;
        case OPT_TRUNC: truncate = 1; break;
        case OPT_LAYERS:
            if (parse_layers(optarg, 1 << 20, NULL, &(int){0}))
                return cli_usage_error(C, "--layers '%s' is not a list like 0,2-3", optarg);
            layers = optarg;
            break;
        case OPT_NOABL: ao.ablation = 0; break;
        case OPT_NOPRUNE: ao.pruning = 0; break;
        case OPT_NOGRAD: ao.gradient = 0; break;
        case OPT_NOHASH: ao.hash_files = 0; break;
        case OPT_SIM:
            if (!strcmp(optarg, "pearson"))
                ao.similarity = HS_SIM_PEARSON;
            else if (!strcmp(optarg, "js"))
                ao.similarity = HS_SIM_JS;
            else
                return cli_usage_error(C, "--similarity '%s' is not pearson or js", optarg);
            break;
        case OPT_THR:
            if (parse_double(optarg, 0, 2, &dv))
                return cli_usage_error(C, "--cluster-threshold '%s' is not a number in [0, 2]", optarg);
            ao.cluster_threshold = dv;
            break;
        case OPT_SINKS: ao.exclude_sinks = 1; break;
        case OPT_SINKPUNCT: ao.sink_punct = 1; break;
        case OPT_NOCOMP: ao.composition = 0; break;
        case OPT_NODLA: ao.dla = 0; break;
        case OPT_NONORM: ao.norm_based = 0; break;
        case OPT_WORDS: ao.word_level = 1; break;
        case OPT_ABLKIND: {
            int kind = hs_ablation_kind_parse(optarg);
            if (kind < 0)
                return cli_usage_error(C, "--ablation '%s' is not zero, mean or resample", optarg);
            ao.ablation_kind = (hs_ablation_kind)kind;
            break;
        }
        case OPT_LSPAN: {
            hs_error e = {{0}};
            if (hs_loss_span_parse(optarg, &ao.loss_span, &e))
                return cli_usage_error(C, "%s", e.msg);
            break;
        }
        case OPT_PABL: {
            int kind = hs_ablation_kind_parse(optarg);
            ao.probe_ablation = strcmp(optarg, "none") != 0;
            if (kind < 0 && ao.probe_ablation)
                return cli_usage_error(C, "--probe-ablation '%s' is not mean, zero, resample or "
                                       "none", optarg);
            if (kind >= 0)
                ao.probe_ablation_kind = (hs_ablation_kind)kind;
            break;
        }
        case OPT_RSEED:
            if (cli_parse_long(optarg, 0, 0x7fffffffL, &lv))
                return cli_usage_error(C, "--resample-seed '%s' is not a number in [0, 2^31)", optarg);
            ao.resample_seed = (uint64_t)lv;
            break;
        case OPT_NOROLL: ao.rollout = 0; break;
        case OPT_SVG: formats |= HS_PICTURES_SVG; break;
        case OPT_FLOWMAX:
            if (cli_parse_long(optarg, 0, 4096, &lv))
                return cli_usage_error(C, "--flow-max-tokens '%s' is not a number in [0, 4096]",
                                       optarg);
            ao.flow_max_tokens = (int)lv;
            break;
        case OPT_LTHR: {
            hs_error e = {{0}};
            if (hs_label_thresholds_parse(optarg, ao.label_thresholds, &ao.sink_threshold, &e))
                return cli_usage_error(C, "--label-thresholds: %s", e.msg);
            break;
        }
        case OPT_SEED:
            if (cli_parse_long(optarg, 0, 0x7fffffffL, &lv))
                return cli_usage_error(C, "--probe-seed '%s' is not a number in [0, 2^31)", optarg);
            ao.probe_seed = (uint64_t)lv;
            break;
        case OPT_PLEN:
            if (cli_parse_long(optarg, 1, 4096, &lv))
                return cli_usage_error(C, "--probe-len '%s' is not a number in [1, 4096]", optarg);
            ao.probe_half_len = (int)lv;
            break;
        case OPT_PTOL:
            if (parse_double(optarg, 0, 1e6, &dv))
                return cli_usage_error(C, "--prune-tol '%s' is not a number >= 0", optarg);
            ao.prune_tol = dv;
            break;
        case OPT_PSTOP:
            if (parse_double(optarg, 0, 1e6, &dv))
                return cli_usage_error(C, "--prune-stop '%s' is not a number >= 0", optarg);
            ao.prune_stop = dv;
            break;
        case OPT_PMETHOD:
            if (!strcmp(optarg, "gradient"))
                ao.prune_method = HS_PRUNE_GRADIENT;
            else if (!strcmp(optarg, "greedy"))
                ao.prune_method = HS_PRUNE_GREEDY;
            else
                return cli_usage_error(C, "--prune-method '%s' is not gradient or greedy", optarg);
            break;
        case OPT_PROUND:
            if (parse_double(optarg, 1e-9, 1, &dv))
                return cli_usage_error(C, "--prune-round '%s' is not a number in (0, 1]", optarg);
            ao.prune_round = dv;
            break;
        case OPT_PBEAM:
            if (cli_parse_long(optarg, 1, 1 << 20, &lv))
                return cli_usage_error(C, "--prune-beam '%s' is not a number >= 1", optarg);
            ao.prune_beam = (int)lv;
            break;
        case OPT_PMAX:
            if (cli_parse_long(optarg, 0, 1 << 20, &lv))
                return cli_usage_error(C, "--prune-max-steps '%s' is not a number >= 0", optarg);
            ao.prune_max_steps = (int)lv;
            break;
        case OPT_NOIMG: images = 0; break;
        case OPT_MAXTOK:
            if (cli_parse_long(optarg, 1, 100000, &lv))
                return cli_usage_error(C, "--max-tokens-in-images '%s' is not a number >= 1", optarg);
            max_tokens = (int)lv;
            break;
        case OPT_CORPUS: co.path = optarg; break;
        case OPT_CFORMAT:
            corpus_only = 1;
            if (!strcmp(optarg, "auto"))
                co.format = HS_CORPUS_AUTO;
            else if (!strcmp(optarg, "lines"))
                co.format = HS_CORPUS_LINES;
            else if (!strcmp(optarg, "jsonl"))
                co.format = HS_CORPUS_JSONL;
            else if (!strcmp(optarg, "folder"))
                co.format = HS_CORPUS_DIR;
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
            *(c == OPT_SAMPLE ? &co.sample : &co.max_texts) = lv;
            break;
        case OPT_MAXTOKENS: /* a corpus's texts, or the single text */
            if (cli_parse_long(optarg, 1, 1 << 20, &lv))
                return cli_usage_error(C, "--max-tokens '%s' is not a number >= 1", optarg);
            co.max_tokens = (int)lv;
            break;
        case OPT_SKIPLONG: corpus_only = 1; co.skip_long = 1; break;
        case OPT_CSEED:
            corpus_only = 1;
            if (cli_parse_long(optarg, 0, 0x7fffffffL, &lv))
                return cli_usage_error(C, "--seed '%s' is not a number in [0, 2^31)", optarg);
            co.seed = (uint64_t)lv;
            break;
        case OPT_CABL: corpus_only = 1; co.ablation = 1; break;
        case OPT_SHARD:
            corpus_only = 1;
            if (parse_shard(optarg, &co.shard, &co.n_shards))
                return cli_usage_error(C, "--shard '%s' is not I/N with 1 <= I <= N <= 10^6", optarg);
            break;
        case OPT_CKPT:
            corpus_only = 1;
            if (cli_parse_long(optarg, 0, 100000000L, &lv))
                return cli_usage_error(C, "--checkpoint-every '%s' is not a number in [0, 10^8]", optarg);
            co.checkpoint_every = lv;
            break;
        case OPT_RESUME: corpus_only = 1; co.resume = 1; break;
        case OPT_PROGRESS:
            if (!optarg || !strcmp(optarg, "auto"))
                progress_mode = -1;
            else if (!strcmp(optarg, "json"))
                progress_mode = CLI_PROGRESS_JSON;
            else if (!strcmp(optarg, "none"))
                progress_mode = CLI_PROGRESS_NONE;
            else
                return cli_usage_error(C, "--progress '%s' is not auto, json or none", optarg);
            break;
        case 'h':
            fputs(usage_text, stdout);
            fputs(usage_text2, stdout);
            fputs(usage_corpus, stdout);
            return cli_finish_stdout(C);
        case ':': return cli_usage_error(C, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(C, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return cli_usage_error(C, optind >= argc ? "no MODEL given" : "more than one MODEL given");
    if (!outdir)
        return cli_usage_error(C, "no output folder (use -o OUTDIR)");

    if (co.path && (text || file || pair))
        return cli_usage_error(C, "give --corpus or --text/--file/--text-pair, not both");
    if (co.path && (ao.word_level || ao.ablation_kind == HS_ABLATION_RESAMPLE ||
                    ao.loss_span.kind != HS_SPAN_ALL))
        return cli_usage_error(C, "%s is for a single text, not --corpus",
                               ao.word_level                        ? "--word-level"
                               : ao.loss_span.kind != HS_SPAN_ALL ? "--loss-span"
                                                                    : "--ablation resample");
    if (co.path && ao.ablation_kind == HS_ABLATION_MEAN && !co.ablation)
        return cli_usage_error(C, "--ablation mean with --corpus needs --corpus-ablation");
    if (co.path && ao.ablation_kind == HS_ABLATION_MEAN && !strcmp(co.path, "-"))
        return cli_usage_error(C, "--ablation mean reads the corpus twice (its means first); "
                               "give a file or folder, not stdin");
    if (!co.path && corpus_only)
        return cli_usage_error(C, "corpus options need --corpus PATH");
    if (co.resume && co.path && !strcmp(co.path, "-"))
        return cli_usage_error(C, "--resume needs a corpus file or folder, not stdin");
    cli_text t = {0};
    int rc = co.path ? 0 : cli_text_get(C, text, file, pair, &t);
    if (rc)
        return rc;
    /* the output folder, locked; a single-text run is staged and supervised (a failed or
     * interrupted run leaves the folder as it was), before anything has started threads */
    cli_outdir od;
    int worker;
    rc = cli_outdir_open(C, outdir, !co.path, &od, &worker);
    if (!worker) {
        cli_text_free(&t);
        return rc;
    }
    const char *stage = od.stage;
    hs_model *m = cli_model_load(C, argv[optind]);
    hs_encoding enc = {0};
    hs_analysis *a = NULL;
    unsigned char *on = NULL;
    char *json_text = NULL, *report_path = NULL, **files = NULL;
    int n_files = 0;
    hs_error err = {{0}};
    rc = EXIT_FAIL;
    if (!m)
        goto done;
    const hs_model_config *cfg = hs_model_config_of(m);
    if (layers) {
        int bad;
        on = calloc((size_t)cfg->n_layer, 1);
        if (!on)
            goto done;
        parse_layers(layers, cfg->n_layer, on, &bad);
        if (bad >= 0) {
            cli_error(C, "layer %d is out of range (the model has layers 0-%d)", bad, cfg->n_layer - 1);
            goto done;
        }
        ao.layers = on;
    }
    /* --max-tokens N keeps the first N tokens (at most the context), as --truncate keeps n_ctx */
    size_t keep = co.max_tokens > 0 && co.max_tokens < cfg->n_ctx ? (size_t)co.max_tokens : 0;
    if (!co.path && cli_encode(C, m, &t, truncate || co.max_tokens > 0, keep, 0, &enc,
                               &was_truncated))
        goto done;
    if (!quiet && isatty(STDERR_FILENO))
        ao.progress = cli_phase_progress;
    if (progress_mode == CLI_PROGRESS_NONE)
        ao.progress = NULL;
    ao.command_line = cli_command_line(&ao.command_line_argc);

    if (co.path) {
        ao.progress = NULL;
        co.progress = progress_mode >= 0 ? progress_mode
                      : !quiet && isatty(STDERR_FILENO) ? CLI_PROGRESS_TTY : CLI_PROGRESS_NONE;
        rc = cli_analyze_corpus(C, m, &co, &ao, outdir, od.created, quiet, json);
        od.created = 0; /* cli_analyze_corpus removed what it wrote */
        goto done;
    }
    hs_analyze_input in = {.ids = enc.ids, .type_ids = enc.type_ids, .n = (int)enc.n,
                           .tokens = (const char *const *)enc.tokens, .text = t.text,
                           .text_len = t.len,
                           .text_pair = t.pair, .truncated = was_truncated};
    hs_status ast = hs_analyze_run(m, &in, &ao, &a, &err);
    cli_phase_progress_end();
    if (ast != HS_OK) {
        cli_error(C, "%s", err.msg);
        goto done;
    }
    test_signal_at("analyze");
    if (images && hs_pictures_write(a, stage, max_tokens, formats, &files, &n_files, &err) != HS_OK) {
        cli_error(C, "%s", err.msg);
        goto done;
    }
    char **listed = realloc(files, (size_t)(n_files + 2) * sizeof *listed);
    if (listed)
        files = listed;
    if (!listed || !(files[n_files] = strdup("index.html")) ||
        !(files[n_files + 1] = strdup("report.json"))) {
        if (listed && files[n_files])
            n_files++;
        cli_error(C, "out of memory");
        goto done;
    }
    n_files += 2;
    /* the page embeds the report without its arrays of n x n and n_heads x n numbers */
    const char *const *listed_files = (const char *const *)files;
    json_text = hs_report_json(a, listed_files, n_files, HS_REPORT_LEAN);
    size_t plen = strlen(stage) + 16; /* the staging folder's path is the longer */
    report_path = malloc(plen);
    if (!json_text || !report_path) {
        cli_error(C, "out of memory");
        goto done;
    }
    /* index.html first, report.json last: a complete report.json means a complete run */
    test_signal_at("pictures");
    if (write_page(a, json_text, stage, &err) != HS_OK) {
        cli_error(C, "%s", err.msg);
        goto done;
    }
    snprintf(report_path, plen, "%s/report.json", stage);
    if (write_report(a, listed_files, n_files, report_path, &err) != HS_OK) {
        cli_error(C, "%s", err.msg);
        goto done;
    }
    test_signal_at("report");
    if ((rc = cli_outdir_commit(C, &od, files, n_files)) != EXIT_OK)
        goto done;
    rc = EXIT_FAIL;
    snprintf(report_path, plen, "%s/report.json", outdir);
    if (json && hs_report_write(a, listed_files, n_files, HS_REPORT_PRETTY, stdout, &err) == HS_OK)
        putchar('\n');
    else if (json)
        cli_error(C, "%s", err.msg);
    else if (!quiet)
        cli_analyze_summary(a, report_path);
    rc = cli_finish_stdout(C);
done:
    cli_outdir_close(&od); /* after a failure: the staging folder goes, and the folder if new */
    for (int i = 0; i < n_files; i++)
        free(files[i]);
    free(files);
    free(report_path);
    free(json_text);
    hs_analysis_free(a);
    free(on);
    hs_encoding_free(&enc);
    hs_model_free(m);
    cli_text_free(&t);
    return rc;
}
