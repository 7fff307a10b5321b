/* T5, the encoder-decoder: the tiny checkpoints of fixtures/t5/models/ (a v1.0 kind, F32,
 * tied, ReLU; a v1.1 kind, BF16 in two shards, gated GELU, untied, more decoder layers)
 * against the float64 reference fixtures/ref/t5_ref.py (goldens in fixtures/t5/golden/):
 * the three kinds of maps (encoder self-attention, decoder self-attention, cross-attention)
 * 1e-5, the encoder's output and the decoder's final states 1e-5, each target token's
 * negative log-likelihood 1e-5 relative; at n >= 256 (every 16th query row of each map) with
 * d_kv 64; under self- and cross-attention head masks; the relative position buckets
 * against transformers' float32 computation; the refusals. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "headscope/forward.h"
#include "headscope/importance.h"
#include "headscope/model.h"
#include "headscope/npy.h"
#include "headscope/report.h"
#include "nn/block.h"
#include "nn/ops.h"
#include "testutil.h"

#define T5DIR "fixtures/t5/"

/* The maps a pass gives, kept every step-th query row: (L_stack, H, rows, n_keys) each. */
typedef struct maps {
    const hs_model_config *c;
    int step, n_enc, n_dec;
    float *enc, *dec, *cross;
} maps;

static void keep_rows(float *dst, const float *probs, int H, int nq, int nk, int step)
{
    int rows = (nq + step - 1) / step;
    for (int h = 0; h < H; h++)
        for (int r = 0; r < rows; r++)
            memcpy(dst + ((size_t)h * rows + r) * nk,
                   probs + ((size_t)h * nq + (size_t)r * step) * nk, (size_t)nk * sizeof *dst);
}

static int on_self(void *user, int layer, const float *probs, int H, int n)
{
    maps *mp = user;
    int enc = layer < mp->c->n_enc_layer, l = enc ? layer : layer - mp->c->n_enc_layer;
    cr_assert_eq(n, enc ? mp->n_enc : mp->n_dec);
    size_t per = (size_t)H * ((n + mp->step - 1) / mp->step) * n;
    keep_rows((enc ? mp->enc : mp->dec) + l * per, probs, H, n, n, mp->step);
    return 0;
}

static int on_cross(void *user, int layer, const float *probs, int H, int nd, int ne)
{
    maps *mp = user;
    int l = layer - mp->c->n_enc_layer;
    cr_assert(l >= 0);
    cr_assert_eq(nd, mp->n_dec);
    cr_assert_eq(ne, mp->n_enc);
    size_t per = (size_t)H * ((nd + mp->step - 1) / mp->step) * ne;
    keep_rows(mp->cross + l * per, probs, H, nd, ne, mp->step);
    return 0;
}

static void near(const float *got, const hs_npy *want, double tol, int relative, const char *what)
{
    const float *w = want->data;
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < want->count; i++) {
        double e = fabs((double)got[i] - w[i]) / (relative ? fmax(1.0, fabs(w[i])) : 1.0);
        if (!(e <= worst)) {
            worst = e;
            at = i;
        }
    }
    cr_assert(worst <= tol, "%s: %g at %zu (got %g, want %g), tolerance %g", what, worst, at,
              got[at], w[at], tol);
}

static hs_npy gold(const char *cs, const char *what)
{
    char path[256];
    snprintf(path, sizeof path, T5DIR "golden/%s.%s.npy", cs, what);
    return tu_npy(path);
}

