/* test_coll_net.c — collectives across islands and in switches: NCCL's channels (rings side by
 * side whose hops between islands leave through different scale-out ports), the protocols'
 * per-step network latency and network overhead, and switches that reduce (NVLink SHARP,
 * algorithm nvls), against hand-computed times and link loads.
 *
 * References, independent of the code under test:
 *  - a ring on an idle network is paced by its slowest hop: p - 1 steps (2(p - 1) for an
 *    all-reduce) of its message over the slowest link plus that link's path latency; with C
 *    channels each ring moves 1/C of a segment a step, and the slow hops of the C rings are
 *    C different scale-out ports;
 *  - a protocol's message completes max(path latency, step) after its last byte leaves, the
 *    step being the protocol's network step when it crosses between islands (NCCL's
 *    hwLatencies NET) and at least the network overhead within an island when the group spans
 *    islands (NCCL's getNetOverhead); the critical chain of a ring all-gather of p ranks is
 *    p - 1 consecutive hops, which hand counting places over the ring's hops between islands;
 *  - a switch that reduces receives every rank's data once and sends the reduced result once
 *    per rank: each chip's link to the switch carries n + n/p each way for an all-reduce of n
 *    bytes (reduce-scatter through the switch, the result back, multicast), by hand.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "coll_tune.h"
#include "harness.h"

typedef struct nfix {
    arch_config cfg;
    evq *q;
    coll_sys *s;
} nfix;

/* a100-cluster (islands of 8 on NVSwitch, 25 GB/s scale-out per chip) with `chips` chips and
 * extra --set values. */
