/*
 * The real byte-level BPE tokenizers of Falcon, StarCoder2 and DeepSeek (deepseek-coder,
 * deepseek-llm / DeepSeek-V2, DeepSeek-V3's pre-tokenizer) against Hugging Face's tokenizers
 * library: fixtures/tokenizer/real_golden.json holds the library's ids (count, FNV-1a 64 and
 * the type-0 count) of 2,342 cases through each file, made by make_real_goldens.js. The cuts
 * of the real vocabularies to 2,000 merges (fixtures/tokenizer/real/<name>.small.tokenizer.json)
 * are always checked; the whole vocabularies (build/real-tokenizers/, built from llama.cpp's
 * models/ggml-vocab-*.gguf by real/make_real_tokenizers.py: `make real-tokenizers`) when
 * they are there, and then also against llama.cpp's own .inp/.out files of the hub
 * tokenizers' ids (HS_LLAMACPP_MODELS, default /work/llamacpp/models). Plus the regex
 * engine of the Split steps on hand-worked cases and its refusals.
 */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "headscope/tokenizer.h"
#include "testutil.h"
#include "text/regex.h"
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

/* Every case of real_golden.json through tokenizers[name]: count, hash and type ids. */
static void check_real(const char *name, int optional)
{
    tu_fam_cases fc = tu_load_fam_cases_from(GOLDEN);
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(fc.golden, "tokenizers"), name);
    const char *file = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ref, "file"));
    cr_assert_not_null(file, "%s: no such tokenizer in %s", name, GOLDEN);
    if (optional && access(file, R_OK) != 0) {
        cr_log_warn("%s: %s is not built (make real-tokenizers, from llama.cpp's vocabularies): not checked",
                    name, file);
        tu_free_fam_cases(&fc);
        return;
    }
    hs_tokenizer *t = load(file);
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
    cr_assert_geq(pairs, 200);
    hs_tokenizer_free(t);
    tu_free_fam_cases(&fc);
}

Test(tokenizer_real, falcon_cut_matches_the_library) { check_real("falcon_small", 0); }
Test(tokenizer_real, starcoder_cut_matches_the_library) { check_real("starcoder_small", 0); }
Test(tokenizer_real, deepseek_coder_cut_matches_the_library) { check_real("deepseek_coder_small", 0); }
Test(tokenizer_real, deepseek_llm_cut_matches_the_library) { check_real("deepseek_llm_small", 0); }
Test(tokenizer_real, deepseek_v3_cut_matches_the_library) { check_real("deepseek_v3_small", 0); }
Test(tokenizer_real, falcon_matches_the_library, .timeout = 120) { check_real("falcon", 1); }
Test(tokenizer_real, starcoder_matches_the_library, .timeout = 120) { check_real("starcoder", 1); }
Test(tokenizer_real, deepseek_coder_matches_the_library, .timeout = 120) { check_real("deepseek_coder", 1); }
Test(tokenizer_real, deepseek_llm_matches_the_library, .timeout = 120) { check_real("deepseek_llm", 1); }
Test(tokenizer_real, deepseek_v3_matches_the_library, .timeout = 120) { check_real("deepseek_v3", 1); }

/* llama.cpp's models/ggml-vocab-<gguf>.gguf.inp texts and .out ids (the hub tokenizer's, without
 * special tokens) through build/real-tokenizers/<name>.tokenizer.json. */
static void check_llamacpp(const char *name, const char *gguf)
{
    const char *dir = getenv("HS_LLAMACPP_MODELS") ? getenv("HS_LLAMACPP_MODELS") : "/work/llamacpp/models";
    char inp[512], outp[512], file[256];
    snprintf(inp, sizeof inp, "%s/ggml-vocab-%s.gguf.inp", dir, gguf);
    snprintf(outp, sizeof outp, "%s/ggml-vocab-%s.gguf.out", dir, gguf);
    snprintf(file, sizeof file, "build/real-tokenizers/%s.tokenizer.json", name);
    if (access(inp, R_OK) || access(outp, R_OK) || access(file, R_OK)) {
        cr_log_warn("%s: %s or %s is missing: not checked against llama.cpp's files", name, inp, file);
        return;
    }
    size_t ilen, olen;
    char *in = read_file(inp, &ilen), *out = read_file(outp, &olen);
    hs_tokenizer *t = load(file);
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
    hs_tokenizer_free(t);
    free(in);
    free(out);
}

Test(tokenizer_real, falcon_matches_llamacpp_outs, .timeout = 60) { check_llamacpp("falcon", "falcon"); }
Test(tokenizer_real, starcoder_matches_llamacpp_outs, .timeout = 60) { check_llamacpp("starcoder", "starcoder"); }
Test(tokenizer_real, deepseek_coder_matches_llamacpp_outs, .timeout = 60)
{
    check_llamacpp("deepseek_coder", "deepseek-coder");
}
Test(tokenizer_real, deepseek_llm_matches_llamacpp_outs, .timeout = 60)
{
    check_llamacpp("deepseek_llm", "deepseek-llm");
}
