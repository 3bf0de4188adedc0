/* run_full.h — full fidelity: training steps lowered to one ISA program per core
 * (compiler/lower.h) and executed by the core model (hw-model/hw_system.h) — every unit, the
 * mesh, the HBM and, across chips, the links — with values when functional.
 *
 * One chip, one graph (the single-device step; tests compare it with the reference executor):
 *
 *   nn_graph *g = ...;                          // a training step, leaves with values
 *   run_full_graph_result r;
 *   run_full_graph(&cfg, g, &(run_full_graph_opts){.functional = true}, &r, &err);
 *   // g's parameters, optimizer state and outputs (the loss) now hold the simulated
 *   // step's values; r.cycles, r.report say how long it took and where the time went
 *   run_full_graph_result_free(&r);
 *
 * Host access to a lowered program's buffers: values are framework floats (fp32), stored in
 * HBM in the tensor's dtype (bf16/fp16 rounded to nearest even, integers saturated).
 */
#ifndef NPUSIM_SIM_RUN_FULL_H
#define NPUSIM_SIM_RUN_FULL_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "core.h"
#include "err.h"
#include "hw_system.h"
#include "lower.h"
#include "nn.h"

/* Writes n values v of dtype dt, dense, at HBM address addr of chip / reads them back.
 * Errors of hw_system_hbm_write / _read (timing mode: NP_ERR_INCONSISTENT), NP_ERR_NOMEM. */
np_status run_full_write(hw_system *sys, uint32_t chip, uint64_t addr, nn_dtype dt,
                         const float *v, int64_t n, np_err *err);
np_status run_full_read(hw_system *sys, uint32_t chip, uint64_t addr, nn_dtype dt, float *v,
                        int64_t n, np_err *err);

typedef struct run_full_graph_opts {
    bool functional;        /* move values: leaves in, parameters, state and outputs back */
    lower_opts lower;       /* how the graph is lowered */
    core_trace_fn trace;    /* (optional) every instruction as it completes */
    void *trace_ctx;
} run_full_graph_opts;

typedef struct run_full_graph_result {
    lower_prog *lp;         /* the lowered step (owned) */
    core_report *report;    /* the run: cycles, every unit (owned) */
    uint64_t cycles;
    uint64_t time_ps;
} run_full_graph_result;

/* Lowers training graph g for chip 0 of cfg and runs it once on a system of its own. In
 * functional mode every leaf with values is written to its buffer first (leaves without
 * values start at zero: optimizer state), and afterwards every leaf that is not a constant
 * (parameters and state, updated in place) and every output node (nn_graph_set_output: the
 * loss, the updates) is read back into its t->data, and each update's step count advanced as
 * nn_graph_compute does: g then holds what one reference step would have left. Errors of
 * lower_graph, of the system (a fault or deadlock of the program is NP_ERR_INTERNAL naming
 * its state), NP_ERR_NOMEM; g's values are unchanged on failure. */
np_status run_full_graph(const arch_config *cfg, nn_graph *g, const run_full_graph_opts *opts,
                         run_full_graph_result *out, np_err *err);
void run_full_graph_result_free(run_full_graph_result *r);

#endif
