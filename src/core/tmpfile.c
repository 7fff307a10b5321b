/* Output files appear whole or not at all, and never through a planted link: each writer
 * creates a new file of an unpredictable name beside its destination (mkstemp: O_CREAT |
 * O_EXCL, so nothing that already exists there, a symlink included, is opened), writes it,
 * syncs it and renames it over the destination. A signal that ends the process removes the
 * temporary files being written (hs_tmp_register, src/core/tmpsig.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

/* The process umask, read without changing it for good (mkstemp makes files 0600; outputs
 * get the 0666 & ~umask that fopen would have given). */
static mode_t current_umask(void)
{
    mode_t m = umask(022);
    umask(m);
    return m;
}

/* A regular file of this user with one name: nothing written through it reaches a file
 * elsewhere (a hard link planted in the output folder has two). */
static int own_single_file(const struct stat *sb)
{
    return S_ISREG(sb->st_mode) && sb->st_nlink == 1 && sb->st_uid == geteuid();
}

hs_status hs_out_open(const char *path, hs_out *o, hs_error *err)
{
    memset(o, 0, sizeof *o);
    size_t n = strlen(path);
    o->tmp = malloc(n + sizeof ".tmp-XXXXXX");
    o->path = strdup(path);
    if (!o->tmp || !o->path) {
        free(o->tmp);
        free(o->path);
        memset(o, 0, sizeof *o);
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    }
    memcpy(o->tmp, path, n);
    memcpy(o->tmp + n, ".tmp-XXXXXX", sizeof ".tmp-XXXXXX");
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        hs_status st = hs_fail(err, HS_E_IO, "cannot write '%s': %s", path, strerror(errno));
        free(o->tmp);
        free(o->path);
        memset(o, 0, sizeof *o);
        return st;
    }
    hs_tmp_register(o->tmp);
    if (fchmod(fd, 0666 & ~current_umask()) != 0 || !(o->f = fdopen(fd, "wb"))) {
        hs_status st = hs_fail(err, HS_E_IO, "cannot write '%s': %s", path, strerror(errno));
        close(fd);
        unlink(o->tmp);
        hs_tmp_forget(o->tmp);
        free(o->tmp);
        free(o->path);
        memset(o, 0, sizeof *o);
        return st;
    }
    return HS_OK;
}

hs_status hs_out_close(hs_out *o, int commit, hs_error *err)
{
    if (!o->tmp)
        return HS_OK;
    int bad = !o->f || ferror(o->f) || fflush(o->f) != 0;
    int e = errno;
    if (!bad && commit && fsync(fileno(o->f)) != 0 && errno != EINVAL && errno != EROFS)
        bad = 1, e = errno;
    if (o->f && fclose(o->f) != 0 && !bad)
        bad = 1, e = errno;
    o->f = NULL;
    if (commit && !bad && rename(o->tmp, o->path) != 0)
        bad = 1, e = errno;
    hs_status st = HS_OK;
    if (commit && bad)
        st = hs_fail(err, HS_E_IO, "cannot write '%s': %s", o->path, strerror(e ? e : EIO));
    if (!commit || bad)
        unlink(o->tmp);
    hs_tmp_forget(o->tmp); /* after the rename or unlink: until then a signal removes it */
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof *o);
    return st;
}

hs_status hs_out_reopen(const char *path, const char *tmp, long len, hs_out *o, hs_error *err)
{
    memset(o, 0, sizeof *o);
    struct stat sb;
    int fd = open(tmp, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return hs_fail(err, HS_E_IO, "cannot reopen '%s': %s", tmp, strerror(errno));
    if (fstat(fd, &sb) != 0 || !own_single_file(&sb) || len < 0 || sb.st_size < (off_t)len ||
        ftruncate(fd, (off_t)len) != 0 || lseek(fd, 0, SEEK_END) != (off_t)len) {
        close(fd);
        return hs_fail(err, HS_E_IO, "cannot reopen '%s': not a regular file of ours with one "
                       "link and at least %ld bytes", tmp, len);
    }
    o->tmp = strdup(tmp);
    o->path = strdup(path);
    if (!o->tmp || !o->path || !(o->f = fdopen(fd, "r+b"))) {
        close(fd);
        free(o->tmp);
        free(o->path);
        memset(o, 0, sizeof *o);
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    }
    return HS_OK;
}

void hs_out_keep(hs_out *o)
{
    if (o->f)
        fclose(o->f);
    if (o->tmp)
        hs_tmp_forget(o->tmp);
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof *o);
}

/* Copies len bytes of fd (from its start) to out, counting the newlines into *lines and
 * keeping the last byte in *last. Returns 0, or -1 (errno set; EINVAL: fd has fewer). */
static int copy_prefix(int fd, long len, FILE *out, long *lines, int *last)
{
    char buf[1 << 16];
    long left = len;
    while (left > 0) {
        ssize_t got = read(fd, buf, left < (long)sizeof buf ? (size_t)left : sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            if (got == 0)
                errno = EINVAL;
            return -1;
        }
        for (ssize_t i = 0; i < got; i++)
            *lines += buf[i] == '\n';
        *last = (unsigned char)buf[got - 1];
        if (fwrite(buf, 1, (size_t)got, out) != (size_t)got)
            return -1;
        left -= got;
    }
    return 0;
}

hs_status hs_out_resume(const char *path, const char *tmp, long len, hs_out *o, long *lines,
                        hs_error *err)
{
    struct stat sb = {0};
    *lines = 0;
    memset(o, 0, sizeof *o);
    int fd = open(tmp, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return hs_fail(err, HS_E_IO, "cannot open '%s': %s", tmp, strerror(errno));
    if (fstat(fd, &sb) != 0 || !own_single_file(&sb) || len < 0 || sb.st_size < (off_t)len) {
        int links = (int)sb.st_nlink;
        close(fd);
        if (S_ISREG(sb.st_mode) && links > 1)
            return hs_fail(err, HS_E_INPUT, "'%s' has %d names (a hard link to another file?)",
                           tmp, links);
        return hs_fail(err, HS_E_INPUT, "'%s' is not a regular file of ours of at least %ld bytes",
                       tmp, len);
    }
    hs_status st = hs_out_open(path, o, err);
    if (st != HS_OK) {
        close(fd);
        return st;
    }
    int last = '\n';
    if (copy_prefix(fd, len, o->f, lines, &last) != 0) {
        st = hs_fail(err, HS_E_IO, "cannot copy '%s': %s", tmp, strerror(errno));
        hs_out_close(o, 0, NULL);
    } else if (last != '\n') {
        *lines = -1;
    }
    close(fd);
    return st;
}
