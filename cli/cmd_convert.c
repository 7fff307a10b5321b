/* headscope convert: write a model as one GGUF v3 file (model.bin) that llama.cpp reads. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "headscope/gguf.h"

#include "cli.h"

static const char usage_text[] =
    "usage: headscope convert MODEL -o OUT [--type f32|f16|bf16|q8_0] [--name NAME] [--keep-mlm]\n"
    "                         [--no-output-copy]\n\n"
    "Writes MODEL (a Hugging Face GPT-2, BERT, RoBERTa, GPT-NeoX, Llama, Mistral, Qwen2,\n"
    "Phi-3, Qwen3, OLMo-2, Gemma 2, Gemma 3, Falcon, StarCoder, DeepSeek-V2/V3 or T5 folder,\n"
    "or a GGUF file) as one GGUF v3 file with config, tokenizer and weights, laid out as\n"
    "llama.cpp's converter writes it: same keys, tensor names, storage types and transforms\n"
    "(Llama's Q/K rows, Llama 3's rope_freqs, Phi-3's rope factors, Gemma's norm weights as\n"
    "1 + w). Norms, biases, position and token-type embeddings stay F32; the other matrices\n"
    "get --type (q8_0 falls back to f16 for rows not a multiple of 32). The file appears only\n"
    "when complete (written to a new temporary file beside OUT, then renamed).\n\n"
    "  -o, --output OUT   the file to write (e.g. model.bin), not a folder\n"
    "  -t, --type TYPE    f32 (default), f16, bf16 or q8_0\n"
    "      --name NAME    general.name (default: the model folder's name)\n"
    "      --keep-mlm     BERT, RoBERTa: also write the MLM head, as headscope-only tensors\n"
    "                     cls.predictions.* / lm_head.* (llama.cpp refuses such files)\n"
    "      --no-output-copy\n"
    "                     GPT-2 or GPT-NeoX with a tied head: leave out output.weight, the copy of\n"
    "                     token_embd written by default (llama.cpp before March 2025 needs it)\n"
    "  -h, --help         show this help\n";

/* The last path component without trailing slashes, into buf. */
static void base_name(const char *path, char *buf, size_t cap)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t start = n;
    while (start > 0 && path[start - 1] != '/')
        start--;
    size_t len = n - start;
    if (len >= cap)
        len = cap - 1;
    memcpy(buf, path + start, len);
    buf[len] = '\0';
    char *dot = strrchr(buf, '.');
    if (dot && dot != buf && (!strcmp(dot, ".bin") || !strcmp(dot, ".gguf")))
        *dot = '\0';
}

int cmd_convert(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'}, {"type", required_argument, NULL, 't'},
        {"name", required_argument, NULL, 'n'},   {"keep-mlm", no_argument, NULL, 'k'},
        {"no-output-copy", no_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    const char *out = NULL, *type = "f32", *name = NULL;
    int keep_mlm = 0, no_copy = 0, c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":o:t:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 't': type = optarg; break;
        case 'n': name = optarg; break;
        case 'k': keep_mlm = 1; break;
        case 'c': no_copy = 1; break;
        case 'h':
            fputs(usage_text, stdout);
            return cli_finish_stdout("convert");
        case ':':
        default: return cli_option_error("convert", c, argc, argv, opts);
        }
    }
    if (optind >= argc)
        return cli_usage_error("convert", "no MODEL given");
    if (optind != argc - 1)
        return cli_usage_error("convert", "more than one MODEL given");
    if (!out || !*out)
        return cli_usage_error("convert", "no output file given (use -o OUT)");
    hs_gguf_write_options opt = {0};
    if (hs_gguf_ftype_parse(type, &opt.ftype) != HS_OK)
        return cli_usage_error("convert", "unknown type '%s' (expected f32, f16, bf16 or q8_0)",
                               type);
    struct stat sb;
    if (stat(out, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        cli_error("convert", "'%s' is a folder: -o OUT names the file to write (e.g. "
                  "'%s/model.bin')", out, out);
        return EXIT_FAIL;
    }
    const char *src = argv[optind];
    char defname[256];
    base_name(src, defname, sizeof defname);
    opt.name = name ? name : defname;
    opt.keep_mlm = keep_mlm;
    opt.no_output_copy = no_copy;

    hs_model *m = cli_model_load("convert", src);
    if (!m)
        return EXIT_FAIL;
    const hs_model_config *cfg = hs_model_config_of(m);
    if (keep_mlm && (cfg->arch->head != HS_HEAD_MLM || !cfg->has_lm_head))
        cli_error("convert", "warning: --keep-mlm ignored: '%s' has no MLM head", src);
    const char *family = cfg->arch->name;
    hs_error err = {{0}};
    hs_status st = hs_gguf_write(m, out, &opt, &err);
    hs_model_free(m);
    if (st != HS_OK) {
        cli_error("convert", "%s", err.msg);
        return EXIT_FAIL;
    }
    if (stat(out, &sb) == 0)
        printf("wrote '%s': %s, %s, %.1f MB\n", cli_shown(out), cli_shown(family), type,
               (double)sb.st_size / (1024.0 * 1024.0));
    return cli_finish_stdout("convert");
}
