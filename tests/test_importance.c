/* Ablation importance and pruning, against the independent float64 reference
 * (fixtures/golden/<case>.json "importance": loss with one head masked minus the loss with
 * all heads), and the documented MLM position rule worked by hand. */
#include <cJSON.h>

#include "core/core.h"
#include "headscope/forward.h"
#include "headscope/importance.h"
#include "headscope/model.h"
#include "testutil.h"

#define IMP_TOL 1e-4
/* batched against single passes: relative (absolute below 1) on a loss */
#define BATCH_TOL 1e-6

static cJSON *case_json(const char *name)
{
    char path[256], *text;
    size_t len;
    snprintf(path, sizeof path, "fixtures/golden/%s.json", name);
    cr_assert_eq(hs_read_file(path, 1 << 24, &text, &len, NULL), HS_OK);
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    cr_assert_not_null(j);
    return j;
}

static int32_t *json_ids(const cJSON *a, int *n)
{
    *n = cJSON_GetArraySize(a);
    int32_t *v = malloc((size_t)*n * sizeof *v);
    for (int i = 0; i < *n; i++)
        v[i] = (int32_t)cJSON_GetArrayItem(a, i)->valueint;
    return v;
}

static void run_case(const char *name)
{
    cJSON *j = case_json(name);
    char mpath[256];
    snprintf(mpath, sizeof mpath, "%s", cJSON_GetObjectItem(j, "model")->valuestring);
    hs_error err = {{0}};
    hs_model *m;
    cr_assert_eq(hs_model_load(mpath, &m, &err), HS_OK, "%s", err.msg);
    const hs_model_config *c = hs_model_config_of(m);
    const cJSON *imp = cJSON_GetObjectItem(j, "importance");
    const char *kind = cJSON_GetObjectItem(imp, "loss_kind")->valuestring;

    int n, npos = 0;
    int32_t *ids = json_ids(cJSON_GetObjectItem(j, "ids"), &n);
    int32_t *tt = cJSON_IsArray(cJSON_GetObjectItem(j, "type_ids"))
                      ? json_ids(cJSON_GetObjectItem(j, "type_ids"), &n) : NULL;
    int32_t *pos = NULL, *targets = NULL;
    hs_loss_input in = {.ids = ids, .type_ids = tt, .n = n};
    if (!strcmp(kind, "lm")) {
        in.kind = HS_LOSS_LM;
    } else if (!strcmp(kind, "mlm")) {
        in.kind = HS_LOSS_MLM;
        pos = json_ids(cJSON_GetObjectItem(j, "positions"), &npos);
        int no;
        int32_t *orig = json_ids(cJSON_GetObjectItem(j, "orig_ids"), &no);
        targets = malloc((size_t)npos * sizeof *targets);
        for (int k = 0; k < npos; k++)
            targets[k] = orig[pos[k]];
        free(orig);
        in.positions = pos;
        in.targets = targets;
        in.n_pos = npos;
    } else {
        in.kind = HS_LOSS_REPR;
    }
    hs_loss_eval *ev;
    cr_assert_eq(hs_loss_eval_new(m, &in, &ev, &err), HS_OK, "%s", err.msg);
    double base;
    cr_assert_eq(hs_loss_eval_run(ev, NULL, &base, &err), HS_OK, "%s", err.msg);
    double want_base = cJSON_GetObjectItem(imp, "base_loss")->valuedouble;
    cr_expect(fabs(base - want_base) <= IMP_TOL, "%s: base %.7f vs %.7f", name, base, want_base);
    int lh = c->n_layer * c->n_head;
    double *delta = malloc((size_t)lh * sizeof *delta);
    cr_assert_eq(hs_ablation_sweep(ev, base, NULL, delta, NULL, NULL, &err), HS_OK, "%s", err.msg);
    const cJSON *abl = cJSON_GetObjectItem(imp, "ablation");
    for (int l = 0; l < c->n_layer; l++)
        for (int h = 0; h < c->n_head; h++) {
            double want = cJSON_GetArrayItem(cJSON_GetArrayItem(abl, l), h)->valuedouble;
            cr_expect(fabs(delta[l * c->n_head + h] - want) <= IMP_TOL,
                      "%s: ablation %d.%d = %.7f, reference %.7f", name, l, h,
                      delta[l * c->n_head + h], want);
        }
    cr_assert_eq(hs_loss_eval_passes(ev), lh + 1 + (in.kind == HS_LOSS_REPR));

    /* The sweep batches each layer's heads into one pass, whose GEMMs are cut differently
     * from a single pass's: the same losses within BATCH_TOL. One copy per pass (a budget
     * below one copy) is the single-pass path, to the bit; two copies per pass splits a
     * layer into sub-batches. */
    double *single = malloc((size_t)lh * sizeof *single), *split = malloc((size_t)lh * sizeof *split);
    hs_loss_eval_set_batch_memory(ev, 1);
    cr_assert_eq(hs_ablation_sweep(ev, base, NULL, single, NULL, NULL, &err), HS_OK, "%s", err.msg);
    size_t rows = in.kind == HS_LOSS_MLM ? (size_t)in.n_pos : (size_t)n;
    size_t out = in.kind == HS_LOSS_REPR ? (size_t)n * c->d_model : rows * c->vocab_size;
    size_t copy = (out + (size_t)n * (6 * (size_t)c->d_model + (size_t)c->d_ff)) * sizeof(float);
    hs_loss_eval_set_batch_memory(ev, 2 * copy + 1);
    cr_assert_eq(hs_ablation_sweep(ev, base, NULL, split, NULL, NULL, &err), HS_OK, "%s", err.msg);
    hs_loss_eval_set_batch_memory(ev, 0);
    float *mask = malloc((size_t)lh * sizeof *mask);
    for (int k = 0; k < lh; k++)
        mask[k] = 1.0f;
    for (int k = 0; k < lh; k++) {
        double loss;
        mask[k] = 0.0f;
        cr_assert_eq(hs_loss_eval_run(ev, mask, &loss, &err), HS_OK, "%s", err.msg);
        mask[k] = 1.0f;
        double tol = BATCH_TOL * fmax(1.0, fabs(loss));
        cr_expect(single[k] == loss - base, "%s: head %d one copy per pass %.9g, single pass %.9g",
                  name, k, single[k], loss - base);
        cr_expect(fabs(base + delta[k] - loss) <= tol, "%s: head %d batched %.9g, single pass "
                  "%.9g", name, k, base + delta[k], loss);
        cr_expect(fabs(base + split[k] - loss) <= tol, "%s: head %d in sub-batches %.9g, single "
                  "pass %.9g", name, k, base + split[k], loss);
    }
    free(mask);
    free(single);
    free(split);

    /* Exact greedy (beam = all heads): the first removal is the head with the smallest
     * ablation increase, and its loss is base + that increase. */
    hs_prune_step *steps = malloc((size_t)lh * sizeof *steps);
    int ns;
    cr_assert_eq(hs_prune_curve(ev, base, NULL, delta, lh, 1e9, lh, steps, &ns, NULL, NULL, &err), HS_OK);
    cr_assert_eq(ns, lh - 1, "without a stop the curve runs to one head left");
    int argmin = 0;
    for (int k = 1; k < lh; k++)
        if (delta[k] < delta[argmin])
            argmin = k;
    cr_expect_eq(steps[0].head, argmin);
    cr_expect(fabs(steps[0].loss - (base + delta[argmin])) <= BATCH_TOL * fmax(1.0, fabs(base)));
    cr_expect_eq(steps[ns - 1].heads_left, 1);
    for (int a = 0; a < ns; a++)
        for (int b = a + 1; b < ns; b++)
            cr_assert_neq(steps[a].head, steps[b].head, "a head removed twice");
    free(steps);

    /* Michel et al.'s rounds against the reference's, round by round, while the reference's
     * decision margin (next candidate's importance minus the last taken) is clear of float32
     * noise (>= 1e-3) or an exact tie (single-head layers normalise to exactly 1). */
    const cJSON *pg = cJSON_GetObjectItem(imp, "pruning_gradient");
    if (pg) {
        int per = (int)floor(0.1 * lh + 0.5);
        per = per < 1 ? 1 : per;
        steps = malloc((size_t)lh * sizeof *steps);
        cr_assert_eq(hs_prune_curve_gradient(ev, base, NULL, per, fabs(base) * 0.1, 64, steps, &ns,
                                             NULL, NULL, &err), HS_OK, "%s", err.msg);
        int compared = 0, at = 0;
        for (int r = 0; r < cJSON_GetArraySize(pg); r++) {
            const cJSON *rw = cJSON_GetArrayItem(pg, r), *rm = cJSON_GetObjectItem(rw, "removed");
            for (int t = 0; t < cJSON_GetArraySize(rm); t++, at++) {
                cr_assert_lt(at, ns, "%s: curve shorter than the reference's", name);
                cr_expect_eq(steps[at].head, cJSON_GetArrayItem(rm, t)->valueint,
                             "%s: round %d removes %d, reference %d", name, r, steps[at].head,
                             cJSON_GetArrayItem(rm, t)->valueint);
                cr_expect_eq(steps[at].round, r);
                if (t == cJSON_GetArraySize(rm) - 1) /* after the whole round */
                    cr_expect_eq(steps[at].heads_left, cJSON_GetObjectItem(rw, "heads_left")->valueint);
                double wl = cJSON_GetObjectItem(rw, "loss")->valuedouble;
                cr_expect(fabs(steps[at].loss - wl) <= IMP_TOL, "%s: round %d loss %.7f, reference "
                          "%.7f", name, r, steps[at].loss, wl);
            }
            compared++;
            double gap = cJSON_GetObjectItem(rw, "importance_gap")->valuedouble;
            if (gap > 0 && gap < 1e-3)
                break; /* later rounds may legitimately differ */
            if (r + 1 == cJSON_GetArraySize(pg))
                cr_expect_eq(at, ns, "%s: %d heads removed, reference %d", name, ns, at);
        }
        cr_expect_geq(compared, 2, "%s: too few rounds compared", name);
        free(steps);
    }
    free(delta);
    hs_loss_eval_free(ev);
    free(ids);
    free(tt);
    free(pos);
    free(targets);
    hs_model_free(m);
    cJSON_Delete(j);
}

