/*
 * headscope/importance.h — head importance by ablation, and the greedy pruning curve.
 *
 * A loss evaluator re-runs the forward pass under any head mask:
 *
 *     hs_loss_input in = {.ids = ids, .n = n, .kind = HS_LOSS_LM};
 *     hs_loss_eval *ev;  hs_loss_eval_new(model, &in, &ev, &err);
 *     double base;       hs_loss_eval_run(ev, NULL, &base, &err);         // all heads
 *     double *delta = malloc(L * H * sizeof *delta);
 *     hs_ablation_sweep(ev, base, NULL, delta, NULL, NULL, &err);   // loss(head off) - base
 *     hs_loss_eval_free(ev);
 *
 * Losses (see docs/metrics.md):
 *   HS_LOSS_LM   mean next-token negative log-likelihood over the text (nats), or over the
 *                rows of a loss span (hs_loss_span_rows into .positions);
 *   HS_LOSS_MLM  mean NLL of the original tokens at masked positions (nats);
 *   HS_LOSS_REPR 1 − mean cosine similarity of the final hidden states to those of the
 *                unablated run (BERT without an MLM head); 0 with all heads.
 */
#ifndef HEADSCOPE_IMPORTANCE_H
#define HEADSCOPE_IMPORTANCE_H

#include <stddef.h>
#include <stdint.h>

#include "headscope/model.h"
#include "headscope/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hs_loss_kind { HS_LOSS_LM = 1, HS_LOSS_MLM = 2, HS_LOSS_REPR = 3 } hs_loss_kind;

/* Name used in reports: "lm", "mlm", "repr". */
const char *hs_loss_kind_name(hs_loss_kind k);

typedef struct hs_loss_input {
    const int32_t *ids;       /* (n) model input; MLM: with the mask id at positions */
    const int32_t *type_ids;  /* (n) or NULL */
    int n;
    hs_loss_kind kind;
    /* The loss rows. MLM: (n_pos) masked positions, required. LM: (n_pos) positions i whose
     * prediction of ids[i + 1] counts, increasing, within 0..n-2 (hs_loss_span_rows); NULL =
     * all n - 1. */
    const int32_t *positions;
    const int32_t *targets;   /* MLM: (n_pos) original ids at those positions; LM: unused */
    int n_pos;
    int no_cache;             /* 1: keep no cache of the residual stream entering each layer
                                 (n_layer * n * d_model floats) for an evaluator run once or
                                 twice; every run is then a full pass */
    /* Mean and resample ablation: (n_layer, n, A) replacement contexts, A =
     * hs_model_attn_width (d_model for every family whose heads split it) (from
     * hs_ablation_replacement), a masked head's output becoming its replacement's; NULL =
     * zero ablation. The evaluator copies it; the gradient differentiates through it. */
    const float *replace;
} hs_loss_input;

/* Which positions' next-token losses count (docs/metrics.md § Head importance): row i scores
 * the prediction of token i + 1 from tokens 0..i. */
typedef enum hs_loss_span_kind {
    HS_SPAN_ALL = 0,      /* every row 0..n-2 */
    HS_SPAN_REPEATED = 1, /* rows whose token ids[i] occurred earlier (ids[j] = ids[i], j < i):
                             where an induction head can act */
    HS_SPAN_RANGE = 2     /* rows begin..end-1, clipped to 0..n-2 */
} hs_loss_span_kind;

typedef struct hs_loss_span {
    hs_loss_span_kind kind;
    int begin, end; /* HS_SPAN_RANGE: end -1 = through the last row */
} hs_loss_span;

/* Parses "all", "repeated", "A:B" or "A:" (0 <= A < B) into *out. HS_E_ARG with a message
 * naming the bad part. */
hs_status hs_loss_span_parse(const char *s, hs_loss_span *out, hs_error *err);

/* The span as text ("all", "repeated", "3:17", "3:") into buf; returns buf. */
const char *hs_loss_span_format(const hs_loss_span *s, char *buf, size_t cap);

/* The rows of ids: (n) the span keeps, increasing, into rows: (n - 1), caller-owned; returns
 * their count (0 when none, e.g. "repeated" on a text without a repeated token). */
