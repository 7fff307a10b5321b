/* Forward pass against golden outputs of the independent float64 PyTorch reference
 * (fixtures/ref/hs_ref.py, run by fixtures/ref/make_golden.py): attention maps
 * (recorded before the head mask), final hidden states, per-token NLL and loss, on the
 * shipped tiny models, F16/BF16, prefixed and legacy-named variants, text pairs and
 * head masks. */
#include <cJSON.h>

#include "core/core.h"
#include "headscope/forward.h"
#include "headscope/model.h"
#include "nn/ops.h"
#include "testutil.h"

/* The fidelity bar: maps within 1e-5 of the float64 reference (hidden states 1e-4), or within
 * twice a float32 reference's own error on that case where float32 cannot do better
 * (fixtures/golden/f32_error.json, from fixtures/ref/f32_error.py). */
#define ATTN_TOL 1e-5
#define HIDDEN_TOL 1e-4
#define LOSS_TOL 1e-4

/* max(floor, 2 x the float32 reference's error on `name` for `what`). */
static double case_tol(const char *name, const char *what, double floor)
{
    static cJSON *f32;
    if (!f32) {
        char *text;
        size_t len;
        hs_error err = {{0}};
        cr_assert_eq(hs_read_file("fixtures/golden/f32_error.json", 1 << 20, &text, &len, &err),
                     HS_OK, "%s", err.msg);
        f32 = cJSON_ParseWithLength(text, len);
        free(text);
        cr_assert_not_null(f32);
    }
    const cJSON *e = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(f32, "cases"),
                                                             name), what);
    double t = cJSON_IsNumber(e) ? 2.0 * e->valuedouble : 0.0;
    return t > floor ? t : floor;
}

static cJSON *load_case_json(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "fixtures/golden/%s.json", name);
    return tu_json_file(path);
}

static int file_exists(const char *p) { return access(p, R_OK) == 0; }

/* Golden model paths are relative to the repository root, where the suites run. */
static void model_path(const cJSON *j, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", cJSON_GetObjectItem(j, "model")->valuestring);
}

/* Checks golden case `name` on its own model, or on `model` (a folder holding the same
 * weights in another file format) when not NULL. */
