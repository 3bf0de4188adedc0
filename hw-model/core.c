/* core.c — the timing-mode core: front end, unit queues, semaphores, deadlock detection
 * (state machines drawn in core.h; costs in core_cost.c; HBM sharing in hbm.c).
 *
 * Outstanding DMA requests. A queue starts its entries in program order; the entries from
 * the head that have started (n_started) stay in the ring until they retire, in order, so
 * they keep holding queue slots. The MXU, VPU and COMM queues run one at a time; the DMA
 * queue keeps up to core.dma_outstanding dma.copy entries in flight (n_inflight; at most
 * CORE_QUEUE_DEPTH since each holds its entry). Each streams through the shared port and HBM
 * pools as before, so they may complete out of order; a completed entry is marked done and
 * retires once every entry before it has. Anything else in the DMA queue (sem.wait,
 * sem.signal) starts only when nothing before it is left (n_started == 0): a signal after
 * copies therefore means "these copies have landed", and a fence (every queue empty) waits
 * for every copy in flight.
 *
 *   entry:  QUEUED --q_start--> IN FLIGHT --q_complete_ev--> DONE --q_retire (in order)-->
 *
 * Busy and stall of a queue are accounted over time, not per instruction (q_account): while
 * at least one entry is in flight, the unit is busy until the latest "alone" end
 * (t_ideal_ps) of the entries in flight and stalled after it (they wait on contention). With
 * one entry in flight at a time this is busy = alone time, stall = the rest, as before. */
#include "core.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "core_cost.h"
#include "core_func.h"
#include "evq.h"
#include "hbm.h"
#include "mesh.h"

typedef enum fe_state { FE_RUN, FE_WAIT_QUEUE, FE_FENCE, FE_BARRIER, FE_HALTED, FE_DONE } fe_state;
typedef enum q_state { Q_IDLE, Q_BUSY, Q_WAIT_SEM } q_state;

typedef struct q_entry {
    isa_insn in;           /* resolved */
    uint32_t pc;
    uint64_t mxu_k, mxu_n; /* the tile of the last mxu.load dispatched before it */
    bool first;            /* the innermost loop was on its first iteration (mode=first) */
    bool done;             /* started and completed; retires when the entries before it have */
    uint64_t seq;          /* dispatch order on its core (the scoreboard's "older") */
    core_range r[CORE_MAX_RANGES]; /* its operands' footprints (core_ranges) */
    unsigned nr;
    unsigned parts;        /* in flight: parts still running (compute time, scratchpad-port
                              stream, HBM stream) */
    uint64_t t_ideal_ps;   /* in flight: when it would end with the ports and HBM to itself */
} q_entry;

typedef struct core_queue {
    q_entry ring[CORE_QUEUE_DEPTH];
    unsigned head, count;
    unsigned n_started;  /* entries from the head that have started (in flight or done) */
    unsigned n_inflight; /* of those, not yet completed */
    q_state state;       /* BUSY while n_inflight > 0 */
    bool sb_wait;        /* the next entry to start waits for an older one (scoreboard) */
    uint64_t sb_from_ps; /* when that wait began */
    uint64_t t_wait_ps;  /* WAIT_SEM: when the wait began */
    uint64_t t_acct_ps;  /* busy/stall are accounted up to here (q_account) */
    uint64_t busy_ps, stall_ps, insns, bytes;
} core_queue;

typedef struct loop_frame {
    uint32_t body;      /* pc of the first body instruction */
    uint64_t remaining; /* iterations still to run after the current one */
    uint64_t count;     /* iterations in all */
    uint8_t reg[3];
    int64_t step[3], saved[3];
} loop_frame;

typedef struct chip_sim chip_sim;

typedef struct core_model {
    chip_sim *chip;
    uint32_t id;
    uint32_t index; /* position in the program's cores */
    const isa_core_text *text;
    int64_t regs[ISA_N_REGS];
    loop_frame loops[ISA_LOOP_DEPTH];
    unsigned depth;
    uint32_t pc;
    fe_state fe;
    isa_unit fe_wait_q;     /* FE_WAIT_QUEUE: the full queue */
    uint32_t fe_wait_pc;    /* the instruction the front end stalls on */
    uint64_t fe_stall_from; /* when the current front-end stall began */
    uint64_t fe_busy_ps, fe_stall_ps, fe_insns;
    uint64_t barrier_id;
    core_queue q[ISA_N_QUEUES];
    uint64_t sem[ISA_N_SEMS];
    uint64_t mxu_k, mxu_n; /* the last mxu.load's tile; 0 before any */
    uint64_t seq_next;     /* the next dispatch's q_entry.seq */
    uint64_t dma_decode_free_ps; /* the DMA descriptor processor is free from then */
    hbm *ports;            /* the scratchpad's ports: a bandwidth pool the units share */
    hbm *acc_port;         /* the accumulator SRAM's port (mxu.mm, mxu.drain); NULL when
                              core.acc_port_bytes_per_cycle is 0 (the array paces itself) */
    uint64_t t_done_ps;
    uint64_t *k_first, *k_last; /* per kernel: first dispatch, last retire (ps) */
    bool *k_seen;
    int32_t *kernel_of;        /* per pc: kernel index or -1 */
    uint32_t comm_msg;         /* COMM head in flight: the message a send sent, or the one a
                                  recv waits for (UINT32_MAX: no matching send yet) */
} core_model;

/* A comm.send's message: one mesh packet from the sender's router to the receiver's. */
typedef struct comm_msg {
    uint32_t src_idx, dst_idx; /* sender's and receiver's core index */
    uint64_t tag, bytes;
    unsigned slot;             /* the send's slot in the sender's COMM ring */
    bool arrived, consumed;    /* the tail reached the receiver; a recv took it */
    uint8_t *data;             /* functional mode: the bytes, read when the send started */
} comm_msg;

struct chip_sim {
    const arch_config *cfg;
    const isa_program *prog;
    evq *q;
    hbm *mem;
    core_func *func; /* functional mode: the memories; NULL in timing mode */
    clk_domain clk;
    core_model *cores;
    uint32_t n_cores;
    uint32_t barrier_arrived;
    mesh *noc;         /* the on-chip mesh for comm.*; NULL when the program has none */
    clk_domain noc_clk;
    comm_msg *msgs;    /* every message sent, by id (the mesh packet's tag) */
    uint32_t n_msgs, cap_msgs;
    np_err err; /* first fault, from inside an event */
    uint64_t hbm_rd, hbm_wr, spad_rd, spad_wr, acc_rd, acc_wr;
};

/* ---- helpers ---------------------------------------------------------------------------------- */

static uint64_t now_ps(const core_model *c) { return evq_now(c->chip->q); }

static uint64_t after_cycles(const core_model *c, uint64_t cycles)
{
    const clk_domain *d = &c->chip->clk;
    return clk_cycles_to_ps(d, clk_ps_to_cycles(d, now_ps(c)) + cycles);
}

static void chip_fail(chip_sim *s)
{
    evq_stop(s->q);
}

static void insn_text(const chip_sim *s, const isa_insn *in, char *buf, size_t n)
{
    isa_format(in, s->prog->names, s->prog->names_len, buf, n);
}

static void fe_schedule(core_model *c, uint64_t t_ps);
static void q_start(core_model *c, isa_unit u);

/* ---- kernels ---------------------------------------------------------------------------------- */

static void kernel_dispatch(core_model *c, uint32_t pc)
{
    int32_t k = c->kernel_of[pc];
    if (k < 0)
        return;
    if (!c->k_seen[k]) {
        c->k_seen[k] = true;
        c->k_first[k] = now_ps(c);
    }
    if (c->k_last[k] < now_ps(c))
        c->k_last[k] = now_ps(c);
}

