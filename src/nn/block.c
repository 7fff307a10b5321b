/* The transformer block (see block.h): one function for every family, its structure read
 * from the architecture descriptor, every projection an OpenBLAS sgemm on (in, out)
 * weights. */
#include <stdlib.h>
#include <string.h>

#include "core/qgemm.h"
#include "nn/block.h"
#include "nn/mla.h"
#include "nn/moe.h"
#include "nn/ops.h"

/* Fails when hs_op_attn_probs found a row of probabilities that is not finite (scores that
 * overflow float32): bad_row = head * n + query, naming the layer, head and query. */
static hs_status check_probs(size_t bad_row, int l, int n, hs_error *err)
{
    if (bad_row == (size_t)-1)
        return HS_OK;
    return hs_fail(err, HS_E_VALUE, "layer %d head %d attention is not finite (query %zu): the "
                   "attention scores overflow float32", l, (int)(bad_row / (size_t)n),
                   bad_row % (size_t)n);
}

/* Layer l's place in the trace when the observer is the library's own recorder
 * (hs_trace_observe) and the trace fits the pass: the probabilities are then written there
 * directly, and hs_trace_observe, seeing its own buffer, copies nothing. NULL otherwise. */
static float *trace_layer(const hs_forward_opts *o, int l, int n_head, int n)
{
    if (!o || o->on_attn != hs_trace_observe || !o->user)
        return NULL;
    hs_trace *t = o->user;
    if (t->n != n || t->n_head != n_head || l < 0 || l >= t->n_layer)
        return NULL;
    return t->attn + (size_t)l * (size_t)n_head * (size_t)n * (size_t)n;
}

#define KEEP(f) (keep ? keep->f : NULL)
#define KEEP_COPY(f, src) (keep && keep->f ? (void)memcpy(keep->f, src, nd * sizeof *src) : (void)0)

/* The descriptor's norm (LayerNorm, or RMSNorm without a bias) of x: (rows, d) into y (may
 * alias x), keeping xhat and rstd when not NULL. */
static void norm(const hs_model_config *c, const float *x, const float *w, const float *b,
                 float *y, float *xhat, float *rstd, int rows)
{
    if (c->arch->norm_kind == HS_NORM_RMS)
        hs_op_rmsnorm(x, w, y, xhat, rstd, rows, c->d_model, c->ln_eps);
    else
        hs_op_layernorm(x, w, b, y, xhat, rstd, rows, c->d_model, c->ln_eps);
}

int hs_qk_norms(const hs_model_config *c)
{
    hs_qk_norm k = c->arch->qk_norm;
    return k == HS_QK_NORM_HEAD ? c->n_head + c->n_kv_head : k == HS_QK_NORM_FULL ? 2 : 0;
}

void hs_qk_normalise(const hs_model_config *c, const hs_layer *L, float *qkv, int rows,
                     float *xhat, float *rstd)
{
    int A = hs_model_attn_width(c), K = c->n_kv_head * c->d_head, W = hs_qkv_width(c);
    int per = c->arch->qk_norm == HS_QK_NORM_HEAD, nr = hs_qk_norms(c);
    int nq = per ? c->n_head : 1, nk = per ? c->n_kv_head : 1; /* norms of Q, of K */
    int wq = per ? c->d_head : A, wk = per ? c->d_head : K;    /* and their widths */
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)W >= 65536)
    for (int i = 0; i < rows; i++) {
        float *q = qkv + (size_t)i * (size_t)W;
        float *xh = xhat ? xhat + (size_t)i * (size_t)(A + K) : NULL;
        float *rs = rstd ? rstd + (size_t)i * (size_t)nr : NULL;
        hs_op_rmsnorm(q, L->q_norm_w, q, xh, rs, nq, wq, c->ln_eps);
        hs_op_rmsnorm(q + A, L->k_norm_w, q + A, xh ? xh + A : NULL, rs ? rs + nq : NULL, nk, wk,
                      c->ln_eps);
    }
}

/* The MLP on in: (rows, d) into out: (rows, d), set or (add) added, HS_MLP_ROWS rows at a
 * time: pre: (rows, F) gets the first projection (gelu's input, or the gated MLP's
 * [gate | up]), or is ws->ff itself (then only the rows of the moment); the activation
 * goes to ws->ff, after pre when pre is ws->ff. out may alias in. */
