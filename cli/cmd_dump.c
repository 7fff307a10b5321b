/* headscope dump: every activation of one run as .npy files under TransformerLens names. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "cli.h"
#include "headscope/activations.h"
#include "headscope/npy.h"
#include "model/model_internal.h"
#include "nn/moe.h"
#include "dump_sites.h"

static const char C[] = "dump";

static const char usage_text[] =
    "usage: headscope dump MODEL (--text TEXT | --file PATH|-) [--text-pair TEXT2]\n"
    "                      --what LIST -o OUTDIR\n\n"
    "Runs MODEL on the text with every head on and writes the activations LIST asks for, one\n"
    ".npy file (float32, C order) per layer and hook, named as TransformerLens names its\n"
    "hooks (docs/dump.md), and OUTDIR/manifest.json listing them with their shapes:\n"
    "  q, k, v     blocks.L.attn.hook_q.npy ...  (pos, head, d_head), biases included\n"
    "  z           blocks.L.attn.hook_z.npy      (pos, head, d_head): each head's P V\n"
    "  pattern     blocks.L.attn.hook_pattern.npy (head, query_pos, key_pos)\n"
    "  resid_pre   blocks.L.hook_resid_pre.npy   (pos, d_model): the stream entering L\n"
    "  attn_out    blocks.L.hook_attn_out.npy    (pos, d_model): z W_O + b_O\n"
    "  mlp_out     blocks.L.hook_mlp_out.npy     (pos, d_model)\n"
    "  norm        blocks.L.attn.norm_pattern.npy (head, query_pos, key_pos): norm-based\n"
    "              attention ||a_ij f(x_j)|| (Kobayashi et al. 2020)\n"
    "  router      blocks.L.mlp.router_experts.npy (pos, top_k), int32: the experts the\n"
    "              router of each mixture-of-experts layer chooses, best first\n"
    "  all         every one of them (not the four below)\n"
    "  result      blocks.L.attn.hook_result.npy (pos, head, d_model): z_h W_O^h\n"
    "  resid_post  blocks.L.hook_resid_post.npy  (pos, d_model): the stream leaving L\n"
    "  ln_final    ln_final.hook_normalized.npy  (pos, d_model): after the final norm\n"
    "  logits      logits.npy                    (pos, vocab)\n"
    "input_ids.npy (int32, (pos)) is always written.\n\n"
    "  -t, --text TEXT        the input text\n"
    "  -f, --file PATH        read the text from a file as raw bytes ('-' for stdin)\n"
    "      --text-pair TEXT2  second segment for BERT ([CLS] a [SEP] b [SEP])\n"
    "      --truncate         keep the first n_ctx tokens of a longer text\n"
    "  -w, --what LIST        comma-separated activations (required)\n"
    "  -o, --output OUTDIR    output folder (created with its parents if missing); an\n"
    "                         earlier run's outputs there are replaced\n"
    "      --no-clobber       refuse an OUTDIR that holds an earlier run's outputs\n"
    "  -q, --quiet            print nothing on success\n"
    "  -h, --help             show this help\n";

/* The activations by name: bit in what[], and what they need captured. */
enum { W_Q, W_K, W_V, W_Z, W_PATTERN, W_RESID, W_ATTN, W_MLP, W_NORM, W_ROUTER, W_RESULT,
       W_RESID_POST, W_LN_FINAL, W_LOGITS, W_COUNT };
