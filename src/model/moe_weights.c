/* The experts of DeepSeek-V2/V3's mixture-of-experts layers, as the hub's checkpoints name
 * them (model.layers.L.mlp.gate.weight, .gate.e_score_correction_bias,
 * .experts.E.{gate,up,down}_proj.weight, .shared_experts.{gate,up,down}_proj.weight): two
 * indices per name, which the one-index name table cannot say, so they are read here after
 * it, through the same reader lookup. */
#include <stdio.h>
#include <stdlib.h>

#include "model/model_internal.h"

int hs_moe_layer(const hs_model_config *c, int l)
{
    const hs_arch *a = c->arch;
    if (!a || a->moe_experts <= 0 || l < a->moe_first_dense)
        return 0;
    if (a->moe_every > 1 && (l + 1) % a->moe_every)
        return 0;
    return !(l < HS_MOE_MAX_LAYERS && (a->moe_dense[l / 64] >> (l % 64) & 1));
}

typedef struct moe_build {
    hs_model *m;
    hs_tensor_lookup lookup;
    void *ctx;
    float *cur;     /* next free float of m->moe_arena (NULL: checks only) */
    size_t floats;  /* floats placed (or, checking, needed) */
    int dense;      /* checking a dense layer's MLP (read by the name table, any stored type) */
} moe_build;

/* One stored matrix, (out, in) as nn.Linear keeps it, into dst: (in, ld) at column off; or,
 * when vec, a vector of out. Checked in every mode; converted when b->cur. */
static hs_status take(moe_build *b, const char *name, int out, int in, int ld, int off,
                      float *dst, hs_error *err)
{
    static const hs_tensor_name row = {HS_S_FC_W, -1, NULL, NULL, NULL, NULL, 0};
    hs_tensor_ref ref = {&row, -1, 0};
    int out_in = 1, vec = in == 0;
    const hs_tensor_view *t = b->lookup(b->ctx, name, &ref, &out_in);
    if (!t)
        return hs_fail(err, HS_E_FORMAT, "tensor 'model.%s' is missing", name);
    int gg = b->m->format == HS_FORMAT_GGUF; /* a GGUF file's experts may be block-quantised */
    if (!b->dense && t->dtype != HS_DT_F32 && t->dtype != HS_DT_F16 && t->dtype != HS_DT_BF16 &&
        (!gg || t->dtype == HS_DT_OTHER || vec || in % hs_dtype_block(t->dtype)))
        return hs_fail(err, HS_E_FORMAT, "tensor 'model.%s' is %s; an expert's weights must be "
                       "F32, F16 or BF16%s", name,
                       t->dtype_name ? t->dtype_name : hs_dtype_name(t->dtype),
                       gg ? " or a ggml block type whose blocks fit its rows" : "");
    int ok = vec ? t->ndim == 1 && t->shape[0] == out
                 : t->ndim == 2 && t->shape[0] == out && t->shape[1] == in;
    if (!ok)
        return hs_fail(err, HS_E_SHAPE, "tensor 'model.%s' must be (%d%s%.0d)", name, out,
                       vec ? "" : ", ", vec ? 0 : in);
    if (!dst)
        return HS_OK;
    hs_tensor_shape sh = vec ? (hs_tensor_shape){HS_K_VEC, 1, out, out, 0, (size_t)out}
                             : (hs_tensor_shape){HS_K_MAT, in, out, ld, off, (size_t)in * ld};
    return hs_tensor_convert(t, vec ? 0 : out_in, sh, dst, name, err);
}

/* n floats of the arena (NULL when checking only). */
static float *carve(moe_build *b, size_t n)
{
    float *p = b->cur;
    if (p)
        b->cur += n;
    b->floats += n;
    return p;
}

/* A gated MLP's three matrices named prefix{gate,up,down}_proj.weight, f wide: [gate | up]
 * into g: (d, 2f), down into p: (f, d) (NULL: checks only). */
static hs_status gated(moe_build *b, const char *prefix, int f, float *g, float *p,
                       hs_error *err)
{
    int d = b->m->cfg.d_model;
    char name[200];
    hs_status st;
    snprintf(name, sizeof name, "%sgate_proj.weight", prefix);
    if ((st = take(b, name, f, d, 2 * f, 0, g, err)))
        return st;
    snprintf(name, sizeof name, "%sup_proj.weight", prefix);
    if ((st = take(b, name, f, d, 2 * f, f, g, err)))
        return st;
    snprintf(name, sizeof name, "%sdown_proj.weight", prefix);
    return take(b, name, d, f, d, 0, p, err);
}

