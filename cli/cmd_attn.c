/* headscope attn: run the model on a text and write every head's attention map. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "headscope/analysis.h"
#include "headscope/npy.h"
#include "nn/ops.h"

/* The forward-pass observer of attn: appends each layer's maps to the .npy file. */
typedef struct npy_sink {
    hs_npy_stream *s;
    hs_error err;
    int failed;
    int warned; /* --allow-nonfinite: the first non-finite map was named */
    /* --word-level: each layer's maps merged into words before they are written */
    int32_t *word;       /* (n) */
    int n_words;
    const hs_model_config *cfg; /* the layers' visibility */
    float *wmaps;        /* (n_head, n_words, n_words) */
} npy_sink;

static int stream_layer(void *user, int layer, const float *probs, int n_head, int n)
{
    npy_sink *ns = user;
    size_t count = (size_t)n_head * (size_t)n * (size_t)n;
    for (size_t i = 0; !ns->warned && i < count; i++)
        if (!isfinite(probs[i])) {
            size_t nn = (size_t)n * (size_t)n;
            cli_error("attn", "warning: layer %d head %d attention is not finite (query %zu): "
                      "the attention scores overflow float32; written as they are", layer,
                      (int)(i / nn), i % nn / (size_t)n);
            ns->warned = 1;
        }
    if (ns->word) {
        /* the layer's own visibility (a local layer's window) */
        if (hs_wordmap_compute(probs, n_head, n, hs_model_layer_visibility(ns->cfg, layer),
                               ns->word, ns->n_words, ns->wmaps, &ns->err) != HS_OK)
            return ns->failed = 1;
        probs = ns->wmaps;
        count = (size_t)n_head * (size_t)ns->n_words * (size_t)ns->n_words;
    }
    ns->failed = hs_npy_stream_write(ns->s, probs, count, &ns->err) != HS_OK;
    return ns->failed;
}

/* The word of each token of enc (hs_word_ids) into ns; -1 when out of memory. */
static int word_index(const hs_model *m, const hs_encoding *enc, npy_sink *ns)
{
    const hs_model_config *c = hs_model_config_of(m);
    const hs_tokenizer *tok = hs_model_tokenizer(m);
    int n = (int)enc->n, bad = 0;
    char **disp = calloc((size_t)n, sizeof *disp);
    const char **raw = malloc((size_t)n * sizeof *raw);
    int32_t *word = malloc((size_t)n * sizeof *word);
    for (int i = 0; disp && raw && i < n && !bad; i++) {
        char buf[256];
        raw[i] = hs_tokenizer_token(tok, enc->ids[i]);
        hs_tokenizer_display(tok, enc->ids[i], buf, sizeof buf);
        bad = !(disp[i] = strdup(buf));
    }
    if (disp && raw && word && !bad) {
        ns->n_words = hs_word_ids(raw, (const char *const *)disp,
                                  enc->ids, n, c->arch->tokenizer == HS_TOK_WORDPIECE, tok,
                                  word);
        ns->cfg = c;
        ns->wmaps = malloc((size_t)c->n_head * (size_t)ns->n_words * (size_t)ns->n_words *
                           sizeof *ns->wmaps);
    }
    for (int i = 0; disp && i < n; i++)
        free(disp[i]);
    free(disp);
    free(raw);
    if (!word || !ns->wmaps) {
        free(word);
        return -1;
    }
    ns->word = word;
    return 0;
}

/* ids from a 1-D '<i4' .npy of 1 to max values into a (hs_npy_free), or -1 after the error. */
static int read_ids(const char *path, int max, hs_npy *a)
{
    hs_error err = {{0}};
    if (hs_npy_read(path, a, &err) != HS_OK) {
        cli_error("attn", "%s", err.msg);
        return -1;
    }
    if (a->dtype != HS_NPY_I32 || a->ndim != 1 || a->count < 1 || a->count > (size_t)max) {
        cli_error("attn", "'%s': token ids must be a 1-D '<i4' array of 1 to %d values", path,
                  max);
        return -1;
    }
    return 0;
}

/* attn on an encoder-decoder, or the refusal of a target for a model of one stack: an exit
 * code. The ids of --ids, else the text t tokenized. */
