/* The parsed GGUF file's names and queries (the public API of headscope/gguf.h that reads
 * what gguf.c's parser recorded): type names, block sizes, metadata values, tensors; and
 * the loaders' typed metadata reads (gguf_internal.h). */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "headscope/gguf.h"
#include "model/gguf_internal.h"
#include "model/model_internal.h"
#include "model/quant.h"

const char *hs_gguf_type_name(hs_gguf_type t)
{
    static const char *const names[] = {"UINT8", "INT8",  "UINT16", "INT16",  "UINT32",
                                        "INT32", "FLOAT32", "BOOL", "STRING", "ARRAY",
                                        "UINT64", "INT64", "FLOAT64"};
    if ((unsigned)t < sizeof names / sizeof names[0])
        return names[t];
    return "?";
}

const char *hs_ggml_type_name(uint32_t type)
{
    static const char *const names[GGML_TYPE_COUNT] = {
        [0] = "F32",      [1] = "F16",      [2] = "Q4_0",    [3] = "Q4_1",    [6] = "Q5_0",
        [7] = "Q5_1",     [8] = "Q8_0",     [9] = "Q8_1",    [10] = "Q2_K",   [11] = "Q3_K",
        [12] = "Q4_K",    [13] = "Q5_K",    [14] = "Q6_K",   [15] = "Q8_K",   [16] = "IQ2_XXS",
        [17] = "IQ2_XS",  [18] = "IQ3_XXS", [19] = "IQ1_S",  [20] = "IQ4_NL", [21] = "IQ3_S",
        [22] = "IQ2_S",   [23] = "IQ4_XS",  [24] = "I8",     [25] = "I16",    [26] = "I32",
        [27] = "I64",     [28] = "F64",     [29] = "IQ1_M",  [30] = "BF16",   [34] = "TQ1_0",
        [35] = "TQ2_0",   [39] = "MXFP4",
    };
    return type < GGML_TYPE_COUNT ? names[type] : NULL;
}

int hs_ggml_block(uint32_t type, uint64_t *blck, uint64_t *bytes)
{
    switch (type) {
    case HS_GGML_F32: *blck = 1; *bytes = 4; return 1;
    case HS_GGML_F16:
    case HS_GGML_BF16: *blck = 1; *bytes = 2; return 1;
    }
    size_t e, b;
    if (!hs_quant_block(type, &e, &b))
        return 0;
    *blck = e;
    *bytes = b;
    return 1;
}

/* gguf_internal.h */
size_t hs_gguf_value_size(uint32_t t)
{
    switch (t) {
    case HS_GGUF_UINT8:
    case HS_GGUF_INT8:
    case HS_GGUF_BOOL: return 1;
    case HS_GGUF_UINT16:
    case HS_GGUF_INT16: return 2;
    case HS_GGUF_UINT32:
    case HS_GGUF_INT32:
    case HS_GGUF_FLOAT32: return 4;
    case HS_GGUF_UINT64:
    case HS_GGUF_INT64:
    case HS_GGUF_FLOAT64: return 8;
    }
    return 0;
}

uint32_t hs_gguf_version(const hs_gguf *g) { return g->version; }
uint32_t hs_gguf_alignment(const hs_gguf *g) { return g->alignment; }
uint64_t hs_gguf_data_offset(const hs_gguf *g) { return g->data_off; }
uint64_t hs_gguf_size(const hs_gguf *g) { return g->len; }
size_t hs_gguf_kv_count(const hs_gguf *g) { return g->n_kv; }

const char *hs_gguf_kv_key(const hs_gguf *g, size_t i)
{
    return i < g->n_kv ? g->strs[g->kv[i].key].s : NULL;
}

hs_gguf_type hs_gguf_kv_type(const hs_gguf *g, size_t i)
{
    return i < g->n_kv ? (hs_gguf_type)g->kv[i].type : (hs_gguf_type)-1;
}

hs_gguf_type hs_gguf_kv_elem_type(const hs_gguf *g, size_t i)
{
    return i < g->n_kv ? (hs_gguf_type)g->kv[i].elem : (hs_gguf_type)-1;
}

size_t hs_gguf_kv_len(const hs_gguf *g, size_t i) { return i < g->n_kv ? (size_t)g->kv[i].n : 0; }

