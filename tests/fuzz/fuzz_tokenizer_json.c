/*
 * libFuzzer harness for hs_tokenizer_load_json: arbitrary bytes as a tokenizer.json (written
 * to a temporary file, the loader takes a path). A file that loads must encode a few texts
 * with every id in range and its token string the vocabulary's; one that does not must fail
 * with a status and a message, never crash or leak.
 *
 * Build and run from the repository root (make fuzz does this):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_POSIX_C_SOURCE=200809L \
 *       -Iinclude -Isrc tests/fuzz/fuzz_tokenizer_json.c src/text/?*.c src/core/status.c \
 *       $(pkg-config --cflags --libs libcjson libutf8proc) -o build-fuzz/fuzz_tokenizer_json
 *   build-fuzz/fuzz_tokenizer_json -max_len=65536 build-fuzz/corpus-tokenizer-json
 * Replay without libFuzzer (add -DHS_FUZZ_REPLAY_MAIN): ./fuzz_tokenizer_json_replay FILE...
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "headscope/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];

static void die(const char *msg)
{
    fprintf(stderr, "fuzz_tokenizer_json: %s\n", msg);
    abort();
}

static void check_encode(const hs_tokenizer *t, const char *text, const char *pair)
{
    hs_encoding e = {0};
    hs_error err = {{0}};
    if (hs_tokenizer_encode(t, text, strlen(text), pair, pair ? strlen(pair) : 0, &e, &err) != HS_OK)
        die(err.msg);
    size_t V = hs_tokenizer_vocab_size(t);
    if (e.n_text + e.n_pair + hs_tokenizer_special_count(t, pair != NULL) != e.n)
        die("segment lengths and the template's special tokens do not add up");
    char buf[64];
    for (size_t i = 0; i < e.n; i++) {
        size_t n = hs_tokenizer_display(t, e.ids[i], buf, sizeof buf);
        if (n >= sizeof buf || buf[n] != '\0')
            die("display is not NUL-terminated");
        if (e.ids[i] < 0 || (size_t)e.ids[i] >= V)
            die("id out of range");
        if (!hs_tokenizer_token(t, e.ids[i]))
            die("no vocabulary string for the id");
    }
    hs_encoding_free(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/hs_fuzz_tokjson_%ld.json", (long)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        die("cannot write the temporary file");
    hs_tokenizer *t = NULL;
    hs_error err = {{0}};
    hs_status st = hs_tokenizer_load_json(path, &t, &err);
    if (st != HS_OK) {
        if (t || !err.msg[0])
            die("failure without a message, or with a tokenizer");
        return 0;
    }
    check_encode(t, "Hello world! [MASK] <|endoftext|> h\xc3\xa9llo \xe6\x9d\xb1\xe4\xba\xac", NULL);
    check_encode(t, " <s>  <mask> e\xcc\x81 12345\r\n\t'S \xe2\x82\xac\xf0\x9f\x98\x80   x", NULL);
    check_encode(t, "a", "b c");
    check_encode(t, "", NULL);
    hs_tokenizer_free(t);
    return 0;
}

#define HS_FUZZ_REPLAY_CLEANUP() do { if (path[0]) remove(path); } while (0)
#include "replay.h"
