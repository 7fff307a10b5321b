/*
 * tokenizer.json's normalizer, pre-tokenizer and post-processor into an hs_tokenizer (for
 * tokenizer_json.c). Each reads the component the families' files hold and refuses every
 * other with HS_E_UNSUPPORTED and a message naming it:
 *   normalizer     WordPiece: BertNormalizer, NFD, Lowercase, StripAccents;
 *                  BPE: NFC, Prepend, Replace (a String pattern); either in a Sequence;
 *                  Unigram: those of BPE, Precompiled, Strip, Replace with the regex
 *                  " {2,}" (T5's);
 *   pre_tokenizer  WordPiece: BertPreTokenizer;
 *                  BPE: ByteLevel; Sequence [Split (Llama 3's or Qwen2's pattern, Isolated),
 *                  ByteLevel (use_regex false)]; Sequence [Split (any Regex regex.c takes,
 *                  Isolated) and Digits steps, ByteLevel] (pretok_seq.c); Falcon's and
 *                  StarCoder's Sequences; Metaspace; none (SentencePiece-style); Split
 *                  on a String the normalizer replaces (Gemma: a no-op, as none);
 *                  Unigram: Metaspace, WhitespaceSplit, Sequence [WhitespaceSplit, Metaspace];
 *   post_processor ByteLevel (offsets only), BertProcessing, RobertaProcessing,
 *                  TemplateProcessing (any template of special tokens, $A and $B), or a
 *                  Sequence of ByteLevel and one of these.
 */
#include <cJSON.h>
#include <stdio.h>
#include <string.h>

#include "text/text_internal.h"

#define TJ "tokenizer.json"

/* The Split patterns the scanners of pretok.c implement, as tokenizer.json spells them. */
static const char llama3_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char qwen2_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const char *hs_tj_type(const cJSON *o)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

int hs_tj_bool(const cJSON *o, const char *key, int dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v))
        return dflt;
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : -1;
}

int hs_tj_int(const cJSON *v, long long lo, long long hi, long long *out)
{
    if (!cJSON_IsNumber(v))
        return 0;
    double d = v->valuedouble;
    if (!(d >= (double)lo && d <= (double)hi) || d != (double)(long long)d)
        return 0;
    *out = (long long)d;
    return 1;
}

/* A short string option (1..HS_TOK_MAX_PREFIX bytes, or 0.. with empty_ok) into dst. */
static hs_status short_string(const cJSON *o, const char *key, int empty_ok, char *dst,
                              const char *what, hs_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v) || strlen(v->valuestring) > HS_TOK_MAX_PREFIX || (!empty_ok && !v->valuestring[0]))
        return hs_fail(err, HS_E_FORMAT, TJ ": %s needs \"%s\" as a string of %d to %d bytes", what, key,
                       !empty_ok, HS_TOK_MAX_PREFIX);
    memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
    return HS_OK;
}

/* ---- normalizer -------------------------------------------------------------------------- */

static hs_status push_step(hs_tokenizer *t, int step, hs_error *err)
{
    if (t->n_norm == HS_TOK_MAX_NORM)
        return hs_fail(err, HS_E_UNSUPPORTED, TJ ": more than %d normalizer steps", HS_TOK_MAX_NORM);
    for (size_t k = 0; k < t->n_norm; k++)
        if ((step == HS_NORM_PREPEND || step == HS_NORM_REPLACE) && t->norm[k] == step)
            return hs_fail(err, HS_E_UNSUPPORTED, TJ ": more than one normalizer '%s' is not supported",
                           step == HS_NORM_PREPEND ? "Prepend" : "Replace");
    t->norm[t->n_norm++] = (unsigned char)step;
    if (step == HS_NORM_LOWER)
        t->lowercase = 1;
    return HS_OK;
}