/* Runs case cs on model and compares everything with the goldens. */
static void check_case(const char *model, const char *cs, int step)
{
    char path[256];
    snprintf(path, sizeof path, T5DIR "models/%s", model);
    hs_model *m = tu_load(path);
    const hs_model_config *c = hs_model_config_of(m);
    hs_npy enc_ids = gold(cs, "enc_ids"), dec_ids = gold(cs, "dec_ids"), tgt = gold(cs, "target");
    hs_npy ea = gold(cs, "enc_attn"), da = gold(cs, "dec_attn"), xa = gold(cs, "cross_attn");
    hs_npy eh = gold(cs, "enc_hidden"), hid = gold(cs, "hidden"), nll = gold(cs, "nll");
    int ne = (int)enc_ids.count, nd = (int)dec_ids.count, V = c->vocab_size;
    cr_assert_eq(ea.shape[0], (size_t)c->n_enc_layer);
    cr_assert_eq(da.shape[0], (size_t)(c->n_layer - c->n_enc_layer));
    maps mp = {c, step, ne, nd, calloc(ea.count, 4), calloc(da.count, 4), calloc(xa.count, 4)};
    float *logits = malloc((size_t)nd * V * sizeof *logits);
    float *h = malloc(hid.count * 4), *e = malloc(eh.count * 4);
    hs_npy hm = {0}, xhm = {0};
    snprintf(path, sizeof path, T5DIR "golden/%s.head_mask.npy", cs);
    int masked = access(path, R_OK) == 0;
    if (masked) {
        hm = gold(cs, "head_mask");
        xhm = gold(cs, "cross_head_mask");
    }
    hs_forward_opts o = {.on_attn = on_self, .on_cross = on_cross, .user = &mp, .logits = logits,
                         .hidden = h, .enc_hidden = e, .head_mask = masked ? hm.data : NULL,
                         .cross_head_mask = masked ? xhm.data : NULL};
    hs_error err = {{0}};
    cr_assert_eq(hs_forward_encdec(m, enc_ids.data, ne, dec_ids.data, nd, &o, NULL, &err), HS_OK,
                 "%s", err.msg);
    near(mp.enc, &ea, 1e-5, 0, "encoder self-attention");
    near(mp.dec, &da, 1e-5, 0, "decoder self-attention");
    near(mp.cross, &xa, 1e-5, 0, "cross-attention");
    near(e, &eh, 1e-5, 1, "encoder output");
    near(h, &hid, 1e-5, 1, "decoder final states");
    const int32_t *t = tgt.data;
    for (int i = 0; i < nd; i++) { /* logits row i predicts target token i */
        const float *row = logits + (size_t)i * V;
        h[i] = (float)(hs_op_log_sum_exp(row, V) - (double)row[t[i]]);
    }
    near(h, &nll, 1e-5, 1, "target negative log-likelihood");
    free(mp.enc);
    free(mp.dec);
    free(mp.cross);
    free(logits);
    free(h);
    free(e);
    hs_npy *all[] = {&enc_ids, &dec_ids, &tgt, &ea, &da, &xa, &eh, &hid, &nll, &hm, &xhm};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        hs_npy_free(all[i]);
    hs_model_free(m);
}

Test(t5, small_v10_f32) { check_case("t5-tiny", "small", 1); }
Test(t5, small_v11_bf16_sharded) { check_case("t5-v1_1-tiny", "small_v11", 1); }
Test(t5, head_masks_self_and_cross) { check_case("t5-tiny", "masked", 1); }
Test(t5, long_v10_f32_n300_256) { check_case("t5-tiny", "long", 16); }
Test(t5, long_v11_bf16_n256_260) { check_case("t5-v1_1-tiny", "long_v11", 16); }

Test(t5, config_read)
{
    hs_model *m = tu_load(T5DIR "models/t5-v1_1-tiny");
    const hs_model_config *c = hs_model_config_of(m);
    cr_assert_eq(c->family, HS_FAMILY_T5);
    cr_assert_eq(c->n_enc_layer, 2);
    cr_assert_eq(c->n_layer, 5); /* 2 encoder + 3 decoder blocks */
    cr_assert_eq(c->d_head, 64);
    cr_assert_eq(hs_model_attn_width(c), 128); /* n_head d_kv, not d_model (32) */
    cr_assert_eq(c->act, HS_ACT_GELU_TANH);
    cr_assert(c->gated);
    cr_assert_eq(c->decoder_start_id, 2);
    cr_assert_eq(c->arch->head_scale, 0.0f); /* untied: no rescale */
    cr_assert_eq(c->arch->rel_buckets, 16);
    cr_assert_eq(c->arch->rel_max_distance, 64);
    cr_assert_str_eq(hs_model_storage_dtype(m), "BF16");
    cr_assert_eq(hs_vis_is_causal(hs_model_layer_visibility(c, 1)), 0);
    cr_assert_eq(hs_vis_is_causal(hs_model_layer_visibility(c, 2)), 1);
    hs_model_free(m);
    m = tu_load(T5DIR "models/t5-tiny");
    c = hs_model_config_of(m);
    cr_assert_eq(c->act, HS_ACT_RELU);
    cr_assert(!c->gated);
    cr_assert_float_eq(c->arch->head_scale, 1.0f / sqrtf(32.0f), 1e-7);
    hs_model_free(m);
}

