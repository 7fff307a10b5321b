/* headscope dump: the hook sites hs_activations_run does not keep (result, resid_post,
 * ln_final, logits), read through the hook callback (cli/dump_sites.c). */
#ifndef HEADSCOPE_DUMP_SITES_H
#define HEADSCOPE_DUMP_SITES_H

#include <stddef.h>

#include "headscope/hooks.h"
#include "headscope/model.h"

typedef struct dump_sites {
    float *x[HS_SITE_COUNT];        /* per site asked: (layers or 1, the site's shape) */
    size_t size[HS_SITE_COUNT];     /* floats of one layer's array */
    size_t shape[HS_SITE_COUNT][3]; /* its shape */
    int rank[HS_SITE_COUNT];
} dump_sites;

/* Runs m on ids keeping the sites of the mask sites. Prints the error (command cmd);
 * returns 0 or EXIT_FAIL. Free with dump_sites_free (also after a failure). */
int dump_sites_run(const char *cmd, const hs_model *m, const int32_t *ids,
                   const int32_t *type_ids, int n, unsigned sites, dump_sites *d);
void dump_sites_free(dump_sites *d);

#endif
