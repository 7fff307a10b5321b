/*
 * headscope/corpus.h — corpus mode: reading many texts, and statistics over them.
 *
 * Reading (one text per line, JSONL, a folder of .txt files, or stdin):
 *
 *     hs_corpus_reader *r = NULL;
 *     hs_corpus_open("texts.jsonl", HS_CORPUS_AUTO, &r, &err);
 *     hs_corpus_item it;
 *     int done = 0;
 *     while (hs_corpus_next(r, &it, &done, &err) == HS_OK && !done) {
 *         if (it.skip) {   // a bad record: say which and why, and go on
 *             printf("%ld: %s %s\n", it.line, hs_corpus_skip_name(it.skip), it.detail);
 *             continue;
 *         }
 *         fwrite(it.text, 1, it.len, stdout);  // it.pair: NULL when none; valid until next
 *     }
 *     hs_corpus_close(r);
 *
 * Streaming statistics (Welford), a 95% confidence interval of the mean, and the
 * aggregation of per-text analyses (hs_corpus_agg) without keeping any text's maps:
 *
 *     hs_stat s = {0};
 *     hs_stat_add(&s, x, 1.0);                      // for every value x, weight 1
 *     hs_summary sum;  hs_stat_summary(&s, &sum);   // mean, sd, ci_low, ci_high
 *
 * Shards of a run and checkpoints are partial aggregates (partial.json): the aggregate's
 * exact state, written and read back bit for bit, and merged with Chan et al.'s update:
 *
 *     hs_corpus_partial a, b;                   // two shards' partial.json, read back
 *     hs_corpus_partial_read("s1/partial.json", &a, &err);
 *     hs_corpus_partial_read("s2/partial.json", &b, &err);
 *     if (hs_corpus_partial_check(&a, &b, &err) == HS_OK &&   // same model, options, corpus
 *         hs_corpus_agg_merge(a.agg, b.agg, &err) == HS_OK &&
 *         hs_corpus_agg_finish(a.agg, HS_SIM_PEARSON, 0.5, &err) == HS_OK) {
 *         char *js = hs_corpus_report_json(a.agg, &a.info, NULL, 0, NULL, 0, 1);
 *         puts(js);  // the merged report (headscope merge also sums the shards' counts)
 *         free(js);
 *     }
 *     hs_corpus_partial_free(&a);
 *     hs_corpus_partial_free(&b);
 *
 * Every statistic is defined in docs/corpus.md; every report field in docs/report-schema.md.
 */
#ifndef HEADSCOPE_CORPUS_H
#define HEADSCOPE_CORPUS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "headscope/report.h"
#include "headscope/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- reading --------------------------------------------------------------------------- */

#define HS_CORPUS_MAX_LINE ((size_t)1 << 20)   /* bytes of one line or one .txt file */
#define HS_CORPUS_MAX_FILES 1000000             /* .txt files in a folder */

typedef enum hs_corpus_format {
    HS_CORPUS_AUTO = 0,  /* folder if PATH is a directory; else JSONL when the first
                            non-empty line starts with '{' (after blanks), else lines */
    HS_CORPUS_LINES = 1, /* one text per line */
    HS_CORPUS_JSONL = 2, /* {"text": ..., "text_pair": ...} per line */
    HS_CORPUS_DIR = 3    /* every *.txt file of a folder, sorted by name, one text each */
} hs_corpus_format;

/* Name used in reports: "auto", "lines", "jsonl", "folder". */
const char *hs_corpus_format_name(hs_corpus_format f);

/* Why a record was skipped. The names (hs_corpus_skip_name) are the report's keys. */
typedef enum hs_corpus_skip {
    HS_SKIP_NONE = 0,
    HS_SKIP_UTF8,      /* "invalid_utf8": the line (or the JSON text) is not valid UTF-8 */
    HS_SKIP_JSON,      /* "invalid_json": not a JSON object with a "text" string */
    HS_SKIP_LINE_LONG, /* "line_too_long": more than HS_CORPUS_MAX_LINE bytes */
    HS_SKIP_NO_TOKENS, /* "no_tokens": the tokenizer gives no tokens */
    HS_SKIP_TOO_LONG,  /* "too_long": more tokens than the limit, with skip-long */
    HS_SKIP_TOO_SHORT, /* "too_short": too few tokens for the loss (GPT-2: < 2) */
    HS_SKIP_PAIR,      /* "text_pair_unsupported": a text_pair for a model that takes one text */
    HS_SKIP_COUNT
} hs_corpus_skip;

