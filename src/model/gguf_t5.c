/* GGUF of T5 (gguf_t5.h), as llama.cpp's converter writes its t5 architecture and its
 * loader and UGM tokenizer read it:
 *   keys: {arch}.block_count the encoder's layers, .decoder_block_count the decoder's
 *     (absent: as many), .attention.key_length / .value_length d_kv,
 *     .attention.relative_buckets_count, .attention.layer_norm_rms_epsilon,
 *     .decoder_start_token_id; the bucket distance is llama.cpp's fixed 128;
 *   the MLP: ReLU without blk.N.ffn_gate (T5 v1.0), gated tanh GELU with it (v1.1, Flan);
 *   the LM head: output.weight when untied; without it (or with a copy of token_embd) the
 *     embeddings, the decoder's states scaled by d_model^-0.5 first (transformers' tied T5;
 *     llama.cpp leaves that scale out, which moves no argmax);
 *   the vocabulary: tokenizer.ggml.model "t5", SentencePiece Unigram pieces with their
 *     scores and types, add_space_prefix (Metaspace "always" / "never"),
 *     remove_extra_whitespaces (WhitespaceSplit), precompiled_charsmap (the Precompiled
 *     normalizer's map as UINT8 bytes), add_eos_token (</s> after every text). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf_t5.h"
#include "text/text_internal.h"

#define T5_MAX_DISTANCE 128 /* llama.cpp's llama_relative_position_bucket */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER_DEFINED = 4, TT_UNUSED = 5 };

/* ---- the model ------------------------------------------------------------------------- */

/* output.weight present and not a copy of token_embd: an untied head. */
static int untied(const hs_gguf *g)
{
    const hs_gguf_tensor *o = hs_gguf_find_tensor(g, "output.weight");
    const hs_gguf_tensor *e = hs_gguf_find_tensor(g, "token_embd.weight");
    return o && !(e && e->type == o->type && !memcmp(e->ne, o->ne, sizeof e->ne) &&
                  e->nbytes == o->nbytes && !memcmp(e->data, o->data, (size_t)o->nbytes));
}

hs_status hs_gguf_t5_read(const hs_gguf *g, const char *a, hs_model_config *cfg, hs_arch *own,
                          hs_error *err)
{
    char key[128];
    int n_dec = -1, dv = -1;
    hs_status st;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    cfg->decoder_start_id = 0; /* transformers' T5Config default (the pad id) */
    if ((st = hs_gguf_get_u32(g, KEY("decoder_block_count"), 0, &n_dec, err)) ||
        (st = hs_gguf_get_u32(g, KEY("attention.key_length"), 1, &cfg->d_head, err)) ||
        (st = hs_gguf_get_u32(g, KEY("attention.value_length"), 0, &dv, err)) ||
        (st = hs_gguf_get_u32(g, KEY("attention.relative_buckets_count"), 1, &own->rel_buckets, err)) ||
        (st = hs_gguf_get_f32(g, KEY("attention.layer_norm_rms_epsilon"), 1, &cfg->ln_eps, err)) ||
        (st = hs_gguf_get_u32(g, KEY("decoder_start_token_id"), 0, &cfg->decoder_start_id, err)))
        return st;
    if (cfg->d_head < 1 || (dv >= 0 && dv != cfg->d_head))
        return hs_fail(err, HS_E_UNSUPPORTED, "%s.attention.key_length %d and value_length %d: "
                       "T5's heads have one width d_kv, at least 1", a, cfg->d_head, dv);
    if (own->n_kv_head != cfg->n_head)
        return hs_fail(err, HS_E_UNSUPPORTED, "%s.attention.head_count_kv = %d differs from "
                       "head_count %d: T5 has one key/value head per head", a, own->n_kv_head,
                       cfg->n_head);
    if (n_dec == 0)
        return hs_fail(err, HS_E_UNSUPPORTED, "%s.decoder_block_count is 0: an encoder alone "
                       "(llama.cpp's t5encoder) is not supported", a);
#undef KEY
    cfg->n_enc_layer = cfg->n_layer;
    if (n_dec > 0 && (long long)cfg->n_layer + n_dec > 65536)
        return hs_fail(err, HS_E_VALUE, "%s: %d encoder and %d decoder blocks", a, cfg->n_layer, n_dec);
    cfg->n_layer += n_dec < 0 ? cfg->n_layer : n_dec;
    own->rel_max_distance = T5_MAX_DISTANCE;
    char name[64];
    own->gated = hs_gguf_find_tensor(g, hs_names_format("enc.blk.%d.ffn_gate.weight", 0, name,
                                                        sizeof name)) != NULL;
    cfg->act = own->gated ? HS_ACT_GELU_TANH : HS_ACT_RELU; /* llama.cpp: LLM_FFN_GELU, _RELU */
    own->tied_embeddings = !untied(g);
    own->head_scale = own->tied_embeddings && cfg->d_model > 0
                          ? (float)(1.0 / sqrt((double)cfg->d_model)) : 0.0f;
    return HS_OK;
}

