/* test_clock.c — clock domains: exact cycle/ps conversions at 1, 1.6, 0.9 and 1.41 GHz, edges,
 * no drift after 10^9+ cycles, rounding of GHz, refusals and saturation. Expected values are
 * computed by hand (or with exact fractions, shown in the comments). */
#include <math.h>

#include "clock.h"
#include "harness.h"

static clk_domain ghz(double g)
{
    clk_domain d = {0};
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(clk_init_ghz(&d, g, &e), NP_OK);
    return d;
}

/* The definition restated independently: t is cycle c's edge iff t is the least whole ps with
 * t * f >= c * 10^12. */
static void assert_is_edge(const clk_domain *d, uint64_t c, uint64_t t)
{
    unsigned __int128 lhs = (unsigned __int128)t * d->freq_hz;
    unsigned __int128 rhs = (unsigned __int128)c * 1000000000000ULL;
    CU_ASSERT(lhs >= rhs);
    CU_ASSERT(t == 0 || lhs - d->freq_hz < rhs);
}

TEST(one_ghz_has_a_1000_ps_period)
{
    clk_domain d = ghz(1.0);
    CU_ASSERT_EQUAL(d.freq_hz, 1000000000);
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, 1), 1000);
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, 1000000000), 1000000000000ULL);
    CU_ASSERT_EQUAL(clk_ps_to_cycles(&d, 999), 0);
    CU_ASSERT_EQUAL(clk_ps_to_cycles(&d, 1000), 1);
    CU_ASSERT_EQUAL(clk_ps_to_cycles(&d, 1999), 1);
    CU_ASSERT_EQUAL(clk_edge_at_or_after(&d, 1000), 1000);
    CU_ASSERT_EQUAL(clk_edge_at_or_after(&d, 1001), 2000);
    CU_ASSERT_EQUAL(clk_edge_at_or_after(&d, 0), 0);
}

TEST(one_point_six_ghz_has_a_625_ps_period)
{
    clk_domain d = ghz(1.6);
    CU_ASSERT_EQUAL(d.freq_hz, 1600000000);
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, 1), 625);
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, 4), 2500);
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, 16), 10000);
    CU_ASSERT_EQUAL(clk_ps_to_cycles(&d, 624), 0);
    CU_ASSERT_EQUAL(clk_ps_to_cycles(&d, 625), 1);
    CU_ASSERT_EQUAL(clk_ps_to_cycles(&d, 10000), 16);
    CU_ASSERT_EQUAL(clk_edge_at_or_after(&d, 2501), 3125);
    CU_ASSERT_EQUAL(clk_cycle_at_or_after(&d, 2501), 5);
    CU_ASSERT_EQUAL(clk_cycle_at_or_after(&d, 2500), 4);
}

TEST(point_nine_ghz_edges_round_up_to_whole_ps_without_drift)
{
    clk_domain d = ghz(0.9);
    CU_ASSERT_EQUAL(d.freq_hz, 900000000);
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, 1), 1112);  /* 1111.1 */
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, 2), 2223);  /* 2222.2 */
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, 9), 10000); /* exact */
    CU_ASSERT_EQUAL(clk_ps_to_cycles(&d, 1111), 0);
    CU_ASSERT_EQUAL(clk_ps_to_cycles(&d, 1112), 1);
    CU_ASSERT_EQUAL(clk_ps_to_cycles(&d, 9999), 8);
    CU_ASSERT_EQUAL(clk_ps_to_cycles(&d, 10000), 9);
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, 900000000), 1000000000000ULL);
    CU_ASSERT_EQUAL(clk_ps_to_cycles(&d, 1000000000000ULL), 900000000);
    CU_ASSERT_EQUAL(clk_ps_to_cycles(&d, 1000000000000ULL - 1), 899999999);
    /* 3,000,000,001 * 10^12 / (9 * 10^8) = 3,333,333,334,444.4 */
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, 3000000001ULL), 3333333334445ULL);
    CU_ASSERT_EQUAL(clk_edge_at_or_after(&d, 1111), 1112);
    CU_ASSERT_EQUAL(clk_edge_at_or_after(&d, 1112), 1112);
    CU_ASSERT_EQUAL(clk_edge_at_or_after(&d, 1113), 2223);
}

