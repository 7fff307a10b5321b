/*
 * headscope/analysis.h — per-head metrics of recorded attention maps.
 *
 * Pure functions of attention maps and token ids: no model code, no I/O, no globals.
 * Every metric is defined exactly in docs/metrics.md; the comments here say what each
 * function computes, what it returns and who frees what.
 *
 * Maps are flat float arrays, row = query, column = key, and a map index for layer l,
 * head h of an (L, H, n, n) trace is l*H + h:
 *
 *     // maps: (n_maps, n, n)  e.g. hs_trace.attn with n_maps = n_layer * n_head
 *
 * Visibility (headscope/visibility.h) says which keys each query row i could attend to:
 * one range [hs_vis_lo(v, i), hs_vis_hi(v, i, n)) per row. Bidirectional (BERT): all n
 * keys; causal (GPT-2): keys 0..i; a sliding window of W keys (Mistral, Gemma's local
 * layers): keys i - W + 1 .. i; a prefix LM: the prefix's keys and 0..i. Every metric
 * counts, normalises and compares only visible cells; entries outside a row's range are
 * ignored (they are 0 in a trace). A model's maps of every layer: hs_vis_from_causal(c->causal)
 * today. Per-head functions take one visibility for all the maps they are given (call them
 * per layer when layers differ); the functions over a whole trace (similarity, diversity,
 * rollout, flow) take an array: one visibility for all, or one per map / per layer.
 * Every entry must be finite and >= 0 (HS_E_VALUE otherwise, naming map, row and
 * column); rows are not renormalised (a row of a trace sums to 1 over its keys).
 * Metrics are accumulated in double; NaN means "undefined" (no qualifying rows) and is
 * written as null in report.json.
 *
 *     hs_entropy ent[144];  hs_detect det[144];
 *     unsigned char sink[128];
 *     hs_visibility vis = hs_vis_bidirectional();                       // BERT
 *     hs_entropy_compute(t->attn, L * H, n, vis, NULL, ent, &err);      // every row
 *     hs_detect_seq seq = {.ids = ids, .cls_id = 101, .sep_id = 102};
 *     hs_detect_compute(t->attn, L * H, n, vis, &seq, NULL, det, &err);
 *     hs_sinks_mark(ids, n, 101, 102, sink, &err);                      // BERT sinks
 *     hs_entropy_compute(t->attn, L * H, n, vis, sink, ent, &err);      // without them
 *     double *r = malloc(sizeof(double) * 144 * 144), *d = malloc(sizeof(double) * 144 * 144);
 *     hs_similarity_compute(t->attn, L * H, n, &vis, 1, HS_SIM_PEARSON, r, &err);
 *     hs_similarity_distance(r, L * H, HS_SIM_PEARSON, d, &err);   // 1 - r
 *     hs_linkage *lk = NULL;
 *     hs_linkage_build(d, L * H, &lk, &err);
 *     hs_linkage_cut(lk, 0.5, labels, &n_clusters, &err);
 *     hs_linkage_free(lk);
 *
 * Per-head functions (entropy, detectors, word maps) work on any number of maps, so a
 * forward-pass observer can call them per layer with n_maps = n_head and never keep the
 * whole trace. The pairwise functions (diversity matrix, similarity) take all maps in one
 * array here; `analyze` runs the same code over maps read in row blocks from a file
 * (hs_analyze_run), so it never holds them all.
 */
#ifndef HEADSCOPE_ANALYSIS_H
#define HEADSCOPE_ANALYSIS_H

#include <stddef.h>
#include <stdint.h>

#include "headscope/status.h"
#include "headscope/tokenizer.h"
#include "headscope/visibility.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A source of maps one at a time, for maps that are not in one array (the analysis's
 * store, hs_analysis_map): copies map k into out: (n, n), row = query, column = key. */
typedef hs_status (*hs_map_fn)(void *user, int k, float *out, hs_error *err);

