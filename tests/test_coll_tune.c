/* test_coll_tune.c — the tuner (noc/coll_tune.h) against the flow engine: on a grid of
 * topologies x ops x sizes, every algorithm the op has is simulated, and COLL_ALGO_AUTO
 * must never be more than 5% slower than the fastest of them. The reference is the
 * simulation itself (each algorithm run on an idle network), not the tuner's models. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "coll_tune.h"
#include "harness.h"

typedef struct grid_topo {
    const char *name, *preset;
    arch_topology topo;
    uint32_t chips, x, y, z, island, links;
} grid_topo;

static const grid_topo topos[] = {
    {"ring of 8 (tiny)", "tiny", ARCH_TOPOLOGY_RING, 8, 8, 1, 1, 0, 2},
    {"ring of 16 (tpu-pod links)", "tpu-pod", ARCH_TOPOLOGY_RING, 16, 16, 1, 1, 0, 2},
    {"torus2d 4x4 (tiny)", "tiny", ARCH_TOPOLOGY_TORUS2D, 16, 4, 4, 1, 0, 4},
    {"torus3d 4x4x4 (tpu-pod)", "tpu-pod", ARCH_TOPOLOGY_TORUS3D, 64, 4, 4, 4, 0, 6},
    {"switch of 16 (tiny)", "tiny", ARCH_TOPOLOGY_SWITCH, 16, 16, 1, 1, 0, 2},
    {"fat tree of 32 (a100-cluster links)", "a100-cluster", ARCH_TOPOLOGY_FAT_TREE, 32, 32, 1,
     1, 0, 1},
    {"islands 4 x 8 (a100-cluster)", "a100-cluster", ARCH_TOPOLOGY_HIERARCHICAL, 32, 32, 1, 1,
     8, 12},
    {"fully connected 8 (tiny)", "tiny", ARCH_TOPOLOGY_FULLY_CONNECTED, 8, 8, 1, 1, 0, 7},
    {"switch of 12 (tpu-pod links)", "tpu-pod", ARCH_TOPOLOGY_SWITCH, 12, 12, 1, 1, 0, 6},
    {"torus3d 2x3x4 (tiny)", "tiny", ARCH_TOPOLOGY_TORUS3D, 24, 2, 3, 4, 0, 6},
};

static void grid_sys(const grid_topo *g, arch_config *cfg, net_params *np)
{
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve(g->preset, NULL, 0, cfg, &e), NP_OK);
    net_params_from_arch(cfg, np);
    np->topology = g->topo;
    np->chips = g->chips;
    np->dims[0] = g->x;
    np->dims[1] = g->y;
    np->dims[2] = g->z;
    np->links_per_chip = g->links;
    if (g->island)
        np->island_chips = g->island;
    if (g->topo == ARCH_TOPOLOGY_SWITCH)
        np->switch_radix = g->chips;
    if (g->topo == ARCH_TOPOLOGY_FAT_TREE)
        np->switch_radix = 16;
}

static double sim_ps(coll_sys *s, coll_op op, coll_algo a, uint64_t bytes, coll_algo *ran)
{
    coll_desc d = {.op = op, .algo = a, .bytes = bytes, .root = 1};
    coll_result r;
    np_err e = {0};
    np_status st = coll_run(s, &d, &r, &e);
    if (st == NP_ERR_INCONSISTENT)
        return -1; /* the group does not fit it */
    CU_ASSERT_EQUAL(st, NP_OK);
    if (ran)
        *ran = r.algo;
    return (double)(r.t_end_ps - r.t_start_ps);
}

