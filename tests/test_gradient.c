/* Gradient head importance (Michel et al. 2019) against the independent float64 PyTorch
 * autograd reference (fixtures/ref/hs_ref.py gradient_importance, run by make_golden.py:
 * "importance": {"gradient_raw": |dL/dxi| (L x H), "gradient": rows / L2 norm}), plus a
 * central finite difference of the loss through hs_loss_eval_run, and the REPR refusal.
 *
 * Tolerance against the reference: |got - want| <= 1e-4 + 1e-3 |want| (float32 forward and
 * backward against float64). */
#include <dirent.h>

#include <cJSON.h>

#include "headscope/importance.h"
#include "headscope/model.h"
#include "importance/importance_internal.h"
#include "model/model_internal.h"
#include "testutil.h"

#define GRAD_ABS 1e-4
#define GRAD_REL 1e-3

static const char *const golden_cases[] = {
    "tiny_gpt2_induction", "tiny_gpt2_common", "tiny_gpt2_hello", "trained_gpt2_common",
    "trained_gpt2_induction", "gpt2_prefixed", "gpt2_f16", "gpt2_bf16", "gpt2_hub",
    "tiny_bert_pair", "tiny_bert_sentence", "bert_f16", "bert_bf16", "bert_hub", "bert_posids",
};
#define N_GOLDEN (sizeof golden_cases / sizeof golden_cases[0])

static cJSON *case_json(const char *name)
{
    char path[320];
    snprintf(path, sizeof path, "fixtures/golden/%s.json", name);
    return tu_json_file(path);
}

static int32_t *json_ids(const cJSON *a, int *n)
{
    *n = cJSON_GetArraySize(a);
    int32_t *v = malloc((size_t)*n * sizeof *v);
    for (int i = 0; i < *n; i++)
        v[i] = (int32_t)cJSON_GetArrayItem(a, i)->valueint;
    return v;
}

/* A golden case as a loss input (as in tests/test_importance.c): MLM targets are the
 * original ids at the masked positions, the input ids hold the mask id there. */
typedef struct golden {
    cJSON *j;
    hs_model *m;
    hs_loss_input in;
    int32_t *ids, *tt, *pos, *targets;
} golden;

static void golden_load(const char *name, golden *g)
{
    memset(g, 0, sizeof *g);
    g->j = case_json(name);
    char mpath[256];
    snprintf(mpath, sizeof mpath, "%s", cJSON_GetObjectItem(g->j, "model")->valuestring);
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load(mpath, &g->m, &err), HS_OK, "%s: %s", mpath, err.msg);
    const char *kind = cJSON_GetObjectItem(g->j, "loss_kind")->valuestring;
    int n, npos = 0;
    g->ids = json_ids(cJSON_GetObjectItem(g->j, "ids"), &n);
    if (cJSON_IsArray(cJSON_GetObjectItem(g->j, "type_ids")))
        g->tt = json_ids(cJSON_GetObjectItem(g->j, "type_ids"), &n);
    g->in = (hs_loss_input){.ids = g->ids, .type_ids = g->tt, .n = n};
    if (!strcmp(kind, "lm")) {
        g->in.kind = HS_LOSS_LM;
    } else {
        cr_assert_str_eq(kind, "mlm", "%s: loss kind %s", name, kind);
        g->in.kind = HS_LOSS_MLM;
        g->pos = json_ids(cJSON_GetObjectItem(g->j, "positions"), &npos);
        int no;
        int32_t *orig = json_ids(cJSON_GetObjectItem(g->j, "orig_ids"), &no);
        g->targets = malloc((size_t)npos * sizeof *g->targets);
        for (int k = 0; k < npos; k++)
            g->targets[k] = orig[g->pos[k]];
        free(orig);
        g->in.positions = g->pos;
        g->in.targets = g->targets;
        g->in.n_pos = npos;
    }
}

static void golden_free(golden *g)
{
    free(g->ids);
    free(g->tt);
    free(g->pos);
    free(g->targets);
    hs_model_free(g->m);
    cJSON_Delete(g->j);
}

