/*
 * Gemma's tokenizer.json (SentencePiece BPE with byte fallback, no prefix space, Split(" ")
 * after Replace(" ", "▁"), <bos> template) against fixtures/tokenizer/gemma_golden.json: every
 * case of hf_golden.json and family_golden.json's extra cases (2,953 texts and pairs)
 * encoded by Hugging Face's own tokenizers library 0.23.2 from the same file
 * (fixtures/tokenizer/make_gemma_golden.js), ids and type ids compared exactly; a few by
 * hand; and the Split pre-tokenizers still refused.
 */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/tokenizer.h"
#include "model/model_internal.h"
#include "testutil.h"
#include "tokutil.h"

#define GEMMA FIX "families/gemma.tokenizer.json"

static hs_tokenizer *gemma(void)
{
    hs_tokenizer *t = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_tokenizer_load_json(GEMMA, &t, &err), HS_OK, "%s", err.msg);
    return t;
}

Test(tokenizer_gemma, matches_the_library_on_every_case)
{
    hs_tokenizer *t = gemma();
    cJSON *g = tu_read_json(FIX "gemma_golden.json"), *base = tu_read_json(FIX "hf_golden.json");
    cJSON *fam = tu_read_json(FIX "family_golden.json");
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(g, "tokenizers"), "gemma"), "ids");
    const cJSON *nf = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(g, "tokenizers"), "gemma"), "n_first");
    const cJSON *cases[2] = {cJSON_GetObjectItemCaseSensitive(base, "cases"),
                             cJSON_GetObjectItemCaseSensitive(fam, "extra_cases")};
    size_t n = 0, bad = 0, pairs = 0;
    const cJSON *ids = ref->child, *f = nf->child;
    for (int s = 0; s < 2; s++)
        for (const cJSON *c = cases[s]->child; c; c = c->next, ids = ids->next, f = f->next, n++) {
            cr_assert(ids && f, "gemma_golden.json has fewer cases than its inputs");
            int was_pair;
            if (!tu_golden_case(t, c, ids, f->valueint, "gemma", n, bad < 10, &was_pair))
                bad++;
            pairs += (size_t)was_pair;
        }
    cr_assert_null(ids, "gemma_golden.json has more cases than its inputs");
    cr_assert_geq(n, 2000);
    cr_assert_geq(pairs, 200);
    cr_assert_eq(bad, 0, "gemma: %zu of %zu golden cases differ from the library", bad, n);
    cJSON_Delete(fam);
    cJSON_Delete(base);
    cJSON_Delete(g);
    hs_tokenizer_free(t);
}

/* By hand: <bos> (2) first, no "▁" before the first word, a space inside a word's piece, an
 * unseen character as its UTF-8 bytes (<0xNN> at 7 + byte; the tab is "\t" at 16). */
Test(tokenizer_gemma, bos_no_prefix_space_and_byte_fallback)
{
    hs_tokenizer *t = gemma();
    hs_encoding e = {0};
    hs_error err = {{0}};
    cr_assert_eq(hs_tokenizer_encode(t, "a", 1, NULL, 0, &e, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(e.n, 2);
    cr_expect_eq(e.ids[0], 2);
    cr_expect_eq(e.ids[1], hs_tokenizer_id(t, "a"));
    hs_encoding_free(&e);
    cr_assert_eq(hs_tokenizer_encode(t, "\xe2\x98\x83\t", 4, NULL, 0, &e, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(e.n, 5); /* <bos>, the snowman's three bytes, the tab */
    cr_expect_eq(e.ids[1], 7 + 0xe2);
    cr_expect_eq(e.ids[2], 7 + 0x98);
    cr_expect_eq(e.ids[3], 7 + 0x83);
    cr_expect_eq(e.ids[4], 7 + 9);
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
}

/* A Split on a string the normalizer leaves in the text splits words, which headscope does not
 * implement: refused by name. */
Test(tokenizer_gemma, refuses_a_split_string_without_the_replacement)
{
    char *text, tmp[64], path[128];
    size_t len;
    hs_error err = {{0}};
    cr_assert_eq(hs_read_file(GEMMA, 1 << 24, &text, &len, &err), HS_OK, "%s", err.msg);
    cJSON *j = cJSON_Parse(text);
    cJSON_ReplaceItemInObject(j, "normalizer", cJSON_CreateNull());
    char *bad = cJSON_PrintUnformatted(j);
    tu_mkdtemp(tmp, sizeof tmp);
    snprintf(path, sizeof path, "%s/tokenizer.json", tmp);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(bad, f);
    fclose(f);
    hs_tokenizer *t = NULL;
    EXPECT_FAIL(hs_tokenizer_load_json(path, &t, &err_), HS_E_UNSUPPORTED,
                "pre_tokenizer 'Split' on the string ' ' is supported only where the normalizer "
                "replaces it");
    tu_rm_rf(tmp);
    free(bad);
    cJSON_Delete(j);
    free(text);
}
