/* test_core.c — the timing-mode core (hw-model/core.h) running hand-written assembly on the
 * `tiny` preset (1 GHz, so a cycle is a nanosecond; HBM 16 GB/s = 16 bytes/cycle with 100 ns
 * latency; scratchpad 4 banks x 16 bytes/cycle; 4 x 4 array, ws; 4 vector lanes x 1 op).
 * Every expected figure is computed by hand in the comment beside it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "arch.h"
#include "core.h"
#include "core_cost.h"
#include "harness.h"
#include "isa_asm.h"
#include "mxu_timing.h"
#include "rng.h"

/* Assembles src for cfg and runs it; returns the status, *out the report (or NULL). */
static np_status run_src(const arch_config *cfg, const char *src, stats *reg, core_report **out,
                         np_err *e)
{
    isa_target t;
    isa_target_from_arch(cfg, &t);
    isa_asm_opts o = {.target = &t};
    isa_program *p = NULL;
    *out = NULL;
    np_status st = isa_asm(src, strlen(src), "test.s", &o, &p, e);
    CU_ASSERT_EQUAL_FATAL(st, NP_OK);
    st = core_sim_run(cfg, p, reg, out, e);
    isa_program_free(p);
    return st;
}

static arch_config tiny(const char *set)
{
    arch_config cfg;
    np_err e = {0};
    const char *sets[1] = {set};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, set ? 1 : 0, &cfg, &e), NP_OK);
    return cfg;
}

static const core_unit_report *unit(const core_report *r, const char *name)
{
    for (uint32_t i = 0; i < r->n_units; i++)
        if (!strcmp(r->units[i].name, name))
            return &r->units[i];
    CU_FAIL_FATAL("no such unit");
    return NULL;
}

TEST(a_dma_bound_program_takes_latency_plus_bytes_over_bandwidth)
{
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    /* 2048 bf16 = 4096 bytes: 100 ns latency + 4096 / 16 = 256 cycles -> 356 cycles. */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\n.kernel load\ndma.copy spad[0], hbm[0], bf16, 2048\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 356u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->busy_cycles, 356u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->idle_cycles, 0u);
    CU_ASSERT_EQUAL(unit(r, "core0.mxu")->idle_cycles, 356u);
    CU_ASSERT_EQUAL(r->hbm_read_bytes, 4096u);
    CU_ASSERT_EQUAL(r->sram_write_bytes, 4096u);
    CU_ASSERT_EQUAL_FATAL(r->n_kernels, 1u);
    CU_ASSERT_STRING_EQUAL(r->kernels[0].name, "load");
    CU_ASSERT_EQUAL(r->kernels[0].cycles, 356u);
    core_report_free(r);

    /* Two in a row serialize in the one DMA queue: 2 x 356 = 712. */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 2048\n"
                                        "dma.copy hbm[0x1000], spad[0], bf16, 2048\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 712u);
    CU_ASSERT_EQUAL(r->hbm_write_bytes, 4096u);
    core_report_free(r);

    /* With 1000 GB/s of HBM the scratchpad ports (4 x 16 = 64 B/cycle) bound it:
     * 100 + 4096 / 64 = 164. */
    arch_config fast = tiny("chip.hbm_gb_per_s=1000");
    CU_ASSERT_EQUAL_FATAL(run_src(&fast, ".core 0\ndma.copy spad[0], hbm[0], bf16, 2048\n", NULL,
                                  &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 164u);
    core_report_free(r);
}

TEST(concurrent_dma_from_two_cores_share_the_hbm_bandwidth)
{
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    /* Both stream 4096 bytes at 8 B/cycle each after the 100-cycle latency: 100 + 512. */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 2048\n"
                                        ".core 1\ndma.copy spad[0], hbm[0x8000], bf16, 2048\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 612u);
    /* Alone it would take 356: the other 256 cycles are contention, counted as stall. */
    CU_ASSERT_EQUAL(unit(r, "core1.dma")->busy_cycles, 356u);
    CU_ASSERT_EQUAL(unit(r, "core1.dma")->stall_cycles, 256u);
    core_report_free(r);
    /* Unequal: 1024 and 4096 bytes. Shared at 8 B/cycle until the small one is done at
     * 100 + 128; the big one has 4096 - 1024 = 3072 left, alone at 16: +192 -> 420. */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 512\n"
                                        ".core 1\ndma.copy spad[0], hbm[0x8000], bf16, 2048\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->busy_cycles, 164u); /* alone: 100 + 1024 / 16 */
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->stall_cycles, 228u - 164u);
    CU_ASSERT_EQUAL(r->total_cycles, 420u);
    core_report_free(r);
}

TEST(semaphores_order_the_mxu_after_the_dma_and_count_its_stall)
{
    /* semaphores alone (with the scoreboard the mxu.load, which reads what the copy writes,
     * would already wait: see the scoreboard tests) */
    arch_config cfg = tiny("core.scoreboard=0");
    core_report *r;
    np_err e = {0};
    /* Dispatch one per cycle: dma at 0 (done 356), signal visible at 357; mxu.load at 2 (0
     * cycles), sem.wait at 3 stalls until 357 (354 cycles); mxu.mm 8 x 4 x 4 on the 4 x 4 ws
     * array: one fold of 2R + C + T - 2 = 8 + 4 + 8 - 2 = 18 cycles -> ends at 375. */
    const char *src = ".core 0\n"
                      "dma.copy spad[0], hbm[0], bf16, 2048\n"
                      "sem.signal dma, s0\n"
                      "mxu.load spad[0], 4, 4, bf16\n"
                      "sem.wait mxu, s0\n"
                      "mxu.mm acc[0], spad[0x1000], 8, bf16\n";
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, src, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 375u);
    CU_ASSERT_EQUAL(unit(r, "core0.mxu")->busy_cycles, 18u);
    CU_ASSERT_EQUAL(unit(r, "core0.mxu")->stall_cycles, 354u);
    CU_ASSERT_EQUAL(unit(r, "core0.mxu")->idle_cycles, 375u - 18u - 354u);
    CU_ASSERT_EQUAL(unit(r, "core0.mxu")->insns, 3u);
    core_report_free(r);
}

TEST(mxu_instruction_time_equals_the_array_formula_for_every_dataflow)
{
    static const char *dfs[] = {"core.dataflow=os", "core.dataflow=ws", "core.dataflow=is"};
    static const unsigned shapes[][3] = {{8, 4, 4}, {13, 7, 5}, {1, 9, 17}, {30, 3, 11}};
    for (int d = 0; d < 3; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            arch_config cfg = tiny(dfs[d]);
            unsigned m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            char src[256];
            snprintf(src, sizeof src, ".core 0\nmxu.load spad[0], %u, %u, bf16\n"
                     "mxu.mm acc[0], spad[0x2000], %u, bf16\n", k, n, m);
            core_report *r;
            np_err e = {0};
            CU_ASSERT_EQUAL_FATAL(run_src(&cfg, src, NULL, &r, &e), NP_OK);
            mxu_array a;
            mxu_array_from_arch(&cfg, &a);
            CU_ASSERT_EQUAL(unit(r, "core0.mxu")->busy_cycles, mxu_gemm_cycles(&a, m, n, k));
            core_report_free(r);
        }
    /* By hand, ws 13 x 7 x 5 on 4 x 4: Sr = K = 5 -> 2 row folds, Sc = N = 7 -> 2 col folds,
     * T = M = 13: 4 x (8 + 4 + 13 - 2) = 92. fp32 at 0.25 MACs/PE/cycle streams T in 52:
     * 4 x (8 + 4 + 52 - 2) = 248. */
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\nmxu.load spad[0], 5, 7, bf16\n"
                                        "mxu.mm acc[0], spad[0x2000], 13, bf16\n"
                                        "mxu.load spad[0], 5, 7, fp32\n"
                                        "mxu.mm acc[0], spad[0x2000], 13, fp32\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(unit(r, "core0.mxu")->busy_cycles, 92u + 248u);
    core_report_free(r);
}

