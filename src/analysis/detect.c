/* Pattern detectors (previous / next token, self, first token, [CLS], [SEP], punctuation,
 * other segment, duplicate token, induction), punctuation positions, and the seeded
 * repeated-token probe. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "analysis/vis.h"
#include "core/core.h"
#include "headscope/analysis.h"
#include "analysis/metrics.h"

/* Running mean of the rows that have a pattern cell. */
typedef struct mean_acc {
    double sum;
    int rows;
} mean_acc;

static double mean_of(mean_acc a) { return a.rows ? a.sum / a.rows : NAN; }

/* Adds row mass s to a when the row has a pattern cell. */
static void acc_add(mean_acc *a, double s, int has)
{
    if (has) {
        a->sum += s;
        a->rows++;
    }
}

/* One map a: (n, n). */
static void detect_one(const float *a, int n, hs_visibility vis, const hs_detect_seq *q,
                       const unsigned char *sink, hs_detect *out)
{
    const int32_t *ids = q->ids;
    mean_acc prev = {0, 0}, next = {0, 0}, self = {0, 0}, first = {0, 0}, cls = {0, 0},
             sep = {0, 0}, snk = {0, 0}, punct = {0, 0}, other = {0, 0}, dup = {0, 0},
             ind = {0, 0};
    for (int i = 0; i < n; i++) {
        const float *row = a + (size_t)i * (size_t)n;
        int lo = hs_vis_lo(vis, i), hi = hs_vis_hi(vis, i, n); /* keys lo..hi-1 are visible */

        /* Sink detectors: raw map, every row that sees such a key. */
        if (lo == 0) {
            first.sum += (double)row[0];
            first.rows++;
        }
        double sc = 0, ss = 0, sk = 0;
        int hc = 0, hs = 0, hk = 0;
        for (int j = lo; j < hi; j++) {
            if (q->cls_id >= 0 && ids[j] == q->cls_id) {
                sc += (double)row[j];
                hc = 1;
            }
            if (q->sep_id >= 0 && ids[j] == q->sep_id) {
                ss += (double)row[j];
                hs = 1;
            }
            if (sink && sink[j]) {
                sk += (double)row[j];
                hk = 1;
            }
        }
        acc_add(&cls, sc, hc);
        acc_add(&sep, ss, hs);
        acc_add(&snk, sk, hk);

        /* Pattern detectors, optionally without sinks (rows renormalised). */
        if (sink && sink[i])
            continue;
        double scale = 1.0;
        if (sink) {
            double s = 0;
            for (int j = lo; j < hi; j++)
                if (!sink[j])
                    s += (double)row[j];
            if (!(s >= HS_SINK_MIN_MASS))
                continue;
            scale = 1.0 / s;
        }
#define KEEP(j) (!(sink && sink[j]))
        if (i >= 1 && lo <= i - 1 && KEEP(i - 1)) {
            prev.sum += (double)row[i - 1] * scale;
            prev.rows++;
        }
        if (i + 1 < hi && KEEP(i + 1)) {
            next.sum += (double)row[i + 1] * scale;
            next.rows++;
        }
        self.sum += (double)row[i] * scale;
        self.rows++;

        double sd = 0, si = 0, sp = 0, so = 0;
        int hd = 0, hn = 0, hp = 0, ho = 0;
        for (int j = lo; j < hi; j++) {
            if (!KEEP(j))
                continue;
            double v = (double)row[j];
            if (j < i && ids[j] == ids[i]) {
                sd += v;
                hd = 1;
            }
            if (j >= 1 && j != i && j - 1 != i && ids[j - 1] == ids[i]) {
                si += v;
                hn = 1;
            }
            if (q->punct && q->punct[j]) {
                sp += v;
                hp = 1;
            }
            if (q->type_ids && q->type_ids[j] != q->type_ids[i]) {
                so += v;
                ho = 1;
            }
        }
#undef KEEP
        acc_add(&dup, sd * scale, hd);
        acc_add(&ind, si * scale, hn);
        acc_add(&punct, sp * scale, hp);
        acc_add(&other, so * scale, ho);
    }
    out->prev_token = mean_of(prev);
    out->self = mean_of(self);
    out->first_token = mean_of(first);
    out->sep = mean_of(sep);
    out->duplicate = mean_of(dup);
    out->induction = mean_of(ind);
    out->next_token = mean_of(next);
    out->cls = mean_of(cls);
    out->punct = mean_of(punct);
    out->other_segment = mean_of(other);
    out->sink = mean_of(snk);
}

hs_status hs_detect_compute(const float *maps, int n_maps, int n, hs_visibility vis,
                            const hs_detect_seq *seq, const unsigned char *sink, hs_detect *out,
                            hs_error *err)
{
    hs_status st = hs_maps_check(maps, n_maps, n, err);
    if (st) {
        hs_error_prefix(err, "detect");
        return st;
    }
    if ((st = hs_vis_args(&vis, 1, 1, "detect", err)))
        return st;
    if (!seq || !seq->ids)
        return hs_fail(err, HS_E_ARG, "detect: NULL ids");
    if (!out)
        return hs_fail(err, HS_E_ARG, "detect: NULL output");
    size_t per = (size_t)n * (size_t)n;
    for (int m = 0; m < n_maps; m++) {
        detect_one(maps + (size_t)m * per, n, vis, seq, sink, &out[m]);
        /* and the metric table's own detectors (src/analysis/metrics.c) */
        hs_metrics_detect(maps + (size_t)m * per, n, vis, seq, sink, &out[m]);
    }
    return HS_OK;
}

int hs_token_is_punct(const char *s)
{
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
    int punct = 0;
    if (!s)
        return 0;
    while (*p) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p, -1, &cp);
        if (k <= 0)
            return 0;
        p += k;
        utf8proc_category_t c = utf8proc_category(cp);
        if (c == UTF8PROC_CATEGORY_ZS || cp == '\t' || cp == '\n' || cp == '\r')
            continue; /* GPT-2's " ," : the space belongs to the token */
        if (c < UTF8PROC_CATEGORY_PC || c > UTF8PROC_CATEGORY_PO)
            return 0;
        punct = 1;
    }
    return punct;
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
