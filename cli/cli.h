/* Shared pieces of the headscope command-line tool (private). */
#ifndef HEADSCOPE_CLI_H
#define HEADSCOPE_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "headscope/forward.h"
#include "headscope/model.h"
#include "headscope/report.h"
#include "headscope/tokenizer.h"
#include "pipeline/options.h"

#define CLI_TEXT_MAX_BYTES ((size_t)64 << 20)
/* A text past the context is counted up to this many tokens for its message. */
#define CLI_COUNT_MAX ((size_t)1 << 18)

/* Exit statuses. */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

int cmd_attn(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_patch(int argc, char **argv);

/* "headscope: <cmd>: <message>" (cmd NULL: "headscope: <message>") on stderr, the message
 * escaped by hs_text_escape (one line, no control characters). */
void cli_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* A usage error: the message in one line (no usage text after it); returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Usage errors that suggest (cli/suggest.c). cli_closest: the one of n names within a
 * small edit distance of word (one edit for words of 3-5 bytes, two from 6), the closest;
 * NULL when none. cli_option_error: getopt_long's ':' (a missing value) or '?' (an unknown
 * option, an ambiguous abbreviation, a value given to a flag) as a one-line usage error
 * ending "(see 'headscope CMD --help')", with "did you mean '--text'?" when one of opts
 * (or --threads, --weight-memory) is close; returns EXIT_USAGE. Call it right after getopt_long returned c. */
struct option;
const char *cli_closest(const char *word, const char *const *names, int n);
int cli_option_error(const char *cmd, int c, int argc, char **argv, const struct option *opts);

/* The input text of a command: from --text or --file (raw bytes, "-" = stdin). */
typedef struct cli_text {
    char *text; /* owned copy, NUL-terminated (may also hold NULs) */
    size_t len;
    char *pair; /* NULL when no --text-pair */
    size_t pair_len;
} cli_text;

/* Fills t from the option values (text or file, not both; exactly one required).
 * Prints the error and returns EXIT_USAGE / EXIT_FAIL, or 0. */
int cli_text_get(const char *cmd, const char *text, const char *file, const char *pair,
                 cli_text *t);
void cli_text_free(cli_text *t);

/* Loads a model, printing errors; returns NULL on failure. */
hs_model *cli_model_load(const char *cmd, const char *path);

/* The command line as typed (argv[0] shown as "headscope"), kept before getopt_long
 * reorders argv, for reports; cli_command_line_save(0, NULL) forgets it. */
void cli_command_line_save(int argc, char **argv);
const char *const *cli_command_line(int *argc);
/* The weight budget cli_model_open passes (--weight-memory; 0: the library's default). */
void cli_set_weight_memory(size_t bytes);
/* --activations q8: cli_model_open adds HS_OPEN_Q8_ACTIVATIONS. */
void cli_set_q8_activations(int on);

/* As cli_model_load, reading only what HS_OPEN_* flags ask for. */
hs_model *cli_model_open(const char *cmd, const char *path, unsigned flags);

/* Tokenizes t with the model's tokenizer, enforcing a length of max tokens (0: the model's
 * context): truncate 1 drops tokens as Hugging Face does, 0 fails, -1 does not enforce any
 * length. With 0 or 1 a long text is tokenised only as far as the limit needs. An empty
 * text, or one without tokens, fails unless allow_empty (tokenize: GPT-2 gives no ids,
 * BERT [CLS] [SEP], as Hugging Face does). *truncated (may be NULL) says whether tokens
 * were dropped. Returns 0 or EXIT_FAIL. */
int cli_encode(const char *cmd, const hs_model *m, const cli_text *t, int truncate, size_t max,
               int allow_empty, hs_encoding *enc, int *truncated);

/* As cli_encode with a tokenizer and a context of n_ctx tokens (tokenize on a tokenizer.json). */
int cli_encode_tok(const char *cmd, const hs_tokenizer *tok, size_t n_ctx, const cli_text *t,
                   int truncate, size_t max, int allow_empty, hs_encoding *enc, int *truncated);