static void run_case_on(const char *name, const char *model)
{
    cJSON *j = load_case_json(name);
    char mpath[256], path[256];
    model_path(j, mpath, sizeof mpath);
    if (model)
        snprintf(mpath, sizeof mpath, "%s", model);
    hs_error err = {{0}};
    hs_model *m = NULL;
    cr_assert_eq(hs_model_load(mpath, &m, &err), HS_OK, "%s: %s", mpath, err.msg);
    const hs_model_config *c = hs_model_config_of(m);

    snprintf(path, sizeof path, "fixtures/golden/%s.ids.npy", name);
    hs_npy ids = tu_npy(path), tt = {0}, hm = {0};
    snprintf(path, sizeof path, "fixtures/golden/%s.type_ids.npy", name);
    if (file_exists(path))
        tt = tu_npy(path);
    snprintf(path, sizeof path, "fixtures/golden/%s.head_mask.npy", name);
    if (file_exists(path))
        hm = tu_npy(path);
    int n = (int)ids.count;

    hs_trace *trace = NULL;
    cr_assert_eq(hs_trace_new(m, n, &trace, &err), HS_OK);
    float *hidden = malloc((size_t)n * (size_t)c->d_model * sizeof(float));
    float *logits = c->has_lm_head ? malloc((size_t)n * (size_t)c->vocab_size * sizeof(float)) : NULL;
    hs_forward_opts o = {.head_mask = hm.data, .on_attn = hs_trace_observe, .user = trace,
                         .hidden = hidden, .logits = logits};
    cr_assert_eq(hs_forward(m, ids.data, tt.data, n, &o, NULL, &err), HS_OK, "%s", err.msg);

    snprintf(path, sizeof path, "fixtures/golden/%s.attn.npy", name);
    hs_npy attn = tu_npy(path);
    cr_assert_eq(attn.count, (size_t)c->n_layer * c->n_head * n * n);
    size_t w;
    double d = tu_max_abs_diff(trace->attn, attn.data, attn.count, &w);
    double tol = case_tol(name, "attn", ATTN_TOL);
    cr_expect_leq(d, tol, "%s: attention max|d| = %g at flat index %zu (bound %g)", name, d, w, tol);

    snprintf(path, sizeof path, "fixtures/golden/%s.hidden.npy", name);
    hs_npy hid = tu_npy(path);
    d = tu_max_abs_diff(hidden, hid.data, hid.count, &w);
    tol = case_tol(name, "hidden", HIDDEN_TOL);
    cr_expect_leq(d, tol, "%s: hidden max|d| = %g at %zu (bound %g)", name, d, w, tol);

    const cJSON *kind = cJSON_GetObjectItem(j, "loss_kind");
    if (logits && cJSON_IsString(kind)) {
        const cJSON *nll = cJSON_GetObjectItem(j, "nll");
        double loss = 0;
        int cnt = cJSON_GetArraySize(nll);
        if (!strcmp(kind->valuestring, "lm")) {
            const int32_t *id = ids.data;
            for (int i = 0; i + 1 < n; i++) {
                double v = tu_nll(logits + (size_t)i * c->vocab_size, c->vocab_size, id[i + 1]);
                cr_expect(fabs(v - cJSON_GetArrayItem(nll, i)->valuedouble) <= LOSS_TOL,
                          "%s: nll[%d] %g vs %g", name, i, v, cJSON_GetArrayItem(nll, i)->valuedouble);
                loss += v;
            }
        } else {
            const cJSON *pos = cJSON_GetObjectItem(j, "positions");
            const cJSON *orig = cJSON_GetObjectItem(j, "orig_ids");
            for (int k = 0; k < cnt; k++) {
                int p = cJSON_GetArrayItem(pos, k)->valueint;
                int target = cJSON_GetArrayItem(orig, p)->valueint;
                loss += tu_nll(logits + (size_t)p * c->vocab_size, c->vocab_size, target);
            }
        }
        loss /= cnt;
        double want = cJSON_GetObjectItem(j, "loss")->valuedouble;
        cr_expect(fabs(loss - want) <= LOSS_TOL, "%s: loss %.7f, reference %.7f", name, loss, want);
    }
    hs_npy_free(&hid);
    hs_npy_free(&attn);
    hs_npy_free(&ids);
    hs_npy_free(&tt);
    hs_npy_free(&hm);
    free(hidden);
    free(logits);
    hs_trace_free(trace);
    hs_model_free(m);
    cJSON_Delete(j);
}

static void run_case(const char *name) { run_case_on(name, NULL); }

#define CASE(name) Test(forward_golden, name) { run_case(#name); }

/* pytorch_model.bin-only copies of the hub-layout folders (fixtures/ref/
 * make_torchbin_models.py): the same maps, hidden states and losses as their goldens. */
Test(forward_golden, gpt2_hub_from_pytorch_model_bin) { run_case_on("gpt2_hub", "fixtures/models/gpt2-hub-bin"); }
Test(forward_golden, bert_hub_from_pytorch_model_bin) { run_case_on("bert_hub", "fixtures/models/bert-hub-bin"); }
CASE(tiny_gpt2_hello)
CASE(tiny_gpt2_common)
CASE(tiny_gpt2_induction)
CASE(tiny_gpt2_common_hm)
CASE(tiny_gpt2_induction_hm)
CASE(trained_gpt2_common)
CASE(trained_gpt2_induction)
CASE(trained_gpt2_common_hm)
CASE(tiny_bert_hello)
CASE(tiny_bert_sentence)
CASE(tiny_bert_pair)
CASE(tiny_bert_pair_hm)
CASE(gpt2_prefixed)
CASE(gpt2_f16)
CASE(gpt2_bf16)
CASE(gpt2_prefixed_hm)
CASE(gpt2_hub)
CASE(bert_legacy)
CASE(bert_f16)
CASE(bert_bf16)
CASE(bert_bf16_hm)
CASE(bert_hub)
CASE(bert_posids)

