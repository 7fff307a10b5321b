/*
 * tokenizer.json (the Hugging Face tokenizers library's serialisation, what transformers 5
 * reads first) into an hs_tokenizer. Accepted, in the combinations the C tokenizers run:
 *   model          BPE (merges as "a b" or ["a", "b"]) or WordPiece;
 *   normalizer     WordPiece only: null, BertNormalizer, NFD, Lowercase, StripAccents, or a
 *                  Sequence of these;
 *   pre_tokenizer  ByteLevel (use_regex true) with BPE, BertPreTokenizer with WordPiece;
 *   post_processor null or ByteLevel with BPE; BertProcessing or TemplateProcessing
 *                  "CLS $A:0 SEP" / "CLS $A:0 SEP $B:1 SEP:1" with WordPiece;
 *   decoder        ignored (it does not change ids);
 *   added_tokens   matched whole in the text (no lstrip / rstrip / single_word).
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
    unsigned char normalized;
} tj_added;

static const char *type_of(const cJSON *o)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

/* Boolean member: 1/0, dflt when absent or null, -1 when of another type. */
static int get_bool(const cJSON *o, const char *key, int dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v))
        return dflt;
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : -1;
}

static int get_int(const cJSON *v, long long lo, long long hi, long long *out)
{
    if (!cJSON_IsNumber(v))
        return 0;
    double d = v->valuedouble;
    if (!(d >= (double)lo && d <= (double)hi) || d != (double)(long long)d)
        return 0;
    *out = (long long)d;
    return 1;
}

/* ---- normalizer -------------------------------------------------------------------------- */

static hs_status push_step(hs_tokenizer *t, int step, hs_error *err)
{
    if (t->n_norm == HS_TOK_MAX_NORM)
        return hs_fail(err, HS_E_UNSUPPORTED, TJ ": more than %d normalizer steps", HS_TOK_MAX_NORM);
    t->norm[t->n_norm++] = (unsigned char)step;
    if (step == HS_NORM_LOWER)
        t->lowercase = 1;
    return HS_OK;
}

static hs_status add_normalizer(hs_tokenizer *t, const cJSON *n, int depth, hs_error *err)
{
    const char *type = type_of(n);
    hs_status st;
    if (!type)
        return hs_fail(err, HS_E_FORMAT, TJ ": normalizer without a \"type\"");
    if (strcmp(type, "BertNormalizer") == 0) {
        int clean = get_bool(n, "clean_text", 1), cjk = get_bool(n, "handle_chinese_chars", 1);
        int lower = get_bool(n, "lowercase", 1), strip = get_bool(n, "strip_accents", lower);
        if (clean < 0 || cjk < 0 || lower < 0 || strip < 0)
            return hs_fail(err, HS_E_FORMAT, TJ ": BertNormalizer options must be true, false or null");
        if ((clean && (st = push_step(t, HS_NORM_CLEAN, err)) != HS_OK) ||
            (cjk && (st = push_step(t, HS_NORM_CJK, err)) != HS_OK) ||
            (strip && ((st = push_step(t, HS_NORM_NFD, err)) != HS_OK ||
                       (st = push_step(t, HS_NORM_STRIP, err)) != HS_OK)) ||
            (lower && (st = push_step(t, HS_NORM_LOWER, err)) != HS_OK))
            return st;
        return HS_OK;
    }
    if (strcmp(type, "NFD") == 0)
        return push_step(t, HS_NORM_NFD, err);
    if (strcmp(type, "Lowercase") == 0)
        return push_step(t, HS_NORM_LOWER, err);
    if (strcmp(type, "StripAccents") == 0)
        return push_step(t, HS_NORM_MARKS, err);
    if (strcmp(type, "Sequence") == 0 && depth < 4) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers"), *it;
        if (!cJSON_IsArray(list))
            return hs_fail(err, HS_E_FORMAT, TJ ": normalizer Sequence without \"normalizers\"");
        cJSON_ArrayForEach(it, list)
            if ((st = add_normalizer(t, it, depth + 1, err)) != HS_OK)
                return st;
        return HS_OK;
    }
    return hs_fail(err, HS_E_UNSUPPORTED, TJ ": normalizer '%.64s' is not supported", type);
}

