/* Pruning curves: heads removed one or a round at a time, the loss recorded after each
 * removal. The exact greedy curve (every remaining head tried at each step, a beam of the
 * sweep's candidates) and Michel et al.'s (2019) rounds by normalised gradient importance;
 * both run their passes through the loss evaluator of importance.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "headscope/importance.h"
#include "importance/importance_internal.h"
#include "importance/loss_eval.h"
#include "model/model_internal.h"

/* At most max_steps removals, and never the last of the *n_active candidate heads
 * (active != 0; NULL = all). */
static int removals_allowed(const unsigned char *active, int lh, int max_steps, int *n_active)
{
    *n_active = 0;
    for (int k = 0; k < lh; k++)
        *n_active += !active || active[k];
    return max_steps < *n_active - 1 ? max_steps : *n_active - 1;
}

static float *ones_mask(const hs_model_config *c)
{
    size_t lh = (size_t)c->n_layer * (size_t)c->n_head;
    float *m = malloc(lh * sizeof *m);
    if (m)
        for (size_t i = 0; i < lh; i++)
            m[i] = 1.0f;
    return m;
}

hs_status hs_prune_curve(hs_loss_eval *e, double base, const unsigned char *active,
                         const double *delta, int beam,
                         double stop_increase, int max_steps, hs_prune_step *steps, int *n_steps,
                         hs_progress_fn progress, void *user, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(e->m);
    int lh = c->n_layer * c->n_head;
    *n_steps = 0;
    if (beam < 1)
        return hs_fail(err, HS_E_ARG, "pruning beam must be at least 1");
    int n_active;
    max_steps = removals_allowed(active, lh, max_steps, &n_active);
    float *mask = ones_mask(c);
    double *known = malloc((size_t)lh * sizeof *known); /* last known increase per head */
    int *order = malloc((size_t)lh * sizeof *order);
    if (!mask || !known || !order) {
        free(mask);
        free(known);
        free(order);
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    }
    memcpy(known, delta, (size_t)lh * sizeof *known);
    double current = base;
    hs_status st = HS_OK;
    for (int step = 0; step < max_steps && !st; step++) {
        /* remaining heads sorted by last known increase (ties: lower index first) */
        int left = 0;
        for (int k = 0; k < lh; k++)
            if (mask[k] != 0.0f && (!active || active[k]))
                order[left++] = k;
        for (int i = 1; i < left; i++) { /* insertion sort: lh is small */
            int v = order[i], j = i - 1;
            while (j >= 0 && (known[order[j]] > known[v] ||
                              (known[order[j]] == known[v] && order[j] > v))) {
                order[j + 1] = order[j];
                j--;
            }
            order[j + 1] = v;
        }
        int eval = beam < left ? beam : left, best = -1;
        double best_loss = 0;
        for (int i = 0; i < eval && !st; i++) {
            int k = order[i];
            double loss;
            mask[k] = 0.0f;
            st = hs_loss_eval_run(e, mask, &loss, err);
            mask[k] = 1.0f;
            known[k] = loss - current;
            if (best < 0 || loss < best_loss) {
                best = k;
                best_loss = loss;
            }
        }
        if (st)
            break;
        mask[best] = 0.0f;
        current = best_loss;
        int stopping = best_loss > base + stop_increase;
        if (!stopping && step + 1 < max_steps && eval > 1) { /* the cache follows the pruned state */
            double again;
            if ((st = hs_loss_run_mask(e, mask, 1, &again, err)))
                break;
        }
        steps[step] = (hs_prune_step){best, left - 1, best_loss, step};
        *n_steps = step + 1;
        if (progress)
            progress(user, "pruning", step + 1, max_steps);
        if (stopping)
            break;
    }
    free(mask);
    free(known);
    free(order);
    return st;
}

/* Importance of the remaining heads at mask: |dL/dxi| of each, divided by the L2 norm of
 * its layer's remaining heads (Michel et al. 2019, section 4). */
