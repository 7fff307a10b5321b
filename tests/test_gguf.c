/* GGUF: every corrupt fixture in fixtures/gguf/bad (made by fixtures/gguf/make_fixtures.py,
 * one defect each) gives its status and a message naming the problem; files written by
 * the independent Python writer (fixtures/gguf/write_gguf.py) load to exactly the weights
 * of the Hugging Face folder they came from; headscope's writer produces the same bytes
 * as the Python writer and round-trips through the reader. */
#include <sys/stat.h>

#include "headscope/gguf.h"
#include "headscope/model.h"
#include "model/model_internal.h"
#include "testutil.h"

#define TINY_HF "fixtures/gguf/tiny-gpt2"
#define GOOD "fixtures/gguf/good/"
#define PYTHON "/usr/bin/python3"

/* ---- helpers -------------------------------------------------------------------- */

static hs_model *load_ok(const char *path)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    hs_status st = hs_model_load(path, &m, &err);
    cr_assert_eq(st, HS_OK, "cannot load %s: %s", path, err.msg);
    return m;
}

static void expect_open_fail(const char *file, hs_status want, const char *needle)
{
    char path[256];
    snprintf(path, sizeof path, "fixtures/gguf/bad/%s.gguf", file);
    hs_gguf *g = (hs_gguf *)1;
    hs_error err = {{0}};
    hs_status st = hs_gguf_open(path, &g, &err);
    cr_assert_eq(st, want, "%s: status %d (%s), want %d", file, st, err.msg, want);
    cr_assert_null(g, "%s: *out must be NULL on failure", file);
    cr_assert_not_null(strstr(err.msg, needle), "%s: message '%s' lacks '%s'", file, err.msg, needle);
    cr_assert_null(strchr(err.msg, '\n'), "%s: message must be one line", file);
    /* hs_model_load reports the same problem (it checks the magic itself) */
    if (!strcmp(file, "bad_magic"))
        return;
    hs_model *m = (hs_model *)1;
    hs_error err2 = {{0}};
    cr_assert_eq(hs_model_load(path, &m, &err2), want, "%s: model load: %s", file, err2.msg);
    cr_assert_null(m);
    cr_assert_not_null(strstr(err2.msg, needle), "%s: '%s' lacks '%s'", file, err2.msg, needle);
}

static void expect_load_fail(const char *file, hs_status want, const char *needle)
{
    char path[256];
    snprintf(path, sizeof path, "fixtures/gguf/bad/%s.gguf", file);
    hs_gguf *g = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_open(path, &g, &err), HS_OK, "%s must parse: %s", file, err.msg);
    hs_gguf_free(g);
    hs_model *m = (hs_model *)1;
    hs_status st = hs_model_load(path, &m, &err);
    cr_assert_eq(st, want, "%s: status %d (%s), want %d", file, st, err.msg, want);
    cr_assert_null(m);
    cr_assert_not_null(strstr(err.msg, needle), "%s: message '%s' lacks '%s'", file, err.msg, needle);
    cr_assert_null(strchr(err.msg, '\n'));
}

/* max |a - b| over count floats, allowing both NULL. */
static double diff(const float *a, const float *b, size_t count)
{
    if (!a || !b) {
        cr_assert(a == b, "one side lacks a tensor");
        return 0;
    }
    return tu_max_abs_diff(a, b, count, NULL);
}

/* The largest |a - b| over every weight of two models with the same config; the
 * decoder is compared when both have an explicit one. */
static double model_diff(const hs_model *a, const hs_model *b, int with_mlm)
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

static unsigned char *slurp(const char *path, size_t *len)
{
    char *data = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_read_file(path, (size_t)1 << 30, &data, len, &err), HS_OK, "%s", err.msg);
    return (unsigned char *)data;
}

/* Runs the independent Python writer on folder. */
static void python_convert(const char *folder, const char *out, const char *type, const char *name)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, PYTHON " fixtures/gguf/write_gguf.py '%s' '%s' --type %s --name '%s'",
             folder, out, type, name);
    cr_assert_eq(system(cmd), 0, "python writer failed: %s", cmd);
}

/* The first differing byte of two buffers, or -1. */
static long first_diff(const unsigned char *a, size_t na, const unsigned char *b, size_t nb)
{
    size_t n = na < nb ? na : nb;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (long)i;
    return na == nb ? -1 : (long)n;
}

