/* Loss rows and spans (docs/metrics.md § Head importance): which positions' losses an
 * importance measure counts (an MLM loss's masked positions; a span of the next-token
 * loss's, "repeated" keeping the positions where an induction head can act: Olsson et al.
 * 2022 measure induction on the repeated half of a sequence). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "headscope/importance.h"
#include "importance/importance_internal.h"

/* A decimal int >= 0 from s up to end (exclusive); 0 on a bad one. */
static int parse_count(const char *s, const char *end, int *out)
{
    if (s == end || end - s > 9)
        return 0;
    long v = 0;
    for (const char *p = s; p < end; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        v = v * 10 + (*p - '0');
    }
    *out = (int)v;
    return 1;
}

hs_status hs_loss_span_parse(const char *s, hs_loss_span *out, hs_error *err)
{
    if (!s)
        return hs_fail(err, HS_E_ARG, "no loss span");
    if (!strcmp(s, "all") || !strcmp(s, "repeated")) {
        *out = (hs_loss_span){s[0] == 'a' ? HS_SPAN_ALL : HS_SPAN_REPEATED, 0, -1};
        return HS_OK;
    }
    const char *colon = strchr(s, ':');
    int a = 0, b = -1;
    if (!colon || !parse_count(s, colon, &a) ||
        (colon[1] && !parse_count(colon + 1, colon + strlen(colon), &b)))
        return hs_fail(err, HS_E_ARG, "loss span '%s' is not 'all', 'repeated', 'A:B' or 'A:' "
                       "(positions, 0-based)", s);
    if (b >= 0 && b <= a)
        return hs_fail(err, HS_E_ARG, "loss span '%s' is empty (B must be larger than A)", s);
    *out = (hs_loss_span){HS_SPAN_RANGE, a, b};
    return HS_OK;
}

const char *hs_loss_span_format(const hs_loss_span *s, char *buf, size_t cap)
{
    if (s->kind == HS_SPAN_RANGE && s->end >= 0)
        snprintf(buf, cap, "%d:%d", s->begin, s->end);
    else if (s->kind == HS_SPAN_RANGE)
        snprintf(buf, cap, "%d:", s->begin);
    else
        snprintf(buf, cap, "%s", s->kind == HS_SPAN_REPEATED ? "repeated" : "all");
    return buf;
}

int hs_loss_span_rows(const hs_loss_span *s, const int32_t *ids, int n, int32_t *rows)
{
    int k = 0;
    for (int i = 0; i + 1 < n; i++) {
        int keep = 1;
        if (s->kind == HS_SPAN_RANGE) {
            keep = i >= s->begin && (s->end < 0 || i < s->end);
        } else if (s->kind == HS_SPAN_REPEATED) {
            keep = 0;
            for (int j = 0; j < i && !keep; j++)
                keep = ids[j] == ids[i];
        }
        if (keep)
            rows[k++] = i;
    }
    return k;
}

int hs_loss_row_count(const hs_loss_input *in)
{
    return in->kind == HS_LOSS_MLM || (in->kind == HS_LOSS_LM && in->positions) ? in->n_pos
                                                                                 : in->n - 1;
}

void hs_loss_row_at(const hs_loss_input *in, int r, int32_t *row, int32_t *target)
{
    if (in->kind == HS_LOSS_MLM) {
        *row = in->positions[r];
        *target = in->targets[r];
    } else {
        *row = in->positions ? in->positions[r] : r;
        *target = in->ids[*row + 1];
    }
}

hs_status hs_loss_rows_check(const hs_model_config *c, const hs_loss_input *in, hs_error *err)
{
    if (in->kind == HS_LOSS_LM && in->positions) {
        if (in->n_pos < 1)
            return hs_fail(err, HS_E_INPUT, "the loss span holds no position");
        for (int k = 0; k < in->n_pos; k++)
            if (in->positions[k] < 0 || in->positions[k] > in->n - 2 ||
                (k > 0 && in->positions[k] <= in->positions[k - 1]))
                return hs_fail(err, HS_E_ARG, "loss: row %d (position %d) is not in increasing "
                               "order within 0..%d", k, (int)in->positions[k], in->n - 2);
        return HS_OK;
    }
    if (in->kind != HS_LOSS_MLM)
        return HS_OK;
    if (!c->has_lm_head)
        return hs_fail(err, HS_E_INPUT, "the model has no MLM head");
    if (in->n_pos < 1 || !in->positions || !in->targets)
        return hs_fail(err, HS_E_INPUT, "the MLM loss needs at least one masked position");
    for (int k = 0; k < in->n_pos; k++)
        if (in->positions[k] < 0 || in->positions[k] >= in->n || in->targets[k] < 0 ||
            in->targets[k] >= c->vocab_size)
            return hs_fail(err, HS_E_ARG, "loss: masked position %d out of range", k);
    return HS_OK;
}
