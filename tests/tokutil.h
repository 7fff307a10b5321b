/* Helpers of the tokenizer suites (test_tokenizer.c, test_tokenizer_json.c,
 * test_tokenizer_family.c): golden files, hex-coded cases, the comparison of an encoding with
 * the library's ids, and the GPT-2 and BERT tokenizers of fixtures/tokenizer (header-only,
 * test code only). */
#ifndef HEADSCOPE_TOKUTIL_H
#define HEADSCOPE_TOKUTIL_H

#include <cJSON.h>
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/tokenizer.h"
#include "testutil.h"

#define FIX "fixtures/tokenizer/"

/* Decodes hex into a malloc'd buffer; *len gets the byte count. */
static inline char *tu_unhex(const char *hex, size_t *len)
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

/* The first 60 bytes of a case for failure messages, control bytes as \xNN. */
static inline const char *tu_show_text(const char *s, size_t len, char *buf, size_t cap)
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

/* Encodes one golden case ({"text_hex"[, "pair_hex"]}) with t and compares ids and type ids
 * with the library's (ids: a json array; n_first: tokens of type id 0, the rest 1). A
 * difference is logged (label, case number) when log is non-zero. Returns 1 when identical. */
static inline int tu_golden_case(const hs_tokenizer *t, const cJSON *c, const cJSON *ids, int n_first,
                                 const char *label, size_t idx, int log, int *was_pair)
{
    size_t len, plen = 0;
    char *text = tu_unhex(cJSON_GetObjectItemCaseSensitive(c, "text_hex")->valuestring, &len);
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(c, "pair_hex");
    char *pair = cJSON_IsString(ph) ? tu_unhex(ph->valuestring, &plen) : NULL;
    hs_encoding e = {0};
    hs_error err = {{0}};
    cr_assert_eq(hs_tokenizer_encode(t, text, len, pair, plen, &e, &err), HS_OK, "%s case %zu: %s", label, idx,
                 err.msg);
    size_t want_n = (size_t)cJSON_GetArraySize(ids), i = 0;
    int same = e.n == want_n;
    for (const cJSON *a = ids->child; same && a; a = a->next, i++)
        same = e.ids[i] == a->valueint && e.type_ids[i] == (i < (size_t)n_first ? 0 : 1);
    if (!same && log) {
        char shown[300], got[200] = "", want[200] = "";
        size_t w = 0;
        for (i = 0; i < e.n && w < 180; i++)
            w += (size_t)snprintf(got + w, sizeof got - w, " %d:%d", e.ids[i], e.type_ids[i]);
        w = 0;
        for (const cJSON *a = ids->child; a && w < 180; a = a->next)
            w += (size_t)snprintf(want + w, sizeof want - w, " %d", a->valueint);
        cr_log_error("%s case %zu (text \"%s\"%s): got%s, expected%s (%d type 0)", label, idx,
                     tu_show_text(text, len, shown, sizeof shown), pair ? " + pair" : "", got, want, n_first);
    }
    if (was_pair)
        *was_pair = pair != NULL;
    hs_encoding_free(&e);
    free(pair);
    free(text);
    return same;
}

/* Reads and parses a json file or fails the test. */
static inline cJSON *tu_read_json(const char *path)
{
    size_t n;
    char *buf = tu_slurp(path, &n);
    cJSON *j = cJSON_ParseWithLength(buf, n);
    free(buf);
    cr_assert_not_null(j, "%s is not valid json", path);
    return j;
}

/* Copies src into dir/name. */
static inline void tu_copy_file(const char *src, const char *dir, const char *name)
{
    char dst[256];
    size_t len;
    char *buf = tu_slurp(src, &len);
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    tu_write_file(dst, buf, len);
    free(buf);
}

/* The end of a load from a temporary folder: a tokenizer exactly when it succeeded; frees
 * it, removes dir, returns st. */
static inline hs_status tu_loaded(hs_status st, hs_tokenizer *t, const char *dir)
{
    if (st == HS_OK)
        cr_assert_not_null(t);
    else
        cr_assert_null(t);
    hs_tokenizer_free(t);
    tu_rm_rf(dir);
    return st;
}

