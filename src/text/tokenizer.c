/* Tokenizer construction, file loaders, encoding and the accessors of headscope/tokenizer.h. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/text_internal.h"

const char *const hs_bert_specials[HS_BERT_N_SPECIAL] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                                         "[MASK]"};

hs_status hs_idvec_push(hs_idvec *v, int32_t id)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        if (cap > SIZE_MAX / sizeof *v->v)
            return HS_E_NOMEM;
        int32_t *p = realloc(v->v, cap * sizeof *p);
        if (!p)
            return HS_E_NOMEM;
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = id;
    return HS_OK;
}

/* A token shown in an error message: at most 40 bytes, control bytes as \xNN. */
static const char *show_token(const char *s, char *buf, size_t cap)
{
    size_t w = 0;
    for (size_t i = 0; s[i] && w + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i >= 40) {
            memcpy(buf + w, "...", 3);
            w += 3;
            break;
        }
        if (c < 0x20 || c == 0x7F)
            w += (size_t)snprintf(buf + w, cap - w, "\\x%02x", c);
        else
            buf[w++] = (char)c;
    }
    buf[w] = '\0';
    return buf;
}

hs_status hs_tok_build_vocab(hs_tokenizer *t, const char *const *tokens, size_t n, int reject_dups,
                             const char *what, hs_error *err)
{
    char shown[64];
    if (n == 0)
        return hs_fail(err, HS_E_FORMAT, "%s is empty", what);
    if (n > HS_TOK_MAX_VOCAB)
        return hs_fail(err, HS_E_FORMAT, "%s has %zu tokens, more than the limit of %zu", what, n,
                       HS_TOK_MAX_VOCAB);
    for (size_t i = 0; i < n; i++) {
        if (!tokens[i])
            return hs_fail(err, HS_E_ARG, "%s: token %zu is NULL", what, i);
        size_t len = strlen(tokens[i]), bad;
        if (len > HS_TOK_MAX_TOKEN_BYTES)
            return hs_fail(err, HS_E_FORMAT, "%s: token %zu is longer than %d bytes", what, i,
                           HS_TOK_MAX_TOKEN_BYTES);
        if (!hs_utf8_valid(tokens[i], len, &bad))
            return hs_fail(err, HS_E_FORMAT, "%s: token %zu is not valid utf-8 (byte %zu)", what,
                           i, bad);
        int32_t prev = hs_strtab_find(&t->syms, tokens[i], len);
        if (prev >= 0 && reject_dups)
            return hs_fail(err, HS_E_FORMAT, "%s: duplicate token '%s' (ids %d and %zu)", what,
                           show_token(tokens[i], shown, sizeof shown), prev, i);
        if (hs_strtab_push(&t->syms, tokens[i], len, NULL) != HS_OK)
            return hs_fail(err, HS_E_NOMEM, "out of memory building the vocabulary");
    }
    t->n_vocab = n;
    return HS_OK;
}

static hs_status new_bpe(const char *const *tokens, size_t n_tokens, const char *const *merges,
                         const size_t *merge_lines, size_t n_merges, const char *vocab_what,
                         const char *merges_what, hs_tokenizer **out, hs_error *err)
{
    hs_status st;
    hs_tokenizer *t = NULL;
    if (!out || (!tokens && n_tokens) || (!merges && n_merges)) {
        st = hs_fail(err, HS_E_ARG, "hs_tokenizer_new_bpe: NULL argument");
        goto fail;
    }
    *out = NULL;
    t = calloc(1, sizeof *t);
    if (!t) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory creating a tokenizer");
        goto fail;
    }
    t->kind = HS_TOK_BPE;
    if ((st = hs_tok_build_vocab(t, tokens, n_tokens, 1, vocab_what, err)) != HS_OK)
        goto fail;
    t->eot = hs_strtab_find(&t->syms, HS_GPT2_EOT, sizeof HS_GPT2_EOT - 1);
    if (t->eot < 0) {
        st = hs_fail(err, HS_E_FORMAT, "%s has no '%s' token", vocab_what, HS_GPT2_EOT);
        goto fail;
    }
    if ((st = hs_bpe_build(t, merges, merge_lines, n_merges, merges_what, err)) != HS_OK)
        goto fail;
    *out = t;
    return HS_OK;
