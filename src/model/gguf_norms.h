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

/* Qwen3-MoE's expert keys (src/model/gguf_moe.c): read after the rotary keys (experts:
 * <arch>.expert_count as read, 0 when absent; refused in any other family). */
hs_status hs_gguf_moe_read(const hs_gguf *g, const char *a, int experts, hs_model_config *cfg,
                           hs_arch *own, hs_error *err);
/* What llama.cpp's qwen3moe cannot hold (dense layers, weights not renormalised, another
 * family's experts), refused in one line; HS_OK for a model without experts. */
hs_status hs_gguf_moe_writable(const hs_model_config *c, hs_error *err);
/* The expert keys of c (nothing without experts). */
void hs_gguf_moe_write(hs_gguf_meta *mt, const hs_model_config *c, const char *arch);

/* One tensor of a layer's experts: mats matrices (0: one), each written (rows, cols) from
 * the (cols, ld) row-major (in, out) block at src + m stride, transposed. */
typedef struct hs_gguf_moe_tensor {
    const char *pattern; /* the GGUF name with the layer's %d */
    const float *src;
    size_t mats, rows, cols, ld, stride;
    char name[64];       /* pattern formatted */
} hs_gguf_moe_tensor;
/* Layer l's router and experts as GGUF tensors into out; returns how many (0: a dense
 * layer). */
int hs_gguf_moe_tensors(const hs_model_config *c, const hs_layer *L, int l,
                        hs_gguf_moe_tensor out[4]);

#endif