static void expect_ids(const hs_model *m, const char *text, const int32_t *want, size_t n)
{
    hs_encoding e = {0};
    hs_error err = {{0}};
    const hs_tokenizer *t = hs_model_tokenizer(m);
    cr_assert_not_null(t);
    cr_assert_eq(hs_tokenizer_encode(t, text, strlen(text), NULL, 0, &e, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(e.n, n, "'%s': %zu tokens, want %zu", text, e.n, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(e.ids[i], want[i], "'%s': id %zu is %d, want %d", text, i, e.ids[i], want[i]);
    hs_encoding_free(&e);
}

static void expect_same_ids(const hs_model *a, const hs_model *b, const char *text)
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

/* ---- corrupt files: the parser ---------------------------------------------------- */

#define BAD_OPEN(name, st, needle) Test(gguf, rejects_##name) { expect_open_fail(#name, st, needle); }
BAD_OPEN(bad_magic, HS_E_FORMAT, "bad magic 'GGUG' (expected 'GGUF')")
BAD_OPEN(version_1, HS_E_UNSUPPORTED, "gguf version 1 is not supported")
BAD_OPEN(version_4, HS_E_UNSUPPORTED, "unsupported gguf version 4 (expected 2 or 3)")
BAD_OPEN(version_byteswapped, HS_E_UNSUPPORTED, "byte-swapped")
BAD_OPEN(tensor_count_beyond_file, HS_E_FORMAT, "tensor_count 60000 is more than the file can hold")
BAD_OPEN(kv_count_beyond_file, HS_E_FORMAT, "kv_count 60000 is more than the file can hold")
BAD_OPEN(kv_count_huge, HS_E_FORMAT, "kv_count 4611686018427387904 is more than")
BAD_OPEN(string_beyond_file, HS_E_FORMAT, "key #0: string length 1048576 at byte 24 runs past the end")
BAD_OPEN(truncated_header, HS_E_FORMAT, "kv_count 18 is more than the file can hold")
BAD_OPEN(truncated_metadata, HS_E_FORMAT, "key 'tokenizer.ggml.tokens': 271 strings cannot fit")
BAD_OPEN(duplicate_key, HS_E_FORMAT, "duplicate key 'gpt2.block_count'")
BAD_OPEN(empty_key, HS_E_FORMAT, "key #1 is empty")
BAD_OPEN(bool_not_0_or_1, HS_E_FORMAT, "key 'general.flag': bool byte 2")
BAD_OPEN(unknown_value_type, HS_E_FORMAT, "key 'general.value' has unknown value type 13")
BAD_OPEN(nested_array, HS_E_FORMAT, "key 'general.nested': nested arrays are not supported")
BAD_OPEN(alignment_not_power_of_two, HS_E_FORMAT, "general.alignment 48 is not a power of two")
BAD_OPEN(alignment_wrong_type, HS_E_FORMAT, "'general.alignment' has type UINT64, expected UINT32")
BAD_OPEN(duplicate_tensor, HS_E_FORMAT, "duplicate tensor 'blk.0.attn_norm.weight'")
BAD_OPEN(misaligned_offset, HS_E_FORMAT, "tensor 'output_norm.bias': offset 12708 is not a multiple of the alignment 32")
BAD_OPEN(overlapping_offsets, HS_E_FORMAT, "tensors 'blk.0.attn_qkv.weight' (offset 9248, 768 bytes) and 'blk.0.attn_qkv.bias' (offset 9248) overlap")
BAD_OPEN(offset_beyond_file, HS_E_FORMAT, "tensor 'output_norm.bias': 32 bytes at data offset 1099511627776 run past the end")
BAD_OPEN(truncated_data, HS_E_FORMAT, "tensor 'blk.0.ffn_up.weight': 1024 bytes at data offset 10464 run past the end")
BAD_OPEN(n_dims_5, HS_E_FORMAT, "tensor 'blk.0.attn_norm.weight': n_dims 5 (expected 1 to 4)")
BAD_OPEN(ne_zero, HS_E_FORMAT, "ne[1] = 0")
BAD_OPEN(name_too_long, HS_E_FORMAT, "tensor #0: name of 64 bytes (expected 1 to 63)")
BAD_OPEN(ggml_type_q4_1, HS_E_DTYPE, "tensor 'token_embd.weight': unsupported ggml type 3 (Q4_1); headscope reads F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K")
BAD_OPEN(ggml_type_unknown, HS_E_DTYPE, "tensor 'token_embd.weight': unknown ggml type 99")

Test(gguf, open_names_the_path_and_reports_missing_files)
{
    hs_gguf *g = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_open("fixtures/gguf/bad/version_1.gguf", &g, &err), HS_E_UNSUPPORTED);
    cr_assert_not_null(strstr(err.msg, "'fixtures/gguf/bad/version_1.gguf': "), "%s", err.msg);
    cr_assert_eq(hs_gguf_open("fixtures/gguf/nope.gguf", &g, &err), HS_E_IO);
    cr_assert_not_null(strstr(err.msg, "cannot open 'fixtures/gguf/nope.gguf'"), "%s", err.msg);
}

Test(gguf, rejects_empty_and_tiny_buffers)
{
    hs_gguf *g = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_parse(NULL, 0, &g, &err), HS_E_FORMAT);
    cr_assert_eq(hs_gguf_parse("GGUF\3\0\0", 7, &g, &err), HS_E_FORMAT);
    cr_assert_not_null(strstr(err.msg, "inside the header"), "%s", err.msg);
    static const unsigned char empty_v3[24] = {'G', 'G', 'U', 'F', 3};
    cr_assert_eq(hs_gguf_parse(empty_v3, sizeof empty_v3, &g, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_gguf_kv_count(g), 0);
    cr_assert_eq(hs_gguf_tensor_count(g), 0);
    hs_gguf_free(g);
}

/* ---- corrupt files: the model loader ------------------------------------------------- */

#define BAD_LOAD(name, st, needle) Test(gguf, rejects_##name) { expect_load_fail(#name, st, needle); }
BAD_LOAD(key_wrong_type, HS_E_FORMAT, "key 'gpt2.block_count' has type INT32, expected UINT32")
BAD_LOAD(eps_wrong_type, HS_E_FORMAT, "key 'gpt2.attention.layer_norm_epsilon' has type UINT32, expected FLOAT32")
BAD_LOAD(missing_key, HS_E_FORMAT, "missing key 'gpt2.block_count'")
BAD_LOAD(missing_tensor, HS_E_FORMAT, "missing tensor 'blk.0.ffn_up.bias'")
BAD_LOAD(tensor_shape_mismatch, HS_E_SHAPE, "tensor 'blk.0.attn_qkv.weight' has shape (16, 8), expected (24, 8)")
BAD_LOAD(token_count_mismatch, HS_E_SHAPE, "tokenizer.ggml.tokens has 270 entries but token_embd.weight has 271 rows")
BAD_LOAD(arch_llama, HS_E_FORMAT, "missing key 'llama.block_count'")
BAD_LOAD(no_tensors_no_vocabulary, HS_E_FORMAT, "the file holds neither tensors nor a vocabulary")
BAD_LOAD(nan_weight, HS_E_VALUE, "tensor 'blk.0.attn_norm.weight' holds a non-finite value (NaN) at element 3")

/* ---- inspection ---------------------------------------------------------------------- */

Test(gguf, inspects_python_written_file)
{
    hs_gguf *g = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_open(GOOD "tiny-gpt2-q8_0.gguf", &g, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_gguf_version(g), 3);
    cr_assert_eq(hs_gguf_alignment(g), 32);
    cr_assert_eq(hs_gguf_data_offset(g) % 32, 0);
    cr_assert_eq(hs_gguf_tensor_count(g), 17);

    long i = hs_gguf_find_kv(g, "general.architecture");
    cr_assert_eq(i, 0);
    hs_gguf_value v;
    cr_assert_eq(hs_gguf_kv_get(g, (size_t)i, 0, &v), HS_OK);
    cr_assert_eq(v.type, HS_GGUF_STRING);
    cr_assert_str_eq(v.str, "gpt2");
    cr_assert_eq(hs_gguf_kv_get(g, (size_t)i, 1, &v), HS_E_ARG);

    i = hs_gguf_find_kv(g, "gpt2.attention.layer_norm_epsilon");
    cr_assert_geq(i, 0);
    cr_assert_eq(hs_gguf_kv_type(g, (size_t)i), HS_GGUF_FLOAT32);
    hs_gguf_kv_get(g, (size_t)i, 0, &v);
    cr_assert_eq((float)v.f, 1e-5f);

    i = hs_gguf_find_kv(g, "tokenizer.ggml.tokens");
    cr_assert_eq(hs_gguf_kv_type(g, (size_t)i), HS_GGUF_ARRAY);
    cr_assert_eq(hs_gguf_kv_elem_type(g, (size_t)i), HS_GGUF_STRING);
    cr_assert_eq(hs_gguf_kv_len(g, (size_t)i), 271);
    hs_gguf_kv_get(g, (size_t)i, 270, &v);
    cr_assert_str_eq(v.str, "<|endoftext|>");
    i = hs_gguf_find_kv(g, "tokenizer.ggml.token_type");
    cr_assert_eq(hs_gguf_kv_elem_type(g, (size_t)i), HS_GGUF_INT32);
    hs_gguf_kv_get(g, (size_t)i, 270, &v);
    cr_assert_eq(v.i, 3);
    i = hs_gguf_find_kv(g, "general.file_type");
    hs_gguf_kv_get(g, (size_t)i, 0, &v);
    cr_assert_eq(v.u, 7);
    cr_assert_eq(hs_gguf_find_kv(g, "no.such.key"), -1);

    /* storage rules: d = 8 is no multiple of 32, so those Q8_0 matrices fall back to F16 */
    const hs_gguf_tensor *t = hs_gguf_find_tensor(g, "token_embd.weight");
    cr_assert_not_null(t);
    cr_assert_eq(t->type, HS_GGML_F16);
    cr_assert_eq(t->n_dims, 2);
    cr_assert_eq(t->ne[0], 8);
    cr_assert_eq(t->ne[1], 271);
    cr_assert_eq(t->ne[2], 1);
    cr_assert_eq(t->offset, 0);
    cr_assert_eq(t->nbytes, 8 * 271 * 2);
    cr_assert_eq(hs_gguf_find_tensor(g, "blk.0.ffn_down.weight")->type, HS_GGML_Q8_0);
    cr_assert_eq(hs_gguf_find_tensor(g, "blk.0.ffn_down.weight")->nbytes, 8 * 34);
    cr_assert_eq(hs_gguf_find_tensor(g, "position_embd.weight")->type, HS_GGML_F32);
    cr_assert_eq(hs_gguf_find_tensor(g, "blk.0.attn_norm.weight")->type, HS_GGML_F32);
    cr_assert_eq(hs_gguf_find_tensor(g, "blk.0.attn_qkv.bias")->type, HS_GGML_F32);
    /* the tied head's copy, last, stored as token_embd is */
    const hs_gguf_tensor *o = hs_gguf_find_tensor(g, "output.weight");
    cr_assert_not_null(o);
    cr_assert_eq(o, hs_gguf_tensor_at(g, 16));
    cr_assert_eq(o->type, HS_GGML_F16);
    cr_assert_eq(o->nbytes, t->nbytes);
    cr_assert_eq(memcmp(o->data, t->data, (size_t)t->nbytes), 0);
    cr_assert_eq(hs_gguf_tensor_at(g, 0), hs_gguf_find_tensor(g, "token_embd.weight"));
    cr_assert_null(hs_gguf_tensor_at(g, 17));
    cr_assert_str_eq(hs_ggml_type_name(HS_GGML_Q8_0), "Q8_0");
    cr_assert_str_eq(hs_ggml_type_name(12), "Q4_K");
    cr_assert_null(hs_ggml_type_name(99));
    hs_gguf_free(g);
}

Test(gguf, parses_from_memory_like_from_file)
{
    size_t len;
    unsigned char *data = slurp(GOOD "tiny-gpt2-f32.gguf", &len);
    hs_gguf *a = NULL, *b = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_parse(data, len, &a, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_gguf_open(GOOD "tiny-gpt2-f32.gguf", &b, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_gguf_kv_count(a), hs_gguf_kv_count(b));
    cr_assert_eq(hs_gguf_tensor_count(a), hs_gguf_tensor_count(b));
    for (size_t i = 0; i < hs_gguf_tensor_count(a); i++) {
        const hs_gguf_tensor *x = hs_gguf_tensor_at(a, i), *y = hs_gguf_tensor_at(b, i);
        cr_assert_str_eq(x->name, y->name);
        cr_assert_eq(x->offset, y->offset);
        cr_assert_eq(memcmp(x->data, y->data, (size_t)x->nbytes), 0);
    }
    hs_gguf_free(a);
    hs_gguf_free(b);
    free(data);
}

/* ---- Python-written files load to the HF weights ---------------------------------------- */

Test(gguf, python_written_tiny_fixture_equals_hf_folder)
{
    hs_model *hf = load_ok(TINY_HF);
    static const char *const same[] = {"tiny-gpt2-f32.gguf", "tiny-gpt2-v2.gguf",
                                       "tiny-gpt2-gaps.gguf", "tiny-gpt2-align64.gguf"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, GOOD "%s", same[i]);
        hs_model *g = load_ok(path);
        cr_assert_eq(hs_model_format(g), HS_FORMAT_GGUF);
        cr_assert_str_eq(hs_model_storage_dtype(g), "F32");
        cr_assert_eq(model_diff(hf, g, 0), 0.0, "%s differs from the HF folder", same[i]);
        cr_assert_eq(hs_model_param_count(g), hs_model_param_count(hf));
        expect_same_ids(hf, g, "Hello world, the world");
        hs_model_free(g);
    }
    hs_model_free(hf);
}

Test(gguf, python_written_tiny_fixture_other_types_within_rounding)
{
    hs_model *hf = load_ok(TINY_HF);
    /* |x| < 1.2 in this model: F16 keeps 11 significant bits, BF16 8; Q8_0 is within half
     * a step d = max|block| / 127 (plus the F16 rounding of d); Q4_0 (only ffn_down has
     * rows of 32 here, the rest falls back to F16) within one step d = max|block| / 8 (half a
     * step, or a whole one where the value opposite the largest clamps at 7 d) */
    static const struct {
        const char *file, *dtype;
        double tol;
    } cases[] = {{"tiny-gpt2-f16.gguf", "F16", 1.2 / 2048},
                 {"tiny-gpt2-bf16.gguf", "BF16", 1.2 / 256},
                 {"tiny-gpt2-q8_0.gguf", "F16", 1.2 / 127},
                 {"tiny-gpt2-q4_0.gguf", "F16", 1.2 / 8}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, GOOD "%s", cases[i].file);
        hs_model *g = load_ok(path);
        double dmax = model_diff(hf, g, 0);
        cr_assert_leq(dmax, cases[i].tol, "%s: max |diff| %g", cases[i].file, dmax);
        cr_assert_gt(dmax, 0.0, "%s: rounding must show", cases[i].file);
        cr_assert_str_eq(hs_model_storage_dtype(g), cases[i].dtype, "%s", cases[i].file);
        hs_model_free(g);
    }
    hs_model_free(hf);
}

/* ---- the writer ------------------------------------------------------------------------- */

Test(gguf, writer_matches_python_writer_byte_for_byte_on_tiny_fixture)
{
    hs_model *hf = load_ok(TINY_HF);
    static const char *const types[] = {"f32", "f16", "bf16", "q8_0"};
    for (size_t i = 0; i < 4; i++) {
        hs_gguf_write_options opt = {.name = "tiny-gpt2"};
        cr_assert_eq(hs_gguf_ftype_parse(types[i], &opt.ftype), HS_OK);
        unsigned char *mine = NULL;
        size_t n = 0;
        hs_error err = {{0}};
        cr_assert_eq(hs_gguf_encode(hf, &opt, &mine, &n, &err), HS_OK, "%s", err.msg);
        char path[256];
        snprintf(path, sizeof path, GOOD "tiny-gpt2-%s.gguf", types[i]);
        size_t pn;
        unsigned char *ref = slurp(path, &pn);
        long at = first_diff(mine, n, ref, pn);
        cr_assert_eq(at, -1, "%s: first difference at byte %ld (sizes %zu, %zu)", types[i], at, n, pn);
        free(ref);
        free(mine);
    }
    hs_model_free(hf);
}

/* Converts the model folder `folder` with the independent Python writer and with headscope's
 * writer: same bytes, same weights as the folder, same token ids. */
static void model_case(const char *folder, const char *name, const char *type, int exact)
{
    char dir[64], py[256], mine[256];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(py, sizeof py, "%s/py.gguf", dir);
    snprintf(mine, sizeof mine, "%s/model.bin", dir);
    python_convert(folder, py, type, name);

    hs_model *hf = load_ok(folder);
    hs_gguf_write_options opt = {.name = name};
    cr_assert_eq(hs_gguf_ftype_parse(type, &opt.ftype), HS_OK);
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_write(hf, mine, &opt, &err), HS_OK, "%s", err.msg);
    struct stat sb;
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", mine);
    cr_assert_neq(stat(tmp, &sb), 0, "the .tmp file must be gone");

    size_t na, nb;
    unsigned char *a = slurp(mine, &na), *b = slurp(py, &nb);
    long at = first_diff(a, na, b, nb);
    cr_assert_eq(at, -1, "%s %s: first difference at byte %ld (sizes %zu, %zu)", name, type, at, na, nb);
    free(a);
    free(b);

    hs_model *g = load_ok(py);
    double dmax = model_diff(hf, g, 0);
    if (exact)
        cr_assert_eq(dmax, 0.0, "%s: weights differ by %g", name, dmax);
    else
        cr_assert_leq(dmax, 0.02, "%s %s: weights differ by %g", name, type, dmax);
    if (hf->cfg.family == HS_FAMILY_GPT2) {
        static const int32_t hello[] = {15496, 995};
        expect_ids(g, "Hello world", hello, 2);
        expect_same_ids(hf, g, "hello <|endoftext|> world");
        expect_same_ids(hf, g, "The cat sat on the mat. Ünïcödé 🙂  spaces\n\tand tabs");
    } else {
        static const int32_t hello[] = {101, 7592, 2088, 102};
        expect_ids(g, "hello world", hello, 4);
        expect_same_ids(hf, g, "The capital of France is [MASK].");
        expect_same_ids(hf, g, "Ünïcödé héllo, unaffable [SEP] [mask] 12,345");
        cr_assert_eq(hs_tokenizer_lowercase(hs_model_tokenizer(g)), 1);
        cr_assert_eq(g->cfg.has_lm_head, 0, "convert leaves BERT's MLM head out");
    }
    hs_model_free(g);
    hs_model_free(hf);
    tu_rm_rf(dir);
}

