/* headscope tokenize: show how a model's tokenizer splits a text. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "cli.h"

static const char usage_text[] =
    "usage: headscope tokenize MODEL (--text TEXT | --file PATH|-) [--text-pair TEXT2]\n"
    "                          [--max-tokens N] [--display] [--json]\n\n"
    "Prints the tokens of the text as MODEL's tokenizer makes them, ids identical to Hugging\n"
    "Face's tokenizers library. MODEL is a model folder, a model file, or a tokenizer.json\n"
    "(GPT-2, RoBERTa, GPT-NeoX, Llama 2/3, Qwen2, BERT; docs/tokenizers.md). One line per\n"
    "token: position, id, type id, token (raw vocabulary string). With --json, stdout is\n"
    "exactly one JSON object {\"ids\": [...], \"tokens\": [...], \"type_ids\": [...]}.\n"
    "With --display, the token column is its readable form (byte-level tokens as their text,\n"
    "SentencePiece's word marker as a space) and the JSON object has \"display\": [...] too.\n\n"
    "  -t, --text TEXT        the input text\n"
    "  -f, --file PATH        read the text from a file as raw bytes ('-' for stdin)\n"
    "      --text-pair TEXT2  second segment, for a tokenizer whose post-processor defines\n"
    "                         a pair (BERT, RoBERTa, Llama)\n"
    "      --max-tokens N     truncate to N tokens as attn/analyze --truncate do: the special\n"
    "                         tokens stay and the longer segment is shortened first (Hugging\n"
    "                         Face's longest_first); GPT-2 keeps the first N\n"
    "      --display          readable tokens (as TransformerLens' to_str_tokens)\n"
    "      --json             print JSON\n"
    "  -h, --help             show this help\n";

/* The raw vocabulary string of id ("" when tok has none). */
static const char *raw_token(const hs_tokenizer *tok, int32_t id)
{
    const char *s = hs_tokenizer_token(tok, id);
    return s ? s : "";
}

/* The readable form of id (hs_tokenizer_display) in buf. */
static const char *display_token(const hs_tokenizer *tok, int32_t id, char *buf, size_t cap)
{
    hs_tokenizer_display(tok, id, buf, cap);
    return buf;
}

static int print_json(const hs_tokenizer *tok, const hs_encoding *e, int display)
{
    char buf[1024];
    cJSON *root = cJSON_CreateObject();
    cJSON *ids = cJSON_AddArrayToObject(root, "ids");
    cJSON *toks = cJSON_AddArrayToObject(root, "tokens");
    cJSON *types = cJSON_AddArrayToObject(root, "type_ids");
    cJSON *shown = display ? cJSON_AddArrayToObject(root, "display") : NULL;
    int ok = root && ids && toks && types && (shown || !display);
    for (size_t i = 0; ok && i < e->n; i++) {
        ok = cJSON_AddItemToArray(ids, cJSON_CreateNumber(e->ids[i])) &&
             cJSON_AddItemToArray(toks, cJSON_CreateString(raw_token(tok, e->ids[i]))) &&
             cJSON_AddItemToArray(types, cJSON_CreateNumber(e->type_ids[i])) &&
             (!display || cJSON_AddItemToArray(shown, cJSON_CreateString(display_token(
                                                          tok, e->ids[i], buf, sizeof buf))));
    }
    char *s = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!s) {
        cli_error("tokenize", "out of memory");
        return EXIT_FAIL;
    }
    puts(s);
    free(s);
    return 0;
}

/* A regular file whose first non-blank byte is '{': a tokenizer.json (a model file is GGUF or
 * safetensors, a folder is a folder). */
static int is_json_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    int c = EOF;
    if (!f)
        return 0;
    do
        c = fgetc(f);
    while (c == ' ' || c == '\t' || c == '\n' || c == '\r');
    fclose(f);
    return c == '{';
}

int cmd_tokenize(int argc, char **argv)
{
    static const struct option opts[] = {
        {"text", required_argument, NULL, 't'}, {"file", required_argument, NULL, 'f'},
        {"text-pair", required_argument, NULL, 'p'}, {"json", no_argument, NULL, 'j'},
        {"max-tokens", required_argument, NULL, 'm'}, {"display", no_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0}};
    const char *text = NULL, *file = NULL, *pair = NULL;
    int json = 0, display = 0, c;
    long max_tokens = 0;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":t:f:h", opts, NULL)) != -1) {
        switch (c) {
        case 't': text = optarg; break;
        case 'f': file = optarg; break;
        case 'p': pair = optarg; break;
        case 'j': json = 1; break;
        case 'd': display = 1; break;
        case 'm':
            if (cli_parse_long(optarg, 1, 1L << 30, &max_tokens))
                return cli_usage_error("tokenize", "--max-tokens needs a whole number >= 1, not '%s'",
                                       optarg);
            break;
        case 'h': fputs(usage_text, stdout); return cli_finish_stdout("tokenize");
        case ':':
        default: return cli_option_error("tokenize", c, argc, argv, opts);
        }
    }
    if (optind != argc - 1)
        return cli_usage_error("tokenize", optind >= argc ? "no MODEL given" : "more than one MODEL given");
    cli_text t;
    int rc = cli_text_get("tokenize", text, file, pair, &t);
    if (rc)
        return rc;
    hs_model *m = NULL;
    hs_tokenizer *own = NULL;
    hs_encoding enc = {0};
    rc = EXIT_FAIL;
    if (is_json_file(argv[optind])) {
        hs_error err = {{0}};
        if (hs_tokenizer_load_json(argv[optind], &own, &err) != HS_OK) {
            cli_error("tokenize", "%s", err.msg);
            goto done;
        }
    } else if (!(m = cli_model_open("tokenize", argv[optind], HS_OPEN_TOKENIZER))) {
        goto done;
    }
    /* tokenize shows any length: the context is not enforced, truncation only on request */
    const hs_tokenizer *tok = own ? own : hs_model_tokenizer(m);
    long specials = tok ? (long)hs_tokenizer_special_count(tok, t.pair != NULL) : 0;
    if (max_tokens > 0 && max_tokens < specials) {
        cli_error("tokenize", "--max-tokens %ld leaves no room for the %ld special tokens "
                  "the post-processor (%s) adds to this input", max_tokens, specials,
                  hs_tokenizer_post_processor(tok));
        goto done;
    }
    if (own ? cli_encode_tok("tokenize", own, 0, &t, max_tokens > 0 ? 1 : -1, (size_t)max_tokens, 1, &enc,
                             NULL)
            : cli_encode("tokenize", m, &t, max_tokens > 0 ? 1 : -1, (size_t)max_tokens, 1, &enc, NULL))
        goto done;
    if (json) {
        if (print_json(tok, &enc, display))
            goto done;
    } else { /* a terminal is shown no control character of a token; a pipe gets the bytes */
        int tty = isatty(STDOUT_FILENO);
        char buf[1024];
        for (size_t i = 0; i < enc.n; i++) {
            const char *s = display ? display_token(tok, enc.ids[i], buf, sizeof buf)
                                    : raw_token(tok, enc.ids[i]);
            printf("%zu\t%d\t%d\t%s\n", i, (int)enc.ids[i], (int)enc.type_ids[i],
                   tty ? cli_shown(s) : s);
        }
    }
    rc = cli_finish_stdout("tokenize");
done:
    hs_encoding_free(&enc);
    hs_tokenizer_free(own);
    hs_model_free(m);
    cli_text_free(&t);
    return rc;
}
