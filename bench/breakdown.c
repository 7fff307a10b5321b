/* `hs-bench --breakdown`: where one layer's time goes. The kernels of src/nn/ops.c called in
 * the order the block (src/nn/block.c) calls them, on buffers of the model's shapes, each
 * timed apart (median of reps after a warm-up) at every thread count of the forward table
 * (the attention as a pass recording the maps runs it: scores, softmax, the maps written
 * out and P V a row block at a time), beside the attention's two halves run apart over a
 * maps buffer, the same projection as one BLAS-threaded sgemm (the alternative to
 * headscope's fixed tiles of single-threaded calls) and a copy of one layer's maps: what an
 * observer of its own pays to keep them (hs_trace_observe copies nothing: the pass writes
 * into the trace). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "headscope/version.h"
#include "nn/block.h"
#include "nn/ops.h"
#include "bench.h"

typedef struct layer_bufs {
    const hs_model_config *c;
    int n, W, F, op;
    float *x, *h, *qkv, *probs, *ctx, *ff, *act, *trace;
    float *w_qkv, *b_qkv, *w_o, *w_fc, *w_proj, *ln_w, *ln_b;
} layer_bufs;

/* The block's kernels (summed as the layer's), then apart: the attention's two halves as
 * separate passes over a maps buffer, the projection as one BLAS-threaded call, and the copy
 * an observer of its own pays. */
enum { OP_NORM, OP_QKV, OP_ATTN, OP_OUT, OP_ADD, OP_MLP_UP, OP_ACT, OP_MLP_DOWN, OP_LAYER_OPS,
       OP_PROBS = OP_LAYER_OPS, OP_CONTEXT, OP_QKV_BLAS, OP_MAP_COPY, OP_COUNT };
static const char *const op_names[OP_COUNT] = {
    "norm", "qkv proj", "attention, maps", "out proj", "residual add", "mlp up", "activation",
    "mlp down", "scores+softmax", "context P V", "qkv, BLAS threads", "observer's copy"};

/* The MLP's two projections and activation HS_MLP_ROWS rows at a time, as the block runs them;
 * part: OP_MLP_UP, OP_ACT or OP_MLP_DOWN. */
static void mlp_part(layer_bufs *b, int part)
{
    const hs_model_config *c = b->c;
    int d = c->d_model;
    for (int r0 = 0; r0 < b->n; r0 += HS_MLP_ROWS) {
        int cnt = b->n - r0 < HS_MLP_ROWS ? b->n - r0 : HS_MLP_ROWS;
        if (part == OP_MLP_UP)
            hs_op_linear(b->x + (size_t)r0 * (size_t)d, b->w_fc, NULL, b->ff, cnt, d, b->F);
        else if (part == OP_ACT && c->gated)
            hs_op_glu(b->ff, b->act, cnt, c->d_ff, c->act);
        else if (part == OP_ACT)
            hs_op_gelu(b->ff, b->act, (size_t)cnt * (size_t)c->d_ff, c->act);
        else
            hs_op_linear(b->act, b->w_proj, NULL, b->h + (size_t)r0 * (size_t)d, cnt, c->d_ff, d);
    }
}

static int run_op(void *ctx)
{
    layer_bufs *b = ctx;
    const hs_model_config *c = b->c;
    int n = b->n, d = c->d_model;
    size_t maps = (size_t)c->n_head * (size_t)n * (size_t)n;
    switch (b->op) {
    case OP_NORM: hs_op_layernorm(b->x, b->ln_w, b->ln_b, b->h, NULL, NULL, n, d, 1e-5f); break;
    case OP_QKV: hs_op_linear(b->h, b->w_qkv, b->b_qkv, b->qkv, n, d, b->W); break;
    case OP_ATTN: { /* scores, softmax, the maps written out, P V: as the block runs it */
        size_t bad;
        hs_op_attn_fused(c, hs_model_layer_visibility(c, 0), b->qkv, b->ctx, n, NULL, b->trace,
                         &bad);
        break;
    }
    case OP_PROBS: hs_op_attn_probs(c, hs_model_layer_visibility(c, 0), b->qkv, b->probs, n); break;
    case OP_CONTEXT:
        hs_op_attn_context(c, hs_model_layer_visibility(c, 0), b->qkv, b->probs, b->ctx, n, NULL);
        break;
    case OP_OUT: hs_op_linear(b->ctx, b->w_o, NULL, b->h, n, hs_model_attn_width(c), d); break;
    case OP_ADD: hs_op_add(b->x, b->h, (size_t)n * (size_t)d); break;
    case OP_QKV_BLAS:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, b->W, d, 1.0f, b->h, d,
                    b->w_qkv, b->W, 0.0f, b->qkv, b->W);
        break;
    case OP_MAP_COPY: memcpy(b->trace, b->probs, maps * sizeof *b->probs); break;
    default: mlp_part(b, b->op); break;
    }
    return 0;
}