int hs_loss_span_rows(const hs_loss_span *s, const int32_t *ids, int n, int32_t *rows);

/* How an ablated head's output is replaced (docs/metrics.md § Ablation). */
typedef enum hs_ablation_kind {
    HS_ABLATION_ZERO = 0,    /* by zero: the head mask (Michel et al. 2019) */
    HS_ABLATION_MEAN = 1,    /* by its mean over the text's positions */
    HS_ABLATION_RESAMPLE = 2 /* by its output at the same position on another input */
} hs_ablation_kind;

/* "zero", "mean", "resample"; "?" out of range. Static. */
const char *hs_ablation_kind_name(hs_ablation_kind k);

/* The kind named s ("zero", "mean", "resample"), or -1. */
int hs_ablation_kind_parse(const char *s);

/* The other input of resample ablation: ids with the positions not marked fixed (n, 1 =
 * stays, e.g. [CLS], [SEP], [MASK]; NULL = none) shuffled by a Fisher-Yates permutation drawn
 * from splitmix64 seeded with seed, into out: (n). */
void hs_resample_ids(const int32_t *ids, const unsigned char *fixed, int n, uint64_t seed,
                     int32_t *out);

/* The replacement contexts of kind (MEAN or RESAMPLE) from one run of m on ids (n tokens,
 * type_ids may be NULL): every head's P V, z: (n, A) per layer, then MEAN: each
 * row the mean of z's rows (over all n positions); RESAMPLE: z itself, ids being the
 * other input (hs_resample_ids). replace: (n_layer, n, A), caller-owned, A =
 * hs_model_attn_width. */
hs_status hs_ablation_replacement(const hs_model *m, hs_ablation_kind kind, const int32_t *ids,
                                  const int32_t *type_ids, int n, float *replace,
                                  hs_error *err);

/* Adds to sum: (n_layer, A) every head's context z = P V summed over the n positions of
 * one run of m on ids (type_ids may be NULL): the numerator of mean ablation's means, over
 * one text or, summed text by text, over a corpus. */
hs_status hs_ablation_z_sum(const hs_model *m, const int32_t *ids, const int32_t *type_ids,
                            int n, double *sum, hs_error *err);

/* replace: (n_layer, n, A) = means: (n_layer, A) at every position. */
void hs_ablation_means_fill(const hs_model_config *c, const float *means, int n, float *replace);

/* Chooses the deterministic MLM positions of a BERT input: among the content positions
 * (every token that is not cls, sep, pad or mask), count = max(1, round(0.15 * content))
 * evenly spaced ones, the k-th at content index floor((k + 0.5) * content / count).
 * Writes at most cap positions into pos; returns the count (0 when there is no content). */
int hs_mlm_positions(const int32_t *ids, int n, int32_t cls_id, int32_t sep_id, int32_t pad_id,
                     int32_t mask_id, int32_t *pos, int cap);

typedef struct hs_loss_eval hs_loss_eval;

/* Prepares an evaluator (copies the input). HS_LOSS_LM needs n >= 2 and an LM head,
 * HS_LOSS_MLM an MLM head and n_pos >= 1. Free with hs_loss_eval_free. Memory: a forward
 * workspace, the final hidden states and, unless the workspace's attention buffer holds
 * them, a block of at most 128 rows of logits, plus the cache unless in->no_cache. */
hs_status hs_loss_eval_new(const hs_model *m, const hs_loss_input *in, hs_loss_eval **out,
                           hs_error *err);
void hs_loss_eval_free(hs_loss_eval *e);

/* The loss under head_mask: (n_layer, n_head), NULL for all ones. */
hs_status hs_loss_eval_run(hs_loss_eval *e, const float *head_mask, double *loss, hs_error *err);

/* Number of losses evaluated so far by this evaluator, each a forward pass (from the first
 * layer whose mask differs from the cached run's); each copy of a batched pass counts. */
long hs_loss_eval_passes(const hs_loss_eval *e);

/* Memory budget of a batched ablation sweep's copies (their final hidden states and
 * their part of the forward workspace), 128 MB by default. */
