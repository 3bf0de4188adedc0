/* trace_stats.h — what a trace says about where the time went, computed from the trace
 * alone (`npusim trace stats`; docs/traces.md gives every definition):
 *
 *   span       from the earliest slice start to the latest slice end;
 *   tracks     per thread, its lanes merged ("core0.dma" and "core0.dma[1]" are one track):
 *              busy = the union of its slices, wait = the union of those of category
 *              "wait" (a sem.wait that waited), util = (busy - wait) / span;
 *   units      per unit kind (the part of a track's name after its last '.': dma, mxu, ...):
 *              per chip the mean util of its tracks of that kind, then the min, mean and max
 *              over the chips that have one;
 *   kernels    slices of category "kernel" or "collective" by name and category: count,
 *              total time;
 *   comm       per kind (args.kind, else "comm"), slices of category "comm" or "collective":
 *              per chip total = their union, exposed = the part when no compute slice
 *              (category mxu, vpu or compute) of that chip runs; means over the chips that
 *              communicate;
 *   stages     slices with args.stage: per stage and its chips (those with its slices), busy =
 *              the union of the chip's compute and comm slices inside the window (it computes
 *              or communicates), idle = window - busy (it waits for a stage's input: exposed
 *              communication is no bubble), the window from the first start to the last end
 *              of any slice with a stage (the pipeline's part of the run: the whole span when
 *              only pipeline work has stages); bubble_pct = idle / window (the (p-1)/(m+p-1) form),
 *              bubble_ratio = idle / busy (the (p-1)/m form); per stage the mean over its
 *              chips, overall the mean over stages;
 *   critical   the chain of work that ends last, walked back: from a slice to what let it
 *              start — the source of a flow into it, the slice before it on its thread, or,
 *              after a gap, the slice of its chip that ended last before it started (what
 *              released a semaphore). Spans (kernel, collective, layer) are summaries and waits
 *              (category "wait") are what the path explains:
 *              neither is on the path; time between steps is idle.
 */
#ifndef NPUSIM_TRACE_STATS_H
#define NPUSIM_TRACE_STATS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "trace_db.h"

typedef struct tstats_track {
    uint32_t process;   /* index into db->processes */
    char *name;         /* thread name without its lane suffix */
    uint64_t busy_ps, wait_ps, slices;
    double util_pct;
} tstats_track;

typedef struct tstats_unit {
    char *kind;
    uint32_t chips;
    double min_pct, mean_pct, max_pct;
} tstats_unit;

typedef struct tstats_kernel {
    uint32_t name;      /* string id */
    uint32_t cat;       /* string id: "kernel" or "collective" */
    uint64_t count, total_ps;
} tstats_kernel;

typedef struct tstats_comm {
    uint32_t kind;      /* string id, or TDB_NONE: "comm" */
    uint32_t chips;
    uint64_t total_ps, exposed_ps; /* sums over chips */
} tstats_comm;

typedef struct tstats_stage {
    int32_t stage;
    uint32_t chips, microbatches;
    uint64_t busy_ps, idle_ps;     /* sums over the stage's chips */
    double bubble_pct, bubble_ratio; /* means over them */
} tstats_stage;

typedef struct tstats_step {
    size_t slice;       /* index into db->slices */
    uint64_t idle_before_ps;
} tstats_step;

typedef struct tstats {
    uint64_t span_ps;
    tstats_track *tracks;
    size_t n_tracks;
    tstats_unit *units;
    size_t n_units;
    tstats_kernel *kernels;        /* by total time, longest first */
    size_t n_kernels;
    tstats_comm *comm;
    size_t n_comm;
    tstats_stage *stages;
    size_t n_stages;
    double bubble_pct, bubble_ratio; /* -1: no stages */
    tstats_step *path;             /* the critical path, first step first */
    size_t n_path;
    uint64_t path_ps, path_idle_ps;
    tstats_kernel *path_names;     /* the path's steps by name (cat: the first's): count and
                                      time on the path, longest first */
    size_t n_path_names;
} tstats;

/* Computes everything above from db. NP_ERR_NOMEM (*out untouched). */
np_status tstats_compute(const tdb *db, tstats *out, np_err *err);
void tstats_free(tstats *s);

/* As JSON (names in docs/traces.md), the top kernels limited to top and the path's steps to
 * max_path. NULL when out of memory. */
json_t *tstats_json(const tdb *db, const tstats *s, size_t top, size_t max_path);

#endif
