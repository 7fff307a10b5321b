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

#include "headscope/model.h"
#include "headscope/tokenizer.h"
#include "internal.h"

/* Element types a reader can hand over. */
typedef enum hs_dtype {
    HS_DT_F32 = 0,
    HS_DT_F16 = 1,
    HS_DT_BF16 = 2,
    HS_DT_Q8_0 = 3, /* blocks of 32 along the contiguous dimension: f16 scale + 32 int8 */
    /* A type headscope does not compute with (integer or boolean buffers such as
     * embeddings.position_ids, F64, FP8): the file still opens, and the weight builder
     * refuses the tensor only if the model needs it. */
    HS_DT_OTHER = 4
} hs_dtype;

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
} hs_tensor_view;

/* Logical tensors, named by their Hugging Face names without the family prefix
 * ("h.0.attn.c_attn.weight", "encoder.layer.0.attention.self.query.weight").
 * A reader resolves one to a stored tensor. For 2-D weights it also says how the
 * matrix is stored: *out_in = 1 for (out, in) (nn.Linear, every GGUF matrix),
 * 0 for (in, out) (GPT-2 Conv1D in HF files). Returns NULL when absent. */
typedef const hs_tensor_view *(*hs_tensor_lookup)(void *ctx, const char *hf_name, int *out_in);

/* Builds the weights of m (whose cfg is already filled and checked) from a reader.
 * Checks every shape against cfg, converts to float32, rejects NaN/Inf. */
hs_status hs_weights_build(hs_model *m, hs_tensor_lookup lookup, void *ctx, hs_error *err);

/* Checks a config for sane, consistent values (positive sizes, d_model % n_head,
 * limits), fills derived fields (d_head, causal). */
hs_status hs_config_validate(hs_model_config *cfg, hs_error *err);

typedef struct hs_layer {
    /* GPT-2: ln_1 (before attention). BERT: attention.output.LayerNorm (after). */
    const float *ln1_w, *ln1_b;   /* (d) */
    const float *w_qkv;           /* (d, 3d): columns [Q | K | V]; head h at h*d_head */
    const float *b_qkv;           /* (3d) */
    const float *w_o, *b_o;       /* (d, d), (d) */
    /* GPT-2: ln_2 (before the MLP). BERT: output.LayerNorm (after). */
    const float *ln2_w, *ln2_b;   /* (d) */
    const float *w_fc, *b_fc;     /* (d, d_ff), (d_ff) */
    const float *w_proj, *b_proj; /* (d_ff, d), (d) */
} hs_layer;

struct hs_model {
    hs_model_config cfg;
    hs_file_format format;
    unsigned open_flags; /* HS_OPEN_* given to hs_model_open */
    const char *weights_file; /* static: "model.safetensors", "pytorch_model.bin", or NULL */
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

    const float *wte;    /* (vocab, d) */
    const float *wpe;    /* (n_ctx, d) */
    const float *wtt;    /* (type_vocab, d), BERT */
    const float *emb_ln_w, *emb_ln_b; /* BERT embeddings.LayerNorm (d) */
    hs_layer *layers;    /* (n_layer) */
    const float *lnf_w, *lnf_b;       /* GPT-2 ln_f (d) */
    /* BERT MLM head: transform dense (d, d) in,out; LayerNorm; decoder bias (vocab). */
    const float *mlm_w, *mlm_b, *mlm_ln_w, *mlm_ln_b, *mlm_bias;
    const float *decoder;             /* (vocab, d): explicit LM decoder, or wte when tied */

    hs_tokenizer *tok;                /* NULL when no tokenizer files */
};

/* Format readers. Each fills m->cfg, the weights (via hs_weights_build) and m->tok. */
hs_status hs_hf_load(hs_model *m, const char *dir, hs_error *err);
hs_status hs_gguf_load(hs_model *m, const char *path, hs_error *err);

/* The tokenizer files of a Hugging Face folder (src/model/hf_tokenizer.c). *out stays NULL
 * when the folder has none. */
hs_status hs_hf_tokenizer_load(const char *dir, hs_family family, hs_tokenizer **out,
                               hs_error *err);

#endif /* HEADSCOPE_MODEL_INTERNAL_H */
