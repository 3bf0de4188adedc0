/* philox.h — Philox4x32-10, the counter-based random-number function of the dropout masks.
 *
 * A counter-based generator is a pure function of (key, counter): element n of a random
 * stream is computed from n alone, with no state carried from element n - 1, so any tile of
 * a tensor can draw its numbers in any order, on any core, and get the same ones. The
 * framework's dropout (framework/op_elem.c) and the vector unit's vpu.rand (hw-model/
 * core_func.c) both call np_philox_uniform24, so the kernel's mask is the reference's bit for
 * bit.
 *
 * Philox4x32-10 is Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2,
 * 3" (SC 2011), as Random123 defines it: a 128-bit counter and a 64-bit key, 10 rounds, the
 * key bumped by the Weyl constants before every round but the first. tests/test_philox.c checks
 * it against Random123's known-answer vectors. Header-only; not for cryptography.
 *
 *   uint32_t out[4];
 *   np_philox4x32_10((uint32_t[4]){0, 0, 0, 0}, (uint32_t[2]){0, 0}, out);  // 6627e8d5 ...
 *   float u = np_philox_uniform24(seed, n);                                  // [0, 1)
 */
#ifndef NPUSIM_PHILOX_H
#define NPUSIM_PHILOX_H

#include <stdint.h>

#define NP_PHILOX_M0 0xD2511F53u
#define NP_PHILOX_M1 0xCD9E8D57u
#define NP_PHILOX_W0 0x9E3779B9u /* golden ratio */
#define NP_PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

/* out = Philox4x32-10(ctr, key). */
static inline void np_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        if (r) {
            k0 += NP_PHILOX_W0;
            k1 += NP_PHILOX_W1;
        }
        uint64_t p0 = (uint64_t)NP_PHILOX_M0 * c0, p1 = (uint64_t)NP_PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c0 = n0, c1 = (uint32_t)p1, c2 = n2, c3 = (uint32_t)p0;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* The 32 random bits of element n of stream seed: word n mod 4 of Philox4x32-10 with key
 * (seed's low, high 32 bits) and counter n / 4 (a 128-bit little-endian integer), so four
 * consecutive elements share one evaluation. */
static inline uint32_t np_philox_bits(uint64_t seed, uint64_t n)
{
    uint64_t block = n >> 2;
    uint32_t out[4];
    np_philox4x32_10((uint32_t[4]){(uint32_t)block, (uint32_t)(block >> 32), 0, 0},
                     (uint32_t[2]){(uint32_t)seed, (uint32_t)(seed >> 32)}, out);
    return out[n & 3];
}

/* Element n of stream seed as a uniform number in [0, 1): its top 24 bits x 2^-24, a value
 * every fp32 holds exactly. */
static inline float np_philox_uniform24(uint64_t seed, uint64_t n)
{
    return (float)(np_philox_bits(seed, n) >> 8) * 0x1.0p-24f;
}

#endif
