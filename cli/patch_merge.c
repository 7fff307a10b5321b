/* headscope merge of the shards of headscope patch --shard I/N (docs/patching.md): the pairs
 * put back in their file order, the effects and intervals recomputed over all of them
 * (hs_patch_result_summarise): the patching.json one run over the whole file writes, without
 * pictures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "cli.h"
#include "core/core.h"
#include "patch_cli.h"

#define PART_MAX_BYTES ((size_t)1 << 30)

/* The keys every shard must have alike. */
static const char *const same_keys[] = {"schema", "model", "architecture", "pairs_file",
                                        "method", "site", "hook", "per_position", "direction",
                                        "n_layer", "n_heads", "bootstrap", NULL};
/* What names a record: alike in every shard. */
static const char *const ids[] = {"layer", "head", "position", "sender", "receiver", "input",
                                  NULL};
/* The lists of records whose per-pair values are joined. */
static const char *const lists[] = {"heads", "positions", "paths", NULL};

static char *json_of(const char *arg)
{
    struct stat sb;
    if (stat(arg, &sb) == 0 && S_ISDIR(sb.st_mode))
        return cli_path_join(arg, "patching.json");
    return strdup(arg);
}

static cJSON *load(const char *arg, hs_error *err)
{
    char *path = json_of(arg), *text = NULL, what[600];
    size_t len = 0;
    cJSON *j = NULL;
    if (!path) {
        hs_fail(err, HS_E_NOMEM, "out of memory");
        return NULL;
    }
    snprintf(what, sizeof what, "'%s'", path);
    if (hs_read_file(path, PART_MAX_BYTES, &text, &len, err) == HS_OK)
        hs_json_parse(text, len, (size_t)1 << 26, what, &j, err);
    free(text);
    free(path);
    return j;
}

int patch_merge_is(const char *arg)
{
    char *path = json_of(arg);
    struct stat sb;
    int is = path && stat(path, &sb) == 0 && S_ISREG(sb.st_mode) &&
             strlen(path) >= 13 && !strcmp(path + strlen(path) - 13, "patching.json");
    free(path);
    return is;
}

