/* GGUF files of T5, llama.cpp's t5 architecture, written by headscope's converter from the
 * shipped tiny checkpoints of fixtures/t5/models/:
 *   - F32: the encoder's, the decoder's and the cross-attention maps, the encoder's output,
 *     the decoder's final states and logits bit-identical to the Hugging Face folder's, for
 *     t5-tiny (ReLU, tied head rescaled by d_model^-0.5) and t5-v1_1-tiny (gated GELU, untied,
 *     3 decoder blocks over 2 encoder blocks, decoder_start_token_id 2; its config copied with
 *     relative_attention_max_distance 128, the distance llama.cpp fixes); the file converted
 *     again byte for byte the same;
 *   - BF16 within the bound docs/gguf.md states (t5-v1_1-tiny, stored BF16: exact);
 *   - the keys and tensor names llama.cpp's converter writes, from config.json by its rules;
 *   - the "t5" vocabulary: T5's full tokenizer.json (fixtures/tokenizer/families/t5) through a
 *     GGUF file gives the ids of Hugging Face's tokenizers library on every case of
 *     unigram_golden.json;
 *   - what llama.cpp's t5 cannot hold refused in one line. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf_util.h"
#include "headscope/forward.h"
#include "headscope/gguf.h"
#include "headscope/model.h"
#include "headscope/tokenizer.h"
#include "model/model_internal.h"
#include "testutil.h"
#include "text/text_internal.h"
#include "tokutil.h"

#define T5M "fixtures/t5/models/"

/* ---- one pass of both stacks -------------------------------------------------------------- */

typedef struct maps {
    float *v;
    size_t n, cap;
} maps;

static void grow(maps *mp, const float *p, size_t n)
{
    if (mp->n + n > mp->cap) {
        mp->cap = 2 * (mp->n + n);
        mp->v = realloc(mp->v, mp->cap * sizeof *mp->v);
        cr_assert_not_null(mp->v);
    }
    memcpy(mp->v + mp->n, p, n * sizeof *p);
    mp->n += n;
}

static int on_self(void *u, int layer, const float *p, int h, int n)
{
    (void)layer;
    grow(u, p, (size_t)h * (size_t)n * (size_t)n);
    return 0;
}

static int on_cross(void *u, int layer, const float *p, int h, int nd, int ne)
{
    (void)layer;
    grow(u, p, (size_t)h * (size_t)nd * (size_t)ne);
    return 0;
}

typedef struct pass {
    maps m;      /* every self-attention map, then every cross-attention map, in pass order */
    float *out;  /* encoder output, decoder states, logits */
    size_t n_out;
} pass;

static pass run(const hs_model *model)
{
    static const int32_t src[] = {5, 17, 42, 99, 3, 250, 7, 120, 64, 1};
    static const int32_t tgt[] = {0, 33, 81, 12, 299, 4, 9};
    const int ne = 10, nd = 7;
    const hs_model_config *c = hs_model_config_of(model);
    pass p = {0};
    p.n_out = (size_t)(ne + nd) * (size_t)c->d_model + (size_t)nd * (size_t)c->vocab_size;
    p.out = calloc(p.n_out, sizeof *p.out);
    cr_assert_not_null(p.out);
    hs_forward_opts o = {.on_attn = on_self, .on_cross = on_cross, .user = &p.m,
                         .enc_hidden = p.out, .hidden = p.out + (size_t)ne * c->d_model,
                         .logits = p.out + (size_t)(ne + nd) * c->d_model};
    hs_error err = {{0}};
    cr_assert_eq(hs_forward_encdec(model, src, ne, tgt, nd, &o, NULL, &err), HS_OK, "%s", err.msg);
    return p;
}

static void pass_free(pass *p)
{
    free(p->m.v);
    free(p->out);
}

/* ---- conversions -------------------------------------------------------------------------- */

