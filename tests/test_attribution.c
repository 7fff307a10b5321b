/* Direct logit attribution, the per-token loss and the norms of norm-based attention against
 * fixtures/golden/attribution-*.json, written by fixtures/ref/make_attribution.py: float64
 * NumPy/PyTorch from the safetensors weights and the reference forward pass (fixtures/ref/
 * hs_ref.py), each head's output formed explicitly as z_h W_O^h and pushed through the
 * frozen final LayerNorm into the unembedding. Also the activations that `headscope dump`
 * writes, against the reference's hooks, and the refusal for BERT. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cJSON.h>

#include "core/core.h"
#include "headscope/activations.h"
#include "headscope/forward.h"
#include "headscope/importance.h"
#include "testutil.h"

/* A float32 forward pass against a float64 reference: the bound of test_forward.c's hidden
 * states and losses, relative to max(1, |want|). */
#define TOL 1e-4

static cJSON *golden(const char *name)
{
    char path[256], *text = NULL;
    size_t len = 0;
    hs_error err = {{0}};
    snprintf(path, sizeof path, "fixtures/golden/attribution-%s.json", name);
    cr_assert_eq(hs_read_file(path, 1 << 24, &text, &len, &err), HS_OK, "%s", err.msg);
    cJSON *j = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(j);
    return j;
}

static int32_t *ints(const cJSON *a, int *n)
{
    *n = cJSON_GetArraySize(a);
    int32_t *v = malloc((size_t)*n * sizeof *v);
    for (int i = 0; i < *n; i++)
        v[i] = (int32_t)cJSON_GetArrayItem(a, i)->valuedouble;
    return v;
}

/* |got - want| <= tol * max(1, |want|) for every entry of the array want. */
/* n = -1: want is a single number. */
static void check_vec(const cJSON *want, const double *got, int n, double tol, const char *what)
{
    if (n >= 0)
        cr_assert_eq(cJSON_GetArraySize(want), n, "%s: size", what);
    for (int i = 0; i < (n < 0 ? 1 : n); i++) {
        double w = n < 0 ? want->valuedouble : cJSON_GetArrayItem(want, i)->valuedouble;
        cr_assert(fabs(got[i] - w) <= tol * fmax(1.0, fabs(w)), "%s[%d]: got %.9g, want %.9g",
                  what, i, got[i], w);
    }
}

static void dla_case(const char *name)
{
    cJSON *g = golden(name);
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load(cJSON_GetObjectItem(g, "model")->valuestring, &m, &err), HS_OK,
                 "%s", err.msg);
    int n;
    int32_t *ids = ints(cJSON_GetObjectItem(g, "ids"), &n);
    hs_dla *d = NULL;
    cr_assert_eq(hs_dla_compute(m, ids, n, &d, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(d->n_pos, n - 1);
    for (int i = 0; i < n - 1; i++)
        cr_assert_eq(d->targets[i], ids[i + 1]);
    const cJSON *per = cJSON_GetObjectItem(g, "per_pos");
    cr_assert_eq(cJSON_GetArraySize(per), d->n_heads);
    for (int k = 0; k < d->n_heads; k++) {
        char what[64];
        snprintf(what, sizeof what, "%s head %d.%d", name, k / d->n_head, k % d->n_head);
        check_vec(cJSON_GetArrayItem(per, k), d->per_pos + (size_t)k * d->n_pos, d->n_pos, TOL, what);
    }
    check_vec(cJSON_GetObjectItem(g, "total"), d->total, d->n_heads, TOL, "total");
    check_vec(cJSON_GetObjectItem(g, "token_loss"), d->token_loss, d->n_pos, TOL, "token_loss");
    check_vec(cJSON_GetObjectItem(g, "logit"), d->logit, d->n_pos, TOL, "logit");
    hs_dla_free(d);
    free(ids);
    hs_model_free(m);
    cJSON_Delete(g);
}

Test(attribution, dla_trained_gpt2_text_matches_reference)
{
    dla_case("trained_gpt2_common");
}

Test(attribution, dla_trained_gpt2_repeated_tokens_matches_reference)
{
    dla_case("trained_gpt2_induction");
}

Test(attribution, dla_tiny_gpt2_matches_reference)
{
    dla_case("tiny_gpt2_induction");
}

/* Heads wider than d_model / n_head (64-wide heads, d_model 96 and 64): Gemma 2 through its
 * attention output's norm and final softcap linearised at the full run, Qwen3 through its
 * query/key norms (fixtures/ref/make_attribution_norms.py, 96 tokens, past Gemma's window). */
Test(attribution, dla_tiny_gemma2_wide_heads_post_norm_and_softcap_match_reference)
{
    dla_case("tiny_gemma2");
}

Test(attribution, dla_tiny_qwen3_wide_heads_match_reference)
{
    dla_case("tiny_qwen3");
}

/* On the second half of a repeated random sequence the induction head 3.0 of trained-gpt2
 * pushes the correct next token up: of all heads its total attribution is the largest. */
Test(attribution, dla_induction_head_leads_on_repeated_tokens)
{
    cJSON *g = golden("trained_gpt2_induction");
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load("fixtures/trained-gpt2", &m, &err), HS_OK, "%s", err.msg);
    int n;
    int32_t *ids = ints(cJSON_GetObjectItem(g, "ids"), &n);
    hs_dla *d = NULL;
    cr_assert_eq(hs_dla_compute(m, ids, n, &d, &err), HS_OK, "%s", err.msg);
    int best = 0;
    for (int k = 1; k < d->n_heads; k++)
        if (d->total[k] > d->total[best])
            best = k;
    cr_assert_eq(best, 3 * 4 + 0, "largest attribution: head %d.%d", best / 4, best % 4);
    hs_dla_free(d);
    free(ids);
    hs_model_free(m);
    cJSON_Delete(g);
}

