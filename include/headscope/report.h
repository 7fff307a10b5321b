/*
 * headscope/report.h — the analysis pipeline behind `headscope analyze`, and its JSON report.
 *
 *     hs_analyze_opts o;  hs_analyze_opts_default(&o);
 *     hs_analyze_input in = {.ids = enc.ids, .type_ids = enc.type_ids, .n = enc.n,
 *                            .text = text};   // the tokens' strings from the model's tokenizer
 *     hs_analysis *a = NULL;
 *     if (hs_analyze_run(model, &in, &o, &a, &err) == HS_OK) {
 *         char *json = hs_report_json(a, NULL, 0, 1);   // "headscope.report/3"
 *         puts(json);
 *         free(json);
 *     }
 *     hs_analysis_free(a);
 *
 * Every number's definition is in docs/metrics.md; every JSON field in
 * docs/report-schema.md.
 */
#ifndef HEADSCOPE_REPORT_H
#define HEADSCOPE_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "headscope/activations.h"
#include "headscope/analysis.h"
#include "headscope/composition.h"
#include "headscope/version.h"
#include "headscope/forward.h"
#include "headscope/importance.h"
#include "headscope/model.h"
#include "headscope/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HS_REPORT_SCHEMA "headscope.report/3"

typedef enum hs_prune_method {
    HS_PRUNE_GRADIENT = 1, /* Michel et al. 2019: rounds by gradient importance (default) */
    HS_PRUNE_GREEDY = 2    /* lazy greedy on measured losses (hs_prune_curve) */
} hs_prune_method;

/* Head types (docs/metrics.md § Head types). Each has its own threshold; a head carries
 * every type whose score reaches it. The score of each type is measured on the attention
 * not parked on sinks (hs_detect_compute with the sink positions): */
typedef enum hs_label_kind {
    HS_LABEL_PREV = 0,   /* "previous_token": text, prev_token */
    HS_LABEL_NEXT,       /* "next_token": text, next_token (bidirectional models) */
    HS_LABEL_SELF,       /* "self": text, self */
    HS_LABEL_BROAD,      /* "broad": text, normalised entropy (Clark et al.'s broad heads) */
    HS_LABEL_OTHER_SEG,  /* "other_segment": text, other_segment (sentence pairs) */
    HS_LABEL_DUP,        /* "duplicate_token": probe, duplicate */
    HS_LABEL_IND,        /* "induction": probe, induction */
    HS_LABEL_COUNT
} hs_label_kind;

/* Sink types, reported beside the labels (raw attention mass on the sink positions). */
typedef enum hs_sink_kind {
    HS_SINK_FIRST = 0, /* "first_token": key 0 (GPT-2's first token; BERT's [CLS]) */
    HS_SINK_CLS,       /* "cls": keys holding [CLS] (BERT) */
    HS_SINK_SEP,       /* "sep": keys holding [SEP] (BERT) */
    HS_SINK_PUNCT,     /* "punctuation": punctuation keys (hs_token_is_punct) */
    HS_SINK_COUNT
} hs_sink_kind;

/* "previous_token", ... for an hs_label_kind, "first_token", ... for an hs_sink_kind;
 * "unknown" out of range. Static strings. */
const char *hs_label_name(int kind);
const char *hs_sink_name(int kind);

/* Fills thr: (HS_LABEL_COUNT) with the default thresholds (docs/metrics.md). */
void hs_label_thresholds_default(double *thr);

/* Parses "X" (every type) or "NAME=X[,NAME=X...]" (NAME a label name, or "sink" for the
 * sink threshold) into thr: (HS_LABEL_COUNT) and *sink_thr, leaving unnamed ones as they
 * are. Each X must be a number in [0, 1]. HS_E_ARG with a message naming the bad part. */
hs_status hs_label_thresholds_parse(const char *spec, double *thr, double *sink_thr,
                                    hs_error *err);

