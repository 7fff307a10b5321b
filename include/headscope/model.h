/*
 * headscope/model.h — loading transformer checkpoints: GPT-2, BERT, the rotary decoders
 * (GPT-NeoX/Pythia, Llama and Mistral, Qwen2, Phi-3) and the multi-query ones (Falcon,
 * GPT-BigCode).
 *
 * headscope opens a Hugging Face model folder (config.json, model.safetensors or its
 * shards, and tokenizer files) or a single GGUF file (model.bin), detected by magic bytes,
 * and normalises the weights into one float32 layout shared by every family.
 *
 *     hs_error err = {0};
 *     hs_model *m = NULL;
 *     if (hs_model_load("models/gpt2", &m, &err) != HS_OK) {
 *         fprintf(stderr, "headscope: %s\n", err.msg);
 *         return 1;
 *     }
 *     const hs_model_config *cfg = hs_model_config_of(m);   // n_layer, n_head, ...
 *     hs_model_free(m);
 */
#ifndef HEADSCOPE_MODEL_H
#define HEADSCOPE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "headscope/status.h"
#include "headscope/tokenizer.h"
#include "headscope/visibility.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hs_model hs_model;

typedef enum hs_family {
    HS_FAMILY_GPT2 = 1,      /* pre-LN, causal, gelu (tanh), tied LM head */
    HS_FAMILY_BERT = 2,      /* post-LN, bidirectional, gelu (erf), token types, optional MLM head */
    HS_FAMILY_ROBERTA = 3,   /* BERT's encoder, positions from padding_idx + 1, BPE (also XLM-R) */
    HS_FAMILY_DISTILBERT = 4, /* BERT's encoder without token types, its own tensor names */
    /* the rotary decoders (pre-norm, causal, rotary positions, no position table) */
    HS_FAMILY_GPT_NEOX = 5, /* Pythia: LayerNorm, fused per-head QKV, parallel residual, gelu */
    HS_FAMILY_LLAMA = 6,    /* RMSNorm, grouped KV heads, gated SiLU MLP, no biases */
    HS_FAMILY_QWEN2 = 7,    /* Llama's block with Q/K/V biases */
    /* multi-query attention (one fused QKV, src/model/arch_falcon.c, arch_bigcode.c) */
    HS_FAMILY_FALCON = 8,     /* Falcon: parallel attention, rotary or ALiBi (Falcon-RW) */
    HS_FAMILY_GPT_BIGCODE = 9, /* StarCoder, SantaCoder: GPT-2's block with one K/V head */
    HS_FAMILY_PHI3 = 10,    /* Llama's block with fused qkv_proj and gate_up_proj, longrope */
    HS_FAMILY_DEEPSEEK_V2 = 11, /* multi-head latent attention (hs_arch.mla_*), Llama's MLP or a
                                  mixture of experts (hs_arch.moe_*) */
    HS_FAMILY_DEEPSEEK_V3 = 12, /* DeepSeek-V2's block, V3's defaults and sigmoid routing */
    /* the normalised decoders (model_type qwen3, olmo2, gemma2, gemma3_text; qwen3_moe
       after T5) */
    HS_FAMILY_QWEN3 = 13,   /* Llama's block, per-head Q/K RMSNorm, explicit head_dim */
    HS_FAMILY_OLMO2 = 14,   /* norms on the sublayers' outputs, full-width Q/K RMSNorm */
    HS_FAMILY_GEMMA2 = 15,  /* (1 + w) RMSNorm before and after each sublayer, softcaps,
                               alternating local and global layers, GeGLU */
    HS_FAMILY_GEMMA3 = 16,  /* Gemma 2's block with per-head Q/K norms, 5:1 local:global */
    /* encoder-decoder: an encoder stack, then a decoder stack with cross-attention */
    HS_FAMILY_T5 = 17,      /* T5, T5 v1.1, Flan-T5: RMSNorm, relative position buckets */
    HS_FAMILY_QWEN3_MOE = 18 /* Qwen3's attention with routed experts (qwen3_moe, hs_arch.moe_*) */
} hs_family;

typedef enum hs_file_format {
    HS_FORMAT_HF = 1,  /* Hugging Face folder with model.safetensors */
    HS_FORMAT_GGUF = 2 /* single GGUF v2/v3 file */
} hs_file_format;