/* A head mask scales probs after they are recorded: layer-0 maps are identical with and
 * without the mask, and masking every head of the last layer changes the output. */
Test(forward, head_mask_applies_after_recording)
{
    hs_error err = {{0}};
    hs_model *m = NULL;
    cr_assert_eq(hs_model_load("fixtures/models/gpt2-f16", &m, &err), HS_OK, "%s", err.msg);
    const hs_model_config *c = hs_model_config_of(m);
    int32_t ids[6] = {5, 17, 99, 3, 5, 17};
    hs_trace *a, *b;
    hs_trace_new(m, 6, &a, &err);
    hs_trace_new(m, 6, &b, &err);
    float *mask = malloc((size_t)c->n_layer * c->n_head * sizeof(float));
    for (int i = 0; i < c->n_layer * c->n_head; i++)
        mask[i] = 1.0f;
    mask[0] = 0.0f; /* head 0.0 */
    hs_forward_opts oa = {.on_attn = hs_trace_observe, .user = a};
    hs_forward_opts ob = {.on_attn = hs_trace_observe, .user = b, .head_mask = mask};
    cr_assert_eq(hs_forward(m, ids, NULL, 6, &oa, NULL, &err), HS_OK);
    cr_assert_eq(hs_forward(m, ids, NULL, 6, &ob, NULL, &err), HS_OK);
    size_t per_layer = (size_t)c->n_head * 36;
    cr_assert(memcmp(a->attn, b->attn, per_layer * sizeof(float)) == 0,
              "layer 0 maps must be recorded before the mask");
    cr_assert_gt(tu_max_abs_diff(a->attn + per_layer, b->attn + per_layer, per_layer, NULL), 1e-6,
                 "masking head 0.0 must change layer-1 maps");
    free(mask);
    hs_trace_free(a);
    hs_trace_free(b);
    hs_model_free(m);
}

/* An observer of its own (not hs_trace_observe): copies every layer into a trace's buffer. */
static int copy_observer(void *user, int layer, const float *probs, int n_head, int n)
{
    hs_trace *t = user;
    size_t per = (size_t)n_head * (size_t)n * (size_t)n;
    memcpy(t->attn + (size_t)layer * per, probs, per * sizeof *probs);
    return 0;
}

/* With hs_trace_observe the pass writes the probabilities straight into the trace: the
 * workspace then never allocates its (n_head, n, n) buffer, and the trace holds the same
 * bytes an observer of its own copies, with and without a head mask below 1 (the mask
 * scales the context, never the maps the observer sees). */
Test(forward, trace_is_written_in_place_with_the_observed_bytes)
{
    hs_error err = {{0}};
    hs_model *m = NULL;
    cr_assert_eq(hs_model_load("fixtures/models/gpt2-f16", &m, &err), HS_OK, "%s", err.msg);
    const hs_model_config *c = hs_model_config_of(m);
    int32_t ids[7] = {5, 17, 99, 3, 5, 17, 42};
    float *mask = malloc((size_t)c->n_layer * c->n_head * sizeof(float));
    for (int i = 0; i < c->n_layer * c->n_head; i++)
        mask[i] = 1.0f;
    mask[1] = 0.5f; /* layer 0 head 1 */
    size_t all = (size_t)c->n_layer * c->n_head * 49, floats = 1;
    for (int masked = 0; masked < 2; masked++) {
        hs_trace *direct, *copied;
        hs_forward_ws *ws;
        cr_assert_eq(hs_trace_new(m, 7, &direct, &err), HS_OK);
        cr_assert_eq(hs_trace_new(m, 7, &copied, &err), HS_OK);
        cr_assert_eq(hs_forward_ws_new(m, 7, &ws, &err), HS_OK);
        const float *hm = masked ? mask : NULL;
        hs_forward_opts od = {.on_attn = hs_trace_observe, .user = direct, .head_mask = hm};
        hs_forward_opts oc = {.on_attn = copy_observer, .user = copied, .head_mask = hm};
        cr_assert_eq(hs_forward(m, ids, NULL, 7, &od, ws, &err), HS_OK, "%s", err.msg);
        cr_assert(hs_forward_ws_spare(ws, &floats) == NULL,
                  "the workspace allocated a maps buffer (masked %d)", masked);
        cr_assert_eq(hs_forward(m, ids, NULL, 7, &oc, ws, &err), HS_OK, "%s", err.msg);
        cr_assert(memcmp(direct->attn, copied->attn, all * sizeof(float)) == 0,
                  "trace written in place differs from the observed maps (masked %d)", masked);
        hs_forward_ws_free(ws);
        hs_trace_free(direct);
        hs_trace_free(copied);
    }
    free(mask);
    hs_model_free(m);
}

