/* ggml block formats decoded (src/model/quant.c): blocks built by hand, with the expected
 * values worked out in the comments from the layouts in docs/gguf.md. Every value below is
 * exact in float32, so equality is asserted. Then every format on 16 random blocks against
 * fixtures/quant/ (fixtures/ref/quant_ref.py's independent numpy decoders), bit for bit. */
#include <stdio.h>
#include <stdlib.h>
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

/* y[i] == v for each {i, v, why}: the values of a hand-built block. */
typedef struct hand_value {
    int i;
    float v;
    const char *why;
} hand_value;

static void expect_values(const float *y, const hand_value *w, size_t n)
{
    for (size_t k = 0; k < n; k++)
        cr_expect_eq(y[w[k].i], w[k].v, "y[%d] = %g, expected %g: %s", w[k].i, (double)y[w[k].i],
                     (double)w[k].v, w[k].why);
}

Test(quant, block_sizes)
{
    static const struct {
        uint32_t type;
        size_t elems, bytes;
    } want[] = {{HS_QUANT_Q4_0, 32, 18},   {HS_QUANT_Q8_0, 32, 34},    {HS_QUANT_Q4_K, 256, 144},
                {HS_QUANT_Q6_K, 256, 210}, {HS_QUANT_Q4_1, 32, 20},    {HS_QUANT_Q5_0, 32, 22},
                {HS_QUANT_Q5_1, 32, 24},   {HS_QUANT_Q2_K, 256, 84},   {HS_QUANT_Q3_K, 256, 110},
                {HS_QUANT_Q5_K, 256, 176}, {HS_QUANT_IQ4_NL, 32, 18}, {HS_QUANT_IQ4_XS, 256, 136}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        size_t e = 0, b = 0;
        cr_assert(hs_quant_block(want[k].type, &e, &b) && e == want[k].elems && b == want[k].bytes,
                  "type %u: %zu elements, %zu bytes", (unsigned)want[k].type, e, b);
    }
    size_t e = 7, b = 7;
    cr_assert(!hs_quant_block(9, &e, &b) && e == 7 && b == 7, "Q8_1 is not decoded");
    cr_assert(!hs_quant_block(15, &e, &b), "Q8_K is not decoded");
    cr_assert(!hs_quant_block(16, &e, &b), "IQ2_XXS is not decoded");
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

/* Q4_1: d = 0.5, m = -1: x = 0.5 q - 1. Q5_0: d = 0.25, fifth bits of elements 0 and 16
 * (qh bits 0 and 16) set: x = 0.25 (q - 16). */
Test(quant, q4_1_q5_0_hand_blocks)
{
    unsigned char a[20] = {0}, c[22] = {0};
    put16(a, F16_HALF);
    put16(a + 2, 0xBC00); /* -1 */
    a[4] = 0xF3;          /* element 0: 3 -> 0.5; element 16: 15 -> 6.5 */
    float y[32];
    hs_quant_decode(HS_QUANT_Q4_1, a, y, 32);
    static const hand_value w0[] = {{0, 0.5f, "0.5 * 3 - 1"}, {16, 6.5f, "0.5 * 15 - 1"},
                                    {1, -1.0f, "q = 0 gives the min"}};
    expect_values(y, w0, sizeof w0 / sizeof w0[0]);
    put16(c, F16_QUARTER);
    c[2] = 0x01;     /* qh bit 0: element 0 */
    c[2 + 2] = 0x01; /* qh bit 16: element 16 */
    c[6] = 0x21;     /* element 0: 1 | 16 = 17 -> 0.25; element 16: 2 | 16 = 18 -> 0.5 */
    hs_quant_decode(HS_QUANT_Q5_0, c, y, 32);
    static const hand_value w1[] = {{0, 0.25f, "0.25 * (17 - 16)"}, {16, 0.5f, "0.25 * (18 - 16)"},
                                    {1, -4.0f, "q = 0: 0.25 * (0 - 16)"}};
    expect_values(y, w1, sizeof w1 / sizeof w1[0]);
}

/* Q2_K: d = 1, dmin = 0.5. scales[0] = 0x23 (scale 3, min 2), scales[1] = 0x11, scales[2] =
 * 0x04. qs[0] = 0x1B = 00 01 10 11: element 0 (bits 0-1) q = 3, element 32 (sub-block 2,
 * bits 2-3) q = 2. qs[16] = 0x02: element 16 (sub-block 1) q = 2. */
Test(quant, q2_k_hand_block)
{
    unsigned char b[84] = {0};
    b[0] = 0x23;
    b[1] = 0x11;
    b[2] = 0x04;
    b[16] = 0x1B;
    b[16 + 16] = 0x02;
    put16(b + 80, F16_ONE);
    put16(b + 82, F16_HALF);
    float y[256];
    hs_quant_decode(HS_QUANT_Q2_K, b, y, 256);
    static const hand_value w2[] = {{0, 8.0f, "1 * 3 * 3 - 0.5 * 2"},
                                    {16, 1.5f, "1 * 1 * 2 - 0.5 * 1"}, {32, 8.0f, "1 * 4 * 2 - 0"},
                                    {1, -1.0f, "q = 0: -0.5 * 2"}};
    expect_values(y, w2, sizeof w2 / sizeof w2[0]);
}

/* Q3_K: d = 0.5. Scale 0: low 4 bits byte 0 = 0x0, top 2 bits byte 8 bits 0-1 = 2 -> 32
 * (x 0); scale 8: byte 0 high nibble 0x3, byte 8 bits 4-5 = 2 -> 35 (d 3 * 0.5 = 1.5).
 * Element 128 is sub-block 8 (half 1, bits 0-1 of qs[32]): q low = 2, hmask[0] bit 4 set
 * -> q = 2; element 129: q low 0, bit clear -> q = -4. */
Test(quant, q3_k_hand_block)
{
    unsigned char b[110] = {0};
    b[0] = 0x10;       /* hmask[0]: bit 4 (sub-blocks 8, 9 of the pair) */
    b[32 + 32] = 0x02; /* qs[32]: element 128, bits 0-1 = 2 */
    b[96 + 0] = 0x30;  /* scales byte 0: scale 0 low 0, scale 8 low 3 */
    b[96 + 8] = 0x22;  /* byte 8: scale 0 top 2 (bits 0-1), scale 8 top 2 (bits 4-5) */
    put16(b + 108, F16_HALF);
    float y[256];
    hs_quant_decode(HS_QUANT_Q3_K, b, y, 256);
    static const hand_value w3[] = {{128, 3.0f, "0.5 * 3 * 2"}, {129, -6.0f, "0.5 * 3 * (0 - 4)"},
                                    {0, 0.0f, "scale 0 = 32: zero"},
                                    {16, 64.0f, "scale 1 = 0: 0.5 * -32 * (0 - 4)"}};
    expect_values(y, w3, sizeof w3 / sizeof w3[0]);
}

/* IQ4_XS: d = 1; sub-block 1's scale: scales_l[0] high nibble 1, scales_h bits 2-3 = 2 ->
 * 33, dl = 1. Element 32 (first of sub-block 1): grid[15] = 113. */
Test(quant, iq4_xs_hand_block)
{
    unsigned char b[136] = {0};
    put16(b, F16_ONE);
    put16(b + 2, 0x0008); /* scales_h: bits 2-3 = 2 */
    b[4] = 0x10;
    b[8 + 16] = 0x8F; /* element 32: grid[15] = 113; element 48: grid[8] = 1 */
    float y[256];
    hs_quant_decode(HS_QUANT_IQ4_XS, b, y, 256);
    static const hand_value w4[] = {{32, 113.0f, "1 * (33 - 32) * grid[15]"},
                                    {48, 1.0f, "1 * (33 - 32) * grid[8]"},
                                    {33, -127.0f, "nibble 0: grid[0]"},
                                    {0, 4064.0f, "sub-block 0: scale 0 -> -32 * -127"}};
    expect_values(y, w4, sizeof w4 / sizeof w4[0]);
}

/* Every decoded format on fixtures/quant/T.blocks against T.f32, bit for bit. */
Test(quant, random_blocks_equal_the_reference)
{
    static const struct {
        const char *name;
        uint32_t type;
    } types[] = {{"Q4_0", HS_QUANT_Q4_0}, {"Q4_1", HS_QUANT_Q4_1}, {"Q5_0", HS_QUANT_Q5_0},
                 {"Q5_1", HS_QUANT_Q5_1}, {"Q8_0", HS_QUANT_Q8_0}, {"Q2_K", HS_QUANT_Q2_K},
                 {"Q3_K", HS_QUANT_Q3_K}, {"Q4_K", HS_QUANT_Q4_K}, {"Q5_K", HS_QUANT_Q5_K},
                 {"Q6_K", HS_QUANT_Q6_K}, {"IQ4_NL", HS_QUANT_IQ4_NL},
                 {"IQ4_XS", HS_QUANT_IQ4_XS}};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        char path[128];
        size_t nb = 0, nf = 0, e = 0, b = 0;
        snprintf(path, sizeof path, "fixtures/quant/%s.blocks", types[t].name);
        unsigned char *blocks = tu_slurp(path, &nb);
        snprintf(path, sizeof path, "fixtures/quant/%s.f32", types[t].name);
        unsigned char *want = tu_slurp(path, &nf);
        cr_assert(hs_quant_block(types[t].type, &e, &b));
        cr_assert_eq(nb % b, 0, "%s: %zu bytes", types[t].name, nb);
        size_t n = nb / b * e;
        cr_assert_eq(nf, 4 * n, "%s: %zu bytes of floats for %zu values", types[t].name, nf, n);
        float *y = malloc(n * sizeof *y);
        cr_assert_not_null(y);
        hs_quant_decode(types[t].type, blocks, y, n);
        size_t diff = 0, first = n;
        for (size_t i = 0; i < n; i++) {
            float w;
            memcpy(&w, want + 4 * i, 4); /* the fixture is little-endian, as this host */
            if (memcmp(&w, &y[i], 4) != 0 && diff++ == 0)
                first = i;
        }
        cr_expect_eq(diff, 0, "%s: %zu of %zu values differ (first %zu)", types[t].name, diff,
                     n, first);
        free(y);
        free(blocks);
        free(want);
    }
}
