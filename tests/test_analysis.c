/* Analysis: entropy, detectors, diversity, similarity, clustering, probe, word maps.
 * Small maps are worked by hand (the arithmetic is in the comments); the same metrics
 * against the float64 NumPy reference are tests/test_analysis_golden.c's. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "headscope/analysis.h"
#include "analysis_util.h"
#include "testutil.h"

#define TOL 1e-12   /* hand-worked values: exact up to float32 inputs and rounding */

/* The uniform causal 3x3 map: row i spreads evenly over keys 0..i. */
static const float UNIFORM3[9] = {
    1.0f, 0, 0,
    0.5f, 0.5f, 0,
    1.0f / 3, 1.0f / 3, 1.0f / 3,
};

/* ---- entropy --------------------------------------------------------------------- */

Test(entropy, uniform_causal_rows_have_entropy_log_of_key_count)
{
    /* Row entropies 0, ln 2, ln 3 (float 1/3 makes row 2 differ from ln 3 by ~1e-8).
     * nats = (ln 2 + ln 3) / 3 = ln 6 / 3 = 0.5972531564093516
     * bits = log2(6) / 3 = 0.8616541669070521
     * norm: rows 1, 2 only: (ln2/ln2 + ln3/ln3) / 2 = 1
     * rowmax = (1 + 1/2 + 1/3) / 3 = 11/18 */
    hs_entropy e;
    cr_assert_eq(hs_entropy_compute(UNIFORM3, 1, 3, hs_vis_causal(), NULL, &e, NULL), HS_OK);
    near(e.nats, log(6.0) / 3, 1e-7, "nats");
    near(e.bits, log(6.0) / log(2.0) / 3, 1e-7, "bits");
    near(e.norm, 1.0, 1e-7, "norm");
    near(e.rowmax, 11.0 / 18, 1e-7, "rowmax");
    cr_assert_eq(e.rows, 3);
}

Test(entropy, causal_flag_ignores_entries_above_the_diagonal)
{
    /* Same map with junk above the diagonal: causal rows never look at it. */
    float m[9];
    memcpy(m, UNIFORM3, sizeof m);
    m[1] = 0.25f;
    m[2] = 0.5f;
    m[5] = 0.75f;
    hs_entropy e;
    cr_assert_eq(hs_entropy_compute(m, 1, 3, hs_vis_causal(), NULL, &e, NULL), HS_OK);
    near(e.nats, log(6.0) / 3, 1e-7, "nats");
}

Test(entropy, one_hot_rows_have_zero_entropy_and_full_confidence)
{
    /* Bidirectional 2x2 permutation: every row one-hot. 0 ln 0 = 0, so H = 0 exactly;
     * norm = 0 / ln 2 = 0; rowmax = 1. */
    const float m[4] = {0, 1, 1, 0};
    hs_entropy e;
    cr_assert_eq(hs_entropy_compute(m, 1, 2, hs_vis_bidirectional(), NULL, &e, NULL), HS_OK);
    cr_assert_eq(e.nats, 0.0);
    cr_assert_eq(e.bits, 0.0);
    cr_assert_eq(e.norm, 0.0);
    cr_assert_eq(e.rowmax, 1.0);
}

Test(entropy, single_token_has_no_normalised_entropy)
{
    /* n = 1: one row with one key; H = 0, no row has > 1 key -> norm NaN. */
    const float m[1] = {1.0f};
    hs_entropy e;
    cr_assert_eq(hs_entropy_compute(m, 1, 1, hs_vis_causal(), NULL, &e, NULL), HS_OK);
    cr_assert_eq(e.nats, 0.0);
    cr_assert(isnan(e.norm));
}

/* A BERT-like 4x4 map over ids [CLS] 7 8 [SEP] (sinks: positions 0 and 3). */
static const float BERT4[16] = {
    0.7f, 0.1f, 0.1f, 0.1f,
    0.4f, 0.3f, 0.1f, 0.2f,
    0.1f, 0.2f, 0.2f, 0.5f,
    0.25f, 0.25f, 0.25f, 0.25f,
};
static const int32_t BERT4_IDS[4] = {101, 7, 8, 102};

Test(entropy, excluding_sinks_renormalises_rows_over_other_keys)
{
    /* Sink rows 0 and 3 left out. Row 1 over keys 1, 2: (0.3, 0.1) / 0.4 = (3/4, 1/4):
     * H1 = -(3/4 ln 3/4 + 1/4 ln 1/4) = 0.5623351446188083, H1/ln 2 = 0.8112781244591328,
     * max 3/4. Row 2: (0.2, 0.2) / 0.4 = (1/2, 1/2): H2 = ln 2, norm 1, max 1/2.
     * nats = (0.5623351446188083 + 0.6931471805599453) / 2 = 0.6277411625893768
     * norm = (0.8112781244591328 + 1) / 2 = 0.9056390622295664, rowmax = 5/8 */
    unsigned char sink[4];
    cr_assert_eq(hs_sinks_mark(BERT4_IDS, 4, 101, 102, sink, NULL), HS_OK);
    hs_entropy e;
    cr_assert_eq(hs_entropy_compute(BERT4, 1, 4, hs_vis_bidirectional(), sink, &e, NULL), HS_OK);
    cr_assert_eq(e.rows, 2);
    near(e.nats, 0.6277411625893768, 1e-7, "nats");
    near(e.norm, 0.9056390622295664, 1e-7, "norm");
    near(e.rowmax, 0.625, 1e-7, "rowmax");
}

