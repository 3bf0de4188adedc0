/* lower_coll.c — a plan rank's communication as comm.* sequences (see lower.h): collectives
 * from their schedules (noc/coll_sched.h, the one schedule per algorithm the flow engine runs
 * too), sends and receives; and how kernels wait for what is in flight.
 *
 * Streams. As the run engine's (sim/run_plan.h), every kind of communication is a stream that
 * runs its entries one at a time in issue order: tp, dp, the pipeline's sends to the next and
 * receives from the previous stage (and back), sp, ZeRO's gathers and scatters, the pipeline
 * axis's collectives. A stream is the COMM queue of one core, core = stream mod cores (in the
 * order above, so the streams a step uses at once get different cores when the chip has
 * enough), the same core on every rank: a message goes from the sender's stream core to the
 * receiver's.
 *
 * Ordering with the kernels (the program's fences and barriers leave COMM out, nocomm):
 *   before an entry   a barrier (every core's earlier kernels have stored what it reads, and
 *                     are done with what it overwrites), and a wait for communication still in
 *                     flight on other streams that touches the same bytes;
 *   the entry         on its stream's core: an out-of-place collective's input is copied into
 *                     its buffer by that core's DMA (semaphore to the COMM queue), then its
 *                     schedule's sends and receives (a receive that reduces adds on arrival),
 *                     then sem.signal(COMM, s) — s a semaphore the lowering keeps;
 *   a later kernel    whose operands touch the entry's bytes (it reads what the entry writes,
 *                     or writes what it reads or writes): sem.wait(DMA, s) on the stream's core,
 *                     then a barrier — every core goes on once the entry is done. Kernels that
 *                     touch none of it run while it is in flight.
 *
 * Schedules: ring order and algorithm as the flow engine's (lower_opts.net: the ring fitted to
 * the topology, lower_opts.tuner: the tuner's algorithm), else rank order and the ring. The
 * COMM queue runs one instruction at a time, so a rank's sends and receives go in one order
 * consistent with the schedule's dependencies: every send whose receives have completed, then
 * the next receive. Tags: the stream and the schedule's step (messages of one tag between two
 * cores are taken in send order, and a stream's entries come in the same order on every rank
 * of a group). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower_impl.h"

#if defined(__has_include)
#if __has_include("coll_sched.h")
#define LW_HAVE_SCHED 1
#include "coll_sched.h"
#include "coll_topo.h"
#include "coll_tune.h"
#endif
#endif

bool lw_is_comm(const nn_tensor *t)
{
    switch (t->op) {
    case NN_OP_ALL_REDUCE: case NN_OP_REDUCE_SCATTER: case NN_OP_ALL_GATHER:
    case NN_OP_BROADCAST: case NN_OP_REDUCE: case NN_OP_ALL_TO_ALL: case NN_OP_SEND:
    case NN_OP_RECV:
        return true;
    default:
        return false;
    }
}

/* Ranks in a collective node's group. */
static int lw_group_size(const nn_tensor *t) { return (int)t->ip[NN_COMM_IP_SIZE]; }

uint64_t lw_comm_out_bytes(const lw_ctx *w, int32_t i)
{
    const lw_item *it = &w->it[i];
    const nn_tensor *t = it->t;
    if (t->op == NN_OP_SEND)
        return 0;
    if (t->op == NN_OP_RECV)
        return nn_nbytes(t);
    if (lw_group_size(t) <= 1)
        return 0; /* a group of one: the value itself */
    const lw_item *src = &w->it[it->src[0]];
    const lw_item *root = src->root != LW_NONE ? &w->it[src->root] : src;
    bool alone = src->uses == 1 && src->root == it->src[0] && src->kind == LOWER_NODE_KERNEL;
    switch (t->op) {
    case NN_OP_ALL_REDUCE: /* in place on an accumulator, or on a value only it reads */
        if ((root->kind == LOWER_NODE_LEAF && t->region != NN_REGION_FORWARD) || alone)
            return 0;
        return nn_nbytes(t);
    case NN_OP_REDUCE_SCATTER:
        return alone ? 0 : nn_nbytes(t->src[0]);
    default:
        return nn_nbytes(t);
    }
}

/* This rank's position in the group of comm item i's entry, and the group's chips. */
static int lw_group(const lw_ctx *w, const lw_item *it, int *chips, int max)
{
    int ranks[256], n = nn_plan_group(w->plan, w->rank, it->e, ranks, 256);
    nn_plan_group_chips(w->plan, w->rank, it->e, chips, max);
    for (int k = 0; k < n && k < 256; k++)
        if (ranks[k] == w->rank)
            return k;
    return -1;
}

