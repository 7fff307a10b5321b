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
#include "model/model_internal.h"
#include "testutil.h"
#include "tokutil.h"

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

/* Every case (and pair) of a golden file (family_golden.json, mqa_golden.json) gives the
 * library's ids and type ids. */
static void check_family_in(const char *golden, const char *name)
{
    hs_tokenizer *t = family(name);
    tu_check_golden_file(t, golden, name, 1000, 200);
    hs_tokenizer_free(t);
}

static void check_family(const char *name)
{
    check_family_in(FIX "family_golden.json", name);
}

Test(tokenizer_family, roberta_matches_the_library_on_every_case) { check_family("roberta"); }
Test(tokenizer_family, neox_matches_the_library_on_every_case) { check_family("neox"); }
Test(tokenizer_family, llama2_matches_the_library_on_every_case) { check_family("llama2"); }
Test(tokenizer_family, llama2_metaspace_matches_the_library_on_every_case) { check_family("llama2_ms"); }
Test(tokenizer_family, llama3_matches_the_library_on_every_case) { check_family("llama3"); }
Test(tokenizer_family, qwen2_matches_the_library_on_every_case) { check_family("qwen2"); }
/* StarCoder's Digits(individual_digits) + ByteLevel and Falcon's Punctuation, ByteLevel,
 * Digits and Split on 2,249 cases each (mqa_golden.json) */
Test(tokenizer_family, starcoder_matches_the_library_on_every_case)
{
    check_family_in(FIX "mqa_golden.json", "starcoder");
}
Test(tokenizer_family, falcon_matches_the_library_on_every_case)
{
    check_family_in(FIX "mqa_golden.json", "falcon");
}

/* ---- the points where the families differ, by hand ------------------------------------ */

static hs_encoding encode2(const hs_tokenizer *t, const char *text, const char *pair)
{
    hs_encoding e = {0};
    hs_error err = {{0}};
    hs_status st = hs_tokenizer_encode(t, text, strlen(text), pair, pair ? strlen(pair) : 0, &e, &err);
    cr_assert_eq(st, HS_OK, "encode failed: %s", err.msg);
    return e;
}

static void assert_enc(const hs_encoding *e, const int32_t *ids, const int32_t *types, size_t n,
                       const char *what)
{
    cr_assert_eq(e->n, n, "%s: %zu tokens, expected %zu", what, e->n, n);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(e->ids[i], ids[i], "%s: token %zu is %d, expected %d", what, i, e->ids[i], ids[i]);
        if (types)
            cr_assert_eq(e->type_ids[i], types[i], "%s: type id %zu is %d, expected %d", what, i,
                         e->type_ids[i], types[i]);
    }
}

#define EXPECT(t, text, pair, what, ...)                                                       \
    do {                                                                                       \
        const int32_t want_[] = {__VA_ARGS__};                                                 \
        hs_encoding e_ = encode2((t), (text), (pair));                                         \
        assert_enc(&e_, want_, NULL, sizeof want_ / sizeof want_[0], (what));                  \
        hs_encoding_free(&e_);                                                                 \
    } while (0)

/* RoBERTa's ids are GPT-2's + 4 (README): "Hello" is GPT-2's 15496, "a" 64, "b" 65. */
Test(tokenizer_family, roberta_wraps_texts_and_mask_takes_the_space_before_it)
{
    hs_tokenizer *t = family("roberta");
    cr_assert_eq(hs_tokenizer_get_kind(t), HS_TOK_BPE);
    /* <mask> has lstrip: " <mask>" is one token, no "Ġ" (GPT-2's 220 + 4) before it */
    EXPECT(t, "Hello <mask>", NULL, "mask", 0, 15496 + 4, 50264, 2);
    EXPECT(t, "Hello  <mask>", NULL, "mask after two spaces", 0, 15496 + 4, 50264, 2);
    /* a pair: <s> A </s></s> B </s>, every type id 0 */
    hs_encoding e = encode2(t, "a", "b");
    const int32_t ids[] = {0, 64 + 4, 2, 2, 65 + 4, 2}, types[] = {0, 0, 0, 0, 0, 0};
    assert_enc(&e, ids, types, 6, "pair");
    hs_encoding_free(&e);
    cr_assert(hs_tokenizer_has_pair(t));
    cr_assert_str_eq(hs_tokenizer_post_processor(t), "RobertaProcessing");
    cr_assert_eq(hs_tokenizer_special_count(t, 0), 2);
    cr_assert_eq(hs_tokenizer_special_count(t, 1), 4);
    cr_assert(hs_tokenizer_is_special(t, 0) && hs_tokenizer_is_special(t, 2) && hs_tokenizer_is_special(t, 50264));
    cr_assert(!hs_tokenizer_is_special(t, 68) && !hs_tokenizer_is_special(t, -1));
    hs_tokenizer_free(t);
}

