/*
 * Tokenizers against golden ids from Hugging Face's own tokenizers library (the Rust code
 * behind transformers 5's GPT2Tokenizer and BertTokenizer; fixtures/tokenizer/make_goldens.js),
 * plus known ids, special tokens, pairs, display forms, invalid UTF-8 and corrupt vocabulary
 * files. Everything read lives in the repository.
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
#include "tokutil.h"

static uint64_t fnv1a_ids(const int32_t *ids, size_t n)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)ids[i];
        for (int k = 0; k < 4; k++) {
            h ^= (v >> (8 * k)) & 0xFF;
            h *= 0x100000001B3ull;
        }
    }
    return h;
}

/* The code point sweep: chunks of 64 code points, concatenated (GPT-2) or space-separated
 * (BERT); token count and id hash must match the reference for every chunk. */
static void check_sweep(const hs_tokenizer *t, const char *key, int spaced)
{
    cJSON *root = tu_read_json(FIX "sweep_golden.json");
    const cJSON *ranges = cJSON_GetObjectItemCaseSensitive(root, "ranges");
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(root, key);
    int chunk = cJSON_GetObjectItemCaseSensitive(root, "chunk")->valueint;
    size_t n_cp = 0;
    for (const cJSON *r = ranges->child; r; r = r->next)
        n_cp += (size_t)(cJSON_GetArrayItem(r, 1)->valueint - cJSON_GetArrayItem(r, 0)->valueint + 1);
    int32_t *cps = malloc(n_cp * sizeof *cps);
    cr_assert_not_null(cps);
    size_t k = 0;
    for (const cJSON *r = ranges->child; r; r = r->next)
        for (int c = cJSON_GetArrayItem(r, 0)->valueint; c <= cJSON_GetArrayItem(r, 1)->valueint; c++)
            cps[k++] = c;
    char *buf = malloc((size_t)chunk * 5 + 1);
    cr_assert_not_null(buf);
    size_t ci = 0;
    const cJSON *w = want->child;
    for (size_t start = 0; start < n_cp; start += (size_t)chunk, ci++, w = w->next) {
        cr_assert_not_null(w, "sweep %s: fewer golden chunks than code points", key);
        size_t len = 0;
        for (size_t i = start; i < n_cp && i < start + (size_t)chunk; i++) {
            if (spaced && i > start)
                buf[len++] = ' ';
            uint32_t c = (uint32_t)cps[i];
            if (c < 0x80) {
                buf[len++] = (char)c;
            } else if (c < 0x800) {
                buf[len++] = (char)(0xC0 | (c >> 6));
                buf[len++] = (char)(0x80 | (c & 0x3F));
            } else if (c < 0x10000) {
                buf[len++] = (char)(0xE0 | (c >> 12));
                buf[len++] = (char)(0x80 | ((c >> 6) & 0x3F));
                buf[len++] = (char)(0x80 | (c & 0x3F));
            } else {
                buf[len++] = (char)(0xF0 | (c >> 18));
                buf[len++] = (char)(0x80 | ((c >> 12) & 0x3F));
                buf[len++] = (char)(0x80 | ((c >> 6) & 0x3F));
                buf[len++] = (char)(0x80 | (c & 0x3F));
            }
        }
        hs_encoding e = enc_pair(t, buf, len, NULL, 0);
        char hash[17];
        snprintf(hash, sizeof hash, "%016llx", (unsigned long long)fnv1a_ids(e.ids, e.n));
        int want_n = cJSON_GetArrayItem(w, 0)->valueint;
        const char *want_h = cJSON_GetArrayItem(w, 1)->valuestring;
        cr_assert(e.n == (size_t)want_n && strcmp(hash, want_h) == 0,
                  "sweep %s chunk %zu (U+%04X..): %zu tokens hash %s, expected %d tokens hash %s",
                  key, ci, (unsigned)cps[start], e.n, hash, want_n, want_h);
        hs_encoding_free(&e);
    }
    cr_assert_null(w, "sweep %s: more golden chunks than code points", key);
    free(buf);
    free(cps);
    cJSON_Delete(root);
}

