/* The analysis of one text (hs_analyze_run), the pipeline of `headscope analyze` after the
 * model is loaded and the text tokenised, as a table of named stages run in order over one
 * state (hs_run, pipeline.h), the first failure ending the run and one cleanup path freeing
 * what the stages left: input, heads, forward (one recorded pass on the text, the per-head
 * metrics taken layer by layer: analyze_observe.c), rollout, head metrics, words, probe
 * (the induction probe: analyze_probe.c), pairwise (comparisons, clusters, head types:
 * analyze_pairwise.c), composition (from the weights), then the runs of the model: loss, gradient, ablation, probe ablation,
 * pruning, candidates (analyze_importance.c). The outputs are written from the hs_analysis
 * (src/io/). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis/analysis_internal.h"
#include "analysis/metrics.h"
#include "analysis/pairwise.h"
#include "headscope/report.h"
#include "headscope/tokenizer.h"
#include "core/core.h"
#include "pipeline/analyze_observe.h"
#include "core/mapstore.h"
#include "pipeline/encdec_result.h"
#include "pipeline/pipeline.h"

void hs_analyze_opts_default(hs_analyze_opts *o)
{
    *o = (hs_analyze_opts){
        .ablation = 1, .pruning = 1, .gradient = 1, .probe = 1, .diversity = 1,
        .composition = 1, .rollout = 1, .dla = 1, .norm_based = 1, .keep_maps = 1, .hash_files = 1,
        .similarity = HS_SIM_PEARSON, .cluster_threshold = 0.5, .sink_threshold = 0.5,
        .probe_seed = 1, .probe_half_len = 32, .resample_seed = 1,
        .loss_span = {HS_SPAN_ALL, 0, -1}, .probe_ablation = 1,
        .probe_ablation_kind = HS_ABLATION_MEAN,
        .prune_method = HS_PRUNE_GRADIENT, .prune_tol = 0.01, .prune_stop = 0.1,
        .prune_round = 0.1, .prune_beam = 8, .prune_max_steps = 64,
        .rollout_residual = 0.5, .flow_max_tokens = 64,
        .maps_memory_max = HS_MAPSTORE_MEM_DEFAULT,
    };
    hs_label_thresholds_default(o->label_thresholds);
}

double hs_pipeline_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *hs_head_name(const hs_analysis *a, int index, char *buf, size_t cap)
{
    return hs_head_label(index, hs_model_config_of(a->model)->n_head, buf, cap);
}

void hs_analysis_free(hs_analysis *a)
{
    if (!a)
        return;
    for (int i = 0; i < a->n; i++) {
        if (a->tokens)
            free(a->tokens[i]);
        if (a->display)
            free(a->display[i]);
    }
    free(a->tokens);
    free(a->display);
    free(a->ids);
    free(a->type_ids);
    free(a->text);
    free(a->text_pair);
    for (int i = 0; i < a->command_line_argc; i++)
        free(a->command_line[i]);
    free(a->command_line);
    hs_model_files_free(a->files, a->n_model_files);
    free(a->head_index);
    hs_mapstore_free(a->maps);
    hs_composition_free(a->composition);
    hs_dla_free(a->dla);
    for (int i = 0; a->words && i < a->n_words; i++)
        free(a->words[i]);
    free(a->words);
    free(a->word_ids);
    free(a->word_maps);
    free(a->rollout);
    free(a->flow);
    free(a->heads);
    free(a->layer_diversity);
    free(a->frobenius);
    free(a->similarity);
    hs_linkage_free(a->linkage);
    free(a->labels);
    free(a->probe_ids);
    free(a->mlm_positions);
    free(a->mlm_targets);
    free(a->resample_ids);
    free(a->loss_rows);
    free(a->probe_ablation);
    free(a->probe_resample_ids);
    free(a->curve);
    free(a->candidates);
    free(a->ablation_kv);
    hs_kv_similarity_free(a->kv_similarity);
    hs_encdec_result_free(a->encdec);
    free(a);
}

/* A NUL-terminated copy of len bytes of s (len 0: strlen) in which every NUL byte becomes
 * U+FFFD, so the report's JSON string holds the whole text. */
