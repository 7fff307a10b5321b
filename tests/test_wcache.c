/* The weight cache (src/model/wcache.c): layer matrices of F16, BF16 and Q8_0 checkpoints
 * kept in their stored type and converted on demand within a budget.
 *
 * References that do not come from the code under test: float32 copies of exactly the
 * numbers each checkpoint stores, written by fixtures/wcache/make_fixtures.py (numpy's exact
 * widening of F16/BF16, llama.cpp's gguf-py for Q8_0), and the layer sizes computed by hand
 * from the configs. Every result is compared bit for bit: converting a layer again in every
 * pass, or converting it once, must not change a single float. */
#include <pthread.h>

#include "headscope/activations.h"
#include "headscope/composition.h"
#include "headscope/forward.h"
#include "headscope/gguf.h"
#include "head_scores.h"
#include "testutil.h"
#include "model/model_internal.h"
#include "analysis/analysis_internal.h"

#define WC "fixtures/wcache/"

/* A checkpoint stored in another type than F32 and the float32 copy of its numbers. */
typedef struct pair {
    const char *stored, *f32;
    int vocab;
} pair;

static const pair PAIRS[] = {
    {"fixtures/models/gpt2-f16", WC "gpt2-f16-f32", 1000},
    {"fixtures/models/gpt2-bf16", WC "gpt2-bf16-f32", 1000},
    {WC "gpt2-q8_0.gguf", WC "gpt2-q8_0-f32.gguf", 1000},
    {"fixtures/family-models/tiny-llama", WC "tiny-llama-f32", 2393}, /* BF16, GQA, 2 shards */
};

#define N_TOK 12

static hs_model *open_with(const char *path, size_t budget)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    hs_open_opts o = {.weight_memory = budget};
    cr_assert_eq(hs_model_open2(path, &o, &m, &err), HS_OK, "%s: %s", path, err.msg);
    return m;
}

static void make_ids(int32_t *ids, int vocab)
{
    uint64_t s = 12345;
    for (int i = 0; i < N_TOK; i++)
        ids[i] = (int32_t)hs_rand_below(&s, (uint64_t)vocab);
}

/* Everything a model computes that the tests compare. */
typedef struct results {
    float *maps, *logits;
    double loss;
    double *delta;         /* ablation sweep: every head, batched passes */
    double *grad;          /* gradient importance, raw */
    double *dla;           /* direct logit attribution per head */
    size_t n_maps, n_logits, n_heads;
} results;

static results run_all(const hs_model *m, const int32_t *ids)
{
    const hs_model_config *c = hs_model_config_of(m);
    hs_error err = {{0}};
    results r = {0};
    r.n_heads = (size_t)c->n_layer * (size_t)c->n_head;
    hs_trace *t = NULL;
    cr_assert_eq(hs_trace_new(m, N_TOK, &t, &err), HS_OK);
    r.n_logits = (size_t)N_TOK * (size_t)c->vocab_size;
    r.logits = malloc(r.n_logits * sizeof *r.logits);
    hs_forward_opts o = {.on_attn = hs_trace_observe, .user = t, .logits = r.logits};
    cr_assert_eq(hs_forward(m, ids, NULL, N_TOK, &o, NULL, &err), HS_OK, "%s", err.msg);
    r.n_maps = r.n_heads * N_TOK * N_TOK;
    r.maps = malloc(r.n_maps * sizeof *r.maps);
    memcpy(r.maps, t->attn, r.n_maps * sizeof *r.maps);
    hs_trace_free(t);
    tu_head_scores(m, ids, N_TOK, &r.loss, &r.delta, &r.grad, &r.dla);
    return r;
}

static void results_free(results *r)
{
    free(r->maps);
    free(r->logits);
    free(r->delta);
    free(r->grad);
    free(r->dla);
}