/* ---- input checks and sink positions ---------------------------------------------- */

/* Checks maps: (n_maps, n, n): n_maps >= 1, n >= 1, the size fits in memory, maps is
 * not NULL, and every entry (above the diagonal too) is finite and >= 0. Returns HS_OK,
 * HS_E_ARG or HS_E_VALUE (message names the first bad entry). Every function below that
 * takes maps runs this check first, and HS_E_ARG for a visibility hs_vis_check refuses
 * (or a NULL array, or n_vis neither 1 nor the count of maps / layers). */
hs_status hs_maps_check(const float *maps, int n_maps, int n, hs_error *err);

/* Without sinks, a query row whose attention on non-sink keys is below this is left out of
 * every mean: what little it does not park on sinks is mostly rounding, and renormalising it
 * would turn rounding into a score (docs/metrics.md). */
#define HS_SINK_MIN_MASS 1e-3

/* Marks the attention-sink positions of a sequence in sink: (n), 1 = sink, 0 = not:
 * position 0 always, and every position whose id equals cls_id or sep_id (pass a
 * negative id to skip it; GPT-2: hs_sinks_mark(ids, n, -1, -1, ...) marks only 0).
 * ids may be NULL when both ids are negative. The caller owns sink. */
hs_status hs_sinks_mark(const int32_t *ids, int n, int32_t cls_id, int32_t sep_id,
                        unsigned char *sink, hs_error *err);

/* ---- entropy ----------------------------------------------------------------------- */

typedef struct hs_entropy {
    double nats;   /* mean over counted rows of H_i = -sum_j p_ij ln p_ij (0 ln 0 = 0) */
    double bits;   /* nats / ln 2 */
    double norm;   /* mean over counted rows with > 1 key of H_i / ln(#keys_i), #keys_i the
                      row's visible keys; NaN if none */
    double rowmax; /* mean over counted rows of max_j p_ij ("confidence") */
    int rows;      /* number of rows counted (n without sinks) */
} hs_entropy;

/* Entropy of every map: maps: (n_maps, n, n) -> out: (n_maps), caller-owned.
 * Row i counts the keys vis lets it see (causal: j <= i; a sliding window of W: at most W,
 * so a head spread evenly over its window has norm 1). sink: (n) from hs_sinks_mark, or
 * NULL to count everything. With sink, sink query rows are left out, sink keys are
 * dropped and each remaining row is renormalised over its non-sink keys (#keys_i
 * counts non-sink keys); a row whose non-sink mass is below HS_SINK_MIN_MASS is left out. A
 * map with no counted row gets NaN in every field and rows = 0. */
hs_status hs_entropy_compute(const float *maps, int n_maps, int n, hs_visibility vis,
                             const unsigned char *sink, hs_entropy *out, hs_error *err);

/* ---- detectors ("mul" score: mean attention mass on a pattern) --------------------- */

/* Slots for the table-computed detectors (hs_detect.extra). */
#define HS_DETECT_EXTRA 4

typedef struct hs_detect {
    double prev_token;  /* cell (i, i-1), rows i >= 1 (NaN for a sliding window of 1) */
    double self;        /* cell (i, i) */
    double first_token; /* cell (i, 0): the first-token / [CLS] sink, rows that see key 0 */
    double sep;         /* cells (i, j) with ids[j] == sep_id; NaN if sep_id < 0 or absent */
    double duplicate;   /* cells (i, j), j < i, ids[j] == ids[i] */
    double induction;   /* cells (i, j), 1 <= j, j != i, j != i+1, j visible, ids[j-1] == ids[i] */
    double next_token;  /* cell (i, i+1), rows i <= n-2 that see it; NaN for causal and
                           sliding-window maps (never visible), rows i + 2 <= prefix of a
                           prefix LM */
    double cls;         /* cells (i, j) with ids[j] == cls_id; NaN if cls_id < 0 or absent */
    double punct;       /* cells (i, j) with punct[j]; NaN without punct or none visible */
    double other_segment; /* cells (i, j) with type_ids[j] != type_ids[i]; NaN without
                             type_ids or when every visible key is in the query's segment */
    double sink;        /* cells (i, j) with sink[j], raw map, rows that see a sink; NaN
                           without sink */
    /* The detectors of the library's metric table (docs/metrics.md), in slot order, and
     * each one's parameter (e.g. the offset k); NaN when undefined or unused. */
    double extra[HS_DETECT_EXTRA];
    double extra_param[HS_DETECT_EXTRA];
} hs_detect;

