/* The tokenizer half of a GGUF file written: tokenizer.ggml.* from an hs_tokenizer, as
 * llama.cpp's converter writes them for each family (read back by gguf_tokenizer.c).
 *   GPT-2, RoBERTa: "gpt2" (byte-level tokens and merges); BERT: "bert" (WordPiece with
 *     llama.cpp's "▁" rewrite);
 *   the rotary decoders: "gpt2" with the tokenizer.ggml.pre name of the pipeline, or
 *     SentencePiece-style "llama" with scores; T5: gguf_t5.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf_internal.h"
#include "model/gguf_t5.h"
#include "text/text_internal.h"

/* ---- writing: GPT-2, RoBERTa, BERT -------------------------------------------------------- */

static int is_special(const hs_arch *a, const char *tok)
{
    for (int i = 0; i < a->n_specials; i++)
        if (!strcmp(tok, a->specials[i]))
            return 1;
    return 0;
}

/* "[...]": stored verbatim in a BERT vocabulary ([unused0], [PAD17], ...), as llama.cpp's
 * converter and its ggml-vocab-bert-bge.gguf store them. */
static int is_bracketed(const char *tok)
{
    size_t n = strlen(tok);
    return n >= 2 && tok[0] == '[' && tok[n - 1] == ']';
}

/* tokenizer.ggml.tokens: V strings in id order, "[PAD{i}]" for an id the tokenizer lacks;
 * bert: with llama.cpp's WordPiece rewrite ("[...]" verbatim, "##x" -> "x", else "▁x"). */
static void token_list(hs_gguf_meta *mt, const hs_tokenizer *t, size_t V, int bert)
{
    char pad[32];
    hs_meta_array(mt, "tokenizer.ggml.tokens", HS_GGUF_STRING, V);
    for (size_t i = 0; i < V; i++) {
        const char *s = hs_tokenizer_token(t, (int32_t)i);
        snprintf(pad, sizeof pad, "[PAD%zu]", i);
        if (!s || !bert || is_bracketed(s))
            hs_meta_elem_str(mt, s ? s : pad);
        else if (!strncmp(s, "##", 2))
            hs_meta_elem_str(mt, s + 2);
        else
            hs_meta_elem_strn(mt, HS_GGUF_PHANTOM, s);
    }
}

/* tokenizer.ggml.merges in rank order, "left right". */
static void merge_list(hs_gguf_meta *mt, const hs_tokenizer *t)
{
    size_t n_merges = hs_tokenizer_merge_count(t);
    hs_meta_array(mt, "tokenizer.ggml.merges", HS_GGUF_STRING, n_merges);
    for (size_t r = 0; r < n_merges; r++)
        hs_meta_elem_str(mt, hs_tokenizer_merge(t, r));
}

/* GPT-2's, RoBERTa's and BERT's first keys: model, pre, tokens (bert: rewritten), and
 * token types (3 for the family's special tokens, 5 for ids the tokenizer lacks, else 1). */
static void vocab_head(hs_gguf_meta *mt, const hs_model *m, const char *pre, int bert)
{
    size_t V = (size_t)m->cfg.vocab_size;
    hs_meta_str(mt, "tokenizer.ggml.model", m->cfg.arch->names->gguf_tokenizer);
    hs_meta_str(mt, "tokenizer.ggml.pre", pre);
    token_list(mt, m->tok, V, bert);
    hs_meta_array(mt, "tokenizer.ggml.token_type", HS_GGUF_INT32, V);
    for (size_t i = 0; i < V; i++) {
        const char *s = hs_tokenizer_token(m->tok, (int32_t)i);
        hs_meta_elem_u32(mt, !s ? 5u : is_special(m->cfg.arch, s) ? 3u : 1u);
    }
}

