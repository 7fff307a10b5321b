/* GGUF files of the multi-query families, llama.cpp's falcon and starcoder, written by
 * headscope's converter from the shipped tiny checkpoints (fixtures/mqa-models/, with the
 * 128-token byte-level tokenizer fixtures/gguf/arch/bpe128.tokenizer.json attached):
 *   - F32: maps, final hidden states and logits bit-identical to the Hugging Face folder's, and
 *     the file converted again byte for byte the same;
 *   - the fused attn_qkv in the layout of llama.cpp's converter (FalconModel's regrouping,
 *     [Q | K | V] by K/V group), computed here from the folder's safetensors by that rule;
 *   - BF16 within the bound docs/gguf.md states;
 *   - the keys llama.cpp's loader reads (head_count_kv, Falcon-40B's attn_norm_2);
 *   - what llama.cpp's falcon cannot hold (Falcon-RW's ALiBi, a sequential block, biases) and
 *     the architectures headscope does not read (t5encoder) refused in one line.
 * And llama.cpp's deepseek2, from the latent-attention checkpoints of fixtures/mla-models/
 * (V2 with q_lora, V2-Lite without, YaRN with mscale equal to mscale_all_dim and not, softmax
 * experts with group-limited routing, V3's sigmoid router with its correction bias):
 *   - F32 bit-identical to the folder, and again byte for byte;
 *   - attn_k_b / attn_v_b and the stacked experts as the converter lays them out, from the
 *     folder's kv_b_proj and experts by its rule;
 *   - an unknown gating function, sigmoid without exp_probs_b, another rope scaling refused. */
#include <math.h>
#include <string.h>

#include "headscope/forward.h"
#include "headscope/gguf.h"
#include "headscope/model.h"
#include "headscope/tokenizer.h"
#include "core/core.h"
#include "gguf_util.h"
#include "model/model_internal.h"
#include "model/safetensors.h"
#include "testutil.h"

#define MQA "fixtures/mqa-models/"
#define MLA "fixtures/mla-models/"
#define TOK "fixtures/gguf/arch/bpe128.tokenizer.json"
#define TOK256 MLA "tiny-deepseek-lite/tokenizer.json"

/* A folder (fixtures/mqa-models/NAME, or fixtures/mla-models/NAME for tiny-deepseek-*) with a
 * tokenizer attached where it has none (bpe128, or tiny-deepseek-lite's 256 tokens). */
static hs_model *load_hf(const char *name)
{
    char path[256];
    int mla = !strncmp(name, "tiny-deepseek", 13);
    snprintf(path, sizeof path, "%s%s", mla ? MLA : MQA, name);
    hs_model *m = tu_load(path);
    hs_error err = {{0}};
    if (!m->tok)
        cr_assert_eq(hs_tokenizer_load_json(mla ? TOK256 : TOK, &m->tok, &err), HS_OK, "%s", err.msg);
    return m;
}

/* m written as GGUF of type ft, into memory (*len bytes) and opened again from a file. */
static hs_model *convert(const hs_model *m, hs_gguf_ftype ft, unsigned char **buf, size_t *len,
                         char *dir, size_t cap)
{
    hs_error err = {{0}};
    hs_gguf_write_options o = {.ftype = ft, .name = "t"};
    cr_assert_eq(hs_gguf_encode(m, &o, buf, len, &err), HS_OK, "%s", err.msg);
    tu_mkdtemp(dir, cap);
    char path[300];
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    tu_write_file(path, *buf, *len);
    return tu_load(path);
}

typedef struct pass {
    float *attn, *hidden, *logits;
    size_t n_attn, n_hidden, n_logits;
} pass;

