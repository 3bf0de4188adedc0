/* test_net_shape.c — the libraries behind `npusim collective`, called directly: a network
 * resized to a kind and a chip count (noc/net.h: net_params_shape), its inverse into an
 * architecture (net_params_to_arch), and a collective's ISA programs on the core model
 * (sim/coll_isa.h), against shapes and alpha-beta times worked by hand. */
#include <stdio.h>

#include "coll_isa.h"
#include "harness.h"
#include "net.h"

static net_params ns_params(const char *arch)
{
    arch_config cfg;
    np_err e;
    CU_ASSERT_EQUAL_FATAL(arch_resolve(arch, NULL, 0, &cfg, &e), NP_OK);
    net_params p;
    net_params_from_arch(&cfg, &p);
    return p;
}

TEST(a_torus_of_n_chips_is_the_most_square_or_most_cubic_one)
{
    np_err e;
    net_params p = ns_params("tpu-pod");
    CU_ASSERT_EQUAL_FATAL(net_params_shape(&p, "torus2d", 12, "--topology", &e), NP_OK);
    CU_ASSERT_EQUAL(p.chips, 12); /* 3 x 4, not 2 x 6 or 1 x 12 */
    CU_ASSERT_EQUAL(p.dims[0], 3);
    CU_ASSERT_EQUAL(p.dims[1], 4);
    CU_ASSERT_EQUAL(p.dims[2], 1);
    CU_ASSERT(p.links_per_chip >= 4);
    p = ns_params("tpu-pod");
    CU_ASSERT_EQUAL_FATAL(net_params_shape(&p, "torus3d", 24, "--topology", &e), NP_OK);
    CU_ASSERT_EQUAL(p.dims[0], 2); /* 2 x 3 x 4: z - x = 2, the least of 24's */
    CU_ASSERT_EQUAL(p.dims[1], 3);
    CU_ASSERT_EQUAL(p.dims[2], 4);
    CU_ASSERT(p.links_per_chip >= 6);
    /* dimensions given: their product is the chip count */
    p = ns_params("tpu-pod");
    CU_ASSERT_EQUAL_FATAL(net_params_shape(&p, "torus2d:2x8", 0, "--topology", &e), NP_OK);
    CU_ASSERT_EQUAL(p.chips, 16);
    CU_ASSERT_EQUAL(p.dims[0], 2);
    CU_ASSERT_EQUAL(p.dims[1], 8);
}

TEST(switches_and_fully_connected_systems_grow_to_the_chip_count)
{
    np_err e;
    net_params p = ns_params("tpu-pod");
    p.switch_radix = 8;
    CU_ASSERT_EQUAL_FATAL(net_params_shape(&p, "fat_tree", 200, "--topology", &e), NP_OK);
    CU_ASSERT_EQUAL(p.switch_radix, 32); /* 8, 16: 16^2/2 = 128 < 200; 32^2/2 = 512 */
    p = ns_params("tpu-pod");
    CU_ASSERT_EQUAL_FATAL(net_params_shape(&p, "fully_connected", 9, "--topology", &e), NP_OK);
    CU_ASSERT_EQUAL(p.links_per_chip, 8);
    p = ns_params("tpu-pod");
    CU_ASSERT_EQUAL_FATAL(net_params_shape(&p, "ring", 5, "--topology", &e), NP_OK);
    CU_ASSERT_EQUAL(p.dims[0], 5);
    CU_ASSERT_EQUAL(p.dims[1], 1);
}

TEST(islands_must_divide_the_chips_and_a_bad_kind_names_the_flag)
{
    np_err e;
    net_params p = ns_params("tpu-pod");
    CU_ASSERT_EQUAL(net_params_shape(&p, "hierarchical:8", 12, "--topology", &e), NP_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "12 chips are not whole islands of 8"));
    p = ns_params("tpu-pod");
    CU_ASSERT_EQUAL(net_params_shape(&p, "torus4d", 8, "--topology", &e), NP_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "--topology"));
}

TEST(a_network_written_into_an_architecture_reads_back_the_same)
{
    np_err e;
    net_params p = ns_params("tpu-pod");
    CU_ASSERT_EQUAL_FATAL(net_params_shape(&p, "torus3d:2x2x4", 0, "--topology", &e), NP_OK);
    arch_config cfg;
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", NULL, 0, &cfg, &e), NP_OK);
    net_params_to_arch(&p, &cfg);
    net_params q;
    net_params_from_arch(&cfg, &q);
    CU_ASSERT_EQUAL(q.topology, ARCH_TOPOLOGY_TORUS3D);
    CU_ASSERT_EQUAL(q.chips, 16);
    for (int d = 0; d < 3; d++)
        CU_ASSERT_EQUAL(q.dims[d], p.dims[d]);
    CU_ASSERT_EQUAL(q.links_per_chip, p.links_per_chip);
}

TEST(a_lowered_all_gather_takes_the_alpha_beta_time_and_moves_p_minus_1_buffers)
{
    /* tiny: one ring hop alpha = 200 ns, beta = 1 / 8 ns per byte; a ring all-gather of n
     * bytes over p = 4 chips: (p - 1) (alpha + n/p beta); every chip sends p - 1 segments */
    const char *sets[] = {"system.chips=4", "chip.cores=1"};
    arch_config cfg;
    np_err e;
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 2, &cfg, &e), NP_OK);
    uint64_t n = 4 * 65536;
    kgen_coll kc = {.op = KGEN_COLL_ALL_GATHER, .ranks = 4, .bytes = n, .dtype = ISA_DTYPE_FP32};
    coll_result r;
    core_report *rep = NULL;
    CU_ASSERT_EQUAL_FATAL(coll_isa_run(&cfg, &kc, NULL, NULL, &r, &rep, &e), NP_OK);
    double want_ns = 3 * (200 + 65536.0 / 8);
    CU_ASSERT_DOUBLE_EQUAL((double)r.t_end_ps / 1000.0, want_ns, want_ns * 0.01);
    CU_ASSERT_EQUAL(r.ranks, 4);
    CU_ASSERT_EQUAL(r.bytes_sent, 3 * n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rep);
    CU_ASSERT_EQUAL(rep->total_ps, r.t_end_ps);
    core_report_free(rep);
}