Test(attribution, dla_refused_for_bert_and_one_token)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load("fixtures/tiny-bert", &m, &err), HS_OK, "%s", err.msg);
    cr_assert_not_null(hs_dla_undefined(m));
    int32_t ids[3] = {101, 7592, 102};
    hs_dla *d = NULL;
    cr_assert_eq(hs_dla_compute(m, ids, 3, &d, &err), HS_E_UNSUPPORTED);
    cr_assert(strstr(err.msg, "direct logit attribution: ") == err.msg, "%s", err.msg);
    cr_assert_null(d);
    hs_model_free(m);
    cr_assert_eq(hs_model_load("fixtures/tiny-gpt2", &m, &err), HS_OK, "%s", err.msg);
    cr_assert_null(hs_dla_undefined(m));
    cr_assert_eq(hs_dla_compute(m, ids, 1, &d, &err), HS_E_INPUT);
    cr_assert(strstr(err.msg, "at least 2 tokens"), "%s", err.msg);
    hs_model_free(m);
}

static void norm_case(const char *name)
{
    cJSON *g = golden(name);
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load(cJSON_GetObjectItem(g, "model")->valuestring, &m, &err), HS_OK,
                 "%s", err.msg);
    int n, nt = 0;
    int32_t *ids = ints(cJSON_GetObjectItem(g, "ids"), &n);
    const cJSON *tj = cJSON_GetObjectItem(g, "type_ids");
    int32_t *types = cJSON_IsArray(tj) ? ints(tj, &nt) : NULL;
    hs_activations *a = NULL;
    cr_assert_eq(hs_activations_run(m, ids, types, n, HS_CAPTURE_QKV, &a, &err), HS_OK, "%s",
                 err.msg);
    const hs_model_config *c = hs_model_config_of(m);
    int lh = c->n_layer * c->n_head;
    float *fn = malloc((size_t)lh * (size_t)n * sizeof *fn);
    double *fd = malloc((size_t)n * sizeof *fd);
    cr_assert_eq(hs_norm_values(m, a, fn, &err), HS_OK, "%s", err.msg);
    const cJSON *want = cJSON_GetObjectItem(g, "fnorm");
    for (int k = 0; k < lh; k++) {
        for (int j = 0; j < n; j++)
            fd[j] = fn[(size_t)k * n + j];
        check_vec(cJSON_GetArrayItem(want, k), fd, n, TOL, name);
    }
    hs_activations_free(a);
    /* without the values it is refused */
    cr_assert_eq(hs_activations_run(m, ids, types, n, HS_CAPTURE_Z, &a, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_norm_values(m, a, fn, &err), HS_E_ARG);
    hs_activations_free(a);
    free(fn);
    free(fd);
    free(ids);
    free(types);
    hs_model_free(m);
    cJSON_Delete(g);
}

Test(attribution, norm_values_trained_gpt2_match_reference)
{
    norm_case("trained_gpt2_common");
}

Test(attribution, norm_values_tiny_bert_pair_match_reference)
{
    norm_case("tiny_bert_pair");
}

/* the values of a grouped KV head at the attention width (n_head d_head != d_model) */
Test(attribution, norm_values_wide_heads_match_reference)
{
    norm_case("tiny_qwen3");
    norm_case("tiny_gemma2");
}