static void mlp(const hs_model_config *c, const hs_layer *L, hs_forward_ws *ws, const float *in,
                float *pre, float *out, int rows, int add)
{
    int d = c->d_model, f = c->d_ff, F = hs_ff_width(c);
    for (int r0 = 0; r0 < rows; r0 += HS_MLP_ROWS) {
        int cnt = rows - r0 < HS_MLP_ROWS ? rows - r0 : HS_MLP_ROWS;
        const float *in_r = in + (size_t)r0 * (size_t)d;
        float *out_r = out + (size_t)r0 * (size_t)d;
        float *pre_r = pre == ws->ff ? pre : pre + (size_t)r0 * (size_t)F, *act = ws->ff;
        hs_op_linear(in_r, L->w_fc, L->b_fc, pre_r, cnt, d, F);
        if (c->gated) {
            if (pre == ws->ff)
                act = ws->ff + (size_t)cnt * (size_t)F;
            hs_op_glu(pre_r, act, cnt, f, c->act);
        } else {
            hs_op_gelu(pre_r, act, (size_t)cnt * (size_t)f, c->act);
        }
        if (add)
            hs_op_linear_add(act, L->w_proj, L->b_proj, out_r, cnt, f, d);
        else
            hs_op_linear(act, L->w_proj, L->b_proj, out_r, cnt, f, d);
    }
}

/* An encoder-decoder's self-attention (T5: one copy, unscaled, the running stack's relative
 * position bias; encdec.c) on qkv: (n, W) into ws->ctx, the maps to the observer. */
static hs_status encdec_self(const hs_model *m, int l, hs_forward_ws *ws, const float *qkv,
                             int n, hs_visibility vis, const float *hm, int maps,
                             const hs_forward_opts *o, hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    int W = hs_qkv_width(c), A = hs_model_attn_width(c);
    if (!ws->rel)
        return hs_fail(err, HS_E_ARG, "model '%s' is an encoder-decoder: run it with "
                       "hs_forward_encdec", c->arch->name);
    if (maps && !ws->probs && !(ws->probs = hs_alloc_large(ws->probs_floats * sizeof(float))))
        return hs_fail(err, HS_E_NOMEM, "out of memory for a layer's attention maps");
    size_t bad_row;
    if (hs_encdec_attn(c, qkv, W, qkv + A, qkv + 2 * A, W, n, n, vis, ws->rel, ws->rel_bucket,
                       hm, maps ? ws->probs : NULL, ws->ctx, &bad_row))
        return hs_fail(err, HS_E_NOMEM, "out of memory for the attention rows");
    hs_status st = o && o->allow_nonfinite ? HS_OK : check_probs(bad_row, l, n, err);
    if (!st && o && o->on_attn && o->on_attn(o->user, l, ws->probs, c->n_head, n))
        return hs_fail(err, HS_E_ARG, "stopped by observer");
    return st;
}

/* A decoder layer's cross-attention (T5's EncDecAttention): x: (n, d) += (norm(x) W_q,
 * enc W_k, enc W_v attention over every encoder token) W_o, the maps (n_head, n, n_enc) to
 * o->on_cross, its heads under o->cross_head_mask's row l. */
static hs_status cross_attention(const hs_model *m, const hs_layer *L, int l, hs_forward_ws *ws,
                                 int n, const hs_forward_opts *o, hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    int d = c->d_model, A = hs_model_attn_width(c), ne = ws->n_enc;
    float *q = ws->qkv, *kv = ws->qkv + (size_t)n * (size_t)A; /* (n, A), (ne, 2A) */
    int maps = o && o->on_cross;
    if (maps && !ws->probs && !(ws->probs = hs_alloc_large(ws->probs_floats * sizeof(float))))
        return hs_fail(err, HS_E_NOMEM, "out of memory for a layer's attention maps");
    norm(c, ws->x, L->xln_w, NULL, ws->h, NULL, NULL, n);
    hs_op_gemm(0, n, A, d, 1.0f, ws->h, d, L->w_xqkv, 3 * A, 0.0f, q, A);
    hs_op_gemm(0, ne, 2 * A, d, 1.0f, ws->enc, d, L->w_xqkv + A, 3 * A, 0.0f, kv, 2 * A);
    const float *hm = o && o->cross_head_mask ? o->cross_head_mask + (size_t)l * c->n_head : NULL;
    size_t bad_row;
    if (hs_encdec_attn(c, q, A, kv, kv + A, 2 * A, n, ne, hs_vis_from_causal(0), NULL, NULL, hm,
                       maps ? ws->probs : NULL, ws->ctx, &bad_row))
        return hs_fail(err, HS_E_NOMEM, "out of memory for the attention rows");
    if (bad_row != (size_t)-1 && !(o && o->allow_nonfinite))
        return hs_fail(err, HS_E_VALUE, "layer %d head %d cross-attention is not finite (query "
                       "%zu): the attention scores overflow float32", l,
                       (int)(bad_row / (size_t)n), bad_row % (size_t)n);
    if (maps && o->on_cross(o->user, l, ws->probs, c->n_head, n, ne))
        return hs_fail(err, HS_E_ARG, "stopped by observer");
    hs_op_linear(ws->ctx, L->w_xo, NULL, ws->h, n, A, d);
    hs_op_add(ws->x, ws->h, (size_t)n * (size_t)d);
    return HS_OK;
}

