/* core_comm.c — the COMM engine: comm.send and comm.recv between cores.
 *
 * A send to a core of the same chip is one packet on the chip's flit-level mesh (noc/mesh.h).
 * A send to a core of another chip has three legs: a packet on the sender chip's mesh to its
 * link-port router (chip.link_port_router), one transfer on the chip-to-chip network
 * (noc/net.h: the topology's route, links shared max-min fairly with every other transfer in
 * flight), and a packet on the receiver chip's mesh from its link-port router to the core (a
 * leg is skipped when the core sits at the port's router). It crosses them cut-through, in
 * pieces of chip.c2c_piece_bytes: every piece is its own packet on each mesh and its own
 * transfer on the links (one of the message's at a time, the next starting when the last has
 * left; to a receiver at the port, every piece that has reached the sender's port at once),
 * and takes its next leg as soon as it has crossed the last. The message arrives with its last
 * piece; the counts of pieces per leg live on its record (no allocation per piece).
 *
 * A message is a record of the system's table (hw_system.msgs) from the send until it has both
 * left its sender (the send retires) and been taken by a recv; then the record is recycled, so
 * the table holds only the messages in flight or waiting. It waits in the mailbox of its
 * receiving (chip, core number) — kept across that chip's programs — in send order; a recv
 * takes the oldest one from its peer with its tag, at once if it came first, else when it
 * arrives.
 *
 * Peers given by group rank (peer(gG[rank+1], core), isa.def's PEER forms) are resolved at
 * dispatch from the chip's group table (hw_system.h), and the queue entry holds the chip
 * number from then on. See core.h and docs/hw-model.md ("COMM"). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core_sim.h"

/* "chip 1 core 3", or "core 3" when the system has one chip (as core_name). */
static void comm_core_name(const hw_system *y, uint32_t chip, uint32_t core, char *buf,
                           size_t n)
{
    if (y->n_chips > 1)
        snprintf(buf, n, "chip %" PRIu32 " core %" PRIu32, chip, core);
    else
        snprintf(buf, n, "core %" PRIu32, core);
}

/* Message record id goes back to the free list once it is sent and taken. */
static void comm_msg_release(hw_system *y, uint32_t id)
{
    comm_msg *m = &y->msgs[id];
    if (!m->sent || !m->taken)
        return;
    m->next = y->free_msg;
    y->free_msg = id;
}

/* The first message from (chip sc, core number score) to core c with tag that no recv has
 * taken (arrived or not: messages of one pair and tag are taken in the order they were
 * sent), or UINT32_MAX. c's mailbox lists every message sent to it not yet taken, in send
 * order. */
static uint32_t comm_find(const core_model *c, uint32_t sc, uint32_t score, uint64_t tag)
{
    const comm_msg *msgs = c->chip->sys->msgs;
    for (uint32_t id = c->chip->slots[c->id].mbox_head; id != UINT32_MAX; id = msgs[id].next)
        if (msgs[id].src_chip == sc && msgs[id].src_core == score && msgs[id].tag == tag)
            return id;
    return UINT32_MAX;
}

/* The message the recv `in` (its peer resolved) of core c waits for (arrived or not), or
 * UINT32_MAX. */
static uint32_t comm_find_for(const core_model *c, const isa_insn *in)
{
    const isa_opnd *peer = &in->COMM_RECV.peer;
    return comm_find(c, (uint32_t)peer->val, peer->core, (uint64_t)in->COMM_RECV.tag.val);
}

/* Recv entry `slot` of core c takes arrived message id now: stores (or reduces) the bytes and
 * completes after the reduction's vector time. */