static void expect_encode_error(const hs_tokenizer *t, const char *text, size_t len,
                                const char *pair, size_t pair_len, const char *want_msg)
{
    hs_encoding e = {0};
    hs_error err = {{0}};
    hs_status st = hs_tokenizer_encode(t, text, len, pair, pair_len, &e, &err);
    cr_assert_eq(st, HS_E_INPUT, "expected HS_E_INPUT, got %d (%s)", st, err.msg);
    cr_assert(strstr(err.msg, want_msg), "message '%s' lacks '%s'", err.msg, want_msg);
    cr_assert_eq(e.n, 0);
    cr_assert_null(e.ids);
}

/* Writes files into a fresh temporary directory and loads them. */
static hs_status load_gpt2_files(const char *vocab, const char *merges, hs_error *err)
{
    char dir[64], vp[128], mp[128];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(vp, sizeof vp, "%s/vocab.json", dir);
    snprintf(mp, sizeof mp, "%s/merges.txt", dir);
    tu_write_file(vp, vocab, strlen(vocab));
    tu_write_file(mp, merges, strlen(merges));
    hs_tokenizer *t = NULL;
    hs_status st = hs_tokenizer_load_gpt2(vp, mp, &t, err);
    return tu_loaded(st, t, dir);
}

static hs_status load_bert_file(const char *vocab, size_t len, hs_tokenizer **out, hs_error *err)
{
    char dir[64], vp[128];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(vp, sizeof vp, "%s/vocab.txt", dir);
    tu_write_file(vp, vocab, len);
    hs_status st = hs_tokenizer_load_bert(vp, 1, out, err);
    tu_rm_rf(dir);
    return st;
}

/* ---- GPT-2 -------------------------------------------------------------------------------- */

Test(tokenizer_gpt2, gives_known_ids_for_hello_world)
{
    hs_tokenizer *t = gpt2();
    hs_encoding e = enc(t, "Hello world");
    ASSERT_IDS(&e, "Hello world", 15496, 995);
    cr_assert_str_eq(hs_tokenizer_token(t, e.ids[0]), "Hello");
    cr_assert_str_eq(hs_tokenizer_token(t, e.ids[1]), "\xc4\xa0world"); /* Ġworld */
    cr_assert_eq(e.type_ids[0], 0);
    hs_encoding_free(&e);
    e = enc(t, "hello world");
    ASSERT_IDS(&e, "hello world", 31373, 995);
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
}

Test(tokenizer_gpt2, recognises_endoftext_whole)
{
    hs_tokenizer *t = gpt2();
    hs_encoding e = enc(t, "hello <|endoftext|> world");
    ASSERT_IDS(&e, "hello <|endoftext|> world", 31373, 220, 50256, 995);
    hs_encoding_free(&e);
    e = enc(t, "<|endoftext|><|endoftext|>");
    ASSERT_IDS(&e, "two in a row", 50256, 50256);
    hs_encoding_free(&e);
    e = enc(t, "<|endoftext|");
    cr_assert_gt(e.n, 1, "an incomplete marker is ordinary text");
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
}

Test(tokenizer_gpt2, matches_reference_on_every_golden_case)
{
    hs_tokenizer *t = gpt2();
    check_golden(t, "gpt2");
    hs_tokenizer_free(t);
}

Test(tokenizer_gpt2, matches_reference_on_code_point_sweep, .timeout = 120)
{
    hs_tokenizer *t = gpt2();
    check_sweep(t, "gpt2", 0);
    hs_tokenizer_free(t);
}

Test(tokenizer_gpt2, empty_text_gives_no_tokens)
{
    hs_tokenizer *t = gpt2();
    hs_encoding e = enc_pair(t, "", 0, NULL, 0);
    cr_assert_eq(e.n, 0);
    hs_encoding_free(&e);
    e = enc_pair(t, NULL, 0, NULL, 0);
    cr_assert_eq(e.n, 0);
    hs_encoding_free(&e);
    hs_encoding_free(&e); /* freeing twice is harmless: the encoding was zeroed */
    hs_encoding_free(NULL);
    hs_tokenizer_free(t);
}

Test(tokenizer_gpt2, splits_contractions_case_sensitively)
{
    hs_tokenizer *t = gpt2();
    hs_encoding e = enc(t, "it's");
    cr_assert_eq(e.n, 2);
    cr_assert_str_eq(hs_tokenizer_token(t, e.ids[1]), "'s");
    hs_encoding_free(&e);
    e = enc(t, "IT'S");
    cr_assert_eq(e.n, 3, "'S is not a contraction in the GPT-2 pattern");
    cr_assert_str_eq(hs_tokenizer_token(t, e.ids[1]), "'");
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
}

