/* libFuzzer harness for a model folder's text files: config.json and the vocabulary files
 * (vocab.json + merges.txt for GPT-2, vocab.txt for BERT), read by hs_model_open with
 * HS_OPEN_TOKENIZER. The input is the files separated by a line "%%": config.json, then
 * vocab.json (when it starts with '{') and merges.txt, or vocab.txt. Every input must open
 * or fail with a one-line message; a folder that opens must tokenize a fixed text into ids
 * inside the vocabulary.
 *
 * Build and run: `make fuzz` (clang -fsanitize=fuzzer,address,undefined), seed corpus
 * fixtures/fuzz-folder/. Replay (plain main, -DHS_FUZZ_REPLAY_MAIN): `make test` runs the
 * committed corpus once. The files are written to one temporary folder per process. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "headscope/model.h"
#include "headscope/tokenizer.h"
#include "parts.h"
#include "tokcheck.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/hs-fuzz-folder-XXXXXX";
static int have_dir;
static const char *const names[] = {"config.json", "vocab.json", "merges.txt", "vocab.txt"};

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

static void remove_files(void)
{
    char p[128];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        path_of(p, sizeof p, names[i]);
        unlink(p);
    }
}

static void cleanup(void)
{
    if (have_dir) {
        remove_files();
        rmdir(dir);
        have_dir = 0;
    }
}

static void put(const char *name, const uint8_t *d, size_t n)
{
    char p[128];
    path_of(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    if (!f || (n && fwrite(d, 1, n, f) != n) || fclose(f) != 0)
        abort(); /* the harness's own failure, not the library's */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_dir_once(dir, &have_dir, cleanup);
    remove_files();
    /* the parts between "\n%%\n" separators */
    const uint8_t *part[3];
    size_t len[3];
    int parts = fuzz_parts(data, size, part, len, 3, 0);
    put("config.json", part[0], len[0]);
    if (parts > 1 && len[1] && part[1][0] == '{') {
        put("vocab.json", part[1], len[1]);
        put("merges.txt", parts > 2 ? part[2] : part[0], parts > 2 ? len[2] : 0);
    } else if (parts > 1) {
        put("vocab.txt", part[1], len[1]);
    }
    hs_model *m = NULL;
    hs_error err = {{0}};
    if (hs_model_open(dir, HS_OPEN_TOKENIZER, &m, &err) != HS_OK) {
        if (!err.msg[0] || strchr(err.msg, '\n'))
            abort(); /* every failure has a one-line message */
        return 0;
    }
    const hs_tokenizer *t = hs_model_tokenizer(m);
    if (t) {
        static const char text[] = "Hello world, the heads [MASK] attend.";
        fz_encode_checked(t, text, sizeof text - 1, NULL, 0);
    }
    hs_model_free(m);
    return 0;
}

#define HS_FUZZ_REPLAY_CLEANUP cleanup
#include "replay.h"