Test(gguf, tiny_gpt2_f32_python_file_equals_hf_and_writer, .timeout = 120)
{
    model_case("fixtures/tiny-gpt2", "tiny-gpt2", "f32", 1);
}

Test(gguf, tiny_bert_f32_python_file_equals_hf_and_writer, .timeout = 120)
{
    model_case("fixtures/tiny-bert", "tiny-bert", "f32", 1);
}

Test(gguf, trained_gpt2_f16_python_file_equals_hf_and_writer, .timeout = 120)
{
    model_case("fixtures/trained-gpt2", "trained-gpt2", "f16", 1);
}

Test(gguf, tiny_gpt2_q8_0_matches_python_writer, .timeout = 120)
{
    model_case("fixtures/tiny-gpt2", "tiny-gpt2", "q8_0", 0);
}

Test(gguf, tiny_bert_bf16_matches_python_writer, .timeout = 120)
{
    model_case("fixtures/tiny-bert", "tiny-bert", "bf16", 0);
}

/* The F32 originals of the shipped tiny models, when ../shared is beside the clone. */
static void shared_case(const char *name, const char *type, int exact)
{
    char folder[256];
    snprintf(folder, sizeof folder, SHARED_MODELS "/%s", name);
    if (access(folder, R_OK) != 0)
        cr_skip_test("%s is absent (only beside the development checkout)", folder);
    model_case(folder, name, type, exact);
}

