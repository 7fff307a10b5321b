/* headscope attn on an encoder-decoder (T5): the encoder's self-attention, the decoder's
 * self-attention and the cross-attention, each to its own .npy beside OUT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/core.h"
#include "headscope/importance.h"
#include "headscope/npy.h"
#include "nn/ops.h"

enum { K_ENC, K_DEC, K_CROSS, K_N };
static const char *const kind_name[K_N] = {"encoder", "decoder", "cross"};

typedef struct encdec_sink {
    const hs_model_config *c;
    hs_npy_stream *s[K_N];
    hs_error err;
    int failed;
} encdec_sink;

static int write_maps(encdec_sink *k, int kind, const float *probs, size_t count)
{
    k->failed = hs_npy_stream_write(k->s[kind], probs, count, &k->err) != HS_OK;
    return k->failed;
}

static int on_self(void *user, int layer, const float *probs, int n_head, int n)
{
    encdec_sink *k = user;
    return write_maps(k, layer < k->c->n_enc_layer ? K_ENC : K_DEC, probs,
                      (size_t)n_head * (size_t)n * (size_t)n);
}

static int on_cross(void *user, int layer, const float *probs, int n_head, int nd, int ne)
{
    (void)layer;
    return write_maps(user, K_CROSS, probs, (size_t)n_head * (size_t)nd * (size_t)ne);
}

void cli_attn_encdec_path(const char *out, const char *kind, char *buf, size_t cap)
{
    size_t len = strlen(out);
    if (len > 4 && !strcmp(out + len - 4, ".npy"))
        len -= 4;
    snprintf(buf, cap, "%.*s.%s.npy", (int)len, out, kind);
}

/* --ablation (gradient 0) or --gradient (1): (2, n_layer, n_head), [0] the self-attention
 * heads' loss changes or signed mask derivatives, [1] the cross-attention heads' (NaN in the
 * encoder's rows), into path. */
static int write_heads(const hs_model *m, const int32_t *src, int n_enc, const int32_t *tgt,
                       int n_dec, int gradient, const char *path)
{
    const hs_model_config *c = hs_model_config_of(m);
    size_t LH = (size_t)c->n_layer * (size_t)c->n_head, shape[3] = {2, (size_t)c->n_layer,
                                                                    (size_t)c->n_head};
    double base, *d = malloc(2 * LH * sizeof *d);
    float *f = malloc(2 * LH * sizeof *f);
    hs_error err = {{0}};
    hs_status st = !d || !f ? hs_fail(&err, HS_E_NOMEM, "out of memory")
            : gradient ? hs_encdec_gradient(m, src, n_enc, tgt, n_dec, NULL, NULL, &base, d, d + LH,
                                                  &err)
                       : hs_encdec_ablation(m, src, n_enc, tgt, n_dec, &base, d, d + LH, &err);
    for (size_t k = 0; !st && k < 2 * LH; k++)
        f[k] = (float)d[k];
    if (!st)
        st = hs_npy_write_f32(path, f, shape, 3, &err);
    if (st)
        cli_error("attn", "%s", err.msg);
    free(d);
    free(f);
    return st ? EXIT_FAIL : 0;
}

int cli_attn_encdec(const hs_model *m, const int32_t *src, int n_enc, const int32_t *tgt,
                    int n_dec, const char *out, const char *nll_path, const char *abl_path,
                    const char *grad_path, int allow_nonfinite, int quiet)
{
    const hs_model_config *c = hs_model_config_of(m);
    size_t L_enc = (size_t)c->n_enc_layer, L_dec = (size_t)(c->n_layer - c->n_enc_layer);
    size_t H = (size_t)c->n_head, ne = (size_t)n_enc, nd = (size_t)n_dec;
    size_t shapes[K_N][4] = {{L_enc, H, ne, ne}, {L_dec, H, nd, nd}, {L_dec, H, nd, ne}};
    encdec_sink k = {.c = c};
    char path[K_N][4096];
    int rc = EXIT_FAIL;
    /* teacher forcing: the decoder reads the start token, then the target but its last */
    int32_t *dec = malloc(nd * sizeof *dec);
    float *logits = malloc(nd * (size_t)c->vocab_size * sizeof *logits);
    if (!dec || !logits) {
        cli_error("attn", "out of memory for the decoder's logits");
        goto done;
    }
    for (size_t i = 0; i < nd; i++) /* the last one is read by the loss only */
        if (tgt[i] < 0 || tgt[i] >= c->vocab_size) {
            cli_error("attn", "target token id %d at position %zu is outside the vocabulary "
                      "(size %d)", (int)tgt[i], i, c->vocab_size);
            goto done;
        }
    dec[0] = c->decoder_start_id;
    memcpy(dec + 1, tgt, (nd - 1) * sizeof *dec);
    for (int i = 0; i < K_N; i++) {
        cli_attn_encdec_path(out, kind_name[i], path[i], sizeof path[i]);
        if (hs_npy_stream_open(path[i], shapes[i], 4, &k.s[i], &k.err) != HS_OK) {
            cli_error("attn", "%s", k.err.msg);
            goto done;
        }
    }
    hs_forward_opts fo = {.on_attn = on_self, .on_cross = on_cross, .user = &k,
                          .allow_nonfinite = allow_nonfinite, .logits = logits};
    hs_error err = {{0}};
    if (hs_forward_encdec(m, src, n_enc, dec, n_dec, &fo, NULL, &err) != HS_OK) {
        cli_error("attn", "%s", k.failed ? k.err.msg : err.msg);
        goto done;
    }
    for (int i = 0; i < K_N; i++) {
        hs_npy_stream *s = k.s[i];
        k.s[i] = NULL;
        if (hs_npy_stream_close(s, 1, &err) != HS_OK) {
            cli_error("attn", "%s", err.msg);
            goto done;
        }
    }
    if (nll_path) { /* decoder row i predicts target token i */
        for (size_t i = 0; i < nd; i++) {
            const float *row = logits + i * (size_t)c->vocab_size;
            logits[i] = (float)(hs_op_log_sum_exp(row, c->vocab_size) - (double)row[tgt[i]]);
        }
        if (hs_npy_write_f32(nll_path, logits, &nd, 1, &err) != HS_OK) {
            cli_error("attn", "%s", err.msg);
            goto done;
        }
    }
    if ((abl_path && write_heads(m, src, n_enc, tgt, n_dec, 0, abl_path)) ||
        (grad_path && write_heads(m, src, n_enc, tgt, n_dec, 1, grad_path)))
        goto done;
    if (!quiet)
        for (int i = 0; i < K_N; i++)
            printf("wrote %s: %zu layers x %zu heads x %zu x %zu (%s)\n", cli_shown(path[i]),
                   shapes[i][0], H, shapes[i][2], shapes[i][3],
                   i == K_ENC ? "encoder tokens" : i == K_DEC ? "decoder tokens"
                                                              : "decoder x encoder tokens");
    rc = cli_finish_stdout("attn");
done:
    for (int i = 0; i < K_N; i++)
        hs_npy_stream_close(k.s[i], 0, NULL);
    free(dec);
    free(logits);
    return rc;
}
