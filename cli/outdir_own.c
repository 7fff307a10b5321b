/* What headscope may remove from an output folder: only files it can tell it wrote, by the
 * fixed names and patterns of its own outputs (docs/analyze.md#the-output-folder). An
 * earlier run's listing (report.json's "files", dump's manifest.json) is read as a list of
 * candidates, never as proof: a name outside these patterns (notes.txt, data.csv) is never removed, whatever a
 * report.json says. The same patterns bound what is removed from the staging folder a
 * killed run left behind. */
#define _DEFAULT_SOURCE /* fdopendir, openat */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "cli.h"
#include "core/core.h"
#include "io/io_internal.h"

/* The outputs of analyze (single text and corpus), merge and dump with fixed names. */
static const char *const fixed_names[] = {
    "report.json",    "index.html",        "texts.jsonl",       "partial.json",
    "gallery.png",    "similarity.png",    "kv_similarity.png", "kv_similarity.svg",
    "importance.png", "dla.png",           "rollout.png",       "flow.png",
    "composition.png", "manifest.json",    "input_ids.npy",
    "patching.json",  "patching.png",      "patching_positions.png",
    "ln_final.hook_normalized.npy", "logits.npy",
};

/* Skips 1 to 9 ASCII digits; returns how many (0: none there, or too many). */
static int digits(const char **s)
{
    int n = 0;
    while ((*s)[n] >= '0' && (*s)[n] <= '9')
        n++;
    if (n > 9)
        return 0;
    *s += n;
    return n;
}

/* A head's picture: L{l}_H{h}.png, .svg or .words.png; an encoder-decoder's with enc_,
 * dec_ or cross_ before the L (its three kinds of heads). */
static int head_picture(const char *s)
{
    static const char *const kinds[] = {"enc_", "dec_", "cross_"};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (!strncmp(s, kinds[i], strlen(kinds[i]))) {
            s += strlen(kinds[i]);
            break;
        }
    if (*s++ != 'L' || !digits(&s) || *s++ != '_' || *s++ != 'H' || !digits(&s))
        return 0;
    return !strcmp(s, ".png") || !strcmp(s, ".svg") || !strcmp(s, ".words.png");
}

/* One of dump's activations: blocks.{l}.{hook}.npy, the hook of lower-case letters, '_'
 * and '.' (attn.hook_q, hook_resid_pre, attn.norm_pattern). */
static int dump_name(const char *s)
{
    if (strncmp(s, "blocks.", 7))
        return 0;
    s += 7;
    if (!digits(&s) || *s++ != '.')
        return 0;
    size_t n = strlen(s);
    if (n <= 4 || strcmp(s + n - 4, ".npy"))
        return 0;
    for (size_t i = 0; i < n - 4; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || s[i] == '_' || s[i] == '.'))
            return 0;
    return 1;
}

/* Six letters or digits and the end of the string: mkstemp's and mkdtemp's XXXXXX. */
static int random_suffix(const char *s)
{
    for (int i = 0; i < 6; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
            return 0;
    }
    return s[6] == 0;
}

/* The length of name without a writer's temporary suffix ".tmp-XXXXXX", or its whole
 * length when it has none. */
static size_t without_tmp(const char *name)
{
    size_t n = strlen(name);
    return n >= 11 && !memcmp(name + n - 11, ".tmp-", 5) && random_suffix(name + n - 6) ? n - 11 : n;
}

int cli_own_output_name(const char *rel, int allow_tmp)
{
    char name[96];
    size_t n = allow_tmp ? without_tmp(rel) : strlen(rel);
    if (n >= sizeof name)
        return 0;
    memcpy(name, rel, n);
    name[n] = 0;
    if (!strncmp(name, "heads/", 6))
        return head_picture(name + 6);
    for (size_t i = 0; i < sizeof fixed_names / sizeof *fixed_names; i++)
        if (!strcmp(name, fixed_names[i]))
            return 1;
    return dump_name(name);
}

/* The "files" list of dir/name (an earlier report.json or dump's manifest.json); NULL when
 * there is none, or the file is not a plain file (a link or a FIFO is not read). Only that
 * list is read (hs_report_files_read scans the file a block at a time). */
static cJSON *earlier_list(const char *dir, const char *name)
{
    char *rp = cli_path_join(dir, name);
    struct stat sb;
    cJSON *files = rp && lstat(rp, &sb) == 0 && S_ISREG(sb.st_mode) ? hs_report_files_read(rp) : NULL;
    free(rp);
    return files;
}

/* Removes dir/name when it is one of headscope's names and not among the n_files; heads:
 * 1 when dir/heads is a real folder, set to 2 when a picture in it went. */
static void prune_one(const char *dir, const char *name, const char *const *files, int n_files,
                      int *heads)
{
    int in_heads = !strncmp(name, "heads/", 6);
    if (!cli_own_output_name(name, 0) || (in_heads && !*heads))
        return;
    for (int i = 0; i < n_files; i++)
        if (!strcmp(files[i], name))
            return;
    char *p = cli_path_join(dir, name);
    if (p && unlink(p) == 0 && in_heads) /* best effort: what cannot be removed stays */
        *heads = 2;
    free(p);
}