/* transformers' buckets (fixtures/t5/golden/buckets.npy, rows: buckets, max distance,
 * bidirectional, then offsets -1023..1023), t5's default 32 / 128 among them */
Test(t5, buckets_as_transformers)
{
    hs_npy b = tu_npy(T5DIR "golden/buckets.npy");
    const int32_t *v = b.data;
    size_t w = b.shape[1];
    for (size_t r = 0; r < b.shape[0]; r++) {
        const int32_t *row = v + r * w;
        for (int rel = -1023; rel <= 1023; rel++)
            cr_assert_eq(hs_t5_bucket(rel, row[2], row[0], row[1]), row[3 + rel + 1023],
                         "buckets %d, distance %d, %s, offset %d", row[0], row[1],
                         row[2] ? "bidirectional" : "unidirectional", rel);
    }
    hs_npy_free(&b);
    /* by hand, bidirectional 32 / 128: 16 buckets a side, 8 exact */
    cr_assert_eq(hs_t5_bucket(-7, 1, 32, 128), 7);
    cr_assert_eq(hs_t5_bucket(7, 1, 32, 128), 16 + 7);
    cr_assert_eq(hs_t5_bucket(-16, 1, 32, 128), 10); /* 8 + 2 log2(16 / 8) */
    cr_assert_eq(hs_t5_bucket(-5000, 1, 32, 128), 15);
    cr_assert_eq(hs_t5_bucket(3, 0, 32, 128), 0); /* a later key, unidirectional */
}

Test(t5, refusals)
{
    hs_model *m = tu_load(T5DIR "models/t5-tiny");
    int32_t ids[4] = {5, 6, 7, 8};
    hs_error err = {{0}};
    cr_assert_eq(hs_forward(m, ids, NULL, 4, NULL, NULL, &err), HS_E_UNSUPPORTED);
    cr_assert(strstr(err.msg, "encoder-decoder"), "%s", err.msg);
    hs_forward_opts o = {.batch = 2};
    cr_assert_eq(hs_forward_encdec(m, ids, 4, ids, 4, &o, NULL, &err), HS_E_UNSUPPORTED);
    ids[2] = 300; /* outside the vocabulary */
    cr_assert_eq(hs_forward_encdec(m, ids, 4, ids, 2, NULL, NULL, &err), HS_E_INPUT);
    hs_model_free(m);
    m = tu_load("fixtures/tiny-gpt2");
    cr_assert_eq(hs_forward_encdec(m, ids, 2, ids, 2, NULL, NULL, &err), HS_E_ARG);
    cr_assert(strstr(err.msg, "not an encoder-decoder"), "%s", err.msg);
    hs_model_free(m);
}

