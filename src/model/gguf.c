/* GGUF v2/v3 reader: validates a whole file image (header, metadata, tensor table,
 * offsets) before allocating, then exposes it for inspection and for hs_gguf_load.
 *
 * Parsing walks the header twice: the first walk checks every count, length and type
 * against limits and the bytes left and counts the strings; the second, after one
 * allocation sized by that count (bounded by the file size), copies the strings out
 * NUL-terminated and records where each value lives. Duplicates, alignment, bounds and
 * overlaps are checked on the filled tables. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "headscope/gguf.h"
#include "model/gguf_internal.h"
#include "model/model_internal.h"
#include "model/quant.h"

#define GGUF_MAX_STRING ((uint64_t)1 << 30) /* ggml's limits */
#define GGUF_MAX_ARRAY ((uint64_t)1 << 30)
#define GGUF_MAX_KEY 65535u
#define GGUF_MAX_KV 65536u
#define GGUF_MAX_TENSORS 65536u
#define GGUF_MAX_NAME 63u
#define GGUF_DEFAULT_ALIGNMENT 32u

/* Smallest encodings, for bounding counts by the bytes left. */
#define MIN_KV_BYTES 14     /* u64 key length + 1 byte, u32 type, 1-byte value */
#define MIN_TENSOR_BYTES 33 /* u64 name length + 1 byte, u32 n_dims, one u64 ne, u32 type, u64 offset */

/* ---- the cursor ------------------------------------------------------------------ */

typedef struct cur {
    const unsigned char *p;
    size_t len, pos;
} cur;

static size_t left(const cur *c) { return c->len - c->pos; }

static int rd_u32(cur *c, uint32_t *v)
{
    if (left(c) < 4)
        return -1;
    *v = hs_le32(c->p + c->pos);
    c->pos += 4;
    return 0;
}

static int rd_u64(cur *c, uint64_t *v)
{
    if (left(c) < 8)
        return -1;
    *v = hs_le64(c->p + c->pos);
    c->pos += 8;
    return 0;
}

static hs_status truncated(hs_error *err, const cur *c, const char *what)
{
    return hs_fail(err, HS_E_FORMAT, "file ends at byte %zu inside %s", c->len, what);
}

/* Reads a string's length and skips its bytes; off and slen locate them. what names the
 * field for messages. */
static hs_status rd_str(cur *c, const char *what, size_t *off, size_t *slen, hs_error *err)
{
    uint64_t n;
    size_t at = c->pos;
    if (rd_u64(c, &n))
        return truncated(err, c, what);
    if (n > GGUF_MAX_STRING)
        return hs_fail(err, HS_E_FORMAT, "%s: string length %llu at byte %zu exceeds the limit of 2^30",
                       what, (unsigned long long)n, at);
    if (n > left(c))
        return hs_fail(err, HS_E_FORMAT,
                       "%s: string length %llu at byte %zu runs past the end of the file (%zu bytes left)",
                       what, (unsigned long long)n, at, left(c));
    *off = c->pos;
    *slen = (size_t)n;
    c->pos += (size_t)n;
    return HS_OK;
}

/* ---- the two walks ---------------------------------------------------------------- */

typedef struct walk {
    int fill;
    size_t n_strs, n_chars; /* counted by the first walk, used by the second */
    uint64_t n_tensors, n_kv;
} walk;

static void put_str(hs_gguf *g, walk *w, size_t off, size_t len)
{
    char *dst = g->chars + w->n_chars;
    memcpy(dst, g->data + off, len);
    dst[len] = '\0';
    g->strs[w->n_strs].s = dst;
    g->strs[w->n_strs].len = len;
}

/* Records a string in the tables (second walk) or counts it (first walk). */
static void take_str(hs_gguf *g, walk *w, size_t off, size_t len)
{
    if (w->fill)
        put_str(g, w, off, len);
    w->n_strs++;
    w->n_chars += len + 1;
}