TEST(one_point_four_one_ghz_is_exact_after_a_trillion_cycles)
{
    clk_domain d = ghz(1.41);
    CU_ASSERT_EQUAL(d.freq_hz, 1410000000);          /* 1.41 * 1e9 rounds to the Hz */
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, 1), 710);   /* 709.2 */
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, 2), 1419);  /* 1418.4 */
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, 141), 100000);
    /* 1000 s: 1.41 * 10^12 cycles is exactly 10^15 ps */
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, 1410000000000ULL), 1000000000000000ULL);
    CU_ASSERT_EQUAL(clk_ps_to_cycles(&d, 1000000000000000ULL), 1410000000000ULL);
    /* (10^10 + 7) * 10^12 / 1.41e9 = 7,092,198,586,524.8 */
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, 10000000007ULL), 7092198586525ULL);
    CU_ASSERT_EQUAL(clk_ps_to_cycles(&d, 7092198586525ULL), 10000000007ULL);
    CU_ASSERT_EQUAL(clk_ps_to_cycles(&d, 7092198586524ULL), 10000000006ULL);
    /* a period added up in double precision drifts; the conversion does not */
    double acc = 0, period = 1e12 / 1410000000.0;
    for (int i = 0; i < 1000000; i++)
        acc += period;
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, 1000000), 709219859); /* 709,219,858.16 */
    CU_ASSERT(fabs(acc - 709219858.156028) > 1e-6);
}

TEST(conversions_agree_with_the_definition_and_each_other)
{
    static const double freqs[] = {1.0, 1.6, 0.9, 1.41, 0.333, 2.7182818};
    for (size_t k = 0; k < sizeof freqs / sizeof freqs[0]; k++) {
        clk_domain d = ghz(freqs[k]);
        for (uint64_t base = 0; base <= 4000000000000ULL; base += 1000000000000ULL) {
            for (uint64_t c = base; c < base + 2000; c++) {
                uint64_t t = clk_cycles_to_ps(&d, c);
                assert_is_edge(&d, c, t);
                CU_ASSERT_EQUAL(clk_ps_to_cycles(&d, t), c);
                CU_ASSERT_EQUAL(clk_ps_to_cycles(&d, t + 1), c + (t + 1 >= clk_cycles_to_ps(&d, c + 1)));
                CU_ASSERT_EQUAL(clk_edge_at_or_after(&d, t), t);
                CU_ASSERT_EQUAL(clk_edge_at_or_after(&d, t + 1), clk_cycles_to_ps(&d, c + 1));
                CU_ASSERT_EQUAL(clk_cycle_at_or_after(&d, t + 1), c + 1);
            }
        }
    }
}

TEST(bad_frequencies_are_range_errors_and_huge_times_saturate)
{
    clk_domain d = {7, 7};
    np_err e = {0};
    CU_ASSERT_EQUAL(clk_init_ghz(&d, 0.0, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(clk_init_ghz(&d, -1.0, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(clk_init_ghz(&d, NAN, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(clk_init_ghz(&d, INFINITY, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(clk_init_ghz(&d, 1000.001, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(clk_init_hz(&d, 0, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(clk_init_hz(&d, 1000000000001ULL, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(d.freq_hz, 7); /* untouched */
    CU_ASSERT_EQUAL(clk_init_ghz(&d, 1000.0, &e), NP_OK); /* 1 ps period */
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, 12345), 12345);
    CU_ASSERT_EQUAL(clk_init_ghz(&d, 1e-9, &e), NP_OK); /* 1 Hz */
    CU_ASSERT_EQUAL(d.freq_hz, 1);
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, 3), 3000000000000ULL);
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, UINT64_MAX), UINT64_MAX);
    CU_ASSERT_EQUAL(clk_edge_at_or_after(&d, UINT64_MAX), UINT64_MAX);
    d = ghz(0.9);
    CU_ASSERT_EQUAL(clk_cycles_to_ps(&d, UINT64_MAX), UINT64_MAX);
    CU_ASSERT_EQUAL(clk_ps_to_cycles(&d, UINT64_MAX), (uint64_t)(UINT64_MAX / 10000 * 9 + 9 * (UINT64_MAX % 10000) / 10000));
}