/* t5-v1_1-tiny's folder with relative_attention_max_distance 128 (its shards linked), in dir. */
static void v11_at_128(char *dir, size_t cap)
{
    static const char *const files[] = {"model-00001-of-00002.safetensors",
                                        "model-00002-of-00002.safetensors",
                                        "model.safetensors.index.json", "tokenizer.json"};
    char cwd[256], from[512], to[512];
    tu_mkdtemp(dir, cap);
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        snprintf(from, sizeof from, "%s/" T5M "t5-v1_1-tiny/%s", cwd, files[i]);
        cr_assert_eq(symlink(from, to), 0);
    }
    size_t len = 0;
    char *cfg = tu_slurp(T5M "t5-v1_1-tiny/config.json", &len);
    char *at = strstr(cfg, "\"relative_attention_max_distance\": 64");
    cr_assert_not_null(at);
    size_t head = (size_t)(at - cfg) + strlen("\"relative_attention_max_distance\": ");
    snprintf(to, sizeof to, "%s/config.json", dir);
    FILE *f = fopen(to, "wb");
    cr_assert_not_null(f);
    fwrite(cfg, 1, head, f); /* 64 -> 128 */
    fputs("128", f);
    fwrite(cfg + head + 2, 1, len - head - 2, f);
    fclose(f);
    free(cfg);
}

/* m written as GGUF of type ft, into memory (*len bytes) and to dir/m.gguf. */
static void encode(const hs_model *m, hs_gguf_ftype ft, unsigned char **buf, size_t *len,
                   char *dir, size_t cap, char *path, size_t pcap)
{
    hs_error err = {{0}};
    hs_gguf_write_options o = {.ftype = ft, .name = "t"};
    cr_assert_eq(hs_gguf_encode(m, &o, buf, len, &err), HS_OK, "%s", err.msg);
    tu_mkdtemp(dir, cap);
    snprintf(path, pcap, "%s/m.gguf", dir);
    tu_write_file(path, *buf, *len);
}

/* The largest map difference between the folder's GGUF of type ft and the folder; F32: the
 * maps, states and logits identical and GGUF -> GGUF the same bytes. */
static double round_trip(const char *folder, hs_gguf_ftype ft)
{
    hs_model *h = tu_load(folder);
    unsigned char *buf = NULL, *buf2 = NULL;
    size_t len = 0, len2 = 0;
    char dir[128], dir2[128], path[300];
    encode(h, ft, &buf, &len, dir, sizeof dir, path, sizeof path);
    hs_model *g = tu_load(path);
    const hs_model_config *a = hs_model_config_of(h), *b = hs_model_config_of(g);
    cr_expect_eq(b->family, HS_FAMILY_T5);
    cr_expect_eq(b->n_enc_layer, a->n_enc_layer);
    cr_expect_eq(b->n_layer, a->n_layer);
    cr_expect_eq(b->decoder_start_id, a->decoder_start_id);
    cr_expect_eq(b->d_head, a->d_head);
    cr_expect_eq(b->act, a->act);
    cr_expect_eq(b->arch->gated, a->arch->gated);
    cr_expect_eq(b->arch->tied_embeddings, a->arch->tied_embeddings);
    cr_expect_eq(b->arch->head_scale, a->arch->head_scale);
    cr_expect_eq(b->arch->rel_buckets, a->arch->rel_buckets);
    cr_expect_eq(b->arch->rel_max_distance, a->arch->rel_max_distance);
    pass p = run(h), q = run(g);
    cr_assert_eq(p.m.n, q.m.n);
    double d = tu_max_abs_diff(p.m.v, q.m.v, p.m.n, NULL);
    if (ft == HS_GGUF_FTYPE_F32) {
        cr_expect_eq(d, 0.0, "%s: maps differ by %g", folder, d);
        cr_expect_eq(tu_max_abs_diff(p.out, q.out, p.n_out, NULL), 0.0, "%s: states or logits",
                     folder);
        encode(g, ft, &buf2, &len2, dir2, sizeof dir2, path, sizeof path);
        cr_expect(len2 == len && !memcmp(buf, buf2, len), "%s: GGUF -> GGUF differs", folder);
        tu_rm_rf(dir2);
        free(buf2);
    }
    pass_free(&p);
    pass_free(&q);
    hs_model_free(g);
    hs_model_free(h);
    tu_rm_rf(dir);
    free(buf);
    return d;
}

Test(gguf_t5, v1_0_f32_equals_its_folder) { round_trip(T5M "t5-tiny", HS_GGUF_FTYPE_F32); }

Test(gguf_t5, v1_1_f32_equals_its_folder)
{
    char dir[128];
    v11_at_128(dir, sizeof dir);
    round_trip(dir, HS_GGUF_FTYPE_F32);
    tu_rm_rf(dir);
}