hs_status hs_gguf_kv_get(const hs_gguf *g, size_t i, size_t j, hs_gguf_value *out)
{
    if (!g || !out || i >= g->n_kv || j >= g->kv[i].n)
        return HS_E_ARG;
    const gkv *kv = &g->kv[i];
    memset(out, 0, sizeof *out);
    out->type = (hs_gguf_type)kv->elem;
    if (kv->elem == HS_GGUF_STRING) {
        out->str = g->strs[kv->str0 + j].s;
        out->len = g->strs[kv->str0 + j].len;
        return HS_OK;
    }
    const unsigned char *p = g->data + kv->val + j * hs_gguf_value_size(kv->elem);
    switch ((hs_gguf_type)kv->elem) {
    case HS_GGUF_UINT8:
    case HS_GGUF_BOOL: out->u = p[0]; break;
    case HS_GGUF_INT8: out->i = (int8_t)p[0]; break;
    case HS_GGUF_UINT16: out->u = hs_le16(p); break;
    case HS_GGUF_INT16: out->i = (int16_t)hs_le16(p); break;
    case HS_GGUF_UINT32: out->u = hs_le32(p); break;
    case HS_GGUF_INT32: out->i = (int32_t)hs_le32(p); break;
    case HS_GGUF_UINT64: out->u = hs_le64(p); break;
    case HS_GGUF_INT64: out->i = (int64_t)hs_le64(p); break;
    case HS_GGUF_FLOAT32: {
        union { uint32_t u; float f; } b = {.u = hs_le32(p)};
        out->f = b.f;
        break;
    }
    case HS_GGUF_FLOAT64: {
        union { uint64_t u; double f; } b = {.u = hs_le64(p)};
        out->f = b.f;
        break;
    }
    case HS_GGUF_STRING:
    case HS_GGUF_ARRAY: break;
    }
    return HS_OK;
}

long hs_gguf_find_kv(const hs_gguf *g, const char *key)
{
    size_t n = strlen(key);
    for (size_t i = 0; i < g->n_kv; i++) {
        const gstr *s = &g->strs[g->kv[i].key];
        if (s->len == n && !memcmp(s->s, key, n))
            return (long)i;
    }
    return -1;
}

size_t hs_gguf_tensor_count(const hs_gguf *g) { return g->n_tensors; }

const hs_gguf_tensor *hs_gguf_tensor_at(const hs_gguf *g, size_t i)
{
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const hs_gguf_tensor *hs_gguf_find_tensor(const hs_gguf *g, const char *name)
{
    size_t lo = 0, hi = g->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = strcmp(g->by_name[mid]->name, name);
        if (r == 0)
            return g->by_name[mid];
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- typed metadata ---------------------------------------------------------------- */

/* Finds key with exactly type want. *idx = -1 when absent (not an error unless required). */
hs_status hs_gguf_find_typed(const hs_gguf *g, const char *key, hs_gguf_type want, int required,
                             long *idx, hs_error *err)
{
    *idx = hs_gguf_find_kv(g, key);
    if (*idx < 0)
        return required ? hs_fail(err, HS_E_FORMAT, "missing key '%s'", key) : HS_OK;
    hs_gguf_type t = hs_gguf_kv_type(g, (size_t)*idx);
    if (t != want)
        return hs_fail(err, HS_E_FORMAT, "key '%s' has type %s, expected %s", key,
                       hs_gguf_type_name(t), hs_gguf_type_name(want));
    return HS_OK;
}

/* The value of a scalar key of type want; *found = 0 when it is absent and optional. */
static hs_status scalar(const hs_gguf *g, const char *key, hs_gguf_type want, int required,
                        hs_gguf_value *v, int *found, hs_error *err)
{
    long i;
    hs_status st = hs_gguf_find_typed(g, key, want, required, &i, err);
    *found = !st && i >= 0;
    if (*found)
        hs_gguf_kv_get(g, (size_t)i, 0, v);
    return st;
}

/* A required or optional UINT32 that must fit an int; *out keeps its value when absent. */
hs_status hs_gguf_get_u32(const hs_gguf *g, const char *key, int required, int *out, hs_error *err)
{
    hs_gguf_value v;
    int found;
    hs_status st = scalar(g, key, HS_GGUF_UINT32, required, &v, &found, err);
    if (st || !found)
        return st;
    if (v.u > INT_MAX)
        return hs_fail(err, HS_E_VALUE, "key '%s' = %llu is out of range", key,
                       (unsigned long long)v.u);
    *out = (int)v.u;
    return HS_OK;
}

hs_status hs_gguf_get_f32(const hs_gguf *g, const char *key, int required, float *out, hs_error *err)
{
    hs_gguf_value v;
    int found;
    hs_status st = scalar(g, key, HS_GGUF_FLOAT32, required, &v, &found, err);
    if (st || !found)
        return st;
    if (!isfinite(v.f))
        return hs_fail(err, HS_E_VALUE, "key '%s' is not a finite number", key);
    *out = (float)v.f;
    return HS_OK;
}

hs_status hs_gguf_get_bool(const hs_gguf *g, const char *key, int required, int *out, hs_error *err)
{
    hs_gguf_value v;
    int found;
    hs_status st = scalar(g, key, HS_GGUF_BOOL, required, &v, &found, err);
    if (!st && found)
        *out = v.u != 0;
    return st;
}

/* An array of element type want; *idx = -1 when absent and optional. */
hs_status hs_gguf_find_array(const hs_gguf *g, const char *key, hs_gguf_type want, int required,
                             long *idx, hs_error *err)
{
    hs_status st = hs_gguf_find_typed(g, key, HS_GGUF_ARRAY, required, idx, err);
    if (st || *idx < 0)
        return st;
    hs_gguf_type et = hs_gguf_kv_elem_type(g, (size_t)*idx);
    if (et != want)
        return hs_fail(err, HS_E_FORMAT, "key '%s' is an array of %s, expected %s", key,
                       hs_gguf_type_name(et), hs_gguf_type_name(want));
    return HS_OK;
}
