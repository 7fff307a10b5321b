/*
 * libFuzzer harness for the added-token matcher (src/text/added.c): the input is made into a
 * set of added tokens over a small alphabet (so that they overlap), some of them matched in
 * the normalized text (HS_ADD_NORMALIZED), equal strings under different ids among them, and
 * a text; every match the automaton gives, for both passes, must be the one a direct search
 * gives: from where the last match ended, the first position where a token of the pass
 * starts, the longest token there, the lowest id among equal strings.
 *
 * Input: byte 0 the number of tokens (1 + b % 48); per token a byte (length 1 + (b & 127) % 24, the
 * NORMALIZED flag from bit 7) then its bytes (b % 5 indexes "abcd\xc3\xa9" as 'a' 'b' 'c' 'd'
 * 'é'); then a byte r and the text's bytes the same way (b % 6, ' ' the sixth), the text
 * repeated 1 + r % 16 times (at most MAX_TEXT bytes) so that it crosses the matcher's blocks
 * of HS_ADDED_BLOCK.
 *
 * Build and run from the repository root (make fuzz does this, with the whole library):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_POSIX_C_SOURCE=200809L \
 *       -Iinclude -Isrc tests/fuzz/fuzz_added.c LIBRARY SOURCES $(pkg-config ...) \
 *       -o build-fuzz/fuzz_added
 *   build-fuzz/fuzz_added -max_len=4096 build-fuzz/corpus-added
 * Replay without libFuzzer (-DHS_FUZZ_REPLAY_MAIN, as make fuzz-replay builds it):
 *   build/replay/fuzz_added fixtures/fuzz-added/FILE...
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/text_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TOKENS 48
#define MAX_TOKEN_CHARS 24
#define MAX_TEXT 6000 /* bytes of repeated text: past two blocks, and the direct search stays fast */

static void die(const char *msg, size_t at)
{
    fprintf(stderr, "fuzz_added: %s (text byte %zu)\n", msg, at);
    abort();
}

/* Appends the character of class b (0..4 letters, 5 a space when spaces) to s. */
static size_t put_char(char *s, size_t n, unsigned b, int spaces)
{
    static const char *const chars[] = {"a", "b", "c", "d", "\xc3\xa9", " "};
    const char *c = chars[b % (spaces ? 6u : 5u)];
    size_t len = strlen(c);
    memcpy(s + n, c, len);
    return n + len;
}

/* The direct search: the first token of pass that starts at or after i, longest, lowest id;
 * its index into t->added, *at its start; -1 for none. */
static int32_t direct(const hs_tokenizer *t, int pass, const char *s, size_t len, size_t i,
                      size_t *at)
{
    for (size_t p = i; p < len; p++) {
        int32_t best = -1;
        for (size_t k = 0; k < t->n_added; k++) {
            int32_t id = t->added[k];
            size_t n = t->syms.len[id];
            if (((t->added_flags[k] & HS_ADD_NORMALIZED) != 0) != (pass != 0) || n > len - p ||
                memcmp(s + p, hs_strtab_str(&t->syms, id), n) != 0)
                continue;
            if (best < 0 || n > t->syms.len[t->added[best]] ||
                (n == t->syms.len[t->added[best]] && id < t->added[best]))
                best = (int32_t)k;
        }
        if (best >= 0) {
            *at = p;
            return best;
        }
    }
    return -1;
}

static void check_pass(const hs_tokenizer *t, int pass, const char *s, size_t len)
{
    hs_added_scan sc;
    hs_added_scan_init(&sc, t, pass, s, len);
    size_t i = 0;
    for (;;) {
        size_t at = SIZE_MAX, want_at = SIZE_MAX;
        int32_t k = hs_added_scan_next(&sc, i, &at), want = direct(t, pass, s, len, i, &want_at);
        if ((k < 0) != (want < 0))
            die(k < 0 ? "the automaton missed a token" : "the automaton found a token that is not there", i);
        if (k < 0)
            return;
        if (at != want_at || t->added[k] != t->added[want])
            die("the automaton's match differs from the direct search's", at);
        i = at + t->syms.len[t->added[k]];
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *tokens[MAX_TOKENS], text_one[4096 * 2];
    int32_t ids[MAX_TOKENS];
    unsigned char flags[MAX_TOKENS];
    size_t pos = 0, n_tok;
    if (size < 2)
        return 0;
    n_tok = 1 + data[pos++] % MAX_TOKENS;
    size_t made = 0;
    for (; made < n_tok && pos < size; made++) {
        unsigned lb = data[pos++];
        size_t chars = 1 + (lb & 0x7F) % MAX_TOKEN_CHARS, n = 0;
        tokens[made] = malloc(2 * MAX_TOKEN_CHARS + 1);
        if (!tokens[made])
            abort();
        for (size_t c = 0; c < chars && pos < size; c++)
            n = put_char(tokens[made], n, data[pos++], 0);
        if (n == 0)
            n = put_char(tokens[made], n, lb, 0);
        tokens[made][n] = '\0';
        ids[made] = (int32_t)made;
        flags[made] = (lb & 0x80) ? HS_ADD_NORMALIZED : 0;
    }
    unsigned rep = pos < size ? 1 + data[pos++] % 16 : 1;
    size_t one = 0;
    for (; pos < size && one + 2 <= sizeof text_one; pos++)
        one = put_char(text_one, one, data[pos], 1);
    while (rep > 1 && one * rep > MAX_TEXT)
        rep--;
    size_t len = one * rep;
    char *text = malloc(len ? len : 1);
    if (!text)
        abort();
    for (unsigned r = 0; r < rep; r++)
        memcpy(text + r * one, text_one, one);

    hs_tokenizer *t = hs_tok_alloc(HS_TOK_WORDPIECE);
    hs_error err = {{0}};
    if (!t || hs_tok_build_vocab(t, (const char *const *)tokens, made, 0, "fuzz", &err) != HS_OK ||
        hs_tok_set_added(t, ids, flags, made, &err) != HS_OK)
        die(err.msg, 0);
    check_pass(t, 0, text, len);
    check_pass(t, 1, text, len);
    hs_tokenizer_free(t);
    free(text);
    for (size_t k = 0; k < made; k++)
        free(tokens[k]);
    return 0;
}

#include "replay.h"
