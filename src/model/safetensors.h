/* safetensors reader (private). */
#ifndef HEADSCOPE_SAFETENSORS_H
#define HEADSCOPE_SAFETENSORS_H

#include "model/model_internal.h"

typedef struct hs_safetensors {
    unsigned char *map; /* the whole file, mapped read-only (NULL when parsed from memory) */
    size_t map_len;
    hs_tensor_view *tensors; /* (n), data points into map */
    size_t n;
} hs_safetensors;

/* Opens and validates a .safetensors file (F32, F16, BF16). Close with hs_safetensors_close. */
hs_status hs_safetensors_open(const char *path, hs_safetensors **out, hs_error *err);

/* Parses and validates safetensors bytes held by the caller (buf must outlive *out);
 * name is used in messages. Close with hs_safetensors_close. */
hs_status hs_safetensors_parse(const unsigned char *buf, size_t len, const char *name,
                               hs_safetensors **out, hs_error *err);

/* The tensor called name, or NULL. */
const hs_tensor_view *hs_safetensors_find(const hs_safetensors *s, const char *name);

/* Hands the file mapping to the caller (who munmaps it; NULL when parsed from memory);
 * the tensor views stay valid while the caller keeps it. */
void hs_safetensors_take_map(hs_safetensors *s, void **map, size_t *len);

/* Unmaps and frees; accepts NULL. */
void hs_safetensors_close(hs_safetensors *s);

#endif