static hs_status bert_normalizer(hs_tokenizer *t, const cJSON *n, hs_error *err)
{
    int clean = hs_tj_bool(n, "clean_text", 1), cjk = hs_tj_bool(n, "handle_chinese_chars", 1);
    int lower = hs_tj_bool(n, "lowercase", 1), strip = hs_tj_bool(n, "strip_accents", lower);
    hs_status st = HS_OK;
    if (clean < 0 || cjk < 0 || lower < 0 || strip < 0)
        return hs_fail(err, HS_E_FORMAT, TJ ": BertNormalizer options must be true, false or null");
    if ((clean && (st = push_step(t, HS_NORM_CLEAN, err)) != HS_OK) ||
        (cjk && (st = push_step(t, HS_NORM_CJK, err)) != HS_OK) ||
        (strip && ((st = push_step(t, HS_NORM_NFD, err)) != HS_OK ||
                   (st = push_step(t, HS_NORM_STRIP, err)) != HS_OK)) ||
        (lower && (st = push_step(t, HS_NORM_LOWER, err)) != HS_OK))
        return st;
    return HS_OK;
}

/* The normalizers only a Unigram model takes (T5's): Precompiled (precompiled.c), Strip,
 * Replace with the regex " {2,}". */
static int unigram_only(const cJSON *n, const char *type)
{
    return !strcmp(type, "Precompiled") || !strcmp(type, "Strip") ||
           (!strcmp(type, "Replace") &&
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(n, "pattern"), "Regex"));
}

static hs_status unigram_normalizer(hs_tokenizer *t, const cJSON *n, const char *type, hs_error *err)
{
    hs_status st;
    if (strcmp(type, "Precompiled") == 0) {
        const cJSON *map = cJSON_GetObjectItemCaseSensitive(n, "precompiled_charsmap");
        if (!cJSON_IsString(map))
            return hs_fail(err, HS_E_FORMAT, TJ ": Precompiled needs \"precompiled_charsmap\" as a string");
        if ((st = hs_precompiled_load(t, map->valuestring, err)) != HS_OK)
            return st;
        return push_step(t, HS_NORM_PRECOMPILED, err);
    }
    if (strcmp(type, "Strip") == 0) {
        t->trim_left = hs_tj_bool(n, "strip_left", 0);
        t->trim_right = hs_tj_bool(n, "strip_right", 0);
        if (t->trim_left < 0 || t->trim_right < 0)
            return hs_fail(err, HS_E_FORMAT, TJ ": Strip's strip_left and strip_right must be true or false");
        for (size_t k = 0; k < t->n_norm; k++)
            if (t->norm[k] == HS_NORM_TRIM)
                return hs_fail(err, HS_E_UNSUPPORTED, TJ ": more than one normalizer 'Strip' is not supported");
        return push_step(t, HS_NORM_TRIM, err);
    }
    const cJSON *rx = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(n, "pattern"), "Regex");
    if (!cJSON_IsString(rx) || strcmp(rx->valuestring, " {2,}") != 0)
        return hs_fail(err, HS_E_UNSUPPORTED, TJ ": normalizer 'Replace' with a regex other than \" {2,}\" is "
                                                 "not supported");
    for (size_t k = 0; k < t->n_norm; k++)
        if (t->norm[k] == HS_NORM_SPACES)
            return hs_fail(err, HS_E_UNSUPPORTED, TJ ": more than one normalizer 'Replace' with a regex is not "
                                                     "supported");
    if ((st = short_string(n, "content", 1, t->spaces_to, "normalizer 'Replace'", err)) != HS_OK)
        return st;
    return push_step(t, HS_NORM_SPACES, err);
}

