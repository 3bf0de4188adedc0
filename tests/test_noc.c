/* test_noc.c — the on-chip mesh (noc/mesh.h, noc/traffic.h) and `npusim noc`.
 *
 * References, each independent of our own output:
 *   - zero-load latency: the analytical formula T0 = (H + 1)(P + L) + L + (F - 1) for H
 *     router-to-router hops, router pipeline P, link latency L and F flits (mesh.h); BookSim
 *     2's default router (P = 3, L = 2) gives 5H + 7 + F - 1, which its 1%-load runs show;
 *   - hand-counted pipelines: the cost of cutting a message into packets with one VC, the end
 *     times of contending transfers over 1-flit-per-cycle links;
 *   - throughput bound: the bisection bound of Dally & Towles, "Principles and Practices of
 *     Interconnection Networks" (the book BookSim accompanies), sec. 3.3.1: under uniform
 *     traffic a k x k mesh (k even) accepts at most 4/k flits/node/cycle;
 *   - low-load latency: at 5% of capacity queueing adds little, so the average packet latency
 *     is within 10% of the zero-load formula averaged over the same packets;
 *   - BookSim 2 itself: tests/data/noc/booksim_mesh.csv, runs of a BookSim built from its
 *     public source (commit, configuration and command in the file; scripts/booksim_noc.sh
 *     regenerates it) — latency within 10% below 80% of saturation and saturation within 10%
 *     for 16 configurations (the "against BookSim 2" section below);
 *   - the flow mode against the flit mode on large contending transfers (within 3%).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "harness.h"
#include "mesh.h"
#include "traffic.h"

#define MP(kx_, ky_, v_, b_, p_, l_)                                                        \
    {.kx = kx_, .ky = ky_, .vcs = v_, .buf_flits = b_, .router_cycles = p_, .link_cycles = l_}

typedef struct got {
    int n;
    mesh_packet last;
} got;

static void on_deliver(void *ctx, const mesh_packet *p)
{
    got *g = ctx;
    g->n++;
    g->last = *p;
}

static void check_zero_load_all_pairs(mesh_params p, uint32_t flits)
{
    mesh *m = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(mesh_create(&p, NULL, NULL, &m, &e), NP_OK);
    got g = {0};
    mesh_set_deliver(m, on_deliver, &g);
    uint32_t n = p.kx * p.ky, bad = 0;
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t d = 0; d < n; d++) {
            int before = g.n;
            CU_ASSERT_EQUAL_FATAL(mesh_send(m, s, d, flits, 7, &e), NP_OK);
            for (int i = 0; i < 10000 && !mesh_idle(m); i++)
                mesh_step(m);
            CU_ASSERT_EQUAL_FATAL(g.n, before + 1);
            uint64_t lat = g.last.t_done - g.last.t_create;
            if (lat != mesh_zero_load_cycles(&p, s, d, flits))
                bad++;
            CU_ASSERT_EQUAL(g.last.t_inject, g.last.t_create); /* no source queueing */
        }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(mesh_verify(m, &e), NP_OK);
    mesh_totals t;
    mesh_get_totals(m, &t);
    CU_ASSERT_EQUAL(t.packets_delivered, (uint64_t)n * n);
    CU_ASSERT_EQUAL(t.flits_delivered, (uint64_t)n * n * flits);
    mesh_free(m);
}

TEST(mesh_zero_load_latency_equals_the_formula_for_every_pair_on_4x4_and_8x8)
{
    check_zero_load_all_pairs((mesh_params)MP(4, 4, 2, 4, 2, 1), 1);
    check_zero_load_all_pairs((mesh_params)MP(4, 4, 2, 4, 2, 1), 5);
    check_zero_load_all_pairs((mesh_params)MP(8, 8, 4, 8, 2, 1), 4);
    check_zero_load_all_pairs((mesh_params)MP(8, 8, 2, 8, 3, 2), 3); /* deeper pipe, slow links */
}

TEST(mesh_buffers_shallower_than_the_credit_round_trip_slow_a_lone_packet)
{
    /* With B < P + 2L a VC cannot stream one flit per cycle (credit-limited), so a long
     * packet takes longer than T0; the formula assumes buffers cover the round trip. */
    mesh_params p = MP(4, 1, 1, 2, 3, 2);
    mesh *m = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(mesh_create(&p, NULL, NULL, &m, &e), NP_OK);
    got g = {0};
    mesh_set_deliver(m, on_deliver, &g);
    CU_ASSERT_EQUAL(mesh_send(m, 0, 3, 8, 0, &e), NP_OK);
    while (!mesh_idle(m))
        mesh_step(m);
    CU_ASSERT_TRUE(g.last.t_done - g.last.t_create > mesh_zero_load_cycles(&p, 0, 3, 8));
    CU_ASSERT_EQUAL(mesh_verify(m, &e), NP_OK);
    mesh_free(m);
}

TEST(mesh_zero_load_formula_matches_hand_counted_cases)
{
    mesh_params p = MP(4, 4, 2, 4, 2, 1);
    /* 0 -> 15: 3 + 3 hops, 7 routers of (2 + 1) cycles, + 1 ejection link, + 3 more flits */
    CU_ASSERT_EQUAL(mesh_hops(&p, 0, 15), 6);
    CU_ASSERT_EQUAL(mesh_zero_load_cycles(&p, 0, 15, 4), 7 * 3 + 1 + 3);
    CU_ASSERT_EQUAL(mesh_zero_load_cycles(&p, 5, 5, 1), 3 + 1); /* to itself: one router */
    CU_ASSERT_EQUAL(mesh_message_flits(100, 32), 4);
    CU_ASSERT_EQUAL(mesh_message_flits(128, 32), 4);
    CU_ASSERT_EQUAL(mesh_message_flits(0, 32), 1);
}

