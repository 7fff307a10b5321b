/* headscope dump: hook sites copied out of one forward pass (cli/dump_sites.h). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dump_sites.h"
#include "headscope/forward.h"

typedef struct keep {
    dump_sites *d;
    int bad; /* a call whose size is not the site's shape */
} keep;

static int keep_site(void *user, const hs_hook_call *call)
{
    keep *k = user;
    dump_sites *d = k->d;
    if (call->copy || !d->x[call->site])
        return 0;
    if ((size_t)call->rows * (size_t)call->cols != d->size[call->site]) {
        k->bad = 1;
        return 1;
    }
    float *dst = d->x[call->site] + (size_t)(call->layer < 0 ? 0 : call->layer) *
                                        d->size[call->site];
    for (int r = 0; r < call->rows; r++)
        memcpy(dst + (size_t)r * (size_t)call->cols, call->x + (size_t)r * (size_t)call->ld,
               (size_t)call->cols * sizeof *dst);
    return 0;
}

int dump_sites_run(const char *cmd, const hs_model *m, const int32_t *ids,
                   const int32_t *type_ids, int n, unsigned sites, dump_sites *d)
{
    const hs_model_config *c = hs_model_config_of(m);
    memset(d, 0, sizeof *d);
    if ((sites & HS_SITE_BIT(HS_SITE_LOGITS)) && !c->has_lm_head) {
        cli_error(cmd, "'%s' has no language-model head: no logits", hs_model_path(m));
        return EXIT_FAIL;
    }
    for (int s = 0; s < HS_SITE_COUNT; s++) {
        if (!(sites & HS_SITE_BIT(s)))
            continue;
        int dims[3];
        d->rank[s] = hs_site_shape(c, (hs_site)s, n, dims);
        d->size[s] = 1;
        for (int i = 0; i < d->rank[s]; i++)
            d->size[s] *= (size_t)(d->shape[s][i] = (size_t)dims[i]);
        size_t layers = hs_site_get((hs_site)s)->per_layer ? (size_t)c->n_layer : 1;
        if (!(d->x[s] = malloc(layers * d->size[s] * sizeof(float)))) {
            cli_error(cmd, "out of memory");
            return EXIT_FAIL;
        }
    }
    keep k = {d, 0};
    hs_forward_opts o = {0};
    o.hook = keep_site;
    o.hook_user = &k;
    o.hook_sites = sites & ~HS_SITE_BIT(HS_SITE_LOGITS);
    o.logits = d->x[HS_SITE_LOGITS]; /* the pass writes them there itself */
    hs_error err = {{0}};
    if (hs_forward(m, ids, type_ids, n, &o, NULL, &err) != HS_OK) {
        cli_error(cmd, "%s", k.bad ? "a hook site's size is not its shape" : err.msg);
        return EXIT_FAIL;
    }
    return 0;
}

void dump_sites_free(dump_sites *d)
{
    for (int s = 0; s < HS_SITE_COUNT; s++)
        free(d->x[s]);
    memset(d, 0, sizeof *d);
}
