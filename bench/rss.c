/* Peak resident memory of a headscope command, measured from outside (wait4's ru_maxrss),
 * for the memory rows of `make bench`. */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "bench.h"

double bench_peak_rss_mb(const char *const argv[], double *seconds)
{
    return bench_run_rss_mb(argv, seconds, NULL, NULL);
}

double bench_run_rss_mb(const char *const argv[], double *seconds, const char *out, double *cpu)
{
    char *args[32];
    int k = 0;
    for (; k < 31 && argv[k]; k++)
        args[k] = strdup(argv[k]);
    args[k] = NULL;
    struct timeval t0, t1;
    gettimeofday(&t0, NULL);
    pid_t pid = fork();
    if (pid < 0) {
        for (int i = 0; i < k; i++)
            free(args[i]);
        return -1;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        int fd = out ? open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644) : null;
        if (null >= 0 && fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
        }
        execv(args[0], args);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    for (int i = 0; i < k; i++)
        free(args[i]);
    if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    gettimeofday(&t1, NULL);
    if (cpu)
        *cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
               1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    if (seconds)
        *seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-6 * (double)(t1.tv_usec - t0.tv_usec);
    return (double)ru.ru_maxrss / 1024.0; /* kilobytes on Linux */
}

/* A text of about n GPT-2 tokens (each " wordK" is one or two tokens), written to path. */
int bench_write_text(const char *path, int n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    static const char *const words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog",
                                        "ran", "far", "away", "from", "home", "today"};
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%s", i ? " " : "", words[(i * 7 + i / 5) % 14]);
    return fclose(f);
}

int bench_write_corpus(const char *path, int k, int n_words)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    static const char *const words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog",
                                        "ran", "far", "away", "from", "home", "today", "while",
                                        "birds", "sang", "in", "green", "trees"};
    for (int t = 0; t < k; t++) {
        unsigned s = 2166136261u ^ (unsigned)t;
        for (int i = 0; i < n_words; i++) {
            s = s * 1103515245u + 12345u;
            fprintf(f, "%s%s", i ? " " : "", words[(s >> 16) % 20]);
        }
        fputc('\n', f);
    }
    return fclose(f);
}
