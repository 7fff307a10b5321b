/* make bench's T5 row (--t5 DIR): the forward pass of an encoder-decoder at a real shape with
 * random weights (t5-base's: 12 + 12 layers of 12 heads, d_model 768, d_ff 3072, vocab 32128,
 * fixtures/ref/t5_ref.py --shape t5-base), n = 128 encoder and 128 decoder tokens, every map
 * of the three kinds handed to observers, all threads. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "headscope/forward.h"

typedef struct t5_run {
    const hs_model *m;
    const int32_t *src, *dec;
    int n;
    hs_forward_ws *ws;
    hs_error err;
} t5_run;

static int no_self(void *user, int layer, const float *probs, int n_head, int n)
{
    (void)user, (void)layer, (void)probs, (void)n_head, (void)n;
    return 0;
}

static int no_cross(void *user, int layer, const float *probs, int n_head, int nd, int ne)
{
    (void)user, (void)layer, (void)probs, (void)n_head, (void)nd, (void)ne;
    return 0;
}

static int t5_once(void *ctx)
{
    t5_run *r = ctx;
    hs_forward_opts o = {.on_attn = no_self, .on_cross = no_cross};
    return hs_forward_encdec(r->m, r->src, r->n, r->dec, r->n, &o, r->ws, &r->err) != HS_OK;
}

/* Multiply-adds times 2 of both stacks' projections, MLPs and attention at n + n tokens. */
static double t5_flops(const hs_model_config *c, int n)
{
    double d = c->d_model, A = (double)c->n_head * c->d_head, ff = c->d_ff, nn = (double)n * n;
    int L_enc = c->n_enc_layer, L_dec = c->n_layer - c->n_enc_layer;
    double self = 2.0 * n * (4 * d * A + 2 * d * ff) + 4 * nn * A;
    double cross = 2.0 * n * (4 * d * A) + 4 * nn * A;
    return L_enc * self + L_dec * (self + cross);
}

void bench_t5_rows(const char *path, int reps)
{
    hs_model *m = NULL;
    t5_run r = {0};
    int n = 128;
    int32_t *ids = malloc(2 * (size_t)n * sizeof *ids);
    if (!ids || bench_load(path, &m, &r.err) != HS_OK) {
        fprintf(stderr, "hs-bench: t5: %s\n", ids ? r.err.msg : "out of memory");
        free(ids);
        return;
    }
    const hs_model_config *c = hs_model_config_of(m);
    for (int i = 0; i < 2 * n; i++)
        ids[i] = (int32_t)((i * 7919 + 3) % c->vocab_size);
    r.m = m;
    r.src = ids;
    r.dec = ids + n;
    r.n = n;
    double med = -1;
    if (hs_forward_ws_new(m, n, &r.ws, &r.err) == HS_OK)
        med = bench_time_median(t5_once, &r, reps);
    if (med < 0)
        fprintf(stderr, "hs-bench: t5: %s\n", r.err.msg);
    else
        printf("\nencoder-decoder, t5-base's shape with random weights (%d + %d layers x %d "
               "heads, d_model %d, d_ff %d, vocab %d; not a trained model):\n"
               "  forward, n = %d encoder + %d decoder tokens, every map of the three kinds, "
               "all threads: %.1f ms, %.1f GFLOP/s\n",
               c->n_enc_layer, c->n_layer - c->n_enc_layer, c->n_head, c->d_model, c->d_ff,
               c->vocab_size, n, n, med * 1e3, t5_flops(c, n) / med / 1e9);
    hs_forward_ws_free(r.ws);
    hs_model_free(m);
    free(ids);
}
