/* cli_trace_noc.h — the trace of `npusim noc` (docs/traces.md): the synthetic-traffic study's
 * mesh, sampled every N cycles (noc_study_params.sample), into the trace layout.
 *
 * One process, "chip 0", whose counters are the mesh's occupancy:
 *   - "rR flits": flits in router R's input buffers (or on their way to them) at each sample;
 *   - "rR.<port> flits/cycle": flits that left router R through that output port (xplus,
 *     xminus, yplus, yminus to a neighbour; local: ejected at R) over the sample period, per
 *     cycle — the link's utilization (0 .. 1), stamped at the period's start (so the
 *     counter's integral over time is the link's flits x the cycle time);
 * each written when its value changes. Spans: per rate a span on track "runs" named
 * "rate R" (args offered and accepted rate, packet latency, cycles), and its phases on track
 * "phases": "warmup", "measure" and "drain". Runs follow each other in time; a cycle is
 * chip.noc_clock_ghz's period.
 *
 * The mesh's own work has no string in it: names are made once here, and a sample reads
 * every router's counts once (O(routers) per N cycles). */
#ifndef NPUSIM_CLI_TRACE_NOC_H
#define NPUSIM_CLI_TRACE_NOC_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "mesh.h"
#include "trace_sink.h"
#include "traffic.h"

typedef struct cli_trace_noc cli_trace_noc;

/* An observer of studies on the mesh of p, writing into sink (which outlives it), a cycle
 * being cycle_ps. NP_ERR_NOMEM. */
np_status cli_trace_noc_create(const mesh_params *p, trace_sink sink, uint64_t cycle_ps,
                               cli_trace_noc **out, np_err *err);

/* noc_study_params.sample (ctx: the cli_trace_noc). */
void cli_trace_noc_sample(void *ctx, const mesh *m, bool reset);

/* The study p just ran (with the sampler) gave r: its spans; the next run starts after it. */
void cli_trace_noc_run(cli_trace_noc *t, const noc_study_params *p, const noc_study_result *r);

void cli_trace_noc_free(cli_trace_noc *t);

#endif
