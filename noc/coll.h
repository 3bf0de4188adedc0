/* coll.h — the flow engine of collectives: each collective's schedule (coll_sched.h) of
 * chunked transfers and reductions really runs on the simulated links (net.h), never as a
 * closed formula.
 *
 * A group is any list of chips (its ranks, in order), so several collectives on different or
 * overlapping groups can run at once and contend for links. Reductions take time on the
 * receiving chip's vector units: bytes / (elem_bytes x core.vector_lanes x
 * core.vector_ops_per_lane x core.clock_ghz x chip.cores) — one element reduced per lane-op —
 * and each chip reduces one chunk at a time. docs/collectives.md gives every algorithm's
 * schedule and its alpha-beta cost.
 *
 *   coll_sys *sys;                                    // the network + reduction model
 *   coll_sys_create(&cfg, NULL, q, NULL, &sys, &err);
 *   uint32_t tp[] = {0, 1, 2, 3};
 *   coll_desc d = {.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_RING, .chips = tp,
 *                  .n_chips = 4, .bytes = 1 << 20, .done = my_done, .ctx = me};
 *   coll *c;
 *   coll_start(sys, &d, &c, &err);                    // runs as q runs
 *   evq_run(q, &err);                                 // my_done(me, &result) is called
 *   coll_free(c);
 *   coll_sys_free(sys);
 *
 * A protocol (coll_proto.h: NCCL's LL, LL128, Simple; or raw, the default) adds a fixed cost
 * before the first message, a least time per message from its last byte leaving to its
 * completion, and its wire format and pace to each message's bytes on the links; the
 * schedule stays the same.
 *
 * Sizes follow nccl-tests: `bytes` is the per-rank buffer of all-reduce, broadcast, reduce
 * and sendrecv; the whole (gathered) buffer of all-gather, the whole input of reduce-scatter,
 * the root's whole buffer of scatter and gather, and each rank's whole send buffer of
 * all-to-all; a rank's share is bytes / ranks (the remainder spread over the first ranks).
 */
#ifndef NPUSIM_NOC_COLL_H
#define NPUSIM_NOC_COLL_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "coll_proto.h"
#include "coll_sched.h"
#include "err.h"
#include "evq.h"
#include "net.h"
#include "stats.h"

/* The algorithm for (op, a) where no network is at hand: a itself, AUTO the op's first
 * listed (ring, tree, pairwise, direct). coll_start resolves AUTO with the tuner instead
 * (coll_tune.h), by topology and size; callers that can should too. */
coll_algo coll_algo_resolve(coll_op op, coll_algo a);

typedef struct coll_result {
    coll_op op;
    coll_algo algo;         /* the one that ran (never AUTO: the tuner's choice for the
                               topology and size) */
    uint32_t ranks;
    uint64_t bytes;
    uint64_t t_start_ps, t_end_ps;
    uint64_t transfers;    /* messages sent */
    uint64_t bytes_sent;   /* payload, summed over messages */
    uint64_t wire_bytes;   /* what the messages put on their links (coll_proto.h): lines,
                              pacing; bytes_sent with the raw protocol */
    uint64_t reductions;
    uint64_t reduced_bytes; /* bytes the ranks' vector units reduced (not a switch's), summed */
    coll_proto proto;      /* the protocol that ran (never SYSTEM or AUTO) */
} coll_result;

typedef void (*coll_done_fn)(void *ctx, const coll_result *r);

/* A message of a collective as an observer sees it (coll_desc.obs: traces). */
typedef struct coll_obs_msg {
    uint32_t src, dst;          /* chips */
    uint32_t port;              /* the sender's port: its sends leave one after the other */
    uint64_t id;                /* the same at its send and its receive */
    uint64_t bytes;
    const net_path_info *route; /* send: its route (links, latency); recv: NULL */
    uint64_t t_ps;              /* send: it starts; recv: it arrived */
    uint64_t t_reduce_ps, t_done_ps; /* recv: its reduction ran [t_reduce, t_done] on dst
                                        (equal: none; the receive completes at t_done) */
} coll_obs_msg;

/* Called from inside the event run: send when a message starts, recv when it arrives. The
 * observer only looks; either entry may be NULL. */
typedef struct coll_observer {
    void (*send)(void *ctx, const coll_obs_msg *m);
    void (*recv)(void *ctx, const coll_obs_msg *m);
    void *ctx;
} coll_observer;

