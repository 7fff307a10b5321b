/*
 * tokenizer.json files (the one file of Hugging Face's tokenizers library) against the same
 * golden ids as the vocabulary files of test_tokenizer.c, the folder's agreement between
 * the two, unsupported components refused by name, and the bounded encoding
 * (hs_tokenizer_encode_max) against the full one. Everything read lives in the repository.
 */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/tokenizer.h"
#include "testutil.h"
#include "tokutil.h"

/* ---- tokenizer.json ------------------------------------------------------------------------ */

#include "model/model_internal.h"

Test(tokenizer_json, gpt2_matches_reference_on_every_golden_case)
{
    hs_tokenizer *t = tu_json_tok(FIX "gpt2.tokenizer.json");
    cr_assert_eq(hs_tokenizer_vocab_size(t), 50257);
    cr_assert_eq(hs_tokenizer_merge_count(t), 50000);
    check_golden(t, "gpt2");
    hs_tokenizer_free(t);
}

Test(tokenizer_json, bert_matches_reference_on_every_golden_case)
{
    hs_tokenizer *t = tu_json_tok(FIX "bert-uncased.tokenizer.json");
    cr_assert_eq(hs_tokenizer_lowercase(t), 1);
    check_golden(t, "bert_uncased");
    hs_tokenizer_free(t);
    t = tu_json_tok(FIX "bert-cased.tokenizer.json");
    cr_assert_eq(hs_tokenizer_lowercase(t), 0);
    check_golden(t, "bert_cased");
    hs_tokenizer_free(t);
}

Test(tokenizer_json, folder_with_only_tokenizer_json_gives_the_same_ids)
{
    static const struct { const char *json, *key; hs_family fam; } cases[] = {
        {FIX "gpt2.tokenizer.json", "gpt2", HS_FAMILY_GPT2},
        {FIX "bert-uncased.tokenizer.json", "bert_uncased", HS_FAMILY_BERT},
    };
    for (size_t k = 0; k < 2; k++) {
        char dir[64];
        hs_tokenizer *t = NULL;
        hs_error err = {{0}};
        tu_mkdtemp(dir, sizeof dir);
        tu_copy_file(cases[k].json, dir, "tokenizer.json");
        cr_assert_eq(hs_hf_tokenizer_load(dir, hs_arch_of(cases[k].fam), &t, &err), HS_OK, "%s", err.msg);
        cr_assert_not_null(t);
        check_golden(t, cases[k].key);
        hs_tokenizer_free(t);
        tu_rm_rf(dir);
    }
}

