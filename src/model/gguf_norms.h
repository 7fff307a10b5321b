/* GGUF keys of the normalised decoders (src/model/gguf_norms.c) for gguf_load.c and
 * gguf_write.c. Private to src/model/. */
#ifndef HEADSCOPE_GGUF_NORMS_H
#define HEADSCOPE_GGUF_NORMS_H

#include "model/gguf_internal.h"
#include "model/model_internal.h"

/* After the rotary keys of arch a: the window (window: attention.sliding_window as read, 0
 * when absent; on every layer but in Gemma's), Gemma's softcaps, score and embedding scales,
 * local rotary base and pattern, as llama.cpp reads them. */
hs_status hs_gguf_norms_read(const hs_gguf *g, const char *a, int window, hs_model_config *cfg,
                             hs_arch *own, hs_error *err);

/* Gemma's keys but the window (gguf_write.c's) written for c (nothing in another family). */
void hs_gguf_norms_write(hs_gguf_meta *mt, const hs_model_config *c, const char *arch);

/* 1 when a's family is one of the normalised decoders (whose windows and GeGLU the GGUF
 * writer takes). */
int hs_gguf_norms_family(const hs_arch *a);

#endif
