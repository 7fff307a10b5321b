/* The pictures of `headscope analyze`: one heatmap per head, the L×H gallery, the similarity
 * matrix in dendrogram order and the importance grid (renderers in viz/). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "headscope/render.h"
#include "headscope/report.h"
#include "headscope/version.h"
#include "analysis/analysis_internal.h"
#include "core/mapstore.h"
#include "core/core.h"
#include "io/io_internal.h"
#include "../../viz/viz_internal.h" /* the grids with local layers marked */

typedef struct file_list {
    char **v;
    int n, cap;
} file_list;

static int list_add(file_list *l, const char *rel)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        char **nv = realloc(l->v, (size_t)cap * sizeof *nv);
        if (!nv)
            return -1;
        l->v = nv;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(rel)))
        return -1;
    l->n++;
    return 0;
}

static void list_unwind(file_list *l, const char *outdir)
{
    char path[4096];
    for (int i = 0; i < l->n; i++) {
        snprintf(path, sizeof path, "%s/%s", outdir, l->v[i]);
        unlink(path);
        free(l->v[i]);
    }
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* "name value" with decimals digits (and a sign when signed), or "name -" for NaN. */
static void fmt_num(char *buf, size_t cap, const char *name, double v, int decimals, int sign,
                    const char *unit)
{
    if (isfinite(v))
        snprintf(buf, cap, sign ? "%s %+.*f%s" : "%s %.*f%s", name, decimals, v, unit);
    else
        snprintf(buf, cap, "%s -", name);
}

/* The max_size that gives a map of n tokens a text line per token when all are to be
 * labelled (hs_heatmap_render: cells of HS_FONT_H + 2 px in 4/5 of max_size), or 0 (the
 * default, 2000) when that is enough or more than a PNG may be. */
static int label_size(int n, int max_labels)
{
    long need = (long)n * 11 * 5 / 4 + 400;
    return n <= max_labels && need > 2000 && need <= HS_PNG_MAX_SIDE ? (int)need : 0;
}

/* hs_map_fn over the maps of every head an analysis kept (its store): k = l*H + h. */
static hs_status analysis_map(void *user, int k, float *out, hs_error *err)
{
    return hs_mapstore_get(user, k, out, err);
}

/* What every picture task reads. */
typedef struct pic_ctx {
    const hs_analysis *a;
    const char *outdir;
    int max_labels, formats, grp;
    const int *window; /* (n_layer): a local layer's window, 0 global; NULL: none local */
} pic_ctx;

/* A task's outcome: the files it wrote (relative to outdir), its status and error. */
typedef struct pic_out {
    char rel[3][64];
    int n;
    hs_status st;
    hs_error err;
} pic_out;

static void out_add(pic_out *o, const char *rel)
{
    snprintf(o->rel[o->n++], sizeof o->rel[0], "%s", rel);
}

/* kv_similarity.png (and .svg with HS_PICTURES_SVG) of a grouped-query model: the similarity
 * matrix sim: (n_heads, n_heads) in head order (layer-major, so each KV group's heads are
 * neighbours), every KV group of every layer framed on the diagonal, names labelling the heads
 * with their KV heads. */
static hs_status kv_similarity_pictures(const hs_analysis *a, const char *outdir,
                                        const float *sim, const char *const *names, int formats,
                                        pic_out *o, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(a->model);
    int m = a->n_heads, grp = c->n_head / c->n_kv_head, js = a->opts.similarity == HS_SIM_JS;
    int *group = malloc((size_t)m * sizeof *group);
    char path[4096], title[256];
    hs_status st = HS_OK;
    if (!group)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    for (int k = 0; k < m; k++) /* layer l's group g: l * n_kv_head + g */
        group[k] = a->head_index[k] / c->n_head * c->n_kv_head + a->head_index[k] % c->n_head / grp;
    const hs_kv_similarity *ks = a->kv_similarity;
    char across[32] = "- (one KV head)", other[32] = "-";
    if (ks && isfinite(ks->across_mean))
        snprintf(across, sizeof across, "%.3f", ks->across_mean);
    if (ks && isfinite(ks->other_layers_mean))
        snprintf(other, sizeof other, "%.3f", ks->other_layers_mean);
    snprintf(title, sizeof title, "%s by key/value group (%d query heads each), layer-major, "
             "groups framed; mean within %.3f, across %s, other layers %s",
             js ? "Jensen-Shannon divergence between heads (nats)" : "head similarity (Pearson r)",
             grp, ks ? ks->within_mean : NAN, across, other);
    hs_similarity_opts so = {.title = title, .divergence_max = js ? (float)log(2.0) : 0.0f,
                             .max_size = m > 72 ? 4000 : 0};
    for (int f = 0; f < 2 && !st; f++) {
        if (!(formats & (f ? HS_PICTURES_SVG : HS_PICTURES_PNG)))
            continue;
        const char *rel = f ? "kv_similarity.svg" : "kv_similarity.png";
        snprintf(path, sizeof path, "%s/%s", outdir, rel);
        st = f ? hs_similarity_svg_write(path, sim, m, NULL, group, names, &so, err)
               : hs_similarity_write(path, sim, m, NULL, group, names, &so, err);
        if (!st)
            out_add(o, rel);
    }
    free(group);
    return st;
}

/* Head k's pictures (heads/L{l}_H{h}.png, .svg, .words.png as asked) with map: (n, n)
 * scratch. */
static hs_status head_pictures(const pic_ctx *x, int k, float *map, pic_out *o, hs_error *err)
{
    const hs_analysis *a = x->a;
    const char *outdir = x->outdir;
    int max_labels = x->max_labels, formats = x->formats, grp = x->grp;
    const hs_head_result *h = &a->heads[k];
    char path[4096], title[128], sub[256], p1[48], p2[48], p3[48], p4[48], p5[48];
    int n = a->n;
    if (grp)
        snprintf(p1, sizeof p1, "  (KV%d)", h->head / grp);
    snprintf(title, sizeof title, "L%d.H%d%s  %s", h->layer, h->head, grp ? p1 : "",
             strcmp(h->label, "none") ? h->label : "");
    fmt_num(p1, sizeof p1, "entropy", h->entropy.nats, 2, 0, " nats");
    fmt_num(p2, sizeof p2, "ablation", h->ablation_delta, 4, 1, "");
    fmt_num(p3, sizeof p3, "prev", h->text_free.prev_token, 2, 0, "");
    fmt_num(p4, sizeof p4, "induction", h->probe_free.induction, 2, 0, "");
    fmt_num(p5, sizeof p5, "on sinks", h->text_free.sink, 2, 0, "");
    snprintf(sub, sizeof sub, "%s   %s   %s   %s   %s", p1, p2, p3, p4, p5);
    hs_heatmap_opts ho = {.title = title, .subtitle = sub, .max_labels = max_labels,
                          .max_size = label_size(n, max_labels)};
    hs_status st = hs_mapstore_get(a->maps, a->head_index[k], map, err);
    if (!st && (formats & HS_PICTURES_PNG)) {
        snprintf(o->rel[o->n], 64, "heads/L%d_H%d.png", h->layer, h->head);
        snprintf(path, sizeof path, "%s/%s", outdir, o->rel[o->n]);
        if (!(st = hs_heatmap_write(path, map, n, (const char *const *)a->display, &ho, err)))
            ++o->n;
    }
    if (!st && (formats & HS_PICTURES_SVG)) {
        snprintf(o->rel[o->n], 64, "heads/L%d_H%d.svg", h->layer, h->head);
        snprintf(path, sizeof path, "%s/%s", outdir, o->rel[o->n]);
        if (!(st = hs_heatmap_svg_write(path, map, n, (const char *const *)a->display, &ho, err)))
            ++o->n;
    }
    if (!st && a->word_maps) { /* --word-level: the same head between words */
        int W = a->n_words;
        char wtitle[192];
        snprintf(o->rel[o->n], 64, "heads/L%d_H%d.words.png", h->layer, h->head);
        snprintf(path, sizeof path, "%s/%s", outdir, o->rel[o->n]);
        snprintf(wtitle, sizeof wtitle, "%s  (words: keys summed, queries averaged)", title);
        hs_heatmap_opts wo = {.title = wtitle, .subtitle = sub, .max_labels = max_labels,
                              .max_size = label_size(W, max_labels)};
        if (!(st = hs_heatmap_write(path, a->word_maps + (size_t)k * (size_t)W * (size_t)W, W,
                                    (const char *const *)a->words, &wo, err)))
            ++o->n;
    }
    return st;
}

/* The pictures besides the heads', in the order report.json lists them after the heads. */
enum { PIC_GALLERY, PIC_SIMILARITY, PIC_IMPORTANCE, PIC_DLA, PIC_ROLLOUT, PIC_FLOW,
       PIC_COMPOSITION, PIC_OTHERS };

static hs_status gallery_picture(const pic_ctx *x, pic_out *o, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(x->a->model);
    char path[4096];
    snprintf(path, sizeof path, "%s/gallery.png", x->outdir);
    hs_gallery_opts go = {.title = x->grp ? "attention of every head (each scaled to its own "
                                            "maximum), grouped by the key/value head it reads"
                                          : "attention of every head (each scaled to its own "
                                            "maximum)",
                          .heads_per_group = x->grp};
    hs_status st = hs_viz_gallery_write_marked(path, analysis_map, (void *)(uintptr_t)x->a->maps,
                                               c->n_layer, c->n_head, x->a->n, &go, x->window,
                                               err);
    if (!st)
        out_add(o, "gallery.png");
    return st;
}

/* similarity.png, and a grouped-query model's kv_similarity pictures. */
static hs_status similarity_pictures(const pic_ctx *x, pic_out *o, hs_error *err)
{
    const hs_analysis *a = x->a;
    int H = hs_model_config_of(a->model)->n_head, grp = x->grp;
    size_t m = (size_t)a->n_heads;
    float *sim = malloc(m * m * sizeof *sim);
    char **names = calloc(m, sizeof *names), path[4096];
    hs_status st = HS_OK;
    if (!sim || !names) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
    } else {
        /* the numbers of report.json's similarity.matrix: Pearson r, or the Jensen-Shannon
         * divergence itself (nats, 0 = identical) */
        for (size_t i = 0; i < m * m; i++)
            sim[i] = (float)a->similarity[i];
        for (size_t k = 0; k < m && !st; k++) {
            char nm[16], kvn[48];
            hs_head_label(a->head_index[k], H, nm, sizeof nm);
            if (grp) /* "3.5·KV1": the KV head beside the head */
                snprintf(kvn, sizeof kvn, "%s\xC2\xB7KV%d", nm, a->head_index[k] % H / grp);
            names[k] = strdup(grp ? kvn : nm);
            if (!names[k])
                st = hs_fail(err, HS_E_NOMEM, "out of memory");
        }
    }
    if (!st) {
        snprintf(path, sizeof path, "%s/similarity.png", x->outdir);
        int js = a->opts.similarity == HS_SIM_JS;
        hs_similarity_opts so = {
            .title = js ? "Jensen-Shannon divergence between heads (nats; 0 = identical), "
                          "dendrogram order; clusters framed"
                        : "head similarity (Pearson r), dendrogram order; clusters framed",
            .divergence_max = js ? (float)log(2.0) : 0.0f,
            .max_size = a->n_heads > 72 ? 4000 : 0};
        st = hs_similarity_write(path, sim, a->n_heads, a->linkage ? a->linkage->order : NULL,
                                 a->labels, (const char *const *)names, &so, err);
        if (!st)
            out_add(o, "similarity.png");
    }
    if (!st && grp)
        st = kv_similarity_pictures(a, x->outdir, sim, (const char *const *)names, x->formats,
                                    o, err);
    if (names)
        for (size_t k = 0; k < m; k++)
            free(names[k]);
    free(names);
    free(sim);
    return st;
}

