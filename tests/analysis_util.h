/* Helpers of the analysis suites (test_analysis.c, test_analysis_golden.c). */
#ifndef HEADSCOPE_ANALYSIS_UTIL_H
#define HEADSCOPE_ANALYSIS_UTIL_H

#include <math.h>
#include <stdint.h>

#include <criterion/criterion.h>

#include "headscope/analysis.h"

static inline void near(double got, double want, double tol, const char *what)
{
    cr_assert(fabs(got - want) <= tol, "%s: got %.17g, want %.17g (tol %g)", what, got, want, tol);
}

/* The token side of a detector pass with ids and a [SEP] id alone. */
static inline const hs_detect_seq *seq_of(const int32_t *ids, int32_t sep_id)
{
    static hs_detect_seq q;
    q = (hs_detect_seq){ids, -1, sep_id, NULL, NULL};
    return &q;
}

#endif
