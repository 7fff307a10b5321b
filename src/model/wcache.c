/* The weight cache: the layer matrices of a non-F32 checkpoint kept in their stored type,
 * converted to float32 on demand within a budget (model_internal.h; docs/architecture.md,
 * "Memory").
 *
 * A forward pass visits the layers in order, pass after pass: a cyclic scan, on which a
 * plain least-recently-used cache smaller than the model never hits (it drops each layer
 * just before it is needed again). So the budget is split: the first layers that fit,
 * leaving room for one more layer, are converted at load and kept for good; the rest take
 * turns in what is left, the least recently used unpinned unit dropped first. A pass then
 * converts exactly the layers that are not kept, once each.
 *
 * The budget is a target: pinned units are never dropped, so layers pinned at once stay
 * resident beyond it (composition pins two), and each hs_layer_put drops what it can until
 * the cache is back within it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/qgemm.h"
#include "model/emb_stored.h"
#include "model/model_internal.h"
#include "nn/ops.h"

#define MAX_SRC 3 /* a unit's stored tensors: the whole slot, or Q, K, V (gate, up) parts */

typedef struct wsrc {
    hs_tensor_view t;  /* name and dtype_name not kept; data in map or own */
    int out_in;
    hs_tensor_shape sh;
    void *map;          /* the retained file mapping holding t.data, or NULL */
    unsigned char *own; /* else a copy of the bytes */
    char name[96];      /* for messages */
} wsrc;

typedef struct wunit {
    wsrc src[MAX_SRC];
    int n_src;
    int qkv_heads;      /* HS_TN_QKV_HEADS: reordered after conversion */
    int rows, ld;       /* the float32 slot: (rows, ld) */
    size_t floats;      /* 0: not a cached unit (float32, in place or in the arena) */
    float *buf;         /* the float32 slot when resident */
    int pins, kept;
    uint64_t used;      /* the LRU clock when last pinned */
    const hs_qmat *qm;  /* the unit in its stored type (m->stored_gemm), or NULL */
} wunit;

struct hs_wcache {
    pthread_mutex_t lock;
    const hs_model *m;
    wunit *u;           /* (n_layer, HS_WU_N) */
    int n_layer;
    size_t budget, need, kept, resident, peak, conversions;
    uint64_t clock;
    int all_kept;       /* every unit kept: hs_layer_get takes no lock */
    hs_qmat *qmats;     /* (n_layer, HS_WU_N): the units used in their stored type, registered */
    hs_qcol *cols;      /* their columns */
};

int hs_wunit_kind(hs_slot s)
{
    switch (s) {
    case HS_S_QKV_W: return HS_WU_QKV;
    case HS_S_O_W: return HS_WU_O;
    case HS_S_FC_W: return HS_WU_FC;
    case HS_S_PROJ_W: return HS_WU_PROJ;
    default: return -1;
    }
}

static const float **unit_slot(hs_layer *L, int kind)
{
    static const hs_slot slots[HS_WU_N] = {HS_S_QKV_W, HS_S_O_W, HS_S_FC_W, HS_S_PROJ_W};
    return hs_layer_slot_ptr(L, slots[kind]);
}

hs_wcache *hs_wcache_new(const hs_model *m, size_t budget)
{
    hs_wcache *wc = calloc(1, sizeof *wc);
    if (!wc)
        return NULL;
    wc->u = calloc((size_t)m->cfg.n_layer * HS_WU_N, sizeof *wc->u);
    if (!wc->u || pthread_mutex_init(&wc->lock, NULL) != 0) {
        free(wc->u);
        free(wc);
        return NULL;
    }
    wc->m = m;
    wc->n_layer = m->cfg.n_layer;
    wc->budget = budget;
    return wc;
}

static void drop_sources(wunit *u)
{
    for (int i = 0; i < u->n_src; i++) {
        if (u->src[i].map)
            hs_file_unmap(u->src[i].map, 0);
        free(u->src[i].own);
    }
    u->n_src = 0;
}

void hs_wcache_free(hs_wcache *wc)
{
    if (!wc)
        return;
    if (wc->qmats)
        hs_qmat_unregister(wc->qmats);
    free(wc->qmats);
    free(wc->cols);
    for (size_t i = 0; i < (size_t)wc->n_layer * HS_WU_N; i++) {
        drop_sources(&wc->u[i]);
        free(wc->u[i].buf);
    }
    pthread_mutex_destroy(&wc->lock);
    free(wc->u);
    free(wc);
}

