/* test_layer_sim.c — sim/layer_sim.h, the library behind `npusim layer`, called directly:
 * SCALE-Sim's fold arithmetic for one core's share of a GEMM split over cores, CALC mode, the
 * HBM bound and SCALE-Sim's padded conv, each against values worked by hand. */
#include <stdint.h>

#include "harness.h"
#include "layer_sim.h"

static arch_config ls_arch(const char *double_buffer)
{
    arch_config cfg;
    np_err e;
    const char *sets[] = {double_buffer};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tpu-pod", sets, double_buffer ? 1 : 0, &cfg, &e), NP_OK);
    return cfg;
}

TEST(a_gemm_on_four_cores_counts_stalls_against_one_cores_share_of_the_folds)
{
    /* 1024^3 ws on 128 x 128: 8 x 8 = 64 folds of 2 x 128 + 128 + 1024 - 2 = 1406 cycles
     * (SCALE-Sim: 64 x 1406 - 1 = 89,983); a core's share of 4 is 16 folds:
     * 16 x 1406 - 1 = 22,495 */
    arch_config cfg = ls_arch("core.mxu_weight_double_buffer=0");
    mxu_array arr;
    mxu_array_from_arch(&cfg, &arr);
    arr.pipelined = false;
    layer_result r;
    np_err e;
    CU_ASSERT_EQUAL_FATAL(layer_sim_run(&cfg, &arr, 1024, 1024, 1024, NULL, 4, false, NULL, &r,
                                        NULL, &e), NP_OK);
    CU_ASSERT_EQUAL(r.t.folds, 64);
    CU_ASSERT_EQUAL(r.t.scalesim_cycles, 89983);
    CU_ASSERT_EQUAL(r.compute_core, 22495);
    CU_ASSERT_EQUAL(r.total, r.sim_total);
    CU_ASSERT(r.total > r.compute_core);
    CU_ASSERT_EQUAL(r.stall, r.total - 22495);
    CU_ASSERT_STRING_EQUAL(r.kernel, "matmul");
    /* overall utilization: 1024^3 MACs over total cycles x 4 arrays of 128 x 128 */
    CU_ASSERT_DOUBLE_EQUAL(r.overall_pct, 100.0 * 1073741824.0 / ((double)r.total * 65536.0),
                           1e-9);
    json_decref(r.hbm_mesh);
    json_decref(r.l2);
    /* SCALE-Sim's CALC: memory never stalls, the total is the share's compute */
    CU_ASSERT_EQUAL_FATAL(layer_sim_run(&cfg, &arr, 1024, 1024, 1024, NULL, 4, true, NULL, &r,
                                        NULL, &e), NP_OK);
    CU_ASSERT_EQUAL(r.total, 22495);
    CU_ASSERT_EQUAL(r.stall, 0);
    json_decref(r.hbm_mesh);
    json_decref(r.l2);
}

TEST(double_buffered_weights_pay_the_preload_once_per_core)
{
    /* only the first fold pays the 128-cycle weight preload: 64 x 1278 + 128 - 1 = 81,919 in
     * all, 16 x 1278 + 128 - 1 = 20,575 for a core's share */
    arch_config cfg = ls_arch(NULL);
    mxu_array arr;
    mxu_array_from_arch(&cfg, &arr);
    arr.pipelined = false;
    layer_result r;
    np_err e;
    core_report *rep = NULL;
    CU_ASSERT_EQUAL_FATAL(layer_sim_run(&cfg, &arr, 1024, 1024, 1024, NULL, 4, true, NULL, &r,
                                        &rep, &e), NP_OK);
    CU_ASSERT_EQUAL(r.t.scalesim_cycles, 81919);
    CU_ASSERT_EQUAL(r.compute_core, 20575);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rep); /* the caller's, as promised */
    CU_ASSERT_EQUAL(rep->total_cycles, r.sim_total);
    core_report_free(rep);
    json_decref(r.hbm_mesh);
    json_decref(r.l2);
}

TEST(a_layer_larger_than_hbm_is_refused_and_products_saturate)
{
    arch_config cfg = ls_arch(NULL);
    np_err e;
    uint64_t words = cfg.chip.hbm_bytes / 2; /* bf16: exactly the HBM */
    CU_ASSERT_EQUAL(layer_sim_check_fits(&cfg, "x", words, 0, 0, &e), NP_OK);
    CU_ASSERT_EQUAL(layer_sim_check_fits(&cfg, "x", words, 1, 0, &e), NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "more than the chip's HBM"));
    CU_ASSERT_EQUAL(layer_sim_mul(UINT64_MAX / 2, 3), UINT64_MAX);
    CU_ASSERT_EQUAL(layer_sim_check_fits(&cfg, "x", layer_sim_mul(UINT64_MAX / 2, 3), 0, 0, &e),
                    NP_ERR_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "2^64"));
}

TEST(scalesims_conv_output_is_the_ordinary_output_of_the_input_padded_at_the_far_edges)
{
    /* 224 x 224, 7 x 7, stride 2: E = ceil((224 - 7 + 2) / 2) = 110, read from
     * (110 - 1) x 2 + 7 = 225 rows; 3 x 3 stride 1 on 56: E = 54, 56 rows (no padding) */
    mxu_conv c = {224, 224, 7, 7, 3, 64, 2, 2};
    kgen_conv k = layer_sim_scalesim_conv(&c);
    CU_ASSERT_EQUAL(k.h, 225);
    CU_ASSERT_EQUAL(k.w, 225);
    CU_ASSERT_EQUAL(k.c, 3);
    CU_ASSERT_EQUAL(k.filters, 64);
    mxu_conv d = {56, 56, 3, 3, 64, 64, 1, 1};
    k = layer_sim_scalesim_conv(&d);
    CU_ASSERT_EQUAL(k.h, 56);
    CU_ASSERT_EQUAL(k.w, 56);
}