Test(gguf, shared_tiny_gpt2_f32_python_file_equals_hf_and_writer, .timeout = 120)
{
    shared_case("tiny-gpt2", "f32", 1);
}

Test(gguf, shared_tiny_bert_q8_0_matches_python_writer, .timeout = 120)
{
    shared_case("tiny-bert", "q8_0", 0);
}

Test(gguf, round_trip_in_memory_keeps_every_weight)
{
    hs_model *hf = load_ok("fixtures/tiny-bert");
    hs_gguf_write_options opt = {.ftype = HS_GGUF_FTYPE_F32, .keep_mlm = 1};
    unsigned char *buf = NULL;
    size_t n = 0;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_encode(hf, &opt, &buf, &n, &err), HS_OK, "%s", err.msg);
    hs_gguf *g = NULL;
    cr_assert_eq(hs_gguf_parse(buf, n, &g, &err), HS_OK, "%s", err.msg);
    cr_assert_not_null(hs_gguf_find_tensor(g, "cls.predictions.transform.dense.weight"));
    cr_assert_eq(hs_gguf_tensor_count(g), 5 + 4 * 16 + 5);
    hs_gguf_free(g);

    char dir[64], path[128];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    tu_write_file(path, buf, n);
    hs_model *back = load_ok(path);
    cr_assert_eq(back->cfg.has_lm_head, 1);
    cr_assert_eq(model_diff(hf, back, 1), 0.0);
    cr_assert_eq(hs_model_param_count(back), hs_model_param_count(hf));
    expect_same_ids(hf, back, "hello world");
    hs_model_free(back);
    tu_rm_rf(dir);
    free(buf);
    hs_model_free(hf);
}

