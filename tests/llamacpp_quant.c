/* Interoperability: headscope's decoders of ggml's block formats (src/model/quant.c) against
 * llama.cpp's own, on 4,096 blocks of random bytes per format (f16 scales kept finite):
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
    const uint32_t types[] = {HS_QUANT_Q4_0, HS_QUANT_Q8_0, HS_QUANT_Q4_K, HS_QUANT_Q6_K};
    const size_t scale_at[][2] = {{0, 0}, {0, 0}, {0, 2}, {208, 208}}; /* f16 scales' offsets */
    int bad = 0;
    srand(1);
    for (int t = 0; t < 4; t++) {
        size_t e = 0, b = 0, nb = 4096;
        hs_quant_block(types[t], &e, &b);
        size_t n = nb * e;
        unsigned char *src = malloc(nb * b);
        float *ours = malloc(n * sizeof *ours), *theirs = malloc(n * sizeof *theirs);
        if (!src || !ours || !theirs)
            return 1;
        for (size_t i = 0; i < nb * b; i++)
            src[i] = (unsigned char)rand();
        for (size_t k = 0; k < nb; k++)
            for (int s = 0; s < 2; s++)
                src[k * b + scale_at[t][s] + 1] &= 0xBB; /* exponent below all-ones */
        hs_quant_decode(types[t], src, ours, n);
        ggml_get_type_traits((enum ggml_type)types[t])->to_float(src, theirs, (int64_t)n);
        size_t diff = 0;
        for (size_t i = 0; i < n; i++)
            diff += memcmp(&ours[i], &theirs[i], sizeof(float)) != 0;
        printf("%s: %zu blocks, %zu of %zu values differ from llama.cpp's\n",
               ggml_type_name((enum ggml_type)types[t]), nb, diff, n);
        bad |= diff != 0;
        free(src);
        free(ours);
        free(theirs);
    }
    ggml_free(ctx);
    return bad;
}
