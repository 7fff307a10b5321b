/* The architecture descriptors and tensor-name tables of the families headscope opens
 * (see model.h and model_internal.h; the tables are walked in arch_walk.c). Adding a family:
 * a name table, a descriptor, an entry in families[], a config parser (hf_config.c);
 * docs/architecture.md. */
#include <stdio.h>
#include <string.h>

#include "model/arch_mqa.h"
#include "model/arch_deepseek.h"
#include "model/arch_norms.h"
#include "model/arch_t5.h"
#include "model/model_internal.h"

/* ---- GPT-2 ------------------------------------------------------------------------- */

static const hs_tensor_name gpt2_names[] = {
    {HS_S_TOK_EMB, -1, "wte.weight", NULL, "token_embd.weight", NULL, 0},
    {HS_S_POS_EMB, -1, "wpe.weight", NULL, "position_embd.weight", NULL, 0},
    {HS_S_NORM1_W, -1, "h.%d.ln_1.weight", NULL, "blk.%d.attn_norm.weight", NULL, 0},
    {HS_S_NORM1_B, -1, "h.%d.ln_1.bias", NULL, "blk.%d.attn_norm.bias", NULL, 0},
    {HS_S_QKV_W, -1, "h.%d.attn.c_attn.weight", NULL, "blk.%d.attn_qkv.weight", NULL, 0},
    {HS_S_QKV_B, -1, "h.%d.attn.c_attn.bias", NULL, "blk.%d.attn_qkv.bias", NULL, 0},
    {HS_S_O_W, -1, "h.%d.attn.c_proj.weight", NULL, "blk.%d.attn_output.weight", NULL, 0},
    {HS_S_O_B, -1, "h.%d.attn.c_proj.bias", NULL, "blk.%d.attn_output.bias", NULL, 0},
    {HS_S_NORM2_W, -1, "h.%d.ln_2.weight", NULL, "blk.%d.ffn_norm.weight", NULL, 0},
    {HS_S_NORM2_B, -1, "h.%d.ln_2.bias", NULL, "blk.%d.ffn_norm.bias", NULL, 0},
    {HS_S_FC_W, -1, "h.%d.mlp.c_fc.weight", NULL, "blk.%d.ffn_up.weight", NULL, 0},
    {HS_S_FC_B, -1, "h.%d.mlp.c_fc.bias", NULL, "blk.%d.ffn_up.bias", NULL, 0},
    {HS_S_PROJ_W, -1, "h.%d.mlp.c_proj.weight", NULL, "blk.%d.ffn_down.weight", NULL, 0},
    {HS_S_PROJ_B, -1, "h.%d.mlp.c_proj.bias", NULL, "blk.%d.ffn_down.bias", NULL, 0},
    {HS_S_FINAL_NORM_W, -1, "ln_f.weight", NULL, "output_norm.weight", NULL, 0},
    {HS_S_FINAL_NORM_B, -1, "ln_f.bias", NULL, "output_norm.bias", NULL, 0},
    /* an untied decoder; absent: the token embeddings. GGUF: written as their copy when
     * tied (llama.cpp before March 2025 requires output.weight), read back tied. */
    {HS_S_DECODER, -1, "lm_head.weight", NULL, "output.weight", NULL,
     HS_TN_OPTIONAL | HS_TN_BARE | HS_TN_GGUF_COPY},
};

static const struct hs_names gpt2_table = {
    gpt2_names, sizeof gpt2_names / sizeof gpt2_names[0], "transformer.", 0, "gpt2"};

static const char *const gpt2_specials[] = {"<|endoftext|>"};

/* ---- BERT -------------------------------------------------------------------------- */

