/* Activation patching over pairs of prompts (include/headscope/patch.h, docs/patching.md):
 * the source run's site cached by a hook, the target run's stream entering each layer kept,
 * then for each layer one batched pass from that stream, copy c patching unit c's values
 * (at every position, or at one) with the source's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "headscope/forward.h"
#include "headscope/importance.h"
#include "headscope/patch.h"
#include "importance/importance_internal.h"
#include "importance/patch_internal.h"
#include "nn/block.h"
#include "nn/ops.h"

/* Rows of a batched pass (copies times tokens) at most. */
#define PATCH_ROWS 4096

hs_patch_opts hs_patch_opts_default(void)
{
    return (hs_patch_opts){.metric = HS_METRIC_LOGIT_DIFF, .site = HS_SITE_Z,
                           .resamples = 1000, .seed = 0x5eed};
}

double hs_patch_normalise(double clean, double corrupt, double patched, int noise)
{
    double den = clean - corrupt;
    if (den == 0)
        return NAN;
    return noise ? (clean - patched) / den : (patched - corrupt) / den;
}

int hs_patch_cache_hook(void *user, const hs_hook_call *k)
{
    hs_patch_cache *s = user;
    if (k->site != s->site || k->layer < 0)
        return 0;
    float *dst = s->buf + (size_t)k->layer * s->per_layer;
    for (int i = 0; i < k->rows; i++)
        memcpy(dst + (size_t)i * (size_t)k->cols, k->x + (size_t)i * (size_t)k->ld,
               (size_t)k->cols * sizeof *dst);
    return 0;
}

/* The patch of one pass at layer `layer`: copy c is unit (first + c) / n_pos at position
 * (first + c) % n_pos (every position unless each). src: that layer's cached values. */
typedef struct {
    hs_site site;
    int layer, first, n_pos, each;
    const float *src;
} patch_spec;

static int patch_hook(void *user, const hs_hook_call *k)
{
    const patch_spec *p = user;
    if (k->site != p->site || k->layer != p->layer)
        return 0;
    int idx = p->first + k->copy, u = idx / p->n_pos, pos = p->each ? idx % p->n_pos : -1;
    int r0 = 0, r1 = k->rows, c0 = 0, c1 = k->cols;
    if (k->site == HS_SITE_PATTERN) { /* head u's map: rows u*n.. */
        r0 = u * k->n, r1 = r0 + k->n;
        if (pos >= 0)
            r0 += pos, r1 = r0 + 1;
    } else {
        if (k->heads)
            c0 = u * k->head_width, c1 = c0 + k->head_width;
        if (pos >= 0)
            r0 = pos, r1 = pos + 1;
    }
    for (int r = r0; r < r1; r++)
        memcpy(k->x + (size_t)r * (size_t)k->ld + c0, p->src + (size_t)r * (size_t)k->cols + c0,
               (size_t)(c1 - c0) * sizeof(float));
    return 0;
}

double hs_patch_metric_of(const float *lg, int V, const hs_patch_pair *p, hs_patch_metric metric)
{
    if (metric == HS_METRIC_LOGIT_DIFF)
        return (double)lg[p->answer] - (double)lg[p->wrong];
    double mx = lg[0], s = 0;
    for (int v = 1; v < V; v++)
        mx = lg[v] > mx ? lg[v] : mx;
    for (int v = 0; v < V; v++)
        s += exp((double)lg[v] - mx);
    double logp = (double)lg[p->answer] - mx - log(s);
    return metric == HS_METRIC_PROB ? exp(logp) : -logp;
}

/* The metric of logits lg: (V) (hs_grad_taps.dlogits), its gradient written in their place:
 * logit-diff e_a - e_w; prob p_a (e_a - p); loss p - e_a. */
typedef struct {
    const hs_patch_pair *p;
    hs_patch_metric metric;
} metric_spec;