fail:
    hs_tokenizer_free(t);
    return st;
}

hs_status hs_tokenizer_new_bpe(const char *const *tokens, size_t n_tokens,
                               const char *const *merges, size_t n_merges,
                               hs_tokenizer **out, hs_error *err)
{
    return new_bpe(tokens, n_tokens, merges, NULL, n_merges, "vocabulary", "merges", out, err);
}

static hs_status new_wordpiece(const char *const *tokens, size_t n_tokens, int lowercase,
                               const char *what, hs_tokenizer **out, hs_error *err)
{
    hs_status st;
    hs_tokenizer *t = NULL;
    if (!out || (!tokens && n_tokens)) {
        st = hs_fail(err, HS_E_ARG, "hs_tokenizer_new_wordpiece: NULL argument");
        goto fail;
    }
    *out = NULL;
    t = calloc(1, sizeof *t);
    if (!t) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory creating a tokenizer");
        goto fail;
    }
    t->kind = HS_TOK_WORDPIECE;
    t->lowercase = lowercase != 0;
    t->eot = -1;
    if ((st = hs_tok_build_vocab(t, tokens, n_tokens, 0, what, err)) != HS_OK)
        goto fail;
    for (int k = 0; k < HS_BERT_N_SPECIAL; k++) {
        t->special[k] = hs_strtab_find(&t->syms, hs_bert_specials[k], strlen(hs_bert_specials[k]));
        if (t->special[k] < 0) {
            st = hs_fail(err, HS_E_FORMAT, "%s has no '%s' token", what, hs_bert_specials[k]);
            goto fail;
        }
    }
    *out = t;
    return HS_OK;
fail:
    hs_tokenizer_free(t);
    return st;
}

hs_status hs_tokenizer_new_wordpiece(const char *const *tokens, size_t n_tokens, int lowercase,
                                     hs_tokenizer **out, hs_error *err)
{
    return new_wordpiece(tokens, n_tokens, lowercase, "vocabulary", out, err);
}

/* ---- files ---------------------------------------------------------------------------------- */

/* Splits buf (NUL-terminated, len bytes) into lines in place, as Python's universal newlines
 * (\n, \r\n or \r end a line; a final line without one counts). *lines and *line_no are
 * malloc'd. Returns HS_E_FORMAT for a NUL byte inside the text. */
static hs_status split_lines(char *buf, size_t len, const char *path, char ***lines,
                             size_t **line_no, size_t *n, int skip_blank, hs_error *err)
{
    size_t cap = 1, k = 0;
    for (size_t i = 0; i < len; i++)
        cap += buf[i] == '\n' || buf[i] == '\r';
    *lines = malloc(cap * sizeof **lines);
    *line_no = malloc(cap * sizeof **line_no);
    *n = 0;
    if (!*lines || !*line_no)
        return hs_fail(err, HS_E_NOMEM, "out of memory reading '%s'", path);
    size_t start = 0, no = 1;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && buf[i] == '\0')
            return hs_fail(err, HS_E_FORMAT, "'%s' line %zu: contains a NUL byte", path, no);
        if (i < len && buf[i] != '\n' && buf[i] != '\r')
            continue;
        if (i == len && start == len)
            break; /* no final line after the last newline */
        int crlf = i + 1 < len && buf[i] == '\r' && buf[i + 1] == '\n';
        buf[i] = '\0';
        if (!(skip_blank && i == start)) {
            (*lines)[k] = buf + start;
            (*line_no)[k] = no;
            k++;
        }
        no++;
        if (crlf)
            i++;
        start = i + 1;
    }
    *n = k;
    return HS_OK;
}

