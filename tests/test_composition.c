/* Composition and OV copying scores against fixtures/golden/composition-trained-gpt2.json,
 * written by fixtures/ref/make_composition.py: float64 NumPy with every W_OV and W_QK formed
 * as an explicit (d, d) matrix from the safetensors weights (headscope works with Gram
 * matrices and never forms them). Also: the circuit the scores should show in trained-gpt2
 * (2.3, the previous-token head, K-composes most strongly into 3.0, the induction head),
 * and the refusal for BERT. The copying scores' token circuit G = W_U W_E, summed over
 * blocks of the vocabulary: the same bits from tables kept in their stored type, no table
 * converted whole, and G against a double sum. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "analysis/analysis_internal.h"
#include "core/core.h"
#include "headscope/composition.h"
#include "model/emb_stored.h"
#include "model/model_internal.h"
#include "testutil.h"

#define REL_TOL 1e-5

static cJSON *golden_of(const char *name)
{
    char *text = NULL, path[256];
    size_t len = 0;
    hs_error err = {{0}};
    snprintf(path, sizeof path, "fixtures/golden/composition-%s.json", name);
    cr_assert_eq(hs_read_file(path, 1 << 22, &text, &len, &err), HS_OK, "%s", err.msg);
    cJSON *j = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(j);
    return j;
}

static void check_vec(const cJSON *a, const double *got, int n, double tol, const char *what)
{
    cr_assert_eq(cJSON_GetArraySize(a), n, "%s: size", what);
    for (int i = 0; i < n; i++) {
        const cJSON *v = cJSON_GetArrayItem(a, i);
        if (cJSON_IsNull(v)) {
            cr_assert(isnan(got[i]), "%s[%d]: got %g, want NaN", what, i, got[i]);
            continue;
        }
        double w = v->valuedouble;
        cr_assert(fabs(got[i] - w) <= tol * fmax(1.0, fabs(w)), "%s[%d]: got %.9g, want %.9g",
                  what, i, got[i], w);
    }
}

static void check_mat(const cJSON *a, const double *got, int n, const char *what)
{
    cr_assert_eq(cJSON_GetArraySize(a), n, "%s: rows", what);
    for (int i = 0; i < n; i++) {
        char w[32];
        snprintf(w, sizeof w, "%s row %d", what, i);
        check_vec(cJSON_GetArrayItem(a, i), got + (size_t)i * n, n, REL_TOL, w);
    }
}

/* c against fixtures/golden/composition-<name>.json */
static void check_golden(const hs_composition *c, const char *name)
{
    cJSON *g = golden_of(name);
    int N = c->n_heads;
    cr_assert_eq(N, cJSON_GetObjectItem(g, "n_layer")->valueint *
                        cJSON_GetObjectItem(g, "n_head")->valueint);
    check_mat(cJSON_GetObjectItem(g, "q"), c->q, N, "q");
    check_mat(cJSON_GetObjectItem(g, "k"), c->k, N, "k");
    check_mat(cJSON_GetObjectItem(g, "v"), c->v, N, "v");
    check_vec(cJSON_GetObjectItem(g, "ov_norm"), c->ov_norm, N, REL_TOL, "ov_norm");
    check_vec(cJSON_GetObjectItem(g, "qk_norm"), c->qk_norm, N, REL_TOL, "qk_norm");
    /* eigenvalues of a different (but similar) matrix in the reference: (d, d) vs (dh, dh) */
    check_vec(cJSON_GetObjectItem(g, "copying"), c->copying, N, 1e-4, "copying");
    cJSON_Delete(g);
}

Test(composition, trained_gpt2_matches_the_numpy_reference, .timeout = 60)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load("fixtures/trained-gpt2", &m, &err), HS_OK, "%s", err.msg);
    hs_composition *c = NULL;
    cr_assert_eq(hs_composition_compute(m, &c, &err), HS_OK, "%s", err.msg);
    int N = c->n_heads;
    cr_assert_eq(N, 16);
    check_golden(c, "trained-gpt2");

    /* the induction circuit: of every earlier head, 2.3 writes 3.0's keys the most */
    int ind = 3 * 4 + 0, best = -1;
    for (int a = 0; a < 3 * 4; a++)
        if (best < 0 || c->k[a * N + ind] > c->k[best * N + ind])
            best = a;
    cr_assert_eq(best, 2 * 4 + 3, "strongest K-composition into 3.0 from %d.%d", best / 4,
                 best % 4);
    hs_composition_free(c);
    hs_model_free(m);
}

