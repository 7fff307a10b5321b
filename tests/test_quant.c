/* ggml block formats decoded (src/model/quant.c): blocks built by hand, with the expected
 * values worked out in the comments from the layouts in docs/gguf.md. Every value below is
 * exact in float32, so equality is asserted. */
#include <string.h>

#include "model/quant.h"
#include "testutil.h"

/* f16 bit patterns */
#define F16_ONE 0x3C00
#define F16_HALF 0x3800
#define F16_QUARTER 0x3400

static void put16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)(v & 0xFF);
    p[1] = (unsigned char)(v >> 8);
}

Test(quant, block_sizes)
{
    size_t e = 0, b = 0;
    cr_assert(hs_quant_block(HS_QUANT_Q4_0, &e, &b) && e == 32 && b == 18);
    cr_assert(hs_quant_block(HS_QUANT_Q8_0, &e, &b) && e == 32 && b == 34);
    cr_assert(hs_quant_block(HS_QUANT_Q4_K, &e, &b) && e == 256 && b == 144);
    cr_assert(hs_quant_block(HS_QUANT_Q6_K, &e, &b) && e == 256 && b == 210);
    e = b = 7;
    cr_assert(!hs_quant_block(3, &e, &b) && e == 7 && b == 7, "Q4_1 is not decoded");
    cr_assert(!hs_quant_block(13, &e, &b), "Q5_K is not decoded");
}

Test(quant, q8_0_hand_block)
{
    unsigned char b[34] = {0};
    put16(b, F16_HALF);
    b[2 + 3] = (unsigned char)(int8_t)-7;  /* element 3: 0.5 * -7 = -3.5 */
    b[2 + 31] = 127;                       /* element 31: 63.5 */
    float y[32];
    hs_quant_decode(HS_QUANT_Q8_0, b, y, 32);
    cr_assert_eq(y[3], -3.5f);
    cr_assert_eq(y[31], 63.5f);
    cr_assert_eq(y[0], 0.0f);
}

Test(quant, q4_0_hand_blocks)
{
    unsigned char b[36] = {0};
    put16(b, F16_HALF);
    b[2] = 0x1F;      /* element 0: (15 - 8) * 0.5 = 3.5; element 16: (1 - 8) * 0.5 = -3.5 */
    b[2 + 15] = 0x80; /* element 15: (0 - 8) * 0.5 = -4; element 31: (8 - 8) * 0.5 = 0 */
    put16(b + 18, F16_ONE);
    b[18 + 2 + 1] = 0x88; /* second block, elements 1 and 17: 0; the others (0 - 8) = -8 */
    float y[64];
    hs_quant_decode(HS_QUANT_Q4_0, b, y, 64);
    cr_assert_eq(y[0], 3.5f);
    cr_assert_eq(y[16], -3.5f);
    cr_assert_eq(y[15], -4.0f);
    cr_assert_eq(y[31], 0.0f);
    cr_assert_eq(y[1], -4.0f, "an all-zero byte is (0 - 8) * d");
    cr_assert_eq(y[32 + 1], 0.0f);
    cr_assert_eq(y[32 + 17], 0.0f);
    cr_assert_eq(y[32 + 0], -8.0f);
}

/* Q4_K: d = 1, dmin = 0.5. Packed scales (12 bytes at offset 4):
 *   byte 0 = 0x45: sub-block 0 scale 0x45 & 63 = 5; top bits 01 -> sub-block 4 scale += 16
 *   byte 1 = 0x02: sub-block 1 scale 2
 *   byte 4 = 0xC3: sub-block 0 min 3; top bits 11 -> sub-block 4 min += 48
 *   byte 5 = 0x04: sub-block 1 min 4
 *   byte 8 = 0x27: sub-block 4 scale 7 + 16 = 23, min 2 + 48 = 50
 *   byte 9 = 0x11: sub-block 5 scale 1, min 1 (bytes 1 and 5 have no top bits) */
Test(quant, q4_k_hand_block)
{
    unsigned char b[144] = {0};
    put16(b, F16_ONE);
    put16(b + 2, F16_HALF);
    static const unsigned char scales[12] = {0x45, 0x02, 0, 0, 0xC3, 0x04, 0, 0, 0x27, 0x11, 0, 0};
    memcpy(b + 4, scales, sizeof scales);
    unsigned char *qs = b + 16;
    qs[0] = 0x9A;  /* element 0: low 10 (sub-block 0); element 32: high 9 (sub-block 1) */
    qs[64] = 0x03; /* element 128: low 3 (sub-block 4); element 160: high 0 (sub-block 5) */
    float y[256];
    hs_quant_decode(HS_QUANT_Q4_K, b, y, 256);
    cr_assert_eq(y[0], 48.5f, "1 * 5 * 10 - 0.5 * 3");
    cr_assert_eq(y[1], -1.5f, "1 * 5 * 0 - 0.5 * 3");
    cr_assert_eq(y[32], 16.0f, "1 * 2 * 9 - 0.5 * 4");
    cr_assert_eq(y[128], 44.0f, "1 * 23 * 3 - 0.5 * 50");
    cr_assert_eq(y[160], -0.5f, "1 * 1 * 0 - 0.5 * 1");
    cr_assert_eq(y[64], 0.0f, "sub-block 2: scale 0, min 0");
}

/* Q6_K: d = 0.25 (last two bytes). Scales (int8, offset 192): t0 = -2, t1 = 5, t2 = 3,
 * t4 = 1, t6 = 4, t8 = 2. qh[0] = 0x9E = 10 01 11 10: bits 0-1 = 2, 2-3 = 3, 4-5 = 1, 6-7 = 2. */
Test(quant, q6_k_hand_block)
{
    unsigned char b[210] = {0};
    unsigned char *ql = b, *qh = b + 128;
    int8_t *sc = (int8_t *)(b + 192);
    put16(b + 208, F16_QUARTER);
    sc[0] = -2;
    sc[1] = 5;
    sc[2] = 3;
    sc[4] = 1;
    sc[6] = 4;
    sc[8] = 2;
    ql[0] = 0x5F;
    qh[0] = 0x9E;
    ql[64] = 0x01; /* second half, element 128 */
    qh[32] = 0x03;
    float y[256];
    hs_quant_decode(HS_QUANT_Q6_K, b, y, 256);
    cr_assert_eq(y[0], -7.5f, "q = (15 | 2 << 4) - 32 = 15: 0.25 * -2 * 15");
    cr_assert_eq(y[32], 12.0f, "q = (0 | 3 << 4) - 32 = 16: 0.25 * 3 * 16");
    cr_assert_eq(y[64], -2.75f, "q = (5 | 1 << 4) - 32 = -11: 0.25 * 1 * -11");
    cr_assert_eq(y[96], 0.0f, "q = (0 | 2 << 4) - 32 = 0");
    cr_assert_eq(y[16], -40.0f, "scale t1 = 5, q = -32: 0.25 * 5 * -32");
    cr_assert_eq(y[128], 8.5f, "q = (1 | 3 << 4) - 32 = 17: 0.25 * 2 * 17");
    cr_assert_eq(y[200], 0.0f, "scale t12 = 0");
}
