/* Head types: the detectors Clark et al. add for BERT (next token, [CLS], punctuation,
 * other segment) and the sink mass on hand-worked maps, the punctuation test, the
 * threshold syntax, the labelling rule on hand-built scores, and the rule on trained
 * models: trained-gpt2's induction head (3.0, found by ablating it on a repeated random
 * sequence: it is the head whose loss rises most in the second half) and the
 * previous-token head that feeds it (2.3: ablating it drops 3.0's induction attention
 * from 0.25 to 0.02, fixtures/ref/check_heads.py); no induction head in a random-weight
 * model or in trained-bert. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/analysis.h"
#include "headscope/model.h"
#include "headscope/report.h"
#include "headscope/tokenizer.h"
#include "io/io_internal.h"
#include "analysis/metrics.h"
#include "testutil.h"

static void near(double got, double want, double tol, const char *what)
{
    cr_assert(fabs(got - want) <= tol, "%s: got %.17g, want %.17g", what, got, want);
}

Test(detect_bert, a_next_token_head_is_not_an_induction_head_on_the_probe)
{
    /* a b c a b c, bidirectional, every row on key i + 1 (the last on key 0): the cells
     * j with ids[j-1] == ids[i] are i + 3 (first half) and i - 2 (second half); none
     * holds attention, and j = i + 1 is excluded by definition. */
    float m[36] = {0};
    for (int i = 0; i < 6; i++)
        m[i * 6 + (i < 5 ? i + 1 : 0)] = 1;
    const int32_t ids[6] = {11, 12, 13, 11, 12, 13};
    hs_detect_seq q = {ids, -1, -1, NULL, NULL};
    hs_detect d;
    cr_assert_eq(hs_detect_compute(m, 1, 6, hs_vis_bidirectional(), &q, NULL, &d, NULL), HS_OK);
    cr_assert_eq(d.next_token, 1.0);
    cr_assert_eq(d.induction, 0.0);
}

Test(punct, unicode_punctuation_with_white_space)
{
    cr_assert(hs_token_is_punct("."));
    cr_assert(hs_token_is_punct(" ,"));           /* GPT-2's " ," */
    cr_assert(hs_token_is_punct("\xE2\x80\x94")); /* em dash, Pd */
    cr_assert(hs_token_is_punct("\xC2\xAB"));     /* «, Pi */
    cr_assert(hs_token_is_punct("?!"));
    cr_assert(!hs_token_is_punct("a."));
    cr_assert(!hs_token_is_punct("$"));           /* Sc: a symbol, not punctuation */
    cr_assert(!hs_token_is_punct(" "));
    cr_assert(!hs_token_is_punct(""));
    cr_assert(!hs_token_is_punct("[SEP]"));
    cr_assert(!hs_token_is_punct("\xFF"));        /* not UTF-8 */
}

