/* What the block descriptor says beyond today's families, against the independent float64
 * reference fixtures/ref/make_descriptor_golden.py (fixtures/descriptor/): a random
 * Llama-shaped model whose heads (width 12, config.json head_dim) are wider than d_model /
 * n_head (32 / 4), run under three descriptors set on the opened model: a sliding window on
 * the local layers with every 2nd layer global and its own rotary base (swa), a sliding
 * window on every layer (swa_all), a GELU-gated MLP (geglu). Maps (the masked cells exactly
 * 0), the per-token loss, the batched ablation passes, gradient importance (raw, signed, at
 * a head mask) and the capture of activations. */
#include <cJSON.h>

#include "headscope/activations.h"
#include "headscope/forward.h"
#include "headscope/gguf.h"
#include "headscope/importance.h"
#include "headscope/model.h"
#include "model/model_internal.h"
#include "testutil.h"

#define DIR "fixtures/descriptor/"
#define ATTN_TOL 1e-5
#define LOSS_TOL 1e-4
#define GRAD_ABS 1e-4
#define GRAD_REL 1e-3

typedef struct desc_case {
    hs_model *m;
    cJSON *all;
    const cJSON *ref;
    hs_npy ids;
    int n;
} desc_case;

/* The model with the variant's descriptor set on its own copy of the family's. */
static void case_open(const char *variant, desc_case *k)
{
    hs_error err = {{0}};
    memset(k, 0, sizeof *k);
    cr_assert_eq(hs_model_load(DIR "model", &k->m, &err), HS_OK, "%s", err.msg);
    k->all = tu_json_file(DIR "golden.json");
    k->ref = cJSON_GetObjectItem(k->all, variant);
    cr_assert(cJSON_IsObject(k->ref), "%s: no reference", variant);
    k->ids = tu_npy(DIR "ids.npy");
    k->n = (int)k->ids.count;
    hs_model *m = k->m;
    if (!strcmp(variant, "swa")) {
        m->arch.sliding_window = 4;
        m->arch.global_every = 2;
        m->arch.local_rotary_base = 100.0f;
    } else if (!strcmp(variant, "swa_all")) {
        m->arch.sliding_window = 3;
    } else {
        m->cfg.act = HS_ACT_GELU_TANH; /* gated, as the family's MLP */
    }
    cr_assert_eq(hs_config_validate(&m->cfg, &err), HS_OK, "%s", err.msg);
}

static void case_close(desc_case *k)
{
    hs_model_free(k->m);
    hs_npy_free(&k->ids);
    cJSON_Delete(k->all);
}

static void expect_grid(const char *what, const double *got, const cJSON *grid, int L, int H,
                        double abs_tol, double rel_tol)
{
    cr_assert_eq(cJSON_GetArraySize(grid), L, "%s: reference rows", what);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            double want = cJSON_GetArrayItem(cJSON_GetArrayItem(grid, l), h)->valuedouble;
            double g = got[l * H + h];
            cr_expect(fabs(g - want) <= abs_tol + rel_tol * fabs(want),
                      "%s %d.%d: %.8f, reference %.8f", what, l, h, g, want);
        }
}

Test(descriptor, heads_wider_than_d_model_over_n_head_come_from_config_json)
{
    desc_case k;
    case_open("swa_all", &k);
    const hs_model_config *c = hs_model_config_of(k.m);
    cr_assert_eq(c->d_model, 32);
    cr_assert_eq(c->d_head, 12);
    cr_assert_eq(hs_model_attn_width(c), 48);
    cr_assert_eq(hs_qkv_width(c), 48 + 2 * 2 * 12);
    cr_assert_eq(c->act, HS_ACT_SILU);
    cr_assert(c->gated && c->causal);
    case_close(&k);
}

