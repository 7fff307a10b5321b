/* The copying circuit's token matrix W_U W_E (hs_composition_gram, analysis_internal.h):
 * composition.c's copying scores read it, blocks of the vocabulary at a time, without
 * converting either table whole. */
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis_internal.h"
#include "core/core.h"
#include "model/emb_stored.h"
#include "model/model_internal.h"

/* g += p over the rows of (d, d) (upper: the blocks on and above the diagonal alone) */
static void add_product(double *g, const float *p, int d, int upper)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < d; i++)
        for (int j = upper ? i : 0; j < d; j++)
            g[(size_t)i * d + j] += (double)p[(size_t)i * d + j];
}

/* g: (d, d) = dec^T wte over the vocabulary (dec: the decoder, (V, d)), the copying
 * circuit's W_U W_E before the final norm's scale, summed over blocks of chunk rows of both
 * tables in their order: each block's product in float (hs_sgemm_fixed, the rows taken from
 * the float32 tables or decoded from the stored ones into a buffer, the same values), added
 * to g in double. No table is converted whole (2.1 GB each at Llama-3-8B's shape), and the
 * bits are the same whichever way the tables are kept. Tied embeddings (dec is wte, GPT-2)
 * give a symmetric G: only the blocks on and above the diagonal are computed, in 256-row
 * bands (each band a product of its own shape, so its bits are fixed by the shape as any
 * other), and mirrored; the one table's blocks are of 2 chunk rows (the two buffers' memory).
 * On 2 cores with 8,192-row blocks: at d 2,048 and 3,072 the bands take 0.7 of the whole
 * product's time, at GPT-2's 768 about as long (64-row bands: 0.8 at 2,048, and at 768
 * from 1 to 3 times as long with 4,096-row blocks, the narrow products cut along K). */
hs_status hs_composition_gram(const hs_model *m, int chunk, double *g, hs_error *err)
{
    int d = m->cfg.d_model, V = m->cfg.vocab_size, tied = hs_model_decoder_is_wte(m);
    const int band = 256;
    size_t dd = (size_t)d * d;
    chunk = tied ? 2 * chunk : chunk;
    chunk = chunk < V ? chunk : V;
    /* p: one block's product (d, d); eb, db: its rows of each table (chunk, d) when stored
     * (pages never touched otherwise) */
    float *p = malloc(dd * sizeof *p), *eb = malloc((size_t)chunk * d * sizeof *eb);
    float *db = tied ? eb : malloc((size_t)chunk * d * sizeof *db);
    if (!p || !eb || !db) {
        free(p);
        free(eb);
        if (db != eb)
            free(db);
        return hs_fail(err, HS_E_NOMEM, "composition: out of memory");
    }
    memset(g, 0, dd * sizeof *g);
    for (int c0 = 0; c0 < V; c0 += chunk) {
        int rows = V - c0 < chunk ? V - c0 : chunk;
        const float *w = hs_model_wte_rows(m, c0, rows, eb);
        const float *dc = tied ? w : hs_model_decoder_rows(m, c0, rows, db);
        if (!tied)
            hs_sgemm_fixed(1, 0, d, d, rows, dc, d, w, d, p, d);
        for (int i0 = 0; tied && i0 < d; i0 += band)
            hs_sgemm_fixed(1, 0, d - i0 < band ? d - i0 : band, d - i0, rows, w + i0, d, w + i0,
                           d, p + (size_t)i0 * d + i0, d);
        add_product(g, p, d, tied);
    }
    for (int i = 0; tied && i < d; i++) /* the lower triangle from the upper */
        for (int j = 0; j < i; j++)
            g[(size_t)i * d + j] = g[(size_t)j * d + i];
    free(p);
    free(eb);
    if (db != eb)
        free(db);
    return HS_OK;
}
