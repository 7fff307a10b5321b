/* The mixture-of-experts MLP (see moe.h): one GEMM for the router, the rows of each expert
 * gathered into one GEMM per expert, the shared experts as one gated MLP over every row. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/block.h"
#include "nn/moe.h"
#include "nn/ops.h"

/* The index of the largest of v[0..n) with ok[i] (ties: the first), or -1. */
static int best_of(const double *v, const unsigned char *ok, int n)
{
    int b = -1;
    for (int i = 0; i < n; i++)
        if (ok[i] && (b < 0 || v[i] > v[b]))
            b = i;
    return b;
}

void hs_moe_route_row(const hs_arch *a, const float *logits, const float *bias, int *e,
                      double *w, double *score, double *choice, unsigned char *ok,
                      unsigned char *gok)
{
    int E = a->moe_experts, K = a->moe_top_k;
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < E; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    for (int i = 0; i < E; i++) {
        if (a->moe_scoring == HS_MOE_SIGMOID) {
            score[i] = 1.0 / (1.0 + exp(-(double)logits[i]));
        } else {
            score[i] = exp((double)logits[i] - mx);
            sum += score[i];
        }
    }
    for (int i = 0; i < E; i++) {
        if (a->moe_scoring == HS_MOE_SOFTMAX)
            score[i] /= sum;
        choice[i] = score[i] + (bias ? (double)bias[i] : 0.0);
        ok[i] = 1;
    }
    if (a->moe_routing != HS_MOE_GREEDY) { /* only the experts of the best groups */
        int G = a->moe_groups, per = E / G;
        double gs[256]; /* groups: at most E, checked at load against 256 below */
        for (int g = 0; g < G; g++) {
            const double *s = choice + (size_t)g * (size_t)per;
            int i1 = best_of(s, ok, per);
            gs[g] = s[i1];
            if (a->moe_routing == HS_MOE_NOAUX_TC) { /* plus the second best */
                ok[g * per + i1] = 0;
                gs[g] += s[best_of(s, ok + (size_t)g * per, per)];
                ok[g * per + i1] = 1;
            }
            gok[g] = 1;
        }
        unsigned char keep[256] = {0};
        for (int t = 0; t < a->moe_topk_groups; t++) {
            int g = best_of(gs, gok, G);
            keep[g] = 1;
            gok[g] = 0;
        }
        for (int i = 0; i < E; i++) /* the other groups' scores 0 (transformers' masked_fill) */
            choice[i] = keep[i / per] ? choice[i] : 0.0;
    }
    double wsum = 0;
    for (int k = 0; k < K; k++) {
        e[k] = best_of(choice, ok, E);
        ok[e[k]] = 0;
        w[k] = score[e[k]];
        wsum += w[k];
    }
    int norm = hs_moe_normalises(a);
    for (int k = 0; k < K; k++) {
        if (norm)
            w[k] /= wsum + 1e-20;
        if (!norm || a->moe_scoring == HS_MOE_SIGMOID)
            w[k] *= a->moe_scale;
    }
}

/* y: (rows, d) += the gated MLP (fc: (d, 2f), proj: (f, d)) of x: (rows, d), each row's
 * output times wt[row] (NULL: 1). gu: (rows, 2f), act: (rows, f), tmp: (rows, d). */
static void gated_add(const float *x, const float *fc, const float *proj, int rows, int d, int f,
                      const double *wt, float *y, float *gu, float *act, float *tmp)
{
    hs_op_linear(x, fc, NULL, gu, rows, d, 2 * f);
    hs_op_glu(gu, act, rows, f, HS_ACT_SILU);
    hs_op_linear(act, proj, NULL, tmp, rows, f, d);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < d; j++)
            y[(size_t)r * d + j] += (float)((wt ? wt[r] : 1.0) * tmp[(size_t)r * d + j]);
}