Test(descriptor, the_layer_accessors_follow_the_rule)
{
    desc_case k;
    case_open("swa", &k);
    const hs_model_config *c = hs_model_config_of(k.m);
    hs_visibility v0 = hs_model_layer_visibility(c, 0), v1 = hs_model_layer_visibility(c, 1);
    cr_assert(v0.kind == HS_VIS_SLIDING && v0.window == 4);
    cr_assert(v1.kind == HS_VIS_CAUSAL);
    cr_assert(hs_model_layer_is_local(c, 0) && !hs_model_layer_is_local(c, 1));
    hs_rope r0 = hs_model_layer_rope(c, 0), r1 = hs_model_layer_rope(c, 1);
    cr_assert(r0.base == 100.0f && r0.scaling == HS_ROPE_PLAIN && r0.dims == 12);
    cr_assert(r1.base == 10000.0f && r1.dims == 12);
    /* a config without a descriptor: its causal flag */
    hs_model_config bare = {.causal = 0};
    cr_assert_eq(hs_model_layer_visibility(&bare, 3).kind, HS_VIS_BIDIRECTIONAL);
    case_close(&k);
}

/* The maps against the reference's, every cell a query does not see exactly 0; the NLL of
 * every token and the loss from the logits. */
static void check_forward(const char *variant, desc_case *k)
{
    const hs_model_config *c = hs_model_config_of(k->m);
    int n = k->n, L = c->n_layer, H = c->n_head, V = c->vocab_size;
    hs_error err = {{0}};
    hs_trace *t = NULL;
    cr_assert_eq(hs_trace_new(k->m, n, &t, &err), HS_OK, "%s", err.msg);
    float *logits = malloc((size_t)n * (size_t)V * sizeof *logits);
    hs_forward_opts o = {.on_attn = hs_trace_observe, .user = t, .logits = logits};
    cr_assert_eq(hs_forward(k->m, k->ids.data, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);
    char path[128];
    snprintf(path, sizeof path, DIR "%s.attn.npy", variant);
    hs_npy attn = tu_npy(path);
    cr_assert_eq(attn.count, (size_t)L * H * n * n);
    size_t where;
    double d = tu_max_abs_diff(t->attn, attn.data, attn.count, &where);
    cr_expect_leq(d, ATTN_TOL, "%s: attention max|d| = %g at %zu", variant, d, where);
    int hidden_cells = 0;
    for (int l = 0; l < L; l++) {
        hs_visibility v = hs_model_layer_visibility(c, l);
        for (int h = 0; h < H; h++)
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++) {
                    float p = t->attn[(((size_t)l * H + h) * n + i) * n + j];
                    if (!hs_vis_sees(v, i, j, n)) {
                        cr_expect(p == 0.0f, "%s: %d.%d (%d, %d) = %g", variant, l, h, i, j, p);
                        hidden_cells++;
                    }
                }
    }
    cr_expect_gt(hidden_cells, 0);
    const cJSON *nll = cJSON_GetObjectItem(k->ref, "nll");
    const int32_t *ids = k->ids.data;
    double loss = 0;
    for (int i = 0; i + 1 < n; i++) {
        double got = tu_nll(logits + (size_t)i * V, V, ids[i + 1]);
        double want = cJSON_GetArrayItem(nll, i)->valuedouble;
        cr_expect(fabs(got - want) <= LOSS_TOL, "%s: nll[%d] %.7f vs %.7f", variant, i, got, want);
        loss += got;
    }
    double want = cJSON_GetObjectItem(k->ref, "loss")->valuedouble;
    cr_expect(fabs(loss / (n - 1) - want) <= LOSS_TOL, "%s: loss %.7f vs %.7f", variant,
              loss / (n - 1), want);
    hs_npy_free(&attn);
    free(logits);
    hs_trace_free(t);
}

