/* The stages of the analysis of one text that run the model (src/importance/): the loss
 * (next-token for a causal model; an MLM head's at deterministic masked positions; else
 * the distance of the final hidden states), gradient importance, the ablation sweep, the
 * probe's ablation, the pruning curve and the pruning candidates (the table in analyze.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "headscope/importance.h"
#include "headscope/report.h"
#include "importance/importance_internal.h"
#include "pipeline/pipeline.h"

typedef struct {
    int k;
    double d;
} idx_delta;

static int cmp_idx_delta(const void *x, const void *y)
{
    const idx_delta *a = x, *b = y;
    if (a->d != b->d)
        return a->d < b->d ? -1 : 1;
    return a->k - b->k;
}

/* The MLM loss input of ids: (n): masked: (n) the ids with the positions of hs_mlm_positions
 * (pos: (n), returned count) replaced by mask_id, targets: (n) the ids they held. */
static int mlm_mask(const int32_t *ids, int n, int32_t cls_id, int32_t sep_id, int32_t pad_id,
                    int32_t mask_id, int32_t *masked, int32_t *pos, int32_t *targets)
{
    int count = hs_mlm_positions(ids, n, cls_id, sep_id, pad_id, mask_id, pos, n);
    memcpy(masked, ids, (size_t)n * sizeof *masked);
    for (int k = 0; k < count; k++) {
        targets[k] = ids[pos[k]];
        masked[pos[k]] = mask_id;
    }
    return count;
}

hs_status hs_ablation_means_add(const hs_model *m, const int32_t *ids, const int32_t *type_ids,
                                int n, double *sum, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    const hs_tokenizer *tok = hs_model_tokenizer(m);
    const hs_arch *ar = c->arch;
    if (!c->has_lm_head || c->causal) /* the loss passes run on the text itself */
        return hs_ablation_z_sum(m, ids, type_ids, n, sum, err);
    int32_t mask_id = hs_special_id(tok, ar->mask_token), pad_id = hs_special_id(tok, ar->pad_token);
    int32_t cls_id = hs_special_id(tok, ar->cls_token), sep_id = hs_special_id(tok, ar->sep_token);
    if (mask_id < 0)
        return hs_fail(err, HS_E_UNSUPPORTED, "the vocabulary has no %s token for the MLM loss",
                       ar->mask_token ? ar->mask_token : "mask");
    int32_t *buf = malloc(3 * (size_t)n * sizeof *buf);
    if (!buf)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    mlm_mask(ids, n, cls_id, sep_id, pad_id, mask_id, buf, buf + n, buf + 2 * n);
    hs_status st = hs_ablation_z_sum(m, buf, type_ids, n, sum, err);
    free(buf);
    return st;
}

/* The replacement contexts of mean or resample ablation (kind) for the loss input li (its
 * ids: the text, MLM-masked for an MLM loss; or the probe) into *out (caller frees),
 * li->replace set to them; the resample input (li's ids with every special token kept in
 * place, the rest shuffled by seed) in *resampled (caller frees); mean ablation takes
 * means: (n_layer, A) when given (the corpus's), else li's own; A = hs_model_attn_width. */
static hs_status replacement(const hs_model *m, hs_analysis *a, hs_ablation_kind kind,
                             uint64_t seed, const float *means, hs_loss_input *li,
                             int32_t cls_id, int32_t sep_id, float **out, int32_t **resampled,
                             hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    const hs_tokenizer *tok = hs_model_tokenizer(m);
    int n = li->n;
    const int32_t *src = li->ids;
    *out = malloc((size_t)c->n_layer * (size_t)n * (size_t)hs_model_attn_width(c) *
                  sizeof **out);
    if (!*out)
        return hs_fail(err, HS_E_NOMEM, "out of memory for the ablation replacement");
    if (kind == HS_ABLATION_RESAMPLE) {
        unsigned char *fixed = malloc((size_t)n);
        *resampled = malloc((size_t)n * sizeof **resampled);
        if (!fixed || !*resampled) {
            free(fixed);
            return hs_fail(err, HS_E_NOMEM, "out of memory");
        }
        const hs_arch *ar = c->arch;
        int32_t mask_id = hs_special_id(tok, ar->mask_token), pad_id = hs_special_id(tok, ar->pad_token);
        for (int i = 0; i < n; i++) {
            int32_t t = li->ids[i];
            fixed[i] = t >= 0 && (t == cls_id || t == sep_id || t == mask_id || t == pad_id);
        }
        hs_resample_ids(li->ids, fixed, n, seed, *resampled);
        free(fixed);
        src = *resampled;
    }
    li->replace = *out;
    if (kind == HS_ABLATION_MEAN && means) { /* e.g. over a corpus: no pass here */
        hs_ablation_means_fill(c, means, n, *out);
        return HS_OK;
    }
    a->forward_passes++;
    return hs_ablation_replacement(m, kind, src, li->type_ids, n, *out, err);
}

