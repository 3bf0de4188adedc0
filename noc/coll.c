/* coll.c — the collective engine: groups, ports, reducers, completion (see coll_impl.h).
 *
 * Each message is a record in a pool: queued on its sender's port, then a net transfer (SENT
 * frees the port for the next message; DELIVERED hands it to the algorithm), then free.
 * Each reduction is a record queued on its rank's reducer, then an event at its end time.
 * `outstanding` counts messages and reductions not yet handed back; when it reaches 0 after
 * a callback the collective is complete. */
#include "coll_impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct coll_msg {
    uint32_t from, to;
    uint64_t bytes, tag;
    uint32_t next; /* queue / free-list link */
    uint8_t port;
} coll_msg;

typedef struct coll_fifo {
    uint32_t head, tail; /* UINT32_MAX when empty */
    bool busy;
} coll_fifo;

struct coll_sys {
    net *n;
    evq *q;
    double reduce_elems_per_ps; /* elements one chip reduces per ps */
};

struct coll {
    coll_sys *sys;
    coll_desc d;
    uint32_t *chips;
    uint32_t p;
    const coll_algo_ops *ops;
    void *state;
    coll_msg *msgs;
    uint32_t n_msgs, cap_msgs, free_msg;
    coll_fifo *ports;    /* p * COLL_PORTS */
    coll_fifo *reducers; /* p */
    uint64_t outstanding;
    bool done, failed;
    coll_result res;
    np_err err;
};

static const char *const coll_op_names[COLL_OP_COUNT] = {
    [COLL_OP_ALL_REDUCE] = "all_reduce", [COLL_OP_ALL_GATHER] = "all_gather",
    [COLL_OP_REDUCE_SCATTER] = "reduce_scatter", [COLL_OP_BROADCAST] = "broadcast",
    [COLL_OP_REDUCE] = "reduce", [COLL_OP_SCATTER] = "scatter", [COLL_OP_GATHER] = "gather",
    [COLL_OP_ALL_TO_ALL] = "all_to_all", [COLL_OP_SENDRECV] = "sendrecv",
};
static const char *const coll_algo_names[COLL_ALGO_COUNT] = {
    [COLL_ALGO_AUTO] = "auto", [COLL_ALGO_RING] = "ring", [COLL_ALGO_BIRING] = "biring",
    [COLL_ALGO_TREE] = "tree", [COLL_ALGO_RHD] = "rhd", [COLL_ALGO_HIER] = "hier",
    [COLL_ALGO_CHAIN] = "chain", [COLL_ALGO_PAIRWISE] = "pairwise", [COLL_ALGO_DIRECT] = "direct",
};
_Static_assert(sizeof coll_op_names / sizeof *coll_op_names == COLL_OP_COUNT, "op names");
_Static_assert(sizeof coll_algo_names / sizeof *coll_algo_names == COLL_ALGO_COUNT, "names");

/* Which algorithms each op has; the first listed is what AUTO picks. */
static const coll_algo_ops *const coll_table[COLL_OP_COUNT][4] = {
    [COLL_OP_ALL_REDUCE] = {&coll_ring_all_reduce, &coll_biring_all_reduce,
                            &coll_tree_all_reduce, &coll_rhd_all_reduce},
    [COLL_OP_ALL_GATHER] = {&coll_ring_all_gather, &coll_rhd_all_gather},
    [COLL_OP_REDUCE_SCATTER] = {&coll_ring_reduce_scatter, &coll_rhd_reduce_scatter},
    [COLL_OP_BROADCAST] = {&coll_tree_broadcast, &coll_chain_broadcast},
    [COLL_OP_REDUCE] = {&coll_tree_reduce, &coll_chain_reduce},
    [COLL_OP_SCATTER] = {&coll_tree_scatter},
    [COLL_OP_GATHER] = {&coll_tree_gather},
    [COLL_OP_ALL_TO_ALL] = {&coll_pairwise_all_to_all},
    [COLL_OP_SENDRECV] = {&coll_direct_sendrecv},
};

