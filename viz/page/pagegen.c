/*
 * pagegen: turns the page's real files (viz/page/) into a C source file at build time,
 * so that index.html stays one self-contained file without xxd, `ld -b binary` or #embed.
 *
 *     pagegen TEMPLATE.html OUT.c [NAME]
 *
 * TEMPLATE is copied line by line. A line "@include NAME" is replaced by the file NAME
 * (relative to the template's folder), a line "@data" marks where the page writer puts
 * the embedded report and maps. OUT.c defines two byte arrays, the page before and after
 * that mark:
 *
 *     const unsigned char hs_page_before[]; const size_t hs_page_before_len;
 *     const unsigned char hs_page_after[];  const size_t hs_page_after_len;
 *
 * (NAME_before and NAME_after with a NAME other than hs_page: the patching page).
 *
 * The included files must not hold "</script", "</style" or "<!--" (they would end or
 * break their element), and the page must not name a network address ("http://",
 * "https://", "//" after src= or href=): the page works offline from file://. Any problem
 * is one line on stderr and exit status 1; OUT.c is written through a temporary file and
 * renamed, so a failed run never leaves a partial OUT.c. Plain C99 and stdio only.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct text {
    char *p;
    size_t len, cap;
} text;

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "pagegen: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static int text_add(text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 65536;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p)
            return -1;
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
    return 0;
}

/* The whole file, NUL-terminated, or NULL (errno set). */
static char *read_all(const char *path, size_t *len)
{
    text t = {NULL, 0, 0};
    char chunk[65536];
    size_t got;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (text_add(&t, chunk, got)) {
            fclose(f);
            free(t.p);
            return NULL;
        }
    if (ferror(f) || (!t.p && text_add(&t, "", 0))) {
        fclose(f);
        free(t.p);
        return NULL;
    }
    fclose(f);
    *len = t.len;
    return t.p;
}

static const char *find_ci(const char *hay, size_t len, const char *needle)
{
    size_t nl = strlen(needle);
    for (size_t i = 0; i + nl <= len; i++) {
        size_t k = 0;
        while (k < nl && tolower((unsigned char)hay[i + k]) == tolower((unsigned char)needle[k]))
            k++;
        if (k == nl)
            return hay + i;
    }
    return NULL;
}

static int write_array(FILE *f, const char *name, const text *t)
{
    fprintf(f, "const unsigned char %s[] = {", name);
    for (size_t i = 0; i < t->len; i++)
        fprintf(f, "%s%u,", i % 20 ? "" : "\n    ", (unsigned char)t->p[i]);
    fprintf(f, "\n    0};\nconst size_t %s_len = %lu;\n\n", name, (unsigned long)t->len);
    return ferror(f) ? -1 : 0;
}

int main(int argc, char **argv)
{
    static const char *const banned_included[] = {"</script", "</style", "<!--"};
    static const char *const banned_page[] = {"http://", "https://", "src=\"//", "href=\"//",
                                              "src='//", "href='//"};
    text part[2] = {{NULL, 0, 0}, {NULL, 0, 0}};
    char *tpl = NULL, dir[4096], tmp[4200];
    size_t tpl_len = 0;
    int cur = 0, rc = 1;
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: pagegen TEMPLATE.html OUT.c [NAME]\n");
        return 2;
    }
    const char *slash = strrchr(argv[1], '/');
    size_t dl = slash ? (size_t)(slash - argv[1]) + 1 : 0;
    if (dl >= sizeof dir - 256)
        return fail("'%s': path too long", argv[1]);
    memcpy(dir, argv[1], dl);
    dir[dl] = '\0';
    if (!(tpl = read_all(argv[1], &tpl_len)))
        return fail("cannot read '%s'", argv[1]);
    for (const char *line = tpl; *line;) {
        const char *eol = strchr(line, '\n');
        size_t n = eol ? (size_t)(eol - line) + 1 : strlen(line);
        if (!strncmp(line, "@data", 5) && n <= 7) {
            if (cur == 1) {
                fail("'%s': more than one @data line", argv[1]);
                goto done;
            }
            cur = 1;
        } else if (!strncmp(line, "@include ", 9)) {
            char path[4400], name[256];
            size_t nl = n - 9;
            while (nl && (line[9 + nl - 1] == '\n' || line[9 + nl - 1] == '\r'))
                nl--;
            if (nl == 0 || nl >= sizeof name || memchr(line + 9, '/', nl)) {
                fail("'%s': bad @include line (a file name in the same folder)", argv[1]);
                goto done;
            }
            memcpy(name, line + 9, nl);
            name[nl] = '\0';
            snprintf(path, sizeof path, "%s%s", dir, name);
            size_t len = 0;
            char *inc = read_all(path, &len);
            if (!inc) {
                fail("cannot read '%s', included by '%s'", path, argv[1]);
                goto done;
            }
            for (size_t b = 0; b < sizeof banned_included / sizeof *banned_included; b++)
                if (find_ci(inc, len, banned_included[b])) {
                    fail("'%s' contains '%s', which would break the page", path,
                         banned_included[b]);
                    free(inc);
                    goto done;
                }
            int bad = text_add(&part[cur], inc, len) ||
                      (len && inc[len - 1] != '\n' && text_add(&part[cur], "\n", 1));
            free(inc);
            if (bad) {
                fail("out of memory");
                goto done;
            }
        } else if (text_add(&part[cur], line, n)) {
            fail("out of memory");
            goto done;
        }
        line += n;
    }
    if (cur != 1) {
        fail("'%s' has no @data line", argv[1]);
        goto done;
    }
    for (int p = 0; p < 2; p++)
        for (size_t b = 0; b < sizeof banned_page / sizeof *banned_page; b++)
            if (find_ci(part[p].p, part[p].len, banned_page[b])) {
                fail("the page names a network address ('%s'); it must work offline",
                     banned_page[b]);
                goto done;
            }
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        fail("cannot write '%s'", tmp);
        goto done;
    }
    const char *name = argc == 4 ? argv[3] : "hs_page";
    char before[200], after[200];
    snprintf(before, sizeof before, "%.100s_before", name);
    snprintf(after, sizeof after, "%.100s_after", name);
    fprintf(f, "/* Generated by viz/page/pagegen.c from %s; do not edit. */\n"
               "#include <stddef.h>\n\n"
               "extern const unsigned char %s[], %s[];\n"
               "extern const size_t %s_len, %s_len;\n\n",
            argv[1], before, after, before, after);
    int bad = write_array(f, before, &part[0]) || write_array(f, after, &part[1]);
    if (fclose(f) || bad) {
        remove(tmp);
        fail("cannot write '%s'", tmp);
        goto done;
    }
    if (rename(tmp, argv[2])) {
        remove(tmp);
        fail("cannot rename '%s' to '%s'", tmp, argv[2]);
        goto done;
    }
    rc = 0;
done:
    free(part[0].p);
    free(part[1].p);
    free(tpl);
    return rc;
}
