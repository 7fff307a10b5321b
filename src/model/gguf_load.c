/* hs_gguf_load: a GPT-2 or BERT model from a GGUF file written by llama.cpp's converter
 * or `headscope convert`. Fills the config from {arch}.* keys (exact value types, as
 * llama.cpp checks them), maps the HF tensor names the weight builder asks for onto the
 * GGUF names (blk.N.attn_qkv, ...), and rebuilds the tokenizer from tokenizer.ggml.*. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf_arch.h"
#include "model/gguf_deepseek.h"
#include "model/gguf_internal.h"
#include "model/gguf_moe.h"
#include "model/gguf_norms.h"
#include "model/gguf_t5.h"
#include "nn/ops.h"

/* ---- the rotary decoders' keys ------------------------------------------------------- */

/* Llama 3's rope scaling from the per-frequency divisors f_k of rope_freqs.weight (what
 * llama.cpp's converter writes instead of the config's factor, low_freq_factor,
 * high_freq_factor and original_max_position_embeddings). The divisors depend on those four
 * through factor, old / low and old / high only, so low = 1 is taken (as in Meta's configs):
 * factor is the largest divisor; the blended frequencies (1 < f_k < factor) give old and
 * high from s_k = (old / lambda_k - 1) / (high - 1), two of them exactly, one with Meta's
 * high = 4; without any, old is the largest integer below the first scaled wavelength.
 * Then the divisors the reconstructed scaling gives (hs_op_rope_freqs) must be the file's
 * within 1e-5, or the file is refused: its scaling is not Llama 3's. */
