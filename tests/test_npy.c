/* NumPy .npy writer and reader: checked against the byte layout of the format spec
 * (format 1.0: magic, version, little-endian header length, dict padded with spaces
 * and a newline to a multiple of 64 bytes) and against files written by numpy. */
#include <string.h>

#include "testutil.h"

Test(npy, encodes_2d_float_header_and_data_exactly)
{
    float data[6] = {0.0f, 1.0f, -2.0f, 0.5f, 3.25f, -0.125f};
    size_t shape[2] = {2, 3};
    unsigned char *buf;
    size_t len;
    cr_assert_eq(hs_npy_encode(data, HS_NPY_F32, shape, 2, &buf, &len, NULL), HS_OK);
    const char dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    /* 10 bytes of prelude + 59-byte dict + '\n' = 70, padded to the next multiple of 64 */
    cr_assert_eq(strlen(dict), 59);
    cr_assert_eq(len, 128 + 24);
    cr_assert(memcmp(buf, "\x93NUMPY\x01\x00", 8) == 0);
    cr_assert_eq(buf[8] | (buf[9] << 8), 128 - 10);
    cr_assert(memcmp(buf + 10, dict, strlen(dict)) == 0);
    for (size_t i = 10 + strlen(dict); i < 127; i++)
        cr_assert_eq(buf[i], ' ');
    cr_assert_eq(buf[127], '\n');
    /* 1.0f = 0x3f800000 little-endian; -2.0f = 0xc0000000 */
    cr_assert(memcmp(buf + 128 + 4, "\x00\x00\x80\x3f", 4) == 0);
    cr_assert(memcmp(buf + 128 + 8, "\x00\x00\x00\xc0", 4) == 0);
    free(buf);
}

Test(npy, encodes_1d_shape_with_trailing_comma)
{
    int32_t data[5] = {1, 2, 3, 4, 5};
    size_t shape[1] = {5};
    unsigned char *buf;
    size_t len;
    cr_assert_eq(hs_npy_encode(data, HS_NPY_I32, shape, 1, &buf, &len, NULL), HS_OK);
    char hdr[129];
    memcpy(hdr, buf, 128);
    hdr[128] = '\0';
    cr_assert_eq(len, 128 + 20);
    cr_assert_not_null(strstr(hdr + 10, "'descr': '<i4'"));
    cr_assert_not_null(strstr(hdr + 10, "'shape': (5,)"));
    free(buf);
}

Test(npy, reads_file_written_by_numpy)
{
    /* fixtures/golden ids are written by numpy.save in the reference script */
    hs_npy a = tu_npy("fixtures/golden/tiny_gpt2_hello.ids.npy");
    cr_assert_eq(a.dtype, HS_NPY_I32);
    cr_assert_eq(a.ndim, 1);
    cr_assert_eq(a.count, 2);
    const int32_t *ids = a.data;
    cr_assert_eq(ids[0], 15496); /* GPT-2 "Hello world" */
    cr_assert_eq(ids[1], 995);
    hs_npy_free(&a);
}

Test(npy, write_then_read_round_trips)
{
    char dir[64], path[128];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/a.npy", dir);
    float data[24];
    for (int i = 0; i < 24; i++)
        data[i] = (float)i * 0.37f - 3.0f;
    size_t shape[3] = {2, 3, 4};
    cr_assert_eq(hs_npy_write_f32(path, data, shape, 3, NULL), HS_OK);
    hs_npy a = tu_npy(path);
    cr_assert_eq(a.ndim, 3);
    cr_assert_eq(a.shape[0], 2);
    cr_assert_eq(a.shape[2], 4);
    cr_assert(memcmp(a.data, data, sizeof data) == 0);
    hs_npy_free(&a);
    tu_rm_rf(dir);
}

Test(npy, write_to_missing_directory_fails_without_leaving_files)
{
    float x = 1.0f;
    size_t shape[1] = {1};
    hs_error err = {{0}};
    cr_assert_eq(hs_npy_write_f32("/nonexistent-dir/a.npy", &x, shape, 1, &err), HS_E_IO);
    cr_assert_not_null(strstr(err.msg, "cannot write '/nonexistent-dir/a.npy'"), "%s", err.msg);
}

Test(npy, rejects_truncated_data)
{
    char dir[64], path[128];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/t.npy", dir);
    float data[4] = {1, 2, 3, 4};
    size_t shape[1] = {4};
    unsigned char *buf;
    size_t len;
    cr_assert_eq(hs_npy_encode(data, HS_NPY_F32, shape, 1, &buf, &len, NULL), HS_OK);
    tu_write_file(path, buf, len - 3);
    free(buf);
    hs_npy a;
    hs_error err = {{0}};
    cr_assert_eq(hs_npy_read(path, &a, &err), HS_E_FORMAT);
    cr_assert_not_null(strstr(err.msg, "truncated"), "%s", err.msg);
    tu_rm_rf(dir);
}

Test(npy, rejects_bad_magic_and_float64)
{
    char dir[64], path[128];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/m.npy", dir);
    tu_write_file(path, "NOTNUMPY..........", 18);
    hs_npy a;
    hs_error err = {{0}};
    cr_assert_eq(hs_npy_read(path, &a, &err), HS_E_FORMAT);
    cr_assert_not_null(strstr(err.msg, "bad magic"), "%s", err.msg);
    const char f8[] = "\x93NUMPY\x01\x00\x3a\x00{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }\n"
                      "\0\0\0\0\0\0\xf0\x3f";
    tu_write_file(path, f8, sizeof f8 - 1);
    cr_assert_eq(hs_npy_read(path, &a, &err), HS_E_DTYPE);
    tu_rm_rf(dir);
}

/* The file writer (header, then the floats as they lie) gives exactly the bytes of the
 * in-memory encoder, for 1-D to 4-D shapes. */
Test(npy, file_writer_equals_encoder)
{
    static const size_t shapes[4][4] = {{5}, {3, 7}, {2, 3, 4}, {2, 2, 3, 5}};
    float data[60];
    for (int i = 0; i < 60; i++)
        data[i] = (float)i * 0.25f - 3.0f;
    char dir[64], path[128];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/a.npy", dir);
    for (int nd = 1; nd <= 4; nd++) {
        hs_error err = {{0}};
        unsigned char *enc = NULL;
        size_t len = 0;
        cr_assert_eq(hs_npy_encode(data, HS_NPY_F32, shapes[nd - 1], nd, &enc, &len, &err), HS_OK);
        cr_assert_eq(hs_npy_write_f32(path, data, shapes[nd - 1], nd, &err), HS_OK, "%s", err.msg);
        FILE *f = fopen(path, "rb");
        unsigned char got[1024];
        size_t n = fread(got, 1, sizeof got, f);
        fclose(f);
        cr_assert_eq(n, len);
        cr_assert_eq(memcmp(got, enc, len), 0, "%d-D file differs from the encoder", nd);
        free(enc);
    }
    tu_rm_rf(dir);
}
