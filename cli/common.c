/* Shared CLI helpers: messages, text input, model loading, tokenization policy. */
#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "headscope/html.h"

/* "headscope: CMD: message" on stderr, the message escaped (hs_text_escape): it may quote
 * paths, option values and strings from files, and must stay one line and inert. */
static void print_message(const char *cmd, const char *fmt, va_list ap)
{
    char raw[1024], msg[2048];
    vsnprintf(raw, sizeof raw, fmt, ap);
    hs_text_escape(msg, sizeof msg, raw);
    cli_progress_hold(1);
    if (cmd)
        fprintf(stderr, "headscope: %s: %s\n", cmd, msg);
    else
        fprintf(stderr, "headscope: %s\n", msg);
    fflush(stderr);
    cli_progress_hold(0);
}

void cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_message(cmd, fmt, ap);
    va_end(ap);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_message(cmd, fmt, ap);
    va_end(ap);
    return EXIT_USAGE;
}

static int read_stream(const char *cmd, FILE *f, const char *name, char **out, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        cli_error(cmd, "out of memory");
        return EXIT_FAIL;
    }
    for (;;) {
        if (n == cap) {
            if (cap >= CLI_TEXT_MAX_BYTES) {
                free(buf);
                cli_error(cmd, "'%s' is larger than %zu MB", name, CLI_TEXT_MAX_BYTES >> 20);
                return EXIT_FAIL;
            }
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                free(buf);
                cli_error(cmd, "out of memory");
                return EXIT_FAIL;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        free(buf);
        cli_error(cmd, "cannot read '%s': %s", name, strerror(errno));
        return EXIT_FAIL;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

int cli_text_get(const char *cmd, const char *text, const char *file, const char *pair,
                 cli_text *t)
{
    memset(t, 0, sizeof *t);
    if (text && file)
        return cli_usage_error(cmd, "give --text or --file, not both");
    if (!text && !file)
        return cli_usage_error(cmd, "no input text (use --text TEXT or --file PATH)");
    int rc = 0;
    if (text) {
        t->len = strlen(text);
        t->text = strdup(text);
        if (!t->text) {
            cli_error(cmd, "out of memory");
            return EXIT_FAIL;
        }
    } else if (!strcmp(file, "-")) {
        rc = read_stream(cmd, stdin, "<stdin>", &t->text, &t->len);
        /* one trailing newline (\n or \r\n), as echo and a here-string add it and as corpus
           mode removes it from a folder's files */
        if (!rc && t->len > 0 && t->text[t->len - 1] == '\n') {
            t->len -= t->len > 1 && t->text[t->len - 2] == '\r' ? 2 : 1;
            t->text[t->len] = '\0';
        }
    } else {
        FILE *f = fopen(file, "rb");
        if (!f) {
            cli_error(cmd, "cannot open '%s': %s", file, strerror(errno));
            return EXIT_FAIL;
        }
        rc = read_stream(cmd, f, file, &t->text, &t->len);
        fclose(f);
    }
    if (rc)
        return rc;
    if (pair) {
        t->pair_len = strlen(pair);
        t->pair = strdup(pair);
        if (!t->pair) {
            cli_text_free(t);
            cli_error(cmd, "out of memory");
            return EXIT_FAIL;
        }
    }
    return 0;
}

void cli_text_free(cli_text *t)
{
    free(t->text);
    free(t->pair);
    memset(t, 0, sizeof *t);
}

static const char **saved_argv;
static int saved_argc;

void cli_command_line_save(int argc, char **argv)
{
    free(saved_argv);
    saved_argv = NULL;
    saved_argc = 0;
    if (argc < 1 || !(saved_argv = malloc((size_t)argc * sizeof *saved_argv)))
        return;
    saved_argv[0] = "headscope";
    for (int i = 1; i < argc; i++)
        saved_argv[i] = argv[i];
    saved_argc = argc;
}

const char *const *cli_command_line(int *argc)
{
    *argc = saved_argc;
    return saved_argv;
}

hs_model *cli_model_load(const char *cmd, const char *path)
{
    return cli_model_open(cmd, path, 0);
}

static size_t weight_memory;

void cli_set_weight_memory(size_t bytes) { weight_memory = bytes; }

static int q8_activations;

void cli_set_q8_activations(int on) { q8_activations = on; }

hs_model *cli_model_open(const char *cmd, const char *path, unsigned flags)
{
    hs_error err = {{0}};
    hs_model *m = NULL;
    if (q8_activations && !(flags & (HS_OPEN_NO_WEIGHTS | HS_OPEN_TOKENIZER)))
        flags |= HS_OPEN_Q8_ACTIVATIONS;
    hs_open_opts o = {.flags = flags, .weight_memory = weight_memory};
    if (hs_model_open2(path, &o, &m, &err) != HS_OK) {
        cli_error(cmd, "%s", err.msg);
        return NULL;
    }
    /* what the reader went on past (a special-token id beyond the vocabulary), one line each */
    for (const char *w = hs_model_warnings(m); *w;) {
        const char *end = strchr(w, '\n');
        int len = end ? (int)(end - w) : (int)strlen(w);
        fprintf(stderr, "headscope: %s: warning: %.*s\n", cmd, len, w);
        w += len + (end != NULL);
    }
    return m;
}

int cli_encode(const char *cmd, const hs_model *m, const cli_text *t, int truncate,
               size_t max, int allow_empty, hs_encoding *enc, int *truncated)
{
    const hs_tokenizer *tok = hs_model_tokenizer(m);
    if (truncated)
        *truncated = 0;
    if (!tok) {
        cli_error(cmd, "'%s' has no tokenizer files (tokenizer.json, vocab.json + merges.txt or "
                  "vocab.txt)", hs_model_path(m));
        return EXIT_FAIL;
    }
    return cli_encode_tok(cmd, tok, (size_t)hs_model_config_of(m)->n_ctx, t, truncate, max,
                          allow_empty, enc, truncated);
}

int cli_encode_tok(const char *cmd, const hs_tokenizer *tok, size_t n_ctx, const cli_text *t,
                   int truncate, size_t max, int allow_empty, hs_encoding *enc, int *truncated)
{
    hs_error err = {{0}};
    if (truncated)
        *truncated = 0;
    if (t->len == 0 && !allow_empty) {
        cli_error(cmd, "the text is empty");
        return EXIT_FAIL;
    }
    if (t->pair && hs_tokenizer_check_pair(tok, &err) != HS_OK) {
        cli_error(cmd, "--text-pair: %s", err.msg);
        return EXIT_FAIL;
    }
    if (t->pair && t->pair_len == 0 && !allow_empty) {
        cli_error(cmd, "the pair text is empty");
        return EXIT_FAIL;
    }
    size_t ctx = max ? max : n_ctx;
    /* past ctx tokens only that there are more matters: a long text is not tokenised whole */
    if (hs_tokenizer_encode_max(tok, t->text, t->len, t->pair, t->pair_len,
                                truncate >= 0 ? ctx : 0, enc, &err) != HS_OK) {
        cli_error(cmd, "%s", err.msg);
        return EXIT_FAIL;
    }
    /* text that is only whitespace or controls is [CLS] [SEP] for BERT, as Hugging Face
     * gives it; GPT-2 encodes whitespace, so only nothing at all is refused */
    if (enc->n == 0 && !allow_empty) {
        hs_encoding_free(enc);
        cli_error(cmd, "the text has no tokens");
        return EXIT_FAIL;
    }
    if (enc->n > ctx && truncate >= 0) {
        if (!truncate) {
            /* the encoding stopped past the limit: the text once more for its count, as far
               as CLI_COUNT_MAX tokens (a 60 MB text is refused in a second, not tokenised) */
            hs_encoding whole = {0};
            size_t cap = ctx > CLI_COUNT_MAX ? ctx : CLI_COUNT_MAX;
            hs_encoding_free(enc);
            if (hs_tokenizer_encode_max(tok, t->text, t->len, t->pair, t->pair_len, cap, &whole,
                                        &err) == HS_OK)
                cli_error(cmd, "the text is %s%zu tokens, more than the model's context of %zu; "
                          "pass --truncate to keep the first %zu", whole.n > cap ? "over " : "",
                          whole.n > cap ? cap : whole.n, ctx, ctx);
            else
                cli_error(cmd, "the text is more than the model's context of %zu tokens; pass "
                          "--truncate to keep the first %zu", ctx, ctx);
            hs_encoding_free(&whole);
            return EXIT_FAIL;
        }
        hs_encoding_truncate(tok, enc, ctx);
        if (truncated)
            *truncated = 1;
    }
    return 0;
}

int cli_parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    const char *d = s + (*s == '-');
    if (*d < '0' || *d > '9') /* strtol would skip spaces and take a '+' */
        return -1;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) /* ERANGE: past a long, before any narrowing */
        return -1;
    *out = v;
    return 0;
}

