/*
 * src/analysis/pairwise.h — the pairwise head comparisons over maps read in row blocks, so
 * that the maps can live anywhere (an array, the map store's file) and memory beyond the
 * outputs is one block of rows of every map (never installed).
 */
#ifndef HEADSCOPE_PAIRWISE_H
#define HEADSCOPE_PAIRWISE_H

#include "headscope/analysis.h"
#include "headscope/status.h"

/* Copies rows r0..r0+rows-1 of the maps idx[0..count-1] (0..n_maps-1) into
 * out: (count, rows, n). */
typedef hs_status (*hs_rows_fn)(void *user, const int *idx, int count, int r0, int rows,
                                float *out, hs_error *err);

typedef struct hs_map_source {
    hs_rows_fn rows;
    void *user;
    int n_maps, n;
} hs_map_source;

/* The comparisons of the maps of src, whose entries the caller has checked (finite,
 * >= 0), vis: (n_maps) each map's visibility: frob: (n_maps, n_maps) Frobenius distances
 * over all entries (a cell a map cannot see counted as 0), or NULL; sim: (n_maps, n_maps)
 * as hs_similarity_compute with method, or NULL. */
hs_status hs_pairwise_compute(const hs_map_source *src, const hs_visibility *vis, double *frob,
                              hs_sim_method method, double *sim, hs_error *err);

/* layer: (n_layer) (1/H^2) sum_a sum_b of each layer's block of pairwise:
 * (n_layer * n_head, n_layer * n_head). */
void hs_diversity_layers(const double *pairwise, int n_layer, int n_head, double *layer);

#endif /* HEADSCOPE_PAIRWISE_H */
