/* The pictures of an encoder-decoder's analysis (T5): one heatmap per head of each kind,
 * heads/enc_L{l}_H{h}.png, dec_L{l}_H{h}.png and cross_L{l}_H{h}.png, the layer counted in
 * its stack, each axis labelled with its tokens and titled with its stack (the cross maps:
 * decoder queries x encoder keys). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "headscope/render.h"
#include "io/io_internal.h"
#include "pipeline/encdec_result.h"

static const char *const row_title[HS_ED_KINDS] = {"query (encoder)", "query (decoder)",
                                                   "query (decoder)"};
static const char *const col_title[HS_ED_KINDS] = {"key (encoder)", "key (decoder)",
                                                   "key (encoder)"};
static const char *const what[HS_ED_KINDS] = {"encoder self-attention", "decoder self-attention",
                                              "cross-attention"};

/* Head index of kind t into outdir/heads, its relative path appended to files. */
static hs_status one_head(const hs_analysis *a, int t, int index, const char *outdir,
                          int max_labels, char **files, int *n_files, hs_error *err)
{
    const hs_encdec_result *e = a->encdec;
    const hs_encdec_kind *k = &e->kinds[t];
    int H = hs_model_config_of(a->model)->n_head, l = index / H, h = index % H;
    const char *const *enc = (const char *const *)a->display;
    const char *const *dec = (const char *const *)e->dec_display;
    hs_heatmap_axes ax = {k->rows, k->cols, t == HS_ED_ENC ? enc : dec,
                          t == HS_ED_DEC ? dec : enc, row_title[t], col_title[t]};
    char rel[96], title[96], sub[160], path[4096];
    snprintf(rel, sizeof rel, "heads/%s_L%d_H%d.png", hs_encdec_kind_prefix(t), l, h);
    snprintf(title, sizeof title, "%s%d.%d %s", hs_encdec_kind_prefix(t), l, h, what[t]);
    snprintf(sub, sizeof sub, "entropy %.2f nats (norm %.2f), ablation %+.4f",
             k->entropy[index].nats, k->entropy[index].norm, k->ablation[index]);
    hs_heatmap_opts o = {.title = title, .subtitle = sub, .max_labels = max_labels};
    snprintf(path, sizeof path, "%s/%s", outdir, rel);
    hs_status st = hs_heatmap_rect_write(path, hs_encdec_map(k, H, index), &ax, &o, err);
    if (st)
        return st;
    if (!(files[*n_files] = strdup(rel))) {
        unlink(path);
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    }
    (*n_files)++;
    return HS_OK;
}

hs_status hs_pictures_encdec_write(const hs_analysis *a, const char *outdir, int max_labels,
                                   char ***files, int *n_files, hs_error *err)
{
    const hs_encdec_result *e = a->encdec;
    int H = hs_model_config_of(a->model)->n_head, total = 0, n = 0;
    char path[4096];
    for (int t = 0; t < HS_ED_KINDS; t++)
        total += e->kinds[t].n_layer * H;
    char **v = calloc((size_t)total + 1, sizeof *v);
    if (!v)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    snprintf(path, sizeof path, "%s/heads", outdir);
    hs_status st = mkdir(path, 0777) != 0 && errno != EEXIST
                       ? hs_fail(err, HS_E_IO, "cannot create '%s': %s", path, strerror(errno))
                       : HS_OK;
    for (int t = 0; t < HS_ED_KINDS && !st; t++)
        for (int i = 0; i < e->kinds[t].n_layer * H && !st; i++)
            st = one_head(a, t, i, outdir, max_labels, v, &n, err);
    if (st) { /* nothing of this call is left */
        for (int i = 0; i < n; i++) {
            snprintf(path, sizeof path, "%s/%s", outdir, v[i]);
            unlink(path);
            free(v[i]);
        }
        free(v);
        return st;
    }
    *files = v;
    *n_files = n;
    return HS_OK;
}
