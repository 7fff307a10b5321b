/*
 * src/pipeline/pipeline.h — the steps of the analysis of one text shared between the
 * files of src/pipeline/; private to the library.
 */
#ifndef HEADSCOPE_PIPELINE_H
#define HEADSCOPE_PIPELINE_H

#include <stdint.h>

#include "headscope/model.h"
#include "headscope/report.h"
#include "headscope/tokenizer.h"
#include "headscope/visibility.h"

/* The keys the queries of layer `layer` see, for every analysis of that layer's maps: the
 * model's own per-layer visibility (a local layer's sliding window, else the family's). */
static inline hs_visibility hs_pipeline_visibility(const hs_model_config *c, int layer)
{
    return hs_model_layer_visibility(c, layer);
}

/* The map entries the similarity compares (report.json's similarity.entries): "all" when
 * every analysed layer is bidirectional, "lower_triangle" when every one is causal, else
 * "visible" (the cells both heads see). */
static inline const char *hs_pipeline_similarity_entries(const hs_analysis *a)
{
    const hs_model_config *c = hs_model_config_of(a->model);
    int bidir = 0, causal = 0, other = 0;
    for (int k = 0; k < a->n_heads; k++) {
        hs_visibility v = hs_pipeline_visibility(c, a->head_index[k] / c->n_head);
        bidir |= v.kind == HS_VIS_BIDIRECTIONAL;
        causal |= v.kind == HS_VIS_CAUSAL;
        other |= v.kind != HS_VIS_BIDIRECTIONAL && v.kind != HS_VIS_CAUSAL;
    }
    return other || (bidir && causal) ? "visible" : causal ? "lower_triangle" : "all";
}

/* Seconds on the monotonic clock. */
double hs_pipeline_now(void);

/* The id of a special token (s NULL: the family has none), -1 when absent. */
static inline int32_t hs_special_id(const hs_tokenizer *t, const char *s)
{
    return t && s ? hs_tokenizer_id(t, s) : -1;
}

/* Step 5 (analyze_importance.c): the loss of the text, gradient importance, the ablation
 * sweep, the pruning curve and the candidates into a, for the heads marked in
 * active: (n_layer * n_head). cls_id, sep_id: the family's [CLS] / [SEP] ids or -1. */
hs_status hs_analyze_importance(const hs_model *m, hs_analysis *a, const hs_analyze_opts *o,
                                const unsigned char *active, int32_t cls_id, int32_t sep_id,
                                hs_error *err);

/* Norm-based attention of the text (analyze_norm.c), summarised per analysed head into
 * norm_first_token, norm_mass and value_norm, from fnorm: (n_layer, n_head, n) the value
 * norms the text's pass took layer by layer (layer_obs.fnorm) and the maps in a->maps. */
hs_status hs_analysis_norm_based(hs_analysis *a, const float *fnorm, hs_error *err);

/* a->word_ids, n_words, words and word_maps of every analysed head (analyze_words.c);
 * needs the maps in a->maps. */
hs_status hs_analysis_word_level(hs_analysis *a, hs_error *err);

#endif