#define HOOKED(hk, s) ((hk) & HS_SITE_BIT(s))
/* The sites before the contexts: hooked, a batch's copies no longer share its first layer */
#define BEFORE_CTX                                                                             \
    (HS_SITE_BIT(HS_SITE_RESID_PRE) | HS_SITE_BIT(HS_SITE_Q) | HS_SITE_BIT(HS_SITE_K) |        \
     HS_SITE_BIT(HS_SITE_V) | HS_SITE_BIT(HS_SITE_PATTERN))

/* Attention with the pattern hooked: the probabilities, the hook on them, then the context
 * under the head mask hm (scaling probs in place). *bad_row as hs_op_attn_probs gives it. */
static hs_status attn_pattern_hooked(const hs_model_config *c, const hs_forward_opts *o, int l,
                                     hs_visibility vis, const float *qkv, float *probs,
                                     float *ctx, int n, int copy, const float *hm,
                                     size_t *bad_row, hs_error *err)
{
    *bad_row = hs_op_attn_probs(c, vis, qkv, probs, n);
    hs_hook_call k = {.site = HS_SITE_PATTERN, .layer = l, .copy = copy, .x = probs,
                      .rows = c->n_head * n, .cols = n, .ld = n, .heads = c->n_head,
                      .head_width = n, .n = n};
    if (o->hook(o->hook_user, &k))
        return hs_fail(err, HS_E_ARG, "stopped by hook");
    hs_op_attn_context(c, vis, qkv, probs, ctx, n, hm);
    return HS_OK;
}

/* The output projection of the contexts ctx: (rows, A) into h: (rows, d) with the result
 * site (attn_out is the caller's, after any post-attention norm): hooked result, each
 * head's ctx_h W_O^h (no bias) into res: (rpc, H, d) a copy at a time, the hook, then
 * h = b_O + their sum over the heads. */
static hs_status out_proj(const hs_model_config *c, const hs_layer *L, const hs_forward_opts *o,
                          unsigned hk, int l, const float *ctx, float *h, int rows, int batch,
                          int n, hs_error *err)
{
    int A = hs_model_attn_width(c), d = c->d_model, H = c->n_head, dh = c->d_head;
    int rpc = rows / batch;
    if (!HOOKED(hk, HS_SITE_RESULT)) {
        hs_op_linear(ctx, L->w_o, L->b_o, h, rows, A, d);
    } else {
        /* W_O in its stored type (hs_layer_get_linear): decoded whole for the heads' slices,
         * the values the converted matrix holds */
        const hs_qmat *q = hs_qmat_find(L->w_o);
        float *res = malloc((size_t)rpc * (size_t)H * (size_t)d * sizeof *res);
        float *wo = q ? malloc((size_t)A * (size_t)d * sizeof *wo) : NULL;
        if (!res || (q && !wo)) {
            free(res), free(wo);
            return hs_fail(err, HS_E_NOMEM, "out of memory for a layer's head results");
        }
        if (q)
            hs_qmat_fill_kn(q, 0, A, 0, d, wo);
        const float *w_o = q ? wo : L->w_o;
        for (int b = 0; b < batch; b++) {
            const float *cb = ctx + (size_t)b * (size_t)rpc * (size_t)A;
            float *hb = h + (size_t)b * (size_t)rpc * (size_t)d;
            for (int hd = 0; hd < H; hd++)
                hs_op_gemm(0, rpc, d, dh, 1.0f, cb + (size_t)hd * (size_t)dh, A,
                           w_o + (size_t)hd * (size_t)dh * (size_t)d, d, 0.0f,
                           res + (size_t)hd * (size_t)d, H * d);
            hs_hook_call k = {.site = HS_SITE_RESULT, .layer = l, .copy = b, .x = res,
                              .rows = rpc, .cols = H * d, .ld = H * d, .heads = H,
                              .head_width = d, .n = n};
            if (o->hook(o->hook_user, &k)) {
                free(res), free(wo);
                return hs_fail(err, HS_E_ARG, "stopped by hook");
            }
            for (int i = 0; i < rpc; i++) {
                float *hi = hb + (size_t)i * (size_t)d;
                for (int e = 0; e < d; e++)
                    hi[e] = L->b_o ? L->b_o[e] : 0.0f;
                for (int hd = 0; hd < H; hd++)
                    hs_op_add(hi, res + ((size_t)i * (size_t)H + (size_t)hd) * (size_t)d,
                              (size_t)d);
            }
        }
        free(res), free(wo);
    }
    return HS_OK;
}

