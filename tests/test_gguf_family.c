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
#include "nn/ops.h"
#include "gguf_util.h"
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

static hs_model *load_fam(const char *file)
{
    char path[256];
    snprintf(path, sizeof path, FAMS "%s.gguf", file);
    return tu_load(path);
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
    hs_model *h = tu_load(path);
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

/* ---- writing -------------------------------------------------------------------------------- */

static void expect_same_value(const hs_gguf *a, size_t ia, const hs_gguf *b, size_t ib, size_t j,
                              const char *key)
{
    hs_gguf_value x, y;
    hs_gguf_kv_get(a, ia, j, &x);
    hs_gguf_kv_get(b, ib, j, &y);
    cr_assert_eq(x.type, y.type, "%s[%zu]: type", key, j);
    int same = x.u == y.u && x.i == y.i && (x.f == y.f || (x.f != x.f && y.f != y.f)) &&
               x.len == y.len && (!x.str || !memcmp(x.str, y.str, x.len));
    cr_assert(same, "%s[%zu] differs", key, j);
}

/* headscope's writer on the folder against the gguf-py file: the same keys in the same order
 * with the same types and values, except the two headscope (like llama.cpp's converter)
 * adds and the fixture script does not (general.type, general.quantization_version); the
 * same tensor table (names, types, shapes, offsets in the data section) and bytes. */
static void check_writer(const char *hf, const char *file, hs_gguf_ftype ft)
{
    char path[256];
    snprintf(path, sizeof path, HF "%s", hf);
    hs_model *h = tu_load(path);
    hs_gguf_write_options opt = {.ftype = ft, .name = hf};
    unsigned char *buf = NULL;
    size_t len = 0;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_encode(h, &opt, &buf, &len, &err), HS_OK, "%s: %s", hf, err.msg);
    hs_gguf *a = NULL, *b = NULL;
    cr_assert_eq(hs_gguf_parse(buf, len, &a, &err), HS_OK, "%s", err.msg);
    snprintf(path, sizeof path, FAMS "%s.gguf", file);
    cr_assert_eq(hs_gguf_open(path, &b, &err), HS_OK, "%s", err.msg);
    size_t ib = 0, extra = 0;
    for (size_t ia = 0; ia < hs_gguf_kv_count(a); ia++) {
        const char *k = hs_gguf_kv_key(a, ia);
        if (!strcmp(k, "general.type") || !strcmp(k, "general.quantization_version")) {
            extra++;
            continue;
        }
        cr_assert_lt(ib, hs_gguf_kv_count(b), "%s: key '%s' is not in the gguf-py file", file, k);
        cr_assert_str_eq(k, hs_gguf_kv_key(b, ib), "%s: key %zu", file, ia);
        cr_assert_eq(hs_gguf_kv_type(a, ia), hs_gguf_kv_type(b, ib), "%s: %s type", file, k);
        size_t n = 1;
        if (hs_gguf_kv_type(a, ia) == HS_GGUF_ARRAY) {
            cr_assert_eq(hs_gguf_kv_elem_type(a, ia), hs_gguf_kv_elem_type(b, ib), "%s", k);
            cr_assert_eq(hs_gguf_kv_len(a, ia), hs_gguf_kv_len(b, ib), "%s: length", k);
            n = hs_gguf_kv_len(a, ia);
        }
        for (size_t j = 0; j < n; j++)
            expect_same_value(a, ia, b, ib, j, k);
        ib++;
    }
    cr_expect_eq(extra, 2);
    cr_assert_eq(ib, hs_gguf_kv_count(b), "%s: the gguf-py file has more keys", file);
    cr_assert_eq(hs_gguf_tensor_count(a), hs_gguf_tensor_count(b));
    for (size_t i = 0; i < hs_gguf_tensor_count(a); i++) {
        const hs_gguf_tensor *x = hs_gguf_tensor_at(a, i), *y = hs_gguf_tensor_at(b, i);
        cr_assert_str_eq(x->name, y->name, "%s: tensor %zu", file, i);
        cr_assert_eq(x->type, y->type, "%s: %s type", file, x->name);
        cr_assert_eq(x->n_dims, y->n_dims, "%s: %s n_dims", file, x->name);
        cr_assert_eq(memcmp(x->ne, y->ne, sizeof x->ne), 0, "%s: %s shape", file, x->name);
        cr_assert_eq(x->offset, y->offset, "%s: %s offset", file, x->name);
        cr_assert_eq(x->nbytes, y->nbytes);
        cr_assert_eq(memcmp(x->data, y->data, x->nbytes), 0, "%s: %s bytes differ", file, x->name);
    }
    hs_gguf_free(a);
    hs_gguf_free(b);
    free(buf);
    hs_model_free(h);
}

