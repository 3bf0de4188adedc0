/* test_core_matmul.c — the compiler's tiled matmul generator (compiler/kgen_matmul) run on the
 * timing-mode core. Expected figures come from the array formula of the tile shapes (checked
 * on its own in test_mxu.c) and from hand-counted HBM traffic, never from a run. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "arch.h"
#include "core.h"
#include "harness.h"
#include "kgen_matmul.h"
#include "mxu_timing.h"

static arch_config tiny2(const char *s1, const char *s2, const char *s3)
{
    arch_config cfg;
    np_err e = {0};
    const char *sets[3] = {s1, s2, s3};
    size_t n = s3 ? 3 : s2 ? 2 : s1 ? 1 : 0;
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", sets, n, &cfg, &e), NP_OK);
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

static uint64_t umin(uint64_t a, uint64_t b) { return a < b ? a : b; }

static const uint64_t shapes[][3] = {{4, 4, 4},   {16, 16, 16}, {13, 7, 29}, {33, 20, 9},
                                     {1, 1, 1},   {70, 5, 3},   {9, 40, 50}, {64, 16, 64}};

TEST(generated_matmul_mxu_time_is_the_sum_of_the_array_formula_over_its_tiles)
{
    static const char *dfs[] = {"core.dataflow=os", "core.dataflow=ws", "core.dataflow=is"};
    for (int d = 0; d < 3; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            arch_config cfg = tiny2(dfs[d], "chip.hbm_latency_ns=0", "chip.hbm_gb_per_s=1000000");
            kgen_matmul mm = {shapes[s][0], shapes[s][1], shapes[s][2], ISA_DTYPE_BF16, 0, 0, 0, 1};
            np_err e = {0};
            char *text;
            isa_program *p;
            CU_ASSERT_EQUAL_FATAL(kgen_matmul_build(&cfg, &mm, &text, &p, &e), NP_OK);
            CU_ASSERT_EQUAL_FATAL(kgen_matmul_tiles(&cfg, &mm, &e), NP_OK);
            core_report *r;
            CU_ASSERT_EQUAL_FATAL(core_sim_run(&cfg, p, NULL, &r, &e), NP_OK);
            /* Walk the tiles the way the generator documents them. */
            mxu_array a;
            mxu_array_from_arch(&cfg, &a);
            uint64_t mxu = 0, e2 = 2, M = mm.m, N = mm.n, K = mm.k;
            uint64_t rd = 0, wr = 0;
            for (uint64_t i = 0; i < M; i += mm.tm)
                for (uint64_t j = 0; j < N; j += mm.tn) {
                    uint64_t tm = umin(mm.tm, M - i), tn = umin(mm.tn, N - j);
                    for (uint64_t k = 0; k < K; k += mm.tk) {
                        uint64_t tk = umin(mm.tk, K - k);
                        mxu += mxu_gemm_cycles(&a, tm, tn, tk);
                        rd += (tm * tk + tk * tn) * e2;
                    }
                    mxu += (tm * tn + 3) / 4; /* drain: one 4-wide accumulator row per cycle */
                    wr += tm * tn * e2;
                }
            CU_ASSERT_EQUAL(unit(r, "core0.mxu")->busy_cycles, mxu);
            /* A is read once per column of tiles, B once per row of tiles, C written once. */
            uint64_t col_tiles = (N + mm.tn - 1) / mm.tn, row_tiles = (M + mm.tm - 1) / mm.tm;
            CU_ASSERT_EQUAL(rd, (col_tiles * M * K + row_tiles * K * N) * e2);
            CU_ASSERT_EQUAL(r->hbm_read_bytes, rd);
            CU_ASSERT_EQUAL(r->hbm_write_bytes, M * N * e2);
            CU_ASSERT_EQUAL(r->hbm_write_bytes, wr);
            core_report_free(r);
            isa_program_free(p);
            free(text);
        }
}