static void comm_take(core_model *c, unsigned slot, uint32_t id)
{
    chip_sim *s = c->chip;
    hw_system *y = s->sys;
    comm_msg *m = &y->msgs[id];
    q_entry *e = &c->q[ISA_UNIT_COMM].ring[slot];
    const isa_args_COMM_RECV *a = &e->in.COMM_RECV;
    if ((uint64_t)a->bytes.val != m->bytes) {
        char text[256], who[48], from[48];
        insn_text(s, &e->in, text, sizeof text);
        core_name(c, who, sizeof who);
        comm_core_name(y, m->src_chip, m->src_core, from, sizeof from);
        np_err_set(&s->err, NP_ERR_SIM_FAULT, "%s comm pc %" PRIu32 " `%s`: the message from %s "
                   "tag %llu has %llu bytes, the recv expects %llu", who, e->pc, text, from,
                   (unsigned long long)m->tag, (unsigned long long)m->bytes,
                   (unsigned long long)a->bytes.val);
        goto fail;
    }
    /* out of c's mailbox */
    comm_msg *msgs = y->msgs;
    uint32_t prev = UINT32_MAX;
    for (uint32_t k = s->slots[c->id].mbox_head; k != id; k = msgs[k].next)
        prev = k;
    if (prev == UINT32_MAX)
        s->slots[c->id].mbox_head = m->next;
    else
        msgs[prev].next = m->next;
    if (s->slots[c->id].mbox_tail == id)
        s->slots[c->id].mbox_tail = prev;
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
        s->vec_ops += elems; /* the reduction's element operations (energy.h) */
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
                double u = core_elem_get(cur + i, dt), w = core_elem_get(m->data + i, dt);
                double v = red == ISA_RED_ADD ? u + w : red == ISA_RED_MAX ? (u > w ? u : w)
                                                                            : (u < w ? u : w);
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
    m->taken = true;
    comm_msg_release(y, id);
    uint64_t t = cyc ? after_cycles(c, cyc) : now_ps(c);
    e->t_ideal_ps = t; /* busy while reducing; the wait for the message was a stall */
    core_q_finish_at(c, ISA_UNIT_COMM, slot, t);
    return;
fail:
    chip_fail(s);
}

/* Message id's last byte has left its sender: the send completes (as the ISA says, a send
 * retires when its last byte has left, not when it arrives). */
static void comm_sent(hw_system *y, uint32_t id)
{
    comm_msg *m = &y->msgs[id];
    if (m->sent)
        return;
    m->sent = true;
    core_q_finish_at(&y->chips[m->src_chip].cores[m->src_idx], ISA_UNIT_COMM, m->slot, evq_now(y->q));
    comm_msg_release(y, id);
}

/* Message id's data arrived: the receiver takes it if its COMM head is the recv waiting for
 * it (else it waits in the receiver's mailbox, for this program or the chip's next). */
static void comm_arrived(hw_system *y, uint32_t id)
{
    comm_msg *m = &y->msgs[id];
    m->arrived = true;
    chip_sim *d = &y->chips[m->dst_chip];
    uint32_t di = m->epoch == y->epoch ? m->dst_idx : core_index_of(d, m->dst_core);
    if (di == UINT32_MAX)
        return;
    core_model *rcv = &d->cores[di];
    core_queue *q = &rcv->q[ISA_UNIT_COMM];
    if (q->n_inflight && rcv->comm_msg == UINT32_MAX) {
        const q_entry *e = &q->ring[q->head];
        const isa_args_COMM_RECV *a = &e->in.COMM_RECV;
        /* the recv takes the first message from its peer with its tag: this one if it is
           from there and the oldest in the mailbox, else look */
        if (e->in.op == ISA_OP_COMM_RECV && (uint64_t)a->peer.val == m->src_chip &&
            a->peer.core == m->src_core && (uint64_t)a->tag.val == m->tag &&
            (d->slots[m->dst_core].mbox_head == id || comm_find_for(rcv, &e->in) == id))
            comm_take(rcv, q->head, id);
    }
}

static void comm_net_event(void *ctx, uint64_t arg, net_event ev);

/* Bytes of pieces [k, k + n) of message m (chip.c2c_piece_bytes each, the last one shorter). */
static uint64_t comm_pieces_bytes(const hw_system *y, const comm_msg *m, uint32_t k, uint32_t n)
{
    uint64_t pb = y->cfg->chip.c2c_piece_bytes, lo = (uint64_t)k * pb, hi = lo + n * pb;
    return (hi < m->bytes ? hi : m->bytes) - (lo < m->bytes ? lo : m->bytes);
}

/* Message id (between chips) puts its next pieces on the links if they are at the sender
 * chip's port and the links are free of its last transfer: one piece, or, when the receiver
 * sits at the port (no mesh leg to feed), every piece at the port in one transfer. The
 * transfer's arg carries the message and its count of pieces. */
