/* ggml's block-quantised tensor formats, decoded to float32 at load.
 *
 * A quantised tensor is a run of fixed-size blocks along its contiguous dimension; each
 * block holds its own scale(s) and packed integers. The layouts and the decoding formulas
 * are ggml's (ggml-common.h block_*, ggml-quants.c dequantize_row_*); docs/gguf.md states
 * them for a reader:
 *
 *   Q8_0  32 elements, 34 bytes: f16 d, int8 q[32];                x = d q
 *   Q4_0  32 elements, 18 bytes: f16 d, u8 qs[16];  element j < 16 in the low nibble of
 *         qs[j], element j + 16 in its high nibble;               x = d (q - 8)
 *   Q4_K  256 elements, 144 bytes: f16 d, f16 dmin, u8 scales[12] (eight 6-bit scales and
 *         eight 6-bit mins), u8 qs[128]; sub-block s of 32 has    x = d sc_s q - dmin m_s
 *   Q6_K  256 elements, 210 bytes: u8 ql[128], u8 qh[64], int8 scales[16], f16 d;
 *         sub-block of 16 elements t has                        x = d scales_t (q - 32)
 *   Q4_1  32 elements, 20 bytes: f16 d, f16 m, u8 qs[16] as Q4_0;  x = d q + m
 *   Q5_0  32 elements, 22 bytes: f16 d, u8 qh[4] (bit j: element j's fifth bit), u8 qs[16]
 *         as Q4_0;                                                x = d (q - 16)
 *   Q5_1  32 elements, 24 bytes: f16 d, f16 m, u8 qh[4], u8 qs[16]; x = d q + m
 *   Q2_K  256 elements, 84 bytes: u8 scales[16] (4-bit scale, 4-bit min), u8 qs[64] (2 bits),
 *         f16 d, f16 dmin; sub-block of 16 t has              x = d sc_t q - dmin m_t
 *   Q3_K  256 elements, 110 bytes: u8 hmask[32] (third bit), u8 qs[64] (low 2 bits), sixteen
 *         6-bit scales in 12 bytes, f16 d;                x = d (sc_t - 32) (q - 4 [bit clear])
 *   Q5_K  256 elements, 176 bytes: Q4_K's d, dmin and scales, u8 qh[32] (fifth bit), u8
 *         qs[128];                                               x = d sc_s q - dmin m_s
 *   IQ4_NL 32 elements, 18 bytes: f16 d, u8 qs[16] as Q4_0;     x = d grid[q]
 *   IQ4_XS 256 elements, 136 bytes: f16 d, u16 scales_h, u8 scales_l[4] (eight 6-bit
 *         scales), u8 qs[128];  sub-block of 32 s has            x = d (ls_s - 32) grid[q]
 *   grid = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
 */
#ifndef HS_MODEL_QUANT_H
#define HS_MODEL_QUANT_H

#include <stddef.h>
#include <stdint.h>

/* The ggml type codes of the quantised formats headscope decodes. */
typedef enum hs_quant {
    HS_QUANT_Q4_0 = 2,
    HS_QUANT_Q4_1 = 3,
    HS_QUANT_Q5_0 = 6,
    HS_QUANT_Q5_1 = 7,
    HS_QUANT_Q8_0 = 8,
    HS_QUANT_Q2_K = 10,
    HS_QUANT_Q3_K = 11,
    HS_QUANT_Q4_K = 12,
    HS_QUANT_Q5_K = 13,
    HS_QUANT_Q6_K = 14,
    HS_QUANT_IQ4_NL = 20,
    HS_QUANT_IQ4_XS = 23
} hs_quant;

/* Elements and bytes per block of ggml type code `type`; returns 1, or 0 when headscope
 * does not decode that type (then *elems and *bytes are left alone). */
int hs_quant_block(uint32_t type, size_t *elems, size_t *bytes);

/* Decodes n elements (a whole number of blocks) of ggml type `type` from src into dst.
 * src holds n / elems blocks as stored in the file (little-endian halves). The caller has
 * checked the type with hs_quant_block and n against the block size. */
void hs_quant_decode(uint32_t type, const unsigned char *src, float *dst, size_t n);

/* 1 when the f16 scales of nb blocks of a type at src are all finite, which makes every
 * value they decode to finite (each is a scale times small integers, or such a product
 * plus another: below 65504 x 2^16 in magnitude); 0 otherwise (a value may still be). */
int hs_quant_scales_finite(uint32_t type, const unsigned char *src, size_t nb);

/* Encodes 32 floats x as one Q8_0 block out (34 bytes), as ggml's reference quantizer
 * (quantize_row_q8_0_ref): d = max|x| / 127, q = roundf(x / d), d stored as f16. */
void hs_quant_q8_0_encode(const float *x, unsigned char *out);

/* The integer form of n elements (whole blocks) of type `type` at src, for the products by
 * 8-bit activations (src/model/quant_i8.c): q[i] a signed 8-bit integer, and for each 16
 * elements t a scale d[t] and offset m[t], element i = d[i / 16] q[i] + m[i / 16] (the value
 * hs_quant_decode gives). Returns the type's sub-block: 32 (d and m the same for both 16s
 * of each 32) or 16 (Q2_K, Q3_K, Q6_K); 0 for a type headscope does not decode. */
int hs_quant_decode_i8(uint32_t type, const unsigned char *src, int8_t *q, float *d, float *m,
                       size_t n);
/* The sub-block hs_quant_decode_i8 returns for type, without decoding. */
int hs_quant_sub_block(uint32_t type);

#endif
