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
 * the next receive. A schedule of two independent ports (biring: one direction each) runs its
 * second port on a core of its own when the chip has one to spare once every stream has its
 * core (the collective streams in stream order get one each while they last): never on
 * another stream's core, whose in-order COMM queue would hold it behind that stream's entries
 * (a tensor-parallel all-reduce's second direction waited a millisecond behind a
 * data-parallel bucket so). Tags: the stream and the schedule's step (messages of one tag between two
 * cores are taken in send order, and a stream's entries come in the same order on every rank
 * of a group). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower_impl.h"

#include "coll_sched.h"
#include "coll_topo.h"
#include "coll_tune.h"

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

/* Whether a collective may work in place on the value of item v, which only it reads: v is a
 * kernel's own output that nothing else reads, or, for an all-reduce (views), a reshape of
 * one that only the reshape reads — as a framework all-reduces a row-parallel matmul's output
 * in place through its reshape; a collective never copies what no one else reads. (A
 * reduce-scatter's part would lie at its rank's offset of the view's bytes, which the in-place
 * layout does not hold: not through a view.) */
static bool lw_comm_alone(const lw_ctx *w, int32_t v, bool views)
{
    const lw_item *x = &w->it[v];
    while (views && x->kind == LOWER_NODE_VIEW && x->uses == 1 && x->t->op == NN_OP_RESHAPE &&
           !nn_plan_node_is_offset_view(x->t) && nn_nbytes(x->t) == nn_nbytes(x->t->src[0])) {
        v = x->src[0];
        x = &w->it[v];
    }
    return x->uses == 1 && x->root == v && x->kind == LOWER_NODE_KERNEL && !x->t->is_output;
}

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
    bool alone = lw_comm_alone(w, it->src[0], t->op == NN_OP_ALL_REDUCE);
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

/* ---- streams --------------------------------------------------------------------------------- */

typedef enum lw_stream {
    LW_S_TP, LW_S_DP, LW_S_SEND_NEXT, LW_S_RECV_PREV, LW_S_SEND_PREV, LW_S_RECV_NEXT, LW_S_SP,
    LW_S_ZERO_GATHER, LW_S_ZERO_SCATTER, LW_S_PP, LW_S_COUNT
} lw_stream;

static lw_stream lw_coll_stream(const nn_plan_entry *e)
{
    switch (e->tag) {
    case NN_COMM_TP:
    case NN_COMM_PP_SG: return LW_S_TP; /* the tp group's stream, as the fast run's */
    case NN_COMM_SP: return LW_S_SP;
    case NN_COMM_DP: return LW_S_DP;
    case NN_COMM_ZERO:
        return e->nodes[0]->op == NN_OP_ALL_GATHER ? LW_S_ZERO_GATHER : LW_S_ZERO_SCATTER;
    default: return LW_S_PP;
    }
}

/* The stream of a send or recv entry of a rank of class c. */
static lw_stream lw_p2p_stream(const nn_plan *p, const nn_plan_class *c, const nn_plan_entry *e)
{
    int pp = p->mesh.size[NN_MESH_PP];
    bool next = ((c->stage + e->peer) % pp + pp) % pp > c->stage; /* a later stage */
    return e->kind == NN_PLAN_SEND ? (next ? LW_S_SEND_NEXT : LW_S_SEND_PREV)
                                   : (next ? LW_S_RECV_NEXT : LW_S_RECV_PREV);
}

/* The core of stream s: the streams the plan uses anywhere (every class: the same on every
 * rank, so a sender knows its receiver's core), numbered in the order of lw_stream, each on
 * the core of its number (mod cores) — a plan with one stream runs it on core 0, at the link
 * ports. */
