/* Matrix products whose every bit is the same for any thread count, for the forward pass
 * (hs_op_gemm and hs_op_linear, src/nn/ops.c) and the analyses (hs_sgemm_fixed,
 * hs_dgemm_fixed): one tiling rule for all of them. The product is cut by its shape alone,
 * and each piece is one single-threaded OpenBLAS call inside a parallel loop (OpenBLAS's
 * OpenMP build does not thread a call made inside one). OpenBLAS's result for an element
 * depends on how the product is cut (its threads and blocking), so a fixed cut is what
 * makes results identical for every thread count.
 *
 * Tiles: GEMM_TM rows (or fewer: the matrix's) by at most GEMM_TN columns, the columns
 * halved (to 64 at the least) until there are GEMM_TILES of them, so even a 128-row
 * projection keeps 12+ threads busy. Rows are never cut below 128: each tile packs its slice
 * of the weights again, and 32-row tiles of a 128-row product spent a quarter of one
 * thread's time in that packing (128 x 64 tiles run 15-20% faster than the 32 x 128 tiles
 * of the same count, measured on the GEMMs of a GPT-2-small layer).
 *
 * A product that still has fewer than GEMM_TILES tiles (the output and MLP-down projections
 * at n = 128: 12 tiles of 128 x 64) is also cut along K, into chunks of at least
 * GEMM_KC_MIN, until there are about GEMM_TASKS tasks (three rounds on 16 threads): each
 * chunk's product goes to its own partial buffer, and the partials are summed into c in
 * chunk order. On 16 threads the MLP-down projection at n = 128 took 46% longer than the
 * MLP-up one of the same FLOPs with 12 tiles (48 for the up projection). The split too
 * depends on the shape alone.
 *
 * Merged calls. With few threads the tiles are more than the threads need, and each call
 * packs its slice of a and b again: on one thread the Q/K/V projection at n = 1024 took
 * 22.8 ms in 128-row tiles against 20.3 in column strips, and at n = 128 (one row of 36
 * tiles of 128 x 64) 3.3 ms against 2.8 as one call (OpenBLAS's SkylakeX kernels, 2-core
 * machine). Where one call over a block of tiles gives the same bits as the tile calls,
 * the tiles are merged: on one thread into one call a K chunk, otherwise into about
 * MERGE_TASKS calls a thread, the rows of a column strip first, then neighbouring strips,
 * at most MERGE_CELLS elements a call. OpenBLAS's SkylakeX kernels give the same bits
 * (checked on the projections of GPT-2 and BERT shapes), its Haswell and Zen kernels do
 * not. It is not assumed: the first product of each block shape computes a block both ways
 * and compares every bit (merge_verdict), and a shape that differs is never merged; a match
 * counts only on operands that show a change of order at all (not zeros, not small
 * integers, orders_tell). The result is then the same for every thread count either way.
 * A check costs two or three products of the block; after MERGE_GIVE_UP failed checks and
 * none passed (in float, or in double), the kernels are taken for ones that merge nothing
 * and no shape is checked again (55 checks, 16 GFLOP, in a default analyze on GPT-2 with
 * the Haswell kernels). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "core/core.h"
#include "headscope/version.h"

#define GEMM_TM 128
#define GEMM_TN 512
#define GEMM_TN_MIN 64
#define GEMM_TILES 32
#define GEMM_TASKS 48
#define GEMM_KC_MIN 192
#ifndef HS_GEMM_SPLIT_BELOW /* tiles below which K is split (a build-time knob for tuning) */
#define HS_GEMM_SPLIT_BELOW GEMM_TILES
#endif
#define GEMM_PART_MAX ((size_t)4 << 20) /* bytes of partial products, at most */
#define MERGE_TASKS 4                   /* merged calls are cut to about this many a thread */
#define MERGE_SHAPES 1024               /* shapes whose verdict is kept; then tiles */
#define MERGE_CELLS ((size_t)1 << 19)   /* a merged call's elements of c, at most */
#define MERGE_GIVE_UP 4                 /* failed checks, none passed: no more checks */
#define MERGE_TRIES 3                   /* checks of a shape that could not tell; then tiles */
#define MERGE_TELL 64                   /* a check tells when 1 cell in this many shows the order */
#define PAR_MIN 32768                   /* elements below which a sum stays on one thread */