uint64_t lw_comm_part_offset(const lw_ctx *w, int32_t i)
{
    const lw_item *it = &w->it[i];
    if (it->t->op != NN_OP_REDUCE_SCATTER || lw_group_size(it->t) <= 1)
        return 0;
    int chips[256];
    int k = lw_group(w, it, chips, 256);
    return k < 0 ? 0 : (uint64_t)k * nn_nbytes(it->t);
}

/* ---- streams ---------------------------------------------------------------------------------- */

typedef enum lw_stream {
    LW_S_TP, LW_S_DP, LW_S_SEND_NEXT, LW_S_RECV_PREV, LW_S_SEND_PREV, LW_S_RECV_NEXT, LW_S_SP,
    LW_S_ZERO_GATHER, LW_S_ZERO_SCATTER, LW_S_PP, LW_S_COUNT
} lw_stream;

static lw_stream lw_coll_stream(const nn_plan_entry *e)
{
    switch (e->tag) {
    case NN_COMM_TP: return LW_S_TP;
    case NN_COMM_SP: return LW_S_SP;
    case NN_COMM_DP: return LW_S_DP;
    case NN_COMM_ZERO:
        return e->nodes[0]->op == NN_OP_ALL_GATHER ? LW_S_ZERO_GATHER : LW_S_ZERO_SCATTER;
    default: return LW_S_PP;
    }
}

static uint32_t lw_stream_core(const lw_ctx *w, lw_stream s) { return (uint32_t)s % w->lp->cores; }

/* ---- in flight -------------------------------------------------------------------------------- */

static np_status lw_flight_add(lw_ctx *w, uint64_t lo, uint64_t hi, uint32_t core,
                               unsigned sem, int32_t item, np_err *err)
{
    if (w->n_fl == w->cap_fl) {
        uint32_t cap = w->cap_fl ? 2 * w->cap_fl : 16;
        lw_flight *v = realloc(w->fl, cap * sizeof *v);
        if (!v)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory lowering communication");
        w->fl = v, w->cap_fl = cap;
    }
    w->fl[w->n_fl++] = (lw_flight){lo, hi, core, sem, item};
    return NP_OK;
}

np_status lw_comm_wait(lw_ctx *w, uint64_t lo, uint64_t hi, np_err *err)
{
    bool waited = false;
    isa_emit *e = kc_prog_emit(w->p);
    for (uint32_t f = 0; f < w->n_fl;) {
        lw_flight *x = &w->fl[f];
        if (x->hi <= lo || hi <= x->lo) {
            f++;
            continue;
        }
        if (isa_emit_core(e, x->core) != NP_OK ||
            ISA_EMIT(e, SEM_WAIT, isa_enum(ISA_UNIT_DMA), isa_sem(x->sem)) != NP_OK)
            return isa_emit_status(e, err);
        kc_prog_sem_free(w->p, x->core, x->sem);
        w->fl[f] = w->fl[--w->n_fl];
        waited = true;
    }
    return waited ? kc_barrier(w->p, err) : NP_OK;
}

/* ---- emitting -------------------------------------------------------------------------------- */

#ifdef LW_HAVE_SCHED

/* A copy of bytes from HBM src to HBM dst on the current core's DMA queue, as rows of at most
 * 2^16 bytes. */
static np_status lw_copy(lw_ctx *w, uint64_t dst, uint64_t src, uint64_t bytes)
{
    isa_emit *e = kc_prog_emit(w->p);
    const uint64_t row = 1u << 16;
    while (bytes) {
        uint64_t rows = bytes / row, n0 = rows ? row : bytes;
        if (rows > 65535)
            rows = 65535;
        if (!rows)
            rows = 1;
        ISA_EMIT(e, DMA_COPY, isa_hbm(0, (int64_t)dst), isa_hbm(0, (int64_t)src),
                 isa_enum(ISA_DTYPE_INT8), isa_imm((int64_t)n0), .n1 = isa_imm((int64_t)rows),
                 .dst_s1 = isa_imm((int64_t)n0), .src_s1 = isa_imm((int64_t)n0));
        dst += n0 * rows, src += n0 * rows, bytes -= n0 * rows;
    }
    return isa_emit_status(e, NULL);
}

#endif

/* The entry's items (its nodes at this instance): the lead and the ones after it. */
static int32_t lw_entry_items(const lw_ctx *w, int32_t lead)
{
    int32_t n = 1;
    while (lead + n < w->n && w->it[lead + n].e == w->it[lead].e &&
           w->it[lead + n].inst == w->it[lead].inst && !w->it[lead + n].lead)
        n++;
    return n;
}

