/*
 * The real byte-level BPE tokenizers of Falcon, StarCoder2 and DeepSeek (deepseek-coder,
 * deepseek-llm / DeepSeek-V2, DeepSeek-V3's pre-tokenizer) against Hugging Face's tokenizers
 * library: fixtures/tokenizer/real_golden.json holds the library's ids (count, FNV-1a 64 and
 * the type-0 count) of 2,341 cases through each file, made by make_real_goldens.js. The cuts
 * of the real vocabularies to 2,000 merges (fixtures/tokenizer/real/<name>.small.tokenizer.json)
 * are always checked; the whole vocabularies (build/real-tokenizers/, built from llama.cpp's
 * models/ggml-vocab-*.gguf by real/make_real_tokenizers.py: `make real-tokenizers`) when
 * they are there, and then also against llama.cpp's own .inp/.out files of the hub
 * tokenizers' ids (HS_LLAMACPP_MODELS, set by make from LLAMACPP_MODELS). Plus the regex
 * engine of the Split steps on hand-worked cases and its refusals.
 */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "headscope/gguf.h"
#include "headscope/model.h"
#include "headscope/tokenizer.h"
#include "testutil.h"
#include "text/regex.h"
#include "text/text_internal.h"
#include "tokutil.h"

#define GOLDEN FIX "real_golden.json"

static uint64_t fnv1a(const int32_t *ids, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 4; k++) {
            h ^= ((uint32_t)ids[i] >> (8 * k)) & 0xffu;
            h *= 0x100000001b3u;
        }
    return h;
}

/* A whole file, NUL-terminated (*len bytes), or fails the test. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    cr_assert_geq(n, 0);
    rewind(f);
    char *b = malloc((size_t)n + 1);
    cr_assert_not_null(b);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n, "cannot read %s", path);
    fclose(f);
    b[n] = '\0';
    *len = (size_t)n;
    return b;
}

static hs_tokenizer *load(const char *path)
{
    hs_tokenizer *t = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_tokenizer_load_json(path, &t, &err), HS_OK, "cannot load %s: %s", path, err.msg);
    return t;
}

/* The tokenizer of a GGUF file, opened as `headscope tokenize` opens it (*m to be freed). */
static const hs_tokenizer *load_gguf(const char *path, hs_model **m)
{
    hs_error err = {{0}};
    cr_assert_eq(hs_model_open(path, HS_OPEN_TOKENIZER, m, &err), HS_OK, "cannot open %s: %s", path, err.msg);
    cr_assert_not_null(hs_model_tokenizer(*m), "%s: no tokenizer", path);
    return hs_model_tokenizer(*m);
}

/* Every case of real_golden.json through tokenizers[name]: count, hash and type ids; through
 * tok instead of the golden's file when given (a GGUF file's: the single texts only, GGUF
 * having no pair template). */
