/* GGUF files of the rotary decoders (gptneox, llama, qwen2). The references: the files in
 * fixtures/gguf/families/, written by llama.cpp's own gguf-py (fixtures/gguf/
 * write_family_gguf.py) from the Hugging Face folders in fixtures/family-models/ and checked
 * in llama.cpp itself; the float64 goldens of fixtures/family-golden/ (fixtures/ref/
 * families.py); the Rust tokenizers library's ids (fixtures/tokenizer/family_golden.json).
 *   - an F32 file gives the maps, final hidden states and NLL of its Hugging Face folder bit
 *     for bit, and the goldens within their tolerances; F16 / quantised files within stated
 *     bounds;
 *   - the tokenizer rebuilt from tokenizer.ggml.* gives the library's ids on every single
 *     text of the goldens;
 *   - headscope's writer gives the gguf-py file's keys and tensors (bytes), and round-trips;
 *   - what llama.cpp's files can say and headscope cannot run is refused in one line. */
#include <cJSON.h>

#include "headscope/forward.h"
#include "headscope/gguf.h"
#include "headscope/model.h"
#include "headscope/tokenizer.h"
#include "model/model_internal.h"
#include "tokutil.h"

#define FAMS "fixtures/gguf/families/"
#define GOLD "fixtures/family-golden/"
#define HF "fixtures/family-models/"

typedef struct fam {
    const char *gguf;      /* file in FAMS, without .gguf */
    const char *hf;        /* its folder in HF */
    const char *golden;    /* GOLD <golden>_text.* */
    const char *tokenizer; /* its name in family_golden.json */
} fam;

static const fam fams[] = {
    {"tiny-pythia.f32", "tiny-pythia", "tiny_pythia", "neox"},
    {"tiny-llama.f32", "tiny-llama", "tiny_llama", "llama2"},
    {"tiny-llama3.f32", "tiny-llama3", "tiny_llama3", "llama3"},
    {"tiny-qwen2.f32", "tiny-qwen2", "tiny_qwen2", "qwen2"},
};
#define N_FAMS (sizeof fams / sizeof fams[0])

static hs_model *load_ok(const char *path)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load(path, &m, &err), HS_OK, "cannot load %s: %s", path, err.msg);
    return m;
}

static hs_model *load_fam(const char *file)
{
    char path[256];
    snprintf(path, sizeof path, FAMS "%s.gguf", file);
    return load_ok(path);
}

/* The maps (L, H, n, n), final hidden states (n, d) and next-token NLL (n - 1) of m on ids. */
typedef struct run {
    float *attn, *hidden;
    double *nll;
    size_t n_attn, n_hidden;
    int n;
} run;

