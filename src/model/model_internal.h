/*
 * src/model/model_internal.h — the normalised weight layout and the contract between
 * file-format readers (safetensors.c, gguf.c) and the weight builder (weights.c).
 *
 * Every matrix is stored (in, out) row-major, so a projection is y = x W with
 * x: (n, in) and W: (in, out) — one GEMM shape for both families.
 */
#ifndef HEADSCOPE_MODEL_INTERNAL_H
#define HEADSCOPE_MODEL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "core/qgemm.h"
#include "headscope/model.h"
#include "headscope/tokenizer.h"

/* Element types a reader can hand over. */
typedef enum hs_dtype {
    HS_DT_F32 = 0,
    HS_DT_F16 = 1,
    HS_DT_BF16 = 2,
    HS_DT_Q8_0 = 3, /* blocks of 32 along the contiguous dimension: f16 scale + 32 int8 */
    /* A type headscope does not compute with (integer or boolean buffers such as
     * embeddings.position_ids, F64, FP8): the file still opens, and the weight builder
     * refuses the tensor only if the model needs it. */
    HS_DT_OTHER = 4,
    /* ggml's other block formats, read from GGUF files only (model/quant.h) */
    HS_DT_Q4_0 = 5,
    HS_DT_Q4_K = 6,
    HS_DT_Q6_K = 7,
    HS_DT_Q4_1 = 8,
    HS_DT_Q5_0 = 9,
    HS_DT_Q5_1 = 10,
    HS_DT_Q2_K = 11,
    HS_DT_Q3_K = 12,
    HS_DT_Q5_K = 13,
    HS_DT_IQ4_NL = 14,
    HS_DT_IQ4_XS = 15
} hs_dtype;

/* The hs_dtype of a ggml type code (F32 for F32 and any type the GGUF parser refused). */
hs_dtype hs_dtype_of_ggml(uint32_t type);

const char *hs_dtype_name(hs_dtype dt);

/* A tensor as stored in a file: shape in PyTorch order (outermost first, the last
 * dimension contiguous), bytes borrowed from the reader's buffer. */
typedef struct hs_tensor_view {
    const char *name;      /* name as in the file, for messages */
    hs_dtype dtype;
    const char *dtype_name; /* the file's name for the type ("I64"), static; NULL = hs_dtype_name */
    int ndim;              /* 1..4 */
    int64_t shape[4];
    const unsigned char *data;
    size_t nbytes;
    int pair_rows;         /* 0, or dh: the rows are in ggml's rope-pair order, head by head
                            * (hs_view_row); a matrix's readers take each row from its place */
} hs_tensor_view;

/* The stored row that holds row r of view t. llama.cpp's converter moves each Q and K head's
 * rows from the "rotate half" order [x_0 .. x_{dh/2-1} | y_0 .. y_{dh/2-1}] to adjacent pairs
 * [x_0 y_0 x_1 y_1 ...] (ggml's rope turns neighbours): with t->pair_rows = dh, row
 * h dh + j dh/2 + i is stored row h dh + 2 i + j. Readers use it instead of a reordered copy. */
static inline size_t hs_view_row(const hs_tensor_view *t, size_t r)
{
    if (!t->pair_rows)
        return r;
    size_t dh = (size_t)t->pair_rows, half = dh / 2, k = r % dh;
    return r - k + 2 * (k % half) + k / half;
}

/* ---- the name table of a family ----------------------------------------------------
 * One row per stored tensor, in the order a GGUF file lists them: which normalised slot it
 * fills (all of it, or the Q, K or V block of the fused QKV slot), its name in a Hugging
 * Face checkpoint and in a GGUF file. The weight builder (weights.c) reads it with every
 * format reader (hf.c, gguf_load.c), the GGUF writer (gguf_write.c) writes from it. */