typedef struct hs_analyze_opts {
    const unsigned char *layers; /* (n_layer) 1 = analyse, NULL = all layers */
    int ablation;                /* run the ablation sweep and pruning curve (default 1) */
    int pruning;                 /* run the pruning curve (default 1; needs ablation) */
    int gradient;                /* gradient importance, Michel et al. (default 1; lm/mlm) */
    hs_sim_method similarity;    /* HS_SIM_PEARSON (default) or HS_SIM_JS */
    double cluster_threshold;    /* flat-cluster cut distance (default 0.5: 1 - r <= 0.5) */
    int exclude_sinks;           /* entropy (and the corpus's text scores) without sinks */
    int sink_punct;              /* punctuation positions are sinks too (default 0) */
    uint64_t probe_seed;         /* induction probe seed (default 1) */
    int probe_half_len;          /* tokens per half of the probe (default 32; capped by n_ctx) */
    double prune_tol;            /* candidate tolerance on |ablation delta| (default 0.01) */
    double prune_stop;           /* curve stops after the loss exceeds base*(1+prune_stop), or
                                    base + prune_stop for the repr loss (default 0.1) */
    hs_prune_method prune_method; /* default HS_PRUNE_GRADIENT; the repr loss always uses
                                     greedy (its gradient is zero with every head on) */
    double prune_round;          /* gradient method: heads removed per round, as a fraction of
                                    the selected heads, at least one (default 0.1) */
    int prune_beam;              /* lazy-greedy beam (default 8) */
    int prune_max_steps;         /* at most this many removals (default 64) */
    hs_ablation_kind ablation_kind; /* what an ablated head's output becomes in the sweep and
                                       the pruning curve (default HS_ABLATION_ZERO) */
    uint64_t resample_seed;      /* resample ablation: the shuffle's seed (default 1) */
    const float *ablation_means; /* mean ablation: (n_layer, d_model) every head's mean context
                                    (e.g. over a corpus, hs_ablation_means_add), not copied;
                                    NULL (default): the text's own means */
    hs_loss_span loss_span;      /* next-token loss: the positions whose losses the loss,
                                    gradient, ablation and pruning count (default all) */
    int probe_ablation;          /* the probe's per-head ablation cost on its second half
                                    (default 1; runs with ablation and probe, causal LMs) */
    hs_ablation_kind probe_ablation_kind; /* ... by this kind (default HS_ABLATION_MEAN) */
    double label_thresholds[HS_LABEL_COUNT]; /* a head has type k when its score >= [k]
                                                (hs_label_thresholds_default) */
    double sink_threshold;       /* a head has a sink type at mass >= this (default 0.5) */
    hs_progress_fn progress;     /* optional progress reports: each stage as it begins
                                    (done 0, total 0: its name, docs/analyze.md), then the
                                    counted steps of "forward" (layers), "composition",
                                    "ablation", "probe ablation" (heads) and "pruning" */
    void *progress_user;
    int hash_files;              /* record each model file's size and SHA-256 (default 1) */
    int probe;                   /* run the induction probe (default 1); 0: probe scores NaN */
    int diversity;               /* Frobenius diversity (default 1); 0: NaN (corpus mode) */
    int composition;             /* composition and copying scores from the weights (default
                                    1; pre-norm decoders, skipped for encoders) */
    int rollout;                 /* attention rollout over every layer (default 1) */
    double rollout_residual;     /* weight of the identity in each layer (default 0.5) */
    int flow_max_tokens;         /* attention flow when n <= this (default 64; 0: never) */
    int dla;                     /* direct logit attribution and the per-token loss (default
                                    1; decoders for which hs_dla_undefined is NULL) */
    int norm_based;              /* norm-based attention summaries per head (default 1) */
    int word_level;              /* word-level maps of every analysed head (default 0) */
    int keep_maps;               /* keep the text's maps for hs_analysis_map, the pictures and
                                    the page (default 1); 0: dropped at the end of the run */
    size_t maps_memory_max;      /* bytes of maps held in memory (default 16 MiB; 64 MB
                                    before 3.1.0); above it they go to an unlinked
                                    temporary file in maps_dir */
    const char *maps_dir;        /* that file's folder; NULL: $TMPDIR, else /tmp */
    const char *const *command_line; /* (command_line_argc) the command that ran, for the
                                        report; copied; NULL when none */
    int command_line_argc;
} hs_analyze_opts;