static void comm_link_next(hw_system *y, uint32_t id)
{
    comm_msg *m = &y->msgs[id];
    if (m->link_busy || m->on_link == m->at_port)
        return;
    chip_sim *s = &y->chips[m->src_chip];
    uint32_t n = m->dst_core == (uint32_t)y->cfg->chip.link_port_router ? m->at_port - m->on_link : 1;
    uint64_t bytes = comm_pieces_bytes(y, m, m->on_link, n);
    m->on_link += n;
    m->link_busy = true;
    s->c2c_bytes += bytes;
    if (net_transfer(y->net, m->src_chip, m->dst_chip, bytes, comm_net_event, y,
                     (uint64_t)n << 32 | id, &s->err) != NP_OK)
        chip_fail(s);
}

/* Message id (between chips) starts: its pieces queue on the sender chip's mesh for the
 * link port, or, from a core at the port, are all there at once. */
static void comm_c2c_start(hw_system *y, uint32_t id)
{
    comm_msg *m = &y->msgs[id];
    chip_sim *s = &y->chips[m->src_chip];
    uint32_t port = (uint32_t)y->cfg->chip.link_port_router;
    uint64_t pb = y->cfg->chip.c2c_piece_bytes;
    m->pieces = m->bytes ? (uint32_t)((m->bytes + pb - 1) / pb) : 1;
    if (m->src_core == port) {
        m->left0 = m->at_port = m->pieces;
        comm_link_next(y, id);
        return;
    }
    uint32_t fb = (uint32_t)y->cfg->chip.noc_flit_bytes;
    for (uint32_t k = 0; k < m->pieces; k++)
        if (mesh_send(s->noc, m->src_core, port, mesh_message_flits(comm_pieces_bytes(y, m, k, 1), fb),
                      id, &s->err) != NP_OK) {
            chip_fail(s);
            return;
        }
}

void core_comm_mesh_deliver(void *ctx, const mesh_packet *p)
{
    chip_sim *s = ctx;
    hw_system *y = s->sys;
    if (p->tag & CORE_TAG_BARRIER) {
        core_barrier_deliver(s, p->tag);
        return;
    }
    uint32_t id = (uint32_t)p->tag;
    comm_msg *m = &y->msgs[id];
    if (m->src_chip == m->dst_chip) {
        comm_arrived(y, id);
    } else if (s->chip == m->src_chip) { /* a piece reached the link port: onto the links */
        m->at_port++;
        comm_link_next(y, id);
    } else if (++m->at_dst == m->pieces) { /* the last piece reached the receiver */
        comm_arrived(y, id);
    }
}

/* The mesh took the tail of a packet from its source: for a message on this chip, or the
 * last piece of one on its way to the link ports, the sender's last byte has left. */
void core_comm_mesh_sent(void *ctx, const mesh_packet *p)
{
    chip_sim *s = ctx;
    if (p->tag & CORE_TAG_BARRIER)
        return;
    comm_msg *m = &s->sys->msgs[(uint32_t)p->tag];
    if (m->src_chip == s->chip && (m->dst_chip == s->chip || ++m->left0 == m->pieces))
        comm_sent(s->sys, (uint32_t)p->tag);
}

/* From a net.h event, at its end (net_flow_finish / net_flow_deliver call it last): the
 * COMM entry it ends may complete in it, instead of in an event at the same time. At SENT
 * the links take the message's next pieces (a sender at the port retires with its last); at
 * DELIVERED the pieces cross the receiver chip's mesh, or have arrived. */
static void comm_net_event(void *ctx, uint64_t arg, net_event ev)
{
    hw_system *y = ctx;
    uint32_t id = (uint32_t)arg, n = (uint32_t)(arg >> 32);
    comm_msg *m = &y->msgs[id];
    uint32_t port = (uint32_t)y->cfg->chip.link_port_router;
    y->in_net_callback = true;
    if (ev == NET_EVENT_SENT) {
        m->link_busy = false;
        if (m->on_link < m->pieces)
            comm_link_next(y, id);
        else if (m->src_core == port) /* its last byte left on the link */
            comm_sent(y, id);
    } else if (m->dst_core == port) {
        m->off_link = m->at_dst += n;
        if (m->at_dst == m->pieces)
            comm_arrived(y, id); /* the receiver sits at the port */
    } else {
        chip_sim *d = &y->chips[m->dst_chip];
        uint32_t fb = (uint32_t)y->cfg->chip.noc_flit_bytes;
        for (uint32_t k = m->off_link; k < m->off_link + n; k++)
            if (mesh_send(d->noc, port, m->dst_core,
                          mesh_message_flits(comm_pieces_bytes(y, m, k, 1), fb), id,
                          &d->err) != NP_OK) {
                chip_fail(d);
                break;
            }
        m->off_link += n;
    }
    y->in_net_callback = false;
}

