/* test_run.c — `npusim run`, the main job, as a command: its options, its refusals (status 2
 * with the flag and the rule), memory against HBM, and — on models whose ops all have kernels
 * — the report in text and JSON with the names `npusim report` reads, determinism, and the
 * trace against `npusim trace stats`. (The engine, the plan's mapping and the figures'
 * formulas are tested in test_run_engine.c and test_run_plan.c.) */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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
    refuses("--batch is required with --model", "--model", "mlp-tiny", NULL);
    refuses("--tp 3 does not divide the 4 attention heads of gpt-tiny", "--arch", "a100-cluster",
            "--model", "gpt-tiny", "--batch", "4", "--tp", "3", NULL);
    refuses("--schedule", "--model", "gpt-tiny", "--batch", "4", "--schedule", "zigzag", NULL);
}

/* Strategy flags without --model change the default job (README command 1: gpt2-small on
 * tpu-pod, batch 16, dp 2 x tp 2 x pp 2, micro-batches of 2) and keep the rest of it. */
TEST(strategy_flags_without_a_model_change_the_default_job)
{
    static const struct {
        const char *flag, *value;
        int dp, tp, pp, chips, batch, microbatch;
    } cases[] = {
        {"--tp", "4", 2, 4, 2, 16, 16, 2},        /* 2 x 4 x 2 chips */
        {"--batch", "64", 2, 2, 2, 8, 64, 2},     /* 64 / 2 = 32 a rank, in 16 of 2 */
        {"--dp", "8", 8, 2, 2, 32, 16, 2},        /* 16 / 8 = 2 a rank: one micro-batch */
        {"--microbatch", "8", 2, 2, 2, 8, 16, 8}, /* 16 / 2 = 8 a rank: one micro-batch */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        harness_run r = harness_npusim("run", cases[i].flag, cases[i].value, "--json", NULL);
        CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
        json_t *j = json_loads(r.out, 0, NULL), *mesh = json_object_get(j, "mesh");
        CU_ASSERT_PTR_NOT_NULL_FATAL(mesh);
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "model")), "gpt2-small");
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "arch")), "tpu-pod");
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(mesh, "dp")), cases[i].dp);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(mesh, "tp")), cases[i].tp);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(mesh, "pp")), cases[i].pp);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "chips")), cases[i].chips);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "batch")), cases[i].batch);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "microbatch")), cases[i].microbatch);
        json_decref(j);
        harness_run_free(&r);
    }
    /* a change the job cannot take is the plan's own error, naming the flag */
    refuses("--batch 16 is not divisible by --dp 3", "--dp", "3", NULL);
}

/* Without --microbatch a --model run takes the default job's rule: micro-batches of 2 where 2
 * divides a data-parallel rank's share of the batch, else the share whole. */
TEST(a_model_runs_micro_batches_by_the_default_jobs_rule)
{
    static const struct {
        const char *batch, *dp, *mb;
        int microbatch, micro_batches;
    } cases[] = {
        {"8", "2", NULL, 2, 2},   /* 8 / 2 = 4 a rank: 2 of 2 (was one of 4) */
        {"6", "2", NULL, 3, 1},   /* 3 a rank: 2 does not divide it, one of 3 */
        {"16", "1", NULL, 2, 8},  /* 16 a rank: 8 of 2 */
        {"8", "2", "4", 4, 1},    /* --microbatch says otherwise */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        harness_run r = harness_npusim("run", "--arch", "tpu-pod", "--model", "mlp-tiny", "--batch",
                                       cases[i].batch, "--dp", cases[i].dp, "--json",
                                       cases[i].mb ? "--microbatch" : NULL, cases[i].mb, NULL);
        CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
        json_t *j = json_loads(r.out, 0, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(j);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "microbatch")), cases[i].microbatch);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "micro_batches")),
                        cases[i].micro_batches);
        json_decref(j);
        harness_run_free(&r);
    }
    /* the default job by the same rule: --batch 12 over dp 2 is 6 a rank, 3 of 2 */
    harness_run r = harness_npusim("run", "--batch", "12", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_t *j = json_loads(r.out, 0, NULL);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "microbatch")), 2);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "micro_batches")), 3);
    json_decref(j);
    harness_run_free(&r);
}