hs_status hs_gguf_t5_writable(const hs_model *m, hs_error *err)
{
    const hs_arch *a = m->cfg.arch;
    if (!a->enc_dec)
        return HS_OK;
    if (a->rel_max_distance != T5_MAX_DISTANCE)
        return hs_fail(err, HS_E_UNSUPPORTED, "this T5 model's relative_attention_max_distance "
                       "is %d, and llama.cpp's t5 fixes it at %d (GGUF has no key for it); it "
                       "cannot be written to GGUF", a->rel_max_distance, T5_MAX_DISTANCE);
    if (a->gated ? m->cfg.act != HS_ACT_GELU_TANH : m->cfg.act != HS_ACT_RELU)
        return hs_fail(err, HS_E_UNSUPPORTED, "this T5 model's MLP (%s%s) has no GGUF form: "
                       "llama.cpp's t5 runs ReLU (relu) or gated tanh GELU (gated-gelu) only",
                       a->gated ? "gated-" : "", m->cfg.act == HS_ACT_RELU ? "relu"
                                                 : m->cfg.act == HS_ACT_SILU ? "silu" : "gelu");
    return HS_OK;
}

void hs_gguf_t5_keys(hs_gguf_meta *mt, const hs_model_config *c, const char *arch, uint32_t ftype)
{
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)
    hs_meta_u32(mt, KEY("context_length"), (uint32_t)c->n_ctx);
    hs_meta_u32(mt, KEY("embedding_length"), (uint32_t)c->d_model);
    hs_meta_u32(mt, KEY("feed_forward_length"), (uint32_t)c->d_ff);
    hs_meta_u32(mt, KEY("block_count"), (uint32_t)c->n_enc_layer);
    hs_meta_u32(mt, KEY("decoder_block_count"), (uint32_t)(c->n_layer - c->n_enc_layer));
    hs_meta_u32(mt, KEY("attention.head_count"), (uint32_t)c->n_head);
    hs_meta_u32(mt, KEY("attention.key_length"), (uint32_t)c->d_head);
    hs_meta_u32(mt, KEY("attention.value_length"), (uint32_t)c->d_head);
    hs_meta_f32(mt, KEY("attention.layer_norm_epsilon"), c->ln_eps);
    hs_meta_u32(mt, KEY("attention.relative_buckets_count"), (uint32_t)c->arch->rel_buckets);
    hs_meta_f32(mt, KEY("attention.layer_norm_rms_epsilon"), c->ln_eps);
    hs_meta_u32(mt, KEY("decoder_start_token_id"), (uint32_t)c->decoder_start_id);
    hs_meta_u32(mt, "general.file_type", ftype);
#undef KEY
}

/* ---- the vocabulary -------------------------------------------------------------------- */

/* The Unigram tokenizer a t5 vocabulary describes, in HF tokenizer.json's terms: pieces
 * (the tokens before the trailing UNUSED fill) with their scores, the CONTROL, UNKNOWN and
 * USER_DEFINED tokens matched whole, Precompiled, WhitespaceSplit, Metaspace and the
 * template [text, </s>] when add_eos_token. */
