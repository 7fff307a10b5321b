/* The pieces of report.json that the corpus report (corpus_report.c) and an
 * encoder-decoder's (report_encdec.c) share with report_json.c (io_internal.h): JSON values,
 * the header ("schema", "generator", "model"), "clusters" and "kv_groups". */
#include <math.h>

#include <cJSON.h>

#include "headscope/report.h"
#include "analysis/analysis_internal.h"
#include "core/core.h"
#include "io/io_internal.h"

/* A number, or null for NaN/Inf. */
cJSON *hs_json_num(double v)
{
    return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

static void add_num(cJSON *o, const char *k, double v)
{
    cJSON_AddItemToObject(o, k, hs_json_num(v));
}

cJSON *hs_json_ints(const int32_t *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

static cJSON *num_array(const double *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, hs_json_num(v[i]));
    return a;
}

cJSON *hs_json_strs(const char *const *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
    return a;
}

cJSON *hs_json_matrix(const double *m, int rows, int cols)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < rows; i++) {
        cJSON *r = cJSON_CreateArray();
        for (int j = 0; r && j < cols; j++)
            cJSON_AddItemToArray(r, hs_json_num(m[(size_t)i * (size_t)cols + (size_t)j]));
        cJSON_AddItemToArray(a, r);
    }
    return a;
}

/* kv_groups.similarity: the similarity matrix's means within and across the KV groups. */
static void add_kv_similarity(cJSON *kv, const hs_kv_similarity *ks, hs_sim_method method)
{
    int L = ks->n_layer, G = ks->n_kv_head;
    cJSON *o = cJSON_AddObjectToObject(kv, "similarity");
    cJSON_AddStringToObject(o, "method", method == HS_SIM_JS ? "jensen_shannon" : "pearson");
    cJSON_AddItemToObject(o, "within", num_array(ks->within, L));
    cJSON_AddItemToObject(o, "across", num_array(ks->across, L));
    add_num(o, "within_mean", ks->within_mean);
    add_num(o, "across_mean", ks->across_mean);
    add_num(o, "other_layers_mean", ks->other_layers_mean);
    cJSON_AddNumberToObject(o, "n_within_pairs", (double)ks->n_within);
    cJSON_AddNumberToObject(o, "n_across_pairs", (double)ks->n_across);
    cJSON_AddItemToObject(o, "p_value", num_array(ks->p_value, L));
    cJSON_AddItemToObject(o, "p_value_holm", num_array(ks->p_holm, L));
    cJSON_AddNumberToObject(o, "permutations", HS_KV_PERMUTATIONS);
    cJSON *gr = cJSON_AddArrayToObject(o, "groups");
    for (int l = 0; l < L; l++)
        cJSON_AddItemToArray(gr, hs_json_matrix(ks->groups + (size_t)l * G * G, G, G));
    cJSON *cl = cJSON_AddObjectToObject(o, "clusters");
    add_num(cl, "adjusted_rand", ks->adjusted_rand);
    add_num(cl, "same_cluster_within", ks->same_cluster_within);
    add_num(cl, "same_cluster_across", ks->same_cluster_across);
}

void hs_report_add_kv_groups(cJSON *parent, const hs_kv_similarity *ks, int method,
                             const double *ablation, int omit_ablation)
{
    cJSON *kv = cJSON_AddObjectToObject(parent, "kv_groups");
    cJSON_AddNumberToObject(kv, "n_kv_head", ks->n_kv_head);
    cJSON_AddNumberToObject(kv, "heads_per_group", ks->heads_per_group);
    if (ablation)
        cJSON_AddItemToObject(kv, "ablation_delta",
                              hs_json_matrix(ablation, ks->n_layer, ks->n_kv_head));
    else if (!omit_ablation)
        cJSON_AddNullToObject(kv, "ablation_delta");
    add_kv_similarity(kv, ks, (hs_sim_method)method);
}

