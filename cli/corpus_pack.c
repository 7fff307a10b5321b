/* analyze --corpus --pack-tokens N: records are read ahead and kept until the texts this
 * process will analyse reach N tokens; one packed pass (hs_forward_packed) then records all
 * their maps, and the kept records are dealt with in corpus order exactly as without packing
 * (digest, skips, checkpoints, progress), each analysis taking its text's maps from the
 * pack instead of a pass of its own (hs_analyze_run_maps). The loss, gradient and ablation
 * passes stay one text at a time. */
#include <stdlib.h>
#include <string.h>

#include "corpus_run.h"

#define PACK_MAX_TEXTS 256

typedef struct pack_item {
    long line;
    char *text, *pair; /* copies (pair NULL: none) */
    size_t len, pair_len;
    int analysed;      /* tokenised ahead: this process analyses it, enc holds its tokens */
    hs_encoding enc;
    hs_trace *maps;    /* its maps from the packed pass, or NULL */
} pack_item;

struct cli_pack {
    int budget;
    pack_item items[PACK_MAX_TEXTS];
    int count;
    size_t tokens; /* of the kept texts to analyse */
};

struct cli_pack *cli_pack_new(int budget)
{
    struct cli_pack *p = calloc(1, sizeof *p);
    if (p)
        p->budget = budget;
    return p;
}

static void item_free(pack_item *it)
{
    free(it->text);
    free(it->pair);
    hs_encoding_free(&it->enc);
    hs_trace_free(it->maps);
    memset(it, 0, sizeof *it);
}

void cli_pack_free(cli_corpus_run *r)
{
    if (!r->pack)
        return;
    for (int i = 0; i < r->pack->count; i++)
        item_free(&r->pack->items[i]);
    free(r->pack);
    r->pack = NULL;
}

/* Whether the record that will be the j-th selected one is analysed by this process (not in
 * the resumed checkpoint, this shard's). */
static int will_analyse(const cli_corpus_run *r, long j)
{
    if (j < r->resume.cp.position)
        return 0;
    return !(r->co->n_shards > 1 && j % r->co->n_shards != r->co->shard - 1);
}

typedef struct pack_obs {
    struct cli_pack *p;
    int *which; /* pass text t is item which[t] */
} pack_obs;

static int keep_maps(void *user, int layer, int text, const float *probs, int n_head, int n)
{
    pack_obs *o = user;
    hs_trace *t = o->p->items[o->which[text]].maps;
    size_t per = (size_t)n_head * (size_t)n * (size_t)n;
    memcpy(t->attn + (size_t)layer * per, probs, per * sizeof *probs);
    return 0;
}

/* The packed pass over the kept texts to analyse; on any failure no item keeps maps (each
 * text's analysis then runs its own pass, which says what went wrong). */
static void pack_pass(cli_corpus_run *r)
{
    struct cli_pack *p = r->pack;
    int k = 0;
    for (int i = 0; i < p->count; i++)
        k += p->items[i].analysed;
    if (k < 2) /* a text alone: its own pass, as without packing */
        return;
    int32_t *ids = malloc(p->tokens * sizeof *ids), *tt = malloc(p->tokens * sizeof *tt);
    int lens[PACK_MAX_TEXTS], which[PACK_MAX_TEXTS], ok = ids && tt;
    k = 0;
    size_t at = 0;
    for (int i = 0; i < p->count && ok; i++) {
        pack_item *it = &p->items[i];
        if (!it->analysed)
            continue;
        memcpy(ids + at, it->enc.ids, it->enc.n * sizeof *ids);
        for (size_t q = 0; q < it->enc.n; q++)
            tt[at + q] = it->enc.type_ids ? it->enc.type_ids[q] : 0;
        at += it->enc.n;
        lens[k] = (int)it->enc.n;
        which[k++] = i;
        ok = hs_trace_new(r->m, (int)it->enc.n, &it->maps, NULL) == HS_OK;
    }
    pack_obs o = {p, which};
    hs_packed_opts po = {.on_attn = keep_maps, .user = &o};
    if (ok)
        ok = hs_forward_packed(r->m, ids, tt, lens, k, &po, NULL, NULL) == HS_OK;
    for (int i = 0; i < p->count && !ok; i++) {
        hs_trace_free(p->items[i].maps);
        p->items[i].maps = NULL;
    }
    free(ids);
    free(tt);
}

int cli_pack_flush(cli_corpus_run *r)
{
    struct cli_pack *p = r->pack;
    int rc = 0;
    if (p->tokens > 0)
        pack_pass(r);
    for (int i = 0; i < p->count; i++) {
        pack_item *it = &p->items[i];
        if (!rc) {
            r->pack_maps = it->maps ? it->maps->attn : NULL;
            r->pack_n = it->maps ? it->maps->n : 0;
            rc = cli_corpus_selected(r, it->line, it->text, it->len, it->pair, it->pair_len);
            r->pack_maps = NULL;
            r->pack_n = 0;
        }
        item_free(it);
    }
    p->count = 0;
    p->tokens = 0;
    return rc;
}

int cli_pack_push(cli_corpus_run *r, long line, const char *text, size_t len, const char *pair,
                  size_t pair_len)
{
    struct cli_pack *p = r->pack;
    pack_item it = {.line = line, .len = len, .pair_len = pair_len};
    it.text = malloc(len + 1);
    it.pair = pair ? malloc(pair_len + 1) : NULL;
    if (!it.text || (pair && !it.pair)) {
        item_free(&it);
        cli_error(r->cmd, "out of memory");
        return EXIT_FAIL;
    }
    memcpy(it.text, text, len);
    it.text[len] = '\0';
    if (pair) {
        memcpy(it.pair, pair, pair_len);
        it.pair[pair_len] = '\0';
    }
    if (will_analyse(r, r->selected + p->count)) { /* tokenised now for the pass (again later
                                                       by the analysis, which says any skip) */
        int truncated = 0;
        r->pack_probe = 1;
        it.analysed = cli_corpus_encode(r, line, text, len, pair, pair_len, &it.enc, &truncated);
        r->pack_probe = 0;
    }
    int rc = 0;
    size_t n = it.analysed ? it.enc.n : 0;
    if (p->count == PACK_MAX_TEXTS || (n && p->tokens && p->tokens + n > (size_t)p->budget))
        rc = cli_pack_flush(r); /* the pack is full: its records first */
    if (rc) {
        item_free(&it);
        return rc;
    }
    p->items[p->count++] = it;
    p->tokens += n;
    return 0;
}
