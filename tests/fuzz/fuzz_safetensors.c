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
    for (int fam = HS_FAMILY_GPT2; fam <= HS_FAMILY_DISTILBERT; fam++) {
        hs_model m;
        memset(&m, 0, sizeof m);
        m.cfg = (hs_model_config){.family = (hs_family)fam, .n_layer = 2, .n_head = 2,
                                  .d_model = 16, .d_ff = 64, .n_ctx = 16, .vocab_size = 100,
                                  .type_vocab_size = 2, .ln_eps = 1e-5f,
                                  .act = HS_ACT_GELU_TANH};
        if (hs_config_validate(&m.cfg, &err) != HS_OK)
            abort();
        fz_ctx ctx = {st};
        (void)hs_weights_build(&m, fz_lookup, &ctx, &err);
        free(m.arena);
        free(m.layers);
    }
    hs_safetensors_close(st);
    return 0;
}

#include "replay.h"
