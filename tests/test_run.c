/* test_run.c — `npusim run`, the main job, as a command: its options, its refusals (status 2
 * with the flag and the rule), memory against HBM, and — on models whose ops all have kernels
 * — the report in text and JSON with the names `npusim report` reads, determinism, and the
 * trace against `npusim trace stats`. (The engine, the plan's mapping and the figures'
 * formulas are tested in test_run_engine.c and test_run_plan.c.) */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

TEST(run_help_shows_the_strategy_flags_and_the_default_job)
{
    harness_run r = harness_npusim("run", "--help", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    const char *flags[] = {"--model", "--batch", "--dp", "--tp", "--pp", "--zero", "--sp",
                           "--microbatch", "--schedule", "--recompute", "--steps", "--fidelity",
                           "--functional", "--trace", "--no-cache", "--no-dedup", "--allow-oom",
                           "--json", "gpt2-small on 8 chips"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        CU_ASSERT_PTR_NOT_NULL(strstr(r.out, flags[i]));
    harness_run_free(&r);
}

static void refuses(const char *want, const char *a0, ...)
{
    const char *args[32] = {"run", a0};
    int n = 2;
    va_list ap;
    va_start(ap, a0);
    for (const char *s; n < 31 && (s = va_arg(ap, const char *));)
        args[n++] = s;
    va_end(ap);
    args[n] = NULL;
    harness_run r = harness_npusim_in(NULL, args);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    if (!strstr(r.err, want))
        printf("\nexpected '%s' in: %s\n", want, r.err);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, want));
    CU_ASSERT_STRING_EQUAL(r.out, "");
    harness_run_free(&r);
}

TEST(run_refuses_bad_options_with_status_2_naming_the_flag)
{
    refuses("--steps: expected an integer in 1 .. 1000000, got '0'", "--steps", "0", NULL);
    refuses("--fidelity: expected fast or full, got 'fastest'", "--fidelity", "fastest", NULL);
    refuses("unexpected argument 'extra'", "extra", NULL);
    refuses("tpu-pod", "--arch", "tpu-pd", NULL);
    refuses("--model is required with strategy flags", "--tp", "4", NULL);
    refuses("--batch is required with --model", "--model", "mlp-tiny", NULL);
    refuses("--tp 3 does not divide the 4 attention heads of gpt-tiny", "--arch", "a100-cluster",
            "--model", "gpt-tiny", "--batch", "4", "--tp", "3", NULL);
    refuses("--schedule", "--model", "gpt-tiny", "--batch", "4", "--schedule", "zigzag", NULL);
}

TEST(run_full_fidelity_and_functional_mode_are_refused_as_not_yet_available)
{
    refuses("--fidelity full is not yet available", "--fidelity", "full", NULL);
    refuses("--functional needs --fidelity full", "--functional", NULL);
}

TEST(run_a_plan_that_does_not_fit_in_hbm_is_status_2_with_the_breakdown_by_role)
{
    /* GPT-2 small's fp32 Adam state alone (124 M x 12 bytes) is far more than tiny's 64 MiB */
    harness_run r = harness_npusim("run", "--arch", "tiny", "--model", "gpt2-small", "--batch",
                                   "2", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    const char *want[] = {"gpt2-small does not fit", "of its 64.00 MiB of HBM", "parameters",
                          "gradients", "optimizer state", "activations", "workspace",
                          "--allow-oom"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CU_ASSERT_PTR_NOT_NULL(strstr(r.err, want[i]));
    CU_ASSERT_STRING_EQUAL(r.out, "");
    harness_run_free(&r);
}
