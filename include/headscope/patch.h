/*
 * headscope/patch.h — activation patching over pairs of prompts (docs/patching.md).
 *
 * Each pair is a clean and a corrupt prompt of the same number of tokens, and the answer
 * (and a wrong answer) whose metric is read at one position. Denoising runs the corrupt
 * prompt with one unit's activation at the site (a head, or the whole stream at resid_pre,
 * attn_out, mlp_out) taken from the clean run; noising the other way round. A patch at layer
 * l reruns layers l.. only, from the stream the unpatched run left there, and the units of
 * one layer run as the copies of one batched pass.
 *
 *     hs_patch_pair p = {clean_ids, corrupt_ids, n, answer_id, wrong_id, n - 1};
 *     hs_patch_opts o = hs_patch_opts_default();          // logit-diff, z, denoise
 *     hs_patch_result *r = NULL;
 *     if (hs_patch_run(model, &p, 1, &o, &r, &err) == HS_OK) {
 *         printf("%g\n", r->effect[hs_patch_index(r, 3, 0, 0)]); // layer 3, head 0
 *         hs_patch_result_free(r);
 *     }
 */
#ifndef HEADSCOPE_PATCH_H
#define HEADSCOPE_PATCH_H

#include <stdint.h>

#include "headscope/hooks.h"
#include "headscope/model.h"
#include "headscope/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hs_patch_metric {
    HS_METRIC_LOGIT_DIFF, /* logit of answer minus logit of wrong */
    HS_METRIC_PROB,       /* softmax probability of answer */
    HS_METRIC_LOSS        /* -log softmax probability of answer */
} hs_patch_metric;

typedef struct hs_patch_pair {
    const int32_t *clean, *corrupt; /* n token ids each */
    int n;
    int32_t answer, wrong; /* wrong: unused (may be -1) unless the metric is logit-diff */
    int pos;               /* the row the metric reads (decoders: n - 1; BERT: [MASK]) */
} hs_patch_pair;

/* How the effect is had: exactly (one patched pass per unit), by attribution patching
 * (Nanda 2023: (source - target activation) . d metric / d activation at the target run, one
 * forward and one backward pass a prompt), or both. */
typedef enum hs_patch_method {
    HS_PATCH_EXACT = 0,
    HS_PATCH_ATTRIBUTION = 1,
    HS_PATCH_BOTH = 2
} hs_patch_method;

typedef struct hs_patch_opts {
    hs_patch_metric metric;
    hs_site site;      /* resid_pre, q, k, v, pattern, z, attn_out or mlp_out */
    int each_position; /* 0: a unit patched at every position; 1: one position at a time */
    int noise;         /* 0 denoise (clean into corrupt), 1 noise (corrupt into clean) */
    hs_patch_method method;
    int resamples;     /* bootstrap resamples for ci95 (0: none) */
    uint64_t seed;     /* the bootstrap's splitmix64 seed */
    /* called after each pair with (pairs done, pairs), may be NULL; non-zero stops the run
     * (HS_E_ARG "stopped") */
    int (*progress)(void *user, int done, int total);
    void *progress_user;
} hs_patch_opts;

/* metric logit-diff, site z, all positions, denoise, 1000 resamples, seed 0x5eed. */
hs_patch_opts hs_patch_opts_default(void);

typedef struct hs_patch_result {
    int n_layer, n_units, n_pos, n_pairs; /* units: the site's heads (n_head, or n_kv_head
                                             at k and v) or 1; n_pos: 1 or the tokens */
    double passes;     /* forward-pass equivalents run: the floating-point operations of
                          the passes' matrix products (every copy of a batch counted) over
                          those of one plain forward of a pair's tokens with logits at
                          every position, summed over the pairs (docs/patching.md#cost) */
    double *clean, *corrupt; /* (n_pairs): the metric of each prompt unpatched */
    double *patched;   /* (n_layer, n_units, n_pos, n_pairs): the patched run's metric */
    double *effect;    /* (n_layer, n_units, n_pos): normalised on the means over the pairs */
    double *ci_lo, *ci_hi; /* (n_layer, n_units, n_pos): bootstrap percentiles, NaN with no
                              resamples */
    /* The method's values above: the exact ones, or with HS_PATCH_ATTRIBUTION the
     * attribution estimate (m_target + its sum standing in for the patched metric). With
     * HS_PATCH_BOTH the estimate's in these (NULL otherwise), and correlation = Pearson's r
     * of the two effects over the cells (NaN when undefined). */
    double *patched_attr, *effect_attr, *ci_lo_attr, *ci_hi_attr;
    double correlation;
} hs_patch_result;