static void layer_normalised(const hs_model_config *c, const double *g, const float *mask,
                             const unsigned char *active, double *imp)
{
    int H = c->n_head;
    for (int l = 0; l < c->n_layer; l++) {
        double ss = 0;
        for (int h = 0; h < H; h++)
            if (mask[l * H + h] != 0.0f)
                ss += g[l * H + h] * g[l * H + h];
        double nrm = sqrt(ss);
        for (int h = 0; h < H; h++) {
            int k = l * H + h;
            imp[k] = mask[k] == 0.0f || (active && !active[k]) ? INFINITY
                     : nrm > 0                                 ? fabs(g[k]) / nrm
                                                               : 0.0;
        }
    }
}

hs_status hs_prune_curve_gradient(hs_loss_eval *e, double base, const unsigned char *active,
                                  int per_round, double stop_increase, int max_steps,
                                  hs_prune_step *steps, int *n_steps, hs_progress_fn progress,
                                  void *user, hs_error *err)
{
    return hs_prune_curve_gradient_from(e, base, active, per_round, stop_increase, max_steps,
                                        NULL, steps, n_steps, progress, user, err);
}

/* A round's loss is the one the next round's gradient pass computes on its way (that pass
 * skips its backward once the loss is past the stop); the last round's, a loss pass. */
hs_status hs_prune_curve_gradient_from(hs_loss_eval *e, double base, const unsigned char *active,
                                       int per_round, double stop_increase, int max_steps,
                                       const double *g0, hs_prune_step *steps, int *n_steps,
                                       hs_progress_fn progress, void *user, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(e->m);
    int lh = c->n_layer * c->n_head;
    *n_steps = 0;
    if (per_round < 1)
        return hs_fail(err, HS_E_ARG, "pruning round size must be at least 1");
    if (e->in.kind == HS_LOSS_REPR)
        return hs_fail(err, HS_E_UNSUPPORTED, "gradient pruning needs the lm or mlm loss (the "
                       "repr loss has a zero gradient with every head on); use greedy pruning");
    int n_active;
    max_steps = removals_allowed(active, lh, max_steps, &n_active);
    float *mask = ones_mask(c);
    double *g = malloc((size_t)lh * sizeof *g), *imp = malloc((size_t)lh * sizeof *imp);
    hs_status st = HS_OK;
    if (!mask || !g || !imp) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
        goto done;
    }
    int removed = 0, left = n_active, take = 0;
    for (int round = 0; removed < max_steps || take; round++) {
        double loss = base;
        if (round == 0 && g0)
            memcpy(g, g0, (size_t)lh * sizeof *g);
        else if (removed < max_steps)
            st = hs_gradient_capped(e->m, &e->in, mask, base + stop_increase, g, &loss, &e->grad,
                                    err);
        else
            st = hs_loss_run_mask(e, mask, 1, &loss, err);
        if (st)
            break;
        if (take) { /* the loss of the previous round's mask */
            for (int t = removed - take; t < removed; t++)
                steps[t].loss = loss;
            *n_steps = removed;
            if (progress)
                progress(user, "pruning", removed, max_steps);
            if (loss > base + stop_increase || removed >= max_steps)
                break;
        }
        layer_normalised(c, g, mask, active, imp);
        take = per_round < max_steps - removed ? per_round : max_steps - removed;
        for (int t = 0; t < take; t++) { /* the least important remaining head */
            int best = -1;
            for (int k = 0; k < lh; k++)
                if (imp[k] != INFINITY && (best < 0 || imp[k] < imp[best]))
                    best = k;
            imp[best] = INFINITY;
            mask[best] = 0.0f;
            steps[removed + t] = (hs_prune_step){best, --left, 0.0, round};
        }
        removed += take;
    }
done:
    hs_grad_scratch_free(&e->grad);
    free(imp);
    free(g);
    free(mask);
    return st;
}
