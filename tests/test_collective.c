/* test_collective.c — the chip network (noc/net.h) and the collectives over it (noc/coll.h),
 * and `npusim collective`.
 *
 * Reference: the alpha-beta(-gamma) cost model of each algorithm (Thakur, Rabenseifner &
 * Gropp, "Optimization of Collective Communication Operations in MPICH", IJHPCA 2005; Chan et
 * al., "Collective communication: theory, practice, and experience", 2007), with
 * alpha = the path latency (links + switches), beta = 1 / link bandwidth, gamma = 1 / the
 * chip's reduction rate; the formulas are written out in each test from the architecture's
 * parameters, never taken from a run. On an idle network with no chunking the simulation must
 * land within 1% of them. Contended cases are checked against what max-min sharing predicts.
 */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "coll.h"
#include "harness.h"

/* A tiny-preset system with the given topology and chip count. */
typedef struct sysfix {
    arch_config cfg;
    net_params np;
    evq *q;
    coll_sys *s;
    double alpha_ps, beta_ps_per_byte, gamma_ps_per_byte;
} sysfix;

static void fix_open(sysfix *f, arch_topology topo, uint32_t chips, const char *const *sets,
                     size_t n_sets)
{
    np_err e = {0};
    memset(f, 0, sizeof *f);
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, n_sets, &f->cfg, &e), NP_OK);
    net_params_from_arch(&f->cfg, &f->np);
    f->np.topology = topo;
    f->np.chips = chips;
    f->np.dims[0] = chips;
    f->np.dims[1] = f->np.dims[2] = 1;
    if (topo == ARCH_TOPOLOGY_SWITCH && f->np.switch_radix < chips)
        f->np.switch_radix = chips;
    if (topo == ARCH_TOPOLOGY_FULLY_CONNECTED)
        f->np.links_per_chip = chips - 1;
    CU_ASSERT_EQUAL_FATAL(evq_create(&f->q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(coll_sys_create(&f->cfg, &f->np, f->q, NULL, &f->s, &e), NP_OK);
    /* alpha and beta from the parameters (not from the built network) */
    double link = f->np.link_bytes_per_s;
    switch (topo) {
    case ARCH_TOPOLOGY_RING: /* links_per_chip / 2 links to each neighbour */
        f->alpha_ps = (double)f->np.link_latency_ps;
        f->beta_ps_per_byte = 1e12 / (link * (f->np.links_per_chip / 2));
        break;
    case ARCH_TOPOLOGY_SWITCH: /* chip -> switch -> chip, all planes together */
        f->alpha_ps = 2.0 * (double)f->np.link_latency_ps + (double)f->np.switch_latency_ps;
        f->beta_ps_per_byte = 1e12 / (link * f->np.links_per_chip);
        break;
    default:
        f->alpha_ps = (double)f->np.link_latency_ps;
        f->beta_ps_per_byte = 1e12 / link;
        break;
    }
    double elems_per_s = (double)f->cfg.core.vector_lanes * (double)f->cfg.core.vector_ops_per_lane *
                         f->cfg.core.clock_ghz * 1e9 * (double)f->cfg.chip.cores;
    f->gamma_ps_per_byte = 1e12 / (elems_per_s * 4);
}

static void fix_close(sysfix *f)
{
    coll_sys_free(f->s);
    evq_free(f->q);
}

static double run_ps(sysfix *f, coll_op op, coll_algo algo, uint64_t bytes, uint64_t chunk)
{
    coll_desc d = {.op = op, .algo = algo, .bytes = bytes, .chunk_bytes = chunk};
    coll_result r;
    np_err e = {0};
    np_status st = coll_run(f->s, &d, &r, &e);
    CU_ASSERT_EQUAL(st, NP_OK);
    if (st != NP_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return -1;
    }
    np_status v = net_verify(coll_sys_net(f->s), &e);
    CU_ASSERT_EQUAL(v, NP_OK);
    CU_ASSERT_EQUAL(net_flows_active(coll_sys_net(f->s)), 0);
    return (double)(r.t_end_ps - r.t_start_ps);
}

static bool within(double got, double want, double rel)
{
    return fabs(got - want) <= rel * want;
}

static const uint32_t sizes_p[] = {2, 4, 8, 16, 64};
#define N_P (sizeof sizes_p / sizeof sizes_p[0])

static double lg(uint32_t p) { return ceil(log2((double)p)); }

TEST(ring_algorithms_on_an_idle_ring_match_alpha_beta_within_1_percent)
{
    for (size_t i = 0; i < N_P; i++) {
        uint32_t p = sizes_p[i];
        sysfix f;
        fix_open(&f, ARCH_TOPOLOGY_RING, p, NULL, 0);
        double a = f.alpha_ps, b = f.beta_ps_per_byte, g = f.gamma_ps_per_byte;
        double n = (double)(p * 65536);
        double ar = 2 * (p - 1) * (a + n / p * b) + (p - 1) * n / p * g;
        double ag = (p - 1) * (a + n / p * b);
        double rs = (p - 1) * (a + n / p * b + n / p * g);
        CU_ASSERT_TRUE(within(run_ps(&f, COLL_OP_ALL_REDUCE, COLL_ALGO_RING, (uint64_t)n, 0), ar, 0.01));
        CU_ASSERT_TRUE(within(run_ps(&f, COLL_OP_ALL_GATHER, COLL_ALGO_RING, (uint64_t)n, 0), ag, 0.01));
        CU_ASSERT_TRUE(within(run_ps(&f, COLL_OP_REDUCE_SCATTER, COLL_ALGO_RING, (uint64_t)n, 0), rs, 0.01));
        /* sendrecv: every rank to the next at once, each over its own link */
        CU_ASSERT_TRUE(within(run_ps(&f, COLL_OP_SENDRECV, COLL_ALGO_DIRECT, (uint64_t)n, 0), a + n * b, 0.01));
        fix_close(&f);
    }
}

TEST(links_of_no_latency_deliver_zero_byte_messages_at_time_0_and_the_collective_completes)
{
    /* Links of latency 0 are inside system.link_latency_ns's range. Over them a message
     * arrives at the instant its last byte leaves: an 8-byte all-reduce's messages of no
     * bytes arrive at time 0 (once read as "no send became ready"), and a delivery came
     * before the sender's SENT notification, which then never came (the port stayed busy:
     * "21 of 112 receives outstanding"). Every algorithm completes, and with alpha = 0 in no
     * more time than with a latency of 1 ns (alpha-beta: the time cannot grow when alpha
     * shrinks). */
    static const char *const zero[] = {"system.link_latency_ns=0"};
    static const char *const one[] = {"system.link_latency_ns=1"};
    static const coll_algo algos[] = {COLL_ALGO_RING, COLL_ALGO_BIRING, COLL_ALGO_TREE};
    for (size_t a = 0; a < sizeof algos / sizeof *algos; a++)
        for (uint64_t n = 8; n <= 64; n *= 2) {
            sysfix f0, f1;
            fix_open(&f0, ARCH_TOPOLOGY_RING, 8, zero, 1);
            fix_open(&f1, ARCH_TOPOLOGY_RING, 8, one, 1);
            CU_ASSERT_EQUAL(f0.np.link_latency_ps, 0);
            double t0 = run_ps(&f0, COLL_OP_ALL_REDUCE, algos[a], n, 0);
            double t1 = run_ps(&f1, COLL_OP_ALL_REDUCE, algos[a], n, 0);
            CU_ASSERT(t0 >= 0);
            CU_ASSERT(t0 <= t1);
            fix_close(&f0);
            fix_close(&f1);
        }
}

TEST(bidirectional_ring_all_reduce_halves_the_bandwidth_term)
{
    /* a vector unit so fast that gamma is negligible (< 0.1%): both directions' reductions
     * share one reducer per chip, which the plain formula does not model */
    static const char *const sets[] = {"core.vector_lanes=65536", "core.vector_ops_per_lane=64"};
    for (size_t i = 1; i < N_P; i++) { /* p >= 4: with 2 chips both ways are the same pair */
        uint32_t p = sizes_p[i];
        sysfix f;
        fix_open(&f, ARCH_TOPOLOGY_RING, p, sets, 2);
        double a = f.alpha_ps, b = f.beta_ps_per_byte;
        double n = (double)(p * 65536);
        double want = 2 * (p - 1) * (a + n / (2.0 * p) * b);
        CU_ASSERT_TRUE(within(run_ps(&f, COLL_OP_ALL_REDUCE, COLL_ALGO_BIRING, (uint64_t)n, 0), want, 0.01));
        fix_close(&f);
    }
}

TEST(tree_recursive_and_pairwise_algorithms_on_an_idle_switch_match_alpha_beta)
{
    /* On a non-blocking switch every pair is one alpha and one beta apart and no two of these
     * schedules' concurrent messages share a port, which is what the formulas assume. */
    for (size_t i = 0; i < N_P; i++) {
        uint32_t p = sizes_p[i];
        sysfix f;
        fix_open(&f, ARCH_TOPOLOGY_SWITCH, p, NULL, 0);
        double a = f.alpha_ps, b = f.beta_ps_per_byte, g = f.gamma_ps_per_byte, L = lg(p);
        double n = (double)(p * 16384);
        double fr = (p - 1.0) / p;
        struct { coll_op op; coll_algo algo; double want; } cases[] = {
            {COLL_OP_ALL_GATHER, COLL_ALGO_RHD, L * a + fr * n * b},
            {COLL_OP_REDUCE_SCATTER, COLL_ALGO_RHD, L * a + fr * n * (b + g)},
            {COLL_OP_ALL_REDUCE, COLL_ALGO_RHD, 2 * L * a + 2 * fr * n * b + fr * n * g},
            {COLL_OP_BROADCAST, COLL_ALGO_TREE, L * (a + n * b)},
            {COLL_OP_REDUCE, COLL_ALGO_TREE, L * (a + n * b + n * g)},
            {COLL_OP_ALL_REDUCE, COLL_ALGO_TREE, 2 * L * (a + n * b) + L * n * g},
            {COLL_OP_SCATTER, COLL_ALGO_TREE, L * a + fr * n * b},
            {COLL_OP_GATHER, COLL_ALGO_TREE, L * a + fr * n * b},
            {COLL_OP_ALL_TO_ALL, COLL_ALGO_PAIRWISE, (p - 1) * (a + n / p * b)},
            {COLL_OP_ALL_REDUCE, COLL_ALGO_RING, 2 * (p - 1) * (a + n / p * b) + (p - 1) * n / p * g},
            {COLL_OP_BROADCAST, COLL_ALGO_CHAIN, (p - 1) * (a + n * b)},
        };
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            double got = run_ps(&f, cases[k].op, cases[k].algo, (uint64_t)n, 0);
            if (!within(got, cases[k].want, 0.01))
                fprintf(stderr, "p=%u %s/%s: %.0f ps, alpha-beta %.0f ps\n", (unsigned)p,
                        coll_op_name(cases[k].op), coll_algo_name(cases[k].algo), got,
                        cases[k].want);
            CU_ASSERT_TRUE(within(got, cases[k].want, 0.01));
        }
        fix_close(&f);
    }
}

