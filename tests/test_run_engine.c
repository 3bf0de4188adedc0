/* test_run_engine.c — the run engine (sim/run_engine.h) on hand-built task graphs.
 *
 * References, each independent of the engine:
 *   - pipeline bubbles: GPipe and 1F1B schedules built here from their textbook definitions
 *     (GPipe: all forwards, then all backwards; 1F1B as in Narayanan et al., SC21: stage s
 *     runs min(p-s-1, m) warm-up forwards, then alternates one forward and one backward, then
 *     drains the backwards), with balanced stages, against (p-1)/(m+p-1) and (p-1)/m;
 *   - overlap: the alpha-beta cost of the exposed collectives (docs/collectives.md) and the
 *     timelines the schedules imply, worked out by hand in each test;
 *   - shortcuts: the same graph with each shortcut on and off, figure for figure.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "run_engine.h"
#include "run_report.h"

/* ---- fixtures ------------------------------------------------------------------------------ */

/* The tiny preset's parameters on a network of `chips` chips of topology `topo`. */
typedef struct tnet {
    arch_config cfg;
    net_params np;
} tnet;

static void tnet_init(tnet *f, arch_topology topo, uint32_t chips, const char *const *sets,
                      size_t n_sets)
{
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, n_sets, &f->cfg, &e), NP_OK);
    net_params_from_arch(&f->cfg, &f->np);
    f->np.topology = topo;
    f->np.chips = chips;
    f->np.dims[0] = chips;
    f->np.dims[1] = f->np.dims[2] = 1;
    if (f->np.switch_radix < chips)
        f->np.switch_radix = chips;
}

/* Kernels are named "<what> <duration in ps>"; the timing function reads the duration and
 * counts its calls. */
static uint64_t timed_calls;

static np_status time_from_key(void *ctx, const run_kernel *k, run_ktime *out, np_err *err)
{
    (void)ctx;
    (void)err;
    timed_calls++;
    const char *sp = strrchr(k->key, ' ');
    out->ps = strtoull(sp + 1, NULL, 10);
    out->unit_ps[RUN_UNIT_MXU] = out->ps / 2;
    return NP_OK;
}

static uint32_t kernel(run_graph *g, const char *what, uint64_t ps)
{
    char key[64];
    snprintf(key, sizeof key, "%s %" PRIu64, what, ps);
    uint32_t id = 0;
    np_err e = {0};
    CU_ASSERT_EQUAL(run_graph_add_kernel(g, &(run_kernel){.key = key, .flops = 1e9}, &id, &e),
                    NP_OK);
    return id;
}

static uint32_t task(run_graph *g, uint32_t cls, run_task t)
{
    uint32_t id = RUN_NONE;
    np_err e = {0};
    np_status st = run_graph_add_task(g, cls, &t, &id, &e);
    if (st != NP_OK)
        fprintf(stderr, "add_task: %s\n", e.msg);
    CU_ASSERT_EQUAL(st, NP_OK);
    return id;
}

static uint32_t compute(run_graph *g, uint32_t cls, uint32_t k, uint32_t flags,
                        const uint32_t *deps, uint32_t n_deps)
{
    return task(g, cls, (run_task){.kind = RUN_TASK_COMPUTE, .kernel = k, .flags = flags,
                                   .deps = deps, .n_deps = n_deps});
}

/* A groupset of one group of every rank 0 .. p-1 (p <= 64), named name. */
static uint32_t groupset_of_all(run_graph *g, const char *name, uint32_t p)
{
    uint32_t all[64], id = RUN_NONE;
    for (uint32_t i = 0; i < p && i < 64; i++)
        all[i] = i;
    np_err e = {0};
    CU_ASSERT_EQUAL(run_graph_add_groupset(g, name, 1, p, all, &id, &e), NP_OK);
    return id;
}

static run_result *simulate(const run_graph *g, const tnet *f, const run_opts *o)
{
    run_result *r = NULL;
    np_err e = {0};
    run_opts opts = *o;
    opts.time_kernel = time_from_key;
    np_status st = run_simulate(g, &f->cfg, &f->np, &opts, &r, &e);
    if (st != NP_OK)
        fprintf(stderr, "run_simulate: %s\n", e.msg);
    CU_ASSERT_EQUAL(st, NP_OK);
    return r;
}

#define US(x) ((uint64_t)((x) * 1e6)) /* microseconds in ps */
#define MS(x) ((uint64_t)((x) * 1e9)) /* milliseconds in ps */

static bool within_abs(double got, double want, double tol) { return fabs(got - want) <= tol; }
static bool within_rel(double got, double want, double rel)
{
    return fabs(got - want) <= rel * fabs(want);
}

/* ---- pipelines ------------------------------------------------------------------------------ */

enum { SCHED_GPIPE, SCHED_1F1B, SCHED_INTERLEAVED };
enum { ST_SEND_F, ST_RECV_F, ST_SEND_B, ST_RECV_B, ST_TP, ST_DP }; /* streams */

typedef struct pipe_shape {
    uint32_t p, m;       /* stages (devices), micro-batches */
    uint32_t v;          /* interleaved: model chunks per device (0: 1) */
    uint32_t tp, dp;     /* tensor-parallel ranks per stage (all-reduces after each compute),
                            data-parallel replicas (a bucketed all-reduce at the end) */
    int sched;
    uint64_t f_ps, b_ps; /* forward / backward compute of one micro-batch on one device (all
                            its chunks together) */
    uint64_t act_bytes;  /* sent between stages per micro-batch */
    uint64_t tp_bytes;   /* each tp all-reduce (0: none) */
    bool tp_mid;         /* the all-reduce between the two halves of each compute, the second
                            waiting for it (as a layer's: exposed), not after it */
    uint64_t dp_bytes;   /* each of the 2 gradient buckets (0: none) */
} pipe_shape;

typedef struct pipe_op {
    bool fwd;
    uint32_t chunk, mb;
} pipe_op;

/* The order of device s's operations, from each schedule's definition. */
static uint32_t pipe_order(const pipe_shape *ps, uint32_t s, pipe_op *ops)
{
    uint32_t n = 0, m = ps->m, p = ps->p;
    if (ps->sched == SCHED_GPIPE) { /* all forwards, then all backwards (last first) */
        for (uint32_t i = 0; i < m; i++)
            ops[n++] = (pipe_op){true, 0, i};
        for (uint32_t i = m; i-- > 0;)
            ops[n++] = (pipe_op){false, 0, i};
        return n;
    }
    if (ps->sched == SCHED_1F1B) { /* warm-up forwards, one forward one backward, drain */
        uint32_t warm = p - s - 1 < m ? p - s - 1 : m;
        for (uint32_t i = 0; i < warm; i++)
            ops[n++] = (pipe_op){true, 0, i};
        for (uint32_t i = 0; i < m - warm; i++) {
            ops[n++] = (pipe_op){true, 0, warm + i};
            ops[n++] = (pipe_op){false, 0, i};
        }
        for (uint32_t i = m - warm; i < m; i++)
            ops[n++] = (pipe_op){false, 0, i};
        return n;
    }
    /* Interleaved 1F1B (Megatron-LM's forward_backward_pipelining_with_interleaving): the
     * k-th forward of a device runs chunk (k mod pv) / p on micro-batch (k / pv) p + k mod p;
     * the k-th backward the same with the chunks in reverse; (p - s - 1) 2 + (v - 1) p
     * warm-up forwards, then one forward and one backward, then the remaining backwards. */
    uint32_t v = ps->v, total = m * v, warm = (p - s - 1) * 2 + (v - 1) * p;
    if (warm > total)
        warm = total;
#define IL_OP(k, f)                                                                           \
    (pipe_op){(f), (f) ? ((k) % (p * v)) / p : v - 1 - ((k) % (p * v)) / p,                   \
              ((k) / (p * v)) * p + (k) % p}
    for (uint32_t k = 0; k < warm; k++)
        ops[n++] = IL_OP(k, true);
    for (uint32_t i = 0; i < total - warm; i++) {
        ops[n++] = IL_OP(warm + i, true);
        ops[n++] = IL_OP(i, false);
    }
    for (uint32_t k = total - warm; k < total; k++)
        ops[n++] = IL_OP(k, false);
#undef IL_OP
    return n;
}

/* A tp x pp x dp pipeline: rank = t + tp * (d + dp * s), one class per stage. Virtual stage
 * j = chunk * p + s; its neighbours are the same chunk on the next device, or the next chunk
 * on device 0 after the last device. */
