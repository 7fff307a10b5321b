/* Products on weights in their stored type (src/core/qgemm.c, hs_gemm.b_fill in
 * src/core/gemm.c, the weight cache's hs_layer_get_linear): W made a block at a time from
 * its stored rows, never converted whole.
 *
 * References that do not come from the code under test: the float32 path itself (the same
 * matrix decoded by hs_quant_decode, hs_f16_to_f32 and hs_bf16_to_f32, each checked block
 * by block by hand and against quant_ref.py in test_quant.c and test_gguf_quant.c), which
 * the stored path must equal bit for bit; a float64 product of the decoded values; hand
 * sums of blocks whose values are known; and the float64 goldens of the block-format
 * fixtures (fixtures/quant, make_quant_golden.py). */
#include "core/qgemm.h"
#include "headscope/forward.h"
#include "headscope/gguf.h"
#include "headscope/importance.h"
#include "model/model_internal.h"
#include "model/quant.h"
#include "nn/ops.h"
#include "qmat_util.h"
#include "testutil.h"

/* Every type, every shape the tiling gives (one tile; rows in three tiles; K cut into chunks
 * that end inside a 256-element block; a column count not a multiple of the 16 rows decoded
 * at a time), with a bias and added onto y: bit for bit the float32 path's, and within
 * float32 rounding of the float64 product. */
Test(qgemm, every_type_equals_the_float32_path_bit_for_bit)
{
    const int in = 768, out = 70, ns[] = {1, 37, 300};
    float *b = malloc((size_t)out * sizeof *b);
    for (int j = 0; j < out; j++)
        b[j] = uniform(-1, 1);
    for (size_t t = 0; t < N_TYPES; t++) {
        const qtype *q = &TYPES[t];
        stored s;
        stored_random(&s, q, in, out);
        const float *w = s.w, *wq = s.wq;
        cr_assert_eq(hs_qmat_find(wq), &s.q);
        cr_assert_null(hs_qmat_find(w), "a float matrix is not taken for a stored one");
        for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
            int n = ns[c];
            size_t ny = (size_t)n * (size_t)out;
            float *x = random_floats((size_t)n * (size_t)in);
            float *y0 = malloc(ny * sizeof *y0), *y1 = malloc(ny * sizeof *y1);
            long fills = hs_qmat_fills();
            hs_op_linear(x, w, b, y0, n, in, out);
            hs_op_linear(x, wq, b, y1, n, in, out);
            cr_assert_gt(hs_qmat_fills(), fills, "%s: the stored path ran", hs_dtype_name(q->dt));
            cr_assert(!memcmp(y0, y1, ny * sizeof *y0), "%s, n = %d: not the float32 path's bits",
                      hs_dtype_name(q->dt), n);
            double worst = 0;
            for (int i = 0; i < n; i++)
                for (int j = 0; j < out; j++) {
                    double acc = b[j], mag = fabs(b[j]);
                    for (int k = 0; k < in; k++) {
                        double v = (double)x[(size_t)i * in + k] * w[(size_t)k * out + j];
                        acc += v, mag += fabs(v);
                    }
                    double e = fabs(y1[(size_t)i * out + j] - acc) / (mag > 0 ? mag : 1);
                    worst = e > worst ? e : worst;
                }
            cr_expect_leq(worst, 1e-5, "%s, n = %d: %g of sum |x w| from float64",
                          hs_dtype_name(q->dt), n, worst);
            memcpy(y1, y0, ny * sizeof *y0);
            hs_op_linear_add(x, w, b, y0, n, in, out);
            hs_op_linear_add(x, wq, b, y1, n, in, out);
            cr_assert(!memcmp(y0, y1, ny * sizeof *y0), "%s, n = %d: added: not the same bits",
                      hs_dtype_name(q->dt), n);
            free(x), free(y0), free(y1);
        }
        stored_free(&s);
        cr_assert_null(hs_qmat_find(wq), "unregistered");
    }
    free(b);
}

/* Small products, where OpenBLAS's kernels depend on the layout of b (SkylakeX: alpha 1,
 * beta 0, both untransposed goes to a "direct" kernel; other small shapes to small-matrix
 * kernels per layout): a 17-token pass through 64-wide layers, with and without a bias, a
 * product of 130 rows (a tile of 128 and one of 2), and 256 deep for every block size: still
 * the float32 path's bits. */