/* ---- post-processor ---------------------------------------------------------------------- */

/* One piece of a template: {"SpecialToken": {"id": name, "type_id": k}} or
 * {"Sequence": {"id": "A" | "B", "type_id": k}}. Returns the name and sets *special. */
static const char *template_piece(const cJSON *p, int *special, long long *type_id)
{
    const cJSON *body = cJSON_GetObjectItemCaseSensitive(p, "SpecialToken");
    *special = body != NULL;
    if (!body)
        body = cJSON_GetObjectItemCaseSensitive(p, "Sequence");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(body, "id");
    if (!cJSON_IsString(id) || !get_int(cJSON_GetObjectItemCaseSensitive(body, "type_id"), 0, 1, type_id))
        return NULL;
    return id->valuestring;
}

/* The id of a template special token: special_tokens[name].ids must be one id. */
static int32_t template_id(const cJSON *pp, const char *name)
{
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pp, "special_tokens"), name);
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(sp, "ids");
    long long id;
    if (!cJSON_IsArray(ids) || cJSON_GetArraySize(ids) != 1 || !get_int(ids->child, 0, INT32_MAX, &id))
        return -1;
    return (int32_t)id;
}

/* TemplateProcessing: single "CLS:0 $A:0 SEP:0", pair "CLS:0 $A:0 SEP:0 $B:1 SEP:1" (cls and
 * sep found), or single "$A:0", pair "$A:0 $B:1" (none). */
static hs_status template_processing(hs_tokenizer *t, const cJSON *pp, hs_error *err)
{
    static const char want_bert[] = "S0 A0 S0 B1 S1", want_plain[] = "A0 B1";
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single");
    const cJSON *pair = cJSON_GetObjectItemCaseSensitive(pp, "pair");
    const char *names[5] = {0};
    char shape[32] = "";
    size_t k = 0, w = 0;
    if (!cJSON_IsArray(single) || !cJSON_IsArray(pair))
        goto unsupported;
    for (const cJSON *p = pair->child; p; p = p->next, k++) {
        int special;
        long long ty;
        const char *name = template_piece(p, &special, &ty);
        if (!name || k >= 5)
            goto unsupported;
        names[k] = name;
        w += (size_t)snprintf(shape + w, sizeof shape - w, "%s%c%lld", k ? " " : "",
                              special ? 'S' : name[0], ty);
    }
    if (strcmp(shape, want_plain) == 0 && !strcmp(names[0], "A") && !strcmp(names[1], "B") &&
        cJSON_GetArraySize(single) == 1)
        return HS_OK;
    if (strcmp(shape, want_bert) != 0 || strcmp(names[1], "A") || strcmp(names[3], "B") ||
        strcmp(names[2], names[4]) || cJSON_GetArraySize(single) != 3)
        goto unsupported;
    k = 0;
    for (const cJSON *p = single->child; p; p = p->next, k++) {
        int special;
        long long ty;
        const char *name = template_piece(p, &special, &ty);
        if (!name || ty != 0 || special != (k != 1) || strcmp(name, names[k]) != 0)
            goto unsupported;
    }
    t->cls = template_id(pp, names[0]);
    t->sep = template_id(pp, names[2]);
    if (t->cls < 0 || t->sep < 0)
        return hs_fail(err, HS_E_FORMAT, TJ ": TemplateProcessing special tokens need one id each");
    return HS_OK;
unsupported:
    return hs_fail(err, HS_E_UNSUPPORTED,
                   TJ ": post_processor 'TemplateProcessing' other than \"[CLS] $A [SEP]\" / "
                      "\"[CLS] $A [SEP] $B:1 [SEP]:1\" is not supported");
}