static void expect_same(const results *a, const results *b, const char *what)
{
    cr_assert_eq(a->n_maps, b->n_maps);
    cr_assert(!memcmp(a->maps, b->maps, a->n_maps * sizeof *a->maps), "%s: maps differ", what);
    cr_assert(!memcmp(a->logits, b->logits, a->n_logits * sizeof *a->logits), "%s: logits differ",
              what);
    cr_assert(a->loss == b->loss, "%s: loss %.17g != %.17g", what, a->loss, b->loss);
    for (size_t k = 0; k < a->n_heads; k++) {
        cr_assert(a->delta[k] == b->delta[k], "%s: ablation of head %zu: %.17g != %.17g", what, k,
                  a->delta[k], b->delta[k]);
        cr_assert(a->grad[k] == b->grad[k], "%s: gradient of head %zu: %.17g != %.17g", what, k,
                  a->grad[k], b->grad[k]);
        cr_assert(a->dla[k] == b->dla[k], "%s: DLA of head %zu: %.17g != %.17g", what, k,
                  a->dla[k], b->dla[k]);
    }
}

/* Converted once at load, converted again in every pass, and the float32 checkpoint of the
 * same numbers: bit for bit the same maps, logits, loss, ablation sweep, gradient importance
 * and DLA. */
Test(wcache, every_budget_computes_what_the_f32_checkpoint_computes)
{
    for (size_t p = 0; p < sizeof PAIRS / sizeof PAIRS[0]; p++) {
        int32_t ids[N_TOK];
        make_ids(ids, PAIRS[p].vocab);
        hs_model *all = open_with(PAIRS[p].stored, HS_WEIGHT_MEMORY_ALL);
        hs_model *tiny = open_with(PAIRS[p].stored, 1);
        hs_model *f32 = open_with(PAIRS[p].f32, HS_WEIGHT_MEMORY_ALL);
        hs_wcache_stats s;
        hs_wcache_stats_of(tiny, &s);
        cr_assert(s.streams && s.kept == 0, "%s: a 1-byte budget keeps nothing", PAIRS[p].stored);
        hs_wcache_stats_of(all, &s);
        cr_assert(!s.streams && s.kept == s.need && s.need > 0, "%s: no bound keeps every layer",
                  PAIRS[p].stored);
        hs_wcache_stats_of(f32, &s);
        cr_assert_eq(s.need, 0, "%s: a float32 checkpoint has nothing to convert", PAIRS[p].f32);
        results ra = run_all(all, ids), rt = run_all(tiny, ids), rf = run_all(f32, ids);
        char what[256];
        snprintf(what, sizeof what, "%s, 1-byte budget vs none", PAIRS[p].stored);
        expect_same(&rt, &ra, what);
        snprintf(what, sizeof what, "%s vs %s", PAIRS[p].stored, PAIRS[p].f32);
        expect_same(&ra, &rf, what);
        results_free(&ra);
        results_free(&rt);
        results_free(&rf);
        hs_model_free(all);
        hs_model_free(tiny);
        hs_model_free(f32);
    }
}

/* A post-norm encoder with an MLM head, matrices stored (out, in): maps and hidden states
 * the same under both budgets. */
Test(wcache, bert_maps_do_not_depend_on_the_budget)
{
    hs_model *all = open_with("fixtures/models/bert-bf16", HS_WEIGHT_MEMORY_ALL);
    hs_model *tiny = open_with("fixtures/models/bert-bf16", 1);
    const hs_model_config *c = hs_model_config_of(all);
    int32_t ids[N_TOK];
    make_ids(ids, c->vocab_size);
    size_t nm = (size_t)c->n_layer * c->n_head * N_TOK * N_TOK, nh = (size_t)N_TOK * c->d_model;
    float *maps[2], *hidden[2];
    hs_model *ms[2] = {all, tiny};
    for (int k = 0; k < 2; k++) {
        hs_error err = {{0}};
        hs_trace *t = NULL;
        cr_assert_eq(hs_trace_new(ms[k], N_TOK, &t, &err), HS_OK);
        hidden[k] = malloc(nh * sizeof(float));
        hs_forward_opts o = {.on_attn = hs_trace_observe, .user = t, .hidden = hidden[k]};
        cr_assert_eq(hs_forward(ms[k], ids, NULL, N_TOK, &o, NULL, &err), HS_OK, "%s", err.msg);
        maps[k] = malloc(nm * sizeof(float));
        memcpy(maps[k], t->attn, nm * sizeof(float));
        hs_trace_free(t);
    }
    cr_assert(!memcmp(maps[0], maps[1], nm * sizeof(float)));
    cr_assert(!memcmp(hidden[0], hidden[1], nh * sizeof(float)));
    for (int k = 0; k < 2; k++) {
        free(maps[k]);
        free(hidden[k]);
        hs_model_free(ms[k]);
    }
}

