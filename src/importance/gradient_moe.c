/* The backward pass of DeepSeek's mixture of experts (src/nn/moe.c's forward), for gradient
 * importance: d loss / d (the MLP's output) → d loss / d (its input), through the chosen
 * experts, the shared ones and the gates' dependence on the router's logits (the choice
 * itself is piecewise constant: no gradient). Row by row, each expert's activations
 * recomputed. */
#include <stdlib.h>
#include <string.h>

#include "importance/gradient_mla.h"
#include "nn/moe.h"
#include "nn/ops.h"

/* dx: (d) += the gated MLP's (fc: (d, 2f), proj: (f, d)) input gradient at x: (d) for the
 * output gradient dy: (d) times wt; returns o · dy, o the MLP's output at x. s: 5f + d floats
 * of scratch. */
static double expert_back(const float *x, const float *fc, const float *proj, int d, int f,
                          const float *dy, double wt, float *dx, float *s)
{
    float *gu = s, *act = s + 2 * f, *da = s + 3 * f, *dgu = s + 4 * f, *o = s + 6 * f;
    hs_op_linear(x, fc, NULL, gu, 1, d, 2 * f);
    hs_op_glu(gu, act, 1, f, HS_ACT_SILU);
    hs_op_linear(act, proj, NULL, o, 1, f, d);
    double u = 0;
    for (int j = 0; j < d; j++)
        u += (double)o[j] * dy[j];
    hs_op_gemm(1, 1, f, d, (float)wt, dy, d, proj, d, 0.0f, da, f); /* wt dy proj^T */
    hs_op_glu_back(gu, da, dgu, 1, f, HS_ACT_SILU);
    hs_op_gemm(1, 1, d, 2 * f, 1.0f, dgu, 2 * f, fc, 2 * f, 1.0f, dx, d); /* += dgu fc^T */
    return u;
}

hs_status hs_moe_back(const hs_model_config *c, const hs_layer *L, const float *xhat,
                      const float *lnw, const float *dy, float *dx, int n)
{
    const hs_arch *a = c->arch;
    int d = c->d_model, E = a->moe_experts, K = a->moe_top_k, f = a->moe_ff;
    int fs = a->moe_shared * f, fw = fs > f ? fs : f;
    float *h = malloc((size_t)d * sizeof *h), *lg = malloc((size_t)E * sizeof *lg);
    float *s = malloc(((size_t)7 * fw + (size_t)d) * sizeof *s);
    double *sc = malloc(2 * (size_t)E * sizeof *sc), w[64], u[64], dsc[64];
    int ex[64];
    unsigned char *ok = malloc((size_t)E + 256);
    hs_status st = HS_OK;
    if (!h || !lg || !s || !sc || !ok || K > 64) {
        st = HS_E_NOMEM;
        goto done;
    }
    int softmax = a->moe_scoring == HS_MOE_SOFTMAX;
    int norm = hs_moe_normalises(a);
    double scale = norm && softmax ? 1.0 : a->moe_scale; /* the gates' factor on the scores */
    memset(dx, 0, (size_t)n * (size_t)d * sizeof *dx);
    for (int r = 0; r < n; r++) {
        const float *dyr = dy + (size_t)r * d;
        float *dxr = dx + (size_t)r * d;
        for (int j = 0; j < d; j++)
            h[j] = xhat[(size_t)r * d + j] * lnw[j];
        hs_op_linear(h, L->moe_gate, NULL, lg, 1, d, E);
        hs_moe_route_row(a, lg, L->moe_bias, ex, w, sc, sc + E, ok, ok + E);
        double z = 0, uw = 0;
        for (int k = 0; k < K; k++) {
            size_t e = (size_t)ex[k];
            u[k] = expert_back(h, L->moe_fc + e * d * 2 * f, L->moe_proj + e * f * d, d, f, dyr,
                               w[k], dxr, s);
            z += sc[ex[k]];
            uw += u[k] * w[k];
        }
        for (int k = 0; k < K; k++) /* d loss / d score of the chosen experts */
            dsc[k] = norm ? (scale * u[k] - uw) / (z + 1e-20) : scale * u[k];
        double sd = 0; /* softmax: sum_a dsc_a s_a */
        for (int k = 0; softmax && k < K; k++)
            sd += dsc[k] * sc[ex[k]];
        for (int e = 0; e < E; e++) { /* d loss / d logit_e, then dx += it times gate column e */
            double dl = softmax ? -sc[e] * sd : 0;
            for (int k = 0; k < K; k++)
                if (ex[k] == e)
                    dl += softmax ? sc[e] * dsc[k] : dsc[k] * sc[e] * (1 - sc[e]);
            for (int j = 0; dl != 0 && j < d; j++)
                dxr[j] += (float)(dl * L->moe_gate[(size_t)j * E + e]);
        }
        if (L->moe_sfc)
            expert_back(h, L->moe_sfc, L->moe_sproj, d, fs, dyr, 1.0, dxr, s);
    }
done:
    free(h);
    free(lg);
    free(s);
    free(sc);
    free(ok);
    return st;
}
