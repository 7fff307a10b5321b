/* safetensors reader: 8-byte little-endian header length, JSON header, raw data.
 * Everything in the header is validated against the file before a tensor is used. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "model/safetensors.h"

#define ST_HEADER_MAX (100u << 20) /* the format's own limit is 100 MB */
#define ST_TENSORS_MAX 100000

/* Every dtype of the safetensors format: the three headscope computes with, and the
 * others it skips (they are buffers, not weights, in the checkpoints people download). */
static const struct {
    const char *name;
    hs_dtype dt;
    size_t elsize;
} dtypes[] = {
    {"F32", HS_DT_F32, 4},     {"F16", HS_DT_F16, 2},     {"BF16", HS_DT_BF16, 2},
    {"F64", HS_DT_OTHER, 8},   {"I64", HS_DT_OTHER, 8},   {"U64", HS_DT_OTHER, 8},
    {"I32", HS_DT_OTHER, 4},   {"U32", HS_DT_OTHER, 4},   {"I16", HS_DT_OTHER, 2},
    {"U16", HS_DT_OTHER, 2},   {"I8", HS_DT_OTHER, 1},    {"U8", HS_DT_OTHER, 1},
    {"BOOL", HS_DT_OTHER, 1},  {"F8_E4M3", HS_DT_OTHER, 1}, {"F8_E5M2", HS_DT_OTHER, 1},
};

static int dtype_from_name(const char *s, hs_tensor_view *t, size_t *elsize)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(s, dtypes[i].name)) {
            t->dtype = dtypes[i].dt;
            t->dtype_name = dtypes[i].name;
            *elsize = dtypes[i].elsize;
            return 0;
        }
    return -1;
}

static int cmp_by_begin(const void *a, const void *b)
{
    const hs_tensor_view *x = a, *y = b;
    return (x->data > y->data) - (x->data < y->data);
}

static int cmp_by_name(const void *a, const void *b)
{
    const hs_tensor_view *x = a, *y = b;
    return strcmp(x->name, y->name);
}

/* Integer JSON value in [0, 2^53). */
static int json_u64(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0 ||
        v->valuedouble != (double)(uint64_t)v->valuedouble)
        return -1;
    *out = (uint64_t)v->valuedouble;
    return 0;
}

/* Parses one header entry into t. */
static hs_status parse_entry(const cJSON *e, const unsigned char *data, uint64_t data_len,
                             hs_tensor_view *t, hs_error *err)
{
    const char *name = t->name;
    if (!cJSON_IsObject(e))
        return hs_fail(err, HS_E_FORMAT, "tensor '%s': header entry is not an object", name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs))
        return hs_fail(err, HS_E_FORMAT,
                       "tensor '%s': header entry needs dtype, shape and data_offsets", name);
    size_t elsize;
    if (dtype_from_name(dt->valuestring, t, &elsize))
        return hs_fail(err, HS_E_DTYPE, "tensor '%s': '%s' is not a safetensors dtype", name,
                       dt->valuestring);
    int nd = cJSON_GetArraySize(shape);
    if (nd > 4)
        return hs_fail(err, HS_E_SHAPE, "tensor '%s': %d dimensions (at most 4 supported)", name,
                       nd);
    t->ndim = nd;
    size_t count = 1;
    for (int i = 0; i < nd; i++) {
        uint64_t d;
        if (json_u64(cJSON_GetArrayItem(shape, i), &d) || d > (uint64_t)INT64_MAX)
            return hs_fail(err, HS_E_FORMAT, "tensor '%s': shape[%d] is not a valid size", name,
                           i);
        t->shape[i] = (int64_t)d;
        if (hs_mul_size(count, (size_t)d, &count))
            return hs_fail(err, HS_E_FORMAT, "tensor '%s': shape overflows", name);
    }
    for (int i = nd; i < 4; i++)
        t->shape[i] = 1;
    uint64_t b, en;
    if (cJSON_GetArraySize(offs) != 2 || json_u64(cJSON_GetArrayItem(offs, 0), &b) ||
        json_u64(cJSON_GetArrayItem(offs, 1), &en) || b > en)
        return hs_fail(err, HS_E_FORMAT, "tensor '%s': data_offsets must be [begin, end]", name);
    if (en > data_len)
        return hs_fail(err, HS_E_FORMAT,
                       "tensor '%s': data_offsets end %llu is beyond the %llu data bytes in the "
                       "file (truncated file?)",
                       name, (unsigned long long)en, (unsigned long long)data_len);
    size_t nbytes;
    if (hs_mul_size(count, elsize, &nbytes) || nbytes != en - b)
        return hs_fail(err, HS_E_FORMAT,
                       "tensor '%s': data_offsets span %llu bytes but shape and dtype need %zu",
                       name, (unsigned long long)(en - b), count * elsize);
    t->data = data + b;
    t->nbytes = nbytes;
    return HS_OK;
}

