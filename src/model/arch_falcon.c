/* Falcon (Almazrouei et al. 2023; transformers' model_type "falcon"): the name tables and
 * the config.json parser. Falcon-7B is multi-query (one K/V head) with a parallel block on
 * one norm; Falcon-40B/180B (new_decoder_architecture) group their K/V heads and give the
 * attention and the MLP a norm each; Falcon-RW is multi-head, sequential and positions its
 * heads by ALiBi instead of rotary embeddings. Every one stores one fused query_key_value
 * whose rows are laid out by K/V group, [q .. q k v] (multi_query: one group; Falcon-RW: one
 * a head), which HS_TN_QKV_HEADS reorders at load into [Q | K | V]. */
#include <string.h>

#include "model/arch_mqa.h"

const char *const hs_endoftext_specials[1] = {"<|endoftext|>"};

#define FL "h.%d."
#define GL "blk.%d."
/* n1, n2: the attention's and the MLP's norm (Hugging Face); g1, g2: their GGUF names
 * (llama.cpp's falcon: attn_norm feeds the MLP, and the attention too unless attn_norm_2 is
 * there, Falcon-40B's ln_attn; the converter maps ln_mlp to attn_norm). The biases and
 * Falcon-RW's sequential block have no llama.cpp form (gguf_arch.c refuses them by name);
 * their GGUF names are never written. */
#define FALCON_ROWS(n1, n2, g1, g2)                                                            \
    {HS_S_TOK_EMB, -1, "word_embeddings.weight", NULL, "token_embd.weight", NULL, 0},          \
    {HS_S_NORM1_W, -1, FL n1 ".weight", NULL, GL g1 ".weight", NULL, 0},                       \
    {HS_S_NORM1_B, -1, FL n1 ".bias", NULL, GL g1 ".bias", NULL, 0},                           \
    {HS_S_QKV_W, -1, FL "self_attention.query_key_value.weight", NULL, GL "attn_qkv.weight",   \
     NULL, HS_TN_QKV_HEADS},                                                                   \
    {HS_S_QKV_B, -1, FL "self_attention.query_key_value.bias", NULL, GL "attn_qkv.bias", NULL, \
     HS_TN_QKV_HEADS},                                                                         \
    {HS_S_O_W, -1, FL "self_attention.dense.weight", NULL, GL "attn_output.weight", NULL, 0},  \
    {HS_S_O_B, -1, FL "self_attention.dense.bias", NULL, GL "attn_output.bias", NULL, 0},      \
    {HS_S_NORM2_W, -1, FL n2 ".weight", NULL, GL g2 ".weight", NULL, 0},                       \
    {HS_S_NORM2_B, -1, FL n2 ".bias", NULL, GL g2 ".bias", NULL, 0},                           \
    {HS_S_FC_W, -1, FL "mlp.dense_h_to_4h.weight", NULL, GL "ffn_up.weight", NULL, 0},         \
    {HS_S_FC_B, -1, FL "mlp.dense_h_to_4h.bias", NULL, GL "ffn_up.bias", NULL, 0},             \
    {HS_S_PROJ_W, -1, FL "mlp.dense_4h_to_h.weight", NULL, GL "ffn_down.weight", NULL, 0},     \
    {HS_S_PROJ_B, -1, FL "mlp.dense_4h_to_h.bias", NULL, GL "ffn_down.bias", NULL, 0},         \
    {HS_S_FINAL_NORM_W, -1, "ln_f.weight", NULL, "output_norm.weight", NULL, 0},               \
    {HS_S_FINAL_NORM_B, -1, "ln_f.bias", NULL, "output_norm.bias", NULL, 0},                   \
    /* tied to the word embeddings unless tie_word_embeddings is false */                      \
    {HS_S_DECODER, -1, "lm_head.weight", NULL, "output.weight", NULL,                          \
     HS_TN_OPTIONAL | HS_TN_BARE},

static const hs_tensor_name seq_rows[] = {
    FALCON_ROWS("input_layernorm", "post_attention_layernorm", "attn_norm", "ffn_norm")};
/* one norm read into both slots: the GGUF writer writes attn_norm once (gguf_write.c skips
 * a name already written) */
static const hs_tensor_name shared_rows[] = {
    FALCON_ROWS("input_layernorm", "input_layernorm", "attn_norm", "attn_norm")};
static const hs_tensor_name two_rows[] = {
    FALCON_ROWS("ln_attn", "ln_mlp", "attn_norm_2", "attn_norm")};
#undef FALCON_ROWS
#undef GL
#undef FL

/* llama.cpp's falcon (tokenizer.ggml.model "gpt2") for the parallel layouts; Falcon-RW's
 * sequential block has none (gguf_tokenizer NULL: hs_arch_gguf_name says so). */
#define TABLE(rows, tok) {rows, sizeof rows / sizeof rows[0], "transformer.", 1, tok}
const struct hs_names hs_falcon_names_seq = TABLE(seq_rows, NULL);
const struct hs_names hs_falcon_names_shared = TABLE(shared_rows, "gpt2");
const struct hs_names hs_falcon_names_two = TABLE(two_rows, "gpt2");
#undef TABLE

