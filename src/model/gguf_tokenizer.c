/* The tokenizer half of a GGUF file read: tokenizer.ggml.* into an hs_tokenizer, as
 * llama.cpp's converter writes them for each family (written by gguf_tokenizer_write.c).
 *   GPT-2, RoBERTa: "gpt2" (byte-level tokens and merges); BERT: "bert" (WordPiece with
 *     llama.cpp's "▁" rewrite);
 *   the rotary decoders: "gpt2" with the pre-tokenizer tokenizer.ggml.pre names (GPT-NeoX,
 *     Llama 3, Qwen2), or SentencePiece-style "llama" with scores (Llama 2, TinyLlama), built
 *     by hs_tokenizer_new_spec on the one BPE of src/text. Special tokens (CONTROL, UNKNOWN,
 *     USER_DEFINED) are matched whole in the text; BOS / EOS follow add_bos_token /
 *     add_eos_token with llama.cpp's defaults. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf_internal.h"
#include "model/gguf_t5.h"
#include "text/text_internal.h"

/* ---- reading: GPT-2, RoBERTa, BERT ------------------------------------------------------- */

static hs_status string_array(const hs_gguf *g, long idx, const char *key, const char ***out,
                              size_t *n, hs_error *err)
{
    *n = hs_gguf_kv_len(g, (size_t)idx);
    *out = calloc(*n ? *n : 1, sizeof **out);
    if (!*out)
        return hs_fail(err, HS_E_NOMEM, "out of memory reading '%s'", key);
    for (size_t j = 0; j < *n; j++) {
        hs_gguf_value v;
        hs_gguf_kv_get(g, (size_t)idx, j, &v);
        if (strlen(v.str) != v.len) {
            free(*out);
            *out = NULL;
            return hs_fail(err, HS_E_FORMAT, "%s[%zu] holds a NUL byte", key, j);
        }
        (*out)[j] = v.str;
    }
    return HS_OK;
}

/* Undoes the converter's WordPiece rewrite: CONTROL tokens and every "[...]" token
 * ([unused0], whatever its type) verbatim, "▁x" → "x", and a bare "x" → "##x". */
static hs_status bert_vocab(const hs_gguf *g, const char *const *tok, size_t n, char ***out,
                            hs_error *err)
{
    long ti;
    hs_status st = hs_gguf_find_array(g, "tokenizer.ggml.token_type", HS_GGUF_INT32, 0, &ti, err);
    if (st)
        return st;
    if (ti >= 0 && hs_gguf_kv_len(g, (size_t)ti) < n)
        return hs_fail(err, HS_E_SHAPE, "tokenizer.ggml.token_type has %zu entries for %zu tokens",
                       hs_gguf_kv_len(g, (size_t)ti), n);
    char **v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return hs_fail(err, HS_E_NOMEM, "out of memory rebuilding the vocabulary");
    for (size_t j = 0; j < n; j++) {
        const char *s = tok[j];
        size_t len = strlen(s);
        int control = len >= 2 && s[0] == '[' && s[len - 1] == ']';
        if (ti >= 0 && !control) {
            hs_gguf_value tv;
            hs_gguf_kv_get(g, (size_t)ti, j, &tv);
            control = tv.i == 3;
        }
        const char *pre = "", *body = s;
        if (!control && !strncmp(s, HS_GGUF_PHANTOM, 3))
            body = s + 3;
        else if (!control)
            pre = "##";
        size_t need = strlen(pre) + strlen(body) + 1;
        if ((v[j] = malloc(need)))
            snprintf(v[j], need, "%s%s", pre, body);
        if (!v[j]) {
            for (size_t k = 0; k < j; k++)
                free(v[k]);
            free(v);
            return hs_fail(err, HS_E_NOMEM, "out of memory rebuilding the vocabulary");
        }
    }
    *out = v;
    return HS_OK;
}

/* An optional special-token id key; *id keeps its default when absent, and also (with a
 * warning, as llama.cpp warns and keeps its default) when the id is beyond the vocabulary. */
static hs_status special_id(hs_model *m, const hs_gguf *g, const char *key, size_t n_tok,
                            int32_t *id, hs_error *err)
{
    int v = *id;
    hs_status st = hs_gguf_get_u32(g, key, 0, &v, err);
    if (st)
        return st;
    if (v >= 0 && (size_t)v >= n_tok) {
        hs_model_warn(m, "%s = %d is beyond the vocabulary of %zu tokens; the default %d%s is "
                      "used, as llama.cpp does", key, v, n_tok, (int)*id,
                      *id < 0 || (size_t)*id >= n_tok ? " (none)" : "");
        return HS_OK;
    }
    *id = v;
    return HS_OK;
}

