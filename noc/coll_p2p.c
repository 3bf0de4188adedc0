/* coll_p2p.c — point-to-point schedules. X is cut into p blocks (part d of p is for rank d);
 * OUT holds p blocks of the receiver's block size, the one from rank s at block s.
 *   all-to-all, pairwise   step k = 1 .. p-1: rank r sends its block for rank (r + k) mod p,
 *                          and sends step k + 1 once the step-k block from (r - k) mod p has
 *                          arrived: (p - 1)(alpha + n/p beta) on a non-blocking network
 *   all-to-all, direct     every block at once, each on its own port (as NCCL posts every
 *                          peer's send together): alpha + n/p beta x (the most flows that
 *                          share a link), (p - 1)/p n beta on a switch
 *   sendrecv (nccl-tests)  every rank sends n bytes of X to the next rank, into OUT, and
 *                          receives from the previous one, all at once: alpha + n beta
 */
#include <stdlib.h>

#include "coll_impl.h"

typedef struct p2p_sched {
    bool direct;
} p2p_sched;

static uint32_t a2a_ports(const coll_sched *s)
{
    const p2p_sched *t = coll_sched_state(s);
    uint32_t p = coll_sched_d(s)->ranks;
    return t->direct && p > 1 ? p - 1 : 1;
}

static uint32_t a2a_steps(const coll_sched *s)
{
    uint32_t p = coll_sched_d(s)->ranks;
    return p > 1 ? p - 1 : 0;
}

static uint32_t a2a_sends(const coll_sched *s, uint32_t rank, uint32_t port)
{
    (void)rank;
    const p2p_sched *t = coll_sched_state(s);
    uint32_t p = coll_sched_d(s)->ranks;
    if (p < 2)
        return 0;
    if (t->direct)
        return port < p - 1 ? 1 : 0;
    return port == 0 ? p - 1 : 0;
}

static uint32_t a2a_recvs(const coll_sched *s, uint32_t rank)
{
    (void)rank;
    return a2a_steps(s);
}

/* The block of X rank `from` sends to rank `to`. */
static void a2a_block(const coll_sched *s, uint32_t to, coll_xfer *x)
{
    const coll_sched_desc *d = coll_sched_d(s);
    x->offset = coll_part_off(d->bytes, d->elem_bytes, d->ranks, to);
    x->bytes = coll_part_bytes(d->bytes, d->elem_bytes, d->ranks, to);
}

static void a2a_send(const coll_sched *s, uint32_t rank, uint32_t port, uint32_t i, coll_xfer *x)
{
    const p2p_sched *t = coll_sched_state(s);
    uint32_t p = coll_sched_d(s)->ranks, k = (t->direct ? port : i) + 1;
    *x = (coll_xfer){.peer = (rank + k) % p, .match = k - 1, .port = port, .step = k - 1,
                     .deps = !t->direct && i > 0, .buf = COLL_BUF_X};
    a2a_block(s, x->peer, x);
}

static void a2a_recv(const coll_sched *s, uint32_t rank, uint32_t i, coll_xfer *x)
{
    const p2p_sched *t = coll_sched_state(s);
    uint32_t p = coll_sched_d(s)->ranks, k = i + 1, from = (rank + p - k) % p;
    *x = (coll_xfer){.peer = from, .match = t->direct ? 0 : i, .port = t->direct ? i : 0,
                     .step = i, .buf = COLL_BUF_OUT};
    if (!t->direct && k < p - 1) {
        x->unblock_lo = i + 1;
        x->unblock_hi = i + 2;
        x->unblock_deps = 1;
    }
    a2a_block(s, rank, x);
    x->offset = (uint64_t)from * x->bytes;
}

static np_status a2a_init(coll_sched *s, bool direct, np_err *err)
{
    p2p_sched *t = calloc(1, sizeof *t);
    if (!t)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory making a schedule");
    coll_sched_set_state(s, t);
    t->direct = direct;
    return NP_OK;
}

static np_status pairwise_init(coll_sched *s, np_err *err) { return a2a_init(s, false, err); }
static np_status direct_init(coll_sched *s, np_err *err) { return a2a_init(s, true, err); }

const coll_sched_ops coll_pairwise_all_to_all = {
    COLL_OP_ALL_TO_ALL, COLL_ALGO_PAIRWISE, pairwise_init, a2a_ports, a2a_steps, a2a_sends,
    a2a_recvs, a2a_send, a2a_recv, NULL, NULL, NULL, NULL};
const coll_sched_ops coll_direct_all_to_all = {
    COLL_OP_ALL_TO_ALL, COLL_ALGO_DIRECT, direct_init, a2a_ports, a2a_steps, a2a_sends,
    a2a_recvs, a2a_send, a2a_recv, NULL, NULL, NULL, NULL};

/* ---- sendrecv ----------------------------------------------------------------------------- */

static np_status sr_init(coll_sched *s, np_err *err)
{
    (void)s;
    (void)err;
    return NP_OK;
}

static uint32_t sr_ports(const coll_sched *s)
{
    (void)s;
    return 1;
}

static uint32_t sr_count(const coll_sched *s, uint32_t rank, uint32_t port)
{
    (void)rank;
    return port == 0 && coll_sched_d(s)->ranks > 1;
}

static uint32_t sr_steps(const coll_sched *s) { return sr_count(s, 0, 0); }
static uint32_t sr_recvs(const coll_sched *s, uint32_t rank) { return sr_count(s, rank, 0); }

static void sr_send(const coll_sched *s, uint32_t rank, uint32_t port, uint32_t i, coll_xfer *x)
{
    (void)i;
    uint32_t p = coll_sched_d(s)->ranks;
    *x = (coll_xfer){.peer = (rank + 1) % p, .port = port, .buf = COLL_BUF_X,
                     .bytes = coll_sched_d(s)->bytes};
}

static void sr_recv(const coll_sched *s, uint32_t rank, uint32_t i, coll_xfer *x)
{
    (void)i;
    uint32_t p = coll_sched_d(s)->ranks;
    *x = (coll_xfer){.peer = (rank + p - 1) % p, .buf = COLL_BUF_OUT,
                     .bytes = coll_sched_d(s)->bytes};
}

const coll_sched_ops coll_direct_sendrecv = {COLL_OP_SENDRECV, COLL_ALGO_DIRECT, sr_init,
                                             sr_ports, sr_steps, sr_count, sr_recvs, sr_send,
                                             sr_recv, NULL, NULL, NULL, NULL};