static void nfix_open(nfix *f, const char *arch, uint32_t chips, const char *const *sets,
                      size_t n_sets)
{
    np_err e = {0};
    memset(f, 0, sizeof *f);
    const char *all[32];
    char nc[64];
    snprintf(nc, sizeof nc, "system.chips=%u", chips);
    all[0] = nc;
    for (size_t i = 0; i < n_sets && i < 31; i++)
        all[i + 1] = sets[i];
    CU_ASSERT_EQUAL_FATAL(arch_resolve(arch, all, n_sets + 1, &f->cfg, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(evq_create(&f->q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(coll_sys_create(&f->cfg, NULL, f->q, NULL, &f->s, &e), NP_OK);
}

static void nfix_close(nfix *f)
{
    coll_sys_free(f->s);
    evq_free(f->q);
}

static coll_result nrun(nfix *f, coll_desc d)
{
    coll_result r = {0};
    np_err e = {0};
    CU_ASSERT_EQUAL(coll_run(f->s, &d, &r, &e), NP_OK);
    if (e.status)
        fprintf(stderr, "\n    %s\n", e.msg);
    CU_ASSERT_EQUAL(net_verify(coll_sys_net(f->s), &e), NP_OK);
    return r;
}

static double dur_ps(const coll_result *r) { return (double)(r->t_end_ps - r->t_start_ps); }

/* a100-cluster by hand: NVLink 12 x 25 GB/s per chip, path chip -> NVSwitch -> chip 500 + 300 +
 * 500 ns; scale-out 25 GB/s per chip, 2000 ns end to end. */
#define IN_BW 300e9
#define OUT_BW 25e9
#define IN_LAT_PS 1300e3
#define OUT_LAT_PS 2000e3

TEST(channels_spread_a_ring_over_every_scaleout_port_of_its_islands)
{
    /* 16 chips, two islands: one ring crosses between them through chips 7 and 15's ports
     * alone; eight channels through all sixteen */
    nfix f;
    nfix_open(&f, "a100-cluster", 16, NULL, 0);
    const uint64_t n = 1ULL << 30, s = n / 16;
    for (coll_op op = COLL_OP_ALL_REDUCE; op <= COLL_OP_REDUCE_SCATTER; op++) {
        double steps = op == COLL_OP_ALL_REDUCE ? 30 : 15;
        for (uint32_t C = 1; C <= 8; C *= 8) {
            coll_result r = nrun(&f, (coll_desc){.op = op, .algo = COLL_ALGO_RING, .bytes = n,
                                                 .channels = C});
            /* paced by the scale-out hop of each ring: s / C over 25 GB/s and its latency */
            double want = steps * ((double)s / C / OUT_BW * 1e12 + OUT_LAT_PS);
            CU_ASSERT_DOUBLE_EQUAL(dur_ps(&r), want, 0.02 * want);
            CU_ASSERT_EQUAL(r.transfers, (uint64_t)(16 * steps * C));
        }
    }
    /* within one island channels change nothing: the rings' hops are the same links */
    coll_result one = nrun(&f, (coll_desc){.op = COLL_OP_ALL_GATHER, .algo = COLL_ALGO_RING,
                                           .bytes = 8 << 20, .n_chips = 8, .channels = 1});
    coll_result eight = nrun(&f, (coll_desc){.op = COLL_OP_ALL_GATHER, .algo = COLL_ALGO_RING,
                                             .bytes = 8 << 20, .n_chips = 8, .channels = 8});
    CU_ASSERT_EQUAL(one.t_end_ps - one.t_start_ps, eight.t_end_ps - eight.t_start_ps);
    CU_ASSERT_EQUAL(one.transfers, eight.transfers);
    /* a group of two chips per island runs two channels, each leaving through its own port */
    uint32_t grp[] = {0, 1, 8, 9};
    coll_result two = nrun(&f, (coll_desc){.op = COLL_OP_ALL_GATHER, .algo = COLL_ALGO_RING,
                                           .chips = grp, .n_chips = 4, .bytes = 64 << 20,
                                           .channels = 8});
    double want2 = 3 * ((double)(16 << 20) / 2 / OUT_BW * 1e12 + OUT_LAT_PS);
    CU_ASSERT_DOUBLE_EQUAL(dur_ps(&two), want2, 0.02 * want2);
    CU_ASSERT_EQUAL(two.transfers, 4 * 3 * 2);
    nfix_close(&f);

    /* the system's coll_channels is the default of a collective's */
    const char *sets[] = {"system.coll_channels=8"};
    nfix_open(&f, "a100-cluster", 16, sets, 1);
    coll_result sys = nrun(&f, (coll_desc){.op = COLL_OP_ALL_GATHER, .algo = COLL_ALGO_RING,
                                           .bytes = n});
    double want = 15 * ((double)s / 8 / OUT_BW * 1e12 + OUT_LAT_PS);
    CU_ASSERT_DOUBLE_EQUAL(dur_ps(&sys), want, 0.02 * want);
    /* and the tuner models the channels the engine runs */
    coll_tuner *t = coll_sys_tuner(f.s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    for (uint64_t b = 1 << 20; b <= n; b *= 32) {
        coll_result r = nrun(&f, (coll_desc){.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_RING,
                                             .bytes = b});
        coll_tune_query q = {.op = COLL_OP_ALL_REDUCE, .ranks = 16, .bytes = b};
        double model;
        np_err e = {0};
        CU_ASSERT_EQUAL(coll_tune_cost(t, &q, COLL_ALGO_RING, &model, &e), NP_OK);
        CU_ASSERT_DOUBLE_EQUAL(model, dur_ps(&r), 0.10 * dur_ps(&r));
    }
    nfix_close(&f);
}

TEST(messages_between_islands_take_the_network_step_and_spanning_groups_the_overhead)
{
    const char *sets[] = {"system.coll_protocol=ll",     "system.coll_ll_base_ns=5000",
                          "system.coll_ll_step_ns=1500", "system.coll_ll_net_step_ns=2700",
                          "system.coll_net_overhead_ns=0"};
    /* an all-gather of 16 x 1000 B: LL lines of 8 data bytes in 16 wire bytes, 2000 B a
     * message; the critical chain is 15 consecutive hops of the ring 0 .. 15, two of them
     * (7 -> 8, 15 -> 0) between islands */
    double w = 2000, hop_in = w / IN_BW * 1e12, hop_out = w / OUT_BW * 1e12;
    for (int ovh = 0; ovh < 2; ovh++) {
        nfix f;
        if (ovh)
            sets[4] = "system.coll_net_overhead_ns=2000";
        nfix_open(&f, "a100-cluster", 16, sets, 5);
        coll_result r = nrun(&f, (coll_desc){.op = COLL_OP_ALL_GATHER, .algo = COLL_ALGO_RING,
                                             .bytes = 16000});
        double in = ovh ? 2000e3 : 1500e3; /* within an island: the step, or the overhead */
        double want = 5000e3 + 13 * (hop_in + in) + 2 * (hop_out + 2700e3);
        CU_ASSERT_DOUBLE_EQUAL(dur_ps(&r), want, 1e-6 * want + 40);
        /* one island: no network step, no overhead */
        coll_result r8 = nrun(&f, (coll_desc){.op = COLL_OP_ALL_GATHER,
                                              .algo = COLL_ALGO_RING, .bytes = 8000,
                                              .n_chips = 8});
        double want8 = 5000e3 + 7 * (hop_in + 1500e3);
        CU_ASSERT_DOUBLE_EQUAL(dur_ps(&r8), want8, 1e-6 * want8 + 40);
        /* the tuner's model is the simulation's time */
        coll_tuner *t = coll_sys_tuner(f.s);
        coll_tune_query q = {.op = COLL_OP_ALL_GATHER, .ranks = 16, .bytes = 16000};
        double model;
        np_err e = {0};
        CU_ASSERT_EQUAL(coll_tune_cost(t, &q, COLL_ALGO_RING, &model, &e), NP_OK);
        CU_ASSERT_DOUBLE_EQUAL(model, want, 0.05 * want);
        nfix_close(&f);
    }
    /* 0 (default): the step within islands, as before */
    const char *plain[] = {"system.coll_protocol=ll", "system.coll_ll_step_ns=1500"};
    nfix f;
    nfix_open(&f, "a100-cluster", 16, plain, 2);
    coll_result r = nrun(&f, (coll_desc){.op = COLL_OP_ALL_GATHER, .algo = COLL_ALGO_RING,
                                         .bytes = 16000});
    double want = 13 * (hop_in + 1500e3) + 2 * (hop_out + OUT_LAT_PS);
    CU_ASSERT_DOUBLE_EQUAL(dur_ps(&r), want, 1e-6 * want + 40);
    nfix_close(&f);
}

/* tiny's chips on one switch of 2 x 8 GB/s ports, links of 200 ns, the switch 300 ns (the
 * default), with a switch that reduces. */
static const char *const sw_sets[] = {"system.topology=switch", "system.switch_reduce=1",
                                      "system.switch_reduce_efficiency=0.8"};

TEST(a_switch_that_reduces_takes_every_ranks_data_once_and_sends_the_sum_once)
{
    nfix f;
    nfix_open(&f, "tiny", 8, sw_sets, 3);
    net *n = coll_sys_net(f.s);
    uint32_t sw = net_chip_switch(n, 0);
    CU_ASSERT_EQUAL(sw, 8); /* the first node after the chips */
    const uint64_t bytes = 64 << 20;
    coll_result r = nrun(&f, (coll_desc){.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_NVLS,
                                         .bytes = bytes});
    CU_ASSERT_EQUAL(r.algo, COLL_ALGO_NVLS);
    /* each chip's link to the switch and back: n + n/p payload, over 0.8 of it on the wire */
    double each = (bytes + bytes / 8) / 0.8;
    for (uint32_t c = 0; c < 8; c++) {
        net_link_info up, down;
        net_link_get(n, net_link_between(n, c, sw), &up);
        net_link_get(n, net_link_between(n, sw, c), &down);
        CU_ASSERT_DOUBLE_EQUAL((double)up.bytes, each, 1e-6 * each + 64 * 8);
        CU_ASSERT_DOUBLE_EQUAL((double)down.bytes, each, 1e-6 * each + 64 * 8);
    }
    CU_ASSERT_EQUAL(r.bytes_sent, 8 * 2 * (bytes + bytes / 8));
    CU_ASSERT_EQUAL(r.reductions, 8 * 8 * 64); /* p contributions of p segments, 64 slices */
    /* so the time is that load at the links' rate, the slices pipelined (a slice's four
     * hops of latency and two of its segments' transfers more, by hand) */
    double link = 2 * 8e9 * 0.8, seg = (double)bytes / 64 / 8;
    double want = each * 0.8 / link * 1e12 + 2 * (400e3 + 300e3) + 2 * seg / link * 1e12;
    CU_ASSERT_DOUBLE_EQUAL(dur_ps(&r), want, 0.03 * want);
    /* where a ring moves 2(p - 1)/p n over the same links */
    coll_result ring = nrun(&f, (coll_desc){.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_RING,
                                            .bytes = bytes});
    CU_ASSERT(dur_ps(&ring) > 1.2 * dur_ps(&r));
    /* the tuner's model is the simulation's time; with NCCL's algorithms it picks nvls for
     * large all-reduces, rings for small ones */
    coll_tuner *t = coll_sys_tuner(f.s);
    coll_tune_query q = {.op = COLL_OP_ALL_REDUCE, .ranks = 8, .bytes = bytes};
    double model;
    np_err e = {0};
    CU_ASSERT_EQUAL(coll_tune_cost(t, &q, COLL_ALGO_NVLS, &model, &e), NP_OK);
    CU_ASSERT_DOUBLE_EQUAL(model, dur_ps(&r), 0.05 * dur_ps(&r));
    nfix_close(&f);

    /* NCCL's latencies: LL and Simple steps on NVLink, NVLS's whole fixed cost 25 us
     * (src/graph/tuning.cc) */
    const char *nccl[] = {"system.topology=switch", "system.switch_reduce=1",
                          "system.coll_algos=nccl", "system.coll_protocol=auto",
                          "system.coll_simple_step_ns=3400", "system.coll_ll_step_ns=600",
                          "system.coll_nvls_base_ns=25000"};
    nfix_open(&f, "tiny", 8, nccl, 7);
    r = nrun(&f, (coll_desc){.op = COLL_OP_ALL_REDUCE, .bytes = bytes});
    CU_ASSERT_EQUAL(r.algo, COLL_ALGO_NVLS);
    CU_ASSERT_EQUAL(r.proto, COLL_PROTO_SIMPLE); /* NCCL runs NVLS with Simple alone */
    r = nrun(&f, (coll_desc){.op = COLL_OP_ALL_REDUCE, .bytes = 64});
    CU_ASSERT_EQUAL(r.algo, COLL_ALGO_RING);
    /* the fixed cost comes before the first message */
    r = nrun(&f, (coll_desc){.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_NVLS,
                             .proto = COLL_PROTO_SIMPLE, .bytes = 64});
    CU_ASSERT_DOUBLE_EQUAL(dur_ps(&r), 25000e3 + 2 * (500e3 + 3400e3), 0.01 * 33e6);
    nfix_close(&f);
}

TEST(nvls_needs_a_switch_that_reduces_under_the_whole_group)
{
    coll *c;
    np_err e = {0};
    nfix f;
    nfix_open(&f, "tiny", 8, sw_sets, 1); /* a switch that only forwards */
    coll_desc d = {.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_NVLS, .bytes = 1 << 20};
    CU_ASSERT_EQUAL(coll_start(f.s, &d, &c, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "switch_reduce"));
    /* and the tuner does not offer it */
    coll_tuner *t = coll_sys_tuner(f.s);
    coll_tune_query q = {.op = COLL_OP_ALL_REDUCE, .ranks = 8, .bytes = 1 << 20};
    double model;
    CU_ASSERT_EQUAL(coll_tune_cost(t, &q, COLL_ALGO_NVLS, &model, &e), NP_ERR_INCONSISTENT);
    nfix_close(&f);
    /* two islands: no one switch under the group; one island's chips: its switch */
    const char *isl[] = {"system.switch_reduce=1"};
    nfix_open(&f, "a100-cluster", 16, isl, 1);
    CU_ASSERT_EQUAL(coll_start(f.s, &d, &c, &e), NP_ERR_INCONSISTENT);
    uint32_t second[] = {8, 9, 10, 11, 12, 13, 14, 15}, odd[] = {14, 9, 12, 8, 11, 15, 10};
    d.chips = second;
    d.n_chips = 8;
    coll_result r = nrun(&f, d);
    CU_ASSERT_EQUAL(r.algo, COLL_ALGO_NVLS);
    /* an odd group in any order, odd sizes and chunks, and nothing at all */
    d = (coll_desc){.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_NVLS, .chips = odd,
                    .n_chips = 7, .bytes = 100003, .chunk_bytes = 4099};
    r = nrun(&f, d);
    CU_ASSERT(r.t_end_ps > r.t_start_ps);
    /* every chip's n up, the sums down and up again (n each), n to each of the 7 chips */
    CU_ASSERT_EQUAL(r.bytes_sent, 2 * (7 + 1) * 100003);
    d.bytes = 0;
    r = nrun(&f, d);
    CU_ASSERT_EQUAL(net_flows_active(coll_sys_net(f.s)), 0);
    nfix_close(&f);
}
