/* libFuzzer harness for the GGUF reader (hs_gguf_parse from a memory buffer), touching
 * every key, value, array element and tensor byte the parser hands out.
 *
 * Build and run (clang; the seed corpus is the committed fixtures):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_POSIX_C_SOURCE=200809L \
 *       -Iinclude -Isrc tests/fuzz/fuzz_gguf.c src/model/gguf.c src/core/status.c \
 *       -o build/fuzz_gguf
 *   mkdir -p build/corpus-gguf && find fixtures/gguf -name '*.gguf' -exec cp {} build/corpus-gguf/ ';'
 *   build/fuzz_gguf -max_total_time=60 -max_len=65536 build/corpus-gguf
 *
 * Replay (no libFuzzer: a plain main runs every file given, e.g. the corpus, as a test):
 *   cc -g -fsanitize=address,undefined -std=c11 -D_POSIX_C_SOURCE=200809L -DHS_FUZZ_REPLAY \
 *       -Iinclude -Isrc tests/fuzz/fuzz_gguf.c src/model/gguf.c src/core/status.c \
 *       -o build/fuzz_gguf_replay
 *   find fixtures/gguf -name '*.gguf' -exec build/fuzz_gguf_replay {} +
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hs_gguf *g = NULL;
    hs_error err = {{0}};
    if (hs_gguf_parse(data, size, &g, &err) != HS_OK) {
        if (memchr(err.msg, '\0', sizeof err.msg) == NULL) /* always terminated */
            abort();
        return 0;
    }
    volatile size_t sink = 0;
    for (size_t i = 0; i < hs_gguf_kv_count(g); i++) {
        sink += strlen(hs_gguf_kv_key(g, i));
        size_t n = hs_gguf_kv_len(g, i);
        for (size_t j = 0; j < n && j < 4096; j++) {
            hs_gguf_value v;
            if (hs_gguf_kv_get(g, i, j, &v) != HS_OK)
                abort();
            if (v.type == HS_GGUF_STRING)
                sink += v.len + (v.len ? (unsigned char)v.str[v.len - 1] : 0);
            else
                sink += (size_t)v.u + (size_t)v.i;
        }
        if (hs_gguf_find_kv(g, hs_gguf_kv_key(g, i)) < 0)
            abort();
    }
    for (size_t i = 0; i < hs_gguf_tensor_count(g); i++) {
        const hs_gguf_tensor *t = hs_gguf_tensor_at(g, i);
        if (hs_gguf_find_tensor(g, t->name) != t)
            abort();
        if (t->nbytes)
            sink += t->data[0] + t->data[t->nbytes - 1];
    }
    (void)sink;
    hs_gguf_free(g);
    return 0;
}

#include "replay.h"