TEST(pipelined_folds_overlap_inside_an_mxu_mm_and_between_mxu_mm_back_to_back)
{
    /* ws 13 x 7 x 5 on the 4 x 4 array: Sr = K = 5 -> 2 row folds, Sc = N = 7 -> 2 column
     * folds, F = 4, T = M = 13. SCALE-Sim: 4 x (8 + 4 + 13 - 2) = 92. Pipelined (lead R = 4,
     * tail T + R + C - 2 = 19): without double-buffering a fold every T + R - 1 = 16 cycles,
     * 4 + 3 x 16 + 19 = 71; double-buffered every max(T, R) = 13, 4 + 39 + 19 = 62. */
    const char *one = ".core 0\nmxu.load spad[0], 5, 7, bf16\nmxu.mm acc[0], spad[0x2000], 13, bf16\n";
    static const struct {
        const char *set[3];
        uint64_t busy;
    } alone[] = {
        {{"core.mxu_pipelined_folds=0", NULL, NULL}, 92},
        {{"core.mxu_pipelined_folds=1", NULL, NULL}, 71},
        {{"core.mxu_pipelined_folds=1", "core.mxu_weight_double_buffer=1", NULL}, 62},
        /* os: Sr = M = 13 -> 4 row folds, Sc = 7 -> 2, F = 8, T = K = 5: a fold every
         * max(T, R) = 5, 7 x 5 + 5 + 4 + 4 - 2 = 46 (SCALE-Sim 8 x 11 = 88) */
        {{"core.mxu_pipelined_folds=1", "core.dataflow=os", NULL}, 46},
    };
    np_err e = {0};
    core_report *r;
    for (size_t i = 0; i < sizeof alone / sizeof alone[0]; i++) {
        arch_config cfg;
        unsigned n = alone[i].set[1] ? 2 : 1;
        CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", alone[i].set, n, &cfg, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(run_src(&cfg, one, NULL, &r, &e), NP_OK);
        CU_ASSERT_EQUAL(unit(r, "core0.mxu")->busy_cycles, alone[i].busy);
        core_report_free(r);
    }
    arch_config db;
    const char *dbset[] = {"core.mxu_pipelined_folds=1", "core.mxu_weight_double_buffer=1",
                           "chip.hbm_latency_ns=40"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", dbset, 3, &db, &e), NP_OK);
    /* Two back to back (dispatched at 1 and 2), double-buffered: the first 1 .. 63, its last
     * fold streaming from 1 + 4 + 3 x 13 = 44; the second's first fold streams
     * mxu_fold_gap(13, 13) = 13 later, at 57, and it ends at 57 + 39 + 19 = 115: 52 cycles,
     * F x T, every PE busy. */
    const char *two = ".core 0\nmxu.load spad[0], 5, 7, bf16\nmxu.mm acc[0], spad[0x2000], 13, bf16\n"
                      "mxu.mm acc[0x400], spad[0x2000], 13, bf16, mode=accum\n";
    CU_ASSERT_EQUAL_FATAL(run_src(&db, two, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 115u);
    CU_ASSERT_EQUAL(unit(r, "core0.mxu")->busy_cycles, 62u + 52u);
    core_report_free(r);
    /* The second's operand comes from a copy (256 bytes: 40 + 256 / 16 = 56, from cycle 0),
     * whose semaphore reaches the core at 57; the first mm runs 3 .. 65, its last fold from
     * 46. The second could stream at 46 + 13 = 59 but was ready only at 57 (+ its preload 4):
     * from 61 to 61 + 39 + 19 = 119. Without the semaphore the scoreboard holds it until the
     * copy completes at 56: from 60, to 118. */
    const char *dep = ".core 0\ndma.copy spad[0x3000], hbm[0], bf16, 128\nsem.signal dma, s0\n"
                      "mxu.load spad[0], 5, 7, bf16\nmxu.mm acc[0], spad[0x2000], 13, bf16\n"
                      "sem.wait mxu, s0\nmxu.mm acc[0x400], spad[0x3000], 13, bf16\n";
    CU_ASSERT_EQUAL_FATAL(run_src(&db, dep, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 119u);
    core_report_free(r);
    const char *sb = ".core 0\ndma.copy spad[0x3000], hbm[0], bf16, 128\n"
                     "mxu.load spad[0], 5, 7, bf16\nmxu.mm acc[0], spad[0x2000], 13, bf16\n"
                     "mxu.mm acc[0x400], spad[0x3000], 13, bf16\n";
    CU_ASSERT_EQUAL_FATAL(run_src(&db, sb, NULL, &r, &e), NP_OK);
    /* dispatched at 0, 1, 2, 3: the first mm 2 .. 64, last fold from 45, gap to 58; ready 56
     * + 4 = 60: 60 + 58 = 118 */
    CU_ASSERT_EQUAL(r->total_cycles, 118u);
    core_report_free(r);
    /* A drain between them ends the run of folds: 1 .. 63, the drain of 13 x 7 takes
     * ceil(91 / 4) = 23 (to 86), the second alone 62: 148. */
    const char *drain = ".core 0\nmxu.load spad[0], 5, 7, bf16\nmxu.mm acc[0], spad[0x2000], 13, bf16\n"
                        "mxu.drain spad[0x3000], acc[0], 13, 7, bf16\n"
                        "mxu.mm acc[0], spad[0x2000], 13, bf16\n";
    CU_ASSERT_EQUAL_FATAL(run_src(&db, drain, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 148u);
    core_report_free(r);
    /* An accumulator port of 4 B/cycle holds each mm for 13 x 7 x 4 / 4 = 91 cycles > 62: the
     * array drained before the first retired, so the second starts its own fill: 1 + 2 x 91. */
    arch_config port;
    const char *pset[] = {"core.mxu_pipelined_folds=1", "core.mxu_weight_double_buffer=1",
                          "core.acc_port_bytes_per_cycle=4"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", pset, 3, &port, &e), NP_OK);
    const char *two_set = ".core 0\nmxu.load spad[0], 5, 7, bf16\nmxu.mm acc[0], spad[0x2000], 13, bf16\n"
                          "mxu.mm acc[0x400], spad[0x2000], 13, bf16\n";
    CU_ASSERT_EQUAL_FATAL(run_src(&port, two_set, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 1u + 2u * 91u);
    core_report_free(r);
}

TEST(compare_select_iota_and_rand_take_vector_time_and_their_operands_bytes)
{
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    /* 8 x 16 bf16 = 128 elements (256 bytes a tile) at 4 lanes: 32 cycles for a compare (3
     * tiles: 768 bytes), vpu.sel (m, a, b, dst: 1024), vpu.sels (768), vpu.iota (256) and
     * vpu.dtanh (768); at the transcendental rate 4 x 0.25 = 1 element a cycle, 128 for
     * vpu.rand (256 bytes) and vpu.dgelu (768). Disjoint destinations, so nothing waits. */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\n"
                                        "li r2, 5\n"
                                        "vpu.cmplt spad[0], spad[0x1000], spad[0x2000], 8, 16, bf16\n"
                                        "vpu.sel spad[0x100], spad[0x1000], spad[0x2000], spad[0x3000], 8, 16, bf16\n"
                                        "vpu.sels spad[0x200], spad[0x1000], spad[0x2000], -1.5, 8, 16, bf16\n"
                                        "vpu.iota spad[0x300], r2+3, 16, 1, 8, 16, bf16\n"
                                        "vpu.dtanh spad[0x400], spad[0x1000], spad[0x2000], 8, 16, bf16\n"
                                        "vpu.rand spad[0x500], r2-5, 7, 0, 8, 16, bf16\n"
                                        "vpu.dgelu spad[0x600], spad[0x1000], spad[0x2000], 8, 16, bf16\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(unit(r, "core0.vpu")->busy_cycles, 5u * 32u + 2u * 128u);
    CU_ASSERT_EQUAL(unit(r, "core0.vpu")->bytes, (3u + 4u + 3u + 1u + 3u + 1u + 3u) * 256u);
    core_report_free(r);
}

TEST(vector_unit_time_is_elements_over_lanes_and_transcendentals_cost_more)
{
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    /* 8 x 16 bf16 = 128 elements / 4 lanes = 32 cycles (ports: 3 x 256 B / 64 = 12); exp:
     * 32 x 4 = 128 cycles. */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\nvpu.add spad[0], spad[0x1000], spad[0x2000], 8, 16, bf16\n"
                                        "vpu.exp spad[0], spad[0x1000], 8, 16, bf16\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(unit(r, "core0.vpu")->busy_cycles, 32u + 128u);
    CU_ASSERT_EQUAL(unit(r, "core0.vpu")->bytes, 3u * 256u + 2u * 256u);
    core_report_free(r);
    /* The transcendental rate is its own key: 0.5 op/lane/cycle -> 128 / 2 = 64 cycles for
     * vpu.exp and vpu.div alike, while vpu.add keeps 32; 5 x 5 = 25 elements of vpu.tanh at
     * the default 0.25 take ceil(25 / 1) = 25 cycles. */
    cfg = tiny("core.vector_transc_ops_per_lane=0.5");
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\nvpu.add spad[0], spad[0x1000], spad[0x2000], 8, 16, bf16\n"
                                        "vpu.exp spad[0], spad[0x1000], 8, 16, bf16\n"
                                        "vpu.div spad[0], spad[0x1000], spad[0x2000], 8, 16, bf16\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(unit(r, "core0.vpu")->busy_cycles, 32u + 64u + 64u);
    core_report_free(r);
    cfg = tiny(NULL);
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\nvpu.tanh spad[0], spad[0x1000], 5, 5, bf16\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(unit(r, "core0.vpu")->busy_cycles, 25u);
    core_report_free(r);
}

TEST(mixed_precision_vector_ops_take_the_vector_or_transcendental_rate)
{
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    /* 8 x 16 = 128 elements / 4 lanes = 32 cycles each for vpu.fma and vpu.rdot, 128 for
     * vpu.fexp. Ports (64 B/cycle) never bind: fma bf16 -> fp32 with row/col coefficients
     * and row sums moves 256 + 64 + 32 + 512 + 32 = 896 bytes (14 cycles); fexp with scalar
     * coefficients 256 + 4 + 4 + 512 = 776; rdot bf16 with b full 256 + 256 + 8 x 4. */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\n"
                                        "vpu.fma spad[0x4000], spad[0x1000], spad[0x2000], spad[0x3000], 8, 16, bf16, fp32, bb=row, cb=col, sum=spad[0x6000]\n"
                                        "vpu.fexp spad[0x4000], spad[0x1000], spad[0x2000], spad[0x3000], 8, 16, bf16, fp32, bb=scalar, cb=scalar\n"
                                        "vpu.rdot spad[0x4000], spad[0x1000], spad[0x2000], 8, 16, bf16, fp32\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(unit(r, "core0.vpu")->busy_cycles, 32u + 128u + 32u);
    CU_ASSERT_EQUAL(unit(r, "core0.vpu")->bytes, 896u + 776u + 544u);
    CU_ASSERT_EQUAL(r->total_cycles, 32u + 128u + 32u); /* back to back in the VPU queue */
    core_report_free(r);
}

TEST(indexed_copies_move_the_bursts_of_their_rows_and_a_reduction_reads_them_too)
{
    /* tiny: 100 ns latency, 16 B/cycle, 32-byte bursts, 2 channels every 64 bytes. A table of
     * 16 rows of 64 bytes (16 fp32) at hbm[0], rows 64 apart, so its footprint covers both
     * channels. */
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    struct { const char *copy; uint64_t cycles, hbm_rd, hbm_wr; } cases[] = {
        /* 8 rows into the scratchpad, indices there: 8 x 64 = 512 bytes, 2 bursts a row:
         * 100 + 512 / 16 = 132, as a packed 512-byte copy */
        {"dma.gather spad[0], hbm[0], spad[0x1000], fp32, 16, 8, 16", 132, 512, 0},
        /* the indices from HBM too: 32 more bytes, one burst: 100 + 544 / 16 = 134 */
        {"dma.gather spad[0], hbm[0], hbm[0x2000], fp32, 16, 8, 16", 134, 544, 0},
        /* a table at byte 16 is not burst-aligned: 3 bursts a row, 100 + 768 / 16 = 148 */
        {"dma.gather spad[0], hbm[0x10], spad[0x1000], fp32, 16, 8, 16", 148, 512, 0},
        /* a plain scatter writes 512 bytes; with add it reads them first: 100 + 1024 / 16 */
        {"dma.scatter hbm[0], spad[0], spad[0x1000], fp32, 16, 8, 16", 132, 0, 512},
        {"dma.scatter hbm[0], spad[0], spad[0x1000], fp32, 16, 8, 16, red=add", 164, 512, 512},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char src[160];
        snprintf(src, sizeof src, ".core 0\n%s\n", cases[i].copy);
        CU_ASSERT_EQUAL_FATAL(run_src(&cfg, src, NULL, &r, &e), NP_OK);
        CU_ASSERT_EQUAL(r->total_cycles, cases[i].cycles);
        CU_ASSERT_EQUAL(r->hbm_read_bytes, cases[i].hbm_rd);
        CU_ASSERT_EQUAL(r->hbm_write_bytes, cases[i].hbm_wr);
        core_report_free(r);
    }
    /* The scoreboard sees the whole table: a vpu.relu reading row 15 of a scratchpad table
     * waits for a scatter into it (16 rows of 16 bytes at spad[0]), though the scatter's
     * indices could be anything. The scatter from HBM: 100 + 8 x 16 / 16 = 108; the relu (4
     * elements, 1 cycle) starts when it completes: 108 + 1. */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\n"
                                        "dma.scatter spad[0], hbm[0], spad[0x1000], fp32, 4, 8, 16\n"
                                        "vpu.relu spad[0x2000], spad[0xf0], 1, 4, fp32\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 109u);
    CU_ASSERT_EQUAL(unit(r, "core0.vpu")->stall_cycles, 107u);
    core_report_free(r);
    /* An index table that reaches past the HBM is a fault at dispatch. */
    CU_ASSERT_EQUAL(run_src(&cfg, ".core 0\ndma.gather spad[0], hbm[0x3fffff0], spad[0x1000], fp32, 16, 1, 2\n",
                            NULL, &r, &e), NP_ERR_SIM_FAULT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "src range 0x3fffff0"));
}

TEST(loops_step_addresses_and_restore_registers)
{
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    /* Three 4096-byte loads at spad 0, 0x4000, 0x8000: 3 x 356; then r1 is back to 0, so the
     * last copy at r1 + 0xf000 fits (it would fault at 0x1b000 without the restore). */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\nli r1, 0\nloop 3, r1+=0x4000\n"
                                        "dma.copy spad[r1], hbm[0], bf16, 2048\nendloop\n"
                                        "dma.copy spad[r1+0xf000], hbm[0], bf16, 2048\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 2u + 4u * 356u); /* li and loop take a cycle each */
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->insns, 4u);
    core_report_free(r);
    /* Five iterations: the fifth starts at 0x10000, past the 64 KiB scratchpad. */
    np_status st = run_src(&cfg, ".core 0\nli r1, 0\nloop 5, r1+=0x4000\n"
                                 "dma.copy spad[r1], hbm[0], bf16, 2048\nendloop\n",
                           NULL, &r, &e);
    CU_ASSERT_EQUAL(st, NP_ERR_SIM_FAULT);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "core 0 dma pc 2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "0x10000"));
}

TEST(an_address_outside_its_space_is_a_fault_naming_unit_pc_and_address)
{
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    /* 16 bf16 = 32 bytes at 0xfff0 end at 0x10010 > 64 KiB. */
    np_status st = run_src(&cfg, ".core 0\nnop\ndma.copy spad[0xfff0], hbm[0], bf16, 16\n",
                           NULL, &r, &e);
    CU_ASSERT_EQUAL(st, NP_ERR_SIM_FAULT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "core 0 dma pc 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "0xfff0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "dma.copy"));
    /* HBM is 64 MiB. */
    st = run_src(&cfg, ".core 0\ndma.copy spad[0], hbm[0x4000000], bf16, 1\n", NULL, &r, &e);
    CU_ASSERT_EQUAL(st, NP_ERR_SIM_FAULT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "0x4000000"));
    /* Accumulators are 4 KiB: 32 x 16 fp32 = 2048... 64 x 16 x 4 = 4096 fits, 65 rows not. */
    st = run_src(&cfg, ".core 0\nmxu.load spad[0], 4, 16, bf16\nmxu.mm acc[0], spad[0], 65, bf16\n",
                 NULL, &r, &e);
    CU_ASSERT_EQUAL(st, NP_ERR_SIM_FAULT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "core 0 mxu pc 1"));
    st = run_src(&cfg, ".core 0\nmxu.mm acc[0], spad[0], 4, bf16\n", NULL, &r, &e);
    CU_ASSERT_EQUAL(st, NP_ERR_SIM_FAULT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "before any mxu.load"));
}