/* The sequence a detector pass reads besides the maps. */
typedef struct hs_detect_seq {
    const int32_t *ids;         /* (n) token ids, required */
    int32_t cls_id, sep_id;     /* the [CLS] / [SEP] ids (101 / 102 for bert-base-uncased), or
                                   negative for no such score */
    const int32_t *type_ids;    /* (n) segment of each token, or NULL: no other_segment */
    const unsigned char *punct; /* (n) 1 = punctuation token (hs_token_is_punct), or NULL */
} hs_detect_seq;

/* Detector scores of every map: maps: (n_maps, n, n), seq: the tokens (n) -> out: (n_maps),
 * caller-owned. Each score is the mean over query rows that have at least one visible
 * pattern cell (visible under vis) of the row's summed attention on its visible pattern
 * cells; a map with no such
 * row gets NaN (e.g. duplicate/induction on text without repeats).
 * sink: (n) from hs_sinks_mark, or NULL. With sink, the pattern scores (prev_token,
 * next_token, self, duplicate, induction, punct, other_segment) leave out sink query rows
 * and sink key cells and divide each row's pattern mass by its non-sink mass (rows with
 * non-sink mass below HS_SINK_MIN_MASS are left out); first_token, cls, sep and sink measure the sinks
 * themselves and are always computed on the raw map. */
hs_status hs_detect_compute(const float *maps, int n_maps, int n, hs_visibility vis,
                            const hs_detect_seq *seq, const unsigned char *sink, hs_detect *out,
                            hs_error *err);

/* 1 when the token's display form s (UTF-8, NUL-terminated) holds at least one code point
 * and every code point is Unicode punctuation (general category P*) or white space (so
 * GPT-2's " ," counts), else 0. The punctuation positions of Clark et al. (2019). */
int hs_token_is_punct(const char *s);

/* A seeded induction probe: half_len distinct token ids drawn uniformly from
 * [vocab_lo, vocab_hi), then the same half_len ids again: out: (2 * half_len),
 * caller-owned. Deterministic for a seed on every platform: splitmix64 (state = seed;
 * state += 0x9e3779b97f4a7c15; z = state; z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9;
 * z = (z ^ z >> 27) * 0x94d049bb133111eb; return z ^ z >> 31), a draw in [0, m) is the
 * first z with z < 2^64 - (2^64 mod m), taken mod m; the ids are chosen by partial
 * Fisher-Yates over the range: for k = 0..half_len-1, swap slot k with slot
 * k + draw(range - k) of the virtual array vocab_lo..vocab_hi-1 and take slot k.
 * Requires 1 <= half_len <= 2^20 and 0 <= vocab_lo, vocab_hi - vocab_lo >= half_len. */
hs_status hs_probe_repeated(uint64_t seed, int half_len, int32_t vocab_lo, int32_t vocab_hi,
                            int32_t *out, hs_error *err);

/* ---- pairwise comparisons ---------------------------------------------------------- */

/* Frobenius diversity of an (L, H, n, n) trace. layer: (n_layer), caller-owned, gets
 * (1/H^2) sum_a sum_b ||A_a - A_b||_F over the heads of each layer (all n*n entries, a
 * cell a head cannot see counted as 0, so two heads of different visibility compare as
 * the matrices they are). vis: (n_vis) the visibility of every layer (n_vis = 1) or of
 * each layer (n_vis = n_layer).
 * pairwise: (L*H, L*H), caller-owned, gets ||A_p - A_q||_F for every pair of heads, or
 * pass NULL to skip it (then only same-layer pairs are computed). Either output may be
 * NULL, not both. */
