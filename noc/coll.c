/* coll.c — the flow engine of collectives (coll.h): it runs a schedule (coll_sched.h) on the
 * chip network, message by message.
 *
 * Per rank and port, a cursor walks the port's sends in order. The send under the cursor
 * leaves when its deps are met (a window of counters, one per send not yet left, counts the
 * receives still to come) and the port is free (the previous send's last byte has left: the
 * net's SENT event). A message is a record in a pool, from net_transfer to its DELIVERED
 * event. A received message that reduces queues on its rank's reducer (one reduction at a
 * time, in arrival order; coll_reduce_ps); the receive completes when that ends, or at
 * arrival, and unblocks the sends it names. The collective is done when every receive of
 * every rank has completed.
 */
#include "coll.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct coll_msg {
    uint32_t from, to, port, recv;
    uint32_t next_free;
} coll_msg;

typedef struct coll_port {
    uint32_t next, n;  /* the next send; how many the port has */
    bool busy;         /* a send of this port has not sent its last byte yet */
    uint32_t *win;     /* deps left + 1 (0: not counted yet) of sends next .. next + mask */
    uint32_t mask;     /* window size - 1 (a power of two minus one), or 0 without window */
} coll_port;

struct coll_sys {
    net *n;
    evq *q;
    arch_config cfg; /* the reduction rate: core and chip */
};

struct coll {
    coll_sys *sys;
    coll_desc d;
    uint32_t *chips;
    uint32_t p, P;       /* ranks; ports per rank */
    coll_sched *sched;
    coll_port *ports;    /* p * P */
    uint64_t *red_free;  /* per rank: when its reducer is free (ps) */
    coll_msg *msgs;
    uint32_t n_msgs, cap_msgs, free_msg;
    uint64_t left;       /* receives not yet complete */
    uint64_t inflight;   /* messages and reductions the event queue still refers c by */
    bool done, failed;
    coll_result res;
    np_err err;
};

coll_algo coll_algo_resolve(coll_op op, coll_algo a)
{
    static const coll_algo first[COLL_OP_COUNT] = {
        [COLL_OP_ALL_REDUCE] = COLL_ALGO_RING,      [COLL_OP_ALL_GATHER] = COLL_ALGO_RING,
        [COLL_OP_REDUCE_SCATTER] = COLL_ALGO_RING,  [COLL_OP_BROADCAST] = COLL_ALGO_TREE,
        [COLL_OP_REDUCE] = COLL_ALGO_TREE,          [COLL_OP_SCATTER] = COLL_ALGO_TREE,
        [COLL_OP_GATHER] = COLL_ALGO_TREE,          [COLL_OP_ALL_TO_ALL] = COLL_ALGO_PAIRWISE,
        [COLL_OP_SENDRECV] = COLL_ALGO_DIRECT,
    };
    return a == COLL_ALGO_AUTO && (unsigned)op < COLL_OP_COUNT ? first[op] : a;
}

/* ---- The system ------------------------------------------------------------------------ */

np_status coll_sys_create(const arch_config *cfg, const net_params *np, evq *q, stats *reg,
                          coll_sys **out, np_err *err)
{
    net_params p;
    if (np)
        p = *np;
    else
        net_params_from_arch(cfg, &p);
    coll_sys *s = calloc(1, sizeof *s);
    if (!s)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory");
    if (net_create(&p, q, reg, &s->n, err) != NP_OK) {
        free(s);
        return err->status;
    }
    s->q = q;
    s->cfg = *cfg;
    *out = s;
    return NP_OK;
}

void coll_sys_free(coll_sys *s)
{
    if (!s)
        return;
    net_free(s->n);
    free(s);
}

net *coll_sys_net(coll_sys *s) { return s->n; }

double coll_sys_reduce_bytes_per_s(const coll_sys *s, uint32_t elem_bytes)
{
    const uint64_t bytes = 1ULL << 40;
    return (double)bytes / ((double)coll_reduce_ps(&s->cfg, (uint32_t)s->cfg.chip.cores, bytes,
                                                   elem_bytes) * 1e-12);
}

/* ---- The engine ------------------------------------------------------------------------ */

bool coll_is_done(const coll *c) { return c->done; }
const coll_result *coll_get_result(const coll *c) { return &c->res; }

