/* coll_sched.h — a collective's schedule: what every rank sends, receives and reduces, written
 * once per algorithm and consumed by every engine that runs collectives (the flow engine,
 * noc/coll.c; the ISA lowering, compiler/kgen_coll.c; the tuner's cost models).
 *
 * A schedule is made for (op, algorithm, ranks, bytes, element size, chunk size, root, and —
 * for rings and multi-level algorithms — the order of the ranks round the ring and the sizes
 * of the levels). Each rank has, per port, an ordered list of sends and one list of receives:
 *
 *   send i of port P of rank r    `bytes` at `offset` of its buffer to rank `peer`, where it
 *                                 is that rank's receive `match`. It leaves once `deps` of
 *                                 r's receives (those that name it in their unblock range)
 *                                 have completed, and after the send before it on the port
 *                                 has sent its last byte (a port is one DMA queue).
 *   receive i of rank r           `bytes` from rank `peer` (its send `match` of port `port`)
 *                                 into `offset` of buffer `buf` — added into what is there
 *                                 when `reduce`. It completes when it has arrived and, when
 *                                 reduce, been reduced; then it unblocks sends
 *                                 [unblock_lo, unblock_hi) of port unblock_port (and of the
 *                                 next unblock_ports - 1 ports too: a switch's multicast).
 *
 * `step` is the algorithm step a message belongs to (its tag: between two ranks, messages of
 * one step are taken in send order). Ops are generated on demand, in O(1) per op (O(log p)
 * for trees), from the schedule's parameters: a schedule of p ranks takes O(p) memory however
 * many messages it has, and iterating a rank's ops is the way to read it:
 *
 *   coll_sched *s;
 *   coll_sched_desc d = {.op = COLL_OP_ALL_REDUCE, .algo = COLL_ALGO_RING, .ranks = 8,
 *                        .bytes = 1 << 20};
 *   coll_sched_create(&d, &s, &err);
 *   for (uint32_t i = 0; i < coll_sched_sends(s, rank, 0); i++) {
 *       coll_xfer x;
 *       coll_sched_send(s, rank, 0, i, &x);   // x.peer, x.offset, x.bytes, x.deps ...
 *   }
 *   coll_sched_free(s);
 *
 * Buffers: every op works in place on one buffer per rank, X (`bytes` bytes, laid out as
 * coll.h describes), except all-to-all and sendrecv, which receive into a second buffer OUT.
 * Segments and chunks are whole elements (the last one takes any remainder bytes).
 */
#ifndef NPUSIM_NOC_COLL_SCHED_H
#define NPUSIM_NOC_COLL_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "err.h"

typedef enum coll_op {
    COLL_OP_ALL_REDUCE,
    COLL_OP_ALL_GATHER,
    COLL_OP_REDUCE_SCATTER,
    COLL_OP_BROADCAST,
    COLL_OP_REDUCE,
    COLL_OP_SCATTER,
    COLL_OP_GATHER,
    COLL_OP_ALL_TO_ALL,
    COLL_OP_SENDRECV,
    COLL_OP_COUNT
} coll_op;

typedef enum coll_algo {
    COLL_ALGO_AUTO,     /* chosen by the tuner (coll_tune.h) for the topology and size */
    COLL_ALGO_RING,     /* all_reduce, all_gather, reduce_scatter */
    COLL_ALGO_BIRING,   /* all_reduce: half the data each way round the ring */
    COLL_ALGO_TREE,     /* binomial tree: all_reduce, broadcast, reduce, scatter, gather */
    COLL_ALGO_RHD,      /* recursive halving/doubling: all_reduce, all_gather, reduce_scatter */
    COLL_ALGO_HIER,     /* multi-level rings (islands, torus dimensions): all_reduce */
    COLL_ALGO_CHAIN,    /* pipelined chain: broadcast, reduce */
    COLL_ALGO_PAIRWISE, /* pairwise exchange: all_to_all */
    COLL_ALGO_DIRECT,   /* every message at once: all_to_all; sendrecv (each rank to the next) */
    COLL_ALGO_NVLS,     /* all_reduce in the switch the ranks hang off (NVLink SHARP): the
                           schedule's rank `ranks` is the switch (coll_sched_switches) */
    COLL_ALGO_COUNT
} coll_algo;

