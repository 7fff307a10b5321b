/* NumPy .npy: format 1.0 writer, 1.0/2.0 reader for little-endian float32/int32. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "headscope/npy.h"

#define NPY_MAGIC "\x93NUMPY"

/* The format-1.0 header of an array: magic, version, length, the dict padded with spaces
 * and a newline so the data starts at a multiple of 64 bytes. hdr holds at least 640
 * bytes; *count gets the element count. */
static hs_status npy_header(hs_npy_dtype dt, const size_t *shape, int ndim, unsigned char *hdr,
                            size_t *hdr_len, size_t *count, hs_error *err)
{
    if (ndim < 0 || ndim > 8)
        return hs_fail(err, HS_E_ARG, "npy: %d dimensions (0..8 supported)", ndim);
    char dict[512];
    int pos = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                       dt == HS_NPY_F32 ? "<f4" : "<i4");
    *count = 1;
    for (int i = 0; i < ndim; i++) {
        if (hs_mul_size(*count, shape[i], count))
            return hs_fail(err, HS_E_NOMEM, "npy: array size overflows");
        pos += snprintf(dict + pos, sizeof dict - (size_t)pos, "%zu%s", shape[i],
                        ndim == 1 ? "," : (i + 1 < ndim ? ", " : ""));
    }
    pos += snprintf(dict + pos, sizeof dict - (size_t)pos, "), }");
    size_t hlen = (size_t)pos + 1; /* dict + '\n' */
    size_t pad = (64 - (10 + hlen) % 64) % 64;
    hlen += pad;
    memcpy(hdr, NPY_MAGIC, 6);
    hdr[6] = 1;
    hdr[7] = 0;
    hdr[8] = (unsigned char)(hlen & 0xff);
    hdr[9] = (unsigned char)(hlen >> 8);
    memcpy(hdr + 10, dict, (size_t)pos);
    memset(hdr + 10 + pos, ' ', pad);
    hdr[10 + hlen - 1] = '\n';
    *hdr_len = 10 + hlen;
    return HS_OK;
}

hs_status hs_npy_encode(const void *data, hs_npy_dtype dt, const size_t *shape, int ndim,
                        unsigned char **out, size_t *out_len, hs_error *err)
{
    *out = NULL;
    *out_len = 0;
    unsigned char hdr[640];
    size_t hl, count, nbytes, total;
    hs_status st = npy_header(dt, shape, ndim, hdr, &hl, &count, err);
    if (st)
        return st;
    if (hs_mul_size(count, 4, &nbytes) || hs_add_size(hl, nbytes, &total))
        return hs_fail(err, HS_E_NOMEM, "npy: array size overflows");
    unsigned char *buf = malloc(total);
    if (!buf)
        return hs_fail(err, HS_E_NOMEM, "out of memory encoding %zu bytes of npy", total);
    memcpy(buf, hdr, hl);
    unsigned char *p = buf + hl;
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
    const uint16_t one = 1;
    if (*(const unsigned char *)&one == 1) { /* little-endian host: header, then the floats
                                                as they lie, with no copy of the array */
        unsigned char hdr[640];
        size_t hl, count, nbytes;
        hs_status st = npy_header(HS_NPY_F32, shape, ndim, hdr, &hl, &count, err);
        if (st)
            return st;
        if (hs_mul_size(count, 4, &nbytes))
            return hs_fail(err, HS_E_NOMEM, "npy: array size overflows");
        const void *parts[2] = {hdr, data};
        size_t lens[2] = {hl, nbytes};
        return hs_file_write_atomic_parts(path, parts, lens, 2, err);
    }
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

/* ---- streamed writer ----------------------------------------------------------------- */

struct hs_npy_stream {
    hs_out out;
    size_t want, written;
};

hs_status hs_npy_stream_open(const char *path, const size_t *shape, int ndim,
                             hs_npy_stream **out, hs_error *err)
{
    *out = NULL;
    unsigned char hdr[640];
    size_t hl, count;
    hs_status st = npy_header(HS_NPY_F32, shape, ndim, hdr, &hl, &count, err);
    if (st)
        return st;
    hs_npy_stream *s = calloc(1, sizeof *s);
    if (!s)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    if ((st = hs_out_open(path, &s->out, err))) {
        free(s);
        return st;
    }
    s->want = count;
    if (fwrite(hdr, 1, hl, s->out.f) != hl) {
        st = hs_fail(err, HS_E_IO, "cannot write '%s': %s", path, strerror(errno));
        hs_npy_stream_close(s, 0, NULL);
        return st;
    }
    *out = s;
    return HS_OK;
}

hs_status hs_npy_stream_write(hs_npy_stream *s, const float *data, size_t count, hs_error *err)
{
    if (count > s->want - s->written)
        return hs_fail(err, HS_E_ARG, "npy: %zu more values than the shape holds",
                       count - (s->want - s->written));
    const uint16_t one = 1;
    int bad = 0;
    if (*(const unsigned char *)&one == 1) {
        bad = fwrite(data, sizeof *data, count, s->out.f) != count;
    } else {
        for (size_t i = 0; i < count && !bad; i++) {
            uint32_t v;
            unsigned char b[4];
            memcpy(&v, data + i, 4);
            for (int k = 0; k < 4; k++)
                b[k] = (unsigned char)(v >> (8 * k));
            bad = fwrite(b, 1, 4, s->out.f) != 4;
        }
    }
    if (bad)
        return hs_fail(err, HS_E_IO, "cannot write '%s': %s", s->out.path, strerror(errno));
    s->written += count;
    return HS_OK;
}

hs_status hs_npy_stream_close(hs_npy_stream *s, int commit, hs_error *err)
{
    if (!s)
        return HS_OK;
    hs_status st = HS_OK;
    if (commit && s->written != s->want) {
        st = hs_fail(err, HS_E_ARG, "npy: %zu of %zu values written", s->written, s->want);
        commit = 0;
    }
    hs_status st2 = hs_out_close(&s->out, commit, err);
    free(s);
    return st ? st : st2;
}