#define HS_ABLATION_BATCH_BYTES ((size_t)128 << 20)

/* Sets that budget in bytes (0: the default). A budget smaller than one copy's needs runs
 * one copy per pass, as hs_loss_eval_run does. */
void hs_loss_eval_set_batch_memory(hs_loss_eval *e, size_t bytes);

/* Progress: called after each step with done of total. */
typedef void (*hs_progress_fn)(void *user, const char *what, int done, int total);

/* delta[l*H + h] = loss with head l.h masked (all others on) − base, for every head with
 * active[l*H + h] != 0 (active NULL = all heads); NaN for the others.
 * The heads of one layer run as one batched pass (hs_forward_opts.batch), each copy with
 * one head masked, all starting at that layer from the cached all-heads stream (a full
 * all-heads pass first fills the cache unless the last refresh was one); a layer whose
 * copies exceed the memory budget (hs_loss_eval_set_batch_memory) is split into even
 * sub-batches. Batched GEMMs are cut by a different shape, so a delta may differ from
 * hs_loss_eval_run's in the last bits; it does not depend on the thread count. */
hs_status hs_ablation_sweep(hs_loss_eval *e, double base, const unsigned char *active,
                            double *delta, hs_progress_fn progress, void *user, hs_error *err);

/* One removed head of a pruning curve. Heads removed in the same round share the round's
 * loss, measured once the whole round is removed. */
typedef struct hs_prune_step {
    int head;       /* l*H + h of the head removed */
    int heads_left; /* heads still on after the removal */
    double loss;    /* loss with every head removed so far, this round's included, masked */
    int round;      /* 0, 1, ...: the round the head was removed in (greedy: one per round) */
} hs_prune_step;

/* Greedy pruning curve: repeatedly removes the remaining head whose removal raises the loss
 * least, and records the loss. Lazy greedy: each step re-evaluates only the `beam` remaining
 * heads with the smallest last-known increase (delta from the single-head sweep to start);
 * beam >= heads left makes it exact greedy. Stops after the first removal whose loss exceeds
 * base + stop_increase, when one candidate is left, or after max_steps. Only heads with
 * active != 0 are candidates (NULL = all). steps must hold L*H entries; *n_steps gets
 * the count. */
hs_status hs_prune_curve(hs_loss_eval *e, double base, const unsigned char *active,
                         const double *delta, int beam,
                         double stop_increase, int max_steps, hs_prune_step *steps, int *n_steps,
                         hs_progress_fn progress, void *user, hs_error *err);

/* Michel et al. (2019) iterative pruning: each round computes the gradient importance at
 * the current mask (|dL/d xi| of every remaining head, divided by the L2 norm of its layer's
 * remaining heads), removes the per_round least important remaining heads (ties: lower
 * index), and measures the loss with them masked: one gradient pass (about 3 forward passes)
 * per round, whose forward gives the previous round's loss (the pass that finds the loss past
 * the stop skips its backward; a curve ended by max_steps pays one loss pass). Stops after
 * the round whose loss exceeds base + stop_increase, when one candidate is left, or once
 * max_steps heads are removed (the last round may be smaller). Only heads with active != 0
 * are candidates (NULL = all). steps must hold L*H entries, one per removed head; *n_steps
 * gets the count. HS_LOSS_REPR: HS_E_UNSUPPORTED (its gradient is zero with every head on). */
hs_status hs_prune_curve_gradient(hs_loss_eval *e, double base, const unsigned char *active,
                                  int per_round, double stop_increase, int max_steps,
                                  hs_prune_step *steps, int *n_steps, hs_progress_fn progress,
                                  void *user, hs_error *err);

