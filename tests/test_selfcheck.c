/* test_selfcheck.c — `npusim selfcheck`: the event kernel checked against its reference queue
 * (base/evq_selfcheck.c) on the requested number of events; text and JSON report the same
 * run, the output is deterministic and depends on the seed, and bad options are refused. */
#include <jansson.h>
#include <string.h>

#include "harness.h"

TEST(selfcheck_json_reports_a_run_of_the_requested_events_that_matches_the_reference)
{
    harness_run r = harness_npusim("selfcheck", "--events", "20000", "--seed", "5", "--json",
                                   NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_error_t jerr;
    json_t *j = json_loads(r.out, 0, &jerr);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "seed")), 5);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "events_dispatched")), 20000);
    CU_ASSERT_TRUE(json_is_true(json_object_get(j, "matches_reference")));
    CU_ASSERT(json_integer_value(json_object_get(j, "events_cancelled")) > 0);
    CU_ASSERT(json_integer_value(json_object_get(j, "final_time_ps")) > 0);
    const char *hash = json_string_value(json_object_get(j, "order_hash"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(hash);
    CU_ASSERT_EQUAL(strlen(hash), 18); /* "0x" and 16 hex digits */

    /* the text report is the same run: same hash, counts with thousands separators */
    harness_run t = harness_npusim("selfcheck", "--events", "20000", "--seed", "5", NULL);
    CU_ASSERT_EQUAL(t.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(t.out, hash));
    CU_ASSERT_PTR_NOT_NULL(strstr(t.out, "events dispatched:  20,000 events\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t.out, "matches reference:  yes\n"));
    json_decref(j);
    harness_run_free(&r);
    harness_run_free(&t);
}

TEST(selfcheck_output_is_byte_identical_across_runs_and_depends_on_the_seed)
{
    harness_run a = harness_npusim("selfcheck", "--events", "30000", "--seed", "7", NULL);
    harness_run b = harness_npusim("selfcheck", "--events", "30000", "--seed", "7", NULL);
    harness_run c = harness_npusim("selfcheck", "--events", "30000", "--seed", "8", NULL);
    CU_ASSERT_EQUAL(a.exit_status, 0);
    CU_ASSERT_EQUAL(c.exit_status, 0);
    CU_ASSERT_STRING_EQUAL(a.out, b.out);
    CU_ASSERT_STRING_NOT_EQUAL(a.out, c.out);
    CU_ASSERT_PTR_NOT_NULL(strstr(a.out, "# Event-kernel self-check (seed 7)\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(a.out, "matches reference:  yes"));
    CU_ASSERT_STRING_EQUAL(a.err, "");
    harness_run_free(&a);
    harness_run_free(&b);
    harness_run_free(&c);
}

TEST(selfcheck_refuses_bad_options_with_status_2)
{
    harness_run r = harness_npusim("selfcheck", "--events", "many", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--events: expected an integer in 1 .. 1099511627776, "
                                         "got 'many'"));
    CU_ASSERT_STRING_EQUAL(r.out, "");
    harness_run_free(&r);

    r = harness_npusim("selfcheck", "--events", "0", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--events: expected an integer in 1 .. 1099511627776, "
                                         "got '0'"));
    harness_run_free(&r);

    r = harness_npusim("selfcheck", "--seed", "-1", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--seed:"));
    harness_run_free(&r);

    r = harness_npusim("selfcheck", "extra", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "unexpected argument 'extra'"));
    harness_run_free(&r);
}
