/* The token embeddings and the LM head kept in their stored type (src/model/emb_stored.c).
 *
 * A model opened to use its stored types (hs_model.stored_gemm) whose token embedding table
 * or decoder is stored in another type than F32 (F16, BF16, ggml's block formats) keeps it
 * as a view into the file, as the layer matrices (docs/architecture.md, "Memory"):
 * m->wte and m->decoder are then NULL, and every reader goes through the accessors below,
 * which give the same float values as the converted table, bit for bit. A reader of single
 * rows (the embedding lookup, the logits of chosen ids, DLA's unembedding directions) gets
 * them decoded; the logits are a product with the stored rows (hs_gemm's filler, the float32
 * path's bits), and so is the backward pass's product with the decoder; a reader of the
 * whole matrix takes it a block of rows at a time (composition's W_U W_E), or (the GGUF
 * writer) gets a float32 copy converted the first time it asks and kept with the model. */
#ifndef HEADSCOPE_EMB_STORED_H
#define HEADSCOPE_EMB_STORED_H

#include "model/model_internal.h"

/* 1 when row e of the name table, stored as t, is kept in its stored type: the token
 * embeddings or an explicit decoder, in a type other than F32, of a model that uses its
 * stored types. */
int hs_emb_stored_wants(const hs_model *m, const hs_tensor_name *e, const hs_tensor_view *t);

/* Keeps t (checked by the caller's shape checks) for slot HS_S_TOK_EMB or HS_S_DECODER:
 * every value checked finite a row at a time, the file's mapping retained (a reader's own
 * buffer copied). */
hs_status hs_emb_stored_add(hs_model *m, hs_slot slot, const hs_tensor_view *t,
                            const char *name, hs_error *err);

/* The decoder is the token embeddings (tied, the decoder absent from the file). */
void hs_emb_stored_tie(hs_model *m);

void hs_emb_stored_free(hs_emb_stored *s);

/* Checks every value of t, (rows, in) stored row-major, finite a row at a time, the rows in
 * parallel, from its stored bytes where they tell (hs_tensor_surely_finite), else decoded:
 * HS_E_VALUE naming the tensor, the kind and the first flat index; its pages are dropped
 * afterwards when mapped (read again from the page cache when used). */
hs_status hs_tensor_check_rows(const hs_tensor_view *t, size_t rows, size_t in, int mapped,
                               const char *name, hs_error *err);

/* Row id of the token embeddings into dst (d floats); elements from.. from + count of row id
 * of the decoder (from a multiple of 256, count to the row's end or a multiple of 256). */
void hs_model_emb_row(const hs_model *m, int32_t id, float *dst);
void hs_model_decoder_row(const hs_model *m, int32_t id, int from, int count, float *dst);

/* Rows r0 .. r0 + n of the token embeddings / the decoder in float32, (n, d): a pointer
 * into the float32 table where there is one (m->wte, m->decoder, a stored table's copy),
 * else buf (n x d floats) with the stored rows decoded into it, the same values. A reader of
 * the whole matrix a block of rows at a time, no copy of the table made (composition). */
const float *hs_model_wte_rows(const hs_model *m, int r0, int n, float *buf);
const float *hs_model_decoder_rows(const hs_model *m, int r0, int n, float *buf);

/* 1 when the decoder is the token embeddings (tied), stored or float32. */
int hs_model_decoder_is_wte(const hs_model *m);

/* How many of the stored tables have been converted whole to float32 (0, 1 or 2): the
 * copies hs_model_wte_f32 / hs_model_decoder_f32 make and keep. */
int hs_model_emb_copies(const hs_model *m);

/* logits (rows, V) += scale h (rows, d) times the decoder transposed, with the bits of
 * hs_op_gemm(1, ..., m->decoder, ...) on its float32 form: from the stored rows when the
 * decoder is kept in its stored type, else that call. */
void hs_model_decoder_gemm(const hs_model *m, const float *h, int rows, float scale,
                           float *logits);

/* dh (rows, d) = scale dlogits (rows, V) times the decoder: hs_op_gemm's product on
 * m->decoder or the table's float32 copy where one exists, else on blocks decoded from the
 * stored rows (the same bits, no copy made); HS_E_NOMEM without memory. */
hs_status hs_model_decoder_back(const hs_model *m, const float *dlogits, int rows, float scale,
                                float *dh, hs_error *err);

/* The whole token embeddings / decoder in float32, (V, d): m->wte / m->decoder, or the
 * stored table's copy, converted on the first call and kept until hs_model_free (NULL with
 * HS_E_NOMEM). A tied decoder is the embeddings' pointer. Thread-safe. */
const float *hs_model_wte_f32(const hs_model *m, hs_error *err);
const float *hs_model_decoder_f32(const hs_model *m, hs_error *err);

/* *out = slot s's floats (model-level slots only): *hs_slot_ptr, and for the token
 * embeddings and the decoder hs_model_wte_f32 / hs_model_decoder_f32 (the GGUF writer). */
hs_status hs_model_slot_f32(const hs_model *m, hs_slot s, const float **out, hs_error *err);

#endif /* HEADSCOPE_EMB_STORED_H */