static void check_real_tok(const char *name, int optional, const hs_tokenizer *tok)
{
    tu_fam_cases fc = tu_load_fam_cases_from(GOLDEN);
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(fc.golden, "tokenizers");
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(all, name);
    const char *file = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ref, "file"));
    cr_assert_not_null(file, "%s: no such tokenizer in %s", name, GOLDEN);
    if (!tok && optional && access(file, R_OK) != 0) {
        /* an info line, not a warning (Criterion 2.4 exits 1 on one) nor a skip (its
         * parallel runner then leaks under LeakSanitizer) */
        cr_log_info("%s: %s is not built (make real-tokenizers, from llama.cpp's vocabularies): "
                    "not checked", name, file);
        tu_free_fam_cases(&fc);
        return;
    }
    hs_tokenizer *own = tok ? NULL : load(file);
    const hs_tokenizer *t = tok ? tok : own;
    const cJSON *count = cJSON_GetObjectItemCaseSensitive(ref, "count")->child;
    const cJSON *fnv = cJSON_GetObjectItemCaseSensitive(ref, "fnv")->child;
    const cJSON *nf = cJSON_GetObjectItemCaseSensitive(ref, "n_first")->child;
    cr_assert_geq(fc.n, 2000);
    size_t bad = 0, pairs = 0;
    for (size_t k = 0; k < fc.n; k++, count = count->next, fnv = fnv->next, nf = nf->next) {
        size_t len, plen = 0;
        char *text = tu_unhex(cJSON_GetObjectItemCaseSensitive(fc.c[k], "text_hex")->valuestring, &len);
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(fc.c[k], "pair_hex");
        char *pair = cJSON_IsString(ph) ? tu_unhex(ph->valuestring, &plen) : NULL;
        if (pair && tok) {
            pairs++;
            free(pair);
            free(text);
            continue;
        }
        hs_encoding e = {0};
        hs_error err = {{0}};
        cr_assert_eq(hs_tokenizer_encode(t, text, len, pair, plen, &e, &err), HS_OK, "%s case %zu: %s", name, k,
                     err.msg);
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)fnv1a(e.ids, e.n));
        int same = e.n == (size_t)count->valueint && strcmp(hex, fnv->valuestring) == 0;
        for (size_t i = 0; same && i < e.n; i++)
            same = e.type_ids[i] == (i < (size_t)nf->valueint ? 0 : 1);
        if (!same && bad++ < 10) {
            char shown[300], got[200] = "";
            size_t w = 0;
            for (size_t i = 0; i < e.n && w < 180; i++)
                w += (size_t)snprintf(got + w, sizeof got - w, " %d", e.ids[i]);
            cr_log_error("%s case %zu (text \"%s\"%s): got%s (%zu tokens), the library %d tokens", name, k,
                         tu_show_text(text, len, shown, sizeof shown), pair ? " + pair" : "", got, e.n,
                         count->valueint);
        }
        pairs += pair != NULL;
        hs_encoding_free(&e);
        free(pair);
        free(text);
    }
    cr_log_info("%s: %zu of %zu golden cases identical (%zu pairs)", name, fc.n - bad, fc.n, pairs);
    cr_assert_eq(bad, 0, "%s: %zu of %zu golden cases differ from the library", name, bad, fc.n);
    cr_assert_geq(tok ? fc.n - pairs : pairs, tok ? 2000 : 200);
    hs_tokenizer_free(own);
    tu_free_fam_cases(&fc);
}

static void check_real(const char *name, int optional)
{
    check_real_tok(name, optional, NULL);
}

Test(tokenizer_real, falcon_cut_matches_the_library) { check_real("falcon_small", 0); }
Test(tokenizer_real, starcoder_cut_matches_the_library) { check_real("starcoder_small", 0); }
Test(tokenizer_real, deepseek_coder_cut_matches_the_library) { check_real("deepseek_coder_small", 0); }
Test(tokenizer_real, deepseek_llm_cut_matches_the_library) { check_real("deepseek_llm_small", 0); }
Test(tokenizer_real, deepseek_v3_cut_matches_the_library) { check_real("deepseek_v3_small", 0); }
/* The cuts as vocabulary-only GGUF files (real/<name>.small.gguf, make_small_ggufs.py: the
 * keys of llama.cpp's own ggml-vocab-*.gguf, tokenizer.ggml.pre as its converter names it). */
static void check_gguf_cut(const char *name)
{
    char golden[64], path[128];
    snprintf(golden, sizeof golden, "%s_small", name);
    snprintf(path, sizeof path, FIX "real/%s.small.gguf", name);
    hs_model *m = NULL;
    check_real_tok(golden, 0, load_gguf(path, &m));
    hs_model_free(m);
}

Test(tokenizer_real, falcon_gguf_cut_matches_the_library, .timeout = 120) { check_gguf_cut("falcon"); }
Test(tokenizer_real, starcoder_gguf_cut_matches_the_library, .timeout = 120) { check_gguf_cut("starcoder"); }
Test(tokenizer_real, deepseek_coder_gguf_cut_matches_the_library, .timeout = 120)
{
    check_gguf_cut("deepseek_coder");
}
Test(tokenizer_real, deepseek_llm_gguf_cut_matches_the_library, .timeout = 120) { check_gguf_cut("deepseek_llm"); }
Test(tokenizer_real, deepseek_v3_gguf_cut_matches_the_library, .timeout = 120) { check_gguf_cut("deepseek_v3"); }