Test(gguf_family, writer_gives_the_gguf_py_pythia) { check_writer("tiny-pythia", "tiny-pythia.f32", HS_GGUF_FTYPE_F32); }
Test(gguf_family, writer_gives_the_gguf_py_llama) { check_writer("tiny-llama", "tiny-llama.f32", HS_GGUF_FTYPE_F32); }
Test(gguf_family, writer_gives_the_gguf_py_llama_q8_0) { check_writer("tiny-llama", "tiny-llama.q8_0", HS_GGUF_FTYPE_Q8_0); }
Test(gguf_family, writer_gives_the_gguf_py_llama3) { check_writer("tiny-llama3", "tiny-llama3.f32", HS_GGUF_FTYPE_F32); }
Test(gguf_family, writer_gives_the_gguf_py_qwen2) { check_writer("tiny-qwen2", "tiny-qwen2.f32", HS_GGUF_FTYPE_F32); }
Test(gguf_family, writer_gives_the_gguf_py_qwen2_f16) { check_writer("tiny-qwen2", "tiny-qwen2.f16", HS_GGUF_FTYPE_F16); }

/* Hugging Face folder -> GGUF -> model: the folder's every weight and forward pass, and its
 * tokenizer's ids on texts with added tokens, bytes outside the vocabulary and spaces. */
static void check_round_trip(const fam *f)
{
    char path[256], dir[64];
    snprintf(path, sizeof path, HF "%s", f->hf);
    hs_model *h = tu_load(path);
    hs_error err = {{0}};
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    cr_assert_eq(hs_gguf_write(h, path, NULL, &err), HS_OK, "%s", err.msg);
    hs_model *g = tu_load(path);
    cr_assert_eq(hs_model_param_count(g), hs_model_param_count(h));
    int32_t ids[24];
    for (int i = 0; i < 24; i++)
        ids[i] = (int32_t)((i * 131 + 7) % hs_model_config_of(h)->vocab_size);
    run rg = forward(g, ids, 24), rh = forward(h, ids, 24);
    cr_expect_eq(tu_max_abs_diff(rg.attn, rh.attn, rg.n_attn, NULL), 0.0, "%s: maps", f->hf);
    cr_expect_eq(tu_max_abs_diff(rg.hidden, rh.hidden, rg.n_hidden, NULL), 0.0, "%s: hidden", f->hf);
    cr_expect_eq(nll_diff(&rg, &rh), 0.0, "%s: nll", f->hf);
    static const char *const texts[] = {"Hello world, the cat sat on the mat.",
                                        "  two  spaces<|endoftext|> <s>x</s> café 日本 🙂 12345",
                                        ""};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        hs_encoding a = {0}, b = {0};
        cr_assert_eq(hs_tokenizer_encode(hs_model_tokenizer(h), texts[k], strlen(texts[k]), NULL, 0, &a, &err), HS_OK);
        cr_assert_eq(hs_tokenizer_encode(hs_model_tokenizer(g), texts[k], strlen(texts[k]), NULL, 0, &b, &err), HS_OK);
        cr_expect_eq(a.n, b.n, "%s: '%s': %zu vs %zu tokens", f->hf, texts[k], a.n, b.n);
        for (size_t i = 0; i < a.n && i < b.n; i++)
            cr_expect_eq(a.ids[i], b.ids[i], "%s: '%s' token %zu", f->hf, texts[k], i);
        hs_encoding_free(&a);
        hs_encoding_free(&b);
    }
    run_free(&rg);
    run_free(&rh);
    hs_model_free(g);
    hs_model_free(h);
    tu_rm_rf(dir);
}

