/* Partial aggregates of a corpus run (partial.json, schema headscope.partial/1): the whole
 * state of an hs_corpus_agg written exactly (every double printed so that it reads back to
 * the same bits), read back with every field checked, and merged (Chan et al.'s pairwise
 * update). docs/report-schema.md#partial describes every field. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "core/core.h"
#include "headscope/corpus.h"
#include "io/io_internal.h"

/* ---- checking and merging aggregates ----------------------------------------------------- */

hs_status hs_corpus_agg_check(const hs_corpus_agg *a, const hs_corpus_agg *b, hs_error *err)
{
    const char *what = NULL;
    if (strcmp(a->model_json, b->model_json))
        what = "model (its description or its files' SHA-256 digests)";
    else if (a->n_heads != b->n_heads || a->n_head != b->n_head ||
             memcmp(a->head_index, b->head_index, (size_t)a->n_heads * sizeof *a->head_index))
        what = "set of heads (--layers)";
    else if (a->exclude_sinks != b->exclude_sinks)
        what = "--exclude-sinks setting";
    else if (a->ablation != b->ablation)
        what = "--corpus-ablation setting";
    else if (a->ablation_kind != b->ablation_kind)
        what = "--ablation setting";
    else if (a->gradient != b->gradient)
        what = "--no-gradient setting";
    else if (a->sim_method != b->sim_method)
        what = "--similarity";
    else if (a->cluster_threshold != b->cluster_threshold)
        what = "--cluster-threshold";
    else if (memcmp(a->label_thresholds, b->label_thresholds, sizeof a->label_thresholds) ||
             a->sink_threshold != b->sink_threshold)
        what = "label thresholds (--label-thresholds)";
    else if (a->probe_seed != b->probe_seed || a->probe_len != b->probe_len ||
             memcmp(a->probe_ids, b->probe_ids, (size_t)a->probe_len * sizeof *a->probe_ids))
        what = "induction probe (--probe-seed, --probe-len)";
    else if (a->family != b->family || a->loss_kind != b->loss_kind)
        what = "loss";
    if (what)
        return hs_fail(err, HS_E_INPUT, "made with a different %s", what);
    return HS_OK;
}

hs_status hs_corpus_agg_merge(hs_corpus_agg *a, const hs_corpus_agg *b, hs_error *err)
{
    hs_status st = hs_corpus_agg_check(a, b, err);
    if (st)
        return st;
    size_t nh = (size_t)a->n_heads;
    for (size_t i = 0; i < nh * HS_CQ_COUNT; i++)
        hs_stat_merge(&a->stats[i], &b->stats[i]);
    hs_stat_merge(&a->loss, &b->loss);
    for (size_t i = 0; i < nh * nh; i++)
        a->sim_sum[i] += b->sim_sum[i];
    if (b->n_texts > 0) {
        if (a->n_texts == 0 || b->tokens_min < a->tokens_min)
            a->tokens_min = b->tokens_min;
        if (b->tokens_max > a->tokens_max)
            a->tokens_max = b->tokens_max;
    }
    a->n_sim += b->n_sim;
    a->n_texts += b->n_texts;
    a->tokens += b->tokens;
    a->truncated += b->truncated;
    return HS_OK;
}

/* ---- writing ------------------------------------------------------------------------------ */

/* A double that reads back to the same bits (cJSON's own printing keeps 15 digits when they
 * come within an epsilon); null for NaN and infinities. */
static cJSON *exact(double v)
{
    char buf[40];
    if (!isfinite(v))
        return cJSON_CreateNull();
    snprintf(buf, sizeof buf, "%.17g", v);
    return cJSON_CreateRaw(buf);
}

static cJSON *stat_json(const hs_stat *s)
{
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, cJSON_CreateNumber((double)s->n));
    cJSON_AddItemToArray(a, exact(s->mean));
    cJSON_AddItemToArray(a, exact(s->m2));
    cJSON_AddItemToArray(a, exact(s->wsum));
    cJSON_AddItemToArray(a, exact(s->wmean));
    return a;
}

