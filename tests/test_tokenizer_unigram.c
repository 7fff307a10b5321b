/*
 * The SentencePiece Unigram tokenizer (T5's) read from tokenizer.json: the three layouts of
 * fixtures/tokenizer/families (t5, t5_new, unigram_bf) against unigram_golden.json, 2,434
 * cases (texts and pairs) encoded by Hugging Face's own tokenizers library 0.23.2 from the same
 * files (fixtures/tokenizer/make_unigram_goldens.js), ids and type ids compared exactly; then
 * hand-computed Viterbi cases on small vocabularies (the best total, the unknown piece's
 * score, ties, fused unknown pieces, byte fallback), what NFKC makes equal under the
 * Precompiled map, and the refusals.
 */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/tokenizer.h"
#include "testutil.h"
#include "tokutil.h"

static void check_layout(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, FIX "families/%s.tokenizer.json", name);
    hs_tokenizer *t = tu_json_tok(path);
    cr_assert_eq(hs_tokenizer_get_kind(t), HS_TOK_UNIGRAM);
    tu_check_golden_file(t, FIX "unigram_golden.json", name, 2000, 200);
    hs_tokenizer_free(t);
}

Test(tokenizer_unigram, t5_matches_the_library_on_every_case) { check_layout("t5"); }
Test(tokenizer_unigram, t5_new_matches_the_library_on_every_case) { check_layout("t5_new"); }
Test(tokenizer_unigram, byte_fallback_layout_matches_the_library_on_every_case) { check_layout("unigram_bf"); }

/* ---- by hand ------------------------------------------------------------------------------- */

/* A tokenizer.json with a Unigram model of the given vocabulary ("[\"<unk>\", 0], ...") and
 * options, no normalizer, pre-tokenizer (pre: a json object or "null") or post-processor. */
static hs_status load_unigram(const char *vocab, const char *opts, const char *pre, hs_tokenizer **t,
                              char *msg, size_t cap)
{
    char dir[64], path[128], text[4096];
    hs_error err = {{0}};
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    snprintf(text, sizeof text, "{\"added_tokens\": [], \"normalizer\": null, \"pre_tokenizer\": %s, "
             "\"post_processor\": null, \"model\": {\"type\": \"Unigram\", %s \"vocab\": [%s]}}", pre, opts, vocab);
    tu_write_file(path, text, strlen(text));
    *t = NULL;
    hs_status st = hs_tokenizer_load_json(path, t, &err);
    snprintf(msg, cap, "%s", err.msg);
    tu_rm_rf(dir);
    return st;
}

static hs_tokenizer *unigram(const char *vocab, const char *opts)
{
    hs_tokenizer *t;
    char msg[512];
    cr_assert_eq(load_unigram(vocab, opts, "null", &t, msg, sizeof msg), HS_OK, "%s", msg);
    return t;
}

#define EXPECT(t, text, what, ...)                                                             \
    do {                                                                                       \
        hs_encoding e_ = enc((t), (text));                                                     \
        ASSERT_IDS(&e_, (what), __VA_ARGS__);                                                  \
        hs_encoding_free(&e_);                                                                 \
    } while (0)

/* One text with a tokenizer of the given vocabulary. */
#define EXPECT_VOCAB(vocab, opts, text, what, ...)                                             \
    do {                                                                                       \
        hs_tokenizer *t_ = unigram((vocab), (opts));                                           \
        EXPECT(t_, (text), (what), __VA_ARGS__);                                               \
        hs_tokenizer_free(t_);                                                                 \
    } while (0)

/* The largest total wins, not the longest first piece: "abcdacdxx" with abcd 10, abc 5, ab 2,
 * cd 1 is abcd a cd and the unknown "xx" (ids 8 1 5 0). */