TEST(a_program_waiting_on_a_semaphore_nobody_signals_is_a_deadlock_naming_each_unit)
{
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    /* The DMA waits for s1, which the MXU signals only after s0, which the DMA signals only
     * after s1: a cycle. */
    const char *src = ".core 0\n"
                      "sem.wait dma, s1\n"
                      "sem.signal dma, s0\n"
                      "sem.wait mxu, s0, 2\n"
                      "sem.signal mxu, s1\n";
    np_status st = run_src(&cfg, src, NULL, &r, &e);
    CU_ASSERT_EQUAL(st, NP_ERR_DEADLOCK);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "core 0 dma: pc 0 `sem.wait dma, s1` waits on semaphore s1 (value 0, needs 1)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "core 0 mxu: pc 2 `sem.wait mxu, s0, n=2` waits on semaphore s0 (value 0, needs 2)"));
    /* A fence behind a stuck queue: the front end is named too. */
    st = run_src(&cfg, ".core 0\nsem.wait vpu, s7\nfence\nnop\n", NULL, &r, &e);
    CU_ASSERT_EQUAL(st, NP_ERR_DEADLOCK);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "core 0 vpu: pc 0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "core 0 ctrl: pc 1 `fence`"));
}

TEST(a_barrier_releases_all_cores_together)
{
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    /* The barrier travels the mesh (tiny: 2 x 1, P = 2, L = 1; a one-flit packet over one hop
     * takes (1 + 1)(2 + 1) + 1 = 7 cycles). Core 1 arrives at 0 and its flit reaches core 0
     * (the master) at 7. Core 0 loads 4096 bytes alone (356), arrives at 356: all are there;
     * it goes on at 357 and its release reaches core 1 at 356 + 7 = 363, which goes on at 364
     * and runs 8 x 16 / 4 = 32 vector cycles: 396. */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 2048\nbarrier 1\n"
                                        ".core 1\nbarrier 1\nvpu.relu spad[0], spad[0x1000], 8, 16, bf16\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 396u);
    CU_ASSERT_EQUAL(unit(r, "core1.ctrl")->stall_cycles, 363u);
    core_report_free(r);
    /* Three cores in a row (3 x 1 mesh), all at the barrier at 0: core 1's flit arrives at 7,
     * core 2's (two hops, 3 x 3 + 1 = 10) at 10, during the mesh's cycle 10, so the releases
     * leave router 0 in cycles 11 and 12 (one flit a cycle): core 1's arrives at 11 + 7 = 18,
     * core 2's at 12 + 10 = 22; core 0 goes on at 11, core 1 at 19, core 2 at 23. */
    const char *three[] = {"chip.cores=3", "chip.mesh_x=3"};
    arch_config cfg3;
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", three, 2, &cfg3, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg3, ".core 0\nbarrier 1\n.core 1\nbarrier 1\n.core 2\nbarrier 1\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 23u);
    CU_ASSERT_EQUAL(unit(r, "core0.ctrl")->stall_cycles, 10u);
    CU_ASSERT_EQUAL(unit(r, "core1.ctrl")->stall_cycles, 18u);
    CU_ASSERT_EQUAL(unit(r, "core2.ctrl")->stall_cycles, 22u);
    core_report_free(r);
    /* Different ids never meet. */
    CU_ASSERT_EQUAL(run_src(&cfg, ".core 0\nbarrier 1\n.core 1\nbarrier 2\n", NULL, &r, &e),
                    NP_ERR_DEADLOCK);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "barrier"));
}

TEST(unit_statistics_go_to_the_registry)
{
    arch_config cfg = tiny(NULL);
    stats *reg = stats_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(reg);
    core_report *r;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 2048\n", reg, &r,
                                  &e), NP_OK);
    stats_kind kind;
    stats_counter *c = stats_find(reg, "core0.dma.busy_cycles", &kind);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->value, 356u);
    stats_counter *b = stats_find(reg, "core0.dma.bytes", &kind);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(b->value, 8192u); /* 4096 read from HBM + 4096 written to the scratchpad */
    core_report_free(r);
    stats_free(reg);
}

TEST(npusim_sim_runs_an_elf_and_reports_json)
{
    char dir[] = "/tmp/npusim_core_XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    char s_path[256], elf_path[256];
    snprintf(s_path, sizeof s_path, "%s/p.s", dir);
    snprintf(elf_path, sizeof elf_path, "%s/p.elf", dir);
    FILE *f = fopen(s_path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(".core 0\n.kernel load\ndma.copy spad[0], hbm[0], bf16, 2048\n", f);
    fclose(f);
    harness_run a = harness_npusim("asm", s_path, "-o", elf_path, NULL);
    CU_ASSERT_EQUAL_FATAL(a.exit_status, 0);
    harness_run_free(&a);
    harness_run s = harness_npusim("sim", "--arch", "tiny", "--json", elf_path, NULL);
    CU_ASSERT_EQUAL(s.exit_status, 0);
    json_error_t je;
    json_t *j = json_loads(s.out, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "total_cycles")), 356);
    json_t *units = json_object_get(j, "units");
    CU_ASSERT_EQUAL(json_array_size(units), 5u); /* one core: dma, mxu, vpu, comm, ctrl */
    json_decref(j);
    harness_run_free(&s);
    /* Text output and a deadlock's exit status 3. */
    f = fopen(s_path, "w");
    fputs(".core 0\nsem.wait dma, s0\n", f);
    fclose(f);
    a = harness_npusim("asm", s_path, "-o", elf_path, NULL);
    harness_run_free(&a);
    s = harness_npusim("sim", elf_path, NULL);
    CU_ASSERT_EQUAL(s.exit_status, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(s.err, "sem.wait dma, s0"));
    harness_run_free(&s);
    /* Two programs run on chips 0 and 1: 64 bytes over one link, 200 + 64 / 8 = 208 cycles;
     * a third is more than tiny's 2 chips (usage error, status 2). */
    char elf1[256];
    snprintf(elf1, sizeof elf1, "%s/q.elf", dir);
    f = fopen(s_path, "w");
    fputs(".core 0\ncomm.send peer(1, 0), spad[0], 64, 3\n", f);
    fclose(f);
    a = harness_npusim("asm", s_path, "-o", elf_path, NULL);
    harness_run_free(&a);
    f = fopen(s_path, "w");
    fputs(".core 0\ncomm.recv peer(0, 0), spad[0], 64, 3\n", f);
    fclose(f);
    a = harness_npusim("asm", s_path, "-o", elf1, NULL);
    harness_run_free(&a);
    s = harness_npusim("sim", "--json", elf_path, elf1, NULL);
    CU_ASSERT_EQUAL(s.exit_status, 0);
    j = json_loads(s.out, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "total_cycles")), 208);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "chips")), 2);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(j, "traffic"), "c2c_bytes")), 64);
    units = json_object_get(j, "units");
    CU_ASSERT_EQUAL(json_array_size(units), 10u);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(units, 8), "name")),
                           "chip1.core0.comm");
    json_decref(j);
    harness_run_free(&s);
    s = harness_npusim("sim", elf_path, elf1, elf1, NULL);
    CU_ASSERT_EQUAL(s.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(s.err, "3 programs for a system of 2 chips"));
    harness_run_free(&s);
    /* --stats: the 64 bytes on the link chip 0 -> chip 1 (the ring's + way; the other way
     * round, "#1", carries nothing), and each unit's counters. */
    char st_path[256];
    snprintf(st_path, sizeof st_path, "%s/st.json", dir);
    s = harness_npusim("sim", "--stats", st_path, elf_path, elf1, NULL);
    CU_ASSERT_EQUAL(s.exit_status, 0);
    harness_run_free(&s);
    char *st_text = harness_read_file(st_path, NULL);
    j = st_text ? json_loads(st_text, 0, &je) : NULL;
    free(st_text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(json_object_get(
                        j, "c2c.chip0->chip1"), "bytes"), "value")), 64);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(json_object_get(
                        j, "c2c.chip0->chip1#1"), "bytes"), "value")), 0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(json_object_get(
                        j, "chip1.core0.comm"), "insns"), "value")), 1);
    json_decref(j);
    remove(st_path);
    remove(elf1);
    remove(s_path);
    remove(elf_path);
    rmdir(dir);
}

TEST(units_contend_for_the_scratchpad_ports_max_min_fairly)
{
    /* One bank: the ports move 16 B/cycle. HBM is fast (1000 B/cycle, no latency), so a DMA
     * is bound by the ports. The DMA (2048 B) starts at 0, the vector op at 1. */
    arch_config cfg;
    np_err e = {0};
    const char *sets[] = {"core.sram_banks=1", "chip.hbm_gb_per_s=1000", "chip.hbm_latency_ns=0"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 3, &cfg, &e), NP_OK);
    core_report *r;
    /* vpu.add 8 x 16 bf16: 32 compute cycles, 768 port bytes (capped at 768 / 32 = 24 B/cycle).
     * [0, 1): the DMA alone moves 16 B. Then both want more than half: 8 B/cycle each; the add
     * needs 96 cycles -> ends at 97; the DMA has 16 + 96 x 8 = 784 B, the other 1264 alone at
     * 16 take 79 cycles -> 176. (Alone: DMA 128, add 48.) */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 1024\n"
                                        "vpu.add spad[0x1000], spad[0x2000], spad[0x3000], 8, 16, bf16\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 176u);
    /* busy: what each needs alone (add: max(32, 768 / 16) = 48; DMA: 2048 / 16 = 128); the
     * rest of the time each waited for the ports: a stall. */
    CU_ASSERT_EQUAL(unit(r, "core0.vpu")->busy_cycles, 48u);
    CU_ASSERT_EQUAL(unit(r, "core0.vpu")->stall_cycles, 96u - 48u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->busy_cycles, 128u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->stall_cycles, 176u - 128u);
    core_report_free(r);
    /* vpu.exp 8 x 16 bf16: 128 compute cycles, 512 port bytes capped at 4 B/cycle, under its
     * fair share, so the DMA gets the other 12: by 129 it has 16 + 128 x 12 = 1552 B, the
     * last 496 alone take 31 -> 160; the exp ends at 1 + 128 = 129. */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 1024\n"
                                        "vpu.exp spad[0x1000], spad[0x2000], 8, 16, bf16\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(unit(r, "core0.vpu")->busy_cycles, 128u);
    CU_ASSERT_EQUAL(unit(r, "core0.vpu")->stall_cycles, 0u);
    CU_ASSERT_EQUAL(r->total_cycles, 160u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->stall_cycles, 160u - 128u);
    core_report_free(r);
}