static pass run(const hs_model *m)
{
    static const int32_t ids[] = {84, 72, 69, 0, 98, 99, 70, 65, 92, 112, 15, 96, 103, 108, 33, 66};
    const int n = (int)(sizeof ids / sizeof ids[0]);
    const hs_model_config *c = hs_model_config_of(m);
    hs_error err = {{0}};
    hs_trace *trace = NULL;
    pass p = {.n_hidden = (size_t)n * (size_t)c->d_model, .n_logits = (size_t)n * (size_t)c->vocab_size,
              .n_attn = (size_t)c->n_layer * (size_t)c->n_head * (size_t)n * (size_t)n};
    cr_assert_eq(hs_trace_new(m, n, &trace, &err), HS_OK);
    p.attn = malloc((p.n_attn + p.n_hidden + p.n_logits) * sizeof *p.attn); /* one block */
    p.hidden = p.attn + p.n_attn;
    p.logits = p.hidden + p.n_hidden;
    hs_forward_opts o = {.on_attn = hs_trace_observe, .user = trace, .hidden = p.hidden,
                         .logits = p.logits};
    cr_assert_eq(hs_forward(m, ids, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);
    memcpy(p.attn, trace->attn, p.n_attn * sizeof *p.attn);
    hs_trace_free(trace);
    return p;
}

/* The largest map difference between m's GGUF of type ft and m; with ft F32 also the hidden
 * states and logits must be identical, and the file converted again the same bytes. */
static double round_trip(const char *name, hs_gguf_ftype ft)
{
    hs_model *h = load_hf(name);
    unsigned char *buf = NULL, *buf2 = NULL;
    size_t len = 0, len2 = 0;
    char dir[128];
    hs_model *g = convert(h, ft, &buf, &len, dir, sizeof dir);
    cr_expect_eq(hs_model_config_of(g)->family, hs_model_config_of(h)->family);
    cr_expect_eq(hs_model_config_of(g)->n_kv_head, hs_model_config_of(h)->n_kv_head);
    cr_expect_eq(hs_model_config_of(g)->arch->parallel_residual,
                 hs_model_config_of(h)->arch->parallel_residual);
    pass a = run(h), b = run(g);
    double d = tu_max_abs_diff(a.attn, b.attn, a.n_attn, NULL);
    if (ft == HS_GGUF_FTYPE_F32) {
        cr_expect_eq(d, 0.0, "%s: maps differ by %g", name, d);
        cr_expect_eq(tu_max_abs_diff(a.hidden, b.hidden, a.n_hidden, NULL), 0.0, "%s: hidden", name);
        cr_expect_eq(tu_max_abs_diff(a.logits, b.logits, a.n_logits, NULL), 0.0, "%s: logits", name);
        char dir2[128];
        hs_model *g2 = convert(g, ft, &buf2, &len2, dir2, sizeof dir2);
        cr_expect(len2 == len && !memcmp(buf, buf2, len), "%s: GGUF -> GGUF differs", name);
        hs_model_free(g2);
        tu_rm_rf(dir2);
        free(buf2);
    }
    free(a.attn);
    free(b.attn);
    hs_model_free(g);
    hs_model_free(h);
    tu_rm_rf(dir);
    free(buf);
    return d;
}

Test(gguf_arch, falcon_7b_layout_f32_equals_its_folder) { round_trip("tiny-falcon-mq", HS_GGUF_FTYPE_F32); }
Test(gguf_arch, falcon_40b_layout_f32_equals_its_folder) { round_trip("tiny-falcon-nd", HS_GGUF_FTYPE_F32); }
Test(gguf_arch, starcoder_f32_equals_its_folder) { round_trip("tiny-bigcode", HS_GGUF_FTYPE_F32); }
Test(gguf_arch, starcoder_multi_head_f32_equals_its_folder) { round_trip("tiny-bigcode-mha", HS_GGUF_FTYPE_F32); }

/* F16 and BF16 (every 2-D weight) against the folder: exact where the checkpoint is stored in
 * that type (tiny-falcon-nd in BF16, the others in F16), else within docs/gguf.md's 3e-2 (these
 * random models' attention is peaky, as the table there says). */
static void check_half(hs_gguf_ftype ft, const char *exact)
{
    static const char *const names[] = {"tiny-falcon-mq", "tiny-falcon-nd", "tiny-bigcode",
                                        "tiny-bigcode-mha"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        double d = round_trip(names[k], ft);
        int same = (exact && !strcmp(names[k], exact)) || (!exact && strcmp(names[k], "tiny-falcon-nd"));
        cr_log_info("%s %s: maps max|d| %.3g", names[k], ft == HS_GGUF_FTYPE_F16 ? "f16" : "bf16", d);
        if (same)
            cr_expect_eq(d, 0.0, "%s: stored in this type, maps max|d| %g", names[k], d);
        else
            cr_expect(d > 0 && d <= 3e-2, "%s: maps max|d| %g", names[k], d);
    }
}

Test(gguf_arch, bf16_within_the_documented_bound) { check_half(HS_GGUF_FTYPE_BF16, "tiny-falcon-nd"); }
Test(gguf_arch, f16_within_the_documented_bound) { check_half(HS_GGUF_FTYPE_F16, NULL); }

/* ---- the file's layout, against llama.cpp's converter ------------------------------------ */

/* A key's value (its first element). */
static hs_gguf_value key_val(const hs_gguf *g, const char *key)
{
    long i = hs_gguf_find_kv(g, key);
    cr_assert_geq(i, 0, "missing key %s", key);
    hs_gguf_value v;
    cr_assert_eq(hs_gguf_kv_get(g, (size_t)i, 0, &v), HS_OK);
    return v;
}
#define key_u32(g, key) ((uint32_t)key_val(g, key).u)
#define key_f32(g, key) ((float)key_val(g, key).f)

static float elem(const hs_tensor_view *t, size_t i)
{
    const unsigned char *p = t->data;
    if (t->dtype == HS_DT_F32) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
    return t->dtype == HS_DT_BF16 ? hs_bf16_to_f32(h) : hs_f16_to_f32(h);
}

/* The fused QKV of layer 0, rows as the converter lays them out: the folder's rows viewed as
 * (n_kv, s + 2, dh, E); the queries [:, :s], then the keys [:, s], then the values [:, s + 1]. */
static void check_qkv(const char *name, const char *hf_name, const char *arch, int kv_want, int s,
                      int has_norm_2)
{
    hs_model *h = load_hf(name);
    unsigned char *buf = NULL;
    size_t len = 0;
    char dir[128], path[256];
    hs_model *back = convert(h, HS_GGUF_FTYPE_F32, &buf, &len, dir, sizeof dir);
    hs_model_free(back);
    hs_gguf *g = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_parse(buf, len, &g, &err), HS_OK, "%s", err.msg);
    long ai = hs_gguf_find_kv(g, "general.architecture");
    hs_gguf_value v;
    cr_assert_eq(hs_gguf_kv_get(g, (size_t)ai, 0, &v), HS_OK);
    cr_expect_str_eq(v.str, arch);
    char key[96];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
    int G = (int)key_u32(g, key);
    cr_expect_eq(G, kv_want, "%s: head_count_kv %d", name, G);
    cr_expect_eq(hs_gguf_find_tensor(g, "blk.0.attn_norm_2.weight") != NULL, has_norm_2);
    cr_expect(strcmp(arch, "falcon") || !hs_gguf_find_tensor(g, "blk.0.attn_qkv.bias"),
              "%s: falcon has no biases", name);
    const hs_gguf_tensor *t = hs_gguf_find_tensor(g, "blk.0.attn_qkv.weight");
    cr_assert_not_null(t);
    snprintf(path, sizeof path, MQA "%s/model.safetensors", name);
    hs_safetensors *st = NULL;
    cr_assert_eq(hs_safetensors_open(path, &st, &err), HS_OK, "%s", err.msg);
    const hs_tensor_view *w = hs_safetensors_find(st, hf_name);
    cr_assert_not_null(w, "%s: no %s", name, hf_name);
    size_t E = (size_t)w->shape[1], rows = (size_t)w->shape[0], dh = rows / (size_t)(G * (s + 2));
    cr_assert_eq((size_t)t->ne[0], E);
    cr_assert_eq((size_t)t->ne[1], rows);
    size_t bad = 0, out = 0;
    for (int part = 0; part < 3; part++)      /* q, k, v blocks in the file's order */
        for (int grp = 0; grp < G; grp++)
            for (int j = 0; j < (part ? 1 : s); j++)
                for (size_t i = 0; i < dh; i++, out++) {
                    size_t blk = (size_t)(part ? s + part - 1 : j);
                    size_t src = ((size_t)grp * (size_t)(s + 2) + blk) * dh + i;
                    for (size_t c = 0; c < E; c++) {
                        float got;
                        memcpy(&got, t->data + (out * E + c) * 4, 4);
                        bad += got != elem(w, src * E + c);
                    }
                }
    cr_expect_eq(out, rows);
    cr_expect_eq(bad, 0, "%s: %zu values of attn_qkv out of the converter's order", name, bad);
    hs_safetensors_close(st);
    hs_gguf_free(g);
    tu_rm_rf(dir);
    free(buf);
    hs_model_free(h);
}