TEST(run_functional_mode_needs_full_fidelity_and_full_fidelity_has_no_trace_yet)
{
    refuses("--functional needs --fidelity full", "--model", "mlp-tiny", "--batch", "8",
            "--functional", NULL);
    refuses("--trace is not available with --fidelity full", "--model", "mlp-tiny", "--batch",
            "8", "--fidelity", "full", "--trace", "/tmp/npusim_never_written.json", NULL);
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

/* ---- full fidelity: 8 chips of tiny with 8 cores each ---------------------------------------- */

#define TINY8 "--arch", "tiny", "--set", "system.chips=8", "--set", "chip.cores=8", "--set", \
              "chip.mesh_x=4", "--set", "chip.mesh_y=2"

TEST(full_fidelity_runs_every_ranks_lowered_step_and_functional_mode_gives_the_executors_loss)
{
    const char *prec[] = {"fp32", "bf16"};
    double tol[] = {1e-5, 1e-2};
    for (int i = 0; i < 2; i++) {
        harness_run r = harness_npusim("run", TINY8, "--model", "mlp-tiny", "--batch", "16",
                                       "--dp", "2", "--tp", "2", "--pp", "2", "--microbatch", "2",
                                       "--precision", prec[i], "--fidelity", "full",
                                       "--functional", "--json", NULL);
        CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
        json_t *j = json_loads(r.out, 0, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(j);
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "fidelity")), "full");
        CU_ASSERT(json_number_value(json_object_get(j, "step_time_s")) > 0);
        double loss = json_number_value(json_object_get(j, "loss"));
        double want = json_number_value(json_object_get(j, "loss_reference"));
        CU_ASSERT(want > 0.1);
        CU_ASSERT(fabs(loss - want) <= tol[i] * fabs(want));
        json_decref(j);
        harness_run_free(&r);
    }
    /* the same plan at both fidelities: the plan's FLOPs, the same kinds of communication */
    harness_run f = harness_npusim("run", TINY8, "--model", "gpt-tiny", "--batch", "8", "--dp",
                                   "4", "--pp", "2", "--microbatch", "1", "--fidelity", "full",
                                   "--json", NULL);
    harness_run s = harness_npusim("run", TINY8, "--model", "gpt-tiny", "--batch", "8", "--dp",
                                   "4", "--pp", "2", "--microbatch", "1", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(f.exit_status, 0);
    CU_ASSERT_EQUAL_FATAL(s.exit_status, 0);
    json_t *jf = json_loads(f.out, 0, NULL), *js = json_loads(s.out, 0, NULL);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(jf, "model_flops_per_step")),
                           json_number_value(json_object_get(js, "model_flops_per_step")), 0.5);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(jf, "comm")),
                    json_array_size(json_object_get(js, "comm")));
    CU_ASSERT(json_number_value(json_object_get(jf, "step_time_s")) > 0);
    json_decref(jf);
    json_decref(js);
    harness_run_free(&f);
    harness_run_free(&s);
}

/* The simulated loss and the reference executor's of `npusim run --functional` (full fidelity,
 * tpu-pod, bf16) of gpt-tiny at batch 8 under dp x tp x pp, its attention fused or composite,
 * with dropout probability `dropout`. */
