/* The encoder families RoBERTa (and XLM-R) and DistilBERT against the independent float64
 * reference fixtures/ref/families.py (written from the papers and model cards):
 * - every roberta/distilbert case of fixtures/family-golden/cases.tsv (make_family_golden.py):
 *   maps (1e-5, recorded before the head mask), last hidden states (1e-4), the MLM NLL of the
 *   original ids at the masked positions (1e-4), with and without a head mask; on the unmasked
 *   cases gradient importance (autograd) and ablation importance;
 * - fixtures/encoder-golden/ (make_encoder_golden.py): the signed gradient at a head mask
 *   (autograd), and RoBERTa with <pad> tokens inside the text (fairseq's positions);
 * - the config: positions offset by pad_token_id + 1, xlm-roberta read as RoBERTa, refusals. */
#include <cJSON.h>

#include "core/core.h"
#include "headscope/forward.h"
#include "headscope/gguf.h"
#include "headscope/importance.h"
#include "headscope/model.h"
#include "model/model_internal.h"
#include "testutil.h"

#define ATTN_TOL 1e-5
#define HIDDEN_TOL 1e-4
#define LOSS_TOL 1e-4
#define GRAD_ABS 1e-4 /* float32 forward and backward against float64 autograd */
#define GRAD_REL 1e-3

static cJSON *json_file(const char *path)
{
    char *text;
    size_t len;
    cJSON *j = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_read_file(path, 1 << 24, &text, &len, &err), HS_OK, "%s", err.msg);
    hs_status st = hs_json_parse(text, len, (size_t)1 << 22, path, &j, &err);
    free(text);
    cr_assert_eq(st, HS_OK, "%s", err.msg);
    return j;
}

static int32_t *json_ints(const cJSON *a, int *n)
{
    *n = cJSON_GetArraySize(a);
    int32_t *v = malloc((size_t)(*n ? *n : 1) * sizeof *v);
    for (int i = 0; i < *n; i++)
        v[i] = (int32_t)cJSON_GetArrayItem(a, i)->valueint;
    return v;
}

/* A case's MLM loss input: ids (with the mask id at the positions), the positions and the
 * original ids there as targets. */
typedef struct mlm_case {
    int32_t *ids, *pos, *tgt;
    int n, n_pos;
    hs_loss_input in;
} mlm_case;

static void mlm_case_of(const cJSON *j, mlm_case *c)
{
    int no;
    c->ids = json_ints(cJSON_GetObjectItem(j, "ids"), &c->n);
    c->pos = json_ints(cJSON_GetObjectItem(j, "positions"), &c->n_pos);
    int32_t *orig = json_ints(cJSON_GetObjectItem(j, "orig_ids"), &no);
    c->tgt = malloc((size_t)c->n_pos * sizeof *c->tgt);
    for (int k = 0; k < c->n_pos; k++)
        c->tgt[k] = orig[c->pos[k]];
    free(orig);
    c->in = (hs_loss_input){.ids = c->ids, .n = c->n, .kind = HS_LOSS_MLM, .positions = c->pos,
                            .targets = c->tgt, .n_pos = c->n_pos};
}

static void mlm_case_free(mlm_case *c)
{
    free(c->ids);
    free(c->pos);
    free(c->tgt);
}

/* -log softmax(row)[target] in double. */
static double nll_of(const float *row, int V, int target)
{
    double mx = row[0], s = 0;
    for (int v = 1; v < V; v++)
        mx = row[v] > mx ? row[v] : mx;
    for (int v = 0; v < V; v++)
        s += exp((double)row[v] - mx);
    return -((double)row[target] - mx - log(s));
}

static void expect_grid(const char *name, const char *what, const double *got, const cJSON *want,
                        int L, int H, double abs_tol, double rel_tol)
{
    cr_assert_eq(cJSON_GetArraySize(want), L, "%s: %s rows", name, what);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            double w = cJSON_GetArrayItem(cJSON_GetArrayItem(want, l), h)->valuedouble;
            double v = got[l * H + h];
            cr_expect(fabs(v - w) <= abs_tol + rel_tol * fabs(w), "%s: %s %d.%d = %.8g, reference %.8g",
                      name, what, l, h, v, w);
        }
}

