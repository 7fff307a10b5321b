/* bench/rss.c: peak RSS of a child command, and a long test text. */
#ifndef HEADSCOPE_BENCH_RSS_H
#define HEADSCOPE_BENCH_RSS_H

/* Runs argv (argv[0] a path) with stdout/stderr to /dev/null; returns its peak resident set
 * in MB and its wall time in *seconds (may be NULL), or -1 when it failed. */
double bench_peak_rss_mb(const char *const argv[], double *seconds);

/* Writes about n tokens of plain English words to path; 0 on success. */
int bench_write_text(const char *path, int n);

#endif