Test(qgemm, small_products_equal_the_float32_path_bit_for_bit)
{
    const int in = 256, outs[] = {96, 64}, ns[] = {17, 130, 2};
    float *b = malloc(96 * sizeof *b);
    for (int j = 0; j < 96; j++)
        b[j] = uniform(-1, 1);
    for (size_t t = 0; t < N_TYPES; t++)
        for (size_t o = 0; o < 2; o++) {
            const qtype *q = &TYPES[t];
            int out = outs[o];
            stored s;
            stored_random(&s, q, in, out);
            const float *w = s.w, *wq = s.wq;
            for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
                int n = ns[c];
                size_t ny = (size_t)n * (size_t)out;
                float *x = random_floats((size_t)n * (size_t)in);
                float *y0 = malloc(ny * sizeof *y0), *y1 = malloc(ny * sizeof *y1);
                for (int bias = 0; bias < 2; bias++) {
                    hs_op_linear(x, w, bias ? b : NULL, y0, n, in, out);
                    hs_op_linear(x, wq, bias ? b : NULL, y1, n, in, out);
                    cr_assert(!memcmp(y0, y1, ny * sizeof *y0),
                              "%s, %d x %d x %d%s: not the float32 path's bits",
                              hs_dtype_name(q->dt), n, out, in, bias ? ", bias" : "");
                }
                free(x), free(y0), free(y1);
            }
            stored_free(&s);
        }
    free(b);
}

/* Hand sums: x all ones, so y_j is the sum of column j. Q8_0, d = 0.5 (f16 0x3800), q_i = i
 * - 16 on 32 elements: 0.5 (sum of -16..15) = -8. Q4_0, d = 0.25 (0x3400), every nibble 9
 * (q - 8 = 1): 32 x 0.25 = 8. Q4_1, d = 1, m = -2 (0xC000), nibbles 3: 32 (3 - 2) = 32.
 * F16: 0.5, 1.5, -2 repeated (0x3800, 0x3E00, 0xC000) over 33 elements: 11 x 0 = 0, then 32
 * elements of column 2 at 0.25 (0x3400): 8. */
Test(qgemm, hand_sums)
{
    unsigned char q8[34], q4[18], q41[20], f16[2 * 33 * 2];
    q8[0] = 0x00, q8[1] = 0x38;
    for (int i = 0; i < 32; i++)
        q8[2 + i] = (unsigned char)(int8_t)(i - 16);
    q4[0] = 0x00, q4[1] = 0x34;
    memset(q4 + 2, 0x99, 16);
    q41[0] = 0x00, q41[1] = 0x3C, q41[2] = 0x00, q41[3] = 0xC0;
    memset(q41 + 4, 0x33, 16);
    static const uint16_t three[3] = {0x3800, 0x3E00, 0xC000};
    for (int i = 0; i < 33; i++) {
        f16[2 * i] = 0, f16[2 * i + 1] = (unsigned char)(three[i % 3] >> 8);
        f16[66 + 2 * i] = 0x00, f16[66 + 2 * i + 1] = 0x34;
    }
    struct {
        hs_dtype dt;
        const unsigned char *p;
        int in, out;
        double want[2];
    } cases[] = {{HS_DT_Q8_0, q8, 32, 1, {-8}},
                 {HS_DT_Q4_0, q4, 32, 1, {8}},
                 {HS_DT_Q4_1, q41, 32, 1, {32}},
                 {HS_DT_F16, f16, 33, 2, {0, 8.25}}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        qtype q = {cases[c].dt, 0, {-1, -1}};
        size_t rb = cases[c].dt == HS_DT_F16 ? 66 : cases[c].dt == HS_DT_Q8_0 ? 34
                    : cases[c].dt == HS_DT_Q4_0 ? 18 : 20;
        stored s;
        stored_init(&s, &q, cases[c].p, rb, cases[c].in, cases[c].out);
        float x[33], y[2];
        for (int i = 0; i < 33; i++)
            x[i] = 1;
        hs_op_linear(x, (const float *)(const void *)&s.q, NULL, y, 1, cases[c].in, cases[c].out);
        for (int j = 0; j < cases[c].out; j++)
            cr_assert_eq(y[j], cases[c].want[j], "%s column %d: %g, want %g",
                         hs_dtype_name(cases[c].dt), j, y[j], cases[c].want[j]);
        stored_free(&s);
    }
}

