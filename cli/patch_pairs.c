/* headscope patch: the pairs file (one JSON object a line) read into token ids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "cli.h"
#include "core/core.h"
#include "patch_cli.h"

#define PAIRS_MAX_BYTES ((size_t)256 << 20)

void patch_pairs_free(patch_pairs *pp)
{
    for (int i = 0; i < pp->count; i++) {
        free(pp->ids[2 * i]);
        free(pp->ids[2 * i + 1]);
    }
    free(pp->ids);
    free(pp->pairs);
    free(pp->lines);
    memset(pp, 0, sizeof *pp);
}

/* The one token of an answer: a string (its tokens without the template's special ones must
 * be one) or an id (key_id). Prints the error naming the line; returns 0 or EXIT_FAIL. */
static int answer_of(const hs_model *m, const char *path, int line, const cJSON *o,
                     const char *key, int required, int32_t *id)
{
    char key_id[32];
    snprintf(key_id, sizeof key_id, "%s_id", key);
    const cJSON *s = cJSON_GetObjectItem(o, key), *n = cJSON_GetObjectItem(o, key_id);
    int V = hs_model_config_of(m)->vocab_size;
    *id = -1;
    if (n) {
        if (!cJSON_IsNumber(n) || n->valuedouble != (double)(int32_t)n->valuedouble ||
            n->valuedouble < 0 || n->valuedouble >= V) {
            cli_error(PATCH_CMD, "'%s' line %d: %s is not a token id in [0, %d)", path, line,
                      key_id, V);
            return EXIT_FAIL;
        }
        *id = (int32_t)n->valuedouble;
        return 0;
    }
    if (!cJSON_IsString(s)) {
        if (!required && !s)
            return 0;
        cli_error(PATCH_CMD, "'%s' line %d: no \"%s\" (a string of one token) or \"%s\"", path,
                  line, key, key_id);
        return EXIT_FAIL;
    }
    hs_error err = {{0}};
    int count;
    if (hs_patch_answer_id(m, s->valuestring, id, &count, &err)) {
        cli_error(PATCH_CMD, "'%s' line %d: %s%s%s", path, line, key, count < 0 ? ": " : " ",
                  err.msg);
        return EXIT_FAIL;
    }
    return 0;
}

/* key_ids: an array of token ids, into ids (malloc'd), n tokens. */
static int prompt_ids(const hs_model *m, const char *path, int line, const cJSON *a,
                      const char *key, int32_t **ids, int *n)
{
    const hs_model_config *c = hs_model_config_of(m);
    int count = cJSON_GetArraySize(a);
    if (!cJSON_IsArray(a) || count < 1 || count > c->n_ctx) {
        cli_error(PATCH_CMD, "'%s' line %d: %s_ids is not an array of 1 to %d token ids", path,
                  line, key, c->n_ctx);
        return EXIT_FAIL;
    }
    if (!(*ids = malloc((size_t)count * sizeof **ids))) {
        cli_error(PATCH_CMD, "out of memory");
        return EXIT_FAIL;
    }
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a)
    {
        if (!cJSON_IsNumber(e) || e->valuedouble != (double)(int32_t)e->valuedouble ||
            e->valuedouble < 0 || e->valuedouble >= c->vocab_size) {
            cli_error(PATCH_CMD, "'%s' line %d: %s_ids[%d] is not a token id in [0, %d)", path,
                      line, key, i, c->vocab_size);
            free(*ids);
            *ids = NULL;
            return EXIT_FAIL;
        }
        (*ids)[i++] = (int32_t)e->valuedouble;
    }
    *n = count;
    return 0;
}

/* A prompt of the pair (the text key, or key_ids) into ids (malloc'd), n tokens. */
static int prompt_of(const hs_model *m, const char *path, int line, const cJSON *o,
                     const char *key, int32_t **ids, int *n)
{
    char key_ids[32];
    snprintf(key_ids, sizeof key_ids, "%s_ids", key);
    const cJSON *s = cJSON_GetObjectItem(o, key), *a = cJSON_GetObjectItem(o, key_ids);
    if (a)
        return prompt_ids(m, path, line, a, key, ids, n);
    if (!cJSON_IsString(s)) {
        cli_error(PATCH_CMD, "'%s' line %d: no \"%s\" string (or \"%s\")", path, line, key,
                  key_ids);
        return EXIT_FAIL;
    }
    hs_encoding e = {0};
    hs_error err = {{0}};
    int n_ctx = hs_model_config_of(m)->n_ctx;
    if (hs_tokenizer_encode(hs_model_tokenizer(m), s->valuestring, strlen(s->valuestring), NULL,
                            0, &e, &err)) {
        cli_error(PATCH_CMD, "'%s' line %d: %s: %s", path, line, key, err.msg);
        return EXIT_FAIL;
    }
    if (e.n < 1 || e.n > (size_t)n_ctx) {
        cli_error(PATCH_CMD, "'%s' line %d: %s has %zu tokens (1 to the model's context of %d)",
                  path, line, key, e.n, n_ctx);
        hs_encoding_free(&e);
        return EXIT_FAIL;
    }
    *n = (int)e.n;
    *ids = e.ids; /* ours now */
    e.ids = NULL;
    hs_encoding_free(&e);
    return 0;
}