/* Copy b's rows: n, or text b's length in a packed pass. */
static int seg_rows(const hs_forward_ws *ws, int b, int n)
{
    return ws->n_seg > 0 ? ws->seg_len[b] : n;
}

/* The head mask (scale: where the attention did not apply it) and ablation by replacement
 * on the contexts ctx: (batch * n, A) of layer l: the hook at z (hs_head_mask_hook). */
static hs_status mask_heads(const hs_model_config *c, const hs_forward_opts *o, int l,
                            const float *hm, size_t hm_stride, int scale, float *ctx, int batch,
                            int n, hs_error *err)
{
    int A = hs_model_attn_width(c);
    size_t nA = (size_t)n * (size_t)A;
    hs_head_mask k = {hm, hm_stride, o && o->head_replace ? o->head_replace + (size_t)l * nA
                                                          : NULL, scale};
    if (!hm || (!k.scale && !k.replace))
        return HS_OK;
    hs_forward_opts mo = {.hook = hs_head_mask_hook, .hook_user = &k};
    return hs_hook_copies(c, &mo, HS_SITE_Z, l, ctx, batch, nA, n, A, A, n, err);
}

/* One call of block_run: its arguments, and what its stages share. */
typedef struct block_pass {
    const hs_model *m;
    const hs_layer *L;
    int l, n, batch;
    hs_forward_ws *ws;
    const float *hm; /* the head masks, a copy's hm_stride apart, or NULL */
    size_t hm_stride;
    const hs_forward_opts *o;
    hs_block_keep *keep; /* the backward's activations, or NULL */
    hs_error *err;
    unsigned hk;        /* the hook sites asked for (none in a kept layer) */
    int pre_in;         /* the sublayers read the normalised stream */
    int same;           /* the copies share copy 0's Q, K, V, probabilities and P V */
    int maps;           /* the layer's maps written out (an observer, the pattern, kept) */
    float *probs;       /* where: (n_head, n, n) */
    hs_rope rope;       /* this layer's rotary frequencies */
    hs_visibility vis;  /* and the keys its queries see */
    double *inv_freq;   /* its inverse frequencies: (HS_ROTARY_MAX_DIMS / 2) */
    double rot_scale;   /* the rotary scale by the length (a packed pass: the text's) */
} block_pass;

/* The attention's Q, K, V: the stream x (pre-norm: normalised into h first) projected into
 * qkv: (qrows, W), then queries and keys normalised where the family does. */
static void project_qkv(const block_pass *p, float *qkv, int qrows)
{
    const hs_model_config *c = &p->m->cfg;
    const hs_layer *L = p->L;
    hs_block_keep *keep = p->keep;
    float *x = p->ws->x, *h = p->ws->h;
    if (p->pre_in)
        norm(c, x, L->ln1_w, L->ln1_b, h, KEEP(xhat1), KEEP(rstd1), qrows);
    hs_op_linear(p->pre_in ? h : x, L->w_qkv, L->b_qkv, qkv, qrows, c->d_model, hs_qkv_width(c));
    if (c->arch->qk_norm) /* queries and keys normalised before they turn */
        hs_qk_normalise(c, L, qkv, qrows, KEEP(qk_xhat), KEEP(qk_rstd));
}

/* Copy b's probabilities (to p->probs where the maps are wanted) and P V on its nb rows of
 * qkv: (nb, W) into dst: (nb, A), under its head mask hm_b unless kept or shared: with the
 * pattern hooked, by latent attention or by the fused kernel. *bad_row as
 * hs_op_attn_probs gives it. */
