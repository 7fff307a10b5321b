/* libFuzzer harness for the GGUF reader (hs_gguf_parse from a memory buffer), touching
 * every key, value, array element and tensor byte the parser hands out; then the model built
 * from the same bytes as a file (hs_model_load: the architecture's keys, the tokenizer from
 * tokenizer.ggml.*, Llama's Q/K order, rope_freqs, the weights converted), which must load or
 * fail with a one-line message, and a model that loads must tokenize a fixed text into ids
 * inside its vocabulary and run a forward pass on them.
 *
 * Build and run (clang; the seed corpus is the committed fixtures):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_POSIX_C_SOURCE=200809L \
 *       -Iinclude -Isrc tests/fuzz/fuzz_gguf.c src/model/gguf.c src/core/status.c \
 *       -o build/fuzz_gguf
 *   mkdir -p build/corpus-gguf && find fixtures/gguf -name '*.gguf' -exec cp {} build/corpus-gguf/ ';'
 *   build/fuzz_gguf -max_total_time=60 -max_len=65536 build/corpus-gguf
 * (`make fuzz` does this with the whole library; `make fuzz-replay`, in `make test`, runs the
 * committed files once through a plain main.)
 */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "headscope/forward.h"
#include "headscope/gguf.h"
#include "headscope/model.h"
#include "headscope/tokenizer.h"
#include "tokcheck.h"

static char dir[] = "/tmp/hs-fuzz-gguf-XXXXXX", model_file[64];
static int have_dir;

static void cleanup(void)
{
    if (have_dir) {
        unlink(model_file);
        rmdir(dir);
        have_dir = 0;
    }
}

/* The model from data written to a file: loads or fails with one line; a model that loads
 * tokenizes and runs. */
static void model_from(const uint8_t *data, size_t size)
{
    if (!have_dir) {
        if (!mkdtemp(dir))
            abort();
        have_dir = 1;
        snprintf(model_file, sizeof model_file, "%s/model.gguf", dir);
        atexit(cleanup);
    }
    FILE *f = fopen(model_file, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        abort(); /* the harness's own failure, not the library's */
    hs_model *m = NULL;
    hs_error err = {{0}};
    if (hs_model_load(model_file, &m, &err) != HS_OK) {
        if (!err.msg[0] || strchr(err.msg, '\n'))
            abort(); /* every failure has a one-line message */
        return;
    }
    const hs_tokenizer *t = hs_model_tokenizer(m);
    const hs_model_config *c = hs_model_config_of(m);
    int32_t ids[4] = {0, 0, 0, 0};
    int n = c->n_ctx < 4 ? c->n_ctx : 4;
    if (t) {
        static const char text[] = "Hello world, the heads attend.";
        size_t got = fz_encode_checked(t, text, sizeof text - 1, ids, (size_t)n);
        for (size_t i = 0; i < got; i++)
            ids[i] = ids[i] < c->vocab_size ? ids[i] : 0;
    }
    hs_forward_opts o = {0};
    err.msg[0] = 0;
    if (n > 0 && hs_forward(m, ids, NULL, n, &o, NULL, &err) != HS_OK &&
        (!err.msg[0] || strchr(err.msg, '\n')))
        abort();
    hs_model_free(m);
}

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
    model_from(data, size);
    return 0;
}

#define HS_FUZZ_REPLAY_CLEANUP() cleanup()
#include "replay.h"
