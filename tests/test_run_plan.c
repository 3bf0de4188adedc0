/* test_run_plan.c — a parallel strategy's plan (framework/plan.h) run by the engine through
 * run_plan.h and run_job.h, with kernels timed analytically by the test (so the figures can be
 * checked against the schedules' formulas): pipeline bubbles of GPipe, 1F1B and interleaved
 * 1F1B with balanced stages, DDP bucket overlap, ZeRO-3 prefetch on fast and slow links, the
 * mapping of entries onto tasks (kernels, groups, peers, dependencies), FLOPs against the plan,
 * and that shortcuts and mirrored ranks change nothing. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "harness.h"
#include "run_job.h"
#include "run_plan.h"

/* Durations: a node in a model layer takes its FLOPs at rate flop/s (at least 1 ns); work
 * outside the layers (input, head, loss, optimizer) takes outside_ps. */
typedef struct timing {
    double rate;
    uint64_t outside_ps;
    uint32_t calls;
} timing;

static np_status time_by_flops(void *ctx, const run_kernel *k, run_ktime *out, np_err *err)
{
    (void)err;
    timing *t = ctx;
    const run_kspec *ks = k->data;
    t->calls++;
    memset(out, 0, sizeof *out);
    if (ks->node->layer < 0)
        out->ps = t->outside_ps;
    else
        out->ps = (uint64_t)(fmax(1000.0, (double)nn_node_flops(ks->node) / t->rate * 1e12));
    out->unit_ps[RUN_UNIT_MXU] = out->ps / 2;
    return NP_OK;
}

/* A GPT of `layers` equal layers (width 32, 4 heads, 16 tokens; a model file written here):
 * every layer's work is the same, and what is outside the layers (embedding, head, loss)
 * takes no time, so pipeline stages of equal layer counts are balanced. */
static void gpt_desc(nn_model_desc *d, int layers)
{
    char text[512];
    snprintf(text, sizeof text, "family = gpt\ndescription = balanced\nlayers = %d\n"
             "d_model = 32\nheads = 4\nvocab = 16\ncontext = 16\nbatch = 4\n", layers);
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_parse("balanced.model", text, d, &err), NP_OK);
}

typedef struct job_spec {
    const char *arch;
    const char *sets[4];
    int dp, tp, pp, zero, v;
    int64_t batch, microbatch;
    nn_pp_schedule schedule;
    double bucket_mb;
    int stage_layers; /* layers per chunk (0: balanced by the plan) */
    bool no_cache, no_dedup;
} job_spec;

static np_status run_spec(const nn_model_desc *d, const job_spec *js, timing *t, run_report *rep,
                          np_err *err)
{
    arch_config cfg;
    size_t n_sets = 0;
    while (n_sets < 4 && js->sets[n_sets])
        n_sets++;
    if (arch_resolve(js->arch, js->sets, n_sets, &cfg, err) != NP_OK)
        return err->status;
    run_job j = {.cfg = &cfg, .model = d, .steps = 1, .optim = {.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8},
                
                 .time_kernel = time_by_flops, .time_ctx = t, .no_cache = js->no_cache,
                 .no_dedup = js->no_dedup, .trace_path = getenv("TRACE")};
    nn_strategy_default(&j.s);
    j.s.dp = js->dp ? js->dp : 1;
    j.s.tp = js->tp ? js->tp : 1;
    j.s.pp = js->pp ? js->pp : 1;
    j.s.zero = js->zero;
    j.s.schedule = js->schedule;
    j.s.virtual_stages = js->v ? js->v : 1;
    j.s.microbatch = js->microbatch;
    j.s.bucket_mb = js->bucket_mb;
    if (js->stage_layers) {
        j.s.n_stage_layers = j.s.pp * j.s.virtual_stages;
        for (int i = 0; i < j.s.n_stage_layers; i++)
            j.s.stage_layers[i] = js->stage_layers;
    }
    j.o = (nn_model_opts){.batch = js->batch, .compute = NN_BF16, .seed = 1};
    return run_job_run(&j, rep, err);
}

TEST(gpipe_and_1f1b_bubbles_of_balanced_stages_are_p_minus_1_over_m_plus_p_minus_1)
{
    nn_model_desc d;
    gpt_desc(&d, 8);
    int ps[] = {2, 4, 8}, ms[] = {4, 8, 16, 32};
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 4; k++) {
                int p = ps[i], m = ms[k];
                job_spec js = {.arch = "a100-cluster", .pp = p, .batch = m, .microbatch = 1,
                               .schedule = s ? NN_PP_1F1B : NN_PP_GPIPE,
                               .stage_layers = 8 / p};
                timing t = {.rate = 1e9};
                run_report rep;
                np_err err = {0};
                CU_ASSERT_EQUAL_FATAL(run_spec(&d, &js, &t, &rep, &err), NP_OK);
                double want = 100.0 * (p - 1) / (m + p - 1);
                if (getenv("SHOW") || fabs(rep.bubble_pct - want) > 2.0)
                    printf("\n%s p %d m %d: bubble %.2f %%, want %.2f %%\n", s ? "1f1b" : "gpipe",
                           p, m, rep.bubble_pct, want);
                CU_ASSERT(fabs(rep.bubble_pct - want) <= 2.0);
                CU_ASSERT(fabs(rep.bubble_ratio - (double)(p - 1) / m) <= 0.02 * (p - 1.0) / m + 0.02);
                run_report_free(&rep);
            }
}