/* The MLP's activation; whether the MLP is gated, act(x W_gate) * (x W_up), is its own flag
 * (hs_arch.gated, hs_model_config.gated): Llama's SwiGLU is SiLU gated, GeGLU (Gemma) GELU
 * tanh gated. */
typedef enum hs_activation {
    HS_ACT_GELU_TANH = 1, /* "gelu_new" / "gelu_pytorch_tanh": tanh approximation */
    HS_ACT_GELU_ERF = 2,  /* "gelu": exact, with erf */
    HS_ACT_SILU = 3,      /* "silu": x sigmoid(x) (Llama, Qwen2: gated) */
    HS_ACT_RELU = 4       /* "relu": max(x, 0) (T5 v1.0) */
} hs_activation;
/* The name SiLU had while gating was part of the activation (Llama's gated MLP is SiLU with
 * hs_arch.gated set); kept for existing callers. */
#define HS_ACT_SILU_GATED HS_ACT_SILU

/* ---- the architecture descriptor ----------------------------------------------------
 * What a family's transformer is made of. The forward and backward passes, the loaders,
 * the GGUF writer and the analyses read these fields, never the family itself, so a new
 * family is a descriptor, a name table and the kernels it lacks (docs/architecture.md). */
typedef enum hs_norm_place {
    HS_NORM_PRE = 1, /* x + f(norm(x)), a final norm after the last block (GPT-2) */
    HS_NORM_POST = 2 /* norm(x + f(x)) (BERT) */
} hs_norm_place;

typedef enum hs_norm_kind {
    HS_NORM_LAYER = 1, /* LayerNorm: (x - mean) / std * w + b */
    HS_NORM_RMS = 2    /* RMSNorm: x / sqrt(mean(x^2) + eps) * w, no bias */
} hs_norm_kind;

typedef enum hs_pos_kind {
    HS_POS_LEARNED = 1, /* a learned absolute table, row i + pos_offset for token i */
    HS_POS_ROTARY = 2,  /* rotary on rotary_dims of each head's query and key dimensions */
    HS_POS_ALIBI = 3,   /* no position vectors: ALiBi (Press et al. 2022) biases every score of
                           query head h by its slope times the key's position, as Falcon-RW
                           computes it (hs_alibi_bias, src/nn/ops.h); causal models only */
    /* T5's relative position buckets: a learned (buckets, n_head) bias added to each score,
     * one table per stack (the stack's first layer's), shared by its layers */
    HS_POS_RELATIVE = 4
} hs_pos_kind;

/* How rotary frequencies are rescaled (config.json rope_scaling / rope_parameters). */
typedef enum hs_rope_scaling {
    HS_ROPE_PLAIN = 0,  /* theta_k = base^(-2k / rotary_dims) */
    HS_ROPE_LINEAR = 1, /* theta_k / factor (position interpolation) */
    HS_ROPE_LLAMA3 = 2, /* Llama 3.1: long wavelengths / factor, short kept, blended between */
    HS_ROPE_LONGROPE = 3, /* LongRoPE (Phi-3's "longrope", formerly "su"): theta_k divided by
                            short_factor[k] for a text of at most orig_ctx tokens, by
                            long_factor[k] beyond; cos and sin times attn_factor */
    HS_ROPE_YARN = 4    /* YaRN (Peng et al. 2023): theta / factor below beta_slow rotations in
                           orig_ctx, theta kept above beta_fast, a linear ramp between; the
                           turned dimensions scaled by attn_factor */
} hs_rope_scaling;

/* LongRoPE's per-frequency factors: one for each of at most this many frequencies. */
#define HS_ROPE_MAX_FACTORS 256

/* Layers a per-layer list of a mixture of experts (mlp_only_layers) can name. */
#define HS_MOE_MAX_LAYERS 256

/* A mixture of experts' router: how scores are made from the gate's logits, and how the
 * experts are chosen (hs_arch.moe_*). */
typedef enum hs_moe_scoring {
    HS_MOE_SOFTMAX = 0, /* DeepSeek-V2: softmax over the experts */
    HS_MOE_SIGMOID = 1  /* DeepSeek-V3: sigmoid of each, chosen with a correction bias added */
} hs_moe_scoring;
typedef enum hs_moe_routing {
    HS_MOE_GREEDY = 0,        /* the top_k best scores */
    HS_MOE_GROUP_LIMITED = 1, /* V2: within the topk_groups groups of the best maximum */
    HS_MOE_NOAUX_TC = 2       /* V3: within the topk_groups groups of the best two-score sum,
                                 scores with the correction bias choosing, without weighting */
} hs_moe_routing;

