/* Interoperability: headscope's decoders of ggml's block formats (src/model/quant.c) against
 * llama.cpp's own (ggml's), on 4,096 blocks of random bytes per format (f16 scales kept finite):
 * every float must be bit-identical. Built and run by tests/llamacpp.sh against a llama.cpp
 * build (ggml.h and libggml-base); prints one line per format, exit 1 on any difference. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "model/quant.h"

int main(void)
{
    struct ggml_init_params ip = {1 << 20, NULL, false};
    struct ggml_context *ctx = ggml_init(ip); /* fills ggml's f16 table */
    /* each format and the offsets of its f16 fields (a second equal to the first: none) */
    static const struct {
        uint32_t type;
        size_t half[2];
    } types[] = {{HS_QUANT_Q4_0, {0, 0}},     {HS_QUANT_Q4_1, {0, 2}},    {HS_QUANT_Q5_0, {0, 0}},
                 {HS_QUANT_Q5_1, {0, 2}},     {HS_QUANT_Q8_0, {0, 0}},    {HS_QUANT_Q2_K, {80, 82}},
                 {HS_QUANT_Q3_K, {108, 108}}, {HS_QUANT_Q4_K, {0, 2}},    {HS_QUANT_Q5_K, {0, 2}},
                 {HS_QUANT_Q6_K, {208, 208}}, {HS_QUANT_IQ4_NL, {0, 0}}, {HS_QUANT_IQ4_XS, {0, 0}}};
    int bad = 0;
    srand(1);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        size_t e = 0, b = 0, nb = 4096;
        hs_quant_block(types[t].type, &e, &b);
        size_t n = nb * e;
        unsigned char *src = malloc(nb * b);
        float *ours = malloc(n * sizeof *ours), *theirs = malloc(n * sizeof *theirs);
        if (!src || !ours || !theirs)
            return 1;
        for (size_t i = 0; i < nb * b; i++)
            src[i] = (unsigned char)rand();
        for (size_t k = 0; k < nb; k++)
            for (int s = 0; s < 2; s++)
                src[k * b + types[t].half[s] + 1] &= 0xBB; /* exponent below all-ones */
        hs_quant_decode(types[t].type, src, ours, n);
        ggml_get_type_traits((enum ggml_type)types[t].type)->to_float(src, theirs, (int64_t)n);
        size_t diff = 0;
        for (size_t i = 0; i < n; i++)
            diff += memcmp(&ours[i], &theirs[i], sizeof(float)) != 0;
        printf("%s: %zu blocks, %zu of %zu values differ from llama.cpp's\n",
               ggml_type_name((enum ggml_type)types[t].type), nb, diff, n);
        bad |= diff != 0;
        free(src);
        free(ours);
        free(theirs);
    }
    ggml_free(ctx);
    return bad;
}
