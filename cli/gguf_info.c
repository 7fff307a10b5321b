/* gguf_print_info: a gguf-dump style listing built on the hs_gguf inspection API. */
#include <stdio.h>
#include <string.h>

#include "headscope/gguf.h"

#include "cli.h"
#include "gguf_info.h"

#define SHOW_ELEMS 6
#define SHOW_CHARS 48

/* A string value, quoted, control characters escaped, long ones cut. */
static void print_str(FILE *out, const char *s, size_t len)
{
    fputc('\'', out);
    size_t n = len < SHOW_CHARS ? len : SHOW_CHARS;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\'' || ch == '\\')
            fprintf(out, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f)
            fprintf(out, "\\x%02x", ch);
        else
            fputc(ch, out);
    }
    fputc('\'', out);
    if (n < len)
        fprintf(out, "...(%zu bytes)", len);
}

static void print_value(FILE *out, const hs_gguf_value *v)
{
    switch (v->type) {
    case HS_GGUF_STRING: print_str(out, v->str, v->len); break;
    case HS_GGUF_BOOL: fputs(v->u ? "true" : "false", out); break;
    case HS_GGUF_FLOAT32:
    case HS_GGUF_FLOAT64: fprintf(out, "%.9g", v->f); break;
    case HS_GGUF_INT8:
    case HS_GGUF_INT16:
    case HS_GGUF_INT32:
    case HS_GGUF_INT64: fprintf(out, "%lld", (long long)v->i); break;
    default: fprintf(out, "%llu", (unsigned long long)v->u); break;
    }
}

int gguf_table_types(const hs_gguf *g, char *emb, char *head, size_t cap)
{
    const hs_gguf_tensor *e = hs_gguf_find_tensor(g, "token_embd.weight");
    const hs_gguf_tensor *h = hs_gguf_find_tensor(g, "output.weight");
    if (!e)
        return -1;
    snprintf(emb, cap, "%s", hs_ggml_type_name(e->type));
    snprintf(head, cap, "%s", h ? hs_ggml_type_name(h->type) : "");
    return 0;
}

void gguf_print_info(const hs_gguf *g, FILE *out)
{
    size_t n_kv = hs_gguf_kv_count(g), n_t = hs_gguf_tensor_count(g);
    fprintf(out, "gguf:         version %u, %zu key/value pairs, %zu tensors, alignment %u, "
                 "data at byte %llu of %llu\n",
            hs_gguf_version(g), n_kv, n_t, hs_gguf_alignment(g),
            (unsigned long long)hs_gguf_data_offset(g), (unsigned long long)hs_gguf_size(g));
    fprintf(out, "\nmetadata:\n");
    for (size_t i = 0; i < n_kv; i++) {
        hs_gguf_type t = hs_gguf_kv_type(g, i);
        size_t n = hs_gguf_kv_len(g, i);
        char tname[24];
        if (t == HS_GGUF_ARRAY)
            snprintf(tname, sizeof tname, "[%s]", hs_gguf_type_name(hs_gguf_kv_elem_type(g, i)));
        else
            snprintf(tname, sizeof tname, "%s", hs_gguf_type_name(t));
        fprintf(out, "  %4zu: %-10s | %8zu | %s = ", i + 1, tname, n, cli_shown(hs_gguf_kv_key(g, i)));
        if (t == HS_GGUF_ARRAY)
            fputc('[', out);
        for (size_t j = 0; j < n && j < SHOW_ELEMS; j++) {
            hs_gguf_value v;
            hs_gguf_kv_get(g, i, j, &v);
            if (j)
                fputs(", ", out);
            print_value(out, &v);
        }
        if (t == HS_GGUF_ARRAY)
            fputs(n > SHOW_ELEMS ? ", ...]" : "]", out);
        fputc('\n', out);
    }
    fprintf(out, "\ntensors:\n  %4s  %12s | %-30s | %-6s | %12s | %s\n", "#", "elements",
            "ne", "type", "offset", "name");
    for (size_t i = 0; i < n_t; i++) {
        const hs_gguf_tensor *t = hs_gguf_tensor_at(g, i);
        char ne[64];
        int pos = 0;
        long long count = 1;
        for (uint32_t d = 0; d < 4; d++) {
            if (d < t->n_dims)
                pos += snprintf(ne + pos, sizeof ne - (size_t)pos, "%s%lld", d ? ", " : "",
                                (long long)t->ne[d]);
            count *= t->ne[d];
        }
        const char *tn = hs_ggml_type_name(t->type);
        fprintf(out, "  %4zu: %12lld | %-30s | %-6s | %12llu | %s\n", i + 1, count, ne,
                tn ? tn : "?", (unsigned long long)t->offset, cli_shown(t->name));
    }
}
