/*
 * headscope.h — the whole public API of libheadscope in one include.
 *
 *     #include <headscope.h>    // cc prog.c $(pkg-config --cflags --libs headscope)
 *
 *     hs_error err = {0};
 *     hs_model *m = NULL;
 *     if (hs_model_load("fixtures/tiny-gpt2", &m, &err) != HS_OK)
 *         fprintf(stderr, "headscope: %s\n", err.msg);
 *     printf("headscope %s\n", hs_version());
 *     hs_model_free(m);
 *
 * examples/entropy.c is a complete program; docs/install.md says how to build against the
 * installed library and how the API and the report schema are versioned.
 */
#ifndef HEADSCOPE_H
#define HEADSCOPE_H

#include "headscope/status.h"
#include "headscope/version.h"
#include "headscope/tokenizer.h"
#include "headscope/visibility.h"
#include "headscope/model.h"
#include "headscope/hooks.h"
#include "headscope/forward.h"
#include "headscope/analysis.h"
#include "headscope/activations.h"
#include "headscope/importance.h"
#include "headscope/patch.h"
#include "headscope/composition.h"
#include "headscope/report.h"
#include "headscope/corpus.h"
#include "headscope/npy.h"
#include "headscope/render.h"
#include "headscope/html.h"
#include "headscope/gguf.h"

#endif /* HEADSCOPE_H */