typedef enum hs_slot {
    /* model-level */
    HS_S_TOK_EMB, HS_S_POS_EMB, HS_S_TYPE_EMB, HS_S_EMB_NORM_W, HS_S_EMB_NORM_B,
    /* per layer (names hold one %d) */
    HS_S_NORM1_W, HS_S_NORM1_B, HS_S_QKV_W, HS_S_QKV_B, HS_S_O_W, HS_S_O_B,
    HS_S_NORM2_W, HS_S_NORM2_B, HS_S_FC_W, HS_S_FC_B, HS_S_PROJ_W, HS_S_PROJ_B,
    /* a decoder layer's cross-attention (encoder-decoder): its norm, [Q | K | V], output */
    HS_S_XNORM_W, HS_S_XQKV_W, HS_S_XO_W,
    /* multi-head latent attention (src/model/arch_deepseek.c): the query's norm and up
     * projection (q_lora > 0), the latent's norm and its up projection to [k_nope | v] */
    HS_S_MLA_QA_NORM_W, HS_S_MLA_QB_W, HS_S_MLA_KVA_NORM_W, HS_S_MLA_KVB_W,
    /* the normalised decoders' (hs_arch.qk_norm, post_norms) */
    HS_S_Q_NORM_W, HS_S_K_NORM_W, HS_S_POST_ATTN_NORM_W, HS_S_POST_MLP_NORM_W,
    /* after the blocks */
    HS_S_FINAL_NORM_W, HS_S_FINAL_NORM_B,
    HS_S_MLM_W, HS_S_MLM_B, HS_S_MLM_NORM_W, HS_S_MLM_NORM_B, HS_S_MLM_BIAS, HS_S_DECODER,
    /* encoder-decoder: the encoder's final norm, each stack's relative position bias */
    HS_S_ENC_NORM_W, HS_S_REL_ENC, HS_S_REL_DEC
} hs_slot;

#define HS_SLOT_IS_LAYER(s) ((s) >= HS_S_NORM1_W && (s) <= HS_S_POST_MLP_NORM_W)

enum {
    HS_TN_OPTIONAL = 1, /* may be absent: the decoder then is the token embeddings */
    HS_TN_HEAD = 2,     /* part of an optional LM head: present when the first HEAD row is */
    HS_TN_BARE = 4,     /* the HF name never carries the family prefix (heads outside the
                           base model: lm_head.*, cls.*) */
    HS_TN_GGUF_COPY = 8, /* a GGUF file holds it even when tied, as a copy of the token
                           embeddings (unless hs_gguf_write_options.no_output_copy) */
    HS_TN_QKV_HEADS = 16, /* a fused QKV stored by K/V group ([g0: q .. q k v][g1: ...]...,
                            one group a head in GPT-NeoX: [h0: q k v][h1: q k v]...),
                            reordered at load into the slot's [Q | K | V] */
    /* encoder-decoder: a layer row of the encoder's layers only, or of the decoder's only
       (its %d then counts from 0 at the decoder's first layer: hs_names_index) */
    HS_TN_ENC = 32,
    HS_TN_DEC = 64
};

typedef struct hs_tensor_name {
    hs_slot slot;
    int part;               /* -1: the whole slot; 0, 1, 2: the Q, K, V block of HS_S_QKV_* */
    const char *hf;         /* Hugging Face name without the family prefix */
    const char *hf_alt;     /* a second HF name tried when hf is absent, or NULL */
    const char *gguf;       /* GGUF name */
    const char *gguf_fused; /* a part: the fused tensor a GGUF file may hold instead */
    unsigned flags;         /* HS_TN_* */
} hs_tensor_name;

/* The rows Llama's layout ends a layer and the model with (the name pattern NL_ of a
 * layer's prefix, "layers.%d."): the MLP's norm, its gate, up and down projections (flags
 * F_), the final norm and the untied decoder (absent when tie_word_embeddings). Shared by
 * llama, qwen2 and the deepseek families (arch.c, arch_deepseek.c). */
#define HS_LLAMA_MLP_HEAD_ROWS(NL_, F_) \
    {HS_S_NORM2_W, -1, NL_ "post_attention_layernorm.weight", NULL, "blk.%d.ffn_norm.weight", NULL, 0}, \
    {HS_S_FC_W, 0, NL_ "mlp.gate_proj.weight", NULL, "blk.%d.ffn_gate.weight", NULL, F_}, \
    {HS_S_FC_W, 1, NL_ "mlp.up_proj.weight", NULL, "blk.%d.ffn_up.weight", NULL, F_}, \
    {HS_S_PROJ_W, -1, NL_ "mlp.down_proj.weight", NULL, "blk.%d.ffn_down.weight", NULL, F_}, \
    {HS_S_FINAL_NORM_W, -1, "norm.weight", NULL, "output_norm.weight", NULL, 0}, \
    {HS_S_DECODER, -1, "lm_head.weight", NULL, "output.weight", NULL, HS_TN_OPTIONAL | HS_TN_BARE},