Test(tokenizer_unigram, viterbi_takes_the_best_total)
{
    hs_tokenizer *t = unigram("[\"<unk>\", 0], [\"a\", 0], [\"b\", 0], [\"c\", 0], [\"d\", 0], [\"cd\", 1], "
                              "[\"ab\", 2], [\"abc\", 5], [\"abcd\", 10]", "\"unk_id\": 0,");
    EXPECT(t, "abcdacdxx", "abcd a cd xx", 8, 1, 5, 0);
    EXPECT(t, "abc", "abc", 7);
    EXPECT(t, "cdab", "cd ab", 5, 6);
    hs_tokenizer_free(t);
    /* a + bc (-1 + -1) beats ab + c (-0.5 + -3) */
    EXPECT_VOCAB("[\"<unk>\", 0], [\"a\", -1], [\"b\", -3], [\"c\", -3], [\"ab\", -0.5], [\"bc\", -1]",
                 "\"unk_id\": 0,", "abc", "a bc", 1, 5);
}

/* An unknown character scores the lowest score minus 10 (here "q" -50: -60). "aab" is aa (0)
 * + unknown "b" (-60) or a (-20) + ab: ab at -39.5 totals -59.5 and wins, at -40.5 it loses
 * (a penalty of 9 or 11 would turn either case round). */
Test(tokenizer_unigram, an_unknown_character_scores_the_lowest_minus_ten)
{
    EXPECT_VOCAB("[\"<unk>\", 0], [\"a\", -20], [\"q\", -50], [\"aa\", 0], [\"ab\", -39.5]", "\"unk_id\": 0,",
                 "aab", "ab at -39.5", 1, 4);
    EXPECT_VOCAB("[\"<unk>\", 0], [\"a\", -20], [\"q\", -50], [\"aa\", 0], [\"ab\", -40.5]", "\"unk_id\": 0,",
                 "aab", "ab at -40.5", 3, 0);
}

/* Equal totals: the path found first stays (ab before a + b, both -2). */
Test(tokenizer_unigram, equal_totals_keep_the_first_path)
{
    hs_tokenizer *t = unigram("[\"<unk>\", 0], [\"a\", -1], [\"b\", -1], [\"ab\", -2]", "\"unk_id\": 0,");
    EXPECT(t, "ab", "ab", 3);
    EXPECT(t, "ba", "b a", 2, 1);
    hs_tokenizer_free(t);
}

/* Unknown characters next to each other are one unknown token; with byte_fallback their
 * bytes ("é" is C3 A9) when every byte has a piece, else the unknown token. */
Test(tokenizer_unigram, unknown_runs_fuse_and_fall_back_to_bytes)
{
    hs_tokenizer *t = unigram("[\"<unk>\", 0], [\"a\", -1]", "\"unk_id\": 0,");
    EXPECT(t, "xyz", "fused", 0);
    EXPECT(t, "xaxx", "x a xx", 0, 1, 0);
    hs_tokenizer_free(t);
    t = unigram("[\"<unk>\", 0], [\"a\", -1], [\"<0xC3>\", 0], [\"<0xA9>\", 0], [\"<0x78>\", 0]",
                "\"unk_id\": 0, \"byte_fallback\": true,");
    EXPECT(t, "\xc3\xa9" "a", "bytes", 2, 3, 1);
    EXPECT(t, "x\xc3\xa9", "fused bytes", 4, 2, 3);
    EXPECT(t, "y", "no byte piece", 0);
    hs_tokenizer_free(t);
}

/* T5's layout: Metaspace before each word, </s> after the text, the extra ids whole. */
Test(tokenizer_unigram, t5_appends_the_end_token)
{
    hs_tokenizer *t = tu_json_tok(FIX "families/t5.tokenizer.json");
    int32_t eos = hs_tokenizer_id(t, "</s>"), the = hs_tokenizer_id(t, "\xe2\x96\x81the");
    int32_t x0 = hs_tokenizer_id(t, "<extra_id_0>");
    cr_assert(eos == 1 && the > 2 && x0 == (int32_t)hs_tokenizer_vocab_size(t) - 1);
    EXPECT(t, "the", "the", the, eos);
    EXPECT(t, "  the\t", "blank around", the, eos);
    EXPECT(t, "<extra_id_0>the", "extra id", x0, the, eos);
    EXPECT(t, "", "empty", eos);
    hs_encoding e = enc_pair(t, "the", 3, "the", 3);
    ASSERT_IDS(&e, "pair", the, eos, the, eos);
    hs_encoding_free(&e);
    cr_assert_str_eq(hs_tokenizer_kind_name(hs_tokenizer_get_kind(t)), "SentencePiece Unigram");
    cr_assert(hs_tokenizer_has_pair(t) && hs_tokenizer_is_special(t, eos));
    char buf[32];
    hs_tokenizer_display(t, the, buf, sizeof buf);
    cr_assert_str_eq(buf, " the");
    hs_tokenizer_free(t);
}

