/* A vocabulary-only GGUF file (llama.cpp's models/ggml-vocab-*.gguf) of an architecture
 * headscope does not run, such as starcoder2: opened with HS_OPEN_TOKENIZER (tokenize), its
 * "gpt2" or "llama" vocabulary is read as a rotary decoder's (src/model/gguf_tokenizer.c:
 * tokenizer.ggml.pre names the pre-tokenizer, add_bos_token / add_eos_token the specials),
 * which is how llama.cpp reads it whatever the architecture. */
#include <string.h>

#include "model/gguf_internal.h"

hs_status hs_gguf_vocab_config(const hs_gguf *g, int flags, hs_model_config *cfg, hs_arch *own, int *done,
                               hs_error *err)
{
    long ai, ti, ki;
    hs_status st;
    *done = 0;
    if (!(flags & HS_OPEN_TOKENIZER) || hs_gguf_tensor_count(g) != 0)
        return HS_OK;
    if ((st = hs_gguf_find_typed(g, "general.architecture", HS_GGUF_STRING, 0, &ai, err)) ||
        (st = hs_gguf_find_typed(g, "tokenizer.ggml.model", HS_GGUF_STRING, 0, &ti, err)) ||
        (st = hs_gguf_find_array(g, "tokenizer.ggml.tokens", HS_GGUF_STRING, 0, &ki, err)))
        return st;
    if (ai < 0 || ti < 0 || ki < 0)
        return HS_OK;
    hs_gguf_value arch, model;
    hs_gguf_kv_get(g, (size_t)ai, 0, &arch);
    hs_gguf_kv_get(g, (size_t)ti, 0, &model);
    const hs_arch *llama = hs_arch_find_gguf("llama", NULL);
    if (hs_arch_find_gguf(arch.str, model.str) || !llama ||
        (strcmp(model.str, "gpt2") != 0 && strcmp(model.str, "llama") != 0))
        return HS_OK; /* a known architecture, or a vocabulary llama.cpp ties to one */
    size_t n = hs_gguf_kv_len(g, (size_t)ki);
    if (n == 0 || n > 1u << 30)
        return hs_fail(err, HS_E_VALUE, "tokenizer.ggml.tokens has %zu entries", n);
    char key[160];
    snprintf(key, sizeof key, "%.120s.context_length", arch.str);
    memset(cfg, 0, sizeof *cfg);
    *own = *llama;
    cfg->arch = own;
    cfg->family = own->family;
    cfg->act = own->act;
    cfg->vocab_size = (int)n;
    if ((st = hs_gguf_get_u32(g, key, 0, &cfg->n_ctx, err)))
        return st;
    *done = 1;
    return HS_OK;
}