Test(gguf_family, pythia_round_trip) { check_round_trip(&fams[0]); }
Test(gguf_family, llama_round_trip) { check_round_trip(&fams[1]); }
Test(gguf_family, llama3_round_trip) { check_round_trip(&fams[2]); }
Test(gguf_family, qwen2_round_trip) { check_round_trip(&fams[3]); }

/* ---- F16 and block-quantised files ------------------------------------------------------- */

/* A file of stored types other than F32 against the folder it came from, on the golden text
 * of tiny-llama's tokenizer: the largest map and NLL differences and the mean map difference
 * within bounds about twice what was measured (docs/gguf.md), and the tensor types the file
 * holds counted. */
static void check_lossy(const char *hf, const char *file, double max_map, double mean_map,
                        double max_loss, const uint32_t *types, const int *counts, int n_types)
{
    char path[256];
    hs_npy ids = tu_npy(GOLD "tiny_llama_text.ids.npy");
    snprintf(path, sizeof path, HF "%s", hf);
    hs_model *h = tu_load(path);
    hs_model *g = load_fam(file);
    run rg = forward(g, ids.data, (int)ids.count), rh = forward(h, ids.data, (int)ids.count);
    double mx = tu_max_abs_diff(rg.attn, rh.attn, rg.n_attn, NULL), mean = 0, lg = 0, lh = 0;
    for (size_t i = 0; i < rg.n_attn; i++)
        mean += fabs((double)rg.attn[i] - (double)rh.attn[i]) / (double)rg.n_attn;
    for (int i = 0; i + 1 < rg.n; i++) {
        lg += rg.nll[i] / (rg.n - 1);
        lh += rh.nll[i] / (rh.n - 1);
    }
    cr_log_info("%s: maps max|d| %.2e, mean %.2e; loss |d| %.2e", file, mx, mean, fabs(lg - lh));
    cr_expect_leq(mx, max_map, "%s: maps max|d| %g", file, mx);
    cr_expect_leq(mean, mean_map, "%s: maps mean|d| %g", file, mean);
    cr_expect_leq(fabs(lg - lh), max_loss, "%s: loss |d| %g", file, fabs(lg - lh));
    snprintf(path, sizeof path, FAMS "%s.gguf", file);
    expect_type_counts(path, types, counts, n_types);
    run_free(&rg);
    run_free(&rh);
    hs_model_free(g);
    hs_model_free(h);
    hs_npy_free(&ids);
}

Test(gguf_family, qwen2_f16_equals_its_f16_folder)
{
    static const uint32_t t[] = {HS_GGML_F16, HS_GGML_F32};
    static const int n[] = {15, 11}; /* token_embd and the 2-D weights; norms and biases */
    check_lossy("tiny-qwen2", "tiny-qwen2.f16", 0, 0, 0, t, n, 2);
}

Test(gguf_family, llama_q8_0_within_bounds)
{
    static const uint32_t t[] = {HS_GGML_Q8_0, HS_GGML_F32};
    static const int n[] = {23, 7};
    check_lossy("tiny-llama", "tiny-llama.q8_0", 0.3, 3e-3, 1e-2, t, n, 2);
}

/* llama-quantize's files (fixtures/gguf/README.md): its Q4_0 keeps the tied embeddings in
 * Q6_K, its Q4_K (Q4_K_M) gives attn_v and ffn_down Q6_K. */
Test(gguf_family, llama_q4_0_within_bounds)
{
    static const uint32_t t[] = {HS_GGML_Q4_0, HS_GGML_Q6_K, HS_GGML_F32};
    static const int n[] = {7, 1, 3};
    check_lossy("tiny-llama-wide", "tiny-llama-wide.q4_0", 0.6, 1e-2, 0.15, t, n, 3);
}

Test(gguf_family, llama_q4_k_within_bounds)
{
    static const uint32_t t[] = {HS_GGML_Q4_K, HS_GGML_Q6_K, HS_GGML_F32};
    static const int n[] = {5, 3, 3};
    check_lossy("tiny-llama-wide", "tiny-llama-wide.q4_k", 0.6, 1e-2, 0.15, t, n, 3);
}

