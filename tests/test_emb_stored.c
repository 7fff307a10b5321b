/* The token embeddings and the LM head kept in their stored type (src/model/emb_stored.c,
 * --weight-memory stored): the embedding lookup, the logits, the loss and every reader of
 * the two tables (gradient, DLA, ablation, the logits of chosen ids, the GGUF writer) must
 * give the bits of the same model with the tables converted to float32 at load.
 *
 * The reference is the converted model's own float32 path (the tables converted whole by
 * the weight builder, the logits by hs_op_gemm on them), which these tables bypass: a
 * model opened with HS_OPEN_STORED_WEIGHTS and a budget that keeps every layer converted
 * differs from the plain open in the two tables alone. A synthetic F16 table checks the
 * rows against hs_f16_to_f32 of their bytes, and the logits' product at a vocabulary wide
 * enough for the float32 path's own tiling, with a last row tile of one row and a last
 * column tile of one column, and the backward's product with it. */
#include "headscope/activations.h"
#include "headscope/forward.h"
#include "headscope/gguf.h"
#include "head_scores.h"
#include "testutil.h"
#include "analysis/analysis_internal.h"
#include "model/emb_stored.h"
#include "model/model_internal.h"
#include "nn/block.h"
#include "nn/ops.h"

static hs_model *open_as(const char *path, unsigned flags)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    hs_open_opts o = {.flags = flags, .weight_memory = HS_WEIGHT_MEMORY_ALL};
    cr_assert_eq(hs_model_open2(path, &o, &m, &err), HS_OK, "%s: %s", path, err.msg);
    return m;
}

/* Everything compared: logits and final hidden states of a pass, the loss, the ablation
 * sweep, gradient importance and DLA. */
typedef struct results {
    float *logits, *hidden;
    double loss, *delta, *grad, *dla;
    size_t n_logits, n_hidden, n_heads;
} results;