static double metric_grad(void *user, float *lg, int V)
{
    const metric_spec *ms = user;
    double v = hs_patch_metric_of(lg, V, ms->p, ms->metric);
    int a = ms->p->answer;
    if (ms->metric == HS_METRIC_LOGIT_DIFF) {
        memset(lg, 0, (size_t)V * sizeof *lg);
        lg[a] = 1.0f;
        lg[ms->p->wrong] -= 1.0f; /* 0 when wrong is the answer */
        return v;
    }
    double mx = lg[0], s = 0;
    for (int k = 1; k < V; k++)
        mx = lg[k] > mx ? lg[k] : mx;
    for (int k = 0; k < V; k++)
        s += exp((double)lg[k] - mx);
    double pa = exp((double)lg[a] - mx) / s;
    for (int k = 0; k < V; k++) {
        double pk = exp((double)lg[k] - mx) / s, dk = (k == a) - pk;
        lg[k] = (float)(ms->metric == HS_METRIC_PROB ? pa * dk : -dk);
    }
    return v;
}

/* Attribution of one pair (hs_grad_taps.on_grad): sum[(l, u, pos)] = (source - target) .
 * gradient over the unit's values (at one position, or all). */
typedef struct {
    metric_spec ms;
    hs_site site;
    const float *src, *tgt; /* (L, per_layer) cached; tgt where the pass keeps none */
    size_t per_layer;
    int U, P, each, n, heads, hw;
    const hs_patch_result *r;
    double *sum; /* (cells) */
} attr_spec;

static void attr_grad(void *user, int l, const float *act, const float *grad, int rows, int cols,
                      int ld)
{
    attr_spec *a = user;
    const float *src = a->src + (size_t)l * a->per_layer;
    const float *tgt = a->tgt ? a->tgt + (size_t)l * a->per_layer : NULL;
    size_t ald = act ? (size_t)ld : (size_t)cols; /* the cached target is packed */
    if (!act)
        act = tgt;
    for (int u = 0; u < a->U; u++)
        for (int p = 0; p < a->P; p++) {
            int r0 = 0, r1 = rows, c0 = 0, c1 = cols, pos = a->each ? p : -1;
            if (a->site == HS_SITE_PATTERN) {
                r0 = u * a->n, r1 = r0 + a->n;
                if (pos >= 0)
                    r0 += pos, r1 = r0 + 1;
            } else {
                if (a->heads)
                    c0 = u * a->hw, c1 = c0 + a->hw;
                if (pos >= 0)
                    r0 = pos, r1 = pos + 1;
            }
            double s = 0;
            for (int i = r0; i < r1; i++)
                for (int e = c0; e < c1; e++)
                    s += ((double)src[(size_t)i * cols + e] - act[(size_t)i * ald + e]) *
                         grad[(size_t)i * ld + e];
            a->sum[hs_patch_index(a->r, l, u, p)] = s;
        }
}

hs_status hs_patch_check_pairs(const hs_model_config *c, const hs_patch_pair *pairs, int n_pairs,
                             const hs_patch_opts *o, hs_error *err)
{
    static const unsigned ok = HS_SITE_BIT(HS_SITE_RESID_PRE) | HS_SITE_BIT(HS_SITE_Q) |
                               HS_SITE_BIT(HS_SITE_K) | HS_SITE_BIT(HS_SITE_V) |
                               HS_SITE_BIT(HS_SITE_PATTERN) | HS_SITE_BIT(HS_SITE_Z) |
                               HS_SITE_BIT(HS_SITE_ATTN_OUT) | HS_SITE_BIT(HS_SITE_MLP_OUT);
    if ((unsigned)o->site >= HS_SITE_COUNT || !(ok & HS_SITE_BIT(o->site)))
        return hs_fail(err, HS_E_ARG, "patching: site %d is not one that can be patched",
                       (int)o->site);
    if ((unsigned)o->metric > HS_METRIC_LOSS || o->resamples < 0 ||
        (unsigned)o->method > HS_PATCH_BOTH)
        return hs_fail(err, HS_E_ARG, "patching: bad metric, method or resample count");
    if (!c->has_lm_head)
        return hs_fail(err, HS_E_UNSUPPORTED, "patching: the model has no language-model head");
    if (n_pairs < 1)
        return hs_fail(err, HS_E_ARG, "patching: no pairs");
    for (int i = 0; i < n_pairs; i++) {
        const hs_patch_pair *p = &pairs[i];
        if (p->n < 1 || p->n > c->n_ctx)
            return hs_fail(err, HS_E_ARG, "pair %d: %d tokens (1 to %d)", i + 1, p->n, c->n_ctx);
        if (o->each_position && p->n != pairs[0].n)
            return hs_fail(err, HS_E_ARG, "pair %d: %d tokens, pair 1 has %d (positions each "
                           "needs the same number in every pair)", i + 1, p->n, pairs[0].n);
        if (p->pos < 0 || p->pos >= p->n)
            return hs_fail(err, HS_E_ARG, "pair %d: position %d outside its %d tokens", i + 1,
                           p->pos, p->n);
        if (p->answer < 0 || p->answer >= c->vocab_size ||
            (o->metric == HS_METRIC_LOGIT_DIFF && (p->wrong < 0 || p->wrong >= c->vocab_size)))
            return hs_fail(err, HS_E_ARG, "pair %d: answer or wrong id outside the vocabulary "
                           "(size %d)", i + 1, c->vocab_size);
    }
    return HS_OK;
}

