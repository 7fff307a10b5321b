/* The map store of `analyze`: attention maps in memory while small, else in an unlinked
 * temporary file read back with pread (see mapstore.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "core/mapstore.h"

struct hs_mapstore {
    int n_maps, n;
    size_t per;     /* floats per map: n * n */
    float *mem;     /* (n_maps, n, n) when in memory, else NULL */
    int fd;         /* the unlinked file when spilled, else -1 */
    char dir[256];  /* the file's folder, for messages */
};

hs_status hs_mapstore_new(int n_maps, int n, size_t mem_limit, const char *dir,
                          hs_mapstore **out, hs_error *err)
{
    size_t per, total, bytes;
    *out = NULL;
    if (n_maps < 1 || n < 1 || hs_mul_size((size_t)n, (size_t)n, &per) ||
        hs_mul_size(per, (size_t)n_maps, &total) || hs_mul_size(total, sizeof(float), &bytes) ||
        bytes > (size_t)INT64_MAX)
        return hs_fail(err, HS_E_ARG, "map store: %d maps of %d x %d floats", n_maps, n, n);
    hs_mapstore *s = calloc(1, sizeof *s);
    if (!s)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    s->n_maps = n_maps;
    s->n = n;
    s->per = per;
    s->fd = -1;
    if (bytes <= mem_limit) {
        if (!(s->mem = hs_alloc_large(bytes))) {
            free(s);
            return hs_fail(err, HS_E_NOMEM, "out of memory for %zu MB of attention maps",
                           bytes >> 20);
        }
        *out = s;
        return HS_OK;
    }
    if (!dir || !*dir)
        dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    size_t len = strlen(dir) + 32;
    char *path = malloc(len);
    if (!path) {
        free(s);
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    }
    snprintf(path, len, "%s/headscope-maps-XXXXXX", dir);
    s->fd = mkstemp(path);
    if (s->fd < 0) {
        hs_status st = hs_fail(err, HS_E_IO,
                               "cannot create a temporary file for %zu MB of attention maps "
                               "in '%s': %s", bytes >> 20, dir, strerror(errno));
        free(path);
        free(s);
        return st;
    }
    unlink(path);
    free(path);
    *out = s;
    return HS_OK;
}

void hs_mapstore_free(hs_mapstore *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    free(s->mem);
    free(s);
}

int hs_mapstore_spilled(const hs_mapstore *s) { return s->fd >= 0; }

/* Whole-buffer pwrite (from wbuf) or pread (into rbuf), retried on EINTR and short
 * transfers. */
static hs_status io_all(const hs_mapstore *s, const void *wbuf, void *rbuf, size_t len,
                        size_t off, hs_error *err)
{
    int write = wbuf != NULL;
    const char *wp = wbuf;
    char *rp = rbuf;
    while (len > 0) {
        size_t chunk = len < ((size_t)1 << 30) ? len : ((size_t)1 << 30);
        ssize_t r = write ? pwrite(s->fd, wp, chunk, (off_t)off) : pread(s->fd, rp, chunk, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return hs_fail(err, HS_E_IO, "cannot %s attention maps %s the temporary file in '%s': %s",
                           write ? "write" : "read", write ? "to" : "from", s->dir,
                           r < 0 ? strerror(errno) : write ? "no space written" : "file is short");
        if (write)
            wp += r;
        else
            rp += r;
        off += (size_t)r;
        len -= (size_t)r;
    }
    return HS_OK;
}

hs_status hs_mapstore_put(hs_mapstore *s, int first, int count, const float *maps,
                          hs_error *err)
{
    if (first < 0 || count < 1 || count > s->n_maps - first || !maps)
        return hs_fail(err, HS_E_ARG, "map store: maps %d..%d of %d", first, first + count - 1,
                       s->n_maps);
    size_t len = (size_t)count * s->per;
    if (s->mem) {
        memcpy(s->mem + (size_t)first * s->per, maps, len * sizeof *maps);
        return HS_OK;
    }
    return io_all(s, maps, NULL, len * sizeof *maps,
                  (size_t)first * s->per * sizeof *maps, err);
}

hs_status hs_mapstore_get(const hs_mapstore *s, int k, float *out, hs_error *err)
{
    if (!s)
        return hs_fail(err, HS_E_ARG, "the analysis kept no attention maps");
    return hs_mapstore_rows(s, &k, 1, 0, s->n, out, err);
}

hs_status hs_mapstore_rows(const hs_mapstore *s, const int *idx, int count, int r0, int rows,
                           float *out, hs_error *err)
{
    if (count < 0 || r0 < 0 || rows < 0 || rows > s->n - r0 || !out)
        return hs_fail(err, HS_E_ARG, "map store: rows %d..%d of %d", r0, r0 + rows - 1, s->n);
    size_t len = (size_t)rows * (size_t)s->n, off = (size_t)r0 * (size_t)s->n;
    for (int c = 0; c < count; c++) {
        if (idx[c] < 0 || idx[c] >= s->n_maps)
            return hs_fail(err, HS_E_ARG, "map store: map %d of %d", idx[c], s->n_maps);
        size_t at = (size_t)idx[c] * s->per + off;
        if (s->mem) {
            memcpy(out + (size_t)c * len, s->mem + at, len * sizeof *out);
        } else {
            hs_status st = io_all(s, NULL, out + (size_t)c * len, len * sizeof *out,
                                  at * sizeof *out, err);
            if (st)
                return st;
        }
    }
    return HS_OK;
}
