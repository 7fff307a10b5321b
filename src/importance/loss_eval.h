/* The loss evaluator's state, shared by importance.c (the evaluator and the ablation sweep)
 * and prune.c (the pruning curves); private to src/importance/. */
#ifndef HEADSCOPE_LOSS_EVAL_H
#define HEADSCOPE_LOSS_EVAL_H

#include "headscope/forward.h"
#include "headscope/importance.h"
#include "importance/importance_internal.h"

/* Rows of logits computed at a time when the forward workspace's spare attention buffer
 * cannot hold more (128 x 50257 floats is 26 MB). */
#define LOGIT_ROWS 128

struct hs_loss_eval {
    const hs_model *m;
    hs_loss_input in; /* arrays below are owned copies */
    int32_t *ids, *type_ids, *positions, *targets;
    float *replace; /* (n_layer, n, d) or NULL: in.replace copied */
    hs_forward_ws *ws;
    /* Buffers for up to cap_batch copies of a batched pass (1 until a sweep asks for more).
     * The losses are taken from the final hidden states, the logits a block of rows at a
     * time, so no (n, V) array is ever held. */
    int cap_batch;
    size_t batch_bytes; /* memory budget of a sweep's copies; 0 = HS_ABLATION_BATCH_BYTES */
    float *hidden;      /* (cap_batch * n, d) final hidden states */
    float *ref;         /* (n, d) unablated hidden states, REPR */
    float *own_logits;  /* (LOGIT_ROWS, V) when the workspace's spare buffer is too small */
    float *scratch;     /* (2, LOGIT_ROWS or more, d) for the LM head */
    int scratch_rows;
    int32_t *rows, *row_targets; /* (cap_batch * n) hidden row and target of each loss row */
    long passes;
    double *row_loss;   /* (cap_batch * n) per-row losses, summed in order */
    /* Residual streams entering each layer under cache_mask: a run whose mask equals
     * cache_mask below layer l restarts at l from here. */
    float *cache;      /* (n_layer, n, d) */
    float *cache_mask; /* (n_layer, n_head) */
    int cache_valid;
    hs_grad_scratch grad; /* gradient passes' buffers (pruning's rounds), freed after them */
    /* The distinct loss rows, ascending (NULL: every row, REPR): the last layer runs on
     * them only (hs_forward_ws.out_rows), its output compacted, n_out rows a copy. */
    int32_t *out_rows;
    int n_out;
    /* The tokens a pass runs: a causal next-token loss stops at its last loss row (no
     * earlier row reads a later one; the last row's target is read from ids); else n. The
     * replacement contexts with that stride, when shorter (the full ones stay in in.replace
     * for the gradient). */
    int n_run;
    float *replace_run;
};

/* The loss under head_mask (NULL = all ones). Restarts from the cached residual stream at
 * the first layer whose mask differs from the cache's; refresh forces a full run that
 * replaces the cache. */
hs_status hs_loss_run_mask(hs_loss_eval *e, const float *head_mask, int refresh, double *loss,
                           hs_error *err);

#endif
