/* ggml's block formats in their integer form, for the 8-bit activation products
 * (src/core/q8gemm.c): each element as a signed 8-bit integer q and each sub-block of 16
 * elements as a float scale d and offset m, value = d q + m (quant.h states the layouts).
 *
 * The integers are the block's own (a Q4_0 nibble less 8, an IQ4 grid entry, a Q3_K value
 * with its third bit), the scales the products quant.c forms in float (d times a sub-block's
 * scale), the offsets its subtracted minimums: d q + m is, term for term, the value the
 * float decoder gives, before its roundings (test_q8gemm checks it within them). */
#include <string.h>

#include "model/quant.h"

#include "core/core.h"
#include "nn/fastmath.h"
#include "model/model_internal.h"

static const int8_t iq4_grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

/* nibbles of 16 bytes: element j < 16 the low nibble of qs[j], j + 16 its high nibble */
static void nibbles(const unsigned char *qs, int8_t *q, int bias)
{
#pragma omp simd
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)((qs[j] & 0x0F) - bias);
        q[j + 16] = (int8_t)((qs[j] >> 4) - bias);
    }
}

static void q5(const unsigned char *qh4, const unsigned char *qs, int8_t *q, int bias)
{
    uint32_t qh = hs_le32(qh4);
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)(((qs[j] & 0x0F) | (int)((qh >> j) & 1) << 4) - bias);
        q[j + 16] = (int8_t)(((qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4) - bias);
    }
}

/* the d and m of two sub-blocks of 16 (one of 32) */
static void pair(float *d, float *m, float dv, float mv)
{
    d[0] = d[1] = dv;
    m[0] = m[1] = mv;
}

/* Q4_K / Q5_K's 6-bit scale and min of sub-block s (quant.c's q4_k_scale_min) */
static void k_scale_min(int s, const unsigned char *sc, int *scale, int *min)
{
    if (s < 4) {
        *scale = sc[s] & 63;
        *min = sc[s + 4] & 63;
    } else {
        *scale = (sc[s + 4] & 0x0F) | ((sc[s - 4] >> 6) << 4);
        *min = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
    }
}

static int q3_k_scale(int t, const unsigned char *sc)
{
    int low = t < 8 ? sc[t] & 0x0F : sc[t - 8] >> 4;
    return low | ((sc[8 + t % 4] >> (2 * (t / 4))) & 3) << 4;
}

/* One 32-element block of a 32-block type into q[32], d[2], m[2]. */
static inline void block32(uint32_t type, const unsigned char *b, int8_t *q, float *d, float *m)
{
    float dv = hs_f16_to_f32_fast(hs_le16(b));
    switch (type) {
    case HS_QUANT_Q8_0:
        memcpy(q, b + 2, 32);
        pair(d, m, dv, 0.0f);
        break;
    case HS_QUANT_Q4_0: nibbles(b + 2, q, 8); pair(d, m, dv, 0.0f); break;
    case HS_QUANT_Q4_1: nibbles(b + 4, q, 0); pair(d, m, dv, hs_f16_to_f32_fast(hs_le16(b + 2))); break;
    case HS_QUANT_Q5_0: q5(b + 2, b + 6, q, 16); pair(d, m, dv, 0.0f); break;
    case HS_QUANT_Q5_1: q5(b + 4, b + 8, q, 0); pair(d, m, dv, hs_f16_to_f32_fast(hs_le16(b + 2))); break;
    default: /* IQ4_NL */
        for (int j = 0; j < 16; j++) {
            q[j] = iq4_grid[b[2 + j] & 0x0F];
            q[j + 16] = iq4_grid[b[2 + j] >> 4];
        }
        pair(d, m, dv, 0.0f);
        break;
    }
}

