/*
 * libFuzzer harness for the regex engine of the Split pre-tokenizers (src/text/regex.c): the
 * input is a pattern and a subject, cut at the first NUL byte (no NUL: all pattern, the
 * subject empty). A pattern is compiled or refused with a message that names it; a compiled
 * one is searched from every character of the subject (when it is valid UTF-8, as the
 * tokenizer's texts are): each match must be non-empty, inside the subject, start and end on
 * characters, start at or after where the search started, and a search from its own start
 * must find the same match (nothing between the two starts matches). A search must not take
 * more than (instructions + 1) x (subject + 1) steps; the time limit of libFuzzer catches
 * one that does.
 *
 * Build and run from the repository root (make fuzz does this, with the whole library):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_POSIX_C_SOURCE=200809L \
 *       -Iinclude -Isrc tests/fuzz/fuzz_regex.c LIBRARY SOURCES $(pkg-config ...) \
 *       -o build-fuzz/fuzz_regex
 *   build-fuzz/fuzz_regex -max_len=4096 build-fuzz/corpus-regex
 * Replay without libFuzzer (-DHS_FUZZ_REPLAY_MAIN, as make fuzz-replay builds it):
 *   build/replay/fuzz_regex fixtures/fuzz-regex/FILE...
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/regex.h"
#include "text/text_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *msg, size_t at)
{
    fprintf(stderr, "fuzz_regex: %s (subject byte %zu)\n", msg, at);
    abort();
}

static int boundary(const uint8_t *s, size_t n, size_t i)
{
    return i == n || (s[i] & 0xC0) != 0x80;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t plen = nul ? (size_t)(nul - data) : size;
    char *pat = malloc(plen + 1);
    if (!pat)
        return 0;
    memcpy(pat, data, plen);
    pat[plen] = '\0';
    const uint8_t *s = nul ? nul + 1 : data + size;
    size_t n = nul ? size - plen - 1 : 0, bad;
    hs_rx *rx = NULL;
    hs_error err = {{0}};
    hs_status st = hs_rx_compile(pat, "fuzz", &rx, &err);
    free(pat);
    if (st != HS_OK) {
        if (rx || strncmp(err.msg, "fuzz: ", 6) != 0 || strlen(err.msg) < 10)
            die("a refusal without its message, or with a result", 0);
        return 0;
    }
    if (!hs_utf8_valid((const char *)s, n, &bad)) {
        hs_rx_free(rx);
        return 0;
    }
    for (size_t from = 0; from < n; from++) {
        if (!boundary(s, n, from))
            continue;
        size_t ms, me, ms2, me2;
        int r = hs_rx_search(rx, s, n, from, &ms, &me);
        if (r < 0)
            break; /* out of memory */
        if (!r)
            continue;
        if (ms < from || me <= ms || me > n || !boundary(s, n, ms) || !boundary(s, n, me))
            die("a match outside the subject, empty, or inside a character", from);
        if (hs_rx_search(rx, s, n, ms, &ms2, &me2) != 1 || ms2 != ms || me2 != me)
            die("a search from the match's start finds another match", ms);
    }
    hs_rx_free(rx);
    return 0;
}

#include "replay.h"