/* Calls that covered more than one tile, since the start (a test's proof that merging
 * happened where the kernels allow it). */
static long merged_calls;

long hs_gemm_merged_calls(void)
{
    long n;
#pragma omp atomic read
    n = merged_calls;
    return n;
}

/* The calling thread's buffer for the K chunks' partial products, grown as needed and kept
 * (with fewer than 32 tiles, at most GEMM_TASKS + GEMM_TILES tiles of 128 x 64 floats,
 * 2.6 MB; never above GEMM_PART_MAX); NULL when out of memory, and the product is then not
 * split. */
static _Thread_local void *part_buf;
static _Thread_local size_t part_cap;

static void *part_bytes(size_t bytes)
{
    if (bytes > part_cap) {
        void *p = realloc(part_buf, bytes);
        if (!p)
            return NULL;
        part_buf = p;
        part_cap = bytes;
    }
    return part_buf;
}

/* One piece: rows x cols of c (at ct) from k0.. k0 + kl of the inner dimension. */
static void piece(const hs_gemm *g, int i0, int j0, int k0, int rows, int cols, int kl,
                  double beta, void *ct, int ldc)
{
    CBLAS_TRANSPOSE ta = g->trans_a ? CblasTrans : CblasNoTrans;
    CBLAS_TRANSPOSE tb = g->trans_b ? CblasTrans : CblasNoTrans;
    size_t ao = g->trans_a ? (size_t)k0 * (size_t)g->lda + (size_t)i0
                           : (size_t)i0 * (size_t)g->lda + (size_t)k0;
    size_t bo = g->trans_b ? (size_t)j0 * (size_t)g->ldb + (size_t)k0
                           : (size_t)k0 * (size_t)g->ldb + (size_t)j0;
    if (g->dbl)
        cblas_dgemm(CblasRowMajor, ta, tb, rows, cols, kl, g->alpha, (const double *)g->a + ao,
                    g->lda, (const double *)g->b + bo, g->ldb, beta, ct, ldc);
    else
        cblas_sgemm(CblasRowMajor, ta, tb, rows, cols, kl, (float)g->alpha,
                    (const float *)g->a + ao, g->lda, (const float *)g->b + bo, g->ldb,
                    (float)beta, ct, ldc);
}

/* c's row i: its start (bias, c + bias, or beta c) plus the ks partials, in chunk order. */
static void sum_row(const hs_gemm *g, const void *part, size_t mn, int ks, int i)
{
    int n = g->n;
    size_t off = (size_t)i * (size_t)n;
    if (g->dbl) {
        double *ci = (double *)g->c + (size_t)i * (size_t)g->ldc;
        const double *pi = (const double *)part + off;
        for (int j = 0; j < n; j++) {
            double v = g->beta == 0.0 ? 0.0 : g->beta * ci[j];
            for (int q = 0; q < ks; q++)
                v += pi[(size_t)q * mn + (size_t)j];
            ci[j] = v;
        }
        return;
    }
    float *ci = (float *)g->c + (size_t)i * (size_t)g->ldc, beta = (float)g->beta;
    const float *pi = (const float *)part + off, *bias = g->bias;
    int add = g->add;
#pragma omp simd
    for (int j = 0; j < n; j++) {
        float v = bias ? (add ? ci[j] + bias[j] : bias[j]) : beta == 0.0f ? 0.0f : beta * ci[j];
        for (int q = 0; q < ks; q++)
            v += pi[(size_t)q * mn + (size_t)j];
        ci[j] = v;
    }
}

/* ---- merged calls: the verdict of each shape --------------------------------------- */

typedef struct merge_key {
    int dbl, trans_a, trans_b, rows, cols, k, tn;
    double alpha, beta;
} merge_key;

static struct {
    merge_key key;
    int same;  /* 1: one call over the block gives the tiles' bits; 0: it does not; -1: the
                  checks so far could not tell */
    int tries; /* checks that could not tell */
} merge_tab[MERGE_SHAPES];
static int merge_n, merge_passed[2], merge_failed[2]; /* by precision: float, double */
static pthread_mutex_t merge_lock = PTHREAD_MUTEX_INITIALIZER;

