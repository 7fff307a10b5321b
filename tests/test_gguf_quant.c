/* GGUF files whose matrices are stored in ggml's other block formats, quantised by ggml's own
 * quantizer (fixtures/gguf/ggml_quantize.c, fixtures/gguf/README.md):
 *   - tiny-llama-wide.mixed: each of its eight matrices in another format (IQ4_XS, Q4_1,
 *     Q5_0, Q5_1, IQ4_NL, Q3_K, Q2_K, Q5_K);
 *   - tiny-qwen2.q4_k_m_fallback: what llama-quantize's Q4_K_M gives a model whose rows are
 *     not a multiple of 256 (its Q4_K tensors fall back to Q5_0, its Q6_K ones to Q8_0), with
 *     one Q5_1 tensor (Q5_K's fallback).
 * The reference (fixtures/ref/make_quant_golden.py): the float64 forward of families.py on
 * the file's weights dequantised by fixtures/ref/quant_ref.py. headscope computes in float32
 * on the same dequantised weights, so the maps agree to float32 rounding, as the F32 files'
 * do with their goldens, whether the weight cache converts each layer once or in every pass. */
#include <cJSON.h>
#include <math.h>

#include "core/core.h"
#include "gguf_util.h"
#include "headscope/forward.h"
#include "model/quant.h"
#include "nn/ops.h"

#define FAMS "fixtures/gguf/families/"

/* Runs the file on the golden ids with a weight-memory budget (0: the default, every layer
 * multiplied in its stored type; HS_WEIGHT_MEMORY_ALL: every layer converted once; 1 byte:
 * each layer converted again in every pass, from the mapped blocks); the largest
 * differences of its maps and NLL from
 * fixtures/quant/<file>.{attn,nll}.npy must be within the bounds. */