struct hs_names {
    const hs_tensor_name *t;
    size_t n;
    const char *hf_prefix; /* "transformer.", tried second on every name not HS_TN_BARE */
    int hf_out_in;         /* HF matrices stored (out, in) (nn.Linear) rather than Conv1D's */
    const char *gguf_tokenizer; /* tokenizer.ggml.model; NULL: the family has no GGUF form
                                   (llama.cpp has no architecture for it: DistilBERT) */
};

/* Name tables of the families kept in their own files (src/model/arch_<family>.c). */
extern const struct hs_names hs_phi3_table;

/* Rotary embeddings rotate at most this many dimensions of a head (real models: <= 256). */
#define HS_ROTARY_MAX_DIMS 512

/* Columns of the fused QKV slot, d_model + 2 n_kv_head d_head: [Q | K | V], query head h
 * at h d_head, KV head g at d_model + g d_head (K) and d_model + (n_kv_head + g) d_head (V). */
int hs_qkv_width(const hs_model_config *c);

/* Columns of the MLP's first slot: d_ff, or 2 d_ff for the gated MLP ([gate | up]). */
int hs_ff_width(const hs_model_config *c);

/* The families' names for messages: "gpt2, bert, roberta or distilbert". */
const char *hs_arch_list(void);

/* The family of a GGUF file: the one whose GGUF architecture (hs_arch.gguf_name, else its
 * name) is arch and, where families share an architecture, whose tokenizer.ggml.model is
 * tok_model (NULL: the file has none; then the first, the family llama.cpp means). NULL when
 * no family with a GGUF form has that architecture. */
const hs_arch *hs_arch_find_gguf(const char *arch, const char *tok_model);

/* The GGUF architectures for messages: "gpt2 or bert". */
const char *hs_arch_gguf_list(void);

/* general.architecture of a's GGUF files, or NULL when the family has no GGUF form. */
const char *hs_arch_gguf_name(const hs_arch *a);

/* The first combination of a's features (with the config's activation and heads) that
 * the block does not implement, NULL when there is none. A static phrase. */
const char *hs_arch_beyond_base(const hs_arch *a, const hs_model_config *c);

/* Fails (HS_E_UNSUPPORTED, naming the feature) when a descriptor asks for something the
 * forward pass does not implement yet; every loader calls it through hs_config_validate. */
hs_status hs_arch_check(const hs_arch *a, const hs_model_config *c, hs_error *err);

/* Calls fn for every row of the table that the model has (per-layer rows once per layer,
 * in table order) until fn returns non-zero, which is returned. */
typedef hs_status (*hs_names_fn)(void *ctx, const hs_tensor_name *e, int layer, hs_error *err);
hs_status hs_names_walk(const hs_model_config *c, hs_names_fn fn, void *ctx, hs_error *err);

/* The first row of a's table that fills slot s, or NULL. */
const hs_tensor_name *hs_names_row(const hs_arch *a, hs_slot s);

/* The number a layer row's name carries for layer l: l, or l - n_enc_layer for a decoder
 * row (HS_TN_DEC) of an encoder-decoder. */
int hs_names_index(const hs_model_config *c, const hs_tensor_name *e, int layer);

/* A row's name with its layer filled in (hf, hf_alt or gguf), in buf. */
const char *hs_names_format(const char *pattern, int layer, char *buf, size_t cap);