/* importance.png (dla 0: each head's ablation loss increase) or dla.png (dla 1: its direct
 * logit attribution), on the layers x heads grid. */
static hs_status grid_picture(const pic_ctx *x, int dla, pic_out *o, hs_error *err)
{
    const hs_analysis *a = x->a;
    const hs_model_config *c = hs_model_config_of(a->model);
    int L = c->n_layer, H = c->n_head;
    float *v = malloc((size_t)(L * H) * sizeof *v);
    char path[4096], sub[256];
    if (!v)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    for (int k = 0; k < L * H; k++)
        v[k] = NAN;
    for (int k = 0; k < a->n_heads; k++)
        v[a->head_index[k]] = dla ? (float)a->dla->total[a->head_index[k]]
                                  : (float)a->heads[k].ablation_delta;
    const char *rel = dla ? "dla.png" : "importance.png";
    snprintf(path, sizeof path, "%s/%s", x->outdir, rel);
    if (dla)
        snprintf(sub, sizeof sub, "each head's direct effect on the next token's logit, summed "
                                  "over the %d positions", a->dla->n_pos);
    else
        snprintf(sub, sizeof sub, "loss increase when the head is ablated (%s ablation, "
                 "%s loss %.4f)", hs_ablation_kind_name(a->opts.ablation_kind),
                 hs_loss_kind_name(a->loss_kind), a->loss);
    hs_importance_opts io = {.title = dla ? "direct logit attribution" : "ablation importance",
                             .subtitle = sub, .decimals = dla ? 2 : 3,
                             .heads_per_group = x->grp};
    hs_status st = hs_viz_importance_write_marked(path, v, L, H, &io, x->window, err);
    free(v);
    if (!st)
        out_add(o, rel);
    return st;
}

