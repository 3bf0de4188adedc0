/* test_run.c — `npusim run`, the main job: it resolves the architecture, runs the event-kernel
 * self-check, reports both (text and JSON), is deterministic, and refuses bad input. */
#include <jansson.h>
#include <string.h>

#include "harness.h"

TEST(run_json_reports_arch_and_a_matching_selfcheck)
{
    harness_run r = harness_npusim("run", "--arch", "tiny", "--events", "20000", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_error_t jerr;
    json_t *j = json_loads(r.out, 0, &jerr);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(j, "arch"), "name")),
                           "tiny");
    json_t *sc = json_object_get(j, "selfcheck");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(sc, "events_dispatched")), 20000);
    CU_ASSERT_TRUE(json_is_true(json_object_get(sc, "matches_reference")));
    json_decref(j);
    harness_run_free(&r);
}

TEST(run_output_is_byte_identical_across_runs_and_depends_on_the_seed)
{
    harness_run a = harness_npusim("run", "--events", "30000", "--seed", "7", NULL);
    harness_run b = harness_npusim("run", "--events", "30000", "--seed", "7", NULL);
    harness_run c = harness_npusim("run", "--events", "30000", "--seed", "8", NULL);
    CU_ASSERT_EQUAL(a.exit_status, 0);
    CU_ASSERT_STRING_EQUAL(a.out, b.out);
    CU_ASSERT_STRING_NOT_EQUAL(a.out, c.out);
    CU_ASSERT_PTR_NOT_NULL(strstr(a.out, "matches reference:  yes"));
    harness_run_free(&a);
    harness_run_free(&b);
    harness_run_free(&c);
}

TEST(run_default_architecture_is_the_edge_preset_with_overrides_applied)
{
    harness_run r = harness_npusim("run", "--events", "1000", "--set", "core.array_rows=64",
                                   "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_t *j = json_loads(r.out, 0, NULL);
    json_t *arch = json_object_get(j, "arch");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(arch, "name")), "edge");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(
                        json_object_get(json_object_get(arch, "core"), "array_rows"), "value")),
                    64);
    json_decref(j);
    harness_run_free(&r);
}

TEST(run_refuses_bad_options_and_unknown_presets_with_status_2)
{
    harness_run r = harness_npusim("run", "--events", "many", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--events: expected a non-negative integer, got 'many'"));
    harness_run_free(&r);

    r = harness_npusim("run", "--arch", "tpu-pd", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "tpu-pod"));
    CU_ASSERT_STRING_EQUAL(r.out, "");
    harness_run_free(&r);

    r = harness_npusim("run", "extra", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "unexpected argument 'extra'"));
    harness_run_free(&r);
}