/* How a row's tensor sits in the normalised layout. */
typedef enum hs_tensor_kind {
    HS_K_VEC,  /* (cols) */
    HS_K_ROWS, /* (rows, cols), stored as is: embeddings and decoders */
    HS_K_MAT   /* logical (in = rows, out = cols); stored (in, out) or (out, in) */
} hs_tensor_kind;
typedef struct hs_tensor_shape {
    hs_tensor_kind kind;
    int rows, cols;  /* this row's tensor */
    int ld, off;     /* in its slot: row stride and first column (a Q, K or V block) */
    size_t slot_floats; /* the whole slot */
} hs_tensor_shape;
hs_tensor_shape hs_names_shape(const hs_model_config *c, const hs_tensor_name *e);
/* 1 when a tensor of shape sh stored with out_in is a matrix stored (out, in): each stored
 * row is a column of W, which the conversion transposes into place and the products on the
 * stored type read as it lies (wcache.c); a matrix stored (in, out) (GPT-2's Conv1D) is
 * neither. */
static inline int hs_rows_are_columns(hs_tensor_shape sh, int out_in)
{
    return sh.kind == HS_K_MAT && out_in;
}

/* The slot's pointer in m: &m->wte, &m->layers[layer].w_qkv, ... */
const float **hs_slot_ptr(hs_model *m, hs_slot s, int layer);

/* A layer slot's pointer in L (&L->w_qkv, ...), NULL for a slot that is not a layer's. */
typedef struct hs_layer hs_layer;
const float **hs_layer_slot_ptr(hs_layer *L, hs_slot s);

/* Multi-head latent attention (src/model/arch_deepseek.c). The fused slot's columns
 * [q | kv_a]: q is n_head (nope + rope) wide, or q_lora (q_a_proj's output); kv_a is the
 * latent then the shared rotary key, kv_lora + rope. */
int hs_mla_qkv_width(const hs_model_config *c);
int hs_mla_q_width(const hs_model_config *c); /* q's part: q_lora, or n_head (nope + rope) */
/* Shapes and pointers of the MLA slots for hs_names_shape / hs_layer_slot_ptr: 1 when e
 * (or s) is one (its shape in *sh), 0 otherwise. */
int hs_mla_shape(const hs_model_config *c, const hs_tensor_name *e, hs_tensor_shape *sh);
const float **hs_mla_slot_ptr(hs_layer *L, hs_slot s);
/* The family tables arch_deepseek.c adds to families[] (arch.c). */
extern const struct hs_names hs_deepseek_v2_names;

/* A logical tensor the builder asks a reader for: the table row, its layer (-1 for a
 * model-level row) and its Hugging Face name with the prefix left out (alt: hf_alt). */
typedef struct hs_tensor_ref {
    const hs_tensor_name *e;
    int layer;
    int alt;
} hs_tensor_ref;

/* A reader resolves a logical tensor to a stored one; hf_name is its Hugging Face name
 * ("h.0.attn.c_attn.weight"), r the row it comes from. For 2-D weights it also says how
 * the matrix is stored: *out_in = 1 for (out, in) (nn.Linear, every GGUF matrix), 0 for
 * (in, out) (GPT-2 Conv1D in HF files). Returns NULL when absent. */
typedef const hs_tensor_view *(*hs_tensor_lookup)(void *ctx, const char *hf_name,
                                                  const hs_tensor_ref *r, int *out_in);

/* The sinusoidal position table of Vaswani et al. (2017) §3.5, computed in double:
 * pe[p][2i] = sin(p / 10000^(2i/d)), pe[p][2i+1] = cos(p / 10000^(2i/d)); pe: (rows, d). */
void hs_sinusoids(float *pe, int rows, int d);

/* Builds the weights of m (whose cfg is already filled and checked) from a reader.
 * Checks every shape against cfg, converts to float32, rejects NaN/Inf. A layer matrix
 * stored in another type stays as stored and goes to the weight cache (below). */
hs_status hs_weights_build(hs_model *m, hs_tensor_lookup lookup, void *ctx, hs_error *err);

/* 1 when layer l of c is a mixture-of-experts layer. */
int hs_moe_layer(const hs_model_config *c, int l);
/* The experts' weights of every mixture-of-experts layer (src/model/moe_weights.c), through
 * the reader's lookup, after the name table's (hs_weights_build calls it): each checked
 * (present, 2-D, F32/F16/BF16, its shape), converted to float32 into m->moe_arena unless
 * HS_OPEN_NO_WEIGHTS; a dense layer whose MLP is missing is refused, naming it. */
hs_status hs_moe_weights_build(hs_model *m, hs_tensor_lookup lookup, void *ctx, hs_error *err);