TEST(one_tile_matmul_with_ideal_memory_costs_the_scalesim_cycles)
{
    /* 16 x 16 x 16 fits one tile (TK = 4R = 16, TN = 4C = 16): the array is busy exactly
     * SCALE-Sim's figure: ws on 4 x 4: Sr = K = 16 -> 4, Sc = N = 16 -> 4, T = M = 16:
     * 16 folds x (8 + 4 + 16 - 2) = 416, plus the drain of 16 x 16 / 4 = 64 cycles. */
    arch_config cfg = tiny2("chip.hbm_latency_ns=0", "chip.hbm_gb_per_s=1000000", NULL);
    kgen_matmul mm = {16, 16, 16, ISA_DTYPE_BF16, 0, 0, 0, 1};
    np_err e = {0};
    char *text;
    isa_program *p;
    CU_ASSERT_EQUAL_FATAL(kgen_matmul_build(&cfg, &mm, &text, &p, &e), NP_OK);
    core_report *r;
    CU_ASSERT_EQUAL_FATAL(core_sim_run(&cfg, p, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(unit(r, "core0.mxu")->busy_cycles, 416u + 64u);
    core_report_free(r);
    isa_program_free(p);
    free(text);
}

TEST(tiles_keep_the_streamed_dimension_whole_so_one_tile_costs_the_scalesim_cycles)
{
    /* os streams K: 16 x 16 x 64 is one tile with K whole: Sr = M = 16 -> 4 folds, Sc = N =
     * 16 -> 4, T = 64: 16 x (4 + 4 + 64 - 2) = 1120, plus the drain 16 x 16 / 4 = 64. is
     * streams N: 16 x 64 x 16: Sr = K = 16 -> 4, Sc = M = 16 -> 4, T = 64:
     * 16 x (8 + 4 + 64 - 2) = 1184, plus the drain 16 x 64 / 4 = 256. */
    static const struct { const char *df; uint64_t m, n, k, mxu; } c[] = {
        {"core.dataflow=os", 16, 16, 64, 1120 + 64}, {"core.dataflow=is", 16, 64, 16, 1184 + 256}};
    for (int i = 0; i < 2; i++) {
        arch_config cfg = tiny2(c[i].df, "chip.hbm_latency_ns=0", "chip.hbm_gb_per_s=1000000");
        kgen_matmul mm = {c[i].m, c[i].n, c[i].k, ISA_DTYPE_BF16, 0, 0, 0, 1};
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(kgen_matmul_tiles(&cfg, &mm, &e), NP_OK);
        CU_ASSERT(mm.tm == c[i].m && mm.tn == c[i].n && mm.tk == c[i].k);
        char *text;
        isa_program *p;
        CU_ASSERT_EQUAL_FATAL(kgen_matmul_build(&cfg, &mm, &text, &p, &e), NP_OK);
        core_report *r;
        CU_ASSERT_EQUAL_FATAL(core_sim_run(&cfg, p, NULL, &r, &e), NP_OK);
        CU_ASSERT_EQUAL(unit(r, "core0.mxu")->busy_cycles, c[i].mxu);
        core_report_free(r);
        isa_program_free(p);
        free(text);
    }
}

TEST(double_buffering_overlaps_the_dma_with_the_array)
{
    /* On the plain tiny preset the DMA is busy most of the time; with double buffering the
     * run is shorter than DMA and MXU time laid end to end. */
    arch_config cfg = tiny2(NULL, NULL, NULL);
    kgen_matmul mm = {64, 64, 128, ISA_DTYPE_BF16, 0, 0, 0, 1};
    np_err e = {0};
    char *text;
    isa_program *p;
    CU_ASSERT_EQUAL_FATAL(kgen_matmul_build(&cfg, &mm, &text, &p, &e), NP_OK);
    core_report *r;
    CU_ASSERT_EQUAL_FATAL(core_sim_run(&cfg, p, NULL, &r, &e), NP_OK);
    uint64_t dma = unit(r, "core0.dma")->busy_cycles, mxu = unit(r, "core0.mxu")->busy_cycles;
    CU_ASSERT(r->total_cycles < dma + mxu);
    CU_ASSERT(r->total_cycles >= dma && r->total_cycles >= mxu);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "mode=accum"));
    core_report_free(r);
    isa_program_free(p);
    free(text);
}

