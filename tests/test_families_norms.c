/* The normalised decoders (Qwen3, OLMo-2, Gemma 2, Gemma 3 text, Qwen3-MoE) against the independent
 * float64 reference fixtures/ref/families_norms.py (goldens by make_norms_fixtures.py in
 * fixtures/norms-golden/, n = 256, windows of 64 and 48 keys): rows of every map, the final
 * hidden states at those rows, every token's NLL and the loss within 1e-5, with and without a
 * head mask; each layer's window; ablation and gradient importance against the reference's;
 * the gradient against central differences; and the configurations refused by name. */
#include <sys/stat.h>

#include <cJSON.h>

#include "core/core.h"
#include "headscope/forward.h"
#include "headscope/importance.h"
#include "headscope/model.h"
#include "importance/importance_internal.h"
#include "lm_golden.h"
#include "testutil.h"

#define TOL 1e-5
#define GRAD_ABS 1e-4
#define GRAD_REL 1e-3
#define GOLD "fixtures/norms-golden/"

typedef struct norm_case {
    cJSON *j;
    hs_model *m;
    hs_npy ids, hm;
    int n;
} norm_case;

static void case_open(const char *name, norm_case *k)
{
    char path[256];
    hs_error err = {{0}};
    snprintf(path, sizeof path, GOLD "%s.json", name);
    *k = (norm_case){.j = tu_json_file(path), .ids = tu_golden_npy(GOLD, name, "ids", 0),
                     .hm = tu_golden_npy(GOLD, name, "head_mask", 1)};
    k->n = (int)k->ids.count;
    const char *dir = cJSON_GetObjectItem(k->j, "model")->valuestring;
    cr_assert_eq(hs_model_load(dir, &k->m, &err), HS_OK, "%s: %s", dir, err.msg);
}

static void case_close(norm_case *k)
{
    hs_npy_free(&k->hm);
    hs_npy_free(&k->ids);
    cJSON_Delete(k->j);
    hs_model_free(k->m);
}

/* Each layer's window, the map rows, the hidden rows, every NLL and the loss. */
static void check_forward(const char *name, norm_case *k)
{
    const hs_model_config *c = hs_model_config_of(k->m);
    const cJSON *j = k->j, *rows = cJSON_GetObjectItem(j, "rows");
    int n = k->n, L = c->n_layer, H = c->n_head, d = c->d_model, R = cJSON_GetArraySize(rows);
    cr_assert_eq(c->d_head, cJSON_GetObjectItem(j, "d_head")->valueint);
    cr_assert_eq(c->n_kv_head, cJSON_GetObjectItem(j, "KV")->valueint);
    for (int l = 0; l < L; l++) {
        int w = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "windows"), l)->valueint;
        hs_visibility v = hs_model_layer_visibility(c, l);
        cr_expect_eq(v.kind, w ? HS_VIS_SLIDING : HS_VIS_CAUSAL, "%s: layer %d", name, l);
        cr_expect_eq(hs_model_layer_is_local(c, l), w > 0, "%s: layer %d", name, l);
        if (w)
            cr_expect_eq(v.window, w, "%s: layer %d window", name, l);
    }
    hs_error err = {{0}};
    hs_trace *trace = NULL;
    cr_assert_eq(hs_trace_new(k->m, n, &trace, &err), HS_OK);
    float *hidden = malloc((size_t)n * (size_t)d * sizeof(float));
    float *logits = malloc((size_t)n * (size_t)c->vocab_size * sizeof(float));
    hs_forward_opts o = {.head_mask = k->hm.data, .on_attn = hs_trace_observe, .user = trace,
                         .hidden = hidden, .logits = logits};
    cr_assert_eq(hs_forward(k->m, k->ids.data, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);

    hs_npy attn = tu_golden_npy(GOLD, name, "attn_rows", 0);
    hs_npy hid = tu_golden_npy(GOLD, name, "hidden_rows", 0);
    cr_assert_eq(attn.count, (size_t)L * H * R * n);
    cr_assert_eq(hid.count, (size_t)R * d);
    const float *want = attn.data, *want_h = hid.data;
    double worst = 0, worst_h = 0;
    for (int r = 0; r < R; r++) {
        int i = cJSON_GetArrayItem(rows, r)->valueint;
        for (int lh = 0; lh < L * H; lh++)
            for (int jj = 0; jj < n; jj++) {
                double got = trace->attn[((size_t)lh * n + (size_t)i) * n + (size_t)jj];
                double e = fabs(got - want[((size_t)lh * R + (size_t)r) * n + (size_t)jj]);
                worst = e > worst ? e : worst;
            }
        for (int e = 0; e < d; e++) {
            double v = fabs(hidden[(size_t)i * d + e] - want_h[(size_t)r * d + e]);
            worst_h = v > worst_h ? v : worst_h;
        }
    }
    cr_expect_leq(worst, TOL, "%s: attention max|d| = %g", name, worst);
    cr_expect_leq(worst_h, TOL, "%s: hidden max|d| = %g", name, worst_h);

    tu_expect_nll(name, logits, c->vocab_size, k->ids.data, n, j, TOL);
    hs_npy_free(&attn);
    hs_npy_free(&hid);
    free(hidden);
    free(logits);
    hs_trace_free(trace);
}