/* The BERT encoder under the family prefix (bert., roberta.): embeddings and layers. */
#define BL "encoder.layer.%d."
#define BERT_ENCODER_ROWS \
    {HS_S_TOK_EMB, -1, "embeddings.word_embeddings.weight", NULL, "token_embd.weight", NULL, 0}, \
    {HS_S_POS_EMB, -1, "embeddings.position_embeddings.weight", NULL, "position_embd.weight", NULL, 0}, \
    {HS_S_TYPE_EMB, -1, "embeddings.token_type_embeddings.weight", NULL, "token_types.weight", NULL, 0}, \
    {HS_S_EMB_NORM_W, -1, "embeddings.LayerNorm.weight", NULL, "token_embd_norm.weight", NULL, 0}, \
    {HS_S_EMB_NORM_B, -1, "embeddings.LayerNorm.bias", NULL, "token_embd_norm.bias", NULL, 0}, \
    {HS_S_QKV_W, 0, BL "attention.self.query.weight", NULL, "blk.%d.attn_q.weight", "blk.%d.attn_qkv.weight", 0}, \
    {HS_S_QKV_B, 0, BL "attention.self.query.bias", NULL, "blk.%d.attn_q.bias", "blk.%d.attn_qkv.bias", 0}, \
    {HS_S_QKV_W, 1, BL "attention.self.key.weight", NULL, "blk.%d.attn_k.weight", "blk.%d.attn_qkv.weight", 0}, \
    {HS_S_QKV_B, 1, BL "attention.self.key.bias", NULL, "blk.%d.attn_k.bias", "blk.%d.attn_qkv.bias", 0}, \
    {HS_S_QKV_W, 2, BL "attention.self.value.weight", NULL, "blk.%d.attn_v.weight", "blk.%d.attn_qkv.weight", 0}, \
    {HS_S_QKV_B, 2, BL "attention.self.value.bias", NULL, "blk.%d.attn_v.bias", "blk.%d.attn_qkv.bias", 0}, \
    {HS_S_O_W, -1, BL "attention.output.dense.weight", NULL, "blk.%d.attn_output.weight", NULL, 0}, \
    {HS_S_O_B, -1, BL "attention.output.dense.bias", NULL, "blk.%d.attn_output.bias", NULL, 0}, \
    {HS_S_NORM1_W, -1, BL "attention.output.LayerNorm.weight", NULL, "blk.%d.attn_output_norm.weight", NULL, 0}, \
    {HS_S_NORM1_B, -1, BL "attention.output.LayerNorm.bias", NULL, "blk.%d.attn_output_norm.bias", NULL, 0}, \
    {HS_S_FC_W, -1, BL "intermediate.dense.weight", NULL, "blk.%d.ffn_up.weight", NULL, 0}, \
    {HS_S_FC_B, -1, BL "intermediate.dense.bias", NULL, "blk.%d.ffn_up.bias", NULL, 0}, \
    {HS_S_PROJ_W, -1, BL "output.dense.weight", NULL, "blk.%d.ffn_down.weight", NULL, 0}, \
    {HS_S_PROJ_B, -1, BL "output.dense.bias", NULL, "blk.%d.ffn_down.bias", NULL, 0}, \
    {HS_S_NORM2_W, -1, BL "output.LayerNorm.weight", NULL, "blk.%d.layer_output_norm.weight", NULL, 0}, \
    {HS_S_NORM2_B, -1, BL "output.LayerNorm.bias", NULL, "blk.%d.layer_output_norm.bias", NULL, 0},

static const hs_tensor_name bert_names[] = {
    BERT_ENCODER_ROWS
    /* The MLM head: llama.cpp has no names for it, so a GGUF file (written with
     * --keep-mlm) holds it under the Hugging Face names. */
    {HS_S_MLM_W, -1, "cls.predictions.transform.dense.weight", NULL,
     "cls.predictions.transform.dense.weight", NULL, HS_TN_HEAD | HS_TN_BARE},
    {HS_S_MLM_B, -1, "cls.predictions.transform.dense.bias", NULL,
     "cls.predictions.transform.dense.bias", NULL, HS_TN_HEAD | HS_TN_BARE},
    {HS_S_MLM_NORM_W, -1, "cls.predictions.transform.LayerNorm.weight", NULL,
     "cls.predictions.transform.LayerNorm.weight", NULL, HS_TN_HEAD | HS_TN_BARE},
    {HS_S_MLM_NORM_B, -1, "cls.predictions.transform.LayerNorm.bias", NULL,
     "cls.predictions.transform.LayerNorm.bias", NULL, HS_TN_HEAD | HS_TN_BARE},
    {HS_S_MLM_BIAS, -1, "cls.predictions.bias", "cls.predictions.decoder.bias",
     "cls.predictions.bias", NULL, HS_TN_HEAD | HS_TN_BARE},
    {HS_S_DECODER, -1, "cls.predictions.decoder.weight", NULL, "cls.predictions.decoder.weight",
     NULL, HS_TN_HEAD | HS_TN_OPTIONAL | HS_TN_BARE},
};

static const struct hs_names bert_table = {
    bert_names, sizeof bert_names / sizeof bert_names[0], "bert.", 1, "bert"};