/* Every stored type of the GGUF fixtures: GPT-2's (Q4_0 where rows are 32 long, F16
 * elsewhere; Q8_0; BF16; F16) and llama.cpp's own Llama and Qwen2 files (Q4_0, Q4_K, Q6_K,
 * Q8_0, F16; the loader undoes the converter's Q/K row permutation into a buffer of its
 * own, which the cache copies): the same maps and logits under both budgets. */
Test(wcache, gguf_types_do_not_depend_on_the_budget)
{
    const char *files[] = {"fixtures/gguf/good/tiny-gpt2-q4_0.gguf",
                           "fixtures/gguf/good/tiny-gpt2-q8_0.gguf",
                           "fixtures/gguf/good/tiny-gpt2-bf16.gguf",
                           "fixtures/gguf/good/tiny-gpt2-f16.gguf",
                           "fixtures/gguf/families/tiny-llama-wide.q4_0.gguf",
                           "fixtures/gguf/families/tiny-llama-wide.q4_k.gguf",
                           "fixtures/gguf/families/tiny-llama-wide.q6_k.gguf",
                           "fixtures/gguf/families/tiny-llama.q8_0.gguf",
                           "fixtures/gguf/families/tiny-qwen2.f16.gguf"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        hs_model *ms[2] = {open_with(files[f], HS_WEIGHT_MEMORY_ALL), open_with(files[f], 1)};
        const hs_model_config *c = hs_model_config_of(ms[0]);
        int32_t ids[8];
        for (int i = 0; i < 8; i++)
            ids[i] = (int32_t)((i * 37 + 5) % c->vocab_size);
        size_t nm = (size_t)c->n_layer * c->n_head * 64, nl = (size_t)8 * c->vocab_size;
        float *maps[2], *logits[2];
        for (int k = 0; k < 2; k++) {
            hs_error err = {{0}};
            hs_trace *t = NULL;
            cr_assert_eq(hs_trace_new(ms[k], 8, &t, &err), HS_OK);
            logits[k] = malloc(nl * sizeof(float));
            hs_forward_opts o = {.on_attn = hs_trace_observe, .user = t, .logits = logits[k]};
            cr_assert_eq(hs_forward(ms[k], ids, NULL, 8, &o, NULL, &err), HS_OK, "%s", err.msg);
            maps[k] = malloc(nm * sizeof(float));
            memcpy(maps[k], t->attn, nm * sizeof(float));
            hs_trace_free(t);
        }
        hs_wcache_stats s;
        hs_wcache_stats_of(ms[1], &s);
        cr_assert(s.streams && s.need > 0, "%s: converted in every pass", files[f]);
        cr_assert(!memcmp(maps[0], maps[1], nm * sizeof(float)), "%s: maps", files[f]);
        cr_assert(!memcmp(logits[0], logits[1], nl * sizeof(float)), "%s: logits", files[f]);
        for (int k = 0; k < 2; k++) {
            free(maps[k]);
            free(logits[k]);
            hs_model_free(ms[k]);
        }
    }
}

/* tiny-llama: d = 64, 8 heads of 8, 2 KV heads, d_ff = 160 (gated), 3 layers. Per layer in
 * float32: QKV 64 x (64 + 2 * 2 * 8), O 64 x 64, [gate | up] 64 x 320, down 160 x 64. */
#define LLAMA_LAYER_BYTES ((size_t)4 * (64 * 96 + 64 * 64 + 64 * 320 + 160 * 64))
#define LLAMA_LAYERS 3

static void forward_once(const hs_model *m)
{
    int32_t ids[N_TOK];
    make_ids(ids, 2393);
    hs_error err = {{0}};
    cr_assert_eq(hs_forward(m, ids, NULL, N_TOK, NULL, NULL, &err), HS_OK, "%s", err.msg);
}

/* The cache's own counter of resident float32 bytes: the budget holds (one layer at least),
 * and a pass converts exactly the layers that are not kept, once each. */