/* A tokenizer.json folder -> convert -> GGUF -> the library's ids on every single text of the
 * cut: a tiny checkpoint sized to the cut (fixtures/ref: Falcon-7B's layout for Falcon's
 * tokenizer, GPT-BigCode's for StarCoder's, Llama's for DeepSeek's, as llama.cpp files
 * deepseek-llm and deepseek-coder) written by hs_gguf_write (what convert runs), whose
 * tokenizer.ggml.pre must be pre, opened as tokenize opens it. */
static void check_convert_round_trip(const char *name, const char *maker, const char *pre)
{
    char golden[64], dir[64], cmd[512], path[128];
    snprintf(golden, sizeof golden, "%s_small", name);
    tu_mkdtemp(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 fixtures/ref/%s --out '%s/m' --tokenizer "
             FIX "real/%s.small.tokenizer.json >/dev/null", maker, dir, name);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    snprintf(path, sizeof path, "%s/m", dir);
    hs_model *h = NULL, *g = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_open(path, 0, &h, &err), HS_OK, "%s: %s", path, err.msg);
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    cr_assert_eq(hs_gguf_write(h, path, NULL, &err), HS_OK, "%s: %s", name, err.msg);
    size_t len;
    char *bytes = read_file(path, &len), want[64];
    snprintf(want, sizeof want, "tokenizer.ggml.pre%c%c%c%c%c%c%c%c%c%c%c%c%s", 8, 0, 0, 0,
             (int)strlen(pre), 0, 0, 0, 0, 0, 0, 0, pre); /* type STRING, u64 length */
    int found = 0;
    for (size_t i = 0; !found && i + 18 + 12 + strlen(pre) <= len; i++)
        found = !memcmp(bytes + i, want, 18 + 12 + strlen(pre));
    cr_assert(found, "%s: the file's tokenizer.ggml.pre is not '%s'", name, pre);
    check_real_tok(golden, 0, load_gguf(path, &g));
    free(bytes);
    hs_model_free(g);
    hs_model_free(h);
    tu_rm_rf(dir);
}

#define MQA "families_mqa.py --seed 1 --arch "
#define LLAMA "make_family_checkpoint.py --arch tiny-llama"
Test(tokenizer_real, falcon_converts_and_reads_back, .timeout = 120)
{
    check_convert_round_trip("falcon", MQA "tiny-falcon-mq", "falcon");
}
Test(tokenizer_real, starcoder_converts_and_reads_back, .timeout = 120)
{
    check_convert_round_trip("starcoder", MQA "tiny-bigcode", "starcoder");
}
Test(tokenizer_real, deepseek_coder_converts_and_reads_back, .timeout = 120)
{
    check_convert_round_trip("deepseek_coder", LLAMA, "deepseek-coder");
}
Test(tokenizer_real, deepseek_llm_converts_and_reads_back, .timeout = 120)
{
    check_convert_round_trip("deepseek_llm", LLAMA, "deepseek-llm");
}
Test(tokenizer_real, deepseek_v3_converts_and_reads_back, .timeout = 120)
{
    check_convert_round_trip("deepseek_v3", LLAMA, "deepseek-v3");
}

/* A Sequence that is none of DeepSeek's three (deepseek-coder's with \p{S} for \p{P} in one
 * pattern) has no GGUF name: the writer refuses it by name. */
Test(tokenizer_real, another_sequence_has_no_gguf_name)
{
    size_t len;
    char *text = read_file(FIX "real/deepseek_coder.small.tokenizer.json", &len), dir[64], path[128];
    char *at = strstr(text, "\\\\s?\\\\p{P}+"); /* as the file spells \s?\p{P}+ */
    cr_assert_not_null(at);
    at[8] = 'S'; /* \s?\p{S}+ */
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/t.json", dir);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(text, 1, len, f), len);
    fclose(f);
    hs_tokenizer *t = load(path);
    hs_tok_spec sp;
    hs_error err = {{0}};
    cr_assert_eq(hs_tokenizer_get_spec(t, &sp, &err), HS_E_UNSUPPORTED);
    cr_assert(strstr(err.msg, "other than DeepSeek's (deepseek-llm, deepseek-coder, deepseek-v3) has no GGUF form"),
              "%s", err.msg);
    hs_tokenizer_free(t);
    free(text);
    tu_rm_rf(dir);
}

