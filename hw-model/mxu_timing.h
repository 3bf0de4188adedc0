/* mxu_timing.h — compute timing of the systolic array (MXU), compatible with SCALE-Sim v2.
 *
 * A GEMM out[M][N] = A[M][K] x B[K][N] (a convolution is first mapped to one, mxu_conv_gemm)
 * runs on an R x C array in one of three dataflows. The dataflow decides which GEMM dimension
 * is laid along the array rows (Sr), which along the columns (Sc) and which streams through
 * time (T), exactly as SCALE-Sim's topology_utils.calc_spatio_temporal_params:
 *
 *     dataflow   Sr (rows)   Sc (cols)   T (time)    stationary in the PEs
 *     os         M           N           K           the outputs
 *     ws         K           N           M           the weights (B)
 *     is         K           M           N           the inputs (A)
 *
 * The work is cut into ceil(Sr/R) x ceil(Sc/C) folds; SCALE-Sim serializes them and each fold
 * pays its whole fill and drain (partial folds are padded to the full array):
 *
 *     os:     R + C + T - 2   cycles per fold (operands skewed in, outputs drain C - 1)
 *     ws/is:  2R + C + T - 2  cycles per fold (R cycles of stationary preload first)
 *
 * With weight double-buffering (mxu_array.weight_double_buffer; ws and is only) the next
 * fold's preload is hidden under the current fold: only the first fold pays its R cycles.
 *
 * With pipelined folds (mxu_array.pipelined, core.mxu_pipelined_folds; not SCALE-Sim) the next
 * fold's operands enter while the current one drains: fold f's stream starts `lead + f x
 * period` cycles after the GEMM starts and the array is done `tail` cycles after the last
 * fold's stream started (mxu_sched):
 *
 *     lead    os: 0                ws/is: R (the first stationary tile's preload)
 *     period  os: max(T, R)        ws/is: max(T, R) double-buffered, T + R - 1 without
 *     tail    T + R + C - 2 (the last fold's skew, stream and drain)
 *
 * T is the streamed term, R the outputs of a fold leaving each column through the array's
 * bottom edge one a cycle (os), or the next stationary tile's R rows loading (ws/is). A
 * following GEMM may continue the run of folds: its first stream starts mxu_fold_gap(T_prev,
 * T) after the previous GEMM's last (the core model decides when, hw-model/core.c). The same
 * description holds without pipelining: lead os 0, ws/is R; period = fold_cycles (less R
 * double-buffered); tail T + R + C - 2.
 *
 * The cost is O(1): nothing here is proportional to PEs x cycles. tests/test_mxu.c checks the
 * formulas against a cycle-by-cycle register-level model of the array and against SCALE-Sim's
 * own golden reports, tests/tb_mxu_rtl.cpp against SystemVerilog arrays (hw-model/rtl/) under
 * Verilator; docs/hw-model.md derives them from SCALE-Sim's demand matrices.
 */
#ifndef NPUSIM_MXU_TIMING_H
#define NPUSIM_MXU_TIMING_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "err.h"

/* The array as the timing model sees it. */
typedef struct mxu_array {
    uint64_t rows, cols;       /* R x C processing elements, both >= 1 */
    arch_dataflow dataflow;    /* ARCH_DATAFLOW_OS, _WS or _IS */
    bool weight_double_buffer; /* ws/is: hide each fold's preload but the first's (not SCALE-Sim) */
    bool pipelined;            /* consecutive folds overlap (not SCALE-Sim) */
} mxu_array;

/* The array of an architecture: cfg->core.array_rows/cols/dataflow/mxu_weight_double_buffer/
 * mxu_pipelined_folds. */
void mxu_array_from_arch(const arch_config *cfg, mxu_array *out);

/* A convolution layer in SCALE-Sim's topology-file terms (no padding). */
typedef struct mxu_conv {
    uint64_t ifmap_h, ifmap_w; /* input height and width */
    uint64_t filt_h, filt_w;   /* filter height and width, <= the input's */
    uint64_t channels;         /* input channels */
    uint64_t num_filt;         /* output channels */
    uint64_t stride_h, stride_w;
} mxu_conv;