TEST(pipelined_chain_broadcast_and_reduce_follow_the_pipeline_formula)
{
    for (size_t i = 1; i < N_P; i++) {
        uint32_t p = sizes_p[i];
        sysfix f;
        fix_open(&f, ARCH_TOPOLOGY_SWITCH, p, NULL, 0);
        double a = f.alpha_ps, b = f.beta_ps_per_byte, g = f.gamma_ps_per_byte;
        double n = 1 << 20, c = 16, s = n / c;
        double bc = (p - 1) * (a + s * b) + (c - 1) * s * b;
        double rd = (p - 1) * (a + s * b + s * g) + (c - 1) * s * fmax(b, g);
        CU_ASSERT_TRUE(within(run_ps(&f, COLL_OP_BROADCAST, COLL_ALGO_CHAIN, (uint64_t)n, (uint64_t)s), bc, 0.01));
        CU_ASSERT_TRUE(within(run_ps(&f, COLL_OP_REDUCE, COLL_ALGO_CHAIN, (uint64_t)n, (uint64_t)s), rd, 0.01));
        fix_close(&f);
    }
}

TEST(hierarchical_all_reduce_matches_its_two_level_cost)
{
    /* 4 islands of 4 chips: inside an island chip -> island switch -> chip; across islands
     * chip -> scale-out switch -> chip with scaleout_latency in all. */
    static const char *const sets[] = {"system.scaleout_gb_per_s=4",
                                       "system.scaleout_latency_ns=1000"};
    sysfix f;
    fix_open(&f, ARCH_TOPOLOGY_HIERARCHICAL, 16, sets, 2);
    CU_ASSERT_EQUAL(f.np.island_chips, 8); /* tiny's default; use 4 below */
    fix_close(&f);
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 2, &cfg, &e), NP_OK);
    net_params np;
    net_params_from_arch(&cfg, &np);
    np.topology = ARCH_TOPOLOGY_HIERARCHICAL;
    np.chips = 16;
    np.island_chips = 4;
    evq *q;
    coll_sys *s;
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(coll_sys_create(&cfg, &np, q, NULL, &s, &e), NP_OK);
    double a1 = 2.0 * np.link_latency_ps + np.switch_latency_ps;
    double b1 = 1e12 / (np.link_bytes_per_s * np.links_per_chip);
    double a2 = (double)np.scaleout_latency_ps, b2 = 1e12 / np.scaleout_bytes_per_s;
    double g = 1e12 / ((double)cfg.core.vector_lanes * cfg.core.vector_ops_per_lane *
                       cfg.core.clock_ghz * 1e9 * cfg.chip.cores * 4);
    double p = 16, q4 = 4, n = 1 << 20;
    double want = (q4 - 1) * (a1 + n / q4 * b1 + n / q4 * g) +
                  2 * (p / q4 - 1) * (a2 + n / p * b2) + (p / q4 - 1) * n / p * g +
                  (q4 - 1) * (a1 + n / q4 * b1);
    coll_desc d = {.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_HIER, .bytes = (uint64_t)n};
    coll_result r;
    CU_ASSERT_EQUAL_FATAL(coll_run(s, &d, &r, &e), NP_OK);
    CU_ASSERT_TRUE(within((double)(r.t_end_ps - r.t_start_ps), want, 0.01));
    /* and it beats a flat ring, whose every step crosses the slow scale-out network */
    d.algo = COLL_ALGO_RING;
    coll_result flat;
    CU_ASSERT_EQUAL_FATAL(coll_run(s, &d, &flat, &e), NP_OK);
    CU_ASSERT_TRUE(flat.t_end_ps - flat.t_start_ps > r.t_end_ps - r.t_start_ps);
    coll_sys_free(s);
    evq_free(q);
}

