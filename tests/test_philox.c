/* test_philox.c — the counter-based generator of the dropout masks (base/philox.h) against
 * Random123's known answers, and the properties the kernels rely on. */
#include <math.h>

#include "harness.h"
#include "philox.h"

/* Random123's tests/kat_vectors (github.com/DEShawResearch/random123), the three
 * "philox4x32 10" lines: counter (4 words), key (2 words), expected output (4 words). */
TEST(philox4x32_10_gives_random123s_known_answers)
{
    static const uint32_t kat[3][10] = {
        {0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000,
         0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
         0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
         0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        np_philox4x32_10(kat[i], kat[i] + 4, out);
        for (int w = 0; w < 4; w++)
            CU_ASSERT_EQUAL(out[w], kat[i][6 + w]);
    }
}

TEST(stream_element_n_is_word_n_mod_4_of_block_n_div_4)
{
    uint64_t seed = 0x0123456789abcdefULL;
    uint32_t out[4];
    np_philox4x32_10((uint32_t[4]){0x40000001u, 0x2, 0, 0}, (uint32_t[2]){0x89abcdefu, 0x01234567u},
                     out);
    uint64_t n0 = ((uint64_t)0x240000001ULL) << 2;
    for (int w = 0; w < 4; w++) {
        CU_ASSERT_EQUAL(np_philox_bits(seed, n0 + (uint64_t)w), out[w]);
        CU_ASSERT_EQUAL(np_philox_uniform24(seed, n0 + (uint64_t)w), (float)(out[w] >> 8) / 16777216.0f);
    }
}

TEST(uniform24_lies_in_0_1_and_is_uniform_enough_for_a_mask)
{
    /* 2^16 draws: every value in [0, 1) and a multiple of 2^-24; the fraction below 0.1 within
     * 4 standard deviations of 0.1 (sd = sqrt(0.09 / 65536) = 0.0012) */
    int below = 0, n = 1 << 16;
    for (int i = 0; i < n; i++) {
        float u = np_philox_uniform24(7, (uint64_t)i);
        CU_ASSERT(u >= 0.0f && u < 1.0f);
        CU_ASSERT_EQUAL(u * 16777216.0f, floorf(u * 16777216.0f));
        below += u < 0.1f;
    }
    CU_ASSERT(fabs((double)below / n - 0.1) < 4 * 0.0012);
    CU_ASSERT(np_philox_uniform24(7, 5) != np_philox_uniform24(8, 5)); /* the seed matters */
}