/* Fills o with the defaults above. */
void hs_analyze_opts_default(hs_analyze_opts *o);

typedef struct hs_analyze_input {
    const int32_t *ids;          /* (n) */
    const int32_t *type_ids;     /* (n) or NULL */
    int n;
    const char *const *tokens;   /* (n) raw vocabulary strings, or NULL: the model tokenizer's */
    const char *text;            /* for the report (may be NULL) */
    size_t text_len;             /* bytes of text (it may hold NULs); 0 = strlen(text) */
    const char *text_pair;       /* NULL when none */
    int truncated;               /* the text was truncated to the context */
} hs_analyze_input;

/* An encoder-decoder's (T5's) decoder target for hs_analyze_run_target: teacher forcing from
 * decoder_start_id; the loss is the target's next-token NLL. (A struct of its own, so that
 * hs_analyze_input keeps the layout of 3.0.0.) */
typedef struct hs_analyze_target {
    const int32_t *ids;          /* (n) */
    int n;
    const char *text;            /* the target's text for the report (may be NULL) */
} hs_analyze_target;

typedef struct hs_head_result {
    int layer, head;
    hs_entropy entropy;      /* on the text: entropy_free with opts.exclude_sinks, else
                                entropy_all */
    hs_entropy entropy_all;  /* on the text, every row and key */
    hs_entropy entropy_free; /* on the text, without sinks */
    hs_detect text_scores;   /* detectors on the input text, all attention */
    hs_detect text_free;     /* the same on the attention not parked on sinks */
    hs_detect probe_scores;  /* detectors on the induction probe, all attention */
    hs_detect probe_free;    /* the same on the attention not parked on sinks */
    unsigned labels;         /* bit 1u << k for every hs_label_kind k the head has */
    unsigned sink_types;     /* bit 1u << k for every hs_sink_kind k the head has */
    double ablation_delta;  /* NaN when not computed */
    double gradient;        /* |dL/d xi| divided by its layer's L2 norm; NaN when not computed */
    double gradient_raw;    /* |dL/d xi| at xi = 1 */
    /* Norm-based attention on the text (Kobayashi et al. 2020), N_ij = a_ij ||f(x_j)||,
     * f(x_j) = (x_j W_V + b_V) W_O; NaN when not computed (docs/metrics.md): */
    double norm_first_token; /* mean_i N_i0 / sum_j N_ij: the first token's share */
    double norm_mass;        /* mean_i sum_j N_ij */
    double value_norm;       /* mean_j ||f(x_j)|| */
    /* Latent attention (DeepSeek-V2): the mean over the text's visible cells of
     * |rotary part| / (|latent part| + |rotary part|) of the head's logits; NaN otherwise. */
    double position_share;
    int cluster;
    const char *label;      /* the primary label: of the types it has, the one whose score
                               is the largest multiple of its threshold, or "none" */
} hs_head_result;