static uint32_t lw_stream_core(lw_ctx *w, lw_stream s)
{
    if (!w->streams_known) {
        bool used[LW_S_COUNT] = {false};
        for (int c = 0; c < w->plan->n_classes; c++) {
            const nn_plan_class *cl = &w->plan->classes[c];
            for (int b = 0; b < cl->n_blocks; b++)
                for (int k = 0; k < cl->blocks[b].n_entries; k++) {
                    const nn_plan_entry *e = &cl->blocks[b].entries[k];
                    if (e->kind == NN_PLAN_COLLECTIVE && lw_group_size(e->nodes[0]) > 1)
                        used[lw_coll_stream(e)] = true;
                    else if (e->kind == NN_PLAN_SEND || e->kind == NN_PLAN_RECV)
                        used[lw_p2p_stream(w->plan, cl, e)] = true;
                }
        }
        uint32_t k = 0;
        for (int i = 0; i < LW_S_COUNT; i++)
            w->stream_core[i] = used[i] ? k++ % w->lp->cores : 0;
        for (int i = 0; i < LW_S_COUNT; i++) { /* the spare cores, one a collective stream */
            bool coll = i == LW_S_TP || i == LW_S_DP || i == LW_S_SP || i == LW_S_ZERO_GATHER ||
                        i == LW_S_ZERO_SCATTER || i == LW_S_PP;
            w->stream_port_core[i] = used[i] && coll && k < w->lp->cores ? k++ : UINT32_MAX;
        }
        w->streams_known = true;
    }
    return w->stream_core[s];
}

/* The two ends of send or recv entry e of this rank: its stream's core, the peer's chip and
 * the core of the peer's matching stream. */
static np_status lw_p2p_ends(lw_ctx *w, const nn_plan_entry *e, const char *name,
                             uint32_t *core, uint32_t *chip, uint32_t *peer_core, np_err *err)
{
    lw_stream mine = lw_p2p_stream(w->plan, w->cls, e);
    lw_stream theirs = mine == LW_S_SEND_NEXT   ? LW_S_RECV_PREV
                       : mine == LW_S_SEND_PREV ? LW_S_RECV_NEXT
                       : mine == LW_S_RECV_NEXT ? LW_S_SEND_PREV
                                                : LW_S_SEND_NEXT;
    *core = lw_stream_core(w, mine);
    *peer_core = lw_stream_core(w, theirs);
    int peer = nn_plan_peer(w->plan, w->rank, e);
    if (peer < 0 || peer >= w->plan->mesh.n_ranks || peer == w->rank)
        return np_err_set(err, NP_ERR_INTERNAL, "lower: a %s of '%s' to itself",
                          e->kind == NN_PLAN_SEND ? "send" : "recv", name);
    *chip = (uint32_t)w->plan->mesh.chip[peer];
    return NP_OK;
}

/* The entry's items (its nodes at this instance): the lead and the ones after it. */
static int32_t lw_entry_items(const lw_ctx *w, int32_t lead)
{
    int32_t n = 1;
    while (lead + n < w->n && w->it[lead + n].e == w->it[lead].e &&
           w->it[lead + n].inst == w->it[lead].inst && !w->it[lead + n].lead)
        n++;
    return n;
}

void lw_comm_buckets(lw_ctx *w)
{
    for (int32_t i = 0; i < w->n; i++) {
        lw_item *it = &w->it[i];
        if (it->kind != LOWER_NODE_COMM || !it->lead || !it->e || !nn_plan_entry_is_bucket(it->e))
            continue;
        int32_t n = lw_entry_items(w, i);
        bool ok = n == it->e->n_nodes;
        for (int32_t k = i; k < i + n && ok; k++) { /* the items: in place on their leaves */
            const lw_item *x = &w->it[k];
            int32_t r = w->it[x->src[0]].root; /* the accumulator (after its last update) */
            ok = r != LW_NONE && x->root == r && w->it[r].kind == LOWER_NODE_LEAF &&
                 w->it[r].bucket == LW_NONE;
        }
        if (!ok)
            continue;
        it->packed = true;
        for (int32_t k = i; k < i + n; k++)
            w->it[w->it[w->it[k].src[0]].root].bucket = i;
    }
}