#define CASE(name) Test(ablation_golden, name) { run_case(#name); }
CASE(tiny_gpt2_induction)
CASE(tiny_gpt2_common)
CASE(trained_gpt2_induction)
CASE(tiny_bert_pair)
CASE(tiny_bert_sentence)
CASE(gpt2_prefixed)
CASE(gpt2_f16)
CASE(bert_legacy)
CASE(bert_f16)
CASE(bert_hub)
CASE(bert_bf16)
CASE(trained_gpt2_common)
CASE(gpt2_hub)

Test(mlm_positions, evenly_spaced_fifteen_percent_of_content)
{
    /* [CLS] w1..w20 [SEP]: 20 content tokens → round(3.0) = 3 positions, content indices
     * floor(0.5*20/3)=3, floor(1.5*20/3)=10, floor(2.5*20/3)=16 → positions 4, 11, 17. */
    int32_t ids[22];
    ids[0] = 101;
    for (int i = 1; i <= 20; i++)
        ids[i] = 2000 + i;
    ids[21] = 102;
    int32_t pos[8];
    int n = hs_mlm_positions(ids, 22, 101, 102, 0, 103, pos, 8);
    cr_assert_eq(n, 3);
    cr_assert_eq(pos[0], 4);
    cr_assert_eq(pos[1], 11);
    cr_assert_eq(pos[2], 17);
}