Test(gguf_arch, falcon_qkv_regrouped_as_llama_cpp_converter)
{
    check_qkv("tiny-falcon-nd", "transformer.h.0.self_attention.query_key_value.weight", "falcon", 2, 4, 1);
    check_qkv("tiny-falcon-mq", "transformer.h.0.self_attention.query_key_value.weight", "falcon", 1, 4, 0);
}

/* starcoder: llama.cpp's build_qkv splits [Q | K | V]; a multi-head c_attn stores per head
 * [q k v] (one group a head), and the file says its K/V heads. */
Test(gguf_arch, starcoder_qkv_and_kv_heads)
{
    check_qkv("tiny-bigcode", "transformer.h.0.attn.c_attn.weight", "starcoder", 1, 4, 0);
    check_qkv("tiny-bigcode-mha", "transformer.h.0.attn.c_attn.weight", "starcoder", 4, 1, 0);
}

/* ---- refused ------------------------------------------------------------------------------ */

Test(gguf_arch, falcon_rw_sequential_and_biases_refused_by_name)
{
    hs_model *m = load_hf("tiny-falcon-rw");
    expect_write_refused(m, "this Falcon model (Falcon-RW's layout: ALiBi positions) has no GGUF "
                            "form: llama.cpp's falcon runs rotary positions in a parallel block only");
    hs_model_free(m);
    m = load_hf("tiny-falcon-mq");
    m->arch.parallel_residual = 0;
    expect_write_refused(m, "this Falcon model (a sequential block) has no GGUF form");
    m->arch.parallel_residual = 1;
    m->arch.biases = 1;
    expect_write_refused(m, "this Falcon model has biases (config.json bias true), and llama.cpp's "
                            "falcon has none");
    m->arch.biases = 0;
    m->arch.rotary_dims = 4;
    expect_write_refused(m, "this Falcon model rotates 4 of its 16 head dimensions");
    hs_model_free(m);
}

