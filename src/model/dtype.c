/* The stored types of tensors (hs_dtype): names, ggml codes, sizes, and decoding a range of
 * a tensor's elements to float32 (F32, F16, BF16 here; ggml's block formats in quant.c). */
#include <string.h>

#include "headscope/gguf.h"
#include "model/model_internal.h"
#include "model/quant.h"
#include "nn/fastmath.h"

/* Each dtype's name and ggml type code (0: not a block format; OTHER's name is "?"). */
static const struct {
    const char *name;
    uint32_t ggml;
} dtypes[] = {
    [HS_DT_F32] = {"F32", 0},          [HS_DT_F16] = {"F16", 0},
    [HS_DT_BF16] = {"BF16", 0},        [HS_DT_Q8_0] = {"Q8_0", HS_QUANT_Q8_0},
    [HS_DT_OTHER] = {"?", 0},          [HS_DT_Q4_0] = {"Q4_0", HS_QUANT_Q4_0},
    [HS_DT_Q4_K] = {"Q4_K", HS_QUANT_Q4_K},   [HS_DT_Q6_K] = {"Q6_K", HS_QUANT_Q6_K},
    [HS_DT_Q4_1] = {"Q4_1", HS_QUANT_Q4_1},   [HS_DT_Q5_0] = {"Q5_0", HS_QUANT_Q5_0},
    [HS_DT_Q5_1] = {"Q5_1", HS_QUANT_Q5_1},   [HS_DT_Q2_K] = {"Q2_K", HS_QUANT_Q2_K},
    [HS_DT_Q3_K] = {"Q3_K", HS_QUANT_Q3_K},   [HS_DT_Q5_K] = {"Q5_K", HS_QUANT_Q5_K},
    [HS_DT_IQ4_NL] = {"IQ4_NL", HS_QUANT_IQ4_NL}, [HS_DT_IQ4_XS] = {"IQ4_XS", HS_QUANT_IQ4_XS},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

const char *hs_dtype_name(hs_dtype dt)
{
    return (unsigned)dt < N_DTYPES ? dtypes[dt].name : "?";
}

/* The ggml type code of a block-quantised dtype, 0 (F32: not a block format) otherwise. */
static uint32_t quant_type(hs_dtype dt)
{
    return (unsigned)dt < N_DTYPES ? dtypes[dt].ggml : 0;
}

hs_dtype hs_dtype_of_ggml(uint32_t type)
{
    if (type == HS_GGML_F16)
        return HS_DT_F16;
    if (type == HS_GGML_BF16)
        return HS_DT_BF16;
    for (unsigned d = 0; d < N_DTYPES; d++)
        if (type != 0 && dtypes[d].ggml == type)
            return (hs_dtype)d;
    return HS_DT_F32;
}

size_t hs_dtype_bytes(hs_dtype dt, size_t count)
{
    size_t elems, bytes;
    if (hs_quant_block(quant_type(dt), &elems, &bytes))
        return count / elems * bytes;
    switch (dt) {
    case HS_DT_F32: return count * 4;
    case HS_DT_F16:
    case HS_DT_BF16: return count * 2;
    default: return 0;
    }
}

/* F16 to float32, exact (hs_f16_to_f32_fast): a loop that vectorises, in each HS_CLONES
 * build (quant.c says why). */
HS_CLONES static void f16_run(const unsigned char *p, float *out, size_t count)
{
#pragma omp simd
    for (size_t i = 0; i < count; i++)
        out[i] = hs_f16_to_f32_fast(hs_le16(p + 2 * i));
}

/* BF16 to float32, exact (the halves' bits are float32's top half): a loop that vectorises,
 * where a call a value (hs_bf16_to_f32) took 0.78 s a GB. */
HS_CLONES static void bf16_run(const unsigned char *p, float *out, size_t count)
{
#pragma omp simd
    for (size_t i = 0; i < count; i++) {
        uint32_t bits = (uint32_t)hs_le16(p + 2 * i) << 16;
        memcpy(&out[i], &bits, sizeof bits);
    }
}

/* Decodes elements [from, from + count) of t (flat, stored order; whole blocks of a block
 * format) into out. */
void hs_tensor_decode(const void *tv, size_t from, float *out, size_t count)
{
    const hs_tensor_view *t = tv;
    const unsigned char *p = t->data;
    size_t blk_elems, blk_bytes;
    switch (t->dtype) {
    case HS_DT_F32:
        for (size_t i = 0; i < count; i++) {
            uint32_t b = hs_le32(p + 4 * (from + i));
            memcpy(&out[i], &b, 4);
        }
        break;
    case HS_DT_F16:
        f16_run(p + 2 * from, out, count);
        break;
    case HS_DT_BF16:
        bf16_run(p + 2 * from, out, count);
        break;
    case HS_DT_OTHER: break; /* refused by place() before decoding */
    default:
        if (hs_quant_block(quant_type(t->dtype), &blk_elems, &blk_bytes))
            hs_quant_decode(quant_type(t->dtype), p + from / blk_elems * blk_bytes, out, count);
        break;
    }
}

uint32_t hs_dtype_ggml_quant(hs_dtype dt)
{
    return quant_type(dt);
}

int hs_dtype_block(hs_dtype dt)
{
    size_t elems, bytes;
    return hs_quant_block(quant_type(dt), &elems, &bytes) ? (int)elems : 1;
}