Test(tokenizer_gpt2, leaves_last_space_of_a_run_to_the_word)
{
    hs_tokenizer *t = gpt2();
    hs_encoding e = enc(t, "a   b");
    ASSERT_IDS(&e, "a   b", 64, 220, 220, 275); /* a, Ġ, Ġ, Ġb (no ĠĠ token here) */
    hs_encoding_free(&e);
    e = enc(t, "x\n\ny");
    cr_assert_eq(e.n, 4, "\\n\\n before a word splits into \\n and \\n");
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
}

Test(tokenizer_gpt2, keeps_nul_bytes_as_text)
{
    hs_tokenizer *t = gpt2();
    hs_encoding e = enc_pair(t, "a\0b", 3, NULL, 0);
    ASSERT_IDS(&e, "a NUL b", 64, 188, 65); /* a, Ā (byte 0), b */
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
}

Test(tokenizer_gpt2, concatenates_a_pair_with_type_ids)
{
    hs_tokenizer *t = gpt2();
    hs_encoding e = enc_pair(t, "Hello", 5, " world", 6);
    ASSERT_IDS(&e, "pair", 15496, 995);
    cr_assert_eq(e.type_ids[0], 0);
    cr_assert_eq(e.type_ids[1], 1);
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
}

Test(tokenizer_gpt2, displays_byte_level_strings_as_text)
{
    hs_tokenizer *t = gpt2();
    char buf[64];
    cr_assert_eq(hs_tokenizer_display(t, 995, buf, sizeof buf), 6);
    cr_assert_str_eq(buf, " world");
    int32_t nl = hs_tokenizer_id(t, "\xc4\x8a"); /* Ċ */
    cr_assert_geq(nl, 0);
    hs_tokenizer_display(t, nl, buf, sizeof buf);
    cr_assert_str_eq(buf, "\n");
    hs_tokenizer_display(t, 50256, buf, sizeof buf);
    cr_assert_str_eq(buf, "<|endoftext|>");
    /* "âĢ" is the bytes E2 80, the start of a 3-byte character: one U+FFFD */
    int32_t part = hs_tokenizer_id(t, "\xc3\xa2\xc4\xa2");
    cr_assert_geq(part, 0);
    hs_tokenizer_display(t, part, buf, sizeof buf);
    cr_assert_str_eq(buf, "\xef\xbf\xbd");
    /* "Ã©" is the bytes C3 A9: é */
    int32_t eacute = hs_tokenizer_id(t, "\xc3\x83\xc2\xa9");
    cr_assert_geq(eacute, 0);
    hs_tokenizer_display(t, eacute, buf, sizeof buf);
    cr_assert_str_eq(buf, "\xc3\xa9");
    /* truncation keeps whole characters and the NUL */
    cr_assert_eq(hs_tokenizer_display(t, 995, buf, 4), 3);
    cr_assert_str_eq(buf, " wo");
    cr_assert_eq(hs_tokenizer_display(t, eacute, buf, 2), 0);
    cr_assert_str_eq(buf, "");
    cr_assert_eq(hs_tokenizer_display(t, -1, buf, sizeof buf), 0);
    cr_assert_eq(hs_tokenizer_display(t, 50257, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "");
    hs_tokenizer_free(t);
}

Test(tokenizer_gpt2, maps_tokens_and_ids_both_ways)
{
    hs_tokenizer *t = gpt2();
    cr_assert_eq(hs_tokenizer_get_kind(t), HS_TOK_BPE);
    cr_assert_eq(hs_tokenizer_vocab_size(t), 50257);
    cr_assert_eq(hs_tokenizer_lowercase(t), 0);
    cr_assert_str_eq(hs_tokenizer_token(t, 995), "\xc4\xa0world");
    cr_assert_eq(hs_tokenizer_id(t, "\xc4\xa0world"), 995);
    cr_assert_eq(hs_tokenizer_id(t, "no such token"), -1);
    cr_assert_null(hs_tokenizer_token(t, 50257));
    cr_assert_null(hs_tokenizer_token(t, -1));
    cr_assert_eq(hs_tokenizer_merge_count(t), 50000);
    cr_assert_str_eq(hs_tokenizer_merge(t, 0), "\xc4\xa0 t"); /* Ġ t */
    cr_assert_null(hs_tokenizer_merge(t, 50000));
    hs_tokenizer_free(t);
}

Test(tokenizer_gpt2, rejects_invalid_utf8_naming_the_offset)
{
    hs_tokenizer *t = gpt2();
    expect_encode_error(t, "ab\x80", 3, NULL, 0, "byte offset 2");          /* stray continuation */
    expect_encode_error(t, "\xc0\x80", 2, NULL, 0, "byte offset 0");        /* overlong NUL */
    expect_encode_error(t, "x\xed\xa0\x80", 4, NULL, 0, "byte offset 1");   /* surrogate */
    expect_encode_error(t, "xy\xf4\x90\x80\x80", 6, NULL, 0, "byte offset 2"); /* > U+10FFFF */
    expect_encode_error(t, "abc\xe2\x82", 5, NULL, 0, "byte offset 3");     /* truncated */
    expect_encode_error(t, "\xf5", 1, NULL, 0, "byte offset 0");
    expect_encode_error(t, "ok", 2, "o\xff", 2, "pair text is not valid utf-8 (byte offset 1)");
    hs_tokenizer_free(t);
}

Test(tokenizer_gpt2, encodes_a_megabyte_of_english_quickly, .timeout = 60)
{
    static const char para[] =
        "The quick brown fox jumps over the lazy dog. It's 3:00pm and we've got 1,234 "
        "reasons\nto believe that attention heads specialise; some track the previous token, "
        "others copy names.  ";
    size_t plen = sizeof para - 1, n = (1u << 20) / plen + 1;
    char *text = malloc(n * plen);
    cr_assert_not_null(text);
    for (size_t i = 0; i < n; i++)
        memcpy(text + i * plen, para, plen);
    hs_tokenizer *t = gpt2();
    clock_t c0 = clock();
    hs_encoding e = enc_pair(t, text, n * plen, NULL, 0);
    double s = (double)(clock() - c0) / CLOCKS_PER_SEC;
    cr_assert_gt(e.n, 200000);
    cr_log_info("gpt-2: %zu bytes -> %zu tokens in %.3f s", n * plen, e.n, s);
    cr_assert_lt(s, 10.0, "1 MB took %.2f s", s); /* about 0.1 s at -O2; generous for sanitizers */
    hs_encoding_free(&e);
    /* one 1 MB "word" must not be quadratic */
    memset(text, 'a', n * plen);
    c0 = clock();
    e = enc_pair(t, text, n * plen, NULL, 0);
    s = (double)(clock() - c0) / CLOCKS_PER_SEC;
    cr_assert_gt(e.n, 1000);
    cr_assert_lt(s, 10.0, "1 MB without spaces took %.2f s", s);
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
    free(text);
}

Test(tokenizer_gpt2, builds_from_token_and_merge_lists)
{
    /* bytes a b c and Ġ, then merges "a b" (rank 0), "ab c" (rank 1), "Ġ a" (rank 2) */
    const char *tokens[] = {"a", "b", "c", "\xc4\xa0", "<|endoftext|>", "ab", "abc", "\xc4\xa0" "a"};
    const char *merges[] = {"a b", "ab c", "\xc4\xa0 a"};
    hs_tokenizer *t = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_tokenizer_new_bpe(tokens, 8, merges, 3, &t, &err), HS_OK, "%s", err.msg);
    hs_encoding e = enc(t, "abcab ab");
    /* "abcab": a b c a b -> ab c ab -> abc ab; " ab": Ġ a b -> Ġ ab ("a b" ranks before "Ġ a") */
    ASSERT_IDS(&e, "mini", 6, 5, 3, 5);
    hs_encoding_free(&e);
    /* bytes missing from the vocabulary become the unknown token <|endoftext|> */
    e = enc(t, "az");
    ASSERT_IDS(&e, "unknown byte", 0, 4);
    hs_encoding_free(&e);
    cr_assert_eq(hs_tokenizer_merge_count(t), 3);
    cr_assert_str_eq(hs_tokenizer_merge(t, 1), "ab c");
    hs_tokenizer_free(t);
}

