/* test_coll_topo.c — collectives fitted to the topology (noc/coll_topo.h): rings embedded in
 * the torus (every step one link, checked by routing each step on the built network), levels
 * of the multi-level all-reduce, and the collective's time against alpha-beta with one-hop
 * (embedded) and multi-hop (rank order) rings. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "coll_topo.h"
#include "harness.h"

typedef struct topo_fix {
    arch_config cfg;
    net_params np;
    evq *q;
    coll_sys *s;
} topo_fix;

static void topo_open(topo_fix *f, arch_topology t, uint32_t x, uint32_t y, uint32_t z)
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
    f->np.links_per_chip = 2 * ((x > 1) + (y > 1) + (z > 1));
    CU_ASSERT_EQUAL_FATAL(evq_create(&f->q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(coll_sys_create(&f->cfg, &f->np, f->q, NULL, &f->s, &e), NP_OK);
}

static void topo_close(topo_fix *f)
{
    coll_sys_free(f->s);
    evq_free(f->q);
}

/* The ring order of chips[0 .. p) on f's network: the number of steps (of p, the closing one
 * included) longer than one link; -1 if the order is not a permutation. */
static int multi_hop_steps(topo_fix *f, const uint32_t *chips, uint32_t p)
{
    net *n = coll_sys_net(f->s);
    uint32_t *order = malloc(p * sizeof *order);
    uint8_t *seen = calloc(p, 1);
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(coll_topo_ring_order(n, chips, p, order, &e), NP_OK);
    int bad = 0;
    for (uint32_t k = 0; k < p; k++) {
        if (order[k] >= p || seen[order[k]]++) {
            bad = -1;
            break;
        }
        net_path_info pi;
        CU_ASSERT_EQUAL(net_route(n, chips[order[k]], chips[order[(k + 1) % p]], &pi, &e), NP_OK);
        bad += pi.n_links != 1;
    }
    free(order);
    free(seen);
    return bad;
}

static uint32_t *all_chips(uint32_t p)
{
    uint32_t *v = malloc(p * sizeof *v);
    for (uint32_t i = 0; i < p; i++)
        v[i] = i;
    return v;
}

TEST(a_ring_on_a_torus_has_no_multi_hop_neighbour)
{
    static const uint32_t shapes[][3] = {{4, 4, 1}, {3, 5, 1}, {5, 5, 1}, {2, 7, 1}, {8, 4, 1},
                                         {3, 3, 1}, {16, 16, 1}, {2, 2, 1}, {7, 1, 1},
                                         {3, 3, 3}, {4, 4, 4}, {2, 3, 5}, {5, 3, 2},
                                         {16, 16, 16}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const uint32_t *d = shapes[i];
        arch_topology t = d[2] > 1 ? ARCH_TOPOLOGY_TORUS3D
                          : d[1] > 1 ? ARCH_TOPOLOGY_TORUS2D : ARCH_TOPOLOGY_RING;
        topo_fix f;
        topo_open(&f, t, d[0], d[1], d[2]);
        uint32_t p = d[0] * d[1] * d[2], *chips = all_chips(p);
        int bad = multi_hop_steps(&f, chips, p);
        if (bad)
            fprintf(stderr, "%ux%ux%u: %d multi-hop steps\n", d[0], d[1], d[2], bad);
        CU_ASSERT_EQUAL(bad, 0);
        /* the same chips in a shuffled rank order: still one link a step */
        uint64_t x = 12345 + i;
        for (uint32_t k = p - 1; k > 0; k--) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            uint32_t j = (uint32_t)((x >> 33) % (k + 1)), tmp = chips[k];
            chips[k] = chips[j];
            chips[j] = tmp;
        }
        CU_ASSERT_EQUAL(multi_hop_steps(&f, chips, p), 0);
        free(chips);
        topo_close(&f);
    }
}

TEST(a_ring_on_a_box_of_the_torus_is_one_hop_whenever_the_box_has_a_hamiltonian_cycle)
{
    /* Inside an 8x8 torus, a box that wraps no dimension is a grid: it has a Hamiltonian
     * cycle when it has an even number of chips, and none when both sides are odd (a grid
     * is bipartite), where one step (the closing one) has to take more links. */
    topo_fix f;
    topo_open(&f, ARCH_TOPOLOGY_TORUS2D, 8, 8, 1);
    static const uint32_t boxes[][5] = {/* x0, y0, w, h, multi-hop steps */
                                        {2, 1, 4, 4, 0}, {6, 6, 2, 3, 0}, {1, 1, 3, 4, 0},
                                        {5, 2, 4, 3, 0}, {0, 0, 3, 3, 1}, {7, 0, 8, 3, 0}};
    for (size_t i = 0; i < sizeof boxes / sizeof *boxes; i++) {
        uint32_t chips[64], p = 0;
        for (uint32_t y = 0; y < boxes[i][3]; y++)
            for (uint32_t x = 0; x < boxes[i][2]; x++)
                chips[p++] = (boxes[i][0] + x) % 8 + 8 * ((boxes[i][1] + y) % 8);
        int bad = multi_hop_steps(&f, chips, p);
        if (bad != (int)boxes[i][4])
            fprintf(stderr, "box %ux%u at (%u,%u): %d multi-hop steps\n", boxes[i][2],
                    boxes[i][3], boxes[i][0], boxes[i][1], bad);
        CU_ASSERT_EQUAL(bad, (int)boxes[i][4]);
    }
    topo_close(&f);
}

