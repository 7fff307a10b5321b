/* The backward's taps (hs_gradient_tapped, attribution patching's gradient) through the
 * normalised decoders' features: on tiny-gemma2 (attention and final softcaps, (1 + w)
 * pre- and post-sublayer norms, local layers) and tiny-gemma3 and tiny-olmo2 (query/key
 * norms), d metric / d (a site's value) against central differences of the metric with the
 * value nudged through a hook, at q (after the query norm and the turn), attn_out and mlp_out
 * (after the post-norms) and resid_pre. */
#include <math.h>

#include "headscope/forward.h"
#include "headscope/hooks.h"
#include "headscope/importance.h"
#include "importance/importance_internal.h"
#include "model/model_internal.h"
#include "testutil.h"

enum { N = 8, ANSWER = 7, WRONG = 11 };

static double logit_diff(void *user, float *lg, int V)
{
    (void)user;
    double v = (double)lg[ANSWER] - lg[WRONG];
    memset(lg, 0, (size_t)V * sizeof *lg);
    lg[ANSWER] = 1.0f;
    lg[WRONG] = -1.0f;
    return v;
}

typedef struct {
    int layer, ld;
    float *grad; /* (N, ld) at the layer asked for */
} tap_state;

static void on_grad(void *user, int layer, const float *act, const float *grad, int rows,
                    int cols, int ld)
{
    (void)act;
    tap_state *t = user;
    if (layer != t->layer)
        return;
    t->ld = cols;
    for (int i = 0; i < rows; i++)
        memcpy(t->grad + (size_t)i * (size_t)cols, grad + (size_t)i * (size_t)ld,
               (size_t)cols * sizeof *grad);
}

typedef struct {
    hs_site site;
    int layer, row, col;
    float add;
} nudge;

static int nudge_hook(void *user, const hs_hook_call *k)
{
    const nudge *u = user;
    if (k->site == u->site && k->layer == u->layer)
        k->x[(size_t)u->row * (size_t)k->ld + (size_t)u->col] += u->add;
    return 0;
}

static double metric_nudged(hs_model *m, const int32_t *ids, nudge *u, float *logits)
{
    const hs_model_config *c = hs_model_config_of(m);
    hs_error err = {{0}};
    hs_forward_opts o = {.logits = logits, .hook = nudge_hook, .hook_user = u,
                         .hook_sites = HS_SITE_BIT(u->site)};
    cr_assert_eq(hs_forward(m, ids, NULL, N, &o, NULL, &err), HS_OK, "%s", err.msg);
    const float *lg = logits + (size_t)(N - 1) * (size_t)c->vocab_size;
    return (double)lg[ANSWER] - lg[WRONG];
}

Test(taps_norms, match_central_differences)
{
    static const int32_t ids[N] = {5, 17, 3, 29, 42, 7, 8, 61};
    const char *models[] = {"fixtures/family-models/tiny-gemma2",
                            "fixtures/family-models/tiny-gemma3",
                            "fixtures/family-models/tiny-olmo2"};
    const hs_site sites[] = {HS_SITE_Q, HS_SITE_ATTN_OUT, HS_SITE_MLP_OUT, HS_SITE_RESID_PRE};
    for (int mi = 0; mi < 3; mi++) {
        hs_model *m = tu_load(models[mi]);
        const hs_model_config *c = hs_model_config_of(m);
        float *logits = malloc((size_t)N * (size_t)c->vocab_size * sizeof *logits);
        float *grad = malloc((size_t)N * (size_t)hs_qkv_width(c) * sizeof *grad);
        double *g = malloc((size_t)c->n_layer * (size_t)c->n_head * sizeof *g);
        for (int si = 0; si < 4; si++)
            for (int l = 0; l < c->n_layer; l++) {
                tap_state t = {.layer = l, .grad = grad};
                hs_grad_taps taps = {N - 1, (int)sites[si], logit_diff, on_grad, &t};
                hs_loss_input in = {.ids = ids, .n = N, .kind = HS_LOSS_LM};
                hs_error err = {{0}};
                double v;
                cr_assert_eq(hs_gradient_tapped(m, &in, &taps, NULL, g, &v, &err), HS_OK, "%s",
                             err.msg);
                for (int k = 0; k < 3; k++) { /* three entries of rows 2, 5, 7 */
                    int row = 2 + 3 * k - (k == 2), col = (7 * k + 3 * l + si) % t.ld;
                    nudge u = {sites[si], l, row, col, 1e-2f};
                    double up = metric_nudged(m, ids, &u, logits);
                    u.add = -1e-2f;
                    double down = metric_nudged(m, ids, &u, logits);
                    double fd = (up - down) / 2e-2, got = grad[(size_t)row * t.ld + col];
                    cr_expect(fabs(fd - got) <= 2e-4 + 2e-2 * fabs(fd),
                              "%s site %s layer %d (%d, %d): tap %.6g, difference %.6g",
                              models[mi], hs_site_get(sites[si])->key, l, row, col, got, fd);
                }
            }
        free(logits);
        free(grad);
        free(g);
        hs_model_free(m);
    }
}
