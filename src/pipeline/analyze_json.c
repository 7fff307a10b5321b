/* From texts to report.json in one call (hs_analyze_json), for bindings such as the Python
 * package that cannot fill hs_analyze_opts: the options come as a JSON object. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "core/core.h"
#include "headscope/corpus.h"
#include "headscope/html.h"
#include "headscope/report.h"
#include "pipeline/options.h"

void hs_free(void *p) { free(p); }

typedef struct json_opts {
    hs_analyze_args args;  /* the options, read through the table (options.c) */
    unsigned char *layers; /* owned: args.layers marked for the model */
} json_opts;

static hs_status parse_options(const hs_model *m, const char *options, json_opts *jo,
                               hs_error *err)
{
    hs_status st = hs_analyze_args_from_json(options, &jo->args, err);
    if (st != HS_OK || !jo->args.layers)
        return st;
    int n_layer = hs_model_config_of(m)->n_layer, bad;
    if (!(jo->layers = calloc((size_t)n_layer, 1)))
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    hs_layers_mark(jo->args.layers, n_layer, jo->layers, &bad);
    if (bad >= 0)
        return hs_fail(err, HS_E_ARG, "option 'layers': expected layers 0..%d", n_layer - 1);
    jo->args.ao.layers = jo->layers;
    return HS_OK;
}

/* Tokenizes one text (and the pair) with the checks `headscope analyze` makes. */
static hs_status encode(const hs_model *m, const char *text, size_t len, const char *pair,
                        int truncate, hs_encoding *enc, int *truncated, hs_error *err)
{
    const hs_tokenizer *tok = hs_model_tokenizer(m);
    size_t ctx = (size_t)hs_model_config_of(m)->n_ctx;
    *truncated = 0;
    if (!tok)
        return hs_fail(err, HS_E_ARG, "the model has no tokenizer files");
    if (len == 0)
        return hs_fail(err, HS_E_INPUT, "the text is empty");
    hs_status st;
    if (pair && (st = hs_tokenizer_check_pair(tok, err)) != HS_OK) {
        hs_error_prefix(err, "text_pair");
        return st;
    }
    st = hs_tokenizer_encode(tok, text, len, pair, pair ? strlen(pair) : 0, enc, err);
    if (st != HS_OK)
        return st;
    if (enc->n == 0)
        return hs_fail(err, HS_E_INPUT, "the text has no tokens");
    if (enc->n > ctx) {
        if (!truncate)
            return hs_fail(err, HS_E_INPUT, "the text is %zu tokens, more than the model's "
                           "context of %zu; pass truncate=True to keep the first %zu",
                           enc->n, ctx, ctx);
        hs_encoding_truncate(tok, enc, ctx);
        *truncated = 1;
    }
    return HS_OK;
}

static hs_status analyze_one(const hs_model *m, const char *text, size_t len, json_opts *jo,
                             int corpus, hs_analysis **out, hs_error *err)
{
    hs_encoding enc = {0};
    int truncated;
    hs_status st = encode(m, text, len, jo->args.text_pair, jo->args.truncate || corpus, &enc,
                          &truncated, err);
    if (st == HS_OK) {
        hs_analyze_input in = {.ids = enc.ids, .type_ids = enc.type_ids, .n = (int)enc.n,
                               .text = text, .text_len = len, .text_pair = jo->args.text_pair,
                               .truncated = truncated};
        st = hs_analyze_run(m, &in, &jo->args.ao, out, err);
    }
    hs_encoding_free(&enc);
    return st;
}

/* Several texts: corpus statistics as `headscope analyze --corpus` (no per-text ablation
 * unless asked, no pruning, no diversity; the probe and the file digests once). */
static hs_status analyze_corpus(const hs_model *m, const char *const *texts, const size_t *lens,
                                int n_texts, json_opts *jo, char **out, hs_error *err)
{
    hs_analysis *first = NULL, *a = NULL;
    hs_corpus_agg *g = NULL;
    hs_corpus_info info = {.path = "(texts)", .format = HS_CORPUS_LINES,
                           .max_tokens = hs_model_config_of(m)->n_ctx,
                           .ablation = jo->args.ao.ablation, .n_records = n_texts,
                           .shard = 1, .n_shards = 1, .n_selected = n_texts};
    hs_status st = HS_OK;
    jo->args.ao.pruning = 0;
    jo->args.ao.diversity = 0;
    jo->args.ao.composition = 0; /* a property of the weights: the single-text report has it */
    jo->args.ao.dla = 0;         /* per text and position: the single-text report has it */
    jo->args.ao.norm_based = 0;
    jo->args.ao.word_level = 0;
    jo->args.ao.rollout = 0;     /* a per-text n x n matrix: not aggregated */
    for (int i = 0; i < n_texts && st == HS_OK; i++) {
        size_t len = lens ? lens[i] : strlen(texts[i]);
        jo->args.ao.probe = first == NULL;
        jo->args.ao.hash_files = first == NULL && jo->args.ao.hash_files;
        if ((st = analyze_one(m, texts[i], len, jo, 1, &a, err)) != HS_OK) {
            hs_error_prefix(err, "text %d", i);
            break;
        }
        if (!g)
            st = hs_corpus_agg_new(a, &g, err);
        if (st == HS_OK)
            st = hs_corpus_agg_add(g, a, err);
        if (!first) {
            first = a;
            a = NULL;
        }
        hs_analysis_free(a);
        a = NULL;
    }
    if (st == HS_OK)
        st = hs_corpus_agg_finish(g, jo->args.ao.similarity, jo->args.ao.cluster_threshold,
                                  err);
    if (st == HS_OK && !(*out = hs_corpus_report_json(g, &info, NULL, 0, NULL, 0, 0)))
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
    hs_corpus_agg_free(g);
    hs_analysis_free(first);
    return st;
}