/* ---- in flight ------------------------------------------------------------------------------- */

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
        uint32_t core = x->core;
        unsigned sem = x->sem;
        if (isa_emit_core(e, core) != NP_OK ||
            ISA_EMIT(e, SEM_WAIT, isa_enum(ISA_UNIT_DMA), isa_sem(sem)) != NP_OK)
            return isa_emit_status(e, err);
        kc_prog_sem_free(w->p, core, sem);
        for (uint32_t g = 0; g < w->n_fl;) /* the entry's other ranges: waited for too */
            if (w->fl[g].core == core && w->fl[g].sem == sem)
                w->fl[g] = w->fl[--w->n_fl];
            else
                g++;
        f = 0;
        waited = true;
    }
    return waited ? kc_barrier(w->p, err) : NP_OK;
}

/* ---- emitting -------------------------------------------------------------------------------- */

/* The cores a communication entry runs on, each opened (its kernel symbol begun) on first
 * use; lw_comm_emit closes each with a semaphore the kernels after it can wait on. */
#define LW_MAX_ENTRY_CORES 8
typedef struct lw_open {
    uint32_t core[LW_MAX_ENTRY_CORES];
    unsigned n;
    const char *name;
} lw_open;

static void lw_open_core(lw_ctx *w, lw_open *o, uint32_t core)
{
    isa_emit *e = kc_prog_emit(w->p);
    isa_emit_core(e, core);
    for (unsigned i = 0; i < o->n; i++)
        if (o->core[i] == core)
            return;
    if (o->n < LW_MAX_ENTRY_CORES) {
        o->core[o->n++] = core;
        isa_emit_kernel_begin(e, o->name);
    }
}

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
/* Whether the schedule's ports are independent on every rank's side: each receive unblocks
 * only sends of the port its message came on (biring: one direction per port). Then each
 * port can run on a COMM queue of its own. */
static bool lw_ports_independent(const coll_sched *s, uint32_t me)
{
    if (coll_sched_ports(s) < 2)
        return false;
    for (uint32_t r = 0; r < coll_sched_recvs(s, me); r++) {
        coll_xfer x;
        coll_sched_recv(s, me, r, &x);
        if (x.unblock_hi > x.unblock_lo && x.unblock_port != x.port)
            return false;
    }
    return true;
}

/* One collective of item i's node over its group on X (its buffer, in place: a copy in, if
 * any, was made before); a packed bucket's lead (bucket_bytes > 0) reduces the whole bucket,
 * its leaves from the lead's on. Its COMM instructions go on core (the stream's), port 1 of a
 * schedule of two independent ports on port_core when the stream has one (else UINT32_MAX). */