static void kernel_retire(core_model *c, uint32_t pc)
{
    int32_t k = c->kernel_of[pc];
    if (k >= 0 && c->k_last[k] < now_ps(c))
        c->k_last[k] = now_ps(c);
}

/* ---- queues ----------------------------------------------------------------------------------- */

static bool queues_empty(const core_model *c)
{
    for (unsigned u = 0; u < ISA_N_QUEUES; u++)
        if (c->q[u].count)
            return false;
    return true;
}

static void core_check_done(core_model *c)
{
    if (c->fe == FE_HALTED && queues_empty(c)) {
        c->fe = FE_DONE;
        c->t_done_ps = now_ps(c);
    }
}

/* The front end waited on something a retirement may have released. */
static void fe_wake(core_model *c, isa_unit u)
{
    if ((c->fe == FE_WAIT_QUEUE && c->fe_wait_q == u) || (c->fe == FE_FENCE && queues_empty(c))) {
        c->fe_stall_ps += now_ps(c) - c->fe_stall_from;
        c->fe = FE_RUN;
        fe_schedule(c, now_ps(c));
    }
}

/* Entries queue u may have in flight at once. */
static unsigned q_limit(const core_model *c, isa_unit u)
{
    return u == ISA_UNIT_DMA ? (unsigned)c->chip->cfg->core.dma_outstanding : 1;
}

/* Accounts queue q's busy and stall time up to now; call before its in-flight set changes.
 * While entries are in flight the unit is busy until the latest of their alone ends and
 * stalled (on port or HBM contention) after it. */
static void q_account(core_model *c, core_queue *q)
{
    uint64_t now = now_ps(c);
    if (q->n_inflight) {
        uint64_t ideal = 0;
        for (unsigned i = 0; i < q->n_started; i++) {
            const q_entry *e = &q->ring[(q->head + i) % CORE_QUEUE_DEPTH];
            if (!e->done && e->t_ideal_ps > ideal)
                ideal = e->t_ideal_ps;
        }
        uint64_t b = ideal < now ? ideal : now;
        if (b < q->t_acct_ps)
            b = q->t_acct_ps;
        q->busy_ps += b - q->t_acct_ps;
        q->stall_ps += now - b;
    }
    q->t_acct_ps = now;
}

/* ---- the scoreboard ----------------------------------------------------------------------------
 * An entry may start only when no older entry of its core (any queue), not yet completed,
 * has an operand overlapping one of its own with at least one of the two writing: read after
 * write, write after read, write after write (core.scoreboard; core_ranges_overlap). Entries
 * of one queue are in seq order, so each queue is scanned from its head up to the first entry
 * not older than e. Completed entries still waiting to retire (DMA) no longer block. */
static bool sb_conflict(const q_entry *e, const q_entry *o, unsigned *ei, unsigned *oi)
{
    for (unsigned i = 0; i < e->nr; i++)
        for (unsigned j = 0; j < o->nr; j++)
            if ((e->r[i].write || o->r[j].write) && core_ranges_overlap(&e->r[i], &o->r[j])) {
                *ei = i, *oi = j;
                return true;
            }
    return false;
}

/* The older entry e must wait for (its unit in *bu, the overlapping operands' indices in *ei
 * and *oi), or NULL. */
static const q_entry *sb_blocker(const core_model *c, const q_entry *e, isa_unit *bu,
                                 unsigned *ei, unsigned *oi)
{
    if (!c->chip->cfg->core.scoreboard || !e->nr)
        return NULL;
    for (unsigned u = 0; u < ISA_N_QUEUES; u++) {
        const core_queue *q = &c->q[u];
        for (unsigned i = 0; i < q->count; i++) {
            const q_entry *o = &q->ring[(q->head + i) % CORE_QUEUE_DEPTH];
            if (o->seq >= e->seq)
                break;
            if (i < q->n_started && o->done)
                continue;
            if (sb_conflict(e, o, ei, oi)) {
                *bu = (isa_unit)u;
                return o;
            }
        }
    }
    return NULL;
}

/* An entry completed: queues waiting on the scoreboard look again. */
static void sb_wake(core_model *c)
{
    for (unsigned u = 0; u < ISA_N_QUEUES; u++)
        if (c->q[u].sb_wait)
            q_start(c, (isa_unit)u);
}

/* Head of queue u retires now (it has started and, unless it took no time, completed). */
static void q_retire(core_model *c, isa_unit u)
{
    core_queue *q = &c->q[u];
    q_entry *e = &q->ring[q->head];
    kernel_retire(c, e->pc);
    q->insns++;
    q->head = (q->head + 1) % CORE_QUEUE_DEPTH;
    q->count--;
    if (q->n_started)
        q->n_started--;
    core_check_done(c);
    fe_wake(c, u);
    q_start(c, u);
}

/* arg: the queue in the low byte, the ring slot of the entry above it. */
static uint64_t q_arg(isa_unit u, unsigned slot) { return (uint64_t)u | ((uint64_t)slot << 8); }

static void q_complete_ev(evq *eq, void *ctx, uint64_t arg)
{
    (void)eq;
    core_model *c = ctx;
    isa_unit u = (isa_unit)(arg & 0xff);
    core_queue *q = &c->q[u];
    q_entry *e = &q->ring[arg >> 8];
    q_account(c, q);
    e->done = true;
    kernel_retire(c, e->pc);
    if (--q->n_inflight == 0)
        q->state = Q_IDLE;
    /* Retire the completed entries at the head, in order; q_retire starts what may start. */
    bool retired = false;
    while (q->n_started && q->ring[q->head].done) {
        q->ring[q->head].done = false;
        retired = true;
        q_retire(c, u);
    }
    if (!retired)
        q_start(c, u); /* an outstanding slot is free */
    sb_wake(c);
}

/* One part of the entry in flight named by arg finished; the last one completes it at the
 * next core clock edge. */
static void q_part_done(void *ctx, uint64_t arg)
{
    core_model *c = ctx;
    if (--c->q[arg & 0xff].ring[arg >> 8].parts)
        return;
    uint64_t t = clk_edge_at_or_after(&c->chip->clk, now_ps(c));
    if (evq_schedule_at(c->chip->q, t, q_complete_ev, c, arg, NULL, &c->chip->err) != NP_OK)
        chip_fail(c->chip);
}

static void q_timer_ev(evq *eq, void *ctx, uint64_t arg)
{
    (void)eq;
    q_part_done(ctx, arg);
}

static void sem_arrive_ev(evq *eq, void *ctx, uint64_t arg)
{
    (void)eq;
    core_model *c = ctx;
    c->sem[arg & 0xff] += arg >> 8;
    for (unsigned u = 0; u < ISA_N_QUEUES; u++)
        if (c->q[u].state == Q_WAIT_SEM) {
            c->q[u].stall_ps += now_ps(c) - c->q[u].t_wait_ps;
            c->q[u].state = Q_IDLE;
            q_start(c, (isa_unit)u);
        }
}

static void count_traffic(core_model *c, core_queue *q, const core_range *r, unsigned n)
{
    chip_sim *s = c->chip;
    for (unsigned i = 0; i < n; i++) {
        q->bytes += r[i].bytes;
        uint64_t *ctr = r[i].space == ISA_SPACE_HBM    ? (r[i].write ? &s->hbm_wr : &s->hbm_rd)
                        : r[i].space == ISA_SPACE_ACC ? (r[i].write ? &s->acc_wr : &s->acc_rd)
                                                      : (r[i].write ? &s->spad_wr : &s->spad_rd);
        *ctr += r[i].bytes;
    }
}

