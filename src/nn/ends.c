/* The two ends of a forward pass (see block.h): the embeddings the first block reads and the
 * LM head on the last one's output (the final norm is block.c's, beside the blocks' norms). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/emb_stored.h"
#include "nn/block.h"
#include "nn/ops.h"

void hs_embed(const hs_model *m, const int32_t *ids, const int32_t *type_ids, int n, float *x)
{
    const hs_model_config *c = &m->cfg;
    const hs_arch *a = c->arch;
    int d = c->d_model, pad = a->pos_offset - 1, seen = 0;
    for (int i = 0; i < n; i++) {
        float *xi = x + (size_t)i * (size_t)d;
        hs_model_emb_row(m, ids[i], xi); /* or decoded from its stored type */
        if (a->emb_scale > 0) /* Gemma: times sqrt(d_model) in the embeddings' type */
            for (int k = 0; k < d; k++)
                xi[k] *= a->emb_scale;
        if (a->pos == HS_POS_LEARNED) { /* rotary positions turn q and k in the block */
            /* row i + offset; RoBERTa: offset + the non-pad tokens before i, a pad its own row */
            int row = !a->pos_skips_pad ? i + a->pos_offset
                      : ids[i] == pad   ? pad
                                        : a->pos_offset + seen++;
            const float *pe = m->wpe + (size_t)row * (size_t)d;
            for (int k = 0; k < d; k++)
                xi[k] += pe[k];
        }
        if (a->token_types) {
            const float *tt = m->wtt + (size_t)(type_ids ? type_ids[i] : 0) * (size_t)d;
            for (int k = 0; k < d; k++)
                xi[k] += tt[k];
        }
    }
    if (a->emb_norm) /* statistics not kept: nothing below layer 0 is differentiated */
        hs_op_layernorm(x, m->emb_ln_w, m->emb_ln_b, x, NULL, NULL, n, d, c->ln_eps);
}

const float *hs_head_transform(const hs_model *m, const float *x, float *y, float *pre,
                               float *xhat, float *rstd, int rows)
{
    const hs_model_config *c = &m->cfg;
    if (c->arch->head != HS_HEAD_MLM)
        return x;
    int d = c->d_model;
    size_t rd = (size_t)rows * (size_t)d;
    hs_op_linear(x, m->mlm_w, m->mlm_b, pre ? pre : y, rows, d, d);
    hs_op_gelu(pre ? pre : y, y, rd, c->act);
    hs_op_layernorm(y, m->mlm_ln_w, m->mlm_ln_b, y, xhat, rstd, rows, d, c->ln_eps);
    return y;
}

void hs_head_decode(const hs_model *m, const float *h, int rows, float *logits)
{
    int V = m->cfg.vocab_size;
    for (int i = 0; i < rows; i++) {
        float *row = logits + (size_t)i * (size_t)V;
        if (m->mlm_bias)
            memcpy(row, m->mlm_bias, (size_t)V * sizeof *row);
        else
            memset(row, 0, (size_t)V * sizeof *row);
    }
    float scale = m->cfg.arch->head_scale > 0 ? m->cfg.arch->head_scale : 1.0f; /* T5 tied */
    hs_model_decoder_gemm(m, h, rows, scale, logits); /* hs_op_gemm's, or from stored rows */
    float cap = m->cfg.arch->final_softcap;
    if (cap > 0) /* Gemma 2: cap tanh(z / cap) */
        for (size_t i = 0; i < (size_t)rows * (size_t)V; i++)
            logits[i] = cap * tanhf(logits[i] / cap);
}

void hs_head_decode_ids(const hs_model *m, const float *h, int rows, const int32_t *ids, int k,
                        float *logits)
{
    int d = m->cfg.d_model;
    float scale = m->cfg.arch->head_scale > 0 ? m->cfg.arch->head_scale : 1.0f;
    float cap = m->cfg.arch->final_softcap;
    float part[256]; /* a stored decoder's row, 256 values at a time (whole blocks) */
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < k; j++) {
            const float *hi = h + (size_t)i * (size_t)d, *w = m->decoder;
            double s = 0;
            for (int e0 = 0; e0 < d; e0 += 256) {
                int cnt = d - e0 < 256 ? d - e0 : 256;
                const float *we = w ? w + (size_t)ids[j] * d + e0 : part;
                if (!w)
                    hs_model_decoder_row(m, ids[j], e0, cnt, part);
                for (int e = 0; e < cnt; e++)
                    s += (double)hi[e0 + e] * we[e];
            }
            float z = (float)(scale * s) + (m->mlm_bias ? m->mlm_bias[ids[j]] : 0.0f);
            logits[(size_t)i * (size_t)k + (size_t)j] = cap > 0 ? cap * tanhf(z / cap) : z;
        }
}
