/* pytorch_model.bin reader: the valid fixtures (written by torch.save, and repacked with zip64
 * records and unaligned data) give every tensor's name, dtype, shape and values as torch
 * wrote them to <name>.json / <name>.npy; every hostile fixture (made by
 * fixtures/torchbin/make_fixtures.py) is refused with its status and a message naming the
 * problem; truncations and byte flips of a valid file never crash. */
#include <cJSON.h>

#include "core/core.h"
#include "model/model_internal.h"
#include "model/torchbin.h"
#include "testutil.h"

#define DIR "fixtures/torchbin/"

static hs_torchbin *open_ok(const char *file)
{
    hs_torchbin *t = NULL;
    hs_error err = {{0}};
    hs_status st = hs_torchbin_open(file, &t, &err);
    cr_assert_eq(st, HS_OK, "%s: %s", file, err.msg);
    cr_assert_not_null(t);
    return t;
}

static float element(const hs_tensor_view *v, size_t i)
{
    uint32_t b;
    float f;
    switch (v->dtype) {
    case HS_DT_F32:
        memcpy(&b, v->data + 4 * i, 4); /* the data need not be aligned */
        b = hs_le32((const unsigned char *)&b);
        memcpy(&f, &b, 4);
        return f;
    case HS_DT_F16: return hs_f16_to_f32(hs_le16(v->data + 2 * i));
    case HS_DT_BF16: return hs_bf16_to_f32(hs_le16(v->data + 2 * i));
    default: cr_assert_fail("unexpected dtype %d", v->dtype);
    }
    return 0;
}

/* Checks every tensor of t against the reference <ref>.json / <ref>.npy written by torch:
 * name, dtype, shape, byte count and exact values (F16/BF16 widen to F32 exactly). */
static void expect_reference(const hs_torchbin *t, const char *ref)
{
    char path[256];
    size_t len;
    snprintf(path, sizeof path, DIR "%s.json", ref);
    char *text = tu_slurp(path, &len);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root, "%s is not JSON", path);
    snprintf(path, sizeof path, DIR "%s.npy", ref);
    hs_npy vals = tu_npy(path);
    const float *want = vals.data;
    const cJSON *tensors = cJSON_GetObjectItem(root, "tensors");
    const cJSON *skipped = cJSON_GetObjectItem(root, "skipped");
    cr_assert_eq(t->n, (size_t)cJSON_GetArraySize(tensors), "%s: tensor count", ref);
    cr_assert_eq(t->n_skipped, (size_t)cJSON_GetArraySize(skipped), "%s: skipped count", ref);
    size_t i = 0;
    for (const cJSON *e = tensors->child; e; e = e->next, i++) {
        const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
        const hs_tensor_view *v = hs_torchbin_find(t, name);
        cr_assert_not_null(v, "%s: tensor '%s' not found", ref, name);
        cr_assert_eq(v, &t->tensors[i], "%s: '%s' is not in file order", ref, name);
        cr_assert_null(hs_torchbin_skipped(t, name));
        cr_assert_str_eq(hs_dtype_name(v->dtype), cJSON_GetObjectItem(e, "dtype")->valuestring,
                         "%s: dtype of '%s'", ref, name);
        const cJSON *shape = cJSON_GetObjectItem(e, "shape");
        cr_assert_eq(v->ndim, cJSON_GetArraySize(shape), "%s: ndim of '%s'", ref, name);
        for (int d = 0; d < 4; d++) {
            int64_t w = d < v->ndim ? (int64_t)cJSON_GetArrayItem(shape, d)->valuedouble : 1;
            cr_assert_eq(v->shape[d], w, "%s: '%s' shape[%d] %lld, want %lld", ref, name, d,
                         (long long)v->shape[d], (long long)w);
        }
        size_t count = (size_t)cJSON_GetObjectItem(e, "count")->valuedouble;
        size_t off = (size_t)cJSON_GetObjectItem(e, "offset")->valuedouble;
        size_t elsize = v->dtype == HS_DT_F32 ? 4 : 2;
        cr_assert_eq(v->nbytes, count * elsize, "%s: '%s' has %zu bytes", ref, name, v->nbytes);
        cr_assert_leq(off + count, vals.count);
        for (size_t k = 0; k < count; k++) {
            float got = element(v, k);
            cr_assert(got == want[off + k], "%s: '%s'[%zu] = %.9g, torch wrote %.9g", ref, name,
                      k, got, want[off + k]);
        }
    }
    for (const cJSON *e = skipped->child; e; e = e->next) {
        const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
        const char *dt = hs_torchbin_skipped(t, name);
        cr_assert_not_null(dt, "%s: '%s' is not listed as skipped", ref, name);
        cr_assert_str_eq(dt, cJSON_GetObjectItem(e, "dtype")->valuestring, "%s: '%s'", ref, name);
        cr_assert_null(hs_torchbin_find(t, name), "%s: skipped '%s' in the float table", ref, name);
    }
    hs_npy_free(&vals);
    cJSON_Delete(root);
    free(text);
}