static run_graph *pipe_graph(const pipe_shape *ps)
{
    uint32_t R = ps->p * ps->tp * ps->dp, v = ps->v ? ps->v : 1, p = ps->p;
    run_graph *g;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(run_graph_create(R, &g, &e), NP_OK);
    uint32_t *mem = malloc(R * sizeof *mem);
    uint32_t gs_pp, gs_tp, gs_dp, n = 0;
    for (uint32_t t = 0; t < ps->tp; t++)
        for (uint32_t d = 0; d < ps->dp; d++)
            for (uint32_t s = 0; s < p; s++)
                mem[n++] = t + ps->tp * (d + ps->dp * s);
    CU_ASSERT_EQUAL(run_graph_add_groupset(g, "pp", ps->tp * ps->dp, p, mem, &gs_pp, &e), NP_OK);
    n = 0;
    for (uint32_t i = 0; i < R; i++)
        mem[n++] = i;
    CU_ASSERT_EQUAL(run_graph_add_groupset(g, "tp", R / ps->tp, ps->tp, mem, &gs_tp, &e), NP_OK);
    n = 0;
    for (uint32_t s = 0; s < p; s++)
        for (uint32_t t = 0; t < ps->tp; t++)
            for (uint32_t d = 0; d < ps->dp; d++)
                mem[n++] = t + ps->tp * (d + ps->dp * s);
    CU_ASSERT_EQUAL(run_graph_add_groupset(g, "dp", R / ps->dp, ps->dp, mem, &gs_dp, &e), NP_OK);
    free(mem);
    CU_ASSERT_EQUAL(run_graph_set_pipeline(g, gs_pp, ps->m, &e), NP_OK);
    uint32_t kf = kernel(g, "fwd", ps->f_ps / v), kb = kernel(g, "bwd", ps->b_ps / v);
    uint32_t kf2 = ps->tp_mid ? kernel(g, "fwd-half", ps->f_ps / v / 2) : RUN_NONE,
             kb2 = ps->tp_mid ? kernel(g, "bwd-half", ps->b_ps / v / 2) : RUN_NONE;
    uint32_t kopt = kernel(g, "optimizer", ps->f_ps / 10);
    pipe_op *ops = malloc(2 * ps->m * v * sizeof *ops);
    uint32_t *fwd = malloc(ps->m * v * sizeof *fwd);
    for (uint32_t s = 0; s < p; s++) {
        char name[16];
        snprintf(name, sizeof name, "stage%" PRIu32, s);
        uint32_t cls;
        CU_ASSERT_EQUAL(run_graph_add_class(g, name, &cls, &e), NP_OK);
        for (uint32_t t = 0; t < ps->tp; t++)
            for (uint32_t d = 0; d < ps->dp; d++)
                CU_ASSERT_EQUAL(run_graph_set_class(g, t + ps->tp * (d + ps->dp * s), cls, &e),
                                NP_OK);
        uint32_t nops = pipe_order(ps, s, ops), last_b = RUN_NONE, half_b = RUN_NONE, nb = 0;
        for (uint32_t o = 0; o < nops; o++) {
            bool f = ops[o].fwd;
            uint32_t c = ops[o].chunk, i = ops[o].mb, j = c * p + s, deps[2], nd = 0;
            /* forward: from virtual stage j - 1, to j + 1; backward the other way; tags
             * name the direction and the chunk the message goes into */
            bool recv = f ? j > 0 : j + 1 < v * p, send = f ? j + 1 < v * p : j > 0;
            int32_t up = s + 1 < p ? 1 : -(int32_t)(p - 1), down = s > 0 ? -1 : (int32_t)(p - 1);
            uint32_t c_up = s + 1 < p ? c : c + 1, c_down = s > 0 ? c : c - 1;
            if (recv)
                deps[nd++] = task(g, cls, (run_task){.kind = RUN_TASK_RECV, .comm = RUN_COMM_PP,
                                                     .stream = f ? ST_RECV_F : ST_RECV_B,
                                                     .bytes = ps->act_bytes,
                                                     .peer_groupset = gs_pp,
                                                     .peer = f ? down : up,
                                                     .tag = 2 * c + (f ? 0 : 1)});
            if (!f)
                deps[nd++] = fwd[c * ps->m + i];
            uint32_t x;
            if (ps->tp_mid) {
                x = compute(g, cls, f ? kf2 : kb2, RUN_TASK_PIPELINE, deps, nd);
                x = task(g, cls, (run_task){.kind = RUN_TASK_COLL, .comm = RUN_COMM_TP,
                                            .stream = ST_TP, .op = COLL_OP_ALL_REDUCE,
                                            .algo = COLL_ALGO_RING, .groupset = gs_tp,
                                            .bytes = ps->tp_bytes, .deps = &x, .n_deps = 1});
                x = compute(g, cls, f ? kf2 : kb2, RUN_TASK_PIPELINE, &x, 1);
            } else {
                x = compute(g, cls, f ? kf : kb, RUN_TASK_PIPELINE, deps, nd);
            }
            if (ps->tp > 1 && ps->tp_bytes && !ps->tp_mid)
                x = task(g, cls, (run_task){.kind = RUN_TASK_COLL, .comm = RUN_COMM_TP,
                                            .stream = ST_TP, .op = COLL_OP_ALL_REDUCE,
                                            .groupset = gs_tp, .bytes = ps->tp_bytes,
                                            .deps = &x, .n_deps = 1});
            if (f) {
                fwd[c * ps->m + i] = x;
            } else {
                last_b = x;
                if (++nb == ps->m * v / 2)
                    half_b = x;
            }
            if (send)
                task(g, cls, (run_task){.kind = RUN_TASK_SEND, .comm = RUN_COMM_PP,
                                        .stream = f ? ST_SEND_F : ST_SEND_B,
                                        .bytes = ps->act_bytes, .peer_groupset = gs_pp,
                                        .peer = f ? up : down,
                                        .tag = f ? 2 * c_up : 2 * c_down + 1, .deps = &x,
                                        .n_deps = 1});
        }
        uint32_t ar[2], nar = 0;
        if (ps->dp > 1 && ps->dp_bytes) {
            uint32_t after[2] = {half_b != RUN_NONE ? half_b : last_b, last_b};
            for (int b = 0; b < 2; b++)
                ar[nar++] = task(g, cls, (run_task){.kind = RUN_TASK_COLL, .comm = RUN_COMM_DP,
                                                    .stream = ST_DP, .op = COLL_OP_ALL_REDUCE,
                                                    .groupset = gs_dp, .bytes = ps->dp_bytes,
                                                    .deps = &after[b], .n_deps = 1});
        } else {
            ar[nar++] = last_b;
        }
        compute(g, cls, kopt, 0, ar, nar);
    }
    free(ops);
    free(fwd);
    CU_ASSERT_EQUAL_FATAL(run_graph_finalize(g, &e), NP_OK);
    return g;
}

/* Bubbles of schedule `sched` with v chunks per device (v > 1: interleaved) against
 * (p-1)/(vm+p-1) and (p-1)/(vm) — with v = 1 the textbook (p-1)/(m+p-1) and (p-1)/m. */
static void check_bubbles(int sched, uint32_t v, const uint32_t *P, size_t nP, const uint32_t *M,
                          size_t nM)
{
    for (size_t i = 0; i < nP; i++)
        for (size_t j = 0; j < nM; j++) {
            uint32_t p = P[i], m = M[j];
            tnet f;
            tnet_init(&f, ARCH_TOPOLOGY_SWITCH, p, NULL, 0);
            pipe_shape ps = {.p = p, .m = m, .v = v, .tp = 1, .dp = 1, .sched = sched,
                             .f_ps = MS(1), .b_ps = MS(2), .act_bytes = 4096};
            run_graph *g = pipe_graph(&ps);
            run_result *r = simulate(g, &f, &(run_opts){0});
            CU_ASSERT_PTR_NOT_NULL_FATAL(r);
            double frac = (double)(p - 1) / (v * m + p - 1), ratio = (double)(p - 1) / (v * m);
            CU_ASSERT_EQUAL(r->stages, p);
            /* Every stage but stage 0, which ends the schedule, runs its optimizer step (0.1
             * ms) inside the window: busy, not bubble, (p-1) 3/v - 0.1 ms idle of m 3 + 0.1
             * busy (the textbook's (p-1)/(vm+p-1) and (p-1)/(vm) for stage 0) */
            double sum_frac = 0, sum_ratio = 0;
            for (uint32_t s = 0; s < p; s++) {
                double idle = (p - 1) * 3.0 / v - (s ? 0.1 : 0), busy = m * 3.0 + (s ? 0.1 : 0);
                CU_ASSERT_TRUE(within_abs(r->stage_bubble_frac[s], idle / (idle + busy), 0.02));
                CU_ASSERT_TRUE(within_abs(r->stage_bubble_ratio[s], idle / busy, 0.02));
                CU_ASSERT_TRUE(within_abs(r->stage_bubble_frac[s], frac, 0.02));
                sum_frac += idle / (idle + busy), sum_ratio += idle / busy;
            }
            CU_ASSERT_TRUE(within_abs(r->stage_bubble_ratio[0], ratio, 0.02));
            CU_ASSERT_TRUE(within_abs(r->bubble_frac, frac, 0.02));
            CU_ASSERT_TRUE(within_abs(r->bubble_frac, sum_frac / p, 0.02));
            CU_ASSERT_TRUE(within_abs(r->bubble_ratio, sum_ratio / p, 0.02));
            /* the schedule's length: m (t_f + t_b) + (p - 1) (t_f + t_b) / v, plus the sends
             * and the optimizer step */
            double want = m * 3e9 + (p - 1) * 3e9 / v + 1e8;
            CU_ASSERT_TRUE(r->time_ps >= want && r->time_ps <= want * 1.01);
            if (!within_abs(r->bubble_frac, frac, 0.02))
                fprintf(stderr, "sched %d v=%u p=%u m=%u: bubble %.4f, want %.4f\n", sched, v, p,
                        m, r->bubble_frac, frac);
            run_result_free(r);
            run_graph_free(g);
        }
}