static const char *const bert_specials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

/* ---- RoBERTa (and XLM-R) ------------------------------------------------------------ */

/* BERT's encoder under "roberta."; the MLM head is fairseq's RobertaLMHead, which
 * save_pretrained writes as lm_head.{dense,layer_norm,bias} with lm_head.decoder tied to
 * the word embeddings (hub files may hold the decoder and lm_head.decoder.bias as copies).
 * llama.cpp writes RoBERTa as a "bert" GGUF without the head, so it keeps the HF names. */
static const hs_tensor_name roberta_names[] = {
    BERT_ENCODER_ROWS
    {HS_S_MLM_W, -1, "lm_head.dense.weight", NULL, "lm_head.dense.weight", NULL,
     HS_TN_HEAD | HS_TN_BARE},
    {HS_S_MLM_B, -1, "lm_head.dense.bias", NULL, "lm_head.dense.bias", NULL,
     HS_TN_HEAD | HS_TN_BARE},
    {HS_S_MLM_NORM_W, -1, "lm_head.layer_norm.weight", NULL, "lm_head.layer_norm.weight", NULL,
     HS_TN_HEAD | HS_TN_BARE},
    {HS_S_MLM_NORM_B, -1, "lm_head.layer_norm.bias", NULL, "lm_head.layer_norm.bias", NULL,
     HS_TN_HEAD | HS_TN_BARE},
    {HS_S_MLM_BIAS, -1, "lm_head.bias", "lm_head.decoder.bias", "lm_head.bias", NULL,
     HS_TN_HEAD | HS_TN_BARE},
    {HS_S_DECODER, -1, "lm_head.decoder.weight", NULL, "lm_head.decoder.weight", NULL,
     HS_TN_HEAD | HS_TN_OPTIONAL | HS_TN_BARE},
};
#undef BL

static const struct hs_names roberta_table = {
    roberta_names, sizeof roberta_names / sizeof roberta_names[0], "roberta.", 1, "gpt2"};

static const char *const roberta_specials[] = {"<s>", "<pad>", "</s>", "<unk>", "<mask>"};

/* ---- DistilBERT ----------------------------------------------------------------------- */

/* DistilBERT's own names under "distilbert."; no token types; the MLM head of
 * DistilBertForMaskedLM (vocab_transform, vocab_layer_norm, vocab_projector, whose weight
 * is tied to the word embeddings). llama.cpp has no DistilBERT architecture: no GGUF names
 * (gguf NULL), and the GGUF writer refuses the family. */
#define DL "transformer.layer.%d."
static const hs_tensor_name distilbert_names[] = {
    {HS_S_TOK_EMB, -1, "embeddings.word_embeddings.weight", NULL, NULL, NULL, 0},
    {HS_S_POS_EMB, -1, "embeddings.position_embeddings.weight", NULL, NULL, NULL, 0},
    {HS_S_EMB_NORM_W, -1, "embeddings.LayerNorm.weight", NULL, NULL, NULL, 0},
    {HS_S_EMB_NORM_B, -1, "embeddings.LayerNorm.bias", NULL, NULL, NULL, 0},
    {HS_S_QKV_W, 0, DL "attention.q_lin.weight", NULL, NULL, NULL, 0},
    {HS_S_QKV_B, 0, DL "attention.q_lin.bias", NULL, NULL, NULL, 0},
    {HS_S_QKV_W, 1, DL "attention.k_lin.weight", NULL, NULL, NULL, 0},
    {HS_S_QKV_B, 1, DL "attention.k_lin.bias", NULL, NULL, NULL, 0},
    {HS_S_QKV_W, 2, DL "attention.v_lin.weight", NULL, NULL, NULL, 0},
    {HS_S_QKV_B, 2, DL "attention.v_lin.bias", NULL, NULL, NULL, 0},
    {HS_S_O_W, -1, DL "attention.out_lin.weight", NULL, NULL, NULL, 0},
    {HS_S_O_B, -1, DL "attention.out_lin.bias", NULL, NULL, NULL, 0},
    {HS_S_NORM1_W, -1, DL "sa_layer_norm.weight", NULL, NULL, NULL, 0},
    {HS_S_NORM1_B, -1, DL "sa_layer_norm.bias", NULL, NULL, NULL, 0},
    {HS_S_FC_W, -1, DL "ffn.lin1.weight", NULL, NULL, NULL, 0},
    {HS_S_FC_B, -1, DL "ffn.lin1.bias", NULL, NULL, NULL, 0},
    {HS_S_PROJ_W, -1, DL "ffn.lin2.weight", NULL, NULL, NULL, 0},
    {HS_S_PROJ_B, -1, DL "ffn.lin2.bias", NULL, NULL, NULL, 0},
    {HS_S_NORM2_W, -1, DL "output_layer_norm.weight", NULL, NULL, NULL, 0},
    {HS_S_NORM2_B, -1, DL "output_layer_norm.bias", NULL, NULL, NULL, 0},
    {HS_S_MLM_W, -1, "vocab_transform.weight", NULL, NULL, NULL, HS_TN_HEAD | HS_TN_BARE},
    {HS_S_MLM_B, -1, "vocab_transform.bias", NULL, NULL, NULL, HS_TN_HEAD | HS_TN_BARE},
    {HS_S_MLM_NORM_W, -1, "vocab_layer_norm.weight", NULL, NULL, NULL, HS_TN_HEAD | HS_TN_BARE},
    {HS_S_MLM_NORM_B, -1, "vocab_layer_norm.bias", NULL, NULL, NULL, HS_TN_HEAD | HS_TN_BARE},
    {HS_S_MLM_BIAS, -1, "vocab_projector.bias", NULL, NULL, NULL, HS_TN_HEAD | HS_TN_BARE},
    {HS_S_DECODER, -1, "vocab_projector.weight", NULL, NULL, NULL,
     HS_TN_HEAD | HS_TN_OPTIONAL | HS_TN_BARE},
};
#undef DL