Test(composition, bert_is_refused_with_a_reason)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load("fixtures/models/bert-f16", &m, &err), HS_OK, "%s", err.msg);
    hs_composition *c = (hs_composition *)&err; /* must be reset */
    cr_assert_eq(hs_composition_compute(m, &c, &err), HS_E_UNSUPPORTED);
    cr_assert_null(c);
    cr_assert_str_eq(err.msg, "composition scores are defined for pre-norm decoders; bert "
                              "renormalises the residual stream after every sublayer");
    hs_model_free(m);
}

/* The other pre-norm decoders against make_composition.py --families, which reads each
 * family's own checkpoint names: grouped-query attention (tiny-llama: 8 query heads on 2 KV
 * heads, three layers; tiny-llama3, tiny-qwen2: 1 KV head), RMSNorm, untied and tied
 * unembeddings, GPT-NeoX's per-head fused QKV with parallel (tiny-pythia) and sequential
 * (tiny-neox-seq) residuals. */
static void family_case(const char *name)
{
    char path[256];
    hs_model *m = NULL;
    hs_error err = {{0}};
    snprintf(path, sizeof path, "fixtures/family-models/%s", name);
    cr_assert_eq(hs_model_load(path, &m, &err), HS_OK, "%s", err.msg);
    hs_composition *c = NULL;
    cr_assert_eq(hs_composition_compute(m, &c, &err), HS_OK, "%s: %s", name, err.msg);
    check_golden(c, name);
    hs_composition_free(c);
    hs_model_free(m);
}

Test(composition, llama_gqa_matches_the_numpy_reference) { family_case("tiny-llama"); }
Test(composition, llama3_matches_the_numpy_reference) { family_case("tiny-llama3"); }
Test(composition, qwen2_one_kv_head_matches_the_numpy_reference) { family_case("tiny-qwen2"); }
Test(composition, pythia_parallel_matches_the_numpy_reference) { family_case("tiny-pythia"); }
Test(composition, neox_sequential_matches_the_numpy_reference) { family_case("tiny-neox-seq"); }
/* heads wider than d_model / n_head: 4 heads of 24 on d_model 64 (W_O (96, 64)), 2 KV heads */
Test(composition, llama_head_dim_wider_than_d_model_over_heads_matches_the_numpy_reference)
{
    family_case("tiny-llama-hd");
}

Test(composition, encoders_are_refused)
{
    static const char *const enc[] = {"fixtures/family-models/tiny-roberta",
                                      "fixtures/family-models/tiny-distilbert"};
    for (int i = 0; i < 2; i++) {
        hs_model *m = NULL;
        hs_error err = {{0}};
        cr_assert_eq(hs_model_load(enc[i], &m, &err), HS_OK, "%s", err.msg);
        hs_composition *c = NULL;
        cr_assert_eq(hs_composition_compute(m, &c, &err), HS_E_UNSUPPORTED);
        cr_assert_null(c);
        cr_assert_not_null(strstr(err.msg, "renormalises the residual stream"), "%s", err.msg);
        hs_model_free(m);
    }
}

/* ---- the copying circuit's G = W_U W_E in blocks of the vocabulary ----------------- */

static hs_model *open_as(const char *path, unsigned flags, size_t memory)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    hs_open_opts o = {.flags = flags, .weight_memory = memory};
    cr_assert_eq(hs_model_open2(path, &o, &m, &err), HS_OK, "%s: %s", path, err.msg);
    return m;
}

static double *gram_of(const hs_model *m, int chunk)
{
    int d = m->cfg.d_model;
    double *g = malloc((size_t)d * d * sizeof *g);
    hs_error err = {{0}};
    cr_assert_eq(hs_composition_gram(m, chunk, g, &err), HS_OK, "%s", err.msg);
    return g;
}

/* Tables kept in their stored type (BF16, F16, Q8_0, Q4_K; tied and untied) against the
 * same files converted at load: G in blocks of 64 rows (128 of a tied table; no vocabulary
 * here a multiple of either) and the copying scores at the default block (trained-gpt2's
 * 50,257 tokens, tied: 6 blocks of 8,192 and 1,105 rows) the same bits, and no table
 * converted whole (hs_model_emb_copies, which counts one once the whole table is asked
 * for). */
