/*
 * headscope/visibility.h — which keys a query may attend to.
 *
 * Every attention design headscope opens gives each query row i one contiguous range of
 * visible keys [lo, hi): bidirectional encoders all n keys, causal decoders 0..i, a
 * sliding window (Mistral, Gemma 2/3's local layers, Phi-3, GPT-Neo's local layers) the W
 * keys i - W + 1 .. i, a prefix LM every key of the prefix plus the causal ones. The
 * attention kernels mask with it and the analyses (entropy, detectors, similarity, ...)
 * count and compare only the visible cells, so a head's normalised entropy is taken over
 * the keys it could have attended to.
 *
 *     hs_visibility v = hs_vis_sliding(4096);   // probs: (n, n), one head's map
 *     for (int i = 0; i < n; i++)
 *         for (int j = hs_vis_lo(v, i); j < hs_vis_hi(v, i, n); j++)
 *             mass += probs[(size_t)i * n + j];
 */
#ifndef HEADSCOPE_VISIBILITY_H
#define HEADSCOPE_VISIBILITY_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hs_vis_kind {
    HS_VIS_BIDIRECTIONAL = 0, /* every key: [0, n) (BERT, T5's encoder) */
    HS_VIS_CAUSAL = 1,        /* keys 0..i: [0, i + 1) (GPT-2, Llama) */
    HS_VIS_SLIDING = 2,       /* the last `window` keys up to i: [max(0, i - window + 1), i + 1)
                                 (transformers' sliding_window: key j visible iff
                                 i - window < j <= i) */
    HS_VIS_PREFIX = 3         /* prefix LM: [0, max(i + 1, prefix)) capped at n */
} hs_vis_kind;

typedef struct hs_visibility {
    hs_vis_kind kind;
    int window; /* HS_VIS_SLIDING: keys a query sees, itself included (>= 1) */
    int prefix; /* HS_VIS_PREFIX: tokens every query sees (>= 0) */
} hs_visibility;

static inline hs_visibility hs_vis_bidirectional(void) {
    hs_visibility v = {HS_VIS_BIDIRECTIONAL, 0, 0};
    return v;
}
static inline hs_visibility hs_vis_causal(void) {
    hs_visibility v = {HS_VIS_CAUSAL, 0, 0};
    return v;
}
static inline hs_visibility hs_vis_sliding(int window) {
    hs_visibility v = {HS_VIS_SLIDING, window, 0};
    return v;
}
static inline hs_visibility hs_vis_prefix(int prefix) {
    hs_visibility v = {HS_VIS_PREFIX, 0, prefix};
    return v;
}
/* The visibility of the old `int causal` arguments: causal ? causal : bidirectional. */
static inline hs_visibility hs_vis_from_causal(int causal) {
    return causal ? hs_vis_causal() : hs_vis_bidirectional();
}

/* First visible key of query row i. */
static inline int hs_vis_lo(hs_visibility v, int i) {
    if (v.kind == HS_VIS_SLIDING && i - v.window + 1 > 0) return i - v.window + 1;
    return 0;
}

/* One past the last visible key of query row i in a sequence of n tokens. */
static inline int hs_vis_hi(hs_visibility v, int i, int n) {
    switch (v.kind) {
    case HS_VIS_BIDIRECTIONAL: return n;
    case HS_VIS_PREFIX: return (v.prefix > i + 1 ? (v.prefix < n ? v.prefix : n) : i + 1);
    case HS_VIS_CAUSAL:
    case HS_VIS_SLIDING:
    default: return i + 1;
    }
}

/* 1 when key j is visible to query i. */
static inline int hs_vis_sees(hs_visibility v, int i, int j, int n) {
    return j >= hs_vis_lo(v, i) && j < hs_vis_hi(v, i, n);
}

/* 1 when no query sees a later key (causal, sliding; a prefix LM with prefix <= 1). */
static inline int hs_vis_is_causal(hs_visibility v) {
    return v.kind == HS_VIS_CAUSAL || v.kind == HS_VIS_SLIDING ||
           (v.kind == HS_VIS_PREFIX && v.prefix <= 1);
}

/* Checks the fields: 0 when v is valid, -1 otherwise (an unknown kind, window < 1,
 * prefix < 0). */
static inline int hs_vis_check(hs_visibility v) {
    switch (v.kind) {
    case HS_VIS_BIDIRECTIONAL:
    case HS_VIS_CAUSAL: return 0;
    case HS_VIS_SLIDING: return v.window >= 1 ? 0 : -1;
    case HS_VIS_PREFIX: return v.prefix >= 0 ? 0 : -1;
    default: return -1;
    }
}

#ifdef __cplusplus
}
#endif
#endif
