/* Phi-3's LongRoPE and windows through GGUF (src/model/gguf_longrope.c and the writer):
 * tiny-llama (whose tokenizer a GGUF file needs) given Phi-3's names, a window and longrope
 * factors, written as llama.cpp's converter writes phi3 (rope_factors_long/short.weight,
 * rope.scaling.attn_factor and original_context_length, attention.sliding_window), read back
 * with each value, and the same maps bit for bit on a text past the original context and the
 * window; each corruption of the factors or the keys refused in one line. */
#include <stdlib.h>
#include <string.h>

#include "headscope/forward.h"
#include "headscope/gguf.h"
#include "model/model_internal.h"
#include "testutil.h"

#define N_TOK 14 /* past the window (6) and the original context (8) */

static const float short_f[4] = {1.0f, 1.25f, 1.5f, 1.75f}, long_f[4] = {2.0f, 3.0f, 4.0f, 5.0f};

/* tiny-llama as a Phi-3: the same weights in the normalised layout, Phi-3's name table */
static hs_model *phi3_model(void)
{
    hs_error err = {{0}};
    hs_model *m = NULL;
    cr_assert_eq(hs_model_load("fixtures/family-models/tiny-llama", &m, &err), HS_OK, "%s", err.msg);
    hs_arch *a = &m->arch;
    cr_assert_eq(a->rotary_dims, 8);
    a->family = m->cfg.family = HS_FAMILY_PHI3;
    a->name = "phi3";
    a->names = &hs_phi3_table;
    a->sliding_window = 6;
    a->rope_scaling = HS_ROPE_LONGROPE;
    a->rope_orig_ctx = 8;
    a->rope_factor = 16.0f;
    a->rope_attn_factor = 1.25f;
    memcpy(a->rope_short, short_f, sizeof short_f);
    memcpy(a->rope_long, long_f, sizeof long_f);
    cr_assert_eq(hs_config_validate(&m->cfg, &err), HS_OK, "%s", err.msg);
    return m;
}

static hs_status load_buf(const unsigned char *buf, size_t n, hs_model **m, hs_error *err)
{
    char dir[64], path[128];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/p.gguf", dir);
    tu_write_file(path, buf, n);
    *m = NULL;
    hs_status st = hs_model_load(path, m, err);
    tu_rm_rf(dir);
    return st;
}

static float *maps(hs_model *m, const int32_t *ids)
{
    hs_error err = {{0}};
    hs_trace *t = NULL;
    cr_assert_eq(hs_trace_new(m, N_TOK, &t, &err), HS_OK, "%s", err.msg);
    hs_forward_opts o = {.on_attn = hs_trace_observe, .user = t};
    cr_assert_eq(hs_forward(m, ids, NULL, N_TOK, &o, NULL, &err), HS_OK, "%s", err.msg);
    size_t cnt = (size_t)m->cfg.n_layer * m->cfg.n_head * N_TOK * N_TOK;
    float *a = malloc(cnt * sizeof *a);
    memcpy(a, t->attn, cnt * sizeof *a);
    hs_trace_free(t);
    return a;
}

