/*
 * headscope/status.h — status codes and the caller-owned error buffer.
 *
 * Every fallible library function returns an hs_status (0 on success, a
 * negative code on failure) and, when given a non-NULL hs_error, writes a
 * one-line, lowercase, human-readable message into it naming the problem:
 *
 *     hs_error err = {0};
 *     hs_model *m = NULL;
 *     hs_status st = hs_model_load("gpt2/", &m, &err);
 *     if (st != HS_OK) fprintf(stderr, "headscope: %s\n", err.msg);
 *
 * The library never prints, exits or aborts on bad input. Messages hold no control
 * characters: strings quoted from files (a config value, a token, a tensor name) are
 * escaped as by hs_text_escape, so a message is always one line and safe on a terminal.
 */
#ifndef HEADSCOPE_STATUS_H
#define HEADSCOPE_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hs_status {
    HS_OK = 0,
    HS_E_IO = -1,          /* a file could not be opened, read or written */
    HS_E_FORMAT = -2,      /* a file is malformed (bad magic, truncated, bad JSON, ...) */
    HS_E_SHAPE = -3,       /* a tensor or array has the wrong shape */
    HS_E_DTYPE = -4,       /* an unsupported or unexpected element type */
    HS_E_VALUE = -5,       /* a numeric value is invalid (NaN/Inf weight, bad config value) */
    HS_E_NOMEM = -6,       /* an allocation failed or a size overflowed */
    HS_E_INPUT = -7,       /* bad user input: empty or invalid UTF-8 text, too many tokens, ... */
    HS_E_UNSUPPORTED = -8, /* a valid input that headscope does not handle */
    HS_E_ARG = -9          /* a caller passed an invalid argument (programmer error) */
} hs_status;

#define HS_ERROR_MSG_MAX 512

/* Caller-owned error buffer; msg is always NUL-terminated after a failure. */
typedef struct hs_error {
    char msg[HS_ERROR_MSG_MAX];
} hs_error;

/* Copies the NUL-terminated src into dst (cap bytes, cap >= 1; always NUL-terminated,
 * cut at a character boundary when full), escaping what a terminal would act on: C0
 * controls and DEL as \n, \r, \t or \xNN, the C1 controls U+0080..U+009F as \u00NN,
 * and bytes that are not part of valid UTF-8 as \xNN. Other text is copied unchanged.
 * dst and src must not overlap. Returns the number of bytes written, NUL excluded. */
size_t hs_text_escape(char *dst, size_t cap, const char *src);

/* Returns a static, lowercase description of a status code ("ok", "i/o error", ...). */
const char *hs_status_str(hs_status st);

/* Writes len bytes of data to path atomically: a new temporary file beside it (O_EXCL, never
 * through a planted symlink), fsync, rename; on failure the temporary file is removed and
 * path is left as it was. (headscope/report.h, which declared it first, includes this
 * header.) */
hs_status hs_file_write_atomic(const char *path, const void *data, size_t len, hs_error *err);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_STATUS_H */