static cJSON *skips_json(const long *k)
{
    cJSON *o = cJSON_CreateObject();
    for (int s = 1; s < HS_SKIP_COUNT; s++)
        cJSON_AddNumberToObject(o, hs_corpus_skip_name((hs_corpus_skip)s), (double)k[s]);
    return o;
}

static cJSON *doubles_json(const double *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, exact(v[i]));
    return a;
}

static cJSON *agg_json(const hs_corpus_agg *g)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *mo = cJSON_Parse(g->model_json);
    if (!o || !mo) {
        cJSON_Delete(o);
        cJSON_Delete(mo);
        return NULL;
    }
    cJSON_AddItemToObject(o, "model", mo);
    cJSON *op = cJSON_AddObjectToObject(o, "options");
    cJSON_AddNumberToObject(op, "n_head", g->n_head);
    cJSON_AddItemToObject(op, "head_index", hs_json_ints(g->head_index, g->n_heads));
    cJSON_AddStringToObject(op, "family", hs_family_name((hs_family)g->family));
    cJSON_AddStringToObject(op, "loss_kind", hs_loss_kind_name((hs_loss_kind)g->loss_kind));
    cJSON_AddBoolToObject(op, "exclude_sinks", g->exclude_sinks);
    cJSON_AddBoolToObject(op, "ablation", g->ablation);
    cJSON_AddStringToObject(op, "ablation_kind", hs_ablation_kind_name((hs_ablation_kind)g->ablation_kind));
    cJSON_AddBoolToObject(op, "gradient", g->gradient);
    cJSON_AddStringToObject(op, "similarity", g->sim_method == HS_SIM_JS ? "js" : "pearson");
    cJSON *lt = cJSON_AddArrayToObject(op, "label_thresholds");
    for (int k = 0; k < HS_LABEL_COUNT; k++)
        cJSON_AddItemToArray(lt, exact(g->label_thresholds[k]));
    cJSON_AddItemToObject(op, "sink_threshold", exact(g->sink_threshold));
    cJSON_AddItemToObject(op, "cluster_threshold", exact(g->cluster_threshold));
    cJSON_AddNumberToObject(op, "probe_seed", (double)g->probe_seed);
    cJSON *pr = cJSON_AddObjectToObject(o, "probe");
    cJSON_AddItemToObject(pr, "ids", hs_json_ints(g->probe_ids, g->probe_len));
    cJSON_AddItemToObject(pr, "duplicate_token", doubles_json(g->probe_dup, g->n_heads));
    cJSON_AddItemToObject(pr, "induction", doubles_json(g->probe_ind, g->n_heads));
    cJSON_AddNumberToObject(o, "n_texts", (double)g->n_texts);
    cJSON_AddNumberToObject(o, "tokens", (double)g->tokens);
    cJSON_AddNumberToObject(o, "tokens_min", g->tokens_min);
    cJSON_AddNumberToObject(o, "tokens_max", g->tokens_max);
    cJSON_AddNumberToObject(o, "truncated", (double)g->truncated);
    cJSON_AddNumberToObject(o, "n_sim", (double)g->n_sim);
    cJSON_AddItemToObject(o, "loss", stat_json(&g->loss));
    cJSON *st = cJSON_AddObjectToObject(o, "stats");
    for (int q = 0; q < HS_CQ_COUNT; q++) {
        cJSON *a = cJSON_AddArrayToObject(st, hs_corpus_quantity_name(q));
        for (int k = 0; k < g->n_heads; k++)
            cJSON_AddItemToArray(a, stat_json(&g->stats[(size_t)k * HS_CQ_COUNT + (size_t)q]));
    }
    cJSON *sm = cJSON_AddArrayToObject(o, "sim_sum");
    for (int i = 0; i < g->n_heads; i++)
        cJSON_AddItemToArray(sm, doubles_json(g->sim_sum + (size_t)i * (size_t)g->n_heads, g->n_heads));
    return o;
}