static void expect_grid(const char *name, const char *what, const double *got, const cJSON *want,
                        int L, int H)
{
    cr_assert_eq(cJSON_GetArraySize(want), L, "%s: %s has %d rows", name, what,
                 cJSON_GetArraySize(want));
    for (int l = 0; l < L; l++) {
        const cJSON *row = cJSON_GetArrayItem(want, l);
        cr_assert_eq(cJSON_GetArraySize(row), H);
        for (int h = 0; h < H; h++) {
            double w = cJSON_GetArrayItem(row, h)->valuedouble, v = got[l * H + h];
            cr_expect(fabs(v - w) <= GRAD_ABS + GRAD_REL * fabs(w),
                      "%s: %s %d.%d = %.8g, reference %.8g", name, what, l, h, v, w);
        }
    }
}

static void run_golden(const char *name)
{
    golden g;
    golden_load(name, &g);
    const hs_model_config *c = hs_model_config_of(g.m);
    int L = c->n_layer, H = c->n_head;
    double *raw = malloc((size_t)(L * H) * sizeof *raw), *norm = malloc((size_t)(L * H) * sizeof *norm);
    hs_error err = {{0}};
    cr_assert_eq(hs_gradient_importance(g.m, &g.in, raw, norm, &err), HS_OK,
                 "%s: %s", name, err.msg);
    const cJSON *imp = cJSON_GetObjectItem(g.j, "importance");
    expect_grid(name, "raw", raw, cJSON_GetObjectItem(imp, "gradient_raw"), L, H);
    expect_grid(name, "normalised", norm, cJSON_GetObjectItem(imp, "gradient"), L, H);

    /* The loss differentiated is the loss the evaluator computes, and the reference's. The
     * evaluator's next-token pass stops at the last loss row (n - 1 tokens, the gradient's
     * all n), so its products are cut by other shapes: float32 rounding, 1e-7 relative. */
    double *sg = malloc((size_t)(L * H) * sizeof *sg), loss, base;
    cr_assert_eq(hs_gradient_signed(g.m, &g.in, sg, &loss, &err), HS_OK, "%s", err.msg);
    hs_loss_eval *ev;
    cr_assert_eq(hs_loss_eval_new(g.m, &g.in, &ev, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_loss_eval_run(ev, NULL, &base, &err), HS_OK, "%s", err.msg);
    cr_expect(fabs(loss - base) <= 1e-6 * fmax(1.0, fabs(base)), "%s: loss %.9f, evaluator %.9f",
              name, loss, base);
    double want = cJSON_GetObjectItem(imp, "base_loss")->valuedouble;
    cr_expect(fabs(loss - want) <= 1e-4, "%s: loss %.7f, reference %.7f", name, loss, want);
    for (int k = 0; k < L * H; k++)
        cr_expect_eq(fabs(sg[k]), raw[k], "%s: raw is |signed| at %d", name, k);
    hs_loss_eval_free(ev);
    free(sg);
    free(raw);
    free(norm);
    golden_free(&g);
}

/* The signed gradient at a head mask with zeros and halves (the state a pruning step
 * sees) against autograd at that mask, and its loss against the evaluator's. */
static void run_masked(const char *name)
{
    golden g;
    golden_load(name, &g);
    const hs_model_config *c = hs_model_config_of(g.m);
    int L = c->n_layer, H = c->n_head;
    float *mask = malloc((size_t)(L * H) * sizeof *mask);
    const cJSON *hm = cJSON_GetObjectItem(g.j, "head_mask");
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            mask[l * H + h] = (float)cJSON_GetArrayItem(cJSON_GetArrayItem(hm, l), h)->valuedouble;
    double *sg = malloc((size_t)(L * H) * sizeof *sg), loss, base;
    hs_error err = {{0}};
    cr_assert_eq(hs_gradient_signed_masked(g.m, &g.in, mask, sg, &loss, &err), HS_OK, "%s", err.msg);
    expect_grid(name, "gradient at the mask", sg, cJSON_GetObjectItem(g.j, "gradient_at_mask"), L, H);
    /* Past the memory limit for the kept activations the backward recomputes each layer's
     * from its input stream: the same numbers, bit for bit. */
    double *sr = malloc((size_t)(L * H) * sizeof *sr), lr;
    size_t limit = hs_gradient_set_keep_limit(0);
    hs_status rs = hs_gradient_signed_masked(g.m, &g.in, mask, sr, &lr, &err);
    hs_gradient_set_keep_limit(limit);
    cr_assert_eq(rs, HS_OK, "%s", err.msg);
    cr_expect_eq(lr, loss, "%s: loss %.17g recomputing, %.17g keeping", name, lr, loss);
    for (int k = 0; k < L * H; k++)
        cr_expect_eq(sr[k], sg[k], "%s: head %d: %.17g recomputing, %.17g keeping", name, k,
                     sr[k], sg[k]);
    /* The head's logits taken 5 loss rows at a time (several blocks, the last one short)
     * against the reference too. */
    int rows = hs_gradient_set_head_rows(5);
    rs = hs_gradient_signed_masked(g.m, &g.in, mask, sr, &lr, &err);
    hs_gradient_set_head_rows(rows);
    cr_assert_eq(rs, HS_OK, "%s", err.msg);
    expect_grid(name, "gradient at the mask, 5 logit rows at a time", sr,
                cJSON_GetObjectItem(g.j, "gradient_at_mask"), L, H);
    cr_expect(fabs(lr - loss) <= 1e-6 * fabs(loss), "%s: loss %.17g in blocks of 5, %.17g", name,
              lr, loss);
    /* Buffers kept from pass to pass (pruning's rounds) give each pass's own numbers: the
     * mask, every head, the mask again, then a shorter input through the same buffers. */
    hs_grad_scratch keep = {0};
    double *all = malloc((size_t)(L * H) * sizeof *all), la;
    cr_assert_eq(hs_gradient_signed(g.m, &g.in, all, &la, &err), HS_OK, "%s", err.msg);
    for (int pass = 0; pass < 3; pass++) {
        const float *pm = pass == 1 ? NULL : mask;
        double lk;
        cr_assert_eq(hs_gradient_capped(g.m, &g.in, pm, INFINITY, sr, &lk, &keep, &err), HS_OK,
                     "%s", err.msg);
        cr_expect_eq(lk, pm ? loss : la, "%s: pass %d's loss with kept buffers", name, pass);
        for (int k = 0; k < L * H; k++)
            cr_expect_eq(sr[k], pm ? sg[k] : all[k], "%s: pass %d, head %d with kept buffers",
                         name, pass, k);
    }
    cr_assert_not_null(keep.buf, "%s: the buffers were kept", name);
    hs_loss_input shorter = g.in;
    if (shorter.kind == HS_LOSS_LM && shorter.n > 3) {
        shorter.n = 3;
        double lk, ls;
        cr_assert_eq(hs_gradient_signed(g.m, &shorter, all, &ls, &err), HS_OK, "%s", err.msg);
        cr_assert_eq(hs_gradient_capped(g.m, &shorter, NULL, INFINITY, sr, &lk, &keep, &err),
                     HS_OK, "%s", err.msg);
        cr_expect_eq(lk, ls, "%s: a shorter input through the kept buffers", name);
        for (int k = 0; k < L * H; k++)
            cr_expect_eq(sr[k], all[k], "%s: shorter input, head %d", name, k);
    }
    /* a cap below the loss: the loss, no backward */
    double lc;
    cr_assert_eq(hs_gradient_capped(g.m, &g.in, mask, loss - 1e-3, sr, &lc, &keep, &err), HS_OK,
                 "%s", err.msg);
    cr_expect_eq(lc, loss, "%s: the capped pass's loss", name);
    for (int k = 0; k < L * H; k++)
        cr_expect(isnan(sr[k]), "%s: a capped pass leaves head %d NaN", name, k);
    hs_grad_scratch_free(&keep);
    cr_expect(!keep.buf && !keep.ws && !keep.bytes, "%s: freed buffers are zeroed", name);
    free(all);
    free(sr);
    hs_loss_eval *ev;
    cr_assert_eq(hs_loss_eval_new(g.m, &g.in, &ev, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_loss_eval_run(ev, mask, &base, &err), HS_OK, "%s", err.msg);
    cr_expect(fabs(loss - base) <= 1e-5, "%s: loss %.9f, evaluator %.9f", name, loss, base);
    double want = cJSON_GetObjectItem(g.j, "loss")->valuedouble;
    cr_expect(fabs(loss - want) <= 1e-4, "%s: loss %.7f, reference %.7f", name, loss, want);
    hs_loss_eval_free(ev);
    free(sg);
    free(mask);
    golden_free(&g);
}

#define MASKED(name) Test(gradient_masked, name) { run_masked(#name); }
MASKED(tiny_gpt2_common_hm)
MASKED(tiny_gpt2_induction_hm)
MASKED(trained_gpt2_common_hm)
MASKED(gpt2_prefixed_hm)
MASKED(tiny_bert_pair_hm)
MASKED(bert_bf16_hm)

#define CASE(name) Test(gradient_golden, name) { run_golden(#name); }
CASE(tiny_gpt2_induction)
CASE(tiny_gpt2_common)
CASE(tiny_gpt2_hello)
CASE(trained_gpt2_common)
CASE(trained_gpt2_induction)
CASE(gpt2_prefixed)
CASE(gpt2_f16)
CASE(gpt2_bf16)
CASE(gpt2_hub)
CASE(tiny_bert_pair)
CASE(tiny_bert_sentence)
CASE(bert_f16)
CASE(bert_bf16)
CASE(bert_hub)
CASE(bert_posids)

Test(gradient_golden, every_case_with_a_gradient_reference_is_checked)
{
    DIR *dir = opendir("fixtures/golden");
    cr_assert_not_null(dir);
    struct dirent *e;
    int found = 0;
    while ((e = readdir(dir))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") || !strcmp(e->d_name, "DEFINITIONS.json"))
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(len - 5), e->d_name);
        cJSON *j = case_json(name);
        const cJSON *imp = cJSON_GetObjectItem(j, "importance");
        if (cJSON_IsObject(imp) && cJSON_GetObjectItem(imp, "gradient_raw")) {
            int listed = 0;
            for (size_t k = 0; k < N_GOLDEN; k++)
                listed |= !strcmp(golden_cases[k], name);
            cr_expect(listed, "golden case %s has a gradient reference but no test", name);
            found++;
        }
        cJSON_Delete(j);
    }
    closedir(dir);
    cr_expect_eq(found, (int)N_GOLDEN);
}

/* The analytic gradient against central differences (testutil.h). */
static void finite_difference(const char *name)
{
    golden g;
    golden_load(name, &g);
    tu_check_finite_difference(g.m, &g.in, name);
    golden_free(&g);
}

Test(gradient_property, matches_finite_difference_gpt2) { finite_difference("tiny_gpt2_induction"); }
Test(gradient_property, matches_finite_difference_bert_mlm) { finite_difference("tiny_bert_pair"); }

Test(gradient_property, normalised_rows_have_unit_length)
{
    /* n = 2 GPT-2, a single loss row: each layer's norm row is raw / ||raw||, so it has unit
     * L2 norm (or is all zeros), and NULL outputs are accepted. */
    golden g;
    golden_load("tiny_gpt2_hello", &g);
    const hs_model_config *c = hs_model_config_of(g.m);
    int L = c->n_layer, H = c->n_head;
    double raw[64], norm[64];
    cr_assert_leq(L * H, 64);
    hs_error err = {{0}};
    cr_assert_eq(hs_gradient_importance(g.m, &g.in, raw, norm, &err), HS_OK, "%s", err.msg);
    for (int l = 0; l < L; l++) {
        double ss = 0;
        for (int h = 0; h < H; h++)
            ss += norm[l * H + h] * norm[l * H + h];
        cr_expect(fabs(ss - 1.0) < 1e-12 || ss == 0.0, "layer %d norm row has L2² %.15f", l, ss);
    }
    double raw2[64];
    cr_assert_eq(hs_gradient_importance(g.m, &g.in, raw2, NULL, &err), HS_OK, "%s", err.msg);
    for (int k = 0; k < L * H; k++)
        cr_expect_eq(raw2[k], raw[k], "the pass is deterministic");
    golden_free(&g);
}

Test(gradient_errors, repr_loss_is_unsupported)
{
    hs_error err = {{0}};
    hs_model *m;
    cr_assert_eq(hs_model_load("fixtures/models/bert-legacy", &m, &err), HS_OK, "%s", err.msg);
    int32_t ids[4] = {101, 5, 6, 102};
    hs_loss_input in = {.ids = ids, .n = 4, .kind = HS_LOSS_REPR};
    double raw[64] = {0}, norm[64] = {0};
    cr_assert_eq(hs_gradient_importance(m, &in, raw, norm, &err), HS_E_UNSUPPORTED);
    cr_assert_not_null(strstr(err.msg, "representation loss"), "%s", err.msg);
    hs_model_free(m);
}

Test(gradient_errors, lm_needs_two_tokens_and_mlm_a_head)
{
    hs_error err = {{0}};
    hs_model *m;
    cr_assert_eq(hs_model_load("fixtures/tiny-gpt2", &m, &err), HS_OK, "%s", err.msg);
    int32_t one[1] = {464};
    hs_loss_input in = {.ids = one, .n = 1, .kind = HS_LOSS_LM};
    double raw[64], norm[64];
    cr_assert_eq(hs_gradient_importance(m, &in, raw, norm, &err), HS_E_INPUT);
    cr_assert_not_null(strstr(err.msg, "at least 2 tokens"), "%s", err.msg);
    int32_t bad[2] = {464, 999999};
    in = (hs_loss_input){.ids = bad, .n = 2, .kind = HS_LOSS_LM};
    cr_assert_eq(hs_gradient_importance(m, &in, raw, norm, &err), HS_E_INPUT);
    cr_assert_not_null(strstr(err.msg, "outside the vocabulary"), "%s", err.msg);
    hs_model_free(m);

    cr_assert_eq(hs_model_load("fixtures/models/bert-legacy", &m, &err), HS_OK, "%s", err.msg);
    int32_t ids[3] = {101, 5, 102}, pos[1] = {1}, tgt[1] = {7};
    in = (hs_loss_input){.ids = ids, .n = 3, .kind = HS_LOSS_MLM, .positions = pos,
                         .targets = tgt, .n_pos = 1};
    cr_assert_eq(hs_gradient_importance(m, &in, raw, norm, &err), HS_E_INPUT);
    cr_assert_not_null(strstr(err.msg, "no MLM head"), "%s", err.msg);
    hs_model_free(m);
}

/* A descriptor feature the backward pass does not differentiate is refused by name, not
 * computed wrong (the loaders refuse these today; the model's descriptor is edited here
 * as a future loader would fill it). */
Test(gradient_errors, features_beyond_the_base_block_are_refused)
{
    hs_error err = {{0}};
    hs_model *m;
    cr_assert_eq(hs_model_load("fixtures/tiny-gpt2", &m, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(m->cfg.arch, &m->arch);
    m->arch.parallel_residual = 1; /* with a post-norm block: neither pass has it */
    m->arch.norm_place = HS_NORM_POST;
    int32_t ids[3] = {464, 3290, 318};
    hs_loss_input in = {.ids = ids, .n = 3, .kind = HS_LOSS_LM};
    double raw[64], norm[64];
    cr_assert_eq(hs_gradient_importance(m, &in, raw, norm, &err), HS_E_UNSUPPORTED);
    cr_assert_str_eq(err.msg, "gradient importance: the backward pass of the parallel residual in "
                     "a post-norm block (architecture 'gpt2') is not implemented");
    hs_model_free(m);
}