/* Same ids for what NFKC makes the same text (the nmt_nfkc map of both T5 files): full-width
 * letters, ligatures, circled digits, a decomposed accent (one grapheme cluster, composed
 * whole), a tab (a space); a mark after a newline is a cluster of its own and stays. */
static void assert_same(const hs_tokenizer *t, const char *a, const char *b)
{
    hs_encoding x = enc(t, a), y = enc(t, b);
    cr_assert(x.n == y.n && memcmp(x.ids, y.ids, x.n * sizeof *x.ids) == 0, "'%s' and '%s' differ", a, b);
    hs_encoding_free(&x);
    hs_encoding_free(&y);
}

Test(tokenizer_unigram, precompiled_maps_compatibility_forms)
{
    const char *names[] = {FIX "families/t5.tokenizer.json", FIX "families/t5_new.tokenizer.json"};
    for (int k = 0; k < 2; k++) {
        hs_tokenizer *t = tu_json_tok(names[k]);
        assert_same(t, "\xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3", "ABC");
        assert_same(t, "\xef\xac\x81le", "file");
        assert_same(t, "\xe2\x91\xa0", "1");
        assert_same(t, "cafe\xcc\x81", "caf\xc3\xa9");
        assert_same(t, "the\tthe", "the the");
        hs_encoding e = enc(t, "a\n\xcc\x81"), f = enc(t, "a \xcc\x81");
        cr_assert(e.n == f.n && memcmp(e.ids, f.ids, e.n * sizeof *e.ids) == 0);
        hs_encoding_free(&e);
        hs_encoding_free(&f);
        hs_tokenizer_free(t);
    }
}

/* A charsmap made by hand: a double-array trie of 256 units with the one key "a" (root offset
 * 1, so "a" is unit 1 ^ 0x61 = 96, whose offset 2 leads to its value at unit 98: offset 0 of
 * the replacements "b\0"). */
static void tiny_charsmap(char *b64, size_t cap)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned char blob[4 + 4 * 256 + 2] = {0};
    const uint32_t units[][2] = {{0, 1u << 10}, {96, (2u << 10) | (1u << 8) | 0x61}};
    blob[1] = 4; /* 1024 bytes of trie */
    for (size_t k = 0; k < 2; k++)
        for (int j = 0; j < 4; j++)
            blob[4 + 4 * units[k][0] + (size_t)j] = (unsigned char)(units[k][1] >> (8 * j));
    blob[4 + 4 * 256] = 'b';
    size_t n = sizeof blob, w = 0;
    cr_assert_gt(cap, (n + 2) / 3 * 4);
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)blob[i] << 16 | (i + 1 < n ? (unsigned)blob[i + 1] << 8 : 0) | (i + 2 < n ? blob[i + 2] : 0);
        for (int k = 0; k < 4; k++)
            b64[w++] = i + (size_t)k * 3 / 4 < n || k < 2 ? digits[(v >> (18 - 6 * k)) & 63] : '=';
    }
    b64[w] = '\0';
}

/* The map replaces "a" by "b". A grapheme cluster under 6 bytes that starts with a key is
 * replaced whole ("a" + one or two U+0301 is "b"); a longer one character by character (the
 * marks stay). The library gives the same ids (2 = "b", 3 = U+0301). */
Test(tokenizer_unigram, precompiled_replaces_a_short_cluster_whole)
{
    char b64[2048], text[4096], dir[64], path[128];
    tiny_charsmap(b64, sizeof b64);
    snprintf(text, sizeof text, "{\"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"%s\"}, "
             "\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0], [\"a\", -1], [\"b\", -1], "
             "[\"\\u0301\", -1]]}}", b64);
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    tu_write_file(path, text, strlen(text));
    hs_tokenizer *t = tu_json_tok(path);
    tu_rm_rf(dir);
    EXPECT(t, "a", "a", 2);
    EXPECT(t, "xa", "xa", 0, 2);
    EXPECT(t, "a\xcc\x81", "one mark", 2);
    EXPECT(t, "a\xcc\x81\xcc\x81", "two marks (5 bytes)", 2);
    EXPECT(t, "a\xcc\x81\xcc\x81\xcc\x81", "three marks (7 bytes)", 2, 3, 3, 3);
    EXPECT(t, "\xcc\x81", "a mark alone", 3);
    hs_tokenizer_free(t);
}