/* Everything one pair needs, sized for n tokens and batches of B copies. */
typedef struct {
    float *src;      /* (L, per_layer) the source run's site */
    float *tgt;      /* (L, per_layer) the target run's (attribution at a site the gradient
                        pass keeps no activation of), or NULL */
    float *tgt_z;    /* (L, n, A) the target run's contexts, where the patched passes restart
                        at them (a site from z on), or NULL */
    double *sum, *g; /* (cells) attribution sums, (L, H) the gradient's head-mask part */
    hs_grad_scratch *grad; /* the gradient pass's buffers, kept from pair to pair */
    float *x_layers; /* (L, n, d) the target run's stream entering each layer */
    float *logits;   /* (B, V) */
    float *hidden;   /* (3 B, d): the copies' final rows, then hs_lm_logits's scratch */
    hs_forward_ws *ws;
} pair_bufs;

static void bufs_free(pair_bufs *b)
{
    free(b->src);
    free(b->tgt);
    free(b->tgt_z);
    free(b->sum);
    free(b->g);
    free(b->x_layers);
    free(b->logits);
    free(b->hidden);
    hs_forward_ws_free(b->ws);
}

/* Pair pi's attribution (a gradient pass on the target prompt, the taps at the site) into
 * dst[cell * n_pairs + pi] = m_target + the unit's sum; *m_tgt gets the metric. */
static hs_status attribute(const hs_model *m, const hs_patch_pair *p, int pi,
                           const hs_patch_opts *o, const int32_t *tgt_ids, pair_bufs *b,
                           size_t per_layer, hs_patch_result *r, double *dst, double *m_tgt,
                           hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    attr_spec as = {{p, o->metric}, o->site, b->src, b->tgt, per_layer, r->n_units, r->n_pos,
                    o->each_position, p->n, hs_site_head_count(c, o->site),
                    c->d_head, r, b->sum};
    hs_grad_taps taps = {p->pos, (int)o->site, metric_grad, attr_grad, &as};
    hs_loss_input in = {.ids = tgt_ids, .n = p->n,
                        .kind = c->arch->head == HS_HEAD_MLM ? HS_LOSS_MLM : HS_LOSS_LM};
    hs_status st = hs_gradient_tapped(m, &in, &taps, b->grad, b->g, m_tgt, err);
    if (st)
        return st;
    size_t cells = (size_t)r->n_layer * (size_t)r->n_units * (size_t)r->n_pos;
    for (size_t k = 0; k < cells; k++)
        dst[k * (size_t)r->n_pairs + (size_t)pi] = *m_tgt + b->sum[k];
    r->passes += hs_patch_plain_passes(c, p->n) +
                 hs_patch_backward_flops(c, p->n) / hs_patch_forward_flops(c, p->n);
    return HS_OK;
}

/* The metric of each of the batch copies' final rows b->hidden: (batch, d) (the last layer
 * trimmed to the metric's row) into out[k * stride]; a logit difference reads two logits. */