/* The hierarchical all-reduce lives outside the 4-column table. */
static const coll_algo_ops *coll_find_ops(coll_op op, coll_algo a)
{
    if ((unsigned)op >= COLL_OP_COUNT)
        return NULL;
    if (op == COLL_OP_ALL_REDUCE && a == COLL_ALGO_HIER)
        return &coll_hier_all_reduce;
    for (int i = 0; i < 4; i++) {
        const coll_algo_ops *o = coll_table[op][i];
        if (o && (a == COLL_ALGO_AUTO || o->algo == a))
            return o;
    }
    return NULL;
}

const char *coll_op_name(coll_op op)
{
    return (unsigned)op < COLL_OP_COUNT ? coll_op_names[op] : NULL;
}

const char *coll_algo_name(coll_algo a)
{
    return (unsigned)a < COLL_ALGO_COUNT ? coll_algo_names[a] : NULL;
}

bool coll_algo_supported(coll_op op, coll_algo a) { return coll_find_ops(op, a) != NULL; }

coll_algo coll_algo_resolve(coll_op op, coll_algo a)
{
    const coll_algo_ops *o = coll_find_ops(op, a);
    return o ? o->algo : a;
}

/* Compares ignoring '_' and '-' so all_reduce, all-reduce and allreduce match. */
static bool coll_name_eq(const char *a, const char *b)
{
    for (;;) {
        while (*a == '_' || *a == '-')
            a++;
        while (*b == '_' || *b == '-')
            b++;
        if (*a != *b)
            return false;
        if (!*a)
            return true;
        a++;
        b++;
    }
}

np_status coll_op_parse(const char *s, coll_op *out, np_err *err)
{
    for (int i = 0; i < COLL_OP_COUNT; i++)
        if (coll_name_eq(s, coll_op_names[i])) {
            *out = (coll_op)i;
            return NP_OK;
        }
    return np_err_set(err, NP_ERR_UNKNOWN_KEY, "unknown collective '%s' (expected all_reduce, "
                      "all_gather, reduce_scatter, broadcast, reduce, scatter, gather, "
                      "all_to_all or sendrecv)", s);
}

np_status coll_algo_parse(const char *s, coll_algo *out, np_err *err)
{
    for (int i = 0; i < COLL_ALGO_COUNT; i++)
        if (coll_name_eq(s, coll_algo_names[i])) {
            *out = (coll_algo)i;
            return NP_OK;
        }
    return np_err_set(err, NP_ERR_UNKNOWN_KEY, "unknown algorithm '%s' (expected auto, ring, "
                      "biring, tree, rhd, hier, chain, pairwise or direct)", s);
}

double coll_busbw_factor(coll_op op, uint32_t p)
{
    double n = p;
    switch (op) {
    case COLL_OP_ALL_REDUCE: return 2 * (n - 1) / n;
    case COLL_OP_ALL_GATHER:
    case COLL_OP_REDUCE_SCATTER:
    case COLL_OP_ALL_TO_ALL:
    case COLL_OP_SCATTER:
    case COLL_OP_GATHER: return (n - 1) / n;
    default: return 1;
    }
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
    s->reduce_elems_per_ps = (double)cfg->core.vector_lanes *
                             (double)cfg->core.vector_ops_per_lane * cfg->core.clock_ghz *
                             (double)cfg->chip.cores / 1000.0;
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
    return s->reduce_elems_per_ps * (elem_bytes ? elem_bytes : 4) * 1e12;
}

/* ---- The engine ------------------------------------------------------------------------ */

uint32_t coll_ranks(const coll *c) { return c->p; }
const coll_desc *coll_get_desc(const coll *c) { return &c->d; }
const net_params *coll_net_params(const coll *c) { return net_get_params(c->sys->n); }
void *coll_state(const coll *c) { return c->state; }
void coll_set_state(coll *c, void *state) { c->state = state; }
bool coll_is_done(const coll *c) { return c->done; }
const coll_result *coll_get_result(const coll *c) { return &c->res; }

np_status coll_status(const coll *c, np_err *err)
{
    if (!c->failed)
        return NP_OK;
    *err = c->err;
    return c->err.status;
}

