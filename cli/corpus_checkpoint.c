/* Checkpoints of a corpus run (partial.json, written every --checkpoint-every texts and at
 * the end) and --resume from one (docs/corpus.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "corpus_run.h"
#include "io/io_internal.h"

void cli_corpus_digest_hex(const cli_corpus_run *r, char hex[65])
{
    hs_sha256_ctx c = r->digest;
    hs_sha256_final(&c, hex);
}


int cli_corpus_write_partial(cli_corpus_run *r, const hs_corpus_checkpoint *cp)
{
    hs_error err = {{0}};
    char path[4096];
    if (cp) /* the finished run's seconds are the report's */
        r->info.seconds = r->resume.info.seconds + (cli_now() - r->t0);
    r->info.n_selected = r->selected;
    cli_corpus_digest_hex(r, r->info.digest);
    char *js = hs_corpus_partial_json(r->agg, &r->info, cp);
    if (!js) {
        cli_error(r->cmd, "out of memory");
        return EXIT_FAIL;
    }
    snprintf(path, sizeof path, "%s/partial.json", r->outdir);
    hs_status st = hs_file_write_atomic(path, js, strlen(js), &err);
    free(js);
    if (st) {
        cli_error(r->cmd, "%s", err.msg);
        return EXIT_FAIL;
    }
    return 0;
}


int cli_corpus_checkpoint(cli_corpus_run *r)
{
    hs_corpus_checkpoint cp = {.position = r->selected};
    if (fflush(r->out) != 0 || (cp.texts_bytes = ftell(r->out)) < 0) {
        cli_error(r->cmd, "cannot write texts.jsonl: %s", strerror(errno));
        return EXIT_FAIL;
    }
    snprintf(cp.texts_tmp, sizeof cp.texts_tmp, "%s", r->texts_tmp);
    /* a signal from now on leaves the file for --resume (before partial.json names it: a
       signal in between leaves an unnamed file, never a checkpoint without its texts) */
    if (r->texts_tmp_path)
        hs_tmp_forget(r->texts_tmp_path);
    if (cli_corpus_write_partial(r, &cp)) {
        if (r->texts_tmp_path && !r->checkpointed)
            hs_tmp_register(r->texts_tmp_path);
        return EXIT_FAIL;
    }
    r->checkpointed = 1;
    cli_corpus_drop_old_tmp(r); /* the checkpoint now names this run's */
    cli_corpus_signal_note(r);
    return 0;
}


int cli_corpus_resume_open(cli_corpus_run *r, const char *texts, hs_out *outf)
{
    hs_error err = {{0}};
    char path[4096], tmp[4096];
    snprintf(path, sizeof path, "%s/partial.json", r->outdir);
    if (hs_corpus_partial_read(path, &r->resume, &err) != HS_OK) {
        cli_error(r->cmd, "cannot resume: %s", err.msg);
        return EXIT_FAIL;
    }
    if (r->resume.cp.position == 0) {
        cli_error(r->cmd, "cannot resume: '%s' is a finished run's (nothing to resume)", path);
        return EXIT_FAIL;
    }
    /* the settings must be this command line's; what was read is compared as it is read */
    hs_corpus_partial now_p = {.info = r->info};
    hs_corpus_info *ni = &now_p.info;
    const hs_corpus_info *ci = &r->resume.info;
    memcpy(ni->digest, ci->digest, sizeof ni->digest);
    ni->n_selected = ci->n_selected, ni->n_records = ci->n_records, ni->n_empty = ci->n_empty;
    memcpy(ni->skipped, ci->skipped, sizeof ni->skipped);
    if (ni->format == HS_CORPUS_AUTO) /* the checkpoint holds the format detected */
        ni->format = ci->format;
    if (ni->shard != ci->shard || hs_corpus_partial_check(&r->resume, &now_p, &err) != HS_OK) {
        if (ni->shard != ci->shard)
            snprintf(err.msg, sizeof err.msg, "made for shard %d/%d", ci->shard, ci->n_shards);
        cli_error(r->cmd, "cannot resume: the checkpoint in '%s' was %s", r->outdir, err.msg);
        return EXIT_FAIL;
    }
    r->agg = r->resume.agg; /* taken over */
    r->resume.agg = NULL;
    memcpy(r->info.skipped_text, ci->skipped_text, sizeof r->info.skipped_text);
    /* texts.jsonl goes on in a new temporary file: the checkpoint's is read, not written */
    snprintf(tmp, sizeof tmp, "%s/%s", r->outdir, r->resume.cp.texts_tmp);
    long lines;
    if (hs_out_resume(texts, tmp, r->resume.cp.texts_bytes, outf, &lines, &err) != HS_OK) {
        cli_error(r->cmd, "cannot resume: %s", err.msg);
        return EXIT_FAIL;
    }
    if (hs_corpus_resume_agree(&r->resume, r->agg ? r->agg->n_texts : 0, path, lines, &err)) {
        hs_out_close(outf, 0, NULL);
        cli_error(r->cmd, "cannot resume: %s", err.msg);
        return EXIT_FAIL;
    }
    if (!(r->old_tmp = strdup(tmp))) {
        hs_out_close(outf, 0, NULL);
        cli_error(r->cmd, "out of memory");
        return EXIT_FAIL;
    }
    r->checkpointed = 1;
    return 0;
}