const char *coll_op_name(coll_op op);     /* "all_reduce", ...; NULL out of range */
const char *coll_algo_name(coll_algo a);  /* "ring", ... */
/* Parse a name (also accepting '-' for '_', "allreduce" etc.): NP_ERR_UNKNOWN_KEY listing
 * the valid names otherwise. */
np_status coll_op_parse(const char *s, coll_op *out, np_err *err);
np_status coll_algo_parse(const char *s, coll_algo *out, np_err *err);
/* True when the op has that algorithm (AUTO always). */
bool coll_algo_supported(coll_op op, coll_algo a);
/* Whether the op reduces (all_reduce, reduce_scatter, reduce) and whether it has a root
 * (broadcast, reduce, scatter, gather). */
bool coll_op_reduces(coll_op op);
bool coll_op_rooted(coll_op op);

/* nccl-tests' bus bandwidth factor: busbw = algbw x factor (2(p-1)/p for all-reduce, (p-1)/p
 * for all-gather, reduce-scatter, all-to-all, scatter, gather; 1 otherwise). */
double coll_busbw_factor(coll_op op, uint32_t ranks);

/* The time (ps, rounded up) one chip of cfg takes to reduce `bytes` of elem_bytes-byte
 * elements on `cores` of its cores' vector units, one element per lane-op: the reduction
 * rate of every engine (the flow engine uses all of a chip's cores, the ISA lowering one). */
uint64_t coll_reduce_ps(const arch_config *cfg, uint32_t cores, uint64_t bytes,
                        uint32_t elem_bytes);

#define COLL_MAX_LEVELS 4
#define COLL_MAX_CHANNELS 64

typedef struct coll_sched_desc {
    coll_op op;
    coll_algo algo;           /* not AUTO */
    uint32_t ranks;           /* p >= 1 */
    uint64_t bytes;           /* as coll.h defines per op */
    uint32_t elem_bytes;      /* 0: 4 */
    uint64_t chunk_bytes;     /* pipelining unit of ring, tree and chain (rounded to whole
                                 elements per segment); 0: none */
    uint32_t root;            /* rooted ops */
    /* ring, biring: ring position -> rank; hier: position -> rank, positions numbered
     * level 0 fastest (k0 + q0 (k1 + q1 (k2 ...))). NULL: the identity. Copied. */
    const uint32_t *order;
    /* hier: ranks per ring at each level, level 0 first; their product is `ranks`. 0 levels:
     * two, of the divisor of p nearest sqrt(p) and the rest. */
    uint32_t n_levels;
    uint32_t level_ranks[COLL_MAX_LEVELS];
    /* ring: rings side by side (NCCL's channels; 0 or 1: one ring, at most
     * COLL_MAX_CHANNELS), ring c on port c over part c of every rank's segment (segment r of
     * the buffer is rank r's, as with one ring; ring c moves part c of each segment), in the
     * order channel_orders[c * ranks + k] (position -> rank; NULL: every ring in `order`).
     * Copied. */
    uint32_t channels;
    const uint32_t *channel_orders;
    /* nvls: `channels` pipelines side by side (NCCL's NVLS channels; 0 or 1: one), each on its
     * own ports over its own contiguous part of the buffer, in slices of chunk_bytes per rank;
     * with heads_serial every chip takes a channel's slices one at a time, as NCCL's heads do
     * (coll_nvls.c): it posts its last contribution to each (coll_xfer.post) */
    bool heads_serial;
} coll_sched_desc;

typedef enum coll_buf {
    COLL_BUF_X,   /* the collective's buffer (in place) */
    COLL_BUF_OUT, /* all_to_all and sendrecv: the receive buffer */
} coll_buf;