/* Maps, hidden states and the MLM loss of one case: ids and its golden files under dir/name.
 * hm: the (L, H) head mask or NULL. */
static void check_forward(const char *dir, const char *name, const cJSON *j, const float *hm)
{
    char path[512];
    hs_model *m = tu_load(cJSON_GetObjectItem(j, "model")->valuestring);
    const hs_model_config *c = hs_model_config_of(m);
    mlm_case mc;
    mlm_case_of(j, &mc);
    int n = mc.n, V = c->vocab_size;
    hs_error err = {{0}};
    hs_trace *trace = NULL;
    cr_assert_eq(hs_trace_new(m, n, &trace, &err), HS_OK, "%s", err.msg);
    float *hidden = malloc((size_t)n * (size_t)c->d_model * sizeof *hidden);
    float *logits = malloc((size_t)n * (size_t)V * sizeof *logits);
    hs_forward_opts o = {.head_mask = hm, .on_attn = hs_trace_observe, .user = trace,
                         .hidden = hidden, .logits = logits};
    cr_assert_eq(hs_forward(m, mc.ids, NULL, n, &o, NULL, &err), HS_OK, "%s: %s", name, err.msg);

    snprintf(path, sizeof path, "%s/%s.attn.npy", dir, name);
    hs_npy attn = tu_npy(path);
    cr_assert_eq(attn.count, (size_t)c->n_layer * (size_t)c->n_head * (size_t)n * (size_t)n,
                 "%s: map size", name);
    size_t w;
    double d = tu_max_abs_diff(trace->attn, attn.data, attn.count, &w);
    cr_expect_leq(d, ATTN_TOL, "%s: attention max|d| = %g at flat index %zu", name, d, w);
    snprintf(path, sizeof path, "%s/%s.hidden.npy", dir, name);
    hs_npy hid = tu_npy(path);
    cr_assert_eq(hid.count, (size_t)n * (size_t)c->d_model);
    d = tu_max_abs_diff(hidden, hid.data, hid.count, &w);
    cr_expect_leq(d, HIDDEN_TOL, "%s: hidden max|d| = %g at %zu", name, d, w);

    /* the NLL at each masked position, from the logits and from the library's MLM loss */
    const cJSON *nll = cJSON_GetObjectItem(j, "nll");
    double loss = 0, want = cJSON_GetObjectItem(j, "loss")->valuedouble, got;
    for (int k = 0; k < mc.n_pos; k++) {
        double v = nll_of(logits + (size_t)mc.pos[k] * (size_t)V, V, mc.tgt[k]);
        double r = cJSON_GetArrayItem(nll, k)->valuedouble;
        cr_expect(fabs(v - r) <= LOSS_TOL, "%s: nll[%d] %.7f, reference %.7f", name, k, v, r);
        loss += v / mc.n_pos;
    }
    cr_expect(fabs(loss - want) <= LOSS_TOL, "%s: loss %.7f, reference %.7f", name, loss, want);
    hs_loss_eval *ev;
    cr_assert_eq(hs_loss_eval_new(m, &mc.in, &ev, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_loss_eval_run(ev, hm, &got, &err), HS_OK, "%s", err.msg);
    cr_expect(fabs(got - want) <= LOSS_TOL, "%s: evaluator loss %.7f, reference %.7f", name, got, want);
    hs_loss_eval_free(ev);

    hs_npy_free(&hid);
    hs_npy_free(&attn);
    free(hidden);
    free(logits);
    hs_trace_free(trace);
    mlm_case_free(&mc);
    hs_model_free(m);
}

/* Gradient (raw and normalised, autograd) and ablation importance of an unmasked case. */
static void check_importance(const char *name, const cJSON *j)
{
    hs_model *m = tu_load(cJSON_GetObjectItem(j, "model")->valuestring);
    const hs_model_config *c = hs_model_config_of(m);
    int L = c->n_layer, H = c->n_head;
    mlm_case mc;
    mlm_case_of(j, &mc);
    const cJSON *imp = cJSON_GetObjectItem(j, "importance");
    cr_assert(cJSON_IsObject(imp), "%s: no importance reference", name);
    double *raw = malloc((size_t)(L * H) * sizeof *raw), *norm = malloc((size_t)(L * H) * sizeof *norm);
    double *delta = malloc((size_t)(L * H) * sizeof *delta), base;
    hs_error err = {{0}};
    cr_assert_eq(hs_gradient_importance(m, &mc.in, raw, norm, &err), HS_OK, "%s: %s", name, err.msg);
    expect_grid(name, "gradient raw", raw, cJSON_GetObjectItem(imp, "gradient_raw"), L, H,
                GRAD_ABS, GRAD_REL);
    expect_grid(name, "gradient", norm, cJSON_GetObjectItem(imp, "gradient"), L, H, GRAD_ABS,
                GRAD_REL);
    hs_loss_eval *ev;
    cr_assert_eq(hs_loss_eval_new(m, &mc.in, &ev, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_loss_eval_run(ev, NULL, &base, &err), HS_OK, "%s", err.msg);
    cr_expect(fabs(base - cJSON_GetObjectItem(imp, "base_loss")->valuedouble) <= LOSS_TOL);
    cr_assert_eq(hs_ablation_sweep(ev, base, NULL, delta, NULL, NULL, &err), HS_OK, "%s", err.msg);
    expect_grid(name, "ablation", delta, cJSON_GetObjectItem(imp, "ablation"), L, H, LOSS_TOL, 0);
    hs_loss_eval_free(ev);
    free(delta);
    free(raw);
    free(norm);
    mlm_case_free(&mc);
    hs_model_free(m);
}

/* Every encoder case of cases.tsv, so a case added there is checked without a new test. */
Test(families_golden, every_encoder_case_of_cases_tsv)
{
    FILE *f = fopen("fixtures/family-golden/cases.tsv", "r");
    cr_assert_not_null(f);
    char line[1024];
    int seen = 0, masked = 0;
    while (fgets(line, sizeof line, f)) {
        char name[128], model[256], type[64], hm[8];
        if (sscanf(line, "%127s %255s %63s %*d %7s", name, model, type, hm) != 4 ||
            (strcmp(type, "roberta") && strcmp(type, "xlm-roberta") && strcmp(type, "distilbert")))
            continue;
        char path[512];
        snprintf(path, sizeof path, "fixtures/family-golden/%s.json", name);
        cJSON *j = json_file(path);
        float *mask = NULL;
        hs_npy hmn = {0};
        if (!strcmp(hm, "yes")) {
            snprintf(path, sizeof path, "fixtures/family-golden/%s.head_mask.npy", name);
            hmn = tu_npy(path);
            mask = hmn.data;
            masked++;
        }
        check_forward("fixtures/family-golden", name, j, mask);
        if (!mask)
            check_importance(name, j);
        hs_npy_free(&hmn);
        cJSON_Delete(j);
        seen++;
    }
    fclose(f);
    /* tiny-roberta, tiny-distilbert, tiny-distilbert-sin, each with and without a mask */
    cr_expect_geq(seen, 6, "%d encoder cases", seen);
    cr_expect_geq(masked, 3, "%d head-mask cases", masked);
}

/* The signed gradient at a head mask of zeros and halves against autograd at that mask. */
static void check_grad_at_mask(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "fixtures/encoder-golden/%s.json", name);
    cJSON *j = json_file(path);
    hs_model *m = tu_load(cJSON_GetObjectItem(j, "model")->valuestring);
    const hs_model_config *c = hs_model_config_of(m);
    int L = c->n_layer, H = c->n_head;
    mlm_case mc;
    mlm_case_of(j, &mc);
    float *mask = malloc((size_t)(L * H) * sizeof *mask);
    const cJSON *hm = cJSON_GetObjectItem(j, "head_mask");
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            mask[l * H + h] = (float)cJSON_GetArrayItem(cJSON_GetArrayItem(hm, l), h)->valuedouble;
    double *g = malloc((size_t)(L * H) * sizeof *g), loss;
    hs_error err = {{0}};
    cr_assert_eq(hs_gradient_signed_masked(m, &mc.in, mask, g, &loss, &err), HS_OK, "%s", err.msg);
    expect_grid(name, "gradient at the mask", g, cJSON_GetObjectItem(j, "gradient_at_mask"), L, H,
                GRAD_ABS, GRAD_REL);
    double want = cJSON_GetObjectItem(j, "loss")->valuedouble;
    cr_expect(fabs(loss - want) <= LOSS_TOL, "%s: loss %.7f, reference %.7f", name, loss, want);
    free(g);
    free(mask);
    mlm_case_free(&mc);
    hs_model_free(m);
    cJSON_Delete(j);
}

Test(families_gradient, roberta_at_a_head_mask) { check_grad_at_mask("tiny_roberta_grad_hm"); }
Test(families_gradient, distilbert_at_a_head_mask) { check_grad_at_mask("tiny_distilbert_grad_hm"); }
Test(families_gradient, distilbert_sinusoidal_at_a_head_mask)
{
    check_grad_at_mask("tiny_distilbert_sin_grad_hm");
}

/* <pad> inside and after the text: positions count the non-pad tokens only. */
Test(families_golden, roberta_positions_skip_pad_tokens)
{
    cJSON *j = json_file("fixtures/encoder-golden/tiny_roberta_pad.json");
    check_forward("fixtures/encoder-golden", "tiny_roberta_pad", j, NULL);
    cJSON_Delete(j);
}

/* ---- config ------------------------------------------------------------------------ */

/* A copy of folder src in a temporary folder, config.json's text edited by sed expression
 * sed (or kept when NULL); the weights linked. */
static void edited_copy(const char *src, const char *sed, char *dir, size_t cap)
{
    char cmd[2048];
    tu_mkdtemp(dir, cap);
    snprintf(cmd, sizeof cmd, "ln -s \"$PWD/%s/model.safetensors\" '%s/' && sed -e '%s' '%s/config.json' > '%s/config.json'",
             src, dir, sed ? sed : "", src, dir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static hs_status open_error(const char *dir, hs_error *err)
{
    hs_model *m = NULL;
    hs_status st = hs_model_load(dir, &m, err);
    hs_model_free(m);
    return st;
}

Test(families_config, roberta_positions_from_pad_token_id)
{
    hs_model *m = tu_load("fixtures/family-models/tiny-roberta");
    const hs_model_config *c = hs_model_config_of(m);
    /* config.json: max_position_embeddings 130, pad_token_id 1 */
    cr_expect_eq(c->family, HS_FAMILY_ROBERTA);
    cr_expect_eq(c->arch->pos_offset, 2);
    cr_expect_eq(c->n_ctx, 128);
    cr_expect_eq(c->type_vocab_size, 1);
    cr_expect_str_eq(c->arch->mask_token, "<mask>");
    cr_expect(c->has_lm_head);
    hs_model_free(m);
    cr_expect_eq(hs_arch_of(HS_FAMILY_ROBERTA)->tokenizer, HS_TOK_BPE);
    cr_expect_eq(hs_arch_of(HS_FAMILY_DISTILBERT)->tokenizer, HS_TOK_WORDPIECE);
    cr_expect_str_eq(hs_arch_list(), "gpt2, bert, roberta, distilbert, gpt_neox, llama, qwen2, falcon, "
                                     "gpt_bigcode, phi3, deepseek_v2, deepseek_v3, t5, qwen3, olmo2, "
                                     "gemma2, gemma3_text or qwen3_moe");

    /* another pad id moves the first position and shortens the context */
    char dir[64];
    edited_copy("fixtures/family-models/tiny-roberta", "s/\"pad_token_id\": 1/\"pad_token_id\": 5/",
                dir, sizeof dir);
    m = tu_load(dir);
    cr_expect_eq(hs_model_config_of(m)->arch->pos_offset, 6);
    cr_expect_eq(hs_model_config_of(m)->n_ctx, 124);
    hs_model_free(m);
    tu_rm_rf(dir);
}

/* transformers reads xlm-roberta with the RoBERTa classes: the same maps. */
Test(families_config, xlm_roberta_is_read_as_roberta)
{
    char dir[64];
    edited_copy("fixtures/family-models/tiny-roberta",
                "s/\"model_type\": \"roberta\"/\"model_type\": \"xlm-roberta\"/", dir, sizeof dir);
    cJSON *j = json_file("fixtures/family-golden/tiny_roberta_rand.json");
    cJSON_ReplaceItemInObject(j, "model", cJSON_CreateString(dir));
    check_forward("fixtures/family-golden", "tiny_roberta_rand", j, NULL);
    hs_model *m = tu_load(dir);
    cr_expect_eq(hs_model_config_of(m)->family, HS_FAMILY_ROBERTA);
    hs_model_free(m);
    cJSON_Delete(j);
    tu_rm_rf(dir);
}

Test(families_config, tokens_beyond_the_context_are_refused)
{
    hs_model *m = tu_load("fixtures/family-models/tiny-roberta");
    int32_t ids[129] = {0};
    hs_error err = {{0}};
    cr_expect_eq(hs_forward(m, ids, NULL, 129, NULL, NULL, &err), HS_E_INPUT);
    cr_expect(strstr(err.msg, "exceed the model's context of 128") != NULL, "%s", err.msg);
    hs_model_free(m);
}

/* config.json values headscope would compute differently from transformers: refused,
 * naming the field. */
static void refused(const char *src, const char *sed, hs_status want, const char *msg)
{
    char dir[64];
    edited_copy(src, sed, dir, sizeof dir);
    hs_error err = {{0}};
    cr_expect_eq(open_error(dir, &err), want, "%s: %s", sed, err.msg);
    cr_expect(strstr(err.msg, msg) != NULL, "'%s' lacks '%s'", err.msg, msg);
    tu_rm_rf(dir);
}

Test(families_config, refusals_name_the_field)
{
    const char *rb = "fixtures/family-models/tiny-roberta", *db = "fixtures/family-models/tiny-distilbert";
    refused(rb, "s/\"hidden_act\": \"gelu\"/\"hidden_act\": \"gelu_new\"/", HS_E_UNSUPPORTED,
            "hidden_act 'gelu_new' is not supported for RoBERTa");
    refused(rb, "s/\"pad_token_id\": 1/\"pad_token_id\": 129/", HS_E_VALUE,
            "max_position_embeddings 130 leaves no position after pad_token_id 129");
    refused(rb, "s/\"type_vocab_size\": 1/\"type_vocab_size\": 2/", HS_E_SHAPE,
            "'roberta.embeddings.token_type_embeddings.weight' has shape (1, 64), expected (2, 64)");
    refused(rb, "s/\"max_position_embeddings\": 130/\"max_position_embeddings\": 128/", HS_E_SHAPE,
            "'roberta.embeddings.position_embeddings.weight' has shape (130, 64), expected (128, 64)");
    refused(db, "s/\"dim\": 64/\"dimension\": 64/", HS_E_FORMAT, "missing required field 'dim'");
    refused(db, "s/\"activation\": \"gelu\"/\"activation\": \"relu\"/", HS_E_UNSUPPORTED,
            "activation 'relu' is not supported");
    refused(db, "s/\"sinusoidal_pos_embds\": false/\"sinusoidal_pos_embds\": 1/", HS_E_FORMAT,
            "'sinusoidal_pos_embds' must be true or false");
    refused(db, "s/\"n_heads\": 4/\"n_heads\": 5/", HS_E_VALUE, "not divisible by n_head 5");
}

/* A checkpoint without its MLM head still opens (maps and hidden states only). */
Test(families_config, distilbert_without_its_head_has_no_mlm_loss)
{
    char dir[64], cmd[512];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "cp fixtures/family-models/tiny-distilbert/config.json '%s/' && "
             "/usr/bin/python3 -c \"import sys; sys.path.insert(0, 'fixtures/ref'); import hs_ref as R\n"
             "t = R.read_safetensors('fixtures/family-models/tiny-distilbert/model.safetensors')\n"
             "R.write_safetensors('%s/model.safetensors', {k: v for k, v in t.items() if k.startswith('distilbert.')})\"",
             dir, dir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    hs_model *m = tu_load(dir);
    cr_expect_not(hs_model_config_of(m)->has_lm_head);
    hs_model_free(m);
    tu_rm_rf(dir);
}

/* ---- GGUF ----------------------------------------------------------------------------- */

/* A tiny model with the tokenizer files of fixtures/encoder-golden/tokenizers (a GGUF file
 * needs a vocabulary), in a temporary folder. */
static void with_tokenizer(const char *family, char *dir, size_t cap)
{
    char cmd[512];
    tu_mkdtemp(dir, cap);
    snprintf(cmd, sizeof cmd, "cp fixtures/family-models/tiny-%s/* fixtures/encoder-golden/tokenizers/%s/* '%s/'",
             family, family, dir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* The maps of ids on m. */
static float *maps_of(hs_model *m, const int32_t *ids, int n)
{
    hs_error err = {{0}};
    hs_trace *trace = NULL;
    cr_assert_eq(hs_trace_new(m, n, &trace, &err), HS_OK, "%s", err.msg);
    hs_forward_opts o = {.on_attn = hs_trace_observe, .user = trace};
    cr_assert_eq(hs_forward(m, ids, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);
    const hs_model_config *c = hs_model_config_of(m);
    size_t count = (size_t)c->n_layer * (size_t)c->n_head * (size_t)n * (size_t)n;
    float *a = malloc(count * sizeof *a);
    memcpy(a, trace->attn, count * sizeof *a);
    hs_trace_free(trace);
    return a;
}

/* RoBERTa goes to GGUF as llama.cpp's converter writes it: general.architecture "bert", a
 * "gpt2" tokenizer, the position table without its first pad_token_id + 1 rows; read back,
 * it is RoBERTa again with the folder's maps and MLM loss (F32: identical). */
Test(families_gguf, roberta_round_trip_as_llama_cpp_writes_it)
{
    char dir[64], path[128];
    with_tokenizer("roberta", dir, sizeof dir);
    hs_model *m = tu_load(dir), *g = NULL;
    hs_error err = {{0}};
    hs_gguf_write_options opt = {.ftype = HS_GGUF_FTYPE_F32, .keep_mlm = 1};
    snprintf(path, sizeof path, "%s/model.bin", dir);
    cr_assert_eq(hs_gguf_write(m, path, &opt, &err), HS_OK, "%s", err.msg);

    hs_gguf *f = NULL;
    cr_assert_eq(hs_gguf_open(path, &f, &err), HS_OK, "%s", err.msg);
    hs_gguf_value v;
    long k = hs_gguf_find_kv(f, "general.architecture");
    cr_assert_geq(k, 0);
    hs_gguf_kv_get(f, (size_t)k, 0, &v);
    cr_expect_str_eq(v.str, "bert");
    k = hs_gguf_find_kv(f, "tokenizer.ggml.model");
    cr_assert_geq(k, 0);
    hs_gguf_kv_get(f, (size_t)k, 0, &v);
    cr_expect_str_eq(v.str, "gpt2");
    const hs_gguf_tensor *pe = hs_gguf_find_tensor(f, "position_embd.weight");
    cr_assert_not_null(pe);
    cr_expect_eq(pe->ne[1], 128u, "position rows %llu", (unsigned long long)pe->ne[1]); /* 130 - 2 */
    hs_gguf_free(f);

    cr_assert_eq(hs_model_load(path, &g, &err), HS_OK, "%s", err.msg);
    const hs_model_config *c = hs_model_config_of(g);
    cr_expect_eq(c->family, HS_FAMILY_ROBERTA);
    cr_expect_eq(c->n_ctx, 128);
    cr_expect_eq(c->arch->pos_offset, 0);
    cr_expect(c->has_lm_head);
    cJSON *j = json_file("fixtures/family-golden/tiny_roberta_rand.json");
    mlm_case mc;
    mlm_case_of(j, &mc);
    float *a = maps_of(m, mc.ids, mc.n), *b = maps_of(g, mc.ids, mc.n);
    size_t count = (size_t)c->n_layer * (size_t)c->n_head * (size_t)mc.n * (size_t)mc.n;
    cr_expect_eq(tu_max_abs_diff(a, b, count, NULL), 0.0);
    double la, lb;
    hs_loss_eval *ev;
    cr_assert_eq(hs_loss_eval_new(m, &mc.in, &ev, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_loss_eval_run(ev, NULL, &la, &err), HS_OK, "%s", err.msg);
    hs_loss_eval_free(ev);
    cr_assert_eq(hs_loss_eval_new(g, &mc.in, &ev, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_loss_eval_run(ev, NULL, &lb, &err), HS_OK, "%s", err.msg);
    hs_loss_eval_free(ev);
    cr_expect_eq(la, lb);
    cr_expect(fabs(la - cJSON_GetObjectItem(j, "loss")->valuedouble) <= LOSS_TOL);
    free(a);
    free(b);
    mlm_case_free(&mc);
    cJSON_Delete(j);
    hs_model_free(g);
    hs_model_free(m);
    tu_rm_rf(dir);
}

/* llama.cpp has no DistilBERT architecture: the writer refuses it in one line, with or
 * without a tokenizer. */
Test(families_gguf, distilbert_has_no_gguf_form)
{
    char dir[64];
    with_tokenizer("distilbert", dir, sizeof dir);
    const char *paths[] = {dir, "fixtures/family-models/tiny-distilbert"};
    for (int k = 0; k < 2; k++) {
        hs_model *m = tu_load(paths[k]);
        unsigned char *buf = NULL;
        size_t len = 0;
        hs_error err = {{0}};
        cr_expect_eq(hs_gguf_encode(m, NULL, &buf, &len, &err), HS_E_UNSUPPORTED);
        cr_expect_str_eq(err.msg, "architecture 'distilbert' has no GGUF form (llama.cpp has no "
                                  "such architecture); use the Hugging Face folder");
        cr_expect_null(buf);
        hs_model_free(m);
    }
    tu_rm_rf(dir);
}

/* ---- DistilBERT's sinusoidal positions ------------------------------------------------- */

/* Vaswani et al. (2017) §3.5 by hand: d = 4, 10000^(2/4) = 100; d = 3, the last dimension
 * a sine of p / 10000^(2/3). */
Test(families_sinusoids, the_table_by_hand)
{
    float pe[12], po[6];
    hs_sinusoids(pe, 3, 4);
    const double want[12] = {0, 1, 0, 1, sin(1.0), cos(1.0), sin(0.01), cos(0.01),
                             sin(2.0), cos(2.0), sin(0.02), cos(0.02)};
    for (int k = 0; k < 12; k++)
        cr_expect(fabs(pe[k] - want[k]) < 1e-7, "pe[%d] = %.9g, want %.9g", k, pe[k], want[k]);
    hs_sinusoids(po, 2, 3);
    const double odd[6] = {0, 1, 0, sin(1.0), cos(1.0), sin(1.0 / pow(10000.0, 2.0 / 3))};
    for (int k = 0; k < 6; k++)
        cr_expect(fabs(po[k] - odd[k]) < 1e-7, "po[%d] = %.9g, want %.9g", k, po[k], odd[k]);
}

/* A copy of DistilBERT folder src without its position table (make_encoder_golden.py's
 * --strip-positions, as the golden was made). */
static void stripped(const char *src, char *dir, size_t cap)
{
    char cmd[512];
    tu_mkdtemp(dir, cap);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 fixtures/ref/make_encoder_golden.py --strip-positions %s '%s'",
             src, dir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* sinusoidal_pos_embds without a stored table: the table is computed, as transformers
 * initialises it; maps and loss against families.py, which computes it in float64. */
Test(families_sinusoids, computed_when_the_checkpoint_has_no_table)
{
    char dir[64];
    stripped("fixtures/family-models/tiny-distilbert-sin", dir, sizeof dir);
    cJSON *j = json_file("fixtures/encoder-golden/tiny_distilbert_sin_computed.json");
    cJSON_ReplaceItemInObject(j, "model", cJSON_CreateString(dir));
    check_forward("fixtures/encoder-golden", "tiny_distilbert_sin_computed", j, NULL);
    cJSON_Delete(j);
    tu_rm_rf(dir);
}

/* Learned positions (sinusoidal_pos_embds false) cannot be made up: a missing table. */
Test(families_sinusoids, learned_positions_are_required)
{
    char dir[64];
    stripped("fixtures/family-models/tiny-distilbert", dir, sizeof dir);
    hs_error err = {{0}};
    cr_expect_eq(open_error(dir, &err), HS_E_FORMAT, "%s", err.msg);
    cr_expect(strstr(err.msg, "missing tensor") && strstr(err.msg, "position_embeddings.weight"),
              "%s", err.msg);
    tu_rm_rf(dir);
}