/* ---- COMM: send/recv over the on-chip mesh -------------------------------------------------- */

/* Index of the program's core with id `id`, or UINT32_MAX. */
static uint32_t core_index_of(const chip_sim *s, uint64_t id)
{
    for (uint32_t i = 0; i < s->n_cores; i++)
        if (s->cores[i].id == id)
            return i;
    return UINT32_MAX;
}

/* Completes COMM entry `slot` of core c at t_ps (an event, so that nothing re-enters the mesh
 * from inside its delivery callback). */
static void comm_complete_at(core_model *c, unsigned slot, uint64_t t_ps)
{
    if (evq_schedule_at(c->chip->q, t_ps, q_timer_ev, c, q_arg(ISA_UNIT_COMM, slot), NULL,
                        &c->chip->err) != NP_OK)
        chip_fail(c->chip);
}

/* The first message from core index src to core index dst with tag that no recv has taken
 * (arrived or not: messages of one pair and tag are taken in the order they were sent). */
static uint32_t comm_find(const chip_sim *s, uint32_t src, uint32_t dst, uint64_t tag)
{
    for (uint32_t i = 0; i < s->n_msgs; i++) {
        const comm_msg *m = &s->msgs[i];
        if (!m->consumed && m->src_idx == src && m->dst_idx == dst && m->tag == tag)
            return i;
    }
    return UINT32_MAX;
}

/* Recv entry `slot` of core c takes arrived message id now: stores (or reduces) the bytes and
 * completes after the reduction's vector time. */
static void comm_take(core_model *c, unsigned slot, uint32_t id)
{
    chip_sim *s = c->chip;
    comm_msg *m = &s->msgs[id];
    q_entry *e = &c->q[ISA_UNIT_COMM].ring[slot];
    const isa_args_COMM_RECV *a = &e->in.COMM_RECV;
    if ((uint64_t)a->bytes.val != m->bytes) {
        char text[256];
        insn_text(s, &e->in, text, sizeof text);
        np_err_set(&s->err, NP_ERR_SIM_FAULT, "core %" PRIu32 " comm pc %" PRIu32 " `%s`: the "
                   "message from core %" PRIu32 " tag %llu has %llu bytes, the recv expects %llu",
                   c->id, e->pc, text, s->cores[m->src_idx].id, (unsigned long long)m->tag,
                   (unsigned long long)m->bytes, (unsigned long long)a->bytes.val);
        goto fail;
    }
    m->consumed = true;
    c->comm_msg = id;
    q_account(c, &c->q[ISA_UNIT_COMM]); /* the wait for the message so far was a stall */
    isa_red red = (isa_red)a->red.val;
    isa_dtype dt = (isa_dtype)a->dtype.val;
    uint64_t cyc = 0;
    if (red != ISA_RED_NONE) {
        uint64_t elems = m->bytes / isa_dtype_size[dt];
        uint64_t per = (uint64_t)s->cfg->core.vector_lanes * (uint64_t)s->cfg->core.vector_ops_per_lane;
        cyc = per ? (elems + per - 1) / per : elems;
    }
    if (s->func && m->bytes) {
        isa_space sp = (isa_space)a->dst.space;
        uint64_t addr = (uint64_t)a->dst.val;
        if (red == ISA_RED_NONE) {
            if (core_func_mem_write(s->func, c->index, sp, addr, m->data, m->bytes, &s->err) != NP_OK)
                goto fail;
        } else {
            uint8_t *cur = malloc(m->bytes);
            if (!cur) {
                np_err_set(&s->err, NP_ERR_NOMEM, "out of memory reducing a message");
                goto fail;
            }
            np_status st = core_func_mem_read(s->func, c->index, sp, addr, cur, m->bytes, &s->err);
            size_t es = isa_dtype_size[dt];
            for (uint64_t i = 0; st == NP_OK && i + es <= m->bytes; i += es) {
                double x = core_elem_get(cur + i, dt), y = core_elem_get(m->data + i, dt);
                double v = red == ISA_RED_ADD ? x + y : red == ISA_RED_MAX ? (x > y ? x : y)
                                                                            : (x < y ? x : y);
                core_elem_put(cur + i, dt, v);
            }
            if (st == NP_OK)
                st = core_func_mem_write(s->func, c->index, sp, addr, cur, m->bytes, &s->err);
            free(cur);
            if (st != NP_OK)
                goto fail;
        }
    }
    free(m->data);
    m->data = NULL;
    uint64_t t = cyc ? after_cycles(c, cyc) : now_ps(c);
    e->t_ideal_ps = t; /* busy while reducing; the wait for the message was a stall */
    comm_complete_at(c, slot, t);
    return;
fail:
    chip_fail(s);
}

/* The mesh delivered message p->tag: the send completes, and the receiver takes it if its
 * COMM head is the recv waiting for it (else it waits in the receiver's mailbox). */
static void comm_deliver(void *ctx, const mesh_packet *p)
{
    chip_sim *s = ctx;
    uint32_t id = (uint32_t)p->tag;
    comm_msg *m = &s->msgs[id];
    m->arrived = true;
    core_model *snd = &s->cores[m->src_idx], *rcv = &s->cores[m->dst_idx];
    comm_complete_at(snd, m->slot, evq_now(s->q));
    core_queue *q = &rcv->q[ISA_UNIT_COMM];
    if (q->n_inflight && rcv->comm_msg == UINT32_MAX) {
        const q_entry *e = &q->ring[q->head];
        if (e->in.op == ISA_OP_COMM_RECV &&
            comm_find(s, core_index_of(s, (uint64_t)e->in.COMM_RECV.peer.core), rcv->index,
                      (uint64_t)e->in.COMM_RECV.tag.val) == id)
            comm_take(rcv, q->head, id);
    }
}

/* Starts COMM entry `slot` (the head; the COMM queue runs one at a time). */
static void comm_start(core_model *c, core_queue *q, unsigned slot)
{
    chip_sim *s = c->chip;
    q_entry *e = &q->ring[slot];
    const isa_insn *in = &e->in;
    bool send = in->op == ISA_OP_COMM_SEND;
    const isa_opnd *peer = send ? &in->COMM_SEND.peer : &in->COMM_RECV.peer;
    const isa_opnd *mem = send ? &in->COMM_SEND.src : &in->COMM_RECV.dst;
    uint64_t bytes = (uint64_t)(send ? in->COMM_SEND.bytes.val : in->COMM_RECV.bytes.val);
    uint64_t tag = (uint64_t)(send ? in->COMM_SEND.tag.val : in->COMM_RECV.tag.val);
    q_account(c, q);
    q->state = Q_BUSY;
    q->n_started++;
    q->n_inflight++;
    e->done = false;
    e->parts = 1;
    e->t_ideal_ps = now_ps(c);
    c->comm_msg = UINT32_MAX;
    q->bytes += bytes;
    uint64_t *ctr = mem->space == ISA_SPACE_HBM ? (send ? &s->hbm_rd : &s->hbm_wr)
                                                : (send ? &s->spad_rd : &s->spad_wr);
    *ctr += bytes;
    if (!send) {
        uint32_t id = comm_find(s, core_index_of(s, (uint64_t)peer->core), c->index, tag);
        if (id != UINT32_MAX && s->msgs[id].arrived)
            comm_take(c, slot, id); /* it was waiting in the mailbox */
        return;                     /* else comm_deliver hands it over */
    }
    if (s->n_msgs == s->cap_msgs) {
        uint32_t cap = s->cap_msgs ? 2 * s->cap_msgs : 16;
        comm_msg *v = realloc(s->msgs, (size_t)cap * sizeof *v);
        if (!v) {
            np_err_set(&s->err, NP_ERR_NOMEM, "out of memory sending a message");
            goto fail;
        }
        s->msgs = v;
        s->cap_msgs = cap;
    }
    uint32_t id = s->n_msgs;
    comm_msg *m = &s->msgs[id];
    *m = (comm_msg){.src_idx = c->index, .dst_idx = core_index_of(s, (uint64_t)peer->core),
                    .tag = tag, .bytes = bytes, .slot = slot};
    if (s->func && bytes) {
        m->data = malloc(bytes);
        if (!m->data) {
            np_err_set(&s->err, NP_ERR_NOMEM, "out of memory sending a message");
            goto fail;
        }
        if (core_func_mem_read(s->func, c->index, (isa_space)mem->space, (uint64_t)mem->val,
                               m->data, bytes, &s->err) != NP_OK) {
            free(m->data);
            goto fail;
        }
    }
    s->n_msgs++;
    c->comm_msg = id;
    uint32_t flits = mesh_message_flits(bytes, (uint32_t)s->cfg->chip.noc_flit_bytes);
    const mesh_params *mp = mesh_get_params(s->noc);
    /* alone: the zero-load latency (busy); longer waits in the mesh are stalls */
    e->t_ideal_ps = clk_cycles_to_ps(&s->noc_clk,
                                     clk_cycle_at_or_after(&s->noc_clk, now_ps(c)) +
                                         mesh_zero_load_cycles(mp, c->id, (uint32_t)peer->core, flits));
    if (mesh_send(s->noc, c->id, (uint32_t)peer->core, flits, id, &s->err) != NP_OK)
        goto fail;
    return;
fail:
    chip_fail(s);
}

