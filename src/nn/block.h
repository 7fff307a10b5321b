/* The transformer block and the pieces around it (embeddings, final norm), read from the
 * model's architecture descriptor; used by the forward pass (forward.c, and through it the
 * batched ablation passes) and by the backward pass (src/importance/gradient.c). Private to
 * the library. */
#ifndef HEADSCOPE_BLOCK_H
#define HEADSCOPE_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "headscope/forward.h"
#include "model/model_internal.h"

/* Rows of the MLP's hidden layer a pass holds at a time: after the maps its activations,
 * (rows, d_ff), are a pass's largest buffer, and GEMMs of this many rows run at full speed. */
#define HS_MLP_ROWS 256

struct hs_forward_ws {
    int max_n, max_batch, n_head;
    /* rows = batch * n: the copies' streams stacked, copy b in rows b*n.. */
    float *x;     /* (rows, d) residual stream */
    float *h;     /* (rows, max(d, A)) normalised input / scratch, A = hs_model_attn_width */
    float *qkv;   /* (rows, W), W = hs_qkv_width (at least 3d: the LM head's scratch) */
    float *probs; /* (n_head, n, n): one copy's, reused copy after copy; allocated by the
                     first pass that records maps (a pass without observer needs none) */
    size_t probs_floats; /* its size: n_head * max_n * max_n */
    float *ctx;   /* (rows, max(d, A)): the contexts, (rows, A) */
    float *ff;    /* (HS_MLP_ROWS, d_ff) or fewer rows; gated MLP: 3 d_ff a row, [gate | up]
                     then the product */
    /* 1 while every copy's stream is the same (the first layer of a batched pass, set by
     * hs_forward): the block then computes the copies' common Q, K, V and probabilities
     * once, and only what the head masks change (context onwards) per copy */
    int same_input;
    /* In-pass observers for the library's own analyses, set by whoever passes this
     * workspace to hs_forward (NULL: none; a batch of 1 and no keep only). on_ctx gets layer
     * l's context (n, A): every head's P V under the head mask, before W_O, head h in
     * columns h*d_head..; it runs after on_attn, and non-zero stops the pass. final_rstd (n)
     * receives the final norm's 1/s of every row (pre-norm models). */
    int (*on_ctx)(void *user, int layer, const float *ctx, int n);
    void *ctx_user;
    float *final_rstd;
    /* The rows of each copy whose final states are wanted, ascending, set by the loss
     * evaluator (NULL: every row). The last layer then runs its output projection, MLP and
     * norms on those rows only (nothing later reads the others) and leaves the stream
     * compacted: copy b's wanted rows at b * n_out_rows.. of x, the final norm and
     * hs_forward_opts.hidden likewise. Not with logits, a kept layer or final_rstd. */
    const int32_t *out_rows;
    int n_out_rows;
    /* 1: the last layer stops after its attention (on_attn and on_ctx have run) and the
     * stream is left there. Set by hs_forward on the workspace of its own for a pass whose
     * caller gave none and wants neither logits nor hidden states: nothing else can read
     * what follows (the output projection and MLP: 6% of GPT-2's FLOPs at n = 128). */
    int stop_after_attn;
    /* A restart at the contexts, set by the caller beside hs_forward_opts.start_layer and
     * x_start: ctx_start: (n, A) that layer's contexts as a pass under its head mask left
     * them (its z). The layer then takes every copy's contexts from there and begins at
     * its output projection: no Q, K, V, attention, head mask or replacement in it (the
     * sites q, k, v and pattern are not reached; z is, as usual). NULL: none. ctx_in is
     * hs_forward's: ctx_start at the start layer, NULL at the others. */
    const float *ctx_start, *ctx_in;
    /* Latent attention (hs_arch.mla_kv_lora): (n_layer, n_head) receiving each head's share
     * of its logits from the rotary part (hs_mla_attn's pos_share) in a pass of one copy
     * without keep; NULL: not computed. */
    double *mla_pos_share;
    /* A mixture of experts: (n_layer, n, top_k) receiving the experts each token's router
     * chooses in each such layer (hs_moe_forward's route), in a pass of one copy without
     * keep over every row; NULL: not recorded. */
    int32_t *moe_route;
    /* An encoder-decoder's pass (hs_forward_encdec, encdec.c; NULL otherwise): the running
     * stack's relative position bias (rel_buckets, n_head) and the bucket of each offset,
     * rel_bucket[j - i + n - 1] for key j seen from query i; the encoder's final output
     * enc: (n_enc, d) that the decoder's cross-attention reads */
    const float *rel;
    const int32_t *rel_bucket;
    const float *enc;
    int n_enc;
    /* A packed pass (hs_forward_packed, forward_packed.c; 0 otherwise): n_seg texts
     * stacked as the rows of one copy, text t's seg_len[t] rows after the texts before it;
     * each text's attention runs over its own rows from position 0 (a block-diagonal mask),
     * everything else over all rows at once */
    const int *seg_len;
    int n_seg;
};

