/* headscope analyze's summary on stdout: loss, the costliest heads, the probe's costliest
 * head, head types and sinks with their thresholds, clusters, pruning candidates. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "headscope/report.h"

static int cmp_abl(const void *x, const void *y)
{
    const hs_head_result *a = x, *b = y;
    double da = isnan(a->ablation_delta) ? -INFINITY : a->ablation_delta;
    double db = isnan(b->ablation_delta) ? -INFINITY : b->ablation_delta;
    return (da < db) - (da > db);
}

/* One line per head type (sinks: per sink kind) that some head has: its heads with their
 * scores, and for a type its threshold. */
static void print_kinds(const hs_analysis *a, int sinks, int count)
{
    int any = 0;
    for (int t = 0; t < count; t++) {
        int first = 1;
        for (int k = 0; k < a->n_heads; k++) {
            const hs_head_result *h = &a->heads[k];
            if (!(((sinks ? h->sink_types : h->labels) >> t) & 1u))
                continue;
            if (first)
                printf("  %-16s", sinks ? hs_sink_name(t) : hs_label_name(t));
            printf("%s%d.%d (%.2f)", first ? "" : ", ", h->layer, h->head,
                   sinks ? hs_sink_score(h, t) : hs_label_score(h, t));
            first = 0;
            any = 1;
        }
        if (!first && !sinks)
            printf(" [>= %.2f]", a->opts.label_thresholds[t]);
        if (!first)
            printf("\n");
    }
    if (!any)
        printf("  none\n");
}

void cli_analyze_summary(const hs_analysis *a, const char *report_path)
{
    if (a->encdec) { /* T5's three kinds of heads: analyze_summary_encdec.c */
        cli_analyze_summary_encdec(a, report_path);
        return;
    }
    const hs_model_config *c = hs_model_config_of(a->model);
    char name[32];
    printf("%s: %s, %d layers x %d heads, %d tokens\n", cli_shown(hs_model_path(a->model)),
           hs_family_name(c->family), c->n_layer, c->n_head, a->n);
    if (c->arch->sliding_window > 0) { /* which layers are local, which global */
        printf("layers: local (window %d):", c->arch->sliding_window);
        for (int pass = 0; pass < 2; pass++) {
            int k = 0;
            for (int l = 0; l < c->n_layer; l++)
                if (hs_model_layer_is_local(c, l) == !pass)
                    printf("%s %d", k++ ? "," : "", l);
            printf("%s%s", k ? "" : " none", pass ? "\n" : "; global:");
        }
    }
    static const char *const kinds[] = {"", "mean next-token NLL", "MLM NLL at masked positions",
                                        "1 - cosine to unablated"};
    if (!isnan(a->loss))
        printf("loss (%s, %s): %.4f\n", hs_loss_kind_name(a->loss_kind), kinds[a->loss_kind], a->loss);
    if (a->n_heads > 0 && !isnan(a->heads[0].ablation_delta)) {
        hs_head_result *sorted = malloc((size_t)a->n_heads * sizeof *sorted);
        if (sorted) {
            memcpy(sorted, a->heads, (size_t)a->n_heads * sizeof *sorted);
            qsort(sorted, (size_t)a->n_heads, sizeof *sorted, cmp_abl);
            int top = a->n_heads < 5 ? a->n_heads : 5;
            printf("most important heads (loss increase when ablated):\n");
            for (int i = 0; i < top; i++)
                printf("  %d.%-4d %+9.4f  %s\n", sorted[i].layer, sorted[i].head,
                       sorted[i].ablation_delta, sorted[i].label);
            free(sorted);
        }
    }
    if (a->probe_ablation) {
        int best = -1;
        for (int k = 0; k < a->n_heads; k++) {
            double v = a->probe_ablation[a->head_index[k]];
            if (best < 0 || v > a->probe_ablation[a->head_index[best]])
                best = k;
        }
        printf("probe, second half: loss %.4f (first half %.4f); costliest head ablated (%s): "
               "%d.%d %+.4f\n", a->probe_loss, a->probe_loss_first,
               hs_ablation_kind_name(a->opts.probe_ablation_kind), a->heads[best].layer,
               a->heads[best].head, a->probe_ablation[a->head_index[best]]);
    }
    printf("head types (score without sinks >= its threshold):\n");
    print_kinds(a, 0, HS_LABEL_COUNT);
    printf("sinks (attention mass >= %.2f):\n", a->opts.sink_threshold);
    print_kinds(a, 1, HS_SINK_COUNT);
    printf("clusters at distance %.3g: %d\n", a->opts.cluster_threshold, a->n_clusters);
    if (a->opts.ablation) {
        printf("pruning candidates (|delta| < %g):", a->opts.prune_tol);
        for (int k = 0; k < a->n_candidates; k++)
            printf("%s%s", k ? ", " : " ", cli_shown(hs_head_name(a, a->candidates[k], name, sizeof name)));
        printf("%s\n", a->n_candidates ? "" : " none");
    }
    if (report_path)
        printf("wrote %s\n", cli_shown(report_path));
}
