/* run_engine.h — the fast-fidelity run engine: every rank's step replayed as tasks on its
 * chip's engines, all chips on one event queue, communication over the network model.
 *
 * run_simulate takes a finalized run graph (run_graph.h) and an architecture and simulates
 * `steps` steps of every rank together on one evq (base/evq.h):
 *
 *   - compute tasks run one at a time, in issue order, on the rank's compute engine, each for
 *     its kernel's duration (from the caller's timing function: in `npusim run` the kernel is
 *     compiled and simulated once on the core model);
 *   - collectives run on the rank's streams: a collective starts when every member of its
 *     group has reached it (at the head of that stream, dependencies done), runs as its real
 *     schedule of transfers and reductions over the chip network (noc/coll.h, on the same evq,
 *     so concurrent collectives and transfers share links max-min fairly), and completes for
 *     all members at once;
 *   - sends are transfers over the network (noc/net.h) from the sender's chip to the
 *     receiver's, completing at delivery; recvs complete once their message is delivered.
 *
 * Overlap, link contention and pipeline bubbles are therefore simulated, not computed; the
 * result's figures are measured from the timeline (docs/run.md defines each one).
 *
 * Shortcuts (each exact, each with an option that turns it off; tests show both give the same
 * results):
 *   - kernel timing cache: each distinct kernel key is timed once (across runs when a
 *     run_kcache is given), not once per executed task;
 *   - collective reuse: a collective whose group's links carry no other traffic of the run (no
 *     other group or stream, no send, shares a link with it — found from the routes before the
 *     run) runs alone on its links, so its duration depends only on what it is and on its
 *     group's routes; it is simulated once per distinct (collective, route signature) on a
 *     scratch copy of the network and then replayed as a timer, its link bytes replayed at
 *     their exact times;
 *   - symmetric ranks: when every collective of some groupset G is reused, every group of G
 *     is one class, and all other traffic maps position k of each G group onto position k of
 *     other G groups over links no other position uses (found before the run), the ranks at
 *     positions 1 .. |G|-1 are mirror images of position 0: only position 0 is simulated and
 *     its figures are copied (links through the route correspondence).
 */
#ifndef NPUSIM_SIM_RUN_ENGINE_H
#define NPUSIM_SIM_RUN_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "energy.h"
#include "err.h"
#include "net.h"
#include "run_graph.h"

/* A kernel's timing on one chip. */
typedef struct run_ktime {
    uint64_t ps;                       /* duration */
    uint64_t chained_ps;               /* duration of a RUN_TASK_CHAINED task: the kernel right
                                          after a barrier that waits for earlier work (0: ps) */
    uint64_t unit_ps[RUN_UNIT_COUNT];  /* busy time of the units that are run_unit_from_kernel
                                          (mean over the chip's cores); others ignored */
    energy_counts acts;                /* what the kernel alone does, all cores (energy.h):
                                          MACs, vector operations, bytes, flit-hops */
    uint64_t throttle_ps;              /* of ps, what the power cap's throttling added (the
                                          kernel at the governor's clock; 0: not throttled) */
} run_ktime;

/* Times kernel k (its key says what it is; k->data is the caller's). NP_OK and *out, or an
 * error that stops the run. */
typedef np_status (*run_kernel_fn)(void *ctx, const run_kernel *k, run_ktime *out, np_err *err);

/* ---- The kernel timing cache -------------------------------------------------------------- */

typedef struct run_kcache run_kcache;

run_kcache *run_kcache_create(void); /* NULL when out of memory */
void run_kcache_free(run_kcache *c);
/* The timing stored under key, or NULL. */
const run_ktime *run_kcache_get(const run_kcache *c, const char *key);
/* Stores t under key (replacing). false when out of memory. */
bool run_kcache_put(run_kcache *c, const char *key, const run_ktime *t);
uint32_t run_kcache_size(const run_kcache *c);

/* ---- Running ------------------------------------------------------------------------------ */

/* What the engine tells an observer (a trace writer) as the run goes; every entry is
 * optional. Ranks are run_graph ranks, tasks their class's task ids, steps 0-based, times ps.
 * Mirrored ranks (run_engine.h's symmetric ranks) are reported too: every call about a
 * simulated rank is repeated for the ranks that mirror it, with their own ranks. */
