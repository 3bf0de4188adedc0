/* core_comm.c — the COMM engine: comm.send and comm.recv between cores.
 *
 * A send to a core of the same chip is one packet on the chip's flit-level mesh (noc/mesh.h).
 * A send to a core of another chip has three legs: a packet on the sender chip's mesh to its
 * link-port router (chip.link_port_router), one transfer on the chip-to-chip network
 * (noc/net.h: the topology's route, links shared max-min fairly with every other transfer in
 * flight), and a packet on the receiver chip's mesh from its link-port router to the core (a
 * leg is skipped when the core sits at the port's router).
 * Either way the message is kept in the run's message table (sys_sim.msgs) until a recv takes
 * it: a recv takes the oldest message from its peer with its tag, waiting in the receiver's
 * mailbox if it came first; the send retires when its data has arrived. See core.h and
 * docs/hw-model.md ("COMM"). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core_sim.h"

uint32_t core_index_of(const chip_sim *s, uint64_t id)
{
    for (uint32_t i = 0; i < s->n_cores; i++)
        if (s->cores[i].id == id)
            return i;
    return UINT32_MAX;
}

/* Completes COMM entry `slot` of core c at t_ps (an event, so that nothing re-enters the mesh
 * or the network from inside its delivery callback). */
static void comm_complete_at(core_model *c, unsigned slot, uint64_t t_ps)
{
    if (evq_schedule_at(c->chip->q, t_ps, core_q_timer_ev, c, q_arg(ISA_UNIT_COMM, slot), NULL,
                        &c->chip->err) != NP_OK)
        chip_fail(c->chip);
}

/* The first message from (chip sc, core index si) to core c with tag that no recv has taken
 * (arrived or not: messages of one pair and tag are taken in the order they were sent), or
 * UINT32_MAX. c's mailbox lists every message sent to it not yet taken, in send order. */
static uint32_t comm_find(const core_model *c, uint32_t sc, uint32_t si, uint64_t tag)
{
    const comm_msg *msgs = c->chip->sys->msgs;
    for (uint32_t id = c->mbox_head; id != UINT32_MAX; id = msgs[id].next)
        if (msgs[id].src_chip == sc && msgs[id].src_idx == si && msgs[id].tag == tag)
            return id;
    return UINT32_MAX;
}

/* The message the recv `in` of core c waits for (arrived or not), or UINT32_MAX. */
static uint32_t comm_find_for(const core_model *c, const isa_insn *in)
{
    const sys_sim *y = c->chip->sys;
    const isa_opnd *peer = &in->COMM_RECV.peer;
    uint32_t pc = (uint32_t)peer->val; /* core_comm_check: a chip of the run */
    return comm_find(c, pc, core_index_of(&y->chips[pc], peer->core),
                     (uint64_t)in->COMM_RECV.tag.val);
}

/* Recv entry `slot` of core c takes arrived message id now: stores (or reduces) the bytes and
 * completes after the reduction's vector time. */