char *hs_corpus_partial_json(const hs_corpus_agg *g, const hs_corpus_info *info,
                             const hs_corpus_checkpoint *cp)
{
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return NULL;
    cJSON_AddStringToObject(r, "schema", HS_PARTIAL_SCHEMA);
    cJSON_AddStringToObject(r, "version", hs_version());
    cJSON_AddBoolToObject(r, "complete", cp == NULL);
    if (cp) {
        cJSON *c = cJSON_AddObjectToObject(r, "checkpoint");
        cJSON_AddNumberToObject(c, "position", (double)cp->position);
        cJSON_AddNumberToObject(c, "texts_bytes", (double)cp->texts_bytes);
        cJSON_AddStringToObject(c, "texts_tmp", cp->texts_tmp);
    } else {
        cJSON_AddNullToObject(r, "checkpoint");
    }
    cJSON *sh = cJSON_AddObjectToObject(r, "shard");
    cJSON_AddNumberToObject(sh, "index", info->shard);
    cJSON_AddNumberToObject(sh, "count", info->n_shards);
    cJSON *src = cJSON_AddObjectToObject(r, "source");
    cJSON_AddStringToObject(src, "path", info->path ? info->path : "-");
    cJSON_AddStringToObject(src, "format", hs_corpus_format_name(info->format));
    cJSON_AddNumberToObject(src, "max_texts", (double)info->max_texts);
    cJSON_AddNumberToObject(src, "max_tokens", info->max_tokens);
    cJSON_AddBoolToObject(src, "skip_long", info->skip_long);
    cJSON_AddNumberToObject(src, "sample", (double)info->sample);
    cJSON_AddNumberToObject(src, "seed", (double)info->seed);
    cJSON_AddBoolToObject(src, "corpus_ablation", info->ablation);
    cJSON_AddStringToObject(src, "digest", info->digest);
    cJSON_AddNumberToObject(src, "n_records", (double)info->n_records);
    cJSON_AddNumberToObject(src, "n_empty", (double)info->n_empty);
    cJSON_AddNumberToObject(src, "n_selected", (double)info->n_selected);
    cJSON_AddItemToObject(src, "skipped", skips_json(info->skipped));
    cJSON_AddItemToObject(r, "skipped_text", skips_json(info->skipped_text));
    cJSON_AddItemToObject(r, "seconds", exact(info->seconds));
    cJSON *ag = g ? agg_json(g) : cJSON_CreateNull();
    if (!ag) {
        cJSON_Delete(r);
        return NULL;
    }
    cJSON_AddItemToObject(r, "aggregate", ag);
    char *s = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    return s;
}

/* ---- reading ------------------------------------------------------------------------------ */

typedef struct rd {
    hs_error *err;
    hs_status st;
} rd;

static const cJSON *need(rd *r, const cJSON *o, const char *key, int type)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (r->st)
        return NULL;
    if (!v || !(v->type & type)) {
        r->st = hs_fail(r->err, HS_E_INPUT, "partial: '%s' is missing or not %s", key,
                        type == cJSON_Number ? "a number" : type == cJSON_String ? "a string"
                        : type == cJSON_Array ? "an array" : type == cJSON_Object ? "an object"
                        : "a boolean");
        return NULL;
    }
    return v;
}

/* A number field that must be an integer in [lo, hi]. */
static long get_long(rd *r, const cJSON *o, const char *key, long lo, long hi)
{
    const cJSON *v = need(r, o, key, cJSON_Number);
    if (!v)
        return 0;
    double d = v->valuedouble;
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d)) {
        r->st = hs_fail(r->err, HS_E_INPUT, "partial: '%s' is %g, not an integer in [%ld, %ld]",
                        key, d, lo, hi);
        return 0;
    }
    return (long)d;
}