/* A starcoder file renamed t5encoder (as long): llama.cpp's T5 encoder, which headscope does
 * not read from GGUF, refused in one line naming it. */
Test(gguf_arch, unread_architectures_refused_by_name)
{
    hs_model *h = load_hf("tiny-bigcode");
    unsigned char *buf = NULL;
    size_t len = 0;
    char dir[128], path[300];
    hs_model_free(convert(h, HS_GGUF_FTYPE_F32, &buf, &len, dir, sizeof dir));
    size_t at = 0;
    while (at + 9 <= len && memcmp(buf + at, "starcoder", 9))
        at++;
    cr_assert_leq(at + 9, len);
    memcpy(buf + at, "t5encoder", 9);
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    tu_write_file(path, buf, len);
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_expect_eq(hs_model_load(path, &m, &err), HS_E_UNSUPPORTED);
    cr_expect(strstr(err.msg, "general.architecture 't5encoder' is not supported") != NULL, "%s",
              err.msg);
    cr_expect_null(strchr(err.msg, '\n'));
    hs_model_free(h);
    tu_rm_rf(dir);
    free(buf);
}

/* ---- deepseek2 ---------------------------------------------------------------------------- */

Test(gguf_arch, deepseek2_f32_equals_its_folder, .timeout = 60)
{
    static const char *const names[] = {"tiny-deepseek-v2", "tiny-deepseek-lite", "tiny-deepseek-2l",
                                        "tiny-deepseek-moe", "tiny-deepseek-v3"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        round_trip(names[k], HS_GGUF_FTYPE_F32);
}

/* BF16: tiny-deepseek-v3 is stored in BF16 but its norms and router (F32 in the file); Q8_0
 * keeps the experts in F16 (headscope reads experts as F32, F16 or BF16) and the dense MLP of
 * a mixture-of-experts model in Q8_0 */
Test(gguf_arch, deepseek2_bf16_and_q8_0_within_the_documented_bounds)
{
    double d = round_trip("tiny-deepseek-v3", HS_GGUF_FTYPE_BF16);
    cr_expect_eq(d, 0.0, "tiny-deepseek-v3 bf16: maps max|d| %g", d);
    d = round_trip("tiny-deepseek-moe", HS_GGUF_FTYPE_BF16);
    cr_log_info("tiny-deepseek-moe bf16: maps max|d| %.3g", d);
    cr_expect(d > 0 && d <= 3e-2, "tiny-deepseek-moe bf16: maps max|d| %g", d);
    d = round_trip("tiny-deepseek-moe", HS_GGUF_FTYPE_Q8_0);
    cr_log_info("tiny-deepseek-moe q8_0: maps max|d| %.3g", d);
    cr_expect(d > 0 && d <= 5e-2, "tiny-deepseek-moe q8_0: maps max|d| %g", d);
}

/* The file's float at index i of tensor t (F32). */
static float f32_at(const hs_gguf_tensor *t, size_t i)
{
    float f;
    memcpy(&f, t->data + 4 * i, 4);
    return f;
}

/* kv_b_proj (H (nope + v), kv) viewed (H, nope + v, kv): k_b = [:, :nope, :] transposed to
 * (H, kv, nope), v_b = [:, nope:, :]; the experts stacked (E, out, in) in expert order. */
Test(gguf_arch, deepseek2_split_kv_b_and_stacked_experts_as_the_converter)
{
    hs_model *h = load_hf("tiny-deepseek-moe");
    unsigned char *buf = NULL;
    size_t len = 0;
    char dir[128];
    hs_model_free(convert(h, HS_GGUF_FTYPE_F32, &buf, &len, dir, sizeof dir));
    hs_gguf *g = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_parse(buf, len, &g, &err), HS_OK, "%s", err.msg);
    hs_safetensors *st = NULL;
    cr_assert_eq(hs_safetensors_open(MLA "tiny-deepseek-moe/model.safetensors", &st, &err), HS_OK);
    const hs_tensor_view *kvb = hs_safetensors_find(st, "model.layers.1.self_attn.kv_b_proj.weight");
    const hs_gguf_tensor *kb = hs_gguf_find_tensor(g, "blk.1.attn_k_b.weight");
    const hs_gguf_tensor *vb = hs_gguf_find_tensor(g, "blk.1.attn_v_b.weight");
    cr_assert(kvb && kb && vb);
    const size_t H = 2, nope = 16, v = 32, kv = 32, w = nope + v;
    cr_assert_eq(kb->n_dims, 3);
    cr_assert(kb->ne[0] == (int64_t)nope && kb->ne[1] == (int64_t)kv && kb->ne[2] == (int64_t)H);
    cr_assert(vb->ne[0] == (int64_t)kv && vb->ne[1] == (int64_t)v && vb->ne[2] == (int64_t)H);
    size_t bad = 0;
    for (size_t hh = 0; hh < H; hh++)
        for (size_t c = 0; c < kv; c++) {
            for (size_t j = 0; j < nope; j++)
                bad += f32_at(kb, (hh * kv + c) * nope + j) != elem(kvb, (hh * w + j) * kv + c);
            for (size_t j = 0; j < v; j++)
                bad += f32_at(vb, (hh * v + j) * kv + c) != elem(kvb, (hh * w + nope + j) * kv + c);
        }
    cr_expect_eq(bad, 0, "%zu values of attn_k_b / attn_v_b out of the converter's order", bad);
    static const char *const proj[] = {"gate", "up", "down"};
    for (int p = 0; p < 3; p++) {
        char name[96];
        snprintf(name, sizeof name, "blk.1.ffn_%s_exps.weight", proj[p]);
        const hs_gguf_tensor *t = hs_gguf_find_tensor(g, name);
        cr_assert_not_null(t, "%s", name);
        cr_expect_eq(t->ne[2], 8);
        size_t per = (size_t)t->ne[0] * (size_t)t->ne[1];
        for (int e = 0; e < 8; e++) {
            snprintf(name, sizeof name, "model.layers.1.mlp.experts.%d.%s_proj.weight", e, proj[p]);
            const hs_tensor_view *x = hs_safetensors_find(st, name);
            cr_assert_not_null(x, "%s", name);
            for (size_t i = 0; i < per; i++)
                bad += f32_at(t, (size_t)e * per + i) != elem(x, i);
        }
    }
    cr_expect_eq(bad, 0, "%zu values of the stacked experts out of order", bad);
    cr_expect_eq(hs_gguf_find_tensor(g, "blk.1.ffn_gate_inp.weight")->type, HS_GGML_F32);
    cr_expect_null(hs_gguf_find_tensor(g, "blk.1.ffn_gate.weight")); /* a MoE layer */
    cr_expect_not_null(hs_gguf_find_tensor(g, "blk.0.ffn_gate.weight")); /* the dense one */
    hs_safetensors_close(st);
    hs_gguf_free(g);
    tu_rm_rf(dir);
    free(buf);
    hs_model_free(h);
}