#define W_ALL W_RESULT /* "all": the kinds before it (what it meant before the others) */
static const struct {
    const char *name, *hook; /* hook: the name after "blocks.L." (the whole name for a site
                                after the last layer) */
    unsigned capture;
    int site; /* a site read through the hooks (dump_sites), or -1 */
} kinds[W_COUNT] = {
    {"q", "attn.hook_q", HS_CAPTURE_QKV, -1},
    {"k", "attn.hook_k", HS_CAPTURE_QKV, -1},
    {"v", "attn.hook_v", HS_CAPTURE_QKV, -1},
    {"z", "attn.hook_z", HS_CAPTURE_Z, -1},
    {"pattern", "attn.hook_pattern", HS_CAPTURE_PATTERN, -1},
    {"resid_pre", "hook_resid_pre", HS_CAPTURE_RESID_PRE, -1},
    {"attn_out", "hook_attn_out", HS_CAPTURE_ATTN_OUT, -1},
    {"mlp_out", "hook_mlp_out", HS_CAPTURE_MLP_OUT, -1},
    {"norm", "attn.norm_pattern", HS_CAPTURE_QKV | HS_CAPTURE_PATTERN, -1},
    {"router", "mlp.router_experts", 0, -1}, /* hs_moe_routes, int32 */
    {"result", "attn.hook_result", 0, HS_SITE_RESULT},
    {"resid_post", "hook_resid_post", 0, HS_SITE_RESID_POST},
    {"ln_final", "ln_final.hook_normalized", 0, HS_SITE_LN_FINAL},
    {"logits", "logits", 0, HS_SITE_LOGITS},
};

/* "q,k,pattern" → want[W_COUNT]; returns the bad name's start, or NULL. */
static const char *parse_what(const char *spec, int *want, char *bad, size_t cap)
{
    const char *p = spec;
    if (!*p) {
        snprintf(bad, cap, "%s", "");
        return bad;
    }
    while (*p) {
        size_t len = strcspn(p, ",");
        int k = -1;
        if (len == 3 && !strncmp(p, "all", 3)) {
            for (int i = 0; i < W_ALL; i++)
                want[i] = 1;
            k = W_COUNT;
        }
        for (int i = 0; i < W_COUNT && k < 0; i++)
            if (strlen(kinds[i].name) == len && !strncmp(p, kinds[i].name, len))
                k = i;
        if (k < 0) {
            snprintf(bad, cap, "%.*s", (int)(len < 64 ? len : 64), p);
            return bad;
        }
        if (k < W_COUNT)
            want[k] = 1;
        p += len;
        if (*p == ',' && !*++p) {
            snprintf(bad, cap, "%s", "");
            return bad;
        }
    }
    return NULL;
}

/* Layer l of kind k from a into buf as the file holds it, its shape into shape[*ndim]. */
static void layer_array(const hs_activations *a, const float *fnorm, int k, int l, float *buf,
                          size_t *shape, int *ndim)
{
    size_t n = (size_t)a->n, d = (size_t)a->d_model, H = (size_t)a->n_head, nd = n * d;
    size_t hnn = H * n * n, A = H * (size_t)a->d_head; /* Q and z: n_head d_head wide */
    size_t W = (size_t)a->qkv_width, kvd = (size_t)a->n_kv_head * (size_t)a->d_head;
    if (k <= W_V) { /* the Q, K or V block of the fused rows (pos, W): Q A wide, K and V
                     * n_kv_head * d_head each */
        const float *src = a->qkv + (size_t)l * n * W;
        size_t off = k == W_Q ? 0 : k == W_K ? A : A + kvd, width = k == W_Q ? A : kvd;
        for (size_t i = 0; i < n; i++)
            memcpy(buf + i * width, src + i * W + off, width * sizeof *buf);
    } else if (k == W_PATTERN || k == W_NORM) {
        memcpy(buf, a->pattern + (size_t)l * hnn, hnn * sizeof *buf);
        for (size_t h = 0; k == W_NORM && h < H; h++) /* a_ij ||f(x_j)|| */
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < n; j++)
                    buf[(h * n + i) * n + j] *= fnorm[((size_t)l * H + h) * n + j];
    } else if (k == W_Z) {
        memcpy(buf, a->z + (size_t)l * n * A, n * A * sizeof *buf);
    } else {
        const float *src = k == W_RESID ? a->resid_pre : k == W_ATTN ? a->attn_out : a->mlp_out;
        memcpy(buf, src + (size_t)l * nd, nd * sizeof *buf);
    }
    if (k == W_PATTERN || k == W_NORM) {
        shape[0] = H, shape[1] = n, shape[2] = n, *ndim = 3;
    } else if (k <= W_Z) { /* grouped-query models: K and V per KV head */
        shape[0] = n, shape[1] = k == W_K || k == W_V ? (size_t)a->n_kv_head : H;
        shape[2] = (size_t)a->d_head, *ndim = 3;
    } else {
        shape[0] = n, shape[1] = d, *ndim = 2;
    }
}