static const uint32_t bubble_p[] = {2, 4, 8}, bubble_m[] = {4, 8, 16, 32};

TEST(gpipe_bubble_matches_p_minus_1_over_m_plus_p_minus_1)
{
    check_bubbles(SCHED_GPIPE, 1, bubble_p, 3, bubble_m, 4);
}

TEST(one_f_one_b_bubble_matches_p_minus_1_over_m_plus_p_minus_1)
{
    check_bubbles(SCHED_1F1B, 1, bubble_p, 3, bubble_m, 4);
}

/* A straggler (run_opts.slow): the last stage of a 1F1B pipeline slowed by F. It runs one
 * forward and one backward after the other from its first forward's arrival ((p-1) t_f) on,
 * never starved (the stage before it is a micro-batch ahead), for m F (t_f + t_b); its last
 * backward then goes back through the p-1 other stages ((p-1) t_b), whose optimizer steps end
 * the step: (p-1)(t_f + t_b) + m F (t_f + t_b) + t_opt — with F = 1 the textbook
 * (m+p-1)(t_f + t_b). Slowing it adds m (F-1)(t_f + t_b). */
TEST(a_slowed_last_stage_delays_a_one_f_one_b_step_by_m_times_its_extra_time)
{
    const uint32_t P[] = {2, 4}, Mb[] = {4, 8};
    for (size_t i = 0; i < 2; i++)
        for (size_t k = 0; k < 2; k++) {
            uint32_t p = P[i], m = Mb[k];
            tnet f;
            tnet_init(&f, ARCH_TOPOLOGY_SWITCH, p, NULL, 0);
            pipe_shape ps = {.p = p, .m = m, .tp = 1, .dp = 1, .sched = SCHED_1F1B,
                             .f_ps = MS(1), .b_ps = MS(2), .act_bytes = 4096};
            run_graph *g = pipe_graph(&ps);
            const double F = 1.5, fb = 3e9, opt = 1e8;
            run_slow_chip slow = {.chip = p - 1, .factor = F};
            run_result *r0 = simulate(g, &f, &(run_opts){0});
            run_result *r1 = simulate(g, &f, &(run_opts){.slow = &slow, .n_slow = 1});
            CU_ASSERT_PTR_NOT_NULL_FATAL(r0);
            CU_ASSERT_PTR_NOT_NULL_FATAL(r1);
            double want = (p - 1) * fb + m * F * fb + opt;
            CU_ASSERT_TRUE(r1->time_ps >= want && r1->time_ps <= want * 1.005);
            double delay = (double)r1->time_ps - (double)r0->time_ps;
            CU_ASSERT_TRUE(within_rel(delay, m * (F - 1) * fb, 0.01));
            /* the slowed chip's compute is busy F times as long */
            CU_ASSERT_TRUE(within_rel((double)r1->rank[p - 1].busy_ps[RUN_UNIT_COMPUTE],
                                      F * (double)r0->rank[p - 1].busy_ps[RUN_UNIT_COMPUTE],
                                      1e-6));
            CU_ASSERT_EQUAL(r1->rank[0].busy_ps[RUN_UNIT_COMPUTE],
                            r0->rank[0].busy_ps[RUN_UNIT_COMPUTE]);
            run_result_free(r0);
            run_result_free(r1);
            /* a factor of 1 is no straggler: the same run */
            run_slow_chip one = {.chip = 0, .factor = 1};
            r0 = simulate(g, &f, &(run_opts){0});
            r1 = simulate(g, &f, &(run_opts){.slow = &one, .n_slow = 1});
            CU_ASSERT_EQUAL(r1->time_ps, r0->time_ps);
            run_result_free(r0);
            run_result_free(r1);
            run_graph_free(g);
        }
}

/* Link faults reach the run's network (run_opts.link_faults): a 4-stage pipeline on a ring of
 * 4 whose stage 1 -> 2 link failed sends its activations the other way round (1 -> 0 -> 3 -> 2,
 * two more link latencies per message, and sharing links with the other stages' messages), so
 * the step is no faster; with chip 1's other link failed too the run fails naming both. */
TEST(a_failed_link_on_a_pipeline_route_is_routed_around_or_fails_the_run_naming_it)
{
    tnet f;
    tnet_init(&f, ARCH_TOPOLOGY_RING, 4, NULL, 0);
    pipe_shape ps = {.p = 4, .m = 4, .tp = 1, .dp = 1, .sched = SCHED_1F1B, .f_ps = US(10),
                     .b_ps = US(20), .act_bytes = 1 << 20};
    run_graph *g = pipe_graph(&ps);
    net_link_fault one = {.name = "chip1->chip2"};
    run_result *r0 = simulate(g, &f, &(run_opts){0});
    run_result *r1 = simulate(g, &f, &(run_opts){.link_faults = &one, .n_link_faults = 1});
    CU_ASSERT_PTR_NOT_NULL_FATAL(r0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r1);
    /* each of the 4 forward messages 1 -> 2 crosses 3 links instead of 1 */
    CU_ASSERT_TRUE(r1->time_ps >= r0->time_ps + 2 * f.np.link_latency_ps);
    uint64_t on_failed = 0, detour = 0;
    for (uint32_t l = 0; l < r1->n_links; l++) {
        if (strcmp(r1->links[l].name, "chip1->chip2") == 0)
            on_failed = r1->links[l].bytes;
        if (strcmp(r1->links[l].name, "chip1->chip0") == 0)
            detour = r1->links[l].bytes;
    }
    CU_ASSERT_EQUAL(on_failed, 0);
    CU_ASSERT_TRUE(detour >= 4 * ps.act_bytes);
    run_result_free(r0);
    run_result_free(r1);
    net_link_fault both[] = {{.name = "chip1->chip2"}, {.name = "chip1->chip0"}};
    run_result *r = NULL;
    np_err e = {0};
    run_opts o = {.time_kernel = time_from_key, .link_faults = both, .n_link_faults = 2};
    CU_ASSERT_EQUAL(run_simulate(g, &f.cfg, &f.np, &o, &r, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "chip1->chip2"));
    CU_ASSERT_PTR_NULL(r);
    run_graph_free(g);
}

TEST(a_slowed_chip_outside_the_network_or_without_ranks_is_refused)
{
    tnet f;
    tnet_init(&f, ARCH_TOPOLOGY_SWITCH, 4, NULL, 0);
    pipe_shape ps = {.p = 2, .m = 2, .tp = 1, .dp = 1, .sched = SCHED_1F1B, .f_ps = MS(1),
                     .b_ps = MS(2), .act_bytes = 4096};
    run_graph *g = pipe_graph(&ps);
    run_slow_chip bad[] = {{.chip = 9, .factor = 2}, {.chip = 3, .factor = 2},
                           {.chip = 0, .factor = 0}, {.chip = 0, .factor = NAN}};
    for (size_t i = 0; i < 4; i++) {
        run_result *r = NULL;
        np_err e = {0};
        run_opts o = {.time_kernel = time_from_key, .slow = &bad[i], .n_slow = 1};
        CU_ASSERT_EQUAL(run_simulate(g, &f.cfg, &f.np, &o, &r, &e), NP_ERR_RANGE);
        CU_ASSERT_PTR_NULL(r);
    }
    run_graph_free(g);
}

TEST(interleaved_one_f_one_b_divides_the_bubble_by_the_chunks_per_device)
{
    /* Megatron-LM needs m to be a multiple of p */
    static const uint32_t P[] = {2, 4}, M[] = {8, 16};
    check_bubbles(SCHED_INTERLEAVED, 2, P, 2, M, 2);
    check_bubbles(SCHED_INTERLEAVED, 4, P, 2, M, 2);
}

/* ---- overlap ------------------------------------------------------------------------------ */

/* The alpha-beta-gamma cost of a ring all-reduce of n bytes over p chips of f's switch. */
static double ring_ar_ps(const tnet *f, uint32_t p, double n)
{
    double a = 2.0 * (double)f->np.link_latency_ps + (double)f->np.switch_latency_ps;
    double b = 1e12 / (f->np.link_bytes_per_s * f->np.links_per_chip);
    double elems_per_s = (double)f->cfg.core.vector_lanes *
                         (double)f->cfg.core.vector_ops_per_lane * f->cfg.core.clock_ghz * 1e9 *
                         (double)f->cfg.chip.cores;
    double c = 1e12 / (elems_per_s * 4);
    return 2 * (p - 1) * (a + n / p * b) + (p - 1) * n / p * c;
}

/* DDP: forward, 8 layers of backward, gradients all-reduced in `buckets` buckets as soon as
 * their layers' backward is done, then the optimizer. */
