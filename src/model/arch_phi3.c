/* Phi-3's tensor-name table (its descriptor is in arch.c's families[]). Phi-3 is Llama's
 * block with the projections fused as transformers' Phi3 saves them: self_attn.qkv_proj,
 * whose output rows are [Q | K | V] (K and V n_kv_head heads each), the order of the
 * normalised QKV slot, and mlp.gate_up_proj, rows [gate | up], the order of the gated MLP's
 * first slot; so each fills its slot whole. The GGUF names are llama.cpp's phi3 ones (the
 * same fusions, blk.N.attn_qkv and blk.N.ffn_up). */
#include "model/model_internal.h"

#define PL "layers.%d."
static const hs_tensor_name phi3_names[] = {
    {HS_S_TOK_EMB, -1, "embed_tokens.weight", NULL, "token_embd.weight", NULL, 0},
    {HS_S_NORM1_W, -1, PL "input_layernorm.weight", NULL, "blk.%d.attn_norm.weight", NULL, 0},
    {HS_S_QKV_W, -1, PL "self_attn.qkv_proj.weight", NULL, "blk.%d.attn_qkv.weight", NULL, 0},
    {HS_S_O_W, -1, PL "self_attn.o_proj.weight", NULL, "blk.%d.attn_output.weight", NULL, 0},
    {HS_S_NORM2_W, -1, PL "post_attention_layernorm.weight", NULL, "blk.%d.ffn_norm.weight", NULL,
     0},
    {HS_S_FC_W, -1, PL "mlp.gate_up_proj.weight", NULL, "blk.%d.ffn_up.weight", NULL, 0},
    {HS_S_PROJ_W, -1, PL "mlp.down_proj.weight", NULL, "blk.%d.ffn_down.weight", NULL, 0},
    {HS_S_FINAL_NORM_W, -1, "norm.weight", NULL, "output_norm.weight", NULL, 0},
    /* absent when tie_word_embeddings (then the token embeddings) */
    {HS_S_DECODER, -1, "lm_head.weight", NULL, "output.weight", NULL,
     HS_TN_OPTIONAL | HS_TN_BARE},
};
#undef PL

/* tokenizer.ggml.model "llama": Phi-3's is Llama 2's SentencePiece-style BPE */
const struct hs_names hs_phi3_table = {
    phi3_names, sizeof phi3_names / sizeof phi3_names[0], "model.", 1, "llama"};
