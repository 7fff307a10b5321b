/* The tensor-name tables walked (see model_internal.h): the rows a model's descriptor asks
 * for, each row's shape, and the weight pointer of each slot. */
#include <stdio.h>
#include <string.h>

#include "model/arch_norms.h"
#include "model/arch_t5.h"
#include "model/model_internal.h"

/* A row applies to the model: the slots of features the descriptor leaves out are not
 * asked for (no token types, no LayerNorm biases under RMSNorm, the biases a family
 * without biases lacks, no position table under rotary positions). */
static int row_applies(const hs_arch *a, const hs_tensor_name *e)
{
    if (!a->enc_dec && (e->flags & (HS_TN_ENC | HS_TN_DEC)))
        return 0;
    if (a->enc_dec && e->slot == HS_S_FC_W) /* T5: wi, or wi_0 and wi_1 */
        return (e->part >= 0) == (a->gated != 0);
    int layer_norm = a->norm_kind == HS_NORM_LAYER;
    switch (e->slot) {
    case HS_S_POS_EMB: return a->pos == HS_POS_LEARNED;
    case HS_S_TYPE_EMB: return a->token_types;
    case HS_S_EMB_NORM_W: return a->emb_norm;
    case HS_S_EMB_NORM_B: return a->emb_norm && layer_norm;
    case HS_S_NORM1_B:
    case HS_S_NORM2_B: return layer_norm;
    case HS_S_QKV_B: return a->biases || a->qkv_bias;
    case HS_S_O_B: return a->biases || a->o_bias;
    case HS_S_FC_B:
    case HS_S_PROJ_B: return a->biases;
    case HS_S_FINAL_NORM_W: return a->norm_place == HS_NORM_PRE;
    case HS_S_FINAL_NORM_B: return a->norm_place == HS_NORM_PRE && layer_norm;
    case HS_S_MLM_W:
    case HS_S_MLM_B:
    case HS_S_MLM_NORM_W:
    case HS_S_MLM_NORM_B:
    case HS_S_MLM_BIAS: return a->head == HS_HEAD_MLM;
    case HS_S_Q_NORM_W:
    case HS_S_K_NORM_W: return a->qk_norm != HS_QK_NORM_NONE;
    case HS_S_POST_ATTN_NORM_W:
    case HS_S_POST_MLP_NORM_W: return a->post_norms;
    case HS_S_NORM1_W:
    case HS_S_NORM2_W: return !a->no_pre_norm;
    case HS_S_MLA_QA_NORM_W:
    case HS_S_MLA_QB_W: return a->mla_q_lora > 0;
    default: return 1;
    }
}

hs_status hs_names_walk(const hs_model_config *c, hs_names_fn fn, void *ctx, hs_error *err)
{
    const struct hs_names *t = c->arch->names;
    size_t first = t->n, last = 0;
    for (size_t i = 0; i < t->n; i++)
        if (HS_SLOT_IS_LAYER(t->t[i].slot)) {
            first = i < first ? i : first;
            last = i;
        }
    hs_status st = HS_OK;
    for (size_t i = 0; i < t->n && !st; i++) {
        if (i == first) {
            for (int l = 0; l < c->n_layer && !st; l++)
                for (size_t k = first; k <= last && !st; k++)
                    if (row_applies(c->arch, &t->t[k]) && hs_t5_row_in_layer(c, &t->t[k], l))
                        st = fn(ctx, &t->t[k], l, err);
            i = last;
            continue;
        }
        if (row_applies(c->arch, &t->t[i]))
            st = fn(ctx, &t->t[i], -1, err);
    }
    return st;
}

const hs_tensor_name *hs_names_row(const hs_arch *a, hs_slot s)
{
    for (size_t i = 0; i < a->names->n; i++)
        if (a->names->t[i].slot == s)
            return &a->names->t[i];
    return NULL;
}

const char *hs_names_format(const char *pattern, int layer, char *buf, size_t cap)
{
    if (strstr(pattern, "%d")) {
        const char *at = strstr(pattern, "%d");
        snprintf(buf, cap, "%.*s%d%s", (int)(at - pattern), pattern, layer, at + 2);
    } else {
        snprintf(buf, cap, "%s", pattern);
    }
    return buf;
}

int hs_model_attn_width(const hs_model_config *c)
{
    return c->n_head * c->d_head;
}

int hs_qkv_width(const hs_model_config *c)
{
    if (c->arch && c->arch->mla_kv_lora > 0)
        return hs_mla_qkv_width(c);
    return hs_model_attn_width(c) + 2 * c->n_kv_head * c->d_head;
}

int hs_ff_width(const hs_model_config *c)
{
    return c->gated ? 2 * c->d_ff : c->d_ff;
}

