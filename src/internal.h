/*
 * src/internal.h — helpers shared between library files; never installed.
 */
#ifndef HEADSCOPE_INTERNAL_H
#define HEADSCOPE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "headscope/status.h"

#if defined(__GNUC__)
#define HS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define HS_PRINTF(a, b)
#endif

/* Writes a formatted message into err (if non-NULL) and returns st. */
hs_status hs_fail(hs_error *err, hs_status st, const char *fmt, ...) HS_PRINTF(3, 4);

/* Prepends "prefix: " to an existing message in err (if non-NULL). */
void hs_error_prefix(hs_error *err, const char *fmt, ...) HS_PRINTF(2, 3);

/* Overflow-checked size arithmetic: return 0 on success, -1 on overflow. */
int hs_mul_size(size_t a, size_t b, size_t *out);
int hs_add_size(size_t a, size_t b, size_t *out);

/* An upper bound on the values (scalars, arrays, objects; a key with its value counts
 * once) a JSON parse of text would build: one more than the commas and opening brackets
 * outside strings. One pass, nothing allocated, also for malformed text. */
size_t hs_json_count_values(const char *text, size_t len);

/* Parses text as JSON into *out (free with cJSON_Delete) after checking that it holds at
 * most max_values values, so a hostile file (a 100 MB array of zeros) is refused before a
 * parse tree of 40 times its size is built. what names the input in messages ("'x.json'"). */
struct cJSON;
hs_status hs_json_parse(const char *text, size_t len, size_t max_values, const char *what,
                        struct cJSON **out, hs_error *err);

/* Reads a whole file into a malloc'd buffer (NUL-terminated, *len excludes the NUL).
 * max_len bounds the size accepted. Caller frees *data. */
hs_status hs_read_file(const char *path, size_t max_len, char **data, size_t *len, hs_error *err);

/* SHA-256 (src/core/sha256.c): incremental, and of a whole file (*size = its bytes);
 * digests are written as 64 lowercase hex digits plus a NUL. */
typedef struct hs_sha256_ctx {
    uint32_t h[8];
    uint64_t len;
    unsigned char buf[64];
    size_t fill;
} hs_sha256_ctx;
void hs_sha256_init(hs_sha256_ctx *s);
void hs_sha256_update(hs_sha256_ctx *s, const void *data, size_t n);
void hs_sha256_final(hs_sha256_ctx *s, char hex[65]);
hs_status hs_sha256_file(const char *path, char hex[65], uint64_t *size, hs_error *err);
/* The compression of whole 64-byte blocks into the state h: portable C, and the x86 SHA
 * extensions where the CPU has them (returns 1; 0, doing nothing, where it has not); the
 * update uses the second where it can. */
void hs_sha256_blocks_generic(uint32_t h[8], const unsigned char *p, size_t blocks);
int hs_sha256_blocks_accel(uint32_t h[8], const unsigned char *p, size_t blocks);

/* An output file written whole or not at all (src/core/tmpfile.c): hs_out_open creates a
 * new file of an unpredictable name beside path (O_CREAT|O_EXCL: a planted symlink is never
 * followed); write to o->f; hs_out_close(o, 1, err) syncs it and renames it to path (on any
 * failure it is removed and the message names path), hs_out_close(o, 0, NULL) removes it. */
typedef struct hs_out {
    FILE *f;
    char *path, *tmp; /* owned copies */
} hs_out;
hs_status hs_out_open(const char *path, hs_out *o, hs_error *err);
hs_status hs_out_close(hs_out *o, int commit, hs_error *err);
/* Resuming: o again on an existing temporary file tmp (no link followed; a regular file of
 * at least len bytes) cut to len bytes, positioned at its end, to be renamed to path by
 * hs_out_close. hs_out_keep closes o and leaves its temporary file where it is. */
hs_status hs_out_reopen(const char *path, const char *tmp, long len, hs_out *o, hs_error *err);
void hs_out_keep(hs_out *o);

/* splitmix64 and a uniform draw in [0, m), m >= 1, without modulo bias (src/core/random.c):
 * the seeded streams of the induction probe and corpus sampling. */
uint64_t hs_splitmix64(uint64_t *state);
uint64_t hs_rand_below(uint64_t *state, uint64_t m);

/* Holm's (1979) step-down adjustment of the p-values p: (n) for testing them together
 * (src/analysis/kvgroups.c): over the m finite entries sorted ascending, p_(i) becomes
 * min(1, max_{j <= i} (m - j + 1) p_(j)); a NaN entry (no test) stays NaN and does not count
 * in m. out: (n), not p; order: (n) scratch. */
