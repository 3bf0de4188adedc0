/* rng.h — a small seeded pseudo-random generator for workloads, tests and benchmarks.
 *
 * xoshiro256** (Blackman & Vigna) seeded through splitmix64, so any 64-bit seed (0 included)
 * gives a good state. The sequence depends only on the seed: the same seed gives the same
 * numbers on every platform, which is what deterministic runs need. Header-only; not for
 * cryptography. The C library has nothing that fits: rand() has one hidden global state and
 * its sequence differs between C libraries.
 *
 *   rng r;
 *   rng_seed(&r, 42);
 *   uint64_t die = 1 + rng_below(&r, 6);
 */
#ifndef NPUSIM_RNG_H
#define NPUSIM_RNG_H

#include <stdint.h>

typedef struct rng {
    uint64_t s[4];
} rng;

/* One step of splitmix64: advances *x and returns a well-mixed 64-bit value. */
static inline uint64_t rng_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Seeds r from seed (any value). */
static inline void rng_seed(rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = rng_splitmix64(&seed);
}

static inline uint64_t rng_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* The next 64 uniformly distributed bits. */
static inline uint64_t rng_next(rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rng_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rng_rotl(s[3], 45);
    return result;
}

/* A value in [0, n) (0 when n is 0), by multiply-shift: bias below n / 2^64, negligible for
 * workloads; not for statistics that need exact uniformity over huge n. */
static inline uint64_t rng_below(rng *r, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)rng_next(r) * n) >> 64);
}

/* A double in [0, 1) with 53 random bits. */
static inline double rng_unit(rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

#endif
