/* T5's tensor-name table (src/model/arch_t5.c) and its descriptor row in arch.c's
 * families[]. Private to src/model/. */
#ifndef HEADSCOPE_ARCH_T5_H
#define HEADSCOPE_ARCH_T5_H

#include "headscope/model.h"

extern const struct hs_names hs_t5_table;
extern const char *const hs_t5_specials[];
#define HS_T5_N_SPECIALS 3

/* T5 (Raffel et al. 2020) as transformers' T5 models compute it: pre-norm RMSNorm blocks
 * without biases, unscaled scores with a relative position bias per stack, an encoder then
 * a decoder with cross-attention. The activation, gating, tied output and bucket counts
 * are per model (hf_config.c's parse_t5). */
#define HS_ARCH_T5                                                                           \
    {                                                                                        \
        .family = HS_FAMILY_T5, .name = "t5", .norm_place = HS_NORM_PRE,                     \
        .norm_kind = HS_NORM_RMS, .act = HS_ACT_RELU, .pos = HS_POS_RELATIVE,                \
        .vis = {HS_VIS_BIDIRECTIONAL, 0, 0}, .tied_embeddings = 1, .head = HS_HEAD_DECODER,  \
        .tokenizer = 0, .specials = hs_t5_specials, .n_specials = HS_T5_N_SPECIALS,          \
        .names = &hs_t5_table, .enc_dec = 1, .rel_buckets = 32, .rel_max_distance = 128,    \
        .attn_unscaled = 1,                                                                  \
    }

#endif