void cli_stdout_after_commit(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, NULL); /* a closed pipe: EPIPE, said below, not a silent death */
}

int cli_finish_stdout_committed(const char *cmd, const char *outdir, int failed)
{
    int e = errno;
    if (!failed && fflush(stdout) == 0 && !ferror(stdout))
        return EXIT_OK;
    if (!failed)
        e = errno;
    cli_error(cmd, "cannot write to standard output (%s); the run is complete in '%s'",
              strerror(e ? e : EIO), outdir);
    return EXIT_FAIL;
}

const char *cli_shown(const char *s)
{
    static char *ring[8];
    static unsigned next;
    if (!s)
        return "(null)";
    size_t cap = 4 * strlen(s) + 1; /* \xNN: four bytes for one */
    char *e = malloc(cap);
    if (!e)
        return "?";
    hs_text_escape(e, cap, s);
    free(ring[next % 8]);
    ring[next++ % 8] = e;
    return e;
}

int cli_finish_stdout(const char *cmd)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(cmd, "cannot write to standard output: %s", strerror(errno));
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

char *cli_path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Creates the missing folders of path, parents first; returns how many it made, or -1
 * (errno set) when one cannot be made. */
static int make_folders(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0)
        return 0;
    if (errno != ENOENT)
        return -1;
    char *dup = strdup(path), *slash;
    int made = 0;
    if (!dup)
        return -1;
    /* the deepest parent that exists, then one folder at a time down to path */
    size_t n = strlen(dup);
    while (n > 1 && dup[n - 1] == '/')
        dup[--n] = 0;
    slash = strrchr(dup, '/');
    if (slash && slash != dup) {
        *slash = 0;
        made = make_folders(dup);
        *slash = '/';
    }
    if (made >= 0 && mkdir(dup, 0777) == 0)
        made++;
    else if (made >= 0 && errno != EEXIST)
        made = -1;
    free(dup);
    return made;
}

