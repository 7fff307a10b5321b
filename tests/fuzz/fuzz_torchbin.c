/* libFuzzer harness for the pytorch_model.bin reader (hs_torchbin_parse from memory: zip
 * central directory, restricted unpickler, tensor checks) and the weight builder behind it:
 * every file the reader accepts is handed to the GPT-2, BERT, RoBERTa and DistilBERT weight
 * builders with a small fixed config, so shape, dtype and size checks run on its views too. The same bytes also
 * go straight to the unpickler (pk_parse), so mutations reach it without having to keep a
 * zip archive intact.
 *
 * Build and run: `make fuzz` (clang -fsanitize=fuzzer,address,undefined), seed corpus
 * the .bin files in fixtures/torchbin.
 * Replay (plain main, -DHS_FUZZ_REPLAY): every file named on the command line is run once;
 * `make test` replays the committed corpus this way. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "families.h"
#include "model/model_internal.h"
#include "model/pickle.h"
#include "model/torchbin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    const hs_torchbin *tb;
} fz_ctx;

static const hs_tensor_view *fz_lookup(void *ctx, const char *name, const hs_tensor_ref *r,
                                       int *out_in)
{
    fz_ctx *c = ctx;
    (void)r;
    *out_in = 0;
    return hs_torchbin_find(c->tb, name);
}

static const pk_allow fz_allow[] = {
    {"collections", "OrderedDict", 1},
    {"torch._utils", "_rebuild_tensor_v2", 0},
    {"torch", "FloatStorage", 0},
};

/* Walks every node and kid of a parsed pickle: each index must be in range. */
static void fz_pickle(const uint8_t *data, size_t size)
{
    pk_doc doc;
    hs_error err = {{0}};
    hs_status st = pk_parse(data, size, fz_allow, sizeof fz_allow / sizeof fz_allow[0], &doc,
                            &err);
    if (st == HS_OK && doc.root >= doc.n)
        abort();
    if (st != HS_OK && !err.msg[0])
        abort();
    for (size_t i = 0; i < doc.n; i++)
        for (uint32_t k = 0; k < doc.nodes[i].n; k++)
            if (doc.nodes[i].kids[k] >= doc.n)
                abort();
    pk_free(&doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_pickle(data, size);
    hs_torchbin *tb = NULL;
    hs_error err = {{0}};
    if (hs_torchbin_parse(data, size, "fuzz", &tb, &err) != HS_OK) {
        if (!err.msg[0])
            abort(); /* every failure has a message */
        return 0;
    }
    for (size_t i = 0; i < tb->n; i++) { /* touch every byte a view claims */
        const hs_tensor_view *v = &tb->tensors[i];
        if (v->data < data || v->nbytes > size || v->data + v->nbytes > data + size ||
            hs_torchbin_find(tb, v->name) == NULL)
            abort();
        volatile unsigned char sink = 0;
        for (size_t k = 0; k < v->nbytes; k++)
            sink ^= v->data[k];
        (void)sink;
    }
    for (size_t i = 0; i < tb->n_skipped; i++)
        if (!hs_torchbin_skipped(tb, tb->skipped[i].name))
            abort();
    for (size_t k = 0; k < FZ_N_FAMILIES; k++) {
        hs_model m;
        memset(&m, 0, sizeof m);
        fz_family_config(&m, k);
        fz_ctx ctx = {tb};
        (void)hs_weights_build(&m, fz_lookup, &ctx, &err);
        free(m.arena);
        free(m.moe_arena);
        free(m.layers);
    }
    hs_torchbin_close(tb);
    return 0;
}

#include "replay.h"
