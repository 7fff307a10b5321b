/* Matrices used in their stored type (qgemm.h): the blocks hs_gemm_run asks for, decoded
 * from the stored rows, and the table of registered matrices hs_op_linear looks up.
 *
 * A column of W is a stored row (W is stored (out, in), in blocks along `in`), so a block
 * of W, rows k0.. of columns j0.., is a range of each of `cols` stored rows: the block is
 * asked for transposed (hs_gemm.b_fill), each range decoded straight into its row, or,
 * where the range cuts a block, the whole blocks around it decoded aside and the range
 * copied. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/qgemm.h"

#define QTAB 64

/* The thread's buffer for a range that does not start and end on its blocks: the whole
 * blocks around it, grown as needed and kept. */
static _Thread_local float *span_buf;
static _Thread_local size_t span_cap;

/* Blocks filled since the start (a test's proof that a product took the stored path). */
static long fills;

long hs_qmat_fills(void)
{
    return __atomic_load_n(&fills, __ATOMIC_RELAXED);
}

void hs_qmat_count_fill(void)
{
    __atomic_fetch_add(&fills, 1, __ATOMIC_RELAXED);
}

void hs_qmat_fill(const void *qmat, int k0, int kl, int j0, int cols, float *dst)
{
    const hs_qmat *q = qmat;
    __atomic_fetch_add(&fills, 1, __ATOMIC_RELAXED);
    for (int t = 0; t < cols; t++) {
        const hs_qcol *col = &q->col[j0 + t];
        size_t b = (size_t)col->blk, lo = (size_t)k0 / b * b;
        size_t hi = ((size_t)k0 + (size_t)kl + b - 1) / b * b;
        float *row = dst + (size_t)t * (size_t)kl;
        if (lo == (size_t)k0 && hi == (size_t)k0 + (size_t)kl) { /* whole blocks: in place */
            q->decode(col->src, col->first + lo, row, hi - lo);
            continue;
        }
        if (hi - lo > span_cap) {
            float *p = realloc(span_buf, (hi - lo) * sizeof *p);
            if (!p) { /* NaN: the pass fails on non-finite values, as gemm.c's own buffer */
                for (size_t i = 0; i < (size_t)kl * (size_t)cols; i++)
                    dst[i] = NAN;
                return;
            }
            span_buf = p;
            span_cap = hi - lo;
        }
        q->decode(col->src, col->first + lo, span_buf, hi - lo);
        memcpy(row, span_buf + ((size_t)k0 - lo), (size_t)kl * sizeof *row);
    }
}

/* The thread's decoded rows for hs_qmat_fill_kn: QROWS x (kl + two blocks) floats. */
#define QROWS 16
static _Thread_local float *rows_buf;
static _Thread_local size_t rows_cap;

void hs_qmat_fill_kn(const void *qmat, int k0, int kl, int j0, int cols, float *dst)
{
    const hs_qmat *q = qmat;
    __atomic_fetch_add(&fills, 1, __ATOMIC_RELAXED);
    size_t span_max = (size_t)kl + 2 * 256; /* whole blocks around the range: a K type's 256 */
    if (QROWS * span_max > rows_cap) {
        float *p = realloc(rows_buf, QROWS * span_max * sizeof *p);
        if (!p) { /* NaN: the pass fails on non-finite values, as gemm.c's own buffer */
            for (size_t i = 0; i < (size_t)kl * (size_t)cols; i++)
                dst[i] = NAN;
            return;
        }
        rows_buf = p;
        rows_cap = QROWS * span_max;
    }
    const float *src[QROWS];
    for (int c0 = 0; c0 < cols; c0 += QROWS) { /* QROWS rows decoded, written a line at a time */
        int r = cols - c0 < QROWS ? cols - c0 : QROWS;
        for (int t = 0; t < r; t++) {
            const hs_qcol *col = &q->col[j0 + c0 + t];
            size_t b = (size_t)col->blk, lo = (size_t)k0 / b * b;
            size_t hi = ((size_t)k0 + (size_t)kl + b - 1) / b * b;
            float *row = rows_buf + (size_t)t * span_max;
            q->decode(col->src, col->first + lo, row, hi - lo);
            src[t] = row + ((size_t)k0 - lo);
        }
        for (int i = 0; i < kl; i++) {
            float *d = dst + (size_t)i * (size_t)cols + (size_t)c0;
            for (int t = 0; t < r; t++)
                d[t] = src[t][i];
        }
    }
}

void hs_qmat_fill_t(const void *qmat, int k0, int kl, int j0, int cols, float *dst)
{
    hs_qmat_fill_kn(qmat, j0, cols, k0, kl, dst);
}

void hs_qmat_fill_t_kn(const void *qmat, int k0, int kl, int j0, int cols, float *dst)
{
    hs_qmat_fill(qmat, j0, cols, k0, kl, dst);
}

/* ---- the registered matrices ------------------------------------------------------- */

static struct {
    const hs_qmat *arr;
    size_t n;
} tab[QTAB];
static int tab_n; /* read without the lock first: 0 means no lookup is needed */
static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;

int hs_qmat_register(const hs_qmat *arr, size_t n)
{
    int ok = -1;
    pthread_mutex_lock(&tab_lock);
    for (int i = 0; i < QTAB && ok; i++)
        if (!tab[i].arr) {
            tab[i].arr = arr;
            tab[i].n = n;
            ok = 0;
            if (i >= tab_n)
                __atomic_store_n(&tab_n, i + 1, __ATOMIC_RELEASE);
        }
    pthread_mutex_unlock(&tab_lock);
    return ok;
}

void hs_qmat_unregister(const hs_qmat *arr)
{
    pthread_mutex_lock(&tab_lock);
    for (int i = 0; i < tab_n; i++)
        if (tab[i].arr == arr)
            tab[i].arr = NULL;
    pthread_mutex_unlock(&tab_lock);
}

const hs_qmat *hs_qmat_find(const void *w)
{
    if (!w || !__atomic_load_n(&tab_n, __ATOMIC_ACQUIRE))
        return NULL;
    const hs_qmat *found = NULL;
    uintptr_t p = (uintptr_t)w;
    pthread_mutex_lock(&tab_lock);
    for (int i = 0; i < tab_n && !found; i++) {
        uintptr_t lo = (uintptr_t)tab[i].arr;
        if (lo && p >= lo && p < lo + tab[i].n * sizeof(hs_qmat) && (p - lo) % sizeof(hs_qmat) == 0)
            found = tab[i].arr + (p - lo) / sizeof(hs_qmat);
    }
    pthread_mutex_unlock(&tab_lock);
    return found;
}