np_status coll_status(const coll *c, np_err *err)
{
    if (!c->failed)
        return NP_OK;
    *err = c->err;
    return c->err.status;
}

static void coll_fail(coll *c, np_status s, const char *msg)
{
    if (c->failed)
        return;
    c->failed = true;
    np_err_set(&c->err, s, "%s", msg);
}

static uint32_t coll_msg_new(coll *c)
{
    uint32_t id = c->free_msg;
    if (id != UINT32_MAX) {
        c->free_msg = c->msgs[id].next_free;
        return id;
    }
    if (c->n_msgs == c->cap_msgs) {
        uint32_t cap = c->cap_msgs ? c->cap_msgs * 2 : 64;
        coll_msg *v = realloc(c->msgs, (size_t)cap * sizeof *v);
        if (!v)
            return UINT32_MAX;
        c->msgs = v;
        c->cap_msgs = cap;
    }
    return c->n_msgs++;
}

static void coll_check_done(coll *c)
{
    if (c->left || c->done)
        return;
    c->done = true;
    c->res.t_end_ps = evq_now(c->sys->q);
    if (c->d.done)
        c->d.done(c->d.ctx, &c->res);
}

/* The window slot of send i of port pt (i >= pt->next), grown to hold it; NULL when out of
 * memory. */
static uint32_t *coll_win_slot(coll_port *pt, uint32_t i)
{
    assert(i >= pt->next);
    uint64_t need = (uint64_t)i - pt->next + 1;
    if (!pt->win || need > (uint64_t)pt->mask + 1) {
        uint64_t cap = pt->win ? (uint64_t)pt->mask + 1 : 4;
        while (cap < need)
            cap *= 2;
        uint32_t *w = calloc(cap, sizeof *w);
        if (!w)
            return NULL;
        for (uint64_t k = 0; pt->win && k <= pt->mask; k++) {
            uint64_t s = pt->next + k;
            w[s & (cap - 1)] = pt->win[s & pt->mask];
        }
        free(pt->win);
        pt->win = w;
        pt->mask = (uint32_t)(cap - 1);
    }
    return &pt->win[i & pt->mask];
}

static void coll_net_event(void *ctx, uint64_t arg, net_event ev);

/* Sends what port (rank, port) can send now. */
static void coll_port_kick(coll *c, uint32_t rank, uint32_t port)
{
    coll_port *pt = &c->ports[(size_t)rank * c->P + port];
    while (!pt->busy && pt->next < pt->n && !c->failed) {
        coll_xfer x;
        coll_sched_send(c->sched, rank, port, pt->next, &x);
        uint32_t *w = pt->win ? &pt->win[pt->next & pt->mask] : NULL;
        if (x.deps && (!w || *w != 1))
            return; /* deps not all met */
        if (w)
            *w = 0;
        pt->next++;
        uint32_t id = coll_msg_new(c);
        if (id == UINT32_MAX) {
            coll_fail(c, NP_ERR_NOMEM, "out of memory queueing a message");
            return;
        }
        c->msgs[id] = (coll_msg){rank, x.peer, port, x.match, UINT32_MAX};
        c->res.transfers++;
        c->res.bytes_sent += x.bytes;
        c->inflight++;
        pt->busy = true;
        np_err e;
        if (net_transfer(c->sys->n, c->chips[rank], c->chips[x.peer], x.bytes, coll_net_event,
                         c, id, &e) != NP_OK) {
            coll_fail(c, e.status, e.msg);
            return;
        }
    }
}

/* Receive i of rank has completed: count it, unblock the sends it names. */
static void coll_recv_complete(coll *c, uint32_t rank, uint32_t i)
{
    coll_xfer x;
    coll_sched_recv(c->sched, rank, i, &x);
    c->left--;
    if (x.unblock_lo < x.unblock_hi) {
        coll_port *pt = &c->ports[(size_t)rank * c->P + x.unblock_port];
        for (uint32_t s = x.unblock_lo; s < x.unblock_hi; s++) {
            uint32_t *w = coll_win_slot(pt, s);
            if (!w) {
                coll_fail(c, NP_ERR_NOMEM, "out of memory counting dependencies");
                return;
            }
            if (*w == 0) {
                coll_xfer y;
                coll_sched_send(c->sched, rank, x.unblock_port, s, &y);
                *w = y.deps + 1;
            }
            (*w)--;
        }
        coll_port_kick(c, rank, x.unblock_port);
    }
}

