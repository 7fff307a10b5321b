/*
 * tokenizer.json (the Hugging Face tokenizers library's serialisation, what transformers 5
 * reads first) into an hs_tokenizer: the model and the added tokens here, the normalizer,
 * pre-tokenizer and post-processor in tj_components.c. Accepted:
 *   model          BPE (merges as "a b" or ["a", "b"]; byte_fallback, fuse_unk,
 *                  ignore_merges; no dropout, no subword prefix or suffix), WordPiece, or
 *                  Unigram ([piece, score] pairs, unk_id, byte_fallback; unigram.c);
 *   decoder        ignored (it does not change ids);
 *   added_tokens   matched whole in the text, lstrip and rstrip as the library does them,
 *                  normalized ones in the normalized text (no single_word).
 * Everything else is refused with a message naming the component.
 */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/text_internal.h"

#define TJ "tokenizer.json"
#define TJ_MAX_WORD_CHARS 10000

typedef struct tj_added {
    const char *content;
    int32_t id;
    unsigned char flags; /* HS_ADD_* */
} tj_added;

#define type_of hs_tj_type
#define get_bool hs_tj_bool
#define get_int hs_tj_int

/* ---- model --------------------------------------------------------------------------------- */

/* The vocabulary object {token: id} into tokens[0..n) (pointers into the json); ids dense. */
static hs_status read_vocab(const cJSON *vocab, const char ***tokens, size_t *n, hs_error *err)
{
    char shown[64];
    if (!cJSON_IsObject(vocab))
        return hs_fail(err, HS_E_FORMAT, TJ ": model.vocab must be an object mapping tokens to ids");
    size_t count = (size_t)cJSON_GetArraySize(vocab);
    if (count == 0 || count > HS_TOK_MAX_VOCAB)
        return hs_fail(err, HS_E_FORMAT, TJ ": model.vocab has %zu tokens (1..%zu allowed)", count,
                       HS_TOK_MAX_VOCAB);
    *tokens = calloc(count, sizeof **tokens);
    if (!*tokens)
        return hs_fail(err, HS_E_NOMEM, "out of memory reading " TJ);
    for (const cJSON *it = vocab->child; it; it = it->next) {
        long long id;
        if (!get_int(it, 0, (long long)count - 1, &id))
            return hs_fail(err, HS_E_FORMAT, TJ ": token '%s' has an id that is not an integer in 0..%zu",
                           hs_tok_show(it->string, shown, sizeof shown), count - 1);
        if ((*tokens)[id])
            return hs_fail(err, HS_E_FORMAT, TJ ": id %lld is used twice in model.vocab", id);
        (*tokens)[id] = it->string;
    }
    *n = count;
    return HS_OK;
}

/* A Unigram model's vocabulary [[piece, score], ...] into tokens[0..n) (pointers into the
 * json) and scores[0..n). */
static hs_status read_unigram_vocab(const cJSON *vocab, const char ***tokens, double **scores, size_t *n,
                                    hs_error *err)
{
    size_t count = (size_t)cJSON_GetArraySize(vocab), i = 0;
    if (!cJSON_IsArray(vocab))
        return hs_fail(err, HS_E_FORMAT, TJ ": a Unigram model.vocab must be an array of [piece, score]");
    if (count == 0 || count > HS_TOK_MAX_VOCAB)
        return hs_fail(err, HS_E_FORMAT, TJ ": model.vocab has %zu pieces (1..%zu allowed)", count,
                       HS_TOK_MAX_VOCAB);
    *tokens = calloc(count, sizeof **tokens);
    *scores = calloc(count, sizeof **scores);
    if (!*tokens || !*scores)
        return hs_fail(err, HS_E_NOMEM, "out of memory reading " TJ);
    for (const cJSON *it = vocab->child; it; it = it->next, i++) {
        const cJSON *piece = cJSON_GetArrayItem(it, 0), *score = cJSON_GetArrayItem(it, 1);
        if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 || !cJSON_IsString(piece) || !cJSON_IsNumber(score) ||
            !(score->valuedouble >= -1e300 && score->valuedouble <= 1e300))
            return hs_fail(err, HS_E_FORMAT, TJ ": model.vocab entry %zu is not [piece, score] with a finite score", i);
        (*tokens)[i] = piece->valuestring;
        (*scores)[i] = score->valuedouble;
    }
    *n = count;
    return HS_OK;
}