/* A pass with no workspace of the caller's, no logits and no hidden states stops after the
 * last layer's attention (block.h): its maps are, bit for bit, those of a whole pass that
 * keeps going (a workspace given, or the hidden states asked for), in the pre-norm,
 * post-norm and parallel-residual blocks and with a head mask. */
Test(forward, maps_only_pass_gives_the_whole_pass_maps)
{
    const char *dirs[] = {"fixtures/models/gpt2-f16", "fixtures/models/bert-f16",
                          "fixtures/family-models/tiny-pythia"};
    int32_t ids[9] = {5, 17, 99, 3, 5, 17, 42, 8, 1};
    for (size_t k = 0; k < sizeof dirs / sizeof *dirs; k++) {
        hs_error err = {{0}};
        hs_model *m = NULL;
        cr_assert_eq(hs_model_load(dirs[k], &m, &err), HS_OK, "%s: %s", dirs[k], err.msg);
        const hs_model_config *c = hs_model_config_of(m);
        size_t lh = (size_t)c->n_layer * c->n_head, all = lh * 81;
        float *mask = malloc(lh * sizeof *mask);
        float *hidden = malloc((size_t)9 * c->d_model * sizeof *hidden);
        for (size_t i = 0; i < lh; i++)
            mask[i] = i == lh - 1 ? 0.0f : 1.0f; /* the last layer's last head off */
        for (int masked = 0; masked < 2; masked++) {
            hs_trace *t[3];
            hs_forward_ws *ws;
            for (int i = 0; i < 3; i++)
                cr_assert_eq(hs_trace_new(m, 9, &t[i], &err), HS_OK);
            cr_assert_eq(hs_forward_ws_new(m, 9, &ws, &err), HS_OK);
            const float *hm = masked ? mask : NULL;
            hs_forward_opts o0 = {.on_attn = hs_trace_observe, .user = t[0], .head_mask = hm};
            hs_forward_opts o1 = {.on_attn = hs_trace_observe, .user = t[1], .head_mask = hm};
            hs_forward_opts o2 = {.on_attn = hs_trace_observe, .user = t[2], .head_mask = hm,
                                  .hidden = hidden};
            cr_assert_eq(hs_forward(m, ids, NULL, 9, &o0, NULL, &err), HS_OK, "%s", err.msg);
            cr_assert_eq(hs_forward(m, ids, NULL, 9, &o1, ws, &err), HS_OK, "%s", err.msg);
            cr_assert_eq(hs_forward(m, ids, NULL, 9, &o2, NULL, &err), HS_OK, "%s", err.msg);
            for (int i = 1; i < 3; i++)
                cr_assert(memcmp(t[0]->attn, t[i]->attn, all * sizeof(float)) == 0,
                          "%s: the maps-only pass differs from whole pass %d (masked %d)",
                          dirs[k], i, masked);
            hs_forward_ws_free(ws);
            for (int i = 0; i < 3; i++)
                hs_trace_free(t[i]);
        }
        free(mask);
        free(hidden);
        hs_model_free(m);
    }
}