void coll_fail(coll *c, np_status s, const char *msg)
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
        c->free_msg = c->msgs[id].next;
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

static void coll_msg_free(coll *c, uint32_t id)
{
    c->msgs[id].next = c->free_msg;
    c->free_msg = id;
}

static void coll_fifo_push(coll *c, coll_fifo *f, uint32_t id)
{
    c->msgs[id].next = UINT32_MAX;
    if (f->tail == UINT32_MAX)
        f->head = id;
    else
        c->msgs[f->tail].next = id;
    f->tail = id;
}

static uint32_t coll_fifo_pop(coll *c, coll_fifo *f)
{
    uint32_t id = f->head;
    if (id == UINT32_MAX)
        return id;
    f->head = c->msgs[id].next;
    if (f->head == UINT32_MAX)
        f->tail = UINT32_MAX;
    return id;
}

static void coll_check_done(coll *c)
{
    if (c->outstanding || c->done)
        return;
    c->done = true;
    c->res.t_end_ps = evq_now(c->sys->q);
    if (c->d.done)
        c->d.done(c->d.ctx, &c->res);
}

static void coll_net_event(void *ctx, uint64_t arg, net_event ev);

static void coll_port_kick(coll *c, coll_fifo *f)
{
    if (f->busy || c->failed)
        return;
    uint32_t id = coll_fifo_pop(c, f);
    if (id == UINT32_MAX)
        return;
    f->busy = true;
    coll_msg *m = &c->msgs[id];
    np_err e;
    if (net_transfer(c->sys->n, c->chips[m->from], c->chips[m->to], m->bytes, coll_net_event, c,
                     id, &e) != NP_OK) {
        coll_fail(c, e.status, e.msg);
        f->busy = false;
    }
}

static void coll_net_event(void *ctx, uint64_t arg, net_event ev)
{
    coll *c = ctx;
    uint32_t id = (uint32_t)arg;
    coll_msg m = c->msgs[id];
    if (ev == NET_EVENT_SENT) {
        coll_fifo *f = &c->ports[(size_t)m.from * COLL_PORTS + m.port];
        f->busy = false;
        coll_port_kick(c, f);
        return;
    }
    coll_msg_free(c, id);
    c->outstanding--;
    if (!c->failed)
        c->ops->recv(c, m.to, m.from, m.tag, m.bytes);
    coll_check_done(c);
}

void coll_send(coll *c, uint32_t from, uint32_t to, uint64_t bytes, uint64_t tag, int port)
{
    if (c->failed)
        return;
    uint32_t id = coll_msg_new(c);
    if (id == UINT32_MAX) {
        coll_fail(c, NP_ERR_NOMEM, "out of memory queueing a message");
        return;
    }
    c->msgs[id] = (coll_msg){from, to, bytes, tag, UINT32_MAX, (uint8_t)port};
    c->outstanding++;
    c->res.transfers++;
    c->res.bytes_sent += bytes;
    coll_fifo *f = &c->ports[(size_t)from * COLL_PORTS + (size_t)port];
    coll_fifo_push(c, f, id);
    coll_port_kick(c, f);
}

static void coll_reduce_done(evq *q, void *ctx, uint64_t arg);

static void coll_reducer_kick(coll *c, uint32_t rank)
{
    coll_fifo *f = &c->reducers[rank];
    if (f->busy || c->failed)
        return;
    uint32_t id = coll_fifo_pop(c, f);
    if (id == UINT32_MAX)
        return;
    f->busy = true;
    double elems = (double)c->msgs[id].bytes / (double)c->d.elem_bytes;
    uint64_t dt = (uint64_t)ceil(elems / c->sys->reduce_elems_per_ps);
    np_err e;
    if (evq_schedule_in(c->sys->q, dt, coll_reduce_done, c, id, NULL, &e) != NP_OK)
        coll_fail(c, e.status, e.msg);
}