int cli_output_dir(const char *cmd, const char *outdir, int *created)
{
    struct stat sb;
    errno = 0;
    *created = make_folders(outdir);
    if (*created < 0 || stat(outdir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        cli_error(cmd, "cannot use '%s' as the output folder: %s", outdir,
                  *created < 0 || errno ? strerror(errno) : "Not a directory");
        if (*created > 0)
            cli_output_dir_remove(outdir, *created);
        *created = 0;
        return EXIT_FAIL;
    }
    return 0;
}

void cli_output_dir_remove(const char *outdir, int levels)
{
    char *d = strdup(outdir);
    for (int l = 0; d && l < levels && rmdir(d) == 0; l++) {
        size_t n = strlen(d);
        while (n > 1 && d[n - 1] == '/')
            d[--n] = 0;
        char *slash = strrchr(d, '/');
        if (!slash || slash == d)
            break;
        *slash = 0;
    }
    free(d);
}

int cli_corpus_page(const char *cmd, const char *outdir, const char *report_json)
{
    hs_error err = {{0}};
    char *tpath = cli_path_join(outdir, "texts.jsonl"), *page = cli_path_join(outdir, "index.html");
    char *texts = malloc(HS_HTML_MAX_TEXTS_BYTES + 1);
    FILE *f = NULL;
    int rc = EXIT_FAIL;
    if (!tpath || !page || !texts) {
        cli_error(cmd, "out of memory");
        goto done;
    }
    if (!(f = fopen(tpath, "rb"))) {
        cli_error(cmd, "cannot open '%s': %s", tpath, strerror(errno));
        goto done;
    }
    size_t got = fread(texts, 1, HS_HTML_MAX_TEXTS_BYTES, f);
    if (ferror(f)) {
        cli_error(cmd, "cannot read '%s'", tpath);
        goto done;
    }
    if (got == HS_HTML_MAX_TEXTS_BYTES) /* keep whole lines */
        while (got > 0 && texts[got - 1] != '\n')
            got--;
    texts[got] = '\0';
    hs_html_input in = {.report_json = report_json, .texts_jsonl = texts};
    if (hs_html_write(page, &in, &err) != HS_OK) {
        cli_error(cmd, "%s", err.msg);
        goto done;
    }
    rc = 0;
done:
    if (f)
        fclose(f);
    free(texts);
    free(page);
    free(tpath);
    return rc;
}