static const struct hs_names distilbert_table = {
    distilbert_names, sizeof distilbert_names / sizeof distilbert_names[0], "distilbert.", 1, NULL};

/* ---- GPT-NeoX (Pythia) ----------------------------------------------------------------
 * One fused query_key_value per layer whose output rows are laid out per head
 * ([h0: q k v][h1: q k v]...): HS_TN_QKV_HEADS reorders it at load into [Q | K | V]. The
 * GGUF names are llama.cpp's gptneox ones; its converter regroups the fused tensor into
 * [Q | K | V], the normalised layout (gguf_load.c hands it to the builder per head). */
#define NL "layers.%d."
static const hs_tensor_name neox_names[] = {
    {HS_S_TOK_EMB, -1, "embed_in.weight", NULL, "token_embd.weight", NULL, 0},
    {HS_S_NORM1_W, -1, NL "input_layernorm.weight", NULL, "blk.%d.attn_norm.weight", NULL, 0},
    {HS_S_NORM1_B, -1, NL "input_layernorm.bias", NULL, "blk.%d.attn_norm.bias", NULL, 0},
    {HS_S_QKV_W, -1, NL "attention.query_key_value.weight", NULL, "blk.%d.attn_qkv.weight", NULL,
     HS_TN_QKV_HEADS},
    {HS_S_QKV_B, -1, NL "attention.query_key_value.bias", NULL, "blk.%d.attn_qkv.bias", NULL,
     HS_TN_QKV_HEADS},
    {HS_S_O_W, -1, NL "attention.dense.weight", NULL, "blk.%d.attn_output.weight", NULL, 0},
    {HS_S_O_B, -1, NL "attention.dense.bias", NULL, "blk.%d.attn_output.bias", NULL, 0},
    {HS_S_NORM2_W, -1, NL "post_attention_layernorm.weight", NULL, "blk.%d.ffn_norm.weight", NULL, 0},
    {HS_S_NORM2_B, -1, NL "post_attention_layernorm.bias", NULL, "blk.%d.ffn_norm.bias", NULL, 0},
    {HS_S_FC_W, -1, NL "mlp.dense_h_to_4h.weight", NULL, "blk.%d.ffn_up.weight", NULL, 0},
    {HS_S_FC_B, -1, NL "mlp.dense_h_to_4h.bias", NULL, "blk.%d.ffn_up.bias", NULL, 0},
    {HS_S_PROJ_W, -1, NL "mlp.dense_4h_to_h.weight", NULL, "blk.%d.ffn_down.weight", NULL, 0},
    {HS_S_PROJ_B, -1, NL "mlp.dense_4h_to_h.bias", NULL, "blk.%d.ffn_down.bias", NULL, 0},
    {HS_S_FINAL_NORM_W, -1, "final_layer_norm.weight", NULL, "output_norm.weight", NULL, 0},
    {HS_S_FINAL_NORM_B, -1, "final_layer_norm.bias", NULL, "output_norm.bias", NULL, 0},
    /* untied unless tie_word_embeddings (then absent: the token embeddings); GGUF: a copy
     * when tied, as llama.cpp's gptneox requires output.weight */
    {HS_S_DECODER, -1, "embed_out.weight", NULL, "output.weight", NULL,
     HS_TN_OPTIONAL | HS_TN_BARE | HS_TN_GGUF_COPY},
};