TEST(large_ring_all_reduce_bus_bandwidth_approaches_the_link_bandwidth)
{
    sysfix f;
    fix_open(&f, ARCH_TOPOLOGY_RING, 8, NULL, 0);
    double n = 256.0 * (1 << 20);
    double t = run_ps(&f, COLL_OP_ALL_REDUCE, COLL_ALGO_RING, (uint64_t)n, 1 << 20);
    double busbw = n / (t / 1e12) * coll_busbw_factor(COLL_OP_ALL_REDUCE, 8);
    double link = 1e12 / f.beta_ps_per_byte;
    CU_ASSERT_TRUE(busbw > 0.95 * link && busbw <= link * 1.0001);
    fix_close(&f);
}

typedef struct done_log {
    int calls;
    uint64_t t_end[4];
} done_log;

static void on_done(void *ctx, const coll_result *r)
{
    done_log *l = ctx;
    if (l->calls < 4)
        l->t_end[l->calls] = r->t_end_ps - r->t_start_ps;
    l->calls++;
}

/* Runs two all-reduces at once on groups ga and gb of a 16-chip ring; returns their times. */
static void run_pair(const uint32_t *ga, const uint32_t *gb, uint32_t n, uint64_t out[2])
{
    sysfix f;
    fix_open(&f, ARCH_TOPOLOGY_RING, 16, NULL, 0);
    done_log la = {0}, lb = {0};
    coll_desc da = {.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_RING, .chips = ga, .n_chips = n,
                    .bytes = 1 << 20, .done = on_done, .ctx = &la};
    coll_desc db = da;
    db.chips = gb;
    db.ctx = &lb;
    coll *a = NULL, *b = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(coll_start(f.s, &da, &a, &e), NP_OK);
    if (gb)
        CU_ASSERT_EQUAL_FATAL(coll_start(f.s, &db, &b, &e), NP_OK);
    CU_ASSERT_EQUAL(evq_run(f.q, &e), NP_OK);
    CU_ASSERT_EQUAL(la.calls, 1);
    CU_ASSERT_TRUE(coll_is_done(a));
    out[0] = la.t_end[0];
    out[1] = gb ? lb.t_end[0] : 0;
    CU_ASSERT_EQUAL(net_verify(coll_sys_net(f.s), &e), NP_OK);
    coll_free(a);
    coll_free(b);
    fix_close(&f);
}

TEST(two_all_reduces_sharing_links_take_longer_and_disjoint_ones_do_not)
{
    uint32_t low[8], high[8];
    for (uint32_t i = 0; i < 8; i++) {
        low[i] = i;
        high[i] = 8 + i;
    }
    uint64_t alone[2], disjoint[2], shared[2];
    run_pair(low, NULL, 8, alone);
    run_pair(low, high, 8, disjoint); /* chips 0-7 and 8-15: no link in common */
    run_pair(low, low, 8, shared);    /* the same ring twice: every link shared by two flows */
    CU_ASSERT_EQUAL(disjoint[0], alone[0]);
    CU_ASSERT_EQUAL(disjoint[1], alone[0]);
    /* Max-min sharing halves each flow's bandwidth while both run, so the beta term doubles:
     * 2(p-1)(alpha + 2 n/(pB)) + (p-1) n/p gamma, with both reductions on one reducer. */
    sysfix f;
    fix_open(&f, ARCH_TOPOLOGY_RING, 16, NULL, 0);
    double a = f.alpha_ps, b = f.beta_ps_per_byte, g = f.gamma_ps_per_byte, n = 1 << 20, p = 8;
    fix_close(&f);
    double one = 2 * (p - 1) * (a + n / p * b) + (p - 1) * n / p * g;
    double two = 2 * (p - 1) * (a + 2 * n / p * b) + 2 * (p - 1) * n / p * g;
    CU_ASSERT_TRUE(within((double)alone[0], one, 0.01));
    CU_ASSERT_TRUE((double)shared[0] > 1.5 * alone[0]);
    CU_ASSERT_TRUE((double)shared[0] <= two * 1.01);
    CU_ASSERT_TRUE((double)shared[1] <= two * 1.01);
}

static void flow_done(void *ctx, uint64_t arg, net_event ev)
{
    uint64_t *t = ctx;
    if (ev == NET_EVENT_DELIVERED)
        t[arg] = 1; /* marks delivery; times are read from the queue below */
}

TEST(flows_share_links_max_min_fairly)
{
    /* Ring of 4, 8 GB/s per direction, 200 ns. Flows: A 0->2 (links 0->1, 1->2), B 1->2,
     * C 0->1. Each link has two flows: max-min gives everyone 4 GB/s. After C ends, A is
     * still held to 4 GB/s by link 1->2 (shared with B). */
    sysfix f;
    fix_open(&f, ARCH_TOPOLOGY_RING, 4, NULL, 0);
    net *n = coll_sys_net(f.s);
    uint64_t got[3] = {0};
    np_err e = {0};
    CU_ASSERT_EQUAL(net_transfer(n, 0, 2, 8000, flow_done, got, 0, &e), NP_OK);
    CU_ASSERT_EQUAL(net_transfer(n, 1, 2, 8000, flow_done, got, 1, &e), NP_OK);
    CU_ASSERT_EQUAL(net_transfer(n, 0, 1, 4000, flow_done, got, 2, &e), NP_OK);
    CU_ASSERT_EQUAL(net_verify(n, &e), NP_OK);
    /* C: 4000 B at 4 GB/s = 1000 ns, then 200 ns latency */
    CU_ASSERT_EQUAL(evq_run_until(f.q, 1200000 - 1, &e), NP_OK);
    CU_ASSERT_EQUAL(got[2], 0);
    CU_ASSERT_EQUAL(evq_run_until(f.q, 1200000, &e), NP_OK);
    CU_ASSERT_EQUAL(got[2], 1);
    /* A and B: 8000 B at 4 GB/s = 2000 ns; A has 2 hops (400 ns), B one (200 ns) */
    CU_ASSERT_EQUAL(evq_run_until(f.q, 2200000, &e), NP_OK);
    CU_ASSERT_EQUAL(got[1], 1);
    CU_ASSERT_EQUAL(got[0], 0);
    CU_ASSERT_EQUAL(evq_run_until(f.q, 2400000, &e), NP_OK);
    CU_ASSERT_EQUAL(got[0], 1);
    CU_ASSERT_EQUAL(net_verify(n, &e), NP_OK);
    net_path_info path;
    CU_ASSERT_EQUAL(net_route(n, 0, 2, &path, &e), NP_OK);
    CU_ASSERT_EQUAL(path.n_links, 2);
    fix_close(&f);
}

