/* The table of per-head metrics: one row per metric (key, display name, what it is
 * measured on, default label threshold, corpus aggregation, getter). Everything that
 * lists metrics reads it: src/analysis/metrics.h says how. docs/metrics.md defines each. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "analysis/metrics.h"
#include "headscope/corpus.h"

/* ---- table-computed detectors ---------------------------------------------------------- */

#define OFFSET_MAX 8 /* positional_offset tries k = -1, +1, -2, +2, ..., -8, +8 */

/* Positional offset (Clark et al. 2019, §3): for each k, the mean over the rows i whose key
 * i + k exists, is visible and is not a sink of (the row's renormalised) a[i][i + k]; the
 * score is the largest of these means, the parameter its k (ties: the smaller |k|, then
 * the negative one). docs/metrics.md § Detectors. */
static void detect_offset(const float *a, int n, hs_visibility vis, const hs_detect_seq *seq,
                          const unsigned char *sink, double *score, double *param)
{
    (void)seq;
    double sum[2 * OFFSET_MAX] = {0};
    int rows[2 * OFFSET_MAX] = {0};
    for (int i = 0; i < n; i++) {
        const float *row = a + (size_t)i * (size_t)n;
        double scale;
        if (!hs_detect_row_scale(row, i, n, vis, sink, &scale))
            continue;
        for (int s = 0; s < 2 * OFFSET_MAX; s++) {
            int j = i + (s % 2 ? s / 2 + 1 : -(s / 2 + 1));
            if (j < 0 || j >= n || !hs_vis_sees(vis, i, j, n) || (sink && sink[j]))
                continue;
            sum[s] += (double)row[j] * scale;
            rows[s]++;
        }
    }
    *score = *param = NAN;
    for (int s = 0; s < 2 * OFFSET_MAX; s++)
        if (rows[s] && (isnan(*score) || sum[s] / rows[s] > *score)) {
            *score = sum[s] / rows[s];
            *param = s % 2 ? s / 2 + 1 : -(s / 2 + 1);
        }
}

/* ---- the table ---------------------------------------------------------------------- */

/* Row fields in order: key, name, title, on, group, bert_only, label, threshold, corpus,
 * path, where the value is (src, off), then for a table-computed detector detect, slot,
 * param. */