/* docs/gguf.md: BF16 weights move T5's maps by at most 1e-2 (t5-tiny: F32 rounded to BF16);
 * a checkpoint stored in BF16 (t5-v1_1-tiny) is written exactly. */
Test(gguf_t5, bf16_within_the_documented_bound)
{
    double d = round_trip(T5M "t5-tiny", HS_GGUF_FTYPE_BF16);
    cr_expect(d > 0 && d <= 1e-2, "t5-tiny BF16: maps differ by %g", d);
    char dir[128];
    v11_at_128(dir, sizeof dir);
    d = round_trip(dir, HS_GGUF_FTYPE_BF16);
    cr_expect_eq(d, 0.0, "t5-v1_1-tiny BF16 (stored BF16): maps differ by %g", d);
    tu_rm_rf(dir);
}

/* ---- keys and names ----------------------------------------------------------------------- */

static uint64_t u(const hs_gguf *g, const char *key, hs_gguf_type want)
{
    long i = hs_gguf_find_kv(g, key);
    cr_assert_geq(i, 0, "missing key %s", key);
    cr_assert_eq(hs_gguf_kv_type(g, (size_t)i), want, "%s: type %d", key, hs_gguf_kv_type(g, (size_t)i));
    hs_gguf_value v;
    hs_gguf_kv_get(g, (size_t)i, 0, &v);
    return want == HS_GGUF_FLOAT32 ? (uint64_t)llround(v.f * 1e9) : v.u;
}

static void expect_tensor(const hs_gguf *g, const char *name, int present, int64_t ne0, int64_t ne1)
{
    const hs_gguf_tensor *t = hs_gguf_find_tensor(g, name);
    cr_expect_eq(t != NULL, present, "tensor %s %s", name, present ? "missing" : "written");
    if (t && present)
        cr_expect(t->ne[0] == ne0 && t->ne[1] == ne1, "%s: ne {%lld, %lld}", name,
                  (long long)t->ne[0], (long long)t->ne[1]);
}

/* config.json of t5-v1_1-tiny (num_layers 2, num_decoder_layers 3, num_heads 2, d_kv 64, d_ff
 * 48, 16 buckets, decoder_start_token_id 2, untied, gated-gelu) and of t5-tiny (2 + 2, 32
 * buckets, tied, relu) as llama.cpp's converter writes them. */
