/* T5's tensor names as transformers' T5ForConditionalGeneration saves them (modeling_t5's
 * module names): the encoder's blocks (layer.0 self-attention, layer.1 MLP), the decoder's
 * (layer.0 self-attention, layer.1 cross-attention, layer.2 MLP), the relative position bias
 * of each stack's first block, the shared embeddings and the LM head. No GGUF form yet. */
#include "model/arch_t5.h"
#include "model/model_internal.h"

const char *const hs_t5_specials[HS_T5_N_SPECIALS] = {"<pad>", "</s>", "<unk>"};

#define E "encoder.block.%d.layer."
#define D "decoder.block.%d.layer."
#define ENC(slot, part, name) {slot, part, E name, NULL, NULL, NULL, HS_TN_ENC}
#define DEC(slot, part, name) {slot, part, D name, NULL, NULL, NULL, HS_TN_DEC}
/* the MLP: wi (ReLU, v1.0) or wi_0 (the gate) and wi_1 (v1.1's gated GELU), then wo */
#define T5_MLP(ROW, l)                                                                       \
    ROW(HS_S_NORM2_W, -1, l ".layer_norm.weight"),                                           \
    ROW(HS_S_FC_W, -1, l ".DenseReluDense.wi.weight"),                                       \
    ROW(HS_S_FC_W, 0, l ".DenseReluDense.wi_0.weight"),                                      \
    ROW(HS_S_FC_W, 1, l ".DenseReluDense.wi_1.weight"),                                      \
    ROW(HS_S_PROJ_W, -1, l ".DenseReluDense.wo.weight")

/* the self-attention, layer.0 of both stacks' blocks */
#define T5_SELF(ROW)                                                                         \
    ROW(HS_S_NORM1_W, -1, "0.layer_norm.weight"),                                            \
    ROW(HS_S_QKV_W, 0, "0.SelfAttention.q.weight"),                                          \
    ROW(HS_S_QKV_W, 1, "0.SelfAttention.k.weight"),                                          \
    ROW(HS_S_QKV_W, 2, "0.SelfAttention.v.weight"),                                          \
    ROW(HS_S_O_W, -1, "0.SelfAttention.o.weight")

static const hs_tensor_name t5_names[] = {
    {HS_S_TOK_EMB, -1, "shared.weight", "encoder.embed_tokens.weight", NULL, NULL, 0},
    {HS_S_REL_ENC, -1, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
     NULL, NULL, NULL, 0},
    {HS_S_REL_DEC, -1, "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
     NULL, NULL, NULL, 0},
    T5_SELF(ENC),
    T5_MLP(ENC, "1"),
    T5_SELF(DEC),
    DEC(HS_S_XNORM_W, -1, "1.layer_norm.weight"),
    DEC(HS_S_XQKV_W, 0, "1.EncDecAttention.q.weight"),
    DEC(HS_S_XQKV_W, 1, "1.EncDecAttention.k.weight"),
    DEC(HS_S_XQKV_W, 2, "1.EncDecAttention.v.weight"),
    DEC(HS_S_XO_W, -1, "1.EncDecAttention.o.weight"),
    T5_MLP(DEC, "2"),
    {HS_S_ENC_NORM_W, -1, "encoder.final_layer_norm.weight", NULL, NULL, NULL, 0},
    {HS_S_FINAL_NORM_W, -1, "decoder.final_layer_norm.weight", NULL, NULL, NULL, 0},
    {HS_S_DECODER, -1, "lm_head.weight", NULL, NULL, NULL, HS_TN_OPTIONAL | HS_TN_BARE},
};

const struct hs_names hs_t5_table = {t5_names, sizeof t5_names / sizeof t5_names[0], "", 1, NULL};

int hs_t5_row_in_layer(const hs_model_config *c, const hs_tensor_name *e, int l)
{
    if (e->flags & HS_TN_ENC)
        return l < c->n_enc_layer;
    if (e->flags & HS_TN_DEC)
        return l >= c->n_enc_layer;
    return 1;
}

int hs_names_index(const hs_model_config *c, const hs_tensor_name *e, int layer)
{
    return layer >= 0 && (e->flags & HS_TN_DEC) ? layer - c->n_enc_layer : layer;
}

const char *hs_t5_beyond(const hs_arch *a, const hs_model_config *c)
{
    if (a->enc_dec && (c->n_enc_layer < 1 || c->n_enc_layer >= c->n_layer ||
                       a->norm_place != HS_NORM_PRE || a->norm_kind != HS_NORM_RMS ||
                       a->parallel_residual || c->n_kv_head != c->n_head ||
                       a->pos != HS_POS_RELATIVE))
        return "an encoder-decoder other than T5's (pre-norm, relative positions, both stacks)";
    if (a->pos == HS_POS_RELATIVE &&
        (!a->enc_dec || a->rel_buckets < 4 || a->rel_max_distance < 1))
        return "relative position buckets outside an encoder-decoder, or fewer than 4";
    return NULL;
}