TEST(mesh_uniform_throughput_never_exceeds_the_bisection_bound)
{
    static const uint32_t ks[] = {4, 8};
    for (int i = 0; i < 2; i++) {
        uint32_t k = ks[i];
        noc_study_params p = {.mesh = MP(k, k, 4, 8, 2, 1), .traffic = NOC_TRAFFIC_UNIFORM,
                              .rate = 1.0, .packet_flits = 4, .warmup = 1000, .measure = 3000,
                              .drain_max = 500, .seed = 3};
        noc_study_result r;
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(noc_study_run(&p, &r, &e), NP_OK);
        CU_ASSERT_TRUE(r.conserved);
        CU_ASSERT_TRUE(r.saturated);
        CU_ASSERT_TRUE(r.accepted_rate <= 4.0 / k + 1e-9);
        CU_ASSERT_TRUE(r.max_link_util <= 1.0 + 1e-9); /* one flit per link per cycle */
    }
}

TEST(mesh_8x8_uniform_saturates_between_70_and_95_percent_of_the_bisection_bound)
{
    /* Offered well above saturation: accepted throughput is the saturation throughput. */
    noc_study_params p = {.mesh = MP(8, 8, 4, 8, 2, 1), .traffic = NOC_TRAFFIC_UNIFORM,
                          .rate = 0.6, .packet_flits = 4, .warmup = 2000, .measure = 4000,
                          .drain_max = 200, .seed = 5};
    noc_study_result r;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(noc_study_run(&p, &r, &e), NP_OK);
    CU_ASSERT_TRUE(r.saturated);
    CU_ASSERT_TRUE(r.accepted_rate >= 0.70 * 0.5);
    CU_ASSERT_TRUE(r.accepted_rate <= 0.95 * 0.5);
    /* and below it, everything offered is accepted */
    p.rate = 0.25;
    p.drain_max = 4000;
    CU_ASSERT_EQUAL_FATAL(noc_study_run(&p, &r, &e), NP_OK);
    CU_ASSERT_FALSE(r.saturated);
    CU_ASSERT_TRUE(r.accepted_rate > 0.95 * r.offered_rate);
    CU_ASSERT_TRUE(r.conserved);
}

TEST(mesh_low_load_latency_is_within_10_percent_of_zero_load)
{
    noc_study_params p = {.mesh = MP(8, 8, 4, 8, 2, 1), .traffic = NOC_TRAFFIC_UNIFORM,
                          .rate = 0.025, .packet_flits = 4, .warmup = 500, .measure = 4000,
                          .drain_max = 4000, .seed = 9};
    noc_study_result r;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(noc_study_run(&p, &r, &e), NP_OK);
    CU_ASSERT_TRUE(r.packets_measured > 100);
    CU_ASSERT_TRUE(r.avg_packet_latency >= r.zero_load_latency);
    CU_ASSERT_TRUE(r.avg_packet_latency <= 1.10 * r.zero_load_latency);
    CU_ASSERT_TRUE(r.avg_network_latency <= r.avg_packet_latency);
    /* uniform over all 64 nodes: mean hops 2 x (k^2 - 1)/(3k) = 5.25 (PPIN sec. 3.3.2) */
    CU_ASSERT_DOUBLE_EQUAL(r.avg_hops, 5.25, 0.25);
}

TEST(mesh_every_traffic_pattern_runs_conserves_flits_and_is_deterministic)
{
    for (int t = 0; t < NOC_TRAFFIC_COUNT; t++) {
        noc_study_params p = {.mesh = MP(4, 4, 2, 4, 2, 1), .traffic = (noc_traffic)t,
                              .rate = 0.2, .packet_flits = 3, .warmup = 200, .measure = 1500,
                              .drain_max = 3000, .seed = 11};
        noc_study_result a, b;
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(noc_study_run(&p, &a, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(noc_study_run(&p, &b, &e), NP_OK);
        CU_ASSERT_TRUE(a.conserved);
        CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof a), 0);
        CU_ASSERT_TRUE(a.packets_measured > 0);
    }
}

TEST(mesh_traffic_patterns_send_where_booksim_sends)
{
    mesh_params p = MP(4, 4, 1, 1, 1, 1);
    CU_ASSERT_EQUAL(noc_traffic_dest(NOC_TRAFFIC_TRANSPOSE, &p, 1, NULL, 0, NULL), 4); /* (1,0)->(0,1) */
    CU_ASSERT_EQUAL(noc_traffic_dest(NOC_TRAFFIC_BITCOMP, &p, 1, NULL, 0, NULL), 14);
    CU_ASSERT_EQUAL(noc_traffic_dest(NOC_TRAFFIC_NEIGHBOR, &p, 3, NULL, 0, NULL), 4); /* (3,0)->(0,1) */
    uint32_t hot = 9;
    CU_ASSERT_EQUAL(noc_traffic_dest(NOC_TRAFFIC_HOTSPOT, &p, 2, &hot, 1, NULL), 9);
}

TEST(mesh_study_refuses_patterns_that_do_not_fit)
{
    noc_study_params p = {.mesh = MP(4, 2, 2, 4, 2, 1), .traffic = NOC_TRAFFIC_TRANSPOSE,
                          .rate = 0.1, .packet_flits = 1, .measure = 10};
    noc_study_result r;
    np_err e = {0};
    CU_ASSERT_EQUAL(noc_study_run(&p, &r, &e), NP_ERR_INCONSISTENT);
    p.mesh = (mesh_params)MP(3, 3, 2, 4, 2, 1);
    p.traffic = NOC_TRAFFIC_BITCOMP;
    CU_ASSERT_EQUAL(noc_study_run(&p, &r, &e), NP_ERR_INCONSISTENT);
    p.traffic = NOC_TRAFFIC_UNIFORM;
    p.rate = 1.5;
    CU_ASSERT_EQUAL(noc_study_run(&p, &r, &e), NP_ERR_RANGE);
    p.rate = 0.1;
    p.mesh.vcs = 0;
    CU_ASSERT_EQUAL(noc_study_run(&p, &r, &e), NP_ERR_RANGE);
}

