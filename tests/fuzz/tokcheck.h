/* The tokenizer check of the harnesses that open a model (fuzz_folder.c, fuzz_gguf.c): a fixed
 * text encodes, or fails with an error, and every id it gives is inside the vocabulary. */
#ifndef HEADSCOPE_FUZZ_TOKCHECK_H
#define HEADSCOPE_FUZZ_TOKCHECK_H

#include <stdint.h>
#include <stdlib.h>

#include "headscope/tokenizer.h"

/* Encodes text with t (aborting on an id outside the vocabulary); copies up to cap ids into
 * ids (may be NULL) and returns how many it copied (0 when the text does not encode). */
static size_t fz_encode_checked(const hs_tokenizer *t, const char *text, size_t len, int32_t *ids,
                                size_t cap)
{
    hs_encoding e = {0};
    hs_error err = {{0}};
    size_t copied = 0;
    if (hs_tokenizer_encode(t, text, len, NULL, 0, &e, &err) == HS_OK) {
        for (size_t i = 0; i < e.n; i++) {
            if (e.ids[i] < 0 || (size_t)e.ids[i] >= hs_tokenizer_vocab_size(t))
                abort();
            if (ids && copied < cap)
                ids[copied++] = e.ids[i];
        }
    }
    hs_encoding_free(&e);
    return copied;
}

#endif