static void copies_metric(const hs_model *m, pair_bufs *b, int batch, const hs_patch_pair *p,
                          hs_patch_metric metric, double *out, size_t stride)
{
    const hs_model_config *c = hs_model_config_of(m);
    int V = c->vocab_size, d = c->d_model;
    float *scratch = b->hidden + (size_t)batch * (size_t)d;
    if (metric != HS_METRIC_LOGIT_DIFF) {
        hs_lm_logits(m, b->hidden, NULL, batch, scratch, b->logits);
        for (int k = 0; k < batch; k++)
            out[(size_t)k * stride] = hs_patch_metric_of(b->logits + (size_t)k * V, V, p, metric);
        return;
    }
    int32_t ids[2] = {p->answer, p->wrong};
    const float *t = hs_head_transform(m, b->hidden, scratch, NULL, NULL, NULL, batch);
    hs_head_decode_ids(m, t, batch, ids, 2, b->logits);
    for (int k = 0; k < batch; k++)
        out[(size_t)k * stride] = (double)b->logits[2 * k] - (double)b->logits[2 * k + 1];
}

/* Every layer's exact patches of pair pi: one batched pass a layer (B copies at most) from
 * the target's stream entering it (at a site from z on, from the target's contexts there),
 * copy c patching unit c / P at position c % P; the last layer's output projection and MLP
 * on the metric's row only, unless the site comes after that cut in the last layer. */
static hs_status patch_layers(const hs_model *m, const hs_patch_pair *p, int pi,
                              const hs_patch_opts *o, const int32_t *tgt_ids, pair_bufs *b,
                              size_t per_layer, int B, hs_patch_result *r, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    int L = c->n_layer, V = c->vocab_size, n = p->n, d = c->d_model;
    int P = r->n_pos, total = r->n_units * P;
    size_t nA = (size_t)n * (size_t)hs_model_attn_width(c);
    int32_t row = p->pos;
    /* the sites the block meets before it trims the last layer (resid_pre to z) */
    int before_cut = hs_sites[o->site].heads != HS_HEADS_NONE || o->site == HS_SITE_RESID_PRE;
    hs_patch_start start = b->tgt_z                       ? HS_PATCH_START_CTX
                           : o->site <= HS_SITE_PATTERN ? HS_PATCH_START_LAYER
                                                        : HS_PATCH_START_SHARED;
    double unit = hs_patch_forward_flops(c, n);
    for (int l = 0; l < L; l++)
        for (int first = 0; first < total; first += B) {
            int batch = total - first < B ? total - first : B, trim = before_cut || l < L - 1;
            patch_spec ps = {o->site, l, first, P, o->each_position, b->src + (size_t)l * per_layer};
            hs_forward_opts po = {.logits = b->logits, .logit_rows = &row, .n_logit_rows = 1,
                                  .start_layer = l,
                                  .x_start = b->x_layers + (size_t)l * (size_t)n * (size_t)d,
                                  .batch = batch, .hook = patch_hook, .hook_user = &ps,
                                  .hook_sites = HS_SITE_BIT(o->site)};
            if (trim) { /* the last layer on the metric's row, the LM head taken here */
                po.logits = NULL, po.logit_rows = NULL, po.n_logit_rows = 0;
                po.hidden = b->hidden;
                b->ws->out_rows = &row, b->ws->n_out_rows = 1;
            }
            b->ws->ctx_start = b->tgt_z ? b->tgt_z + (size_t)l * nA : NULL;
            hs_status st = hs_forward(m, tgt_ids, NULL, n, &po, b->ws, err);
            b->ws->out_rows = NULL, b->ws->n_out_rows = 0, b->ws->ctx_start = NULL;
            if (st)
                return st;
            size_t at = (size_t)hs_patch_index(r, l, 0, 0) + (size_t)first;
            double *out = r->patched + at * (size_t)r->n_pairs + (size_t)pi;
            if (trim)
                copies_metric(m, b, batch, p, o->metric, out, (size_t)r->n_pairs);
            for (int k = 0; k < batch && !trim; k++)
                out[(size_t)k * r->n_pairs] =
                    hs_patch_metric_of(b->logits + (size_t)k * (size_t)V, V, p, o->metric);
            int cols = trim && o->metric == HS_METRIC_LOGIT_DIFF ? 2 : V;
            r->passes += (hs_patch_pass_flops(c, n, l, batch, start, trim ? 1 : n) +
                          hs_patch_head_flops(c, batch, cols)) / unit;
        }
    return HS_OK;
}