static hs_status attend_rows(const block_pass *p, const float *qkv, float *dst, int b, int nb,
                             const float *hm_b, size_t *bad_row)
{
    const hs_model_config *c = &p->m->cfg;
    const hs_forward_ws *ws = p->ws;
    if (HOOKED(p->hk, HS_SITE_PATTERN))
        return attn_pattern_hooked(c, p->o, p->l, p->vis, qkv, p->probs, dst, nb, b, hm_b,
                                   bad_row, p->err);
    const float *hm_k = p->keep || p->same ? NULL : hm_b;
    if (c->arch->mla_kv_lora
            ? hs_mla_attn(c, p->L, &p->rope, p->inv_freq, p->vis, qkv, dst, nb, hm_k,
                          p->maps ? p->probs : NULL, bad_row,
                          ws->mla_pos_share && p->batch == 1 && !p->keep && !ws->n_seg
                              ? ws->mla_pos_share + (size_t)p->l * (size_t)c->n_head
                              : NULL)
            : hs_op_attn_fused(c, p->vis, qkv, dst, nb, hm_k, p->maps ? p->probs : NULL,
                               bad_row))
        return hs_fail(p->err, HS_E_NOMEM, "out of memory for the attention rows");
    return HS_OK;
}

/* Copy b's attention (a packed pass: text b's, nb rows from row r0) on qkv_all: (rows, W)
 * into its contexts in ws->ctx: queries and keys turned by position, the q, k and v hooks,
 * the probabilities and P V (the copies sharing them: copy 0's only, into h), checked and
 * observed; kept or shared, P V copied to the contexts for the mask to scale. */
static hs_status attend_copy(block_pass *p, float *qkv_all, int b, size_t r0, int nb)
{
    const hs_model_config *c = &p->m->cfg;
    const hs_arch *a = c->arch;
    const hs_forward_opts *o = p->o;
    hs_forward_ws *ws = p->ws;
    hs_block_keep *keep = p->keep;
    int l = p->l, W = hs_qkv_width(c), A = hs_model_attn_width(c), dh = c->d_head;
    int rot = p->rope.dims;
    float *qkv = qkv_all + (p->same ? 0 : r0 * (size_t)W);
    float *ctx_b = ws->ctx + r0 * (size_t)A;
    const float *hm_b = p->hm ? p->hm + (size_t)b * p->hm_stride : NULL;
    hs_status st;
    if (ws->n_seg > 0 && rot) /* each text's rotary scale by its own length */
        p->rot_scale = hs_op_rope_freqs_at(&p->rope, nb, p->inv_freq);
    if (!p->same || b == 0) {
        if (rot && !a->mla_kv_lora) { /* queries and keys turned by position (each copy
                                          from position 0); MLA: in hs_mla_attn */
            hs_op_rotary_scaled(qkv, nb, c->n_head, dh, W, rot, p->inv_freq, p->rot_scale, 0, 0);
            hs_op_rotary_scaled(qkv + A, nb, c->n_kv_head, dh, W, rot, p->inv_freq, p->rot_scale,
                                0, 0);
        }
        if (a->mla_kv_lora && (p->hk & (BEFORE_CTX & ~HS_SITE_BIT(HS_SITE_RESID_PRE))))
            return hs_fail(p->err, HS_E_UNSUPPORTED, "the hook sites q, k, v and pattern are "
                           "not available with latent attention");
        if ((p->hk & BEFORE_CTX) && (st = hs_hook_qkv(c, o, p->hk, l, qkv, b, nb, p->err)))
            return st;
        if (p->maps && !keep) {
            float *direct = trace_layer(o, l, c->n_head, nb);
            if (direct)
                p->probs = direct;
            if (!p->probs &&
                !(p->probs = ws->probs = hs_alloc_large(ws->probs_floats * sizeof *p->probs)))
                return hs_fail(p->err, HS_E_NOMEM, "out of memory for a layer's attention maps");
        }
        /* kept: P V as it is (the mask scales it below); same: the common P V into h
           (free until the output projection); otherwise this copy's masked context */
        float *dst = keep ? keep->ctx : p->same ? ws->h : ctx_b;
        size_t bad_row;
        if ((st = attend_rows(p, qkv, dst, b, nb, hm_b, &bad_row)))
            return st;
        st = o && o->allow_nonfinite ? HS_OK : check_probs(bad_row, l, nb, p->err);
        if (st)
            return st;
        if (o && o->on_attn && o->on_attn(o->user, l, p->probs, c->n_head, nb))
            return hs_fail(p->err, HS_E_ARG, "stopped by observer");
    }
    if ((keep && hm_b) || p->same) /* P V kept apart for the backward, or the copies'
                                      common one (in h): the mask scales it below */
        memcpy(ctx_b, keep ? keep->ctx : ws->h, (size_t)p->n * (size_t)A * sizeof *ws->h);
    return HS_OK;
}