static const struct hs_names neox_table = {
    neox_names, sizeof neox_names / sizeof neox_names[0], "gpt_neox.", 1, "gpt2"};

static const char *const neox_specials[] = {"<|endoftext|>"};

/* ---- Llama and Qwen2 -------------------------------------------------------------------
 * Separate q/k/v projections fill the blocks of the fused QKV slot (K and V n_kv_head heads
 * wide), gate and up the two halves of the MLP's first slot [gate | up]. The bias rows are
 * asked for only when the descriptor has them (Qwen2's q/k/v; Llama's attention_bias). */
static const hs_tensor_name llama_names[] = {
    {HS_S_TOK_EMB, -1, "embed_tokens.weight", NULL, "token_embd.weight", NULL, 0},
    {HS_S_NORM1_W, -1, NL "input_layernorm.weight", NULL, "blk.%d.attn_norm.weight", NULL, 0},
    {HS_S_QKV_W, 0, NL "self_attn.q_proj.weight", NULL, "blk.%d.attn_q.weight", NULL, 0},
    {HS_S_QKV_B, 0, NL "self_attn.q_proj.bias", NULL, "blk.%d.attn_q.bias", NULL, 0},
    {HS_S_QKV_W, 1, NL "self_attn.k_proj.weight", NULL, "blk.%d.attn_k.weight", NULL, 0},
    {HS_S_QKV_B, 1, NL "self_attn.k_proj.bias", NULL, "blk.%d.attn_k.bias", NULL, 0},
    {HS_S_QKV_W, 2, NL "self_attn.v_proj.weight", NULL, "blk.%d.attn_v.weight", NULL, 0},
    {HS_S_QKV_B, 2, NL "self_attn.v_proj.bias", NULL, "blk.%d.attn_v.bias", NULL, 0},
    {HS_S_O_W, -1, NL "self_attn.o_proj.weight", NULL, "blk.%d.attn_output.weight", NULL, 0},
    {HS_S_O_B, -1, NL "self_attn.o_proj.bias", NULL, "blk.%d.attn_output.bias", NULL, 0},
    HS_LLAMA_MLP_HEAD_ROWS(NL, 0) /* the decoder absent when tie_word_embeddings */
};
#undef NL

/* tokenizer.ggml.model "llama" (SentencePiece) for Llama 2; Llama 3 and Qwen2 write "gpt2"
 * (src/model/gguf_tokenizer.c takes either for llama). */
static const struct hs_names llama_table = {
    llama_names, sizeof llama_names / sizeof llama_names[0], "model.", 1, "llama"};
static const struct hs_names qwen2_table = {
    llama_names, sizeof llama_names / sizeof llama_names[0], "model.", 1, "gpt2"};

static const char *const qwen2_specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

/* ---- the descriptors ---------------------------------------------------------------- */

