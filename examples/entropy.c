/* Loads a model, tokenizes a text, runs the forward pass and prints one head's entropy.
 *   cc entropy.c $(pkg-config --cflags --libs headscope) -o entropy
 *   ./entropy MODEL "some text" LAYER HEAD */
#include <headscope.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 5) { fprintf(stderr, "usage: entropy MODEL TEXT LAYER HEAD\n"); return 2; }
    hs_error err = {{0}};
    hs_model *m = NULL;
    hs_encoding enc = {0};
    hs_trace *t = NULL;
    hs_entropy e;
    int rc = 1, layer = atoi(argv[3]), head = atoi(argv[4]);
    if (hs_model_load(argv[1], &m, &err) != HS_OK) goto done;
    const hs_model_config *c = hs_model_config_of(m);
    if (layer < 0 || layer >= c->n_layer || head < 0 || head >= c->n_head) { snprintf(err.msg, sizeof err.msg, "no head %d.%d", layer, head); goto done; }
    if (hs_tokenizer_encode(hs_model_tokenizer(m), argv[2], strlen(argv[2]), NULL, 0, &enc, &err) != HS_OK) goto done;
    int n = (int)enc.n;
    hs_forward_opts o = {.on_attn = hs_trace_observe};
    if (hs_trace_new(m, n, &t, &err) != HS_OK) goto done;
    o.user = t;
    if (hs_forward(m, enc.ids, enc.type_ids, n, &o, NULL, &err) != HS_OK) goto done;
    const float *map = t->attn + (size_t)(layer * c->n_head + head) * n * n; /* (n, n) */
    if (hs_entropy_compute(map, 1, n, hs_vis_from_causal(c->causal), NULL, &e, &err) != HS_OK) goto done;
    printf("headscope %s: head %d.%d, %d tokens: entropy %.4f nats\n", hs_version(), layer, head, n, e.nats);
    rc = 0;
done:
    if (rc) fprintf(stderr, "entropy: %s\n", err.msg);
    hs_trace_free(t), hs_encoding_free(&enc), hs_model_free(m);
    return rc;
}