const char *hs_corpus_skip_name(hs_corpus_skip s);

typedef struct hs_corpus_item {
    const char *text;   /* (len) bytes plus a NUL, owned by the reader until the next call */
    size_t len;
    const char *pair;   /* NULL when none */
    size_t pair_len;
    long line;          /* 1-based line number, or 1-based file number in a folder */
    const char *name;   /* the file name in a folder, else NULL */
    hs_corpus_skip skip;/* HS_SKIP_NONE, or why this record is bad (text is then NULL) */
    char detail[160];   /* for a bad record: what was wrong, e.g. "byte 17" */
} hs_corpus_item;

typedef struct hs_corpus_reader hs_corpus_reader;

/* Opens path ("-" = stdin) as a corpus of format fmt (HS_CORPUS_AUTO: see above).
 * Returns HS_E_IO when it cannot be opened, HS_E_INPUT for a folder without .txt files
 * or with more than HS_CORPUS_MAX_FILES. Free with hs_corpus_close. */
hs_status hs_corpus_open(const char *path, hs_corpus_format fmt, hs_corpus_reader **out,
                         hs_error *err);

/* As hs_corpus_open on an open stream (lines or JSONL; not closed by the reader). */
hs_status hs_corpus_open_stream(FILE *f, hs_corpus_format fmt, hs_corpus_reader **out,
                                hs_error *err);

/* The next record: *done = 1 at the end (item untouched). Empty and blank-only lines
 * (spaces, tabs, a CR before the newline) are skipped silently and counted
 * (hs_corpus_empty). A bad record comes back with item->skip set; the caller decides.
 * Returns HS_E_IO on a read error, HS_E_NOMEM. */
hs_status hs_corpus_next(hs_corpus_reader *r, hs_corpus_item *item, int *done, hs_error *err);

/* The format in use (decided at the first non-empty line for HS_CORPUS_AUTO; before
 * that, HS_CORPUS_AUTO). */
hs_corpus_format hs_corpus_reader_format(const hs_corpus_reader *r);

/* Empty or blank lines (or empty files) skipped so far. */
long hs_corpus_empty(const hs_corpus_reader *r);

/* Closes the reader (and the file it opened); accepts NULL. */
void hs_corpus_close(hs_corpus_reader *r);

/* Parses one record (no newline) as fmt (HS_CORPUS_LINES or HS_CORPUS_JSONL). On
 * HS_SKIP_NONE, *text and *pair (NULL when none) are malloc'd NUL-terminated copies the
 * caller frees; otherwise both are NULL and detail (cap bytes) says why. A JSONL record
 * is an object whose "text" is a string and whose "text_pair", when present and not null,
 * is a string; other keys are ignored. HS_SKIP_COUNT (never a skip reason) means out of
 * memory. */
hs_corpus_skip hs_corpus_parse(const char *rec, size_t len, hs_corpus_format fmt, char **text,
                               size_t *text_len, char **pair, size_t *pair_len, char *detail,
                               size_t cap);

/* Deterministic uniform sampling of k records out of a stream (reservoir sampling,
 * Algorithm R, with the splitmix64 generator of hs_probe_repeated seeded with seed):
 * for the i-th record (0-based), the slot in [0, k) it goes into, or -1 when it is not
 * (now) in the sample. k >= 1; *state starts at the seed. */
long hs_reservoir_slot(uint64_t *state, long i, long k);

/* ---- statistics -------------------------------------------------------------------------- */

/* A running count, mean and sum of squared deviations (Welford 1962), and a weighted mean
 * (West 1979). Start from {0}. */
typedef struct hs_stat {
    long n;
    double mean, m2;
    double wsum, wmean;
} hs_stat;

/* Adds x with weight w (>= 0; the weight only enters the weighted mean). NaN and
 * infinite x are ignored (not counted). */
void hs_stat_add(hs_stat *s, double x, double w);

/* Folds b into a as if b's values had been added to a (Chan, Golub & LeVeque 1979 for the
 * mean and M2; the weighted means combined by their weight sums). Equal to adding the
 * values one by one up to floating-point rounding. */
void hs_stat_merge(hs_stat *a, const hs_stat *b);