static char *dup_text(const char *s, size_t len)
{
    if (!s)
        return NULL;
    if (len == 0)
        len = strlen(s);
    size_t nul = 0;
    for (size_t i = 0; i < len; i++)
        nul += s[i] == '\0';
    char *d = malloc(len + 2 * nul + 1), *p = d;
    if (!d)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\0') {
            memcpy(p, "\xEF\xBF\xBD", 3);
            p += 3;
        } else {
            *p++ = s[i];
        }
    }
    *p = '\0';
    return d;
}

static hs_status nomem(hs_error *err)
{
    return hs_fail(err, HS_E_NOMEM, "out of memory");
}

/* Stage "input": the analysis's copy of the text, its tokens and the command line, and the
 * model files' digests. */
static hs_status stage_input(hs_run *r, hs_error *err)
{
    const hs_tokenizer *tok = r->tok;
    const hs_analyze_input *in = r->in;
    const hs_analyze_opts *o = r->o;
    hs_analysis *a = r->a;
    int n = r->n;
    hs_status st;
    if (o->command_line && o->command_line_argc > 0) {
        a->command_line = calloc((size_t)o->command_line_argc, sizeof *a->command_line);
        if (!a->command_line)
            return nomem(err);
        a->command_line_argc = o->command_line_argc;
        for (int i = 0; i < o->command_line_argc; i++)
            if (!(a->command_line[i] = strdup(o->command_line[i] ? o->command_line[i] : "")))
                return nomem(err);
    }
    r->t_start = hs_pipeline_now();
    if (o->hash_files && (st = hs_model_files_hash(r->m, &a->files, &a->n_model_files, err)))
        return st;
    a->seconds_hash = hs_pipeline_now() - r->t_start;
    a->n = n;
    a->loss = NAN;
    a->probe_loss = a->probe_loss_first = NAN;
    a->truncated = in->truncated;
    a->ids = malloc((size_t)n * sizeof *a->ids);
    a->type_ids = calloc((size_t)n, sizeof *a->type_ids);
    a->tokens = calloc((size_t)n, sizeof *a->tokens);
    a->display = calloc((size_t)n, sizeof *a->display);
    a->text = dup_text(in->text, in->text_len);
    a->text_pair = dup_text(in->text_pair, 0);
    if (!a->ids || !a->type_ids || !a->tokens || !a->display || (in->text && !a->text) ||
        (in->text_pair && !a->text_pair))
        return nomem(err);
    memcpy(a->ids, in->ids, (size_t)n * sizeof *a->ids);
    if (in->type_ids)
        memcpy(a->type_ids, in->type_ids, (size_t)n * sizeof *a->type_ids);
    for (int i = 0; i < n; i++) {
        char buf[256];
        const char *raw = in->tokens ? in->tokens[i] : tok ? hs_tokenizer_token(tok, in->ids[i]) : NULL;
        if (!raw) {
            snprintf(buf, sizeof buf, "#%d", (int)in->ids[i]);
            raw = buf;
        }
        a->tokens[i] = strdup(raw);
        if (tok)
            hs_tokenizer_display(tok, in->ids[i], buf, sizeof buf);
        else
            snprintf(buf, sizeof buf, "%s", raw);
        a->display[i] = strdup(buf);
        if (!a->tokens[i] || !a->display[i])
            return nomem(err);
    }
    return HS_OK;
}

/* Stage "heads": the heads analysed (those of the selected layers) and the arrays of their
 * results. */
static hs_status stage_heads(hs_run *r, hs_error *err)
{
    const hs_analyze_opts *o = r->o;
    hs_analysis *a = r->a;
    int L = r->L, H = r->H;
    r->active = calloc((size_t)(L * H), 1);
    a->head_index = malloc((size_t)(L * H) * sizeof *a->head_index);
    if (!r->active || !a->head_index)
        return nomem(err);
    for (int l = 0; l < L; l++) {
        if (o->layers && !o->layers[l])
            continue;
        r->n_layers_on++;
        for (int h = 0; h < H; h++) {
            r->active[l * H + h] = 1;
            a->head_index[a->n_heads++] = l * H + h;
        }
    }
    if (a->n_heads == 0)
        return hs_fail(err, HS_E_ARG, "no layers selected");
    size_t nh = r->nh = (size_t)a->n_heads;
    a->heads = calloc(nh, sizeof *a->heads);
    a->layer_diversity = malloc((size_t)L * sizeof *a->layer_diversity);
    a->frobenius = malloc(nh * nh * sizeof *a->frobenius);
    a->similarity = malloc(nh * nh * sizeof *a->similarity);
    a->labels = malloc(nh * sizeof *a->labels);
    r->dist = malloc(nh * nh * sizeof *r->dist);
    if (!a->heads || !a->layer_diversity || !a->frobenius || !a->similarity || !a->labels ||
        !r->dist)
        return nomem(err);
    return HS_OK;
}

