/*
 * src/pipeline/pipeline.h — the steps of the analysis of one text shared between the
 * files of src/pipeline/; private to the library.
 */
#ifndef HEADSCOPE_PIPELINE_H
#define HEADSCOPE_PIPELINE_H

#include <stdint.h>

#include "headscope/importance.h"
#include "headscope/model.h"
#include "headscope/report.h"
#include "headscope/tokenizer.h"
#include "headscope/visibility.h"

/* Seconds on the monotonic clock. */
double hs_pipeline_now(void);

/* The id of a special token (s NULL: the family has none), -1 when absent. */
static inline int32_t hs_special_id(const hs_tokenizer *t, const char *s)
{
    return t && s ? hs_tokenizer_id(t, s) : -1;
}

/* hs_analyze_run on the text's maps from an earlier pass instead of a pass of its own
 * (corpus mode's packed passes, hs_forward_packed): maps (n_layer, n_head, n, n), every
 * layer's as hs_forward's observer sees them; NULL: as hs_analyze_run. Norm-based attention
 * and direct logit attribution read the pass itself, an encoder-decoder has three kinds of
 * maps: refused with maps (HS_E_ARG). */
hs_status hs_analyze_run_maps(const hs_model *m, const hs_analyze_input *in, const float *maps,
                              const hs_analyze_opts *o, hs_analysis **out, hs_error *err);

/* The state of one hs_analyze_run, handed from stage to stage (the table in analyze.c): the
 * model and options, the analysis being built, and the scratch the stages share, all freed
 * on the run's one cleanup path. */
typedef struct hs_run {
    const hs_model *m;
    const hs_model_config *c;
    const hs_tokenizer *tok;
    const hs_analyze_input *in;
    const hs_analyze_opts *o;
    const float *premaps;    /* (L, H, n, n): the text's maps from an earlier pass, or NULL */
    hs_analysis *a;          /* handed to the caller when every stage has run */
    int L, H, n;             /* layers, heads per layer, tokens */
    int n_layers_on;         /* layers analysed */
    size_t nh;               /* heads analysed (a->n_heads) */
    int32_t cls_id, sep_id;  /* the family's [CLS] / [SEP] ids or -1 */
    double t_start;          /* hs_pipeline_now() at the start */
    unsigned char *active;   /* (L * H) 1 for an analysed head */
    unsigned char *sink, *punct; /* (n) the text's sink and punctuation positions */
    unsigned char *probe_sink;   /* (a->probe_len) the probe's sink positions */
    hs_entropy *ent;         /* (2 * nh): all, without sinks */
    hs_detect *det;          /* (4 * nh): text, text without sinks, probe, probe without */
    double *dist;            /* (nh, nh) the similarity's distances */
    float *fnorm;            /* (L, H, n) value norms, norm-based attention */
    float *final_rstd;       /* (n) the final norm's 1/s, direct logit attribution */
    /* the runs of the model (analyze_importance.c) */
    hs_loss_input li;        /* the loss's input (the ablation's replacement set) */
    hs_loss_input lg;        /* the gradient's: li without the replacement */
    int32_t *masked;         /* MLM: the text with the masked positions [MASK]ed */
    int loss_possible;       /* the text has rows for the loss */
    hs_loss_eval *ev;        /* the loss evaluator on li (NULL: no loss) */
    double *delta;           /* (L * H) the ablation sweep's loss changes */
    double *g0;              /* (L * H) |dL/d xi| at xi = 1, pruning's first round, or NULL */
    float *replace;          /* mean or resample ablation's replacement contexts */
} hs_run;

/* One stage of the run: HS_OK, or a failure with its message in err. */
typedef hs_status (*hs_stage_fn)(hs_run *r, hs_error *err);

/* The stages "probe" (analyze_probe.c: the induction probe and the detectors on its pass)
 * and "pairwise" (analyze_pairwise.c: diversity, similarity, clusters, KV groups, head
 * types). */
hs_status hs_stage_probe(hs_run *r, hs_error *err);
hs_status hs_stage_pairwise(hs_run *r, hs_error *err);

/* The runs of the model (analyze_importance.c), stages in this order: the loss of the text
 * (its input, the ablation's replacement, the evaluator), gradient importance, the ablation
 * sweep (and of KV groups), the probe's ablation, the pruning curve, the candidates. */
hs_status hs_stage_loss(hs_run *r, hs_error *err);
hs_status hs_stage_gradient(hs_run *r, hs_error *err);
hs_status hs_stage_ablation(hs_run *r, hs_error *err);
hs_status hs_stage_probe_ablation(hs_run *r, hs_error *err);
hs_status hs_stage_pruning(hs_run *r, hs_error *err);
hs_status hs_stage_candidates(hs_run *r, hs_error *err);
/* Frees the importance stages' scratch in r (not the analysis). */
void hs_run_importance_free(hs_run *r);

/* Norm-based attention of the text (analyze_norm.c), summarised per analysed head into
 * norm_first_token, norm_mass and value_norm, from fnorm: (n_layer, n_head, n) the value
 * norms the text's pass took layer by layer (layer_obs.fnorm) and the maps in a->maps. */
hs_status hs_analysis_norm_based(hs_analysis *a, const float *fnorm, hs_error *err);

/* Each analysed head's position_share (latent attention only; analyze_norm.c): one more
 * pass over the text's tokens, to its last layer's attention. */
hs_status hs_analysis_position_share(hs_analysis *a, hs_error *err);

/* a->word_ids, n_words, words and word_maps of every analysed head (analyze_words.c);
 * needs the maps in a->maps. */
hs_status hs_analysis_word_level(hs_analysis *a, hs_error *err);

#endif
