/* The files a model was read from, with their sizes and SHA-256 digests, for reports. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "internal.h"
#include "model/model_internal.h"

/* Every file of a Hugging Face folder that headscope may read, in report order. */
static const char *const hf_files[] = {
    "config.json",    "model.safetensors", "model.safetensors.index.json",
    "pytorch_model.bin",       "tokenizer.json",
    "vocab.json",     "merges.txt",        "vocab.txt",               "tokenizer_config.json",
    "special_tokens_map.json",
};
#define N_HF_FILES (sizeof hf_files / sizeof hf_files[0])

void hs_model_files_free(hs_model_file *files, int n)
{
    if (!files)
        return;
    for (int i = 0; i < n; i++)
        free(files[i].name);
    free(files);
}

static hs_status hash_one(const char *path, const char *name, hs_model_file *f, hs_error *err)
{
    memset(f, 0, sizeof *f);
    hs_status st = hs_sha256_file(path, f->sha256, &f->bytes, err);
    if (st)
        return st;
    f->name = strdup(name);
    return f->name ? HS_OK : hs_fail(err, HS_E_NOMEM, "out of memory");
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Appends the shards that dir's model.safetensors.index.json names (each once, sorted by
 * name: the order of a JSON object's keys is not the checkpoint's identity). The loader has
 * checked the index already; this reads it again only for the file names. */
static hs_status hash_shards(const char *dir, hs_model_file **files, int *k, hs_error *err)
{
    char path[4400], *text = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    hs_status st = hs_read_file(path, 64u << 20, &text, &len, err);
    if (!st)
        st = hs_json_parse(text, len, 1u << 22, "model.safetensors.index.json", &root, err);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map"), *e;
    int count = cJSON_GetArraySize(wm);
    size_t u = 0;
    const char **names = calloc((size_t)count + 1, sizeof *names);
    if (!st && !names)
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
    if (!st) {
        cJSON_ArrayForEach(e, wm) {
            if (cJSON_IsString(e) && !strchr(e->valuestring, '/'))
                names[u++] = e->valuestring;
        }
    }
    if (u)
        qsort(names, u, sizeof *names, by_name);
    hs_model_file *grown = st ? NULL : realloc(*files, (*k + u + N_HF_FILES) * sizeof **files);
    if (!st && !grown)
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
    if (grown)
        *files = grown;
    for (size_t i = 0; i < u && !st; i++) {
        if (i && !strcmp(names[i], names[i - 1]))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (!(st = hash_one(path, names[i], &(*files)[*k], err)))
            (*k)++;
    }
    free(names);
    cJSON_Delete(root);
    free(text);
    return st;
}

hs_status hs_model_files_hash(const hs_model *m, hs_model_file **out, int *n, hs_error *err)
{
    *out = NULL;
    *n = 0;
    const char *path = m->path;
    hs_model_file *files = calloc(N_HF_FILES, sizeof *files);
    if (!files)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    hs_status st = HS_OK;
    int k = 0;
    if (m->format == HS_FORMAT_GGUF) {
        const char *base = strrchr(path, '/');
        st = hash_one(path, base ? base + 1 : path, &files[k], err);
        k += st == HS_OK;
    } else {
        for (size_t i = 0; i < N_HF_FILES && st == HS_OK; i++) {
            char full[4200];
            struct stat sb;
            snprintf(full, sizeof full, "%s/%s", path, hf_files[i]);
            if (stat(full, &sb) != 0 || !S_ISREG(sb.st_mode))
                continue;
            st = hash_one(full, hf_files[i], &files[k], err);
            k += st == HS_OK;
            if (!st && !strcmp(hf_files[i], "model.safetensors.index.json"))
                st = hash_shards(path, &files, &k, err);
        }
    }
    if (st) {
        hs_model_files_free(files, k);
        return st;
    }
    *out = files;
    *n = k;
    return HS_OK;
}
