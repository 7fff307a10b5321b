/* JSON parsing with a bound on what the parse may build (see internal.h). */
#include <cJSON.h>

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

hs_status hs_json_parse(const char *text, size_t len, size_t max_values, const char *what,
                        cJSON **out, hs_error *err)
{
    *out = NULL;
    size_t values = hs_json_count_values(text, len);
    if (values > max_values)
        return hs_fail(err, HS_E_FORMAT, "%s holds about %zu JSON values, more than the %zu "
                       "this file can need (refused before parsing)", what, values, max_values);
    *out = cJSON_ParseWithLength(text, len);
    if (!*out) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= text && at <= text + len ? (size_t)(at - text) : 0;
        return hs_fail(err, HS_E_FORMAT, "%s is not valid JSON (near byte %zu)", what, off);
    }
    return HS_OK;
}
