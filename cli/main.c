/* headscope: dispatch on the subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} commands[] = {
    {"analyze", cmd_analyze, "per-head metrics, clusters, importance and pruning: report.json"},
    {"attn", cmd_attn, "record every head's attention map to a .npy file"},
    {"tokenize", cmd_tokenize, "show the token ids and strings of a text"},
    {"info", cmd_info, "describe a model: family, dimensions, parameters, tokenizer, format"},
    {"convert", cmd_convert, "write a Hugging Face model folder as one GGUF file (model.bin)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: headscope COMMAND [OPTIONS] MODEL ...\n\n"
               "Opens GPT-2 and BERT models (Hugging Face folder or GGUF file) and shows what\n"
               "each attention head does.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'headscope COMMAND --help' describes a command; docs/ has the details.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return cli_finish_stdout("help");
    }
    if (!strcmp(cmd, "--version")) {
        const char *commit = hs_build_commit();
        printf("headscope %s%s%s%s\n", hs_version(), *commit ? " (git " : "", commit,
               *commit ? ")" : "");
        return cli_finish_stdout("version");
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name)) {
            cli_command_line_save(argc, argv); /* before getopt reorders argv */
            int rc = commands[i].fn(argc - 1, argv + 1);
            cli_command_line_save(0, NULL);
            return rc;
        }
    fprintf(stderr, "headscope: '%s' is not a command\n", cmd);
    usage(stderr);
    return EXIT_USAGE;
}