typedef struct hs_analysis {
    const hs_model *model;
    hs_analyze_opts opts;
    /* input */
    int n;
    int32_t *ids, *type_ids;
    char **tokens;          /* (n) raw, owned */
    char **display;         /* (n) display forms, owned */
    char *text, *text_pair;
    int truncated;
    /* provenance */
    char **command_line;    /* (command_line_argc) owned copy, or NULL */
    int command_line_argc;
    hs_model_file *files;   /* (n_model_files) model files with sizes and digests, or NULL */
    int n_model_files;
    /* the heads analysed, layer-major; index k in every per-head array below */
    int n_heads;
    int *head_index;        /* (n_heads) l*H + h */
    struct hs_mapstore *maps; /* the text's maps of every layer, read with hs_analysis_map;
                                 NULL when opts.keep_maps is 0 */
    hs_head_result *heads;  /* (n_heads) */
    double *layer_diversity;/* (n_layer); NaN for layers not analysed */
    double *frobenius;      /* (n_heads, n_heads) */
    double *similarity;     /* (n_heads, n_heads) */
    hs_linkage *linkage;
    int *labels;            /* (n_heads) */
    int n_clusters;
    /* probe */
    int probe_len;
    int32_t *probe_ids;     /* (probe_len) incl. [CLS]/[SEP] for BERT */
    /* loss and importance */
    hs_loss_kind loss_kind;
    double loss;            /* with all heads; NaN when not computed */
    int n_mlm;
    int32_t *mlm_positions, *mlm_targets;
    int32_t *resample_ids;  /* (n) the other input of resample ablation, or NULL */
    int32_t *loss_rows;     /* (n_loss_rows) the LM loss's rows (opts.loss_span), or NULL */
    int n_loss_rows;
    /* The probe's per-head ablation cost: the next-token loss over its second half with head
     * l.h ablated (opts.probe_ablation_kind, means and the resample input from the probe),
     * minus probe_loss with every head; (n_layer * n_head), NaN for heads not analysed;
     * NULL when not run (no ablation or probe, or not a causal LM). */
    double *probe_ablation;
    double probe_loss;
    double probe_loss_first; /* the same loss over the first half's rows, every head on */
    int32_t probe_rows[2];  /* the loss rows: begin, end (exclusive) */
    int32_t *probe_resample_ids; /* (probe_len) resample's other input, or NULL */
    hs_prune_method prune_method_used;
    int prune_round_heads;  /* heads per round (gradient), 1 (greedy) */
    hs_prune_step *curve;   /* (n_curve) one per removed head, grouped by round */
    int n_curve;
    int *candidates;        /* (n_candidates) head indices l*H + h */
    int n_candidates;
    /* Grouped-query models (n_kv_head < n_head): (n_layer, n_kv_head) loss with every query
     * head of KV head g of layer l masked, minus loss (NaN for layers not analysed); NULL
     * when the model has one KV head per query head or ablation did not run. */
    double *ablation_kv;
    /* Grouped-query models: similarity within and across the KV groups of the analysed heads
     * (hs_kv_similarity_compute on similarity and labels); NULL otherwise. */
    hs_kv_similarity *kv_similarity;
    hs_composition *composition; /* NULL when not computed (opts, or an encoder) */
    double *rollout;        /* (n, n) attention rollout of the text, or NULL */
    double *flow;           /* (n, n) attention flow of the text, or NULL (n too large) */
    hs_dla *dla;            /* direct logit attribution of every head, or NULL (opts, the
                               architecture, or a single token) */
    /* word-level maps (opts.word_level; NULL and 0 otherwise), hs_word_ids' words */
    int n_words;
    int32_t *word_ids;      /* (n) the word of each token */
    char **words;           /* (n_words) labels (hs_word_labels) */
    float *word_maps;       /* (n_heads, n_words, n_words), heads in heads[] order */
    long forward_passes;
    double seconds_forward, seconds_ablation, seconds_pruning, seconds_gradient;
    /* the rest of the run's wall time (report-schema.md, timing) */
    double seconds_hash, seconds_rollout, seconds_probe, seconds_pairwise, seconds_composition,
        seconds_probe_ablation, seconds_total;
    /* An encoder-decoder's analysis (T5: its three kinds of heads, docs/report-schema.md
     * § Encoder-decoders), or NULL. It replaces the one-stack fields: n_heads is 0 and ids,
     * tokens and n are the encoder's text. */
    struct hs_encdec_result *encdec;
} hs_analysis;

/* Runs everything: forward pass with maps, entropy, detectors (text and a seeded
 * induction probe), diversity, similarity, clustering, loss, ablation sweep, pruning
 * curve and candidates. On success *out owns its arrays; free with hs_analysis_free.
 * The pass never holds every map in memory: per-head metrics are taken layer by layer as
 * the pass makes them, and the maps go to a store (memory up to opts.maps_memory_max,
 * else an unlinked temporary file) that the pairwise statistics read in row blocks. */