Test(label_thresholds, defaults_names_and_syntax)
{
    double t[HS_LABEL_COUNT], s = 0.5;
    hs_label_thresholds_default(t);
    cr_assert_eq(t[HS_LABEL_PREV], 0.3);
    cr_assert_eq(t[HS_LABEL_IND], 0.3);
    cr_assert_eq(t[HS_LABEL_BROAD], 0.9);
    cr_assert_str_eq(hs_label_name(HS_LABEL_OTHER_SEG), "other_segment");
    cr_assert_str_eq(hs_sink_name(HS_SINK_PUNCT), "punctuation");
    cr_assert_str_eq(hs_label_name(HS_LABEL_COUNT), "unknown");
    hs_error err = {{0}};
    cr_assert_eq(hs_label_thresholds_parse("induction=0.2,sink=0.7,self=1", t, &s, &err), HS_OK,
                 "%s", err.msg);
    cr_assert_eq(t[HS_LABEL_IND], 0.2);
    cr_assert_eq(t[HS_LABEL_SELF], 1.0);
    cr_assert_eq(t[HS_LABEL_PREV], 0.3);
    cr_assert_eq(s, 0.7);
    cr_assert_eq(hs_label_thresholds_parse("0.25", t, &s, &err), HS_OK);
    for (int k = 0; k < HS_LABEL_COUNT; k++)
        cr_assert_eq(t[k], 0.25);
    cr_assert_eq(s, 0.7);
    static const struct {
        const char *spec, *msg;
    } bad[] = {
        {"1.5", "label threshold '1.5' is not a number in [0, 1]"},
        {"induction=x", "label threshold 'x' is not a number in [0, 1]"},
        {"induction=", "label threshold '' is not a number in [0, 1]"},
        {"copying=0.3", "unknown head type 'copying' (previous_token, next_token, self, "
                        "broad, other_segment, duplicate_token, induction or sink)"},
        {"self=0.3,induction", "label threshold 'induction' is not NAME=X"},
        {"self=0.3,", "label thresholds 'self=0.3,' end with a comma"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double t2[HS_LABEL_COUNT];
        hs_label_thresholds_default(t2);
        double s2 = 0.5;
        cr_assert_eq(hs_label_thresholds_parse(bad[i].spec, t2, &s2, &err), HS_E_ARG, "%s",
                     bad[i].spec);
        cr_assert_str_eq(err.msg, bad[i].msg);
        cr_assert_eq(t2[HS_LABEL_SELF], 0.4, "a failed parse changed the thresholds");
    }
}

/* ---- the labelling rule on hand-built scores -------------------------------------- */

static hs_head_result blank(void)
{
    hs_head_result h;
    memset(&h, 0, sizeof h);
    h.text_scores = h.text_free = h.probe_scores = h.probe_free = hs_detect_none();
    h.entropy_free.norm = NAN;
    return h;
}

Test(classify, several_labels_and_a_sink_beside_them)
{
    /* An induction head that parks on the first token: induction 0.44 on the probe
     * without sinks (0.44 / 0.3 = 1.47 times its threshold), self 0.45 on the text without
     * sinks (1.125 times), 0.82 of its raw attention on the first token. */
    double t[HS_LABEL_COUNT];
    hs_label_thresholds_default(t);
    hs_head_result h = blank();
    h.probe_free.induction = 0.44;
    h.probe_scores.induction = 0.37; /* on all attention: not what the label reads */
    h.text_free.self = 0.45;
    h.text_free.prev_token = 0.29;   /* just under 0.3 */
    h.text_scores.first_token = 0.82;
    h.text_scores.prev_token = 0.9;  /* all-attention scores never label */
    hs_head_classify(&h, t, 0.5, 0);
    cr_assert_eq(h.labels, (1u << HS_LABEL_IND) | (1u << HS_LABEL_SELF));
    cr_assert_eq(h.sink_types, 1u << HS_SINK_FIRST);
    cr_assert_str_eq(h.label, "induction");
    near(hs_label_score(&h, HS_LABEL_IND), 0.44, 0, "induction score");
    near(hs_sink_score(&h, HS_SINK_FIRST), 0.82, 0, "first-token mass");
    /* a threshold met exactly counts; NaN never does; BERT reports key 0 as [CLS] */
    h = blank();
    h.text_free.prev_token = 0.3;
    h.text_scores.first_token = 0.9;
    h.text_scores.cls = 0.9;
    h.text_scores.sep = NAN;
    hs_head_classify(&h, t, 0.5, 1);
    cr_assert_eq(h.labels, 1u << HS_LABEL_PREV);
    cr_assert_eq(h.sink_types, 1u << HS_SINK_CLS);
    h = blank();
    hs_head_classify(&h, t, 0.5, 0);
    cr_assert_eq(h.labels, 0u);
    cr_assert_str_eq(h.label, "none");
}

/* ---- trained and random models ----------------------------------------------------- */

static hs_analysis *analyze(const char *model, const char *text, const char *pair, hs_model **m)
{
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load(model, m, &err), HS_OK, "%s", err.msg);
    hs_encoding enc = {0};
    cr_assert_eq(hs_tokenizer_encode(hs_model_tokenizer(*m), text, strlen(text), pair,
                                     pair ? strlen(pair) : 0, &enc, &err),
                 HS_OK, "%s", err.msg);
    hs_analyze_opts o;
    hs_analyze_opts_default(&o);
    o.hash_files = 0;
    o.ablation = 0;
    o.gradient = 0;
    hs_analyze_input in = {.ids = enc.ids, .type_ids = enc.type_ids, .n = (int)enc.n};
    hs_analysis *a = NULL;
    cr_assert_eq(hs_analyze_run(*m, &in, &o, &a, &err), HS_OK, "%s", err.msg);
    hs_encoding_free(&enc);
    return a;
}

static const char TEXT[] =
    "The kernel scheduler decides which process runs next. When a process blocks on I/O, "
    "the scheduler picks another process from the run queue.";

static int has(const hs_head_result *h, int k) { return (h->labels >> k) & 1u; }