Test(composition, stored_tables_give_the_converted_bits_without_a_whole_copy, .timeout = 120)
{
    static const char *const paths[] = {
        "fixtures/family-models/tiny-llama",              /* BF16, untied, V 2393 */
        "fixtures/family-models/tiny-qwen2",              /* F16, tied, V 3259 */
        "fixtures/gguf/families/tiny-llama.q8_0.gguf",
        "fixtures/gguf/families/tiny-llama-wide.q4_k.gguf",
        "fixtures/trained-gpt2",                          /* F16, tied, V 50257 */
    };
    for (size_t f = 0; f < sizeof paths / sizeof paths[0]; f++) {
        hs_model *conv = open_as(paths[f], 0, HS_WEIGHT_MEMORY_ALL);
        hs_model *st = open_as(paths[f], HS_OPEN_STORED_WEIGHTS, HS_WEIGHT_MEMORY_STORED);
        cr_assert_null(st->wte, "%s: the embeddings kept in their stored type", paths[f]);
        int d = conv->cfg.d_model, V = conv->cfg.vocab_size;
        cr_assert(V % 64 != 0 && V % 128 != 0 && V > 128, "%s: V %d", paths[f], V);
        double *g0 = gram_of(conv, 64), *g1 = gram_of(st, 64);
        cr_assert(!memcmp(g0, g1, (size_t)d * d * sizeof *g0), "%s: G differs", paths[f]);
        free(g0);
        free(g1);
        hs_composition *c0 = NULL, *c1 = NULL;
        hs_error err = {{0}};
        cr_assert_eq(hs_composition_compute(conv, &c0, &err), HS_OK, "%s", err.msg);
        cr_assert_eq(hs_composition_compute(st, &c1, &err), HS_OK, "%s", err.msg);
        size_t N = (size_t)c0->n_heads;
        cr_assert(!memcmp(c0->copying, c1->copying, N * sizeof *c0->copying),
                  "%s: copying scores differ", paths[f]);
        cr_assert_eq(hs_model_emb_copies(st), 0, "%s: a table converted whole", paths[f]);
        cr_assert_not_null(hs_model_decoder_f32(st, &err));
        cr_assert_eq(hs_model_emb_copies(st), 1, "%s: the probe counts a copy", paths[f]);
        hs_composition_free(c0);
        hs_composition_free(c1);
        hs_model_free(conv);
        hs_model_free(st);
    }
}

/* G in blocks of 64 rows (128 tied) and at the default block (here all V rows in one)
 * against a plain double sum over the vocabulary of the converted tables, within float's
 * worst-case bound for a sum of k products: k u sum |dec_vi wte_vj| (u = 2^-24), here 1e-5
 * (k 128) and 5e-4 (k 3,259) of that sum. */
Test(composition, gram_matches_a_double_sum_over_the_vocabulary, .timeout = 60)
{
    static const char *const paths[] = {"fixtures/family-models/tiny-llama",
                                         "fixtures/family-models/tiny-qwen2"};
    for (size_t f = 0; f < sizeof paths / sizeof paths[0]; f++) {
        hs_model *m = open_as(paths[f], 0, HS_WEIGHT_MEMORY_ALL);
        int d = m->cfg.d_model, V = m->cfg.vocab_size;
        const float *e = m->wte, *u = m->decoder;
        double *g64 = gram_of(m, 64), *gall = gram_of(m, 4096);
        size_t bad = 0;
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++) {
                double s = 0, a = 0;
                for (int v = 0; v < V; v++) {
                    double p = (double)u[(size_t)v * d + i] * (double)e[(size_t)v * d + j];
                    s += p;
                    a += fabs(p);
                }
                bad += fabs(g64[(size_t)i * d + j] - s) > 1e-5 * a;
                bad += fabs(gall[(size_t)i * d + j] - s) > 5e-4 * a;
            }
        cr_assert_eq(bad, 0, "%s: %zu of G's values off the double sum", paths[f], bad);
        free(g64);
        free(gall);
        hs_model_free(m);
    }
}
