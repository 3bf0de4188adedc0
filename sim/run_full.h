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
#include "plan.h"
#include "run_engine.h"

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

/* ---- every rank of a plan ------------------------------------------------------------------
 *
 * run_full_plan lowers every rank's step (lower_plan_rank: one program per core of its chip,
 * collectives from noc/'s schedules with the flow engine's rings and algorithms) and runs all
 * chips together on one hw_system, on one event queue: kernels on the core model, messages over
 * each chip's mesh and the chip-to-chip links. The figures are measured from that run's
 * timeline as the fast engine measures its own (run_engine.h's run_result, docs/run.md): a
 * rank's compute engine is busy while one of its kernels runs (first instruction started to
 * last one done, over its cores); a collective is in flight from when its last member started
 * it to when its last member finished it, a transfer from its send's start to its delivery;
 * bubbles inside each pipeline's window; per-unit busy time from the core model's counters
 * (mean over a chip's cores); link bytes from the network, sampled in windows for the peak.
 *
 * Functional runs move values: io.load gives every rank's initial leaves (parameters, masters,
 * optimizer state, each micro-batch's data), io.store takes what the step left (every leaf that
 * is not a constant or a data input, and each micro-batch's loss on the last stage).
 * run_full_io_dist does both through the reference distributed executor (framework/dist.h). */

typedef struct run_full_io {
    /* rank's values of leaf t (its micro-batch mb instance for a data leaf, else mb -1):
     * numel(t) floats, or NULL for zeros */
    const float *(*load)(void *ctx, int rank, const nn_tensor *t, int mb);
    /* after the step: rank's values of t (a leaf; the loss at micro-batch mb) */
    np_status (*store)(void *ctx, int rank, const nn_tensor *t, int mb, const float *v,
                       np_err *err);
    void *ctx;
} run_full_io;

typedef struct run_full_opts {
    bool functional;
    lower_opts lower;        /* cores and fusion (net and tuner are run_full_plan's) */
    bool rank_order;         /* collectives as rings in rank order (else the flow engine's
                                rings fitted to the topology, algorithms from its tuner) */
    run_full_io io;          /* functional: required */
    uint32_t top_links;      /* busiest links in the result (0: 8) */
    /* (optional) progress: what is being done and the fraction done (0 .. 1): each rank's
     * lowering, then the run (the chips that have finished, the simulated time so far) */
    void (*progress)(void *ctx, const char *what, double done);
    void *progress_ctx;
} run_full_opts;

typedef struct run_full_result {
    run_result *r;           /* the figures (run_engine.h), measured from this run */
    uint32_t n_ranks;
    lower_prog **progs;      /* per rank: its lowered step */
    uint64_t insns;          /* instructions of every program */
    uint64_t kernels, comm;  /* kernels and communication entries, all ranks */
    uint64_t events;         /* events the run dispatched */
} run_full_result;

/* Runs one step of every rank of plan p at full fidelity on cfg's system (every rank's chip
 * must be in it). Errors of the lowering (ops without kernels, communication not lowered yet:
 * NP_ERR_MISSING naming the op), of the system (a fault, or a deadlock naming every waiting
 * unit: NP_ERR_DEADLOCK), of io, NP_ERR_NOMEM. *out is zeroed on failure. */
np_status run_full_plan(const arch_config *cfg, const nn_plan *p, const run_full_opts *o,
                        run_full_result *out, np_err *err);
void run_full_result_free(run_full_result *r);

/* An io over the reference distributed executor d (dist.h): loads every rank's values d holds
 * (after nn_dist_load_params, and for data leaves after nn_dist_step), stores the simulated
 * ones into d — nn_dist_param then reassembles the simulated parameters, nn_dist_values gives
 * the simulated losses. */
struct nn_dist;
run_full_io run_full_io_dist(struct nn_dist *d);

#endif
