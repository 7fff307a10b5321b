/* Decoding ggml's block-quantised formats (quant.h states the layouts). Each formula is
 * evaluated in the order ggml's reference decoder uses, in float, so a tensor decodes to
 * the same float32 values llama.cpp's own dequantisation gives. Also Q8_0's encoder, for
 * the GGUF writer.
 *
 * The decoders are inlined into one loop over the blocks per type, compiled for the
 * baseline, AVX2 and AVX-512 (HS_CLONES, picked by the CPU's features at load), their
 * element loops vectorised (`omp simd`): each element is the same product or difference of
 * the same operands in every build (no contraction into FMA under -std=c11), so the values
 * are the same bits; the stored-type products decode every weight in every pass, and the
 * vector loops take a third to a tenth of the scalar ones' time. */
#include <math.h>

#include "model/quant.h"

#include "core/core.h"
#include "nn/fastmath.h"

int hs_quant_block(uint32_t type, size_t *elems, size_t *bytes)
{
    switch (type) {
    case HS_QUANT_Q4_0: *elems = 32; *bytes = 18; return 1;
    case HS_QUANT_Q4_1: *elems = 32; *bytes = 20; return 1;
    case HS_QUANT_Q5_0: *elems = 32; *bytes = 22; return 1;
    case HS_QUANT_Q5_1: *elems = 32; *bytes = 24; return 1;
    case HS_QUANT_Q8_0: *elems = 32; *bytes = 34; return 1;
    case HS_QUANT_Q2_K: *elems = 256; *bytes = 84; return 1;
    case HS_QUANT_Q3_K: *elems = 256; *bytes = 110; return 1;
    case HS_QUANT_Q4_K: *elems = 256; *bytes = 144; return 1;
    case HS_QUANT_Q5_K: *elems = 256; *bytes = 176; return 1;
    case HS_QUANT_Q6_K: *elems = 256; *bytes = 210; return 1;
    case HS_QUANT_IQ4_NL: *elems = 32; *bytes = 18; return 1;
    case HS_QUANT_IQ4_XS: *elems = 256; *bytes = 136; return 1;
    default: return 0;
    }
}

/* b: 34 bytes -> y: 32 */
static inline void decode_q8_0(const unsigned char *b, float *y)
{
    float d = hs_f16_to_f32_fast(hs_le16(b));
#pragma omp simd
    for (int j = 0; j < 32; j++)
        y[j] = d * (float)(int8_t)b[2 + j];
}

/* b: 18 bytes -> y: 32 */
static inline void decode_q4_0(const unsigned char *b, float *y)
{
    float d = hs_f16_to_f32_fast(hs_le16(b));
    const unsigned char *qs = b + 2;
#pragma omp simd
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((qs[j] & 0x0F) - 8) * d;
        y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
    }
}

/* b: 20 bytes -> y: 32: f16 d, f16 m, then Q4_0's nibble order; x = q d + m */
static inline void decode_q4_1(const unsigned char *b, float *y)
{
    float d = hs_f16_to_f32_fast(hs_le16(b)), m = hs_f16_to_f32_fast(hs_le16(b + 2));
    const unsigned char *qs = b + 4;
#pragma omp simd
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(qs[j] & 0x0F) * d + m;
        y[j + 16] = (float)(qs[j] >> 4) * d + m;
    }
}

/* The 5-bit values of a Q5_0 / Q5_1 block: Q4_0's nibbles, with element j's fifth bit in
 * bit j of the little-endian 32-bit qh. */
static inline void q5_values(const unsigned char *qh4, const unsigned char *qs, int *q)
{
    uint32_t qh = hs_le32(qh4);
    for (int j = 0; j < 16; j++) {
        q[j] = (qs[j] & 0x0F) | (int)((qh >> j) & 1) << 4;
        q[j + 16] = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
    }
}

/* b: 22 bytes -> y: 32: f16 d, u8 qh[4], u8 qs[16]; x = (q - 16) d */
static inline void decode_q5_0(const unsigned char *b, float *y)
{
    float d = hs_f16_to_f32_fast(hs_le16(b));
    int q[32];
    q5_values(b + 2, b + 6, q);
    for (int j = 0; j < 32; j++)
        y[j] = (float)(q[j] - 16) * d;
}

