/* The option table (options.c) in words: the range a message states, the default, the
 * help lines of `headscope analyze --help` (and so the man page) and the description the
 * Python package writes its docstring from (hs_analyze_options_json). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "headscope/report.h"
#include "core/core.h"
#include "pipeline/options.h"

void hs_option_number_text(double v, char *buf, size_t cap)
{
    if (v == floor(v) && fabs(v) < 1e17) {
        snprintf(buf, cap, "%.0f", v);
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

/* A bound as people write it: 2^20, 10^6 for the large round ones, else as
 * hs_option_number_text writes it. */
static void bound_text(double v, char *buf, size_t cap)
{
    int e;
    if (v >= 65536 && v == floor(v)) {
        if (frexp(v, &e) == 0.5) {
            snprintf(buf, cap, "2^%d", e - 1);
            return;
        }
        double k = floor(log10(v) + 0.5);
        if (pow(10, k) == v) {
            snprintf(buf, cap, "10^%.0f", k);
            return;
        }
    }
    hs_option_number_text(v, buf, cap);
}

const char *hs_option_range(const hs_option *o, char *buf, size_t cap)
{
    char lo[32], hi[32];
    size_t k = 0;
    buf[0] = 0;
    switch (o->type) {
    case HS_OPT_BOOL:
        snprintf(buf, cap, "true or false");
        break;
    case HS_OPT_INT:
    case HS_OPT_SEED:
    case HS_OPT_NUM: {
        bound_text(o->lo, lo, sizeof lo);
        /* a whole-number range ending one below a power of two: [0, 2^31) */
        int open_hi = o->type != HS_OPT_NUM && o->hi >= 65535 && frexp(o->hi + 1, &(int){0}) == 0.5;
        bound_text(open_hi ? o->hi + 1 : o->hi, hi, sizeof hi);
        snprintf(buf, cap, "a %snumber in %c%s, %s%c", o->type == HS_OPT_NUM ? "" : "whole ",
                 o->lo_open ? '(' : '[', lo, hi, open_hi ? ')' : ']');
        break;
    }
    case HS_OPT_ENUM:
        for (int i = 0; o->names[i] && k < cap; i++)
            k += (size_t)snprintf(buf + k, cap - k, "%s%s",
                                  i == 0 ? "" : o->names[i + 1] ? ", " : " or ", o->names[i]);
        break;
    case HS_OPT_TEXT:
    case HS_OPT_LAYERS:
    case HS_OPT_SPEC:
        snprintf(buf, cap, "%s", o->valid);
        break;
    }
    return buf;
}

const char *hs_option_default(const hs_option *o, int json, char *buf, size_t cap)
{
    buf[0] = 0;
    switch (o->type) {
    case HS_OPT_BOOL:
        snprintf(buf, cap, "%s", o->def && !(json && o->json_off) ? "true" : "false");
        break;
    case HS_OPT_INT:
    case HS_OPT_SEED:
    case HS_OPT_NUM:
        bound_text(o->def, buf, cap);
        break;
    case HS_OPT_ENUM:
        for (int i = 0; o->names[i]; i++)
            if (o->values[i] == (int)o->def)
                snprintf(buf, cap, "%s", o->names[i]);
        break;
    default:
        snprintf(buf, cap, "%s", o->def_text ? o->def_text : "none");
        break;
    }
    return buf;
}

/* The help sentence of a row, with its default and range, or the head types. */
static void help_sentence(const hs_option *o, char *buf, size_t cap)
{
    char d[64], r[96];
    size_t k = (size_t)snprintf(buf, cap, "%s", o->help);
    switch (o->type) {
    case HS_OPT_BOOL:
        break;
    case HS_OPT_INT:
    case HS_OPT_SEED:
    case HS_OPT_NUM: /* "a number in [0, 2]": "in [0, 2]" */
        hs_option_range(o, r, sizeof r);
        snprintf(buf + k, cap - k, "; default %s, %s", hs_option_default(o, 0, d, sizeof d),
                 strstr(r, " in ") + 1);
        break;
    case HS_OPT_SPEC:
        if (o->aux_size) { /* the label thresholds: the head types and their defaults */
            hs_analyze_opts ao;
            hs_analyze_opts_default(&ao);
            k += (size_t)snprintf(buf + k, cap - k, " (types:");
            for (int t = 0; t < HS_LABEL_COUNT && k < cap; t++)
                k += (size_t)snprintf(buf + k, cap - k, " %s %g,", hs_label_name(t),
                                      ao.label_thresholds[t]);
            if (k < cap)
                snprintf(buf + k - 1, cap - k + 1, "; sink %g; each X in [0, 1])",
                         ao.sink_threshold);
            break;
        }
        /* fall through */
    default:
        if (o->type == HS_OPT_ENUM || o->def_text)
            snprintf(buf + k, cap - k, "; default %s", hs_option_default(o, 0, d, sizeof d));
        break;
    }
}

