/*
 * src/pipeline/encdec_result.h — the analysis of an encoder-decoder (T5) on a text and a
 * target: its three kinds of heads (the encoder's self-attention, the decoder's
 * self-attention, the decoder's cross-attention), each with its maps, per-head metrics,
 * ablation and gradient importance and pruning candidates. hs_analysis.encdec points at one
 * (src/pipeline/analyze_encdec.c); the report (src/io/report_encdec.c), the pictures
 * (src/io/pictures_encdec.c), the page (viz/html_encdec.c) and the command line's summary
 * read it. Private to the library and the command line.
 */
#ifndef HEADSCOPE_ENCDEC_RESULT_H
#define HEADSCOPE_ENCDEC_RESULT_H

#include <stdint.h>

#include "headscope/analysis.h"
#include "headscope/report.h"

enum { HS_ED_ENC = 0, HS_ED_DEC, HS_ED_CROSS, HS_ED_KINDS };

/* "encoder", "decoder", "cross" of HS_ED_*; its short prefix of head ids ("enc", "dec",
 * "cross"). */
const char *hs_encdec_kind_name(int kind);
const char *hs_encdec_kind_prefix(int kind);

/* One kind of heads: n_layer layers (of its stack: the encoder's or the decoder's) of n_head
 * heads, head k = layer * n_head + head. */
typedef struct hs_encdec_kind {
    int n_layer;          /* layers of its stack */
    int first_layer;      /* its layer 0's index in the model's one layer list */
    int rows, cols;       /* each map's shape: queries x keys */
    float *maps;          /* (n_layer, n_head, rows, cols) */
    hs_entropy *entropy;  /* (n_layer * n_head) over each row's visible keys, all attention */
    hs_detect *scores;    /* (n_layer * n_head) NaN where a detector is not defined */
    double *ablation;     /* (n_layer * n_head) loss change with the head off; NaN: not run */
    double *gradient;     /* |d loss / d xi| / the L2 norm of its layer's (of this kind) */
    double *gradient_raw; /* |d loss / d xi| at every mask 1 */
    double *diversity;    /* (n_layer) Frobenius diversity of each layer's heads */
    int *candidates;      /* (n_candidates) head k with |ablation| < prune_tol */
    int n_candidates;
} hs_encdec_kind;

typedef struct hs_encdec_result {
    int n_enc, n_dec;         /* encoder tokens; decoder tokens (= target tokens) */
    int32_t *dec_ids;         /* (n_dec) the decoder's input: the start token, the target
                                 but its last */
    int32_t *target_ids;      /* (n_dec) the target (hs_analysis.ids is the encoder's) */
    char **dec_tokens;        /* (n_dec) raw strings of dec_ids */
    char **dec_display;       /* (n_dec) their display forms */
    char **target_tokens;     /* (n_dec) raw strings of target_ids */
    char *target;             /* the target text, or NULL */
    int32_t eos_id;           /* "</s>" (-1: none) */
    double loss;              /* the decoder's mean next-token NLL of the target */
    hs_encdec_kind kinds[HS_ED_KINDS];
    /* Michel et al.'s rounds over both kinds (hs_encdec_prune): order (n_pruned) as
     * kind * n_layer * n_head + layer * n_head + head over the model's layer list (kind 0
     * self-attention, 1 cross), loss (n_rounds + 1); NULL when not run */
    int32_t *prune_order;
    double *prune_loss;
    int n_pruned, n_rounds, round_heads;
    double seconds_forward, seconds_ablation, seconds_gradient, seconds_pruning;
} hs_encdec_result;

/* The encoder-decoder's analysis (hs_analyze_run_target for a model with n_enc_layer > 0):
 * fills a (input, provenance, loss, timing) and a->encdec. in->ids is the encoder's text,
 * tgt (NULL: refused by name) the decoder's target. */
hs_status hs_analyze_encdec(const hs_model *m, const hs_analyze_input *in,
                            const hs_analyze_target *tgt, const hs_analyze_opts *o,
                            hs_analysis *a, hs_error *err);

/* out/index.html of a's analysis (viz/html_encdec.c): the page with report_json (the
 * report of a) and every head's map of each kind, written atomically to path. */
hs_status hs_html_encdec_write(const char *path, const char *report_json, const hs_analysis *a,
                               hs_error *err);

/* Frees r and what it owns; accepts NULL. */
void hs_encdec_result_free(hs_encdec_result *r);

/* Head k's (layer * n_head + head) map of a kind: (rows, cols) floats. */
static inline const float *hs_encdec_map(const hs_encdec_kind *k, int n_head, int index)
{
    (void)n_head;
    return k->maps + (size_t)index * (size_t)k->rows * (size_t)k->cols;
}

#endif