Test(mlm_positions, skips_specials_and_existing_masks)
{
    /* [CLS] a [MASK] b [SEP] c [SEP]: content a, b, c → round(0.45) → at least 1 → index
     * floor(0.5*3/1) = 1 → "b" at position 3. */
    int32_t ids[7] = {101, 2000, 103, 2001, 102, 2002, 102};
    int32_t pos[4];
    cr_assert_eq(hs_mlm_positions(ids, 7, 101, 102, 0, 103, pos, 4), 1);
    cr_assert_eq(pos[0], 3);
    int32_t only[2] = {101, 102};
    cr_assert_eq(hs_mlm_positions(only, 2, 101, 102, 0, 103, pos, 4), 0);
}

Test(loss, lm_needs_two_tokens_and_a_head)
{
    hs_error err = {{0}};
    hs_model *m;
    cr_assert_eq(hs_model_load("fixtures/models/bert-legacy", &m, &err), HS_OK, "%s", err.msg);
    int32_t ids[3] = {101, 5, 102};
    hs_loss_input in = {.ids = ids, .n = 3, .kind = HS_LOSS_MLM};
    hs_loss_eval *ev;
    cr_assert_eq(hs_loss_eval_new(m, &in, &ev, &err), HS_E_INPUT);
    cr_assert_not_null(strstr(err.msg, "no MLM head"), "%s", err.msg);
    hs_model_free(m);
}