hs_status hs_wcache_add(hs_wcache *wc, int l, int kind, const hs_tensor_view *t, int out_in,
                        hs_tensor_shape sh, int qkv_heads, const char *name, hs_error *err)
{
    wunit *u = &wc->u[(size_t)l * HS_WU_N + (size_t)kind];
    if (u->n_src == MAX_SRC)
        return hs_fail(err, HS_E_FORMAT, "tensor '%s': too many parts for one matrix", name);
    wsrc *s = &u->src[u->n_src];
    memset(s, 0, sizeof *s);
    s->t = *t;
    s->t.name = NULL;
    s->t.dtype_name = NULL;
    s->out_in = out_in;
    s->sh = sh;
    snprintf(s->name, sizeof s->name, "%s", name);
    s->map = hs_file_map_retain(t->data, t->nbytes);
    if (!s->map) { /* a reader's own buffer (a transformed copy, a file read whole) */
        if (!(s->own = malloc(t->nbytes ? t->nbytes : 1)))
            return hs_fail(err, HS_E_NOMEM, "out of memory keeping '%s'", name);
        memcpy(s->own, t->data, t->nbytes);
        s->t.data = s->own;
    }
    u->n_src++;
    u->qkv_heads = qkv_heads;
    u->rows = sh.kind == HS_K_VEC ? 1 : sh.rows;
    u->ld = sh.ld;
    if (!u->floats) {
        u->floats = sh.slot_floats;
        wc->need += sh.slot_floats * sizeof(float);
    }
    return HS_OK;
}

/* Converts unit u into a new buffer (wc->lock held, or at load). */
static hs_status convert(hs_wcache *wc, wunit *u, hs_error *err)
{
    float *buf = hs_alloc_large(u->floats * sizeof(float));
    if (!buf)
        return hs_fail(err, HS_E_NOMEM, "out of memory converting %zu MB of weights",
                       u->floats * sizeof(float) >> 20);
    hs_status st = HS_OK;
    for (int i = 0; i < u->n_src && !st; i++) {
        st = hs_tensor_convert(&u->src[i].t, u->src[i].out_in, u->src[i].sh, buf, u->src[i].name,
                               err);
        if (u->src[i].map) /* file pages: read again from the page cache next time */
            hs_release_pages(u->src[i].t.data, u->src[i].t.nbytes);
    }
    if (!st && u->qkv_heads)
        st = hs_qkv_heads_reorder(&wc->m->cfg, buf, u->rows, u->ld, err);
    if (st) {
        free(buf);
        return st;
    }
    u->buf = buf;
    wc->resident += u->floats * sizeof(float);
    if (wc->resident > wc->peak)
        wc->peak = wc->resident;
    wc->conversions++;
    return HS_OK;
}

/* Drops least recently used unpinned units that are not kept until `bytes` more fit the
 * budget, or none is left to drop (wc->lock held). */
static void make_room(hs_wcache *wc, size_t bytes)
{
    size_t n = (size_t)wc->n_layer * HS_WU_N;
    while (wc->resident + bytes > wc->budget || wc->resident + bytes < wc->resident) {
        wunit *lru = NULL;
        for (size_t i = 0; i < n; i++) {
            wunit *u = &wc->u[i];
            if (u->buf && !u->kept && !u->pins && (!lru || u->used < lru->used))
                lru = u;
        }
        if (!lru)
            return;
        free(lru->buf);
        lru->buf = NULL;
        wc->resident -= lru->floats * sizeof(float);
    }
}

/* Makes u resident and pins it (wc->lock held). */
static hs_status pin(hs_wcache *wc, wunit *u, hs_error *err)
{
    if (!u->buf) {
        make_room(wc, u->floats * sizeof(float));
        hs_status st = convert(wc, u, err);
        if (st)
            return st;
    }
    u->pins++;
    u->used = ++wc->clock;
    return HS_OK;
}

/* ---- the units in their stored type -------------------------------------------------- */