TEST(mesh_invariants_hold_at_every_cycle_under_heavy_load_with_one_vc_and_one_buffer)
{
    mesh_params p = MP(4, 4, 1, 1, 1, 1);
    mesh *m = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(mesh_create(&p, NULL, NULL, &m, &e), NP_OK);
    uint64_t x = 12345;
    int bad = 0;
    for (int c = 0; c < 3000; c++) {
        for (uint32_t s = 0; s < 16; s++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            if ((x >> 60) < 3 && c < 2000)
                CU_ASSERT_EQUAL_FATAL(mesh_send(m, s, (uint32_t)(x >> 32) % 16,
                                                1 + (uint32_t)(x >> 40) % 5, 0, &e), NP_OK);
        }
        mesh_step(m);
        if (mesh_verify(m, &e) != NP_OK)
            bad++;
    }
    for (int i = 0; i < 100000 && !mesh_idle(m); i++)
        mesh_step(m);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_TRUE(mesh_idle(m));
    CU_ASSERT_EQUAL(mesh_verify(m, &e), NP_OK);
    mesh_totals t;
    mesh_get_totals(m, &t);
    CU_ASSERT_EQUAL(t.flits_created, t.flits_delivered);
    CU_ASSERT_EQUAL(t.packets_created, t.packets_delivered);
    mesh_free(m);
}

TEST(mesh_driven_by_the_event_queue_delivers_at_the_clock_edges_and_counts_link_stats)
{
    evq *q = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    clk_domain clk;
    CU_ASSERT_EQUAL_FATAL(clk_init_ghz(&clk, 2.0, &e), NP_OK); /* 500 ps cycles */
    stats *reg = stats_create();
    mesh_params p = MP(4, 4, 2, 4, 2, 1);
    mesh *m = NULL;
    CU_ASSERT_EQUAL_FATAL(mesh_create(&p, reg, "chip0.noc", &m, &e), NP_OK);
    got g = {0};
    mesh_set_deliver(m, on_deliver, &g);
    CU_ASSERT_EQUAL(mesh_attach(m, q, &clk, &e), NP_OK);
    CU_ASSERT_EQUAL(mesh_send(m, 0, 15, 4, 1, &e), NP_OK);
    CU_ASSERT_EQUAL(evq_run(q, &e), NP_OK);
    CU_ASSERT_EQUAL(g.n, 1);
    CU_ASSERT_EQUAL(g.last.t_done, mesh_zero_load_cycles(&p, 0, 15, 4));
    CU_ASSERT_EQUAL(evq_now(q), clk_cycles_to_ps(&clk, g.last.t_done)); /* delivered then */
    stats_kind k;
    stats_counter *c = stats_find(reg, "chip0.noc.r0.xplus_flits", &k);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->value, 4);
    /* a second packet after idling starts from the current time */
    CU_ASSERT_EQUAL(evq_run_until(q, evq_now(q) + 100000, &e), NP_OK);
    CU_ASSERT_EQUAL(mesh_send(m, 3, 3, 1, 2, &e), NP_OK);
    uint64_t t0 = mesh_cycle(m);
    CU_ASSERT_EQUAL(evq_run(q, &e), NP_OK);
    CU_ASSERT_EQUAL(g.n, 2);
    CU_ASSERT_EQUAL(g.last.t_done - g.last.t_create, mesh_zero_load_cycles(&p, 3, 3, 1));
    CU_ASSERT_TRUE(g.last.t_create == t0 && t0 > 100);
    CU_ASSERT_EQUAL(mesh_verify(m, &e), NP_OK);
    mesh_free(m);
    stats_free(reg);
    evq_free(q);
}

