/* Progress on stderr. A corpus run: a line rewritten in place when stderr is a terminal, or
 * one JSON object per line with --progress=json (fields in docs/corpus.md#progress). A single
 * text: a line per phase of the analysis that lasts over a second (the model's loading, the
 * forward pass, the ablation, ...), with an ETA (docs/analyze.md). */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cli_progress_start(cli_progress *p, int mode)
{
    *p = (cli_progress){.mode = mode, .t0 = cli_now(), .last = -1};
}

static void clock_text(double s, char *buf, size_t cap)
{
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
}

void cli_progress_update(cli_progress *p, long done, long total, long new_done, long new_tokens,
                         int final)
{
    if (p->mode == CLI_PROGRESS_NONE)
        return;
    double t = cli_now(), el = t - p->t0;
    if (p->mode == CLI_PROGRESS_TTY && !final && p->last >= 0 && t - p->last < 0.2)
        return;
    p->last = t;
    double tps = el > 0 ? (double)new_tokens / el : 0;
    double eta = total >= done && new_done > 0 ? (double)(total - done) * el / (double)new_done : NAN;
    if (p->mode == CLI_PROGRESS_JSON) {
        fprintf(stderr, "{\"event\":\"%s\",\"texts_done\":%ld,\"texts_total\":", final ? "done" : "progress", done);
        if (total >= 0)
            fprintf(stderr, "%ld", total);
        else
            fputs("null", stderr);
        fprintf(stderr, ",\"tokens\":%ld,\"elapsed_s\":%.3f,\"tokens_per_s\":%.1f,\"eta_s\":",
                new_tokens, el, tps);
        if (isfinite(eta) && !final)
            fprintf(stderr, "%.1f}\n", eta);
        else
            fputs(final ? "0}\n" : "null}\n", stderr);
        fflush(stderr);
        return;
    }
    char e[32] = "";
    if (isfinite(eta)) {
        clock_text(eta, e + 6, sizeof e - 6);
        e[0] = ',', e[1] = ' ', e[2] = 'E', e[3] = 'T', e[4] = 'A', e[5] = ' ';
    }
    if (total >= 0)
        fprintf(stderr, "\rheadscope: analyze: %ld/%ld texts, %.0f tokens/s%s   ", done, total, tps, e);
    else
        fprintf(stderr, "\rheadscope: analyze: %ld texts, %.0f tokens/s   ", done, tps);
    p->open = 1;
    if (final) {
        fputc('\n', stderr);
        p->open = 0;
    }
    fflush(stderr);
}

void cli_progress_end(cli_progress *p)
{
    if (p->mode == CLI_PROGRESS_TTY && p->open)
        fputc('\n', stderr);
    p->open = 0;
}

/* A single text's phases: the pipeline reports each stage as it begins and the counted
 * steps of the long ones (hs_analyze_opts.progress); on a terminal a thread redraws the
 * line every 0.2 s once a phase has lasted a second, so that no phase over a second goes
 * unseen, with an ETA where the phase is counted and the time so far where it is not;
 * with --progress=json each report is a JSON line. */
static struct {
    pthread_mutex_t mu;
    pthread_t thread;
    int mode, running, stop;
    char what[64];     /* the phase */
    int done, total;   /* its last report (total 0: uncounted) */
    double t0;         /* its start */
    int open;          /* a line without its newline is on stderr */
    size_t width;      /* that line's length, to blank it out */
    double start;      /* the run's start */
    double show_after; /* a phase's line appears after this long (1 s; the test hook
                          HEADSCOPE_TEST_PHASE_SHOW=now: at every report, from the caller) */
} phase = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The phase's line, its ETA from the rate since it began (NAN when not counted). */
static double phase_eta(double t)
{
    if (phase.total <= 0 || phase.done <= 0 || phase.done >= phase.total)
        return NAN;
    return (t - phase.t0) / (double)phase.done * (double)(phase.total - phase.done);
}

