/* Status strings, error-buffer helpers, checked arithmetic, whole-file reads, fp16/bf16. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#include "core/core.h"

const char *hs_status_str(hs_status st)
{
    switch (st) {
    case HS_OK: return "ok";
    case HS_E_IO: return "i/o error";
    case HS_E_FORMAT: return "malformed file";
    case HS_E_SHAPE: return "shape mismatch";
    case HS_E_DTYPE: return "unsupported data type";
    case HS_E_VALUE: return "invalid value";
    case HS_E_NOMEM: return "out of memory";
    case HS_E_INPUT: return "invalid input";
    case HS_E_UNSUPPORTED: return "unsupported";
    case HS_E_ARG: return "invalid argument";
    }
    return "unknown status";
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when s does not start one. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned char c = s[0];
    size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || (n == 2 && c < 0xC2) || (n == 4 && c > 0xF4))
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if ((n == 3 && c == 0xE0 && s[1] < 0xA0) || (n == 3 && c == 0xED && s[1] >= 0xA0) ||
        (n == 4 && c == 0xF0 && s[1] < 0x90) || (n == 4 && c == 0xF4 && s[1] >= 0x90))
        return 0; /* overlong, surrogate or beyond U+10FFFF */
    return n;
}

size_t hs_text_escape(char *dst, size_t cap, const char *src)
{
    const unsigned char *s = (const unsigned char *)src;
    size_t o = 0;
    while (*s) {
        char esc[8];
        const char *piece = (const char *)s;
        size_t len = utf8_len(s), adv = len ? len : 1;
        if (len == 1 && (*s < 0x20 || *s == 0x7F)) {
            len = (size_t)(*s == '\n' ? snprintf(esc, sizeof esc, "\\n")
                         : *s == '\r' ? snprintf(esc, sizeof esc, "\\r")
                         : *s == '\t' ? snprintf(esc, sizeof esc, "\\t")
                                      : snprintf(esc, sizeof esc, "\\x%02x", *s));
            piece = esc;
        } else if (len == 2 && s[0] == 0xC2 && s[1] < 0xA0) {
            len = (size_t)snprintf(esc, sizeof esc, "\\u00%02x", s[1]);
            piece = esc;
        } else if (len == 0) {
            len = (size_t)snprintf(esc, sizeof esc, "\\x%02x", *s);
            piece = esc;
        }
        if (o + len >= cap)
            break;
        memcpy(dst + o, piece, len);
        o += len;
        s += adv;
    }
    dst[o] = '\0';
    return o;
}

hs_status hs_fail(hs_error *err, hs_status st, const char *fmt, ...)
{
    if (err) {
        char raw[HS_ERROR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        hs_text_escape(err->msg, sizeof err->msg, raw);
    }
    return st;
}

void hs_error_prefix(hs_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    char raw[HS_ERROR_MSG_MAX], prefix[HS_ERROR_MSG_MAX], old[HS_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    hs_text_escape(prefix, sizeof prefix, raw);
    memcpy(old, err->msg, sizeof old);
    old[sizeof old - 1] = '\0';
    size_t pl = strlen(prefix);
    if (pl + 2 >= sizeof err->msg)
        pl = sizeof err->msg - 3;
    memcpy(err->msg, prefix, pl);
    memcpy(err->msg + pl, ": ", 2);
    size_t room = sizeof err->msg - pl - 3, ol = strlen(old);
    if (ol > room)
        ol = room;
    memcpy(err->msg + pl + 2, old, ol);
    err->msg[pl + 2 + ol] = '\0';
}

int hs_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return -1;
    *out = a * b;
    return 0;
}

int hs_add_size(size_t a, size_t b, size_t *out)
{
    if (b > SIZE_MAX - a)
        return -1;
    *out = a + b;
    return 0;
}

hs_status hs_read_file(const char *path, size_t max_len, char **data, size_t *len, hs_error *err)
{
    *data = NULL;
    *len = 0;
    /* O_NONBLOCK: a FIFO (or a device) is refused at once by name, not waited on */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return hs_fail(err, HS_E_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    FILE *f = NULL;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return hs_fail(err, HS_E_INPUT, "'%s' is not a regular file", path);
    }
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 || !(f = fdopen(fd, "rb"))) {
        int e = errno;
        close(fd);
        return hs_fail(err, HS_E_IO, "cannot open '%s': %s", path, strerror(e));
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        fclose(f);
        return hs_fail(err, HS_E_NOMEM, "out of memory reading '%s'", path);
    }
    for (;;) {
        if (n == cap) {
            if (cap >= max_len) {
                free(buf);
                fclose(f);
                return hs_fail(err, HS_E_INPUT, "'%s' is larger than %zu bytes", path, max_len);
            }
            size_t ncap = cap * 2 > max_len ? max_len : cap * 2;
            char *nb = realloc(buf, ncap + 1);
            if (!nb) {
                free(buf);
                fclose(f);
                return hs_fail(err, HS_E_NOMEM, "out of memory reading '%s'", path);
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        int e = errno;
        free(buf);
        fclose(f);
        return hs_fail(err, HS_E_IO, "cannot read '%s': %s", path, strerror(e));
    }
    fclose(f);
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return HS_OK;
}

float hs_f16_to_f32(uint16_t h)
{
    return hs_f16_to_f32_fast(h); /* one conversion, inline where decoders loop (core.h) */
}

uint16_t hs_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffffu;
    if (absx > 0x7f800000u) /* NaN: keep it quiet */
        return (uint16_t)(sign | 0x7e00 | ((absx >> 13) & 0x3ff));
    if (absx >= 0x477ff000u) /* rounds to >= 65520: infinity */
        return (uint16_t)(sign | 0x7c00);
    if (absx < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        if (absx < 0x33000000u)
            return (uint16_t)sign;
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14 + (112 - e) */
        uint32_t half = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t r = absx + 0xfff + ((absx >> 13) & 1) - (112u << 23);
    return (uint16_t)(sign | (r >> 13));
}

float hs_bf16_to_f32(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t hs_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

hs_status hs_file_write_atomic(const char *path, const void *data, size_t len, hs_error *err)
{
    return hs_file_write_atomic_parts(path, &data, &len, 1, err);
}

hs_status hs_file_write_atomic_parts(const char *path, const void *const *parts,
                                     const size_t *lens, int n_parts, hs_error *err)
{
    hs_out o;
    hs_status st = hs_out_open(path, &o, err);
    if (st)
        return st;
    for (int i = 0; i < n_parts; i++)
        if (fwrite(parts[i], 1, lens[i], o.f) != lens[i])
            break;
    return hs_out_close(&o, 1, err);
}
