/* The loss evaluator (losses of forward passes under head masks, Hugging Face head-mask
 * semantics, see forward.h) and the exact ablation sweep; the pruning curves are prune.c's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "headscope/forward.h"
#include "headscope/importance.h"
#include "importance/importance_internal.h"
#include "importance/loss_eval.h"
#include "model/model_internal.h"
#include "nn/block.h"
#include "nn/ops.h"

const char *hs_loss_kind_name(hs_loss_kind k)
{
    return k == HS_LOSS_LM ? "lm" : k == HS_LOSS_MLM ? "mlm" : k == HS_LOSS_REPR ? "repr" : "?";
}

int hs_mlm_positions(const int32_t *ids, int n, int32_t cls_id, int32_t sep_id, int32_t pad_id,
                     int32_t mask_id, int32_t *pos, int cap)
{
    int content = 0;
    for (int i = 0; i < n; i++)
        if (ids[i] != cls_id && ids[i] != sep_id && ids[i] != pad_id && ids[i] != mask_id)
            content++;
    if (content == 0)
        return 0;
    int count = (int)floor(0.15 * content + 0.5);
    if (count < 1)
        count = 1;
    int written = 0;
    for (int k = 0; k < count && written < cap; k++) {
        int want = (int)floor((k + 0.5) * content / count), seen = 0;
        for (int i = 0; i < n; i++) {
            if (ids[i] == cls_id || ids[i] == sep_id || ids[i] == pad_id || ids[i] == mask_id)
                continue;
            if (seen++ == want) {
                pos[written++] = i;
                break;
            }
        }
    }
    return written;
}

static int32_t *dup_ids(const int32_t *src, int n)
{
    if (!src || n <= 0)
        return NULL;
    int32_t *d = malloc((size_t)n * sizeof *d);
    if (d)
        memcpy(d, src, (size_t)n * sizeof *d);
    return d;
}

void hs_loss_eval_free(hs_loss_eval *e)
{
    if (!e)
        return;
    hs_forward_ws_free(e->ws);
    free(e->ids);
    free(e->type_ids);
    free(e->positions);
    free(e->targets);
    free(e->replace);
    free(e->hidden);
    free(e->own_logits);
    free(e->scratch);
    free(e->rows);
    free(e->row_targets);
    free(e->ref);
    free(e->cache);
    free(e->cache_mask);
    free(e->row_loss);
    free(e->out_rows);
    free(e->replace_run);
    hs_grad_scratch_free(&e->grad);
    free(e);
}

long hs_loss_eval_passes(const hs_loss_eval *e) { return e->passes; }

/* Bytes a batched pass needs per copy: its final hidden states and its part of the forward
 * workspace, (n, 2 d + 2 max(d, A) + max(W, 3 d) + F), A the context width, W the QKV
 * width, F d_ff (3 d_ff for the gated MLP). (The logits are a shared block of rows.) */
static size_t copy_bytes(const hs_loss_eval *e)
{
    const hs_model_config *c = hs_model_config_of(e->m);
    size_t n = (size_t)e->in.n, d = (size_t)c->d_model, w = (size_t)hs_qkv_width(c);
    size_t f = (size_t)c->d_ff * (c->gated ? 3 : 1), A = (size_t)hs_model_attn_width(c);
    return n * (2 * d + 2 * (A > d ? A : d) + (w > 3 * d ? w : 3 * d) + f) * sizeof(float);
}

/* The distinct loss rows of e->in, ascending, into e->out_rows (e->n_out of them), and the
 * tokens a pass runs (e->n_run, the replacement contexts repacked to it); no rows
 * for the REPR loss (every row's state is compared), and every row kept when all are loss
 * rows. Returns 0 when out of memory. */
static int set_out_rows(hs_loss_eval *e)
{
    int n = e->in.n, lr = hs_loss_row_count(&e->in);
    e->n_out = e->n_run = n;
    if (e->in.kind == HS_LOSS_REPR)
        return 1;
    unsigned char *want = calloc((size_t)n, 1);
    if (!want)
        return 0;
    int count = 0;
    for (int r = 0; r < lr; r++) {
        int32_t row, target;
        hs_loss_row_at(&e->in, r, &row, &target);
        count += !want[row];
        want[row] = 1;
    }
    if (count < n && (e->out_rows = malloc((size_t)count * sizeof *e->out_rows))) {
        int k = 0;
        for (int i = 0; i < n; i++)
            if (want[i])
                e->out_rows[k++] = i;
        e->n_out = count;
    }
    free(want);
    if (count < n && !e->out_rows)
        return 0;
    const hs_model_config *c = hs_model_config_of(e->m);
    e->n_run = e->in.kind == HS_LOSS_LM && c->causal && e->out_rows
                   ? e->out_rows[e->n_out - 1] + 1 : n;
    if (e->n_run < n && e->replace) { /* (L, n, A) rows 0..n_run-1 of each layer */
        size_t A = (size_t)hs_model_attn_width(c), run = (size_t)e->n_run * A, all = (size_t)n * A;
        if (!(e->replace_run = malloc((size_t)c->n_layer * run * sizeof *e->replace_run)))
            return 0;
        for (int l = 0; l < c->n_layer; l++)
            memcpy(e->replace_run + (size_t)l * run, e->replace + (size_t)l * all,
                   run * sizeof *e->replace_run);
    }
    return 1;
}