TEST(noc_command_sweeps_rates_marks_saturation_and_prints_json)
{
    harness_run r = harness_npusim("noc", "--arch", "tiny", "--mesh", "4x4", "--rate",
                                   "0.2:1:0.4", "--warmup", "300", "--cycles", "1500", "--json",
                                   NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_t *j = json_loads(r.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    json_t *rows = json_object_get(j, "rows");
    CU_ASSERT_EQUAL(json_array_size(rows), 3); /* 0.2, 0.6, 1.0 (saturated, stops) */
    json_t *first = json_array_get(rows, 0), *last = json_array_get(rows, 2);
    static const char *const fields[] = {"offered_rate", "accepted_rate", "avg_packet_latency",
                                         "avg_network_latency", "p99_packet_latency"};
    for (int i = 0; i < 5; i++)
        CU_ASSERT_TRUE(json_is_number(json_object_get(first, fields[i])));
    CU_ASSERT_TRUE(json_is_false(json_object_get(first, "saturated")));
    CU_ASSERT_TRUE(json_is_true(json_object_get(last, "saturated")));
    CU_ASSERT_TRUE(json_is_number(json_object_get(j, "saturation_rate")));
    json_decref(j);
    harness_run_free(&r);

    r = harness_npusim("noc", "--mesh", "4x4", "--rate", "0.1", "--cycles", "500", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "offered"));
    harness_run_free(&r);
}

TEST(noc_command_refuses_bad_options_with_status_2)
{
    harness_run r = harness_npusim("noc", "--traffic", "zigzag", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "zigzag"));
    harness_run_free(&r);
    r = harness_npusim("noc", "--rate", "0.5:0.1:0.1", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    harness_run_free(&r);
    r = harness_npusim("noc", "--mesh", "4by4", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    harness_run_free(&r);
    r = harness_npusim("noc", "--mesh", "3x2", "--traffic", "transpose", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    harness_run_free(&r);
}

TEST(booksim_options_keep_zero_load_and_move_saturation_the_expected_way)
{
    /* credit_delay, input_speedup and wait_for_tail_credit change nothing for a lone packet
     * when buffers cover the longer credit round trip ... */
    mesh_params p = MP(4, 4, 2, 16, 3, 1);
    p.credit_delay = 2;
    p.input_speedup = 2;
    p.wait_tail_credit = true;
    check_zero_load_all_pairs(p, 6);
    /* ... while under load: speedup lets two VCs of one input leave together, so saturation
     * throughput rises; holding a VC until the tail's credit returns lowers it (BookSim's
     * reason to default wait_for_tail_credit to 0). 20-flit packets, 2 VCs, as in BookSim's
     * examples/mesh88_lat. */
    noc_study_params s = {.mesh = MP(8, 8, 2, 16, 3, 1), .traffic = NOC_TRAFFIC_UNIFORM,
                          .rate = 0.7, .packet_flits = 20, .warmup = 1500, .measure = 3000,
                          .drain_max = 100, .seed = 2};
    noc_study_result base, fast, held;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(noc_study_run(&s, &base, &e), NP_OK);
    s.mesh.input_speedup = 2;
    CU_ASSERT_EQUAL_FATAL(noc_study_run(&s, &fast, &e), NP_OK);
    s.mesh.input_speedup = 1;
    s.mesh.wait_tail_credit = true;
    s.mesh.credit_delay = 2;
    CU_ASSERT_EQUAL_FATAL(noc_study_run(&s, &held, &e), NP_OK);
    CU_ASSERT_TRUE(base.saturated && fast.saturated && held.saturated);
    CU_ASSERT_TRUE(fast.accepted_rate > base.accepted_rate);
    CU_ASSERT_TRUE(held.accepted_rate < base.accepted_rate);
    CU_ASSERT_TRUE(base.conserved && fast.conserved && held.conserved);
    CU_ASSERT_TRUE(base.accepted_rate <= 0.5 && fast.accepted_rate <= 0.5);
}

typedef struct pingpong {
    mesh *m;
    int n;
    mesh_packet got[4];
} pingpong;

static void on_ping(void *ctx, const mesh_packet *p)
{
    pingpong *pp = ctx;
    if (pp->n < 4)
        pp->got[pp->n] = *p;
    pp->n++;
    np_err e = {0};
    if (p->tag == 0) /* answer from inside the callback */
        CU_ASSERT_EQUAL(mesh_send(pp->m, p->dst, p->src, 2, 1, &e), NP_OK);
}

TEST(mesh_on_the_event_queue_answers_sent_from_a_delivery_callback_keep_exact_timing)
{
    evq *q = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    clk_domain clk;
    CU_ASSERT_EQUAL_FATAL(clk_init_ghz(&clk, 1.0, &e), NP_OK);
    mesh_params p = MP(4, 4, 2, 8, 2, 1);
    pingpong pp = {0};
    CU_ASSERT_EQUAL_FATAL(mesh_create(&p, NULL, NULL, &pp.m, &e), NP_OK);
    mesh_set_deliver(pp.m, on_ping, &pp);
    CU_ASSERT_EQUAL(mesh_attach(pp.m, q, &clk, &e), NP_OK);
    CU_ASSERT_EQUAL(mesh_send(pp.m, 0, 10, 3, 0, &e), NP_OK);
    CU_ASSERT_EQUAL(evq_run(q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(pp.n, 2);
    uint64_t t1 = mesh_zero_load_cycles(&p, 0, 10, 3), t2 = mesh_zero_load_cycles(&p, 10, 0, 2);
    CU_ASSERT_EQUAL(pp.got[0].t_done, t1);
    CU_ASSERT_EQUAL(pp.got[1].t_create, t1); /* created when the ping arrived */
    CU_ASSERT_EQUAL(pp.got[1].t_done, t1 + t2);
    CU_ASSERT_EQUAL(evq_now(q), clk_cycles_to_ps(&clk, t1 + t2));
    CU_ASSERT_EQUAL(mesh_verify(pp.m, &e), NP_OK);
    mesh_free(pp.m);
    evq_free(q);
}

/* ---- packets, flows and the cost of a cycle -------------------------------------------------- */

/* Sends one message of `flits` from src to dst on an idle mesh and runs it to the end; its
 * delivery record, and the mesh's totals. */
static mesh_packet lone_message(mesh_params p, uint32_t src, uint32_t dst, uint32_t flits,
                                mesh_totals *t)
{
    mesh *m = NULL;
    np_err e = {0};
    got g = {0};
    CU_ASSERT_EQUAL_FATAL(mesh_create(&p, NULL, NULL, &m, &e), NP_OK);
    mesh_set_deliver(m, on_deliver, &g);
    CU_ASSERT_EQUAL_FATAL(mesh_send(m, src, dst, flits, 3, &e), NP_OK);
    while (!mesh_idle(m))
        mesh_step(m);
    CU_ASSERT_EQUAL(g.n, 1);
    CU_ASSERT_EQUAL(g.last.flits, flits);
    CU_ASSERT_EQUAL(g.last.tag, 3);
    CU_ASSERT_EQUAL(mesh_verify(m, &e), NP_OK);
    mesh_get_totals(m, t);
    mesh_free(m);
    return g.last;
}

TEST(a_message_cut_into_packets_streams_back_to_back_with_two_vcs_and_pays_r_plus_1_per_packet_with_one)
{
    /* Two VCs: the next packet's head takes the other VC and does its route computation and VC
     * allocation while the previous packet still streams, so a lone message of F flits takes
     * the one-packet T0 whatever the packet size (when packets are longer than R + 1). One VC:
     * the next head waits behind the tail in the same VC, then spends R cycles routing and 1
     * allocating its VC: R + 1 more cycles per packet after the first (hand-counted from
     * BookSim's iq_router: the tail leaves at t, the head routes at t+1..t+R, gets its VC at
     * t+R+1 and bids at t+R+2 instead of t+1). */
    for (uint32_t P = 1; P <= 4; P++) {
        mesh_stages st;
        mesh_params p = MP(4, 4, 2, 12, P, 2);
        mesh_stages_of(&p, &st);
        uint64_t t0 = mesh_zero_load_cycles(&p, 0, 15, 100);
        for (uint32_t M = st.routing + 2; M <= 64; M *= 2) {
            p.max_packet_flits = M;
            p.vcs = 2;
            mesh_totals t;
            mesh_packet got2 = lone_message(p, 0, 15, 100, &t);
            CU_ASSERT_EQUAL(got2.t_done, t0);
            CU_ASSERT_EQUAL(t.packets_created, (100 + M - 1) / M);
            CU_ASSERT_EQUAL(t.packets_delivered, t.packets_created);
            p.vcs = 1;
            mesh_packet got1 = lone_message(p, 0, 15, 100, &t);
            CU_ASSERT_EQUAL(got1.t_done, t0 + (t.packets_created - 1) * (st.routing + 1));
        }
    }
}

TEST(router_stages_follow_from_the_pipeline_depth)
{
    mesh_params p = MP(2, 2, 2, 8, 1, 1);
    mesh_stages s;
    mesh_stages_of(&p, &s); /* P = 1: allocation and traversal in one cycle */
    CU_ASSERT(s.routing == 0 && s.vc_alloc == 1 && s.sw_alloc == 1 && s.crossbar == 0);
    p.router_cycles = 2; /* lookahead routing (BookSim routing_delay = 0) */
    mesh_stages_of(&p, &s);
    CU_ASSERT(s.routing == 0 && s.crossbar == 1);
    p.router_cycles = 3; /* BookSim's default 4-stage router */
    mesh_stages_of(&p, &s);
    CU_ASSERT(s.routing == 1 && s.vc_alloc == 1 && s.sw_alloc == 1 && s.crossbar == 1);
    p.router_cycles = 6;
    mesh_stages_of(&p, &s);
    CU_ASSERT(s.routing == 4 && s.crossbar == 1);
}

TEST(a_lone_message_in_flow_mode_takes_exactly_the_zero_load_latency)
{
    mesh_params p = MP(8, 8, 2, 8, 3, 2);
    p.mode = MESH_MODE_FLOW;
    static const uint32_t pairs[][3] = {{0, 63, 1}, {0, 63, 5000}, {9, 9, 7}, {27, 4, 300}};
    for (int i = 0; i < 4; i++) {
        mesh_totals t;
        mesh_packet g = lone_message(p, pairs[i][0], pairs[i][1], pairs[i][2], &t);
        CU_ASSERT_EQUAL(g.t_done, mesh_zero_load_cycles(&p, pairs[i][0], pairs[i][1],
                                                        pairs[i][2]));
        CU_ASSERT_EQUAL(g.t_inject, 0);
        CU_ASSERT_EQUAL(t.flits_delivered, pairs[i][2]);
        CU_ASSERT_EQUAL(t.router_steps, 0); /* no per-cycle work */
    }
}

typedef struct finish {
    uint64_t done[16], sent[16];
} finish;

static void on_finish(void *ctx, const mesh_packet *p) { ((finish *)ctx)->done[p->tag] = p->t_done; }
static void on_leave(void *ctx, const mesh_packet *p) { ((finish *)ctx)->sent[p->tag] = p->t_done; }

/* Runs transfers tr[i] = {src, dst, flits} (all sent at cycle 0) in one mode; their arrival
 * cycles. */
static void run_transfers(mesh_mode md, const uint32_t (*tr)[3], int n, finish *f)
{
    mesh_params p = MP(4, 4, 2, 8, 3, 2);
    p.max_packet_flits = 64;
    p.mode = md;
    mesh *m = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(mesh_create(&p, NULL, NULL, &m, &e), NP_OK);
    memset(f, 0, sizeof *f);
    mesh_set_deliver(m, on_finish, f);
    mesh_set_sent(m, on_leave, f);
    for (int i = 0; i < n; i++)
        CU_ASSERT_EQUAL_FATAL(mesh_send(m, tr[i][0], tr[i][1], tr[i][2], (uint64_t)i, &e), NP_OK);
    while (!mesh_idle(m))
        mesh_step(m);
    CU_ASSERT_EQUAL(mesh_verify(m, &e), NP_OK);
    mesh_free(m);
}

TEST(flit_and_flow_modes_agree_within_3_percent_on_large_contending_transfers)
{
    /* A 4x4 mesh, 20,000-flit transfers (F): 0->3 (along row 0) and 12->3 (along row 3, down
     * column 3) share the ejection port at 3; 12->3 and 13->14 share the link 13->14; 4->7
     * and 5->6 share the link 5->6 (4->7 is twice as long: half rate until 5->6 is done, then
     * full rate); 8->11 and 9->11 share row 2 and the ejection at 11. With links of 1 flit a
     * cycle each pair shares fairly: 2F each, 3F for 4->7 (hand-computed); both modes give
     * those within 3%, transfer by transfer, and agree on when each last flit left. */
    const uint32_t F = 20000;
    static const uint32_t tr[][3] = {{0, 3, 20000}, {12, 3, 20000}, {4, 7, 40000},
                                     {5, 6, 20000}, {8, 11, 20000}, {9, 11, 20000},
                                     {13, 14, 20000}};
    static const double expect[] = {2, 2, 3, 2, 2, 2, 2}; /* x F */
    finish a, b;
    run_transfers(MESH_MODE_FLIT, tr, 7, &a);
    run_transfers(MESH_MODE_FLOW, tr, 7, &b);
    for (int i = 0; i < 7; i++) {
        double fl = (double)a.done[i], fw = (double)b.done[i];
        if (fabs(fw - fl) > 0.03 * fl)
            fprintf(stderr, "\n%u -> %u: flit %.0f, flow %.0f\n", tr[i][0], tr[i][1], fl, fw);
        CU_ASSERT_TRUE(fabs(fw - fl) <= 0.03 * fl);
        CU_ASSERT_TRUE(fabs(fl - expect[i] * F) <= 0.03 * expect[i] * F);
        CU_ASSERT_TRUE(fabs((double)b.sent[i] - (double)a.sent[i]) <= 0.03 * (double)a.sent[i]);
    }
}

TEST(in_a_parking_lot_flow_mode_is_max_min_fair_where_the_routers_are_fair_per_port)
{
    /* 0->3, 1->3, 2->3 along one row: each router's output is shared round robin between its
     * input ports, so 2->3 gets half the last link and 0, 1 a quarter each; max-min flows give
     * each a third. The last transfer ends at 3F in both (the ejection port is busy
     * throughout); 2->3 ends at 2F in flit mode and 3F in flow mode (docs/noc.md). */
    const double F = 20000;
    static const uint32_t tr[][3] = {{0, 3, 20000}, {1, 3, 20000}, {2, 3, 20000}};
    finish a, b;
    run_transfers(MESH_MODE_FLIT, tr, 3, &a);
    run_transfers(MESH_MODE_FLOW, tr, 3, &b);
    for (int i = 0; i < 3; i++)
        CU_ASSERT_TRUE(fabs((double)b.done[i] - 3 * F) <= 0.03 * 3 * F);
    CU_ASSERT_TRUE(fabs((double)a.done[0] - 3 * F) <= 0.03 * 3 * F);
    CU_ASSERT_TRUE(fabs((double)a.done[1] - 3 * F) <= 0.03 * 3 * F);
    CU_ASSERT_TRUE(fabs((double)a.done[2] - 2 * F) <= 0.03 * 2 * F);
}

TEST(only_the_routers_a_message_crosses_are_stepped_so_a_big_mesh_costs_no_more)
{
    /* Neighbours on a 32 x 32 mesh: two routers hold flits, so at most 2 router steps per
     * cycle (a mesh that visits every router would do 1024). */
    mesh_params p = MP(32, 32, 2, 8, 2, 1);
    mesh_totals t;
    mesh_packet g = lone_message(p, 0, 1, 5000, &t);
    CU_ASSERT_EQUAL(g.t_done, mesh_zero_load_cycles(&p, 0, 1, 5000));
    CU_ASSERT_TRUE(t.router_steps <= 2 * (g.t_done + 1));
    CU_ASSERT_TRUE(t.router_steps >= 5000); /* each flit crossed the switch somewhere */
    /* and the same message on 4 x 4 does the same work */
    mesh_totals t4;
    p.kx = p.ky = 4;
    lone_message(p, 0, 1, 5000, &t4);
    CU_ASSERT_EQUAL(t4.router_steps, t.router_steps);
}

TEST(the_mesh_takes_its_packet_size_and_mode_from_the_architecture)
{
    arch_config cfg;
    np_err e = {0};
    const char *sets[] = {"chip.noc_max_packet_flits=16", "chip.noc_mode=flow"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 2, &cfg, &e), NP_OK);
    mesh_params p;
    mesh_params_from_arch(&cfg, &p);
    CU_ASSERT_EQUAL(p.max_packet_flits, 16);
    CU_ASSERT_EQUAL(p.mode, MESH_MODE_FLOW);
    CU_ASSERT_STRING_EQUAL(mesh_mode_name(p.mode), "flow");
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &cfg, &e), NP_OK);
    mesh_params_from_arch(&cfg, &p);
    CU_ASSERT_EQUAL(p.max_packet_flits, 64); /* the schema's default */
    CU_ASSERT_EQUAL(p.mode, MESH_MODE_FLIT);
    const char *bad[] = {"chip.noc_mode=fluid"};
    CU_ASSERT_EQUAL(arch_resolve("tiny", bad, 1, &cfg, &e), NP_ERR_UNKNOWN_KEY);
}

TEST(flow_mode_on_the_event_queue_posts_events_only_when_flows_end_and_messages_arrive)
{
    evq *q = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    clk_domain clk;
    CU_ASSERT_EQUAL_FATAL(clk_init_ghz(&clk, 1.0, &e), NP_OK);
    mesh_params p = MP(8, 8, 2, 8, 2, 1);
    p.mode = MESH_MODE_FLOW;
    pingpong pp = {0};
    CU_ASSERT_EQUAL_FATAL(mesh_create(&p, NULL, NULL, &pp.m, &e), NP_OK);
    mesh_set_deliver(pp.m, on_ping, &pp);
    CU_ASSERT_EQUAL(mesh_attach(pp.m, q, &clk, &e), NP_OK);
    CU_ASSERT_EQUAL(mesh_send(pp.m, 0, 63, 1000000, 0, &e), NP_OK);
    CU_ASSERT_EQUAL(evq_run(q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(pp.n, 2);
    uint64_t t1 = mesh_zero_load_cycles(&p, 0, 63, 1000000), t2 = mesh_zero_load_cycles(&p, 63, 0, 2);
    CU_ASSERT_EQUAL(pp.got[0].t_done, t1);
    CU_ASSERT_EQUAL(pp.got[1].t_done, t1 + t2);
    CU_ASSERT_EQUAL(evq_now(q), clk_cycles_to_ps(&clk, t1 + t2));
    CU_ASSERT_TRUE(evq_dispatched(q) <= 8); /* two flow ends, two arrivals: no cycle loop */
    CU_ASSERT_EQUAL(mesh_verify(pp.m, &e), NP_OK);
    mesh_free(pp.m);
    evq_free(q);
}

/* ---- against BookSim 2 ---------------------------------------------------------------------
 * tests/data/noc/booksim_mesh.csv holds BookSim 2 runs (commit, configuration and command in
 * its header; scripts/booksim_noc.sh regenerates it from a BookSim built outside this tree):
 * 4x4 and 8x8 meshes, 2 VCs x 8 flits, the 4-stage iq router with iSLIP allocators, dor, for
 * uniform, transpose, bitcomp and hotspot traffic with 1- and 4-flit packets. For each, the
 * saturation rate S BookSim finds by bisection and the average packet latency at fractions of
 * S. Our mesh, given the same router through noc_ref_load, must (1) have the average packet
 * latency within 10% of BookSim's at every stable point up to 0.8 S and (2) saturate within
 * 10% of S: not saturated at 0.9 S, saturated at 1.1 S. */

static const noc_ref *booksim_ref(void)
{
    static noc_ref ref;
    static bool loaded;
    if (!loaded) {
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(noc_ref_load(harness_src_path("tests/data/noc/booksim_mesh.csv"),
                                           &ref, &e), NP_OK);
        loaded = true;
    }
    return &ref;
}

static void check_booksim(uint32_t k, noc_traffic t, uint32_t f)
{
    const noc_ref *ref = booksim_ref();
    const noc_ref_point *s = NULL;
    for (size_t i = 0; i < ref->n; i++)
        if (ref->pts[i].saturation && ref->pts[i].k == k && ref->pts[i].traffic == t &&
            ref->pts[i].packet_flits == f)
            s = &ref->pts[i];
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    double sat = s->offered;
    uint32_t hot[4];
    int points = 0;
    np_err e = {0};
    noc_study_result r;
    for (size_t i = 0; i < ref->n; i++) {
        const noc_ref_point *b = &ref->pts[i];
        if (b->saturation || b->k != k || b->traffic != t || b->packet_flits != f ||
            !b->stable || b->offered > 0.8 * sat * (1 + 1e-9))
            continue;
        noc_study_params p = noc_ref_study(ref, b, b->offered, hot);
        CU_ASSERT_EQUAL_FATAL(noc_study_run(&p, &r, &e), NP_OK);
        bool ok = !r.saturated && fabs(r.avg_packet_latency - b->packet_latency) <=
                                      0.10 * b->packet_latency;
        if (!ok)
            fprintf(stderr, "\n%ux%u %s %u-flit at %.4f flits/node/cycle: %.2f cycles, BookSim "
                    "%.2f\n", k, k, noc_traffic_name(t), f, b->offered, r.avg_packet_latency,
                    b->packet_latency);
        CU_ASSERT_TRUE(ok);
        CU_ASSERT_TRUE(r.conserved);
        points++;
    }
    CU_ASSERT_TRUE(points >= 8); /* 0.05 S, 0.1 S, 0.2 S .. 0.8 S */
    noc_study_params p = noc_ref_study(ref, s, 0.9 * sat, hot);
    CU_ASSERT_EQUAL_FATAL(noc_study_run(&p, &r, &e), NP_OK);
    if (r.saturated)
        fprintf(stderr, "\n%ux%u %s %u-flit saturated at 0.9 x BookSim's %.4f\n", k, k,
                noc_traffic_name(t), f, sat);
    CU_ASSERT_FALSE(r.saturated);
    p = noc_ref_study(ref, s, 1.1 * sat, hot);
    p.drain_max = p.measure;
    CU_ASSERT_EQUAL_FATAL(noc_study_run(&p, &r, &e), NP_OK);
    if (!r.saturated)
        fprintf(stderr, "\n%ux%u %s %u-flit not saturated at 1.1 x BookSim's %.4f\n", k, k,
                noc_traffic_name(t), f, sat);
    CU_ASSERT_TRUE(r.saturated);
}

TEST(booksim_4x4_uniform_1_flit_latency_within_10_percent_and_saturation_within_10_percent)
{
    check_booksim(4, NOC_TRAFFIC_UNIFORM, 1);
}

TEST(booksim_4x4_uniform_4_flit_latency_within_10_percent_and_saturation_within_10_percent)
{
    check_booksim(4, NOC_TRAFFIC_UNIFORM, 4);
}

TEST(booksim_4x4_transpose_1_flit_latency_within_10_percent_and_saturation_within_10_percent)
{
    check_booksim(4, NOC_TRAFFIC_TRANSPOSE, 1);
}

TEST(booksim_4x4_transpose_4_flit_latency_within_10_percent_and_saturation_within_10_percent)
{
    check_booksim(4, NOC_TRAFFIC_TRANSPOSE, 4);
}

TEST(booksim_4x4_bitcomp_1_flit_latency_within_10_percent_and_saturation_within_10_percent)
{
    check_booksim(4, NOC_TRAFFIC_BITCOMP, 1);
}

TEST(booksim_4x4_bitcomp_4_flit_latency_within_10_percent_and_saturation_within_10_percent)
{
    check_booksim(4, NOC_TRAFFIC_BITCOMP, 4);
}

TEST(booksim_4x4_hotspot_1_flit_latency_within_10_percent_and_saturation_within_10_percent)
{
    check_booksim(4, NOC_TRAFFIC_HOTSPOT, 1);
}

TEST(booksim_4x4_hotspot_4_flit_latency_within_10_percent_and_saturation_within_10_percent)
{
    check_booksim(4, NOC_TRAFFIC_HOTSPOT, 4);
}

TEST(booksim_8x8_uniform_1_flit_latency_within_10_percent_and_saturation_within_10_percent)
{
    check_booksim(8, NOC_TRAFFIC_UNIFORM, 1);
}

TEST(booksim_8x8_uniform_4_flit_latency_within_10_percent_and_saturation_within_10_percent)
{
    check_booksim(8, NOC_TRAFFIC_UNIFORM, 4);
}

TEST(booksim_8x8_transpose_1_flit_latency_within_10_percent_and_saturation_within_10_percent)
{
    check_booksim(8, NOC_TRAFFIC_TRANSPOSE, 1);
}

TEST(booksim_8x8_transpose_4_flit_latency_within_10_percent_and_saturation_within_10_percent)
{
    check_booksim(8, NOC_TRAFFIC_TRANSPOSE, 4);
}

TEST(booksim_8x8_bitcomp_1_flit_latency_within_10_percent_and_saturation_within_10_percent)
{
    check_booksim(8, NOC_TRAFFIC_BITCOMP, 1);
}

TEST(booksim_8x8_bitcomp_4_flit_latency_within_10_percent_and_saturation_within_10_percent)
{
    check_booksim(8, NOC_TRAFFIC_BITCOMP, 4);
}

TEST(booksim_8x8_hotspot_1_flit_latency_within_10_percent_and_saturation_within_10_percent)
{
    check_booksim(8, NOC_TRAFFIC_HOTSPOT, 1);
}

TEST(booksim_8x8_hotspot_4_flit_latency_within_10_percent_and_saturation_within_10_percent)
{
    check_booksim(8, NOC_TRAFFIC_HOTSPOT, 4);
}

static np_status load_ref(const char *name, noc_ref *ref, np_err *e)
{
    char path[512];
    snprintf(path, sizeof path, "%s%s", harness_src_path("tests/data/noc/"), name);
    return noc_ref_load(path, ref, e);
}

TEST(a_reference_file_maps_booksims_router_onto_ours_and_keeps_every_row)
{
    noc_ref ref;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(load_ref("ref_small.csv", &ref, &e), NP_OK);
    /* BookSim's 4-stage router (routing, VC and switch allocation, crossbar: 1 cycle each)
     * with channels of latency 1: P = 3, L = 2 */
    CU_ASSERT_EQUAL(ref.mesh.vcs, 2);
    CU_ASSERT_EQUAL(ref.mesh.buf_flits, 8);
    CU_ASSERT_EQUAL(ref.mesh.router_cycles, 3);
    CU_ASSERT_EQUAL(ref.mesh.link_cycles, 2);
    CU_ASSERT_EQUAL(ref.mesh.credit_delay, 0);
    CU_ASSERT_FALSE(ref.mesh.wait_tail_credit);
    CU_ASSERT_STRING_EQUAL(ref.commit, "28f43299f1706a3160ffac721ca461d74eb6e618");
    CU_ASSERT_EQUAL_FATAL(ref.n, 3);
    CU_ASSERT_TRUE(ref.pts[0].saturation && ref.pts[0].stable);
    CU_ASSERT_EQUAL(ref.pts[0].k, 4);
    CU_ASSERT_EQUAL(ref.pts[0].traffic, NOC_TRAFFIC_UNIFORM);
    CU_ASSERT_DOUBLE_EQUAL(ref.pts[0].offered, 0.56641, 1e-12);
    CU_ASSERT_FALSE(ref.pts[1].saturation);
    CU_ASSERT_DOUBLE_EQUAL(ref.pts[1].packet_latency, 19.5416, 1e-12);
    noc_ref_free(&ref);
    uint32_t hot[4];
    noc_ref_hotspots(8, hot); /* (3,3), (4,3), (3,4), (4,4) */
    CU_ASSERT(hot[0] == 27 && hot[1] == 28 && hot[2] == 35 && hot[3] == 36);
}

TEST(a_bad_reference_file_is_refused_at_its_line)
{
    noc_ref ref;
    np_err e = {0};
    CU_ASSERT_EQUAL(load_ref("ref_bad_row.csv", &ref, &e), NP_ERR_SYNTAX);
    CU_ASSERT_EQUAL(e.line, 38);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.file, "ref_bad_row.csv"));
    noc_ref_free(&ref);
    CU_ASSERT_EQUAL(load_ref("ref_no_header.csv", &ref, &e), NP_ERR_SYNTAX);
    CU_ASSERT_EQUAL(e.line, 36);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "header"));
    noc_ref_free(&ref);
    CU_ASSERT_EQUAL(load_ref("ref_other_router.csv", &ref, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "islip"));
    noc_ref_free(&ref);
    CU_ASSERT_EQUAL(load_ref("no_such_file.csv", &ref, &e), NP_ERR_IO);
    noc_ref_free(&ref);
}

