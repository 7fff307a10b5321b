/* The analyze options as one table (options.h), and the two routes that read it: a
 * command-line value (hs_option_set_text) and a JSON object (hs_analyze_args_from_json). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "core/core.h"
#include "pipeline/options.h"

_Static_assert(sizeof(hs_sim_method) == sizeof(int) && sizeof(hs_prune_method) == sizeof(int) &&
                   sizeof(hs_ablation_kind) == sizeof(int),
               "enum options are stored as int");

#define FIELD(f) .offset = offsetof(hs_analyze_args, f), .size = sizeof(((hs_analyze_args *)0)->f)
#define AO(f) FIELD(ao.f)
#define AUX(f) .aux = offsetof(hs_analyze_args, f), .aux_size = sizeof(((hs_analyze_args *)0)->f)
#define SEED_MAX 2147483647.0 /* 2^31 - 1 */

static hs_status parse_label_thresholds(const char *s, hs_analyze_args *a, hs_error *err)
{
    return hs_label_thresholds_parse(s, a->ao.label_thresholds, &a->ao.sink_threshold, err);
}

static hs_status parse_loss_span(const char *s, hs_analyze_args *a, hs_error *err)
{
    return hs_loss_span_parse(s, &a->ao.loss_span, err);
}

static const char *const sim_names[] = {"pearson", "js", NULL};
static const int sim_values[] = {HS_SIM_PEARSON, HS_SIM_JS};
static const char *const prune_names[] = {"gradient", "greedy", NULL};
static const int prune_values[] = {HS_PRUNE_GRADIENT, HS_PRUNE_GREEDY};
static const char *const abl_names[] = {"zero", "mean", "resample", NULL};
static const int abl_values[] = {HS_ABLATION_ZERO, HS_ABLATION_MEAN, HS_ABLATION_RESAMPLE};
static const char *const pabl_names[] = {"mean", "zero", "resample", "none", NULL};
static const int pabl_values[] = {HS_ABLATION_MEAN, HS_ABLATION_ZERO, HS_ABLATION_RESAMPLE, -1};

