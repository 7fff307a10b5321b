/* Usage errors that say what was probably meant: "did you mean '--text'?" for a misspelt
 * option or command, the candidates of an ambiguous abbreviation. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* The options every command takes (cli/main.c moves them out of argv before a command's
 * getopt_long sees it; a misspelling of one reaches the command). */
static const char *const common_names[] = {"threads", "weight-memory", "activations"};

/* Optimal string alignment distance (insertions, deletions, substitutions, adjacent
 * transpositions) between a and b, or cap + 1 when it is more than cap (or the words are
 * longer than 63 bytes). */
static int distance(const char *a, const char *b, int cap)
{
    int n = (int)strlen(a), m = (int)strlen(b);
    if (n > 63 || m > 63 || n - m > cap || m - n > cap)
        return cap + 1;
    int d[64][64];
    for (int i = 0; i <= n; i++)
        d[i][0] = i;
    for (int j = 0; j <= m; j++)
        d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < v)
                v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[n][m] <= cap ? d[n][m] : cap + 1;
}

/* The allowed distance for a word of n bytes: one edit in a short word, two from six. */
static int allowed(size_t n) { return n >= 6 ? 2 : n >= 3 ? 1 : 0; }

const char *cli_closest(const char *word, const char *const *names, int n)
{
    int cap = allowed(strlen(word)), best = cap + 1;
    const char *found = NULL;
    for (int i = 0; i < n; i++) {
        int d = distance(word, names[i], cap);
        if (d < best) {
            best = d;
            found = names[i];
        }
    }
    return found;
}

/* The closest long option of opts (and of the common ones) to name; NULL when none is
 * close. */
static const char *closest_option(const char *name, const struct option *opts)
{
    int cap = allowed(strlen(name)), best = cap + 1;
    const char *found = NULL;
    for (int i = 0; opts[i].name; i++) {
        int d = distance(name, opts[i].name, cap);
        if (d < best)
            best = d, found = opts[i].name;
    }
    for (size_t i = 0; i < sizeof common_names / sizeof *common_names; i++) {
        int d = distance(name, common_names[i], cap);
        if (d < best)
            best = d, found = common_names[i];
    }
    return found;
}

int cli_option_error(const char *cmd, int c, int argc, char **argv, const struct option *opts)
{
    const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
    char shortopt[3] = {'-', (char)optopt, 0};
    if (strncmp(arg, "--", 2) && optopt > 0 && optopt < 128)
        arg = shortopt; /* a short option, perhaps inside a cluster such as -qx */
    if (c == ':')
        return cli_usage_error(cmd, "option '%s' needs a value (see 'headscope %s --help')", arg,
                               cmd);
    if (strncmp(arg, "--", 2))
        return cli_usage_error(cmd, "unknown option '%s' (see 'headscope %s --help')", arg, cmd);
    char name[64];
    size_t len = strcspn(arg + 2, "=");
    snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), arg + 2);
    /* an abbreviation of more than one option: getopt_long takes an unambiguous one */
    char list[512] = "";
    int n_prefix = 0;
    for (int i = 0; opts[i].name; i++)
        if (*name && !strncmp(opts[i].name, name, strlen(name)) && strlen(list) + 40 < sizeof list) {
            strcat(strcat(list, n_prefix ? ", --" : "--"), opts[i].name);
            n_prefix++;
        }
    if (n_prefix > 1)
        return cli_usage_error(cmd, "unknown option '--%s': it abbreviates %s (see 'headscope "
                               "%s --help')", name, list, cmd);
    if (n_prefix == 1 && strlen(arg + 2) > len) /* --flag=value for a flag */
        return cli_usage_error(cmd, "option '--%s' takes no value (see 'headscope %s --help')",
                               name, cmd);
    const char *near = closest_option(name, opts);
    if (near)
        return cli_usage_error(cmd, "unknown option '--%s'; did you mean '--%s'? (see "
                               "'headscope %s --help')", name, near, cmd);
    return cli_usage_error(cmd, "unknown option '--%s' (see 'headscope %s --help')", name, cmd);
}
