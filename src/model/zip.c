/* The zip archive reader of torch.save files (see zip.h): the central directory, with its
 * zip64 records, read from the end of the file; the field layouts follow the zip
 * specification (PKWARE APPNOTE 6.3). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "model/zip.h"

#define ZIP_ENTRIES_MAX (1u << 20) /* entries */
#define ZIP_EOCD_SCAN (65535u + 22u)

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u

/* zip.h */
int hs_zip_name_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static int cmp_entry(const void *x, const void *y)
{
    const hs_zip_entry *a = x, *b = y;
    return hs_zip_name_cmp(a->name, a->name_len, b->name, b->name_len);
}

/* Reads the zip64 extended information extra field (id 1) of a central header. */
static hs_status zip64_extra(hs_zip *z, const unsigned char *x, size_t el, hs_zip_entry *e,
                             hs_error *err)
{
    size_t q = 0;
    while (el - q >= 4) {
        unsigned id = hs_le16(x + q), sz = hs_le16(x + q + 2);
        if (sz > el - q - 4)
            return hs_fail(err, HS_E_FORMAT, "'%s': zip entry '%.*s': extra field overruns "
                           "its header", z->path, (int)e->name_len, e->name);
        if (id == 1) {
            uint64_t *fields[3] = {&e->usize, &e->csize, &e->lho};
            size_t r = 0;
            for (int k = 0; k < 3; k++) {
                if (*fields[k] != 0xFFFFFFFFu)
                    continue;
                if (sz - r < 8)
                    return hs_fail(err, HS_E_FORMAT, "'%s': zip entry '%.*s': zip64 extra "
                                   "field is too short", z->path, (int)e->name_len, e->name);
                *fields[k] = hs_le64(x + q + 4 + r);
                r += 8;
            }
        }
        q += 4 + (size_t)sz;
    }
    return HS_OK;
}

/* zip.h */
hs_status hs_zip_read(hs_zip *z, hs_error *err)
{
    const unsigned char *b = z->b;
    size_t len = z->len, eocd = SIZE_MAX;
    if (len < 22)
        return hs_fail(err, HS_E_FORMAT, "'%s': %zu bytes, too short for a zip archive",
                       z->path, len);
    size_t lo = len - 22 > ZIP_EOCD_SCAN ? len - 22 - ZIP_EOCD_SCAN : 0;
    for (size_t i = len - 22 + 1; i-- > lo;)
        if (hs_le32(b + i) == SIG_EOCD && (size_t)hs_le16(b + i + 20) == len - 22 - i) {
            eocd = i;
            break;
        }
    if (eocd == SIZE_MAX)
        return hs_fail(err, HS_E_FORMAT, "'%s': no zip end of central directory record "
                       "(truncated file?)", z->path);
    uint64_t disk = hs_le16(b + eocd + 4), cd_disk = hs_le16(b + eocd + 6);
    uint64_t n_disk = hs_le16(b + eocd + 8), n = hs_le16(b + eocd + 10);
    uint64_t cd_size = hs_le32(b + eocd + 12), cd_off = hs_le32(b + eocd + 16);
    size_t cd_end = eocd;
    if (n == 0xFFFF || n_disk == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu) {
        if (eocd < 20 || hs_le32(b + eocd - 20) != SIG_LOC64)
            return hs_fail(err, HS_E_FORMAT, "'%s': zip64 end of central directory locator is "
                           "missing", z->path);
        uint64_t e64 = hs_le64(b + eocd - 12);
        if (hs_le32(b + eocd - 16) != 0 || hs_le32(b + eocd - 4) > 1)
            return hs_fail(err, HS_E_UNSUPPORTED, "'%s': multi-disk zip archives are not "
                           "supported", z->path);
        if (eocd - 20 < 56 || e64 > eocd - 20 - 56 || hs_le32(b + e64) != SIG_EOCD64)
            return hs_fail(err, HS_E_FORMAT, "'%s': zip64 end of central directory record "
                           "is missing or misplaced", z->path);
        disk = hs_le32(b + e64 + 16);
        cd_disk = hs_le32(b + e64 + 20);
        n_disk = hs_le64(b + e64 + 24);
        n = hs_le64(b + e64 + 32);
        cd_size = hs_le64(b + e64 + 40);
        cd_off = hs_le64(b + e64 + 48);
        cd_end = (size_t)e64;
    }
    if (disk != 0 || cd_disk != 0 || n_disk != n)
        return hs_fail(err, HS_E_UNSUPPORTED, "'%s': multi-disk zip archives are not supported",
                       z->path);
    if (cd_off > cd_end || cd_size > cd_end - cd_off)
        return hs_fail(err, HS_E_FORMAT, "'%s': zip central directory (offset %llu, %llu bytes) "
                       "lies outside the file (truncated file?)", z->path,
                       (unsigned long long)cd_off, (unsigned long long)cd_size);
    if (n > ZIP_ENTRIES_MAX || n > cd_size / 46)
        return hs_fail(err, HS_E_FORMAT, "'%s': zip claims %llu entries in a %llu-byte central "
                       "directory (limit %u)", z->path, (unsigned long long)n,
                       (unsigned long long)cd_size, ZIP_ENTRIES_MAX);
    z->cd_off = cd_off;
    z->e = calloc(n ? (size_t)n : 1, sizeof *z->e);
    if (!z->e)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    size_t p = (size_t)cd_off, end = (size_t)(cd_off + cd_size);
    for (size_t i = 0; i < n; i++) {
        if (end - p < 46 || hs_le32(b + p) != SIG_CENTRAL)
            return hs_fail(err, HS_E_FORMAT, "'%s': zip central header %zu is missing or "
                           "truncated", z->path, i);
        size_t nl = hs_le16(b + p + 28), el = hs_le16(b + p + 30), cl = hs_le16(b + p + 32);
        if (nl + el + cl > end - p - 46)
            return hs_fail(err, HS_E_FORMAT, "'%s': zip central header %zu overruns the "
                           "central directory", z->path, i);
        hs_zip_entry *e = &z->e[z->n++];
        e->flags = hs_le16(b + p + 8);
        e->method = hs_le16(b + p + 10);
        e->csize = hs_le32(b + p + 20);
        e->usize = hs_le32(b + p + 24);
        e->lho = hs_le32(b + p + 42);
        e->name = (const char *)b + p + 46;
        e->name_len = nl;
        e->tag = -1;
        hs_status st = zip64_extra(z, b + p + 46 + nl, el, e, err);
        if (st)
            return st;
        p += 46 + nl + el + cl;
    }
    qsort(z->e, z->n, sizeof *z->e, cmp_entry);
    for (size_t i = 1; i < z->n; i++)
        if (!cmp_entry(&z->e[i - 1], &z->e[i]))
            return hs_fail(err, HS_E_FORMAT, "'%s': zip entry '%.*s' appears twice", z->path,
                           (int)z->e[i].name_len, z->e[i].name);
    return HS_OK;
}