static void expect_file_matches(const char *file, const char *ref)
{
    hs_torchbin *t = open_ok(file);
    expect_reference(t, ref);
    hs_torchbin_close(t);
}

Test(torchbin, torch_save_file_matches_torch_values)
{
    expect_file_matches(DIR "good.bin", "good");
}

Test(torchbin, pickle_protocol_4_matches_torch_values)
{
    expect_file_matches(DIR "good_proto4.bin", "good");
}

Test(torchbin, unaligned_repack_matches_torch_values)
{
    expect_file_matches(DIR "good_unaligned.bin", "good");
}

Test(torchbin, zip64_repack_matches_torch_values)
{
    expect_file_matches(DIR "good_zip64_unaligned.bin", "good");
}

Test(torchbin, unaligned_repack_really_has_unaligned_float_data)
{
    hs_torchbin *t = open_ok(DIR "good_unaligned.bin");
    int unaligned = 0;
    for (size_t i = 0; i < t->n; i++)
        unaligned += t->tensors[i].dtype == HS_DT_F32 && t->tensors[i].nbytes &&
                     ((uintptr_t)t->tensors[i].data % 4) != 0;
    cr_assert_gt(unaligned, 0, "the fixture no longer exercises unaligned reads");
    hs_torchbin_close(t);
}

Test(torchbin, tied_weights_share_one_storage)
{
    hs_torchbin *t = open_ok(DIR "good.bin");
    const hs_tensor_view *a = hs_torchbin_find(t, "wte.weight");
    const hs_tensor_view *b = hs_torchbin_find(t, "lm_head.weight");
    cr_assert(a && b && a != b);
    cr_assert_eq(a->data, b->data);
    cr_assert_eq(a->nbytes, b->nbytes);
    hs_torchbin_close(t);
}

Test(torchbin, view_starts_at_its_storage_offset)
{
    hs_torchbin *t = open_ok(DIR "good.bin");
    const hs_tensor_view *base = hs_torchbin_find(t, "base"), *row = hs_torchbin_find(t, "row1");
    cr_assert(base && row);
    cr_assert_eq(row->data, base->data + 4 * 4, "row 1 of a (3, 4) float32 storage");
    hs_torchbin_close(t);
}

Test(torchbin, zero_d_scalar_is_one_element_with_ndim_0)
{
    hs_torchbin *t = open_ok(DIR "good.bin");
    const hs_tensor_view *s = hs_torchbin_find(t, "scale");
    cr_assert_not_null(s);
    cr_assert_eq(s->ndim, 0);
    cr_assert_eq(s->nbytes, 4);
    cr_assert_eq(element(s, 0), 0.125f);
    cr_assert_str_eq(hs_torchbin_skipped(t, "count"), "int64");
    hs_torchbin_close(t);
}

Test(torchbin, unknown_names_give_null)
{
    hs_torchbin *t = open_ok(DIR "good.bin");
    cr_assert_null(hs_torchbin_find(t, "nope"));
    cr_assert_null(hs_torchbin_skipped(t, "nope"));
    cr_assert_null(hs_torchbin_find(t, "0.weigh"));
    hs_torchbin_close(t);
    hs_torchbin_close(NULL);
}

Test(torchbin, parse_from_memory_matches_open)
{
    size_t len;
    unsigned char *buf = tu_slurp(DIR "good_zip64_unaligned.bin", &len);
    hs_torchbin *t = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_torchbin_parse(buf, len, "mem", &t, &err), HS_OK, "%s", err.msg);
    cr_assert_null(t->map);
    expect_reference(t, "good");
    for (size_t i = 0; i < t->n; i++)
        cr_assert(t->tensors[i].data >= buf && t->tensors[i].data + t->tensors[i].nbytes <= buf + len);
    hs_torchbin_close(t);
    free(buf);
}

typedef struct {
    const hs_torchbin *t;
} lookup_ctx;

static const hs_tensor_view *lookup(void *ctx, const char *name, const hs_tensor_ref *r,
                                    int *out_in)
{
    (void)r;
    *out_in = 0; /* GPT-2 Conv1D: (in, out) */
    return hs_torchbin_find(((lookup_ctx *)ctx)->t, name);
}

static void expect_floats(const float *got, const float *want, size_t n, const char *what)
{
    size_t at;
    double d = tu_max_abs_diff(got, want, n, &at);
    cr_assert(d == 0, "%s differs from torch by %g at %zu", what, d, at);
}