Test(tokenizer_gpt2, merges_every_occurrence_of_the_best_pair_left_to_right)
{
    const char *tokens[] = {"a", "aa", "aaa", "<|endoftext|>"};
    const char *merges[] = {"a a", "aa a"};
    hs_tokenizer *t = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_tokenizer_new_bpe(tokens, 4, merges, 2, &t, &err), HS_OK, "%s", err.msg);
    hs_encoding e = enc(t, "aaaaa");
    /* round "a a": aa aa a; round "aa a": aa aaa (the first aa stays) */
    ASSERT_IDS(&e, "aaaaa", 1, 2);
    hs_encoding_free(&e);
    e = enc(t, "aaa");
    ASSERT_IDS(&e, "aaa", 2);
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
}

Test(tokenizer_gpt2, rejects_bad_arguments_and_lists)
{
    const char *tokens[] = {"a", "<|endoftext|>", "a"};
    const char *bad_merge[] = {"ab"};
    const char *three[] = {"a b c"};
    const char *no_eot[] = {"a", "b"};
    const char *bad_utf8[] = {"a", "\xff", "<|endoftext|>"};
    hs_tokenizer *t = NULL;
    EXPECT_FAIL(hs_tokenizer_new_bpe(tokens, 3, NULL, 0, &t, &err_), HS_E_FORMAT,
                "duplicate token 'a' (ids 0 and 2)");
    EXPECT_FAIL(hs_tokenizer_new_bpe(tokens, 2, bad_merge, 1, &t, &err_), HS_E_FORMAT,
                "merge 0: expected two symbols separated by one space");
    EXPECT_FAIL(hs_tokenizer_new_bpe(tokens, 2, three, 1, &t, &err_), HS_E_FORMAT,
                "expected two symbols");
    EXPECT_FAIL(hs_tokenizer_new_bpe(no_eot, 2, NULL, 0, &t, &err_), HS_E_FORMAT,
                "has no '<|endoftext|>' token");
    EXPECT_FAIL(hs_tokenizer_new_bpe(bad_utf8, 3, NULL, 0, &t, &err_), HS_E_FORMAT,
                "token 1 is not valid utf-8");
    EXPECT_FAIL(hs_tokenizer_new_bpe(tokens, 0, NULL, 0, &t, &err_), HS_E_FORMAT, "is empty");
    EXPECT_FAIL(hs_tokenizer_new_bpe(tokens, 2, NULL, 0, NULL, &err_), HS_E_ARG, "NULL");
    cr_assert_null(t);
    hs_encoding e = {0};
    cr_assert_eq(hs_tokenizer_encode(NULL, "x", 1, NULL, 0, &e, NULL), HS_E_ARG);
}