hs_status hs_analyze_json(const hs_model *m, const char *const *texts, const size_t *lens,
                          int n_texts, const char *options, char **out, hs_error *err)
{
    if (!m || !texts || n_texts < 1 || !out)
        return hs_fail(err, HS_E_ARG, "hs_analyze_json: needs a model, texts and out");
    for (int i = 0; i < n_texts; i++)
        if (!texts[i])
            return hs_fail(err, HS_E_ARG, "hs_analyze_json: text %d is NULL", i);
    *out = NULL;
    json_opts jo = {0};
    hs_analysis *a = NULL;
    hs_status st = parse_options(m, options, &jo, err);
    if (st == HS_OK && n_texts > 1 && jo.args.text_pair)
        st = hs_fail(err, HS_E_ARG, "option 'text_pair' needs a single text");
    if (st == HS_OK && n_texts > 1)
        st = analyze_corpus(m, texts, lens, n_texts, &jo, out, err);
    else if (st == HS_OK) {
        st = analyze_one(m, texts[0], lens ? lens[0] : strlen(texts[0]), &jo, 0, &a, err);
        if (st == HS_OK && !(*out = hs_report_json(a, NULL, 0, 0)))
            st = hs_fail(err, HS_E_NOMEM, "out of memory");
    }
    hs_analysis_free(a);
    free(jo.layers);
    hs_analyze_args_free(&jo.args);
    return st;
}

/* hs_map_fn over the analysed heads: map k of the report's "heads" order. */
static hs_status files_head_map(void *user, int k, float *out, hs_error *err)
{
    const hs_analysis *a = user;
    return hs_analysis_map(a, a->head_index[k], out, err);
}

/* outdir/name, or NULL when out of memory. */
static char *files_path(const char *outdir, const char *name)
{
    size_t n = strlen(outdir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", outdir, name);
    return p;
}

/* Writes what `headscope analyze -o` writes (pictures, index.html, report.json last) into
 * outdir, and/or encodes the page; the pictures are removed again when a later file fails. */
static hs_status write_files(const hs_analysis *a, const char *outdir, char **report,
                             char **page, size_t *page_len, hs_error *err)
{
    char **files = NULL, *lean = NULL, *html = NULL, *path = NULL;
    int n_files = 0, n_alloc, wrote_page = 0;
    size_t len = 0;
    hs_status st = HS_OK;
    if (outdir && (st = hs_pictures_write(a, outdir, 0, HS_PICTURES_PNG, &files, &n_files,
                                          err)) != HS_OK)
        return st;
    n_alloc = n_files;
    char **listed = realloc(files, (size_t)(n_files + 2) * sizeof *listed);
    if (!listed)
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
    else {
        files = listed;
        files[n_files] = files[n_files + 1] = NULL;
        n_alloc = n_files + 2;
    }
    if (st == HS_OK && outdir &&
        (!(files[n_files] = strdup("index.html")) || !(files[n_files + 1] = strdup("report.json"))))
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
    int n_listed = outdir ? n_files + 2 : 0;
    const char *const *names = (const char *const *)files;
    if (st == HS_OK && !(lean = hs_report_json(a, names, n_listed, HS_REPORT_LEAN)))
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
    hs_html_input hin = {.report_json = lean, .map_fn = files_head_map,
                         .map_user = (void *)(uintptr_t)a, .n_maps = a->n_heads, .n = a->n};
    if (st == HS_OK)
        st = hs_html_encode(&hin, &html, &len, err);
    if (st == HS_OK && !(*report = hs_report_json(a, names, n_listed, outdir ? HS_REPORT_PRETTY : 0)))
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
    if (st == HS_OK && outdir) { /* index.html first, report.json last */
        if (!(path = files_path(outdir, "index.html")))
            st = hs_fail(err, HS_E_NOMEM, "out of memory");
        else
            st = hs_file_write_atomic(path, html, len, err);
        wrote_page = st == HS_OK;
        free(path);
        if (st == HS_OK && !(path = files_path(outdir, "report.json")))
            st = hs_fail(err, HS_E_NOMEM, "out of memory");
        else if (st == HS_OK)
            st = hs_file_write_atomic(path, *report, strlen(*report), err);
        free(path);
    }
    for (int i = 0; outdir && st != HS_OK && files && i < n_files + wrote_page; i++)
        if (files[i] && (path = files_path(outdir, files[i]))) {
            remove(path); /* a failed call leaves no picture or page behind */
            free(path);
        }
    if (st == HS_OK && page) {
        *page = html;
        *page_len = len;
        html = NULL;
    }
    if (st != HS_OK) {
        free(*report);
        *report = NULL;
    }
    for (int i = 0; files && i < n_alloc; i++)
        free(files[i]);
    free(files);
    free(lean);
    free(html);
    return st;
}

hs_status hs_analyze_files(const hs_model *m, const char *text, size_t len, const char *options,
                           const char *outdir, char **report, char **page, size_t *page_len,
                           hs_error *err)
{
    if (!m || !text || !report || (page && !page_len) || (!outdir && !page))
        return hs_fail(err, HS_E_ARG, "hs_analyze_files: needs a model, a text, report, and "
                                      "an output folder or page");
    *report = NULL;
    if (page) {
        *page = NULL;
        *page_len = 0;
    }
    json_opts jo = {0};
    hs_analysis *a = NULL;
    hs_status st = parse_options(m, options, &jo, err);
    if (st == HS_OK)
        st = analyze_one(m, text, len, &jo, 0, &a, err);
    if (st == HS_OK)
        st = write_files(a, outdir, report, page, page_len, err);
    hs_analysis_free(a);
    free(jo.layers);
    hs_analyze_args_free(&jo.args);
    return st;
}
