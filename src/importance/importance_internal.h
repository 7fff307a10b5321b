/*
 * src/importance/importance_internal.h — what the importance layer (src/importance/) offers
 * beyond include/headscope/importance.h: the loss rows' checks, the gradient's kept buffers
 * and capped pass, its tuning for tests, and pruning from a given first gradient; private to
 * the library.
 */
#ifndef HEADSCOPE_IMPORTANCE_INTERNAL_H
#define HEADSCOPE_IMPORTANCE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "headscope/status.h"

/* The loss rows' part of a loss input's checks (src/importance/span.c), shared by the
 * loss evaluator and the gradient: MLM: an MLM head, at least one masked position, positions
 * and targets in range; LM with positions: at least one, increasing, within 0..n-2. HS_OK
 * otherwise. */
struct hs_model_config;
struct hs_loss_input;
hs_status hs_loss_rows_check(const struct hs_model_config *c, const struct hs_loss_input *in,
                             hs_error *err);

/* The loss rows of an LM or MLM loss input: how many, and the r-th's row (the position whose
 * logits are read) and target id (LM: ids[row + 1]; MLM: targets[r]). */
int hs_loss_row_count(const struct hs_loss_input *in);
void hs_loss_row_at(const struct hs_loss_input *in, int r, int32_t *row, int32_t *target);

/* The large buffers of a gradient pass (every layer's kept activations, a block of logits,
 * the backward's scratch: about 100 MB for GPT-2 small at n = 128) and its forward
 * workspace, kept from one pass to the next on the same input: pruning's rounds. Fresh
 * pages cost a pass about a third of its time in page faults. Zero-initialise; free with
 * hs_grad_scratch_free (which leaves it zeroed, ready again). */
struct hs_forward_ws;
typedef struct hs_grad_scratch {
    float *buf;
    size_t bytes;
    struct hs_forward_ws *ws;
    int ws_n; /* the tokens ws was made for */
} hs_grad_scratch;
void hs_grad_scratch_free(hs_grad_scratch *s);

/* hs_gradient_signed_masked that stops after the forward pass when the loss exceeds cap:
 * *loss set, g filled with NaN, no backward (a pruning round past its stop needs only the
 * loss). cap = INFINITY: always the gradient. keep: buffers kept between passes (NULL: the
 * pass allocates and frees its own). */
struct hs_model;
hs_status hs_gradient_capped(const struct hs_model *m, const struct hs_loss_input *in,
                             const float *head_mask, double cap, double *g, double *loss,
                             hs_grad_scratch *keep, hs_error *err);


/* The gradient keeps every layer's activations for its backward while they fit in this many
 * bytes (default 512 MiB), and past it recomputes them layer by layer from the layers' input
 * streams (tests force that path with 0). Returns the previous limit. */
size_t hs_gradient_set_keep_limit(size_t bytes);
/* The gradient takes the head's logits this many loss rows at a time (default 128; below 1:
 * the default). Returns the previous count. For tests. */
int hs_gradient_set_head_rows(int rows);

/* hs_prune_curve_gradient with the first round's gradient given: g0 = |dL/d xi| (or signed)
 * at xi = 1 on the evaluator's own input (NULL = computed). */
struct hs_loss_eval;
struct hs_prune_step;
hs_status hs_prune_curve_gradient_from(struct hs_loss_eval *e, double base,
                                       const unsigned char *active, int per_round,
                                       double stop_increase, int max_steps, const double *g0,
                                       struct hs_prune_step *steps, int *n_steps,
                                       void (*progress)(void *, const char *, int, int),
                                       void *user, hs_error *err);

/* The gradient of a metric of one row's logits instead of the loss, tapped at a hook site
 * (attribution patching, src/importance/patch.c). dlogits gets the row's logits (V) and
 * writes d metric / d logits in their place, returning the metric; on_grad is called once
 * a layer with the site's gradient grad (rows x cols, row stride ld, as the hook sites lay
 * them out) and, where the pass keeps it, the activation act (the same layout; NULL at
 * resid_pre, attn_out and mlp_out). q and k: after the rotary turn. */
typedef struct hs_grad_taps {
    int row;    /* the metric's row */
    int site;   /* an hs_site: resid_pre, q, k, v, pattern, z, attn_out, mlp_out */
    double (*dlogits)(void *user, float *logits, int V);
    void (*on_grad)(void *user, int layer, const float *act, const float *grad, int rows,
                    int cols, int ld);
    void *user;
} hs_grad_taps;

/* One forward and one backward pass on in's ids (in's loss rows ignored; LM or MLM kind for
 * the checks), every head on: the taps' metric into *metric, g: (n_layer, n_head) its
 * gradient with respect to the head mask. keep: buffers kept from one pass to the next
 * (NULL: the pass's own). */
hs_status hs_gradient_tapped(const struct hs_model *m, const struct hs_loss_input *in,
                             const hs_grad_taps *taps, hs_grad_scratch *keep, double *g,
                             double *metric, hs_error *err);

/* gradient_back.c's pieces for the encoder-decoder's backward (encdec_gradient.c): the norm's
 * backward (LayerNorm, or RMSNorm with rms: dx = rstd (g - xhat mean(g xhat)), g = dy w;
 * accumulate adds into dx) and the MLP's (dy: (n, d) → din: (n, d); pre: (n, F) the kept
 * first projection; dff: (n, F) scratch and (n, d_ff) more for a gated MLP). */
struct hs_layer;
void hs_grad_norm_back(int rms, const float *xhat, const float *rstd, const float *w,
                       const float *dy, float *dx, int n, int d, int accumulate);
void hs_grad_mlp_back(const hs_model_config *c, const struct hs_layer *W, const float *pre,
                      const float *dy, float *dff, float *din, int n);

#endif /* HEADSCOPE_IMPORTANCE_INTERNAL_H */
