/* The replay main of every harness (built with -DHS_FUZZ_REPLAY_MAIN, as `make fuzz-replay`
 * does): feeds each file named on the command line to LLVMFuzzerTestOneInput once and prints
 * "N passed, N failed" (a file that cannot be read fails). A harness that keeps state across
 * inputs defines HS_FUZZ_REPLAY_CLEANUP() before including this, to release it at the end.
 * Include it last. */
#ifdef HS_FUZZ_REPLAY_MAIN
#include <stdio.h>
#include <stdlib.h>

/* The whole file in a malloc'd buffer (*len bytes), or NULL. */
static unsigned char *replay_read(const char *file, size_t *len)
{
    FILE *f = fopen(file, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0, got;
    unsigned char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            unsigned char *nb = realloc(buf, cap *= 2);
            if (!nb)
                free(buf);
            buf = nb;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

int main(int argc, char **argv)
{
    int failed = 0;
    for (int i = 1; i < argc; i++) {
        size_t n = 0;
        unsigned char *buf = replay_read(argv[i], &n);
        if (!buf) {
            fprintf(stderr, "replay: cannot read '%s'\n", argv[i]);
            failed++;
            continue;
        }
        LLVMFuzzerTestOneInput(buf, n);
        free(buf);
    }
#ifdef HS_FUZZ_REPLAY_CLEANUP
    HS_FUZZ_REPLAY_CLEANUP();
#endif
    printf("%d passed, %d failed\n", argc - 1 - failed, failed);
    return failed != 0;
}
#endif