Test(wcache, the_budget_bounds_the_converted_bytes)
{
    const char *path = "fixtures/family-models/tiny-llama";
    struct {
        size_t budget, kept, per_pass, peak_max;
    } cases[] = {
        /* below one layer: one layer at a time, all 12 matrices converted in every pass */
        {1, 0, 4 * LLAMA_LAYERS, LLAMA_LAYER_BYTES},
        /* two layers: layer 0 kept, layers 1 and 2 take turns in the room for one */
        {2 * LLAMA_LAYER_BYTES, LLAMA_LAYER_BYTES, 4 * (LLAMA_LAYERS - 1), 2 * LLAMA_LAYER_BYTES},
        /* two and a half: layer 0 and then layer 1's QKV and O (40960 bytes) fit beside room
         * for a layer; the MLP of layer 1 does not, and the prefix stops there */
        {5 * LLAMA_LAYER_BYTES / 2, LLAMA_LAYER_BYTES + 40960, 4 * (LLAMA_LAYERS - 1) - 2,
         5 * LLAMA_LAYER_BYTES / 2},
        /* exactly the model: every layer kept, nothing converted after the load */
        {LLAMA_LAYERS * LLAMA_LAYER_BYTES, LLAMA_LAYERS * LLAMA_LAYER_BYTES, 0,
         LLAMA_LAYERS * LLAMA_LAYER_BYTES},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hs_model *m = open_with(path, cases[i].budget);
        hs_wcache_stats s0, s1, s2;
        hs_wcache_stats_of(m, &s0);
        cr_assert_eq(s0.need, LLAMA_LAYERS * LLAMA_LAYER_BYTES, "case %zu: need %zu", i, s0.need);
        cr_assert_eq(s0.kept, cases[i].kept, "case %zu: kept %zu", i, s0.kept);
        cr_assert_eq(s0.conversions, 4 * LLAMA_LAYERS, "case %zu: every matrix checked at load", i);
        forward_once(m);
        hs_wcache_stats_of(m, &s1);
        forward_once(m);
        hs_wcache_stats_of(m, &s2);
        /* the first pass may find the last layers of the load still resident */
        cr_assert_leq(s1.conversions - s0.conversions, cases[i].per_pass, "case %zu", i);
        cr_assert_eq(s2.conversions - s1.conversions, cases[i].per_pass, "case %zu: %zu per pass",
                     i, s2.conversions - s1.conversions);
        cr_assert_leq(s2.peak, cases[i].peak_max, "case %zu: peak %zu", i, s2.peak);
        cr_assert_leq(s2.resident, cases[i].peak_max, "case %zu", i);
        cr_assert_eq(s2.streams, cases[i].per_pass > 0, "case %zu", i);
        hs_model_free(m);
    }
}

/* The four computations that read every layer's weights, not a forward pass:
 * composition, direct logit attribution, norm-based attention and the GGUF writer. */
typedef struct readers {
    double *comp;  /* hs_composition's q, k, v, copying, ov_norm, qk_norm; NULL: undefined */
    size_t n_comp;
    double *dla;   /* per_pos, total, token_loss, logit */
    size_t n_dla;
    float *fnorm;  /* hs_norm_values */
    size_t n_fnorm;
    unsigned char *gguf; /* hs_gguf_encode, F32 */
    size_t n_gguf;
} readers;