/* The fast F16 decoder of hs_tensor_decode gives hs_f16_to_f32's bits on all 65536 values. */
Test(qgemm, f16_decoder_is_exact_on_every_value)
{
    unsigned char *p = malloc(2 * 65536);
    float *v = malloc(65536 * sizeof *v);
    for (int h = 0; h < 65536; h++)
        p[2 * h] = (unsigned char)h, p[2 * h + 1] = (unsigned char)(h >> 8);
    hs_tensor_view t = {.dtype = HS_DT_F16, .ndim = 1, .shape = {65536}, .data = p, .nbytes = 131072};
    hs_tensor_decode(&t, 0, v, 65536);
    for (int h = 0; h < 65536; h++) {
        float want = hs_f16_to_f32((uint16_t)h);
        cr_assert(!memcmp(&v[h], &want, 4), "f16 0x%04x: %a, want %a", h, v[h], want);
    }
    free(p), free(v);
}

/* ---- models opened to use their stored types ------------------------------------------ */

static hs_model *open_budget(const char *path, size_t budget)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    hs_open_opts o = {.weight_memory = budget};
    cr_assert_eq(hs_model_open2(path, &o, &m, &err), HS_OK, "%s: %s", path, err.msg);
    return m;
}

/* maps and logits of one pass on n ids */
static void run_pass(const hs_model *m, const int32_t *ids, int n, float **maps, float **logits)
{
    const hs_model_config *c = hs_model_config_of(m);
    hs_error err = {{0}};
    hs_trace *t = NULL;
    cr_assert_eq(hs_trace_new(m, n, &t, &err), HS_OK);
    *logits = malloc((size_t)n * (size_t)c->vocab_size * sizeof **logits);
    hs_forward_opts o = {.on_attn = hs_trace_observe, .user = t, .logits = *logits};
    cr_assert_eq(hs_forward(m, ids, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);
    size_t nm = (size_t)c->n_layer * (size_t)c->n_head * (size_t)n * (size_t)n;
    *maps = malloc(nm * sizeof **maps);
    memcpy(*maps, t->attn, nm * sizeof **maps);
    hs_trace_free(t);
}

/* One pass of n tokens through a model opened with its layers converted (conv) and stored
 * (st): the stored path ran, converted nothing, and gave the same maps and logits. */
static void same_pass(hs_model *conv, hs_model *st, const char *file, int n)
{
    const hs_model_config *c = hs_model_config_of(conv);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)(((uint64_t)i * 7919 + 13) % (uint64_t)c->vocab_size);
    hs_wcache_stats s0, s1;
    hs_wcache_stats_of(st, &s0);
    long fills = hs_qmat_fills();
    float *m0, *l0, *m1, *l1;
    run_pass(conv, ids, n, &m0, &l0);
    run_pass(st, ids, n, &m1, &l1);
    hs_wcache_stats_of(st, &s1);
    cr_assert_gt(hs_qmat_fills(), fills, "%s: the stored path ran", file);
    cr_assert_eq(s1.conversions, s0.conversions, "%s: a pass converted a layer", file);
    cr_assert_eq(s1.resident, 0, "%s: no float32 layer kept", file);
    size_t nm = (size_t)c->n_layer * (size_t)c->n_head * (size_t)n * (size_t)n;
    cr_assert(!memcmp(m0, m1, nm * sizeof *m0), "%s, n = %d: maps differ", file, n);
    cr_assert(!memcmp(l0, l1, (size_t)n * (size_t)c->vocab_size * sizeof *l0),
              "%s, n = %d: logits differ", file, n);
    free(m0), free(l0), free(m1), free(l1), free(ids);
}

/* The fixtures whose layers are all of a type with a one-row kernel (src/model/quant_rows.c):
 * Q8_0, F16 (tiny-pythia's too) and BF16 (the tiny-llama folder's). */
static int has_row_kernel(const char *file)
{
    return strstr(file, ".q8_0.") || strstr(file, ".f16.") ||
           !strcmp(file, "fixtures/family-models/tiny-pythia") ||
           !strcmp(file, "fixtures/family-models/tiny-llama");
}

