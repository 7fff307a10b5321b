/* Hugging Face folder: which tokenizer files to read and how. tokenizer.json first, as
 * transformers 5 does; otherwise vocab.json + merges.txt (GPT-2) or vocab.txt +
 * tokenizer_config.json (BERT). When both kinds are there they must agree. A family whose
 * descriptor says .tokenizer == 0 (Llama: SentencePiece-style for Llama 2, byte-level for
 * Llama 3) takes whatever tokenizer.json holds and refuses vocabulary files alone; a
 * byte-level family whose tokenizer adds special tokens (RoBERTa's <s> ... </s>) takes
 * tokenizer.json without comparing vocab.json + merges.txt with it (they cannot say what the
 * post-processor adds), and without tokenizer.json reads them as GPT-2's (no <s> ... </s>:
 * docs/tokenizers.md, known limits). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "model/model_internal.h"

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* do_lower_case from tokenizer_config.json (default true). */
static hs_status read_lowercase(const char *path, int *lower, hs_error *err)
{
    *lower = 1;
    if (!file_exists(path))
        return HS_OK;
    char *text = NULL;
    size_t len = 0;
    hs_status st = hs_read_file(path, 16u << 20, &text, &len, err);
    if (st)
        return st;
    cJSON *root = NULL;
    char what[HS_ERROR_MSG_MAX / 2];
    snprintf(what, sizeof what, "'%.200s'", path);
    st = hs_json_parse(text, len, 1u << 20, what, &root, err);
    free(text);
    if (st)
        return st;
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return hs_fail(err, HS_E_FORMAT, "'%s' is not a JSON object", path);
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "do_lower_case");
    if (cJSON_IsBool(v))
        *lower = cJSON_IsTrue(v);
    cJSON_Delete(root);
    return HS_OK;
}

/* Whether the family's tokenizer is what its vocabulary files build: GPT-2's byte-level BPE
 * that adds nothing, or BERT's WordPiece. */
static int vocab_files_suffice(const hs_arch *arch)
{
    return (arch->tokenizer == HS_TOK_BPE && !arch->cls_token) || arch->tokenizer == HS_TOK_WORDPIECE;
}

/* The vocabulary files of the folder; *out stays NULL when there are none. */
static hs_status load_vocab_files(const char *dir, const hs_arch *arch, hs_tokenizer **out,
                                  hs_error *err)
{
    char a[4096], b[4096];
    if (!arch->tokenizer) {
        /* weights only is fine for id-level work; vocabulary files alone would be wrong */
        snprintf(a, sizeof a, "%s/vocab.json", dir);
        snprintf(b, sizeof b, "%s/tokenizer.model", dir);
        if (file_exists(a) || file_exists(b))
            return hs_fail(err, HS_E_UNSUPPORTED, "'%s' has no tokenizer.json: a %s model's tokenizer is read "
                           "from tokenizer.json only (vocab.json / tokenizer.model do not hold its "
                           "post-processor)", dir, arch->name);
        return HS_OK;
    }
    if (arch->tokenizer == HS_TOK_BPE) {
        snprintf(a, sizeof a, "%s/vocab.json", dir);
        snprintf(b, sizeof b, "%s/merges.txt", dir);
        int ha = file_exists(a), hb = file_exists(b);
        if (!ha && !hb)
            return HS_OK; /* weights only: fine for id-level work */
        if (ha != hb)
            return hs_fail(err, HS_E_IO, "'%s' has %s but not %s", dir,
                           ha ? "vocab.json" : "merges.txt", ha ? "merges.txt" : "vocab.json");
        return hs_tokenizer_load_gpt2(a, b, out, err);
    }
    snprintf(a, sizeof a, "%s/vocab.txt", dir);
    if (!file_exists(a))
        return HS_OK;
    snprintf(b, sizeof b, "%s/tokenizer_config.json", dir);
    int lower;
    hs_status st = read_lowercase(b, &lower, err);
    if (st)
        return st;
    return hs_tokenizer_load_bert(a, lower, out, err);
}