Test(torchbin, weight_builder_accepts_the_views)
{
    hs_torchbin *t = open_ok(DIR "gpt2_tiny.bin");
    hs_model m;
    hs_error err = {{0}};
    memset(&m, 0, sizeof m);
    m.cfg = (hs_model_config){.family = HS_FAMILY_GPT2, .n_layer = 1, .n_head = 2, .d_model = 8,
                              .d_ff = 32, .n_ctx = 8, .vocab_size = 16, .ln_eps = 1e-5f,
                              .act = HS_ACT_GELU_TANH};
    m.weight_memory = HS_WEIGHT_MEMORY_ALL; /* the F16 matrix converted at load, in m.layers */
    cr_assert_eq(hs_config_validate(&m.cfg, &err), HS_OK, "%s", err.msg);
    lookup_ctx ctx = {t};
    cr_assert_eq(hs_weights_build(&m, lookup, &ctx, &err), HS_OK, "%s", err.msg);
    hs_npy ref = tu_npy(DIR "gpt2_tiny.npy");
    const float *r = ref.data;
    /* gpt2_tiny.json lists wte first (offset 0) and c_attn.weight after wpe, ln_1 (w, b) */
    expect_floats(m.wte, r, 16 * 8, "wte");
    expect_floats(m.wpe, r + 128, 8 * 8, "wpe");
    expect_floats(m.layers[0].w_qkv, r + 128 + 64 + 16, 8 * 24, "c_attn.weight (f16)");
    expect_floats(m.decoder, r, 16 * 8, "lm_head (tied to wte)");
    hs_npy_free(&ref);
    hs_wcache_free(m.wc);
    free(m.arena);
    free(m.layers);
    hs_torchbin_close(t);
}

/* The file without its lm_head.weight. */
static const hs_tensor_view *lookup_no_head(void *ctx, const char *name, const hs_tensor_ref *r,
                                            int *out_in)
{
    return strcmp(name, "lm_head.weight") ? lookup(ctx, name, r, out_in) : NULL;
}

/* The same file, its decoder left out, under a descriptor whose embeddings are not tied:
 * the absent decoder is named, not left NULL (the architecture layer's "fail loudly"). */
Test(torchbin, untied_family_needs_its_decoder)
{
    hs_torchbin *t = open_ok(DIR "gpt2_tiny.bin");
    hs_arch untied = *hs_arch_of(HS_FAMILY_GPT2);
    untied.tied_embeddings = 0;
    hs_model m;
    hs_error err = {{0}};
    memset(&m, 0, sizeof m);
    m.cfg = (hs_model_config){.family = HS_FAMILY_GPT2, .n_layer = 1, .n_head = 2, .d_model = 8,
                              .d_ff = 32, .n_ctx = 8, .vocab_size = 16, .ln_eps = 1e-5f,
                              .act = HS_ACT_GELU_TANH, .arch = &untied};
    cr_assert_eq(hs_config_validate(&m.cfg, &err), HS_OK, "%s", err.msg);
    lookup_ctx ctx = {t};
    cr_assert_eq(hs_weights_build(&m, lookup_no_head, &ctx, &err), HS_E_FORMAT);
    cr_assert_str_eq(err.msg, "missing tensor 'lm_head.weight'");
    hs_wcache_free(m.wc);
    free(m.arena);
    free(m.layers);
    hs_torchbin_close(t);
}

/* ---- refused files ------------------------------------------------------------------- */

static void expect_fail(const char *file, hs_status want, const char *needle)
{
    char path[256];
    snprintf(path, sizeof path, DIR "%s", file);
    hs_torchbin *t = (hs_torchbin *)1;
    hs_error err = {{0}};
    hs_status st = hs_torchbin_open(path, &t, &err);
    cr_assert_eq(st, want, "%s: status %d (%s), want %d", file, st, err.msg, want);
    cr_assert_null(t, "%s: *out must be NULL on failure", file);
    cr_assert_not_null(strstr(err.msg, needle), "%s: message '%s' lacks '%s'", file, err.msg,
                       needle);
    cr_assert_null(strchr(err.msg, '\n'), "%s: message must be one line", file);
    cr_assert_not_null(strstr(err.msg, path), "%s: message must name the file", file);
}