TEST(topologies_route_by_dimension_order_and_their_documented_rules)
{
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &cfg, &e), NP_OK);
    net_params p;
    net_params_from_arch(&cfg, &p);
    evq *q;
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    net *n;
    net_path_info path;
    /* torus 4x4x2: (0,0,0) -> (3,2,1) is 1 hop back in x, 2 in y, 1 in z */
    p.topology = ARCH_TOPOLOGY_TORUS3D;
    p.chips = 32;
    p.dims[0] = 4;
    p.dims[1] = 4;
    p.dims[2] = 2;
    p.links_per_chip = 6;
    CU_ASSERT_EQUAL_FATAL(net_create(&p, q, NULL, &n, &e), NP_OK);
    CU_ASSERT_EQUAL(net_route(n, 0, 3 + 2 * 4 + 1 * 16, &path, &e), NP_OK);
    CU_ASSERT_EQUAL(path.n_links, 4);
    net_link_info li;
    net_link_get(n, path.links[0], &li);
    CU_ASSERT_EQUAL(li.from, 0);
    CU_ASSERT_EQUAL(li.to, 3); /* x first, the short way round */
    CU_ASSERT_EQUAL(path.latency_ps, 4 * p.link_latency_ps);
    net_free(n);
    /* fat tree of 8-port switches, 32 chips: leaves of 4; other leaf = 4 links, same = 2 */
    p.topology = ARCH_TOPOLOGY_FAT_TREE;
    p.switch_radix = 8;
    p.links_per_chip = 1;
    CU_ASSERT_EQUAL_FATAL(net_create(&p, q, NULL, &n, &e), NP_OK);
    CU_ASSERT_EQUAL(net_route(n, 0, 3, &path, &e), NP_OK);
    CU_ASSERT_EQUAL(path.n_links, 2);
    CU_ASSERT_EQUAL(net_route(n, 0, 31, &path, &e), NP_OK);
    CU_ASSERT_EQUAL(path.n_links, 4);
    CU_ASSERT_EQUAL(path.latency_ps, 4 * p.link_latency_ps + 3 * p.switch_latency_ps);
    net_free(n);
    /* hierarchical: within an island 2 links via its switch, across via scale-out */
    p.topology = ARCH_TOPOLOGY_HIERARCHICAL;
    p.island_chips = 8;
    CU_ASSERT_EQUAL_FATAL(net_create(&p, q, NULL, &n, &e), NP_OK);
    CU_ASSERT_EQUAL(net_route(n, 1, 6, &path, &e), NP_OK);
    CU_ASSERT_EQUAL(path.latency_ps, 2 * p.link_latency_ps + p.switch_latency_ps);
    CU_ASSERT_EQUAL(net_route(n, 1, 9, &path, &e), NP_OK);
    CU_ASSERT_EQUAL(path.latency_ps, p.scaleout_latency_ps);
    CU_ASSERT_DOUBLE_EQUAL(path.bytes_per_s, p.scaleout_bytes_per_s, 1);
    net_free(n);
    /* fully connected: one hop; a ring of 5: at most 2 hops */
    p.topology = ARCH_TOPOLOGY_FULLY_CONNECTED;
    p.chips = 6;
    p.links_per_chip = 5;
    CU_ASSERT_EQUAL_FATAL(net_create(&p, q, NULL, &n, &e), NP_OK);
    for (uint32_t a = 0; a < 6; a++)
        for (uint32_t b = 0; b < 6; b++) {
            CU_ASSERT_EQUAL(net_route(n, a, b, &path, &e), NP_OK);
            CU_ASSERT_EQUAL(path.n_links, a != b);
        }
    net_free(n);
    p.topology = ARCH_TOPOLOGY_RING;
    p.chips = 5;
    p.dims[0] = 5;
    p.dims[1] = p.dims[2] = 1;
    p.links_per_chip = 2;
    CU_ASSERT_EQUAL_FATAL(net_create(&p, q, NULL, &n, &e), NP_OK);
    CU_ASSERT_EQUAL(net_route(n, 0, 3, &path, &e), NP_OK);
    CU_ASSERT_EQUAL(path.n_links, 2);
    net_free(n);
    evq_free(q);
}

/* Link faults (net_params.faults, noc/net_fault.c): routes around a failed link are the
 * shortest paths a hand count gives, a transfer over a detour or a slowed link takes the
 * alpha-beta time of that path, and where no path is left the route fails naming the link. */
static net *fault_net(evq *q, arch_topology t, uint32_t chips, uint32_t dx, uint32_t lpc,
                      const net_link_fault *faults, uint32_t nf, np_status want)
{
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &cfg, &e), NP_OK);
    net_params p;
    net_params_from_arch(&cfg, &p);
    p.topology = t;
    p.chips = chips;
    p.dims[0] = dx;
    p.dims[1] = chips / dx;
    p.dims[2] = 1;
    p.links_per_chip = lpc;
    p.switch_radix = chips;
    p.faults = faults;
    p.n_faults = nf;
    net *n = NULL;
    CU_ASSERT_EQUAL(net_create(&p, q, NULL, &n, &e), want);
    return n;
}

static bool path_avoids(net *n, const net_path_info *path, uint32_t from, uint32_t to)
{
    for (uint32_t i = 0; i < path->n_links; i++) {
        net_link_info li;
        net_link_get(n, path->links[i], &li);
        if (li.from == from && li.to == to)
            return false;
    }
    return true;
}

