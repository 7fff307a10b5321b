/*
 * libFuzzer harness: reads arbitrary bytes as a partial aggregate (partial.json,
 * headscope.partial/1) through hs_corpus_partial_parse.
 *
 * Build and run from the repository root (make fuzz does this):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_POSIX_C_SOURCE=200809L \
 *       -Iinclude -Isrc tests/fuzz/fuzz_partial.c src/?*\/?*.c viz/?*.c \
 *       $(pkg-config --cflags --libs openblas libpng libcjson libutf8proc) -lm -o build-fuzz/fuzz_partial
 *   build-fuzz/fuzz_partial -max_len=65536 -max_total_time=60 build-fuzz/corpus-partial
 * Replay files without libFuzzer (make fuzz-replay): build/replay/fuzz_partial FILE...
 *
 * Every input is either refused with HS_E_INPUT (or HS_E_NOMEM) and a message, or read
 * into a partial whose counts agree (no statistic counts more texts than n_texts) and that
 * writes back to JSON which reads back to the same JSON.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/corpus.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *msg)
{
    fprintf(stderr, "fuzz_partial: %s\n", msg);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hs_corpus_partial p, q;
    hs_error err = {{0}};
    hs_status st = hs_corpus_partial_parse((const char *)data, size, &p, &err);
    if (st != HS_OK) {
        if ((st != HS_E_INPUT && st != HS_E_NOMEM) || !err.msg[0])
            die("a refusal without HS_E_INPUT and a message");
        return 0;
    }
    const hs_corpus_agg *g = p.agg;
    if (p.info.shard < 1 || p.info.shard > p.info.n_shards)
        die("shard out of range");
    for (int i = 0; g && i < g->n_heads * HS_CQ_COUNT; i++)
        if (g->stats[i].n < 0 || g->stats[i].n > g->n_texts)
            die("a statistic counts more texts than n_texts");
    char *a = hs_corpus_partial_json(g, &p.info, p.cp.position ? &p.cp : NULL);
    if (!a)
        die("cannot write back");
    if (hs_corpus_partial_parse(a, strlen(a), &q, &err) != HS_OK)
        die(err.msg);
    char *b = hs_corpus_partial_json(q.agg, &q.info, q.cp.position ? &q.cp : NULL);
    if (!b || strcmp(a, b))
        die("written back, read back and written again, the partial changed");
    free(a);
    free(b);
    hs_corpus_partial_free(&q);
    hs_corpus_partial_free(&p);
    return 0;
}

#include "replay.h"
