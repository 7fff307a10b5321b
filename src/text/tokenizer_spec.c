/*
 * Tokenizers described field by field (hs_tok_spec, src/internal.h): what a GGUF file's
 * tokenizer.ggml.* keys hold, mapped onto the pieces tokenizer.json builds (added tokens,
 * NFC, the SentencePiece space handling, the byte-level pre-tokenizer patterns, BPE merges,
 * a BOS / EOS template). The GGUF reader (src/model/gguf_tokenizer.c) builds from a spec;
 * the writer asks a tokenizer for its spec.
 *
 * A SentencePiece-style vocabulary comes with scores instead of merges. SentencePiece's BPE
 * (and llama.cpp's "llama" tokenizer) merges the adjacent pair whose concatenation is the
 * highest-scored piece, equal scores leftmost first; Hugging Face's converter writes the
 * same thing as a merge list (every split of a piece into two pieces, ordered by the
 * piece). So the merges here are every such split, ranked by the score of the piece, all
 * splits of pieces with equal scores on one rank (bpe.c takes a rank's pairs leftmost
 * first), and the one BPE of bpe.c runs them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/text_internal.h"

#define SPM_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's word-start marker */

typedef struct scored {
    float score;
    int32_t id;
} scored;

/* Higher score first, then lower id (a stable order for equal scores). */
static int by_score(const void *pa, const void *pb)
{
    const scored *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* The merges of a scored vocabulary into t (whose vocabulary is built): every split of a
 * piece of at least two characters into two pieces, ranked by the piece's score. */
static hs_status scored_merges(hs_tokenizer *t, const hs_tok_spec *s, hs_error *err)
{
    size_t n = s->n_tokens, n_merges = 0, cap = 0, rcap = 0;
    scored *order = malloc((n ? n : 1) * sizeof *order);
    char **merges = NULL;
    int32_t *rank = NULL, r = -1;
    hs_status st = HS_OK;
    if (!order)
        return hs_fail(err, HS_E_NOMEM, "out of memory deriving the merges");
    for (size_t i = 0; i < n; i++) {
        if (s->scores[i] != s->scores[i]) {
            free(order);
            return hs_fail(err, HS_E_FORMAT, "score %zu is NaN", i);
        }
        order[i] = (scored){s->scores[i], (int32_t)i};
    }
    qsort(order, n, sizeof *order, by_score);
    for (size_t k = 0; k < n && st == HS_OK; k++) {
        if (k == 0 || order[k].score != order[k - 1].score)
            r++;
        const char *p = s->tokens[order[k].id];
        size_t len = strlen(p);
        if (memchr(p, ' ', len)) /* spaces never reach the model: they are U+2581 by then */
            continue;
        for (size_t cut = 1; cut < len && st == HS_OK; cut++) {
            if (((unsigned char)p[cut] & 0xC0) == 0x80) /* inside a character */
                continue;
            if (hs_strtab_find(&t->syms, p, cut) < 0 || hs_strtab_find(&t->syms, p + cut, len - cut) < 0)
                continue;
            char *m = NULL;
            if (hs_tok_grow((void **)&merges, &cap, n_merges + 1, sizeof *merges, 1024) != HS_OK ||
                hs_tok_grow((void **)&rank, &rcap, n_merges + 1, sizeof *rank, 1024) != HS_OK ||
                !(m = malloc(len + 2))) {
                st = hs_fail(err, HS_E_NOMEM, "out of memory deriving the merges");
                break;
            }
            memcpy(m, p, cut);
            m[cut] = ' ';
            memcpy(m + cut + 1, p + cut, len - cut + 1);
            rank[n_merges] = r;
            merges[n_merges++] = m;
        }
    }
    free(order);
    if (st == HS_OK)
        st = hs_bpe_build(t, (const char *const *)merges, rank, NULL, n_merges, "the scored vocabulary",
                          err);
    for (size_t k = 0; k < n_merges; k++)
        free(merges[k]);
    free(merges);
    free(rank);
    return st;
}

static int push_norm(hs_tokenizer *t, int step)
{
    if (t->n_norm == HS_TOK_MAX_NORM)
        return 0;
    t->norm[t->n_norm++] = (unsigned char)step;
    return 1;
}

static hs_status check_id(const hs_tok_spec *s, int32_t id, const char *what, hs_error *err)
{
    if (id < -1 || (id >= 0 && (size_t)id >= s->n_tokens))
        return hs_fail(err, HS_E_FORMAT, "the %s token id %d is out of range (%zu tokens)", what, id,
                       s->n_tokens);
    return HS_OK;
}

hs_status hs_tokenizer_new_spec(const hs_tok_spec *s, hs_tokenizer **out, hs_error *err)
{
    hs_tokenizer *t = NULL;
    unsigned char *flags = NULL;
    hs_status st;
    if (!s || !out || (s->kind != HS_TOK_BPE && s->kind != HS_TOK_SPM_BPE) ||
        (s->kind == HS_TOK_SPM_BPE && !s->scores))
        return hs_fail(err, HS_E_ARG, "hs_tokenizer_new_spec: bad argument");
    *out = NULL;
    if ((st = check_id(s, s->unk, "unknown", err)) || (st = check_id(s, s->bos, "BOS", err)) ||
        (st = check_id(s, s->eos, "EOS", err)))
        return st;
    if (!(t = hs_tok_alloc((hs_tokenizer_kind)s->kind)) ||
        !(flags = calloc(s->n_added ? s->n_added : 1, 1))) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory creating a tokenizer");
        goto fail;
    }
    if ((st = hs_tok_build_vocab(t, s->tokens, s->n_tokens, 1, "tokenizer.ggml.tokens", err)))
        goto fail;
    t->unk = s->unk;
    t->byte_fallback = s->byte_fallback;
    t->fuse_unk = 1;
    t->ignore_merges = s->ignore_merges;
    if (s->nfc)
        push_norm(t, HS_NORM_NFC);
    if (s->kind == HS_TOK_BPE && s->pre >= HS_SPEC_PRE_DEEPSEEK_LLM) {
        if ((st = hs_pre_seq_named(t, s->pre, err)))
            goto fail;
    } else if (s->kind == HS_TOK_BPE) {
        t->pre = s->pre == HS_SPEC_PRE_LLAMA3 ? HS_PRE_LLAMA3
                 : s->pre == HS_SPEC_PRE_QWEN2 ? HS_PRE_QWEN2
                 : s->pre == HS_SPEC_PRE_FALCON ? HS_PRE_FALCON
                 : s->pre == HS_SPEC_PRE_STARCODER ? HS_PRE_DIGITS_GPT2
                 : s->pre == HS_SPEC_PRE_GPT2 ? HS_PRE_GPT2 : HS_PRE_NONE;
    } else if (s->space == HS_SPEC_SPACE_FIRST) { /* Metaspace, prepend_scheme "first" */
        t->pre = HS_PRE_METASPACE;
        t->meta_scheme = HS_META_FIRST;
        t->meta_split = 0;
        memcpy(t->meta_rep, SPM_SPACE, sizeof SPM_SPACE);
    } else { /* Prepend("▁") for every piece, Replace(" " -> "▁") */
        t->pre = HS_PRE_NONE;
        memcpy(t->prepend, SPM_SPACE, sizeof SPM_SPACE);
        memcpy(t->rep_from, " ", 2);
        memcpy(t->rep_to, SPM_SPACE, sizeof SPM_SPACE);
        if (s->space == HS_SPEC_SPACE_EACH)
            push_norm(t, HS_NORM_PREPEND);
        push_norm(t, HS_NORM_REPLACE);
    }
    for (size_t k = 0; k < s->n_added; k++)
        flags[k] = s->added_normalized && s->added_normalized[k] ? HS_ADD_NORMALIZED : 0;
    if ((st = hs_tok_set_added(t, s->added, flags, s->n_added, err)))
        goto fail;
    hs_template tm = {.n = 0};
    if (s->bos >= 0)
        tm.id[tm.n++] = s->bos;
    tm.id[tm.n++] = HS_TMPL_A;
    if (s->eos >= 0)
        tm.id[tm.n++] = s->eos;
    t->single = tm;
    t->post_name = s->post_name ? s->post_name : "none";
    if (s->kind == HS_TOK_SPM_BPE)
        st = scored_merges(t, s, err);
    else
        st = hs_bpe_build(t, s->merges, NULL, NULL, s->n_merges, "tokenizer.ggml.merges", err);
    if (st)
        goto fail;
    free(flags);
    *out = t;
    return HS_OK;
fail:
    free(flags);
    hs_tokenizer_free(t);
    return st;
}