static void key_label(char *buf, size_t cap, const unsigned char *s, size_t len)
{
    size_t n = len < 80 ? len : 80;
    size_t j = 0;
    for (size_t i = 0; i < n && j + 5 < cap; i++)
        j += (size_t)snprintf(buf + j, cap - j, (s[i] >= 0x20 && s[i] < 0x7f) ? "%c" : "\\x%02x",
                              s[i]);
    if (n < len && j + 4 < cap)
        snprintf(buf + j, cap - j, "...");
}

static hs_status walk_kvs(hs_gguf *g, cur *c, walk *w, hs_error *err)
{
    hs_status st;
    for (uint64_t k = 0; k < w->n_kv; k++) {
        char what[192], key[100];
        size_t koff, klen;
        snprintf(what, sizeof what, "key #%llu", (unsigned long long)k);
        if ((st = rd_str(c, what, &koff, &klen, err)))
            return st;
        const unsigned char *ks = c->p + koff;
        key_label(key, sizeof key, ks, klen);
        if (klen == 0)
            return hs_fail(err, HS_E_FORMAT, "key #%llu is empty", (unsigned long long)k);
        if (klen > GGUF_MAX_KEY)
            return hs_fail(err, HS_E_FORMAT, "key #%llu is %zu bytes long (the limit is 65535)",
                           (unsigned long long)k, klen);
        for (size_t i = 0; i < klen; i++)
            if (ks[i] <= 0x20 || ks[i] >= 0x7f)
                return hs_fail(err, HS_E_FORMAT,
                               "key '%s' holds byte 0x%02x (keys are printable ascii without spaces)",
                               key, ks[i]);
        gkv *kv = w->fill ? &g->kv[k] : NULL;
        if (kv)
            kv->key = w->n_strs;
        take_str(g, w, koff, klen);

        uint32_t type, elem;
        uint64_t n = 1;
        if (rd_u32(c, &type))
            return truncated(err, c, "a value type");
        if (type > HS_GGUF_FLOAT64)
            return hs_fail(err, HS_E_FORMAT, "key '%s' has unknown value type %u", key, type);
        elem = type;
        if (type == HS_GGUF_ARRAY) {
            if (rd_u32(c, &elem) || rd_u64(c, &n))
                return truncated(err, c, "an array header");
            if (elem == HS_GGUF_ARRAY)
                return hs_fail(err, HS_E_FORMAT, "key '%s': nested arrays are not supported", key);
            if (elem > HS_GGUF_FLOAT64)
                return hs_fail(err, HS_E_FORMAT, "key '%s': array of unknown value type %u", key, elem);
            if (n > GGUF_MAX_ARRAY)
                return hs_fail(err, HS_E_FORMAT,
                               "key '%s': array of %llu elements exceeds the limit of 2^30", key,
                               (unsigned long long)n);
        }
        if (kv) {
            kv->type = type;
            kv->elem = elem;
            kv->n = n;
            kv->val = c->pos;
            kv->str0 = w->n_strs;
        }
        if (elem == HS_GGUF_STRING) {
            if (n > left(c) / 8)
                return hs_fail(err, HS_E_FORMAT,
                               "key '%s': %llu strings cannot fit in the %zu bytes left", key,
                               (unsigned long long)n, left(c));
            for (uint64_t j = 0; j < n; j++) {
                size_t soff, slen;
                if (type == HS_GGUF_ARRAY)
                    snprintf(what, sizeof what, "key '%s' element %llu", key, (unsigned long long)j);
                else
                    snprintf(what, sizeof what, "key '%s'", key);
                if ((st = rd_str(c, what, &soff, &slen, err)))
                    return st;
                take_str(g, w, soff, slen);
            }
            continue;
        }
        size_t sz = hs_gguf_value_size(elem);
        if (n > left(c) / sz)
            return hs_fail(err, HS_E_FORMAT,
                           "key '%s': %llu value(s) of type %s run past the end of the file (%zu bytes left)",
                           key, (unsigned long long)n, hs_gguf_type_name((hs_gguf_type)elem), left(c));
        if (elem == HS_GGUF_BOOL && !w->fill)
            for (uint64_t j = 0; j < n; j++)
                if (c->p[c->pos + j] > 1)
                    return hs_fail(err, HS_E_FORMAT, "key '%s': bool byte %u (expected 0 or 1)",
                                   key, c->p[c->pos + j]);
        c->pos += (size_t)n * sz;
    }
    return HS_OK;
}