/* The probe's per-head ablation cost (a->probe_ablation): the next-token loss over the
 * probe's second half, where every token repeats one of the first half and an induction
 * head can act (Olsson et al. 2022), rows first..first+half-2 with first the position of
 * the second half's first token. */
/* The caller's progress under another name (the ablation sweep says "ablation"). */
typedef struct renamed_progress {
    hs_progress_fn fn;
    void *user;
    const char *what;
} renamed_progress;

static void report_renamed(void *user, const char *what, int done, int total)
{
    const renamed_progress *p = user;
    (void)what;
    p->fn(p->user, p->what, done, total);
}

static hs_status probe_ablation(const hs_model *m, hs_analysis *a, const hs_analyze_opts *o,
                                const unsigned char *active, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    int L = c->n_layer, H = c->n_head, n = a->probe_len;
    int pre = c->arch->cls_token != NULL, post = c->arch->sep_token != NULL;
    int half = (n - pre - post) / 2, first = pre + half;
    if (!c->causal || !c->has_lm_head || half < 2)
        return HS_OK;
    hs_status st = HS_OK;
    hs_loss_eval *ev = NULL;
    float *replace = NULL;
    int32_t *rows = malloc((size_t)(half - 1) * sizeof *rows);
    a->probe_ablation = malloc((size_t)(L * H) * sizeof *a->probe_ablation);
    if (!rows || !a->probe_ablation) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
        goto done;
    }
    for (int r = 0; r < half - 1; r++)
        rows[r] = first + r;
    a->probe_rows[0] = first;
    a->probe_rows[1] = first + half - 1;
    hs_loss_input li = {.ids = a->probe_ids, .n = n, .kind = HS_LOSS_LM, .positions = rows,
                        .n_pos = half - 1};
    if (o->probe_ablation_kind != HS_ABLATION_ZERO &&
        (st = replacement(m, a, o->probe_ablation_kind, o->resample_seed, NULL, &li, -1, -1,
                          &replace, &a->probe_resample_ids, err)))
        goto done;
    renamed_progress rp = {o->progress, o->progress_user, "probe ablation"};
    if (!(st = hs_loss_eval_new(m, &li, &ev, err)) &&
        !(st = hs_loss_eval_run(ev, NULL, &a->probe_loss, err)))
        st = hs_ablation_sweep(ev, a->probe_loss, active, a->probe_ablation,
                               o->progress ? report_renamed : NULL, &rp, err);
    if (ev)
        a->forward_passes += hs_loss_eval_passes(ev);
    hs_loss_eval_free(ev);
    ev = NULL;
    /* the first half's loss, for comparison: no earlier copy to read there */
    for (int r = 0; r < half - 1; r++)
        rows[r] = pre + r;
    li = (hs_loss_input){.ids = a->probe_ids, .n = n, .kind = HS_LOSS_LM, .positions = rows,
                         .n_pos = half - 1, .no_cache = 1};
    if (!st && !(st = hs_loss_eval_new(m, &li, &ev, err))) {
        st = hs_loss_eval_run(ev, NULL, &a->probe_loss_first, err);
        a->forward_passes++;
    }
done:
    if (st) {
        free(a->probe_ablation);
        a->probe_ablation = NULL;
    }
    hs_loss_eval_free(ev);
    free(replace);
    free(rows);
    return st;
}