TEST(a_failed_link_is_routed_around_where_the_topology_has_another_path)
{
    np_err e = {0};
    evq *q;
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    net_path_info path;
    /* torus 4 x 4, chip0->chip1 failed: 0 -> 1 takes 3 links (0 -> 4 -> 5 -> 1 or 0 -> 12 ->
     * 13 -> 1), 0 -> 2 the wrap-around 0 -> 3 -> 2 (2 links, as before: x the short way is a
     * tie broken towards +x, now impossible), 1 -> 0 is untouched (1 link) */
    net_link_fault f01 = {.name = "chip0->chip1", .factor = 0};
    net *n = fault_net(q, ARCH_TOPOLOGY_TORUS2D, 16, 4, 4, &f01, 1, NP_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(n);
    uint64_t lat = net_get_params(n)->link_latency_ps;
    CU_ASSERT_EQUAL(net_route(n, 0, 1, &path, &e), NP_OK);
    CU_ASSERT_EQUAL(path.n_links, 3);
    CU_ASSERT_TRUE(path_avoids(n, &path, 0, 1));
    CU_ASSERT_EQUAL(path.latency_ps, 3 * lat);
    CU_ASSERT_EQUAL(net_route(n, 0, 2, &path, &e), NP_OK);
    CU_ASSERT_EQUAL(path.n_links, 2);
    CU_ASSERT_TRUE(path_avoids(n, &path, 0, 1));
    CU_ASSERT_EQUAL(net_route(n, 1, 0, &path, &e), NP_OK);
    CU_ASSERT_EQUAL(path.n_links, 1);
    /* the network keeps its own copy of the faults (a scratch copy of it is built from them) */
    CU_ASSERT_EQUAL(net_get_params(n)->n_faults, 1);
    CU_ASSERT_STRING_EQUAL(net_get_params(n)->faults[0].name, "chip0->chip1");
    /* a transfer of S bytes over the detour: 3 link latencies + S / bandwidth */
    uint64_t got[1] = {0};
    double bw = net_get_params(n)->link_bytes_per_s;
    CU_ASSERT_EQUAL(net_transfer(n, 0, 1, 1 << 20, flow_done, got, 0, &e), NP_OK);
    uint64_t want = 3 * lat + (uint64_t)ceil((double)(1 << 20) / bw * 1e12);
    CU_ASSERT_EQUAL(evq_run_until(q, want - 2, &e), NP_OK);
    CU_ASSERT_EQUAL(got[0], 0);
    CU_ASSERT_EQUAL(evq_run_until(q, want + 2, &e), NP_OK);
    CU_ASSERT_EQUAL(got[0], 1);
    net_free(n);
    /* a ring of 8 goes the other way round: 7 links */
    n = fault_net(q, ARCH_TOPOLOGY_RING, 8, 8, 2, &f01, 1, NP_OK);
    CU_ASSERT_EQUAL(net_route(n, 0, 1, &path, &e), NP_OK);
    CU_ASSERT_EQUAL(path.n_links, 7);
    net_free(n);
    /* ... unless chip 0's other link failed too: no path, both links named */
    net_link_fault both[] = {{.name = "chip0->chip1"}, {.name = "chip0->chip7"}};
    n = fault_net(q, ARCH_TOPOLOGY_RING, 8, 8, 2, both, 2, NP_OK);
    CU_ASSERT_EQUAL(net_route(n, 0, 1, &path, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "chip0->chip1, chip0->chip7"));
    CU_ASSERT_EQUAL(net_route(n, 1, 0, &path, &e), NP_OK); /* into chip 0 still works */
    net_free(n);
    /* a switch: a chip's one link to it failed leaves no path (chips do not relay) */
    net_link_fault sw = {.name = "chip0->sw0"};
    n = fault_net(q, ARCH_TOPOLOGY_SWITCH, 4, 4, 1, &sw, 1, NP_OK);
    CU_ASSERT_EQUAL(net_route(n, 0, 3, &path, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "chip0->sw0"));
    net_free(n);
    evq_free(q);
}

TEST(a_slowed_link_keeps_its_share_of_bandwidth_and_unknown_links_are_refused)
{
    np_err e = {0};
    evq *q;
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    net_link_fault slow = {.name = "chip0->chip1", .factor = 0.25};
    net *n = fault_net(q, ARCH_TOPOLOGY_RING, 4, 4, 2, &slow, 1, NP_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(n);
    net_path_info path;
    double bw = net_get_params(n)->link_bytes_per_s;
    CU_ASSERT_EQUAL(net_route(n, 0, 1, &path, &e), NP_OK);
    CU_ASSERT_EQUAL(path.n_links, 1); /* still the short way, at a quarter of the bandwidth */
    CU_ASSERT_DOUBLE_EQUAL(path.bytes_per_s, 0.25 * bw, 1e-6 * bw);
    uint64_t got[1] = {0};
    CU_ASSERT_EQUAL(net_transfer(n, 0, 1, 1 << 20, flow_done, got, 0, &e), NP_OK);
    uint64_t want = net_get_params(n)->link_latency_ps +
                    (uint64_t)ceil((double)(1 << 20) / (0.25 * bw) * 1e12);
    CU_ASSERT_EQUAL(evq_run_until(q, want - 2, &e), NP_OK);
    CU_ASSERT_EQUAL(got[0], 0);
    CU_ASSERT_EQUAL(evq_run_until(q, want + 2, &e), NP_OK);
    CU_ASSERT_EQUAL(got[0], 1);
    net_free(n);
    net_link_fault unknown = {.name = "chip0->chip2", .factor = 0};
    CU_ASSERT_PTR_NULL(fault_net(q, ARCH_TOPOLOGY_RING, 4, 4, 2, &unknown, 1,
                                 NP_ERR_UNKNOWN_KEY));
    net_link_fault more = {.name = "chip0->chip1", .factor = 1.5};
    CU_ASSERT_PTR_NULL(fault_net(q, ARCH_TOPOLOGY_RING, 4, 4, 2, &more, 1, NP_ERR_RANGE));
    evq_free(q);
}

TEST(collectives_refuse_groups_and_algorithms_that_do_not_fit)
{
    sysfix f;
    fix_open(&f, ARCH_TOPOLOGY_SWITCH, 8, NULL, 0);
    np_err e = {0};
    coll *c = NULL;
    uint32_t six[] = {0, 1, 2, 3, 4, 5}, dup[] = {0, 1, 1}, far[] = {0, 9};
    coll_desc d = {.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_RHD, .chips = six, .n_chips = 6,
                   .bytes = 1024};
    CU_ASSERT_EQUAL(coll_start(f.s, &d, &c, &e), NP_ERR_INCONSISTENT);
    d.algo = COLL_ALGO_PAIRWISE;
    CU_ASSERT_EQUAL(coll_start(f.s, &d, &c, &e), NP_ERR_INCONSISTENT);
    d.algo = COLL_ALGO_RING;
    d.chips = dup;
    d.n_chips = 3;
    CU_ASSERT_EQUAL(coll_start(f.s, &d, &c, &e), NP_ERR_RANGE);
    d.chips = far;
    d.n_chips = 2;
    CU_ASSERT_EQUAL(coll_start(f.s, &d, &c, &e), NP_ERR_RANGE);
    d = (coll_desc){.op = COLL_OP_BROADCAST, .root = 8, .bytes = 64};
    CU_ASSERT_EQUAL(coll_start(f.s, &d, &c, &e), NP_ERR_RANGE);
    coll_op op;
    coll_algo al;
    CU_ASSERT_EQUAL(coll_op_parse("allreduce", &op, &e), NP_OK);
    CU_ASSERT_EQUAL(op, COLL_OP_ALL_REDUCE);
    CU_ASSERT_EQUAL(coll_op_parse("all-to-all", &op, &e), NP_OK);
    CU_ASSERT_EQUAL(op, COLL_OP_ALL_TO_ALL);
    CU_ASSERT_EQUAL(coll_algo_parse("spiral", &al, &e), NP_ERR_UNKNOWN_KEY);
    fix_close(&f);
}

TEST(every_op_and_algorithm_completes_on_odd_groups_with_odd_sizes_and_chunks)
{
    sysfix f;
    fix_open(&f, ARCH_TOPOLOGY_RING, 12, NULL, 0);
    uint32_t grp[] = {11, 3, 5, 7, 0, 9, 2};
    uint32_t pow2[] = {11, 3, 5, 7};
    for (int op = 0; op < COLL_OP_COUNT; op++)
        for (int al = 1; al < COLL_ALGO_COUNT; al++) {
            if (!coll_algo_supported((coll_op)op, (coll_algo)al) || al == COLL_ALGO_NVLS)
                continue; /* nvls needs a switch that reduces: test_coll_net.c */
            bool p2 = al == COLL_ALGO_RHD;
            coll_desc d = {.op = (coll_op)op, .algo = (coll_algo)al, .chips = p2 ? pow2 : grp,
                           .n_chips = p2 ? 4 : 7, .bytes = 100003, .root = 2,
                           .chunk_bytes = 4099};
            coll_result r;
            np_err e = {0};
            CU_ASSERT_EQUAL(coll_run(f.s, &d, &r, &e), NP_OK);
            CU_ASSERT_TRUE(r.t_end_ps > r.t_start_ps);
            CU_ASSERT_EQUAL(r.algo, (coll_algo)al);
            d.bytes = 0; /* zero bytes still completes (latency only) */
            CU_ASSERT_EQUAL(coll_run(f.s, &d, &r, &e), NP_OK);
        }
    CU_ASSERT_EQUAL(net_flows_active(coll_sys_net(f.s)), 0);
    fix_close(&f);
}

TEST(collective_command_prints_an_nccl_tests_table_and_json)
{
    harness_run r = harness_npusim("collective", "--op", "all_reduce", "--algo", "ring",
                                   "--chips", "8", "--min-bytes", "1K", "--max-bytes", "1M",
                                   "--factor", "4", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_t *j = json_loads(r.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "op")), "all_reduce");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "algo")), "ring");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "topology")), "ring");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "chips")), 8);
    json_t *rows = json_object_get(j, "rows");
    CU_ASSERT_EQUAL(json_array_size(rows), 6); /* 1K 4K 16K 64K 256K 1M */
    json_t *last = json_array_get(rows, 5);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(last, "bytes")), 1 << 20);
    double alg = json_real_value(json_object_get(last, "algbw_gbps"));
    double bus = json_real_value(json_object_get(last, "busbw_gbps"));
    double t = json_real_value(json_object_get(last, "time_us"));
    CU_ASSERT_DOUBLE_EQUAL(alg, (1 << 20) / (t * 1e3), 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(bus, alg * 2 * 7 / 8.0, 1e-6);
    /* every ring link carries 2(p-1)/p of the buffer during the run */
    double util = json_real_value(json_object_get(last, "busiest_link_util"));
    CU_ASSERT_DOUBLE_EQUAL(util, 2 * 7 / 8.0 * (1 << 20) / (8e9 * t * 1e-6), 1e-6);
    json_decref(j);
    harness_run_free(&r);

    r = harness_npusim("collective", "--op", "all_gather", "--algo", "rhd", "--topology",
                       "torus2d:4x4", "--group", "0-15:2", "--max-bytes", "64K", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "busbw"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "8 of 16 chips, torus2d 4x4x1"));
    harness_run_free(&r);

    r = harness_npusim("collective", "--op", "broadcast", "--algo", "ring", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    harness_run_free(&r);
    r = harness_npusim("collective", "--op", "all_reduce", "--max-bytes", "lots", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    harness_run_free(&r);
}

TEST(ring_and_2d_all_reduce_on_an_idle_torus_match_alpha_beta)
{
    /* 4x4 torus2d, 4 links per chip: one link to each of the 4 neighbours. A snake order
     * makes every ring step one hop (12 -> 0 uses the y wrap-around). */
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &cfg, &e), NP_OK);
    net_params np;
    net_params_from_arch(&cfg, &np);
    np.topology = ARCH_TOPOLOGY_TORUS2D;
    np.chips = 16;
    np.dims[0] = np.dims[1] = 4;
    np.dims[2] = 1;
    np.links_per_chip = 4;
    evq *q;
    coll_sys *s;
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(coll_sys_create(&cfg, &np, q, NULL, &s, &e), NP_OK);
    double a = (double)np.link_latency_ps, b = 1e12 / np.link_bytes_per_s;
    double g = 1e12 / ((double)cfg.core.vector_lanes * cfg.core.vector_ops_per_lane *
                       cfg.core.clock_ghz * 1e9 * cfg.chip.cores * 4);
    double n = 1 << 20, p = 16;
    uint32_t snake[] = {0, 1, 2, 3, 7, 6, 5, 4, 8, 9, 10, 11, 15, 14, 13, 12};
    coll_desc d = {.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_RING, .chips = snake,
                   .n_chips = 16, .bytes = (uint64_t)n};
    coll_result r;
    CU_ASSERT_EQUAL_FATAL(coll_run(s, &d, &r, &e), NP_OK);
    double ring = 2 * (p - 1) * (a + n / p * b) + (p - 1) * n / p * g;
    CU_ASSERT_TRUE(within((double)(r.t_end_ps - r.t_start_ps), ring, 0.01));
    /* 2D: rings of 4 along x (groups 0-3, 4-7, ...), then rings of 4 along y */
    d = (coll_desc){.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_HIER, .bytes = (uint64_t)n};
    CU_ASSERT_EQUAL_FATAL(coll_run(s, &d, &r, &e), NP_OK);
    double qq = 4;
    double twod = (qq - 1) * (a + n / qq * b + n / qq * g) +
                  2 * (p / qq - 1) * (a + n / p * b) + (p / qq - 1) * n / p * g +
                  (qq - 1) * (a + n / qq * b);
    CU_ASSERT_TRUE(within((double)(r.t_end_ps - r.t_start_ps), twod, 0.01));
    CU_ASSERT_TRUE(twod < ring);
    coll_sys_free(s);
    evq_free(q);
}