hs_tensor_shape hs_names_shape(const hs_model_config *c, const hs_tensor_name *e)
{
    int d = c->d_model, f = c->d_ff, V = c->vocab_size, W = hs_qkv_width(c), F = hs_ff_width(c);
    int A = hs_model_attn_width(c);
    hs_tensor_shape s = {HS_K_VEC, 1, d, d, 0, 0};
    if (hs_mla_shape(c, e, &s))
        return s;
    switch (e->slot) {
    case HS_S_TOK_EMB:
    case HS_S_DECODER: s = (hs_tensor_shape){HS_K_ROWS, V, d, d, 0, 0}; break;
    case HS_S_POS_EMB:
        s = (hs_tensor_shape){HS_K_ROWS, c->n_ctx + c->arch->pos_offset, d, d, 0, 0};
        break;
    case HS_S_TYPE_EMB: s = (hs_tensor_shape){HS_K_ROWS, c->type_vocab_size, d, d, 0, 0}; break;
    case HS_S_QKV_W: s = (hs_tensor_shape){HS_K_MAT, d, W, W, 0, 0}; break;
    case HS_S_QKV_B: s = (hs_tensor_shape){HS_K_VEC, 1, W, W, 0, 0}; break;
    case HS_S_O_W: s = (hs_tensor_shape){HS_K_MAT, A, d, d, 0, 0}; break;
    case HS_S_MLM_W: s = (hs_tensor_shape){HS_K_MAT, d, d, d, 0, 0}; break;
    case HS_S_FC_W: s = (hs_tensor_shape){HS_K_MAT, d, F, F, 0, 0}; break;
    case HS_S_FC_B: s = (hs_tensor_shape){HS_K_VEC, 1, F, F, 0, 0}; break;
    case HS_S_PROJ_W: s = (hs_tensor_shape){HS_K_MAT, f, d, d, 0, 0}; break;
    case HS_S_MLM_BIAS: s = (hs_tensor_shape){HS_K_VEC, 1, V, V, 0, 0}; break;
    case HS_S_Q_NORM_W:
    case HS_S_K_NORM_W: s = hs_qk_norm_shape(c, e->slot == HS_S_K_NORM_W); break;
    case HS_S_XQKV_W: s = (hs_tensor_shape){HS_K_MAT, d, 3 * A, 3 * A, 0, 0}; break;
    case HS_S_XO_W: s = (hs_tensor_shape){HS_K_MAT, A, d, d, 0, 0}; break;
    case HS_S_REL_ENC:
    case HS_S_REL_DEC:
        s = (hs_tensor_shape){HS_K_ROWS, c->arch->rel_buckets, c->n_head, c->n_head, 0, 0};
        break;
    default: break; /* norms and d-long biases */
    }
    s.slot_floats = (size_t)s.rows * (size_t)s.cols;
    if (e->part >= 0 && (e->slot == HS_S_FC_W || e->slot == HS_S_FC_B)) {
        s.cols = f; /* gate, up */
        s.off = e->part * f;
    } else if (e->part >= 0) { /* Q (n_head heads), K, V (n_kv_head heads each) */
        int kv = c->n_kv_head * c->d_head;
        s.cols = e->part == 0 ? A : kv;
        s.off = e->part == 0 ? 0 : A + (e->part - 1) * kv;
    }
    return s;
}

const float **hs_layer_slot_ptr(hs_layer *L, hs_slot s)
{
    switch (s) {
    case HS_S_NORM1_W: return &L->ln1_w;
    case HS_S_NORM1_B: return &L->ln1_b;
    case HS_S_QKV_W: return &L->w_qkv;
    case HS_S_QKV_B: return &L->b_qkv;
    case HS_S_O_W: return &L->w_o;
    case HS_S_O_B: return &L->b_o;
    case HS_S_NORM2_W: return &L->ln2_w;
    case HS_S_NORM2_B: return &L->ln2_b;
    case HS_S_FC_W: return &L->w_fc;
    case HS_S_FC_B: return &L->b_fc;
    case HS_S_PROJ_W: return &L->w_proj;
    case HS_S_PROJ_B: return &L->b_proj;
    case HS_S_Q_NORM_W: return &L->q_norm_w;
    case HS_S_K_NORM_W: return &L->k_norm_w;
    case HS_S_POST_ATTN_NORM_W: return &L->post1_w;
    case HS_S_POST_MLP_NORM_W: return &L->post2_w;
    case HS_S_XNORM_W: return &L->xln_w;
    case HS_S_XQKV_W: return &L->w_xqkv;
    case HS_S_XO_W: return &L->w_xo;
    default: return hs_mla_slot_ptr(L, s);
    }
}

const float **hs_slot_ptr(hs_model *m, hs_slot s, int layer)
{
    if (HS_SLOT_IS_LAYER(s))
        return hs_layer_slot_ptr(&m->layers[layer], s);
    switch (s) {
    case HS_S_TOK_EMB: return &m->wte;
    case HS_S_POS_EMB: return &m->wpe;
    case HS_S_TYPE_EMB: return &m->wtt;
    case HS_S_EMB_NORM_W: return &m->emb_ln_w;
    case HS_S_EMB_NORM_B: return &m->emb_ln_b;
    case HS_S_FINAL_NORM_W: return &m->lnf_w;
    case HS_S_FINAL_NORM_B: return &m->lnf_b;
    case HS_S_MLM_W: return &m->mlm_w;
    case HS_S_MLM_B: return &m->mlm_b;
    case HS_S_MLM_NORM_W: return &m->mlm_ln_w;
    case HS_S_MLM_NORM_B: return &m->mlm_ln_b;
    case HS_S_MLM_BIAS: return &m->mlm_bias;
    case HS_S_DECODER: return &m->decoder;
    case HS_S_ENC_NORM_W: return &m->enc_lnf_w;
    case HS_S_REL_ENC: return &m->rel_enc;
    case HS_S_REL_DEC: return &m->rel_dec;
    default: return NULL;
    }
}
