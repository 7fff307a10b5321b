/* The seeded generator of the induction probe and corpus sampling: splitmix64 (Steele,
 * Lea and Flood 2014), and unbiased draws from it by rejection. */
#include "core/core.h"

uint64_t hs_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t hs_rand_below(uint64_t *state, uint64_t m)
{
    uint64_t t = (0 - m) % m; /* 2^64 mod m: reject z >= 2^64 - t */
    uint64_t z = hs_splitmix64(state);
    while (t && z >= 0 - t)
        z = hs_splitmix64(state);
    return z % m;
}
