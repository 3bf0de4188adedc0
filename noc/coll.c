/* coll.c — the flow engine of collectives (coll.h): it runs a schedule (coll_sched.h) on the
 * chip network, message by message.
 *
 * Per rank and port, a cursor walks the port's sends in order. The send under the cursor
 * leaves once its deps are met and the port is free (the previous send's last byte has left:
 * asked of the net when needed, with a SENT callback armed only if the port must wait, so a
 * send alone on its links costs no event). A window of slots, one per send ahead of the
 * cursor, counts the deps still to come and the time the last of them completes. A message is
 * named, in the net, by its receive. On arrival the receive's completion time is known —
 * arrival, or the end of its reduction on its rank's reducer (one reduction at a time, in
 * arrival order; coll_reduce_ps) — so it is applied at once to the slots it unblocks; a send
 * whose last dep completes later gets a kick at that time (a batched net timer). The
 * collective is done when the last receive of every rank has completed.
 *
 * A protocol other than raw (coll_proto.h) holds the first sends back by its base cost, puts
 * each message's wire bytes (lines, pacing) on the net, and completes a receive no sooner
 * than its step after the message's last byte left (arrival is that time plus the path
 * latency, so the step adds max(0, step - path latency)); the payload, for reductions, is the
 * schedule's.
 */
#include "coll.h"
#include "coll_impl.h"
#include "coll_topo.h"
#include "coll_tune.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct coll_slot {
    uint64_t ready;     /* when the deps counted so far complete (ps) */
    uint32_t left1;     /* deps still to come + 1; 0: not counted yet */
} coll_slot;

/* The send under a port's cursor: what issuing it needs. */
typedef struct coll_head {
    uint64_t bytes;
    uint32_t peer, match, deps;
    bool post;
} coll_head;

/* Two cache lines (the array is aligned): the first is what every send touches. */
typedef struct coll_port {
    uint32_t next, n;     /* the next send; how many the port has */
    uint32_t mask;        /* window size - 1 (a power of two) */
    uint32_t head_of;     /* the send `head` holds (UINT32_MAX: none) */
    coll_head head;
    net_flow_ref last;    /* the port's last send, which may not have sent its last byte */
    coll_slot *win;       /* slots of sends next .. next + mask: win_inline or malloc'd */
    uint32_t route_to;    /* the rank `route` goes to (UINT32_MAX: none yet) */
    bool busy;            /* `last` may not have sent its last byte yet */
    net_path_info route;  /* the port's last route, when stable: peers repeat */
    coll_slot win_inline[1];
} coll_port;
_Static_assert(sizeof(coll_port) == 128, "a port is two cache lines");

struct coll_sys {
    net *n;
    evq *q;
    arch_config cfg;    /* the reduction rate: core and chip */
    coll_tuner *tuner;  /* made when first needed */
};

struct coll {
    coll_sys *sys;
    coll_desc d;
    uint32_t *chips;     /* rank -> node: the chips, then the switches of the schedule */
    uint32_t p, P;       /* ranks (chips); ports per rank */
    uint32_t pa;         /* ranks with the schedule's switches (coll_sched_switches) */
    double sw_eff;       /* switch-reduced messages' payload fraction (switch_reduce_efficiency),
                            1 when the schedule has no switch */
    coll_sched *sched;
    void (*recv_deps)(const coll_sched *, uint32_t, uint32_t, coll_xfer *);
    void (*send_deps)(const coll_sched *, uint32_t, uint32_t, uint32_t, coll_xfer *);
    coll_port *ports;    /* p * P */
    uint64_t *red_free;  /* per rank: when its reducer is free (ps) */
    uint64_t red_bytes, red_ps; /* the last reduction's size and time */
    coll_proto_params pp; /* the protocol's (RAW: none) */
    bool wire_on;        /* pp's wire bytes differ from the payload (lines, pacing) */
    uint64_t step_in, step_out; /* least time of a message within an island and over the
                                   scale-out network (pp's, with the network overhead when the
                                   group spans islands) */
    uint64_t *port_post; /* pp.serial: per port, [2k] the gap its last message takes after its
                            last byte left (a posted one, coll_xfer.post: step_in less its path
                            latency; 0 over the scale-out network), [2k + 1] when the port may
                            send again; NULL otherwise */
    uint64_t left;       /* receives not yet arrived */
    uint64_t t_last;     /* when the receives arrived so far complete */
    uint64_t inflight;   /* messages and timers the event queue still refers c by */
    bool done, failed;
    coll_result res;
    np_err err;
};