/* One manifest entry. */
static void manifest_add(cJSON *files, const char *name, const char *hook, int layer,
                         const size_t *shape, int ndim, const char *dtype)
{
    cJSON *e = cJSON_CreateObject(), *sh = cJSON_AddArrayToObject(e, "shape");
    cJSON_AddStringToObject(e, "file", name);
    cJSON_AddStringToObject(e, "hook", hook);
    if (layer >= 0)
        cJSON_AddNumberToObject(e, "layer", layer);
    cJSON_AddStringToObject(e, "dtype", dtype);
    for (int i = 0; i < ndim; i++)
        cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)shape[i]));
    cJSON_AddItemToArray(files, e);
}

/* Writes every file into dir and lists them (names relative to dir) in *names. */
static int write_all(const hs_model *m, const hs_encoding *enc, const hs_activations *a,
                     const float *fnorm, const int32_t *route, const dump_sites *ds,
                     const int *want, const char *dir,
                     char ***names, int *n_names)
{
    const hs_model_config *c = hs_model_config_of(m);
    hs_error err = {{0}};
    int n = a->n, rc = EXIT_FAIL, cap = c->n_layer * W_COUNT + 2;
    size_t H = (size_t)c->n_head, wide = (size_t)a->qkv_width; /* >= 3 A */
    size_t big = (size_t)n * (wide > 3 * (size_t)c->d_model ? wide : 3 * (size_t)c->d_model);
    if (H * (size_t)n * (size_t)n > big)
        big = H * (size_t)n * (size_t)n;
    float *buf = malloc(big * sizeof *buf);
    char *path = NULL, *json = NULL;
    unsigned char *bytes = NULL;
    size_t nbytes;
    *names = calloc((size_t)cap, sizeof **names);
    cJSON *man = cJSON_CreateObject();
    if (!buf || !*names || !man) {
        cli_error(C, "out of memory");
        goto done;
    }
    cJSON_AddStringToObject(man, "schema", "headscope.dump/1");
    cJSON_AddStringToObject(man, "model", hs_model_path(m));
    cJSON_AddStringToObject(man, "architecture", c->arch->name);
    cJSON_AddNumberToObject(man, "n_tokens", n);
    cJSON *ids = cJSON_AddArrayToObject(man, "ids"), *toks = cJSON_AddArrayToObject(man, "tokens");
    cJSON *types = cJSON_AddArrayToObject(man, "type_ids");
    for (int i = 0; i < n; i++) {
        const char *raw = hs_tokenizer_token(hs_model_tokenizer(m), enc->ids[i]);
        cJSON_AddItemToArray(ids, cJSON_CreateNumber(enc->ids[i]));
        cJSON_AddItemToArray(types, cJSON_CreateNumber(enc->type_ids ? enc->type_ids[i] : 0));
        cJSON_AddItemToArray(toks, cJSON_CreateString(raw ? raw : ""));
    }
    cJSON *files = cJSON_AddArrayToObject(man, "files");
    size_t shape[3] = {(size_t)n, 0, 0};
    if (hs_npy_encode(enc->ids, HS_NPY_I32, shape, 1, &bytes, &nbytes, &err) != HS_OK ||
        !(path = cli_path_join(dir, "input_ids.npy")) ||
        hs_file_write_atomic(path, bytes, nbytes, &err) != HS_OK) {
        cli_error(C, "%s", path ? err.msg : "out of memory");
        goto done;
    }
    free(path);
    path = NULL;
    manifest_add(files, "input_ids.npy", "input_ids", -1, shape, 1, "int32");
    (*names)[(*n_names)++] = strdup("input_ids.npy");
    for (int k = 0; k < W_COUNT; k++) {
        int site = kinds[k].site, per_layer = site < 0 || hs_site_get((hs_site)site)->per_layer;
        for (int l = 0; want[k] && l < (per_layer ? c->n_layer : 1); l++) {
            char name[128], hook[96];
            int ndim, K = c->arch->moe_top_k;
            const float *x = buf;
            if (k == W_ROUTER && !hs_moe_layer(c, l))
                continue;
            if (k == W_ROUTER) { /* (pos, top_k) int32 */
                shape[0] = (size_t)n;
                shape[1] = (size_t)K;
                ndim = 2;
            } else if (site < 0) {
                layer_array(a, fnorm, k, l, buf, shape, &ndim);
            } else { /* read through the hooks */
                x = ds->x[site] + (size_t)l * ds->size[site];
                ndim = ds->rank[site];
                memcpy(shape, ds->shape[site], sizeof shape);
            }
            if (per_layer)
                snprintf(hook, sizeof hook, "blocks.%d.%s", l, kinds[k].hook);
            else
                snprintf(hook, sizeof hook, "%s", kinds[k].hook);
            snprintf(name, sizeof name, "%s.npy", hook);
            free(bytes);
            bytes = NULL;
            if (!(path = cli_path_join(dir, name)) ||
                (k == W_ROUTER
                     ? hs_npy_encode(route + (size_t)l * n * K, HS_NPY_I32, shape, 2, &bytes,
                                     &nbytes, &err) ||
                           hs_file_write_atomic(path, bytes, nbytes, &err)
                     : hs_npy_write_f32(path, x, shape, ndim, &err)) != HS_OK) {
                cli_error(C, "%s", path ? err.msg : "out of memory");
                goto done;
            }
            free(path);
            path = NULL;
            manifest_add(files, name, hook, per_layer ? l : -1, shape, ndim,
                         k == W_ROUTER ? "int32" : "float32");
            if (!((*names)[(*n_names)++] = strdup(name))) {
                cli_error(C, "out of memory");
                goto done;
            }
        }
    }
    /* manifest.json last: its presence means a complete dump */
    (*names)[(*n_names)++] = strdup("manifest.json");
    json = cJSON_Print(man);
    if (!json || !(path = cli_path_join(dir, "manifest.json")) ||
        hs_file_write_atomic(path, json, strlen(json), &err) != HS_OK) {
        cli_error(C, "%s", json && path ? err.msg : "out of memory");
        goto done;
    }
    rc = EXIT_OK;
done:
    cJSON_Delete(man);
    free(json);
    free(path);
    free(bytes);
    free(buf);
    return rc;
}