/* Index of (layer, unit, position) in effect, ci_lo, ci_hi; times n_pairs in patched. */
static inline int hs_patch_index(const hs_patch_result *r, int layer, int unit, int pos)
{
    return (layer * r->n_units + unit) * r->n_pos + pos;
}

/* The normalised effect of patched means on clean and corrupt means: denoise
 * (p - c0) / (c1 - c0), noise (c1 - p) / (c1 - c0), c1 clean and c0 corrupt; NaN when
 * c1 == c0. */
double hs_patch_normalise(double clean, double corrupt, double patched, int noise);

/* Runs activation patching over pairs (n_pairs >= 1; each pair's prompts of n tokens, the
 * ids in the vocabulary, pos in 0..n-1, answer and wrong ids in the vocabulary; with
 * each_position every pair of the same n). HS_E_ARG naming the pair for bad input, the
 * errors of hs_forward, HS_E_NOMEM. Free *out with hs_patch_result_free. */
hs_status hs_patch_run(const hs_model *m, const hs_patch_pair *pairs, int n_pairs,
                       const hs_patch_opts *o, hs_patch_result **out, hs_error *err);

void hs_patch_result_free(hs_patch_result *r);

/* A result of n_layer x n_units x n_pos cells over n_pairs pairs, its arrays allocated
 * (uninitialised; the _attr ones too when both), to fill and summarise. */
hs_status hs_patch_result_new(int n_layer, int n_units, int n_pos, int n_pairs, int both,
                              hs_patch_result **out, hs_error *err);

/* Sets r's effect, ci_lo, ci_hi (and the _attr ones and correlation when r has
 * patched_attr) from its clean, corrupt and patched values, with o's direction, resamples
 * and seed, as hs_patch_run ends: shards of the pairs put back in their order give what one
 * run gives (headscope merge). */
hs_status hs_patch_result_summarise(hs_patch_result *r, const hs_patch_opts *o, hs_error *err);

/* Path patching (Wang et al. 2022): the sender head's output z takes its source value (the
 * clean run's when denoising), every other head's output keeps the target run's, the MLPs
 * and norms are recomputed, and the receiver's input (its query, or the key or value of its
 * KV head) that this gives at the receiver's layer is patched into the target run, whose
 * metric is read. The change reaches the receiver only through the residual stream and
 * its layer's norm. */
typedef struct hs_patch_path {
    int receiver_layer, receiver_head; /* the receiver: a query head */
    hs_site input;                     /* HS_SITE_Q, HS_SITE_K or HS_SITE_V */
    int sender_layer, sender_head;     /* one sender before the receiver's layer, or -1, -1:
                                          every head of every layer before it */
} hs_patch_path;

/* Path patching over pairs (each pair as hs_patch_run checks them; o's site, positions and
 * method are not read): r->n_layer = receiver_layer (the senders' layers), n_units = n_head,
 * n_pos = 1, one cell a sender (NaN where no sender was asked). HS_E_ARG for a path out of
 * the model. Free *out with hs_patch_result_free. */
hs_status hs_patch_path_run(const hs_model *m, const hs_patch_pair *pairs, int n_pairs,
                            const hs_patch_opts *o, const hs_patch_path *path,
                            hs_patch_result **out, hs_error *err);

/* The one token of an answer text (its tokens without the template's special ones, as
 * BERT's [CLS], must be one) into *id. *n_tokens (may be NULL): the text's tokens, or -1
 * when the tokenizer refused it (err then holds the tokenizer's message). HS_E_INPUT
 * "'TEXT' is K tokens ('a', 'b'), not one"; HS_E_UNSUPPORTED without tokenizer files. */
hs_status hs_patch_answer_id(const hs_model *m, const char *text, int32_t *id, int *n_tokens,
                             hs_error *err);

/* HS_E_INPUT "clean is A tokens ('a', 'b'), corrupt B (...): they must be as many" unless
 * the two prompts of a pair have as many tokens (n_clean == n_corrupt). */
hs_status hs_patch_lengths_check(const hs_model *m, const int32_t *clean, int n_clean,
                                 const int32_t *corrupt, int n_corrupt, hs_error *err);

/* Sets p->pos, the row the metric reads: the last (decoders), or the clean prompt's mask
 * token (BERT's [MASK]), which the corrupt prompt must have at the same place (HS_E_INPUT
 * "the clean prompt has no [MASK] token, where the answer is read", "the corrupt prompt
 * has no [MASK] at position P, where the clean one has it"). */
hs_status hs_patch_pair_pos(const hs_model *m, hs_patch_pair *p, hs_error *err);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_PATCH_H */
