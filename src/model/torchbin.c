/* pytorch_model.bin reader: the zip archive torch.save writes (PyTorch >= 1.6).
 *
 * <top>/data.pkl is a pickle of the state dict; each tensor's bytes live in the stored
 * (uncompressed) entry <top>/data/<key>. The archive is read by zip.c, data.pkl is
 * interpreted by the restricted unpickler in pickle.c, and every tensor is checked against
 * its storage before a view is handed out. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/pickle.h"
#include "model/torchbin.h"
#include "model/zip.h"

#define TB_TENSORS_MAX 100000     /* state dict entries (as the safetensors reader) */
#define TB_PICKLE_MAX (64u << 20) /* bytes of data.pkl */
#define TB_NAME_MAX 1024          /* bytes in a tensor name */
#define TB_KEY_MAX 64             /* bytes in a storage key */
#define TB_PREFIX_MAX 255         /* bytes in the top folder name */
#define TB_NDIM_MAX 8             /* dimensions of any tensor (4 for the float ones) */

/* ---- the allow-list ----------------------------------------------------------------- */

enum { G_ODICT, G_REBUILD_V2, G_REBUILD_PARAM, G_STORAGE0 };

static const pk_allow tb_allow[] = {
    {"collections", "OrderedDict", 1},
    {"torch._utils", "_rebuild_tensor_v2", 0},
    {"torch._utils", "_rebuild_parameter", 0},
    /* storage types, in the order of tb_storage below */
    {"torch", "FloatStorage", 0},  {"torch", "HalfStorage", 0},
    {"torch", "BFloat16Storage", 0}, {"torch", "DoubleStorage", 0},
    {"torch", "ByteStorage", 0},   {"torch", "CharStorage", 0},
    {"torch", "ShortStorage", 0},  {"torch", "IntStorage", 0},
    {"torch", "LongStorage", 0},   {"torch", "BoolStorage", 0},
    {"torch", "ComplexFloatStorage", 0}, {"torch", "ComplexDoubleStorage", 0},
};
#define TB_N_ALLOW (sizeof tb_allow / sizeof tb_allow[0])

static const struct {
    const char *dtype; /* torch's name */
    size_t elsize;
    int hs; /* hs_dtype, or -1 when the tensor is skipped */
} tb_storage[] = {
    {"float32", 4, HS_DT_F32}, {"float16", 2, HS_DT_F16}, {"bfloat16", 2, HS_DT_BF16},
    {"float64", 8, -1},        {"uint8", 1, -1},          {"int8", 1, -1},
    {"int16", 2, -1},          {"int32", 4, -1},          {"int64", 8, -1},
    {"bool", 1, -1},           {"complex64", 8, -1},      {"complex128", 16, -1},
};

/* ---- zip ------------------------------------------------------------------------------ */

/* The archive (zip.c) and its top folder, <top>/ in front of every name; an entry's tag is
 * the storage type the pickle claims for it (-1 before). */
typedef struct tb_zip {
    hs_zip zip;
    const char *prefix;
    size_t prefix_len;
} tb_zip;

/* The entry <prefix>/<mid><rest>, or NULL. */
static hs_zip_entry *zip_find(const tb_zip *z, const char *mid, const char *rest, size_t rest_len)
{
    char key[TB_PREFIX_MAX + 1 + 16 + TB_KEY_MAX];
    size_t ml = strlen(mid);
    if (ml > 16 || rest_len > TB_KEY_MAX)
        return NULL;
    memcpy(key, z->prefix, z->prefix_len);
    key[z->prefix_len] = '/';
    memcpy(key + z->prefix_len + 1, mid, ml);
    memcpy(key + z->prefix_len + 1 + ml, rest, rest_len);
    return hs_zip_find(&z->zip, key, z->prefix_len + 1 + ml + rest_len);
}

/* Finds the single <top>/data.pkl and sets the prefix. */
static hs_status zip_prefix(tb_zip *z, hs_error *err)
{
    static const char tail[] = "/data.pkl";
    const size_t tl = sizeof tail - 1;
    const hs_zip_entry *found = NULL;
    for (size_t i = 0; i < z->zip.n; i++) {
        const hs_zip_entry *e = &z->zip.e[i];
        if (e->name_len <= tl || memcmp(e->name + e->name_len - tl, tail, tl) != 0 ||
            memchr(e->name, '/', e->name_len - tl) || memchr(e->name, '\0', e->name_len))
            continue;
        if (found)
            return hs_fail(err, HS_E_FORMAT, "'%s': several top folders hold a data.pkl",
                           z->zip.path);
        found = e;
    }
    if (!found)
        return hs_fail(err, HS_E_FORMAT, "'%s': zip archive without a <folder>/data.pkl entry "
                       "(not a torch.save file)", z->zip.path);
    if (found->name_len - tl > TB_PREFIX_MAX)
        return hs_fail(err, HS_E_FORMAT, "'%s': top folder name longer than %d bytes", z->zip.path,
                       TB_PREFIX_MAX);
    z->prefix = found->name;
    z->prefix_len = found->name_len - tl;
    return HS_OK;
}