TEST(tiles_that_do_not_fit_are_range_errors)
{
    arch_config cfg = tiny2(NULL, NULL, NULL);
    np_err e = {0};
    kgen_matmul zero = {0, 4, 4, ISA_DTYPE_BF16, 0, 0, 0, 1};
    CU_ASSERT_EQUAL(kgen_matmul_tiles(&cfg, &zero, &e), NP_ERR_RANGE);
    /* 64 x 32 x 4 bytes = 8 KiB of accumulators > 4 KiB. */
    kgen_matmul big = {64, 32, 16, ISA_DTYPE_BF16, 64, 32, 16, 1};
    CU_ASSERT_EQUAL(kgen_matmul_tiles(&cfg, &big, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "accumulator"));
    char *text;
    isa_program *p;
    CU_ASSERT_EQUAL(kgen_matmul_build(&cfg, &big, &text, &p, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NULL(text);
    CU_ASSERT_PTR_NULL(p);
    /* The operands start at 1 MiB of HBM: a 1 MiB HBM holds none of them. */
    arch_config small = tiny2("chip.hbm_bytes=1 MiB", NULL, NULL);
    kgen_matmul one = {16, 16, 16, ISA_DTYPE_BF16, 0, 0, 0, 1};
    CU_ASSERT_EQUAL(kgen_matmul_build(&small, &one, &text, NULL, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "HBM"));
}

static json_t *layer_json(const char *df, const char *array, const char *opt, const char *val)
{
    harness_run r = harness_npusim("layer", "--arch", "tiny", "--set", "core.sram_bytes=4 MiB",
                                   "--set", "core.acc_bytes=1 MiB", "--array", array,
                                   "--dataflow", df, opt, val, "--json", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    harness_run_free(&r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    json_t *l = json_array_get(json_object_get(j, "layers"), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    json_incref(l);
    json_decref(j);
    return l;
}

static json_int_t jint(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

TEST(npusim_layer_reports_scalesim_compute_cycles_and_simulated_totals)
{
    /* SCALE-Sim v2's golden reports for GEMM 256x128x256 on 32x32 (see test_mxu.c): compute
     * cycles 10175 (os), 11199 (ws), 14207 (is); SRAM counts as there. */
    static const struct { const char *df; json_int_t compute, ifmap, filter, ofmap; } g[] = {
        {"os", 10175, 262144, 262144, 34816},
        {"ws", 11199, 262144, 32768, 262144},
        {"is", 14207, 65536, 262144, 262144},
    };
    for (int i = 0; i < 3; i++) {
        json_t *l = layer_json(g[i].df, "32x32", "--gemm", "256,128,256");
        CU_ASSERT_EQUAL(jint(l, "compute_cycles"), g[i].compute);
        CU_ASSERT_EQUAL(jint(l, "stall_cycles"), jint(l, "total_cycles") - g[i].compute);
        CU_ASSERT(jint(l, "total_cycles") > g[i].compute);
        CU_ASSERT_EQUAL(jint(json_object_get(l, "sram_reads"), "ifmap"), g[i].ifmap);
        CU_ASSERT_EQUAL(jint(json_object_get(l, "sram_reads"), "filter"), g[i].filter);
        CU_ASSERT_EQUAL(jint(json_object_get(l, "sram_writes"), "ofmap"), g[i].ofmap);
        CU_ASSERT_EQUAL(jint(l, "dram_write_bytes"), 256 * 128 * 2);
        double map = json_real_value(json_object_get(l, "mapping_efficiency_pct"));
        CU_ASSERT(map > 99.999 && map < 100.001);
        json_decref(l);
    }
    /* Weight double-buffering hides all preloads but the first: ws 32 folds x (32 + 32 + 256
     * - 2) + 32 = 10208 busy cycles, reported SCALE-Sim style as 10207. */
    harness_run r = harness_npusim("layer", "--arch", "tiny", "--set", "core.sram_bytes=4 MiB",
                                   "--set", "core.acc_bytes=1 MiB", "--set",
                                   "core.mxu_weight_double_buffer=1", "--array", "32x32",
                                   "--dataflow", "ws", "--gemm", "256,128,256", "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    harness_run_free(&r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(jint(json_array_get(json_object_get(j, "layers"), 0), "compute_cycles"), 10207);
    json_decref(j);
}

TEST(npusim_layer_maps_a_conv_the_scalesim_way)
{
    /* 13x13x5 input, 3x3 filters, 7 of them, stride 3: E = ceil((13 - 3 + 3) / 3) = 5, so
     * M = 25, N = 7, K = 45. ws on 4x4: Sr = 45 -> 12 folds, Sc = 7 -> 2, T = 25:
     * 24 x (8 + 4 + 25 - 2) = 840 cycles, SCALE-Sim reports 839. */
    json_t *l = layer_json("ws", "4x4", "--conv", "13,13,3,3,5,7,3");
    CU_ASSERT_EQUAL(jint(l, "m"), 25);
    CU_ASSERT_EQUAL(jint(l, "n"), 7);
    CU_ASSERT_EQUAL(jint(l, "k"), 45);
    CU_ASSERT_EQUAL(jint(l, "compute_cycles"), 839);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(l, "name")), "conv");
    json_decref(l);
    /* 12x12x2, 3x3, 4 filters, stride 2: SCALE-Sim's E = ceil((12 - 3 + 2) / 2) = 6 -> M = 36;
     * --pad 0 (ordinary): (12 - 3) / 2 + 1 = 5 -> M = 25; --pad 1: (14 - 3) / 2 + 1 = 6. */
    static const struct { const char *pad; json_int_t m; } pads[] = {{NULL, 36}, {"0", 25}, {"1", 36}};
    for (int i = 0; i < 3; i++) {
        harness_run pr = pads[i].pad
            ? harness_npusim("layer", "--arch", "tiny", "--conv", "12,12,3,3,2,4,2", "--pad",
                             pads[i].pad, "--json", NULL)
            : harness_npusim("layer", "--arch", "tiny", "--conv", "12,12,3,3,2,4,2", "--json", NULL);
        CU_ASSERT_EQUAL_FATAL(pr.exit_status, 0);
        json_error_t pe;
        json_t *pj = json_loads(pr.out, 0, &pe);
        harness_run_free(&pr);
        CU_ASSERT_PTR_NOT_NULL_FATAL(pj);
        json_t *pl = json_array_get(json_object_get(pj, "layers"), 0);
        CU_ASSERT_EQUAL(jint(pl, "m"), pads[i].m);
        CU_ASSERT_EQUAL(jint(pl, "k"), 18);
        /* Every variant runs the conv kernel (implicit im2col). ws on tiny: one M tile (TM
         * = M <= 4096 / (4 x 4) accumulator rows) and one N tile (N = 4), so the HBM reads
         * are the input rows and columns the windows reach, staged once (SCALE-Sim's E = 6
         * on the input padded to 13 x 13, and --pad 1 on 14 x 14: 13 x 13 of them, --pad 0
         * 11 x 11), 2 channels x 2 B each, plus the filters once (18 x 4 x 2 = 144 B); the
         * only writes are C (M x 4 x 2 B); no A round trip. */
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(pl, "kernel")), "conv");
        json_int_t side = pads[i].m == 25 ? 11 : 13;
        CU_ASSERT_EQUAL(jint(pl, "dram_read_bytes"), side * side * 2 * 2 + 144);
        CU_ASSERT_EQUAL(jint(pl, "dram_write_bytes"), pads[i].m * 4 * 2);
        if (pads[i].pad && !strcmp(pads[i].pad, "0")) /* ws on 4x4: Sr = 18 -> 5 folds, T =
                                                          25: 5 x (8 + 4 + 25 - 2) - 1 */
            CU_ASSERT_EQUAL(jint(pl, "compute_cycles"), 174);
        if (!pads[i].pad) /* SCALE-Sim's: T = 36: 5 x (8 + 4 + 36 - 2) - 1 = 229 */
            CU_ASSERT_EQUAL(jint(pl, "compute_cycles"), 229);
        json_decref(pj);
    }
    harness_run r = harness_npusim("layer", "--gemm", "1,2,3", "--conv", "1,1,1,1,1,1,1", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    harness_run_free(&r);
    r = harness_npusim("layer", "--gemm", "1,2", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    harness_run_free(&r);
}

TEST(npusim_layer_reads_a_topology_file_and_prints_the_compute_report_columns)
{
    /* tests/data/hw/mini_conv.csv on 4x4 ws: conv_a 839 (above); each depthwise channel of
     * DP_b: 16 x 1 x 9 -> Sr = 9 -> 3 folds, T = 16: 3 x (8 + 4 + 16 - 2) - 1 = 77; fc
     * 256 x 128 x 256: Sr = 256 -> 64, Sc = 128 -> 32, T = 256: 2048 x 266 - 1 = 544767. */
    const char *path = harness_src_path("tests/data/hw/mini_conv.csv");
    harness_run r = harness_npusim("layer", "--arch", "tiny", "--array", "4x4", "--dataflow",
                                   "ws", "--topology", path, "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    harness_run_free(&r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    json_t *ls = json_object_get(j, "layers");
    CU_ASSERT_EQUAL_FATAL(json_array_size(ls), 4u);
    static const json_int_t want[] = {839, 77, 77, 544767};
    for (size_t i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(jint(json_array_get(ls, i), "compute_cycles"), want[i]);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(ls, 2), "name")),
                           "DP_bChannel_1");
    /* conv rows run the conv kernel, the GEMM row the matmul. Each is one tile on tiny ws, so
     * HBM reads are the input rows the windows reach staged once plus the filters once,
     * writes only C (2 B elements): conv_a: SCALE-Sim's E = 5 (the kernel runs on the input
     * padded to 15 x 15, every row and column of it reached), 5 channels, K = 45, N = 7:
     * 15 x 15 x 5 x 2 + 45 x 7 x 2 = 2880 read, 25 x 7 x 2 = 350 written; each DP_b
     * channel is a one-channel 6 x 6 conv, 3 x 3, 1 filter: M = 16, K = 9: 6 x 6 x 2 +
     * 9 x 2 = 90 read, 16 x 2 = 32 written. */
    static const struct { const char *kernel; json_int_t rd, wr; } io[] = {
        {"conv", 2880, 350}, {"conv", 90, 32}, {"conv", 90, 32}, {"matmul", -1, 256 * 128 * 2}};
    for (size_t i = 0; i < 4; i++) {
        json_t *l = json_array_get(ls, i);
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(l, "kernel")), io[i].kernel);
        if (io[i].rd >= 0)
            CU_ASSERT_EQUAL(jint(l, "dram_read_bytes"), io[i].rd);
        CU_ASSERT_EQUAL(jint(l, "dram_write_bytes"), io[i].wr);
    }
    json_decref(j);
    r = harness_npusim("layer", "--arch", "tiny", "--array", "4x4", "--dataflow", "ws",
                       "--topology", path, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "LayerID, Total Cycles, Stall Cycles, Overall Util %, "
                                         "Mapping Efficiency %, Compute Util %, Compute Cycles,"
                                         "\n0, "));
    harness_run_free(&r);
}

TEST(resnet18_and_bert_base_topologies_run_on_a_128x128_array_in_every_dataflow)
{
    /* Inputs are padded in the file (SCALE-Sim reads no padding). Hand checks: conv1
     * (230x230x3, 7x7, 64, stride 2) has E = ceil((230 - 7 + 2) / 2) = 113 -> M = 12769,
     * K = 147; os: Sr = M -> 100 folds, Sc = 64 -> 1, T = 147: 100 x (128 + 128 + 147 - 2)
     * - 1 = 40099. BERT ffn1 (512 x 3072 x 768) ws: Sr = 768 -> 6, Sc = 3072 -> 24, T = 512:
     * 144 x (256 + 128 + 512 - 2) - 1 = 128735, SCALE-Sim's (no weight double-buffering);
     * with tpu-pod's (f = 2) only the first fold's 128-cycle preload is exposed: 144 x (128
     * + 128 + 512 - 2) + 128 - 1 = 110431. */
    static const char *dfs[] = {"os", "ws", "is"};
    static const struct {
        const char *file;
        size_t layers;
        const char *df;
        size_t idx;
        json_int_t cycles;
        const char *wdb;
    } topo[] = {{"configs/topologies/resnet18.csv", 21, "os", 0, 40099,
                 "core.mxu_weight_double_buffer=0"},
                {"configs/topologies/bert_base.csv", 8, "ws", 6, 128735,
                 "core.mxu_weight_double_buffer=0"},
                {"configs/topologies/bert_base.csv", 8, "ws", 6, 110431,
                 "core.mxu_weight_double_buffer=1"}};
    for (size_t f = 0; f < 3; f++)
        for (int d = 0; d < 3; d++) {
            harness_run r = harness_npusim("layer", "--arch", "tpu-pod", "--set", topo[f].wdb,
                                           "--array", "128x128", "--dataflow", dfs[d],
                                           "--topology", harness_src_path(topo[f].file), "--json",
                                           NULL);
            CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
            json_error_t je;
            json_t *j = json_loads(r.out, 0, &je);
            harness_run_free(&r);
            CU_ASSERT_PTR_NOT_NULL_FATAL(j);
            json_t *ls = json_object_get(j, "layers");
            CU_ASSERT_EQUAL(json_array_size(ls), topo[f].layers);
            for (size_t i = 0; i < json_array_size(ls); i++) {
                json_t *l = json_array_get(ls, i);
                CU_ASSERT(jint(l, "total_cycles") > jint(l, "compute_cycles"));
                CU_ASSERT(jint(l, "dram_read_bytes") > 0 && jint(l, "dram_write_bytes") > 0);
            }
            if (!strcmp(dfs[d], topo[f].df))
                CU_ASSERT_EQUAL(jint(json_array_get(ls, topo[f].idx), "compute_cycles"),
                                topo[f].cycles);
            json_decref(j);
        }
}

TEST(npusim_layer_takes_the_array_from_a_scalesim_config_file)
{
    /* The file is SCALE-Sim's example: 32x32, os, 3 x 64 KiB SRAM, Bandwidth 64. Its own
     * golden compute cycles for 256x128x256 are 10175 (os); --dataflow overrides: 11199 (ws). */
    const char *cfgp = harness_src_path("tests/data/hw/scale_32x32_os.cfg");
    static const struct { const char *df; json_int_t cycles; } want[] = {{NULL, 10175}, {"ws", 11199}};
    for (int i = 0; i < 2; i++) {
        harness_run r = want[i].df
            ? harness_npusim("layer", "--arch", "edge", "--scalesim-config", cfgp, "--dataflow",
                             want[i].df, "--gemm", "256,128,256", "--json", NULL)
            : harness_npusim("layer", "--arch", "edge", "--scalesim-config", cfgp, "--gemm",
                             "256,128,256", "--json", NULL);
        CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
        json_error_t je;
        json_t *j = json_loads(r.out, 0, &je);
        harness_run_free(&r);
        CU_ASSERT_PTR_NOT_NULL_FATAL(j);
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "array")), "32x32");
        CU_ASSERT_EQUAL(jint(json_array_get(json_object_get(j, "layers"), 0), "compute_cycles"),
                        want[i].cycles);
        json_decref(j);
    }
}