static hs_status walk_tensors(hs_gguf *g, cur *c, walk *w, hs_error *err)
{
    hs_status st;
    for (uint64_t k = 0; k < w->n_tensors; k++) {
        char what[64], name[96];
        size_t noff, nlen;
        snprintf(what, sizeof what, "tensor #%llu name", (unsigned long long)k);
        if ((st = rd_str(c, what, &noff, &nlen, err)))
            return st;
        key_label(name, sizeof name, c->p + noff, nlen);
        if (nlen == 0 || nlen > GGUF_MAX_NAME)
            return hs_fail(err, HS_E_FORMAT, "tensor #%llu: name of %zu bytes (expected 1 to 63)",
                           (unsigned long long)k, nlen);
        if (memchr(c->p + noff, 0, nlen))
            return hs_fail(err, HS_E_FORMAT, "tensor '%s': name holds a NUL byte", name);
        hs_gguf_tensor *t = w->fill ? &g->tensors[k] : NULL;
        if (t)
            t->name = g->chars + w->n_chars;
        take_str(g, w, noff, nlen);

        uint32_t n_dims, type;
        if (rd_u32(c, &n_dims))
            return truncated(err, c, "a tensor info");
        if (n_dims < 1 || n_dims > 4)
            return hs_fail(err, HS_E_FORMAT, "tensor '%s': n_dims %u (expected 1 to 4)", name, n_dims);
        int64_t ne[4] = {1, 1, 1, 1};
        uint64_t count = 1;
        for (uint32_t d = 0; d < n_dims; d++) {
            uint64_t v;
            if (rd_u64(c, &v))
                return truncated(err, c, "a tensor info");
            if (v == 0 || v > (uint64_t)INT64_MAX)
                return hs_fail(err, HS_E_FORMAT, "tensor '%s': ne[%u] = %llu (expected 1 to 2^63-1)",
                               name, d, (unsigned long long)v);
            if (count > (uint64_t)INT64_MAX / v)
                return hs_fail(err, HS_E_FORMAT, "tensor '%s': element count overflows", name);
            count *= v;
            ne[d] = (int64_t)v;
        }
        if (rd_u32(c, &type))
            return truncated(err, c, "a tensor info");
        uint64_t blck, bsize;
        if (!hs_ggml_block(type, &blck, &bsize)) {
            const char *tn = hs_ggml_type_name(type);
            if (type >= GGML_TYPE_COUNT)
                return hs_fail(err, HS_E_DTYPE, "tensor '%s': unknown ggml type %u", name, type);
            return hs_fail(err, HS_E_DTYPE,
                           "tensor '%s': unsupported ggml type %u (%s); headscope reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS",
                           name, type, tn ? tn : "removed");
        }
        if ((uint64_t)ne[0] % blck)
            return hs_fail(err, HS_E_FORMAT,
                           "tensor '%s': ne[0] = %lld is not a multiple of the %s block size %llu",
                           name, (long long)ne[0], hs_ggml_type_name(type), (unsigned long long)blck);
        uint64_t nbytes = count / blck; /* bsize checked against overflow below */
        if (nbytes > UINT64_MAX / bsize)
            return hs_fail(err, HS_E_FORMAT, "tensor '%s': byte size overflows", name);
        nbytes *= bsize;
        uint64_t offset;
        if (rd_u64(c, &offset))
            return truncated(err, c, "a tensor info");
        if (t) {
            t->type = type;
            t->n_dims = n_dims;
            memcpy(t->ne, ne, sizeof ne);
            t->offset = offset;
            t->nbytes = nbytes;
        }
    }
    return HS_OK;
}