static hs_status write_gpt2_bert(hs_gguf_meta *mt, const hs_model *m, hs_error *err)
{
    const hs_tokenizer *t = m->tok;
    size_t V = (size_t)m->cfg.vocab_size;
    if (m->cfg.arch->tokenizer == HS_TOK_BPE) {
        vocab_head(mt, m, "gpt-2", 0);
        merge_list(mt, t);
        const hs_arch *a = m->cfg.arch;
        if (a->cls_token) { /* RoBERTa, as llama.cpp's RobertaModel: <s> text </s> */
            static const char *const ids[] = {"tokenizer.ggml.bos_token_id",
                                              "tokenizer.ggml.eos_token_id",
                                              "tokenizer.ggml.padding_token_id",
                                              "tokenizer.ggml.mask_token_id"};
            const char *tok[] = {a->cls_token, a->sep_token, a->pad_token, a->mask_token};
            for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
                int32_t id = tok[k] ? hs_tokenizer_id(t, tok[k]) : -1;
                if (id >= 0)
                    hs_meta_u32(mt, ids[k], (uint32_t)id);
            }
            hs_meta_bool(mt, "tokenizer.ggml.add_bos_token", 1);
            hs_meta_bool(mt, "tokenizer.ggml.add_eos_token", 1);
        } else {
            int32_t eot = hs_tokenizer_id(t, "<|endoftext|>");
            if (eot >= 0) {
                hs_meta_u32(mt, "tokenizer.ggml.bos_token_id", (uint32_t)eot);
                hs_meta_u32(mt, "tokenizer.ggml.eos_token_id", (uint32_t)eot);
            }
        }
        if (a->token_types)
            hs_meta_u32(mt, "tokenizer.ggml.token_type_count", (uint32_t)m->cfg.type_vocab_size);
        return HS_OK;
    }
    for (size_t i = 0; i < V; i++) {
        const char *s = hs_tokenizer_token(t, (int32_t)i);
        if (s && !strncmp(s, "##", 2) && is_bracketed(s + 2))
            return hs_fail(err, HS_E_UNSUPPORTED,
                           "token %zu '%.64s' cannot be stored: a GGUF BERT vocabulary keeps "
                           "'[...]' verbatim, so it would read back as '%.64s'", i, s, s + 2);
    }
    vocab_head(mt, m, "jina-v2-en", 1);
    hs_meta_u32(mt, "tokenizer.ggml.token_type_count", (uint32_t)m->cfg.type_vocab_size);
    hs_meta_bool(mt, "tokenizer.ggml.normalizer.lowercase", hs_tokenizer_lowercase(t));
    /* no eos_token_id: llama.cpp would take [SEP] for an end-of-generation token */
    static const char *const ids[][2] = {
        {"tokenizer.ggml.bos_token_id", "[CLS]"},     {"tokenizer.ggml.unknown_token_id", "[UNK]"},
        {"tokenizer.ggml.seperator_token_id", "[SEP]"}, {"tokenizer.ggml.padding_token_id", "[PAD]"},
        {"tokenizer.ggml.mask_token_id", "[MASK]"},
    };
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
        int32_t id = hs_tokenizer_id(t, ids[k][1]);
        if (id >= 0)
            hs_meta_u32(mt, ids[k][0], (uint32_t)id);
    }
    return HS_OK;
}

/* ---- writing: the rotary decoders -------------------------------------------------------- */

/* The id of the first of names the vocabulary has, or -1. */
static int32_t first_of(const hs_tokenizer *t, const char *const *names, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        int32_t id = hs_tokenizer_id(t, names[k]);
        if (id >= 0)
            return id;
    }
    return -1;
}

/* "<0xNN>": a SentencePiece byte token. */
static int is_byte_token(const char *s)
{
    return strlen(s) == 6 && !strncmp(s, "<0x", 3) && s[5] == '>';
}

/* As llama.cpp's converter: "gpt2" with tokens, token types (CONTROL for the special added
 * tokens, USER_DEFINED for the others, whose text matches as added), merges, the pre name of
 * the tokenizer's pipeline; or "llama" with scores (-id: a piece made earlier by BPE has a
 * lower id), BYTE tokens and add_space_prefix. BOS / EOS as the template adds them. */