Test(gguf, writer_is_atomic_and_reports_io_errors)
{
    hs_model *hf = load_ok(TINY_HF);
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_write(hf, "/nonexistent-dir/model.bin", NULL, &err), HS_E_IO);
    cr_assert_not_null(strstr(err.msg, "cannot write '/nonexistent-dir/model.bin'"), "%s", err.msg);
    /* a symlink planted at the old predictable temporary name is never followed: the file
     * it points to keeps its bytes, and the output still appears */
    char dir[64], out[128], tmp[140], victim[128];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/m.bin", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    FILE *v = fopen(victim, "w");
    cr_assert_not_null(v);
    fputs("keep", v);
    fclose(v);
    cr_assert_eq(symlink(victim, tmp), 0);
    cr_assert_eq(hs_gguf_write(hf, out, NULL, &err), HS_OK, "%s", err.msg);
    size_t n;
    unsigned char *kept = slurp(victim, &n);
    cr_assert(n == 4 && !memcmp(kept, "keep", 4), "the planted link was followed");
    free(kept);
    struct stat sb;
    cr_assert_eq(stat(out, &sb), 0);
    tu_rm_rf(dir);
    hs_model_free(hf);
}

Test(gguf, ftype_names)
{
    hs_gguf_ftype t;
    cr_assert_eq(hs_gguf_ftype_parse("Q8_0", &t), HS_OK);
    cr_assert_eq(t, HS_GGUF_FTYPE_Q8_0);
    cr_assert_eq(hs_gguf_ftype_parse("bf16", &t), HS_OK);
    cr_assert_eq(t, HS_GGUF_FTYPE_BF16);
    cr_assert_eq(hs_gguf_ftype_parse("q4_0", &t), HS_E_ARG);
    cr_assert_eq(hs_gguf_ftype_parse("f1", &t), HS_E_ARG);
    cr_assert_eq(hs_gguf_ftype_parse("f160", &t), HS_E_ARG);
}