static int key_eq(const merge_key *a, const merge_key *b)
{
    return a->dbl == b->dbl && a->trans_a == b->trans_a && a->trans_b == b->trans_b &&
           a->rows == b->rows && a->cols == b->cols && a->k == b->k && a->tn == b->tn &&
           a->alpha == b->alpha && a->beta == b->beta;
}

/* The table's entry for key, or -1; with the lock held. */
static int merge_slot(const merge_key *key)
{
    for (int i = 0; i < merge_n; i++)
        if (key_eq(&merge_tab[i].key, key))
            return i;
    return -1;
}

/* Whether the operands can tell two orders of the block's sums apart: the block taken as two
 * parts of K, the second added onto the first, differs from the one call (one) in at least
 * 1/MERGE_TELL of its cells. The parts meet at an odd index, where no kernel's own blocking
 * of K (in multiples of its unrolling) would put a seam: OpenBLAS's SkylakeX kernels sum
 * K = 768 as two blocks of 384, and halves of 384 would repeat that order exactly. Zeros
 * cannot tell, nor small integers (summed exactly in any order): on them every order gives
 * the same bits, and a match with the tiles says nothing. half: scratch of the block's
 * size. */
static int orders_tell(const hs_gemm *g, int rows, int cols, int kl, double beta,
                       const char *one, char *half)
{
    size_t es = g->dbl ? sizeof(double) : sizeof(float), cells = (size_t)rows * (size_t)cols;
    int seam = (kl / 2) | 1;
    if (seam >= kl)
        return 0;
    memset(half, 0, cells * es);
#pragma omp parallel num_threads(2)
#pragma omp single
    {
        piece(g, 0, 0, 0, rows, cols, seam, beta, half, cols);
        piece(g, 0, 0, seam, rows, cols, kl - seam, 1.0, half, cols);
    }
    size_t differ = 0;
    for (size_t i = 0; i < cells; i++)
        differ += memcmp(one + i * es, half + i * es, es) != 0;
    return differ * MERGE_TELL >= cells;
}

/* 1 if one call over a rows x cols block (kl deep, beta as the pieces use it) gives the bits
 * of the GEMM_TM x tn tile calls that cover it, for this shape: looked up, or measured on
 * these operands (the block at the origin), both ways into zeroed scratch, every call
 * single-threaded inside a parallel region. The order of a kernel's sums does not depend on
 * the values, but whether a different order shows does: a match counts only on operands
 * that tell orders apart (orders_tell); on others the product keeps its tiles and a later
 * product of the shape checks again, MERGE_TRIES times at most. A verdict is kept. 0 when
 * it differs, when the checks cannot tell, when the scratch cannot be had, or when
 * MERGE_SHAPES shapes are kept already (a corpus of many lengths: the shapes past them keep
 * their tiles). */
static int merge_verdict(const hs_gemm *g, int rows, int cols, int kl, int tn, double beta)
{
    merge_key key = {g->dbl, g->trans_a, g->trans_b, rows, cols, kl, tn, g->alpha, beta};
    int verdict = -1, p = !!g->dbl;
    pthread_mutex_lock(&merge_lock);
    int slot = merge_slot(&key);
    if (slot >= 0)
        verdict = merge_tab[slot].same;
    else if (merge_n >= MERGE_SHAPES)
        verdict = 0; /* no room to keep another verdict: tiles, not a check every call */
    if (verdict < 0 && !merge_passed[p] && merge_failed[p] >= MERGE_GIVE_UP)
        verdict = 0; /* kernels that merge nothing (Haswell's, Zen's): no more checks */
    pthread_mutex_unlock(&merge_lock);
    if (verdict >= 0)
        return verdict;
    size_t es = g->dbl ? sizeof(double) : sizeof(float), cells = (size_t)rows * (size_t)cols;
    char *one = calloc(2 * cells, es);
    if (!one)
        return 0;
    char *tiles = one + cells * es;
#pragma omp parallel num_threads(2)
#pragma omp single
    {
        piece(g, 0, 0, 0, rows, cols, kl, beta, one, cols);
        for (int r = 0; r < rows; r += GEMM_TM)
            for (int q = 0; q < cols; q += tn)
                piece(g, r, q, 0, rows - r < GEMM_TM ? rows - r : GEMM_TM,
                      cols - q < tn ? cols - q : tn, kl, beta,
                      tiles + ((size_t)r * (size_t)cols + (size_t)q) * es, cols);
    }
    int same = memcmp(one, tiles, cells * es) == 0;
    int told = !same || orders_tell(g, rows, cols, kl, beta, one, tiles);
    free(one);
    pthread_mutex_lock(&merge_lock);
    if ((slot = merge_slot(&key)) < 0 && merge_n < MERGE_SHAPES) {
        slot = merge_n++;
        merge_tab[slot].key = key;
        merge_tab[slot].same = -1;
        merge_tab[slot].tries = 0;
    }
    if (told) {
        merge_passed[p] += same;
        merge_failed[p] += !same;
        if (slot >= 0)
            merge_tab[slot].same = same;
    } else if (slot >= 0 && ++merge_tab[slot].tries >= MERGE_TRIES) {
        merge_tab[slot].same = 0;
    }
    pthread_mutex_unlock(&merge_lock);
    return told && same;
}

