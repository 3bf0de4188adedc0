/* run_impl.h — what the run engine's files share of the graph's inside (not a public API).
 *
 * A class's tasks are stored compactly (rg_task); each task knows its engine (0 compute,
 * 1 + stream) and its position in that engine's issue order, and its dependencies are stored
 * as (engine, position) pairs, so "is dependency d done?" is one comparison with the engine's
 * completion count: the engines complete their tasks in order. Collective parameters are
 * interned as specs; send and recv tasks refer to a channel slot of their class (a distinct
 * (peer, tag)); finalize resolves every rank's send channels to the receiving rank and its
 * recv channel, so delivering a message is an array lookup.
 */
#ifndef NPUSIM_SIM_RUN_IMPL_H
#define NPUSIM_SIM_RUN_IMPL_H

#include "run_graph.h"
#include "hmap.h"

#define RG_DEP_ENGINE_SHIFT 28 /* dependency = engine << 28 | position */
#define RG_DEP_POS_MASK ((1u << RG_DEP_ENGINE_SHIFT) - 1)

typedef struct rg_groupset {
    char name[RUN_NAME_MAX];
    uint32_t n_groups, size;
    uint32_t *members;  /* n_groups * size ranks */
    uint32_t *group_of; /* per rank: its group, RUN_NONE when in none */
    uint32_t *pos_of;   /* per rank: its position in that group */
} rg_groupset;

/* A distinct collective: everything that decides what it does. */
typedef struct rg_spec {
    coll_op op;
    coll_algo algo; /* AUTO: chosen by the tuner (coll_tune.h) per group and size */
    uint32_t groupset, root, elem_bytes, stream;
    run_comm_kind comm;
    uint64_t bytes, chunk_bytes;
    uint32_t comm_id; /* its (stream, groupset) pair, numbered by finalize */
} rg_spec;

typedef struct rg_task {
    uint8_t kind, comm, engine, flags;
    uint32_t pos;             /* index in its engine's issue order */
    uint32_t dep_off, n_deps; /* into the class's deps */
    uint32_t pipe;            /* run_task.pipe_dep as engine << RG_DEP_ENGINE_SHIFT | position
                                 (with pipe_k) */
    uint32_t pipe_k;          /* run_task.pipe_chunks; 0: none */
    uint32_t ref;             /* compute: kernel; coll: spec; send / recv: channel slot */
    uint64_t bytes;           /* send / recv */
} rg_task;

/* A (peer, tag) a class sends to or receives from. */
typedef struct rg_chan {
    uint32_t peer_groupset;
    int32_t peer;
    uint32_t tag;
    uint32_t engine; /* every task of the channel runs on this engine */
} rg_chan;

typedef struct rg_class {
    char name[RUN_NAME_MAX];
    rg_task *tasks;
    uint32_t n_tasks, cap_tasks;
    uint32_t *deps;
    uint32_t n_deps, cap_deps;
    uint32_t eng_n[RUN_ENGINES];       /* tasks per engine */
    bool has_pipe;                     /* a task overlaps another in chunks (rg_task.pipe_k) */
    uint32_t *order;                   /* finalize: task ids by engine, then position */
    uint32_t eng_off[RUN_ENGINES + 1]; /* finalize: engine e's tasks at order[eng_off[e]..] */
    uint8_t engines[RUN_ENGINES];      /* finalize: the engines it uses */
    uint32_t n_engines;
    rg_chan *send, *recv;
    uint32_t n_send, n_recv, cap_send, cap_recv;
} rg_class;

typedef struct rg_kernel {
    run_kernel k; /* key points to a copy */
} rg_kernel;

/* A (stream, groupset) pair used by collectives: its group instances each get a rendezvous
 * slot comm_base + group. */
typedef struct rg_comm {
    uint32_t stream, groupset, base;
} rg_comm;

struct run_graph {
    uint32_t ranks;
    uint32_t *chip_of, *class_of;
    rg_groupset *gs;
    uint32_t n_gs, cap_gs;
    rg_class *cls;
    uint32_t n_cls, cap_cls;
    rg_kernel *kern;
    uint32_t n_kern, cap_kern;
    np_hmap kern_index;
    rg_spec *spec;
    uint32_t n_spec, cap_spec;
    np_hmap spec_index;
    uint32_t pp_gs, micro_batches;
    char stream_name[RUN_STREAMS][RUN_NAME_MAX];
    bool final;
    /* finalize */
    rg_comm *comm;
    uint32_t n_comm, n_slots;
    uint32_t *send_off;   /* per rank: its send channels at send_dst/send_dch[send_off[r] ..] */
    uint32_t *send_dst;   /* receiving rank */
    uint32_t *send_dch;   /* its recv channel slot */
    uint32_t *recv_off;   /* per rank: its recv channels' state at [recv_off[r] ..] */
    uint32_t *recv_src;   /* sending rank of each recv channel */
    uint32_t n_recv_total;
};

/* The rank a send or recv task's channel `ch` of rank r's class names (RUN_NONE when the
 * peer is outside the group or the rank range). */
uint32_t rg_chan_peer(const run_graph *g, uint32_t r, const rg_chan *ch);

#endif