/* In the order of the help text. */
const hs_option hs_options[] = {
    {.cli = "text-pair", .json = "text_pair", .type = HS_OPT_TEXT, FIELD(text_pair),
     .metavar = "TEXT2", .valid = "a text (one text only)",
     .help = "second segment (BERT, RoBERTa, Llama: a pair template)",
     .example = "a second segment", .example_json = "\"a second segment\""},
    {.cli = "truncate", .json = "truncate", .type = HS_OPT_BOOL, FIELD(truncate), .def = 0,
     .cli_value = 1, .help = "keep the first n_ctx tokens of a longer text"},
    {.cli = "layers", .json = "layers", .type = HS_OPT_LAYERS, FIELD(layers), .metavar = "SPEC",
     .valid = "a list of layer numbers below 2^20 (0,2-3 on the command line)",
     .def_text = "all", .help = "analyse only these layers, e.g. 0,2-3",
     .example = "0,2-3", .example_json = "[0, 2, 3]"},
    {.cli = "no-ablation", .json = "ablation", .type = HS_OPT_BOOL, AO(ablation), .def = 1,
     .help = "skip the ablation sweep and the pruning curve"},
    {.cli = "ablation", .json = "ablation_kind", .type = HS_OPT_ENUM, AO(ablation_kind),
     .names = abl_names, .values = abl_values, .def = HS_ABLATION_ZERO, .metavar = "KIND",
     .help = "what an ablated head's output becomes: zero, mean (its mean over the text's "
             "positions; with --corpus, over every token of the corpus) or resample (its "
             "output on the text's tokens shuffled, specials kept in place)"},
    {.cli = "resample-seed", .json = "resample_seed", .type = HS_OPT_SEED, AO(resample_seed),
     .lo = 0, .hi = SEED_MAX, .def = 1, .metavar = "N",
     .help = "the shuffle's seed for --ablation resample"},
    {.cli = "loss-span", .json = "loss_span", .type = HS_OPT_SPEC, AO(loss_span),
     .parse = parse_loss_span, .metavar = "SPAN", .valid = "all, repeated, A:B or A:",
     .def_text = "all", .example = "2:9", .example_json = "\"2:9\"",
     .help = "the positions whose next-token losses count in the loss, ablation, gradient "
             "and pruning: all, repeated (the tokens seen before, where induction can act) "
             "or A:B"},
    {.cli = "probe-ablation", .json = "probe_ablation_kind", .type = HS_OPT_ENUM,
     AO(probe_ablation_kind), AUX(ao.probe_ablation), .names = pabl_names,
     .values = pabl_values, .def = HS_ABLATION_MEAN, .metavar = "KIND",
     .help = "each head's ablation cost on the probe's second half (causal models): mean, "
             "zero, resample or none"},
    {.cli = "no-pruning", .json = "pruning", .type = HS_OPT_BOOL, AO(pruning), .def = 1,
     .help = "skip the pruning curve"},
    {.cli = "no-gradient", .json = "gradient", .type = HS_OPT_BOOL, AO(gradient), .def = 1,
     .help = "skip gradient importance (Michel et al. 2019)"},
    {.cli = "no-composition", .json = "composition", .type = HS_OPT_BOOL, AO(composition),
     .def = 1, .help = "skip the composition scores from the weights (decoders)"},
    {.cli = "no-dla", .json = "dla", .type = HS_OPT_BOOL, AO(dla), .def = 1,
     .help = "skip direct logit attribution (decoders)"},
    {.cli = "no-norm-based", .json = "norm_based", .type = HS_OPT_BOOL, AO(norm_based),
     .def = 1, .help = "skip the norm-based attention summaries (Kobayashi et al.)"},
    {.cli = "word-level", .json = "word_level", .type = HS_OPT_BOOL, AO(word_level), .def = 0,
     .cli_value = 1,
     .help = "also word-level maps (subword keys summed, queries averaged; Clark et al.) in "
             "the report and heads/L{l}_H{h}.words.png"},
    {.cli = "no-rollout", .json = "rollout", .type = HS_OPT_BOOL, AO(rollout), .def = 1,
     .help = "skip attention rollout and flow (Abnar & Zuidema 2020)"},
    {.cli = "flow-max-tokens", .json = "flow_max_tokens", .type = HS_OPT_INT,
     AO(flow_max_tokens), .lo = 0, .hi = 4096, .def = 64, .metavar = "N",
     .help = "attention flow only up to N tokens (0: never)"},
    {.cli = "similarity", .json = "similarity", .type = HS_OPT_ENUM, AO(similarity),
     .names = sim_names, .values = sim_values, .def = HS_SIM_PEARSON, .metavar = "METHOD",
     .help = "pearson or js (Jensen-Shannon, Clark et al.)"},
    {.cli = "cluster-threshold", .json = "cluster_threshold", .type = HS_OPT_NUM,
     AO(cluster_threshold), .lo = 0, .hi = 2, .def = 0.5, .metavar = "X",
     .help = "cut the dendrogram at distance X"},
    {.cli = "exclude-sinks", .json = "exclude_sinks", .type = HS_OPT_BOOL, AO(exclude_sinks),
     .def = 0, .cli_value = 1, .help = "leave the sinks out of entropy (detectors report both)"},
    {.cli = "sink-punct", .json = "sink_punct", .type = HS_OPT_BOOL, AO(sink_punct), .def = 0,
     .cli_value = 1, .help = "punctuation tokens are sinks too (position 0, [CLS], [SEP])"},
    {.cli = "label-thresholds", .json = "label_thresholds", .type = HS_OPT_SPEC,
     AO(label_thresholds), AUX(ao.sink_threshold), .parse = parse_label_thresholds,
     .metavar = "SPEC", .valid = "X or TYPE=X,... with each X in [0, 1]",
     .def_text = "the types' own", .example = "self=0.6,induction=0.25,sink=0.7",
     .example_json = "\"self=0.6,induction=0.25,sink=0.7\"",
     .help = "X for every head type, or TYPE=X,..."},
    {.cli = "probe-seed", .json = "probe_seed", .type = HS_OPT_SEED, AO(probe_seed), .lo = 0,
     .hi = SEED_MAX, .def = 1, .metavar = "N", .help = "induction probe seed"},
    {.cli = "probe-len", .json = "probe_half_len", .type = HS_OPT_INT, AO(probe_half_len),
     .lo = 1, .hi = 4096, .def = 32, .metavar = "N",
     .help = "tokens in each half of the probe (at most what the context holds)"},
    {.cli = NULL, .json = "probe", .type = HS_OPT_BOOL, AO(probe), .def = 1,
     .help = "run the induction probe (false: the probe's scores are NaN)"},
    {.cli = "prune-tol", .json = "prune_tol", .type = HS_OPT_NUM, AO(prune_tol), .lo = 0,
     .hi = 1e6, .def = 0.01, .metavar = "X", .help = "candidate when |ablation delta| < X"},
    {.cli = "prune-stop", .json = "prune_stop", .type = HS_OPT_NUM, AO(prune_stop), .lo = 0,
     .hi = 1e6, .def = 0.1, .metavar = "X",
     .help = "stop the curve past loss*(1+X) (repr: loss+X)"},
    {.cli = "prune-method", .json = "prune_method", .type = HS_OPT_ENUM, AO(prune_method),
     .names = prune_names, .values = prune_values, .def = HS_PRUNE_GRADIENT, .metavar = "M",
     .help = "gradient (Michel et al. 2019, rounds by gradient importance) or greedy (lazy "
             "greedy on measured losses)"},
    {.cli = "prune-round", .json = "prune_round", .type = HS_OPT_NUM, AO(prune_round), .lo = 0,
     .lo_open = 1, .hi = 1, .def = 0.1, .metavar = "X",
     .help = "gradient: heads per round as a fraction of the heads"},
    {.cli = "prune-beam", .json = "prune_beam", .type = HS_OPT_INT, AO(prune_beam), .lo = 1,
     .hi = 1 << 20, .def = 8, .metavar = "N", .help = "greedy: heads re-evaluated per step"},
    {.cli = "prune-max-steps", .json = "prune_max_steps", .type = HS_OPT_INT,
     AO(prune_max_steps), .lo = 0, .hi = 1 << 20, .def = 64, .metavar = "N",
     .help = "at most N removals"},
    {.cli = "no-hash", .json = "hash_files", .type = HS_OPT_BOOL, AO(hash_files), .def = 1,
     .json_off = 1,
     .help = "leave the model files' SHA-256 digests out of the report (the JSON route "
             "leaves them out unless hash_files is true)"},
};
const int hs_option_count = (int)(sizeof hs_options / sizeof hs_options[0]);