typedef enum hs_head_kind {
    HS_HEAD_DECODER = 1, /* logits = x W_dec^T (after the final norm of a pre-norm model) */
    HS_HEAD_MLM = 2      /* BERT's MLM head: dense, activation, norm, then W_dec^T + bias */
} hs_head_kind;

/* Where queries and keys are normalised (RMSNorm, after the projection, before rotary). */
typedef enum hs_qk_norm {
    HS_QK_NORM_NONE = 0,
    HS_QK_NORM_HEAD = 1, /* each head's d_head dimensions, one weight (d_head) for all heads
                            (Qwen3, Gemma 3) */
    HS_QK_NORM_FULL = 2  /* the whole projection: queries n_head d_head, keys n_kv_head d_head
                            wide, weights as wide (OLMo-2) */
} hs_qk_norm;

struct hs_names; /* the family's tensor-name table, private to the library */

typedef struct hs_arch {
    hs_family family;
    const char *name;           /* "gpt2": config.json model_type and GGUF general.architecture */
    const char *gguf_name;      /* general.architecture where llama.cpp files the family under
                                   another's (RoBERTa: "bert", told apart by its tokenizer);
                                   NULL: name */
    hs_norm_place norm_place;
    hs_norm_kind norm_kind;
    hs_activation act;          /* the family's default; config.json may name another */
    int gated;                  /* the MLP is act(x W_gate) * (x W_up), its first projection
                                   2 d_ff wide ([gate | up]) */
    hs_pos_kind pos;
    int pos_offset;             /* learned positions: token i reads row i + pos_offset */
    int pos_skips_pad;          /* RoBERTa: positions count only the non-pad tokens, a pad token
                                   (id pos_offset - 1, fairseq's padding_idx) reads its own row */
    int pos_sinusoidal;         /* DistilBERT's sinusoidal_pos_embds: a checkpoint without the
                                   table gets Vaswani et al.'s sinusoids (hs_sinusoids) */
    float rotary_frac;          /* rotary: fraction of each head's dimensions rotated */
    float rotary_base;          /* rotary: the frequency base (10000) */
    int rotary_dims;            /* rotary: int(d_head * rotary_frac), even (set per model) */
    hs_rope_scaling rope_scaling; /* and its parameters: */
    float rope_factor, rope_low_freq, rope_high_freq; /* factor; llama3's low/high factors */
    int rope_orig_ctx;          /* llama3, longrope, yarn: original_max_position_embeddings */
    float rope_attn_factor;     /* longrope, yarn: cos and sin scaled by it (0 or 1: not
                                   scaled) */
    float rope_short[HS_ROPE_MAX_FACTORS], rope_long[HS_ROPE_MAX_FACTORS]; /* longrope: the
                                   divisors of theta_k, k < rotary_dims / 2 */
    float rope_beta_fast, rope_beta_slow; /* yarn: the ramp's ends, in rotations */
    /* Multi-head latent attention (DeepSeek-V2/V3; mla_kv_lora 0: none). Queries come from
     * q_proj, or q_a_proj, an RMSNorm and q_b_proj when mla_q_lora > 0; kv_a_proj_with_mqa
     * gives a latent of mla_kv_lora (RMSNorm'd, then kv_b_proj into every head's
     * [k_nope | v]) and one rotary key of rotary_dims shared by every head. A head's query
     * and key are [nope | rope], mla_nope + rotary_dims wide, its value d_head wide; the
     * scores are scaled by mla_scale / sqrt(mla_nope + rotary_dims). */
    int mla_q_lora, mla_kv_lora, mla_nope;
    float mla_scale;
    /* Mixture of experts (DeepSeek-V2/V3; moe_experts 0: dense MLPs everywhere). Layers from
     * moe_first_dense on replace the MLP by moe_top_k of moe_experts routed experts (gated
     * SiLU MLPs moe_ff wide) plus moe_shared shared ones (one MLP moe_shared moe_ff wide),
     * the router's scores softmax or sigmoid (hs_moe_scoring), the experts taken greedily or
     * among the moe_topk_groups best of moe_groups groups (hs_moe_routing), their weights
     * normalised to sum 1 when moe_norm_topk (1: when top_k > 1, DeepSeek's rule; 2: always,
     * Qwen3-MoE's), and scaled by moe_scale. With moe_every > 1 only layers l with
     * (l + 1) % moe_every == 0 have experts (Qwen3-MoE's decoder_sparse_step), and a layer
     * whose bit is set in moe_dense (bit l % 64 of word l / 64: mlp_only_layers) keeps its
     * dense MLP (both at the end of hs_arch, added in 3.1.0). Read a layer's through
     * hs_moe_layer (src/model/model_internal.h). */
    int moe_experts, moe_top_k, moe_shared, moe_ff, moe_first_dense;
    int moe_scoring, moe_routing, moe_groups, moe_topk_groups, moe_norm_topk;
    float moe_scale;
    /* Which keys each query sees (visibility.h), layer by layer: a global layer sees `vis`
     * (zero: bidirectional); with sliding_window > 0 the local layers see the last
     * sliding_window keys (hs_vis_sliding), every layer local when global_every is 0, else
     * layer l local unless (l + 1) % global_every == 0 (Gemma 2: 2, Gemma 3: 6). Local
     * layers turn their queries and keys with local_rotary_base, unscaled, when it is not 0
     * (Gemma 3's rope_local_base_freq), else as the global ones. Read a layer's through
     * hs_model_layer_visibility / hs_model_layer_rope, never these fields. */
    hs_visibility vis;
    int sliding_window;         /* keys a local layer's query sees, itself included; 0: none */
    int global_every;
    float local_rotary_base;
    int parallel_residual;      /* x + attn(norm1 x) + mlp(norm2 x) */
    int biases;                 /* every projection has a bias; 0: only those below */
    int qkv_bias, o_bias;       /* biases = 0: Q/K/V (Qwen2) and output-projection biases */
    int emb_norm;               /* a norm right after the embeddings (BERT) */
    int token_types;            /* token type embeddings added (BERT segments) */
    int tied_embeddings;        /* the decoder is the token embeddings unless stored */
    int n_kv_head;              /* key/value heads, 0 = n_head; fewer: query head h reads KV
                                   head h / (n_head / n_kv_head) (grouped-query attention) */
    hs_head_kind head;
    int head_optional;          /* a checkpoint may come without its LM head */
    hs_tokenizer_kind tokenizer;
    /* Special tokens the tokenizer wraps a text in (NULL: none) and the mask/pad tokens of
     * the MLM loss: BERT [CLS] text [SEP], [MASK], [PAD]; GPT-2 none. */
    const char *cls_token, *sep_token, *mask_token, *pad_token;
    const char *const *specials; /* every special token, recognised whole in text */
    int n_specials;
    const struct hs_names *names;
    /* Encoder-decoder (T5): the model's layers are an encoder stack (bidirectional, layers
     * 0..n_enc_layer-1) then a decoder stack (causal self-attention, then cross-attention to
     * the encoder's final output, bidirectional over its tokens); hs_forward_encdec runs it. */
    int enc_dec;
    int rel_buckets, rel_max_distance; /* HS_POS_RELATIVE: relative_attention_num_buckets
                                          and relative_attention_max_distance */
    int attn_unscaled;          /* scores are Q K^T, not divided by sqrt(d_head) (T5) */
    float head_scale;           /* 0, or the factor of the final states before the LM head
                                   (T5 with tied embeddings: d_model^-0.5) */
    /* The normalised decoders (Qwen3, OLMo-2, Gemma 2 and 3); 0 in every other family. */
    hs_qk_norm qk_norm;         /* RMSNorm of queries and keys before rotary */
    int post_norms;             /* a norm on the attention's and the MLP's output before each
                                   is added to the stream: x + norm(f(...)) */
    int no_pre_norm;            /* the sublayers read the stream itself (OLMo-2: post_norms
                                   only); the final norm stays */
    float norm_offset;          /* RMSNorm weights stored as w - offset: the norm multiplies by
                                   offset + w (Gemma: 1); added at load from a Hugging Face
                                   folder (GGUF files store offset + w) */
    float attn_softcap;         /* scores s become cap tanh(s / cap) before the mask; 0: none */
    float final_softcap;        /* logits likewise; 0: none */
    float emb_scale;            /* the token embeddings times this (Gemma: sqrt(d_model) rounded
                                   to the embeddings' stored type; set at load); 0: none */
    float query_scale;          /* the scores' scale (Gemma: query_pre_attn_scalar^-1/2); 0:
                                   1 / sqrt(d_head) */
    /* Qwen3-MoE's sparse layers (3.1.0, at the end so the fields above keep their offsets):
     * see moe_experts above */
    int moe_every;
    uint64_t moe_dense[HS_MOE_MAX_LAYERS / 64];
} hs_arch;