/* rollout.png (flow 0) or flow.png (flow 1), drawn from f: (n, n) scratch. */
static hs_status rollout_picture(const pic_ctx *x, int flow, float *f, pic_out *o,
                                 hs_error *err)
{
    const hs_analysis *a = x->a;
    const double *v = flow ? a->flow : a->rollout;
    int n = a->n;
    char path[4096], sub[256];
    const char *rel = flow ? "flow.png" : "rollout.png";
    for (size_t i = 0; i < (size_t)n * (size_t)n; i++)
        f[i] = (float)v[i];
    snprintf(path, sizeof path, "%s/%s", x->outdir, rel);
    snprintf(sub, sizeof sub, "Abnar & Zuidema 2020; every layer, heads averaged, residual "
                              "%.2g; row: output position, column: input token",
             a->opts.rollout_residual);
    hs_heatmap_opts ho = {.title = flow ? "attention flow (max flow)" : "attention rollout",
                          .subtitle = sub, .scale_to_max = 1, .max_labels = x->max_labels,
                          .max_size = label_size(n, x->max_labels)};
    hs_status st = hs_heatmap_write(path, f, n, (const char *const *)a->display, &ho, err);
    if (!st)
        out_add(o, rel);
    return st;
}

static hs_status composition_picture(const pic_ctx *x, pic_out *o, hs_error *err)
{
    hs_image img = {0};
    char path[4096];
    snprintf(path, sizeof path, "%s/composition.png", x->outdir);
    hs_status st = hs_composition_render(x->a->composition, "composition of heads across "
                                         "layers (Elhage et al. 2021), from the weights",
                                         HS_COMPOSITION_TOP, &img, err);
    if (!st)
        st = hs_png_write(path, img.rgb, img.w, img.h, err);
    hs_image_free(&img);
    if (!st)
        out_add(o, "composition.png");
    return st;
}