static void functional_loss_dropout(const char *dp, const char *tp, const char *pp,
                                    const char *attn, const char *dropout, double *loss,
                                    double *ref)
{
    harness_run r = harness_npusim("run", "--arch", "tpu-pod", "--model", "gpt-tiny", "--batch",
                                   "8", "--dp", dp, "--tp", tp, "--pp", pp, "--attention", attn,
                                   "--dropout", dropout, "--fidelity", "full", "--functional",
                                   "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_t *j = json_loads(r.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    *loss = json_number_value(json_object_get(j, "loss"));
    *ref = json_number_value(json_object_get(j, "loss_reference"));
    json_decref(j);
    harness_run_free(&r);
}

static void functional_loss(const char *dp, const char *tp, const char *pp, const char *attn,
                            double *loss, double *ref)
{
    functional_loss_dropout(dp, tp, pp, attn, "0", loss, ref);
}

TEST(run_functional_gpt_tiny_on_8_chips_gives_the_single_device_loss_within_bf16_tolerance)
{
    /* one device's step by the reference executor (framework/dist.h on a mesh of one), its
     * attention composite: the oracle of both forms */
    double one_sim, one;
    functional_loss("1", "1", "1", "composite", &one_sim, &one);
    CU_ASSERT(one > 0.5);
    /* bf16 keeps 8 significant bits: the ISA kernels, the simulated collectives' order of
     * reduction and the executor's round differently, each within 2^-8 of the value (and the
     * fused attention rounds its scores and probabilities less than the composite's ops) */
    double tol = ldexp(1.0, -8) * one;
    CU_ASSERT(fabs(one_sim - one) <= tol);
    const char *attn[] = {"composite", "fused"};
    for (int a = 0; a < 2; a++) {
        double loss, dist;
        functional_loss("2", "2", "2", attn[a], &loss, &dist);
        fprintf(stderr, "gpt-tiny dp2 x tp2 x pp2, %s attention: loss %.6f (distributed "
                        "executor %.6f, one device %.6f)\n", attn[a], loss, dist, one);
        CU_ASSERT(fabs(loss - one) <= tol);
        CU_ASSERT(fabs(loss - dist) <= tol);
    }
}

/* With --dropout 0.1 every dropout kernel of the lowered step (vpu.rand of each element's index
 * under its seed) drops what the reference executor's Philox masks drop: the simulated loss is
 * the distributed executor's within bf16's 2^-8, and the masks change the loss by more than
 * that against the step without dropout. (A mask is Philox over each element's index in the
 * rank's local tensor under the node's seed mixed with the micro-batch and, for a tensor split
 * over tp, the tp rank — nn_dropout_seed — so the 8-chip loss is not the one device's, which
 * draws over the whole batch; test_parallel_train.c checks how the masks are drawn.) */
TEST(run_functional_with_dropout_gives_the_distributed_executors_loss_on_8_chips)
{
    double loss, dist, plain, plain_dist;
    functional_loss_dropout("2", "2", "2", "composite", "0.1", &loss, &dist);
    functional_loss("2", "2", "2", "composite", &plain, &plain_dist);
    double tol = ldexp(1.0, -8) * dist;
    fprintf(stderr, "gpt-tiny dp2 x tp2 x pp2, dropout 0.1: loss %.6f (distributed executor "
                    "%.6f; without dropout %.6f)\n", loss, dist, plain);
    CU_ASSERT(dist > 0.5);
    CU_ASSERT(fabs(loss - dist) <= tol);
    CU_ASSERT(fabs(dist - plain_dist) > tol);
}

/* ---- a real run: gpt-tiny on 4 chips of tpu-pod, dp 2 x pp 2, 1F1B, every kernel compiled and
 * simulated on the core model ---------------------------------------------------------------- */

#define GPT_TINY "--arch", "tpu-pod", "--model", "gpt-tiny", "--batch", "8", "--dp", "2", \
                 "--pp", "2", "--microbatch", "1"

static json_t *run_json(const char *extra0, const char *extra1)
{
    const char *args[24] = {"run", GPT_TINY, "--json"};
    int n = 14;
    if (extra0)
        args[n++] = extra0;
    if (extra1)
        args[n++] = extra1;
    args[n] = NULL;
    harness_run r = harness_npusim_in(NULL, args);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    if (r.exit_status)
        printf("\n%s\n", r.err);
    json_t *j = json_loads(r.out, 0, NULL);
    harness_run_free(&r);
    return j;
}

static double jnum(const json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

TEST(a_real_run_reports_the_plans_flops_and_memory_and_figures_by_their_definitions)
{
    json_t *j = run_json(NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    harness_run p = harness_npusim("plan", GPT_TINY, "--json", NULL);
    json_t *plan = json_loads(p.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(plan);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "model")), "gpt-tiny");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "fidelity")), "fast");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "chips")), 4);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "schedule")), "1f1b");
    /* FLOPs and memory: npusim plan's */
    CU_ASSERT_DOUBLE_EQUAL(jnum(j, "model_flops_per_step"), jnum(plan, "flops_per_step"), 0.5);
    json_t *m = json_object_get(j, "memory"), *pm = json_object_get(plan, "memory");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(m, "total_bytes")),
                    json_integer_value(json_object_get(pm, "total_bytes")));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(m, "peak_bytes")),
                    json_integer_value(json_object_get(pm, "total_bytes")));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(m, "hbm_bytes")), 32LL << 30);
    /* throughput and MFU from their definitions; tpu-pod's peak from its data sheet:
     * 2 x 128 x 128 x 1.05 GHz x 8 MXUs = 275.25 TFLOP/s */
    double step = jnum(j, "step_time_s");
    CU_ASSERT(step > 0);
    CU_ASSERT_DOUBLE_EQUAL(jnum(j, "peak_flops_per_chip"), 275.2512e12, 1e6);
    CU_ASSERT_DOUBLE_EQUAL(jnum(j, "tokens_per_s"), 8 * 16 / step, 1e-6 * 8 * 16 / step);
    CU_ASSERT_DOUBLE_EQUAL(jnum(j, "mfu_pct"),
                           100 * jnum(j, "model_flops_per_step") / step / 4 / 275.2512e12, 1e-9);
    /* a pipeline of 2 stages and 4 micro-batches: the measured bubble at least the analytical
     * (p-1)/(m+p-1) = 20 % (idle for any reason counts) and below the whole window */
    CU_ASSERT_DOUBLE_EQUAL(jnum(j, "bubble_analytical"), 0.2, 1e-12);
    CU_ASSERT(jnum(j, "bubble_pct") >= 20.0 - 2.0 && jnum(j, "bubble_pct") < 100);
    /* every unit busy less than the run, the compute engine the most of the chip's units */
    json_t *u;
    size_t i;
    double compute = 0;
    json_array_foreach(json_object_get(j, "units"), i, u) {
        CU_ASSERT(jnum(u, "min_util_pct") <= jnum(u, "mean_util_pct"));
        CU_ASSERT(jnum(u, "mean_util_pct") <= jnum(u, "max_util_pct"));
        CU_ASSERT(jnum(u, "max_util_pct") <= 100.0 + 1e-9);
        if (!strcmp(json_string_value(json_object_get(u, "kind")), "compute"))
            compute = jnum(u, "mean_util_pct");
    }
    json_array_foreach(json_object_get(j, "units"), i, u)
        if (strcmp(json_string_value(json_object_get(u, "kind")), "comm"))
            CU_ASSERT(jnum(u, "mean_util_pct") <= compute + 1e-9);
    json_t *c;
    int kinds = 0;
    json_array_foreach(json_object_get(j, "comm"), i, c) {
        CU_ASSERT(jnum(c, "exposed_s") <= jnum(c, "total_s") + 1e-15);
        kinds++;
    }
    CU_ASSERT_EQUAL(kinds, 2); /* dp and pp */
    json_decref(plan);
    harness_run_free(&p);
    json_decref(j);
}