void hs_analyze_args_default(hs_analyze_args *a)
{
    *a = (hs_analyze_args){0};
    hs_analyze_opts_default(&a->ao);
}

void hs_analyze_args_free(hs_analyze_args *a)
{
    free(a->own_pair);
    free(a->own_layers);
    a->own_pair = a->own_layers = NULL;
}

int hs_option_routes(const hs_option *o)
{
    return (o->cli ? HS_ROUTE_CLI : 0) | (o->json ? HS_ROUTE_JSON : 0);
}

const hs_option *hs_option_by_cli(const char *name)
{
    for (int i = 0; i < hs_option_count; i++)
        if (hs_options[i].cli && !strcmp(hs_options[i].cli, name))
            return &hs_options[i];
    return NULL;
}

const hs_option *hs_option_by_json(const char *key)
{
    for (int i = 0; i < hs_option_count; i++)
        if (hs_options[i].json && !strcmp(hs_options[i].json, key))
            return &hs_options[i];
    return NULL;
}

static void *field(hs_analyze_args *a, size_t off)
{
    return (char *)a + off;
}

/* A number already read: the range check and the store, one for both routes. text is the
 * value as the user wrote it, for the message. */
static hs_status set_number(const hs_option *o, double v, const char *text, hs_analyze_args *a,
                            hs_error *err)
{
    int whole = o->type != HS_OPT_NUM;
    if (!isfinite(v) || v < o->lo || v > o->hi || (o->lo_open && v <= o->lo) ||
        (whole && v != floor(v))) {
        char r[96];
        return hs_fail(err, HS_E_ARG, "'%s' is not %s", text, hs_option_range(o, r, sizeof r));
    }
    void *p = field(a, o->offset);
    if (o->type == HS_OPT_NUM)
        *(double *)p = v;
    else if (o->type == HS_OPT_SEED)
        *(uint64_t *)p = (uint64_t)v;
    else
        *(int *)p = (int)v;
    return HS_OK;
}