static double num_at(const cJSON *a, int i)
{
    const cJSON *v = cJSON_GetArrayItem(a, i);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static cJSON *num(double v)
{
    return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

/* The order of the pairs: order[k] = (part, index in it), sorted by the file's line. */
typedef struct {
    int line, part, at;
} slot;

static int by_line(const void *a, const void *b)
{
    const slot *x = a, *y = b;
    return (x->line > y->line) - (x->line < y->line);
}

/* Joins array key of each part's item (found by get) in the order of slots into a new
 * array, and into v (doubles) when v is not NULL. */
static cJSON *join(cJSON *const *items, const slot *order, int total, const char *key,
                   double *v)
{
    cJSON *out = cJSON_CreateArray();
    for (int k = 0; out && k < total; k++) {
        const cJSON *a = cJSON_GetObjectItem(items[order[k].part], key);
        double x = num_at(a, order[k].at);
        if (v)
            v[k] = x;
        cJSON_AddItemToArray(out, num(x));
    }
    return out;
}

/* List key's records joined over the parts (per_pair, per_pair_attribution) and their
 * effects, ci95 and correlation recomputed; HS_OK or the error. */
static hs_status merge_list(cJSON *out, cJSON *const *parts, int n, const slot *order,
                            int total, const char *key, const hs_patch_opts *o, hs_error *err)
{
    cJSON *recs = cJSON_GetObjectItem(out, key), *met = cJSON_GetObjectItem(out, "metric");
    int cells = cJSON_GetArraySize(recs);
    for (int i = 0; i < n; i++)
        if (cJSON_GetArraySize(cJSON_GetObjectItem(parts[i], key)) != cells)
            return hs_fail(err, HS_E_INPUT, "the shards' \"%s\" differ in length", key);
    int both = cJSON_GetObjectItem(cJSON_GetArrayItem(recs, 0), "per_pair_attribution") != NULL;
    hs_patch_result *r = NULL;
    cJSON **items = calloc((size_t)n, sizeof *items);
    hs_status st = items ? hs_patch_result_new(1, 1, cells, total, both, &r, err)
                         : hs_fail(err, HS_E_NOMEM, "out of memory");
    for (int k = 0; !st && k < total; k++) {
        r->clean[k] = num_at(cJSON_GetObjectItem(met, "clean"), k);
        r->corrupt[k] = num_at(cJSON_GetObjectItem(met, "corrupt"), k);
    }
    static const char *const per[2] = {"per_pair", "per_pair_attribution"};
    for (int i = 0; !st && i < n; i++)
        if (!cJSON_Compare(cJSON_GetObjectItem(met, "name"),
                           cJSON_GetObjectItem(cJSON_GetObjectItem(parts[i], "metric"), "name"),
                           1))
            st = hs_fail(err, HS_E_INPUT, "the shards' metrics differ: not shards of one run");
    for (int c = 0; !st && c < cells; c++) {
        cJSON *rec = cJSON_GetArrayItem(recs, c);
        for (int i = 0; i < n; i++) {
            items[i] = cJSON_GetArrayItem(cJSON_GetObjectItem(parts[i], key), c);
            for (int k = 0; !st && ids[k]; k++)
                if (!cJSON_Compare(cJSON_GetObjectItem(rec, ids[k]),
                                   cJSON_GetObjectItem(items[i], ids[k]), 1) &&
                    (cJSON_GetObjectItem(rec, ids[k]) || cJSON_GetObjectItem(items[i], ids[k])))
                    st = hs_fail(err, HS_E_INPUT, "the shards' \"%s\" records differ: not "
                                 "shards of one run", key);
        }
        for (int b = 0; b <= both; b++) {
            double *v = (b ? r->patched_attr : r->patched) + (size_t)c * (size_t)total;
            cJSON_ReplaceItemInObject(rec, per[b], join(items, order, total, per[b], v));
        }
    }
    if (!st)
        st = hs_patch_result_summarise(r, o, err);
    for (int c = 0; !st && c < cells; c++) {
        cJSON *rec = cJSON_GetArrayItem(recs, c);
        for (int b = 0; b <= both; b++) {
            cJSON *ci = cJSON_CreateArray();
            cJSON_AddItemToArray(ci, num((b ? r->ci_lo_attr : r->ci_lo)[c]));
            cJSON_AddItemToArray(ci, num((b ? r->ci_hi_attr : r->ci_hi)[c]));
            cJSON_ReplaceItemInObject(rec, b ? "effect_attribution" : "effect",
                                      num((b ? r->effect_attr : r->effect)[c]));
            cJSON_ReplaceItemInObject(rec, b ? "ci95_attribution" : "ci95", ci);
        }
    }
    cJSON *cor = cJSON_GetObjectItem(out, "correlation");
    if (!st && both && cor && strcmp(key, "paths"))
        cJSON_ReplaceItemInObject(cor, key, num(r->correlation));
    hs_patch_result_free(r);
    free(items);
    return st;
}

/* Reads the parts, checks they are the shards 1..N of one run once each, and orders the
 * pairs (*order, *total). Prints the error; 0 or EXIT_FAIL. */
static int read_parts(const char *cmd, char *const *args, int n, cJSON **parts, slot **order,
                      int *total)
{
    hs_error err = {{0}};
    int count = 0;
    char *seen = NULL;
    for (int i = 0; i < n; i++) {
        if (!(parts[i] = load(args[i], &err))) {
            cli_error(cmd, "%s", err.msg);
            goto fail;
        }
        const cJSON *sh = cJSON_GetObjectItem(parts[i], "shard");
        int idx, cnt;
        idx = cJSON_IsNumber(cJSON_GetObjectItem(sh, "index"))
                  ? cJSON_GetObjectItem(sh, "index")->valueint : 0;
        cnt = cJSON_IsNumber(cJSON_GetObjectItem(sh, "count"))
                  ? cJSON_GetObjectItem(sh, "count")->valueint : 0;
        if (cnt < 1 || idx < 1 || idx > cnt) {
            cli_error(cmd, "'%s' is not a shard of headscope patch --shard I/N", args[i]);
            goto fail;
        }
        if (!i && !(seen = calloc((size_t)cnt + 1, 1))) {
            cli_error(cmd, "out of memory");
            goto fail;
        }
        if (i ? cnt != count : (count = cnt, 0)) {
            cli_error(cmd, "'%s' is shard %d/%d, the first part one of %d", args[i], idx, cnt,
                      count);
            goto fail;
        }
        if (seen[idx]++) {
            cli_error(cmd, "shard %d/%d is given twice ('%s')", idx, cnt, args[i]);
            goto fail;
        }
        for (int k = 0; same_keys[k]; k++)
            if (!cJSON_Compare(cJSON_GetObjectItem(parts[0], same_keys[k]),
                               cJSON_GetObjectItem(parts[i], same_keys[k]), 1)) {
                cli_error(cmd, "'%s' and '%s' differ in \"%s\": not shards of one run",
                          args[0], args[i], same_keys[k]);
                goto fail;
            }
        *total += cJSON_GetArraySize(cJSON_GetObjectItem(parts[i], "pairs"));
    }
    if (n != count) {
        cli_error(cmd, "%d of the %d shards given: every shard 1..%d once", n, count, count);
        goto fail;
    }
    if (!(*order = malloc((size_t)*total * sizeof **order))) {
        cli_error(cmd, "out of memory");
        goto fail;
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *p;
        int at = 0;
        cJSON_ArrayForEach(p, cJSON_GetObjectItem(parts[i], "pairs"))
        {
            const cJSON *line = cJSON_GetObjectItem(p, "line");
            (*order)[k++] = (slot){cJSON_IsNumber(line) ? line->valueint : 0, i, at++};
        }
    }
    qsort(*order, (size_t)*total, sizeof **order, by_line);
    free(seen);
    return 0;
fail:
    free(seen);
    return EXIT_FAIL;
}

int patch_merge(const char *cmd, char *const *args, int n, const char *dir, char ***names,
                int *n_names)
{
    cJSON **parts = calloc((size_t)n, sizeof *parts), *out = NULL, **items = NULL;
    slot *order = NULL;
    int total = 0, rc = EXIT_FAIL;
    char *json = NULL, *path = NULL;
    hs_error err = {{0}};
    *n_names = 0;
    if (!parts || !(items = calloc((size_t)n, sizeof *items))) {
        cli_error(cmd, "out of memory");
        goto done;
    }
    if (read_parts(cmd, args, n, parts, &order, &total) || !(out = cJSON_Duplicate(parts[0], 1)))
        goto done;
    cJSON_DeleteItemFromObject(out, "shard");
    cJSON *met = cJSON_GetObjectItem(out, "metric");
    double sum[2] = {0, 0}, passes = 0;
    static const char *const which[2] = {"clean", "corrupt"};
    for (int i = 0; i < n; i++)
        items[i] = cJSON_GetObjectItem(parts[i], "metric");
    double *v = malloc((size_t)total * sizeof *v);
    for (int b = 0; v && b < 2; b++) {
        cJSON_ReplaceItemInObject(met, which[b], join(items, order, total, which[b], v));
        for (int k = 0; k < total; k++)
            sum[b] += v[k];
    }
    free(v);
    cJSON_ReplaceItemInObject(met, "clean_mean", num(sum[0] / total));
    cJSON_ReplaceItemInObject(met, "corrupt_mean", num(sum[1] / total));
    for (int i = 0; i < n; i++)
        passes += cJSON_GetNumberValue(
            cJSON_GetObjectItem(cJSON_GetObjectItem(parts[i], "cost"), "forward_passes"));
    cJSON *cost = cJSON_GetObjectItem(out, "cost");
    cJSON_ReplaceItemInObject(cost, "forward_passes", cJSON_CreateNumber(passes));
    cJSON_ReplaceItemInObject(cost, "per_pair", cJSON_CreateNumber(passes / total));
    cJSON *pairs = cJSON_CreateArray();
    for (int k = 0; k < total; k++)
        cJSON_AddItemToArray(pairs, cJSON_Duplicate(cJSON_GetArrayItem(
            cJSON_GetObjectItem(parts[order[k].part], "pairs"), order[k].at), 1));
    cJSON_ReplaceItemInObject(out, "pairs", pairs);
    hs_patch_opts o = hs_patch_opts_default();
    const cJSON *bs = cJSON_GetObjectItem(out, "bootstrap");
    o.noise = !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(out, "direction")) ?
                      cJSON_GetStringValue(cJSON_GetObjectItem(out, "direction")) : "", "noise");
    o.resamples = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(bs, "resamples"));
    o.seed = (uint64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(bs, "seed"));
    for (int k = 0; lists[k]; k++)
        if (cJSON_GetObjectItem(out, lists[k]) &&
            merge_list(out, parts, n, order, total, lists[k], &o, &err)) {
            cli_error(cmd, "%s", err.msg);
            goto done;
        }
    cJSON *files = cJSON_CreateArray();
    cJSON_AddItemToArray(files, cJSON_CreateString("index.html"));
    cJSON_AddItemToArray(files, cJSON_CreateString("patching.json"));
    cJSON_ReplaceItemInObject(out, "files", files);
    if (!(json = cJSON_Print(out)) || !(path = cli_path_join(dir, "patching.json")) ||
        !(*names = calloc(2, sizeof **names)) || !((*names)[0] = strdup("index.html")) ||
        !((*names)[1] = strdup("patching.json"))) {
        cli_error(cmd, "out of memory");
        goto done;
    }
    *n_names = 2;
    if (hs_file_write_atomic(path, json, strlen(json), &err)) {
        cli_error(cmd, "%s", err.msg);
        goto done;
    }
    if (patch_page_write(dir, json, cmd))
        goto done;
    rc = 0;
done:
    for (int i = 0; parts && i < n; i++)
        cJSON_Delete(parts[i]);
    free(parts);
    free(items);
    free(order);
    cJSON_Delete(out);
    free(json);
    free(path);
    return rc;
}