#ifdef LW_HAVE_SCHED

static coll_op lw_coll_op(nn_op op, bool *ok)
{
    *ok = true;
    switch (op) {
    case NN_OP_ALL_REDUCE: return COLL_OP_ALL_REDUCE;
    case NN_OP_REDUCE_SCATTER: return COLL_OP_REDUCE_SCATTER;
    case NN_OP_ALL_GATHER: return COLL_OP_ALL_GATHER;
    default: *ok = false; return COLL_OP_ALL_REDUCE;
    }
}

/* One collective of one node (item i) over its group: X its buffer (in place). */
static np_status lw_collective(lw_ctx *w, int32_t i, uint32_t core, uint32_t tag0,
                               lower_comm *rec, np_err *err)
{
    char desc[256];
    lw_item *it = &w->it[i];
    const nn_tensor *t = it->t;
    bool ok;
    coll_op op = lw_coll_op(t->op, &ok);
    if (!ok)
        return np_err_set(err, NP_ERR_MISSING, "lower: %s (node '%s') is not lowered to comm.* "
                          "yet", lower_node_desc(t, desc, sizeof desc), t->name);
    int chips[256];
    int me = lw_group(w, it, chips, 256), p = lw_group_size(t);
    if (me < 0 || p > 256)
        return np_err_set(err, NP_ERR_INTERNAL, "lower: rank %d is not in the group of '%s'",
                          w->rank, t->name);
    const lw_item *src = &w->it[it->src[0]];
    uint64_t x = it->root == i ? it->addr : src->lay.addr; /* the schedule's buffer X */
    uint64_t bytes = op == COLL_OP_ALL_GATHER ? nn_nbytes(t)
                     : op == COLL_OP_REDUCE_SCATTER ? nn_nbytes(t->src[0]) : nn_nbytes(t);
    if (op != COLL_OP_ALL_REDUCE) { /* the parts along dim must be contiguous */
        const nn_tensor *whole = op == COLL_OP_ALL_GATHER ? t : t->src[0];
        int dim = (int)t->ip[NN_COMM_IP_DIM];
        for (int d = 0; d < dim; d++)
            if (whole->ne[d] != 1)
                return np_err_set(err, NP_ERR_MISSING, "lower: %s (node '%s') along dim %d of "
                                  "a tensor whose parts are not contiguous is not lowered yet",
                                  lower_node_desc(t, desc, sizeof desc), t->name, dim);
    }
    uint32_t group[256], order[256];
    for (int k = 0; k < p; k++)
        group[k] = (uint32_t)chips[k];
    coll_algo algo = COLL_ALGO_RING;
    uint32_t elem = (uint32_t)nn_dtype_size(t->dtype);
    if (w->o.tuner) {
        coll_tune_query q = {.op = op, .chips = group, .ranks = (uint32_t)p, .bytes = bytes,
                             .elem_bytes = elem};
        if (coll_tune(w->o.tuner, &q, &algo, NULL, err) != NP_OK)
            return err->status;
    }
    coll_sched_desc d = {.op = op, .algo = algo, .ranks = (uint32_t)p, .bytes = bytes,
                         .elem_bytes = elem};
    if (w->o.net) {
        if (algo == COLL_ALGO_HIER) {
            if (coll_topo_levels(w->o.net, group, (uint32_t)p, &d.n_levels, d.level_ranks, order,
                                 err) != NP_OK)
                return err->status;
        } else if (coll_topo_ring_order(w->o.net, group, (uint32_t)p, order, err) != NP_OK) {
            return err->status;
        }
        d.order = order;
    }
    coll_sched *s;
    if (coll_sched_create(&d, &s, err) != NP_OK)
        return err->status;
    isa_emit *e = kc_prog_emit(w->p);
    isa_emit_core(e, core);
    /* the copy in: an out-of-place all-reduce's whole input, an all-gather's own part, a
     * reduce-scatter's whole input */
    if (it->root == i) {
        uint64_t off = op == COLL_OP_ALL_GATHER ? (uint64_t)me * nn_nbytes(t->src[0]) : 0;
        unsigned sem;
        if (kc_prog_sem_alloc(w->p, core, &sem, err) != NP_OK ||
            lw_copy(w, x + off, src->lay.addr, nn_nbytes(t->src[0])) != NP_OK ||
            ISA_EMIT(e, SEM_SIGNAL, isa_enum(ISA_UNIT_DMA), isa_sem(sem)) != NP_OK ||
            ISA_EMIT(e, SEM_WAIT, isa_enum(ISA_UNIT_COMM), isa_sem(sem)) != NP_OK) {
            coll_sched_free(s);
            return isa_emit_status(e, err) != NP_OK ? err->status : err->status;
        }
        kc_prog_sem_free(w->p, core, sem);
    }
    /* the schedule of rank `me`: sends as their receives allow, then the next receive */
    uint32_t ports = coll_sched_ports(s), n_recv = coll_sched_recvs(s, (uint32_t)me);
    uint32_t *next = calloc(ports + 1, sizeof *next), *got = NULL;
    uint32_t n_send_all = 0;
    for (uint32_t pt = 0; pt < ports; pt++)
        n_send_all += coll_sched_sends(s, (uint32_t)me, pt);
    /* got[port][index]: receives completed that unblock that send */
    uint32_t *base = calloc(ports + 1, sizeof *base);
    if (!next || !base) {
        free(next);
        free(base);
        coll_sched_free(s);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory lowering a collective");
    }
    for (uint32_t pt = 0; pt < ports; pt++)
        base[pt + 1] = base[pt] + coll_sched_sends(s, (uint32_t)me, pt);
    got = calloc((size_t)n_send_all + 1, sizeof *got);
    isa_dtype dt = kc_isa_dtype(t->dtype);
    uint32_t r = 0;
    np_status st = got ? NP_OK : np_err_set(err, NP_ERR_NOMEM, "out of memory");
    while (st == NP_OK) {
        bool sent = false;
        for (uint32_t pt = 0; pt < ports; pt++) {
            while (next[pt] < coll_sched_sends(s, (uint32_t)me, pt)) {
                coll_xfer xs;
                coll_sched_send(s, (uint32_t)me, pt, next[pt], &xs);
                if (got[base[pt] + next[pt]] < xs.deps)
                    break;
                rec->bytes_sent += xs.bytes;
                if (xs.bytes)
                    ISA_EMIT(e, COMM_SEND, isa_peer(group[xs.peer], core),
                             isa_hbm(0, (int64_t)(x + xs.offset)), isa_imm((int64_t)xs.bytes),
                             isa_imm((int64_t)((tag0 + xs.step) & 0xffff)));
                next[pt]++;
                sent = true;
            }
        }
        if (r == n_recv) {
            if (!sent)
                break;
            continue;
        }
        coll_xfer xr;
        coll_sched_recv(s, (uint32_t)me, r++, &xr);
        if (xr.bytes)
            ISA_EMIT(e, COMM_RECV, isa_peer(group[xr.peer], core),
                     isa_hbm(0, (int64_t)(x + xr.offset)), isa_imm((int64_t)xr.bytes),
                     isa_imm((int64_t)((tag0 + xr.step) & 0xffff)),
                     .red = isa_enum(xr.reduce ? ISA_RED_ADD : ISA_RED_NONE),
                     .dtype = isa_enum(dt));
        for (uint32_t u = xr.unblock_lo; u < xr.unblock_hi; u++)
            got[base[xr.unblock_port] + u]++;
        st = isa_emit_status(e, err);
    }
    for (uint32_t pt = 0; st == NP_OK && pt < ports; pt++)
        if (next[pt] != coll_sched_sends(s, (uint32_t)me, pt))
            st = np_err_set(err, NP_ERR_INTERNAL, "lower: the schedule of '%s' leaves sends "
                            "waiting on rank %d", t->name, me);
    free(next);
    free(base);
    free(got);
    coll_sched_free(s);
    if (st == NP_OK)
        st = isa_emit_status(e, err);
    return st;
}