/* Grouped-query models: the loss with each KV group's query heads masked together, minus the
 * loss with all heads, for every layer with an analysed head (a->ablation_kv). */
static hs_status ablate_kv_groups(hs_analysis *a, hs_loss_eval *ev, const unsigned char *active,
                                  hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(a->model);
    int L = c->n_layer, H = c->n_head, KV = c->n_kv_head;
    if (KV >= H)
        return HS_OK;
    float *mask = malloc((size_t)(L * H) * sizeof *mask);
    a->ablation_kv = malloc((size_t)(L * KV) * sizeof *a->ablation_kv);
    if (!mask || !a->ablation_kv) {
        free(mask);
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    }
    hs_status st = HS_OK;
    for (int l = 0; l < L && !st; l++) {
        int any = 0;
        for (int h = 0; h < H; h++)
            any |= !active || active[l * H + h];
        for (int g = 0; g < KV && !st; g++) {
            double v = NAN;
            for (int q = 0; q < L * H; q++)
                mask[q] = q / H == l && hs_model_kv_head(c, q % H) == g ? 0.0f : 1.0f;
            if (any)
                st = hs_loss_eval_run(ev, mask, &v, err);
            a->ablation_kv[l * KV + g] = v - a->loss;
        }
    }
    free(mask);
    return st;
}

static hs_status nomem(hs_error *err)
{
    return hs_fail(err, HS_E_NOMEM, "out of memory");
}

/* Stage "loss": the loss's input (next-token for a causal model; an MLM head's at
 * deterministic masked positions; else the distance of the final hidden states; the rows of
 * the loss span), the ablation's replacement, and the loss of the text. */
hs_status hs_stage_loss(hs_run *r, hs_error *err)
{
    const hs_model *m = r->m;
    const hs_model_config *c = r->c;
    const hs_analyze_opts *o = r->o;
    const hs_arch *ar = c->arch;
    hs_analysis *a = r->a;
    int n = a->n;
    hs_status st = HS_OK;
    hs_loss_input *li = &r->li;

    *li = (hs_loss_input){.ids = a->ids, .type_ids = a->type_ids, .n = n, .no_cache = !o->ablation};
    if (c->has_lm_head && c->causal) {
        li->kind = HS_LOSS_LM;
    } else if (c->has_lm_head) {
        li->kind = HS_LOSS_MLM;
        int32_t mask_id = hs_special_id(r->tok, ar->mask_token);
        int32_t pad_id = hs_special_id(r->tok, ar->pad_token);
        if (mask_id < 0)
            return hs_fail(err, HS_E_UNSUPPORTED, "the vocabulary has no %s token for the MLM loss",
                           ar->mask_token ? ar->mask_token : "mask");
        a->mlm_positions = malloc((size_t)n * sizeof *a->mlm_positions);
        a->mlm_targets = malloc((size_t)n * sizeof *a->mlm_targets);
        r->masked = malloc((size_t)n * sizeof *r->masked);
        if (!a->mlm_positions || !a->mlm_targets || !r->masked)
            return nomem(err);
        a->n_mlm = mlm_mask(a->ids, n, r->cls_id, r->sep_id, pad_id, mask_id, r->masked,
                            a->mlm_positions, a->mlm_targets);
        li->ids = r->masked;
        li->positions = a->mlm_positions;
        li->targets = a->mlm_targets;
        li->n_pos = a->n_mlm;
    } else {
        li->kind = HS_LOSS_REPR;
    }
    a->loss_kind = li->kind;
    r->loss_possible = li->kind == HS_LOSS_LM    ? n >= 2
                       : li->kind == HS_LOSS_MLM ? a->n_mlm >= 1
                                                 : 1;
    if (li->kind == HS_LOSS_LM && o->loss_span.kind != HS_SPAN_ALL && n >= 2) {
        char span[32];
        if (!(a->loss_rows = malloc((size_t)(n - 1) * sizeof *a->loss_rows)))
            return nomem(err);
        a->n_loss_rows = hs_loss_span_rows(&o->loss_span, a->ids, n, a->loss_rows);
        li->positions = a->loss_rows;
        li->n_pos = a->n_loss_rows;
        if (a->n_loss_rows == 0)
            return hs_fail(err, HS_E_INPUT, "the loss span '%s' keeps no position of the text%s",
                           hs_loss_span_format(&o->loss_span, span, sizeof span),
                           o->loss_span.kind == HS_SPAN_REPEATED ? " (no token occurs twice)" : "");
    } else if (o->loss_span.kind != HS_SPAN_ALL) {
        return hs_fail(err, HS_E_UNSUPPORTED, "a loss span is for the next-token loss; this "
                       "model's loss is the %s loss", hs_loss_kind_name(li->kind));
    }
    /* Michel et al.'s gradient importance is the zero-ablation one, whatever the sweep's */
    r->lg = *li;
    if (o->ablation && o->ablation_kind != HS_ABLATION_ZERO && r->loss_possible &&
        (st = replacement(m, a, o->ablation_kind, o->resample_seed, o->ablation_means, li,
                          r->cls_id, r->sep_id, &r->replace, &a->resample_ids, err)))
        return st;
    if (r->loss_possible) {
        st = hs_loss_eval_new(m, li, &r->ev, err);
        if (!st)
            st = hs_loss_eval_run(r->ev, NULL, &a->loss, err);
    } else if (o->ablation) {
        st = hs_fail(err, HS_E_INPUT, li->kind == HS_LOSS_LM
                         ? "ablation needs at least 2 tokens for the next-token loss (or use --no-ablation)"
                         : "ablation needs a word to mask for the MLM loss (or use --no-ablation)");
    }
    return st;
}