/* 1 if calls of pr x pc tiles (tm x tn each; the last row and column groups shorter) give
 * the tiles' bits, for every block shape they take and every K chunk's depth. */
static int merge_holds(const hs_gemm *g, int mt, int nt, int tn, int pr, int pc, int kc,
                       double beta)
{
    int rows_full = pr * GEMM_TM < g->m ? pr * GEMM_TM : g->m;
    int rows_last = g->m - ((mt - 1) / pr) * pr * GEMM_TM;
    int cols_full = pc * tn < g->n ? pc * tn : g->n;
    int cols_last = g->n - ((nt - 1) / pc) * pc * tn;
    int rs[2] = {rows_full, rows_last}, cs[2] = {cols_full, cols_last};
    int ks[2] = {kc, g->k - ((g->k - 1) / kc) * kc};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 2; c++)
                if ((rs[a] > GEMM_TM || cs[b] > tn) &&
                    merge_verdict(g, rs[a], cs[b], ks[c], tn, beta) != 1)
                    return 0;
    return 1;
}

/* The calls' grid with few threads (*pr row tiles by *pc column tiles a call; 1 x 1: the
 * tiles themselves): on one thread one call a K chunk, otherwise about MERGE_TASKS tasks a
 * thread, the rows of a column strip merged first (OpenBLAS packs the strip's slice of b
 * once a call), then neighbouring strips, as long as the merged calls give the tiles' bits
 * (merge_holds; with rows alone when rows and columns together do not). */
static void merge_plan(const hs_gemm *g, int mt, int nt, int tn, int ks, int kc, double beta,
                       int *pr, int *pc)
{
    int threads = hs_threads();
    int want = threads == 1 ? 1 : MERGE_TASKS * threads;
    int calls = (want + ks - 1) / ks; /* calls a K chunk wants */
    *pr = *pc = 1;
    if (mt * nt <= calls)
        return;
    int groups = (calls + nt - 1) / nt; /* row groups a strip wants */
    int r = groups >= mt ? 1 : (mt + groups - 1) / groups;
    if ((size_t)r * GEMM_TM * (size_t)tn > MERGE_CELLS)
        r = (int)(MERGE_CELLS / ((size_t)GEMM_TM * (size_t)tn));
    r = r < 1 ? 1 : r;
    int strips = (calls + (mt + r - 1) / r - 1) / ((mt + r - 1) / r); /* strips a group wants */
    int c = nt / strips > 1 ? nt / strips : 1;
    size_t rows = (size_t)r * GEMM_TM < (size_t)g->m ? (size_t)r * GEMM_TM : (size_t)g->m;
    if (c > 1 && rows * (size_t)c * (size_t)tn > MERGE_CELLS)
        c = (int)(MERGE_CELLS / (rows * (size_t)tn));
    c = c < 1 ? 1 : c;
    if (merge_holds(g, mt, nt, tn, r, c, kc, beta)) {
        *pr = r, *pc = c;
    } else if (c > 1 && r > 1 && merge_holds(g, mt, nt, tn, r, 1, kc, beta)) {
        *pr = r;
    }
}

/* The thread's buffer for a block of a filled b (hs_gemm.b_fill), grown as needed and kept:
 * at most kc x tn floats (K = 5632, 64 columns: 1.4 MB). */
static _Thread_local float *fill_buf;
static _Thread_local size_t fill_cap;