TEST(noc_command_compares_with_a_reference_file_and_finds_the_saturation_rate)
{
    harness_run r = harness_npusim("noc", "--compare", harness_src_path("tests/data/noc/ref_small.csv"),
                                   "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_t *j = json_loads(r.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    json_t *rows = json_object_get(j, "rows");
    CU_ASSERT_EQUAL_FATAL(json_array_size(rows), 3);
    json_t *sat = json_array_get(rows, 0), *lat = json_array_get(rows, 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(sat, "point")), "saturation");
    double bs = json_real_value(json_object_get(sat, "booksim"));
    double ours = json_real_value(json_object_get(sat, "npusim"));
    CU_ASSERT_DOUBLE_EQUAL(bs, 0.56641, 1e-9);
    CU_ASSERT_TRUE(fabs(ours - bs) <= 0.10 * bs);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(lat, "booksim")), 19.5416, 1e-9);
    CU_ASSERT_TRUE(fabs(json_real_value(json_object_get(lat, "npusim")) - 19.5416) <= 1.96);
    json_decref(j);
    harness_run_free(&r);
    r = harness_npusim("noc", "--compare", harness_src_path("tests/data/noc/ref_bad_row.csv"),
                       NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "ref_bad_row.csv:38"));
    harness_run_free(&r);
    /* --saturation: the bisection's answer lies above the sweep's last sustained rate */
    r = harness_npusim("noc", "--mesh", "4x4", "--vcs", "2", "--buf", "8", "--router-cycles", "3",
                       "--link-cycles", "2", "--packet-flits", "1", "--rate", "0.3",
                       "--cycles", "4000", "--saturation", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    j = json_loads(r.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    double max = json_real_value(json_object_get(j, "max_sustainable_rate"));
    CU_ASSERT_TRUE(max > 0.3 && max < 1.0); /* bounded by the 4x4 bisection: 4/k = 1 */
    json_decref(j);
    harness_run_free(&r);
}

static void send_later(evq *q, void *ctx, uint64_t arg)
{
    (void)q, (void)arg;
    pingpong *pp = ctx;
    np_err e = {0};
    CU_ASSERT_EQUAL(mesh_send(pp->m, 2, 3, 10, 2, &e), NP_OK);
}

TEST(in_flow_mode_a_message_sent_while_another_flows_starts_now_and_ends_on_time)
{
    /* A long flow 0 -> 1 is under way (its end is far off) when a short message 2 -> 3 on
     * other links is sent at cycle 5: it is created at 5 and arrives T0 later, not when the
     * long one ends. */
    evq *q = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    clk_domain clk;
    CU_ASSERT_EQUAL_FATAL(clk_init_ghz(&clk, 1.0, &e), NP_OK);
    mesh_params p = MP(4, 1, 2, 8, 2, 1);
    p.mode = MESH_MODE_FLOW;
    pingpong pp = {0};
    CU_ASSERT_EQUAL_FATAL(mesh_create(&p, NULL, NULL, &pp.m, &e), NP_OK);
    got g = {0};
    mesh_set_deliver(pp.m, on_deliver, &g);
    CU_ASSERT_EQUAL(mesh_attach(pp.m, q, &clk, &e), NP_OK);
    CU_ASSERT_EQUAL(mesh_send(pp.m, 0, 1, 1000, 1, &e), NP_OK);
    CU_ASSERT_EQUAL(evq_schedule_at(q, 5000, send_later, &pp, 0, NULL, &e), NP_OK);
    CU_ASSERT_EQUAL(evq_run_until(q, 100000, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(g.n, 1);
    CU_ASSERT_EQUAL(g.last.tag, 2u);
    CU_ASSERT_EQUAL(g.last.t_create, 5u);
    CU_ASSERT_EQUAL(g.last.t_done, 5 + mesh_zero_load_cycles(&p, 2, 3, 10));
    CU_ASSERT_EQUAL(evq_run(q, &e), NP_OK);
    CU_ASSERT_EQUAL(g.n, 2);
    CU_ASSERT_EQUAL(g.last.t_done, mesh_zero_load_cycles(&p, 0, 1, 1000));
    CU_ASSERT_EQUAL(mesh_verify(pp.m, &e), NP_OK);
    mesh_free(pp.m);
    evq_free(q);
}