/* A Unigram model's options: unk_id (needed: headscope gives every text ids) and byte_fallback. */
static hs_status unigram_options(hs_tokenizer *t, const cJSON *m, hs_error *err)
{
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(m, "unk_id");
    long long id;
    if (!unk || cJSON_IsNull(unk))
        return hs_fail(err, HS_E_UNSUPPORTED, TJ ": a Unigram model without unk_id is not supported");
    if (!get_int(unk, 0, (long long)t->n_model - 1, &id))
        return hs_fail(err, HS_E_FORMAT, TJ ": Unigram unk_id must be an id in 0..%zu", t->n_model - 1);
    t->unk = (int32_t)id;
    t->fuse_unk = 1;
    if ((t->byte_fallback = get_bool(m, "byte_fallback", 0)) < 0)
        return hs_fail(err, HS_E_FORMAT, TJ ": Unigram byte_fallback must be true or false");
    return HS_OK;
}

/* Checks the model's options that change ids; sets unk (by name), prefix, max_chars. */
static hs_status model_options(hs_tokenizer *t, const cJSON *m, hs_error *err)
{
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(m, "unk_token");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(m, "continuing_subword_prefix");
    char shown[64];
    if (cJSON_IsString(unk)) {
        t->unk = hs_strtab_find(&t->syms, unk->valuestring, strlen(unk->valuestring));
        if (t->unk < 0 || (size_t)t->unk >= t->n_model)
            return hs_fail(err, HS_E_FORMAT, TJ ": unk_token '%s' is not in model.vocab",
                           hs_tok_show(unk->valuestring, shown, sizeof shown));
    } else if (unk && !cJSON_IsNull(unk)) {
        return hs_fail(err, HS_E_FORMAT, TJ ": model.unk_token must be a string or null");
    } else if (t->kind == HS_TOK_WORDPIECE) {
        return hs_fail(err, HS_E_FORMAT, TJ ": a WordPiece model needs an unk_token");
    }
    if (t->kind != HS_TOK_WORDPIECE) {
        const cJSON *suffix = cJSON_GetObjectItemCaseSensitive(m, "end_of_word_suffix");
        const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(m, "dropout");
        if ((cJSON_IsString(pre) && pre->valuestring[0]) || (cJSON_IsString(suffix) && suffix->valuestring[0]))
            return hs_fail(err, HS_E_UNSUPPORTED, TJ ": BPE with a subword prefix or suffix is not supported");
        if (dropout && !cJSON_IsNull(dropout))
            return hs_fail(err, HS_E_UNSUPPORTED, TJ ": BPE dropout is not supported");
        t->byte_fallback = get_bool(m, "byte_fallback", 0);
        t->fuse_unk = get_bool(m, "fuse_unk", 0);
        t->ignore_merges = get_bool(m, "ignore_merges", 0);
        if (t->byte_fallback < 0 || t->fuse_unk < 0 || t->ignore_merges < 0)
            return hs_fail(err, HS_E_FORMAT, TJ ": BPE byte_fallback, fuse_unk and ignore_merges must be true or false");
        if (t->byte_fallback && t->byte_level)
            return hs_fail(err, HS_E_UNSUPPORTED, TJ ": BPE byte_fallback with a ByteLevel pre-tokenizer is not supported");
        return HS_OK;
    }
    if (pre && !cJSON_IsNull(pre)) {
        if (!cJSON_IsString(pre) || strlen(pre->valuestring) > HS_TOK_MAX_PREFIX)
            return hs_fail(err, HS_E_FORMAT, TJ ": continuing_subword_prefix must be a string of at most %d bytes",
                           HS_TOK_MAX_PREFIX);
        memcpy(t->prefix, pre->valuestring, strlen(pre->valuestring) + 1);
    }
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(m, "max_input_chars_per_word");
    long long v;
    if (mx && !cJSON_IsNull(mx)) {
        if (!get_int(mx, 1, TJ_MAX_WORD_CHARS, &v))
            return hs_fail(err, HS_E_FORMAT, TJ ": max_input_chars_per_word must be 1..%d", TJ_MAX_WORD_CHARS);
        t->max_chars = (size_t)v;
    }
    return HS_OK;
}