Test(tokenizer_json, folder_checks_that_json_and_vocabulary_files_agree)
{
    char dir[64], p[128];
    hs_tokenizer *t = NULL;
    hs_error err = {{0}};
    tu_mkdtemp(dir, sizeof dir);
    tu_copy_file(FIX "bert-uncased.tokenizer.json", dir, "tokenizer.json");
    tu_copy_file(BERT_VOCAB, dir, "vocab.txt");
    cr_assert_eq(hs_hf_tokenizer_load(dir, hs_arch_of(HS_FAMILY_BERT), &t, &err), HS_OK, "%s", err.msg);
    hs_tokenizer_free(t);
    t = NULL;
    /* tokenizer_config.json says cased, tokenizer.json lowercases */
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    tu_write_file(p, "{\"do_lower_case\": false}", 24);
    EXPECT_FAIL(hs_hf_tokenizer_load(dir, hs_arch_of(HS_FAMILY_BERT), &t, &err_), HS_E_FORMAT,
                "tokenizer.json lowercases but tokenizer_config.json says do_lower_case=false");
    cr_assert_null(t);
    remove(p);
    /* a different vocabulary */
    static const char small[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n";
    snprintf(p, sizeof p, "%s/vocab.txt", dir);
    tu_write_file(p, small, sizeof small - 1);
    EXPECT_FAIL(hs_hf_tokenizer_load(dir, hs_arch_of(HS_FAMILY_BERT), &t, &err_), HS_E_FORMAT,
                "tokenizer.json and the vocabulary files differ at id 3");
    cr_assert_null(t);
    tu_rm_rf(dir);
    /* GPT-2: both kinds present and equal */
    tu_mkdtemp(dir, sizeof dir);
    tu_copy_file(FIX "gpt2.tokenizer.json", dir, "tokenizer.json");
    tu_copy_file(GPT2_VOCAB, dir, "vocab.json");
    tu_copy_file(GPT2_MERGES, dir, "merges.txt");
    cr_assert_eq(hs_hf_tokenizer_load(dir, hs_arch_of(HS_FAMILY_GPT2), &t, &err), HS_OK, "%s", err.msg);
    hs_encoding e = enc(t, "hello <|endoftext|> world");
    ASSERT_IDS(&e, "folder gpt2", 31373, 220, 50256, 995);
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
    tu_rm_rf(dir);
}

Test(tokenizer_json, byte_level_add_prefix_space_adds_one_per_segment)
{
    size_t len;
    char *text = tu_slurp(FIX "gpt2.tokenizer.json", &len);
    const char *from = "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false";
    char *at = strstr(text, from);
    cr_assert_not_null(at);
    memcpy(at + strlen(from) - 5, "true ", 5); /* "true " is valid json where "false" was */
    char dir[64], p[128];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    tu_write_file(p, text, len);
    free(text);
    hs_tokenizer *t = tu_json_tok(p);
    /* ids from tokenizers 0.23.2 with ByteLevel(add_prefix_space=True) */
    hs_encoding e = enc(t, "hi");
    ASSERT_IDS(&e, "hi", 23105);
    hs_encoding_free(&e);
    e = enc(t, "a<|endoftext|>b");
    ASSERT_IDS(&e, "a eot b", 257, 50256, 275);
    hs_encoding_free(&e);
    e = enc(t, "\nhi");
    ASSERT_IDS(&e, "newline", 220, 198, 5303);
    hs_encoding_free(&e);
    e = enc(t, " hi");
    ASSERT_IDS(&e, "already spaced", 23105);
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
    tu_rm_rf(dir);
}

#define WP_JSON(norm, pre, post, added, model_extra)                                           \
    "{\"version\":\"1.0\",\"added_tokens\":[" added "],\"normalizer\":" norm                    \
    ",\"pre_tokenizer\":" pre ",\"post_processor\":" post ",\"decoder\":null,"                 \
    "\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\"" model_extra ",\"vocab\":"      \
    "{\"[PAD]\":0,\"[UNK]\":1,\"[CLS]\":2,\"[SEP]\":3,\"[MASK]\":4,\"hello\":5,\"##lo\":6,"    \
    "\"hel\":7,\"<new>\":8}}}"
#define BERT_PRE "{\"type\":\"BertPreTokenizer\"}"
#define BERT_POST "{\"type\":\"BertProcessing\",\"sep\":[\"[SEP]\",3],\"cls\":[\"[CLS]\",2]}"
#define BERT_NORM "{\"type\":\"BertNormalizer\",\"lowercase\":true}"

Test(tokenizer_json, reads_a_small_wordpiece_file_with_added_tokens)
{
    static const char text[] = WP_JSON(
        "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFD\"},{\"type\":\"Lowercase\"},"
        "{\"type\":\"StripAccents\"}]}",
        BERT_PRE, BERT_POST,
        "{\"id\":4,\"content\":\"[MASK]\",\"special\":true},"
        "{\"id\":9,\"content\":\"<extra>\",\"special\":false}", "");
    char dir[64], p[128];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    tu_write_file(p, text, sizeof text - 1);
    hs_tokenizer *t = tu_json_tok(p);
    cr_assert_eq(hs_tokenizer_vocab_size(t), 10);
    hs_encoding e = enc(t, "HÉLlo<extra>[MASK] helLO x");
    ASSERT_IDS(&e, "small", 2, 5, 9, 4, 5, 1, 3);
    hs_encoding_free(&e);
    cr_assert_str_eq(hs_tokenizer_token(t, 9), "<extra>");
    hs_tokenizer_free(t);
    tu_rm_rf(dir);
}

Test(tokenizer_json, refuses_unsupported_components_naming_them)
{
    char msg[HS_ERROR_MSG_MAX];
    static const struct { const char *text, *want; hs_status st; } cases[] = {
        {WP_JSON(BERT_NORM, "{\"type\":\"Metaspace\",\"replacement\":\"_\"}", BERT_POST, "", ""),
         "tokenizer.json: pre_tokenizer 'Metaspace' is not supported", HS_E_UNSUPPORTED},
        {WP_JSON("{\"type\":\"NFKC\"}", BERT_PRE, BERT_POST, "", ""),
         "tokenizer.json: normalizer 'NFKC' is not supported", HS_E_UNSUPPORTED},
        {WP_JSON(BERT_NORM, BERT_PRE, "{\"type\":\"RobertaProcessing\"}", "", ""),
         "tokenizer.json: RobertaProcessing needs \"sep\" and \"cls\" as [token, id]", HS_E_FORMAT},
        {WP_JSON(BERT_NORM, BERT_PRE, "{\"type\":\"Sequence\",\"processors\":[" BERT_POST "," BERT_POST "]}", "", ""),
         "post_processor 'Sequence' with more than ByteLevel and one other is not supported", HS_E_UNSUPPORTED},
        {WP_JSON(BERT_NORM, BERT_PRE, BERT_POST,
                 "{\"id\":9,\"content\":\"x\",\"single_word\":true}", ""),
         "added token 'x' with single_word is not supported", HS_E_UNSUPPORTED},
        {WP_JSON(BERT_NORM, BERT_PRE, BERT_POST, "{\"id\":12,\"content\":\"x\"}", ""),
         "added token ids must continue the vocabulary (expected id 9, found 12)", HS_E_FORMAT},
        {WP_JSON(BERT_NORM, BERT_PRE, BERT_POST, "{\"id\":5,\"content\":\"x\"}", ""),
         "added token 'x' has id 5, which model.vocab gives to another token", HS_E_FORMAT},
        {WP_JSON(BERT_NORM, BERT_PRE, "null", "", ""),
         "a WordPiece model needs BertProcessing or TemplateProcessing", HS_E_UNSUPPORTED},
        {WP_JSON(BERT_NORM, BERT_PRE, BERT_POST, "", ",\"max_input_chars_per_word\":0"),
         "max_input_chars_per_word must be 1..10000", HS_E_FORMAT},
        {"{\"model\":{\"type\":\"WordLevel\",\"vocab\":{}}}",
         "tokenizer.json: model 'WordLevel' is not supported", HS_E_UNSUPPORTED},
        {"{\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\","
         "\"vocab\":{\"a\":0},\"merges\":[],\"byte_fallback\":true}}",
         "BPE byte_fallback with a ByteLevel pre-tokenizer is not supported", HS_E_UNSUPPORTED},
        {"{\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\","
         "\"vocab\":{\"a\":0,\"b\":1},\"merges\":[[\"a\",\"b\",\"c\"]]}}",
         "merge 0 is neither \"a b\" nor [\"a\", \"b\"]", HS_E_FORMAT},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"pre_tokenizer\":{\"type\":\"ByteLevel\"},"
         "\"added_tokens\":[],\"normalizer\":{\"type\":\"Lowercase\"}}",
         "normalizer 'Lowercase' is not supported with a BPE model", HS_E_UNSUPPORTED},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":3}},\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}",
         "token 'a' has an id that is not an integer in 0..0", HS_E_FORMAT},
        {"[1,2]", "is not a json object", HS_E_FORMAT},
        {"{\"model\":", "the tokenizer file is not valid JSON", HS_E_FORMAT},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        hs_status st = tu_load_json_text(cases[k].text, msg, sizeof msg);
        cr_assert_eq(st, cases[k].st, "case %zu: status %d (%s)", k, st, msg);
        cr_assert(strstr(msg, cases[k].want), "case %zu: message '%s' lacks '%s'", k, msg, cases[k].want);
    }
    hs_tokenizer *t = NULL;
    EXPECT_FAIL(hs_tokenizer_load_json("/nonexistent/tokenizer.json", &t, &err_), HS_E_IO,
                "cannot open '/nonexistent/tokenizer.json'");
    cr_assert_null(t);
}

