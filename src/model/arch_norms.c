/* The normalised decoders (arch_norms.h): their tensor-name tables and what their
 * descriptors may combine. Hugging Face names as save_pretrained writes them (Qwen3ForCausalLM,
 * Olmo2ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM), GGUF names as llama.cpp's
 * gguf-py constants spell them. */
#include <math.h>

#include "model/arch_norms.h"

#define NL "layers.%d."
#define ROW_EMB {HS_S_TOK_EMB, -1, "embed_tokens.weight", NULL, "token_embd.weight", NULL, 0}
#define ROW_PRE_ATTN \
    {HS_S_NORM1_W, -1, NL "input_layernorm.weight", NULL, "blk.%d.attn_norm.weight", NULL, 0}
#define ROWS_QKV \
    {HS_S_QKV_W, 0, NL "self_attn.q_proj.weight", NULL, "blk.%d.attn_q.weight", NULL, 0}, \
    {HS_S_QKV_W, 1, NL "self_attn.k_proj.weight", NULL, "blk.%d.attn_k.weight", NULL, 0}, \
    {HS_S_QKV_W, 2, NL "self_attn.v_proj.weight", NULL, "blk.%d.attn_v.weight", NULL, 0}
#define ROWS_QK_NORM \
    {HS_S_Q_NORM_W, -1, NL "self_attn.q_norm.weight", NULL, "blk.%d.attn_q_norm.weight", NULL, 0}, \
    {HS_S_K_NORM_W, -1, NL "self_attn.k_norm.weight", NULL, "blk.%d.attn_k_norm.weight", NULL, 0}
#define ROW_O \
    {HS_S_O_W, -1, NL "self_attn.o_proj.weight", NULL, "blk.%d.attn_output.weight", NULL, 0}
#define ROW_POST_ATTN \
    {HS_S_POST_ATTN_NORM_W, -1, NL "post_attention_layernorm.weight", NULL, \
     "blk.%d.post_attention_norm.weight", NULL, 0}
#define ROWS_MLP \
    {HS_S_FC_W, 0, NL "mlp.gate_proj.weight", NULL, "blk.%d.ffn_gate.weight", NULL, 0}, \
    {HS_S_FC_W, 1, NL "mlp.up_proj.weight", NULL, "blk.%d.ffn_up.weight", NULL, 0}, \
    {HS_S_PROJ_W, -1, NL "mlp.down_proj.weight", NULL, "blk.%d.ffn_down.weight", NULL, 0}
#define ROW_POST_MLP \
    {HS_S_POST_MLP_NORM_W, -1, NL "post_feedforward_layernorm.weight", NULL, \
     "blk.%d.post_ffw_norm.weight", NULL, 0}
#define ROWS_END \
    {HS_S_FINAL_NORM_W, -1, "norm.weight", NULL, "output_norm.weight", NULL, 0}, \
    {HS_S_DECODER, -1, "lm_head.weight", NULL, "output.weight", NULL, \
     HS_TN_OPTIONAL | HS_TN_BARE}

/* Qwen3: Llama's rows with the per-head query and key norms, no biases. */
static const hs_tensor_name qwen3_names[] = {
    ROW_EMB, ROW_PRE_ATTN, ROWS_QKV, ROWS_QK_NORM, ROW_O,
    {HS_S_NORM2_W, -1, NL "post_attention_layernorm.weight", NULL, "blk.%d.ffn_norm.weight", NULL,
     0},
    ROWS_MLP, ROWS_END,
};

/* Qwen3-MoE: Qwen3's rows; a dense layer's MLP (mlp_only_layers, decoder_sparse_step) is
 * optional here and checked by src/model/moe_weights.c, which reads the experts. */
#define OPT(slot, part, x, gguf) {slot, part, NL x, NULL, gguf, NULL, HS_TN_OPTIONAL}
static const hs_tensor_name qwen3_moe_names[] = {
    ROW_EMB, ROW_PRE_ATTN, ROWS_QKV, ROWS_QK_NORM, ROW_O,
    {HS_S_NORM2_W, -1, NL "post_attention_layernorm.weight", NULL, "blk.%d.ffn_norm.weight", NULL,
     0},
    OPT(HS_S_FC_W, 0, "mlp.gate_proj.weight", "blk.%d.ffn_gate.weight"),
    OPT(HS_S_FC_W, 1, "mlp.up_proj.weight", "blk.%d.ffn_up.weight"),
    OPT(HS_S_PROJ_W, -1, "mlp.down_proj.weight", "blk.%d.ffn_down.weight"),
    ROWS_END,
};
#undef OPT

/* OLMo-2: no norm before the sublayers; post_attention_layernorm is the attention
 * output's norm (Llama's name for the MLP's input norm). */
static const hs_tensor_name olmo2_names[] = {
    ROW_EMB, ROWS_QKV, ROWS_QK_NORM, ROW_O, ROW_POST_ATTN, ROWS_MLP, ROW_POST_MLP, ROWS_END,
};

/* Gemma 2: four norms a layer, pre_feedforward_layernorm the MLP's input norm. */
#define ROW_PRE_MLP \
    {HS_S_NORM2_W, -1, NL "pre_feedforward_layernorm.weight", NULL, "blk.%d.ffn_norm.weight", \
     NULL, 0}
static const hs_tensor_name gemma2_names[] = {
    ROW_EMB, ROW_PRE_ATTN, ROWS_QKV, ROW_O, ROW_POST_ATTN, ROW_PRE_MLP, ROWS_MLP, ROW_POST_MLP,
    ROWS_END,
};

/* Gemma 3: Gemma 2's with the per-head query and key norms. */
static const hs_tensor_name gemma3_names[] = {
    ROW_EMB, ROW_PRE_ATTN, ROWS_QKV, ROWS_QK_NORM, ROW_O, ROW_POST_ATTN, ROW_PRE_MLP, ROWS_MLP,
    ROW_POST_MLP, ROWS_END,
};