/* The descriptor of a family by its name ("gpt2", "llama") or by its enum, or NULL when
 * unknown. Static; the model's own is hs_model_config_of(m)->arch. */
const hs_arch *hs_arch_find(const char *name);
const hs_arch *hs_arch_of(hs_family f);

typedef struct hs_model_config {
    hs_family family;
    int n_layer;
    int n_head;
    int d_model;
    int d_head;          /* a head's query/key/value width: d_model / n_head unless the model
                            says otherwise (config.json head_dim, GGUF attention.key_length);
                            queries n_head * d_head wide, the output projection back to d_model */
    int d_ff;
    int n_ctx;           /* maximum positions */
    int vocab_size;
    int type_vocab_size; /* BERT token types (0 for GPT-2) */
    float ln_eps;
    hs_activation act;
    int causal;          /* 1 when no layer's query sees a later key (GPT-2, Llama; a sliding
                            window too): hs_vis_is_causal of every layer's visibility. Kept for
                            the callers that take one flag; a layer's own visibility is
                            hs_model_layer_visibility */
    int has_lm_head;     /* GPT-2: always (tied or explicit); BERT: MLM head present */
    int n_kv_head;       /* key/value heads (n_head unless grouped; set when checked) */
    const hs_arch *arch; /* the family's descriptor (set when the config is checked) */
    int gated;           /* the MLP is gated (arch->gated; set when checked) */
    /* Encoder-decoder (arch->enc_dec): n_layer counts both stacks' blocks, layers
     * 0..n_enc_layer-1 the encoder's, the rest the decoder's (decoder layer j is n_enc_layer
     * + j); 0 for a model of one stack. decoder_start_id: the decoder's first input token. */
    int n_enc_layer;
    int decoder_start_id;
} hs_model_config;