Test(forward, causal_rows_sum_to_one_and_future_is_zero)
{
    hs_error err = {{0}};
    hs_model *m = NULL;
    cr_assert_eq(hs_model_load("fixtures/models/gpt2-f16", &m, &err), HS_OK, "%s", err.msg);
    int32_t ids[5] = {1, 2, 3, 4, 5};
    hs_trace *t;
    hs_trace_new(m, 5, &t, &err);
    hs_forward_opts o = {.on_attn = hs_trace_observe, .user = t};
    cr_assert_eq(hs_forward(m, ids, NULL, 5, &o, NULL, &err), HS_OK);
    for (int lh = 0; lh < t->n_layer * t->n_head; lh++)
        for (int i = 0; i < 5; i++) {
            double s = 0;
            for (int k = 0; k < 5; k++) {
                float p = t->attn[(size_t)lh * 25 + (size_t)i * 5 + (size_t)k];
                if (k > i)
                    cr_assert_eq(p, 0.0f);
                s += p;
            }
            cr_assert(fabs(s - 1.0) < 1e-5);
        }
    hs_trace_free(t);
    hs_model_free(m);
}

Test(forward, rejects_out_of_range_ids_and_too_many_tokens)
{
    hs_error err = {{0}};
    hs_model *m = NULL;
    cr_assert_eq(hs_model_load("fixtures/models/gpt2-f16", &m, &err), HS_OK, "%s", err.msg);
    const hs_model_config *c = hs_model_config_of(m);
    int32_t bad[2] = {1, c->vocab_size};
    cr_assert_eq(hs_forward(m, bad, NULL, 2, NULL, NULL, &err), HS_E_INPUT);
    cr_assert_not_null(strstr(err.msg, "outside the vocabulary"), "%s", err.msg);
    int n = c->n_ctx + 1;
    int32_t *many = calloc((size_t)n, sizeof *many);
    cr_assert_eq(hs_forward(m, many, NULL, n, NULL, NULL, &err), HS_E_INPUT);
    cr_assert_not_null(strstr(err.msg, "exceed the model's context"), "%s", err.msg);
    free(many);
    hs_model_free(m);
}

/* A pass restarted at layer l from the captured residual stream equals the full pass
 * bit for bit when the head mask below l is the same (the ablation cache relies on it). */
Test(forward, restart_from_captured_stream_is_exact)
{
    hs_error err = {{0}};
    hs_model *m = NULL;
    cr_assert_eq(hs_model_load("fixtures/models/bert-f16", &m, &err), HS_OK, "%s", err.msg);
    const hs_model_config *c = hs_model_config_of(m);
    int n = 9, d = c->d_model;
    int32_t ids[9] = {101, 17, 42, 99, 102, 7, 8, 9, 102};
    int32_t tt[9] = {0, 0, 0, 0, 0, 1, 1, 1, 1};
    size_t nd = (size_t)n * (size_t)d;
    float *layers = malloc((size_t)c->n_layer * nd * sizeof(float));
    float *h_full = malloc(nd * sizeof(float)), *h_part = malloc(nd * sizeof(float));
    float *mask = malloc((size_t)c->n_layer * c->n_head * sizeof(float));
    for (int i = 0; i < c->n_layer * c->n_head; i++)
        mask[i] = 1.0f;
    hs_forward_opts full = {.hidden = h_full, .x_layers = layers};
    cr_assert_eq(hs_forward(m, ids, tt, n, &full, NULL, &err), HS_OK, "%s", err.msg);
    int l = c->n_layer - 1;
    mask[l * c->n_head + 1] = 0.0f; /* a change at layer l only */
    hs_forward_opts with_mask = {.hidden = h_full, .head_mask = mask};
    cr_assert_eq(hs_forward(m, ids, tt, n, &with_mask, NULL, &err), HS_OK);
    hs_forward_opts part = {.hidden = h_part, .head_mask = mask, .start_layer = l,
                            .x_start = layers + (size_t)l * nd};
    cr_assert_eq(hs_forward(m, ids, tt, n, &part, NULL, &err), HS_OK, "%s", err.msg);
    cr_assert(memcmp(h_full, h_part, nd * sizeof(float)) == 0);
    hs_forward_opts bad = {.start_layer = 1};
    cr_assert_eq(hs_forward(m, ids, tt, n, &bad, NULL, &err), HS_E_ARG);
    free(layers);
    free(h_full);
    free(h_part);
    free(mask);
    hs_model_free(m);
}