static hs_status add_normalizer(hs_tokenizer *t, const cJSON *n, int depth, hs_error *err)
{
    const char *type = hs_tj_type(n);
    int wp = t->kind == HS_TOK_WORDPIECE;
    hs_status st;
    if (!type)
        return hs_fail(err, HS_E_FORMAT, TJ ": normalizer without a \"type\"");
    if (strcmp(type, "Sequence") == 0 && depth < 4) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers"), *it;
        if (!cJSON_IsArray(list))
            return hs_fail(err, HS_E_FORMAT, TJ ": normalizer Sequence without \"normalizers\"");
        cJSON_ArrayForEach(it, list)
            if ((st = add_normalizer(t, it, depth + 1, err)) != HS_OK)
                return st;
        return HS_OK;
    }
    if (wp && strcmp(type, "BertNormalizer") == 0)
        return bert_normalizer(t, n, err);
    if (wp && strcmp(type, "NFD") == 0)
        return push_step(t, HS_NORM_NFD, err);
    if (wp && strcmp(type, "Lowercase") == 0)
        return push_step(t, HS_NORM_LOWER, err);
    if (wp && strcmp(type, "StripAccents") == 0)
        return push_step(t, HS_NORM_MARKS, err);
    if (!wp && strcmp(type, "NFC") == 0)
        return push_step(t, HS_NORM_NFC, err);
    if (!wp && strcmp(type, "Prepend") == 0) {
        if ((st = short_string(n, "prepend", 0, t->prepend, "normalizer 'Prepend'", err)) != HS_OK)
            return st;
        return push_step(t, HS_NORM_PREPEND, err);
    }
    if (t->kind == HS_TOK_UNIGRAM && unigram_only(n, type))
        return unigram_normalizer(t, n, type, err);
    if (!wp && strcmp(type, "Replace") == 0) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(n, "pattern");
        if (!cJSON_GetObjectItemCaseSensitive(pat, "String"))
            return hs_fail(err, HS_E_UNSUPPORTED, TJ ": normalizer 'Replace' with a regex pattern is not supported "
                                                     "(only a String)");
        if ((st = short_string(pat, "String", 0, t->rep_from, "normalizer 'Replace' pattern", err)) != HS_OK ||
            (st = short_string(n, "content", 1, t->rep_to, "normalizer 'Replace'", err)) != HS_OK)
            return st;
        return push_step(t, HS_NORM_REPLACE, err);
    }
    return hs_fail(err, HS_E_UNSUPPORTED, TJ ": normalizer '%.64s' is not supported with a %s model", type,
                   wp ? "WordPiece" : t->kind == HS_TOK_UNIGRAM ? "Unigram" : "BPE");
}

hs_status hs_tj_normalizer(hs_tokenizer *t, const cJSON *n, hs_error *err)
{
    if (!n || cJSON_IsNull(n))
        return HS_OK;
    return add_normalizer(t, n, 0, err);
}

/* ---- pre-tokenizer ----------------------------------------------------------------------- */

/* ByteLevel: words are bytes as GPT-2's characters; with use_regex GPT-2's pattern cuts them
 * (want_regex: 1 must, 0 must not, -1 either). */
static hs_status byte_level(hs_tokenizer *t, const cJSON *p, int want_regex, hs_error *err)
{
    int aps = hs_tj_bool(p, "add_prefix_space", 1), rx = hs_tj_bool(p, "use_regex", 1);
    if (aps < 0 || rx < 0)
        return hs_fail(err, HS_E_FORMAT, TJ ": ByteLevel options must be true, false or null");
    if (want_regex >= 0 && rx != want_regex)
        return hs_fail(err, HS_E_UNSUPPORTED, TJ ": pre_tokenizer 'ByteLevel' %s use_regex is not supported here",
                       rx ? "with" : "without");
    t->byte_level = 1;
    t->add_prefix_space = aps;
    t->pre = rx ? HS_PRE_GPT2 : HS_PRE_NONE;
    return HS_OK;
}

/* Split with the Llama 3 or Qwen2 pattern, Isolated, not inverted. */
static hs_status split(hs_tokenizer *t, const cJSON *p, hs_error *err)
{
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
    const cJSON *rx = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
    const cJSON *beh = cJSON_GetObjectItemCaseSensitive(p, "behavior");
    char shown[64];
    if (!cJSON_IsString(rx))
        return hs_fail(err, HS_E_UNSUPPORTED, TJ ": pre_tokenizer 'Split' without a Regex pattern is not supported");
    if (strcmp(rx->valuestring, llama3_pattern) == 0)
        t->pre = HS_PRE_LLAMA3;
    else if (strcmp(rx->valuestring, qwen2_pattern) == 0)
        t->pre = HS_PRE_QWEN2;
    else
        return hs_fail(err, HS_E_UNSUPPORTED, TJ ": pre_tokenizer 'Split' with the pattern '%s' is not supported "
                                                 "(only Llama 3's and Qwen2's)",
                       hs_tok_show(rx->valuestring, shown, sizeof shown));
    if (!cJSON_IsString(beh) || strcmp(beh->valuestring, "Isolated") != 0 || hs_tj_bool(p, "invert", 0) != 0)
        return hs_fail(err, HS_E_UNSUPPORTED, TJ ": pre_tokenizer 'Split' other than behavior Isolated, "
                                                 "invert false is not supported");
    return HS_OK;
}