/* The activations of one layer that the backward pass needs, written by the block when
 * asked (a batch of 1). Norm statistics: xhat = (x - mean) * rstd (RMSNorm: x * rstd). */
typedef struct hs_block_keep {
    float *xhat1, *rstd1; /* (n, d), (n): the first norm (pre: before attention; post: after) */
    float *qkv;           /* (n, W): after the rotary turn of Q and K */
    float *probs;         /* (H, n, n): softmax before the head mask, the keys a query does
                             not see (hs_model_layer_visibility) 0 */
    float *ctx;           /* (n, A): P V of every head, before the head mask */
    float *xhat2, *rstd2; /* (n, d), (n): the second norm (pre: before the MLP; post: after) */
    float *ff;            /* (n, F), F = hs_ff_width: MLP pre-activation ([gate | up]) */
    /* optional (NULL: not kept): the attention's output ctx W_O + b_O and the MLP's, (n, d)
     * each, as added to the residual stream (post-norm: before the norm) */
    float *attn_out, *mlp_out;
    /* the normalised decoders' (NULL where the descriptor has none): the query/key norm's
     * normalised input (n, A + n_kv d_head) and 1/rms (n, its norms a row: H + n_kv per head,
     * 2 full width); the post-attention and post-MLP norms' (n, d) and (n) */
    float *qk_xhat, *qk_rstd;
    float *xhat_pa, *rstd_pa, *xhat_pm, *rstd_pm;
} hs_block_keep;

/* The query/key norm on rows of qkv: (rows, W) in place, before rotary (hs_arch.qk_norm);
 * xhat: (rows, A + n_kv d_head) and rstd: (rows, hs_qk_norms(c)) kept when not NULL. */
void hs_qk_normalise(const hs_model_config *c, const hs_layer *L, float *qkv, int rows,
                     float *xhat, float *rstd);

/* Norms a row of the query/key norm has: n_head + n_kv_head per head, 2 full width, 0. */
int hs_qk_norms(const hs_model_config *c);

/* The table of hook sites, one row a site in hs_site order (src/nn/hooks.c; hs_site_get is
 * its public face). */
extern const hs_site_info hs_sites[HS_SITE_COUNT];

/* Calls o->hook at site s of layer l once per copy b of a batch: rows x cols values at
 * x + b * stride, row stride ld; n the pass's tokens. HS_E_ARG when the hook stops. */
hs_status hs_hook_copies(const hs_model_config *c, const hs_forward_opts *o, hs_site s, int l,
                         float *x, int batch, size_t stride, int rows, int cols, int ld, int n,
                         hs_error *err);

/* hs_hook_copies at a (rows, d_model) site s of each copy (cn rows a copy at x), when hk,
 * the sites hooked, has it. */
hs_status hs_hook_stream(const hs_model_config *c, const hs_forward_opts *o, unsigned hk,
                         hs_site s, int l, float *x, int batch, size_t cn, int n, hs_error *err);

/* The q, k and v sites hooked in hk, of copy b's rows of qkv: (n, W), after the rotary
 * turn. HS_E_ARG when the hook stops. */
hs_status hs_hook_qkv(const hs_model_config *c, const hs_forward_opts *o, unsigned hk, int l,
                      float *qkv, int b, int n, hs_error *err);

/* The head mask and ablation by replacement (hs_forward_opts.head_mask, head_replace) as a
 * hook at z, hs_head_mask_hook with an hs_head_mask as its user: copy b's context of each
 * head h whose mask xi_h = hm[b * hm_stride + h] is not 1 becomes xi_h ctx_h (when scale:
 * the copies share P V, or the backward keeps it apart, so the mask has not scaled it;
 * otherwise the attention applied it, (xi P) V) plus (1 - xi_h) r_h (replace: (n, A), the
 * layer's replacement contexts, or NULL). */
