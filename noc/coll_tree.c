/* coll_tree.c — tree and chain schedules: binomial-tree broadcast, reduce, all-reduce (reduce
 * then broadcast, pipelined per chunk), scatter and gather; pipelined-chain broadcast and
 * reduce.
 *
 * Binomial tree on virtual ranks vr = (rank - root) mod p: vr's parent is vr - lowbit(vr);
 * its children are vr + m for m = lowbit(vr)/2, ..., 2, 1 (for the root: the largest power
 * of two below p, ..., 1) while vr + m < p, served largest subtree first. Chain on ranks
 * root, root+1, ...: vr's parent is vr - 1, its child vr + 1. Port 0 carries messages toward
 * the root (reduce, gather), port 1 away from it (broadcast, scatter); each port's messages
 * leave one after another, chunk by chunk, every child's chunk j before anyone's chunk j + 1.
 * A rank forwards chunk j as soon as it has it (broadcast: arrived; reduce: every child's
 * chunk j reduced into its own). With an idle network and no chunking:
 *   broadcast   ceil(log2 p)(alpha + n beta)
 *   reduce      ceil(log2 p)(alpha + n beta + n gamma)
 *   all-reduce  the two in sequence (root 0)
 *   scatter / gather  ceil(log2 p) alpha + (p-1)/p n beta   (p a power of two)
 * and with c chunks of s = n/c bytes a chain takes
 *   broadcast   (p - 1)(alpha + s beta) + (c - 1) s beta
 *   reduce      (p - 1)(alpha + s beta + s gamma) + (c - 1) s max(beta, gamma)
 * Scatter and gather move whole subtrees (unchunked): the subtree of vr > 0 is
 * [vr, vr + lowbit(vr)) within [0, p), of the root everything, and X holds the shares in
 * virtual-rank order (share vr, part vr of p, is the one rank (root + vr) mod p keeps or
 * gives).
 */
#include <stdlib.h>

#include "coll_impl.h"

#define TREE_UP 0
#define TREE_DOWN 1

typedef enum tree_mode { TREE_BCAST, TREE_REDUCE, TREE_AR, TREE_SCATTER, TREE_GATHER } tree_mode;

typedef struct tree_sched {
    tree_mode mode;
    bool chain;
    uint32_t p, root;
    uint32_t chunks;
} tree_sched;

static uint32_t lowbit(uint32_t v) { return v & (~v + 1); }

static uint32_t log2u(uint32_t v)
{
    uint32_t l = 0;
    while (v >>= 1)
        l++;
    return l;
}

static uint32_t tree_vr(const tree_sched *t, uint32_t rank)
{
    return (rank + t->p - t->root) % t->p;
}
static uint32_t tree_rank(const tree_sched *t, uint32_t vr) { return (vr + t->root) % t->p; }

/* The first (largest) child mask of vr; 0 when it has none. */
static uint32_t tree_first_mask(const tree_sched *t, uint32_t vr)
{
    uint32_t m;
    if (vr == 0) {
        if (t->p < 2)
            return 0;
        m = 1;
        while ((uint64_t)m * 2 < t->p)
            m *= 2;
    } else {
        m = lowbit(vr) / 2;
    }
    while (m && vr + m >= t->p)
        m /= 2;
    return m;
}

static uint32_t tree_children(const tree_sched *t, uint32_t vr)
{
    if (t->chain)
        return vr + 1 < t->p ? 1 : 0;
    uint32_t m = tree_first_mask(t, vr);
    return m ? log2u(m) + 1 : 0;
}

static uint32_t tree_child(const tree_sched *t, uint32_t vr, uint32_t c)
{
    return t->chain ? vr + 1 : vr + (tree_first_mask(t, vr) >> c);
}

static uint32_t tree_parent(const tree_sched *t, uint32_t vr)
{
    return t->chain ? vr - 1 : vr - lowbit(vr);
}

/* vr's index among its parent's children. */
static uint32_t tree_child_index(const tree_sched *t, uint32_t vr)
{
    if (t->chain)
        return 0;
    uint32_t par = tree_parent(t, vr);
    return log2u(tree_first_mask(t, par)) - log2u(vr - par);
}

/* Receives per chunk of vr and the index, within a chunk, of the receive from its parent. */
static uint32_t tree_recvs_per_chunk(const tree_sched *t, uint32_t vr)
{
    uint32_t k = tree_children(t, vr);
    switch (t->mode) {
    case TREE_BCAST:
    case TREE_SCATTER: return vr ? 1 : 0;
    case TREE_REDUCE:
    case TREE_GATHER: return k;
    case TREE_AR: return k + (vr ? 1 : 0);
    }
    return 0;
}