/* Loads a tokenizer.json given as text; returns the status, *msg the message. */
static inline hs_status tu_load_json_text(const char *text, char *msg, size_t cap)
{
    char dir[64], p[128];
    hs_error err = {{0}};
    hs_tokenizer *t = NULL;
    tu_mkdtemp(dir, sizeof dir);
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    tu_write_file(p, text, strlen(text));
    hs_status st = hs_tokenizer_load_json(p, &t, &err);
    snprintf(msg, cap, "%s", err.msg);
    return tu_loaded(st, t, dir);
}

/* The cases of fixtures/tokenizer/family_golden.json (the Rust tokenizers library's ids of
 * the family tokenizers): */
/* Case k of family_golden.json: hf_golden.json's cases[base_indices[k]], then extra_cases. */
typedef struct tu_fam_cases {
    cJSON *golden, *base;
    const cJSON **c; /* (n) the case objects */
    size_t n;
} tu_fam_cases;

/* The cases of a golden file in family_golden.json's format (mqa_golden.json and
 * unigram_golden.json too). */
static inline tu_fam_cases tu_load_fam_cases_from(const char *golden)
{
    tu_fam_cases fc = {0};
    fc.golden = tu_read_json(golden);
    fc.base = tu_read_json("fixtures/tokenizer/hf_golden.json");
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

static inline tu_fam_cases tu_load_fam_cases(void)
{
    return tu_load_fam_cases_from("fixtures/tokenizer/family_golden.json");
}

static inline void tu_free_fam_cases(tu_fam_cases *fc)
{
    free(fc->c);
    cJSON_Delete(fc->golden);
    cJSON_Delete(fc->base);
}

/* Every case (and pair) of a golden file of family_golden.json's layout gives t the
 * library's ids and type ids under tokenizers[name]; at least min_cases cases and min_pairs
 * pairs. */
static inline void tu_check_golden_file(const hs_tokenizer *t, const char *golden_path, const char *name,
                                        size_t min_cases, size_t min_pairs)
{
    tu_fam_cases fc = tu_load_fam_cases_from(golden_path);
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(fc.golden, "tokenizers"), name);
    const cJSON *all_ids = cJSON_GetObjectItemCaseSensitive(ref, "ids");
    const cJSON *n_first = cJSON_GetObjectItemCaseSensitive(ref, "n_first");
    cr_assert_geq(fc.n, min_cases, "%s: only %zu cases", golden_path, fc.n);
    cr_assert_eq((size_t)cJSON_GetArraySize(all_ids), fc.n);
    cr_assert_eq((size_t)cJSON_GetArraySize(n_first), fc.n);
    size_t bad = 0, pairs = 0;
    const cJSON *ids = all_ids->child, *nf = n_first->child;
    for (size_t k = 0; k < fc.n; k++, ids = ids->next, nf = nf->next) {
        int was_pair;
        if (!tu_golden_case(t, fc.c[k], ids, nf->valueint, name, k, bad < 10, &was_pair))
            bad++;
        pairs += (size_t)was_pair;
    }
    cr_log_info("%s: %zu of %zu golden cases identical (%zu pairs)", name, fc.n - bad, fc.n, pairs);
    cr_assert_eq(bad, 0, "%s: %zu of %zu golden cases differ from the library", name, bad, fc.n);
    cr_assert_geq(pairs, min_pairs);
    tu_free_fam_cases(&fc);
}

/* ---- the GPT-2 and BERT tokenizers of fixtures/tokenizer ---------------------------------- */

#define GPT2_VOCAB FIX "gpt2/vocab.json"
#define GPT2_MERGES FIX "gpt2/merges.txt"
#define BERT_VOCAB FIX "bert/vocab.txt"

static inline hs_tokenizer *gpt2(void)
{
    hs_tokenizer *t = NULL;
    hs_error err = {{0}};
    hs_status st = hs_tokenizer_load_gpt2(GPT2_VOCAB, GPT2_MERGES, &t, &err);
    cr_assert_eq(st, HS_OK, "cannot load gpt-2 tokenizer: %s", err.msg);
    return t;
}

