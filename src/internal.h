/*
 * src/internal.h — a compatibility umbrella, kept while branches written against it merge:
 * it includes every layer's private header. New code includes the header of each layer it
 * uses instead, so a file's includes say which layers it depends on:
 *   core/core.h                        errors, sizes, JSON, files, SHA-256, memory, GEMM
 *   text/text_internal.h               tokenizers described field by field, text tables
 *   model/model_internal.h             weight layout, readers' contract, weight memory
 *   analysis/analysis_internal.h       head names, Holm, norm-based values, DLA in a pass
 *   importance/importance_internal.h   loss rows, gradient buffers, pruning from g0
 *   io/io_internal.h                   report.json's pieces, large JSON arrays
 */
#ifndef HEADSCOPE_INTERNAL_H
#define HEADSCOPE_INTERNAL_H

#include "analysis/analysis_internal.h"
#include "core/core.h"
#include "importance/importance_internal.h"
#include "io/io_internal.h"
#include "model/model_internal.h"
#include "text/text_internal.h"

#endif /* HEADSCOPE_INTERNAL_H */