Test(tokenizer_real, falcon_matches_the_library, .timeout = 120) { check_real("falcon", 1); }
Test(tokenizer_real, starcoder_matches_the_library, .timeout = 120) { check_real("starcoder", 1); }
Test(tokenizer_real, deepseek_coder_matches_the_library, .timeout = 120) { check_real("deepseek_coder", 1); }
Test(tokenizer_real, deepseek_llm_matches_the_library, .timeout = 120) { check_real("deepseek_llm", 1); }
Test(tokenizer_real, deepseek_v3_matches_the_library, .timeout = 120) { check_real("deepseek_v3", 1); }

/* llama.cpp's models/ggml-vocab-<gguf>.gguf.inp texts and .out ids (the hub tokenizer's, without
 * special tokens) through build/real-tokenizers/<name>.tokenizer.json. */
static void check_llamacpp(const char *name, const char *gguf, int from_gguf)
{
    const char *dir = getenv("HS_LLAMACPP_MODELS");
    if (!dir || !*dir) {
        cr_log_info("%s: HS_LLAMACPP_MODELS is not set: not checked against llama.cpp's files", name);
        return;
    }
    char inp[512], outp[512], file[256];
    snprintf(inp, sizeof inp, "%s/ggml-vocab-%s.gguf.inp", dir, gguf);
    snprintf(outp, sizeof outp, "%s/ggml-vocab-%s.gguf.out", dir, gguf);
    if (from_gguf) /* llama.cpp's file itself, as headscope tokenize reads it */
        snprintf(file, sizeof file, "%s/ggml-vocab-%s.gguf", dir, gguf);
    else
        snprintf(file, sizeof file, "build/real-tokenizers/%s.tokenizer.json", name);
    if (access(inp, R_OK) || access(outp, R_OK) || access(file, R_OK)) {
        cr_log_info("%s: %s or %s is missing: not checked against llama.cpp's files", name, inp, file);
        return;
    }
    size_t ilen, olen;
    char *in = read_file(inp, &ilen), *out = read_file(outp, &olen);
    hs_model *m = NULL;
    hs_tokenizer *own = from_gguf ? NULL : load(file);
    const hs_tokenizer *t = from_gguf ? load_gguf(file, &m) : own;
    size_t skip = hs_tokenizer_special_count(t, 0), cases = 0;
    static const char sep[] = "\n__ggml_vocab_test__\n"; /* after each text */
    char *text = in, *line = out;
    for (char *end; (end = strstr(text, sep)) != NULL; text = end + strlen(sep)) {
        char *eol = strchr(line, '\n');
        cr_assert_not_null(eol, "%s: fewer lines than texts", outp);
        *eol = '\0';
        hs_encoding e = {0};
        hs_error err = {{0}};
        cr_assert_eq(hs_tokenizer_encode(t, text, (size_t)(end - text), NULL, 0, &e, &err), HS_OK, "%s: %s", name,
                     err.msg);
        char *p = line;
        size_t i = skip;
        for (long v; *p; i++) {
            char *q;
            v = strtol(p, &q, 10);
            if (q == p)
                break;
            cr_assert(i < e.n && e.ids[i] == v, "%s: text %zu differs from llama.cpp's .out at token %zu", name,
                      cases, i - skip);
            p = q;
        }
        cr_assert_eq(i, e.n, "%s: text %zu has %zu tokens, llama.cpp's .out %zu", name, cases, e.n - skip, i - skip);
        hs_encoding_free(&e);
        cases++;
        line = eol + 1;
    }
    cr_log_info("%s: %zu texts identical to llama.cpp's .out", name, cases);
    cr_assert_geq(cases, 40);
    hs_tokenizer_free(own);
    hs_model_free(m);
    free(in);
    free(out);
}

