/* Decoding ggml's block-quantised formats (quant.h states the layouts). Each formula is
 * evaluated in the order ggml's reference decoder uses, in float, so a tensor decodes to
 * the same float32 values llama.cpp's own dequantisation gives. Also Q8_0's encoder, for
 * the GGUF writer. */
#include <math.h>

#include "model/quant.h"

#include "core/core.h"

int hs_quant_block(uint32_t type, size_t *elems, size_t *bytes)
{
    switch (type) {
    case HS_QUANT_Q4_0: *elems = 32; *bytes = 18; return 1;
    case HS_QUANT_Q8_0: *elems = 32; *bytes = 34; return 1;
    case HS_QUANT_Q4_K: *elems = 256; *bytes = 144; return 1;
    case HS_QUANT_Q6_K: *elems = 256; *bytes = 210; return 1;
    default: return 0;
    }
}

/* b: 34 bytes -> y: 32 */
static void decode_q8_0(const unsigned char *b, float *y)
{
    float d = hs_f16_to_f32(hs_le16(b));
    for (int j = 0; j < 32; j++)
        y[j] = d * (float)(int8_t)b[2 + j];
}

/* b: 18 bytes -> y: 32 */
static void decode_q4_0(const unsigned char *b, float *y)
{
    float d = hs_f16_to_f32(hs_le16(b));
    const unsigned char *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((qs[j] & 0x0F) - 8) * d;
        y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
    }
}

/* The 6-bit scale and min of Q4_K sub-block s (0..7) from the 12 packed bytes: sub-blocks
 * 0-3 keep theirs in the low 6 bits of bytes s and s + 4; sub-blocks 4-7 take their low 4
 * bits from byte s + 4 and their top 2 bits from the spare top bits of bytes s - 4 and s. */
static void q4_k_scale_min(int s, const unsigned char *sc, int *scale, int *min)
{
    if (s < 4) {
        *scale = sc[s] & 63;
        *min = sc[s + 4] & 63;
    } else {
        *scale = (sc[s + 4] & 0x0F) | ((sc[s - 4] >> 6) << 4);
        *min = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
    }
}

/* b: 144 bytes -> y: 256. Each 64 elements share 32 bytes of qs: the low nibbles are the
 * first sub-block of 32, the high nibbles the second. */
static void decode_q4_k(const unsigned char *b, float *y)
{
    float d = hs_f16_to_f32(hs_le16(b));
    float dmin = hs_f16_to_f32(hs_le16(b + 2));
    const unsigned char *sc = b + 4, *qs = b + 16;
    for (int c = 0; c < 4; c++) {
        int s1, m1, s2, m2;
        q4_k_scale_min(2 * c, sc, &s1, &m1);
        q4_k_scale_min(2 * c + 1, sc, &s2, &m2);
        float d1 = d * (float)s1, o1 = dmin * (float)m1;
        float d2 = d * (float)s2, o2 = dmin * (float)m2;
        const unsigned char *q = qs + 32 * c;
        for (int l = 0; l < 32; l++) {
            y[64 * c + l] = d1 * (float)(q[l] & 0x0F) - o1;
            y[64 * c + 32 + l] = d2 * (float)(q[l] >> 4) - o2;
        }
    }
}

/* b: 210 bytes -> y: 256. Each half of 128 elements uses 64 bytes of ql (low 4 bits),
 * 32 bytes of qh (2 high bits, four elements per byte) and 8 scales, one per 16. */
static void decode_q6_k(const unsigned char *b, float *y)
{
    const unsigned char *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(const void *)(b + 192);
    float d = hs_f16_to_f32(hs_le16(b + 208));
    for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, y += 128)
        for (int l = 0; l < 32; l++) {
            int t = l / 16;
            int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * (float)sc[t] * (float)q1;
            y[l + 32] = d * (float)sc[t + 2] * (float)q2;
            y[l + 64] = d * (float)sc[t + 4] * (float)q3;
            y[l + 96] = d * (float)sc[t + 6] * (float)q4;
        }
}

void hs_quant_decode(uint32_t type, const unsigned char *src, float *dst, size_t n)
{
    size_t elems = 0, bytes = 0;
    if (!hs_quant_block(type, &elems, &bytes))
        return;
    void (*decode)(const unsigned char *, float *) =
        type == HS_QUANT_Q4_0 ? decode_q4_0 : type == HS_QUANT_Q8_0 ? decode_q8_0
        : type == HS_QUANT_Q4_K ? decode_q4_k : decode_q6_k;
    for (size_t blk = 0; blk < n / elems; blk++)
        decode(src + blk * bytes, dst + blk * elems);
}

void hs_quant_q8_0_encode(const float *x, unsigned char *out)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
        float a = fabsf(x[j]);
        if (a > amax)
            amax = a;
    }
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint16_t h = hs_f32_to_f16(d);
    out[0] = (unsigned char)h;
    out[1] = (unsigned char)(h >> 8);
    for (int j = 0; j < 32; j++)
        out[2 + j] = (unsigned char)(int8_t)roundf(x[j] * id);
}