/* Stage "gradient": gradient importance (Michel et al. 2019) of every head, on the loss
 * input without the ablation's replacement. */
hs_status hs_stage_gradient(hs_run *r, hs_error *err)
{
    const hs_model_config *c = r->c;
    hs_analysis *a = r->a;
    int L = c->n_layer, H = c->n_head;
    hs_status st = HS_OK;
    if (!r->loss_possible || !r->o->gradient || r->li.kind == HS_LOSS_REPR)
        return HS_OK;
    double *graw = malloc((size_t)(L * H) * sizeof *graw);
    double *gnorm = malloc((size_t)(L * H) * sizeof *gnorm);
    double tg = hs_pipeline_now();
    if (!graw || !gnorm)
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
    else
        st = hs_gradient_importance(r->m, &r->lg, graw, gnorm, err);
    a->seconds_gradient = hs_pipeline_now() - tg;
    for (size_t k = 0; k < r->nh && !st; k++) {
        a->heads[k].gradient_raw = graw[a->head_index[k]];
        a->heads[k].gradient = gnorm[a->head_index[k]];
    }
    if (!r->replace) /* the evaluator's input is lg: its gradient is pruning's first */
        r->g0 = graw;
    else
        free(graw);
    free(gnorm);
    return st;
}

/* Stage "ablation": the ablation sweep (each analysed head masked alone), and each KV group
 * of a grouped-query model masked together. */
hs_status hs_stage_ablation(hs_run *r, hs_error *err)
{
    const hs_analyze_opts *o = r->o;
    hs_analysis *a = r->a;
    int L = r->L, H = r->H;
    size_t nh = r->nh;
    hs_status st;
    if (!o->ablation || !r->ev)
        return HS_OK;
    r->delta = malloc((size_t)(L * H) * sizeof *r->delta);
    a->curve = malloc((size_t)(L * H) * sizeof *a->curve);
    a->candidates = malloc(nh * sizeof *a->candidates);
    if (!r->delta || !a->curve || !a->candidates)
        return nomem(err);
    double t0 = hs_pipeline_now();
    if ((st = hs_ablation_sweep(r->ev, a->loss, r->active, r->delta, o->progress,
                                o->progress_user, err)))
        return st;
    a->seconds_ablation = hs_pipeline_now() - t0;
    for (size_t k = 0; k < nh; k++)
        a->heads[k].ablation_delta = r->delta[a->head_index[k]];
    return ablate_kv_groups(a, r->ev, r->active, err);
}