Test(tokenizer_real, falcon_matches_llamacpp_outs, .timeout = 60) { check_llamacpp("falcon", "falcon", 0); }
Test(tokenizer_real, starcoder_matches_llamacpp_outs, .timeout = 60) { check_llamacpp("starcoder", "starcoder", 0); }
Test(tokenizer_real, deepseek_coder_matches_llamacpp_outs, .timeout = 60)
{
    check_llamacpp("deepseek_coder", "deepseek-coder", 0);
}
Test(tokenizer_real, deepseek_llm_matches_llamacpp_outs, .timeout = 60)
{
    check_llamacpp("deepseek_llm", "deepseek-llm", 0);
}
/* llama.cpp's vocabulary-only files themselves (tokenizer.ggml.pre falcon, starcoder,
 * deepseek-coder, deepseek-llm; starcoder's architecture starcoder2, which headscope does not
 * run): their .out ids */
Test(tokenizer_real, falcon_gguf_matches_llamacpp_outs, .timeout = 60) { check_llamacpp("falcon", "falcon", 1); }
Test(tokenizer_real, starcoder_gguf_matches_llamacpp_outs, .timeout = 60)
{
    check_llamacpp("starcoder", "starcoder", 1);
}
Test(tokenizer_real, deepseek_coder_gguf_matches_llamacpp_outs, .timeout = 60)
{
    check_llamacpp("deepseek_coder", "deepseek-coder", 1);
}
Test(tokenizer_real, deepseek_llm_gguf_matches_llamacpp_outs, .timeout = 60)
{
    check_llamacpp("deepseek_llm", "deepseek-llm", 1);
}

/* ---- the regex engine of the Split steps (regex.c) ----------------------------------------- */

/* The first match of pattern in subject from from: [ms, me), or none (ms = me = -1). Worked
 * by hand from Oniguruma's rules (leftmost start, then the first alternative and the longest
 * greedy repetition that lets the rest match; $ at the end or before a line feed); every case
 * was also run through the library's Split(Isolated) pre-tokenizer, whose pieces agree. */
Test(tokenizer_real, regex_finds_the_leftmost_first_match)
{
    static const struct { const char *pat, *subject; size_t from; long ms, me; } cases[] = {
        {"a|ab", "ab", 0, 0, 1},
        {"x|y|ab|a|abc", "zabc", 0, 1, 3}, /* the first alternative that matches, of five */
        {"ab|a", "ab", 0, 0, 2},
        {"\\s+(?!\\S)", "a   b", 1, 1, 3}, /* gives back the space before b */
        {"\\s+(?!\\S)", "a   ", 1, 1, 4},
        {"\\s+(?!\\S)|\\s+", "a b", 0, 1, 2},
        {"x(?=y)", "xzxy", 0, 2, 3},
        {"\\s+$", "x  \ny", 0, 1, 3}, /* $ before a line feed */
        {"\\s+$", "x  y  ", 0, 4, 6},
        {"\\s+$", "x \r", 0, 1, 3},
        {"\\p{N}{1,3}", "12345", 0, 0, 3},
        {"\\p{N}{1,3}", "12345", 3, 3, 5},
        {"x{2,}", "xxxxx y", 0, 0, 5},
        {"(?:ab)+c", "ababa ababc", 0, 6, 11},
        {"(ab|a)(bc)?d", "abcd", 0, 0, 4}, /* ab, then no bc and no d: back to a, bc, d */
        {"[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+", " e\xcc\x81x!", 0, 0, 5},
        {" ?[\\p{P}\\p{S}]+[\\r\\n]*", "a $+\n\nb", 0, 1, 6},
        {"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+", "x(foo)", 0, 1, 5},
        {"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+", "]x \\y ^z", 3, 3, 5},
        {"[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+",
         "ab\xe6\x97\xa5\xe6\x9c\xac\xe3\x81\xae\xe3\x82\xab\xe3\x83\x8a!", 0, 2, 17},
        {"\\s?\\p{P}+", "a ,,b", 0, 1, 4},
        {"[\r\n]", "ab\r\n", 0, 2, 3},
        {"[\\r\\n]", "ab\r\n", 3, 3, 4},
        {"\\P{L}+", "ab12!c", 0, 2, 5},
        {"[^a-c]+", "abcxyzab", 0, 3, 6},
        {"\\S+", "  \xe3\x80\x80x\xc2\xa0", 0, 5, 6}, /* U+3000 and U+00A0 are \s */
        {"[\xf0\x90\x90\x80-\xf0\x90\x91\x8f]+", "a\xf0\x90\x90\x80\xf0\x90\x90\x81" "b", 0, 1, 9},
        {"\\p{S}+", "a\xf0\x9f\x8c\x8d$^`x", 0, 1, 8},     /* 🌍 $ ^ ` are symbols */
        {"\\p{P}+", "a_-@\\x$", 0, 1, 5},                    /* _ - @ \ are punctuation, $ is not */
        {"\\p{M}", "e\xcc\x81\xe0\xa4\x82", 0, 1, 3},        /* U+0301 */
        {"\\p{N}", "abc", 0, -1, -1},
        {"\\.", "a.b", 0, 1, 2},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        hs_rx *rx = NULL;
        hs_error err = {{0}};
        cr_assert_eq(hs_rx_compile(cases[k].pat, "test", &rx, &err), HS_OK, "case %zu: %s", k, err.msg);
        size_t ms = 0, me = 0, n = strlen(cases[k].subject);
        int r = hs_rx_search(rx, (const unsigned char *)cases[k].subject, n, cases[k].from, &ms, &me);
        if (cases[k].ms < 0)
            cr_expect_eq(r, 0, "case %zu (%s): a match [%zu, %zu) where there is none", k, cases[k].pat, ms, me);
        else
            cr_expect(r == 1 && ms == (size_t)cases[k].ms && me == (size_t)cases[k].me,
                      "case %zu (%s): got %d [%zu, %zu), expected [%ld, %ld)", k, cases[k].pat, r, ms, me,
                      cases[k].ms, cases[k].me);
        hs_rx_free(rx);
    }
}