/* ---- variants: untied head, fused BERT QKV, weights-only files -------------------------- */

/* A temporary model folder: config and weights of fixture `model` (symlinked) plus
 * tokenizer files. */
static void make_folder(char *dir, size_t cap, const char *model, int bert)
{
    char cwd[512], tok[512], cmd[2048];
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    tu_mkdtemp(dir, cap);
    if (bert)
        snprintf(tok, sizeof tok, "head -n 1000 fixtures/tiny-bert/vocab.txt > '%s/vocab.txt'",
                 dir);
    else
        snprintf(tok, sizeof tok, "cp %s/vocab.json %s/merges.txt '%s/'", TINY_HF, TINY_HF, dir);
    snprintf(cmd, sizeof cmd,
             "ln -s '%s/fixtures/models/%s/config.json' '%s/config.json' && "
             "ln -s '%s/fixtures/models/%s/model.safetensors' '%s/model.safetensors' && %s",
             cwd, model, dir, cwd, model, dir, tok);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

Test(gguf, untied_gpt2_head_is_written_as_output_weight)
{
    char dir[64], folder[128], py[160], mine[160];
    make_folder(dir, sizeof dir, "gpt2-prefixed", 0);
    snprintf(folder, sizeof folder, "%s", dir);
    snprintf(py, sizeof py, "%s/py.gguf", dir);
    snprintf(mine, sizeof mine, "%s/mine.gguf", dir);
    hs_model *hf = load_ok(folder);
    cr_assert_neq(hf->decoder, hf->wte, "the fixture has an untied head");
    python_convert(folder, py, "f32", "x");
    hs_gguf_write_options opt = {.ftype = HS_GGUF_FTYPE_F32, .name = "x"};
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_write(hf, mine, &opt, &err), HS_OK, "%s", err.msg);
    size_t na, nb;
    unsigned char *a = slurp(mine, &na), *b = slurp(py, &nb);
    long at = first_diff(a, na, b, nb);
    cr_assert_eq(at, -1, "first difference at byte %ld", at);
    free(a);
    free(b);
    hs_gguf *g = NULL;
    cr_assert_eq(hs_gguf_open(mine, &g, &err), HS_OK, "%s", err.msg);
    cr_assert_not_null(hs_gguf_find_tensor(g, "output.weight"));
    /* ids the 271-token vocabulary lacks are padded as [PAD{i}] with type UNUSED */
    long ti = hs_gguf_find_kv(g, "tokenizer.ggml.tokens");
    cr_assert_eq(hs_gguf_kv_len(g, (size_t)ti), 1000);
    hs_gguf_value v;
    hs_gguf_kv_get(g, (size_t)ti, 999, &v);
    cr_assert_str_eq(v.str, "[PAD999]");
    hs_gguf_free(g);
    hs_model *back = load_ok(mine);
    cr_assert_neq(back->decoder, back->wte);
    cr_assert_eq(model_diff(hf, back, 0), 0.0);
    cr_assert_eq(diff(hf->decoder, back->decoder, 1000 * 64), 0.0);
    hs_model_free(back);
    hs_model_free(hf);
    tu_rm_rf(dir);
}

Test(gguf, reads_bert_with_fused_qkv)
{
    char dir[64], py[160];
    make_folder(dir, sizeof dir, "bert-legacy", 1);
    snprintf(py, sizeof py, "%s/fused.gguf", dir);
    char cmd[512];
    snprintf(cmd, sizeof cmd, PYTHON " fixtures/gguf/write_gguf.py '%s' '%s' --fused-qkv", dir, py);
    cr_assert_eq(system(cmd), 0);
    hs_gguf *g = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_open(py, &g, &err), HS_OK, "%s", err.msg);
    cr_assert_not_null(hs_gguf_find_tensor(g, "blk.0.attn_qkv.weight"));
    cr_assert_null(hs_gguf_find_tensor(g, "blk.0.attn_q.weight"));
    hs_gguf_free(g);
    hs_model *hf = load_ok(dir), *back = load_ok(py);
    cr_assert_eq(model_diff(hf, back, 0), 0.0);
    expect_same_ids(hf, back, "[CLS] ! \" # [SEP]");
    hs_model_free(back);
    hs_model_free(hf);
    tu_rm_rf(dir);
}

Test(gguf, weights_only_file_loads_without_tokenizer_and_is_not_rewritten)
{
    char dir[64], py[160], out[160];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(py, sizeof py, "%s/w.gguf", dir);
    snprintf(out, sizeof out, "%s/again.gguf", dir);
    char cmd[512];
    snprintf(cmd, sizeof cmd, PYTHON " fixtures/gguf/write_gguf.py " TINY_HF " '%s' --no-tokenizer", py);
    cr_assert_eq(system(cmd), 0);
    hs_model *m = load_ok(py);
    cr_assert_null(hs_model_tokenizer(m));
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_write(m, out, NULL, &err), HS_E_UNSUPPORTED);
    cr_assert_not_null(strstr(err.msg, "no tokenizer"), "%s", err.msg);
    struct stat sb;
    cr_assert_neq(stat(out, &sb), 0);
    hs_model_free(m);
    tu_rm_rf(dir);
}

/* ---- llama.cpp interoperability: the tied head's copy, BERT's bracketed tokens,
 * vocabulary-only files ----------------------------------------------------------------- */

/* headscope's file of the tied tiny GPT-2, parsed. */
static hs_gguf *encode_parse(const hs_model *m, const hs_gguf_write_options *opt,
                             unsigned char **buf)
{
    size_t n = 0;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_encode(m, opt, buf, &n, &err), HS_OK, "%s", err.msg);
    hs_gguf *g = NULL;
    cr_assert_eq(hs_gguf_parse(*buf, n, &g, &err), HS_OK, "%s", err.msg);
    return g;
}