static run_result *ddp(const tnet *f, uint32_t p, uint32_t buckets, uint64_t layer_bytes)
{
    run_graph *g;
    np_err e = {0};
    run_graph_create(p, &g, &e);
    uint32_t dp = groupset_of_all(g, "dp", p), cls;
    run_graph_add_class(g, "replica", &cls, &e);
    uint32_t kf = kernel(g, "fwd", MS(4)), kb = kernel(g, "bwd", MS(1)),
             ko = kernel(g, "opt", US(100));
    uint32_t prev = compute(g, cls, kf, 0, NULL, 0), ars[8], n = 0;
    for (uint32_t l = 0; l < 8; l++) {
        prev = compute(g, cls, kb, 0, &prev, 1);
        if ((l + 1) % (8 / buckets) == 0)
            ars[n++] = task(g, cls, (run_task){.kind = RUN_TASK_COLL, .comm = RUN_COMM_DP,
                                               .stream = 0, .op = COLL_OP_ALL_REDUCE,
                                               .algo = COLL_ALGO_RING, .groupset = dp,
                                               .bytes = layer_bytes * 8 / buckets,
                                               .deps = &prev, .n_deps = 1});
    }
    compute(g, cls, ko, 0, ars, n);
    CU_ASSERT_EQUAL_FATAL(run_graph_finalize(g, &e), NP_OK);
    run_result *r = simulate(g, f, &(run_opts){0});
    run_graph_free(g);
    return r;
}

/* Balanced stages of 2 tp ranks whose every forward and backward waits in its middle for an
 * all-reduce of 1 MiB over the tp pair (a ring, 83 µs, exposed): the bubble — idle time waiting for a stage's input — is still
 * (p-1)/(m+p-1) within 2 points for p in {4, 8}, m in {8, 16} (each stage's time is its
 * compute and its exposed all-reduces, m + p - 1 of them make the window, m its work), the
 * tp communication is reported exposed beside it, and each chip's computing, exposed and idle
 * time add up to the run. Counting exposed communication as bubble, as the report did, gave
 * more: the all-reduces' share of the window on top. */
TEST(the_bubble_is_p_minus_1_over_m_plus_p_minus_1_with_tensor_parallel_communication_exposed)
{
    static const uint32_t P[] = {4, 8}, M[] = {8, 16};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            uint32_t p = P[i], m = M[j];
            tnet f;
            tnet_init(&f, ARCH_TOPOLOGY_SWITCH, 2 * p, NULL, 0);
            pipe_shape ps = {.p = p, .m = m, .tp = 2, .dp = 1, .sched = SCHED_1F1B,
                             .f_ps = MS(1), .b_ps = MS(2), .act_bytes = 4096,
                             .tp_bytes = 1 << 20, .tp_mid = true};
            run_graph *g = pipe_graph(&ps);
            run_result *r = simulate(g, &f, &(run_opts){0});
            CU_ASSERT_PTR_NOT_NULL_FATAL(r);
            double frac = (double)(p - 1) / (m + p - 1);
            CU_ASSERT_TRUE(within_abs(r->bubble_frac, frac, 0.02));
            for (uint32_t s = 0; s < p; s++)
                CU_ASSERT_TRUE(within_abs(r->stage_bubble_frac[s], frac, 0.02));
            if (!within_abs(r->bubble_frac, frac, 0.02))
                fprintf(stderr, "p=%u m=%u: bubble %.4f, want %.4f\n", p, m, r->bubble_frac, frac);
            /* the all-reduces are exposed: 2m of them a rank, each its alpha-beta time */
            uint64_t tp_exposed = r->rank[0].exposed_ps[RUN_COMM_TP];
            CU_ASSERT(within_rel((double)tp_exposed, 2.0 * m * ring_ar_ps(&f, 2, 1 << 20), 0.01));
            /* where each chip's time goes adds up to the run; the bubble is idle time */
            for (uint32_t k = 0; k < r->ranks; k++) {
                const run_rank_stats *st = &r->rank[k];
                CU_ASSERT_EQUAL(st->computing_ps + st->exposed_all_ps + st->idle_ps, r->time_ps);
                CU_ASSERT_EQUAL(st->computing_ps, st->busy_ps[RUN_UNIT_COMPUTE]);
                CU_ASSERT(st->bubble_ps <= st->idle_ps);
                CU_ASSERT(st->exposed_all_ps >= st->exposed_ps[RUN_COMM_TP]);
                CU_ASSERT_EQUAL(st->bubble_all_ps, st->bubble_ps); /* one step */
            }
            run_result_free(r);
            /* two steps, one after the other: each its own window, the same bubble twice */
            r = simulate(g, &f, &(run_opts){.steps = 2});
            CU_ASSERT_PTR_NOT_NULL_FATAL(r);
            CU_ASSERT_TRUE(within_abs(r->bubble_frac, frac, 0.02));
            for (uint32_t k = 0; k < r->ranks; k++) {
                const run_rank_stats *st = &r->rank[k];
                CU_ASSERT_EQUAL(st->computing_ps + st->exposed_all_ps + st->idle_ps, r->time_ps);
                CU_ASSERT(within_rel((double)st->bubble_all_ps, 2.0 * (double)st->bubble_ps, 0.01));
                CU_ASSERT(st->bubble_all_ps <= st->idle_ps);
            }
            run_result_free(r);
            run_graph_free(g);
        }
}

TEST(ddp_buckets_overlap_backward_and_more_buckets_expose_less)
{
    tnet f;
    tnet_init(&f, ARCH_TOPOLOGY_SWITCH, 4, NULL, 0);
    uint32_t p = 4;
    uint64_t layer = 4u << 20;
    double prev_exposed = INFINITY;
    static const uint32_t B[] = {1, 2, 4, 8};
    for (int i = 0; i < 4; i++) {
        run_result *r = ddp(&f, p, B[i], layer);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        double total = (double)r->comm_ps[RUN_COMM_DP] / p;
        double exposed = (double)r->exposed_ps[RUN_COMM_DP] / p;
        double bucket = ring_ar_ps(&f, p, (double)(layer * 8 / B[i]));
        /* every bucket runs on its own: the total is B of them */
        CU_ASSERT_TRUE(within_rel(total, B[i] * bucket, 0.01));
        /* the earlier buckets hide behind the remaining backward (each bucket here is shorter
         * than the backward after it); the last one cannot */
        CU_ASSERT_TRUE(within_rel(exposed, bucket, 0.01));
        if (B[i] == 1) {
            CU_ASSERT_TRUE(within_rel(exposed, total, 1e-9));
        } else {
            CU_ASSERT_TRUE(exposed < total);
        }
        CU_ASSERT_TRUE(exposed < prev_exposed);
        prev_exposed = exposed;
        /* step: forward, backward, the last bucket, the optimizer */
        CU_ASSERT_TRUE(within_rel((double)r->time_ps, 4e9 + 8e9 + bucket + 1e8, 0.01));
        run_result_free(r);
    }
}

/* ZeRO-3: an embedding step, then 8 layers whose parameters are all-gathered on their own
 * stream ahead of need (the stream issues them back to back: prefetch). */
static run_result *zero3(const tnet *f, uint32_t p, uint64_t layer_bytes)
{
    run_graph *g;
    np_err e = {0};
    run_graph_create(p, &g, &e);
    uint32_t dp = groupset_of_all(g, "dp", p), cls;
    run_graph_add_class(g, "replica", &cls, &e);
    uint32_t ke = kernel(g, "embed", MS(1)), kl = kernel(g, "layer", MS(1));
    uint32_t prev = compute(g, cls, ke, 0, NULL, 0);
    for (uint32_t l = 0; l < 8; l++) {
        uint32_t ag = task(g, cls, (run_task){.kind = RUN_TASK_COLL, .comm = RUN_COMM_ZERO,
                                              .stream = 1, .op = COLL_OP_ALL_GATHER,
                                              .algo = COLL_ALGO_RING, .groupset = dp,
                                              .bytes = layer_bytes});
        uint32_t deps[2] = {prev, ag};
        prev = compute(g, cls, kl, 0, deps, 2);
    }
    CU_ASSERT_EQUAL_FATAL(run_graph_finalize(g, &e), NP_OK);
    run_result *r = simulate(g, f, &(run_opts){0});
    run_graph_free(g);
    return r;
}

TEST(zero3_prefetch_hides_all_gathers_on_fast_links_and_exposes_them_on_slow_ones)
{
    uint32_t p = 4;
    uint64_t bytes = 8u << 20;
    /* alpha-beta of a ring all-gather on the switch: (p-1)(alpha + n/p beta) */
    for (int slow = 0; slow < 2; slow++) {
        const char *sets[] = {slow ? "system.link_gb_per_s=1" : "system.link_gb_per_s=64"};
        tnet f;
        tnet_init(&f, ARCH_TOPOLOGY_SWITCH, p, sets, 1);
        double a = 2.0 * (double)f.np.link_latency_ps + (double)f.np.switch_latency_ps;
        double b = 1e12 / (f.np.link_bytes_per_s * f.np.links_per_chip);
        double ag = (p - 1) * (a + (double)bytes / p * b);
        run_result *r = zero3(&f, p, bytes);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        double total = (double)r->comm_ps[RUN_COMM_ZERO] / p;
        double exposed = (double)r->exposed_ps[RUN_COMM_ZERO] / p;
        CU_ASSERT_TRUE(within_rel(total, 8 * ag, 0.01));
        if (!slow) {
            CU_ASSERT_TRUE(ag < 1e9); /* each gather is shorter than a layer */
            CU_ASSERT_EQUAL(r->exposed_ps[RUN_COMM_ZERO], 0);
            CU_ASSERT_EQUAL(r->time_ps, MS(9));
        } else {
            /* gathers back to back from t = 0; layer i runs when gather i is done, so the
             * gathers are exposed except under the embedding and layers 0 .. 6 */
            CU_ASSERT_TRUE(ag > 1e9);
            CU_ASSERT_TRUE(within_rel(exposed, 8 * ag - 1e9 - 7e9, 0.01));
            CU_ASSERT_TRUE(within_rel((double)r->time_ps, 8 * ag + 1e9, 0.01));
            CU_ASSERT_TRUE(exposed > 0.5 * total);
        }
        run_result_free(r);
    }
}

