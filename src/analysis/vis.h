/*
 * src/analysis/vis.h — the analyses' checks of visibility arguments and the cells two
 * visibilities share (src/analysis/vis.c); never installed.
 */
#ifndef HEADSCOPE_ANALYSIS_VIS_H
#define HEADSCOPE_ANALYSIS_VIS_H

#include "headscope/status.h"
#include "headscope/visibility.h"

/* HS_OK when vis: (n_vis) is not NULL, n_vis is 1 or count, and every entry passes
 * hs_vis_check; else HS_E_ARG with a message that starts with what. */
hs_status hs_vis_args(const hs_visibility *vis, int n_vis, int count, const char *what,
                      hs_error *err);

/* The visibility of item k of an array checked by hs_vis_args (one for all, or one each). */
static inline hs_visibility hs_vis_at(const hs_visibility *vis, int n_vis, int k)
{
    return vis[n_vis == 1 ? 0 : k];
}

/* 1 when a and b show every query the same keys (fields a kind does not use ignored). */
int hs_vis_same(hs_visibility a, hs_visibility b);

/* The cells both a and b show: row i's range [max lo, min hi), itself a visibility
 * (causal and a sliding window: the window; two windows: the smaller; a prefix LM and a
 * causal or sliding one: the latter; two prefixes: the shorter). */
hs_visibility hs_vis_intersect(hs_visibility a, hs_visibility b);

#endif /* HEADSCOPE_ANALYSIS_VIS_H */