Test(gguf_family, llama_q6_k_within_bounds)
{
    static const uint32_t t[] = {HS_GGML_Q6_K, HS_GGML_F32};
    static const int n[] = {8, 3};
    check_lossy("tiny-llama-wide", "tiny-llama-wide.q6_k", 0.2, 4e-3, 0.06, t, n, 2);
}

/* ---- refusals -------------------------------------------------------------------------------- */

static unsigned char *read_fam(const char *file, size_t *len)
{
    char path[256];
    snprintf(path, sizeof path, FAMS "%s.gguf", file);
    return tu_slurp(path, len);
}

/* The offset of the value of key in a GGUF image (after its type), or the test fails. */
static size_t value_at(const unsigned char *buf, size_t len, const char *key, uint32_t *type)
{
    size_t k = strlen(key);
    for (size_t i = 8; i + 8 + k + 4 <= len; i++)
        if (hs_le64(buf + i) == k && !memcmp(buf + i + 8, key, k)) {
            *type = hs_le32(buf + i + 8 + k);
            return i + 8 + k + 4;
        }
    cr_assert_fail("key '%s' not found", key);
    return 0;
}

/* A copy of the image with one more key (type, value bytes) and a string key padding what
 * was added to a multiple of 32 bytes, put right after the header: the tensor data stays
 * aligned. */
static unsigned char *with_kv(const unsigned char *buf, size_t len, const char *key, uint32_t type,
                              const void *val, size_t vlen, size_t *out_len)
{
    size_t k = strlen(key), add = 8 + k + 4 + vlen, pad_key = 11; /* "general.pad" */
    size_t fill = 8 + pad_key + 4 + 8, s = (32 - (add + fill) % 32) % 32;
    size_t n = add + fill + s;
    unsigned char *o = malloc(len + n), *p = o + 24;
    cr_assert_not_null(o);
    memcpy(o, buf, 24);
    uint64_t kv = hs_le64(buf + 16) + 2;
    for (int b = 0; b < 8; b++)
        o[16 + b] = (unsigned char)(kv >> (8 * b));
#define PUT64(v) for (int b = 0; b < 8; b++) *p++ = (unsigned char)((uint64_t)(v) >> (8 * b))
#define PUT32(v) for (int b = 0; b < 4; b++) *p++ = (unsigned char)((uint32_t)(v) >> (8 * b))
    PUT64(k);
    memcpy(p, key, k);
    p += k;
    PUT32(type);
    memcpy(p, val, vlen);
    p += vlen;
    PUT64(pad_key);
    memcpy(p, "general.pad", pad_key);
    p += pad_key;
    PUT32(HS_GGUF_STRING);
    PUT64(s);
    memset(p, 'x', s);
    p += s;
#undef PUT64
#undef PUT32
    memcpy(p, buf + 24, len - 24);
    *out_len = len + n;
    return o;
}

/* Loads an image through a temporary file; the status and message. */
static hs_status load_image(const unsigned char *buf, size_t len, hs_model **m, char *msg, size_t cap)
{
    char dir[64], path[128];
    hs_error err = {{0}};
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    tu_write_file(path, buf, len);
    *m = NULL;
    hs_status st = hs_model_load(path, m, &err);
    snprintf(msg, cap, "%s", err.msg);
    tu_rm_rf(dir);
    return st;
}

static void expect_refused(const unsigned char *buf, size_t len, hs_status want, const char *needle)
{
    hs_model *m = NULL;
    char msg[HS_ERROR_MSG_MAX];
    hs_status st = load_image(buf, len, &m, msg, sizeof msg);
    cr_expect_eq(st, want, "status %d (%s), want %d", st, msg, want);
    cr_expect_null(m);
    cr_expect_not_null(strstr(msg, needle), "message '%s' lacks '%s'", msg, needle);
    cr_expect_null(strchr(msg, '\n'), "message must be one line");
    hs_model_free(m);
}