/* 1 when every tensor of u is a matrix stored (out, in), rows in blocks along `in`: what
 * hs_qmat_fill reads (a GPT-2 Conv1D matrix, stored (in, out), is converted instead). */
static int storable(const wunit *u)
{
    if (!u->floats || u->n_src == 0)
        return 0;
    for (int i = 0; i < u->n_src; i++)
        if (!hs_rows_are_columns(u->src[i].sh, u->src[i].out_in))
            return 0;
    return 1;
}

/* u's hs_qmat q, its columns in cols (u->ld of them): column sh.off + r of a tensor is its
 * stored row hs_view_row(r) (r, or where llama.cpp's files keep Llama's Q and K rows); a
 * QKV stored by K/V group has its columns put in the slot's order by the reordering that
 * its float32 form takes (hs_qkv_heads_reorder on the columns' numbers). */
static hs_status make_qmat(const hs_wcache *wc, wunit *u, hs_qmat *q, hs_qcol *cols,
                           hs_error *err)
{
    int in = u->rows, W = u->ld;
    for (int i = 0; i < u->n_src; i++) {
        const wsrc *s = &u->src[i];
        int blk = hs_dtype_block(s->t.dtype);
        for (int r = 0; r < s->sh.cols; r++)
            cols[s->sh.off + r] =
                (hs_qcol){&s->t, hs_view_row(&s->t, (size_t)r) * (size_t)in, blk};
    }
    if (u->qkv_heads) {
        float *idx = malloc((size_t)W * sizeof *idx);
        hs_qcol *was = malloc((size_t)W * sizeof *was);
        hs_status st = idx && was ? HS_OK : hs_fail(err, HS_E_NOMEM, "out of memory");
        for (int j = 0; j < W && !st; j++)
            idx[j] = (float)j; /* exact: W < 2^24 */
        if (!st && !(st = hs_qkv_heads_reorder(&wc->m->cfg, idx, 1, W, err))) {
            memcpy(was, cols, (size_t)W * sizeof *was);
            for (int j = 0; j < W; j++)
                cols[j] = was[(int)idx[j]];
        }
        free(idx);
        free(was);
        if (st)
            return st;
    }
    *q = (hs_qmat){.in = in, .out = W, .col = cols, .decode = hs_tensor_decode};
    int i8 = wc->m->q8_act && in % 32 == 0; /* 8-bit activations: every part block-quantised */
    for (int i = 0; i < u->n_src; i++)
        i8 = i8 && hs_tensor_sub_block(&u->src[i].t) != 0;
    q->decode_i8 = i8 ? hs_tensor_decode_i8 : NULL;
    q->rows = u->n_src ? hs_tensor_rows_fn(&u->src[0].t) : NULL; /* every part of one type */
    for (int i = 1; i < u->n_src; i++)
        q->rows = u->src[i].t.dtype == u->src[0].t.dtype ? q->rows : NULL;
    u->qm = q;
    return HS_OK;
}

/* Every value of u's stored tensors checked finite, a row at a time (what the conversion
 * checks, without the float32 copy; hs_tensor_check_rows). The file's pages stay mapped:
 * every pass reads every layer's units, so dropping them only made the first pass fault
 * them in again (the 1-token pass on TinyLlama F16: 0.70 s wall against 0.90; its peak RSS
 * 2.12 GB against 2.04 for the 1.96 GB file). The message is hs_tensor_convert's. */
static hs_status check_stored(const wunit *u, hs_error *err)
{
    for (int i = 0; i < u->n_src; i++) {
        const wsrc *s = &u->src[i];
        hs_status st = hs_tensor_check_rows(&s->t, (size_t)s->sh.cols, (size_t)s->sh.rows,
                                            0, s->name, err);
        if (st)
            return st;
    }
    return HS_OK;
}

