/*
 * src/io/io_internal.h — what the report writers of src/io/ share between their files and
 * with the CLI: report.json's pieces (the files array, head types, header, model, clusters,
 * KV groups), JSON values and large arrays written without a node per number, the corpus
 * aggregate's allocation; private to the library.
 */
#ifndef HEADSCOPE_IO_INTERNAL_H
#define HEADSCOPE_IO_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "headscope/status.h"

/* The top-level "files" array of a report.json (text of len bytes, or the file at path),
 * found by a scan that keeps only the array's own text (src/io/report_files.c); NULL when
 * there is none (absent, null, not an array, unreadable, out of memory). A key written
 * with escapes is not taken for "files". */
struct cJSON;
struct cJSON *hs_report_files_text(const char *text, size_t len);
struct cJSON *hs_report_files_read(const char *path);
/* Report pieces shared by report_json.c and corpus_report.c (src/io), and the report's
 * "schema", "generator" and "model" members added to r from an analysis. */
struct hs_head_result;
struct hs_analysis;
struct hs_analyze_opts;
struct cJSON;
/* Head metrics in a report (src/io/head_labels.c): the head's "label", "labels", "sinks",
 * "text_scores" and "probe_scores" members; the options' "label_thresholds" and
 * "sink_threshold"; the report's "metrics" list (the metric table's rows the model reports,
 * with thresholds thr: (HS_LABEL_COUNT) and sink_thr; corpus: the corpus report's rows and
 * paths). The classifier is src/analysis/classify.c's hs_head_classify. */
void hs_report_add_metrics(struct cJSON *r, const double *thr, double sink_thr,
                           int exclude_sinks, int bert, int corpus);
/* The head's per-head values of the metric table (entropy_nats, ..., gradient_raw) as
 * members of its object o. */
void hs_report_head_values(struct cJSON *o, const struct hs_head_result *h);
void hs_report_head_types(struct cJSON *o, const struct hs_head_result *h,
                          const struct hs_analyze_opts *opts, int bert);
void hs_report_label_options(struct cJSON *op, const struct hs_analyze_opts *o);
void hs_report_add_header(struct cJSON *r, const struct hs_analysis *a);
/* The "schema" and "generator" members (argv: the command line, NULL = null), and the
 * "model" object of an analysis (file digests included when it has them). */
void hs_report_add_generator(struct cJSON *r, const char *const *argv, int argc);
struct cJSON *hs_report_model_json(const struct hs_analysis *a);
/* An encoder-decoder's report (hs_analysis.encdec, report_encdec.c): hs_report_json's text,
 * no large arrays; NULL when out of memory. */
/* hs_pictures_write of an encoder-decoder's analysis (pictures_encdec.c): each head's
 * heatmap, heads/{enc,dec,cross}_L{l}_H{h}.png. */
hs_status hs_pictures_encdec_write(const struct hs_analysis *a, const char *outdir,
                                   int max_labels, char ***files, int *n_files, hs_error *err);
char *hs_report_encdec_text(const struct hs_analysis *a, const char *const *files, int n_files,
                            int flags);
/* An empty corpus aggregate for nh heads and a probe of probe_len tokens, with no model
 * description yet (src/io/corpus_report.c; hs_corpus_agg_new fills one from an analysis,
 * hs_corpus_partial_parse from a file). */
struct hs_corpus_agg;
hs_status hs_corpus_agg_alloc(int nh, int probe_len, struct hs_corpus_agg **out, hs_error *err);
/* JSON values (src/io/report_shared.c): a number (null for NaN/Inf), an int array, a string
 * array, a row-major (rows, cols) matrix. */