/* The attention up to the contexts ws->ctx: (batch * n, A): Q, K, V from the stream and
 * each copy's (each text's) attention, or an encoder-decoder's self-attention, or a restart
 * at the contexts (ws->ctx_in) copied into every copy; then the head mask, the z hook and
 * the contexts' observer. */
static hs_status attention(block_pass *p)
{
    const hs_model_config *c = &p->m->cfg;
    const hs_arch *a = c->arch;
    hs_forward_ws *ws = p->ws;
    hs_block_keep *keep = p->keep;
    int l = p->l, n = p->n, batch = p->batch, A = hs_model_attn_width(c);
    size_t nA = (size_t)n * (size_t)A;
    float *qkv_all = keep ? keep->qkv : ws->qkv;
    hs_status st;
    /* attention: on the normalised stream (pre-norm) or on the stream itself; copies with
     * the same stream share one Q, K, V, one set of probabilities and one P V (copy 0's),
     * each copy's head mask then scaling its own context (xi P V, for masks of 0 and 1 the
     * same numbers as (xi P) V) */
    const float *resume = keep ? NULL : ws->ctx_in; /* a restart at the contexts */
    if (!resume)
        project_qkv(p, qkv_all, p->same ? n : batch * n);
    /* scores, softmax and P V a row block at a time (hs_op_attn_fused); the layer's maps
     * written out only where an observer or the backward pass wants them */
    if (a->enc_dec && (st = keep || batch > 1 || ws->out_rows
                                ? hs_fail(p->err, HS_E_UNSUPPORTED, "an encoder-decoder block "
                                          "runs one copy, without final rows or the "
                                          "backward's activations")
                                : encdec_self(p->m, l, ws, qkv_all, n, p->vis, p->hm, p->maps,
                                              p->o, p->err)))
        return st; /* T5: one copy (hs_forward_encdec), no backward in the block */
    /* a packed pass (hs_forward_packed): one attention a text, over its own rows; a restart
     * at the contexts (ws->ctx_in): none */
    int n_att = ws->n_seg > 0 ? ws->n_seg : batch;
    size_t r0 = 0; /* the copy's (the text's) first row */
    for (int b = 0; b < n_att && !a->enc_dec && !resume; r0 += (size_t)seg_rows(ws, b, n), b++)
        if ((st = attend_copy(p, qkv_all, b, r0, seg_rows(ws, b, n))))
            return st;
    if (!a->enc_dec && !resume && /* the mask where the attention did not apply it */
        (st = mask_heads(c, p->o, l, p->hm, p->hm_stride, p->same || keep, ws->ctx, batch, n,
                         p->err)))
        return st;
    for (int b = 0; resume && b < batch; b++) /* every copy from the contexts given */
        memcpy(ws->ctx + (size_t)b * nA, resume, nA * sizeof *ws->ctx);
    if (HOOKED(p->hk, HS_SITE_Z) &&
        (st = hs_hook_copies(c, p->o, HS_SITE_Z, l, ws->ctx, batch, nA, n, A, A, n, p->err)))
        return st;
    if (ws->on_ctx && batch == 1 && !keep && ws->on_ctx(ws->ctx_user, l, ws->ctx, n))
        return hs_fail(p->err, HS_E_ARG, "stopped by observer");
    return HS_OK;
}

/* The last layer's stream x and contexts ws->ctx cut to the rows wanted (ws->out_rows), a
 * copy's n_out_rows after another's. */
static void cut_to_out_rows(const hs_model_config *c, hs_forward_ws *ws, int batch, int n)
{
    int d = c->d_model, A = hs_model_attn_width(c), S = ws->n_out_rows;
    float *x = ws->x;
    for (int b = 0; b < batch; b++) /* to <= from (rows ascending): in place, in order */
        for (int i = 0; i < S; i++) {
            size_t from = (size_t)b * n + (size_t)ws->out_rows[i], to = (size_t)b * S + i;
            if (from != to) {
                memmove(x + to * d, x + from * d, (size_t)d * sizeof *x);
                memmove(ws->ctx + to * A, ws->ctx + from * A, (size_t)A * sizeof *x);
            }
        }
}

/* The attention's output h: (rows, d) from the contexts: the output projection (the result
 * hook), the post-attention norm, the attn_out hook (cn rows a copy), kept for the
 * backward. */