static hs_status write_rotary(hs_gguf_meta *mt, const hs_model *m, hs_error *err)
{
    const hs_tokenizer *t = m->tok;
    size_t V = (size_t)m->cfg.vocab_size, n_tok = hs_tokenizer_vocab_size(t);
    hs_tok_spec s;
    hs_status st = hs_tokenizer_get_spec(t, &s, err);
    if (st) {
        hs_error_prefix(err, "the tokenizer cannot be written to GGUF");
        return st;
    }
    int spm = s.kind == HS_TOK_SPM_BPE;
    if (spm && !s.byte_fallback)
        return hs_fail(err, HS_E_UNSUPPORTED, "the tokenizer cannot be written to GGUF: a "
                       "SentencePiece-style tokenizer without byte_fallback has no llama.cpp form");
    const char *pre = spm ? "default" : hs_gguf_pre_name(s.pre, s.nfc, s.ignore_merges);
    if (!pre)
        return hs_fail(err, HS_E_UNSUPPORTED, "the tokenizer cannot be written to GGUF: its pre-tokenizer%s%s "
                       "matches none of llama.cpp's (gpt-2, olmo, llama-bpe, qwen2, falcon, starcoder, "
                       "deepseek-llm, deepseek-coder, deepseek-v3)",
                       s.nfc ? " with NFC" : "", s.ignore_merges ? " and ignore_merges" : "");
    unsigned char *kind = calloc(V ? V : 1, 1); /* 1 special added, 2 other added */
    if (!kind)
        return hs_fail(err, HS_E_NOMEM, "out of memory writing the tokenizer");
    for (size_t k = 0; k < s.n_added; k++)
        if ((size_t)s.added[k] < V)
            kind[s.added[k]] = s.added_normalized[k] & 1 ? 2 : 1;
    hs_meta_str(mt, "tokenizer.ggml.model", spm ? "llama" : "gpt2");
    hs_meta_str(mt, "tokenizer.ggml.pre", pre);
    token_list(mt, t, V, 0);
    if (spm) {
        hs_meta_array(mt, "tokenizer.ggml.scores", HS_GGUF_FLOAT32, V);
        for (size_t i = 0; i < V; i++)
            hs_meta_elem_f32(mt, i < n_tok ? -(float)i : -10000.0f);
    }
    hs_meta_array(mt, "tokenizer.ggml.token_type", HS_GGUF_INT32, V);
    for (size_t i = 0; i < V; i++) {
        const char *tk = i < n_tok ? hs_tokenizer_token(t, (int32_t)i) : NULL;
        uint32_t ty = !tk ? HS_TT_UNUSED
                      : kind[i] == 1 ? (spm && (int32_t)i == s.unk ? HS_TT_UNKNOWN : HS_TT_CONTROL)
                      : kind[i] == 2 ? HS_TT_USER_DEFINED
                      : spm && is_byte_token(tk) ? HS_TT_BYTE : HS_TT_NORMAL;
        hs_meta_elem_u32(mt, ty);
    }
    free(kind);
    if (!spm)
        merge_list(mt, t);
    static const char *const bos_names[] = {"<s>", "<|begin_of_text|>", "<|endoftext|>"};
    static const char *const eos_names[] = {"</s>", "<|end_of_text|>", "<|endoftext|>"};
    static const char *const pad_names[] = {"<|padding|>"};
    int32_t bos = s.bos >= 0 ? s.bos : first_of(t, bos_names, 3);
    int32_t eos = s.eos >= 0 ? s.eos : first_of(t, eos_names, 3);
    int32_t padding = first_of(t, pad_names, 1);
    if (spm && s.unk >= 0)
        hs_meta_u32(mt, "tokenizer.ggml.unknown_token_id", (uint32_t)s.unk);
    if (bos >= 0)
        hs_meta_u32(mt, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    if (eos >= 0)
        hs_meta_u32(mt, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    if (padding >= 0)
        hs_meta_u32(mt, "tokenizer.ggml.padding_token_id", (uint32_t)padding);
    hs_meta_bool(mt, "tokenizer.ggml.add_bos_token", s.bos >= 0);
    if (spm || s.eos >= 0)
        hs_meta_bool(mt, "tokenizer.ggml.add_eos_token", s.eos >= 0);
    if (spm)
        hs_meta_bool(mt, "tokenizer.ggml.add_space_prefix", s.space != HS_SPEC_SPACE_NONE);
    return HS_OK;
}

hs_status hs_gguf_tokenizer_write(hs_gguf_meta *mt, const hs_model *m, hs_error *err)
{
    size_t V = (size_t)m->cfg.vocab_size, n_tok = hs_tokenizer_vocab_size(m->tok);
    if (n_tok > V)
        return hs_fail(err, HS_E_SHAPE,
                       "the tokenizer has %zu tokens but the embedding has only %zu rows", n_tok, V);
    if (m->cfg.arch->pos == HS_POS_ROTARY || m->cfg.family == HS_FAMILY_GPT_BIGCODE)
        return write_rotary(mt, m, err); /* a "gpt2" vocabulary with its own pre-tokenizer */
    if (m->cfg.arch->enc_dec)
        return hs_gguf_t5_tokenizer_write(mt, m, err); /* "t5": Unigram (gguf_t5.c) */
    return write_gpt2_bert(mt, m, err);
}
