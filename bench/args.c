/* hs-bench's command line (bench/bench.c's usage), read by bench_args_parse. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* Where arg stands in names (n of them), or -1. */
static int name_index(const char *arg, const char *const *names, int n)
{
    for (int k = 0; k < n; k++)
        if (!strcmp(arg, names[k]))
            return k;
    return -1;
}

int bench_args_parse(int argc, char **argv, bench_args *o)
{
    int in_family = 0, in_stored = 0;
    *o = (bench_args){.reps = 5, .script = "bench/torch_forward.py", .python = "/usr/bin/python3"};
    /* the options that take the argument after them (--reps: read by atoi), the switches
     * that set a flag */
    static const char *const valued[] = {"--reps", "--headscope", "--torch", "--python",
                                         "--threads", "--t5", "--big"};
    const char **value_of[] = {NULL, &o->headscope, &o->script, &o->python, &o->thread_list,
                               &o->t5, &o->big};
    static const char *const switches[] = {"--quick", "--forward-only", "--packed-only",
                                           "--patch-only", "--breakdown", "--family",
                                           "--stored", "--stored-only"};
    int *flag_of[] = {&o->quick, &o->fwd_only, &o->packed_only, &o->patch_only, &o->breakdown,
                      &in_family, &in_stored, &o->stored_only};
    int n_valued = (int)(sizeof valued / sizeof *valued);
    int n_switches = (int)(sizeof switches / sizeof *switches);
    for (int i = 1; i < argc; i++) {
        int v = i + 1 < argc ? name_index(argv[i], valued, n_valued) : -1;
        int s = name_index(argv[i], switches, n_switches);
        if (v == 0)
            o->reps = atoi(argv[++i]);
        else if (v > 0)
            *value_of[v] = argv[++i];
        else if (s >= 0)
            *flag_of[s] = 1;
        else if (!strcmp(argv[i], "--no-torch"))
            o->script = NULL;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: hs-bench [MODEL_DIR...] [--family MODEL_DIR...] [--stored GGUF...] [--reps N] [--quick]\n"
                   "                [--headscope PATH] [--torch SCRIPT] [--python PATH] [--patch-only] "
                   "[--no-torch]\n"
                   "                [--threads LIST] [--breakdown] [--forward-only] [--t5 DIR]\n"
                   "                [--packed-only] [--stored-only] [--big GGUF]\n"
                   "The engine benchmark: sgemm reference, the forward pass recording every map "
                   "against\nPyTorch, analyze in forward-pass equivalents, peak memory, corpus "
                   "throughput.\ndocs/bench.md explains every option and number.\n");
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            fprintf(stderr, "hs-bench: unknown option '%s' (hs-bench --help)\n", argv[i]);
            return 2;
        } else if (in_stored) {
            if (o->n_stored < BENCH_MAX_MODELS)
                o->stored[o->n_stored++] = argv[i];
        } else if (o->n_models < BENCH_MAX_MODELS)
            o->family[o->n_models] = in_family, o->paths[o->n_models++] = argv[i];
    }
    return -1;
}