static const hs_arch families[] = {
    {
        .family = HS_FAMILY_GPT2, .name = "gpt2",
        .norm_place = HS_NORM_PRE, .norm_kind = HS_NORM_LAYER, .act = HS_ACT_GELU_TANH,
        .pos = HS_POS_LEARNED, .pos_offset = 0, .vis = {HS_VIS_CAUSAL, 0, 0},
        .parallel_residual = 0,
        .biases = 1, .emb_norm = 0, .token_types = 0, .tied_embeddings = 1, .n_kv_head = 0,
        .head = HS_HEAD_DECODER, .head_optional = 0, .tokenizer = HS_TOK_BPE,
        .specials = gpt2_specials, .n_specials = 1, .names = &gpt2_table,
    },
    {
        .family = HS_FAMILY_BERT, .name = "bert",
        .norm_place = HS_NORM_POST, .norm_kind = HS_NORM_LAYER, .act = HS_ACT_GELU_ERF,
        .pos = HS_POS_LEARNED, .pos_offset = 0, .vis = {HS_VIS_BIDIRECTIONAL, 0, 0},
        .parallel_residual = 0,
        .biases = 1, .emb_norm = 1, .token_types = 1, .tied_embeddings = 1, .n_kv_head = 0,
        .head = HS_HEAD_MLM, .head_optional = 1, .tokenizer = HS_TOK_WORDPIECE,
        .cls_token = "[CLS]", .sep_token = "[SEP]", .mask_token = "[MASK]", .pad_token = "[PAD]",
        .specials = bert_specials, .n_specials = 5, .names = &bert_table,
    },
    {   /* pos_offset and n_ctx from config.json's pad_token_id (hf_config.c) */
        .family = HS_FAMILY_ROBERTA, .name = "roberta", .gguf_name = "bert",
        .norm_place = HS_NORM_POST, .norm_kind = HS_NORM_LAYER, .act = HS_ACT_GELU_ERF,
        .pos = HS_POS_LEARNED, .pos_offset = 2, .pos_skips_pad = 1,
        .vis = {HS_VIS_BIDIRECTIONAL, 0, 0},
        .parallel_residual = 0, .biases = 1, .emb_norm = 1, .token_types = 1,
        .tied_embeddings = 1, .n_kv_head = 0, .head = HS_HEAD_MLM, .head_optional = 1,
        .tokenizer = HS_TOK_BPE,
        .cls_token = "<s>", .sep_token = "</s>", .mask_token = "<mask>", .pad_token = "<pad>",
        .specials = roberta_specials, .n_specials = 5, .names = &roberta_table,
    },
    {   /* BERT's without token types (the fields not named are 0: bidirectional, positions
         * from row 0, a sequential residual, one key/value head per head) */
        .family = HS_FAMILY_DISTILBERT, .name = "distilbert", .names = &distilbert_table,
        .norm_place = HS_NORM_POST, .norm_kind = HS_NORM_LAYER, .act = HS_ACT_GELU_ERF,
        .pos = HS_POS_LEARNED, .biases = 1, .emb_norm = 1, .tied_embeddings = 1,
        .head = HS_HEAD_MLM, .head_optional = 1, .tokenizer = HS_TOK_WORDPIECE,
        .cls_token = "[CLS]", .sep_token = "[SEP]", .mask_token = "[MASK]", .pad_token = "[PAD]",
        .specials = bert_specials, .n_specials = 5,
    },
    /* The rotary decoders: per-model values (rotary dims and base, rope scaling, KV heads,
     * parallel residual, tied output, biases) come from config.json (hf_config.c). */
    {
        .family = HS_FAMILY_GPT_NEOX, .name = "gpt_neox", .gguf_name = "gptneox",
        .norm_place = HS_NORM_PRE, .norm_kind = HS_NORM_LAYER, .act = HS_ACT_GELU_ERF,
        .pos = HS_POS_ROTARY, .rotary_frac = 0.25f, .rotary_base = 10000.0f,
        .vis = {HS_VIS_CAUSAL, 0, 0},
        .parallel_residual = 1, .biases = 1, .tied_embeddings = 0, .n_kv_head = 0,
        .head = HS_HEAD_DECODER, .head_optional = 0, .tokenizer = HS_TOK_BPE,
        .specials = neox_specials, .n_specials = 1, .names = &neox_table,
    },
    {
        .family = HS_FAMILY_LLAMA, .name = "llama",
        .norm_place = HS_NORM_PRE, .norm_kind = HS_NORM_RMS, .act = HS_ACT_SILU, .gated = 1,
        .pos = HS_POS_ROTARY, .rotary_frac = 1.0f, .rotary_base = 10000.0f,
        .vis = {HS_VIS_CAUSAL, 0, 0},
        .parallel_residual = 0, .biases = 0, .tied_embeddings = 0, .n_kv_head = 0,
        .head = HS_HEAD_DECODER, .head_optional = 0,
        .tokenizer = 0, /* whatever tokenizer.json holds: SentencePiece-style BPE (Llama 2),
                           byte-level BPE (Llama 3) */
        .names = &llama_table,
    },
    {
        .family = HS_FAMILY_QWEN2, .name = "qwen2",
        .norm_place = HS_NORM_PRE, .norm_kind = HS_NORM_RMS, .act = HS_ACT_SILU, .gated = 1,
        .pos = HS_POS_ROTARY, .rotary_frac = 1.0f, .rotary_base = 10000.0f,
        .vis = {HS_VIS_CAUSAL, 0, 0},
        .parallel_residual = 0, .biases = 0, .qkv_bias = 1, .tied_embeddings = 0,
        .n_kv_head = 0, .head = HS_HEAD_DECODER, .head_optional = 0, .tokenizer = HS_TOK_BPE,
        .specials = qwen2_specials, .n_specials = 3, .names = &qwen2_table,
    },
    HS_ARCH_FALCON,      /* src/model/arch_falcon.c */
    HS_ARCH_GPT_BIGCODE, /* src/model/arch_bigcode.c */
    {   /* Llama's block, fused projections (arch_phi3.c); window and longrope per model */
        .family = HS_FAMILY_PHI3, .name = "phi3",
        .norm_place = HS_NORM_PRE, .norm_kind = HS_NORM_RMS, .act = HS_ACT_SILU, .gated = 1,
        .pos = HS_POS_ROTARY, .rotary_frac = 1.0f, .rotary_base = 10000.0f,
        .vis = {HS_VIS_CAUSAL, 0, 0}, .head = HS_HEAD_DECODER, .tokenizer = 0,
        .names = &hs_phi3_table,
    },
    HS_DEEPSEEK_FAMILY_ROWS /* src/model/arch_deepseek.h */
    HS_ARCH_T5, /* src/model/arch_t5.c */
    HS_NORMS_FAMILIES /* Qwen3, OLMo-2, Gemma 2 and 3: src/model/arch_norms.c */
    HS_QWEN3_MOE_FAMILY /* arch_norms.h */
};