/* The hs_qmat of every unit that can be used in its stored type, registered. */
static hs_status make_qmats(hs_wcache *wc, hs_error *err)
{
    size_t n = (size_t)wc->n_layer * HS_WU_N, ncols = 0;
    for (size_t i = 0; i < n; i++)
        ncols += storable(&wc->u[i]) ? (size_t)wc->u[i].ld : 0;
    if (!ncols)
        return HS_OK;
    wc->qmats = calloc(n, sizeof *wc->qmats);
    wc->cols = malloc(ncols * sizeof *wc->cols);
    if (!wc->qmats || !wc->cols)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    hs_qcol *cols = wc->cols;
    for (size_t i = 0; i < n; i++) {
        if (!storable(&wc->u[i]))
            continue;
        hs_status st = make_qmat(wc, &wc->u[i], &wc->qmats[i], cols, err);
        if (st)
            return st;
        cols += wc->u[i].ld;
    }
    if (hs_qmat_register(wc->qmats, n) != 0) {
        free(wc->qmats);
        wc->qmats = NULL;
        return hs_fail(err, HS_E_NOMEM, "too many models open in their stored types at once");
    }
    return HS_OK;
}

hs_status hs_wcache_prepare(hs_model *m, hs_error *err)
{
    hs_wcache *wc = m->wc;
    size_t largest_layer = 0;
    for (int l = 0; l < wc->n_layer; l++) {
        size_t bytes = 0;
        for (int k = 0; k < HS_WU_N; k++)
            bytes += wc->u[(size_t)l * HS_WU_N + (size_t)k].floats * sizeof(float);
        if (bytes > largest_layer)
            largest_layer = bytes;
    }
    int all = wc->need <= wc->budget;
    /* kept for good: every unit when all fit, else the first that leave room for a layer */
    size_t keep_room = all ? wc->need : wc->budget > largest_layer ? wc->budget - largest_layer : 0;
    int keeping = 1;
    for (int l = 0; l < wc->n_layer; l++)
        for (int k = 0; k < HS_WU_N; k++) {
            wunit *u = &wc->u[(size_t)l * HS_WU_N + (size_t)k];
            if (!u->floats)
                continue;
            size_t bytes = u->floats * sizeof(float);
            hs_status st;
            keeping = keeping && wc->kept + bytes <= keep_room; /* a prefix in layer order */
            if (keeping) {
                if ((st = convert(wc, u, err)))
                    return st;
                u->kept = 1;
                wc->kept += bytes;
                *unit_slot(&m->layers[l], k) = u->buf;
                continue;
            }
            if (m->stored_gemm && storable(u)) { /* checked in place: used as stored */
                if ((st = check_stored(u, err)))
                    return st;
                continue;
            }
            /* converted once to check every value, then taking turns */
            if ((st = pin(wc, u, err)))
                return st;
            u->pins--;
        }
    if (all) { /* the stored bytes are no longer needed */
        for (size_t i = 0; i < (size_t)wc->n_layer * HS_WU_N; i++)
            drop_sources(&wc->u[i]);
        wc->all_kept = 1;
    } else if (m->stored_gemm) {
        hs_status st = make_qmats(wc, err);
        if (st)
            return st;
    }
    make_room(wc, 0); /* within the budget: a budget below one unit leaves none resident */
    return HS_OK;
}

/* hs_layer_get, and with `stored` hs_layer_get_linear: a unit with an hs_qmat that is not
 * resident is pinned without a buffer (hs_layer_put's count stays even) and given as it;
 * a unit outside `units` is left alone and its slot NULL. */
static hs_status get_layer(const hs_model *m, int l, hs_layer *out, int stored, unsigned units,
                           hs_error *err)
{
    hs_wcache *wc = m->wc;
    *out = m->layers[l];
    if (!wc || wc->all_kept)
        return HS_OK;
    hs_status st = HS_OK;
    wunit *u = &wc->u[(size_t)l * HS_WU_N];
    pthread_mutex_lock(&wc->lock);
    int k;
    for (k = 0; k < HS_WU_N && !st; k++) {
        if (!u[k].floats)
            continue;
        if (!(units >> k & 1u)) {
            *unit_slot(out, k) = NULL;
        } else if (stored && u[k].qm && !u[k].buf) {
            u[k].pins++;
            *unit_slot(out, k) = (const float *)(const void *)u[k].qm;
        } else if (!(st = pin(wc, &u[k], err))) {
            *unit_slot(out, k) = u[k].buf;
        }
    }
    if (st) /* unpin what was pinned before the failure */
        for (int j = 0; j < k - 1; j++)
            if (u[j].floats && (units >> j & 1u))
                u[j].pins--;
    pthread_mutex_unlock(&wc->lock);
    return st;
}