/* Which keys the queries of layer l see: the descriptor's rule (hs_arch.vis, sliding_window,
 * global_every); for a config without a descriptor, causal ? causal : bidirectional. */
hs_visibility hs_model_layer_visibility(const hs_model_config *c, int layer);

/* 1 when layer l is a local (sliding-window) layer. */
int hs_model_layer_is_local(const hs_model_config *c, int layer);

/* A layer's rotary frequencies: theta_k = base^(-2k / dims), k < dims / 2, rescaled as
 * scaling says (hs_rope_scaling; factor, low_freq, high_freq and orig_ctx its parameters;
 * longrope's factors and cos/sin scale the last three, pointing into the model's descriptor). */
typedef struct hs_rope {
    int dims;            /* dimensions of each head turned (0: no rotary embeddings) */
    float base;
    hs_rope_scaling scaling;
    float factor, low_freq, high_freq;
    int orig_ctx;
    const float *short_factor, *long_factor; /* longrope: dims / 2 divisors each */
    float attn_factor;   /* longrope, yarn: cos and sin times this (0 or 1: not scaled) */
    float beta_fast, beta_slow; /* yarn: the ramp's ends, in rotations */
} hs_rope;

/* The rotary frequencies of layer l (dims 0 for learned positions). */
hs_rope hs_model_layer_rope(const hs_model_config *c, int layer);

/* Width of a layer's attention context, the output projection's input: n_head * d_head
 * (d_model for every family whose heads split d_model). */
int hs_model_attn_width(const hs_model_config *c);

/* Loads a model from a Hugging Face folder or a GGUF file. Validates every length,
 * offset, dtype and shape before allocating, rejects NaN/Inf weights. On success
 * *out owns everything; free with hs_model_free. */
hs_status hs_model_load(const char *path, hs_model **out, hs_error *err);