static void coll_reduce_done(evq *q, void *ctx, uint64_t arg)
{
    (void)q;
    coll *c = ctx;
    uint32_t id = (uint32_t)arg;
    coll_msg m = c->msgs[id];
    coll_msg_free(c, id);
    c->reducers[m.to].busy = false;
    coll_reducer_kick(c, m.to);
    c->outstanding--;
    if (!c->failed && c->ops->reduced)
        c->ops->reduced(c, m.to, m.tag, m.bytes);
    coll_check_done(c);
}

void coll_reduce(coll *c, uint32_t rank, uint64_t bytes, uint64_t tag)
{
    if (c->failed)
        return;
    uint32_t id = coll_msg_new(c);
    if (id == UINT32_MAX) {
        coll_fail(c, NP_ERR_NOMEM, "out of memory queueing a reduction");
        return;
    }
    c->msgs[id] = (coll_msg){rank, rank, bytes, tag, UINT32_MAX, 0};
    c->outstanding++;
    c->res.reductions++;
    coll_fifo_push(c, &c->reducers[rank], id);
    coll_reducer_kick(c, rank);
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
    if (c->state) {
        if (c->ops->free_state)
            c->ops->free_state(c->state);
        else
            free(c->state);
    }
    free(c->chips);
    free(c->msgs);
    free(c->ports);
    free(c->reducers);
    free(c);
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
    const coll_algo_ops *ops = coll_find_ops(d->op, d->algo);
    if (!ops)
        return np_err_set(err, NP_ERR_INCONSISTENT, "%s has no %s algorithm",
                          coll_op_name(d->op) ? coll_op_name(d->op) : "?",
                          coll_algo_name(d->algo) ? coll_algo_name(d->algo) : "?");
    if (d->root >= p && (d->op == COLL_OP_BROADCAST || d->op == COLL_OP_REDUCE ||
                         d->op == COLL_OP_SCATTER || d->op == COLL_OP_GATHER))
        return np_err_set(err, NP_ERR_RANGE, "root rank %" PRIu32 " is not in the %" PRIu32
                          "-rank group", d->root, p);
    coll *c = calloc(1, sizeof *c);
    if (!c)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a collective");
    c->sys = s;
    c->d = *d;
    if (!c->d.elem_bytes)
        c->d.elem_bytes = 4;
    c->p = p;
    c->ops = ops;
    c->free_msg = UINT32_MAX;
    c->chips = malloc((size_t)p * sizeof *c->chips);
    c->ports = malloc((size_t)p * COLL_PORTS * sizeof *c->ports);
    c->reducers = malloc((size_t)p * sizeof *c->reducers);
    uint8_t *seen = calloc(nchips, 1);
    if (!c->chips || !c->ports || !c->reducers || !seen) {
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
    for (size_t i = 0; i < (size_t)p * COLL_PORTS; i++)
        c->ports[i] = (coll_fifo){UINT32_MAX, UINT32_MAX, false};
    for (uint32_t i = 0; i < p; i++)
        c->reducers[i] = (coll_fifo){UINT32_MAX, UINT32_MAX, false};
    c->d.chips = c->chips;
    c->d.n_chips = p;
    c->res = (coll_result){.op = d->op, .algo = ops->algo, .ranks = p, .bytes = d->bytes,
                           .t_start_ps = evq_now(s->q)};
    /* Hold one count through start so that completion cannot happen inside it. */
    c->outstanding = 1;
    np_status st = ops->start(c, err);
    c->outstanding--;
    if (st == NP_OK && c->failed)
        st = coll_status(c, err);
    if (st == NP_OK && c->outstanding == 0)
        st = evq_schedule_in(s->q, 0, coll_finish_event, c, 0, NULL, err);
    if (st != NP_OK) {
        if (c->outstanding) /* work already in the network refers to c: cannot free it */
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
                            " messages and reductions outstanding", coll_op_name(d->op),
                            coll_algo_name(c->ops->algo), c->outstanding);
        if (st == NP_OK && c->failed)
            st = coll_status(c, err);
    }
    if (st == NP_OK)
        *r = c->res;
    if (st == NP_OK || c->outstanding == 0)
        coll_free(c);
    return st;
}