TEST(hbm_rows_pay_whole_bursts_and_stream_at_the_rate_of_the_channels_they_touch)
{
    /* tiny: 32-byte bursts, 2 channels interleaved every 64 bytes, 16 B/cycle, 100 cycles. */
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    struct { const char *copy; uint64_t cycles; } cases[] = {
        /* 64 rows of 16 bytes, 64 bytes apart in HBM: each row moves one 32-byte burst,
         * 2048 bytes; channels 0, 1, 0, ...: 100 + 2048 / 16 = 228 */
        {"dma.copy spad[0], hbm[0], bf16, 8, 64, src_s1=64", 228},
        /* the same 1024 bytes packed: 32 whole bursts: 100 + 64 = 164 */
        {"dma.copy spad[0], hbm[0], bf16, 8, 64", 164},
        /* one 48-byte row at byte 16 touches bursts 0 and 1 (64 bytes), both within
         * channel 0's first 64 bytes: 100 + 64 / 8 = 108 */
        {"dma.copy spad[0], hbm[0x10], bf16, 24", 108},
        /* 16 rows of 64 bytes 128 apart all lie on channel 0 (addr / 64 even): half the
         * bandwidth, 100 + 1024 / 8 = 228 */
        {"dma.copy spad[0], hbm[0], bf16, 32, 16, src_s1=128", 228},
        /* 192 apart they alternate between the channels: 100 + 1024 / 16 = 164 */
        {"dma.copy spad[0], hbm[0], bf16, 32, 16, src_s1=192", 164},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char src[160];
        snprintf(src, sizeof src, ".core 0\n%s\n", cases[i].copy);
        CU_ASSERT_EQUAL_FATAL(run_src(&cfg, src, NULL, &r, &e), NP_OK);
        CU_ASSERT_EQUAL(r->total_cycles, cases[i].cycles);
        core_report_free(r);
    }
    /* 16-byte bursts: the first case wastes nothing, 100 + 1024 / 16 = 164 */
    cfg = tiny("chip.hbm_burst_bytes=16");
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 8, 64, src_s1=64\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 164u);
    CU_ASSERT_EQUAL(r->hbm_read_bytes, 1024u); /* the traffic counts what was asked for */
    core_report_free(r);
}

TEST(strided_rows_that_hit_one_bank_stall_on_bank_conflicts)
{
    /* tiny: 4 banks of 16 B/cycle, interleaved every 16 bytes (a 64-byte stripe). HBM fast and
     * without latency. 64 rows of 16 bytes (8 bf16) = 1024 bytes into the scratchpad:
     * - rows 64 bytes apart all start in bank 0: one bank, 16 B/cycle -> 64 cycles, of which
     *   1024 / 64 = 16 are the transfer's own time and 48 a bank-conflict stall;
     * - rows 80 bytes apart start in banks 0, 1, 2, 3, 0, ...: all four -> 16 cycles. */
    arch_config cfg;
    np_err e = {0};
    const char *sets[] = {"chip.hbm_gb_per_s=1000", "chip.hbm_latency_ns=0"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 2, &cfg, &e), NP_OK);
    core_report *r;
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 8, 64, dst_s1=64\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 64u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->busy_cycles, 16u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->stall_cycles, 48u);
    core_report_free(r);
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 8, 64, dst_s1=80\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 16u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->stall_cycles, 0u);
    core_report_free(r);
}

TEST(outstanding_dma_copies_overlap_their_latency_and_share_the_hbm)
{
    /* Four independent 4096-byte HBM -> scratchpad copies (2048 bf16) on tiny: L = 100
     * cycles, B = 16 bytes/cycle (the ports, 64 B/cycle, are not the bound). */
    const char *src = ".core 0\n"
                      "dma.copy spad[0], hbm[0], bf16, 2048\n"
                      "dma.copy spad[0x1000], hbm[0x1000], bf16, 2048\n"
                      "dma.copy spad[0x2000], hbm[0x2000], bf16, 2048\n"
                      "dma.copy spad[0x3000], hbm[0x3000], bf16, 2048\n";
    core_report *r;
    np_err e = {0};
    /* dma_outstanding = 1 (default): one after another, 4 x (100 + 4096 / 16) = 4 x 356 =
     * 1424, all of it busy. */
    arch_config one = tiny(NULL);
    CU_ASSERT_EQUAL_FATAL(run_src(&one, src, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 1424u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->busy_cycles, 1424u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->stall_cycles, 0u);
    core_report_free(r);
    /* dma_outstanding = 4: dispatched at cycles 0, 1, 2, 3, they start at once; their
     * latencies overlap and from cycle 100 on the HBM always has one streaming, so it moves
     * 4 x 4096 = 16384 bytes at 16 B/cycle without a gap: the last ends at 100 + 1024 =
     * 1124 = L + 4 x 4096 / B. Busy: until the latest alone end, 3 + 356 = 359; the other
     * 1124 - 359 = 765 cycles the copies share the HBM: stall. */
    arch_config four = tiny("core.dma_outstanding=4");
    CU_ASSERT_EQUAL_FATAL(run_src(&four, src, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 1124u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->busy_cycles, 359u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->stall_cycles, 765u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->insns, 4u);
    CU_ASSERT_EQUAL(r->hbm_read_bytes, 4u * 4096u);
    core_report_free(r);
    /* dma_outstanding = 2: copies 0 and 1 start at 0 and 1 and stream from 100 and 101.
     * Copy 0 moves 16 bytes alone in [100, 101), then 8 B/cycle: its other 4080 take 510
     * cycles -> 611; copy 1 then has 510 x 8 = 4080, its last 16 alone -> 612. Copy 2 takes
     * copy 0's slot at 611, copy 3 copy 1's at 612; the same pattern 611 cycles later ends
     * at 612 + 611 = 1223 (the HBM idles in [612, 711), the second pair's latency). */
    arch_config two = tiny("core.dma_outstanding=2");
    CU_ASSERT_EQUAL_FATAL(run_src(&two, src, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 1223u);
    core_report_free(r);
}

TEST(each_kernels_unit_busy_cycles_are_those_its_instructions_made)
{
    /* The four copies of the test above, two in kernel a, two in kernel b. */
    const char *src = ".core 0\n"
                      ".kernel a\n"
                      "dma.copy spad[0], hbm[0], bf16, 2048\n"
                      "dma.copy spad[0x1000], hbm[0x1000], bf16, 2048\n"
                      ".kernel b\n"
                      "dma.copy spad[0x2000], hbm[0x2000], bf16, 2048\n"
                      "dma.copy spad[0x3000], hbm[0x3000], bf16, 2048\n"
                      "mxu.load spad[0], 4, 4, bf16\n";
    core_report *r;
    np_err e = {0};
    /* One outstanding: each copy is busy its 356 cycles alone, two per kernel: 712 each; the
     * mxu.load (0 cycles, it waits for the copy that wrote its operand) adds nothing. */
    arch_config one = tiny(NULL);
    CU_ASSERT_EQUAL_FATAL(run_src(&one, src, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(r->n_kernels, 2u);
    CU_ASSERT_STRING_EQUAL(r->kernels[0].name, "a");
    CU_ASSERT_EQUAL(r->kernels[0].busy_cycles[ISA_UNIT_DMA], 712u);
    CU_ASSERT_EQUAL(r->kernels[1].busy_cycles[ISA_UNIT_DMA], 712u);
    CU_ASSERT_EQUAL(r->kernels[1].busy_cycles[ISA_UNIT_MXU], 0u);
    CU_ASSERT_EQUAL(unit(r, "core0.mxu")->insns, 1u);
    core_report_free(r);
    /* Four outstanding: dispatched at 0, 1, 2, 3, alone they would end at 356, 357, 358,
     * 359; the unit is busy until the latest of those (359, the test above) and each stretch
     * goes to the kernel of the copy that ends the latest then: [0, 1) copy 0 and [1, 2)
     * copy 1 to a (2 cycles), [2, 3) copy 2 and [3, 359) copy 3 to b (357). */
    arch_config four = tiny("core.dma_outstanding=4");
    CU_ASSERT_EQUAL_FATAL(run_src(&four, src, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->kernels[0].busy_cycles[ISA_UNIT_DMA], 2u);
    CU_ASSERT_EQUAL(r->kernels[1].busy_cycles[ISA_UNIT_DMA], 357u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->busy_cycles, 359u);
    core_report_free(r);
}

TEST(the_dma_decodes_one_descriptor_at_a_time_before_each_transfer)
{
    /* core.dma_setup_cycles = 20. Two 4096-byte copies (100 + 256 cycles each alone).
     * One outstanding: each decodes, then transfers: 2 x (20 + 356) = 752.
     * Four outstanding: copy 0 decodes [0, 20) and streams from 120; copy 1, dispatched at 1,
     * waits for the decoder, decodes [20, 40), streams from 140; the HBM is shared from 140:
     * copy 0 has 4096 - 20 x 16 = 3776 bytes left then, both at 8 B/cycle, copy 0 done at
     * 140 + 472 = 612, copy 1 then has 4096 - 3776 = 320 left alone: 612 + 20 = 632. */
    const char *src = ".core 0\n"
                      "dma.copy spad[0], hbm[0], bf16, 2048\n"
                      "dma.copy spad[0x1000], hbm[0x1000], bf16, 2048\n";
    core_report *r;
    np_err e = {0};
    arch_config cfg = tiny("core.dma_setup_cycles=20");
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, src, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 752u);
    core_report_free(r);
    const char *sets[] = {"core.dma_setup_cycles=20", "core.dma_outstanding=4"};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, 2, &cfg, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, src, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 632u);
    core_report_free(r);
}

TEST(a_semaphore_after_outstanding_copies_waits_for_all_of_them)
{
    arch_config cfg = tiny("core.dma_outstanding=4");
    core_report *r;
    np_err e = {0};
    /* The four copies of the test above end at 1124 (the last completes there); the
     * sem.signal behind them starts only then and its +1 is visible at 1125; the vpu.relu
     * (8 x 16 / 4 = 32 cycles) that waited for it ends at 1157. */
    const char *src = ".core 0\n"
                      "dma.copy spad[0], hbm[0], bf16, 2048\n"
                      "dma.copy spad[0x1000], hbm[0x1000], bf16, 2048\n"
                      "dma.copy spad[0x2000], hbm[0x2000], bf16, 2048\n"
                      "dma.copy spad[0x3000], hbm[0x3000], bf16, 2048\n"
                      "sem.signal dma, s0\n"
                      "sem.wait vpu, s0\n"
                      "vpu.relu spad[0x4000], spad[0], 8, 16, bf16\n";
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, src, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 1157u);
    CU_ASSERT_EQUAL(unit(r, "core0.vpu")->busy_cycles, 32u);
    CU_ASSERT_EQUAL(unit(r, "core0.vpu")->stall_cycles, 1125u - 5u); /* sem.wait at 5 */
    core_report_free(r);
    /* Out of order: a 4096-byte copy, then a 1024-byte one a cycle later. Copy 0 streams
     * alone [100, 101) (16 bytes), then both at 8 B/cycle: copy 1 is done at 101 + 128 =
     * 229, before copy 0; copy 0 then has 4096 - 16 - 1024 = 3056 bytes, alone at 16:
     * + 191 -> 420. The signal still waits for copy 0: visible at 421, relu ends at 453. */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\n"
                                        "dma.copy spad[0], hbm[0], bf16, 2048\n"
                                        "dma.copy spad[0x1000], hbm[0x1000], bf16, 512\n"
                                        "sem.signal dma, s0\n"
                                        "sem.wait vpu, s0\n"
                                        "vpu.relu spad[0x4000], spad[0], 8, 16, bf16\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 453u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->insns, 3u);
    core_report_free(r);
    /* A fence waits for every copy in flight: the front end resumes when the last retires
     * at 420 and dispatches the vpu.relu then: 420 + 32 = 452. */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\n"
                                        "dma.copy spad[0], hbm[0], bf16, 2048\n"
                                        "dma.copy spad[0x1000], hbm[0x1000], bf16, 512\n"
                                        "fence\n"
                                        "vpu.relu spad[0x4000], spad[0], 8, 16, bf16\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 452u);
    core_report_free(r);
    /* A deadlock still names the waiting instruction behind copies that landed. */
    np_status st = run_src(&cfg, ".core 0\ndma.copy spad[0], hbm[0], bf16, 16\n"
                                 "dma.copy spad[0x100], hbm[0x100], bf16, 16\n"
                                 "sem.wait dma, s3\n", NULL, &r, &e);
    CU_ASSERT_EQUAL(st, NP_ERR_DEADLOCK);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "core 0 dma: pc 2 `sem.wait dma, s3` waits on semaphore s3 (value 0, needs 1)"));
}

TEST(a_drain_reads_the_accumulator_through_its_port)
{
    /* mxu.drain of 8 x 4 on tiny (4 columns): ceil(32 / 4) = 8 cycles; it reads 8 x 4 x 4 =
     * 128 accumulator bytes and writes 8 x 4 x 2 = 64 scratchpad bytes (8 B/cycle, far under
     * the 64 B/cycle ports). */
    const char *src = ".core 0\nmxu.drain spad[0x100], acc[0], 8, 4, bf16\n";
    core_report *r;
    np_err e = {0};
    /* acc_port_bytes_per_cycle = 0 (default): one row of 4 fp32 per cycle, the drain's own
     * pace: 8 cycles. */
    arch_config cfg = tiny(NULL);
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, src, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 8u);
    CU_ASSERT_EQUAL(r->acc_read_bytes, 128u);
    core_report_free(r);
    /* A 4 B/cycle port: 128 / 4 = 32 cycles, all of it the drain's own (busy) time. */
    cfg = tiny("core.acc_port_bytes_per_cycle=4");
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, src, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 32u);
    CU_ASSERT_EQUAL(unit(r, "core0.mxu")->busy_cycles, 32u);
    CU_ASSERT_EQUAL(unit(r, "core0.mxu")->stall_cycles, 0u);
    core_report_free(r);
    /* Two drains in the one MXU queue: 2 x 32 = 64. */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\nmxu.drain spad[0x100], acc[0], 8, 4, bf16\n"
                                        "mxu.drain spad[0x200], acc[0x200], 8, 4, bf16\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 64u);
    core_report_free(r);
    /* A 32 B/cycle port needs 128 / 32 = 4 cycles, under the drain's 8: still 8. */
    cfg = tiny("core.acc_port_bytes_per_cycle=32");
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, src, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 8u);
    core_report_free(r);
}

