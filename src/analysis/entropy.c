/* Attention entropy per head: nats, bits, normalised entropy and mean row maximum. */
#include <math.h>

#include "analysis/vis.h"
#include "core/core.h"
#include "headscope/analysis.h"

/* One map: (n, n). */
static void entropy_one(const float *a, int n, hs_visibility vis, const unsigned char *sink,
                        hs_entropy *out)
{
    double sum_h = 0, sum_norm = 0, sum_max = 0;
    int rows = 0, norm_rows = 0;
    for (int i = 0; i < n; i++) {
        if (sink && sink[i])
            continue;
        const float *row = a + (size_t)i * (size_t)n;
        int lo = hs_vis_lo(vis, i), hi = hs_vis_hi(vis, i, n); /* visible keys lo..hi-1 */
        double scale = 1.0; /* 1 / non-sink mass when sinks are excluded */
        int keys = hi - lo;
        if (sink) {
            double s = 0;
            keys = 0;
            for (int j = lo; j < hi; j++)
                if (!sink[j]) {
                    s += (double)row[j];
                    keys++;
                }
            if (!(s >= HS_SINK_MIN_MASS))
                continue;
            scale = 1.0 / s;
        }
        double h = 0, mx = 0;
        for (int j = lo; j < hi; j++) {
            if (sink && sink[j])
                continue;
            double p = (double)row[j] * scale;
            if (p > 0)
                h -= p * log(p);
            if (p > mx)
                mx = p;
        }
        sum_h += h;
        sum_max += mx;
        rows++;
        if (keys > 1) {
            sum_norm += h / log((double)keys);
            norm_rows++;
        }
    }
    out->rows = rows;
    out->nats = rows ? sum_h / rows : NAN;
    out->bits = rows ? out->nats / log(2.0) : NAN;
    out->rowmax = rows ? sum_max / rows : NAN;
    out->norm = norm_rows ? sum_norm / norm_rows : NAN;
}

hs_status hs_entropy_compute(const float *maps, int n_maps, int n, hs_visibility vis,
                             const unsigned char *sink, hs_entropy *out, hs_error *err)
{
    hs_status st = hs_maps_check(maps, n_maps, n, err);
    if (st) {
        hs_error_prefix(err, "entropy");
        return st;
    }
    if ((st = hs_vis_args(&vis, 1, 1, "entropy", err)))
        return st;
    if (!out)
        return hs_fail(err, HS_E_ARG, "entropy: NULL output");
    size_t per = (size_t)n * (size_t)n;
    for (int m = 0; m < n_maps; m++)
        entropy_one(maps + (size_t)m * per, n, vis, sink, &out[m]);
    return HS_OK;
}