typedef struct hs_summary {
    long n;            /* values counted */
    double mean;       /* NaN when n = 0 */
    double sd;         /* sample standard deviation (n - 1 in the denominator); NaN n < 2 */
    double ci_low, ci_high; /* mean -/+ t_{0.975, n-1} sd / sqrt(n); NaN when n < 2 */
    double wmean;      /* weighted mean; NaN when the weights sum to 0 */
} hs_summary;

void hs_stat_summary(const hs_stat *s, hs_summary *out);

/* The 0.975 quantile of Student's t distribution with df degrees of freedom: a table of
 * 15 significant digits for df 1..30, a Cornish-Fisher expansion about the normal
 * quantile beyond (terms to 1/df^5; error below 1e-9 for df > 30). NaN for df < 1. */
double hs_t_quantile_975(long df);

/* ---- aggregation over texts ------------------------------------------------------------ */

/* Per-head quantities aggregated over texts, in this order (HS_CQ_* index q). */
enum {
    HS_CQ_ENTROPY = 0,  /* entropy_nats, weighted by the rows counted */
    HS_CQ_ENTROPY_NORM, /* entropy_norm */
    HS_CQ_MAX_WEIGHT,   /* max_weight, weighted by the rows counted */
    HS_CQ_PREV, HS_CQ_SELF, HS_CQ_FIRST, HS_CQ_SEP, HS_CQ_DUP, HS_CQ_IND, /* text scores */
    HS_CQ_GRAD_RAW,     /* gradient_raw */
    HS_CQ_GRAD,         /* gradient_importance (per-text layer-normalised) */
    HS_CQ_ABLATION,     /* ablation_delta */
    HS_CQ_COUNT
};

/* The JSON key of quantity q ("entropy_nats", ..., "previous_token", ...). */
const char *hs_corpus_quantity_name(int q);

/* Value of quantity q for head k of one analysis (NaN when not computed); the detector
 * scores on all attention, or without the sinks when exclude_sinks. */
double hs_corpus_quantity(const hs_head_result *h, int exclude_sinks, int q);

typedef struct hs_corpus_agg {
    int n_heads;        /* heads analysed, in the order of hs_analysis.head_index */
    int *head_index;    /* (n_heads) l*H + h */
    int n_head;         /* heads per layer of the model */
    hs_stat *stats;     /* (n_heads, HS_CQ_COUNT) */
    hs_stat loss;       /* per-text loss, weighted by its loss tokens */
    double *sim_sum;    /* (n_heads, n_heads) sum over texts of the per-text similarity */
    long n_sim;         /* texts added */
    long n_texts, tokens;
    int tokens_min, tokens_max;
    long truncated;
    /* what the report says besides the statistics: from the first analysis
       (hs_corpus_agg_new) or read from a partial (hs_corpus_partial_parse) */
    char *model_json;   /* the report's "model" object, JSON text (file digests included) */
    int family;         /* hs_family */
    int loss_kind;      /* hs_loss_kind */
    int exclude_sinks, ablation, gradient, sim_method; /* options; sim_method: hs_sim_method */
    int ablation_kind;  /* hs_ablation_kind of the ablation deltas (mean: over the corpus) */
    double label_thresholds[HS_LABEL_COUNT], sink_threshold, cluster_threshold;
    uint64_t probe_seed;
    int probe_len;
    int32_t *probe_ids;          /* (probe_len) */
    double *probe_dup, *probe_ind; /* (n_heads) the probe's duplicate-token and induction scores */
    /* filled by hs_corpus_agg_finish */
    double *importance; /* (n_heads) mean gradient_raw, divided by its layer's L2 norm */
    double *similarity; /* (n_heads, n_heads) sim_sum / n_sim */
    hs_linkage *linkage;
    int *labels;        /* (n_heads) flat clusters */
    int n_clusters;
} hs_corpus_agg;

/* An empty aggregate for the heads of a first analysis (its head_index and model). */
hs_status hs_corpus_agg_new(const hs_analysis *first, hs_corpus_agg **out, hs_error *err);

/* Folds one text's analysis into g (same model and heads). */
hs_status hs_corpus_agg_add(hs_corpus_agg *g, const hs_analysis *a, hs_error *err);

/* HS_OK when a and b were made with the same model (its "model" object, file digests
 * included), heads and analysis options; else HS_E_INPUT and a message naming the first
 * field that differs. */
hs_status hs_corpus_agg_check(const hs_corpus_agg *a, const hs_corpus_agg *b, hs_error *err);

/* Folds b's texts into a (hs_corpus_agg_check first): statistics by hs_stat_merge,
 * similarity sums, counts. */
