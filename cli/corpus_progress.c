/* Progress of a corpus run on stderr: a line rewritten in place when stderr is a terminal
 * (as the single-text analyze's progress line in cmd_analyze.c), or one JSON object per line
 * with --progress=json (fields in docs/corpus.md#progress). */
#include <math.h>
#include <stdio.h>
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
