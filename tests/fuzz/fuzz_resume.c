/* libFuzzer harness for what merge and --resume read besides partial.json's own fields: a
 * checkpoint's temporary texts.jsonl (hs_out_resume's copy of its first texts_bytes bytes,
 * hs_corpus_resume_agree's agreement with the checkpoint) and the shards' texts.jsonl
 * (hs_texts_next's index and source line numbers, hs_texts_merge). The input is files
 * separated by a line "%%": a partial.json, then up to four texts.jsonl. When the partial
 * is a checkpoint, the first texts.jsonl is its temporary file, resumed as the CLI does;
 * whatever the partial, the texts.jsonl are merged as shards 1, 2, ... (shard 1 holding
 * the partial's n_texts when it reads, each other as many texts as it has newlines).
 *
 * Every malformed input must be refused with HS_E_INPUT (HS_E_NOMEM) and a message. A
 * resume that agrees must have copied exactly the checkpoint's bytes, holding n_texts whole
 * lines; a merge that succeeds must have written every text once, numbered 0, 1, ... and in
 * increasing source line.
 *
 * Build and run: `make fuzz` (clang -fsanitize=fuzzer,address,undefined), seed corpus
 * fixtures/fuzz-resume/. Replay (plain main, -DHS_FUZZ_REPLAY_MAIN): `make fuzz-replay`.
 * The files are written to one temporary folder per process. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "headscope/corpus.h"
#include "io/io_internal.h"
#include "parts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TEXTS 4

static char dir[] = "/tmp/hs-fuzz-resume-XXXXXX";
static int have_dir;

static void die(const char *msg)
{
    fprintf(stderr, "fuzz_resume: %s\n", msg);
    abort();
}

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

static void cleanup(void)
{
    if (have_dir) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "fuzz_resume: cannot remove %s\n", dir);
        have_dir = 0;
    }
}

static void put(const char *name, const uint8_t *d, size_t n)
{
    char p[512];
    path_of(p, sizeof p, name);
    unlink(p);
    FILE *f = fopen(p, "wb");
    if (!f || (n && fwrite(d, 1, n, f) != n) || fclose(f) != 0)
        die("cannot write the harness's own file");
}

/* The whole file name, or NULL (*len bytes). */
static char *slurp(const char *name, size_t *len)
{
    char p[512];
    path_of(p, sizeof p, name);
    FILE *f = fopen(p, "rb");
    if (!f)
        return NULL;
    char *buf = malloc((size_t)1 << 17);
    *len = buf ? fread(buf, 1, (size_t)1 << 17, f) : 0;
    fclose(f);
    return buf;
}

static void refused(hs_status st, const hs_error *err, const char *what)
{
    if ((st != HS_E_INPUT && st != HS_E_NOMEM) || !err->msg[0] || strchr(err->msg, '\n')) {
        fprintf(stderr, "fuzz_resume: %s: status %d, '%s'\n", what, (int)st, err->msg);
        abort();
    }
}

static long newlines(const uint8_t *d, size_t n)
{
    long c = 0;
    for (size_t i = 0; i < n; i++)
        c += d[i] == '\n';
    return c;
}

/* The checkpoint p's texts.jsonl (d, n bytes) resumed as cli/corpus_checkpoint.c does. */
static void resume(const hs_corpus_partial *p, const uint8_t *d, size_t n)
{
    hs_error err = {{0}};
    hs_out o;
    long lines;
    char tmp[512], out[512];
    put(p->cp.texts_tmp, d, n);
    path_of(tmp, sizeof tmp, p->cp.texts_tmp);
    path_of(out, sizeof out, "texts.jsonl");
    hs_status st = hs_out_resume(out, tmp, p->cp.texts_bytes, &o, &lines, &err);
    unlink(tmp);
    if (st != HS_OK) {
        refused(st, &err, "hs_out_resume");
        return;
    }
    long n_texts = p->agg ? p->agg->n_texts : 0;
    st = hs_corpus_resume_agree(p, n_texts, "partial.json", lines, &err);
    if (st != HS_OK) {
        refused(st, &err, "hs_corpus_resume_agree");
        hs_out_close(&o, 0, NULL);
        return;
    }
    if (hs_out_close(&o, 1, &err) != HS_OK)
        die(err.msg);
    size_t len = 0, want = (size_t)p->cp.texts_bytes;
    char *got = slurp("texts.jsonl", &len);
    if (!got || len != want || memcmp(got, d, want))
        die("the resumed texts.jsonl is not the checkpoint's first texts_bytes bytes");
    if (newlines(d, want) != n_texts || (want && d[want - 1] != '\n'))
        die("a resume agreed with texts that are not n_texts whole lines");
    if (p->cp.position != p->info.n_selected || n_texts > p->cp.position)
        die("a resume agreed with a position that is not the source's");
    free(got);
}