/* A hundred alternatives are a list, not a nesting: the first that matches wins. */
Test(tokenizer_real, regex_takes_many_alternatives)
{
    char pat[1024];
    size_t w = 0, ms = 0, me = 0;
    for (int k = 0; k < 100; k++)
        w += (size_t)snprintf(pat + w, sizeof pat - w, "%sa%d", k ? "|" : "", k);
    hs_rx *rx = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_rx_compile(pat, "test", &rx, &err), HS_OK, "%s", err.msg);
    cr_expect_eq(hs_rx_search(rx, (const unsigned char *)"xa57", 4, 0, &ms, &me), 1);
    cr_expect(ms == 1 && me == 3, "[%zu, %zu): a5 comes before a57", ms, me);
    hs_rx_free(rx);
}

/* A long run that fails late is looked at once per search, not once per start. */
Test(tokenizer_real, regex_search_is_linear_in_the_text, .timeout = 60)
{
    hs_rx *rx = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_rx_compile("\\s+$|\\s*[\\r\\n]+|\\s+(?!\\S)x", "test", &rx, &err), HS_OK, "%s", err.msg);
    size_t n = 1 << 18, ms, me; /* quadratic: 7e10 steps, past the timeout */
    unsigned char *s = malloc(n);
    cr_assert_not_null(s);
    memset(s, ' ', n - 1);
    s[n - 1] = 'y';
    cr_assert_eq(hs_rx_search(rx, s, n, 0, &ms, &me), 0);
    free(s);
    hs_rx_free(rx);
}