int cmd_dump(int argc, char **argv)
{
    static const struct option opts[] = {
        {"text", required_argument, NULL, 't'},   {"file", required_argument, NULL, 'f'},
        {"text-pair", required_argument, NULL, 'p'}, {"truncate", no_argument, NULL, 'T'},
        {"what", required_argument, NULL, 'w'},   {"output", required_argument, NULL, 'o'},
        {"quiet", no_argument, NULL, 'q'},        {"help", no_argument, NULL, 'h'},
        {"no-clobber", no_argument, NULL, 'n'},   {NULL, 0, NULL, 0}};
    const char *text = NULL, *file = NULL, *pair = NULL, *out = NULL, *what = NULL;
    int truncate = 0, quiet = 0, no_clobber = 0, c, want[W_COUNT] = {0};
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":t:f:w:o:qh", opts, NULL)) != -1) {
        switch (c) {
        case 't': text = optarg; break;
        case 'f': file = optarg; break;
        case 'p': pair = optarg; break;
        case 'T': truncate = 1; break;
        case 'w': what = optarg; break;
        case 'o': out = optarg; break;
        case 'q': quiet = 1; break;
        case 'n': no_clobber = 1; break;
        case 'h': fputs(usage_text, stdout); return cli_finish_stdout(C);
        case ':':
        default: return cli_option_error(C, c, argc, argv, opts);
        }
    }
    if (optind != argc - 1)
        return cli_usage_error(C, optind >= argc ? "no MODEL given" : "more than one MODEL given");
    if (!out)
        return cli_usage_error(C, "no output folder (use -o OUTDIR)");
    if (!what)
        return cli_usage_error(C, "no activations asked for (use --what q,k,v,z,pattern,...)");
    char bad[80];
    if (parse_what(what, want, bad, sizeof bad))
        return cli_usage_error(C, "--what: '%s' is not one of q, k, v, z, pattern, resid_pre, "
                               "attn_out, mlp_out, norm, router, all, result, resid_post, ln_final, "
                               "logits", bad);
    unsigned capture = 0, sites = 0;
    for (int k = 0; k < W_COUNT; k++) {
        capture |= want[k] ? kinds[k].capture : 0;
        sites |= want[k] && kinds[k].site >= 0 ? HS_SITE_BIT(kinds[k].site) : 0;
    }

    cli_text t;
    int rc = cli_text_get(C, text, file, pair, &t);
    if (rc)
        return rc;
    cli_outdir od;
    int worker;
    rc = cli_outdir_open(C, out, CLI_OUTDIR_STAGED | (quiet ? CLI_OUTDIR_QUIET : 0) |
                                     (no_clobber ? CLI_OUTDIR_NO_CLOBBER : 0),
                         &od, &worker);
    if (!worker) {
        cli_text_free(&t);
        return rc;
    }
    hs_model *m = cli_model_load(C, argv[optind]);
    hs_encoding enc = {0};
    hs_activations *a = NULL;
    dump_sites ds;
    hs_error err = {{0}};
    memset(&ds, 0, sizeof ds);
    float *fnorm = NULL;
    int32_t *route = NULL;
    int router_asked = strstr(what, "router") != NULL; /* not through "all" */
    char **names = NULL;
    int n_names = 0;
    rc = EXIT_FAIL;
    if (!m || cli_encode(C, m, &t, truncate, 0, 0, &enc, NULL))
        goto done;
    const hs_model_config *cfg = hs_model_config_of(m);
    if (hs_activations_run(m, enc.ids, enc.type_ids, (int)enc.n, capture, &a, &err) != HS_OK) {
        cli_error(C, "%s", err.msg);
        goto done;
    }
    if (sites && dump_sites_run(C, m, enc.ids, enc.type_ids, (int)enc.n, sites, &ds))
        goto done;
    if (want[W_NORM]) {
        fnorm = malloc((size_t)cfg->n_layer * (size_t)cfg->n_head * enc.n * sizeof *fnorm);
        if (!fnorm || hs_norm_values(m, a, fnorm, &err) != HS_OK) {
            cli_error(C, "%s", fnorm ? err.msg : "out of memory");
            goto done;
        }
    }
    if (want[W_ROUTER] && cfg->arch->moe_experts > 0) {
        route = malloc((size_t)cfg->n_layer * enc.n * (size_t)cfg->arch->moe_top_k * sizeof *route);
        if (!route || hs_moe_routes(m, enc.ids, (int)enc.n, route, &err) != HS_OK) {
            cli_error(C, "%s", route ? err.msg : "out of memory");
            goto done;
        }
    } else if (want[W_ROUTER] && router_asked) {
        cli_error(C, "router: architecture '%s' has no mixture of experts", cfg->arch->name);
        goto done;
    }
    if ((rc = write_all(m, &enc, a, fnorm, route, &ds, want, od.stage, &names, &n_names)) != EXIT_OK)
        goto done;
    if ((rc = cli_outdir_commit(C, &od, (const char *const *)names, n_names)) != EXIT_OK)
        goto done;
    cli_stdout_after_commit();
    if (!quiet)
        printf("wrote %d files to %s (%d tokens, %d layers): see %s/manifest.json\n", n_names,
               cli_shown(out), (int)enc.n, cfg->n_layer, cli_shown(out));
    rc = cli_finish_stdout_committed(C, out, 0);
done:
    cli_outdir_close(&od);
    for (int i = 0; i < n_names; i++)
        free(names[i]);
    free(names);
    free(fnorm);
    free(route);
    hs_activations_free(a);
    dump_sites_free(&ds);
    hs_encoding_free(&enc);
    hs_model_free(m);
    cli_text_free(&t);
    return rc;
}