static hs_status rope_freqs_llama3(const hs_gguf_tensor *t, hs_arch *a, hs_error *err)
{
    const double two_pi = 6.283185307179586476925;
    int half = a->rotary_dims / 2;
    if (t->type != HS_GGML_F32 || t->ne[0] != half || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
        return hs_fail(err, HS_E_SHAPE, "tensor 'rope_freqs.weight' must be F32 of %d values "
                       "(rope.dimension_count / 2)", half);
    double f[HS_ROTARY_MAX_DIMS / 2], lam[HS_ROTARY_MAX_DIMS / 2], inv[HS_ROTARY_MAX_DIMS / 2];
    double F = 0, one_max = 0, top_min = 0;
    int first_mid = -1, last_mid = -1, n_mid = 0;
    for (int k = 0; k < half; k++) {
        uint32_t b = hs_le32(t->data + 4 * (size_t)k);
        float v;
        memcpy(&v, &b, sizeof v);
        f[k] = v;
        lam[k] = two_pi / pow((double)a->rotary_base, -2.0 * k / a->rotary_dims);
        if (!(f[k] >= 1.0 - 1e-6) || !(f[k] < 1e6))
            return hs_fail(err, HS_E_UNSUPPORTED, "rope_freqs.weight[%d] = %g: only Llama 3's rope "
                           "scaling (divisors >= 1) is supported", k, f[k]);
        F = f[k] > F ? f[k] : F;
    }
    a->rope_scaling = HS_ROPE_PLAIN;
    if (F <= 1.0 + 1e-6)
        return HS_OK; /* every divisor 1: no scaling */
    for (int k = 0; k < half; k++) {
        if (f[k] <= 1.0 + 1e-6) {
            one_max = lam[k] > one_max ? lam[k] : one_max;
        } else if (f[k] >= F * (1 - 1e-6)) {
            top_min = top_min == 0 || lam[k] < top_min ? lam[k] : top_min;
        } else {
            first_mid = first_mid < 0 ? k : first_mid;
            last_mid = k;
            n_mid++;
        }
    }
    double old, high = 4.0;
#define SMOOTH(k) ((1.0 / f[k] - 1.0 / F) / (1.0 - 1.0 / F))
    if (n_mid >= 2) { /* old / lambda - s (high - 1) = 1 at two frequencies */
        double a11 = 1 / lam[first_mid], a12 = -SMOOTH(first_mid);
        double a21 = 1 / lam[last_mid], a22 = -SMOOTH(last_mid), det = a11 * a22 - a12 * a21;
        old = (a22 - a12) / det;
        high = 1 + (a11 - a21) / det;
    } else if (n_mid == 1) {
        old = lam[first_mid] * (1 + 3 * SMOOTH(first_mid));
    } else {
        old = ceil(top_min) - 1;
        if (one_max > 0 && old <= 4 * one_max)
            high = (1 + old / one_max) / 2;
    }
#undef SMOOTH
    if (!(old >= 1 && old < (1 << 24)) || !(high > 1 && high < 1e6))
        return hs_fail(err, HS_E_UNSUPPORTED, "rope_freqs.weight does not follow Llama 3's rope "
                       "scaling; other per-frequency factors are not supported");
    a->rope_scaling = HS_ROPE_LLAMA3;
    a->rope_factor = (float)F;
    a->rope_low_freq = 1.0f;
    a->rope_high_freq = (float)high;
    a->rope_orig_ctx = (int)floor(old + 0.5);
    hs_op_rope_freqs(a, inv);
    for (int k = 0; k < half; k++) {
        double got = pow((double)a->rotary_base, -2.0 * k / a->rotary_dims) / inv[k];
        if (fabs(got - f[k]) > 1e-5 * f[k])
            return hs_fail(err, HS_E_UNSUPPORTED, "rope_freqs.weight does not follow Llama 3's "
                           "rope scaling (frequency %d: %g, Llama 3 with factor %g, old context "
                           "%d gives %g); other per-frequency factors are not supported", k, f[k],
                           F, a->rope_orig_ctx, got);
    }
    return HS_OK;
}

/* llama.cpp's keys of gptneox, llama, qwen2 and phi3 (its load_hparams, with the value types
 * it checks), and what the tensors say: rope_freqs.weight, Llama's optional biases, a tied
 * output; attention.sliding_window, a window on every layer (llama.cpp's phi3 reads it, its
 * llama does not: headscope's writer puts it in a llama file for a Mistral). Refuses what the
 * block does not run: experts, rope scaling other than linear, Llama 3's and Phi-3's
 * longrope (rope_factors_*.weight, gguf_longrope.c), keys and values of different widths. */
static hs_status load_rotary(const hs_gguf *g, const char *a, hs_model_config *cfg, hs_arch *own,
                             hs_error *err)
{
    char key[128], name[64];
    hs_status st;
    long i;
    /* a head's width: attention.key_length (and value_length, llama.cpp's n_embd_head_k and
     * _v), each embedding_length / head_count when absent */
    int dh = cfg->n_head > 0 && cfg->d_model % cfg->n_head == 0 ? cfg->d_model / cfg->n_head : 0;
    int kl = 0, vl = 0, dims = 0, window = 0, experts = 0;
    float base = 10000.0f, factor = 0, attn_factor = 1;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    if ((st = hs_gguf_get_u32(g, KEY("attention.key_length"), 0, &kl, err)) ||
        (st = hs_gguf_get_u32(g, KEY("attention.value_length"), 0, &vl, err)))
        return st;
    if ((!kl || !vl) && !dh)
        return hs_fail(err, HS_E_VALUE, "%s.embedding_length %d is not a multiple of "
                       "attention.head_count %d", a, cfg->d_model, cfg->n_head);
    kl = kl ? kl : dh;
    vl = vl ? vl : dh;
    if (kl != vl)
        return hs_fail(err, HS_E_UNSUPPORTED, "%s.attention.key_length / value_length %d / %d "
                       "differ from embedding_length / head_count = %d, and from each other: "
                       "values as wide as keys only", a, kl, vl, dh);
    dh = cfg->d_head = kl;
    dims = dh;
    if ((st = hs_gguf_get_u32(g, KEY("rope.dimension_count"), 0, &dims, err)) ||
        (st = hs_gguf_get_f32(g, KEY("rope.freq_base"), 0, &base, err)) ||
        (st = hs_gguf_get_u32(g, KEY("attention.sliding_window"), 0, &window, err)) ||
        (st = hs_gguf_get_u32(g, KEY("expert_count"), 0, &experts, err)) ||
        (st = hs_gguf_get_f32(g, KEY("rope.scaling.attn_factor"), 0, &attn_factor, err)))
        return st;
    if ((st = hs_gguf_norms_read(g, a, window, cfg, own, err))) /* the window, Gemma's caps */
        return st;
    if ((st = hs_gguf_moe_read(g, a, experts, cfg, own, err))) /* Qwen3-MoE's experts */
        return st;
    if (hs_gguf_find_kv(g, KEY("rope.dimension_sections")) >= 0)
        return hs_fail(err, HS_E_UNSUPPORTED, "%s: multimodal rope sections are not supported", key);
    if (own->family == HS_FAMILY_LLAMA && dims != dh) /* llama.cpp: "invalid n_rot" */
        return hs_fail(err, HS_E_UNSUPPORTED, "%s.rope.dimension_count = %d differs from the head "
                       "size %d", a, dims, dh);
    if (!(base > 0))
        return hs_fail(err, HS_E_VALUE, "%s.rope.freq_base must be positive", a);
    own->rotary_dims = dims;
    own->rotary_frac = (float)dims / (float)dh;
    own->rotary_base = base;
    own->rope_scaling = HS_ROPE_PLAIN;
    if ((st = hs_gguf_find_typed(g, KEY("rope.scaling.type"), HS_GGUF_STRING, 0, &i, err)))
        return st;
    hs_gguf_value v = {.str = "linear"}; /* llama.cpp's default: a factor alone is linear */
    if (i >= 0)
        hs_gguf_kv_get(g, (size_t)i, 0, &v);
    if (strcmp(v.str, "none") && strcmp(v.str, "linear"))
        return hs_fail(err, HS_E_UNSUPPORTED, "%s.rope.scaling.type '%.40s' is not supported "
                       "(expected none or linear; Llama 3's scaling comes as rope_freqs.weight)", a,
                       v.str);
    if ((st = hs_gguf_get_f32(g, KEY("rope.scaling.factor"), 0, &factor, err)) ||
        (!factor && (st = hs_gguf_get_f32(g, KEY("rope.scale_linear"), 0, &factor, err))))
        return st;
    if (!strcmp(v.str, "linear") && factor != 0 && factor != 1) {
        if (!(factor > 0))
            return hs_fail(err, HS_E_VALUE, "%s.rope.scaling.factor must be positive", a);
        own->rope_scaling = HS_ROPE_LINEAR;
        own->rope_factor = factor;
    }
    const hs_gguf_tensor *rf = hs_gguf_find_tensor(g, "rope_freqs.weight");
    if (rf && own->rope_scaling != HS_ROPE_PLAIN)
        return hs_fail(err, HS_E_UNSUPPORTED, "rope_freqs.weight with linear rope scaling is not "
                       "supported");
    if (rf && own->family != HS_FAMILY_LLAMA)
        return hs_fail(err, HS_E_UNSUPPORTED, "rope_freqs.weight in a %s file is not supported", a);
    if (rf && (st = rope_freqs_llama3(rf, own, err)))
        return st;
    if (hs_gguf_find_tensor(g, "rope_factors_long.weight") ||
        hs_gguf_find_tensor(g, "rope_factors_short.weight")) { /* Phi-3's longrope */
        if ((st = hs_gguf_longrope(g, a, attn_factor, cfg->n_ctx, own, err)))
            return st;
    } else if (attn_factor != 1.0f) {
        return hs_fail(err, HS_E_UNSUPPORTED, "%s.rope.scaling.attn_factor = %g: not supported", a,
                       (double)attn_factor);
    }
    if (own->norm_kind == HS_NORM_RMS) {
        if ((st = hs_gguf_get_f32(g, KEY("attention.layer_norm_rms_epsilon"), 1, &cfg->ln_eps, err)))
            return st;
    } else if ((st = hs_gguf_get_f32(g, KEY("attention.layer_norm_epsilon"), 1, &cfg->ln_eps, err)) ||
               (own->family == HS_FAMILY_GPT_NEOX && /* falcon: always parallel */
                (st = hs_gguf_get_bool(g, KEY("use_parallel_residual"), 1, &own->parallel_residual, err)))) {
        return st;
    }
#undef KEY
    if (own->family == HS_FAMILY_LLAMA) { /* attention_bias: q, k, v and o */
        own->qkv_bias = hs_gguf_find_tensor(g, hs_names_format("blk.%d.attn_q.bias", 0, name, sizeof name)) != NULL;
        own->o_bias = hs_gguf_find_tensor(g, hs_names_format("blk.%d.attn_output.bias", 0, name, sizeof name)) != NULL;
    }
    own->tied_embeddings = 1; /* no output.weight: the token embeddings, as llama.cpp */
    return HS_OK;
}

static hs_status load_config(const hs_gguf *g, hs_model_config *cfg, hs_arch *own, hs_error *err)
{
    long i;
    hs_status st;
    if ((st = hs_gguf_find_typed(g, "general.architecture", HS_GGUF_STRING, 1, &i, err)))
        return st;
    hs_gguf_value arch;
    hs_gguf_kv_get(g, (size_t)i, 0, &arch);
    memset(cfg, 0, sizeof *cfg);
    long ti;
    if ((st = hs_gguf_find_typed(g, "tokenizer.ggml.model", HS_GGUF_STRING, 0, &ti, err)))
        return st;
    hs_gguf_value tok_model = {0};
    if (ti >= 0)
        hs_gguf_kv_get(g, (size_t)ti, 0, &tok_model);
    /* RoBERTa is filed as "bert" with a "gpt2" tokenizer, as llama.cpp's converter does */
    const hs_arch *ar = hs_arch_find_gguf(arch.str, ti >= 0 ? tok_model.str : NULL);
    if (!ar)
        return hs_fail(err, HS_E_UNSUPPORTED,
                       "general.architecture '%.64s' is not supported (expected %s)", arch.str,
                       hs_arch_gguf_list());
    *own = *ar;
    /* A GGUF position table starts at the first row a text uses (llama.cpp's converter drops
     * RoBERTa's first pad_token_id + 1 rows), and llama.cpp numbers positions 0, 1, ... */
    own->pos_offset = 0;
    own->pos_skips_pad = 0;
    cfg->arch = own;
    cfg->family = ar->family;
    cfg->act = ar->act;
    const char *a = arch.str;
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    if ((st = hs_gguf_get_u32(g, KEY("block_count"), 1, &cfg->n_layer, err)) ||
        (st = hs_gguf_get_u32(g, KEY("context_length"), 1, &cfg->n_ctx, err)) ||
        (st = hs_gguf_get_u32(g, KEY("embedding_length"), 1, &cfg->d_model, err)) ||
        (st = hs_gguf_get_u32(g, KEY("feed_forward_length"), 1, &cfg->d_ff, err)) ||
        (st = hs_gguf_get_u32(g, KEY("attention.head_count"), 1, &cfg->n_head, err)))
        return st;
    own->n_kv_head = cfg->n_head;
    if ((st = hs_gguf_get_u32(g, KEY("attention.head_count_kv"), 0, &own->n_kv_head, err)))
        return st;
    if (own->n_kv_head < 1)
        return hs_fail(err, HS_E_VALUE, "%s.attention.head_count_kv must be at least 1", a);
    hs_gguf_value v;
    if (ar->enc_dec) { /* t5: both stacks, relative buckets */
        if ((st = hs_gguf_t5_read(g, a, cfg, own, err)))
            return st;
    } else if (ar->mla_kv_lora > 0) { /* deepseek2: latent attention, YaRN, experts */
        if ((st = hs_gguf_deepseek_read(g, a, cfg, own, err)))
            return st;
    } else if (ar->pos == HS_POS_ROTARY) {
        if ((st = load_rotary(g, a, cfg, own, err)))
            return st;
    } else if (own->n_kv_head != cfg->n_head && ar->family != HS_FAMILY_GPT_BIGCODE) {
        /* GPT-2's and BERT's have one per head */
        return hs_fail(err, HS_E_UNSUPPORTED, "%s.attention.head_count_kv = %d differs from "
                       "head_count %d: grouped key/value heads are read for the rotary "
                       "decoders and starcoder only", a, own->n_kv_head, cfg->n_head);
    } else if ((st = hs_gguf_get_f32(g, KEY("attention.layer_norm_epsilon"), 1, &cfg->ln_eps, err))) {
        return st;
    }
    hs_gguf_mqa_read(g, own); /* falcon's block */
    if (ar->vis.kind == HS_VIS_BIDIRECTIONAL) {
        if ((st = hs_gguf_find_typed(g, KEY("attention.causal"), HS_GGUF_BOOL, 0, &i, err)))
            return st;
        if (i >= 0) {
            hs_gguf_kv_get(g, (size_t)i, 0, &v);
            if (v.u)
                return hs_fail(err, HS_E_UNSUPPORTED, "%s is true (headscope's %s is "
                               "bidirectional)", key, ar->name);
        }
    }
    if (ar->token_types &&
        (st = hs_gguf_get_u32(g, "tokenizer.ggml.token_type_count", 1, &cfg->type_vocab_size, err)))
        return st;
#undef KEY
    const char *emb_name = hs_names_row(ar, HS_S_TOK_EMB)->gguf;
    const hs_gguf_tensor *emb = hs_gguf_find_tensor(g, emb_name);
    uint64_t n_vocab;
    if (emb) {
        n_vocab = emb->ne[1];
    } else if (hs_gguf_tensor_count(g) == 0) {
        /* vocabulary only (llama.cpp's models/ggml-vocab-*.gguf): as many tokens as listed */
        if ((st = hs_gguf_find_array(g, "tokenizer.ggml.tokens", HS_GGUF_STRING, 0, &i, err)))
            return st;
        if (i < 0)
            return hs_fail(err, HS_E_FORMAT,
                           "the file holds neither tensors nor a vocabulary (tokenizer.ggml.tokens)");
        n_vocab = hs_gguf_kv_len(g, (size_t)i);
    } else {
        return hs_fail(err, HS_E_FORMAT, "missing tensor '%s'", emb_name);
    }
    if (n_vocab > INT_MAX)
        return hs_fail(err, HS_E_VALUE, "the vocabulary has %llu tokens", (unsigned long long)n_vocab);
    cfg->vocab_size = (int)n_vocab;
    if (ar->enc_dec && cfg->decoder_start_id >= cfg->vocab_size) /* gguf_t5.c read it */
        return hs_fail(err, HS_E_VALUE, "%s.decoder_start_token_id %d is outside the vocabulary "
                       "(%d)", arch.str, cfg->decoder_start_id, cfg->vocab_size);
    return hs_config_validate(cfg, err);
}

/* ---- tensor names ------------------------------------------------------------------ */

/* The GGUF names come from the family's name table (src/model/arch.c). */

typedef struct gguf_ctx {
    const hs_gguf *g;
    const hs_model_config *cfg;
    hs_tensor_view *views; /* 4 slots per tensor: whole, Q, K, V slices */
    char missing[128];     /* GGUF name of the last tensor looked for and not found */
    unsigned char *scratch; /* a tensor with its rows put back in Hugging Face's order; the
                               builder decodes each view before it asks for the next */
    size_t scratch_cap;
    char bad[330];         /* why a tensor could not be put back, for the message */
    hs_gguf_scratch ds;    /* deepseek2's kv_b (gguf_deepseek.c), the experts (gguf_moe.c) */
} gguf_ctx;

/* Bytes of one ne[0]-long row (the type was checked when the file was opened). */
static size_t row_bytes(const hs_gguf_tensor *t)
{
    uint64_t blck = 1, bytes = 4;
    hs_ggml_block(t->type, &blck, &bytes);
    return (size_t)((uint64_t)t->ne[0] / blck * bytes);
}

/* A view of t with PyTorch shape: the ne order reversed, padded or trimmed to rank when
 * the dimensions that differ are 1 (ggml drops trailing 1s when it writes n_dims). */
static void make_view(hs_tensor_view *v, const hs_gguf_tensor *t, int rank)
{
    int nd = (int)t->n_dims;
    for (int d = rank; d < nd; d++)
        if (t->ne[d] != 1)
            rank = nd; /* leave the real rank, so the builder reports the shape */
    v->name = t->name;
    v->dtype = hs_dtype_of_ggml(t->type);
    v->ndim = rank;
    for (int k = 0; k < rank; k++)
        v->shape[k] = t->ne[rank - 1 - k];
    v->data = t->data;
    v->nbytes = (size_t)t->nbytes;
    v->pair_rows = 0;
}

/* The transforms llama.cpp's converter applies, undone (the weight builder then reads the
 * tensor as it reads the Hugging Face one):
 *   llama: the rows of each Q head (and each K head, per KV head) were permuted from the
 *     "rotate half" order [x_0 .. x_{r/2-1} | y_0 .. y_{r/2-1}] to adjacent pairs
 *     [x_0 y_0 x_1 y_1 ...] (ggml's rope turns neighbours); Hugging Face row h dh + j dh/2 + i
 *     is GGUF row h dh + 2 i + j: a matrix's view says so (pair_rows, hs_view_row) and its
 *     readers take each row from its place, with no copy; a bias is reordered into a copy;
 *   gptneox, falcon, starcoder: the fused QKV's rows, by K/V group in Hugging Face ([g0: q .. q
 *     k v][g1: ...]..., s = n_head / n_kv_head queries a group; GPT-NeoX one group a head),
 *     were regrouped to [Q | K | V]; Hugging Face row (g (s + 2) + j) dh + i is GGUF row
 *     (g s + j) dh + i for a query (j < s), A + g dh + i for the key (j = s) and
 *     A + (n_kv_head + g) dh + i for the value, A = n_head dh (the builder's HS_TN_QKV_HEADS
 *     reorders them into the slot as for a Hugging Face file).
 * Rows are ne[0]-long (a block-quantised row moves whole); a vector's elements are rows of
 * one value (F32, F16, BF16). Qwen2 needs nothing: llama.cpp runs it with rotate-half. */
static const hs_tensor_view *unconvert(gguf_ctx *c, hs_tensor_view *v, const hs_gguf_tensor *t,
                                       const hs_tensor_name *e)
{
    const hs_model_config *cfg = c->cfg;
    int dh = cfg->d_head, llama = cfg->family == HS_FAMILY_LLAMA;
    int qk = (e->slot == HS_S_QKV_W || e->slot == HS_S_QKV_B) && (e->part == 0 || e->part == 1);
    if (!(llama && qk) && !(e->flags & HS_TN_QKV_HEADS))
        return v;
    int vec = e->slot == HS_S_QKV_B;
    uint64_t blck = 1, bytes = 4;
    hs_ggml_block(t->type, &blck, &bytes);
    size_t rows = vec ? (size_t)t->ne[0] : (size_t)t->ne[1], rb = vec ? (size_t)bytes : row_bytes(t);
    if (vec && blck != 1) {
        snprintf(c->bad, sizeof c->bad, "tensor '%s': a block-quantised vector cannot be "
                 "reordered", t->name);
        return NULL;
    }
    if (rows % (size_t)dh || (!llama && rows != (size_t)hs_qkv_width(cfg)) || rows * rb > v->nbytes)
        return v; /* a wrong shape: the builder names it */
    if (llama && !vec && dh % 2 == 0) { /* read in place: each reader takes a row from its place */
        v->pair_rows = dh;
        return v;
    }
    if (rows * rb > c->scratch_cap) {
        unsigned char *p = realloc(c->scratch, rows * rb);
        if (!p) {
            snprintf(c->bad, sizeof c->bad, "out of memory reordering '%s'", t->name);
            return NULL;
        }
        c->scratch = p;
        c->scratch_cap = rows * rb;
    }
    size_t G = (size_t)cfg->n_kv_head, s = (size_t)cfg->n_head / G;
    size_t A = (size_t)hs_model_attn_width(cfg);
    hs_tensor_view pairs = {.pair_rows = dh};
    for (size_t r = 0; r < rows; r++) {
        size_t h = r / (size_t)dh, k = r % (size_t)dh, src;
        if (llama) {
            src = hs_view_row(&pairs, r);
        } else { /* r = (g (s + 2) + j) dh + i */
            size_t g = h / (s + 2), j = h % (s + 2);
            src = (j < s ? (g * s + j) * (size_t)dh : A + (j - s) * G * (size_t)dh + g * (size_t)dh) + k;
        }
        memcpy(c->scratch + r * rb, t->data + src * rb, rb);
    }
    v->data = c->scratch;
    return v;
}

const hs_tensor_view *hs_gguf_rows_view(const hs_gguf_tensor *t, size_t r0, size_t rows,
                                        hs_gguf_scratch *s)
{
    uint64_t blck = 1, bytes = 4;
    hs_ggml_block(t->type, &blck, &bytes);
    size_t rb = (size_t)((uint64_t)t->ne[0] / blck * bytes);
    uint64_t total = (uint64_t)t->ne[1] * (uint64_t)t->ne[2] * (uint64_t)t->ne[3];
    if ((r0 + rows) > total)
        return NULL;
    s->v = (hs_tensor_view){.name = t->name, .dtype = hs_dtype_of_ggml(t->type),
                            .ndim = rows == 1 && t->n_dims == 1 ? 1 : 2,
                            .data = t->data + r0 * rb, .nbytes = rows * rb};
    if (s->v.ndim == 1)
        s->v.shape[0] = t->ne[0];
    else {
        s->v.shape[0] = (int64_t)rows;
        s->v.shape[1] = t->ne[0];
    }
    return &s->v;
}

static const hs_tensor_view *gguf_lookup(void *vctx, const char *hf, const hs_tensor_ref *r,
                                         int *out_in)
{
    gguf_ctx *c = vctx;
    char name[128];
    int handled;
    *out_in = 1; /* every GGUF matrix is stored (out, in): ne = {in, out} */
    const hs_tensor_view *sv = hs_gguf_moe_lookup(c->g, c->cfg, hf, r, &c->ds, &handled);
    if (!handled) /* deepseek2's attn_q_a and split kv_b */
        sv = hs_gguf_deepseek_lookup(c->g, c->cfg, r, &c->ds, &handled);
    if (c->ds.bad[0])
        memcpy(c->bad, c->ds.bad, sizeof c->ds.bad);
    if (handled)
        return sv;
    if (r->alt || !r->e->gguf) /* a GGUF file has one name per tensor; none: not in GGUF */
        return NULL;
    int rank = hs_names_shape(c->cfg, r->e).kind == HS_K_VEC ? 1 : 2, part = r->e->part;
    hs_names_format(r->e->gguf, hs_names_index(c->cfg, r->e, r->layer), name, sizeof name);
    const hs_gguf_tensor *t = hs_gguf_find_tensor(c->g, name);
    size_t idx;
    if (t && r->e->slot == HS_S_DECODER) {
        /* Older converters wrote GPT-2's tied decoder as a copy of token_embd: keep it tied. */
        const hs_gguf_tensor *e =
            hs_gguf_find_tensor(c->g, hs_names_row(c->cfg->arch, HS_S_TOK_EMB)->gguf);
        if (e && e->type == t->type && !memcmp(e->ne, t->ne, sizeof e->ne) &&
            e->nbytes == t->nbytes && !memcmp(e->data, t->data, (size_t)t->nbytes))
            return NULL;
    }
    if (!t)
        snprintf(c->missing, sizeof c->missing, "%s", name);
    if (t) {
        idx = (size_t)(t - hs_gguf_tensor_at(c->g, 0));
        make_view(&c->views[4 * idx], t, rank);
        return unconvert(c, &c->views[4 * idx], t, r->e);
    }
    if (part < 0 || !r->e->gguf_fused)
        return NULL;
    /* Newer llama.cpp also accepts BERT with a fused blk.N.attn_qkv {E, 3E}: Q, K, V are
     * row blocks of it, so each is a contiguous slice. */
    char fused[128];
    t = hs_gguf_find_tensor(c->g, hs_names_format(r->e->gguf_fused, r->layer, fused, sizeof fused));
    if (!t)
        return NULL;
    idx = (size_t)(t - hs_gguf_tensor_at(c->g, 0));
    hs_tensor_view *v = &c->views[4 * idx + 1 + (size_t)part];
    make_view(v, t, rank);
    if (rank == 1 && t->n_dims == 1 && t->ne[0] % 3 == 0) {
        size_t n = (size_t)t->ne[0] / 3;
        v->shape[0] = (int64_t)n;
        v->nbytes = (size_t)t->nbytes / 3;
        v->data = t->data + (size_t)part * v->nbytes;
    } else if (rank == 2 && t->n_dims == 2 && t->ne[1] % 3 == 0) {
        size_t rows = (size_t)t->ne[1] / 3;
        v->shape[0] = (int64_t)rows;
        v->nbytes = rows * row_bytes(t);
        v->data = t->data + (size_t)part * v->nbytes;
    }
    return v;
}

/* ---- entry point ---------------------------------------------------------------------- */

hs_status hs_gguf_load(hs_model *m, const char *path, hs_error *err)
{
    hs_gguf *g = NULL;
    gguf_ctx ctx = {0};
    hs_status st = hs_gguf_open(path, &g, err); /* its messages name the path */
    if (st)
        return st;
    int vocab_only = 0; /* of an architecture headscope does not run (gguf_vocab.c) */
    if ((st = hs_gguf_vocab_config(g, m->open_flags, &m->cfg, &m->arch, &vocab_only, err)) ||
        (!vocab_only && (st = load_config(g, &m->cfg, &m->arch, err))))
        goto fail;
    m->format = HS_FORMAT_GGUF;
    ctx.g = g;
    ctx.cfg = &m->cfg;
    ctx.views = calloc(4 * hs_gguf_tensor_count(g) + 1, sizeof *ctx.views);
    if (!ctx.views) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory");
        goto fail;
    }
    if (hs_gguf_tensor_count(g) == 0) { /* vocabulary only */
        snprintf(m->storage_dtype, sizeof m->storage_dtype, "none");
        if (!(m->open_flags & (HS_OPEN_TOKENIZER | HS_OPEN_NO_WEIGHTS))) {
            st = hs_fail(err, HS_E_UNSUPPORTED, "the file holds a vocabulary and no tensors; "
                         "it serves tokenize and info, not a forward pass");
            goto fail;
        }
    } else if (!(m->open_flags & HS_OPEN_TOKENIZER) &&
               (st = hs_weights_build(m, gguf_lookup, &ctx, err))) {
        if (err && ctx.bad[0])
            hs_fail(err, st, "%s", ctx.bad);
        else if (err && !strncmp(err->msg, "missing tensor", 14) && ctx.missing[0])
            hs_fail(err, st, "missing tensor '%s'", ctx.missing);
        goto fail;
    }
    st = hs_gguf_tokenizer_load(m, g, err);
fail:
    if (st)
        hs_error_prefix(err, "'%s'", path);
    free(ctx.views);
    free(ctx.scratch);
    free(ctx.ds.buf);
    hs_gguf_free(g);
    return st;
}
