/* The analyze option table (src/pipeline/options.c) read by both of its routes: the command
 * line (cli/analyze_args.c's parser, linked in) and the JSON options of hs_analyze_json.
 * Every row is set through both and the two option structs compared field by field; every
 * bounded row is given the values just outside its range, which both refuse with the same
 * message; then cases written by hand, with values whose meaning is known. The help text,
 * the description for the Python package and docs/analyze.md are checked against the table. */
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include <cJSON.h>

#include "../cli/cli.h"
#include "headscope/report.h"
#include "pipeline/options.h"
#include "testutil.h"

/* Runs f with fd (1 or 2) going to a temporary file; returns f's result, the output in out. */
static int captured(int fd, int (*f)(void *), void *arg, char *out, size_t cap)
{
    fflush(stdout);
    fflush(stderr);
    FILE *tmp = tmpfile();
    cr_assert_not_null(tmp);
    int saved = dup(fd);
    dup2(fileno(tmp), fd);
    int rc = f(arg);
    fflush(stdout);
    fflush(stderr);
    dup2(saved, fd);
    close(saved);
    rewind(tmp);
    size_t n = fread(out, 1, cap - 1, tmp);
    out[n] = 0;
    fclose(tmp);
    return rc;
}

typedef struct cli_call {
    int argc;
    char *argv[24];
    char store[24][128]; /* the arguments, writable as main's are */
    cli_analyze_args g;
} cli_call;

static int call_parse(void *p)
{
    cli_call *c = p;
    return cli_analyze_args_parse(c->argc, c->argv, &c->g);
}

/* `headscope analyze M -o O ARGS...`: the parser's result (-1: go on), *g, and stderr. */
static int cli_route(const char *const *args, int n, cli_analyze_args *g, char *err, size_t cap)
{
    static cli_call c;
    c.argc = 0;
    const char *base[] = {"analyze", "model", "-o", "out"};
    for (int i = 0; i < 4 + n; i++) {
        snprintf(c.store[c.argc], sizeof c.store[0], "%s", i < 4 ? base[i] : args[i - 4]);
        c.argv[c.argc] = c.store[c.argc];
        c.argc++;
    }
    c.argv[c.argc] = NULL;
    int rc = captured(2, call_parse, &c, err, cap);
    *g = c.g;
    return rc;
}

