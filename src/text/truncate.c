/* Truncating an encoding to a token limit as Hugging Face's tokenizers library does. */
#include <string.h>

#include "headscope/tokenizer.h"
#include "text/text_internal.h"

size_t hs_tok_chunk_end(const char *s, size_t len, size_t from, size_t size)
{
    if (len - from <= size)
        return len;
    for (size_t p = from + size; p + 1 < len; p++) {
        unsigned a = (unsigned char)s[p - 1], b = (unsigned char)s[p + 1];
        int alnum_a = (a | 0x20u) - 'a' < 26u || a - '0' < 10u, alpha_b = (b | 0x20u) - 'a' < 26u;
        if (s[p] == ' ' && alnum_a && alpha_b)
            return p;
    }
    return len;
}

/* Moves count tokens from position from to position to (to <= from) inside an encoding. */
static void move_tokens(hs_encoding *e, size_t to, size_t from, size_t count)
{
    memmove(e->ids + to, e->ids + from, count * sizeof *e->ids);
    memmove(e->type_ids + to, e->type_ids + from, count * sizeof *e->type_ids);
}

/* Truncates to max tokens as Hugging Face's tokenizers library (0.23) does with its default
 * "longest_first" strategy: the texts are cut, then the post-processor's special tokens put
 * around them, so with budget = max minus the template's special tokens a single text keeps
 * its first budget tokens. A pair is balanced on its lengths capped at max: with n1 <= n2
 * those capped lengths (the first text is n1 on a tie), the shorter keeps n1 and the longer
 * max(n1, budget - n1) (or n1 when n1 > budget); when that is still more than the budget they
 * keep budget/2 and budget/2 + budget%2. Each segment keeps its first tokens. Checked against
 * the library on every pair of lengths up to 20 and max up to 30
 * (fixtures/tokenizer/truncation_golden.json holds real-text cases). Linear in the encoding. */
void hs_encoding_truncate(const hs_tokenizer *tok, hs_encoding *e, size_t max)
{
    if (e->n <= max)
        return;
    const hs_template *tm = e->paired ? &tok->pair : &tok->single;
    size_t len_a = e->n_text, len_b = e->paired ? e->n_pair : 0;
    size_t specials = hs_tokenizer_special_count(tok, e->paired);
    if (len_a > e->n || len_b > e->n - len_a || e->n - len_a - len_b != specials) {
        e->n = max; /* not laid out by tok's template: keep the first max */
        return;
    }
    size_t budget = max > specials ? max - specials : 0; /* content tokens that stay */
    size_t a = len_a < budget ? len_a : budget, b = 0;
    if (e->paired) {
        size_t ca = len_a < max ? len_a : max, cb = len_b < max ? len_b : max;
        int swap = ca > cb;
        size_t n1 = swap ? cb : ca, n2; /* n1: the shorter */
        n2 = n1 > budget ? n1 : (n1 > budget - n1 ? n1 : budget - n1);
        if (n1 + n2 > budget) {
            n1 = budget / 2;
            n2 = n1 + budget % 2;
        }
        a = swap ? n2 : n1;
        b = swap ? n1 : n2;
        a = a < len_a ? a : len_a;
        b = b < len_b ? b : len_b;
    }
    /* walk the template: special tokens move down, each text keeps its first tokens */
    size_t from = 0, to = 0;
    for (size_t k = 0; k < tm->n; k++) {
        size_t keep = 1, had = 1;
        if (tm->id[k] == HS_TMPL_A)
            keep = a, had = len_a;
        else if (tm->id[k] == HS_TMPL_B)
            keep = b, had = len_b;
        move_tokens(e, to, from, keep);
        to += keep;
        from += had;
    }
    e->n = to;
    e->n_text = a;
    e->n_pair = b;
}
