/* T5's tensor names as transformers' T5ForConditionalGeneration saves them (modeling_t5's
 * module names): the encoder's blocks (layer.0 self-attention, layer.1 MLP), the decoder's
 * (layer.0 self-attention, layer.1 cross-attention, layer.2 MLP), the relative position bias
 * of each stack's first block, the shared embeddings and the LM head; and llama.cpp's GGUF
 * names of its t5 architecture (enc.blk.N.* / dec.blk.N.*, each stack numbered from 0,
 * the relative attention bias in each stack's blk.0; wi and wi_1 are ffn_up, wi_0 ffn_gate;
 * src/model/gguf_t5.c reads and writes the rest). */
#include "model/arch_t5.h"
#include "model/model_internal.h"

const char *const hs_t5_specials[HS_T5_N_SPECIALS] = {"<pad>", "</s>", "<unk>"};

#define E "encoder.block.%d.layer."
#define D "decoder.block.%d.layer."
#define ENC(slot, part, name, g) {slot, part, E name, NULL, "enc.blk.%d." g ".weight", NULL, HS_TN_ENC}
#define DEC(slot, part, name, g) {slot, part, D name, NULL, "dec.blk.%d." g ".weight", NULL, HS_TN_DEC}
/* the MLP: wi (ReLU, v1.0) or wi_0 (the gate) and wi_1 (v1.1's gated GELU), then wo */
#define T5_MLP(ROW, l)                                                                       \
    ROW(HS_S_NORM2_W, -1, l ".layer_norm.weight", "ffn_norm"),                               \
    ROW(HS_S_FC_W, -1, l ".DenseReluDense.wi.weight", "ffn_up"),                             \
    ROW(HS_S_FC_W, 0, l ".DenseReluDense.wi_0.weight", "ffn_gate"),                          \
    ROW(HS_S_FC_W, 1, l ".DenseReluDense.wi_1.weight", "ffn_up"),                            \
    ROW(HS_S_PROJ_W, -1, l ".DenseReluDense.wo.weight", "ffn_down")

/* the self-attention, layer.0 of both stacks' blocks */
#define T5_SELF(ROW)                                                                         \
    ROW(HS_S_NORM1_W, -1, "0.layer_norm.weight", "attn_norm"),                               \
    ROW(HS_S_QKV_W, 0, "0.SelfAttention.q.weight", "attn_q"),                                \
    ROW(HS_S_QKV_W, 1, "0.SelfAttention.k.weight", "attn_k"),                                \
    ROW(HS_S_QKV_W, 2, "0.SelfAttention.v.weight", "attn_v"),                                \
    ROW(HS_S_O_W, -1, "0.SelfAttention.o.weight", "attn_o")

static const hs_tensor_name t5_names[] = {
    {HS_S_TOK_EMB, -1, "shared.weight", "encoder.embed_tokens.weight", "token_embd.weight", NULL, 0},
    {HS_S_REL_ENC, -1, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
     NULL, "enc.blk.0.attn_rel_b.weight", NULL, 0},
    {HS_S_REL_DEC, -1, "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
     NULL, "dec.blk.0.attn_rel_b.weight", NULL, 0},
    T5_SELF(ENC),
    T5_MLP(ENC, "1"),
    T5_SELF(DEC),
    DEC(HS_S_XNORM_W, -1, "1.layer_norm.weight", "cross_attn_norm"),
    DEC(HS_S_XQKV_W, 0, "1.EncDecAttention.q.weight", "cross_attn_q"),
    DEC(HS_S_XQKV_W, 1, "1.EncDecAttention.k.weight", "cross_attn_k"),
    DEC(HS_S_XQKV_W, 2, "1.EncDecAttention.v.weight", "cross_attn_v"),
    DEC(HS_S_XO_W, -1, "1.EncDecAttention.o.weight", "cross_attn_o"),
    T5_MLP(DEC, "2"),
    {HS_S_ENC_NORM_W, -1, "encoder.final_layer_norm.weight", NULL, "enc.output_norm.weight", NULL, 0},
    {HS_S_FINAL_NORM_W, -1, "decoder.final_layer_norm.weight", NULL, "dec.output_norm.weight", NULL, 0},
    {HS_S_DECODER, -1, "lm_head.weight", NULL, "output.weight", NULL, HS_TN_OPTIONAL | HS_TN_BARE},
};

/* tokenizer.ggml.model "t5": llama.cpp's UGM (SentencePiece Unigram) vocabulary */
const struct hs_names hs_t5_table = {t5_names, sizeof t5_names / sizeof t5_names[0], "", 1, "t5"};

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