TEST(mxu_mm_writes_and_accumulating_reads_go_through_the_accumulator_port)
{
    /* mxu.mm 8 x 4 x 4 on the 4 x 4 ws array: one fold, 2R + C + T - 2 = 18 cycles. It
     * writes 8 x 4 x 4 = 128 accumulator bytes; mode=accum first reads the same 128. */
    const char *set = ".core 0\nmxu.load spad[0], 4, 4, bf16\nmxu.mm acc[0], spad[0x100], 8, bf16, mode=set\n";
    const char *acc = ".core 0\nmxu.load spad[0], 4, 4, bf16\nmxu.mm acc[0], spad[0x100], 8, bf16, mode=accum\n";
    core_report *r;
    np_err e = {0};
    /* default port (0): the array paces it; load dispatched at 0, mm at 1: ends at 19 */
    arch_config cfg = tiny(NULL);
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, acc, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 1u + 18u);
    CU_ASSERT_EQUAL(r->acc_write_bytes, 128u);
    CU_ASSERT_EQUAL(r->acc_read_bytes, 128u);
    core_report_free(r);
    /* 4 B/cycle: set writes 128 / 4 = 32 cycles > 18; accum moves 256: 64 */
    cfg = tiny("core.acc_port_bytes_per_cycle=4");
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, set, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 1u + 32u);
    CU_ASSERT_EQUAL(r->acc_read_bytes, 0u);
    core_report_free(r);
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, acc, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 1u + 64u);
    CU_ASSERT_EQUAL(unit(r, "core0.mxu")->busy_cycles, 64u);
    core_report_free(r);
    /* 16 B/cycle: 128 / 16 = 8 and 256 / 16 = 16 cycles, both under the array's 18 */
    cfg = tiny("core.acc_port_bytes_per_cycle=16");
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, acc, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 1u + 18u);
    core_report_free(r);
}

/* ---- COMM over the on-chip mesh ----------------------------------------------------------------
 * tiny's mesh is 2 x 1 (core 0 at router 0, core 1 at router 1), 1 GHz NoC = 1 GHz cores,
 * 16-byte flits, P = 2 router cycles, L = 1 link cycle. Core 0 -> core 1 is H = 1 hop, and 64
 * bytes are F = 4 flits, so docs/noc.md's zero-load latency is
 *   (H + 1)(P + L) + L + (F - 1) = 2 x 3 + 1 + 3 = 10 NoC cycles = 10 core cycles. */

TEST(a_send_to_another_core_takes_the_mesh_zero_load_latency)
{
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    /* Core 0 dispatches the send at cycle 0; its 4 flits enter the mesh at cycles 0..3, and the
     * send retires when the last has left (the ISA: "retires when the last byte has left"):
     * busy 3. The tail reaches core 1 at 10, when the recv retires. Core 1 then signals s0 from
     * its comm queue (arrives 1 cycle later, 11) and its DMA queue's sem.wait retires at 11. */
    const char *src = ".core 0\ncomm.send peer(0, 1), spad[0], 64, 7\n"
                      ".core 1\ncomm.recv peer(0, 0), spad[0], 64, 7\n"
                      "sem.signal comm, s0\nsem.wait dma, s0\n";
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, src, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 11u);
    CU_ASSERT_EQUAL(unit(r, "core0.comm")->busy_cycles, 3u); /* 4 flits, one a cycle */
    CU_ASSERT_EQUAL(unit(r, "core0.comm")->stall_cycles, 0u);
    CU_ASSERT_EQUAL(unit(r, "core1.comm")->busy_cycles, 0u);  /* waiting is a stall */
    CU_ASSERT_EQUAL(unit(r, "core1.comm")->stall_cycles, 10u);
    CU_ASSERT_EQUAL(unit(r, "core1.comm")->insns, 2u);
    core_report_free(r);
    /* With an add reduction of fp32: 16 elements over 4 lanes x 1 op = 4 more cycles after
     * arrival: the recv retires at 14, the signal lands at 15. */
    const char *red = ".core 0\ncomm.send peer(0, 1), spad[0], 64, 7\n"
                      ".core 1\ncomm.recv peer(0, 0), spad[0], 64, 7, add, fp32\n"
                      "sem.signal comm, s0\nsem.wait dma, s0\n";
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, red, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 15u);
    CU_ASSERT_EQUAL(unit(r, "core1.comm")->busy_cycles, 4u);
    core_report_free(r);
    /* 65 bytes need a fifth flit: one cycle more (11 + 1 = 12). */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\ncomm.send peer(0, 1), spad[0], 65, 7\n"
                                        ".core 1\ncomm.recv peer(0, 0), spad[0], 65, 7\n"
                                        "sem.signal comm, s0\nsem.wait dma, s0\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 12u);
    core_report_free(r);
}

TEST(a_recv_posted_before_or_after_the_message_arrives_gets_the_same_delivery)
{
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    /* Core 0 issues 5 nops (cycles 0..4) and the send at 5: the message arrives at 15. */
    /* Before: core 1's recv is waiting from cycle 0 and retires at 15 (15 cycles of stall). */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\nnop\nnop\nnop\nnop\nnop\n"
                                        "comm.send peer(0, 1), spad[0], 64, 1\n"
                                        ".core 1\ncomm.recv peer(0, 0), spad[0], 64, 1\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 15u);
    CU_ASSERT_EQUAL(unit(r, "core0.comm")->busy_cycles, 3u); /* its flits leave at 5..8 */
    CU_ASSERT_EQUAL(unit(r, "core1.comm")->stall_cycles, 15u);
    core_report_free(r);
    /* After: core 1 issues 20 nops (0..19), so the message waits in its mailbox from 15; the
     * recv dispatched at 20 takes it at once (no stall) and core 1 halts at 21. The send is
     * unchanged: 3 cycles, done at 8. */
    char src[512] = ".core 0\nnop\nnop\nnop\nnop\nnop\ncomm.send peer(0, 1), spad[0], 64, 1\n.core 1\n";
    for (int i = 0; i < 20; i++)
        strcat(src, "nop\n");
    strcat(src, "comm.recv peer(0, 0), spad[0], 64, 1\n");
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, src, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 21u);
    CU_ASSERT_EQUAL(unit(r, "core0.comm")->busy_cycles, 3u);
    CU_ASSERT_EQUAL(unit(r, "core0.comm")->stall_cycles, 0u);
    CU_ASSERT_EQUAL(unit(r, "core1.comm")->stall_cycles, 0u);
    CU_ASSERT_EQUAL(unit(r, "core1.comm")->insns, 1u);
    core_report_free(r);
}

TEST(a_recv_with_add_in_functional_mode_sums_the_message_into_its_destination)
{
    arch_config cfg = tiny(NULL);
    float a[16], b[16], out[16];
    for (int i = 0; i < 16; i++) {
        a[i] = (float)i * 0.5f;      /* core 0's tile, hbm[0] */
        b[i] = 100.0f - (float)i;    /* core 1's tile, hbm[0x100] */
    }
    const char *src = ".core 0\ndma.copy spad[0], hbm[0], fp32, 16\n"
                      "sem.signal dma, s0\nsem.wait comm, s0\n"
                      "comm.send peer(0, 1), spad[0], 64, 3\n"
                      ".core 1\ndma.copy spad[0x40], hbm[0x100], fp32, 16\n"
                      "sem.signal dma, s0\nsem.wait comm, s0\n"
                      "comm.recv peer(0, 0), spad[0x40], 64, 3, add, fp32\n"
                      "sem.signal comm, s1\nsem.wait dma, s1\n"
                      "dma.copy hbm[0x200], spad[0x40], fp32, 16\n";
    isa_target t;
    isa_target_from_arch(&cfg, &t);
    isa_asm_opts ao = {.target = &t};
    isa_program *p = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(isa_asm(src, strlen(src), "test.s", &ao, &p, &e), NP_OK);
    core_hbm_io in[2] = {{0, a, sizeof a, 0}, {0x100, b, sizeof b, 0}}, o[1] = {{0x200, out, sizeof out, 0}};
    core_sim_opts opts = {.functional = true, .inputs = in, .n_inputs = 2, .outputs = o,
                          .n_outputs = 1};
    core_report *r;
    CU_ASSERT_EQUAL_FATAL(core_sim_run_opts(&cfg, p, &opts, NULL, &r, &e), NP_OK);
    for (int i = 0; i < 16; i++)
        CU_ASSERT_EQUAL(out[i], 100.0f - (float)i + (float)i * 0.5f); /* exact in fp32 */
    core_report_free(r);
    isa_program_free(p);
}