void hs_report_add_clusters(cJSON *parent, const hs_linkage *lk, const int *labels, int n_heads,
                            int n_clusters, int sim, double threshold)
{
    cJSON *cl = cJSON_AddObjectToObject(parent, "clusters");
    cJSON_AddStringToObject(cl, "linkage", "average");
    cJSON_AddStringToObject(cl, "distance", sim == HS_SIM_JS ? "jensen_shannon" : "1 - pearson");
    add_num(cl, "threshold", threshold);
    cJSON_AddNumberToObject(cl, "n_clusters", n_clusters);
    cJSON *merges = cJSON_AddArrayToObject(cl, "merges");
    cJSON *order = cJSON_AddArrayToObject(cl, "order");
    for (int k = 0; lk && k < n_heads - 1; k++) {
        const hs_merge *mg = &lk->merges[k];
        cJSON *e = cJSON_CreateArray();
        cJSON_AddItemToArray(e, cJSON_CreateNumber(mg->a));
        cJSON_AddItemToArray(e, cJSON_CreateNumber(mg->b));
        cJSON_AddItemToArray(e, hs_json_num(mg->dist));
        cJSON_AddItemToArray(e, cJSON_CreateNumber(mg->size));
        cJSON_AddItemToArray(merges, e);
    }
    for (int k = 0; k < n_heads; k++) /* no linkage: a single head */
        cJSON_AddItemToArray(order, cJSON_CreateNumber(lk ? lk->order[k] : k));
    cJSON *lab = cJSON_AddArrayToObject(cl, "labels");
    for (int k = 0; k < n_heads; k++)
        cJSON_AddItemToArray(lab, cJSON_CreateNumber(labels[k]));
}

void hs_report_add_generator(cJSON *r, const char *const *argv, int argc)
{
    cJSON_AddStringToObject(r, "schema", HS_REPORT_SCHEMA);
    cJSON *gen = cJSON_AddObjectToObject(r, "generator");
    cJSON_AddStringToObject(gen, "name", "headscope");
    cJSON_AddStringToObject(gen, "version", hs_version());
    if (*hs_build_commit())
        cJSON_AddStringToObject(gen, "git_commit", hs_build_commit());
    else
        cJSON_AddNullToObject(gen, "git_commit");
    if (argv)
        cJSON_AddItemToObject(gen, "command_line", hs_json_strs(argv, argc));
    else
        cJSON_AddNullToObject(gen, "command_line");
}

cJSON *hs_report_model_json(const hs_analysis *a)
{
    const hs_model *m = a->model;
    const hs_model_config *c = hs_model_config_of(m);
    cJSON *mo = cJSON_CreateObject();
    cJSON_AddStringToObject(mo, "path", hs_model_path(m));
    cJSON_AddStringToObject(mo, "format", hs_model_format(m) == HS_FORMAT_GGUF ? "gguf" : "hf");
    cJSON_AddStringToObject(mo, "storage_dtype", hs_model_storage_dtype(m));
    cJSON_AddStringToObject(mo, "activations", hs_model_activations(m));
    cJSON_AddStringToObject(mo, "family", hs_family_name(c->family));
    cJSON_AddNumberToObject(mo, "n_layer", c->n_layer);
    cJSON_AddNumberToObject(mo, "n_head", c->n_head);
    cJSON_AddNumberToObject(mo, "n_kv_head", c->n_kv_head);
    cJSON_AddNumberToObject(mo, "d_model", c->d_model);
    cJSON_AddNumberToObject(mo, "d_head", c->d_head);
    cJSON_AddNumberToObject(mo, "d_ff", c->d_ff);
    cJSON_AddNumberToObject(mo, "n_ctx", c->n_ctx);
    cJSON_AddNumberToObject(mo, "vocab_size", c->vocab_size);
    cJSON_AddBoolToObject(mo, "causal", c->causal);
    cJSON_AddBoolToObject(mo, "lm_head", c->has_lm_head);
    /* each layer's attention: local (a sliding window of W keys) or global */
    cJSON *ly = cJSON_AddArrayToObject(mo, "layers");
    for (int l = 0; l < c->n_layer; l++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddItemToArray(ly, e);
        hs_visibility v = hs_model_layer_visibility(c, l);
        int local = hs_model_layer_is_local(c, l);
        cJSON_AddStringToObject(e, "attention", local ? "local" : "global");
        if (local && v.kind == HS_VIS_SLIDING)
            cJSON_AddNumberToObject(e, "window", v.window);
        else
            cJSON_AddNullToObject(e, "window");
    }
    if (a->files) {
        cJSON *fl = cJSON_AddArrayToObject(mo, "files");
        for (int i = 0; i < a->n_model_files; i++) {
            cJSON *f = cJSON_CreateObject();
            cJSON_AddItemToArray(fl, f);
            cJSON_AddStringToObject(f, "name", a->files[i].name);
            cJSON_AddNumberToObject(f, "bytes", (double)a->files[i].bytes);
            cJSON_AddStringToObject(f, "sha256", a->files[i].sha256);
        }
    } else {
        cJSON_AddNullToObject(mo, "files");
    }
    return mo;
}

void hs_report_add_header(cJSON *r, const hs_analysis *a)
{
    hs_report_add_generator(r, (const char *const *)a->command_line, a->command_line_argc);
    cJSON_AddItemToObject(r, "model", hs_report_model_json(a));
}