static hs_status layer_moe(moe_build *b, int l, hs_error *err)
{
    const hs_arch *a = b->m->cfg.arch;
    hs_layer *L = &b->m->layers[l];
    int d = b->m->cfg.d_model, E = a->moe_experts, f = a->moe_ff;
    char name[200];
    hs_status st;
    float *gate = carve(b, (size_t)d * (size_t)E);
    snprintf(name, sizeof name, "layers.%d.mlp.gate.weight", l);
    if ((st = take(b, name, E, d, E, 0, gate, err)))
        return st;
    L->moe_gate = gate;
    if (a->moe_routing == HS_MOE_NOAUX_TC) {
        float *bias = carve(b, (size_t)E);
        snprintf(name, sizeof name, "layers.%d.mlp.gate.e_score_correction_bias", l);
        if ((st = take(b, name, E, 0, 0, 0, bias, err)))
            return st;
        L->moe_bias = bias;
    }
    size_t dff = (size_t)d * (size_t)f; /* every expert's [gate | up], then every down */
    float *fc = carve(b, (size_t)E * 2 * dff), *proj = carve(b, (size_t)E * dff);
    for (int e = 0; e < E; e++) {
        snprintf(name, sizeof name, "layers.%d.mlp.experts.%d.", l, e);
        if ((st = gated(b, name, f, fc ? fc + (size_t)e * 2 * dff : NULL,
                        proj ? proj + (size_t)e * dff : NULL, err)))
            return st;
    }
    L->moe_fc = fc;
    L->moe_proj = proj;
    if (a->moe_shared > 0) {
        size_t fs = (size_t)a->moe_shared * (size_t)f;
        float *sfc = carve(b, (size_t)d * 2 * fs), *sproj = carve(b, fs * (size_t)d);
        snprintf(name, sizeof name, "layers.%d.mlp.shared_experts.", l);
        L->moe_sfc = sfc;
        L->moe_sproj = sproj;
        return gated(b, name, a->moe_shared * f, sfc, sproj, err);
    }
    return HS_OK;
}

/* A dense layer's MLP, read by the name table (whose rows a mixture of experts makes
 * optional), checked present. */
static hs_status dense_present(moe_build *b, int l, hs_error *err)
{
    static const char *const part[] = {"gate_proj", "up_proj", "down_proj"};
    int d = b->m->cfg.d_model, f = b->m->cfg.d_ff;
    char name[200];
    hs_status st = HS_OK;
    b->dense = 1;
    for (int k = 0; k < 3 && !st; k++) {
        snprintf(name, sizeof name, "layers.%d.mlp.%s.weight", l, part[k]);
        st = take(b, name, k < 2 ? f : d, k < 2 ? d : f, 0, 0, NULL, err);
    }
    b->dense = 0;
    return st;
}

/* Every layer's experts (a dense layer's MLP is the name table's: present unless the file
 * lacks it, then named here). */
static hs_status walk(moe_build *b, hs_error *err)
{
    const hs_model_config *c = &b->m->cfg;
    hs_status st = HS_OK;
    for (int l = 0; l < c->n_layer && !st; l++) {
        if (hs_moe_layer(c, l))
            st = layer_moe(b, l, err);
        else /* the name table's rows are optional for deepseek: present here */
            st = dense_present(b, l, err);
    }
    return st;
}

hs_status hs_moe_weights_build(hs_model *m, hs_tensor_lookup lookup, void *ctx, hs_error *err)
{
    if (!m->cfg.arch || m->cfg.arch->moe_experts <= 0)
        return HS_OK;
    moe_build b = {m, lookup, ctx, NULL, 0, 0};
    hs_status st = walk(&b, err); /* checks, and the size */
    if (st)
        return st;
    m->n_params += b.floats;
    if (m->open_flags & HS_OPEN_NO_WEIGHTS)
        return HS_OK;
    if (!(m->moe_arena = malloc(b.floats * sizeof(float))))
        return hs_fail(err, HS_E_NOMEM, "out of memory for %zu MB of experts",
                       b.floats * sizeof(float) >> 20);
    b = (moe_build){m, lookup, ctx, m->moe_arena, 0, 0};
    return walk(&b, err);
}
