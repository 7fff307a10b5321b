/* Input checks shared by the analysis functions, attention-sink positions, and heads' names. */
#include <math.h>
#include <stdio.h>

#include "headscope/analysis.h"
#include "analysis/analysis_internal.h"
#include "core/core.h"

hs_status hs_maps_check(const float *maps, int n_maps, int n, hs_error *err)
{
    if (n_maps < 1)
        return hs_fail(err, HS_E_ARG, "maps: n_maps is %d, expected >= 1", n_maps);
    if (n < 1)
        return hs_fail(err, HS_E_ARG, "maps: n is %d, expected >= 1", n);
    size_t per, total;
    if (hs_mul_size((size_t)n, (size_t)n, &per) || hs_mul_size(per, (size_t)n_maps, &total) ||
        hs_mul_size(total, sizeof(float), &total))
        return hs_fail(err, HS_E_ARG, "maps: %d maps of %d x %d overflow", n_maps, n, n);
    if (!maps)
        return hs_fail(err, HS_E_ARG, "maps: NULL buffer");
    size_t count = per * (size_t)n_maps;
    for (size_t k = 0; k < count; k++) {
        float v = maps[k];
        if (!(v >= 0.0f) || isinf(v)) {
            size_t m = k / per, r = k % per;
            return hs_fail(err, HS_E_VALUE,
                           "maps: entry (map %zu, row %zu, col %zu) is %g, expected a finite "
                           "probability >= 0",
                           m, r / (size_t)n, r % (size_t)n, (double)v);
        }
    }
    return HS_OK;
}

hs_status hs_sinks_mark(const int32_t *ids, int n, int32_t cls_id, int32_t sep_id,
                        unsigned char *sink, hs_error *err)
{
    if (n < 1)
        return hs_fail(err, HS_E_ARG, "sinks: n is %d, expected >= 1", n);
    if (!sink)
        return hs_fail(err, HS_E_ARG, "sinks: NULL output");
    if (!ids && (cls_id >= 0 || sep_id >= 0))
        return hs_fail(err, HS_E_ARG, "sinks: NULL ids with a [CLS]/[SEP] id to find");
    for (int i = 0; i < n; i++) {
        int s = i == 0;
        if (ids && ((cls_id >= 0 && ids[i] == cls_id) || (sep_id >= 0 && ids[i] == sep_id)))
            s = 1;
        sink[i] = (unsigned char)s;
    }
    return HS_OK;
}

const char *hs_head_label(int index, int n_head, char *buf, size_t cap)
{
    snprintf(buf, cap, "%d.%d", index / n_head, index % n_head);
    return buf;
}