/* GPT-NeoX: runs of 2-24 spaces are added tokens (normalized, matched after NFC), the
 * longest first; ids from the file: a 66, b 67, "Ġb" 305, 5 spaces 3277, 24 spaces 3258. */
Test(tokenizer_family, neox_takes_space_runs_as_added_tokens_after_nfc)
{
    hs_tokenizer *t = family("neox");
    EXPECT(t, "a b", NULL, "one space", 66, 305);
    EXPECT(t, "a     b", NULL, "five spaces", 66, 3277, 67);
    EXPECT(t, "a                         b", NULL, "25 spaces", 66, 3258, 305);
    cr_assert(hs_tokenizer_is_special(t, 3277) && !hs_tokenizer_is_special(t, 66));
    /* NFC: decomposed and composed é give the same ids ("Ã" 129, "©" 104) */
    EXPECT(t, "e\xcc\x81", NULL, "nfd e-acute", 129, 104);
    EXPECT(t, "\xc3\xa9", NULL, "nfc e-acute", 129, 104);
    cr_assert_not(hs_tokenizer_has_pair(t));
    hs_error err = {{0}};
    cr_assert_eq(hs_tokenizer_check_pair(t, &err), HS_E_INPUT);
    cr_assert(strstr(err.msg, "byte-level BPE tokenizer (post-processor ByteLevel) takes a single text"), "%s",
              err.msg);
    hs_tokenizer_free(t);
}

/* Llama 2: <unk> 0, <s> 1, </s> 2, <0xNN> at 3 + NN; "▁" 391. A character outside the
 * vocabulary is its UTF-8 bytes ("€" is E2 82 AC). */
Test(tokenizer_family, llama2_falls_back_to_bytes_and_prepends_the_metaspace)
{
    const char *names[] = {"llama2", "llama2_ms"};
    for (int k = 0; k < 2; k++) {
        hs_tokenizer *t = family(names[k]);
        cr_assert_eq(hs_tokenizer_get_kind(t), HS_TOK_SPM_BPE, "%s", names[k]);
        EXPECT(t, "\xe2\x82\xac", NULL, names[k], 1, 391, 3 + 0xE2, 3 + 0x82, 3 + 0xAC);
        /* pair: <s> A <s>:1 B:1 */
        hs_encoding e = encode2(t, "\xe2\x82\xac", "\xe2\x82\xac");
        const int32_t ids[] = {1, 391, 229, 133, 175, 1, 391, 229, 133, 175};
        const int32_t types[] = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
        assert_enc(&e, ids, types, 10, names[k]);
        hs_encoding_free(&e);
        char buf[32];
        hs_tokenizer_display(t, 3 + 0x41, buf, sizeof buf);
        cr_assert_str_eq(buf, "A");
        hs_tokenizer_display(t, 524, buf, sizeof buf); /* "▁h" */
        cr_assert_str_eq(buf, " h");
        hs_tokenizer_free(t);
    }
}

/* The two layouts differ after an added token: the Prepend normalizer puts "▁" before every
 * piece ("▁▁h" after "<s> "), Metaspace's prepend_scheme "first" only before the text's first
 * ("▁h"). ids: "▁" 391, "▁h" 524, "h" 331. */