#define N_FAMILIES (sizeof families / sizeof families[0])

const hs_arch *hs_arch_of(hs_family f)
{
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (families[i].family == f)
            return &families[i];
    return NULL;
}

const hs_arch *hs_arch_find(const char *name)
{
    for (size_t i = 0; name && i < N_FAMILIES; i++)
        if (!strcmp(families[i].name, name))
            return &families[i];
    return NULL;
}

const char *hs_family_name(hs_family f)
{
    const hs_arch *a = hs_arch_of(f);
    return a ? a->name : "?";
}

/* "a, b or c" from the families' names (gguf: their GGUF architectures, each once). */
static void name_list(char *buf, size_t cap, int gguf)
{
    const char *names[N_FAMILIES];
    size_t n = 0, at = 0;
    for (size_t i = 0; i < N_FAMILIES; i++) {
        const char *nm = gguf ? hs_arch_gguf_name(&families[i]) : families[i].name;
        int dup = !nm;
        for (size_t k = 0; k < n && !dup; k++)
            dup = !strcmp(names[k], nm);
        if (!dup)
            names[n++] = nm;
    }
    buf[0] = '\0';
    for (size_t k = 0; k < n && at < cap; k++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%s",
                               k == 0 ? "" : k + 1 == n ? " or " : ", ", names[k]);
}

/* The lists are built once; the table is static, so a second caller racing the first
 * writes the same bytes. */
const char *hs_arch_list(void)
{
    static char list[256];
    if (!list[0])
        name_list(list, sizeof list, 0);
    return list;
}

const char *hs_arch_gguf_list(void)
{
    static char list[256];
    if (!list[0])
        name_list(list, sizeof list, 1);
    return list;
}

const char *hs_arch_gguf_name(const hs_arch *a)
{
    if (!a->names || !a->names->gguf_tokenizer)
        return NULL;
    return a->gguf_name ? a->gguf_name : a->name;
}

const hs_arch *hs_arch_find_gguf(const char *arch, const char *tok_model)
{
    const hs_arch *first = NULL;
    for (size_t i = 0; arch && i < N_FAMILIES; i++) {
        const char *name = hs_arch_gguf_name(&families[i]);
        if (!name || strcmp(name, arch))
            continue;
        if (tok_model && !strcmp(families[i].names->gguf_tokenizer, tok_model))
            return &families[i];
        if (!first)
            first = &families[i];
    }
    return first;
}

/* ---- what is implemented ------------------------------------------------------------- */