hs_status hs_corpus_agg_merge(hs_corpus_agg *a, const hs_corpus_agg *b, hs_error *err);

/* Corpus importance, mean similarity, clustering at threshold (see docs/corpus.md);
 * method says how the similarity turns into a distance. Needs n_texts >= 1. */
hs_status hs_corpus_agg_finish(hs_corpus_agg *g, hs_sim_method method, double threshold,
                               hs_error *err);

void hs_corpus_agg_free(hs_corpus_agg *g);

/* One line of texts.jsonl (no newline) for text index (0-based) from source record line:
 * index, line, n_tokens, truncated, ids, type_ids (pairs only), loss and the per-head
 * values of every quantity. malloc'd; NULL when out of memory. */
char *hs_corpus_text_json(const hs_analysis *a, long index, long line);

/* What the corpus report says about where the texts came from. */
typedef struct hs_corpus_info {
    const char *path;
    hs_corpus_format format;
    long max_texts, sample;   /* 0 = none */
    uint64_t seed;
    int max_tokens, skip_long;
    long n_records;           /* non-empty records read */
    long n_empty;
    long skipped[HS_SKIP_COUNT];      /* bad records met while reading (every shard reads all) */
    long skipped_text[HS_SKIP_COUNT]; /* selected texts skipped by the tokenizer or a length
                                         limit (only the shard that owns the text counts it) */
    int ablation;
    double seconds;
    int shard, n_shards;      /* 1-based shard of n_shards; 1/1 is the whole corpus */
    long n_selected;          /* records selected (after --max-texts and --sample) */
    char digest[65];          /* SHA-256 of the selected records (docs/corpus.md), "" unknown */
} hs_corpus_info;

/* report.json of a corpus run (schema "headscope.report/3" with a "corpus" section; see
 * docs/report-schema.md) from the aggregate alone, after hs_corpus_agg_finish; argv: the
 * command line for "generator" (NULL = null). malloc'd; NULL when out of memory. */
char *hs_corpus_report_json(const hs_corpus_agg *g, const hs_corpus_info *info,
                            const char *const *argv, int argc, const char *const *files,
                            int n_files, int pretty);

/* ---- partial aggregates: sharding, merging, resuming ------------------------------------ */

#define HS_PARTIAL_SCHEMA "headscope.partial/1"

/* Where an unfinished run stopped (a checkpoint); position 0 = a finished run. */
typedef struct hs_corpus_checkpoint {
    long position;          /* selected records dealt with (analysed, skipped or another
                               shard's), in corpus order */
    long texts_bytes;       /* bytes of texts.jsonl written for them */
    char texts_tmp[256];    /* the name of texts.jsonl's temporary file in OUTDIR */
} hs_corpus_checkpoint;

/* partial.json (schema HS_PARTIAL_SCHEMA, docs/report-schema.md#partial): the aggregate's
 * whole state (exact: every double printed to round-trip), the source and shard, and a
 * checkpoint when cp is not NULL. malloc'd; NULL when out of memory. */
char *hs_corpus_partial_json(const hs_corpus_agg *g, const hs_corpus_info *info,
                             const hs_corpus_checkpoint *cp);

/* A partial read back: g (owned), info (info.path points into path), cp (position 0 when
 * the run was finished). */
typedef struct hs_corpus_partial {
    hs_corpus_agg *agg;
    hs_corpus_info info;
    char *path;
    hs_corpus_checkpoint cp;
} hs_corpus_partial;

/* Parses a partial (len bytes). HS_E_INPUT with a message naming the field when it is
 * not one (wrong schema, a missing or ill-typed field, counts that disagree). Free with
 * hs_corpus_partial_free. */
hs_status hs_corpus_partial_parse(const char *json, size_t len, hs_corpus_partial *out,
                                  hs_error *err);
void hs_corpus_partial_free(hs_corpus_partial *p);

/* hs_corpus_partial_parse on the file at path: HS_E_IO when it cannot be read; the
 * messages start with the quoted path. */
hs_status hs_corpus_partial_read(const char *path, hs_corpus_partial *out, hs_error *err);

/* HS_OK when two partials are shards of one run: hs_corpus_agg_check, the same source
 * settings, digest, counts of what was read, and number of shards. */
hs_status hs_corpus_partial_check(const hs_corpus_partial *a, const hs_corpus_partial *b,
                                  hs_error *err);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_CORPUS_H */