/* attn on an encoder-decoder (cli/attn_encdec.c): the encoder on src (n_enc ids), the
 * decoder on decoder_start_id then tgt but its last (n_dec ids); writes the three kinds of
 * maps to OUT's stem + ".encoder.npy", ".decoder.npy", ".cross.npy" (cli_attn_encdec_path)
 * and, with nll_path, each target token's negative log-likelihood, with abl_path every
 * head's ablation (hs_encdec_ablation), with grad_path its gradient (hs_encdec_gradient),
 * each as (2, n_layer, n_head). Returns an exit code. */
int cli_attn_encdec(const hs_model *m, const int32_t *src, int n_enc, const int32_t *tgt,
                    int n_dec, const char *out, const char *nll_path, const char *abl_path,
                    const char *grad_path, int allow_nonfinite, int quiet);
void cli_attn_encdec_path(const char *out, const char *kind, char *buf, size_t cap);

/* Corpus mode of `headscope analyze` (cli/analyze_corpus.c). */
/* --pack-tokens' default: one text a pass, so that a text's numbers never depend on which
 * texts share its pass (on wide models a pack's products are cut otherwise: docs/corpus.md) */
#define CLI_PACK_TOKENS 0

typedef struct cli_corpus_opts {
    const char *path;     /* the corpus, "-" for stdin */
    int format;           /* hs_corpus_format */
    long max_texts;       /* 0 = all */
    int max_tokens;       /* 0 = the model's context */
    int skip_long;        /* skip longer texts instead of truncating them */
    long sample;          /* 0 = every text */
    uint64_t seed;
    int ablation;         /* --corpus-ablation */
    int shard, n_shards;  /* --shard I/N (1-based); 0/0 = the whole corpus */
    long checkpoint_every;/* texts between checkpoints (0 = none) */
    int resume;           /* --resume */
    int restart;          /* --restart: discard an unfinished checkpoint in OUTDIR */
    int progress;         /* CLI_PROGRESS_* */
    int pack_tokens;      /* --pack-tokens: texts a pass up to this many tokens (0, 1: one) */
} cli_corpus_opts;

/* analyze's command line (cli/analyze_args.c). */
typedef struct cli_analyze_args {
    const char *model, *outdir;
    const char *text, *file; /* the single text (--text, --file; --text-pair is opt's) */
    const char *target;      /* --target: an encoder-decoder's decoder target */
    int json, quiet;
    int no_clobber;                  /* --no-clobber: refuse an OUTDIR with an earlier run */
    int images, max_tokens, formats; /* pictures: on, --max-tokens-in-images, HS_PICTURES_* */
    int progress_mode;               /* CLI_PROGRESS_*, -1: auto */
    hs_analyze_args opt; /* the options of the table (src/pipeline/options.c): the analysis
                            options, --truncate, --text-pair, --layers (syntax checked; the
                            range once the model is known) */
    cli_corpus_opts co;
} cli_analyze_args;

/* Reads analyze's options into *g. Returns -1 to go on, or the exit status to end with
 * (0 after --help, 2 after a usage error, printed). */
int cli_analyze_args_parse(int argc, char **argv, cli_analyze_args *g);

/* analyze's summary of a single-text analysis on stdout (cli/analyze_summary.c);
 * report_path, when not NULL, is named last. */
void cli_analyze_summary(const hs_analysis *a, const char *report_path);
/* The same of an encoder-decoder's analysis (hs_analysis.encdec; analyze_summary_encdec.c). */
void cli_analyze_summary_encdec(const hs_analysis *a, const char *report_path);

/* Corpus progress on stderr (cli/corpus_progress.c). */
/* The monotonic clock in seconds (for elapsed times). */
double cli_now(void);
enum { CLI_PROGRESS_NONE = 0, CLI_PROGRESS_TTY = 1, CLI_PROGRESS_JSON = 2 };
typedef struct cli_progress {
    int mode, open;
    double t0, last;
} cli_progress;
void cli_progress_start(cli_progress *p, int mode);
/* done of total texts (total < 0: unknown); new_done texts and new_tokens tokens in this
 * process (the rate and ETA); final: the last call. */