static readers run_readers(const hs_model *m, const int32_t *ids)
{
    const hs_model_config *c = hs_model_config_of(m);
    hs_error err = {{0}};
    readers r = {0};
    size_t N = (size_t)c->n_layer * (size_t)c->n_head;
    if (hs_composition_defined(c)) {
        hs_composition *cp = NULL;
        cr_assert_eq(hs_composition_compute(m, &cp, &err), HS_OK, "%s", err.msg);
        r.n_comp = 3 * N * N + 3 * N;
        r.comp = malloc(r.n_comp * sizeof *r.comp);
        memcpy(r.comp, cp->q, 3 * N * N * sizeof *r.comp);
        memcpy(r.comp + 3 * N * N, cp->copying, N * sizeof *r.comp);
        memcpy(r.comp + 3 * N * N + N, cp->ov_norm, N * sizeof *r.comp);
        memcpy(r.comp + 3 * N * N + 2 * N, cp->qk_norm, N * sizeof *r.comp);
        hs_composition_free(cp);
    }
    if (!hs_dla_undefined(m)) {
        hs_dla *d = NULL;
        cr_assert_eq(hs_dla_compute(m, ids, N_TOK, &d, &err), HS_OK, "%s", err.msg);
        size_t P = (size_t)d->n_pos;
        r.n_dla = N * P + N + 2 * P;
        r.dla = malloc(r.n_dla * sizeof *r.dla);
        memcpy(r.dla, d->per_pos, N * P * sizeof *r.dla);
        memcpy(r.dla + N * P, d->total, N * sizeof *r.dla);
        memcpy(r.dla + N * P + N, d->token_loss, P * sizeof *r.dla);
        memcpy(r.dla + N * P + N + P, d->logit, P * sizeof *r.dla);
        hs_dla_free(d);
    }
    hs_activations *a = NULL;
    cr_assert_eq(hs_activations_run(m, ids, NULL, N_TOK, HS_CAPTURE_QKV, &a, &err), HS_OK, "%s",
                 err.msg);
    r.n_fnorm = N * N_TOK;
    r.fnorm = malloc(r.n_fnorm * sizeof *r.fnorm);
    cr_assert_eq(hs_norm_values(m, a, r.fnorm, &err), HS_OK, "%s", err.msg);
    hs_activations_free(a);
    if (hs_model_tokenizer(m)) /* a GGUF file needs one; the float32 copies have none */
        cr_assert_eq(hs_gguf_encode(m, NULL, &r.gguf, &r.n_gguf, &err), HS_OK, "%s", err.msg);
    return r;
}

static void readers_free(readers *r)
{
    free(r->comp);
    free(r->dla);
    free(r->fnorm);
    free(r->gguf);
}

static void expect_same_readers(const readers *a, const readers *b, const char *what)
{
    cr_assert(a->n_comp == b->n_comp && a->n_dla == b->n_dla && a->n_fnorm == b->n_fnorm,
              "%s: sizes", what);
    cr_assert(!a->n_comp || !memcmp(a->comp, b->comp, a->n_comp * sizeof *a->comp),
              "%s: composition differs", what);
    cr_assert(!a->n_dla || !memcmp(a->dla, b->dla, a->n_dla * sizeof *a->dla),
              "%s: direct logit attribution differs", what);
    cr_assert(!memcmp(a->fnorm, b->fnorm, a->n_fnorm * sizeof *a->fnorm),
              "%s: norm-based attention differs", what);
    cr_assert(!a->gguf || !b->gguf || (a->n_gguf == b->n_gguf && !memcmp(a->gguf, b->gguf,
              a->n_gguf)), "%s: GGUF bytes differ (%zu and %zu bytes)", what, a->n_gguf, b->n_gguf);
}

/* A library caller that opens a model with a small budget and calls the four readers of
 * every layer on their own (no pipeline, no CLI around them) gets, byte for byte, what it
 * gets with no bound and from the float32 copy of the same numbers. The no-bound results
 * are themselves checked against independent references: composition of tiny-llama against
 * NumPy (test_composition.c, llama_gqa_matches_the_numpy_reference), its GGUF file against
 * gguf-py's (test_gguf_family.c, writer_gives_the_gguf_py_llama), DLA and norm values of
 * float32 models against make_attribution.py (test_attribution.c); the stored checkpoints'
 * maps against their float32 copies above. Budgets: 0 (HEADSCOPE_WEIGHT_MEMORY=0), one
 * layer (none kept, one at a time) and two (the first layer kept, the rest taking turns). */