static int attn_encdec(const hs_model *m, const char *model_path, const char *ids_path,
                       const cli_text *t,
                       int truncate, int words, const char *target, const char *target_ids,
                       const char *out, const char *nll_path, const char *abl_path,
                       const char *grad_path, int allow_nonfinite, int quiet)
{
    const hs_model_config *cfg = hs_model_config_of(m);
    if (!cfg->n_enc_layer) {
        cli_error("attn", "--target, --target-ids, --ablation and --gradient need an "
                  "encoder-decoder model ('%s' is not one)", model_path);
        return EXIT_FAIL;
    }
    if (!target == !target_ids) {
        cli_error("attn", "'%s' is an encoder-decoder: give its decoder's target with "
                  "--target TEXT or --target-ids IDS.npy (one of them)", model_path);
        return EXIT_FAIL;
    }
    if (words) {
        cli_error("attn", "--word-level is not implemented for an encoder-decoder");
        return EXIT_FAIL;
    }
    hs_encoding src = {0}, tgt = {0};
    hs_npy tids = {0};
    cli_text tt = {0};
    int rc = EXIT_FAIL;
    hs_npy ids = {0};
    if (ids_path ? read_ids(ids_path, cfg->n_ctx, &ids)
                 : cli_encode("attn", m, t, truncate, 0, 0, &src, NULL))
        goto done;
    if (target_ids ? read_ids(target_ids, cfg->n_ctx, &tids)
                   : (cli_text_get("attn", target, NULL, NULL, &tt) ||
                      cli_encode("attn", m, &tt, truncate, 0, 0, &tgt, NULL)))
        goto done;
    rc = cli_attn_encdec(m, ids_path ? ids.data : src.ids, ids_path ? (int)ids.count : (int)src.n,
                         target_ids ? tids.data : tgt.ids,
                         target_ids ? (int)tids.count : (int)tgt.n, out, nll_path, abl_path,
                         grad_path, allow_nonfinite, quiet);
done:
    hs_encoding_free(&src);
    hs_encoding_free(&tgt);
    hs_npy_free(&tids);
    hs_npy_free(&ids);
    cli_text_free(&tt);
    return rc;
}

static const char usage_text[] =
    "usage: headscope attn MODEL (--text TEXT | --file PATH|- | --ids IDS.npy)\n"
    "                      [--text-pair TEXT2] [--truncate] [--allow-nonfinite]\n"
    "                      [--word-level] [--nll NLL.npy] -o OUT.npy\n"
    "       headscope attn T5-MODEL (--text TEXT | --file PATH|- | --ids IDS.npy)\n"
    "                      (--target TEXT | --target-ids IDS.npy) [--nll NLL.npy]\n"
    "                      [--ablation ABL.npy] [--gradient GRAD.npy] -o OUT.npy\n\n"
    "Runs MODEL (Hugging Face folder or GGUF file) on the text and writes the attention\n"
    "probabilities of every head as a NumPy array of shape (n_layer, n_head, n_tok, n_tok),\n"
    "float32, row = query token, column = key token. An encoder-decoder (T5) reads the text\n"
    "with its encoder and the target with its decoder (teacher forcing: the decoder starts\n"
    "from decoder_start_token_id) and writes three arrays beside OUT (its .npy replaced):\n"
    "OUT.encoder.npy (n_enc_layer, n_head, n_src, n_src), OUT.decoder.npy (n_dec_layer,\n"
    "n_head, n_tgt, n_tgt) and OUT.cross.npy (n_dec_layer, n_head, n_tgt, n_src).\n\n"
    "  -t, --text TEXT        the input text\n"
    "  -f, --file PATH        read the text from a file as raw bytes ('-' for stdin)\n"
    "      --ids IDS.npy      token ids instead of a text: a 1-D '<i4' .npy array (no\n"
    "                         tokenizer needed)\n"
    "      --text-pair TEXT2  second segment, where the tokenizer has a pair template\n"
    "                         (BERT [CLS] a [SEP] b [SEP], RoBERTa, Llama)\n"
    "      --truncate         keep the first n_ctx tokens of a longer text\n"
    "      --allow-nonfinite  write maps holding NaN or infinity (attention scores that\n"
    "                         overflow float32) instead of failing; a warning names the\n"
    "                         first such layer and head\n"
    "      --word-level       word-level maps instead (Clark et al.: subword keys summed,\n"
    "                         queries averaged): shape (n_layer, n_head, n_word, n_word)\n"
    "      --target TEXT      an encoder-decoder's decoder target, tokenized as the text\n"
    "      --target-ids IDS.npy\n"
    "                         the target as token ids ('<i4', 1-D)\n"
    "      --nll NLL.npy      also write each token's next-token negative log-likelihood\n"
    "                         (nats, '<f4', n_tok - 1 values; causal models; an\n"
    "                         encoder-decoder: each target token's, n_tgt values)\n"
    "      --ablation ABL.npy\n"
    "                         an encoder-decoder's heads by zero ablation: the target's\n"
    "                         mean NLL with one head off minus with all on, shape\n"
    "                         (2, n_layer, n_head): [0] self-attention heads, [1]\n"
    "                         cross-attention heads (NaN in the encoder's layers); one\n"
    "                         pass a head\n"
    "      --gradient GRAD.npy\n"
    "                         an encoder-decoder's heads by gradient: the signed\n"
    "                         derivative of that loss by each head's mask at 1, the same\n"
    "                         layout (one forward and one backward pass)\n"
    "  -o, --output OUT.npy   where to write the maps (required)\n"
    "  -q, --quiet            print nothing on success\n"
    "  -h, --help             show this help\n";