#endif

np_status lw_comm_emit(lw_ctx *w, int32_t i, np_err *err)
{
    char desc[256];
    const lw_item *it = &w->it[i];
    const nn_plan_entry *e = it->e;
    if (e->kind == NN_PLAN_COLLECTIVE && lw_group_size(it->t) <= 1)
        return NP_OK; /* a group of one: nothing to send */
    int32_t n = lw_entry_items(w, i);
    /* the bytes the entry touches, first waited for if something in flight touches them */
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int32_t k = i; k < i + n; k++) {
        const lw_item *x = &w->it[k];
        const lw_item *src = x->t->n_src ? &w->it[x->src[0]] : NULL;
        uint64_t a[2][2] = {{x->lay.addr, x->lay.addr + nn_nbytes(x->t)}, {0, 0}};
        if (x->root == k)
            a[0][0] = x->addr, a[0][1] = x->addr + lw_comm_out_bytes(w, k);
        if (src)
            a[1][0] = src->lay.addr, a[1][1] = src->lay.addr + nn_nbytes(src->t);
        for (int j = 0; j < 2; j++)
            if (a[j][1] > a[j][0]) {
                lo = a[j][0] < lo ? a[j][0] : lo;
                hi = a[j][1] > hi ? a[j][1] : hi;
            }
    }
    if (hi <= lo)
        return NP_OK;
    np_status st = lw_comm_wait(w, lo, hi, err);
    if (st == NP_OK)
        st = kc_barrier(w->p, err);
    if (st != NP_OK)
        return st;
    isa_emit *em = kc_prog_emit(w->p);
    uint32_t core;
    lower_comm *rec = &w->lp->comm[w->lp->n_comm++];
    rec->e = e;
    rec->mb = it->inst;
    char suffix[24];
    if (it->inst >= 0)
        snprintf(suffix, sizeof suffix, "$%d.mb%d", it->t->id, it->inst);
    else
        snprintf(suffix, sizeof suffix, "$%d", it->t->id);
    lw_symbol_name(it->t, suffix, rec->name, sizeof rec->name);
    if (e->kind == NN_PLAN_SEND || e->kind == NN_PLAN_RECV) {
        bool send = e->kind == NN_PLAN_SEND;
        int pp = w->plan->mesh.size[NN_MESH_PP];
        int target = ((w->cls->stage + e->peer) % pp + pp) % pp;
        bool next = target > w->cls->stage; /* the peer is a later stage */
        lw_stream mine = send ? (next ? LW_S_SEND_NEXT : LW_S_SEND_PREV)
                              : (next ? LW_S_RECV_NEXT : LW_S_RECV_PREV);
        lw_stream theirs = send ? (next ? LW_S_RECV_PREV : LW_S_RECV_NEXT)
                                : (next ? LW_S_SEND_PREV : LW_S_SEND_NEXT);
        core = lw_stream_core(w, mine);
        uint32_t peer_core = lw_stream_core(w, theirs);
        int peer = nn_plan_peer(w->plan, w->rank, e);
        if (target == w->cls->stage || peer < 0 || peer >= w->plan->mesh.n_ranks)
            return np_err_set(err, NP_ERR_INTERNAL, "lower: a %s of '%s' to itself",
                              send ? "send" : "recv", it->t->name);
        uint32_t chip = (uint32_t)w->plan->mesh.chip[peer];
        uint64_t addr = send ? w->it[it->src[0]].lay.addr : it->addr;
        uint64_t bytes = nn_nbytes(it->t);
        uint32_t tag = (uint32_t)(LW_S_COUNT * 4096 + (e->match & 0x0fff)) & 0xffff;
        rec->core = core;
        isa_emit_core(em, core);
        isa_emit_kernel_begin(em, rec->name);
        rec->bytes_sent = send ? bytes : 0;
        if (send)
            ISA_EMIT(em, COMM_SEND, isa_peer(chip, peer_core), isa_hbm(0, (int64_t)addr),
                     isa_imm((int64_t)bytes), isa_imm(tag));
        else
            ISA_EMIT(em, COMM_RECV, isa_peer(chip, peer_core), isa_hbm(0, (int64_t)addr),
                     isa_imm((int64_t)bytes), isa_imm(tag));
        if (isa_emit_status(em, err) != NP_OK)
            return err->status;
    } else {
        lw_stream s = lw_coll_stream(e);
        core = lw_stream_core(w, s);
        rec->core = core;
        isa_emit_core(em, core);
        isa_emit_kernel_begin(em, rec->name);
#ifdef LW_HAVE_SCHED
        for (int32_t k = i; k < i + n && st == NP_OK; k++)
            st = lw_collective(w, k, core, (uint32_t)s * 4096, rec, err);
        if (st != NP_OK)
            return st;
#else
        return np_err_set(err, NP_ERR_MISSING, "lower: %s (node '%s'): collectives need the "
                          "schedules of noc/coll_sched.h, which this build lacks",
                          lower_node_desc(it->t, desc, sizeof desc), it->t->name);
#endif
    }
    (void)desc;
    unsigned sem;
    if (kc_prog_sem_alloc(w->p, core, &sem, err) != NP_OK)
        return err->status;
    isa_emit_core(em, core);
    if (ISA_EMIT(em, SEM_SIGNAL, isa_enum(ISA_UNIT_COMM), isa_sem(sem)) != NP_OK ||
        isa_emit_kernel_end(em) != NP_OK)
        return isa_emit_status(em, err);
    return lw_flight_add(w, lo, hi, core, sem, i, err);
}