/* The String pattern of a Split pre-tokenizer, or NULL (a Regex, or none). */
static const char *split_string(const cJSON *p)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "pattern"),
                                                      "String");
    return cJSON_IsString(s) ? s->valuestring : NULL;
}

hs_status hs_tj_split_string_check(const hs_tokenizer *t, const cJSON *p, hs_error *err)
{
    const char *type = hs_tj_type(p), *s = type && !strcmp(type, "Split") ? split_string(p) : NULL;
    if (!s)
        return HS_OK;
    int gone = 0; /* a Replace step of the normalizer leaves no s in the text */
    for (size_t k = 0; k < t->n_norm; k++)
        gone |= t->norm[k] == HS_NORM_REPLACE && s[0] && !strcmp(t->rep_from, s) &&
                !strstr(t->rep_to, s);
    if (!gone || hs_tj_bool(p, "invert", 0) != 0) {
        char shown[64];
        return hs_fail(err, HS_E_UNSUPPORTED, TJ ": pre_tokenizer 'Split' on the string '%s' is "
                       "supported only where the normalizer replaces it (Gemma's Split(\" \") after "
                       "Replace(\" \", \"\u2581\")), not inverted", hs_tok_show(s, shown, sizeof shown));
    }
    return HS_OK;
}

/* Falcon's Sequence: [Punctuation(Contiguous), ByteLevel (its options checked by byte_level),
 * Digits(individual_digits false), Split([0-9][0-9][0-9], Isolated, not inverted)]. */
static int falcon_sequence(const cJSON *list)
{
    const cJSON *p = cJSON_GetArrayItem(list, 0), *d = cJSON_GetArrayItem(list, 2);
    const cJSON *sp = cJSON_GetArrayItem(list, 3);
    const char *beh = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "behavior"));
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(sp, "pattern");
    const char *rx = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pat, "Regex"));
    const char *sb = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(sp, "behavior"));
    const char *tb = hs_tj_type(cJSON_GetArrayItem(list, 1)), *tp = hs_tj_type(p);
    const char *td = hs_tj_type(d), *ts = hs_tj_type(sp);
    return cJSON_GetArraySize(list) == 4 && tp && !strcmp(tp, "Punctuation") && beh &&
           !strcmp(beh, "Contiguous") && tb && !strcmp(tb, "ByteLevel") && td &&
           !strcmp(td, "Digits") && hs_tj_bool(d, "individual_digits", 0) == 0 && ts &&
           !strcmp(ts, "Split") && rx && !strcmp(rx, "[0-9][0-9][0-9]") && sb &&
           !strcmp(sb, "Isolated") && hs_tj_bool(sp, "invert", 0) == 0;
}

/* Split with Llama 3's or Qwen2's Regex (their scanners in pretok.c; any other: pretok_seq.c). */
static int known_split(const cJSON *p)
{
    const char *rx = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "pattern"), "Regex"));
    return !rx || !strcmp(rx, llama3_pattern) || !strcmp(rx, qwen2_pattern);
}

/* Split and Digits steps, then ByteLevel (hs_pre_seq_parse checks their options). */
static int split_digits_sequence(const cJSON *list)
{
    int n = cJSON_GetArraySize(list);
    const char *last = hs_tj_type(cJSON_GetArrayItem(list, n - 1));
    if (n < 2 || !last || strcmp(last, "ByteLevel") != 0)
        return 0;
    for (int k = 0; k + 1 < n; k++) {
        const char *ty = hs_tj_type(cJSON_GetArrayItem(list, k));
        if (!ty || (strcmp(ty, "Split") != 0 && strcmp(ty, "Digits") != 0))
            return 0;
    }
    return 1;
}

/* Digits with individual_digits before a ByteLevel with its regex (StarCoder). */
static hs_status digits(hs_tokenizer *t)
{
    t->pre = HS_PRE_DIGITS_GPT2;
    return HS_OK;
}

static hs_status falcon(hs_tokenizer *t)
{
    t->pre = HS_PRE_FALCON;
    return HS_OK;
}