/* The keys against config.json's values, as the converter derives them: tiny-deepseek-lite
 * (q_lora_rank null, kv_lora_rank 32, nope 16, rope 8, v 32, YaRN factor 4 from 128 positions,
 * mscale_all_dim 0.707) and tiny-deepseek-v3 (8 experts of 16, 2 used, 1 shared, groups 4 / 2,
 * sigmoid, routed_scaling_factor 2.5, norm_topk_prob, first_k_dense_replace 1). */
typedef struct u32_key {
    const char *key;
    uint32_t v;
} u32_key;

/* name's F32 file, parsed (*buf its bytes, dir its folder: converted_free). */
static hs_gguf *converted(const char *name, unsigned char **buf, char *dir, size_t cap,
                          const u32_key *want, size_t n_want)
{
    hs_model *h = load_hf(name);
    size_t len = 0;
    hs_gguf *g = NULL;
    hs_error err = {{0}};
    hs_model_free(convert(h, HS_GGUF_FTYPE_F32, buf, &len, dir, cap));
    hs_model_free(h);
    cr_assert_eq(hs_gguf_parse(*buf, len, &g, &err), HS_OK, "%s", err.msg);
    for (size_t k = 0; k < n_want; k++)
        cr_expect_eq(key_u32(g, want[k].key), want[k].v, "%s: %s", name, want[k].key);
    return g;
}