Test(tokenizer_family, llama2_layouts_differ_on_the_piece_after_an_added_token)
{
    hs_tokenizer *a = family("llama2"), *b = family("llama2_ms");
    EXPECT(a, "<s> h", NULL, "llama2", 1, 1, 391, 524);
    EXPECT(b, "<s> h", NULL, "llama2_ms", 1, 1, 524);
    EXPECT(a, "<s>h", NULL, "llama2 no space", 1, 1, 524);
    EXPECT(b, "<s>h", NULL, "llama2_ms no space", 1, 1, 331);
    hs_tokenizer_free(a);
    hs_tokenizer_free(b);
}

/* Llama 3 cuts digits in threes, Qwen2 one by one ("1".."5" are 16..20, "12" 1193 in both). */
Test(tokenizer_family, llama3_and_qwen2_cut_digits_differently)
{
    hs_tokenizer *l = family("llama3"), *q = family("qwen2");
    EXPECT(l, "12345", NULL, "llama3", 3256, 1193, 18, 19, 20);
    EXPECT(q, "12345", NULL, "qwen2", 16, 17, 18, 19, 20);
    /* no normalizer in Llama 3: decomposed é stays e + U+0301 */
    hs_encoding x = encode2(l, "e\xcc\x81", NULL), y = encode2(l, "\xc3\xa9", NULL);
    cr_assert(x.n != y.n || memcmp(x.ids, y.ids, x.n * sizeof *x.ids) != 0);
    hs_encoding_free(&x);
    hs_encoding_free(&y);
    cr_assert(hs_tokenizer_has_pair(l));
    cr_assert_not(hs_tokenizer_has_pair(q));
    cr_assert_eq(hs_tokenizer_special_count(l, 0), 1);
    cr_assert_eq(hs_tokenizer_special_count(q, 1), 0);
    hs_tokenizer_free(l);
    hs_tokenizer_free(q);
}

/* Truncation keeps the template's special tokens and balances a pair (longest_first): RoBERTa
 * "a b c d e" is 5 tokens, "a b c" 3; max 10 leaves 6 for the texts: 3 and 3. */
Test(tokenizer_family, truncation_keeps_the_templates_special_tokens)
{
    hs_tokenizer *t = family("roberta");
    hs_encoding e = encode2(t, "a b c d e", NULL);
    hs_encoding_truncate(t, &e, 4);
    const int32_t one[] = {0, 68, 279, 2};
    assert_enc(&e, one, NULL, 4, "single");
    hs_encoding_free(&e);
    e = encode2(t, "a b c d e", "a b c");
    cr_assert_eq(e.n, 12);
    hs_encoding_truncate(t, &e, 10);
    const int32_t two[] = {0, 68, 279, 273, 2, 2, 68, 279, 273, 2};
    assert_enc(&e, two, NULL, 10, "pair");
    cr_assert_eq(e.n_text, 3);
    cr_assert_eq(e.n_pair, 3);
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
}

/* ---- refusals ---------------------------------------------------------------------------- */

#define BPE_JSON(norm, pre, post, added, model_extra)                                          \
    "{\"normalizer\":" norm ",\"pre_tokenizer\":" pre ",\"post_processor\":" post             \
    ",\"added_tokens\":[" added "],\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,"   \
    "\"<s>\":2},\"merges\":[]" model_extra "}}"
#define SPLIT(rx, beh) "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":" \
    rx "},\"behavior\":\"" beh "\",\"invert\":false},{\"type\":\"ByteLevel\",\"use_regex\":false}]}"
#define TMPL(single) "{\"type\":\"TemplateProcessing\",\"single\":" single ",\"pair\":[{\"Sequence\":"  \
    "{\"id\":\"A\",\"type_id\":0}},{\"Sequence\":{\"id\":\"B\",\"type_id\":1}}],\"special_tokens\":"     \
    "{\"<s>\":{\"id\":\"<s>\",\"ids\":[2],\"tokens\":[\"<s>\"]},\"<x>\":{\"id\":\"<x>\",\"ids\":[99],"     \
    "\"tokens\":[\"<x>\"]}}}"