static double get_num(rd *r, const cJSON *o, const char *key)
{
    const cJSON *v = need(r, o, key, cJSON_Number | cJSON_NULL);
    return v && cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static int get_bool(rd *r, const cJSON *o, const char *key)
{
    const cJSON *v = need(r, o, key, cJSON_True | cJSON_False);
    return v && cJSON_IsTrue(v);
}

static const char *get_str(rd *r, const cJSON *o, const char *key)
{
    const cJSON *v = need(r, o, key, cJSON_String);
    return v ? v->valuestring : "";
}

/* An array of exactly n numbers (null = NaN) into out (as doubles or int32). */
static void get_array(rd *r, const cJSON *o, const char *key, int n, double *d, int32_t *i)
{
    const cJSON *a = need(r, o, key, cJSON_Array);
    if (!a)
        return;
    if (cJSON_GetArraySize(a) != n) {
        r->st = hs_fail(r->err, HS_E_INPUT, "partial: '%s' has %d values, expected %d", key,
                        cJSON_GetArraySize(a), n);
        return;
    }
    int k = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, a) {
        if (!cJSON_IsNumber(v) && !(d && cJSON_IsNull(v))) {
            r->st = hs_fail(r->err, HS_E_INPUT, "partial: '%s'[%d] is not a number", key, k);
            return;
        }
        double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        if (i && (x != floor(x) || fabs(x) > 2147483647.0)) {
            r->st = hs_fail(r->err, HS_E_INPUT, "partial: '%s'[%d] is not an int32", key, k);
            return;
        }
        if (d)
            d[k] = x;
        else
            i[k] = (int32_t)x;
        k++;
    }
}

static void get_skips(rd *r, const cJSON *o, const char *key, long *k)
{
    const cJSON *s = need(r, o, key, cJSON_Object);
    for (int i = 1; s && i < HS_SKIP_COUNT; i++)
        k[i] = get_long(r, s, hs_corpus_skip_name((hs_corpus_skip)i), 0, 1L << 50);
}

/* [n, mean, m2, wsum, wmean] */
static void get_stat(rd *r, const cJSON *v, const char *key, hs_stat *s)
{
    double x[5];
    if (r->st)
        return;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 5) {
        r->st = hs_fail(r->err, HS_E_INPUT, "partial: a statistic of '%s' is not [n, mean, m2, wsum, wmean]", key);
        return;
    }
    int k = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, v)
        x[k++] = cJSON_IsNumber(e) ? e->valuedouble : NAN;
    /* A number too large for a double reads as infinity and would be written back as
       null (NaN): refuse it here, so what is read writes back the same. */
    for (k = 0; k < 5; k++)
        if (isinf(x[k])) {
            r->st = hs_fail(r->err, HS_E_INPUT, "partial: a statistic of '%s' is out of range", key);
            return;
        }
    if (!(x[0] >= 0 && x[0] <= 1e15 && x[0] == floor(x[0])) || !(x[2] >= 0 || x[0] == 0) ||
        !(x[3] >= 0)) {
        r->st = hs_fail(r->err, HS_E_INPUT, "partial: a statistic of '%s' has a bad count, M2 or weight", key);
        return;
    }
    *s = (hs_stat){(long)x[0], x[1], x[2], x[3], x[4]};
}

static int parse_enum(const char *s, const char *(*name)(int), int lo, int hi)
{
    for (int v = lo; v <= hi; v++)
        if (!strcmp(s, name(v)))
            return v;
    return -1;
}

static const char *loss_name(int v) { return hs_loss_kind_name((hs_loss_kind)v); }