hs_status hs_diversity_compute(const float *attn, int n_layer, int n_head, int n,
                               const hs_visibility *vis, int n_vis, double *layer,
                               double *pairwise, hs_error *err);

typedef enum hs_sim_method {
    HS_SIM_PEARSON = 0, /* Pearson r of the flattened visible entries */
    HS_SIM_JS = 1       /* Jensen-Shannon divergence, mean over query rows, in nats */
} hs_sim_method;

/* Head similarity matrix: maps: (n_maps, n, n) -> out: (n_maps, n_maps), caller-owned,
 * symmetric. vis: (n_vis) the visibility of every map (n_vis = 1) or of each map
 * (n_vis = n_maps, e.g. a model whose local and global layers alternate).
 * HS_SIM_PEARSON: Pearson correlation of the two maps flattened over the entries both
 *   heads can see (causal: j <= i, n(n+1)/2 entries; a sliding window: the band; a
 *   causal and a sliding-window head: the window's band; else all n*n), each map's mean
 *   taken over those entries. out[a][a] = 1, and out[a][b] = 0 when map a or b is
 *   constant on those entries (zero variance).
 * HS_SIM_JS: Jensen-Shannon divergence (natural log, 0 <= JS <= ln 2) between the two
 *   heads' distributions of each query row over its visible keys, mean over rows
 *   (Clark et al. 2019); a key only one head can see carries 0 of the other's mass (the
 *   distributions are compared over the keys either sees); out[a][a] = 0. A divergence,
 *   not a similarity. */
hs_status hs_similarity_compute(const float *maps, int n_maps, int n, const hs_visibility *vis,
                                int n_vis,
                                hs_sim_method method, double *out, hs_error *err);

/* Clustering distances from a similarity matrix: sim, dist: (n_maps, n_maps) (may be the
 * same buffer). Pearson: 1 - r (0..2); JS: the divergence itself. Diagonal set to 0. */
hs_status hs_similarity_distance(const double *sim, int n_maps, hs_sim_method method,
                                 double *dist, hs_error *err);

/* ---- clustering -------------------------------------------------------------------- */

/* One merge, SciPy linkage convention: clusters a < b (leaves are 0..n-1, merge k
 * creates cluster n + k), their average-linkage distance, and the new cluster's size. */
typedef struct hs_merge {
    int a, b;
    double dist;
    int size;
} hs_merge;

typedef struct hs_linkage {
    int n;             /* leaves (heads) */
    hs_merge *merges;  /* (n - 1) in merge order, distances non-decreasing */
    int *order;        /* (n) dendrogram leaf order, left (a) before right (b) */
} hs_linkage;

/* Agglomerative clustering with average linkage (UPGMA) of dist: (n, n), symmetric,
 * finite, >= 0 (diagonal ignored). Each step merges the two clusters at the smallest
 * distance; exact ties go to the pair with the smallest lower cluster id, then the
 * smallest higher id. On success *out owns merges and order (one allocation); free with
 * hs_linkage_free. */
hs_status hs_linkage_build(const double *dist, int n, hs_linkage **out, hs_error *err);

/* Frees a linkage; accepts NULL. */
void hs_linkage_free(hs_linkage *lk);

/* Flat clusters at a distance threshold: clusters are the connected components of the
 * merges with dist <= threshold. labels: (n), caller-owned, numbered 0.. in order of
 * first appearance over leaves 0..n-1; *n_clusters (may be NULL) gets their count.
 * threshold must be finite and >= 0 (HS_E_ARG otherwise). */
hs_status hs_linkage_cut(const hs_linkage *lk, double threshold, int *labels, int *n_clusters,
                         hs_error *err);

