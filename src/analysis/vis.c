/* Visibility arguments of the analyses: checks, equality, and the cells two share. */
#include "analysis/vis.h"
#include "core/core.h"

static const char *kind_name(hs_vis_kind k)
{
    switch (k) {
    case HS_VIS_BIDIRECTIONAL: return "bidirectional";
    case HS_VIS_CAUSAL: return "causal";
    case HS_VIS_SLIDING: return "sliding window";
    case HS_VIS_PREFIX: return "prefix LM";
    default: return "unknown";
    }
}

hs_status hs_vis_args(const hs_visibility *vis, int n_vis, int count, const char *what,
                      hs_error *err)
{
    if (!vis)
        return hs_fail(err, HS_E_ARG, "%s: NULL visibility", what);
    if (n_vis != 1 && n_vis != count)
        return hs_fail(err, HS_E_ARG, "%s: %d visibilities, expected 1 or %d", what, n_vis,
                       count);
    for (int k = 0; k < n_vis; k++)
        if (hs_vis_check(vis[k]))
            return hs_fail(err, HS_E_ARG,
                           "%s: visibility %d is invalid (kind %d: %s, window %d, prefix %d)",
                           what, k, (int)vis[k].kind, kind_name(vis[k].kind), vis[k].window,
                           vis[k].prefix);
    return HS_OK;
}

int hs_vis_same(hs_visibility a, hs_visibility b)
{
    if (a.kind != b.kind)
        return 0;
    if (a.kind == HS_VIS_SLIDING)
        return a.window == b.window;
    if (a.kind == HS_VIS_PREFIX)
        return a.prefix == b.prefix;
    return 1;
}

hs_visibility hs_vis_intersect(hs_visibility a, hs_visibility b)
{
    if (a.kind == HS_VIS_BIDIRECTIONAL)
        return b;
    if (b.kind == HS_VIS_BIDIRECTIONAL)
        return a;
    if (a.kind == HS_VIS_SLIDING && b.kind == HS_VIS_SLIDING)
        return a.window < b.window ? a : b;
    if (a.kind == HS_VIS_SLIDING || b.kind == HS_VIS_SLIDING) /* lo from it, hi i + 1 */
        return a.kind == HS_VIS_SLIDING ? a : b;
    if (a.kind == HS_VIS_PREFIX && b.kind == HS_VIS_PREFIX)
        return a.prefix < b.prefix ? a : b;
    return hs_vis_causal(); /* causal with causal or a prefix LM */
}
