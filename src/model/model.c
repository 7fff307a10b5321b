/* hs_model_load: format detection by magic bytes, accessors, hs_model_free. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/emb_stored.h"
#include "model/model_internal.h"

hs_status hs_model_load(const char *path, hs_model **out, hs_error *err)
{
    return hs_model_open(path, 0, out, err);
}

hs_status hs_model_open(const char *path, unsigned flags, hs_model **out, hs_error *err)
{
    hs_open_opts o = {.flags = flags};
    return hs_model_open2(path, &o, out, err);
}

hs_status hs_model_open2(const char *path, const hs_open_opts *o, hs_model **out, hs_error *err)
{
    *out = NULL;
    unsigned flags = o ? o->flags : 0;
    size_t budget = o ? o->weight_memory : 0;
    if (!path || !*path)
        return hs_fail(err, HS_E_ARG, "no model path given");
    hs_status st;
    int implicit = 0;
    if (budget == 0 && (st = hs_weight_memory_default(&budget, &implicit, err)))
        return st;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return hs_fail(err, HS_E_IO, "cannot open '%s': %s", path, strerror(errno));
    hs_model *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        free(m);
        return hs_fail(err, HS_E_NOMEM, "out of memory");
    }
    snprintf(m->storage_dtype, sizeof m->storage_dtype, "F32");
    m->open_flags = flags & (HS_OPEN_NO_WEIGHTS | HS_OPEN_TOKENIZER | HS_OPEN_MAP_WEIGHTS |
                             HS_OPEN_STORED_WEIGHTS | HS_OPEN_Q8_ACTIVATIONS);
    m->q8_act = (flags & HS_OPEN_Q8_ACTIVATIONS) != 0; /* implies the stored type */
    /* no budget given: the layers in their stored type, as `stored` (hs_weights_build) */
    m->weight_auto = implicit && !(flags & (HS_OPEN_STORED_WEIGHTS | HS_OPEN_Q8_ACTIVATIONS));
    m->stored_gemm = (flags & HS_OPEN_STORED_WEIGHTS) || budget == HS_WEIGHT_MEMORY_STORED ||
                     m->q8_act || m->weight_auto;
    m->weight_memory = budget == HS_WEIGHT_MEMORY_STORED || m->q8_act ? 1 : budget;
    if (S_ISDIR(sb.st_mode)) {
        st = hs_hf_load(m, path, err);
    } else if (!S_ISREG(sb.st_mode)) { /* a FIFO or a device would block or never end */
        st = hs_fail(err, HS_E_IO, "'%s' is not a regular file or a folder", path);
    } else {
        unsigned char magic[8] = {0};
        FILE *f = fopen(path, "rb");
        if (!f) {
            st = hs_fail(err, HS_E_IO, "cannot open '%s': %s", path, strerror(errno));
        } else {
            size_t got = fread(magic, 1, sizeof magic, f);
            fclose(f);
            if (got >= 4 && !memcmp(magic, "GGUF", 4))
                st = hs_gguf_load(m, path, err);
            else if (got >= 8 && hs_le64(magic) < (uint64_t)sb.st_size && magic[0] != 0 &&
                     (magic[7] == 0))
                st = hs_fail(err, HS_E_FORMAT,
                             "'%s' looks like a bare safetensors file; pass the model folder "
                             "that holds it with config.json", path);
            else
                st = hs_fail(err, HS_E_FORMAT,
                             "'%s' is neither a Hugging Face model folder nor a GGUF file "
                             "(no 'GGUF' magic)", path);
        }
    }
    if (st) {
        hs_model_free(m);
        return st;
    }
    *out = m;
    return HS_OK;
}

void hs_model_free(hs_model *m)
{
    if (!m)
        return;
    hs_tokenizer_free(m->tok);
    hs_wcache_free(m->wc);
    hs_emb_stored_free(m->es);
    free(m->layers);
    free(m->arena);
    free(m->moe_arena);
    if (m->map)
        hs_file_unmap(m->map, m->map_len);
    for (int i = 0; i < m->n_shards; i++)
        free(m->shards[i]);
    free(m->shards);
    free(m->path);
    free(m);
}

const hs_model_config *hs_model_config_of(const hs_model *m) { return &m->cfg; }
const hs_tokenizer *hs_model_tokenizer(const hs_model *m) { return m->tok; }
size_t hs_model_param_count(const hs_model *m) { return m->n_params; }
int hs_model_has_weights(const hs_model *m) { return m->has_weights; }
hs_file_format hs_model_format(const hs_model *m) { return m->format; }
const char *hs_model_storage_dtype(const hs_model *m) { return m->storage_dtype; }
const char *hs_model_path(const hs_model *m) { return m->path; }
const char *hs_model_activations(const hs_model *m) { return m->q8_act ? "q8" : "float"; }
const char *hs_model_warnings(const hs_model *m) { return m->warnings; }

void hs_model_warn(hs_model *m, const char *fmt, ...)
{
    size_t used = strlen(m->warnings);
    if (used + 2 >= sizeof m->warnings)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(m->warnings + used, sizeof m->warnings - used - 1, fmt, ap);
    va_end(ap);
    used = n < 0 ? used : strlen(m->warnings);
    m->warnings[used] = '\n';
    m->warnings[used + 1] = '\0';
}
const char *hs_model_weights_file(const hs_model *m) { return m->weights_file; }
size_t hs_model_weight_memory(const hs_model *m) { return m->weight_memory; }
int hs_model_stored_weights(const hs_model *m) { return m->stored_gemm; }

size_t hs_model_converted_bytes(const hs_model *m) { return m->converted_bytes; }