Test(tokenizer_gpt2, reports_missing_and_corrupt_vocabulary_files)
{
    hs_tokenizer *t = NULL;
    EXPECT_FAIL(hs_tokenizer_load_gpt2("/nonexistent/vocab.json", GPT2_MERGES, &t, &err_), HS_E_IO,
                "cannot open '/nonexistent/vocab.json'");
    EXPECT_FAIL(hs_tokenizer_load_gpt2(GPT2_VOCAB, "/nonexistent/merges.txt", &t, &err_), HS_E_IO,
                "cannot open '/nonexistent/merges.txt'");
    cr_assert_null(t);
    const char *ok_merges = "#version: 0.2\na b\n";
    EXPECT_FAIL(load_gpt2_files("{\"a\": 0,", ok_merges, &err_), HS_E_FORMAT, "is not valid JSON (near byte 7)");
    EXPECT_FAIL(load_gpt2_files("[1, 2]", ok_merges, &err_), HS_E_FORMAT,
                "expected a json object mapping tokens to ids");
    EXPECT_FAIL(load_gpt2_files("{\"a\": 0, \"<|endoftext|>\": 1.5}", ok_merges, &err_),
                HS_E_FORMAT, "token '<|endoftext|>' has a non-integer id");
    EXPECT_FAIL(load_gpt2_files("{\"a\": \"0\", \"<|endoftext|>\": 1}", ok_merges, &err_),
                HS_E_FORMAT, "token 'a' has a non-integer id");
    EXPECT_FAIL(load_gpt2_files("{\"a\": 0, \"b\": 0, \"<|endoftext|>\": 1}", ok_merges, &err_),
                HS_E_FORMAT, "id 0 is used by both 'a' and 'b'");
    EXPECT_FAIL(load_gpt2_files("{\"a\": 0, \"b\": 3, \"<|endoftext|>\": 1}", ok_merges, &err_),
                HS_E_FORMAT, "id 3 of token 'b' is out of range (ids must be 0..2)");
    EXPECT_FAIL(load_gpt2_files("{\"a\": -1, \"<|endoftext|>\": 0}", ok_merges, &err_),
                HS_E_FORMAT, "id -1 of token 'a' is out of range");
    EXPECT_FAIL(load_gpt2_files("{\"a\": 0, \"a\": 1, \"<|endoftext|>\": 2}", ok_merges, &err_),
                HS_E_FORMAT, "duplicate token 'a'");
    EXPECT_FAIL(load_gpt2_files("{\"a\": 0, \"b\": 1}", ok_merges, &err_), HS_E_FORMAT,
                "has no '<|endoftext|>' token");
    EXPECT_FAIL(load_gpt2_files("{}", ok_merges, &err_), HS_E_FORMAT, "is empty");
    EXPECT_FAIL(load_gpt2_files("{\"a\\u0001b\": 0.5}", ok_merges, &err_), HS_E_FORMAT,
                "token 'a\\x01b' has a non-integer id");
    const char *vocab = "{\"a\": 0, \"b\": 1, \"ab\": 2, \"<|endoftext|>\": 3}";
    EXPECT_FAIL(load_gpt2_files(vocab, "#version: 0.2\na b\nab\n", &err_), HS_E_FORMAT,
                "merges.txt' line 3: expected two symbols separated by one space");
    EXPECT_FAIL(load_gpt2_files(vocab, "a  b\n", &err_), HS_E_FORMAT, "line 1: expected two");
    EXPECT_FAIL(load_gpt2_files(vocab, "a b\n\xc3\n", &err_), HS_E_FORMAT,
                "merges.txt': invalid utf-8 at byte 4");
    EXPECT_FAIL(load_gpt2_files("{\"\xff\": 0}", ok_merges, &err_), HS_E_FORMAT,
                "vocab.json': invalid utf-8 at byte 2");
    /* accepted: no #version line, blank lines, CRLF */
    hs_error e2 = {{0}};
    cr_assert_eq(load_gpt2_files(vocab, "a b\r\n\r\n", &e2), HS_OK, "%s", e2.msg);
    cr_assert_eq(load_gpt2_files(vocab, "", &e2), HS_OK, "%s", e2.msg);
}