static void check_keys(const char *folder, int n_dec, int buckets, int start, int v11)
{
    hs_model *h = tu_load(folder);
    unsigned char *buf = NULL;
    size_t len = 0;
    char dir[128], path[300];
    encode(h, HS_GGUF_FTYPE_F32, &buf, &len, dir, sizeof dir, path, sizeof path);
    hs_gguf *g = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_open(path, &g, &err), HS_OK, "%s", err.msg);
    cr_expect_eq(u(g, "t5.block_count", HS_GGUF_UINT32), 2);
    cr_expect_eq(u(g, "t5.decoder_block_count", HS_GGUF_UINT32), (uint64_t)n_dec);
    cr_expect_eq(u(g, "t5.embedding_length", HS_GGUF_UINT32), 32);
    cr_expect_eq(u(g, "t5.feed_forward_length", HS_GGUF_UINT32), v11 ? 48u : 64u);
    cr_expect_eq(u(g, "t5.attention.head_count", HS_GGUF_UINT32), 2);
    cr_expect_eq(u(g, "t5.attention.key_length", HS_GGUF_UINT32), 64);
    cr_expect_eq(u(g, "t5.attention.value_length", HS_GGUF_UINT32), 64);
    cr_expect_eq(u(g, "t5.attention.relative_buckets_count", HS_GGUF_UINT32), (uint64_t)buckets);
    cr_expect_eq(u(g, "t5.attention.layer_norm_rms_epsilon", HS_GGUF_FLOAT32), 1000);
    cr_expect_eq(u(g, "t5.attention.layer_norm_epsilon", HS_GGUF_FLOAT32), 1000);
    cr_expect_eq(u(g, "t5.decoder_start_token_id", HS_GGUF_UINT32), (uint64_t)start);
    long i = hs_gguf_find_kv(g, "tokenizer.ggml.model");
    hs_gguf_value v;
    hs_gguf_kv_get(g, (size_t)i, 0, &v);
    cr_expect_str_eq(v.str, "t5");
    cr_expect_eq(u(g, "tokenizer.ggml.add_eos_token", HS_GGUF_BOOL), 1);
    cr_expect_eq(u(g, "tokenizer.ggml.add_bos_token", HS_GGUF_BOOL), 0);
    cr_expect_eq(u(g, "tokenizer.ggml.add_space_prefix", HS_GGUF_BOOL), 1);
    cr_expect_eq(u(g, "tokenizer.ggml.remove_extra_whitespaces", HS_GGUF_BOOL), 1);
    cr_expect_eq(u(g, "tokenizer.ggml.eos_token_id", HS_GGUF_UINT32), 1);
    cr_expect_eq(u(g, "tokenizer.ggml.unknown_token_id", HS_GGUF_UINT32), 2);
    cr_expect_eq(u(g, "tokenizer.ggml.padding_token_id", HS_GGUF_UINT32), 0);
    i = hs_gguf_find_kv(g, "tokenizer.ggml.precompiled_charsmap");
    cr_assert_geq(i, 0);
    cr_expect_eq(hs_gguf_kv_elem_type(g, (size_t)i), HS_GGUF_UINT8);
    cr_expect_eq(hs_gguf_kv_len(g, (size_t)i), 237561u); /* 316,748 base64 characters */
    /* scores: tokenizer.json's as float32; types: <pad> </s> CONTROL, <unk> UNKNOWN */
    i = hs_gguf_find_kv(g, "tokenizer.ggml.scores");
    hs_gguf_kv_get(g, (size_t)i, 5, &v);
    cr_expect_eq((float)v.f, (float)-3.534236513792929, "score of '\xe2\x96\x81the' %.9g", v.f);
    i = hs_gguf_find_kv(g, "tokenizer.ggml.token_type");
    int32_t want[] = {3, 3, 2, 1};
    for (size_t k = 0; k < 4; k++) {
        hs_gguf_kv_get(g, (size_t)i, k, &v);
        cr_expect_eq(v.i, want[k], "token_type[%zu] = %lld", k, (long long)v.i);
    }
    expect_tensor(g, "token_embd.weight", 1, 32, 300);
    expect_tensor(g, "output.weight", v11, 32, 300);
    expect_tensor(g, "enc.blk.0.attn_rel_b.weight", 1, 2, buckets);
    expect_tensor(g, "dec.blk.0.attn_rel_b.weight", 1, 2, buckets);
    expect_tensor(g, "enc.blk.1.attn_rel_b.weight", 0, 0, 0);
    expect_tensor(g, "enc.blk.1.attn_q.weight", 1, 32, 128);
    expect_tensor(g, "enc.blk.1.attn_o.weight", 1, 128, 32);
    expect_tensor(g, "enc.blk.2.attn_q.weight", 0, 0, 0);
    char name[64];
    snprintf(name, sizeof name, "dec.blk.%d.cross_attn_k.weight", n_dec - 1);
    expect_tensor(g, name, 1, 32, 128);
    snprintf(name, sizeof name, "dec.blk.%d.ffn_down.weight", n_dec - 1);
    expect_tensor(g, name, 1, v11 ? 48 : 64, 32);
    expect_tensor(g, "dec.blk.0.ffn_gate.weight", v11, 32, 48);
    expect_tensor(g, "enc.blk.0.ffn_up.weight", 1, 32, v11 ? 48 : 64);
    expect_tensor(g, "enc.output_norm.weight", 1, 32, 1);
    expect_tensor(g, "dec.output_norm.weight", 1, 32, 1);
    /* embeddings, head, 2 biases, 2 final norms; 8 (+ gate) a block, 13 (+ gate) a decoder's */
    cr_expect_eq(hs_gguf_tensor_count(g), (size_t)(1 + v11 + 2 + 2 + 2 * (8 + v11) + n_dec * (13 + v11)));
    hs_gguf_free(g);
    hs_model_free(h);
    tu_rm_rf(dir);
    free(buf);
}

Test(gguf_t5, keys_and_names_as_the_converter_writes_them)
{
    check_keys(T5M "t5-tiny", 2, 32, 0, 0);
    char dir[128];
    v11_at_128(dir, sizeof dir);
    check_keys(dir, 3, 16, 2, 1);
    tu_rm_rf(dir);
}

/* ---- the vocabulary ----------------------------------------------------------------------- */