void cli_outdir_prune(const char *dir, const char *const *files, int n_files)
{
    /* a name under heads/ is removed only when heads is a real folder, not a link */
    char *hp = cli_path_join(dir, "heads");
    struct stat hs;
    int heads = hp && lstat(hp, &hs) == 0 && S_ISDIR(hs.st_mode);
    /* report.json lists names (itself too); dump's manifest.json objects with a "file" */
    cJSON *report = earlier_list(dir, "report.json"), *manifest = earlier_list(dir, "manifest.json");
    cJSON *patching = earlier_list(dir, "patching.json"); /* patch's: names, as report.json */
    cJSON *it;
    cJSON_ArrayForEach(it, report)
    {
        if (cJSON_IsString(it))
            prune_one(dir, it->valuestring, files, n_files, &heads);
    }
    cJSON_ArrayForEach(it, patching)
    {
        if (cJSON_IsString(it))
            prune_one(dir, it->valuestring, files, n_files, &heads);
    }
    cJSON_ArrayForEach(it, manifest)
    {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(it, "file");
        if (cJSON_IsString(f))
            prune_one(dir, f->valuestring, files, n_files, &heads);
    }
    if (manifest)
        prune_one(dir, "manifest.json", files, n_files, &heads);
    cJSON_Delete(report);
    cJSON_Delete(manifest);
    cJSON_Delete(patching);
    if (hp && heads == 2)
        rmdir(hp); /* when nothing else is in it */
    free(hp);
}

/* Removes from the folder open as fd the entries named as headscope's outputs (with
 * writers' temporary suffixes), and its heads/ folder's; the folder itself is removed
 * only when nothing else was in it. */
static void empty_stage(int fd)
{
    DIR *d = fdopendir(fd);
    struct dirent *e;
    if (!d) {
        close(fd);
        return;
    }
    while ((e = readdir(d))) {
        struct stat sb;
        if (fstatat(fd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISDIR(sb.st_mode) && !strcmp(e->d_name, "heads")) {
            int hfd = openat(fd, "heads", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            DIR *h = hfd >= 0 ? fdopendir(hfd) : NULL;
            struct dirent *he;
            while (h && (he = readdir(h))) {
                char rel[300];
                snprintf(rel, sizeof rel, "heads/%s", he->d_name);
                if (cli_own_output_name(rel, 1))
                    unlinkat(hfd, he->d_name, 0);
            }
            if (h)
                closedir(h);
            else if (hfd >= 0)
                close(hfd);
            unlinkat(fd, "heads", AT_REMOVEDIR);
        } else if (!S_ISDIR(sb.st_mode) && cli_own_output_name(e->d_name, 1)) {
            unlinkat(fd, e->d_name, 0);
        }
    }
    closedir(d);
}

/* ".headscope-run-" then "{pid}-XXXXXX" (this version) or "XXXXXX" (earlier ones): the pid
 * into *pid (0 when the name has none); 0 when name is not a staging folder's. */
static int stage_name(const char *name, long *pid)
{
    if (strncmp(name, ".headscope-run-", 15))
        return 0;
    const char *s = name + 15, *dash = strchr(s, '-');
    *pid = 0;
    if (dash) {
        const char *p = s;
        if (!digits(&p) || p != dash)
            return 0;
        *pid = strtol(s, NULL, 10);
        s = dash + 1;
    }
    return random_suffix(s);
}

void cli_outdir_sweep(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d)
        return;
    int dfd = dirfd(d);
    while ((e = readdir(d))) {
        long pid;
        struct stat sb;
        if (!stage_name(e->d_name, &pid))
            continue;
        /* the folder's lock is held: no live run writes here; a pid still running is
           left alone all the same (it could be a run on an older headscope) */
        if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM))
            continue;
        if (fstatat(dfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(sb.st_mode) ||
            sb.st_uid != geteuid())
            continue;
        int fd = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue;
        empty_stage(fd);
        unlinkat(dfd, e->d_name, AT_REMOVEDIR); /* fails, and stays, when anything else is in it */
    }
    closedir(d);
}

/* Adds dir's entries with headscope's output names (prefix "heads/" for the pictures
 * folder) to *n, the first few to list; the heads folder only when a real folder. */
static void count_own(const char *dir, const char *prefix, int *n, char *list, size_t cap)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d)
        return;
    while ((e = readdir(d))) {
        char rel[300];
        struct stat sb;
        snprintf(rel, sizeof rel, "%s%s", prefix, e->d_name);
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (!*prefix && S_ISDIR(sb.st_mode) && !strcmp(e->d_name, "heads")) {
            char *hp = cli_path_join(dir, "heads");
            if (hp)
                count_own(hp, "heads/", n, list, cap);
            free(hp);
            continue;
        }
        if (!S_ISREG(sb.st_mode) || !cli_own_output_name(rel, 0))
            continue;
        size_t used = strlen(list);
        if (*n < 3 && used + strlen(rel) + 3 < cap)
            snprintf(list + used, cap - used, "%s%s", *n ? ", " : "", rel);
        else if (*n == 3 && used + 6 < cap)
            snprintf(list + used, cap - used, ", ...");
        (*n)++;
    }
    closedir(d);
}

int cli_outdir_earlier(const char *dir, char *list, size_t cap)
{
    int n = 0;
    if (cap)
        list[0] = 0;
    count_own(dir, "", &n, list, cap);
    return n;
}
