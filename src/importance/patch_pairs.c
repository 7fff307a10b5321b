/* What a pair of prompts needs besides its ids (include/headscope/patch.h): an answer's one
 * token and the row the metric reads. The command line's pairs file and the Python package
 * both ask here, so they accept and refuse the same pairs with the same words. */
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "headscope/patch.h"
#include "headscope/tokenizer.h"

/* "'a', 'b'" of up to 8 tokens' raw strings into buf. */
static void token_list(const hs_tokenizer *tok, const int32_t *ids, size_t n, char *buf,
                       size_t cap)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && i < 8 && at < cap; i++) {
        const char *s = tok ? hs_tokenizer_token(tok, ids[i]) : NULL;
        at += (size_t)snprintf(buf + at, cap - at, "%s'%s'", i ? ", " : "", s ? s : "?");
    }
    if (n > 8 && at < cap)
        snprintf(buf + at, cap - at, ", ...");
}

hs_status hs_patch_answer_id(const hs_model *m, const char *text, int32_t *id, int *n_tokens,
                             hs_error *err)
{
    const hs_tokenizer *tok = m ? hs_model_tokenizer(m) : NULL;
    *id = -1;
    if (n_tokens)
        *n_tokens = -1;
    if (!m || !text)
        return hs_fail(err, HS_E_ARG, "hs_patch_answer_id: no model or no text");
    if (!tok)
        return hs_fail(err, HS_E_UNSUPPORTED, "'%s' has no tokenizer files", hs_model_path(m));
    hs_encoding e = {0};
    hs_status st = hs_tokenizer_encode(tok, text, strlen(text), NULL, 0, &e, err);
    if (st)
        return st;
    int32_t own[8] = {0};
    size_t start = 0, k = 0;
    while (e.n > e.n_text && start < e.n - e.n_text && hs_tokenizer_is_special(tok, e.ids[start]))
        start++; /* the template's tokens before the text (BERT's [CLS]) */
    for (; k < e.n_text && k < 8; k++)
        own[k] = e.ids[start + k];
    size_t count = e.n_text;
    hs_encoding_free(&e);
    if (n_tokens)
        *n_tokens = count > (size_t)1 << 30 ? 1 << 30 : (int)count;
    if (count != 1) {
        char list[256];
        token_list(tok, own, k, list, sizeof list);
        return hs_fail(err, HS_E_INPUT, "'%s' is %zu tokens (%s), not one", text, count,
                       count ? list : "none");
    }
    *id = own[0];
    return HS_OK;
}

hs_status hs_patch_lengths_check(const hs_model *m, const int32_t *clean, int n_clean,
                                 const int32_t *corrupt, int n_corrupt, hs_error *err)
{
    if (n_clean == n_corrupt)
        return HS_OK;
    char a[256], b[256];
    const hs_tokenizer *tok = hs_model_tokenizer(m);
    token_list(tok, clean, (size_t)(n_clean > 0 ? n_clean : 0), a, sizeof a);
    token_list(tok, corrupt, (size_t)(n_corrupt > 0 ? n_corrupt : 0), b, sizeof b);
    return hs_fail(err, HS_E_INPUT, "clean is %d tokens (%s), corrupt %d (%s): they must be as "
                   "many", n_clean, a, n_corrupt, b);
}

hs_status hs_patch_pair_pos(const hs_model *m, hs_patch_pair *p, hs_error *err)
{
    if (!m || !p || !p->clean || !p->corrupt || p->n < 1)
        return hs_fail(err, HS_E_ARG, "hs_patch_pair_pos: no model or no prompts");
    const hs_model_config *c = hs_model_config_of(m);
    if (c->arch->head != HS_HEAD_MLM) {
        p->pos = p->n - 1;
        return HS_OK;
    }
    const hs_tokenizer *tok = hs_model_tokenizer(m);
    int32_t mask = c->arch->mask_token && tok ? hs_tokenizer_id(tok, c->arch->mask_token) : -1;
    p->pos = -1;
    for (int i = 0; i < p->n && p->pos < 0 && mask >= 0; i++)
        if (p->clean[i] == mask)
            p->pos = i;
    if (p->pos < 0)
        return hs_fail(err, HS_E_INPUT, "the clean prompt has no %s token, where the answer is "
                       "read", c->arch->mask_token ? c->arch->mask_token : "mask");
    if (p->corrupt[p->pos] != mask)
        return hs_fail(err, HS_E_INPUT, "the corrupt prompt has no %s at position %d, where the "
                       "clean one has it", c->arch->mask_token, p->pos);
    return HS_OK;
}
