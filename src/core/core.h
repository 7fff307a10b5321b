/*
 * src/core/core.h — the library's core services, private to it: errors, size arithmetic,
 * JSON parsing, whole files read and written (atomically), SHA-256, seeded random streams,
 * large and file-mapped memory, the fixed-tiling GEMM, half-precision conversions and
 * little-endian loads (src/core/). Every layer may include it; it includes no other layer.
 */
#ifndef HEADSCOPE_CORE_H
#define HEADSCOPE_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "headscope/status.h"

#if defined(__GNUC__)
#define HS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define HS_PRINTF(a, b)
#endif

/* Writes a formatted message into err (if non-NULL) and returns st. */
hs_status hs_fail(hs_error *err, hs_status st, const char *fmt, ...) HS_PRINTF(3, 4);

/* Prepends "prefix: " to an existing message in err (if non-NULL). */
void hs_error_prefix(hs_error *err, const char *fmt, ...) HS_PRINTF(2, 3);

/* Overflow-checked size arithmetic: return 0 on success, -1 on overflow. */
int hs_mul_size(size_t a, size_t b, size_t *out);
int hs_add_size(size_t a, size_t b, size_t *out);

/* An upper bound on the values (scalars, arrays, objects; a key with its value counts
 * once) a JSON parse of text would build: one more than the commas and opening brackets
 * outside strings. One pass, nothing allocated, also for malformed text. */
size_t hs_json_count_values(const char *text, size_t len);

/* The one JSON reader of files: text[0..len) must be one JSON value with nothing after it but
 * whitespace, and no NUL byte anywhere (Hugging Face's loaders refuse both; cJSON alone stops
 * at the end of the value). Returns the tree (free with cJSON_Delete), or NULL with why[cap]
 * set to what is wrong and where: "near byte N", "a NUL byte at byte N", "text after the end
 * of the JSON value at byte N". */
struct cJSON;
struct cJSON *hs_json_parse_strict(const char *text, size_t len, char *why, size_t cap);

/* Parses text as JSON into *out (free with cJSON_Delete) after checking that it holds at
 * most max_values values, so a hostile file (a 100 MB array of zeros) is refused before a
 * parse tree of 40 times its size is built. what names the input in messages ("'x.json'");
 * the message is "WHAT is not valid JSON (WHY)" with hs_json_parse_strict's why. */
hs_status hs_json_parse(const char *text, size_t len, size_t max_values, const char *what,
                        struct cJSON **out, hs_error *err);

/* Reads a whole file into a malloc'd buffer (NUL-terminated, *len excludes the NUL).
 * max_len bounds the size accepted. Caller frees *data. */
hs_status hs_read_file(const char *path, size_t max_len, char **data, size_t *len, hs_error *err);

/* SHA-256 (src/core/sha256.c): incremental, and of a whole file (*size = its bytes);
 * digests are written as 64 lowercase hex digits plus a NUL. */
typedef struct hs_sha256_ctx {
    uint32_t h[8];
    uint64_t len;
    unsigned char buf[64];
    size_t fill;
} hs_sha256_ctx;
void hs_sha256_init(hs_sha256_ctx *s);
void hs_sha256_update(hs_sha256_ctx *s, const void *data, size_t n);
void hs_sha256_final(hs_sha256_ctx *s, char hex[65]);
hs_status hs_sha256_file(const char *path, char hex[65], uint64_t *size, hs_error *err);
/* The compression of whole 64-byte blocks into the state h: portable C, and the x86 SHA
 * extensions where the CPU has them (returns 1; 0, doing nothing, where it has not); the
 * update uses the second where it can. */
void hs_sha256_blocks_generic(uint32_t h[8], const unsigned char *p, size_t blocks);
int hs_sha256_blocks_accel(uint32_t h[8], const unsigned char *p, size_t blocks);

/* An output file written whole or not at all (src/core/tmpfile.c): hs_out_open creates a
 * new file of an unpredictable name beside path (O_CREAT|O_EXCL: a planted symlink is never
 * followed); write to o->f; hs_out_close(o, 1, err) syncs it and renames it to path (on any
 * failure it is removed and the message names path), hs_out_close(o, 0, NULL) removes it. */
typedef struct hs_out {
    FILE *f;
    char *path, *tmp; /* owned copies */
} hs_out;
hs_status hs_out_open(const char *path, hs_out *o, hs_error *err);
hs_status hs_out_close(hs_out *o, int commit, hs_error *err);
/* Resuming: o again on an existing temporary file tmp (no link followed; a regular file of
 * this user's with one name, of at least len bytes) cut to len bytes, positioned at its
 * end, to be renamed to path by hs_out_close. hs_out_keep closes o and leaves its temporary
 * file where it is. */
