/* run_trace.h — the trace of `npusim run` (docs/run.md, "The trace"; layout docs/traces.md):
 * a run_observer (run_engine.h) that tells a trace sink (traces/trace_sink.h) what every rank
 * did, in the names `npusim trace stats` reads.
 *
 * Per chip (the process of the rank's chip):
 *   - a span per compute task on track "kernels", named by its kernel, category "kernel",
 *     args node, layer, flops, bytes (the kernel's HBM bytes), for forward and backward work
 *     mb (micro-batch) and, with a pipeline, stage;
 *   - unit slices of the chip as a whole (thread chip.<unit>): "compute" for the whole task
 *     (the compute engine), "mxu", "vpu" and "dma" from its start for the kernel's busy time
 *     of those units (mean over the chip's cores);
 *   - a span per collective on track "comm", named by its op, category "collective", args
 *     kind (tp, sp, dp, zero, pp), bytes; the spans of one collective on every member are
 *     joined by a flow;
 *   - a span per send on the sender's and the receiver's "comm" track, category "comm",
 *     named send / recv, from the send's start to its delivery, joined by a flow;
 *   - a "chip.comm" slice (category "busy") for each interval with any communication of the
 *     chip in flight.
 * Counters per chip: "hbm" (GB/s), each kernel's HBM bytes over its task, and "hbm.used"
 * (bytes), the chip's HBM occupancy: its class's resident parameters, gradients and optimizer
 * states from time 0, plus each micro-batch's saved activations of a layer from the end of its
 * first forward task to the end of the last backward task of that layer (communication
 * buffers and workspace, transient, are left out; its peak is the plan's activations_bytes
 * over the resident bytes), and "spad.used" (bytes), the scratchpad the running kernel holds
 * on its fullest core (kc_result.spad_bytes) from its task's start to its end, 0 between
 * kernels (left out for kernels timed from a cache file, which keeps no footprint).
 * With energies (run_trace_set_energy, an energy key set): "power" (W), the chip's power while
 * each kernel runs — its dynamic energy over its task's time plus the static power — and the
 * static power between kernels (communication's link power is not in it).
 * The system process: a bandwidth counter per network link that carried bytes, in GB/s.
 *
 * So `npusim trace stats` on the trace of a one-step run gives the report's per-unit
 * utilization (units), exposed and total communication per kind (comm) and bubbles (stages).
 */
#ifndef NPUSIM_SIM_RUN_TRACE_H
#define NPUSIM_SIM_RUN_TRACE_H

#include "err.h"
#include "run_engine.h"
#include "run_plan.h"
#include "trace_sink.h"

typedef struct run_trace run_trace;

/* An observer of rp's run writing into sink (both must outlive it). NP_ERR_NOMEM. */
np_status run_trace_create(const run_plan *rp, trace_sink sink, run_trace **out, np_err *err);
const run_observer *run_trace_observer(const run_trace *t);
/* Adds the "power" counter from cfg's energy keys (cfg must outlive t; nothing when none is
 * set). */
void run_trace_set_energy(run_trace *t, const arch_config *cfg);
void run_trace_free(run_trace *t);

#endif
