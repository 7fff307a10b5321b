/* hs-bench's command line (bench/bench.c's usage), read by bench_args_parse. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

int bench_args_parse(int argc, char **argv, bench_args *o)
{
    int in_family = 0, in_stored = 0;
    *o = (bench_args){.reps = 5, .script = "bench/torch_forward.py", .python = "/usr/bin/python3"};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            o->reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--headscope") && i + 1 < argc)
            o->headscope = argv[++i];
        else if (!strcmp(argv[i], "--torch") && i + 1 < argc)
            o->script = argv[++i];
        else if (!strcmp(argv[i], "--python") && i + 1 < argc)
            o->python = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            o->quick = 1;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            o->thread_list = argv[++i];
        else if (!strcmp(argv[i], "--t5") && i + 1 < argc)
            o->t5 = argv[++i];
        else if (!strcmp(argv[i], "--forward-only"))
            o->fwd_only = 1;
        else if (!strcmp(argv[i], "--packed-only"))
            o->packed_only = 1;
        else if (!strcmp(argv[i], "--patch-only"))
            o->patch_only = 1;
        else if (!strcmp(argv[i], "--no-torch"))
            o->script = NULL;
        else if (!strcmp(argv[i], "--breakdown"))
            o->breakdown = 1;
        else if (!strcmp(argv[i], "--family"))
            in_family = 1;
        else if (!strcmp(argv[i], "--stored"))
            in_stored = 1;
        else if (!strcmp(argv[i], "--stored-only"))
            o->stored_only = 1;
        else if (!strcmp(argv[i], "--big") && i + 1 < argc)
            o->big = argv[++i];
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
