/* report.h — one self-contained HTML report of a run (`npusim report`; docs/report.md):
 * inline CSS and SVG, no network, no external script; one small inline script draws the
 * sweep plot when there is one (the axes are chosen in the page).
 * Every string from an input is escaped for the part of the page it reaches (report.c's esc
 * and esc_json): names can never become markup.
 *
 * What it shows, each where its input has the data (otherwise a line says what is missing):
 *   summary        "where did the time go": the headline figures of the run and, with a
 *                  trace, each chip's time by what it did (computing, else memory, else
 *                  communication, else idle; mean over chips: chart-chip-time), the exposed
 *                  communication per kind, the top kernels and the critical path split by
 *                  category (chart-breakdown);
 *   timeline       per chip, rows for compute, memory and communication, shaded by the share
 *                  of that chip's tracks busy (chart-timeline; trace);
 *   utilization    per unit kind min/mean/max over chips (chart-util), per chip and unit kind
 *                  (chart-util-grid; trace);
 *   links          a heat map of link bandwidth drawn on the topology: ring and fully
 *                  connected on a circle, switches above their chips; a torus as the box of
 *                  its grid that holds the chips the run used (the chips with slices and the
 *                  links' ends), every torus link inside it drawn, its z layers side by side
 *                  (chart-links; the run's `links`, and every link counter of the trace);
 *                  systems of more than 256 chips show only the chips the run used;
 *   roofline       every kernel at its arithmetic intensity and FLOP/s under the ceiling of
 *                  the cores it ran on: one core's for a span on a core's track, the chip's
 *                  for one on the chip's (chart-roofline; trace kernel spans with flops and
 *                  bytes, an arch);
 *   memory         the largest chip's memory by role, the parts stacked (not the total: a
 *                  figure), against the HBM capacity (chart-memory);
 *   energy         one step's joules by part, with energy per step, power per chip, TFLOP/s
 *                  per W and energy per token or sample (chart-energy; the run's `energy`,
 *                  only when it models energy: otherwise the section is left out);
 *   communication  exposed and overlapped time per kind (chart-comm);
 *   collective     bus bandwidth against message size (chart-collective; collective --json);
 *   kernels        the top kernels by time (a table);
 *   sweep          any metric against any swept key or another metric, the Pareto front
 *                  marked (chart-sweep).
 *
 * With a second run (report_input.cmp) the page opens with the two side by side: their
 * configurations and headline figures with the differences (B - A, B / A - 1), each step's
 * time by what it went to (chart-compare), and, with both traces, both timelines on one
 * time scale (chart-timeline-a, chart-timeline-b); the first run's sections follow.
 *
 * The run JSON is what `npusim run --json` prints (issue 12's names: step_time_s, mfu_pct,
 * units, comm, links, memory, ...); `npusim sim --json` and `npusim collective --json` are
 * read too. */
#ifndef NPUSIM_REPORT_H
#define NPUSIM_REPORT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "trace_db.h"
#include "trace_stats.h"

typedef struct report_arch {
    const char *name;          /* NULL: unknown (no ceilings, topology from link names) */
    double core_flops_per_s;   /* bf16 peak of one core */
    double chip_flops_per_s;
    double hbm_bytes_per_s;    /* one chip's */
    double hbm_capacity_bytes;
    double link_gbps;
    const char *topology;      /* "ring", "torus2d", ... */
    uint32_t chips, torus_x, torus_y, torus_z, island_chips;
} report_arch;

typedef struct report_input report_input;

struct report_input {
    const char *title;
    const json_t *run;         /* the run's JSON, or NULL */
    const char *run_path;
    const tdb *db;             /* the trace and its statistics, or NULL */
    const tstats *st;
    const char *trace_path;
    const json_t *sweep;       /* an array of {"point", "params": {...}, "metrics": {...}}, or NULL */
    const char *sweep_path;
    report_arch arch;
    /* `npusim report A.json [TA] B.json [TB]`: the second run (and its trace), compared with
     * this one side by side before this one's own sections; NULL: one run */
    const report_input *cmp;
};

/* Writes the report to f. NP_ERR_NOMEM; nothing else fails (a write error shows at fclose). */
np_status report_write(const report_input *in, FILE *f, np_err *err);

#endif