Test(entropy, rejects_nan_and_negative_entries_naming_the_cell)
{
    float m[8] = {1, 0, 0.5f, 0.5f, 1, 0, 0.5f, 0.5f};
    m[6] = NAN;
    hs_entropy e[2];
    hs_error err = {{0}};
    cr_assert_eq(hs_entropy_compute(m, 2, 2, hs_vis_bidirectional(), NULL, e, &err), HS_E_VALUE);
    cr_assert_str_eq(err.msg, "entropy: maps: entry (map 1, row 1, col 0) is nan, expected a "
                              "finite probability >= 0");
    m[6] = -0.25f;
    cr_assert_eq(hs_entropy_compute(m, 2, 2, hs_vis_bidirectional(), NULL, e, &err), HS_E_VALUE);
    cr_assert(strstr(err.msg, "(map 1, row 1, col 0) is -0.25"), "%s", err.msg);
    m[6] = INFINITY;
    cr_assert_eq(hs_entropy_compute(m, 2, 2, hs_vis_bidirectional(), NULL, e, &err), HS_E_VALUE);
}

Test(entropy, rejects_bad_sizes)
{
    hs_entropy e;
    hs_error err = {{0}};
    cr_assert_eq(hs_entropy_compute(UNIFORM3, 1, 0, hs_vis_causal(), NULL, &e, &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "entropy: maps: n is 0, expected >= 1");
    cr_assert_eq(hs_entropy_compute(UNIFORM3, 0, 3, hs_vis_causal(), NULL, &e, &err), HS_E_ARG);
    cr_assert_eq(hs_entropy_compute(NULL, 1, 3, hs_vis_causal(), NULL, &e, &err), HS_E_ARG);
    cr_assert_eq(hs_entropy_compute(UNIFORM3, 1, 3, hs_vis_causal(), NULL, NULL, &err), HS_E_ARG);
}

/* ---- sinks ------------------------------------------------------------------------ */

Test(sinks, marks_position_zero_and_cls_sep)
{
    unsigned char s[4];
    cr_assert_eq(hs_sinks_mark(BERT4_IDS, 4, 101, 102, s, NULL), HS_OK);
    cr_assert(s[0] == 1 && s[1] == 0 && s[2] == 0 && s[3] == 1);
    cr_assert_eq(hs_sinks_mark(BERT4_IDS, 4, -1, -1, s, NULL), HS_OK);
    cr_assert(s[0] == 1 && s[1] == 0 && s[2] == 0 && s[3] == 0);
    cr_assert_eq(hs_sinks_mark(NULL, 4, -1, -1, s, NULL), HS_OK);
    hs_error err = {{0}};
    cr_assert_eq(hs_sinks_mark(NULL, 4, 101, 102, s, &err), HS_E_ARG);
}

/* ---- detectors -------------------------------------------------------------------- */

Test(detect, uniform_causal_map_scores)
{
    /* ids 5 6 5 over UNIFORM3.
     * prev: rows 1, 2: (A[1][0] + A[2][1]) / 2 = (1/2 + 1/3) / 2 = 5/12
     * self: (1 + 1/2 + 1/3) / 3 = 11/18; first: (1 + 1/2 + 1/3) / 3 = 11/18
     * duplicate: only row 2 has an earlier 5 (j = 0): A[2][0] = 1/3
     * induction: row 2 (id 5): j = 1 has ids[0] = 5 -> A[2][1] = 1/3 (j = 2 = i is
     *   excluded); row 1 (id 6): no j in 1..0; -> 1/3
     * sep: no sep id -> NaN */
    const int32_t ids[3] = {5, 6, 5};
    hs_detect d;
    cr_assert_eq(hs_detect_compute(UNIFORM3, 1, 3, hs_vis_causal(), seq_of(ids, -1), NULL, &d,
                                   NULL), HS_OK);
    near(d.prev_token, 5.0 / 12, 1e-7, "prev");
    near(d.self, 11.0 / 18, 1e-7, "self");
    near(d.first_token, 11.0 / 18, 1e-7, "first");
    near(d.duplicate, 1.0 / 3, 1e-7, "duplicate");
    near(d.induction, 1.0 / 3, 1e-7, "induction");
    cr_assert(isnan(d.sep));
    /* causal: key i + 1 is never visible; no [CLS] id, punctuation, segments or sinks */
    cr_assert(isnan(d.next_token) && isnan(d.cls) && isnan(d.punct));
    cr_assert(isnan(d.other_segment) && isnan(d.sink));
}

Test(detect, one_hot_previous_token_head)
{
    /* Bidirectional 4x4: row 0 -> key 3, rows i >= 1 -> key i-1.
     * prev = mean over rows 1..3 of 1 = 1; self = 0; first = (0 + 1 + 0 + 0) / 4 = 1/4 */
    const float m[16] = {
        0, 0, 0, 1,
        1, 0, 0, 0,
        0, 1, 0, 0,
        0, 0, 1, 0,
    };
    const int32_t ids[4] = {1, 2, 3, 4};
    hs_detect d;
    cr_assert_eq(hs_detect_compute(m, 1, 4, hs_vis_bidirectional(), seq_of(ids, -1), NULL, &d,
                                   NULL), HS_OK);
    cr_assert_eq(d.prev_token, 1.0);
    cr_assert_eq(d.self, 0.0);
    cr_assert_eq(d.first_token, 0.25);
    /* no repeated ids: no row has a duplicate cell */
    cr_assert(isnan(d.duplicate));
    /* j = i + 1 has ids[j-1] == ids[i] trivially (the "earlier copy" is the query
     * itself); that next-token cell is excluded, so no row has an induction cell → NaN. */
    cr_assert(isnan(d.induction));
}

Test(detect, perfect_induction_head_on_a_repeated_probe)
{
    /* ids a b c a b c; an induction head at i >= 3 looks at j = i - 2 (the token after
     * the earlier copy of ids[i]); rows 0..2 attend to key 0.
     * induction rows: i = 3..5 (ids[j-1] == ids[i] for j = i - 2), each mass 1 -> 1.
     * duplicate rows 3..5: cell j = i - 3 holds 0 -> 0. prev: rows 1..5: A[i][i-1] is 0
     * everywhere (row 1 and 2 look at key 0, i-1 = 0 only for row 1: 1) -> 1/5. */
    float m[36] = {0};
    for (int i = 0; i < 3; i++)
        m[i * 6 + 0] = 1;
    for (int i = 3; i < 6; i++)
        m[i * 6 + (i - 2)] = 1;
    const int32_t ids[6] = {11, 12, 13, 11, 12, 13};
    hs_detect d;
    cr_assert_eq(hs_detect_compute(m, 1, 6, hs_vis_causal(), seq_of(ids, -1), NULL, &d,
                                   NULL), HS_OK);
    cr_assert_eq(d.induction, 1.0);
    cr_assert_eq(d.duplicate, 0.0);
    near(d.prev_token, 0.2, 1e-15, "prev");
}

Test(detect, sep_mass_and_sink_exclusion)
{
    /* BERT4 with sep id 102 at column 3, raw over all rows:
     * sep = (0.1 + 0.2 + 0.5 + 0.25) / 4 = 0.2625; first = (0.7 + 0.4 + 0.1 + 0.25) / 4 = 0.3625
     * Without exclusion: self = (0.7 + 0.3 + 0.2 + 0.25) / 4 = 0.3625,
     *   prev = (0.4 + 0.2 + 0.25) / 3 = 0.2833...
     * Excluding sinks 0 and 3: rows 1, 2 with non-sink mass 0.4 each;
     *   self = (0.3/0.4 + 0.2/0.4) / 2 = 0.625; prev: row 1's key 0 is a sink (no cell),
     *   row 2: 0.2/0.4 = 0.5 -> 0.5; first and sep stay raw. */
    hs_detect d;
    cr_assert_eq(hs_detect_compute(BERT4, 1, 4, hs_vis_bidirectional(), seq_of(BERT4_IDS, 102),
                                   NULL, &d, NULL), HS_OK);
    near(d.sep, 0.2625, 1e-7, "sep");
    near(d.first_token, 0.3625, 1e-7, "first");
    near(d.self, 0.3625, 1e-7, "self");
    near(d.prev_token, 0.85 / 3, 1e-7, "prev");
    unsigned char sink[4];
    cr_assert_eq(hs_sinks_mark(BERT4_IDS, 4, 101, 102, sink, NULL), HS_OK);
    cr_assert_eq(hs_detect_compute(BERT4, 1, 4, hs_vis_bidirectional(), seq_of(BERT4_IDS, 102),
                                   sink, &d, NULL), HS_OK);
    near(d.self, 0.625, 1e-7, "self, no sinks");
    near(d.prev_token, 0.5, 1e-7, "prev, no sinks");
    near(d.sep, 0.2625, 1e-7, "sep, no sinks");
    near(d.first_token, 0.3625, 1e-7, "first, no sinks");
    /* sep id absent from the text: no row has a [SEP] cell */
    cr_assert_eq(hs_detect_compute(BERT4, 1, 4, hs_vis_bidirectional(), seq_of(BERT4_IDS, 999),
                                   NULL, &d, NULL), HS_OK);
    cr_assert(isnan(d.sep));
}

/* BERT4 as a pair: types 0 0 1 1; token 2 taken as punctuation. */
static const int32_t BERT4_TYPES[4] = {0, 0, 1, 1};
static const unsigned char BERT4_PUNCT[4] = {0, 0, 1, 0};

Test(detect, bert_next_cls_punctuation_and_other_segment_on_all_attention)
{
    /* next: rows 0..2, A[0][1] + A[1][2] + A[2][3] = 0.1 + 0.1 + 0.5 -> 0.7 / 3
     * cls (key 0 in every row): (0.7 + 0.4 + 0.1 + 0.25) / 4 = 0.3625
     * punct (key 2): (0.1 + 0.1 + 0.2 + 0.25) / 4 = 0.1625
     * other segment: row 0 keys 2,3: 0.2; row 1: 0.3; row 2 keys 0,1: 0.3; row 3: 0.5
     *   -> 1.3 / 4 = 0.325; no sink positions given -> sink NaN */
    hs_detect_seq q = {BERT4_IDS, 101, 102, BERT4_TYPES, BERT4_PUNCT};
    hs_detect d;
    cr_assert_eq(hs_detect_compute(BERT4, 1, 4, hs_vis_bidirectional(), &q, NULL, &d, NULL), HS_OK);
    near(d.next_token, 0.7 / 3, 1e-7, "next");
    near(d.cls, 0.3625, 1e-7, "cls");
    near(d.punct, 0.1625, 1e-7, "punct");
    near(d.other_segment, 0.325, 1e-7, "other segment");
    cr_assert(isnan(d.sink));
}

Test(detect, bert_without_sinks_rows_renormalise_and_sink_mass_stays_raw)
{
    /* sinks 0 and 3: rows 1 and 2 remain, non-sink mass 0.4 each.
     * sink mass (raw, every row): (0.8 + 0.6 + 0.6 + 0.5) / 4 = 0.625
     * next: row 1 -> key 2: 0.1 / 0.4 = 0.25; row 2 -> key 3 is a sink: no cell -> 0.25
     * punct: row 1: 0.1 / 0.4, row 2: 0.2 / 0.4 -> (0.25 + 0.5) / 2 = 0.375
     * other segment: row 1 key 2: 0.25; row 2 key 1: 0.5 -> 0.375; cls stays raw */
    hs_detect_seq q = {BERT4_IDS, 101, 102, BERT4_TYPES, BERT4_PUNCT};
    unsigned char sink[4];
    cr_assert_eq(hs_sinks_mark(BERT4_IDS, 4, 101, 102, sink, NULL), HS_OK);
    hs_detect d;
    cr_assert_eq(hs_detect_compute(BERT4, 1, 4, hs_vis_bidirectional(), &q, sink, &d, NULL), HS_OK);
    near(d.sink, 0.625, 1e-7, "sink");
    near(d.next_token, 0.25, 1e-7, "next");
    near(d.punct, 0.375, 1e-7, "punct");
    near(d.other_segment, 0.375, 1e-7, "other segment");
    near(d.cls, 0.3625, 1e-7, "cls");
    /* punctuation configured as a sink: its cells are gone, so no row has one */
    unsigned char sink2[4] = {1, 0, 1, 1};
    cr_assert_eq(hs_detect_compute(BERT4, 1, 4, hs_vis_bidirectional(), &q, sink2, &d,
                                   NULL), HS_OK);
    cr_assert(isnan(d.punct));
    near(d.sink, (0.9 + 0.7 + 0.8 + 0.75) / 4, 1e-7, "sink with punctuation");
}

Test(detect, rejects_null_ids)
{
    hs_detect d;
    hs_error err = {{0}};
    cr_assert_eq(hs_detect_compute(UNIFORM3, 1, 3, hs_vis_causal(), seq_of(NULL, -1), NULL, &d,
                                   &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "detect: NULL ids");
}

/* ---- probe ------------------------------------------------------------------------ */

Test(probe, matches_an_independent_splitmix64_implementation)
{
    /* Expected values from a Python transcription of the algorithm documented in
     * analysis.h (dict-backed Fisher-Yates); splitmix64(1234567) first output is the
     * published test vector 6457827717110365317. */
    const int32_t want[16] = {17413, 47046, 9518, 21754, 27462, 45327, 22661, 5248,
                              17413, 47046, 9518, 21754, 27462, 45327, 22661, 5248};
    int32_t out[16];
    cr_assert_eq(hs_probe_repeated(42, 8, 1000, 50000, out, NULL), HS_OK);
    cr_assert(memcmp(out, want, sizeof want) == 0);
    const int32_t want2[10] = {10, 11, 13, 12, 14, 10, 11, 13, 12, 14};
    int32_t out2[10];
    cr_assert_eq(hs_probe_repeated(0, 5, 10, 15, out2, NULL), HS_OK);
    cr_assert(memcmp(out2, want2, sizeof want2) == 0);
}

Test(probe, halves_repeat_distinct_ids_in_range)
{
    enum { H = 500 };
    int32_t *out = malloc(2 * H * sizeof *out);
    cr_assert_eq(hs_probe_repeated(7, H, 100, 700, out, NULL), HS_OK);
    for (int k = 0; k < H; k++) {
        cr_assert(out[k] >= 100 && out[k] < 700);
        cr_assert_eq(out[H + k], out[k]);
        for (int j = 0; j < k; j++)
            cr_assert_neq(out[j], out[k]);
    }
    free(out);
}

Test(probe, rejects_a_range_smaller_than_half_len)
{
    int32_t out[8];
    hs_error err = {{0}};
    cr_assert_eq(hs_probe_repeated(1, 4, 10, 13, out, &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "probe: id range [10, 13) holds 3 ids, fewer than half_len 4");
    cr_assert_eq(hs_probe_repeated(1, 0, 10, 13, out, &err), HS_E_ARG);
    cr_assert_eq(hs_probe_repeated(1, 2, 13, 13, out, &err), HS_E_ARG);
    cr_assert_eq(hs_probe_repeated(1, 2, -5, 13, out, &err), HS_E_ARG);
    /* the whole range: a permutation */
    cr_assert_eq(hs_probe_repeated(1, 3, 10, 13, out, &err), HS_OK);
    cr_assert_eq(out[0] + out[1] + out[2], 33);
}

/* ---- diversity and similarity ----------------------------------------------------- */

/* Three bidirectional 2x2 heads: identity, swap, uniform. */
static const float HEADS3[12] = {
    1, 0, 0, 1,
    0, 1, 1, 0,
    0.5f, 0.5f, 0.5f, 0.5f,
};

Test(diversity, hand_worked_frobenius_distances)
{
    /* ||I - S||_F = sqrt(4) = 2; ||I - U|| = ||S - U|| = sqrt(4 * 0.25) = 1.
     * One layer of 3 heads: (1/9) * 2 * (2 + 1 + 1) = 8/9. */
    double layer[1], pw[9];
    cr_assert_eq(hs_diversity_compute(HEADS3, 1, 3, 2, TU_BIDIR, 1, layer, pw, NULL), HS_OK);
    near(pw[0 * 3 + 1], 2.0, TOL, "d(I,S)");
    near(pw[0 * 3 + 2], 1.0, TOL, "d(I,U)");
    near(pw[2 * 3 + 1], 1.0, TOL, "d(U,S)");
    cr_assert_eq(pw[0], 0.0);
    cr_assert_eq(pw[1 * 3 + 0], pw[0 * 3 + 1]);
    near(layer[0], 8.0 / 9, TOL, "layer");
    /* without the pairwise matrix, same layer value */
    double layer2[1];
    cr_assert_eq(hs_diversity_compute(HEADS3, 1, 3, 2, TU_BIDIR, 1, layer2, NULL, NULL), HS_OK);
    near(layer2[0], 8.0 / 9, TOL, "layer, no matrix");
    /* as 3 layers of one head each: every layer diversity is 0 */
    double layers[3];
    cr_assert_eq(hs_diversity_compute(HEADS3, 3, 1, 2, TU_BIDIR, 1, layers, NULL, NULL), HS_OK);
    cr_assert(layers[0] == 0 && layers[1] == 0 && layers[2] == 0);
}

Test(diversity, near_identical_heads_keep_full_precision)
{
    /* Two 64x64 uniform rows, the second with 1e-4 moved from key 0 to key 1 in one row:
     * d = sqrt(2) * 1e-4 exactly as the float entries differ, which the Gram form
     * ||a||^2 + ||b||^2 - 2<a,b> would lose. */
    enum { N = 64 };
    float *m = malloc(2 * N * N * sizeof *m);
    for (int k = 0; k < 2 * N * N; k++)
        m[k] = 1.0f / N;
    m[N * N + 5 * N + 0] -= 1e-4f;
    m[N * N + 5 * N + 1] += 1e-4f;
    double want = hypot((double)m[0] - m[N * N + 5 * N], (double)m[1] - m[N * N + 5 * N + 1]);
    double pw[4], layer[1];
    cr_assert_eq(hs_diversity_compute(m, 1, 2, N, TU_BIDIR, 1, layer, pw, NULL), HS_OK);
    near(pw[1], want, 1e-15, "d");
    near(layer[0], want / 2, 1e-15, "layer");
    free(m);
}

Test(similarity, pearson_hand_worked)
{
    /* Over all 4 entries: I = (1,0,0,1), S = (0,1,1,0) = 1 - I -> r = -1.
     * U is constant (zero variance) -> r = 0 with the others, 1 with itself. */
    double r[9];
    cr_assert_eq(hs_similarity_compute(HEADS3, 3, 2, TU_BIDIR, 1, HS_SIM_PEARSON, r, NULL), HS_OK);
    cr_assert_eq(r[0], 1.0);
    cr_assert_eq(r[4], 1.0);
    cr_assert_eq(r[8], 1.0);
    near(r[1], -1.0, TOL, "r(I,S)");
    cr_assert_eq(r[2], 0.0);
    cr_assert_eq(r[5], 0.0);
    cr_assert_eq(r[3], r[1]);
}

Test(similarity, pearson_uses_only_the_lower_triangle_when_causal)
{
    /* Two causal 2x2 maps; visible entries (0,0), (1,0), (1,1):
     * a = (1, 0.5, 0.5), b = (1, 0.25, 0.75) (junk above the diagonal differs).
     * a - mean: (1/3, -1/6, -1/6); b - mean: (1/3, -5/12, 1/12)
     * cov = 1/9 + 5/72 - 1/72 = 1/6; var a = 1/9 + 1/36 + 1/36 = 1/6;
     * var b = 1/9 + 25/144 + 1/144 = 42/144 = 7/24; r = (1/6) / sqrt(1/6 * 7/24)
     *   = sqrt(4/7) = 0.7559289460184544 */
    const float m[8] = {1, 0.9f, 0.5f, 0.5f, 1, 0, 0.25f, 0.75f};
    double r[4];
    cr_assert_eq(hs_similarity_compute(m, 2, 2, TU_CAUSAL, 1, HS_SIM_PEARSON, r, NULL), HS_OK);
    near(r[1], sqrt(4.0 / 7), TOL, "r");
}

Test(similarity, identical_heads_correlate_fully)
{
    float m[18];
    memcpy(m, UNIFORM3, sizeof UNIFORM3);
    memcpy(m + 9, UNIFORM3, sizeof UNIFORM3);
    double r[4], js[4], pw[4], layer[1];
    cr_assert_eq(hs_similarity_compute(m, 2, 3, TU_CAUSAL, 1, HS_SIM_PEARSON, r, NULL), HS_OK);
    near(r[1], 1.0, TOL, "r");
    cr_assert_eq(hs_similarity_compute(m, 2, 3, TU_CAUSAL, 1, HS_SIM_JS, js, NULL), HS_OK);
    cr_assert_eq(js[1], 0.0);
    cr_assert_eq(hs_diversity_compute(m, 1, 2, 3, TU_BIDIR, 1, layer, pw, NULL), HS_OK);
    cr_assert_eq(pw[1], 0.0);
    cr_assert_eq(layer[0], 0.0);
}

Test(similarity, jensen_shannon_hand_worked)
{
    /* JS(I, S): each row P = (1,0), Q = (0,1), M = (1/2,1/2): KL(P||M) = ln 2 -> JS = ln 2.
     * JS(I, U): row P = (1,0), Q = (1/2,1/2), M = (3/4,1/4):
     *   KL(P||M) = ln(4/3); KL(Q||M) = 1/2 ln(2/3) + 1/2 ln 2 = 1/2 ln(4/3)
     *   JS = 1/2 ln(4/3) + 1/4 ln(4/3) = 3/4 ln(4/3) = 0.21576155433883568 (both rows) */
    double js[9];
    cr_assert_eq(hs_similarity_compute(HEADS3, 3, 2, TU_BIDIR, 1, HS_SIM_JS, js, NULL), HS_OK);
    near(js[1], log(2.0), TOL, "JS(I,S)");
    near(js[2], 0.75 * log(4.0 / 3), TOL, "JS(I,U)");
    near(js[5], 0.75 * log(4.0 / 3), TOL, "JS(S,U)");
    cr_assert_eq(js[0], 0.0);
    cr_assert_eq(js[7], js[5]);
}

/* Random row-stochastic maps (LCG, softmax of scores of std ~2). */
static float *random_maps(int N, int n, int causal, uint64_t seed)
{
    float *m = calloc((size_t)N * n * n, sizeof *m);
    cr_assert_not_null(m);
    uint64_t s = seed;
    for (int a = 0; a < N; a++)
        for (int i = 0; i < n; i++) {
            float *row = m + ((size_t)a * n + i) * n;
            int nk = causal ? i + 1 : n;
            double z = 0;
            for (int j = 0; j < nk; j++) {
                s = s * 6364136223846793005ULL + 1442695040888963407ULL;
                double u = (double)(s >> 11) / 9007199254740992.0;
                row[j] = (float)exp(4 * u);
                z += row[j];
            }
            for (int j = 0; j < nk; j++)
                row[j] = (float)(row[j] / z);
        }
    return m;
}

/* Two-pass Pearson straight from the definition. */
static double naive_pearson(const float *x, const float *y, int n, int causal)
{
    double sx = 0, sy = 0, cnt = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < (causal ? i + 1 : n); j++) {
            sx += x[(size_t)i * n + j];
            sy += y[(size_t)i * n + j];
            cnt++;
        }
    double mx = sx / cnt, my = sy / cnt, sxy = 0, sxx = 0, syy = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < (causal ? i + 1 : n); j++) {
            double a = x[(size_t)i * n + j] - mx, b = y[(size_t)i * n + j] - my;
            sxy += a * b;
            sxx += a * a;
            syy += b * b;
        }
    return sxy / sqrt(sxx * syy);
}

Test(similarity, long_sequences_are_accumulated_in_chunks)
{
    /* 4 maps of n = 800 (causal: 320400 entries) and n = 600 (bidirectional: 360000)
     * span several Gram chunks, with chunk borders inside rows. */
    for (int causal = 0; causal < 2; causal++) {
        int n = causal ? 800 : 600, N = 4;
        float *m = random_maps(N, n, causal, 99 + (uint64_t)causal);
        /* make map 3 a blend of 0 and 1 so correlations are far from 0 */
        for (size_t e = 0; e < (size_t)n * n; e++)
            m[3 * (size_t)n * n + e] = 0.5f * (m[e] + m[(size_t)n * n + e]);
        double r[16], pw[16];
        cr_assert_eq(hs_similarity_compute(m, N, n, causal ? TU_CAUSAL : TU_BIDIR, 1,
                                           HS_SIM_PEARSON, r, NULL), HS_OK);
        cr_assert_eq(hs_diversity_compute(m, 1, N, n, TU_BIDIR, 1, NULL, pw, NULL), HS_OK);
        for (int a = 0; a < N; a++)
            for (int b = 0; b < a; b++) {
                const float *x = m + (size_t)a * n * n, *y = m + (size_t)b * n * n;
                near(r[a * N + b], naive_pearson(x, y, n, causal), 1e-10, "r");
                double d2 = 0;
                for (size_t e = 0; e < (size_t)n * n; e++)
                    d2 += ((double)x[e] - y[e]) * ((double)x[e] - y[e]);
                near(pw[a * N + b], sqrt(d2), 1e-10, "frobenius");
            }
        free(m);
    }
}

/* JS straight from the definition: mean over rows of 1/2 KL(P||M) + 1/2 KL(Q||M). */
static double naive_js(const float *x, const float *y, int n, int causal)
{
    double total = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < (causal ? i + 1 : n); j++) {
            double p = x[(size_t)i * n + j], q = y[(size_t)i * n + j], m = 0.5 * (p + q);
            if (p > 0)
                total += 0.5 * p * log(p / m);
            if (q > 0)
                total += 0.5 * q * log(q / m);
        }
    return total / n;
}