/* Starts the parts of entry `slot` of queue u, which q_start has started (e->parts holds
 * 1 until they are all under way). */
static void q_launch(core_model *c, isa_unit u, unsigned slot)
{
    chip_sim *s = c->chip;
    core_queue *q = &c->q[u];
    q_entry *e = &q->ring[slot];
    const isa_insn *in = &e->in;
    const core_range *r = e->r;
    unsigned nr = e->nr;
    uint64_t arg = q_arg(u, slot);
    /* The parts run concurrently; the instruction retires when the last ends:
     *   compute time   MXU/VPU cycles (core_cost.h), a timer
     *   port stream    its scratchpad bytes through the core's shared port pool, capped
     *                  at bytes / compute time (so alone it takes exactly the compute
     *                  time unless the ports are the bound), for a DMA at the HBM peak
     *   HBM stream     a DMA's bytes through the chip's shared HBM (hbm.h) */
    uint64_t spad_bytes = 0, acc_bytes = 0;
    bool any_hbm = false, both_hbm = nr == 2;
    for (unsigned i = 0; i < nr; i++) {
        if (r[i].space == ISA_SPACE_SPAD)
            spad_bytes += r[i].bytes;
        if (r[i].space == ISA_SPACE_ACC && c->acc_port)
            acc_bytes += r[i].bytes; /* the drain's reads, mxu.mm's writes */
        any_hbm = any_hbm || r[i].space == ISA_SPACE_HBM;
        both_hbm = both_hbm && r[i].space == ISA_SPACE_HBM;
    }
    if (in->op == ISA_OP_MXU_LOAD)
        spad_bytes = 0; /* its reads are part of each mxu.mm fold */
    if (in->op == ISA_OP_MXU_MM && (in->MXU_MM.mode.val == ISA_ACCM_ACCUM ||
                                    (in->MXU_MM.mode.val == ISA_ACCM_FIRST && !e->first))) {
        uint64_t old = (uint64_t)in->MXU_MM.m.val * e->mxu_n * 4; /* read, then added to */
        s->acc_rd += old;
        q->bytes += old;
        if (c->acc_port)
            acc_bytes += old;
    }
    double ghz = s->cfg->core.clock_ghz;
    double port_bw = (double)core_spad_bytes_per_cycle(s->cfg) * ghz / 1000.0; /* B/ps */
    double hbm_bw = s->cfg->chip.hbm_gb_per_s / 1000.0;
    uint64_t cyc = in->op == ISA_OP_DMA_COPY ? 0 : core_exec_cycles(s->cfg, in, e->mxu_k, e->mxu_n);
    double cap = port_bw;
    if (in->op == ISA_OP_DMA_COPY && any_hbm)
        cap = hbm_bw < port_bw ? hbm_bw : port_bw;
    else if (cyc)
        cap = (double)spad_bytes / ((double)cyc * 1000.0 / ghz);
    /* alone, each part would take (without bank conflicts): */
    double alone = 0, hbm_cap = both_hbm ? 1e300 : port_bw;
    if (spad_bytes)
        alone = (double)spad_bytes / (cap < port_bw ? cap : port_bw);
    /* Bank conflicts: the stream cannot go faster than the banks its rows touch. */
    double bank_bw = (double)core_spad_banks_touched(s->cfg, r, nr) *
                     (double)s->cfg->core.sram_port_bytes_per_cycle * ghz / 1000.0;
    if (bank_bw < cap)
        cap = bank_bw;
    /* The HBM side moves whole bursts, and only the channels its rows touch serve it. */
    uint64_t hb = 0;
    if (any_hbm) {
        const arch_chip *ch = &s->cfg->chip;
        for (unsigned i = 0; i < nr; i++)
            if (r[i].space == ISA_SPACE_HBM)
                hb += core_burst_bytes(&r[i], (uint64_t)ch->hbm_burst_bytes);
        double frac = (double)core_units_touched(r, nr, ISA_SPACE_HBM,
                                                 (uint64_t)ch->hbm_interleave_bytes,
                                                 (uint64_t)ch->hbm_channels) /
                      (double)ch->hbm_channels;
        if (hbm_bw * frac < hbm_cap)
            hbm_cap = hbm_bw * frac;
        double t = s->cfg->chip.hbm_latency_ns * 1000.0 + (double)hb / (hbm_cap < hbm_bw ? hbm_cap : hbm_bw);
        alone = t > alone ? t : alone;
    }
    /* The accumulator port: the drain's reads and mxu.mm's writes (and, accumulating, its
     * reads of the old partial sums); only the MXU queue uses it, one at a time. */
    double acc_bw = (double)s->cfg->core.acc_port_bytes_per_cycle * ghz / 1000.0;
    if (acc_bytes && (double)acc_bytes / acc_bw > alone)
        alone = (double)acc_bytes / acc_bw;
    uint64_t t_timer = cyc ? after_cycles(c, cyc) : now_ps(c);
    uint64_t t_alone = now_ps(c) + (uint64_t)ceil(alone - 1e-6);
    e->t_ideal_ps = clk_edge_at_or_after(&s->clk, t_alone > t_timer ? t_alone : t_timer);
    if (cyc) {
        e->parts++;
        if (evq_schedule_at(s->q, after_cycles(c, cyc), q_timer_ev, c, arg, NULL, &s->err) != NP_OK)
            goto fail;
    }
    if (spad_bytes) {
        e->parts++;
        if (hbm_transfer(c->ports, spad_bytes, cap, q_part_done, c, arg, &s->err) != NP_OK)
            goto fail;
    }
    if (acc_bytes) {
        e->parts++;
        if (hbm_transfer(c->acc_port, acc_bytes, acc_bw, q_part_done, c, arg, &s->err) != NP_OK)
            goto fail;
    }
    if (any_hbm) {
        e->parts++;
        if (hbm_transfer(s->mem, hb, hbm_cap, q_part_done, c, arg, &s->err) != NP_OK)
            goto fail;
    }
    q_part_done(c, arg);
    return;
fail:
    chip_fail(s);
}

