/* Read-only mappings of input files (safetensors, pytorch_model.bin). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

hs_status hs_file_map(const char *path, unsigned char **map, size_t *len, hs_error *err)
{
    *map = NULL;
    *len = 0;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0)
        return hs_fail(err, HS_E_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    hs_status st = HS_OK;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = hs_fail(err, HS_E_IO, "'%s' is not a regular file", path);
    } else if (sb.st_size > 0) { /* mmap refuses an empty file; the caller says why it is wrong */
        void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            st = hs_fail(err, HS_E_IO, "cannot map '%s': %s", path, strerror(errno));
        } else {
            *map = p;
            *len = (size_t)sb.st_size;
        }
    }
    close(fd);
    return st;
}