TEST(two_cores_split_the_tiles_and_share_the_hbm)
{
    /* 64 x 32 x 16 ws on tiny: tiles TM = 64, TN = 16, TK = 16 -> tiles (0, 0) and (0, 16):
     * one per core, each one fold grid of 4 x 4 folds x (8 + 4 + 64 - 2) = 1184 cycles plus a
     * 64 x 16 / 4 = 256-cycle drain. With ideal memory each core's array is busy 1440. */
    arch_config cfg = tiny2("chip.hbm_latency_ns=0", "chip.hbm_gb_per_s=1000000", NULL);
    kgen_matmul mm = {64, 32, 16, ISA_DTYPE_BF16, 0, 0, 0, 2};
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(kgen_matmul_tiles(&cfg, &mm, &e), NP_OK);
    CU_ASSERT(mm.tm == 64 && mm.tn == 16 && mm.tk == 16);
    char *text;
    isa_program *p;
    CU_ASSERT_EQUAL_FATAL(kgen_matmul_build(&cfg, &mm, &text, &p, &e), NP_OK);
    core_report *r;
    CU_ASSERT_EQUAL_FATAL(core_sim_run(&cfg, p, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL(unit(r, "core0.mxu")->busy_cycles, 1440u);
    CU_ASSERT_EQUAL(unit(r, "core1.mxu")->busy_cycles, 1440u);
    core_report_free(r);
    isa_program_free(p);
    free(text);
    /* On the plain preset both cores load 64 x 16 + 16 x 16 bf16 = 2560 B at once through
     * 16 B/cycle of HBM: they wait for each other, which shows as DMA stall. */
    arch_config plain = tiny2(NULL, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(kgen_matmul_build(&plain, &mm, &text, &p, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(core_sim_run(&plain, p, NULL, &r, &e), NP_OK);
    CU_ASSERT(unit(r, "core0.dma")->stall_cycles > 0 && unit(r, "core1.dma")->stall_cycles > 0);
    core_report_free(r);
    isa_program_free(p);
    free(text);
    kgen_matmul three = mm;
    three.cores = 3; /* tiny has 2 */
    CU_ASSERT_EQUAL(kgen_matmul_build(&plain, &three, &text, NULL, &e), NP_ERR_RANGE);
}

/* Counts the lines of text with two HBM operands. */
static unsigned count_hbm_to_hbm(const char *text)
{
    unsigned n = 0;
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *h = strstr(l, "hbm["), *end = strchr(l, '\n');
        if (h && (h = strstr(h + 1, "hbm[")) && (!end || h < end))
            n++;
    }
    return n;
}

/* Counts the dma.copy instructions that ran with their source in HBM [lo, hi) (from the
 * trace's resolved text, "dma.copy spad[...], hbm[0x...], ..."). */
/* Copies from HBM range [lo, hi) into the scratchpad (n), and copies inside the scratchpad
 * (spad). */
typedef struct src_count {
    uint64_t lo, hi;
    unsigned n, spad;
} src_count;

static void count_src(void *ctx, const core_trace_insn *t)
{
    src_count *c = ctx;
    const char *h = strstr(t->text, ", hbm[");
    if (strncmp(t->text, "dma.copy spad[", 14) != 0)
        return;
    if (!h) {
        c->spad++;
        return;
    }
    uint64_t a = strtoull(h + 6, NULL, 0);
    if (a >= c->lo && a < c->hi)
        c->n++;
}

TEST(conv_hbm_traffic_is_the_staged_input_rows_plus_the_filters_and_c_only)
{
    /* 9 x 9 x 3 input, 3 x 3 filters, 5 of them, stride 2: E = F = 4, M = 16, K = 27, N = 5,
     * bf16 (2 B). Per tile row the input rows its output rows need are staged once from X
     * (every column: the block is (F - 1) x 2 + 3 = 9 = W wide), B is read once per (tile,
     * slice), C written once:
     *   reads  = staged rows x 9 x 3 x 2 + ceil(M / TM) x K x N x 2
     *   writes = M x N x 2 = 160 (no im2col matrix written to HBM and read back).
     * TM = 6: the tile rows [0, 6), [6, 12), [12, 16) cover output rows {0, 1}, {1, 2}, {3},
     * so their blocks are input rows 0-4, 2-6 and 6-8: 5 + 5 + 3 = 13 rows, 702 bytes, and
     * 3 x 27 x 5 x 2 = 810 of B: 1512 read, from three staging copies.
     * The A slices are gathered from the block inside the scratchpad:
     * (a) TN = 3, TK = 8: the M tiles split at output-row boundaries (rows of 4 pixels) into
     * {row 0, pixels 4-5}, {pixels 6-7, row 2}, {row 3} = 5 pieces; the K slices [0, 8),
     * [8, 16), [16, 24), [24, 27) touch filter rows (runs of 9 elements) {0}, {0, 1},
     * {1, 2}, {2} = 6 (slice, run) pairs, none whole; one gather per piece x pair, for each
     * of the 2 columns of N tiles: 5 x 6 x 2 = 60.
     * (b) TN = 5, TK = 27: the one slice holds all 3 filter rows whole, so per piece and
     * filter row would be 5 x 3 = 15 copies; instead one copy per output row a tile touches
     * covers the 3 filter rows (evenly stepped in the block): rows {0, 1}, {1, 2}, {3}: 5. */
    static const struct { uint64_t tm, tn, tk; unsigned gathers; uint64_t rd; } cs[] = {
        {6, 3, 8, 60, 702 + 810}, {6, 5, 27, 5, 702 + 810}};
    static const char *dfs[] = {"core.dataflow=os", "core.dataflow=ws", "core.dataflow=is"};
    for (int c = 0; c < 2; c++)
        for (int d = 0; d < 3; d++) {
            arch_config cfg = tiny2(dfs[d], "chip.hbm_latency_ns=0", "chip.hbm_gb_per_s=1000000");
            kgen_conv cv = {.h = 9, .w = 9, .c = 3, .r = 3, .s = 3, .filters = 5, .stride = 2,
                            .dtype = ISA_DTYPE_BF16, .cores = 1, .tm = cs[c].tm,
                            .tn = cs[c].tn, .tk = cs[c].tk};
            np_err e = {0};
            char *text;
            isa_program *p;
            CU_ASSERT_EQUAL_FATAL(kgen_conv_build(&cfg, &cv, &text, &p, &e), NP_OK);
            CU_ASSERT_PTR_NULL(isa_program_symbol(p, "A"));
            /* no HBM-to-HBM copy */
            CU_ASSERT_EQUAL(count_hbm_to_hbm(text), 0u);
            const isa_symbol *xs = isa_program_symbol(p, "X");
            CU_ASSERT_PTR_NOT_NULL_FATAL(xs);
            src_count gathers = {xs->addr, xs->addr + xs->size, 0, 0};
            core_sim_opts so = {.trace = count_src, .trace_ctx = &gathers};
            core_report *r;
            CU_ASSERT_EQUAL_FATAL(core_sim_run_opts(&cfg, p, &so, NULL, &r, &e), NP_OK);
            CU_ASSERT_EQUAL(gathers.n, 3u);
            CU_ASSERT_EQUAL(gathers.spad, cs[c].gathers);
            CU_ASSERT_EQUAL(r->hbm_read_bytes, cs[c].rd);
            CU_ASSERT_EQUAL(r->hbm_write_bytes, 160u);
            /* one kernel, no im2col prologue */
            CU_ASSERT_EQUAL_FATAL(r->n_kernels, 1u);
            CU_ASSERT_STRING_EQUAL(r->kernels[0].name, "conv");
            /* the array does the tiled GEMM's work: the array formula over the tiles plus
             * the drains (one 4-wide accumulator row per cycle) */
            mxu_array a;
            mxu_array_from_arch(&cfg, &a);
            uint64_t mxu = 0, TM = cs[c].tm, TN = cs[c].tn, TK = cs[c].tk;
            for (uint64_t i = 0; i < 16; i += TM)
                for (uint64_t j = 0; j < 5; j += TN) {
                    uint64_t tm = umin(TM, 16 - i), tn = umin(TN, 5 - j);
                    for (uint64_t k = 0; k < 27; k += TK)
                        mxu += mxu_gemm_cycles(&a, tm, tn, umin(TK, 27 - k));
                    mxu += (tm * tn + 3) / 4;
                }
            CU_ASSERT_EQUAL(unit(r, "core0.mxu")->busy_cycles, mxu);
            core_report_free(r);
            isa_program_free(p);
            free(text);
        }
}

TEST(conv_tiles_cut_the_streamed_dimension_on_window_boundaries)
{
    np_err e = {0};
    kgen_matmul mm;
    /* ws streams M. 12 x 12 x 1 input, 3 x 3, 16 filters: E = F = 10, M = 100, K = 9,
     * N = 16. The matmul's TM is the accumulators' 4096 / (4 x 16) = 64 rows -> 2 tiles;
     * cut on output rows without adding a tile: ceil(10 / 2) = 5 rows = 50 pixels. */
    arch_config ws = tiny2("core.dataflow=ws", NULL, NULL);
    kgen_conv a = {.h = 12, .w = 12, .c = 1, .r = 3, .s = 3, .filters = 16, .stride = 1,
                   .dtype = ISA_DTYPE_BF16, .cores = 1};
    CU_ASSERT_EQUAL_FATAL(kgen_conv_tiles(&ws, &a, &mm, &e), NP_OK);
    CU_ASSERT(mm.m == 100 && mm.tm == 50 && mm.tn == 16 && mm.tk == 9);
    /* os streams K. 6 x 6 x 60 input, 3 x 3, 16 filters: M = 16, K = 540, N = 16; TM = TN =
     * 16, and the scratchpad leaves TK = (65536 - 16 x 16 x 2) / (2 x 32 x 2) = 508 -> 2
     * slices; cut on filter rows (S x C = 180): ceil(3 / 2) = 2 rows = 360. */
    arch_config os = tiny2("core.dataflow=os", NULL, NULL);
    kgen_conv b = {.h = 6, .w = 6, .c = 60, .r = 3, .s = 3, .filters = 16, .stride = 1,
                   .dtype = ISA_DTYPE_BF16, .cores = 1};
    CU_ASSERT_EQUAL_FATAL(kgen_conv_tiles(&os, &b, &mm, &e), NP_OK);
    CU_ASSERT(mm.k == 540 && mm.tk == 360 && mm.tm == 16 && mm.tn == 16);
    /* given tiles are kept */
    b.tk = 100;
    CU_ASSERT_EQUAL_FATAL(kgen_conv_tiles(&os, &b, &mm, &e), NP_OK);
    CU_ASSERT_EQUAL(mm.tk, 100u);
    /* a filter larger than the input is a range error */
    kgen_conv bad = {.h = 2, .w = 6, .c = 1, .r = 3, .s = 3, .filters = 1, .stride = 1,
                     .dtype = ISA_DTYPE_BF16};
    char *text;
    CU_ASSERT_EQUAL(kgen_conv_build(&os, &bad, &text, NULL, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NULL(text);
}

TEST(conv_kernel_double_buffers_its_gathers_and_splits_over_two_cores)
{
    /* 12 x 12 x 8 input, 3 x 3, 16 filters (M = 100, K = 72, N = 16) on plain tiny ws: K
     * slices of 4 x 4 = 16 -> 5 slices a tile, so the DMA gathers slice l + 1 while the
     * array multiplies slice l: the run is shorter than DMA and array time end to end. */
    arch_config cfg = tiny2("core.dataflow=ws", NULL, NULL);
    kgen_conv cv = {.h = 12, .w = 12, .c = 8, .r = 3, .s = 3, .filters = 16, .stride = 1,
                    .dtype = ISA_DTYPE_BF16, .cores = 1};
    np_err e = {0};
    char *text;
    isa_program *p;
    CU_ASSERT_EQUAL_FATAL(kgen_conv_build(&cfg, &cv, &text, &p, &e), NP_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "mode=accum"));
    core_report *r;
    CU_ASSERT_EQUAL_FATAL(core_sim_run(&cfg, p, NULL, &r, &e), NP_OK);
    uint64_t dma = unit(r, "core0.dma")->busy_cycles, mxu = unit(r, "core0.mxu")->busy_cycles;
    CU_ASSERT(r->total_cycles < dma + mxu);
    CU_ASSERT(r->total_cycles >= dma && r->total_cycles >= mxu);
    core_report_free(r);
    isa_program_free(p);
    free(text);
    /* On 2 cores each runs its own tiles, gathers included: no barrier, one conv kernel per
     * core, both arrays busy. */
    cv.cores = 2, cv.tm = 50;
    CU_ASSERT_EQUAL_FATAL(kgen_conv_build(&cfg, &cv, &text, &p, &e), NP_OK);
    CU_ASSERT_PTR_NULL(strstr(text, "barrier"));
    CU_ASSERT_EQUAL_FATAL(core_sim_run(&cfg, p, NULL, &r, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(r->n_kernels, 2u);
    CU_ASSERT(unit(r, "core0.mxu")->busy_cycles > 0 && unit(r, "core1.mxu")->busy_cycles > 0);
    CU_ASSERT(unit(r, "core0.dma")->bytes > 0 && unit(r, "core1.dma")->bytes > 0);
    core_report_free(r);
    isa_program_free(p);
    free(text);
}

/* total_cycles of `npusim layer --arch tpu-pod --gemm 1024,1024,1024 --cores N`. */
static json_int_t layer_cores_total(const char *cores, json_int_t *dram_rd)
{
    harness_run r = harness_npusim("layer", "--arch", "tpu-pod", "--gemm", "1024,1024,1024",
                                   "--cores", cores, "--json", NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    harness_run_free(&r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    json_t *l = json_array_get(json_object_get(j, "layers"), 0);
    json_int_t t = jint(l, "total_cycles");
    *dram_rd = jint(l, "dram_read_bytes");
    json_decref(j);
    return t;
}

TEST(npusim_layer_splits_a_layer_over_cores_and_traces_each_layer)
{
    /* 1024^3 bf16 on tpu-pod (128 x 128 ws): 2 cores at most halve the time, more cannot
     * do better than 1/N, and every core reads at least its share of B: the reads only grow. */
    json_int_t rd1, rd2, rd4;
    json_int_t t1 = layer_cores_total("1", &rd1), t2 = layer_cores_total("2", &rd2),
               t4 = layer_cores_total("4", &rd4);
    CU_ASSERT(t2 < t1 && 2 * t2 >= t1);
    CU_ASSERT(t4 < t2 && 4 * t4 >= t1);
    CU_ASSERT(rd1 <= rd2 && rd2 <= rd4);
    CU_ASSERT_EQUAL(rd1, 3 * 1024 * 1024 * 2); /* A once, B twice (two 512-column tiles) */
    harness_run r = harness_npusim("layer", "--arch", "tpu-pod", "--gemm", "64,64,64", "--cores",
                                   "9", NULL); /* tpu-pod chips have 8 cores */
    CU_ASSERT_EQUAL(r.exit_status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--cores 9: the chip has 8 cores"));
    harness_run_free(&r);
    /* --trace: a "layers" thread with one slice per topology row, one after the other, each
     * as long as that layer's total_cycles at the core clock. */
    char path[] = "/tmp/npusim_layer_trace_XXXXXX";
    close(mkstemp(path));
    const char *topo = harness_src_path("tests/data/hw/mini_conv.csv");
    r = harness_npusim("layer", "--arch", "tpu-pod", "--topology", topo, "--trace", path, NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    harness_run_free(&r);
    harness_run rj = harness_npusim("layer", "--arch", "tpu-pod", "--topology", topo, "--json",
                                    NULL);
    CU_ASSERT_EQUAL_FATAL(rj.exit_status, 0);
    char *text = harness_read_file(path, NULL);
    json_error_t je;
    json_t *t = json_loads(text, 0, &je), *j = json_loads(rj.out, 0, &je);
    free(text);
    harness_run_free(&rj);
    CU_ASSERT_FATAL(t && j);
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", NULL, 0, &cfg, &e), NP_OK);
    json_t *ev = json_object_get(t, "traceEvents"), *layers = json_object_get(j, "layers");
    size_t n = 0;
    double ts = 0;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *x = json_array_get(ev, i);
        if (strcmp(json_string_value(json_object_get(x, "cat")) ? json_string_value(
                       json_object_get(x, "cat")) : "", "layer"))
            continue;
        json_t *l = json_array_get(layers, n++);
        CU_ASSERT_PTR_NOT_NULL_FATAL(l);
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(x, "name")),
                               json_string_value(json_object_get(l, "name")));
        double dur_cycles = json_number_value(json_object_get(x, "dur")) * 1e3 * cfg.core.clock_ghz;
        CU_ASSERT_DOUBLE_EQUAL(dur_cycles, (double)jint(l, "total_cycles"), 0.5);
        CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(x, "ts")), ts, 1e-6);
        ts += json_number_value(json_object_get(x, "dur"));
    }
    CU_ASSERT_EQUAL(n, json_array_size(layers));
    CU_ASSERT(n >= 2);
    json_decref(t);
    json_decref(j);
    remove(path);
}
