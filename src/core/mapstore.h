/*
 * src/core/mapstore.h — where `analyze` keeps the attention maps of a text between the
 * forward pass and the pairwise statistics, pictures and page (never installed). A core
 * service: the pipeline fills it, the pictures (src/io/) read it from the analysis.
 *
 * A store holds n_maps maps of (n, n) floats. When they fit in mem_limit bytes they are
 * kept in one allocation; otherwise they go to a temporary file (mkstemp in dir, unlinked
 * at once, so nothing is left behind even after a crash) written with pwrite and read
 * back with pread: the kernel's page cache holds them, not the process.
 *
 *     hs_mapstore *s;
 *     hs_mapstore_new(L * H, n, (size_t)16 << 20, NULL, &s, &err);   // $TMPDIR or /tmp
 *     hs_mapstore_put(s, l * H, H, probs, &err);       // a layer's (H, n, n) maps
 *     hs_mapstore_get(s, k, map, &err);                // map k: (n, n)
 *     hs_mapstore_rows(s, idx, count, r0, rows, blk, &err);  // (count, rows, n)
 *     hs_mapstore_free(s);
 */
#ifndef HEADSCOPE_MAPSTORE_H
#define HEADSCOPE_MAPSTORE_H

#include <stddef.h>

#include "headscope/status.h"

typedef struct hs_mapstore hs_mapstore;

/* Default bytes of maps kept in memory before a store spills to a file: GPT-2 small's and
 * BERT-base's maps up to n = 170 (144 heads); a bigger model's or a longer text's go to the
 * file, so the process holds one layer's maps at a time (TinyLlama-1.1B's 704 heads at
 * n = 128, 46 MB: analyze's peak 703 -> 659 MiB, the time unchanged). */
#define HS_MAPSTORE_MEM_DEFAULT ((size_t)16 << 20)

/* A store for n_maps maps of n x n floats, in memory when n_maps * n * n * 4 <= mem_limit,
 * else in an unlinked temporary file in dir (NULL or "": $TMPDIR, else /tmp). HS_E_IO
 * (naming the folder and the system error) when that file cannot be created; HS_E_ARG for
 * bad sizes, HS_E_NOMEM when out of memory. Free with hs_mapstore_free. */
hs_status hs_mapstore_new(int n_maps, int n, size_t mem_limit, const char *dir,
                          hs_mapstore **out, hs_error *err);

/* Frees the store (closes its file); accepts NULL. */
void hs_mapstore_free(hs_mapstore *s);

/* 1 when the store keeps its maps in a file. */
int hs_mapstore_spilled(const hs_mapstore *s);

/* Writes count consecutive maps first..first+count-1 from maps: (count, n, n). HS_E_IO
 * (e.g. the disk is full) with the folder and the system error. */
hs_status hs_mapstore_put(hs_mapstore *s, int first, int count, const float *maps,
                          hs_error *err);

/* Copies map k into out: (n, n). s NULL (an analysis that kept no maps): HS_E_ARG. */
hs_status hs_mapstore_get(const hs_mapstore *s, int k, float *out, hs_error *err);

/* Copies rows r0..r0+rows-1 of the maps idx[0..count-1] into out: (count, rows, n). */
hs_status hs_mapstore_rows(const hs_mapstore *s, const int *idx, int count, int r0, int rows,
                           float *out, hs_error *err);

#endif /* HEADSCOPE_MAPSTORE_H */
