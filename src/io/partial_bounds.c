/* How many JSON values a partial.json may hold, from the sizes of the model it names
 * (aggregate.model.n_layer, n_head, n_ctx), read by a scan that allocates nothing, so a
 * hostile partial (two million heads, a 3,000 x 3,000 sim_sum beside a model of 8 heads) is
 * refused before a parse tree of 64 bytes a number is built for it. */
#include <stdlib.h>
#include <string.h>

#include "headscope/corpus.h"
#include "core/core.h"
#include "io/io_internal.h"

/* Whitespace skipped from p (below end). */
static const char *ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* Past the string opening at p (a '"'), or NULL when it does not end. */
static const char *skip_string(const char *p, const char *end)
{
    for (p++; p < end; p++) {
        if (*p == '\\')
            p++;
        else if (*p == '"')
            return p + 1;
    }
    return NULL;
}

/* Past the value at p (strings, brackets balanced by depth only), or NULL. */
static const char *skip_value(const char *p, const char *end)
{
    if (p < end && *p == '"')
        return skip_string(p, end);
    long depth = 0;
    for (; p < end; p++) {
        if (*p == '"') {
            if (!(p = skip_string(p, end)))
                return NULL;
            p--;
        } else if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            if (depth == 0)
                return p;
            if (--depth == 0)
                return p + 1;
        } else if (depth == 0 && (*p == ',' || *p == ' ' || *p == '\n' || *p == '\r' ||
                                  *p == '\t')) {
            return p;
        }
    }
    return depth ? NULL : p;
}

/* The value of key in the object at p, or NULL (not an object, no such key, malformed).
 * Keys are compared as written (the keys looked for hold no escapes). */
static const char *member(const char *p, const char *end, const char *key)
{
    size_t kl = strlen(key);
    p = ws(p, end);
    if (p >= end || *p != '{')
        return NULL;
    p = ws(p + 1, end);
    while (p < end && *p == '"') {
        const char *k = p + 1, *after = skip_string(p, end);
        if (!after)
            return NULL;
        int match = (size_t)(after - 1 - k) == kl && !memcmp(k, key, kl);
        p = ws(after, end);
        if (p >= end || *p != ':')
            return NULL;
        p = ws(p + 1, end);
        if (match)
            return p;
        if (!(p = skip_value(p, end)))
            return NULL;
        p = ws(p, end);
        if (p >= end || *p != ',')
            return NULL;
        p = ws(p + 1, end);
    }
    return NULL;
}

/* A whole number in [1, hi] at p, else 0. */
static long small_number(const char *p, const char *end, long hi)
{
    long v = 0;
    const char *s = p;
    for (; p && p < end && *p >= '0' && *p <= '9' && p - s < 12; p++)
        v = v * 10 + (*p - '0');
    return p && p > s && v <= hi ? v : 0;
}

size_t hs_corpus_partial_max_values(const char *json, size_t len)
{
    const char *end = json + len;
    const char *ag = member(json, end, "aggregate");
    const char *mo = ag ? member(ag, end, "model") : NULL;
    if (!mo)
        return 65536; /* no model named: the parse refuses it, or it holds no aggregate */
    long layers = small_number(member(mo, end, "n_layer"), end, 1 << 16);
    long heads = layers * small_number(member(mo, end, "n_head"), end, 1 << 16);
    long ctx = small_number(member(mo, end, "n_ctx"), end, 1 << 20);
    if (heads < 1 || heads > 1 << 16)
        return 65536; /* refused by name once parsed */
    /* per head: its index, two probe scores, HS_CQ_COUNT statistics of 5 numbers (6 values
       each), a sim_sum row (heads + 1); the probe's ids (within the context); 65,536 for the
       rest (options, counts, the model's description and its files' hashes) */
    size_t h = (size_t)heads;
    return 65536 + (size_t)ctx + h * (4 + 6 * (size_t)HS_CQ_COUNT + h);
}