static void q_launch_ev(evq *eq, void *ctx, uint64_t arg)
{
    (void)eq;
    q_launch(ctx, (isa_unit)(arg & 0xff), (unsigned)(arg >> 8));
}

/* Starts the next entries of queue u that may start: the queue's IDLE -> BUSY / WAIT_SEM
 * transition, and for the DMA queue further copies while fewer than q_limit are in flight.
 * Only a dma.copy starts with entries before it still in the ring; a sem.* (or any other
 * instruction) waits until it is the head with nothing in flight. */
static void q_start(core_model *c, isa_unit u)
{
    chip_sim *s = c->chip;
    core_queue *q = &c->q[u];
    while (q->state != Q_WAIT_SEM && q->count > q->n_started && q->n_inflight < q_limit(c, u)) {
        unsigned slot = (q->head + q->n_started) % CORE_QUEUE_DEPTH;
        q_entry *e = &q->ring[slot];
        const isa_insn *in = &e->in;
        if (q->n_started && in->op != ISA_OP_DMA_COPY)
            return; /* q_retire starts it once the entries before it have retired */
        isa_unit bu;
        unsigned ei, oi;
        if (sb_blocker(c, e, &bu, &ei, &oi)) {
            if (!q->sb_wait) {
                q->sb_wait = true;
                q->sb_from_ps = now_ps(c);
            }
            return; /* sb_wake retries when an entry completes */
        }
        if (q->sb_wait) { /* with copies in flight q_account has counted the time */
            q->sb_wait = false;
            uint64_t from = q->sb_from_ps > q->t_acct_ps ? q->sb_from_ps : q->t_acct_ps;
            if (!q->n_inflight)
                q->stall_ps += now_ps(c) - from;
        }
        if (in->op == ISA_OP_SEM_WAIT) {
            uint64_t need = (uint64_t)in->SEM_WAIT.n.val;
            uint8_t sem = (uint8_t)in->SEM_WAIT.sem.val;
            if (c->sem[sem] < need) {
                q->state = Q_WAIT_SEM;
                q->t_wait_ps = now_ps(c);
                return;
            }
            c->sem[sem] -= need;
            q_retire(c, u);
            return; /* q_retire restarted the queue */
        }
        if (in->op == ISA_OP_SEM_SIGNAL) {
            uint64_t arg = (uint64_t)in->SEM_SIGNAL.sem.val | ((uint64_t)in->SEM_SIGNAL.n.val << 8);
            if (evq_schedule_at(s->q, after_cycles(c, 1), sem_arrive_ev, c, arg, NULL, &s->err) != NP_OK) {
                chip_fail(s);
                return;
            }
            q_retire(c, u);
            return;
        }
        if (in->op == ISA_OP_COMM_SEND || in->op == ISA_OP_COMM_RECV) {
            comm_start(c, q, slot);
            return;
        }
        if (s->func && core_func_exec(s->func, c->index, in, e->first, &s->err) != NP_OK) {
            chip_fail(s);
            return;
        }
        const core_range *r = e->r;
        unsigned nr = e->nr;
        count_traffic(c, q, r, nr);
        q_account(c, q); /* the in-flight set changes */
        q->state = Q_BUSY;
        q->n_started++;
        q->n_inflight++;
        e->done = false;
        e->parts = 1; /* held until the parts have started, so none completes it early */
        uint64_t setup = in->op == ISA_OP_DMA_COPY ? (uint64_t)s->cfg->core.dma_setup_cycles : 0;
        if (!setup) {
            q_launch(c, u, slot);
            continue; /* the DMA queue may start another copy */
        }
        /* The descriptor processor decodes one copy at a time; the transfer starts after. */
        uint64_t base = c->dma_decode_free_ps > now_ps(c) ? c->dma_decode_free_ps : now_ps(c);
        uint64_t t = clk_cycles_to_ps(&s->clk, clk_ps_to_cycles(&s->clk, base) + setup);
        c->dma_decode_free_ps = t;
        e->t_ideal_ps = t;
        if (evq_schedule_at(s->q, t, q_launch_ev, c, q_arg(u, slot), NULL, &s->err) != NP_OK) {
            chip_fail(s);
            return;
        }
    }
}

/* ---- the front end ---------------------------------------------------------------------------- */

static np_status fault(core_model *c, isa_unit u, uint32_t pc, const isa_insn *in, np_err *err,
                       const char *fmt, const char *what, uint64_t a, uint64_t b, uint64_t lim)
{
    char text[256], msg[256];
    insn_text(c->chip, in, text, sizeof text);
    snprintf(msg, sizeof msg, fmt, what, (unsigned long long)a, (unsigned long long)b,
             (unsigned long long)lim);
    return np_err_set(err, NP_ERR_SIM_FAULT, "core %" PRIu32 " %s pc %" PRIu32 " `%s`: %s",
                      c->id, isa_unit_names[u], pc, text, msg);
}

/* Resolves base registers and checks every footprint; the resolved copy goes to *out. */
static np_status resolve(core_model *c, isa_unit u, const isa_insn *src, q_entry *e, np_err *err)
{
    isa_insn *out = &e->in;
    *out = *src;
    unsigned nf = isa_ops[src->op].n_fields;
    for (unsigned i = 0; i < nf; i++) {
        isa_opnd *o = &out->opnd[i];
        isa_kind k = isa_ops[src->op].fields[i].kind;
        if (k != ISA_KIND_SPAD && k != ISA_KIND_ACC && k != ISA_KIND_SPADOPT && k != ISA_KIND_MEM)
            continue;
        if (o->space == ISA_SPACE_NONE)
            continue;
        int64_t base = o->reg ? c->regs[o->reg] : 0;
        int64_t addr = (int64_t)((uint64_t)base + (uint64_t)o->val);
        if (addr < 0)
            return fault(c, u, c->pc, src, err, "%s address is negative (0x%llx)",
                         isa_ops[src->op].fields[i].name, (uint64_t)addr, 0, 0);
        o->val = addr;
        o->reg = 0;
    }
    core_range *r = e->r;
    unsigned nr = e->nr = core_ranges(out, c->mxu_k, c->mxu_n, r);
    for (unsigned i = 0; i < nr; i++) {
        uint64_t lim = core_space_bytes(c->chip->cfg, r[i].space);
        if (r[i].addr > lim || r[i].extent > lim - r[i].addr)
            return fault(c, u, c->pc, src, err,
                         "%s range 0x%llx + %llu bytes is outside its space (%llu bytes)",
                         r[i].what, r[i].addr, r[i].extent, lim);
    }
    return NP_OK;
}

/* A comm.* at dispatch: the peer is a core of this chip that runs the program and has a
 * router (resolve has checked the bytes lie inside their space). */