/* An integer under either of two names (transformers' attribute_map: num_hidden_layers or
 * n_layer, ...), the first winning. */
static hs_status int2(const cJSON *root, const char *key, const char *alt, int required, int *out,
                      hs_error *err)
{
    hs_status st = hs_cfg_int(root, alt, 0, out, err);
    if (st || (st = hs_cfg_int(root, key, 0, out, err)))
        return st;
    if (required && !cJSON_GetObjectItemCaseSensitive(root, key) &&
        !cJSON_GetObjectItemCaseSensitive(root, alt))
        return hs_fail(err, HS_E_FORMAT, "config.json: missing required field '%s'", key);
    return HS_OK;
}

/* FalconConfig's keys and defaults: gelu (exact), LayerNorm eps 1e-5, 2048 positions,
 * ffn_hidden_size 4 d, multi_query and parallel_attn true, no biases, tied embeddings;
 * num_kv_heads (new_decoder_architecture: the K/V heads; otherwise 1 with multi_query, else
 * one a head), num_ln_in_parallel_attn (2 under new_decoder_architecture when null), alibi
 * or rotary (rope_theta, rope_scaling). */
hs_status hs_parse_falcon(const cJSON *root, hs_model_config *c, hs_arch *a, hs_error *err)
{
    int mq = 1, par = 1, alibi = 0, newdec = 0, kv = 0, n_ln = 0, ff = 0;
    hs_status st;
    c->family = HS_FAMILY_FALCON;
    c->ln_eps = 1e-5f;
    c->act = HS_ACT_GELU_ERF;
    c->n_ctx = 2048;
    if ((st = int2(root, "num_hidden_layers", "n_layer", 1, &c->n_layer, err)) ||
        (st = int2(root, "num_attention_heads", "n_head", 1, &c->n_head, err)) ||
        (st = int2(root, "hidden_size", "n_embed", 1, &c->d_model, err)) ||
        (st = hs_cfg_int(root, "vocab_size", 1, &c->vocab_size, err)) ||
        (st = hs_cfg_int(root, "max_position_embeddings", 0, &c->n_ctx, err)) ||
        (st = hs_cfg_int(root, "ffn_hidden_size", 0, &ff, err)) ||
        (st = int2(root, "num_kv_heads", "n_head_kv", 0, &kv, err)) ||
        (st = hs_cfg_int(root, "num_ln_in_parallel_attn", 0, &n_ln, err)) ||
        (st = hs_cfg_unit(root, "layer_norm_epsilon", &c->ln_eps, err)) ||
        (st = hs_cfg_act(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "activation")),
                         &c->act, err)) ||
        (st = hs_cfg_bool(root, "multi_query", &mq, err)) ||
        (st = hs_cfg_bool(root, "parallel_attn", &par, err)) ||
        (st = hs_cfg_bool(root, "alibi", &alibi, err)) ||
        (st = hs_cfg_bool(root, "new_decoder_architecture", &newdec, err)) ||
        (st = hs_cfg_bool(root, "bias", &a->biases, err)) ||
        (st = hs_cfg_bool(root, "tie_word_embeddings", &a->tied_embeddings, err)))
        return st;
    if (c->n_head < 1 || c->d_model % c->n_head)
        return hs_fail(err, HS_E_VALUE, "config: d_model %d is not divisible by n_head %d",
                       c->d_model, c->n_head);
    if (c->d_model > 250000000)
        return hs_fail(err, HS_E_FORMAT, "config.json: field 'hidden_size' (%d) is too large: "
                       "its default ffn_hidden_size, 4 x hidden_size, passes 1e9", c->d_model);
    c->d_ff = ff > 0 ? ff : 4 * c->d_model;
    if (newdec && !par)
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: new_decoder_architecture with "
                       "parallel_attn false is not supported (transformers cannot run it)");
    if (n_ln == 0)
        n_ln = newdec ? 2 : 1;
    if (n_ln != 1 && n_ln != 2)
        return hs_fail(err, HS_E_VALUE, "config.json: num_ln_in_parallel_attn %d (expected 1 or 2)",
                       n_ln);
    if (n_ln == 2 && !newdec)
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: num_ln_in_parallel_attn 2 without "
                       "new_decoder_architecture is not supported (transformers cannot run it)");
    a->names = !par ? &hs_falcon_names_seq : n_ln == 2 ? &hs_falcon_names_two
                                                        : &hs_falcon_names_shared;
    a->parallel_residual = par;
    a->n_kv_head = newdec ? (kv > 0 ? kv : c->n_head) : mq ? 1 : c->n_head;
    if (c->n_head % a->n_kv_head)
        return hs_fail(err, HS_E_VALUE, "config.json: num_attention_heads %d is not a multiple of "
                       "num_kv_heads %d", c->n_head, a->n_kv_head);
    if (alibi) {
        a->pos = HS_POS_ALIBI;
        a->rotary_frac = 0.0f;
        return HS_OK;
    }
    return hs_cfg_rope(root, a, c->d_model / c->n_head, "rope_theta", "partial_rotary_factor",
                       c->n_ctx, err);
}