/* The source line of a merged line at index i ({"index":i,"line":L,...), or -1. */
static long merged_line(const char *s, long i)
{
    char head[64];
    int k = snprintf(head, sizeof head, "{\"index\":%ld,\"line\":", i);
    if (strncmp(s, head, (size_t)k))
        return -1;
    long v = 0;
    const char *q = s + k;
    for (; *q >= '0' && *q <= '9' && q - (s + k) < 16; q++)
        v = v * 10 + (*q - '0');
    return q > s + k && *q == ',' ? v : -1;
}

/* The texts t[0..n) merged as cli/cmd_merge.c does, into memory. */
static void merge(hs_texts_reader *t, int n)
{
    hs_error err = {{0}};
    hs_texts_reader *pt[MAX_TEXTS];
    char *out = NULL;
    size_t out_len = 0;
    FILE *o = open_memstream(&out, &out_len);
    if (!o)
        die("open_memstream");
    hs_status st = HS_OK;
    long total = 0;
    for (int i = 0; i < n && st == HS_OK; i++) {
        pt[i] = &t[i];
        st = hs_texts_next(&t[i], &err);
    }
    if (st == HS_OK)
        st = hs_texts_merge(pt, n, o, &err);
    fclose(o);
    if (st != HS_OK) {
        refused(st, &err, "merge");
        free(out);
        return;
    }
    for (int i = 0; i < n; i++)
        total += t[i].count;
    if (newlines((const uint8_t *)out, out_len) != total || (out_len && out[out_len - 1] != '\n'))
        die("the merge did not write each text as one line");
    long i = 0, prev = -1;
    for (char *s = out; s < out + out_len; s = strchr(s, '\n') + 1, i++) {
        long line = merged_line(s, i);
        if (line < 0 || line <= prev)
            die("a merged line is out of index or source order");
        prev = line;
    }
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_dir_once(dir, &have_dir, cleanup);
    /* the parts between "\n%%\n" separators: the partial, then the texts */
    const uint8_t *part[1 + MAX_TEXTS];
    size_t len[1 + MAX_TEXTS];
    int parts = fuzz_parts(data, size, part, len, 1 + MAX_TEXTS, 1);
    hs_error err = {{0}};
    hs_corpus_partial p;
    put("partial.json", part[0], len[0]);
    char path[512];
    path_of(path, sizeof path, "partial.json");
    hs_status st = hs_corpus_partial_read(path, &p, &err);
    if (st != HS_OK)
        refused(st, &err, "hs_corpus_partial_read");
    if (st == HS_OK && p.cp.position && parts > 1)
        resume(&p, part[1], len[1]);
    hs_texts_reader t[MAX_TEXTS];
    memset(t, 0, sizeof t);
    static char empty[1];
    for (int i = 0; i + 1 < parts; i++) {
        if (len[i + 1])
            t[i].f = fmemopen((void *)(uintptr_t)part[i + 1], len[i + 1], "rb");
        else if ((t[i].f = fmemopen(empty, 1, "rb")) != NULL)
            getc(t[i].f); /* an empty part: at its end at once */
        if (!t[i].f)
            die("fmemopen");
        t[i].name = "texts.jsonl";
        t[i].n_texts = i == 0 && st == HS_OK && p.agg ? p.agg->n_texts
                                                      : newlines(part[i + 1], len[i + 1]);
    }
    if (parts > 1)
        merge(t, parts - 1);
    for (int i = 0; i + 1 < parts; i++) {
        fclose(t[i].f);
        free(t[i].buf);
    }
    if (st == HS_OK)
        hs_corpus_partial_free(&p);
    return 0;
}

#include "replay.h"
