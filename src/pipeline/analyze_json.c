/* From texts to report.json in one call (hs_analyze_json), for bindings such as the Python
 * package that cannot fill hs_analyze_opts: the options come as a JSON object. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "core/core.h"
#include "headscope/corpus.h"
#include "headscope/report.h"

void hs_free(void *p) { free(p); }

/* The options a JSON object may set: name, kind (b bool, i int, d double, s enum string). */
static int opt_bool(const cJSON *v, int *out)
{
    if (!cJSON_IsBool(v))
        return -1;
    *out = cJSON_IsTrue(v);
    return 0;
}

static int opt_num(const cJSON *v, double lo, double hi, double *out)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > hi)
        return -1;
    *out = v->valuedouble;
    return 0;
}

static int opt_int(const cJSON *v, double lo, double hi, int *out)
{
    double d;
    if (opt_num(v, lo, hi, &d) || d != floor(d))
        return -1;
    *out = (int)d;
    return 0;
}

typedef struct json_opts {
    hs_analyze_opts ao;
    int truncate;
    char *text_pair;       /* owned */
    unsigned char *layers; /* owned */
} json_opts;

static hs_status parse_layers(const cJSON *v, int n_layer, json_opts *jo, hs_error *err)
{
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1)
        return hs_fail(err, HS_E_ARG, "option 'layers': expected a non-empty list of layers");
    if (!(jo->layers = calloc((size_t)n_layer, 1)))
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        int l;
        if (opt_int(e, 0, n_layer - 1, &l))
            return hs_fail(err, HS_E_ARG, "option 'layers': expected layers 0..%d", n_layer - 1);
        jo->layers[l] = 1;
    }
    jo->ao.layers = jo->layers;
    return HS_OK;
}