static hs_status set_name(const hs_option *o, const char *s, hs_analyze_args *a, hs_error *err)
{
    for (int i = 0; o->names[i]; i++) {
        if (strcmp(s, o->names[i]))
            continue;
        if (o->aux_size)
            *(int *)field(a, o->aux) = o->values[i] >= 0;
        if (o->values[i] >= 0)
            *(int *)field(a, o->offset) = o->values[i];
        return HS_OK;
    }
    char r[96];
    return hs_fail(err, HS_E_ARG, "'%s' is not %s", s, hs_option_range(o, r, sizeof r));
}

hs_status hs_option_set_text(const hs_option *o, const char *s, hs_analyze_args *a,
                             hs_error *err)
{
    char *end;
    double v;
    switch (o->type) {
    case HS_OPT_BOOL:
        *(int *)field(a, o->offset) = o->cli_value;
        return HS_OK;
    case HS_OPT_INT:
    case HS_OPT_SEED: {
        errno = 0;
        long long n = strtoll(s, &end, 10);
        v = end == s || *end || errno ? NAN : (double)n;
        return set_number(o, v, s, a, err);
    }
    case HS_OPT_NUM:
        errno = 0;
        v = strtod(s, &end);
        return set_number(o, end == s || *end || errno ? NAN : v, s, a, err);
    case HS_OPT_ENUM:
        return set_name(o, s, a, err);
    case HS_OPT_TEXT:
        *(const char **)field(a, o->offset) = s;
        return HS_OK;
    case HS_OPT_LAYERS:
        if (hs_layers_check(s)) {
            char r[96];
            return hs_fail(err, HS_E_ARG, "'%s' is not %s", s, hs_option_range(o, r, sizeof r));
        }
        *(const char **)field(a, o->offset) = s;
        return HS_OK;
    case HS_OPT_SPEC:
        return o->parse(s, a, err);
    }
    return hs_fail(err, HS_E_ARG, "option type %d", (int)o->type);
}

const char *hs_option_cli_message(const hs_option *o, const hs_error *err, char *buf,
                                  size_t cap)
{
    snprintf(buf, cap, "--%s%s%s", o->cli, o->type == HS_OPT_SPEC ? ": " : " ", err->msg);
    return buf;
}

/* A list of layer numbers as "0,2,3" into a->own_layers. */
static hs_status json_layers(const hs_option *o, const cJSON *v, hs_analyze_args *a,
                             hs_error *err)
{
    int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
    if (n < 1)
        return hs_fail(err, HS_E_ARG, "option '%s': expected a non-empty list of layers",
                       o->json);
    char *s = malloc((size_t)n * 9 + 1), *p = s;
    if (!s)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    free(a->own_layers);
    a->own_layers = s;
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!(d >= 0 && d < HS_LAYERS_MAX && d == floor(d)))
            return hs_fail(err, HS_E_ARG, "option '%s': expected a list of layer numbers",
                           o->json);
        p += sprintf(p, "%s%d", p == s ? "" : ",", (int)d);
    }
    *(const char **)field(a, o->offset) = s;
    return HS_OK;
}

