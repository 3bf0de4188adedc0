/* test_goodput.c — the checkpoint/restart goodput estimate (sim/goodput.h) against
 * independent references:
 *   - a goodput worked out by hand from the expected-time formula;
 *   - a Monte-Carlo run of failures and restarts written here (exponential failure times from
 *     a seeded generator of this file, failures during restarts too), whose useful fraction
 *     the closed form must match;
 *   - the best interval against Young's first-order optimum sqrt(2 delta M) (within 5 % when
 *     the checkpoint is short against the MTBF, issue 28's bound) and Daly's higher-order
 *     one (within 1 %). */
#include <math.h>
#include <stdint.h>

#include "goodput.h"
#include "harness.h"

TEST(goodput_at_an_interval_is_the_expected_time_formula_by_hand)
{
    /* M = 8000 s / 8 chips = 1000 s, delta 10 s, R 0, tau 100 s:
     * E = 1000 (e^(110/1000) - 1) = 1000 x 0.11627807 = 116.27807 s, goodput
     * 100 / 116.27807 = 0.8600074 */
    goodput_in in = {.mtbf_s = 8000, .chips = 8, .ckpt_write_s = 10, .restart_s = 0};
    CU_ASSERT_DOUBLE_EQUAL(goodput_at(&in, 100), 0.8600074, 1e-6);
    /* a restart of 50 s multiplies E by e^(50/1000) = 1.0512711: 0.8600074 / 1.0512711 =
     * 0.8180643 */
    in.restart_s = 50;
    CU_ASSERT_DOUBLE_EQUAL(goodput_at(&in, 100), 0.8180643, 1e-6);
    CU_ASSERT_EQUAL(goodput_at(&in, 0), 0);
}

/* xorshift64* (Vigna), for exponential draws independent of the code under test */
static double mc_exp(uint64_t *s, double mean)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    double u = (double)((*s * 2685821657736338717ull) >> 11) / 9007199254740992.0;
    return -mean * log1p(-u);
}

TEST(goodput_matches_a_monte_carlo_run_of_failures_and_restarts)
{
    const double M = 1000, delta = 20, R = 50, tau = 150;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    double t = 0;
    const int segments = 40000;
    for (int i = 0; i < segments; i++) {
        for (;;) {
            double f = mc_exp(&seed, M); /* memoryless: a fresh draw per attempt */
            if (f >= tau + delta) {
                t += tau + delta;
                break;
            }
            t += f; /* the work since the last checkpoint is lost */
            for (;;) { /* the restart, which a failure can interrupt too */
                double g = mc_exp(&seed, M);
                if (g >= R) {
                    t += R;
                    break;
                }
                t += g;
            }
        }
    }
    double mc = segments * tau / t;
    goodput_in in = {.mtbf_s = M * 4, .chips = 4, .ckpt_write_s = delta, .restart_s = R};
    double closed = goodput_at(&in, tau);
    CU_ASSERT_TRUE(fabs(mc - closed) <= 0.01 * closed);
    if (fabs(mc - closed) > 0.01 * closed)
        fprintf(stderr, "monte carlo %.5f, closed form %.5f\n", mc, closed);
}

TEST(the_best_interval_is_young_s_and_daly_s_optimum_when_checkpoints_are_short)
{
    /* one chip fails every 50,000 h; 1,024 chips: the job every 175,781 s; a 60 s checkpoint:
     * Young sqrt(2 x 60 x 175781.25) = 4,592.8 s */
    goodput_in in = {.mtbf_s = 50000 * 3600.0, .chips = 1024, .ckpt_write_s = 60,
                     .restart_s = 900};
    goodput_out o;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(goodput_estimate(&in, &o, &e), NP_OK);
    CU_ASSERT_DOUBLE_EQUAL(o.job_mtbf_s, 175781.25, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(o.young_interval_s, 4592.8, 0.1);
    CU_ASSERT_TRUE(fabs(o.best_interval_s - o.young_interval_s) <= 0.05 * o.young_interval_s);
    CU_ASSERT_TRUE(fabs(o.best_interval_s - o.daly_interval_s) <= 0.01 * o.daly_interval_s);
    /* the best is at least as good as Young's and as 30 % either side of it */
    double best = o.best_goodput;
    CU_ASSERT_TRUE(best >= goodput_at(&in, o.young_interval_s));
    CU_ASSERT_TRUE(best > goodput_at(&in, 0.7 * o.best_interval_s));
    CU_ASSERT_TRUE(best > goodput_at(&in, 1.3 * o.best_interval_s));
    /* the interval asked for is evaluated too */
    in.interval_s = 3600;
    CU_ASSERT_EQUAL_FATAL(goodput_estimate(&in, &o, &e), NP_OK);
    CU_ASSERT_DOUBLE_EQUAL(o.interval_goodput, goodput_at(&in, 3600), 1e-12);
    CU_ASSERT_TRUE(o.interval_goodput < o.best_goodput);
}

TEST(goodput_inputs_out_of_range_are_refused)
{
    goodput_out o;
    np_err e = {0};
    goodput_in bad[] = {
        {.mtbf_s = 0, .chips = 1},
        {.mtbf_s = NAN, .chips = 1},
        {.mtbf_s = 1e6, .chips = 0},
        {.mtbf_s = 1e6, .chips = 1, .ckpt_write_s = -1},
        {.mtbf_s = 1e6, .chips = 1, .restart_s = INFINITY},
        {.mtbf_s = 1e6, .chips = 1, .interval_s = -5},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CU_ASSERT_EQUAL(goodput_estimate(&bad[i], &o, &e), NP_ERR_RANGE);
}
