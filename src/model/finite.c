/* The load's look at stored bytes for non-finite values (hs_tensor_surely_finite,
 * model_internal.h): what the weight cache's check of layers used in their stored type
 * (src/model/wcache.c, check_stored) clears without decoding. */
#include "model/model_internal.h"
#include "model/quant.h"
#include "nn/fastmath.h"

/* 1 when none of count little-endian halves at p has every bit of mask set (the exponent
 * of an infinity or a NaN). */
HS_CLONES static int halves_finite(const unsigned char *p, size_t count, unsigned mask)
{
    unsigned bad = 0;
#pragma omp simd reduction(| : bad)
    for (size_t i = 0; i < count; i++)
        bad |= (hs_le16(p + 2 * i) & mask) == mask;
    return !bad;
}

int hs_tensor_surely_finite(const hs_tensor_view *t, size_t from, size_t count)
{
    const unsigned char *p = t->data;
    size_t blk_elems, blk_bytes;
    switch (t->dtype) {
    case HS_DT_F16: /* exponent 31: infinity or NaN */
        return halves_finite(p + 2 * from, count, 0x7c00u);
    case HS_DT_BF16:
        return halves_finite(p + 2 * from, count, 0x7f80u);
    default:
        if (!hs_quant_block(hs_dtype_ggml_quant(t->dtype), &blk_elems, &blk_bytes))
            return 0;
        return hs_quant_scales_finite(hs_dtype_ggml_quant(t->dtype),
                                      p + from / blk_elems * blk_bytes, count / blk_elems);
    }
}