hs_status hs_moe_forward(const hs_model_config *c, const hs_layer *L, const float *in,
                         float *out, int rows, int32_t *route)
{
    const hs_arch *a = c->arch;
    int d = c->d_model, E = a->moe_experts, K = a->moe_top_k, f = a->moe_ff;
    int fw = a->moe_shared * f > f ? a->moe_shared * f : f; /* the widest MLP */
    size_t rk = (size_t)rows * (size_t)K, rd = (size_t)rows * (size_t)d;
    float *logits = malloc((size_t)rows * (size_t)E * sizeof *logits);
    float *y = calloc(rd, sizeof *y), *xs = malloc(rd * sizeof *xs), *tmp = malloc(rd * sizeof *tmp);
    float *gu = malloc((size_t)rows * 3 * (size_t)fw * sizeof *gu);
    int *ex = malloc(rk * sizeof *ex), *idx = malloc(rk * sizeof *idx);
    double *w = malloc(rk * sizeof *w), *wt = malloc((size_t)rows * sizeof *wt);
    double *sc = malloc(2 * (size_t)E * sizeof *sc);
    unsigned char *ok = malloc((size_t)E + 256);
    hs_status st = HS_OK;
    if (!logits || !y || !xs || !tmp || !gu || !ex || !idx || !w || !wt || !sc || !ok) {
        st = HS_E_NOMEM;
        goto done;
    }
    hs_op_linear(in, L->moe_gate, NULL, logits, rows, d, E);
    for (int r = 0; r < rows; r++) {
        hs_moe_route_row(a, logits + (size_t)r * E, L->moe_bias, ex + (size_t)r * K,
                         w + (size_t)r * K, sc, sc + E, ok, ok + E);
        for (int k = 0; route && k < K; k++)
            route[(size_t)r * K + k] = ex[(size_t)r * K + k];
    }
    for (int e = 0; e < E; e++) { /* the rows that chose e, gathered */
        int cnt = 0;
        for (size_t i = 0; i < rk; i++)
            if (ex[i] == e) {
                int r = (int)(i / (size_t)K);
                memcpy(xs + (size_t)cnt * d, in + (size_t)r * d, (size_t)d * sizeof *xs);
                wt[cnt] = w[i];
                idx[cnt++] = r;
            }
        if (!cnt)
            continue;
        memset(tmp, 0, (size_t)cnt * (size_t)d * sizeof *tmp);
        float *part = calloc((size_t)cnt * (size_t)d, sizeof *part);
        if (!part) {
            st = HS_E_NOMEM;
            goto done;
        }
        gated_add(xs, L->moe_fc + (size_t)e * d * 2 * f, L->moe_proj + (size_t)e * f * d, cnt, d,
                  f, wt, part, gu, gu + (size_t)cnt * 2 * f, tmp);
        for (int j = 0; j < cnt; j++)
            hs_op_add(y + (size_t)idx[j] * d, part + (size_t)j * d, (size_t)d);
        free(part);
    }
    if (L->moe_sfc) {
        int fs = a->moe_shared * f;
        gated_add(in, L->moe_sfc, L->moe_sproj, rows, d, fs, NULL, y, gu,
                  gu + (size_t)rows * 2 * fs, tmp);
    }
    memcpy(out, y, rd * sizeof *out);
done:;
    void *bufs[] = {logits, y, xs, tmp, gu, ex, idx, w, wt, sc, ok};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    return st;
}

hs_status hs_moe_routes(const hs_model *m, const int32_t *ids, int n, int32_t *route,
                        hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    if (c->arch->moe_experts <= 0)
        return hs_fail(err, HS_E_UNSUPPORTED, "architecture '%s' has no mixture of experts "
                       "to route", c->arch->name);
    size_t per = (size_t)n * (size_t)c->arch->moe_top_k;
    for (size_t i = 0; i < (size_t)c->n_layer * per; i++)
        route[i] = -1;
    hs_forward_ws *ws = NULL;
    hs_status st = hs_forward_ws_new(m, n, &ws, err);
    if (st)
        return st;
    ws->moe_route = route;
    float *hidden = malloc((size_t)n * (size_t)c->d_model * sizeof *hidden);
    hs_forward_opts o = {.hidden = hidden};
    st = hidden ? hs_forward(m, ids, NULL, n, &o, ws, err)
                : hs_fail(err, HS_E_NOMEM, "out of memory");
    free(hidden);
    hs_forward_ws_free(ws);
    return st;
}
