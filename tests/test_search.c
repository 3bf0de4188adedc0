/* test_search.c — `npusim search` (sim/search.h, sim/search_bound.h): the enumeration against
 * a hand count, memory pruning against each plan's own memory, both bounds against the
 * simulated step of every candidate, and branch and bound against exhaustive simulation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch.h"
#include "harness.h"
#include "model.h"
#include "plan.h"
#include "run_job.h"
#include "run_kernel.h"
#include "run_plan.h"
#include "run_report.h"
#include "search.h"
#include "search_bound.h"

/* A GPT of `layers` layers as gpt-tiny is otherwise (4 heads of 8, vocabulary 16, context 16). */
static void sx_gpt(nn_model_desc *d, int layers, int d_model, int context)
{
    char text[256];
    snprintf(text, sizeof text, "family = gpt\nlayers = %d\nd_model = %d\nheads = 4\n"
             "vocab = 16\ncontext = %d\nbatch = 4\n", layers, d_model, context);
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_parse("sx.model", text, d, &err), NP_OK);
}

/* tpu-pod cut to a 2 x 2 x 2 torus of 8 chips (or 2 x 2 x 1: 4) */
static void sx_pod(arch_config *cfg, int chips)
{
    const char *sets8[] = {"system.chips=8", "system.torus_x=2", "system.torus_y=2",
                           "system.torus_z=2"};
    const char *sets4[] = {"system.chips=4", "system.torus_x=2", "system.torus_y=2",
                           "system.torus_z=1"};
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", chips == 8 ? sets8 : sets4, 4, cfg, &err),
                          NP_OK);
}

/* Analytical kernel durations (a fixed cost and the FLOPs at 1 TFLOP/s): cheap to simulate,
 * independent of the search. */
static np_status sx_time(void *ctx, const run_kernel *k, run_ktime *out, np_err *err)
{
    (void)ctx;
    (void)err;
    memset(out, 0, sizeof *out);
    out->ps = 200000 + (uint64_t)(k->hw_flops > 0 ? k->hw_flops : k->flops);
    out->chained_ps = out->ps;
    return NP_OK;
}

/* Every dp x tp x pp = 8 with pp <= 2 layers and dp | 16, one micro-batch size (1), counted by
 * hand per mesh: schedules (pp 1: one; pp 2: 1F1B and GPipe; interleaved needs pp V <= 2 layers:
 * none) x ZeRO (dp 1: 0; pp 2: 0, 1; else 0 .. 3) x sp (tp > 1: off, on) x recompute (none,
 * full: selective equals none under fused attention):
 *   tp 1 pp 1 dp 8: 1 x 4 x 1 x 2 = 8      tp 1 pp 2 dp 4: 2 x 2 x 1 x 2 = 8
 *   tp 2 pp 1 dp 4: 1 x 4 x 2 x 2 = 16     tp 2 pp 2 dp 2: 2 x 2 x 2 x 2 = 16
 *   tp 4 pp 1 dp 2: 1 x 4 x 2 x 2 = 16     tp 4 pp 2 dp 1: 2 x 1 x 2 x 2 = 8
 *   tp 8 pp 1 dp 1: 1 x 1 x 2 x 2 = 4      (pp 4 and 8: more than the 2 layers)
 * 76 in all; the plan refuses the 4 of tp 8, which does not divide the 4 heads. */