/* A new message from core c (COMM slot `slot`) to (chip dc, core number dcore); its id, or
 * UINT32_MAX with s->err set. Functional mode reads the bytes now. */
static uint32_t comm_msg_new(core_model *c, unsigned slot, uint32_t dc, uint32_t dcore,
                             const isa_args_COMM_SEND *a)
{
    chip_sim *s = c->chip;
    hw_system *y = s->sys;
    if (y->free_msg == UINT32_MAX && y->n_msgs == y->cap_msgs) {
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
    uint8_t *data = NULL;
    if (s->func && bytes) {
        data = malloc(bytes);
        if (!data) {
            np_err_set(&s->err, NP_ERR_NOMEM, "out of memory sending a message");
            return UINT32_MAX;
        }
        if (core_func_mem_read(s->func, c->index, (isa_space)a->src.space, (uint64_t)a->src.val,
                               data, bytes, &s->err) != NP_OK) {
            free(data);
            return UINT32_MAX;
        }
    }
    uint32_t id = y->free_msg;
    if (id != UINT32_MAX)
        y->free_msg = y->msgs[id].next;
    else
        id = y->n_msgs++;
    comm_msg *m = &y->msgs[id];
    const peer_ok *ok = &c->peer_ok[0]; /* from this send's dispatch, or a later one's */
    bool known = ok->epoch == y->epoch && ok->chip == dc && ok->core == dcore;
    *m = (comm_msg){.src_chip = s->chip, .src_idx = c->index, .src_core = c->id,
                    .dst_chip = dc, .dst_core = dcore,
                    .dst_idx = known ? ok->idx : core_index_of(&y->chips[dc], dcore),
                    .epoch = y->epoch, .tag = (uint64_t)a->tag.val, .bytes = bytes,
                    .slot = slot, .next = UINT32_MAX, .data = data};
    chip_sim *d = &y->chips[dc]; /* the message joins the receiver's mailbox */
    chip_core *box = &d->slots[dcore];
    if (box->mbox_head == UINT32_MAX)
        box->mbox_head = id;
    else
        y->msgs[box->mbox_tail].next = id;
    box->mbox_tail = id;
    return id;
}

void core_comm_start(core_model *c, core_queue *q, unsigned slot)
{
    chip_sim *s = c->chip;
    hw_system *y = s->sys;
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
    uint32_t id = comm_msg_new(c, slot, dc, peer->core, &in->COMM_SEND);
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
        if (s->route_dst != dc) { /* routes never change: one cached, a chip's last peer */
            net_path_info pi;
            if (net_route(y->net, s->chip, dc, &pi, &s->err) != NP_OK)
                goto fail;
            s->route_dst = dc;
            s->route_bytes_per_s = pi.bytes_per_s;
        }
        e->t_ideal_ps = now_ps(c) + (uint64_t)ceil((double)bytes * 1e12 / s->route_bytes_per_s);
    }
    if (dc == s->chip) { /* on this chip's mesh */
        if (mesh_send(s->noc, c->id, (uint32_t)peer->core, flits, id, &s->err) != NP_OK)
            goto fail;
        return;
    }
    comm_c2c_start(y, id);
    return;
fail:
    chip_fail(s);
}

/* "chips 0, 2, 4, 6" (at most 8 listed) of group instance gr. */
static void comm_group_text(const sys_group *gr, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "chip%s", gr->n > 1 ? "s" : "");
    for (uint32_t i = 0; i < gr->n && i < 8 && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s %" PRIu32, i ? "," : "",
                                gr->chips ? gr->chips[i] : gr->first + i * gr->stride);
    if (gr->n > 8 && len < n)
        snprintf(buf + len, n - len, ", ...");
}

/* Turns the group-relative peer of comm.* `in` of core c (at dispatch: registers as now) into
 * peer(chip, core); NULL, or why it cannot be (in buf). */
