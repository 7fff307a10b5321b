/* Helpers of the GGUF suites (test_gguf.c, test_gguf_write.c, test_gguf_family.c,
 * test_gguf_quant.c, test_gguf_arch.c, test_gguf_t5.c): two models' weights compared, two
 * tokenizers' ids compared, a write refused in one line, a file's tensor types counted
 * (header-only, test code only). */
#ifndef HEADSCOPE_GGUF_UTIL_H
#define HEADSCOPE_GGUF_UTIL_H

#include "headscope/gguf.h"
#include "headscope/model.h"
#include "headscope/tokenizer.h"
#include "model/model_internal.h"
#include "testutil.h"

#define TINY_HF "fixtures/gguf/tiny-gpt2"
#define GOOD "fixtures/gguf/good/"

/* A model with every layer matrix, the embeddings and the LM head converted to float32 at
 * load (no bound on the weight memory), as model_diff reads them, or fails the test: the
 * default keeps a GGUF file's tables and layers in their stored type. */
static inline hs_model *tu_load_converted(const char *path)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    hs_open_opts o = {.weight_memory = HS_WEIGHT_MEMORY_ALL};
    hs_status st = hs_model_open2(path, &o, &m, &err);
    cr_assert_eq(st, HS_OK, "cannot load %s: %s", path, err.msg);
    return m;
}

/* max |a - b| over count floats, allowing both NULL. */
static inline double diff(const float *a, const float *b, size_t count)
{
    if (!a || !b) {
        cr_assert(a == b, "one side lacks a tensor");
        return 0;
    }
    return tu_max_abs_diff(a, b, count, NULL);
}

/* The largest |a - b| over every weight of two models with the same config; the
 * decoder is compared when both have an explicit one. */
static inline double model_diff(const hs_model *a, const hs_model *b, int with_mlm)
{
    const hs_model_config *c = &a->cfg, *k = &b->cfg;
    cr_assert_eq(c->family, k->family);
    cr_assert_eq(c->n_layer, k->n_layer);
    cr_assert_eq(c->n_head, k->n_head);
    cr_assert_eq(c->d_model, k->d_model);
    cr_assert_eq(c->d_ff, k->d_ff);
    cr_assert_eq(c->n_ctx, k->n_ctx);
    cr_assert_eq(c->vocab_size, k->vocab_size);
    cr_assert_eq(c->type_vocab_size, k->type_vocab_size);
    cr_assert_eq(c->ln_eps, k->ln_eps);
    cr_assert_eq(c->act, k->act);
    cr_assert_eq(c->causal, k->causal);
    size_t d = (size_t)c->d_model, f = (size_t)c->d_ff, V = (size_t)c->vocab_size;
    double m = 0, x;
#define CMP(field, n) if ((x = diff(a->field, b->field, (n))) > m) m = x
    CMP(wte, V * d);
    CMP(wpe, (size_t)c->n_ctx * d);
    if (c->family == HS_FAMILY_BERT) {
        CMP(wtt, (size_t)c->type_vocab_size * d);
        CMP(emb_ln_w, d);
        CMP(emb_ln_b, d);
    } else {
        CMP(lnf_w, d);
        CMP(lnf_b, d);
    }
    for (int l = 0; l < c->n_layer; l++) {
        CMP(layers[l].ln1_w, d);
        CMP(layers[l].ln1_b, d);
        CMP(layers[l].w_qkv, d * 3 * d);
        CMP(layers[l].b_qkv, 3 * d);
        CMP(layers[l].w_o, d * d);
        CMP(layers[l].b_o, d);
        CMP(layers[l].ln2_w, d);
        CMP(layers[l].ln2_b, d);
        CMP(layers[l].w_fc, d * f);
        CMP(layers[l].b_fc, f);
        CMP(layers[l].w_proj, f * d);
        CMP(layers[l].b_proj, d);
    }
    if (with_mlm) {
        CMP(mlm_w, d * d);
        CMP(mlm_b, d);
        CMP(mlm_ln_w, d);
        CMP(mlm_ln_b, d);
        CMP(mlm_bias, V);
        CMP(decoder, V * d);
    }
#undef CMP
    return m;
}

static inline void expect_same_ids(const hs_model *a, const hs_model *b, const char *text)
{
    hs_encoding x = {0}, y = {0};
    hs_error err = {{0}};
    cr_assert_eq(hs_tokenizer_encode(hs_model_tokenizer(a), text, strlen(text), NULL, 0, &x, &err), HS_OK);
    cr_assert_eq(hs_tokenizer_encode(hs_model_tokenizer(b), text, strlen(text), NULL, 0, &y, &err), HS_OK);
    cr_assert_eq(x.n, y.n, "'%s': %zu vs %zu tokens", text, x.n, y.n);
    for (size_t i = 0; i < x.n; i++)
        cr_assert_eq(x.ids[i], y.ids[i], "'%s': token %zu", text, i);
    hs_encoding_free(&x);
    hs_encoding_free(&y);
}

/* Expects the GGUF file at path to hold counts[k] tensors of ggml type types[k]. */
/* hs_gguf_encode of m at F32 refused with HS_E_UNSUPPORTED, writing nothing, in one line
 * holding msg. */
static inline void expect_write_refused(const hs_model *m, const char *msg)
{
    hs_error err = {{0}};
    unsigned char *buf = NULL;
    size_t len = 0;
    hs_gguf_write_options o = {.ftype = HS_GGUF_FTYPE_F32};
    cr_expect_eq(hs_gguf_encode(m, &o, &buf, &len, &err), HS_E_UNSUPPORTED);
    cr_expect_null(buf);
    cr_expect(strstr(err.msg, msg) != NULL, "got '%s', want '%s'", err.msg, msg);
    cr_expect_null(strchr(err.msg, '\n'));
}

static inline void expect_type_counts(const char *path, const uint32_t *types, const int *counts,
                                      int n_types)
{
    hs_gguf *g = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_open(path, &g, &err), HS_OK, "%s", err.msg);
    for (int k = 0; k < n_types; k++) {
        int n = 0;
        for (size_t i = 0; i < hs_gguf_tensor_count(g); i++)
            n += hs_gguf_tensor_at(g, i)->type == types[k];
        cr_expect_eq(n, counts[k], "%s: %d tensors of type %s, expected %d", path, n,
                     hs_ggml_type_name(types[k]), counts[k]);
    }
    hs_gguf_free(g);
}

#endif
