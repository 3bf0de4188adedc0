/* coll_sched.c — schedules (coll_sched.h): the op and algorithm names, which algorithms each op
 * has, the reduction rate, and the generic part of a schedule (creation, accessors, verify);
 * each algorithm's ops come from its coll_sched_ops table (coll_impl.h). */
#include "coll_impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

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
    [COLL_ALGO_NVLS] = "nvls",
};
_Static_assert(sizeof coll_op_names / sizeof *coll_op_names == COLL_OP_COUNT, "op names");
_Static_assert(sizeof coll_algo_names / sizeof *coll_algo_names == COLL_ALGO_COUNT, "names");

/* The algorithms of each op. */
#define COLL_MAX_ALGOS 6
static const coll_sched_ops *const coll_table[COLL_OP_COUNT][COLL_MAX_ALGOS] = {
    [COLL_OP_ALL_REDUCE] = {&coll_ring_all_reduce, &coll_biring_all_reduce,
                            &coll_tree_all_reduce, &coll_rhd_all_reduce, &coll_hier_all_reduce,
                            &coll_nvls_all_reduce},
    [COLL_OP_ALL_GATHER] = {&coll_ring_all_gather, &coll_rhd_all_gather},
    [COLL_OP_REDUCE_SCATTER] = {&coll_ring_reduce_scatter, &coll_rhd_reduce_scatter},
    [COLL_OP_BROADCAST] = {&coll_tree_broadcast, &coll_chain_broadcast},
    [COLL_OP_REDUCE] = {&coll_tree_reduce, &coll_chain_reduce},
    [COLL_OP_SCATTER] = {&coll_tree_scatter},
    [COLL_OP_GATHER] = {&coll_tree_gather},
    [COLL_OP_ALL_TO_ALL] = {&coll_pairwise_all_to_all, &coll_direct_all_to_all},
    [COLL_OP_SENDRECV] = {&coll_direct_sendrecv},
};

