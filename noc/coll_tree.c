/* coll_tree.c — tree and chain algorithms: binomial-tree broadcast, reduce, all-reduce
 * (reduce then broadcast, pipelined per chunk), scatter and gather; pipelined-chain
 * broadcast and reduce.
 *
 * Binomial tree on virtual ranks vr = (rank - root) mod p: vr's parent is vr - lowbit(vr);
 * its children are vr + m for m = lowbit(vr)/2, ..., 2, 1 (for the root: the largest power
 * of two below p, ..., 1) while vr + m < p, served largest subtree first. A rank's messages
 * leave one after another (one port per direction), so with an idle network and no chunking:
 *   broadcast   ceil(log2 p)(alpha + n beta)
 *   reduce      ceil(log2 p)(alpha + n beta + n gamma)
 *   all-reduce  the two in sequence
 *   scatter / gather  ceil(log2 p) alpha + (p-1)/p n beta   (p a power of two)
 * Chain on ranks root, root+1, ...: each chunk is forwarded as soon as it has arrived (and,
 * for reduce, been reduced): with c chunks of s = n/c bytes,
 *   broadcast   (p - 1)(alpha + s beta) + (c - 1) s beta
 *   reduce      (p - 1)(alpha + s beta + s gamma) + (c - 1) s max(beta, gamma)
 */
#include <stdlib.h>

#include "coll_impl.h"

#define TREE_UP 0   /* toward the root (reduce, gather): port 0 */
#define TREE_DOWN 1 /* away from the root (broadcast, scatter): port 1 */
#define TREE_TAG(dir, j) (((uint64_t)(dir) << 62) | (uint64_t)(j))
#define TREE_TAG_DIR(t) ((int)((t) >> 62))
#define TREE_TAG_CHUNK(t) ((t) & ((1ULL << 62) - 1))

typedef struct tree_state {
    uint32_t p, root;
    uint64_t chunk, n_chunks;
    bool all_reduce, chain;
    uint32_t *count; /* reduce: children reduced per (vr, chunk); gather: children received */
} tree_state;

static uint32_t lowbit(uint32_t v) { return v & (~v + 1); }

static uint32_t tree_vr(const tree_state *t, uint32_t rank)
{
    return (rank + t->p - t->root) % t->p;
}

static uint32_t tree_rank(const tree_state *t, uint32_t vr)
{
    return (vr + t->root) % t->p;
}

/* The first (largest) child mask of vr; 0 when it has none. */
static uint32_t tree_first_mask(const tree_state *t, uint32_t vr)
{
    uint32_t m;
    if (vr == 0) {
        m = 1;
        while ((uint64_t)m * 2 < t->p)
            m *= 2;
        if (t->p < 2)
            return 0;
    } else {
        m = lowbit(vr) / 2;
    }
    while (m && vr + m >= t->p)
        m /= 2;
    return m;
}

static uint32_t tree_children(const tree_state *t, uint32_t vr)
{
    uint32_t k = 0;
    for (uint32_t m = tree_first_mask(t, vr); m; m /= 2)
        k += vr + m < t->p;
    return k;
}

static uint64_t tree_chunk_bytes(coll *c, const tree_state *t, uint64_t j)
{
    return coll_chunk_bytes(coll_get_desc(c)->bytes, t->chunk, j);
}

static void tree_free(void *p)
{
    tree_state *t = p;
    free(t->count);
    free(t);
}

static tree_state *tree_new(coll *c, bool counts, np_err *err)
{
    tree_state *t = calloc(1, sizeof *t);
    if (!t) {
        np_err_set(err, NP_ERR_NOMEM, "out of memory");
        return NULL;
    }
    coll_set_state(c, t);
    const coll_desc *d = coll_get_desc(c);
    t->p = coll_ranks(c);
    t->root = d->op == COLL_OP_ALL_REDUCE ? 0 : d->root;
    t->chunk = d->chunk_bytes;
    t->n_chunks = coll_chunks(d->bytes, d->chunk_bytes);
    if (counts) {
        if ((double)t->p * (double)t->n_chunks > (double)(1u << 26)) {
            np_err_set(err, NP_ERR_RANGE, "%u ranks x %llu chunks is too many to track; use a "
                       "larger chunk size", (unsigned)t->p, (unsigned long long)t->n_chunks);
            return NULL;
        }
        t->count = calloc((size_t)t->p * t->n_chunks, sizeof *t->count);
        if (!t->count) {
            np_err_set(err, NP_ERR_NOMEM, "out of memory");
            return NULL;
        }
    }
    return t;
}

