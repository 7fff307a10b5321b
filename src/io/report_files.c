/* The top-level "files" list of a report.json, found without parsing the report (see
 * internal.h): a report holds n x n matrices (rollout: 14 MB of text at n = 1024, a million
 * cJSON nodes), and a rerun of analyze only needs the names its predecessor wrote. The
 * scan reads the text a byte at a time, tracking strings and nesting, so a "files" key
 * inside an object (the model's) or inside a string is not taken; only the list's own text
 * is kept, then parsed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "io/io_internal.h"

typedef struct files_scan {
    int depth, in_str, esc, expect_key, key_len, after_key, capturing, done;
    char key[8];
    char *val;
    size_t len, cap;
    int oom;
} files_scan;

static void keep(files_scan *s, char ch)
{
    if (s->len + 1 > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        char *v = realloc(s->val, cap);
        if (!v) {
            s->oom = s->done = 1;
            return;
        }
        s->val = v;
        s->cap = cap;
    }
    s->val[s->len++] = ch;
}

/* One byte of the report. after_key: 1 after the key "files" at the top level, 2 after its
 * colon; the value's first byte then starts the list ('[') or ends the scan (anything
 * else: no list). The scan ends with the list, with the top-level object, or at once when
 * the text does not start with an object. */
static void scan_byte(files_scan *s, char ch)
{
    if (s->capturing)
        keep(s, ch);
    if (s->in_str) {
        if (s->esc) {
            s->esc = 0;
        } else if (ch == '\\') {
            s->esc = 1;
            s->key_len = -1; /* an escaped key is not taken for "files" */
        } else if (ch == '"') {
            s->in_str = 0;
            if (s->key_len == 5 && !memcmp(s->key, "files", 5))
                s->after_key = 1;
            s->key_len = -1;
        } else if (s->key_len >= 0) {
            if (s->key_len < (int)sizeof s->key)
                s->key[s->key_len] = ch;
            s->key_len++;
        }
        return;
    }
    if ((unsigned char)ch <= ' ') /* whitespace, as cJSON skips it */
        return;
    if (s->depth == 0 && ch != '{') { /* the root is not an object (or has ended) */
        s->done = 1;
        return;
    }
    if (s->after_key == 2 && !s->capturing) {
        if (ch != '[') {
            s->done = 1;
            return;
        }
        s->capturing = 1;
        keep(s, ch);
    }
    if (ch == '"') {
        s->in_str = 1;
        s->key_len = s->depth == 1 && s->expect_key ? 0 : -1;
        s->expect_key = 0;
    } else if (ch == '{' || ch == '[') {
        s->depth++;
        s->expect_key = ch == '{' && s->depth == 1;
    } else if (ch == '}' || ch == ']') {
        if (--s->depth <= 0)
            s->done = 1;
    } else if (ch == ',' && s->depth == 1) {
        s->expect_key = 1;
        s->after_key = 0;
    } else if (ch == ':' && s->depth == 1 && s->after_key == 1) {
        s->after_key = 2;
        return;
    }
    if (s->after_key == 1)
        s->after_key = 0; /* no colon after the key: not JSON, and not taken */
    if (s->capturing && s->depth == 1)
        s->done = 1;
}

static cJSON *scan_result(files_scan *s)
{
    cJSON *files = !s->oom && s->capturing && s->depth == 1
                       ? cJSON_ParseWithLength(s->val, s->len)
                       : NULL;
    free(s->val);
    if (files && !cJSON_IsArray(files)) {
        cJSON_Delete(files);
        files = NULL;
    }
    return files;
}

cJSON *hs_report_files_text(const char *text, size_t len)
{
    files_scan s = {.key_len = -1};
    for (size_t i = 0; i < len && !s.done; i++)
        scan_byte(&s, text[i]);
    return scan_result(&s);
}

cJSON *hs_report_files_read(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    files_scan s = {.key_len = -1};
    char buf[1 << 16];
    size_t got;
    while (!s.done && (got = fread(buf, 1, sizeof buf, f)) > 0)
        for (size_t i = 0; i < got && !s.done; i++)
            scan_byte(&s, buf[i]);
    fclose(f);
    return scan_result(&s);
}
