/* SHA-256 (FIPS 180-4), for the model-file digests recorded in reports. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define HS_SHA_NI 1
#endif

#include "core/core.h"

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/* One 64-byte block into the state h. */
static void compress(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d;
    h[4] += e; h[5] += f; h[6] += g; h[7] += k;
}

void hs_sha256_blocks_generic(uint32_t h[8], const unsigned char *p, size_t blocks)
{
    for (size_t b = 0; b < blocks; b++)
        compress(h, p + 64 * b);
}

#ifdef HS_SHA_NI
/* The x86 SHA extensions (Intel SHA-NI): SHA256RNDS2 runs two rounds on the state held as
 * ABEF and CDGH (A in the highest lane), SHA256MSG1/MSG2 compute the message schedule's
 * sigma0 and sigma1 terms four words at a time (Intel's instruction reference). */
__attribute__((target("sha,sse4.1,ssse3"))) static void blocks_shani(uint32_t h[8],
                                                                      const unsigned char *p,
                                                                      size_t blocks)
{
    const __m128i bswap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
    __m128i abcd = _mm_loadu_si128((const __m128i *)h);
    __m128i efgh = _mm_loadu_si128((const __m128i *)(h + 4));
    __m128i badc = _mm_shuffle_epi32(abcd, 0xB1);                   /* B A D C, lane 0 first */
    __m128i hgfe = _mm_shuffle_epi32(efgh, 0x1B);                   /* H G F E */
    __m128i abef = _mm_alignr_epi8(badc, hgfe, 8);                  /* F E B A */
    __m128i cdgh = _mm_blend_epi16(hgfe, badc, 0xF0);               /* H G D C */
    for (size_t b = 0; b < blocks; b++, p += 64) {
        __m128i w[16], abef0 = abef, cdgh0 = cdgh;
        for (int i = 0; i < 4; i++)
            w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), bswap);
        for (int i = 4; i < 16; i++) {
            __m128i t = _mm_sha256msg1_epu32(w[i - 4], w[i - 3]);     /* W[j-16] + s0(W[j-15]) */
            t = _mm_add_epi32(t, _mm_alignr_epi8(w[i - 1], w[i - 2], 4)); /* + W[j-7] */
            w[i] = _mm_sha256msg2_epu32(t, w[i - 1]);                 /* + s1(W[j-2]) */
        }
        for (int i = 0; i < 16; i++) {
            __m128i wk = _mm_add_epi32(w[i], _mm_loadu_si128((const __m128i *)(K + 4 * i)));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk); /* two rounds: the new ABEF */
            wk = _mm_shuffle_epi32(wk, 0x0E);              /* the other two words */
            abef = _mm_sha256rnds2_epu32(abef, cdgh, wk);
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B); /* A B E F */
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1); /* G H C D */
    _mm_storeu_si128((__m128i *)h, _mm_blend_epi16(feba, dchg, 0xF0));         /* A B C D */
    _mm_storeu_si128((__m128i *)(h + 4), _mm_alignr_epi8(dchg, feba, 8));    /* E F G H */
}

static int have_shani(void)
{
    static int known = -1;
    int k;
#pragma omp atomic read
    k = known;
    if (k < 0) {
        unsigned a, b, c, d;
        k = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_1) && (c & bit_SSSE3) &&
            __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29)); /* SHA */
#pragma omp atomic write
        known = k;
    }
    return k;
}
#endif

int hs_sha256_blocks_accel(uint32_t h[8], const unsigned char *p, size_t blocks)
{
#ifdef HS_SHA_NI
    if (have_shani()) {
        blocks_shani(h, p, blocks);
        return 1;
    }
#endif
    (void)h;
    (void)p;
    (void)blocks;
    return 0;
}

static void blocks(uint32_t h[8], const unsigned char *p, size_t n)
{
    if (!hs_sha256_blocks_accel(h, p, n))
        hs_sha256_blocks_generic(h, p, n);
}

void hs_sha256_init(hs_sha256_ctx *s)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof iv);
    s->len = 0;
    s->fill = 0;
}

void hs_sha256_update(hs_sha256_ctx *s, const void *data, size_t n)
{
    const unsigned char *p = data;
    s->len += n;
    if (s->fill) {
        size_t take = 64 - s->fill < n ? 64 - s->fill : n;
        memcpy(s->buf + s->fill, p, take);
        s->fill += take;
        p += take;
        n -= take;
        if (s->fill < 64)
            return;
        blocks(s->h, s->buf, 1);
        s->fill = 0;
    }
    blocks(s->h, p, n / 64);
    p += n / 64 * 64;
    n %= 64;
    memcpy(s->buf, p, n);
    s->fill = n;
}

void hs_sha256_final(hs_sha256_ctx *s, char hex[65])
{
    uint64_t bits = s->len * 8;
    unsigned char pad = 0x80, zero = 0, lenbe[8];
    hs_sha256_update(s, &pad, 1);
    while (s->fill != 56)
        hs_sha256_update(s, &zero, 1);
    for (int i = 0; i < 8; i++)
        lenbe[i] = (unsigned char)(bits >> (56 - 8 * i));
    hs_sha256_update(s, lenbe, 8);
    for (int i = 0; i < 8; i++)
        snprintf(hex + 8 * i, 9, "%08x", (unsigned)s->h[i]);
}

hs_status hs_sha256_file(const char *path, char hex[65], uint64_t *size, hs_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return hs_fail(err, HS_E_IO, "cannot open '%s': %s", path, strerror(errno));
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    if (!buf) {
        fclose(f);
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    }
    hs_sha256_ctx s;
    hs_sha256_init(&s);
    size_t got;
    while ((got = fread(buf, 1, CHUNK, f)) > 0)
        hs_sha256_update(&s, buf, got);
    int bad = ferror(f);
    free(buf);
    fclose(f);
    if (bad)
        return hs_fail(err, HS_E_IO, "cannot read '%s'", path);
    *size = s.len;
    hs_sha256_final(&s, hex);
    return HS_OK;
}
