/*
 * src/io/analyze_observe.h — the forward-pass observers of `analyze` and its reader of the
 * map store (src/io/analyze_observe.c); private to the library.
 */
#ifndef HEADSCOPE_ANALYZE_OBSERVE_H
#define HEADSCOPE_ANALYZE_OBSERVE_H

#include "analysis/mapstore.h"
#include "headscope/report.h"

/* Streaming observer for the probe: detector scores of the selected layers. */
typedef struct probe_obs {
    const hs_analysis *a;
    const unsigned char *layers;
    int causal;
    int32_t sep_id;
    const unsigned char *sink;
    hs_detect *out; /* (n_heads) */
    hs_status st;
    hs_error *err;
} probe_obs;

/* The observer of the text's pass: per-head metrics of the analysed layers, taken as the
 * pass makes each layer's maps, and every layer's maps into the store. */
typedef struct text_obs {
    const hs_analysis *a;
    const unsigned char *layers;
    int causal;
    int32_t sep_id;
    const unsigned char *sink;
    hs_entropy *ent; /* (n_heads) */
    hs_detect *det;  /* (n_heads) */
    hs_mapstore *store;
    int next;        /* index k of the next analysed layer's first head */
    hs_status st;
    hs_error *err;
} text_obs;

/* hs_rows_fn over the analysed heads' maps in the store: idx are head indices k. */
typedef struct store_rows {
    const hs_mapstore *store;
    const int *head_index; /* (n_heads) */
    int *idx;              /* (n_heads) scratch */
} store_rows;

/* hs_attn_observer over a probe_obs. */
int hs_probe_observe(void *user, int layer, const float *probs, int n_head, int n);

/* hs_attn_observer over a text_obs. */
int hs_text_observe(void *user, int layer, const float *probs, int n_head, int n);

/* hs_rows_fn (src/analysis/pairwise.h) over a store_rows. */
hs_status hs_store_read_rows(void *user, const int *idx, int count, int r0, int rows,
                             float *out, hs_error *err);

#endif /* HEADSCOPE_ANALYZE_OBSERVE_H */