/* The batched passes (ablation of every head, a head mask) and the gradients. */
static void check_importance(const char *variant, desc_case *k)
{
    const hs_model_config *c = hs_model_config_of(k->m);
    int L = c->n_layer, H = c->n_head, LH = L * H;
    const cJSON *ref = k->ref, *mj = cJSON_GetObjectItem(k->all, "mask");
    hs_loss_input in = {.ids = k->ids.data, .n = k->n, .kind = HS_LOSS_LM};
    hs_error err = {{0}};
    hs_loss_eval *ev;
    cr_assert_eq(hs_loss_eval_new(k->m, &in, &ev, &err), HS_OK, "%s", err.msg);
    double base, masked, *delta = malloc((size_t)LH * sizeof *delta);
    cr_assert_eq(hs_loss_eval_run(ev, NULL, &base, &err), HS_OK, "%s", err.msg);
    cr_expect(fabs(base - cJSON_GetObjectItem(ref, "loss")->valuedouble) <= LOSS_TOL,
              "%s: base loss %.7f", variant, base);
    cr_assert_eq(hs_ablation_sweep(ev, base, NULL, delta, NULL, NULL, &err), HS_OK, "%s", err.msg);
    expect_grid("ablation", delta, cJSON_GetObjectItem(ref, "ablation"), L, H, LOSS_TOL, 0);
    float mask[64];
    for (int q = 0; q < LH; q++)
        mask[q] = (float)cJSON_GetArrayItem(cJSON_GetArrayItem(mj, q / H), q % H)->valuedouble;
    cr_assert_eq(hs_loss_eval_run(ev, mask, &masked, &err), HS_OK, "%s", err.msg);
    cr_expect(fabs(masked - cJSON_GetObjectItem(ref, "loss_at_mask")->valuedouble) <= LOSS_TOL,
              "%s: loss at the mask %.7f", variant, masked);

    double raw[64], norm[64], sg[64], loss;
    cr_assert_eq(hs_gradient_importance(k->m, &in, raw, norm, &err), HS_OK, "%s", err.msg);
    expect_grid("gradient (raw)", raw, cJSON_GetObjectItem(ref, "gradient_raw"), L, H, GRAD_ABS,
                GRAD_REL);
    cr_assert_eq(hs_gradient_signed(k->m, &in, sg, &loss, &err), HS_OK, "%s", err.msg);
    expect_grid("gradient (signed)", sg, cJSON_GetObjectItem(ref, "gradient_signed"), L, H,
                GRAD_ABS, GRAD_REL);
    cr_expect(fabs(loss - base) <= 1e-6, "%s: gradient's loss %.9f, evaluator %.9f", variant,
              loss, base);
    cr_assert_eq(hs_gradient_signed_masked(k->m, &in, mask, sg, &loss, &err), HS_OK, "%s",
                 err.msg);
    expect_grid("gradient at the mask", sg, cJSON_GetObjectItem(ref, "gradient_at_mask"), L, H,
                GRAD_ABS, GRAD_REL);
    free(delta);
    hs_loss_eval_free(ev);
}

/* The captured maps are the forward pass's, bit for bit, and each head's context z (n_head
 * d_head wide) is its map times its key/value head's values, from the captured qkv. */
static void check_capture(const char *variant, desc_case *k)
{
    const hs_model_config *c = hs_model_config_of(k->m);
    int n = k->n, L = c->n_layer, H = c->n_head, dh = c->d_head, A = hs_model_attn_width(c);
    hs_error err = {{0}};
    hs_activations *a = NULL;
    cr_assert_eq(hs_activations_run(k->m, k->ids.data, NULL, n,
                                    HS_CAPTURE_PATTERN | HS_CAPTURE_Z | HS_CAPTURE_QKV, &a, &err),
                 HS_OK, "%s", err.msg);
    cr_assert_eq(a->qkv_width, A + 2 * c->n_kv_head * dh);
    hs_trace *t = NULL;
    cr_assert_eq(hs_trace_new(k->m, n, &t, &err), HS_OK, "%s", err.msg);
    hs_forward_opts o = {.on_attn = hs_trace_observe, .user = t};
    cr_assert_eq(hs_forward(k->m, k->ids.data, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);
    cr_expect(!memcmp(a->pattern, t->attn, (size_t)L * H * n * n * sizeof(float)),
              "%s: captured maps differ from the pass's", variant);
    double worst = 0;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            size_t voff = (size_t)A + (size_t)(c->n_kv_head + hs_model_kv_head(c, h)) * dh;
            for (int i = 0; i < n; i++)
                for (int e = 0; e < dh; e++) {
                    double s = 0;
                    for (int j = 0; j < n; j++)
                        s += (double)a->pattern[(((size_t)l * H + h) * n + i) * n + j] *
                             a->qkv[((size_t)l * n + j) * a->qkv_width + voff + e];
                    double z = a->z[((size_t)l * n + i) * A + (size_t)h * dh + e];
                    worst = fabs(z - s) > worst ? fabs(z - s) : worst;
                }
        }
    cr_expect_leq(worst, 1e-5, "%s: z differs from P V by %g", variant, worst);
    hs_trace_free(t);
    hs_activations_free(a);
}