TEST(a_real_run_is_deterministic_and_its_shortcuts_and_kernel_cache_change_no_figure)
{
    char dir[] = "/tmp/npusim_run_cache_XXXXXX", cache[64];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(cache, sizeof cache, "%s/kernels", dir);
    json_t *runs[6] = {run_json(NULL, NULL), run_json(NULL, NULL), run_json("--no-dedup", NULL),
                       run_json("--kernel-cache", cache), run_json("--kernel-cache", cache),
                       run_json("--no-cache", NULL)};
    char *want = NULL;
    for (int i = 0; i < 6; i++) {
        CU_ASSERT_PTR_NOT_NULL_FATAL(runs[i]);
        json_t *eng = json_object_get(runs[i], "engine");
        if (i == 3)
            CU_ASSERT(json_integer_value(json_object_get(eng, "kernels_simulated")) > 0);
        if (i == 4) { /* everything from the file: nothing compiled or simulated */
            CU_ASSERT_EQUAL(json_integer_value(json_object_get(eng, "kernels_simulated")), 0);
            CU_ASSERT_EQUAL(json_integer_value(json_object_get(eng, "kernels_from_file")),
                            json_integer_value(json_object_get(eng, "kernels")));
        }
        json_object_del(runs[i], "engine");
        json_object_del(runs[i], "wall_s");
        char *s = json_dumps(runs[i], JSON_SORT_KEYS);
        if (!want)
            want = s;
        else {
            CU_ASSERT_STRING_EQUAL(s, want);
            free(s);
        }
        json_decref(runs[i]);
    }
    free(want);
    unlink(cache);
    rmdir(dir);
}