/* ---- refusals ------------------------------------------------------------------------------ */

Test(tokenizer_unigram, refuses_what_it_does_not_run_by_name)
{
    hs_tokenizer *t;
    char msg[512];
    cr_assert_eq(load_unigram("[\"a\", 0]", "", "null", &t, msg, sizeof msg), HS_E_UNSUPPORTED);
    cr_assert(strstr(msg, "Unigram model without unk_id"), "%s", msg);
    cr_assert_eq(load_unigram("[\"a\", 0]", "\"unk_id\": 1,", "null", &t, msg, sizeof msg), HS_E_FORMAT);
    cr_assert(strstr(msg, "unk_id"), "%s", msg);
    cr_assert_eq(load_unigram("[\"a\", \"x\"]", "\"unk_id\": 0,", "null", &t, msg, sizeof msg), HS_E_FORMAT);
    cr_assert(strstr(msg, "entry 0 is not [piece, score]"), "%s", msg);
    cr_assert_eq(load_unigram("[\"a\", 0], [\"a\", -1]", "\"unk_id\": 0,", "null", &t, msg, sizeof msg), HS_E_FORMAT);
    cr_assert(strstr(msg, "duplicate token 'a'"), "%s", msg);
    cr_assert_eq(load_unigram("[\"a\", 0]", "\"unk_id\": 0,", "{\"type\": \"ByteLevel\"}", &t, msg, sizeof msg),
                 HS_E_UNSUPPORTED);
    cr_assert(strstr(msg, "pre_tokenizer 'ByteLevel' is not supported with Unigram"), "%s", msg);
    /* normalizers: a regex Replace other than T5's, one for WordPiece; a charsmap that is not
     * base64, or whose trie is empty or longer than the map */
    static const struct { const char *norm, *want; hs_status st; } norms[] = {
        {"{\"type\": \"Replace\", \"pattern\": {\"Regex\": \"\\\\s+\"}, \"content\": \" \"}", "regex other than",
         HS_E_UNSUPPORTED},
        {"{\"type\": \"Lowercase\"}", "normalizer 'Lowercase' is not supported with a Unigram model", HS_E_UNSUPPORTED},
        {"{\"type\": \"Precompiled\", \"precompiled_charsmap\": \"!!!!\"}", "is not base64", HS_E_FORMAT},
        {"{\"type\": \"Precompiled\", \"precompiled_charsmap\": \"AAAA\"}", "is malformed", HS_E_FORMAT},
        {"{\"type\": \"Precompiled\", \"precompiled_charsmap\": \"CAAAAAAAAA==\"}", "is malformed", HS_E_FORMAT},
    };
    for (size_t k = 0; k < sizeof norms / sizeof norms[0]; k++) {
        char text[512];
        snprintf(text, sizeof text, "{\"normalizer\": %s, \"model\": {\"type\": \"Unigram\", \"unk_id\": 0, "
                 "\"vocab\": [[\"a\", 0]]}}", norms[k].norm);
        cr_assert_eq(tu_load_json_text(text, msg, sizeof msg), norms[k].st, "%s", norms[k].norm);
        cr_assert(strstr(msg, norms[k].want), "%s", msg);
    }
    /* Strip and the space-run Replace belong to Unigram only */
    cr_assert_eq(tu_load_json_text("{\"normalizer\": {\"type\": \"Strip\", \"strip_left\": true, \"strip_right\": true},"
                                   " \"pre_tokenizer\": null, \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, "
                                   "\"merges\": []}}", msg, sizeof msg), HS_E_UNSUPPORTED);
    cr_assert(strstr(msg, "normalizer 'Strip' is not supported with a BPE model"), "%s", msg);
}