#define ALL_UNITS ((1u << HS_WU_N) - 1)

hs_status hs_layer_get(const hs_model *m, int l, hs_layer *out, hs_error *err)
{
    return get_layer(m, l, out, 0, ALL_UNITS, err);
}

hs_status hs_layer_get_linear(const hs_model *m, int l, hs_layer *out, hs_error *err)
{
    return get_layer(m, l, out, 1, ALL_UNITS, err);
}

hs_status hs_layer_get_units(const hs_model *m, int l, unsigned units, hs_layer *out,
                             hs_error *err)
{
    return get_layer(m, l, out, 0, units & ALL_UNITS, err);
}

void hs_layer_put_units(const hs_model *m, int l, unsigned units)
{
    hs_wcache *wc = m->wc;
    if (!wc || wc->all_kept)
        return;
    wunit *u = &wc->u[(size_t)l * HS_WU_N];
    pthread_mutex_lock(&wc->lock);
    for (int k = 0; k < HS_WU_N; k++)
        if (u[k].floats && (units >> k & 1u))
            u[k].pins--;
    make_room(wc, 0); /* back within the budget, as far as the units still pinned allow */
    pthread_mutex_unlock(&wc->lock);
}

void hs_layer_put(const hs_model *m, int l)
{
    hs_layer_put_units(m, l, ALL_UNITS);
}

void hs_wcache_stats_of(const hs_model *m, hs_wcache_stats *s)
{
    memset(s, 0, sizeof *s);
    s->budget = m->weight_memory;
    hs_wcache *wc = m->wc;
    if (!wc)
        return;
    pthread_mutex_lock(&wc->lock);
    s->need = wc->need;
    s->kept = wc->kept;
    s->resident = wc->resident;
    s->peak = wc->peak;
    s->conversions = wc->conversions;
    s->streams = !wc->all_kept;
    pthread_mutex_unlock(&wc->lock);
}

/* ---- the budget ------------------------------------------------------------------- */

int hs_weight_memory_parse(const char *s, size_t *bytes)
{
    if (!s)
        return -1;
    if (!strcmp(s, "all")) {
        *bytes = HS_WEIGHT_MEMORY_ALL;
        return 0;
    }
    if (!strcmp(s, "stored")) {
        *bytes = HS_WEIGHT_MEMORY_STORED;
        return 0;
    }
    double v = 0, scale = 1;
    int digits = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++, digits++)
        v = v * 10 + (*p - '0');
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++, digits++) {
            scale /= 10;
            v += (*p - '0') * scale;
        }
    }
    if (!digits)
        return -1;
    double unit = 1;
    switch (*p) {
    case 'K': case 'k': unit = 1024.0; p++; break;
    case 'M': case 'm': unit = 1024.0 * 1024; p++; break;
    case 'G': case 'g': unit = 1024.0 * 1024 * 1024; p++; break;
    case 'T': case 't': unit = 1024.0 * 1024 * 1024 * 1024; p++; break;
    default: break;
    }
    if (unit > 1 && (!strcmp(p, "iB") || !strcmp(p, "ib")))
        p += 2;
    else if (*p == 'B' || *p == 'b')
        p++;
    if (*p || v * unit >= 18446744073709551615.0) /* above SIZE_MAX on 64 bits */
        return -1;
    double b = v * unit;
    if (b >= (double)SIZE_MAX)
        return -1;
    *bytes = (size_t)b;
    return 0;
}

hs_status hs_weight_memory_default(size_t *bytes, int *implicit, hs_error *err)
{
    const char *env = getenv("HEADSCOPE_WEIGHT_MEMORY");
    *implicit = !(env && *env);
    if (env && *env) {
        if (hs_weight_memory_parse(env, bytes) != 0)
            return hs_fail(err, HS_E_ARG, "HEADSCOPE_WEIGHT_MEMORY='%.64s' is not a size (e.g. "
                           "512M, 4G or all)", env);
        return HS_OK;
    }
    long pages = sysconf(_SC_PHYS_PAGES), pg = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || pg <= 0)
        *bytes = (size_t)1 << 30; /* unknown: 1 GiB */
    else
        *bytes = (size_t)pages / 4 * (size_t)pg;
    return HS_OK;
}