/* Converts the tensor t (stored (out, in) when out_in, for a matrix) into its place sh in
 * dst (row stride sh.ld, first column sh.off), the rows in parallel; fails naming `name`
 * on a NaN or an infinity. t's shape, size and block alignment are already checked. */
hs_status hs_tensor_convert(const hs_tensor_view *t, int out_in, hs_tensor_shape sh,
                            float *dst, const char *name, hs_error *err);

/* Decodes elements [from, from + count) of the hs_tensor_view t (flat, stored order; whole
 * blocks of a block format) into out: hs_tensor_convert's values (hs_qdecode_fn, for the
 * layer matrices used in their stored type). */
void hs_tensor_decode(const void *t, size_t from, float *out, size_t count);
/* The same elements in their integer form (hs_qdecode_i8_fn, src/model/quant_i8.c:
 * hs_quant_decode_i8 on t's bytes): returns the sub-block (16, 32), or 0 when t's type has
 * no integer form (F32, F16, BF16). hs_tensor_sub_block: the same answer without decoding. */
int hs_tensor_decode_i8(const void *t, size_t from, int8_t *q, float *d, float *m, size_t count);
int hs_tensor_sub_block(const void *t);
/* The one-row kernel (hs_qrows_fn, src/model/quant_rows.c) for the hs_tensor_view t's type,
 * which decodes its weights in registers (Q8_0, F16, BF16, where the CPU has AVX2); NULL
 * for the others. */
hs_qrows_fn hs_tensor_rows_fn(const void *t);
/* The instruction set hs_tensor_rows_fn's kernels use: 2 AVX-512, 1 AVX2 with F16C, 0 none
 * (no kernel: gemv.c decodes) (the best the CPU has, at most what hs_qrows_set_isa allowed;
 * the same bits on each). hs_qrows_set_isa, for tests: allow at most isa (-1: no limit); returns
 * hs_qrows_isa() after. */
int hs_qrows_isa(void);
int hs_qrows_set_isa(int isa);
/* 1 when elements [from, from + count) of t (whole blocks) are all finite by a look at the
 * stored bytes alone (F16/BF16 exponents, block formats' scales: quant.h); 0 when that look
 * cannot tell (F32, a non-finite scale), and decoding them must. */
int hs_tensor_surely_finite(const hs_tensor_view *t, size_t from, size_t count);
/* The ggml type code of a block-quantised dtype (0 for F32, F16, BF16 and others). */
uint32_t hs_dtype_ggml_quant(hs_dtype dt);
/* Bytes that count elements of dt take (a whole number of blocks of a block format), 0 for
 * HS_DT_OTHER. */
size_t hs_dtype_bytes(hs_dtype dt, size_t count);

/* Elements per block of dt: a block format's (32, 256), else 1. */
int hs_dtype_block(hs_dtype dt);

/* A fused QKV stored by K/V group ([g0: q .. q k v][g1: ...]..., n_head / n_kv_head queries
 * a group: GPT-NeoX one a head, Falcon and GPT-BigCode any) reordered in place into
 * [Q | K | V]: x: (rows, ld). */
hs_status hs_qkv_heads_reorder(const hs_model_config *c, float *x, int rows, int ld,
                               hs_error *err);

/* Drops the whole pages of the n bytes at p from a private read-only file mapping once they
 * are converted: read again later, they are simply faulted in from the file (the page
 * cache), so a load's peak is about one copy of the weights, not two. */
void hs_release_pages(const void *p, size_t n);

/* ---- the weight cache (src/model/wcache.c) -----------------------------------------
 * The four matrices of a layer (QKV, O, FC, PROJ), when stored in a type other than F32,
 * are units of the cache: their stored bytes stay where the reader had them (a file
 * mapping, retained; else a copy the cache owns), and their float32 form is made on
 * demand, at most `budget` bytes of it at once. */
enum { HS_WU_QKV, HS_WU_O, HS_WU_FC, HS_WU_PROJ, HS_WU_N };

/* The unit kind of a slot, or -1 for a slot that is not a layer matrix. */
int hs_wunit_kind(hs_slot s);

