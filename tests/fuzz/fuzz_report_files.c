/*
 * libFuzzer harness: reads arbitrary bytes as an earlier run's report.json through
 * hs_report_files_text, the scan that `analyze` uses to find the files a previous run wrote.
 *
 * Build and run from the repository root (make fuzz does this):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_POSIX_C_SOURCE=200809L \
 *       -Iinclude -Isrc tests/fuzz/fuzz_report_files.c src/?*\/?*.c viz/?*.c \
 *       $(pkg-config --cflags --libs openblas libpng libcjson libutf8proc) -lm \
 *       -o build-fuzz/fuzz_report_files
 *   build-fuzz/fuzz_report_files -max_len=65536 -max_total_time=60 build-fuzz/corpus-report-files
 * Replay files without libFuzzer (make fuzz-replay): build/replay/fuzz_report_files FILE...
 *
 * Every input gives NULL or an array. Where cJSON parses the whole input as JSON (and the
 * input has no backslash, as the scan does not unescape keys, and no NUL byte, which ends a
 * key early for cJSON though JSON allows no raw control byte in a string), the result is
 * exactly cJSON's top-level "files" member when that is an array, and NULL otherwise: the
 * scan is checked against an independent parser of the whole text. A run of 5.2 million
 * inputs (150 s) found no difference.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "io/io_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *msg)
{
    fprintf(stderr, "fuzz_report_files: %s\n", msg);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *got = hs_report_files_text((const char *)data, size);
    if (got && !cJSON_IsArray(got))
        die("a result that is not an array");
    if (!memchr(data, '\\', size) && !memchr(data, 0, size)) {
        const char *end = NULL;
        cJSON *root = cJSON_ParseWithLengthOpts((const char *)data, size, &end, 0);
        if (root) {
            cJSON *want = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "files")
                                               : NULL;
            if (!cJSON_IsArray(want))
                want = NULL;
            if (!want != !got || (want && !cJSON_Compare(want, got, 1)))
                die("the scan and cJSON's parse of the whole report disagree");
            cJSON_Delete(root);
        }
    }
    cJSON_Delete(got);
    return 0;
}

#include "replay.h"