/* Michel et al. (2019) head importance: raw[l*H+h] = |dL/d xi_{l,h}| at xi = 1 (xi the head
 * mask), norm = each layer's row of raw divided by its L2 norm (0 row stays 0). One forward
 * pass storing activations plus one backward pass. HS_LOSS_REPR: the gradient is 0 at xi = 1
 * (the loss is at its minimum), so the function returns HS_E_UNSUPPORTED for it.
 * The input is checked as by hs_loss_eval_new. raw and norm: (n_layer, n_head), caller-owned;
 * either may be NULL. Memory: about n_layer * (6 n d + n_head n^2 + n d_ff) floats plus the
 * logits of the loss rows, (rows, vocab); when the layers' part passes 512 MiB (long texts),
 * one layer's (6 n d + n_head n^2 + n d_ff) plus n_layer * n d instead, each layer's
 * activations recomputed from its input stream during the backward (one more forward pass;
 * the same numbers). */
hs_status hs_gradient_importance(const hs_model *m, const hs_loss_input *in, double *raw,
                                 double *norm, hs_error *err);

/* The signed gradient g[l*H + h] = dL/d xi_{l,h} at xi = 1: (n_layer * n_head), caller-owned,
 * and the loss at xi = 1 in *loss (may be NULL). Same inputs and errors as
 * hs_gradient_importance. */
hs_status hs_gradient_signed(const hs_model *m, const hs_loss_input *in, double *g, double *loss,
                             hs_error *err);

/* As hs_gradient_signed, at the head mask xi = head_mask: (n_layer, n_head) (NULL = all
 * ones): g[l*H + h] = dL/d xi_{l,h} there, with context_h = xi_h P_h V_h. A masked head
 * still has a gradient (how much the loss would change if it came back). */
hs_status hs_gradient_signed_masked(const hs_model *m, const hs_loss_input *in,
                                    const float *head_mask, double *g, double *loss,
                                    hs_error *err);

/* An encoder-decoder's heads (T5, hs_model_config.n_enc_layer > 0) by zero ablation, the
 * loss being the decoder's teacher-forced mean negative log-likelihood of target (n_tgt ids;
 * the decoder reads decoder_start_id then target but its last) given the encoder's src
 * (n_src ids): *base with every head on; self_delta (n_layer, n_head) the loss with one
 * self-attention head off (the encoder's layers, then the decoder's) minus *base;
 * cross_delta (n_layer, n_head) the same for each decoder layer's cross-attention heads,
 * NaN in the encoder's rows. One forward pass a head. */
hs_status hs_encdec_ablation(const hs_model *m, const int32_t *src, int n_src,
                             const int32_t *target, int n_tgt, double *base, double *self_delta,
                             double *cross_delta, hs_error *err);

/* The same heads' gradient importance: *loss as above under the masks head_mask and
 * cross_head_mask ((n_layer, n_head) each, the self-attention and the cross-attention heads',
 * as hs_forward_opts has them; NULL: all ones), and the signed derivative of it by each
 * head's mask there (Michel et al. 2019 take |.| at all ones), by a hand-written backward
 * through both stacks: self_grad (n_layer, n_head) the self-attention heads', cross_grad
 * (n_layer, n_head) the cross-attention heads' (NaN in the encoder's rows). One forward pass
 * keeping every layer's activations and one backward pass. */
hs_status hs_encdec_gradient(const hs_model *m, const int32_t *src, int n_src,
                             const int32_t *target, int n_tgt, const float *head_mask,
                             const float *cross_head_mask, double *loss, double *self_grad,
                             double *cross_grad, hs_error *err);

/* Michel et al.'s pruning of the same heads, both kinds together: each round the gradient
 * importance of the heads left (hs_encdec_gradient at the current masks), then the
 * ceil(round * n_heads) least important of them (ties: the lower index) turned off, until
 * none is left. n_heads = n_layer n_head self-attention heads and (n_layer - n_enc_layer)
 * n_head cross-attention heads. order (n_heads): the heads in the order they went, each
 * kind * n_layer * n_head + layer * n_head + head (kind 0 self-attention, 1 cross); loss
 * (n_rounds + 1): the loss before the first round and after each; *n_rounds =
 * ceil(n_heads / ceil(round * n_heads)). round in (0, 1]. */
hs_status hs_encdec_prune(const hs_model *m, const int32_t *src, int n_src,
                          const int32_t *target, int n_tgt, double round, int32_t *order,
                          double *loss, int *n_rounds, hs_error *err);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_IMPORTANCE_H */