void hs_holm_adjust(const double *p, int n, int *order, double *out);

/* bytes of memory, 2 MB aligned and marked for transparent huge pages when 2 MB or more
 * (src/core/mapfile.c); free() it. For weights (the GEMMs that stream through a weight matrix
 * run measurably faster on huge pages) and large scratch taken again and again (a gradient
 * pass's ~100 MB: on 4 KB pages, faulting it in cost a third of the pass on the 2-core
 * machine). */
void *hs_alloc_large(size_t bytes);
/* Asks the kernel for transparent huge pages on advised memory only (hs_alloc_large's), for
 * the whole process and its children, where its mode is `always` (which would otherwise give
 * every thread's OpenBLAS buffer and malloc arena whole 2 MB pages): prctl's
 * PR_THP_DISABLE_EXCEPT_ADVISED, Linux 6.18 and later. 0 when taken, -1 when the kernel does
 * not know the request (nothing changes). For programs; the library never calls it. */
int hs_thp_advised_only(void);

/* Maps a regular file read-only (src/core/mapfile.c): *map (hs_file_unmap it) and *len, or
 * NULL and 0 for an empty file. A FIFO, device or folder is refused without blocking. */
hs_status hs_file_map(const char *path, unsigned char **map, size_t *len, hs_error *err);

/* Maps len bytes of the open file fd read-only and private into *map; 0, or -1 with errno. */
int hs_file_map_fd(int fd, size_t len, unsigned char **map);

/* Drops one reference to a mapping made by hs_file_map(_fd), unmapping it with the last
 * (len is used only for a mapping the registry could not record); NULL is ignored. */
void hs_file_unmap(void *map, size_t len);

/* Takes a reference to the live mapping that holds the n bytes at p and returns its base
 * (give it back with hs_file_unmap(base, 0)), or NULL when no mapping made here holds them
 * (a reader's own buffer). */
void *hs_file_map_retain(const void *p, size_t n);

/* A size for HEADSCOPE_WEIGHT_MEMORY and --weight-memory: "all", or a number with an
 * optional fraction and a binary unit K, M, G or T (an optional "B" or "iB" after it):
 * "512M", "1.5G", "2147483648". 0 (or anything below one layer) converts one layer at a
 * time. Returns 0 with *bytes set, or -1. */
int hs_weight_memory_parse(const char *s, size_t *bytes);

/* As hs_file_write_atomic (include/headscope/report.h), writing n_parts buffers one after
 * the other, so a large array need not be copied next to its header first. */
hs_status hs_file_write_atomic_parts(const char *path, const void *const *parts,
                                     const size_t *lens, int n_parts, hs_error *err);
/* c: (m, n) = alpha op(a) op(b) + beta c, row-major (op: transposed when trans_*: a is
 * (m, k) or (k, m) with lda, b (k, n) or (n, k) with ldb), in double or float (dbl), with
 * the same bits for every thread count: the one tiling rule of src/core/gemm.c. Float only:
 * bias (n floats, or NULL) replaces beta c by the bias rows (add: c + the bias rows). */
typedef struct hs_gemm {
    int dbl, trans_a, trans_b, m, n, k;
    double alpha, beta;
    const void *a, *b;
    void *c;
    int lda, ldb, ldc;
    const float *bias;
    int add;
} hs_gemm;
void hs_gemm_run(const hs_gemm *g);
/* How many calls hs_gemm_run has made over more than one tile (merged, src/core/gemm.c). */
long hs_gemm_merged_calls(void);
/* hs_gemm_run's c = op(A) op(B) (alpha 1, beta 0) in double and in float. */
void hs_dgemm_fixed(int trans_a, int trans_b, int m, int n, int k, const double *a, int lda,
                    const double *b, int ldb, double *c, int ldc);
void hs_sgemm_fixed(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
                    const float *b, int ldb, float *c, int ldc);
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
/* An empty corpus aggregate for nh heads and a probe of probe_len tokens, with no model
 * description yet (src/io/corpus_report.c; hs_corpus_agg_new fills one from an analysis,
 * hs_corpus_partial_parse from a file). */
struct hs_corpus_agg;
hs_status hs_corpus_agg_alloc(int nh, int probe_len, struct hs_corpus_agg **out, hs_error *err);
/* JSON values: a number (null for NaN/Inf), an int array, a row-major (rows, cols) matrix. */
struct cJSON *hs_json_num(double v);
struct cJSON *hs_json_ints(const int32_t *v, int n);
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

/* The loss rows' part of a loss input's checks (src/importance/span.c), shared by the
 * loss evaluator and the gradient: MLM: an MLM head, at least one masked position, positions
 * and targets in range; LM with positions: at least one, increasing, within 0..n-2. HS_OK
 * otherwise. */
