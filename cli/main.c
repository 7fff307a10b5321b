/* headscope: dispatch on the subcommand; the options every command takes (--threads,
 * --weight-memory). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/core.h"
#include "model/model_internal.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} commands[] = {
    {"analyze", cmd_analyze, "per-head metrics, clusters, importance and pruning: report.json"},
    {"merge", cmd_merge, "combine the shards of a corpus run (analyze --corpus --shard) into one report"},
    {"patch", cmd_patch, "activation patching over pairs of clean and corrupt prompts: patching.json"},
    {"attn", cmd_attn, "record every head's attention map to a .npy file"},
    {"dump", cmd_dump, "write every activation (q, k, v, z, pattern, ...) as TransformerLens-named .npy files"},
    {"tokenize", cmd_tokenize, "show the token ids and strings of a text"},
    {"info", cmd_info, "describe a model: family, dimensions, parameters, tokenizer, format"},
    {"convert", cmd_convert, "write a Hugging Face model folder as one GGUF file (model.bin)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: headscope COMMAND [OPTIONS] MODEL ...\n\n"
               "Opens GPT-2, BERT, RoBERTa, DistilBERT, GPT-NeoX/Pythia, Llama, Mistral, Qwen2 and\n"
               "Phi-3 models (Hugging Face folder or GGUF file) and shows what each attention head\n"
               "does.\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\noptions every command takes:\n"
               "  --threads N  compute with N threads (default: HEADSCOPE_THREADS, else one per core)\n"
               "  --weight-memory SIZE\n"
               "               float32 layer weights kept converted from an F16/BF16/quantised\n"
               "               checkpoint, e.g. 2G or all; beyond it layers are converted again\n"
               "               in every pass; 'stored': none converted, the forward pass\n"
               "               multiplies by them in their stored type (default:\n"
               "               HEADSCOPE_WEIGHT_MEMORY, else 'stored')\n"
               "  --activations float|q8\n"
               "               q8: activations quantised to 8 bits per 32 values for the products\n"
               "               by block-quantised (GGUF Q*, IQ4) layers, as llama.cpp computes\n"
               "               them: faster, not the float32 results (docs/gguf.md); implies\n"
               "               --weight-memory stored (default: float)\n"
               "\n'headscope COMMAND --help' describes a command; docs/ has the details.\n");
}

/* A thread count: 1..4096 (cli_parse_long: digits only, checked before narrowing). */
static int parse_threads(const char *s, int *out)
{
    long v;
    if (cli_parse_long(s, 1, 4096, &v))
        return -1;
    *out = (int)v;
    return 0;
}

/* Takes `--NAME VALUE` / `--NAME=VALUE` out of argv[2..] (before a "--"); *val gets the
 * last value given (left alone when none). Returns 0, or EXIT_USAGE after a message. */
static int take_option(int *argc, char **argv, const char *name, const char **val)
{
    size_t len = strlen(name);
    for (int i = 2; i < *argc && strcmp(argv[i], "--"); i++) {
        int drop = 0;
        if (!strcmp(argv[i], name)) {
            if (i + 1 >= *argc) {
                cli_error(NULL, "option '%s' needs a value", name);
                return EXIT_USAGE;
            }
            *val = argv[i + 1];
            drop = 2;
        } else if (!strncmp(argv[i], name, len) && argv[i][len] == '=') {
            *val = argv[i] + len + 1;
            drop = 1;
        }
        if (drop) {
            memmove(argv + i, argv + i + drop, (size_t)(*argc - i - drop + 1) * sizeof *argv);
            *argc -= drop;
            i--;
        }
    }
    return 0;
}

/* Takes --threads N out of argv, else reads HEADSCOPE_THREADS, and sets the thread count;
 * takes --weight-memory SIZE (HEADSCOPE_WEIGHT_MEMORY is read when the model is opened)
 * and --activations float|q8.
 * Returns 0, or EXIT_USAGE after a message. */