/* Stage "probe ablation": each head's ablation cost on the induction probe. */
hs_status hs_stage_probe_ablation(hs_run *r, hs_error *err)
{
    hs_status st;
    if (!r->o->ablation || !r->ev)
        return HS_OK;
    double t0 = hs_pipeline_now();
    if (r->a->probe_ids && r->o->probe_ablation &&
        (st = probe_ablation(r->m, r->a, r->o, r->active, err)))
        return st;
    r->a->seconds_probe_ablation = hs_pipeline_now() - t0;
    return HS_OK;
}

/* Stage "pruning": the pruning curve, by gradient rounds (Michel et al.'s) or greedily by
 * the loss (a beam search). */
hs_status hs_stage_pruning(hs_run *r, hs_error *err)
{
    const hs_analyze_opts *o = r->o;
    hs_analysis *a = r->a;
    hs_loss_kind kind = r->li.kind;
    hs_status st;
    if (!o->ablation || !r->ev || !o->pruning || a->n_heads < 2)
        return HS_OK;
    double t0 = hs_pipeline_now();
    double stop = kind == HS_LOSS_REPR ? o->prune_stop : fabs(a->loss) * o->prune_stop;
    int gradient = o->prune_method != HS_PRUNE_GREEDY && kind != HS_LOSS_REPR;
    a->prune_method_used = gradient ? HS_PRUNE_GRADIENT : HS_PRUNE_GREEDY;
    a->prune_round_heads = 1;
    if (gradient) {
        double rh = floor(o->prune_round * (double)a->n_heads + 0.5);
        a->prune_round_heads = rh >= 1 ? (int)rh : 1;
        st = hs_prune_curve_gradient_from(r->ev, a->loss, r->active, a->prune_round_heads, stop,
                                          o->prune_max_steps, r->g0, a->curve, &a->n_curve,
                                          o->progress, o->progress_user, err);
    } else {
        st = hs_prune_curve(r->ev, a->loss, r->active, r->delta, o->prune_beam, stop,
                            o->prune_max_steps, a->curve, &a->n_curve, o->progress,
                            o->progress_user, err);
    }
    if (st)
        return st;
    a->seconds_pruning = hs_pipeline_now() - t0;
    return HS_OK;
}

/* Stage "candidates": the heads whose ablation changes the loss by less than the
 * tolerance, in the curve's order, then the rest by their change; and the loss passes
 * counted. */
hs_status hs_stage_candidates(hs_run *r, hs_error *err)
{
    const hs_analyze_opts *o = r->o;
    hs_analysis *a = r->a;
    const double *delta = r->delta;
    size_t nh = r->nh;
    if (o->ablation && r->ev) {
        unsigned char *taken = calloc((size_t)(r->L * r->H), 1);
        idx_delta *rest = malloc(nh * sizeof *rest);
        if (!taken || !rest) {
            free(taken);
            free(rest);
            return nomem(err);
        }
        for (int s = 0; s < a->n_curve; s++) {
            int k = a->curve[s].head;
            if (fabs(delta[k]) < o->prune_tol) {
                a->candidates[a->n_candidates++] = k;
                taken[k] = 1;
            }
        }
        int nr = 0;
        for (size_t k = 0; k < nh; k++) {
            int hk = a->head_index[k];
            if (!taken[hk] && fabs(delta[hk]) < o->prune_tol)
                rest[nr++] = (idx_delta){hk, delta[hk]};
        }
        qsort(rest, (size_t)nr, sizeof *rest, cmp_idx_delta);
        for (int i = 0; i < nr; i++)
            a->candidates[a->n_candidates++] = rest[i].k;
        free(taken);
        free(rest);
    }
    if (r->ev)
        a->forward_passes += hs_loss_eval_passes(r->ev);
    return HS_OK;
}

void hs_run_importance_free(hs_run *r)
{
    hs_loss_eval_free(r->ev);
    free(r->delta);
    free(r->g0);
    free(r->replace);
    free(r->masked);
}