/* c's bias rows (add: added) at ct, a rows x cols block starting at column j0. */
static void bias_rows(const hs_gemm *g, float *ct, int j0, int rows, int cols)
{
    for (int i = 0; i < rows; i++) {
        float *row = ct + (size_t)i * (size_t)g->ldc;
        if (g->add) {
#pragma omp simd
            for (int j = 0; j < cols; j++)
                row[j] += g->bias[j0 + j];
        } else {
            memcpy(row, g->bias + j0, (size_t)cols * sizeof *row);
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* The 8 x 8 square at s (row stride ls) into d transposed (row stride ld), in AVX registers. */
__attribute__((target("avx"))) static void square8_avx(const float *s, size_t ls, float *d,
                                                        size_t ld)
{
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_loadu_ps(s + (size_t)i * ls);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4)
        for (int k = 0; k < 2; k++) {
            r[i + k] = _mm256_shuffle_ps(t[i + k], t[i + 2 + k], 0x44);
            r[i + 2 + k] = _mm256_shuffle_ps(t[i + k], t[i + 2 + k], 0xEE);
        }
    /* r: rows 0-3 then 4-7 in each lane half; columns 0, 2, 1, 3 of each half */
    static const int col[4] = {0, 2, 1, 3};
    for (int c = 0; c < 4; c++) {
        _mm256_storeu_ps(d + (size_t)col[c] * ld, _mm256_permute2f128_ps(r[c], r[4 + c], 0x20));
        _mm256_storeu_ps(d + (size_t)(col[c] + 4) * ld,
                         _mm256_permute2f128_ps(r[c], r[4 + c], 0x31));
    }
}
#define HAVE_SQUARE8 1
#endif

/* dst (cols, rows) = src (rows, cols) transposed: in 8 x 8 squares in AVX registers where
 * the CPU has them, 64 x 64 at a time (16 KB each side, in cache while its lines fill), the
 * rest an element at a time in 16 x 16 squares. */
static void transpose(const float *src, int rows, int cols, float *dst)
{
    int r8 = 0, c8 = 0;
#ifdef HAVE_SQUARE8
    if (__builtin_cpu_supports("avx")) {
        r8 = rows / 8 * 8, c8 = cols / 8 * 8;
        for (int i0 = 0; i0 < r8; i0 += 64)
            for (int j0 = 0; j0 < c8; j0 += 64)
                for (int i = i0; i < i0 + 64 && i < r8; i += 8)
                    for (int j = j0; j < j0 + 64 && j < c8; j += 8)
                        square8_avx(src + (size_t)i * (size_t)cols + (size_t)j, (size_t)cols,
                                    dst + (size_t)j * (size_t)rows + (size_t)i, (size_t)rows);
    }
#endif
    for (int i0 = 0; i0 < rows; i0 += 16)
        for (int j0 = 0; j0 < cols; j0 += 16) {
            int i1 = i0 + 16 < rows ? i0 + 16 : rows, j1 = j0 + 16 < cols ? j0 + 16 : cols;
            for (int j = j0; j < j1; j++)
                for (int i = i0; i < i1; i++)
                    if (i >= r8 || j >= c8) /* not in a square done above */
                        dst[(size_t)j * (size_t)rows + (size_t)i] =
                            src[(size_t)i * (size_t)cols + (size_t)j];
        }
}

/* hs_gemm_run's tiles with b made a block at a time: the same calls, unmerged, on the same
 * values, but a task is a column strip of one K chunk, its block of b made once and used for
 * every row tile under it. The block comes transposed (g->b_fill: a stored row of W is a
 * column of b, the cheap way to decode it) for the calls whose shape OpenBLAS sums alike in
 * both layouts (hs_gemm_layout_same: among those it finds different, rows and columns,
 * which OpenBLAS gives to gemv and small kernels), untransposed (g->b_fill_kn, or a
 * transpose of the first) for the others, so every call has the bits of b in memory
 * (test_qgemm compares them); where b's float product takes it transposed (x Wᵀ:
 * HS_GEMM_FILL_NT) or untransposed whatever the shape (HS_GEMM_FILL_NN), every call takes
 * the block that way, as that product's calls take b (no row merge with the latter).
 * Where a thread's buffer cannot be had, that strip of c is NaN, which the forward pass
 * refuses as a non-finite value (hs_op_linear returns nothing). */
static void run_filled(const hs_gemm *g, int tm, int tn, int mt, int nt, int ks, int kc,
                       void *part, double beta_c)
{
    int m = g->m, n = g->n, k = g->k, strips = nt * ks, last = m % tm;
    size_t mn = (size_t)m * (size_t)n;
    float alpha = (float)g->alpha, beta = (float)(ks > 1 ? 0.0 : beta_c);
#pragma omp parallel for schedule(dynamic) if (mt * nt * ks > 1)
    for (int t = 0; t < strips; t++) {
        int j0 = (t % nt) * tn, q = t / nt, k0 = q * kc;
        int cols = j0 + tn < n ? tn : n - j0, kl = k0 + kc < k ? kc : k - k0;
        /* the strip's calls: m / tm tiles of tm rows, one of m % tm, or all merged in one */
        int as = g->b_fill_as, nt_all = as == HS_GEMM_FILL_NT; /* every call transposed */
        int t_full = m >= tm && as != HS_GEMM_FILL_NN &&
                     (nt_all || hs_gemm_layout_same(tm, cols, kl, alpha, beta));
        int t_last = last && as != HS_GEMM_FILL_NN &&
                     (nt_all || hs_gemm_layout_same(last, cols, kl, alpha, beta));
        int merge = m > tm && (size_t)m * (size_t)cols <= MERGE_CELLS && t_full &&
                    (!last || t_last) &&
                    (nt_all || hs_gemm_layout_same(m, cols, kl, alpha, beta));
        int use_kn = (m >= tm && !t_full) || (last && !t_last);
        int fill_t = t_full || t_last || (use_kn && !g->b_fill_kn);
        size_t need = (size_t)kl * (size_t)cols, have = (fill_t ? need : 0) + (use_kn ? need : 0);
        if (have > fill_cap) {
            float *p = realloc(fill_buf, have * sizeof *p);
            if (!p) { /* this strip of c NaN: the pass then fails on non-finite values */
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < cols; j++)
                        (ks > 1 ? (float *)part + (size_t)q * mn + (size_t)i * (size_t)n
                                : (float *)g->c + (size_t)i * (size_t)g->ldc)[j0 + j] = NAN;
                continue;
            }
            fill_buf = p;
            fill_cap = have;
        }
        float *bt = fill_buf, *bkn = fill_buf + (fill_t ? need : 0);
        if (fill_t)
            g->b_fill(g->b_ctx, k0, kl, j0, cols, bt);
        if (use_kn && g->b_fill_kn)
            g->b_fill_kn(g->b_ctx, k0, kl, j0, cols, bkn);
        else if (use_kn)
            transpose(bt, cols, kl, bkn);
        /* the strip's row tiles as one call where that gives their bits (merge_verdict, on
         * this block as b: OpenBLAS packs the strip's block once, not once a row tile) */
        int rt = tm, merged = 0;
        if (merge) {
            hs_gemm one = {.trans_b = 1, .m = m, .n = cols, .k = kl, .alpha = g->alpha,
                           .a = (const float *)g->a + k0, .lda = g->lda, .b = bt, .ldb = kl};
            if (merge_verdict(&one, m, cols, kl, cols, beta) == 1)
                rt = m, merged = 1;
        }
        for (int i0 = 0; i0 < m; i0 += rt) {
            int rows = i0 + rt < m ? rt : m - i0;
            const float *a = (const float *)g->a + (size_t)i0 * (size_t)g->lda + (size_t)k0;
            float *ct;
            int ldc = g->ldc;
            if (ks > 1) {
                ct = (float *)part + (size_t)q * mn + (size_t)i0 * (size_t)n + (size_t)j0;
                ldc = n;
            } else {
                ct = (float *)g->c + (size_t)i0 * (size_t)g->ldc + (size_t)j0;
                if (g->bias)
                    bias_rows(g, ct, j0, rows, cols);
            }
            int tr = merged || (rows == tm ? t_full : t_last);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, tr ? CblasTrans : CblasNoTrans, rows, cols,
                        kl, alpha, a, g->lda, tr ? bt : bkn, tr ? kl : cols, beta, ct, ldc);
        }
    }
}