Test(trained, gpt2_induction_head_and_the_previous_token_head_feeding_it, .timeout = 60)
{
    hs_model *m = NULL;
    hs_analysis *a = analyze("fixtures/trained-gpt2", TEXT, NULL, &m);
    const hs_head_result *ind = &a->heads[3 * 4 + 0], *prev = &a->heads[2 * 4 + 3];
    cr_assert(has(ind, HS_LABEL_IND), "3.0 not labelled induction (%g)",
              hs_label_score(ind, HS_LABEL_IND));
    cr_assert_str_eq(ind->label, "induction");
    /* it parks on the first token (reported beside the label, not instead of it), and on
     * all attention its probe score is lower than without the sink */
    cr_assert(ind->sink_types & (1u << HS_SINK_FIRST));
    cr_assert_gt(ind->text_scores.first_token, 0.5);
    cr_assert_lt(ind->probe_scores.induction, ind->probe_free.induction);
    cr_assert(has(prev, HS_LABEL_PREV), "2.3 not labelled previous_token (%g)",
              hs_label_score(prev, HS_LABEL_PREV));
    for (int k = 0; k < a->n_heads; k++) {
        if (k != 3 * 4 + 0)
            cr_assert(!has(&a->heads[k], HS_LABEL_IND), "head %d.%d labelled induction",
                      a->heads[k].layer, a->heads[k].head);
        if (k != 2 * 4 + 3)
            cr_assert(!has(&a->heads[k], HS_LABEL_PREV), "head %d.%d labelled previous_token",
                      a->heads[k].layer, a->heads[k].head);
    }
    hs_analysis_free(a);
    hs_model_free(m);
}

Test(trained, no_induction_head_in_a_random_weight_model)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load("fixtures/models/gpt2-f16", &m, &err), HS_OK, "%s", err.msg);
    int32_t ids[40];
    for (int i = 0; i < 40; i++)
        ids[i] = (int32_t)(300 + (i * 37) % 600); /* no repeats */
    hs_analyze_opts o;
    hs_analyze_opts_default(&o);
    o.hash_files = 0;
    o.ablation = 0;
    o.gradient = 0;
    hs_analyze_input in = {.ids = ids, .n = 40};
    hs_analysis *a = NULL;
    cr_assert_eq(hs_analyze_run(m, &in, &o, &a, &err), HS_OK, "%s", err.msg);
    for (int k = 0; k < a->n_heads; k++)
        cr_assert(!has(&a->heads[k], HS_LABEL_IND) && !has(&a->heads[k], HS_LABEL_DUP),
                  "random head %d.%d labelled induction/duplicate (%g, %g)", a->heads[k].layer,
                  a->heads[k].head, hs_label_score(&a->heads[k], HS_LABEL_IND),
                  hs_label_score(&a->heads[k], HS_LABEL_DUP));
    hs_analysis_free(a);
    hs_model_free(m);
}

Test(trained, no_induction_head_in_trained_bert, .timeout = 60)
{
    const char *dir = SHARED_MODELS "/trained-bert";
    if (access(dir, R_OK) != 0)
        cr_skip_test("%s is absent (only beside the development checkout)", dir);
    hs_model *m = NULL;
    hs_analysis *a = analyze(dir, TEXT, "Mr Dursley and Mrs Dursley lived at number four.", &m);
    int other = 0;
    for (int k = 0; k < a->n_heads; k++) {
        cr_assert(!has(&a->heads[k], HS_LABEL_IND), "bert head %d.%d labelled induction (%g)",
                  a->heads[k].layer, a->heads[k].head, hs_label_score(&a->heads[k], HS_LABEL_IND));
        other |= !isnan(a->heads[k].text_free.other_segment);
    }
    cr_assert(other, "a sentence pair gives other-segment scores");
    hs_analysis_free(a);
    hs_model_free(m);
}

Test(detect_floor, rows_almost_all_on_sinks_are_left_out_without_sinks)
{
    /* causal 2 x 2, sink at 0: row 1 puts 5e-5 off the sink (below HS_SINK_MIN_MASS): no row
     * is left, self is NaN; with 0.01 off the sink, row 1 renormalises to self = 1. */
    const float m1[4] = {1, 0, 0.99995f, 0.00005f}, m2[4] = {1, 0, 0.99f, 0.01f};
    const int32_t ids[2] = {5, 6};
    const unsigned char sink[2] = {1, 0};
    hs_detect_seq q = {ids, -1, -1, NULL, NULL};
    hs_detect d;
    hs_entropy e;
    cr_assert_eq(hs_detect_compute(m1, 1, 2, hs_vis_causal(), &q, sink, &d, NULL), HS_OK);
    cr_assert(isnan(d.self));
    cr_assert_eq(hs_entropy_compute(m1, 1, 2, hs_vis_causal(), sink, &e, NULL), HS_OK);
    cr_assert_eq(e.rows, 0);
    cr_assert_eq(hs_detect_compute(m2, 1, 2, hs_vis_causal(), &q, sink, &d, NULL), HS_OK);
    near(d.self, 1.0, 1e-12, "self");
    near(d.sink, (1 + 0.99) / 2, 1e-7, "sink mass");
}