/* A GEMM of g and an all-gather of c started together, overlapped in k chunks (run_task.
 * pipe_*): a two-stage pipeline, whose end is max(g + c / k, c + g / k) after their start;
 * not overlapped, one after the other. Both orders: the GEMM waiting for the collective (TE's
 * ring exchange) and the collective waiting for the GEMM (its pipelined reduce-scatter). */
static run_result *overlap_run(const tnet *f, uint32_t p, uint64_t bytes, bool coll_first,
                               uint32_t k)
{
    run_graph *g;
    np_err e = {0};
    run_graph_create(p, &g, &e);
    uint32_t tp = groupset_of_all(g, "tp", p), cls;
    run_graph_add_class(g, "rank", &cls, &e);
    uint32_t kp = kernel(g, "pre", MS(1)), kg = kernel(g, "gemm", MS(1)),
             kq = kernel(g, "post", MS(1));
    uint32_t pre = compute(g, cls, kp, 0, NULL, 0);
    run_task ct = {.kind = RUN_TASK_COLL, .comm = RUN_COMM_SP, .stream = 1,
                     .op = COLL_OP_ALL_GATHER, .algo = COLL_ALGO_RING, .groupset = tp,
                     .bytes = bytes};
    uint32_t last;
    if (coll_first) { /* pre, then the gather and the GEMM reading it, then post */
        ct.deps = &pre;
        ct.n_deps = 1;
        uint32_t c = task(g, cls, ct);
        uint32_t deps[2] = {pre, c};
        last = task(g, cls, (run_task){.kind = RUN_TASK_COMPUTE, .kernel = kg, .deps = deps,
                                       .n_deps = 2, .pipe_dep = c, .pipe_chunks = k});
    } else { /* pre, then the GEMM and the collective of its output, then post */
        uint32_t gm = compute(g, cls, kg, 0, &pre, 1);
        ct.deps = &gm;
        ct.n_deps = 1;
        ct.pipe_dep = gm;
        ct.pipe_chunks = k;
        last = task(g, cls, ct);
    }
    compute(g, cls, kq, 0, &last, 1);
    CU_ASSERT_EQUAL_FATAL(run_graph_finalize(g, &e), NP_OK);
    run_result *r = simulate(g, f, &(run_opts){0});
    run_graph_free(g);
    return r;
}

TEST(a_gemm_and_a_collective_overlapped_in_k_chunks_end_as_a_two_stage_pipeline)
{
    uint32_t p = 4, k = 4;
    uint64_t bytes = 8u << 20;
    for (int slow = 0; slow < 2; slow++) {
        const char *sets[] = {slow ? "system.link_gb_per_s=1" : "system.link_gb_per_s=64"};
        tnet f;
        tnet_init(&f, ARCH_TOPOLOGY_SWITCH, p, sets, 1);
        /* alpha-beta of a ring all-gather on the switch: (p-1)(alpha + n/p beta) */
        double a = 2.0 * (double)f.np.link_latency_ps + (double)f.np.switch_latency_ps;
        double b = 1e12 / (f.np.link_bytes_per_s * f.np.links_per_chip);
        double c = (p - 1) * (a + (double)bytes / p * b), gm = 1e9;
        CU_ASSERT_TRUE(slow ? c > gm : c < gm);
        double pipe = fmax(gm + c / k, c + gm / k);
        for (int coll_first = 0; coll_first < 2; coll_first++) {
            /* pre (1 ms), the pair, post (1 ms); the pair starts when pre ends, except that
             * the GEMM-first pair's GEMM waits for pre and its collective for the GEMM */
            run_result *r = overlap_run(&f, p, bytes, coll_first, k);
            CU_ASSERT_PTR_NOT_NULL_FATAL(r);
            CU_ASSERT_TRUE(within_rel((double)r->time_ps, 1e9 + pipe + 1e9, 0.01));
            run_result_free(r);
            r = overlap_run(&f, p, bytes, coll_first, 0); /* not overlapped */
            CU_ASSERT_PTR_NOT_NULL_FATAL(r);
            CU_ASSERT_TRUE(within_rel((double)r->time_ps, 1e9 + gm + c + 1e9, 0.01));
            run_result_free(r);
        }
    }
}

/* One ring all-reduce per rank: its duration in the run against the alpha-beta cost. */
TEST(a_ring_all_reduce_task_takes_its_alpha_beta_cost_when_uncontended)
{
    static const uint32_t P[] = {2, 4, 8};
    for (int i = 0; i < 3; i++)
        for (int reuse = 0; reuse < 2; reuse++) {
            uint32_t p = P[i];
            tnet f;
            tnet_init(&f, ARCH_TOPOLOGY_SWITCH, p, NULL, 0);
            run_graph *g;
            np_err e = {0};
            run_graph_create(p, &g, &e);
            uint32_t all[8], dp, cls;
            for (uint32_t k = 0; k < p; k++)
                all[k] = k;
            run_graph_add_groupset(g, "dp", 1, p, all, &dp, &e);
            run_graph_add_class(g, "r", &cls, &e);
            uint64_t n = (uint64_t)p << 18;
            task(g, cls, (run_task){.kind = RUN_TASK_COLL, .comm = RUN_COMM_DP, .stream = 3,
                                    .op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_RING,
                                    .groupset = dp, .bytes = n});
            CU_ASSERT_EQUAL_FATAL(run_graph_finalize(g, &e), NP_OK);
            run_result *r = simulate(g, &f, &(run_opts){.no_coll_reuse = !reuse});
            CU_ASSERT_PTR_NOT_NULL_FATAL(r);
            double want = ring_ar_ps(&f, p, (double)n);
            CU_ASSERT_TRUE(within_rel((double)r->time_ps, want, 0.01));
            CU_ASSERT_TRUE(within_rel((double)r->rank[p - 1].comm_ps[RUN_COMM_DP], want, 0.01));
            CU_ASSERT_EQUAL(r->colls_reused, (uint64_t)reuse);
            CU_ASSERT_EQUAL(r->colls_simulated, (uint64_t)!reuse);
            /* each rank's port carries 2 (p-1)/p n bytes each way */
            CU_ASSERT_EQUAL(r->links[r->top[0]].bytes, 2 * (p - 1) * (n / p));
            run_result_free(r);
            run_graph_free(g);
        }
}

/* The report's communication row of a ring all-reduce of n bytes over p chips, run twice (two
 * steps): by hand, each chip sends 2 (p-1) chunks of n / p per all-reduce (p-1 of the
 * reduce-scatter, p-1 of the all-gather), so 2 (p-1)/p n bytes per chip and step, all p chips
 * taking part; simulated and reused alike. */
TEST(the_reports_bytes_per_chip_of_a_ring_all_reduce_are_2_p_minus_1_over_p_of_its_size)
{
    static const uint32_t P[] = {2, 4, 8};
    for (int i = 0; i < 3; i++)
        for (int reuse = 0; reuse < 2; reuse++) {
            uint32_t p = P[i];
            tnet f;
            tnet_init(&f, ARCH_TOPOLOGY_SWITCH, p, NULL, 0);
            run_graph *g;
            np_err e = {0};
            run_graph_create(p, &g, &e);
            uint32_t dp = groupset_of_all(g, "dp", p), cls;
            run_graph_add_class(g, "r", &cls, &e);
            uint64_t n = (uint64_t)p << 16;
            task(g, cls, (run_task){.kind = RUN_TASK_COLL, .comm = RUN_COMM_DP, .stream = 1,
                                    .op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_RING,
                                    .groupset = dp, .bytes = n});
            CU_ASSERT_EQUAL_FATAL(run_graph_finalize(g, &e), NP_OK);
            run_result *r = simulate(g, &f, &(run_opts){.steps = 2, .no_coll_reuse = !reuse});
            CU_ASSERT_PTR_NOT_NULL_FATAL(r);
            run_report_comm rows[RUN_COMM_COUNT];
            CU_ASSERT_EQUAL_FATAL(run_report_comm_rows(r, rows), 1u);
            CU_ASSERT_EQUAL(rows[0].kind, RUN_COMM_DP);
            CU_ASSERT_EQUAL(rows[0].chips, p);
            CU_ASSERT_DOUBLE_EQUAL(rows[0].bytes_per_chip, 2.0 * (p - 1) * (double)(n / p), 1e-6);
            run_result_free(r);
            run_graph_free(g);
        }
}

/* Rank 0 computes 5 ms, then sends two messages of `bytes` to rank 1 at once, on two streams,
 * over the one route between them. */