static hs_status metaspace(hs_tokenizer *t, const cJSON *p, hs_error *err)
{
    const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(p, "prepend_scheme");
    hs_status st = short_string(p, "replacement", 0, t->meta_rep, "pre_tokenizer 'Metaspace'", err);
    if (st != HS_OK)
        return st;
    if (cJSON_IsString(scheme)) {
        const char *s = scheme->valuestring;
        t->meta_scheme = !strcmp(s, "always") ? HS_META_ALWAYS : !strcmp(s, "first") ? HS_META_FIRST
                         : !strcmp(s, "never") ? HS_META_NEVER : -1;
        if (t->meta_scheme < 0)
            return hs_fail(err, HS_E_FORMAT, TJ ": Metaspace prepend_scheme must be \"always\", \"first\" or \"never\"");
    } else { /* older files: add_prefix_space */
        int aps = hs_tj_bool(p, "add_prefix_space", 1);
        if (aps < 0)
            return hs_fail(err, HS_E_FORMAT, TJ ": Metaspace add_prefix_space must be true or false");
        t->meta_scheme = aps ? HS_META_ALWAYS : HS_META_NEVER;
    }
    if ((t->meta_split = hs_tj_bool(p, "split", 1)) < 0)
        return hs_fail(err, HS_E_FORMAT, TJ ": Metaspace split must be true or false");
    t->pre = HS_PRE_METASPACE;
    return HS_OK;
}

/* Unigram: Metaspace, WhitespaceSplit, or both in a Sequence (T5's older files). */
static hs_status unigram_pre(hs_tokenizer *t, const cJSON *p, const char *type, hs_error *err)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "pretokenizers");
    const char *ta = hs_tj_type(cJSON_GetArrayItem(list, 0)), *tb = hs_tj_type(cJSON_GetArrayItem(list, 1));
    if (strcmp(type, "Metaspace") == 0)
        return metaspace(t, p, err);
    if (strcmp(type, "WhitespaceSplit") == 0) {
        t->ws_split = 1;
        return HS_OK;
    }
    if (!strcmp(type, "Sequence") && cJSON_GetArraySize(list) == 2 && ta && tb && !strcmp(ta, "WhitespaceSplit") &&
        !strcmp(tb, "Metaspace")) {
        t->ws_split = 1;
        return metaspace(t, cJSON_GetArrayItem(list, 1), err);
    }
    return hs_fail(err, HS_E_UNSUPPORTED, TJ ": pre_tokenizer '%.64s' is not supported with Unigram (only "
                                             "Metaspace, WhitespaceSplit, Sequence [WhitespaceSplit, Metaspace] or "
                                             "none)", type);
}

hs_status hs_tj_pre_tokenizer(hs_tokenizer *t, const cJSON *p, hs_error *err)
{
    const char *type = hs_tj_type(p);
    int null = !p || cJSON_IsNull(p);
    t->pre = HS_PRE_NONE;
    t->byte_level = 0;
    if (!null && !type)
        return hs_fail(err, HS_E_FORMAT, TJ ": pre_tokenizer without a \"type\"");
    if (t->kind == HS_TOK_WORDPIECE) {
        if (null || strcmp(type, "BertPreTokenizer") != 0)
            return hs_fail(err, HS_E_UNSUPPORTED, TJ ": pre_tokenizer '%.64s' is not supported with WordPiece "
                                                     "(only BertPreTokenizer)", null ? "null" : type);
        return HS_OK;
    }
    if (t->kind == HS_TOK_UNIGRAM)
        return null ? HS_OK : unigram_pre(t, p, type, err);
    hs_status st = HS_OK;
    if (null) {
        /* SentencePiece-style: the whole text is one word */
    } else if (strcmp(type, "ByteLevel") == 0) {
        st = byte_level(t, p, 1, err);
    } else if (strcmp(type, "Metaspace") == 0) {
        st = metaspace(t, p, err);
    } else if (strcmp(type, "Split") == 0 && split_string(p)) {
        /* Gemma's Split(" "): checked against the normalizer by hs_tj_split_string_check */
    } else if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "pretokenizers");
        const cJSON *a = cJSON_GetArrayItem(list, 0), *b = cJSON_GetArrayItem(list, 1);
        const char *ta = hs_tj_type(a), *tb = hs_tj_type(b);
        if (cJSON_GetArraySize(list) == 1 && ta && strcmp(ta, "ByteLevel") == 0)
            st = byte_level(t, a, 1, err);
        else if (cJSON_GetArraySize(list) == 2 && ta && tb && !strcmp(ta, "Split") && !strcmp(tb, "ByteLevel") &&
                 known_split(a))
            st = (st = byte_level(t, b, 0, err)) != HS_OK ? st : split(t, a, err);
        else if (cJSON_GetArraySize(list) == 2 && ta && tb && !strcmp(ta, "Digits") && !strcmp(tb, "ByteLevel") &&
                 hs_tj_bool(a, "individual_digits", 0) == 1) /* StarCoder's */
            st = (st = byte_level(t, b, 1, err)) != HS_OK ? st : digits(t);
        else if (falcon_sequence(list))
            st = (st = byte_level(t, b, 1, err)) != HS_OK ? st : falcon(t);
        else if (split_digits_sequence(list))
            st = hs_pre_seq_parse(t, list, err); /* DeepSeek's and others (pretok_seq.c) */
        else
            return hs_fail(err, HS_E_UNSUPPORTED, TJ ": pre_tokenizer 'Sequence' other than [Split, ByteLevel], "
                                                     "[Digits(individual_digits), ByteLevel], Falcon's four or "
                                                     "[ByteLevel] is not supported");
    } else {
        return hs_fail(err, HS_E_UNSUPPORTED, TJ ": pre_tokenizer '%.64s' is not supported with BPE (only "
                                                 "ByteLevel, Sequence [Split, ByteLevel], Metaspace or none)", type);
    }
    if (st != HS_OK)
        return st;
    t->kind = t->byte_level ? HS_TOK_BPE : HS_TOK_SPM_BPE;
    return HS_OK;
}