struct hs_model_config;
struct hs_loss_input;
hs_status hs_loss_rows_check(const struct hs_model_config *c, const struct hs_loss_input *in,
                             hs_error *err);

/* The loss rows of an LM or MLM loss input: how many, and the r-th's row (the position whose
 * logits are read) and target id (LM: ids[row + 1]; MLM: targets[r]). */
int hs_loss_row_count(const struct hs_loss_input *in);
void hs_loss_row_at(const struct hs_loss_input *in, int r, int32_t *row, int32_t *target);

/* The large buffers of a gradient pass (every layer's kept activations, a block of logits,
 * the backward's scratch: about 100 MB for GPT-2 small at n = 128) and its forward
 * workspace, kept from one pass to the next on the same input: pruning's rounds. Fresh
 * pages cost a pass about a third of its time in page faults. Zero-initialise; free with
 * hs_grad_scratch_free (which leaves it zeroed, ready again). */
struct hs_forward_ws;
typedef struct hs_grad_scratch {
    float *buf;
    size_t bytes;
    struct hs_forward_ws *ws;
    int ws_n; /* the tokens ws was made for */
} hs_grad_scratch;
void hs_grad_scratch_free(hs_grad_scratch *s);

/* hs_gradient_signed_masked that stops after the forward pass when the loss exceeds cap:
 * *loss set, g filled with NaN, no backward (a pruning round past its stop needs only the
 * loss). cap = INFINITY: always the gradient. keep: buffers kept between passes (NULL: the
 * pass allocates and frees its own). */
struct hs_model;
hs_status hs_gradient_capped(const struct hs_model *m, const struct hs_loss_input *in,
                             const float *head_mask, double cap, double *g, double *loss,
                             hs_grad_scratch *keep, hs_error *err);

/* Norm-based attention's value norms of layer l (Kobayashi et al. 2020): fnorm[h*n + j] =
 * ||(x_j W_V^h + b_V^h) W_O^h|| from qkv: (n, ld), the layer's queries, keys and values as
 * the block lays them out (values after the keys; grouped-query heads read their KV head's).
 * hs_norm_values runs it on every layer of captured activations; the analysis on the
 * forward pass's own qkv, layer by layer. */
struct hs_model;
hs_status hs_norm_values_layer(const struct hs_model *m, int l, const float *qkv, int ld, int n,
                               float *fnorm, hs_error *err);

/* Direct logit attribution taken in a forward pass, layer by layer
 * (src/analysis/attribution.c): hs_dla_begin for the pass's ids (the checks and errors of
 * hs_dla_compute); hs_dla_attach sets the pass's workspace to hand each layer's context to
 * it (hs_dla_layer) and to keep the final norm's 1/s in final_rstd (n floats); after the
 * pass, hs_dla_end fills *out from them and the final normalised stream the pass left in
 * the workspace, and frees acc. hs_dla_acc_status: HS_OK, or the failure a layer stopped
 * the pass with (its message in the err given to attach, the pass's own being "stopped by
 * observer"). hs_dla_acc_free frees an unfinished one. */
typedef struct hs_dla_acc hs_dla_acc;
struct hs_dla;
struct hs_forward_ws;
hs_status hs_dla_begin(const struct hs_model *m, const int32_t *ids, int n, hs_dla_acc **out,
                       hs_error *err);
void hs_dla_attach(hs_dla_acc *acc, struct hs_forward_ws *ws, float *final_rstd, hs_error *err);
int hs_dla_layer(void *acc, int layer, const float *ctx, int n);
hs_status hs_dla_end(hs_dla_acc *acc, struct hs_dla **out, hs_error *err);
hs_status hs_dla_acc_status(const hs_dla_acc *acc);
void hs_dla_acc_free(hs_dla_acc *acc);

/* The gradient keeps every layer's activations for its backward while they fit in this many
 * bytes (default 512 MiB), and past it recomputes them layer by layer from the layers' input
 * streams (tests force that path with 0). Returns the previous limit. */
size_t hs_gradient_set_keep_limit(size_t bytes);
/* The gradient takes the head's logits this many loss rows at a time (default 128; below 1:
 * the default). Returns the previous count. For tests. */
int hs_gradient_set_head_rows(int rows);

/* hs_prune_curve_gradient with the first round's gradient given: g0 = |dL/d xi| (or signed)
 * at xi = 1 on the evaluator's own input (NULL = computed). */