/* One 256-element block of a K type (or IQ4_XS) into q[256], d[16], m[16]. */
static inline void block256(uint32_t type, const unsigned char *b, int8_t *q, float *d, float *m)
{
    switch (type) {
    case HS_QUANT_Q4_K:
    case HS_QUANT_Q5_K: {
        float dv = hs_f16_to_f32_fast(hs_le16(b)), dmin = hs_f16_to_f32_fast(hs_le16(b + 2));
        const unsigned char *sc = b + 4, *qh = b + 16, *qs = b + (type == HS_QUANT_Q5_K ? 48 : 16);
        for (int s = 0; s < 8; s++) {
            int scale, min;
            k_scale_min(s, sc, &scale, &min);
            pair(d + 2 * s, m + 2 * s, dv * (float)scale, -(dmin * (float)min));
        }
        for (int c = 0; c < 4; c++) { /* sub-blocks 2c (low nibbles), 2c + 1 (high) */
            const unsigned char *p = qs + 32 * c;
            int8_t *y = q + 64 * c;
#pragma omp simd
            for (int l = 0; l < 32; l++) {
                y[l] = (int8_t)(p[l] & 0x0F);
                y[l + 32] = (int8_t)(p[l] >> 4);
            }
            if (type == HS_QUANT_Q5_K) {
#pragma omp simd
                for (int l = 0; l < 32; l++) {
                    y[l] = (int8_t)(y[l] | ((qh[l] >> (2 * c)) & 1) << 4);
                    y[l + 32] = (int8_t)(y[l + 32] | ((qh[l] >> (2 * c + 1)) & 1) << 4);
                }
            }
        }
        break;
    }
    case HS_QUANT_Q2_K: {
        const unsigned char *sc = b, *qs = b + 16;
        float dv = hs_f16_to_f32_fast(hs_le16(b + 80)), dmin = hs_f16_to_f32_fast(hs_le16(b + 82));
        for (int t = 0; t < 16; t++) {
            const unsigned char *p = qs + 32 * (t / 8) + 16 * (t % 2);
            int shift = 2 * ((t % 8) / 2);
            d[t] = dv * (float)(sc[t] & 0x0F);
            m[t] = -(dmin * (float)(sc[t] >> 4));
            for (int l = 0; l < 16; l++)
                q[16 * t + l] = (int8_t)((p[l] >> shift) & 3);
        }
        break;
    }
    case HS_QUANT_Q3_K: {
        const unsigned char *hm = b, *qs = b + 32, *sc = b + 96;
        float dv = hs_f16_to_f32_fast(hs_le16(b + 108));
        for (int t = 0; t < 16; t++) {
            const unsigned char *p = qs + 32 * (t / 8) + 16 * (t % 2), *h = hm + 16 * (t % 2);
            int shift = 2 * ((t % 8) / 2), bit = t / 2;
            d[t] = dv * (float)(q3_k_scale(t, sc) - 32);
            m[t] = 0.0f;
            for (int l = 0; l < 16; l++)
                q[16 * t + l] = (int8_t)(((p[l] >> shift) & 3) - ((h[l] >> bit) & 1 ? 0 : 4));
        }
        break;
    }
    case HS_QUANT_Q6_K: {
        const int8_t *sc = (const int8_t *)(const void *)(b + 192);
        float dv = hs_f16_to_f32_fast(hs_le16(b + 208));
        for (int half = 0; half < 2; half++) {
            const unsigned char *ql = b + 64 * half, *qh = b + 128 + 32 * half;
            int8_t *y = q + 128 * half;
#pragma omp simd
            for (int l = 0; l < 32; l++) {
                y[l] = (int8_t)(((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32);
                y[l + 32] = (int8_t)(((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32);
                y[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                y[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
            for (int t = 0; t < 8; t++) { /* sub-block of 16: element 16 t.. of the half */
                d[8 * half + t] = dv * (float)sc[8 * half + t];
                m[8 * half + t] = 0.0f;
            }
        }
        break;
    }
    default: { /* IQ4_XS */
        float dv = hs_f16_to_f32_fast(hs_le16(b));
        unsigned sh = hs_le16(b + 2);
        const unsigned char *sl = b + 4, *qs = b + 8;
        for (int s = 0; s < 8; s++) {
            int ls = ((sl[s / 2] >> 4 * (s % 2)) & 0x0F) | (int)((sh >> 2 * s) & 3) << 4;
            pair(d + 2 * s, m + 2 * s, dv * (float)(ls - 32), 0.0f);
            for (int j = 0; j < 16; j++) {
                q[32 * s + j] = iq4_grid[qs[16 * s + j] & 0x0F];
                q[32 * s + j + 16] = iq4_grid[qs[16 * s + j] >> 4];
            }
        }
        break;
    }
    }
}

int hs_quant_sub_block(uint32_t type)
{
    switch (type) { /* the types block32 and block256 know; any other has no integer form */
    case HS_QUANT_Q2_K: case HS_QUANT_Q3_K: case HS_QUANT_Q6_K: return 16;
    case HS_QUANT_Q4_0: case HS_QUANT_Q4_1: case HS_QUANT_Q5_0: case HS_QUANT_Q5_1:
    case HS_QUANT_Q8_0: case HS_QUANT_Q4_K: case HS_QUANT_Q5_K: case HS_QUANT_IQ4_NL:
    case HS_QUANT_IQ4_XS: return 32;
    default: return 0;
    }
}

/* the blocks of a type, each build of HS_CLONES its own (vector loops in each) */
HS_CLONES static void blocks(uint32_t type, const unsigned char *src, int8_t *q, float *d,
                             float *m, size_t nb, size_t elems, size_t bytes)
{
    for (size_t k = 0; k < nb; k++) {
        if (elems == 32)
            block32(type, src + k * bytes, q + 32 * k, d + 2 * k, m + 2 * k);
        else
            block256(type, src + k * bytes, q + 256 * k, d + 16 * k, m + 16 * k);
    }
}

int hs_quant_decode_i8(uint32_t type, const unsigned char *src, int8_t *q, float *d, float *m,
                       size_t n)
{
    size_t elems = 0, bytes = 0;
    if (!hs_quant_sub_block(type) || !hs_quant_block(type, &elems, &bytes))
        return 0;
    blocks(type, src, q, d, m, n / elems, elems, bytes);
    return hs_quant_sub_block(type);
}

int hs_tensor_decode_i8(const void *tv, size_t from, int8_t *q, float *d, float *m, size_t count)
{
    const hs_tensor_view *t = tv;
    uint32_t type = hs_dtype_ggml_quant(t->dtype);
    size_t elems = 0, bytes = 0;
    if (!hs_quant_block(type, &elems, &bytes))
        return 0;
    return hs_quant_decode_i8(type, t->data + from / elems * bytes, q, d, m, count);
}

int hs_tensor_sub_block(const void *tv)
{
    return hs_quant_sub_block(hs_dtype_ggml_quant(((const hs_tensor_view *)tv)->dtype));
}
