/* headscope patch: patching.json (schema headscope.patching/1, docs/patching.md) and the
 * effect heatmaps patching.png and patching_positions.png. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "cli.h"
#include "core/core.h"
#include "headscope/html.h"
#include "headscope/render.h"
#include "patch_cli.h"
#include "../viz/viz_internal.h" /* the per-position grid's rows and columns named */

static cJSON *num(double v)
{
    return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

static cJSON *num_array(const double *v, size_t count, size_t stride)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < count; i++)
        cJSON_AddItemToArray(a, num(v[i * stride]));
    return a;
}

static double mean(const double *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    return s / n;
}

/* One record of cell k: layer, head (null at a site without heads), position (each), the
 * effect, ci95, per_pair. */
static cJSON *record(const hs_patch_result *r, int l, int u, int p, int headed, int each)
{
    int k = hs_patch_index(r, l, u, p);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "layer", l);
    cJSON_AddItemToObject(e, "head", headed ? cJSON_CreateNumber(u) : cJSON_CreateNull());
    if (each)
        cJSON_AddNumberToObject(e, "position", p);
    cJSON_AddItemToObject(e, "effect", num(r->effect[k]));
    cJSON *ci = cJSON_AddArrayToObject(e, "ci95");
    cJSON_AddItemToArray(ci, num(r->ci_lo[k]));
    cJSON_AddItemToArray(ci, num(r->ci_hi[k]));
    cJSON_AddItemToObject(e, "per_pair",
                          num_array(r->patched + (size_t)k * (size_t)r->n_pairs,
                                    (size_t)r->n_pairs, 1));
    if (r->effect_attr) { /* both methods: the attribution's beside the exact values */
        cJSON_AddItemToObject(e, "effect_attribution", num(r->effect_attr[k]));
        ci = cJSON_AddArrayToObject(e, "ci95_attribution");
        cJSON_AddItemToArray(ci, num(r->ci_lo_attr[k]));
        cJSON_AddItemToArray(ci, num(r->ci_hi_attr[k]));
        cJSON_AddItemToObject(e, "per_pair_attribution",
                              num_array(r->patched_attr + (size_t)k * (size_t)r->n_pairs,
                                        (size_t)r->n_pairs, 1));
    }
    return e;
}

/* Path patching's records: one a sender asked for, with the cell's effect, ci95 and
 * per_pair as a head's record has them. */
static void add_paths(cJSON *j, const patch_request *q, const hs_patch_result *r)
{
    const hs_patch_path *p = q->path;
    cJSON *list = cJSON_AddArrayToObject(j, "paths");
    char rec[32], snd[32];
    snprintf(rec, sizeof rec, "%d.%d", p->receiver_layer, p->receiver_head);
    for (int l = 0; l < r->n_layer; l++)
        for (int u = 0; u < r->n_units; u++) {
            if (p->sender_layer >= 0 && (l != p->sender_layer || u != p->sender_head))
                continue;
            cJSON *e = cJSON_CreateObject(), *cell = record(r, l, u, 0, 1, 0);
            snprintf(snd, sizeof snd, "%d.%d", l, u);
            cJSON_AddStringToObject(e, "sender", snd);
            cJSON_AddStringToObject(e, "receiver", rec);
            cJSON_AddStringToObject(e, "input", hs_site_get(p->input)->key);
            static const char *const keys[] = {"effect", "ci95", "per_pair"};
            for (int k = 0; k < 3; k++)
                cJSON_AddItemToObject(e, keys[k], cJSON_DetachItemFromObject(cell, keys[k]));
            cJSON_Delete(cell);
            cJSON_AddItemToArray(list, e);
        }
}