Test(wcache, readers_of_every_layer_do_not_depend_on_the_budget, .timeout = 120)
{
    int written = 0; /* models with a tokenizer, which a GGUF file needs */
    for (size_t p = 0; p < sizeof PAIRS / sizeof PAIRS[0]; p++) {
        int32_t ids[N_TOK];
        make_ids(ids, PAIRS[p].vocab);
        hs_model *all = open_with(PAIRS[p].stored, HS_WEIGHT_MEMORY_ALL);
        hs_model *f32 = open_with(PAIRS[p].f32, HS_WEIGHT_MEMORY_ALL);
        size_t layer = hs_model_converted_bytes(all) / (size_t)hs_model_config_of(all)->n_layer;
        readers ra = run_readers(all, ids), rf = run_readers(f32, ids);
        char what[256];
        snprintf(what, sizeof what, "%s vs %s", PAIRS[p].stored, PAIRS[p].f32);
        expect_same_readers(&ra, &rf, what);
        size_t budgets[] = {0, layer, 2 * layer};
        for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
            setenv("HEADSCOPE_WEIGHT_MEMORY", "0", 1);
            hs_model *m = open_with(PAIRS[p].stored, budgets[b]); /* 0: the environment's */
            unsetenv("HEADSCOPE_WEIGHT_MEMORY");
            cr_assert_eq(hs_model_weight_memory(m), budgets[b]);
            readers rb = run_readers(m, ids);
            written += rb.gguf != NULL;
            hs_wcache_stats s;
            hs_wcache_stats_of(m, &s);
            cr_assert(s.streams, "%s: budget %zu streams", PAIRS[p].stored, budgets[b]);
            /* composition pins two layers at once; nothing else more than one */
            cr_assert_leq(s.peak, s.kept + 2 * layer, "%s: budget %zu: peak %zu",
                          PAIRS[p].stored, budgets[b], s.peak);
            cr_assert_leq(s.resident, budgets[b],
                          "%s: budget %zu: %zu bytes left resident", PAIRS[p].stored, budgets[b],
                          s.resident);
            snprintf(what, sizeof what, "%s, budget %zu vs none", PAIRS[p].stored, budgets[b]);
            expect_same_readers(&rb, &ra, what);
            readers_free(&rb);
            hs_model_free(m);
        }
        readers_free(&ra);
        readers_free(&rf);
        hs_model_free(all);
        hs_model_free(f32);
    }
    cr_assert_geq(written, 3 * 2, "GPT-2's Q8_0 GGUF file and tiny-llama written to GGUF");
}

/* The model at path with a zero budget (set through the environment, as a user sets it). */
static hs_model *open_zero_budget(const char *path)
{
    setenv("HEADSCOPE_WEIGHT_MEMORY", "0", 1);
    hs_model *m = open_with(path, 0);
    unsetenv("HEADSCOPE_WEIGHT_MEMORY");
    return m;
}

/* Two layers pinned at once under a zero budget are both resident while pinned (the budget
 * is a target that pinned layers exceed), each exactly the layer the unbounded model
 * keeps; pinning one again converts nothing; once every pin is put the cache is back within
 * the budget. The model's own table is never touched. */