/* Refuses big-endian archives (newer torch writes <top>/byteorder; older ones are little). */
static hs_status check_byteorder(const tb_zip *z, hs_error *err)
{
    const hs_zip_entry *e = zip_find(z, "byteorder", "", 0);
    const unsigned char *d;
    size_t n;
    hs_status st;
    if (!e)
        return HS_OK;
    if ((st = hs_zip_data(&z->zip, e, &d, &n, err)))
        return st;
    if (n && d[n - 1] == '\n')
        n--;
    if (n == 6 && !memcmp(d, "little", 6))
        return HS_OK;
    if (n == 3 && !memcmp(d, "big", 3))
        return hs_fail(err, HS_E_UNSUPPORTED, "'%s': archive is big-endian (byteorder 'big'); "
                       "only little-endian files are read", z->zip.path);
    return hs_fail(err, HS_E_FORMAT, "'%s': byteorder entry is neither 'little' nor 'big'",
                   z->zip.path);
}

/* ---- tensors ---------------------------------------------------------------------------- */

typedef struct tb_item {
    const char *name; /* into the pickle bytes */
    size_t name_len;
    int stype;
    hs_tensor_view v;
} tb_item;

typedef struct tb_ctx {
    tb_zip *z;
    const pk_doc *doc;
    hs_error *err;
} tb_ctx;

#define N(c, id) (&(c)->doc->nodes[(id)])

static int is_global(const pk_node *v, size_t g)
{
    return v->kind == PK_GLOBAL && v->u.global == g;
}

static int is_call(const tb_ctx *c, const pk_node *v, size_t g)
{
    return v->kind == PK_CALL && is_global(N(c, v->kids[0]), g);
}

/* A non-negative int node as size_t, or -1. */
static int as_size(const pk_node *v, size_t *out)
{
    if (v->kind != PK_INT || v->u.i < 0 || (uint64_t)v->u.i > SIZE_MAX)
        return -1;
    *out = (size_t)v->u.i;
    return 0;
}

/* Resolves the persistent id ('storage', type, key, location, numel) to checked bytes. */
static hs_status eval_storage(tb_ctx *c, const char *nm, const pk_node *pid, int *stype,
                              const unsigned char **base, size_t *numel)
{
    hs_error *err = c->err;
    const pk_node *k[5];
    size_t nbytes, have;
    if (pid->kind != PK_TUPLE || pid->n != 5)
        return hs_fail(err, HS_E_FORMAT, "tensor '%s': persistent id is not a 5-tuple", nm);
    for (int i = 0; i < 5; i++)
        k[i] = N(c, pid->kids[i]);
    if (k[0]->kind != PK_STR || k[0]->u.s.len != 7 || memcmp(k[0]->u.s.p, "storage", 7) ||
        k[1]->kind != PK_GLOBAL || k[1]->u.global < G_STORAGE0 || k[2]->kind != PK_STR ||
        k[3]->kind != PK_STR || as_size(k[4], numel))
        return hs_fail(err, HS_E_FORMAT, "tensor '%s': persistent id is not ('storage', "
                       "storage type, key, location, numel)", nm);
    *stype = (int)(k[1]->u.global - G_STORAGE0);
    const char *key = k[2]->u.s.p;
    size_t kl = k[2]->u.s.len;
    if (kl == 0 || kl > TB_KEY_MAX || memchr(key, '/', kl) || memchr(key, '\0', kl))
        return hs_fail(err, HS_E_FORMAT, "tensor '%s': storage key is empty, longer than %d "
                       "bytes or holds '/'", nm, TB_KEY_MAX);
    hs_zip_entry *e = zip_find(c->z, "data/", key, kl);
    if (!e)
        return hs_fail(err, HS_E_FORMAT, "tensor '%s': storage '%.*s' is missing from the "
                       "archive (no entry '%.*s/data/%.*s')", nm, (int)kl, key,
                       (int)c->z->prefix_len, c->z->prefix, (int)kl, key);
    if (e->tag >= 0 && e->tag != *stype)
        return hs_fail(err, HS_E_FORMAT, "tensor '%s': storage '%.*s' is read as both %s and "
                       "%s", nm, (int)kl, key, tb_storage[e->tag].dtype,
                       tb_storage[*stype].dtype);
    e->tag = *stype;
    hs_status st = hs_zip_data(&c->z->zip, e, base, &have, err);
    if (st)
        return st;
    if (hs_mul_size(*numel, tb_storage[*stype].elsize, &nbytes) || nbytes > have)
        return hs_fail(err, HS_E_FORMAT, "tensor '%s': storage '%.*s' claims %zu %s elements "
                       "but its entry holds %zu bytes", nm, (int)kl, key, *numel,
                       tb_storage[*stype].dtype, have);
    return HS_OK;
}