TEST(interleaved_1f1b_divides_the_bubble_by_the_virtual_stages)
{
    int ps[] = {2, 4, 8}, vs[] = {2, 4};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++) {
            int p = ps[i], v = vs[k], m = 2 * p;
            if (p * v > 16)
                continue;
            nn_model_desc d;
            gpt_desc(&d, p * v);
            job_spec js = {.arch = "a100-cluster", .pp = p, .v = v, .batch = m, .microbatch = 1,
                           .schedule = NN_PP_INTERLEAVED, .stage_layers = 1};
            timing t = {.rate = 1e9};
            run_report rep;
            np_err err = {0};
            CU_ASSERT_EQUAL_FATAL(run_spec(&d, &js, &t, &rep, &err), NP_OK);
            double want = 100.0 * (p - 1) / (v * m + p - 1);
            if (getenv("SHOW") || fabs(rep.bubble_pct - want) > 2.0)
                printf("\ninterleaved p %d v %d m %d: bubble %.2f %% (ratio %.3f), want %.2f %% "
                       "(%.3f)\n", p, v, m, rep.bubble_pct, rep.bubble_ratio, want,
                       (p - 1.0) / (v * m));
            CU_ASSERT(fabs(rep.bubble_pct - want) <= 2.0);
            CU_ASSERT(fabs(rep.bubble_ratio - (p - 1.0) / (v * m)) <= 0.02);
            CU_ASSERT(fabs(rep.bubble_analytical * 100 - want) < 1e-9);
            run_report_free(&rep);
        }
}

/* Exposed and total data-parallel communication of a dp-4 step with buckets of mb MiB. */
static void ddp(double bucket_mb, const char *link, double *total, double *exposed)
{
    nn_model_desc d;
    gpt_desc(&d, 8);
    job_spec js = {.arch = "a100-cluster", .sets = {link}, .dp = 4, .batch = 8, .microbatch = 2,
                   .bucket_mb = bucket_mb};
    timing t = {.rate = getenv("RATE") ? atof(getenv("RATE")) : 1e10};
    run_report rep;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(run_spec(&d, &js, &t, &rep, &err), NP_OK);
    *total = *exposed = -1;
    for (uint32_t i = 0; i < rep.n_comm; i++)
        if (rep.comm[i].kind == RUN_COMM_DP)
            *total = rep.comm[i].total_s, *exposed = rep.comm[i].exposed_s;
    if (getenv("SHOW"))
        printf("\nddp bucket %.3f MiB %s: dp total %.3f ms exposed %.3f ms, step %.3f ms\n",
               bucket_mb, link, *total * 1e3, *exposed * 1e3, rep.step_time_s * 1e3);
    run_report_free(&rep);
}

TEST(ddp_buckets_overlap_the_backward_pass_and_more_buckets_expose_less)
{
    double t1, e1, t2, e2, t3, e3;
    const char *slow = getenv("SLOW") ? getenv("SLOW") : "system.link_gb_per_s=0.02";
    ddp(100, slow, &t1, &e1);   /* one bucket: the whole gradient after the backward pass */
    ddp(0.05, slow, &t2, &e2);  /* about one per layer */
    ddp(0.01, slow, &t3, &e3);  /* several per layer */
    CU_ASSERT(t1 > 0 && t2 > 0 && t3 > 0);
    CU_ASSERT(e2 < t2 && e3 < t3);
    CU_ASSERT(fabs(e1 - t1) <= 1e-6 * t1); /* one bucket after the last gradient: all exposed */
    CU_ASSERT(e2 < 0.5 * e1);
    CU_ASSERT(e3 < e2);
}

/* ZeRO-3's exposed and total all-gather / reduce-scatter time at dp 4. */
static void zero3(const char *link, double *total, double *exposed, double *step)
{
    nn_model_desc d;
    gpt_desc(&d, 8);
    job_spec js = {.arch = "a100-cluster", .sets = {link}, .dp = 4, .zero = 3, .batch = 8,
                   .microbatch = 2};
    timing t = {.rate = getenv("RATE") ? atof(getenv("RATE")) : 1e10};
    run_report rep;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(run_spec(&d, &js, &t, &rep, &err), NP_OK);
    *total = *exposed = -1;
    for (uint32_t i = 0; i < rep.n_comm; i++)
        if (rep.comm[i].kind == RUN_COMM_ZERO)
            *total = rep.comm[i].total_s, *exposed = rep.comm[i].exposed_s;
    *step = rep.step_time_s;
    if (getenv("SHOW"))
        printf("\nzero3 %s: total %.3f ms exposed %.3f ms, step %.3f ms\n", link, *total * 1e3,
               *exposed * 1e3, rep.step_time_s * 1e3);
    run_report_free(&rep);
}

TEST(zero3_prefetch_hides_all_gathers_on_fast_links_and_exposes_them_on_slow_ones)
{
    double tf, ef, sf, ts, es, ss;
    zero3("system.link_gb_per_s=25", &tf, &ef, &sf);
    zero3(getenv("SLOW") ? getenv("SLOW") : "system.link_gb_per_s=0.001", &ts, &es, &ss);
    CU_ASSERT(tf > 0 && ts > 0);
    /* fast: the first gathers (nothing to overlap them with yet), the last reduce-scatters
     * and the latency of the backward pass's gathers, which the plan issues inside the layer
     * that needs them, show: a few percent of the step (3.5 % here) */
    CU_ASSERT(ef < 0.05 * sf);
    /* slow: each layer waits for its parameters, and the step grows by most of it */
    CU_ASSERT(es > 0.5 * ts);
    CU_ASSERT(ss > sf + 0.5 * ts);
}
