/* Multi-head latent attention (DeepSeek-V2, deepseek_v2 configs) and YaRN rotary scaling
 * against the independent float64 reference fixtures/ref/mla_ref.py (and families.py for
 * the YaRN Llama), goldens by fixtures/ref/make_mla_golden.py in fixtures/mla-golden/:
 * attention maps per head, final hidden states and the NLL of every token within 1e-5, F32
 * and BF16 checkpoints, n = 256 with a 64-wide head; under a head mask; each head's share
 * of its logits from the rotary part; YaRN's frequencies by hand; what is refused. */
#include <math.h>

#include <cJSON.h>

#include "core/core.h"
#include "headscope/forward.h"
#include "headscope/importance.h"
#include "headscope/model.h"
#include "importance/importance_internal.h"
#include "nn/mla.h"
#include "nn/moe.h"
#include "nn/ops.h"
#include "testutil.h"

#define TOL 1e-5
#define GOLD "fixtures/mla-golden/"

typedef struct mla_case {
    cJSON *j;
    hs_model *m;
    hs_npy ids, hm;
    int n;
} mla_case;

static void case_open(const char *name, mla_case *k)
{
    char path[256];
    snprintf(path, sizeof path, GOLD "%s.json", name);
    *k = (mla_case){.j = tu_json_file(path)};
    k->m = tu_load(cJSON_GetObjectItem(k->j, "model")->valuestring);
    k->ids = tu_golden_npy(GOLD, name, "ids", 0);
    k->hm = tu_golden_npy(GOLD, name, "head_mask", 1);
    k->n = (int)k->ids.count;
}

static void case_close(mla_case *k)
{
    hs_model_free(k->m);
    hs_npy_free(&k->ids);
    hs_npy_free(&k->hm);
    cJSON_Delete(k->j);
}