static np_status comm_check(core_model *c, const isa_insn *in, np_err *err)
{
    chip_sim *s = c->chip;
    bool send = in->op == ISA_OP_COMM_SEND;
    const isa_opnd *peer = send ? &in->COMM_SEND.peer : &in->COMM_RECV.peer;
    uint64_t bytes = (uint64_t)(send ? in->COMM_SEND.bytes.val : in->COMM_RECV.bytes.val);
    char text[256];
    insn_text(s, in, text, sizeof text);
    const char *why = NULL;
    char buf[160];
    uint32_t nodes = mesh_nodes(s->noc);
    if (peer->val != 0) {
        snprintf(buf, sizeof buf, "peer chip %lld is not this chip (chip 0): chip-to-chip COMM "
                 "is not modelled yet", (long long)peer->val);
        why = buf;
    } else if (core_index_of(s, peer->core) == UINT32_MAX) {
        snprintf(buf, sizeof buf, "peer core %" PRIu32 " runs no part of the program", peer->core);
        why = buf;
    } else if (c->id >= nodes || peer->core >= nodes) {
        snprintf(buf, sizeof buf, "core %" PRIu32 " has no router on the %" PRIu32 "-router mesh",
                 c->id >= nodes ? c->id : peer->core, nodes);
        why = buf;
    } else if (!send && in->COMM_RECV.red.val != ISA_RED_NONE &&
               bytes % isa_dtype_size[in->COMM_RECV.dtype.val]) {
        snprintf(buf, sizeof buf, "%llu bytes are not whole %s elements",
                 (unsigned long long)bytes, isa_dtype_names[in->COMM_RECV.dtype.val]);
        why = buf;
    }
    if (!why)
        return NP_OK;
    return np_err_set(err, NP_ERR_SIM_FAULT, "core %" PRIu32 " comm pc %" PRIu32 " `%s`: %s",
                      c->id, c->pc, text, why);
}

static void fe_step_ev(evq *eq, void *ctx, uint64_t arg);

static void fe_schedule(core_model *c, uint64_t t_ps)
{
    if (evq_schedule_at(c->chip->q, t_ps, fe_step_ev, c, 0, NULL, &c->chip->err) != NP_OK)
        chip_fail(c->chip);
}

static void fe_halt(core_model *c)
{
    c->fe = FE_HALTED;
    core_check_done(c);
}

static void barrier_arrive(core_model *c)
{
    chip_sim *s = c->chip;
    c->fe = FE_BARRIER;
    c->fe_stall_from = now_ps(c);
    if (++s->barrier_arrived < s->n_cores)
        return;
    bool same = true;
    for (uint32_t i = 0; i < s->n_cores; i++)
        same = same && s->cores[i].barrier_id == c->barrier_id && s->cores[i].fe == FE_BARRIER;
    if (!same)
        return; /* mismatched ids: nobody goes on (reported as a deadlock) */
    s->barrier_arrived = 0;
    for (uint32_t i = 0; i < s->n_cores; i++) {
        core_model *o = &s->cores[i];
        o->fe_stall_ps += now_ps(o) - o->fe_stall_from;
        o->fe = FE_RUN;
        o->pc++;
        fe_schedule(o, after_cycles(o, 1));
    }
}

/* Executes front-end instructions from pc until one takes a cycle, stalls or halts. */
static void fe_step_ev(evq *eq, void *ctx, uint64_t arg)
{
    (void)eq, (void)arg;
    core_model *c = ctx;
    chip_sim *s = c->chip;
    while (c->fe == FE_RUN) {
        if (c->pc >= c->text->n_insns) {
            fe_halt(c);
            return;
        }
        const isa_insn *in = &c->text->insns[c->pc];
        isa_unit u = isa_insn_queue(in);
        if (u == ISA_UNIT_CTRL) {
            kernel_dispatch(c, c->pc);
            c->fe_insns++;
            switch (in->op) {
            case ISA_OP_HALT:
                fe_halt(c);
                return;
            case ISA_OP_TRACE_BEGIN:
            case ISA_OP_TRACE_END:
                c->pc++;
                continue; /* free */
            case ISA_OP_FENCE:
                c->fe_wait_pc = c->pc++;
                if (!queues_empty(c)) {
                    c->fe = FE_FENCE;
                    c->fe_stall_from = now_ps(c);
                    return;
                }
                continue;
            case ISA_OP_BARRIER:
                c->fe_wait_pc = c->pc;
                if (!queues_empty(c)) { /* fence first; re-run this barrier afterwards */
                    c->fe = FE_FENCE;
                    c->fe_stall_from = now_ps(c);
                    c->fe_insns--;
                    return;
                }
                c->barrier_id = (uint64_t)in->BARRIER.id.val;
                barrier_arrive(c);
                return;
            case ISA_OP_LI:
                if (in->LI.rd.reg)
                    c->regs[in->LI.rd.reg] = in->LI.imm.val;
                c->pc++;
                break;
            case ISA_OP_ADDI:
                if (in->ADDI.rd.reg)
                    c->regs[in->ADDI.rd.reg] =
                        (int64_t)((uint64_t)c->regs[in->ADDI.rs.reg] + (uint64_t)in->ADDI.imm.val);
                c->pc++;
                break;
            case ISA_OP_LOOP: {
                loop_frame *f = &c->loops[c->depth++]; /* the loader bounds the depth */
                const isa_opnd *st[3] = {&in->LOOP.step0, &in->LOOP.step1, &in->LOOP.step2};
                f->body = c->pc + 1;
                f->count = (uint64_t)in->LOOP.count.val;
                f->remaining = f->count - 1;
                for (int i = 0; i < 3; i++) {
                    f->reg[i] = st[i]->reg;
                    f->step[i] = st[i]->val;
                    f->saved[i] = c->regs[st[i]->reg];
                }
                c->pc++;
                break;
            }
            case ISA_OP_ENDLOOP: {
                loop_frame *f = &c->loops[c->depth - 1];
                for (int i = 0; i < 3; i++)
                    if (f->reg[i])
                        c->regs[f->reg[i]] = (int64_t)((uint64_t)c->regs[f->reg[i]] + (uint64_t)f->step[i]);
                if (f->remaining) {
                    f->remaining--;
                    c->pc = f->body;
                } else {
                    for (int i = 2; i >= 0; i--)
                        if (f->reg[i])
                            c->regs[f->reg[i]] = f->saved[i];
                    c->depth--;
                    c->pc++;
                }
                break;
            }
            default: /* NOP */
                c->pc++;
                break;
            }
            c->fe_busy_ps += after_cycles(c, 1) - now_ps(c);
            fe_schedule(c, after_cycles(c, 1));
            return;
        }
        core_queue *q = &c->q[u];
        if (q->count == CORE_QUEUE_DEPTH) {
            c->fe_wait_pc = c->pc;
            c->fe = FE_WAIT_QUEUE;
            c->fe_wait_q = u;
            c->fe_stall_from = now_ps(c);
            return;
        }
        if (in->op == ISA_OP_MXU_MM && c->mxu_k == 0) {
            char text[256];
            insn_text(s, in, text, sizeof text);
            np_err_set(&s->err, NP_ERR_SIM_FAULT,
                       "core %" PRIu32 " mxu pc %" PRIu32 " `%s`: mxu.mm before any mxu.load",
                       c->id, c->pc, text);
            chip_fail(s);
            return;
        }
        q_entry *e = &q->ring[(q->head + q->count) % CORE_QUEUE_DEPTH];
        if (resolve(c, u, in, e, &s->err) != NP_OK ||
            ((in->op == ISA_OP_COMM_SEND || in->op == ISA_OP_COMM_RECV) && comm_check(c, &e->in, &s->err) != NP_OK)) {
            chip_fail(s);
            return;
        }
        if (in->op == ISA_OP_MXU_LOAD) { /* later dispatches see this tile's k x n */
            c->mxu_k = (uint64_t)in->MXU_LOAD.k.val;
            c->mxu_n = (uint64_t)in->MXU_LOAD.n.val;
        }
        e->pc = c->pc;
        e->seq = c->seq_next++;
        e->first = c->depth == 0 ||
                   c->loops[c->depth - 1].remaining + 1 == c->loops[c->depth - 1].count;
        e->mxu_k = c->mxu_k;
        e->mxu_n = c->mxu_n;
        q->count++;
        kernel_dispatch(c, c->pc);
        c->fe_insns++;
        c->pc++;
        q_start(c, u);
        c->fe_busy_ps += after_cycles(c, 1) - now_ps(c);
        fe_schedule(c, after_cycles(c, 1));
        return;
    }
}