/* tokenizer.json and the vocabulary files must describe the same tokenizer: the files'
 * vocabulary is the json's (which may add tokens after it), the special tokens have the
 * same ids, and they agree on lowercasing. Cheap: sizes, specials, three sample tokens. */
static hs_status check_agree(const char *dir, const hs_arch *arch, const hs_tokenizer *j,
                             const hs_tokenizer *f, hs_error *err)
{
    const char *const *sp = arch->specials;
    size_t n_sp = (size_t)arch->n_specials;
    size_t nj = hs_tokenizer_vocab_size(j), nf = hs_tokenizer_vocab_size(f);
    if (hs_tokenizer_get_kind(j) != hs_tokenizer_get_kind(f))
        return hs_fail(err, HS_E_FORMAT, "'%s': tokenizer.json is %s but the vocabulary files are %s",
                       dir, hs_tokenizer_kind_name(hs_tokenizer_get_kind(j)),
                       hs_tokenizer_kind_name(hs_tokenizer_get_kind(f)));
    if (nj < nf)
        return hs_fail(err, HS_E_FORMAT,
                       "'%s': tokenizer.json has %zu tokens but the vocabulary files %zu", dir, nj, nf);
    const size_t sample[3] = {0, nf / 2, nf - 1};
    for (size_t k = 0; k < 3; k++)
        if (strcmp(hs_tokenizer_token(j, (int32_t)sample[k]), hs_tokenizer_token(f, (int32_t)sample[k])) != 0)
            return hs_fail(err, HS_E_FORMAT,
                           "'%s': tokenizer.json and the vocabulary files differ at id %zu", dir, sample[k]);
    for (size_t k = 0; k < n_sp; k++) {
        int32_t a = hs_tokenizer_id(j, sp[k]), b = hs_tokenizer_id(f, sp[k]);
        if (a != b)
            return hs_fail(err, HS_E_FORMAT,
                           "'%s': tokenizer.json gives '%s' id %d but the vocabulary files id %d", dir,
                           sp[k], a, b);
    }
    if (hs_tokenizer_lowercase(j) != hs_tokenizer_lowercase(f))
        return hs_fail(err, HS_E_FORMAT, "'%s': tokenizer.json %s but tokenizer_config.json says "
                       "do_lower_case=%s", dir, hs_tokenizer_lowercase(j) ? "lowercases" : "does not lowercase",
                       hs_tokenizer_lowercase(f) ? "true" : "false");
    return HS_OK;
}

hs_status hs_hf_tokenizer_load(const char *dir, const hs_arch *arch, hs_tokenizer **out,
                               hs_error *err)
{
    char path[4096];
    hs_tokenizer *j = NULL, *f = NULL;
    hs_status st;
    *out = NULL;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (!file_exists(path))
        return load_vocab_files(dir, arch, out, err);
    if ((st = hs_tokenizer_load_json(path, &j, err)) != HS_OK)
        return st;
    hs_tokenizer_kind want = arch->tokenizer, got = hs_tokenizer_get_kind(j);
    if (want && want != got) {
        hs_tokenizer_free(j);
        return hs_fail(err, HS_E_FORMAT, "'%s': tokenizer.json holds a %s tokenizer but %s models use %s", dir,
                       hs_tokenizer_kind_name(got), arch->name, hs_tokenizer_kind_name(want));
    }
    if (!vocab_files_suffice(arch)) { /* tokenizer.json is the whole story */
        *out = j;
        return HS_OK;
    }
    if ((st = load_vocab_files(dir, arch, &f, err)) != HS_OK ||
        (f && (st = check_agree(dir, arch, j, f, err)) != HS_OK)) {
        hs_tokenizer_free(f);
        hs_tokenizer_free(j);
        return st;
    }
    hs_tokenizer_free(f);
    *out = j;
    return HS_OK;
}