/* ---- BERT --------------------------------------------------------------------------------- */

Test(tokenizer_bert, gives_known_ids_for_hello_world)
{
    hs_tokenizer *t = bert(1);
    hs_encoding e = enc(t, "hello world");
    ASSERT_IDS(&e, "hello world", 101, 7592, 2088, 102);
    cr_assert_str_eq(hs_tokenizer_token(t, e.ids[0]), "[CLS]");
    cr_assert_str_eq(hs_tokenizer_token(t, e.ids[3]), "[SEP]");
    for (size_t i = 0; i < e.n; i++)
        cr_assert_eq(e.type_ids[i], 0);
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
}

Test(tokenizer_bert, splits_unaffable_into_wordpieces)
{
    hs_tokenizer *t = bert(1);
    hs_encoding e = enc(t, "unaffable");
    cr_assert_eq(e.n, 5);
    cr_assert_str_eq(hs_tokenizer_token(t, e.ids[1]), "una");
    cr_assert_str_eq(hs_tokenizer_token(t, e.ids[2]), "##ffa");
    cr_assert_str_eq(hs_tokenizer_token(t, e.ids[3]), "##ble");
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
}

Test(tokenizer_bert, gives_one_mask_token_for_the_classic_probe)
{
    hs_tokenizer *t = bert(1);
    hs_encoding e = enc(t, "The capital of France is [MASK].");
    ASSERT_IDS(&e, "probe", 101, 1996, 3007, 1997, 2605, 2003, 103, 1012, 102);
    hs_encoding_free(&e);
    e = enc(t, "[mask]"); /* lowercase is ordinary text: [ mask ] */
    ASSERT_IDS(&e, "[mask]", 101, 1031, 7308, 1033, 102);
    hs_encoding_free(&e);
    e = enc(t, "a[MASK]b[SEP][CLS][PAD][UNK]");
    ASSERT_IDS(&e, "specials", 101, 1037, 103, 1038, 102, 101, 0, 100, 102);
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
}

