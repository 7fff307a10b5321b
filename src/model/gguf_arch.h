/* GGUF of the multi-query families, Falcon and GPT-BigCode (src/model/gguf_arch.c), for
 * gguf_load.c and gguf_write.c. Private to src/model/. */
#ifndef HEADSCOPE_GGUF_ARCH_H
#define HEADSCOPE_GGUF_ARCH_H

#include "model/gguf_internal.h"
#include "model/model_internal.h"

/* After the generic keys: llama.cpp's falcon block (parallel, no biases, one norm or two by
 * blk.0.attn_norm_2) into own; nothing for starcoder. */
void hs_gguf_mqa_read(const hs_gguf *g, hs_arch *own);

/* HS_E_UNSUPPORTED naming what llama.cpp's falcon cannot hold (Falcon-RW's ALiBi, a
 * sequential block, biases, partial or scaled rotary); HS_OK otherwise. */
hs_status hs_gguf_mqa_writable(const hs_model *m, hs_error *err);

/* starcoder's attention.head_count_kv (falcon's goes with the rotary keys). */
void hs_gguf_mqa_write(hs_gguf_meta *mt, const hs_model_config *c, const char *arch);

#endif