/* Interprets one state dict value: _rebuild_tensor_v2(storage, storage_offset, size, stride,
 * requires_grad, backward_hooks[, metadata]), possibly wrapped in _rebuild_parameter. */
static hs_status eval_tensor(tb_ctx *c, const char *nm, uint32_t id, tb_item *it)
{
    hs_error *err = c->err;
    const pk_node *v = N(c, id), *a;
    if (is_call(c, v, G_REBUILD_PARAM)) {
        a = N(c, v->kids[1]);
        if (a->n < 1)
            return hs_fail(err, HS_E_FORMAT, "tensor '%s': _rebuild_parameter without data", nm);
        v = N(c, a->kids[0]);
    }
    if (!is_call(c, v, G_REBUILD_V2))
        return hs_fail(err, HS_E_UNSUPPORTED, "entry '%s' is not a tensor (found %s; only "
                       "flat tensor state dicts are read)", nm, pk_kind_name(v->kind));
    a = N(c, v->kids[1]);
    if (a->n != 6 && a->n != 7)
        return hs_fail(err, HS_E_FORMAT, "tensor '%s': _rebuild_tensor_v2 takes 6 or 7 "
                       "arguments, got %u", nm, a->n);
    const pk_node *stor = N(c, a->kids[0]), *size = N(c, a->kids[2]), *stride = N(c, a->kids[3]);
    size_t offset = 0, snumel = 0;
    const unsigned char *base;
    if (stor->kind != PK_PERSID)
        return hs_fail(err, HS_E_FORMAT, "tensor '%s': storage is a %s, not a persistent id",
                       nm, pk_kind_name(stor->kind));
    hs_status st = eval_storage(c, nm, N(c, stor->kids[0]), &it->stype, &base, &snumel);
    if (st)
        return st;
    if (as_size(N(c, a->kids[1]), &offset))
        return hs_fail(err, HS_E_FORMAT, "tensor '%s': storage offset is not a non-negative "
                       "int", nm);
    if (size->kind != PK_TUPLE || stride->kind != PK_TUPLE || size->n != stride->n)
        return hs_fail(err, HS_E_FORMAT, "tensor '%s': size and stride are not tuples of the "
                       "same length", nm);
    int nd = (int)size->n, keep = tb_storage[it->stype].hs >= 0;
    if (size->n > TB_NDIM_MAX || (keep && nd > 4))
        return hs_fail(err, HS_E_SHAPE, "tensor '%s': %u dimensions (at most 4 supported)", nm,
                       size->n);
    size_t dims[TB_NDIM_MAX], strides[TB_NDIM_MAX], numel = 1, last = offset, want = 1;
    int contiguous = 1;
    for (int i = 0; i < nd; i++)
        if (as_size(N(c, size->kids[i]), &dims[i]) || as_size(N(c, stride->kids[i]), &strides[i]))
            return hs_fail(err, HS_E_FORMAT, "tensor '%s': size or stride %d is not a "
                           "non-negative int", nm, i);
    for (int i = nd - 1; i >= 0; i--) {
        size_t step;
        if (hs_mul_size(numel, dims[i], &numel))
            return hs_fail(err, HS_E_FORMAT, "tensor '%s': element count overflows", nm);
        if (dims[i] != 1 && strides[i] != want)
            contiguous = 0;
        if (dims[i] && (hs_mul_size(dims[i] - 1, strides[i], &step) ||
                        hs_add_size(last, step, &last)))
            return hs_fail(err, HS_E_FORMAT, "tensor '%s': extent overflows", nm);
        if (hs_mul_size(want, dims[i] ? dims[i] : 1, &want))
            want = SIZE_MAX; /* only compared with later strides */
    }
    if (numel == 0)
        contiguous = 1; /* as torch: an empty tensor is contiguous whatever its strides */
    if (numel == 0 ? offset > snumel : last >= snumel)
        return hs_fail(err, HS_E_FORMAT, "tensor '%s': storage offset %zu and shape reach past "
                       "the %zu elements of its storage", nm, offset, snumel);
    it->v.dtype = keep ? (hs_dtype)tb_storage[it->stype].hs : HS_DT_F32;
    it->v.ndim = nd;
    for (int i = 0; i < 4; i++)
        it->v.shape[i] = i < nd ? (int64_t)dims[i] : 1;
    if (keep && !contiguous)
        return hs_fail(err, HS_E_UNSUPPORTED, "tensor '%s' is non-contiguous (a transposed or "
                       "strided view); save it with .contiguous() or convert the file to "
                       "model.safetensors", nm);
    it->v.data = base + offset * tb_storage[it->stype].elsize;
    it->v.nbytes = numel * tb_storage[it->stype].elsize;
    return HS_OK;
}