typedef struct hs_wcache hs_wcache;
/* The embeddings and LM head kept in their stored type (src/model/emb_stored.h). */
typedef struct hs_emb_stored hs_emb_stored;

/* A cache for m (cfg set) with budget bytes (HS_WEIGHT_MEMORY_ALL: no bound); NULL when
 * out of memory. */
hs_wcache *hs_wcache_new(const hs_model *m, size_t budget);
void hs_wcache_free(hs_wcache *wc);

/* Records one stored tensor (a part row or the whole slot) of layer l's unit `kind`; the
 * view's bytes are retained or copied. */
hs_status hs_wcache_add(hs_wcache *wc, int l, int kind, const hs_tensor_view *t, int out_in,
                        hs_tensor_shape sh, int qkv_heads, const char *name, hs_error *err);

/* After every unit is recorded: converts each (which checks every value) and keeps those
 * the budget holds for good, the first layers first (every layer when all fit); their
 * pointers go into m->layers. */
hs_status hs_wcache_prepare(hs_model *m, hs_error *err);

/* The float32 weights of layer l: *out is m->layers[l] with every cached matrix made
 * resident and pinned; each hs_layer_get that succeeds is matched by one hs_layer_put.
 * Every reader of a layer's weights outside src/model/ goes through these two, never
 * m->layers[l] directly (on a model whose layers take turns its matrices are absent there).
 * The budget is a target, not a ceiling: a pinned unit is never dropped, so several layers
 * pinned at once (composition holds two; concurrent passes one each) are all resident
 * however small the budget, beyond it while pinned; hs_layer_put drops the least recently
 * used unpinned units until the cache is back within it. Pins nest (the same layer pinned
 * twice is converted once). Safe from several threads at once (a conversion runs under the
 * cache's lock). */
hs_status hs_layer_get(const hs_model *m, int l, hs_layer *out, hs_error *err);
void hs_layer_put(const hs_model *m, int l);

/* As hs_layer_get, for a reader that multiplies by the matrices with hs_op_linear and reads
 * them no other way (the forward block): on a model opened to use its stored types
 * (hs_model.stored_gemm), a matrix neither kept nor resident is not converted but given as
 * its registered hs_qmat (src/core/qgemm.h), which hs_op_linear multiplies by a block at a
 * time, with the same bits as its float32 form. Matched by hs_layer_put as hs_layer_get. */
hs_status hs_layer_get_linear(const hs_model *m, int l, hs_layer *out, hs_error *err);

/* As hs_layer_get for a reader of some of the layer's matrices only: `units` is a mask of
 * 1 << HS_WU_*; only those are made resident (converted where the cache holds them) and
 * pinned, the other cached matrices' slots are NULL in *out. Matched by hs_layer_put_units
 * with the same mask. DLA and norm-based attention read W_O alone: a layer of TinyLlama-1.1B
 * is 168 MiB of float32, its W_O 16. */
hs_status hs_layer_get_units(const hs_model *m, int l, unsigned units, hs_layer *out,
                             hs_error *err);
void hs_layer_put_units(const hs_model *m, int l, unsigned units);

/* The cache's counters, for tests and the benchmark. */
typedef struct hs_wcache_stats {
    size_t budget;      /* bytes */
    size_t need;        /* float32 bytes of every cached unit */
    size_t kept;        /* bytes converted at load and kept for good */
    size_t resident;    /* float32 bytes in the cache now (kept included) */
    size_t peak;        /* the most resident at once */
    size_t conversions; /* units converted, load included */
    int streams;        /* 1 when not every unit is kept */
} hs_wcache_stats;
void hs_wcache_stats_of(const hs_model *m, hs_wcache_stats *s);

/* The budget of a model opened with weight_memory 0: HEADSCOPE_WEIGHT_MEMORY when set (a
 * malformed value fails, HS_E_ARG), else a quarter of the physical memory with *implicit
 * set (the default of hs_open_opts: layers in their stored type, hs_weights_build). */
hs_status hs_weight_memory_default(size_t *bytes, int *implicit, hs_error *err);

/* Checks a config for sane, consistent values (positive sizes, d_model % n_head,
 * limits), fills derived fields (arch from family, d_head, causal), and refuses an
 * architecture feature that is not implemented, naming it. */
