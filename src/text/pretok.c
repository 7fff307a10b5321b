/*
 * The pre-tokenizer patterns of the BPE families as hand-written scanners (no regex engine),
 * with the character classes of Oniguruma that the Hugging Face tokenizers library uses
 * (\p{L}, \p{N}, \s from unicode_tables.c). Each returns the end of the match that the regex
 * engine finds at one position; every position starts a match, so a text is cut by calling it
 * from 0 to the end.
 */
#include "text/text_internal.h"

enum { CL_OTHER = HS_GC_OTHER, CL_LETTER = HS_GC_LETTER, CL_NUMBER = HS_GC_NUMBER,
       CL_SPACE = HS_GC_SPACE };

static int char_class(int32_t cp) { return hs_uni_gpt2_class(cp); }

/* The character at s[i] (i < n) and where the next one starts. */
static int32_t char_at(const unsigned char *s, size_t i, size_t *next)
{
    *next = i;
    return hs_utf8_next(s, next);
}

/* End of the run of class cls that starts at i (i itself when s[i] is not of it); *last (may
 * be NULL) gets where its final character starts (i for an empty run). */
static size_t class_run(const unsigned char *s, size_t n, size_t i, int cls, size_t *last)
{
    size_t at = i;
    while (i < n) {
        size_t k;
        if (char_class(char_at(s, i, &k)) != cls)
            break;
        at = i;
        i = k;
    }
    if (last)
        *last = at;
    return i;
}

/* \s+(?!\S)|\s+ at i (a whitespace character): the run, less its final character when a
 * non-space follows and the run has more than one character. */
static size_t space_tail(const unsigned char *s, size_t n, size_t i)
{
    size_t last, end = class_run(s, n, i, CL_SPACE, &last);
    if (end == n)
        return end;  /* \s+(?!\S) at the end of the text */
    if (last > i)
        return last; /* \s+(?!\S) backs off one character, leaving it to the next word */
    return end;      /* \s+ : a single whitespace character before a non-space */
}

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t gpt2_end(const unsigned char *s, size_t n, size_t i)
{
    size_t j;
    int32_t c = char_at(s, i, &j);
    if (c == '\'' && j < n) {
        unsigned d = s[j];
        if (d == 's' || d == 't' || d == 'm' || d == 'd')
            return j + 1;
        if (j + 1 < n) {
            unsigned e = s[j + 1];
            if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l'))
                return j + 2;
        }
    }
    int cls = char_class(c);
    size_t run = j; /* the class run continues from here */
    if (c == ' ' && j < n) {
        size_t k;
        int next = char_class(char_at(s, j, &k));
        if (next != CL_SPACE) { /* " ?X+": the space leads a run of X */
            cls = next;
            run = k;
        }
    }
    if (cls != CL_SPACE)
        return class_run(s, n, run, cls, NULL);
    return space_tail(s, n, i);
}

/* One letter of a case-insensitive contraction: the ASCII letter lower, its capital, and
 * the characters Unicode case folding maps to it (U+017F LONG S folds to 's'). */
static int fold_is(const unsigned char *s, size_t n, size_t i, char lower, size_t *next)
{
    if (i >= n)
        return 0;
    int32_t c = char_at(s, i, next);
    return c == lower || c == lower - 32 || (lower == 's' && c == 0x17F);
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d) at i: its end, or 0. */
static size_t contraction(const unsigned char *s, size_t n, size_t i)
{
    static const char *const alts[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    if (s[i] != '\'')
        return 0;
    for (size_t a = 0; a < sizeof alts / sizeof *alts; a++) {
        size_t at = i + 1, next;
        const char *p = alts[a];
        while (*p && fold_is(s, n, at, *p, &next)) {
            at = next;
            p++;
        }
        if (!*p)
            return at;
    }
    return 0;
}

static int is_crlf(int32_t c) { return c == '\r' || c == '\n'; }

/* Llama 3 (max_digits 3) and Qwen2 (1):
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 *   \s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t split_end(const unsigned char *s, size_t n, size_t i, int max_digits)
{
    size_t j, k, e = contraction(s, n, i);
    if (e)
        return e;
    int32_t c = char_at(s, i, &j);
    int cls = char_class(c);
    if (cls == CL_LETTER)
        return class_run(s, n, j, CL_LETTER, NULL);
    if (cls != CL_NUMBER && !is_crlf(c) && j < n && char_class(char_at(s, j, &k)) == CL_LETTER)
        return class_run(s, n, k, CL_LETTER, NULL);
    if (cls == CL_NUMBER) {
        for (int d = 1; d < max_digits && j < n && char_class(char_at(s, j, &k)) == CL_NUMBER; d++)
            j = k;
        return j;
    }
    size_t o = cls == CL_OTHER ? i : (c == ' ' && j < n && char_class(char_at(s, j, &k)) == CL_OTHER) ? j : n;
    if (o < n) { /* ` ?[^\s\p{L}\p{N}]+[\r\n]*` */
        e = class_run(s, n, o, CL_OTHER, NULL);
        while (e < n && (s[e] == '\r' || s[e] == '\n'))
            e++;
        return e;
    }
    /* whitespace: \s*[\r\n]+ ends after the run's last line break, if it has one */
    size_t end = class_run(s, n, i, CL_SPACE, NULL), nl = 0;
    for (size_t p = i; p < end; p++)
        if (s[p] == '\r' || s[p] == '\n')
            nl = p + 1;
    if (nl)
        return nl;
    return space_tail(s, n, i);
}

