/* coll_rhd.c — recursive halving and doubling schedules (p a power of two, L = log2 p). X is
 * cut into p shares (part i of p); a rank's range is always a run of whole shares.
 *   all-gather (recursive doubling)    step t = 0 .. L-1: exchange the 2^t shares gathered so
 *                                      far with rank ^ 2^t: L alpha + (p-1)/p n beta
 *   reduce-scatter (recursive halving) step s = 0 .. L-1, m = p / 2^(s+1): of the current
 *                                      range of 2m shares send the half without this rank's
 *                                      share to rank ^ m and reduce the half received; rank r
 *                                      ends with share r: L alpha + (p-1)/p n (beta + gamma)
 *   all-reduce (Rabenseifner)          halving reduce-scatter, then doubling all-gather:
 *                                      2 L alpha + 2 (p-1)/p n beta + (p-1)/p n gamma
 * A rank sends step s once step s - 1's message has arrived (and, in halving, been reduced).
 */
#include <stdlib.h>

#include "coll_impl.h"

typedef enum rhd_mode { RHD_AG, RHD_RS, RHD_AR } rhd_mode;

typedef struct rhd_sched {
    rhd_mode mode;
    uint32_t p, L;
} rhd_sched;

static uint32_t rhd_steps(const coll_sched *s)
{
    const rhd_sched *h = coll_sched_state(s);
    return h->mode == RHD_AR ? 2 * h->L : h->L;
}

static uint32_t rhd_ports(const coll_sched *s)
{
    (void)s;
    return 1;
}

static uint32_t rhd_count(const coll_sched *s, uint32_t rank, uint32_t port)
{
    (void)rank;
    return port == 0 ? rhd_steps(s) : 0;
}

static uint32_t rhd_recvs(const coll_sched *s, uint32_t rank)
{
    return rhd_count(s, rank, 0);
}

/* Step `step` of rank r: the partner, the shares [*lo, *hi) sent and [*rlo, *rhi) received,
 * and whether the receive is reduced. */
static uint32_t rhd_step(const rhd_sched *h, uint32_t r, uint32_t step, uint32_t *lo,
                         uint32_t *hi, uint32_t *rlo, uint32_t *rhi, bool *reduce)
{
    bool halving = h->mode == RHD_RS || (h->mode == RHD_AR && step < h->L);
    if (halving) {
        uint32_t m = h->p >> (step + 1), base = r & ~(2 * m - 1);
        uint32_t keep = base + (r & m ? m : 0), give = base + (r & m ? 0 : m);
        *lo = give, *hi = give + m, *rlo = keep, *rhi = keep + m;
        *reduce = true;
        return r ^ m;
    }
    uint32_t t = h->mode == RHD_AR ? step - h->L : step, m = 1u << t;
    *lo = r & ~(m - 1), *hi = *lo + m;
    *rlo = (r ^ m) & ~(m - 1), *rhi = *rlo + m;
    *reduce = false;
    return r ^ m;
}

static void rhd_range(const coll_sched *s, uint32_t lo, uint32_t hi, coll_xfer *x)
{
    const coll_sched_desc *d = coll_sched_d(s);
    x->offset = coll_part_off(d->bytes, d->elem_bytes, d->ranks, lo);
    x->bytes = coll_part_off(d->bytes, d->elem_bytes, d->ranks, hi) - x->offset;
}

static void rhd_send(const coll_sched *s, uint32_t rank, uint32_t port, uint32_t i, coll_xfer *x)
{
    const rhd_sched *h = coll_sched_state(s);
    uint32_t lo, hi, rlo, rhi;
    bool red;
    uint32_t peer = rhd_step(h, rank, i, &lo, &hi, &rlo, &rhi, &red);
    *x = (coll_xfer){.peer = peer, .match = i, .port = port, .step = i, .deps = i > 0,
                     .buf = COLL_BUF_X};
    rhd_range(s, lo, hi, x);
}

static void rhd_recv(const coll_sched *s, uint32_t rank, uint32_t i, coll_xfer *x)
{
    const rhd_sched *h = coll_sched_state(s);
    uint32_t lo, hi, rlo, rhi;
    bool red;
    uint32_t peer = rhd_step(h, rank, i, &lo, &hi, &rlo, &rhi, &red);
    *x = (coll_xfer){.peer = peer, .match = i, .port = 0, .step = i, .buf = COLL_BUF_X,
                     .reduce = red};
    if (i + 1 < rhd_steps(s)) {
        x->unblock_lo = i + 1;
        x->unblock_hi = i + 2;
        x->unblock_deps = 1;
    }
    rhd_range(s, rlo, rhi, x);
}

static np_status rhd_init(coll_sched *s, rhd_mode mode, np_err *err)
{
    uint32_t p = coll_sched_d(s)->ranks;
    if (p & (p - 1))
        return np_err_set(err, NP_ERR_INCONSISTENT, "recursive halving/doubling needs a "
                          "power-of-two group, not %u ranks", (unsigned)p);
    rhd_sched *h = calloc(1, sizeof *h);
    if (!h)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory making a schedule");
    coll_sched_set_state(s, h);
    h->mode = mode;
    h->p = p;
    while ((1u << h->L) < p)
        h->L++;
    return NP_OK;
}

static np_status rhd_ag_init(coll_sched *s, np_err *err) { return rhd_init(s, RHD_AG, err); }
static np_status rhd_rs_init(coll_sched *s, np_err *err) { return rhd_init(s, RHD_RS, err); }
static np_status rhd_ar_init(coll_sched *s, np_err *err) { return rhd_init(s, RHD_AR, err); }

#define RHD_OPS(op, init)                                                                  \
    {op, COLL_ALGO_RHD, init, rhd_ports, rhd_steps, rhd_count, rhd_recvs, rhd_send, rhd_recv, \
     NULL, NULL, NULL, NULL}
const coll_sched_ops coll_rhd_all_gather = RHD_OPS(COLL_OP_ALL_GATHER, rhd_ag_init);
const coll_sched_ops coll_rhd_reduce_scatter = RHD_OPS(COLL_OP_REDUCE_SCATTER, rhd_rs_init);
const coll_sched_ops coll_rhd_all_reduce = RHD_OPS(COLL_OP_ALL_REDUCE, rhd_ar_init);
