/* The GGUF tokenizer defects of issue 39, on the vocabulary-only files of
 * fixtures/gguf/tokdefects/ (fixtures/gguf/make_tok_defects.py; no llama.cpp needed):
 *   - a Llama vocabulary whose scores are all equal gives the ids of fixtures/ref/spm_ref.py
 *     (llama.cpp's SentencePiece procedure: a pair formed by a merge competes at once) on
 *     1,000 texts, "Hello" -> <s> ▁H ell o first;
 *   - a RoBERTa file says add_bos_token / add_eos_token: <s> text </s>, the pair <s> a </s>
 *     </s> b </s>; a BERT file without them keeps [CLS] text [SEP], with both false neither;
 *   - a special-token id beyond the vocabulary: the file opens, hs_model_warnings names the
 *     key, and the default id is used, as llama.cpp does. */
#include <cJSON.h>

#include "headscope/model.h"
#include "headscope/tokenizer.h"
#include "tokutil.h"

#define TD "fixtures/gguf/tokdefects/"

static hs_model *open_vocab(const char *file)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_open(file, HS_OPEN_TOKENIZER, &m, &err), HS_OK, "%s: %s", file, err.msg);
    return m;
}

/* The ids of text (and pair) as a string "a b c". */
static void ids_of(const hs_model *m, const char *text, const char *pair, char *out, size_t cap)
{
    hs_encoding e;
    hs_error err = {{0}};
    cr_assert_eq(hs_tokenizer_encode(hs_model_tokenizer(m), text, strlen(text), pair,
                                     pair ? strlen(pair) : 0, &e, &err),
                 HS_OK, "%s", err.msg);
    size_t pos = 0;
    out[0] = '\0';
    for (size_t i = 0; i < e.n && pos + 16 < cap; i++)
        pos += (size_t)snprintf(out + pos, cap - pos, "%s%d", i ? " " : "", (int)e.ids[i]);
    hs_encoding_free(&e);
}

Test(gguf_tokdefects, equal_scores_merge_as_llama_cpp)
{
    hs_model *m = open_vocab(TD "llama-equal-scores.gguf");
    cJSON *root = tu_read_json(TD "equal_scores.json");
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases"), *c;
    int n = 0, bad = 0;
    cJSON_ArrayForEach(c, cases) {
        const char *text = cJSON_GetObjectItemCaseSensitive(c, "text")->valuestring;
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, "ids"), *id;
        hs_encoding e;
        hs_error err = {{0}};
        cr_assert_eq(hs_tokenizer_encode(hs_model_tokenizer(m), text, strlen(text), NULL, 0, &e,
                                         &err), HS_OK, "%s", err.msg);
        int same = (size_t)cJSON_GetArraySize(want) == e.n, k = 0;
        cJSON_ArrayForEach(id, want) {
            same = same && e.ids[k] == (int32_t)id->valueint;
            k++;
        }
        if (!same && bad++ < 12) {
            char got[512] = "", hex[256] = "";
            size_t pos = 0;
            for (size_t i = 0; i < e.n && pos + 16 < sizeof got; i++)
                pos += (size_t)snprintf(got + pos, sizeof got - pos, " %d", (int)e.ids[i]);
            for (size_t i = 0; text[i] && i < 100; i++)
                snprintf(hex + 2 * i, 3, "%02x", (unsigned char)text[i]);
            char *w = cJSON_PrintUnformatted(want);
            cr_log_error("'%s' (%s): got%s want %s", text, hex, got, w);
            free(w);
        }
        hs_encoding_free(&e);
        n++;
    }
    cr_expect_eq(n, 1000);
    cr_expect_eq(bad, 0, "%d of %d texts differ from llama.cpp's procedure", bad, n);
    char ids[256];
    ids_of(m, "Hello", NULL, ids, sizeof ids);
    const hs_tokenizer *t = hs_model_tokenizer(m);
    cr_expect_str_eq(ids, "1 714 1188 338");
    cr_expect_str_eq(hs_tokenizer_token(t, 714), "\xe2\x96\x81H");
    cr_expect_str_eq(hs_tokenizer_token(t, 1188), "ell");
    cr_expect_str_eq(hs_tokenizer_token(t, 338), "o");
    cJSON_Delete(root);
    hs_model_free(m);
}

Test(gguf_tokdefects, roberta_adds_bos_and_eos)
{
    hs_model *m = open_vocab(TD "roberta.gguf");
    char ids[256];
    /* vocab.json: <s> 0, </s> 2; "Hello world" in its byte-level symbols (no merge applies):
     * H 76, e 105, l 112, l 112, o 115, Ġ 36, w 123, o 115, r 118, l 112, d 104 */
    ids_of(m, "Hello world", NULL, ids, sizeof ids);
    cr_expect_str_eq(ids, "0 76 105 112 112 115 36 123 115 118 112 104 2");
    ids_of(m, "Hi", "yo", ids, sizeof ids);
    cr_expect_str_eq(ids, "0 76 109 2 2 125 115 2", "RoBERTa's pair: <s> a </s> </s> b </s>");
    cr_expect_str_eq(hs_model_warnings(m), "");
    hs_model_free(m);
}

Test(gguf_tokdefects, bert_follows_add_bos_and_add_sep)
{
    char ids[256];
    hs_model *m = open_vocab("fixtures/gguf/good/tiny-bert-vocab.gguf");
    ids_of(m, "the cat", NULL, ids, sizeof ids);
    char with[256];
    snprintf(with, sizeof with, "%s", ids);
    hs_model_free(m);
    m = open_vocab(TD "bert-no-cls-sep.gguf");
    ids_of(m, "the cat", NULL, ids, sizeof ids);
    /* the same ids less the first ([CLS]) and the last ([SEP]) */
    const char *sp = strchr(with, ' ');
    const char *last = strrchr(with, ' ');
    cr_assert(sp && last && last > sp, "'%s'", with);
    char inner[256];
    snprintf(inner, sizeof inner, "%.*s", (int)(last - sp - 1), sp + 1);
    cr_expect_str_eq(ids, inner, "without add_bos_token / add_sep_token: '%s', with: '%s'", ids,
                     with);
    hs_model_free(m);
}

Test(gguf_tokdefects, special_id_beyond_vocabulary_warns_and_goes_on)
{
    hs_model *m = open_vocab(TD "llama-bos-beyond.gguf");
    cr_expect_str_eq(hs_model_warnings(m),
                     "tokenizer.ggml.bos_token_id = 5000 is beyond the vocabulary of 2393 tokens; "
                     "the default 1 is used, as llama.cpp does\n");
    char ids[256];
    ids_of(m, "Hello", NULL, ids, sizeof ids);
    cr_expect_eq(strncmp(ids, "1 ", 2), 0, "BOS is the default id 1: '%s'", ids);
    hs_model_free(m);
    m = open_vocab(TD "llama-equal-scores.gguf");
    cr_expect_str_eq(hs_model_warnings(m), "", "a file without a bad id warns of nothing");
    hs_model_free(m);
}
