/* Michel et al.'s pruning of an encoder-decoder's heads (T5), both kinds together: round
 * after round, the gradient importance |d loss / d xi| of the heads left at the current
 * masks (hs_encdec_gradient), and the least important of them turned off (importance.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "headscope/importance.h"

/* Head index k of the pruning order: kind * L * H + layer * H + head; the cross-attention
 * heads of the encoder's layers do not exist. */
static int head_exists(const hs_model_config *c, int k)
{
    int LH = c->n_layer * c->n_head;
    return k < LH || (k - LH) / c->n_head >= c->n_enc_layer;
}

hs_status hs_encdec_prune(const hs_model *m, const int32_t *src, int n_src,
                          const int32_t *target, int n_tgt, double round, int32_t *order,
                          double *loss, int *n_rounds, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    if (!c->n_enc_layer)
        return hs_fail(err, HS_E_ARG, "model '%s' is not an encoder-decoder", c->arch->name);
    if (!(round > 0 && round <= 1))
        return hs_fail(err, HS_E_ARG, "a pruning round of %g of the heads (expected (0, 1])",
                       round);
    int LH = c->n_layer * c->n_head, all = 2 * LH, n = 0, removed = 0, r = 0;
    for (int k = 0; k < all; k++)
        n += head_exists(c, k);
    int step = (int)ceil(round * n);
    float *mask = malloc((size_t)all * sizeof *mask);
    double *g = malloc((size_t)all * sizeof *g);
    hs_status st = mask && g ? HS_OK : hs_fail(err, HS_E_NOMEM, "out of memory");
    for (int k = 0; !st && k < all; k++)
        mask[k] = 1.0f;
    while (!st) {
        st = hs_encdec_gradient(m, src, n_src, target, n_tgt, mask, mask + LH, &loss[r], g,
                                g + LH, err);
        if (st || removed == n)
            break;
        for (int t = 0; t < step && removed < n; t++) { /* the least |g| left, lowest index */
            int best = -1;
            for (int k = 0; k < all; k++)
                if (head_exists(c, k) && mask[k] != 0.0f &&
                    (best < 0 || fabs(g[k]) < fabs(g[best])))
                    best = k;
            mask[best] = 0.0f;
            order[removed++] = best;
        }
        r++;
    }
    if (!st)
        *n_rounds = r;
    free(mask);
    free(g);
    return st;
}