/* b: 24 bytes -> y: 32: f16 d, f16 m, u8 qh[4], u8 qs[16]; x = q d + m */
static inline void decode_q5_1(const unsigned char *b, float *y)
{
    float d = hs_f16_to_f32_fast(hs_le16(b)), m = hs_f16_to_f32_fast(hs_le16(b + 2));
    int q[32];
    q5_values(b + 4, b + 8, q);
    for (int j = 0; j < 32; j++)
        y[j] = (float)q[j] * d + m;
}

/* The 16-entry non-linear grid of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl). */
static const int8_t iq4_grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

/* b: 18 bytes -> y: 32: f16 d, Q4_0's nibble order; x = d grid[q] */
static inline void decode_iq4_nl(const unsigned char *b, float *y)
{
    float d = hs_f16_to_f32_fast(hs_le16(b));
    const unsigned char *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)iq4_grid[qs[j] & 0x0F];
        y[j + 16] = d * (float)iq4_grid[qs[j] >> 4];
    }
}

/* b: 136 bytes -> y: 256: f16 d, u16 scales_h, u8 scales_l[4], u8 qs[128]. Sub-block s of
 * 32 has the 6-bit scale ls (low 4 bits: nibble s % 2 of scales_l[s / 2]; top 2 bits: bits
 * 2s, 2s + 1 of scales_h) and IQ4_NL's nibble order in qs[16 s ..]; x = d (ls - 32) grid[q] */
static inline void decode_iq4_xs(const unsigned char *b, float *y)
{
    float d = hs_f16_to_f32_fast(hs_le16(b));
    unsigned sh = hs_le16(b + 2);
    const unsigned char *sl = b + 4, *qs = b + 8;
    for (int s = 0; s < 8; s++, qs += 16, y += 32) {
        int ls = ((sl[s / 2] >> 4 * (s % 2)) & 0x0F) | (int)((sh >> 2 * s) & 3) << 4;
        float dl = d * (float)(ls - 32);
        for (int j = 0; j < 16; j++) {
            y[j] = dl * (float)iq4_grid[qs[j] & 0x0F];
            y[j + 16] = dl * (float)iq4_grid[qs[j] >> 4];
        }
    }
}

/* b: 84 bytes -> y: 256: u8 scales[16], u8 qs[64], f16 d, f16 dmin. Sub-block t of 16 has
 * scale (low nibble of scales[t]) and min (high nibble); its 2-bit values are bits 2k, 2k + 1
 * of 16 bytes of qs: half h = t / 8, k = (t % 8) / 2, bytes 32 h + 16 (t % 2) ...;
 * x = d sc q - dmin m */
static inline void decode_q2_k(const unsigned char *b, float *y)
{
    const unsigned char *sc = b, *qs = b + 16;
    float d = hs_f16_to_f32_fast(hs_le16(b + 80)), dmin = hs_f16_to_f32_fast(hs_le16(b + 82));
    for (int t = 0; t < 16; t++, y += 16) {
        const unsigned char *q = qs + 32 * (t / 8) + 16 * (t % 2);
        int shift = 2 * ((t % 8) / 2);
        float dl = d * (float)(sc[t] & 0x0F), ml = dmin * (float)(sc[t] >> 4);
        for (int l = 0; l < 16; l++)
            y[l] = dl * (float)((q[l] >> shift) & 3) - ml;
    }
}

/* Q3_K's 6-bit scale of sub-block t (0..15) from its 12 packed bytes: the low 4 bits are
 * the low nibbles of bytes 0-7 for t < 8, their high nibbles for t >= 8; the top 2 bits are
 * bits 2 (t / 4), +1 of byte 8 + t % 4. */
static int q3_k_scale(int t, const unsigned char *sc)
{
    int low = t < 8 ? sc[t] & 0x0F : sc[t - 8] >> 4;
    return low | ((sc[8 + t % 4] >> (2 * (t / 4))) & 3) << 4;
}