Test(similarity, jensen_shannon_on_many_heads_matches_the_definition)
{
    /* 40 bidirectional heads of n = 128: enough work (12.8M cells) for the threaded
     * path on a multi-core machine; the result must not depend on it. */
    enum { N = 40, n = 128 };
    float *m = random_maps(N, n, 0, 5);
    double *js = malloc((size_t)N * N * sizeof *js);
    cr_assert_eq(hs_similarity_compute(m, N, n, TU_BIDIR, 1, HS_SIM_JS, js, NULL), HS_OK);
    for (int a = 1; a < N; a++) {
        const int bs[2] = {0, a - 1};
        for (int t = 0; t < 2; t++) {
            int b = bs[t];
            double want = naive_js(m + (size_t)a * n * n, m + (size_t)b * n * n, n, 0);
            near(js[a * N + b], want, 1e-12, "JS");
            cr_assert_eq(js[b * N + a], js[a * N + b]);
        }
        cr_assert_eq(js[a * N + a], 0.0);
    }
    free(js);
    free(m);
}

Test(similarity, rejects_missing_outputs)
{
    hs_error err = {{0}};
    cr_assert_eq(hs_diversity_compute(HEADS3, 1, 3, 2, TU_BIDIR, 1, NULL, NULL, &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "diversity: no output requested");
    cr_assert_eq(hs_diversity_compute(HEADS3, 0, 3, 2, TU_BIDIR, 1, NULL, NULL, &err), HS_E_ARG);
    cr_assert_eq(hs_similarity_compute(HEADS3, 3, 2, TU_BIDIR, 1, HS_SIM_PEARSON, NULL,
                                       &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "similarity: NULL output");
}

Test(similarity, distance_is_one_minus_r_or_the_divergence)
{
    const double r[4] = {1, 0.25, 0.25, 1};
    double d[4];
    cr_assert_eq(hs_similarity_distance(r, 2, HS_SIM_PEARSON, d, NULL), HS_OK);
    cr_assert(d[0] == 0 && d[1] == 0.75 && d[2] == 0.75 && d[3] == 0);
    cr_assert_eq(hs_similarity_distance(r, 2, HS_SIM_JS, d, NULL), HS_OK);
    cr_assert(d[0] == 0 && d[1] == 0.25);
    hs_error err = {{0}};
    cr_assert_eq(hs_similarity_compute(HEADS3, 3, 2, TU_BIDIR, 1, (hs_sim_method)7, d,
                                       &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "similarity: unknown method 7");
}

/* ---- clustering ------------------------------------------------------------------- */

static void check_merge(const hs_merge *m, int a, int b, double dist, int size)
{
    cr_assert(m->a == a && m->b == b && m->size == size, "merge (%d, %d, size %d), want (%d, %d, %d)",
              m->a, m->b, m->size, a, b, size);
    near(m->dist, dist, TOL, "merge distance");
}

Test(cluster, three_points_upgma_by_hand)
{
    /* d(0,1) = 2, d(0,2) = 6, d(1,2) = 10.
     * merge 0+1 at 2 -> cluster 3 (size 2); d(3,2) = (6 + 10) / 2 = 8;
     * merge 2+3 at 8 -> cluster 4 (size 3). Leaf order: root 4 = (2, 3) -> 2, 0, 1. */
    const double d[9] = {0, 2, 6, 2, 0, 10, 6, 10, 0};
    hs_linkage *lk = NULL;
    cr_assert_eq(hs_linkage_build(d, 3, &lk, NULL), HS_OK);
    cr_assert_eq(lk->n, 3);
    check_merge(&lk->merges[0], 0, 1, 2, 2);
    check_merge(&lk->merges[1], 2, 3, 8, 3);
    cr_assert(lk->order[0] == 2 && lk->order[1] == 0 && lk->order[2] == 1);
    int lab[3], k;
    cr_assert_eq(hs_linkage_cut(lk, 1.9, lab, &k, NULL), HS_OK);
    cr_assert(k == 3 && lab[0] == 0 && lab[1] == 1 && lab[2] == 2);
    cr_assert_eq(hs_linkage_cut(lk, 2.0, lab, &k, NULL), HS_OK); /* <= threshold merges */
    cr_assert(k == 2 && lab[0] == 0 && lab[1] == 0 && lab[2] == 1);
    cr_assert_eq(hs_linkage_cut(lk, 8.0, lab, &k, NULL), HS_OK);
    cr_assert(k == 1 && lab[0] == 0 && lab[1] == 0 && lab[2] == 0);
    hs_linkage_free(lk);
}

Test(cluster, four_points_upgma_by_hand)
{
    /* d(0,2) = 1, d(1,3) = 2, d(0,1) = 4, d(0,3) = 5, d(1,2) = 3, d(2,3) = 6.
     * merge 0+2 at 1 -> 4; d(4,1) = (4 + 3)/2 = 3.5, d(4,3) = (5 + 6)/2 = 5.5, d(1,3) = 2
     * merge 1+3 at 2 -> 5; d(4,5) = (4 + 5 + 3 + 6)/4 = 4.5 -> 6.
     * Leaf order 0 2 1 3; cut at 3: {0,2} {1,3} -> labels 0 1 0 1. */
    const double d[16] = {
        0, 4, 1, 5,
        4, 0, 3, 2,
        1, 3, 0, 6,
        5, 2, 6, 0,
    };
    hs_linkage *lk = NULL;
    cr_assert_eq(hs_linkage_build(d, 4, &lk, NULL), HS_OK);
    check_merge(&lk->merges[0], 0, 2, 1, 2);
    check_merge(&lk->merges[1], 1, 3, 2, 2);
    check_merge(&lk->merges[2], 4, 5, 4.5, 4);
    const int order[4] = {0, 2, 1, 3};
    cr_assert(memcmp(lk->order, order, sizeof order) == 0);
    int lab[4], k;
    cr_assert_eq(hs_linkage_cut(lk, 3, lab, &k, NULL), HS_OK);
    cr_assert(k == 2 && lab[0] == 0 && lab[1] == 1 && lab[2] == 0 && lab[3] == 1);
    hs_linkage_free(lk);
}

Test(cluster, ties_go_to_the_smallest_cluster_ids)
{
    /* All distances 1: (0,1) first (smallest ids) -> 4; then d(4,2) = d(4,3) = d(2,3) = 1
     * as id pairs (2,4), (3,4), (2,3): the smallest lower id is 2, shared by (2,3) and
     * (2,4), and the smaller higher id picks (2,3) -> 5; then (4,5). */
    const double d[16] = {0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0};
    hs_linkage *lk = NULL;
    cr_assert_eq(hs_linkage_build(d, 4, &lk, NULL), HS_OK);
    check_merge(&lk->merges[0], 0, 1, 1, 2);
    check_merge(&lk->merges[1], 2, 3, 1, 2);
    check_merge(&lk->merges[2], 4, 5, 1, 4);
    hs_linkage_free(lk);
}

Test(cluster, one_head_and_bad_input)
{
    const double one[1] = {0};
    hs_linkage *lk = NULL;
    cr_assert_eq(hs_linkage_build(one, 1, &lk, NULL), HS_OK);
    cr_assert(lk->n == 1 && lk->order[0] == 0);
    int lab[1] = {7}, k = 0;
    cr_assert_eq(hs_linkage_cut(lk, 0, lab, &k, NULL), HS_OK);
    cr_assert(k == 1 && lab[0] == 0);
    hs_error err = {{0}};
    cr_assert_eq(hs_linkage_cut(lk, NAN, lab, &k, &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "linkage cut: threshold is nan, expected finite and >= 0");
    cr_assert_eq(hs_linkage_cut(lk, -1, lab, &k, &err), HS_E_ARG);
    cr_assert_eq(hs_linkage_cut(lk, INFINITY, lab, &k, &err), HS_E_ARG);
    hs_linkage_free(lk);
    hs_linkage_free(NULL);

    const double asym[4] = {0, 1, 2, 0};
    cr_assert_eq(hs_linkage_build(asym, 2, &lk, &err), HS_E_VALUE);
    cr_assert_null(lk);
    cr_assert_str_eq(err.msg, "linkage: distance matrix is not symmetric at (1, 0): 2 vs 1");
    const double neg[4] = {0, -1, -1, 0};
    cr_assert_eq(hs_linkage_build(neg, 2, &lk, &err), HS_E_VALUE);
    cr_assert_str_eq(err.msg, "linkage: distance (1, 0) is -1, expected finite and >= 0");
    cr_assert_eq(hs_linkage_build(neg, 0, &lk, &err), HS_E_ARG);
}

Test(cluster, clusters_heads_by_correlation)
{
    /* I, S, U, and I again: r(I,I') = 1 -> distance 0, merged first; S is anti-correlated
     * with I (distance 2) and uncorrelated with U (distance 1). */
    float m[16];
    memcpy(m, HEADS3, sizeof HEADS3);
    memcpy(m + 12, HEADS3, 4 * sizeof(float));
    double r[16], d[16];
    cr_assert_eq(hs_similarity_compute(m, 4, 2, TU_BIDIR, 1, HS_SIM_PEARSON, r, NULL), HS_OK);
    cr_assert_eq(hs_similarity_distance(r, 4, HS_SIM_PEARSON, d, NULL), HS_OK);
    hs_linkage *lk = NULL;
    cr_assert_eq(hs_linkage_build(d, 4, &lk, NULL), HS_OK);
    /* d(0,3) = 0 -> 4; d(1,2) = 1, d(4,1) = 2, d(4,2) = 1: ties at 1 -> (1,2) before (2,4)
     * -> 5; d(4,5) = (2 + 2 + 1 + 1)/4 = 1.5 */
    check_merge(&lk->merges[0], 0, 3, 0, 2);
    check_merge(&lk->merges[1], 1, 2, 1, 2);
    check_merge(&lk->merges[2], 4, 5, 1.5, 4);
    int lab[4], k;
    cr_assert_eq(hs_linkage_cut(lk, 0.5, lab, &k, NULL), HS_OK);
    cr_assert(k == 3 && lab[0] == 0 && lab[1] == 1 && lab[2] == 2 && lab[3] == 0);
    hs_linkage_free(lk);
}

/* ---- word maps -------------------------------------------------------------------- */

Test(wordmap, sums_keys_and_averages_queries)
{
    /* tokens 0,1 form word 0, token 2 is word 1.
     * word row 0 = mean(row 0 -> (0.2+0.3, 0.5), row 1 -> (0.1+0.1, 0.8)) = (0.35, 0.65)
     * word row 1 = row 2 -> (0.6+0.2, 0.2) = (0.8, 0.2) */
    const float m[9] = {0.2f, 0.3f, 0.5f, 0.1f, 0.1f, 0.8f, 0.6f, 0.2f, 0.2f};
    const int32_t word[3] = {0, 0, 1};
    float out[4];
    cr_assert_eq(hs_wordmap_compute(m, 1, 3, hs_vis_bidirectional(), word, 2, out, NULL), HS_OK);
    near(out[0], 0.35, 1e-7, "w00");
    near(out[1], 0.65, 1e-7, "w01");
    near(out[2], 0.8, 1e-7, "w10");
    near(out[3], 0.2, 1e-7, "w11");
    const int32_t gap[3] = {0, 0, 2};
    hs_error err = {{0}};
    float out3[9];
    cr_assert_eq(hs_wordmap_compute(m, 1, 3, hs_vis_bidirectional(), gap, 3, out3,
                                    &err), HS_E_VALUE);
    cr_assert_str_eq(err.msg, "word map: word 1 has no tokens");
    cr_assert_eq(hs_wordmap_compute(m, 1, 3, hs_vis_bidirectional(), gap, 2, out,
                                    &err), HS_E_VALUE);
    cr_assert_str_eq(err.msg, "word map: token 2 has word 2, expected 0..1");
}

/* Words of hand-written token sequences and their labels. */
Test(wordmap, words_and_labels_of_wordpiece_and_byte_level_tokens)
{
    /* WordPiece: [CLS] s ##nor ##kel ##ing dog [SEP] -> [CLS] | snorkeling | dog | [SEP] */
    const char *const wp[7] = {"[CLS]", "s", "##nor", "##kel", "##ing", "dog", "[SEP]"};
    int32_t w[7];
    cr_assert_eq(hs_word_ids(wp, wp, NULL, 7, 1, NULL, w), 4);
    const int32_t want_wp[7] = {0, 1, 1, 1, 1, 2, 3};
    for (int i = 0; i < 7; i++)
        cr_assert_eq(w[i], want_wp[i], "wordpiece token %d: word %d", i, (int)w[i]);
    char **lab = hs_word_labels(wp, w, 7, 4);
    cr_assert_not_null(lab);
    cr_assert_str_eq(lab[1], "snorkeling");
    cr_assert_str_eq(lab[3], "[SEP]");
    for (int u = 0; u < 4; u++)
        free(lab[u]);
    free(lab);
    /* byte-level BPE (display forms): "Token" "ization" " of" " happens" "," "\n" "x"
     * "<|endoftext|>" "y" -> Tokenization | of | happens, | \n | x | <|endoftext|> | y
     * (a token that begins with white space starts a word, the newline's too) */
    const char *const raw[9] = {"Token", "ization", "Ġof", "Ġhappens", ",", "Ċ", "x",
                                "<|endoftext|>", "y"};
    const char *const disp[9] = {"Token", "ization", " of", " happens", ",", "\n", "x",
                                 "<|endoftext|>", "y"};
    int32_t b[9];
    cr_assert_eq(hs_word_ids(raw, disp, NULL, 9, 0, NULL, b), 7);
    const int32_t want_b[9] = {0, 0, 1, 2, 2, 3, 4, 5, 6};
    for (int i = 0; i < 9; i++)
        cr_assert_eq(b[i], want_b[i], "byte-level token %d: word %d", i, (int)b[i]);
    lab = hs_word_labels(disp, b, 9, 7);
    cr_assert_not_null(lab);
    cr_assert_str_eq(lab[0], "Tokenization");
    cr_assert_str_eq(lab[1], "of");
    cr_assert_str_eq(lab[2], "happens,");
    cr_assert_str_eq(lab[3], "\n");
    cr_assert_str_eq(lab[5], "<|endoftext|>");
    for (int u = 0; u < 7; u++)
        free(lab[u]);
    free(lab);
}