Test(loss_span, parses_the_documented_forms_and_refuses_others)
{
    hs_error err = {{0}};
    hs_loss_span s;
    char buf[32];
    cr_assert_eq(hs_loss_span_parse("all", &s, &err), HS_OK);
    cr_assert_eq(s.kind, HS_SPAN_ALL);
    cr_assert_eq(hs_loss_span_parse("repeated", &s, &err), HS_OK);
    cr_assert_eq(s.kind, HS_SPAN_REPEATED);
    cr_assert_str_eq(hs_loss_span_format(&s, buf, sizeof buf), "repeated");
    cr_assert_eq(hs_loss_span_parse("3:17", &s, &err), HS_OK);
    cr_assert(s.kind == HS_SPAN_RANGE && s.begin == 3 && s.end == 17);
    cr_assert_str_eq(hs_loss_span_format(&s, buf, sizeof buf), "3:17");
    cr_assert_eq(hs_loss_span_parse("40:", &s, &err), HS_OK);
    cr_assert(s.kind == HS_SPAN_RANGE && s.begin == 40 && s.end == -1);
    cr_assert_str_eq(hs_loss_span_format(&s, buf, sizeof buf), "40:");
    static const char *const bad[] = {"", "second", ":3", "3", "-1:4", "3:-1", "a:b", "3:4x",
                                      "12345678901:"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert_eq(hs_loss_span_parse(bad[i], &s, &err), HS_E_ARG, "'%s'", bad[i]);
        cr_assert_not_null(strstr(err.msg, "is not 'all', 'repeated'"), "%s", err.msg);
    }
    cr_assert_eq(hs_loss_span_parse("5:5", &s, &err), HS_E_ARG);
    cr_assert_not_null(strstr(err.msg, "'5:5' is empty"), "%s", err.msg);
}

Test(loss_span, rows_worked_by_hand)
{
    /* rows 0..5 of 7 tokens; "repeated": the rows whose token occurred before (5 at 3, 6 at
       4; 8 at 5 is new; the last token, 6 at 6, has no next token to predict) */
    int32_t ids[7] = {5, 6, 7, 5, 6, 8, 6}, rows[6];
    hs_loss_span all = {HS_SPAN_ALL, 0, -1}, rep = {HS_SPAN_REPEATED, 0, -1};
    hs_loss_span mid = {HS_SPAN_RANGE, 2, 4}, tail = {HS_SPAN_RANGE, 4, -1};
    hs_loss_span past = {HS_SPAN_RANGE, 10, -1};
    cr_assert_eq(hs_loss_span_rows(&all, ids, 7, rows), 6);
    cr_assert_eq(rows[5], 5);
    cr_assert_eq(hs_loss_span_rows(&rep, ids, 7, rows), 2);
    cr_assert(rows[0] == 3 && rows[1] == 4);
    cr_assert_eq(hs_loss_span_rows(&mid, ids, 7, rows), 2);
    cr_assert(rows[0] == 2 && rows[1] == 3);
    cr_assert_eq(hs_loss_span_rows(&tail, ids, 7, rows), 2);
    cr_assert(rows[0] == 4 && rows[1] == 5);
    cr_assert_eq(hs_loss_span_rows(&past, ids, 7, rows), 0);
}

Test(loss_span, lm_rows_must_increase_within_the_text)
{
    hs_error err = {{0}};
    hs_model *m;
    cr_assert_eq(hs_model_load("fixtures/tiny-gpt2", &m, &err), HS_OK, "%s", err.msg);
    int32_t ids[5] = {10, 11, 12, 10, 11};
    int32_t back[2] = {3, 1}, out[2] = {1, 4};
    hs_loss_input in = {.ids = ids, .n = 5, .kind = HS_LOSS_LM, .positions = back, .n_pos = 2};
    hs_loss_eval *ev = NULL;
    cr_assert_eq(hs_loss_eval_new(m, &in, &ev, &err), HS_E_ARG);
    cr_assert_not_null(strstr(err.msg, "not in increasing order within 0..3"), "%s", err.msg);
    in.positions = out; /* row 4 is the last token's: nothing after it to predict */
    cr_assert_eq(hs_loss_eval_new(m, &in, &ev, &err), HS_E_ARG);
    in.n_pos = 0;
    cr_assert_eq(hs_loss_eval_new(m, &in, &ev, &err), HS_E_INPUT);
    cr_assert_not_null(strstr(err.msg, "holds no position"), "%s", err.msg);
    double g[64];
    in.positions = back;
    in.n_pos = 2;
    cr_assert_eq(hs_gradient_signed(m, &in, g, NULL, &err), HS_E_ARG);
    cr_assert_null(ev);
    hs_model_free(m);
}