static np_status lw_collective(lw_ctx *w, int32_t i, uint32_t core, uint32_t port_core,
                               uint32_t tag0, lower_comm *rec, uint64_t bucket_bytes, lw_open *open,
                               np_err *err)
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
    if (bucket_bytes)
        bytes = bucket_bytes;
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
        if (algo == COLL_ALGO_NVLS) /* a switch's reductions are no chip's program: the ring */
            algo = COLL_ALGO_RING;
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
    uint32_t ports = coll_sched_ports(s), n_recv = coll_sched_recvs(s, (uint32_t)me);
    bool split = lw_ports_independent(s, (uint32_t)me) && ports == 2 && port_core != UINT32_MAX;
    uint32_t *next = calloc(ports + 1, sizeof *next), *base = calloc(ports + 1, sizeof *base);
    for (uint32_t pt = 0; next && base && pt < ports; pt++)
        base[pt + 1] = base[pt] + coll_sched_sends(s, (uint32_t)me, pt);
    uint32_t *got = next && base ? calloc((size_t)base[ports] + 1, sizeof *got) : NULL;
    np_status st = got ? NP_OK : np_err_set(err, NP_ERR_NOMEM, "out of memory");
    isa_dtype dt = kc_isa_dtype(t->dtype);
    /* the schedule of rank `me`: sends as their receives allow, then the next receive (on
     * one core, or each port's on its own when they are independent) */
    uint32_t r = 0;
    while (st == NP_OK) {
        bool sent = false;
        for (uint32_t pt = 0; pt < ports; pt++) {
            uint32_t c = split && pt ? port_core : core;
            while (next[pt] < coll_sched_sends(s, (uint32_t)me, pt)) {
                coll_xfer xs;
                coll_sched_send(s, (uint32_t)me, pt, next[pt], &xs);
                if (got[base[pt] + next[pt]] < xs.deps)
                    break;
                rec->bytes_sent += xs.bytes;
                if (xs.bytes) {
                    lw_open_core(w, open, c);
                    ISA_EMIT(e, COMM_SEND, isa_peer(group[xs.peer], c),
                             isa_hbm(0, (int64_t)(x + xs.offset)), isa_imm((int64_t)xs.bytes),
                             isa_imm((int64_t)((tag0 + xs.step) & 0xffff)));
                }
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
        uint32_t c = split && xr.port ? port_core : core;
        if (xr.bytes) {
            lw_open_core(w, open, c);
            ISA_EMIT(e, COMM_RECV, isa_peer(group[xr.peer], c),
                     isa_hbm(0, (int64_t)(x + xr.offset)), isa_imm((int64_t)xr.bytes),
                     isa_imm((int64_t)((tag0 + xr.step) & 0xffff)),
                     .red = isa_enum(xr.reduce ? ISA_RED_ADD : ISA_RED_NONE),
                     .dtype = isa_enum(dt));
        }
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

/* The copy into comm item k's own buffer before its collective: an out-of-place all-reduce's
 * or reduce-scatter's whole input, an all-gather's own part into its slot. */
static np_status lw_copy_in(lw_ctx *w, int32_t k, np_err *err)
{
    const lw_item *it = &w->it[k];
    if (it->root != k || it->t->op == NN_OP_RECV)
        return NP_OK;
    const lw_item *src = &w->it[it->src[0]];
    uint64_t off = 0;
    if (it->t->op == NN_OP_ALL_GATHER) {
        int chips[256];
        int me = lw_group(w, it, chips, 256);
        off = (uint64_t)(me < 0 ? 0 : me) * nn_nbytes(src->t);
    }
    if (lw_copy(w, it->addr + off, src->lay.addr, nn_nbytes(src->t)) != NP_OK)
        return isa_emit_status(kc_prog_emit(w->p), err);
    return NP_OK;
}

/* Parts along dim of an all-gather or reduce-scatter are contiguous when every dim before it
 * is 1. */
static np_status lw_check_parts(const lw_item *it, np_err *err)
{
    char desc[256];
    const nn_tensor *t = it->t;
    if (t->op != NN_OP_ALL_GATHER && t->op != NN_OP_REDUCE_SCATTER)
        return NP_OK;
    const nn_tensor *whole = t->op == NN_OP_ALL_GATHER ? t : t->src[0];
    int dim = (int)t->ip[NN_COMM_IP_DIM];
    for (int d = 0; d < dim; d++)
        if (whole->ne[d] != 1)
            return np_err_set(err, NP_ERR_MISSING, "lower: %s (node '%s') along dim %d of a "
                              "tensor whose parts are not contiguous is not lowered yet",
                              lower_node_desc(t, desc, sizeof desc), t->name, dim);
    return NP_OK;
}

static np_status lw_comm_entry(lw_ctx *w, int32_t i, int32_t n, const uint64_t (*rg)[2],
                               uint32_t n_rg, np_err *err);

np_status lw_comm_emit(lw_ctx *w, int32_t i, np_err *err)
{
    const lw_item *it = &w->it[i];
    const nn_plan_entry *e = it->e;
    if (e->kind == NN_PLAN_COLLECTIVE && lw_group_size(it->t) <= 1)
        return NP_OK; /* a group of one: nothing to send */
    int32_t n = lw_entry_items(w, i);
    /* the bytes the entry touches, each item's own (not their hull: a bucket's buffers lie
     * apart, and a kernel between them must not wait for it), first waited for if something
     * in flight touches them */
    uint64_t (*rg)[2] = malloc((size_t)2 * (size_t)n * sizeof *rg);
    if (!rg)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory lowering communication");
    uint32_t n_rg = 0;
    np_status st = NP_OK;
    for (int32_t k = i; k < i + n && st == NP_OK; k++) {
        const lw_item *x = &w->it[k];
        const lw_item *src = x->t->n_src ? &w->it[x->src[0]] : NULL;
        uint64_t a[2][2] = {{x->lay.addr, x->lay.addr + nn_nbytes(x->t)}, {0, 0}};
        if (x->root == k)
            a[0][0] = x->addr, a[0][1] = x->addr + lw_comm_out_bytes(w, k);
        if (src)
            a[1][0] = src->lay.addr, a[1][1] = src->lay.addr + nn_nbytes(src->t);
        for (int j = 0; j < 2; j++) {
            if (a[j][1] <= a[j][0])
                continue;
            if (n_rg && a[j][0] <= rg[n_rg - 1][1] && a[j][1] >= rg[n_rg - 1][0]) {
                rg[n_rg - 1][0] = a[j][0] < rg[n_rg - 1][0] ? a[j][0] : rg[n_rg - 1][0];
                rg[n_rg - 1][1] = a[j][1] > rg[n_rg - 1][1] ? a[j][1] : rg[n_rg - 1][1];
            } else {
                rg[n_rg][0] = a[j][0], rg[n_rg][1] = a[j][1];
                n_rg++;
            }
        }
        st = lw_check_parts(x, err);
    }
    for (uint32_t r = 0; r < n_rg && st == NP_OK; r++)
        st = lw_comm_wait(w, rg[r][0], rg[r][1], err);
    if (st == NP_OK && n_rg)
        st = kc_barrier(w->p, err);
    if (st != NP_OK || !n_rg) {
        free(rg);
        return st;
    }
    st = lw_comm_entry(w, i, n, rg, n_rg, err);
    free(rg);
    return st;
}

/* Comm entry i (n items touching the n_rg byte ranges rg) on its cores, once what it waits for
 * is done: each core it runs on signals a semaphore at its end, which a later kernel touching
 * one of the ranges waits for. */
static np_status lw_comm_entry(lw_ctx *w, int32_t i, int32_t n, const uint64_t (*rg)[2],
                               uint32_t n_rg, np_err *err)
{
    const lw_item *it = &w->it[i];
    const nn_plan_entry *e = it->e;
    np_status st = NP_OK;
    isa_emit *em = kc_prog_emit(w->p);
    lower_comm *rec = &w->lp->comm[w->lp->n_comm++];
    rec->e = e;
    rec->mb = it->inst;
    char suffix[24];
    if (it->inst >= 0)
        snprintf(suffix, sizeof suffix, "$%d.mb%d", it->t->id, it->inst);
    else
        snprintf(suffix, sizeof suffix, "$%d", it->t->id);
    lw_symbol_name(it->t, suffix, rec->name, sizeof rec->name);
    lw_open open = {.name = rec->name};
    if (e->kind == NN_PLAN_SEND || e->kind == NN_PLAN_RECV) {
        bool send = e->kind == NN_PLAN_SEND;
        uint32_t core, chip, peer_core;
        if (lw_p2p_ends(w, e, it->t->name, &core, &chip, &peer_core, err) != NP_OK)
            return err->status;
        uint64_t addr = send ? w->it[it->src[0]].lay.addr : it->addr;
        uint64_t bytes = nn_nbytes(it->t);
        uint32_t tag = (uint32_t)(LW_S_COUNT * 4096 + (e->match & 0x0fff)) & 0xffff;
        rec->core = core;
        lw_open_core(w, &open, core);
        /* a blocking receive has sent its clear-to-send (lw_comm_cts) */
        rec->bytes_sent = send ? bytes : it->call ? NN_PLAN_CTS_BYTES : 0;
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
        uint32_t core = lw_stream_core(w, s);
        rec->core = core;
        /* out-of-place collectives copy their input first, then every core waits for it */
        bool copy = false;
        for (int32_t k = i; k < i + n; k++)
            copy = copy || (w->it[k].root == k && w->it[k].t->op != NN_OP_RECV);
        if (copy) {
            lw_open_core(w, &open, core);
            for (int32_t k = i; k < i + n && st == NP_OK; k++)
                st = lw_copy_in(w, k, err);
            if (st == NP_OK)
                st = kc_barrier(w->p, err);
        }
        if (st == NP_OK && it->packed) {
            uint64_t bytes = 0;
            for (int32_t k = i; k < i + n; k++)
                bytes += nn_nbytes(w->it[k].t);
            st = lw_collective(w, i, core, w->stream_port_core[s], (uint32_t)s * 4096, rec, bytes, &open, err);
        }
        for (int32_t k = i; k < i + n && st == NP_OK && !it->packed; k++)
            st = lw_collective(w, k, core, w->stream_port_core[s], (uint32_t)s * 4096, rec, 0, &open, err);
        if (st != NP_OK)
            return st;
    }
    for (unsigned c = 0; c < open.n; c++) { /* each core it ran on signals its end */
        unsigned sem;
        if (kc_prog_sem_alloc(w->p, open.core[c], &sem, err) != NP_OK)
            return err->status;
        isa_emit_core(em, open.core[c]);
        if (ISA_EMIT(em, SEM_SIGNAL, isa_enum(ISA_UNIT_COMM), isa_sem(sem)) != NP_OK ||
            isa_emit_kernel_end(em) != NP_OK)
            return isa_emit_status(em, err);
        for (uint32_t r = 0; r < n_rg; r++)
            if (lw_flight_add(w, rg[r][0], rg[r][1], open.core[c], sem, i, err) != NP_OK)
                return err->status;
    }
    return NP_OK;
}

np_status lw_comm_cts(lw_ctx *w, int32_t i, np_err *err)
{
    int32_t call = w->it[i].call, end = i;
    while (end < w->n && w->it[end].call == call)
        end++;
    isa_emit *em = kc_prog_emit(w->p);
    if (w->cts_addr == UINT64_MAX &&
        kc_prog_bss(w->p, "p2p_clear_to_send", NN_PLAN_CTS_BYTES, &w->cts_addr, err) != NP_OK)
        return err->status;
    if (kc_barrier(w->p, err) != NP_OK) /* posted once the kernels before the call are done */
        return err->status;
    for (int pass = 0; pass < 2; pass++) /* the receives' clear-to-sends, then the sends' waits */
        for (int32_t k = i; k < end; k++) {
            const lw_item *it = &w->it[k];
            const nn_plan_entry *e = it->e;
            if (!it->lead || !e || e->kind != (pass ? NN_PLAN_SEND : NN_PLAN_RECV))
                continue;
            uint32_t core, chip, peer_core;
            if (lw_p2p_ends(w, e, it->t->name, &core, &chip, &peer_core, err) != NP_OK)
                return err->status;
            char name[64], suffix[32];
            snprintf(suffix, sizeof suffix, "$%d.mb%d$cts", it->t->id, it->inst);
            lw_symbol_name(it->t, suffix, name, sizeof name);
            uint32_t tag = (uint32_t)((LW_S_COUNT + 1) * 4096 + (e->match & 0x0fff)) & 0xffff;
            isa_emit_core(em, core);
            isa_emit_kernel_begin(em, name);
            if (pass == 0)
                ISA_EMIT(em, COMM_SEND, isa_peer(chip, peer_core), isa_hbm(0, (int64_t)w->cts_addr),
                         isa_imm(NN_PLAN_CTS_BYTES), isa_imm(tag));
            else
                ISA_EMIT(em, COMM_RECV, isa_peer(chip, peer_core), isa_hbm(0, (int64_t)w->cts_addr),
                         isa_imm(NN_PLAN_CTS_BYTES), isa_imm(tag));
            if (isa_emit_kernel_end(em) != NP_OK || isa_emit_status(em, err) != NP_OK)
                return isa_emit_status(em, err);
        }
    return NP_OK;
}