coll_algo coll_algo_resolve(coll_op op, coll_algo a)
{
    static const coll_algo first[COLL_OP_COUNT] = {
        [COLL_OP_ALL_REDUCE] = COLL_ALGO_RING,     [COLL_OP_ALL_GATHER] = COLL_ALGO_RING,
        [COLL_OP_REDUCE_SCATTER] = COLL_ALGO_RING, [COLL_OP_BROADCAST] = COLL_ALGO_TREE,
        [COLL_OP_REDUCE] = COLL_ALGO_TREE,         [COLL_OP_SCATTER] = COLL_ALGO_TREE,
        [COLL_OP_GATHER] = COLL_ALGO_TREE,         [COLL_OP_ALL_TO_ALL] = COLL_ALGO_PAIRWISE,
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
    coll_tuner_free(s->tuner);
    net_free(s->n);
    free(s);
}

net *coll_sys_net(coll_sys *s) { return s->n; }

coll_tuner *coll_sys_tuner(coll_sys *s)
{
    np_err e;
    if (!s->tuner && coll_tuner_create(s->n, &s->cfg, &s->tuner, &e) != NP_OK)
        s->tuner = NULL;
    return s->tuner;
}

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
static coll_slot *coll_win_slot(coll_port *pt, uint32_t i)
{
    assert(i >= pt->next);
    uint64_t need = (uint64_t)i - pt->next + 1;
    if (need > (uint64_t)pt->mask + 1) {
        uint64_t cap = (uint64_t)pt->mask + 1;
        while (cap < need)
            cap *= 2;
        coll_slot *w = calloc(cap, sizeof *w);
        if (!w)
            return NULL;
        for (uint64_t k = 0; k <= pt->mask; k++) {
            uint64_t s = pt->next + k;
            w[s & (cap - 1)] = pt->win[s & pt->mask];
        }
        if (pt->win != pt->win_inline)
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
    uint64_t now = evq_now(c->sys->q);
    while (pt->next < pt->n && !c->failed) {
        if (pt->head_of != pt->next) {
            coll_xfer y = {.post = false};
            c->send_deps(c->sched, rank, port, pt->next, &y); /* coll_sched_send_deps */
            pt->head = (coll_head){y.bytes, y.peer, y.match, y.deps, y.post};
            pt->head_of = pt->next;
        }
        const coll_head *x = &pt->head;
        coll_slot *w = &pt->win[pt->next & pt->mask];
        if (x->deps && (w->left1 != 1 || w->ready > now))
            return; /* deps not all met yet (a kick comes when they are) */
        if (pt->busy && !net_flow_sent(c->sys->n, pt->last, true))
            return; /* the SENT callback kicks again */
        size_t pi = (size_t)rank * c->P + port;
        if (c->port_post && c->port_post[2 * pi + 1] > now)
            return; /* posting its last slice: a kick comes when it has */
        pt->busy = false;
        *w = (coll_slot){0, 0};
        pt->next++;
        c->res.transfers++;
        c->res.bytes_sent += x->bytes;
        uint64_t wire = x->bytes;
        c->inflight++;
        pt->busy = true;
        np_err e;
        uint32_t src = c->chips[rank], dst = c->chips[x->peer];
        if (pt->route_to != x->peer) {
            if (net_route(c->sys->n, src, dst, &pt->route, &e) != NP_OK) {
                coll_fail(c, e.status, e.msg);
                return;
            }
            pt->route_to = pt->route.stable ? x->peer : UINT32_MAX;
        }
        if (c->wire_on)
            wire = coll_proto_wire_bytes(&c->pp, x->bytes, pt->route.bytes_per_s);
        if (c->sw_eff < 1) /* multimem loads and stores: less payload per wire byte */
            wire = (uint64_t)ceil((double)wire / c->sw_eff);
        c->res.wire_bytes += wire;
        if (c->port_post) /* the gap this slice's post takes once its last byte left */
            c->port_post[2 * pi] = !x->post || net_is_scaleout(c->sys->n, src, dst) ||
                                           c->step_in <= pt->route.latency_ps
                                       ? 0
                                       : c->step_in - pt->route.latency_ps;
        if (net_transfer_ex(c->sys->n, src, dst, wire,
                            c->port_post ? 0u : NET_XFER_QUIET_SENT, &pt->route,
                            coll_net_event, c, (uint64_t)x->peer << 32 | x->match, &pt->last,
                            &e) != NP_OK) {
            coll_fail(c, e.status, e.msg);
            return;
        }
        if (c->d.obs && c->d.obs->send && rank < c->p && x->peer < c->p) {
            coll_obs_msg m = {.src = src, .dst = dst, .port = port,
                              .id = (uint64_t)x->peer << 32 | x->match, .bytes = x->bytes,
                              .route = &pt->route, .t_ps = now};
            c->d.obs->send(c->d.obs->ctx, &m);
        }
    }
}

static void coll_kick_item(void *ctx, uint64_t arg)
{
    coll *c = ctx;
    c->inflight--;
    coll_port_kick(c, (uint32_t)(arg >> 32), (uint32_t)arg);
}

/* The protocol's base cost has passed: every port sends what it can. */
static void coll_kick_all_item(void *ctx, uint64_t arg)
{
    (void)arg;
    coll *c = ctx;
    c->inflight--;
    for (uint32_t r = 0; r < c->pa && !c->failed; r++)
        for (uint32_t q = 0; q < c->P; q++)
            coll_port_kick(c, r, q);
}

static void coll_done_item(void *ctx, uint64_t arg)
{
    (void)arg;
    coll *c = ctx;
    c->inflight--;
    coll_check_done(c);
}

/* Calls fn(c, arg) at time t (now or later), counting it in flight. */
static void coll_at(coll *c, uint64_t t, net_timer_fn fn, uint64_t arg)
{
    np_err e;
    c->inflight++;
    if (net_timer_at(c->sys->n, t, fn, c, arg, &e) != NP_OK) {
        c->inflight--;
        coll_fail(c, e.status, e.msg);
    }
}

static void coll_unblock(coll *c, uint32_t rank, uint32_t port, const coll_xfer *x, uint64_t t,
                         uint64_t now);

/* Receive x of rank completes at time t (>= now): count it, unblock the sends it names (a
 * kick now, or at the time the last of their deps completes). */
static void coll_recv_complete(coll *c, uint32_t rank, const coll_xfer *x, uint64_t t)
{
    uint64_t now = evq_now(c->sys->q);
    if (t > c->t_last)
        c->t_last = t;
    if (--c->left == 0) {
        if (c->t_last > now)
            coll_at(c, c->t_last, coll_done_item, 0);
        else
            coll_check_done(c);
    }
    if (x->unblock_lo == x->unblock_hi)
        return;
    for (uint32_t k = 1; k < x->unblock_ports; k++) /* the same sends of further ports */
        coll_unblock(c, rank, x->unblock_port + k, x, t, now);
    coll_unblock(c, rank, x->unblock_port, x, t, now);
}

/* Receive x of rank, complete at t, counts toward sends [lo, hi) of `port`; kicks the port
 * (now, or at the time the last of their deps completes). */
static void coll_unblock(coll *c, uint32_t rank, uint32_t port, const coll_xfer *x, uint64_t t,
                         uint64_t now)
{
    coll_port *pt = &c->ports[(size_t)rank * c->P + port];
    uint64_t ready = 0; /* the latest time a send became ready (any did: became) */
    bool became = false; /* not ready == 0: at time 0 a zero-byte message over links of no
                            latency arrives as it is sent */
    for (uint32_t s = x->unblock_lo; s < x->unblock_hi; s++) {
        coll_slot *w = coll_win_slot(pt, s);
        if (!w) {
            coll_fail(c, NP_ERR_NOMEM, "out of memory counting dependencies");
            return;
        }
        if (w->left1 == 0)
            w->left1 = x->unblock_deps + 1;
        if (t > w->ready)
            w->ready = t;
        if (--w->left1 == 1) {
            became = true;
            if (w->ready > ready)
                ready = w->ready;
        }
    }
    if (became && ready > now)
        coll_at(c, ready, coll_kick_item, (uint64_t)rank << 32 | port);
    else if (became)
        coll_port_kick(c, rank, port);
}

/* A message for receive `recv` of rank `to` (arg = to << 32 | recv): its last byte has left
 * the sender (only when the sender's port asked), or it has arrived. */
static void coll_net_event(void *ctx, uint64_t arg, net_event ev)
{
    coll *c = ctx;
    uint32_t to = (uint32_t)(arg >> 32), recv = (uint32_t)arg;
    coll_xfer x;
    if (c->wire_on && ev == NET_EVENT_DELIVERED) {
        c->sched->ops->recv(c->sched, to, recv, &x); /* the payload: the net has wire bytes */
    } else {
        c->recv_deps(c->sched, to, recv, &x); /* coll_sched_recv_deps, without the call */
        x.bytes = net_event_bytes(c->sys->n);
    }
    if (ev == NET_EVENT_SENT) {
        size_t pi = (size_t)x.peer * c->P + x.port;
        c->ports[pi].busy = false;
        if (c->port_post && c->port_post[2 * pi] > 0) { /* its post first */
            uint64_t t = evq_now(c->sys->q) + c->port_post[2 * pi];
            c->port_post[2 * pi + 1] = t;
            coll_at(c, t, coll_kick_item, (uint64_t)x.peer << 32 | x.port);
            return;
        }
        coll_port_kick(c, x.peer, x.port);
        return;
    }
    c->inflight--;
    if (c->failed)
        return;
    uint64_t t = evq_now(c->sys->q);
    bool at_switch = to >= c->p; /* a switch that reduces: no flag to poll, reductions at no
                                    chip's cost */
    if ((c->step_in || c->step_out) && !at_switch) { /* the step, from the last byte leaving:
                                                        the path latency counts */
        net_path_info pi;
        np_err e;
        uint32_t a = c->chips[x.peer], b = c->chips[to];
        if (net_route(c->sys->n, a, b, &pi, &e) != NP_OK) {
            coll_fail(c, e.status, e.msg);
            return;
        }
        uint64_t step = net_is_scaleout(c->sys->n, a, b) ? c->step_out : c->step_in;
        if (step > pi.latency_ps)
            t += step - pi.latency_ps;
    }
    uint64_t t_arrive = t;
    if (x.reduce && at_switch) {
        c->res.reductions++;
    } else if (x.reduce) {
        if (x.bytes != c->red_bytes) { /* messages mostly have one size: remember its time */
            c->red_bytes = x.bytes;
            c->red_ps = coll_reduce_ps(&c->sys->cfg, (uint32_t)c->sys->cfg.chip.cores, x.bytes,
                                       c->d.elem_bytes);
        }
        uint64_t *fr = &c->red_free[to];
        t = (*fr > t ? *fr : t) + c->red_ps;
        *fr = t;
        c->res.reductions++;
        c->res.reduced_bytes += x.bytes;
    }
    if (c->d.obs && c->d.obs->recv && !at_switch && x.peer < c->p) {
        coll_obs_msg m = {.src = c->chips[x.peer], .dst = c->chips[to], .port = x.port,
                          .id = arg, .bytes = x.bytes, .t_ps = t_arrive,
                          .t_reduce_ps = x.reduce ? t - c->red_ps : t, .t_done_ps = t};
        c->d.obs->recv(c->d.obs->ctx, &m);
    }
    coll_recv_complete(c, to, &x, t);
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
    for (size_t i = 0; c->ports && i < (size_t)c->pa * c->P; i++)
        if (c->ports[i].win != c->ports[i].win_inline)
            free(c->ports[i].win);
    coll_sched_free(c->sched);
    free(c->port_post);
    free(c->ports);
    free(c->chips);
    free(c->red_free);
    free(c);
}

np_status coll_fit(const net *n, const coll_desc *d, coll_sched_desc *sd, uint32_t **order,
                   np_err *err)
{
    uint32_t p = sd->ranks;
    *order = NULL;
    if (sd->algo == COLL_ALGO_HIER && d->group_ranks) { /* groups of consecutive ranks */
        if (d->group_ranks > p || p % d->group_ranks)
            return np_err_set(err, NP_ERR_INCONSISTENT, "hierarchical all-reduce: %" PRIu32
                              " ranks are not whole groups of %" PRIu32, p, d->group_ranks);
        sd->n_levels = 2;
        sd->level_ranks[0] = d->group_ranks;
        sd->level_ranks[1] = p / d->group_ranks;
        return NP_OK;
    }
    bool ring = sd->algo == COLL_ALGO_RING || sd->algo == COLL_ALGO_BIRING;
    if ((!ring && sd->algo != COLL_ALGO_HIER) || d->rank_order)
        return NP_OK;
    uint32_t want = sd->algo == COLL_ALGO_RING && d->channels > 1 ? d->channels : 1;
    if (want > COLL_MAX_CHANNELS)
        want = COLL_MAX_CHANNELS;
    if (!(*order = malloc((size_t)p * (1 + want) * sizeof **order)))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory fitting a collective");
    np_status st = ring ? coll_topo_ring_order(n, d->chips, p, *order, err)
                        : coll_topo_levels(n, d->chips, p, &sd->n_levels, sd->level_ranks,
                                           *order, err);
    if (st != NP_OK) {
        free(*order);
        *order = NULL;
        return st;
    }
    sd->order = *order;
    if (want > 1) {
        uint32_t *orders = *order + p;
        sd->channels = coll_topo_ring_channels(n, d->chips, p, *order, want, orders);
        sd->channel_orders = sd->channels > 1 ? orders : NULL;
    }
    return NP_OK;
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
    uint32_t cap = d->max_ranks ? d->max_ranks : COLL_MAX_RANKS;
    if (p > cap)
        return np_err_set(err, NP_ERR_RANGE, "%s over %" PRIu32 " ranks: a collective over more "
                          "than %" PRIu32 " ranks is not simulated message by message (a ring "
                          "over n ranks moves on the order of n^2 messages, an all-reduce "
                          "2n(n - 1) = %.3g here; --max-ranks N raises the cap)",
                          coll_op_name(d->op) ? coll_op_name(d->op) : "a collective", p, cap,
                          2.0 * p * (p - 1.0));
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
    c->p = p;
    c->red_bytes = UINT64_MAX;
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
    if (!c->d.channels)
        c->d.channels = (uint32_t)s->cfg.system.coll_channels;
    c->d.proto = coll_proto_resolve(&s->cfg, d->proto);
    if ((unsigned)c->d.proto >= COLL_PROTO_COUNT) {
        coll_free(c);
        return np_err_set(err, NP_ERR_RANGE, "unknown collective protocol %d", (int)d->proto);
    }
    if (c->d.algo == COLL_ALGO_AUTO || c->d.proto == COLL_PROTO_AUTO) {
        coll_tuner *t = coll_sys_tuner(s);
        coll_tune_query tq = {.op = d->op, .chips = c->chips, .ranks = p, .bytes = d->bytes,
                              .channels = c->d.rank_order ? 1 : c->d.channels,
                              .elem_bytes = d->elem_bytes, .chunk_bytes = d->chunk_bytes,
                              .root = d->root, .proto = c->d.proto};
        coll_tune_pick pick;
        if (!t) {
            coll_free(c);
            return np_err_set(err, NP_ERR_NOMEM, "out of memory tuning a collective");
        }
        if (coll_tune_choose(t, &tq, c->d.algo, &pick, err) != NP_OK) {
            coll_free(c);
            return err->status;
        }
        c->d.algo = pick.algo;
        c->d.proto = pick.proto;
    }
    coll_proto_params_of(&s->cfg, c->d.proto, &c->pp);
    if (c->d.algo == COLL_ALGO_NVLS && s->cfg.system.coll_nvls_base_ns > 0)
        c->pp.base_ps = (uint64_t)llround(s->cfg.system.coll_nvls_base_ns * 1000.0);
    c->wire_on = c->pp.line_bytes != c->pp.line_data || c->pp.max_bytes_per_s > 0;
    bool spans = false;
    for (uint32_t i = 1; i < p && !spans; i++)
        spans = net_is_scaleout(s->n, c->chips[0], c->chips[i]);
    c->step_in = spans ? c->pp.span_step_ps : c->pp.step_ps;
    c->step_out = c->pp.net_step_ps;
    coll_sched_desc sd = {.op = d->op, .algo = c->d.algo, .ranks = p, .bytes = d->bytes,
                          .elem_bytes = c->d.elem_bytes, .chunk_bytes = d->chunk_bytes,
                          .root = d->root};
    uint32_t *order = NULL;
    np_status st = coll_fit(s->n, &c->d, &sd, &order, err);
    if (st == NP_OK && s->cfg.system.coll_pipeline && c->d.algo == COLL_ALGO_RING &&
        !d->chunk_bytes && p > 1) /* NCCL's kernel pipeline: the protocol's slices */
        sd.chunk_bytes = coll_pipe_chunk(&s->cfg, c->d.proto, d->bytes, p, c->d.elem_bytes,
                                         spans ? (sd.channels > 1 ? sd.channels : 1) : 0,
                                         c->d.island_channels);
    if (c->d.algo == COLL_ALGO_NVLS) { /* NCCL's NVLS channels; with its pipeline, its chunks
                                          and heads that take them one at a time */
        sd.channels = (uint32_t)s->cfg.system.coll_nvls_channels;
        sd.heads_serial = s->cfg.system.coll_pipeline;
        if (sd.heads_serial && !d->chunk_bytes)
            sd.chunk_bytes = coll_pipe_nvls_chunk(d->bytes, p, sd.channels);
    }
    if (st == NP_OK)
        st = coll_sched_create(&sd, &c->sched, err);
    free(order);
    if (st != NP_OK) {
        coll_free(c);
        return st;
    }
    c->P = coll_sched_ports(c->sched);
    c->pa = p;
    c->sw_eff = 1;
    uint32_t nsw = coll_sched_switches(c->sched);
    if (nsw) { /* the switch the group hangs off, if it reduces */
        uint32_t sw = net_chip_switch(s->n, c->chips[0]);
        for (uint32_t i = 1; i < p && sw != UINT32_MAX; i++)
            if (net_chip_switch(s->n, c->chips[i]) != sw)
                sw = UINT32_MAX;
        uint32_t *ch = realloc(c->chips, (size_t)(p + nsw) * sizeof *ch);
        uint64_t *rf = realloc(c->red_free, (size_t)(p + nsw) * sizeof *rf);
        if (ch)
            c->chips = ch;
        if (rf)
            c->red_free = rf;
        if (!ch || !rf) {
            coll_free(c);
            return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a collective");
        }
        if (!s->cfg.system.switch_reduce || sw == UINT32_MAX || nsw != 1) {
            np_err_set(err, NP_ERR_INCONSISTENT, "%s/%s needs the group's chips on one switch "
                       "that reduces (a switch topology or one island of a hierarchical one, "
                       "with system.switch_reduce 1)", coll_op_name(d->op),
                       coll_algo_name(c->d.algo));
            coll_free(c); /* after the message, which names its algorithm */
            return err->status;
        }
        c->chips[p] = sw;
        c->red_free[p] = 0;
        c->pa = p + nsw;
        c->d.chips = c->chips;
        c->sw_eff = s->cfg.system.switch_reduce_efficiency;
    }
    c->recv_deps = c->sched->ops->recv_deps ? c->sched->ops->recv_deps : c->sched->ops->recv;
    c->send_deps = c->sched->ops->send_deps ? c->sched->ops->send_deps : c->sched->ops->send;
    if (c->pp.serial && !(c->port_post = calloc((size_t)c->pa * c->P * 2, sizeof *c->port_post))) {
        coll_free(c);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a collective");
    }
    void *ports = NULL;
    if (posix_memalign(&ports, 64, (size_t)c->pa * c->P * sizeof *c->ports) == 0) {
        memset(ports, 0, (size_t)c->pa * c->P * sizeof *c->ports);
        c->ports = ports;
    }
    if (!c->ports) {
        coll_free(c);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a collective");
    }
    for (uint32_t r = 0; r < c->pa; r++)
        for (uint32_t q = 0; q < c->P; q++) {
            coll_port *pt = &c->ports[(size_t)r * c->P + q];
            pt->n = coll_sched_sends(c->sched, r, q);
            pt->win = pt->win_inline;
            pt->mask = 0;
            pt->route_to = UINT32_MAX;
            pt->head_of = UINT32_MAX;
        }
    c->left = coll_sched_messages(c->sched);
    c->res = (coll_result){.op = d->op, .algo = c->d.algo, .ranks = p, .bytes = d->bytes,
                           .t_start_ps = evq_now(s->q), .proto = c->d.proto};
    if (c->pp.base_ps && c->left)
        coll_at(c, evq_now(s->q) + c->pp.base_ps, coll_kick_all_item, 0);
    else
        for (uint32_t r = 0; r < c->pa && !c->failed; r++)
            for (uint32_t q = 0; q < c->P; q++)
                coll_port_kick(c, r, q);
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
    return coll_run_progress(s, d, NULL, NULL, r, err);
}

np_status coll_run_progress(coll_sys *s, const coll_desc *d, coll_progress_fn progress,
                            void *ctx, coll_result *r, np_err *err)
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
        if (progress)
            progress(ctx, coll_sched_messages(c->sched) - c->left, coll_sched_messages(c->sched));
    }
    if (st == NP_OK)
        *r = c->res;
    if (st == NP_OK || c->inflight == 0)
        coll_free(c);
    return st;
}
