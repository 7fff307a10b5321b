/* Corpus reader: one text per line, JSONL records, a folder of .txt files, or stdin.
 * Every record is bounded (HS_CORPUS_MAX_LINE bytes); bad records come back marked. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "core/core.h"
#include "headscope/corpus.h"
#include "text/text_internal.h"

struct hs_corpus_reader {
    FILE *f;
    int own;
    hs_corpus_format fmt;
    long line, empty;
    char *buf;          /* (HS_CORPUS_MAX_LINE + 1) the current line */
    char *text, *pair;  /* the current record's parsed copies (JSONL) */
    /* folder */
    char *dir;
    char **names;       /* (n_names) sorted */
    long n_names, next;
};

const char *hs_corpus_format_name(hs_corpus_format f)
{
    switch (f) {
    case HS_CORPUS_LINES: return "lines";
    case HS_CORPUS_JSONL: return "jsonl";
    case HS_CORPUS_DIR: return "folder";
    default: return "auto";
    }
}

const char *hs_corpus_skip_name(hs_corpus_skip s)
{
    static const char *const names[HS_SKIP_COUNT] = {
        "none", "invalid_utf8", "invalid_json", "line_too_long", "no_tokens", "too_long",
        "too_short", "text_pair_unsupported"};
    return s >= 0 && s < HS_SKIP_COUNT ? names[s] : "unknown";
}

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return 0;
    return 1;
}

static char *dup_bytes(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* A JSON string member, valid UTF-8; 0 ok (*out may be NULL when absent or null),
 * -1 wrong type, -2 invalid UTF-8, -3 out of memory. */
static int json_string(const cJSON *o, const char *key, int required, char **out, size_t *len,
                       size_t *bad)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = NULL;
    *len = 0;
    if (!v || cJSON_IsNull(v))
        return required ? -1 : 0;
    if (!cJSON_IsString(v) || !v->valuestring)
        return -1;
    size_t n = strlen(v->valuestring);
    if (!hs_utf8_valid(v->valuestring, n, bad))
        return -2;
    if (!(*out = dup_bytes(v->valuestring, n)))
        return -3;
    *len = n;
    return 0;
}

hs_corpus_skip hs_corpus_parse(const char *rec, size_t len, hs_corpus_format fmt, char **text,
                               size_t *text_len, char **pair, size_t *pair_len, char *detail,
                               size_t cap)
{
    size_t bad = 0;
    *text = *pair = NULL;
    *text_len = *pair_len = 0;
    if (cap)
        detail[0] = '\0';
    if (len > HS_CORPUS_MAX_LINE) {
        snprintf(detail, cap, "longer than %zu bytes", HS_CORPUS_MAX_LINE);
        return HS_SKIP_LINE_LONG;
    }
    if (!hs_utf8_valid(rec, len, &bad)) {
        snprintf(detail, cap, "invalid UTF-8 at byte %zu", bad);
        return HS_SKIP_UTF8;
    }
    if (fmt != HS_CORPUS_JSONL) {
        if (!(*text = dup_bytes(rec, len)))
            return HS_SKIP_COUNT;
        *text_len = len;
        return HS_SKIP_NONE;
    }
    if (memchr(rec, '\0', len)) {
        snprintf(detail, cap, "a NUL byte in a JSON line");
        return HS_SKIP_JSON;
    }
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(rec, len, &end, 0);
    if (!o || !cJSON_IsObject(o)) {
        snprintf(detail, cap, o ? "not a JSON object" : "not valid JSON (near byte %zu)",
                 end && end >= rec && end <= rec + len ? (size_t)(end - rec) : (size_t)0);
        cJSON_Delete(o);
        return HS_SKIP_JSON;
    }
    if (end && !is_blank(end, len - (size_t)(end - rec))) {
        snprintf(detail, cap, "text after the JSON object at byte %zu", (size_t)(end - rec));
        cJSON_Delete(o);
        return HS_SKIP_JSON;
    }
    hs_corpus_skip why = HS_SKIP_NONE;
    int r = json_string(o, "text", 1, text, text_len, &bad);
    const char *key = "text";
    if (r == 0) {
        key = "text_pair";
        r = json_string(o, "text_pair", 0, pair, pair_len, &bad);
    }
    if (r == -1) {
        snprintf(detail, cap, "\"%s\" is %s", key, !strcmp(key, "text") ? "missing or not a string" : "not a string");
        why = HS_SKIP_JSON;
    } else if (r == -2) {
        snprintf(detail, cap, "\"%s\" is not valid UTF-8 at byte %zu", key, bad);
        why = HS_SKIP_UTF8;
    } else if (r == -3) {
        why = HS_SKIP_COUNT;
    }
    cJSON_Delete(o);
    if (why != HS_SKIP_NONE) {
        free(*text);
        free(*pair);
        *text = *pair = NULL;
        *text_len = *pair_len = 0;
    }
    return why;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static hs_status open_dir(hs_corpus_reader *r, const char *path, hs_error *err)
{
    DIR *d = opendir(path);
    if (!d)
        return hs_fail(err, HS_E_IO, "cannot open the folder '%s': %s", path, strerror(errno));
    long cap = 0;
    hs_status st = HS_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".txt"))
            continue;
        if (r->n_names >= HS_CORPUS_MAX_FILES) {
            st = hs_fail(err, HS_E_INPUT, "'%s' holds more than %d .txt files", path,
                         HS_CORPUS_MAX_FILES);
            break;
        }
        if (r->n_names == cap) {
            long nc = cap ? cap * 2 : 64;
            char **nn = realloc(r->names, (size_t)nc * sizeof *nn);
            if (!nn) {
                st = hs_fail(err, HS_E_NOMEM, "out of memory");
                break;
            }
            r->names = nn;
            cap = nc;
        }
        if (!(r->names[r->n_names] = strdup(e->d_name))) {
            st = hs_fail(err, HS_E_NOMEM, "out of memory");
            break;
        }
        r->n_names++;
    }
    closedir(d);
    if (st)
        return st;
    if (r->n_names == 0)
        return hs_fail(err, HS_E_INPUT, "the folder '%s' has no .txt files", path);
    qsort(r->names, (size_t)r->n_names, sizeof *r->names, cmp_name);
    if (!(r->dir = strdup(path)))
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    r->fmt = HS_CORPUS_DIR;
    return HS_OK;
}

