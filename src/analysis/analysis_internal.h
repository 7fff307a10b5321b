/*
 * src/analysis/analysis_internal.h — what the analysis layer (src/analysis/) offers the
 * layers above it (the pipeline, the report writers) beyond include/headscope/analysis.h;
 * private to the library.
 */
#ifndef HEADSCOPE_ANALYSIS_INTERNAL_H
#define HEADSCOPE_ANALYSIS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "headscope/status.h"

/* "L.H" of a head index l*H + h (n_head = H) into buf (at least 16 bytes); returns buf.
 * The name reports and pictures give a head (src/analysis/maps.c). */
const char *hs_head_label(int index, int n_head, char *buf, size_t cap);

/* Holm's (1979) step-down adjustment of the p-values p: (n) for testing them together
 * (src/analysis/kvgroups.c): over the m finite entries sorted ascending, p_(i) becomes
 * min(1, max_{j <= i} (m - j + 1) p_(j)); a NaN entry (no test) stays NaN and does not count
 * in m. out: (n), not p; order: (n) scratch. */
void hs_holm_adjust(const double *p, int n, int *order, double *out);

/* Norm-based attention's value norms of layer l (Kobayashi et al. 2020): fnorm[h*n + j] =
 * ||(x_j W_V^h + b_V^h) W_O^h|| from qkv: (n, ld), the layer's queries, keys and values as
 * the block lays them out (values after the keys; grouped-query heads read their KV head's).
 * hs_norm_values runs it on every layer of captured activations; the analysis on the
 * forward pass's own qkv, layer by layer. */
struct hs_model;
hs_status hs_norm_values_layer(const struct hs_model *m, int l, const float *qkv, int ld, int n,
                               float *fnorm, hs_error *err);

/* Direct logit attribution taken in a forward pass, layer by layer
 * (src/analysis/attribution.c): hs_dla_begin for the pass's ids (the checks and errors of
 * hs_dla_compute); hs_dla_attach sets the pass's workspace to hand each layer's context to
 * it (hs_dla_layer) and to keep the final norm's 1/s in final_rstd (n floats); after the
 * pass, hs_dla_end fills *out from them and the final normalised stream the pass left in
 * the workspace, and frees acc. hs_dla_acc_status: HS_OK, or the failure a layer stopped
 * the pass with (its message in the err given to attach, the pass's own being "stopped by
 * observer"). hs_dla_acc_free frees an unfinished one. */
typedef struct hs_dla_acc hs_dla_acc;
struct hs_dla;
struct hs_forward_ws;
hs_status hs_dla_begin(const struct hs_model *m, const int32_t *ids, int n, hs_dla_acc **out,
                       hs_error *err);
void hs_dla_attach(hs_dla_acc *acc, struct hs_forward_ws *ws, float *final_rstd, hs_error *err);
int hs_dla_layer(void *acc, int layer, const float *ctx, int n);
hs_status hs_dla_end(hs_dla_acc *acc, struct hs_dla **out, hs_error *err);
hs_status hs_dla_acc_status(const hs_dla_acc *acc);
void hs_dla_acc_free(hs_dla_acc *acc);


struct hs_model_config;
/* 1 when the weights' composition scores (src/analysis/composition.c) are defined for a
 * model of this descriptor: pre-norm blocks (LayerNorm or RMSNorm, sequential or parallel)
 * and a plain decoder (GPT-2, GPT-NeoX, Llama, Qwen2), whose norms' scales fold into the
 * weights. */
int hs_composition_defined(const struct hs_model_config *c);

/* Why composition is undefined for a pre-norm decoder whose block normalises queries and
 * keys or the sublayers' outputs (Qwen3, OLMo-2, Gemma 2 and 3), or NULL. A static phrase. */
const char *hs_composition_norms_undefined(const struct hs_model_config *c);

/* hs_composition_compute reporting its steps to progress (may be NULL) as "composition":
 * each layer's Gram matrices, each pair of layers, the copying scores. */
struct hs_model;
struct hs_composition;
hs_status hs_composition_run(const struct hs_model *m,
                             void (*progress)(void *user, const char *what, int done, int total),
                             void *user, struct hs_composition **out, hs_error *err);

/* g: (d, d) = W_U W_E, the decoder's transpose times the token embeddings over the
 * vocabulary, summed in blocks of chunk rows (composition.c says how); HS_E_NOMEM
 * without memory. The copying scores' token circuit before the final norm's scale. */
hs_status hs_composition_gram(const struct hs_model *m, int chunk, double *g, hs_error *err);

#endif /* HEADSCOPE_ANALYSIS_INTERNAL_H */