static void coll_reduce_done(evq *q, void *ctx, uint64_t arg)
{
    (void)q;
    coll *c = ctx;
    c->inflight--;
    if (!c->failed)
        coll_recv_complete(c, (uint32_t)(arg >> 32), (uint32_t)arg);
    coll_check_done(c);
}

static void coll_net_event(void *ctx, uint64_t arg, net_event ev)
{
    coll *c = ctx;
    uint32_t id = (uint32_t)arg;
    coll_msg m = c->msgs[id];
    if (ev == NET_EVENT_SENT) {
        c->ports[(size_t)m.from * c->P + m.port].busy = false;
        coll_port_kick(c, m.from, m.port);
        return;
    }
    c->msgs[id].next_free = c->free_msg;
    c->free_msg = id;
    c->inflight--;
    if (c->failed)
        return;
    coll_xfer x;
    coll_sched_recv(c->sched, m.to, m.recv, &x);
    if (!x.reduce) {
        coll_recv_complete(c, m.to, m.recv);
        coll_check_done(c);
        return;
    }
    uint64_t now = evq_now(c->sys->q), *fr = &c->red_free[m.to];
    uint64_t t = (*fr > now ? *fr : now) +
                 coll_reduce_ps(&c->sys->cfg, (uint32_t)c->sys->cfg.chip.cores, x.bytes,
                                c->d.elem_bytes);
    *fr = t;
    c->res.reductions++;
    c->inflight++;
    np_err e;
    if (evq_schedule_at(c->sys->q, t, coll_reduce_done, c, (uint64_t)m.to << 32 | m.recv, NULL,
                        &e) != NP_OK)
        coll_fail(c, e.status, e.msg);
}

static void coll_finish_event(evq *q, void *ctx, uint64_t arg)
{
    (void)q;
    (void)arg;
    coll_check_done(ctx);
}

void coll_free(coll *c)
{
    if (!c)
        return;
    for (size_t i = 0; c->ports && i < (size_t)c->p * c->P; i++)
        free(c->ports[i].win);
    coll_sched_free(c->sched);
    free(c->ports);
    free(c->chips);
    free(c->red_free);
    free(c->msgs);
    free(c);
}

/* The inner group size of the two-level all-reduce: asked for, else the island, the torus's
 * x ring (when the group is the whole torus), or 0 (the schedule's default). */
static uint32_t coll_hier_group(const coll *c)
{
    const net_params *np = net_get_params(c->sys->n);
    uint32_t p = c->p;
    if (c->d.group_ranks)
        return c->d.group_ranks;
    if (np->topology == ARCH_TOPOLOGY_HIERARCHICAL && np->island_chips > 1 &&
        np->island_chips < p && p % np->island_chips == 0)
        return np->island_chips;
    if ((np->topology == ARCH_TOPOLOGY_TORUS2D || np->topology == ARCH_TOPOLOGY_TORUS3D) &&
        p == np->chips && np->dims[0] > 1 && np->dims[0] < p)
        return np->dims[0];
    return 0;
}

