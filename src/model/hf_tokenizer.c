/* Hugging Face folder: which tokenizer files to read and how (vocab.json + merges.txt,
 * vocab.txt + tokenizer_config.json). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "model/model_internal.h"

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* do_lower_case from tokenizer_config.json (default true). */
static hs_status read_lowercase(const char *path, int *lower, hs_error *err)
{
    *lower = 1;
    if (!file_exists(path))
        return HS_OK;
    char *text = NULL;
    size_t len = 0;
    hs_status st = hs_read_file(path, 16u << 20, &text, &len, err);
    if (st)
        return st;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return hs_fail(err, HS_E_FORMAT, "'%s' is not a JSON object", path);
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "do_lower_case");
    if (cJSON_IsBool(v))
        *lower = cJSON_IsTrue(v);
    cJSON_Delete(root);
    return HS_OK;
}

hs_status hs_hf_tokenizer_load(const char *dir, hs_family family, hs_tokenizer **out,
                               hs_error *err)
{
    char a[4096], b[4096];
    if (family == HS_FAMILY_GPT2) {
        snprintf(a, sizeof a, "%s/vocab.json", dir);
        snprintf(b, sizeof b, "%s/merges.txt", dir);
        int ha = file_exists(a), hb = file_exists(b);
        if (!ha && !hb)
            return HS_OK; /* weights only: fine for id-level work */
        if (ha != hb)
            return hs_fail(err, HS_E_IO, "'%s' has %s but not %s", dir,
                           ha ? "vocab.json" : "merges.txt", ha ? "merges.txt" : "vocab.json");
        return hs_tokenizer_load_gpt2(a, b, out, err);
    }
    snprintf(a, sizeof a, "%s/vocab.txt", dir);
    if (!file_exists(a))
        return HS_OK;
    snprintf(b, sizeof b, "%s/tokenizer_config.json", dir);
    int lower;
    hs_status st = read_lowercase(b, &lower, err);
    if (st)
        return st;
    return hs_tokenizer_load_bert(a, lower, out, err);
}