/* zip.h */
hs_status hs_zip_data(const hs_zip *z, const hs_zip_entry *e, const unsigned char **data,
                      size_t *size, hs_error *err)
{
    const char *nm = e->name;
    int nl = (int)e->name_len;
    if (e->flags & 1)
        return hs_fail(err, HS_E_UNSUPPORTED, "'%s': zip entry '%.*s' is encrypted", z->path,
                       nl, nm);
    if (e->method != 0)
        return hs_fail(err, HS_E_UNSUPPORTED, "'%s': zip entry '%.*s' is compressed (%s); only "
                       "stored entries are read, as torch.save writes them: re-save the file "
                       "with torch.save", z->path, nl, nm, e->method == 8 ? "deflate"
                       : "method other than deflate");
    if (e->csize != e->usize)
        return hs_fail(err, HS_E_FORMAT, "'%s': stored zip entry '%.*s' has different "
                       "compressed and uncompressed sizes", z->path, nl, nm);
    if (e->lho > z->cd_off || z->cd_off - e->lho < 30 || hs_le32(z->b + e->lho) != SIG_LOCAL)
        return hs_fail(err, HS_E_FORMAT, "'%s': zip entry '%.*s': local header is missing",
                       z->path, nl, nm);
    const unsigned char *h = z->b + e->lho;
    uint64_t off = e->lho + 30 + (uint64_t)hs_le16(h + 26) + hs_le16(h + 28);
    if (off > z->cd_off || e->usize > z->cd_off - off || hs_le16(h + 26) != e->name_len ||
        memcmp(h + 30, nm, e->name_len) != 0) /* off <= cd_off keeps the name in bounds */
        return hs_fail(err, HS_E_FORMAT, "'%s': zip entry '%.*s': local header does not match "
                       "the central directory or its data runs past the archive", z->path,
                       nl, nm);
    *data = z->b + off;
    *size = (size_t)e->usize;
    return HS_OK;
}

/* zip.h */
hs_zip_entry *hs_zip_find(const hs_zip *z, const char *name, size_t len)
{
    hs_zip_entry probe = {.name = name, .name_len = len};
    return bsearch(&probe, z->e, z->n, sizeof *z->e, cmp_entry);
}