#define ENT(field) HS_SRC_ENTROPY, offsetof(hs_entropy, field)
#define DET(field) HS_SRC_DETECT, offsetof(hs_detect, field)
#define HEAD(field) HS_SRC_HEAD, offsetof(hs_head_result, field)
#define TABLE HS_SRC_TABLE, 0
const hs_metric hs_metrics[] = {
    {"entropy_nats", "entropy", "mean row entropy, nats", HS_ON_TEXT, HS_MG_HEAD, 0, -1, NAN,
     HS_CQ_ENTROPY, "entropy_nats",
     ENT(nats), NULL, 0, NULL},
    {"entropy_bits", "entropy (bits)", "mean row entropy, bits", HS_ON_TEXT, HS_MG_HEAD, 0, -1,
     NAN, -1, "entropy_bits",
     ENT(bits), NULL, 0, NULL},
    {"entropy_norm", "entropy norm.", "entropy over its maximum (0..1)", HS_ON_TEXT,
     HS_MG_HEAD, 0, -1, NAN, HS_CQ_ENTROPY_NORM, "entropy_norm",
     ENT(norm), NULL, 0, NULL},
    {"max_weight", "max weight", "mean over rows of the largest weight (0..1)", HS_ON_TEXT,
     HS_MG_HEAD, 0, -1, NAN, HS_CQ_MAX_WEIGHT, "max_weight_mean",
     ENT(rowmax), NULL, 0, NULL},
    {"previous_token", "prev. token", "attention on the previous token", HS_ON_TEXT,
     HS_MG_SCORES, 0, HS_LABEL_PREV, 0.3, HS_CQ_PREV, "text_scores.no_sinks.previous_token",
     DET(prev_token), NULL, 0, NULL},
    {"next_token", "next token", "attention on the next token", HS_ON_TEXT, HS_MG_SCORES, 1,
     HS_LABEL_NEXT, 0.3, -1, "text_scores.no_sinks.next_token",
     DET(next_token), NULL, 0, NULL},
    {"self", "self", "attention on the query's own position", HS_ON_TEXT, HS_MG_SCORES, 0,
     HS_LABEL_SELF, 0.4, HS_CQ_SELF, "text_scores.no_sinks.self",
     DET(self), NULL, 0, NULL},
    {"broad", "broad", "entropy over its maximum, without sinks (Clark et al.'s broad heads)",
     HS_ON_TEXT, HS_MG_SCORES, 0, HS_LABEL_BROAD, 0.9, -1, "text_scores.no_sinks.broad",
     ENT(norm), NULL, 0, NULL},
    {"other_segment", "other segment", "attention on the other segment of a sentence pair",
     HS_ON_TEXT, HS_MG_SCORES, 1, HS_LABEL_OTHER_SEG, 0.5, -1, "text_scores.no_sinks.other_segment",
     DET(other_segment), NULL, 0, NULL},
    {"first_token", "first token", "raw attention on the first token", HS_ON_TEXT, HS_MG_SINK,
     0, HS_SINK_FIRST, 0.5, HS_CQ_FIRST, "sinks.first_token",
     DET(first_token), NULL, 0, NULL},
    {"cls", "cls", "raw attention on [CLS]", HS_ON_TEXT, HS_MG_SINK, 1, HS_SINK_CLS, 0.5, -1, "sinks.cls",
     DET(cls), NULL, 0, NULL},
    {"sep", "[SEP]", "raw attention on [SEP]", HS_ON_TEXT, HS_MG_SINK, 1, HS_SINK_SEP, 0.5,
     HS_CQ_SEP, "sinks.sep",
     DET(sep), NULL, 0, NULL},
    {"punctuation", "punctuation", "raw attention on punctuation", HS_ON_TEXT, HS_MG_SINK, 0,
     HS_SINK_PUNCT, 0.5, -1, "sinks.punctuation",
     DET(punct), NULL, 0, NULL},
    {"duplicate_token", "duplicate", "attention on earlier copies of the query's token",
     HS_ON_PROBE, HS_MG_SCORES, 0, HS_LABEL_DUP, 0.3, HS_CQ_DUP, "probe_scores.no_sinks.duplicate_token",
     DET(duplicate), NULL, 0, NULL},
    {"induction", "induction", "attention on the token after an earlier copy of the query's",
     HS_ON_PROBE, HS_MG_SCORES, 0, HS_LABEL_IND, 0.3, HS_CQ_IND, "probe_scores.no_sinks.induction",
     DET(induction), NULL, 0, NULL},
    {"positional_offset", "offset",
     "attention on the fixed relative position k the head favours most (|k| <= 8)",
     HS_ON_TEXT, HS_MG_SCORES, 0, -1, NAN, -1, "text_scores.no_sinks.positional_offset",
     TABLE, detect_offset, 0, "k"},
    {"ablation_delta", "ablation \u0394",
     "loss increase when the head is ablated (negative: the loss falls)", HS_ON_LOSS,
     HS_MG_HEAD, 0, -1, NAN, HS_CQ_ABLATION, "ablation_delta",
     HEAD(ablation_delta), NULL, 0, NULL},
    {"gradient_importance", "gradient",
     "|dL/d\u03be| at \u03be = 1, normalised per layer (Michel et al. 2019)", HS_ON_LOSS,
     HS_MG_HEAD, 0, -1, NAN, HS_CQ_GRAD, "gradient_importance",
     HEAD(gradient), NULL, 0, NULL},
    {"gradient_raw", "gradient (raw)", "|dL/d\u03be| at \u03be = 1", HS_ON_LOSS, HS_MG_HEAD, 0,
     -1, NAN, HS_CQ_GRAD_RAW, "gradient_raw",
     HEAD(gradient_raw), NULL, 0, NULL},
    {"position_share", "position share",
     "share of each logit from the rotary (position) part rather than the latent (content) "
     "part, latent attention only", HS_ON_TEXT, HS_MG_HEAD, 0, -1, NAN, -1, "position_share",
     HEAD(position_share), NULL, 0, NULL},
};
#undef ENT
#undef DET
#undef HEAD
#undef TABLE
const int hs_n_metrics = (int)(sizeof hs_metrics / sizeof hs_metrics[0]);

