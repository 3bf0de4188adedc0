/* test_run_megatron.c — the runtime behaviours of Megatron-LM 2021 that the strategy can select
 * (nn_strategy.p2p_blocking, host_sync, ddp), run by the fast engine on real plans whose
 * kernels the test times by hand, against timelines written out here from Megatron-LM's code:
 *
 *   - blocking p2p (p2p_communication.py, _communicate: batch_isend_irecv, req.wait(),
 *     torch.cuda.synchronize()): a send moves data only once its receiver has posted the
 *     receive (its clear-to-send, NN_PLAN_CTS_BYTES, arrives), the stage goes on only when the
 *     whole call is done, and its next kernel pays the host's launch; 1F1B with p = 2, m = 2
 *     step by step, against the eager run of the same plan step by step;
 *   - the host's synchronizations (timers) and Megatron's local DDP: one all-reduce of all
 *     gradients after the whole backward, then the optimizer; every phase's first kernel pays
 *     the launch.
 *
 * The network's part — a transfer of n bytes between the two chips, an all-reduce of n bytes —
 * is measured on the same network alone (tests/test_run_engine.c checks those against their
 * alpha-beta costs); the compositions are by hand. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "harness.h"
#include "net.h"
#include "run_engine.h"
#include "run_plan.h"

/* ---- fixtures ------------------------------------------------------------------------------ */

/* The tiny preset's chips, `chips` of them on one switch; `sets` change its keys. */
typedef struct tnet {
    arch_config cfg;
    net_params np;
} tnet;

static void tnet_init(tnet *f, uint32_t chips, const char *const *sets, size_t n_sets)
{
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, n_sets, &f->cfg, &e), NP_OK);
    f->cfg.system.chips = (int)chips;
    net_params_from_arch(&f->cfg, &f->np);
    f->np.topology = ARCH_TOPOLOGY_SWITCH;
    f->np.chips = chips;
    f->np.dims[0] = chips;
    f->np.dims[1] = f->np.dims[2] = 1;
    if (f->np.switch_radix < chips)
        f->np.switch_radix = chips;
}

/* Kernel durations by the region of the node: forward, backward (and recomputation), and the
 * step's own work (zeroing, optimizer). */
typedef struct dur {
    uint64_t fwd_ps, bwd_ps, optim_ps;
} dur;

static uint64_t dur_of(const dur *d, const nn_tensor *t)
{
    return t->region == NN_REGION_FORWARD ? d->fwd_ps
           : t->region == NN_REGION_OPTIM ? d->optim_ps
                                          : d->bwd_ps;
}

static np_status time_by_region(void *ctx, const run_kernel *k, run_ktime *out, np_err *err)
{
    (void)err;
    const run_kspec *ks = k->data;
    memset(out, 0, sizeof *out);
    out->ps = dur_of(ctx, ks->node);
    return NP_OK;
}