static void run_variant(const char *variant)
{
    desc_case k;
    case_open(variant, &k);
    check_forward(variant, &k);
    check_importance(variant, &k);
    check_capture(variant, &k);
    case_close(&k);
}

Test(descriptor, sliding_window_on_local_layers) { run_variant("swa"); }
Test(descriptor, sliding_window_on_every_layer) { run_variant("swa_all"); }
Test(descriptor, gelu_gated_mlp) { run_variant("geglu"); }

/* The analytic gradient of the masked softmax against central differences of the loss. */
Test(descriptor, gradient_matches_finite_differences_under_a_window)
{
    desc_case k;
    case_open("swa", &k);
    hs_loss_input in = {.ids = k.ids.data, .n = k.n, .kind = HS_LOSS_LM};
    tu_check_finite_difference(k.m, &in, "swa");
    case_close(&k);
}

/* A model whose heads do not split d_model written to GGUF (with tiny-llama's tokenizer,
 * which llama.cpp needs) keeps its head width (attention.key_length / value_length) and
 * gives the same maps, bit for bit; a sliding window on every layer is written and read back,
 * one on some layers only, which the file cannot say, is refused. */
Test(descriptor, gguf_keeps_the_head_width)
{
    char dir[64], from[2048], to[256], cwd[1024];
    const char *files[][2] = {{DIR "model/config.json", "config.json"},
                              {DIR "model/model.safetensors", "model.safetensors"},
                              {"fixtures/family-models/tiny-llama/tokenizer.json",
                               "tokenizer.json"}};
    tu_mkdtemp(dir, sizeof dir);
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    for (int k = 0; k < 3; k++) {
        snprintf(from, sizeof from, "%s/%s", cwd, files[k][0]);
        snprintf(to, sizeof to, "%s/%s", dir, files[k][1]);
        cr_assert_eq(symlink(from, to), 0, "symlink %s", to);
    }
    hs_error err = {{0}};
    hs_model *hf = NULL, *back = NULL;
    cr_assert_eq(hs_model_load(dir, &hf, &err), HS_OK, "%s", err.msg);
    snprintf(to, sizeof to, "%s/m.gguf", dir);
    cr_assert_eq(hs_gguf_write(hf, to, NULL, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_model_load(to, &back, &err), HS_OK, "%s", err.msg);
    const hs_model_config *c = hs_model_config_of(back);
    cr_assert_eq(c->d_head, 12);
    cr_assert_eq(hs_model_attn_width(c), 48);
    hs_npy ids = tu_npy(DIR "ids.npy");
    int n = (int)ids.count;
    hs_trace *t1 = NULL, *t2 = NULL;
    cr_assert_eq(hs_trace_new(hf, n, &t1, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_trace_new(back, n, &t2, &err), HS_OK, "%s", err.msg);
    hs_forward_opts o1 = {.on_attn = hs_trace_observe, .user = t1};
    hs_forward_opts o2 = {.on_attn = hs_trace_observe, .user = t2};
    cr_assert_eq(hs_forward(hf, ids.data, NULL, n, &o1, NULL, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_forward(back, ids.data, NULL, n, &o2, NULL, &err), HS_OK, "%s", err.msg);
    cr_expect(!memcmp(t1->attn, t2->attn, (size_t)c->n_layer * c->n_head * n * n * sizeof(float)),
              "the GGUF file's maps differ");
    hf->arch.sliding_window = 4; /* on every layer: {arch}.attention.sliding_window */
    snprintf(to, sizeof to, "%s/w.gguf", dir);
    cr_assert_eq(hs_gguf_write(hf, to, NULL, &err), HS_OK, "%s", err.msg);
    hs_model *win = NULL;
    cr_assert_eq(hs_model_load(to, &win, &err), HS_OK, "%s", err.msg);
    for (int l = 0; l < c->n_layer; l++) {
        hs_visibility v = hs_model_layer_visibility(hs_model_config_of(win), l);
        cr_expect(v.kind == HS_VIS_SLIDING && v.window == 4, "layer %d's window read back", l);
    }
    hs_model_free(win);
    unlink(to);
    hf->arch.global_every = 2; /* on some layers only: the file cannot say it */
    cr_assert_eq(hs_gguf_write(hf, to, NULL, &err), HS_E_UNSUPPORTED);
    cr_assert_str_eq(err.msg, "a sliding window on some layers only, another visibility than the "
                     "family's or a MLP gated by another activation than SiLU cannot be written "
                     "to GGUF");
    cr_assert_neq(access(to, F_OK), 0, "a refused file is left behind");
    hs_trace_free(t1);
    hs_trace_free(t2);
    hs_npy_free(&ids);
    hs_model_free(hf);
    hs_model_free(back);
    tu_rm_rf(dir);
}

/* An encoder (BERT's post-norm block) as a prefix LM (every query sees the first 4 tokens
 * and the ones up to itself) and with a window of 3 keys on every layer: the maps' hidden
 * cells exactly 0 and the masked-language-model gradient against central differences. */
static void encoder_under(hs_visibility v, int window)
{
    hs_error err = {{0}};
    hs_model *m = NULL;
    cr_assert_eq(hs_model_load("fixtures/tiny-bert", &m, &err), HS_OK, "%s", err.msg);
    m->arch.vis = v;
    m->arch.sliding_window = window;
    cr_assert_eq(hs_config_validate(&m->cfg, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(m->cfg.causal, window > 0);
    enum { n = 9 };
    int32_t ids[n] = {101, 1996, 4937, 103, 2006, 1996, 13523, 1012, 102}, pos[1] = {3};
    int32_t tgt[1] = {2938};
    hs_trace *t = NULL;
    cr_assert_eq(hs_trace_new(m, n, &t, &err), HS_OK, "%s", err.msg);
    hs_forward_opts o = {.on_attn = hs_trace_observe, .user = t};
    cr_assert_eq(hs_forward(m, ids, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);
    const hs_model_config *c = hs_model_config_of(m);
    for (int l = 0; l < c->n_layer; l++)
        for (int h = 0; h < c->n_head; h++)
            for (int i = 0; i < n; i++) {
                double sum = 0;
                for (int j = 0; j < n; j++) {
                    float p = t->attn[(((size_t)l * c->n_head + h) * n + i) * n + j];
                    int seen = window ? i - window < j && j <= i : j <= i || j < v.prefix;
                    cr_assert(seen || p == 0.0f, "%d.%d (%d, %d) = %g", l, h, i, j, p);
                    sum += p;
                }
                cr_assert_float_eq(sum, 1.0, 1e-5);
            }
    hs_loss_input in = {.ids = ids, .n = n, .kind = HS_LOSS_MLM, .positions = pos,
                        .targets = tgt, .n_pos = 1};
    tu_check_finite_difference(m, &in, window ? "bert, window 3" : "bert, prefix 4");
    hs_trace_free(t);
    hs_model_free(m);
}

Test(descriptor, encoder_as_prefix_lm_or_windowed_matches_finite_differences)
{
    encoder_under(hs_vis_prefix(4), 0);
    encoder_under(hs_vis_bidirectional(), 3);
}