static results run_all(const hs_model *m, const int32_t *ids, int n, int lm)
{
    const hs_model_config *c = hs_model_config_of(m);
    hs_error err = {{0}};
    results r = {0};
    r.n_heads = (size_t)c->n_layer * (size_t)c->n_head;
    r.n_logits = (size_t)n * (size_t)c->vocab_size;
    r.n_hidden = (size_t)n * (size_t)c->d_model;
    r.logits = malloc(r.n_logits * sizeof *r.logits);
    r.hidden = malloc(r.n_hidden * sizeof *r.hidden);
    hs_forward_opts o = {.logits = r.logits, .hidden = r.hidden};
    cr_assert_eq(hs_forward(m, ids, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);
    if (lm && n >= 2)
        tu_head_scores(m, ids, n, &r.loss, &r.delta, &r.grad, &r.dla);
    return r;
}

static void results_free(results *r)
{
    free(r->logits);
    free(r->hidden);
    free(r->delta);
    free(r->grad);
    free(r->dla);
}

static void expect_same(const results *a, const results *b, const char *what, int n)
{
    cr_assert(!memcmp(a->hidden, b->hidden, a->n_hidden * sizeof *a->hidden),
              "%s n %d: hidden states differ", what, n);
    cr_assert(!memcmp(a->logits, b->logits, a->n_logits * sizeof *a->logits),
              "%s n %d: logits differ", what, n);
    cr_assert(a->loss == b->loss, "%s n %d: loss %.17g != %.17g", what, n, a->loss, b->loss);
    for (size_t k = 0; a->delta && k < a->n_heads; k++) {
        cr_assert(a->delta[k] == b->delta[k], "%s n %d: ablation of head %zu", what, n, k);
        cr_assert(a->grad[k] == b->grad[k], "%s n %d: gradient of head %zu", what, n, k);
        cr_assert(a->dla[k] == b->dla[k], "%s n %d: DLA of head %zu", what, n, k);
    }
}

/* Files whose embeddings are stored in another type than F32: Q8_0, Q6_K, IQ4_XS, F16 and
 * BF16, tied (GPT-2, BERT's MLM decoder, the tiny Llamas) and untied (an output.weight of
 * its own). n = 1 and 129: a last row tile of one row, which the float32 path multiplies
 * by another kernel (tiny vocabularies: the decoder converted for it). */
Test(emb_stored, stored_tables_give_the_converted_bits, .timeout = 240)
{
    static const struct {
        const char *path;
        int lm;
    } files[] = {
        {"fixtures/gguf/families/tiny-llama.q8_0.gguf", 1},
        {"fixtures/gguf/families/tiny-llama-wide.mixed.gguf", 1},
        {"fixtures/gguf/families/tiny-llama-wide.q4_k.gguf", 1},
        {"fixtures/gguf/families/tiny-qwen2.q4_k_m_fallback.gguf", 1},
        {"fixtures/gguf/families/tiny-qwen2.f16.gguf", 1},
        {"fixtures/family-models/tiny-llama", 1}, /* BF16, two shards */
        {"fixtures/trained-gpt2", 1},             /* F16, tied, 50257 tokens */
        {"fixtures/trained-bert", 0},             /* the MLM decoder tied to F16 embeddings */
    };
    static const int lens[] = {1, 2, 13, 129};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        hs_model *conv = open_as(files[f].path, 0);
        hs_model *st = open_as(files[f].path, HS_OPEN_STORED_WEIGHTS);
        cr_assert_not_null(conv->wte, "%s", files[f].path);
        cr_assert_null(st->wte, "%s: the embeddings kept in their stored type", files[f].path);
        cr_assert_null(st->decoder, "%s: the head kept in its stored type", files[f].path);
        cr_assert_eq(hs_model_param_count(st), hs_model_param_count(conv));
        const hs_model_config *c = hs_model_config_of(conv);
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
            int n = lens[k] < c->n_ctx ? lens[k] : c->n_ctx;
            int32_t *ids = malloc((size_t)n * sizeof *ids);
            for (int i = 0; i < n; i++)
                ids[i] = (int32_t)(((uint64_t)i * 7919 + 13) % (uint64_t)c->vocab_size);
            ids[0] = c->vocab_size - 1; /* the last row of the table */
            results a = run_all(conv, ids, n, files[f].lm && k < 3);
            results b = run_all(st, ids, n, files[f].lm && k < 3);
            expect_same(&a, &b, files[f].path, n);
            results_free(&a);
            results_free(&b);
            free(ids);
        }
        /* the logits of chosen ids (patching's logit difference) */
        int d = c->d_model, V = c->vocab_size;
        float *h = malloc((size_t)2 * (size_t)d * sizeof *h), z0[3], z1[3];
        for (int i = 0; i < 2 * d; i++)
            h[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
        const int32_t pick[3] = {0, V / 2, V - 1};
        hs_head_decode_ids(conv, h + d, 1, pick, 3, z0);
        hs_head_decode_ids(st, h + d, 1, pick, 3, z1);
        cr_assert(!memcmp(z0, z1, sizeof z0), "%s: logits of chosen ids differ", files[f].path);
        free(h);
        hs_model_free(conv);
        hs_model_free(st);
    }
}

/* One pass on every family folder stored in F16 or BF16 (Gemma 2's scaled embeddings and
 * final softcap, DistilBERT, Falcon, StarCoder, Phi-3, OLMo-2, DeepSeek's latent attention,
 * Qwen3's experts; T5's encoder and decoder): hidden states and logits at 1 and 9 tokens. */
Test(emb_stored, every_family_gives_the_converted_bits, .timeout = 120)
{
    static const char *dirs[] = {
        "fixtures/family-models/tiny-gemma2",     "fixtures/family-models/tiny-distilbert",
        "fixtures/family-models/tiny-mistral",    "fixtures/family-models/tiny-olmo2",
        "fixtures/family-models/tiny-phi3",       "fixtures/family-models/tiny-neox-seq",
        "fixtures/family-models/tiny-qwen3-moe-bf16", "fixtures/mqa-models/tiny-falcon-nd",
        "fixtures/mqa-models/tiny-bigcode",       "fixtures/mla-models/tiny-deepseek-v3",
        "fixtures/models/bert-bf16",              "fixtures/t5/models/t5-v1_1-tiny",
    };
    for (size_t f = 0; f < sizeof dirs / sizeof dirs[0]; f++) {
        hs_model *conv = open_as(dirs[f], 0), *st = open_as(dirs[f], HS_OPEN_STORED_WEIGHTS);
        cr_assert_null(st->wte, "%s: the embeddings kept in their stored type", dirs[f]);
        const hs_model_config *c = hs_model_config_of(conv);
        for (int n = 1; n <= 9; n += 8) {
            int32_t ids[9];
            for (int i = 0; i < n; i++)
                ids[i] = (int32_t)(((uint64_t)i * 7919 + 5) % (uint64_t)c->vocab_size);
            size_t nl = (size_t)n * (size_t)c->vocab_size, nh = (size_t)n * (size_t)c->d_model;
            float *l[2], *h[2];
            hs_model *ms[2] = {conv, st};
            for (int k = 0; k < 2; k++) {
                hs_error err = {{0}};
                l[k] = malloc(nl * sizeof *l[k]);
                h[k] = malloc(nh * sizeof *h[k]);
                hs_forward_opts o = {.logits = c->has_lm_head ? l[k] : NULL, .hidden = h[k]};
                hs_status rc = c->n_enc_layer > 0
                                   ? hs_forward_encdec(ms[k], ids, n, ids, n, &o, NULL, &err)
                                   : hs_forward(ms[k], ids, NULL, n, &o, NULL, &err);
                cr_assert_eq(rc, HS_OK, "%s: %s", dirs[f], err.msg);
            }
            cr_assert(!memcmp(h[0], h[1], nh * sizeof *h[0]), "%s n %d: hidden differ", dirs[f], n);
            cr_assert(!c->has_lm_head || !memcmp(l[0], l[1], nl * sizeof *l[0]),
                      "%s n %d: logits differ", dirs[f], n);
            for (int k = 0; k < 2; k++)
                free(l[k]), free(h[k]);
        }
        hs_model_free(conv);
        hs_model_free(st);
    }
}