/* Logits at chosen rows only (the MLM loss's positions) equal those rows of the full
 * logits; rows outside the text are refused. */
Test(forward, logit_rows_equal_the_full_rows)
{
    static const char *const dirs[] = {"fixtures/tiny-bert", "fixtures/tiny-gpt2"};
    for (int k = 0; k < 2; k++) {
        hs_error err = {{0}};
        hs_model *m = NULL;
        cr_assert_eq(hs_model_load(dirs[k], &m, &err), HS_OK, "%s", err.msg);
        int V = hs_model_config_of(m)->vocab_size, n = 12;
        int32_t ids[12], rows[3] = {9, 2, 5};
        for (int i = 0; i < n; i++)
            ids[i] = 1000 + 37 * i;
        float *full = malloc((size_t)n * (size_t)V * sizeof *full);
        float *part = malloc(3 * (size_t)V * sizeof *part);
        hs_forward_opts o = {.logits = full};
        cr_assert_eq(hs_forward(m, ids, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);
        hs_forward_opts p = {.logits = part, .logit_rows = rows, .n_logit_rows = 3};
        cr_assert_eq(hs_forward(m, ids, NULL, n, &p, NULL, &err), HS_OK, "%s", err.msg);
        double dmax = 0;
        for (int r = 0; r < 3; r++)
            for (int v = 0; v < V; v++)
                dmax = fmax(dmax, fabs((double)part[(size_t)r * V + v] -
                                       full[(size_t)rows[r] * V + v]));
        cr_expect(dmax <= 1e-5, "%s: max |d| = %g", dirs[k], dmax);
        rows[1] = n;
        cr_assert_eq(hs_forward(m, ids, NULL, n, &p, NULL, &err), HS_E_ARG);
        free(full);
        free(part);
        hs_model_free(m);
    }
}

/* A batch of copies, each under its own head mask and from the same start layer, equals
 * one pass per copy (GEMMs cut by another shape: within 1e-5) for logits at chosen rows and
 * final hidden states; an observer or a bad batch count is refused. */
Test(forward, batch_equals_one_pass_per_copy)
{
    static const char *const dirs[] = {"fixtures/tiny-bert", "fixtures/tiny-gpt2"};
    for (int k = 0; k < 2; k++) {
        hs_error err = {{0}};
        hs_model *m = NULL;
        cr_assert_eq(hs_model_load(dirs[k], &m, &err), HS_OK, "%s", err.msg);
        const hs_model_config *c = hs_model_config_of(m);
        int V = c->vocab_size, d = c->d_model, n = 12, B = 3, lh = c->n_layer * c->n_head;
        int l = c->n_layer - 1, rows[2] = {7, 3};
        int32_t ids[12];
        for (int i = 0; i < n; i++)
            ids[i] = 1000 + 37 * i;
        size_t nd = (size_t)n * (size_t)d;
        float *layers = malloc((size_t)c->n_layer * nd * sizeof(float));
        float *masks = malloc((size_t)B * (size_t)lh * sizeof(float));
        float *lg = malloc((size_t)B * 2 * (size_t)V * sizeof(float));
        float *lg1 = malloc(2 * (size_t)V * sizeof(float));
        float *hid = malloc((size_t)B * nd * sizeof(float)), *hid1 = malloc(nd * sizeof(float));
        hs_forward_opts full = {.x_layers = layers};
        cr_assert_eq(hs_forward(m, ids, NULL, n, &full, NULL, &err), HS_OK, "%s", err.msg);
        for (int i = 0; i < B * lh; i++)
            masks[i] = 1.0f;
        for (int b = 0; b < B; b++) /* copy b: head b of layer l off (copy B-1 too: 0.5) */
            masks[b * lh + l * c->n_head + b] = b == B - 1 ? 0.5f : 0.0f;
        hs_forward_opts o = {.head_mask = masks, .batch = B, .start_layer = l,
                             .x_start = layers + (size_t)l * nd, .logits = lg, .hidden = hid,
                             .logit_rows = rows, .n_logit_rows = 2};
        cr_assert_eq(hs_forward(m, ids, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);
        double dl = 0, dh = 0, spread = 0;
        for (int b = 0; b < B; b++) {
            hs_forward_opts one = o;
            one.batch = 1;
            one.head_mask = masks + (size_t)b * lh;
            one.logits = lg1;
            one.hidden = hid1;
            cr_assert_eq(hs_forward(m, ids, NULL, n, &one, NULL, &err), HS_OK, "%s", err.msg);
            for (size_t i = 0; i < 2 * (size_t)V; i++)
                dl = fmax(dl, fabs((double)lg[(size_t)b * 2 * V + i] - lg1[i]));
            for (size_t i = 0; i < nd; i++) {
                dh = fmax(dh, fabs((double)hid[(size_t)b * nd + i] - hid1[i]));
                spread = fmax(spread, fabs((double)hid[(size_t)b * nd + i] - hid[i]));
            }
        }
        cr_expect(dl <= 1e-5 && dh <= 1e-5, "%s: max |d| logits %g, hidden %g", dirs[k], dl, dh);
        cr_expect(spread > 1e-3, "%s: the copies' masks make no difference", dirs[k]);
        hs_forward_opts obs = {.batch = 2, .on_attn = hs_trace_observe};
        cr_assert_eq(hs_forward(m, ids, NULL, n, &obs, NULL, &err), HS_E_ARG);
        cr_assert_not_null(strstr(err.msg, "batch of 1"), "%s", err.msg);
        hs_forward_opts neg = {.batch = -1};
        cr_assert_eq(hs_forward(m, ids, NULL, n, &neg, NULL, &err), HS_E_ARG);
        free(layers);
        free(masks);
        free(lg);
        free(lg1);
        free(hid);
        free(hid1);
        hs_model_free(m);
    }
}

/* Weights used in place from the mapped file give the same maps as copied ones, bit for bit
 * (the goldens of gpt2_hub, an F32 GPT-2, are checked with the default copy). */
Test(forward, mapped_weights_give_the_copied_maps)
{
    hs_error err = {{0}};
    hs_model *a = NULL, *b = NULL;
    cr_assert_eq(hs_model_load("fixtures/models/gpt2-hub", &a, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_model_open("fixtures/models/gpt2-hub", HS_OPEN_MAP_WEIGHTS, &b, &err), HS_OK,
                 "%s", err.msg);
    int32_t ids[20];
    for (int i = 0; i < 20; i++)
        ids[i] = (int32_t)(13 * i + 5) % 1000;
    hs_trace *ta = NULL, *tb = NULL;
    cr_assert_eq(hs_trace_new(a, 20, &ta, &err), HS_OK);
    cr_assert_eq(hs_trace_new(b, 20, &tb, &err), HS_OK);
    hs_forward_opts oa = {.on_attn = hs_trace_observe, .user = ta};
    hs_forward_opts ob = {.on_attn = hs_trace_observe, .user = tb};
    cr_assert_eq(hs_forward(a, ids, NULL, 20, &oa, NULL, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_forward(b, ids, NULL, 20, &ob, NULL, &err), HS_OK, "%s", err.msg);
    size_t count = (size_t)ta->n_layer * ta->n_head * 20 * 20;
    cr_assert_eq(memcmp(ta->attn, tb->attn, count * sizeof(float)), 0);
    hs_trace_free(ta);
    hs_trace_free(tb);
    hs_model_free(a);
    hs_model_free(b);
}