TEST(a_recv_nobody_sends_to_deadlocks_and_another_chip_is_a_fault)
{
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    np_status st = run_src(&cfg, ".core 0\ncomm.recv peer(0, 1), spad[0], 64, 9\n.core 1\nnop\n",
                           NULL, &r, &e);
    CU_ASSERT_EQUAL(st, NP_ERR_DEADLOCK);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "core 0 comm: pc 0 `comm.recv peer(0, 1), spad[0x0], 64, 9` "
                                         "waits for a message from core 1 tag 9"));
    /* A recv whose size differs from the message's is a fault at arrival. */
    st = run_src(&cfg, ".core 0\ncomm.send peer(0, 1), spad[0], 64, 9\n"
                       ".core 1\ncomm.recv peer(0, 0), spad[0], 32, 9\n", NULL, &r, &e);
    CU_ASSERT_EQUAL(st, NP_ERR_SIM_FAULT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "has 64 bytes, the recv expects 32"));
    st = run_src(&cfg, ".core 0\ncomm.send peer(1, 1), spad[0], 64, 9\n", NULL, &r, &e);
    CU_ASSERT_EQUAL(st, NP_ERR_SIM_FAULT);
    CU_ASSERT_STRING_EQUAL(e.msg, "core 0 comm pc 0 `comm.send peer(1, 1), spad[0x0], 64, 9`: "
                                  "peer chip 1 runs no program: this run has 1 chip (give "
                                  "`npusim sim` one ELF per chip)");
    st = run_src(&cfg, ".core 0\ncomm.send peer(0, 1), spad[0], 64, 9\n", NULL, &r, &e);
    CU_ASSERT_EQUAL(st, NP_ERR_SIM_FAULT);
    CU_ASSERT_STRING_EQUAL(e.msg, "core 0 comm pc 0 `comm.send peer(0, 1), spad[0x0], 64, 9`: "
                                  "peer core 1 runs no part of chip 0's program");
}

/* ---- COMM between chips ------------------------------------------------------------------------
 * tiny's system: 2 chips on a ring, 2 links per chip (one each way round; with 2 chips both
 * reach the other chip and the route takes the + one), 8 GB/s = 8 bytes/ns per link and
 * direction, 200 ns per hop. A lone transfer of S bytes takes 200 + S / 8 ns (docs/noc.md). */

/* Assembles srcs[i] for chip i and runs them together. */
static np_status run_chips(const arch_config *cfg, const char *const *srcs, uint32_t n,
                           const core_sim_opts *opts, core_report **out, np_err *e)
{
    isa_target t;
    isa_target_from_arch(cfg, &t);
    isa_asm_opts o = {.target = &t};
    isa_program *p[4] = {NULL};
    for (uint32_t i = 0; i < n; i++)
        CU_ASSERT_EQUAL_FATAL(isa_asm(srcs[i], strlen(srcs[i]), "test.s", &o, &p[i], e), NP_OK);
    np_status st = core_sim_run_chips(cfg, (const isa_program *const *)p, n, opts, NULL, out, e);
    for (uint32_t i = 0; i < n; i++)
        isa_program_free(p[i]);
    return st;
}

