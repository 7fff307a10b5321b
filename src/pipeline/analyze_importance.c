/* Step 5 of the analysis of one text, the runs of the model (src/importance/): the loss
 * (next-token for a causal model; an MLM head's at deterministic masked positions; else
 * the distance of the final hidden states), gradient importance, the ablation sweep, the
 * pruning curve and the pruning candidates. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/importance.h"
#include "headscope/report.h"
#include "internal.h"
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

/* The replacement contexts of mean or resample ablation for the loss input li (its ids: the
 * text, MLM-masked for an MLM loss) into *out (caller frees), li->replace set to them; the
 * resample input (li's ids with every special token kept in place, the rest shuffled) in
 * a->resample_ids. */
static hs_status replacement(const hs_model *m, hs_analysis *a, const hs_analyze_opts *o,
                             hs_loss_input *li, int32_t cls_id, int32_t sep_id, float **out,
                             hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    const hs_tokenizer *tok = hs_model_tokenizer(m);
    int n = li->n;
    const int32_t *src = li->ids;
    *out = malloc((size_t)c->n_layer * (size_t)n * (size_t)c->d_model * sizeof **out);
    if (!*out)
        return hs_fail(err, HS_E_NOMEM, "out of memory for the ablation replacement");
    if (o->ablation_kind == HS_ABLATION_RESAMPLE) {
        unsigned char *fixed = malloc((size_t)n);
        a->resample_ids = malloc((size_t)n * sizeof *a->resample_ids);
        if (!fixed || !a->resample_ids) {
            free(fixed);
            return hs_fail(err, HS_E_NOMEM, "out of memory");
        }
        const hs_arch *ar = c->arch;
        int32_t mask_id = hs_special_id(tok, ar->mask_token), pad_id = hs_special_id(tok, ar->pad_token);
        for (int i = 0; i < n; i++) {
            int32_t t = li->ids[i];
            fixed[i] = t >= 0 && (t == cls_id || t == sep_id || t == mask_id || t == pad_id);
        }
        hs_resample_ids(li->ids, fixed, n, o->resample_seed, a->resample_ids);
        free(fixed);
        src = a->resample_ids;
    }
    hs_status st = hs_ablation_replacement(m, o->ablation_kind, src, li->type_ids, n, *out, err);
    a->forward_passes++;
    li->replace = *out;
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

hs_status hs_analyze_importance(const hs_model *m, hs_analysis *a, const hs_analyze_opts *o,
                                const unsigned char *active, int32_t cls_id, int32_t sep_id,
                                hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    const hs_tokenizer *tok = hs_model_tokenizer(m);
    const hs_arch *ar = c->arch;
    int L = c->n_layer, H = c->n_head, n = a->n;
    size_t nh = (size_t)a->n_heads;
    hs_status st = HS_OK;
    hs_loss_eval *ev = NULL;
    double *delta = NULL;
    float *replace = NULL;

    hs_loss_input li = {.ids = a->ids, .type_ids = a->type_ids, .n = n, .no_cache = !o->ablation};
    int32_t *masked = NULL;
    if (c->has_lm_head && c->causal) {
        li.kind = HS_LOSS_LM;
    } else if (c->has_lm_head) {
        li.kind = HS_LOSS_MLM;
        int32_t mask_id = hs_special_id(tok, ar->mask_token), pad_id = hs_special_id(tok, ar->pad_token);
        if (mask_id < 0) {
            st = hs_fail(err, HS_E_UNSUPPORTED, "the vocabulary has no %s token for the MLM loss",
                         ar->mask_token ? ar->mask_token : "mask");
            goto fail;
        }
        a->mlm_positions = malloc((size_t)n * sizeof *a->mlm_positions);
        a->mlm_targets = malloc((size_t)n * sizeof *a->mlm_targets);
        masked = malloc((size_t)n * sizeof *masked);
        if (!a->mlm_positions || !a->mlm_targets || !masked) {
            free(masked);
            goto nomem;
        }
        a->n_mlm = hs_mlm_positions(a->ids, n, cls_id, sep_id, pad_id, mask_id, a->mlm_positions, n);
        memcpy(masked, a->ids, (size_t)n * sizeof *masked);
        for (int k = 0; k < a->n_mlm; k++) {
            a->mlm_targets[k] = a->ids[a->mlm_positions[k]];
            masked[a->mlm_positions[k]] = mask_id;
        }
        li.ids = masked;
        li.positions = a->mlm_positions;
        li.targets = a->mlm_targets;
        li.n_pos = a->n_mlm;
    } else {
        li.kind = HS_LOSS_REPR;
    }
    a->loss_kind = li.kind;
    int loss_possible = li.kind == HS_LOSS_LM ? n >= 2 : li.kind == HS_LOSS_MLM ? a->n_mlm >= 1 : 1;
    /* Michel et al.'s gradient importance is the zero-ablation one, whatever the sweep's */
    hs_loss_input lg = li;
    if (o->ablation && o->ablation_kind != HS_ABLATION_ZERO && loss_possible &&
        (st = replacement(m, a, o, &li, cls_id, sep_id, &replace, err)))
        goto fail_masked;
    if (loss_possible) {
        st = hs_loss_eval_new(m, &li, &ev, err);
        if (!st)
            st = hs_loss_eval_run(ev, NULL, &a->loss, err);
    } else if (o->ablation) {
        st = hs_fail(err, HS_E_INPUT, li.kind == HS_LOSS_LM
                         ? "ablation needs at least 2 tokens for the next-token loss (or use --no-ablation)"
                         : "ablation needs a word to mask for the MLM loss (or use --no-ablation)");
    }
    if (!st && loss_possible && o->gradient && li.kind != HS_LOSS_REPR) {
        double *graw = malloc((size_t)(L * H) * sizeof *graw);
        double *gnorm = malloc((size_t)(L * H) * sizeof *gnorm);
        double tg = hs_pipeline_now();
        if (!graw || !gnorm)
            st = hs_fail(err, HS_E_NOMEM, "out of memory");
        else
            st = hs_gradient_importance(m, &lg, graw, gnorm, err);
        a->seconds_gradient = hs_pipeline_now() - tg;
        for (size_t k = 0; k < nh && !st; k++) {
            a->heads[k].gradient_raw = graw[a->head_index[k]];
            a->heads[k].gradient = gnorm[a->head_index[k]];
        }
        free(graw);
        free(gnorm);
    }
fail_masked:
    free(masked);
    if (st)
        goto fail;
    if (o->ablation && ev) {
        delta = malloc((size_t)(L * H) * sizeof *delta);
        a->curve = malloc((size_t)(L * H) * sizeof *a->curve);
        a->candidates = malloc(nh * sizeof *a->candidates);
        if (!delta || !a->curve || !a->candidates)
            goto nomem;
        double t0 = hs_pipeline_now();
        if ((st = hs_ablation_sweep(ev, a->loss, active, delta, o->progress, o->progress_user, err)))
            goto fail;
        a->seconds_ablation = hs_pipeline_now() - t0;
        for (size_t k = 0; k < nh; k++)
            a->heads[k].ablation_delta = delta[a->head_index[k]];
        if ((st = ablate_kv_groups(a, ev, active, err)))
            goto fail;
        if (o->pruning && a->n_heads >= 2) {
            t0 = hs_pipeline_now();
            double stop = li.kind == HS_LOSS_REPR ? o->prune_stop : fabs(a->loss) * o->prune_stop;
            int gradient = o->prune_method != HS_PRUNE_GREEDY && li.kind != HS_LOSS_REPR;
            a->prune_method_used = gradient ? HS_PRUNE_GRADIENT : HS_PRUNE_GREEDY;
            a->prune_round_heads = 1;
            if (gradient) {
                double r = floor(o->prune_round * (double)a->n_heads + 0.5);
                a->prune_round_heads = r >= 1 ? (int)r : 1;
                st = hs_prune_curve_gradient(ev, a->loss, active, a->prune_round_heads, stop,
                                             o->prune_max_steps, a->curve, &a->n_curve,
                                             o->progress, o->progress_user, err);
            } else {
                st = hs_prune_curve(ev, a->loss, active, delta, o->prune_beam, stop,
                                    o->prune_max_steps, a->curve, &a->n_curve, o->progress,
                                    o->progress_user, err);
            }
            if (st)
                goto fail;
            a->seconds_pruning = hs_pipeline_now() - t0;
        }
        /* candidates: |delta| < tol, in curve order, then the rest by delta */
        unsigned char *taken = calloc((size_t)(L * H), 1);
        idx_delta *rest = malloc(nh * sizeof *rest);
        if (!taken || !rest) {
            free(taken);
            free(rest);
            goto nomem;
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
    if (ev)
        a->forward_passes += hs_loss_eval_passes(ev);
fail: /* st is HS_OK when the steps above ran through */
    hs_loss_eval_free(ev);
    free(delta);
    free(replace);
    return st;
nomem:
    st = hs_fail(err, HS_E_NOMEM, "out of memory");
    goto fail;
}