/* The special tokens around each text, as llama.cpp adds them: single [first] A [last];
 * pair_kind 1 (RoBERTa): first A last last B last, every type id 0; 2 (BERT): [first] A
 * [last] B [last], B and its last token of type 1. -1: no such token. */
static void bos_eos_template(hs_tokenizer *t, int32_t first, int32_t last, int pair_kind)
{
    hs_template s = {.n = 0}, p = {.n = 0};
    if (first >= 0)
        s.id[s.n++] = first;
    s.id[s.n++] = HS_TMPL_A;
    if (last >= 0)
        s.id[s.n++] = last;
    t->single = s;
    t->post_name = "GGUF add_bos_token / add_eos_token";
    if (pair_kind == 0)
        return;
    p = s;
    if (pair_kind == 1 && last >= 0)
        p.id[p.n++] = last;
    size_t b = p.n;
    p.id[p.n++] = HS_TMPL_B;
    if (last >= 0)
        p.id[p.n++] = last;
    for (size_t k = b; pair_kind == 2 && k < p.n; k++)
        p.type[k] = 1;
    t->pair = p;
    t->has_pair = 1;
}

/* "gpt2" (GPT-2, RoBERTa): BOS / EOS as tokenizer.ggml.add_bos_token / add_eos_token say
 * (default: neither, as llama.cpp for a "gpt2" vocabulary; its default ids are 11), with
 * RoBERTa's pair <s> A </s> </s> B </s>. */