TEST(auto_is_never_more_than_5_percent_slower_than_the_best_algorithm)
{
    static const coll_op ops[] = {COLL_OP_ALL_REDUCE, COLL_OP_ALL_GATHER,
                                  COLL_OP_REDUCE_SCATTER, COLL_OP_BROADCAST, COLL_OP_REDUCE,
                                  COLL_OP_ALL_TO_ALL};
    static const uint64_t sizes[] = {64, 4096, 65536, 1 << 20, 16 << 20, 128 << 20};
    int checked = 0, bad = 0;
    double worst = 0;
    for (size_t ti = 0; ti < sizeof topos / sizeof *topos; ti++) {
        arch_config cfg;
        net_params np;
        grid_sys(&topos[ti], &cfg, &np);
        evq *q;
        coll_sys *s;
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(coll_sys_create(&cfg, &np, q, NULL, &s, &e), NP_OK);
        for (size_t oi = 0; oi < sizeof ops / sizeof *ops; oi++)
            for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
                double best = INFINITY;
                coll_algo best_a = COLL_ALGO_AUTO;
                for (int a = 1; a < COLL_ALGO_COUNT; a++) {
                    if (!coll_algo_supported(ops[oi], (coll_algo)a))
                        continue;
                    double t = sim_ps(s, ops[oi], (coll_algo)a, sizes[si], NULL);
                    if (t >= 0 && t < best) {
                        best = t;
                        best_a = (coll_algo)a;
                    }
                }
                coll_algo chose;
                double t = sim_ps(s, ops[oi], COLL_ALGO_AUTO, sizes[si], &chose);
                checked++;
                worst = fmax(worst, t / best);
                if (t > 1.05 * best) {
                    bad++;
                    fprintf(stderr, "%s, %s, %llu B: auto chose %s (%.3f us), %s takes %.3f us "
                            "(%.1f%% slower)\n", topos[ti].name, coll_op_name(ops[oi]),
                            (unsigned long long)sizes[si], coll_algo_name(chose), t / 1e6,
                            coll_algo_name(best_a), best / 1e6, (t / best - 1) * 100);
                }
            }
        coll_sys_free(s);
        evq_free(q);
    }
    fprintf(stderr, "auto vs best over %d cases: worst %.2f%% slower\n", checked,
            (worst - 1) * 100);
    CU_ASSERT_EQUAL(checked, 10 * 6 * 6);
    CU_ASSERT_EQUAL(bad, 0);
}

TEST(the_tuner_picks_the_hierarchical_all_reduce_on_islands_and_remembers_its_answers)
{
    /* the case: a100-cluster, 16 chips (two islands of 8), 64 MiB: a flat ring
     * crosses the 25 GB/s scale-out network; the two-level ring keeps most bytes on NVLink */
    arch_config cfg;
    np_err e = {0};
    const char *sets[] = {"system.chips=16"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("a100-cluster", sets, 1, &cfg, &e), NP_OK);
    evq *q;
    coll_sys *s;
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(coll_sys_create(&cfg, NULL, q, NULL, &s, &e), NP_OK);
    coll_tuner *t = coll_sys_tuner(s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    coll_tune_query tq = {.op = COLL_OP_ALL_REDUCE, .ranks = 16, .bytes = 64 << 20};
    coll_algo a;
    double ps;
    CU_ASSERT_EQUAL(coll_tune(t, &tq, &a, &ps, &e), NP_OK);
    CU_ASSERT_EQUAL(a, COLL_ALGO_HIER);
    double ring_ps, hier_ps;
    CU_ASSERT_EQUAL(coll_tune_cost(t, &tq, COLL_ALGO_RING, &ring_ps, &e), NP_OK);
    CU_ASSERT_EQUAL(coll_tune_cost(t, &tq, COLL_ALGO_HIER, &hier_ps, &e), NP_OK);
    CU_ASSERT_DOUBLE_EQUAL(ps, hier_ps, 1e-6 * hier_ps);
    CU_ASSERT_TRUE(hier_ps < ring_ps / 4);
    /* the simulated times agree with the choice, and the model is near them */
    double sim_ring = sim_ps(s, COLL_OP_ALL_REDUCE, COLL_ALGO_RING, 64 << 20, NULL);
    double sim_hier = sim_ps(s, COLL_OP_ALL_REDUCE, COLL_ALGO_HIER, 64 << 20, NULL);
    CU_ASSERT_TRUE(sim_hier < sim_ring / 4);
    CU_ASSERT_DOUBLE_EQUAL(ring_ps, sim_ring, 0.05 * sim_ring);
    CU_ASSERT_DOUBLE_EQUAL(hier_ps, sim_hier, 0.05 * sim_hier);
    /* a run engine asks for every collective of a step: answers come from the memo */
    uint64_t computed, memo;
    coll_tuner_stats(t, &computed, &memo);
    for (int i = 0; i < 5000; i++) {
        tq.bytes = (uint64_t)(i % 10 + 1) << 20;
        CU_ASSERT_EQUAL(coll_tune(t, &tq, &a, NULL, &e), NP_OK);
    }
    uint64_t computed2, memo2;
    coll_tuner_stats(t, &computed2, &memo2);
    CU_ASSERT_EQUAL(computed2 - computed, 10);
    CU_ASSERT_EQUAL(memo2 - memo, 4990);
    /* bad groups are errors */
    uint32_t far[] = {0, 99};
    coll_tune_query bad = {.op = COLL_OP_ALL_REDUCE, .chips = far, .ranks = 2, .bytes = 64};
    CU_ASSERT_EQUAL(coll_tune(t, &bad, &a, NULL, &e), NP_ERR_RANGE);
    coll_sys_free(s);
    evq_free(q);
}
