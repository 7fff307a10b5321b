/* headscope analyze's summary of an encoder-decoder (T5): the decoder's loss, then for each
 * kind of heads (the encoder's self-attention, the decoder's, the cross-attention) its
 * costliest heads when ablated, its most focused head, and its pruning candidates. */
#include <math.h>
#include <stdio.h>

#include "cli.h"
#include "pipeline/encdec_result.h"

/* The k-th largest ablation delta of a kind (k < 3), skipping NaN: its head or -1. */
static int nth_costliest(const hs_encdec_kind *kd, int nh, const int *taken, int n_taken)
{
    int best = -1;
    for (int i = 0; i < nh; i++) {
        int skip = isnan(kd->ablation[i]);
        for (int j = 0; j < n_taken; j++)
            skip |= taken[j] == i;
        if (!skip && (best < 0 || kd->ablation[i] > kd->ablation[best]))
            best = i;
    }
    return best;
}

static void print_kind(const hs_encdec_result *e, int t, int H, const hs_analyze_opts *o)
{
    const hs_encdec_kind *kd = &e->kinds[t];
    const char *p = hs_encdec_kind_prefix(t);
    int nh = kd->n_layer * H, top[3], n_top = 0, focused = 0;
    printf("  %-8s %d x %d heads, maps %d x %d", hs_encdec_kind_name(t), kd->n_layer, H,
           kd->rows, kd->cols);
    for (int i = 1; i < nh; i++)
        if (kd->entropy[i].norm < kd->entropy[focused].norm)
            focused = i;
    printf("; most focused %s%d.%d (normalised entropy %.2f)\n", p, focused / H, focused % H,
           kd->entropy[focused].norm);
    if (o->ablation) {
        printf("           costliest:");
        while (n_top < 3 && (top[n_top] = nth_costliest(kd, nh, top, n_top)) >= 0) {
            printf(" %s%d.%d %+.4f", p, top[n_top] / H, top[n_top] % H, kd->ablation[top[n_top]]);
            n_top++;
        }
        printf("\n           pruning candidates (|delta| < %g):", o->prune_tol);
        for (int i = 0; i < kd->n_candidates; i++)
            printf("%s%s%d.%d", i ? ", " : " ", p, kd->candidates[i] / H, kd->candidates[i] % H);
        printf("%s\n", kd->n_candidates ? "" : " none");
    }
}

void cli_analyze_summary_encdec(const hs_analysis *a, const char *report_path)
{
    const hs_model_config *c = hs_model_config_of(a->model);
    const hs_encdec_result *e = a->encdec;
    printf("%s: %s, encoder %d + decoder %d layers x %d heads, %d encoder and %d target "
           "tokens\n", cli_shown(hs_model_path(a->model)), hs_family_name(c->family),
           c->n_enc_layer, c->n_layer - c->n_enc_layer, c->n_head, e->n_enc, e->n_dec);
    printf("loss (target_nll, the decoder's mean next-token NLL of the target): %.4f\n", e->loss);
    printf("heads by kind%s:\n", a->opts.ablation ? " (costliest: loss increase when ablated)" : "");
    for (int t = 0; t < HS_ED_KINDS; t++)
        print_kind(e, t, c->n_head, &a->opts);
    if (report_path)
        printf("wrote %s\n", cli_shown(report_path));
}
