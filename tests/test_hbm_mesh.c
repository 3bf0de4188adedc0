/* test_hbm_mesh.c — HBM controllers on the mesh: memory accesses between controllers and
 * endpoints (noc/mesh.h "memory controllers and accesses") and the DMA copies that become
 * them (hw-model/hbm_mesh.h, chip.hbm_controllers).
 *
 * References, each computed by hand in the comment beside it:
 *   - a lone access: the request's and the data's zero-load head latencies h = (H + 1)(P + L)
 *     + L, the memory's latency and the flits at the rate of the tightest of controller
 *     bandwidth, port and cap: 2h + access + ceil(F / r) - 1 cycles;
 *   - sharing: k accesses through one controller of bandwidth W each get W / k; two flows
 *     whose XY routes share one router output each get half a flit per cycle;
 *   - ownership: channel = addr / interleave mod channels, controller = channel mod C;
 *   - without controllers (the default) every figure of the other tests is unchanged (they
 *     run with chip.hbm_controllers = 0).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "core.h"
#include "harness.h"
#include "hbm_mesh.h"
#include "isa_asm.h"
#include "mesh.h"

/* ---- the mesh's accesses, stepped by hand ------------------------------------------------ */

typedef struct done_log {
    mesh *m;
    uint64_t cycle[16]; /* completion cycle by tag */
    int n;
} done_log;

static void on_done(void *ctx, uint64_t tag)
{
    done_log *d = ctx;
    d->cycle[tag] = mesh_cycle(d->m);
    d->n++;
}

static mesh *new_mesh(uint32_t kx, uint32_t ky, mesh_mode mode, done_log *d)
{
    mesh_params p = {.kx = kx, .ky = ky, .vcs = 2, .buf_flits = 8, .router_cycles = 2,
                     .link_cycles = 1, .mode = mode};
    mesh *m = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(mesh_create(&p, NULL, NULL, &m, &e), NP_OK);
    *d = (done_log){.m = m};
    mesh_set_access_done(m, on_done, d);
    return m;
}

static void run_mesh(mesh *m)
{
    for (int i = 0; i < 1000000 && !mesh_idle(m); i++)
        mesh_step(m);
    np_err e = {0};
    CU_ASSERT_TRUE(mesh_idle(m));
    CU_ASSERT_EQUAL(mesh_verify(m, &e), NP_OK);
}