void hs_gemm_run(const hs_gemm *g)
{
    int m = g->m, n = g->n, k = g->k, tm = GEMM_TM, tn = GEMM_TN;
    size_t es = g->dbl ? sizeof(double) : sizeof(float);
    while (((m + tm - 1) / tm) * ((n + tn - 1) / tn) < GEMM_TILES && tn > GEMM_TN_MIN)
        tn /= 2;
    int mt = (m + tm - 1) / tm, nt = (n + tn - 1) / tn, tiles = mt * nt, ks = 1, kc = k;
    if (tiles < HS_GEMM_SPLIT_BELOW && k >= 2 * GEMM_KC_MIN) {
        ks = (GEMM_TASKS + tiles - 1) / tiles;
        if (ks > k / GEMM_KC_MIN)
            ks = k / GEMM_KC_MIN;
        kc = (k + ks - 1) / ks;
        ks = (k + kc - 1) / kc;
    }
    size_t mn = (size_t)m * (size_t)n;
    void *part = ks > 1 && (size_t)ks * mn * es <= GEMM_PART_MAX ? part_bytes((size_t)ks * mn * es)
                                                                 : NULL;
    if (!part)
        ks = 1, kc = k;
    /* whole products: the tiles merged into bigger calls where that gives the same bits */
    double beta_c = g->bias && !g->dbl ? 1.0 : g->beta; /* the beta the pieces run with */
    if (g->b_fill) {
        run_filled(g, tm, tn, mt, nt, ks, kc, part, beta_c);
        if (ks > 1)
#pragma omp parallel for schedule(static) if (mn >= PAR_MIN)
            for (int i = 0; i < m; i++)
                sum_row(g, part, mn, ks, i);
        return;
    }
    int pr = 1, pc = 1;
    merge_plan(g, mt, nt, tn, ks, kc, ks > 1 ? 0.0 : beta_c, &pr, &pc);
    int rt = pr * tm, cw = pc * tn, ncols = (nt + pc - 1) / pc;
    int calls = ((mt + pr - 1) / pr) * ncols, tasks = calls * ks;
    if (pr * pc > 1) {
#pragma omp atomic
        merged_calls += tasks;
    }
#pragma omp parallel for schedule(dynamic) if (tasks > 1)
    for (int t = 0; t < tasks; t++) {
        int tile = t % calls, q = t / calls; /* q: the K chunk */
        int i0 = (tile / ncols) * rt, j0 = (tile % ncols) * cw, k0 = q * kc;
        int rows = i0 + rt < m ? rt : m - i0, cols = j0 + cw < n ? cw : n - j0;
        int kl = k0 + kc < k ? kc : k - k0;
        if (ks > 1) { /* this chunk's product, alone, into its partial buffer */
            char *pt = (char *)part + ((size_t)q * mn + (size_t)i0 * (size_t)n + (size_t)j0) * es;
            piece(g, i0, j0, k0, rows, cols, kl, 0.0, pt, n);
            continue;
        }
        char *ct = (char *)g->c + ((size_t)i0 * (size_t)g->ldc + (size_t)j0) * es;
        if (g->bias && !g->dbl) /* the bias broadcast per call, on a block read next */
            bias_rows(g, (float *)ct, j0, rows, cols);
        piece(g, i0, j0, k0, rows, cols, kl, beta_c, ct, g->ldc);
    }
    if (ks == 1)
        return;
#pragma omp parallel for schedule(static) if (mn >= PAR_MIN)
    for (int i = 0; i < m; i++)
        sum_row(g, part, mn, ks, i);
}

void hs_dgemm_fixed(int trans_a, int trans_b, int m, int n, int k, const double *a, int lda,
                    const double *b, int ldb, double *c, int ldc)
{
    hs_gemm g = {.dbl = 1, .trans_a = trans_a, .trans_b = trans_b, .m = m, .n = n, .k = k,
                 .alpha = 1.0, .a = a, .lda = lda, .b = b, .ldb = ldb, .c = c, .ldc = ldc};
    hs_gemm_run(&g);
}

void hs_sgemm_fixed(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
                    const float *b, int ldb, float *c, int ldc)
{
    hs_gemm g = {.trans_a = trans_a, .trans_b = trans_b, .m = m, .n = n, .k = k, .alpha = 1.0,
                 .a = a, .lda = lda, .b = b, .ldb = ldb, .c = c, .ldc = ldc};
    hs_gemm_run(&g);
}
