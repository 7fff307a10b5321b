/* NumPy .npy: format 1.0 writer, 1.0/2.0 reader for little-endian float32/int32. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/npy.h"
#include "headscope/report.h"
#include "internal.h"

#define NPY_MAGIC "\x93NUMPY"

hs_status hs_npy_encode(const void *data, hs_npy_dtype dt, const size_t *shape, int ndim,
                        unsigned char **out, size_t *out_len, hs_error *err)
{
    *out = NULL;
    *out_len = 0;
    if (ndim < 0 || ndim > 8)
        return hs_fail(err, HS_E_ARG, "npy: %d dimensions (0..8 supported)", ndim);
    char dict[512];
    int pos = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                       dt == HS_NPY_F32 ? "<f4" : "<i4");
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        if (hs_mul_size(count, shape[i], &count))
            return hs_fail(err, HS_E_NOMEM, "npy: array size overflows");
        pos += snprintf(dict + pos, sizeof dict - (size_t)pos, "%zu%s", shape[i],
                        ndim == 1 ? "," : (i + 1 < ndim ? ", " : ""));
    }
    pos += snprintf(dict + pos, sizeof dict - (size_t)pos, "), }");
    /* magic(6) + version(2) + header_len(2) + dict + padding + '\n', total % 64 == 0 */
    size_t hlen = (size_t)pos + 1;
    size_t total_hdr = 10 + hlen;
    size_t pad = (64 - total_hdr % 64) % 64;
    hlen += pad;
    size_t nbytes, total;
    if (hs_mul_size(count, 4, &nbytes) || hs_add_size(10 + hlen, nbytes, &total))
        return hs_fail(err, HS_E_NOMEM, "npy: array size overflows");
    unsigned char *buf = malloc(total);
    if (!buf)
        return hs_fail(err, HS_E_NOMEM, "out of memory encoding %zu bytes of npy", total);
    memcpy(buf, NPY_MAGIC, 6);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    memcpy(buf + 10, dict, (size_t)pos);
    memset(buf + 10 + pos, ' ', pad);
    buf[10 + hlen - 1] = '\n';
    unsigned char *p = buf + 10 + hlen;
    const uint32_t *src = data;
    for (size_t i = 0; i < count; i++) { /* explicit little-endian */
        uint32_t v = src[i];
        p[4 * i] = (unsigned char)v;
        p[4 * i + 1] = (unsigned char)(v >> 8);
        p[4 * i + 2] = (unsigned char)(v >> 16);
        p[4 * i + 3] = (unsigned char)(v >> 24);
    }
    *out = buf;
    *out_len = total;
    return HS_OK;
}

hs_status hs_npy_write_f32(const char *path, const float *data, const size_t *shape, int ndim,
                           hs_error *err)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    hs_status st = hs_npy_encode(data, HS_NPY_F32, shape, ndim, &buf, &len, err);
    if (st)
        return st;
    st = hs_file_write_atomic(path, buf, len, err);
    free(buf);
    return st;
}

/* Finds 'key': in the header dict and returns a pointer after the colon and spaces. */
static const char *dict_value(const char *h, const char *key)
{
    const char *p = strstr(h, key);
    if (!p)
        return NULL;
    p += strlen(key);
    while (*p == ' ' || *p == ':')
        p++;
    return p;
}

hs_status hs_npy_read(const char *path, hs_npy *out, hs_error *err)
{
    memset(out, 0, sizeof *out);
    char *buf = NULL;
    size_t len = 0;
    hs_status st = hs_read_file(path, (size_t)1 << 34, &buf, &len, err);
    if (st)
        return st;
    const unsigned char *u = (const unsigned char *)buf;
    if (len < 10 || memcmp(buf, NPY_MAGIC, 6) != 0) {
        st = hs_fail(err, HS_E_FORMAT, "'%s' is not a .npy file (bad magic)", path);
        goto done;
    }
    size_t hlen, off;
    if (u[6] == 1) {
        hlen = hs_le16(u + 8);
        off = 10;
    } else if (u[6] == 2 || u[6] == 3) {
        if (len < 12) {
            st = hs_fail(err, HS_E_FORMAT, "'%s': truncated header", path);
            goto done;
        }
        hlen = hs_le32(u + 8);
        off = 12;
    } else {
        st = hs_fail(err, HS_E_FORMAT, "'%s': npy version %d is not supported", path, u[6]);
        goto done;
    }
    if (hlen > len - off) {
        st = hs_fail(err, HS_E_FORMAT, "'%s': header longer than the file", path);
        goto done;
    }
    char *h = malloc(hlen + 1);
    if (!h) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
        goto done;
    }
    memcpy(h, buf + off, hlen);
    h[hlen] = '\0';
    const char *descr = dict_value(h, "'descr'");
    const char *fo = dict_value(h, "'fortran_order'");
    const char *shp = dict_value(h, "'shape'");
    int elsize = 4, i8 = 0;
    if (!descr || !fo || !shp || *shp != '(') {
        st = hs_fail(err, HS_E_FORMAT, "'%s': header lacks descr, fortran_order or shape", path);
    } else if (!strncmp(descr, "'<f4'", 5)) {
        out->dtype = HS_NPY_F32;
    } else if (!strncmp(descr, "'<i4'", 5)) {
        out->dtype = HS_NPY_I32;
    } else if (!strncmp(descr, "'<i8'", 5)) {
        out->dtype = HS_NPY_I32;
        elsize = 8;
        i8 = 1;
    } else {
        st = hs_fail(err, HS_E_DTYPE, "'%s': dtype %.6s is not supported (<f4, <i4, <i8)", path,
                     descr);
    }
    if (!st && strncmp(fo, "False", 5) != 0)
        st = hs_fail(err, HS_E_UNSUPPORTED, "'%s': Fortran order is not supported", path);
    size_t count = 1;
    if (!st) {
        const char *p = shp + 1;
        while (*p && *p != ')') {
            while (*p == ' ' || *p == ',')
                p++;
            if (*p == ')')
                break;
            char *end;
            unsigned long long v = strtoull(p, &end, 10);
            if (end == p || out->ndim == 8 || hs_mul_size(count, (size_t)v, &count)) {
                st = hs_fail(err, HS_E_FORMAT, "'%s': bad shape in header", path);
                break;
            }
            out->shape[out->ndim++] = (size_t)v;
            p = end;
        }
    }
    free(h);
    if (st)
        goto done;
    size_t need;
    if (hs_mul_size(count, (size_t)elsize, &need) || need > len - off - hlen) {
        st = hs_fail(err, HS_E_FORMAT, "'%s': data is shorter than the shape needs (truncated?)",
                     path);
        goto done;
    }
    out->count = count;
    out->data = malloc(count ? count * 4 : 4);
    if (!out->data) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
        goto done;
    }
    const unsigned char *d = u + off + hlen;
    uint32_t *dst = out->data;
    for (size_t i = 0; i < count; i++) {
        if (i8) {
            int64_t v = (int64_t)hs_le64(d + 8 * i);
            if (v < INT32_MIN || v > INT32_MAX) {
                st = hs_fail(err, HS_E_VALUE, "'%s': value %lld does not fit int32", path,
                             (long long)v);
                hs_npy_free(out);
                goto done;
            }
            int32_t w = (int32_t)v;
            memcpy(&dst[i], &w, 4);
        } else {
            dst[i] = hs_le32(d + 4 * i);
        }
    }
done:
    free(buf);
    return st;
}

void hs_npy_free(hs_npy *a)
{
    if (!a)
        return;
    free(a->data);
    memset(a, 0, sizeof *a);
}
