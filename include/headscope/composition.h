/*
 * headscope/composition.h — how heads compose, read from the weights (Elhage et al. 2021,
 * "A Mathematical Framework for Transformer Circuits").
 *
 *     hs_composition *c = NULL;
 *     if (hs_composition_compute(model, &c, &err) == HS_OK) {
 *         int a = 2 * c->n_head + 3, b = 3 * c->n_head + 0;     // heads 2.3 and 3.0
 *         printf("K-composition 2.3 -> 3.0: %.3f\n", c->k[a * c->n_heads + b]);
 *         hs_composition_free(c);
 *     }
 *
 * Row-vector convention (x W): for head h, W_OV = W_V^h W_O^h and W_QK = W_Q^h W_K^h^T,
 * both (d_model, d_model). Each reading weight has the LayerNorm scale in front of it folded
 * in (ln_1's into W_Q, W_K, W_V; ln_f's into the unembedding), so the matrices act on the
 * normalised residual stream as the model reads it; biases and the normalisation itself
 * are left out. docs/metrics.md § Composition defines every number.
 */
#ifndef HEADSCOPE_COMPOSITION_H
#define HEADSCOPE_COMPOSITION_H

#include "headscope/model.h"
#include "headscope/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hs_composition {
    int n_layer, n_head, n_heads; /* n_heads = n_layer * n_head; head l.h is index l*n_head+h */
    /* (n_heads, n_heads): entry [a * n_heads + b] for an earlier head a and a later head b
     * (layer(a) < layer(b)), NaN elsewhere:
     *   q: ||W_OV^a W_QK^b||_F   / (||W_OV^a||_F ||W_QK^b||_F)   a writes b's queries
     *   k: ||W_OV^a W_QK^b^T||_F / (||W_OV^a||_F ||W_QK^b||_F)   a writes b's keys
     *   v: ||W_OV^a W_OV^b||_F   / (||W_OV^a||_F ||W_OV^b||_F)   a writes b's values */
    double *q, *k, *v;
    /* (n_heads) OV copying score: sum(lambda) / sum(|lambda|) over the eigenvalues of the
     * full OV circuit W_E W_OV W_U (computed as those of the d_head-square matrix
     * W_O (W_U W_E) W_V); +1 = the head copies the tokens it attends to into the logits */
    double *copying;
    double *ov_norm, *qk_norm; /* (n_heads) ||W_OV||_F and ||W_QK||_F */
} hs_composition;

/* Composition scores and OV copying scores of every head of m, from its weights. Pre-norm
 * decoders (GPT-2, GPT-NeoX, Llama, Qwen2; grouped-query heads read their KV head's W_K and
 * W_V; rotary positions are left out of W_Q W_K^T, docs/metrics.md): HS_E_UNSUPPORTED for
 * the encoders (post-norm: the residual stream is renormalised after every sublayer, so a
 * head's output reaches later heads only through data-dependent rescaling) and for a model
 * opened without weights. On success *out owns every array (one
 * allocation); free with hs_composition_free. */
hs_status hs_composition_compute(const hs_model *m, hs_composition **out, hs_error *err);

/* The strongest compositions of one kind (0 q, 1 k, 2 v): fills from and to (each max,
 * caller-owned) with the head indices of the up to max largest entries, descending (ties:
 * the earlier pair in row-major order first), and returns how many. */
int hs_composition_strongest(const hs_composition *c, int kind, int *from, int *to, int max);

/* How many of the strongest compositions of each kind the report lists. */
#define HS_COMPOSITION_TOP 10

/* Frees a composition; accepts NULL. */
void hs_composition_free(hs_composition *c);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_COMPOSITION_H */
