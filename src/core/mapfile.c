/* Read-only mappings of input files (safetensors, pytorch_model.bin, GGUF), reference
 * counted: a model that keeps some weights in their stored type (src/model/wcache.c) takes a
 * reference to the mapping that holds them, so it outlives the reader that made it. And
 * large allocations on transparent huge pages (hs_alloc_large). */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

/* The live mappings made here (a handful: one per file or shard). */
typedef struct live_map {
    unsigned char *base;
    size_t len;
    int refs;
} live_map;

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static live_map *live;
static size_t n_live, cap_live;

/* Registers a new mapping with one reference; a mapping that cannot be registered (out of
 * memory) still works, it just cannot be retained. */
static void live_add(unsigned char *base, size_t len)
{
    pthread_mutex_lock(&live_lock);
    if (n_live == cap_live) {
        size_t cap = cap_live ? 2 * cap_live : 16;
        live_map *nl = realloc(live, cap * sizeof *nl);
        if (nl) {
            live = nl;
            cap_live = cap;
        }
    }
    if (n_live < cap_live)
        live[n_live++] = (live_map){base, len, 1};
    pthread_mutex_unlock(&live_lock);
}

int hs_file_map_fd(int fd, size_t len, unsigned char **map)
{
    void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
        return -1;
    *map = p;
    live_add(p, len);
    return 0;
}

void hs_file_unmap(void *map, size_t len)
{
    if (!map)
        return;
    int last = 1;
    pthread_mutex_lock(&live_lock);
    for (size_t i = 0; i < n_live; i++)
        if (live[i].base == map) {
            len = live[i].len;
            last = --live[i].refs == 0;
            if (last)
                live[i] = live[--n_live];
            break;
        }
    pthread_mutex_unlock(&live_lock);
    if (last)
        munmap(map, len);
}

void *hs_file_map_retain(const void *p, size_t n)
{
    const unsigned char *q = p;
    void *base = NULL;
    pthread_mutex_lock(&live_lock);
    for (size_t i = 0; i < n_live; i++)
        if (q >= live[i].base && n <= live[i].len && (size_t)(q - live[i].base) <= live[i].len - n) {
            live[i].refs++;
            base = live[i].base;
            break;
        }
    pthread_mutex_unlock(&live_lock);
    return base;
}

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
        if (hs_file_map_fd(fd, (size_t)sb.st_size, map) != 0)
            st = hs_fail(err, HS_E_IO, "cannot map '%s': %s", path, strerror(errno));
        else
            *len = (size_t)sb.st_size;
    }
    close(fd);
    return st;
}

void *hs_alloc_large(size_t bytes)
{
    size_t huge = (size_t)2 << 20;
    if (bytes < huge)
        return malloc(bytes ? bytes : 1);
    if (bytes > SIZE_MAX - huge)
        return NULL;
    size_t len = (bytes + huge - 1) / huge * huge;
    void *p = NULL;
    if (posix_memalign(&p, huge, len) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, len, MADV_HUGEPAGE);
#endif
    return p;
}

int hs_thp_advised_only(void)
{
#ifndef PR_THP_DISABLE_EXCEPT_ADVISED
#define PR_THP_DISABLE_EXCEPT_ADVISED (1 << 1)
#endif
    return prctl(PR_SET_THP_DISABLE, 1, PR_THP_DISABLE_EXCEPT_ADVISED, 0, 0) == 0 ? 0 : -1;
}