/* StarCoder's Sequence [Digits(individual_digits: true), ByteLevel(use_regex: true)]: each
 * \p{N} character is a piece of its own, and GPT-2's pattern runs on the pieces between
 * them. GPT-2's match at a non-digit reaches a digit only by " ?\p{N}+" or by the lookahead
 * of \s+(?!\S); the piece ending before the digit ends a run of spaces there instead. */
static size_t digits_gpt2_end(const unsigned char *s, size_t n, size_t i)
{
    size_t j, k;
    int cls = char_class(char_at(s, i, &j));
    if (cls == CL_NUMBER)
        return j;
    if (cls == CL_SPACE) {
        size_t end = class_run(s, n, i, CL_SPACE, NULL);
        if (end < n && char_class(char_at(s, end, &k)) == CL_NUMBER)
            return end;
    }
    return gpt2_end(s, n, i);
}

static int ascii_digit(unsigned char b) { return b >= '0' && b <= '9'; }

/* A byte whose byte-level character is numeric (char::is_numeric): the ASCII digits, and
 * the bytes that map to themselves as superscripts and fractions (U+00B2 U+00B3 U+00B9
 * U+00BC U+00BD U+00BE; the bytes mapped past U+00FF are letters). */
static int mapped_numeric(unsigned char b)
{
    return ascii_digit(b) || b == 0xB2 || b == 0xB3 || b == 0xB9 || (b >= 0xBC && b <= 0xBE);
}

static int ascii_digits3(const unsigned char *s, size_t e, size_t k)
{
    return k + 3 <= e && ascii_digit(s[k]) && ascii_digit(s[k + 1]) && ascii_digit(s[k + 2]);
}

static int punct_at(const unsigned char *s, size_t i, size_t *next)
{
    return (hs_uni_bert_flags(char_at(s, i, next)) & HS_BF_PUNCT) != 0;
}

/* Falcon's word at i, the text taken to end at n (a window: falcon_end). c0: the start of
 * i's character. */
static size_t falcon_window(const unsigned char *s, size_t n, size_t i, size_t c0)
{
    size_t e, k;
    int punct = punct_at(s, c0, &k);
    for (e = k; e < n && punct_at(s, e, &k) == punct; e = k)
        ;
    e = gpt2_end(s, e < n ? e : n, c0); /* the ByteLevel piece that holds i */
    e = e < n ? e : n;
    int num = mapped_numeric(s[i]);
    for (k = i + 1; k < e && mapped_numeric(s[k]) == num; k++)
        ;
    e = k; /* the Digits piece */
    for (k = i + 1; k < e && !ascii_digits3(s, e, k); k++)
        ;
    return k; /* up to the first three digits after i (at i: falcon_end) */
}

/* Falcon's Sequence of four, each splitting the pieces of the one before:
 *   Punctuation(Contiguous): runs of punctuation (ASCII or Unicode P*, as BertPreTokenizer's)
 *     and runs of the rest;
 *   ByteLevel(use_regex): GPT-2's pattern in each, then every byte mapped to its character;
 *   Digits(individual_digits: false): runs of numeric characters of that mapped text (bytes,
 *     mapped_numeric: a UTF-8 character may be cut after its lead byte) and runs of the rest;
 *   Split([0-9][0-9][0-9], Isolated): three ASCII digits a word, leftmost first.
 * Every word starts a piece of the last two, so they are found forward from i. The first two
 * cut only between characters, and a word inside one of their pieces (after a cut of the
 * last two) lies in a run of one class, whose end the pattern finds from any character of it:
 * so they are taken from the start of i's character as if a piece began there. The text is
 * looked at in a window from i that doubles until the word ends well inside it (a word is
 * found in time proportional to it, however long the run it lies in). */
static size_t falcon_end(const unsigned char *s, size_t n, size_t i)
{
    if (ascii_digits3(s, n, i))
        return i + 3;
    size_t c0 = i;
    while (c0 > 0 && (s[c0] & 0xC0) == 0x80) /* a word ended inside this character */
        c0--;
    for (size_t w = 64;; w *= 2) {
        size_t lim = n - i <= w ? n : i + w, e = falcon_window(s, lim, i, c0);
        if (lim == n || e + 16 < lim)
            return e;
    }
}

size_t hs_pretoken_end(int pre, const unsigned char *s, size_t n, size_t i)
{
    switch (pre) {
    case HS_PRE_GPT2: return gpt2_end(s, n, i);
    case HS_PRE_DIGITS_GPT2: return digits_gpt2_end(s, n, i);
    case HS_PRE_FALCON: return falcon_end(s, n, i);
    case HS_PRE_LLAMA3: return split_end(s, n, i, 3);
    case HS_PRE_QWEN2: return split_end(s, n, i, 1);
    default: return n;
    }
}