TEST(enumeration_matches_a_hand_count)
{
    arch_config cfg;
    sx_pod(&cfg, 8);
    nn_model_desc d;
    sx_gpt(&d, 2, 32, 16);
    search_opts o = {.cfg = &cfg, .model = &d, .chips = 8, .batch = 16, .max_microbatch = 1,
                     .objective = SEARCH_MEMORY, .top = 1, .time_kernel = sx_time};
    nn_strategy *s = NULL;
    uint32_t n = 0;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(search_enumerate(&o, &s, &n, &err), NP_OK);
    CU_ASSERT_EQUAL(n, 76);
    int per_tp[9] = {0};
    for (uint32_t i = 0; i < n; i++) {
        CU_ASSERT_EQUAL(s[i].dp * s[i].tp * s[i].pp, 8);
        CU_ASSERT(s[i].tp <= 8 && s[i].pp <= 2);
        per_tp[s[i].tp]++;
    }
    CU_ASSERT_EQUAL(per_tp[1], 16);
    CU_ASSERT_EQUAL(per_tp[2], 32);
    CU_ASSERT_EQUAL(per_tp[4], 24);
    CU_ASSERT_EQUAL(per_tp[8], 4);
    free(s);
    search_result r;
    CU_ASSERT_EQUAL_FATAL(search_run(&o, &r, &err), NP_OK);
    CU_ASSERT_EQUAL(r.n_cand, 76);
    CU_ASSERT_EQUAL(r.n_illegal, 4);
    for (uint32_t i = 0; i < r.n_cand; i++)
        if (r.cand[i].state == SEARCH_ILLEGAL) {
            CU_ASSERT_EQUAL(r.cand[i].s.tp, 8);
            CU_ASSERT_PTR_NOT_NULL(strstr(r.cand[i].why, "--tp 8 does not divide the 4 "
                                                        "attention heads"));
        }
    search_result_free(&r);
}

/* On a hierarchical system tp stays inside an island (a100-80g: 8 GPUs on NVSwitch), so 16
 * chips give the meshes of 8 above with tp 8 pp 2 too and dp doubled, never tp 16:
 * tp 1 (pp 1, 2): 8 + 8; tp 2: 16 + 16; tp 4: 16 + 16; tp 8 pp 1 dp 2: 1 x 4 x 2 x 2 = 16;
 * tp 8 pp 2 dp 1: 2 x 1 x 2 x 2 = 8. 104 in all. */
TEST(enumeration_keeps_tp_within_an_island)
{
    arch_config cfg;
    const char *sets[] = {"system.chips=16"};
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("a100-80g", sets, 1, &cfg, &err), NP_OK);
    nn_model_desc d;
    sx_gpt(&d, 2, 32, 16);
    search_opts o = {.cfg = &cfg, .model = &d, .chips = 16, .batch = 16, .max_microbatch = 1};
    nn_strategy *s = NULL;
    uint32_t n = 0;
    CU_ASSERT_EQUAL_FATAL(search_enumerate(&o, &s, &n, &err), NP_OK);
    CU_ASSERT_EQUAL(n, 104);
    for (uint32_t i = 0; i < n; i++)
        CU_ASSERT(s[i].tp <= 8);
    free(s);
}

/* What the search discards for memory is exactly what each candidate's plan says does not fit
 * (its largest rank against HBM), on a chip of 24 MiB where some strategies fit and some not. */
TEST(memory_pruning_is_the_plans)
{
    arch_config cfg;
    const char *sets[] = {"system.chips=4", "system.torus_x=2", "system.torus_y=2",
                          "system.torus_z=1", "chip.hbm_bytes=24 MiB"};
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", sets, 5, &cfg, &err), NP_OK);
    nn_model_desc d;
    sx_gpt(&d, 4, 256, 64);
    search_opts o = {.cfg = &cfg, .model = &d, .chips = 4, .batch = 8, .max_microbatch = 2,
                     .objective = SEARCH_MEMORY, .top = 1, .time_kernel = sx_time};
    search_result r;
    CU_ASSERT_EQUAL_FATAL(search_run(&o, &r, &err), NP_OK);
    CU_ASSERT(r.n_oom > 0);
    CU_ASSERT(r.n_oom + r.n_illegal < r.n_cand);
    nn_optim opt = run_job_optim();
    nn_model_opts mo = {.batch = 8, .compute = NN_BF16, .seed = 1};
    uint32_t oom = 0;
    for (uint32_t i = 0; i < r.n_cand; i++) {
        if (r.cand[i].state == SEARCH_ILLEGAL)
            continue;
        nn_plan *p = NULL;
        char why[256];
        CU_ASSERT_EQUAL_FATAL(run_build_plan(&d, &mo, &r.cand[i].s, &opt, &cfg, &p, why,
                                             sizeof why, &err), NP_OK);
        nn_plan_summary sum;
        CU_ASSERT_EQUAL_FATAL(nn_plan_summarize(p, &sum, &err), NP_OK);
        bool fits = sum.mem[sum.largest].total_bytes <= cfg.chip.hbm_bytes;
        CU_ASSERT_EQUAL(fits, r.cand[i].state != SEARCH_OOM);
        CU_ASSERT_EQUAL(sum.mem[sum.largest].total_bytes, r.cand[i].mem_bytes);
        oom += !fits;
        nn_plan_summary_free(&sum);
        nn_plan_free(p);
    }
    CU_ASSERT_EQUAL(oom, r.n_oom);
    search_result_free(&r);
}