/* The target run's hook: tc[0] its site (when kept), tc[1] its contexts (when kept). */
static int target_hook(void *user, const hs_hook_call *k)
{
    hs_patch_cache *tc = user;
    for (int i = 0; i < 2; i++)
        if (tc[i].buf)
            hs_patch_cache_hook(&tc[i], k);
    return 0;
}

/* One pair: the source run (its site cached), the target run (its stream entering each
 * layer, for the exact patches; its site, for attribution where the gradient pass keeps
 * none), then the exact patches and the attribution. */
static hs_status patch_pair(const hs_model *m, const hs_patch_pair *p, int pi,
                            const hs_patch_opts *o, hs_grad_scratch *grad, hs_patch_result *r,
                            hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    int L = c->n_layer, V = c->vocab_size, n = p->n, d = c->d_model, dims[3];
    int rank = hs_site_shape(c, o->site, n, dims);
    size_t per_layer = (size_t)dims[0] * (size_t)dims[1] * (size_t)(rank == 3 ? dims[2] : 1);
    size_t cells = (size_t)L * (size_t)r->n_units * (size_t)r->n_pos;
    int exact = o->method != HS_PATCH_ATTRIBUTION, attr = o->method != HS_PATCH_EXACT;
    int unkept = hs_sites[o->site].heads == HS_HEADS_NONE; /* resid_pre, attn_out, mlp_out */
    int total = r->n_units * r->n_pos, B = PATCH_ROWS / n < 1 ? 1 : PATCH_ROWS / n;
    B = B > total ? total : B;
    pair_bufs b = {.grad = grad};
    hs_status st = HS_OK;
    b.src = malloc((size_t)L * per_layer * sizeof *b.src);
    b.logits = malloc((size_t)B * (size_t)V * sizeof *b.logits);
    b.hidden = malloc(3 * (size_t)B * (size_t)d * sizeof *b.hidden);
    int bad = !b.src || !b.logits || !b.hidden;
    if (exact)
        bad |= !(b.x_layers = malloc((size_t)L * (size_t)n * (size_t)d * sizeof *b.x_layers));
    if (exact && o->site >= HS_SITE_Z) /* the patched passes restart at the contexts */
        bad |= !(b.tgt_z = malloc((size_t)L * (size_t)n * (size_t)hs_model_attn_width(c) *
                                  sizeof *b.tgt_z));
    if (attr) {
        bad |= !(b.sum = malloc(cells * sizeof *b.sum));
        bad |= !(b.g = malloc((size_t)L * (size_t)c->n_head * sizeof *b.g));
        if (unkept)
            bad |= !(b.tgt = malloc((size_t)L * per_layer * sizeof *b.tgt));
    }
    if (bad) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory for pair %d's activations", pi + 1);
        goto done;
    }
    if ((st = hs_forward_ws_new_batch(m, n, B, &b.ws, err)))
        goto done;
    const int32_t *src_ids = o->noise ? p->corrupt : p->clean;
    const int32_t *tgt_ids = o->noise ? p->clean : p->corrupt;
    int32_t row = p->pos;
    hs_patch_cache sc = {o->site, b.src, per_layer};
    hs_forward_opts so = {.logits = b.logits, .logit_rows = &row, .n_logit_rows = 1,
                          .hook = hs_patch_cache_hook, .hook_user = &sc,
                          .hook_sites = HS_SITE_BIT(o->site)};
    if ((st = hs_forward(m, src_ids, NULL, n, &so, b.ws, err)))
        goto done;
    double m_src = hs_patch_metric_of(b.logits, V, p, o->metric), m_tgt = 0;
    double plain = hs_patch_plain_passes(c, n);
    r->passes += plain;
    if (exact || b.tgt) {
        hs_patch_cache tc[2] = {{o->site, b.tgt, per_layer},
                                {HS_SITE_Z, b.tgt_z, (size_t)n * (size_t)hs_model_attn_width(c)}};
        hs_forward_opts to = {.logits = b.logits, .logit_rows = &row, .n_logit_rows = 1,
                              .x_layers = b.x_layers, .hook = target_hook, .hook_user = tc,
                              .hook_sites = (b.tgt ? HS_SITE_BIT(o->site) : 0) |
                                            (b.tgt_z ? HS_SITE_BIT(HS_SITE_Z) : 0)};
        if ((st = hs_forward(m, tgt_ids, NULL, n, &to, b.ws, err)))
            goto done;
        m_tgt = hs_patch_metric_of(b.logits, V, p, o->metric);
        r->passes += plain;
    }
    if (attr && (st = attribute(m, p, pi, o, tgt_ids, &b, per_layer, r,
                                exact ? r->patched_attr : r->patched, exact ? &(double){0} : &m_tgt,
                                err)))
        goto done;
    r->clean[pi] = o->noise ? m_tgt : m_src;
    r->corrupt[pi] = o->noise ? m_src : m_tgt;
    if (exact)
        st = patch_layers(m, p, pi, o, tgt_ids, &b, per_layer, B, r, err);