struct hs_loss_eval;
struct hs_prune_step;
hs_status hs_prune_curve_gradient_from(struct hs_loss_eval *e, double base,
                                       const unsigned char *active, int per_round,
                                       double stop_increase, int max_steps, const double *g0,
                                       struct hs_prune_step *steps, int *n_steps,
                                       void (*progress)(void *, const char *, int, int),
                                       void *user, hs_error *err);

/* 1 when the weights' composition scores (src/analysis/composition.c) are defined for a
 * model of this descriptor: pre-norm blocks (LayerNorm or RMSNorm, sequential or parallel)
 * and a plain decoder (GPT-2, GPT-NeoX, Llama, Qwen2), whose norms' scales fold into the
 * weights. */
int hs_composition_defined(const struct hs_model_config *c);

/* Half- and bfloat16-precision conversions (IEEE binary16, round to nearest even). */
float hs_f16_to_f32(uint16_t h);
uint16_t hs_f32_to_f16(float f);
float hs_bf16_to_f32(uint16_t b);
uint16_t hs_f32_to_bf16(float f);

/* Little-endian loads from unaligned bytes. */
static inline uint16_t hs_le16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t hs_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t hs_le64(const unsigned char *p)
{
    return (uint64_t)hs_le32(p) | ((uint64_t)hs_le32(p + 4) << 32);
}

/* ---- tokenizers described field by field (src/text/tokenizer_spec.c) -------------------
 * What a GGUF file's tokenizer.ggml.* keys say, in terms of the pieces headscope's BPE
 * tokenizers are made of (the pipeline tokenizer.json builds): the GGUF reader builds a
 * tokenizer from a spec, the writer asks a tokenizer for its spec. */
enum {
    HS_SPEC_PRE_NONE = 0, /* no pre-tokenizer (SentencePiece-style: the text is one word) */
    HS_SPEC_PRE_GPT2,     /* GPT-2's pattern (ByteLevel use_regex) */
    HS_SPEC_PRE_LLAMA3,   /* Llama 3's (\p{N}{1,3} digit groups) */
    HS_SPEC_PRE_QWEN2     /* Qwen2's (single digits) */
};
enum {
    HS_SPEC_SPACE_NONE = 0, /* SentencePiece-style: spaces become U+2581, nothing prepended */
    HS_SPEC_SPACE_EACH,     /* ... and U+2581 before every piece between added tokens */
    HS_SPEC_SPACE_FIRST     /* ... before the first piece of a text only (Metaspace "first") */
};
typedef struct hs_tok_spec {
    int kind;                  /* hs_tokenizer_kind: HS_TOK_BPE (byte-level) or HS_TOK_SPM_BPE */
    const char *const *tokens; /* (n_tokens) in id order */
    size_t n_tokens;
    const char *const *merges; /* (n_merges) "left right" in rank order (byte-level) */
    size_t n_merges;
    const float *scores;       /* SentencePiece-style, instead of merges: (n_tokens) scores;
                                  every split of a piece into two pieces is a merge, the
                                  higher-scored result first, equal scores by position
                                  (llama.cpp's "llama" vocabulary) */
    const int32_t *added;      /* (n_added) ids matched whole in the text */
    const unsigned char *added_normalized; /* (n_added) 1: matched in the normalized text */
    size_t n_added;
    int pre;                   /* HS_SPEC_PRE_* */
    int nfc;                   /* an NFC normalizer */
    int ignore_merges;         /* a pre-token found whole in the vocabulary is one token */
    int space;                 /* SentencePiece-style: HS_SPEC_SPACE_* */
    int byte_fallback;         /* <0xNN> tokens for characters outside the vocabulary */
    int32_t unk;               /* unknown token, -1 for none */
    int32_t bos, eos;          /* put before / after every text, -1 for none */
    const char *post_name;     /* static name for messages */
} hs_tok_spec;
struct hs_tokenizer;
/* A tokenizer from a spec (copies what it needs); without a pair encoding. HS_E_FORMAT
 * naming the problem for a bad vocabulary, merge or id. */
hs_status hs_tokenizer_new_spec(const hs_tok_spec *spec, struct hs_tokenizer **out, hs_error *err);
/* The spec of a BPE tokenizer (tokens and merges left NULL: hs_tokenizer_token and
 * hs_tokenizer_merge give them; added and added_normalized point into t). HS_E_UNSUPPORTED
 * naming what a spec cannot say: WordPiece, normalizers other than NFC and the
 * SentencePiece space handling, lstrip/rstrip on an added token, more than one token put
 * before or after a text. */
hs_status hs_tokenizer_get_spec(const struct hs_tokenizer *t, hs_tok_spec *spec, hs_error *err);

#endif /* HEADSCOPE_INTERNAL_H */
