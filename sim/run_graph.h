/* run_graph.h — the run engine's input: one training step of every rank as ordered tasks.
 *
 * A run graph is what a parallel strategy's per-rank plan becomes for the engine (run_engine.h):
 *
 *   - ranks 0 .. ranks-1, each placed on one chip of the network (default: rank r on chip r);
 *   - groupsets: partitions of ranks into ordered groups, one per parallel axis ("tp", "dp",
 *     "pp", ...); a collective's group and a send's peer are found through them, so ranks that
 *     the strategy makes identical share their tasks;
 *   - classes: a class holds one list of tasks that every rank of the class runs (a pipeline
 *     stage's ranks are one class); a task refers to the rank running it only through the
 *     groupsets, never by rank number (except absolute send/recv peers);
 *   - kernels: distinct compute kernels, each with a key naming everything its timing depends
 *     on (op, shapes, dtypes, attributes, placement), so the engine times each key once;
 *   - tasks, in issue order: compute (a kernel, on the rank's compute engine), a collective
 *     (kind, groupset, bytes, algorithm; on one of the rank's communication streams) or a
 *     send / recv (peer, tag, bytes; on a stream). Each task may depend on earlier tasks of its
 *     class. The compute engine runs its tasks one at a time in issue order; so does each
 *     stream (collectives of one axis in issue order, as an NCCL stream does); engines run
 *     concurrently, joined by the dependencies.
 *
 * Matching rules (as NCCL's): the k-th collective of a rank on (stream, groupset) is the k-th
 * of every other member of its group there — run_graph_finalize checks that the members' lists
 * agree; the k-th send from rank a to rank b with tag t is received by b's k-th recv from a
 * with tag t. A send is eager: it starts when it is at the head of its stream and its
 * dependencies are done, whether or not the receiver has posted its recv, and completes when
 * the data is delivered; a recv completes when it is at the head, its dependencies are done
 * and the data is there.
 *
 *   run_graph *g;
 *   run_graph_create(4, &g, &err);
 *   uint32_t all[] = {0, 1, 2, 3}, dp, cls, k, fwd, ar;
 *   run_graph_add_groupset(g, "dp", 1, 4, all, &dp, &err);
 *   run_graph_add_class(g, "replica", &cls, &err);         // every rank is in class 0
 *   run_graph_add_kernel(g, &(run_kernel){.key = "matmul 1024x1024x1024 bf16"}, &k, &err);
 *   run_graph_add_task(g, cls, &(run_task){.kind = RUN_TASK_COMPUTE, .kernel = k}, &fwd, &err);
 *   run_graph_add_task(g, cls, &(run_task){.kind = RUN_TASK_COLL, .comm = RUN_COMM_DP,
 *                      .op = COLL_OP_ALL_REDUCE, .groupset = dp, .bytes = 1 << 26,
 *                      .stream = 1, .deps = &fwd, .n_deps = 1}, &ar, &err);
 *   run_graph_finalize(g, &err);                           // then run_simulate (run_engine.h)
 *   run_graph_free(g);
 *
 * Errors: every function returns NP_OK or fills err (NP_ERR_RANGE, NP_ERR_INCONSISTENT,
 * NP_ERR_MISSING, NP_ERR_NOMEM) and leaves the graph as it was. A finalized graph is read-only.
 */
#ifndef NPUSIM_SIM_RUN_GRAPH_H
#define NPUSIM_SIM_RUN_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "coll.h"
#include "err.h"

#define RUN_NONE UINT32_MAX
#define RUN_STREAMS 15            /* communication streams per rank (engines 1 .. 15) */
#define RUN_ENGINES (1 + RUN_STREAMS) /* engine 0 is the compute engine */
#define RUN_NAME_MAX 32           /* names of groupsets, classes, streams (longer: cut) */

typedef enum run_comm_kind {
#define RUN_COMM(NAME, name, desc) RUN_COMM_##NAME,
#include "run_kinds.def"
#undef RUN_COMM
    RUN_COMM_COUNT
} run_comm_kind;

typedef enum run_unit {
#define RUN_UNIT(NAME, name, from_kernel, desc) RUN_UNIT_##NAME,
#include "run_kinds.def"
#undef RUN_UNIT
    RUN_UNIT_COUNT
} run_unit;

const char *run_comm_kind_name(run_comm_kind k); /* "tp", ...; NULL out of range */
const char *run_unit_name(run_unit u);           /* "compute", ... */
bool run_unit_from_kernel(run_unit u);           /* its busy time comes from run_ktime */

typedef enum run_task_kind {
    RUN_TASK_COMPUTE,
    RUN_TASK_COLL,
    RUN_TASK_SEND,
    RUN_TASK_RECV,
    RUN_TASK_KIND_COUNT
} run_task_kind;

const char *run_task_kind_name(run_task_kind k); /* "compute", "coll", "send", "recv" */

/* run_task.flags */
#define RUN_TASK_PIPELINE 1u  /* compute: a micro-batch's forward or backward in the pipeline
                                 schedule; the bubble is measured over these tasks */
#define RUN_TASK_RECOMPUTE 2u /* compute: recomputation — hardware FLOPs, not model FLOPs */
#define RUN_TASK_CHAINED 4u   /* compute: waits for work issued since the last chained task
                                 (a program puts a barrier before it): takes its kernel's
                                 run_ktime.chained_ps */
#define RUN_TASK_LAUNCH 8u    /* compute: the first kernel after the host synchronized the
                                 device: it waits the host's launch latency besides the stream's
                                 gap, as a step's first kernel does (docs/run.md, "Kernel
                                 launches") */