/* zero ablation of every head of each kind, the loss the decoder's (t5_ref.py's deltas) */
Test(t5, ablation_per_kind_of_head)
{
    hs_model *m = tu_load(T5DIR "models/t5-tiny");
    const hs_model_config *c = hs_model_config_of(m);
    hs_npy src = gold("small", "enc_ids"), tgt = gold("small", "target");
    hs_npy nll = gold("small", "nll"), abl = gold("small", "ablation");
    size_t LH = (size_t)c->n_layer * c->n_head;
    cr_assert_eq(abl.count, 2 * LH);
    double base, *self = malloc(LH * sizeof *self), *cross = malloc(LH * sizeof *cross);
    hs_error err = {{0}};
    cr_assert_eq(hs_encdec_ablation(m, src.data, (int)src.count, tgt.data, (int)tgt.count,
                                    &base, self, cross, &err), HS_OK, "%s", err.msg);
    double mean = 0;
    for (size_t i = 0; i < nll.count; i++)
        mean += ((const float *)nll.data)[i];
    mean /= (double)nll.count;
    cr_assert(fabs(base - mean) <= 1e-5 * fmax(1, fabs(mean)), "base %g, want %g", base, mean);
    const float *w = abl.data;
    for (size_t k = 0; k < LH; k++) {
        cr_assert(fabs(self[k] - w[k]) <= 1e-5, "self %zu: %g, want %g", k, self[k], w[k]);
        if (isnan(w[LH + k]))
            cr_assert(isnan(cross[k]), "cross %zu of an encoder layer: %g", k, cross[k]);
        else
            cr_assert(fabs(cross[k] - w[LH + k]) <= 1e-5, "cross %zu: %g, want %g", k, cross[k],
                      w[LH + k]);
    }
    free(self);
    free(cross);
    hs_npy *all[] = {&src, &tgt, &nll, &abl};
    for (size_t i = 0; i < 4; i++)
        hs_npy_free(all[i]);
    hs_model_free(m);
}

/* config.json edits of t5-tiny (sed expression) that are refused, naming the problem, and
 * the tensors a stack needs */
static void refused(const char *sed, hs_status want, const char *msg)
{
    char dir[256], cmd[2048];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "ln -s \"$PWD/" T5DIR "models/t5-tiny/model.safetensors\" '%s/' && "
             "sed -e '%s' " T5DIR "models/t5-tiny/config.json > '%s/config.json'", dir, sed, dir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    hs_model *m = NULL;
    hs_error err = {{0}};
    hs_status st = hs_model_load(dir, &m, &err);
    hs_model_free(m);
    tu_rm_rf(dir);
    cr_assert_eq(st, want, "%s: status %d (%s), want %d", sed, (int)st, err.msg, (int)want);
    cr_assert(strstr(err.msg, msg), "%s: '%s' lacks '%s'", sed, err.msg, msg);
}

Test(t5, config_refusals)
{
    refused("s/\"relu\"/\"gated-swish\"/", HS_E_UNSUPPORTED, "feed_forward_proj 'gated-swish'");
    refused("s/\"relative_attention_num_buckets\": 32/\"relative_attention_num_buckets\": 3/",
            HS_E_UNSUPPORTED, "relative position buckets");
    refused("/\"d_kv\"/d", HS_E_FORMAT, "missing required field 'd_kv'");
    refused("s/\"num_decoder_layers\": 2/\"num_decoder_layers\": 0/", HS_E_UNSUPPORTED,
            "an encoder-decoder other than T5's");
    refused("s/\"decoder_start_token_id\": 0/\"decoder_start_token_id\": 300/", HS_E_VALUE,
            "decoder_start_token_id 300 is outside the vocabulary");
    /* more decoder layers than the file holds: the missing tensor named */
    refused("s/\"num_decoder_layers\": 2/\"num_decoder_layers\": 3/", HS_E_FORMAT,
            "decoder.block.2.layer.0.layer_norm.weight");
    /* an untied config needs lm_head.weight, which this file lacks */
    refused("s/\"tie_word_embeddings\": true/\"tie_word_embeddings\": false/", HS_E_FORMAT,
            "lm_head.weight");
}

/* the hand-written backward: every head's mask derivative against t5_ref.py's central
 * differences in float64, both kinds of model (ReLU tied F32; gated GELU untied BF16) */