/* ---- bounded encoding (hs_tokenizer_encode_max) --------------------------------------- */

/* Three of the repository's English texts joined (about 50 KB: a dozen chunks), with [MASK]
 * and <|endoftext|> put in every 997 bytes so added tokens meet chunk ends too. */
static char *long_text(size_t *len)
{
    static const char *files[] = {FIX "english/license-GPL-3.txt", FIX "english/docs-usage.md",
                                  FIX "english/license-Apache-2.0.txt"};
    size_t cap = 1 << 20, n = 0;
    char *s = malloc(cap);
    cr_assert_not_null(s);
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        FILE *fp = fopen(files[f], "rb");
        cr_assert_not_null(fp, "%s", files[f]);
        n += fread(s + n, 1, cap / 2 - n, fp);
        fclose(fp);
    }
    for (size_t i = 997; i + 16 < n; i += 997)
        memcpy(s + i, (i / 997) % 2 ? " [MASK] " : "<|endoftext|>", (i / 997) % 2 ? 8 : 13);
    *len = n;
    return s;
}

/* Encoding as far as a limit needs, then truncating, gives exactly the full encoding
 * truncated, for GPT-2 and BERT, single texts and pairs, limits from 1 to past the text; and
 * the bounded encoding holds at most one chunk (4096 bytes) of tokens past the limit. */
