/*
 * src/analysis/metrics.h — the table of per-head metrics (src/analysis/metrics.c) and the
 * head-type classifier (src/analysis/classify.c); private to the library.
 *
 * One row per head metric: its report key, display name, what it is measured on, its
 * default label threshold, whether corpus mode aggregates it, and how to read it from a
 * head's results. The report writer (its "metrics" list and the score objects), the
 * corpus quantities (HS_CQ_*), the label names and thresholds, and through report.json
 * the page and the Python package all read this table.
 *
 * Adding a detector (positional_offset is the example): write its map function
 * (hs_map_detector, below; hs_detect_row_scale gives the visible keys and sink handling)
 * in metrics.c and add one row with .detect and a free .slot (< HS_DETECT_EXTRA); its score
 * (and parameter) then appear in text_scores / probe_scores and in the report's "metrics"
 * list, and the page and the Python package show them. Then a test against a float64
 * reference and its line in docs/metrics.md. A head type needs a new hs_label_kind too
 * (and changes which label heads get: report-schema.md § Versioning).
 */
#ifndef HEADSCOPE_ANALYSIS_METRICS_H
#define HEADSCOPE_ANALYSIS_METRICS_H

#include "headscope/analysis.h"
#include "headscope/report.h"
#include "headscope/visibility.h"

/* What a metric is measured on. */
typedef enum hs_metric_on {
    HS_ON_TEXT = 0, /* the input text's maps */
    HS_ON_PROBE,    /* the seeded repeated-token probe's maps */
    HS_ON_LOSS      /* the loss: ablation and gradient importance */
} hs_metric_on;

/* Where the metric sits in a single-text report's head object. */
typedef enum hs_metric_group {
    HS_MG_HEAD = 0, /* a member of the head object itself (entropy_nats, ...) */
    HS_MG_SCORES,   /* a member of text_scores / probe_scores .all / .no_sinks; a head type
                       when it has a threshold (judged on .no_sinks) */
    HS_MG_SINK      /* a member of sinks: raw attention mass, a sink type at sink_threshold */
} hs_metric_group;

/* A detector the table computes on each map (hs_detect_compute), beside the fixed ones.
 * a: (n, n) one map; vis: the keys each row sees; seq: the tokens; sink: (n) or NULL.
 * With sink, rows and keys are treated as for the fixed pattern detectors
 * (hs_detect_row_scale). Writes the score and its parameter (NaN when it has none or the
 * score is undefined). */
typedef void (*hs_map_detector)(const float *a, int n, hs_visibility vis,
                                const hs_detect_seq *seq, const unsigned char *sink,
                                double *score, double *param);

/* Where a metric's value is read (hs_metric_get). */
typedef enum hs_metric_src {
    HS_SRC_ENTROPY = 0, /* a field of the pass's hs_entropy (none on the probe) */
    HS_SRC_DETECT,      /* a field of the pass's hs_detect */
    HS_SRC_HEAD,        /* a field of hs_head_result (loss-based values) */
    HS_SRC_TABLE        /* a table-computed detector: hs_detect.extra[slot] */
} hs_metric_src;

typedef struct hs_metric {
    const char *key;      /* report key ("previous_token") */
    const char *name;     /* display name ("prev. token") */
    const char *title;    /* one line: what it measures */
    hs_metric_on on;
    hs_metric_group group;
    int bert_only;        /* reported only for models with [SEP] (bidirectional encoders) */
    int label;            /* hs_label_kind (HS_MG_SCORES), hs_sink_kind (HS_MG_SINK), or -1 */
    double threshold;     /* default label threshold; NaN: not a head type */
    int corpus;           /* HS_CQ_* index when corpus mode aggregates it, else -1 */
    const char *path;     /* its field in a single-text report's head object, dotted */
    hs_metric_src src;    /* the getter: the double at byte offset off of the pass's */
    size_t off;           /* entropy or detector scores or of the head, or the slot */
    hs_map_detector detect; /* table-computed detector: hs_detect.extra[slot] */
    int slot;
    const char *param;    /* the detector's parameter, written as key_param, or NULL */
} hs_metric;

extern const hs_metric hs_metrics[];
extern const int hs_n_metrics;

/* The row of a label kind, a sink kind or a corpus quantity; NULL when none. */
const hs_metric *hs_metric_of_label(int kind);
const hs_metric *hs_metric_of_sink(int kind);
const hs_metric *hs_metric_of_quantity(int q);

/* The metric's value from a pass's scores d and entropy e (NULL for the probe) or from the
 * head h, by its src and off; NaN when undefined or when the source is NULL. */
double hs_metric_get(const hs_metric *m, const hs_detect *d, const hs_entropy *e,
                     const hs_head_result *h);
/* Its parameter from d (NaN when the metric has none). */
double hs_metric_param(const hs_metric *m, const hs_detect *d);

/* The table-computed detectors of one map into d->extra / d->extra_param. */
void hs_metrics_detect(const float *a, int n, hs_visibility vis, const hs_detect_seq *seq,
                       const unsigned char *sink, hs_detect *d);

/* Sink handling of pattern row i of map row `row` (n keys, those of vis visible): 0 when
 * the row is left out (a sink query, or non-sink mass below HS_SINK_MIN_MASS), else 1 and
 * *scale = 1 / non-sink mass (1 without sink). */
int hs_detect_row_scale(const float *row, int i, int n, hs_visibility vis,
                        const unsigned char *sink, double *scale);

/* Head types (src/analysis/classify.c): sets h->labels, h->sink_types and h->label from
 * the head's scores, thr: (HS_LABEL_COUNT) and sink_thr (bert: the first token is [CLS],
 * reported as cls). A pure function of the scores. */
void hs_head_classify(hs_head_result *h, const double *thr, double sink_thr, int bert);

/* Detector scores of a pass that did not run: every field NaN. */
hs_detect hs_detect_none(void);

#endif /* HEADSCOPE_ANALYSIS_METRICS_H */