TEST(collective_command_builds_the_topology_kind_at_the_requested_chip_count)
{
    harness_run r = harness_npusim("collective", "--op", "all_reduce", "--topology", "torus3d",
                                   "--chips", "64", "--max-bytes", "8", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_t *j = json_loads(r.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    json_t *dims = json_object_get(j, "dims");
    for (size_t i = 0; i < 3; i++) /* the most cubic torus holding 64 chips */
        CU_ASSERT_EQUAL(json_integer_value(json_array_get(dims, i)), 4);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "ranks")), 64);
    json_decref(j);
    harness_run_free(&r);

    r = harness_npusim("collective", "--op", "broadcast", "--algo", "chain", "--topology",
                       "switch", "--chips", "12", "--root", "3", "--chunk", "4K",
                       "--max-bytes", "1M", "--min-bytes", "1M", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    j = json_loads(r.out, 0, NULL);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "topology")), "switch");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "chunk_bytes")), 4096);
    json_t *row = json_array_get(json_object_get(j, "rows"), 0);
    /* broadcast busbw == algbw (factor 1) */
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(row, "busbw_gbps")),
                           json_real_value(json_object_get(row, "algbw_gbps")), 1e-9);
    json_decref(j);
    harness_run_free(&r);

    r = harness_npusim("collective", "--op", "all_reduce", "--algo", "rhd", "--chips", "6",
                       NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "power-of-two"));
    CU_ASSERT_STRING_EQUAL(r.out, ""); /* no table header before the error */
    harness_run_free(&r);
}

/* An independent max-min fair allocation: progressive filling over all flows at once (every
 * unfrozen flow's rate grows together until some link is full; the flows on it freeze). */
#define MM_FLOWS 48
#define MM_LINKS 4096
static void maxmin_reference(net *n, const uint32_t (*pairs)[2], const bool *active, int nf,
                             double *rate)
{
    static uint32_t paths[MM_FLOWS][64];
    static uint32_t plen[MM_FLOWS];
    static double used[MM_LINKS];
    np_err e = {0};
    bool frozen[MM_FLOWS] = {0};
    for (int i = 0; i < nf; i++) {
        net_path_info pi;
        net_route(n, pairs[i][0], pairs[i][1], &pi, &e);
        plen[i] = pi.n_links;
        memcpy(paths[i], pi.links, pi.n_links * sizeof *pi.links);
        rate[i] = 0;
        frozen[i] = !active[i] || pi.n_links == 0;
    }
    for (;;) {
        /* the largest common increment before some link fills */
        memset(used, 0, sizeof used);
        static int cnt[MM_LINKS];
        memset(cnt, 0, sizeof cnt);
        for (int i = 0; i < nf; i++)
            for (uint32_t k = 0; active[i] && k < plen[i]; k++) {
                used[paths[i][k]] += rate[i];
                cnt[paths[i][k]] += !frozen[i];
            }
        double inc = INFINITY;
        for (uint32_t l = 0; l < net_links(n); l++) {
            if (!cnt[l])
                continue;
            net_link_info li;
            net_link_get(n, l, &li);
            double d = (li.bytes_per_s - used[l]) / cnt[l];
            if (d < inc)
                inc = d;
        }
        if (inc == INFINITY)
            return;
        for (int i = 0; i < nf; i++)
            if (!frozen[i])
                rate[i] += inc;
        for (int i = 0; i < nf; i++) /* freeze flows crossing a now-full link */
            for (uint32_t k = 0; !frozen[i] && k < plen[i]; k++) {
                net_link_info li;
                net_link_get(n, paths[i][k], &li);
                double u = 0;
                for (int j = 0; j < nf; j++)
                    for (uint32_t m = 0; active[j] && m < plen[j]; m++)
                        u += paths[j][m] == paths[i][k] ? rate[j] : 0;
                if (u >= li.bytes_per_s * (1 - 1e-9))
                    frozen[i] = true;
            }
    }
}

static void mm_event(void *ctx, uint64_t arg, net_event ev)
{
    bool *active = ctx;
    if (ev == NET_EVENT_SENT)
        active[arg] = false;
}