/* Validates the header of buf (len bytes) and fills s->tensors. */
static hs_status parse_into(hs_safetensors *s, const unsigned char *buf, size_t len,
                            const char *path, hs_error *err)
{
    hs_status st = HS_OK;
    cJSON *root = NULL;
    uint64_t fsize = (uint64_t)len;
    if (fsize < 8)
        return hs_fail(err, HS_E_FORMAT, "'%s': file is %llu bytes, too short for a safetensors "
                       "header", path, (unsigned long long)fsize);
    uint64_t hlen = hs_le64(buf);
    if (hlen > fsize - 8)
        return hs_fail(err, HS_E_FORMAT,
                       "'%s': header length %llu is larger than the file (%llu bytes)", path,
                       (unsigned long long)hlen, (unsigned long long)fsize);
    if (hlen > ST_HEADER_MAX)
        return hs_fail(err, HS_E_FORMAT, "'%s': header length %llu exceeds the 100 MB limit",
                       path, (unsigned long long)hlen);
    /* at most 24 values a tensor entry (its object, dtype, shape of up to 8, offsets) and
     * 64 Ki for __metadata__: a header of one huge array is refused before it is parsed */
    char what[HS_ERROR_MSG_MAX / 2];
    snprintf(what, sizeof what, "'%.200s': the header", path);
    if ((st = hs_json_parse((const char *)buf + 8, (size_t)hlen, (size_t)ST_TENSORS_MAX * 24 + 65536,
                            what, &root, err)))
        return st;
    if (!cJSON_IsObject(root)) {
        st = hs_fail(err, HS_E_FORMAT, "'%s': header is not a JSON object", path);
        goto done;
    }
    const unsigned char *data = buf + 8 + hlen;
    uint64_t data_len = fsize - 8 - hlen;
    int n = cJSON_GetArraySize(root);
    if (n > ST_TENSORS_MAX) {
        st = hs_fail(err, HS_E_FORMAT, "'%s': %d tensors (limit %d)", path, n, ST_TENSORS_MAX);
        goto done;
    }
    s->tensors = calloc((size_t)(n > 0 ? n : 1), sizeof *s->tensors);
    if (!s->tensors) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
        goto done;
    }
    for (const cJSON *e = root->child; e; e = e->next) {
        if (!e->string) {
            st = hs_fail(err, HS_E_FORMAT, "'%s': header entry without a name", path);
            goto done;
        }
        if (!strcmp(e->string, "__metadata__"))
            continue;
        hs_tensor_view *t = &s->tensors[s->n];
        char *nm = strdup(e->string);
        if (!nm) {
            st = hs_fail(err, HS_E_NOMEM, "out of memory");
            goto done;
        }
        t->name = nm;
        s->n++;
        if ((st = parse_entry(e, data, data_len, t, err))) {
            hs_error_prefix(err, "'%s'", path);
            goto done;
        }
    }
    /* Names must be unique; data ranges must not overlap. */
    if (s->n > 1) {
        hs_tensor_view *tmp = malloc(s->n * sizeof *tmp);
        if (!tmp) {
            st = hs_fail(err, HS_E_NOMEM, "out of memory");
            goto done;
        }
        memcpy(tmp, s->tensors, s->n * sizeof *tmp);
        qsort(tmp, s->n, sizeof *tmp, cmp_by_name);
        for (size_t i = 1; i < s->n && !st; i++)
            if (!strcmp(tmp[i - 1].name, tmp[i].name))
                st = hs_fail(err, HS_E_FORMAT, "'%s': tensor '%s' appears twice", path,
                             tmp[i].name);
        if (!st) {
            qsort(tmp, s->n, sizeof *tmp, cmp_by_begin);
            for (size_t i = 1; i < s->n && !st; i++)
                if (tmp[i - 1].data + tmp[i - 1].nbytes > tmp[i].data && tmp[i].nbytes > 0)
                    st = hs_fail(err, HS_E_FORMAT, "'%s': data of tensors '%s' and '%s' overlap",
                                 path, tmp[i - 1].name, tmp[i].name);
        }
        free(tmp);
    }
done:
    cJSON_Delete(root);
    return st;
}

hs_status hs_safetensors_parse(const unsigned char *buf, size_t len, const char *name,
                               hs_safetensors **out, hs_error *err)
{
    *out = NULL;
    hs_safetensors *s = calloc(1, sizeof *s);
    if (!s)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    hs_status st = parse_into(s, buf, len, name, err);
    if (st) {
        hs_safetensors_close(s);
        return st;
    }
    *out = s;
    return HS_OK;
}

hs_status hs_safetensors_open(const char *path, hs_safetensors **out, hs_error *err)
{
    *out = NULL;
    hs_safetensors *s = calloc(1, sizeof *s);
    if (!s)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    hs_status st = hs_file_map(path, &s->map, &s->map_len, err);
    if (!st)
        st = parse_into(s, s->map ? s->map : (const unsigned char *)"", s->map_len, path, err);
    if (st) {
        hs_safetensors_close(s);
        return st;
    }
    *out = s;
    return HS_OK;
}

const hs_tensor_view *hs_safetensors_find(const hs_safetensors *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->tensors[i].name, name))
            return &s->tensors[i];
    return NULL;
}

void hs_safetensors_take_map(hs_safetensors *s, void **map, size_t *len)
{
    *map = s->map;
    *len = s->map_len;
    s->map = NULL;
    s->map_len = 0;
}

void hs_safetensors_close(hs_safetensors *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free((char *)(uintptr_t)s->tensors[i].name);
    free(s->tensors);
    if (s->map)
        hs_file_unmap(s->map, s->map_len);
    free(s);
}