static hs_status read_text_file(const char *path, char **buf, size_t *len, hs_error *err)
{
    size_t bad;
    hs_status st = hs_read_file(path, HS_TOK_MAX_FILE, buf, len, err);
    if (st != HS_OK)
        return st;
    if (!hs_utf8_valid(*buf, *len, &bad)) {
        free(*buf);
        *buf = NULL;
        return hs_fail(err, HS_E_FORMAT, "'%s': invalid utf-8 at byte %zu", path, bad);
    }
    return HS_OK;
}

hs_status hs_tokenizer_load_bert(const char *vocab_txt_path, int lowercase, hs_tokenizer **out,
                                 hs_error *err)
{
    char *buf = NULL, **lines = NULL;
    size_t len, n, *line_no = NULL;
    char what[HS_ERROR_MSG_MAX / 2];
    hs_status st;
    if (!vocab_txt_path || !out) {
        st = hs_fail(err, HS_E_ARG, "hs_tokenizer_load_bert: NULL argument");
        goto fail;
    }
    *out = NULL;
    if ((st = read_text_file(vocab_txt_path, &buf, &len, err)) != HS_OK)
        goto fail;
    if ((st = split_lines(buf, len, vocab_txt_path, &lines, &line_no, &n, 0, err)) != HS_OK)
        goto fail;
    snprintf(what, sizeof what, "'%s'", vocab_txt_path);
    st = new_wordpiece((const char *const *)lines, n, lowercase, what, out, err);
fail:
    free(line_no);
    free(lines);
    free(buf);
    return st;
}

/* Reads vocab.json into tokens in id order (pointers into *json's strings). */
static hs_status read_vocab_json(const char *path, cJSON **json, const char ***tokens, size_t *n,
                                 hs_error *err)
{
    char *buf = NULL, shown[64], shown2[64];
    size_t len;
    hs_status st;
    *json = NULL;
    *tokens = NULL;
    *n = 0;
    if ((st = read_text_file(path, &buf, &len, err)) != HS_OK)
        goto fail;
    *json = cJSON_ParseWithLength(buf, len);
    if (!*json) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= buf && at <= buf + len ? (size_t)(at - buf) : 0;
        st = hs_fail(err, HS_E_FORMAT, "'%s': invalid json near byte %zu", path, off);
        goto fail;
    }
    if (!cJSON_IsObject(*json)) {
        st = hs_fail(err, HS_E_FORMAT, "'%s': expected a json object mapping tokens to ids", path);
        goto fail;
    }
    size_t count = (size_t)cJSON_GetArraySize(*json);
    if (count > HS_TOK_MAX_VOCAB) {
        st = hs_fail(err, HS_E_FORMAT, "'%s' has %zu tokens, more than the limit of %zu", path,
                     count, HS_TOK_MAX_VOCAB);
        goto fail;
    }
    *tokens = calloc(count ? count : 1, sizeof **tokens);
    if (!*tokens) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory reading '%s'", path);
        goto fail;
    }
    for (const cJSON *it = (*json)->child; it; it = it->next) {
        double d = it->valuedouble;
        if (!cJSON_IsNumber(it) || !(d >= -1e18 && d <= 1e18) || d != (double)(long long)d) {
            st = hs_fail(err, HS_E_FORMAT, "'%s': token '%s' has a non-integer id", path,
                         show_token(it->string, shown, sizeof shown));
            goto fail;
        }
        long long id = (long long)d;
        if (id < 0 || (unsigned long long)id >= count) {
            st = hs_fail(err, HS_E_FORMAT,
                         "'%s': id %lld of token '%s' is out of range (ids must be 0..%zu)", path,
                         id, show_token(it->string, shown, sizeof shown), count - 1);
            goto fail;
        }
        if ((*tokens)[id]) {
            st = hs_fail(err, HS_E_FORMAT, "'%s': id %lld is used by both '%s' and '%s'", path, id,
                         show_token((*tokens)[id], shown, sizeof shown),
                         show_token(it->string, shown2, sizeof shown2));
            goto fail;
        }
        (*tokens)[id] = it->string;
    }
    /* count entries with distinct ids in 0..count-1: every id is present */
    *n = count;
    free(buf);
    return HS_OK;