Test(tokenizer_bert, matches_reference_on_every_golden_case)
{
    hs_tokenizer *t = bert(1);
    check_golden(t, "bert_uncased");
    hs_tokenizer_free(t);
}

Test(tokenizer_bert, matches_cased_reference_on_every_golden_case)
{
    hs_tokenizer *t = bert(0);
    cr_assert_eq(hs_tokenizer_lowercase(t), 0);
    check_golden(t, "bert_cased");
    hs_tokenizer_free(t);
}

Test(tokenizer_bert, matches_reference_on_code_point_sweep, .timeout = 120)
{
    hs_tokenizer *t = bert(1);
    check_sweep(t, "bert", 1);
    hs_tokenizer_free(t);
}

Test(tokenizer_bert, matches_cased_reference_on_code_point_sweep, .timeout = 120)
{
    hs_tokenizer *t = bert(0);
    check_sweep(t, "bert_cased", 1);
    hs_tokenizer_free(t);
}

Test(tokenizer_bert, empty_text_gives_cls_sep)
{
    hs_tokenizer *t = bert(1);
    hs_encoding e = enc_pair(t, "", 0, NULL, 0);
    ASSERT_IDS(&e, "empty", 101, 102);
    hs_encoding_free(&e);
    e = enc(t, " \t\n\x01\xef\xbf\xbd"); /* whitespace, a control and U+FFFD vanish */
    ASSERT_IDS(&e, "blank", 101, 102);
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
}

Test(tokenizer_bert, marks_the_pair_with_type_ids)
{
    hs_tokenizer *t = bert(1);
    hs_encoding e = enc_pair(t, "hello", 5, "world", 5);
    ASSERT_IDS(&e, "pair", 101, 7592, 102, 2088, 102);
    const int32_t types[] = {0, 0, 0, 1, 1};
    for (size_t i = 0; i < 5; i++)
        cr_assert_eq(e.type_ids[i], types[i], "type id %zu", i);
    hs_encoding_free(&e);
    e = enc_pair(t, "hello", 5, "", 0); /* an empty pair still adds its [SEP] */
    ASSERT_IDS(&e, "empty pair", 101, 7592, 102, 102);
    cr_assert_eq(e.type_ids[3], 1);
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
}

Test(tokenizer_bert, turns_words_over_100_characters_into_unk)
{
    char w[102];
    memset(w, 'a', 101);
    w[101] = '\0';
    hs_tokenizer *t = bert(1);
    hs_encoding e = enc(t, w);
    ASSERT_IDS(&e, "101 chars", 101, 100, 102);
    hs_encoding_free(&e);
    w[100] = '\0';
    e = enc(t, w);
    cr_assert_gt(e.n, 3, "100 characters are still split into wordpieces");
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
}

Test(tokenizer_bert, lowercases_character_by_character_like_transformers)
{
    /* PreTrainedTokenizer.tokenize lowercases each character on its own, so the capital
     * sigma at a word end becomes σ (U+03C3), not the final ς that "ΟΔΟΣ".lower() gives. */
    hs_tokenizer *t = bert(1);
    hs_encoding a = enc(t, "\xce\x9f\xce\x94\xce\x9f\xce\xa3"), b = enc(t, "\xce\xbf\xce\xb4\xce\xbf\xcf\x83"),
                c = enc(t, "\xce\xbf\xce\xb4\xce\xbf\xcf\x82");
    cr_assert_eq(a.n, b.n);
    for (size_t i = 0; i < a.n; i++)
        cr_assert_eq(a.ids[i], b.ids[i]);
    cr_assert(c.n != a.n || memcmp(c.ids, a.ids, a.n * sizeof *a.ids) != 0);
    hs_encoding_free(&a);
    hs_encoding_free(&b);
    hs_encoding_free(&c);
    a = enc(t, "\xc4\xb0stanbul"); /* İ -> i + U+0307, the mark is stripped */
    ASSERT_IDS(&a, "istanbul", 101, 9960, 102);
    hs_encoding_free(&a);
    hs_tokenizer_free(t);
}

Test(tokenizer_bert, rejects_invalid_utf8_naming_the_offset)
{
    hs_tokenizer *t = bert(1);
    expect_encode_error(t, "hello \xc3(", 7, NULL, 0, "text is not valid utf-8 (byte offset 6)");
    expect_encode_error(t, "ok", 2, "fine\xe0\x80\x80", 7, "pair text is not valid utf-8 (byte offset 4)");
    hs_tokenizer_free(t);
}

