/* run_plan.h — a parallel strategy's plan (framework/plan.h) as the run engine's task graph
 * (run_graph.h): what `npusim run` simulates.
 *
 *   plan                         run graph
 *   rank r on mesh.chip[r]       rank r on chip mesh.chip[r]
 *   class (pipeline stage)       class: every rank of the stage runs its tasks
 *   mesh axes tp, dp, pp         groupsets "tp", "dp", "pp" (nn_plan_group), plus a groupset
 *                                for collectives over a part of an axis, named by its size:
 *                                "pp-2", the tied-embedding all-reduce of the first and the
 *                                last stage
 *   schedule x blocks x entries  tasks in issue order: for each (block, micro-batch) of the
 *                                schedule, each entry that runs at that micro-batch
 *   compute entry                a compute task of the node's kernel (run_kernel.h); views and
 *                                ops that need no kernel lower to nothing — their dependents
 *                                wait for what they waited for
 *   collective entry             a collective (all_reduce, reduce_scatter, all_gather,
 *                                broadcast, reduce, all_to_all) over the entry's group, on
 *                                the stream of its tag (tp, sp, dp, zero-gather, zero-scatter,
 *                                pp; pp-sg on tp's); a group of one rank is nothing
 *   send / recv entry            a send / recv on the pp groupset, at the peer's offset within
 *                                the pipeline (the plan's wrap-around made an offset), tag =
 *                                the entry's match; sends to the next stage, receives from the
 *                                previous one, sends to the previous and receives from the
 *                                next each have a stream of their own
 *   deps                         task dependencies (same block instance, the same micro-batch
 *                                of another block, the last micro-batch from a step block, a
 *                                step block's one instance)
 *   forward/backward compute     RUN_TASK_PIPELINE (the bubble is measured over them); region
 *                                recompute: RUN_TASK_RECOMPUTE (hardware, not model, FLOPs)
 *   pp > 1                       run_graph_set_pipeline(pp, micro-batches)
 *
 * Each distinct kernel (run_kernel_key) is one run_kernel whose data is its run_kspec. Ops the
 * compiler has no kernel for yet (or whose parameters cannot be mapped onto one) are collected
 * and reported together: NP_ERR_MISSING naming each op with its node's shapes.
 */
#ifndef NPUSIM_SIM_RUN_PLAN_H
#define NPUSIM_SIM_RUN_PLAN_H

#include <stdint.h>

#include "arch.h"
#include "err.h"
#include "plan.h"
#include "run_graph.h"
#include "run_kernel.h"

/* The report's kind of a plan's communication tag (tp, sp, dp, zero, pp, pp-sg): the one
 * map the fast run, the full run and the trace use. */
run_comm_kind run_plan_comm_kind(nn_comm_tag t);

/* Whether a compute entry is pipeline work, what the bubble is measured over: a micro-batch's
 * forward or backward (an entry of a forward or backward block, whose chunk is >= 0: plan.h),
 * not the step's beginning or end. Both fidelities ask this. */
bool run_plan_is_pipeline(const nn_plan_entry *e);

/* A blocking send's clear-to-send (NN_PLAN_CTS_BYTES, plan.h) goes on the send's streams
 * with the send's tag | RUN_PLAN_CTS_TAG. */
#define RUN_PLAN_CTS_TAG 0x40000000u

/* The streams of a rank (run_task.stream). */
typedef enum run_plan_stream {
    RUN_PLAN_S_TP,
    RUN_PLAN_S_SP,
    RUN_PLAN_S_DP,
    RUN_PLAN_S_ZERO_GATHER,
    RUN_PLAN_S_ZERO_SCATTER,
    RUN_PLAN_S_PP,          /* pipeline-axis collectives (the tied embedding) */
    RUN_PLAN_S_SEND_NEXT,
    RUN_PLAN_S_RECV_PREV,
    RUN_PLAN_S_SEND_PREV,
    RUN_PLAN_S_RECV_NEXT,
    RUN_PLAN_S_COUNT
} run_plan_stream;

/* What a task of a class came from (for traces and reports). */
typedef struct run_plan_task {
    const nn_plan_entry *e;
    int32_t mb;       /* micro-batch; -1 for step blocks */
    uint32_t kernel;  /* compute: its kernel (kspecs[kernel]); else RUN_NONE */
} run_plan_task;

typedef struct run_plan {
    run_graph *g;            /* finalized; owned */
    const nn_plan *p;        /* borrowed */
    uint32_t n_kspecs;       /* = run_graph_kernels(g) */
    run_kspec *kspecs;       /* per kernel id (run_kernel.data points here) */
    uint32_t n_classes;
    run_plan_task **tasks;   /* per class: per task id */
    uint32_t *n_tasks;
    uint32_t gs_pp;          /* the pp groupset (RUN_NONE when pp = 1) */
    uint64_t views;          /* entry instances that lowered to nothing */
} run_plan;

typedef struct run_plan_opts {
    /* Compute nodes are not lowered: every compute node of every class is a kernel of its
     * own whose run_kspec has only .node, for a caller that times kernels itself (tests with
     * analytical durations per node); never for a real run. */
    bool nodes_only;
    /* Every compute node its own kernel, as lower_opts.no_fuse lowers it (else the kernels
     * are the step lowering's: fusion groups with their epilogues, folded transposes). */
    bool no_fuse;
} run_plan_opts;

/* Builds the run graph of plan p on cfg's chips (p and cfg must outlive it; opts may be
 * NULL). NP_ERR_MISSING listing the ops without kernels; kernel mapping errors
 * (run_kernel_of_node); NP_ERR_INTERNAL when the plan's groups or dependencies are not what
 * plan.h promises; the run graph's own errors; NP_ERR_NOMEM. *out is NULL on failure. */
np_status run_plan_build(const nn_plan *p, const arch_config *cfg, const run_plan_opts *opts,
                         run_plan **out, np_err *err);
void run_plan_free(run_plan *rp);

#endif