/* model.merges as "a b" strings or ["a", "b"] pairs into "a b" strings (*joined owns them). */
static hs_status read_merges(const cJSON *merges, char ***out, size_t *n, hs_error *err)
{
    size_t count = (size_t)cJSON_GetArraySize(merges), i = 0;
    if (merges && !cJSON_IsArray(merges))
        return hs_fail(err, HS_E_FORMAT, TJ ": model.merges must be an array");
    if (count > HS_TOK_MAX_MERGES)
        return hs_fail(err, HS_E_FORMAT, TJ ": %zu merges is more than the limit of %zu", count,
                       HS_TOK_MAX_MERGES);
    *out = calloc(count ? count : 1, sizeof **out);
    if (!*out)
        return hs_fail(err, HS_E_NOMEM, "out of memory reading " TJ);
    *n = count;
    for (const cJSON *it = merges ? merges->child : NULL; it; it = it->next, i++) {
        const char *a, *b = NULL;
        if (cJSON_IsString(it)) {
            a = it->valuestring;
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(it->child) &&
                   cJSON_IsString(it->child->next)) {
            a = it->child->valuestring;
            b = it->child->next->valuestring;
            if (strchr(a, ' ') || strchr(b, ' '))
                return hs_fail(err, HS_E_UNSUPPORTED, TJ ": merge %zu has a symbol with a space", i);
        } else {
            return hs_fail(err, HS_E_FORMAT, TJ ": merge %zu is neither \"a b\" nor [\"a\", \"b\"]", i);
        }
        size_t la = strlen(a), lb = b ? strlen(b) : 0;
        if (la > 2 * HS_TOK_MAX_TOKEN_BYTES || lb > 2 * HS_TOK_MAX_TOKEN_BYTES)
            return hs_fail(err, HS_E_FORMAT, TJ ": merge %zu is too long", i);
        char *s = malloc(la + lb + 2);
        if (!s)
            return hs_fail(err, HS_E_NOMEM, "out of memory reading " TJ);
        memcpy(s, a, la + 1);
        if (b) {
            s[la] = ' ';
            memcpy(s + la + 1, b, lb + 1);
        }
        (*out)[i] = s;
    }
    return HS_OK;
}

/* ---- added tokens ------------------------------------------------------------------------ */

static int added_by_id(const void *a, const void *b)
{
    int32_t x = ((const tj_added *)a)->id, y = ((const tj_added *)b)->id;
    return (x > y) - (x < y);
}

/* Reads added_tokens; those beyond the model's vocabulary must continue its ids. */
/* A normalized=true token is looked for in the normalized text as the normalizer leaves it:
 * headscope takes it when the BPE normalizer does not change it, and not with a WordPiece
 * normalizer. */
static hs_status check_normalized(const hs_tokenizer *t, const char *content, const char *shown,
                                  hs_error *err)
{
    char *norm = NULL;
    size_t len = strlen(content), nlen;
    if (t->n_norm == 0)
        return HS_OK;
    if (t->kind == HS_TOK_WORDPIECE)
        return hs_fail(err, HS_E_UNSUPPORTED, TJ ": added token '%s' with normalized=true and a WordPiece "
                                                 "normalizer is not supported", shown);
    if (hs_tok_normalize(t, content, len, &norm, &nlen, NULL) != HS_OK)
        return hs_fail(err, HS_E_NOMEM, "out of memory reading " TJ);
    int same = !norm || (nlen == len && memcmp(norm, content, len) == 0);
    free(norm);
    if (!same)
        return hs_fail(err, HS_E_UNSUPPORTED, TJ ": added token '%s' with normalized=true is changed by the "
                                                 "normalizer, which is not supported", shown);
    return HS_OK;
}

