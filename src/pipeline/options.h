/*
 * src/pipeline/options.h — the options of an analysis as one table (options.c): for each,
 * its command-line name (`headscope analyze --NAME`, cli/analyze_args.c), its JSON key
 * (hs_analyze_json, the Python package's keyword arguments), its type, range, default,
 * help text and the field it fills. Both routes parse through the table, so an option has
 * one range and one message for a value outside it; the help text (and so the man page,
 * man/mkman.sh) and the Python docstring (hs_analyze_options_json) are written from it.
 * Private to the library and the command-line tool.
 *
 * The command's own options (the input text, the output folder, the pictures, corpus
 * mode) are not rows: they fill no analysis option, and hs_analyze_json takes texts, not
 * files. They stay in cli/analyze_args.c.
 */
#ifndef HEADSCOPE_OPTIONS_H
#define HEADSCOPE_OPTIONS_H

#include <stddef.h>

#include "headscope/report.h"

/* What the table fills: the analysis options and how the text is read. */
typedef struct hs_analyze_args {
    hs_analyze_opts ao;
    int truncate;          /* keep the first n_ctx tokens of a longer text */
    const char *text_pair; /* the second segment, NULL when none */
    const char *layers;    /* "0,2-3" (checked by hs_layers_check), NULL: every layer */
    char *own_pair, *own_layers; /* the JSON route's copies behind the two above */
} hs_analyze_args;

/* Defaults: hs_analyze_opts_default, the rest 0 / NULL. */
void hs_analyze_args_default(hs_analyze_args *a);
/* Frees the owned copies (not a itself). */
void hs_analyze_args_free(hs_analyze_args *a);

typedef enum hs_opt_type {
    HS_OPT_BOOL,   /* int 0/1. JSON true/false; command line: a flag storing cli_value */
    HS_OPT_INT,    /* int, a whole number in [lo, hi] */
    HS_OPT_SEED,   /* uint64_t, a whole number in [lo, hi] */
    HS_OPT_NUM,    /* double in [lo, hi], or (lo, hi] with lo_open */
    HS_OPT_ENUM,   /* an enum (int-sized): one of names, storing values[i]; a negative
                      value stores nothing there and 0 in the int at aux ("none") */
    HS_OPT_TEXT,   /* const char *, any text */
    HS_OPT_LAYERS, /* const char * "0,2-3"; JSON: a list of layer numbers */
    HS_OPT_SPEC    /* a text read by parse (label thresholds, loss span) */
} hs_opt_type;

/* Routes an option exists on. */
#define HS_ROUTE_CLI 1
#define HS_ROUTE_JSON 2

/* Layer numbers are below this (before any model is known). */
#define HS_LAYERS_MAX (1 << 20)

typedef struct hs_option {
    const char *cli;   /* long option without "--"; NULL: JSON only */
    const char *json;  /* JSON key; NULL: command line only */
    hs_opt_type type;
    size_t offset;     /* of the field in hs_analyze_args */
    size_t size;       /* of the field */
    size_t aux;        /* ENUM with "none", SPEC with a second field: its offset */
    size_t aux_size;   /* ... and size (0: none) */
    double lo, hi;     /* INT, SEED, NUM */
    int lo_open;       /* NUM: lo itself is outside */
    double def;        /* the default (BOOL, INT, SEED, NUM; ENUM: the value) */
    int json_off;      /* BOOL: off by default on the JSON route (hash_files) */
    int cli_value;     /* BOOL: the value the command-line flag stores */
    const char *const *names; /* ENUM: NULL-terminated */
    const int *values;        /* ENUM: the value of each name */
    hs_status (*parse)(const char *s, hs_analyze_args *a, hs_error *err); /* SPEC */
    const char *metavar; /* the value in the help ("X", "N", "KIND") */
    const char *help;
    const char *valid;    /* TEXT, LAYERS, SPEC: what a valid value is */
    const char *def_text; /* TEXT, LAYERS, SPEC: the default in words (NULL: none) */
    const char *example, *example_json; /* TEXT, LAYERS, SPEC: a valid value (tests) */
} hs_option;

extern const hs_option hs_options[];
extern const int hs_option_count;

/* The routes an option exists on (HS_ROUTE_*). */
int hs_option_routes(const hs_option *o);
/* The row of a command-line name (without "--") or of a JSON key; NULL when none. */
const hs_option *hs_option_by_cli(const char *name);
const hs_option *hs_option_by_json(const char *key);

/* What a valid value is, as the messages say it: "a number in [0, 2]", "a whole number in
 * [0, 2^31)", "pearson or js", into buf; returns buf. */
const char *hs_option_range(const hs_option *o, char *buf, size_t cap);

/* v as a message quotes it: a whole number in digits ("5000"), else the shortest text that
 * reads back as v ("2.0000000000000004"). */
void hs_option_number_text(double v, char *buf, size_t cap);

/* The default as the help says it ("0.5", "pearson", "on"), into buf; returns buf. */
const char *hs_option_default(const hs_option *o, int json, char *buf, size_t cap);

/* Sets the option from its command-line text (BOOL: s is not read). HS_E_ARG with a
 * message that does not name the option: "'3' is not a number in [0, 2]" (the caller
 * puts its route's name in front: hs_option_cli_message). */
hs_status hs_option_set_text(const hs_option *o, const char *s, hs_analyze_args *a,
                             hs_error *err);

/* "--NAME 'v' is not ..." (or "--NAME: ..." for a SPEC's own message) from err into buf:
 * the command line's one-line message. Returns buf. */
const char *hs_option_cli_message(const hs_option *o, const hs_error *err, char *buf,
                                  size_t cap);

/* Reads a JSON object of options (NULL or "": none) into *a, from the defaults of the JSON
 * route (hash_files off). HS_E_ARG: "unknown option 'k'", "option 'k' has a bad value" (a
 * value of the wrong JSON type or name), "option 'k': '5000' is not a whole number in
 * [1, 4096]" (outside the range), as the command line says it; HS_E_FORMAT for bad JSON.
 * Free with hs_analyze_args_free, also after a failure. */
hs_status hs_analyze_args_from_json(const char *options, hs_analyze_args *a, hs_error *err);

/* Checks a layer list "0,2-3" (numbers below HS_LAYERS_MAX, ranges increasing). 0 or -1. */
int hs_layers_check(const char *spec);
/* Marks spec's layers in on: (n_layer) (NULL: only checks). Returns -1 on a bad spec,
 * else 0 with *bad_layer the first listed layer >= n_layer, or -1 when none. */
int hs_layers_mark(const char *spec, int n_layer, unsigned char *on, int *bad_layer);

/* The help lines of every row with a command-line name, in table order, as
 * `headscope analyze --help` prints them (wrapped at 92 columns); malloc'd, NULL when out
 * of memory. */
char *hs_options_help(void);

#endif