/* One task. Fields not used by its kind are ignored. */
typedef struct run_task {
    run_task_kind kind;
    uint32_t flags;
    const uint32_t *deps; /* ids of earlier tasks of the same class that must finish first */
    uint32_t n_deps;
    /* compute */
    uint32_t kernel;      /* from run_graph_add_kernel */
    /* coll, send, recv */
    run_comm_kind comm;   /* which parallelism it serves (for the report) */
    uint32_t stream;      /* 0 .. RUN_STREAMS-1 */
    uint64_t bytes;       /* coll: as coll_desc.bytes (nccl-tests sizes); send/recv: message */
    /* coll */
    coll_op op;
    coll_algo algo;
    uint32_t groupset;    /* the running rank's group in it is the collective's group */
    uint32_t root;        /* broadcast, reduce, scatter, gather: root's position in the group */
    uint64_t chunk_bytes; /* as coll_desc */
    uint32_t elem_bytes;  /* as coll_desc (0: 4) */
    /* send, recv */
    uint32_t peer_groupset; /* RUN_NONE: `peer` is a rank; else the peer is the member of the
                               running rank's group at (its own position + peer), no wrap */
    int32_t peer;
    uint32_t tag;
    /* overlapped in chunks (docs/run.md, "Overlapped tensor-parallel communication"): with
     * pipe_chunks k >= 2, dependency pipe_dep (a task id among deps, of another engine: a
     * compute task's collective or a collective's compute task) is waited for only until it
     * has started, and this task then ends no earlier than a k-chunk two-stage pipeline of
     * the two allows: max(its own end + the other's time / k, the other's end + its time / k).
     * 0: none */
    uint32_t pipe_dep;
    uint32_t pipe_chunks;
} run_task;

/* A distinct compute kernel. */
typedef struct run_kernel {
    const char *key;  /* everything its timing depends on (copied; the identity of the kernel:
                         adding the same key again returns the same id) */
    void *data;       /* for the timing function (run_engine.h), not owned */
    double flops;     /* model FLOPs of one execution */
    double hw_flops;  /* FLOPs the hardware executes (0: the same as flops) */
} run_kernel;

typedef struct run_graph run_graph;

/* An empty graph of `ranks` ranks (1 .. 2^24). NP_ERR_RANGE, NP_ERR_NOMEM. */
np_status run_graph_create(uint32_t ranks, run_graph **out, np_err *err);
void run_graph_free(run_graph *g);

/* Adds a groupset of n_groups groups of group_size ranks: members[i * group_size + j] is
 * position j of group i. A rank is in at most one group of a groupset; ranks in none cannot
 * run tasks that use it. *id is its number (0, 1, ...). NP_ERR_RANGE for a bad rank, a rank
 * given twice or an empty shape. */
np_status run_graph_add_groupset(run_graph *g, const char *name, uint32_t n_groups,
                                 uint32_t group_size, const uint32_t *members, uint32_t *id,
                                 np_err *err);

/* Adds a class (0, 1, ...). Every rank starts in class 0. */
np_status run_graph_add_class(run_graph *g, const char *name, uint32_t *id, np_err *err);
np_status run_graph_set_class(run_graph *g, uint32_t rank, uint32_t cls, np_err *err);

/* Places rank on chip (default: its own number). Chips must be distinct (checked by
 * run_graph_finalize) and exist in the network (checked by run_simulate). */
np_status run_graph_set_chip(run_graph *g, uint32_t rank, uint32_t chip, np_err *err);

/* Names stream s ("tp", "dp", "pp-send"; default "s<N>"), for reports and messages. */
np_status run_graph_set_stream_name(run_graph *g, uint32_t stream, const char *name,
                                    np_err *err);

/* The kernel with k->key, added if new; *id its number. */
np_status run_graph_add_kernel(run_graph *g, const run_kernel *k, uint32_t *id, np_err *err);

/* Appends a task to class cls; *id (may be NULL) its number in the class (0, 1, ... in issue
 * order). NP_ERR_RANGE for a dependency that is not an earlier task, an unknown kernel,
 * groupset, stream, kind or root; NP_ERR_INCONSISTENT for an algorithm the op lacks. */
np_status run_graph_add_task(run_graph *g, uint32_t cls, const run_task *t, uint32_t *id,
                             np_err *err);

/* Declares the pipeline: each group of groupset pp is one pipeline, position = stage; the
 * step has micro_batches micro-batches. Without it the run has one stage. */
np_status run_graph_set_pipeline(run_graph *g, uint32_t pp_groupset, uint32_t micro_batches,
                                 np_err *err);

/* Checks the whole graph and prepares it for run_simulate: every rank in a class, distinct
 * chips; every collective's rank in a group of its groupset, and the members of each group
 * with equal lists of collectives per (stream, groupset); every send and recv peer inside its
 * group, every send matched by a recv with equal message sizes in order, the sends (recvs) of
 * one (peer, tag) on one stream. NP_ERR_INCONSISTENT / NP_ERR_RANGE naming the rank, class,
 * task and what disagrees; after a failure the graph can only be freed. After success the
 * graph cannot change. */
np_status run_graph_finalize(run_graph *g, np_err *err);

/* Facts, for reports and tests. */
uint32_t run_graph_ranks(const run_graph *g);
uint32_t run_graph_classes(const run_graph *g);
uint32_t run_graph_kernels(const run_graph *g);
uint32_t run_graph_tasks(const run_graph *g, uint32_t cls); /* tasks of a class */
uint32_t run_graph_class_of(const run_graph *g, uint32_t rank);
uint32_t run_graph_chip_of(const run_graph *g, uint32_t rank);
const run_kernel *run_graph_kernel(const run_graph *g, uint32_t id);
const char *run_graph_groupset_name(const run_graph *g, uint32_t id);
const char *run_graph_stream_name(const run_graph *g, uint32_t stream);

#endif
