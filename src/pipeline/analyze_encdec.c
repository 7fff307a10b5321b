/* The analysis of an encoder-decoder (T5) on a text and a target (encdec_result.h): one
 * teacher-forced pass recording the three kinds of maps, their per-head metrics and each
 * layer's diversity, the decoder's loss, then the heads' zero ablation, gradient importance,
 * Michel et al.'s pruning rounds over both kinds and each kind's pruning candidates. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "headscope/forward.h"
#include "headscope/importance.h"
#include "nn/ops.h"
#include "pipeline/encdec_result.h"
#include "pipeline/pipeline.h"

static const char *const kind_names[HS_ED_KINDS] = {"encoder", "decoder", "cross"};
static const char *const kind_prefixes[HS_ED_KINDS] = {"enc", "dec", "cross"};

const char *hs_encdec_kind_name(int kind)
{
    return kind >= 0 && kind < HS_ED_KINDS ? kind_names[kind] : "unknown";
}

const char *hs_encdec_kind_prefix(int kind)
{
    return kind >= 0 && kind < HS_ED_KINDS ? kind_prefixes[kind] : "?";
}

static void free_strings(char **v, int n)
{
    for (int i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

void hs_encdec_result_free(hs_encdec_result *r)
{
    if (!r)
        return;
    for (int t = 0; t < HS_ED_KINDS; t++) {
        hs_encdec_kind *k = &r->kinds[t];
        free(k->maps);
        free(k->entropy);
        free(k->scores);
        free(k->ablation);
        free(k->gradient);
        free(k->gradient_raw);
        free(k->diversity);
        free(k->candidates);
    }
    free(r->dec_ids);
    free(r->target_ids);
    free_strings(r->dec_tokens, r->n_dec);
    free_strings(r->dec_display, r->n_dec);
    free_strings(r->target_tokens, r->n_dec);
    free(r->target);
    free(r->prune_order);
    free(r->prune_loss);
    free(r);
}

static hs_status nomem(hs_error *err)
{
    return hs_fail(err, HS_E_NOMEM, "out of memory");
}

/* The kinds' shapes and arrays. */
static hs_status alloc_kinds(hs_encdec_result *r, const hs_model_config *c, hs_error *err)
{
    int L_enc = c->n_enc_layer, L_dec = c->n_layer - c->n_enc_layer, H = c->n_head;
    int layers[HS_ED_KINDS] = {L_enc, L_dec, L_dec}, first[HS_ED_KINDS] = {0, L_enc, L_enc};
    int rows[HS_ED_KINDS] = {r->n_enc, r->n_dec, r->n_dec};
    int cols[HS_ED_KINDS] = {r->n_enc, r->n_dec, r->n_enc};
    for (int t = 0; t < HS_ED_KINDS; t++) {
        hs_encdec_kind *k = &r->kinds[t];
        size_t nh = (size_t)layers[t] * (size_t)H, cells;
        k->n_layer = layers[t];
        k->first_layer = first[t];
        k->rows = rows[t];
        k->cols = cols[t];
        if (hs_mul_size(nh, (size_t)rows[t] * (size_t)cols[t], &cells) ||
            hs_mul_size(cells, sizeof(float), &cells))
            return nomem(err);
        k->maps = malloc(cells);
        k->entropy = calloc(nh, sizeof *k->entropy);
        k->scores = calloc(nh, sizeof *k->scores);
        k->ablation = malloc(nh * sizeof *k->ablation);
        k->gradient = malloc(nh * sizeof *k->gradient);
        k->gradient_raw = malloc(nh * sizeof *k->gradient_raw);
        k->diversity = malloc((size_t)layers[t] * sizeof *k->diversity);
        k->candidates = malloc(nh * sizeof *k->candidates);
        if (!k->maps || !k->entropy || !k->scores || !k->ablation || !k->gradient ||
            !k->gradient_raw || !k->diversity || !k->candidates)
            return nomem(err);
        for (size_t i = 0; i < nh; i++)
            k->ablation[i] = k->gradient[i] = k->gradient_raw[i] = NAN;
    }
    return HS_OK;
}