/* The name (no folder) of a texts.jsonl temporary file a checkpoint may name: "texts.jsonl.tmp-XXXXXX". */
static int texts_tmp_name(const char *name)
{
    return !strncmp(name, "texts.jsonl.tmp-", 16) && !strchr(name, '/') &&
           cli_own_output_name(name, 1);
}

int cli_corpus_unfinished(cli_corpus_run *r)
{
    hs_error err = {{0}};
    hs_corpus_partial p = {0};
    char path[4096];
    snprintf(path, sizeof path, "%s/partial.json", r->outdir);
    if (access(path, F_OK) != 0 || hs_corpus_partial_read(path, &p, &err) != HS_OK ||
        p.cp.position == 0) { /* none, a finished run's, or not one that can be resumed */
        hs_corpus_partial_free(&p);
        return 0;
    }
    long kept = p.agg ? p.agg->n_texts : 0;
    int rc = 0;
    if (!r->co->restart) {
        cli_error(r->cmd, "'%s' holds an unfinished run's checkpoint (%ld texts of '%s' "
                  "analysed): add --resume to go on from it, or --restart to discard it",
                  r->outdir, kept, p.info.path ? p.info.path : "?");
        rc = EXIT_FAIL;
    } else if (texts_tmp_name(p.cp.texts_tmp)) { /* removed once nothing names it */
        snprintf(path, sizeof path, "%s/%s", r->outdir, p.cp.texts_tmp);
        if (!(r->old_tmp = strdup(path))) {
            cli_error(r->cmd, "out of memory");
            rc = EXIT_FAIL;
        }
    }
    hs_corpus_partial_free(&p);
    return rc;
}

void cli_corpus_signal_note(const cli_corpus_run *r)
{
    char line[2048];
    const char *C = r->cmd, *out = cli_shown(r->outdir);
    if (r->checkpointed) {
        const char *tmp = r->old_tmp ? strrchr(r->old_tmp, '/') + 1 : r->texts_tmp;
        char of[48] = "";
        if (r->total >= 0)
            snprintf(of, sizeof of, " of %ld", r->total);
        snprintf(line, sizeof line, "headscope: %s: interrupted; the checkpoint in '%s' keeps "
                 "%ld%s texts (partial.json, %s): run the same command with --resume to go on, "
                 "or with --restart to start again\n", C, out, r->dealt, of, cli_shown(tmp));
    } else if (r->every) {
        snprintf(line, sizeof line, "headscope: %s: interrupted before the first checkpoint "
                 "(after %ld texts): nothing is kept%s%s%s\n", C, r->every,
                 r->created_dir ? "" : ", '", r->created_dir ? "" : out,
                 r->created_dir ? "" : "' is as it was");
    } else {
        snprintf(line, sizeof line, "headscope: %s: interrupted: nothing is kept (no "
                 "checkpoints %s)\n", C, strcmp(r->co->path, "-") ? "with --checkpoint-every 0"
                                                                  : "of a corpus on stdin");
    }
    if (r->prog.mode == CLI_PROGRESS_TTY) { /* over the progress line, if one is open */
        size_t n = strlen(line);
        if (n + 5 < sizeof line) {
            memmove(line + 4, line, n + 1);
            memcpy(line, "\r\033[K", 4);
        }
    }
    hs_tmp_on_signal(line, r->created_dir && !r->checkpointed ? r->outdir : NULL, r->created_dir);
}

void cli_corpus_drop_old_tmp(cli_corpus_run *r)
{
    if (r->old_tmp)
        unlink(r->old_tmp);
    free(r->old_tmp);
    r->old_tmp = NULL;
}