hs_status hs_config_validate(hs_model_config *cfg, hs_error *err);

typedef struct hs_layer {
    /* Pre-norm (GPT-2): ln_1, before attention. Post-norm (BERT): attention.output.LayerNorm,
     * after it. */
    const float *ln1_w, *ln1_b;   /* (d) */
    const float *w_qkv;           /* (d, W): columns [Q | K | V], W = hs_qkv_width; query
                                     head h at h*d_head, KV head g at d + g*d_head (K) */
    const float *b_qkv;           /* (W), or NULL (no bias) */
    const float *w_o, *b_o;       /* (d, d), (d) or NULL */
    /* Pre-norm: ln_2, before the MLP. Post-norm: output.LayerNorm, after it. */
    const float *ln2_w, *ln2_b;   /* (d) */
    const float *w_fc, *b_fc;     /* (d, F), (F) or NULL, F = hs_ff_width: [gate | up] gated */
    const float *w_proj, *b_proj; /* (d_ff, d), (d) or NULL */
    /* Norm biases are NULL under RMSNorm. */
    /* hs_arch.qk_norm: (d_head) each (per head), or (n_head d_head) and (n_kv_head d_head)
     * (full width); NULL without */
    const float *q_norm_w, *k_norm_w;
    /* hs_arch.post_norms: on the attention's and the MLP's output, (d); NULL without */
    const float *post1_w, *post2_w;
    /* A decoder layer of an encoder-decoder (else NULL): cross-attention after the
     * self-attention, x + (norm(x) W_q, enc W_k, enc W_v attention) W_o. */
    const float *xln_w;           /* (d) */
    const float *w_xqkv;          /* (d, 3A): [Q | K | V] */
    const float *w_xo;            /* (A, d) */
    /* Multi-head latent attention (hs_arch.mla_kv_lora > 0), where w_qkv is [q | kv_a]
     * (hs_mla_qkv_width): q_a's norm (q_lora) and q_b (q_lora, n_head (nope + rope)), NULL
     * without q_lora; the latent's norm (kv_lora) and kv_b (kv_lora, n_head (nope + d_head)). */
    const float *mla_qa_norm, *mla_qb, *mla_kva_norm, *mla_kvb;
    /* A mixture-of-experts layer (hs_moe_layer; the dense w_fc, w_proj then NULL): the router
     * (d, E) and its correction bias (E) or NULL; expert e's [gate | up] at moe_fc + e d 2f,
     * (d, 2f), and its down projection at moe_proj + e f d, (f, d), f = moe_ff; the shared
     * experts as one MLP (d, 2 fs), (fs, d), fs = moe_shared moe_ff, or NULL. F32 always,
     * in the model's moe_arena (src/model/moe_weights.c). */
    const float *moe_gate, *moe_bias, *moe_fc, *moe_proj, *moe_sfc, *moe_sproj;
} hs_layer;

struct hs_model {
    hs_model_config cfg;
    hs_arch arch; /* cfg.arch: the family's descriptor with the config's per-model values */
    hs_file_format format;
    unsigned open_flags; /* HS_OPEN_* given to hs_model_open */
    const char *weights_file; /* static: "model.safetensors", "pytorch_model.bin", or NULL */
    char **shards;       /* a sharded checkpoint: the shard files its index names, each once,
                            sorted by name (the order of the index's keys is not the
                            checkpoint's identity); the report hashes these */
    int n_shards;
    char *path;
    char storage_dtype[8];