static void check_file(const char *file, const char *ids_path, size_t budget, double max_attn,
                       double max_nll)
{
    char path[256];
    snprintf(path, sizeof path, FAMS "%s.gguf", file);
    hs_model *m = NULL;
    hs_error err = {{0}};
    hs_open_opts oo = {.weight_memory = budget};
    cr_assert_eq(hs_model_open2(path, &oo, &m, &err), HS_OK, "%s: %s", path, err.msg);
    const hs_model_config *c = hs_model_config_of(m);
    hs_npy ids = tu_npy(ids_path);
    int n = (int)ids.count;
    snprintf(path, sizeof path, "fixtures/quant/%s.attn.npy", file);
    hs_npy want = tu_npy(path);
    snprintf(path, sizeof path, "fixtures/quant/%s.nll.npy", file);
    hs_npy want_nll = tu_npy(path);
    hs_trace *trace = NULL;
    cr_assert_eq(hs_trace_new(m, n, &trace, &err), HS_OK);
    float *logits = malloc((size_t)n * (size_t)c->vocab_size * sizeof *logits);
    cr_assert_not_null(logits);
    hs_forward_opts o = {.on_attn = hs_trace_observe, .user = trace, .logits = logits};
    cr_assert_eq(hs_forward(m, ids.data, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);
    size_t count = (size_t)c->n_layer * (size_t)c->n_head * (size_t)n * (size_t)n;
    cr_assert_eq(want.count, count, "%s: %zu golden entries, %zu maps", file, want.count, count);
    double da = tu_max_abs_diff(trace->attn, want.data, count, NULL), dn = 0;
    for (int i = 0; i + 1 < n; i++) {
        double nll = tu_nll(logits + (size_t)i * (size_t)c->vocab_size, c->vocab_size,
                            ((const int32_t *)ids.data)[i + 1]);
        dn = fmax(dn, fabs(nll - (double)((const float *)want_nll.data)[i]));
    }
    cr_log_info("%s (budget %zu): maps max|d| %.2e, NLL max|d| %.2e", file, budget, da, dn);
    cr_expect_leq(da, max_attn, "%s: maps max|d| %g from the float64 reference", file, da);
    cr_expect_leq(dn, max_nll, "%s: NLL max|d| %g from the float64 reference", file, dn);
    free(logits);
    hs_trace_free(trace);
    hs_npy_free(&want);
    hs_npy_free(&want_nll);
    hs_npy_free(&ids);
    hs_model_free(m);
}

static const size_t budgets[3] = {0, HS_WEIGHT_MEMORY_ALL, 1};

/* The file's tensors of each ggml type counted. */
static void count_types(const char *file, const uint32_t *types, const int *counts, int n_types)
{
    char path[256];
    snprintf(path, sizeof path, FAMS "%s.gguf", file);
    expect_type_counts(path, types, counts, n_types);
}

Test(gguf_quant, mixed_formats_equal_the_reference_on_their_dequantised_weights)
{
    static const uint32_t t[] = {HS_GGML_IQ4_XS, HS_GGML_Q4_1, HS_GGML_Q5_0, HS_GGML_Q5_1,
                                 HS_GGML_IQ4_NL, HS_GGML_Q3_K, HS_GGML_Q2_K, HS_GGML_Q5_K};
    static const int n[] = {1, 1, 1, 1, 1, 1, 1, 1};
    count_types("tiny-llama-wide.mixed", t, n, 8);
    for (size_t k = 0; k < 3; k++)
        check_file("tiny-llama-wide.mixed", "fixtures/family-golden/tiny_llama_text.ids.npy",
                   budgets[k], 1e-5, 5e-5);
}

/* Issue 39: a Q4_K_M file with Q5_0 / Q5_1 rows (not a multiple of 256) opens and runs. */
Test(gguf_quant, q4_k_m_with_q5_0_and_q5_1_fallbacks)
{
    static const uint32_t t[] = {HS_GGML_Q5_0, HS_GGML_Q5_1, HS_GGML_Q8_0, HS_GGML_F32};
    static const int n[] = {11, 1, 3, 11};
    count_types("tiny-qwen2.q4_k_m_fallback", t, n, 4);
    for (size_t k = 0; k < 3; k++)
        check_file("tiny-qwen2.q4_k_m_fallback", "fixtures/family-golden/tiny_qwen2_text.ids.npy",
                   budgets[k], 1e-5, 5e-5);
}

/* Every block-quantised tensor of llama-quantize's, gguf-py's and ggml's quantizer's files,
 * decoded whole: the SHA-256 of its float32 values is that of quant_ref.py's
 * (fixtures/quant/tensor_digests.json), so the two decoders agree bit for bit on them. */
Test(gguf_quant, every_quantised_tensor_decodes_as_the_reference)
{
    size_t len = 0;
    char *json = tu_slurp("fixtures/quant/tensor_digests.json", &len);
    cJSON *root = cJSON_Parse(json);
    cr_assert_not_null(root);
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "files"), *f, *t;
    int n = 0;
    cJSON_ArrayForEach(f, files) {
        char path[256];
        snprintf(path, sizeof path, "fixtures/%s", f->string);
        hs_gguf *g = NULL;
        hs_error err = {{0}};
        cr_assert_eq(hs_gguf_open(path, &g, &err), HS_OK, "%s", err.msg);
        cJSON_ArrayForEach(t, f) {
            const hs_gguf_tensor *x = hs_gguf_find_tensor(g, t->string);
            cr_assert_not_null(x, "%s: no tensor %s", path, t->string);
            size_t count = 1, e = 0, b = 0;
            for (uint32_t d = 0; d < x->n_dims; d++)
                count *= (size_t)x->ne[d];
            cr_assert(hs_quant_block(x->type, &e, &b), "%s: %s", path, t->string);
            cr_expect_str_eq(hs_ggml_type_name(x->type),
                             cJSON_GetObjectItemCaseSensitive(t, "type")->valuestring);
            float *y = malloc(count * sizeof *y);
            cr_assert_not_null(y);
            hs_quant_decode(x->type, x->data, y, count);
            hs_sha256_ctx s;
            char hex[65];
            hs_sha256_init(&s);
            hs_sha256_update(&s, y, count * sizeof *y); /* a little-endian host, as the digests */
            hs_sha256_final(&s, hex);
            cr_expect_str_eq(hex, cJSON_GetObjectItemCaseSensitive(t, "sha256")->valuestring,
                             "%s: %s (%s) decodes differently", path, t->string,
                             hs_ggml_type_name(x->type));
            free(y);
            n++;
        }
        hs_gguf_free(g);
    }
    cr_expect_eq(n, 70, "%d tensors digested", n);
    cJSON_Delete(root);
    free(json);
}