Test(gguf, tied_gpt2_head_is_copied_into_output_weight_unless_asked_not_to)
{
    hs_model *hf = load_ok(TINY_HF);
    cr_assert_eq(hf->decoder, hf->wte, "the fixture's head is tied");
    static const hs_gguf_ftype types[] = {HS_GGUF_FTYPE_F32, HS_GGUF_FTYPE_F16,
                                          HS_GGUF_FTYPE_BF16, HS_GGUF_FTYPE_Q8_0};
    for (size_t k = 0; k < 4; k++) {
        hs_gguf_write_options opt = {.ftype = types[k]};
        unsigned char *buf = NULL;
        hs_gguf *g = encode_parse(hf, &opt, &buf);
        const hs_gguf_tensor *e = hs_gguf_find_tensor(g, "token_embd.weight"),
                             *o = hs_gguf_find_tensor(g, "output.weight");
        cr_assert_not_null(o, "type %d: no output.weight", (int)types[k]);
        cr_assert_eq(o->type, e->type);
        cr_assert_eq(o->n_dims, 2);
        cr_assert(o->ne[0] == 8 && o->ne[1] == 271, "output.weight ne {%lld, %lld}",
                  (long long)o->ne[0], (long long)o->ne[1]);
        cr_assert_eq(o->nbytes, e->nbytes);
        cr_assert_eq(memcmp(o->data, e->data, (size_t)e->nbytes), 0, "the copy differs");
        hs_gguf_free(g);
        free(buf);
    }
    /* without the copy: the newer converters' layout, byte for byte as the Python writer */
    char dir[64], py[128], mine[128], cmd[512];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(py, sizeof py, "%s/py.gguf", dir);
    snprintf(mine, sizeof mine, "%s/mine.gguf", dir);
    snprintf(cmd, sizeof cmd, PYTHON " fixtures/gguf/write_gguf.py " TINY_HF " '%s' --name tiny-gpt2 "
             "--no-output-copy", py);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    hs_gguf_write_options opt = {.ftype = HS_GGUF_FTYPE_F32, .name = "tiny-gpt2", .no_output_copy = 1};
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_write(hf, mine, &opt, &err), HS_OK, "%s", err.msg);
    size_t na, nb;
    unsigned char *a = slurp(mine, &na), *b = slurp(py, &nb);
    long at = first_diff(a, na, b, nb);
    cr_assert_eq(at, -1, "first difference at byte %ld (sizes %zu, %zu)", at, na, nb);
    hs_gguf *g = NULL;
    cr_assert_eq(hs_gguf_parse(a, na, &g, &err), HS_OK, "%s", err.msg);
    cr_assert_null(hs_gguf_find_tensor(g, "output.weight"));
    cr_assert_eq(hs_gguf_tensor_count(g), 16);
    hs_gguf_free(g);
    free(a);
    free(b);
    /* both layouts read back tied, to the folder's weights */
    static const char *const files[] = {"tiny-gpt2-f32.gguf", "tiny-gpt2-v2.gguf"};
    for (size_t k = 0; k < 2; k++) {
        char path[256];
        snprintf(path, sizeof path, GOOD "%s", files[k]);
        hs_model *back = load_ok(path);
        cr_assert_eq(back->decoder, back->wte, "%s: the head must stay tied", files[k]);
        cr_assert_eq(model_diff(hf, back, 0), 0.0);
        cr_assert_eq(hs_model_param_count(back), hs_model_param_count(hf), "%s", files[k]);
        hs_model_free(back);
    }
    hs_model *back = load_ok(mine);
    cr_assert_eq(back->decoder, back->wte);
    hs_model_free(back);
    tu_rm_rf(dir);
    hs_model_free(hf);
}

/* The string of id in g's tokenizer.ggml.tokens. */
static const char *gguf_token(const hs_gguf *g, size_t id)
{
    long i = hs_gguf_find_kv(g, "tokenizer.ggml.tokens");
    cr_assert_geq(i, 0);
    hs_gguf_value v;
    cr_assert_eq(hs_gguf_kv_get(g, (size_t)i, id, &v), HS_OK);
    return v.str;
}

static int64_t gguf_int(const hs_gguf *g, const char *key, size_t j)
{
    long i = hs_gguf_find_kv(g, key);
    cr_assert_geq(i, 0, "no %s", key);
    hs_gguf_value v;
    cr_assert_eq(hs_gguf_kv_get(g, (size_t)i, j, &v), HS_OK);
    return v.type == HS_GGUF_INT32 ? v.i : (int64_t)v.u;
}