hs_status hs_analyze_run(const hs_model *m, const hs_analyze_input *in, const hs_analyze_opts *o,
                         hs_analysis **out, hs_error *err);

/* hs_analyze_run with a decoder target: required for an encoder-decoder (in is then the
 * encoder's text; the report has its three kinds of heads, docs/analyze.md), refused
 * (HS_E_ARG) for any other model. target NULL: hs_analyze_run. */
hs_status hs_analyze_run_target(const hs_model *m, const hs_analyze_input *in,
                                const hs_analyze_target *target, const hs_analyze_opts *o,
                                hs_analysis **out, hs_error *err);

/* The score a head's type k (hs_label_kind) is judged on, and its raw attention mass on
 * sink kind k (hs_sink_kind); NaN when undefined (docs/metrics.md § Head types). */
double hs_label_score(const hs_head_result *h, int k);
double hs_sink_score(const hs_head_result *h, int k);

/* Mean ablation with means over a corpus: adds to sum: (n_layer, d_model) every head's
 * context z = P V summed over the positions of the input the loss passes of hs_analyze_run
 * run on for this text (ids: the text; for an MLM loss, with the masked positions
 * [MASK]ed). Sum it over the corpus, divide by the corpus's token count, and pass the result
 * as hs_analyze_opts.ablation_means. */
hs_status hs_ablation_means_add(const hs_model *m, const int32_t *ids, const int32_t *type_ids,
                                int n, double *sum, hs_error *err);

/* Frees an analysis; accepts NULL. */
void hs_analysis_free(hs_analysis *a);

/* Copies the text's attention map of head index l*H + h (any layer, analysed or not) into
 * out: (n, n), row = query, column = key. HS_E_ARG when the analysis kept no maps
 * (opts.keep_maps = 0) or the index is out of range; HS_E_IO when the maps' temporary file
 * cannot be read. */
hs_status hs_analysis_map(const hs_analysis *a, int index, float *out, hs_error *err);

/* "L.H" of a head index l*H + h into buf (at least 16 bytes). */
const char *hs_head_name(const hs_analysis *a, int index, char *buf, size_t cap);

/* Flags of hs_report_json and hs_report_write (or-ed; 0: compact and whole). */
#define HS_REPORT_PRETTY 1 /* indented (as 1 always meant) */
/* Without the arrays whose size grows with the text beyond n or with the heads beyond
 * n_heads: rollout.matrix, flow.matrix, word_level.maps,
 * direct_logit_attribution.heads[].per_position, diversity.pairwise_frobenius,
 * similarity.matrix and composition.q/k/v are left out (the keys are absent). The copy of
 * the report the HTML page embeds is this one. */
#define HS_REPORT_LEAN 2

/* The report as JSON text (schema "headscope.report/3"), NaN written as null; files is an
 * optional list of n_files output paths relative to the output folder; flags: 0, or
 * HS_REPORT_PRETTY and HS_REPORT_LEAN or-ed (a plain 1 is pretty, as before). Returns a
 * malloc'd string (caller frees) or NULL when out of memory. */
char *hs_report_json(const hs_analysis *a, const char *const *files, int n_files, int flags);

/* hs_report_json's text written to f as it is made: the large arrays (the n x n rollout of
 * a long text is a million numbers) go from the analysis to f without a copy of the whole
 * text in memory. HS_E_IO when f fails, HS_E_NOMEM. */
hs_status hs_report_write(const hs_analysis *a, const char *const *files, int n_files, int flags,
                          FILE *f, hs_error *err);