Test(wcache, two_layers_pinned_under_a_zero_budget_are_both_resident)
{
    const char *path = "fixtures/family-models/tiny-llama";
    hs_model *ref = open_with(path, HS_WEIGHT_MEMORY_ALL), *m = open_zero_budget(path);
    hs_error err = {{0}};
    hs_wcache_stats s0, s;
    hs_wcache_stats_of(m, &s0);
    cr_assert_eq(s0.budget, 0);
    cr_assert_eq(s0.resident, 0, "nothing resident outside a pass");
    hs_layer a, b, a2;
    cr_assert_eq(hs_layer_get(m, 0, &a, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_layer_get(m, 2, &b, &err), HS_OK, "%s", err.msg);
    hs_wcache_stats_of(m, &s);
    cr_assert_eq(s.resident, 2 * LLAMA_LAYER_BYTES, "both layers resident: %zu", s.resident);
    struct {
        const float *got, *want;
        size_t n;
        const char *name;
    } mats[] = {
        {a.w_qkv, ref->layers[0].w_qkv, 64 * 96, "0.w_qkv"},
        {a.w_o, ref->layers[0].w_o, 64 * 64, "0.w_o"},
        {a.w_fc, ref->layers[0].w_fc, 64 * 320, "0.w_fc"},
        {a.w_proj, ref->layers[0].w_proj, 160 * 64, "0.w_proj"},
        {b.w_qkv, ref->layers[2].w_qkv, 64 * 96, "2.w_qkv"},
        {b.w_o, ref->layers[2].w_o, 64 * 64, "2.w_o"},
        {b.w_fc, ref->layers[2].w_fc, 64 * 320, "2.w_fc"},
        {b.w_proj, ref->layers[2].w_proj, 160 * 64, "2.w_proj"},
    };
    for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
        cr_assert_not_null(mats[i].got, "%s", mats[i].name);
        cr_assert(!memcmp(mats[i].got, mats[i].want, mats[i].n * sizeof(float)), "%s differs",
                  mats[i].name);
    }
    cr_assert_eq(hs_layer_get(m, 0, &a2, &err), HS_OK, "%s", err.msg);
    cr_assert(a2.w_qkv == a.w_qkv && a2.w_o == a.w_o, "a pinned layer is not converted again");
    hs_wcache_stats_of(m, &s);
    cr_assert_eq(s.conversions, s0.conversions + 8, "two layers of four matrices converted");
    hs_layer_put(m, 0);
    hs_layer_put(m, 2);
    hs_wcache_stats_of(m, &s);
    cr_assert_eq(s.resident, LLAMA_LAYER_BYTES, "layer 0 still pinned once, layer 2 dropped");
    hs_layer_put(m, 0);
    hs_wcache_stats_of(m, &s);
    cr_assert_eq(s.resident, 0, "every pin put: back within the budget");
    for (int l = 0; l < LLAMA_LAYERS; l++)
        cr_assert_null(m->layers[l].w_o, "layer %d: the table holds no converted matrix", l);
    hs_model_free(m);
    hs_model_free(ref);
}

/* A reader of W_O alone (DLA, norm-based attention) converts that matrix and no other:
 * one conversion, W_O's bytes resident (those the whole layer's conversion gives), the
 * other slots NULL; put, nothing resident. */
Test(wcache, one_matrix_of_a_layer_is_converted_alone)
{
    hs_model *m = open_zero_budget("fixtures/family-models/tiny-llama");
    hs_wcache_stats before, after;
    hs_layer o, whole;
    hs_error err = {{0}};
    hs_wcache_stats_of(m, &before);
    cr_assert_eq(hs_layer_get_units(m, 1, 1u << HS_WU_O, &o, &err), HS_OK, "%s", err.msg);
    hs_wcache_stats_of(m, &after);
    cr_assert_eq(after.conversions, before.conversions + 1, "W_O alone converted");
    cr_assert_eq(after.resident, 64 * 64 * sizeof(float), "W_O alone resident: %zu",
                 after.resident);
    cr_assert(!o.w_qkv && !o.w_fc && !o.w_proj, "the matrices not asked for are NULL");
    float w_o[64 * 64];
    memcpy(w_o, o.w_o, sizeof w_o);
    hs_layer_put_units(m, 1, 1u << HS_WU_O);
    hs_wcache_stats_of(m, &after);
    cr_assert_eq(after.resident, 0, "put: back within the budget");
    cr_assert_eq(hs_layer_get(m, 1, &whole, &err), HS_OK, "%s", err.msg);
    cr_assert(!memcmp(w_o, whole.w_o, sizeof w_o), "W_O differs from the whole layer's");
    hs_layer_put(m, 1);
    hs_model_free(m);
}

/* Passes on one model from several threads at once convert and drop layers under each
 * other: every pass must still see whole, correct layers. */
typedef struct worker {
    const hs_model *m;
    const int32_t *ids;
    const float *want; /* (N_TOK, V) logits */
    size_t n;
    int bad;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    float *logits = malloc(w->n * sizeof *logits);
    for (int it = 0; it < 8 && logits; it++) {
        hs_error err = {{0}};
        hs_forward_opts o = {.logits = logits};
        if (hs_forward(w->m, w->ids, NULL, N_TOK, &o, NULL, &err) != HS_OK ||
            memcmp(logits, w->want, w->n * sizeof *logits))
            w->bad++;
    }
    if (!logits)
        w->bad++;
    free(logits);
    return NULL;
}

