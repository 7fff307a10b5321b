/*
 * libFuzzer harness: encodes arbitrary bytes with the GPT-2 BPE and BERT WordPiece tokenizers
 * and the nine family tokenizer.json files (RoBERTa, GPT-NeoX, Llama 2 in both layouts, Llama 3,
 * Qwen2, T5's three Unigram layouts with the Precompiled map), loaded once from the repository's fixtures/tokenizer (or $HS_TOKENIZER_DIR holding
 * gpt2/vocab.json, gpt2/merges.txt, bert/vocab.txt and families/), and checks the results.
 *
 * Build and run from the repository root:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_POSIX_C_SOURCE=200809L \
 *       -Iinclude -Isrc tests/fuzz/fuzz_tokenizer.c src/text/?*.c src/core/status.c \
 *       $(pkg-config --cflags --libs libcjson libutf8proc) -o build-fuzz/fuzz_tokenizer
 *   build-fuzz/fuzz_tokenizer -max_len=4096 -max_total_time=60 build-fuzz/corpus-tokenizer
 * Replay files without libFuzzer (any C compiler; add -DHS_FUZZ_REPLAY_MAIN):
 *   cc -DHS_FUZZ_REPLAY_MAIN ... -o fuzz_tokenizer_replay && ./fuzz_tokenizer_replay FILE...
 *
 * Input: byte 0 chooses where a pair starts (none when it is 0), the rest is the text.
 * Invalid UTF-8 must give HS_E_INPUT; anything else must encode, with every id in range, its
 * token string equal to the vocabulary's, type ids 0 then 1, BERT's [CLS]/[SEP] framing, the
 * template's special tokens counted in n (n_text + n_pair + specials), and a truncation to
 * a length chosen from the input keeping that count within the limit.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_FAMILIES 9
static const char *const family_names[N_FAMILIES] = {"roberta", "neox", "llama2", "llama2_ms", "llama3", "qwen2",
                                                     "t5", "t5_new", "unigram_bf"};
static hs_tokenizer *tok_gpt2, *tok_bert, *tok_family[N_FAMILIES];

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "fuzz_tokenizer: %s: %s\n", what, msg);
    abort();
}

static void load_once(void)
{
    if (tok_gpt2)
        return;
    const char *dir = getenv("HS_TOKENIZER_DIR");
    char a[1024], b[1024];
    hs_error err = {{0}};
    if (!dir)
        dir = "fixtures/tokenizer";
    snprintf(a, sizeof a, "%s/gpt2/vocab.json", dir);
    snprintf(b, sizeof b, "%s/gpt2/merges.txt", dir);
    if (hs_tokenizer_load_gpt2(a, b, &tok_gpt2, &err) != HS_OK)
        die("load gpt-2", err.msg);
    snprintf(a, sizeof a, "%s/bert/vocab.txt", dir);
    if (hs_tokenizer_load_bert(a, 1, &tok_bert, &err) != HS_OK)
        die("load bert", err.msg);
    for (int k = 0; k < N_FAMILIES; k++) {
        snprintf(a, sizeof a, "%s/families/%s.tokenizer.json", dir, family_names[k]);
        if (hs_tokenizer_load_json(a, &tok_family[k], &err) != HS_OK)
            die(family_names[k], err.msg);
    }
}

static int valid_utf8(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i], need, lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF)
            need = 1;
        else if (c >= 0xE0 && c <= 0xEF)
            need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4)
            need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else
            return 0;
        if (n - i - 1 < need)
            return 0;
        for (unsigned k = 1; k <= need; k++) {
            unsigned x = s[i + k];
            if (x < (k == 1 ? lo : 0x80) || x > (k == 1 ? hi : 0xBF))
                return 0;
        }
        i += need + 1;
    }
    return 1;
}

static void check(const hs_tokenizer *t, const char *name, const char *text, size_t len,
                  const char *pair, size_t pair_len, int valid)
{
    hs_encoding e = {0};
    hs_error err = {{0}};
    hs_status st = hs_tokenizer_encode(t, text, len, pair, pair_len, &e, &err);
    if (!valid) {
        if (st != HS_E_INPUT || e.n != 0 || !strstr(err.msg, "byte offset"))
            die(name, "invalid utf-8 not rejected as HS_E_INPUT");
        return;
    }
    if (st != HS_OK)
        die(name, err.msg);
    int bert = hs_tokenizer_get_kind(t) == HS_TOK_WORDPIECE;
    size_t V = hs_tokenizer_vocab_size(t);
    if (bert && (e.n < 2 || e.ids[0] != hs_tokenizer_id(t, "[CLS]") ||
                 e.ids[e.n - 1] != hs_tokenizer_id(t, "[SEP]")))
        die(name, "missing [CLS] ... [SEP]");
    if (!bert && len + pair_len > 0 && e.n == 0)
        die(name, "no tokens for non-empty text");
    char buf[64];
    for (size_t i = 0; i < e.n; i++) {
        if (e.ids[i] < 0 || (size_t)e.ids[i] >= V)
            die(name, "id out of range");
        if (!hs_tokenizer_token(t, e.ids[i]))
            die(name, "no vocabulary string for the id");
        if (e.type_ids[i] != 0 && e.type_ids[i] != 1)
            die(name, "bad type id");
        if (i > 0 && e.type_ids[i] < e.type_ids[i - 1])
            die(name, "type ids not 0 then 1");
        size_t n = hs_tokenizer_display(t, e.ids[i], buf, sizeof buf);
        if (n >= sizeof buf || buf[n] != '\0' || !valid_utf8((const uint8_t *)buf, n))
            die(name, "display is not NUL-terminated valid utf-8");
    }
    if (!pair && e.n > 0 && e.type_ids[e.n - 1] != 0)
        die(name, "type id 1 without a pair");
    size_t specials = hs_tokenizer_special_count(t, pair != NULL);
    if (e.n_text + e.n_pair + specials != e.n || e.paired != (pair != NULL))
        die(name, "segment lengths and the template's special tokens do not add up");
    size_t max = specials + (len + pair_len) % 7;
    hs_encoding_truncate(t, &e, max);
    if (e.n > max || e.n_text + e.n_pair + specials != e.n)
        die(name, "truncation broke the template");
    hs_encoding_free(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    load_once();
    if (size == 0)
        return 0;
    size_t split = data[0], len = size - 1;
    const char *text = (const char *)data + 1, *pair = NULL;
    size_t text_len = len, pair_len = 0;
    if (split > 0 && split <= len) {
        text_len = split - 1;
        pair = text + text_len;
        pair_len = len - text_len;
    }
    int valid = valid_utf8((const uint8_t *)text, text_len) &&
                (!pair || valid_utf8((const uint8_t *)pair, pair_len));
    check(tok_gpt2, "gpt-2", text, text_len, pair, pair_len, valid);
    check(tok_bert, "bert", text, text_len, pair, pair_len, valid);
    for (int k = 0; k < N_FAMILIES; k++)
        check(tok_family[k], family_names[k], text, text_len, pair, pair_len, valid);
    return 0;
}

static void free_all(void)
{
    hs_tokenizer_free(tok_gpt2);
    hs_tokenizer_free(tok_bert);
    for (int k = 0; k < N_FAMILIES; k++)
        hs_tokenizer_free(tok_family[k]);
}

#define HS_FUZZ_REPLAY_CLEANUP() free_all()
#include "replay.h"