/* From text to report in one call, for bindings that cannot fill the structs above (the
 * Python package): tokenizes texts[0..n_texts-1] (lens[i] bytes each, or NUL-terminated
 * when lens is NULL) with the model's tokenizer and analyses them as `headscope analyze`
 * does. One text: *out is hs_report_json of hs_analyze_run; several: the corpus report of
 * `headscope analyze --corpus` (include/headscope/corpus.h; texts longer than the context
 * truncated, ablation only when asked, no pruning). options is NULL or a JSON object of
 * hs_analyze_opts fields by name, as hs_analyze_options_json lists them with their types,
 * ranges and defaults (the ranges of `headscope analyze`'s options): "ablation", "pruning",
 * "gradient", "exclude_sinks", "probe", "hash_files" (default false here), "composition",
 * "rollout", "dla", "norm_based", "word_level", "sink_punct" as booleans;
 * "label_thresholds" (as --label-thresholds), "flow_max_tokens", "cluster_threshold",
 * "prune_tol", "prune_stop", "prune_round", "probe_half_len", "prune_beam",
 * "prune_max_steps", "probe_seed", "resample_seed" as numbers; "similarity" ("pearson",
 * "js"), "prune_method" ("gradient", "greedy"), "ablation_kind" ("zero", "mean",
 * "resample"), "probe_ablation_kind" (those or "none"), "loss_span" (as --loss-span),
 * "layers" (a list of layer numbers), and "truncate" (keep the first n_ctx tokens of a
 * longer text instead of HS_E_INPUT) and "text_pair" (BERT, one text only). An unknown
 * name, a value of the wrong type or a number outside its range is HS_E_ARG.
 * On success *out is a NUL-terminated JSON string (compact); free it with hs_free. */
hs_status hs_analyze_json(const hs_model *m, const char *const *texts, const size_t *lens,
                          int n_texts, const char *options, char **out, hs_error *err);

/* hs_analyze_json for one text (len bytes), also giving what `headscope analyze -o OUTDIR`
 * writes: when outdir is not NULL (an existing folder), the pictures (hs_pictures_write, PNG),
 * index.html and, last, report.json, the report listing them ("files"); when page is not
 * NULL, the page itself (hs_html_encode over the report and the analysed heads' maps: one
 * self-contained HTML document, nothing loaded from the network) in *page, its length in
 * *page_len. *report: the report (pretty-printed when written to outdir). Free *report and
 * *page with hs_free. On failure nothing is returned and no file of this call is left in
 * outdir (a file of the same name there before may have been replaced). */
hs_status hs_analyze_files(const hs_model *m, const char *text, size_t len, const char *options,
                           const char *outdir, char **report, char **page, size_t *page_len,
                           hs_error *err);

/* The options hs_analyze_json takes, from the library's option table (the one the command
 * line reads too), as a JSON array of objects: "key" (the JSON name), "option" (the
 * `headscope analyze --NAME`, or null), "type" ("bool", "int", "number", "choice", "str",
 * "list"), "valid" (what a valid value is: "a number in [0, 2]"), "default" and "help"
 * (text). For bindings' documentation (the Python package's docstring). Returns a malloc'd
 * string (free with hs_free), NULL when out of memory. */
char *hs_analyze_options_json(void);

/* Frees memory the library returned to a caller that has no access to its free() (a
 * binding): hs_analyze_json's string, hs_report_json's. Accepts NULL. */
void hs_free(void *p);

/* Pictures hs_pictures_write draws of each head (or-ed). */
#define HS_PICTURES_PNG 1 /* heads/L{l}_H{h}.png */
#define HS_PICTURES_SVG 2 /* heads/L{l}_H{h}.svg (hs_heatmap_svg) */

/* Writes the pictures of an analysis into outdir (which must exist): heads/L{l}_H{h}.png
 * and/or .svg (formats, 0: PNG) for every analysed head, gallery.png (every layer),
 * similarity.png (dendrogram order, clusters framed), importance.png (when ablation ran),
 * rollout.png and flow.png (when computed) and composition.png (when computed).
 * max_labels (0: 128) is how many tokens per axis get a label: up to it every token is
 * labelled, the head pictures growing with n (a text line per token) as far as
 * HS_PNG_MAX_SIDE allows; above it every k-th. On success *files (caller frees each string
 * and the array) lists the paths written, relative to outdir, and *n_files their count. On
 * failure the files written so far are removed. */
hs_status hs_pictures_write(const hs_analysis *a, const char *outdir, int max_labels,
                            int formats, char ***files, int *n_files, hs_error *err);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_REPORT_H */
