/* The files a model was read from, with their sizes and SHA-256 digests, for reports. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/core.h"
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

/* Appends the shards of a sharded checkpoint, as the loader kept them: each once, sorted
 * by name. */
static hs_status hash_shards(const hs_model *m, hs_model_file **files, int *k, hs_error *err)
{
    hs_model_file *grown = realloc(*files, ((size_t)*k + (size_t)m->n_shards + N_HF_FILES) *
                                               sizeof **files);
    if (!grown)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    *files = grown;
    for (int i = 0; i < m->n_shards; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", m->path, m->shards[i]);
        hs_status st = hash_one(path, m->shards[i], &(*files)[*k], err);
        if (st)
            return st;
        (*k)++;
    }
    return HS_OK;
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
                st = hash_shards(m, &files, &k, err);
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
