/* test_coll_pkt.c — the packet engine of the chip network (NET_ENGINE_PACKET, noc/net_pkt.c)
 * against hand-computed store-and-forward times, and against the flow engine: within 2% on
 * large collectives, uncontended and contended, on rings and tori; and where the two differ,
 * by how much and why (small messages, input buffers shared by flows bound for different
 * links, incast). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "harness.h"

typedef struct pkt_fix {
    arch_config cfg;
    net_params np;
    evq *q;
    coll_sys *s;
} pkt_fix;

static evq *stamp_q; /* the queue whose time stamp() records */

static void pkt_open(pkt_fix *f, net_engine eng, arch_topology t, uint32_t x, uint32_t y,
                     uint32_t z, uint32_t buf)
{
    np_err e = {0};
    memset(f, 0, sizeof *f);
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &f->cfg, &e), NP_OK);
    net_params_from_arch(&f->cfg, &f->np);
    f->np.topology = t;
    f->np.chips = x * y * z;
    f->np.dims[0] = x;
    f->np.dims[1] = y;
    f->np.dims[2] = z;
    if (t <= ARCH_TOPOLOGY_TORUS3D)
        f->np.links_per_chip = 2 * ((x > 1) + (y > 1) + (z > 1));
    if (t == ARCH_TOPOLOGY_SWITCH)
        f->np.switch_radix = f->np.chips;
    f->np.engine = eng;
    f->np.buf_packets = buf;
    CU_ASSERT_EQUAL_FATAL(evq_create(&f->q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(coll_sys_create(&f->cfg, &f->np, f->q, NULL, &f->s, &e), NP_OK);
}

static void pkt_close(pkt_fix *f)
{
    np_err e = {0};
    CU_ASSERT_EQUAL(net_verify(coll_sys_net(f->s), &e), NP_OK);
    CU_ASSERT_EQUAL(net_flows_active(coll_sys_net(f->s)), 0);
    coll_sys_free(f->s);
    evq_free(f->q);
}

/* Records the delivery time of transfer arg in ctx[arg] (its SENT time in ctx[arg + 32]). */
static void stamp(void *ctx, uint64_t arg, net_event ev)
{
    uint64_t *t = ctx;
    t[arg + (ev == NET_EVENT_DELIVERED ? 0 : 32)] = evq_now(stamp_q);
}

/* Time (ps) of one transfer src -> dst alone, to its delivery (credits still travel back
 * after it). */
static uint64_t lone_ps(pkt_fix *f, uint32_t src, uint32_t dst, uint64_t bytes)
{
    uint64_t got[64] = {0}, t0 = evq_now(f->q);
    np_err e = {0};
    stamp_q = f->q;
    CU_ASSERT_EQUAL_FATAL(net_transfer(coll_sys_net(f->s), src, dst, bytes, stamp, got, 0, &e),
                          NP_OK);
    CU_ASSERT_EQUAL(evq_run(f->q, &e), NP_OK);
    CU_ASSERT_TRUE(got[0] > 0);
    return got[0] - t0;
}

TEST(a_lone_transfer_is_stored_and_forwarded_packet_by_packet)
{
    /* tiny: 8 GB/s a link (one per neighbour on a torus), 200 ns; 4 KiB packets. 64 KiB over
     * one link: 16 packets back to back, the last one 200 ns later: alpha + S beta, as the
     * flow engine. Over three links (4x4 torus, 0 -> (1, 2)) the first packet takes 3 x
     * (512 ns + 200 ns), the other 15 follow 512 ns apart: 3 alpha + S beta + 2 MTU beta. */
    pkt_fix f;
    pkt_open(&f, NET_ENGINE_PACKET, ARCH_TOPOLOGY_TORUS2D, 4, 4, 1, 0);
    double a = 200000, b = 1e12 / 8e9, mtu = 4096, S = 65536;
    CU_ASSERT_EQUAL(lone_ps(&f, 0, 1, (uint64_t)S), (uint64_t)(a + S * b));
    CU_ASSERT_EQUAL(lone_ps(&f, 0, 1 + 4 * 2, (uint64_t)S),
                    (uint64_t)(3 * a + S * b + 2 * mtu * b));
    /* a message shorter than a packet: one packet, store and forward on each hop */
    CU_ASSERT_EQUAL(lone_ps(&f, 0, 1 + 4 * 2, 1000), (uint64_t)(3 * (a + 1000 * b)));
    pkt_close(&f);
    /* a switch: chip -> switch (+ its 100 ns) -> chip, links 2 x 8 GB/s */
    pkt_open(&f, NET_ENGINE_PACKET, ARCH_TOPOLOGY_SWITCH, 8, 1, 1, 0);
    double sw = (double)f.np.switch_latency_ps, b2 = 1e12 / 16e9;
    CU_ASSERT_EQUAL(lone_ps(&f, 3, 5, (uint64_t)S), (uint64_t)(2 * a + sw + S * b2 + mtu * b2));
    pkt_close(&f);
}

typedef struct pattern {
    const char *name;
    arch_topology topo;
    uint32_t x, y, z;
    coll_op op;
    coll_algo algo;
    uint64_t bytes;
    uint32_t at_once; /* collectives started together over the same chips */
} pattern;

/* The time (ps) until the last of `at_once` copies of the pattern completes. */
static double pattern_ps(const pattern *pt, net_engine eng, uint32_t buf)
{
    pkt_fix f;
    pkt_open(&f, eng, pt->topo, pt->x, pt->y, pt->z, buf);
    coll *c[4] = {0};
    coll_desc d = {.op = pt->op, .algo = pt->algo, .bytes = pt->bytes};
    np_err e = {0};
    for (uint32_t i = 0; i < pt->at_once; i++)
        CU_ASSERT_EQUAL_FATAL(coll_start(f.s, &d, &c[i], &e), NP_OK);
    CU_ASSERT_EQUAL(evq_run(f.q, &e), NP_OK);
    double t = 0;
    for (uint32_t i = 0; i < pt->at_once; i++) {
        CU_ASSERT_TRUE(coll_is_done(c[i]));
        t = fmax(t, (double)coll_get_result(c[i])->t_end_ps);
        coll_free(c[i]);
    }
    pkt_close(&f);
    return t;
}

TEST(packet_and_flow_engines_agree_within_2_percent_on_large_ring_and_torus_patterns)
{
    static const pattern pats[] = {
        {"ring all-reduce, ring of 8", ARCH_TOPOLOGY_RING, 8, 1, 1, COLL_OP_ALL_REDUCE,
         COLL_ALGO_RING, 16 << 20, 1},
        {"two ring all-reduces on one ring of 8 (every link shared)", ARCH_TOPOLOGY_RING, 8, 1,
         1, COLL_OP_ALL_REDUCE, COLL_ALGO_RING, 16 << 20, 2},
        {"bidirectional ring all-reduce, ring of 8", ARCH_TOPOLOGY_RING, 8, 1, 1,
         COLL_OP_ALL_REDUCE, COLL_ALGO_BIRING, 16 << 20, 1},
        {"ring all-reduce, 4x4 torus", ARCH_TOPOLOGY_TORUS2D, 4, 4, 1, COLL_OP_ALL_REDUCE,
         COLL_ALGO_RING, 16 << 20, 1},
        {"four ring all-gathers on one 4x4 torus (every link shared by four)",
         ARCH_TOPOLOGY_TORUS2D, 4, 4, 1, COLL_OP_ALL_GATHER, COLL_ALGO_RING, 16 << 20, 4},
        {"2D all-reduce, 4x4 torus", ARCH_TOPOLOGY_TORUS2D, 4, 4, 1, COLL_OP_ALL_REDUCE,
         COLL_ALGO_HIER, 16 << 20, 1},
        {"ring all-gather, 4x4x4 torus", ARCH_TOPOLOGY_TORUS3D, 4, 4, 4, COLL_OP_ALL_GATHER,
         COLL_ALGO_RING, 16 << 20, 1},
        {"recursive halving/doubling all-reduce, ring of 8 (links shared)", ARCH_TOPOLOGY_RING,
         8, 1, 1, COLL_OP_ALL_REDUCE, COLL_ALGO_RHD, 16 << 20, 1},
        {"direct all-to-all, 4x4 torus (multi-hop, shared)", ARCH_TOPOLOGY_TORUS2D, 4, 4, 1,
         COLL_OP_ALL_TO_ALL, COLL_ALGO_DIRECT, 16 << 20, 1},
    };
    for (size_t i = 0; i < sizeof pats / sizeof *pats; i++) {
        double fl = pattern_ps(&pats[i], NET_ENGINE_FLOW, 0);
        double pk = pattern_ps(&pats[i], NET_ENGINE_PACKET, 0);
        if (fabs(pk - fl) > 0.02 * fl)
            fprintf(stderr, "%s: flow %.1f us, packet %.1f us\n", pats[i].name, fl / 1e6,
                    pk / 1e6);
        CU_ASSERT_DOUBLE_EQUAL(pk, fl, 0.02 * fl);
    }
}

TEST(packet_and_flow_engines_differ_on_small_messages_shared_buffers_and_small_buffer_incast)
{
    /* Small messages: a 4 KiB binomial broadcast on a ring of 8 is one packet per message,
     * stored and forwarded on every hop of the tree's longer edges: slower than flows. */
    pattern bc = {"", ARCH_TOPOLOGY_RING, 8, 1, 1, COLL_OP_BROADCAST, COLL_ALGO_TREE, 4096, 1};
    double fl = pattern_ps(&bc, NET_ENGINE_FLOW, 0), pk = pattern_ps(&bc, NET_ENGINE_PACKET, 0);
    CU_ASSERT_TRUE(pk > 1.3 * fl);
    /* Pairwise all-to-all on a 4x4 torus: a link's far-end buffer is shared by flows bound
     * for different next links; when one of them is slow its packets fill the buffer and
     * hold up the others (head-of-line blocking), which max-min flows do not see. With 32
     * packets per buffer the packets take some 19% longer; with buffers that never fill the
     * two nearly agree. */
    pattern pw = {"", ARCH_TOPOLOGY_TORUS2D, 4, 4, 1, COLL_OP_ALL_TO_ALL, COLL_ALGO_PAIRWISE,
                  16 << 20, 1};
    fl = pattern_ps(&pw, NET_ENGINE_FLOW, 0);
    pk = pattern_ps(&pw, NET_ENGINE_PACKET, 32);
    double big = pattern_ps(&pw, NET_ENGINE_PACKET, 4096);
    CU_ASSERT_TRUE(pk > 1.1 * fl);
    CU_ASSERT_DOUBLE_EQUAL(big, fl, 0.05 * fl);
    /* Incast: 15 chips send 1 MiB each to chip 0 of a switch at once. Flows share the one
     * downlink to chip 0 evenly: all end together at alpha + 15 S beta, and so do packets
     * served in turn from buffers that cover the link's bandwidth-delay product. With
     * two-packet buffers the downlink idles waiting for credits: it sends two packets per
     * credit round trip (a packet, its latency to chip 0, the credit's latency back), so the
     * incast takes 15 S / (2 MTU / (MTU beta + 2 x 200 ns)). */
    double b2 = 1e12 / 16e9, mtu = 4096, S = 1 << 20;
    for (int k = 0; k < 3; k++) {
        net_engine eng = k ? NET_ENGINE_PACKET : NET_ENGINE_FLOW;
        uint32_t buf = k == 2 ? 2 : 32;
        pkt_fix f;
        pkt_open(&f, eng, ARCH_TOPOLOGY_SWITCH, 16, 1, 1, buf);
        uint64_t got[64] = {0};
        np_err e = {0};
        stamp_q = f.q;
        for (uint32_t s = 1; s < 16; s++)
            CU_ASSERT_EQUAL(net_transfer(coll_sys_net(f.s), s, 0, (uint64_t)S, stamp, got, s,
                                         &e), NP_OK);
        CU_ASSERT_EQUAL(evq_run(f.q, &e), NP_OK);
        double a = 2 * 200000.0 + (double)f.np.switch_latency_ps;
        double want = k < 2 ? a + 15 * S * b2 : 15 * S / (2 * mtu / (mtu * b2 + 2 * 200000.0));
        uint64_t last = 0;
        for (uint32_t s = 1; s < 16; s++)
            last = got[s] > last ? got[s] : last;
        CU_ASSERT_DOUBLE_EQUAL((double)last, want, 0.01 * want);
        pkt_close(&f);
    }
}

TEST(packets_crossing_each_other_round_a_torus_never_deadlock_with_two_packet_buffers)
{
    /* Every chip of a ring of 8 sends 256 KiB three hops clockwise at once: each link's
     * buffer fills with packets bound for the next link, a cycle of full buffers unless
     * entering the ring needs two free slots (bubble flow control). It completes, and at the
     * rate of the shared links: every link carries three of the eight flows. */
    pkt_fix f;
    pkt_open(&f, NET_ENGINE_PACKET, ARCH_TOPOLOGY_RING, 8, 1, 1, 2);
    f.np.links_per_chip = 2;
    uint64_t got[64] = {0};
    np_err e = {0};
    stamp_q = f.q;
    for (uint32_t s = 0; s < 8; s++)
        CU_ASSERT_EQUAL(net_transfer(coll_sys_net(f.s), s, (s + 3) % 8, 256 << 10, stamp, got,
                                     s, &e), NP_OK);
    CU_ASSERT_EQUAL(evq_run(f.q, &e), NP_OK);
    uint64_t last = 0;
    for (uint32_t s = 0; s < 8; s++) {
        CU_ASSERT_TRUE(got[s] > 0);
        last = got[s] > last ? got[s] : last;
    }
    double b = 1e12 / 8e9, bound = 3.0 * (256 << 10) * b; /* three flows per link */
    CU_ASSERT_TRUE((double)last >= bound);
    CU_ASSERT_TRUE((double)last <= 2.5 * bound); /* two-packet buffers: stop and go */
    pkt_close(&f);
}
