/* PyTorch pytorch_model.bin reader (private): the zip archive torch.save writes (PyTorch 1.6
 * and later), read without executing anything. See docs/formats.md. */
#ifndef HEADSCOPE_TORCHBIN_H
#define HEADSCOPE_TORCHBIN_H

#include "model/model_internal.h"

/* A tensor of the state dict that is not F32/F16/BF16 (an int64 position_ids buffer, a uint8
 * attention mask, a float64 value, ...): listed, never handed to the weight builder. */
typedef struct hs_torchbin_skip {
    const char *name;
    const char *dtype; /* torch dtype name: "uint8", "bool", "int64", "float64", ... */
} hs_torchbin_skip;

typedef struct hs_torchbin {
    unsigned char *map; /* the whole file, mapped read-only (NULL when parsed from memory) */
    size_t map_len;
    hs_tensor_view *tensors; /* (n) F32, F16 and BF16 tensors in file order; data points into
                              * the file bytes, unaligned in general. A 0-d scalar has ndim 0,
                              * shape all 1 and one element, as in the safetensors reader. */
    size_t n;
    hs_torchbin_skip *skipped; /* (n_skipped) the other tensors */
    size_t n_skipped;
    char *names; /* one block holding every name above */
} hs_torchbin;

/* Opens and validates a torch.save zip file. Close with hs_torchbin_close. */
hs_status hs_torchbin_open(const char *path, hs_torchbin **out, hs_error *err);

/* Parses and validates torch.save bytes held by the caller (buf must outlive *out); name is
 * used in messages. Close with hs_torchbin_close. */
hs_status hs_torchbin_parse(const unsigned char *buf, size_t len, const char *name,
                            hs_torchbin **out, hs_error *err);

/* The F32/F16/BF16 tensor called name, or NULL. */
const hs_tensor_view *hs_torchbin_find(const hs_torchbin *t, const char *name);

/* NULL, or the torch dtype name ("uint8", "bool", "int64", ...) of a tensor that exists but
 * was skipped because it is not F32/F16/BF16. */
const char *hs_torchbin_skipped(const hs_torchbin *t, const char *name);

/* Unmaps and frees; accepts NULL. */
void hs_torchbin_close(hs_torchbin *t);

#endif