Test(gguf_longrope, phi3_factors_window_and_maps_round_trip)
{
    hs_model *m = phi3_model(), *back = NULL;
    unsigned char *buf = NULL;
    size_t n = 0;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_encode(m, NULL, &buf, &n, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(load_buf(buf, n, &back, &err), HS_OK, "%s", err.msg);
    const hs_arch *b = &back->arch;
    cr_expect_eq(back->cfg.family, HS_FAMILY_PHI3);
    cr_expect_eq(b->sliding_window, 6);
    cr_expect_eq(b->rope_scaling, HS_ROPE_LONGROPE);
    cr_expect_eq(b->rope_orig_ctx, 8);
    cr_expect_eq(b->rope_attn_factor, 1.25f);
    cr_expect_arr_eq(b->rope_short, short_f, sizeof short_f);
    cr_expect_arr_eq(b->rope_long, long_f, sizeof long_f);
    int32_t ids[N_TOK];
    for (int i = 0; i < N_TOK; i++)
        ids[i] = 5 + 37 * i % 900;
    float *a1 = maps(m, ids), *a2 = maps(back, ids);
    size_t cnt = (size_t)m->cfg.n_layer * m->cfg.n_head * N_TOK * N_TOK;
    cr_expect_arr_eq(a1, a2, cnt * sizeof *a1, "the GGUF file's maps differ");
    /* the window is in effect: query 13 gives key 7 (6 back) nothing */
    cr_expect_eq(a2[13 * N_TOK + 7], 0.0f);
    cr_expect_gt(a2[13 * N_TOK + 8], 0.0f);
    free(a1);
    free(a2);
    hs_model_free(back);
    free(buf);
    hs_model_free(m);
}

/* The first place of s (len bytes) in b (n bytes), or NULL (memmem is not POSIX). */
static unsigned char *find_bytes(unsigned char *b, size_t n, const char *s, size_t len)
{
    for (size_t i = 0; i + len <= n; i++)
        if (!memcmp(b + i, s, len))
            return b + i;
    return NULL;
}

/* buf with the first occurrence of `from` replaced by `to` (the same length), or of the
 * tensor `name`'s value k set to v; the message of loading it. */
static void expect_refused(const unsigned char *buf, size_t n, const char *from, const char *to,
                           const char *tensor, int k, float v, const char *want)
{
    unsigned char *b = malloc(n);
    memcpy(b, buf, n);
    if (from) {
        unsigned char *at = find_bytes(b, n, from, strlen(from));
        cr_assert_not_null(at, "'%s' not in the file", from);
        memcpy(at, to, strlen(to));
    } else {
        hs_gguf *g = NULL;
        hs_error e0 = {{0}};
        cr_assert_eq(hs_gguf_parse(b, n, &g, &e0), HS_OK, "%s", e0.msg);
        const hs_gguf_tensor *t = hs_gguf_find_tensor(g, tensor);
        cr_assert_not_null(t);
        memcpy((unsigned char *)b + (t->data - b) + 4 * (size_t)k, &v, 4);
        hs_gguf_free(g);
    }
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_expect_neq(load_buf(b, n, &m, &err), HS_OK, "opened");
    cr_expect_null(m);
    cr_expect_not_null(strstr(err.msg, want), "message '%s' lacks '%s'", err.msg, want);
    cr_expect_null(strchr(err.msg, '\n'));
    hs_model_free(m);
    free(b);
}

Test(gguf_longrope, refuses_bad_factors_and_missing_parts)
{
    hs_model *m = phi3_model();
    unsigned char *buf = NULL;
    size_t n = 0;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_encode(m, NULL, &buf, &n, &err), HS_OK, "%s", err.msg);
    expect_refused(buf, n, NULL, NULL, "rope_factors_long.weight", 1, 0.0f,
                   "rope_factors_long.weight[1] = 0: a rope factor must be a positive number");
    expect_refused(buf, n, NULL, NULL, "rope_factors_short.weight", 3, -2.0f,
                   "rope_factors_short.weight[3] = -2: a rope factor must be a positive number");
    expect_refused(buf, n, "rope_factors_short.weight", "rope_factors_shorT.weight", NULL, 0, 0,
                   "missing tensor 'rope_factors_short.weight' (longrope needs both factor tensors)");
    expect_refused(buf, n, "phi3.rope.scaling.original_context_length",
                   "phi3.rope.scaling.original_context_lengtH", NULL, 0, 0,
                   "missing key 'phi3.rope.scaling.original_context_length'");
    free(buf);
    /* longrope in a llama file: not written (llama.cpp reads the factors for phi3 only) */
    m->arch.family = m->cfg.family = HS_FAMILY_LLAMA;
    m->arch.name = "llama";
    m->arch.names = hs_arch_of(HS_FAMILY_LLAMA)->names;
    buf = NULL;
    cr_expect_eq(hs_gguf_encode(m, NULL, &buf, &n, &err), HS_E_UNSUPPORTED);
    cr_expect_str_eq(err.msg, "longrope scaling in a llama model cannot be written to GGUF "
                     "(llama.cpp reads rope_factors_*.weight for phi3 only)");
    free(buf);
    hs_model_free(m);
}
