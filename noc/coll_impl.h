/* coll_impl.h — what a collective algorithm sees of the engine (coll.c), and the algorithms.
 *
 * An algorithm is a table of function pointers (coll_algo_ops) driven by events: `start`
 * issues the first messages; `recv` is called when a message reaches its rank; `reduced`
 * when a reduction the algorithm asked for has finished. It issues work with coll_send (a
 * message of some bytes from one rank to another, queued on the sender's port `port`: the
 * messages of one port leave one after another, each starting when the previous one's last
 * byte has left) and coll_reduce (a reduction of some bytes on one rank; each rank reduces
 * one thing at a time, in order). A `tag` (64 bits, the algorithm's to define) comes back
 * with the matching recv/reduced. The collective completes when no message or reduction is
 * outstanding after a callback returns.
 */
#ifndef NPUSIM_NOC_COLL_IMPL_H
#define NPUSIM_NOC_COLL_IMPL_H

#include "coll.h"

#define COLL_PORTS 2

typedef struct coll_algo_ops {
    coll_op op;
    coll_algo algo;
    /* Sets up state (coll_set_state) and issues the first work. NP_ERR_INCONSISTENT when the
     * group does not fit the algorithm, NP_ERR_NOMEM. */
    np_status (*start)(coll *c, np_err *err);
    /* A message from rank `from` with `tag` and `bytes` reached rank `rank`. */
    void (*recv)(coll *c, uint32_t rank, uint32_t from, uint64_t tag, uint64_t bytes);
    /* (optional) A reduction of `bytes` with `tag` finished on rank `rank`; defaults to
     * nothing. */
    void (*reduced)(coll *c, uint32_t rank, uint64_t tag, uint64_t bytes);
    /* (optional) Frees the state; defaults to free(). */
    void (*free_state)(void *state);
} coll_algo_ops;

/* ---- The engine, for algorithms --------------------------------------------------------- */

uint32_t coll_ranks(const coll *c);
const coll_desc *coll_get_desc(const coll *c); /* chips points to the group copy */
const net_params *coll_net_params(const coll *c);
void *coll_state(const coll *c);
void coll_set_state(coll *c, void *state);

void coll_send(coll *c, uint32_t from, uint32_t to, uint64_t bytes, uint64_t tag, int port);
void coll_reduce(coll *c, uint32_t rank, uint64_t bytes, uint64_t tag);
/* Records a failure met inside an event (the run stops issuing work). */
void coll_fail(coll *c, np_status s, const char *msg);

/* Share i of `bytes` split into n parts: bytes / n, plus one for the first bytes % n. */
static inline uint64_t coll_share(uint64_t bytes, uint32_t n, uint32_t i)
{
    return bytes / n + (i < bytes % n ? 1 : 0);
}
/* Chunks of a message of `bytes` with chunk size `chunk` (0: one); at least 1. */
static inline uint64_t coll_chunks(uint64_t bytes, uint64_t chunk)
{
    if (chunk == 0 || bytes <= chunk)
        return 1;
    return (bytes + chunk - 1) / chunk;
}
/* Bytes of chunk j of a message of `bytes` in chunks of `chunk`. */
static inline uint64_t coll_chunk_bytes(uint64_t bytes, uint64_t chunk, uint64_t j)
{
    if (chunk == 0 || bytes <= chunk)
        return bytes;
    uint64_t off = j * chunk;
    return bytes - off < chunk ? bytes - off : chunk;
}

/* ---- The algorithms (one file per family) ------------------------------------------------ */

extern const coll_algo_ops coll_ring_all_reduce, coll_ring_all_gather, coll_ring_reduce_scatter,
    coll_biring_all_reduce, coll_hier_all_reduce;                           /* coll_ring.c */
extern const coll_algo_ops coll_tree_broadcast, coll_tree_reduce, coll_tree_all_reduce,
    coll_chain_broadcast, coll_chain_reduce, coll_tree_scatter, coll_tree_gather; /* coll_tree.c */
extern const coll_algo_ops coll_rhd_all_reduce, coll_rhd_all_gather,
    coll_rhd_reduce_scatter;                                               /* coll_rhd.c */
extern const coll_algo_ops coll_pairwise_all_to_all, coll_direct_sendrecv; /* coll_p2p.c */

#endif
