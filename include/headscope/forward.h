/*
 * headscope/forward.h — the instrumented forward pass.
 *
 * One transformer block serves both families. For every layer the pass hands the
 * attention probabilities of all heads to an observer callback, before any head mask
 * is applied, so the same code feeds a full trace recorder or streaming statistics.
 *
 *     hs_forward_opts o = {0};
 *     o.on_attn = my_observer;  o.user = &state;      // probs: (n_head, n, n)
 *     o.logits = NULL;                                // or a (n, vocab) buffer
 *     hs_forward(model, ids, NULL, n, &o, NULL, &err);   // NULL: scratch per call
 *
 * Head mask semantics follow Hugging Face transformers 4.x:
 *     probs = softmax(Q K^T / sqrt(d_head) + the layer's visibility mask)
 *     probs *= head_mask[l][h]          (no renormalisation)
 *     context = probs V;  W_O and its bias applied as usual.
 */
#ifndef HEADSCOPE_FORWARD_H
#define HEADSCOPE_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "headscope/hooks.h"
#include "headscope/model.h"
#include "headscope/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Called once per layer with probs: (n_head, n, n), row = query, col = key, rows sum to
 * 1 over the keys the query may see (hs_model_layer_visibility: causal keys 0..i, a sliding
 * window the last W of them) and are exactly 0 elsewhere. The buffer is only valid during
 * the call. Return 0 to continue, non-zero to stop the pass (hs_forward then returns
 * HS_E_ARG with "stopped by observer"). */
typedef int (*hs_attn_observer)(void *user, int layer, const float *probs, int n_head, int n);

typedef struct hs_forward_opts {
    const float *head_mask;   /* (n_layer, n_head) or NULL for all ones */
    hs_attn_observer on_attn; /* may be NULL */
    void *user;               /* passed to on_attn */
    float *logits;            /* (n, vocab) output or NULL; needs has_lm_head */
    /* With logit_rows: logits is (n_logit_rows, vocab), row r for token logit_rows[r]
     * (each in 0..n-1), and no other row's logits are computed (a loss that needs a few
     * positions, as MLM, skips most of the decoder GEMM). */
    const int32_t *logit_rows;
    int n_logit_rows;
    float *hidden;            /* (n, d_model) final hidden states or NULL (GPT-2: after ln_f) */
    /* Partial runs: start at layer start_layer (0 = from the embeddings) from x_start:
     * (n, d_model), the residual stream entering that layer as captured by x_layers of an
     * earlier run with the same ids and the same head mask below start_layer. */
    int start_layer;
    const float *x_start;
    float *x_layers;          /* (n_layer, n, d_model) output: stream entering each layer run,
                                 or NULL */
    /* Batched runs (ablation sweeps): batch >= 2 runs that many copies of the same tokens in
     * one pass, copy b under its own head mask, head_mask then being (batch, n_layer, n_head)
     * (NULL = all ones for every copy). The copies' streams are stacked as (batch * n,
     * d_model), so each projection, the MLP and the LM head are one GEMM over all copies;
     * attention runs copy by copy. Every copy starts from the same stream (x_start, or the
     * embeddings); the outputs grow by the batch, copy b's part at offset b: logits
     * (batch * rows, vocab), hidden (batch * n, d_model), x_layers (n_layer, batch * n,
     * d_model). on_attn must be NULL. 0 or 1: one copy. At most HS_FORWARD_MAX_BATCH. */
    int batch;
    /* A layer whose attention probabilities hold a NaN or an infinity (scores that overflow
     * float32) fails the pass with HS_E_VALUE naming the layer, head and query, unless
     * allow_nonfinite is set (they are then passed on as they are). */
    int allow_nonfinite;
    /* Ablation by replacement (mean and resample ablation): (n_layer, n, A), A =
     * hs_model_attn_width (n_head d_head: d_model for every family whose heads split it),
     * layer l's rows holding a replacement context per head in head h's columns h*d_head..; NULL =
     * none. A head under mask xi then has context xi P V + (1 - xi) r (xi = 0: r instead of
     * its own output; zero ablation is r = 0). The same rows serve every copy of a batch. */
    const float *head_replace;
    /* Hook sites (headscope/hooks.h): hook is called at every site whose HS_SITE_BIT is in
     * hook_sites, every layer and every copy, and may read, replace or add to the values
     * there. Not with a kept layer (the backward pass's). A hook at resid_pre, q, k, v or
     * pattern makes a batched pass compute the first layer's attention copy by copy; a
     * hook at pattern runs it unfused (hs_op_attn_probs, the hook, then the contexts; an
     * observer then sees the maps the hook left, scaled by the head mask). Reading a site
     * changes no bit of the pass, save result and, in a parallel-residual block, mlp_out
     * (summed apart: the last bits may differ). */
    hs_hook_fn hook;
    void *hook_user;
    unsigned hook_sites;
    /* Encoder-decoder passes (hs_forward_encdec) only, NULL otherwise: */
    /* each decoder layer's cross-attention probabilities, (n_head, n_dec, n_enc), before the
     * head mask, layer the block's index (n_enc_layer + j for decoder layer j); return
     * non-zero to stop the pass */
    int (*on_cross)(void *user, int layer, const float *probs, int n_head, int n_dec,
                    int n_enc);
    /* (n_layer, n_head): the cross-attention heads' mask (rows of decoder layers read), as
     * head_mask is the self-attention heads' of both stacks; NULL = all ones */
    const float *cross_head_mask;
    float *enc_hidden;        /* (n_enc, d_model): the encoder's output after its final norm */
} hs_forward_opts;

