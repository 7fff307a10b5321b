/*
 * headscope/activations.h — every activation of one run, and what is read from them:
 * direct logit attribution (Elhage et al. 2021) and norm-based attention (Kobayashi et al.
 * 2020). `headscope dump` writes the activations as .npy files under TransformerLens names.
 *
 *     hs_activations *a = NULL;
 *     if (hs_activations_run(model, ids, NULL, n, HS_CAPTURE_Z | HS_CAPTURE_PATTERN, &a,
 *                            &err) == HS_OK) {
 *         const float *z0 = a->z;               // layer 0: (n, n_head * d_head)
 *         hs_activations_free(a);
 *     }
 *
 * docs/metrics.md defines every number, docs/dump.md every file.
 */
#ifndef HEADSCOPE_ACTIVATIONS_H
#define HEADSCOPE_ACTIVATIONS_H

#include <stdint.h>

#include "headscope/model.h"
#include "headscope/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What hs_activations_run keeps (or-ed). */
enum {
    HS_CAPTURE_RESID_PRE = 1, /* the residual stream entering each layer */
    HS_CAPTURE_QKV = 2,       /* queries, keys and values (with their biases) */
    HS_CAPTURE_PATTERN = 4,   /* attention probabilities */
    HS_CAPTURE_Z = 8,         /* each head's P V, before W_O */
    HS_CAPTURE_ATTN_OUT = 16, /* the attention's output, z W_O + b_O */
    HS_CAPTURE_MLP_OUT = 32   /* the MLP's output */
};

typedef struct hs_activations {
    int n_layer, n_head, n, d_model, d_head;
    unsigned what; /* HS_CAPTURE_* kept; an array not kept is NULL */
    int n_kv_head;  /* key/value heads (n_head unless grouped-query attention) */
    int qkv_width;  /* W = A + 2 n_kv_head d_head: a row of qkv, A = n_head d_head (d_model
                       for every family whose heads split d_model) */
    float *resid_pre; /* (n_layer, n, d_model); post-norm models: the input of the layer */
    float *qkv;       /* (n_layer, n, W): columns [Q | K | V], query head h at h*d_head, KV
                         head g at A + g*d_head (K) and A + (n_kv_head + g)*d_head
                         (V); rotary models: Q and K after the rotation */
    float *pattern;   /* (n_layer, n_head, n, n): row = query, column = key */
    float *z;         /* (n_layer, n, A), A = n_head d_head: head h's P V in columns
                         h*d_head.. */
    float *attn_out;  /* (n_layer, n, d_model) as added to the stream (post-norm: before
                         the norm) */
    float *mlp_out;   /* (n_layer, n, d_model) the same for the MLP */
    /* Always: the stream after the last block, before the final norm, and the final norm's
     * 1/sqrt(var + eps) per row (pre-norm models; 1 for a model without a final norm). */
    float *resid_final; /* (n, d_model) */
    float *final_rstd;  /* (n) */
} hs_activations;

/* Runs m on ids (n tokens; type_ids may be NULL) with every head on, keeping what `what`
 * asks for (plus resid_final and final_rstd). Memory: the arrays asked for, about
 * n_layer * n * d_model floats each (pattern: n_layer * n_head * n^2). HS_E_NOMEM when they
 * do not fit, the errors of hs_forward for bad input. Free with hs_activations_free. */
hs_status hs_activations_run(const hs_model *m, const int32_t *ids, const int32_t *type_ids,
                             int n, unsigned what, hs_activations **out, hs_error *err);

/* Frees activations; accepts NULL. */
void hs_activations_free(hs_activations *a);

/* ---- direct logit attribution ----------------------------------------------------------
 * Head l.h's direct contribution at position i to the logit of the token that follows:
 *     dla[l.h][i] = (o - mean(o)) . (w_f * U[t_i]) / s_i,   o = z_{l,h,i} W_O^h  (no bias)
 * with t_i = ids[i + 1], w_f the final LayerNorm's weight, s_i its std at row i in the full
 * run (frozen), U[t] the unembedding row of t (RMSNorm: no centring, s_i the rms). Defined
 * for decoders whose residual stream reaches a plain unembedding through one final norm
 * (pre-norm blocks, no MLM head transform): hs_dla_defined. */
typedef struct hs_dla {
    int n_layer, n_head, n_heads, n_pos; /* n_pos = n - 1 positions 0..n-2 */
    int32_t *targets;   /* (n_pos) ids[i + 1] */
    double *per_pos;    /* (n_heads, n_pos): head l.h at index l*n_head + h */
    double *total;      /* (n_heads) sum over the positions */
    double *token_loss; /* (n_pos) -log softmax(logits_i)[t_i] of the full run (nats) */
    double *logit;      /* (n_pos) the full run's logit of t_i */
} hs_dla;

/* NULL when direct logit attribution is defined for m's architecture, else a static
 * phrase saying why not. */
const char *hs_dla_undefined(const hs_model *m);

/* Direct logit attribution of every head on ids (n >= 2). HS_E_UNSUPPORTED (with
 * hs_dla_undefined's reason) for an architecture it is not defined for. On success *out owns
 * everything; free with hs_dla_free. */
hs_status hs_dla_compute(const hs_model *m, const int32_t *ids, int n, hs_dla **out,
                         hs_error *err);
void hs_dla_free(hs_dla *d);

/* ---- norm-based attention (Kobayashi et al. 2020) ------------------------------------
 * ||alpha_ij f_h(x_j)|| with f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h, the vector head h adds
 * to query i from key j: since alpha_ij >= 0 it is alpha_ij ||f_h(x_j)||.
 * fnorm: (n_layer, n_head, n) the norms ||f_h(x_j)|| from activations holding qkv; the
 * maps are then pattern[l][h][i][j] * fnorm[l][h][j]. HS_E_ARG when a lacks qkv. */
hs_status hs_norm_values(const hs_model *m, const hs_activations *a, float *fnorm,
                         hs_error *err);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_ACTIVATIONS_H */
