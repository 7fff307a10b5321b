/* An input of several files, separated by lines "%%" (fuzz_folder, fuzz_resume), written to
 * one temporary folder per process. fuzz_parts splits it into at most max parts (the last
 * holds the rest), part[i] of len[i] bytes; keep_newline: each part but the last keeps the
 * newline before its separator. Returns how many parts. fuzz_dir_once makes the folder dir
 * (a mkdtemp template) the first time, cleanup registered to remove it at exit. The
 * including file defines _DEFAULT_SOURCE (mkdtemp). */
#ifndef HS_FUZZ_PARTS_H
#define HS_FUZZ_PARTS_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void fuzz_dir_once(char *dir, int *have_dir, void (*cleanup)(void))
{
    if (!*have_dir) {
        if (!mkdtemp(dir))
            abort();
        *have_dir = 1;
        atexit(cleanup);
    }
}

static int fuzz_parts(const uint8_t *data, size_t size, const uint8_t **part, size_t *len,
                      int max, int keep_newline)
{
    int parts = 1;
    part[0] = data;
    len[0] = size;
    for (size_t i = 0; parts < max && i + 4 <= len[parts - 1]; i++) {
        const uint8_t *s = part[parts - 1];
        if (memcmp(s + i, "\n%%\n", 4) == 0) {
            part[parts] = s + i + 4;
            len[parts] = len[parts - 1] - i - 4;
            len[parts - 1] = i + (keep_newline != 0);
            parts++;
            i = (size_t)-1; /* scan the new part from its start */
        }
    }
    for (int i = parts; i < max; i++)
        part[i] = NULL, len[i] = 0;
    return parts;
}
#endif