static const coll_sched_ops *coll_find_ops(coll_op op, coll_algo a)
{
    if ((unsigned)op >= COLL_OP_COUNT)
        return NULL;
    for (int i = 0; i < COLL_MAX_ALGOS; i++) {
        const coll_sched_ops *o = coll_table[op][i];
        if (o && o->algo == a)
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

bool coll_algo_supported(coll_op op, coll_algo a)
{
    return (a == COLL_ALGO_AUTO && (unsigned)op < COLL_OP_COUNT) || coll_find_ops(op, a);
}

bool coll_op_reduces(coll_op op)
{
    return op == COLL_OP_ALL_REDUCE || op == COLL_OP_REDUCE_SCATTER || op == COLL_OP_REDUCE;
}

bool coll_op_rooted(coll_op op)
{
    return op == COLL_OP_BROADCAST || op == COLL_OP_REDUCE || op == COLL_OP_SCATTER ||
           op == COLL_OP_GATHER;
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
    const char *guess = np_suggest_name(s, coll_op_names, COLL_OP_COUNT);
    return np_err_set(err, NP_ERR_UNKNOWN_KEY, "unknown collective '%s'%s%s%s (expected "
                      "all_reduce, all_gather, reduce_scatter, broadcast, reduce, scatter, "
                      "gather, all_to_all or sendrecv)", s, guess ? "; did you mean '" : "",
                      guess ? guess : "", guess ? "'?" : "");
}

np_status coll_algo_parse(const char *s, coll_algo *out, np_err *err)
{
    for (int i = 0; i < COLL_ALGO_COUNT; i++)
        if (coll_name_eq(s, coll_algo_names[i])) {
            *out = (coll_algo)i;
            return NP_OK;
        }
    const char *guess = np_suggest_name(s, coll_algo_names, COLL_ALGO_COUNT);
    return np_err_set(err, NP_ERR_UNKNOWN_KEY, "unknown algorithm '%s'%s%s%s (expected auto, "
                      "ring, biring, tree, rhd, hier, chain, pairwise, direct or nvls)", s,
                      guess ? "; did you mean '" : "", guess ? guess : "", guess ? "'?" : "");
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

uint64_t coll_reduce_ps(const arch_config *cfg, uint32_t cores, uint64_t bytes,
                        uint32_t elem_bytes)
{
    double elems_per_ps = (double)cfg->core.vector_lanes * (double)cfg->core.vector_ops_per_lane *
                          cfg->core.clock_ghz * (double)cores / 1000.0;
    double elems = (double)bytes / (double)(elem_bytes ? elem_bytes : 4);
    return (uint64_t)ceil(elems / elems_per_ps);
}

/* ---- Schedules -------------------------------------------------------------------------- */

const coll_sched_desc *coll_sched_get_desc(const coll_sched *s) { return &s->d; }
uint32_t coll_sched_ranks(const coll_sched *s) { return s->d.ranks; }
uint32_t coll_sched_ports(const coll_sched *s) { return s->ports; }
uint32_t coll_sched_switches(const coll_sched *s) { return s->switches; }
uint32_t coll_sched_steps(const coll_sched *s) { return s->steps; }
uint64_t coll_sched_messages(const coll_sched *s) { return s->messages; }

uint32_t coll_sched_sends(const coll_sched *s, uint32_t rank, uint32_t port)
{
    return s->ops->sends(s, rank, port);
}

uint32_t coll_sched_recvs(const coll_sched *s, uint32_t rank) { return s->ops->recvs(s, rank); }

void coll_sched_send(const coll_sched *s, uint32_t rank, uint32_t port, uint32_t i,
                     coll_xfer *x)
{
    s->ops->send(s, rank, port, i, x);
}

void coll_sched_recv(const coll_sched *s, uint32_t rank, uint32_t i, coll_xfer *x)
{
    s->ops->recv(s, rank, i, x);
}

void coll_sched_recv_deps(const coll_sched *s, uint32_t rank, uint32_t i, coll_xfer *x)
{
    (s->ops->recv_deps ? s->ops->recv_deps : s->ops->recv)(s, rank, i, x);
}

void coll_sched_send_deps(const coll_sched *s, uint32_t rank, uint32_t port, uint32_t i,
                          coll_xfer *x)
{
    (s->ops->send_deps ? s->ops->send_deps : s->ops->send)(s, rank, port, i, x);
}

void coll_sched_free(coll_sched *s)
{
    if (!s)
        return;
    if (s->state) {
        if (s->ops->free_state)
            s->ops->free_state(s->state);
        else
            free(s->state);
    }
    free(s->order);
    free(s->channel_orders);
    free(s);
}

/* A copy of the permutation v of 0 .. p-1 in *out; NP_ERR_RANGE naming what when it is not. */
static np_status coll_copy_perm(const uint32_t *v, uint32_t p, const char *what, uint32_t **out,
                                np_err *err)
{
    uint32_t *c = malloc((size_t)p * sizeof *c);
    uint8_t *seen = calloc(p, 1);
    np_status st = NP_OK;
    if (!c || !seen)
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory making a schedule");
    for (uint32_t i = 0; st == NP_OK && i < p; i++) {
        if (v[i] >= p || seen[v[i]])
            st = np_err_set(err, NP_ERR_RANGE, "%s is not a permutation of ranks 0 .. %" PRIu32
                            " (position %" PRIu32 ")", what, p - 1, i);
        else
            seen[v[i]] = 1, c[i] = v[i];
    }
    free(seen);
    if (st != NP_OK)
        free(c);
    else
        *out = c;
    return st;
}

np_status coll_sched_create(const coll_sched_desc *d, coll_sched **out, np_err *err)
{
    const coll_sched_ops *ops = coll_find_ops(d->op, d->algo);
    if (!ops)
        return np_err_set(err, NP_ERR_INCONSISTENT, "%s has no %s algorithm",
                          coll_op_name(d->op) ? coll_op_name(d->op) : "?",
                          coll_algo_name(d->algo) ? coll_algo_name(d->algo) : "?");
    uint32_t p = d->ranks;
    if (p == 0)
        return np_err_set(err, NP_ERR_RANGE, "a collective needs at least one rank");
    if (coll_op_rooted(d->op) && d->root >= p)
        return np_err_set(err, NP_ERR_RANGE, "root rank %" PRIu32 " is not in the %" PRIu32
                          "-rank group", d->root, p);
    coll_sched *s = calloc(1, sizeof *s);
    if (!s)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory making a schedule");
    s->d = *d;
    s->ops = ops;
    if (!s->d.elem_bytes)
        s->d.elem_bytes = 4;
    if (d->channels > COLL_MAX_CHANNELS ||
        (d->channels > 1 && d->algo != COLL_ALGO_NVLS &&
         (d->algo != COLL_ALGO_RING ||
          (d->op != COLL_OP_ALL_REDUCE && d->op != COLL_OP_ALL_GATHER &&
           d->op != COLL_OP_REDUCE_SCATTER)))) {
        coll_sched_free(s);
        return np_err_set(err, NP_ERR_INCONSISTENT, "%" PRIu32 " channels: only ring all-reduce, "
                          "all-gather and reduce-scatter and nvls all-reduce run channels side "
                          "by side (at most %d)", d->channels, COLL_MAX_CHANNELS);
    }
    if (d->order) {
        if (coll_copy_perm(d->order, p, "the ring order", &s->order, err) != NP_OK) {
            coll_sched_free(s);
            return err->status;
        }
        s->d.order = s->order;
    }
    s->d.channel_orders = NULL;
    if (d->channels > 1 && d->channel_orders) {
        if (!(s->channel_orders = malloc((size_t)p * d->channels * sizeof *s->channel_orders))) {
            coll_sched_free(s);
            return np_err_set(err, NP_ERR_NOMEM, "out of memory making a schedule");
        }
        for (uint32_t c = 0; c < d->channels; c++) {
            uint32_t *one;
            if (coll_copy_perm(d->channel_orders + (size_t)c * p, p, "a channel's ring order",
                               &one, err) != NP_OK) {
                coll_sched_free(s);
                return err->status;
            }
            memcpy(s->channel_orders + (size_t)c * p, one, (size_t)p * sizeof *one);
            free(one);
        }
        s->d.channel_orders = s->channel_orders;
    }
    if (ops->init(s, err) != NP_OK) {
        coll_sched_free(s);
        return err->status;
    }
    s->ports = ops->ports(s);
    s->steps = ops->steps(s);
    s->switches = ops->switches ? ops->switches(s) : 0;
    for (uint32_t r = 0; r < p + s->switches; r++)
        s->messages += ops->recvs(s, r);
    *out = s;
    return NP_OK;
}

/* ---- Verification: an untimed run ------------------------------------------------------- */

typedef struct vrank {
    uint32_t *left;     /* per port, per send: deps not yet met */
    uint32_t *base;     /* per port: offset of its sends in left */
    uint32_t *next;     /* per port: next send */
    uint8_t *done;      /* per receive */
} vrank;

static void vrank_free(vrank *v, uint32_t p)
{
    for (uint32_t r = 0; v && r < p; r++) {
        free(v[r].left);
        free(v[r].base);
        free(v[r].next);
        free(v[r].done);
    }
    free(v);
}

np_status coll_sched_verify(const coll_sched *s, np_err *err)
{
    uint32_t p = s->d.ranks + s->switches, P = s->ports;
    vrank *v = calloc(p, sizeof *v);
    uint64_t *queue = NULL; /* messages sent, not yet received: (rank << 32 | recv) */
    uint64_t qh = 0, qt = 0;
    np_status st = NP_OK;
    if (!v || !(queue = malloc((size_t)(s->messages + 1) * sizeof *queue))) {
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory verifying a schedule");
        goto out;
    }
    for (uint32_t r = 0; r < p; r++) {
        v[r].base = calloc(P + 1, sizeof *v[r].base);
        v[r].next = calloc(P, sizeof *v[r].next);
        for (uint32_t q = 0; v[r].base && q < P; q++)
            v[r].base[q + 1] = v[r].base[q] + coll_sched_sends(s, r, q);
        v[r].left = v[r].base ? calloc(v[r].base[P] + 1, sizeof *v[r].left) : NULL;
        v[r].done = calloc(coll_sched_recvs(s, r) + 1, 1);
        if (!v[r].base || !v[r].next || !v[r].left || !v[r].done) {
            st = np_err_set(err, NP_ERR_NOMEM, "out of memory verifying a schedule");
            goto out;
        }
        /* deps must equal the receives that name a send in their unblock range */
        for (uint32_t i = 0; i < coll_sched_recvs(s, r); i++) {
            coll_xfer x;
            coll_sched_recv(s, r, i, &x);
            if (x.unblock_lo == x.unblock_hi)
                continue;
            uint32_t np_ = x.unblock_ports > 1 ? x.unblock_ports : 1;
            for (uint32_t pq = x.unblock_port; pq < x.unblock_port + np_; pq++) {
                if (pq >= P || x.unblock_hi > coll_sched_sends(s, r, pq) ||
                    x.unblock_lo > x.unblock_hi) {
                    st = np_err_set(err, NP_ERR_INTERNAL, "rank %" PRIu32 " receive %" PRIu32
                                    " unblocks sends %" PRIu32 "..%" PRIu32 " of port %" PRIu32
                                    ", which do not exist", r, i, x.unblock_lo, x.unblock_hi,
                                    pq);
                    goto out;
                }
                for (uint32_t k = x.unblock_lo; k < x.unblock_hi; k++) {
                    coll_xfer y;
                    coll_sched_send(s, r, pq, k, &y);
                    if (y.deps != x.unblock_deps) {
                        st = np_err_set(err, NP_ERR_INTERNAL, "rank %" PRIu32 " receive %" PRIu32
                                        " says the sends it unblocks have %" PRIu32 " deps, but "
                                        "send %" PRIu32 " of port %" PRIu32 " has %" PRIu32, r,
                                        i, x.unblock_deps, k, pq, y.deps);
                        goto out;
                    }
                    v[r].left[v[r].base[pq] + k]++;
                }
            }
        }
        for (uint32_t q = 0; q < P; q++)
            for (uint32_t i = 0; i < coll_sched_sends(s, r, q); i++) {
                coll_xfer x;
                coll_sched_send(s, r, q, i, &x);
                if (x.deps != v[r].left[v[r].base[q] + i]) {
                    st = np_err_set(err, NP_ERR_INTERNAL, "rank %" PRIu32 " port %" PRIu32
                                    " send %" PRIu32 " has %" PRIu32 " deps but %" PRIu32
                                    " receives unblock it", r, q, i, x.deps,
                                    v[r].left[v[r].base[q] + i]);
                    goto out;
                }
            }
    }
    /* Run: every port sends while its head is unblocked; messages arrive in send order. */
    uint64_t sent = 0, received = 0;
    for (;;) {
        bool progress = false;
        for (uint32_t r = 0; r < p; r++)
            for (uint32_t q = 0; q < P; q++) {
                uint32_t n = coll_sched_sends(s, r, q);
                while (v[r].next[q] < n && v[r].left[v[r].base[q] + v[r].next[q]] == 0) {
                    uint32_t i = v[r].next[q]++;
                    coll_xfer x, y;
                    coll_sched_send(s, r, q, i, &x);
                    coll_xfer sd;
                    coll_sched_send_deps(s, r, q, i, &sd);
                    if (sd.peer != x.peer || sd.match != x.match || sd.deps != x.deps ||
                        sd.bytes != x.bytes) {
                        st = np_err_set(err, NP_ERR_INTERNAL, "rank %" PRIu32 " port %" PRIu32
                                        " send %" PRIu32 ": send_deps differs from send", r, q,
                                        i);
                        goto out;
                    }
                    if (x.peer >= p || x.match >= coll_sched_recvs(s, x.peer)) {
                        st = np_err_set(err, NP_ERR_INTERNAL, "rank %" PRIu32 " port %" PRIu32
                                        " send %" PRIu32 " goes to receive %" PRIu32 " of rank "
                                        "%" PRIu32 ", which does not exist", r, q, i, x.match,
                                        x.peer);
                        goto out;
                    }
                    coll_sched_recv(s, x.peer, x.match, &y);
                    coll_xfer z;
                    coll_sched_recv_deps(s, x.peer, x.match, &z);
                    if (z.peer != y.peer || z.port != y.port || z.reduce != y.reduce ||
                        z.unblock_port != y.unblock_port || z.unblock_lo != y.unblock_lo ||
                        z.unblock_hi != y.unblock_hi || z.unblock_deps != y.unblock_deps ||
                        (z.unblock_ports > 1) != (y.unblock_ports > 1) ||
                        (z.unblock_ports > 1 && z.unblock_ports != y.unblock_ports)) {
                        st = np_err_set(err, NP_ERR_INTERNAL, "rank %" PRIu32 " receive %" PRIu32
                                        ": recv_deps differs from recv", x.peer, x.match);
                        goto out;
                    }
                    if (y.peer != r || y.match != i || y.port != q || y.bytes != x.bytes ||
                        y.step != x.step) {
                        st = np_err_set(err, NP_ERR_INTERNAL, "rank %" PRIu32 " port %" PRIu32
                                        " send %" PRIu32 " (%" PRIu64 " B, step %" PRIu32 ") and "
                                        "rank %" PRIu32 " receive %" PRIu32 " (from %" PRIu32
                                        " send %" PRIu32 " port %" PRIu32 ", %" PRIu64 " B, step "
                                        "%" PRIu32 ") do not match", r, q, i, x.bytes, x.step,
                                        x.peer, x.match, y.peer, y.match, y.port, y.bytes, y.step);
                        goto out;
                    }
                    if (v[x.peer].done[x.match]) {
                        st = np_err_set(err, NP_ERR_INTERNAL, "rank %" PRIu32 " receive %" PRIu32
                                        " is sent twice", x.peer, x.match);
                        goto out;
                    }
                    v[x.peer].done[x.match] = 2; /* in flight */
                    queue[qt++] = (uint64_t)x.peer << 32 | x.match;
                    sent++;
                    progress = true;
                }
            }
        while (qh < qt) {
            uint32_t r = (uint32_t)(queue[qh] >> 32), i = (uint32_t)queue[qh];
            qh++;
            coll_xfer x;
            coll_sched_recv(s, r, i, &x);
            v[r].done[i] = 1;
            received++;
            for (uint32_t pq = 0; pq < (x.unblock_ports > 1 ? x.unblock_ports : 1); pq++)
                for (uint32_t k = x.unblock_lo; k < x.unblock_hi; k++)
                    v[r].left[v[r].base[x.unblock_port + pq] + k]--;
            progress = true;
        }
        if (!progress)
            break;
    }
    if (sent != s->messages || received != s->messages) {
        for (uint32_t r = 0; r < p; r++)
            for (uint32_t q = 0; q < P; q++)
                if (v[r].next[q] < coll_sched_sends(s, r, q)) {
                    st = np_err_set(err, NP_ERR_INTERNAL, "the schedule deadlocks: rank %" PRIu32
                                    " port %" PRIu32 " waits at send %" PRIu32 " of %" PRIu32
                                    " (%" PRIu64 " of %" PRIu64 " messages sent)", r, q,
                                    v[r].next[q], coll_sched_sends(s, r, q), sent, s->messages);
                    goto out;
                }
        st = np_err_set(err, NP_ERR_INTERNAL, "%" PRIu64 " messages sent, %" PRIu64 " expected",
                        sent, s->messages);
    }
out:
    vrank_free(v, p);
    free(queue);
    return st;
}