/* Ablation (the batched sweep) and gradient importance against the reference's. */
static void check_importance(const char *name, norm_case *k)
{
    double base;
    hs_loss_eval *ev = tu_expect_lm_importance(name, k->m, k->ids.data, k->n,
                                               cJSON_GetObjectItem(k->j, "importance"), TOL,
                                               GRAD_ABS, GRAD_REL, &base);
    hs_loss_eval_free(ev);
}

static void run_case(const char *name)
{
    norm_case k;
    case_open(name, &k);
    check_forward(name, &k);
    if (cJSON_IsObject(cJSON_GetObjectItem(k.j, "importance")))
        check_importance(name, &k);
    /* the signed gradient at the mask against central differences; not through routed
     * experts: a 1% change of a head's mask moves router logits across ties (the
     * choice is piecewise constant, the loss jumps there), so their gradient is checked
     * against autograd's, which holds the choice fixed as the backward does */
    if (k.hm.data && hs_model_config_of(k.m)->arch->moe_experts == 0) {
        hs_loss_input in = {.ids = k.ids.data, .n = 64, .kind = HS_LOSS_LM};
        tu_check_finite_difference(k.m, &in, name);
    }
    case_close(&k);
}

#define CASE(name) Test(families_norms, name) { run_case(#name); }
CASE(tiny_qwen3)
CASE(tiny_qwen3_hm)
CASE(tiny_olmo2)
CASE(tiny_olmo2_hm)
CASE(tiny_gemma2)
CASE(tiny_gemma2_hm)
CASE(tiny_gemma3)
CASE(tiny_gemma3_hm)
CASE(tiny_gemma3_yarn)
CASE(tiny_gemma3_yarn_hm)
CASE(tiny_qwen3_moe)
CASE(tiny_qwen3_moe_hm)
CASE(tiny_qwen3_moe_bf16)
CASE(tiny_qwen3_moe_bf16_hm)

/* The backward that recomputes each layer's activations from its input stream (texts past
 * the keep limit) and the one that keeps them give the same gradient, bit for bit, through
 * the query/key norms, post-norms and softcaps; the logits in head blocks of 7 rows (another
 * GEMM shape, float32 rounding apart) within 1e-6 (loss) and 1e-5 + 1e-7 (heads). */
Test(families_norms, gradient_recomputed_and_in_head_blocks_is_the_same)
{
    const char *names[] = {"tiny_olmo2", "tiny_gemma2", "tiny_gemma3"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        norm_case k;
        case_open(names[i], &k);
        const hs_model_config *c = hs_model_config_of(k.m);
        int LH = c->n_layer * c->n_head;
        hs_loss_input in = {.ids = k.ids.data, .n = k.n, .kind = HS_LOSS_LM};
        hs_error err = {{0}};
        double a[64], b[64], r[64], la, lb, lr;
        cr_assert_leq(LH, 64);
        cr_assert_eq(hs_gradient_signed(k.m, &in, a, &la, &err), HS_OK, "%s", err.msg);
        size_t old = hs_gradient_set_keep_limit(0);
        hs_status st = hs_gradient_signed(k.m, &in, b, &lb, &err);
        hs_gradient_set_keep_limit(old);
        cr_assert_eq(st, HS_OK, "%s", err.msg);
        int rows = hs_gradient_set_head_rows(7);
        st = hs_gradient_signed(k.m, &in, r, &lr, &err);
        hs_gradient_set_head_rows(rows);
        cr_assert_eq(st, HS_OK, "%s", err.msg);
        cr_expect_eq(la, lb, "%s: loss", names[i]);
        cr_expect(fabs(la - lr) <= 1e-6 * fabs(la), "%s: loss in blocks of 7", names[i]);
        for (int h = 0; h < LH; h++) {
            cr_expect_eq(a[h], b[h], "%s: head %d: %.17g vs %.17g", names[i], h, a[h], b[h]);
            cr_expect(fabs(a[h] - r[h]) <= 1e-5 * fabs(a[h]) + 1e-7, "%s: head %d in blocks",
                      names[i], h);
        }
        case_close(&k);
    }
}
