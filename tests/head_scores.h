/* Every head's scores that read the whole model, for suites that compare two ways of
 * holding the same weights (test code only). */
#ifndef HEADSCOPE_HEAD_SCORES_H
#define HEADSCOPE_HEAD_SCORES_H

#include "headscope/activations.h"
#include "testutil.h"

/* The language-model loss of ids (n), and (n_layer * n_head each, malloc'd) every head's
 * ablation delta, gradient importance and direct logit attribution; fails the test on an
 * error. */
static inline void tu_head_scores(const hs_model *m, const int32_t *ids, int n, double *loss,
                                  double **delta, double **grad, double **dla)
{
    const hs_model_config *c = hs_model_config_of(m);
    size_t heads = (size_t)c->n_layer * (size_t)c->n_head;
    hs_error err = {{0}};
    hs_loss_input in = {.ids = ids, .n = n, .kind = HS_LOSS_LM};
    hs_loss_eval *e = NULL;
    cr_assert_eq(hs_loss_eval_new(m, &in, &e, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_loss_eval_run(e, NULL, loss, &err), HS_OK, "%s", err.msg);
    *delta = malloc(heads * sizeof **delta);
    cr_assert_eq(hs_ablation_sweep(e, *loss, NULL, *delta, NULL, NULL, &err), HS_OK, "%s",
                 err.msg);
    hs_loss_eval_free(e);
    *grad = malloc(heads * sizeof **grad);
    cr_assert_eq(hs_gradient_importance(m, &in, *grad, NULL, &err), HS_OK, "%s", err.msg);
    hs_dla *d = NULL;
    cr_assert_eq(hs_dla_compute(m, ids, n, &d, &err), HS_OK, "%s", err.msg);
    *dla = malloc(heads * sizeof **dla);
    memcpy(*dla, d->total, heads * sizeof **dla);
    hs_dla_free(d);
}

#endif /* HEADSCOPE_HEAD_SCORES_H */