static float *filled(size_t count, float scale)
{
    float *p = malloc(count * sizeof *p);
    for (size_t i = 0; p && i < count; i++)
        p[i] = scale * (float)((int)(i * 2654435761u % 2001u) - 1000) / 1000.0f;
    return p;
}

void bench_breakdown(const hs_model_config *c, const char *name, const int *sizes, int n_sizes,
                     const int *thr, int n_thr, int reps)
{
    int d = c->d_model, W = hs_qkv_width(c), F = hs_ff_width(c), max_n = 0;
    for (int s = 0; s < n_sizes; s++)
        max_n = sizes[s] > max_n ? sizes[s] : max_n;
    size_t N = (size_t)max_n, D = (size_t)d, mr = HS_MLP_ROWS < max_n ? HS_MLP_ROWS : N;
    size_t A = (size_t)hs_model_attn_width(c); /* the context's width */
    size_t maps = (size_t)c->n_head * N * N;
    layer_bufs b = {.c = c, .W = W, .F = F};
    float *all[] = {
        b.x = filled(N * D, 1.0f), b.h = filled(N * D, 1.0f), b.qkv = filled(N * (size_t)W, 1.0f),
        b.probs = filled(maps, 0.0f), b.ctx = filled(N * A, 1.0f),
        b.ff = filled(mr * (size_t)F, 1.0f),
        b.act = filled(mr * (size_t)c->d_ff, 1.0f), b.trace = filled(maps, 0.0f),
        b.w_qkv = filled(D * (size_t)W, 0.03f), b.b_qkv = filled((size_t)W, 0.1f),
        b.w_o = filled(A * D, 0.03f), b.w_fc = filled(D * (size_t)F, 0.03f),
        b.w_proj = filled((size_t)c->d_ff * D, 0.03f), b.ln_w = filled(D, 1.0f),
        b.ln_b = filled(D, 0.1f)};
    int ok = 1;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        ok &= all[i] != NULL;
    if (!ok) {
        fprintf(stderr, "hs-bench: out of memory for the breakdown\n");
    } else {
        printf("\none layer of %s, each kernel timed apart (ms, median; %% of the layer's "
               "kernels):\n%-18s", name, "kernel");
        for (int s = 0; s < n_sizes; s++)
            for (int i = 0; i < n_thr; i++) {
                char col[32];
                snprintf(col, sizeof col, "n=%d/%dt", sizes[s], thr[i]);
                printf(" %15s", col);
            }
        printf("\n");
        double t[OP_COUNT][8][8] = {{{0}}}, sum[8][8] = {{0}};
        for (int s = 0; s < n_sizes && s < 8; s++)
            for (int i = 0; i < n_thr && i < 8; i++) {
                hs_set_threads(thr[i]);
                b.n = sizes[s];
                for (b.op = 0; b.op < OP_COUNT; b.op++) {
                    t[b.op][s][i] = bench_time_median(run_op, &b, reps);
                    if (b.op < OP_LAYER_OPS)
                        sum[s][i] += t[b.op][s][i];
                }
            }
        hs_set_threads(0);
        for (int op = 0; op < OP_COUNT; op++) {
            printf("%-18s", op_names[op]);
            for (int s = 0; s < n_sizes && s < 8; s++)
                for (int i = 0; i < n_thr && i < 8; i++)
                    printf(" %8.2f (%3.0f%%)", t[op][s][i] * 1e3, 100 * t[op][s][i] / sum[s][i]);
            printf("\n");
        }
        printf("%-18s", "layer's kernels");
        for (int s = 0; s < n_sizes && s < 8; s++)
            for (int i = 0; i < n_thr && i < 8; i++)
                printf(" %8.2f       ", sum[s][i] * 1e3);
        printf("\n");
    }
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}
