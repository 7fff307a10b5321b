/* JSON parsing with a bound on what the parse may build (see internal.h). */
#include <cJSON.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"

size_t hs_json_count_values(const char *text, size_t len)
{
    size_t values = 1;
    int in_string = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (in_string) {
            if (c == '\\')
                i++; /* the escaped character cannot end the string */
            else if (c == '"')
                in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == ',' || c == '[' || c == '{') {
            values++;
        }
    }
    return values;
}

cJSON *hs_json_parse_strict(const char *text, size_t len, char *why, size_t cap)
{
    const char *nul = memchr(text, '\0', len), *end = NULL;
    if (nul) {
        snprintf(why, cap, "a NUL byte at byte %zu", (size_t)(nul - text));
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= text && at <= text + len ? (size_t)(at - text) : 0;
        snprintf(why, cap, "near byte %zu", off);
        return NULL;
    }
    size_t i = end && end >= text && end <= text + len ? (size_t)(end - text) : len;
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
        i++;
    if (i < len) {
        snprintf(why, cap, "text after the end of the JSON value at byte %zu", i);
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

hs_status hs_json_parse(const char *text, size_t len, size_t max_values, const char *what,
                        cJSON **out, hs_error *err)
{
    char why[96];
    *out = NULL;
    size_t values = hs_json_count_values(text, len);
    if (values > max_values)
        return hs_fail(err, HS_E_FORMAT, "%s holds about %zu JSON values, more than the %zu "
                       "this file can need (refused before parsing)", what, values, max_values);
    if (!(*out = hs_json_parse_strict(text, len, why, sizeof why)))
        return hs_fail(err, HS_E_FORMAT, "%s is not valid JSON (%s)", what, why);
    return HS_OK;
}