/* Every kind of stored layer the fixtures have (ggml's twelve block formats among them, F16,
 * BF16 in two shards, a GPT-NeoX QKV stored by head, Q, K and V apart, Q4_K_M's fallbacks):
 * with every layer used in its stored type, maps and logits are the converted layers'
 * bits; the pass converts nothing and keeps no float32 layer.; 150 tokens (tiles, merged rows, K chunks) and
 * one (src/nn/gemv.c's rows; Q8_0's and F16's by their own kernels, src/model/quant_rows.c,
 * where the CPU has them). */
Test(qgemm, stored_layers_give_the_converted_layers_bits, .timeout = 120)
{
    static const char *files[] = {
        "fixtures/gguf/families/tiny-llama-wide.mixed.gguf",
        "fixtures/gguf/families/tiny-qwen2.q4_k_m_fallback.gguf",
        "fixtures/gguf/families/tiny-llama-wide.q4_0.gguf",
        "fixtures/gguf/families/tiny-llama-wide.q4_k.gguf",
        "fixtures/gguf/families/tiny-llama-wide.q6_k.gguf",
        "fixtures/gguf/families/tiny-llama.q8_0.gguf",
        "fixtures/gguf/families/tiny-qwen2.f16.gguf",
        "fixtures/family-models/tiny-pythia",
        "fixtures/family-models/tiny-llama",
    };
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        hs_model *conv = open_budget(files[f], HS_WEIGHT_MEMORY_ALL);
        hs_model *st = open_budget(files[f], HS_WEIGHT_MEMORY_STORED);
        int n_ctx = hs_model_config_of(conv)->n_ctx;
        same_pass(conv, st, files[f], 150 < n_ctx ? 150 : n_ctx);
        long kernel = hs_gemv_kernel_calls();
        same_pass(conv, st, files[f], 1);
        if (hs_qrows_isa() > 0 && has_row_kernel(files[f]))
            cr_assert_gt(hs_gemv_kernel_calls(), kernel, "%s: the type's kernel ran", files[f]);
        hs_model_free(conv);
        hs_model_free(st);
    }
}

/* The default (no budget, no HEADSCOPE_WEIGHT_MEMORY): a checkpoint whose layer matrices
 * can be used in their stored type is opened as `stored` (no layer converted at load or in a
 * pass, the converted layers' bits); GPT-2's Conv1D matrices, stored (in, out) as F16,
 * cannot, and are converted once at load as before; a budget in the environment is kept. */
Test(qgemm, the_default_multiplies_the_layers_in_their_stored_type)
{
    unsetenv("HEADSCOPE_WEIGHT_MEMORY");
    static const char *files[] = {"fixtures/gguf/families/tiny-llama.q8_0.gguf",
                                  "fixtures/family-models/tiny-llama"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        hs_model *conv = open_budget(files[f], HS_WEIGHT_MEMORY_ALL);
        hs_model *def = open_budget(files[f], 0);
        hs_wcache_stats s;
        hs_wcache_stats_of(def, &s);
        cr_assert(hs_model_stored_weights(def), "%s: stored by default", files[f]);
        cr_assert_eq(hs_model_weight_memory(def), 1, "%s", files[f]);
        cr_assert_eq(s.conversions, 0, "%s: converted at load", files[f]);
        same_pass(conv, def, files[f], 40);
        hs_model_free(conv);
        hs_model_free(def);
    }
    hs_model *gpt2 = open_budget("fixtures/trained-gpt2", 0);
    hs_wcache_stats s;
    hs_wcache_stats_of(gpt2, &s);
    cr_assert(!hs_model_stored_weights(gpt2), "Conv1D F16 layers are converted");
    cr_assert(s.need > 0 && s.kept == s.need && !s.streams, "converted once, at load");
    hs_model_free(gpt2);
    setenv("HEADSCOPE_WEIGHT_MEMORY", "all", 1);
    hs_model *env = open_budget(files[0], 0);
    unsetenv("HEADSCOPE_WEIGHT_MEMORY");
    hs_wcache_stats_of(env, &s);
    cr_assert(!hs_model_stored_weights(env), "the environment's budget converts");
    cr_assert(s.need > 0 && s.kept == s.need, "every layer converted at load");
    hs_model_free(env);
}