/* ---- key/value groups (grouped- and multi-query attention) ------------------------- */

/* Permutations of hs_kv_similarity_compute's test, and the generator's seed for layer l:
 * splitmix64 seeded with HS_KV_PERM_SEED + l (docs/metrics.md § Similarity within and
 * across KV groups). */
#define HS_KV_PERMUTATIONS 999
#define HS_KV_PERM_SEED 1

/* How alike the query heads that share a key/value head are, against the heads of the same
 * layer that do not (docs/metrics.md § Similarity within and across KV groups). Query head h
 * reads KV head h / (n_head / n_kv_head); a "within" pair is two heads of one layer and one
 * KV head, an "across" pair two heads of one layer and different KV heads; every pair is
 * unordered (a < b). Entries are means of the similarity matrix over those pairs, so they
 * are Pearson r or a Jensen-Shannon divergence as the matrix is. NaN: undefined (no pair,
 * or a layer not analysed). */
typedef struct hs_kv_similarity {
    int n_layer, n_kv_head, heads_per_group;
    double *within;      /* (n_layer) mean over the layer's within pairs */
    double *across;      /* (n_layer) mean over its across pairs; NaN with one KV head */
    double *p_value;     /* (n_layer) permutation test of within against across (below) */
    double *groups;      /* (n_layer, n_kv_head, n_kv_head): [l][g][g] mean over the pairs
                            of group g, [l][g][f] (f != g) over heads of g times heads of f */
    double within_mean, across_mean; /* over every within / across pair analysed */
    long n_within, n_across;         /* those pairs' counts */
    double other_layers_mean;    /* over every pair of heads of different layers (the baseline
                                    of multi-query attention, whose layers have one group);
                                    NaN with one layer analysed */
    double adjusted_rand;        /* flat clusters against the KV groups (layer, KV head):
                                    adjusted Rand index (Hubert & Arabie 1985); NaN when
                                    undefined (both partitions trivial) */
    double same_cluster_within;  /* share of within pairs in one flat cluster */
    double same_cluster_across;  /* share of across pairs in one flat cluster; NaN: none */
    double *p_holm;      /* (n_layer) p_value adjusted by Holm's method over the layers with
                            one (below); NaN where p_value is (last: an addition) */
} hs_kv_similarity;

/* The measures above from sim: (n_items, n_items) (hs_similarity_compute's matrix; method
 * says whether larger is more alike: Pearson, or smaller: Jensen-Shannon) of the heads
 * head_index: (n_items), each l*n_head + h, strictly increasing, and clusters: (n_items)
 * their flat clusters (or NULL: the cluster fields NaN). The test: per layer with two or
 * more KV heads, the layer's heads are given their KV heads' labels in HS_KV_PERMUTATIONS
 * random orders (Fisher-Yates); p = (1 + #{orders whose within mean is at least as alike
 * as the true one}) / (1 + HS_KV_PERMUTATIONS); p_holm adjusts the m layers' p together
 * (Holm 1979: sorted ascending, the i-th times m - i + 1, a running maximum, at most 1), so
 * that rejecting every layer with p_holm <= alpha keeps the chance of any false rejection
 * among them at most alpha. Needs n_kv_head < n_head, dividing it
 * (HS_E_ARG otherwise). On success *out is owned by the caller: hs_kv_similarity_free. */
hs_status hs_kv_similarity_compute(const double *sim, int n_items, const int *head_index,
                                   int n_layer, int n_head, int n_kv_head, hs_sim_method method,
                                   const int *clusters, hs_kv_similarity **out, hs_error *err);

/* Frees a result of hs_kv_similarity_compute; accepts NULL. */
void hs_kv_similarity_free(hs_kv_similarity *kv);

/* ---- word-level maps (Clark et al. 2019) ------------------------------------------- */

