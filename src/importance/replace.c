/* Mean and resample ablation (docs/metrics.md § Ablation): what an ablated head's output is
 * replaced by, taken from one run of the model; the forward pass puts it in place of the
 * head's P V (hs_forward_opts.head_replace), W_O being linear. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "headscope/activations.h"
#include "headscope/importance.h"

const char *hs_ablation_kind_name(hs_ablation_kind k)
{
    return k == HS_ABLATION_ZERO       ? "zero"
           : k == HS_ABLATION_MEAN     ? "mean"
           : k == HS_ABLATION_RESAMPLE ? "resample"
                                       : "?";
}

int hs_ablation_kind_parse(const char *s)
{
    for (int k = HS_ABLATION_ZERO; s && k <= HS_ABLATION_RESAMPLE; k++)
        if (!strcmp(s, hs_ablation_kind_name((hs_ablation_kind)k)))
            return k;
    return -1;
}

void hs_resample_ids(const int32_t *ids, const unsigned char *fixed, int n, uint64_t seed,
                     int32_t *out)
{
    memcpy(out, ids, (size_t)n * sizeof *out);
    int *free_pos = malloc((size_t)n * sizeof *free_pos), k = 0;
    if (!free_pos) /* no shuffle without memory: callers check nothing, the input stays */
        return;
    for (int i = 0; i < n; i++)
        if (!fixed || !fixed[i])
            free_pos[k++] = i;
    uint64_t s = seed;
    for (int i = k - 1; i > 0; i--) { /* Fisher-Yates over the free positions */
        int j = (int)hs_rand_below(&s, (uint64_t)i + 1);
        int32_t t = out[free_pos[i]];
        out[free_pos[i]] = out[free_pos[j]];
        out[free_pos[j]] = t;
    }
    free(free_pos);
}

hs_status hs_ablation_z_sum(const hs_model *m, const int32_t *ids, const int32_t *type_ids,
                            int n, double *sum, hs_error *err)
{
    hs_activations *a = NULL;
    hs_status st = hs_activations_run(m, ids, type_ids, n, HS_CAPTURE_Z, &a, err);
    if (st)
        return st;
    int d = a->n_head * a->d_head; /* the context's width */
    size_t nd = (size_t)n * (size_t)d;
    for (int l = 0; l < a->n_layer; l++) {
        const float *z = a->z + (size_t)l * nd;
        double *s = sum + (size_t)l * (size_t)d;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < d; k++)
                s[k] += z[(size_t)i * d + k];
    }
    hs_activations_free(a);
    return HS_OK;
}

void hs_ablation_means_fill(const hs_model_config *c, const float *means, int n, float *replace)
{
    int d = hs_model_attn_width(c);
    for (int l = 0; l < c->n_layer; l++)
        for (int i = 0; i < n; i++)
            memcpy(replace + ((size_t)l * (size_t)n + (size_t)i) * (size_t)d,
                   means + (size_t)l * (size_t)d, (size_t)d * sizeof *replace);
}

hs_status hs_ablation_replacement(const hs_model *m, hs_ablation_kind kind, const int32_t *ids,
                                  const int32_t *type_ids, int n, float *replace,
                                  hs_error *err)
{
    if (kind != HS_ABLATION_MEAN && kind != HS_ABLATION_RESAMPLE)
        return hs_fail(err, HS_E_ARG, "ablation replacement: kind '%s' replaces by nothing",
                       hs_ablation_kind_name(kind));
    const hs_model_config *c = hs_model_config_of(m);
    if (kind == HS_ABLATION_RESAMPLE) {
        hs_activations *a = NULL;
        hs_status st = hs_activations_run(m, ids, type_ids, n, HS_CAPTURE_Z, &a, err);
        if (st)
            return st;
        memcpy(replace, a->z, (size_t)a->n_layer * (size_t)n * (size_t)hs_model_attn_width(c) *
                                  sizeof *replace);
        hs_activations_free(a);
        return HS_OK;
    }
    size_t ld = (size_t)c->n_layer * (size_t)hs_model_attn_width(c);
    double *sum = calloc(ld, sizeof *sum);
    float *mean = malloc(ld * sizeof *mean);
    hs_status st = sum && mean ? hs_ablation_z_sum(m, ids, type_ids, n, sum, err)
                               : hs_fail(err, HS_E_NOMEM, "out of memory");
    if (!st) {
        for (size_t k = 0; k < ld; k++)
            mean[k] = (float)(sum[k] / n);
        hs_ablation_means_fill(c, mean, n, replace);
    }
    free(sum);
    free(mean);
    return st;
}