static const char *comm_resolve_peer(const core_model *c, isa_opnd *peer, char *buf, size_t n)
{
    const chip_sim *s = c->chip;
    unsigned g = peer->group;
    if (peer->form == ISA_PEER_FORM_CHIP)
        return NULL;
    if (s->grp_inst[g] == UINT32_MAX) {
        snprintf(buf, n, "chip %" PRIu32 " is in no group g%u (the group table gives it none)",
                 s->chip, g);
        return buf;
    }
    const sys_group *gr = &s->sys->groups[s->grp_inst[g]];
    int64_t x = (int64_t)((uint64_t)(peer->reg ? c->regs[peer->reg] : 0) + (uint64_t)peer->val);
    uint64_t rank = s->grp_rank[g], size = gr->n, idx;
    if (peer->form == ISA_PEER_FORM_ADD) {
        int64_t m = x % (int64_t)size; /* -size < m < size */
        idx = (rank + (uint64_t)(m < 0 ? m + (int64_t)size : m)) % size;
    } else {
        idx = peer->form == ISA_PEER_FORM_XOR ? rank ^ (uint64_t)x : (uint64_t)x;
        if (x < 0 || idx >= size) {
            char grp[120];
            comm_group_text(gr, grp, sizeof grp);
            if (peer->form == ISA_PEER_FORM_XOR)
                snprintf(buf, n, "rank %" PRIu64 " ^ %" PRId64 " is not a rank of g%u (%" PRIu64
                         " ranks: %s)", rank, x, g, size, grp);
            else
                snprintf(buf, n, "%" PRId64 " is not a rank of g%u (%" PRIu64 " ranks: %s)", x, g,
                         size, grp);
            return buf;
        }
    }
    *peer = isa_peer(gr->chips ? gr->chips[idx] : gr->first + (uint32_t)idx * gr->stride,
                     peer->core);
    return NULL;
}

/* A comm.* at dispatch (in: the queue entry's copy, addresses resolved): resolves a peer given
 * by group rank, then checks that the peer is a core of a chip of this system that runs part
 * of its program (or whose chip has none yet: the message waits for one), and that both have
 * a router on their meshes (every chip's mesh is the same; resolve has checked the bytes lie
 * inside their space). Builds a receiving chip's mailboxes and mesh, and the network, when a
 * message is the first to need them. */
np_status core_comm_check(core_model *c, isa_insn *in, np_err *err)
{
    chip_sim *s = c->chip;
    hw_system *y = s->sys;
    bool send = in->op == ISA_OP_COMM_SEND;
    isa_opnd *peer = send ? &in->COMM_SEND.peer : &in->COMM_RECV.peer;
    uint64_t bytes = (uint64_t)(send ? in->COMM_SEND.bytes.val : in->COMM_RECV.bytes.val);
    char buf[320];
    isa_opnd given = *peer; /* the fault shows the peer as written */
    const char *why = comm_resolve_peer(c, peer, buf, sizeof buf);
    uint64_t pchip = (uint64_t)peer->val;
    peer_ok *ok = &c->peer_ok[!send];
    if (!why && ok->epoch == y->epoch && ok->chip == pchip && ok->core == peer->core &&
        (send || in->COMM_RECV.red.val == ISA_RED_NONE ||
         bytes % isa_dtype_size[in->COMM_RECV.dtype.val] == 0))
        return NP_OK; /* as good as the last time */
    const chip_sim *d = pchip < y->n_chips ? &y->chips[pchip] : NULL;
    if (why) {
        /* the peer names no member of a group */
    } else if (!d) {
        snprintf(buf, sizeof buf, "peer chip %" PRIu64 " runs no program: this run has %" PRIu32
                 " chip%s (give `npusim sim` one ELF per chip)", pchip, y->n_chips,
                 y->n_chips == 1 ? "" : "s");
        why = buf;
    } else if (peer->core >= (uint64_t)s->cfg->chip.cores ||
               (d->prog && core_index_of(d, peer->core) == UINT32_MAX)) {
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
    if (why) {
        char who[48], text[256];
        core_name(c, who, sizeof who);
        *peer = given;
        insn_text(s, in, text, sizeof text);
        return np_err_set(err, NP_ERR_SIM_FAULT, "%s comm pc %" PRIu32 " `%s`: %s", who, c->pc,
                          text, why);
    }
    if (send && pchip != s->chip &&
        (chip_ensure(&y->chips[pchip], err) != NP_OK ||
         chip_ensure_mesh(&y->chips[pchip], err) != NP_OK || sys_ensure_net(y, err) != NP_OK))
        return err->status;
    *ok = (peer_ok){.chip = (uint32_t)pchip, .core = peer->core,
                    .idx = core_index_of(d, peer->core), .epoch = y->epoch};
    return NP_OK;
}