Test(tokenizer_family, refuses_what_it_does_not_run_naming_it)
{
    static const struct { const char *text, *want; hs_status st; } cases[] = {
        /* any other pattern goes through pretok_seq.c, which refuses ByteLevel's default prefix space */
        {BPE_JSON("null", SPLIT("\"\\\\p{L}+\"", "Isolated"), "null", "", ""),
         "ByteLevel with add_prefix_space after Split or Digits steps is not supported", HS_E_UNSUPPORTED},
        {BPE_JSON("null", SPLIT("\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?"
                                "[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"",
                                "Removed"), "null", "", ""),
         "pre_tokenizer 'Split' other than behavior Isolated, invert false is not supported", HS_E_UNSUPPORTED},
        {BPE_JSON("null", "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Whitespace\"}]}", "null", "", ""),
         "pre_tokenizer 'Sequence' other than [Split, ByteLevel], [Digits(individual_digits), ByteLevel], "
         "Falcon's four or [ByteLevel] is not supported", HS_E_UNSUPPORTED},
        /* Falcon's first three without its Split */
        {BPE_JSON("null", "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Punctuation\",\"behavior\":"
                  "\"Contiguous\"},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
                  "{\"type\":\"Digits\",\"individual_digits\":false}]}", "null", "", ""),
         "pre_tokenizer 'Sequence' other than [Split, ByteLevel], [Digits(individual_digits), ByteLevel], "
         "Falcon's four or [ByteLevel] is not supported", HS_E_UNSUPPORTED},
        {BPE_JSON("null", "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":"
                  "false},{\"type\":\"Whitespace\"},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                  "\"use_regex\":true}]}", "null", "", ""),
         "pre_tokenizer 'Sequence' other than [Split, ByteLevel], [Digits(individual_digits), ByteLevel], "
         "Falcon's four or [ByteLevel] is not supported", HS_E_UNSUPPORTED},
        {BPE_JSON("null", "{\"type\":\"Whitespace\"}", "null", "", ""),
         "pre_tokenizer 'Whitespace' is not supported with BPE", HS_E_UNSUPPORTED},
        {BPE_JSON("null", "{\"type\":\"Metaspace\",\"replacement\":\"_\",\"prepend_scheme\":\"sometimes\"}", "null",
                  "", ""),
         "Metaspace prepend_scheme must be \"always\", \"first\" or \"never\"", HS_E_FORMAT},
        {BPE_JSON("{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" +\"},\"content\":\"_\"}", "null", "null", "", ""),
         "normalizer 'Replace' with a regex pattern is not supported", HS_E_UNSUPPORTED},
        {BPE_JSON("{\"type\":\"NFKC\"}", "null", "null", "", ""),
         "normalizer 'NFKC' is not supported with a BPE model", HS_E_UNSUPPORTED},
        {BPE_JSON("{\"type\":\"NFC\"}", "{\"type\":\"ByteLevel\"}", "null",
                  "{\"id\":3,\"content\":\"e\\u0301\",\"normalized\":true}", ""),
         "added token 'e\xcc\x81' with normalized=true is changed by the normalizer", HS_E_UNSUPPORTED},
        {BPE_JSON("null", "null", TMPL("[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}}]"), "", ""),
         "TemplateProcessing \"single\" must hold $A and not $B", HS_E_FORMAT},
        {BPE_JSON("null", "null", TMPL("[{\"SpecialToken\":{\"id\":\"<y>\",\"type_id\":0}}]"), "", ""),
         "TemplateProcessing special token '<y>' has no ids", HS_E_FORMAT},
        {BPE_JSON("null", "null", TMPL("[{\"SpecialToken\":{\"id\":\"<x>\",\"type_id\":0}},{\"Sequence\":"
                                       "{\"id\":\"A\",\"type_id\":0}}]"), "", ""),
         "post_processor token id 99 is out of range", HS_E_FORMAT},
        {BPE_JSON("null", "null", "null", "", ",\"byte_fallback\":\"yes\""),
         "byte_fallback, fuse_unk and ignore_merges must be true or false", HS_E_FORMAT},
        {BPE_JSON("null", "null", "{\"type\":\"Sequence\",\"processors\":[{\"type\":\"ByteLevel\"},"
                  "{\"type\":\"Sequence\",\"processors\":[]}]}", "", ""),
         "post_processor 'Sequence' with more than ByteLevel and one other is not supported", HS_E_UNSUPPORTED},
    };
    char msg[HS_ERROR_MSG_MAX];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        hs_status st = tu_load_json_text(cases[k].text, msg, sizeof msg);
        cr_assert_eq(st, cases[k].st, "case %zu: status %d (%s)", k, st, msg);
        cr_assert(strstr(msg, cases[k].want), "case %zu: message '%s' lacks '%s'", k, msg, cases[k].want);
    }
    /* and the small file loads once the refused part is gone */
    cr_assert_eq(tu_load_json_text(BPE_JSON("null", "null", TMPL("[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
                                                         "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}]"), "", ""),
                           msg, sizeof msg), HS_OK, "%s", msg);
}