TEST(incremental_max_min_rates_equal_a_global_progressive_filling_at_every_event)
{
    /* random transfers of random sizes on a 4x4 torus with a fat and a thin dimension, started
     * at random times; after every event the engine's rates (re-rated per component) must
     * equal max-min fairness computed from scratch over all active flows */
    sysfix f;
    fix_open(&f, ARCH_TOPOLOGY_RING, 4, NULL, 0); /* for cfg only */
    fix_close(&f);
    net_params np = f.np;
    np.topology = ARCH_TOPOLOGY_TORUS2D;
    np.chips = 16;
    np.dims[0] = np.dims[1] = 4;
    np.links_per_chip = 4;
    evq *q;
    net *n;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(net_create(&np, q, NULL, &n, &e), NP_OK);
    uint32_t pairs[MM_FLOWS][2];
    bool active[MM_FLOWS] = {0};
    double want[MM_FLOWS];
    uint64_t x = 99;
    int started = 0, checks = 0, bad = 0;
    while (started < MM_FLOWS || net_flows_active(n)) {
        if (started < MM_FLOWS) {
            for (int k = 0; k < 3 && started < MM_FLOWS; k++) {
                x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                pairs[started][0] = (uint32_t)(x >> 33) % 16;
                pairs[started][1] = (uint32_t)(x >> 45) % 16;
                active[started] = pairs[started][0] != pairs[started][1];
                uint64_t bytes = 1000 + (x >> 20) % 200000;
                CU_ASSERT_EQUAL_FATAL(net_transfer(n, pairs[started][0], pairs[started][1],
                                                   bytes, mm_event, active, (uint64_t)started,
                                                   &e), NP_OK);
                started++;
            }
        }
        bool any;
        CU_ASSERT_EQUAL_FATAL(evq_step(q, &any, &e), NP_OK);
        net_flow_info fl[MM_FLOWS];
        uint32_t k = net_flows_list(n, fl, MM_FLOWS);
        maxmin_reference(n, (const uint32_t(*)[2])pairs, active, started, want);
        for (uint32_t i = 0; i < k; i++) {
            int id = (int)fl[i].arg;
            checks++;
            if (fabs(fl[i].bytes_per_s - want[id]) > 1e-6 * want[id])
                bad++;
        }
        if (!any && !net_flows_active(n))
            break;
    }
    CU_ASSERT_TRUE(checks > 200);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(net_verify(n, &e), NP_OK);
    CU_ASSERT_EQUAL(evq_run(q, &e), NP_OK);
    net_free(n);
    evq_free(q);
}

typedef struct ev_log {
    uint64_t t[8][2]; /* per transfer arg: SENT, DELIVERED time (0: not yet) */
    evq *q;
} ev_log;

static void log_event(void *ctx, uint64_t arg, net_event ev)
{
    ev_log *l = ctx;
    l->t[arg][ev == NET_EVENT_DELIVERED] = evq_now(l->q);
}

TEST(a_flow_alone_keeps_its_link_until_another_joins_and_then_they_share_it)
{
    /* Ring of 4, 8 GB/s per direction, 200 ns. A: 8000 B on 0->1 at t = 0, alone: it would
     * send its last byte at 1000 ns. B joins the link at 500 ns: A has 4000 B left, both
     * get 4 GB/s; A sends its last byte at 1500 ns (delivered 1700), B has sent 4000 B by
     * then and sends the rest alone at 8 GB/s: last byte at 2000 ns, delivered 2200 ns. */
    sysfix f;
    fix_open(&f, ARCH_TOPOLOGY_RING, 4, NULL, 0);
    net *n = coll_sys_net(f.s);
    ev_log l = {.q = f.q};
    np_err e = {0};
    CU_ASSERT_EQUAL(net_transfer(n, 0, 1, 8000, log_event, &l, 0, &e), NP_OK);
    CU_ASSERT_EQUAL(net_flows_active(n), 1);
    CU_ASSERT_EQUAL(evq_run_until(f.q, 500000, &e), NP_OK);
    CU_ASSERT_EQUAL(net_rerates(n), 0); /* alone: never re-rated */
    CU_ASSERT_EQUAL(net_transfer(n, 0, 1, 8000, log_event, &l, 1, &e), NP_OK);
    net_flow_info fl[2];
    CU_ASSERT_EQUAL(net_flows_list(n, fl, 2), 2);
    CU_ASSERT_DOUBLE_EQUAL(fl[0].bytes_per_s, 4e9, 1);
    CU_ASSERT_DOUBLE_EQUAL(fl[1].bytes_per_s, 4e9, 1);
    CU_ASSERT_EQUAL(net_verify(n, &e), NP_OK);
    CU_ASSERT_EQUAL(evq_run(f.q, &e), NP_OK);
    CU_ASSERT_EQUAL(l.t[0][0], 1500000);
    CU_ASSERT_EQUAL(l.t[0][1], 1700000);
    CU_ASSERT_EQUAL(l.t[1][0], 2000000);
    CU_ASSERT_EQUAL(l.t[1][1], 2200000);
    net_link_info li;
    net_path_info path;
    CU_ASSERT_EQUAL(net_route(n, 0, 1, &path, &e), NP_OK);
    CU_ASSERT_TRUE(path.stable); /* cached */
    net_link_get(n, path.links[0], &li);
    CU_ASSERT_EQUAL(li.bytes, 16000);
    CU_ASSERT_EQUAL(li.flows, 0);
    fix_close(&f);
}

TEST(a_quiet_transfer_reports_its_sent_time_only_when_armed)
{
    /* 8000 B over one 8 GB/s hop: last byte at 1000 ns, delivery at 1200 ns. */
    sysfix f;
    fix_open(&f, ARCH_TOPOLOGY_RING, 4, NULL, 0);
    net *n = coll_sys_net(f.s);
    ev_log l = {.q = f.q};
    np_err e = {0};
    net_flow_ref a, b;
    CU_ASSERT_EQUAL(net_transfer_ex(n, 0, 1, 8000, NET_XFER_QUIET_SENT, NULL, log_event, &l, 0,
                                    &a, &e), NP_OK);
    CU_ASSERT_EQUAL(net_transfer_ex(n, 1, 2, 8000, NET_XFER_QUIET_SENT, NULL, log_event, &l, 1,
                                    &b, &e), NP_OK);
    CU_ASSERT_FALSE(net_flow_sent(n, a, false));
    CU_ASSERT_FALSE(net_flow_sent(n, b, true)); /* armed */
    CU_ASSERT_EQUAL(evq_run(f.q, &e), NP_OK);
    CU_ASSERT_EQUAL(l.t[0][0], 0); /* never told */
    CU_ASSERT_EQUAL(l.t[0][1], 1200000);
    CU_ASSERT_EQUAL(l.t[1][0], 1000000);
    CU_ASSERT_EQUAL(l.t[1][1], 1200000);
    CU_ASSERT_TRUE(net_flow_sent(n, a, false));
    fix_close(&f);
}

static void order_cb(void *ctx, uint64_t arg)
{
    uint64_t *v = ctx;
    v[v[0]++ + 1] = arg;
}

static void order_ev(evq *q, void *ctx, uint64_t arg)
{
    (void)q;
    order_cb(ctx, arg);
}

static void order_late(void *ctx, uint64_t arg)
{
    uint64_t *v = ((uint64_t **)ctx)[0];
    net *n = ((net **)ctx)[1];
    order_cb(v, arg);
    np_err e;
    net_timer_at(n, 1000, order_cb, v, 9, &e); /* the same instant, from inside its batch */
}