/* Stage "forward": the text's pass, per-head metrics taken layer by layer (entropy and the
 * detectors), every layer's maps into the map store, the value norms of norm-based
 * attention and direct logit attribution taken from the pass's workspace. */
static hs_status stage_forward(hs_run *r, hs_error *err)
{
    const hs_model *m = r->m;
    const hs_model_config *c = r->c;
    const hs_analyze_opts *o = r->o;
    hs_analysis *a = r->a;
    int L = c->n_layer, H = c->n_head, n = r->n;
    size_t nh = r->nh;
    hs_status st = HS_OK;
    const hs_arch *ar = c->arch;
    int32_t cls_id = r->cls_id = hs_special_id(r->tok, ar->cls_token);
    int32_t sep_id = r->sep_id = hs_special_id(r->tok, ar->sep_token);
    unsigned char *sink = r->sink = malloc((size_t)n);
    unsigned char *punct = r->punct = malloc((size_t)n);
    if (!sink || !punct)
        return nomem(err);
    if ((st = hs_sinks_mark(a->ids, n, cls_id, sep_id, sink, err)))
        return st;
    for (int i = 0; i < n; i++) {
        punct[i] = (unsigned char)hs_token_is_punct(a->display[i]);
        sink[i] |= (unsigned char)(o->sink_punct && punct[i]);
    }
    hs_detect_seq seq = {a->ids, cls_id, sep_id, r->in->type_ids ? a->type_ids : NULL, punct};
    hs_entropy *ent = r->ent = malloc(nh * 2 * sizeof *ent);
    hs_detect *det = r->det = malloc(nh * 4 * sizeof *det);
    if (!ent || !det)
        return nomem(err);
    double t0 = hs_pipeline_now();
    if ((st = hs_mapstore_new(L * H, n, o->maps_memory_max, o->maps_dir, &a->maps, err)))
        return st;
    /* the observers' failures keep their own message (the pass's is "stopped by observer") */
    hs_error oerr = {{0}};
    layer_obs to = {o->layers, c, &seq, sink, ent, ent + nh, det, det + nh, a->maps, 0,
                    HS_OK, &oerr, m, NULL, NULL, o->progress, o->progress_user};
    /* norm-based attention reads the layer's values from the pass's workspace; direct
     * logit attribution takes each layer's context from it, and the final norm's scale */
    hs_forward_ws *ws = NULL;
    hs_dla_acc *dla = NULL;
    int want_dla = o->dla && !hs_dla_undefined(m) && n >= 2;
    if ((o->norm_based || want_dla) && (st = hs_forward_ws_new(m, n, &ws, err)))
        return st;
    if (o->norm_based) {
        to.ws = ws;
        if (!(to.fnorm = r->fnorm = malloc((size_t)L * (size_t)H * (size_t)n * sizeof *r->fnorm)))
            st = hs_fail(err, HS_E_NOMEM, "out of memory");
    }
    if (!st && want_dla && !(st = hs_dla_begin(m, a->ids, n, &dla, err))) {
        if ((r->final_rstd = malloc((size_t)n * sizeof *r->final_rstd)))
            hs_dla_attach(dla, ws, r->final_rstd, &oerr);
        else
            st = hs_fail(err, HS_E_NOMEM, "out of memory");
    }
    hs_forward_opts fo = {.on_attn = hs_layer_observe, .user = &to};
    if (!st && r->premaps) /* the maps of an earlier pass (a packed one: corpus mode) */
        for (int l = 0; l < L && !st; l++)
            if (hs_layer_observe(&to, l, r->premaps + (size_t)l * (size_t)H * (size_t)n * (size_t)n,
                                 H, n))
                st = HS_E_ARG;
    if (!st && !r->premaps)
        st = hs_forward(m, a->ids, a->type_ids, n, &fo, ws, err);
    hs_status ost = to.st ? to.st : dla ? hs_dla_acc_status(dla) : HS_OK;
    if (ost && (st = ost) && err)
        *err = oerr;
    if (!st && dla)
        st = hs_dla_end(dla, &a->dla, err);
    else
        hs_dla_acc_free(dla);
    hs_forward_ws_free(ws);
    if (st)
        return st;
    a->forward_passes = 1;
    a->seconds_forward = hs_pipeline_now() - t0;
    return HS_OK;
}