Test(gguf, bert_bracketed_tokens_are_written_and_read_back_verbatim)
{
    hs_model *hf = load_ok("fixtures/tiny-bert");
    unsigned char *buf = NULL;
    hs_gguf *g = encode_parse(hf, NULL, &buf);
    /* the bert-base-uncased vocabulary as llama.cpp's converter and its
     * ggml-vocab-bert-bge.gguf store it: ids from vocab.txt's line numbers */
    static const struct {
        size_t id;
        const char *tok;
        int type;
    } want[] = {{0, "[PAD]", 3},         {1, "[unused0]", 1},   {99, "[unused98]", 1},
                {100, "[UNK]", 3},       {101, "[CLS]", 3},     {102, "[SEP]", 3},
                {103, "[MASK]", 3},      {104, "[unused99]", 1}, {998, "[unused993]", 1},
                {999, "\xe2\x96\x81!", 1}, {1031, "\xe2\x96\x81[", 1}, {1996, "\xe2\x96\x81the", 1},
                {2075, "ing", 1}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        cr_assert_str_eq(gguf_token(g, want[k].id), want[k].tok, "id %zu", want[k].id);
        cr_assert_eq(gguf_int(g, "tokenizer.ggml.token_type", want[k].id), want[k].type, "id %zu", want[k].id);
    }
    cr_assert_eq(hs_gguf_find_kv(g, "tokenizer.ggml.eos_token_id"), -1,
                 "llama.cpp would take [SEP] for an end-of-generation token");
    cr_assert_eq(gguf_int(g, "tokenizer.ggml.bos_token_id", 0), 101);
    cr_assert_eq(gguf_int(g, "tokenizer.ggml.seperator_token_id", 0), 102);
    hs_gguf_free(g);

    /* read back: every token string is the folder's */
    char dir[64], path[128];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    hs_error err = {{0}};
    hs_model *back = NULL;
    cr_assert_eq(hs_gguf_write(hf, path, NULL, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_model_open(path, HS_OPEN_TOKENIZER, &back, &err), HS_OK, "%s", err.msg);
    const hs_tokenizer *a = hs_model_tokenizer(hf), *b = hs_model_tokenizer(back);
    cr_assert_eq(hs_tokenizer_vocab_size(a), hs_tokenizer_vocab_size(b));
    for (int32_t id = 0; id < (int32_t)hs_tokenizer_vocab_size(a); id++)
        cr_assert_str_eq(hs_tokenizer_token(b, id), hs_tokenizer_token(a, id), "id %d", id);
    cr_assert_str_eq(hs_tokenizer_token(b, 1), "[unused0]");
    hs_model_free(back);
    tu_rm_rf(dir);
    free(buf);
    hs_model_free(hf);
}

/* The ids of text in a model opened with flags. */
static void expect_ids_open(const char *path, unsigned flags, const char *text,
                            const int32_t *want, size_t n)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_open(path, flags, &m, &err), HS_OK, "%s: %s", path, err.msg);
    expect_ids(m, text, want, n);
    hs_model_free(m);
}

Test(gguf, vocabulary_only_files_serve_tokenize_and_info)
{
    /* fixtures/gguf/tiny-bert-vocab/vocab.txt, ids counted by hand: [CLS] 4, hello 19, ',' 10,
     * the 11, cat 12, ##s 21, ! 25, [SEP] 5; un 16 ##aff 17 ##able 18, play 24 ##ing 23,
     * [MASK] 6, '[' 7, "unused0" has no split into pieces: [UNK] 3, ']' 8 */
    static const int32_t cats[] = {4, 19, 10, 11, 12, 21, 25, 5};
    static const int32_t unaff[] = {4, 16, 17, 18, 24, 23, 6, 7, 3, 8, 5};
    const char *vb = GOOD "tiny-bert-vocab.gguf";
    for (unsigned flags = HS_OPEN_NO_WEIGHTS; flags <= HS_OPEN_TOKENIZER; flags++) {
        expect_ids_open(vb, flags, "Hello, the cats!", cats, 8);
        expect_ids_open(vb, flags, "unaffable playing [MASK] [unused0]", unaff, 11);
    }
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_open(vb, HS_OPEN_NO_WEIGHTS, &m, &err), HS_OK, "%s", err.msg);
    const hs_model_config *c = hs_model_config_of(m);
    cr_assert(c->family == HS_FAMILY_BERT && c->n_layer == 1 && c->d_model == 8 &&
              c->vocab_size == 27 && c->type_vocab_size == 2 && c->has_lm_head == 0);
    cr_assert_eq(hs_model_param_count(m), 0);
    cr_assert_str_eq(hs_model_storage_dtype(m), "none");
    cr_assert_eq(hs_model_has_weights(m), 0);
    const hs_tokenizer *t = hs_model_tokenizer(m);
    cr_assert_str_eq(hs_tokenizer_token(t, 1), "[unused0]");
    cr_assert_str_eq(hs_tokenizer_token(t, 21), "##s");
    cr_assert_str_eq(hs_tokenizer_token(t, 22), "s");
    hs_model_free(m);

    /* the GPT-2 one tokenizes as its folder does */
    hs_model *folder = load_ok(TINY_HF), *v = NULL;
    cr_assert_eq(hs_model_open(GOOD "tiny-gpt2-vocab.gguf", HS_OPEN_TOKENIZER, &v, &err), HS_OK,
                 "%s", err.msg);
    expect_same_ids(folder, v, "Hello world, the world in a <|endoftext|> Ünïcödé");
    hs_model_free(v);
    hs_model_free(folder);

    /* the forward pass needs weights: refused with a message, nothing returned */
    m = (hs_model *)1;
    cr_assert_eq(hs_model_load(vb, &m, &err), HS_E_UNSUPPORTED);
    cr_assert_null(m);
    cr_assert_not_null(strstr(err.msg, "no tensors"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "tiny-bert-vocab.gguf"), "%s", err.msg);
}

Test(gguf, bert_continuation_of_a_bracketed_token_is_refused)
{
    char dir[64], cmd[512];
    make_folder(dir, sizeof dir, "bert-legacy", 1);
    /* "##[unused0]" would be stored as "[unused0]" and read back without its ## */
    snprintf(cmd, sizeof cmd, "sed -i '2s/.*/##[unused0]/' '%s/vocab.txt'", dir);
    cr_assert_eq(system(cmd), 0);
    hs_model *hf = load_ok(dir);
    unsigned char *buf = NULL;
    size_t n = 0;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_encode(hf, NULL, &buf, &n, &err), HS_E_UNSUPPORTED);
    cr_assert_null(buf);
    cr_assert_not_null(strstr(err.msg, "token 1 '##[unused0]' cannot be stored"), "%s", err.msg);
    hs_model_free(hf);
    tu_rm_rf(dir);
}
