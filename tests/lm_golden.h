/* Checks shared by the decoder suites (test_families_dec.c, test_families_norms.c): a golden
 * JSON's per-token NLL and loss against logits, an (L, G) grid of importances, and the
 * next-token loss's ablation and gradient importance against a golden "importance" object. */
#ifndef HEADSCOPE_LM_GOLDEN_H
#define HEADSCOPE_LM_GOLDEN_H

#include <cJSON.h>
#include <math.h>

#include "headscope/importance.h"
#include "headscope/model.h"
#include "testutil.h"

/* Every "nll" of j (n - 1 of them) from logits: (n, V) and ids, and their mean against
 * "loss", within tol. */
static inline void tu_expect_nll(const char *name, const float *logits, int V, const int32_t *ids,
                                 int n, const cJSON *j, double tol)
{
    const cJSON *nll = cJSON_GetObjectItem(j, "nll");
    double loss = 0;
    cr_assert_eq(cJSON_GetArraySize(nll), n - 1);
    for (int i = 0; i + 1 < n; i++) {
        double v = tu_nll(logits + (size_t)i * (size_t)V, V, ids[i + 1]);
        double w = cJSON_GetArrayItem(nll, i)->valuedouble;
        cr_expect(fabs(v - w) <= tol, "%s: nll[%d] %.8f vs %.8f", name, i, v, w);
        loss += v;
    }
    loss /= n - 1;
    double want = cJSON_GetObjectItem(j, "loss")->valuedouble;
    cr_expect(fabs(loss - want) <= tol, "%s: loss %.8f vs %.8f", name, loss, want);
}

/* got: (L, G) against the JSON grid, |got - want| <= abs_tol + rel_tol |want|. */
static inline void tu_expect_grid(const char *name, const char *what, const double *got,
                                  const cJSON *grid, int L, int G, double abs_tol, double rel_tol)
{
    cr_assert(cJSON_IsArray(grid), "%s: no %s reference", name, what);
    cr_assert_eq(cJSON_GetArraySize(grid), L);
    for (int l = 0; l < L; l++) {
        const cJSON *row = cJSON_GetArrayItem(grid, l);
        cr_assert_eq(cJSON_GetArraySize(row), G);
        for (int g = 0; g < G; g++) {
            double w = cJSON_GetArrayItem(row, g)->valuedouble, v = got[l * G + g];
            cr_expect(fabs(v - w) <= abs_tol + rel_tol * fabs(w), "%s: %s %d.%d = %.8g, "
                      "reference %.8g", name, what, l, g, v, w);
        }
    }
}

/* The next-token loss of ids on m: the base loss and the ablation sweep (loss_tol) and the
 * gradient importance, raw and normalised (grad_abs, grad_rel), against imp's "base_loss",
 * "ablation", "gradient_raw" and "gradient". Returns the evaluator (free with
 * hs_loss_eval_free) and its base loss in *base for further checks. */
static inline hs_loss_eval *tu_expect_lm_importance(const char *name, const hs_model *m,
                                                    const int32_t *ids, int n, const cJSON *imp,
                                                    double loss_tol, double grad_abs,
                                                    double grad_rel, double *base)
{
    const hs_model_config *c = hs_model_config_of(m);
    int L = c->n_layer, H = c->n_head, LH = L * H;
    hs_loss_input in = {.ids = ids, .n = n, .kind = HS_LOSS_LM};
    hs_error err = {{0}};
    hs_loss_eval *ev;
    cr_assert(cJSON_IsObject(imp), "%s: no importance reference", name);
    cr_assert_eq(hs_loss_eval_new(m, &in, &ev, &err), HS_OK, "%s", err.msg);
    double *delta = malloc((size_t)LH * sizeof *delta);
    double *raw = malloc((size_t)LH * sizeof *raw), *norm = malloc((size_t)LH * sizeof *norm);
    cr_assert_eq(hs_loss_eval_run(ev, NULL, base, &err), HS_OK, "%s", err.msg);
    double want = cJSON_GetObjectItem(imp, "base_loss")->valuedouble;
    cr_expect(fabs(*base - want) <= loss_tol, "%s: base loss %.8f vs %.8f", name, *base, want);
    cr_assert_eq(hs_ablation_sweep(ev, *base, NULL, delta, NULL, NULL, &err), HS_OK, "%s", err.msg);
    tu_expect_grid(name, "ablation", delta, cJSON_GetObjectItem(imp, "ablation"), L, H, loss_tol,
                   0);
    cr_assert_eq(hs_gradient_importance(m, &in, raw, norm, &err), HS_OK, "%s: %s", name, err.msg);
    tu_expect_grid(name, "gradient (raw)", raw, cJSON_GetObjectItem(imp, "gradient_raw"), L, H,
                   grad_abs, grad_rel);
    tu_expect_grid(name, "gradient", norm, cJSON_GetObjectItem(imp, "gradient"), L, H, grad_abs,
                   grad_rel);
    free(raw);
    free(norm);
    free(delta);
    return ev;
}

#endif