TEST(a_lone_read_or_write_takes_both_head_latencies_the_access_and_its_flits_in_both_modes)
{
    for (int mode = 0; mode < MESH_MODE_COUNT; mode++)
        for (int write = 0; write < 2; write++) {
            done_log d;
            mesh *m = new_mesh(4, 4, (mesh_mode)mode, &d);
            np_err e = {0};
            /* controllers at routers 0 (1 flit/cycle) and 15 (0.5 flit/cycle) */
            CU_ASSERT_EQUAL_FATAL(mesh_add_controller(m, 0, 1.0, &e), NP_OK);
            CU_ASSERT_EQUAL_FATAL(mesh_add_controller(m, 15, 0.5, &e), NP_OK);
            CU_ASSERT_EQUAL(mesh_controllers(m), 2u);
            CU_ASSERT_EQUAL(mesh_controller_router(m, 1), 15u);
            /* node 5 = (1, 1) is H = 2 hops from router 0: h = 3 x (2 + 1) + 1 = 10;
             * 100 flits at 1 per cycle, access 50: 2 x 10 + 50 + 100 - 1 = 169 */
            mesh_access a = {.ctrl = 0, .node = 5, .write = write, .flits = 100,
                             .cap = INFINITY, .access_cycles = 50, .tag = 0};
            CU_ASSERT_EQUAL_FATAL(mesh_access_start(m, &a, &e), NP_OK);
            run_mesh(m);
            CU_ASSERT_EQUAL(d.cycle[0], 169u);
            /* node 5 is H = 4 hops from router 15: h = 5 x 3 + 1 = 16; at the controller's
             * 0.5 flit/cycle: 2 x 16 + 50 + 200 - 1 = 281 cycles after its start */
            uint64_t t0 = mesh_cycle(m);
            a = (mesh_access){.ctrl = 1, .node = 5, .write = write, .flits = 100,
                              .cap = INFINITY, .access_cycles = 50, .tag = 1};
            CU_ASSERT_EQUAL_FATAL(mesh_access_start(m, &a, &e), NP_OK);
            run_mesh(m);
            CU_ASSERT_EQUAL(d.cycle[1] - t0, 281u);
            /* its own cap of 0.25 flit/cycle: 2 x 10 + 50 + 400 - 1 = 469 */
            t0 = mesh_cycle(m);
            a = (mesh_access){.ctrl = 0, .node = 5, .write = write, .flits = 100, .cap = 0.25,
                              .access_cycles = 50, .tag = 2};
            CU_ASSERT_EQUAL_FATAL(mesh_access_start(m, &a, &e), NP_OK);
            run_mesh(m);
            CU_ASSERT_EQUAL(d.cycle[2] - t0, 469u);
            mesh_mem_stats s;
            mesh_mem_get_stats(m, &s);
            CU_ASSERT_EQUAL(s.accesses, 3u);
            CU_ASSERT_EQUAL(s.completed, 3u);
            CU_ASSERT_DOUBLE_EQUAL(s.flits, 300, 1e-6);
            CU_ASSERT_DOUBLE_EQUAL(s.ctrl_bound_flits, 200, 1e-6); /* the first two: ties at 1
                                                                      name the controller */
            CU_ASSERT_DOUBLE_EQUAL(s.cap_bound_flits, 100, 1e-6);
            CU_ASSERT_DOUBLE_EQUAL(s.mesh_bound_flits, 0, 1e-6);
            mesh_ctrl_stats c;
            mesh_controller_stats(m, 0, &c);
            CU_ASSERT_DOUBLE_EQUAL(write ? c.write_flits : c.read_flits, 200, 1e-9);
            CU_ASSERT_DOUBLE_EQUAL(write ? c.read_flits : c.write_flits, 0, 1e-9);
            mesh_free(m);
        }
}

TEST(k_reads_through_one_controller_get_a_kth_of_its_bandwidth_each)
{
    for (int mode = 0; mode < MESH_MODE_COUNT; mode++) {
        done_log d;
        mesh *m = new_mesh(3, 3, (mesh_mode)mode, &d);
        np_err e = {0};
        /* a controller of 0.6 flit/cycle at the centre; its four neighbours read 150 flits
         * each: 0.15 per cycle each (below the port's 1 / 4), 1000 cycles of flow; h = 7:
         * the data starts at 7 + 10, its flow ends at 1017, the last flit arrives at
         * 1016 + 7 = 1023 */
        CU_ASSERT_EQUAL_FATAL(mesh_add_controller(m, 4, 0.6, &e), NP_OK);
        uint32_t nodes[4] = {1, 3, 5, 7};
        for (uint32_t i = 0; i < 4; i++) {
            mesh_access a = {.ctrl = 0, .node = nodes[i], .flits = 150, .cap = INFINITY,
                             .access_cycles = 10, .tag = i};
            CU_ASSERT_EQUAL_FATAL(mesh_access_start(m, &a, &e), NP_OK);
        }
        run_mesh(m);
        CU_ASSERT_EQUAL(d.n, 4);
        for (int i = 0; i < 4; i++)
            CU_ASSERT_EQUAL(d.cycle[i], 1023u);
        mesh_mem_stats s;
        mesh_mem_get_stats(m, &s);
        CU_ASSERT_DOUBLE_EQUAL(s.ctrl_bound_flits, 600, 1e-6);
        CU_ASSERT_DOUBLE_EQUAL(s.mesh_bound_flits + s.port_bound_flits + s.cap_bound_flits, 0,
                               1e-6);
        /* with a 2-flit/cycle controller its port (1 flit/cycle) is the bound: 0.25 each,
         * 600 cycles: 17 + 600 - 1 + 7 = 623 cycles after the start */
        mesh_ctrl_stats c0;
        mesh_controller_stats(m, 0, &c0);
        CU_ASSERT_DOUBLE_EQUAL(c0.read_flits, 600, 1e-9);
        CU_ASSERT_EQUAL_FATAL(mesh_add_controller(m, 4, 2.0, &e), NP_OK);
        uint64_t t0 = mesh_cycle(m);
        for (uint32_t i = 0; i < 4; i++) {
            mesh_access a = {.ctrl = 1, .node = nodes[i], .flits = 150, .cap = INFINITY,
                             .access_cycles = 10, .tag = 4 + i};
            CU_ASSERT_EQUAL_FATAL(mesh_access_start(m, &a, &e), NP_OK);
        }
        run_mesh(m);
        for (int i = 4; i < 8; i++)
            CU_ASSERT_EQUAL(d.cycle[i] - t0, 623u);
        mesh_mem_get_stats(m, &s);
        CU_ASSERT_DOUBLE_EQUAL(s.port_bound_flits, 600, 1e-6);
        mesh_free(m);
    }
}

