/*
 * Test helper for tests/browser.sh: builds index.html from a report.json and,
 * optionally, the (n_layer, n_head, n, n) maps that `headscope attn` writes, picking
 * the maps of the report's heads in report order. Used while `headscope analyze`
 * does not write index.html itself, and to make pages without maps.
 *
 *     html_page REPORT.json [ATTN.npy] OUT.html
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "core/core.h"
#include "headscope/html.h"
#include "headscope/npy.h"

int main(int argc, char **argv)
{
    hs_error err = {{0}};
    char *json = NULL;
    size_t json_len = 0;
    hs_npy a = {0};
    float *maps = NULL;
    cJSON *root = NULL;
    int rc = 1, n_maps = 0, n = 0;
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: html_page REPORT.json [ATTN.npy] OUT.html\n");
        return 2;
    }
    const char *out = argv[argc - 1];
    if (hs_read_file(argv[1], (size_t)1 << 30, &json, &json_len, &err) != HS_OK)
        goto fail;
    if (argc == 4) {
        if (hs_npy_read(argv[2], &a, &err) != HS_OK)
            goto fail;
        if (a.dtype != HS_NPY_F32 || a.ndim != 4 || a.shape[2] != a.shape[3]) {
            snprintf(err.msg, sizeof err.msg, "%s: expected float32 (L, H, n, n)", argv[2]);
            goto fail;
        }
        root = cJSON_Parse(json);
        const cJSON *heads = cJSON_GetObjectItemCaseSensitive(root, "heads");
        if (!cJSON_IsArray(heads)) {
            snprintf(err.msg, sizeof err.msg, "%s: no heads array", argv[1]);
            goto fail;
        }
        n_maps = cJSON_GetArraySize(heads);
        n = (int)a.shape[2];
        size_t nn = (size_t)n * (size_t)n;
        maps = malloc((size_t)(n_maps > 0 ? n_maps : 1) * nn * sizeof *maps);
        if (!maps) {
            snprintf(err.msg, sizeof err.msg, "out of memory");
            goto fail;
        }
        int k = 0;
        const cJSON *h;
        cJSON_ArrayForEach(h, heads) {
            const cJSON *l = cJSON_GetObjectItemCaseSensitive(h, "layer");
            const cJSON *hh = cJSON_GetObjectItemCaseSensitive(h, "head");
            if (!cJSON_IsNumber(l) || !cJSON_IsNumber(hh) || l->valueint < 0 ||
                (size_t)l->valueint >= a.shape[0] || hh->valueint < 0 ||
                (size_t)hh->valueint >= a.shape[1]) {
                snprintf(err.msg, sizeof err.msg, "head %d: layer/head out of the maps' range", k);
                goto fail;
            }
            size_t at = ((size_t)l->valueint * a.shape[1] + (size_t)hh->valueint) * nn;
            memcpy(maps + (size_t)k * nn, (const float *)a.data + at, nn * sizeof *maps);
            k++;
        }
    }
    hs_html_input in = {.report_json = json, .attn = maps, .n_maps = n_maps, .n = n};
    if (hs_html_write(out, &in, &err) != HS_OK)
        goto fail;
    rc = 0;
fail:
    if (rc)
        fprintf(stderr, "html_page: %s\n", err.msg);
    cJSON_Delete(root);
    free(maps);
    hs_npy_free(&a);
    free(json);
    return rc;
}
