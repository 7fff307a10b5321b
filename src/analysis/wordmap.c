/* Word-level attention maps (Clark et al. 2019): subword keys summed, queries averaged. */
#include <stdlib.h>
#include <string.h>

#include "headscope/analysis.h"
#include "internal.h"

hs_status hs_wordmap_compute(const float *maps, int n_maps, int n, int causal, const int32_t *word,
                             int n_words, float *out, hs_error *err)
{
    hs_status st = hs_maps_check(maps, n_maps, n, err);
    if (st) {
        hs_error_prefix(err, "word map");
        return st;
    }
    if (!word || !out)
        return hs_fail(err, HS_E_ARG, "word map: NULL word index or output");
    if (n_words < 1 || n_words > n)
        return hs_fail(err, HS_E_ARG, "word map: n_words is %d, expected 1..%d", n_words, n);
    size_t W = (size_t)n_words;
    int *ntok = calloc(W, sizeof *ntok);
    double *acc = malloc(W * W * sizeof *acc);
    if (!ntok || !acc) {
        st = hs_fail(err, HS_E_NOMEM, "word map: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        if (word[i] < 0 || word[i] >= n_words) {
            st = hs_fail(err, HS_E_VALUE, "word map: token %d has word %ld, expected 0..%d", i,
                         (long)word[i], n_words - 1);
            goto done;
        }
        ntok[word[i]]++;
    }
    for (size_t u = 0; u < W; u++)
        if (!ntok[u]) {
            st = hs_fail(err, HS_E_VALUE, "word map: word %zu has no tokens", u);
            goto done;
        }
    size_t per = (size_t)n * (size_t)n;
    for (int m = 0; m < n_maps; m++) {
        const float *a = maps + (size_t)m * per;
        memset(acc, 0, W * W * sizeof *acc);
        for (int i = 0; i < n; i++) {
            const float *row = a + (size_t)i * (size_t)n;
            double *dst = acc + (size_t)word[i] * W;
            int nk = causal ? i + 1 : n;
            for (int j = 0; j < nk; j++)
                dst[word[j]] += (double)row[j];
        }
        float *o = out + (size_t)m * W * W;
        for (size_t u = 0; u < W; u++)
            for (size_t v = 0; v < W; v++)
                o[u * W + v] = (float)(acc[u * W + v] / ntok[u]);
    }
done:
    free(acc);
    free(ntok);
    return st;
}