/* Gemma 3's rows inside a gemma3 checkpoint: language_model.model.X (transformers before
 * 4.52) or model.language_model.X, the head language_model.lm_head or lm_head. */
#define MM(slot, part, x, gguf) \
    {slot, part, "language_model.model." x, "model.language_model." x, gguf, NULL, HS_TN_BARE}
static const hs_tensor_name gemma3_mm_names[] = {
    MM(HS_S_TOK_EMB, -1, "embed_tokens.weight", "token_embd.weight"),
    MM(HS_S_NORM1_W, -1, NL "input_layernorm.weight", "blk.%d.attn_norm.weight"),
    MM(HS_S_QKV_W, 0, NL "self_attn.q_proj.weight", "blk.%d.attn_q.weight"),
    MM(HS_S_QKV_W, 1, NL "self_attn.k_proj.weight", "blk.%d.attn_k.weight"),
    MM(HS_S_QKV_W, 2, NL "self_attn.v_proj.weight", "blk.%d.attn_v.weight"),
    MM(HS_S_Q_NORM_W, -1, NL "self_attn.q_norm.weight", "blk.%d.attn_q_norm.weight"),
    MM(HS_S_K_NORM_W, -1, NL "self_attn.k_norm.weight", "blk.%d.attn_k_norm.weight"),
    MM(HS_S_O_W, -1, NL "self_attn.o_proj.weight", "blk.%d.attn_output.weight"),
    MM(HS_S_POST_ATTN_NORM_W, -1, NL "post_attention_layernorm.weight",
       "blk.%d.post_attention_norm.weight"),
    MM(HS_S_NORM2_W, -1, NL "pre_feedforward_layernorm.weight", "blk.%d.ffn_norm.weight"),
    MM(HS_S_FC_W, 0, NL "mlp.gate_proj.weight", "blk.%d.ffn_gate.weight"),
    MM(HS_S_FC_W, 1, NL "mlp.up_proj.weight", "blk.%d.ffn_up.weight"),
    MM(HS_S_PROJ_W, -1, NL "mlp.down_proj.weight", "blk.%d.ffn_down.weight"),
    MM(HS_S_POST_MLP_NORM_W, -1, NL "post_feedforward_layernorm.weight",
       "blk.%d.post_ffw_norm.weight"),
    MM(HS_S_FINAL_NORM_W, -1, "norm.weight", "output_norm.weight"),
    {HS_S_DECODER, -1, "language_model.lm_head.weight", "lm_head.weight", "output.weight", NULL,
     HS_TN_OPTIONAL | HS_TN_BARE},
};
#undef MM

#define TABLE(t) t, sizeof t / sizeof t[0], "model."
/* GGUF tokenizer models as llama.cpp's converter writes them: byte-level "gpt2" for Qwen3 and
 * OLMo-2, SentencePiece "llama" (no space prefix) for Gemma. */
const struct hs_names hs_qwen3_table = {TABLE(qwen3_names), 1, "gpt2"};
const struct hs_names hs_qwen3_moe_table = {TABLE(qwen3_moe_names), 1, "gpt2"};
const struct hs_names hs_olmo2_table = {TABLE(olmo2_names), 1, "gpt2"};
const struct hs_names hs_gemma2_table = {TABLE(gemma2_names), 1, "llama"};
const struct hs_names hs_gemma3_table = {TABLE(gemma3_names), 1, "llama"};
const struct hs_names hs_gemma3_mm_table = {TABLE(gemma3_mm_names), 1, "llama"};

const char *const hs_qwen3_specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

hs_tensor_shape hs_qk_norm_shape(const hs_model_config *c, int is_k)
{
    int w = c->d_head;
    if (c->arch->qk_norm == HS_QK_NORM_FULL)
        w = (is_k ? c->n_kv_head : c->n_head) * c->d_head;
    return (hs_tensor_shape){HS_K_VEC, 1, w, w, 0, 0};
}

int hs_slot_is_norm_weight(hs_slot s)
{
    switch (s) {
    case HS_S_NORM1_W:
    case HS_S_NORM2_W:
    case HS_S_FINAL_NORM_W:
    case HS_S_Q_NORM_W:
    case HS_S_K_NORM_W:
    case HS_S_POST_ATTN_NORM_W:
    case HS_S_POST_MLP_NORM_W: return 1;
    default: return 0;
    }
}

const char *hs_arch_norms_beyond(const hs_arch *a)
{
    int pre_rms = a->norm_place == HS_NORM_PRE && a->norm_kind == HS_NORM_RMS;
    if (a->qk_norm && (!pre_rms || a->qk_norm > HS_QK_NORM_FULL))
        return "query/key norms outside a pre-norm RMSNorm block";
    if ((a->post_norms || a->no_pre_norm) && (!pre_rms || a->parallel_residual))
        return "norms on the sublayers' outputs outside a sequential pre-norm RMSNorm block";
    if (a->no_pre_norm && !a->post_norms)
        return "a block without any norm";
    if (!(a->attn_softcap >= 0) || !isfinite(a->attn_softcap) || !(a->final_softcap >= 0) ||
        !isfinite(a->final_softcap))
        return "a softcap that is negative or not finite";
    if (!(a->query_scale >= 0) || !isfinite(a->query_scale) || !(a->emb_scale >= 0) ||
        !isfinite(a->emb_scale) || !isfinite(a->norm_offset))
        return "a query or embedding scale, or a norm offset, that is negative or not finite";
    if (a->norm_offset != 0 && a->norm_kind != HS_NORM_RMS)
        return "a norm weight offset on LayerNorm";
    return NULL;
}