done:
    if (st)
        hs_error_prefix(err, "pair %d", pi + 1);
    bufs_free(&b);
    return st;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

hs_status hs_patch_summarise(const hs_patch_result *r, const double *patched, double *effect,
                           double *ci_lo, double *ci_hi, const hs_patch_opts *o, hs_error *err)
{
    int N = r->n_pairs, cells = r->n_layer * r->n_units * r->n_pos, R = o->resamples;
    double c1 = 0, c0 = 0;
    for (int i = 0; i < N; i++)
        c1 += r->clean[i], c0 += r->corrupt[i];
    for (int k = 0; k < cells; k++) {
        double s = 0;
        for (int i = 0; i < N; i++)
            s += patched[(size_t)k * N + i];
        effect[k] = hs_patch_normalise(c1 / N, c0 / N, s / N, o->noise);
        ci_lo[k] = ci_hi[k] = NAN;
    }
    if (!R)
        return HS_OK;
    int *w = calloc((size_t)N, sizeof *w);
    double *eff = malloc((size_t)R * (size_t)cells * sizeof *eff), *col = malloc((size_t)R * sizeof *col);
    if (!w || !eff || !col) {
        free(w), free(eff), free(col);
        return hs_fail(err, HS_E_NOMEM, "out of memory for the bootstrap");
    }
    uint64_t state = o->seed;
    for (int s = 0; s < R; s++) {
        memset(w, 0, (size_t)N * sizeof *w);
        for (int i = 0; i < N; i++)
            w[hs_rand_below(&state, (uint64_t)N)]++;
        double b1 = 0, b0 = 0;
        for (int i = 0; i < N; i++)
            b1 += w[i] * r->clean[i], b0 += w[i] * r->corrupt[i];
        for (int k = 0; k < cells; k++) {
            double bp = 0;
            for (int i = 0; i < N; i++)
                bp += w[i] * patched[(size_t)k * N + i];
            eff[(size_t)k * R + s] = hs_patch_normalise(b1 / N, b0 / N, bp / N, o->noise);
        }
    }
    for (int k = 0; k < cells; k++) {
        int got = 0;
        for (int s = 0; s < R; s++)
            if (!isnan(eff[(size_t)k * R + s]))
                col[got++] = eff[(size_t)k * R + s];
        if (!got)
            continue;
        qsort(col, (size_t)got, sizeof *col, cmp_double);
        int lo = (int)floor(0.025 * got), hi = (int)ceil(0.975 * got) - 1;
        ci_lo[k] = col[lo];
        ci_hi[k] = col[hi < lo ? lo : hi];
    }
    free(w), free(eff), free(col);
    return HS_OK;
}

/* Pearson's r of a and b over the indices where both are finite; NaN when undefined. */
static double pearson(const double *a, const double *b, size_t count)
{
    double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    size_t k = 0;
    for (size_t i = 0; i < count; i++)
        if (isfinite(a[i]) && isfinite(b[i]))
            sa += a[i], sb += b[i], k++;
    if (k < 2)
        return NAN;
    sa /= (double)k, sb /= (double)k;
    for (size_t i = 0; i < count; i++)
        if (isfinite(a[i]) && isfinite(b[i])) {
            double x = a[i] - sa, y = b[i] - sb;
            saa += x * x, sbb += y * y, sab += x * y;
        }
    return saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : NAN;
}