/* Whether the analysis has picture `which` (PIC_*). */
static int has_picture(const hs_analysis *a, int which)
{
    switch (which) {
    case PIC_GALLERY: return 1;
    case PIC_SIMILARITY: return a->n_heads >= 2;
    case PIC_IMPORTANCE: return a->n_heads > 0 && isfinite(a->heads[0].ablation_delta);
    case PIC_DLA: return a->dla != NULL;
    case PIC_ROLLOUT: return a->rollout != NULL;
    case PIC_FLOW: return a->flow != NULL;
    default: return a->composition != NULL;
    }
}

/* Picture `which` (PIC_*); map: (n, n) scratch. */
static hs_status other_picture(const pic_ctx *x, int which, float *map, pic_out *o,
                               hs_error *err)
{
    switch (which) {
    case PIC_GALLERY: return gallery_picture(x, o, err);
    case PIC_SIMILARITY: return similarity_pictures(x, o, err);
    case PIC_IMPORTANCE: return grid_picture(x, 0, o, err);
    case PIC_DLA: return grid_picture(x, 1, o, err);
    case PIC_ROLLOUT: return rollout_picture(x, 0, map, o, err);
    case PIC_FLOW: return rollout_picture(x, 1, map, o, err);
    default: return composition_picture(x, o, err);
    }
}

/* Every picture as one task of a parallel loop: the pictures besides the heads' first (the
 * longest), then the heads (each thread with its own (n, n) map, the scratch of the
 * heads', rollout's and flow's pictures; as many threads as PICTURE_MAP_BYTES of maps
 * allow). After a failure the tasks not yet begun are skipped.
 * The files are listed in the report's order (the heads in head order, then PIC_* order);
 * on a failure, the first failing task's error in that order, and every file written
 * listed (for the caller's unwind). */