typedef struct run_observer {
    /* a compute task ran [start_ps, end_ps) with timing kt */
    void (*compute)(void *ctx, uint32_t rank, uint32_t task, uint32_t step, uint64_t start_ps,
                    uint64_t end_ps, const run_ktime *kt);
    /* rank's part of a collective task, in flight [start_ps, end_ps) (every member of its group
     * is there from start_ps); group identifies this instance (non-zero; the same on every
     * member, distinct across instances), group_size its members; bytes is the collective's
     * size (run_task.bytes) */
    void (*coll)(void *ctx, uint32_t rank, uint32_t task, uint32_t step, uint64_t start_ps,
                 uint64_t end_ps, uint64_t group, uint32_t group_size, uint64_t bytes);
    /* a send task of rank src (task, step) in flight [start_ps, end_ps) to rank dst, delivered
     * at end_ps */
    void (*transfer)(void *ctx, uint32_t src, uint32_t dst, uint32_t task, uint32_t step,
                     uint64_t start_ps, uint64_t end_ps, uint64_t bytes);
    /* rank had at least one collective or transfer in flight throughout [start_ps, end_ps)
     * and none just before or after (the intervals of run_rank_stats.busy_ps[RUN_UNIT_COMM]) */
    void (*comm_busy)(void *ctx, uint32_t rank, uint64_t start_ps, uint64_t end_ps);
    /* at the end, every link that carried bytes: bytes[k] moved in window k (window_ps wide,
     * n windows from time 0; the window doubles to keep the run within 512), each flow's
     * bytes spread back from its last byte at no more than the link's bandwidth */
    void (*link)(void *ctx, uint32_t link, const char *name, const double *bytes, uint32_t n,
                 uint64_t window_ps);
    void *ctx;
} run_observer;

/* A straggler: every compute task of the ranks on `chip` takes `factor` times its kernel's
 * time (a chip slowed by heat, a failing part or a noisy neighbour). */
typedef struct run_slow_chip {
    uint32_t chip;
    double factor; /* > 0; 1: as fast as the others */
} run_slow_chip;

typedef struct run_opts {
    uint32_t steps;         /* 0: 1 */
    run_kernel_fn time_kernel; /* required when the graph has compute tasks */
    void *time_ctx;
    run_kcache *kcache;     /* (optional) timings shared across runs; default: one per run */
    bool no_kernel_cache;   /* time every executed compute task (time_kernel per task) */
    bool no_coll_reuse;     /* simulate every collective on the network (implies no mirror) */
    bool no_rank_dedup;     /* simulate every rank */
    uint32_t top_links;     /* links to rank as busiest (0: 8) */
    const run_slow_chip *slow; /* (optional) n_slow slowed chips (a chip named twice: the
                                  last); their ranks are simulated, never mirrored */
    uint32_t n_slow;
    const net_link_fault *link_faults; /* (optional) slowed and failed links of the network
                                          (net.h; added to np's or cfg's) */
    uint32_t n_link_faults;
    const run_observer *observer; /* (optional) told what happens, for traces */
    /* (optional) called now and then with the fraction of tasks done, 0 .. 1 */
    void (*progress)(void *ctx, double done);
    void *progress_ctx;
} run_opts;

