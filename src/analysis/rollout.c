/* Attention rollout and attention flow (Abnar & Zuidema 2020): how much of each input token
 * reaches each output position through every layer, from the head-averaged maps with the
 * residual connection added. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/vis.h"
#include "core/core.h"
#include "headscope/analysis.h"

#define FLOW_EPS 1e-12

/* The layers' visibilities: (n_vis) one for all layers or one each. */
typedef struct layer_vis {
    const hs_visibility *v;
    int n;
} layer_vis;

/* Layer l's B = (1 - r) mean_h A_h + r I over the keys vis shows into out: (n, n); the maps
 * come from fn one head at a time (buf: (n, n) scratch). */
static hs_status residual_mean(hs_map_fn fn, void *user, int l, int n_head, int n,
                               hs_visibility vis, double r, float *buf, double *out,
                               hs_error *err)
{
    size_t nn = (size_t)n * n;
    for (size_t k = 0; k < nn; k++)
        out[k] = 0;
    for (int h = 0; h < n_head; h++) {
        hs_status st = fn(user, l * n_head + h, buf, err);
        if (st)
            return st;
        for (int i = 0; i < n; i++) {
            for (int j = hs_vis_lo(vis, i), hi = hs_vis_hi(vis, i, n); j < hi; j++)
                out[(size_t)i * n + j] += (double)buf[(size_t)i * n + j];
        }
    }
    for (size_t k = 0; k < nn; k++)
        out[k] *= (1.0 - r) / n_head;
    for (int i = 0; i < n; i++)
        out[(size_t)i * n + i] += r;
    return HS_OK;
}

/* hs_map_fn over one array of maps: (n_maps, n, n). */
typedef struct map_array {
    const float *maps;
    int n;
} map_array;

static hs_status array_map(void *user, int k, float *out, hs_error *err)
{
    const map_array *p = user;
    size_t nn = (size_t)p->n * (size_t)p->n;
    (void)err;
    memcpy(out, p->maps + (size_t)k * nn, nn * sizeof *out);
    return HS_OK;
}

static hs_status check(const float *attn, int n_layer, int n_head, int n, layer_vis lv,
                       double residual, const double *out, const char *what, hs_error *err)
{
    if (n_layer < 1 || n_head < 1)
        return hs_fail(err, HS_E_ARG, "%s: %d layers x %d heads, expected >= 1 each", what,
                       n_layer, n_head);
    if (!(residual >= 0 && residual <= 1))
        return hs_fail(err, HS_E_ARG, "%s: residual weight %g, expected 0..1", what, residual);
    if (!out)
        return hs_fail(err, HS_E_ARG, "%s: NULL output", what);
    hs_status st = hs_vis_args(lv.v, lv.n, n_layer, what, err);
    if (st)
        return st;
    st = hs_maps_check(attn, n_layer * n_head, n, err);
    if (st)
        hs_error_prefix(err, "%s", what);
    return st;
}

static hs_status from_array(int flow, const float *attn, int n_layer, int n_head, int n,
                            layer_vis lv, double residual, double *out, hs_error *err);

static hs_status rollout_from(hs_map_fn fn, void *user, int n_layer, int n_head, int n,
                              layer_vis lv, double residual, double *out, hs_error *err)
{
    size_t nn = (size_t)n * n;
    hs_status st = HS_OK;
    double *a = malloc(nn * sizeof *a), *t = malloc(nn * sizeof *t);
    float *buf = malloc(nn * sizeof *buf);
    if (!a || !t || !buf) {
        st = hs_fail(err, HS_E_NOMEM, "rollout: out of memory for %d x %d", n, n);
        goto done;
    }
    for (int l = 0; l < n_layer && !st; l++) {
        if ((st = residual_mean(fn, user, l, n_head, n, hs_vis_at(lv.v, lv.n, l), residual, buf,
                                a, err)))
            break;
        if (l == 0) {
            memcpy(out, a, nn * sizeof *out);
            continue;
        }
        hs_dgemm_fixed(0, 0, n, n, n, a, n, out, n, t, n); /* B_l (B_{l-1} ... B_0) */
        memcpy(out, t, nn * sizeof *out);
    }
done:
    free(a);
    free(t);
    free(buf);
    return st;
}