/* What hs_model_open reads (flags, or-ed; 0 = everything, as hs_model_load). */
enum {
    /* Config, tokenizer and the tensor table, every tensor's presence, shape and dtype
     * checked, but no weight read or converted: enough for hs_model_param_count and
     * hs_model_storage_dtype (what `headscope info` prints). */
    HS_OPEN_NO_WEIGHTS = 1,
    /* Config and tokenizer only; the weights file is not even opened (a folder with
     * config.json and tokenizer files is enough). */
    HS_OPEN_TOKENIZER = 2,
    /* Use F32 weights already in headscope's layout where they lie in the mapped file
     * (GPT-2 safetensors: every tensor; BERT: the embeddings) instead of copying them: the
     * least memory (no second copy, ever), but the file's 4 KB pages make the GEMMs about
     * 15-25% slower than the default copy in transparent huge pages. */
    HS_OPEN_MAP_WEIGHTS = 4,
    /* A non-F32 checkpoint's layer matrices that the weight budget does not keep converted
     * are multiplied by in the forward pass from their stored bytes (F16, BF16, ggml's block
     * formats; the file stays mapped), a block of a few columns at a time decoded inside the
     * product, instead of being converted whole in every pass: the same results bit for
     * bit, and no float32 copy of them (docs/gguf.md, "Memory"). The backward pass,
     * composition, DLA and norm-based attention still convert each layer they read. The
     * token embeddings and the LM head, when not F32, stay in their stored type too: rows
     * decoded where looked up, the logits a product with the stored rows (the same bits);
     * composition reads them a block of rows at a time; the GGUF writer converts the whole
     * table once, on first use, and keeps it until hs_model_free. */
    HS_OPEN_STORED_WEIGHTS = 8,
    /* HS_OPEN_STORED_WEIGHTS with every layer matrix in its stored type (whatever the
     * weight_memory budget) and, for the block-quantised ones (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
     * Q2_K..Q6_K, IQ4_NL, IQ4_XS), the activations that multiply them quantised to 8 bits per
     * 32 values and multiplied by the stored integers, as llama.cpp does: faster, and no
     * longer the float32 path's results (the error per type: docs/gguf.md, "8-bit
     * activations"). F16, BF16 and F32 matrices, attention and everything else stay float. */
    HS_OPEN_Q8_ACTIVATIONS = 16
};

/* As hs_model_load, reading only what flags ask for. A model opened without weights
 * cannot run: hs_forward and everything built on it refuse it (HS_E_ARG). */
hs_status hs_model_open(const char *path, unsigned flags, hs_model **out, hs_error *err);

/* Options of hs_model_open2. */
typedef struct hs_open_opts {
    unsigned flags; /* HS_OPEN_*, as hs_model_open */
    /* Bytes of float32 layer weights converted from a non-F32 checkpoint (F16, BF16, Q8_0,
     * Q4_0, Q4_K, Q6_K) that the model keeps at once. The layers' matrices stay in their
     * stored type (views into the mapped file); a forward pass takes each layer's float32
     * weights from a cache of at most this many bytes. When every layer fits, each is
     * converted once, at load, and kept; above it, the layers that fit stay converted and
     * the rest are converted again in every pass (the least recently used dropped first).
     * At least one layer is always converted, whatever the budget. float32 checkpoints and
     * the embeddings, LM head and norms are float32 always and not counted (the embeddings
     * and LM head stay stored with HS_OPEN_STORED_WEIGHTS).
     * 0: HEADSCOPE_WEIGHT_MEMORY ("512M", "4G", "all", "stored"); without it, as
     * HS_WEIGHT_MEMORY_STORED when a layer matrix can be used in its stored type (GGUF files
     * and (out, in) safetensors; since 3.2.0), else (GPT-2's Conv1D matrices stored (in, out)
     * as F16/BF16) a quarter of the physical memory; HS_WEIGHT_MEMORY_ALL: no bound
     * (docs/architecture.md, "Memory"). */
    size_t weight_memory;
} hs_open_opts;

#define HS_WEIGHT_MEMORY_ALL ((size_t)-1)
/* weight_memory for a budget that keeps no layer converted, with HS_OPEN_STORED_WEIGHTS:
 * every layer multiplied from its stored bytes ("stored" to --weight-memory and
 * HEADSCOPE_WEIGHT_MEMORY). */
#define HS_WEIGHT_MEMORY_STORED ((size_t)-2)

/* As hs_model_open, with the options above (o NULL: every default). A malformed
 * HEADSCOPE_WEIGHT_MEMORY fails with HS_E_ARG naming it. Every function that takes the
 * model works under any budget and gives the same results bit for bit; a budget that holds
 * fewer than all of its layers costs the conversions (docs/architecture.md, "Memory").
 * Layers in use at once stay converted beyond the budget while in use (composition scores
 * use two, each concurrent pass one), and the cache returns within it afterwards. */