int cmd_attn(int argc, char **argv)
{
    static const struct option opts[] = {
        {"text", required_argument, NULL, 't'},   {"file", required_argument, NULL, 'f'},
        {"text-pair", required_argument, NULL, 'p'}, {"truncate", no_argument, NULL, 'T'},
        {"output", required_argument, NULL, 'o'}, {"quiet", no_argument, NULL, 'q'},
        {"allow-nonfinite", no_argument, NULL, 'N'}, {"ids", required_argument, NULL, 'I'},
        {"nll", required_argument, NULL, 'L'},     {"word-level", no_argument, NULL, 'W'},
        {"target", required_argument, NULL, 'G'}, {"target-ids", required_argument, NULL, 'J'},
        {"ablation", required_argument, NULL, 'A'}, {"gradient", required_argument, NULL, 'D'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    const char *text = NULL, *file = NULL, *pair = NULL, *out = NULL, *ids_path = NULL;
    const char *nll_path = NULL, *target = NULL, *target_ids = NULL, *abl_path = NULL;
    const char *grad_path = NULL;
    int truncate = 0, quiet = 0, allow_nonfinite = 0, words = 0, c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":t:f:o:qh", opts, NULL)) != -1) {
        switch (c) {
        case 't': text = optarg; break;
        case 'f': file = optarg; break;
        case 'p': pair = optarg; break;
        case 'T': truncate = 1; break;
        case 'o': out = optarg; break;
        case 'q': quiet = 1; break;
        case 'N': allow_nonfinite = 1; break;
        case 'W': words = 1; break;
        case 'I': ids_path = optarg; break;
        case 'L': nll_path = optarg; break;
        case 'G': target = optarg; break;
        case 'J': target_ids = optarg; break;
        case 'A': abl_path = optarg; break;
        case 'D': grad_path = optarg; break;
        case 'h': fputs(usage_text, stdout); return cli_finish_stdout("attn");
        case ':':
        default: return cli_option_error("attn", c, argc, argv, opts);
        }
    }
    if (optind != argc - 1)
        return cli_usage_error("attn", optind >= argc ? "no MODEL given" : "more than one MODEL given");
    if (!out)
        return cli_usage_error("attn", "no output file (use -o OUT.npy)");
    const char *model_path = argv[optind];
    if (ids_path && (text || file || pair || truncate))
        return cli_usage_error("attn", "--ids takes the place of --text, --file, --text-pair and "
                               "--truncate");
    if (ids_path && words)
        return cli_usage_error("attn", "--word-level needs a text (its words come from the "
                               "tokens; --ids gives none)");

    cli_text t = {0};
    hs_npy ids = {0};
    int rc = ids_path ? 0 : cli_text_get("attn", text, file, pair, &t);
    if (rc)
        return rc;
    hs_model *m = cli_model_load("attn", model_path);
    hs_encoding enc = {0};
    hs_error err = {{0}};
    npy_sink ns = {.warned = !allow_nonfinite}; /* the scan runs only when allowed */
    float *logits = NULL;
    rc = EXIT_FAIL;
    if (!m)
        goto done;
    const hs_model_config *cfg = hs_model_config_of(m);
    if ((target || target_ids || abl_path || grad_path || cfg->n_enc_layer) &&
        (rc = attn_encdec(m, model_path, ids_path, &t, truncate, words, target, target_ids, out,
                          nll_path, abl_path, grad_path, allow_nonfinite, quiet)) >= 0)
        goto done;
    rc = EXIT_FAIL;
    if (nll_path && (!cfg->causal || !cfg->has_lm_head)) {
        cli_error("attn", "--nll needs a causal language model ('%s' is not one)", model_path);
        goto done;
    }
    if (ids_path) {
        if (read_ids(ids_path, cfg->n_ctx, &ids))
            goto done;
        enc.ids = ids.data;
        enc.n = ids.count;
    } else if (cli_encode("attn", m, &t, truncate, 0, 0, &enc, NULL)) {
        goto done;
    }
    int n = (int)enc.n;
    if (nll_path && n < 2) {
        cli_error("attn", "--nll needs at least 2 tokens");
        goto done;
    }
    if (words && word_index(m, &enc, &ns)) {
        cli_error("attn", "out of memory");
        goto done;
    }
    size_t side = words ? (size_t)ns.n_words : (size_t)n;
    size_t shape[4] = {(size_t)cfg->n_layer, (size_t)cfg->n_head, side, side};
    /* each layer's maps go to the file as the pass makes them: no (L, H, n, n) buffer */
    if (hs_npy_stream_open(out, shape, 4, &ns.s, &err) != HS_OK) {
        cli_error("attn", "%s", err.msg);
        goto done;
    }
    if (nll_path && !(logits = malloc((size_t)n * (size_t)cfg->vocab_size * sizeof *logits))) {
        cli_error("attn", "out of memory for the logits");
        goto done;
    }
    hs_forward_opts fo = {.on_attn = stream_layer, .user = &ns,
                          .allow_nonfinite = allow_nonfinite, .logits = logits};
    if (hs_forward(m, enc.ids, enc.type_ids, n, &fo, NULL, &err) != HS_OK) {
        cli_error("attn", "%s", ns.failed ? ns.err.msg : err.msg);
        goto done;
    }
    hs_npy_stream *s = ns.s;
    ns.s = NULL;
    if (hs_npy_stream_close(s, 1, &err) != HS_OK) {
        cli_error("attn", "%s", err.msg);
        goto done;
    }
    if (nll_path) { /* logits row i predicts token i + 1; reuses the logits' first row */
        float *nll = logits;
        for (int i = 0; i + 1 < n; i++) {
            const float *row = logits + (size_t)i * (size_t)cfg->vocab_size;
            nll[i] = (float)(hs_op_log_sum_exp(row, cfg->vocab_size) - (double)row[enc.ids[i + 1]]);
        }
        size_t len = (size_t)n - 1;
        if (hs_npy_write_f32(nll_path, nll, &len, 1, &err) != HS_OK) {
            cli_error("attn", "%s", err.msg);
            goto done;
        }
    }
    if (!quiet)
        printf("wrote %s: %d layers x %d heads x %d x %d %s\n", cli_shown(out), cfg->n_layer,
               cfg->n_head, (int)side, (int)side, words ? "words" : "tokens");
    rc = cli_finish_stdout("attn");
done:
    hs_npy_stream_close(ns.s, 0, NULL);
    free(ns.word);
    free(ns.wmaps);
    free(logits);
    if (ids_path)
        hs_npy_free(&ids);
    else
        hs_encoding_free(&enc);
    hs_model_free(m);
    cli_text_free(&t);
    return rc;
}