static hs_status reader_new(hs_corpus_format fmt, hs_corpus_reader **out, hs_error *err)
{
    *out = NULL;
    if (fmt < HS_CORPUS_AUTO || fmt > HS_CORPUS_DIR)
        return hs_fail(err, HS_E_ARG, "unknown corpus format %d", (int)fmt);
    hs_corpus_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->buf = malloc(HS_CORPUS_MAX_LINE + 1))) {
        free(r);
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    }
    r->fmt = fmt;
    *out = r;
    return HS_OK;
}

hs_status hs_corpus_open_stream(FILE *f, hs_corpus_format fmt, hs_corpus_reader **out,
                                hs_error *err)
{
    if (fmt == HS_CORPUS_DIR)
        return hs_fail(err, HS_E_ARG, "a stream cannot be read as a folder");
    hs_status st = reader_new(fmt, out, err);
    if (!st)
        (*out)->f = f;
    return st;
}

hs_status hs_corpus_open(const char *path, hs_corpus_format fmt, hs_corpus_reader **out,
                         hs_error *err)
{
    *out = NULL;
    if (!strcmp(path, "-"))
        return hs_corpus_open_stream(stdin, fmt == HS_CORPUS_DIR ? HS_CORPUS_AUTO : fmt, out, err);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return hs_fail(err, HS_E_IO, "cannot open '%s': %s", path, strerror(errno));
    int is_dir = S_ISDIR(sb.st_mode);
    if (fmt == HS_CORPUS_DIR && !is_dir)
        return hs_fail(err, HS_E_INPUT, "'%s' is not a folder", path);
    if (is_dir && fmt != HS_CORPUS_AUTO && fmt != HS_CORPUS_DIR)
        return hs_fail(err, HS_E_INPUT, "'%s' is a folder, not a %s file", path,
                       hs_corpus_format_name(fmt));
    hs_corpus_reader *r = NULL;
    hs_status st = reader_new(fmt, &r, err);
    if (st)
        return st;
    if (is_dir) {
        st = open_dir(r, path, err);
    } else if (!(r->f = fopen(path, "rb"))) {
        st = hs_fail(err, HS_E_IO, "cannot open '%s': %s", path, strerror(errno));
    } else {
        r->own = 1;
    }
    if (st) {
        hs_corpus_close(r);
        return st;
    }
    *out = r;
    return HS_OK;
}

/* Reads one line into r->buf (without the newline). Returns 1 with *len (which may exceed
 * HS_CORPUS_MAX_LINE: the rest was consumed, not kept), 0 at the end, -1 on a read error. */
static int read_line(hs_corpus_reader *r, size_t *len)
{
    size_t n = 0;
    int c, any = 0;
    while ((c = getc(r->f)) != EOF) {
        any = 1;
        if (c == '\n')
            break;
        if (n < HS_CORPUS_MAX_LINE)
            r->buf[n] = (char)c;
        if (n <= HS_CORPUS_MAX_LINE) /* n = HS_CORPUS_MAX_LINE + 1 means longer */
            n++;
    }
    if (ferror(r->f))
        return -1;
    if (!any)
        return 0;
    *len = n;
    return 1;
}