/* Appends "      --NAME META  help..." wrapped at 92 columns, continued at column 29. */
static size_t help_lines(const hs_option *o, char *out, size_t k, size_t cap)
{
    enum { COL = 29, WIDTH = 92 };
    char text[1024];
    help_sentence(o, text, sizeof text);
    for (char *c = strstr(text, "in ["); c && (c = strchr(c, ',')); c++)
        if (c[1] == ' ') /* a range stays on one line: "[0, 2]" */
            c[1] = '\x01';
    int w = snprintf(out + k, cap - k, "      --%s%s%s", o->cli, o->metavar ? " " : "",
                     o->metavar ? o->metavar : "");
    k += (size_t)w;
    int col = w < COL - 2 ? COL : w + 2;
    k += (size_t)snprintf(out + k, cap - k, "%*s", col - w, "");
    const char *p = text;
    while (*p) {
        size_t room = (size_t)(WIDTH - col), n = strlen(p);
        if (n > room) { /* break at the last space that fits */
            n = room;
            while (n > 0 && p[n] != ' ')
                n--;
            if (n == 0)
                n = strcspn(p, " ");
        }
        for (size_t i = 0; i < n; i++)
            if (k + 2 < cap)
                out[k++] = p[i] == '\x01' ? ' ' : p[i];
        if (k + 1 < cap)
            out[k++] = '\n';
        out[k] = 0;
        p += n;
        while (*p == ' ')
            p++;
        if (*p)
            k += (size_t)snprintf(out + k, cap - k, "%*s", COL, "");
        col = COL;
    }
    return k;
}

char *hs_options_help(void)
{
    size_t cap = (size_t)hs_option_count * 1200;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t k = 0;
    out[0] = 0;
    for (int i = 0; i < hs_option_count; i++)
        if (hs_options[i].cli)
            k = help_lines(&hs_options[i], out, k, cap);
    return out;
}

static const char *const type_names[] = {
    [HS_OPT_BOOL] = "bool",   [HS_OPT_INT] = "int",     [HS_OPT_SEED] = "int",
    [HS_OPT_NUM] = "number",  [HS_OPT_ENUM] = "choice", [HS_OPT_TEXT] = "str",
    [HS_OPT_LAYERS] = "list", [HS_OPT_SPEC] = "str"};

char *hs_analyze_options_json(void)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < hs_option_count; i++) {
        const hs_option *o = &hs_options[i];
        if (!o->json)
            continue;
        char d[64], r[96], help[1024];
        help_sentence(o, help, sizeof help);
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddItemToArray(arr, e) || !cJSON_AddStringToObject(e, "key", o->json) ||
            !(o->cli ? cJSON_AddStringToObject(e, "option", o->cli)
                     : cJSON_AddNullToObject(e, "option")) ||
            !cJSON_AddStringToObject(e, "type", type_names[o->type]) ||
            !cJSON_AddStringToObject(e, "valid", hs_option_range(o, r, sizeof r)) ||
            !cJSON_AddStringToObject(e, "default", hs_option_default(o, 1, d, sizeof d)) ||
            !cJSON_AddStringToObject(e, "help", help)) {
            cJSON_Delete(arr);
            arr = NULL;
        }
    }
    char *s = arr ? cJSON_PrintUnformatted(arr) : NULL;
    cJSON_Delete(arr);
    return s;
}