typedef struct coll_desc {
    coll_op op;
    coll_algo algo;
    const uint32_t *chips;  /* the group in rank order (copied); NULL: all chips 0 .. n-1 */
    uint32_t n_chips;       /* ranks; with chips NULL, 0 means every chip */
    uint64_t bytes;
    uint32_t root;          /* rank of the root (broadcast, reduce, scatter, gather) */
    uint64_t chunk_bytes;   /* pipelining unit of ring, tree and chain; 0: no chunking */
    uint32_t elem_bytes;    /* element size for reductions; 0: 4 (fp32) */
    uint32_t group_ranks;   /* hier: ranks per inner group, consecutive ranks (two levels);
                               0: the topology's levels (coll_topo.h) */
    bool rank_order;        /* rings in rank order, not fitted to the topology (coll_topo.h) */
    uint32_t channels;      /* ring: rings side by side over a group that spans islands, each
                               leaving its islands through other scale-out ports (NCCL's
                               channels, coll_topo.h); 0: the system's coll_channels */
    uint32_t island_channels; /* ring with system.coll_pipeline, over a group within one
                               island: NCCL's channels, which move in step over the same links
                               as one ring whose messages carry every channel's slice (the
                               count sets the slices); 0: the system's coll_island_channels,
                               fewer for small messages as NCCL (coll_pipe_channels) */
    coll_proto proto;       /* how messages cross the links (coll_proto.h); SYSTEM (0): the
                               system's coll_protocol; AUTO: the tuner's choice */
    uint32_t max_ranks;     /* the largest group simulated message by message; 0:
                               COLL_MAX_RANKS. A ring over n ranks moves on the order of n^2
                               messages (an all-reduce 2n(n - 1)) and the tuner routes every
                               pair it models, so past this a collective is refused with the
                               count, never left to run for days */
    coll_done_fn done;      /* (optional) called at completion, from inside the event run */
    void *ctx;
    const coll_observer *obs; /* (optional) sees every message (borrowed) */
} coll_desc;

/* coll_desc.max_ranks' default: 16,384 ranks (a ring all-reduce of 537 million messages; a
 * 4,096-rank one simulates in about 12 s, a 16,384-rank one in about 4 minutes on one core). */
#define COLL_MAX_RANKS 16384u

typedef struct coll_sys coll_sys;
typedef struct coll coll;

/* The network of np (NULL: built from cfg.system) on q, and the reduction rate from cfg.core
 * and cfg.chip. reg (may be NULL) receives the network's per-link statistics. */
np_status coll_sys_create(const arch_config *cfg, const net_params *np, evq *q, stats *reg,
                          coll_sys **out, np_err *err);
void coll_sys_free(coll_sys *s);
net *coll_sys_net(coll_sys *s);
/* The system's tuner (coll_tune.h), which resolves COLL_ALGO_AUTO; NULL when out of memory. */
struct coll_tuner *coll_sys_tuner(coll_sys *s);
/* Bytes per second one chip reduces (elements of elem_bytes): coll_reduce_ps's rate on all
 * of the chip's cores. */
double coll_sys_reduce_bytes_per_s(const coll_sys *s, uint32_t elem_bytes);

/* Starts a collective now. NP_ERR_RANGE (a chip not in the network, a repeated chip, a root
 * outside the group, no ranks), NP_ERR_INCONSISTENT (an algorithm the op lacks, or that
 * needs a power-of-two group), NP_ERR_NOMEM. Nothing starts on failure. */
np_status coll_start(coll_sys *s, const coll_desc *d, coll **out, np_err *err);

/* Whether c has completed, and its result (valid once done). */
bool coll_is_done(const coll *c);
const coll_result *coll_get_result(const coll *c);
/* An error met while running (out of memory inside an event), else NP_OK. */
np_status coll_status(const coll *c, np_err *err);

/* Frees a collective (done, or never to be run further). */
void coll_free(coll *c);

/* The schedule description d runs as on network n: sd (op, algo, ranks, sizes filled in by the
 * caller) gets the ring order or levels of coll_topo.h, and a ring over several islands its
 * channels (d->channels wanted; 0 or 1: one ring) and their orders, all in *order (malloc'd,
 * the caller frees it after coll_sched_create; NULL when none). d->chips must be the whole
 * group. NP_ERR_NOMEM, NP_ERR_INCONSISTENT (group_ranks that do not divide the group). */
np_status coll_fit(const net *n, const coll_desc *d, coll_sched_desc *sd, uint32_t **order,
                   np_err *err);

/* Starts d, runs the event queue until it completes, and fills *r. */
np_status coll_run(coll_sys *s, const coll_desc *d, coll_result *r, np_err *err);

/* coll_run that calls progress(ctx, done, total) (may be NULL) after each event of the queue,
 * with the receives completed and to complete in all. */
typedef void (*coll_progress_fn)(void *ctx, uint64_t done, uint64_t total);
np_status coll_run_progress(coll_sys *s, const coll_desc *d, coll_progress_fn progress,
                            void *ctx, coll_result *r, np_err *err);

#endif