static void converted_free(hs_gguf *g, unsigned char *buf, const char *dir)
{
    hs_gguf_free(g);
    tu_rm_rf(dir);
    free(buf);
}

Test(gguf_arch, deepseek2_keys_as_the_converter_writes_them)
{
    static const u32_key lite[] = {
        {"deepseek2.attention.q_lora_rank", 0}, {"deepseek2.attention.kv_lora_rank", 32},
        {"deepseek2.attention.key_length_mla", 24}, {"deepseek2.attention.value_length_mla", 32},
        {"deepseek2.attention.key_length", 40}, {"deepseek2.attention.value_length", 32},
        {"deepseek2.attention.head_count_kv", 1}, {"deepseek2.rope.dimension_count", 8},
        {"deepseek2.rope.scaling.original_context_length", 128},
        {"deepseek2.leading_dense_block_count", 1}};
    static const u32_key v3[] = {
        {"deepseek2.expert_count", 8}, {"deepseek2.expert_used_count", 2},
        {"deepseek2.expert_shared_count", 1}, {"deepseek2.expert_feed_forward_length", 16},
        {"deepseek2.expert_group_count", 4}, {"deepseek2.expert_group_used_count", 2},
        {"deepseek2.expert_gating_func", 2}, {"deepseek2.leading_dense_block_count", 1},
        {"deepseek2.attention.q_lora_rank", 32}, {"deepseek2.feed_forward_length", 96}};
    unsigned char *buf = NULL;
    char dir[128];
    hs_gguf *g = converted("tiny-deepseek-lite", &buf, dir, sizeof dir, lite,
                           sizeof lite / sizeof lite[0]);
    cr_expect_eq(key_f32(g, "deepseek2.rope.scaling.factor"), 4.0f);
    float lm = key_f32(g, "deepseek2.rope.scaling.yarn_log_multiplier");
    cr_expect(fabsf(lm - 0.0707f) <= 1e-6f, "yarn_log_multiplier %.9g, want 0.1 x 0.707", lm);
    cr_expect_lt(hs_gguf_find_kv(g, "deepseek2.rope.scaling.yarn_attn_factor"), 0);
    converted_free(g, buf, dir);
    g = converted("tiny-deepseek-v3", &buf, dir, sizeof dir, v3, sizeof v3 / sizeof v3[0]);
    cr_expect_eq(key_f32(g, "deepseek2.expert_weights_scale"), 2.5f);
    cr_expect_eq(key_val(g, "deepseek2.expert_weights_norm").u, 1);
    converted_free(g, buf, dir);
}