Test(tokenizer_bert, displays_tokens_as_they_are)
{
    hs_tokenizer *t = bert(1);
    char buf[32];
    cr_assert_eq(hs_tokenizer_display(t, 103, buf, sizeof buf), 6);
    cr_assert_str_eq(buf, "[MASK]");
    int32_t id = hs_tokenizer_id(t, "##ffa");
    cr_assert_eq(id, 20961);
    hs_tokenizer_display(t, id, buf, sizeof buf);
    cr_assert_str_eq(buf, "##ffa");
    cr_assert_eq(hs_tokenizer_get_kind(t), HS_TOK_WORDPIECE);
    cr_assert_eq(hs_tokenizer_vocab_size(t), 30522);
    cr_assert_eq(hs_tokenizer_merge_count(t), 0);
    cr_assert_null(hs_tokenizer_merge(t, 0));
    hs_tokenizer_free(t);
}

Test(tokenizer_bert, builds_from_a_token_list)
{
    const char *tokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "x"};
    hs_tokenizer *t = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_tokenizer_new_wordpiece(tokens, 9, 1, &t, &err), HS_OK, "%s", err.msg);
    hs_encoding e = enc(t, "UNAFFABLE unaffablex x");
    ASSERT_IDS(&e, "mini", 2, 5, 6, 7, 1, 8, 3);
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
    const char *no_unk[] = {"[PAD]", "[CLS]", "[SEP]", "[MASK]"};
    EXPECT_FAIL(hs_tokenizer_new_wordpiece(no_unk, 4, 1, &t, &err_), HS_E_FORMAT,
                "vocabulary has no '[UNK]' token");
    cr_assert_null(t);
}

Test(tokenizer_bert, reports_missing_and_corrupt_vocabulary_files)
{
    hs_tokenizer *t = NULL;
    EXPECT_FAIL(hs_tokenizer_load_bert("/nonexistent/vocab.txt", 1, &t, &err_), HS_E_IO,
                "cannot open '/nonexistent/vocab.txt'");
    static const char no_mask[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n";
    EXPECT_FAIL(load_bert_file(no_mask, sizeof no_mask - 1, &t, &err_), HS_E_FORMAT,
                "vocab.txt' has no '[MASK]' token");
    EXPECT_FAIL(load_bert_file("", 0, &t, &err_), HS_E_FORMAT, "vocab.txt' is empty");
    static const char bad_utf8[] = "[PAD]\n[UNK]\n\xff\n";
    EXPECT_FAIL(load_bert_file(bad_utf8, sizeof bad_utf8 - 1, &t, &err_), HS_E_FORMAT,
                "vocab.txt': invalid utf-8 at byte 12");
    static const char nul[] = "[PAD]\n[UNK]\na\0b\n";
    EXPECT_FAIL(load_bert_file(nul, sizeof nul - 1, &t, &err_), HS_E_FORMAT,
                "vocab.txt' line 3: contains a NUL byte");
    cr_assert_null(t);
    /* CRLF line ends and a missing final newline are fine; ids are line numbers */
    static const char crlf[] = "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nhello\r\nworld";
    hs_error e2 = {{0}};
    cr_assert_eq(load_bert_file(crlf, sizeof crlf - 1, &t, &e2), HS_OK, "%s", e2.msg);
    cr_assert_eq(hs_tokenizer_vocab_size(t), 7);
    hs_encoding e = enc(t, "Hello, world");
    ASSERT_IDS(&e, "crlf vocab", 2, 5, 1, 6, 3);
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
}

Test(tokenizer_bert, keeps_unassigned_and_blank_text_as_the_library_does)
{
    hs_tokenizer *t = bert(1);
    hs_encoding e = enc(t, "33\xcd\xb9"); /* U+0379 is unassigned: kept, the word is [UNK] */
    ASSERT_IDS(&e, "33 U+0379", 101, 100, 102);
    hs_encoding_free(&e);
    e = enc(t, " \t\n\x0b\x0c\xc2\x85\xe2\x80\xa8"); /* only whitespace and controls */
    ASSERT_IDS(&e, "blank", 101, 102);
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
}
