/* The normalised decoders (Qwen3, OLMo-2, Gemma 2, Gemma 3 text) against the independent
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
    memset(k, 0, sizeof *k);
    snprintf(path, sizeof path, GOLD "%s.json", name);
    k->j = tu_json_file(path);
    hs_error err = {{0}};
    const char *dir = cJSON_GetObjectItem(k->j, "model")->valuestring;
    cr_assert_eq(hs_model_load(dir, &k->m, &err), HS_OK, "%s: %s", dir, err.msg);
    snprintf(path, sizeof path, GOLD "%s.ids.npy", name);
    k->ids = tu_npy(path);
    k->n = (int)k->ids.count;
    snprintf(path, sizeof path, GOLD "%s.head_mask.npy", name);
    if (access(path, R_OK) == 0)
        k->hm = tu_npy(path);
}

static void case_close(norm_case *k)
{
    hs_model_free(k->m);
    hs_npy_free(&k->ids);
    hs_npy_free(&k->hm);
    cJSON_Delete(k->j);
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

    char path[256];
    snprintf(path, sizeof path, GOLD "%s.attn_rows.npy", name);
    hs_npy attn = tu_npy(path);
    snprintf(path, sizeof path, GOLD "%s.hidden_rows.npy", name);
    hs_npy hid = tu_npy(path);
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

    const cJSON *nll = cJSON_GetObjectItem(j, "nll");
    const int32_t *id = k->ids.data;
    double loss = 0;
    cr_assert_eq(cJSON_GetArraySize(nll), n - 1);
    for (int i = 0; i + 1 < n; i++) {
        double v = tu_nll(logits + (size_t)i * c->vocab_size, c->vocab_size, id[i + 1]);
        double w = cJSON_GetArrayItem(nll, i)->valuedouble;
        cr_expect(fabs(v - w) <= TOL, "%s: nll[%d] %.8f vs %.8f", name, i, v, w);
        loss += v;
    }
    loss /= n - 1;
    double w = cJSON_GetObjectItem(j, "loss")->valuedouble;
    cr_expect(fabs(loss - w) <= TOL, "%s: loss %.8f vs %.8f", name, loss, w);
    hs_npy_free(&attn);
    hs_npy_free(&hid);
    free(hidden);
    free(logits);
    hs_trace_free(trace);
}

static void expect_grid(const char *name, const char *what, const double *got, const cJSON *grid,
                        int L, int H, double abs_tol, double rel_tol)
{
    cr_assert(cJSON_IsArray(grid) && cJSON_GetArraySize(grid) == L, "%s: %s", name, what);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            double w = cJSON_GetArrayItem(cJSON_GetArrayItem(grid, l), h)->valuedouble;
            double v = got[l * H + h];
            cr_expect(fabs(v - w) <= abs_tol + rel_tol * fabs(w), "%s: %s %d.%d = %.8g, "
                      "reference %.8g", name, what, l, h, v, w);
        }
}

/* Ablation (the batched sweep) and gradient importance against the reference's. */
static void check_importance(const char *name, norm_case *k)
{
    const cJSON *imp = cJSON_GetObjectItem(k->j, "importance");
    const hs_model_config *c = hs_model_config_of(k->m);
    int L = c->n_layer, H = c->n_head, LH = L * H;
    hs_loss_input in = {.ids = k->ids.data, .n = k->n, .kind = HS_LOSS_LM};
    hs_error err = {{0}};
    hs_loss_eval *ev;
    cr_assert_eq(hs_loss_eval_new(k->m, &in, &ev, &err), HS_OK, "%s", err.msg);
    double base, *delta = malloc((size_t)LH * sizeof *delta);
    cr_assert_eq(hs_loss_eval_run(ev, NULL, &base, &err), HS_OK, "%s", err.msg);
    double want = cJSON_GetObjectItem(imp, "base_loss")->valuedouble;
    cr_expect(fabs(base - want) <= TOL, "%s: base loss %.8f vs %.8f", name, base, want);
    cr_assert_eq(hs_ablation_sweep(ev, base, NULL, delta, NULL, NULL, &err), HS_OK, "%s", err.msg);
    expect_grid(name, "ablation", delta, cJSON_GetObjectItem(imp, "ablation"), L, H, TOL, 0);
    double *raw = malloc((size_t)LH * sizeof *raw), *norm = malloc((size_t)LH * sizeof *norm);
    cr_assert_eq(hs_gradient_importance(k->m, &in, raw, norm, &err), HS_OK, "%s", err.msg);
    expect_grid(name, "gradient (raw)", raw, cJSON_GetObjectItem(imp, "gradient_raw"), L, H,
                GRAD_ABS, GRAD_REL);
    expect_grid(name, "gradient", norm, cJSON_GetObjectItem(imp, "gradient"), L, H, GRAD_ABS,
                GRAD_REL);
    free(raw);
    free(norm);
    free(delta);
    hs_loss_eval_free(ev);
}

static void run_case(const char *name)
{
    norm_case k;
    case_open(name, &k);
    check_forward(name, &k);
    if (cJSON_IsObject(cJSON_GetObjectItem(k.j, "importance")))
        check_importance(name, &k);
    if (k.hm.data) { /* the signed gradient at the mask against central differences */
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
