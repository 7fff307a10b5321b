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
struct hs_tensor_name;

/* 1 when the name-table row e applies to layer l: an encoder-decoder's encoder rows
 * (HS_TN_ENC) to its encoder layers, its decoder rows (HS_TN_DEC) to its decoder layers,
 * every other row to every layer (hs_names_walk). */
int hs_t5_row_in_layer(const hs_model_config *c, const struct hs_tensor_name *e, int l);

/* hs_arch_beyond_base's encoder-decoder part: the first combination of an encoder-decoder
 * (or of relative positions) the passes do not implement, NULL when there is none. */
const char *hs_t5_beyond(const hs_arch *a, const hs_model_config *c);

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