TEST(two_controllers_whose_xy_routes_share_a_router_output_get_half_a_flit_each)
{
    done_log d;
    mesh *m = new_mesh(4, 1, MESH_MODE_FLOW, &d);
    np_err e = {0};
    /* controllers of 2 flits/cycle at routers 0 and 1; router 0 reads to node 2 over r0.xplus,
     * r1.xplus, r2's ejection; router 1 to node 3 over r1.xplus, r2.xplus, r3's ejection:
     * r1.xplus carries both, 0.5 each. Both h = 3 x 3 + 1 = 10; 128 flits: 10 + 100 + 256 - 1
     * + 10 = 375; alone 10 + 100 + 127 + 10 = 247 */
    CU_ASSERT_EQUAL_FATAL(mesh_add_controller(m, 0, 2.0, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(mesh_add_controller(m, 1, 2.0, &e), NP_OK);
    mesh_access a = {.ctrl = 0, .node = 2, .flits = 128, .cap = INFINITY, .access_cycles = 100,
                     .tag = 0};
    mesh_access b = {.ctrl = 1, .node = 3, .flits = 128, .cap = INFINITY, .access_cycles = 100,
                     .tag = 1};
    CU_ASSERT_EQUAL_FATAL(mesh_access_start(m, &a, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(mesh_access_start(m, &b, &e), NP_OK);
    run_mesh(m);
    CU_ASSERT_EQUAL(d.cycle[0], 375u);
    CU_ASSERT_EQUAL(d.cycle[1], 375u);
    CU_ASSERT_DOUBLE_EQUAL(mesh_link_bound_flits(m, 1, MESH_PORT_XPLUS), 256, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(mesh_link_bound_flits(m, 2, MESH_PORT_XPLUS), 0, 1e-6);
    mesh_mem_stats s;
    mesh_mem_get_stats(m, &s);
    CU_ASSERT_DOUBLE_EQUAL(s.mesh_bound_flits, 256, 1e-6);
    /* every router output counts the flits that crossed it */
    CU_ASSERT_EQUAL(mesh_link_flits(m, 1, MESH_PORT_XPLUS), 256u);
    CU_ASSERT_EQUAL(mesh_link_flits(m, 0, MESH_PORT_XPLUS), 128u);
    CU_ASSERT_EQUAL(mesh_link_flits(m, 3, MESH_PORT_LOCAL), 128u);
    uint64_t t0 = mesh_cycle(m);
    a.tag = 2;
    CU_ASSERT_EQUAL_FATAL(mesh_access_start(m, &a, &e), NP_OK);
    run_mesh(m);
    CU_ASSERT_EQUAL(d.cycle[2] - t0, 247u);
    mesh_free(m);
}

TEST(in_flow_mode_accesses_and_messages_share_the_links)
{
    done_log d;
    mesh *m = new_mesh(4, 1, MESH_MODE_FLOW, &d);
    np_err e = {0};
    /* a write of 200 flits from node 0 to a controller at router 3 (r0 injection, r0.xplus,
     * r1.xplus, r2.xplus, the controller's port) and a 200-flit message 1 -> 2 (r1 injection,
     * r1.xplus, r2's ejection) share r1.xplus: 0.5 each, 400 cycles. h(0 -> 3) = 4 x 3 + 1 =
     * 13: the write completes at 399 + 13 + 20 + 13 = 445. Alone it would be 199 + 46 = 245. */
    CU_ASSERT_EQUAL_FATAL(mesh_add_controller(m, 3, 1.0, &e), NP_OK);
    mesh_access w = {.ctrl = 0, .node = 0, .write = true, .flits = 200, .cap = INFINITY,
                     .access_cycles = 20, .tag = 0};
    CU_ASSERT_EQUAL_FATAL(mesh_access_start(m, &w, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(mesh_send(m, 1, 2, 200, 7, &e), NP_OK);
    run_mesh(m);
    CU_ASSERT_EQUAL(d.cycle[0], 445u);
    mesh_free(m);
}

TEST(a_controller_or_an_access_out_of_range_is_refused)
{
    done_log d;
    mesh *m = new_mesh(2, 2, MESH_MODE_FLIT, &d);
    np_err e = {0};
    CU_ASSERT_EQUAL(mesh_add_controller(m, 4, 1.0, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "router 4"));
    CU_ASSERT_EQUAL(mesh_add_controller(m, 0, 0.0, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL(mesh_controllers(m), 0u);
    mesh_access a = {.ctrl = 0, .node = 1, .flits = 1, .cap = INFINITY};
    CU_ASSERT_EQUAL(mesh_access_start(m, &a, &e), NP_ERR_RANGE);
    CU_ASSERT_EQUAL_FATAL(mesh_add_controller(m, 0, 1.0, &e), NP_OK);
    a.node = 9;
    CU_ASSERT_EQUAL(mesh_access_start(m, &a, &e), NP_ERR_RANGE);
    a.node = 1;
    a.flits = 0;
    CU_ASSERT_EQUAL(mesh_access_start(m, &a, &e), NP_ERR_RANGE);
    CU_ASSERT_TRUE(mesh_idle(m));
    CU_ASSERT_EQUAL(mesh_verify(m, &e), NP_OK);
    mesh_free(m);
}

/* ---- DMA copies over the mesh --------------------------------------------------------------- */

/* tiny with sets[0 .. n) */
static arch_config tiny_with(const char *const *sets, size_t n)
{
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, n, &cfg, &e), NP_OK);
    return cfg;
}

static core_report *run(const arch_config *cfg, const char *src)
{
    isa_target t;
    isa_target_from_arch(cfg, &t);
    isa_asm_opts o = {.target = &t};
    isa_program *p = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(isa_asm(src, strlen(src), "test.s", &o, &p, &e), NP_OK);
    core_report *r = NULL;
    CU_ASSERT_EQUAL_FATAL(core_sim_run(cfg, p, NULL, &r, &e), NP_OK);
    isa_program_free(p);
    return r;
}

static const core_unit_report *unit(const core_report *r, const char *name)
{
    for (uint32_t i = 0; i < r->n_units; i++)
        if (!strcmp(r->units[i].name, name))
            return &r->units[i];
    CU_FAIL_FATAL("no such unit");
    return NULL;
}

TEST(controllers_sit_where_the_placement_puts_them_and_own_every_other_channel)
{
    const char *edges[] = {"chip.mesh_x=4", "chip.mesh_y=4", "chip.hbm_channels=8",
                           "chip.hbm_controllers=5"};
    arch_config cfg = tiny_with(edges, 4);
    /* west (x = 0) gets 3 at rows floor((2k + 1) x 4 / 6) = 0, 2, 3; east 2 at rows 1, 3 */
    uint32_t want[5] = {0, 7, 8, 15, 12};
    for (uint32_t j = 0; j < 5; j++)
        CU_ASSERT_EQUAL(hbm_mesh_router(&cfg, j), want[j]);
    /* 8 channels over 5 controllers: 0 and 5, 1 and 6, 2 and 7, 3, 4 -> 2, 2, 2, 1, 1 x 2 GB/s */
    CU_ASSERT_DOUBLE_EQUAL(hbm_mesh_ctrl_gb_per_s(&cfg, 0), 4.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(hbm_mesh_ctrl_gb_per_s(&cfg, 3), 2.0, 1e-12);
    const char *stride[] = {"chip.mesh_x=4", "chip.mesh_y=4", "chip.hbm_channels=8",
                            "chip.hbm_controllers=3", "chip.hbm_placement=stride",
                            "chip.hbm_controller_router=14", "chip.hbm_controller_stride=5"};
    cfg = tiny_with(stride, 7);
    CU_ASSERT_EQUAL(hbm_mesh_router(&cfg, 0), 14u);
    CU_ASSERT_EQUAL(hbm_mesh_router(&cfg, 1), 3u); /* 19 mod 16 */
    CU_ASSERT_EQUAL(hbm_mesh_router(&cfg, 2), 8u);
    /* a packed 1 KiB copy at 0x40 (64-byte interleave, 8 channels): units 1 .. 16 ->
     * channels 1..7, 0..7, 0; controller 0 owns 0, 3, 6: units 3, 6, 8, 11, 14, 16 = 384
     * bytes over channels 0, 3, 6 */
    core_range r = {.space = ISA_SPACE_HBM, .addr = 0x40, .extent = 1024, .bytes = 1024,
                    .planes = 1, .rows = 1, .row_stride = 1024, .row_bytes = 1024};
    double b[3];
    uint32_t ch[3];
    hbm_mesh_split(&cfg, &r, b, ch);
    CU_ASSERT_DOUBLE_EQUAL(b[0], 384, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(b[1], 384, 1e-9); /* channels 1, 4, 7: units 1, 4, 7, 9, 12, 15 */
    CU_ASSERT_DOUBLE_EQUAL(b[2], 256, 1e-9); /* channels 2, 5: units 2, 5, 10, 13 */
    CU_ASSERT_EQUAL(ch[0], 3u);
    CU_ASSERT_EQUAL(ch[1], 3u);
    CU_ASSERT_EQUAL(ch[2], 2u);
    /* 16 rows of 16 bytes every 512 bytes: all on channel 0, one 32-byte burst each */
    r = (core_range){.space = ISA_SPACE_HBM, .addr = 0, .bytes = 256, .planes = 1, .rows = 16,
                     .row_stride = 512, .row_bytes = 16, .extent = 15 * 512 + 16};
    hbm_mesh_split(&cfg, &r, b, ch);
    CU_ASSERT_DOUBLE_EQUAL(b[0], 512, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(b[1] + b[2], 0, 1e-9);
    CU_ASSERT_EQUAL(ch[0], 1u);
}

TEST(a_lone_copy_over_the_mesh_pays_the_round_trip_and_streams_at_the_hbm_rate)
{
    /* tiny: 16-byte flits at 1 GHz = the HBM's 16 B/cycle; router pipeline P = 2, links L = 1.
     * The memory's own latency is 100 - (2 x (2 + 2) - 1) = 93 cycles. Edges: controller 0 at
     * router 0 with core 0: h = (0 + 1) x 3 + 1 = 4; 4096 bytes = 256 flits:
     * 2 x 4 + 93 + 256 - 1 = 356, the time without the mesh */
    const char *one[] = {"chip.hbm_controllers=1"};
    arch_config cfg = tiny_with(one, 1);
    core_report *r = run(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 2048\n");
    CU_ASSERT_EQUAL(r->total_cycles, 356u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->busy_cycles, 356u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->stall_cycles, 0u);
    CU_ASSERT_EQUAL(r->n_hbm_ctrls, 1u);
    CU_ASSERT_EQUAL(r->hbm_ctrls[0].read_bytes, 4096u);
    CU_ASSERT_EQUAL(r->hbm_mesh_bytes, 4096u);
    CU_ASSERT_EQUAL(r->hbm_read_bytes, 4096u); /* the traffic totals are unchanged */
    core_report_free(r);
    /* core 1 at router 1: h = 7: 14 + 93 + 255 = 362 = 356 + 2 (P + L); a store the same */
    r = run(&cfg, ".core 1\ndma.copy hbm[0], spad[0], bf16, 2048\n");
    CU_ASSERT_EQUAL(r->total_cycles, 362u);
    CU_ASSERT_EQUAL(r->hbm_ctrls[0].write_bytes, 4096u);
    core_report_free(r);
    /* two controllers (router 0 and router 1, 8 B/cycle = 0.5 flit/cycle each) split the
     * 64-byte interleave: 2048 bytes each, 256 cycles; the far one sets the end: 362 */
    const char *two[] = {"chip.hbm_controllers=2"};
    cfg = tiny_with(two, 1);
    r = run(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 2048\n");
    CU_ASSERT_EQUAL(r->total_cycles, 362u);
    CU_ASSERT_EQUAL(r->hbm_ctrls[0].read_bytes, 2048u);
    CU_ASSERT_EQUAL(r->hbm_ctrls[1].read_bytes, 2048u);
    core_report_free(r);
}

TEST(one_controller_at_the_cores_router_leaves_every_single_core_dma_figure_unchanged)
{
    /* tiny's mesh carries a flit of 16 bytes a cycle, the HBM's rate: with the controller at
     * core 0's router the mesh is not the bottleneck and adds no hop, so each program of
     * test_core's DMA cases (bursts, channels, outstanding copies, descriptor setup, stores,
     * gathers, a copy and a vector op sharing the ports) takes the cycles it takes without the
     * mesh, unit by unit */
    static const struct { const char *set, *src; } cases[] = {
        {NULL, "dma.copy spad[0], hbm[0], bf16, 2048\ndma.copy hbm[0x1000], spad[0], bf16, 2048"},
        {NULL, "dma.copy spad[0], hbm[0], bf16, 8, 64, src_s1=64"},
        {NULL, "dma.copy spad[0], hbm[0], bf16, 8, 64"},
        {NULL, "dma.copy spad[0], hbm[0x10], bf16, 24"},
        {NULL, "dma.copy spad[0], hbm[0], bf16, 32, 16, src_s1=128"},
        {NULL, "dma.copy spad[0], hbm[0], bf16, 32, 16, src_s1=192"},
        {"core.dma_outstanding=4", "dma.copy spad[0], hbm[0], bf16, 2048\n"
         "dma.copy spad[0x1000], hbm[0x1000], bf16, 2048\ndma.copy spad[0x2000], hbm[0x2000], "
         "bf16, 2048\ndma.copy spad[0x3000], hbm[0x3000], bf16, 2048"},
        {"core.dma_outstanding=2", "dma.copy spad[0], hbm[0], bf16, 2048\n"
         "dma.copy spad[0x1000], hbm[0x1000], bf16, 2048\ndma.copy spad[0x2000], hbm[0x2000], "
         "bf16, 2048"},
        {"core.dma_setup_cycles=20", "dma.copy spad[0], hbm[0], bf16, 2048\n"
         "dma.copy spad[0x1000], hbm[0x1000], bf16, 2048"},
        {NULL, "dma.gather spad[0], hbm[0], spad[0x1000], fp32, 16, 8, 16"},
        {NULL, "dma.gather spad[0], hbm[0x10], spad[0x1000], fp32, 16, 8, 16"},
        {NULL, "dma.copy spad[0x4000], hbm[0], bf16, 1024\nvpu.add spad[0x800], spad[0], "
               "spad[0x100], 8, 16, bf16"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *off[2] = {cases[i].set, NULL}, *on[2] = {"chip.hbm_controllers=1", NULL};
        size_t n = cases[i].set ? 1 : 0;
        if (cases[i].set)
            on[1] = cases[i].set;
        arch_config a = tiny_with(off, n), b = tiny_with(on, n + 1);
        char src[512];
        snprintf(src, sizeof src, ".core 0\n%s\n", cases[i].src);
        core_report *ra = run(&a, src), *rb = run(&b, src);
        CU_ASSERT_EQUAL(rb->total_cycles, ra->total_cycles);
        if (rb->total_cycles != ra->total_cycles)
            fprintf(stderr, "case %zu: %llu with the controller, %llu without\n", i,
                    (unsigned long long)rb->total_cycles, (unsigned long long)ra->total_cycles);
        for (uint32_t u = 0; u < ra->n_units; u++) {
            CU_ASSERT_EQUAL(rb->units[u].busy_cycles, ra->units[u].busy_cycles);
            CU_ASSERT_EQUAL(rb->units[u].stall_cycles, ra->units[u].stall_cycles);
        }
        CU_ASSERT_EQUAL(rb->hbm_read_bytes, ra->hbm_read_bytes);
        CU_ASSERT_EQUAL(rb->hbm_limited_by_mesh, 0u);
        core_report_free(ra);
        core_report_free(rb);
    }
}

TEST(k_cores_streaming_through_one_controller_get_a_kth_of_its_bandwidth_and_say_so)
{
    /* 8 cores on a 3 x 3 mesh of 64-byte flits (4 x the HBM per link), one controller in the
     * centre (router 4, 16 B/cycle). Cores 1, 3, 5, 7 (one hop, h = 7) copy 4096 bytes each
     * at once: 4 B/cycle each, 1024 cycles: 2 x 7 + 93 + 1024 - 1 = 1130 (one HBM for
     * everybody, no mesh: 100 + 4 x 4096 / 16 = 1124: the hop there and back adds 6); alone
     * each would take 14 + 93 + 256 - 1 = 362, so 768 cycles of stall each. */
    const char *sets[] = {"chip.cores=8", "chip.mesh_x=3", "chip.mesh_y=3",
                          "chip.noc_flit_bytes=64", "chip.hbm_controllers=1",
                          "chip.hbm_placement=stride", "chip.hbm_controller_router=4"};
    arch_config cfg = tiny_with(sets, 7);
    const char *src = ".core 1\ndma.copy spad[0], hbm[0x0], bf16, 2048\n"
                      ".core 3\ndma.copy spad[0], hbm[0x1000], bf16, 2048\n"
                      ".core 5\ndma.copy spad[0], hbm[0x2000], bf16, 2048\n"
                      ".core 7\ndma.copy spad[0], hbm[0x3000], bf16, 2048\n";
    core_report *r = run(&cfg, src);
    CU_ASSERT_EQUAL(r->total_cycles, 1130u);
    const char *names[] = {"core1.dma", "core3.dma", "core5.dma", "core7.dma"};
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(unit(r, names[i])->busy_cycles, 362u);
        CU_ASSERT_EQUAL(unit(r, names[i])->stall_cycles, 768u);
    }
    /* all of it was the controller's doing; it was busy 16384 / 16 = 1024 of 1130 cycles */
    CU_ASSERT_EQUAL(r->hbm_mesh_bytes, 16384u);
    CU_ASSERT_EQUAL(r->hbm_limited_by_ctrl, 16384u);
    CU_ASSERT_EQUAL(r->hbm_limited_by_mesh, 0u);
    CU_ASSERT_EQUAL(r->hbm_ctrls[0].limited_bytes, 16384u);
    CU_ASSERT_DOUBLE_EQUAL(r->hbm_ctrls[0].util_pct, 100.0 * 1024 / 1130, 1e-9);
    json_t *j = core_report_json(r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(json_object_get(
                        j, "hbm_mesh"), "limited_bytes"), "controllers")), 16384);
    json_decref(j);
    core_report_free(r);
}

TEST(copies_from_two_controllers_whose_routes_share_a_link_are_mesh_bound)
{
    /* 4 cores in a row, 2 controllers at routers 0 and 1 (stride), 64 GB/s = 4 flits/cycle:
     * 2 per controller, above a link's 1. Core 2 reads channel 0 only (64-byte rows 128
     * apart: controller 0), core 3 channel 1 only (controller 1), 32 rows = 2048 bytes = 128
     * flits each, capped by their one channel at 32 B/cycle = 2 flits. Routes r0 -> r2 and
     * r1 -> r3 share r1.xplus: half a flit each, 256 cycles; h = 10 both:
     * 10 + 93 + 256 - 1 + 10 = 368 (alone 10 + 93 + 128 - 1 + 10 = 240) */
    const char *sets[] = {"chip.cores=4", "chip.mesh_x=4", "chip.hbm_gb_per_s=64",
                          "chip.hbm_controllers=2", "chip.hbm_placement=stride"};
    arch_config cfg = tiny_with(sets, 5);
    const char *src = ".core 2\ndma.copy spad[0], hbm[0x0], bf16, 32, 32, src_s1=128\n"
                      ".core 3\ndma.copy spad[0], hbm[0x40], bf16, 32, 32, src_s1=128\n";
    core_report *r = run(&cfg, src);
    CU_ASSERT_EQUAL(r->total_cycles, 368u);
    CU_ASSERT_EQUAL(unit(r, "core2.dma")->busy_cycles, 240u);
    CU_ASSERT_EQUAL(r->hbm_limited_by_mesh, 4096u);
    CU_ASSERT_STRING_EQUAL(r->hbm_busiest_link, "r1.xplus");
    CU_ASSERT_EQUAL(r->hbm_busiest_link_bytes, 4096u);
    CU_ASSERT_EQUAL(r->hbm_ctrls[0].read_bytes, 2048u);
    CU_ASSERT_EQUAL(r->hbm_ctrls[1].read_bytes, 2048u);
    core_report_free(r);
    /* core 3 alone: 240 */
    r = run(&cfg, ".core 3\ndma.copy spad[0], hbm[0x40], bf16, 32, 32, src_s1=128\n");
    CU_ASSERT_EQUAL(r->total_cycles, 240u);
    core_report_free(r);
}

TEST(too_many_controllers_or_a_controller_off_the_mesh_is_a_config_error)
{
    np_err e = {0};
    arch_config cfg;
    const char *many[] = {"chip.hbm_controllers=3"}; /* tiny has 2 channels */
    CU_ASSERT_EQUAL(arch_resolve("tiny", many, 1, &cfg, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "chip.hbm_channels"));
    const char *off[] = {"chip.hbm_controllers=1", "chip.hbm_placement=stride",
                         "chip.hbm_controller_router=2"};
    CU_ASSERT_EQUAL(arch_resolve("tiny", off, 3, &cfg, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "chip.hbm_controller_router"));
}

TEST(a_layer_on_many_cores_reports_its_controller_and_mesh_contention)
{
    /* tpu-pod's 8 cores with 4 controllers on its 4 x 2 mesh of 64-byte flits: each
     * controller's port to its router carries one flit per cycle, 67 GB/s against its 300
     * GB/s of bandwidth, so the ports set the DMA's rate, and the report says so */
    harness_run h = harness_npusim("layer", "--arch", "tpu-pod", "--gemm", "512,512,512",
                                   "--cores", "8", "--set", "chip.hbm_controllers=4", "--json",
                                   NULL);
    CU_ASSERT_EQUAL_FATAL(h.exit_status, 0);
    json_error_t je;
    json_t *j = json_loads(h.out, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    json_t *hm = json_object_get(json_array_get(json_object_get(j, "layers"), 0), "hbm_mesh");
    CU_ASSERT_PTR_NOT_NULL_FATAL(hm);
    json_t *lim = json_object_get(hm, "limited_bytes");
    json_int_t bytes = json_integer_value(json_object_get(hm, "bytes"));
    json_int_t sum = json_integer_value(json_object_get(lim, "controllers")) +
                     json_integer_value(json_object_get(lim, "controller_ports")) +
                     json_integer_value(json_object_get(lim, "mesh_links")) +
                     json_integer_value(json_object_get(lim, "copies"));
    CU_ASSERT_TRUE(bytes > 0);
    CU_ASSERT_TRUE(llabs(sum - bytes) <= 8); /* every byte had one bound (rounding apart) */
    CU_ASSERT_TRUE(json_integer_value(json_object_get(lim, "controller_ports")) > bytes / 2);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(hm, "controllers")), 4u);
    json_decref(j);
    harness_run_free(&h);
}