static void check_gradient(const char *model, const char *cs, int masked)
{
    char path[256];
    snprintf(path, sizeof path, T5DIR "models/%s", model);
    hs_model *m = tu_load(path);
    const hs_model_config *c = hs_model_config_of(m);
    hs_npy src = gold(cs, "enc_ids"), tgt = gold(cs, "target");
    hs_npy nll = gold(cs, "nll"), grad = gold(cs, "gradient");
    size_t LH = (size_t)c->n_layer * c->n_head;
    cr_assert_eq(grad.count, 2 * LH);
    double loss, *self = malloc(LH * sizeof *self), *cross = malloc(LH * sizeof *cross);
    hs_error err = {{0}};
    hs_npy hm = {0}, xhm = {0};
    if (masked) {
        hm = gold(cs, "head_mask");
        xhm = gold(cs, "cross_head_mask");
    }
    cr_assert_eq(hs_encdec_gradient(m, src.data, (int)src.count, tgt.data, (int)tgt.count,
                                    hm.data, xhm.data, &loss, self, cross, &err), HS_OK, "%s",
                 err.msg);
    double mean = 0, top = 0;
    for (size_t i = 0; i < nll.count; i++)
        mean += ((const float *)nll.data)[i];
    mean /= (double)nll.count;
    cr_assert(fabs(loss - mean) <= 1e-5 * fmax(1, fabs(mean)), "loss %g, want %g", loss, mean);
    const float *w = grad.data;
    for (size_t k = 0; k < 2 * LH; k++)
        top = isnan(w[k]) ? top : fmax(top, fabs(w[k]));
    for (size_t k = 0; k < LH; k++) {
        cr_assert(fabs(self[k] - w[k]) <= 1e-5 * top, "%s self %zu: %g, want %g", cs, k, self[k],
                  w[k]);
        if (isnan(w[LH + k]))
            cr_assert(isnan(cross[k]), "%s cross %zu of an encoder layer: %g", cs, k, cross[k]);
        else
            cr_assert(fabs(cross[k] - w[LH + k]) <= 1e-5 * top, "%s cross %zu: %g, want %g", cs,
                      k, cross[k], w[LH + k]);
    }
    free(self);
    free(cross);
    hs_npy *all[] = {&src, &tgt, &nll, &grad, &hm, &xhm};
    for (size_t i = 0; i < 6; i++)
        hs_npy_free(all[i]);
    hs_model_free(m);
}

Test(t5, gradient_v10_f32) { check_gradient("t5-tiny", "small", 0); }
Test(t5, gradient_v11_bf16) { check_gradient("t5-v1_1-tiny", "small_v11", 0); }
/* at a mask with heads off and one cross head at 0.5 (pruning's later rounds) */
Test(t5, gradient_at_a_mask) { check_gradient("t5-tiny", "masked", 1); }

/* Michel et al.'s rounds over both kinds of heads against t5_ref.py's (its gradients by
 * central differences; no near tie at any cut): the order exactly, the losses 1e-5 */
Test(t5, pruning_rounds_both_kinds)
{
    hs_model *m = tu_load(T5DIR "models/t5-tiny");
    hs_npy src = gold("small", "enc_ids"), tgt = gold("small", "target");
    hs_npy order = gold("small", "prune_order"), loss = gold("small", "prune_loss");
    int32_t got[32];
    double curve[33];
    int rounds = 0;
    hs_error err = {{0}};
    cr_assert_eq(order.count, 12); /* 8 self-attention heads, 4 cross-attention heads */
    cr_assert_eq(hs_encdec_prune(m, src.data, (int)src.count, tgt.data, (int)tgt.count, 0.25,
                                 got, curve, &rounds, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(rounds, 4);
    cr_assert_eq((size_t)rounds + 1, loss.count);
    for (size_t i = 0; i < order.count; i++)
        cr_assert_eq(got[i], ((const int32_t *)order.data)[i], "removal %zu", i);
    for (int r = 0; r <= rounds; r++) {
        double want = ((const double)((const float *)loss.data)[r]);
        cr_assert(fabs(curve[r] - want) <= 1e-5 * fmax(1, fabs(want)), "round %d: %g, want %g",
                  r, curve[r], want);
    }
    cr_assert_eq(hs_encdec_prune(m, src.data, (int)src.count, tgt.data, (int)tgt.count, 0.0,
                                 got, curve, &rounds, &err), HS_E_ARG);
    hs_npy *all[] = {&src, &tgt, &order, &loss};
    for (size_t i = 0; i < 4; i++)
        hs_npy_free(all[i]);
    hs_model_free(m);
}