/* ---- deadlock report -------------------------------------------------------------------------- */

/* Appends one line per waiting unit of core c to buf. */
static void deadlock_lines(const core_model *c, char *buf, size_t n)
{
    const chip_sim *s = c->chip;
    char text[200], line[720];
    for (unsigned u = 0; u < ISA_N_QUEUES; u++) {
        const core_queue *q = &c->q[u];
        if (!q->count)
            continue;
        const q_entry *e = &q->ring[q->head];
        if (q->sb_wait) /* the entry that waits is the next to start */
            e = &q->ring[(q->head + q->n_started) % CORE_QUEUE_DEPTH];
        insn_text(s, &e->in, text, sizeof text);
        isa_unit bu;
        unsigned ei, oi;
        const q_entry *b = q->sb_wait ? sb_blocker(c, e, &bu, &ei, &oi) : NULL;
        if (b) {
            char btext[200];
            insn_text(s, &b->in, btext, sizeof btext);
            snprintf(line, sizeof line,
                     "\n  core %u %s: pc %u `%s` waits for older pc %u `%s` (%s), whose %s "
                     "overlaps its %s",
                     c->id, isa_unit_names[u], e->pc, text, b->pc, btext, isa_unit_names[bu],
                     b->r[oi].what, e->r[ei].what);
        } else if (q->state == Q_WAIT_SEM) {
            unsigned sem = (unsigned)e->in.SEM_WAIT.sem.val;
            snprintf(line, sizeof line,
                     "\n  core %u %s: pc %u `%s` waits on semaphore s%u (value %llu, needs %llu)",
                     c->id, isa_unit_names[u], e->pc, text, sem, (unsigned long long)c->sem[sem],
                     (unsigned long long)e->in.SEM_WAIT.n.val);
        } else if (u == ISA_UNIT_COMM && q->n_inflight && e->in.op == ISA_OP_COMM_RECV &&
                   c->comm_msg == UINT32_MAX) {
            snprintf(line, sizeof line,
                     "\n  core %u comm: pc %u `%s` waits for a message from core %u tag %llu",
                     c->id, e->pc, text, e->in.COMM_RECV.peer.core,
                     (unsigned long long)e->in.COMM_RECV.tag.val);
        } else {
            snprintf(line, sizeof line, "\n  core %u %s: pc %u `%s` is queued (%u entries)",
                     c->id, isa_unit_names[u], e->pc, text, q->count);
        }
        strncat(buf, line, n - strlen(buf) - 1);
    }
    if (c->fe == FE_WAIT_QUEUE || c->fe == FE_FENCE || c->fe == FE_BARRIER) {
        insn_text(s, &c->text->insns[c->fe_wait_pc], text, sizeof text);
        const char *why = c->fe == FE_WAIT_QUEUE ? "waits for room in the full queue"
                          : c->fe == FE_FENCE    ? "waits for every queue to drain (fence)"
                                                 : "waits at a barrier for the other cores";
        snprintf(line, sizeof line, "\n  core %u ctrl: pc %u `%s` %s%s%s", c->id,
                 c->fe_wait_pc, text, why,
                 c->fe == FE_WAIT_QUEUE ? " " : "",
                 c->fe == FE_WAIT_QUEUE ? isa_unit_names[c->fe_wait_q] : "");
        strncat(buf, line, n - strlen(buf) - 1);
    }
}

/* ---- setup, run, report ----------------------------------------------------------------------- */

static void chip_free(chip_sim *s)
{
    if (s->cores)
        for (uint32_t i = 0; i < s->n_cores; i++) {
            free(s->cores[i].k_first);
            free(s->cores[i].k_last);
            free(s->cores[i].k_seen);
            free(s->cores[i].kernel_of);
            hbm_free(s->cores[i].ports);
            hbm_free(s->cores[i].acc_port);
        }
    free(s->cores);
    for (uint32_t i = 0; i < s->n_msgs; i++)
        free(s->msgs[i].data);
    free(s->msgs);
    mesh_free(s->noc);
    core_func_free(s->func);
    hbm_free(s->mem);
    evq_free(s->q);
}

static np_status chip_init(chip_sim *s, const arch_config *cfg, const isa_program *p, np_err *err)
{
    memset(s, 0, sizeof *s);
    s->cfg = cfg;
    s->prog = p;
    if (clk_init_ghz(&s->clk, cfg->core.clock_ghz, err) != NP_OK)
        return err->status;
    if (evq_create(&s->q, err) != NP_OK)
        return err->status;
    /* GB/s = 10^9 bytes/s = 10^-3 bytes/ps */
    if (hbm_create(s->q, cfg->chip.hbm_gb_per_s / 1000.0,
                   (uint64_t)(cfg->chip.hbm_latency_ns * 1000.0 + 0.5), &s->mem, err) != NP_OK)
        return err->status;
    bool comm = false;
    for (uint32_t i = 0; i < p->n_cores; i++)
        for (uint32_t pc = 0; pc < p->cores[i].n_insns; pc++)
            comm = comm || p->cores[i].insns[pc].op == ISA_OP_COMM_SEND ||
                   p->cores[i].insns[pc].op == ISA_OP_COMM_RECV;
    if (comm) { /* the chip's mesh, core i at router i, clocked by chip.noc_clock_ghz */
        mesh_params mp;
        mesh_params_from_arch(cfg, &mp);
        if (clk_init_ghz(&s->noc_clk, cfg->chip.noc_clock_ghz, err) != NP_OK ||
            mesh_create(&mp, NULL, "noc", &s->noc, err) != NP_OK ||
            mesh_attach(s->noc, s->q, &s->noc_clk, err) != NP_OK)
            return err->status;
        mesh_set_deliver(s->noc, comm_deliver, s);
    }
    s->n_cores = p->n_cores;
    s->cores = calloc(p->n_cores ? p->n_cores : 1, sizeof *s->cores);
    if (!s->cores)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating the cores");
    for (uint32_t i = 0; i < p->n_cores; i++) {
        core_model *c = &s->cores[i];
        const isa_core_text *t = &p->cores[i];
        c->chip = s;
        c->id = t->core;
        c->index = i;
        if (hbm_create(s->q, (double)core_spad_bytes_per_cycle(cfg) * cfg->core.clock_ghz / 1000.0,
                       0, &c->ports, err) != NP_OK)
            return err->status;
        if (cfg->core.acc_port_bytes_per_cycle &&
            hbm_create(s->q, (double)cfg->core.acc_port_bytes_per_cycle * cfg->core.clock_ghz / 1000.0,
                       0, &c->acc_port, err) != NP_OK)
            return err->status;
        c->text = t;
        uint32_t nk = t->n_kernels ? t->n_kernels : 1;
        c->k_first = calloc(nk, sizeof *c->k_first);
        c->k_last = calloc(nk, sizeof *c->k_last);
        c->k_seen = calloc(nk, sizeof *c->k_seen);
        c->kernel_of = malloc((t->n_insns ? t->n_insns : 1) * sizeof *c->kernel_of);
        if (!c->k_first || !c->k_last || !c->k_seen || !c->kernel_of)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory creating core %u", c->id);
        for (uint32_t pc = 0; pc < t->n_insns; pc++)
            c->kernel_of[pc] = -1;
        for (uint32_t k = 0; k < t->n_kernels; k++)
            for (uint32_t pc = t->kernels[k].start; pc < t->kernels[k].start + t->kernels[k].count; pc++)
                c->kernel_of[pc] = (int32_t)k;
        if (evq_schedule_at(s->q, 0, fe_step_ev, c, 0, NULL, err) != NP_OK)
            return err->status;
    }
    return NP_OK;
}

