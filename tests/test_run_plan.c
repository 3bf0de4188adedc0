/* test_run_plan.c — a parallel strategy's plan (framework/plan.h) run by the engine through
 * run_plan.h and run_job.h, with kernels timed analytically by the test (so the figures can be
 * checked against the schedules' formulas): pipeline bubbles of GPipe, 1F1B, interleaved
 * 1F1B and ZB-H1 (and its memory) with balanced stages, DDP bucket overlap, ZeRO-3 prefetch on fast and slow links, the
 * mapping of entries onto tasks (kernels, groups, peers, dependencies), FLOPs against the plan,
 * and that shortcuts and mirrored ranks change nothing (with Megatron-LM 2021's runtime too:
 * its blocking sends' clear-to-sends are mirrored like the sends). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "arch.h"
#include "harness.h"
#include "run_job.h"
#include "run_plan.h"
#include "trace_db.h"
#include "trace_stats.h"

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
    bool sp, tp_overlap; /* --sp, --tp-comm-overlap */
    bool param_gather;   /* --overlap-param-gather */
    bool full;
    bool megatron; /* Megatron-LM 2021's runtime: blocking p2p, host synchronizations, local
                      DDP, loss scaling and clipping, uniform recomputation */
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
    j.s.sp = js->sp;
    j.s.tp_comm_overlap = js->tp_overlap;
    j.s.overlap_param_gather = js->param_gather;
    j.full = js->full;
    if (js->megatron) {
        j.s.p2p_blocking = j.s.host_sync = true;
        j.s.ddp = NN_DDP_LOCAL;
        j.s.loss_scale = 8192;
        j.s.clip_grad = 1;
        j.s.recompute = NN_RECOMPUTE_UNIFORM;
    }
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
                    printf("\n%s p %d m %d: bubble %.2f %% (ratio %.3f), want %.2f %%\n",
                           s ? "1f1b" : "gpipe", p, m, rep.bubble_pct, rep.bubble_ratio, want);
                CU_ASSERT(fabs(rep.bubble_pct - want) <= 2.0);
                /* the same 2 points in the (p-1)/m form, f / (1 - f): d(ratio) = df / (1 - f)^2
                 * (the optimizer step of a stage that ends early is work inside the window) */
                double f = (p - 1.0) / (m + p - 1);
                CU_ASSERT(fabs(rep.bubble_ratio - (double)(p - 1) / m) <= 0.02 / ((1 - f) * (1 - f)));
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

/* One micro-batch's forward, B and W time on stage `stage` of the plan the job runs (ZB-H1's
 * T_F, T_B, T_W), in ps: the test's own durations (time_by_flops) of the kernels the run graph
 * gives the blocks' entries at micro-batch 0. */