hs_status hs_rollout_compute(const float *attn, int n_layer, int n_head, int n,
                             const hs_visibility *vis, int n_vis, double residual, double *out,
                             hs_error *err)
{
    return from_array(0, attn, n_layer, n_head, n, (layer_vis){vis, n_vis}, residual, out, err);
}

/* ---- attention flow: max flow in the layered attention graph (Dinic) ------------------- */

typedef struct edge {
    int to, rev;
    double cap;
} edge;

typedef struct graph {
    int nodes;
    int *first, *count; /* (nodes) edges of node v: e[first[v] .. first[v] + count[v]) */
    edge *e;
    double *cap0;       /* (edges) the capacities, restored before each pair */
    int *level, *it, *queue, *path; /* (nodes) each */
} graph;

/* Node of token j at level l (0 = the input, n_layer = the top). */
#define NODE(l, j) ((l) * n + (j))

static hs_status flow_from(hs_map_fn fn, void *user, int n_layer, int n_head, int n,
                           layer_vis lv, double residual, double *out, hs_error *err)
{
    hs_status st;
    size_t nn = (size_t)n * n;
    int V = (n_layer + 1) * n;
    double *a = malloc((size_t)n_layer * nn * sizeof *a);
    graph g = {V, calloc((size_t)V, sizeof(int)), calloc((size_t)V, sizeof(int)), NULL, NULL,
               malloc((size_t)V * sizeof(int)), malloc((size_t)V * sizeof(int)),
               malloc((size_t)V * sizeof(int)), malloc((size_t)V * sizeof(int))};
    float *buf = malloc(nn * sizeof *buf);
    if (!a || !buf || !g.first || !g.count || !g.level || !g.it || !g.queue || !g.path)
        goto nomem;
    for (int l = 0; l < n_layer; l++)
        if ((st = residual_mean(fn, user, l, n_head, n, hs_vis_at(lv.v, lv.n, l), residual, buf,
                                a + l * nn, err)))
            goto done;
    /* an edge (l, j) -> (l + 1, i) of capacity a_l[i][j] > 0, and its reverse */
    size_t ne = 0;
    for (int l = 0; l < n_layer; l++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                if (a[l * nn + (size_t)i * n + j] > 0) {
                    g.count[NODE(l, j)]++;
                    g.count[NODE(l + 1, i)]++;
                    ne += 2;
                }
    g.e = malloc((ne ? ne : 1) * sizeof *g.e);
    g.cap0 = malloc((ne ? ne : 1) * sizeof *g.cap0);
    if (!g.e || !g.cap0)
        goto nomem;
    for (int v = 0, at = 0; v < V; v++) {
        g.first[v] = at;
        at += g.count[v];
        g.count[v] = 0;
    }
    for (int l = 0; l < n_layer; l++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                double c = a[l * nn + (size_t)i * n + j];
                if (!(c > 0))
                    continue;
                int u = NODE(l, j), w = NODE(l + 1, i);
                int eu = g.first[u] + g.count[u]++, ew = g.first[w] + g.count[w]++;
                g.e[eu] = (edge){w, ew, c};
                g.e[ew] = (edge){u, eu, 0};
            }
    for (size_t k = 0; k < ne; k++)
        g.cap0[k] = g.e[k].cap;

    for (int i = 0; i < n; i++) { /* output position i at the top */
        int sink = NODE(n_layer, i);
        for (int j = 0; j < n; j++) {
            int src = NODE(0, j);
            for (size_t k = 0; k < ne; k++)
                g.e[k].cap = g.cap0[k];
            double flow = 0;
            for (;;) {
                /* BFS levels over edges with capacity left */
                for (int v = 0; v < V; v++)
                    g.level[v] = -1;
                int qh = 0, qt = 0;
                g.level[src] = 0;
                g.queue[qt++] = src;
                while (qh < qt) {
                    int v = g.queue[qh++];
                    for (int k = g.first[v]; k < g.first[v] + g.count[v]; k++)
                        if (g.e[k].cap > FLOW_EPS && g.level[g.e[k].to] < 0) {
                            g.level[g.e[k].to] = g.level[v] + 1;
                            g.queue[qt++] = g.e[k].to;
                        }
                }
                if (g.level[sink] < 0)
                    break;
                for (int v = 0; v < V; v++)
                    g.it[v] = g.first[v];
                /* blocking flow: iterative DFS along level-increasing edges */
                for (;;) {
                    int *path = g.path, depth = 0, v = src; /* path: edge indices */
                    while (v != sink) {
                        int k = g.it[v];
                        for (; k < g.first[v] + g.count[v]; k++)
                            if (g.e[k].cap > FLOW_EPS && g.level[g.e[k].to] == g.level[v] + 1)
                                break;
                        g.it[v] = k;
                        if (k == g.first[v] + g.count[v]) { /* dead end: retreat */
                            if (depth == 0)
                                break;
                            g.level[v] = -1;
                            v = g.e[g.e[path[--depth]].rev].to;
                            g.it[v]++;
                            continue;
                        }
                        path[depth++] = k;
                        v = g.e[k].to;
                    }
                    if (v != sink)
                        break;
                    double push = INFINITY;
                    for (int d = 0; d < depth; d++)
                        if (g.e[path[d]].cap < push)
                            push = g.e[path[d]].cap;
                    for (int d = 0; d < depth; d++) {
                        g.e[path[d]].cap -= push;
                        g.e[g.e[path[d]].rev].cap += push;
                    }
                    flow += push;
                }
            }
            out[(size_t)i * n + j] = flow;
        }
    }
    st = HS_OK;
    goto done;
nomem:
    st = hs_fail(err, HS_E_NOMEM, "attention flow: out of memory for %d layers of %d tokens",
                 n_layer, n);
done:
    free(a);
    free(buf);
    free(g.first);
    free(g.count);
    free(g.e);
    free(g.cap0);
    free(g.level);
    free(g.it);
    free(g.queue);
    free(g.path);
    return st;
}

/* Rollout (flow 0) or flow (1) of one array of maps, checked first. */
static hs_status from_array(int flow, const float *attn, int n_layer, int n_head, int n,
                            layer_vis lv, double residual, double *out, hs_error *err)
{
    hs_status st = check(attn, n_layer, n_head, n, lv, residual, out,
                         flow ? "attention flow" : "rollout", err);
    if (st)
        return st;
    map_array src = {attn, n};
    return (flow ? flow_from : rollout_from)(array_map, &src, n_layer, n_head, n, lv, residual,
                                             out, err);
}

hs_status hs_attention_flow(const float *attn, int n_layer, int n_head, int n,
                            const hs_visibility *vis, int n_vis, double residual, double *out,
                            hs_error *err)
{
    return from_array(1, attn, n_layer, n_head, n, (layer_vis){vis, n_vis}, residual, out, err);
}

hs_status hs_rollout_source(hs_map_fn fn, void *user, int n_layer, int n_head, int n,
                            const hs_visibility *vis, int n_vis, double residual,
                            double *rollout, double *flow, hs_error *err)
{
    if (!fn || n_layer < 1 || n_head < 1 || n < 1 || !(residual >= 0 && residual <= 1))
        return hs_fail(err, HS_E_ARG, "rollout: bad arguments");
    hs_status st = hs_vis_args(vis, n_vis, n_layer, "rollout", err);
    layer_vis lv = {vis, n_vis};
    if (!st && rollout)
        st = rollout_from(fn, user, n_layer, n_head, n, lv, residual, rollout, err);
    if (!st && flow)
        st = flow_from(fn, user, n_layer, n_head, n, lv, residual, flow, err);
    return st;
}
