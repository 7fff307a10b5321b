/* headscope patch's index.html: patching.json and the patching page's own HTML, CSS and
 * JavaScript (viz/page/patch.html, compiled in by viz/page/pagegen.c) in one file. */
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "core/core.h"
#include "headscope/html.h"

extern const unsigned char hs_patch_page_before[], hs_patch_page_after[];
extern const size_t hs_patch_page_before_len, hs_patch_page_after_len;

#define OPEN_TAG "<script type=\"application/json\" id=\"hs-patching\">"
#define CLOSE_TAG "</script>\n"

/* json with "</" as "<\/" and "<!--" as "\u003c!--" (escapes inside JSON strings, where
 * alone they can occur), so that it cannot end its script element; NULL when out of
 * memory. */
static char *escaped(const char *json, size_t *len)
{
    size_t n = strlen(json), extra = 0;
    for (size_t i = 0; i < n; i++)
        if (json[i] == '<')
            extra += json[i + 1] == '/' ? 1 : !strncmp(json + i + 1, "!--", 3) ? 5 : 0;
    char *out = malloc(n + extra + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (json[i] == '<' && json[i + 1] == '/') {
            memcpy(o, "<\\/", 3);
            o += 3;
            i++;
        } else if (json[i] == '<' && !strncmp(json + i + 1, "!--", 3)) {
            memcpy(o, "\\u003c", 6);
            o += 6;
        } else {
            *o++ = json[i];
        }
    }
    *o = '\0';
    *len = (size_t)(o - out);
    return out;
}

static hs_status check(const char *json, hs_error *err)
{
    if (!json)
        return hs_fail(err, HS_E_ARG, "patching page: patching_json is NULL");
    cJSON *j = cJSON_Parse(json);
    const char *schema = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "schema"));
    int ok = cJSON_IsObject(j) && schema && !strncmp(schema, "headscope.patching/", 19);
    int parsed = j != NULL;
    cJSON_Delete(j);
    if (!ok)
        return hs_fail(err, HS_E_FORMAT, "patching page: %s", parsed
                       ? "the report has no \"schema\" headscope.patching/..."
                       : "the report is not JSON");
    return HS_OK;
}

hs_status hs_html_patching_encode(const char *patching_json, char **out, size_t *len,
                                  hs_error *err)
{
    if (!out || !len)
        return hs_fail(err, HS_E_ARG, "patching page: %s is NULL", !out ? "out" : "len");
    *out = NULL;
    *len = 0;
    hs_status st = check(patching_json, err);
    if (st)
        return st;
    size_t jl = 0, total;
    char *j = escaped(patching_json, &jl);
    if (!j)
        return hs_fail(err, HS_E_NOMEM, "patching page: out of memory");
    total = hs_patch_page_before_len + strlen(OPEN_TAG) + jl + strlen(CLOSE_TAG) +
            hs_patch_page_after_len;
    char *p = malloc(total + 1);
    if (!p) {
        free(j);
        return hs_fail(err, HS_E_NOMEM, "patching page: out of memory");
    }
    size_t at = 0;
    const void *parts[5] = {hs_patch_page_before, OPEN_TAG, j, CLOSE_TAG, hs_patch_page_after};
    size_t sizes[5] = {hs_patch_page_before_len, strlen(OPEN_TAG), jl, strlen(CLOSE_TAG),
                       hs_patch_page_after_len};
    for (int i = 0; i < 5; i++) {
        memcpy(p + at, parts[i], sizes[i]);
        at += sizes[i];
    }
    p[at] = '\0';
    free(j);
    *out = p;
    *len = at;
    return HS_OK;
}

hs_status hs_html_patching_write(const char *path, const char *patching_json, hs_error *err)
{
    char *page = NULL;
    size_t len = 0;
    if (!path)
        return hs_fail(err, HS_E_ARG, "patching page: path is NULL");
    hs_status st = hs_html_patching_encode(patching_json, &page, &len, err);
    if (st)
        return st;
    st = hs_file_write_atomic(path, page, len, err);
    free(page);
    return st;
}