/* Stage "rollout": attention rollout and flow from the stored maps. */
static hs_status stage_rollout(hs_run *r, hs_error *err)
{
    hs_status st;
    double t0 = hs_pipeline_now();
    if (r->o->rollout && (st = hs_analysis_rollout(r->a, err)))
        return st;
    r->a->seconds_rollout = hs_pipeline_now() - t0;
    return HS_OK;
}

/* Stage "head metrics": each analysed head's results on the text (the scores the runs
 * below fill start as NaN), and norm-based attention. */
static hs_status stage_head_metrics(hs_run *r, hs_error *err)
{
    const hs_analyze_opts *o = r->o;
    hs_analysis *a = r->a;
    int H = r->H;
    size_t nh = r->nh;
    const hs_entropy *ent = r->ent;
    const hs_detect *det = r->det;
    for (size_t k = 0; k < nh; k++) {
        a->heads[k].layer = a->head_index[k] / H;
        a->heads[k].head = a->head_index[k] % H;
        a->heads[k].entropy_all = ent[k];
        a->heads[k].entropy_free = ent[nh + k];
        a->heads[k].entropy = o->exclude_sinks ? ent[nh + k] : ent[k];
        a->heads[k].text_scores = det[k];
        a->heads[k].text_free = det[nh + k];
        a->heads[k].ablation_delta = NAN;
        a->heads[k].gradient = NAN;
        a->heads[k].gradient_raw = NAN;
        a->heads[k].probe_scores = hs_detect_none();
        a->heads[k].probe_free = a->heads[k].probe_scores;
        a->heads[k].norm_first_token = a->heads[k].norm_mass = a->heads[k].value_norm = NAN;
        a->heads[k].position_share = NAN;
    }
    hs_status st = o->norm_based ? hs_analysis_norm_based(a, r->fnorm, err) : HS_OK;
    return st ? st : hs_analysis_position_share(a, err);
}

/* Stage "words": word-level maps (--word-level). */
static hs_status stage_words(hs_run *r, hs_error *err)
{
    return r->o->word_level ? hs_analysis_word_level(r->a, err) : HS_OK;
}

/* Stage "composition": how the heads compose, from the weights only (Elhage et al. 2021). */
static hs_status stage_composition(hs_run *r, hs_error *err)
{
    hs_status st;
    double t0 = hs_pipeline_now();
    if (r->o->composition && hs_composition_defined(r->c) &&
        (st = hs_composition_run(r->m, r->o->progress, r->o->progress_user,
                                 &r->a->composition, err)))
        return st;
    r->a->seconds_composition = hs_pipeline_now() - t0;
    return HS_OK;
}

/* The analysis of one text, stage by stage in this order; the first failure ends it. */
static const struct {
    const char *name;
    hs_stage_fn fn;
} stages[] = {
    {"input", stage_input},
    {"heads", stage_heads},
    {"forward", stage_forward},
    {"rollout", stage_rollout},
    {"head metrics", stage_head_metrics},
    {"words", stage_words},
    {"probe", hs_stage_probe},       /* analyze_probe.c */
    {"pairwise", hs_stage_pairwise}, /* analyze_pairwise.c */
    {"composition", stage_composition},
    {"loss", hs_stage_loss}, /* the runs of the model: analyze_importance.c */
    {"gradient", hs_stage_gradient},
    {"ablation", hs_stage_ablation},
    {"probe ablation", hs_stage_probe_ablation},
    {"pruning", hs_stage_pruning},
    {"candidates", hs_stage_candidates},
};