static uint32_t tree_subtree(const tree_sched *t, uint32_t vr)
{
    if (vr == 0)
        return t->p;
    uint32_t s = lowbit(vr);
    return vr + s <= t->p ? s : t->p - vr;
}

/* Chunk j of X, or (scatter, gather) the shares of vr's subtree. */
static void tree_bytes(const coll_sched *s, const tree_sched *t, uint32_t vr, uint32_t j,
                       uint64_t *off, uint64_t *bytes)
{
    const coll_sched_desc *d = coll_sched_d(s);
    if (t->mode == TREE_SCATTER || t->mode == TREE_GATHER) {
        *off = coll_part_off(d->bytes, d->elem_bytes, t->p, vr);
        *bytes = coll_part_off(d->bytes, d->elem_bytes, t->p, vr + tree_subtree(t, vr)) - *off;
        return;
    }
    *off = coll_part_off(d->bytes, d->elem_bytes, t->chunks, j);
    *bytes = coll_part_bytes(d->bytes, d->elem_bytes, t->chunks, j);
}

static uint32_t tree_ports(const coll_sched *s)
{
    (void)s;
    return 2;
}

static uint32_t tree_steps(const coll_sched *s)
{
    const tree_sched *t = coll_sched_state(s);
    return t->chunks;
}

static uint32_t tree_sends(const coll_sched *s, uint32_t rank, uint32_t port)
{
    const tree_sched *t = coll_sched_state(s);
    uint32_t vr = tree_vr(t, rank);
    bool up = t->mode == TREE_REDUCE || t->mode == TREE_GATHER || t->mode == TREE_AR;
    bool down = t->mode == TREE_BCAST || t->mode == TREE_SCATTER || t->mode == TREE_AR;
    if (port == TREE_UP)
        return up && vr ? t->chunks : 0;
    if (port == TREE_DOWN)
        return down ? t->chunks * tree_children(t, vr) : 0;
    return 0;
}

static uint32_t tree_recvs(const coll_sched *s, uint32_t rank)
{
    const tree_sched *t = coll_sched_state(s);
    return t->chunks * tree_recvs_per_chunk(t, tree_vr(t, rank));
}

/* Index of the receive, at vr's parent (up) or child (down), of vr's chunk j message. */
static uint32_t tree_up_match(const tree_sched *t, uint32_t vr, uint32_t j)
{
    uint32_t par = tree_parent(t, vr);
    return j * tree_recvs_per_chunk(t, par) + tree_child_index(t, vr);
}

static uint32_t tree_down_match(const tree_sched *t, uint32_t child, uint32_t j)
{
    uint32_t per = tree_recvs_per_chunk(t, child);
    return j * per + per - 1; /* the receive from the parent is a chunk's last */
}

static void tree_send(const coll_sched *s, uint32_t rank, uint32_t port, uint32_t i,
                      coll_xfer *x)
{
    const tree_sched *t = coll_sched_state(s);
    uint32_t vr = tree_vr(t, rank);
    *x = (coll_xfer){.port = port, .buf = COLL_BUF_X};
    if (port == TREE_UP) {
        uint32_t j = i;
        x->peer = tree_rank(t, tree_parent(t, vr));
        x->match = tree_up_match(t, vr, j);
        x->step = j;
        x->deps = tree_children(t, vr);
        tree_bytes(s, t, vr, j, &x->offset, &x->bytes);
        return;
    }
    uint32_t k = tree_children(t, vr), j = i / k, c = i % k, ch = tree_child(t, vr, c);
    x->peer = tree_rank(t, ch);
    x->match = tree_down_match(t, ch, j);
    x->step = j;
    x->deps = vr ? 1 : t->mode == TREE_AR ? k : 0;
    tree_bytes(s, t, t->mode == TREE_SCATTER ? ch : vr, j, &x->offset, &x->bytes);
}

