/* Hook sites (include/headscope/hooks.h): names, shapes, and that reading a site changes no
 * bit, replacing one changes what it should and nothing else, adding works per copy. */
#include "headscope/activations.h"
#include "headscope/forward.h"
#include "headscope/hooks.h"
#include "model/model_internal.h"
#include "testutil.h"

#define GPT2 "fixtures/tiny-gpt2"

static const int32_t IDS_A[] = {464, 3290, 318, 257, 1332, 11, 290, 262, 3797, 13};
static const int32_t IDS_B[] = {464, 3797, 318, 407, 1332, 11, 475, 262, 3290, 13};
#define N 10

/* A hook that copies every call's values into slots per (site, layer), or writes them back
 * (replace), or adds a constant to one head (steer). */
typedef struct {
    int mode; /* 0 read, 1 replace from store, 2 add `add` to head `head` of site `site` */
    hs_site site;
    int layer, head, calls;
    float add;
    float *store[HS_SITE_COUNT][8];
    size_t len[HS_SITE_COUNT][8]; /* floats in store */
} hook_state;

static int hook(void *user, const hs_hook_call *k)
{
    hook_state *s = user;
    s->calls++;
    int l = k->layer < 0 ? 0 : k->layer;
    if (s->mode == 0) {
        float **slot = &s->store[k->site][l];
        if (!*slot) {
            s->len[k->site][l] = (size_t)k->rows * (size_t)k->cols;
            *slot = malloc(s->len[k->site][l] * sizeof(float));
        }
        for (int i = 0; i < k->rows; i++)
            memcpy(*slot + (size_t)i * (size_t)k->cols, k->x + (size_t)i * (size_t)k->ld,
                   (size_t)k->cols * sizeof(float));
    } else if (s->mode == 1 && k->site == s->site && k->layer == s->layer) {
        for (int i = 0; i < k->rows; i++)
            memcpy(k->x + (size_t)i * (size_t)k->ld, s->store[k->site][l] + (size_t)i * k->cols,
                   (size_t)k->cols * sizeof(float));
    } else if (s->mode == 2 && k->site == s->site && k->layer == s->layer &&
               k->copy == s->head) {
        for (int i = 0; i < k->rows; i++)
            for (int e = 0; e < k->head_width; e++)
                k->x[(size_t)i * (size_t)k->ld + (size_t)s->head * k->head_width + e] += s->add;
    }
    return 0;
}

static void free_state(hook_state *s)
{
    for (int i = 0; i < HS_SITE_COUNT; i++)
        for (int l = 0; l < 8; l++)
            free(s->store[i][l]);
}

static void run(hs_model *m, const int32_t *ids, hs_forward_opts *o, float *logits)
{
    hs_error err = {{0}};
    o->logits = logits;
    cr_assert_eq(hs_forward(m, ids, NULL, N, o, NULL, &err), HS_OK, "%s", err.msg);
}