void cli_progress_update(cli_progress *p, long done, long total, long new_done, long new_tokens,
                         int final);
void cli_progress_end(cli_progress *p);

/* The single-text analyze's progress (mode CLI_PROGRESS_*): on a terminal a line
 * "ablation 40/144, ETA 0:12" (or "composition, 0:03 so far" for an uncounted phase),
 * rewritten in place by a thread once a phase has lasted a second; JSON lines
 * {"event":"phase",...} with CLI_PROGRESS_JSON. cli_phase_progress_start after the output
 * folder's fork; cli_phase_progress is the hs_progress_fn (also called by the command for
 * its own phases, "loading the model"); cli_phase_progress_end stops the thread and ends
 * an open line, before anything else is printed. */
void cli_phase_progress_start(int mode);
void cli_phase_progress(void *user, const char *what, int done, int total);
void cli_phase_progress_end(void);
/* cli_progress_hold(1) ends an open phase line and keeps the progress thread from drawing
 * until cli_progress_hold(0), so that a message (cli_error) has a line of its own. */
void cli_progress_hold(int on);

/* Runs corpus mode: writes outdir/texts.jsonl and outdir/report.json, prints a summary
 * (unless quiet) and bad records on stderr. Removes what it wrote on failure. Returns an
 * exit status. ao: the analysis options (layers, similarity, ...) from the command line. */
int cli_analyze_corpus(const char *cmd, hs_model *m, const cli_corpus_opts *co,
                       const hs_analyze_opts *ao, const char *outdir, int created_dir,
                       int quiet, int json);

/* Writes outdir/index.html for a corpus run: report_json and the first texts of
 * outdir/texts.jsonl (up to HS_HTML_MAX_TEXTS_BYTES, whole lines) as the per-text list.
 * Prints the error and returns EXIT_FAIL when it cannot, else 0. */
int cli_corpus_page(const char *cmd, const char *outdir, const char *report_json);

/* Uses outdir as the output folder, creating it and its missing parents (*created: how
 * many folders were made, 0 when it existed). Prints the error and returns EXIT_FAIL when
 * it is not a usable folder (nothing made is left), else 0. */
int cli_output_dir(const char *cmd, const char *outdir, int *created);
/* Removes outdir and then its parents, levels folders in all, each only when empty. */
void cli_output_dir_remove(const char *outdir, int levels);

/* "dir/name", malloc'd; NULL when out of memory. */
char *cli_path_join(const char *dir, const char *name);

/* Flushes stdout and reports a write error; returns EXIT_OK or EXIT_FAIL. */
int cli_finish_stdout(const char *cmd);

/* s (a path, a name from a file) as a human-readable line on stdout shows it: escaped by
 * hs_text_escape, so that no control character of it reaches the terminal. The result
 * stays valid for the next seven calls (a ring of buffers, for several in one printf). */
const char *cli_shown(const char *s);

/* After a run's files are in place in outdir (a staged run's commit): cli_stdout_after_commit
 * ignores SIGPIPE, so that a closed standard output fails a write instead of ending the
 * process (whose supervisor would then say the folder was left as it was);
 * cli_finish_stdout_committed flushes stdout and, when that or the printing before it
 * (failed, errno set) did not succeed, says so in one line that names the complete run.
 * Returns EXIT_OK or EXIT_FAIL. */
void cli_stdout_after_commit(void);
int cli_finish_stdout_committed(const char *cmd, const char *outdir, int failed);

/* The output folder of one run (cli/outdir.c). */
typedef struct cli_outdir {
    char *path;  /* the output folder */
    char *stage; /* path/.headscope-run-PID-XXXXXX, where a staged run writes; NULL otherwise */
    int fd;      /* the folder, locked with flock for the run */
    int quiet;   /* CLI_OUTDIR_QUIET */
    int earlier; /* files of an earlier run there when the run began (cli_outdir_earlier) */
    char earlier_list[256]; /* the first of them */
    int created; /* folders the run made: the folder and its parents (removed again if the
                    run fails) */
} cli_outdir;