hs_status hs_gguf_t5_tokenizer_load(hs_model *m, const hs_gguf *g, const char *const *tok,
                                    size_t n_tok, hs_error *err)
{
    int add_space = 1, ws = 0, add_eos = 1;
    int32_t unk = 2, eos = 1; /* llama.cpp's defaults for "t5" */
    long si, ti, ci;
    hs_status st;
    hs_gguf_value v;
    double *scores = NULL;
    int32_t *added = NULL;
    unsigned char *flags = NULL;
    size_t n_added = 0, n_model = n_tok;
    hs_tokenizer *t = hs_tok_alloc(HS_TOK_UNIGRAM);
    if (!t || !(scores = calloc(n_tok ? n_tok : 1, sizeof *scores)) ||
        !(added = malloc((n_tok ? n_tok : 1) * sizeof *added)) || !(flags = malloc(n_tok ? n_tok : 1))) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory reading the tokenizer");
        goto done;
    }
    if ((st = hs_gguf_find_array(g, "tokenizer.ggml.scores", HS_GGUF_FLOAT32, 1, &si, err)) ||
        (st = hs_gguf_find_array(g, "tokenizer.ggml.token_type", HS_GGUF_INT32, 1, &ti, err)) ||
        (st = hs_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", 0, &add_space, err)) ||
        (st = hs_gguf_get_bool(g, "tokenizer.ggml.remove_extra_whitespaces", 0, &ws, err)) ||
        (st = hs_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", 0, &add_eos, err)) ||
        (st = hs_gguf_get_u32(g, "tokenizer.ggml.unknown_token_id", 0, &unk, err)) ||
        (st = hs_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", 0, &eos, err)))
        goto done;
    if (hs_gguf_kv_len(g, (size_t)si) != n_tok || hs_gguf_kv_len(g, (size_t)ti) != n_tok) {
        st = hs_fail(err, HS_E_SHAPE, "tokenizer.ggml.scores and token_type have %zu and %zu "
                     "entries for %zu tokens", hs_gguf_kv_len(g, (size_t)si),
                     hs_gguf_kv_len(g, (size_t)ti), n_tok);
        goto done;
    }
    for (size_t j = 0; j < n_tok; j++) {
        hs_gguf_kv_get(g, (size_t)si, j, &v);
        scores[j] = v.f;
        if (!(scores[j] >= -1e30 && scores[j] <= 1e30)) {
            st = hs_fail(err, HS_E_VALUE, "tokenizer.ggml.scores[%zu] is not a finite score", j);
            goto done;
        }
        hs_gguf_kv_get(g, (size_t)ti, j, &v);
        if (v.i == TT_CONTROL || v.i == TT_UNKNOWN || v.i == TT_USER_DEFINED) {
            flags[n_added] = v.i == TT_USER_DEFINED ? HS_ADD_NORMALIZED : 0;
            added[n_added++] = (int32_t)j;
        }
    }
    while (n_model > 1 && (hs_gguf_kv_get(g, (size_t)ti, n_model - 1, &v), v.i == TT_UNUSED))
        n_model--; /* the converter's [PAD{i}] fill up to vocab_size: no pieces */
    if (unk < 0 || (size_t)unk >= n_model || (add_eos && (eos < 0 || (size_t)eos >= n_tok))) {
        st = hs_fail(err, HS_E_VALUE, "tokenizer.ggml.unknown_token_id %d or eos_token_id %d "
                     "is outside the vocabulary (%zu pieces)", unk, eos, n_model);
        goto done;
    }
    if ((st = hs_gguf_find_array(g, "tokenizer.ggml.precompiled_charsmap", HS_GGUF_UINT8, 0, &ci, err)))
        goto done;
    if (ci >= 0) {
        if ((st = hs_precompiled_load_bytes(t, g->data + g->kv[ci].val,
                                            (size_t)hs_gguf_kv_len(g, (size_t)ci),
                                            "tokenizer.ggml.precompiled_charsmap", err)))
            goto done;
        t->norm[t->n_norm++] = HS_NORM_PRECOMPILED;
    }
    t->pre = HS_PRE_METASPACE;
    memcpy(t->meta_rep, "\xe2\x96\x81", 4);
    t->meta_scheme = add_space ? HS_META_ALWAYS : HS_META_NEVER;
    t->meta_split = 1;
    t->ws_split = ws;
    if ((st = hs_tok_build_vocab(t, tok, n_tok, 1, "tokenizer.ggml.tokens", err)))
        goto done;
    t->n_model = n_model;
    t->unk = unk;
    t->fuse_unk = 1;
    if ((st = hs_tok_set_added(t, added, flags, n_added, err)) ||
        (st = hs_unigram_build(t, scores, err)))
        goto done;
    if (add_eos) {
        t->single = (hs_template){.id = {HS_TMPL_A, eos}, .type = {0, 0}, .n = 2};
        t->pair = (hs_template){.id = {HS_TMPL_A, eos, HS_TMPL_B, eos}, .type = {0}, .n = 4};
        t->has_pair = 1;
        t->post_name = "GGUF add_eos_token";
    }
    m->tok = t;
    t = NULL;
done:
    hs_tokenizer_free(t);
    free(flags);
    free(added);
    free(scores);
    return st;
}

/* What a t5 vocabulary cannot say, named; NULL when t has a GGUF form. */
static const char *beyond(const hs_tokenizer *t, int32_t *eos)
{
    *eos = -1;
    if (t->kind != HS_TOK_UNIGRAM)
        return "not a Unigram model";
    for (size_t k = 0; k < t->n_norm; k++)
        if (t->norm[k] != HS_NORM_PRECOMPILED)
            return "a normalizer other than Precompiled";
    if (t->pre != HS_PRE_METASPACE || strcmp(t->meta_rep, "\xe2\x96\x81") || !t->meta_split ||
        t->meta_scheme == HS_META_FIRST)
        return "a pre-tokenizer other than Metaspace('\xe2\x96\x81', split, always or never)";
    if (t->byte_fallback || t->unk < 0)
        return "byte_fallback or no unk_id";
    if (t->single.n == 2 && t->single.id[0] == HS_TMPL_A && t->single.id[1] >= 0)
        *eos = t->single.id[1];
    else if (!(t->single.n == 1 && t->single.id[0] == HS_TMPL_A))
        return "a post-processor other than [text] or [text, </s>]";
    for (size_t k = 0; k < t->n_added; k++)
        if (t->added_flags[k] & (HS_ADD_LSTRIP | HS_ADD_RSTRIP))
            return "an added token with lstrip or rstrip";
    return NULL;
}

hs_status hs_gguf_t5_tokenizer_write(hs_gguf_meta *mt, const hs_model *m, hs_error *err)
{
    const hs_tokenizer *t = m->tok;
    size_t V = (size_t)m->cfg.vocab_size, n_tok = hs_tokenizer_vocab_size(t);
    int32_t eos;
    const char *why = beyond(t, &eos);
    if (why)
        return hs_fail(err, HS_E_UNSUPPORTED, "the tokenizer cannot be written to GGUF: %s has "
                       "no form in llama.cpp's t5 vocabulary", why);
    unsigned char *kind = calloc(V ? V : 1, 1); /* 1 special added, 2 other added */
    if (!kind)
        return hs_fail(err, HS_E_NOMEM, "out of memory writing the tokenizer");
    for (size_t k = 0; k < t->n_added; k++)
        if ((size_t)t->added[k] < V)
            kind[t->added[k]] = t->added_flags[k] & HS_ADD_NORMALIZED ? 2 : 1;
    char pad[32];
    hs_meta_str(mt, "tokenizer.ggml.model", "t5");
    hs_meta_str(mt, "tokenizer.ggml.pre", "default");
    hs_meta_array(mt, "tokenizer.ggml.tokens", HS_GGUF_STRING, V);
    for (size_t i = 0; i < V; i++) {
        snprintf(pad, sizeof pad, "[PAD%zu]", i);
        hs_meta_elem_str(mt, i < n_tok ? hs_tokenizer_token(t, (int32_t)i) : pad);
    }
    hs_meta_array(mt, "tokenizer.ggml.scores", HS_GGUF_FLOAT32, V);
    for (size_t i = 0; i < V; i++)
        hs_meta_elem_f32(mt, i < t->n_model ? (float)t->uni_score[i] : i < n_tok ? 0.0f : -10000.0f);
    hs_meta_array(mt, "tokenizer.ggml.token_type", HS_GGUF_INT32, V);
    for (size_t i = 0; i < V; i++)
        hs_meta_elem_u32(mt, i >= n_tok ? TT_UNUSED
                             : kind[i] == 1 ? ((int32_t)i == t->unk ? TT_UNKNOWN : TT_CONTROL)
                             : kind[i] == 2 ? TT_USER_DEFINED : TT_NORMAL);
    free(kind);
    hs_meta_bool(mt, "tokenizer.ggml.add_space_prefix", t->meta_scheme == HS_META_ALWAYS);
    hs_meta_bool(mt, "tokenizer.ggml.remove_extra_whitespaces", t->ws_split);
    if (t->pc_blob) {
        size_t n = 4 + 4 * t->pc_units + t->pc_norm_len;
        hs_meta_array(mt, "tokenizer.ggml.precompiled_charsmap", HS_GGUF_UINT8, n);
        hs_meta_elem_bytes(mt, t->pc_blob, n);
    }
    int32_t pad_id = hs_tokenizer_id(t, "<pad>");
    if (eos >= 0)
        hs_meta_u32(mt, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    hs_meta_u32(mt, "tokenizer.ggml.unknown_token_id", (uint32_t)t->unk);
    if (pad_id >= 0)
        hs_meta_u32(mt, "tokenizer.ggml.padding_token_id", (uint32_t)pad_id);
    hs_meta_bool(mt, "tokenizer.ggml.add_bos_token", 0);
    hs_meta_bool(mt, "tokenizer.ggml.add_eos_token", eos >= 0);
    return HS_OK;
}