hs_status hs_out_reopen(const char *path, const char *tmp, long len, hs_out *o, hs_error *err);
void hs_out_keep(hs_out *o);
/* Resuming without writing to the earlier file: o on a new temporary file (hs_out_open)
 * holding the first len bytes of tmp, positioned at their end. tmp must be a regular file
 * of this user with one name (a hard link planted there is refused, HS_E_INPUT) and at
 * least len bytes; it is read, never written, and stays. *lines: the newlines in those
 * bytes, or -1 when they do not end with one (a cut line). */
hs_status hs_out_resume(const char *path, const char *tmp, long len, hs_out *o, long *lines,
                        hs_error *err);

/* Temporary files removed when a signal ends the process (src/core/tmpsig.c). hs_out_open
 * registers its temporary file and hs_out_close / hs_out_keep forget it (a reopened one,
 * a checkpoint's, is never registered); hs_tmp_forget(path) keeps one that has become part
 * of something to resume from. A fixed table of HS_TMP_SLOTS paths of under 4096 bytes
 * (more, or longer, are not registered). hs_tmp_signals_install, for a program: SIGINT,
 * SIGTERM, SIGHUP and SIGPIPE (those not ignored) unlink every registered path and end the
 * process by the signal's default action; SIGXFSZ is ignored, so a write past the file size
 * limit fails with EFBIG ("File too large") and the writer's error path cleans up. */
#define HS_TMP_SLOTS 64
void hs_tmp_register(const char *path);
void hs_tmp_forget(const char *path);
void hs_tmp_signals_install(void);
/* What those handlers do after removing the temporaries, for a run that knows what a signal
 * leaves (a corpus run and its checkpoint): write line (a whole line with its newline, at
 * most 2047 bytes) to stderr, and first remove the folder dir when it is empty, and then
 * its parents, levels folders in all (the folders the run made). Either may be NULL; both
 * NULL: nothing. A later call replaces the note. */
void hs_tmp_on_signal(const char *line, const char *dir, int levels);

/* splitmix64 and a uniform draw in [0, m), m >= 1, without modulo bias (src/core/random.c):
 * the seeded streams of the induction probe and corpus sampling. */
uint64_t hs_splitmix64(uint64_t *state);
uint64_t hs_rand_below(uint64_t *state, uint64_t m);


/* bytes of memory, 2 MB aligned and marked for transparent huge pages when 2 MB or more
 * (src/core/mapfile.c); free() it. For weights (the GEMMs that stream through a weight matrix
 * run measurably faster on huge pages) and large scratch taken again and again (a gradient
 * pass's ~100 MB: on 4 KB pages, faulting it in cost a third of the pass on the 2-core
 * machine). */
void *hs_alloc_large(size_t bytes);
/* Asks the kernel for transparent huge pages on advised memory only (hs_alloc_large's), for
 * the whole process and its children, where its mode is `always` (which would otherwise give
 * every thread's OpenBLAS buffer and malloc arena whole 2 MB pages): prctl's
 * PR_THP_DISABLE_EXCEPT_ADVISED, Linux 6.18 and later. 0 when taken, -1 when the kernel does
 * not know the request (nothing changes). For programs; the library never calls it. */
int hs_thp_advised_only(void);

/* Maps a regular file read-only (src/core/mapfile.c): *map (hs_file_unmap it) and *len, or
 * NULL and 0 for an empty file. A FIFO, device or folder is refused without blocking. */
hs_status hs_file_map(const char *path, unsigned char **map, size_t *len, hs_error *err);

/* Maps len bytes of the open file fd read-only and private into *map; 0, or -1 with errno. */
int hs_file_map_fd(int fd, size_t len, unsigned char **map);

/* Drops one reference to a mapping made by hs_file_map(_fd), unmapping it with the last
 * (len is used only for a mapping the registry could not record); NULL is ignored. */
void hs_file_unmap(void *map, size_t len);

/* Takes a reference to the live mapping that holds the n bytes at p and returns its base
 * (give it back with hs_file_unmap(base, 0)), or NULL when no mapping made here holds them
 * (a reader's own buffer). */
void *hs_file_map_retain(const void *p, size_t n);

/* As hs_file_write_atomic (include/headscope/status.h), writing n_parts buffers one after
 * the other, so a large array need not be copied next to its header first. */
hs_status hs_file_write_atomic_parts(const char *path, const void *const *parts,
                                     const size_t *lens, int n_parts, hs_error *err);