/* b: 110 bytes -> y: 256: u8 hmask[32], u8 qs[64], u8 scales[12], f16 d. Sub-block t of
 * 16 takes its low 2 bits as Q2_K does and its third bit from bit t / 2 of hmask[l] (first
 * 16 of a pair) or hmask[16 + l]; a clear bit subtracts 4: x = d (scale_t - 32) (q - 4 [bit
 * clear]) */
static inline void decode_q3_k(const unsigned char *b, float *y)
{
    const unsigned char *hm = b, *qs = b + 32, *sc = b + 96;
    float d = hs_f16_to_f32_fast(hs_le16(b + 108));
    for (int t = 0; t < 16; t++, y += 16) {
        const unsigned char *q = qs + 32 * (t / 8) + 16 * (t % 2), *h = hm + 16 * (t % 2);
        int shift = 2 * ((t % 8) / 2), bit = t / 2;
        float dl = d * (float)(q3_k_scale(t, sc) - 32);
        for (int l = 0; l < 16; l++)
            y[l] = dl * (float)(((q[l] >> shift) & 3) - ((h[l] >> bit) & 1 ? 0 : 4));
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
static inline void decode_q4_k(const unsigned char *b, float *y)
{
    float d = hs_f16_to_f32_fast(hs_le16(b));
    float dmin = hs_f16_to_f32_fast(hs_le16(b + 2));
    const unsigned char *sc = b + 4, *qs = b + 16;
    for (int c = 0; c < 4; c++) {
        int s1, m1, s2, m2;
        q4_k_scale_min(2 * c, sc, &s1, &m1);
        q4_k_scale_min(2 * c + 1, sc, &s2, &m2);
        float d1 = d * (float)s1, o1 = dmin * (float)m1;
        float d2 = d * (float)s2, o2 = dmin * (float)m2;
        const unsigned char *q = qs + 32 * c;
#pragma omp simd
        for (int l = 0; l < 32; l++) {
            y[64 * c + l] = d1 * (float)(q[l] & 0x0F) - o1;
            y[64 * c + 32 + l] = d2 * (float)(q[l] >> 4) - o2;
        }
    }
}

/* b: 176 bytes -> y: 256: f16 d, f16 dmin, Q4_K's 12 scale bytes, u8 qh[32], u8 qs[128] as
 * Q4_K's; the fifth bit of element l of sub-block s is bit s of qh[l]: x = d sc_s q - dmin m_s */
static inline void decode_q5_k(const unsigned char *b, float *y)
{
    float d = hs_f16_to_f32_fast(hs_le16(b));
    float dmin = hs_f16_to_f32_fast(hs_le16(b + 2));
    const unsigned char *sc = b + 4, *qh = b + 16, *qs = b + 48;
    for (int s = 0; s < 8; s++, y += 32) {
        int scale, min;
        q4_k_scale_min(s, sc, &scale, &min);
        float dl = d * (float)scale, ml = dmin * (float)min;
        const unsigned char *q = qs + 32 * (s / 2);
        int shift = 4 * (s % 2);
#pragma omp simd
        for (int l = 0; l < 32; l++)
            y[l] = dl * (float)(((q[l] >> shift) & 0x0F) + ((qh[l] >> s) & 1 ? 16 : 0)) - ml;
    }
}

/* b: 210 bytes -> y: 256. Each half of 128 elements uses 64 bytes of ql (low 4 bits),
 * 32 bytes of qh (2 high bits, four elements per byte) and 8 scales, one per 16. */
static inline void decode_q6_k(const unsigned char *b, float *y)
{
    const unsigned char *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(const void *)(b + 192);
    float d = hs_f16_to_f32_fast(hs_le16(b + 208));
    for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, y += 128)
        for (int t = 0; t < 2; t++) { /* the 16 elements l that share sc[t], sc[t + 2].. */
            float d1 = d * (float)sc[t], d2 = d * (float)sc[t + 2];
            float d3 = d * (float)sc[t + 4], d4 = d * (float)sc[t + 6];
#pragma omp simd
            for (int l = 16 * t; l < 16 * t + 16; l++) {
                int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d1 * (float)q1;
                y[l + 32] = d2 * (float)q2;
                y[l + 64] = d3 * (float)q3;
                y[l + 96] = d4 * (float)q4;
            }
        }
}

/* One loop over nb blocks of a type, its decoder inlined, in each HS_CLONES build. */
#define BLOCK_LOOP(name, elems, bytes)                                                   \
    HS_CLONES static void name##_blocks(const unsigned char *src, float *dst, size_t nb) \
    {                                                                                    \
        for (size_t k = 0; k < nb; k++)                                                  \
            decode_##name(src + k * (bytes), dst + k * (elems));                         \
    }
BLOCK_LOOP(q8_0, 32, 34)
BLOCK_LOOP(q4_0, 32, 18)
BLOCK_LOOP(q4_1, 32, 20)
BLOCK_LOOP(q5_0, 32, 22)
BLOCK_LOOP(q5_1, 32, 24)
BLOCK_LOOP(q2_k, 256, 84)
BLOCK_LOOP(q3_k, 256, 110)
BLOCK_LOOP(q4_k, 256, 144)
BLOCK_LOOP(q5_k, 256, 176)
BLOCK_LOOP(q6_k, 256, 210)
BLOCK_LOOP(iq4_nl, 32, 18)
BLOCK_LOOP(iq4_xs, 256, 136)

void hs_quant_decode(uint32_t type, const unsigned char *src, float *dst, size_t n)
{
    size_t elems = 0, bytes = 0;
    if (!hs_quant_block(type, &elems, &bytes))
        return;
    void (*blocks)(const unsigned char *, float *, size_t) = q8_0_blocks;
    switch (type) {
    case HS_QUANT_Q4_0: blocks = q4_0_blocks; break;
    case HS_QUANT_Q4_1: blocks = q4_1_blocks; break;
    case HS_QUANT_Q5_0: blocks = q5_0_blocks; break;
    case HS_QUANT_Q5_1: blocks = q5_1_blocks; break;
    case HS_QUANT_Q2_K: blocks = q2_k_blocks; break;
    case HS_QUANT_Q3_K: blocks = q3_k_blocks; break;
    case HS_QUANT_Q4_K: blocks = q4_k_blocks; break;
    case HS_QUANT_Q5_K: blocks = q5_k_blocks; break;
    case HS_QUANT_Q6_K: blocks = q6_k_blocks; break;
    case HS_QUANT_IQ4_NL: blocks = iq4_nl_blocks; break;
    case HS_QUANT_IQ4_XS: blocks = iq4_xs_blocks; break;
    default: break; /* Q8_0 */
    }
    blocks(src, dst, n / elems);
}

int hs_quant_scales_finite(uint32_t type, const unsigned char *src, size_t nb)
{
    size_t elems = 0, bytes = 0;
    if (!hs_quant_block(type, &elems, &bytes))
        return 0;
    int at[2] = {0, -1}; /* where the block's f16 scales sit */
    switch (type) {
    case HS_QUANT_Q4_1: case HS_QUANT_Q5_1: case HS_QUANT_Q4_K: case HS_QUANT_Q5_K:
        at[1] = 2; break;
    case HS_QUANT_Q2_K: at[0] = 80, at[1] = 82; break;
    case HS_QUANT_Q3_K: at[0] = 108; break;
    case HS_QUANT_Q6_K: at[0] = 208; break;
    default: break; /* d first: Q4_0, Q5_0, Q8_0, IQ4_NL, IQ4_XS */
    }
    unsigned bad = 0;
    for (size_t k = 0; k < nb; k++) {
        const unsigned char *b = src + k * bytes;
        bad |= (hs_le16(b + at[0]) & 0x7c00u) == 0x7c00u;
        bad |= at[1] >= 0 && (hs_le16(b + at[1]) & 0x7c00u) == 0x7c00u;
    }
    return !bad;
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