static hs_status read_added(const cJSON *list, size_t n_model, const char *const *vocab,
                            const hs_tokenizer *t, tj_added **out, size_t *n, hs_error *err)
{
    char shown[64];
    size_t count = (size_t)cJSON_GetArraySize(list), k = 0;
    if (list && !cJSON_IsNull(list) && !cJSON_IsArray(list))
        return hs_fail(err, HS_E_FORMAT, TJ ": added_tokens must be an array");
    if (count > HS_TOK_MAX_ADDED)
        return hs_fail(err, HS_E_FORMAT, TJ ": %zu added tokens is more than the limit of %d", count,
                       HS_TOK_MAX_ADDED);
    *out = calloc(count ? count : 1, sizeof **out);
    if (!*out)
        return hs_fail(err, HS_E_NOMEM, "out of memory reading " TJ);
    for (const cJSON *it = cJSON_IsArray(list) ? list->child : NULL; it; it = it->next, k++) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        long long id;
        if (!cJSON_IsString(content) || !content->valuestring[0] ||
            !get_int(cJSON_GetObjectItemCaseSensitive(it, "id"), 0, INT32_MAX, &id))
            return hs_fail(err, HS_E_FORMAT, TJ ": added token %zu needs a non-empty \"content\" and an \"id\"", k);
        size_t clen = strlen(content->valuestring);
        if (clen > HS_TOK_MAX_TOKEN_BYTES)
            return hs_fail(err, HS_E_FORMAT, TJ ": added token %zu ('%s') is %zu bytes long, more than the "
                           "limit of %d bytes a token", k, hs_tok_show(content->valuestring, shown, sizeof shown),
                           clen, HS_TOK_MAX_TOKEN_BYTES);
        const char *c = hs_tok_show(content->valuestring, shown, sizeof shown);
        int normalized = get_bool(it, "normalized", 0), lstrip = get_bool(it, "lstrip", 0);
        int rstrip = get_bool(it, "rstrip", 0), single = get_bool(it, "single_word", 0);
        if (normalized < 0 || lstrip < 0 || rstrip < 0 || single < 0)
            return hs_fail(err, HS_E_FORMAT, TJ ": added token '%s': options must be true or false", c);
        if (single)
            return hs_fail(err, HS_E_UNSUPPORTED, TJ ": added token '%s' with single_word is not supported", c);
        hs_status st;
        if (normalized && (st = check_normalized(t, content->valuestring, c, err)) != HS_OK)
            return st;
        if ((size_t)id < n_model && strcmp(vocab[id], content->valuestring) != 0)
            return hs_fail(err, HS_E_FORMAT, TJ ": added token '%s' has id %lld, which model.vocab gives to another token", c, id);
        (*out)[k] = (tj_added){content->valuestring, (int32_t)id,
                               (unsigned char)((normalized ? HS_ADD_NORMALIZED : 0) | (lstrip ? HS_ADD_LSTRIP : 0) |
                                               (rstrip ? HS_ADD_RSTRIP : 0))};
    }
    *n = count;
    qsort(*out, count, sizeof **out, added_by_id);
    size_t next = n_model;
    for (k = 0; k < count; k++) {
        int32_t id = (*out)[k].id;
        if ((size_t)id < n_model || (k > 0 && (*out)[k - 1].id == id && !strcmp((*out)[k - 1].content, (*out)[k].content)))
            continue;
        if ((size_t)id != next)
            return hs_fail(err, HS_E_FORMAT, TJ ": added token ids must continue the vocabulary (expected id %zu, found %d)",
                           next, id);
        next++;
    }
    return HS_OK;
}

/* ---- the loader ---------------------------------------------------------------------------- */