/* One message seen from one end (see the header comment). */
typedef struct coll_xfer {
    uint32_t peer;         /* the rank at the other end */
    uint32_t match;        /* send: the peer's receive index; receive: the peer's send index */
    uint32_t port;         /* send: its port; receive: the matching send's port */
    uint32_t step;         /* the algorithm step (tag) */
    uint32_t deps;         /* send: receives of this rank that must complete first */
    uint32_t unblock_port; /* receive: completing it unblocks sends [lo, hi) of this port */
    uint32_t unblock_lo, unblock_hi;
    uint32_t unblock_deps; /* receive: the deps of each of those sends */
    uint32_t unblock_ports; /* receive: the same sends of ports unblock_port .. + this - 1
                               (0 or 1: unblock_port alone) */
    coll_buf buf;          /* read (send) or written (receive) */
    bool reduce;           /* receive: added into the buffer */
    bool post;             /* send: its sender's thread block posts it (fences its data and
                              writes the flag) before the port's next message: a serial
                              protocol (coll_proto.h) holds the port meanwhile */
    uint64_t offset, bytes;
} coll_xfer;

typedef struct coll_sched coll_sched;

/* A schedule for d in *out. NP_ERR_INCONSISTENT for an algorithm the op lacks or a group it
 * does not fit (recursive halving/doubling on a group that is not a power of two, levels
 * whose product is not the ranks), NP_ERR_RANGE (no ranks, a root outside the group, an order
 * that is not a permutation, more ops per rank than 32 bits count), NP_ERR_NOMEM. */
np_status coll_sched_create(const coll_sched_desc *d, coll_sched **out, np_err *err);
void coll_sched_free(coll_sched *s);

const coll_sched_desc *coll_sched_get_desc(const coll_sched *s); /* elem_bytes filled in */
uint32_t coll_sched_ranks(const coll_sched *s);
uint32_t coll_sched_ports(const coll_sched *s);          /* ports per rank */
/* Switches that take part as ranks after the chips' (ranks .. ranks + switches - 1: nvls's
 * switch that reduces); 0 for every other algorithm. Their ops are read like a rank's; they
 * hold no buffer of the op's (a value run starts them at zero) and reduce at no chip's cost. */
uint32_t coll_sched_switches(const coll_sched *s);
uint32_t coll_sched_steps(const coll_sched *s);          /* steps: tags are 0 .. steps-1 */
uint64_t coll_sched_messages(const coll_sched *s);       /* over all ranks and switches */
uint32_t coll_sched_sends(const coll_sched *s, uint32_t rank, uint32_t port);
uint32_t coll_sched_recvs(const coll_sched *s, uint32_t rank);
/* Send i of port `port` of `rank` / receive i of `rank` into *x (indices in range). */
void coll_sched_send(const coll_sched *s, uint32_t rank, uint32_t port, uint32_t i,
                     coll_xfer *x);
void coll_sched_recv(const coll_sched *s, uint32_t rank, uint32_t i, coll_xfer *x);
/* Receive i's peer, port, reduce and unblock fields only (the rest may be left unset): what
 * an engine that knows a message's bytes needs on arrival, cheaper for some algorithms. */
void coll_sched_recv_deps(const coll_sched *s, uint32_t rank, uint32_t i, coll_xfer *x);
/* Send i's peer, match, deps and bytes only (the rest of *x undefined): what an engine needs
 * to issue it, without where it reads, which may be cheaper. */
void coll_sched_send_deps(const coll_sched *s, uint32_t rank, uint32_t port, uint32_t i,
                          coll_xfer *x);

/* Checks the schedule's consistency: every send's match is a receive from it of the same
 * bytes, port and step, and back; every send's deps equals the number of receives that
 * unblock it; unblock ranges are in range; running it with no timing (every send as early as
 * its deps allow) completes every op. NP_ERR_INTERNAL naming the first bad op. O(messages). */
np_status coll_sched_verify(const coll_sched *s, np_err *err);

#endif