/* The file of h with one UINT32 key's value replaced (key must be present), or with the first
 * occurrence of a string replaced by another as long, opened: the message must hold msg. */
static void expect_edit_refused(const char *name, const char *key, uint32_t val, const char *from,
                                const char *to, const char *msg)
{
    hs_model *h = load_hf(name);
    unsigned char *buf = NULL;
    size_t len = 0, at = 0;
    char dir[128], path[300];
    hs_model_free(convert(h, HS_GGUF_FTYPE_F32, &buf, &len, dir, sizeof dir));
    const char *find = key ? key : from;
    size_t n = strlen(find);
    while (at + n <= len && memcmp(buf + at, find, n))
        at++;
    cr_assert_leq(at + n, len, "%s not in the file", find);
    if (key) /* the key, then its type (4 bytes), then the value */
        memcpy(buf + at + n + 4, &val, 4);
    else
        memcpy(buf + at, to, n);
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    tu_write_file(path, buf, len);
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_expect_neq(hs_model_load(path, &m, &err), HS_OK);
    cr_expect(strstr(err.msg, msg) != NULL, "got '%s', want '%s'", err.msg, msg);
    cr_expect_null(strchr(err.msg, '\n'));
    hs_model_free(m);
    hs_model_free(h);
    tu_rm_rf(dir);
    free(buf);
}

Test(gguf_arch, deepseek2_refuses_what_it_does_not_run_by_name)
{
    expect_edit_refused("tiny-deepseek-v3", "deepseek2.expert_gating_func", 4, NULL, NULL,
                        "deepseek2.expert_gating_func = 4 is not supported (expected 1, softmax, "
                        "or 2, sigmoid)");
    expect_edit_refused("tiny-deepseek-v3", NULL, 0, "blk.1.exp_probs_b.bias", "blk.1.exp_probs_X.bias",
                        "deepseek2: sigmoid gating without exp_probs_b.bias is not supported");
    expect_edit_refused("tiny-deepseek-lite", NULL, 0, "yarn", "nope",
                        "deepseek2.rope.scaling.type 'nope' is not supported for deepseek2");
    expect_edit_refused("tiny-deepseek-moe", NULL, 0, "blk.1.ffn_up_exps.weight",
                        "blk.1.ffn_up_expz.weight", "missing tensor 'blk.1.ffn_up_exps.weight'");
    expect_edit_refused("tiny-deepseek-v2", NULL, 0, "blk.0.attn_v_b.weight", "blk.0.attn_v_X.weight",
                        "missing tensor 'blk.0.attn_v_b.weight'");
    /* without leading_dense_block_count every layer is a mixture of experts (llama.cpp's
       default): layer 0 has no correction bias */
    expect_edit_refused("tiny-deepseek-v3", NULL, 0, "leading_dense_block_count",
                        "leading_dense_block_counX", "sigmoid gating without exp_probs_b.bias");
}
