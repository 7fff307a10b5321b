/* hs_analyze_run_target on an encoder-decoder (T5): the three kinds of heads in hs_analysis.encdec,
 * their maps those of hs_forward_encdec on the same ids (teacher forcing from the start
 * token), the report's kinds and heads, and the refusals by name (no target; a target for a
 * model of one stack; options it does not take). The numbers themselves are checked against
 * the float64 reference by tests/cli_t5.sh (fixtures/ref/make_t5_report_golden.py). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <criterion/criterion.h>

#include "headscope/forward.h"
#include "headscope/report.h"
#include "pipeline/encdec_result.h"
#include "testutil.h"

#define T5 "fixtures/t5/models/t5-tiny"

static const int32_t text_ids[] = {30, 73, 14, 184, 12, 27, 157, 9, 164, 6, 1};
static const int32_t target_ids[] = {30, 73, 14, 184, 8, 1};
#define NE ((int)(sizeof text_ids / sizeof *text_ids))
#define ND ((int)(sizeof target_ids / sizeof *target_ids))

static hs_analyze_opts quick(void)
{
    hs_analyze_opts o;
    hs_analyze_opts_default(&o);
    o.hash_files = 0;
    o.pruning = 0;
    return o;
}

typedef struct maps_of {
    float *self[8], *cross[8];
    int n_self, n_cross;
} maps_of;

static int keep_self(void *user, int layer, const float *p, int H, int n)
{
    maps_of *k = user;
    (void)layer;
    k->self[k->n_self] = malloc((size_t)H * n * n * sizeof *p);
    memcpy(k->self[k->n_self++], p, (size_t)H * n * n * sizeof *p);
    return 0;
}

static int keep_cross(void *user, int layer, const float *p, int H, int nd, int ne)
{
    maps_of *k = user;
    (void)layer;
    k->cross[k->n_cross] = malloc((size_t)H * nd * ne * sizeof *p);
    memcpy(k->cross[k->n_cross++], p, (size_t)H * nd * ne * sizeof *p);
    return 0;
}

Test(t5_analyze, three_kinds_with_the_pass_s_maps)
{
    hs_model *m = tu_load(T5);
    const hs_model_config *c = hs_model_config_of(m);
    hs_analyze_opts o = quick();
    hs_analyze_input in = {.ids = text_ids, .n = NE};
    hs_analyze_target tg = {.ids = target_ids, .n = ND, .text = "a target"};
    hs_analysis *a = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_analyze_run_target(m, &in, &tg, &o, &a, &err), HS_OK, "%s", err.msg);
    const hs_encdec_result *e = a->encdec;
    cr_assert_not_null(e);
    cr_assert_eq(a->n_heads, 0);
    cr_assert_eq(e->n_enc, NE);
    cr_assert_eq(e->n_dec, ND);
    cr_assert_eq(e->dec_ids[0], c->decoder_start_id);
    cr_assert_eq(memcmp(e->dec_ids + 1, target_ids, (ND - 1) * sizeof *target_ids), 0);
    int shapes[3][2] = {{NE, NE}, {ND, ND}, {ND, NE}};
    for (int t = 0; t < HS_ED_KINDS; t++) {
        cr_assert_eq(e->kinds[t].rows, shapes[t][0]);
        cr_assert_eq(e->kinds[t].cols, shapes[t][1]);
        cr_assert_eq(e->kinds[t].n_layer, 2);
    }
    /* the maps are hs_forward_encdec's, bit for bit */
    int32_t dec[ND];
    dec[0] = c->decoder_start_id;
    memcpy(dec + 1, target_ids, (ND - 1) * sizeof *dec);
    maps_of k = {0};
    hs_forward_opts fo = {.on_attn = keep_self, .on_cross = keep_cross, .user = &k};
    cr_assert_eq(hs_forward_encdec(m, text_ids, NE, dec, ND, &fo, NULL, &err), HS_OK);
    cr_assert_eq(k.n_self, 4);
    cr_assert_eq(k.n_cross, 2);
    size_t H = (size_t)c->n_head;
    for (int l = 0; l < 4; l++) {
        const hs_encdec_kind *kd = &e->kinds[l < 2 ? HS_ED_ENC : HS_ED_DEC];
        size_t per = H * (size_t)kd->rows * (size_t)kd->cols;
        cr_assert_eq(memcmp(kd->maps + (size_t)(l % 2) * per, k.self[l], per * sizeof(float)), 0);
        free(k.self[l]);
    }
    for (int l = 0; l < 2; l++) {
        size_t per = H * ND * NE;
        cr_assert_eq(memcmp(e->kinds[HS_ED_CROSS].maps + (size_t)l * per, k.cross[l],
                            per * sizeof(float)), 0);
        free(k.cross[l]);
    }
    /* no positional detector on a cross head; its entropy over the NE keys of every row */
    const hs_encdec_kind *x = &e->kinds[HS_ED_CROSS];
    cr_assert(isnan(x->scores[0].prev_token) && isnan(x->scores[0].self) &&
              isnan(x->scores[0].induction));
    cr_assert(isfinite(x->entropy[0].norm) && x->entropy[0].rows == ND);
    /* the report: every head with its kind, the cross maps decoder x encoder */
    char *json = hs_report_json(a, NULL, 0, 0);
    cJSON *r = cJSON_Parse(json);
    cr_assert_not_null(r);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(r, "kinds")), 3);
    cJSON *heads = cJSON_GetObjectItem(r, "heads"), *h;
    int count[3] = {0};
    cJSON_ArrayForEach(h, heads)
    {
        const char *kind = cJSON_GetObjectItem(h, "kind")->valuestring;
        int t = !strcmp(kind, "encoder") ? 0 : !strcmp(kind, "decoder") ? 1 : 2;
        cJSON *shape = cJSON_GetObjectItem(h, "map_shape");
        cr_assert_eq(cJSON_GetArrayItem(shape, 0)->valueint, shapes[t][0]);
        cr_assert_eq(cJSON_GetArrayItem(shape, 1)->valueint, shapes[t][1]);
        count[t]++;
    }
    cr_assert(count[0] == 4 && count[1] == 4 && count[2] == 4);
    cJSON_Delete(r);
    free(json);
    hs_analysis_free(a);
    hs_model_free(m);
}

Test(t5_analyze, refusals_by_name)
{
    hs_model *m = tu_load(T5), *g = tu_load("fixtures/tiny-gpt2");
    hs_analyze_opts o = quick();
    hs_analyze_input in = {.ids = text_ids, .n = NE};
    hs_analysis *a = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_analyze_run(m, &in, &o, &a, &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "the encoder-decoder 't5' needs a target: the decoder's text (--target)");
    cr_assert_null(a);
    hs_analyze_target tg = {.ids = target_ids, .n = ND};
    cr_assert_eq(hs_analyze_run_target(g, &in, &tg, &o, &a, &err), HS_E_ARG);
    cr_assert_str_eq(err.msg, "a target is for an encoder-decoder's decoder ('gpt2' is not one)");
    o.ablation_kind = HS_ABLATION_MEAN;
    cr_assert_eq(hs_analyze_run_target(m, &in, &tg, &o, &a, &err), HS_E_UNSUPPORTED);
    cr_assert_str_eq(err.msg, "mean ablation is not implemented for an encoder-decoder (zero only)");
    cr_assert_null(a);
    char *out = NULL;
    const char *texts[] = {"a text"};
    cr_assert_eq(hs_analyze_json(m, texts, NULL, 1, NULL, &out, &err), HS_E_ARG);
    cr_assert_null(out);
    hs_model_free(m);
    hs_model_free(g);
}