/* The GGUF writer reads the tables whole: a stored model writes the converted model's
 * bytes. */
Test(emb_stored, convert_writes_the_same_file)
{
    const char *path = "fixtures/gguf/families/tiny-qwen2.f16.gguf";
    hs_model *conv = open_as(path, 0), *st = open_as(path, HS_OPEN_STORED_WEIGHTS);
    cr_assert_null(st->wte);
    hs_error err = {{0}};
    unsigned char *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    hs_gguf_write_options o = {.ftype = HS_GGUF_FTYPE_F32};
    cr_assert_eq(hs_gguf_encode(conv, &o, &a, &la, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_gguf_encode(st, &o, &b, &lb, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(la, lb);
    cr_assert(!memcmp(a, b, la), "the written files differ");
    free(a);
    free(b);
    hs_model_free(conv);
    hs_model_free(st);
}

/* ---- a synthetic table ------------------------------------------------------------- */

static uint64_t rng = 88172645463325252ull;
static uint16_t random_half(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    float v = (float)(rng >> 40) / 16777216.0f * 2.0f - 1.0f;
    return hs_f32_to_f16(v);
}

/* A model shell holding only a (V, d) F16 decoder tied to the embeddings, kept stored. */
static hs_model *shell(int V, int d, unsigned char **bytes)
{
    hs_model *m = calloc(1, sizeof *m);
    m->cfg.vocab_size = V;
    m->cfg.d_model = d;
    m->stored_gemm = 1;
    size_t n = (size_t)V * (size_t)d;
    *bytes = malloc(2 * n);
    for (size_t i = 0; i < n; i++) {
        uint16_t h = random_half();
        (*bytes)[2 * i] = (unsigned char)(h & 0xff), (*bytes)[2 * i + 1] = (unsigned char)(h >> 8);
    }
    return m;
}

static hs_tensor_view view_of(const unsigned char *bytes, int V, int d)
{
    hs_tensor_view t = {.name = "token_embd.weight", .dtype = HS_DT_F16, .ndim = 2,
                        .shape = {V, d}, .data = bytes, .nbytes = 2 * (size_t)V * (size_t)d};
    return t;
}

/* The stored rows of a (V, d) table against ref (hs_f16_to_f32 of its bytes): rows, and
 * the logits' product at rows 1, 2, 129 and 130 against hs_op_gemm on ref. */
static void expect_rows_and_logits(const hs_model *m, const float *ref, int V, int d,
                                   const char *what)
{
    float row[64];
    for (int id = 0; id < V; id += 4099) {
        hs_model_emb_row(m, id, row);
        cr_assert(!memcmp(row, ref + (size_t)id * d, sizeof row), "%s: embedding row %d", what, id);
    }
    hs_model_decoder_row(m, V - 1, 0, d, row);
    cr_assert(!memcmp(row, ref + (size_t)(V - 1) * d, sizeof row), "%s: decoder row", what);
    static const int rows_n[] = {1, 2, 129, 130};
    for (size_t k = 0; k < sizeof rows_n / sizeof rows_n[0]; k++) {
        int rows = rows_n[k];
        float *h = malloc((size_t)rows * d * sizeof *h);
        float *c0 = malloc((size_t)rows * V * sizeof *c0), *c1 = malloc((size_t)rows * V * sizeof *c1);
        for (int i = 0; i < rows * d; i++)
            h[i] = (float)((i * 7919) % 2003) / 1001.0f - 1.0f;
        for (size_t i = 0; i < (size_t)rows * V; i++)
            c0[i] = c1[i] = (float)(i % 5) * 0.25f; /* a bias added to */
        hs_op_gemm(1, rows, V, d, 0.5f, h, d, ref, d, 1.0f, c0, V);
        hs_model_decoder_gemm(m, h, rows, 0.5f, c1);
        size_t bad = 0;
        for (size_t i = 0; i < (size_t)rows * V; i++)
            bad += c0[i] != c1[i];
        cr_assert_eq(bad, 0, "%s: rows %d: %zu logits differ", what, rows, bad);
        /* the backward's product with the decoder: dh = 0.5 dlogits dec (the logits above
         * as dlogits), against hs_op_gemm's NN product on ref */
        float *d0 = malloc((size_t)rows * d * sizeof *d0), *d1 = malloc((size_t)rows * d * sizeof *d1);
        hs_error err = {{0}};
        hs_op_gemm(0, rows, d, V, 0.5f, c0, V, ref, d, 0.0f, d0, d);
        cr_assert_eq(hs_model_decoder_back(m, c0, rows, 0.5f, d1, &err), HS_OK, "%s", err.msg);
        bad = 0;
        for (size_t i = 0; i < (size_t)rows * d; i++)
            bad += d0[i] != d1[i];
        cr_assert_eq(bad, 0, "%s: rows %d: %zu of the backward's values differ", what, rows, bad);
        free(h), free(c0), free(c1), free(d0), free(d1);
    }
}

/* 33 column tiles of 512 and one of one column (V % 512 == 1): the rows, the logits and the
 * backward's product with the decoder from the stored bytes, then the whole table converted
 * (as composition asks for it) and the same from that copy. */
Test(emb_stored, wide_head_one_row_and_one_column)
{
    const int V = 33 * 512 + 1, d = 64;
    unsigned char *bytes;
    hs_error err = {{0}};
    hs_model *m = shell(V, d, &bytes);
    float *ref = malloc((size_t)V * (size_t)d * sizeof *ref);
    for (size_t i = 0; i < (size_t)V * (size_t)d; i++)
        ref[i] = hs_f16_to_f32((uint16_t)(bytes[2 * i] | bytes[2 * i + 1] << 8));
    hs_tensor_view t = view_of(bytes, V, d);
    cr_assert_eq(hs_emb_stored_add(m, HS_S_TOK_EMB, &t, "token_embd.weight", &err), HS_OK, "%s",
                 err.msg);
    hs_emb_stored_tie(m);
    free(bytes); /* the table keeps its own copy of a buffer it cannot map */
    expect_rows_and_logits(m, ref, V, d, "stored");
    const float *f32 = hs_model_wte_f32(m, &err);
    cr_assert_not_null(f32);
    cr_assert(!memcmp(f32, ref, (size_t)V * (size_t)d * sizeof *ref), "the whole table");
    cr_assert_eq(hs_model_decoder_f32(m, &err), f32, "a tied decoder is the embeddings");
    expect_rows_and_logits(m, ref, V, d, "converted");
    free(ref);
    hs_emb_stored_free(m->es);
    free(m);
}

/* A non-finite value in a stored table is refused at add time, named as the converted
 * path names it. */
Test(emb_stored, a_nan_in_a_stored_table_is_refused)
{
    const int V = 40, d = 32;
    unsigned char *bytes;
    hs_error err = {{0}};
    hs_model *m = shell(V, d, &bytes);
    bytes[2 * 77] = 0x00, bytes[2 * 77 + 1] = 0x7E; /* element 77: NaN */
    hs_tensor_view t = view_of(bytes, V, d);
    cr_assert_eq(hs_emb_stored_add(m, HS_S_TOK_EMB, &t, "model.embed_tokens.weight", &err),
                 HS_E_VALUE);
    cr_assert_str_eq(err.msg, "tensor 'model.embed_tokens.weight' holds a non-finite value (NaN) "
                     "at element 77");
    free(bytes);
    hs_emb_stored_free(m->es);
    free(m);
}