static np_status report_build(chip_sim *s, stats *reg, core_report **out, np_err *err)
{
    core_report *r = calloc(1, sizeof *r);
    if (!r)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building the report");
    uint64_t end_ps = 0, nk = 0;
    for (uint32_t i = 0; i < s->n_cores; i++) {
        if (s->cores[i].t_done_ps > end_ps)
            end_ps = s->cores[i].t_done_ps;
        nk += s->cores[i].text->n_kernels;
    }
    r->total_ps = end_ps;
    r->total_cycles = clk_ps_to_cycles(&s->clk, end_ps);
    r->n_units = s->n_cores * (ISA_N_QUEUES + 1);
    r->units = calloc(r->n_units ? r->n_units : 1, sizeof *r->units);
    r->kernels = calloc(nk ? nk : 1, sizeof *r->kernels);
    if (!r->units || !r->kernels) {
        core_report_free(r);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building the report");
    }
    uint32_t ui = 0;
    for (uint32_t i = 0; i < s->n_cores; i++) {
        core_model *c = &s->cores[i];
        for (unsigned u = 0; u <= ISA_N_QUEUES; u++) {
            core_unit_report *ur = &r->units[ui++];
            bool fe = u == ISA_N_QUEUES;
            snprintf(ur->name, sizeof ur->name, "core%u.%s", c->id,
                     fe ? "ctrl" : isa_unit_names[u]);
            ur->busy_cycles = clk_ps_to_cycles(&s->clk, fe ? c->fe_busy_ps : c->q[u].busy_ps);
            ur->stall_cycles = clk_ps_to_cycles(&s->clk, fe ? c->fe_stall_ps : c->q[u].stall_ps);
            uint64_t used = ur->busy_cycles + ur->stall_cycles;
            ur->idle_cycles = r->total_cycles > used ? r->total_cycles - used : 0;
            ur->insns = fe ? c->fe_insns : c->q[u].insns;
            ur->bytes = fe ? 0 : c->q[u].bytes;
        }
        for (uint32_t k = 0; k < c->text->n_kernels; k++) {
            core_kernel_report *kr = &r->kernels[r->n_kernels];
            kr->name = strdup(c->text->kernels[k].name);
            if (!kr->name) {
                core_report_free(r);
                return np_err_set(err, NP_ERR_NOMEM, "out of memory building the report");
            }
            r->n_kernels++;
            kr->core = c->id;
            kr->cycles = c->k_seen[k] ? clk_ps_to_cycles(&s->clk, c->k_last[k]) -
                                            clk_ps_to_cycles(&s->clk, c->k_first[k])
                                      : 0;
        }
    }
    r->hbm_read_bytes = s->hbm_rd, r->hbm_write_bytes = s->hbm_wr;
    r->sram_read_bytes = s->spad_rd, r->sram_write_bytes = s->spad_wr;
    r->acc_read_bytes = s->acc_rd, r->acc_write_bytes = s->acc_wr;
    if (reg) {
        static const struct { const char *name, *unit, *desc; size_t off; } f[] = {
            {"busy_cycles", "cycles", "cycles executing an instruction", offsetof(core_unit_report, busy_cycles)},
            {"stall_cycles", "cycles", "cycles blocked on a semaphore, full queue, fence or barrier", offsetof(core_unit_report, stall_cycles)},
            {"idle_cycles", "cycles", "cycles with nothing to do", offsetof(core_unit_report, idle_cycles)},
            {"insns", "instructions", "instructions retired", offsetof(core_unit_report, insns)},
            {"bytes", "bytes", "bytes read and written", offsetof(core_unit_report, bytes)},
        };
        for (uint32_t i = 0; i < r->n_units; i++)
            for (size_t j = 0; j < sizeof f / sizeof f[0]; j++) {
                stats_counter *ctr = stats_new_counter(reg, r->units[i].name, f[j].name,
                                                       f[j].unit, f[j].desc, err);
                if (!ctr) {
                    core_report_free(r);
                    return err->status;
                }
                stats_add(ctr, *(const uint64_t *)((const char *)&r->units[i] + f[j].off));
            }
    }
    *out = r;
    return NP_OK;
}

/* Checks an HBM range given by the caller of core_sim_run_opts. */
static np_status io_check(const arch_config *cfg, const core_hbm_io *io, const char *what,
                          np_err *err)
{
    if (io->addr > cfg->chip.hbm_bytes || io->n > cfg->chip.hbm_bytes - io->addr)
        return np_err_set(err, NP_ERR_RANGE, "%s: HBM range 0x%llx + %llu bytes is outside the "
                          "HBM (%llu bytes)", what, (unsigned long long)io->addr,
                          (unsigned long long)io->n, (unsigned long long)cfg->chip.hbm_bytes);
    return NP_OK;
}

np_status core_sim_run_opts(const arch_config *cfg, const isa_program *p,
                            const core_sim_opts *opts, stats *reg, core_report **out,
                            np_err *err)
{
    *out = NULL;
    chip_sim s;
    np_status st = chip_init(&s, cfg, p, err);
    if (st == NP_OK && opts && opts->functional) {
        st = core_func_create(cfg, p, &s.func, err);
        for (size_t i = 0; st == NP_OK && i < opts->n_inputs; i++) {
            st = io_check(cfg, &opts->inputs[i], "input", err);
            if (st == NP_OK)
                st = core_func_hbm_write(s.func, opts->inputs[i].addr, opts->inputs[i].buf,
                                         opts->inputs[i].n, err);
        }
        for (size_t i = 0; st == NP_OK && i < opts->n_outputs; i++)
            st = io_check(cfg, &opts->outputs[i], "output", err);
    }
    if (st == NP_OK)
        st = evq_run(s.q, err);
    if (st == NP_OK && s.err.status != NP_OK) {
        *err = s.err;
        st = s.err.status;
    }
    if (st == NP_OK && hbm_error(s.mem, err) != NP_OK)
        st = err->status;
    if (st == NP_OK) {
        char buf[NP_ERR_MSG_MAX] = "";
        bool stuck = false;
        for (uint32_t i = 0; i < s.n_cores; i++)
            if (s.cores[i].fe != FE_DONE) {
                stuck = true;
                deadlock_lines(&s.cores[i], buf, sizeof buf);
            }
        if (stuck)
            st = np_err_set(err, NP_ERR_DEADLOCK,
                            "the program can never finish (at cycle %llu nothing is left to "
                            "happen):%s",
                            (unsigned long long)clk_ps_to_cycles(&s.clk, evq_now(s.q)), buf);
    }
    for (size_t i = 0; st == NP_OK && s.func && i < opts->n_outputs; i++)
        st = core_func_hbm_read(s.func, opts->outputs[i].addr, opts->outputs[i].buf,
                                opts->outputs[i].n, err);
    if (st == NP_OK)
        st = report_build(&s, reg, out, err);
    chip_free(&s);
    return st;
}

np_status core_sim_run(const arch_config *cfg, const isa_program *p, stats *reg,
                       core_report **out, np_err *err)
{
    return core_sim_run_opts(cfg, p, NULL, reg, out, err);
}

void core_report_free(core_report *r)
{
    if (!r)
        return;
    for (uint32_t i = 0; i < r->n_kernels; i++)
        free(r->kernels[i].name);
    free(r->kernels);
    free(r->units);
    free(r);
}