/* ---- post-processor ---------------------------------------------------------------------- */

static hs_status tmpl_push(hs_template *tm, int32_t id, long long type, hs_error *err)
{
    if (tm->n == HS_TMPL_MAX)
        return hs_fail(err, HS_E_UNSUPPORTED, TJ ": a post-processor template of more than %d tokens is not supported",
                       HS_TMPL_MAX);
    tm->id[tm->n] = id;
    tm->type[tm->n++] = (unsigned char)type;
    return HS_OK;
}

/* A [token, id] pair of BertProcessing / RobertaProcessing. */
static int32_t token_pair(const cJSON *pp, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(pp, key);
    long long id;
    if (cJSON_GetArraySize(v) != 2 || !hs_tj_int(cJSON_GetArrayItem(v, 1), 0, INT32_MAX, &id))
        return -1;
    return (int32_t)id;
}

/* One TemplateProcessing template (single or pair) into tm. */
static hs_status read_template(const cJSON *pp, const char *which, hs_template *tm, hs_error *err)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(pp, which), *p;
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(pp, "special_tokens");
    int seen_a = 0, seen_b = 0;
    hs_status st;
    tm->n = 0;
    if (!cJSON_IsArray(list))
        return hs_fail(err, HS_E_FORMAT, TJ ": TemplateProcessing needs \"%s\" as an array", which);
    cJSON_ArrayForEach(p, list) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(p, "SpecialToken");
        const cJSON *body = sp ? sp : cJSON_GetObjectItemCaseSensitive(p, "Sequence");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(body, "id");
        long long type;
        if (!cJSON_IsString(name) || !hs_tj_int(cJSON_GetObjectItemCaseSensitive(body, "type_id"), 0, 255, &type))
            return hs_fail(err, HS_E_FORMAT, TJ ": TemplateProcessing \"%s\" pieces need an \"id\" and a "
                                                "\"type_id\" in 0..255", which);
        if (!sp) {
            int is_a = strcmp(name->valuestring, "A") == 0, is_b = strcmp(name->valuestring, "B") == 0;
            if ((!is_a && !is_b) || (is_a && seen_a++) || (is_b && seen_b++))
                return hs_fail(err, HS_E_FORMAT, TJ ": TemplateProcessing \"%s\" must name $A (and $B) once each",
                               which);
            if ((st = tmpl_push(tm, is_a ? HS_TMPL_A : HS_TMPL_B, type, err)) != HS_OK)
                return st;
            continue;
        }
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(specials, name->valuestring), "ids"), *it;
        if (!cJSON_IsArray(ids) || cJSON_GetArraySize(ids) == 0)
            return hs_fail(err, HS_E_FORMAT, TJ ": TemplateProcessing special token '%.64s' has no ids in "
                                                "\"special_tokens\"", name->valuestring);
        cJSON_ArrayForEach(it, ids) {
            long long id;
            if (!hs_tj_int(it, 0, INT32_MAX, &id))
                return hs_fail(err, HS_E_FORMAT, TJ ": TemplateProcessing special token '%.64s' has an id that "
                                                    "is not an integer", name->valuestring);
            if ((st = tmpl_push(tm, (int32_t)id, type, err)) != HS_OK)
                return st;
        }
    }
    if (!seen_a || seen_b != (strcmp(which, "pair") == 0))
        return hs_fail(err, HS_E_FORMAT, TJ ": TemplateProcessing \"%s\" must hold %s", which,
                       strcmp(which, "pair") == 0 ? "$A and $B" : "$A and not $B");
    return HS_OK;
}

