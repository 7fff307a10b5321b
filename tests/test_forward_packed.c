/* Packed passes (hs_forward_packed): several texts in one pass give each text the maps,
 * logits and final hidden states of a pass on that text alone (hs_forward), in every
 * family whose positions or masks could go wrong when texts share a sequence: learned
 * positions (GPT-2, BERT with token types, RoBERTa's padding-aware ones), rotary (Llama),
 * sliding windows shorter than a text (Mistral, Gemma 2 with its softcaps), Phi-3's
 * longrope switching factors by the text's own length, ALiBi (Falcon-RW), latent attention
 * with experts (DeepSeek). The GEMMs over all texts are cut by another shape than a text's
 * alone, so the last bits may differ: within 1e-5 (maps; 1e-4 logits, hidden). */
#include "headscope/forward.h"
#include "testutil.h"

#define N_TEXTS 4
#define MAP_TOL 1e-5
#define OUT_TOL 1e-4

typedef struct pack_maps {
    const hs_model_config *c;
    float **maps; /* [text][layer] (n_head, n, n) */
    const int *lens;
    int calls, bad;
} pack_maps;

static int keep_map(void *user, int layer, int text, const float *probs, int n_head, int n)
{
    pack_maps *p = user;
    p->calls++;
    if (text < 0 || text >= N_TEXTS || n != p->lens[text] || n_head != p->c->n_head) {
        p->bad++;
        return 1;
    }
    size_t sz = (size_t)n_head * (size_t)n * (size_t)n;
    memcpy(p->maps[text * p->c->n_layer + layer], probs, sz * sizeof *probs);
    return 0;
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - (double)b[i]));
    return m;
}

/* Packs N_TEXTS texts of the lengths given (capped at the context) and compares each with
 * its own pass. */
static void check_family(const char *dir, const int *want_lens)
{
    hs_model *m = tu_load(dir);
    const hs_model_config *c = hs_model_config_of(m);
    int L = c->n_layer, H = c->n_head, d = c->d_model, V = c->vocab_size, lens[N_TEXTS];
    size_t total = 0;
    for (int t = 0; t < N_TEXTS; t++) {
        lens[t] = want_lens[t] < c->n_ctx - 2 ? want_lens[t] : c->n_ctx - 2;
        total += (size_t)lens[t];
    }
    int32_t *ids = malloc(total * sizeof *ids), *tt = malloc(total * sizeof *tt);
    for (size_t i = 0, t = 0, r = 0; i < total; i++, r++) {
        if ((int)r == lens[t])
            t++, r = 0;
        ids[i] = (int32_t)((7 + 131 * i + 17 * t) % (size_t)(V - 3)) + 2; /* no pad id 1 */
        tt[i] = c->arch->token_types && c->type_vocab_size > 1 && r >= (size_t)lens[t] / 2;
    }
    float **maps = malloc((size_t)N_TEXTS * (size_t)L * sizeof *maps);
    for (int t = 0; t < N_TEXTS; t++)
        for (int l = 0; l < L; l++)
            maps[t * L + l] = malloc((size_t)H * (size_t)lens[t] * (size_t)lens[t] * sizeof(float));
    float *lg = c->has_lm_head ? malloc(total * (size_t)V * sizeof *lg) : NULL;
    float *hid = malloc(total * (size_t)d * sizeof *hid);
    pack_maps pm = {c, maps, lens, 0, 0};
    hs_packed_opts po = {.on_attn = keep_map, .user = &pm, .logits = lg, .hidden = hid};
    hs_error err = {{0}};
    cr_assert_eq(hs_forward_packed(m, ids, c->arch->token_types ? tt : NULL, lens, N_TEXTS, &po,
                                   NULL, &err), HS_OK, "%s: %s", dir, err.msg);
    cr_assert_eq(pm.bad, 0, "%s: the observer saw a wrong text or size", dir);
    cr_assert_eq(pm.calls, N_TEXTS * L, "%s: %d observer calls", dir, pm.calls);
    double dm = 0, dl = 0, dh = 0;
    size_t r0 = 0;
    for (int t = 0; t < N_TEXTS; r0 += (size_t)lens[t], t++) {
        int n = lens[t];
        hs_trace *tr = NULL;
        cr_assert_eq(hs_trace_new(m, n, &tr, &err), HS_OK, "%s", err.msg);
        float *lg1 = lg ? malloc((size_t)n * (size_t)V * sizeof *lg1) : NULL;
        float *hid1 = malloc((size_t)n * (size_t)d * sizeof *hid1);
        hs_forward_opts o = {.on_attn = hs_trace_observe, .user = tr, .logits = lg1,
                             .hidden = hid1};
        cr_assert_eq(hs_forward(m, ids + r0, c->arch->token_types ? tt + r0 : NULL, n, &o, NULL,
                                &err), HS_OK, "%s: %s", dir, err.msg);
        size_t per = (size_t)H * (size_t)n * (size_t)n;
        for (int l = 0; l < L; l++)
            dm = fmax(dm, max_diff(maps[t * L + l], tr->attn + (size_t)l * per, per));
        if (lg)
            dl = fmax(dl, max_diff(lg + r0 * (size_t)V, lg1, (size_t)n * (size_t)V));
        dh = fmax(dh, max_diff(hid + r0 * (size_t)d, hid1, (size_t)n * (size_t)d));
        hs_trace_free(tr);
        free(lg1);
        free(hid1);
    }
    if (getenv("HS_TEST_VERBOSE"))
        fprintf(stderr, "%s: maps %g logits %g hidden %g\n", dir, dm, dl, dh);
    cr_expect(dm <= MAP_TOL && dl <= OUT_TOL && dh <= OUT_TOL,
              "%s: packed against one pass a text: max |d| maps %g, logits %g, hidden %g", dir, dm,
              dl, dh);
    for (int i = 0; i < N_TEXTS * L; i++)
        free(maps[i]);
    free(maps);
    free(lg);
    free(hid);
    free(ids);
    free(tt);
    hs_model_free(m);
}