/* ---- lookups ------------------------------------------------------------------------ */

static const hs_metric *find(hs_metric_group group, int label, int q)
{
    for (int i = 0; i < hs_n_metrics; i++) {
        const hs_metric *m = &hs_metrics[i];
        if (q >= 0 ? m->corpus == q : (m->group == group && m->label == label))
            return m;
    }
    return NULL;
}

const hs_metric *hs_metric_of_label(int kind)
{
    return kind >= 0 ? find(HS_MG_SCORES, kind, -1) : NULL;
}

const hs_metric *hs_metric_of_sink(int kind)
{
    return kind >= 0 ? find(HS_MG_SINK, kind, -1) : NULL;
}

const hs_metric *hs_metric_of_quantity(int q)
{
    return q >= 0 ? find(HS_MG_HEAD, -1, q) : NULL;
}

double hs_metric_get(const hs_metric *m, const hs_detect *d, const hs_entropy *e,
                     const hs_head_result *h)
{
    const void *from = m->src == HS_SRC_ENTROPY ? (const void *)e
                       : m->src == HS_SRC_DETECT ? (const void *)d
                       : m->src == HS_SRC_HEAD   ? (const void *)h
                                                 : NULL;
    if (m->src == HS_SRC_TABLE)
        return d && m->slot >= 0 && m->slot < HS_DETECT_EXTRA ? d->extra[m->slot] : NAN;
    if (!from)
        return NAN;
    double v;
    memcpy(&v, (const char *)from + m->off, sizeof v);
    return v;
}

double hs_metric_param(const hs_metric *m, const hs_detect *d)
{
    return m->param && d && m->slot >= 0 && m->slot < HS_DETECT_EXTRA ? d->extra_param[m->slot]
                                                                     : NAN;
}

void hs_metrics_detect(const float *a, int n, hs_visibility vis, const hs_detect_seq *seq,
                       const unsigned char *sink, hs_detect *d)
{
    for (int s = 0; s < HS_DETECT_EXTRA; s++)
        d->extra[s] = d->extra_param[s] = NAN;
    for (int i = 0; i < hs_n_metrics; i++) {
        const hs_metric *m = &hs_metrics[i];
        if (m->detect && m->slot >= 0 && m->slot < HS_DETECT_EXTRA)
            m->detect(a, n, vis, seq, sink, &d->extra[m->slot], &d->extra_param[m->slot]);
    }
}

/* The one place the table's detectors learn which keys row i sees and how sinks count. */
int hs_detect_row_scale(const float *row, int i, int n, hs_visibility vis,
                        const unsigned char *sink, double *scale)
{
    *scale = 1.0;
    if (!sink)
        return 1;
    if (sink[i])
        return 0;
    double s = 0;
    for (int j = hs_vis_lo(vis, i), hi = hs_vis_hi(vis, i, n); j < hi; j++)
        if (!sink[j])
            s += (double)row[j];
    if (!(s >= HS_SINK_MIN_MASS))
        return 0;
    *scale = 1.0 / s;
    return 1;
}

hs_detect hs_detect_none(void)
{
    hs_detect d;
    double *f[] = {&d.prev_token, &d.self,          &d.first_token, &d.sep,
                   &d.duplicate,  &d.induction,     &d.next_token,  &d.cls,
                   &d.punct,      &d.other_segment, &d.sink};
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++)
        *f[k] = NAN;
    for (int s = 0; s < HS_DETECT_EXTRA; s++)
        d.extra[s] = d.extra_param[s] = NAN;
    return d;
}