static inline hs_tokenizer *bert(int lowercase)
{
    hs_tokenizer *t = NULL;
    hs_error err = {{0}};
    hs_status st = hs_tokenizer_load_bert(BERT_VOCAB, lowercase, &t, &err);
    cr_assert_eq(st, HS_OK, "cannot load bert tokenizer: %s", err.msg);
    return t;
}

/* A tokenizer.json that must load. */
static inline hs_tokenizer *tu_json_tok(const char *path)
{
    hs_tokenizer *t = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_tokenizer_load_json(path, &t, &err), HS_OK, "%s: %s", path, err.msg);
    return t;
}

static inline hs_encoding enc_pair(const hs_tokenizer *t, const char *text, size_t len,
                                   const char *pair, size_t pair_len)
{
    hs_encoding e = {0};
    hs_error err = {{0}};
    hs_status st = hs_tokenizer_encode(t, text, len, pair, pair_len, &e, &err);
    cr_assert_eq(st, HS_OK, "encode failed: %s", err.msg);
    return e;
}

static inline hs_encoding enc(const hs_tokenizer *t, const char *text)
{
    return enc_pair(t, text, strlen(text), NULL, 0);
}

static inline void assert_ids(const hs_encoding *e, const int32_t *want, size_t n,
                              const char *what)
{
    cr_assert_eq(e->n, n, "%s: %zu tokens, expected %zu", what, e->n, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(e->ids[i], want[i], "%s: token %zu is %d, expected %d", what, i, e->ids[i],
                     want[i]);
}

#define ASSERT_IDS(e, what, ...)                                                               \
    do {                                                                                       \
        const int32_t want_[] = {__VA_ARGS__};                                                 \
        assert_ids((e), want_, sizeof want_ / sizeof want_[0], (what));                        \
    } while (0)

/* Every case of hf_golden.json must give the reference's ids and type ids (key: gpt2,
 * bert_uncased or bert_cased). Mismatches are logged (up to 10) and counted. */
static inline void check_golden(const hs_tokenizer *t, const char *key)
{
    cJSON *root = tu_read_json(FIX "hf_golden.json");
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(root, key);
    const cJSON *all_ids = cJSON_GetObjectItemCaseSensitive(ref, "ids");
    const cJSON *n_first = cJSON_GetObjectItemCaseSensitive(ref, "n_first");
    cr_assert(cJSON_IsArray(cases) && cJSON_GetArraySize(cases) >= 2000, "hf_golden.json: no cases");
    cr_assert_eq(cJSON_GetArraySize(all_ids), cJSON_GetArraySize(cases));
    cr_assert_eq(cJSON_GetArraySize(n_first), cJSON_GetArraySize(cases));
    size_t idx = 0, bad = 0;
    const cJSON *ids = all_ids->child, *nf = n_first->child;
    for (const cJSON *c = cases->child; c; c = c->next, ids = ids->next, nf = nf->next, idx++)
        if (!tu_golden_case(t, c, ids, nf->valueint, key, idx, bad < 10, NULL))
            bad++;
    cr_log_info("%s: %zu of %zu golden cases identical", key, idx - bad, idx);
    cr_assert_eq(bad, 0, "%s: %zu of %zu golden cases differ from the reference", key, bad, idx);
    cJSON_Delete(root);
}

/* call (which passes &err_, the macro's own hs_error) fails with status and a message naming
 * substr. */
#define EXPECT_FAIL(call, status, substr)                                                      \
    do {                                                                                       \
        hs_error err_ = {{0}};                                                                 \
        hs_status st_ = (call);                                                                \
        cr_assert_eq(st_, (status), "expected status %d, got %d (%s)", (status), st_, err_.msg); \
        cr_assert(strstr(err_.msg, (substr)), "message '%s' lacks '%s'", err_.msg, (substr));   \
    } while (0)

#endif /* HEADSCOPE_TOKUTIL_H */