/* The block-format fixtures against their float64 goldens (test_gguf_quant.c's bounds),
 * every layer used in its stored type. */
Test(qgemm, block_formats_within_the_golden_bounds)
{
    static const struct {
        const char *file, *ids;
    } cases[] = {
        {"tiny-llama-wide.mixed", "fixtures/family-golden/tiny_llama_text.ids.npy"},
        {"tiny-qwen2.q4_k_m_fallback", "fixtures/family-golden/tiny_qwen2_text.ids.npy"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char path[256];
        snprintf(path, sizeof path, "fixtures/gguf/families/%s.gguf", cases[k].file);
        hs_model *m = open_budget(path, HS_WEIGHT_MEMORY_STORED);
        const hs_model_config *c = hs_model_config_of(m);
        hs_npy ids = tu_npy(cases[k].ids);
        snprintf(path, sizeof path, "fixtures/quant/%s.attn.npy", cases[k].file);
        hs_npy want = tu_npy(path);
        snprintf(path, sizeof path, "fixtures/quant/%s.nll.npy", cases[k].file);
        hs_npy want_nll = tu_npy(path);
        int n = (int)ids.count;
        float *maps, *logits;
        run_pass(m, ids.data, n, &maps, &logits);
        size_t count = (size_t)c->n_layer * (size_t)c->n_head * (size_t)n * (size_t)n;
        cr_assert_eq(want.count, count);
        double da = tu_max_abs_diff(maps, want.data, count, NULL), dn = 0;
        for (int i = 0; i + 1 < n; i++) {
            double nll = tu_nll(logits + (size_t)i * (size_t)c->vocab_size, c->vocab_size,
                                ((const int32_t *)ids.data)[i + 1]);
            dn = fmax(dn, fabs(nll - (double)((const float *)want_nll.data)[i]));
        }
        cr_expect_leq(da, 1e-5, "%s: maps max|d| %g", cases[k].file, da);
        cr_expect_leq(dn, 5e-5, "%s: NLL max|d| %g", cases[k].file, dn);
        free(maps), free(logits);
        hs_npy_free(&ids), hs_npy_free(&want), hs_npy_free(&want_nll);
        hs_model_free(m);
    }
}

/* The backward pass and the ablation sweep on a model whose layers are used in their stored
 * types: the forward multiplies from the stored bytes, the backward's products with Wᵀ decode
 * Wᵀ's blocks from the stored rows (hs_op_linear_back); the same numbers as with every layer
 * converted, at 2 tokens (rows of one), 24 and 128 (a full row tile). */
Test(qgemm, importance_is_the_same_with_stored_layers)
{
    const char *path = "fixtures/gguf/families/tiny-llama-wide.mixed.gguf";
    hs_model *ms[2] = {open_budget(path, HS_WEIGHT_MEMORY_ALL),
                       open_budget(path, HS_WEIGHT_MEMORY_STORED)};
    const hs_model_config *c = hs_model_config_of(ms[0]);
    const int sizes[3] = {2, 24, 128};
    int32_t ids[128];
    for (int i = 0; i < 128; i++)
        ids[i] = (int32_t)((i * 37 + 5) % c->vocab_size);
    size_t H = (size_t)c->n_layer * (size_t)c->n_head;
    for (int z = 0; z < 3; z++) {
        double loss[2], *delta[2], *grad[2];
        for (int k = 0; k < 2; k++) {
            hs_error err = {{0}};
            hs_loss_input in = {.ids = ids, .n = sizes[z], .kind = HS_LOSS_LM};
            hs_loss_eval *e = NULL;
            cr_assert_eq(hs_loss_eval_new(ms[k], &in, &e, &err), HS_OK, "%s", err.msg);
            cr_assert_eq(hs_loss_eval_run(e, NULL, &loss[k], &err), HS_OK, "%s", err.msg);
            delta[k] = malloc(H * sizeof **delta);
            grad[k] = malloc(H * sizeof **grad);
            cr_assert_eq(hs_ablation_sweep(e, loss[k], NULL, delta[k], NULL, NULL, &err), HS_OK);
            hs_loss_eval_free(e);
            cr_assert_eq(hs_gradient_importance(ms[k], &in, grad[k], NULL, &err), HS_OK, "%s",
                         err.msg);
        }
        cr_assert(loss[0] == loss[1], "n %d: loss %.17g != %.17g", sizes[z], loss[0], loss[1]);
        for (size_t h = 0; h < H; h++) {
            cr_assert(delta[0][h] == delta[1][h], "n %d: ablation of head %zu", sizes[z], h);
            cr_assert(grad[0][h] == grad[1][h], "n %d: gradient of head %zu", sizes[z], h);
        }
        for (int k = 0; k < 2; k++)
            free(delta[k]), free(grad[k]);
    }
    for (int k = 0; k < 2; k++)
        hs_model_free(ms[k]);
}

Test(qgemm, stored_is_a_weight_memory_value)
{
    size_t b = 0;
    cr_assert_eq(hs_weight_memory_parse("stored", &b), 0);
    cr_assert_eq(b, HS_WEIGHT_MEMORY_STORED);
    cr_assert_eq(hs_weight_memory_parse("stored1", &b), -1);
    hs_model *m = open_budget("fixtures/gguf/families/tiny-llama.q8_0.gguf", HS_WEIGHT_MEMORY_STORED);
    hs_wcache_stats s;
    hs_wcache_stats_of(m, &s);
    cr_assert(s.streams && s.kept == 0, "stored keeps no layer converted");
    hs_model_free(m);
}

/* A NaN in a layer used in its stored type is refused at open, as the conversion refuses it:
 * the same message, naming the tensor and the element as the file stores it. `at` is the
 * byte of `tensor` whose f16 scale is set to a NaN. */
static void expect_nan_refused(const char *tensor, size_t at, const char *needle)
{
    const char *src = "fixtures/gguf/families/tiny-llama.q8_0.gguf";
    FILE *f = fopen(src, "rb");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *img = malloc((size_t)len);
    cr_assert_eq(fread(img, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    hs_gguf *g = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_parse(img, (size_t)len, &g, &err), HS_OK, "%s", err.msg);
    const hs_gguf_tensor *t = hs_gguf_find_tensor(g, tensor);
    cr_assert(t && t->type == HS_GGML_Q8_0);
    at += (size_t)(hs_gguf_data_offset(g) + t->offset);
    hs_gguf_free(g);
    img[at] = 0x00, img[at + 1] = 0x7E;
    char path[] = "/tmp/hs-qgemm-nan-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, img, (size_t)len), len);
    close(fd);
    free(img);
    const size_t budgets[3] = {HS_WEIGHT_MEMORY_STORED, HS_WEIGHT_MEMORY_ALL, 0};
    char msg[3][sizeof err.msg];
    for (int k = 0; k < 3; k++) {
        hs_model *m = NULL;
        hs_open_opts o = {.weight_memory = budgets[k]};
        memset(&err, 0, sizeof err);
        cr_assert_eq(hs_model_open2(path, &o, &m, &err), HS_E_VALUE, "budget %d", k);
        cr_assert_not_null(strstr(err.msg, needle), "%s", err.msg);
        cr_assert_null(m);
        memcpy(msg[k], err.msg, sizeof msg[k]);
    }
    cr_assert_str_eq(msg[0], msg[1]);
    cr_assert_str_eq(msg[0], msg[2]);
    unlink(path);
}

/* Block 1's scale of a Q8_0 tensor: elements 32..63. */
Test(qgemm, a_nan_in_a_stored_layer_is_refused_at_open)
{
    expect_nan_refused("blk.1.ffn_down.weight", 34, "tensor 'layers.1.mlp.down_proj.weight' "
                       "holds a non-finite value (NaN) at element 32");
}

/* llama.cpp's files keep Llama's Q rows in rope-pair order and the readers take each row
 * from its place: the element is the file's. Stored row 1 (d_model 64: two blocks a row) is
 * the Hugging Face row d_head / 2 = 4; its second block starts at element 64 + 32 = 96 (the
 * Hugging Face order would say 4 * 64 + 32 = 288). */
Test(qgemm, a_nan_in_a_permuted_row_names_the_files_element)
{
    expect_nan_refused("blk.1.attn_q.weight", 3 * 34, "tensor 'layers.1.self_attn.q_proj.weight' "
                       "holds a non-finite value (NaN) at element 96");
}

/* The load's look at the stored bytes (hs_tensor_surely_finite): every type's rows of finite
 * scales (F16 / BF16: values) are cleared, and decode to finite values; an infinite scale
 * (value) at each place a block keeps one is not cleared, and that row decodes to a
 * non-finite value, while the rows around it are still cleared. */
Test(qgemm, the_stored_bytes_clear_only_finite_rows)
{
    const int in = 512, out = 3;
    float *v = malloc((size_t)in * sizeof *v);
    cr_assert_not_null(v);
    for (size_t i = 0; i < N_TYPES; i++) {
        const qtype *q = &TYPES[i];
        size_t row_bytes, elems = 1, bytes = 2;
        hs_quant_block(q->ggml, &elems, &bytes);
        unsigned char *p = random_rows(q, in, out, &row_bytes);
        hs_tensor_view t = {.name = "w", .dtype = q->dt, .ndim = 2, .shape = {out, in},
                            .data = p, .nbytes = row_bytes * (size_t)out};
        for (int r = 0; r < out; r++) {
            cr_assert(hs_tensor_surely_finite(&t, (size_t)r * (size_t)in, (size_t)in), "%s row %d",
                      hs_dtype_name(q->dt), r);
            hs_tensor_decode(&t, (size_t)r * (size_t)in, v, (size_t)in);
            cr_assert_eq(hs_op_first_nonfinite(v, (size_t)in), (size_t)-1);
        }
        int halves = q->dt == HS_DT_F16 || q->dt == HS_DT_BF16;
        for (int s = 0; s < (halves ? 1 : 2); s++) {
            if (!halves && q->scale_at[s] < 0)
                continue;
            /* row 1, its second block (F16 / BF16: element 37) */
            size_t at = row_bytes + (halves ? 2 * 37 : bytes + (size_t)q->scale_at[s]);
            unsigned char keep[2] = {p[at], p[at + 1]};
            p[at] = 0x00, p[at + 1] = q->dt == HS_DT_BF16 ? 0x7F : 0x7C; /* +infinity */
            if (q->dt == HS_DT_BF16)
                p[at] = 0x80;
            cr_assert_not(hs_tensor_surely_finite(&t, (size_t)in, (size_t)in), "%s scale %d",
                          hs_dtype_name(q->dt), s);
            hs_tensor_decode(&t, (size_t)in, v, (size_t)in);
            cr_assert_neq(hs_op_first_nonfinite(v, (size_t)in), (size_t)-1, "%s",
                          hs_dtype_name(q->dt));
            cr_assert(hs_tensor_surely_finite(&t, 0, (size_t)in));
            cr_assert(hs_tensor_surely_finite(&t, 2 * (size_t)in, (size_t)in));
            p[at] = keep[0], p[at + 1] = keep[1];
        }
        free(p);
    }
    free(v);
}

/* Every one of the 65,536 BF16 values, decoded by the tensor decoder's vectorised loop at
 * every start (an odd offset and a tail): float32 with the value's 16 bits on top and zeros
 * below, which is the format's definition (bfloat16 is float32's top half). */
Test(qgemm, every_bf16_value_decodes_to_its_definition)
{
    enum { N = 65536 };
    unsigned char *p = malloc(2 * N);
    float *out = malloc((N + 1) * sizeof *out);
    for (uint32_t h = 0; h < N; h++)
        p[2 * h] = (unsigned char)(h & 0xFF), p[2 * h + 1] = (unsigned char)(h >> 8);
    hs_tensor_view t = {.name = "w", .dtype = HS_DT_BF16, .ndim = 1, .shape = {N},
                        .data = p, .nbytes = 2 * N};
    for (size_t from = 0; from < 2; from++) {
        hs_tensor_decode(&t, from, out, N - from);
        int bad = 0;
        for (uint32_t h = (uint32_t)from; h < N; h++) {
            uint32_t bits;
            memcpy(&bits, &out[h - from], sizeof bits);
            bad += bits != h << 16;
        }
        cr_assert_eq(bad, 0, "from %zu: %d values decode wrong", from, bad);
    }
    free(p), free(out);
}
