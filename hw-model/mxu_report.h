/* mxu_report.h — SCALE-Sim's three report files for a single-layer study: COMPUTE_REPORT.csv,
 * BANDWIDTH_REPORT.csv and DETAILED_ACCESS_REPORT.csv, with SCALE-Sim v2's column names
 * (scalesim/simulator.py, generate_reports) and its number formats (integers as integers,
 * reals as Python prints them: the shortest text that reads back to the same double), one
 * row per layer, written into a folder named after the run (SCALE-Sim's run_name).
 *
 * What each figure is (docs/hw-model.md, "SCALE-Sim reports"):
 *   - compute: total and stall cycles as the caller reports them (with InterfaceBandwidth:
 *     CALC, SCALE-Sim's compute cycles and 0 stalls); overall utilization against the total;
 *     mapping efficiency and compute utilization, SCALE-Sim's (mxu_timing);
 *   - SRAM reads and writes: SCALE-Sim's counts (mxu_timing), over the layer's total cycles
 *     for the average SRAM bandwidths; the SRAM window is the compute window (cycles 0 to the
 *     compute cycles), not SCALE-Sim's per-operand first and last demand;
 *   - DRAM reads and writes: the distinct elements of each operand (what SCALE-Sim's CALC mode
 *     fetches: each element once), over the DRAM window (cycles 0 to dram_cycles), which is
 *     npusim's simulated kernel rather than SCALE-Sim's prefetch model; averages as SCALE-Sim
 *     computes them: words / (stop - start + 1). A word is one element.
 */
#ifndef NPUSIM_MXU_REPORT_H
#define NPUSIM_MXU_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "mxu_timing.h"
#include "mxu_topo.h"

/* One layer's figures for the reports. */
typedef struct mxu_report_row {
    mxu_timing t;                  /* SCALE-Sim's compute model of the layer's GEMM */
    uint64_t total_cycles;         /* as reported: compute + stall */
    uint64_t stall_cycles;
    uint64_t ifmap_words, filter_words, ofmap_words; /* distinct elements (mxu_report_words) */
    uint64_t dram_cycles;          /* the DRAM window's length (>= 1) */
    uint64_t pes;                  /* the array's R x C */
} mxu_report_row;

/* The column names of SCALE-Sim v2's reports, in order, NULL-terminated. */
extern const char *const mxu_report_compute_columns[];
extern const char *const mxu_report_bandwidth_columns[];
extern const char *const mxu_report_detail_columns[];

/* The distinct elements of layer l's operands: a GEMM's M x K, K x N and M x N; a
 * convolution's input pixels its windows touch (rows (E - 1) x stride + R at most H, likewise
 * columns) x channels, its filters, its output. */
void mxu_report_words(const mxu_layer *l, uint64_t *ifmap, uint64_t *filter, uint64_t *ofmap);

/* Creates dir/run_name (and dir when missing) and writes the three reports there, one row
 * per layer of r[0..n). NP_ERR_IO naming the file that could not be created or written;
 * NP_ERR_USAGE when run_name is not a folder name (empty or with '/'). */
np_status mxu_reports_write(const char *dir, const char *run_name, const mxu_report_row *r,
                            size_t n, np_err *err);

#endif