/* One line's object into pair i. */
static int pair_of(const hs_model *m, const char *path, int line, const cJSON *o, int need_wrong,
                   patch_pairs *pp)
{
    int i = pp->count, n2 = 0;
    hs_patch_pair *p = &pp->pairs[i];
    int32_t **ids = &pp->ids[2 * i];
    if (!cJSON_IsObject(o)) {
        cli_error(PATCH_CMD, "'%s' line %d: not a JSON object", path, line);
        return EXIT_FAIL;
    }
    if (prompt_of(m, path, line, o, "clean", &ids[0], &p->n))
        return EXIT_FAIL;
    pp->count++; /* its ids are ours to free from here */
    if (prompt_of(m, path, line, o, "corrupt", &ids[1], &n2))
        return EXIT_FAIL;
    p->clean = ids[0];
    p->corrupt = ids[1];
    hs_error err = {{0}};
    if (hs_patch_lengths_check(m, ids[0], p->n, ids[1], n2, &err)) {
        cli_error(PATCH_CMD, "'%s' line %d: %s", path, line, err.msg);
        return EXIT_FAIL;
    }
    if (answer_of(m, path, line, o, "answer", 1, &p->answer) ||
        answer_of(m, path, line, o, "wrong", need_wrong, &p->wrong))
        return EXIT_FAIL;
    if (hs_patch_pair_pos(m, p, &err)) {
        cli_error(PATCH_CMD, "'%s' line %d: %s", path, line, err.msg);
        return EXIT_FAIL;
    }
    return 0;
}

int patch_pairs_shard(const char *path, patch_pairs *pp, int i, int n)
{
    int kept = 0, count = pp->count;
    for (int j = 0; j < count; j++) {
        if (j % n != i - 1) {
            free(pp->ids[2 * j]);
            free(pp->ids[2 * j + 1]);
            continue;
        }
        pp->pairs[kept] = pp->pairs[j];
        pp->ids[2 * kept] = pp->ids[2 * j];
        pp->ids[2 * kept + 1] = pp->ids[2 * j + 1];
        pp->lines[kept++] = pp->lines[j];
    }
    pp->count = kept;
    if (!kept) {
        cli_error(PATCH_CMD, "--shard %d/%d: '%s' holds %d pairs, none of them this shard's",
                  i, n, path, count);
        return EXIT_FAIL;
    }
    return 0;
}

int patch_pairs_read(const hs_model *m, const char *path, int need_wrong, patch_pairs *pp)
{
    char *text = NULL;
    size_t len = 0;
    hs_error err = {{0}};
    memset(pp, 0, sizeof *pp);
    if (!hs_model_tokenizer(m)) {
        cli_error(PATCH_CMD, "'%s' has no tokenizer files", hs_model_path(m));
        return EXIT_FAIL;
    }
    if (hs_read_file(path, PAIRS_MAX_BYTES, &text, &len, &err)) {
        cli_error(PATCH_CMD, "%s", err.msg);
        return EXIT_FAIL;
    }
    int cap = 1, rc = 0;
    for (size_t i = 0; i < len; i++)
        cap += text[i] == '\n';
    pp->pairs = calloc((size_t)cap, sizeof *pp->pairs);
    pp->ids = calloc(2 * (size_t)cap, sizeof *pp->ids);
    pp->lines = calloc((size_t)cap, sizeof *pp->lines);
    if (!pp->pairs || !pp->ids || !pp->lines) {
        cli_error(PATCH_CMD, "out of memory");
        rc = EXIT_FAIL;
    }
    int line = 0;
    for (size_t at = 0; !rc && at < len;) {
        size_t end = at;
        while (end < len && text[end] != '\n')
            end++;
        line++;
        size_t a = at, b = end;
        while (a < b && (text[a] == ' ' || text[a] == '\t' || text[a] == '\r'))
            a++;
        while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\t' || text[b - 1] == '\r'))
            b--;
        at = end + 1;
        if (a == b)
            continue; /* a blank line */
        char why[160];
        cJSON *o = hs_json_parse_strict(text + a, b - a, why, sizeof why);
        if (!o) {
            cli_error(PATCH_CMD, "'%s' line %d is not valid JSON (%s)", path, line, why);
            rc = EXIT_FAIL;
            break;
        }
        pp->lines[pp->count] = line;
        rc = pair_of(m, path, line, o, need_wrong, pp);
        cJSON_Delete(o);
    }
    free(text);
    if (!rc && !pp->count) {
        cli_error(PATCH_CMD, "'%s' holds no pairs", path);
        rc = EXIT_FAIL;
    }
    if (rc)
        patch_pairs_free(pp);
    return rc;
}