static void zb_pass_times(const nn_model_desc *d, const job_spec *js, int stage, double *tf,
                          double *tb, double *tw)
{
    arch_config cfg;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve(js->arch, NULL, 0, &cfg, &err), NP_OK);
    nn_strategy s;
    nn_strategy_default(&s);
    s.pp = js->pp;
    s.schedule = js->schedule;
    s.microbatch = js->microbatch;
    s.n_stage_layers = s.pp;
    for (int i = 0; i < s.pp; i++)
        s.stage_layers[i] = js->stage_layers;
    nn_model_opts o = {.batch = js->batch, .compute = NN_BF16, .seed = 1};
    nn_optim adam = {.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
    nn_plan *p = NULL;
    run_plan *rp = NULL;
    CU_ASSERT_EQUAL_FATAL(nn_plan_build(d, &o, &s, &adam, &cfg, &p, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(run_plan_build(p, &cfg, NULL, &rp, &err), NP_OK);
    timing t = {.rate = 1e9};
    double sum[3] = {0, 0, 0};
    const nn_plan_class *c = &p->classes[stage];
    for (uint32_t i = 0; i < rp->n_tasks[stage]; i++) {
        const run_plan_task *pt = &rp->tasks[stage][i];
        if (pt->mb != 0 || pt->kernel == RUN_NONE || !pt->e)
            continue;
        for (int b = 0; b < c->n_blocks; b++) {
            const nn_plan_block *blk = &c->blocks[b];
            if (pt->e < blk->entries || pt->e >= blk->entries + blk->n_entries)
                continue;
            int k = blk->kind == NN_BLOCK_FORWARD ? 0 : blk->kind == NN_BLOCK_BACKWARD ? 1
                    : blk->kind == NN_BLOCK_BACKWARD_W ? 2 : -1;
            run_ktime kt;
            run_kernel kern = {.data = &rp->kspecs[pt->kernel]};
            CU_ASSERT_EQUAL_FATAL(time_by_flops(&t, &kern, &kt, &err), NP_OK);
            if (k >= 0)
                sum[k] += (double)kt.ps;
        }
    }
    *tf = sum[0], *tb = sum[1], *tw = sum[2];
    run_plan_free(rp);
    nn_plan_free(p);
}

/* Micro-batches of stage s whose forward has run and whose weight gradients have not (their
 * activations held), at their most over the schedule. */
static int zb_in_flight(const nn_plan_class *c)
{
    int n = 0, most = 0;
    for (int i = 0; i < c->n_sched; i++) {
        nn_plan_block_kind k = c->blocks[c->sched[i].block].kind;
        bool split = false;
        for (int b = 0; b < c->n_blocks; b++)
            split = split || c->blocks[b].kind == NN_BLOCK_BACKWARD_W;
        n += k == NN_BLOCK_FORWARD;
        n -= split ? k == NN_BLOCK_BACKWARD_W : k == NN_BLOCK_BACKWARD;
        most = n > most ? n : most;
    }
    return most;
}

TEST(zb_h1_bubble_is_the_papers_p_minus_1_times_f_plus_b_minus_w_and_memory_1f1bs)
{
    /* Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024), table 2: with the backward
     * split into B (input gradients) and W (weight gradients), ZB-H1's bubble is
     * (p-1)(T_F+T_B-T_W) against 1F1B's (p-1)(T_F+T_B+T_W), each stage computing m(T_F+T_B+T_W),
     * and no stage holds more micro-batches than 1F1B's first (p) */
    nn_model_desc d;
    gpt_desc(&d, 8);
    int ps[] = {2, 4, 8}, ms[] = {8, 16};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++) {
            int p = ps[i], m = ms[k];
            job_spec zb = {.arch = "a100-cluster", .pp = p, .batch = m, .microbatch = 1,
                           .schedule = NN_PP_ZB_H1, .stage_layers = 8 / p};
            job_spec one = zb;
            one.schedule = NN_PP_1F1B;
            double tf, tb, tw;
            zb_pass_times(&d, &zb, p / 2, &tf, &tb, &tw);
            /* W is the weight-gradient GEMMs: as many FLOPs as the forward's GEMMs, so
             * neither 0 nor all of the backward */
            CU_ASSERT(tw > 0.3 * tf && tw < tb);
            timing t = {.rate = 1e9};
            run_report rz, r1;
            np_err err = {0};
            CU_ASSERT_EQUAL_FATAL(run_spec(&d, &zb, &t, &rz, &err), NP_OK);
            CU_ASSERT_EQUAL_FATAL(run_spec(&d, &one, &t, &r1, &err), NP_OK);
            double bub = (p - 1) * (tf + tb - tw), work = m * (tf + tb + tw);
            double want = 100.0 * bub / (bub + work);
            /* 1F1B's bubble less ZB-H1's: (p-1)(T_F+T_B+T_W) - (p-1)(T_F+T_B-T_W) */
            double gain_s = 2.0 * (p - 1) * tw * 1e-12, got_gain_s = r1.bubble_s - rz.bubble_s;
            if (getenv("SHOW") || fabs(rz.bubble_pct - want) > 2.0 ||
                fabs(got_gain_s - gain_s) > 0.02 * r1.step_time_s)
                printf("\nzb-h1 p %d m %d: T_F %.1f T_B %.1f T_W %.1f us; bubble %.2f %%, want "
                       "%.2f %% (1f1b %.2f %%); bubble %.1f us less than 1f1b's, want %.1f us\n",
                       p, m, tf * 1e-6, tb * 1e-6, tw * 1e-6, rz.bubble_pct, want,
                       r1.bubble_pct, got_gain_s * 1e6, gain_s * 1e6);
            CU_ASSERT(fabs(rz.bubble_pct - want) <= 2.0);
            CU_ASSERT(fabs(got_gain_s - gain_s) <= 0.02 * r1.step_time_s);
            CU_ASSERT(rz.step_time_s < r1.step_time_s);
            run_report_free(&rz);
            run_report_free(&r1);
        }
}

TEST(zb_h1_holds_at_most_p_micro_batches_and_1f1bs_peak_on_a_stage_of_layers)
{
    nn_model_desc d;
    gpt_desc(&d, 8);
    int p = 4, m = 8;
    nn_plan *pl[2] = {NULL, NULL};
    for (int z = 0; z < 2; z++) {
        nn_strategy s;
        nn_strategy_default(&s);
        s.pp = p;
        s.microbatch = 1;
        s.schedule = z ? NN_PP_ZB_H1 : NN_PP_1F1B;
        nn_model_opts o = {.batch = m, .compute = NN_BF16, .seed = 1};
        nn_optim adam = {.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
        np_err err = {0};
        CU_ASSERT_EQUAL_FATAL(nn_plan_build(&d, &o, &s, &adam, NULL, &pl[z], &err), NP_OK);
    }
    for (int st = 0; st < p; st++) {
        /* every stage p in flight under ZB-H1 (B done, W not yet counts), p - s under 1F1B */
        CU_ASSERT_EQUAL(zb_in_flight(&pl[1]->classes[st]), p);
        CU_ASSERT_EQUAL(zb_in_flight(&pl[0]->classes[st]), p - st);
    }
    /* stages 1 and 2 hold only layers (2 each): 1F1B keeps p - s micro-batches' activations
     * S there; ZB-H1 keeps as many and, for the s micro-batches whose W waits, what W reads:
     * each linear layer's input and output gradient, M_W = 32 s b h bytes a layer in 16 bits
     * (Qi et al., table 1; 16 tokens, b 1, h 32 here) — at most p S, 1F1B's first stage's,
     * as M_W < S */
    for (int st = 1; st <= 2; st++) {
        nn_plan_mem m1, mz;
        np_err err = {0};
        CU_ASSERT_EQUAL_FATAL(nn_plan_class_memory(pl[0], &pl[0]->classes[st], &m1, &err), NP_OK);
        CU_ASSERT_EQUAL_FATAL(nn_plan_class_memory(pl[1], &pl[1]->classes[st], &mz, &err), NP_OK);
        double S = (double)m1.activations_bytes / (p - st);
        uint64_t m_w = 2 * 32 * 16 * 1 * 32;
        if (getenv("SHOW"))
            printf("\nstage %d activations: 1f1b %llu (S %.0f), zb-h1 %llu, M_W %llu\n", st,
                   (unsigned long long)m1.activations_bytes, S,
                   (unsigned long long)mz.activations_bytes, (unsigned long long)m_w);
        CU_ASSERT_EQUAL(mz.activations_bytes, m1.activations_bytes + (uint64_t)st * m_w);
        CU_ASSERT(mz.activations_bytes <= p * S);
    }
    nn_plan_free(pl[0]);
    nn_plan_free(pl[1]);
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
static void zero3(const char *link, const char *latency, double *total, double *exposed,
                  double *step)
{
    nn_model_desc d;
    gpt_desc(&d, 8);
    job_spec js = {.arch = "a100-cluster", .sets = {link, latency}, .dp = 4, .zero = 3,
                   .batch = 8, .microbatch = 2};
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
    /* every parameter is gathered by a collective of its own, as the step lowering runs a
     * ZeRO bucket: fast links have a latency to match (50 ns a hop) */
    zero3("system.link_gb_per_s=25", "system.link_latency_ns=50", &tf, &ef, &sf);
    zero3(getenv("SLOW") ? getenv("SLOW") : "system.link_gb_per_s=0.001",
          "system.link_latency_ns=500", &ts, &es, &ss);
    CU_ASSERT(tf > 0 && ts > 0);
    /* fast: the first gathers (nothing to overlap them with yet), the last reduce-scatters
     * and the latency of the backward pass's gathers, which the plan issues inside the layer
     * that needs them, show: a few percent of the step (4.5 % here) */
    CU_ASSERT(ef < 0.05 * sf);
    /* slow: each layer waits for its parameters, and the step grows by most of it */
    CU_ASSERT(es > 0.5 * ts);
    CU_ASSERT(ss > sf + 0.5 * ts);
}

/* ---- the trace against the report ------------------------------------------------------- */

/* Runs js with a trace and checks `npusim trace stats`'s figures (traces/trace_stats.h) on it
 * against the report's: per-unit utilization, exposed and total communication per kind, the
 * bubble. */
static void trace_agrees(const nn_model_desc *d, job_spec js)
{
    char dir[] = "/tmp/npusim_run_trace_XXXXXX", path[64];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.json.gz", dir);
    arch_config cfg;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve(js.arch, js.sets, js.sets[0] ? 1 : 0, &cfg, &err), NP_OK);
    timing t = {.rate = 1e10};
    run_job j = {.cfg = &cfg, .model = d, .steps = 1, .time_kernel = time_by_flops, .time_ctx = &t,
                 .optim = {.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95},
                 .trace_path = path};
    nn_strategy_default(&j.s);
    j.s.dp = js.dp ? js.dp : 1, j.s.tp = js.tp ? js.tp : 1, j.s.pp = js.pp ? js.pp : 1;
    j.s.zero = js.zero, j.s.schedule = js.schedule, j.s.microbatch = js.microbatch;
    j.s.virtual_stages = js.v ? js.v : 1;
    j.o = (nn_model_opts){.batch = js.batch, .compute = NN_BF16, .seed = 1};
    run_report rep;
    CU_ASSERT_EQUAL_FATAL(run_job_run(&j, &rep, &err), NP_OK);
    tdb *db = NULL;
    tstats st;
    CU_ASSERT_EQUAL_FATAL(tdb_load(path, &db, &err), NP_OK);
    CU_ASSERT_EQUAL_FATAL(tstats_compute(db, &st, &err), NP_OK);
    CU_ASSERT(fabs((double)st.span_ps * 1e-12 - rep.step_time_s) < 1e-12);
    for (int u = 0; u < RUN_UNIT_COUNT; u++) {
        const tstats_unit *x = NULL;
        for (size_t i = 0; i < st.n_units; i++)
            if (!strcmp(st.units[i].kind, run_unit_name((run_unit)u)))
                x = &st.units[i];
        CU_ASSERT_PTR_NOT_NULL_FATAL(x);
        CU_ASSERT_EQUAL(x->chips, rep.chips);
        CU_ASSERT(fabs(x->mean_pct - rep.units[u].mean_pct) < 1e-6);
        CU_ASSERT(fabs(x->min_pct - rep.units[u].min_pct) < 1e-6);
        CU_ASSERT(fabs(x->max_pct - rep.units[u].max_pct) < 1e-6);
    }
    CU_ASSERT_EQUAL(st.n_comm, rep.n_comm);
    for (uint32_t i = 0; i < rep.n_comm; i++) {
        const run_report_comm *c = &rep.comm[i];
        const tstats_comm *x = NULL;
        for (size_t k = 0; k < st.n_comm; k++)
            if (st.comm[k].kind != TDB_NONE &&
                !strcmp(tdb_str(db, st.comm[k].kind), run_comm_kind_name(c->kind)))
                x = &st.comm[k];
        CU_ASSERT_PTR_NOT_NULL_FATAL(x);
        CU_ASSERT_EQUAL(x->chips, c->chips);
        CU_ASSERT(fabs((double)x->total_ps * 1e-12 / x->chips - c->total_s) < 1e-12);
        CU_ASSERT(fabs((double)x->exposed_ps * 1e-12 / x->chips - c->exposed_s) < 1e-12);
    }
    if (rep.pp > 1) {
        CU_ASSERT(fabs(st.bubble_pct - rep.bubble_pct) < 1e-6);
        CU_ASSERT(fabs(st.bubble_ratio - rep.bubble_ratio) < 1e-6);
    } else {
        CU_ASSERT(st.bubble_pct < 0); /* no stages */
    }
    tstats_free(&st);
    tdb_free(db);
    run_report_free(&rep);
    unlink(path);
    rmdir(dir);
}

/* The report's communication of kind k (a zero row when the run had none). */
static run_report_comm comm_of(const run_report *rep, run_comm_kind k)
{
    for (uint32_t i = 0; i < rep->n_comm; i++)
        if (rep->comm[i].kind == k)
            return rep->comm[i];
    return (run_report_comm){.kind = k};
}

/* Runs js with kernels at 1 GFLOP/s: its step time and its communication of kind k. */
static void run_comm(const nn_model_desc *d, const job_spec *js, run_comm_kind k, double *step,
                     run_report_comm *c)
{
    timing t = {.rate = 1e9};
    run_report rep;
    np_err err = {0};
    np_status st = run_spec(d, js, &t, &rep, &err);
    if (st != NP_OK)
        fprintf(stderr, "%s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    *step = rep.step_time_s;
    *c = comm_of(&rep, k);
    run_report_free(&rep);
}

TEST(tp_comm_overlap_hides_sequence_parallel_collectives_behind_their_gemms)
{
    /* tp 4 with sequence parallelism, kernels at 1 GFLOP/s: each GEMM takes longer than the
     * all-gather before it or the reduce-scatter after it. Overlapped in chunks (TE's
     * userbuffers) those run under the GEMMs: what stays exposed is the collectives with no
     * GEMM beside them (the embedding's reduce-scatter, its gradient's all-gather, the
     * norms' gradient sums), well under the half of it that pairs with GEMMs, and the step
     * is shorter; the same collectives move the same bytes */
    nn_model_desc d;
    gpt_desc(&d, 4);
    double step[2], exposed[2], total[2], bytes[2];
    for (int ov = 0; ov < 2; ov++) {
        job_spec js = {.arch = "a100-cluster", .sets = {"system.chips=4", "system.island_chips=4"},
                       .tp = 4, .batch = 4, .microbatch = 1, .sp = true, .tp_overlap = ov};
        run_report_comm sp;
        run_comm(&d, &js, RUN_COMM_SP, &step[ov], &sp);
        exposed[ov] = sp.exposed_s;
        total[ov] = sp.total_s;
        bytes[ov] = sp.bytes_per_chip;
    }
    CU_ASSERT(total[0] > 0);
    CU_ASSERT(exposed[1] < 0.6 * exposed[0]);
    CU_ASSERT(step[1] < step[0] - 0.3 * exposed[0]);
    CU_ASSERT_EQUAL(bytes[1], bytes[0]);
    fprintf(stderr, "tp 4 sp: step %.4g -> %.4g s, sp exposed %.4g -> %.4g s\n", step[0],
            step[1], exposed[0], exposed[1]);
    /* it needs sequence parallelism, and the full fidelity's lowering has no such overlap */
    timing t = {.rate = 1e12};
    run_report rep;
    np_err err = {0};
    job_spec js = {.arch = "a100-cluster", .sets = {"system.chips=4", "system.island_chips=4"}, .tp = 4, .batch = 4,
                   .microbatch = 1, .tp_overlap = true};
    CU_ASSERT_EQUAL(run_spec(&d, &js, &t, &rep, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_STRING_EQUAL(err.msg, "--tp-comm-overlap needs --sp (it overlaps sequence "
                                    "parallelism's all-gathers and reduce-scatters with their "
                                    "GEMMs, as Megatron-Core's needs --sequence-parallel)");
    js.sp = true;
    js.full = true;
    err = (np_err){0};
    CU_ASSERT_EQUAL(run_spec(&d, &js, &t, &rep, &err), NP_ERR_USAGE);
    CU_ASSERT_STRING_EQUAL(err.msg, "--tp-comm-overlap is not available with --fidelity full "
                                    "yet (the step's lowering runs each collective between "
                                    "its kernels, in the step's order)");
}

TEST(overlap_param_gather_runs_the_updates_gathers_under_the_first_forward)
{
    /* dp 4 with the distributed optimizer (ZeRO-1): the step's end all-gathers every
     * parameter's update, all of it exposed. With --overlap-param-gather those gathers run
     * at the step's start, under the first micro-batch's forward (kernels at 1 GFLOP/s, the
     * forward is longer than the gathers): the exposed ZeRO communication falls by about the
     * gathers' time and the step with it; the same collectives move the same bytes */
    nn_model_desc d;
    gpt_desc(&d, 4);
    double step[2], exposed[2], bytes[2];
    for (int ov = 0; ov < 2; ov++) {
        job_spec js = {.arch = "a100-cluster", .sets = {"system.chips=4", "system.island_chips=4"},
                       .dp = 4, .zero = 1, .batch = 8, .microbatch = 1, .param_gather = ov};
        run_report_comm z;
        run_comm(&d, &js, RUN_COMM_ZERO, &step[ov], &z);
        exposed[ov] = z.exposed_s;
        bytes[ov] = z.bytes_per_chip;
    }
    CU_ASSERT(exposed[0] > 0);
    CU_ASSERT(exposed[1] < exposed[0]);
    CU_ASSERT(step[1] < step[0]);
    CU_ASSERT(fabs((step[0] - step[1]) - (exposed[0] - exposed[1])) < 0.01 * step[0]);
    CU_ASSERT_EQUAL(bytes[1], bytes[0]);
    fprintf(stderr, "dp 4 zero 1: step %.4g -> %.4g s, zero exposed %.4g -> %.4g s\n", step[0],
            step[1], exposed[0], exposed[1]);
    /* it needs the distributed optimizer */
    timing t = {.rate = 1e9};
    run_report rep;
    np_err err = {0};
    job_spec js = {.arch = "a100-cluster", .sets = {"system.chips=4", "system.island_chips=4"},
                   .dp = 4, .batch = 8, .microbatch = 1, .param_gather = true};
    CU_ASSERT_EQUAL(run_spec(&d, &js, &t, &rep, &err), NP_ERR_INCONSISTENT);
    CU_ASSERT_STRING_EQUAL(err.msg, "--overlap-param-gather needs --zero 1 or 2 (the distributed "
                                    "optimizer's parameter all-gathers, as Megatron-Core's needs "
                                    "--use-distributed-optimizer)");
}

TEST(trace_stats_of_the_run_trace_give_the_reports_utilization_communication_and_bubble)
{
    nn_model_desc d;
    gpt_desc(&d, 4);
    /* pipeline and data parallelism (1F1B, dp buckets, pp sends, tied embedding) */
    trace_agrees(&d, (job_spec){.arch = "a100-cluster", .dp = 2, .pp = 2, .batch = 8,
                                .microbatch = 1, .schedule = NN_PP_1F1B});
    /* tensor parallelism with mirrored ranks, interleaved pipeline */
    trace_agrees(&d, (job_spec){.arch = "a100-cluster", .tp = 2, .pp = 2, .v = 2, .batch = 4,
                                .microbatch = 1, .schedule = NN_PP_INTERLEAVED});
    /* ZeRO-3 on a torus */
    trace_agrees(&d, (job_spec){.arch = "tpu-pod", .sets = {"system.link_gb_per_s=1"}, .dp = 4,
                                .zero = 3, .batch = 8, .microbatch = 2});
}

/* ---- shortcuts, determinism, FLOPs -------------------------------------------------------- */

/* The report as JSON without what only says how the engine got there. */
static char *report_figures(const run_report *rep)
{
    json_t *j = run_report_json(rep);
    json_object_del(j, "engine");
    json_object_del(j, "wall_s");
    char *s = json_dumps(j, JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(j);
    return s;
}

TEST(kernel_cache_and_mirrored_ranks_on_or_off_give_identical_figures)
{
    nn_model_desc d;
    gpt_desc(&d, 4);
    for (int megatron = 0; megatron <= 1; megatron++) { /* its clear-to-sends mirrored too */
        char *want = NULL;
        uint32_t sim_on = 0, sim_off = 0, calls_on = 0, calls_off = 0;
        for (int k = 0; k < 4; k++) {
            /* islands of 2: the tp pairs' all-reduces have their links to themselves */
            job_spec js = {.arch = "a100-cluster", .sets = {"system.island_chips=2"}, .dp = 2,
                           .tp = 2, .pp = 2, .batch = 8, .microbatch = 1,
                           .schedule = NN_PP_1F1B, .no_cache = k & 1,
                           .no_dedup = (k >> 1) & 1, .megatron = megatron};
            timing t = {.rate = 1e10};
            run_report rep;
            np_err err = {0};
            CU_ASSERT_EQUAL_FATAL(run_spec(&d, &js, &t, &rep, &err), NP_OK);
            char *got = report_figures(&rep);
            if (!want)
                want = got;
            else {
                CU_ASSERT_STRING_EQUAL(got, want);
                free(got);
            }
            if (k == 0)
                sim_on = rep.ranks_simulated, calls_on = t.calls;
            if (k == 3)
                sim_off = rep.ranks_simulated, calls_off = t.calls;
            run_report_free(&rep);
        }
        /* and the shortcuts did something: tp mirrors (1 rank in 2), each kernel timed once */
        CU_ASSERT_EQUAL(sim_off, 8);
        CU_ASSERT(sim_on < sim_off);
        CU_ASSERT(calls_on * 4 < calls_off);
        free(want);
    }
}

TEST(measured_flops_are_the_plans_and_recomputation_counts_only_as_hardware_flops)
{
    nn_model_desc d;
    gpt_desc(&d, 4);
    for (int rc = 0; rc < 3; rc++) {
        arch_config cfg;
        np_err err = {0};
        CU_ASSERT_EQUAL_FATAL(arch_resolve("a100-cluster", NULL, 0, &cfg, &err), NP_OK);
        nn_strategy s;
        nn_strategy_default(&s);
        s.dp = s.tp = s.pp = 2;
        s.microbatch = 1;
        s.recompute = (nn_recompute)rc;
        nn_model_opts o = {.batch = 8, .compute = NN_BF16, .seed = 1};
        nn_optim opt = {.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95};
        nn_plan *p;
        nn_plan_summary sum;
        CU_ASSERT_EQUAL_FATAL(nn_plan_build(&d, &o, &s, &opt, &cfg, &p, &err), NP_OK);
        CU_ASSERT_EQUAL_FATAL(nn_plan_summarize(p, &sum, &err), NP_OK);
        timing t = {.rate = 1e10};
        run_job j = {.cfg = &cfg, .model = &d, .steps = 2, .s = s, .o = o, .optim = opt,
                     .time_kernel = time_by_flops, .time_ctx = &t};
        run_report rep;
        CU_ASSERT_EQUAL_FATAL(run_job_run(&j, &rep, &err), NP_OK);
        CU_ASSERT_DOUBLE_EQUAL(rep.model_flops_per_step, (double)sum.flops_per_step, 0.5);
        CU_ASSERT_DOUBLE_EQUAL(rep.hw_flops_per_step, (double)sum.hw_flops_per_step, 0.5);
        if (rc == NN_RECOMPUTE_NONE)
            CU_ASSERT_DOUBLE_EQUAL(rep.hw_flops_per_step, rep.model_flops_per_step, 0.5);
        if (rc == NN_RECOMPUTE_FULL)
            CU_ASSERT(rep.hw_flops_per_step > 1.2 * rep.model_flops_per_step);
        /* MFU and HFU as PaLM defines them: FLOPs per second over the chips' peak */
        double peak = 2.0 * 32 * 32 * 1 * 1.41e9 * 108;
        CU_ASSERT_DOUBLE_EQUAL(rep.peak_flops_per_chip, peak, 1);
        CU_ASSERT_DOUBLE_EQUAL(rep.mfu_pct, 100 * rep.model_flops_per_step / rep.step_time_s / 8 / peak,
                               1e-9);
        CU_ASSERT_DOUBLE_EQUAL(rep.hfu_pct, 100 * rep.hw_flops_per_step / rep.step_time_s / 8 / peak,
                               1e-9);
        CU_ASSERT_DOUBLE_EQUAL(rep.tokens_per_s, 8 * 16 / rep.step_time_s, 1e-6);
        run_report_free(&rep);
        nn_plan_summary_free(&sum);
        nn_plan_free(p);
    }
}

/* Every entry instance is one task, views none — but a ZeRO bucket (reduce-scatters of the
 * gradients, all-gathers of the parameters) is one collective per node, as the step lowering
 * runs it; a data-parallel bucket of accumulators' all-reduces is one. */
TEST(every_entry_instance_becomes_one_task_and_views_none)
{
    nn_model_desc d;
    gpt_desc(&d, 4);
    arch_config cfg;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("a100-cluster", NULL, 0, &cfg, &err), NP_OK);
    nn_strategy s;
    nn_strategy_default(&s);
    s.dp = s.tp = s.pp = 2;
    s.microbatch = 1;
    s.zero = 1;
    nn_model_opts o = {.batch = 8, .compute = NN_BF16, .seed = 1};
    nn_optim opt = {.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95};
    nn_plan *p;
    CU_ASSERT_EQUAL_FATAL(nn_plan_build(&d, &o, &s, &opt, &cfg, &p, &err), NP_OK);
    run_plan *rp;
    CU_ASSERT_EQUAL_FATAL(run_plan_build(p, &cfg, &(run_plan_opts){.nodes_only = true}, &rp, &err),
                          NP_OK);
    uint64_t views = 0, zero_nodes = 0;
    for (int c = 0; c < p->n_classes; c++) {
        uint32_t n[4] = {0}, got[RUN_TASK_KIND_COUNT] = {0};
        nn_plan_iter it;
        nn_plan_iter_begin(&it, p, &p->classes[c]);
        const nn_plan_entry *e;
        while ((e = nn_plan_iter_next(&it, NULL, NULL))) {
            /* views: reshapes and the like, and the slice of a boundary each tp rank sends
             * (the pipeline's scatter/gather: its bytes at the rank's offset) */
            bool view = e->kind == NN_PLAN_COMPUTE && ((nn_op_flags(e->nodes[0]->op) & NN_OPF_VIEW) ||
                                                      nn_plan_node_is_offset_view(e->nodes[0]));
            views += view;
            bool zero = e->kind == NN_PLAN_COLLECTIVE && e->nodes[0]->op != NN_OP_ALL_REDUCE;
            n[e->kind] += view ? 0 : zero ? (uint32_t)e->n_nodes : 1;
            zero_nodes += zero ? (uint32_t)e->n_nodes : 0;
        }
        for (uint32_t t = 0; t < rp->n_tasks[c]; t++) {
            const nn_plan_entry *te = rp->tasks[c][t].e;
            got[te->kind == NN_PLAN_COMPUTE      ? RUN_TASK_COMPUTE
                : te->kind == NN_PLAN_COLLECTIVE ? RUN_TASK_COLL
                : te->kind == NN_PLAN_SEND       ? RUN_TASK_SEND
                                                 : RUN_TASK_RECV]++;
        }
        CU_ASSERT_EQUAL(run_graph_tasks(rp->g, (uint32_t)c), rp->n_tasks[c]);
        CU_ASSERT_EQUAL(got[RUN_TASK_COMPUTE], n[NN_PLAN_COMPUTE]);
        CU_ASSERT_EQUAL(got[RUN_TASK_COLL], n[NN_PLAN_COLLECTIVE]);
        CU_ASSERT_EQUAL(got[RUN_TASK_SEND], n[NN_PLAN_SEND]);
        CU_ASSERT_EQUAL(got[RUN_TASK_RECV], n[NN_PLAN_RECV]);
        CU_ASSERT(n[NN_PLAN_SEND] > 0 && n[NN_PLAN_COLLECTIVE] > 0);
    }
    CU_ASSERT(views > 0);
    CU_ASSERT(zero_nodes > (uint64_t)p->n_classes); /* buckets of several nodes */
    CU_ASSERT_EQUAL(rp->views, views);
    CU_ASSERT_EQUAL(run_graph_ranks(rp->g), 8);
    for (uint32_t r = 0; r < 8; r++) {
        CU_ASSERT_EQUAL(run_graph_chip_of(rp->g, r), (uint32_t)p->mesh.chip[r]);
        CU_ASSERT_EQUAL(run_graph_class_of(rp->g, r), (uint32_t)nn_plan_rank_class(p, (int)r));
    }
    run_plan_free(rp);
    nn_plan_free(p);
}

TEST(ops_without_kernels_are_named_together_with_their_shapes_and_nothing_is_guessed)
{
    const char *models[] = {"mlp-tiny", "gpt-tiny"};
    for (int m = 0; m < 2; m++) {
        nn_model_desc d;
        arch_config cfg;
        np_err err = {0};
        CU_ASSERT_EQUAL_FATAL(nn_model_load(models[m], &d, &err), NP_OK);
        CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", NULL, 0, &cfg, &err), NP_OK);
        nn_strategy s;
        nn_strategy_default(&s);
        s.dp = 2;
        nn_model_opts o = {.batch = 4, .compute = NN_BF16, .seed = 1};
        nn_optim opt = {.kind = NN_OPTIM_ADAMW, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95};
        nn_plan *p;
        CU_ASSERT_EQUAL_FATAL(nn_plan_build(&d, &o, &s, &opt, &cfg, &p, &err), NP_OK);
        /* the ops of the plan the compiler has no kernel for, found here on their own */
        bool missing[NN_OP_COUNT] = {false};
        int n_missing = 0;
        nn_plan_iter it;
        nn_plan_iter_begin(&it, p, &p->classes[0]);
        const nn_plan_entry *e;
        while ((e = nn_plan_iter_next(&it, NULL, NULL))) {
            nn_op op = e->nodes[0]->op;
            /* in-place updates without kernels of their own run as add, cast, broadcast_to */
            nn_op as = op == NN_OP_GRAD_ACC ? NN_OP_ADD
                       : op == NN_OP_COPY_TO ? NN_OP_CAST
                       : op == NN_OP_FILL    ? NN_OP_BROADCAST_TO
                                             : op;
            if (e->kind == NN_PLAN_COMPUTE && !(nn_op_flags(op) & NN_OPF_VIEW) &&
                !kc_no_kernel_reason(op) && !kc_kernel_find(op) && !kc_kernel_find(as) &&
                !missing[op]) {
                missing[op] = true;
                n_missing++;
            }
        }
        run_plan *rp = NULL;
        np_status st = run_plan_build(p, &cfg, NULL, &rp, &err);
        if (n_missing == 0) {
            /* every op has a kernel: it runs, or a kernel refuses its shapes (a compiler
             * limit, named), or its parameters cannot be mapped (named too) */
            CU_ASSERT(st == NP_OK || strstr(err.msg, "kernel") != NULL);
        } else {
            CU_ASSERT_EQUAL(st, NP_ERR_MISSING);
            CU_ASSERT_PTR_NULL(rp);
            char want[64];
            snprintf(want, sizeof want, "%s: ", models[m]);
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, want));
            int said = atoi(err.msg + strlen(want)); /* "N ops of the plan ..." */
            CU_ASSERT(said >= n_missing); /* and those whose parameters cannot be mapped */
            int named = 0;
            for (int op = 0; op < NN_OP_COUNT; op++) {
                char w[48];
                snprintf(w, sizeof w, "%s ", nn_op_name((nn_op)op)); /* "relu bf16[8,32] -> ..." */
                if (missing[op] && strstr(err.msg, w))
                    named++;
            }
            CU_ASSERT(named >= (n_missing < 6 ? n_missing : 6));
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bf16[")); /* shapes with their dtypes */
        }
        run_plan_free(rp);
        nn_plan_free(p);
    }
}

/* ---- the JSON report --------------------------------------------------------------------- */

TEST(the_json_report_has_the_issues_names_and_npusim_report_reads_it)
{
    nn_model_desc d;
    gpt_desc(&d, 4);
    job_spec js = {.arch = "a100-cluster", .dp = 2, .tp = 2, .pp = 2, .batch = 8, .microbatch = 1,
                   .schedule = NN_PP_1F1B};
    timing t = {.rate = 1e10};
    run_report rep;
    np_err err = {0};
    CU_ASSERT_EQUAL_FATAL(run_spec(&d, &js, &t, &rep, &err), NP_OK);
    json_t *j = run_report_json(&rep);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    const char *top[] = {"model", "arch", "chips", "schedule", "recompute", "zero", "sp",
                         "mesh", "micro_batches", "microbatch", "step_time_s", "tokens_per_s",
                         "model_flops_per_step", "mfu_pct", "hfu_pct", "bubble_pct",
                         "bubble_ratio", "comm", "units", "links", "memory", "fidelity",
                         "wall_s"};
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        CU_ASSERT_PTR_NOT_NULL(json_object_get(j, top[i]));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "fidelity")), "fast");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "chips")), 8);
    json_t *c, *u, *l;
    size_t i;
    json_array_foreach(json_object_get(j, "comm"), i, c) {
        CU_ASSERT(json_is_string(json_object_get(c, "kind")));
        CU_ASSERT(json_is_number(json_object_get(c, "total_s")));
        CU_ASSERT(json_is_number(json_object_get(c, "exposed_s")));
        CU_ASSERT(json_is_number(json_object_get(c, "bytes_per_chip")));
        CU_ASSERT_PTR_NULL(json_object_get(c, "bytes")); /* renamed: it is per chip */
    }
    CU_ASSERT(json_array_size(json_object_get(j, "comm")) >= 3); /* tp, dp, pp */
    /* a chip's step: compute + exposed communication + bubble + other idle, each measured */
    json_t *tm = json_object_get(j, "time");
    double parts = json_number_value(json_object_get(tm, "compute_s")) +
                   json_number_value(json_object_get(tm, "exposed_comm_s")) +
                   json_number_value(json_object_get(tm, "bubble_s")) +
                   json_number_value(json_object_get(tm, "idle_s"));
    double step = json_number_value(json_object_get(j, "step_time_s"));
    CU_ASSERT(fabs(parts - step) <= 1e-9 * step);
    CU_ASSERT(json_number_value(json_object_get(tm, "bubble_s")) > 0);
    CU_ASSERT(json_number_value(json_object_get(tm, "exposed_comm_s")) > 0);
    json_array_foreach(json_object_get(j, "units"), i, u)
        for (int k = 0; k < 3; k++)
            CU_ASSERT(json_is_number(json_object_get(u, (const char *[]){"min_util_pct",
                                                      "mean_util_pct", "max_util_pct"}[k])));
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "units")), RUN_UNIT_COUNT);
    json_array_foreach(json_object_get(j, "links"), i, l) {
        CU_ASSERT(json_is_string(json_object_get(l, "name")));
        CU_ASSERT(json_is_number(json_object_get(l, "avg_gbps")));
        CU_ASSERT(json_is_number(json_object_get(l, "peak_gbps")));
    }
    CU_ASSERT(json_array_size(json_object_get(j, "links")) > 0);
    json_t *m = json_object_get(j, "memory");
    CU_ASSERT(json_is_integer(json_object_get(m, "peak_bytes")));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(m, "hbm_bytes")), 80LL << 30);
    /* npusim report draws its cards, utilization, links, memory and communication from it */
    char dir[] = "/tmp/npusim_run_report_XXXXXX", path[64], html[64];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/run.json", dir);
    snprintf(html, sizeof html, "%s/r.html", dir);
    CU_ASSERT_EQUAL(json_dump_file(j, path, 0), 0);
    harness_run r = harness_npusim("report", path, "-o", html, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    char *page = harness_read_file(html, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(page);
    const char *want[] = {"step time", "MFU", "pipeline bubble", "exposed communication",
                          "chart-util", "chart-memory",
                          "chart-links"}; /* the chips the run used of a100-cluster's 1024 */
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        CU_ASSERT_PTR_NOT_NULL(strstr(page, want[k]));
    free(page);
    harness_run_free(&r);
    unlink(html);
    unlink(path);
    rmdir(dir);
    json_decref(j);
    run_report_free(&rep);
}
