/* Word-level attention maps (Clark et al. 2019): subword keys summed, queries averaged. */
#include <stdlib.h>
#include <string.h>

#include "analysis/vis.h"
#include "core/core.h"
#include "headscope/analysis.h"
#include "headscope/tokenizer.h"

hs_status hs_wordmap_compute(const float *maps, int n_maps, int n, hs_visibility vis,
                             const int32_t *word, int n_words, float *out, hs_error *err)
{
    hs_status st = hs_maps_check(maps, n_maps, n, err);
    if (st) {
        hs_error_prefix(err, "word map");
        return st;
    }
    if ((st = hs_vis_args(&vis, 1, 1, "word map", err)))
        return st;
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
            for (int j = hs_vis_lo(vis, i), hi = hs_vis_hi(vis, i, n); j < hi; j++)
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

static int is_space(char ch) { return ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r'; }

static int is_special(const char *raw)
{
    size_t len = strlen(raw);
    return len >= 4 && !strncmp(raw, "<|", 2) && !strcmp(raw + len - 2, "|>");
}

/* Token i is a special or added token of tok. */
static int tok_special(const hs_tokenizer *tok, const int32_t *ids, int i)
{
    return tok && ids && hs_tokenizer_is_special(tok, ids[i]);
}

int hs_word_ids(const char *const *tokens, const char *const *display, const int32_t *ids, int n,
                int wordpiece, const hs_tokenizer *tok, int32_t *word)
{
    int w = -1;
    if (tok)
        wordpiece = hs_tokenizer_get_kind(tok) == HS_TOK_WORDPIECE;
    for (int i = 0; i < n; i++) {
        const char *raw = tokens[i], *d = display[i], *pd = i ? display[i - 1] : "";
        size_t pl = strlen(pd);
        int start;
        if (i == 0)
            start = 1;
        else if (wordpiece) /* "##" continues a word */
            start = strncmp(raw, "##", 2) != 0;
        else
            start = is_space(d[0]) || (pl && is_space(pd[pl - 1])) || is_special(raw) ||
                    is_special(tokens[i - 1]) || tok_special(tok, ids, i) ||
                    tok_special(tok, ids, i - 1);
        w += start;
        word[i] = w;
    }
    return w + 1;
}

char **hs_word_labels(const char *const *display, const int32_t *word, int n, int n_words)
{
    char **out = calloc((size_t)n_words, sizeof *out);
    if (!out)
        return NULL;
    for (int i = 0, ok = 1; i < n && ok; i++) {
        const char *d = display[i];
        char **w = &out[word[i]];
        if (*w && !strncmp(d, "##", 2)) /* a WordPiece continuation */
            d += 2;
        const char *t = d;
        while (!*w && is_space(*t)) /* a word's first token: its leading space, unless the */
            t++;                    /* token is nothing else (a newline's own word) */
        d = *t ? t : d;
        size_t old = *w ? strlen(*w) : 0, add = strlen(d);
        char *nw = realloc(*w, old + add + 1);
        if ((ok = nw != NULL)) {
            memcpy(nw + old, d, add + 1);
            *w = nw;
        }
    }
    for (int u = 0; u < n_words; u++)
        if (!out[u]) { /* out of memory on the way */
            for (int v = 0; v < n_words; v++)
                free(out[v]);
            free(out);
            return NULL;
        }
    return out;
}
