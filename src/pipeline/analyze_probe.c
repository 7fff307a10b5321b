/* Stage "probe" of the analysis of one text (the table in analyze.c): the induction probe,
 * its pass and each analysed head's detector scores on it. */
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis_internal.h"
#include "core/core.h"
#include "headscope/report.h"
#include "headscope/tokenizer.h"
#include "pipeline/analyze_observe.h"
#include "pipeline/pipeline.h"

/* One past the last id the induction probe draws: the vocabulary's end, less the family's
 * special tokens that close it (GPT-2's <|endoftext|>, 50256). */
static int32_t probe_top(const hs_arch *ar, const hs_tokenizer *tok, int32_t lo, int32_t hi)
{
    for (int found = 1; found && tok && hi > lo;) {
        const char *s = hs_tokenizer_token(tok, hi - 1);
        found = 0;
        for (int k = 0; s && k < ar->n_specials && !found; k++)
            found = !strcmp(s, ar->specials[k]);
        hi -= found;
    }
    return hi;
}

/* Stage "probe": the induction probe, seeded random tokens repeated twice, wrapped as the
 * tokenizer wraps a text, and the detectors on its pass. */
hs_status hs_stage_probe(hs_run *r, hs_error *err)
{
    hs_analysis *a = r->a;
    const hs_model *m = r->m;
    const hs_model_config *c = r->c;
    const hs_arch *ar = c->arch;
    const hs_analyze_opts *o = r->o;
    int32_t cls_id = r->cls_id, sep_id = r->sep_id;
    size_t nh = r->nh;
    hs_detect *det = r->det;
    hs_status st = HS_OK;
    double t0 = hs_pipeline_now();
    if (o->probe) {
        int specials = (ar->cls_token != NULL) + (ar->sep_token != NULL); /* around a text */
        int half = o->probe_half_len;
        if (half > (c->n_ctx - specials) / 2)
            half = (c->n_ctx - specials) / 2;
        int32_t lo = c->vocab_size > 2000 ? 1000 : c->vocab_size / 4;
        int32_t hi = probe_top(ar, r->tok, lo, c->vocab_size);
        if (half < 1 || hi - lo < half)
            return hs_fail(err, HS_E_UNSUPPORTED, "the model is too small for the induction probe");
        a->probe_len = 2 * half + specials;
        a->probe_ids = malloc((size_t)a->probe_len * sizeof *a->probe_ids);
        unsigned char *probe_sink = r->probe_sink = malloc((size_t)a->probe_len);
        if (!a->probe_ids || !probe_sink)
            return hs_fail(err, HS_E_NOMEM, "out of memory");
        st = hs_probe_repeated(o->probe_seed, half, lo, hi,
                               a->probe_ids + (ar->cls_token != NULL), err);
        if (ar->cls_token) /* wrapped as the tokenizer wraps a text */
            a->probe_ids[0] = cls_id >= 0 ? cls_id : 0;
        if (ar->sep_token)
            a->probe_ids[a->probe_len - 1] = sep_id >= 0 ? sep_id : 0;
        if (!st)
            st = hs_sinks_mark(a->probe_ids, a->probe_len, cls_id, sep_id, probe_sink, err);
        if (!st) {
            hs_detect_seq pseq = {a->probe_ids, cls_id, sep_id, NULL, NULL};
            layer_obs po = {o->layers, c, &pseq, probe_sink, NULL, NULL,
                            det + 2 * nh, det + 3 * nh, NULL, 0, HS_OK, err, m, NULL, NULL,
                            NULL, NULL};
            hs_forward_opts pf = {.on_attn = hs_layer_observe, .user = &po};
            st = hs_forward(m, a->probe_ids, NULL, a->probe_len, &pf, NULL, err);
            if (po.st)
                st = po.st;
            a->forward_passes++;
            for (size_t k = 0; k < nh && !st; k++) {
                a->heads[k].probe_scores = det[2 * nh + k];
                a->heads[k].probe_free = det[3 * nh + k];
            }
        }
    }
    if (st)
        return st;
    a->seconds_probe = hs_pipeline_now() - t0;
    return HS_OK;
}