static cJSON *report(const hs_model *m, const patch_request *q, const patch_pairs *pp,
                     const hs_patch_result *r, const hs_patch_result *re,
                     char *const *pictures, int n_pictures)
{
    const hs_patch_opts *o = q->o;
    int headed = hs_site_get(o->site)->heads != HS_HEADS_NONE;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "schema", "headscope.patching/1");
    cJSON_AddStringToObject(j, "model", q->model);
    cJSON_AddStringToObject(j, "architecture", hs_model_config_of(m)->arch->name);
    cJSON_AddStringToObject(j, "pairs_file", q->pairs_path);
    cJSON_AddStringToObject(j, "method", q->method);
    if (q->n_shards) { /* a part: headscope merge joins the shards */
        cJSON *sh = cJSON_AddObjectToObject(j, "shard");
        cJSON_AddNumberToObject(sh, "index", q->shard);
        cJSON_AddNumberToObject(sh, "count", q->n_shards);
    }
    if (r->effect_attr) { /* Pearson's r of the exact and attribution effects */
        cJSON *cor = cJSON_AddObjectToObject(j, "correlation");
        cJSON_AddItemToObject(cor, "heads", num(r->correlation));
        if (re)
            cJSON_AddItemToObject(cor, "positions", num(re->correlation));
    }
    cJSON_AddStringToObject(j, "site", q->site);
    char hook[64]; /* the pattern with L for the layer */
    const char *pat = hs_site_get(o->site)->name, *at = strstr(pat, "%d");
    snprintf(hook, sizeof hook, "%.*sL%s", (int)(at - pat), pat, at + 2);
    cJSON_AddStringToObject(j, "hook", hook);
    cJSON_AddBoolToObject(j, "per_position", re != NULL);
    cJSON_AddStringToObject(j, "direction", q->direction);
    cJSON_AddNumberToObject(j, "n_layer", r->n_layer);
    cJSON_AddNumberToObject(j, "n_heads", headed ? r->n_units : 0);
    cJSON *met = cJSON_AddObjectToObject(j, "metric");
    cJSON_AddStringToObject(met, "name", q->metric);
    cJSON_AddItemToObject(met, "clean", num_array(r->clean, (size_t)r->n_pairs, 1));
    cJSON_AddItemToObject(met, "corrupt", num_array(r->corrupt, (size_t)r->n_pairs, 1));
    cJSON_AddItemToObject(met, "clean_mean", num(mean(r->clean, r->n_pairs)));
    cJSON_AddItemToObject(met, "corrupt_mean", num(mean(r->corrupt, r->n_pairs)));
    cJSON *bs = cJSON_AddObjectToObject(j, "bootstrap");
    cJSON_AddNumberToObject(bs, "resamples", o->resamples);
    cJSON_AddNumberToObject(bs, "seed", (double)o->seed);
    cJSON_AddNumberToObject(bs, "level", 0.95);
    cJSON *cost = cJSON_AddObjectToObject(j, "cost");
    double passes = r->passes + (re ? re->passes : 0);
    cJSON_AddNumberToObject(cost, "forward_passes", passes);
    cJSON_AddNumberToObject(cost, "per_pair", passes / r->n_pairs);
    cJSON *pairs = cJSON_AddArrayToObject(j, "pairs");
    for (int i = 0; i < pp->count; i++) {
        const hs_patch_pair *p = &pp->pairs[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "line", pp->lines[i]);
        cJSON_AddNumberToObject(e, "n_tokens", p->n);
        cJSON_AddNumberToObject(e, "position", p->pos);
        cJSON_AddNumberToObject(e, "answer_id", p->answer);
        cJSON_AddItemToObject(e, "wrong_id", p->wrong >= 0 ? cJSON_CreateNumber(p->wrong)
                                                           : cJSON_CreateNull());
        cJSON_AddItemToArray(pairs, e);
    }
    if (q->path) {
        add_paths(j, q, r);
    } else {
        cJSON *list = cJSON_AddArrayToObject(j, "heads");
        for (int l = 0; l < r->n_layer; l++)
        for (int u = 0; u < r->n_units; u++)
                cJSON_AddItemToArray(list, record(r, l, u, 0, headed, 0));
    }
    if (re) {
        cJSON *list;
        list = cJSON_AddArrayToObject(j, "positions");
        for (int l = 0; l < re->n_layer; l++)
            for (int u = 0; u < re->n_units; u++)
                for (int p = 0; p < re->n_pos; p++)
                    cJSON_AddItemToArray(list, record(re, l, u, p, headed, 1));
    }
    cJSON *files = cJSON_AddArrayToObject(j, "files");
    for (int i = 0; i < n_pictures; i++)
        cJSON_AddItemToArray(files, cJSON_CreateString(pictures[i]));
    cJSON_AddItemToArray(files, cJSON_CreateString("patching.json"));
    return j;
}

/* The rows and columns of r's grid: (layers, units) or, per position, (layers * units,
 * positions); 0 when it is past the picture's bounds (patching.json has every value). */
static int grid(const hs_patch_result *r, int each, int *rows, int *cols)
{
    *rows = each ? r->n_layer * r->n_units : r->n_layer;
    *cols = each ? r->n_pos : r->n_units;
    return *rows <= 256 && *cols <= 256;
}