Test(hooks, names_parse_and_reject)
{
    hs_site s;
    int l;
    hs_error err = {{0}};
    cr_assert_eq(hs_site_parse("blocks.1.attn.hook_z", 2, &s, &l, &err), HS_OK, "%s", err.msg);
    cr_assert(s == HS_SITE_Z && l == 1);
    cr_assert_eq(hs_site_parse("blocks.0.hook_resid_pre", 2, &s, &l, &err), HS_OK);
    cr_assert(s == HS_SITE_RESID_PRE && l == 0);
    cr_assert_eq(hs_site_parse("ln_final.hook_normalized", 2, &s, &l, &err), HS_OK);
    cr_assert(s == HS_SITE_LN_FINAL && l == -1);
    cr_assert_eq(hs_site_parse("logits", 2, &s, &l, &err), HS_OK);
    cr_assert(s == HS_SITE_LOGITS);
    cr_assert_eq(hs_site_parse("blocks.2.attn.hook_z", 2, &s, &l, &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "hook site 'blocks.2.attn.hook_z': layer 2, the model has 2");
    cr_assert_eq(hs_site_parse("blocks.01.attn.hook_z", 2, &s, &l, &err), HS_E_ARG);
    cr_assert_eq(hs_site_parse("blocks.1.attn.hook_zz", 2, &s, &l, &err), HS_E_ARG);
    cr_assert(strstr(err.msg, "'blocks.1.attn.hook_zz' is not a hook site"));
    cr_assert_eq(hs_site_from_key("pattern"), HS_SITE_PATTERN);
    cr_assert_eq(hs_site_from_key("nope"), -1);
    for (int i = 0; i < HS_SITE_COUNT; i++)
        cr_assert_eq((int)hs_site_get((hs_site)i)->site, i, "the table's row %d is out of order", i);
    cr_assert_null(hs_site_get(HS_SITE_COUNT));
}

Test(hooks, shapes_follow_the_config_with_grouped_kv_heads)
{
    hs_model_config c = {.n_layer = 2, .n_head = 8, .n_kv_head = 2, .d_head = 16,
                         .d_model = 128, .vocab_size = 1000};
    int dims[3];
    cr_assert_eq(hs_site_shape(&c, HS_SITE_K, 5, dims), 3);
    cr_assert(dims[0] == 5 && dims[1] == 2 && dims[2] == 16);
    cr_assert_eq(hs_site_shape(&c, HS_SITE_Q, 5, dims), 3);
    cr_assert(dims[1] == 8 && dims[2] == 16);
    cr_assert_eq(hs_site_shape(&c, HS_SITE_PATTERN, 5, dims), 3);
    cr_assert(dims[0] == 8 && dims[1] == 5 && dims[2] == 5);
    cr_assert_eq(hs_site_shape(&c, HS_SITE_RESULT, 5, dims), 3);
    cr_assert(dims[1] == 8 && dims[2] == 128);
    cr_assert_eq(hs_site_shape(&c, HS_SITE_LOGITS, 5, dims), 2);
    cr_assert(dims[1] == 1000);
    cr_assert_eq(hs_site_head_count(&c, HS_SITE_V), 2);
    cr_assert_eq(hs_site_head_count(&c, HS_SITE_MLP_OUT), 0);
}

/* Reading every site but result (which sums the heads itself) leaves the logits' bits, and
 * what is read equals the activations' capture. */
Test(hooks, reading_changes_no_bit_and_matches_the_capture)
{
    hs_model *m = tu_load(GPT2);
    const hs_model_config *c = hs_model_config_of(m);
    size_t V = (size_t)c->vocab_size;
    float *ref = malloc(N * V * sizeof *ref), *got = malloc(N * V * sizeof *got);
    hs_forward_opts o = {0};
    run(m, IDS_A, &o, ref);
    hook_state s = {0};
    o = (hs_forward_opts){.hook = hook, .hook_user = &s,
                          .hook_sites = ~0u & ~HS_SITE_BIT(HS_SITE_RESULT)};
    run(m, IDS_A, &o, got);
    cr_assert_eq(memcmp(ref, got, N * V * sizeof *ref), 0);
    cr_assert_eq(s.calls, 2 * 9 + 2);
    hs_activations *a = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_activations_run(m, IDS_A, NULL, N, HS_CAPTURE_Z | HS_CAPTURE_MLP_OUT |
                                    HS_CAPTURE_PATTERN | HS_CAPTURE_RESID_PRE, &a, &err), HS_OK);
    size_t nd = (size_t)N * (size_t)c->d_model, pat = (size_t)c->n_head * N * N;
    for (int l = 0; l < 2; l++) {
        cr_assert_eq(memcmp(s.store[HS_SITE_Z][l], a->z + l * nd, nd * sizeof(float)), 0);
        cr_assert_eq(memcmp(s.store[HS_SITE_MLP_OUT][l], a->mlp_out + l * nd, nd * 4), 0);
        cr_assert_eq(memcmp(s.store[HS_SITE_RESID_PRE][l], a->resid_pre + l * nd, nd * 4), 0);
        cr_assert_eq(memcmp(s.store[HS_SITE_PATTERN][l], a->pattern + l * pat, pat * 4), 0);
    }
    /* the result site: its heads sum to attn_out less the bias */
    hook_state r = {0};
    o = (hs_forward_opts){.hook = hook, .hook_user = &r,
                          .hook_sites = HS_SITE_BIT(HS_SITE_RESULT) |
                                        HS_SITE_BIT(HS_SITE_ATTN_OUT)};
    run(m, IDS_A, &o, got);
    cr_assert_lt(tu_max_abs_diff(ref, got, N * V, NULL), 1e-4);
    int d = c->d_model, H = c->n_head;
    hs_layer L;
    cr_assert_eq(hs_layer_get(m, 1, &L, &err), HS_OK);
    for (int i = 0; i < N; i++)
        for (int e = 0; e < d; e++) {
            double sum = L.b_o[e];
            for (int h = 0; h < H; h++)
                sum += r.store[HS_SITE_RESULT][1][((size_t)i * H + h) * d + e];
            cr_assert_float_eq(sum, r.store[HS_SITE_ATTN_OUT][1][(size_t)i * d + e], 1e-5);
        }
    hs_layer_put(m, 1);
    hs_activations_free(a);
    free_state(&s);
    free_state(&r);
    free(ref);
    free(got);
    hs_model_free(m);
}

