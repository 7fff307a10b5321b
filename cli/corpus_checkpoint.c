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
    if (cli_corpus_write_partial(r, &cp))
        return EXIT_FAIL;
    if (r->texts_tmp_path) /* a signal now leaves it for --resume */
        hs_tmp_forget(r->texts_tmp_path);
    r->checkpointed = 1;
    cli_corpus_drop_old_tmp(r); /* the checkpoint now names this run's */
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

void cli_corpus_drop_old_tmp(cli_corpus_run *r)
{
    if (r->old_tmp)
        unlink(r->old_tmp);
    free(r->old_tmp);
    r->old_tmp = NULL;
}