/* The pass's observers: each layer's maps into its kind's array. */
static int on_self(void *user, int layer, const float *probs, int n_head, int n)
{
    hs_encdec_result *r = user;
    int enc = layer < r->kinds[HS_ED_DEC].first_layer;
    hs_encdec_kind *k = &r->kinds[enc ? HS_ED_ENC : HS_ED_DEC];
    size_t per = (size_t)n_head * (size_t)n * (size_t)n;
    memcpy(k->maps + (size_t)(layer - k->first_layer) * per, probs, per * sizeof *probs);
    return 0;
}

static int on_cross(void *user, int layer, const float *probs, int n_head, int nd, int ne)
{
    hs_encdec_kind *k = &((hs_encdec_result *)user)->kinds[HS_ED_CROSS];
    size_t per = (size_t)n_head * (size_t)nd * (size_t)ne;
    memcpy(k->maps + (size_t)(layer - k->first_layer) * per, probs, per * sizeof *probs);
    return 0;
}

static void detect_nan(hs_detect *d)
{
    double *f[] = {&d->prev_token, &d->self, &d->first_token, &d->sep, &d->duplicate,
                   &d->induction, &d->next_token, &d->cls, &d->punct, &d->other_segment,
                   &d->sink};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        *f[i] = NAN;
    for (int i = 0; i < HS_DETECT_EXTRA; i++)
        d->extra[i] = d->extra_param[i] = NAN;
}

/* A cross-attention map (nd, ne): entropy over the ne keys every row sees, the mass on the
 * first encoder token, on the encoder's </s> and on the encoder tokens equal to the decoder
 * query's input token; the positional detectors are not defined (NaN). */
static void cross_metrics(const float *p, int nd, int ne, const int32_t *dec, const int32_t *enc,
                          int32_t eos, hs_entropy *e, hs_detect *d)
{
    double h = 0, hn = 0, mx = 0, first = 0, eos_m = 0, same = 0;
    int has_eos = 0, same_rows = 0;
    for (int j = 0; j < ne; j++)
        has_eos |= enc[j] == eos;
    for (int i = 0; i < nd; i++) {
        const float *row = p + (size_t)i * (size_t)ne;
        double hi = 0, m = 0, s = 0, em = 0;
        int hit = 0;
        for (int j = 0; j < ne; j++) {
            double v = row[j];
            if (v > 0)
                hi -= v * log(v);
            m = v > m ? v : m;
            if (enc[j] == eos)
                em += v;
            if (enc[j] == dec[i]) {
                s += v;
                hit = 1;
            }
        }
        h += hi;
        hn += ne > 1 ? hi / log((double)ne) : 0;
        mx += m;
        first += row[0];
        eos_m += em;
        same += s;
        same_rows += hit;
    }
    e->nats = h / nd;
    e->bits = e->nats / log(2.0);
    e->norm = ne > 1 ? hn / nd : NAN;
    e->rowmax = mx / nd;
    e->rows = nd;
    detect_nan(d);
    d->first_token = first / nd;
    d->sep = has_eos ? eos_m / nd : NAN;
    d->duplicate = same_rows ? same / same_rows : NAN;
}

/* (1/H^2) sum_a sum_b ||A_a - A_b||_F over one layer's H maps of cells values each. */
static double layer_diversity(const float *maps, int H, size_t cells)
{
    double total = 0;
    for (int a = 0; a < H; a++)
        for (int b = a + 1; b < H; b++) {
            const float *x = maps + (size_t)a * cells, *y = maps + (size_t)b * cells;
            double s = 0;
            for (size_t i = 0; i < cells; i++) {
                double d = (double)x[i] - (double)y[i];
                s += d * d;
            }
            total += 2 * sqrt(s);
        }
    return total / ((double)H * H);
}