/* Both bounds are at most the simulated step of every candidate (cheap <= tight <= step), on
 * the core model's kernels: GPTs of 2 and 4 layers (1F1B, GPipe, interleaved:2), llama-tiny
 * and mlp-tiny on 4 chips, every candidate simulated. */
static void sx_bounds_hold(const nn_model_desc *d, int64_t batch, int max_mb, int *checked)
{
    arch_config cfg;
    sx_pod(&cfg, 4);
    search_opts o = {.cfg = &cfg, .model = d, .chips = 4, .batch = batch,
                     .max_microbatch = max_mb, .exhaustive = true};
    search_result r;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(search_run(&o, &r, &err), NP_OK);
    CU_ASSERT(r.n_simulated > 0);
    CU_ASSERT_EQUAL(r.n_failed, 0);
    for (uint32_t i = 0; i < r.n_cand; i++) {
        const search_cand *c = &r.cand[i];
        if (c->state != SEARCH_SIMULATED)
            continue;
        (*checked)++;
        CU_ASSERT(c->bound_cheap_s > 0);
        CU_ASSERT(c->bound_cheap_s <= c->bound_s);
        CU_ASSERT(c->bound_s <= c->fig.step_s);
        if (!(c->bound_s <= c->fig.step_s) || !(c->bound_cheap_s <= c->bound_s)) {
            char name[160];
            printf("\n%s: cheap %.9g tight %.9g step %.9g\n",
                   search_strategy_name(&c->s, name, sizeof name), c->bound_cheap_s,
                   c->bound_s, c->fig.step_s);
        }
    }
    search_result_free(&r);
}

TEST(bounds_never_exceed_the_simulated_step)
{
    int checked = 0;
    nn_model_desc d;
    sx_gpt(&d, 4, 32, 16);
    sx_bounds_hold(&d, 8, 1, &checked);
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_load("llama-tiny", &d, &err), NP_OK);
    sx_bounds_hold(&d, 4, 1, &checked);
    CU_ASSERT_EQUAL_FATAL(nn_model_load("mlp-tiny", &d, &err), NP_OK);
    sx_bounds_hold(&d, 8, 2, &checked);
    CU_ASSERT(checked > 60);
}

/* The cheap bound's kernel term (search_bound_kernel_ps) is at most the core model's timing of
 * the kernel, alone and chained, for every kernel of the run graph of strategy s of a GPT on
 * cfg; *mem_bound counts the kernels whose bound is their outputs' bytes over the bandwidth
 * (the memory term), *n every kernel checked. */