const char *hs_arch_beyond_base(const hs_arch *a, const hs_model_config *c)
{
    if (c->gated != a->gated)
        return "a gated MLP in a family without one (or the reverse)";
    if (a->parallel_residual && a->norm_place != HS_NORM_PRE)
        return "the parallel residual in a post-norm block";
    if (a->pos == HS_POS_ROTARY && (a->rotary_dims < 2 ||
                                     (a->rotary_dims > c->d_head && !a->mla_kv_lora) ||
                                     a->rotary_dims % 2 || a->rotary_dims > HS_ROTARY_MAX_DIMS))
        return "rotary embeddings on 0 or an odd number of dimensions, or more than a head has,";
    if (hs_vis_check(a->vis) || a->sliding_window < 0 || a->global_every < 0 ||
        !(a->local_rotary_base >= 0))
        return "a visibility (causal, bidirectional, window or prefix) out of its range";
    if (a->pos == HS_POS_ROTARY && !hs_vis_is_causal(a->vis))
        return "rotary embeddings in a bidirectional model";
    if (a->pos == HS_POS_ALIBI && !hs_vis_is_causal(a->vis))
        return "ALiBi in a bidirectional model";
    if (c->n_kv_head < 1 || c->n_head % c->n_kv_head)
        return "a number of query heads that is not a multiple of the key/value heads";
    if (a->norm_place == HS_NORM_POST && c->n_kv_head != c->n_head)
        return "grouped key/value heads in a post-norm block";
    if (a->mla_kv_lora && (a->norm_place != HS_NORM_PRE || c->n_kv_head != c->n_head ||
                           a->pos != HS_POS_ROTARY || a->mla_nope < 0 || a->mla_q_lora < 0))
        return "latent attention outside a pre-norm rotary block with one key per head";
    if (a->mla_kv_lora && (a->qk_norm != HS_QK_NORM_NONE || a->post_norms || a->attn_softcap > 0))
        return "latent attention with query/key norms, post-sublayer norms or a softcap";
    if (a->pos == HS_POS_ALIBI && a->attn_softcap > 0)
        return "ALiBi with an attention softcap";
    if (a->enc_dec && (a->qk_norm || a->post_norms || a->no_pre_norm || a->attn_softcap > 0 ||
                       a->final_softcap > 0))
        return "an encoder-decoder with query/key norms, post-sublayer norms or softcaps";
    const char *t5 = hs_t5_beyond(a, c); /* an encoder-decoder's (arch_t5.c) */
    return t5 ? t5 : hs_arch_norms_beyond(a);
}

hs_status hs_arch_check(const hs_arch *a, const hs_model_config *c, hs_error *err)
{
    const char *missing = a->names ? hs_arch_beyond_base(a, c) : "a tensor-name table";
    if (missing)
        return hs_fail(err, HS_E_UNSUPPORTED, "architecture '%s': %s is not implemented", a->name,
                       missing);
    return HS_OK;
}

int hs_model_layer_is_local(const hs_model_config *c, int layer)
{
    const hs_arch *a = c->arch;
    if (!a || a->sliding_window < 1)
        return 0;
    return a->global_every < 1 || (layer + 1) % a->global_every != 0;
}

hs_visibility hs_model_layer_visibility(const hs_model_config *c, int layer)
{
    if (!c->arch)
        return hs_vis_from_causal(c->causal);
    if (hs_model_layer_is_local(c, layer))
        return hs_vis_sliding(c->arch->sliding_window);
    if (c->arch->enc_dec && layer >= c->n_enc_layer) /* the decoder's self-attention */
        return hs_vis_from_causal(1);
    return c->arch->vis;
}

hs_rope hs_model_layer_rope(const hs_model_config *c, int layer)
{
    const hs_arch *a = c->arch;
    hs_rope r = {0};
    if (!a || a->pos != HS_POS_ROTARY)
        return r;
    r = (hs_rope){a->rotary_dims, a->rotary_base, a->rope_scaling, a->rope_factor,
                  a->rope_low_freq, a->rope_high_freq, a->rope_orig_ctx, a->rope_short,
                  a->rope_long,
                  a->rope_scaling == HS_ROPE_LONGROPE || a->rope_scaling == HS_ROPE_YARN
                      ? a->rope_attn_factor
                      : 1.0f,
                  a->rope_beta_fast, a->rope_beta_slow};
    if (a->local_rotary_base > 0 && hs_model_layer_is_local(c, layer)) {
        r.base = a->local_rotary_base; /* unscaled (Gemma 3's local layers) */
        r.scaling = HS_ROPE_PLAIN;
        r.attn_factor = 1.0f;
    }
    return r;
}

int hs_model_kv_head(const hs_model_config *c, int h)
{
    int kv = c->n_kv_head > 0 ? c->n_kv_head : c->n_head;
    return h / (c->n_head / kv);
}
