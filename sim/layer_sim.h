/* layer_sim.h — one layer of `npusim layer` simulated: SCALE-Sim's compute model of its GEMM
 * on the array (hw-model/mxu_timing.h) beside the kernel the compiler builds for it, run on the
 * timing-mode core. What the command prints is made from layer_result; the command parses
 * options and prints (sim/cmd_layer.c).
 *
 * The figures. compute_cycles is SCALE-Sim v2's for the layer's GEMM on one array; with
 * `cores` > 1 the output tiles are split over cores 0 .. cores-1 and the stalls are counted
 * against one core's share, its ceil(folds / cores) folds (compute_core). total and stall:
 * the simulated kernel's cycles and what exceeds compute_core, or in SCALE-Sim's CALC mode
 * (memory that never stalls the array) compute_core and 0. The DRAM bytes and bandwidth are
 * the simulated kernel's. */
#ifndef NPUSIM_SIM_LAYER_SIM_H
#define NPUSIM_SIM_LAYER_SIM_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "core.h"
#include "err.h"
#include "kgen_matmul.h"
#include "mxu_timing.h"
#include "mxu_topo.h"

/* One layer's figures: SCALE-Sim's compute model plus the simulated kernel. */
typedef struct layer_result {
    mxu_timing t;
    uint64_t compute_core; /* SCALE-Sim cycles of one core's share: ceil(folds / cores) folds */
    uint64_t sim_total;    /* the simulated kernel's cycles */
    uint64_t total, stall; /* as reported: the kernel's, or with CALC SCALE-Sim's (stall 0) */
    double overall_pct, dram_gbs;
    uint64_t dram_rd, dram_wr;
    uint64_t total_ps;
    const char *kernel; /* "conv" or "matmul" (static) */
    json_t *hbm_mesh;   /* the report's "hbm_mesh" (controllers on the mesh), or NULL: owned */
    json_t *l2;         /* the report's "l2" (chip.l2_bytes > 0), or NULL: owned */
} layer_result;

/* a x b, or UINT64_MAX when it overflows (which layer_sim_check_fits then refuses). */
uint64_t layer_sim_mul(uint64_t a, uint64_t b);

/* NP_ERR_RANGE (naming `what`) unless the layer's operands and result (bf16, element counts)
 * fit the chip's HBM: a bound that keeps every size and product the kernel generators compute
 * within 64 bits. */
np_status layer_sim_check_fits(const arch_config *cfg, const char *what, uint64_t in_elems,
                               uint64_t w_elems, uint64_t out_elems, np_err *err);

/* The conv kernel for SCALE-Sim's view of conv c: its output E = ceil((H - R + stride) /
 * stride) (likewise F) is the ordinary output of the input zero-padded at the bottom by
 * (E - 1) x stride + R - H (>= 0; likewise at the right). One core, bf16. */
kgen_conv layer_sim_scalesim_conv(const mxu_conv *c);

/* Simulates the GEMM m x n x k on `cores` cores, or with cv non-NULL the convolution (whose
 * GEMM it is) with the conv kernel; a convolution whose kernel does not fit the core
 * (NP_ERR_RANGE: its staged input rows hold every channel, more than a small scratchpad) runs
 * as that GEMM instead, its im2col'd input in HBM (out->kernel says which ran). calc: SCALE-
 * Sim's CALC mode. so (may be NULL): the core run's options (a trace). report (may be NULL):
 * receives the core's report, which the caller frees with core_report_free. On success the
 * caller releases out->hbm_mesh and out->l2 (json_decref). Errors: the generator's, the
 * core's, NP_ERR_NOMEM. */
np_status layer_sim_run(const arch_config *cfg, const mxu_array *arr, uint64_t m, uint64_t n,
                        uint64_t k, const kgen_conv *cv, uint64_t cores, bool calc,
                        const core_sim_opts *so, layer_result *out, core_report **report,
                        np_err *err);

#endif