static void comm_take(core_model *c, unsigned slot, uint32_t id)
{
    chip_sim *s = c->chip;
    comm_msg *m = &s->sys->msgs[id];
    q_entry *e = &c->q[ISA_UNIT_COMM].ring[slot];
    const isa_args_COMM_RECV *a = &e->in.COMM_RECV;
    if ((uint64_t)a->bytes.val != m->bytes) {
        char text[256], who[48], from[48];
        insn_text(s, &e->in, text, sizeof text);
        core_name(c, who, sizeof who);
        core_name(&s->sys->chips[m->src_chip].cores[m->src_idx], from, sizeof from);
        np_err_set(&s->err, NP_ERR_SIM_FAULT, "%s comm pc %" PRIu32 " `%s`: the message from %s "
                   "tag %llu has %llu bytes, the recv expects %llu", who, e->pc, text, from,
                   (unsigned long long)m->tag, (unsigned long long)m->bytes,
                   (unsigned long long)a->bytes.val);
        goto fail;
    }
    /* out of c's mailbox */
    comm_msg *msgs = s->sys->msgs;
    uint32_t prev = UINT32_MAX;
    for (uint32_t k = c->mbox_head; k != id; k = msgs[k].next)
        prev = k;
    if (prev == UINT32_MAX)
        c->mbox_head = m->next;
    else
        msgs[prev].next = m->next;
    if (c->mbox_tail == id)
        c->mbox_tail = prev;
    c->comm_msg = id;
    core_q_account(c, &c->q[ISA_UNIT_COMM]); /* the wait for the message so far was a stall */
    isa_red red = (isa_red)a->red.val;
    isa_dtype dt = (isa_dtype)a->dtype.val;
    uint64_t cyc = 0;
    if (red != ISA_RED_NONE) {
        uint64_t elems = m->bytes / isa_dtype_size[dt];
        uint64_t per =
            (uint64_t)s->cfg->core.vector_lanes * (uint64_t)s->cfg->core.vector_ops_per_lane;
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

/* Message id's last byte has left its sender: the send completes (as the ISA says, a send
 * retires when its last byte has left, not when it arrives). */
static void comm_sent(sys_sim *y, uint32_t id)
{
    comm_msg *m = &y->msgs[id];
    if (m->sent)
        return;
    m->sent = true;
    comm_complete_at(&y->chips[m->src_chip].cores[m->src_idx], m->slot, evq_now(y->q));
}

/* Message id's data arrived: the receiver takes it if its COMM head is the recv waiting for
 * it (else it waits in the receiver's mailbox). */
static void comm_arrived(sys_sim *y, uint32_t id)
{
    comm_msg *m = &y->msgs[id];
    m->arrived = true;
    core_model *rcv = &y->chips[m->dst_chip].cores[m->dst_idx];
    core_queue *q = &rcv->q[ISA_UNIT_COMM];
    if (q->n_inflight && rcv->comm_msg == UINT32_MAX) {
        const q_entry *e = &q->ring[q->head];
        if (e->in.op == ISA_OP_COMM_RECV && comm_find_for(rcv, &e->in) == id)
            comm_take(rcv, q->head, id);
    }
}

static void comm_net_event(void *ctx, uint64_t arg, net_event ev);

/* Message id (between chips) starts leg `leg` now, or has arrived after the last one. */
static void comm_leg(sys_sim *y, uint32_t id, uint8_t leg)
{
    comm_msg *m = &y->msgs[id];
    chip_sim *s = &y->chips[leg == 0 ? m->src_chip : m->dst_chip];
    uint32_t port = (uint32_t)y->cfg->chip.link_port_router;
    uint32_t flits = mesh_message_flits(m->bytes, (uint32_t)y->cfg->chip.noc_flit_bytes);
    m->leg = leg;
    if (leg == 0 && s->cores[m->src_idx].id == port)
        leg = m->leg = 1; /* the sender sits at the port */
    if (leg == 0) {
        if (mesh_send(s->noc, s->cores[m->src_idx].id, port, flits, id, &s->err) != NP_OK)
            chip_fail(s);
    } else if (leg == 1) {
        y->c2c_bytes += m->bytes;
        if (net_transfer(y->net, m->src_chip, m->dst_chip, m->bytes, comm_net_event, y, id,
                         &s->err) != NP_OK)
            chip_fail(s);
    } else if (s->cores[m->dst_idx].id == port) {
        comm_arrived(y, id); /* the receiver sits at the port */
    } else if (mesh_send(s->noc, port, s->cores[m->dst_idx].id, flits, id, &s->err) != NP_OK) {
        chip_fail(s);
    }
}

void core_comm_mesh_deliver(void *ctx, const mesh_packet *p)
{
    chip_sim *s = ctx;
    sys_sim *y = s->sys;
    if (p->tag & CORE_TAG_BARRIER) {
        core_barrier_deliver(s, p->tag);
        return;
    }
    uint32_t id = (uint32_t)p->tag;
    const comm_msg *m = &y->msgs[id];
    if (m->src_chip != m->dst_chip && m->leg == 0)
        comm_leg(y, id, 1); /* reached the link port: onto the links */
    else
        comm_arrived(y, id);
}

/* The mesh took the tail of a packet from its source: for a message's first mesh (this chip,
 * or the sender's chip on its way to the link ports) the sender's last byte has left. */
void core_comm_mesh_sent(void *ctx, const mesh_packet *p)
{
    chip_sim *s = ctx;
    if (p->tag & CORE_TAG_BARRIER)
        return;
    const comm_msg *m = &s->sys->msgs[(uint32_t)p->tag];
    if (m->src_chip == s->chip && m->leg == 0)
        comm_sent(s->sys, (uint32_t)p->tag);
}

static void comm_net_event(void *ctx, uint64_t arg, net_event ev)
{
    if (ev == NET_EVENT_SENT) /* a sender at the link ports: its last byte left on the link */
        comm_sent(ctx, (uint32_t)arg);
    else
        comm_leg(ctx, (uint32_t)arg, 2);
}

/* A new message from core c (COMM slot `slot`) to (chip dc, core index di); its id, or
 * UINT32_MAX with s->err set. Functional mode reads the bytes now. */
static uint32_t comm_msg_new(core_model *c, unsigned slot, uint32_t dc, uint32_t di,
                             const isa_args_COMM_SEND *a)
{
    chip_sim *s = c->chip;
    sys_sim *y = s->sys;
    if (y->n_msgs == y->cap_msgs) {
        uint32_t cap = y->cap_msgs ? 2 * y->cap_msgs : 16;
        comm_msg *v = realloc(y->msgs, (size_t)cap * sizeof *v);
        if (!v) {
            np_err_set(&s->err, NP_ERR_NOMEM, "out of memory sending a message");
            return UINT32_MAX;
        }
        y->msgs = v;
        y->cap_msgs = cap;
    }
    uint64_t bytes = (uint64_t)a->bytes.val;
    uint32_t id = y->n_msgs;
    comm_msg *m = &y->msgs[id];
    *m = (comm_msg){.src_chip = s->chip, .src_idx = c->index, .dst_chip = dc, .dst_idx = di,
                    .tag = (uint64_t)a->tag.val, .bytes = bytes, .slot = slot,
                    .next = UINT32_MAX};
    if (s->func && bytes) {
        m->data = malloc(bytes);
        if (!m->data) {
            np_err_set(&s->err, NP_ERR_NOMEM, "out of memory sending a message");
            return UINT32_MAX;
        }
        if (core_func_mem_read(s->func, c->index, (isa_space)a->src.space, (uint64_t)a->src.val,
                               m->data, bytes, &s->err) != NP_OK) {
            free(m->data);
            m->data = NULL;
            return UINT32_MAX;
        }
    }
    core_model *rcv = &y->chips[dc].cores[di]; /* the message joins its mailbox */
    if (rcv->mbox_head == UINT32_MAX)
        rcv->mbox_head = id;
    else
        y->msgs[rcv->mbox_tail].next = id;
    rcv->mbox_tail = id;
    return y->n_msgs++;
}

void core_comm_start(core_model *c, core_queue *q, unsigned slot)
{
    chip_sim *s = c->chip;
    sys_sim *y = s->sys;
    q_entry *e = &q->ring[slot];
    const isa_insn *in = &e->in;
    bool send = in->op == ISA_OP_COMM_SEND;
    const isa_opnd *peer = send ? &in->COMM_SEND.peer : &in->COMM_RECV.peer;
    const isa_opnd *mem = send ? &in->COMM_SEND.src : &in->COMM_RECV.dst;
    uint64_t bytes = (uint64_t)(send ? in->COMM_SEND.bytes.val : in->COMM_RECV.bytes.val);
    core_q_account(c, q);
    q->state = Q_BUSY;
    q->n_started++;
    q->n_inflight++;
    e->done = false;
    e->parts = 1;
    e->t_start_ps = now_ps(c);
    e->lane = 0;
    e->t_ideal_ps = now_ps(c);
    c->comm_msg = UINT32_MAX;
    q->bytes += bytes;
    uint64_t *ctr = mem->space == ISA_SPACE_HBM ? (send ? &s->hbm_rd : &s->hbm_wr)
                                                : (send ? &s->spad_rd : &s->spad_wr);
    *ctr += bytes;
    if (!send) {
        uint32_t id = comm_find_for(c, in);
        if (id != UINT32_MAX && y->msgs[id].arrived)
            comm_take(c, slot, id); /* it was waiting in the mailbox */
        return;                     /* else comm_arrived hands it over */
    }
    uint32_t dc = (uint32_t)peer->val;
    chip_sim *d = &y->chips[dc];
    uint32_t id = comm_msg_new(c, slot, dc, core_index_of(d, peer->core), &in->COMM_SEND);
    if (id == UINT32_MAX)
        goto fail;
    c->comm_msg = id;
    /* Alone, the send retires when its last byte has left: its flits injected one a cycle
     * into the mesh (the tail F - 1 NoC cycles after the head), or, from a core at the link
     * ports to another chip, bytes over the path's bottleneck bandwidth (busy); waiting for
     * the mesh or the links is a stall. */
    uint32_t port = (uint32_t)s->cfg->chip.link_port_router;
    uint32_t flits = mesh_message_flits(bytes, (uint32_t)s->cfg->chip.noc_flit_bytes);
    if (dc == s->chip || c->id != port) {
        e->t_ideal_ps = clk_cycles_to_ps(&s->noc_clk, clk_cycle_at_or_after(&s->noc_clk, now_ps(c)) +
                                                           flits - 1);
    } else {
        net_path_info pi;
        if (net_route(y->net, s->chip, dc, &pi, &s->err) != NP_OK)
            goto fail;
        e->t_ideal_ps = now_ps(c) + (uint64_t)ceil((double)bytes * 1e12 / pi.bytes_per_s);
    }
    if (dc == s->chip) { /* on this chip's mesh */
        if (mesh_send(s->noc, c->id, (uint32_t)peer->core, flits, id, &s->err) != NP_OK)
            goto fail;
        return;
    }
    comm_leg(y, id, 0);
    return;
fail:
    chip_fail(s);
}

/* A comm.* at dispatch: the peer is a core that runs part of the program of a chip of this
 * run, and both have a router on their meshes (every chip's mesh is the same; resolve has
 * checked the bytes lie inside their space). */
np_status core_comm_check(core_model *c, const isa_insn *in, np_err *err)
{
    chip_sim *s = c->chip;
    const sys_sim *y = s->sys;
    bool send = in->op == ISA_OP_COMM_SEND;
    const isa_opnd *peer = send ? &in->COMM_SEND.peer : &in->COMM_RECV.peer;
    uint64_t bytes = (uint64_t)(send ? in->COMM_SEND.bytes.val : in->COMM_RECV.bytes.val);
    const char *why = NULL;
    char buf[200];
    uint64_t pchip = (uint64_t)peer->val;
    if (pchip >= y->n_chips) {
        snprintf(buf, sizeof buf, "peer chip %" PRIu64 " runs no program: this run has %" PRIu32
                 " chip%s (give `npusim sim` one ELF per chip)", pchip, y->n_chips,
                 y->n_chips == 1 ? "" : "s");
        why = buf;
    } else if (core_index_of(&y->chips[pchip], peer->core) == UINT32_MAX) {
        snprintf(buf, sizeof buf, "peer core %" PRIu32 " runs no part of chip %" PRIu64 "'s program",
                 peer->core, pchip);
        why = buf;
    } else if (c->id >= mesh_nodes(s->noc) || peer->core >= mesh_nodes(s->noc)) {
        snprintf(buf, sizeof buf, "core %" PRIu32 " has no router on the %" PRIu32 "-router mesh",
                 c->id >= mesh_nodes(s->noc) ? c->id : peer->core, mesh_nodes(s->noc));
        why = buf;
    } else if (!send && in->COMM_RECV.red.val != ISA_RED_NONE &&
               bytes % isa_dtype_size[in->COMM_RECV.dtype.val]) {
        snprintf(buf, sizeof buf, "%llu bytes are not whole %s elements",
                 (unsigned long long)bytes, isa_dtype_names[in->COMM_RECV.dtype.val]);
        why = buf;
    }
    if (!why)
        return NP_OK;
    char text[256], who[48];
    insn_text(s, in, text, sizeof text);
    core_name(c, who, sizeof who);
    return np_err_set(err, NP_ERR_SIM_FAULT, "%s comm pc %" PRIu32 " `%s`: %s", who, c->pc,
                      text, why);
}