/* The loss evaluator runs its last layer on the loss rows only (hs_forward_ws.out_rows):
 * with a sparse set of next-token rows its losses, and its batched sweep's deltas, are the
 * ones read off the full forward pass's logits (every row computed), head masks included,
 * on a pre-norm GPT-2, a parallel-residual GPT-NeoX and a grouped-query Llama. */
static double nll_from_logits(const hs_model *m, const int32_t *ids, int n, const int32_t *rows,
                              int n_rows, const float *mask)
{
    const hs_model_config *c = hs_model_config_of(m);
    int V = c->vocab_size;
    float *logits = malloc((size_t)n * (size_t)V * sizeof *logits);
    hs_forward_opts o = {.head_mask = mask, .logits = logits};
    hs_error err = {{0}};
    cr_assert_eq(hs_forward(m, ids, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);
    double sum = 0;
    for (int r = 0; r < n_rows; r++) {
        const float *row = logits + (size_t)rows[r] * (size_t)V;
        double mx = row[0], s = 0;
        for (int v = 1; v < V; v++)
            mx = row[v] > mx ? row[v] : mx;
        for (int v = 0; v < V; v++)
            s += exp((double)row[v] - mx);
        sum += mx + log(s) - row[ids[rows[r] + 1]];
    }
    free(logits);
    return sum / n_rows;
}

static void sparse_rows_case(const char *path)
{
    hs_model *m;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load(path, &m, &err), HS_OK, "%s: %s", path, err.msg);
    const hs_model_config *c = hs_model_config_of(m);
    int L = c->n_layer, H = c->n_head, n = 9;
    int32_t ids[9], rows[3] = {2, 5, 6};
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)((i * 37 + 5) % c->vocab_size);
    hs_loss_input in = {.ids = ids, .n = n, .kind = HS_LOSS_LM, .positions = rows, .n_pos = 3};
    hs_loss_eval *ev = NULL;
    cr_assert_eq(hs_loss_eval_new(m, &in, &ev, &err), HS_OK, "%s", err.msg);
    double base;
    cr_assert_eq(hs_loss_eval_run(ev, NULL, &base, &err), HS_OK, "%s", err.msg);
    double want = nll_from_logits(m, ids, n, rows, 3, NULL);
    cr_expect(fabs(base - want) <= 1e-5 * fmax(1.0, fabs(want)), "%s: loss %.9g, full pass %.9g",
              path, base, want);
    /* a head off in the first and in the last layer */
    float *mask = malloc((size_t)(L * H) * sizeof *mask);
    for (int k = 0; k < L * H; k++)
        mask[k] = k == 0 || k == (L - 1) * H + H - 1 ? 0.0f : 1.0f;
    double got;
    cr_assert_eq(hs_loss_eval_run(ev, mask, &got, &err), HS_OK, "%s", err.msg);
    want = nll_from_logits(m, ids, n, rows, 3, mask);
    cr_expect(fabs(got - want) <= 1e-5 * fmax(1.0, fabs(want)), "%s: masked loss %.9g, full %.9g",
              path, got, want);
    /* the batched sweep, copies compacted together */
    double *delta = malloc((size_t)(L * H) * sizeof *delta);
    cr_assert_eq(hs_ablation_sweep(ev, base, NULL, delta, NULL, NULL, &err), HS_OK, "%s", err.msg);
    for (int k = 0; k < L * H; k++) {
        for (int q = 0; q < L * H; q++)
            mask[q] = q == k ? 0.0f : 1.0f;
        double d = nll_from_logits(m, ids, n, rows, 3, mask) - base;
        cr_expect(fabs(delta[k] - d) <= 1e-5 * fmax(1.0, fabs(d)), "%s: head %d delta %.9g, full %.9g",
                  path, k, delta[k], d);
    }
    free(delta);
    free(mask);
    hs_loss_eval_free(ev);
    hs_model_free(m);
}

Test(sparse_rows, gpt2_last_layer_on_the_loss_rows_only) { sparse_rows_case("fixtures/tiny-gpt2"); }
Test(sparse_rows, neox_parallel_last_layer_on_the_loss_rows_only)
{
    sparse_rows_case("fixtures/family-models/tiny-pythia");
}
Test(sparse_rows, llama_last_layer_on_the_loss_rows_only)
{
    sparse_rows_case("fixtures/family-models/tiny-llama");
}
