/* GGUF, the reader: every corrupt fixture in fixtures/gguf/bad (made by
 * fixtures/gguf/make_fixtures.py, one defect each) gives its status and a message naming
 * the problem; files written by the independent Python writer (fixtures/gguf/write_gguf.py)
 * load to exactly the weights of the Hugging Face folder they came from. The writer's
 * checks are in test_gguf_write.c. */
#include <sys/stat.h>

#include "gguf_util.h"

/* ---- helpers -------------------------------------------------------------------- */

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
BAD_OPEN(ggml_type_iq2_xxs, HS_E_DTYPE, "tensor 'token_embd.weight': unsupported ggml type 16 (IQ2_XXS); headscope reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS")
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
    unsigned char *data = tu_slurp(GOOD "tiny-gpt2-f32.gguf", &len);
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
    hs_model *hf = tu_load_converted(TINY_HF);
    static const char *const same[] = {"tiny-gpt2-f32.gguf", "tiny-gpt2-v2.gguf",
                                       "tiny-gpt2-gaps.gguf", "tiny-gpt2-align64.gguf"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, GOOD "%s", same[i]);
        hs_model *g = tu_load_converted(path);
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
    hs_model *hf = tu_load_converted(TINY_HF);
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
        hs_model *g = tu_load_converted(path);
        double dmax = model_diff(hf, g, 0);
        cr_assert_leq(dmax, cases[i].tol, "%s: max |diff| %g", cases[i].file, dmax);
        cr_assert_gt(dmax, 0.0, "%s: rounding must show", cases[i].file);
        cr_assert_str_eq(hs_model_storage_dtype(g), cases[i].dtype, "%s", cases[i].file);
        hs_model_free(g);
    }
    hs_model_free(hf);
}