#define PICTURE_MAP_BYTES ((size_t)256 << 20)
static hs_status pictures_all(const pic_ctx *x, file_list *fl, hs_error *err)
{
    const hs_analysis *a = x->a;
    int nh = a->n_heads, tasks = PIC_OTHERS + nh, failed = 0;
    size_t map_bytes = (size_t)a->n * (size_t)a->n * sizeof(float);
    size_t fit = PICTURE_MAP_BYTES / (map_bytes ? map_bytes : 1);
    int threads = hs_threads(), team = fit < 1 ? 1 : fit < (size_t)threads ? (int)fit : threads;
    pic_out *outs = calloc((size_t)tasks, sizeof *outs);
    if (!outs)
        return hs_fail(err, HS_E_NOMEM, "out of memory");
#pragma omp parallel num_threads(team) if (team > 1)
    {
        float *map = malloc(map_bytes);
#pragma omp for schedule(dynamic)
        for (int t = 0; t < tasks; t++) {
            pic_out *o = &outs[t];
            int skip;
#pragma omp atomic read
            skip = failed;
            if (skip || (t < PIC_OTHERS && !has_picture(a, t)))
                continue;
            if (!map)
                o->st = hs_fail(&o->err, HS_E_NOMEM, "out of memory for a %d x %d map", a->n,
                                a->n);
            else if (t < PIC_OTHERS)
                o->st = other_picture(x, t, map, o, &o->err);
            else
                o->st = head_pictures(x, t - PIC_OTHERS, map, o, &o->err);
            if (o->st) {
#pragma omp atomic write
                failed = 1;
            }
        }
        free(map);
    }
    hs_status st = HS_OK;
    for (int i = 0; i < tasks; i++) {
        pic_out *o = &outs[i < nh ? PIC_OTHERS + i : i - nh]; /* the heads first */
        if (o->st && !st) {
            st = o->st;
            if (err)
                *err = o->err;
        }
        for (int f = 0; f < o->n; f++)
            if (list_add(fl, o->rel[f]) && !st)
                st = hs_fail(err, HS_E_NOMEM, "out of memory");
    }
    free(outs);
    return st;
}

/* *out: each layer's sliding window when it is local, 0 when global (the labels of the
 * L x H grids mark the local ones); NULL when no layer is local. */
static hs_status local_windows(const hs_model_config *c, int **out, hs_error *err)
{
    *out = NULL;
    int any = 0;
    for (int l = 0; l < c->n_layer; l++)
        any |= hs_model_layer_is_local(c, l);
    if (!any)
        return HS_OK;
    if (!(*out = calloc((size_t)c->n_layer, sizeof **out)))
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    for (int l = 0; l < c->n_layer; l++) {
        hs_visibility v = hs_model_layer_visibility(c, l);
        if (hs_model_layer_is_local(c, l) && v.kind == HS_VIS_SLIDING)
            (*out)[l] = v.window;
    }
    return HS_OK;
}

hs_status hs_pictures_write(const hs_analysis *a, const char *outdir, int max_labels,
                            int formats, char ***files, int *n_files, hs_error *err)
{
    if (max_labels <= 0)
        max_labels = 128;
    if (!formats)
        formats = HS_PICTURES_PNG;
    const hs_model_config *c = hs_model_config_of(a->model);
    int H = c->n_head;
    pic_ctx x = {.a = a, .outdir = outdir, .max_labels = max_labels, .formats = formats,
                 .grp = c->n_kv_head < H ? H / c->n_kv_head : 0}; /* grouped: heads a KV head */
    file_list fl = {0};
    char path[4096];
    *files = NULL;
    *n_files = 0;
    if (strlen(outdir) > 3900)
        return hs_fail(err, HS_E_ARG, "output folder path is too long");
    if (a->encdec) /* T5's three kinds of heads: pictures_encdec.c */
        return hs_pictures_encdec_write(a, outdir, max_labels, files, n_files, err);
    snprintf(path, sizeof path, "%s/heads", outdir);
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return hs_fail(err, HS_E_IO, "cannot create '%s': %s", path, strerror(errno));
    int *window = NULL;
    hs_status st = local_windows(c, &window, err);
    x.window = window;
    if (!st)
        st = pictures_all(&x, &fl, err);
    free(window);
    if (st) {
        list_unwind(&fl, outdir);
        return st;
    }
    *files = fl.v;
    *n_files = fl.n;
    return HS_OK;
}