static void tree_recv(const coll_sched *s, uint32_t rank, uint32_t i, coll_xfer *x)
{
    const tree_sched *t = coll_sched_state(s);
    uint32_t vr = tree_vr(t, rank), per = tree_recvs_per_chunk(t, vr);
    uint32_t j = i / per, c = i % per, k = tree_children(t, vr);
    /* a chunk's receives: one per child (reduce, gather, all-reduce), then the parent's
     * (broadcast, scatter, all-reduce) */
    bool from_parent = t->mode == TREE_BCAST || t->mode == TREE_SCATTER || c == k;
    *x = (coll_xfer){.step = j, .buf = COLL_BUF_X};
    if (from_parent) {
        x->peer = tree_rank(t, tree_parent(t, vr));
        x->port = TREE_DOWN;
        x->match = j * tree_children(t, tree_parent(t, vr)) + tree_child_index(t, vr);
        x->unblock_port = TREE_DOWN;
        x->unblock_lo = j * k;
        x->unblock_hi = (j + 1) * k;
        x->unblock_deps = 1;
        tree_bytes(s, t, vr, j, &x->offset, &x->bytes);
        return;
    }
    uint32_t ch = tree_child(t, vr, c);
    x->peer = tree_rank(t, ch);
    x->port = TREE_UP;
    x->match = j;
    x->reduce = t->mode != TREE_GATHER;
    if (vr) {
        x->unblock_port = TREE_UP;
        x->unblock_lo = j;
        x->unblock_hi = j + 1;
        x->unblock_deps = k;
    } else if (t->mode == TREE_AR) {
        x->unblock_port = TREE_DOWN;
        x->unblock_lo = j * k;
        x->unblock_hi = (j + 1) * k;
        x->unblock_deps = k;
    }
    tree_bytes(s, t, t->mode == TREE_GATHER ? ch : vr, j, &x->offset, &x->bytes);
}

static np_status tree_init_mode(coll_sched *s, tree_mode mode, bool chain, np_err *err)
{
    const coll_sched_desc *d = coll_sched_d(s);
    tree_sched *t = calloc(1, sizeof *t);
    if (!t)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory making a schedule");
    coll_sched_set_state(s, t);
    t->mode = mode;
    t->chain = chain;
    t->p = d->ranks;
    t->root = mode == TREE_AR ? 0 : d->root;
    uint64_t c = mode == TREE_SCATTER || mode == TREE_GATHER
                     ? 1 : coll_chunks(d->bytes, d->chunk_bytes);
    uint64_t per = 1 + (t->p > 1 ? log2u(t->p - 1) + 1 : 0); /* receives or sends per chunk */
    if (c * per > UINT32_MAX)
        return np_err_set(err, NP_ERR_RANGE, "%s in chunks of %llu B has more than 2^32 "
                          "messages per rank; use a larger chunk", coll_op_name(d->op),
                          (unsigned long long)d->chunk_bytes);
    t->chunks = (uint32_t)c;
    return NP_OK;
}

static np_status tree_bcast_init(coll_sched *s, np_err *err)
{
    return tree_init_mode(s, TREE_BCAST, false, err);
}
static np_status tree_reduce_init(coll_sched *s, np_err *err)
{
    return tree_init_mode(s, TREE_REDUCE, false, err);
}
static np_status tree_ar_init(coll_sched *s, np_err *err)
{
    return tree_init_mode(s, TREE_AR, false, err);
}
static np_status chain_bcast_init(coll_sched *s, np_err *err)
{
    return tree_init_mode(s, TREE_BCAST, true, err);
}
static np_status chain_reduce_init(coll_sched *s, np_err *err)
{
    return tree_init_mode(s, TREE_REDUCE, true, err);
}
static np_status scatter_init(coll_sched *s, np_err *err)
{
    return tree_init_mode(s, TREE_SCATTER, false, err);
}
static np_status gather_init(coll_sched *s, np_err *err)
{
    return tree_init_mode(s, TREE_GATHER, false, err);
}

#define TREE_OPS(op, algo, init)                                                           \
    {op,         algo,      init,      tree_ports, tree_steps, tree_sends,                     \
     tree_recvs, tree_send, tree_recv, NULL,       NULL,       NULL,   NULL}
const coll_sched_ops coll_tree_broadcast = TREE_OPS(COLL_OP_BROADCAST, COLL_ALGO_TREE,
                                                    tree_bcast_init);
const coll_sched_ops coll_tree_reduce = TREE_OPS(COLL_OP_REDUCE, COLL_ALGO_TREE,
                                                 tree_reduce_init);
const coll_sched_ops coll_tree_all_reduce = TREE_OPS(COLL_OP_ALL_REDUCE, COLL_ALGO_TREE,
                                                     tree_ar_init);
const coll_sched_ops coll_chain_broadcast = TREE_OPS(COLL_OP_BROADCAST, COLL_ALGO_CHAIN,
                                                     chain_bcast_init);
const coll_sched_ops coll_chain_reduce = TREE_OPS(COLL_OP_REDUCE, COLL_ALGO_CHAIN,
                                                  chain_reduce_init);
const coll_sched_ops coll_tree_scatter = TREE_OPS(COLL_OP_SCATTER, COLL_ALGO_TREE,
                                                  scatter_init);
const coll_sched_ops coll_tree_gather = TREE_OPS(COLL_OP_GATHER, COLL_ALGO_TREE, gather_init);
