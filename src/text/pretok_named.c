/*
 * The pre-tokenizer Sequences that a GGUF file names by tokenizer.ggml.pre (llama.cpp's
 * converter writes deepseek-llm, deepseek-coder and deepseek-v3 for DeepSeek's tokenizers):
 * each as the hub's tokenizer.json spells its pre_tokenizer list (deepseek-ai/
 * deepseek-llm-7b-base, which DeepSeek-V2 shares; deepseek-ai/deepseek-coder-6.7b-base;
 * deepseek-ai/DeepSeek-V3), built by the same parser as a tokenizer.json's (pretok_seq.c), so
 * a GGUF file and its tokenizer.json cut text alike. Writing, a tokenizer's Sequence is named
 * when it is one of these step for step, its patterns spelled the same.
 */
#include <cJSON.h>
#include <string.h>

#include "text/text_internal.h"

static const struct named_seq {
    int spec;
    const char *json; /* the pre_tokenizer's "pretokenizers" list */
} named[] = {
    {HS_SPEC_PRE_DEEPSEEK_LLM,
     "[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"[\\r\\n]\"},\"behavior\":\"Isolated\",\"invert\":false},{\"ty"
     "pe\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s?[A-Za-z\\u00b5\\u00c0-\\u00d6\\u00d8-\\u00f6\\u00f8-\\u01ba"
     "\\u01bc-\\u01bf\\u01c4-\\u0293\\u0295-\\u02af\\u0370-\\u0373\\u0376\\u0377\\u037b-\\u037d\\u037f\\u038"
     "6\\u0388-\\u038a\\u038c\\u038e-\\u03a1\\u03a3-\\u03f5\\u03f7-\\u0481\\u048a-\\u052f\\u0531-\\u0556\\u1"
     "0a0-\\u10c5\\u13a0-\\u13f5\\u13f8-\\u13fd\\u1c90-\\u1cba\\u1cbd-\\u1cbf\\u1d00-\\u1d2b\\u1d6b-\\u1d77"
     "\\u1d79-\\u1d9a\\u1e00-\\u1f15\\u1f18-\\u1f1d\\u1f20-\\u1f45\\u1f48-\\u1f4d\\u1f50-\\u1f57\\u1f59\\u1f"
     "5b\\u1f5d\\u1f5f-\\u1f7d\\u1f80-\\u1fb4\\u1fb6-\\u1fbc\\u1fbe\\u1fc2-\\u1fc4\\u1fc6-\\u1fcc\\u1fd0-\\u"
     "1fd3\\u1fd6-\\u1fdb\\u1fe0-\\u1fec\\u1ff2-\\u1ff4\\u1ff6-\\u1ffc\\u2102\\u2107\\u210a-\\u2113\\u2115\\"
     "u2119-\\u211d\\u2124\\u2126\\u2128\\u212a-\\u212d\\u212f-\\u2134\\u2139\\u213c-\\u213f\\u2145-\\u2149"
     "\\u214e\\u2183\\u2184\\u2c00-\\u2c7b\\u2c7e-\\u2ce4\\u2ceb-\\u2cee\\u2cf2\\u2cf3\\ua640-\\ua66d\\ua680"
     "-\\ua69b\\ua722-\\ua76f\\ua771-\\ua787\\ua78b-\\ua78e\\uab70-\\uabbf\\ufb00-\\ufb06\\ufb13-\\ufb17\\uf"
     "f21-\\uff3a\\uff41-\\uff5a\\ud801\\udc00-\\ud801\\udc4f\\ud801\\udcb0-\\ud801\\udcd3\\ud801\\udcd8-\\u"
     "d801\\udcfb\\ud803\\udc80-\\ud803\\udcb2\\ud803\\udcc0-\\ud803\\udcf2\\ud806\\udca0-\\ud806\\udcdf\\ud"
     "83a\\udd00-\\ud83a\\udd43]+\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"Split\",\"patter"
     "n\":{\"Regex\":\"\\\\s?[!-/:-~\\uff01-\\uff0f\\uff1a-\\uff5e\\u2018-\\u201f\\u3000-\\u3002]+\"},\"behavi"
     "or\":\"Isolated\",\"invert\":false},{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s+$\"},\"behavior\":\"I"
     "solated\",\"invert\":false},{\"type\":\"Split\",\"pattern\":{\"Regex\":\"[\\u4e00-\\u9fa5\\u0800-\\u4e00"
     "\\uac00-\\ud7ff]+\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"Digits\",\"individual_dig"
     "its\":true},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":"
     "false}]"},
    {HS_SPEC_PRE_DEEPSEEK_CODER,
     "[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"[\\r\\n]\"},\"behavior\":\"Isolated\",\"invert\":false},{\"ty"
     "pe\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s?\\\\p{L}+\"},\"behavior\":\"Isolated\",\"invert\":false},{\"ty"
     "pe\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s?\\\\p{P}+\"},\"behavior\":\"Isolated\",\"invert\":false},{\"ty"
     "pe\":\"Split\",\"pattern\":{\"Regex\":\"[\\u4e00-\\u9fa5\\u0800-\\u4e00\\uac00-\\ud7ff]+\"},\"behavior\":"
     "\"Isolated\",\"invert\":false},{\"type\":\"Digits\",\"individual_digits\":true},{\"type\":\"ByteLevel"
     "\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false}]"},
    {HS_SPEC_PRE_DEEPSEEK_V3,
     "[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\p{N}{1,3}\"},\"behavior\":\"Isolated\",\"invert\":false}"
     ",{\"type\":\"Split\",\"pattern\":{\"Regex\":\"[\\u4e00-\\u9fa5\\u3040-\\u309f\\u30a0-\\u30ff]+\"},\"behav"
     "ior\":\"Isolated\",\"invert\":false},{\"type\":\"Split\",\"pattern\":{\"Regex\":\"[!\\\"#$%&'()*+,\\\\-./:"
     ";<=>?@\\\\[\\\\\\\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\\\p{L}\\\\p{P}\\\\p{S}]?[\\\\p{L}\\\\p{M}]+| ?[\\\\p{P}\\\\p"
     "{S}]+[\\r\\n]*|\\\\s*[\\r\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type"
     "\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false}]"},
};
#define N_NAMED (sizeof named / sizeof named[0])