void hs_patch_result_free(hs_patch_result *r)
{
    if (!r)
        return;
    free(r->clean);
    free(r->corrupt);
    free(r->patched);
    free(r->effect);
    free(r->ci_lo);
    free(r->ci_hi);
    free(r->patched_attr);
    free(r->effect_attr);
    free(r->ci_lo_attr);
    free(r->ci_hi_attr);
    free(r);
}

hs_status hs_patch_result_new(int n_layer, int n_units, int n_pos, int n_pairs, int both,
                              hs_patch_result **out, hs_error *err)
{
    hs_patch_result *r = calloc(1, sizeof *r);
    *out = NULL;
    if (!r)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    *r = (hs_patch_result){.n_layer = n_layer, .n_units = n_units, .n_pos = n_pos,
                           .n_pairs = n_pairs, .correlation = NAN};
    size_t cells = (size_t)n_layer * (size_t)n_units * (size_t)n_pos;
    r->clean = malloc((size_t)n_pairs * sizeof(double));
    r->corrupt = malloc((size_t)n_pairs * sizeof(double));
    r->patched = malloc(cells * (size_t)n_pairs * sizeof(double));
    r->effect = malloc(cells * sizeof(double));
    r->ci_lo = malloc(cells * sizeof(double));
    r->ci_hi = malloc(cells * sizeof(double));
    if (both) {
        r->patched_attr = malloc(cells * (size_t)n_pairs * sizeof(double));
        r->effect_attr = malloc(cells * sizeof(double));
        r->ci_lo_attr = malloc(cells * sizeof(double));
        r->ci_hi_attr = malloc(cells * sizeof(double));
    }
    if (!r->clean || !r->corrupt || !r->patched || !r->effect || !r->ci_lo || !r->ci_hi ||
        (both && (!r->patched_attr || !r->effect_attr || !r->ci_lo_attr || !r->ci_hi_attr))) {
        hs_patch_result_free(r);
        return hs_fail(err, HS_E_NOMEM, "out of memory for %d pairs' patched metrics", n_pairs);
    }
    *out = r;
    return HS_OK;
}

hs_status hs_patch_result_summarise(hs_patch_result *r, const hs_patch_opts *o, hs_error *err)
{
    size_t cells = (size_t)r->n_layer * (size_t)r->n_units * (size_t)r->n_pos;
    int both = r->patched_attr != NULL;
    hs_status st;
    if ((st = hs_patch_summarise(r, r->patched, r->effect, r->ci_lo, r->ci_hi, o, err)) ||
        (both && (st = hs_patch_summarise(r, r->patched_attr, r->effect_attr, r->ci_lo_attr,
                                          r->ci_hi_attr, o, err))))
        return st;
    if (both)
        r->correlation = pearson(r->effect, r->effect_attr, cells);
    return HS_OK;
}

hs_status hs_patch_run(const hs_model *m, const hs_patch_pair *pairs, int n_pairs,
                       const hs_patch_opts *o, hs_patch_result **out, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    *out = NULL;
    hs_status st = hs_patch_check_pairs(c, pairs, n_pairs, o, err);
    if (st)
        return st;
    int U = hs_site_head_count(c, o->site), both = o->method == HS_PATCH_BOTH;
    hs_patch_result *r = NULL;
    if ((st = hs_patch_result_new(c->n_layer, U ? U : 1, o->each_position ? pairs[0].n : 1,
                                  n_pairs, both, &r, err)))
        return st;
    hs_grad_scratch grad = {0}; /* fresh pages cost a gradient pass a third of its time */
    for (int i = 0; i < n_pairs; i++) {
        if ((st = patch_pair(m, &pairs[i], i, o, &grad, r, err)))
            goto fail;
        if (o->progress && o->progress(o->progress_user, i + 1, n_pairs)) {
            st = hs_fail(err, HS_E_ARG, "stopped");
            goto fail;
        }
    }
    if ((st = hs_patch_result_summarise(r, o, err)))
        goto fail;
    hs_grad_scratch_free(&grad);
    *out = r;
    return HS_OK;
fail:
    hs_grad_scratch_free(&grad);
    hs_patch_result_free(r);
    return st;
}