static void sx_kernel_terms(const arch_config *cfg, const nn_model_desc *d, int64_t batch,
                            int dp, int tp, int pp, int *n, int *mem_bound)
{
    nn_model_opts mo = {.batch = batch, .compute = NN_BF16, .seed = 1};
    nn_strategy s;
    nn_strategy_default(&s);
    s.fuse_attention = s.fuse_softmax = true;
    s.dp = dp, s.tp = tp, s.pp = pp, s.microbatch = batch / dp;
    nn_optim optim = run_job_optim();
    nn_plan *p = NULL;
    char why[256];
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(run_build_plan(d, &mo, &s, &optim, cfg, &p, why, sizeof why, &err),
                          NP_OK);
    run_plan *rp = NULL;
    CU_ASSERT_EQUAL_FATAL(run_plan_build(p, cfg, NULL, &rp, &err), NP_OK);
    run_ktimer *t = NULL;
    CU_ASSERT_EQUAL_FATAL(run_ktimer_create(cfg, NULL, &t, &err), NP_OK);
    double peak = run_peak_flops(cfg, NN_BF16);
    for (uint32_t k = 0; k < rp->n_kspecs; k++) {
        run_ktime kt;
        CU_ASSERT_EQUAL_FATAL(run_ktimer_time(t, run_graph_kernel(rp->g, k), &kt, &err), NP_OK);
        const run_kspec *ks = &rp->kspecs[k];
        uint64_t b = search_bound_kernel_ps(ks, cfg);
        uint64_t timed = kt.chained_ps && kt.chained_ps < kt.ps ? kt.chained_ps : kt.ps;
        CU_ASSERT(b <= timed);
        if (b > timed)
            printf("\nkernel %s: bound %llu ps > timed %llu ps\n", ks->node->name,
                   (unsigned long long)b, (unsigned long long)timed);
        (*n)++;
        /* the FLOPs at peak, by hand, are below the bound: the memory term set it */
        double flops_ps = (double)nn_node_flops(ks->node) / peak * 1e12;
        *mem_bound += b > 0 && (double)b > flops_ps + 1;
    }
    run_ktimer_free(t);
    run_plan_free(rp);
    nn_plan_free(p);
}

/* ... on a100-80g as it is (its L2 at 7.2 TB/s) and without its L2 (the HBM's 2.0 TB/s, where
 * the bytes come closest to the timing), data, tensor and pipeline parallel, with activations
 * of 1 to 4 MiB per kernel so that the memory term is not lost in fixed costs. */
TEST(cheap_kernel_term_never_exceeds_the_core_models_timing)
{
    nn_model_desc d;
    sx_gpt(&d, 2, 512, 512);
    int n = 0, mem = 0;
    const char *no_l2[] = {"chip.l2_bytes=0"};
    for (int v = 0; v < 2; v++) {
        arch_config cfg;
        np_err err = {0};
        CU_ASSERT_EQUAL_FATAL(arch_resolve("a100-80g", no_l2, v, &cfg, &err), NP_OK);
        sx_kernel_terms(&cfg, &d, 4, 1, 1, 1, &n, &mem);
        sx_kernel_terms(&cfg, &d, 4, 1, 2, 2, &n, &mem);
    }
    CU_ASSERT(n > 40);
    CU_ASSERT(mem > 10);
}

/* Branch and bound finds the best strategies exhaustive simulation finds — the same
 * candidates in the same order with the same steps — and simulates fewer. */
static void sx_bnb(const arch_config *cfg, const nn_model_desc *d, int chips, int64_t batch,
                   int max_mb, int top, bool real_kernels, const char *cache, int jobs)
{
    search_opts o = {.cfg = cfg, .model = d, .chips = chips, .batch = batch,
                     .max_microbatch = max_mb, .top = top, .exhaustive = true, .jobs = jobs,
                     .kernel_cache = cache, .time_kernel = real_kernels ? NULL : sx_time};
    search_result all, bb;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(search_run(&o, &all, &err), NP_OK);
    if (real_kernels && !cache && jobs <= 1) { /* one timer for all: each kernel timed once */
        CU_ASSERT(all.kernels > 0);
        CU_ASSERT_EQUAL(all.kernels_simulated, all.kernels);
    }
    o.exhaustive = false;
    CU_ASSERT_EQUAL_FATAL(search_run(&o, &bb, &err), NP_OK);
    CU_ASSERT(all.n_order >= (uint32_t)top);
    CU_ASSERT(bb.n_order >= (uint32_t)top);
    CU_ASSERT(bb.n_simulated < all.n_simulated);
    CU_ASSERT_EQUAL(bb.n_pruned_cheap + bb.n_pruned_tight + bb.n_simulated,
                    all.n_simulated);
    for (int k = 0; k < top && k < (int)bb.n_order && k < (int)all.n_order; k++) {
        CU_ASSERT_EQUAL(bb.order[k], all.order[k]);
        CU_ASSERT_EQUAL(bb.cand[bb.order[k]].fig.step_s, all.cand[all.order[k]].fig.step_s);
    }
    search_result_free(&all);
    search_result_free(&bb);
}

