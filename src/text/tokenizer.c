/* Tokenizer construction, file loaders and the accessors of headscope/tokenizer.h (encoding: encode.c). */
#ifdef __linux__
#define _GNU_SOURCE /* mremap */
#include <sys/mman.h>
#endif
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/text_internal.h"

const char *const hs_bert_specials[HS_BERT_N_SPECIAL] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                                         "[MASK]"};

/* v's block grown to cap ids (cap > v->cap): an anonymous mapping from HS_IDVEC_MAP_BYTES on
 * where there is mremap, else realloc's. */
static hs_status idvec_grow(hs_idvec *v, size_t cap)
{
    size_t bytes = cap * sizeof *v->v;
    int32_t *p;
#ifdef __linux__
    if (v->mapped) {
        p = mremap(v->v, v->cap * sizeof *v->v, bytes, MREMAP_MAYMOVE);
        if (p == MAP_FAILED)
            return HS_E_NOMEM;
    } else if (bytes >= HS_IDVEC_MAP_BYTES) {
        p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return HS_E_NOMEM;
        memcpy(p, v->v, v->n * sizeof *v->v);
        free(v->v);
        v->mapped = 1;
    } else
#endif
    if (!(p = realloc(v->v, bytes)))
        return HS_E_NOMEM;
    v->v = p;
    v->cap = cap;
    return HS_OK;
}

hs_status hs_idvec_push(hs_idvec *v, int32_t id)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        if (cap > SIZE_MAX / sizeof *v->v || idvec_grow(v, cap) != HS_OK)
            return HS_E_NOMEM;
    }
    v->v[v->n++] = id;
    return HS_OK;
}

void hs_idvec_free(hs_idvec *v)
{
#ifdef __linux__
    if (v->mapped)
        munmap(v->v, v->cap * sizeof *v->v);
    else
#endif
        free(v->v);
    memset(v, 0, sizeof *v);
}

/* A token shown in an error message: at most 40 bytes, control bytes as \xNN. */
const char *hs_tok_show(const char *s, char *buf, size_t cap)
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
            return hs_fail(err, HS_E_FORMAT, "%s: token %zu is %zu bytes long, more than the limit "
                           "of %d bytes a token", what, i, len, HS_TOK_MAX_TOKEN_BYTES);
        if (!hs_utf8_valid(tokens[i], len, &bad))
            return hs_fail(err, HS_E_FORMAT, "%s: token %zu is not valid utf-8 (byte %zu)", what,
                           i, bad);
        int32_t prev = hs_strtab_find(&t->syms, tokens[i], len);
        if (prev >= 0 && reject_dups)
            return hs_fail(err, HS_E_FORMAT, "%s: duplicate token '%s' (ids %d and %zu)", what,
                           hs_tok_show(tokens[i], shown, sizeof shown), prev, i);
        if (hs_strtab_push(&t->syms, tokens[i], len, NULL) != HS_OK)
            return hs_fail(err, HS_E_NOMEM, "out of memory building the vocabulary");
    }
    t->n_vocab = t->n_model = n;
    return HS_OK;
}

hs_tokenizer *hs_tok_alloc(hs_tokenizer_kind kind)
{
    hs_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->kind = kind;
    t->unk = -1;
    memcpy(t->prefix, "##", 3);
    t->max_chars = 100;
    t->byte_level = kind == HS_TOK_BPE;
    t->pre = kind == HS_TOK_BPE ? HS_PRE_GPT2 : HS_PRE_NONE;
    /* no post-processor: the text, or the text and the pair with type ids 0 and 1 */
    t->single = (hs_template){.id = {HS_TMPL_A}, .type = {0}, .n = 1};
    t->pair = (hs_template){.id = {HS_TMPL_A, HS_TMPL_B}, .type = {0, 1}, .n = 2};
    t->post_name = "none";
    return t;
}

void hs_tok_set_bert_template(hs_tokenizer *t, int32_t cls, int32_t sep)
{
    t->single = (hs_template){.id = {cls, HS_TMPL_A, sep}, .type = {0, 0, 0}, .n = 3};
    t->pair = (hs_template){.id = {cls, HS_TMPL_A, sep, HS_TMPL_B, sep}, .type = {0, 0, 0, 1, 1},
                            .n = 5};
    t->has_pair = 1;
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
    if (!(t = hs_tok_alloc(HS_TOK_BPE))) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory creating a tokenizer");
        goto fail;
    }
    if ((st = hs_tok_build_vocab(t, tokens, n_tokens, 1, vocab_what, err)) != HS_OK)
        goto fail;
    /* <|endoftext|> is the added special token and stands in for bytes the vocabulary lacks */
    t->unk = hs_strtab_find(&t->syms, HS_GPT2_EOT, sizeof HS_GPT2_EOT - 1);
    if (t->unk < 0) {
        st = hs_fail(err, HS_E_FORMAT, "%s has no '%s' token", vocab_what, HS_GPT2_EOT);
        goto fail;
    }
    if ((st = hs_tok_set_added(t, &t->unk, NULL, 1, err)) != HS_OK ||
        (st = hs_bpe_build(t, merges, NULL, merge_lines, n_merges, merges_what, err)) != HS_OK)
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