/* Windows of 64 keys (Mistral, Gemma 2) shorter than a text of 80 or 140; Phi-3's longrope
 * switches to its long factors past 128 tokens, which only the 140-token text is. */
static const int LENS[N_TEXTS] = {80, 9, 140, 3};

Test(forward_packed, learned_positions_equal_one_pass_a_text)
{
    check_family("fixtures/tiny-gpt2", LENS);
    check_family("fixtures/tiny-bert", LENS);
    check_family("fixtures/family-models/tiny-roberta", LENS);
}

Test(forward_packed, rotary_windows_and_alibi_equal_one_pass_a_text)
{
    check_family("fixtures/family-models/tiny-llama", LENS);
    check_family("fixtures/family-models/tiny-mistral", LENS);
    check_family("fixtures/family-models/tiny-gemma2", LENS);
    check_family("fixtures/family-models/tiny-phi3", LENS);
    check_family("fixtures/mqa-models/tiny-falcon-rw", LENS);
    check_family("fixtures/mla-models/tiny-deepseek-moe", LENS);
}

static int stop_at(void *user, int layer, int text, const float *probs, int n_head, int n)
{
    (void)probs, (void)n_head, (void)n;
    return layer == 1 && text == *(int *)user;
}

/* An encoder-decoder is refused by name; bad lengths, a text past the context or outside
 * the vocabulary name the text; an observer stops the pass. */
Test(forward_packed, refusals)
{
    hs_error err = {{0}};
    hs_model *t5 = tu_load("fixtures/t5/models/t5-tiny");
    int32_t ids[8] = {3, 4, 5, 6, 7, 8, 9, 10};
    int lens[2] = {5, 3};
    cr_assert_eq(hs_forward_packed(t5, ids, NULL, lens, 2, NULL, NULL, &err), HS_E_UNSUPPORTED);
    cr_assert_not_null(strstr(err.msg, "encoder-decoder"), "%s", err.msg);
    hs_model_free(t5);
    hs_model *m = tu_load("fixtures/tiny-gpt2");
    cr_assert_eq(hs_forward_packed(m, ids, NULL, lens, 0, NULL, NULL, &err), HS_E_ARG);
    int zero[2] = {5, 0};
    cr_assert_eq(hs_forward_packed(m, ids, NULL, zero, 2, NULL, NULL, &err), HS_E_INPUT);
    cr_assert_not_null(strstr(err.msg, "text 1"), "%s", err.msg);
    int32_t *big = calloc(200, sizeof *big);
    int long_lens[2] = {10, 190}; /* the context is 128 */
    cr_assert_eq(hs_forward_packed(m, big, NULL, long_lens, 2, NULL, NULL, &err), HS_E_INPUT);
    cr_assert_not_null(strstr(err.msg, "text 1"), "%s", err.msg);
    int fits[2] = {100, 100}; /* 200 rows in all, each text within the context */
    cr_assert_eq(hs_forward_packed(m, big, NULL, fits, 2, NULL, NULL, &err), HS_OK, "%s", err.msg);
    free(big);
    ids[6] = 1 << 30;
    cr_assert_eq(hs_forward_packed(m, ids, NULL, lens, 2, NULL, NULL, &err), HS_E_INPUT);
    cr_assert_not_null(strstr(err.msg, "text 1"), "%s", err.msg);
    ids[6] = 9;
    int which = 1;
    hs_packed_opts po = {.on_attn = stop_at, .user = &which};
    cr_assert_eq(hs_forward_packed(m, ids, NULL, lens, 2, &po, NULL, &err), HS_E_ARG);
    cr_assert_not_null(strstr(err.msg, "stopped"), "%s", err.msg);
    hs_model_free(m);
}
