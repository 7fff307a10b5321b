/* GPT-BigCode (SantaCoder, StarCoder; transformers' model_type "gpt_bigcode"): GPT-2's block
 * (pre-LayerNorm, learned positions, tanh GELU, biases everywhere, tied LM head) whose
 * attention is multi-query by default: one fused c_attn stored as nn.Linear (out, in),
 * rows [Q (n_head heads) | K | V] with one K/V head, or, with multi_query false, per head
 * [q k v] (HS_TN_QKV_HEADS reorders either into [Q | K | V]). */
#include "model/arch_mqa.h"

#define BL "h.%d."
static const hs_tensor_name rows[] = {
    {HS_S_TOK_EMB, -1, "wte.weight", NULL, "token_embd.weight", NULL, 0},
    {HS_S_POS_EMB, -1, "wpe.weight", NULL, "position_embd.weight", NULL, 0},
    {HS_S_NORM1_W, -1, BL "ln_1.weight", NULL, "blk.%d.attn_norm.weight", NULL, 0},
    {HS_S_NORM1_B, -1, BL "ln_1.bias", NULL, "blk.%d.attn_norm.bias", NULL, 0},
    {HS_S_QKV_W, -1, BL "attn.c_attn.weight", NULL, "blk.%d.attn_qkv.weight", NULL,
     HS_TN_QKV_HEADS},
    {HS_S_QKV_B, -1, BL "attn.c_attn.bias", NULL, "blk.%d.attn_qkv.bias", NULL,
     HS_TN_QKV_HEADS},
    {HS_S_O_W, -1, BL "attn.c_proj.weight", NULL, "blk.%d.attn_output.weight", NULL, 0},
    {HS_S_O_B, -1, BL "attn.c_proj.bias", NULL, "blk.%d.attn_output.bias", NULL, 0},
    {HS_S_NORM2_W, -1, BL "ln_2.weight", NULL, "blk.%d.ffn_norm.weight", NULL, 0},
    {HS_S_NORM2_B, -1, BL "ln_2.bias", NULL, "blk.%d.ffn_norm.bias", NULL, 0},
    {HS_S_FC_W, -1, BL "mlp.c_fc.weight", NULL, "blk.%d.ffn_up.weight", NULL, 0},
    {HS_S_FC_B, -1, BL "mlp.c_fc.bias", NULL, "blk.%d.ffn_up.bias", NULL, 0},
    {HS_S_PROJ_W, -1, BL "mlp.c_proj.weight", NULL, "blk.%d.ffn_down.weight", NULL, 0},
    {HS_S_PROJ_B, -1, BL "mlp.c_proj.bias", NULL, "blk.%d.ffn_down.bias", NULL, 0},
    {HS_S_FINAL_NORM_W, -1, "ln_f.weight", NULL, "output_norm.weight", NULL, 0},
    {HS_S_FINAL_NORM_B, -1, "ln_f.bias", NULL, "output_norm.bias", NULL, 0},
    {HS_S_DECODER, -1, "lm_head.weight", NULL, "output.weight", NULL,
     HS_TN_OPTIONAL | HS_TN_BARE},
};
#undef BL

/* llama.cpp's starcoder (HS_ARCH_GPT_BIGCODE's gguf_name), tokenizer.ggml.model "gpt2". */
const struct hs_names hs_bigcode_names = {rows, sizeof rows / sizeof rows[0], "transformer.", 1,
                                          "gpt2"};

/* GPTBigCodeConfig's keys (GPT-2's names) and defaults: 1024 positions, n_inner 4 d,
 * LayerNorm eps 1e-5, gelu_pytorch_tanh, multi_query true, tied embeddings. The scores are
 * scaled by 1/sqrt(d_head) (scale_attn_weights false is refused); attention_softmax_in_fp32
 * and scale_attention_softmax_in_fp32 change nothing in float32 (the second divides the
 * scores by the layer's number and multiplies them back before the softmax). */
hs_status hs_parse_gpt_bigcode(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    int n_inner, mq = 1;
    hs_status st;
    c->family = HS_FAMILY_GPT_BIGCODE;
    if ((st = hs_cfg_gpt2_dims(root, c, &n_inner, err)) ||
        (st = hs_cfg_bool(root, "multi_query", &mq, err)) ||
        (st = hs_cfg_bool(root, "tie_word_embeddings", &a->tied_embeddings, err)) ||
        (st = hs_cfg_require(root, "scale_attn_weights", 1, err)) ||
        (st = hs_cfg_require(root, "add_cross_attention", 0, err)) ||
        (st = hs_cfg_gpt2_ff(c, n_inner, err)))
        return st;
    a->n_kv_head = mq ? 1 : c->n_head;
    return HS_OK;
}
