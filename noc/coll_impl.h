/* coll_impl.h — what an algorithm provides to make a schedule (coll_sched.h), and the helpers
 * they share.
 *
 * An algorithm is a table of function pointers (coll_sched_ops): `init` checks that the group
 * fits and precomputes what its op generators need (coll_sched_set_state); `sends`/`recvs`
 * count a rank's ops; `send`/`recv` generate one op. Generators are pure functions of the
 * schedule and their arguments, so any consumer may call them in any order, any number of
 * times. One file per family: coll_ring.c (ring, bidirectional ring, multi-level rings),
 * coll_tree.c (binomial trees, chains, scatter, gather), coll_rhd.c (recursive halving and
 * doubling), coll_p2p.c (all-to-all, sendrecv), coll_nvls.c (all-reduce in a switch).
 */
#ifndef NPUSIM_NOC_COLL_IMPL_H
#define NPUSIM_NOC_COLL_IMPL_H

#include "coll_sched.h"

typedef struct coll_sched_ops {
    coll_op op;
    coll_algo algo;
    /* Validates the group and sets up state. NP_ERR_INCONSISTENT when the group does not fit
     * the algorithm, NP_ERR_NOMEM. */
    np_status (*init)(coll_sched *s, np_err *err);
    uint32_t (*ports)(const coll_sched *s);
    uint32_t (*steps)(const coll_sched *s);
    uint32_t (*sends)(const coll_sched *s, uint32_t rank, uint32_t port);
    uint32_t (*recvs)(const coll_sched *s, uint32_t rank);
    void (*send)(const coll_sched *s, uint32_t rank, uint32_t port, uint32_t i, coll_xfer *x);
    void (*recv)(const coll_sched *s, uint32_t rank, uint32_t i, coll_xfer *x);
    /* (optional) recv without where it writes: fills peer, port, reduce and the unblock
     * fields only (a flow engine knows the bytes from the message); defaults to recv. */
    void (*recv_deps)(const coll_sched *s, uint32_t rank, uint32_t i, coll_xfer *x);
    /* (optional) Frees the state; defaults to free(). */
    void (*free_state)(void *state);
    /* (optional) send without where it reads: fills peer, match, deps and bytes only (what a
     * flow engine needs to issue it); defaults to send. */
    void (*send_deps)(const coll_sched *s, uint32_t rank, uint32_t port, uint32_t i,
                      coll_xfer *x);
    /* (optional) switches that take part (coll_sched_switches); defaults to none. */
    uint32_t (*switches)(const coll_sched *s);
} coll_sched_ops;

struct coll_sched {
    coll_sched_desc d;         /* elem_bytes filled in; order, channel_orders point to copies */
    uint32_t *order;
    uint32_t *channel_orders;
    const coll_sched_ops *ops;
    void *state;               /* the algorithm's */
    uint32_t ports, steps, switches;
    uint64_t messages;
};

/* For algorithms: the schedule's description and their state. */
static inline const coll_sched_desc *coll_sched_d(const coll_sched *s) { return &s->d; }
static inline void *coll_sched_state(const coll_sched *s) { return s->state; }
static inline void coll_sched_set_state(coll_sched *s, void *state) { s->state = state; }

/* Part i of n of a range of `bytes` in whole elements of `elem` bytes: elements / n each,
 * one more for the first elements % n parts, and the remainder bytes (bytes % elem) on the
 * last part. Its offset (from the range's start) and size. */
static inline uint64_t coll_part_off(uint64_t bytes, uint32_t elem, uint64_t n, uint64_t i)
{
    uint64_t units = bytes / elem, q = units / n, r = units % n;
    return i >= n ? bytes : (i * q + (i < r ? i : r)) * elem;
}
static inline uint64_t coll_part_bytes(uint64_t bytes, uint32_t elem, uint64_t n, uint64_t i)
{
    return coll_part_off(bytes, elem, n, i + 1) - coll_part_off(bytes, elem, n, i);
}
/* The largest part of such a split. */
static inline uint64_t coll_part_max(uint64_t bytes, uint32_t elem, uint64_t n)
{
    uint64_t a = coll_part_bytes(bytes, elem, n, 0), b = coll_part_bytes(bytes, elem, n, n - 1);
    return a > b ? a : b;
}
/* Chunks of a message of up to `bytes` with chunk size `chunk` (0: one); at least 1. */
static inline uint64_t coll_chunks(uint64_t bytes, uint64_t chunk)
{
    if (chunk == 0 || bytes <= chunk)
        return 1;
    return (bytes + chunk - 1) / chunk;
}

/* The algorithms, by family. */
extern const coll_sched_ops coll_ring_all_reduce, coll_ring_all_gather,
    coll_ring_reduce_scatter, coll_biring_all_reduce, coll_hier_all_reduce; /* coll_ring.c */
extern const coll_sched_ops coll_tree_broadcast, coll_tree_reduce, coll_tree_all_reduce,
    coll_chain_broadcast, coll_chain_reduce, coll_tree_scatter,
    coll_tree_gather;                                                       /* coll_tree.c */
extern const coll_sched_ops coll_rhd_all_reduce, coll_rhd_all_gather,
    coll_rhd_reduce_scatter;                                                /* coll_rhd.c */
extern const coll_sched_ops coll_pairwise_all_to_all, coll_direct_all_to_all,
    coll_direct_sendrecv;                                                   /* coll_p2p.c */
extern const coll_sched_ops coll_nvls_all_reduce;                           /* coll_nvls.c */

#endif