Test(wcache, concurrent_passes_share_the_cache)
{
    hs_model *ref = open_with("fixtures/family-models/tiny-llama", HS_WEIGHT_MEMORY_ALL);
    hs_model *m = open_with("fixtures/family-models/tiny-llama", LLAMA_LAYER_BYTES);
    int32_t ids[N_TOK];
    make_ids(ids, 2393);
    size_t n = (size_t)N_TOK * 2393;
    float *want = malloc(n * sizeof *want);
    hs_error err = {{0}};
    hs_forward_opts o = {.logits = want};
    cr_assert_eq(hs_forward(ref, ids, NULL, N_TOK, &o, NULL, &err), HS_OK, "%s", err.msg);
    enum { T = 3 };
    pthread_t th[T];
    worker w[T];
    for (int i = 0; i < T; i++) {
        w[i] = (worker){m, ids, want, n, 0};
        cr_assert_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(w[i].bad, 0, "thread %d: %d passes differ from the reference", i, w[i].bad);
    }
    hs_wcache_stats s;
    hs_wcache_stats_of(m, &s);
    /* each thread pins at most one layer: the cache never held more than one per thread */
    cr_assert_leq(s.peak, (size_t)T * LLAMA_LAYER_BYTES, "peak %zu", s.peak);
    free(want);
    hs_model_free(m);
    hs_model_free(ref);
}

Test(wcache, sizes_parse)
{
    struct {
        const char *s;
        size_t want;
    } ok[] = {
        {"0", 0},
        {"4096", 4096},
        {"512M", (size_t)512 << 20},
        {"512MB", (size_t)512 << 20},
        {"512MiB", (size_t)512 << 20},
        {"1.5G", (size_t)3 << 29},
        {"2g", (size_t)2 << 30},
        {"1T", (size_t)1 << 40},
        {"64k", 65536},
        {"all", HS_WEIGHT_MEMORY_ALL},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        size_t b = 1;
        cr_assert_eq(hs_weight_memory_parse(ok[i].s, &b), 0, "'%s'", ok[i].s);
        cr_assert_eq(b, ok[i].want, "'%s': %zu", ok[i].s, b);
    }
    const char *bad[] = {"", "-1", "M", "12X", "1.2.3", "1 G", "Gi", "ALL", "1e9", "99999999T",
                         "5iB"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t b = 7;
        cr_assert_eq(hs_weight_memory_parse(bad[i], &b), -1, "'%s' accepted", bad[i]);
        cr_assert_eq(b, 7, "'%s' stored a value", bad[i]);
    }
}

Test(wcache, environment_sets_the_default_and_a_bad_value_fails_the_open)
{
    setenv("HEADSCOPE_WEIGHT_MEMORY", "3M", 1);
    hs_model *m = open_with("fixtures/models/gpt2-f16", 0);
    cr_assert_eq(hs_model_weight_memory(m), (size_t)3 << 20);
    hs_model_free(m);
    m = open_with("fixtures/models/gpt2-f16", 5000); /* an explicit budget wins */
    cr_assert_eq(hs_model_weight_memory(m), 5000);
    hs_model_free(m);
    setenv("HEADSCOPE_WEIGHT_MEMORY", "lots", 1);
    hs_error err = {{0}};
    hs_model *bad = NULL;
    cr_assert_eq(hs_model_open2("fixtures/models/gpt2-f16", NULL, &bad, &err), HS_E_ARG);
    cr_assert_null(bad);
    cr_assert_str_eq(err.msg, "HEADSCOPE_WEIGHT_MEMORY='lots' is not a size (e.g. 512M, 4G or all)");
    unsetenv("HEADSCOPE_WEIGHT_MEMORY");
    m = open_with("fixtures/models/gpt2-f16", 0); /* a quarter of the physical memory */
    size_t quarter = (size_t)sysconf(_SC_PHYS_PAGES) / 4 * (size_t)sysconf(_SC_PAGESIZE);
    cr_assert_eq(hs_model_weight_memory(m), quarter);
    /* gpt2-f16: d = 64, d_ff = 256, 3 layers of 64 x 192 + 64 x 64 + 64 x 256 + 256 x 64 */
    cr_assert_eq(hs_model_converted_bytes(m), (size_t)3 * 4 * (64 * 192 + 64 * 64 + 2 * 64 * 256));
    hs_model_free(m);
}