static run_result *two_sends_after(const tnet *f, uint64_t bytes)
{
    run_graph *g;
    np_err e = {0};
    uint32_t pp, c0, c1;
    run_graph_create(2, &g, &e);
    pp = groupset_of_all(g, "pp", 2);
    run_graph_add_class(g, "first", &c0, &e);
    run_graph_add_class(g, "last", &c1, &e);
    run_graph_set_class(g, 1, c1, &e);
    uint32_t w = compute(g, c0, kernel(g, "wait", MS(5)), 0, NULL, 0);
    for (uint32_t k = 0; k < 2; k++) {
        task(g, c0, (run_task){.kind = RUN_TASK_SEND, .comm = RUN_COMM_PP, .bytes = bytes,
                               .peer_groupset = pp, .peer = 1, .tag = k, .stream = k,
                               .deps = &w, .n_deps = 1});
        task(g, c1, (run_task){.kind = RUN_TASK_RECV, .comm = RUN_COMM_PP, .bytes = bytes,
                               .peer_groupset = pp, .peer = -1, .tag = k, .stream = k});
    }
    CU_ASSERT_EQUAL_FATAL(run_graph_finalize(g, &e), NP_OK);
    run_result *r = simulate(g, f, &(run_opts){0});
    run_graph_free(g);
    return r;
}

/* A link's peak is the most it carried in one window of 1 µs however long the run: two sends
 * of 1,000 bytes that start together 5 ms into the run (both in the window of 5 ms) are 2,000
 * bytes in 1 µs, 2 GB/s on each link of their route — where windows grown to keep the run in
 * 512 of them (about 10 µs) gave a tenth of it; two of 1 MiB, far more than a window holds
 * (an 8 GB/s link carries 8,000 bytes in 1 µs), are the link's bandwidth, no more. */
TEST(a_links_peak_is_its_busiest_microsecond_however_long_the_run)
{
    tnet f;
    tnet_init(&f, ARCH_TOPOLOGY_SWITCH, 2, NULL, 0);
    run_result *r = two_sends_after(&f, 1000);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT(r->time_ps > MS(5));
    CU_ASSERT_EQUAL(r->link_window_ps, US(1));
    const run_link_stats *l = &r->links[r->top[0]];
    CU_ASSERT_EQUAL(l->bytes, 2000);
    CU_ASSERT_DOUBLE_EQUAL(l->peak_bytes_per_s, 2000 / 1e-6, 1e-3);
    CU_ASSERT_EQUAL(r->links[r->top[1]].bytes, 2000); /* chip 0 up, the switch down to chip 1 */
    CU_ASSERT_DOUBLE_EQUAL(r->links[r->top[1]].peak_bytes_per_s, 2000 / 1e-6, 1e-3);
    run_result_free(r);
    r = two_sends_after(&f, 1 << 20);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    l = &r->links[r->top[0]];
    CU_ASSERT_EQUAL(l->bytes, 2u << 20);
    CU_ASSERT_DOUBLE_EQUAL(l->peak_bytes_per_s, l->capacity_bytes_per_s, 1e-3);
    run_result_free(r);
}

TEST(collectives_that_share_links_are_simulated_together_and_slow_each_other)
{
    /* A 4-chip ring: groups {0, 2} and {1, 3} route 0 -> 1 -> 2 and 1 -> 2 -> 3, sharing the
     * link 1 -> 2 (and 3 -> 0 the other way): neither can be reused, and running both at once
     * takes longer than one alone. */
    tnet f;
    tnet_init(&f, ARCH_TOPOLOGY_RING, 4, NULL, 0);
    double alone = 0;
    for (int both = 0; both < 2; both++) {
        run_graph *g;
        np_err e = {0};
        run_graph_create(4, &g, &e);
        uint32_t mem[] = {0, 2, 1, 3}, gs, cls, idle;
        run_graph_add_groupset(g, "pairs", 2, 2, mem, &gs, &e);
        run_graph_add_class(g, "r", &cls, &e);
        run_graph_add_class(g, "idle", &idle, &e);
        if (!both) {
            run_graph_set_class(g, 1, idle, &e);
            run_graph_set_class(g, 3, idle, &e);
        }
        task(g, cls, (run_task){.kind = RUN_TASK_COLL, .comm = RUN_COMM_DP,
                                .op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_RING, .groupset = gs,
                                .bytes = 1u << 20});
        CU_ASSERT_EQUAL_FATAL(run_graph_finalize(g, &e), NP_OK);
        run_result *r = simulate(g, &f, &(run_opts){0});
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        if (!both) {
            alone = (double)r->time_ps;
            CU_ASSERT_EQUAL(r->colls_reused, 1); /* alone, its links are its own */
        } else {
            CU_ASSERT_EQUAL(r->colls_reused, 0);
            CU_ASSERT_EQUAL(r->colls_simulated, 2);
            CU_ASSERT_TRUE((double)r->time_ps > 1.3 * alone);
        }
        run_result_free(r);
        run_graph_free(g);
    }
}

/* ---- shortcuts ---------------------------------------------------------------------------- */

static void expect_same_results(const run_result *a, const run_result *b)
{
    CU_ASSERT_EQUAL(a->time_ps, b->time_ps);
    CU_ASSERT_EQUAL(a->ranks, b->ranks);
    CU_ASSERT_EQUAL(memcmp(a->step_end_ps, b->step_end_ps, a->steps * sizeof *a->step_end_ps), 0);
    CU_ASSERT_EQUAL(memcmp(a->rank, b->rank, a->ranks * sizeof *a->rank), 0);
    for (uint32_t i = 0; i < a->ranks; i++)
        if (memcmp(&a->rank[i], &b->rank[i], sizeof a->rank[i]) != 0) {
            fprintf(stderr, "rank %u differs: end %" PRIu64 " vs %" PRIu64 "\n", i,
                    a->rank[i].end_ps, b->rank[i].end_ps);
            break;
        }
    CU_ASSERT_EQUAL(a->stages, b->stages);
    CU_ASSERT_EQUAL(memcmp(a->stage_bubble_frac, b->stage_bubble_frac,
                           a->stages * sizeof(double)), 0);
    CU_ASSERT_EQUAL(memcmp(a->stage_bubble_ratio, b->stage_bubble_ratio,
                           a->stages * sizeof(double)), 0);
    CU_ASSERT_EQUAL(memcmp(a->comm_ps, b->comm_ps, sizeof a->comm_ps), 0);
    CU_ASSERT_EQUAL(memcmp(a->exposed_ps, b->exposed_ps, sizeof a->exposed_ps), 0);
    CU_ASSERT_EQUAL(memcmp(a->comm_bytes, b->comm_bytes, sizeof a->comm_bytes), 0);
    CU_ASSERT_EQUAL_FATAL(a->n_links, b->n_links);
    CU_ASSERT_EQUAL(a->link_window_ps, b->link_window_ps);
    for (uint32_t l = 0; l < a->n_links; l++) {
        CU_ASSERT_EQUAL(a->links[l].bytes, b->links[l].bytes);
        CU_ASSERT_EQUAL(a->links[l].peak_bytes_per_s, b->links[l].peak_bytes_per_s);
    }
    CU_ASSERT_EQUAL(memcmp(a->top, b->top, a->n_top * sizeof *a->top), 0);
}

/* tp2 x pp2 x dp2 on 4 islands of 2 chips (tp inside an island), 1F1B, 4 micro-batches, tp
 * all-reduces after every compute, two dp buckets: the tp all-reduces have their island's
 * links to themselves (reused), the dp all-reduces share the scale-out ports with the pipeline
 * sends (simulated), and the tp rank 1 half mirrors tp rank 0. */
static void three_d(tnet *f, pipe_shape *ps)
{
    static const char *const sets[] = {"system.topology=hierarchical", "system.chips=8",
                                       "system.island_chips=2"};
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 3, &f->cfg, &e), NP_OK);
    net_params_from_arch(&f->cfg, &f->np);
    *ps = (pipe_shape){.p = 2, .m = 4, .tp = 2, .dp = 2, .sched = SCHED_1F1B, .f_ps = US(30),
                       .b_ps = US(60), .act_bytes = 256 << 10, .tp_bytes = 128 << 10,
                       .dp_bytes = 1 << 20};
}

