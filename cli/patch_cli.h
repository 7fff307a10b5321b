/* headscope patch (cli/cmd_patch.c): its pairs file (cli/patch_pairs.c) and its outputs
 * (cli/patch_out.c). Private to the command line. */
#ifndef HEADSCOPE_PATCH_CLI_H
#define HEADSCOPE_PATCH_CLI_H

#include "headscope/model.h"
#include "headscope/patch.h"

#define PATCH_CMD "patch"

/* The pairs of a file, their ids owned here. */
typedef struct patch_pairs {
    hs_patch_pair *pairs;
    int32_t **ids; /* (2 count): clean, corrupt of each pair */
    int *lines;    /* the file's line of each pair (1-based) */
    int count;
} patch_pairs;

/* Reads path (one JSON object a line, blank lines skipped) with m's tokenizer: prompts of
 * the same number of tokens, one-token answers (or ids); wrong required when need_wrong.
 * Prints the error naming the line; returns 0 or EXIT_FAIL. */
int patch_pairs_read(const hs_model *m, const char *path, int need_wrong, patch_pairs *pp);
void patch_pairs_free(patch_pairs *pp);

/* Keeps the pairs j (0-based in the file) with j mod n = i - 1 (--shard i/n). Prints the
 * error when none is left; returns 0 or EXIT_FAIL. */
int patch_pairs_shard(const char *path, patch_pairs *pp, int i, int n);

/* headscope merge of patch shards (cli/patch_merge.c): whether arg (a folder, or a file)
 * is a shard of patch --shard, and the merge of the n of them into dir's patching.json,
 * *names the files written. Prints the error; 0 or EXIT_FAIL. */
int patch_merge_is(const char *arg);
int patch_merge(const char *cmd, char *const *args, int n, const char *dir, char ***names,
                int *n_names);

/* What the command was asked, for the report. */
typedef struct patch_request {
    const char *model, *pairs_path, *metric, *site, *positions, *direction, *method;
    const hs_patch_opts *o;
    const hs_patch_path *path; /* path patching, or NULL */
    int shard, n_shards;       /* --shard I/N, or 0, 0 */
} patch_request;

/* Writes dir/patching.json from r (every position) and re (per position, or NULL), its
 * page dir/index.html, and unless no_images dir/patching.png (and patching_positions.png);
 * *names gets the files' names (patching.json last), *n_names their count. Prints the
 * error; 0 or EXIT_FAIL. */
/* Writes dir/index.html, the patching page of json (patching.json's text); prints the
 * error as cmd's; 0 or EXIT_FAIL. */
int patch_page_write(const char *dir, const char *json, const char *cmd);

int patch_write(const hs_model *m, const patch_request *q, const patch_pairs *pp,
                const hs_patch_result *r, const hs_patch_result *re, const char *dir,
                int no_images, char ***names, int *n_names);

#endif