static hs_status bpe_specials(hs_model *m, const hs_gguf *g, size_t n_tok, hs_error *err)
{
    int32_t bos = 11, eos = 11;
    int add_bos = 0, add_eos = 0;
    hs_status st;
    if ((st = special_id(m, g, "tokenizer.ggml.bos_token_id", n_tok, &bos, err)) ||
        (st = special_id(m, g, "tokenizer.ggml.eos_token_id", n_tok, &eos, err)) ||
        (st = hs_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", 0, &add_bos, err)) ||
        (st = hs_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", 0, &add_eos, err)))
        return st;
    if (!add_bos && !add_eos)
        return HS_OK;
    if ((add_bos && (size_t)bos >= n_tok) || (add_eos && (size_t)eos >= n_tok))
        return hs_fail(err, HS_E_VALUE, "tokenizer.ggml.add_%s_token is true but the file names "
                       "no %s token id in range", add_bos ? "bos" : "eos", add_bos ? "BOS" : "EOS");
    bos_eos_template(m->tok, add_bos ? bos : -1, add_eos ? eos : -1,
                     m->cfg.arch->cls_token && add_bos && add_eos);
    return HS_OK;
}

/* "bert": [CLS] and [SEP] as tokenizer.ggml.add_bos_token / add_sep_token say (default:
 * both, as llama.cpp; a WordPiece vocabulary has no EOS, so add_eos_token plays no part). */
static hs_status bert_specials(hs_model *m, const hs_gguf *g, hs_error *err)
{
    int add_cls = 1, add_sep = 1;
    hs_status st;
    if ((st = hs_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", 0, &add_cls, err)) ||
        (st = hs_gguf_get_bool(g, "tokenizer.ggml.add_sep_token", 0, &add_sep, err)))
        return st;
    if (add_cls && add_sep)
        return HS_OK; /* [CLS] A [SEP] (B [SEP]), as the tokenizer was made */
    hs_tokenizer *t = m->tok;
    bos_eos_template(t, add_cls ? t->single.id[0] : -1, add_sep ? t->single.id[2] : -1, 2);
    t->post_name = "GGUF add_bos_token / add_sep_token";
    return HS_OK;
}

/* GPT-2 and RoBERTa ("gpt2": tokens + merges, <|endoftext|> or the RoBERTa specials by their
 * text) and BERT ("bert": WordPiece with the rewrite undone, lowercasing from
 * tokenizer.ggml.normalizer.lowercase, default true). tok: the tokens, n_tok of them. */
static hs_status load_gpt2_bert(hs_model *m, const hs_gguf *g, const char **tok, size_t n_tok,
                                hs_error *err)
{
    long gi;
    hs_status st;
    const char **merges = NULL;
    size_t n_merges = 0;
    if (m->cfg.arch->tokenizer == HS_TOK_BPE) {
        if (!(st = hs_gguf_find_array(g, "tokenizer.ggml.merges", HS_GGUF_STRING, 1, &gi, err)) &&
            !(st = string_array(g, gi, "tokenizer.ggml.merges", &merges, &n_merges, err)))
            st = hs_tokenizer_new_bpe(tok, n_tok, merges, n_merges, &m->tok, err);
        free(merges);
        return st ? st : bpe_specials(m, g, n_tok, err);
    }
    int lower = 1;
    if ((st = hs_gguf_find_typed(g, "tokenizer.ggml.normalizer.lowercase", HS_GGUF_BOOL, 0, &gi, err)))
        return st;
    if (gi >= 0) {
        hs_gguf_value v;
        hs_gguf_kv_get(g, (size_t)gi, 0, &v);
        lower = v.u != 0;
    }
    char **vocab = NULL;
    st = bert_vocab(g, tok, n_tok, &vocab, err);
    if (st)
        return st;
    st = hs_tokenizer_new_wordpiece((const char *const *)vocab, n_tok, lower, &m->tok, err);
    for (size_t j = 0; j < n_tok; j++)
        free(vocab[j]);
    free(vocab);
    return st ? st : bert_specials(m, g, err);
}

/* ---- reading: the rotary decoders ------------------------------------------------------ */

/* llama.cpp's tokenizer.ggml.pre values for a "gpt2" (byte-level) vocabulary and the Hugging Face
 * pipeline each stands for (llama.cpp's converter hashes a tokenizer's ids on a probe text; the
 * writer names the pipeline it reads: docs/gguf.md); the last five: Falcon, StarCoder, DeepSeek. */
static const hs_gguf_pre pre_kinds[] = {
    {"gpt-2", HS_SPEC_PRE_GPT2, 0, 0, 0},       /* openai-community/gpt2 */
    {"olmo", HS_SPEC_PRE_GPT2, 1, 0, 0},        /* EleutherAI's GPT-NeoX-20B tokenizer (Pythia,
                                                   OLMo, MPT): NFC, then GPT-2's pattern */
    {"mpt", HS_SPEC_PRE_GPT2, 1, 0, 0},         /* the same tokenizer, an older name */
    {"llama-bpe", HS_SPEC_PRE_LLAMA3, 0, 1, 1}, /* Meta-Llama-3: ignore_merges, BOS */
    {"llama3", HS_SPEC_PRE_LLAMA3, 0, 1, 1},
    {"llama-v3", HS_SPEC_PRE_LLAMA3, 0, 1, 1},
    {"qwen2", HS_SPEC_PRE_QWEN2, 1, 0, 0},      /* Qwen1.5 / Qwen2: NFC, single digits */
    {"falcon", HS_SPEC_PRE_FALCON, 0, 0, 0}, {"starcoder", HS_SPEC_PRE_STARCODER, 0, 0, 0},
    {"deepseek-llm", HS_SPEC_PRE_DEEPSEEK_LLM, 0, 0, 0}, {"deepseek-coder", HS_SPEC_PRE_DEEPSEEK_CODER, 0, 0, 0},
    {"deepseek-v3", HS_SPEC_PRE_DEEPSEEK_V3, 0, 0, 0},
};
#define N_PRE_KINDS (sizeof pre_kinds / sizeof pre_kinds[0])

const hs_gguf_pre *hs_gguf_pre_find(const char *name)
{
    for (size_t i = 0; i < N_PRE_KINDS; i++)
        if (!strcmp(pre_kinds[i].name, name))
            return &pre_kinds[i];
    return NULL;
}

const char *hs_gguf_pre_name(int pre, int nfc, int ignore_merges)
{
    for (size_t i = 0; i < N_PRE_KINDS; i++)
        if (pre_kinds[i].pre == pre && pre_kinds[i].nfc == nfc &&
            pre_kinds[i].ignore_merges == ignore_merges)
            return pre_kinds[i].name;
    return NULL;
}

static hs_status load_rotary(hs_model *m, const hs_gguf *g, const char *model, const char **tok,
                             size_t n_tok, hs_error *err)
{
    int spm = !strcmp(model, "llama");
    hs_tok_spec s = {.kind = spm ? HS_TOK_SPM_BPE : HS_TOK_BPE, .tokens = tok, .n_tokens = n_tok,
                     .unk = spm ? 0 : -1, .bos = spm ? 1 : 11, .eos = spm ? 2 : 11,
                     .byte_fallback = spm, .post_name = "GGUF add_bos_token / add_eos_token"};
    int add_bos = spm, add_eos = 0, add_space = 1;
    const char **merges = NULL;
    float *scores = NULL;
    int32_t *added = NULL;
    unsigned char *normalized = NULL;
    long ti, si, gi;
    hs_status st;
    hs_gguf_value v;
    if (!spm) {
        if ((st = hs_gguf_find_typed(g, "tokenizer.ggml.pre", HS_GGUF_STRING, 0, &gi, err)))
            return st;
        if (gi < 0)
            return hs_fail(err, HS_E_UNSUPPORTED, "tokenizer.ggml.pre is missing: a \"gpt2\" "
                           "vocabulary needs it to say how text is split (llama.cpp then guesses)");
        hs_gguf_kv_get(g, (size_t)gi, 0, &v);
        const hs_gguf_pre *k = hs_gguf_pre_find(v.str);
        if (!k)
            return hs_fail(err, HS_E_UNSUPPORTED, "tokenizer.ggml.pre '%.64s' is not supported "
                           "(expected gpt-2, olmo, mpt, llama-bpe, llama3, llama-v3, qwen2, falcon, starcoder, "
                           "deepseek-llm, deepseek-coder or deepseek-v3)", v.str);
        s.pre = k->pre;
        s.nfc = k->nfc;
        s.ignore_merges = k->ignore_merges;
        add_bos = k->add_bos;
    }
    if ((st = hs_gguf_find_array(g, "tokenizer.ggml.token_type", HS_GGUF_INT32, 0, &ti, err)))
        return st;
    if (ti >= 0 && hs_gguf_kv_len(g, (size_t)ti) < n_tok)
        return hs_fail(err, HS_E_SHAPE, "tokenizer.ggml.token_type has %zu entries for %zu tokens",
                       hs_gguf_kv_len(g, (size_t)ti), n_tok);
    if ((st = special_id(m, g, "tokenizer.ggml.unknown_token_id", n_tok, &s.unk, err)) ||
        (st = special_id(m, g, "tokenizer.ggml.bos_token_id", n_tok, &s.bos, err)) ||
        (st = special_id(m, g, "tokenizer.ggml.eos_token_id", n_tok, &s.eos, err)) ||
        (st = hs_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", 0, &add_bos, err)) ||
        (st = hs_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", 0, &add_eos, err)) ||
        (st = hs_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", 0, &add_space, err)))
        return st;
    if (s.unk >= (int32_t)n_tok || !spm)
        s.unk = -1; /* not in a small vocabulary; a "gpt2" one drops a byte it lacks (llama.cpp) */
    if (!add_bos)
        s.bos = -1;
    if (!add_eos)
        s.eos = -1;
    if ((add_bos && s.bos >= (int32_t)n_tok) || (add_eos && s.eos >= (int32_t)n_tok))
        return hs_fail(err, HS_E_VALUE, "tokenizer.ggml.add_%s_token is true but the file names "
                       "no %s token id in range", add_bos ? "bos" : "eos", add_bos ? "BOS" : "EOS");
    s.space = add_space ? HS_SPEC_SPACE_EACH : HS_SPEC_SPACE_NONE;
    if (!(added = malloc(n_tok * sizeof *added)) || !(normalized = malloc(n_tok))) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory reading the tokenizer");
        goto done;
    }
    for (size_t j = 0; ti >= 0 && j < n_tok; j++) {
        hs_gguf_kv_get(g, (size_t)ti, j, &v);
        if (v.i == HS_TT_CONTROL || v.i == HS_TT_UNKNOWN || v.i == HS_TT_USER_DEFINED) {
            /* Hugging Face's default for them */
            normalized[s.n_added] = v.i == HS_TT_USER_DEFINED;
            added[s.n_added++] = (int32_t)j;
        }
    }
    s.added = added;
    s.added_normalized = normalized;
    if (spm) {
        if ((st = hs_gguf_find_typed(g, "tokenizer.ggml.scores", HS_GGUF_ARRAY, 0, &si, err)))
            goto done;
        if (si >= 0 && hs_gguf_kv_elem_type(g, (size_t)si) != HS_GGUF_FLOAT32 &&
            hs_gguf_kv_elem_type(g, (size_t)si) != HS_GGUF_INT32) {
            st = hs_fail(err, HS_E_FORMAT, "key 'tokenizer.ggml.scores' is an array of %s, expected "
                         "FLOAT32", hs_gguf_type_name(hs_gguf_kv_elem_type(g, (size_t)si)));
            goto done;
        }
        if (si >= 0 && hs_gguf_kv_len(g, (size_t)si) != n_tok) {
            st = hs_fail(err, HS_E_SHAPE, "tokenizer.ggml.scores has %zu entries for %zu tokens",
                         hs_gguf_kv_len(g, (size_t)si), n_tok);
            goto done;
        }
        if (!(scores = calloc(n_tok, sizeof *scores))) { /* absent: all 0, as llama.cpp */
            st = hs_fail(err, HS_E_NOMEM, "out of memory reading the tokenizer");
            goto done;
        }
        for (size_t j = 0; si >= 0 && j < n_tok; j++) {
            hs_gguf_kv_get(g, (size_t)si, j, &v);
            scores[j] = v.type == HS_GGUF_FLOAT32 ? (float)v.f : (float)v.i;
        }
        s.scores = scores;
    } else {
        size_t n_merges;
        if ((st = hs_gguf_find_array(g, "tokenizer.ggml.merges", HS_GGUF_STRING, 1, &gi, err)) ||
            (st = string_array(g, gi, "tokenizer.ggml.merges", &merges, &n_merges, err)))
            goto done;
        s.merges = merges;
        s.n_merges = n_merges;
    }
    st = hs_tokenizer_new_spec(&s, &m->tok, err);
done:
    free(merges);
    free(scores);
    free(normalized);
    free(added);
    return st;
}

hs_status hs_gguf_tokenizer_load(hs_model *m, const hs_gguf *g, hs_error *err)
{
    long mi, ti;
    hs_status st;
    if ((st = hs_gguf_find_typed(g, "tokenizer.ggml.model", HS_GGUF_STRING, 0, &mi, err)))
        return st;
    if (mi < 0)
        return HS_OK; /* weights only */
    hs_gguf_value model;
    hs_gguf_kv_get(g, (size_t)mi, 0, &model);
    const hs_arch *a = m->cfg.arch;
    int rotary = a->pos == HS_POS_ROTARY || a->family == HS_FAMILY_GPT_BIGCODE; /* + its pre */
    const char *want = a->names->gguf_tokenizer;
    /* a rotary decoder: "gpt2" (byte-level BPE), or its family's own ("llama": Llama, Phi-3,
       Gemma) */
    int spm_ok = !strcmp(want, "llama");
    if (rotary ? strcmp(model.str, "gpt2") && (!spm_ok || strcmp(model.str, "llama"))
               : strcmp(model.str, want) != 0)
        return hs_fail(err, HS_E_UNSUPPORTED,
                       "tokenizer.ggml.model '%.64s' is not supported for %s (expected '%s')",
                       model.str, hs_family_name(m->cfg.family),
                       spm_ok && rotary ? "gpt2' or 'llama" : rotary ? "gpt2" : want);
    if ((st = hs_gguf_find_array(g, "tokenizer.ggml.tokens", HS_GGUF_STRING, 1, &ti, err)))
        return st;
    size_t n_tok = hs_gguf_kv_len(g, (size_t)ti);
    if (n_tok != (size_t)m->cfg.vocab_size)
        return hs_fail(err, HS_E_SHAPE,
                       "tokenizer.ggml.tokens has %zu entries but %s has %d rows", n_tok,
                       hs_names_row(a, HS_S_TOK_EMB)->gguf, m->cfg.vocab_size);
    const char **tok = NULL;
    if ((st = string_array(g, ti, "tokenizer.ggml.tokens", &tok, &n_tok, err)))
        return st;
    st = rotary ? load_rotary(m, g, model.str, tok, n_tok, err)
         : a->enc_dec ? hs_gguf_t5_tokenizer_load(m, g, tok, n_tok, err) /* gguf_t5.c */
                      : load_gpt2_bert(m, g, tok, n_tok, err);
    free(tok);
    return st;
}