/* Every kind's per-head metrics and per-layer diversity. */
static hs_status head_metrics(hs_encdec_result *r, const int32_t *enc_ids, int H, hs_error *err)
{
    for (int t = 0; t < HS_ED_KINDS; t++) {
        hs_encdec_kind *k = &r->kinds[t];
        size_t cells = (size_t)k->rows * (size_t)k->cols;
        for (int l = 0; l < k->n_layer; l++) {
            const float *maps = k->maps + (size_t)l * (size_t)H * cells;
            size_t at = (size_t)l * (size_t)H;
            k->diversity[l] = layer_diversity(maps, H, cells);
            if (t == HS_ED_CROSS) {
                for (int h = 0; h < H; h++)
                    cross_metrics(maps + (size_t)h * cells, k->rows, k->cols, r->dec_ids,
                                  enc_ids, r->eos_id, &k->entropy[at + h], &k->scores[at + h]);
                continue;
            }
            hs_visibility vis = hs_vis_from_causal(t == HS_ED_DEC);
            hs_detect_seq seq = {.ids = t == HS_ED_ENC ? enc_ids : r->dec_ids, .cls_id = -1,
                                 .sep_id = r->eos_id};
            hs_status st = hs_entropy_compute(maps, H, k->rows, vis, NULL, k->entropy + at, err);
            if (!st)
                st = hs_detect_compute(maps, H, k->rows, vis, &seq, NULL, k->scores + at, err);
            if (st)
                return st;
        }
    }
    return HS_OK;
}

/* The decoder's input and the target's strings. */
static hs_status target_input(hs_encdec_result *r, const hs_model *m,
                              const hs_analyze_target *tgt, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    const hs_tokenizer *tok = hs_model_tokenizer(m);
    int n = r->n_dec;
    r->dec_ids = malloc((size_t)n * sizeof *r->dec_ids);
    r->target_ids = malloc((size_t)n * sizeof *r->target_ids);
    r->dec_tokens = calloc((size_t)n, sizeof *r->dec_tokens);
    r->dec_display = calloc((size_t)n, sizeof *r->dec_display);
    r->target_tokens = calloc((size_t)n, sizeof *r->target_tokens);
    if (tgt->text && !(r->target = strdup(tgt->text)))
        return nomem(err);
    if (!r->dec_ids || !r->target_ids || !r->dec_tokens || !r->dec_display || !r->target_tokens)
        return nomem(err);
    memcpy(r->target_ids, tgt->ids, (size_t)n * sizeof *r->target_ids);
    r->dec_ids[0] = c->decoder_start_id; /* teacher forcing */
    memcpy(r->dec_ids + 1, tgt->ids, (size_t)(n - 1) * sizeof *r->dec_ids);
    r->eos_id = hs_special_id(tok, "</s>");
    for (int i = 0; i < n; i++) {
        char buf[256];
        for (int s = 0; s < 2; s++) {
            int32_t id = s ? r->target_ids[i] : r->dec_ids[i];
            const char *raw = tok ? hs_tokenizer_token(tok, id) : NULL;
            if (!raw) {
                snprintf(buf, sizeof buf, "#%d", (int)id);
                raw = buf;
            }
            if (!((s ? r->target_tokens : r->dec_tokens)[i] = strdup(raw)))
                return nomem(err);
        }
        if (tok)
            hs_tokenizer_display(tok, r->dec_ids[i], buf, sizeof buf);
        else
            snprintf(buf, sizeof buf, "%s", r->dec_tokens[i]);
        if (!(r->dec_display[i] = strdup(buf)))
            return nomem(err);
    }
    return HS_OK;
}

/* The recorded pass and the decoder's loss. */
static hs_status run_forward(hs_encdec_result *r, const hs_model *m, const int32_t *enc_ids,
                             hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    float *logits = malloc((size_t)r->n_dec * (size_t)c->vocab_size * sizeof *logits);
    if (!logits)
        return nomem(err);
    hs_forward_opts fo = {.on_attn = on_self, .on_cross = on_cross, .user = r, .logits = logits};
    hs_status st = hs_forward_encdec(m, enc_ids, r->n_enc, r->dec_ids, r->n_dec, &fo, NULL, err);
    if (!st) {
        double sum = 0;
        for (int i = 0; i < r->n_dec; i++) {
            const float *row = logits + (size_t)i * (size_t)c->vocab_size;
            sum += hs_op_log_sum_exp(row, c->vocab_size) - (double)row[r->target_ids[i]];
        }
        r->loss = sum / r->n_dec;
    }
    free(logits);
    return st;
}