static run forward(const hs_model *m, const int32_t *ids, int n)
{
    const hs_model_config *c = hs_model_config_of(m);
    hs_error err = {{0}};
    hs_trace *trace = NULL;
    run r = {.n = n};
    cr_assert_eq(hs_trace_new(m, n, &trace, &err), HS_OK);
    r.n_hidden = (size_t)n * (size_t)c->d_model;
    r.hidden = malloc(r.n_hidden * sizeof *r.hidden);
    float *logits = malloc((size_t)n * (size_t)c->vocab_size * sizeof *logits);
    hs_forward_opts o = {.on_attn = hs_trace_observe, .user = trace, .hidden = r.hidden,
                         .logits = logits};
    cr_assert_eq(hs_forward(m, ids, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);
    r.n_attn = (size_t)c->n_layer * (size_t)c->n_head * (size_t)n * (size_t)n;
    r.attn = malloc(r.n_attn * sizeof *r.attn);
    memcpy(r.attn, trace->attn, r.n_attn * sizeof *r.attn);
    r.nll = malloc((size_t)n * sizeof *r.nll);
    for (int i = 0; i + 1 < n; i++)
        r.nll[i] = tu_nll(logits + (size_t)i * c->vocab_size, c->vocab_size, ids[i + 1]);
    free(logits);
    hs_trace_free(trace);
    return r;
}

static void run_free(run *r)
{
    free(r->attn);
    free(r->hidden);
    free(r->nll);
}

static double nll_diff(const run *a, const run *b)
{
    double d = 0;
    for (int i = 0; i + 1 < a->n; i++)
        d = fmax(d, fabs(a->nll[i] - b->nll[i]));
    return d;
}

/* ---- reading: the forward pass ------------------------------------------------------------ */

/* An F32 file and the folder it came from: bit-identical maps, hidden states and NLL; the
 * float64 goldens within 1e-5 (maps) and 1e-4 (hidden, NLL). */
static void check_f32(const fam *f)
{
    char path[256];
    snprintf(path, sizeof path, GOLD "%s_text.ids.npy", f->golden);
    hs_npy ids = tu_npy(path);
    hs_model *g = load_fam(f->gguf);
    snprintf(path, sizeof path, HF "%s", f->hf);
    hs_model *h = load_ok(path);
    run rg = forward(g, ids.data, (int)ids.count), rh = forward(h, ids.data, (int)ids.count);
    cr_expect_eq(tu_max_abs_diff(rg.attn, rh.attn, rg.n_attn, NULL), 0.0, "%s: maps differ", f->gguf);
    cr_expect_eq(tu_max_abs_diff(rg.hidden, rh.hidden, rg.n_hidden, NULL), 0.0, "%s: hidden", f->gguf);
    cr_expect_eq(nll_diff(&rg, &rh), 0.0, "%s: nll", f->gguf);

    snprintf(path, sizeof path, GOLD "%s_text.attn.npy", f->golden);
    hs_npy attn = tu_npy(path);
    cr_assert_eq(attn.count, rg.n_attn);
    double d = tu_max_abs_diff(rg.attn, attn.data, attn.count, NULL);
    cr_expect_leq(d, 1e-5, "%s: maps vs golden %g", f->gguf, d);
    snprintf(path, sizeof path, GOLD "%s_text.hidden.npy", f->golden);
    hs_npy hid = tu_npy(path);
    d = tu_max_abs_diff(rg.hidden, hid.data, hid.count, NULL);
    cr_expect_leq(d, 1e-4, "%s: hidden vs golden %g", f->gguf, d);
    snprintf(path, sizeof path, GOLD "%s_text.json", f->golden);
    cJSON *j = tu_json_file(path);
    const cJSON *nll = cJSON_GetObjectItem(j, "nll");
    cr_assert_eq(cJSON_GetArraySize(nll), rg.n - 1);
    for (int i = 0; i + 1 < rg.n; i++)
        cr_expect(fabs(rg.nll[i] - cJSON_GetArrayItem(nll, i)->valuedouble) <= 1e-4, "%s: nll[%d]",
                  f->gguf, i);
    cJSON_Delete(j);
    hs_npy_free(&attn);
    hs_npy_free(&hid);
    run_free(&rg);
    run_free(&rh);
    hs_model_free(g);
    hs_model_free(h);
    hs_npy_free(&ids);
}

Test(gguf_family, pythia_f32_equals_its_folder) { check_f32(&fams[0]); }
Test(gguf_family, llama_f32_equals_its_folder) { check_f32(&fams[1]); }
Test(gguf_family, llama3_f32_equals_its_folder) { check_f32(&fams[2]); }
Test(gguf_family, qwen2_f32_equals_its_folder) { check_f32(&fams[3]); }

/* The descriptor read from the keys: what each family's config.json says. */
Test(gguf_family, reads_the_rotary_keys)
{
    hs_model *m = load_fam("tiny-pythia.f32");
    const hs_model_config *c = hs_model_config_of(m);
    cr_expect_eq(c->family, HS_FAMILY_GPT_NEOX);
    cr_expect_eq(c->arch->rotary_dims, 4); /* rotary_pct 0.25 of 16 */
    cr_expect(c->arch->parallel_residual);
    cr_expect_eq(c->n_kv_head, 4);
    hs_model_free(m);
    m = load_fam("tiny-llama3.f32");
    c = hs_model_config_of(m);
    cr_expect_eq(c->n_kv_head, 2);
    cr_expect_eq(c->arch->rope_scaling, HS_ROPE_LLAMA3); /* from rope_freqs.weight */
    cr_expect_eq(c->arch->rope_factor, 8.0f);
    cr_expect_eq(c->arch->rope_low_freq, 1.0f);
    cr_expect_eq(c->arch->rope_high_freq, 4.0f);
    cr_expect_eq(c->arch->rope_orig_ctx, 32);
    cr_expect_eq(c->arch->rotary_base, 500000.0f);
    hs_model_free(m);
    m = load_fam("tiny-qwen2.f32");
    c = hs_model_config_of(m);
    cr_expect_eq(c->n_kv_head, 1);
    cr_expect(c->arch->qkv_bias);
    cr_expect_eq(c->ln_eps, 1e-6f);
    hs_model_free(m);
}

/* ---- reading: the tokenizer --------------------------------------------------------------- */

/* Every single text of family_golden.json (pairs have no GGUF form) through the tokenizer
 * rebuilt from the file: the library's ids, BOS as the file's add_bos_token says. */
static void check_tokenizer(const char *file, const char *name)
{
    hs_model *m = load_fam(file);
    const hs_tokenizer *t = hs_model_tokenizer(m);
    cr_assert_not_null(t, "%s: no tokenizer", file);
    tu_fam_cases fc = tu_load_fam_cases();
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(fc.golden, "tokenizers"), name);
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(ref, "ids")->child;
    const cJSON *nf = cJSON_GetObjectItemCaseSensitive(ref, "n_first")->child;
    size_t bad = 0, singles = 0;
    for (size_t k = 0; k < fc.n; k++, ids = ids->next, nf = nf->next) {
        if (cJSON_GetObjectItemCaseSensitive(fc.c[k], "pair_hex"))
            continue;
        singles++;
        if (!tu_golden_case(t, fc.c[k], ids, nf->valueint, file, k, bad < 10, NULL))
            bad++;
    }
    cr_log_info("%s: %zu of %zu single texts identical to %s", file, singles - bad, singles, name);
    cr_expect_geq(singles, 1000);
    cr_expect_eq(bad, 0, "%s: %zu of %zu texts differ from the library's %s", file, bad, singles, name);
    tu_free_fam_cases(&fc);
    hs_model_free(m);
}

Test(gguf_family, pythia_tokenizer_matches_the_library, .timeout = 120) { check_tokenizer("tiny-pythia.f32", "neox"); }
Test(gguf_family, llama_tokenizer_matches_the_library, .timeout = 120) { check_tokenizer("tiny-llama.f32", "llama2"); }
Test(gguf_family, llama3_tokenizer_matches_the_library, .timeout = 120) { check_tokenizer("tiny-llama3.f32", "llama3"); }
Test(gguf_family, qwen2_tokenizer_matches_the_library, .timeout = 120) { check_tokenizer("tiny-qwen2.f32", "qwen2"); }
