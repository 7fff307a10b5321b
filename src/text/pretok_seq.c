/*
 * A pre-tokenizer Sequence of Split(Regex) and Digits steps before a final ByteLevel
 * (HS_PRE_SEQ): DeepSeek's files (deepseek-llm / DeepSeek-V2, deepseek-coder, DeepSeek-V3) and
 * any other of that shape. Each step cuts every piece of the step before it on its own, as
 * the tokenizers library does: a Split (behavior Isolated) makes each match and each stretch
 * between matches a piece, the pattern seeing the piece as its whole text (regex.c); Digits
 * makes each numeric character (individual_digits) or each run of them a piece; a final
 * ByteLevel with use_regex cuts with GPT-2's pattern (pretok.c).
 */
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "text/regex.h"
#include "text/text_internal.h"

#define TJ "tokenizer.json"
#define SEQ_MAX 8

enum { STEP_SPLIT, STEP_DIGITS, STEP_GPT2 };

typedef struct seq_step {
    int kind, individual;
    hs_rx *rx;
    char *src; /* a Split's pattern as written */
} seq_step;

struct hs_pre_seq {
    seq_step step[SEQ_MAX];
    size_t n;
};

void hs_pre_seq_free(hs_pre_seq *q)
{
    if (!q)
        return;
    for (size_t k = 0; k < SEQ_MAX; k++) {
        hs_rx_free(q->step[k].rx);
        free(q->step[k].src);
    }
    free(q);
}

int hs_pre_seq_equal(const hs_pre_seq *a, const hs_pre_seq *b)
{
    if (!a || !b || a->n != b->n)
        return 0;
    for (size_t k = 0; k < a->n; k++) {
        const seq_step *x = &a->step[k], *y = &b->step[k];
        if (x->kind != y->kind || (x->kind == STEP_DIGITS && x->individual != y->individual) ||
            (x->kind == STEP_SPLIT && strcmp(x->src, y->src) != 0))
            return 0;
    }
    return 1;
}

static hs_status split_step(seq_step *st, const cJSON *p, size_t k, hs_error *err)
{
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
    const char *rx = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pat, "Regex"));
    const char *beh = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "behavior"));
    char what[96];
    if (!rx)
        return hs_fail(err, HS_E_UNSUPPORTED, TJ ": pre_tokenizer 'Split' %zu of the Sequence without a Regex "
                       "pattern is not supported", k + 1);
    if (!beh || strcmp(beh, "Isolated") != 0 || hs_tj_bool(p, "invert", 0) != 0)
        return hs_fail(err, HS_E_UNSUPPORTED, TJ ": pre_tokenizer 'Split' %zu of the Sequence other than "
                       "behavior Isolated, invert false is not supported", k + 1);
    snprintf(what, sizeof what, TJ ": pre_tokenizer 'Split' %zu of the Sequence", k + 1);
    st->kind = STEP_SPLIT;
    if (!(st->src = malloc(strlen(rx) + 1)))
        return hs_fail(err, HS_E_NOMEM, TJ ": out of memory");
    memcpy(st->src, rx, strlen(rx) + 1);
    return hs_rx_compile(rx, what, &st->rx, err);
}

/* One step (k of n) into st; the ByteLevel is the last. */
static hs_status seq_item(hs_tokenizer *t, seq_step *st, const cJSON *p, size_t k, size_t n, hs_error *err)
{
    const char *type = hs_tj_type(p);
    if (!type)
        return hs_fail(err, HS_E_FORMAT, TJ ": pre_tokenizer %zu of the Sequence has no \"type\"", k + 1);
    if (k + 1 == n) {
        int aps = hs_tj_bool(p, "add_prefix_space", 1), rx = hs_tj_bool(p, "use_regex", 1);
        if (strcmp(type, "ByteLevel") != 0)
            return hs_fail(err, HS_E_UNSUPPORTED, TJ ": a pre_tokenizer Sequence of Split and Digits steps "
                           "must end with ByteLevel, not '%.64s'", type);
        if (aps < 0 || rx < 0)
            return hs_fail(err, HS_E_FORMAT, TJ ": ByteLevel options must be true, false or null");
        if (aps)
            return hs_fail(err, HS_E_UNSUPPORTED, TJ ": ByteLevel with add_prefix_space after Split or Digits "
                           "steps is not supported");
        t->byte_level = 1;
        t->add_prefix_space = 0;
        st->kind = STEP_GPT2;
        return HS_OK;
    }
    if (!strcmp(type, "Split"))
        return split_step(st, p, k, err);
    if (!strcmp(type, "Digits")) {
        if ((st->individual = hs_tj_bool(p, "individual_digits", 0)) < 0)
            return hs_fail(err, HS_E_FORMAT, TJ ": Digits individual_digits must be true or false");
        st->kind = STEP_DIGITS;
        return HS_OK;
    }
    return hs_fail(err, HS_E_UNSUPPORTED, TJ ": pre_tokenizer '%.64s' inside a Sequence of Split and Digits "
                   "steps is not supported (only Split with a Regex, Digits, then ByteLevel)", type);
}