/* r's effects as a heatmap at path. */
static int picture(const patch_request *q, const hs_patch_result *r, int each, const char *path)
{
    int rows, cols;
    grid(r, each, &rows, &cols);
    size_t count = (size_t)rows * (size_t)cols;
    float *v = malloc(count * sizeof *v);
    if (!v) {
        cli_error(PATCH_CMD, "out of memory");
        return EXIT_FAIL;
    }
    for (size_t i = 0; i < count; i++)
        v[i] = (float)r->effect[i];
    char title[160], sub[160];
    if (q->path)
        snprintf(title, sizeof title, "path patching into %d.%d's %s (%s), %s",
                 q->path->receiver_layer, q->path->receiver_head, hs_site_get(q->path->input)->key,
                 q->direction, q->metric);
    else
        /* the grid is the exact effect unless only attribution was asked for */
        snprintf(title, sizeof title, "%s patching of %s (%s), %s",
                 strcmp(q->method, "attribution") ? "activation" : "attribution", q->site,
                 q->direction, q->metric);
    /* per position: rows layer.head ("3.1"; a site without heads: the layer), columns the
     * token positions */
    int units = hs_site_get(q->o->site)->heads != HS_HEADS_NONE ? r->n_units : 0;
    snprintf(sub, sizeof sub, each ? (units ? "rows: layer.head (layer-major), columns: position"
                                            : "rows: layer, columns: position")
             : q->path ? "rows: sender layer, columns: sender head; 0 white"
                       : "rows: layer, columns: head; effect normalised, 0 white");
    hs_importance_opts io = {.title = title, .subtitle = sub, .cmap = HS_CMAP_DIVERGING};
    hs_viz_axes axes = {hs_viz_unit_label, hs_viz_index_label, &units};
    hs_error err = {{0}};
    hs_status st = each ? hs_viz_importance_write_axes(path, v, rows, cols, &io, &axes, &err)
                        : hs_importance_write(path, v, rows, cols, &io, &err);
    free(v);
    if (st) {
        cli_error(PATCH_CMD, "%s", err.msg);
        return EXIT_FAIL;
    }
    return 0;
}

int patch_page_write(const char *dir, const char *json, const char *cmd)
{
    hs_error err = {{0}};
    char *path = cli_path_join(dir, "index.html");
    if (!path) {
        cli_error(cmd, "out of memory");
        return EXIT_FAIL;
    }
    hs_status st = hs_html_patching_write(path, json, &err);
    free(path);
    if (st) {
        cli_error(cmd, "%s", err.msg);
        return EXIT_FAIL;
    }
    return 0;
}

int patch_write(const hs_model *m, const patch_request *q, const patch_pairs *pp,
                const hs_patch_result *r, const hs_patch_result *re, const char *dir,
                int no_images, char ***names, int *n_names)
{
    int rc = EXIT_FAIL, rows, cols;
    int pic = !no_images && grid(r, 0, &rows, &cols) && !(q->path && q->path->sender_layer >= 0);
    int pic_pos = !no_images && re && grid(re, 1, &rows, &cols);
    char *path = NULL, *json = NULL;
    hs_error err = {{0}};
    cJSON *j = NULL;
    *n_names = 0;
    if (!(*names = calloc(4, sizeof **names)))
        goto oom;
    for (int k = 0; k < 2; k++) {
        const char *name = k ? "patching_positions.png" : "patching.png";
        if (!(k ? pic_pos : pic))
            continue;
        if (!(path = cli_path_join(dir, name)))
            goto oom;
        if (picture(q, k ? re : r, k, path))
            goto done;
        free(path);
        path = NULL;
        if (!((*names)[(*n_names)++] = strdup(name)))
            goto oom;
    }
    if (!((*names)[(*n_names)++] = strdup("index.html")))
        goto oom;
    if (!(j = report(m, q, pp, r, re, *names, *n_names)) || !(json = cJSON_Print(j)) ||
        !(path = cli_path_join(dir, "patching.json")))
        goto oom;
    if (hs_file_write_atomic(path, json, strlen(json), &err)) {
        cli_error(PATCH_CMD, "%s", err.msg);
        goto done;
    }
    if (patch_page_write(dir, json, PATCH_CMD))
        goto done;
    if (!((*names)[(*n_names)++] = strdup("patching.json")))
        goto oom;
    rc = 0;
    goto done;
oom:
    cli_error(PATCH_CMD, "out of memory");
done:
    cJSON_Delete(j);
    free(json);
    free(path);
    return rc;
}
