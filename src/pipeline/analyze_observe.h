/*
 * src/pipeline/analyze_observe.h — the forward-pass observer of `analyze` and its reader of the
 * map store (src/pipeline/analyze_observe.c); private to the library.
 */
#ifndef HEADSCOPE_ANALYZE_OBSERVE_H
#define HEADSCOPE_ANALYZE_OBSERVE_H

#include "core/mapstore.h"
#include "headscope/report.h"

/* The observer of a pass (the text's or the probe's): detector scores on all attention and
 * without the sinks, and entropy when ent is given, of the analysed layers' heads as the
 * pass makes each layer's maps, every layer's maps into store when given, and every layer's
 * value norms into fnorm when given. */
typedef struct layer_obs {
    const unsigned char *layers; /* (n_layer) analysed layers, or NULL for all */
    const hs_model_config *cfg;  /* the layers' visibility (hs_model_layer_visibility) */
    const hs_detect_seq *seq;    /* the pass's tokens */
    const unsigned char *sink;   /* (n) sink positions */
    hs_entropy *ent, *ent_free;  /* (n_heads) all rows / without sinks, or NULL */
    hs_detect *det, *det_free;   /* (n_heads) all attention / without sinks */
    hs_mapstore *store;          /* or NULL */
    int next;                    /* index k of the next analysed layer's first head (0) */
    hs_status st;                /* the first failure (HS_OK) */
    hs_error *err;
    /* norm-based attention (or NULL): the pass's own workspace, whose qkv holds the layer's
     * values when its maps are observed, and fnorm: (n_layer, n_head, n) the value norms */
    const hs_model *m;
    const struct hs_forward_ws *ws;
    float *fnorm;
    /* progress ("forward", layers done of n_layer), or NULL */
    hs_progress_fn progress;
    void *progress_user;
} layer_obs;

/* hs_rows_fn over the analysed heads' maps in the store: idx are head indices k. */
typedef struct store_rows {
    const hs_mapstore *store;
    const int *head_index; /* (n_heads) */
    int *idx;              /* (n_heads) scratch */
} store_rows;

/* a->rollout, and a->flow when a->n <= a->opts.flow_max_tokens, from the text's maps in the
 * store (every layer), with a->opts.rollout_residual. */
hs_status hs_analysis_rollout(hs_analysis *a, hs_error *err);

/* hs_attn_observer over a layer_obs. */
int hs_layer_observe(void *user, int layer, const float *probs, int n_head, int n);

/* hs_rows_fn (src/analysis/pairwise.h) over a store_rows. */
hs_status hs_store_read_rows(void *user, const int *idx, int count, int r0, int rows,
                             float *out, hs_error *err);

#endif /* HEADSCOPE_ANALYZE_OBSERVE_H */