hs_status hs_tokenizer_load_json(const char *path, hs_tokenizer **out, hs_error *err)
{
    char *buf = NULL, **merges = NULL, what[HS_ERROR_MSG_MAX / 2];
    const char **tokens = NULL;
    double *scores = NULL;
    cJSON *root = NULL;
    tj_added *added = NULL;
    int32_t *added_ids = NULL;
    unsigned char *flags = NULL;
    hs_tokenizer *t = NULL;
    size_t len, n_model = 0, n_merges = 0, n_added = 0;
    hs_status st;
    if (!path || !out) {
        st = hs_fail(err, HS_E_ARG, "hs_tokenizer_load_json: NULL argument");
        goto fail;
    }
    *out = NULL;
    if ((st = hs_tok_read_text_file(path, &buf, &len, err)) != HS_OK)
        goto fail;
    /* vocabulary, merges as [a, b] pairs, added tokens with their fields, the rest */
    if ((st = hs_json_parse(buf, len, HS_TOK_MAX_VOCAB + 3 * HS_TOK_MAX_MERGES + 16 * HS_TOK_MAX_ADDED +
                                          65536, "the tokenizer file", &root, err)) != HS_OK) {
        hs_error_prefix(err, "'%s'", path);
        goto fail;
    }
    if (!cJSON_IsObject(root)) {
        st = hs_fail(err, HS_E_FORMAT, "'%s' is not a json object", path);
        goto fail;
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const char *mtype = type_of(model);
    if (!mtype) {
        st = hs_fail(err, HS_E_FORMAT, TJ ": no model with a \"type\"");
        goto fail;
    }
    hs_tokenizer_kind kind = strcmp(mtype, "BPE") == 0 ? HS_TOK_BPE
                             : strcmp(mtype, "WordPiece") == 0 ? HS_TOK_WORDPIECE
                             : strcmp(mtype, "Unigram") == 0 ? HS_TOK_UNIGRAM : (hs_tokenizer_kind)0;
    if (!kind) {
        st = hs_fail(err, HS_E_UNSUPPORTED, TJ ": model '%.64s' is not supported", mtype);
        goto fail;
    }
    if (!(t = hs_tok_alloc(kind))) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory creating a tokenizer");
        goto fail;
    }
    /* components first: the cheap refusals (the pre-tokenizer settles BPE's kind) */
    if ((st = hs_tj_pre_tokenizer(t, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), err)) != HS_OK ||
        (st = hs_tj_normalizer(t, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), err)) != HS_OK ||
        (st = hs_tj_split_string_check(t, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"),
                                       err)) != HS_OK ||
        (st = hs_tj_post_processor(t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), err)) != HS_OK)
        goto fail;
    if (kind == HS_TOK_WORDPIECE && !t->has_pair) {
        st = hs_fail(err, HS_E_UNSUPPORTED, TJ ": a WordPiece model needs BertProcessing or TemplateProcessing");
        goto fail;
    }
    /* vocabulary, added tokens beyond it, then the model's tables */
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    if ((st = kind == HS_TOK_UNIGRAM ? read_unigram_vocab(vocab, &tokens, &scores, &n_model, err)
                                     : read_vocab(vocab, &tokens, &n_model, err)) != HS_OK ||
        (st = read_added(cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), n_model, tokens,
                         t, &added, &n_added, err)) != HS_OK)
        goto fail;
    size_t n_all = n_model;
    const char **all = realloc(tokens, (n_model + n_added) * sizeof *tokens);
    if (!all || !(added_ids = malloc((n_added ? n_added : 1) * sizeof *added_ids)) ||
        !(flags = malloc(n_added ? n_added : 1))) {
        if (all)
            tokens = all;
        st = hs_fail(err, HS_E_NOMEM, "out of memory reading " TJ);
        goto fail;
    }
    tokens = all;
    for (size_t k = 0; k < n_added; k++) {
        if ((size_t)added[k].id == n_all)
            tokens[n_all++] = added[k].content;
        added_ids[k] = added[k].id;
        flags[k] = added[k].flags;
    }
    snprintf(what, sizeof what, "'%s'", path);
    if ((st = hs_tok_build_vocab(t, tokens, n_all, kind != HS_TOK_WORDPIECE, what, err)) != HS_OK)
        goto fail;
    t->n_model = n_model;
    if ((st = kind == HS_TOK_UNIGRAM ? unigram_options(t, model, err) : model_options(t, model, err)) != HS_OK ||
        (st = hs_tok_set_added(t, added_ids, flags, n_added, err)) != HS_OK ||
        (st = hs_tj_check_template(t, err)) != HS_OK ||
        (kind == HS_TOK_UNIGRAM && (st = hs_unigram_build(t, scores, err)) != HS_OK))
        goto fail;
    if (kind != HS_TOK_WORDPIECE && kind != HS_TOK_UNIGRAM &&
        ((st = read_merges(cJSON_GetObjectItemCaseSensitive(model, "merges"), &merges, &n_merges, err)) != HS_OK ||
         (st = hs_bpe_build(t, (const char *const *)merges, NULL, NULL, n_merges, what, err)) != HS_OK))
        goto fail;
    *out = t;
    t = NULL;
    st = HS_OK;
fail:
    for (size_t k = 0; merges && k < n_merges; k++)
        free(merges[k]);
    free(merges);
    free(flags);
    free(added_ids);
    free(added);
    free(tokens);
    free(scores);
    cJSON_Delete(root);
    free(buf);
    hs_tokenizer_free(t);
    return st;
}
