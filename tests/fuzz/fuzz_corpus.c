/*
 * libFuzzer harness: reads arbitrary bytes as a corpus (lines, JSONL and auto-detected)
 * through hs_corpus_open_stream and checks every record.
 *
 * Build and run from the repository root (make fuzz does this):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_POSIX_C_SOURCE=200809L \
 *       -Iinclude -Isrc tests/fuzz/fuzz_corpus.c src/?*\/?*.c viz/?*.c \
 *       $(pkg-config --cflags --libs openblas libpng libcjson libutf8proc) -lm -o build-fuzz/fuzz_corpus
 *   build-fuzz/fuzz_corpus -max_len=65536 -max_total_time=60 build-fuzz/corpus-corpus
 * Replay files without libFuzzer (make fuzz-replay): build with -DHS_FUZZ_REPLAY and run
 *   build/replay/fuzz_corpus FILE...
 *
 * Input: byte 0 chooses the format (mod 3: auto, lines, jsonl), the rest is the corpus.
 * Every record must come back either good (valid UTF-8 text, NUL-terminated, length as
 * given, a pair only from JSONL) or marked with a known skip reason and no text; line
 * numbers must increase; the reader must reach the end.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/corpus.h"
#include "text/text_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *msg)
{
    fprintf(stderr, "fuzz_corpus: %s\n", msg);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    static const hs_corpus_format fmts[3] = {HS_CORPUS_AUTO, HS_CORPUS_LINES, HS_CORPUS_JSONL};
    hs_corpus_format fmt = fmts[data[0] % 3];
    size_t len = size - 1;
    /* fmemopen needs a non-empty writable-or-not buffer: copy it */
    char *buf = malloc(len + 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, len);
    FILE *f = len ? fmemopen(buf, len, "rb") : fopen("/dev/null", "rb");
    if (!f) {
        free(buf);
        return 0;
    }
    hs_corpus_reader *r = NULL;
    hs_error err = {{0}};
    if (hs_corpus_open_stream(f, fmt, &r, &err) != HS_OK)
        die(err.msg);
    long last = 0, records = 0;
    for (;;) {
        hs_corpus_item it;
        int done = 0;
        if (hs_corpus_next(r, &it, &done, &err) != HS_OK)
            die(err.msg);
        if (done)
            break;
        records++;
        if (it.line <= last)
            die("line numbers do not increase");
        last = it.line;
        if (it.skip) {
            if (it.skip < 0 || it.skip >= HS_SKIP_COUNT || it.text || it.pair)
                die("a skipped record with text or an unknown reason");
            if (!memchr(it.detail, '\0', sizeof it.detail))
                die("detail not NUL-terminated");
            continue;
        }
        size_t bad;
        if (!it.text || it.text[it.len] != '\0' || !hs_utf8_valid(it.text, it.len, &bad))
            die("text not NUL-terminated valid UTF-8");
        if (it.len > HS_CORPUS_MAX_LINE)
            die("text longer than the bound");
        if (it.pair && (hs_corpus_reader_format(r) != HS_CORPUS_JSONL ||
                        it.pair[it.pair_len] != '\0' || !hs_utf8_valid(it.pair, it.pair_len, &bad)))
            die("bad pair");
    }
    if (last > (long)len + 1 || records + hs_corpus_empty(r) > (long)len + 1)
        die("more records than lines");
    hs_corpus_close(r);
    fclose(f);
    free(buf);
    return 0;
}

#include "replay.h"