TEST(batched_timers_run_in_insertion_order_after_what_the_queue_held_for_their_instant)
{
    sysfix f;
    fix_open(&f, ARCH_TOPOLOGY_RING, 2, NULL, 0);
    net *n = coll_sys_net(f.s);
    uint64_t v[16] = {0};
    void *late[2] = {v, n};
    np_err e = {0};
    CU_ASSERT_EQUAL(net_timer_at(n, 1000, order_cb, v, 1, &e), NP_OK);
    CU_ASSERT_EQUAL(evq_schedule_at(f.q, 1000, order_ev, v, 2, NULL, &e), NP_OK);
    CU_ASSERT_EQUAL(net_timer_at(n, 1000, order_late, late, 3, &e), NP_OK);
    CU_ASSERT_EQUAL(net_timer_at(n, 500, order_cb, v, 4, &e), NP_OK);
    uint64_t before = evq_dispatched(f.q);
    CU_ASSERT_EQUAL(evq_run(f.q, &e), NP_OK);
    /* 4 at 500; at 1000 the batch (1, 3), the event 2, then 9, added during the batch */
    CU_ASSERT_EQUAL(v[0], 5);
    uint64_t want[] = {4, 1, 3, 2, 9};
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL(v[i + 1], want[i]);
    CU_ASSERT_EQUAL(evq_dispatched(f.q) - before, 4); /* batches at 500, 1000, 1000; event 2 */
    CU_ASSERT_EQUAL(net_timer_at(n, 10, order_cb, v, 5, &e), NP_ERR_INTERNAL); /* the past */
    fix_close(&f);
}

TEST(a_ring_on_its_own_links_costs_no_re_rating_and_an_event_per_step)
{
    /* 64 chips, ring all-reduce: every message alone on its link, all ranks in lockstep:
     * no water filling at all, and a handful of events per step instead of several per
     * message. A direct all-to-all on a switch shares every link, but its flows end
     * together: re-rated a few times, not once per flow. */
    sysfix f;
    fix_open(&f, ARCH_TOPOLOGY_RING, 64, NULL, 0);
    uint64_t ev0 = evq_dispatched(f.q);
    double t = run_ps(&f, COLL_OP_ALL_REDUCE, COLL_ALGO_RING, 64 << 16, 0);
    CU_ASSERT_TRUE(t > 0);
    uint64_t msgs = 2 * 63 * 64, events = evq_dispatched(f.q) - ev0;
    CU_ASSERT_EQUAL(net_transfers_started(coll_sys_net(f.s)), msgs);
    CU_ASSERT_EQUAL(net_rerates(coll_sys_net(f.s)), 0);
    CU_ASSERT_TRUE(events <= 4 * 2 * 63);
    fix_close(&f);
    fix_open(&f, ARCH_TOPOLOGY_SWITCH, 32, NULL, 0);
    t = run_ps(&f, COLL_OP_ALL_TO_ALL, COLL_ALGO_DIRECT, 32 << 16, 0);
    /* one link per chip each way, 31 flows on each: every share is B / 31, (p-1)/p n beta */
    double want = f.alpha_ps + 31.0 / 32 * (32 << 16) * f.beta_ps_per_byte;
    CU_ASSERT_TRUE(within(t, want, 0.01));
    CU_ASSERT_TRUE(net_rerates(coll_sys_net(f.s)) <= 4);
    fix_close(&f);
}

/* The data rows of an nccl-tests table: each line not starting with '#', split on spaces. */
static int table_rows(const char *out, char fields[][13][24], int max)
{
    int n = 0;
    for (const char *l = out; *l && n < max;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        if (len && l[0] != '#') {
            char line[256];
            snprintf(line, sizeof line, "%.*s", (int)len, l);
            int k = 0;
            for (char *w = strtok(line, " "); w && k < 13; w = strtok(NULL, " "))
                snprintf(fields[n][k++], 24, "%s", w);
            n += k == 13;
        }
        l = e ? e + 1 : l + len;
    }
    return n;
}

TEST(collective_command_prints_nccl_tests_columns_footer_and_aliases)
{
    /* all_reduce on 8 chips of tiny, 1 KiB .. 1 MiB by 4, short options as nccl-tests */
    harness_run r = harness_npusim("collective", "--op", "all_reduce", "--algo", "ring",
                                   "--chips", "8", "-b", "1K", "-e", "1M", "-f", "4", "-n", "3",
                                   NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    CU_ASSERT_STRING_EQUAL(r.err, "");
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "out-of-place"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "in-place"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "#       size         count      type   redop    root "
                                         "    time   algbw   busbw #wrong     time   algbw   "
                                         "busbw #wrong"));
    static char f[16][13][24];
    int n = table_rows(r.out, f, 16);
    CU_ASSERT_EQUAL_FATAL(n, 6); /* 1K 4K 16K 64K 256K 1M */
    double sum = 0;
    for (int i = 0; i < n; i++) {
        uint64_t size = 1024ULL << (2 * i);
        CU_ASSERT_EQUAL(strtoull(f[i][0], NULL, 10), size);
        CU_ASSERT_EQUAL(strtoull(f[i][1], NULL, 10), size / 4);
        CU_ASSERT_STRING_EQUAL(f[i][2], "float");
        CU_ASSERT_STRING_EQUAL(f[i][3], "sum");
        CU_ASSERT_STRING_EQUAL(f[i][4], "-1");
        CU_ASSERT_STRING_EQUAL(f[i][8], "N/A");
        CU_ASSERT_STRING_EQUAL(f[i][12], "N/A");
        for (int k = 5; k < 8; k++) /* the model moves no data: in place == out of place */
            CU_ASSERT_STRING_EQUAL(f[i][k], f[i][k + 4]);
        double t = atof(f[i][5]), alg = atof(f[i][6]), bus = atof(f[i][7]);
        CU_ASSERT_DOUBLE_EQUAL(alg, size / (t * 1e3), 0.006 + 0.01 * alg); /* 2 decimals */
        CU_ASSERT_DOUBLE_EQUAL(bus, alg * 2 * 7 / 8.0, 0.015); /* both rounded */
        sum += bus;
    }
    /* the footer: the mean bus bandwidth of the rows, of the exact values (JSON) */
    const char *avg = strstr(r.out, "# Avg bus bandwidth    : ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(avg);
    double footer = atof(avg + strlen("# Avg bus bandwidth    : "));
    CU_ASSERT_DOUBLE_EQUAL(footer, sum / n, 0.01);
    harness_run_free(&r);
    harness_run j = harness_npusim("collective", "--op", "all_reduce", "--algo", "ring",
                                   "--chips", "8", "--min-bytes", "1K", "--max-bytes", "1M",
                                   "--factor", "4", "--iters", "3", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(j.exit_status, 0);
    json_t *doc = json_loads(j.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    json_t *rows = json_object_get(doc, "rows");
    double jsum = 0;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        jsum += json_real_value(json_object_get(row, "busbw_gbps"));
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(row, "algo")), "ring");
        CU_ASSERT_TRUE(json_is_null(json_object_get(row, "wrong")));
        /* exact picoseconds, and the rounded text is that */
        double us = json_real_value(json_object_get(row, "time_us"));
        CU_ASSERT_DOUBLE_EQUAL(us * 1e6, (double)json_integer_value(json_object_get(row, "time_ps")), 1);
    }
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(doc, "avg_busbw_gbps")), jsum / 6, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(footer, jsum / 6, 1e-4 * footer + 1e-5);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(doc, "iters")), 3);
    json_decref(doc);
    harness_run_free(&j);

    /* a rooted op without reduction: redop none, the root's rank; auto says what it chose */
    r = harness_npusim("collective", "--op", "broadcast", "--chips", "8", "--root", "3", "-b",
                       "64K", "-e", "64K", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    n = table_rows(r.out, f, 16);
    CU_ASSERT_EQUAL_FATAL(n, 1);
    CU_ASSERT_STRING_EQUAL(f[0][3], "none");
    CU_ASSERT_STRING_EQUAL(f[0][4], "3");
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "#  algo: "));
    harness_run_free(&r);
    r = harness_npusim("collective", "--op", "all_reduce", "-n", "0", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--iters"));
    harness_run_free(&r);
}