static int take_common(int *argc, char **argv)
{
    const char *val = NULL, *env = getenv("HEADSCOPE_THREADS"), *wm = NULL, *act = NULL;
    int n = 0;
    if (take_option(argc, argv, "--threads", &val) ||
        take_option(argc, argv, "--weight-memory", &wm) ||
        take_option(argc, argv, "--activations", &act))
        return EXIT_USAGE;
    if (act && strcmp(act, "float") && strcmp(act, "q8")) {
        cli_error(NULL, "--activations '%s' is not float or q8", act);
        return EXIT_USAGE;
    }
    if (act && !strcmp(act, "q8") && wm && strcmp(wm, "stored")) {
        cli_error(NULL, "--activations q8 multiplies every layer in its stored type: it takes no "
                  "--weight-memory but 'stored' (not '%s')", wm);
        return EXIT_USAGE;
    }
    cli_set_q8_activations(act && !strcmp(act, "q8"));
    if (val && parse_threads(val, &n)) {
        cli_error(NULL, "--threads '%s' is not a number in [1, 4096]", val);
        return EXIT_USAGE;
    }
    if (!val && env && *env && parse_threads(env, &n)) {
        cli_error(NULL, "HEADSCOPE_THREADS='%s' is not a number in [1, 4096]", env);
        return EXIT_USAGE;
    }
    size_t bytes = 0;
    if (wm && hs_weight_memory_parse(wm, &bytes)) {
        cli_error(NULL, "--weight-memory '%s' is not a size (e.g. 512M, 4G or all)", wm);
        return EXIT_USAGE;
    }
    if (wm)
        cli_set_weight_memory(bytes ? bytes : 1); /* 0: one layer at a time */
    hs_set_threads(n); /* 0: one per core */
    return 0;
}

/* The options every command takes may come before the command (`headscope --threads 4
 * analyze ...`): moved behind it, where take_common finds them. Returns 0, or EXIT_USAGE
 * after a message (one without its value). */
static int common_first(int argc, char **argv)
{
    static const char *const names[] = {"--threads", "--weight-memory", "--activations"};
    int i = 1;
    while (i < argc) {
        int k = -1;
        for (int j = 0; j < 3; j++) {
            size_t n = strlen(names[j]);
            if (!strncmp(argv[i], names[j], n) && (argv[i][n] == 0 || argv[i][n] == '='))
                k = argv[i][n] == 0 ? 2 : 1;
        }
        if (k < 0)
            break;
        if (i + k > argc) {
            cli_error(NULL, "option '%s' needs a value (see 'headscope --help')", argv[i]);
            return EXIT_USAGE;
        }
        i += k;
    }
    if (i == 1 || i >= argc) /* none, or nothing after them: the usual messages */
        return 0;
    char *cmd = argv[i]; /* argv[1..i-1] are the options: the command goes first */
    memmove(argv + 2, argv + 1, (size_t)(i - 1) * sizeof *argv);
    argv[1] = cmd;
    return 0;
}

/* An unknown first argument: one line, with the command meant when one is close. */
static int unknown_command(const char *cmd)
{
    const char *names[sizeof commands / sizeof commands[0]];
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        names[i] = commands[i].name;
    const char *near = cli_closest(cmd, names, (int)(sizeof names / sizeof *names));
    if (cmd[0] == '-')
        cli_error(NULL, "unknown option '%s' before the command (see 'headscope --help')", cmd);
    else if (near)
        cli_error(NULL, "'%s' is not a command; did you mean '%s'? (see 'headscope --help')",
                  cmd, near);
    else
        cli_error(NULL, "'%s' is not a command (see 'headscope --help')", cmd);
    return EXIT_USAGE;
}

int main(int argc, char **argv)
{
    /* huge pages on the weights and the other advised buffers only, not on every thread's
       OpenBLAS buffer and malloc arena (analyze at n = 1024 on 16 threads peaked 40 MB
       higher under `always`, docs/bench.md); inherited across the re-run below */
    (void)hs_thp_advised_only();
    hs_blas_reexec(argv); /* OpenBLAS's kernels for this CPU, where it chose older ones */
    /* a signal removes the temporary files being written; past the file size limit a write
       fails (EFBIG) and its command cleans up and says so */
    hs_tmp_signals_install();
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (common_first(argc, argv))
        return EXIT_USAGE;
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return cli_finish_stdout("help");
    }
    if (!strcmp(cmd, "--version")) {
        const char *commit = hs_build_commit();
        printf("headscope %s%s%s%s\n", hs_version(), *commit ? " (git " : "", commit,
               *commit ? ")" : "");
        printf("OpenBLAS kernels %s, %s threads", hs_blas_corename(), hs_blas_threading());
        if (hs_blas_detected())
            printf(" (OpenBLAS chose %s; headscope set OPENBLAS_CORETYPE)", hs_blas_detected());
        printf("\n");
        return cli_finish_stdout("version");
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name)) {
            cli_command_line_save(argc, argv); /* before getopt reorders argv */
            if (take_common(&argc, argv)) {
                cli_command_line_save(0, NULL);
                return EXIT_USAGE;
            }
            int rc = commands[i].fn(argc - 1, argv + 1);
            cli_command_line_save(0, NULL);
            return rc;
        }
    return unknown_command(cmd);
}