static hs_status parse_options(const hs_model *m, const char *options, json_opts *jo,
                               hs_error *err)
{
    hs_analyze_opts_default(&jo->ao);
    jo->ao.hash_files = 0;
    if (!options || !*options)
        return HS_OK;
    cJSON *root = NULL;
    hs_status st = hs_json_parse(options, strlen(options), 4096, "options", &root, err);
    if (st != HS_OK)
        return st;
    st = HS_E_ARG;
    if (!cJSON_IsObject(root)) {
        hs_fail(err, HS_E_ARG, "options: expected a JSON object");
        goto done;
    }
    hs_analyze_opts *o = &jo->ao;
    const char *pair = NULL;
    const cJSON *v;
    cJSON_ArrayForEach(v, root) {
        const char *k = v->string;
        int bad = 0;
        double seed = 0;
        if (!strcmp(k, "ablation")) bad = opt_bool(v, &o->ablation);
        else if (!strcmp(k, "pruning")) bad = opt_bool(v, &o->pruning);
        else if (!strcmp(k, "gradient")) bad = opt_bool(v, &o->gradient);
        else if (!strcmp(k, "composition")) bad = opt_bool(v, &o->composition);
        else if (!strcmp(k, "dla")) bad = opt_bool(v, &o->dla);
        else if (!strcmp(k, "norm_based")) bad = opt_bool(v, &o->norm_based);
        else if (!strcmp(k, "word_level")) bad = opt_bool(v, &o->word_level);
        else if (!strcmp(k, "rollout")) bad = opt_bool(v, &o->rollout);
        else if (!strcmp(k, "flow_max_tokens")) bad = opt_int(v, 0, 4096, &o->flow_max_tokens);
        else if (!strcmp(k, "exclude_sinks")) bad = opt_bool(v, &o->exclude_sinks);
        else if (!strcmp(k, "probe")) bad = opt_bool(v, &o->probe);
        else if (!strcmp(k, "hash_files")) bad = opt_bool(v, &o->hash_files);
        else if (!strcmp(k, "truncate")) bad = opt_bool(v, &jo->truncate);
        else if (!strcmp(k, "cluster_threshold")) bad = opt_num(v, 0, 1e9, &o->cluster_threshold);
        else if (!strcmp(k, "prune_tol")) bad = opt_num(v, 0, 1e9, &o->prune_tol);
        else if (!strcmp(k, "prune_stop")) bad = opt_num(v, 0, 1e9, &o->prune_stop);
        else if (!strcmp(k, "prune_round")) bad = opt_num(v, 1e-9, 1, &o->prune_round);
        else if (!strcmp(k, "label_thresholds")) {
            const char *s = cJSON_GetStringValue(v);
            if (s && hs_label_thresholds_parse(s, o->label_thresholds, &o->sink_threshold, err)) {
                hs_error_prefix(err, "option 'label_thresholds'");
                goto done;
            }
            bad = !s;
        } else if (!strcmp(k, "sink_punct")) bad = opt_bool(v, &o->sink_punct);
        else if (!strcmp(k, "probe_half_len")) bad = opt_int(v, 1, 1 << 20, &o->probe_half_len);
        else if (!strcmp(k, "prune_beam")) bad = opt_int(v, 1, 1 << 20, &o->prune_beam);
        else if (!strcmp(k, "prune_max_steps")) bad = opt_int(v, 0, 1 << 20, &o->prune_max_steps);
        else if (!strcmp(k, "probe_seed")) {
            bad = opt_num(v, 0, 9007199254740992.0, &seed) || seed != floor(seed);
            o->probe_seed = (uint64_t)seed;
        } else if (!strcmp(k, "resample_seed")) {
            bad = opt_num(v, 0, 9007199254740992.0, &seed) || seed != floor(seed);
            o->resample_seed = (uint64_t)seed;
        } else if (!strcmp(k, "ablation_kind")) {
            int kind = hs_ablation_kind_parse(cJSON_GetStringValue(v));
            bad = kind < 0;
            o->ablation_kind = bad ? HS_ABLATION_ZERO : (hs_ablation_kind)kind;
        } else if (!strcmp(k, "probe_ablation_kind")) {
            const char *pk = cJSON_GetStringValue(v);
            int kind = hs_ablation_kind_parse(pk);
            o->probe_ablation = !(pk && !strcmp(pk, "none"));
            bad = kind < 0 && o->probe_ablation;
            o->probe_ablation_kind = kind < 0 ? HS_ABLATION_MEAN : (hs_ablation_kind)kind;
        } else if (!strcmp(k, "loss_span")) {
            const char *ls = cJSON_GetStringValue(v);
            if (ls && hs_loss_span_parse(ls, &o->loss_span, err)) {
                hs_error_prefix(err, "option 'loss_span'");
                goto done;
            }
            bad = !ls;
        } else if (!strcmp(k, "similarity")) {
            const char *s = cJSON_GetStringValue(v);
            bad = !s || (strcmp(s, "pearson") && strcmp(s, "js"));
            o->similarity = s && !strcmp(s, "js") ? HS_SIM_JS : HS_SIM_PEARSON;
        } else if (!strcmp(k, "prune_method")) {
            const char *s = cJSON_GetStringValue(v);
            bad = !s || (strcmp(s, "gradient") && strcmp(s, "greedy"));
            o->prune_method = s && !strcmp(s, "greedy") ? HS_PRUNE_GREEDY : HS_PRUNE_GRADIENT;
        } else if (!strcmp(k, "text_pair")) {
            bad = !cJSON_IsString(v);
            pair = v->valuestring;
        } else if (!strcmp(k, "layers")) {
            if ((st = parse_layers(v, hs_model_config_of(m)->n_layer, jo, err)) != HS_OK)
                goto done;
            st = HS_E_ARG;
        } else {
            hs_fail(err, HS_E_ARG, "unknown option '%s'", k);
            goto done;
        }
        if (bad) {
            hs_fail(err, HS_E_ARG, "option '%s' has a bad value", k);
            goto done;
        }
    }
    if (pair && !(jo->text_pair = strdup(pair))) {
        hs_fail(err, HS_E_NOMEM, "out of memory");
        goto done;
    }
    st = HS_OK;
done:
    cJSON_Delete(root);
    return st;
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
    hs_status st = encode(m, text, len, jo->text_pair, jo->truncate || corpus, &enc, &truncated,
                          err);
    if (st == HS_OK) {
        hs_analyze_input in = {.ids = enc.ids, .type_ids = enc.type_ids, .n = (int)enc.n,
                               .tokens = (const char *const *)enc.tokens, .text = text,
                               .text_len = len, .text_pair = jo->text_pair,
                               .truncated = truncated};
        st = hs_analyze_run(m, &in, &jo->ao, out, err);
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
                           .ablation = jo->ao.ablation, .n_records = n_texts,
                           .shard = 1, .n_shards = 1, .n_selected = n_texts};
    hs_status st = HS_OK;
    jo->ao.pruning = 0;
    jo->ao.diversity = 0;
    jo->ao.composition = 0; /* a property of the weights: the single-text report has it */
    jo->ao.dla = 0;         /* per text and position: the single-text report has it */
    jo->ao.norm_based = 0;
    jo->ao.word_level = 0;
    jo->ao.rollout = 0;     /* a per-text n x n matrix: not aggregated */
    for (int i = 0; i < n_texts && st == HS_OK; i++) {
        size_t len = lens ? lens[i] : strlen(texts[i]);
        jo->ao.probe = first == NULL;
        jo->ao.hash_files = first == NULL && jo->ao.hash_files;
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
        st = hs_corpus_agg_finish(g, jo->ao.similarity, jo->ao.cluster_threshold, err);
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
    if (st == HS_OK && n_texts > 1 && jo.text_pair)
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
    free(jo.text_pair);
    return st;
}