/* BertTokenizer's setup: BertNormalizer (strip_accents follows lowercase), the five special
 * tokens added, [CLS] text [SEP] (pair [SEP]). */
static hs_status new_wordpiece(const char *const *tokens, size_t n_tokens, int lowercase,
                               const char *what, hs_tokenizer **out, hs_error *err)
{
    static const unsigned char cased[] = {HS_NORM_CLEAN, HS_NORM_CJK};
    static const unsigned char uncased[] = {HS_NORM_CLEAN, HS_NORM_CJK, HS_NORM_NFD,
                                            HS_NORM_STRIP, HS_NORM_LOWER};
    int32_t special[HS_BERT_N_SPECIAL];
    hs_status st;
    hs_tokenizer *t = NULL;
    if (!out || (!tokens && n_tokens)) {
        st = hs_fail(err, HS_E_ARG, "hs_tokenizer_new_wordpiece: NULL argument");
        goto fail;
    }
    *out = NULL;
    if (!(t = hs_tok_alloc(HS_TOK_WORDPIECE))) {
        st = hs_fail(err, HS_E_NOMEM, "out of memory creating a tokenizer");
        goto fail;
    }
    t->lowercase = lowercase != 0;
    t->n_norm = lowercase ? sizeof uncased : sizeof cased;
    memcpy(t->norm, lowercase ? uncased : cased, t->n_norm);
    if ((st = hs_tok_build_vocab(t, tokens, n_tokens, 0, what, err)) != HS_OK)
        goto fail;
    for (int k = 0; k < HS_BERT_N_SPECIAL; k++) {
        special[k] = hs_strtab_find(&t->syms, hs_bert_specials[k], strlen(hs_bert_specials[k]));
        if (special[k] < 0) {
            st = hs_fail(err, HS_E_FORMAT, "%s has no '%s' token", what, hs_bert_specials[k]);
            goto fail;
        }
    }
    t->unk = special[1];
    hs_tok_set_bert_template(t, special[2], special[3]);
    t->post_name = "BertProcessing";
    if ((st = hs_tok_set_added(t, special, NULL, HS_BERT_N_SPECIAL, err)) != HS_OK)
        goto fail;
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
static hs_status split_lines(char *buf, size_t len, const char *path, size_t max_lines,
                             char ***lines, size_t **line_no, size_t *n, int skip_blank,
                             hs_error *err)
{
    size_t cap = 1, k = 0;
    for (size_t i = 0; i < len; i++)
        cap += buf[i] == '\n' || buf[i] == '\r';
    *lines = NULL;
    *line_no = NULL;
    *n = 0;
    if (cap > max_lines + 1) /* counted before anything is allocated (CRLF counts twice) */
        return hs_fail(err, HS_E_FORMAT, "'%s' has more than %zu lines", path, max_lines);
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

hs_status hs_tok_read_text_file(const char *path, char **buf, size_t *len, hs_error *err)
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
    if ((st = hs_tok_read_text_file(vocab_txt_path, &buf, &len, err)) != HS_OK)
        goto fail;
    if ((st = split_lines(buf, len, vocab_txt_path, 2 * HS_TOK_MAX_VOCAB, &lines, &line_no, &n,
                          0, err)) != HS_OK)
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
    if ((st = hs_tok_read_text_file(path, &buf, &len, err)) != HS_OK)
        goto fail;
    char what[HS_ERROR_MSG_MAX / 2];
    snprintf(what, sizeof what, "'%.200s'", path);
    if ((st = hs_json_parse(buf, len, HS_TOK_MAX_VOCAB + 1, what, json, err)) != HS_OK)
        goto fail;
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
                         hs_tok_show(it->string, shown, sizeof shown));
            goto fail;
        }
        long long id = (long long)d;
        if (id < 0 || (unsigned long long)id >= count) {
            st = hs_fail(err, HS_E_FORMAT,
                         "'%s': id %lld of token '%s' is out of range (ids must be 0..%zu)", path,
                         id, hs_tok_show(it->string, shown, sizeof shown), count - 1);
            goto fail;
        }
        if ((*tokens)[id]) {
            st = hs_fail(err, HS_E_FORMAT, "'%s': id %lld is used by both '%s' and '%s'", path, id,
                         hs_tok_show((*tokens)[id], shown, sizeof shown),
                         hs_tok_show(it->string, shown2, sizeof shown2));
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
    if ((st = hs_tok_read_text_file(merges_path, &mbuf, &mlen, err)) != HS_OK)
        goto fail;
    if ((st = split_lines(mbuf, mlen, merges_path, 2 * HS_TOK_MAX_MERGES + 2, &lines, &line_no,
                          &n_lines, 1, err)) != HS_OK)
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

void hs_encoding_free(hs_encoding *e)
{
    if (!e)
        return;
    free(e->ids);
    free(e->type_ids);
    memset(e, 0, sizeof *e);
}

void hs_tokenizer_free(hs_tokenizer *t)
{
    if (!t)
        return;
    hs_strtab_free(&t->syms);
    hs_pairmap_free(&t->merges);
    hs_strtab_free(&t->merge_text);
    free(t->right_first);
    free(t->uni_score);
    free(t->pc_blob);
    hs_pre_seq_free(t->pre_seq);
    hs_pairmap_free(&t->uni_trie);
    hs_added_free(t);
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
    size_t len = strlen(token);
    int32_t id = hs_strtab_find(&t->syms, token, len);
    if (id >= 0 && (size_t)id < t->n_vocab)
        return id;
    /* a BPE merge-only symbol may shadow an added token with the same text */
    for (size_t k = 0; id >= 0 && k < t->n_added; k++)
        if (t->syms.len[t->added[k]] == len && memcmp(hs_strtab_str(&t->syms, t->added[k]), token, len) == 0)
            return t->added[k];
    return -1;
}

size_t hs_tokenizer_merge_count(const hs_tokenizer *t)
{
    return t && t->kind != HS_TOK_WORDPIECE ? t->merge_text.n : 0;
}

const char *hs_tokenizer_merge(const hs_tokenizer *t, size_t rank)
{
    if (!t || t->kind == HS_TOK_WORDPIECE || rank >= t->merge_text.n)
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
    if (t->kind == HS_TOK_SPM_BPE || t->kind == HS_TOK_UNIGRAM) {
        /* <0xNN> is its byte; the metaspace replacement ("▁") is a space */
        unsigned v;
        char c, bytes[HS_TOK_MAX_TOKEN_BYTES];
        if (len == 6 && sscanf(s, "<0x%2X%c", &v, &c) == 2 && c == '>')
            return hs_utf8_sanitize((char[]){(char)v}, 1, buf, cap);
        const char *rep = t->meta_rep[0] ? t->meta_rep : "\xe2\x96\x81";
        size_t rl = strlen(rep), n = 0;
        for (size_t i = 0; i < len;) {
            if (len - i >= rl && memcmp(s + i, rep, rl) == 0) {
                bytes[n++] = ' ';
                i += rl;
            } else {
                bytes[n++] = s[i++];
            }
        }
        return hs_utf8_sanitize(bytes, n, buf, cap);
    }
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

int hs_tokenizer_has_pair(const hs_tokenizer *t) { return t ? t->has_pair : 0; }

hs_status hs_tokenizer_check_pair(const hs_tokenizer *t, hs_error *err)
{
    if (!t)
        return hs_fail(err, HS_E_ARG, "hs_tokenizer_check_pair: NULL tokenizer");
    if (t->has_pair)
        return HS_OK;
    return hs_fail(err, HS_E_INPUT, "a text pair needs a tokenizer whose post-processor defines a pair "
                   "encoding; this model's %s tokenizer (post-processor %s) takes a single text",
                   hs_tokenizer_kind_name(t->kind), t->post_name);
}

size_t hs_tokenizer_special_count(const hs_tokenizer *t, int pair)
{
    if (!t)
        return 0;
    const hs_template *tm = pair ? &t->pair : &t->single;
    size_t n = 0;
    for (size_t k = 0; k < tm->n; k++)
        n += tm->id[k] >= 0;
    return n;
}

const char *hs_tokenizer_kind_name(hs_tokenizer_kind kind)
{
    switch (kind) {
    case HS_TOK_BPE: return "byte-level BPE";
    case HS_TOK_WORDPIECE: return "WordPiece";
    case HS_TOK_SPM_BPE: return "SentencePiece-style BPE";
    case HS_TOK_UNIGRAM: return "SentencePiece Unigram";
    default: return "unknown";
    }
}

const char *hs_tokenizer_post_processor(const hs_tokenizer *t) { return t ? t->post_name : "none"; }

int hs_tokenizer_is_special(const hs_tokenizer *t, int32_t id)
{
    if (!t || id < 0)
        return 0;
    for (size_t k = 0; k < t->n_added; k++)
        if (t->added[k] == id)
            return 1;
    const hs_template *tms[2] = {&t->single, &t->pair};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < tms[k]->n; i++)
            if (tms[k]->id[i] == id)
                return 1;
    return 0;
}