    float *arena;        /* one allocation holding every weight below not used in place */
    size_t arena_floats;
    size_t n_params;     /* floats of every weight, in place or in the arena */
    int has_weights;
    /* Set by a reader that can hand its file mapping to the model: F32 tensors already in
     * the normalised layout (and 4-byte aligned) are then used where they lie in the file,
     * not copied (GPT-2 Conv1D matrices, embeddings). The reader gives the mapping to the
     * model (map, map_len; unmapped by hs_model_free) when inplace_floats > 0. */
    int inplace_ok;
    int release_src; /* the reader's tensor bytes are a private file mapping: the builder
                        drops each tensor's pages once converted (the peak stays one copy) */
    size_t inplace_floats;
    void *map;
    size_t map_len;
    size_t weight_memory; /* the budget of the weight cache, bytes */
    size_t converted_bytes; /* float32 bytes of the layer matrices the cache converts */
    hs_wcache *wc;        /* the layer matrices kept in their stored type, or NULL */
    int stored_gemm;      /* the forward multiplies by the matrices the budget does not keep
                             in their stored type (HS_OPEN_STORED_WEIGHTS) */
    int weight_auto;      /* no budget given: stored_gemm, and weight_memory 1 when a layer
                             matrix can be used stored (else the default budget converts) */
    int unstorable_units; /* layer matrices not F32 that cannot be used in their stored type
                             (GPT-2's Conv1D, stored (in, out)): converted by the cache */
    int q8_act;           /* ... the block-quantised ones with 8-bit activations
                             (HS_OPEN_Q8_ACTIVATIONS, src/core/q8gemm.c) */

    const float *wte;    /* (vocab, d); NULL when kept in its stored type (es) */
    const float *wpe;    /* (n_ctx, d) */
    const float *wtt;    /* (type_vocab, d): arch->token_types */
    const float *emb_ln_w, *emb_ln_b; /* (d): arch->emb_norm */
    hs_layer *layers;    /* (n_layer) */
    const float *lnf_w, *lnf_b;       /* (d): the final norm of a pre-norm model */
    /* HS_HEAD_MLM: transform dense (d, d) in,out; its norm; the decoder bias (vocab). */
    const float *mlm_w, *mlm_b, *mlm_ln_w, *mlm_ln_b, *mlm_bias;
    const float *decoder;             /* (vocab, d): explicit LM decoder, or wte when tied;
                                         NULL when kept in its stored type (es) */
    /* encoder-decoder: the encoder's final norm (d); the relative position bias of the
     * encoder's and the decoder's self-attention, (rel_buckets, n_head) each */
    const float *enc_lnf_w, *rel_enc, *rel_dec;

    hs_tokenizer *tok;                /* NULL when no tokenizer files */
    char warnings[512];               /* hs_model_warnings: lines, each ending in '\n' */
    float *moe_arena;                 /* the experts' float32 weights, or NULL */
    /* stored_gemm: the token embeddings and the decoder when stored in another type than
     * F32, or NULL; read through emb_stored.h's accessors, never wte / decoder directly */
    hs_emb_stored *es;
};

/* Appends one line to m->warnings (what fits of it). */
void hs_model_warn(hs_model *m, const char *fmt, ...) HS_PRINTF(2, 3);

/* Format readers. Each fills m->cfg (cfg.arch = &m->arch), the weights (via
 * hs_weights_build) and m->tok. */

/* Parses a config.json into *cfg (validated), the family's descriptor copied into *arch
 * with the config's per-model values (src/model/hf_config.c). */
hs_status hs_hf_config_load(const char *path, hs_model_config *cfg, hs_arch *arch, hs_error *err);

hs_status hs_hf_load(hs_model *m, const char *dir, hs_error *err);
hs_status hs_gguf_load(hs_model *m, const char *path, hs_error *err);

/* Elements and bytes per block of a ggml tensor type headscope reads (1 and 4 for F32, 1 and
 * 2 for F16/BF16, the block formats' of model/quant.h); returns 1, or 0 for any other type
 * (then *blck and *bytes are left alone). */
int hs_ggml_block(uint32_t type, uint64_t *blck, uint64_t *bytes);

/* The tokenizer files of a Hugging Face folder (src/model/hf_tokenizer.c). *out stays NULL
 * when the folder has none. */
hs_status hs_hf_tokenizer_load(const char *dir, const hs_arch *arch, hs_tokenizer **out,
                               hs_error *err);

/* A size for HEADSCOPE_WEIGHT_MEMORY and --weight-memory: "all", or a number with an
 * optional fraction and a binary unit K, M, G or T (an optional "B" or "iB" after it):
 * "512M", "1.5G", "2147483648". 0 (or anything below one layer) converts one layer at a
 * time. Returns 0 with *bytes set, or -1. */
int hs_weight_memory_parse(const char *s, size_t *bytes);

#endif /* HEADSCOPE_MODEL_INTERNAL_H */