/* Merges subword tokens into words: word: (n), word[i] in [0, n_words) is the word of
 * token i and every word has at least one token. out: (n_maps, n_words, n_words),
 * caller-owned: out[u][v] = mean over query tokens i of u of sum over key tokens j of v
 * of A[i][j] over the keys j vis lets i see (keys summed, queries averaged), so rows still
 * sum to 1; the entries i cannot see are ignored. */
hs_status hs_wordmap_compute(const float *maps, int n_maps, int n, hs_visibility vis,
                             const int32_t *word, int n_words, float *out, hs_error *err);

/* The word of each token: word: (n), returns n_words. WordPiece (wordpiece = 1): a "##"
 * token continues the word before it. BPE (byte-level and SentencePiece-style, whose "▁"
 * displays as a space): a token starts a word when its display form begins with white
 * space, follows one that ends with white space, or is (or follows) a special or added
 * token — <|endoftext|>-style tokens always, and <s>, </s>, [CLS]... when tok (the tokenizer
 * of ids; may be NULL) says so — so words are the text's white-space-separated words.
 * tokens: the raw vocabulary strings, display: their display forms (hs_tokenizer_display),
 * ids: the ids (may be NULL when tok is). The tokenizer's kind decides WordPiece; wordpiece
 * is what to assume without one (tok NULL). */
int hs_word_ids(const char *const *tokens, const char *const *display, const int32_t *ids, int n,
                int wordpiece, const hs_tokenizer *tok, int32_t *word);

/* Each word's label: its tokens' display forms joined, the first one's leading white space
 * (unless it is all the token holds) and the "##" of WordPiece continuations dropped: (n_words) malloc'd strings in a malloc'd
 * array (the caller frees each and the array), or NULL when out of memory. */
char **hs_word_labels(const char *const *display, const int32_t *word, int n, int n_words);

/* ---- attention rollout and attention flow (Abnar & Zuidema 2020) ------------------- */

/* Both read attn: (n_layer, n_head, n, n), a whole trace, and model each layer as
 * B_l = (1 - residual) * mean_h A_{l,h} + residual * I (the paper's residual = 0.5: the
 * residual connection carries as much as attention), A_{l,h} taken on the cells layer l's
 * visibility shows (others 0): vis: (n_vis), one for every layer (n_vis = 1) or one per
 * layer (n_vis = n_layer); out: (n, n), caller-owned, row i =
 * the top layer's position i, column j = input token j.
 * Rollout: out = B_{L-1} ... B_1 B_0, so rows sum to 1.
 * Flow: out[i][j] = the maximum flow from input token j to the top-layer position i in the
 * layered graph whose edges (layer l, token j) -> (layer l+1, token i) have capacity
 * B_l[i][j] (not normalised: a row may sum to more than 1). Each of the n^2 pairs is one
 * max-flow problem on (n_layer + 1) n nodes (Dinic), so keep n small (the paper: short
 * sentences). HS_E_ARG for a residual outside [0, 1]; the maps are checked as elsewhere. */
hs_status hs_rollout_compute(const float *attn, int n_layer, int n_head, int n,
                             const hs_visibility *vis, int n_vis, double residual, double *out,
                             hs_error *err);
hs_status hs_attention_flow(const float *attn, int n_layer, int n_head, int n,
                            const hs_visibility *vis, int n_vis, double residual, double *out,
                            hs_error *err);

/* The same two from maps read one at a time (map k = l * n_head + h from fn, which
 * should give finite maps >= 0), so the whole trace need not be in memory: rollout and
 * flow: (n, n) each, caller-owned, either may be NULL to skip it. Memory: a few n^2
 * buffers for the rollout, n_layer n^2 doubles and the flow graph for the flow. */
hs_status hs_rollout_source(hs_map_fn fn, void *user, int n_layer, int n_head, int n,
                            const hs_visibility *vis, int n_vis, double residual,
                            double *rollout, double *flow, hs_error *err);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_ANALYSIS_H */