static hs_status attn_output(const block_pass *p, int rows, size_t cn)
{
    const hs_model_config *c = &p->m->cfg;
    int d = c->d_model, l = p->l, batch = p->batch, n = p->n;
    size_t nd = (size_t)n * (size_t)d;
    hs_block_keep *keep = p->keep;
    float *h = p->ws->h;
    hs_status st;
    if ((st = out_proj(c, p->L, p->o, p->hk, l, keep && !p->hm ? keep->ctx : p->ws->ctx, h, rows,
                       batch, n, p->err)))
        return st;
    if (c->arch->post_norms) /* the attention's output normalised before it is added */
        norm(c, h, p->L->post1_w, NULL, h, KEEP(xhat_pa), KEEP(rstd_pa), rows);
    if ((st = hs_hook_stream(c, p->o, p->hk, HS_SITE_ATTN_OUT, l, h, batch, cn, n, p->err)))
        return st;
    KEEP_COPY(attn_out, h);
    return HS_OK;
}

/* A parallel residual's end: x += attn(norm1 x) (in h) + mlp(norm2 x), the MLP's output
 * kept or hooked apart where asked, then the resid_post hook (cn rows a copy). */
static hs_status parallel_mlp(const block_pass *p, int rows, size_t cn)
{
    const hs_model_config *c = &p->m->cfg;
    const hs_layer *L = p->L;
    hs_forward_ws *ws = p->ws;
    hs_block_keep *keep = p->keep;
    size_t xd = (size_t)rows * (size_t)c->d_model;
    float *x = ws->x, *h = ws->h, *ff_pre = keep ? keep->ff : ws->ff;
    hs_status st;
    norm(c, x, L->ln2_w, L->ln2_b, ws->ctx, KEEP(xhat2), KEEP(rstd2), rows);
    if (keep && keep->mlp_out) { /* the MLP's output kept apart, then added */
        mlp(c, L, ws, ws->ctx, ff_pre, keep->mlp_out, rows, 0);
        hs_op_add(h, keep->mlp_out, xd);
    } else if (HOOKED(p->hk, HS_SITE_MLP_OUT)) { /* apart too, for the hook */
        mlp(c, L, ws, ws->ctx, ff_pre, ws->ctx, rows, 0);
        if ((st = hs_hook_stream(c, p->o, p->hk, HS_SITE_MLP_OUT, p->l, ws->ctx, p->batch, cn, p->n,
                              p->err)))
            return st;
        hs_op_add(h, ws->ctx, xd);
    } else {
        mlp(c, L, ws, ws->ctx, ff_pre, h, rows, 1);
    }
    hs_op_add(x, h, xd);
    return hs_hook_stream(c, p->o, p->hk, HS_SITE_RESID_POST, p->l, x, p->batch, cn, p->n, p->err);
}

/* A sequential block's end: x += the attention's output (in h), a decoder layer's
 * cross-attention, the MLP (or the experts) on the normalised stream, its output normalised
 * where the family does, kept and hooked (mlp_out), x += it, then the resid_post hook (cn
 * rows a copy). */
static hs_status sequential_mlp(const block_pass *p, int rows, size_t cn)
{
    const hs_model_config *c = &p->m->cfg;
    const hs_arch *a = c->arch;
    const hs_layer *L = p->L;
    hs_forward_ws *ws = p->ws;
    hs_block_keep *keep = p->keep;
    int l = p->l, n = p->n, batch = p->batch, pre = a->norm_place == HS_NORM_PRE;
    size_t nd = (size_t)n * (size_t)c->d_model, xd = (size_t)rows * (size_t)c->d_model;
    float *x = ws->x, *h = ws->h, *ff_pre = keep ? keep->ff : ws->ff;
    hs_status st;
    hs_op_add(x, h, xd);
    if (L->w_xqkv && (st = cross_attention(p->m, L, l, ws, n, p->o, p->err)))
        return st; /* a decoder layer of an encoder-decoder */

    /* MLP: on the normalised stream (pre-norm), or after normalising it in place (post) */
    if (p->pre_in)
        norm(c, x, L->ln2_w, L->ln2_b, h, KEEP(xhat2), KEEP(rstd2), rows);
    else if (!pre)
        norm(c, x, L->ln1_w, L->ln1_b, x, KEEP(xhat1), KEEP(rstd1), rows);
    if (L->moe_gate) { /* a mixture of experts (src/nn/moe.c) */
        int32_t *route = ws->moe_route && batch == 1 && !keep && rows == n
                             ? ws->moe_route + (size_t)l * (size_t)n * (size_t)a->moe_top_k
                             : NULL;
        if (hs_moe_forward(c, L, p->pre_in ? h : x, h, rows, route))
            return hs_fail(p->err, HS_E_NOMEM, "out of memory for the experts");
    } else {
        mlp(c, L, ws, p->pre_in ? h : x, ff_pre, h, rows, 0);
    }
    if (a->post_norms)
        norm(c, h, L->post2_w, NULL, h, KEEP(xhat_pm), KEEP(rstd_pm), rows);
    KEEP_COPY(mlp_out, h);
    if ((st = hs_hook_stream(c, p->o, p->hk, HS_SITE_MLP_OUT, l, h, batch, cn, n, p->err)))
        return st;
    hs_op_add(x, h, xd);
    if (!pre)
        norm(c, x, L->ln2_w, L->ln2_b, x, KEEP(xhat2), KEEP(rstd2), rows);
    return hs_hook_stream(c, p->o, p->hk, HS_SITE_RESID_POST, l, x, batch, cn, n, p->err);
}