hs_status hs_model_open2(const char *path, const hs_open_opts *o, hs_model **out, hs_error *err);

/* The weight budget in effect, in bytes (HS_WEIGHT_MEMORY_ALL: no bound), and the bytes of
 * float32 layer weights a non-F32 checkpoint needs converted at once to keep every layer
 * (0 for a float32 checkpoint; known with HS_OPEN_NO_WEIGHTS too): the model converts its
 * layers again in every pass when the second exceeds the first. */
size_t hs_model_weight_memory(const hs_model *m);
size_t hs_model_converted_bytes(const hs_model *m);
/* 1 when the forward pass multiplies by the layers the budget does not keep in their stored
 * type (HS_OPEN_STORED_WEIGHTS, or HS_WEIGHT_MEMORY_STORED). */
int hs_model_stored_weights(const hs_model *m);

/* 1 when the model holds its weights (opened without HS_OPEN_NO_WEIGHTS/TOKENIZER). */
int hs_model_has_weights(const hs_model *m);

/* Frees a model and its tokenizer; accepts NULL. */
void hs_model_free(hs_model *m);

/* The model's dimensions (owned by the model). */
const hs_model_config *hs_model_config_of(const hs_model *m);

/* The model's tokenizer, or NULL if the model came without tokenizer files. Owned by m. */
const hs_tokenizer *hs_model_tokenizer(const hs_model *m);

/* Number of float parameters held (embeddings, blocks, final norm, LM/MLM head;
 * a tied decoder counted once). */
size_t hs_model_param_count(const hs_model *m);

/* Where the weights came from: format, storage dtype name of the largest matrix
 * ("F32", "F16", "BF16", "Q8_0"), and the path given to hs_model_load. */
hs_file_format hs_model_format(const hs_model *m);
const char *hs_model_storage_dtype(const hs_model *m);
const char *hs_model_path(const hs_model *m);
/* How the layers' products take their activations: "q8" for a model opened with
 * HS_OPEN_Q8_ACTIVATIONS (its block-quantised layers multiplied with 8-bit activations),
 * "float" otherwise (report.json's model.activations). */
const char *hs_model_activations(const hs_model *m);

/* What the reader found odd in the file but went on past, as llama.cpp does (a GGUF special
 * token id beyond the vocabulary: the default id is used), one line per warning, or "" when
 * there was nothing. Owned by m; the library prints nothing, `headscope` prints each line. */
const char *hs_model_warnings(const hs_model *m);

/* The weights file of a Hugging Face folder ("model.safetensors" or "pytorch_model.bin"),
 * or NULL for a GGUF file or a folder opened with HS_OPEN_TOKENIZER. Static string. */
const char *hs_model_weights_file(const hs_model *m);

/* One file a model was read from. */
typedef struct hs_model_file {
    char *name;        /* the file's name inside the model folder, or the GGUF file's name */
    uint64_t bytes;
    char sha256[65];   /* 64 lowercase hex digits */
} hs_model_file;

/* The model's files with their sizes and SHA-256 digests (reads every byte): the GGUF file,
 * or each of config.json, model.safetensors, model.safetensors.index.json, pytorch_model.bin,
 * tokenizer.json, vocab.json, merges.txt, vocab.txt, tokenizer_config.json and
 * special_tokens_map.json that the folder holds, the shards of a sharded checkpoint right
 * after its index (the ones the model was loaded from, each once, sorted by name). On
 * success *out (free with hs_model_files_free) has *n entries. */
hs_status hs_model_files_hash(const hs_model *m, hs_model_file **out, int *n, hs_error *err);

/* Frees what hs_model_files_hash returned; accepts NULL. */
void hs_model_files_free(hs_model_file *files, int n);

/* The key/value head query head h reads: h / (n_head / n_kv_head). */
int hs_model_kv_head(const hs_model_config *c, int h);

/* Family names: "gpt2", "bert", "roberta", "distilbert", "gpt_neox", "llama", "qwen2",
 * "falcon", "gpt_bigcode", "phi3", "deepseek_v2", "deepseek_v3", "t5", "qwen3", "olmo2",
 * "gemma2", "gemma3_text", "qwen3_moe". */
const char *hs_family_name(hs_family f);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_MODEL_H */