/* Replacing the stream entering layer 0 by another text's gives that text's logits (the
 * two texts share their positions), bit for bit; a pattern or q replaced likewise. */
Test(hooks, replacing_a_site_patches_the_run)
{
    hs_model *m = tu_load(GPT2);
    size_t V = (size_t)hs_model_config_of(m)->vocab_size;
    float *clean = malloc(N * V * 4), *got = malloc(N * V * 4);
    hook_state s = {0};
    hs_forward_opts o = {.hook = hook, .hook_user = &s,
                         .hook_sites = ~0u & ~HS_SITE_BIT(HS_SITE_RESULT)};
    run(m, IDS_A, &o, clean);
    hs_site sites[] = {HS_SITE_RESID_PRE, HS_SITE_RESID_POST};
    int layers[] = {0, 1};
    for (int k = 0; k < 2; k++) {
        s.mode = 1, s.site = sites[k], s.layer = layers[k];
        o = (hs_forward_opts){.hook = hook, .hook_user = &s, .hook_sites = HS_SITE_BIT(sites[k])};
        run(m, IDS_B, &o, got);
        cr_assert_eq(memcmp(clean, got, N * V * 4), 0, "site %d", (int)sites[k]);
    }
    /* the last layer's q, k, v together: its attention, and so everything after, is A's
     * only when the stream is A's too; so patch k, v at layer 1 and check it changed */
    float *plain = malloc(N * V * 4);
    o = (hs_forward_opts){0};
    run(m, IDS_B, &o, plain);
    s.mode = 1, s.site = HS_SITE_PATTERN, s.layer = 1;
    o = (hs_forward_opts){.hook = hook, .hook_user = &s, .hook_sites = HS_SITE_BIT(HS_SITE_PATTERN)};
    run(m, IDS_B, &o, got);
    cr_assert_gt(tu_max_abs_diff(plain, got, N * V, NULL), 1e-3);
    free_state(&s);
    free(clean);
    free(got);
    free(plain);
    hs_model_free(m);
}

/* Adding to one head's z in copy h of a batch equals the single run with that addition, and
 * an addition of 0 changes no bit of the single run. */
Test(hooks, adding_per_copy_in_a_batch)
{
    hs_model *m = tu_load(GPT2);
    const hs_model_config *c = hs_model_config_of(m);
    size_t V = (size_t)c->vocab_size;
    int H = c->n_head;
    float *one = malloc(N * V * 4), *batch = malloc((size_t)H * N * V * 4), *plain = malloc(N * V * 4);
    hs_forward_opts o = {0};
    run(m, IDS_A, &o, plain);
    hook_state s = {.mode = 2, .site = HS_SITE_Z, .layer = 0, .head = 0, .add = 0.0f};
    o = (hs_forward_opts){.hook = hook, .hook_user = &s, .hook_sites = HS_SITE_BIT(HS_SITE_Z)};
    run(m, IDS_A, &o, one);
    cr_assert_eq(memcmp(one, plain, N * V * 4), 0);
    s.add = 0.5f; /* copy h of a batch adds to head h (the hook matches copy == head) */
    hs_forward_opts ob = {.hook = hook, .hook_user = &s, .hook_sites = HS_SITE_BIT(HS_SITE_Z),
                          .batch = H, .logits = batch};
    hs_error err = {{0}};
    s.head = 0; /* a single pass is copy 0 */
    run(m, IDS_A, &o, one);
    for (int h = 0; h < H; h++) {
        s.head = h;
        cr_assert_eq(hs_forward(m, IDS_A, NULL, N, &ob, NULL, &err), HS_OK, "%s", err.msg);
        for (int b = 0; b < H; b++) {
            double diff = tu_max_abs_diff(plain, batch + (size_t)b * N * V, N * V, NULL);
            if (b == h)
                cr_assert_gt(diff, 1e-3, "copy %d was not steered", b);
            else
                cr_assert_lt(diff, 1e-5, "copy %d of %d", b, h);
        }
        if (h == 0)
            cr_assert_lt(tu_max_abs_diff(one, batch, N * V, NULL), 1e-5);
    }
    free(one);
    free(batch);
    free(plain);
    hs_model_free(m);
}

