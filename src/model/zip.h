/* Zip archive reader (private), for the archives torch.save writes: entries stored, not
 * compressed. Reads the central directory of a whole-file image and hands out each stored
 * entry's bytes after checking its local header; nothing is copied. */
#ifndef HEADSCOPE_ZIP_H
#define HEADSCOPE_ZIP_H

#include <stddef.h>
#include <stdint.h>

#include "headscope/status.h"


typedef struct hs_zip_entry {
    const char *name; /* into the file bytes, not NUL-terminated */
    size_t name_len;
    unsigned flags, method;
    uint64_t csize, usize, lho; /* sizes and local header offset */
    int tag;                    /* the caller's own mark, -1 after hs_zip_read */
} hs_zip_entry;

typedef struct hs_zip {
    const unsigned char *b;
    size_t len;
    const char *path;
    hs_zip_entry *e; /* (n) sorted by name */
    size_t n;
    uint64_t cd_off; /* entry data lies before the central directory */
} hs_zip;

/* Fills z->e (sorted by name; free it), z->n and z->cd_off from the image z->b of z->len
 * bytes; z->path names the file in messages. Fails on a missing or malformed end record or
 * central header, a multi-disk archive, and a name that appears twice. */
hs_status hs_zip_read(hs_zip *z, hs_error *err);

/* The order of the entries: names of al and bl bytes compared as bytes, a prefix first. */
int hs_zip_name_cmp(const char *a, size_t al, const char *b, size_t bl);

/* The entry called name (len bytes), or NULL. */
hs_zip_entry *hs_zip_find(const hs_zip *z, const char *name, size_t len);

/* The bytes of a stored entry, after checking its local header against the central one;
 * fails on an encrypted or compressed entry. */
hs_status hs_zip_data(const hs_zip *z, const hs_zip_entry *e, const unsigned char **data,
                      size_t *size, hs_error *err);

#endif