static hs_corpus_agg *parse_agg(rd *r, const cJSON *o)
{
    const cJSON *op = need(r, o, "options", cJSON_Object);
    const cJSON *pr = need(r, o, "probe", cJSON_Object);
    const cJSON *hi = op ? need(r, op, "head_index", cJSON_Array) : NULL;
    const cJSON *ids = pr ? need(r, pr, "ids", cJSON_Array) : NULL;
    const cJSON *mo = need(r, o, "model", cJSON_Object);
    if (r->st)
        return NULL;
    hs_corpus_agg *g = NULL;
    /* the sizes against the model the partial names, before anything is allocated for them */
    int nh = cJSON_GetArraySize(hi), np = cJSON_GetArraySize(ids);
    long n_layer = get_long(r, mo, "n_layer", 1, 1 << 16), n_head = get_long(r, op, "n_head", 1, 1 << 16);
    long heads = n_layer * n_head;
    if (!r->st && (nh < 1 || nh > heads || nh > 1 << 16))
        r->st = hs_fail(r->err, HS_E_INPUT, "partial: 'head_index' lists %d heads, not 1 to %ld "
                        "(the model's %ld layers x %ld heads, at most 65536)", nh, heads < 1 << 16 ? heads : 1 << 16,
                        n_layer, n_head);
    if (!r->st && np > 1 << 20)
        r->st = hs_fail(r->err, HS_E_INPUT, "partial: the probe's 'ids' are %d tokens, more than 1048576", np);
    if (r->st || (r->st = hs_corpus_agg_alloc(nh, np, &g, r->err)))
        return NULL;
    g->n_head = (int)n_head;
    get_array(r, op, "head_index", nh, NULL, g->head_index);
    for (int k = 0; !r->st && k < nh; k++)
        if (g->head_index[k] < 0 || g->head_index[k] >= heads ||
            (k && g->head_index[k] <= g->head_index[k - 1]))
            r->st = hs_fail(r->err, HS_E_INPUT, "partial: 'head_index' is not increasing in [0, %ld)", heads);
    const char *fam = get_str(r, op, "family");
    g->family = fam && hs_arch_find(fam) ? (int)hs_arch_find(fam)->family : -1;
    g->loss_kind = parse_enum(get_str(r, op, "loss_kind"), loss_name, HS_LOSS_LM, HS_LOSS_REPR);
    if (!r->st && (g->family < 0 || g->loss_kind < 0))
        r->st = hs_fail(r->err, HS_E_INPUT, "partial: unknown 'family' or 'loss_kind'");
    g->exclude_sinks = get_bool(r, op, "exclude_sinks");
    g->ablation = get_bool(r, op, "ablation");
    const cJSON *ak = cJSON_GetObjectItemCaseSensitive(op, "ablation_kind"); /* absent: zero */
    g->ablation_kind = ak ? hs_ablation_kind_parse(cJSON_GetStringValue(ak)) : HS_ABLATION_ZERO;
    if (!r->st && g->ablation_kind < 0)
        r->st = hs_fail(r->err, HS_E_INPUT, "partial: 'ablation_kind' is not zero, mean or resample");
    g->gradient = get_bool(r, op, "gradient");
    const char *sim = get_str(r, op, "similarity");
    g->sim_method = !strcmp(sim, "js") ? HS_SIM_JS : HS_SIM_PEARSON;
    if (!r->st && strcmp(sim, "js") && strcmp(sim, "pearson"))
        r->st = hs_fail(r->err, HS_E_INPUT, "partial: 'similarity' is '%s'", sim);
    get_array(r, op, "label_thresholds", HS_LABEL_COUNT, g->label_thresholds, NULL);
    g->sink_threshold = get_num(r, op, "sink_threshold");
    g->cluster_threshold = get_num(r, op, "cluster_threshold");
    g->probe_seed = (uint64_t)get_long(r, op, "probe_seed", 0, 0x7fffffffL);
    get_array(r, pr, "ids", g->probe_len, NULL, g->probe_ids);
    get_array(r, pr, "duplicate_token", nh, g->probe_dup, NULL);
    get_array(r, pr, "induction", nh, g->probe_ind, NULL);
    g->n_texts = get_long(r, o, "n_texts", 0, 1L << 50);
    g->tokens = get_long(r, o, "tokens", 0, 1L << 50);
    g->tokens_min = (int)get_long(r, o, "tokens_min", 0, 1 << 30);
    g->tokens_max = (int)get_long(r, o, "tokens_max", 0, 1 << 30);
    g->truncated = get_long(r, o, "truncated", 0, g->n_texts);
    g->n_sim = get_long(r, o, "n_sim", 0, g->n_texts);
    get_stat(r, need(r, o, "loss", cJSON_Array), "loss", &g->loss);
    const cJSON *st = need(r, o, "stats", cJSON_Object);
    for (int q = 0; st && !r->st && q < HS_CQ_COUNT; q++) {
        const char *key = hs_corpus_quantity_name(q);
        const cJSON *a = need(r, st, key, cJSON_Array);
        if (a && cJSON_GetArraySize(a) != nh)
            r->st = hs_fail(r->err, HS_E_INPUT, "partial: 'stats.%s' has %d heads, expected %d",
                            key, cJSON_GetArraySize(a), nh);
        int k = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, a) {
            if (k >= nh)
                break;
            get_stat(r, v, key, &g->stats[(size_t)k++ * HS_CQ_COUNT + (size_t)q]);
        }
        for (k = 0; !r->st && k < nh; k++)
            if (g->stats[(size_t)k * HS_CQ_COUNT + (size_t)q].n > g->n_texts)
                r->st = hs_fail(r->err, HS_E_INPUT, "partial: 'stats.%s' counts more texts than 'n_texts'", key);
    }
    const cJSON *sm = need(r, o, "sim_sum", cJSON_Array);
    if (sm && cJSON_GetArraySize(sm) != nh && !r->st)
        r->st = hs_fail(r->err, HS_E_INPUT, "partial: 'sim_sum' has %d rows, expected %d",
                        cJSON_GetArraySize(sm), nh);
    int row = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, sm) {
        if (r->st || row >= nh)
            break;
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != nh) {
            r->st = hs_fail(r->err, HS_E_INPUT, "partial: 'sim_sum' row %d is not %d numbers", row, nh);
            break;
        }
        int c = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, v)
            g->sim_sum[(size_t)row * (size_t)nh + (size_t)c++] = cJSON_IsNumber(e) ? e->valuedouble : NAN;
        row++;
    }
    if (!r->st && (g->n_texts > 0) != (g->loss.n > 0 || g->n_sim > 0))
        r->st = hs_fail(r->err, HS_E_INPUT, "partial: 'n_texts' disagrees with the statistics");
    if (!r->st && !(g->model_json = cJSON_PrintUnformatted(mo)))
        r->st = hs_fail(r->err, HS_E_NOMEM, "out of memory");
    if (r->st) {
        hs_corpus_agg_free(g);
        return NULL;
    }
    return g;
}

