/* GGUF of T5, llama.cpp's t5 architecture (src/model/gguf_t5.c), for gguf_load.c,
 * gguf_write.c and gguf_tokenizer.c. Private to src/model/. */
#ifndef HEADSCOPE_GGUF_T5_H
#define HEADSCOPE_GGUF_T5_H

#include "model/gguf_internal.h"
#include "model/model_internal.h"

/* After the generic keys (block_count read into cfg->n_layer: the encoder's): the decoder's
 * blocks, d_kv, the buckets (their distance llama.cpp's 128), the RMS epsilon,
 * decoder_start_token_id, the MLP by blk.0.ffn_gate and the head by output.weight. */
hs_status hs_gguf_t5_read(const hs_gguf *g, const char *arch, hs_model_config *cfg, hs_arch *own,
                          hs_error *err);

/* HS_E_UNSUPPORTED naming what llama.cpp's t5 cannot hold (a bucket distance other than
 * 128, an MLP other than ReLU or gated tanh GELU); HS_OK otherwise (and for other families). */
hs_status hs_gguf_t5_writable(const hs_model *m, hs_error *err);

/* The t5 hyperparameters in the order of llama.cpp's converter, general.file_type last. */
void hs_gguf_t5_keys(hs_gguf_meta *mt, const hs_model_config *c, const char *arch, uint32_t ftype);

/* The "t5" vocabulary (tokens tok[0..n_tok)) into m->tok: a Unigram tokenizer. */
hs_status hs_gguf_t5_tokenizer_load(hs_model *m, const hs_gguf *g, const char *const *tok,
                                    size_t n_tok, hs_error *err);

/* tokenizer.ggml.* of m's Unigram tokenizer; HS_E_UNSUPPORTED naming what has no form. */
hs_status hs_gguf_t5_tokenizer_write(hs_gguf_meta *mt, const hs_model *m, hs_error *err);

#endif
