/* The output folder of every command that writes one (analyze, merge, dump): one writer at a
 * time (flock on the folder), written in a staging folder inside it and moved in at the end,
 * and left as it was when the run fails or is interrupted (a supervising parent process
 * removes what the run wrote); what may be removed from it is in cli/outdir_own.c. */
#define _DEFAULT_SOURCE  /* flock */
#define _XOPEN_SOURCE 700 /* nftw */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "io/io_internal.h"

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (type == FTW_DP)
        rmdir(path); /* best effort: what cannot be removed stays */
    else
        unlink(path);
    return 0;
}

/* Removes the staging folder and, when the run made it, the output folder. */
static void discard(cli_outdir *od)
{
    if (od->stage)
        nftw(od->stage, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (od->created)
        cli_output_dir_remove(od->path, od->created);
}

static volatile sig_atomic_t child_pid;

static void forward_signal(int sig)
{
    if (child_pid > 0)
        kill((pid_t)child_pid, sig);
}

/* The parent: waits for the worker, cleans up after a failed or killed one, and returns
 * the exit status the command should have. */
static int supervise(const char *cmd, cli_outdir *od, pid_t pid)
{
    struct sigaction fw = {0};
    fw.sa_handler = forward_signal;
    child_pid = pid;
    /* a terminal's ^C reaches both; a signal sent to this process alone goes on */
    sigaction(SIGINT, &fw, NULL);
    sigaction(SIGTERM, &fw, NULL);
    sigaction(SIGHUP, &fw, NULL);
    sigaction(SIGQUIT, &fw, NULL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_OK)
        return EXIT_OK;
    discard(od);
    if (WIFSIGNALED(status)) {
        if (isatty(STDERR_FILENO)) /* over the worker's progress line, if one is open */
            fputs("\r\033[K", stderr);
        cli_error(cmd, "interrupted by signal %d; '%s' is left as it was", WTERMSIG(status),
                  od->path);
        return 128 + WTERMSIG(status);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : EXIT_FAIL;
}

int cli_outdir_open(const char *cmd, const char *path, int staged, cli_outdir *od, int *worker)
{
    memset(od, 0, sizeof *od);
    od->fd = -1;
    *worker = 0;
    if (cli_output_dir(cmd, path, &od->created))
        return EXIT_FAIL;
    od->path = strdup(path);
    od->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (!od->path || od->fd < 0) {
        cli_error(cmd, "cannot open the output folder '%s': %s", path, strerror(errno));
        cli_outdir_close(od);
        return EXIT_FAIL;
    }
    if (flock(od->fd, LOCK_EX | LOCK_NB) != 0) {
        cli_error(cmd, "another headscope run is writing to '%s' (wait for it, or choose "
                  "another -o)", path);
        od->created = 0;
        cli_outdir_close(od);
        return EXIT_FAIL;
    }
    cli_outdir_sweep(path); /* staging folders of runs that were killed */
    char *list = od->earlier_list;
    od->earlier = cli_outdir_earlier(path, list, sizeof od->earlier_list);
    od->quiet = (staged & CLI_OUTDIR_QUIET) != 0;
    if (od->earlier && (staged & CLI_OUTDIR_NO_CLOBBER)) {
        cli_error(cmd, "'%s' holds an earlier run's outputs (%d file%s: %s) and --no-clobber "
                  "is given: choose another -o, or leave out --no-clobber to replace them",
                  path, od->earlier, od->earlier == 1 ? "" : "s", list);
        cli_outdir_close(od);
        return EXIT_FAIL;
    }
    if (!(staged & CLI_OUTDIR_STAGED)) {
        *worker = 1;
        return EXIT_OK;
    }
    char name[64]; /* the pid lets a later run tell a dead run's staging folder */
    snprintf(name, sizeof name, ".headscope-run-%ld-XXXXXX", (long)getpid());
    od->stage = cli_path_join(path, name);
    if (!od->stage || !mkdtemp(od->stage)) {
        cli_error(cmd, "cannot create a staging folder in '%s': %s", path, strerror(errno));
        free(od->stage);
        od->stage = NULL;
        cli_outdir_close(od);
        return EXIT_FAIL;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) { /* no supervisor: the run still cleans up after its own failures */
        *worker = 1;
        return EXIT_OK;
    }
    if (pid == 0) {
        *worker = 1;
        return EXIT_OK;
    }
    int rc = supervise(cmd, od, pid);
    free(od->stage); /* the worker moved it in or it was discarded */
    od->stage = NULL;
    od->created = 0;
    cli_outdir_close(od);
    return rc;
}

int cli_outdir_commit(const char *cmd, cli_outdir *od, const char *const *files, int n_files)
{
    /* OUTDIR/heads must be a real folder: nothing is removed or written through a link */
    char *heads = cli_path_join(od->path, "heads");
    struct stat hs;
    if (!heads || (lstat(heads, &hs) == 0 && !S_ISDIR(hs.st_mode))) {
        cli_error(cmd, "'%s' is not a folder (a symbolic link?); headscope writes its pictures "
                  "into a real folder there", heads ? heads : "heads");
        free(heads);
        return EXIT_FAIL;
    }
    /* what an earlier run wrote and this one does not: removed, nothing else */
    cli_outdir_prune(od->path, files, n_files);
    mkdir(heads, 0777); /* may exist */
    int rc = EXIT_OK;
    for (int i = 0; i < n_files && rc == EXIT_OK; i++) { /* report.json is last */
        char *from = cli_path_join(od->stage, files[i]), *to = cli_path_join(od->path, files[i]);
        if (!from || !to || rename(from, to) != 0) {
            cli_error(cmd, "cannot move '%s' into '%s': %s", files[i], od->path, strerror(errno));
            rc = EXIT_FAIL;
        }
        free(from);
        free(to);
    }
    rmdir(heads); /* when this run wrote no pictures and no earlier run left any */
    if (rc == EXIT_OK && !od->quiet)
        cli_outdir_replaced(cmd, od->path, od->earlier, od->earlier_list);
    free(heads);
    if (rc == EXIT_OK) {
        nftw(od->stage, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        free(od->stage);
        od->stage = NULL;
        od->created = 0;
    }
    return rc;
}

void cli_outdir_replaced(const char *cmd, const char *dir, int n, const char *list)
{
    if (n > 0)
        cli_error(cmd, "replaced the earlier run in '%s' (%d file%s%s%s)", dir, n,
                  n == 1 ? "" : "s", list && *list ? ": " : "", list ? list : "");
}

void cli_outdir_close(cli_outdir *od)
{
    discard(od);
    if (od->fd >= 0)
        close(od->fd); /* releases the lock */
    free(od->stage);
    free(od->path);
    memset(od, 0, sizeof *od);
    od->fd = -1;
}