static hs_status next_file(hs_corpus_reader *r, hs_corpus_item *it, int *done, hs_error *err)
{
    for (;;) {
        if (r->next >= r->n_names) {
            *done = 1;
            return HS_OK;
        }
        const char *name = r->names[r->next++];
        size_t plen = strlen(r->dir) + strlen(name) + 2;
        char *p = malloc(plen), *data = NULL;
        size_t len = 0;
        if (!p)
            return hs_fail(err, HS_E_NOMEM, "out of memory");
        snprintf(p, plen, "%s/%s", r->dir, name);
        struct stat sb;
        hs_status st = HS_OK;
        memset(it, 0, sizeof *it);
        it->line = r->next;
        it->name = name;
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > HS_CORPUS_MAX_LINE + 2) {
            it->skip = HS_SKIP_LINE_LONG;
            snprintf(it->detail, sizeof it->detail, "%lld bytes, more than %zu",
                     (long long)sb.st_size, HS_CORPUS_MAX_LINE);
            free(p);
            return HS_OK;
        }
        st = hs_read_file(p, HS_CORPUS_MAX_LINE + 2, &data, &len, err);
        free(p);
        if (st)
            return st;
        if (len && data[len - 1] == '\n')
            len--;
        if (len && data[len - 1] == '\r')
            len--;
        if (is_blank(data, len)) {
            r->empty++;
            free(data);
            continue;
        }
        free(r->text);
        r->text = NULL;
        size_t tl = 0, pl = 0;
        it->skip = hs_corpus_parse(data, len, HS_CORPUS_LINES, &r->text, &tl, &r->pair, &pl,
                                   it->detail, sizeof it->detail);
        free(data);
        if (it->skip == HS_SKIP_COUNT)
            return hs_fail(err, HS_E_NOMEM, "out of memory");
        it->text = r->text;
        it->len = tl;
        return HS_OK;
    }
}

hs_status hs_corpus_next(hs_corpus_reader *r, hs_corpus_item *it, int *done, hs_error *err)
{
    *done = 0;
    free(r->text);
    free(r->pair);
    r->text = r->pair = NULL;
    if (r->fmt == HS_CORPUS_DIR)
        return next_file(r, it, done, err);
    for (;;) {
        size_t len = 0;
        int got = read_line(r, &len);
        if (got < 0)
            return hs_fail(err, HS_E_IO, "cannot read line %ld: %s", r->line + 1, strerror(errno));
        if (got == 0) {
            *done = 1;
            return HS_OK;
        }
        r->line++;
        const char *s = r->buf;
        size_t keep = len > HS_CORPUS_MAX_LINE ? HS_CORPUS_MAX_LINE : len;
        if (r->line == 1 && keep >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3)) { /* a BOM */
            s += 3;
            keep -= 3;
            len -= 3;
        }
        if (len <= HS_CORPUS_MAX_LINE && keep && s[keep - 1] == '\r')
            keep--, len--;
        if (len <= HS_CORPUS_MAX_LINE && is_blank(s, keep)) {
            r->empty++;
            continue;
        }
        if (r->fmt == HS_CORPUS_AUTO) {
            size_t i = 0;
            while (i < keep && (s[i] == ' ' || s[i] == '\t'))
                i++;
            r->fmt = i < keep && s[i] == '{' ? HS_CORPUS_JSONL : HS_CORPUS_LINES;
        }
        memset(it, 0, sizeof *it);
        it->line = r->line;
        size_t tl = 0, pl = 0;
        it->skip = hs_corpus_parse(s, len, r->fmt, &r->text, &tl, &r->pair, &pl, it->detail,
                                   sizeof it->detail);
        if (it->skip == HS_SKIP_COUNT)
            return hs_fail(err, HS_E_NOMEM, "out of memory");
        it->text = r->text;
        it->len = tl;
        it->pair = r->pair;
        it->pair_len = pl;
        return HS_OK;
    }
}

hs_corpus_format hs_corpus_reader_format(const hs_corpus_reader *r)
{
    return r->fmt;
}

long hs_corpus_empty(const hs_corpus_reader *r)
{
    return r->empty;
}

void hs_corpus_close(hs_corpus_reader *r)
{
    if (!r)
        return;
    if (r->own && r->f)
        fclose(r->f);
    for (long i = 0; i < r->n_names; i++)
        free(r->names[i]);
    free(r->names);
    free(r->dir);
    free(r->buf);
    free(r->text);
    free(r->pair);
    free(r);
}
