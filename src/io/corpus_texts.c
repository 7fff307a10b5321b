/* What merge and --resume read of a corpus run's texts.jsonl besides partial.json: each
 * line's "index" and source "line" (the shards' texts merged in source order) and the
 * agreement of a checkpoint's texts.jsonl with its partial (docs/corpus.md). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "core/core.h"
#include "headscope/corpus.h"
#include "io/io_internal.h"

/* A whole number in [0, 2^50] of decimal digits followed by sep at p into *v; what follows
 * sep, or NULL. */
static const char *number_then(const char *p, char sep, long *v)
{
    const char *s = p;
    long x = 0;
    for (; *p >= '0' && *p <= '9' && p - s < 16; p++)
        x = x * 10 + (*p - '0');
    if (p == s || *p != sep || x > 1L << 50)
        return NULL;
    *v = x;
    return p + 1;
}

hs_status hs_texts_next(hs_texts_reader *t, hs_error *err)
{
    errno = 0;
    ssize_t n = getline(&t->buf, &t->cap, t->f);
    if (n < 0) {
        if (ferror(t->f))
            return hs_fail(err, HS_E_IO, "cannot read '%s': %s", t->name, strerror(errno));
        t->eof = 1;
        return HS_OK;
    }
    /* {"index":I,"line":L, with I and L whole numbers in [0, 2^50] (no sscanf: its %ld past
       a long is undefined) */
    const char *p = t->buf;
    long index = -1, before = t->line;
    t->line = -1;
    if (!strncmp(p, "{\"index\":", 9))
        p = number_then(p + 9, ',', &index);
    if (p && !strncmp(p, "\"line\":", 7))
        p = number_then(p + 7, ',', &t->line);
    if (!p || index < 0 || t->line < 0 || t->buf[n - 1] != '\n' ||
        memchr(t->buf, 0, (size_t)n))
        return hs_fail(err, HS_E_INPUT, "'%s' line %ld is not a texts.jsonl line", t->name,
                       t->count + 1);
    /* a shard's texts are its records' in corpus order, one a source line */
    if (t->count > 0 && t->line <= before)
        return hs_fail(err, HS_E_INPUT, "'%s' line %ld is of source line %ld, not after the "
                       "line before's %ld", t->name, t->count + 1, t->line, before);
    t->count++;
    return HS_OK;
}

hs_status hs_texts_merge(hs_texts_reader *const *parts, int n, FILE *out, hs_error *err)
{
    const hs_texts_reader *last = NULL;
    long last_line = -1;
    for (long index = 0;; index++) {
        hs_texts_reader *best = NULL;
        for (int i = 0; i < n; i++)
            if (!parts[i]->eof && (!best || parts[i]->line < best->line))
                best = parts[i];
        if (!best)
            break;
        if (last && best->line <= last_line) /* each record is in one shard */
            return hs_fail(err, HS_E_INPUT, "source line %ld is in both '%s' and '%s'",
                           best->line, last->name, best->name);
        last = best;
        last_line = best->line;
        const char *rest = strstr(best->buf, ",\"line\":");
        if (fprintf(out, "{\"index\":%ld%s", index, rest) < 0)
            return hs_fail(err, HS_E_IO, "cannot write texts.jsonl: %s", strerror(errno));
        hs_status st = hs_texts_next(best, err);
        if (st != HS_OK)
            return st;
    }
    for (int i = 0; i < n; i++)
        if (parts[i]->count != parts[i]->n_texts)
            return hs_fail(err, HS_E_INPUT, "'%s' has %ld texts, its partial.json %ld",
                           parts[i]->name, parts[i]->count, parts[i]->n_texts);
    return HS_OK;
}

hs_status hs_corpus_resume_agree(const hs_corpus_partial *p, long n_texts, const char *path,
                                 long lines, hs_error *err)
{
    const hs_corpus_checkpoint *cp = &p->cp;
    if (lines < 0)
        return hs_fail(err, HS_E_INPUT, "the checkpoint '%s' disagrees with itself: its "
                       "texts.jsonl ends inside a line at byte %ld", path, cp->texts_bytes);
    if (p->info.n_selected != cp->position)
        return hs_fail(err, HS_E_INPUT, "the checkpoint '%s' disagrees with itself: its "
                       "position is %ld records, its source's selected records %ld", path,
                       cp->position, p->info.n_selected);
    if (lines != n_texts || n_texts > cp->position)
        return hs_fail(err, HS_E_INPUT, "the checkpoint '%s' disagrees with itself: its "
                       "texts.jsonl holds %ld texts (%ld bytes), its aggregate %ld, at "
                       "position %ld", path, lines, cp->texts_bytes, n_texts, cp->position);
    return HS_OK;
}