TEST(a_send_to_another_chip_takes_the_link_latency_plus_bytes_over_bandwidth)
{
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    /* 64 bytes chip 0 -> chip 1: they arrive at 200 + 64 / 8 = 208 ns = 208 cycles; the send
     * (core 0 sits at the link ports) retires when its last byte has left, at 64 / 8 = 8 */
    const char *one[] = {".core 0\ncomm.send peer(1, 0), spad[0], 64, 3\n",
                         ".core 0\ncomm.recv peer(0, 0), spad[0], 64, 3\n"};
    CU_ASSERT_EQUAL_FATAL(run_chips(&cfg, one, 2, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 208u);
    CU_ASSERT_EQUAL(r->n_chips, 2u);
    CU_ASSERT_EQUAL(r->c2c_bytes, 64u);
    CU_ASSERT_EQUAL(unit(r, "chip0.core0.comm")->busy_cycles, 8u);
    CU_ASSERT_EQUAL(unit(r, "chip1.core0.comm")->stall_cycles, 208u); /* waiting for it */
    core_report_free(r);
    /* Two cores of chip 0 send 800 bytes each at once over the same link. Core 0 sits at the
     * link port (router 0) and streams from 0; core 1's 50 flits first cross the mesh to
     * router 0, (1 + 1)(2 + 1) + 1 + 49 = 56 cycles. By 56 core 0 has sent 448 bytes; they
     * share 8 B/ns, core 0's last 352 leave at 56 + 88 = 144 (arrive 344), core 1 then has
     * 448 left alone: sent at 200, arrives 400. Core 0's send retires when its last byte
     * left, at 144 (alone 800 / 8 = 100 busy, 44 stall); core 1's when its last flit left for
     * the mesh, at 49 (50 flits, one a cycle: all busy). */
    const char *two[] = {".core 0\ncomm.send peer(1, 0), spad[0], 800, 1\n"
                         ".core 1\ncomm.send peer(1, 0), spad[0], 800, 2\n",
                         ".core 0\ncomm.recv peer(0, 0), spad[0], 800, 1\n"
                         "comm.recv peer(0, 1), spad[0x400], 800, 2\n"};
    CU_ASSERT_EQUAL_FATAL(run_chips(&cfg, two, 2, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 400u);
    CU_ASSERT_EQUAL(unit(r, "chip0.core0.comm")->busy_cycles, 100u);
    CU_ASSERT_EQUAL(unit(r, "chip0.core0.comm")->stall_cycles, 44u);
    CU_ASSERT_EQUAL(unit(r, "chip0.core1.comm")->busy_cycles, 49u);
    CU_ASSERT_EQUAL(unit(r, "chip0.core1.comm")->stall_cycles, 0u);
    core_report_free(r);
    /* Opposite directions use different links: both 800-byte messages take 300. */
    const char *both[] = {".core 0\ncomm.send peer(1, 0), spad[0], 800, 1\n"
                          "comm.recv peer(1, 0), spad[0x400], 800, 1\n",
                          ".core 0\ncomm.send peer(0, 0), spad[0], 800, 1\n"
                          "comm.recv peer(0, 0), spad[0x400], 800, 1\n"};
    CU_ASSERT_EQUAL_FATAL(run_chips(&cfg, both, 2, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 300u);
    core_report_free(r);
}

TEST(a_fence_with_nocomm_lets_the_front_end_go_on_while_messages_are_in_flight)
{
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    /* chip 0 waits for 64 bytes from chip 1 (they arrive at 208, as above), then copies 4096
     * bytes (356 cycles alone). A plain fence waits for the recv: the copy is dispatched at
     * 208 and ends at 564. With nocomm the front end passes the fence in the cycle after the
     * recv's dispatch: the copy runs 1 .. 357 while the message travels; a barrier (of the
     * one core) fences the same and releases its core a cycle later: 358. */
    const char *recv = ".core 0\ncomm.recv peer(1, 0), spad[0], 64, 3\n%s\n"
                       "dma.copy spad[0x1000], hbm[0], bf16, 2048\n";
    const char *fences[] = {"fence", "fence nocomm=1", "barrier 7, nocomm=1"};
    const uint64_t want[] = {564, 357, 358};
    for (int i = 0; i < 3; i++) {
        char src[256];
        snprintf(src, sizeof src, recv, fences[i]);
        const char *two[] = {src, ".core 0\ncomm.send peer(0, 0), spad[0], 64, 3\n"};
        CU_ASSERT_EQUAL_FATAL(run_chips(&cfg, two, 2, NULL, &r, &e), NP_OK);
        CU_ASSERT_EQUAL(r->total_cycles, want[i]);
        CU_ASSERT_EQUAL(unit(r, "chip0.core0.ctrl")->stall_cycles, i ? 0u : 207u);
        core_report_free(r);
    }
}

TEST(a_message_between_chips_crosses_both_meshes_to_and_from_the_link_port)
{
    core_report *r;
    np_err e = {0};
    /* chip 0 core 1 -> chip 1 core 1, 64 bytes (4 flits): router 1 -> router 0 on chip 0's
     * mesh, (1 + 1)(2 + 1) + 1 + 3 = 10 cycles; the link, 200 + 64 / 8 = 208; router 0 ->
     * router 1 on chip 1's mesh, 10: 228 in all. */
    const char *far[] = {".core 0\nnop\n.core 1\ncomm.send peer(1, 1), spad[0], 64, 3\n",
                         ".core 0\nnop\n.core 1\ncomm.recv peer(0, 1), spad[0], 64, 3\n"};
    const char *near[] = {".core 0\ncomm.send peer(1, 0), spad[0], 64, 3\n.core 1\nnop\n",
                          ".core 0\ncomm.recv peer(0, 0), spad[0], 64, 3\n.core 1\nnop\n"};
    arch_config cfg = tiny(NULL);
    CU_ASSERT_EQUAL_FATAL(run_chips(&cfg, far, 2, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 228u);
    CU_ASSERT_EQUAL(unit(r, "chip0.core1.comm")->busy_cycles, 3u); /* its 4 flits leave */
    core_report_free(r);
    CU_ASSERT_EQUAL_FATAL(run_chips(&cfg, near, 2, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 208u); /* core 0 sits at the port: no mesh legs */
    core_report_free(r);
    /* With the ports at router 1 it is the other way round. */
    cfg = tiny("chip.link_port_router=1");
    CU_ASSERT_EQUAL_FATAL(run_chips(&cfg, far, 2, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 208u);
    core_report_free(r);
    CU_ASSERT_EQUAL_FATAL(run_chips(&cfg, near, 2, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 228u);
    core_report_free(r);
    /* A port outside the mesh is refused by the config check. */
    const char *bad[] = {"chip.link_port_router=2"};
    CU_ASSERT_EQUAL(arch_resolve("tiny", bad, 1, &cfg, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "chip.link_port_router = 2 is not a router of the "
                                         "chip.mesh_x x chip.mesh_y = 2 x 1 mesh (routers 0 .. 1)"));
}

TEST(a_big_message_between_chips_crosses_its_legs_in_pieces_cut_through)
{
    core_report *r;
    np_err e = {0};
    /* 32 KiB chip 0 core 1 -> chip 1 core 1 in 1 KiB pieces (64 flits, one packet each; tiny:
     * 16 B flits at 1 GHz, one mesh hop, links 8 B/ns with 200 ns latency). Piece 0 reaches
     * the port at (1 + 1)(2 + 1) + 1 + 63 = 70; the mesh brings one piece every 64 cycles, the
     * link takes 1024 / 8 = 128 a piece, so the link is the bottleneck and never idles: the
     * last piece leaves it at 70 + 32 x 128 = 4166, reaches chip 1's port 200 later (4366)
     * and core 1 after its mesh hop, 70: 4436 = max(mesh, link) + one piece's fill on each
     * mesh + latency. Store-and-forward (one piece: the whole message) is the sum of the
     * legs, (6 + 2048) + 200 + 4096 + (6 + 2048) = 8404. The send retires when the last
     * piece's tail has left core 1, after its 2048 flits: busy 2047, no stall. */
    const char *far[] = {".core 0\nnop\n.core 1\ncomm.send peer(1, 1), spad[0], 32768, 3\n",
                         ".core 0\nnop\n.core 1\ncomm.recv peer(0, 1), spad[0], 32768, 3\n"};
    arch_config cfg = tiny("chip.c2c_piece_bytes=1024");
    CU_ASSERT_EQUAL_FATAL(run_chips(&cfg, far, 2, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 4436u);
    CU_ASSERT_EQUAL(r->c2c_bytes, 32768u);
    CU_ASSERT_EQUAL(unit(r, "chip0.core1.comm")->busy_cycles, 2047u);
    CU_ASSERT_EQUAL(unit(r, "chip0.core1.comm")->stall_cycles, 0u);
    core_report_free(r);
    cfg = tiny("chip.c2c_piece_bytes=32768");
    CU_ASSERT_EQUAL_FATAL(run_chips(&cfg, far, 2, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 8404u);
    core_report_free(r);
    /* From the port core to the port core there is nothing to pipeline: 200 + 32768 / 8 =
     * 4296 whatever the pieces (one transfer; the send busy for its 4096). The second send,
     * to core 1, starts when the first has left (4096) and takes the link to 8192; its
     * pieces cross the receiver's mesh as they come: 8192 + 200 + 70 = 8462, against 8192 +
     * 200 + 2054 = 10446 as one piece. */
    const char *near[] = {".core 0\ncomm.send peer(1, 0), spad[0], 32768, 3\n"
                          "comm.send peer(1, 1), spad[0], 32768, 4\n.core 1\nnop\n",
                          ".core 0\ncomm.recv peer(0, 0), spad[0], 32768, 3\n"
                          ".core 1\ncomm.recv peer(0, 0), spad[0], 32768, 4\n"};
    const char *pieces[] = {"chip.c2c_piece_bytes=1024", "chip.c2c_piece_bytes=32768"};
    const uint64_t want[] = {8192 + 200 + 70, 8192 + 200 + 2054};
    for (int i = 0; i < 2; i++) {
        cfg = tiny(pieces[i]);
        CU_ASSERT_EQUAL_FATAL(run_chips(&cfg, near, 2, NULL, &r, &e), NP_OK);
        CU_ASSERT_EQUAL(unit(r, "chip1.core0.comm")->stall_cycles, 4296u); /* its arrival */
        CU_ASSERT_EQUAL(unit(r, "chip0.core0.comm")->busy_cycles, 2u * 4096u);
        CU_ASSERT_EQUAL(r->total_cycles, want[i]);
        core_report_free(r);
    }
}

TEST(a_reduction_across_chips_adds_the_received_values)
{
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    /* chip 0 sends 4 fp32 from HBM; chip 1 adds them into its own 4 (spad after a load) and
     * stores the sum to HBM: {1, 2, 3, 4} + {10, 20, 30, 40} = {11, 22, 33, 44}. */
    const char *srcs[] = {".core 0\ncomm.send peer(1, 0), hbm[0x100], 16, 7\n",
                          ".core 0\ndma.copy spad[0], hbm[0x100], fp32, 4\n"
                          "comm.recv peer(0, 0), spad[0], 16, 7, add, fp32\n"
                          "dma.copy hbm[0x200], spad[0], fp32, 4\n"};
    float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, out[4] = {0};
    core_hbm_io in[2] = {{0x100, a, sizeof a, 0}, {0x100, b, sizeof b, 1}};
    core_hbm_io o[1] = {{0x200, out, sizeof out, 1}};
    core_sim_opts opts = {.functional = true, .inputs = in, .n_inputs = 2, .outputs = o,
                          .n_outputs = 1};
    CU_ASSERT_EQUAL_FATAL(run_chips(&cfg, srcs, 2, &opts, &r, &e), NP_OK);
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(out[i], (float)(11 * (i + 1)));
    core_report_free(r);
}

TEST(a_recv_from_another_chip_that_never_comes_is_a_deadlock_naming_the_chips)
{
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    const char *srcs[] = {".core 0\ncomm.send peer(1, 0), spad[0], 64, 6\n",
                          ".core 0\ncomm.recv peer(0, 0), spad[0], 64, 5\n"};
    CU_ASSERT_EQUAL(run_chips(&cfg, srcs, 2, NULL, &r, &e), NP_ERR_DEADLOCK);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "chip 1 core 0 comm: pc 0 `comm.recv peer(0, 0), spad[0x0], "
                                         "64, 5` waits for a message from chip 0 core 0 tag 5"));
    /* more programs than the system has chips */
    const char *three[] = {".core 0\nnop\n", ".core 0\nnop\n", ".core 0\nnop\n"};
    CU_ASSERT_EQUAL(run_chips(&cfg, three, 3, NULL, &r, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "3 programs for a system of 2 chips"));
}

/* ---- the scoreboard (core.scoreboard) ---- */

TEST(the_scoreboard_makes_a_reader_wait_for_an_older_writer_without_semaphores)
{
    /* dma.copy of 256 bytes into spad[0] dispatched at 0: 100 + 256 / 16 = 116, done at 116.
     * vpu.relu 8 x 16 bf16 reading spad[0] is dispatched at 1 and waits (read after write)
     * until 116, then takes 8 x 16 / 4 = 32 cycles: total 148, VPU stall 115, busy 32. */
    const char *src = ".core 0\n"
                      "dma.copy spad[0], hbm[0], bf16, 128\n"
                      "vpu.relu spad[0x1000], spad[0], 8, 16, bf16\n";
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, src, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 148u);
    CU_ASSERT_EQUAL(unit(r, "core0.vpu")->busy_cycles, 32u);
    CU_ASSERT_EQUAL(unit(r, "core0.vpu")->stall_cycles, 115u);
    core_report_free(r);
    /* Without the scoreboard nothing orders them: the relu starts at 1 beside the copy and
     * the run ends with the copy at 116 (the relu's 512 port bytes fit beside the copy's 16
     * B/cycle in the 64 B/cycle ports). */
    cfg = tiny("core.scoreboard=0");
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, src, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 116u);
    CU_ASSERT_EQUAL(unit(r, "core0.vpu")->stall_cycles, 0u);
    core_report_free(r);
}

TEST(the_scoreboard_holds_a_writer_until_an_older_reader_and_ignores_disjoint_strided_rows)
{
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    /* Write after read: the relu (dispatched at 0) reads spad[0] for 32 cycles; the copy
     * into spad[0] (dispatched at 1) waits until 32, then 100 + 16 = 116 more: 148. */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\n"
                                        "vpu.relu spad[0x1000], spad[0], 8, 16, bf16\n"
                                        "dma.copy spad[0], hbm[0], bf16, 128\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 148u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->stall_cycles, 31u);
    core_report_free(r);
    /* Interleaved rows share no byte: the copy writes 8 rows of 32 bytes 64 bytes apart
     * (spad 0x0, 0x40, ...) while the relu reads 8 rows of 32 bytes at 0x20, 0x60, ...
     * Their extents overlap but the scoreboard lets them run together: 116 cycles, as for
     * the copy alone. */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\n"
                                        "vpu.relu spad[0x1000], spad[0x20], 8, 16, bf16, src_s=64\n"
                                        "dma.copy spad[0], hbm[0], bf16, 16, 8, dst_s1=64\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 116u + 1u);
    CU_ASSERT_EQUAL(unit(r, "core0.dma")->stall_cycles, 0u);
    core_report_free(r);
}

TEST(the_scoreboard_orders_dma_copies_in_flight_that_touch_the_same_bytes)
{
    /* dma_outstanding = 4: a load into spad[0] and a store of spad[0] back to HBM. The store
     * reads what the load writes, so it starts when the load is done (116) and takes
     * 100 + 16 more: 232. */
    arch_config cfg = tiny("core.dma_outstanding=4");
    core_report *r;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\n"
                                        "dma.copy spad[0], hbm[0], bf16, 128\n"
                                        "dma.copy hbm[0x10000], spad[0], bf16, 128\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 232u);
    core_report_free(r);
    /* A third, unrelated copy behind the store still starts in program order: with it at
     * 116, both stream from 216 sharing 16 B/cycle, 512 / 16 = 32: 248. */
    CU_ASSERT_EQUAL_FATAL(run_src(&cfg, ".core 0\n"
                                        "dma.copy spad[0], hbm[0], bf16, 128\n"
                                        "dma.copy hbm[0x10000], spad[0], bf16, 128\n"
                                        "dma.copy spad[0x1000], hbm[0x1000], bf16, 128\n",
                                  NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(r->total_cycles, 248u);
    core_report_free(r);
}

TEST(a_scoreboard_wait_behind_a_semaphore_is_reported_as_a_deadlock_naming_both)
{
    /* The copy writes what the older relu reads; the relu waits on s0, which only the
     * signal behind the copy would give. */
    arch_config cfg = tiny(NULL);
    core_report *r;
    np_err e = {0};
    CU_ASSERT_EQUAL(run_src(&cfg, ".core 0\n"
                                  "sem.wait vpu, s0\n"
                                  "vpu.relu spad[0x1000], spad[0], 8, 16, bf16\n"
                                  "dma.copy spad[0], hbm[0], bf16, 128\n"
                                  "sem.signal dma, s0\n",
                            NULL, &r, &e), NP_ERR_DEADLOCK);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "core 0 vpu: pc 0 `sem.wait vpu, s0` waits on semaphore s0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "core 0 dma: pc 2 `dma.copy spad[0x0], hbm[0x0], bf16, 128` "
                                         "waits for older pc 1 `vpu.relu"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "(vpu), whose src overlaps its dst"));
}

/* A random strided range inside the first 2048 bytes of spad. */
static core_range random_range(rng *g, bool write)
{
    core_range r = {ISA_SPACE_SPAD, 0, 0, 0, write, "r", 1 + rng_below(g, 3), 0,
                    1 + rng_below(g, 5), 0, 1 + rng_below(g, 40), 0};
    r.row_stride = 1 + rng_below(g, 100);
    r.plane_stride = rng_below(g, 400);
    r.addr = rng_below(g, 1024);
    r.extent = (r.planes - 1) * r.plane_stride + (r.rows - 1) * r.row_stride + r.row_bytes;
    r.bytes = r.planes * r.rows * r.row_bytes;
    return r;
}

static void mark(const core_range *r, bool *map)
{
    for (uint64_t p = 0; p < r->planes; p++)
        for (uint64_t i = 0; i < r->rows; i++)
            for (uint64_t b = 0; b < r->row_bytes; b++)
                map[r->addr + p * r->plane_stride + i * r->row_stride + b] = true;
}

TEST(range_overlap_equals_a_byte_map_comparison_for_random_strided_ranges)
{
    rng g;
    rng_seed(&g, 7);
    unsigned hits = 0;
    for (int t = 0; t < 20000; t++) {
        core_range a = random_range(&g, true), b = random_range(&g, false);
        static bool ma[4096], mb[4096];
        memset(ma, 0, sizeof ma);
        memset(mb, 0, sizeof mb);
        mark(&a, ma);
        mark(&b, mb);
        bool want = false;
        for (int i = 0; i < 4096 && !want; i++)
            want = ma[i] && mb[i];
        hits += want;
        CU_ASSERT_EQUAL(core_ranges_overlap(&a, &b), want);
        CU_ASSERT_EQUAL(core_ranges_overlap(&b, &a), want);
        b.space = ISA_SPACE_HBM;
        CU_ASSERT_FALSE(core_ranges_overlap(&a, &b));
    }
    CU_ASSERT(hits > 2000 && hits < 18000); /* both outcomes are well exercised */
    /* Large gathers (50 planes of 112 rows of 42 bytes, rows 84 apart, planes 9408 apart)
     * into the same buffer, one at offset 0 and one at offset 42: they interleave without
     * sharing a byte — 5600 x 50 row-plane pairs, yet decided exactly, not by extents. */
    core_range g0 = {ISA_SPACE_SPAD, 0, 49 * 9408 + 111 * 84 + 42, 50 * 112 * 42, true, "dst",
                     50, 9408, 112, 84, 42, 0};
    core_range g1 = g0;
    g1.addr = 42;
    CU_ASSERT_FALSE(core_ranges_overlap(&g0, &g1));
    g1.addr = 41; /* now each row of g1 overlaps one byte of a row of g0 */
    CU_ASSERT_TRUE(core_ranges_overlap(&g0, &g1));
}

/* ---- random programs ----------------------------------------------------------------------------
 * Seeded random programs for 2 chips x 2 cores of tiny, built from every kind of instruction
 * with small operands mostly inside their spaces: DMA copies both ways (strided), vector ops,
 * mxu.load/mm/drain, semaphores, fences, barriers, sends and receives to the other core and
 * the other chip. Whatever a program does, the run must end as a success, a deadlock or a
 * fault (never another error, a crash or a hang), identically twice, with the same cycles in
 * functional mode, and with every unit's busy + stall within the run. */

static void random_insn(rng *g, uint32_t chip, uint32_t core, char *buf, size_t n)
{
    unsigned a = (unsigned)rng_below(g, 64) * 64, b = (unsigned)rng_below(g, 64) * 64;
    unsigned r = 1 + (unsigned)rng_below(g, 8), c = 1 + (unsigned)rng_below(g, 16);
    unsigned s1 = 2 * c + 2 * (unsigned)rng_below(g, 8);
    static const char *const units[] = {"dma", "mxu", "vpu", "comm"};
    static const char *const unary[] = {"exp", "relu", "neg"}, *const binary[] = {"add", "mul", "max"};
    unsigned k = (unsigned)rng_below(g, 40);
    if (k < 8)
        snprintf(buf, n, "dma.copy spad[0x%x], hbm[0x%x], bf16, %u, %u, src_s1=%u", a, b, c, r, s1);
    else if (k < 12)
        snprintf(buf, n, "dma.copy hbm[0x%x], spad[0x%x], bf16, %u, %u, dst_s1=%u", b, a, c, r, s1);
    else if (k < 15)
        snprintf(buf, n, "vpu.%s spad[0x%x], spad[0x%x], %u, %u, bf16", unary[rng_below(g, 3)],
                 a, b, r, c);
    else if (k < 18)
        snprintf(buf, n, "vpu.%s spad[0x%x], spad[0x%x], spad[0x%x], %u, %u, bf16",
                 binary[rng_below(g, 3)], a, b, (unsigned)rng_below(g, 64) * 64, r, c);
    else if (k < 20)
        snprintf(buf, n, "mxu.load spad[0x%x], %u, %u, bf16", a, r, 1 + c / 4);
    else if (k < 24)
        snprintf(buf, n, "mxu.mm acc[0x%x], spad[0x%x], %u, bf16, mode=%s",
                 (unsigned)rng_below(g, 8) * 128, a, r, rng_below(g, 2) ? "set" : "accum");
    else if (k < 26)
        snprintf(buf, n, "mxu.drain spad[0x%x], acc[0x%x], %u, %u, bf16", a,
                 (unsigned)rng_below(g, 8) * 128, r, 1 + c / 4);
    else if (k < 29)
        snprintf(buf, n, "sem.signal %s, s%u", units[rng_below(g, 4)], (unsigned)rng_below(g, 2));
    else if (k < 30)
        snprintf(buf, n, "sem.wait %s, s%u", units[rng_below(g, 4)], (unsigned)rng_below(g, 2));
    else if (k < 33)
        snprintf(buf, n, "%s", rng_below(g, 2) ? "nop" : rng_below(g, 8) ? "fence" : "barrier 1");
    else if (k < 34) {
        bool send = rng_below(g, 2);
        uint32_t pc = rng_below(g, 2) ? chip : 1 - chip, pk = pc == chip ? 1 - core : core;
        snprintf(buf, n, "comm.%s peer(%u, %u), spad[0x%x], %u, %u%s", send ? "send" : "recv", pc,
                 pk, a, rng_below(g, 8) ? 64 : 16 * c, (unsigned)rng_below(g, 2),
                 !send && rng_below(g, 2) ? ", add, fp32" : "");
    } else if (k < 39)
        snprintf(buf, n, "dma.copy spad[0x%x], spad[0x%x], bf16, %u", a, b, c * r);
    else if (rng_below(g, 4) == 0) /* past the end of the 64 KiB scratchpad: a fault */
        snprintf(buf, n, "dma.copy spad[0xffc0], hbm[0x%x], bf16, %u", b, 64 + c);
    else
        snprintf(buf, n, "nop");
}

TEST(random_programs_end_cleanly_deterministically_and_consistently)
{
    rng g;
    rng_seed(&g, 2026);
    unsigned ok = 0, dead = 0, fault = 0;
    for (int t = 0; t < 300; t++) {
        static const char *const sets[][2] = {{"core.dma_outstanding=1", "core.scoreboard=1"},
                                              {"core.dma_outstanding=4", "core.scoreboard=1"},
                                              {"core.dma_outstanding=3", "core.scoreboard=0"}};
        arch_config cfg;
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets[t % 3], 2, &cfg, &e), NP_OK);
        char srcs[2][4096];
        const char *sp[2] = {srcs[0], srcs[1]};
        for (uint32_t chip = 0; chip < 2; chip++) {
            size_t len = 0;
            for (uint32_t core = 0; core < 2; core++) {
                len += (size_t)snprintf(srcs[chip] + len, sizeof srcs[chip] - len,
                                        ".core %u\nmxu.load spad[0x%x], 4, 4, bf16\n", core,
                                        (unsigned)rng_below(&g, 64) * 64);
                unsigned k = 1 + (unsigned)rng_below(&g, 14);
                for (unsigned i = 0; i < k; i++) {
                    char line[160];
                    random_insn(&g, chip, core, line, sizeof line);
                    len += (size_t)snprintf(srcs[chip] + len, sizeof srcs[chip] - len, "%s\n", line);
                }
            }
        }
        core_report *r1 = NULL, *r2 = NULL, *rf = NULL;
        np_err e1 = {0}, e2 = {0}, ef = {0};
        np_status s1 = run_chips(&cfg, sp, 2, NULL, &r1, &e1);
        np_status s2 = run_chips(&cfg, sp, 2, NULL, &r2, &e2);
        core_sim_opts fo = {.functional = true};
        np_status sf = run_chips(&cfg, sp, 2, &fo, &rf, &ef);
        CU_ASSERT(s1 == NP_OK || s1 == NP_ERR_DEADLOCK || s1 == NP_ERR_SIM_FAULT);
        CU_ASSERT_EQUAL(s1, s2);
        CU_ASSERT_STRING_EQUAL(e1.msg, e2.msg);
        CU_ASSERT_EQUAL(s1, sf);
        ok += s1 == NP_OK, dead += s1 == NP_ERR_DEADLOCK, fault += s1 == NP_ERR_SIM_FAULT;
        if (s1 == NP_OK && r1 && r2 && rf) {
            json_t *j1 = core_report_json(r1), *j2 = core_report_json(r2);
            CU_ASSERT_TRUE(json_equal(j1, j2));
            json_decref(j1);
            json_decref(j2);
            CU_ASSERT_EQUAL(r1->total_cycles, rf->total_cycles);
            for (uint32_t i = 0; i < r1->n_units; i++)
                CU_ASSERT(r1->units[i].busy_cycles + r1->units[i].stall_cycles <= r1->total_cycles);
        }
        if (s1 == NP_ERR_DEADLOCK)
            CU_ASSERT_PTR_NOT_NULL(strstr(e1.msg, "\n  ")); /* at least one waiting unit named */
        core_report_free(r1);
        core_report_free(r2);
        core_report_free(rf);
    }
    /* the generator reaches all three outcomes */
    CU_ASSERT(ok > 50 && dead > 30 && fault > 30);
}

/* The slice named name in trace events ev, or NULL. */
static json_t *trace_find(json_t *ev, const char *name)
{
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *e = json_array_get(ev, i);
        if (!strcmp(json_string_value(json_object_get(e, "name")), name) &&
            !strcmp(json_string_value(json_object_get(e, "ph")), "X"))
            return e;
    }
    return NULL;
}

TEST(npusim_sim_trace_has_a_slice_per_instruction_at_its_simulated_times)
{
    char dir[] = "/tmp/npusim_trace_XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    char s_path[256], elf[256], tr[256];
    snprintf(s_path, sizeof s_path, "%s/p.s", dir);
    snprintf(elf, sizeof elf, "%s/p.elf", dir);
    snprintf(tr, sizeof tr, "%s/t.json", dir);
    FILE *f = fopen(s_path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    /* dma.copy 4096 bytes: [0, 356) cycles; sem.wait from its start at 2 until the signal is
     * visible at 357; vpu.relu [357, 389); the kernel [0, 389); 1 cycle = 1 ns = 0.001 us */
    fputs(".core 0\n.kernel load\ndma.copy spad[0], hbm[0], bf16, 2048\nsem.signal dma, s0\n"
          "sem.wait vpu, s0\nvpu.relu spad[0x2000], spad[0], 8, 16, bf16\n", f);
    fclose(f);
    harness_run a = harness_npusim("asm", s_path, "-o", elf, NULL);
    CU_ASSERT_EQUAL_FATAL(a.exit_status, 0);
    harness_run_free(&a);
    harness_run s = harness_npusim("sim", "--trace", tr, elf, NULL);
    CU_ASSERT_EQUAL_FATAL(s.exit_status, 0);
    harness_run_free(&s);
    char *text = harness_read_file(tr, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    json_error_t je;
    json_t *j = json_loads(text, 0, &je), *ev = json_object_get(j, "traceEvents");
    free(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    static const struct { const char *name; double ts, dur; } want[] = {
        {"dma.copy", 0, 0.356}, {"sem.wait", 0.002, 0.355}, {"vpu.relu", 0.357, 0.032},
        {"load", 0, 0.389}};
    for (size_t i = 0; i < 4; i++) {
        json_t *e = trace_find(ev, want[i].name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(e);
        CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(e, "ts")), want[i].ts, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(e, "dur")), want[i].dur, 1e-9);
    }
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(
                               trace_find(ev, "vpu.relu"), "args"), "insn")),
                           "vpu.relu spad[0x2000], spad[0x0], 8, 16, bf16");
    json_decref(j);
    /* A deadlocked run still leaves a whole trace (status 3). */
    f = fopen(s_path, "w");
    fputs(".core 0\ndma.copy spad[0], hbm[0], bf16, 64\nsem.wait dma, s0\n", f);
    fclose(f);
    a = harness_npusim("asm", s_path, "-o", elf, NULL);
    harness_run_free(&a);
    s = harness_npusim("sim", "--trace", tr, elf, NULL);
    CU_ASSERT_EQUAL(s.exit_status, 3);
    harness_run_free(&s);
    text = harness_read_file(tr, NULL);
    j = text ? json_loads(text, 0, &je) : NULL;
    free(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_PTR_NOT_NULL(trace_find(json_object_get(j, "traceEvents"), "dma.copy"));
    json_decref(j);
    remove(s_path);
    remove(elf);
    remove(tr);
    rmdir(dir);
}

/* Assembles src for tiny and runs it with options o. */
static np_status run_src_opts(const char *src, const core_sim_opts *o, core_report **r, np_err *e)
{
    arch_config cfg = tiny(NULL);
    const char *srcs[] = {src};
    return run_chips(&cfg, srcs, 1, o, r, e);
}

TEST(a_cycle_limit_stops_a_long_run_and_changes_nothing_else)
{
    /* 60000 x vpu.relu of 32 cycles: about 1.9 million cycles; stopped after 10000. */
    const char *longrun = ".core 0\nloop 60000\nvpu.relu spad[0x100], spad[0], 8, 16, bf16\n"
                          "endloop\n";
    core_sim_opts lim = {.max_cycles = 10000};
    core_report *r;
    np_err e = {0};
    CU_ASSERT_EQUAL(run_src_opts(longrun, &lim, &r, &e), NP_ERR_SIM_FAULT);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "the run did not finish within 10000 cycles (the cycle "
                                         "limit); 1 core is still running"));
    /* A run that ends in time is the same with and without the limit: 100 relus take
     * 100 x 32 = 3200 cycles after the first dispatch (+ 1 for the loop entry). */
    const char *shortrun = ".core 0\nloop 100\nvpu.relu spad[0x100], spad[0], 8, 16, bf16\n"
                           "endloop\n";
    core_report *a, *b;
    CU_ASSERT_EQUAL_FATAL(run_src_opts(shortrun, NULL, &a, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(run_src_opts(shortrun, &lim, &b, &e), NP_OK);
    CU_ASSERT_EQUAL(a->total_cycles, b->total_cycles);
    CU_ASSERT_EQUAL(a->total_cycles, 1u + 3200u);
    core_report_free(a);
    core_report_free(b);
    /* A deadlock is still a deadlock, reported at the cycle it happened, not at the limit. */
    const char *dead = ".core 0\nsem.wait vpu, s7\nfence\nnop\n";
    np_err e1 = {0}, e2 = {0};
    CU_ASSERT_EQUAL(run_src_opts(dead, NULL, &r, &e1), NP_ERR_DEADLOCK);
    CU_ASSERT_EQUAL(run_src_opts(dead, &lim, &r, &e2), NP_ERR_DEADLOCK);
    CU_ASSERT_STRING_EQUAL(e1.msg, e2.msg);
}