/* The place of loss row `row` among the rows the last layer computes. */
static int out_index(const hs_loss_eval *e, int32_t row)
{
    if (!e->out_rows)
        return row;
    int lo = 0, hi = e->n_out - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (e->out_rows[mid] < row)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Grows the buffers to hold batch copies (they never shrink). */
static hs_status ensure_batch(hs_loss_eval *e, int batch, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(e->m);
    if (batch <= e->cap_batch)
        return HS_OK;
    size_t n = (size_t)e->in.n, b = (size_t)batch;
    free(e->hidden);
    free(e->row_loss);
    free(e->rows);
    free(e->row_targets);
    hs_forward_ws_free(e->ws);
    e->hidden = NULL;
    e->ws = NULL;
    e->cap_batch = 0;
    e->row_loss = malloc(b * n * sizeof(double));
    e->rows = malloc(b * n * sizeof *e->rows);
    e->row_targets = malloc(b * n * sizeof *e->row_targets);
    e->hidden = malloc(b * n * (size_t)c->d_model * sizeof(float));
    if (!e->row_loss || !e->hidden || !e->rows || !e->row_targets)
        return hs_fail(err, HS_E_NOMEM, "out of memory for %d copies of the loss buffers", batch);
    /* loss row r of copy k: hidden row k * n + (r, LM; positions[r], MLM), its target */
    int lr = hs_loss_row_count(&e->in);
    for (int k = 0; k < batch && e->in.kind != HS_LOSS_REPR; k++)
        for (int r = 0; r < lr; r++) {
            int32_t row, target;
            hs_loss_row_at(&e->in, r, &row, &target);
            e->rows[k * lr + r] = k * e->n_out + out_index(e, row);
            e->row_targets[k * lr + r] = target;
        }
    hs_status st = hs_forward_ws_new_batch(e->m, e->in.n, batch, &e->ws, err);
    if (st == HS_OK) {
        e->cap_batch = batch;
        e->ws->out_rows = e->out_rows;
        e->ws->n_out_rows = e->n_out;
    }
    return st;
}

void hs_loss_eval_set_batch_memory(hs_loss_eval *e, size_t bytes) { e->batch_bytes = bytes; }

hs_status hs_loss_eval_new(const hs_model *m, const hs_loss_input *in, hs_loss_eval **out,
                           hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    *out = NULL;
    if (in->n < 1 || !in->ids)
        return hs_fail(err, HS_E_ARG, "loss: no tokens");
    if (in->kind == HS_LOSS_LM && (in->n < 2 || !c->has_lm_head))
        return hs_fail(err, HS_E_INPUT, in->n < 2 ? "the language-model loss needs at least 2 tokens"
                                                  : "the model has no language-model head");
    hs_status st = hs_loss_rows_check(c, in, err);
    if (st)
        return st;
    if (in->kind != HS_LOSS_LM && in->kind != HS_LOSS_MLM && in->kind != HS_LOSS_REPR)
        return hs_fail(err, HS_E_ARG, "loss: unknown kind %d", (int)in->kind);

    hs_loss_eval *e = calloc(1, sizeof *e);
    if (!e)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    e->m = m;
    e->in = *in;
    e->ids = dup_ids(in->ids, in->n);
    e->type_ids = dup_ids(in->type_ids, in->n);
    e->positions = dup_ids(in->positions, in->n_pos);
    e->targets = dup_ids(in->targets, in->n_pos);
    e->in.ids = e->ids;
    e->in.type_ids = e->type_ids;
    e->in.positions = e->positions;
    e->in.targets = e->targets;
    size_t n = (size_t)in->n, lh = (size_t)c->n_layer * (size_t)c->n_head;
    size_t rep = (size_t)c->n_layer * n * (size_t)hs_model_attn_width(c); /* (L, n, A) */
    if (in->replace && (e->replace = malloc(rep * sizeof *e->replace)))
        memcpy(e->replace, in->replace, rep * sizeof *e->replace);
    e->in.replace = e->replace;
    int ok = e->ids && (!in->type_ids || e->type_ids) && (!in->replace || e->replace) &&
             (!in->positions || e->positions) && (in->kind != HS_LOSS_MLM || e->targets);
    if (!in->no_cache) {
        e->cache = malloc((size_t)c->n_layer * n * (size_t)c->d_model * sizeof(float));
        e->cache_mask = malloc(lh * sizeof(float));
        ok = ok && e->cache && e->cache_mask;
    }
    if (in->kind == HS_LOSS_REPR)
        e->ref = malloc(n * (size_t)c->d_model * sizeof(float));
    ok = ok && (in->kind != HS_LOSS_REPR || e->ref) && set_out_rows(e);
    st = ok ? ensure_batch(e, 1, err)
            : hs_fail(err, HS_E_NOMEM, "out of memory for the loss evaluator");
    if (st == HS_OK && in->kind == HS_LOSS_REPR) {
        hs_forward_opts o = {.hidden = e->ref};
        st = hs_forward(m, e->ids, e->type_ids, in->n, &o, e->ws, err);
        e->passes++;
    }
    if (st) {
        hs_loss_eval_free(e);
        return st;
    }
    *out = e;
    return HS_OK;
}

/* loss[k] = mean over copy k's loss rows of −log softmax(logits)[target], in double, from
 * the final hidden states: the logits a block of rows at a time (in the workspace's spare
 * attention buffer when it holds LOGIT_ROWS rows or more, else in a buffer of LOGIT_ROWS),
 * each block's rows in parallel, each copy's rows summed in order, so the values depend on
 * neither the thread count nor the batch. */
static hs_status batch_nll(hs_loss_eval *e, int batch, double *loss, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(e->m);
    int V = c->vocab_size, d = c->d_model, rows = hs_loss_row_count(&e->in), all = batch * rows;
    size_t spare_floats;
    float *logits = hs_forward_ws_spare(e->ws, &spare_floats);
    size_t fit = spare_floats / (size_t)V;
    int block = fit >= LOGIT_ROWS ? (fit < (size_t)all ? (int)fit : all) : LOGIT_ROWS;
    if (fit < LOGIT_ROWS) {
        if (!e->own_logits &&
            !(e->own_logits = malloc((size_t)LOGIT_ROWS * (size_t)V * sizeof(float))))
            return hs_fail(err, HS_E_NOMEM, "out of memory for a block of logits");
        logits = e->own_logits;
    }
    if (e->scratch_rows < block) {
        free(e->scratch);
        e->scratch_rows = 0;
        if (!(e->scratch = malloc(2 * (size_t)block * (size_t)d * sizeof(float))))
            return hs_fail(err, HS_E_NOMEM, "out of memory for the LM head");
        e->scratch_rows = block;
    }
    for (int r0 = 0; r0 < all; r0 += block) {
        int cnt = all - r0 < block ? all - r0 : block;
        hs_lm_logits(e->m, e->hidden, e->rows + r0, cnt, e->scratch, logits);
#pragma omp parallel for schedule(static) if (cnt > 1)
        for (int j = 0; j < cnt; j++) {
            const float *row = logits + (size_t)j * (size_t)V;
            e->row_loss[r0 + j] = hs_op_log_sum_exp(row, V) - (double)row[e->row_targets[r0 + j]];
        }
    }
    for (int k = 0; k < batch; k++) {
        double sum = 0;
        for (int r = 0; r < rows; r++)
            sum += e->row_loss[k * rows + r];
        loss[k] = sum / rows;
    }
    return HS_OK;
}

/* 1 − mean cosine similarity of hidden: (n, d) to ref: (n, d), rows in double. */
static double repr_loss(const float *hidden, const float *ref, int n, int d)
{
    double sum = 0;
    for (int i = 0; i < n; i++) {
        const float *a = hidden + (size_t)i * (size_t)d, *b = ref + (size_t)i * (size_t)d;
        double ab = 0, aa = 0, bb = 0;
        for (int k = 0; k < d; k++) {
            ab += (double)a[k] * b[k];
            aa += (double)a[k] * a[k];
            bb += (double)b[k] * b[k];
        }
        sum += aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0.0;
    }
    return 1.0 - sum / n;
}

/* The losses of batch copies, copy b under masks + b * n_layer * n_head (NULL = all ones,
 * batch 1 only), in one pass starting at layer start from the cache (0: from the
 * embeddings; capture: batch 1, start 0, and the pass replaces the cache). */
static hs_status run_batch(hs_loss_eval *e, const float *masks, int batch, int start,
                           int capture, double *loss, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(e->m);
    const hs_loss_input *in = &e->in;
    int H = c->n_head;
    size_t nd = (size_t)e->n_run * (size_t)c->d_model;
    hs_status st = ensure_batch(e, batch, err);
    if (st)
        return st;
    if (!e->cache) /* in->no_cache: every pass is a full one */
        start = 0;
    hs_forward_opts o = {.head_mask = masks, .hidden = e->hidden, .batch = batch,
                         .head_replace = e->replace_run ? e->replace_run : e->replace};
    if (start > 0) {
        o.start_layer = start;
        o.x_start = e->cache + (size_t)start * nd;
    } else if (capture && e->cache) {
        o.x_layers = e->cache;
    }
    if ((st = hs_forward(e->m, in->ids, in->type_ids, e->n_run, &o, e->ws, err))) {
        if (o.x_layers)
            e->cache_valid = 0;
        return st;
    }
    if (o.x_layers) {
        for (int k = 0; k < c->n_layer * H; k++)
            e->cache_mask[k] = masks ? masks[k] : 1.0f;
        e->cache_valid = 1;
    }
    e->passes += batch;
    if (in->kind != HS_LOSS_REPR) {
        if ((st = batch_nll(e, batch, loss, err)))
            return st;
    } else {
        for (int b = 0; b < batch; b++)
            loss[b] = repr_loss(e->hidden + (size_t)b * nd, e->ref, in->n, c->d_model);
    }
    for (int b = 0; b < batch; b++)
        if (!isfinite(loss[b]))
            return hs_fail(err, HS_E_VALUE, "the loss is not finite");
    return HS_OK;
}

/* loss_eval.h */
hs_status hs_loss_run_mask(hs_loss_eval *e, const float *head_mask, int refresh, double *loss,
                           hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(e->m);
    int H = c->n_head, start = 0;
    if (e->cache_valid && !refresh) {
        for (start = 0; start < c->n_layer; start++) {
            int same = 1;
            for (int h = 0; h < H && same; h++)
                same = (head_mask ? head_mask[start * H + h] : 1.0f) == e->cache_mask[start * H + h];
            if (!same)
                break;
        }
        if (start == c->n_layer)
            start = c->n_layer - 1;
    }
    int capture = refresh || !e->cache_valid; /* the cache keeps its state otherwise */
    return run_batch(e, head_mask, 1, start, capture, loss, err);
}

hs_status hs_loss_eval_run(hs_loss_eval *e, const float *head_mask, double *loss, hs_error *err)
{
    return hs_loss_run_mask(e, head_mask, 0, loss, err);
}

/* Copies per batched pass: as many as fit the memory budget (at least 1, at most max). */
static int batch_cap(const hs_loss_eval *e, int max)
{
    size_t budget = e->batch_bytes ? e->batch_bytes : HS_ABLATION_BATCH_BYTES;
    size_t fit = budget / copy_bytes(e);
    return fit < 1 ? 1 : fit < (size_t)max ? (int)fit : max;
}

hs_status hs_ablation_sweep(hs_loss_eval *e, double base, const unsigned char *active,
                            double *delta, hs_progress_fn progress, void *user, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(e->m);
    int H = c->n_head, lh = c->n_layer * H, total = 0, done = 0;
    for (int k = 0; k < lh; k++) {
        total += !active || active[k];
        delta[k] = NAN;
    }
    int cap = batch_cap(e, H);
    float *masks = malloc((size_t)cap * (size_t)lh * sizeof *masks);
    int *heads = malloc((size_t)H * sizeof *heads);
    double *loss = malloc((size_t)H * sizeof *loss);
    hs_status st = HS_OK;
    if (!masks || !heads || !loss) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
        goto done;
    }
    /* Every pass of layer l starts there from the all-heads stream: make the cache that. */
    int ones = e->cache_valid;
    for (int k = 0; k < lh && ones; k++)
        ones = e->cache_mask[k] == 1.0f;
    if (!ones && e->cache && (st = hs_loss_run_mask(e, NULL, 1, loss, err)))
        goto done;
    for (int l = 0; l < c->n_layer && !st; l++) {
        int k = 0;
        for (int h = 0; h < H; h++)
            if (!active || active[l * H + h])
                heads[k++] = h;
        if (k == 0)
            continue;
        int subs = (k + cap - 1) / cap, per = (k + subs - 1) / subs; /* even sub-batches */
        for (int s0 = 0; s0 < k && !st; s0 += per) {
            int batch = per < k - s0 ? per : k - s0;
            for (size_t i = 0; i < (size_t)batch * (size_t)lh; i++)
                masks[i] = 1.0f;
            for (int b = 0; b < batch; b++)
                masks[(size_t)b * (size_t)lh + (size_t)(l * H + heads[s0 + b])] = 0.0f;
            if ((st = run_batch(e, masks, batch, l, 0, loss, err)))
                break;
            for (int b = 0; b < batch; b++) {
                delta[l * H + heads[s0 + b]] = loss[b] - base;
                if (progress)
                    progress(user, "ablation", ++done, total);
            }
        }
    }
done:
    free(loss);
    free(heads);
    free(masks);
    return st;
}