/* Draws the line (mutex held). */
static void phase_draw(double t)
{
    char line[160], c[32];
    int n;
    double eta = phase_eta(t);
    if (phase.total > 0) {
        n = snprintf(line, sizeof line, "headscope: analyze: %s %d/%d", phase.what, phase.done,
                     phase.total);
        if (isfinite(eta)) {
            clock_text(eta, c, sizeof c);
            n += snprintf(line + n, sizeof line - (size_t)n, ", ETA %s", c);
        }
    } else {
        clock_text(t - phase.t0, c, sizeof c);
        n = snprintf(line, sizeof line, "headscope: analyze: %s, %s so far", phase.what, c);
    }
    size_t len = n > 0 && (size_t)n < sizeof line ? (size_t)n : strlen(line);
    fprintf(stderr, "\r%s%*s", line, phase.width > len ? (int)(phase.width - len) : 0, "");
    phase.width = len;
    phase.open = 1;
    fflush(stderr);
}

/* Ends an open line (mutex held). */
static void phase_newline(void)
{
    if (phase.open)
        fputc('\n', stderr);
    phase.open = 0;
    phase.width = 0;
}

static void *phase_thread(void *arg)
{
    (void)arg;
    struct timespec nap = {0, 200000000};
    pthread_mutex_lock(&phase.mu);
    while (!phase.stop) {
        double t = cli_now();
        if (phase.what[0] && (phase.open || t - phase.t0 >= phase.show_after))
            phase_draw(t);
        pthread_mutex_unlock(&phase.mu);
        nanosleep(&nap, NULL);
        pthread_mutex_lock(&phase.mu);
    }
    pthread_mutex_unlock(&phase.mu);
    return NULL;
}

void cli_progress_hold(int on)
{
    if (on) {
        pthread_mutex_lock(&phase.mu);
        phase_newline();
    } else {
        pthread_mutex_unlock(&phase.mu);
    }
}

void cli_phase_progress_start(int mode)
{
    sigset_t all, old;
    phase.mode = mode;
    phase.start = cli_now();
    phase.what[0] = 0;
    phase.stop = 0;
    const char *hook = getenv("HEADSCOPE_TEST_PHASE_SHOW");
    phase.show_after = hook && !strcmp(hook, "now") ? 0 : 1.0;
    if (mode != CLI_PROGRESS_TTY || phase.show_after == 0)
        return;
    /* the thread takes no signal: they stay the main thread's (their handlers remove the
       run's temporary files) */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    phase.running = pthread_create(&phase.thread, NULL, phase_thread, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void cli_phase_progress_end(void)
{
    if (phase.running) {
        pthread_mutex_lock(&phase.mu);
        phase.stop = 1;
        pthread_mutex_unlock(&phase.mu);
        pthread_join(phase.thread, NULL);
        phase.running = 0;
    }
    pthread_mutex_lock(&phase.mu);
    phase_newline();
    if (phase.mode == CLI_PROGRESS_JSON && phase.what[0]) {
        fprintf(stderr, "{\"event\":\"done\",\"elapsed_s\":%.3f}\n", cli_now() - phase.start);
        fflush(stderr);
    }
    phase.what[0] = 0;
    phase.mode = CLI_PROGRESS_NONE;
    pthread_mutex_unlock(&phase.mu);
}

void cli_phase_progress(void *user, const char *what, int done, int total)
{
    (void)user;
    double t = cli_now();
    pthread_mutex_lock(&phase.mu);
    if (phase.mode == CLI_PROGRESS_NONE) {
        pthread_mutex_unlock(&phase.mu);
        return;
    }
    if (strcmp(phase.what, what) || done < phase.done) { /* a new phase: its rate from here */
        if (phase.open && phase.mode == CLI_PROGRESS_TTY) {
            phase_draw(t); /* its last state stays on its line */
            phase_newline();
        }
        snprintf(phase.what, sizeof phase.what, "%s", what);
        phase.t0 = t;
    }
    phase.done = done;
    phase.total = total;
    if (phase.mode == CLI_PROGRESS_TTY && phase.show_after == 0)
        phase_draw(t);
    if (phase.mode == CLI_PROGRESS_JSON) {
        double eta = phase_eta(t);
        fprintf(stderr, "{\"event\":\"phase\",\"phase\":\"%s\",\"done\":%d,\"total\":%d,"
                "\"elapsed_s\":%.3f,\"eta_s\":", phase.what, done, total, t - phase.start);
        if (isfinite(eta))
            fprintf(stderr, "%.1f}\n", eta);
        else
            fputs(done > 0 && done == total ? "0}\n" : "null}\n", stderr);
        fflush(stderr);
    }
    pthread_mutex_unlock(&phase.mu);
}