/* Zero, mean and resample ablation of every head through the loss evaluator's batched sweep,
 * the replacement from hs_ablation_replacement, the resample input from hs_resample_ids
 * (every special token in place), against the reference's losses with the head's context
 * replaced (make_attribution.py: its own splitmix64 and Fisher-Yates from the docs). */
static void ablation_case(const char *name)
{
    cJSON *g = golden(name);
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load(cJSON_GetObjectItem(g, "model")->valuestring, &m, &err), HS_OK,
                 "%s", err.msg);
    const hs_model_config *c = hs_model_config_of(m);
    int n, nt, no, lh = c->n_layer * c->n_head;
    int32_t *ids = ints(cJSON_GetObjectItem(g, "ids"), &n);
    const cJSON *tj = cJSON_GetObjectItem(g, "type_ids"), *oj = cJSON_GetObjectItem(g, "orig_ids");
    int32_t *types = cJSON_IsArray(tj) ? ints(tj, &nt) : NULL;
    int32_t *orig = cJSON_IsArray(oj) ? ints(oj, &no) : NULL;
    int32_t pos[16], tgt[16], other[64];
    int npos = 0;
    unsigned char fixed[64];
    for (int i = 0; i < n; i++) {
        if (orig && orig[i] != ids[i]) {
            pos[npos] = i;
            tgt[npos++] = orig[i];
        }
        fixed[i] = orig && (ids[i] == 101 || ids[i] == 102 || ids[i] == 103 || ids[i] == 0);
    }
    hs_resample_ids(ids, fixed, n, 1, other);
    int nr;
    int32_t *want_other = ints(cJSON_GetObjectItem(g, "resample_ids"), &nr);
    cr_assert_eq(nr, n);
    for (int i = 0; i < n; i++)
        cr_assert_eq(other[i], want_other[i], "%s: resample id %d: %d, want %d", name, i,
                     other[i], want_other[i]);
    float *rep = malloc((size_t)c->n_layer * (size_t)n * (size_t)c->d_model * sizeof *rep);
    double *delta = malloc((size_t)lh * sizeof *delta);
    static const char *const key[3] = {"ablation_zero", "ablation_mean", "ablation_resample"};
    for (int kind = 0; kind < 3; kind++) {
        hs_loss_input in = {.ids = ids, .type_ids = types, .n = n,
                            .kind = orig ? HS_LOSS_MLM : HS_LOSS_LM, .positions = orig ? pos : NULL,
                            .targets = tgt, .n_pos = npos};
        if (kind) {
            cr_assert_eq(hs_ablation_replacement(m, (hs_ablation_kind)kind,
                                                 kind == HS_ABLATION_RESAMPLE ? other : ids, types,
                                                 n, rep, &err),
                         HS_OK, "%s", err.msg);
            in.replace = rep;
        }
        hs_loss_eval *ev = NULL;
        double base;
        cr_assert_eq(hs_loss_eval_new(m, &in, &ev, &err), HS_OK, "%s", err.msg);
        cr_assert_eq(hs_loss_eval_run(ev, NULL, &base, &err), HS_OK, "%s", err.msg);
        check_vec(cJSON_GetObjectItem(g, "loss"), &base, -1, TOL, "loss");
        cr_assert_eq(hs_ablation_sweep(ev, base, NULL, delta, NULL, NULL, &err), HS_OK, "%s",
                     err.msg);
        char what[64];
        snprintf(what, sizeof what, "%s %s", name, key[kind]);
        check_vec(cJSON_GetObjectItem(g, key[kind]), delta, lh, TOL, what);
        hs_loss_eval_free(ev);
        /* the signed gradient dL/dxi at xi = 1, d context / d xi being P V - replacement */
        cr_assert_eq(hs_gradient_signed(m, &in, delta, NULL, &err), HS_OK, "%s", err.msg);
        snprintf(what, sizeof what, "%s gradient_%s", name, key[kind] + 9);
        check_vec(cJSON_GetObjectItem(g, what + strlen(name) + 1), delta, lh, TOL, what);
    }
    cr_assert_eq(hs_ablation_replacement(m, HS_ABLATION_ZERO, ids, types, n, rep, &err), HS_E_ARG);
    free(rep);
    free(delta);
    free(want_other);
    free(ids);
    free(types);
    free(orig);
    hs_model_free(m);
    cJSON_Delete(g);
}

Test(ablation, kinds_trained_gpt2_match_reference)
{
    ablation_case("trained_gpt2_common");
}

Test(ablation, kinds_tiny_gpt2_match_reference)
{
    ablation_case("tiny_gpt2_induction");
}

Test(ablation, kinds_tiny_bert_mlm_match_reference)
{
    ablation_case("tiny_bert_pair");
}