TEST(every_shortcut_on_and_off_gives_identical_results)
{
    tnet f;
    pipe_shape ps;
    three_d(&f, &ps);
    run_graph *g = pipe_graph(&ps);
    timed_calls = 0;
    run_result *all = simulate(g, &f, &(run_opts){0});
    uint64_t calls_cached = timed_calls;
    timed_calls = 0;
    run_result *none = simulate(g, &f, &(run_opts){.no_kernel_cache = true, .no_coll_reuse = true,
                                                   .no_rank_dedup = true});
    uint64_t calls_uncached = timed_calls;
    run_result *no_cache = simulate(g, &f, &(run_opts){.no_kernel_cache = true});
    run_result *no_mirror = simulate(g, &f, &(run_opts){.no_rank_dedup = true});
    run_result *no_reuse = simulate(g, &f, &(run_opts){.no_coll_reuse = true});
    CU_ASSERT_PTR_NOT_NULL_FATAL(all);
    CU_ASSERT_PTR_NOT_NULL_FATAL(none);
    CU_ASSERT_PTR_NOT_NULL_FATAL(no_cache);
    CU_ASSERT_PTR_NOT_NULL_FATAL(no_mirror);
    CU_ASSERT_PTR_NOT_NULL_FATAL(no_reuse);
    /* the shortcuts did something */
    CU_ASSERT_EQUAL(calls_cached, 3); /* fwd, bwd, optimizer: once each */
    CU_ASSERT_EQUAL(calls_uncached, 8 * (2 * 4 + 1)); /* every compute task of every rank */
    CU_ASSERT_EQUAL(all->ranks_simulated, 4);
    CU_ASSERT_EQUAL(all->mirror_ways, 2);
    CU_ASSERT_STRING_EQUAL(run_graph_groupset_name(g, all->mirror_groupset), "tp");
    CU_ASSERT_TRUE(all->colls_reused > 0);
    CU_ASSERT_EQUAL(all->colls_scratch, 1); /* one spec over one island signature */
    CU_ASSERT_TRUE(all->colls_simulated > 0); /* the dp buckets */
    CU_ASSERT_EQUAL(none->ranks_simulated, 8);
    CU_ASSERT_EQUAL(none->colls_reused, 0);
    CU_ASSERT_EQUAL(no_mirror->ranks_simulated, 8);
    CU_ASSERT_TRUE(no_mirror->colls_reused > 0);
    CU_ASSERT_TRUE(none->events > all->events);
    /* and changed nothing */
    expect_same_results(all, none);
    expect_same_results(all, no_cache);
    expect_same_results(all, no_mirror);
    expect_same_results(all, no_reuse);
    /* the figures are the run's: the pipeline sends, tp and dp all moved bytes */
    CU_ASSERT_TRUE(all->comm_bytes[RUN_COMM_PP] > 0);
    CU_ASSERT_TRUE(all->comm_bytes[RUN_COMM_TP] > 0);
    CU_ASSERT_TRUE(all->comm_bytes[RUN_COMM_DP] > 0);
    /* per micro-batch each of the 4 pipelines sends an activation forward and a gradient
     * back */
    CU_ASSERT_EQUAL(all->comm_bytes[RUN_COMM_PP], 8 * 4 * ps.act_bytes);
    /* every rank computes 4 forwards, 4 backwards and the optimizer step; the kernels report
     * their arrays busy half the time */
    for (uint32_t i = 0; i < all->ranks; i++) {
        CU_ASSERT_EQUAL(all->rank[i].busy_ps[RUN_UNIT_COMPUTE], 4 * (US(30) + US(60)) + US(3));
        CU_ASSERT_EQUAL(2 * all->rank[i].busy_ps[RUN_UNIT_MXU],
                        all->rank[i].busy_ps[RUN_UNIT_COMPUTE]);
    }
    /* a cache kept across runs times nothing the second time */
    run_kcache *kc = run_kcache_create();
    timed_calls = 0;
    run_result *first = simulate(g, &f, &(run_opts){.kcache = kc});
    CU_ASSERT_EQUAL(timed_calls, 3);
    CU_ASSERT_EQUAL(run_kcache_size(kc), 3);
    timed_calls = 0;
    run_result *second = simulate(g, &f, &(run_opts){.kcache = kc});
    CU_ASSERT_EQUAL(timed_calls, 0);
    CU_ASSERT_EQUAL(second->kernels_timed, 0);
    expect_same_results(all, second);
    run_result_free(first);
    run_result_free(second);
    run_kcache_free(kc);
    run_result_free(all);
    run_result_free(none);
    run_result_free(no_cache);
    run_result_free(no_mirror);
    run_result_free(no_reuse);
    run_graph_free(g);
}

TEST(a_run_is_deterministic_and_steps_follow_each_other)
{
    tnet f;
    pipe_shape ps;
    three_d(&f, &ps);
    run_graph *g = pipe_graph(&ps);
    run_result *a = simulate(g, &f, &(run_opts){0});
    run_result *b = simulate(g, &f, &(run_opts){0});
    run_result *three = simulate(g, &f, &(run_opts){.steps = 3});
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(three);
    expect_same_results(a, b);
    CU_ASSERT_EQUAL(three->steps, 3);
    /* the first step is the same; each later one ends later; the mean step is the run / 3 */
    CU_ASSERT_EQUAL(three->step_end_ps[0], a->step_end_ps[0]);
    CU_ASSERT_TRUE(three->step_end_ps[1] > three->step_end_ps[0]);
    CU_ASSERT_TRUE(three->step_end_ps[2] > three->step_end_ps[1]);
    CU_ASSERT_EQUAL(three->step_ps, three->time_ps / 3);
    CU_ASSERT_TRUE(three->time_ps <= 3 * a->time_ps);
    /* bubbles are measured on the last step, which has the first one's shape */
    CU_ASSERT_TRUE(within_abs(three->bubble_frac, a->bubble_frac, 0.02));
    run_result_free(a);
    run_result_free(b);
    run_result_free(three);
    run_graph_free(g);
}

/* ---- kernel launches ------------------------------------------------------------------------ */

/* A stream of kernels (docs/run.md, "Kernel launches"): each starts chip.kernel_gap_ns after
 * the later of the previous kernel's end and what it waits for, the first of a step
 * chip.kernel_launch_ns later still. */
static run_result *stream_run(const char *const *sets, size_t n_sets, uint32_t n, bool with_coll,
                              uint32_t steps)
{
    tnet f;
    tnet_init(&f, ARCH_TOPOLOGY_SWITCH, 2, sets, n_sets);
    run_graph *g;
    np_err e = {0};
    uint32_t all[2] = {0, 1}, dp, cls;
    CU_ASSERT_EQUAL_FATAL(run_graph_create(2, &g, &e), NP_OK);
    run_graph_add_groupset(g, "dp", 1, 2, all, &dp, &e);
    run_graph_add_class(g, "replica", &cls, &e);
    uint32_t k = kernel(g, "k", US(10));
    uint32_t prev = compute(g, cls, k, 0, NULL, 0);
    for (uint32_t i = 1; i < n; i++) {
        if (with_coll && i == n - 1) /* the last kernel waits for an all-reduce of the one before */
            prev = task(g, cls, (run_task){.kind = RUN_TASK_COLL, .comm = RUN_COMM_DP,
                                           .stream = 0, .op = COLL_OP_ALL_REDUCE,
                                           .algo = COLL_ALGO_RING, .groupset = dp,
                                           .bytes = 1 << 20, .deps = &prev, .n_deps = 1});
        prev = compute(g, cls, k, 0, &prev, 1);
    }
    CU_ASSERT_EQUAL_FATAL(run_graph_finalize(g, &e), NP_OK);
    run_result *r = simulate(g, &f, &(run_opts){.steps = steps});
    run_graph_free(g);
    return r;
}

TEST(n_kernels_on_a_stream_take_n_times_duration_plus_gap_plus_the_launch)
{
    static const char *const keys[] = {"chip.kernel_gap_ns=2000", "chip.kernel_launch_ns=7000"};
    /* 5 kernels of 10 us: 5 x (10 + 2) + 7 = 67 us, without the keys 50 */
    run_result *r = stream_run(keys, 2, 5, false, 1), *z = stream_run(NULL, 0, 5, false, 1);
    CU_ASSERT_EQUAL(r->time_ps, US(67));
    CU_ASSERT_EQUAL(z->time_ps, US(50));
    CU_ASSERT_EQUAL(r->rank[0].busy_ps[RUN_UNIT_COMPUTE], US(50)); /* the waits are idle */
    run_result_free(r);
    run_result_free(z);
    /* every step's first kernel pays the launch: 2 x 67 */
    r = stream_run(keys, 2, 5, false, 2);
    CU_ASSERT_EQUAL(r->time_ps, US(134));
    run_result_free(r);
    /* only the gap: 5 x 12; only the launch: 57 */
    r = stream_run(keys, 1, 5, false, 1);
    CU_ASSERT_EQUAL(r->time_ps, US(60));
    run_result_free(r);
    r = stream_run(keys + 1, 1, 5, false, 1);
    CU_ASSERT_EQUAL(r->time_ps, US(57));
    run_result_free(r);
    /* a kernel waiting for a collective starts the gap after it ends: the all-reduce (C) takes
     * as long either way, so 3 kernels take 7 + 3 x (10 + 2) + C against 30 + C */
    r = stream_run(keys, 2, 3, true, 1);
    z = stream_run(NULL, 0, 3, true, 1);
    CU_ASSERT_EQUAL(r->time_ps - z->time_ps, US(7) + 3 * US(2));
    CU_ASSERT(z->time_ps > US(30));
    run_result_free(r);
    run_result_free(z);
}

/* ---- errors --------------------------------------------------------------------------------- */