Test(tokenizer_real, regex_refuses_other_constructs_by_name)
{
    static const struct { const char *pat, *want; hs_status st; } cases[] = {
        {"(?i:'s|'t)", "the regex construct '(?' with options", HS_E_UNSUPPORTED},
        {"(?<=a)b", "the regex construct '(?<' (a lookbehind or a named group)", HS_E_UNSUPPORTED},
        {"a.b", "the regex construct '.' (any character)", HS_E_UNSUPPORTED},
        {"^a", "the regex construct '^' (a line start)", HS_E_UNSUPPORTED},
        {"a*?b", "the regex construct a lazy quantifier", HS_E_UNSUPPORTED},
        {"a++b", "the regex construct a possessive quantifier", HS_E_UNSUPPORTED},
        {"\\d+", "the regex construct the escape \\d", HS_E_UNSUPPORTED},
        {"\\p{Lu}", "\\p or \\P with a property other than {L}, {N}, {P}, {S}, {M}", HS_E_UNSUPPORTED},
        {"[[a]b]", "'[' inside a class", HS_E_UNSUPPORTED},
        {"[a&&b]", "'&&' (class intersection)", HS_E_UNSUPPORTED},
        {"a(?!bc)", "a lookahead other than of one character or class", HS_E_UNSUPPORTED},
        {"a*", "of a pattern that can match the empty text", HS_E_UNSUPPORTED},
        {"x|$", "of a pattern that can match the empty text", HS_E_UNSUPPORTED},
        {"a{2", "'{' that does not start a repetition", HS_E_UNSUPPORTED},
        {"a{1001}", "a repetition count above 1000", HS_E_UNSUPPORTED},
        {"a{3,2}", "a repetition {m,n} with n < m", HS_E_FORMAT},
        {"(a", "a group '(' is not closed", HS_E_FORMAT},
        {"[a", "a class '[' is not closed", HS_E_FORMAT},
        {"a)", "a ')' without its '('", HS_E_FORMAT},
        {"[z-a]", "a class range is out of order", HS_E_FORMAT},
        {"+a", "a repetition of nothing", HS_E_FORMAT},
        {"a\\", "the regex ends with '\\'", HS_E_FORMAT},
        {"a\xff", "the regex is not valid UTF-8", HS_E_FORMAT},
        {"(((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((a)))))))))))))))))))))))))))))))))))))))))"
         "))))))))))))))))))))))))",
         "groups nested deeper than 64", HS_E_UNSUPPORTED},
        {"(?:(?:(?:a{1000}){1000}){1000})", "the regex is too long once its repetitions are written out",
         HS_E_UNSUPPORTED},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        hs_rx *rx = NULL;
        hs_error err = {{0}};
        hs_status st = hs_rx_compile(cases[k].pat, "what", &rx, &err);
        cr_expect_eq(st, cases[k].st, "case %zu (%s): status %d", k, cases[k].pat, st);
        cr_expect(strncmp(err.msg, "what: ", 6) == 0 && strstr(err.msg, cases[k].want),
                  "case %zu: message '%s' lacks '%s'", k, err.msg, cases[k].want);
        cr_expect_null(rx);
        hs_rx_free(rx);
    }
}

/* A tokenizer.json whose Split has a construct the engine does not take is refused naming the
 * step and the construct; a Sequence of Split and Digits steps must end with ByteLevel. */