#define BAD(name, st, needle) \
    Test(torchbin_bad, name) { expect_fail(#name ".bin", st, needle); }
BAD(evil_os_system, HS_E_UNSUPPORTED, "data.pkl: refusing global 'posix.system' (only tensor")
BAD(evil_eval, HS_E_UNSUPPORTED, "refusing global '__builtin__.eval'")
BAD(evil_eval_proto4, HS_E_UNSUPPORTED, "refusing global 'builtins.eval'")
BAD(evil_in_hooks, HS_E_UNSUPPORTED, "refusing global 'posix.system'")
BAD(legacy, HS_E_UNSUPPORTED, "is a legacy (PyTorch < 1.6) torch.save file; re-save it with a "
                              "newer PyTorch or convert it to model.safetensors")
BAD(noncontiguous, HS_E_UNSUPPORTED, "tensor 'w' is non-contiguous")
BAD(compressed, HS_E_UNSUPPORTED, "zip entry 'archive/data.pkl' is compressed (deflate)")
BAD(big_endian, HS_E_UNSUPPORTED, "big-endian")
BAD(huge_numel, HS_E_FORMAT, "storage '0' claims 4611686018427387904 float32 elements but its "
                             "entry holds 24 bytes")
BAD(huge_shape, HS_E_FORMAT, "tensor 'w': element count overflows")
BAD(huge_string, HS_E_FORMAT, "BINUNICODE at offset 2: string longer than the limit")
BAD(huge_memo, HS_E_FORMAT, "LONG_BINPUT at offset 3: memo index")
BAD(missing_storage, HS_E_FORMAT, "storage '7' is missing from the archive (no entry "
                                  "'archive/data/7')")
BAD(offset_past_end, HS_E_FORMAT, "storage offset 100 and shape reach past the 6 elements")
BAD(storage_too_small, HS_E_FORMAT, "claims 100 float32 elements but its entry holds 24 bytes")
BAD(dtype_conflict, HS_E_FORMAT, "storage '0' is read as both float32 and float16")
BAD(deep_marks, HS_E_FORMAT, "MARKs nested deeper than the limit of 32")
BAD(deep_tuples, HS_E_FORMAT, "values nested deeper than the limit of 32")
BAD(reduce_on_dict, HS_E_UNSUPPORTED, "REDUCE at offset 4: only allow-listed globals can be called")
BAD(build_on_dict, HS_E_UNSUPPORTED, "BUILD at offset 4: only an OrderedDict's state can be set")
BAD(inst_opcode, HS_E_UNSUPPORTED, "opcode 0x53 at offset 1 is not supported")
BAD(not_a_tensor, HS_E_UNSUPPORTED, "entry 'w' is not a tensor (found int")
BAD(truncated_pickle, HS_E_FORMAT, "data.pkl: pickle ends at offset")
BAD(truncated_zip, HS_E_FORMAT, "no zip end of central directory record (truncated file?)")
BAD(no_data_pkl, HS_E_FORMAT, "without a <folder>/data.pkl entry")
BAD(bare_pickle, HS_E_FORMAT, "is a bare pickle, not a torch.save zip archive")
BAD(not_torch, HS_E_FORMAT, "is neither a torch.save zip archive nor a pickle")
BAD(lfs_pointer, HS_E_FORMAT, "is a Git LFS pointer")
BAD(empty, HS_E_FORMAT, "empty file")

Test(torchbin_bad, missing_file)
{
    hs_torchbin *t;
    hs_error err = {{0}};
    cr_assert_eq(hs_torchbin_open(DIR "does-not-exist.bin", &t, &err), HS_E_IO);
    cr_assert_not_null(strstr(err.msg, "No such file or directory"), "%s", err.msg);
}

Test(torchbin_bad, directory_is_not_a_file)
{
    hs_torchbin *t;
    hs_error err = {{0}};
    cr_assert_eq(hs_torchbin_open("fixtures/torchbin", &t, &err), HS_E_IO);
    cr_assert_not_null(strstr(err.msg, "not a regular file"), "%s", err.msg);
}

/* Every prefix of a valid file, and every single-byte change of it, parses or fails cleanly
 * (the sanitizer build turns any out-of-bounds read into a failure). */
Test(torchbin_bad, every_truncation_and_byte_flip_is_handled)
{
    size_t len;
    unsigned char *buf = tu_slurp(DIR "good_zip64_unaligned.bin", &len);
    size_t ok = 0;
    for (size_t cut = 0; cut < len; cut++) {
        unsigned char *copy = malloc(cut ? cut : 1); /* exact size: overreads are caught */
        memcpy(copy, buf, cut);
        hs_torchbin *t = NULL;
        hs_error err = {{0}};
        hs_status st = hs_torchbin_parse(copy, cut, "cut", &t, &err);
        cr_assert(st == HS_OK || err.msg[0], "cut at %zu: failure without a message", cut);
        ok += st == HS_OK;
        hs_torchbin_close(t);
        free(copy);
    }
    cr_assert_eq(ok, 0, "a truncated archive was accepted");
    for (size_t i = 0; i < len; i++) {
        buf[i] ^= 0x5a;
        hs_torchbin *t = NULL;
        hs_error err = {{0}};
        hs_status st = hs_torchbin_parse(buf, len, "flip", &t, &err);
        cr_assert(st == HS_OK || err.msg[0], "flip at %zu: failure without a message", i);
        hs_torchbin_close(t);
        buf[i] ^= 0x5a;
    }
    free(buf);
}
