/*
 * src/analysis/analysis_internal.h — what the analysis layer (src/analysis/) offers the
 * layers above it (the pipeline, the report writers) beyond include/headscope/analysis.h;
 * private to the library.
 */
#ifndef HEADSCOPE_ANALYSIS_INTERNAL_H
#define HEADSCOPE_ANALYSIS_INTERNAL_H

#include <stddef.h>

/* "L.H" of a head index l*H + h (n_head = H) into buf (at least 16 bytes); returns buf.
 * The name reports and pictures give a head (src/analysis/maps.c). */
const char *hs_head_label(int index, int n_head, char *buf, size_t cap);

#endif /* HEADSCOPE_ANALYSIS_INTERNAL_H */