/* Sets t's pre-tokenizer to named[k]'s Sequence. */
static hs_status build(hs_tokenizer *t, size_t k, hs_error *err)
{
    cJSON *list = cJSON_Parse(named[k].json);
    if (!list)
        return hs_fail(err, HS_E_NOMEM, "out of memory building a pre-tokenizer");
    hs_status st = hs_pre_seq_parse(t, list, err);
    cJSON_Delete(list);
    return st;
}

hs_status hs_pre_seq_named(hs_tokenizer *t, int spec_pre, hs_error *err)
{
    for (size_t k = 0; k < N_NAMED; k++)
        if (named[k].spec == spec_pre)
            return build(t, k, err);
    return hs_fail(err, HS_E_ARG, "pre-tokenizer %d is not a named Sequence", spec_pre);
}

hs_status hs_pre_seq_spec(const hs_tokenizer *t, int *spec_pre, hs_error *err)
{
    *spec_pre = -1;
    for (size_t k = 0; t->pre == HS_PRE_SEQ && k < N_NAMED && *spec_pre < 0; k++) {
        hs_tokenizer scratch;
        memset(&scratch, 0, sizeof scratch);
        hs_status st = build(&scratch, k, err);
        if (st == HS_OK && hs_pre_seq_equal(scratch.pre_seq, t->pre_seq))
            *spec_pre = named[k].spec;
        hs_pre_seq_free(scratch.pre_seq);
        if (st)
            return st;
    }
    return HS_OK;
}