static hs_status post_processor(hs_tokenizer *t, const cJSON *pp, hs_error *err)
{
    if (!pp || cJSON_IsNull(pp))
        return HS_OK;
    const char *type = type_of(pp);
    if (!type)
        return hs_fail(err, HS_E_FORMAT, TJ ": post_processor without a \"type\"");
    if (strcmp(type, "ByteLevel") == 0 && t->kind == HS_TOK_BPE)
        return HS_OK; /* only offsets */
    if (strcmp(type, "TemplateProcessing") == 0)
        return template_processing(t, pp, err);
    if (strcmp(type, "BertProcessing") == 0) {
        const cJSON *sep = cJSON_GetObjectItemCaseSensitive(pp, "sep");
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(pp, "cls");
        long long a, b;
        if (cJSON_GetArraySize(sep) != 2 || cJSON_GetArraySize(cls) != 2 ||
            !get_int(cJSON_GetArrayItem(sep, 1), 0, INT32_MAX, &a) ||
            !get_int(cJSON_GetArrayItem(cls, 1), 0, INT32_MAX, &b))
            return hs_fail(err, HS_E_FORMAT, TJ ": BertProcessing needs \"sep\" and \"cls\" as [token, id]");
        t->sep = (int32_t)a;
        t->cls = (int32_t)b;
        return HS_OK;
    }
    return hs_fail(err, HS_E_UNSUPPORTED, TJ ": post_processor '%.64s' is not supported", type);
}

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
    if (t->kind == HS_TOK_BPE) {
        const cJSON *suffix = cJSON_GetObjectItemCaseSensitive(m, "end_of_word_suffix");
        const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(m, "dropout");
        if ((cJSON_IsString(pre) && pre->valuestring[0]) || (cJSON_IsString(suffix) && suffix->valuestring[0]))
            return hs_fail(err, HS_E_UNSUPPORTED, TJ ": BPE with a subword prefix or suffix is not supported");
        if (dropout && !cJSON_IsNull(dropout))
            return hs_fail(err, HS_E_UNSUPPORTED, TJ ": BPE dropout is not supported");
        if (get_bool(m, "byte_fallback", 0) != 0 || get_bool(m, "ignore_merges", 0) != 0)
            return hs_fail(err, HS_E_UNSUPPORTED, TJ ": BPE byte_fallback or ignore_merges is not supported");
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
static hs_status read_added(const cJSON *list, size_t n_model, const char *const *vocab,
                            int has_normalizer, tj_added **out, size_t *n, hs_error *err)
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
            strlen(content->valuestring) > HS_TOK_MAX_TOKEN_BYTES ||
            !get_int(cJSON_GetObjectItemCaseSensitive(it, "id"), 0, INT32_MAX, &id))
            return hs_fail(err, HS_E_FORMAT, TJ ": added token %zu needs a non-empty \"content\" and an \"id\"", k);
        const char *c = hs_tok_show(content->valuestring, shown, sizeof shown);
        if (get_bool(it, "lstrip", 0) || get_bool(it, "rstrip", 0) || get_bool(it, "single_word", 0))
            return hs_fail(err, HS_E_UNSUPPORTED, TJ ": added token '%s' with lstrip, rstrip or single_word is not supported", c);
        int normalized = get_bool(it, "normalized", 0);
        if (normalized && has_normalizer)
            return hs_fail(err, HS_E_UNSUPPORTED, TJ ": added token '%s' with normalized=true and a normalizer is not supported", c);
        if ((size_t)id < n_model && strcmp(vocab[id], content->valuestring) != 0)
            return hs_fail(err, HS_E_FORMAT, TJ ": added token '%s' has id %lld, which model.vocab gives to another token", c, id);
        (*out)[k] = (tj_added){content->valuestring, (int32_t)id, (unsigned char)(normalized != 0)};
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
    cJSON *root = NULL;
    tj_added *added = NULL;
    int32_t *added_ids = NULL;
    unsigned char *pass = NULL;
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
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const char *mtype = type_of(model), *ptype = type_of(pre);
    int has_norm = norm && !cJSON_IsNull(norm);
    if (!mtype) {
        st = hs_fail(err, HS_E_FORMAT, TJ ": no model with a \"type\"");
        goto fail;
    }
    hs_tokenizer_kind kind = strcmp(mtype, "BPE") == 0 ? HS_TOK_BPE
                             : strcmp(mtype, "WordPiece") == 0 ? HS_TOK_WORDPIECE : (hs_tokenizer_kind)0;
    if (!kind) {
        st = hs_fail(err, HS_E_UNSUPPORTED, TJ ": model '%.64s' is not supported", mtype);
        goto fail;
    }
    if (!(t = hs_tok_alloc(kind))) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory creating a tokenizer");
        goto fail;
    }
    /* components first: the cheap refusals */
    if (kind == HS_TOK_BPE && has_norm) {
        st = hs_fail(err, HS_E_UNSUPPORTED, TJ ": normalizer '%.64s' with a BPE model is not supported",
                     type_of(norm) ? type_of(norm) : "?");
        goto fail;
    }
    if (has_norm && (st = add_normalizer(t, norm, 0, err)) != HS_OK)
        goto fail;
    const char *want_pre = kind == HS_TOK_BPE ? "ByteLevel" : "BertPreTokenizer";
    if (!ptype || strcmp(ptype, want_pre) != 0) {
        st = hs_fail(err, HS_E_UNSUPPORTED, TJ ": pre_tokenizer '%.64s' is not supported with %s (only %s)",
                     ptype ? ptype : "null", mtype, want_pre);
        goto fail;
    }
    if (kind == HS_TOK_BPE) {
        int aps = get_bool(pre, "add_prefix_space", 1), rx = get_bool(pre, "use_regex", 1);
        if (aps < 0 || rx != 1) {
            st = hs_fail(err, HS_E_UNSUPPORTED, TJ ": pre_tokenizer 'ByteLevel' without use_regex is not supported");
            goto fail;
        }
        t->add_prefix_space = aps;
    }
    /* vocabulary, added tokens beyond it, then the model's tables */
    if ((st = read_vocab(cJSON_GetObjectItemCaseSensitive(model, "vocab"), &tokens, &n_model, err)) != HS_OK ||
        (st = read_added(cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), n_model, tokens,
                         has_norm, &added, &n_added, err)) != HS_OK)
        goto fail;
    size_t n_all = n_model;
    const char **all = realloc(tokens, (n_model + n_added) * sizeof *tokens);
    if (!all || !(added_ids = malloc((n_added ? n_added : 1) * sizeof *added_ids)) ||
        !(pass = malloc(n_added ? n_added : 1))) {
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
        pass[k] = added[k].normalized;
    }
    snprintf(what, sizeof what, "'%s'", path);
    if ((st = hs_tok_build_vocab(t, tokens, n_all, kind == HS_TOK_BPE, what, err)) != HS_OK)
        goto fail;
    t->n_model = n_model;
    if ((st = model_options(t, model, err)) != HS_OK ||
        (st = hs_tok_set_added(t, added_ids, pass, n_added, err)) != HS_OK ||
        (st = post_processor(t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), err)) != HS_OK)
        goto fail;
    if (kind == HS_TOK_BPE) {
        if ((st = read_merges(cJSON_GetObjectItemCaseSensitive(model, "merges"), &merges, &n_merges, err)) != HS_OK ||
            (st = hs_bpe_build(t, (const char *const *)merges, NULL, n_merges, what, err)) != HS_OK)
            goto fail;
        if (t->cls >= 0) {
            st = hs_fail(err, HS_E_UNSUPPORTED, TJ ": a BPE model with [CLS]/[SEP] post-processing is not supported");
            goto fail;
        }
    } else if (t->cls < 0) {
        st = hs_fail(err, HS_E_UNSUPPORTED, TJ ": a WordPiece model needs BertProcessing or TemplateProcessing");
        goto fail;
    }
    if ((size_t)t->cls >= n_all && t->cls >= 0) {
        st = hs_fail(err, HS_E_FORMAT, TJ ": post_processor token id %d is out of range", t->cls);
        goto fail;
    }
    if ((size_t)t->sep >= n_all && t->sep >= 0) {
        st = hs_fail(err, HS_E_FORMAT, TJ ": post_processor token id %d is out of range", t->sep);
        goto fail;
    }
    *out = t;
    t = NULL;
    st = HS_OK;
fail:
    for (size_t k = 0; merges && k < n_merges; k++)
        free(merges[k]);
    free(merges);
    free(pass);
    free(added_ids);
    free(added);
    free(tokens);
    cJSON_Delete(root);
    free(buf);
    hs_tokenizer_free(t);
    return st;
}