/* Opens path as the output folder (creating it if absent) and locks it: a second run into
 * the same folder fails at once with a message. Every command that writes a folder takes
 * this lock (analyze, merge, dump). With the lock held, the staging folders of runs that
 * were killed are removed (cli_outdir_sweep). staged: the run writes into od->stage, and
 * the process forks: the parent supervises (passes SIGINT/TERM/HUP/QUIT on), and when
 * the worker fails or is killed removes the staging folder (and the folder if it made it),
 * so the folder is as it was; it then returns the exit status with *worker = 0, and the
 * caller returns it at once. The worker (and an unstaged run) gets EXIT_OK with
 * *worker = 1. Call it before any OpenMP region has run (fork and libgomp's pool). */
int cli_outdir_open(const char *cmd, const char *path, int staged, cli_outdir *od, int *worker);
/* The flags staged may also hold: CLI_OUTDIR_STAGED is the staged run above;
 * CLI_OUTDIR_NO_CLOBBER refuses (EXIT_FAIL after the message) a folder that holds an
 * earlier run's outputs (cli_outdir_earlier); CLI_OUTDIR_QUIET: the commit does not say
 * that it replaced them. */
enum { CLI_OUTDIR_STAGED = 1, CLI_OUTDIR_NO_CLOBBER = 2, CLI_OUTDIR_QUIET = 4 };

/* A staged run's end: removes the files an earlier run listed in path/report.json that this
 * run does not write (cli_outdir_prune), moves the n_files
 * staged files (relative names, report.json last) into the folder, removes the staging
 * folder, and says on stderr (unless CLI_OUTDIR_QUIET) that an earlier run's outputs were
 * replaced (cli_outdir_replaced). Exit status. */
int cli_outdir_commit(const char *cmd, cli_outdir *od, const char *const *files, int n_files);

/* How many files with headscope's output names (cli_own_output_name, no temporaries) dir
 * and its heads/ folder hold: an earlier run's outputs; the first three names (then
 * "...") into list. */
int cli_outdir_earlier(const char *dir, char *list, size_t cap);

/* Whether rel (relative to an output folder) is the name of one of headscope's outputs:
 * report.json, index.html, the pictures, texts.jsonl, partial.json, dump's files
 * (cli/outdir_own.c has the list); allow_tmp: also with a writer's ".tmp-XXXXXX" suffix. */
int cli_own_output_name(const char *rel, int allow_tmp);

/* Removes the files an earlier run listed in dir/report.json ("files") or an earlier dump in
 * dir/manifest.json (its "files" and itself), plain files only, that are not among the
 * n_files names, and only those with headscope's own names (cli_own_output_name); a name
 * under heads/ only when dir/heads is a real folder (then heads/ too once it is empty). */
void cli_outdir_prune(const char *dir, const char *const *files, int n_files);

/* Removes the staging folders (.headscope-run-*) that runs killed before their end left in
 * dir: those whose run is no longer running, owned by this user, and only the files in
 * them with headscope's names (a folder holding anything else stays). Call it with dir's
 * lock held. */
void cli_outdir_sweep(const char *dir);

/* "headscope: CMD: replaced the earlier run in 'DIR' (N files: ...)" on stderr when
 * n > 0; list as cli_outdir_earlier gave it. */
void cli_outdir_replaced(const char *cmd, const char *dir, int n, const char *list);

/* Removes an uncommitted staging folder (and the folder if the run made it), unlocks. */
void cli_outdir_close(cli_outdir *od);

/* A whole decimal number in [lo, hi] into *out: 0, or -1 (nothing stored) for anything
 * else (empty, a space or '+' before it, trailing characters, out of range, past a long). */
int cli_parse_long(const char *s, long lo, long hi, long *out);

/* "--shard I/N" with 1 <= I <= N <= 10^6 into *i, *n: 0, or -1 for anything else. */
int cli_parse_shard(const char *s, int *i, int *n);

#endif