Test(tokenizer_limit, bounded_encoding_truncates_like_the_full_one)
{
    size_t len;
    char *text = long_text(&len);
    hs_tokenizer *toks[] = {gpt2(), bert(1)};
    static const size_t maxes[] = {2, 3, 7, 64, 128, 512, 1000, 4096, 100000};
    hs_error err = {{0}};
    for (int k = 0; k < 2; k++) {
        for (int pair = 0; pair <= k; pair++) { /* pairs for BERT only */
            const char *b = pair ? text + len / 2 : NULL;
            size_t la = pair ? len / 2 : len, lb = pair ? len - len / 2 : 0;
            hs_encoding full = {0};
            cr_assert_eq(hs_tokenizer_encode(toks[k], text, la, b, lb, &full, &err), HS_OK, "%s",
                         err.msg);
            for (size_t m = 0; m < sizeof maxes / sizeof maxes[0]; m++) {
                size_t max = maxes[m];
                hs_encoding cut = {0}, want = {0};
                cr_assert_eq(hs_tokenizer_encode_max(toks[k], text, la, b, lb, max, &cut, &err),
                             HS_OK, "%s", err.msg);
                cr_expect_leq(cut.n, (pair ? 2 : 1) * (max + 4097) + 3, "max %zu: %zu tokens", max,
                              cut.n);
                cr_assert_eq(hs_tokenizer_encode(toks[k], text, la, b, lb, &want, &err), HS_OK);
                hs_encoding_truncate(toks[k], &cut, max);
                hs_encoding_truncate(toks[k], &want, max);
                cr_assert_eq(cut.n, want.n, "tok %d pair %d max %zu: %zu vs %zu tokens", k, pair,
                             max, cut.n, want.n);
                for (size_t i = 0; i < want.n; i++) {
                    cr_assert_eq(cut.ids[i], want.ids[i], "tok %d pair %d max %zu: id %zu", k, pair,
                                 max, i);
                    cr_assert_eq(cut.type_ids[i], want.type_ids[i]);
                }
                hs_encoding_free(&cut);
                hs_encoding_free(&want);
            }
            cr_expect_gt(full.n, 8000u, "the text is long enough to need many chunks");
            hs_encoding_free(&full);
        }
        hs_tokenizer_free(toks[k]);
    }
    free(text);
}