/* A megabyte of text must not take seconds: linear-ish in every family, also Llama 2's,
 * where the whole text between added tokens is one word. */
Test(tokenizer_family, encodes_a_megabyte_quickly, .timeout = 120)
{
    static const char words[] = "The quick brown fox, 12345 jumps over the lazy dog's back; caf\xc3\xa9 \xe2\x82\xac 42.\n";
    size_t n = 1 << 20, wl = sizeof words - 1;
    char *text = malloc(n + 1);
    cr_assert_not_null(text);
    for (size_t i = 0; i < n; i++)
        text[i] = words[i % wl];
    while (n > 0 && ((unsigned char)text[n - 1] & 0xC0) == 0x80)
        n--; /* never end inside a character */
    if (n > 0 && (unsigned char)text[n - 1] >= 0xC0)
        n--;
    const char *names[] = {"roberta", "neox", "llama2", "llama2_ms", "llama3", "qwen2"};
    for (size_t k = 0; k < 6; k++) {
        hs_tokenizer *t = family(names[k]);
        hs_encoding e = {0};
        hs_error err = {{0}};
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        cr_assert_eq(hs_tokenizer_encode(t, text, n, NULL, 0, &e, &err), HS_OK, "%s", err.msg);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double s = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
        cr_log_info("%s: 1 MB in %.3f s, %zu tokens", names[k], s, e.n);
        cr_assert_gt(e.n, 100000);
        cr_assert_lt(s, 5.0, "%s: 1 MB took %.2f s", names[k], s);
        hs_encoding_free(&e);
        hs_tokenizer_free(t);
    }
    free(text);
}

/* ---- model folders ------------------------------------------------------------------------- */

/* A descriptor with .tokenizer == 0 takes whatever tokenizer.json holds (Llama 2 is
 * SentencePiece-style, Llama 3 byte-level); vocabulary files without tokenizer.json are
 * refused for it; a byte-level family that adds special tokens (cls_token set, RoBERTa) takes
 * tokenizer.json without reading vocab.json; a descriptor naming a kind refuses a
 * tokenizer.json of another. */