/* m with tokenizer t and an embedding of zeros of its size (emb, which the caller frees)
 * instead of its own; put back by detach. */
typedef struct swap {
    hs_tokenizer *tok;
    const float *wte, *decoder;
    int vocab;
    float *emb;
} swap;

static swap attach(hs_model *m, hs_tokenizer *t)
{
    swap s = {m->tok, m->wte, m->decoder, m->cfg.vocab_size, NULL};
    size_t V = hs_tokenizer_vocab_size(t);
    s.emb = calloc(V * (size_t)m->cfg.d_model, sizeof *s.emb);
    cr_assert_not_null(s.emb);
    m->tok = t;
    m->wte = m->decoder = s.emb; /* t5-tiny's head is tied */
    m->cfg.vocab_size = (int)V;
    return s;
}

static void detach(hs_model *m, swap *s)
{
    m->tok = s->tok;
    m->wte = s->wte;
    m->decoder = s->decoder;
    m->cfg.vocab_size = s->vocab;
    free(s->emb);
}

/* Every case of a golden file encoded by a and b: the same ids and type ids. */
static void same_ids(const hs_tokenizer *a, const hs_tokenizer *b, const char *golden)
{
    tu_fam_cases fc = tu_load_fam_cases_from(golden);
    size_t bad = 0;
    for (size_t k = 0; k < fc.n; k++) {
        size_t len, plen = 0;
        char *text = tu_unhex(cJSON_GetObjectItemCaseSensitive(fc.c[k], "text_hex")->valuestring, &len);
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(fc.c[k], "pair_hex");
        char *pair = cJSON_IsString(ph) ? tu_unhex(ph->valuestring, &plen) : NULL;
        hs_encoding e = {0}, f = {0};
        hs_error err = {{0}};
        cr_assert_eq(hs_tokenizer_encode(a, text, len, pair, plen, &e, &err), HS_OK, "%s", err.msg);
        cr_assert_eq(hs_tokenizer_encode(b, text, len, pair, plen, &f, &err), HS_OK, "%s", err.msg);
        int same = e.n == f.n;
        for (size_t i = 0; same && i < e.n; i++)
            same = e.ids[i] == f.ids[i] && e.type_ids[i] == f.type_ids[i];
        bad += !same;
        hs_encoding_free(&e);
        hs_encoding_free(&f);
        free(text);
        free(pair);
    }
    cr_expect_eq(bad, 0, "%zu of %zu cases differ", bad, fc.n);
    cr_expect_geq(fc.n, 2000);
    tu_free_fam_cases(&fc);
}

/* t5-tiny with T5's full tokenizer.json attached (its embedding, zeros, as long): written, the
 * file opened for its tokenizer. GGUF keeps FLOAT32 scores (as SentencePiece's own model
 * files do, so a released T5's tokenizer.json scores are float32 values and pass unchanged);
 * this fixture's were trained in float64, so the GGUF file is compared with the folder's
 * tokenizer with its scores rounded to float32, on every case of unigram_golden.json, and
 * with the Rust library's ids, which it matches save where rounding turns a tie (4 cases). */
Test(gguf_t5, t5_vocabulary_ids_equal_the_library, .timeout = 60)
{
    hs_model *m = tu_load(T5M "t5-tiny");
    hs_tokenizer *full = tu_json_tok(FIX "families/t5.tokenizer.json");
    swap sw = attach(m, full);
    unsigned char *buf = NULL;
    size_t len = 0;
    char dir[128], path[300];
    encode(m, HS_GGUF_FTYPE_F32, &buf, &len, dir, sizeof dir, path, sizeof path);
    detach(m, &sw);
    hs_model *g = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_open(path, HS_OPEN_TOKENIZER, &g, &err), HS_OK, "%s", err.msg);
    hs_tokenizer *r = tu_json_tok(FIX "families/t5.tokenizer.json");
    double lo = 0;
    for (size_t i = 0; i < r->n_model; i++) {
        r->uni_score[i] = (double)(float)r->uni_score[i];
        lo = i == 0 || r->uni_score[i] < lo ? r->uni_score[i] : lo;
    }
    r->uni_unk_score = lo - 10.0; /* unigram.c: the lowest score - 10 */
    same_ids(hs_model_tokenizer(g), r, FIX "unigram_golden.json");
    hs_tokenizer_free(r);
    /* the library's ids: all but the 4 ties */
    tu_fam_cases fc = tu_load_fam_cases_from(FIX "unigram_golden.json");
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(fc.golden, "tokenizers"), "t5");
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(ref, "ids")->child;
    const cJSON *nf = cJSON_GetObjectItemCaseSensitive(ref, "n_first")->child;
    size_t bad = 0;
    for (size_t k = 0; k < fc.n; k++, ids = ids->next, nf = nf->next) {
        int was_pair;
        bad += !tu_golden_case(hs_model_tokenizer(g), fc.c[k], ids, nf->valueint, "t5", k, 0, &was_pair);
    }
    cr_expect_eq(bad, 4, "%zu of %zu cases differ from the library", bad, fc.n);
    tu_free_fam_cases(&fc);

    hs_model_free(g);
    hs_tokenizer_free(full);
    hs_model_free(m);
    tu_rm_rf(dir);
    free(buf);
}