Test(tokenizer_real, tokenizer_json_refuses_a_split_it_cannot_run)
{
#define SEQ_JSON(steps)                                                                                \
    "{\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[" steps "]},"  \
    "\"post_processor\":null,\"added_tokens\":[],\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},"   \
    "\"merges\":[]}}"
#define BL "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}"
#define SPLIT_RX(rx)                                                                                   \
    "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"" rx "\"},\"behavior\":\"Isolated\",\"invert\":false}"
    static const struct { const char *text, *want; } cases[] = {
        {SEQ_JSON(SPLIT_RX("[\\\\r\\\\n]") "," SPLIT_RX("a.b") "," BL),
         "tokenizer.json: pre_tokenizer 'Split' 2 of the Sequence: the regex construct '.' (any character) is not "
         "supported"},
        {SEQ_JSON("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Removed\",\"invert\":false}," BL),
         "pre_tokenizer 'Split' 1 of the Sequence other than behavior Isolated, invert false is not supported"},
        {SEQ_JSON("{\"type\":\"Split\",\"pattern\":{\"String\":\"a\"},\"behavior\":\"Isolated\"}," BL),
         "pre_tokenizer 'Split' without a Regex pattern is not supported"},
        {SEQ_JSON("{\"type\":\"Digits\",\"individual_digits\":1}," BL),
         "Digits individual_digits must be true or false"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char msg[512];
        hs_status st = tu_load_json_text(cases[k].text, msg, sizeof msg);
        cr_expect_neq(st, HS_OK, "case %zu loaded", k);
        cr_expect(strstr(msg, cases[k].want), "case %zu: message '%s' lacks '%s'", k, msg, cases[k].want);
    }
}

/* Loads json (a tokenizer.json's text) and expects text (len bytes) to give ids[0..n). */
static void expect_ids(const char *json, const char *text, size_t len, const int32_t *ids, size_t n,
                       const char *label)
{
    char path[] = "/tmp/hs_real_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, json, strlen(json)), (ssize_t)strlen(json));
    close(fd);
    hs_tokenizer *t = load(path);
    unlink(path);
    hs_encoding e = {0};
    hs_error err = {{0}};
    cr_assert_eq(hs_tokenizer_encode(t, text, len, NULL, 0, &e, &err), HS_OK, "%s: %s", label, err.msg);
    int same = e.n == n;
    for (size_t i = 0; same && i < e.n; i++)
        same = e.ids[i] == ids[i];
    cr_expect(same, "%s: %zu ids, first %d; expected %zu, first %d", label, e.n, e.n ? e.ids[0] : -1, n, ids[0]);
    hs_encoding_free(&e);
    hs_tokenizer_free(t);
}

/* Replaces the first key in text (room for the result) with val. */
static void put(char *text, const char *key, const char *val)
{
    char *p = strstr(text, key);
    cr_assert_not_null(p);
    memmove(p + strlen(val), p + strlen(key), strlen(p + strlen(key)) + 1);
    memcpy(p, val, strlen(val));
}

/* Hand-worked pieces through a Sequence of every step kind: a merge joins only inside a piece,
 * so the ids show the cuts (the library gives the same ids: make_real_goldens.js's way, run by
 * hand). */
Test(tokenizer_real, sequence_steps_cut_pieces_in_order)
{
    /* vocabulary: a 0, b 1, 1 2, "aa" 3, space (Ġ) 4, "11" 5, "aĠ" 6; merges "a a", "1 1", "a Ġ" */
    static const char json[] =
        "{\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
        "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"b\"},\"behavior\":\"Isolated\",\"invert\":false},"
        "{\"type\":\"Digits\",\"individual_digits\":DIGITS},"
        "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":REGEX}]},"
        "\"post_processor\":null,\"added_tokens\":[],\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,"
        "\"1\":2,\"aa\":3,\"\\u0120\":4,\"11\":5,\"a\\u0120\":6},\"merges\":[\"a a\",\"1 1\",\"a \\u0120\"]}}";
    static const struct { const char *digits, *regex, *text; int32_t ids[8]; size_t n; } cases[] = {
        {"true", "false", "aabaa", {3, 1, 3}, 3},
        {"true", "false", "aba", {0, 1, 0}, 3},       /* b isolates: no "a a" across it */
        {"true", "false", "a11a", {0, 2, 2, 0}, 4},   /* each digit a piece */
        {"false", "false", "a11a", {0, 5, 0}, 3},     /* a run of digits one piece */
        {"false", "false", "a a", {6, 0}, 2},         /* no pattern: one piece, "a Ġ" merges */
        {"false", "true", "a a", {0, 4, 0}, 3},       /* GPT-2's pattern: "a", " a" */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char text[2048];
        snprintf(text, sizeof text, "%s", json);
        put(text, "DIGITS", cases[k].digits);
        put(text, "REGEX", cases[k].regex);
        char label[64];
        snprintf(label, sizeof label, "case %zu (%s)", k, cases[k].text);
        expect_ids(text, cases[k].text, strlen(cases[k].text), cases[k].ids, cases[k].n, label);
    }
}

/* A byte whose byte-level character is not in the vocabulary (and no unknown token) is dropped
 * before merging, as the library drops it: its neighbours merge across it (Falcon's vocabulary
 * lacks some control bytes; the library gives " \x1e\u2732" as "Ġâľ", "²"). */
Test(tokenizer_real, a_byte_outside_the_vocabulary_is_dropped_before_merging)
{
    static const char json[] =
        "{\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
        "\"use_regex\":true},\"post_processor\":null,\"added_tokens\":[],\"model\":{\"type\":\"BPE\","
        "\"vocab\":{\"\\u0120\":0,\"!\":1,\"\\u0120!\":2},\"merges\":[\"\\u0120 !\"]}}";
    static const int32_t want[] = {2};
    expect_ids(json, " \x1e!\x1e", 4, want, 1, "a byte outside");
}