static void refuse_with_kv(const char *file, const char *key, uint32_t type, const void *val,
                           size_t vlen, hs_status want, const char *needle)
{
    size_t len, n;
    unsigned char *buf = read_fam(file, &len), *b2 = with_kv(buf, len, key, type, val, vlen, &n);
    expect_refused(b2, n, want, needle);
    free(b2);
    free(buf);
}

Test(gguf_family, reads_a_sliding_window_refuses_experts_and_other_head_sizes)
{
    unsigned char v[4] = {128, 0, 0, 0};
    size_t len, n;
    unsigned char *buf = read_fam("tiny-qwen2.f32", &len);
    unsigned char *b2 = with_kv(buf, len, "qwen2.attention.sliding_window", HS_GGUF_UINT32, v, 4, &n);
    hs_model *m = NULL;
    char msg[HS_ERROR_MSG_MAX];
    cr_assert_eq(load_image(b2, n, &m, msg, sizeof msg), HS_OK, "%s", msg);
    const hs_model_config *c = hs_model_config_of(m);
    for (int l = 0; l < c->n_layer; l++) { /* every layer sees the last 128 keys */
        hs_visibility w = hs_model_layer_visibility(c, l);
        cr_expect(w.kind == HS_VIS_SLIDING && w.window == 128 && hs_model_layer_is_local(c, l));
    }
    hs_model_free(m);
    free(b2);
    free(buf);
    v[0] = 8;
    refuse_with_kv("tiny-llama.f32", "llama.expert_count", HS_GGUF_UINT32, v, 4, HS_E_UNSUPPORTED,
                   "llama.expert_count = 8: mixtures of experts are not supported");
    v[0] = 16;
    refuse_with_kv("tiny-llama.f32", "llama.attention.key_length", HS_GGUF_UINT32, v, 4, HS_E_UNSUPPORTED,
                   "key_length / value_length 16 / 8 differ from embedding_length / head_count = 8");
}

Test(gguf_family, refuses_rope_scaling_it_does_not_run_and_reads_linear)
{
    unsigned char s[12] = {4, 0, 0, 0, 0, 0, 0, 0, 'y', 'a', 'r', 'n'};
    refuse_with_kv("tiny-llama.f32", "llama.rope.scaling.type", HS_GGUF_STRING, s, 12, HS_E_UNSUPPORTED,
                   "llama.rope.scaling.type 'yarn' is not supported");
    float two = 2.0f;
    size_t len, n;
    unsigned char *buf = read_fam("tiny-llama.f32", &len);
    unsigned char *b2 = with_kv(buf, len, "llama.rope.scaling.factor", HS_GGUF_FLOAT32, &two, 4, &n);
    hs_model *m = NULL;
    char msg[HS_ERROR_MSG_MAX];
    cr_assert_eq(load_image(b2, n, &m, msg, sizeof msg), HS_OK, "%s", msg);
    cr_expect_eq(hs_model_config_of(m)->arch->rope_scaling, HS_ROPE_LINEAR); /* llama.cpp's default type */
    cr_expect_eq(hs_model_config_of(m)->arch->rope_factor, 2.0f);
    hs_model_free(m);
    free(b2);

    free(buf);

    /* rope_freqs.weight that Llama 3's formula does not give: one divisor in a band of 8s */
    buf = read_fam("tiny-llama3.f32", &len);
    hs_gguf *g = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_parse(buf, len, &g, &err), HS_OK, "%s", err.msg);
    size_t at = (size_t)(hs_gguf_find_tensor(g, "rope_freqs.weight")->data - buf);
    hs_gguf_free(g);
    float f;
    memcpy(&f, buf + at + 4 * 3, 4);
    cr_assert_eq(f, 8.0f);
    f = 2.0f;
    memcpy(buf + at + 4 * 3, &f, 4);
    expect_refused(buf, len, HS_E_UNSUPPORTED, "rope_freqs.weight does not follow Llama 3's rope scaling");
    f = 0.5f;
    memcpy(buf + at + 4 * 3, &f, 4);
    expect_refused(buf, len, HS_E_UNSUPPORTED, "rope_freqs.weight[3] = 0.5: only Llama 3's rope scaling");
    free(buf);
}