/* Sends chunk j from vr to each of its children (tree) or its successor (chain). */
static void tree_send_down(coll *c, tree_state *t, uint32_t vr, uint64_t j)
{
    uint64_t b = tree_chunk_bytes(c, t, j);
    if (t->chain) {
        if (vr + 1 < t->p)
            coll_send(c, tree_rank(t, vr), tree_rank(t, vr + 1), b, TREE_TAG(TREE_DOWN, j),
                      TREE_DOWN);
        return;
    }
    for (uint32_t m = tree_first_mask(t, vr); m; m /= 2)
        if (vr + m < t->p)
            coll_send(c, tree_rank(t, vr), tree_rank(t, vr + m), b, TREE_TAG(TREE_DOWN, j),
                      TREE_DOWN);
}

static void tree_send_up(coll *c, tree_state *t, uint32_t vr, uint64_t j)
{
    uint32_t parent = t->chain ? vr - 1 : vr - lowbit(vr);
    coll_send(c, tree_rank(t, vr), tree_rank(t, parent), tree_chunk_bytes(c, t, j),
              TREE_TAG(TREE_UP, j), TREE_UP);
}

static np_status tree_start_common(coll *c, bool down, bool chain, bool all_reduce,
                                   np_err *err)
{
    tree_state *t = tree_new(c, !down, err);
    if (!t)
        return err->status;
    t->chain = chain;
    t->all_reduce = all_reduce;
    if (t->p < 2)
        return NP_OK;
    if (down) {
        for (uint64_t j = 0; j < t->n_chunks; j++)
            tree_send_down(c, t, 0, j);
        return NP_OK;
    }
    for (uint32_t vr = 1; vr < t->p; vr++) {
        bool leaf = chain ? vr == t->p - 1 : tree_children(t, vr) == 0;
        if (leaf)
            for (uint64_t j = 0; j < t->n_chunks; j++)
                tree_send_up(c, t, vr, j);
    }
    return NP_OK;
}

static void tree_recv(coll *c, uint32_t rank, uint32_t from, uint64_t tag, uint64_t bytes)
{
    (void)from;
    tree_state *t = coll_state(c);
    if (TREE_TAG_DIR(tag) == TREE_DOWN)
        tree_send_down(c, t, tree_vr(t, rank), TREE_TAG_CHUNK(tag));
    else
        coll_reduce(c, rank, bytes, tag);
}

static void tree_reduced(coll *c, uint32_t rank, uint64_t tag, uint64_t bytes)
{
    (void)bytes;
    tree_state *t = coll_state(c);
    uint32_t vr = tree_vr(t, rank);
    uint64_t j = TREE_TAG_CHUNK(tag);
    uint32_t need = t->chain ? 1 : tree_children(t, vr);
    if (++t->count[(size_t)vr * t->n_chunks + j] < need)
        return;
    if (vr != 0)
        tree_send_up(c, t, vr, j);
    else if (t->all_reduce)
        tree_send_down(c, t, 0, j);
}

static np_status tree_bcast_start(coll *c, np_err *err)
{
    return tree_start_common(c, true, false, false, err);
}

static np_status tree_reduce_start(coll *c, np_err *err)
{
    return tree_start_common(c, false, false, false, err);
}

static np_status tree_ar_start(coll *c, np_err *err)
{
    return tree_start_common(c, false, false, true, err);
}

static np_status chain_bcast_start(coll *c, np_err *err)
{
    return tree_start_common(c, true, true, false, err);
}

static np_status chain_reduce_start(coll *c, np_err *err)
{
    return tree_start_common(c, false, true, false, err);
}


const coll_algo_ops coll_tree_broadcast = {COLL_OP_BROADCAST, COLL_ALGO_TREE, tree_bcast_start,
                                           tree_recv, tree_reduced, tree_free};