/* One rank's figures over the whole run (all steps). */
typedef struct run_rank_stats {
    uint64_t busy_ps[RUN_UNIT_COUNT];
    uint64_t comm_ps[RUN_COMM_COUNT];    /* time a collective / transfer of the kind that the
                                            rank takes part in (sends and recvs) is in flight */
    uint64_t exposed_ps[RUN_COMM_COUNT]; /* ... while the compute engine is idle */
    uint64_t comm_bytes[RUN_COMM_COUNT]; /* bytes put on the network: a collective's on its
                                            group's first rank, a send's on its sender */
    uint64_t pipe_first_ps, pipe_last_ps; /* first start / last end of a RUN_TASK_PIPELINE task
                                             (0, 0 without) */
    uint64_t pipe_busy_ps;                /* their summed durations */
    /* Where the rank's time goes, from 0 to the run's end, each instant in one of three:
     * computing_ps (its compute engine runs a kernel), exposed_all_ps (it does not, and some
     * communication of the rank is in flight: exposed_ps of any kind, each instant once),
     * idle_ps (neither: waiting for input, for the pipeline, for the step's end). */
    uint64_t computing_ps, exposed_all_ps, idle_ps;
    /* its pipeline's window in the last step (the first start to the last end of the
     * RUN_TASK_PIPELINE tasks of the rank's pp group) and the bubble, its idle_ps inside it:
     * waiting for a stage's input, exposed communication not counted (0, 0 without a
     * pipeline) */
    uint64_t window_ps, bubble_ps;
    uint64_t bubble_all_ps; /* its bubbles of every step (each step's window closed by the
                               next step's first pipeline task): at most idle_ps */
    uint64_t end_ps;                      /* its last task's end */
    double flops, hw_flops;
    energy_counts acts;      /* the actions of the compute tasks it ran (energy.h) */
    double peak_dynamic_w;   /* the highest dynamic power of one of them: its kernel's
                                dynamic energy / its duration (0 without energy keys) */
    uint64_t throttle_ps;    /* of its compute tasks' time, what the power cap's throttling
                                added (each task its kernel alone's; run_ktime.throttle_ps) */
} run_rank_stats;

typedef struct run_link_stats {
    char name[32];          /* net_link_name */
    double capacity_bytes_per_s;
    uint64_t bytes;         /* carried over the run */
    double avg_bytes_per_s; /* bytes / run time */
    double peak_bytes_per_s; /* the most carried in one window of link_window_ps, at most
                                the link's bandwidth (net_link_info.peak_window_bytes; a
                                reused collective's bytes counted alike) */
} run_link_stats;

typedef struct run_result {
    uint32_t ranks, steps;
    uint64_t time_ps;        /* end of the run: the last task's end */
    uint64_t step_ps;        /* mean step time: time_ps / steps */
    uint64_t *step_end_ps;   /* steps entries: when every rank had finished step k */
    run_rank_stats *rank;    /* ranks entries */
    /* pipeline bubble, measured: per stage, the idle time of its ranks' compute engines
     * inside their pipeline's window (first pipeline task start .. last end over the
     * pipeline's ranks), averaged over the stage's ranks; over stages, their mean */
    uint32_t stages, micro_batches;
    double *stage_bubble_frac;  /* stages entries: idle / window, the (p-1)/(m+p-1) form */
    double *stage_bubble_ratio; /* idle / busy, the (p-1)/m form */
    double bubble_frac, bubble_ratio;
    /* communication per kind, summed over ranks */
    uint64_t comm_ps[RUN_COMM_COUNT], exposed_ps[RUN_COMM_COUNT], comm_bytes[RUN_COMM_COUNT];
    /* links of the chip network */
    uint32_t n_links;
    run_link_stats *links;
    uint32_t n_top;          /* busiest links by bytes, most first (ties: lower id) */
    uint32_t *top;
    uint64_t link_window_ps; /* the window of peak_bytes_per_s: NET_LINK_PEAK_WINDOW_PS */
    /* what the engine did */
    uint64_t events;           /* events dispatched on the run's queue */
    uint64_t kernels_timed;    /* time_kernel calls */
    uint64_t colls_simulated;  /* collectives run on the network */
    uint64_t colls_reused;     /* collectives replayed from a reused timing */
    uint64_t colls_scratch;    /* collectives simulated on the scratch network for reuse */
    uint64_t transfers;        /* sends started */
    uint32_t ranks_simulated;
    uint32_t mirror_groupset;  /* RUN_NONE when no ranks are mirrored */
    uint32_t mirror_ways;      /* ranks per simulated one (1: none) */
} run_result;

/* Simulates opts->steps steps of finalized graph g on architecture cfg (network from np when
 * not NULL, else from cfg.system). *out receives the result (free with run_result_free).
 * NP_ERR_RANGE when a rank's chip is not in the network, NP_ERR_MISSING without a timing
 * function, NP_ERR_DEADLOCK when some rank can never finish (the message names the waiting
 * engines of the first ranks that wait and what each waits for), errors of the timing
 * function and the network as they come, NP_ERR_NOMEM. */
np_status run_simulate(const run_graph *g, const arch_config *cfg, const net_params *np,
                       const run_opts *opts, run_result **out, np_err *err);

void run_result_free(run_result *r);

#endif