/* Same-length edits of one value: an unknown pre-tokenizer, a missing one, a tokenizer model
 * the family does not use, a value of the wrong type, a rotated part of a Llama head. */
Test(gguf_family, refuses_unknown_tokenizers_and_wrong_keys)
{
    size_t len;
    uint32_t type;
    unsigned char *buf = read_fam("tiny-qwen2.f32", &len);
    size_t at = value_at(buf, len, "tokenizer.ggml.pre", &type);
    cr_assert_eq(type, HS_GGUF_STRING);
    cr_assert_eq(memcmp(buf + at + 8, "qwen2", 5), 0);
    buf[at + 12] = '9';
    expect_refused(buf, len, HS_E_UNSUPPORTED, "tokenizer.ggml.pre 'qwen9' is not supported");
    buf[at + 12] = '2';
    memcpy(buf + at - 4 - 3, "prX", 3); /* the key's last letters */
    expect_refused(buf, len, HS_E_UNSUPPORTED, "tokenizer.ggml.pre is missing");
    memcpy(buf + at - 4 - 3, "pre", 3);
    at = value_at(buf, len, "tokenizer.ggml.model", &type);
    memcpy(buf + at + 8, "bert", 4);
    expect_refused(buf, len, HS_E_UNSUPPORTED, "tokenizer.ggml.model 'bert' is not supported for qwen2 (expected 'gpt2')");
    free(buf);

    buf = read_fam("tiny-llama.f32", &len);
    at = value_at(buf, len, "llama.rope.freq_base", &type);
    cr_assert_eq(type, HS_GGUF_FLOAT32);
    buf[at - 4] = HS_GGUF_UINT32;
    expect_refused(buf, len, HS_E_FORMAT, "key 'llama.rope.freq_base' has type UINT32, expected FLOAT32");
    buf[at - 4] = HS_GGUF_FLOAT32;
    at = value_at(buf, len, "llama.rope.dimension_count", &type);
    buf[at] = 4;
    expect_refused(buf, len, HS_E_UNSUPPORTED, "llama.rope.dimension_count = 4 differs from the head size 8");
    free(buf);
}

/* The fuzz seed (fixtures/gguf/make_family_seed.py, this folder's independent writer): Llama
 * 3's scaling rebuilt from its rope_freqs.weight (divisors 1, 8, 8, 8: wavelengths 6.3 below
 * old / 4 = 8, the others above old = 32; the band is empty, so any old context between 32
 * and 167 gives the same frequencies, and the one rebuilt is 167), and llama.cpp b4748's
 * llama-tokenize ids of a text (recorded: "Paris" has no two-piece split in the vocabulary,
 * so no merge makes it). */
Test(gguf_family, fuzz_seed_loads_and_tokenizes_as_llama_cpp)
{
    hs_model *m = load_fam("seed-tiny-llama");
    const hs_arch *a = hs_model_config_of(m)->arch;
    cr_expect_eq(a->rope_scaling, HS_ROPE_LLAMA3);
    cr_expect_eq(a->rope_factor, 8.0f);
    double inv[4];
    const double div[4] = {1, 8, 8, 8};
    hs_op_rope_freqs(a, inv);
    for (int k = 0; k < 4; k++)
        cr_expect(fabs(pow(500000.0, -k / 4.0) / inv[k] - div[k]) < 1e-9, "frequency %d", k);
    static const int32_t want[] = {1, 261, 272, 273, 274, 261, 276, 49, 299, 296,
                                   283, 277, 47, 299, 298, 297, 265, 290, 288};
    const char *text = "the cat sat on the mat. Paris, France";
    hs_encoding e = {0};
    hs_error err = {{0}};
    cr_assert_eq(hs_tokenizer_encode(hs_model_tokenizer(m), text, strlen(text), NULL, 0, &e, &err), HS_OK);
    cr_assert_eq(e.n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < e.n; i++)
        cr_expect_eq(e.ids[i], want[i], "token %zu", i);
    hs_encoding_free(&e);
    hs_model_free(m);
}