Test(tokenizer_family, folders_take_tokenizer_json_as_the_descriptor_says)
{
    hs_arch any = *hs_arch_of(HS_FAMILY_GPT2), roberta_like = any;
    any.tokenizer = (hs_tokenizer_kind)0;
    any.name = "llama";
    roberta_like.cls_token = "<s>";
    roberta_like.name = "roberta";
    char dir[64], p[128];
    hs_tokenizer *t = NULL;
    hs_error err = {{0}};
    tu_mkdtemp(dir, sizeof dir);
    tu_copy_file(FAM "llama2.tokenizer.json", dir, "tokenizer.json");
    cr_assert_eq(hs_hf_tokenizer_load(dir, &any, &t, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_tokenizer_get_kind(t), HS_TOK_SPM_BPE);
    hs_tokenizer_free(t);
    t = NULL;
    tu_copy_file(FAM "llama3.tokenizer.json", dir, "tokenizer.json");
    cr_assert_eq(hs_hf_tokenizer_load(dir, &any, &t, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_tokenizer_get_kind(t), HS_TOK_BPE);
    hs_tokenizer_free(t);
    t = NULL;
    /* the BERT descriptor says WordPiece */
    cr_assert_eq(hs_hf_tokenizer_load(dir, hs_arch_of(HS_FAMILY_BERT), &t, &err), HS_E_FORMAT);
    cr_assert(strstr(err.msg, "tokenizer.json holds a byte-level BPE tokenizer but bert models use WordPiece"),
              "%s", err.msg);
    cr_assert_null(t);
    /* RoBERTa-like: a vocab.json beside tokenizer.json is not read (here it is not even json) */
    tu_copy_file(FAM "roberta.tokenizer.json", dir, "tokenizer.json");
    snprintf(p, sizeof p, "%s/vocab.json", dir);
    tu_write_file(p, "not json", 8);
    cr_assert_eq(hs_hf_tokenizer_load(dir, &roberta_like, &t, &err), HS_OK, "%s", err.msg);
    cr_assert_str_eq(hs_tokenizer_post_processor(t), "RobertaProcessing");
    hs_tokenizer_free(t);
    t = NULL;
    /* without tokenizer.json: refused for .tokenizer 0 (the files cannot say which kind) */
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    remove(p);
    cr_assert_eq(hs_hf_tokenizer_load(dir, &any, &t, &err), HS_E_UNSUPPORTED);
    cr_assert(strstr(err.msg, "has no tokenizer.json: a llama model's tokenizer is read from tokenizer.json only"),
              "%s", err.msg);
    cr_assert_null(t);
    /* weights only: no tokenizer, no error */
    snprintf(p, sizeof p, "%s/vocab.json", dir);
    remove(p);
    cr_assert_eq(hs_hf_tokenizer_load(dir, &any, &t, &err), HS_OK, "%s", err.msg);
    cr_assert_null(t);
    tu_rm_rf(dir);
}

/* Encoding as far as a limit needs (a chunk at a time where that cannot change a token: not
 * for Llama 2, whose piece is one word, nor NeoX, whose added tokens hold spaces), then
 * truncating, gives exactly the full encoding truncated, single texts and pairs. */
Test(tokenizer_family, bounded_encoding_truncates_like_the_full_one, .timeout = 120)
{
    static const char *files[] = {FIX "english/license-GPL-3.txt", FIX "english/docs-usage.md"};
    size_t cap = 1 << 19, len = 0;
    char *text = malloc(cap);
    cr_assert_not_null(text);
    for (size_t f = 0; f < 2; f++) {
        FILE *fp = fopen(files[f], "rb");
        cr_assert_not_null(fp, "%s", files[f]);
        len += fread(text + len, 1, cap / 2 - len, fp);
        fclose(fp);
    }
    for (size_t i = 997; i + 20 < len; i += 997) /* added tokens meet chunk ends too */
        memcpy(text + i, (i / 997) % 2 ? " <mask> " : "<s>1234<|eot_id|>", (i / 997) % 2 ? 8 : 17);
    const char *names[] = {"roberta", "neox", "llama2", "llama2_ms", "llama3", "qwen2"};
    static const size_t maxes[] = {4, 7, 128, 1000, 100000};
    hs_error err = {{0}};
    for (size_t k = 0; k < 6; k++) {
        hs_tokenizer *t = family(names[k]);
        for (int pair = 0; pair <= 1; pair++) {
            const char *b = pair ? text + len / 2 : NULL;
            size_t la = pair ? len / 2 : len, lb = pair ? len - len / 2 : 0;
            for (size_t m = 0; m < sizeof maxes / sizeof maxes[0]; m++) {
                hs_encoding cut = {0}, want = {0};
                cr_assert_eq(hs_tokenizer_encode_max(t, text, la, b, lb, maxes[m], &cut, &err), HS_OK, "%s",
                             err.msg);
                cr_assert_eq(hs_tokenizer_encode(t, text, la, b, lb, &want, &err), HS_OK, "%s", err.msg);
                hs_encoding_truncate(t, &cut, maxes[m]);
                hs_encoding_truncate(t, &want, maxes[m]);
                cr_assert_eq(cut.n, want.n, "%s pair %d max %zu: %zu vs %zu tokens", names[k], pair, maxes[m],
                             cut.n, want.n);
                for (size_t i = 0; i < want.n; i++) {
                    cr_assert_eq(cut.ids[i], want.ids[i], "%s pair %d max %zu: id %zu", names[k], pair,
                                 maxes[m], i);
                    cr_assert_eq(cut.type_ids[i], want.type_ids[i]);
                }
                hs_encoding_free(&cut);
                hs_encoding_free(&want);
            }
        }
        hs_tokenizer_free(t);
    }
    free(text);
}

/* ---- options the family files do not use (variant_golden.json) ---------------------------- */

/* Sets the member or element at path (strings: object members, numbers: array indices) to a
 * copy of value. */
static void apply_patch(cJSON *root, const cJSON *path, const cJSON *value)
{
    cJSON *o = root;
    for (const cJSON *k = path->child; k; k = k->next) {
        cJSON *next = cJSON_IsNumber(k) ? cJSON_GetArrayItem(o, k->valueint)
                                        : cJSON_GetObjectItemCaseSensitive(o, k->valuestring);
        if (!k->next) {
            cJSON *v = cJSON_Duplicate(value, 1);
            cr_assert_not_null(v);
            if (cJSON_IsNumber(k))
                cr_assert(cJSON_ReplaceItemInArray(o, k->valueint, v));
            else if (next)
                cr_assert(cJSON_ReplaceItemInObjectCaseSensitive(o, k->valuestring, v));
            else
                cr_assert(cJSON_AddItemToObject(o, k->valuestring, v));
            return;
        }
        cr_assert_not_null(next, "patch path not found");
        o = next;
    }
}

/* Metaspace split / always / never, rstrip, lstrip on a raw-text token, a two-id template
 * token, ByteLevel add_prefix_space after NFC: each a patch of a family file, ids from the
 * library on the patched file. */
Test(tokenizer_family, variants_match_the_library)
{
    cJSON *g = tu_read_json(FIX "variant_golden.json");
    const cJSON *texts = cJSON_GetObjectItemCaseSensitive(g, "texts_hex"), *v;
    char dir[64], path[128], base[256];
    size_t checked = 0;
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(g, "variants")) {
        const char *name = cJSON_GetObjectItemCaseSensitive(v, "name")->valuestring;
        snprintf(base, sizeof base, FAM "%s.tokenizer.json",
                 cJSON_GetObjectItemCaseSensitive(v, "base")->valuestring);
        cJSON *tj = tu_read_json(base), *patch;
        cJSON_ArrayForEach(patch, cJSON_GetObjectItemCaseSensitive(v, "patches"))
            apply_patch(tj, cJSON_GetObjectItemCaseSensitive(patch, "path"),
                        cJSON_GetObjectItemCaseSensitive(patch, "value"));
        char *text = cJSON_PrintUnformatted(tj);
        cr_assert_not_null(text);
        tu_write_file(path, text, strlen(text));
        free(text);
        cJSON_Delete(tj);
        hs_tokenizer *t = NULL;
        hs_error err = {{0}};
        cr_assert_eq(hs_tokenizer_load_json(path, &t, &err), HS_OK, "%s: %s", name, err.msg);
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(v, "ids")->child, *th = texts->child;
        for (size_t k = 0; th; th = th->next, ids = ids->next, k++) {
            cJSON *c = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "text_hex", th->valuestring);
            cr_assert(tu_golden_case(t, c, ids, cJSON_GetArraySize(ids), name, k, 1, NULL), "%s: text %zu differs",
                      name, k);
            cJSON_Delete(c);
            checked++;
        }
        hs_tokenizer_free(t);
    }
    cr_assert_geq(checked, 100);
    tu_rm_rf(dir);
    cJSON_Delete(g);
}