TEST(branch_and_bound_equals_exhaustive_analytical_kernels)
{
    arch_config cfg;
    sx_pod(&cfg, 8);
    nn_model_desc d;
    sx_gpt(&d, 4, 32, 16);
    sx_bnb(&cfg, &d, 8, 8, 2, 1, false, NULL, 1);
    sx_bnb(&cfg, &d, 8, 8, 2, 3, false, NULL, 1);
    sx_bnb(&cfg, &d, 8, 8, 2, 3, false, NULL, 2);
}

TEST(branch_and_bound_equals_exhaustive_gpt_tiny_on_8_chips)
{
    arch_config cfg;
    sx_pod(&cfg, 8);
    nn_model_desc d;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_load("gpt-tiny", &d, &err), NP_OK);
    char cache[64];
    snprintf(cache, sizeof cache, "/tmp/npusim_test_search_%d.kcache", (int)getpid());
    sx_bnb(&cfg, &d, 8, 8, 2, 1, true, cache, 1);
    unlink(cache);
    /* workers: tight bounds and simulations several at a time, their kernel timings sent back
     * (no file: the search's timer is their only sharing) */
    sx_bnb(&cfg, &d, 8, 8, 2, 2, true, NULL, 1);
    sx_bnb(&cfg, &d, 8, 8, 2, 2, true, NULL, 2);
}

/* Screening in worker processes (-j) gives every candidate the state, memory, cheap bound and
 * message screening in this process gives. */
TEST(workers_screen_as_one_process_does)
{
    arch_config cfg;
    const char *sets[] = {"system.chips=4", "system.torus_x=2", "system.torus_y=2",
                          "system.torus_z=1", "chip.hbm_bytes=24 MiB"};
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", sets, 5, &cfg, &err), NP_OK);
    nn_model_desc d;
    sx_gpt(&d, 4, 256, 64);
    search_opts o = {.cfg = &cfg, .model = &d, .chips = 4, .batch = 8, .max_microbatch = 2,
                     .top = 2, .time_kernel = sx_time};
    search_result one, pool;
    CU_ASSERT_EQUAL_FATAL(search_run(&o, &one, &err), NP_OK);
    o.jobs = 3;
    CU_ASSERT_EQUAL_FATAL(search_run(&o, &pool, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(one.n_cand, pool.n_cand);
    CU_ASSERT(one.n_oom > 0);
    CU_ASSERT_EQUAL(one.n_oom, pool.n_oom);
    CU_ASSERT_EQUAL(one.n_illegal, pool.n_illegal);
    CU_ASSERT_EQUAL(one.hbm_bytes, pool.hbm_bytes);
    for (uint32_t i = 0; i < one.n_cand; i++) {
        CU_ASSERT_EQUAL(one.cand[i].state, pool.cand[i].state);
        CU_ASSERT_EQUAL(one.cand[i].mem_bytes, pool.cand[i].mem_bytes);
        CU_ASSERT_EQUAL(one.cand[i].bound_cheap_s, pool.cand[i].bound_cheap_s);
        /* the workers may bound more candidates (several at a time), never otherwise */
        if (one.cand[i].bound_s > 0 && pool.cand[i].bound_s > 0)
            CU_ASSERT_EQUAL(one.cand[i].bound_s, pool.cand[i].bound_s);
        if (one.cand[i].state == SEARCH_SIMULATED && pool.cand[i].state == SEARCH_SIMULATED)
            CU_ASSERT_EQUAL(one.cand[i].fig.step_s, pool.cand[i].fig.step_s);
        EXPECT_STR(pool.cand[i].why, one.cand[i].why);
    }
    for (uint32_t k = 0; k < 2 && k < one.n_order && k < pool.n_order; k++)
        CU_ASSERT_EQUAL(one.order[k], pool.order[k]);
    search_result_free(&one);
    search_result_free(&pool);
}
