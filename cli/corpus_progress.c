/* Progress on stderr. A corpus run: a line rewritten in place when stderr is a terminal, or
 * one JSON object per line with --progress=json (fields in docs/corpus.md#progress). A single
 * text: a line per phase of the analysis (ablation, pruning, ...), with an ETA. */
#include <math.h>
#include <stdio.h>
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

static struct {
    int open;          /* a line without its newline is on stderr */
    const char *what;  /* its phase */
    int done0, prev;   /* done at the phase's first report; at the last */
    double t0, last;   /* that report's time; the last line's */
} phase;

void cli_phase_progress_end(void)
{
    if (phase.open)
        fputc('\n', stderr);
    phase.open = 0;
}

void cli_phase_progress(void *user, const char *what, int done, int total)
{
    (void)user;
    double t = cli_now();
    if (phase.what != what || done < phase.prev) { /* a new phase: its rate from here */
        cli_phase_progress_end();
        phase.what = what;
        phase.done0 = done;
        phase.t0 = t;
        phase.last = -1;
    }
    phase.prev = done;
    if (done < total && phase.last >= 0 && t - phase.last < 0.2)
        return;
    phase.last = t;
    char e[32] = "";
    if (done > phase.done0 && done < total) {
        double eta = (t - phase.t0) / (double)(done - phase.done0) * (double)(total - done);
        clock_text(eta, e + 6, sizeof e - 6);
        memcpy(e, ", ETA ", 6);
    }
    fprintf(stderr, "\rheadscope: analyze: %s %d/%d%s   ", what, done, total, e);
    phase.open = 1;
    if (done == total)
        cli_phase_progress_end();
    fflush(stderr);
}