/* The shortest text that reads back as v. */
static void number_text(double v, char *buf, size_t cap)
{
    if (v == floor(v) && fabs(v) < 1e17) {
        snprintf(buf, cap, "%.0f", v);
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

static int whole(const hs_option *o) { return o->type == HS_OPT_INT || o->type == HS_OPT_SEED; }
static int bounded(const hs_option *o) { return whole(o) || o->type == HS_OPT_NUM; }

/* The layers a spec marks among 8. */
static unsigned marks(const char *spec)
{
    unsigned char on[8] = {0};
    int bad;
    if (!spec)
        return 0xff;
    cr_assert_eq(hs_layers_mark(spec, 8, on, &bad), 0, "%s", spec);
    unsigned m = 0;
    for (int l = 0; l < 8; l++)
        m |= (unsigned)on[l] << l;
    return m;
}

/* Row o's field (and its second field) the same in a and b. */
static int same_field(const hs_option *o, const hs_analyze_args *a, const hs_analyze_args *b)
{
    const char *pa = (const char *)a + o->offset, *pb = (const char *)b + o->offset;
    if (o->type == HS_OPT_TEXT) {
        const char *sa = *(const char *const *)pa, *sb = *(const char *const *)pb;
        return (!sa && !sb) || (sa && sb && !strcmp(sa, sb));
    }
    if (o->type == HS_OPT_LAYERS)
        return marks(*(const char *const *)pa) == marks(*(const char *const *)pb);
    return !memcmp(pa, pb, o->size) &&
           (!o->aux_size || !memcmp((const char *)a + o->aux, (const char *)b + o->aux,
                                    o->aux_size));
}

/* Every row's field the same in both routes' results (a row off by default on the JSON
 * route only where the other route's value is its default). */
static void assert_same(const hs_analyze_args *cli, const hs_analyze_args *js, const char *what)
{
    for (int i = 0; i < hs_option_count; i++) {
        const hs_option *o = &hs_options[i];
        if (o->json_off && *(const int *)((const char *)js + o->offset) == 0 &&
            *(const int *)((const char *)cli + o->offset) == (int)o->def)
            continue;
        cr_assert(same_field(o, cli, js), "%s: field of '%s' differs between the routes", what,
                  o->json);
    }
}

/* The command-line arguments and the JSON object that set row o to its k-th sample value;
 * 0 when there is no k-th. */
static int sample(const hs_option *o, int k, char *text, char *json, size_t cap, size_t jcap)
{
    switch (o->type) {
    case HS_OPT_BOOL:
        if (k > 0)
            return 0;
        snprintf(json, jcap, "{\"%s\": %s}", o->json, o->cli_value ? "true" : "false");
        text[0] = 0;
        return 1;
    case HS_OPT_INT:
    case HS_OPT_SEED:
    case HS_OPT_NUM: { /* lo (where it is in the range), hi, and between */
        double v = k == 0   ? (o->lo_open ? o->hi : o->lo)
                   : k == 1 ? o->hi
                            : o->lo + (o->hi - o->lo) * 0.3;
        if (k > 2)
            return 0;
        if (whole(o))
            v = floor(v);
        number_text(v, text, cap);
        snprintf(json, jcap, "{\"%s\": %s}", o->json, text);
        return 1;
    }
    case HS_OPT_ENUM:
        if (!o->names[k])
            return 0;
        snprintf(text, cap, "%s", o->names[k]);
        snprintf(json, jcap, "{\"%s\": \"%s\"}", o->json, o->names[k]);
        return 1;
    default:
        if (k > 0)
            return 0;
        snprintf(text, cap, "%s", o->example);
        snprintf(json, jcap, "{\"%s\": %s}", o->json, o->example_json);
        return 1;
    }
}

Test(options, every_row_reads_the_same_from_both_routes)
{
    int checked = 0;
    for (int i = 0; i < hs_option_count; i++) {
        const hs_option *o = &hs_options[i];
        cr_assert(o->cli || o->json);
        if (hs_option_routes(o) != (HS_ROUTE_CLI | HS_ROUTE_JSON))
            continue;
        char text[128], json[320], name[64], err[1024];
        snprintf(name, sizeof name, "--%s", o->cli);
        int changed = 0;
        for (int k = 0; sample(o, k, text, json, sizeof text, sizeof json); k++) {
            const char *args[] = {name, text};
            cli_analyze_args g;
            int rc = cli_route(args, o->type == HS_OPT_BOOL ? 1 : 2, &g, err, sizeof err);
            cr_assert_eq(rc, -1, "%s %s: %s", name, text, err);
            hs_analyze_args js;
            hs_error e = {{0}};
            cr_assert_eq(hs_analyze_args_from_json(json, &js, &e), HS_OK, "%s: %s", json, e.msg);
            assert_same(&g.opt, &js, json);
            hs_analyze_args def;
            hs_analyze_args_default(&def);
            changed |= !same_field(o, &g.opt, &def);
            hs_analyze_args_free(&js);
            checked++;
        }
        /* some sample moves the field off its default, so the comparison can fail */
        cr_assert(changed, "no sample of '%s' changes its field", o->json);
    }
    cr_assert_gt(checked, hs_option_count);
}

/* A value just outside [lo, hi] on side 0 (below) or 1 (above). */
static double outside(const hs_option *o, int side)
{
    if (side == 0)
        return o->lo_open ? o->lo : whole(o) ? o->lo - 1 : nextafter(o->lo, -INFINITY);
    return whole(o) ? o->hi + 1 : nextafter(o->hi, INFINITY);
}

Test(options, values_just_outside_the_range_are_refused_alike)
{
    int checked = 0;
    for (int i = 0; i < hs_option_count; i++) {
        const hs_option *o = &hs_options[i];
        if (!bounded(o) || hs_option_routes(o) != (HS_ROUTE_CLI | HS_ROUTE_JSON))
            continue;
        for (int side = 0; side < 2; side++) {
            char text[64], json[128], name[64], err[1024], range[96], want[512];
            number_text(outside(o, side), text, sizeof text);
            snprintf(json, sizeof json, "{\"%s\": %s}", o->json, text);
            snprintf(name, sizeof name, "--%s", o->cli);
            hs_option_range(o, range, sizeof range);
            const char *args[] = {name, text};
            cli_analyze_args g;
            cr_assert_eq(cli_route(args, 2, &g, err, sizeof err), EXIT_USAGE, "%s %s", name, text);
            snprintf(want, sizeof want, "headscope: analyze: --%s '%s' is not %s\n", o->cli, text,
                     range);
            cr_assert_eq(strncmp(err, want, strlen(want)), 0, "got '%s', want '%s'", err, want);
            hs_analyze_args js;
            hs_error e = {{0}};
            cr_assert_eq(hs_analyze_args_from_json(json, &js, &e), HS_E_ARG, "%s", json);
            snprintf(want, sizeof want, "option '%s': '%s' is not %s", o->json, text, range);
            cr_assert_str_eq(e.msg, want);
            hs_analyze_args_free(&js);
            checked++;
        }
    }
    cr_assert_geq(checked, 2 * 10); /* ten bounded options today */
}

/* The five drifts of issue 35 (the JSON options took these values, the command line refused
 * them), each now one range, and the open end of --prune-round: the command line's message
 * line and the JSON message, written out. */
static const struct {
    const char *cli, *value, *json, *want_cli, *want_json;
} drifted[] = {
    {"--cluster-threshold", "3", "{\"cluster_threshold\": 3}",
     "headscope: analyze: --cluster-threshold '3' is not a number in [0, 2]",
     "option 'cluster_threshold': '3' is not a number in [0, 2]"},
    {"--prune-tol", "2e6", "{\"prune_tol\": 2e6}",
     "headscope: analyze: --prune-tol '2e6' is not a number in [0, 10^6]",
     "option 'prune_tol': '2000000' is not a number in [0, 10^6]"},
    {"--prune-stop", "1000001", "{\"prune_stop\": 1000001}",
     "headscope: analyze: --prune-stop '1000001' is not a number in [0, 10^6]",
     "option 'prune_stop': '1000001' is not a number in [0, 10^6]"},
    {"--probe-len", "5000", "{\"probe_half_len\": 5000}",
     "headscope: analyze: --probe-len '5000' is not a whole number in [1, 4096]",
     "option 'probe_half_len': '5000' is not a whole number in [1, 4096]"},
    {"--probe-seed", "2147483648", "{\"probe_seed\": 2147483648}",
     "headscope: analyze: --probe-seed '2147483648' is not a whole number in [0, 2^31)",
     "option 'probe_seed': '2147483648' is not a whole number in [0, 2^31)"},
    {"--resample-seed", "4294967296", "{\"resample_seed\": 4294967296}",
     "headscope: analyze: --resample-seed '4294967296' is not a whole number in [0, 2^31)",
     "option 'resample_seed': '4294967296' is not a whole number in [0, 2^31)"},
    {"--prune-round", "0", "{\"prune_round\": 0}",
     "headscope: analyze: --prune-round '0' is not a number in (0, 1]",
     "option 'prune_round': '0' is not a number in (0, 1]"},
};

Test(options, the_drifted_ranges_are_one_range)
{
    for (size_t i = 0; i < sizeof drifted / sizeof drifted[0]; i++) {
        const char *args[] = {drifted[i].cli, drifted[i].value};
        cli_analyze_args g;
        char err[1024];
        cr_assert_eq(cli_route(args, 2, &g, err, sizeof err), EXIT_USAGE);
        char *nl = strchr(err, '\n');
        cr_assert_not_null(nl);
        *nl = 0;
        cr_assert_str_eq(err, drifted[i].want_cli);
        hs_analyze_args js;
        hs_error e = {{0}};
        cr_assert_eq(hs_analyze_args_from_json(drifted[i].json, &js, &e), HS_E_ARG);
        cr_assert_str_eq(e.msg, drifted[i].want_json);
        hs_analyze_args_free(&js);
    }
}

/* Values whose meaning is known, read into the fields hs_analyze_run reads. */
Test(options, known_values_set_the_known_fields)
{
    const char *args[] = {"--similarity", "js", "--no-ablation", "--cluster-threshold", "2",
                          "--probe-ablation", "none", "--label-thresholds", "self=0.6,sink=0.7",
                          "--loss-span", "3:", "--prune-method", "greedy", "--layers", "0,2-3"};
    cli_analyze_args g;
    char err[1024];
    cr_assert_eq(cli_route(args, 15, &g, err, sizeof err), -1, "%s", err);
    hs_analyze_args js;
    hs_error e = {{0}};
    cr_assert_eq(hs_analyze_args_from_json(
                     "{\"similarity\": \"js\", \"ablation\": false, \"cluster_threshold\": 2, "
                     "\"probe_ablation_kind\": \"none\", \"label_thresholds\": "
                     "\"self=0.6,sink=0.7\", \"loss_span\": \"3:\", \"prune_method\": \"greedy\", "
                     "\"layers\": [0, 2, 3], \"hash_files\": true}", &js, &e), HS_OK, "%s", e.msg);
    const hs_analyze_args *both[] = {&g.opt, &js};
    for (int r = 0; r < 2; r++) {
        const hs_analyze_opts *o = &both[r]->ao;
        cr_assert_eq(o->similarity, HS_SIM_JS);
        cr_assert_eq(o->ablation, 0);
        cr_assert_eq(o->cluster_threshold, 2.0);
        cr_assert_eq(o->probe_ablation, 0);
        cr_assert_eq(o->probe_ablation_kind, HS_ABLATION_MEAN); /* the default, kept */
        cr_assert_eq(o->label_thresholds[HS_LABEL_SELF], 0.6);
        cr_assert_eq(o->label_thresholds[HS_LABEL_IND], 0.3); /* metrics.md's default */
        cr_assert_eq(o->sink_threshold, 0.7);
        cr_assert_eq(o->loss_span.kind, HS_SPAN_RANGE);
        cr_assert_eq(o->loss_span.begin, 3);
        cr_assert_eq(o->loss_span.end, -1);
        cr_assert_eq(o->prune_method, HS_PRUNE_GREEDY);
        cr_assert_eq(o->hash_files, 1);
        cr_assert_eq(marks(both[r]->layers), 0x0du); /* layers 0, 2 and 3 */
    }
    hs_analyze_args_free(&js);
}

/* The table's default column is the library's default (hs_analyze_opts_default), and no
 * option given on the command line leaves every field at it; JSON differs in hash_files. */
Test(options, defaults_are_the_library_defaults)
{
    cli_analyze_args g;
    char err[1024];
    cr_assert_eq(cli_route(NULL, 0, &g, err, sizeof err), -1, "%s", err);
    hs_analyze_args def, js;
    hs_analyze_args_default(&def);
    hs_error e = {{0}};
    cr_assert_eq(hs_analyze_args_from_json(NULL, &js, &e), HS_OK);
    for (int i = 0; i < hs_option_count; i++) {
        const hs_option *o = &hs_options[i];
        cr_assert(same_field(o, &g.opt, &def), "%s", o->json);
        const char *p = (const char *)&def + o->offset;
        double v = o->type == HS_OPT_NUM    ? *(const double *)p
                   : o->type == HS_OPT_SEED ? (double)*(const uint64_t *)p
                   : o->type == HS_OPT_BOOL || o->type == HS_OPT_INT || o->type == HS_OPT_ENUM
                       ? *(const int *)p
                       : 0;
        cr_assert_eq(v, o->def, "default of '%s': the library's %g, the table's %g", o->json, v,
                     o->def);
        if (o->json_off)
            cr_assert_eq(*(const int *)((const char *)&js + o->offset), 0);
        else
            cr_assert(same_field(o, &js, &def), "%s", o->json);
    }
    cr_assert_eq(def.ao.hash_files, 1);
    cr_assert_eq(js.ao.hash_files, 0);
}

Test(options, names_and_keys_are_unique_and_refused_when_unknown)
{
    for (int i = 0; i < hs_option_count; i++)
        for (int j = 0; j < i; j++) {
            const hs_option *a = &hs_options[i], *b = &hs_options[j];
            cr_assert(!a->cli || !b->cli || strcmp(a->cli, b->cli), "%s twice", a->cli);
            cr_assert(!a->json || !b->json || strcmp(a->json, b->json), "%s twice", a->json);
        }
    /* a JSON-only row has no command-line option, and the reverse */
    const hs_option *probe = hs_option_by_json("probe");
    cr_assert_not_null(probe);
    cr_assert_eq(hs_option_routes(probe), HS_ROUTE_JSON);
    const char *args[] = {"--probe"};
    cli_analyze_args g;
    char err[1024];
    cr_assert_eq(cli_route(args, 1, &g, err, sizeof err), EXIT_USAGE);
    cr_assert(strstr(err, "unknown option '--probe'"), "%s", err);
}

static int call_help(void *p)
{
    (void)p;
    static char a0[] = "analyze", a1[] = "--help";
    char *argv[] = {a0, a1, NULL};
    cli_analyze_args g;
    return cli_analyze_args_parse(2, argv, &g);
}

/* --help (and so the man page, man/mkman.sh) has each row's line, default and range. */
Test(options, help_lists_every_row)
{
    static char out[32768];
    cr_assert_eq(captured(1, call_help, NULL, out, sizeof out), 0);
    /* the wrapped help lines joined */
    for (char *p = out; (p = strstr(p, "\n                             ")); p++)
        memmove(p, p + 29, strlen(p + 29) + 1), *p = ' ';
    for (int i = 0; i < hs_option_count; i++) {
        const hs_option *o = &hs_options[i];
        if (!o->cli)
            continue;
        char line[128], d[64];
        snprintf(line, sizeof line, "\n      --%s%s%s ", o->cli, o->metavar ? " " : "",
                 o->metavar ? o->metavar : "");
        const char *at = strstr(out, line);
        cr_assert_not_null(at, "no help line for --%s", o->cli);
        if (bounded(o) || o->type == HS_OPT_ENUM) {
            char want[96];
            snprintf(want, sizeof want, "default %s", hs_option_default(o, 0, d, sizeof d));
            const char *next = strstr(at + 1, "\n      --");
            const char *hit = strstr(at, want);
            cr_assert(hit && (!next || hit < next), "--%s: no '%s'", o->cli, want);
        }
    }
    cr_assert(strstr(out, "default 0.5, in [0, 2]"), "cluster threshold's range");
}

/* The description the Python package's docstring is written from. */
Test(options, description_has_every_json_row)
{
    char *s = hs_analyze_options_json();
    cr_assert_not_null(s);
    cJSON *j = cJSON_Parse(s);
    hs_free(s);
    cr_assert(cJSON_IsArray(j));
    int n = 0;
    for (int i = 0; i < hs_option_count; i++)
        n += hs_options[i].json != NULL;
    cr_assert_eq(cJSON_GetArraySize(j), n);
    const cJSON *e;
    cJSON_ArrayForEach(e, j) {
        const char *key = cJSON_GetStringValue(cJSON_GetObjectItem(e, "key"));
        cr_assert_not_null(hs_option_by_json(key));
        if (!strcmp(key, "cluster_threshold")) {
            cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(e, "valid")),
                             "a number in [0, 2]");
            cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(e, "default")), "0.5");
        }
        if (!strcmp(key, "hash_files"))
            cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(e, "default")), "false");
    }
    cJSON_Delete(j);
}