/* ---- refusals ----------------------------------------------------------------------------- */

Test(gguf_t5, what_llama_cpp_cannot_hold_refused_by_name)
{
    hs_model *m = tu_load(T5M "t5-v1_1-tiny"); /* its buckets reach 64 */
    expect_write_refused(m, "this T5 model's relative_attention_max_distance is 64, and "
                            "llama.cpp's t5 fixes it at 128");
    m->arch.rel_max_distance = 128;
    m->cfg.act = HS_ACT_SILU;
    expect_write_refused(m, "this T5 model's MLP (gated-silu) has no GGUF form");
    hs_model_free(m);
    m = tu_load(T5M "t5-tiny");
    /* T5's newer layout: Sequence [Precompiled, Replace(" {2,}", " ")] */
    hs_tokenizer *t = tu_json_tok(FIX "families/t5_new.tokenizer.json");
    swap sw = attach(m, t);
    expect_write_refused(m, "the tokenizer cannot be written to GGUF: a normalizer other than "
                            "Precompiled has no form in llama.cpp's t5 vocabulary");
    detach(m, &sw);
    hs_tokenizer_free(t);
    m->tok->byte_fallback = 1;
    expect_write_refused(m, "byte_fallback or no unk_id");
    m->tok->byte_fallback = 0;
    hs_model_free(m);
}

/* t5-tiny's file with the UINT32 key set to val (its bytes found after the key's name and
 * type), opened: refused with HS_E_UNSUPPORTED or HS_E_VALUE in one line holding msg. */
static void expect_edit_refused(const char *key, uint32_t val, const char *msg)
{
    hs_model *h = tu_load(T5M "t5-tiny");
    unsigned char *buf = NULL;
    size_t len = 0, n = strlen(key), at = 8; /* a string: its u64 length, then its bytes */
    char dir[128], path[300];
    encode(h, HS_GGUF_FTYPE_F32, &buf, &len, dir, sizeof dir, path, sizeof path);
    while (at + n + 8 <= len && !(buf[at - 8] == n && !memcmp(buf + at, key, n)))
        at++;
    cr_assert_leq(at + n + 8, len, "key %s not found", key);
    uint32_t type = 4; /* UINT32 */
    cr_assert(!memcmp(buf + at + n, &type, 4));
    memcpy(buf + at + n + 4, &val, 4);
    tu_write_file(path, buf, len);
    hs_model *m = NULL;
    hs_error err = {{0}};
    hs_status st = hs_model_load(path, &m, &err);
    cr_expect(st == HS_E_UNSUPPORTED || st == HS_E_VALUE, "%s = %u: status %d", key, val, st);
    cr_expect_null(m);
    cr_expect(strstr(err.msg, msg) != NULL, "got '%s', want '%s'", err.msg, msg);
    cr_expect_null(strchr(err.msg, '\n'));
    hs_model_free(h);
    tu_rm_rf(dir);
    free(buf);
}

Test(gguf_t5, files_it_cannot_run_refused_by_name)
{
    expect_edit_refused("t5.decoder_start_token_id", 300,
                        "t5.decoder_start_token_id 300 is outside the vocabulary (300)");
    expect_edit_refused("t5.decoder_block_count", 0, "t5.decoder_block_count is 0: an encoder "
                                                     "alone (llama.cpp's t5encoder) is not supported");
    expect_edit_refused("t5.attention.value_length", 32, "t5.attention.key_length 64 and "
                                                         "value_length 32");
}
