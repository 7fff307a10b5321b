/* The rotary decoders (GPT-NeoX/Pythia, Llama 2/3, Qwen2) against the independent float64
 * reference fixtures/ref/families.py (goldens by fixtures/ref/make_family_golden.py in
 * fixtures/family-golden/): attention maps per query head (1e-5), final hidden states
 * (1e-4), per-token NLL and the loss (1e-4), under head masks; ablation per query head and
 * per KV group and gradient importance against the reference's; the gradient at a head
 * mask against autograd (fixtures/ref/family_grad_golden.py) and finite differences. */
#include <dirent.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "core/core.h"
#include "headscope/forward.h"
#include "headscope/importance.h"
#include "headscope/model.h"
#include "model/model_internal.h"
#include "nn/ops.h"
#include "lm_golden.h"
#include "testutil.h"

#define ATTN_TOL 1e-5
#define HIDDEN_TOL 1e-4
#define LOSS_TOL 1e-4
#define GRAD_ABS 1e-4
#define GRAD_REL 1e-3
#define GOLD "fixtures/family-golden/"

/* The committed folders hold tokenizer.json files whose tokenizers (SentencePiece-style BPE,
 * NFC, split pre-tokenizers) are another module's work: the goldens feed ids, so the model
 * is opened from a folder holding its config and weights only (links into the fixture). */
static hs_model *load_ids_only(const char *model_dir, char *tmp, size_t cap)
{
    tu_mkdtemp(tmp, cap);
    DIR *d = opendir(model_dir);
    cr_assert_not_null(d, "cannot open %s", model_dir);
    struct dirent *e;
    char cwd[1024], from[2048], to[2048];
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    while ((e = readdir(d)))
        if (!strcmp(e->d_name, "config.json") || !strncmp(e->d_name, "model", 5)) {
            snprintf(from, sizeof from, "%s/%s/%s", cwd, model_dir, e->d_name);
            snprintf(to, sizeof to, "%s/%s", tmp, e->d_name);
            cr_assert_eq(symlink(from, to), 0, "symlink %s", to);
        }
    closedir(d);
    hs_error err = {{0}};
    hs_model *m = NULL;
    cr_assert_eq(hs_model_load(tmp, &m, &err), HS_OK, "%s: %s", model_dir, err.msg);
    return m;
}

typedef struct dec_case {
    const char *dir; /* the goldens' folder: GOLD, or MQA_GOLD */
    cJSON *j;
    hs_model *m;
    char tmp[64];
    hs_npy ids, hm;
    int n;
} dec_case;

/* model: the folder to open instead of the one the golden names (a twin holding the same
 * values in another storage type), or NULL. */
static void case_open_in(const char *dir, const char *name, const char *model, dec_case *k)
{
    char path[256];
    memset(k, 0, sizeof *k);
    k->dir = dir;
    snprintf(path, sizeof path, "%s%s.json", dir, name);
    k->j = tu_json_file(path);
    k->m = load_ids_only(model ? model : cJSON_GetObjectItem(k->j, "model")->valuestring, k->tmp,
                         sizeof k->tmp);
    snprintf(path, sizeof path, "%s%s.ids.npy", dir, name);
    k->ids = tu_npy(path);
    k->n = (int)k->ids.count;
    snprintf(path, sizeof path, "%s%s.head_mask.npy", dir, name);
    if (access(path, R_OK) == 0)
        k->hm = tu_npy(path);
}

static void case_close(dec_case *k)
{
    hs_model_free(k->m);
    hs_npy_free(&k->ids);
    hs_npy_free(&k->hm);
    cJSON_Delete(k->j);
    tu_rm_rf(k->tmp);
}

