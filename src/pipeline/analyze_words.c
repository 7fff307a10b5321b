/* Word-level maps of the text (Clark et al. 2019: subword keys summed, queries averaged)
 * for every analysed head, from the stored maps, with the words' labels. */
#include <stdlib.h>

#include "core/core.h"
#include "pipeline/pipeline.h"

hs_status hs_analysis_word_level(hs_analysis *a, hs_error *err)
{
    const hs_model_config *c = hs_model_config_of(a->model);
    int n = a->n;
    a->word_ids = malloc((size_t)n * sizeof *a->word_ids);
    float *map = malloc((size_t)n * (size_t)n * sizeof *map);
    if (!a->word_ids || !map) {
        free(map);
        return hs_fail(err, HS_E_NOMEM, "out of memory for word-level maps");
    }
    const hs_tokenizer *tok = hs_model_tokenizer(a->model);
    a->n_words = hs_word_ids((const char *const *)a->tokens, (const char *const *)a->display,
                             a->ids, n, c->arch->tokenizer == HS_TOK_WORDPIECE, tok,
                             a->word_ids);
    size_t ww = (size_t)a->n_words * (size_t)a->n_words;
    a->words = hs_word_labels((const char *const *)a->display, a->word_ids, n, a->n_words);
    a->word_maps = malloc((size_t)a->n_heads * ww * sizeof *a->word_maps);
    hs_status st = a->words && a->word_maps
                       ? HS_OK
                       : hs_fail(err, HS_E_NOMEM, "out of memory for word-level maps");
    for (int k = 0; k < a->n_heads && !st; k++) {
        st = hs_analysis_map(a, a->head_index[k], map, err);
        if (!st)
            st = hs_wordmap_compute(map, 1, n,
                                    hs_model_layer_visibility(c, a->head_index[k] / c->n_head),
                                    a->word_ids, a->n_words,
                                    a->word_maps + (size_t)k * ww, err);
    }
    free(map);
    return st;
}