static int cmp_str(const void *a, const void *b)
{
    const gstr *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int r = memcmp(x->s, y->s, n);
    if (r)
        return r;
    return (x->len > y->len) - (x->len < y->len);
}

static int cmp_tensor_name(const void *a, const void *b)
{
    const hs_gguf_tensor *x = *(const hs_gguf_tensor *const *)a;
    const hs_gguf_tensor *y = *(const hs_gguf_tensor *const *)b;
    return strcmp(x->name, y->name);
}

static int cmp_tensor_offset(const void *a, const void *b)
{
    const hs_gguf_tensor *x = *(const hs_gguf_tensor *const *)a;
    const hs_gguf_tensor *y = *(const hs_gguf_tensor *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Checks on the filled tables: duplicates, alignment, bounds, overlaps. */
static hs_status check_tables(hs_gguf *g, hs_error *err)
{
    hs_status st = HS_OK;
    /* duplicate keys */
    gstr *keys = malloc((g->n_kv ? g->n_kv : 1) * sizeof *keys);
    if (!keys)
        return hs_fail(err, HS_E_NOMEM, "out of memory checking keys");
    for (size_t i = 0; i < g->n_kv; i++)
        keys[i] = g->strs[g->kv[i].key];
    qsort(keys, g->n_kv, sizeof *keys, cmp_str);
    for (size_t i = 1; i < g->n_kv; i++)
        if (!cmp_str(&keys[i - 1], &keys[i])) {
            st = hs_fail(err, HS_E_FORMAT, "duplicate key '%s'", keys[i].s);
            break;
        }
    free(keys);
    if (st)
        return st;

    /* general.alignment */
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    long ai = hs_gguf_find_kv(g, "general.alignment");
    if (ai >= 0) {
        const gkv *kv = &g->kv[ai];
        if (kv->type != HS_GGUF_UINT32)
            return hs_fail(err, HS_E_FORMAT, "key 'general.alignment' has type %s, expected UINT32",
                           hs_gguf_type_name((hs_gguf_type)kv->type));
        uint32_t a = hs_le32(g->data + kv->val);
        if (a == 0 || (a & (a - 1)))
            return hs_fail(err, HS_E_FORMAT, "general.alignment %u is not a power of two", a);
        g->alignment = a;
    }

    /* duplicate tensor names (the sorted table stays for lookups) */
    for (size_t i = 0; i < g->n_tensors; i++)
        g->by_name[i] = &g->tensors[i];
    qsort(g->by_name, g->n_tensors, sizeof *g->by_name, cmp_tensor_name);
    for (size_t i = 1; i < g->n_tensors; i++)
        if (!strcmp(g->by_name[i - 1]->name, g->by_name[i]->name))
            return hs_fail(err, HS_E_FORMAT, "duplicate tensor '%s'", g->by_name[i]->name);
    return HS_OK;
}

static hs_status check_data(hs_gguf *g, size_t header_end, hs_error *err)
{
    uint64_t a = g->alignment;
    uint64_t start = ((uint64_t)header_end + a - 1) / a * a;
    if (g->n_tensors == 0) {
        g->data_off = start < g->len ? start : g->len;
        return HS_OK;
    }
    if (start > g->len)
        return hs_fail(err, HS_E_FORMAT,
                       "data section would start at byte %llu, past the end of the file (%zu bytes)",
                       (unsigned long long)start, g->len);
    g->data_off = start;
    uint64_t avail = g->len - start;
    for (size_t i = 0; i < g->n_tensors; i++) {
        hs_gguf_tensor *t = &g->tensors[i];
        if (t->offset % a)
            return hs_fail(err, HS_E_FORMAT,
                           "tensor '%s': offset %llu is not a multiple of the alignment %llu",
                           t->name, (unsigned long long)t->offset, (unsigned long long)a);
        if (t->offset > avail || t->nbytes > avail - t->offset)
            return hs_fail(err, HS_E_FORMAT,
                           "tensor '%s': %llu bytes at data offset %llu run past the end of the file "
                           "(the data section holds %llu bytes)",
                           t->name, (unsigned long long)t->nbytes, (unsigned long long)t->offset,
                           (unsigned long long)avail);
        t->data = g->data + start + t->offset;
    }
    const hs_gguf_tensor **by_off = malloc(g->n_tensors * sizeof *by_off);
    if (!by_off)
        return hs_fail(err, HS_E_NOMEM, "out of memory checking tensor offsets");
    for (size_t i = 0; i < g->n_tensors; i++)
        by_off[i] = &g->tensors[i];
    qsort(by_off, g->n_tensors, sizeof *by_off, cmp_tensor_offset);
    hs_status st = HS_OK;
    for (size_t i = 1; i < g->n_tensors; i++) {
        const hs_gguf_tensor *p = by_off[i - 1], *q = by_off[i];
        if (p->offset + p->nbytes > q->offset) {
            st = hs_fail(err, HS_E_FORMAT,
                         "tensors '%s' (offset %llu, %llu bytes) and '%s' (offset %llu) overlap",
                         p->name, (unsigned long long)p->offset, (unsigned long long)p->nbytes,
                         q->name, (unsigned long long)q->offset);
            break;
        }
    }
    free(by_off);
    return st;
}

static hs_status parse_image(hs_gguf *g, hs_error *err)
{
    cur c = {.p = g->data, .len = g->len, .pos = 0};
    hs_status st;
    if (g->len < 4 || memcmp(g->data, "GGUF", 4)) {
        char got[40];
        key_label(got, sizeof got, g->data, g->len < 4 ? g->len : 4);
        return hs_fail(err, HS_E_FORMAT, "bad magic '%s' (expected 'GGUF')", got);
    }
    c.pos = 4;
    uint32_t version;
    uint64_t n_tensors, n_kv;
    if (rd_u32(&c, &version))
        return truncated(err, &c, "the header");
    if (version != 0 && (version & 0xffff) == 0)
        return hs_fail(err, HS_E_UNSUPPORTED,
                       "gguf version 0x%08x looks byte-swapped: big-endian files are not supported",
                       version);
    if (version == 1)
        return hs_fail(err, HS_E_UNSUPPORTED,
                       "gguf version 1 is not supported (expected 2 or 3; re-convert the model)");
    if (version != 2 && version != 3)
        return hs_fail(err, HS_E_UNSUPPORTED, "unsupported gguf version %u (expected 2 or 3)",
                       version);
    if (rd_u64(&c, &n_tensors) || rd_u64(&c, &n_kv))
        return truncated(err, &c, "the header");
    g->version = version;
    if (n_kv > GGUF_MAX_KV || n_kv > left(&c) / MIN_KV_BYTES)
        return hs_fail(err, HS_E_FORMAT,
                       "kv_count %llu is more than the file can hold (%zu bytes after the header)",
                       (unsigned long long)n_kv, left(&c));
    if (n_tensors > GGUF_MAX_TENSORS ||
        n_tensors > (left(&c) - n_kv * MIN_KV_BYTES) / MIN_TENSOR_BYTES)
        return hs_fail(err, HS_E_FORMAT,
                       "tensor_count %llu is more than the file can hold (%zu bytes after the header)",
                       (unsigned long long)n_tensors, left(&c));

    walk w = {.fill = 0, .n_tensors = n_tensors, .n_kv = n_kv};
    size_t body = c.pos;
    if ((st = walk_kvs(g, &c, &w, err)) || (st = walk_tensors(g, &c, &w, err)))
        return st;
    size_t header_end = c.pos;

    /* One allocation per table, each bounded by the file size. */
    g->n_kv = (size_t)n_kv;
    g->n_tensors = (size_t)n_tensors;
    g->n_strs = w.n_strs;
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    g->by_name = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->by_name);
    g->strs = calloc(w.n_strs ? w.n_strs : 1, sizeof *g->strs);
    g->chars = malloc(w.n_chars ? w.n_chars : 1);
    if (!g->kv || !g->tensors || !g->by_name || !g->strs || !g->chars)
        return hs_fail(err, HS_E_NOMEM, "out of memory reading the gguf header");

    walk w2 = {.fill = 1, .n_tensors = n_tensors, .n_kv = n_kv};
    c.pos = body;
    if ((st = walk_kvs(g, &c, &w2, err)) || (st = walk_tensors(g, &c, &w2, err)))
        return st;
    if ((st = check_tables(g, err)))
        return st;
    return check_data(g, header_end, err);
}

/* ---- public reader API ------------------------------------------------------------ */

hs_status hs_gguf_parse(const void *data, size_t len, hs_gguf **out, hs_error *err)
{
    if (!out || (!data && len))
        return hs_fail(err, HS_E_ARG, "hs_gguf_parse: null argument");
    *out = NULL;
    hs_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    static const unsigned char empty[1] = {0};
    g->data = data ? data : empty;
    g->len = len;
    hs_status st = parse_image(g, err);
    if (st) {
        hs_gguf_free(g);
        return st;
    }
    *out = g;
    return HS_OK;
}

hs_status hs_gguf_open(const char *path, hs_gguf **out, hs_error *err)
{
    if (!path || !out)
        return hs_fail(err, HS_E_ARG, "hs_gguf_open: null argument");
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return hs_fail(err, HS_E_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return hs_fail(err, HS_E_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return hs_fail(err, HS_E_IO, "'%s' is not a regular file", path);
    }
    if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX / 2) {
        close(fd);
        return hs_fail(err, HS_E_NOMEM, "'%s' is too large", path);
    }
    size_t len = (size_t)sb.st_size;
    void *map = NULL;
    unsigned char *owned = NULL;
    if (len > 0) {
        unsigned char *mp = NULL;
        if (hs_file_map_fd(fd, len, &mp) == 0) {
            map = mp;
        } else { /* fall back to reading it whole */
            owned = malloc(len);
            if (!owned) {
                close(fd);
                return hs_fail(err, HS_E_NOMEM, "out of memory reading '%s'", path);
            }
            size_t got = 0;
            while (got < len) {
                ssize_t r = read(fd, owned + got, len - got);
                if (r < 0 && errno == EINTR)
                    continue;
                if (r <= 0) {
                    int e = r < 0 ? errno : EIO;
                    free(owned);
                    close(fd);
                    return hs_fail(err, HS_E_IO, "cannot read '%s': %s", path, strerror(e));
                }
                got += (size_t)r;
            }
        }
    }
    close(fd);
    hs_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        if (map)
            hs_file_unmap(map, len);
        free(owned);
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    }
    static const unsigned char empty[1] = {0};
    g->map = map;
    g->owned = owned;
    g->data = map ? map : owned ? owned : empty;
    g->len = len;
    hs_status st = parse_image(g, err);
    if (st) {
        hs_error_prefix(err, "'%s'", path);
        hs_gguf_free(g);
        return st;
    }
    *out = g;
    return HS_OK;
}

void hs_gguf_free(hs_gguf *g)
{
    if (!g)
        return;
    free(g->chars);
    free(g->strs);
    free(g->by_name);
    free(g->tensors);
    free(g->kv);
    if (g->map)
        hs_file_unmap(g->map, g->len);
    free(g->owned);
    free(g);
}