static hs_status set_json(const hs_option *o, const cJSON *v, hs_analyze_args *a,
                          hs_error *err)
{
    const char *s = cJSON_GetStringValue(v);
    hs_status st = HS_OK;
    int bad = 0;
    switch (o->type) {
    case HS_OPT_BOOL:
        bad = !cJSON_IsBool(v);
        if (!bad)
            *(int *)field(a, o->offset) = cJSON_IsTrue(v);
        break;
    case HS_OPT_INT:
    case HS_OPT_SEED:
    case HS_OPT_NUM: {
        bad = !cJSON_IsNumber(v) ||
              (o->type != HS_OPT_NUM && v->valuedouble != floor(v->valuedouble));
        if (bad)
            break;
        char text[32];
        hs_option_number_text(v->valuedouble, text, sizeof text);
        st = set_number(o, v->valuedouble, text, a, err);
        break;
    }
    case HS_OPT_ENUM:
        bad = !s || set_name(o, s, a, NULL) != HS_OK;
        break;
    case HS_OPT_TEXT:
        bad = !s;
        if (!bad) {
            free(a->own_pair);
            if (!(a->own_pair = strdup(s)))
                return hs_fail(err, HS_E_NOMEM, "out of memory");
            *(const char **)field(a, o->offset) = a->own_pair;
        }
        break;
    case HS_OPT_LAYERS:
        return json_layers(o, v, a, err);
    case HS_OPT_SPEC:
        bad = !s;
        if (!bad)
            st = o->parse(s, a, err);
        break;
    }
    if (bad)
        return hs_fail(err, HS_E_ARG, "option '%s' has a bad value", o->json);
    if (st != HS_OK)
        hs_error_prefix(err, "option '%s'", o->json);
    return st;
}

hs_status hs_analyze_args_from_json(const char *options, hs_analyze_args *a, hs_error *err)
{
    hs_analyze_args_default(a);
    for (int i = 0; i < hs_option_count; i++)
        if (hs_options[i].json_off)
            *(int *)field(a, hs_options[i].offset) = 0;
    if (!options || !*options)
        return HS_OK;
    cJSON *root = NULL;
    hs_status st = hs_json_parse(options, strlen(options), 4096, "options", &root, err);
    if (st != HS_OK)
        return st;
    if (!cJSON_IsObject(root))
        st = hs_fail(err, HS_E_ARG, "options: expected a JSON object");
    const cJSON *v;
    cJSON_ArrayForEach(v, root) {
        if (st != HS_OK)
            break;
        const hs_option *o = hs_option_by_json(v->string);
        st = o ? set_json(o, v, a, err)
               : hs_fail(err, HS_E_ARG, "unknown option '%s'", v->string);
    }
    cJSON_Delete(root);
    return st;
}

/* One number of a layer list at *p, below HS_LAYERS_MAX; -1 when none. */
static long layer_number(const char **p)
{
    const char *s = *p;
    long v = 0;
    if (*s < '0' || *s > '9')
        return -1;
    for (; *s >= '0' && *s <= '9'; s++)
        if ((v = v * 10 + (*s - '0')) >= HS_LAYERS_MAX)
            return -1;
    *p = s;
    return v;
}

int hs_layers_mark(const char *spec, int n_layer, unsigned char *on, int *bad_layer)
{
    const char *p = spec;
    *bad_layer = -1;
    if (!*p)
        return -1;
    while (*p) {
        long a = layer_number(&p), b = a;
        if (a < 0)
            return -1;
        if (*p == '-') {
            p++;
            if ((b = layer_number(&p)) < a)
                return -1;
        }
        if (*p == ',' && p[1])
            p++;
        else if (*p)
            return -1;
        for (long l = a; l <= b; l++) {
            if (l >= n_layer) {
                if (*bad_layer < 0)
                    *bad_layer = (int)l;
                break;
            }
            if (on)
                on[l] = 1;
        }
    }
    return 0;
}

int hs_layers_check(const char *spec)
{
    int bad;
    return hs_layers_mark(spec, 0, NULL, &bad);
}