typedef struct hs_head_mask {
    const float *hm;
    size_t hm_stride;
    const float *replace;
    int scale;
} hs_head_mask;
int hs_head_mask_hook(void *user, const hs_hook_call *k);

/* The checks of hs_forward's input: weights present, 1 <= n <= n_ctx, ids in the
 * vocabulary, token types in range. */
hs_status hs_forward_check(const hs_model *m, const int32_t *ids, const int32_t *type_ids,
                           int n, hs_error *err);

/* Embeddings of ids: (n) (token types type_ids, NULL = all 0, when the family has them)
 * → x: (n, d), with the embedding norm of the families that have one. */
void hs_embed(const hs_model *m, const int32_t *ids, const int32_t *type_ids, int n, float *x);

/* One transformer block, layer l, on the stacked streams ws->x: (batch * n, d) in place.
 * Copy b (rows b*n..) runs under the head mask hm + b * hm_stride: (n_head), NULL = all
 * ones. Projections and the MLP are single GEMMs over all copies; attention runs copy by
 * copy. keep (batch 1 only, NULL = nothing kept) receives what the backward needs. Fails
 * when the observer (o->on_attn, batch 1 only) stops the pass or, unless
 * o->allow_nonfinite, when attention is not finite. o may be NULL. */
hs_status hs_block_forward(const hs_model *m, int l, hs_forward_ws *ws, int n, int batch,
                           const float *hm, size_t hm_stride, const hs_forward_opts *o,
                           hs_block_keep *keep, hs_error *err);

/* The final norm of a pre-norm model on x: (rows, d) into y (may alias x), keeping xhat and
 * rstd when not NULL; y = x (copied unless aliased) for a model without one. */
void hs_final_norm(const hs_model *m, const float *x, float *y, float *xhat, float *rstd,
                   int rows);

/* The LM head's row-wise transform before the decoder (HS_HEAD_MLM: dense, activation,
 * norm) on x: (rows, d) → y: (rows, d); pre: (rows, d) receives the dense output before
 * the activation, xhat/rstd the norm's statistics, when not NULL. Returns x itself (and
 * writes nothing) for a head without a transform. */
const float *hs_head_transform(const hs_model *m, const float *x, float *y, float *pre,
                               float *xhat, float *rstd, int rows);

/* logits: (rows, V) = the decoder (and its bias) on the transformed rows h: (rows, d). */
void hs_head_decode(const hs_model *m, const float *h, int rows, float *logits);

/* logits: (rows, k) = hs_head_decode's logits of the tokens ids[0..k) only, each a dot
 * product in double (the last bits may differ from the full decoder's). */
void hs_head_decode_ids(const hs_model *m, const float *h, int rows, const int32_t *ids, int k,
                        float *logits);

/* T5's relative position bucket of a key rel = j - i positions from its query: bidirectional
 * (the encoder) half the buckets for later keys; unidirectional (the decoder) only earlier
 * keys counted; exact below half the buckets, logarithmic up to max_distance, beyond it the
 * last bucket (transformers' _relative_position_bucket, its logarithm in float). */
int hs_t5_bucket(int rel, int bidirectional, int num_buckets, int max_distance);

/* Attention of every head for nq queries over nk keys: q: (nq, ldq), k and v: (nk, ldkv),
 * head h in columns h*d_head.. of each → probs: (n_head, nq, nk) (NULL: not kept) =
 * softmax(scale Q_h K_h^T + bias) over the keys vis lets row i see (exactly 0 elsewhere),
 * scale 1 when the descriptor says attn_unscaled, bias rel[bucket[j - i + nq - 1]][h] when
 * rel is not NULL (square: nq = nk); ctx: (nq, A) = hm_h P_h V_h (hm NULL: all ones).
 * *bad_row: the first head * nq + query row not finite, or (size_t)-1. HS_E_NOMEM when
 * out of memory for a head's scores. */
hs_status hs_encdec_attn(const hs_model_config *c, const float *q, int ldq, const float *k,
                         const float *v, int ldkv, int nq, int nk, hs_visibility vis,
                         const float *rel, const int32_t *bucket, const float *hm, float *probs,
                         float *ctx, size_t *bad_row);

/* Fails when the model is not an encoder-decoder or the options ask hs_forward_encdec for
 * what it does not do (a batch, a restart, stored streams, final rows). */
hs_status hs_forward_encdec_check(const hs_model *m, const hs_forward_opts *o,
                                  const hs_forward_ws *ws, hs_error *err);

#endif