fail:
    free(*tokens);
    *tokens = NULL;
    cJSON_Delete(*json);
    *json = NULL;
    free(buf);
    return st;
}

hs_status hs_tokenizer_load_gpt2(const char *vocab_json_path, const char *merges_path,
                                 hs_tokenizer **out, hs_error *err)
{
    cJSON *json = NULL;
    const char **tokens = NULL;
    char *mbuf = NULL, **lines = NULL, vwhat[HS_ERROR_MSG_MAX / 4], mwhat[HS_ERROR_MSG_MAX / 4];
    size_t n_tokens, mlen, n_lines, *line_no = NULL;
    hs_status st;
    if (!vocab_json_path || !merges_path || !out) {
        st = hs_fail(err, HS_E_ARG, "hs_tokenizer_load_gpt2: NULL argument");
        goto fail;
    }
    *out = NULL;
    if ((st = read_vocab_json(vocab_json_path, &json, &tokens, &n_tokens, err)) != HS_OK)
        goto fail;
    if ((st = read_text_file(merges_path, &mbuf, &mlen, err)) != HS_OK)
        goto fail;
    if ((st = split_lines(mbuf, mlen, merges_path, &lines, &line_no, &n_lines, 1, err)) != HS_OK)
        goto fail;
    size_t skip = n_lines > 0 && line_no[0] == 1 && strncmp(lines[0], "#version", 8) == 0;
    snprintf(vwhat, sizeof vwhat, "'%s'", vocab_json_path);
    snprintf(mwhat, sizeof mwhat, "'%s'", merges_path);
    st = new_bpe(tokens, n_tokens, (const char *const *)lines + skip, line_no + skip,
                 n_lines - skip, vwhat, mwhat, out, err);
fail:
    free(line_no);
    free(lines);
    free(mbuf);
    free(tokens);
    cJSON_Delete(json);
    return st;
}

/* ---- encoding --------------------------------------------------------------------------------- */

hs_status hs_tokenizer_encode(const hs_tokenizer *t, const char *text, size_t len,
                              const char *pair, size_t pair_len, hs_encoding *out,
                              hs_error *err)
{
    hs_idvec ids = {0};
    hs_encoding e = {0};
    size_t bad, n_first, bytes = 0;
    hs_status st;
    if (out)
        memset(out, 0, sizeof *out);
    if (!t || !out || (!text && len)) {
        st = hs_fail(err, HS_E_ARG, "hs_tokenizer_encode: NULL argument");
        goto fail;
    }
    if (!text)
        text = "";
    if (!hs_utf8_valid(text, len, &bad)) {
        st = hs_fail(err, HS_E_INPUT, "text is not valid utf-8 (byte offset %zu)", bad);
        goto fail;
    }
    if (pair && !hs_utf8_valid(pair, pair_len, &bad)) {
        st = hs_fail(err, HS_E_INPUT, "pair text is not valid utf-8 (byte offset %zu)", bad);
        goto fail;
    }
    if (t->kind == HS_TOK_BPE) {
        if ((st = hs_bpe_encode(t, text, len, &ids, err)) != HS_OK)
            goto fail;
        n_first = ids.n;
        if (pair && (st = hs_bpe_encode(t, pair, pair_len, &ids, err)) != HS_OK)
            goto fail;
    } else {
        if (hs_idvec_push(&ids, t->special[HS_BERT_CLS]) != HS_OK)
            goto nomem;
        if ((st = hs_wordpiece_encode(t, text, len, &ids, err)) != HS_OK)
            goto fail;
        if (hs_idvec_push(&ids, t->special[HS_BERT_SEP]) != HS_OK)
            goto nomem;
        n_first = ids.n;
        if (pair) {
            if ((st = hs_wordpiece_encode(t, pair, pair_len, &ids, err)) != HS_OK)
                goto fail;
            if (hs_idvec_push(&ids, t->special[HS_BERT_SEP]) != HS_OK)
                goto nomem;
        }
    }
    /* ids, type ids and one block holding the token pointers followed by their strings */
    for (size_t i = 0; i < ids.n; i++)
        bytes += t->syms.len[ids.v[i]] + 1;
    size_t n = ids.n, nn = n ? n : 1;
    e.ids = malloc(nn * sizeof *e.ids);
    e.type_ids = malloc(nn * sizeof *e.type_ids);
    e.tokens = nn > (SIZE_MAX - bytes) / sizeof(char *) ? NULL : malloc(nn * sizeof(char *) + bytes);
    if (!e.ids || !e.type_ids || !e.tokens)
        goto nomem;
    char *p = (char *)(e.tokens + nn);
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids.v[i];
        e.ids[i] = id;
        e.type_ids[i] = i < n_first ? 0 : 1;
        e.tokens[i] = p;
        memcpy(p, hs_strtab_str(&t->syms, id), t->syms.len[id] + 1);
        p += t->syms.len[id] + 1;
    }
    e.n = n;
    free(ids.v);
    *out = e;
    return HS_OK;
