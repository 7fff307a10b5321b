/* libFuzzer harness for the safetensors reader (hs_safetensors_parse from memory) and the
 * weight builder behind it: every header the parser accepts is handed to the GPT-2, BERT,
 * RoBERTa and DistilBERT weight builders with a small fixed config, so shape, dtype and size checks run too.
 *
 * Build and run: `make fuzz` (clang -fsanitize=fuzzer,address,undefined), seed corpus
 * fixtures/bad/ and fixtures/models/ safetensors files.
 * Replay (plain main, -DHS_FUZZ_REPLAY): every file named on the command line is run once;
 * `make test` replays the committed corpus this way. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "families.h"
#include "model/model_internal.h"
#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    const hs_safetensors *st;
} fz_ctx;

static const hs_tensor_view *fz_lookup(void *ctx, const char *name, const hs_tensor_ref *r,
                                       int *out_in)
{
    fz_ctx *c = ctx;
    (void)r;
    *out_in = 0;
    return hs_safetensors_find(c->st, name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hs_safetensors *st = NULL;
    hs_error err = {{0}};
    if (hs_safetensors_parse(data, size, "fuzz", &st, &err) != HS_OK)
        return 0;
    for (size_t i = 0; i < st->n; i++) { /* touch every byte a view claims */
        volatile unsigned char sink = 0;
        for (size_t k = 0; k < st->tensors[i].nbytes; k++)
            sink ^= st->tensors[i].data[k];
        (void)sink;
    }
    for (size_t k = 0; k < FZ_N_FAMILIES; k++) {
        hs_model m;
        memset(&m, 0, sizeof m);
        fz_family_config(&m, k);
        fz_ctx ctx = {st};
        (void)hs_weights_build(&m, fz_lookup, &ctx, &err);
        free(m.arena);
        free(m.moe_arena);
        free(m.layers);
    }
    hs_safetensors_close(st);
    return 0;
}

#include "replay.h"