struct cJSON *hs_json_num(double v);
struct cJSON *hs_json_ints(const int32_t *v, int n);
struct cJSON *hs_json_strs(const char *const *v, int n);
struct cJSON *hs_json_matrix(const double *m, int rows, int cols);
/* Large arrays of numbers in a report without a cJSON node per number (src/io/json_big.c):
 * hs_json_big_matrix(_f) and _vector return a raw node standing for the array (rows, cols)
 * or (n) (not copied: it must outlive the writing); print the tree as usual, then write
 * the text with hs_json_big_write (a stream) or hs_json_big_string (a malloc'd string, or
 * NULL), which put each array in its node's place as cJSON would have printed it (pretty:
 * ", " between numbers). */
typedef struct hs_json_big hs_json_big;
typedef hs_status (*hs_json_sink)(void *ctx, const char *s, size_t len, hs_error *err);
hs_json_big *hs_json_big_new(void);
void hs_json_big_free(hs_json_big *b);
struct cJSON *hs_json_big_matrix(hs_json_big *b, const double *m, int rows, int cols);
struct cJSON *hs_json_big_matrix_f(hs_json_big *b, const float *m, int rows, int cols);
struct cJSON *hs_json_big_vector(hs_json_big *b, const double *v, int n);
hs_status hs_json_big_emit(const char *text, const hs_json_big *b, int pretty, hs_json_sink sink,
                           void *ctx, hs_error *err);
hs_status hs_json_big_write(const char *text, const hs_json_big *b, int pretty, FILE *f,
                            hs_error *err);
char *hs_json_big_string(const char *text, const hs_json_big *b, int pretty);
/* The "clusters" member of parent: linkage (NULL with a single head), flat labels. */
struct hs_linkage;
void hs_report_add_clusters(struct cJSON *parent, const struct hs_linkage *lk, const int *labels,
                            int n_heads, int n_clusters, int sim, double threshold);
/* The "kv_groups" member of parent for a grouped-query model: the groups, their similarity
 * ks (hs_kv_similarity_compute, with method) and ablation: (n_layer, n_kv_head) or NULL
 * (then "ablation_delta" is null, or left out when omit_ablation). */
struct hs_kv_similarity;
void hs_report_add_kv_groups(struct cJSON *parent, const struct hs_kv_similarity *ks, int method,
                             const double *ablation, int omit_ablation);


/* The most JSON values a partial.json (headscope.partial/1) may hold for the model it
 * names (aggregate.model's n_layer x n_head heads, n_ctx probe tokens), found by a scan
 * that allocates nothing (src/io/partial_bounds.c); 65,536 when it names none. */
size_t hs_corpus_partial_max_values(const char *json, size_t len);

/* A shard's texts.jsonl read line by line (src/io/corpus_texts.c): set f, name (for the
 * messages) and n_texts (its partial's); hs_texts_next reads the next line into buf and its
 * source line number into line, counting lines in count (eof = 1 at the end; HS_E_INPUT for
 * a line that does not start {"index":I,"line":L, has no newline or a NUL byte, or whose
 * source line is not after the line before's; HS_E_IO when f fails). hs_texts_merge writes
 * the lines of the n readers parts[i], each with its first line read, into out in order of
 * source line, renumbered from 0 (HS_E_INPUT for a source line in two of them), then checks
 * that each held n_texts lines. */
typedef struct hs_texts_reader {
    FILE *f;
    const char *name;
    long n_texts;
    char *buf;          /* the current line (malloc'd: free it) */
    size_t cap;
    long line, count;
    int eof;
} hs_texts_reader;
hs_status hs_texts_next(hs_texts_reader *t, hs_error *err);
hs_status hs_texts_merge(hs_texts_reader *const *parts, int n, FILE *out, hs_error *err);
/* Whether a checkpoint p (read from path) agrees with its texts.jsonl's lines (-1: it ends
 * inside a line, as hs_out_resume says) and its aggregate's n_texts: HS_OK, or HS_E_INPUT
 * and a line naming the disagreement. */
struct hs_corpus_partial;
hs_status hs_corpus_resume_agree(const struct hs_corpus_partial *p, long n_texts,
                                 const char *path, long lines, hs_error *err);

#endif /* HEADSCOPE_IO_INTERNAL_H */