TEST(a_cycle_of_waiting_recvs_is_a_deadlock_naming_what_each_rank_waits_for)
{
    tnet f;
    tnet_init(&f, ARCH_TOPOLOGY_SWITCH, 2, NULL, 0);
    run_graph *g;
    np_err e = {0};
    /* each rank waits for the other's message before sending its own (one stream); with
     * absolute peers the two ranks need classes of their own */
    run_graph_create(2, &g, &e);
    uint32_t c0, c1;
    run_graph_add_class(g, "r0", &c0, &e);
    run_graph_add_class(g, "r1", &c1, &e);
    run_graph_set_class(g, 1, c1, &e);
    uint32_t a = kernel(g, "work", 1000);
    for (uint32_t r = 0; r < 2; r++) {
        uint32_t c = r ? c1 : c0;
        uint32_t x = task(g, c, (run_task){.kind = RUN_TASK_RECV, .comm = RUN_COMM_PP, .stream = 0,
                                           .bytes = 64, .peer_groupset = RUN_NONE,
                                           .peer = (int32_t)(1 - r), .tag = 5});
        task(g, c, (run_task){.kind = RUN_TASK_SEND, .comm = RUN_COMM_PP, .stream = 0,
                              .bytes = 64, .peer_groupset = RUN_NONE, .peer = (int32_t)(1 - r),
                              .tag = 5, .deps = &x, .n_deps = 1});
        compute(g, c, a, 0, &x, 1);
    }
    CU_ASSERT_EQUAL_FATAL(run_graph_finalize(g, &e), NP_OK);
    run_result *r = NULL;
    np_status st = run_simulate(g, &f.cfg, &f.np, &(run_opts){.time_kernel = time_from_key},
                                &r, &e);
    CU_ASSERT_EQUAL(st, NP_ERR_DEADLOCK);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "deadlock at 0 ps: 2 of 2 simulated ranks cannot finish"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "rank 0 step 0: [compute task 2 (compute) waits for "
                                         "task 0] [s0 task 0: recv from rank 1 (tag 5), nothing "
                                         "delivered]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "recv from rank 0 (tag 5)"));
    run_graph_free(g);
}

TEST(collectives_of_one_group_that_disagree_are_refused_before_the_run)
{
    run_graph *g;
    np_err e = {0};
    run_graph_create(2, &g, &e);
    uint32_t mem[] = {0, 1}, gs, c0, c1;
    run_graph_add_groupset(g, "dp", 1, 2, mem, &gs, &e);
    run_graph_add_class(g, "a", &c0, &e);
    run_graph_add_class(g, "b", &c1, &e);
    run_graph_set_class(g, 1, c1, &e);
    task(g, c0, (run_task){.kind = RUN_TASK_COLL, .comm = RUN_COMM_DP, .op = COLL_OP_ALL_REDUCE,
                           .groupset = gs, .bytes = 1024});
    task(g, c1, (run_task){.kind = RUN_TASK_COLL, .comm = RUN_COMM_DP, .op = COLL_OP_ALL_GATHER,
                           .groupset = gs, .bytes = 1024});
    CU_ASSERT_EQUAL(run_graph_finalize(g, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "collective 0 on s0/dp differs between ranks 1 (class b "
                                         "task 0: all_gather auto 1024 bytes) and 0 (class a task "
                                         "0: all_reduce auto 1024 bytes)"));
    run_graph_free(g);

    run_graph_create(2, &g, &e);
    run_graph_add_groupset(g, "dp", 1, 2, mem, &gs, &e);
    run_graph_add_class(g, "a", &c0, &e);
    run_graph_add_class(g, "b", &c1, &e);
    run_graph_set_class(g, 1, c1, &e);
    task(g, c0, (run_task){.kind = RUN_TASK_COLL, .comm = RUN_COMM_DP, .op = COLL_OP_ALL_REDUCE,
                           .groupset = gs, .bytes = 1024});
    CU_ASSERT_EQUAL(run_graph_finalize(g, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "run 0 and 1 collectives on stream s0"));
    run_graph_free(g);
}

TEST(unmatched_sends_and_mismatched_message_sizes_are_refused_before_the_run)
{
    run_graph *g;
    np_err e = {0};
    uint32_t mem[] = {0, 1, 2}, gs, cls;
    /* one class for all stages: rank 2 has no next stage, so its send goes outside the group
     * (ranks 0 and 1 are fine: 1 and 2 receive from their previous stage) */
    run_graph_create(3, &g, &e);
    run_graph_add_groupset(g, "pp", 1, 3, mem, &gs, &e);
    run_graph_add_class(g, "s", &cls, &e);
    task(g, cls, (run_task){.kind = RUN_TASK_SEND, .comm = RUN_COMM_PP, .bytes = 8,
                            .peer_groupset = gs, .peer = 1});
    task(g, cls, (run_task){.kind = RUN_TASK_RECV, .comm = RUN_COMM_PP, .bytes = 8, .stream = 1,
                            .peer_groupset = gs, .peer = -1});
    CU_ASSERT_EQUAL(run_graph_finalize(g, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "rank 2 (class s) sends with tag 0 to peer +1 of pp, "
                                         "which is outside its group"));
    run_graph_free(g);
    /* a send nobody receives */
    uint32_t c0, c1;
    run_graph_create(2, &g, &e);
    run_graph_add_groupset(g, "pp", 1, 2, mem, &gs, &e);
    run_graph_add_class(g, "first", &c0, &e);
    run_graph_add_class(g, "last", &c1, &e);
    run_graph_set_class(g, 1, c1, &e);
    task(g, c0, (run_task){.kind = RUN_TASK_SEND, .comm = RUN_COMM_PP, .bytes = 8,
                           .peer_groupset = gs, .peer = 1, .tag = 3});
    CU_ASSERT_EQUAL(run_graph_finalize(g, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "rank 0 (class first) sends to rank 1 with tag 3, but "
                                         "rank 1 (class last) never receives from rank 0"));
    run_graph_free(g);
    /* sizes that disagree */
    run_graph_create(2, &g, &e);
    run_graph_add_groupset(g, "pp", 1, 2, mem, &gs, &e);
    run_graph_add_class(g, "first", &c0, &e);
    run_graph_add_class(g, "last", &c1, &e);
    run_graph_set_class(g, 1, c1, &e);
    task(g, c0, (run_task){.kind = RUN_TASK_SEND, .comm = RUN_COMM_PP, .bytes = 8,
                           .peer_groupset = gs, .peer = 1});
    task(g, c1, (run_task){.kind = RUN_TASK_RECV, .comm = RUN_COMM_PP, .bytes = 16,
                           .peer_groupset = gs, .peer = -1});
    CU_ASSERT_EQUAL(run_graph_finalize(g, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "message 0 from rank 0 to rank 1 (tag 0): class first "
                                         "task 0 sends 8 bytes, class last task 0 receives 16"));
    run_graph_free(g);
}

TEST(bad_tasks_are_refused_when_added_and_leave_the_class_unchanged)
{
    run_graph *g;
    np_err e = {0};
    uint32_t mem[] = {0, 1}, gs, cls, id;
    run_graph_create(2, &g, &e);
    run_graph_add_groupset(g, "dp", 1, 2, mem, &gs, &e);
    run_graph_add_class(g, "r", &cls, &e);
    uint32_t k = kernel(g, "k", 10), later = 0;
    CU_ASSERT_EQUAL(run_graph_add_task(g, cls, &(run_task){.kind = RUN_TASK_COMPUTE, .kernel = k,
                                                           .deps = &later, .n_deps = 1},
                                       &id, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "class r task 0: dependency 0 is not an earlier task"));
    CU_ASSERT_EQUAL(run_graph_add_task(g, cls, &(run_task){.kind = RUN_TASK_COMPUTE, .kernel = 9},
                                       &id, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(run_graph_add_task(g, cls, &(run_task){.kind = RUN_TASK_COLL, .groupset = 7},
                                       &id, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(run_graph_add_task(g, cls, &(run_task){.kind = RUN_TASK_COLL, .groupset = gs,
                                                           .op = COLL_OP_ALL_GATHER,
                                                           .algo = COLL_ALGO_TREE},
                                       &id, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "all_gather has no tree algorithm"));
    CU_ASSERT_EQUAL(run_graph_add_task(g, cls, &(run_task){.kind = RUN_TASK_SEND, .stream = 15},
                                       &id, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(run_graph_tasks(g, cls), 0);
    /* a rank in no group of its collective's groupset */
    run_graph_free(g);
    run_graph_create(3, &g, &e);
    run_graph_add_groupset(g, "dp", 1, 2, mem, &gs, &e);
    run_graph_add_class(g, "r", &cls, &e);
    task(g, cls, (run_task){.kind = RUN_TASK_COLL, .comm = RUN_COMM_DP, .op = COLL_OP_ALL_REDUCE,
                            .groupset = gs, .bytes = 64});
    CU_ASSERT_EQUAL(run_graph_finalize(g, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "rank 2 (class r) runs all_reduce on groupset dp (task 0) "
                                         "but is in none of its groups"));
    run_graph_free(g);
    /* two ranks on one chip; a chip the network lacks */
    run_graph_create(2, &g, &e);
    run_graph_add_class(g, "r", &cls, &e);
    run_graph_set_chip(g, 1, 0, &e);
    CU_ASSERT_EQUAL(run_graph_finalize(g, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "ranks 0 and 1 are both placed on chip 0"));
    run_graph_free(g);
    run_graph_create(2, &g, &e);
    run_graph_add_class(g, "r", &cls, &e);
    run_graph_set_chip(g, 1, 9, &e);
    CU_ASSERT_EQUAL(run_graph_finalize(g, &e), NP_OK);
    tnet f;
    tnet_init(&f, ARCH_TOPOLOGY_SWITCH, 2, NULL, 0);
    run_result *r = NULL;
    CU_ASSERT_EQUAL(run_simulate(g, &f.cfg, &f.np, &(run_opts){.time_kernel = time_from_key},
                                 &r, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "rank 1 is placed on chip 9, but the network has 2 "
                                         "chips"));
    run_graph_free(g);
}