/* budget: the weight cache's (0: the default), the model reopened with it. */
static void run_case_budget(const char *name, size_t budget)
{
    mla_case k;
    case_open(name, &k);
    if (budget) {
        hs_open_opts oo = {.weight_memory = budget};
        hs_error e = {{0}};
        hs_model_free(k.m);
        k.m = NULL;
        cr_assert_eq(hs_model_open2(cJSON_GetObjectItem(k.j, "model")->valuestring, &oo, &k.m, &e),
                     HS_OK, "%s", e.msg);
    }
    const hs_model_config *c = hs_model_config_of(k.m);
    int n = k.n;
    hs_error err = {{0}};
    hs_trace *trace = NULL;
    cr_assert_eq(hs_trace_new(k.m, n, &trace, &err), HS_OK);
    float *hidden = malloc((size_t)n * (size_t)c->d_model * sizeof(float));
    float *logits = malloc((size_t)n * (size_t)c->vocab_size * sizeof(float));
    hs_forward_opts o = {.head_mask = k.hm.data, .on_attn = hs_trace_observe, .user = trace,
                         .hidden = hidden, .logits = logits};
    cr_assert_eq(hs_forward(k.m, k.ids.data, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);
    struct {
        const char *what;
        const float *got;
        size_t count;
    } arrays[] = {{"attn", trace->attn, (size_t)c->n_layer * c->n_head * n * n},
                  {"hidden", hidden, (size_t)n * c->d_model}};
    for (int a = 0; a < 2; a++) {
        hs_npy want = tu_golden_npy(GOLD, name, arrays[a].what, 0);
        size_t w;
        cr_assert_eq(want.count, arrays[a].count, "%s.%s", name, arrays[a].what);
        double d = tu_max_abs_diff(arrays[a].got, want.data, want.count, &w);
        cr_expect_leq(d, TOL, "%s: %s max|d| = %g at flat index %zu", name, arrays[a].what, d, w);
        hs_npy_free(&want);
    }
    const cJSON *nll = cJSON_GetObjectItem(k.j, "nll");
    const int32_t *id = k.ids.data;
    cr_assert_eq(cJSON_GetArraySize(nll), n - 1);
    double worst = 0;
    for (int i = 0; i + 1 < n; i++) {
        double v = tu_nll(logits + (size_t)i * c->vocab_size, c->vocab_size, id[i + 1]);
        double e = fabs(v - cJSON_GetArrayItem(nll, i)->valuedouble);
        worst = e > worst ? e : worst;
    }
    cr_expect_leq(worst, TOL, "%s: nll max|d| = %g", name, worst);
    free(hidden);
    free(logits);
    hs_trace_free(trace);
    case_close(&k);
}

/* Every case's maps, hidden states and losses (a budget: the model reopened with that
 * weight memory; 1 byte: one converted layer at a time, the BF16 layers taking turns in the
 * weight cache beside the float32 experts and the MoE layers' absent dense MLP). */
static const struct {
    const char *name;
    size_t budget;
} forward_cases[] = {
    {"deepseek_lite_256", 0}, /* F32, no q_lora, YaRN, n = 256 */
    {"deepseek_lite_hm", 0},  /* under a head mask */
    {"deepseek_v2_256", 0},   /* BF16, q_lora, 64-wide heads, n = 256 */
    {"deepseek_2l", 0},       /* two dense layers, BF16 */
    {"llama_yarn", 0},        /* YaRN on Llama: the rotary attention factor */
    {"deepseek_moe_v2", 0},   /* softmax, group-limited, shared experts */
    {"deepseek_moe_v3", 0},   /* sigmoid with the correction bias, normalised, BF16 */
    {"deepseek_moe_v3", 1},
};

Test(mla, every_case_matches_the_reference)
{
    for (size_t i = 0; i < sizeof forward_cases / sizeof forward_cases[0]; i++)
        run_case_budget(forward_cases[i].name, forward_cases[i].budget);
}

/* Per head or per token against the golden's: each head's share of its logits from the
 * rotary part ("pos_share", (L, H)) or the experts each token's router chooses ("route",
 * (L, n, K), -1 in a dense layer). */
static void check_per_head(const char *name, int routes)
{
    mla_case k;
    case_open(name, &k);
    const hs_model_config *c = hs_model_config_of(k.m);
    const cJSON *share_j = routes ? NULL : cJSON_GetObjectItem(k.j, "pos_share");
    int K = c->arch->moe_top_k, n = k.n, L = c->n_layer, H = c->n_head;
    int count = share_j ? L * H : L * n * K;
    double *got = calloc((size_t)count, sizeof *got);
    int32_t *route = calloc((size_t)count, sizeof *route);
    hs_error err = {{0}};
    hs_status st = share_j ? hs_mla_position_share(k.m, k.ids.data, n, got, &err)
                           : hs_moe_routes(k.m, k.ids.data, n, route, &err);
    cr_assert_eq(st, HS_OK, "%s: %s", name, err.msg);
    const cJSON *want = share_j ? share_j : cJSON_GetObjectItem(k.j, "route");
    int bad = 0;
    for (int i = 0; i < count; i++) {
        int inner = share_j ? H : n * K; /* want[i / inner] is layer i's */
        const cJSON *row = cJSON_GetArrayItem(want, i / inner);
        if (share_j) {
            double v = cJSON_GetArrayItem(row, i % H)->valuedouble;
            bad += !(fabs(got[i] - v) <= TOL && got[i] > 0 && got[i] < 1);
        } else {
            bad += route[i] != cJSON_GetArrayItem(cJSON_GetArrayItem(row, i / K % n), i % K)->valueint;
        }
    }
    cr_expect_eq(bad, 0, "%s: %d of %d values differ from the reference's", name, bad, count);
    free(got);
    free(route);
    case_close(&k);
}

Test(mla, position_shares_and_routes)
{
    const char *names[] = {"deepseek_lite_256", "deepseek_v2_256", "deepseek_moe_v2",
                           "deepseek_moe_v3"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        check_per_head(names[i], i >= 2);
}

/* Gradient importance through latent attention (dense MLPs): the analytic gradient against
 * central differences of the forward pass (testutil.h), on two layers (the second's
 * gradient goes back through the first's latent attention: q_lora, YaRN with mscale !=
 * mscale_all_dim, so a rotary attention factor and a softmax mscale) and on one; then with
 * every layer's activations recomputed from its input stream in the backward. */
static void gradients(const char *const *names, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        mla_case k;
        case_open(names[i], &k);
        hs_loss_input in = {.ids = k.ids.data, .n = k.n, .kind = HS_LOSS_LM};
        tu_check_finite_difference(k.m, &in, names[i]);
        case_close(&k);
    }
}

Test(mla_gradient, matches_finite_differences)
{
    const char *names[] = {"deepseek_2l", "deepseek_lite_256"};
    gradients(names, 2);
    size_t old = hs_gradient_set_keep_limit(1);
    gradients(names, 1);
    hs_gradient_set_keep_limit(old);
}

/* Through the experts (the gates' dependence on the router's logits included): the signed
 * gradient against the float64 reference's central differences (gradient_signed, (L, H)),
 * V2's softmax router and V3's normalised sigmoid one. The choice of experts is piecewise
 * constant, so a float32 finite difference of 1e-2 could step over a change of route: the
 * reference's steps are 1e-5, routes checked unchanged. */
Test(mla_gradient, through_the_experts_matches_the_reference)
{
    const char *names[] = {"deepseek_moe_v2", "deepseek_moe_v3"};
    for (int t = 0; t < 2; t++) {
        mla_case k;
        case_open(names[t], &k);
        const hs_model_config *c = hs_model_config_of(k.m);
        hs_loss_input in = {.ids = k.ids.data, .n = k.n, .kind = HS_LOSS_LM};
        double g[64], loss;
        hs_error err = {{0}};
        cr_assert_leq(c->n_layer * c->n_head, 64);
        cr_assert_eq(hs_gradient_signed(k.m, &in, g, &loss, &err), HS_OK, "%s", err.msg);
        const cJSON *want = cJSON_GetObjectItem(k.j, "gradient_signed");
        for (int i = 0; i < c->n_layer * c->n_head; i++) {
            double v = cJSON_GetArrayItem(cJSON_GetArrayItem(want, i / c->n_head),
                                          i % c->n_head)->valuedouble;
            cr_expect(fabs(g[i] - v) <= 1e-4 * (1 + fabs(v)), "%s: head %d.%d gradient %.7f, "
                      "reference %.7f", names[t], i / c->n_head, i % c->n_head, g[i], v);
        }
        case_close(&k);
    }
}

/* YaRN by hand: dims 8, base 10000, factor 4, original 128, beta 32 and 1. The pair index
 * making r rotations is 8 ln(128 / (2 pi r)) / (2 ln 10000): r = 32: -0.197 → 0; r = 1:
 * 1.309 → 2. Pairs 0 keep theta, 2 and 3 take theta / 4, pair 1 half of each. */
Test(mla, yarn_frequencies_by_hand)
{
    hs_rope r = {.dims = 8, .base = 10000.0f, .scaling = HS_ROPE_YARN, .factor = 4.0f,
                 .orig_ctx = 128, .beta_fast = 32.0f, .beta_slow = 1.0f, .attn_factor = 1.0f};
    double inv[4];
    hs_op_rope_freqs_of(&r, inv);
    double th[4] = {1.0, 0.1, 0.01, 0.001};
    cr_expect(fabs(inv[0] - th[0]) < 1e-12, "%g", inv[0]);
    cr_expect(fabs(inv[1] - (0.5 * th[1] + 0.5 * th[1] / 4)) < 1e-12, "%g", inv[1]);
    cr_expect(fabs(inv[2] - th[2] / 4) < 1e-12, "%g", inv[2]);
    cr_expect(fabs(inv[3] - th[3] / 4) < 1e-12, "%g", inv[3]);
}

/* A config file in a fresh folder; the load's status and message. */
static hs_status load_config(const char *json, hs_error *err)
{
    char dir[64];
    tu_mkdtemp(dir, sizeof dir);
    char path[128];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(json, f);
    fclose(f);
    hs_model *m = NULL;
    hs_status st = hs_model_open(dir, HS_OPEN_TOKENIZER, &m, err);
    hs_model_free(m);
    tu_rm_rf(dir);
    return st;
}

#define DS "{\"model_type\": \"deepseek_v2\", \"num_hidden_layers\": 2, \"num_attention_heads\": " \
           "2, \"hidden_size\": 64, \"intermediate_size\": 96, \"vocab_size\": 256, "

Test(mla, refusals_name_the_feature)
{
    hs_error err = {{0}};
    cr_expect_eq(load_config(DS "\"n_routed_experts\": 8, \"num_experts_per_tok\": 2, "
                             "\"scoring_func\": \"tanh\"}", &err), HS_E_UNSUPPORTED);
    cr_expect(strstr(err.msg, "scoring_func 'tanh'") != NULL, "%s", err.msg);
    cr_expect_eq(load_config(DS "\"n_routed_experts\": 8, \"num_experts_per_tok\": 2, "
                             "\"topk_method\": \"noaux_tc\"}", &err), HS_E_UNSUPPORTED);
    cr_expect(strstr(err.msg, "topk_method 'noaux_tc' with scoring_func 'softmax'") != NULL, "%s",
              err.msg);
    cr_expect_eq(load_config(DS "\"n_routed_experts\": 8, \"num_experts_per_tok\": 2, "
                             "\"moe_layer_freq\": 2}", &err), HS_E_UNSUPPORTED);
    cr_expect(strstr(err.msg, "moe_layer_freq") != NULL, "%s", err.msg);
    cr_expect_eq(load_config(DS "\"n_routed_experts\": null, \"attention_bias\": true}", &err),
                 HS_E_UNSUPPORTED);
    cr_expect(strstr(err.msg, "attention_bias") != NULL, "%s", err.msg);
    cr_expect_eq(load_config(DS "\"n_routed_experts\": null, \"rope_scaling\": {\"type\": "
                             "\"yarn\", \"factor\": 4, \"truncate\": false}}", &err),
                 HS_E_UNSUPPORTED);
    cr_expect(strstr(err.msg, "truncate") != NULL, "%s", err.msg);
    cr_expect_eq(load_config(DS "\"n_routed_experts\": null, \"rope_scaling\": {\"type\": "
                             "\"dynamic\", \"factor\": 4}}", &err), HS_E_UNSUPPORTED);
    cr_expect(strstr(err.msg, "dynamic") != NULL, "%s", err.msg);
    cr_expect_eq(load_config(DS "\"n_routed_experts\": null}", &err), HS_OK, "%s", err.msg);
    hs_model *m = tu_load("fixtures/mla-models/tiny-llama-yarn"); /* no latent attention */
    int32_t ids[4] = {1, 2, 3, 4};
    double share[8];
    cr_expect_eq(hs_mla_position_share(m, ids, 4, share, &err), HS_E_UNSUPPORTED);
    cr_expect(strstr(err.msg, "latent attention") != NULL, "%s", err.msg);
    hs_model_free(m);
}