/* c: (m, n) = alpha op(a) op(b) + beta c, row-major (op: transposed when trans_*: a is
 * (m, k) or (k, m) with lda, b (k, n) or (n, k) with ldb), in double or float (dbl), with
 * the same bits for every thread count: the one tiling rule of src/core/gemm.c. Float only:
 * bias (n floats, or NULL) replaces beta c by the bias rows (add: c + the bias rows). */
typedef struct hs_gemm {
    int dbl, trans_a, trans_b, m, n, k;
    double alpha, beta;
    const void *a, *b;
    void *c;
    int lda, ldb, ldc;
    const float *bias;
    int add;
    /* Float, trans_a and trans_b 0 only: b is not in memory as floats but made a block at
     * a time, b_fill(b_ctx, k0, kl, j0, cols, dst) writing rows k0.. k0 + kl, columns j0..
     * j0 + cols of it into dst transposed: (cols, kl) row-major, column j of b a row of dst
     * (src/core/qgemm.c). Every piece then makes the same OpenBLAS call on the same values
     * as with b in memory, so c has the same bits; each block is made once, for all the
     * rows of c (b unused). */
    void (*b_fill)(const void *ctx, int k0, int kl, int j0, int cols, float *dst);
    /* The same block untransposed, (kl, cols) row-major, for the calls OpenBLAS sums by
     * another kernel for each layout (a row, a column, a shape hs_gemm_layout_same finds
     * different); NULL: b_fill's block transposed. */
    void (*b_fill_kn)(const void *ctx, int k0, int kl, int j0, int cols, float *dst);
    const void *b_ctx;
    /* With b_fill, how the float product this one stands for takes b from memory:
     * HS_GEMM_FILL_AUTO (0), b (k, n) as W in x W: each call takes either block where
     * OpenBLAS sums both alike, else b_fill_kn's; HS_GEMM_FILL_NT, b (n, k) transposed (trans_b
     * = 1, as x Wᵀ of a backward pass): every call takes b_fill's block, transposed;
     * HS_GEMM_FILL_NN, b (k, n) untransposed whatever the shape: every call takes b_fill_kn's
     * block. Each call is then the float product's own, so c has its bits. */
    int b_fill_as;
} hs_gemm;
enum { HS_GEMM_FILL_AUTO, HS_GEMM_FILL_NT, HS_GEMM_FILL_NN };
void hs_gemm_run(const hs_gemm *g);
/* How many calls hs_gemm_run has made over more than one tile (merged, src/core/gemm.c). */
long hs_gemm_merged_calls(void);
/* 1 if OpenBLAS's c = alpha a b + beta c (rows x cols, k deep, row-major, untransposed a)
 * has the same bits with b given transposed (op(b) = bᵀ) as with b in memory, measured once
 * a shape and kept (src/core/gemm_layout.c); 0 if not or unknown. */
int hs_gemm_layout_same(int rows, int cols, int k, float alpha, float beta);
/* hs_gemm_run's c = op(A) op(B) (alpha 1, beta 0) in double and in float. */
void hs_dgemm_fixed(int trans_a, int trans_b, int m, int n, int k, const double *a, int lda,
                    const double *b, int ldb, double *c, int ldc);
void hs_sgemm_fixed(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
                    const float *b, int ldb, float *c, int ldc);

/* Half- and bfloat16-precision conversions (IEEE binary16, round to nearest even). */
float hs_f16_to_f32(uint16_t h);
uint16_t hs_f32_to_f16(float f);
float hs_bf16_to_f32(uint16_t b);
uint16_t hs_f32_to_bf16(float f);

/* hs_f16_to_f32's value without a branch or a call, for decoding loops: the magnitude's bits
 * moved into float32's places scale it by 2^-112 (subnormals too), undone by one exact
 * product; exponent 31 (infinity, NaN) set apart. */
static inline float hs_f16_to_f32_fast(uint32_t h)
{
    uint32_t mag = (h & 0x7fffu) << 13, bits;
    float f;
    memcpy(&f, &mag, 4);
    f *= 0x1p112f;
    memcpy(&bits, &f, 4);
    bits = (h & 0x7c00u) == 0x7c00u ? mag | 0x7f800000u : bits;
    bits |= (h & 0x8000u) << 16;
    memcpy(&f, &bits, 4);
    return f;
}

/* Little-endian loads from unaligned bytes. */
static inline uint16_t hs_le16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t hs_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t hs_le64(const unsigned char *p)
{
    return (uint64_t)hs_le32(p) | ((uint64_t)hs_le32(p + 4) << 32);
}

#endif /* HEADSCOPE_CORE_H */