TEST(an_embedded_ring_all_reduce_pays_one_hop_a_step_and_the_rank_order_ring_pays_its_detours)
{
    /* 4x4x4 torus, one link per neighbour: the embedded ring's steps are one link
     * (alpha = link latency). In rank order, a step from x = 3 to the next row takes two
     * links (12 of them) and from (3,3,z) to the next plane three (4 of them): 20 alpha more
     * round the ring. A rank waits only for its predecessor, so the extra latency is paid
     * along the chain of 2(p-1) = 126 consecutive hops the data travels: one lap (20 alpha)
     * and 62 more hops, which can start where they miss no slow hop but one lap's worth:
     * 40 alpha in all. */
    topo_fix f;
    topo_open(&f, ARCH_TOPOLOGY_TORUS3D, 4, 4, 4);
    double a = (double)f.np.link_latency_ps, b = 1e12 / f.np.link_bytes_per_s;
    double g = 1e12 / ((double)f.cfg.core.vector_lanes * f.cfg.core.vector_ops_per_lane *
                       f.cfg.core.clock_ghz * 1e9 * f.cfg.chip.cores * 4);
    double p = 64, n = 64.0 * 4096;
    coll_desc d = {.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_RING, .bytes = (uint64_t)n};
    coll_result r;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(coll_run(f.s, &d, &r, &e), NP_OK);
    double one = 2 * (p - 1) * (a + n / p * b) + (p - 1) * n / p * g;
    CU_ASSERT_DOUBLE_EQUAL((double)(r.t_end_ps - r.t_start_ps), one, one * 0.01);
    d.rank_order = true;
    CU_ASSERT_EQUAL_FATAL(coll_run(f.s, &d, &r, &e), NP_OK);
    double ranked = one + 40 * a;
    CU_ASSERT_DOUBLE_EQUAL((double)(r.t_end_ps - r.t_start_ps), ranked, ranked * 0.001);
    /* the 3D all-reduce: rings of 4 along x, then y, then z */
    d = (coll_desc){.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_HIER, .bytes = (uint64_t)n};
    CU_ASSERT_EQUAL_FATAL(coll_run(f.s, &d, &r, &e), NP_OK);
    double q = 4, want = 0, m = n;
    for (int lv = 0; lv < 2; lv++) { /* reduce-scatter and all-gather along x, then y */
        want += 2 * (q - 1) * (a + m / q * b) + (q - 1) * m / q * g;
        m /= q;
    }
    want += 2 * (q - 1) * (a + m / q * b) + (q - 1) * m / q * g; /* all-reduce along z */
    CU_ASSERT_DOUBLE_EQUAL((double)(r.t_end_ps - r.t_start_ps), want, want * 0.01);
    CU_ASSERT_TRUE(want < one);
    topo_close(&f);
}

TEST(levels_follow_islands_leaves_and_the_torus_box)
{
    np_err e = {0};
    uint32_t order[64], lv[COLL_MAX_LEVELS], nl;
    /* a 4x4x2 torus: levels 4, 4, 2; position x fastest */
    topo_fix f;
    topo_open(&f, ARCH_TOPOLOGY_TORUS3D, 4, 4, 2);
    uint32_t *chips = all_chips(32);
    CU_ASSERT_EQUAL(coll_topo_levels(coll_sys_net(f.s), chips, 32, &nl, lv, order, &e), NP_OK);
    CU_ASSERT_EQUAL(nl, 3);
    CU_ASSERT(lv[0] == 4 && lv[1] == 4 && lv[2] == 2);
    for (uint32_t i = 0; i < 32; i++)
        CU_ASSERT_EQUAL(order[i], i);
    /* a 2x4 box of it (x 1..2, y 0..3, z 1): levels 2, 4 */
    uint32_t box[8], k = 0;
    for (uint32_t y = 0; y < 4; y++)
        for (uint32_t x = 1; x <= 2; x++)
            box[k++] = x + 4 * y + 16;
    CU_ASSERT_EQUAL(coll_topo_levels(coll_sys_net(f.s), box, 8, &nl, lv, order, &e), NP_OK);
    CU_ASSERT(nl == 2 && lv[0] == 2 && lv[1] == 4);
    free(chips);
    topo_close(&f);
    /* 24 chips in islands of 8, the group every other chip: 4 per island, 3 islands */
    arch_config cfg;
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &cfg, &e), NP_OK);
    net_params np;
    net_params_from_arch(&cfg, &np);
    np.topology = ARCH_TOPOLOGY_HIERARCHICAL;
    np.chips = 24;
    np.island_chips = 8;
    evq *q;
    net *n;
    CU_ASSERT_EQUAL_FATAL(evq_create(&q, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(net_create(&np, q, NULL, &n, &e), NP_OK);
    uint32_t grp[12];
    for (uint32_t i = 0; i < 12; i++)
        grp[i] = 22 - 2 * i; /* in reverse chip order */
    CU_ASSERT_EQUAL(coll_topo_levels(n, grp, 12, &nl, lv, order, &e), NP_OK);
    CU_ASSERT(nl == 2 && lv[0] == 4 && lv[1] == 3);
    for (uint32_t pos = 0; pos < 12; pos++) /* islands in order, each island's chips together */
        CU_ASSERT_EQUAL(grp[order[pos]] / 8, pos / 4);
    /* uneven islands: no levels */
    grp[11] = 9; /* island 0 now has 3 of them, island 1 five */
    CU_ASSERT_EQUAL(coll_topo_levels(n, grp, 12, &nl, lv, order, &e), NP_OK);
    CU_ASSERT_EQUAL(nl, 0);
    net_free(n);
    evq_free(q);
}
