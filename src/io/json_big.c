/* Large arrays of numbers in a report without a cJSON node per number (see internal.h):
 * each is a raw node holding a marker, "\x01" index "\x02", printed with the rest of the
 * tree; the printed text is then written out piece by piece, every marker replaced by its
 * array, each number formatted as cJSON formats it (cJSON escapes every byte below 0x20
 * inside strings, so the markers' bytes appear nowhere else in the text). */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "core/core.h"
#include "io/io_internal.h"

struct hs_json_big {
    int n, cap;
    struct big_array {
        const double *d; /* the values, or */
        const float *f;  /* these */
        int rows, cols, flat;
    } *v;
};

hs_json_big *hs_json_big_new(void)
{
    return calloc(1, sizeof(hs_json_big));
}

void hs_json_big_free(hs_json_big *b)
{
    if (!b)
        return;
    free(b->v);
    free(b);
}

static cJSON *add(hs_json_big *b, const double *d, const float *f, int rows, int cols, int flat)
{
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 8;
        struct big_array *v = realloc(b->v, (size_t)cap * sizeof *v);
        if (!v)
            return NULL;
        b->v = v;
        b->cap = cap;
    }
    char marker[24];
    snprintf(marker, sizeof marker, "\x01%d\x02", b->n);
    cJSON *node = cJSON_CreateRaw(marker);
    if (node)
        b->v[b->n++] = (struct big_array){d, f, rows, cols, flat};
    return node;
}

cJSON *hs_json_big_matrix(hs_json_big *b, const double *m, int rows, int cols)
{
    return add(b, m, NULL, rows, cols, 0);
}

cJSON *hs_json_big_matrix_f(hs_json_big *b, const float *m, int rows, int cols)
{
    return add(b, NULL, m, rows, cols, 0);
}

cJSON *hs_json_big_vector(hs_json_big *b, const double *v, int n)
{
    return add(b, v, NULL, 1, n, 1);
}

/* v as cJSON 1.7 prints a number: null for NaN and infinities, an integer as %d, else the
 * shortest of %1.15g and %1.17g that reads back as v (within cJSON's tolerance). */
static int format_number(double v, char *buf)
{
    if (!isfinite(v))
        return sprintf(buf, "null");
    int vi = v >= (double)INT_MAX ? INT_MAX : v <= (double)INT_MIN ? INT_MIN : (int)v;
    if (v == (double)vi)
        return sprintf(buf, "%d", vi);
    int len = sprintf(buf, "%1.15g", v);
    double back = strtod(buf, NULL), big = fabs(back) > fabs(v) ? fabs(back) : fabs(v);
    if (!(fabs(back - v) <= big * DBL_EPSILON))
        len = sprintf(buf, "%1.17g", v);
    return len;
}

/* Output through the sink in blocks of OUT_BLOCK bytes. */
#define OUT_BLOCK 65536

typedef struct out {
    hs_json_sink sink;
    void *ctx;
    hs_error *err;
    hs_status st;
    size_t len;
    char buf[OUT_BLOCK];
} out;

static void flush(out *o)
{
    if (o->len && !o->st)
        o->st = o->sink(o->ctx, o->buf, o->len, o->err);
    o->len = 0;
}

static void put(out *o, const char *s, size_t len)
{
    if (o->len + len > OUT_BLOCK)
        flush(o);
    if (len > OUT_BLOCK) { /* a long stretch of the printed text: as it is */
        if (!o->st)
            o->st = o->sink(o->ctx, s, len, o->err);
        return;
    }
    memcpy(o->buf + o->len, s, len);
    o->len += len;
}

static void put_array(out *o, const struct big_array *a, int pretty)
{
    const char *sep = pretty ? ", " : ",";
    size_t sl = strlen(sep);
    char num[40];
    if (!a->flat)
        put(o, "[", 1);
    for (int i = 0; i < a->rows && !o->st; i++) {
        if (i)
            put(o, sep, sl);
        put(o, "[", 1);
        for (int j = 0; j < a->cols; j++) {
            size_t k = (size_t)i * (size_t)a->cols + (size_t)j;
            if (j)
                put(o, sep, sl);
            put(o, num, (size_t)format_number(a->d ? a->d[k] : (double)a->f[k], num));
        }
        put(o, "]", 1);
    }
    if (!a->flat)
        put(o, "]", 1);
}

hs_status hs_json_big_emit(const char *text, const hs_json_big *b, int pretty, hs_json_sink sink,
                           void *ctx, hs_error *err)
{
    out *o = malloc(sizeof *o);
    if (!o)
        return hs_fail(err, HS_E_NOMEM, "out of memory writing the report");
    *o = (out){.sink = sink, .ctx = ctx, .err = err};
    const char *p = text;
    while (!o->st) {
        const char *mk = strchr(p, '\x01');
        if (!mk) {
            put(o, p, strlen(p));
            break;
        }
        put(o, p, (size_t)(mk - p));
        char *end = NULL;
        long k = strtol(mk + 1, &end, 10);
        if (!b || *end != '\x02' || k < 0 || k >= b->n) {
            o->st = hs_fail(err, HS_E_ARG, "report: a large array's marker has no array");
            break;
        }
        put_array(o, &b->v[k], pretty);
        p = end + 1;
    }
    flush(o);
    hs_status st = o->st;
    free(o);
    return st;
}

static hs_status to_file(void *ctx, const char *s, size_t len, hs_error *err)
{
    if (fwrite(s, 1, len, (FILE *)ctx) != len)
        return hs_fail(err, HS_E_IO, "cannot write the report");
    return HS_OK;
}

hs_status hs_json_big_write(const char *text, const hs_json_big *b, int pretty, FILE *f,
                            hs_error *err)
{
    return hs_json_big_emit(text, b, pretty, to_file, f, err);
}

typedef struct grow {
    char *s;
    size_t len, cap;
} grow;

static hs_status to_string(void *ctx, const char *s, size_t len, hs_error *err)
{
    grow *g = ctx;
    if (g->len + len + 1 > g->cap) {
        size_t cap = g->cap ? g->cap : 4096;
        while (cap < g->len + len + 1)
            cap += cap / 2;
        char *t = realloc(g->s, cap);
        if (!t)
            return hs_fail(err, HS_E_NOMEM, "out of memory for the report");
        g->s = t;
        g->cap = cap;
    }
    memcpy(g->s + g->len, s, len);
    g->len += len;
    g->s[g->len] = '\0';
    return HS_OK;
}

char *hs_json_big_string(const char *text, const hs_json_big *b, int pretty)
{
    grow g = {0};
    if (hs_json_big_emit(text, b, pretty, to_string, &g, NULL) != HS_OK) {
        free(g.s);
        return NULL;
    }
    return g.s ? g.s : strdup("");
}