/* ---- the other way ------------------------------------------------------------------------ */

static int has_norm(const hs_tokenizer *t, int step)
{
    for (size_t k = 0; k < t->n_norm; k++)
        if (t->norm[k] == step)
            return 1;
    return 0;
}

hs_status hs_tokenizer_get_spec(const hs_tokenizer *t, hs_tok_spec *s, hs_error *err)
{
    memset(s, 0, sizeof *s);
    if (t->kind == HS_TOK_WORDPIECE || t->kind == HS_TOK_UNIGRAM)
        return hs_fail(err, HS_E_UNSUPPORTED, "a %s tokenizer has no BPE description",
                       t->kind == HS_TOK_UNIGRAM ? "Unigram" : "WordPiece");
    s->kind = t->kind;
    s->n_tokens = t->n_vocab;
    s->n_merges = t->merge_text.n;
    s->added = t->added;
    s->added_normalized = t->added_flags; /* lstrip / rstrip refused below: the bit is HS_ADD_NORMALIZED */
    s->n_added = t->n_added;
    s->unk = t->unk;
    s->byte_fallback = t->byte_fallback;
    s->ignore_merges = t->ignore_merges;
    s->post_name = t->post_name;
    s->bos = s->eos = -1;
    for (size_t k = 0; k < t->n_norm; k++) {
        int step = t->norm[k];
        int spm_space = t->kind == HS_TOK_SPM_BPE &&
                        ((step == HS_NORM_PREPEND && !strcmp(t->prepend, SPM_SPACE)) ||
                         (step == HS_NORM_REPLACE && !strcmp(t->rep_from, " ") &&
                          !strcmp(t->rep_to, SPM_SPACE)));
        if (step != HS_NORM_NFC && !spm_space)
            return hs_fail(err, HS_E_UNSUPPORTED, "the tokenizer's normalizer (step %d) has no GGUF "
                           "form (llama.cpp knows NFC and SentencePiece's spaces only)", step);
    }
    s->nfc = has_norm(t, HS_NORM_NFC);
    if (t->kind == HS_TOK_BPE) {
        if (t->add_prefix_space)
            return hs_fail(err, HS_E_UNSUPPORTED, "a byte-level tokenizer that adds a prefix space has "
                           "no GGUF form");
        if (t->pre == HS_PRE_SEQ) {
            hs_status st = hs_pre_seq_spec(t, &s->pre, err);
            if (st)
                return st;
            if (s->pre < 0)
                return hs_fail(err, HS_E_UNSUPPORTED, "a pre-tokenizer Sequence of Split and Digits steps "
                               "other than DeepSeek's (deepseek-llm, deepseek-coder, deepseek-v3) has no "
                               "GGUF form");
        } else {
            s->pre = t->pre == HS_PRE_LLAMA3 ? HS_SPEC_PRE_LLAMA3
                     : t->pre == HS_PRE_QWEN2 ? HS_SPEC_PRE_QWEN2
                     : t->pre == HS_PRE_FALCON ? HS_SPEC_PRE_FALCON
                     : t->pre == HS_PRE_DIGITS_GPT2 ? HS_SPEC_PRE_STARCODER
                     : t->pre == HS_PRE_GPT2 ? HS_SPEC_PRE_GPT2 : HS_SPEC_PRE_NONE;
        }
    } else if (t->pre == HS_PRE_METASPACE) {
        if (strcmp(t->meta_rep, SPM_SPACE) || t->meta_split)
            return hs_fail(err, HS_E_UNSUPPORTED, "a Metaspace pre-tokenizer that splits or replaces "
                           "spaces by another string than U+2581 has no GGUF form");
        s->space = t->meta_scheme == HS_META_NEVER ? HS_SPEC_SPACE_NONE
                   : t->meta_scheme == HS_META_FIRST ? HS_SPEC_SPACE_FIRST : HS_SPEC_SPACE_EACH;
    } else if (t->pre == HS_PRE_NONE && has_norm(t, HS_NORM_REPLACE)) {
        s->space = has_norm(t, HS_NORM_PREPEND) ? HS_SPEC_SPACE_EACH : HS_SPEC_SPACE_NONE;
    } else {
        return hs_fail(err, HS_E_UNSUPPORTED, "a SentencePiece-style tokenizer that keeps spaces as "
                       "they are has no GGUF form");
    }
    for (size_t k = 0; k < t->n_added; k++)
        if (t->added_flags[k] & (HS_ADD_LSTRIP | HS_ADD_RSTRIP))
            return hs_fail(err, HS_E_UNSUPPORTED, "added token %d strips the spaces around it "
                           "(lstrip / rstrip), which a GGUF file cannot say", t->added[k]);
    const hs_template *tm = &t->single;
    size_t a = 0;
    while (a < tm->n && tm->id[a] != HS_TMPL_A)
        a++;
    if (a > 1 || tm->n - a > 2)
        return hs_fail(err, HS_E_UNSUPPORTED, "the tokenizer puts more than one token before or after "
                       "a text, which a GGUF file cannot say (add_bos_token / add_eos_token)");
    if (a == 1)
        s->bos = tm->id[0];
    if (tm->n - a == 2)
        s->eos = tm->id[a + 1];
    return HS_OK;
}
