/* Streaming statistics for corpus mode: Welford's running mean and variance, a weighted
 * mean, Student's t quantile for 95% confidence intervals, and reservoir sampling. */
#include <math.h>
#include <stdint.h>

#include "core/core.h"
#include "headscope/corpus.h"

void hs_stat_add(hs_stat *s, double x, double w)
{
    if (!isfinite(x))
        return;
    s->n++;
    double d = x - s->mean;
    s->mean += d / (double)s->n;
    s->m2 += d * (x - s->mean);
    if (w > 0 && isfinite(w)) {
        s->wsum += w;
        s->wmean += (w / s->wsum) * (x - s->wmean);
    }
}

void hs_stat_merge(hs_stat *a, const hs_stat *b)
{
    if (b->n > 0) {
        if (a->n == 0) {
            a->n = b->n;
            a->mean = b->mean;
            a->m2 = b->m2;
        } else {
            double na = (double)a->n, nb = (double)b->n, n = na + nb, d = b->mean - a->mean;
            a->mean += d * (nb / n);
            a->m2 += b->m2 + d * d * (na * nb / n);
            a->n += b->n;
        }
    }
    if (b->wsum > 0) {
        double w = a->wsum + b->wsum;
        a->wmean += (b->wsum / w) * (b->wmean - a->wmean);
        a->wsum = w;
    }
}

void hs_stat_summary(const hs_stat *s, hs_summary *o)
{
    o->n = s->n;
    o->mean = s->n > 0 ? s->mean : NAN;
    o->sd = o->ci_low = o->ci_high = NAN;
    o->wmean = s->wsum > 0 ? s->wmean : NAN;
    if (s->n >= 2) {
        double var = s->m2 / (double)(s->n - 1);
        o->sd = sqrt(var > 0 ? var : 0);
        double half = hs_t_quantile_975(s->n - 1) * o->sd / sqrt((double)s->n);
        o->ci_low = s->mean - half;
        o->ci_high = s->mean + half;
    }
}

/* t_{0.975, df} for df = 1..30, to 15 significant digits (computed with mpmath from the
 * regularized incomplete beta function; they agree with printed tables to 3 decimals). */
static const double t975[30] = {
    12.7062047361747, 4.30265272974946, 3.18244630528371, 2.77644510519779, 2.57058183563632,
    2.44691185114497, 2.36462425159279, 2.30600413520417, 2.26215716279821, 2.22813885198627,
    2.20098516009164, 2.17881282966723, 2.16036865646279, 2.14478668791780, 2.13144954555978,
    2.11990529922125, 2.10981557783332, 2.10092204024104, 2.09302405440831, 2.08596344726586,
    2.07961384472768, 2.07387306790403, 2.06865761041905, 2.06389856162803, 2.05953855275330,
    2.05552943864287, 2.05183051648029, 2.04840714179525, 2.04522964213270, 2.04227245630124};

double hs_t_quantile_975(long df)
{
    if (df < 1)
        return NAN;
    if (df <= 30)
        return t975[df - 1];
    /* Cornish-Fisher expansion of the t quantile in powers of 1/df about z = Phi^-1(0.975)
     * (Abramowitz & Stegun 26.7.5) */
    const double z = 1.95996398454005423552;
    double z2 = z * z, z3 = z2 * z, z5 = z3 * z2, z7 = z5 * z2, z9 = z7 * z2, z11 = z9 * z2;
    double g1 = (z3 + z) / 4;
    double g2 = (5 * z5 + 16 * z3 + 3 * z) / 96;
    double g3 = (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / 384;
    double g4 = (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z) / 92160;
    double g5 = (27 * z11 + 339 * z9 + 930 * z7 - 1782 * z5 - 765 * z3 + 17955 * z) / 368640;
    double v = 1.0 / (double)df;
    return z + v * (g1 + v * (g2 + v * (g3 + v * (g4 + v * g5))));
}


long hs_reservoir_slot(uint64_t *state, long i, long k)
{
    if (k < 1 || i < 0)
        return -1;
    if (i < k)
        return i;
    uint64_t j = hs_rand_below(state, (uint64_t)i + 1);
    return j < (uint64_t)k ? (long)j : -1;
}