static int cmp_item(const void *x, const void *y)
{
    const tb_item *a = x, *b = y;
    return hs_zip_name_cmp(a->name, a->name_len, b->name, b->name_len);
}

/* Builds t's tables from the state dict in doc. */
static hs_status collect(hs_torchbin *t, tb_ctx *c)
{
    hs_error *err = c->err;
    const pk_node *root = N(c, c->doc->root);
    tb_item *items = NULL, *tmp = NULL;
    hs_status st = HS_OK;
    size_t n = root->n / 2, name_bytes = 0;
    if (root->kind != PK_DICT)
        return hs_fail(err, HS_E_UNSUPPORTED, "data.pkl holds a %s, not a state dict",
                       pk_kind_name(root->kind));
    if (n > TB_TENSORS_MAX)
        return hs_fail(err, HS_E_FORMAT, "%zu tensors (limit %d)", n, TB_TENSORS_MAX);
    items = calloc(n ? n : 1, sizeof *items);
    tmp = calloc(n ? n : 1, sizeof *tmp);
    if (!items || !tmp) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        const pk_node *k = N(c, root->kids[2 * i]);
        char shown[80];
        if (k->kind != PK_STR || k->u.s.len == 0 || k->u.s.len > TB_NAME_MAX ||
            memchr(k->u.s.p, '\0', k->u.s.len)) {
            st = hs_fail(err, HS_E_FORMAT, "state dict key %zu is not a name of 1 to %d bytes",
                         i, TB_NAME_MAX);
            goto fail;
        }
        items[i].name = k->u.s.p;
        items[i].name_len = k->u.s.len;
        name_bytes += k->u.s.len + 1;
        snprintf(shown, sizeof shown, "%.*s", (int)k->u.s.len, k->u.s.p);
        if ((st = eval_tensor(c, shown, root->kids[2 * i + 1], &items[i])))
            goto fail;
    }
    memcpy(tmp, items, n * sizeof *tmp);
    qsort(tmp, n, sizeof *tmp, cmp_item);
    for (size_t i = 1; i < n; i++)
        if (!cmp_item(&tmp[i - 1], &tmp[i])) {
            st = hs_fail(err, HS_E_FORMAT, "tensor '%.*s' appears twice", (int)tmp[i].name_len,
                         tmp[i].name);
            goto fail;
        }
    t->names = malloc(name_bytes ? name_bytes : 1);
    t->tensors = calloc(n ? n : 1, sizeof *t->tensors);
    t->skipped = calloc(n ? n : 1, sizeof *t->skipped);
    if (!t->names || !t->tensors || !t->skipped) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
        goto fail;
    }
    char *p = t->names;
    for (size_t i = 0; i < n; i++) {
        memcpy(p, items[i].name, items[i].name_len);
        p[items[i].name_len] = '\0';
        if (tb_storage[items[i].stype].hs >= 0) {
            t->tensors[t->n] = items[i].v;
            t->tensors[t->n++].name = p;
        } else {
            t->skipped[t->n_skipped].name = p;
            t->skipped[t->n_skipped++].dtype = tb_storage[items[i].stype].dtype;
        }
        p += items[i].name_len + 1;
    }
fail:
    free(tmp);
    free(items);
    return st;
}

/* ---- entry points ------------------------------------------------------------------------ */

