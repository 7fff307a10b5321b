/* The temporary files being written, removed when a signal ends the process (see
 * core/core.h): a fixed table of their paths that a signal handler may read at any moment,
 * and the handlers a program installs. */
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"

/* The registry: a slot is free (0), being filled or emptied (1), or holds a path (2). Only
 * lock-free atomics and fixed buffers, so the handler may read it at any moment. */
#define TMP_PATH_MAX 4096
static struct {
    atomic_int state;
    char path[TMP_PATH_MAX];
} tmp_slots[HS_TMP_SLOTS];

/* Test hook (tests/cli_faults.sh), read by hs_tmp_signals_install: HEADSCOPE_TEST_SIGNAL_TMP=SIG
 * raises signal SIG as a temporary file is registered (the first, for a signal that ends the
 * process), as if it came from outside while the file was being written. */
static int test_signal;

void hs_tmp_register(const char *path)
{
    size_t n = strlen(path);
    if (n >= TMP_PATH_MAX)
        return;
    for (int i = 0; i < HS_TMP_SLOTS; i++) {
        int free_slot = 0;
        if (atomic_compare_exchange_strong(&tmp_slots[i].state, &free_slot, 1)) {
            memcpy(tmp_slots[i].path, path, n + 1);
            atomic_store(&tmp_slots[i].state, 2);
            if (test_signal > 0)
                raise(test_signal);
            return;
        }
    }
}

void hs_tmp_forget(const char *path)
{
    for (int i = 0; i < HS_TMP_SLOTS; i++) {
        int held = 2;
        if (atomic_load(&tmp_slots[i].state) == 2 && !strcmp(tmp_slots[i].path, path) &&
            atomic_compare_exchange_strong(&tmp_slots[i].state, &held, 1)) {
            atomic_store(&tmp_slots[i].state, 0);
            return;
        }
    }
}

/* What the handler says and removes after the temporaries (hs_tmp_on_signal): two buffers,
 * the one in use named by note_cur (-1: none), so that a new note is written into the
 * other one and then switched to in one atomic store. */
static struct {
    char line[2048];
    size_t len;
    char dir[TMP_PATH_MAX];
    int levels;
} notes[2];
static atomic_int note_cur = -1;

void hs_tmp_on_signal(const char *line, const char *dir, int levels)
{
    if (!line && !dir) {
        atomic_store(&note_cur, -1);
        return;
    }
    int k = atomic_load(&note_cur) == 0 ? 1 : 0;
    size_t n = line ? strlen(line) : 0;
    if (n >= sizeof notes[k].line)
        n = sizeof notes[k].line - 1;
    memcpy(notes[k].line, line ? line : "", n);
    notes[k].len = n;
    notes[k].dir[0] = 0;
    if (dir && strlen(dir) < TMP_PATH_MAX)
        memcpy(notes[k].dir, dir, strlen(dir) + 1);
    notes[k].levels = levels;
    atomic_store(&note_cur, k);
}

/* unlink, rmdir, write and sigaction are async-signal-safe; the signal, raised again with
 * its default action, ends the process once the handler returns (it is blocked until
 * then). */
static void remove_tmp_and_die(int sig)
{
    for (int i = 0; i < HS_TMP_SLOTS; i++)
        if (atomic_load(&tmp_slots[i].state) == 2)
            unlink(tmp_slots[i].path);
    int k = atomic_load(&note_cur);
    if (k >= 0) {
        char *d = notes[k].dir; /* the handler's own: no other note is written meanwhile */
        for (int l = 0; d[0] && l < notes[k].levels && rmdir(d) == 0; l++) {
            char *slash = strrchr(d, '/'); /* then its parent, when the run made it too */
            while (slash && slash > d && slash[1] == 0) { /* "a/b/" */
                *slash = 0;
                slash = strrchr(d, '/');
            }
            if (!slash || slash == d)
                break;
            *slash = 0;
        }
        if (notes[k].len && write(STDERR_FILENO, notes[k].line, notes[k].len) < 0)
            k = -1; /* nothing more to do: the process ends either way */
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig);
}

void hs_tmp_signals_install(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaddset(&sa.sa_mask, sigs[i]); /* one handler at a time */
    sa.sa_handler = remove_tmp_and_die;
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) /* nohup's stays */
            sigaction(sigs[i], &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGXFSZ, &sa, NULL);
    const char *t = getenv("HEADSCOPE_TEST_SIGNAL_TMP");
    test_signal = t ? atoi(t) : 0;
}