hs_status hs_pre_seq_parse(hs_tokenizer *t, const cJSON *list, hs_error *err)
{
    size_t n = (size_t)cJSON_GetArraySize(list);
    if (n < 2 || n > SEQ_MAX)
        return hs_fail(err, HS_E_UNSUPPORTED, TJ ": a pre_tokenizer Sequence of %zu steps is not supported "
                       "(2 to %d: Split and Digits steps, then ByteLevel)", n, SEQ_MAX);
    hs_pre_seq *q = calloc(1, sizeof *q);
    if (!q)
        return hs_fail(err, HS_E_NOMEM, TJ ": out of memory");
    hs_status st = HS_OK;
    for (size_t k = 0; k < n && st == HS_OK; k++) {
        st = seq_item(t, &q->step[k], cJSON_GetArrayItem(list, (int)k), k, n, err);
        q->n = k + 1;
    }
    if (st == HS_OK && hs_tj_bool(cJSON_GetArrayItem(list, (int)n - 1), "use_regex", 1) == 0)
        q->n--; /* ByteLevel without its regex cuts nothing */
    if (st != HS_OK) {
        hs_pre_seq_free(q);
        return st;
    }
    hs_pre_seq_free(t->pre_seq);
    t->pre_seq = q;
    t->pre = HS_PRE_SEQ;
    return HS_OK;
}

typedef struct seq_run {
    const hs_pre_seq *q;
    const unsigned char *s;
    hs_pre_word_fn fn;
    void *ctx;
} seq_run;

static hs_status pieces(const seq_run *r, size_t level, size_t lo, size_t hi);

static hs_status piece(const seq_run *r, size_t level, size_t lo, size_t hi)
{
    return lo == hi ? HS_OK : pieces(r, level + 1, lo, hi);
}

static int numeric_at(const unsigned char *s, size_t i, size_t *next)
{
    *next = i;
    return hs_uni_gpt2_class(hs_utf8_next(s, next)) == HS_GC_NUMBER;
}

/* The pieces of s[lo..hi) at step level, each cut by the steps after it. */
static hs_status pieces(const seq_run *r, size_t level, size_t lo, size_t hi)
{
    if (level == r->q->n)
        return r->fn(r->s + lo, hi - lo, r->ctx);
    const seq_step *st = &r->q->step[level];
    const unsigned char *s = r->s;
    hs_status e = HS_OK;
    if (st->kind == STEP_SPLIT) {
        size_t p = lo, ms, me;
        while (p < hi && e == HS_OK) {
            int m = hs_rx_search(st->rx, s + lo, hi - lo, p - lo, &ms, &me);
            if (m < 0)
                return HS_E_NOMEM;
            if (!m) {
                e = piece(r, level, p, hi);
                break;
            }
            e = piece(r, level, p, lo + ms);
            if (e == HS_OK)
                e = piece(r, level, lo + ms, lo + me);
            p = lo + me;
        }
    } else if (st->kind == STEP_DIGITS) {
        size_t i = lo, k;
        while (i < hi && e == HS_OK) {
            int num = numeric_at(s, i, &k);
            size_t end = k;
            if (!num || !st->individual)
                while (end < hi && numeric_at(s, end, &k) == num)
                    end = k;
            e = piece(r, level, i, end);
            i = end;
        }
    } else {
        for (size_t i = lo; i < hi && e == HS_OK;) {
            size_t end = lo + hs_pretoken_end(HS_PRE_GPT2, s + lo, hi - lo, i - lo);
            e = piece(r, level, i, end);
            i = end;
        }
    }
    return e;
}

hs_status hs_pre_seq_words(const hs_tokenizer *t, const unsigned char *s, size_t n, hs_pre_word_fn fn,
                           void *ctx)
{
    seq_run r = {t->pre_seq, s, fn, ctx};
    return n ? pieces(&r, 0, 0, n) : HS_OK;
}