/* An MLP of four equal hidden layers, wide enough that a boundary takes a while to send. */
static nn_plan *mlp_plan(int dp, int pp, int64_t batch, int64_t micro, bool blocking,
                         bool host_sync, nn_ddp ddp)
{
    nn_model_desc d;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(nn_model_parse("wide.model", "family = mlp\ninputs = 64\n"
                                         "hidden = 2048 2048 2048 2048\nclasses = 8\n",
                                         &d, &e), NP_OK);
    nn_strategy s;
    nn_strategy_default(&s);
    s.dp = dp;
    s.pp = pp;
    s.microbatch = micro;
    s.p2p_blocking = blocking;
    s.host_sync = host_sync;
    s.ddp = ddp;
    nn_model_opts o = {.batch = batch, .compute = NN_F32, .seed = 1};
    nn_optim sgd = {.kind = NN_OPTIM_SGD, .lr = 0.1, .momentum = 0.9};
    nn_plan *p = NULL;
    np_status st = nn_plan_build(&d, &o, &s, &sgd, NULL, &p, &e);
    if (st != NP_OK)
        fprintf(stderr, "plan: %s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    return p;
}

/* Runs plan p's step on f with durations d. */
static run_result *run_plan_timed(const nn_plan *p, const tnet *f, dur *d, run_plan **rp_out)
{
    np_err e = {0};
    run_plan *rp = NULL;
    CU_ASSERT_EQUAL_FATAL(run_plan_build(p, &f->cfg, &(run_plan_opts){.nodes_only = true}, &rp,
                                         &e), NP_OK);
    run_opts o = {.time_kernel = time_by_region, .time_ctx = d, .steps = 1};
    run_result *r = NULL;
    np_status st = run_simulate(rp->g, &f->cfg, &f->np, &o, &r, &e);
    if (st != NP_OK)
        fprintf(stderr, "run: %s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    if (rp_out)
        *rp_out = rp;
    else
        run_plan_free(rp);
    return r;
}

/* Compute time of one micro-batch's forward (bwd: backward) block of stage s, and the kernels
 * of the step blocks, from the tasks the plan became. */
static uint64_t block_ps(const run_plan *rp, int s, nn_region region, const dur *d)
{
    uint64_t ps = 0;
    for (uint32_t t = 0; t < rp->n_tasks[s]; t++) {
        const run_plan_task *x = &rp->tasks[s][t];
        if (x->kernel == RUN_NONE || x->mb > 0)
            continue;
        const nn_tensor *n = rp->kspecs[x->kernel].node;
        bool bwd = n->region == NN_REGION_BACKWARD || n->region == NN_REGION_RECOMPUTE;
        if ((region == NN_REGION_BACKWARD && bwd) || n->region == region)
            ps += dur_of(d, n);
    }
    return ps;
}

/* The time one send of n bytes from chip 0 to chip 1 takes on f's network, alone. */
static uint64_t send_ps(const tnet *f, uint64_t n)
{
    run_graph *g;
    np_err e = {0};
    uint32_t c0, c1;
    CU_ASSERT_EQUAL_FATAL(run_graph_create(2, &g, &e), NP_OK);
    run_graph_add_class(g, "a", &c0, &e);
    run_graph_add_class(g, "b", &c1, &e);
    run_graph_set_class(g, 1, c1, &e);
    CU_ASSERT_EQUAL(run_graph_add_task(g, c0, &(run_task){.kind = RUN_TASK_SEND, .bytes = n,
                                                           .peer = 1, .peer_groupset = RUN_NONE,
                                                           .tag = 1}, NULL, &e), NP_OK);
    CU_ASSERT_EQUAL(run_graph_add_task(g, c1, &(run_task){.kind = RUN_TASK_RECV, .bytes = n,
                                                           .peer = 0, .peer_groupset = RUN_NONE,
                                                           .tag = 1}, NULL, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(run_graph_finalize(g, &e), NP_OK);
    run_result *r = NULL;
    run_opts o = {.steps = 1};
    CU_ASSERT_EQUAL_FATAL(run_simulate(g, &f->cfg, &f->np, &o, &r, &e), NP_OK);
    uint64_t ps = r->time_ps;
    run_result_free(r);
    run_graph_free(g);
    return ps;
}

/* The time one all-reduce of n bytes (elements of 4 bytes) over chips 0 .. k-1 takes, alone. */
static uint64_t all_reduce_ps(const tnet *f, uint32_t k, uint64_t n)
{
    run_graph *g;
    np_err e = {0};
    uint32_t all[16], gs, cls;
    for (uint32_t i = 0; i < k; i++)
        all[i] = i;
    CU_ASSERT_EQUAL_FATAL(run_graph_create(k, &g, &e), NP_OK);
    run_graph_add_groupset(g, "dp", 1, k, all, &gs, &e);
    run_graph_add_class(g, "r", &cls, &e);
    CU_ASSERT_EQUAL(run_graph_add_task(g, cls, &(run_task){.kind = RUN_TASK_COLL,
                                                            .comm = RUN_COMM_DP,
                                                            .op = COLL_OP_ALL_REDUCE,
                                                            .groupset = gs, .bytes = n,
                                                            .elem_bytes = 4},
                                       NULL, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(run_graph_finalize(g, &e), NP_OK);
    run_result *r = NULL;
    run_opts o = {.steps = 1};
    CU_ASSERT_EQUAL_FATAL(run_simulate(g, &f->cfg, &f->np, &o, &r, &e), NP_OK);
    uint64_t ps = r->time_ps;
    run_result_free(r);
    run_graph_free(g);
    return ps;
}

static uint64_t max2(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* Within a few ns: a clear-to-send sharing a link with a transfer for a moment slows it by a
 * fraction of a ns (max-min sharing), which the timelines leave out. */
#define NEAR_PS 3000.0

/* ---- blocking p2p ---------------------------------------------------------------------------- */

/* 1F1B, p = 2, m = 2, with stage s's forward F[s] and backward B[s] per micro-batch, a boundary
 * (either way) taking X, a clear-to-send C, the host's launch L, the step's own kernels taking
 * no time. Megatron-LM 2021's calls (schedules.py, forward_backward_pipelining_without_
 * interleaving): stage 0: F0, send_forward, F1, send_forward_recv_backward, B0,
 * recv_backward, B1; stage 1: recv_forward, F0, B0, send_backward_recv_forward, F1, B1,
 * send_backward. A call's receive sends its clear-to-send when the call starts; its send moves
 * the data once the peer's has arrived; the call ends when all its data is delivered, and the
 * next kernel pays L (so does each stage's first). */
static uint64_t blocking_1f1b(const uint64_t *F, const uint64_t *B, uint64_t X, uint64_t C,
                              uint64_t L)
{
    /* stage 1 posts its recv_forward at L (after its zeroing kernels, which pay the launch) */
    uint64_t a1 = max2(L + F[0], L + C) + X;     /* stage 0's send_forward of F0 delivered */
    uint64_t c = a1 + L + F[0];                  /* stage 0 has computed F1 */
    uint64_t b = a1 + L + F[1] + B[1];           /* stage 1 has computed F0 and B0 */
    uint64_t d1 = max2(b, c + C) + X;            /* B0's gradient to stage 0 */
    uint64_t d2 = max2(c, b + C) + X;            /* F1's activation to stage 1 */
    uint64_t D = max2(d1, d2);                   /* both calls end */
    uint64_t e = D + L + F[1] + B[1];            /* stage 1 has computed F1 and B1 */
    uint64_t g = max2(e, D + L + B[0] + C) + X;  /* send_backward of B1 meets recv_backward */
    return g + L + B[0];                         /* stage 0's B1 */
}

/* The same plan with eager sends: a send starts when its stream gets to it, a stage waits
 * only for what it receives. */
static uint64_t eager_1f1b(const uint64_t *F, const uint64_t *B, uint64_t X, uint64_t L)
{
    uint64_t t1 = L + F[0] + X;                          /* F0's activation at stage 1 */
    uint64_t t2 = max2(L + 2 * F[0], t1) + X;            /* F1's (the send stream's order) */
    uint64_t b = t1 + F[1] + B[1];                       /* stage 1: F0, B0 */
    uint64_t e = max2(b, t2) + F[1] + B[1];              /* stage 1: F1, B1 */
    uint64_t h = max2(L + 2 * F[0], b + X) + B[0];       /* stage 0: B0 */
    return max2(h, max2(e, b + X) + X) + B[0];           /* stage 0: B1 */
}

static void check_1f1b(const char *const *sets, size_t n_sets, uint64_t L)
{
    tnet f;
    tnet_init(&f, 2, sets, n_sets);
    dur d = {.fwd_ps = 3000000, .bwd_ps = 5000000}; /* 3 and 5 us a kernel */
    for (int blocking = 0; blocking <= 1; blocking++) {
        nn_plan *p = mlp_plan(1, 2, 64, 32, blocking, false, NN_DDP_TORCH);
        run_plan *rp;
        run_result *r = run_plan_timed(p, &f, &d, &rp);
        uint64_t F[2], B[2], bytes = 0;
        for (int s = 0; s < 2; s++) {
            F[s] = block_ps(rp, s, NN_REGION_FORWARD, &d);
            B[s] = block_ps(rp, s, NN_REGION_BACKWARD, &d);
        }
        for (int b = 0; b < p->classes[0].n_blocks; b++) /* the boundary stage 0 sends */
            for (int i = 0; i < p->classes[0].blocks[b].n_entries; i++)
                if (p->classes[0].blocks[b].entries[i].kind == NN_PLAN_SEND)
                    bytes = p->classes[0].blocks[b].entries[i].bytes;
        CU_ASSERT_EQUAL(bytes, 32ull * 2048 * 4);
        uint64_t X = send_ps(&f, bytes), C = send_ps(&f, NN_PLAN_CTS_BYTES);
        uint64_t want = blocking ? blocking_1f1b(F, B, X, C, L) : eager_1f1b(F, B, X, L);
        fprintf(stderr, "1F1B p2 m2 %s, launch %.1f us: F %.1f/%.1f us, B %.1f/%.1f us, send "
                "%.2f us, clear-to-send %.2f us: step %.3f us, by hand %.3f us\n",
                blocking ? "blocking" : "eager", L * 1e-6, F[0] * 1e-6, F[1] * 1e-6,
                B[0] * 1e-6, B[1] * 1e-6, X * 1e-6, C * 1e-6, r->time_ps * 1e-6, want * 1e-6);
        CU_ASSERT(F[0] > 0 && B[1] > 0 && X > 10 * C);
        CU_ASSERT(fabs((double)r->time_ps - (double)want) <= NEAR_PS);
        run_result_free(r);
        run_plan_free(rp);
        nn_plan_free(p);
    }
}

TEST(blocking_p2p_1f1b_step_is_the_hand_timeline_of_megatrons_calls)
{
    check_1f1b(NULL, 0, 0);
    /* every kernel after a call's synchronization pays the host's launch */
    static const char *const launch[] = {"chip.kernel_launch_ns=7000"};
    check_1f1b(launch, 1, 7000000);
}

TEST(blocking_p2p_costs_what_its_sends_cost_on_the_critical_path)
{
    /* the same plan and durations: blocking is slower than eager by at least one transfer
     * (the last send_forward_recv_backward's activation is waited for), and each stage
     * spends no less time communicating */
    tnet f;
    tnet_init(&f, 2, NULL, 0);
    dur d = {.fwd_ps = 3000000, .bwd_ps = 5000000};
    nn_plan *pe = mlp_plan(1, 2, 64, 32, false, false, NN_DDP_TORCH);
    nn_plan *pb = mlp_plan(1, 2, 64, 32, true, false, NN_DDP_TORCH);
    run_result *re = run_plan_timed(pe, &f, &d, NULL), *rb = run_plan_timed(pb, &f, &d, NULL);
    uint64_t X = send_ps(&f, 32ull * 2048 * 4);
    CU_ASSERT(rb->time_ps >= re->time_ps + X);
    CU_ASSERT(rb->exposed_ps[RUN_COMM_PP] > re->exposed_ps[RUN_COMM_PP]);
    run_result_free(re);
    run_result_free(rb);
    nn_plan_free(pe);
    nn_plan_free(pb);
}

/* ---- local DDP and the host's synchronizations ------------------------------------------------ */

TEST(local_ddp_all_reduces_every_gradient_after_the_backward_then_the_optimizer_runs)
{
    /* dp 2, 2 micro-batches: the step is the zeroing, two forwards and backwards, one all-reduce
     * of all gradients (megatron/model/distributed.py allreduce_gradients: one buffer) and the
     * optimizer after it. With the host's synchronizations each phase's first kernel pays the
     * launch: the step's first, F0, B0, F1, B1, and the optimizer's update (the step's end
     * synchronizes before the all-reduce and before the update; fp32 has no casts) */
    static const char *const launch[] = {"chip.kernel_launch_ns=7000"};
    tnet f;
    tnet_init(&f, 2, launch, 1);
    dur d = {.fwd_ps = 3000000, .bwd_ps = 5000000, .optim_ps = 2000000};
    uint64_t L = 7000000;
    for (int host = 0; host <= 1; host++) {
        nn_plan *p = mlp_plan(2, 1, 128, 32, false, host, NN_DDP_LOCAL);
        run_plan *rp;
        run_result *r = run_plan_timed(p, &f, &d, &rp);
        uint64_t F = block_ps(rp, 0, NN_REGION_FORWARD, &d), B = block_ps(rp, 0, NN_REGION_BACKWARD, &d);
        uint64_t Z = 0, E = 0, grads = 0;
        const nn_plan_class *c = &p->classes[0];
        for (int b = 0; b < c->n_blocks; b++)
            for (int i = 0; i < c->blocks[b].n_entries; i++) {
                const nn_plan_entry *e = &c->blocks[b].entries[i];
                if (e->kind == NN_PLAN_COMPUTE && e->region == NN_REGION_OPTIM &&
                    !(nn_op_flags(e->nodes[0]->op) & NN_OPF_VIEW))
                    *(c->blocks[b].kind == NN_BLOCK_STEP_BEGIN ? &Z : &E) += d.optim_ps;
                if (e->kind == NN_PLAN_COLLECTIVE && e->tag == NN_COMM_DP) {
                    CU_ASSERT_EQUAL(c->blocks[b].kind, NN_BLOCK_STEP_END); /* one, at the end */
                    grads += e->bytes;
                }
            }
        uint64_t params = 64 * 2048 + 3 * 2048 * 2048 + 2048 * 8 + 4 * 2048 + 8;
        CU_ASSERT_EQUAL(grads, 4 * params);
        uint64_t AR = all_reduce_ps(&f, 2, grads);
        uint64_t want = L + Z + 2 * (F + B) + AR + E + (host ? 5 * L : 0);
        fprintf(stderr, "local DDP dp2 m2%s: F %.1f us, B %.1f us, all-reduce %.2f us of "
                "%" PRIu64 " bytes, optimizer %.1f us: step %.3f us, by hand %.3f us\n",
                host ? ", host synchronizations" : "", F * 1e-6, B * 1e-6, AR * 1e-6, grads,
                E * 1e-6, r->time_ps * 1e-6, want * 1e-6);
        CU_ASSERT(fabs((double)r->time_ps - (double)want) <= NEAR_PS);
        run_result_free(r);
        run_plan_free(rp);
        nn_plan_free(p);
    }
}

/* ---- the optimizer's steps over all the gradients -------------------------------------------- */

TEST(loss_scaling_and_clipping_read_two_values_on_the_host_before_the_update)
{
    /* one rank, one micro-batch, every kernel after the other: the step is the first kernel's
     * launch, every kernel's time, and a launch after each of the host's two reads (found_inf
     * and the norm, .item() in Megatron-LM's optimizer); with the timers' synchronizations
     * also before the forward, the backward and each further phase of the step's end (the
     * all-reduces of one rank are nothing) */
    static const char *const launch[] = {"chip.kernel_launch_ns=7000"};
    tnet f;
    tnet_init(&f, 1, launch, 1);
    dur d = {.fwd_ps = 3000000, .bwd_ps = 5000000, .optim_ps = 2000000};
    uint64_t L = 7000000;
    for (int host = 0; host <= 1; host++) {
        nn_model_desc md;
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(nn_model_parse("wide.model", "family = mlp\ninputs = 64\n"
                                             "hidden = 2048 2048\nclasses = 8\n", &md, &e), NP_OK);
        nn_strategy s;
        nn_strategy_default(&s);
        s.loss_scale = 8192;
        s.clip_grad = 1.0;
        s.host_sync = host;
        nn_model_opts o = {.batch = 32, .compute = NN_F32, .seed = 1};
        nn_optim sgd = {.kind = NN_OPTIM_SGD, .lr = 0.1, .momentum = 0.9};
        nn_plan *p = NULL;
        CU_ASSERT_EQUAL_FATAL(nn_plan_build(&md, &o, &s, &sgd, NULL, &p, &e), NP_OK);
        run_plan *rp;
        run_result *r = run_plan_timed(p, &f, &d, &rp);
        uint64_t all = 0;
        int syncs = 0, phases = 0, last = -1;
        for (uint32_t t = 0; t < rp->n_tasks[0]; t++)
            if (rp->tasks[0][t].kernel != RUN_NONE)
                all += dur_of(&d, rp->kspecs[rp->tasks[0][t].kernel].node);
        /* the step's end: unscale, norm, clip, update phases in that order */
        const nn_plan_block *end = &p->classes[0].blocks[p->classes[0].n_blocks - 1];
        for (int i = 0; i < end->n_entries; i++) {
            syncs += end->entries[i].sync;
            const nn_tensor *t = end->entries[i].nodes[0];
            int ph = t->op == NN_OP_SGD_UPDATE ? 3 : t->op == NN_OP_GRAD_ACC ? 1
                     : t->op == NN_OP_MUL && t->src[1]->ndim == 1 && t->src[1]->ne[0] == 1 &&
                               t->src[0]->ne[0] > 1 ? 2
                     : t->op == NN_OP_SCALE && t->ne[0] > 1 ? 0 : last;
            CU_ASSERT(ph >= last);
            phases += ph != last;
            last = ph;
        }
        CU_ASSERT_EQUAL(phases, 4);
        /* reads of found_inf and the norm; with the timers: the phases of grad reduction
         * (none here), unscale, norm, clip and update each synchronized before */
        CU_ASSERT_EQUAL(syncs, host ? 4 : 2);
        uint64_t want = L + all + 2 * L + (host ? 2 * L + 2 * L : 0);
        fprintf(stderr, "loss scale and clipping%s: kernels %.1f us, step %.3f us, by hand "
                "%.3f us\n", host ? ", host synchronizations" : "", all * 1e-6,
                r->time_ps * 1e-6, want * 1e-6);
        CU_ASSERT(fabs((double)r->time_ps - (double)want) <= NEAR_PS);
        run_result_free(r);
        run_plan_free(rp);
        nn_plan_free(p);
    }
}