/* Model-ordered (n_layer, n_head) values of the self-attention heads and of the cross heads
 * into the kinds' per-head arrays. */
static void spread(hs_encdec_result *r, int H, const double *self, const double *cross,
                   int ablation)
{
    for (int t = 0; t < HS_ED_KINDS; t++) {
        hs_encdec_kind *k = &r->kinds[t];
        const double *src = (t == HS_ED_CROSS ? cross : self) + (size_t)k->first_layer * H;
        double *dst = ablation ? k->ablation : k->gradient_raw;
        memcpy(dst, src, (size_t)k->n_layer * (size_t)H * sizeof *dst);
    }
}

/* |g| and |g| over the L2 norm of its layer's heads of the same kind. */
static void gradient_norms(hs_encdec_result *r, int H)
{
    for (int t = 0; t < HS_ED_KINDS; t++) {
        hs_encdec_kind *k = &r->kinds[t];
        for (int l = 0; l < k->n_layer; l++) {
            double ss = 0, *raw = k->gradient_raw + (size_t)l * H;
            for (int h = 0; h < H; h++) {
                raw[h] = fabs(raw[h]);
                ss += raw[h] * raw[h];
            }
            for (int h = 0; h < H; h++)
                k->gradient[(size_t)l * H + h] = ss > 0 ? raw[h] / sqrt(ss) : 0;
        }
    }
}

static int cmp_abs(const void *x, const void *y, void *user)
{
    const double *d = user;
    double a = fabs(d[*(const int *)x]), b = fabs(d[*(const int *)y]);
    return a < b ? -1 : a > b ? 1 : *(const int *)x - *(const int *)y;
}

/* Each kind's heads with |ablation| < tol, by |ablation| ascending (ties: lower index). */
static void candidates(hs_encdec_result *r, int H, double tol)
{
    for (int t = 0; t < HS_ED_KINDS; t++) {
        hs_encdec_kind *k = &r->kinds[t];
        k->n_candidates = 0;
        for (int i = 0; i < k->n_layer * H; i++)
            if (fabs(k->ablation[i]) < tol)
                k->candidates[k->n_candidates++] = i;
        for (int i = 1; i < k->n_candidates; i++) /* insertion sort: a few heads */
            for (int j = i; j > 0 && cmp_abs(&k->candidates[j - 1], &k->candidates[j],
                                             k->ablation) > 0; j--) {
                int s = k->candidates[j];
                k->candidates[j] = k->candidates[j - 1];
                k->candidates[j - 1] = s;
            }
    }
}

static void progress(const hs_analyze_opts *o, const char *what)
{
    if (o->progress)
        o->progress(o->progress_user, what, 0, 0);
}