/* Maps, hidden states, the NLL of every token and the loss. */
static void check_forward(const char *name, dec_case *k)
{
    const hs_model_config *c = hs_model_config_of(k->m);
    const cJSON *j = k->j;
    int n = k->n;
    cr_assert_eq(c->n_head, cJSON_GetObjectItem(j, "H")->valueint);
    cr_assert_eq(c->n_kv_head, cJSON_GetObjectItem(j, "KV")->valueint);
    const cJSON *kvh = cJSON_GetObjectItem(j, "kv_head");
    for (int h = 0; h < c->n_head; h++)
        cr_expect_eq(hs_model_kv_head(c, h), cJSON_GetArrayItem(kvh, h)->valueint, "kv_head[%d]", h);
    hs_error err = {{0}};
    hs_trace *trace = NULL;
    cr_assert_eq(hs_trace_new(k->m, n, &trace, &err), HS_OK);
    float *hidden = malloc((size_t)n * (size_t)c->d_model * sizeof(float));
    float *logits = malloc((size_t)n * (size_t)c->vocab_size * sizeof(float));
    hs_forward_opts o = {.head_mask = k->hm.data, .on_attn = hs_trace_observe, .user = trace,
                         .hidden = hidden, .logits = logits};
    cr_assert_eq(hs_forward(k->m, k->ids.data, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);

    char path[256];
    size_t w;
    snprintf(path, sizeof path, "%s%s.attn.npy", k->dir, name);
    hs_npy attn = tu_npy(path);
    cr_assert_eq(attn.count, (size_t)c->n_layer * c->n_head * n * n);
    double d = tu_max_abs_diff(trace->attn, attn.data, attn.count, &w);
    /* a long case's bar: 1e-5, or twice what a float32 reference misses by (its attn_tol) */
    const cJSON *at = cJSON_GetObjectItem(j, "attn_tol");
    double tol = cJSON_IsNumber(at) ? at->valuedouble : ATTN_TOL;
    cr_expect_leq(d, tol, "%s: attention max|d| = %g at flat index %zu", name, d, w);
    snprintf(path, sizeof path, "%s%s.hidden.npy", k->dir, name);
    hs_npy hid = tu_npy(path);
    cr_assert_eq(hid.count, (size_t)n * c->d_model);
    d = tu_max_abs_diff(hidden, hid.data, hid.count, &w);
    cr_expect_leq(d, HIDDEN_TOL, "%s: hidden max|d| = %g at %zu", name, d, w);

    tu_expect_nll(name, logits, c->vocab_size, k->ids.data, n, j, LOSS_TOL);
    hs_npy_free(&attn);
    hs_npy_free(&hid);
    free(hidden);
    free(logits);
    hs_trace_free(trace);
}

/* Ablation per query head (the batched sweep), per KV group (every query head of a group
 * masked together) and gradient importance, against the reference's. */
static void check_importance(const char *name, dec_case *k)
{
    const cJSON *imp = cJSON_GetObjectItem(k->j, "importance");
    const hs_model_config *c = hs_model_config_of(k->m);
    int L = c->n_layer, H = c->n_head, KV = c->n_kv_head, LH = L * H;
    hs_loss_input in = {.ids = k->ids.data, .n = k->n, .kind = HS_LOSS_LM};
    hs_error err = {{0}};
    double base;
    hs_loss_eval *ev = tu_expect_lm_importance(name, k->m, k->ids.data, k->n, imp, LOSS_TOL,
                                               GRAD_ABS, GRAD_REL, &base);
    if (KV < H) { /* a whole KV group: the head mask of its query heads */
        float *mask = malloc((size_t)LH * sizeof *mask);
        double *gd = malloc((size_t)(L * KV) * sizeof *gd);
        for (int l = 0; l < L; l++)
            for (int g = 0; g < KV; g++) {
                for (int q = 0; q < LH; q++)
                    mask[q] = q / H == l && hs_model_kv_head(c, q % H) == g ? 0.0f : 1.0f;
                double v;
                cr_assert_eq(hs_loss_eval_run(ev, mask, &v, &err), HS_OK, "%s", err.msg);
                gd[l * KV + g] = v - base;
            }
        tu_expect_grid(name, "KV-group ablation", gd, cJSON_GetObjectItem(imp, "ablation_kv"),
                       L, KV, LOSS_TOL, 0);
        free(gd);
        free(mask);
    }

    double loss, *sg = malloc((size_t)LH * sizeof *sg);
    cr_assert_eq(hs_gradient_signed(k->m, &in, sg, &loss, &err), HS_OK, "%s", err.msg);
    cr_expect(fabs(loss - base) <= 1e-6, "%s: gradient's loss %.9f, evaluator %.9f", name, loss, base);
    free(sg);
    hs_loss_eval_free(ev);
}

/* The signed gradient at the case's head mask against autograd at that mask
 * (gradient_at_mask.json), and its loss against the evaluator's. */
static void check_masked_gradient(const char *name, dec_case *k)
{
    char path[256];
    snprintf(path, sizeof path, "%sgradient_at_mask.json", k->dir);
    cJSON *all = tu_json_file(path);
    const cJSON *ref = cJSON_GetObjectItem(all, name);
    cr_assert(cJSON_IsObject(ref), "%s: not in gradient_at_mask.json", name);
    const hs_model_config *c = hs_model_config_of(k->m);
    int L = c->n_layer, H = c->n_head;
    hs_loss_input in = {.ids = k->ids.data, .n = k->n, .kind = HS_LOSS_LM};
    hs_error err = {{0}};
    double loss, base, *sg = malloc((size_t)(L * H) * sizeof *sg);
    cr_assert_eq(hs_gradient_signed_masked(k->m, &in, k->hm.data, sg, &loss, &err), HS_OK, "%s",
                 err.msg);
    tu_expect_grid(name, "gradient at the mask", sg,
                   cJSON_GetObjectItem(ref, "gradient_at_mask"), L, H, GRAD_ABS, GRAD_REL);
    hs_loss_eval *ev;
    cr_assert_eq(hs_loss_eval_new(k->m, &in, &ev, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_loss_eval_run(ev, k->hm.data, &base, &err), HS_OK, "%s", err.msg);
    cr_expect(fabs(loss - base) <= 1e-5, "%s: loss %.9f, evaluator %.9f", name, loss, base);
    double want = cJSON_GetObjectItem(ref, "loss")->valuedouble;
    cr_expect(fabs(loss - want) <= LOSS_TOL, "%s: loss %.7f, reference %.7f", name, loss, want);
    hs_loss_eval_free(ev);
    free(sg);
    cJSON_Delete(all);
}

static void run_case_in(const char *dir, const char *name, const char *model)
{
    dec_case k;
    case_open_in(dir, name, model, &k);
    check_forward(name, &k);
    if (cJSON_IsObject(cJSON_GetObjectItem(k.j, "importance")))
        check_importance(name, &k);
    if (k.hm.data)
        check_masked_gradient(name, &k);
    case_close(&k);
}

#define CASE(name) Test(families_dec, name) { run_case_in(GOLD, #name, NULL); }
CASE(tiny_pythia_rand)
CASE(tiny_pythia_rand_hm)
CASE(tiny_pythia_text)
CASE(tiny_neox_seq_rand)
CASE(tiny_neox_seq_rand_hm)
CASE(tiny_llama_rand)
CASE(tiny_llama_rand_hm)
CASE(tiny_llama_text)
CASE(tiny_llama3_rand)
CASE(tiny_llama3_rand_hm)
CASE(tiny_llama3_text)
CASE(tiny_qwen2_rand)
CASE(tiny_qwen2_rand_hm)
CASE(tiny_qwen2_text)
CASE(tiny_llama_hd_rand)
CASE(tiny_llama_hd_rand_hm)
CASE(tiny_mistral_rand)
CASE(tiny_mistral_rand_hm)
CASE(tiny_mistral_long)
CASE(tiny_phi3_rand)
CASE(tiny_phi3_rand_hm)
CASE(tiny_phi3_long)

/* The multi-query families (Falcon, GPT-BigCode) against fixtures/ref/families_mqa.py
 * (goldens by fixtures/ref/make_mqa_golden.py in fixtures/mqa-golden/): Falcon-7B's layout
 * (one K/V head, one norm feeding the parallel attention and MLP), Falcon-40B's (grouped K/V
 * heads, ln_attn and ln_mlp), Falcon-RW's (ALiBi on 12 heads, sequential, biases; and at
 * n = 256 with 64-wide heads), GPT-BigCode with one K/V head and with one a head (and at
 * n = 256); the n = 256 cases open an F32 and a BF16 checkpoint of the same values. */
#define MQA_GOLD "fixtures/mqa-golden/"
#define MQA_CASE(name) Test(families_mqa, name) { run_case_in(MQA_GOLD, #name, NULL); }
MQA_CASE(tiny_falcon_mq)
MQA_CASE(tiny_falcon_mq_hm)
MQA_CASE(tiny_falcon_nd)
MQA_CASE(tiny_falcon_nd_hm)
MQA_CASE(tiny_falcon_rw)
MQA_CASE(tiny_falcon_rw_hm)
MQA_CASE(falcon_rw_n256_f32)
MQA_CASE(tiny_bigcode)
MQA_CASE(tiny_bigcode_hm)
MQA_CASE(tiny_bigcode_mha)
MQA_CASE(bigcode_n256_f32)
Test(families_mqa, falcon_rw_n256_bf16)
{
    run_case_in(MQA_GOLD, "falcon_rw_n256_f32", "fixtures/mqa-models/falcon-rw-n256-bf16");
}
Test(families_mqa, bigcode_n256_bf16)
{
    run_case_in(MQA_GOLD, "bigcode_n256_f32", "fixtures/mqa-models/bigcode-n256-bf16");
}

static const char *const decoder_cases[] = {
    "tiny_pythia_rand", "tiny_pythia_rand_hm", "tiny_pythia_text", "tiny_neox_seq_rand",
    "tiny_neox_seq_rand_hm", "tiny_llama_rand", "tiny_llama_rand_hm", "tiny_llama_text",
    "tiny_llama3_rand", "tiny_llama3_rand_hm", "tiny_llama3_text", "tiny_qwen2_rand",
    "tiny_qwen2_rand_hm", "tiny_qwen2_text", "tiny_llama_hd_rand", "tiny_llama_hd_rand_hm",
    "tiny_mistral_rand", "tiny_mistral_rand_hm", "tiny_mistral_long", "tiny_phi3_rand",
    "tiny_phi3_rand_hm", "tiny_phi3_long",
};

Test(families_dec, every_decoder_case_of_cases_tsv_is_checked)
{
    char *text;
    size_t len;
    hs_error err = {{0}};
    cr_assert_eq(hs_read_file(GOLD "cases.tsv", 1 << 20, &text, &len, &err), HS_OK, "%s", err.msg);
    int found = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char name[128], model[256], type[64];
        if (sscanf(line, "%127s %255s %63s", name, model, type) != 3 ||
            (strcmp(type, "gpt_neox") && strcmp(type, "llama") && strcmp(type, "qwen2") &&
             strcmp(type, "mistral") && strcmp(type, "phi3")))
            continue;
        int listed = 0;
        for (size_t i = 0; i < sizeof decoder_cases / sizeof decoder_cases[0]; i++)
            listed |= !strcmp(decoder_cases[i], name);
        cr_expect(listed, "case %s of cases.tsv has no test", name);
        found++;
    }
    free(text);
    cr_expect_eq(found, (int)(sizeof decoder_cases / sizeof decoder_cases[0]));
}

/* The analytic signed gradient against central differences (testutil.h, as
 * tests/test_gradient.c does for GPT-2 and BERT): parallel residual with partial rotary (Pythia), grouped KV
 * heads with RMSNorm and the gated MLP (Llama), multi-query with Q/K/V biases (Qwen2). */
static void finite_difference_in(const char *dir, const char *name)
{
    dec_case k;
    case_open_in(dir, name, NULL, &k);
    hs_loss_input in = {.ids = k.ids.data, .n = k.n, .kind = HS_LOSS_LM};
    tu_check_finite_difference(k.m, &in, name);
    case_close(&k);
}

static void finite_difference(const char *name)
{
    finite_difference_in(GOLD, name);
}

Test(families_dec_gradient, matches_finite_difference_pythia) { finite_difference("tiny_pythia_rand"); }
Test(families_dec_gradient, matches_finite_difference_neox_seq) { finite_difference("tiny_neox_seq_rand"); }
Test(families_dec_gradient, matches_finite_difference_llama) { finite_difference("tiny_llama_rand"); }
Test(families_dec_gradient, matches_finite_difference_qwen2) { finite_difference("tiny_qwen2_rand"); }
/* ALiBi with biases in a sequential block (Falcon-RW), grouped K/V heads under two norms
 * feeding a parallel block (Falcon-40B), one K/V head (GPT-BigCode) */
Test(families_dec_gradient, matches_finite_difference_falcon_rw)
{
    finite_difference_in(MQA_GOLD, "tiny_falcon_rw");
}
Test(families_dec_gradient, matches_finite_difference_falcon_nd)
{
    finite_difference_in(MQA_GOLD, "tiny_falcon_nd");
}
Test(families_dec_gradient, matches_finite_difference_bigcode)
{
    finite_difference_in(MQA_GOLD, "tiny_bigcode");
}
/* windows shorter than the text, and Phi-3's long factors with the attention factor */
Test(families_dec_gradient, matches_finite_difference_mistral_window) { finite_difference("tiny_mistral_long"); }
Test(families_dec_gradient, matches_finite_difference_phi3_longrope) { finite_difference("tiny_phi3_long"); }

/* ---- configs and folders that are refused, each with its one-line reason ---------------- */

/* Writes text as dir/config.json and opens the folder's config alone; returns the status. */
static hs_status open_config(const char *dir, const char *text, hs_error *err)
{
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    tu_write_file(path, text, strlen(text));
    hs_model *m = NULL;
    hs_status st = hs_model_open(dir, HS_OPEN_TOKENIZER, &m, err);
    hs_model_free(m);
    return st;
}

#define DIMS "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"hidden_size\": 64, " \
             "\"intermediate_size\": 128, \"vocab_size\": 100"

Test(families_dec_config, reads_rope_parameters_and_refuses_what_the_block_lacks)
{
    char dir[64];
    tu_mkdtemp(dir, sizeof dir);
    struct {
        const char *json, *msg; /* msg NULL: opens */
    } cases[] = {
        {"{\"model_type\": \"llama\", " DIMS ", \"num_key_value_heads\": 2}", NULL},
        {"{\"model_type\": \"llama\", " DIMS ", \"rope_scaling\": {\"rope_type\": \"yarn\", "
         "\"factor\": 4}}", NULL}, /* YaRN: tests/test_mla.c */
        {"{\"model_type\": \"llama\", " DIMS ", \"rope_parameters\": {\"rope_type\": \"dynamic\", "
         "\"factor\": 2, \"rope_theta\": 10000}}", "config.json: rope scaling type 'dynamic' is "
         "not supported (expected default, linear, llama3, longrope or yarn)"},
        {"{\"model_type\": \"llama\", " DIMS ", \"mlp_bias\": true}",
         "config.json: 'mlp_bias': true is not supported"},
        {"{\"model_type\": \"llama\", " DIMS ", \"hidden_act\": \"gelu\"}",
         "config.json: hidden_act 'gelu' is not supported (expected silu)"},
        {"{\"model_type\": \"llama\", " DIMS ", \"head_dim\": 32}", NULL}, /* 4 x 32 != 64 */
        {"{\"model_type\": \"llama\", " DIMS ", \"num_key_value_heads\": 3}", "config.json: "
         "num_attention_heads 4 is not a multiple of num_key_value_heads 3"},
        {"{\"model_type\": \"qwen2\", " DIMS ", \"num_key_value_heads\": 1, "
         "\"use_sliding_window\": true}", "config.json: 'use_sliding_window': true is not supported"},
        {"{\"model_type\": \"gpt_neox\", " DIMS ", \"attention_bias\": false}",
         "config.json: 'attention_bias': false is not supported"},
        {"{\"model_type\": \"gpt_neo\"}", "config.json: model_type 'gpt_neo' is not supported: "
         "GPT-Neo alternates global and local (windowed) attention layers and leaves its "
         "attention scores unscaled"},
        {"{\"model_type\": \"llama\", " DIMS ", \"rope_scaling\": {\"rope_type\": \"llama3\", "
         "\"factor\": 8}}", "config.json: llama3 rope scaling needs low_freq_factor < "
         "high_freq_factor and original_max_position_embeddings"},
        {"{\"model_type\": \"falcon\", " DIMS ", \"new_decoder_architecture\": true, "
         "\"parallel_attn\": false}", "config.json: new_decoder_architecture with parallel_attn "
         "false is not supported (transformers cannot run it)"},
        {"{\"model_type\": \"falcon\", " DIMS ", \"num_ln_in_parallel_attn\": 2}",
         "config.json: num_ln_in_parallel_attn 2 without new_decoder_architecture is not "
         "supported (transformers cannot run it)"},
        {"{\"model_type\": \"falcon\", " DIMS ", \"new_decoder_architecture\": true, "
         "\"num_kv_heads\": 3}", "config.json: num_attention_heads 4 is not a multiple of "
         "num_kv_heads 3"},
        {"{\"model_type\": \"falcon\", \"n_layer\": 2, \"n_head\": 4, \"vocab_size\": 10}",
         "config.json: missing required field 'hidden_size'"},
        {"{\"model_type\": \"gpt_bigcode\", \"n_layer\": 2, \"n_head\": 4, \"n_embd\": 64, "
         "\"vocab_size\": 10, \"scale_attn_weights\": false}",
         "config.json: 'scale_attn_weights': false is not supported"},
        {"{\"model_type\": \"gpt_bigcode\", \"n_layer\": 2, \"n_head\": 4, \"n_embd\": 64, "
         "\"vocab_size\": 10, \"activation_function\": \"relu\"}", "config.json: activation "
         "'relu' is not supported (expected gelu_new, gelu_pytorch_tanh or gelu)"},
        /* windows and longrope (reads_windows_and_longrope has what opens) */
        {"{\"model_type\": \"mistral\", " DIMS ", \"num_key_value_heads\": 2, \"sliding_window\": "
         "0}", "config.json: field 'sliding_window' must be at least 1 (or null: no window)"},
        {"{\"model_type\": \"phi3\", " DIMS ", \"rope_scaling\": {\"type\": \"longrope\", "
         "\"short_factor\": [1, 2], \"long_factor\": [1, 2]}}", "config.json: rope_scaling."
         "'short_factor' must be a list of 8 numbers (one per rotary frequency)"},
        {"{\"model_type\": \"phi3\", " DIMS ", \"rope_scaling\": {\"type\": \"longrope\", "
         "\"short_factor\": [1, 1, 1, 1, 1, 1, 1, 1], \"long_factor\": [1, 1, 1, 0, 1, 1, 1, 1]}}",
         "config.json: rope_scaling.'long_factor'[3] must be a number in (0, 1e6]"},
        {"{\"model_type\": \"phi3\", " DIMS ", \"rope_scaling\": {\"type\": \"yarn\", "
         "\"factor\": 4}}", "config.json: rope scaling type 'yarn' is not supported for phi3 "
         "(expected default, linear or longrope)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        hs_error err = {{0}};
        hs_status st = open_config(dir, cases[k].json, &err);
        if (!cases[k].msg) {
            cr_expect_eq(st, HS_OK, "case %zu: %s", k, err.msg);
            continue;
        }
        cr_expect_neq(st, HS_OK, "case %zu opened", k);
        cr_expect_str_eq(err.msg, cases[k].msg, "case %zu", k);
    }
    tu_rm_rf(dir);
}

/* transformers 5's rope_parameters wins over the 4.x keys; llama3 scaling is read from it. */
Test(families_dec_config, rope_parameters_set_the_rotary_values)
{
    char dir[64];
    tu_mkdtemp(dir, sizeof dir);
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    const char *json = "{\"model_type\": \"gpt_neox\", " DIMS ", \"rotary_pct\": 0.5, "
                       "\"rotary_emb_base\": 100, \"rope_parameters\": {\"rope_theta\": 500000, "
                       "\"partial_rotary_factor\": 0.25, \"rope_type\": \"llama3\", \"factor\": 8, "
                       "\"low_freq_factor\": 1, \"high_freq_factor\": 4, "
                       "\"original_max_position_embeddings\": 32}, \"use_parallel_residual\": false}";
    tu_write_file(path, json, strlen(json));
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_open(dir, HS_OPEN_TOKENIZER, &m, &err), HS_OK, "%s", err.msg);
    const hs_arch *a = hs_model_config_of(m)->arch;
    cr_expect_eq(a->rotary_dims, 4); /* int(16 * 0.25) */
    cr_expect_eq(a->rotary_base, 500000.0f);
    cr_expect_eq(a->rope_scaling, HS_ROPE_LLAMA3);
    cr_expect(a->rope_factor == 8.0f && a->rope_low_freq == 1.0f && a->rope_high_freq == 4.0f &&
              a->rope_orig_ctx == 32);
    cr_expect_eq(a->parallel_residual, 0);
    /* theta_0 = 1: wavelength 2 pi < 32 / 4, kept; theta_1 = 500000^(-1/2): wavelength
     * 4443 > 32, divided by 8 (Llama 3.1's bands, by hand) */
    double inv[2];
    hs_op_rope_freqs(a, inv);
    cr_expect(fabs(inv[0] - 1.0) < 1e-12 && fabs(inv[1] - pow(500000.0, -0.5) / 8) < 1e-15,
              "%.17g %.17g", inv[0], inv[1]);
    hs_model_free(m);
    tu_rm_rf(dir);
}

/* Falcon's layouts from config.json (the keys of falcon-7b, falcon-40b and falcon-rw-1b,
 * the old names n_layer / n_head / n_head_kv too) and GPT-BigCode's K/V heads. */
Test(families_dec_config, falcon_and_bigcode_layouts)
{
    char dir[64];
    tu_mkdtemp(dir, sizeof dir);
    static const struct {
        const char *json;
        int kv, parallel, pos, biases;
        const char *norm2; /* the second norm's name */
    } cases[] = {
        {"{\"model_type\": \"falcon\", \"hidden_size\": 64, \"n_layer\": 2, \"n_head\": 4, "
         "\"vocab_size\": 10}", 1, 1, HS_POS_ROTARY, 0, "h.%d.input_layernorm.weight"},
        {"{\"model_type\": \"falcon\", " DIMS ", \"new_decoder_architecture\": true, "
         "\"n_head_kv\": 2}", 2, 1, HS_POS_ROTARY, 0, "h.%d.ln_mlp.weight"},
        {"{\"model_type\": \"falcon\", " DIMS ", \"new_decoder_architecture\": true, "
         "\"num_kv_heads\": 4, \"num_ln_in_parallel_attn\": 1}", 4, 1, HS_POS_ROTARY, 0,
         "h.%d.input_layernorm.weight"},
        {"{\"model_type\": \"falcon\", " DIMS ", \"alibi\": true, \"multi_query\": false, "
         "\"parallel_attn\": false, \"bias\": true}", 4, 0, HS_POS_ALIBI, 1,
         "h.%d.post_attention_layernorm.weight"},
        {"{\"model_type\": \"gpt_bigcode\", \"n_layer\": 2, \"n_head\": 4, \"n_embd\": 64, "
         "\"vocab_size\": 10}", 1, 0, HS_POS_LEARNED, 1, "h.%d.ln_2.weight"},
        {"{\"model_type\": \"gpt_bigcode\", \"n_layer\": 2, \"n_head\": 4, \"n_embd\": 64, "
         "\"vocab_size\": 10, \"multi_query\": false}", 4, 0, HS_POS_LEARNED, 1,
         "h.%d.ln_2.weight"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/config.json", dir);
        tu_write_file(path, cases[k].json, strlen(cases[k].json));
        hs_model *m = NULL;
        hs_error err = {{0}};
        cr_assert_eq(hs_model_open(dir, HS_OPEN_TOKENIZER, &m, &err), HS_OK, "case %zu: %s", k,
                     err.msg);
        const hs_model_config *c = hs_model_config_of(m);
        const hs_arch *a = c->arch;
        cr_expect_eq(c->n_kv_head, cases[k].kv, "case %zu", k);
        cr_expect_eq(a->parallel_residual, cases[k].parallel, "case %zu", k);
        cr_expect_eq(a->pos, cases[k].pos, "case %zu", k);
        cr_expect_eq(a->biases, cases[k].biases, "case %zu", k);
        cr_expect_eq(c->d_ff, 256, "case %zu: 4 x 64 by default", k);
        const char *n2 = NULL;
        for (size_t i = 0; i < a->names->n; i++)
            if (a->names->t[i].slot == HS_S_NORM2_W)
                n2 = a->names->t[i].hf;
        cr_expect_str_eq(n2, cases[k].norm2, "case %zu", k);
        hs_model_free(m);
    }
    tu_rm_rf(dir);
}

/* Mistral's sliding_window (absent: transformers' 4096; null: none) on every layer, read as a
 * llama; Phi-3's longrope ("su"): its factors, the attention factor by hand, the frequencies
 * of a text within and past original_max_position_embeddings (what is refused: the table of
 * reads_rope_parameters_and_refuses_what_the_block_lacks). */
Test(families_dec_config, reads_windows_and_longrope)
{
    char dir[64];
    tu_mkdtemp(dir, sizeof dir);
    hs_error err = {{0}};
    hs_model *m = NULL;
    const char *mis[3] = {", \"sliding_window\": 3}", "}", ", \"sliding_window\": null}"};
    const int want[3] = {3, 4096, 0};
    char json[1024], path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    for (int k = 0; k < 3; k++) {
        snprintf(json, sizeof json, "{\"model_type\": \"mistral\", " DIMS
                 ", \"num_key_value_heads\": 2%s", mis[k]);
        tu_write_file(path, json, strlen(json));
        cr_assert_eq(hs_model_open(dir, HS_OPEN_TOKENIZER, &m, &err), HS_OK, "%s", err.msg);
        const hs_model_config *c = hs_model_config_of(m);
        cr_expect_eq(c->family, HS_FAMILY_LLAMA);
        cr_expect_eq(c->arch->sliding_window, want[k], "case %d", k);
        for (int l = 0; l < 2; l++) {
            hs_visibility v = hs_model_layer_visibility(c, l);
            cr_expect_eq(hs_model_layer_is_local(c, l), want[k] > 0);
            cr_expect(want[k] ? v.kind == HS_VIS_SLIDING && v.window == want[k]
                              : v.kind == HS_VIS_CAUSAL, "case %d layer %d", k, l);
        }
        hs_model_free(m);
        m = NULL;
    }
    const char *f8 = "[1, 2, 1, 2, 1, 2, 1, 2]", *g8 = "[4, 4, 4, 4, 4, 4, 4, 4]";
    snprintf(json, sizeof json, "{\"model_type\": \"phi3\", " DIMS ", \"max_position_embeddings\": "
             "512, \"original_max_position_embeddings\": 128, \"rope_scaling\": {\"type\": \"su\", "
             "\"short_factor\": %s, \"long_factor\": %s}}", f8, g8);
    tu_write_file(path, json, strlen(json));
    cr_assert_eq(hs_model_open(dir, HS_OPEN_TOKENIZER, &m, &err), HS_OK, "%s", err.msg);
    const hs_model_config *c = hs_model_config_of(m);
    cr_expect_eq(c->family, HS_FAMILY_PHI3);
    cr_expect_eq(c->arch->sliding_window, 0);
    hs_rope r = hs_model_layer_rope(c, 1);
    cr_expect_eq(r.scaling, HS_ROPE_LONGROPE);
    cr_expect_eq(r.orig_ctx, 128);
    /* extension 512 / 128 = 4: sqrt(1 + ln 4 / ln 128) = sqrt(1 + 2/7) */
    double inv[8], sq = sqrt(9.0 / 7.0);
    cr_expect(fabs(hs_op_rope_freqs_at(&r, 128, inv) - sq) < 1e-6);
    for (int k = 0; k < 8; k++) /* 128 tokens: short factors; 129: long */
        cr_expect(fabs(inv[k] - pow(10000.0, -k / 8.0) / (k % 2 ? 2 : 1)) < 1e-12, "short %d", k);
    hs_op_rope_freqs_at(&r, 129, inv);
    for (int k = 0; k < 8; k++)
        cr_expect(fabs(inv[k] - pow(10000.0, -k / 8.0) / 4) < 1e-12, "long %d", k);
    hs_model_free(m);
    tu_rm_rf(dir);
}

static void write_json(const char *path, const cJSON *j)
{
    char *text = cJSON_Print(j);
    tu_write_file(path, text, strlen(text));
    free(text);
}

/* A sharded checkpoint whose index names a tensor in a shard that does not hold it, or a
 * shard that is not there, fails naming it. */
Test(families_dec_config, sharded_index_must_match_the_shards)
{
    char dir[64], path[512], cwd[1024], from[2048];
    tu_mkdtemp(dir, sizeof dir);
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    const char *files[] = {"config.json", "model-00001-of-00002.safetensors",
                           "model-00002-of-00002.safetensors"};
    for (int k = 0; k < 3; k++) {
        snprintf(from, sizeof from, "%s/fixtures/family-models/tiny-llama/%s", cwd, files[k]);
        snprintf(path, sizeof path, "%s/%s", dir, files[k]);
        cr_assert_eq(symlink(from, path), 0);
    }
    cJSON *idx = tu_json_file("fixtures/family-models/tiny-llama/model.safetensors.index.json");
    cJSON *wm = cJSON_GetObjectItem(idx, "weight_map");
    char first[256]; /* moved to the other shard */
    snprintf(first, sizeof first, "%s", wm->child->string);
    const char *other = strstr(wm->child->valuestring, "00001-of") ? files[2] : files[1];
    cJSON_ReplaceItemInObject(wm, first, cJSON_CreateString(other));
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    write_json(path, idx);
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_expect_eq(hs_model_load(dir, &m, &err), HS_E_FORMAT);
    char want[512];
    snprintf(want, sizeof want, "model.safetensors.index.json names tensor '%s' in '%s', which "
             "does not hold it", first, other);
    cr_expect_str_eq(err.msg, want);
    cJSON_ReplaceItemInObject(wm, first, cJSON_CreateString("model-00003-of-00002.safetensors"));
    write_json(path, idx);
    cr_expect_eq(hs_model_load(dir, &m, &err), HS_E_IO);
    cr_expect(strstr(err.msg, "model-00003-of-00002.safetensors") != NULL, "%s", err.msg);
    cJSON_ReplaceItemInObject(wm, first, cJSON_CreateString("../model.safetensors"));
    write_json(path, idx);
    cr_expect_eq(hs_model_load(dir, &m, &err), HS_E_FORMAT);
    cr_expect(strstr(err.msg, "no valid shard file name") != NULL, "%s", err.msg);
    cJSON_Delete(idx);
    tu_rm_rf(dir);
}