nomem:
    st = hs_fail(err, HS_E_NOMEM, "out of memory encoding %zu bytes of text", len);
fail:
    hs_encoding_free(&e);
    free(ids.v);
    return st;
}

void hs_encoding_free(hs_encoding *e)
{
    if (!e)
        return;
    free(e->ids);
    free(e->type_ids);
    free(e->tokens); /* the strings live in the same block */
    memset(e, 0, sizeof *e);
}

void hs_tokenizer_free(hs_tokenizer *t)
{
    if (!t)
        return;
    hs_strtab_free(&t->syms);
    hs_pairmap_free(&t->merges);
    hs_strtab_free(&t->merge_text);
    free(t);
}

/* ---- accessors ------------------------------------------------------------------------------ */

hs_tokenizer_kind hs_tokenizer_get_kind(const hs_tokenizer *t) { return t ? t->kind : (hs_tokenizer_kind)0; }

size_t hs_tokenizer_vocab_size(const hs_tokenizer *t) { return t ? t->n_vocab : 0; }

int hs_tokenizer_lowercase(const hs_tokenizer *t) { return t ? t->lowercase : 0; }

const char *hs_tokenizer_token(const hs_tokenizer *t, int32_t id)
{
    if (!t || id < 0 || (size_t)id >= t->n_vocab)
        return NULL;
    return hs_strtab_str(&t->syms, id);
}

int32_t hs_tokenizer_id(const hs_tokenizer *t, const char *token)
{
    if (!t || !token)
        return -1;
    int32_t id = hs_strtab_find(&t->syms, token, strlen(token));
    return id >= 0 && (size_t)id < t->n_vocab ? id : -1;
}

size_t hs_tokenizer_merge_count(const hs_tokenizer *t)
{
    return t && t->kind == HS_TOK_BPE ? t->merge_text.n : 0;
}

const char *hs_tokenizer_merge(const hs_tokenizer *t, size_t rank)
{
    if (!t || t->kind != HS_TOK_BPE || rank >= t->merge_text.n)
        return NULL;
    return hs_strtab_str(&t->merge_text, (int32_t)rank);
}

size_t hs_tokenizer_display(const hs_tokenizer *t, int32_t id, char *buf, size_t cap)
{
    const char *s = hs_tokenizer_token(t, id);
    if (cap == 0)
        return 0;
    if (!s) {
        buf[0] = '\0';
        return 0;
    }
    size_t len = t->syms.len[id];
    if (t->kind != HS_TOK_BPE)
        return hs_utf8_sanitize(s, len, buf, cap);
    /* byte-level characters back to bytes; anything else is kept as it is */
    char bytes[HS_TOK_MAX_TOKEN_BYTES];
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t at = i;
        int32_t cp = hs_utf8_next((const unsigned char *)s, &i);
        int b = hs_bpe_char_to_byte(cp);
        if (b >= 0) {
            bytes[n++] = (char)b;
        } else {
            memcpy(bytes + n, s + at, i - at);
            n += i - at;
        }
    }
    return hs_utf8_sanitize(bytes, n, buf, cap);
}
