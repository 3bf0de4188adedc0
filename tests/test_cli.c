/* test_cli.c — the `npusim` command line: dispatch, help, version, usage errors and their
 * exit statuses, checked by running the built executable. */
#include <stdio.h>
#include <string.h>

#include "harness.h"

TEST(no_command_is_a_usage_error_with_status_2)
{
    harness_run r = harness_npusim(NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "no command given"));
    harness_run_free(&r);
}

TEST(unknown_command_gets_suggestion_and_status_2)
{
    harness_run r = harness_npusim("confg", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "unknown command 'confg'; did you mean 'config'?"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--help"));
    CU_ASSERT_STRING_EQUAL(r.out, "");
    harness_run_free(&r);
}

TEST(unknown_option_names_the_option_and_exits_2)
{
    harness_run r = harness_npusim("version", "--jsn", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "npusim: unknown option '--jsn'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "Run 'npusim version --help' for usage."));
    harness_run_free(&r);

    r = harness_npusim("help", "-x", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "unknown option '-x'"));
    harness_run_free(&r);
}

TEST(version_flag_and_command_agree)
{
    harness_run a = harness_npusim("--version", NULL);
    harness_run b = harness_npusim("version", NULL);
    CU_ASSERT_EQUAL(a.exit_status, 0);
    CU_ASSERT_STRING_EQUAL(a.out, b.out);
    CU_ASSERT_EQUAL(strncmp(a.out, "npusim ", 7), 0);
    harness_run_free(&a);
    harness_run_free(&b);
}

TEST(version_json_is_an_object_with_the_version)
{
    harness_run r = harness_npusim("version", "--json", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\"version\": \""));
    CU_ASSERT_EQUAL(r.out[0], '{');
    harness_run_free(&r);
}

TEST(help_lists_every_command_of_the_table)
{
    static const char *names[] = {
#define NPUSIM_CMD(name, summary) #name,
#include "../sim/commands.def"
#undef NPUSIM_CMD
    };
    harness_run r = harness_npusim("help", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char line[64];
        snprintf(line, sizeof line, "\n  %-10s ", names[i]);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.out, line));
    }
    harness_run_free(&r);
}

TEST(every_command_answers_help_with_its_usage)
{
    static const char *names[] = {
#define NPUSIM_CMD(name, summary) #name,
#include "../sim/commands.def"
#undef NPUSIM_CMD
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        harness_run r = harness_npusim(names[i], "--help", NULL);
        char want[64];
        snprintf(want, sizeof want, "usage: npusim %s", names[i]);
        CU_ASSERT_EQUAL(r.exit_status, 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.out, want));
        harness_run_free(&r);
    }
}

TEST(integer_options_outside_their_range_name_the_option_and_the_range)
{
    harness_run r = harness_npusim("noc", "--vcs", "0", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "npusim: --vcs: expected an integer in 1 .. 64, got '0'"));
    harness_run_free(&r);

    r = harness_npusim("run", "--seed", "-3", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--seed: expected a non-negative integer, got '-3'"));
    harness_run_free(&r);
}

TEST(options_of_sim_layer_collective_and_disasm_refuse_bad_values_with_status_2)
{
    static const struct {
        const char *args[8];
        const char *msg;
    } cases[] = {
        {{"sim", "--max-cycles", "abc", "x.elf"}, "--max-cycles: expected an integer in 1 .."},
        {{"sim", "--trace", "/nonexistent-dir/t.json", "/nonexistent-dir/x.elf"}, "x.elf"},
        {{"layer", "--gemm", "8,8,8", "--cores", "0"}, "--cores: expected an integer in 1 .. 65536, got '0'"},
        {{"layer", "--gemm", "8,8,8", "--trace", "/nonexistent-dir/t.json"},
         "/nonexistent-dir/t.json: cannot create the trace file"},
        {{"collective", "--op", "all_reduce", "--isa", "--chunk", "64"}, "--isa runs the ring"},
        {{"collective", "--op", "all_to_all", "--isa"}, "--isa: all_to_all is not lowered yet"},
        {{"disasm", "--json", "-o", "x.s", "/nonexistent-dir/x.elf"}, "/nonexistent-dir/x.elf"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *const *a = cases[i].args;
        harness_run r = harness_npusim(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], NULL);
        CU_ASSERT_EQUAL(r.exit_status, 2);
        if (!strstr(r.err, cases[i].msg)) {
            CU_FAIL("the message lacks what it should say");
            fprintf(stderr, "npusim %s ...: '%s' lacks '%s'\n", a[0], r.err, cases[i].msg);
        }
        harness_run_free(&r);
    }
}