#define HS_FORWARD_MAX_BATCH 4096

/* Reusable scratch memory for repeated passes (ablation sweeps); optional. */
typedef struct hs_forward_ws hs_forward_ws;

/* Allocates scratch for sequences up to max_n tokens. Free with hs_forward_ws_free. */
hs_status hs_forward_ws_new(const hs_model *m, int max_n, hs_forward_ws **out, hs_error *err);

/* As hs_forward_ws_new, for batched runs of up to max_batch copies (1..HS_FORWARD_MAX_BATCH):
 * about 6 d_model floats for each of the max_batch * max_n rows, d_ff for up to 256 of
 * them (the MLP runs 256 rows at a time) and n_head * max_n^2. */
hs_status hs_forward_ws_new_batch(const hs_model *m, int max_n, int max_batch,
                                  hs_forward_ws **out, hs_error *err);
void hs_forward_ws_free(hs_forward_ws *ws);

/* Runs the model on ids (n tokens, 1 <= n <= n_ctx); type_ids may be NULL (all 0).
 * ws may be NULL, or too small for n and the batch (scratch then allocated per call).
 * Validates ids against the vocabulary. With no ws, no logits and no hidden, the maps
 * (on_attn) are all the pass can give, and it stops after the last layer's attention. */
hs_status hs_forward(const hs_model *m, const int32_t *ids, const int32_t *type_ids, int n,
                     const hs_forward_opts *opts, hs_forward_ws *ws, hs_error *err);

/* Runs an encoder-decoder (T5: hs_model_config.n_enc_layer > 0) with teacher forcing: the
 * encoder on enc_ids (n_enc tokens), then the decoder on dec_ids (n_dec tokens; usually
 * decoder_start_id followed by the target ids but the last), its cross-attention reading
 * the encoder's final output. In o: on_attn gets each self-attention layer, (n_head, n_enc,
 * n_enc) for the encoder's layers 0..n_enc_layer-1 and (n_head, n_dec, n_dec) for the
 * decoder's; on_cross each decoder layer's cross-attention; head_mask (n_layer, n_head) and
 * cross_head_mask; logits (n_dec or n_logit_rows, vocab) and hidden (n_dec, d_model) of the
 * decoder, enc_hidden of the encoder. One copy only: batch, start_layer, x_start, x_layers,
 * head_replace and hooks are refused (HS_E_UNSUPPORTED), as is a workspace with final rows. */
hs_status hs_forward_encdec(const hs_model *m, const int32_t *enc_ids, int n_enc,
                            const int32_t *dec_ids, int n_dec, const hs_forward_opts *opts,
                            hs_forward_ws *ws, hs_error *err);

/* Packed passes: several texts in one pass (corpus throughput). Their tokens are stacked
 * as the rows of one sequence, so every projection, the MLP and the LM head are one GEMM
 * over all of them, and each text's attention runs over its own keys only (a
 * block-diagonal mask, causal within the text for decoders), its positions from 0 (learned,
 * rotary, ALiBi and every window as the family does). Each text's maps, logits and hidden
 * states are those of a pass on that text alone, save the last bits of the GEMMs (cut by
 * another shape: within 1e-5, docs/corpus.md). on_attn is called for every layer and, in
 * it, for every text in order, with that text's probs: (n_head, n, n), n its length. */
typedef int (*hs_packed_observer)(void *user, int layer, int text, const float *probs,
                                  int n_head, int n);

typedef struct hs_packed_opts {
    hs_packed_observer on_attn; /* may be NULL; non-zero stops the pass (HS_E_ARG) */
    void *user;                 /* passed to on_attn */
    float *logits;              /* (total, vocab) or NULL: text t's rows after those before */
    float *hidden;              /* (total, d_model) or NULL: the final hidden states */
    int allow_nonfinite;        /* as in hs_forward_opts */
} hs_packed_opts;

/* Runs n_texts texts (1..HS_FORWARD_MAX_BATCH) in one pass: ids (and type_ids, NULL = all
 * 0) hold their tokens one text after the other, text t lens[t] of them (each 1..n_ctx;
 * the total is not bounded by the context). ws may be NULL (scratch per call): a workspace
 * of hs_forward_ws_new_batch(m, longest text, ceil(total / longest)) or larger is reused. An
 * encoder-decoder (T5) is refused by name (HS_E_UNSUPPORTED). */
hs_status hs_forward_packed(const hs_model *m, const int32_t *ids, const int32_t *type_ids,
                            const int *lens, int n_texts, const hs_packed_opts *opts,
                            hs_forward_ws *ws, hs_error *err);

/* A recorder observer: collects every layer's probs into one (n_layer, n_head, n, n)
 * array. Create with hs_trace_new, pass hs_trace_observe and the trace as user. The pass
 * recognises it and writes each layer's probabilities into the trace directly (no copy, and
 * no (n_head, n, n) buffer in the workspace), except a layer whose head mask has an entry
 * below 1, which is copied. */
typedef struct hs_trace {
    int n_layer, n_head, n;
    float *attn; /* (n_layer, n_head, n, n) */
} hs_trace;

/* Allocates a trace for n tokens. Free with hs_trace_free. */
hs_status hs_trace_new(const hs_model *m, int n, hs_trace **out, hs_error *err);
void hs_trace_free(hs_trace *t);
int hs_trace_observe(void *trace, int layer, const float *probs, int n_head, int n);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_FORWARD_H */