void hs_corpus_partial_free(hs_corpus_partial *p)
{
    if (!p)
        return;
    hs_corpus_agg_free(p->agg);
    free(p->path);
    memset(p, 0, sizeof *p);
}

hs_status hs_corpus_partial_parse(const char *json, size_t len, hs_corpus_partial *out,
                                  hs_error *err)
{
    memset(out, 0, sizeof *out);
    /* the sizes declared against the model named, before a parse tree is built for them */
    size_t nv = hs_json_count_values(json, len), max = hs_corpus_partial_max_values(json, len);
    if (nv > max)
        return hs_fail(err, HS_E_INPUT, "partial: %zu JSON values, more than a partial of the "
                       "model it names holds (at most %zu)", nv, max);
    cJSON *j = cJSON_ParseWithLength(json, len);
    rd r = {err, HS_OK};
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return hs_fail(err, HS_E_INPUT, "not a headscope partial (not a JSON object)");
    }
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(j, "schema");
    if (!cJSON_IsString(sc) || strcmp(sc->valuestring, HS_PARTIAL_SCHEMA)) {
        hs_fail(err, HS_E_INPUT, "not a headscope partial (schema '%.40s', expected '%s')",
                cJSON_IsString(sc) ? sc->valuestring : "", HS_PARTIAL_SCHEMA);
        cJSON_Delete(j);
        return HS_E_INPUT;
    }
    hs_corpus_info *in = &out->info;
    int complete = get_bool(&r, j, "complete");
    const cJSON *cp = need(&r, j, "checkpoint", complete ? cJSON_NULL : cJSON_Object);
    if (cp && !complete) {
        out->cp.position = get_long(&r, cp, "position", 1, 1L << 50);
        out->cp.texts_bytes = get_long(&r, cp, "texts_bytes", 0, 1L << 50);
        const char *t = get_str(&r, cp, "texts_tmp");
        if (!r.st && (strlen(t) >= sizeof out->cp.texts_tmp || strchr(t, '/') ||
                      strncmp(t, "texts.jsonl.tmp-", 16)))
            r.st = hs_fail(err, HS_E_INPUT, "partial: 'texts_tmp' is not a texts.jsonl.tmp-* name");
        if (!r.st)
            strcpy(out->cp.texts_tmp, t);
    }
    const cJSON *sh = need(&r, j, "shard", cJSON_Object);
    in->n_shards = sh ? (int)get_long(&r, sh, "count", 1, 1 << 20) : 1;
    in->shard = sh ? (int)get_long(&r, sh, "index", 1, in->n_shards) : 1;
    const cJSON *src = need(&r, j, "source", cJSON_Object);
    if (src) {
        out->path = strdup(get_str(&r, src, "path"));
        in->path = out->path;
        const char *f = get_str(&r, src, "format");
        in->format = HS_CORPUS_AUTO;
        for (int v = HS_CORPUS_AUTO; v <= HS_CORPUS_DIR; v++)
            if (!strcmp(f, hs_corpus_format_name((hs_corpus_format)v)))
                in->format = (hs_corpus_format)v;
        in->max_texts = get_long(&r, src, "max_texts", 0, 100000000L);
        in->max_tokens = (int)get_long(&r, src, "max_tokens", 0, 1 << 20);
        in->skip_long = get_bool(&r, src, "skip_long");
        in->sample = get_long(&r, src, "sample", 0, 1000000L);
        in->seed = (uint64_t)get_long(&r, src, "seed", 0, 0x7fffffffL);
        in->ablation = get_bool(&r, src, "corpus_ablation");
        const char *d = get_str(&r, src, "digest");
        snprintf(in->digest, sizeof in->digest, "%s", d);
        in->n_records = get_long(&r, src, "n_records", 0, 1L << 50);
        in->n_empty = get_long(&r, src, "n_empty", 0, 1L << 50);
        in->n_selected = get_long(&r, src, "n_selected", 0, 1L << 50);
        get_skips(&r, src, "skipped", in->skipped);
    }
    get_skips(&r, j, "skipped_text", in->skipped_text);
    in->seconds = get_num(&r, j, "seconds");
    const cJSON *ag = need(&r, j, "aggregate", cJSON_Object | cJSON_NULL);
    if (!r.st && !out->path)
        r.st = hs_fail(err, HS_E_NOMEM, "out of memory");
    if (!r.st && cJSON_IsObject(ag))
        out->agg = parse_agg(&r, ag);
    cJSON_Delete(j);
    if (r.st) {
        hs_corpus_partial_free(out);
        return r.st;
    }
    return HS_OK;
}