/* hs_block_forward on layer l's float32 weights L: the resid_pre hook, the attention to the
 * contexts, the last layer's rows cut to those wanted, the attention's output, then the
 * MLP, in parallel with the attention or after it. */
static hs_status block_run(const hs_model *m, const hs_layer *L, int l, hs_forward_ws *ws, int n,
                           int batch, const float *hm, size_t hm_stride,
                           const hs_forward_opts *o, hs_block_keep *keep, hs_error *err)
{
    const hs_model_config *c = &m->cfg;
    const hs_arch *a = c->arch;
    unsigned hk = o && o->hook && !keep ? o->hook_sites : 0;
    double inv_freq[HS_ROTARY_MAX_DIMS / 2];
    block_pass p = {
        .m = m, .L = L, .l = l, .n = n, .batch = batch, .ws = ws, .hm = hm,
        .hm_stride = hm_stride, .o = o, .keep = keep, .err = err, .hk = hk,
        .pre_in = a->norm_place == HS_NORM_PRE && !a->no_pre_norm,
        .same = batch > 1 && ws->same_input && !keep && !(hk & BEFORE_CTX),
        .maps = keep || (o && o->on_attn) || HOOKED(hk, HS_SITE_PATTERN),
        .probs = keep ? keep->probs : ws->probs,
        .rope = hs_model_layer_rope(c, l), .vis = hs_model_layer_visibility(c, l),
        .inv_freq = inv_freq};
    p.rot_scale = p.rope.dims ? hs_op_rope_freqs_at(&p.rope, n, p.inv_freq) : 1.0;
    int rows = batch * n;
    size_t cn = (size_t)n; /* a copy's rows of the stream, before the last layer trims them */
    hs_status st;
    if ((st = hs_hook_stream(c, o, hk, HS_SITE_RESID_PRE, l, ws->x, batch, cn, n, err)))
        return st;
    if ((st = attention(&p)))
        return st;
    if (ws->stop_after_attn && !keep && l == c->n_layer - 1)
        return HS_OK;
    if (ws->out_rows && !keep && l == c->n_layer - 1) { /* onwards only the rows wanted */
        cut_to_out_rows(c, ws, batch, n);
        rows = batch * ws->n_out_rows;
        cn = (size_t)ws->n_out_rows;
    }
    if ((st = attn_output(&p, rows, cn)))
        return st;
    return a->parallel_residual ? parallel_mlp(&p, rows, cn) : sequential_mlp(&p, rows, cn);
}

hs_status hs_block_forward(const hs_model *m, int l, hs_forward_ws *ws, int n, int batch,
                           const float *hm, size_t hm_stride, const hs_forward_opts *o,
                           hs_block_keep *keep, hs_error *err)
{
    hs_layer L; /* the layer's float32 weights, converted by the weight cache if need be */
    hs_status st = hs_layer_get_linear(m, l, &L, err); /* or in their stored type */
    if (st)
        return st;
    st = block_run(m, &L, l, ws, n, batch, hm, hm_stride, o, keep, err);
    hs_layer_put(m, l);
    return st;
}

void hs_final_norm(const hs_model *m, const float *x, float *y, float *xhat, float *rstd,
                   int rows)
{
    const hs_model_config *c = &m->cfg;
    if (c->arch->norm_place == HS_NORM_PRE)
        norm(c, x, m->lnf_w, m->lnf_b, y, xhat, rstd, rows);
    else if (y != x)
        memcpy(y, x, (size_t)rows * (size_t)c->d_model * sizeof *y);
}