TEST(a_real_runs_text_report_has_every_figure_with_its_unit)
{
    harness_run r = harness_npusim("run", GPT_TINY, NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    const char *want[] = {"# gpt-tiny on tpu-pod: 4 of 4,096 chips", "step time", " \xc2\xb5s",
                          "tokens/s", "FLOPs per step", "MFLOP model", "MFU / HFU", " %",
                          "pipeline bubble", "(p-1)/(m+p-1) form; analytical 20.0 %",
                          "x the time it works ((p-1)/m form; analytical 0.25 x)",
                          "step per chip        compute ", "+ exposed communication ",
                          "+ pipeline bubble ", "+ other idle ",
                          "utilization (busy / run time, over chips)", "compute", "mxu",
                          "communication per step", "dp", "pp", "busiest links", "GB/s",
                          "memory of the largest chip", "KiB", "engine:", "distinct kernels"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (!strstr(r.out, want[i]))
            printf("\nmissing '%s'\n", want[i]);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.out, want[i]));
    }
    harness_run_free(&r);
}

TEST(trace_stats_of_a_real_runs_trace_give_its_utilization_communication_and_bubble)
{
    char dir[] = "/tmp/npusim_run_trace_XXXXXX", trace[64];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(trace, sizeof trace, "%s/t.json.gz", dir);
    json_t *j = run_json("--trace", trace);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    harness_run c = harness_npusim("trace", "check", trace, NULL);
    CU_ASSERT_EQUAL(c.exit_status, 0);
    harness_run_free(&c);
    harness_run s = harness_npusim("trace", "stats", trace, "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(s.exit_status, 0);
    json_t *st = json_loads(s.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    json_t *u, *x, *cm;
    size_t i, k;
    int matched = 0;
    json_array_foreach(json_object_get(j, "units"), i, u)
        json_array_foreach(json_object_get(st, "units"), k, x)
            if (!strcmp(json_string_value(json_object_get(u, "kind")),
                        json_string_value(json_object_get(x, "kind")))) {
                matched++;
                for (int f = 0; f < 3; f++) {
                    const char *n = (const char *[]){"min_util_pct", "mean_util_pct",
                                                     "max_util_pct"}[f];
                    CU_ASSERT_DOUBLE_EQUAL(jnum(u, n), jnum(x, n), 1e-6);
                }
            }
    CU_ASSERT_EQUAL(matched, 5);
    matched = 0;
    json_array_foreach(json_object_get(j, "comm"), i, cm)
        json_array_foreach(json_object_get(st, "comm"), k, x)
            if (!strcmp(json_string_value(json_object_get(cm, "kind")),
                        json_string_value(json_object_get(x, "kind")))) {
                matched++;
                CU_ASSERT_DOUBLE_EQUAL(jnum(cm, "total_s"), jnum(x, "total_s"), 1e-12);
                CU_ASSERT_DOUBLE_EQUAL(jnum(cm, "exposed_s"), jnum(x, "exposed_s"), 1e-12);
            }
    CU_ASSERT_EQUAL(matched, 2);
    CU_ASSERT_DOUBLE_EQUAL(jnum(j, "bubble_pct"), jnum(st, "bubble_pct"), 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(jnum(j, "bubble_ratio"), jnum(st, "bubble_ratio"), 1e-6);
    json_decref(st);
    harness_run_free(&s);
    json_decref(j);
    unlink(trace);
    rmdir(dir);
}

/* The CSV rows of `npusim run --csv` hold the JSON report's figures, one per row. */
TEST(run_csv_gives_the_json_reports_figures_as_rows)
{
    harness_run c = harness_npusim("run", GPT_TINY, "--csv", NULL);
    harness_run j = harness_npusim("run", GPT_TINY, "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(c.exit_status, 0);
    CU_ASSERT_EQUAL_FATAL(j.exit_status, 0);
    json_t *js = json_loads(j.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(js);
    CU_ASSERT(strncmp(c.out, "section,item,figure,value\n", 26) == 0);
    /* a top-level figure, a communication kind's, a unit's and the memory's */
    char want[160];
    const char *names[] = {"model_flops_per_step", "step_time_s", "mfu_pct", "bubble_pct"};
    for (int k = 0; k < 4; k++) {
        snprintf(want, sizeof want, "\n,,%s,", names[k]);
        const char *row = strstr(c.out, want);
        CU_ASSERT_PTR_NOT_NULL_FATAL(row);
        CU_ASSERT_EQUAL(strtod(row + strlen(want), NULL),
                        json_number_value(json_object_get(js, names[k])));
    }
    json_t *dp = NULL, *cm = json_object_get(js, "comm");
    for (size_t i = 0; i < json_array_size(cm); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(cm, i), "kind")), "dp"))
            dp = json_array_get(cm, i);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dp);
    const char *bpc = strstr(c.out, "\ncomm,dp,bytes_per_chip,");
    CU_ASSERT_PTR_NOT_NULL_FATAL(bpc);
    CU_ASSERT_EQUAL(strtod(bpc + strlen("\ncomm,dp,bytes_per_chip,"), NULL),
                    json_number_value(json_object_get(dp, "bytes_per_chip")));
    CU_ASSERT_PTR_NOT_NULL(strstr(c.out, "\nunits,compute,mean_util_pct,"));
    snprintf(want, sizeof want, "\nmemory,,hbm_bytes,%" JSON_INTEGER_FORMAT "\n",
             json_integer_value(json_object_get(json_object_get(js, "memory"), "hbm_bytes")));
    CU_ASSERT_PTR_NOT_NULL(strstr(c.out, want));
    /* every row has four fields */
    int rows = 0, bad = 0;
    for (const char *l = c.out; *l; rows++) {
        const char *e = strchr(l, '\n');
        int commas = 0;
        bool quoted = false;
        for (const char *q = l; q < (e ? e : l + strlen(l)); q++) {
            quoted ^= *q == '"';
            commas += *q == ',' && !quoted;
        }
        bad += commas != 3;
        l = e ? e + 1 : l + strlen(l);
    }
    CU_ASSERT(rows > 40);
    CU_ASSERT_EQUAL(bad, 0);
    json_decref(js);
    harness_run_free(&c);
    harness_run_free(&j);
    refuses("--json and --csv", "--model", "mlp-tiny", "--batch", "8", "--json", "--csv", NULL);
}