/* The GEMM of a convolution, as SCALE-Sim maps it: output size E = ceil((H - R + s) / s)
 * (no padding), M = E_h x E_w output pixels, N = num_filt, K = filt_h x filt_w x channels.
 * NP_ERR_RANGE if a dimension or stride is 0 or a filter is larger than the input; the
 * outputs are unchanged on failure. */
np_status mxu_conv_gemm(const mxu_conv *c, uint64_t *m, uint64_t *n, uint64_t *k, np_err *err);

/* Everything SCALE-Sim's COMPUTE_REPORT and SRAM counts say about one GEMM, with memory that
 * never stalls. */
typedef struct mxu_timing {
    uint64_t sr, sc, t;              /* the mapping (table above) */
    uint64_t row_folds, col_folds;   /* ceil(Sr/R), ceil(Sc/C) */
    uint64_t folds;                  /* row_folds x col_folds */
    uint64_t fold_cycles;            /* cycles of one fold alone, SCALE-Sim's (formulas above) */
    uint64_t lead, period, tail;     /* the fold schedule (mxu_sched) */
    uint64_t cycles;                 /* busy cycles of the array for the whole GEMM, as the
                                        array is configured: lead + (folds - 1) x period + tail */
    uint64_t scalesim_cycles;        /* SCALE-Sim's "Total Cycles": its last demand row's
                                        index, the unpipelined cycles - 1 (with double
                                        buffering: its count - 1), whatever `pipelined` says */
    uint64_t macs;                   /* M x N x K */
    double mapping_efficiency_pct;   /* mean over folds of used PEs / R x C */
    double compute_util_pct;         /* mean over folds of MACs / (R x C x SCALE-Sim's fold
                                        cycles: T+R+C-2 for os, 2R+2C+T-3 for ws/is) */
    double overall_util_pct;         /* macs / (scalesim_cycles x R x C) */
    uint64_t sram_ifmap_reads;       /* SCALE-Sim's SRAM read/write counts in elements */
    uint64_t sram_filter_reads;
    uint64_t sram_ofmap_writes;      /* os includes SCALE-Sim's extra R + C per fold */
} mxu_timing;

/* Timing of out[M][N] = A[M][K] x B[K][N] on array a. NP_ERR_RANGE if M, N, K, R or C is 0 or
 * a product overflows 64 bits, NP_ERR_USAGE for an unknown dataflow; *out is unchanged on
 * failure. */
np_status mxu_gemm_timing(const mxu_array *a, uint64_t m, uint64_t n, uint64_t k,
                          mxu_timing *out, np_err *err);

/* Busy cycles of the array for one GEMM: mxu_gemm_timing's `cycles`, or 0 when the shape is
 * invalid (a zero dimension). For the core model's per-instruction cost. */
uint64_t mxu_gemm_cycles(const mxu_array *a, uint64_t m, uint64_t n, uint64_t k);

/* The fold schedule of `folds` folds that each stream `stream` cycles (T, or T at the dtype's
 * MACs per PE: ceil(T / rate)): fold f's stream starts lead + f x period cycles after the
 * first fold's preload (if any) starts, and the array is done tail cycles after the last
 * fold's stream started, cycles = lead + (folds - 1) x period + tail. folds and stream >= 1
 * and the sums must fit 64 bits (mxu_gemm_timing checks the shapes it is given). */
typedef struct mxu_sched {
    uint64_t folds, stream;
    uint64_t lead, period, tail, cycles;
} mxu_sched;
void mxu_sched_of(const mxu_array *a, uint64_t folds, uint64_t stream, mxu_sched *out);

/* Cycles from the start of one fold's stream (t_prev cycles long) to the earliest start of
 * the next one's (t_next long) on array a: with pipelining the least the array's resources
 * allow (the formulas above; a fold of a following GEMM too), without it the whole fold
 * (SCALE-Sim) less its preload when double-buffered. */
uint64_t mxu_fold_gap(const mxu_array *a, uint64_t t_prev, uint64_t t_next);

#endif