/* Ablation, gradient importance and pruning, as the options ask. */
static hs_status importance(hs_encdec_result *r, const hs_model *m, const int32_t *enc_ids,
                            const hs_analyze_opts *o, hs_analysis *a, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    size_t LH = (size_t)c->n_layer * (size_t)c->n_head;
    double *self = malloc(2 * LH * sizeof *self), base, t0;
    hs_status st = self ? HS_OK : nomem(err);
    if (!st && o->gradient) {
        progress(o, "gradient");
        t0 = hs_pipeline_now();
        st = hs_encdec_gradient(m, enc_ids, r->n_enc, r->target_ids, r->n_dec, NULL, NULL,
                                &base, self, self + LH, err);
        if (!st) {
            spread(r, c->n_head, self, self + LH, 0);
            gradient_norms(r, c->n_head);
        }
        r->seconds_gradient = a->seconds_gradient = hs_pipeline_now() - t0;
    }
    if (!st && o->ablation) {
        progress(o, "ablation");
        t0 = hs_pipeline_now();
        st = hs_encdec_ablation(m, enc_ids, r->n_enc, r->target_ids, r->n_dec, &base, self,
                                self + LH, err);
        if (!st) {
            spread(r, c->n_head, self, self + LH, 1);
            candidates(r, c->n_head, o->prune_tol);
            a->forward_passes += 1 + (long)LH + (long)(c->n_layer - c->n_enc_layer) * c->n_head;
        }
        r->seconds_ablation = a->seconds_ablation = hs_pipeline_now() - t0;
    }
    if (!st && o->ablation && o->pruning) {
        progress(o, "pruning");
        t0 = hs_pipeline_now();
        int all = (int)LH + (c->n_layer - c->n_enc_layer) * c->n_head;
        r->prune_order = malloc((size_t)all * sizeof *r->prune_order);
        r->prune_loss = malloc(((size_t)all + 1) * sizeof *r->prune_loss);
        st = r->prune_order && r->prune_loss ? HS_OK : nomem(err);
        if (!st)
            st = hs_encdec_prune(m, enc_ids, r->n_enc, r->target_ids, r->n_dec, o->prune_round,
                                 r->prune_order, r->prune_loss, &r->n_rounds, err);
        if (!st) {
            r->n_pruned = all;
            r->round_heads = (int)ceil(o->prune_round * all);
        }
        r->seconds_pruning = a->seconds_pruning = hs_pipeline_now() - t0;
    }
    free(self);
    return st;
}

/* The options an encoder-decoder's analysis cannot take, refused by name. */
static hs_status check_opts(const hs_model_config *c, const hs_analyze_input *in,
                            const hs_analyze_target *tgt, const hs_analyze_opts *o, hs_error *err)
{
    if (!tgt || !tgt->ids || tgt->n < 1)
        return hs_fail(err, HS_E_ARG, "the encoder-decoder '%s' needs a target: the "
                       "decoder's text (--target)", c->arch->name);
    if (tgt->n > c->n_ctx)
        return hs_fail(err, HS_E_INPUT, "a target of %d tokens (the model takes 1 to "
                       "%d)", tgt->n, c->n_ctx);
    if (o->layers)
        return hs_fail(err, HS_E_UNSUPPORTED, "--layers is not implemented for an "
                       "encoder-decoder (every layer of both stacks is analysed)");
    if (in->text_pair)
        return hs_fail(err, HS_E_UNSUPPORTED, "an encoder-decoder takes no text pair");
    if (o->ablation && o->ablation_kind != HS_ABLATION_ZERO)
        return hs_fail(err, HS_E_UNSUPPORTED, "%s ablation is not implemented for an "
                       "encoder-decoder (zero only)", hs_ablation_kind_name(o->ablation_kind));
    if (o->ablation && o->pruning && o->prune_method == HS_PRUNE_GREEDY)
        return hs_fail(err, HS_E_UNSUPPORTED, "greedy pruning is not implemented for an "
                       "encoder-decoder (gradient rounds only)");
    return HS_OK;
}

hs_status hs_analyze_encdec(const hs_model *m, const hs_analyze_input *in,
                            const hs_analyze_target *tgt, const hs_analyze_opts *o,
                            hs_analysis *a, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    hs_status st = check_opts(c, in, tgt, o, err);
    if (st)
        return st;
    hs_encdec_result *r = calloc(1, sizeof *r);
    if (!r)
        return nomem(err);
    a->encdec = r;
    r->n_enc = in->n;
    r->n_dec = tgt->n;
    r->loss = NAN;
    a->loss_kind = HS_LOSS_LM;
    a->prune_method_used = HS_PRUNE_GRADIENT;
    if ((st = target_input(r, m, tgt, err)) || (st = alloc_kinds(r, c, err)))
        return st;
    progress(o, "forward");
    double t0 = hs_pipeline_now();
    if ((st = run_forward(r, m, in->ids, err)))
        return st;
    a->forward_passes = 1;
    a->loss = r->loss;
    r->seconds_forward = a->seconds_forward = hs_pipeline_now() - t0;
    progress(o, "head metrics");
    if ((st = head_metrics(r, in->ids, c->n_head, err)))
        return st;
    return importance(r, m, in->ids, o, a, err);
}