hs_status hs_corpus_partial_read(const char *path, hs_corpus_partial *out, hs_error *err)
{
    unsigned char *map = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    hs_status st = hs_file_map(path, &map, &len, err);
    if (st)
        return st;
    st = hs_corpus_partial_parse(map ? (const char *)map : "", len, out, err);
    if (map)
        hs_file_unmap(map, len);
    if (st) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        hs_fail(err, st, "'%s': %s", path, msg);
    }
    return st;
}

hs_status hs_corpus_partial_check(const hs_corpus_partial *a, const hs_corpus_partial *b,
                                  hs_error *err)
{
    const hs_corpus_info *x = &a->info, *y = &b->info;
    const char *what = NULL;
    if (a->agg && b->agg) { /* first: another model also changes the default --max-tokens */
        hs_status st = hs_corpus_agg_check(a->agg, b->agg, err);
        if (st)
            return st;
    }
    if (x->n_shards != y->n_shards)
        return hs_fail(err, HS_E_INPUT, "made with --shard I/%d, not I/%d", y->n_shards, x->n_shards);
    if (strcmp(x->path, y->path) || x->format != y->format)
        what = "corpus (--corpus, --corpus-format)";
    else if (x->max_texts != y->max_texts || x->sample != y->sample || x->seed != y->seed)
        what = "selection (--max-texts, --sample, --seed)";
    else if (x->max_tokens != y->max_tokens || x->skip_long != y->skip_long)
        what = "length limit (--max-tokens, --skip-long)";
    else if (x->ablation != y->ablation)
        what = "--corpus-ablation setting";
    else if (strcmp(x->digest, y->digest) || x->n_selected != y->n_selected ||
             x->n_records != y->n_records || x->n_empty != y->n_empty ||
             memcmp(x->skipped, y->skipped, sizeof x->skipped))
        what = "corpus content (its texts' SHA-256 digest or counts differ)";
    if (what)
        return hs_fail(err, HS_E_INPUT, "made with a different %s", what);
    return HS_OK;
}
