/* Pattern detectors (previous token, self, first token, [SEP], duplicate token,
 * induction) and the seeded repeated-token probe. */
#include <math.h>
#include <stdlib.h>

#include "headscope/analysis.h"
#include "internal.h"

/* Running mean of the rows that have a pattern cell. */
typedef struct mean_acc {
    double sum;
    int rows;
} mean_acc;

static double mean_of(mean_acc a) { return a.rows ? a.sum / a.rows : NAN; }

/* One map a: (n, n), ids: (n). */
static void detect_one(const float *a, int n, int causal, const int32_t *ids, int32_t sep_id,
                       const unsigned char *sink, hs_detect *out)
{
    mean_acc prev = {0, 0}, self = {0, 0}, first = {0, 0}, sep = {0, 0}, dup = {0, 0},
             ind = {0, 0};
    for (int i = 0; i < n; i++) {
        const float *row = a + (size_t)i * (size_t)n;
        int nk = causal ? i + 1 : n; /* keys 0..nk-1 are visible */

        /* Sink detectors: raw map, every row. */
        first.sum += (double)row[0];
        first.rows++;
        if (sep_id >= 0) {
            double s = 0;
            int has = 0;
            for (int j = 0; j < nk; j++)
                if (ids[j] == sep_id) {
                    s += (double)row[j];
                    has = 1;
                }
            if (has) {
                sep.sum += s;
                sep.rows++;
            }
        }

        /* Pattern detectors, optionally without sinks (rows renormalised). */
        if (sink && sink[i])
            continue;
        double scale = 1.0;
        if (sink) {
            double s = 0;
            for (int j = 0; j < nk; j++)
                if (!sink[j])
                    s += (double)row[j];
            if (!(s > 0))
                continue;
            scale = 1.0 / s;
        }
        if (i >= 1 && !(sink && sink[i - 1])) {
            prev.sum += (double)row[i - 1] * scale;
            prev.rows++;
        }
        self.sum += (double)row[i] * scale;
        self.rows++;

        double s = 0;
        int has = 0;
        for (int j = 0; j < i; j++)
            if (ids[j] == ids[i] && !(sink && sink[j])) {
                s += (double)row[j];
                has = 1;
            }
        if (has) {
            dup.sum += s * scale;
            dup.rows++;
        }

        s = 0;
        has = 0;
        for (int j = 1; j < nk; j++)
            if (j != i && j - 1 != i && ids[j - 1] == ids[i] && !(sink && sink[j])) {
                s += (double)row[j];
                has = 1;
            }
        if (has) {
            ind.sum += s * scale;
            ind.rows++;
        }
    }
    out->prev_token = mean_of(prev);
    out->self = mean_of(self);
    out->first_token = mean_of(first);
    out->sep = mean_of(sep);
    out->duplicate = mean_of(dup);
    out->induction = mean_of(ind);
}

hs_status hs_detect_compute(const float *maps, int n_maps, int n, int causal, const int32_t *ids,
                            int32_t sep_id, const unsigned char *sink, hs_detect *out,
                            hs_error *err)
{
    hs_status st = hs_maps_check(maps, n_maps, n, err);
    if (st) {
        hs_error_prefix(err, "detect");
        return st;
    }
    if (!ids)
        return hs_fail(err, HS_E_ARG, "detect: NULL ids");
    if (!out)
        return hs_fail(err, HS_E_ARG, "detect: NULL output");
    size_t per = (size_t)n * (size_t)n;
    for (int m = 0; m < n_maps; m++)
        detect_one(maps + (size_t)m * per, n, causal, ids, sep_id, sink, &out[m]);
    return HS_OK;
}

/* ---- probe ------------------------------------------------------------------------- */


#define PROBE_MAX_HALF (1 << 20)

hs_status hs_probe_repeated(uint64_t seed, int half_len, int32_t vocab_lo, int32_t vocab_hi,
                            int32_t *out, hs_error *err)
{
    if (half_len < 1 || half_len > PROBE_MAX_HALF)
        return hs_fail(err, HS_E_ARG, "probe: half_len is %d, expected 1..%d", half_len,
                       PROBE_MAX_HALF);
    if (vocab_lo < 0 || vocab_hi <= vocab_lo)
        return hs_fail(err, HS_E_ARG, "probe: id range [%ld, %ld) is empty or negative",
                       (long)vocab_lo, (long)vocab_hi);
    uint64_t range = (uint64_t)vocab_hi - (uint64_t)vocab_lo;
    if (range < (uint64_t)half_len)
        return hs_fail(err, HS_E_ARG,
                       "probe: id range [%ld, %ld) holds %llu ids, fewer than half_len %d",
                       (long)vocab_lo, (long)vocab_hi, (unsigned long long)range, half_len);
    if (!out)
        return hs_fail(err, HS_E_ARG, "probe: NULL output");

    /* Partial Fisher-Yates over the virtual array 0..range-1; the slots moved so far live
     * in an open-addressing table (at most half_len entries, load <= 1/2). */
    size_t cap = 16;
    while (cap < 2 * (size_t)half_len)
        cap *= 2;
    int64_t *key = malloc(cap * sizeof *key);
    uint32_t *val = malloc(cap * sizeof *val);
    if (!key || !val) {
        free(key);
        free(val);
        return hs_fail(err, HS_E_NOMEM, "probe: out of memory for %zu slots", cap);
    }
    for (size_t s = 0; s < cap; s++)
        key[s] = -1;
    uint64_t state = seed;
    for (int k = 0; k < half_len; k++) {
        uint64_t r = (uint64_t)k + hs_rand_below(&state, range - (uint64_t)k);
        /* value at slot r (slot k itself is never read again, so only r is written) */
        size_t sr = (size_t)((r * 0x9e3779b97f4a7c15ULL) >> 20) & (cap - 1);
        while (key[sr] >= 0 && (uint64_t)key[sr] != r)
            sr = (sr + 1) & (cap - 1);
        uint64_t vr = key[sr] >= 0 ? val[sr] : r;
        size_t sk = (size_t)(((uint64_t)k * 0x9e3779b97f4a7c15ULL) >> 20) & (cap - 1);
        while (key[sk] >= 0 && key[sk] != k)
            sk = (sk + 1) & (cap - 1);
        uint64_t vk = key[sk] >= 0 ? val[sk] : (uint64_t)k;
        key[sr] = (int64_t)r; /* slot r now holds what slot k held */
        val[sr] = (uint32_t)vk;
        out[k] = (int32_t)((uint64_t)vocab_lo + vr);
    }
    for (int k = 0; k < half_len; k++)
        out[half_len + k] = out[k];
    free(val);
    free(key);
    return HS_OK;
}