np_status coll_start(coll_sys *s, const coll_desc *d, coll **out, np_err *err)
{
    uint32_t nchips = net_chips(s->n);
    uint32_t p = d->chips ? d->n_chips : (d->n_chips ? d->n_chips : nchips);
    if (p == 0)
        return np_err_set(err, NP_ERR_RANGE, "a collective needs at least one rank");
    if (!d->chips && p > nchips)
        return np_err_set(err, NP_ERR_RANGE, "%" PRIu32 " ranks, but the network has %" PRIu32
                          " chips", p, nchips);
    if (!coll_algo_supported(d->op, d->algo))
        return np_err_set(err, NP_ERR_INCONSISTENT, "%s has no %s algorithm",
                          coll_op_name(d->op) ? coll_op_name(d->op) : "?",
                          coll_algo_name(d->algo) ? coll_algo_name(d->algo) : "?");
    coll *c = calloc(1, sizeof *c);
    if (!c)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a collective");
    c->sys = s;
    c->d = *d;
    if (!c->d.elem_bytes)
        c->d.elem_bytes = 4;
    c->d.algo = coll_algo_resolve(d->op, d->algo);
    c->p = p;
    c->free_msg = UINT32_MAX;
    c->chips = malloc((size_t)p * sizeof *c->chips);
    c->red_free = calloc(p, sizeof *c->red_free);
    uint8_t *seen = calloc(nchips, 1);
    if (!c->chips || !c->red_free || !seen) {
        free(seen);
        coll_free(c);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a collective");
    }
    for (uint32_t i = 0; i < p; i++) {
        uint32_t chip = d->chips ? d->chips[i] : i;
        if (chip >= nchips || seen[chip]) {
            free(seen);
            coll_free(c);
            return np_err_set(err, NP_ERR_RANGE, chip >= nchips
                                  ? "group rank %" PRIu32 " names chip %" PRIu32
                                    ", which is not in the network"
                                  : "group rank %" PRIu32 " names chip %" PRIu32 " again",
                              i, chip);
        }
        seen[chip] = 1;
        c->chips[i] = chip;
    }
    free(seen);
    c->d.chips = c->chips;
    c->d.n_chips = p;
    coll_sched_desc sd = {.op = d->op, .algo = c->d.algo, .ranks = p, .bytes = d->bytes,
                          .elem_bytes = c->d.elem_bytes, .chunk_bytes = d->chunk_bytes,
                          .root = d->root};
    if (sd.algo == COLL_ALGO_HIER) {
        uint32_t q = coll_hier_group(c);
        if (q) {
            if (p % q) {
                coll_free(c);
                return np_err_set(err, NP_ERR_INCONSISTENT, "hierarchical all-reduce: %" PRIu32
                                  " ranks are not whole groups of %" PRIu32, p, q);
            }
            sd.n_levels = 2;
            sd.level_ranks[0] = q;
            sd.level_ranks[1] = p / q;
        }
    }
    if (coll_sched_create(&sd, &c->sched, err) != NP_OK) {
        coll_free(c);
        return err->status;
    }
    c->P = coll_sched_ports(c->sched);
    c->ports = calloc((size_t)p * c->P, sizeof *c->ports);
    if (!c->ports) {
        coll_free(c);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a collective");
    }
    for (uint32_t r = 0; r < p; r++)
        for (uint32_t q = 0; q < c->P; q++)
            c->ports[(size_t)r * c->P + q].n = coll_sched_sends(c->sched, r, q);
    c->left = coll_sched_messages(c->sched);
    c->res = (coll_result){.op = d->op, .algo = c->d.algo, .ranks = p, .bytes = d->bytes,
                           .t_start_ps = evq_now(s->q)};
    for (uint32_t r = 0; r < p && !c->failed; r++)
        for (uint32_t q = 0; q < c->P; q++)
            coll_port_kick(c, r, q);
    np_status st = NP_OK;
    if (c->failed)
        st = coll_status(c, err);
    else if (c->left == 0)
        st = evq_schedule_in(s->q, 0, coll_finish_event, c, 0, NULL, err);
    if (st != NP_OK) {
        if (c->inflight) /* work already in the network refers to c: cannot free it */
            return np_err_set(err, NP_ERR_INTERNAL, "collective failed after starting work");
        coll_free(c);
        return st;
    }
    *out = c;
    return NP_OK;
}

np_status coll_run(coll_sys *s, const coll_desc *d, coll_result *r, np_err *err)
{
    coll *c;
    if (coll_start(s, d, &c, err) != NP_OK)
        return err->status;
    np_status st = NP_OK;
    while (!c->done && st == NP_OK) {
        bool any;
        st = evq_step(s->q, &any, err);
        if (st == NP_OK && !any)
            st = np_err_set(err, NP_ERR_DEADLOCK, "%s/%s stopped with %" PRIu64
                            " of %" PRIu64 " receives outstanding", coll_op_name(d->op),
                            coll_algo_name(c->d.algo), c->left,
                            coll_sched_messages(c->sched));
        if (st == NP_OK && c->failed)
            st = coll_status(c, err);
    }
    if (st == NP_OK)
        *r = c->res;
    if (st == NP_OK || c->inflight == 0)
        coll_free(c);
    return st;
}