const coll_algo_ops coll_tree_reduce = {COLL_OP_REDUCE, COLL_ALGO_TREE, tree_reduce_start,
                                        tree_recv, tree_reduced, tree_free};
const coll_algo_ops coll_tree_all_reduce = {COLL_OP_ALL_REDUCE, COLL_ALGO_TREE,
                                            tree_ar_start, tree_recv, tree_reduced,
                                            tree_free};
const coll_algo_ops coll_chain_broadcast = {COLL_OP_BROADCAST, COLL_ALGO_CHAIN,
                                            chain_bcast_start, tree_recv, tree_reduced,
                                            tree_free};
const coll_algo_ops coll_chain_reduce = {COLL_OP_REDUCE, COLL_ALGO_CHAIN, chain_reduce_start,
                                         tree_recv, tree_reduced, tree_free};

/* ---- Scatter and gather (binomial, unchunked) ---------------------------------------------
 * The subtree of vr > 0 is [vr, vr + lowbit(vr)) within [0, p); of the root, everything.
 * Scatter sends each child its subtree's shares; gather sends the parent the sender's
 * subtree once every child's part has arrived. */

static uint32_t tree_subtree(const tree_state *t, uint32_t vr)
{
    if (vr == 0)
        return t->p;
    uint32_t s = lowbit(vr);
    return vr + s <= t->p ? s : t->p - vr;
}

static uint64_t tree_range_bytes(coll *c, const tree_state *t, uint32_t vr, uint32_t size)
{
    uint64_t n = coll_get_desc(c)->bytes, rem = n % t->p;
    uint64_t extra = 0;
    if (vr < rem)
        extra = (vr + size <= rem ? size : rem - vr);
    return (uint64_t)size * (n / t->p) + extra;
}

static void scatter_send(coll *c, tree_state *t, uint32_t vr)
{
    for (uint32_t m = tree_first_mask(t, vr); m; m /= 2)
        if (vr + m < t->p) {
            uint32_t ch = vr + m;
            coll_send(c, tree_rank(t, vr), tree_rank(t, ch),
                      tree_range_bytes(c, t, ch, tree_subtree(t, ch)), TREE_TAG(TREE_DOWN, 0),
                      TREE_DOWN);
        }
}

static np_status scatter_start(coll *c, np_err *err)
{
    tree_state *t = tree_new(c, false, err);
    if (!t)
        return err->status;
    scatter_send(c, t, 0);
    return NP_OK;
}

static void scatter_recv(coll *c, uint32_t rank, uint32_t from, uint64_t tag, uint64_t bytes)
{
    (void)from;
    (void)tag;
    (void)bytes;
    tree_state *t = coll_state(c);
    scatter_send(c, t, tree_vr(t, rank));
}

static void gather_send(coll *c, tree_state *t, uint32_t vr)
{
    coll_send(c, tree_rank(t, vr), tree_rank(t, vr - lowbit(vr)),
              tree_range_bytes(c, t, vr, tree_subtree(t, vr)), TREE_TAG(TREE_UP, 0), TREE_UP);
}

static np_status gather_start(coll *c, np_err *err)
{
    tree_state *t = tree_new(c, false, err);
    if (!t)
        return err->status;
    t->count = calloc(t->p, sizeof *t->count);
    if (!t->count)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    for (uint32_t vr = 1; vr < t->p; vr++)
        if (tree_children(t, vr) == 0)
            gather_send(c, t, vr);
    return NP_OK;
}

static void gather_recv(coll *c, uint32_t rank, uint32_t from, uint64_t tag, uint64_t bytes)
{
    (void)from;
    (void)tag;
    (void)bytes;
    tree_state *t = coll_state(c);
    uint32_t vr = tree_vr(t, rank);
    if (++t->count[vr] == tree_children(t, vr) && vr != 0)
        gather_send(c, t, vr);
}

const coll_algo_ops coll_tree_scatter = {COLL_OP_SCATTER, COLL_ALGO_TREE, scatter_start,
                                         scatter_recv, NULL, tree_free};
const coll_algo_ops coll_tree_gather = {COLL_OP_GATHER, COLL_ALGO_TREE, gather_start,
                                        gather_recv, NULL, tree_free};
