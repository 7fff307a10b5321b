/* The state of one `headscope analyze --corpus` run, shared by cli/analyze_corpus.c (reading,
 * selecting and analysing the texts) and cli/corpus_checkpoint.c (partial.json, --resume)
 * (private to the command-line tool). */
#ifndef HEADSCOPE_CLI_CORPUS_RUN_H
#define HEADSCOPE_CLI_CORPUS_RUN_H

#include <stdio.h>

#include "cli.h"
#include "core/core.h"
#include "headscope/corpus.h"

typedef struct cli_corpus_run {
    const char *cmd;
    const cli_corpus_opts *co;
    const hs_model *m;
    hs_analyze_opts ao;
    hs_corpus_info info;
    hs_corpus_agg *agg;
    FILE *out;          /* texts.jsonl's temporary file */
    int quiet, messages;
    double t0;
    hs_sha256_ctx digest;   /* of the selected records so far */
    long selected;          /* selected records dealt with */
    long done_here, tokens_here; /* texts and tokens analysed by this process */
    long total;             /* this shard's selected records, counted before the run (-1:
                               unknown, a corpus on stdin) */
    long dealt;             /* this shard's selected records dealt with (analysed or
                               skipped), a resumed checkpoint's included: the progress */
    int created_dir;        /* the run made OUTDIR (removed by a signal before a checkpoint) */
    hs_corpus_partial resume; /* the checkpoint resumed from (position 0: none) */
    int checked;            /* the resumed aggregate was checked against a new analysis */
    long stop_after;        /* HEADSCOPE_TEST_STOP_AFTER: fail after this many texts */
    long signal_after;      /* HEADSCOPE_TEST_SIGNAL_AFTER: SIGINT after this many texts
                               (and their checkpoint, when one is due) */
    long every;             /* texts between checkpoints; 0: none (stdin cannot be resumed) */
    const char *outdir;
    const char *texts_tmp;  /* texts.jsonl's temporary file's name in outdir */
    const char *texts_tmp_path; /* ... and path: kept on a signal once a checkpoint names it */
    int checkpointed;       /* a checkpoint is on disk */
    char *old_tmp;          /* after --resume: the checkpoint's texts.jsonl temporary file,
                               while partial.json still names it (NULL otherwise) */
    cli_progress prog;
    /* --ablation mean: a first pass over every selected text (all shards') sums each head's
     * context; the analyses then ablate by means = z_sum / z_tokens */
    int means_pass;
    double *z_sum;          /* (n_layer, A), A = hs_model_attn_width */
    long z_tokens;
    float *means;           /* (n_layer, A) */
    /* --pack-tokens (cli/corpus_pack.c): records read ahead, their maps recorded in one
     * packed pass, then dealt with in order as before */
    struct cli_pack *pack;
    int pack_probe;         /* 1 while a record is tokenised ahead: skips are not counted */
    const float *pack_maps; /* the record being dealt with: its maps, (L, H, n, n), or NULL */
    int pack_n;             /* ... of this many tokens */
} cli_corpus_run;

/* Tokenizes one text into *enc as the corpus options say (truncated to --max-tokens, unless
 * --skip-long); returns 1, or 0 when the text is skipped (said, unless r->pack_probe). */
int cli_corpus_encode(cli_corpus_run *r, long line, const char *text, size_t len,
                      const char *pair, size_t pair_len, hs_encoding *enc, int *truncated);

/* One selected record, in corpus order (analysed when it is this shard's and not in the
 * resumed checkpoint; a checkpoint when one is due). Returns 0 or an exit status. */
int cli_corpus_selected(cli_corpus_run *r, long line, const char *text, size_t len,
                        const char *pair, size_t pair_len);

/* A pack of up to budget tokens a pass, or NULL when out of memory. */
struct cli_pack *cli_pack_new(int budget);

/* --pack-tokens: the record is kept (copied) to be dealt with after the next packed pass,
 * which runs once the kept texts to analyse reach the budget. Returns 0 or an exit status. */
int cli_pack_push(cli_corpus_run *r, long line, const char *text, size_t len, const char *pair,
                  size_t pair_len);

/* The kept records: their packed pass, then each dealt with (cli_corpus_selected) in order.
 * Returns 0 or an exit status. */
int cli_pack_flush(cli_corpus_run *r);

/* Frees what --pack-tokens kept (records not dealt with are dropped). */
void cli_pack_free(cli_corpus_run *r);

/* The SHA-256 of the selected records so far, as 64 hex digits and a NUL. */
void cli_corpus_digest_hex(const cli_corpus_run *r, char hex[65]);

/* Writes outdir/partial.json: a checkpoint (cp), or the finished shard's partial (cp NULL).
 * Returns 0, or EXIT_FAIL after printing the error. */
int cli_corpus_write_partial(cli_corpus_run *r, const hs_corpus_checkpoint *cp);

/* A checkpoint now: texts.jsonl flushed, partial.json with the position and texts.jsonl's
 * length. Returns 0, or EXIT_FAIL after printing the error. */
int cli_corpus_checkpoint(cli_corpus_run *r);

/* --resume: reads the checkpoint in outdir, checks it against this command line's settings
 * and against itself (its texts.jsonl's lines, its aggregate's texts, its position), takes
 * over its aggregate and copies the checkpoint's part of texts.jsonl's temporary file into
 * a new one (texts: its final path), *outf, positioned at its end; r->old_tmp names the
 * checkpoint's. Returns 0, or EXIT_FAIL after printing the error. */
int cli_corpus_resume_open(cli_corpus_run *r, const char *texts, hs_out *outf);

/* Removes r->old_tmp, once no checkpoint names it (a new checkpoint, the finished run). */
void cli_corpus_drop_old_tmp(cli_corpus_run *r);

/* Without --resume: an unfinished checkpoint in OUTDIR is refused (EXIT_FAIL after the
 * message), unless --restart, which leaves it until this run's first checkpoint or end
 * (r->old_tmp then names its texts.jsonl temporary file). 0 when the run may go on. */
int cli_corpus_unfinished(cli_corpus_run *r);

/* What a signal that ends the run says (and removes): the checkpoint kept and how to go
 * on, or that nothing is kept (hs_tmp_on_signal); set at the start and at every checkpoint. */
void cli_corpus_signal_note(const cli_corpus_run *r);

#endif /* HEADSCOPE_CLI_CORPUS_RUN_H */