/* docs/analyze.md's option table: a row for each option, with the table's range. */
Test(options, the_documentation_states_each_range)
{
    size_t len;
    char *doc = tu_slurp("docs/analyze.md", &len);
    cr_assert_not_null(doc);
    for (int i = 0; i < hs_option_count; i++) {
        const hs_option *o = &hs_options[i];
        if (!o->cli)
            continue;
        char row[96], range[96];
        snprintf(row, sizeof row, "\n| `--%s", o->cli);
        const char *at = strstr(doc, row);
        cr_assert_not_null(at, "docs/analyze.md has no row for --%s", o->cli);
        if (!bounded(o))
            continue;
        hs_option_range(o, range, sizeof range);
        const char *in = strstr(range, " in ") + 4, *end = strchr(at + 1, '\n');
        const char *hit = strstr(at, in);
        cr_assert(hit && hit < end, "docs/analyze.md: --%s's row lacks '%s'", o->cli, in);
    }
    free(doc);
}

/* Layer numbers are bounded before they are narrowed to int (issue 41: 4294967296 was layer
 * 0, and 0,2147483648 dropped its second layer); a layer past the model is named later. */
Test(options, layer_numbers_do_not_wrap)
{
    static const char *const bad[] = {"4294967296", "0,2147483648", "1048576", "1-", "0,", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[] = {"--layers", bad[i]};
        cli_analyze_args g;
        char err[1024], want[256];
        cr_assert_eq(cli_route(args, 2, &g, err, sizeof err), EXIT_USAGE, "%s", bad[i]);
        snprintf(want, sizeof want, "headscope: analyze: --layers '%s' is not a list of layer "
                 "numbers below 2^20", bad[i]);
        cr_assert_eq(strncmp(err, want, strlen(want)), 0, "%s", err);
    }
    hs_analyze_args js;
    hs_error e = {{0}};
    cr_assert_eq(hs_analyze_args_from_json("{\"layers\": [0, 4294967296]}", &js, &e), HS_E_ARG);
    cr_assert_str_eq(e.msg, "option 'layers': expected a list of layer numbers");
    hs_analyze_args_free(&js);
    int bad_layer;
    unsigned char on[4] = {0};
    cr_assert_eq(hs_layers_mark("1,3-9", 4, on, &bad_layer), 0);
    cr_assert_eq(bad_layer, 4);
    cr_assert(!on[0] && on[1] && !on[2] && on[3]);
}
