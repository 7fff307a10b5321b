/*
 * headscope/npy.h — NumPy .npy files (format 1.0, little-endian, C order).
 *
 *     size_t shape[4] = {L, H, n, n};
 *     hs_npy_write_f32("attn.npy", attn, shape, 4, &err);   // written atomically
 */
#ifndef HEADSCOPE_NPY_H
#define HEADSCOPE_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "headscope/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hs_npy_dtype { HS_NPY_F32 = 0, HS_NPY_I32 = 1 } hs_npy_dtype;

/* Encodes a whole .npy file ('<f4' or '<i4') into a malloc'd buffer *out of *out_len
 * bytes (caller frees). ndim 0..8. */
hs_status hs_npy_encode(const void *data, hs_npy_dtype dt, const size_t *shape, int ndim,
                        unsigned char **out, size_t *out_len, hs_error *err);

/* Writes a float32 array as .npy to path; writes a new temporary file beside it then renames, so a failed
 * write never leaves a partial file under path. */
hs_status hs_npy_write_f32(const char *path, const float *data, const size_t *shape, int ndim,
                           hs_error *err);

/* A float32 .npy file written piece by piece in C order (the maps of one layer at a time,
 * as hs_forward reports them), so the whole array is never held in memory. Data goes to
 * a new temporary file beside path; hs_npy_stream_close(s, 1, ...) checks that exactly the shape's element count
 * was written and renames it to path, hs_npy_stream_close(s, 0, NULL) removes it.
 *     hs_npy_stream *s;  hs_npy_stream_open("attn.npy", shape, 4, &s, &err);
 *     ... hs_npy_stream_write(s, probs, H * n * n, &err) per layer ...
 *     hs_npy_stream_close(s, 1, &err);
 * Both close calls free s. */
typedef struct hs_npy_stream hs_npy_stream;
hs_status hs_npy_stream_open(const char *path, const size_t *shape, int ndim,
                             hs_npy_stream **out, hs_error *err);
hs_status hs_npy_stream_write(hs_npy_stream *s, const float *data, size_t count, hs_error *err);
hs_status hs_npy_stream_close(hs_npy_stream *s, int commit, hs_error *err);

/* An array read from a .npy file; free with hs_npy_free. */
typedef struct hs_npy {
    hs_npy_dtype dtype;
    int ndim;
    size_t shape[8];
    size_t count; /* product of shape */
    void *data;   /* float or int32_t, count elements */
} hs_npy;

/* Reads a format 1.0/2.0 .npy with '<f4' or '<i4' (also '<i8' narrowed to int32 when every
 * value fits), C order. */
hs_status hs_npy_read(const char *path, hs_npy *out, hs_error *err);
void hs_npy_free(hs_npy *a);

#ifdef __cplusplus
}
#endif
#endif /* HEADSCOPE_NPY_H */