static hs_status one_processor(hs_tokenizer *t, const cJSON *pp, const char *type, hs_error *err)
{
    hs_status st;
    if (strcmp(type, "TemplateProcessing") == 0) {
        if ((st = read_template(pp, "single", &t->single, err)) != HS_OK ||
            (st = read_template(pp, "pair", &t->pair, err)) != HS_OK)
            return st;
        t->post_name = "TemplateProcessing";
    } else if (strcmp(type, "BertProcessing") == 0 || strcmp(type, "RobertaProcessing") == 0) {
        int32_t sep = token_pair(pp, "sep"), cls = token_pair(pp, "cls");
        if (sep < 0 || cls < 0)
            return hs_fail(err, HS_E_FORMAT, TJ ": %s needs \"sep\" and \"cls\" as [token, id]", type);
        hs_tok_set_bert_template(t, cls, sep);
        t->post_name = "BertProcessing";
        if (type[0] == 'R') { /* <s> A </s> </s> B </s>, every type id 0 */
            t->pair = (hs_template){.id = {cls, HS_TMPL_A, sep, sep, HS_TMPL_B, sep}, .n = 6};
            t->post_name = "RobertaProcessing";
        }
    } else {
        return hs_fail(err, HS_E_UNSUPPORTED, TJ ": post_processor '%.64s' is not supported", type);
    }
    t->has_pair = 1;
    return HS_OK;
}

hs_status hs_tj_post_processor(hs_tokenizer *t, const cJSON *pp, hs_error *err)
{
    if (!pp || cJSON_IsNull(pp))
        return HS_OK;
    const char *type = hs_tj_type(pp);
    if (!type)
        return hs_fail(err, HS_E_FORMAT, TJ ": post_processor without a \"type\"");
    if (strcmp(type, "ByteLevel") == 0) {
        t->post_name = "ByteLevel"; /* offsets only */
        return HS_OK;
    }
    if (strcmp(type, "Sequence") != 0)
        return one_processor(t, pp, type, err);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(pp, "processors"), *it;
    int others = 0;
    if (!cJSON_IsArray(list))
        return hs_fail(err, HS_E_FORMAT, TJ ": post_processor Sequence without \"processors\"");
    t->post_name = "ByteLevel";
    cJSON_ArrayForEach(it, list) {
        const char *ty = hs_tj_type(it);
        hs_status st;
        if (!ty)
            return hs_fail(err, HS_E_FORMAT, TJ ": post_processor without a \"type\"");
        if (strcmp(ty, "ByteLevel") == 0)
            continue;
        if (others++ || strcmp(ty, "Sequence") == 0)
            return hs_fail(err, HS_E_UNSUPPORTED, TJ ": post_processor 'Sequence' with more than ByteLevel and "
                                                     "one other is not supported");
        if ((st = one_processor(t, it, ty, err)) != HS_OK)
            return st;
    }
    return HS_OK;
}

hs_status hs_tj_check_template(const hs_tokenizer *t, hs_error *err)
{
    const hs_template *tms[2] = {&t->single, &t->pair};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < tms[k]->n; i++)
            if (tms[k]->id[i] >= 0 && (size_t)tms[k]->id[i] >= t->n_vocab)
                return hs_fail(err, HS_E_FORMAT, TJ ": post_processor token id %d is out of range",
                               tms[k]->id[i]);
    return HS_OK;
}