static hs_status parse_zip(hs_torchbin *t, const unsigned char *buf, size_t len,
                           const char *path, hs_error *err)
{
    tb_zip z = {.zip = {.b = buf, .len = len, .path = path}};
    pk_doc doc = {0};
    const unsigned char *pkl;
    size_t pkl_len;
    hs_status st;
    if ((st = hs_zip_read(&z.zip, err)) || (st = zip_prefix(&z, err)) ||
        (st = check_byteorder(&z, err)))
        goto fail;
    if ((st = hs_zip_data(&z.zip, zip_find(&z, "data.pkl", "", 0), &pkl, &pkl_len, err)))
        goto fail;
    if (pkl_len > TB_PICKLE_MAX) {
        st = hs_fail(err, HS_E_FORMAT, "'%s': data.pkl is %zu bytes (limit 64 MiB)", path,
                     pkl_len);
        goto fail;
    }
    if ((st = pk_parse(pkl, pkl_len, tb_allow, TB_N_ALLOW, &doc, err))) {
        hs_error_prefix(err, "'%s': data.pkl", path);
        goto fail;
    }
    tb_ctx c = {&z, &doc, err};
    if ((st = collect(t, &c))) {
        hs_error_prefix(err, "'%s': data.pkl", path);
        goto fail;
    }
fail:
    pk_free(&doc);
    free(z.zip.e);
    return st;
}

/* torch.save before 1.6 wrote pickles back to back, the first being this magic number as a
 * LONG1: PROTO 2, LONG1 of 10 bytes, 0x1950a86a20f9469cfc6c little-endian. */
static const unsigned char legacy_magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                             0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

static hs_status parse_into(hs_torchbin *t, const unsigned char *buf, size_t len,
                            const char *path, hs_error *err)
{
    static const char lfs[] = "version https://git-lfs";
    if (len >= 4 && buf[0] == 'P' && buf[1] == 'K' &&
        ((buf[2] == 3 && buf[3] == 4) || (buf[2] == 5 && buf[3] == 6)))
        return parse_zip(t, buf, len, path, err);
    if (len >= sizeof legacy_magic && !memcmp(buf + 2, legacy_magic + 2, sizeof legacy_magic - 2)
        && buf[0] == 0x80)
        return hs_fail(err, HS_E_UNSUPPORTED, "'%s' is a legacy (PyTorch < 1.6) torch.save file; "
                       "re-save it with a newer PyTorch or convert it to model.safetensors", path);
    if (len >= 1 && buf[0] == 0x80)
        return hs_fail(err, HS_E_FORMAT, "'%s' is a bare pickle, not a torch.save zip archive",
                       path);
    if (len >= sizeof lfs - 1 && !memcmp(buf, lfs, sizeof lfs - 1))
        return hs_fail(err, HS_E_FORMAT, "'%s' is a Git LFS pointer, not the weights; run "
                       "'git lfs pull' in its repository", path);
    return hs_fail(err, HS_E_FORMAT, "'%s' is neither a torch.save zip archive nor a pickle "
                   "(it starts with %s)", path, len ? "an unknown byte" : "nothing: empty file");
}

hs_status hs_torchbin_parse(const unsigned char *buf, size_t len, const char *name,
                            hs_torchbin **out, hs_error *err)
{
    *out = NULL;
    hs_torchbin *t = calloc(1, sizeof *t);
    if (!t)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    hs_status st = parse_into(t, buf, len, name, err);
    if (st) {
        hs_torchbin_close(t);
        return st;
    }
    *out = t;
    return HS_OK;
}

hs_status hs_torchbin_open(const char *path, hs_torchbin **out, hs_error *err)
{
    *out = NULL;
    hs_torchbin *t = calloc(1, sizeof *t);
    if (!t)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    hs_status st = hs_file_map(path, &t->map, &t->map_len, err);
    if (!st)
        st = parse_into(t, t->map ? t->map : (const unsigned char *)"", t->map_len, path, err);
    if (st) {
        hs_torchbin_close(t);
        return st;
    }
    *out = t;
    return HS_OK;
}

const hs_tensor_view *hs_torchbin_find(const hs_torchbin *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->tensors[i].name, name))
            return &t->tensors[i];
    return NULL;
}

const char *hs_torchbin_skipped(const hs_torchbin *t, const char *name)
{
    for (size_t i = 0; i < t->n_skipped; i++)
        if (!strcmp(t->skipped[i].name, name))
            return t->skipped[i].dtype;
    return NULL;
}

void hs_torchbin_close(hs_torchbin *t)
{
    if (!t)
        return;
    free(t->names);
    free(t->tensors);
    free(t->skipped);
    if (t->map)
        hs_file_unmap(t->map, t->map_len);
    free(t);
}