/* The run's one cleanup path: the stages' scratch, and the analysis unless handed out. */
static void run_free(hs_run *r)
{
    free(r->dist);
    free(r->fnorm);
    free(r->final_rstd);
    free(r->sink);
    free(r->punct);
    free(r->probe_sink);
    free(r->active);
    free(r->ent);
    free(r->det);
    hs_run_importance_free(r);
    hs_analysis_free(r->a);
}

static hs_status analyze_run(const hs_model *m, const hs_analyze_input *in,
                             const hs_analyze_target *tgt, const float *maps,
                             const hs_analyze_opts *o, hs_analysis **out, hs_error *err);

hs_status hs_analyze_run(const hs_model *m, const hs_analyze_input *in, const hs_analyze_opts *o,
                         hs_analysis **out, hs_error *err)
{
    return analyze_run(m, in, NULL, NULL, o, out, err);
}

hs_status hs_analyze_run_target(const hs_model *m, const hs_analyze_input *in,
                                const hs_analyze_target *target, const hs_analyze_opts *o,
                                hs_analysis **out, hs_error *err)
{
    return analyze_run(m, in, target, NULL, o, out, err);
}

hs_status hs_analyze_run_maps(const hs_model *m, const hs_analyze_input *in, const float *maps,
                              const hs_analyze_opts *o, hs_analysis **out, hs_error *err)
{
    return analyze_run(m, in, NULL, maps, o, out, err);
}

static hs_status analyze_run(const hs_model *m, const hs_analyze_input *in,
                             const hs_analyze_target *tgt, const float *maps,
                             const hs_analyze_opts *o, hs_analysis **out, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(m);
    int n = in->n;
    *out = NULL;

    if (!c->arch->enc_dec && tgt)
        return hs_fail(err, HS_E_ARG, "a target is for an encoder-decoder's decoder "
                       "('%s' is not one)", c->arch->name);
    if (n < 1 || n > c->n_ctx)
        return hs_fail(err, HS_E_INPUT, "analyze: %d tokens (the model takes 1 to %d)", n, c->n_ctx);
    if (!(o->cluster_threshold >= 0) || !isfinite(o->cluster_threshold))
        return hs_fail(err, HS_E_ARG, "cluster threshold must be a finite number >= 0");
    /* composition, DLA and norm-based attention read the output projection's n_head d_head
     * rows (hs_model_attn_width) */
    hs_analyze_opts own = *o;
    if (c->arch->mla_kv_lora) /* latent attention: composition and norm-based attention
                                 would read per-head Q, K, V from one slot */
        own.composition = own.norm_based = 0;
    o = &own;
    if (maps && (o->norm_based || o->dla || c->arch->enc_dec))
        return hs_fail(err, HS_E_ARG, "analyze: maps from an earlier pass leave out "
                       "encoder-decoders, norm-based attention and direct logit attribution");
    hs_run r = {.m = m, .c = c, .tok = hs_model_tokenizer(m), .in = in, .o = o,
                .L = c->n_layer, .H = c->n_head, .n = n, .cls_id = -1, .sep_id = -1,
                .premaps = maps};
    if (!(r.a = calloc(1, sizeof *r.a)))
        return nomem(err);
    r.a->model = m;
    r.a->opts = *o;
    r.a->opts.layers = NULL; /* not owned */
    r.a->opts.command_line = NULL;
    hs_status st = HS_OK;
    if (c->arch->enc_dec) { /* its own run: analyze_encdec.c */
        st = stage_input(&r, err);
        if (!st)
            st = hs_analyze_encdec(m, in, tgt, o, r.a, err);
    }
    for (size_t s = 0; s < sizeof stages / sizeof *stages && !st && !c->arch->enc_dec; s++) {
        if (o->progress) /* a stage begins: uncounted (its steps, where counted, follow) */
            o->progress(o->progress_user, stages[s].name, 0, 0);
        st = stages[s].fn(&r, err);
    }
    if (!st) {
        r.a->seconds_total = hs_pipeline_now() - r.t_start;
        *out = r.a;
        r.a = NULL;
    }
    run_free(&r);
    return st;
}