/* A parallel-residual block (tiny-pythia): resid_post = resid_pre + attn_out + mlp_out; a
 * grouped-query, rotary one (tiny-llama): k and v per KV head, q and k as the capture keeps
 * them (after the rotation), and the logits unchanged by reading. */
Test(hooks, parallel_residual_and_grouped_kv_heads)
{
    static const int32_t ids[] = {5, 17, 3, 99, 42, 7, 8, 61};
    const char *models[] = {"fixtures/family-models/tiny-pythia", "fixtures/family-models/tiny-llama"};
    for (int mi = 0; mi < 2; mi++) {
        hs_model *m = tu_load(models[mi]);
        const hs_model_config *c = hs_model_config_of(m);
        int n = 8, d = c->d_model, V = c->vocab_size, W = hs_qkv_width(c);
        int A = hs_model_attn_width(c), kvA = c->n_kv_head * c->d_head;
        float *ref = malloc((size_t)n * V * 4), *got = malloc((size_t)n * V * 4);
        hs_error err = {{0}};
        hs_forward_opts o = {.logits = ref};
        cr_assert_eq(hs_forward(m, ids, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);
        /* every site but result (and, in a parallel block, mlp_out, whose hook makes the
         * block add the MLP's output apart: the last bits may change) reads without a bit
         * changed */
        hook_state s = {0};
        unsigned apart = mi == 0 ? HS_SITE_BIT(HS_SITE_MLP_OUT) : 0;
        o = (hs_forward_opts){.logits = got, .hook = hook, .hook_user = &s,
                              .hook_sites = ~0u & ~HS_SITE_BIT(HS_SITE_RESULT) & ~apart};
        cr_assert_eq(hs_forward(m, ids, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);
        cr_assert_eq(memcmp(ref, got, (size_t)n * V * 4), 0, "%s", models[mi]);
        hook_state s2 = {0}; /* every site but result */
        o.hook_user = &s2;
        o.hook_sites = ~0u & ~HS_SITE_BIT(HS_SITE_RESULT);
        cr_assert_eq(hs_forward(m, ids, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);
        cr_assert_lt(tu_max_abs_diff(ref, got, (size_t)n * V, NULL), 1e-4);
        hs_activations *a = NULL;
        cr_assert_eq(hs_activations_run(m, ids, NULL, n, HS_CAPTURE_QKV, &a, &err), HS_OK);
        for (int l = 0; l < c->n_layer && l < 8; l++) {
            const float *cap = a->qkv + (size_t)l * n * W;
            for (int i = 0; i < n; i++) {
                cr_assert_eq(memcmp(s.store[HS_SITE_Q][l] + (size_t)i * A, cap + (size_t)i * W,
                                    (size_t)A * 4), 0);
                cr_assert_eq(memcmp(s.store[HS_SITE_K][l] + (size_t)i * kvA,
                                    cap + (size_t)i * W + A, (size_t)kvA * 4), 0);
            }
            if (mi == 0)
                for (size_t k = 0; k < (size_t)n * d; k++)
                    cr_assert_float_eq(s2.store[HS_SITE_RESID_POST][l][k],
                                       s2.store[HS_SITE_RESID_PRE][l][k] +
                                           s2.store[HS_SITE_ATTN_OUT][l][k] +
                                           s2.store[HS_SITE_MLP_OUT][l][k], 1e-4);
        }
        hs_activations_free(a);
        free_state(&s);
        free_state(&s2);
        free(ref);
        free(got);
        hs_model_free(m);
    }
}

/* The normalised decoders (tiny-gemma2: softcaps, post-norms, local layers; tiny-olmo2:
 * full-width query/key norms, no pre-norm): reading every site changes no bit, q and k are
 * the normalised and turned ones the capture keeps, and attn_out and mlp_out are what the
 * stream adds (after the post-sublayer norms): resid_post = resid_pre + attn_out + mlp_out. */
Test(hooks, normalised_decoders)
{
    static const int32_t ids[] = {5, 17, 3, 99, 42, 7, 8, 61};
    const char *models[] = {"fixtures/family-models/tiny-gemma2",
                            "fixtures/family-models/tiny-olmo2"};
    for (int mi = 0; mi < 2; mi++) {
        hs_model *m = tu_load(models[mi]);
        const hs_model_config *c = hs_model_config_of(m);
        int n = 8, d = c->d_model, V = c->vocab_size, W = hs_qkv_width(c);
        int A = hs_model_attn_width(c), kvA = c->n_kv_head * c->d_head;
        float *ref = malloc((size_t)n * V * 4), *got = malloc((size_t)n * V * 4);
        hs_error err = {{0}};
        hs_forward_opts o = {.logits = ref};
        cr_assert_eq(hs_forward(m, ids, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);
        hook_state s = {0};
        o = (hs_forward_opts){.logits = got, .hook = hook, .hook_user = &s,
                              .hook_sites = ~0u & ~HS_SITE_BIT(HS_SITE_RESULT)};
        cr_assert_eq(hs_forward(m, ids, NULL, n, &o, NULL, &err), HS_OK, "%s", err.msg);
        cr_assert_eq(memcmp(ref, got, (size_t)n * V * 4), 0, "%s", models[mi]);
        hs_activations *a = NULL;
        cr_assert_eq(hs_activations_run(m, ids, NULL, n, HS_CAPTURE_QKV, &a, &err), HS_OK);
        for (int l = 0; l < c->n_layer && l < 8; l++) {
            const float *cap = a->qkv + (size_t)l * n * W;
            for (int i = 0; i < n; i++) {
                cr_assert_eq(memcmp(s.store[HS_SITE_Q][l] + (size_t)i * A, cap + (size_t)i * W,
                                    (size_t)A * 4), 0);
                cr_assert_eq(memcmp(s.store[HS_SITE_K][l] + (size_t)i * kvA,
                                    cap + (size_t)i * W + A, (size_t)kvA * 4), 0);
            }
            for (size_t k = 0; k < (size_t)n * d; k++)
                cr_assert_float_eq(s.store[HS_SITE_RESID_POST][l][k],
                                   s.store[HS_SITE_RESID_PRE][l][k] +
                                       s.store[HS_SITE_ATTN_OUT][l][k] +
                                       s.store[HS_SITE_MLP_OUT][l][k], 1e-4, "%s layer %d",
                                   models[mi], l);
        }
        hs_activations_free(a);
        free_state(&s);
        free(ref);
        free(got);
        hs_model_free(m);
    }
}

/* Every site read on a model whose layers are multiplied in their stored type (the default
 * for these files) holds the bits of the same site with the layers converted: the result
 * site's per-head products take W_O's decoded values (they had read the stored matrix's
 * descriptor as floats, and the pass went on to NaN). */
Test(hooks, every_site_is_the_same_with_stored_layers)
{
    static const char *files[] = {"fixtures/family-models/tiny-llama",
                                  "fixtures/gguf/families/tiny-llama.q8_0.gguf"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        hs_model *m[2];
        hook_state s[2] = {{0}};
        for (int k = 0; k < 2; k++) {
            hs_error err = {{0}};
            hs_open_opts oo = {.weight_memory = k ? HS_WEIGHT_MEMORY_STORED : HS_WEIGHT_MEMORY_ALL};
            cr_assert_eq(hs_model_open2(files[f], &oo, &m[k], &err), HS_OK, "%s", err.msg);
        }
        const hs_model_config *c = hs_model_config_of(m[0]);
        cr_assert_leq(c->n_layer, 8);
        float *logits = malloc((size_t)N * (size_t)c->vocab_size * sizeof *logits);
        int32_t ids[N];
        for (int i = 0; i < N; i++)
            ids[i] = IDS_A[i] % c->vocab_size;
        for (int k = 0; k < 2; k++) {
            hs_forward_opts o = {.hook = hook, .hook_user = &s[k], .hook_sites = ~0u};
            run(m[k], ids, &o, logits);
        }
        cr_assert_gt(s[0].calls, 0);
        cr_assert_eq(s[0].calls, s[1].calls);
        for (int site = 0; site < HS_SITE_COUNT; site++)
            for (int l = 0; l < c->n_layer; l++) {
                if (!s[0].store[site][l])
                    continue;
                cr_assert_eq(s[0].len[site][l], s[1].len[site][l]);
                cr_assert(!memcmp(s[0].store[site][l], s[1].store[site][l],
                                  s[0].len[site][l] * sizeof(float)),
                          "%s: site %d layer %d differs", files[f], site, l);
            }
        free(logits);
        for (int k = 0; k < 2; k++) {
            free_state(&s[k]);
            hs_model_free(m[k]);
        }
    }
}
