/* mesh.c — the on-chip mesh, flit by flit as BookSim 2's iq_router, or as flows (see mesh.h
 * for the model and docs/noc.md for the mapping to BookSim, stage by stage). The state is in
 * mesh_impl.h; memory controllers and their accesses are mesh_mem.c's.
 *
 * Flit-mode state, per router r, port p (MESH_PORT_*), virtual channel v:
 *   ivc[r][p][v]  input VC: a FIFO of flits (buf_flits deep) holding the flits on their way in
 *                 too (each with its arrival cycle), the route of the packet at its front
 *                 (out_port) and its output VC (out_vc; -1 while the head still needs one), and
 *                 t_ready, the first cycle its front flit may take part in an allocation.
 *   ovc[r][p][v]  output VC of router r toward port p's neighbour (p = LOCAL: the ejection
 *                 channel): busy while a packet holds it; credits = free slots downstream;
 *                 returned credits wait in a ring (ret) until their return cycle.
 *   inj[r][v]     the source's view of the VCs of r's local input, kept like ovc.
 * A flit granted the switch at cycle s is written at once into the downstream ivc with
 * arr = s + X + L, and a credit for the slot it left is queued for the upstream with its
 * return cycle; since that is >= s + 1, nothing a router does in cycle s is seen by another
 * router before s + 1, so the order in which routers are visited within a cycle does not
 * matter.
 *
 * Arbitration follows BookSim's port numbering (inputs: from +x, from -x, from +y, from -y,
 * injection; outputs: +x, -x, +y, -y, ejection) so that round-robin pointers move as its do.
 *
 * Invariants (mesh_verify): for every output VC, credits + returns pending + flits in (or on
 * the way to) the downstream ivc == buf_flits; flits created == waiting at sources + in ivcs +
 * on ejection links + delivered; each packet's flits are delivered in order, once each.
 */
#include "mesh_impl.h"

#include "arch.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const mesh_port_names[NP] = {"local", "xplus", "xminus", "yplus", "yminus"};
static const char *const mesh_mode_names[MESH_MODE_COUNT] = {[MESH_MODE_FLIT] = "flit",
                                                            [MESH_MODE_FLOW] = "flow"};
/* BookSim's port numbers: input ports (from +x, from -x, from +y, from -y, injection) and
 * output ports (+x, -x, +y, -y, ejection), and back to ours. */
static const uint8_t bs_in[NP] = {[MESH_PORT_LOCAL] = 4, [MESH_PORT_XPLUS] = 1,
                                  [MESH_PORT_XMINUS] = 0, [MESH_PORT_YPLUS] = 3,
                                  [MESH_PORT_YMINUS] = 2};
static const uint8_t in_of_bs[NP] = {MESH_PORT_XMINUS, MESH_PORT_XPLUS, MESH_PORT_YMINUS,
                                     MESH_PORT_YPLUS, MESH_PORT_LOCAL};
static const uint8_t bs_out[NP] = {[MESH_PORT_LOCAL] = 4, [MESH_PORT_XPLUS] = 0,
                                   [MESH_PORT_XMINUS] = 1, [MESH_PORT_YPLUS] = 2,
                                   [MESH_PORT_YMINUS] = 3};
static const uint8_t out_of_bs[NP] = {MESH_PORT_XPLUS, MESH_PORT_XMINUS, MESH_PORT_YPLUS,
                                      MESH_PORT_YMINUS, MESH_PORT_LOCAL};

const char *mesh_mode_name(mesh_mode md)
{
    return (unsigned)md < MESH_MODE_COUNT ? mesh_mode_names[md] : NULL;
}

np_status mesh_params_check(const mesh_params *p, np_err *err)
{
    if (p->kx < 1 || p->kx > 1024 || p->ky < 1 || p->ky > 1024)
        return np_err_set(err, NP_ERR_RANGE, "mesh %" PRIu32 "x%" PRIu32
                          " routers: each side must be 1 .. 1024", p->kx, p->ky);
    if (p->vcs < 1 || p->vcs > 64)
        return np_err_set(err, NP_ERR_RANGE, "mesh VCs %" PRIu32 ": must be 1 .. 64", p->vcs);
    if (p->buf_flits < 1 || p->buf_flits > 4096)
        return np_err_set(err, NP_ERR_RANGE, "mesh VC buffer %" PRIu32
                          " flits: must be 1 .. 4096", p->buf_flits);
    if (p->router_cycles < 1 || p->router_cycles > 64)
        return np_err_set(err, NP_ERR_RANGE, "router pipeline %" PRIu32
                          " cycles: must be 1 .. 64", p->router_cycles);
    if (p->link_cycles < 1 || p->link_cycles > 64)
        return np_err_set(err, NP_ERR_RANGE, "link latency %" PRIu32
                          " cycles: must be 1 .. 64", p->link_cycles);
    if (p->credit_delay > 64)
        return np_err_set(err, NP_ERR_RANGE, "credit delay %" PRIu32
                          " cycles: must be 0 .. 64", p->credit_delay);
    if (p->input_speedup > 6)
        return np_err_set(err, NP_ERR_RANGE, "input speedup %" PRIu32 ": must be 0 .. 6",
                          p->input_speedup);
    if ((unsigned)p->mode >= MESH_MODE_COUNT)
        return np_err_set(err, NP_ERR_RANGE, "mesh mode %d: must be flit or flow",
                          (int)p->mode);
    return NP_OK;
}

void mesh_params_from_arch(const struct arch_config *cfg, mesh_params *p)
{
    const arch_chip *c = &cfg->chip;
    *p = (mesh_params){.kx = (uint32_t)c->mesh_x, .ky = (uint32_t)c->mesh_y,
                       .vcs = (uint32_t)c->noc_vcs, .buf_flits = (uint32_t)c->noc_vc_buf_flits,
                       .router_cycles = (uint32_t)c->noc_router_cycles,
                       .link_cycles = (uint32_t)c->noc_link_cycles,
                       .max_packet_flits = (uint32_t)c->noc_max_packet_flits,
                       .mode = c->noc_mode == ARCH_NOC_MODE_FLOW ? MESH_MODE_FLOW
                                                                  : MESH_MODE_FLIT};
}

void mesh_stages_of(const mesh_params *p, mesh_stages *s)
{
    uint32_t P = p->router_cycles;
    s->vc_alloc = 1;
    s->sw_alloc = 1;
    s->crossbar = P >= 2 ? 1 : 0;
    s->routing = P >= 3 ? P - 2 : 0;
}

uint32_t mesh_message_flits(uint64_t bytes, uint32_t flit_bytes)
{
    uint64_t f = flit_bytes ? (bytes + flit_bytes - 1) / flit_bytes : 1;
    if (f == 0)
        f = 1;
    return f > UINT32_MAX ? UINT32_MAX : (uint32_t)f;
}

uint32_t mesh_hops(const mesh_params *p, uint32_t src, uint32_t dst)
{
    int64_t sx = src % p->kx, sy = src / p->kx, dx = dst % p->kx, dy = dst / p->kx;
    return (uint32_t)((sx > dx ? sx - dx : dx - sx) + (sy > dy ? sy - dy : dy - sy));
}

uint64_t mesh_zero_load_cycles(const mesh_params *p, uint32_t src, uint32_t dst,
                               uint32_t flits)
{
    uint64_t h = mesh_hops(p, src, dst);
    return (h + 1) * (p->router_cycles + p->link_cycles) + p->link_cycles + (flits - 1);
}

static size_t vc_index(const mesh *m, uint32_t r, int port, uint32_t v)
{
    return ((size_t)r * NP + (size_t)port) * m->V + v;
}

/* ---- credits ------------------------------------------------------------------------------ */

/* Takes in the credits returned by `now`; frees a draining VC whose credits are all back. */
static void ovc_take_returns(mesh *m, mesh_ovc *o, uint64_t now)
{
    const uint64_t *ring = m->ret + o->ret_base;
    do {
        o->ret_head = (uint16_t)((uint32_t)o->ret_head + 1 == m->B ? 0 : o->ret_head + 1);
        o->ret_n--;
        o->credits++;
    } while (o->ret_n && ring[o->ret_head] <= now);
    o->t_next = o->ret_n ? ring[o->ret_head] : UINT64_MAX;
    if (o->draining && o->credits == m->B) {
        o->draining = 0;
        o->busy = 0;
    }
}

static inline void ovc_update(mesh *m, mesh_ovc *o, uint64_t now)
{
    if (o->t_next <= now)
        ovc_take_returns(m, o, now);
}

static inline void ovc_return_credit(mesh *m, mesh_ovc *o, uint64_t at)
{
    uint64_t *ring = m->ret + o->ret_base;
    uint32_t slot = (uint32_t)o->ret_head + o->ret_n;
    ring[slot >= m->B ? slot - m->B : slot] = at;
    if (o->ret_n++ == 0)
        o->t_next = at;
}

/* ---- node lists ---------------------------------------------------------------------------- */

static void list_add(mesh_list *l, uint32_t id)
{
    if (!l->in[id]) {
        l->in[id] = 1;
        l->v[l->n++] = id;
    }
}

/* Keeps the members for which keep() holds, in order. */
static void list_compact(mesh_list *l, const mesh *m, bool (*keep)(const mesh *, uint32_t))
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < l->n; i++) {
        uint32_t id = l->v[i];
        if (keep(m, id))
            l->v[k++] = id;
        else
            l->in[id] = 0;
    }
    l->n = k;
}

static bool router_busy(const mesh *m, uint32_t r) { return m->occ[r] != 0; }

static bool source_busy(const mesh *m, uint32_t r)
{
    return m->src[r].first != NONE || m->src[r].pkt != NONE;
}

/* ---- creation ------------------------------------------------------------------------------ */

void mesh_free(mesh *m)
{
    if (!m)
        return;
    free(m->ivc);
    free(m->buf);
    free(m->ovc);
    free(m->inj);
    free(m->ret);
    free(m->occ);
    free(m->vmask);
    free(m->pmask);
    free(m->va_gptr);
    free(m->va_aptr);
    free(m->sa_gptr);
    free(m->sa_aptr);
    free(m->sa_vc);
    free(m->nb);
    free(m->msgs);
    free(m->pkts);
    free(m->src);
    free(m->act.v);
    free(m->act.in);
    free(m->sact.v);
    free(m->sact.in);
    free(m->ej);
    free(m->arr.v);
    mesh_mem_free(m);
    mesh_flow_free(m->flow);
    free(m->route);
    free(m->ended);
    free(m->own_links);
    free(m->links);
    free(m);
}

np_status mesh_create(const mesh_params *p, stats *reg, const char *prefix, mesh **out,
                      np_err *err)
{
    if (mesh_params_check(p, err) != NP_OK)
        return err->status;
    bool flit = p->mode == MESH_MODE_FLIT;
    if (flit && (double)p->kx * p->ky * (NP + 1) * p->vcs * p->buf_flits > (double)INT32_MAX)
        return np_err_set(err, NP_ERR_RANGE, "a %" PRIu32 "x%" PRIu32 " mesh of %" PRIu32
                          " VCs x %" PRIu32 " flits is too large to simulate", p->kx, p->ky,
                          p->vcs, p->buf_flits);
    mesh *m = calloc(1, sizeof *m);
    if (!m)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating a mesh");
    m->p = *p;
    m->n = p->kx * p->ky;
    m->V = p->vcs;
    m->B = p->buf_flits;
    m->S = p->input_speedup > 1 ? p->input_speedup : 1;
    mesh_stages st;
    mesh_stages_of(p, &st);
    m->R = st.routing;
    m->X = st.crossbar;
    m->L = p->link_cycles;
    m->CD = p->credit_delay;
    m->free_msg = m->free_pkt = m->free_acc = NONE;
    m->n_flow_links = m->n * (NP + 1);
    size_t n = m->n, nvc = n * NP * m->V;
    m->nb = calloc(n * NP, sizeof *m->nb);
    m->src = calloc(n, sizeof *m->src);
    m->sact.v = calloc(n, sizeof *m->sact.v);
    m->sact.in = calloc(n, 1);
    if (!m->nb || !m->src || !m->sact.v || !m->sact.in)
        goto nomem;
    if (flit) {
        m->ivc = calloc(nvc, sizeof *m->ivc);
        m->buf = calloc(nvc * m->B, sizeof *m->buf);
        m->ovc = calloc(nvc, sizeof *m->ovc);
        m->inj = calloc(n * m->V, sizeof *m->inj);
        m->ret = calloc((nvc + n * m->V) * m->B, sizeof *m->ret);
        m->occ = calloc(n, sizeof *m->occ);
        m->vmask = calloc(n * NP, sizeof *m->vmask);
        m->pmask = calloc(n, 1);
        m->va_gptr = calloc(nvc, sizeof *m->va_gptr);
        m->va_aptr = calloc(nvc, sizeof *m->va_aptr);
        m->sa_gptr = calloc(n * NP, 1);
        m->sa_aptr = calloc(n * NP * m->S, 1);
        m->sa_vc = calloc(n * NP * m->S, 1);
        m->act.v = calloc(n, sizeof *m->act.v);
        m->act.in = calloc(n, 1);
        if (!m->ivc || !m->buf || !m->ovc || !m->inj || !m->ret || !m->occ || !m->vmask ||
            !m->pmask ||
            !m->va_gptr || !m->va_aptr || !m->sa_gptr || !m->sa_aptr || !m->sa_vc ||
            !m->act.v || !m->act.in)
            goto nomem;
        for (size_t i = 0; i < nvc; i++) {
            m->ivc[i].out_port = -1;
            m->ivc[i].out_vc = -1;
            m->ovc[i].credits = m->B;
            m->ovc[i].ret_base = (uint32_t)(i * m->B);
            m->ovc[i].t_next = UINT64_MAX;
        }
        for (size_t i = 0; i < n * m->V; i++) {
            m->inj[i].credits = m->B;
            m->inj[i].ret_base = (uint32_t)((nvc + i) * m->B);
            m->inj[i].t_next = UINT64_MAX;
        }
        for (size_t i = 0; i < n * NP * m->S; i++)
            m->sa_vc[i] = (uint8_t)((i % m->S) % m->V); /* BookSim: input % speedup */
    } else if (mesh_ensure_flow(m, err) != NP_OK) {
        mesh_free(m);
        return err->status;
    }
    for (uint32_t i = 0; i < m->n; i++) {
        m->src[i] = (mesh_src){.first = NONE, .last = NONE, .pkt = NONE, .vc = -1,
                               .last_vc = m->V - 1};
        uint32_t x = i % p->kx, y = i / p->kx;
        int32_t *nb = &m->nb[(size_t)i * NP];
        nb[MESH_PORT_LOCAL] = -1;
        nb[MESH_PORT_XPLUS] = x + 1 < p->kx ? (int32_t)(i + 1) : -1;
        nb[MESH_PORT_XMINUS] = x > 0 ? (int32_t)(i - 1) : -1;
        nb[MESH_PORT_YPLUS] = y + 1 < p->ky ? (int32_t)(i + p->kx) : -1;
        nb[MESH_PORT_YMINUS] = y > 0 ? (int32_t)(i - p->kx) : -1;
    }
    m->own_links = calloc(n * NP, sizeof *m->own_links);
    m->links = calloc(n * NP, sizeof *m->links);
    if (!m->own_links || !m->links)
        goto nomem;
    for (size_t i = 0; i < n * NP; i++)
        m->links[i] = &m->own_links[i];
    for (uint32_t r = 0; reg && r < m->n; r++)
        for (int pt = 0; pt < NP; pt++) {
            if (pt != MESH_PORT_LOCAL && m->nb[(size_t)r * NP + pt] < 0)
                continue;
            char comp[96], name[32], desc[96];
            snprintf(comp, sizeof comp, "%s.r%" PRIu32, prefix ? prefix : "noc", r);
            snprintf(name, sizeof name, "%s_flits", mesh_port_names[pt]);
            snprintf(desc, sizeof desc, "flits sent on router %" PRIu32 "'s %s output", r,
                     mesh_port_names[pt]);
            stats_counter *c = stats_new_counter(reg, comp, name, "flits", desc, err);
            if (!c) {
                mesh_free(m);
                return err->status;
            }
            m->links[(size_t)r * NP + pt] = c;
        }
    *out = m;
    return NP_OK;
nomem:
    mesh_free(m);
    return np_err_set(err, NP_ERR_NOMEM, "out of memory creating a %" PRIu32 "x%" PRIu32
                      " mesh", p->kx, p->ky);
}

void mesh_set_deliver(mesh *m, mesh_deliver_fn fn, void *ctx)
{
    m->deliver = fn;
    m->deliver_ctx = ctx;
}

void mesh_set_sent(mesh *m, mesh_deliver_fn fn, void *ctx)
{
    m->on_sent = fn;
    m->on_sent_ctx = ctx;
}

uint64_t mesh_cycle(const mesh *m) { return m->cycle; }
uint32_t mesh_nodes(const mesh *m) { return m->n; }
const mesh_params *mesh_get_params(const mesh *m) { return &m->p; }

bool mesh_idle(const mesh *m)
{
    return m->tot.messages_created == m->tot.messages_delivered && m->accs_live == 0;
}

uint64_t mesh_link_flits(const mesh *m, uint32_t r, int port)
{
    return m->links[(size_t)r * NP + (size_t)port]->value;
}

uint32_t mesh_router_flits(const mesh *m, uint32_t r) { return r < m->n ? m->occ[r] : 0; }

const char *mesh_port_name(int port)
{
    return port >= 0 && port < NP ? mesh_port_names[port] : NULL;
}

void mesh_reset_link_counts(mesh *m)
{
    for (size_t i = 0; i < (size_t)m->n * NP; i++)
        m->links[i]->value = 0;
}

void mesh_get_totals(const mesh *m, mesh_totals *t) { *t = m->tot; }

/* ---- messages, packets, deliveries ----------------------------------------------------------- */

static mesh_packet msg_info(const mesh_msg *g, uint64_t t_done)
{
    return (mesh_packet){g->src, g->dst, g->flits, g->tag, g->t_create, g->t_inject, t_done};
}

/* Grows a ring of deliveries (flit mode); on failure the flit is counted as lost, which
 * mesh_verify reports. */
static bool eject_room(mesh *m)
{
    if (m->ej_n < m->ej_cap)
        return true;
    uint32_t cap = m->ej_cap ? m->ej_cap * 2 : 256;
    mesh_eject *v = malloc((size_t)cap * sizeof *v);
    if (!v) {
        m->order_errors++;
        return false;
    }
    for (uint32_t i = 0; i < m->ej_n; i++)
        v[i] = m->ej[(m->ej_head + i) & (m->ej_cap - 1)];
    free(m->ej);
    m->ej = v;
    m->ej_head = 0;
    m->ej_cap = cap;
    return true;
}

/* A message's last flit arrived: report it (after freeing its record, so the callback may
 * send). */
static void msg_done(mesh *m, uint32_t id, uint64_t t)
{
    mesh_msg *g = &m->msgs[id];
    mesh_packet info = msg_info(g, t);
    g->next = m->free_msg;
    m->free_msg = id;
    m->tot.messages_delivered++;
    if (m->deliver)
        m->deliver(m->deliver_ctx, &info);
}

static void flit_delivered(mesh *m, const mesh_eject *e)
{
    mesh_pkt *p = &m->pkts[e->pkt];
    if (e->seq != p->recv)
        m->order_errors++;
    p->recv++;
    m->tot.flits_delivered++;
    uint32_t id = p->msg;
    if (p->recv == p->flits) {
        m->tot.packets_delivered++;
        p->next_free = m->free_pkt;
        m->free_pkt = e->pkt;
    }
    if (++m->msgs[id].recv == m->msgs[id].flits)
        msg_done(m, id, e->t);
}

/* ---- heaps of (cycle, order) -> id -------------------------------------------------------- */

static bool hent_less(const mesh_hent *a, const mesh_hent *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

bool mesh_heap_push(mesh_heap *h, uint64_t t, uint32_t id)
{
    if (h->n == h->cap) {
        uint32_t cap = h->cap ? h->cap * 2 : 64;
        mesh_hent *v = realloc(h->v, (size_t)cap * sizeof *v);
        if (!v)
            return false;
        h->v = v;
        h->cap = cap;
    }
    uint32_t i = h->n++;
    h->v[i] = (mesh_hent){t, h->seq++, id};
    while (i && hent_less(&h->v[i], &h->v[(i - 1) / 2])) {
        mesh_hent tmp = h->v[i];
        h->v[i] = h->v[(i - 1) / 2];
        h->v[(i - 1) / 2] = tmp;
        i = (i - 1) / 2;
    }
    return true;
}

mesh_hent mesh_heap_pop(mesh_heap *h)
{
    mesh_hent top = h->v[0];
    h->v[0] = h->v[--h->n];
    for (uint32_t i = 0;;) {
        uint32_t l = 2 * i + 1, r = l + 1, sm = i;
        if (l < h->n && hent_less(&h->v[l], &h->v[sm]))
            sm = l;
        if (r < h->n && hent_less(&h->v[r], &h->v[sm]))
            sm = r;
        if (sm == i)
            break;
        mesh_hent tmp = h->v[i];
        h->v[i] = h->v[sm];
        h->v[sm] = tmp;
        i = sm;
    }
    return top;
}

/* ---- sending ------------------------------------------------------------------------------- */

static void mesh_wake(mesh *m);
static np_status flow_start(mesh *m, uint32_t id, np_err *err);

np_status mesh_send(mesh *m, uint32_t src, uint32_t dst, uint32_t flits, uint64_t tag,
                    np_err *err)
{
    if (src >= m->n || dst >= m->n)
        return np_err_set(err, NP_ERR_RANGE, "mesh message %" PRIu32 " -> %" PRIu32
                          ": the mesh has endpoints 0 .. %" PRIu32, src, dst, m->n - 1);
    if (flits == 0)
        return np_err_set(err, NP_ERR_RANGE, "a mesh message has at least one flit");
    uint32_t id = m->free_msg;
    if (id == NONE) {
        if (m->n_msgs == m->cap_msgs) {
            uint32_t cap = m->cap_msgs ? m->cap_msgs * 2 : 64;
            mesh_msg *v = realloc(m->msgs, (size_t)cap * sizeof *v);
            if (!v)
                return np_err_set(err, NP_ERR_NOMEM, "out of memory creating a message");
            m->msgs = v;
            m->cap_msgs = cap;
        }
        id = m->n_msgs;
    }
    uint32_t next_free = id < m->n_msgs ? m->msgs[id].next : NONE;
    mesh_sync(m);
    m->msgs[id] = (mesh_msg){.src = src, .dst = dst, .flits = flits, .tag = tag,
                             .t_create = m->cycle, .next = NONE};
    if (m->p.mode == MESH_MODE_FLOW) {
        if (flow_start(m, id, err) != NP_OK) {
            if (id < m->n_msgs)
                m->msgs[id].next = next_free; /* back on the free list */
            return err->status;
        }
    } else {
        mesh_src *s = &m->src[src];
        if (s->last == NONE)
            s->first = id;
        else
            m->msgs[s->last].next = id;
        s->last = id;
        list_add(&m->sact, src);
    }
    if (id == m->n_msgs)
        m->n_msgs++;
    else
        m->free_msg = next_free;
    m->tot.messages_created++;
    m->tot.flits_created += flits;
    mesh_wake(m);
    return NP_OK;
}

/* ---- flit mode ------------------------------------------------------------------------------ */

/* The XY output port at router r for a packet to dst. */
int mesh_route(const mesh *m, uint32_t r, uint32_t dst)
{
    uint32_t x = r % m->p.kx, y = r / m->p.kx, dx = dst % m->p.kx, dy = dst / m->p.kx;
    if (dx > x)
        return MESH_PORT_XPLUS;
    if (dx < x)
        return MESH_PORT_XMINUS;
    if (dy > y)
        return MESH_PORT_YPLUS;
    if (dy < y)
        return MESH_PORT_YMINUS;
    return MESH_PORT_LOCAL;
}

/* The front of ivc vi (at router r) is f, which became front at cycle `from` or later: when
 * it may bid, and for a head its route (BookSim: a head spends R cycles in routing). */
static inline void ivc_front(mesh *m, uint32_t r, mesh_ivc *iv, const mesh_flit *f, uint64_t from)
{
    uint64_t t = f->arr > from ? f->arr : from;
    if (f->seq == 0) {
        t += m->R;
        iv->out_port = (int8_t)mesh_route(m, r, m->pkts[f->pkt].dst);
    }
    iv->t_ready = t;
}

/* Writes flit f into input VC v of router d's port ip (its slot was reserved by a credit). */
static inline __attribute__((always_inline)) void ivc_push(mesh *m, uint32_t d, int ip,
                                                         uint32_t v, mesh_flit f)
{
    size_t vi = vc_index(m, d, ip, v);
    mesh_ivc *iv = &m->ivc[vi];
    uint32_t slot = iv->head + iv->count;
    if (slot >= m->B)
        slot -= m->B;
    m->buf[vi * m->B + slot] = f;
    if (iv->count++ == 0) {
        ivc_front(m, d, iv, &f, iv->t_base);
        m->vmask[(size_t)d * NP + (size_t)ip] |= 1ULL << v;
        m->pmask[d] |= (uint8_t)(1u << bs_in[ip]);
    }
    if (m->occ[d]++ == 0)
        list_add(&m->act, d);
}

/* The source at node r injects at most one flit this cycle (BookSim's TrafficManager: a new
 * packet takes the next free VC with a credit, round robin; its flits follow on that VC). */
static void mesh_inject(mesh *m, uint32_t r)
{
    mesh_src *s = &m->src[r];
    uint64_t now = m->cycle;
    if (s->pkt == NONE) {
        if (s->first == NONE)
            return;
        uint32_t pid = m->free_pkt;
        if (pid == NONE) {
            if (m->n_pkts == m->cap_pkts) {
                uint32_t cap = m->cap_pkts ? m->cap_pkts * 2 : 256;
                mesh_pkt *v = realloc(m->pkts, (size_t)cap * sizeof *v);
                if (!v) {
                    m->order_errors++; /* reported by mesh_verify; retried next cycle */
                    return;
                }
                m->pkts = v;
                m->cap_pkts = cap;
            }
            pid = m->n_pkts++;
        } else {
            m->free_pkt = m->pkts[pid].next_free;
        }
        mesh_msg *g = &m->msgs[s->first];
        uint32_t left = g->flits - g->cut, M = m->p.max_packet_flits;
        uint32_t f = M && left > M ? M : left;
        g->cut += f;
        m->pkts[pid] = (mesh_pkt){.msg = s->first, .dst = g->dst, .flits = f,
                                  .next_free = NONE};
        m->tot.packets_created++;
        s->pkt = pid;
        s->seq = 0;
        s->vc = -1;
    }
    uint32_t V = m->V;
    mesh_ovc *inj = &m->inj[(size_t)r * V];
    if (s->vc < 0) {
        for (uint32_t i = 1; i <= V; i++) {
            uint32_t v = (s->last_vc + i) % V;
            ovc_update(m, &inj[v], now);
            if (!inj[v].busy && inj[v].credits) {
                s->vc = (int32_t)v;
                s->last_vc = v;
                inj[v].busy = 1;
                break;
            }
        }
        if (s->vc < 0)
            return;
    }
    mesh_ovc *o = &inj[s->vc];
    ovc_update(m, o, now);
    if (!o->credits)
        return;
    o->credits--;
    mesh_pkt *p = &m->pkts[s->pkt];
    mesh_msg *g = &m->msgs[p->msg];
    if (g->sent == 0)
        g->t_inject = now;
    g->sent++;
    ivc_push(m, r, MESH_PORT_LOCAL, (uint32_t)s->vc,
             (mesh_flit){.arr = now + m->L, .pkt = s->pkt, .seq = s->seq});
    m->tot.flits_injected++;
    if (++s->seq < p->flits)
        return;
    if (m->p.wait_tail_credit)
        o->draining = 1;
    else
        o->busy = 0;
    s->pkt = NONE;
    if (g->sent < g->flits)
        return;
    s->first = g->next; /* the message's last flit has left */
    if (s->first == NONE)
        s->last = NONE;
    g->next = NONE;
    if (m->on_sent) {
        mesh_packet info = msg_info(g, now);
        m->on_sent(m->on_sent_ctx, &info);
    }
}

/* Input VC v of port ip at router r was granted the switch to output port op: its front
 * flit leaves the buffer now, its credit goes back upstream, it is written into the next
 * buffer (or onto the ejection link), and the VC moves on to its next flit. */
static void mesh_traverse(mesh *m, uint32_t r, int ip, uint32_t v, int op)
{
    size_t vi = vc_index(m, r, ip, v);
    mesh_ivc *iv = &m->ivc[vi];
    mesh_flit f = m->buf[vi * m->B + iv->head];
    iv->head = iv->head + 1 == m->B ? 0 : iv->head + 1;
    m->occ[r]--;
    uint64_t now = m->cycle, L = m->L;
    if (ip == MESH_PORT_LOCAL) /* the source reads credits as they arrive */
        ovc_return_credit(m, &m->inj[(size_t)r * m->V + v], now + L);
    else { /* input port ip came in travelling that way: upstream is the other way */
        static const int back[NP] = {MESH_PORT_LOCAL, MESH_PORT_XMINUS, MESH_PORT_XPLUS,
                                     MESH_PORT_YMINUS, MESH_PORT_YPLUS};
        uint32_t up = (uint32_t)m->nb[(size_t)r * NP + (size_t)back[ip]];
        ovc_return_credit(m, &m->ovc[vc_index(m, up, ip, v)], now + L + m->CD);
    }
    m->links[(size_t)r * NP + (size_t)op]->value++;
    const mesh_pkt *p = &m->pkts[f.pkt];
    bool tail = f.seq + 1 == p->flits;
    uint32_t ov = (uint32_t)iv->out_vc;
    mesh_ovc *o = &m->ovc[vc_index(m, r, op, ov)];
    o->credits--;
    if (tail) {
        if (m->p.wait_tail_credit)
            o->draining = 1;
        else
            o->busy = 0;
        iv->out_vc = -1;
    }
    uint64_t at = now + m->X + L;
    if (op == MESH_PORT_LOCAL) { /* the endpoint takes it and returns the credit */
        ovc_return_credit(m, o, at + L + m->CD);
        if (eject_room(m)) {
            m->ej[(m->ej_head + m->ej_n) & (m->ej_cap - 1)] = (mesh_eject){at, f.pkt, f.seq};
            m->ej_n++;
        }
    } else {
        uint32_t d = (uint32_t)m->nb[(size_t)r * NP + (size_t)op];
        ivc_push(m, d, op, ov, (mesh_flit){.arr = at, .pkt = f.pkt, .seq = f.seq});
    }
    if (--iv->count == 0) {
        iv->t_base = now + 1;
        if ((m->vmask[(size_t)r * NP + (size_t)ip] &= ~(1ULL << v)) == 0)
            m->pmask[r] &= (uint8_t)~(1u << bs_in[ip]);
    } else {
        ivc_front(m, r, iv, &m->buf[vi * m->B + iv->head], now + 1);
    }
}

/* iSLIP VC allocation, one iteration, for the heads in[0 .. n) (BookSim input-VC numbers
 * bi * V + v, ascending) that want output port op of router r: every free output VC grants
 * the first requester at or after its grant pointer; every requester accepts the first
 * granting VC at or after its accept pointer; pointers move past an accepted match. */
static void mesh_va(mesh *m, uint32_t r, int op, const uint16_t *in, uint32_t n)
{
    uint32_t V = m->V, NV = NP * V, bo = bs_out[op];
    uint64_t now = m->cycle;
    mesh_ovc *ovs = &m->ovc[vc_index(m, r, op, 0)];
    uint16_t *gptr = &m->va_gptr[(size_t)r * NV + bo * V];
    uint16_t *aptr = &m->va_aptr[(size_t)r * NV];
    uint64_t granted[NP * 64]; /* per requester: output VCs that granted it */
    memset(granted, 0, n * sizeof *granted);
    bool some = false;
    for (uint32_t ov = 0; ov < V; ov++) {
        mesh_ovc *o = &ovs[ov];
        ovc_update(m, o, now);
        if (o->busy)
            continue;
        uint32_t g = gptr[ov], k = 0;
        while (k < n && in[k] < g)
            k++;
        if (k == n)
            k = 0;
        granted[k] |= 1ULL << ov;
        some = true;
    }
    if (!some)
        return;
    for (uint32_t k = 0; k < n; k++) {
        uint64_t gm = granted[k];
        if (!gm)
            continue;
        uint32_t a = aptr[in[k]], base = bo * V;
        uint32_t start = a >= base && a < base + V ? a - base : 0;
        uint64_t hi = start ? gm >> start : gm;
        uint32_t ov = hi ? start + (uint32_t)__builtin_ctzll(hi) : (uint32_t)__builtin_ctzll(gm);
        gptr[ov] = (uint16_t)((uint32_t)in[k] + 1 == NV ? 0 : in[k] + 1);
        aptr[in[k]] = (uint16_t)(base + ov + 1 == NV ? 0 : base + ov + 1);
        uint32_t bi = in[k] / V, v = in[k] % V;
        mesh_ivc *iv = &m->ivc[vc_index(m, r, in_of_bs[bi], v)];
        iv->out_vc = (int16_t)ov;
        iv->t_ready = now + 1; /* switch allocation from the next cycle */
        ovs[ov].busy = 1;
        ovs[ov].draining = 0;
    }
}

/* One cycle of router r: VC allocation for waiting heads, then iSLIP switch allocation for
 * the VCs that hold an output VC and a credit (an input bids with one VC per output, round
 * robin from its pointer), then the granted flits move. */
static void mesh_router_step(mesh *m, uint32_t r)
{
    uint32_t V = m->V, S = m->S, NI = NP * S;
    uint64_t now = m->cycle;
    uint32_t pm1 = m->pmask[r];
    if ((pm1 & (pm1 - 1)) == 0) { /* one input port holds flits ... */
        uint32_t bi = (uint32_t)__builtin_ctz(pm1);
        int ip = in_of_bs[bi];
        uint64_t mask = m->vmask[(size_t)r * NP + (size_t)ip];
        if ((mask & (mask - 1)) == 0) { /* ... in one VC: the streaming case */
            uint32_t v = (uint32_t)__builtin_ctzll(mask);
            mesh_ivc *iv = &m->ivc[vc_index(m, r, ip, v)];
            if (iv->t_ready > now)
                return;
            if (iv->out_vc >= 0) { /* a lone bid: iSLIP grants and accepts it */
                int op = iv->out_port;
                mesh_ovc *o = &m->ovc[vc_index(m, r, op, (uint32_t)iv->out_vc)];
                ovc_update(m, o, now);
                if (!o->credits)
                    return;
                uint32_t e = S == 1 ? bi : bi * S + v % S, bo = bs_out[op], next = v + S;
                m->sa_gptr[(size_t)r * NP + bo] = (uint8_t)(e + 1 == NI ? 0 : e + 1);
                m->sa_aptr[(size_t)r * NI + e] = (uint8_t)(bo + 1 == NP ? 0 : bo + 1);
                while (next >= V)
                    next -= V;
                m->sa_vc[(size_t)r * NI + e] = (uint8_t)next;
                mesh_traverse(m, r, ip, v, op);
                return;
            }
        }
    }
    uint16_t va_in[NP][NP * 64];
    uint32_t va_n[NP] = {0};
    int8_t sa_vc[NP * 6][NP];  /* per crossbar input, per output (BookSim order): its VC */
    uint32_t sa_req[NP] = {0}; /* per output: crossbar inputs bidding for it */
    uint32_t va_outs = 0, sa_outs = 0; /* outputs with VC / switch requests */
    for (uint32_t pm = m->pmask[r]; pm; pm &= pm - 1) {
        uint32_t bi = (uint32_t)__builtin_ctz(pm);
        int ip = in_of_bs[bi];
        uint64_t mask = m->vmask[(size_t)r * NP + (size_t)ip];
        while (mask) {
            uint32_t v = (uint32_t)__builtin_ctzll(mask);
            mask &= mask - 1;
            mesh_ivc *iv = &m->ivc[vc_index(m, r, ip, v)];
            if (iv->t_ready > now)
                continue;
            int op = iv->out_port;
            uint32_t bo = bs_out[op];
            if (iv->out_vc < 0) {
                va_in[bo][va_n[bo]++] = (uint16_t)(bi * V + v);
                va_outs |= 1u << bo;
                continue;
            }
            mesh_ovc *o = &m->ovc[vc_index(m, r, op, (uint32_t)iv->out_vc)];
            ovc_update(m, o, now);
            if (!o->credits)
                continue;
            uint32_t e = S == 1 ? bi : bi * S + v % S;
            sa_outs |= 1u << bo;
            if (!(sa_req[bo] & (1u << e))) {
                sa_req[bo] |= 1u << e;
                sa_vc[e][bo] = (int8_t)v;
            } else { /* round robin from the input's pointer (BookSim's Supersedes) */
                uint32_t off = m->sa_vc[(size_t)r * NP * S + e], cur = (uint32_t)sa_vc[e][bo];
                if ((v >= off ? v - off : v + V - off) < (cur >= off ? cur - off : cur + V - off))
                    sa_vc[e][bo] = (int8_t)v;
            }
        }
    }
    for (; va_outs; va_outs &= va_outs - 1) {
        uint32_t bo = (uint32_t)__builtin_ctz(va_outs);
        mesh_va(m, r, out_of_bs[bo], va_in[bo], va_n[bo]);
    }
    uint8_t granted[NP * 6] = {0}; /* per crossbar input: outputs that granted it */
    uint32_t inputs = 0;
    uint8_t *gptr = &m->sa_gptr[(size_t)r * NP];
    for (; sa_outs; sa_outs &= sa_outs - 1) {
        uint32_t bo = (uint32_t)__builtin_ctz(sa_outs), q = sa_req[bo];
        uint32_t above = q >> gptr[bo];
        uint32_t e = above ? gptr[bo] + (uint32_t)__builtin_ctz(above) : (uint32_t)__builtin_ctz(q);
        granted[e] |= (uint8_t)(1u << bo);
        inputs |= 1u << e;
    }
    uint8_t *aptr = &m->sa_aptr[(size_t)r * NI];
    uint8_t *rrvc = &m->sa_vc[(size_t)r * NI];
    while (inputs) {
        uint32_t e = (uint32_t)__builtin_ctz(inputs);
        inputs &= inputs - 1;
        uint32_t gm = granted[e], a = aptr[e];
        uint32_t above = gm >> a;
        uint32_t bo = above ? a + (uint32_t)__builtin_ctz(above) : (uint32_t)__builtin_ctz(gm);
        gptr[bo] = (uint8_t)(e + 1 == NI ? 0 : e + 1);
        aptr[e] = (uint8_t)(bo + 1 == NP ? 0 : bo + 1);
        uint32_t v = (uint32_t)sa_vc[e][bo], next = v + S;
        while (next >= V)
            next -= V;
        rrvc[e] = (uint8_t)next;
        mesh_traverse(m, r, in_of_bs[S == 1 ? e : e / S], v, out_of_bs[bo]);
    }
}

static void flit_step(mesh *m)
{
    while (m->ej_n && m->ej[m->ej_head].t <= m->cycle) {
        mesh_eject e = m->ej[m->ej_head];
        m->ej_head = (m->ej_head + 1) & (m->ej_cap - 1);
        m->ej_n--;
        flit_delivered(m, &e);
    }
    uint32_t ns = m->sact.n;
    for (uint32_t i = 0; i < ns; i++)
        mesh_inject(m, m->sact.v[i]);
    list_compact(&m->sact, m, source_busy);
    uint32_t na = m->act.n;
    m->tot.router_steps += na;
    for (uint32_t i = 0; i < na; i++)
        mesh_router_step(m, m->act.v[i]);
    list_compact(&m->act, m, router_busy);
}

/* ---- flow mode ------------------------------------------------------------------------------ */

np_status mesh_ensure_flow(mesh *m, np_err *err)
{
    if (m->flow)
        return NP_OK;
    if (!(m->route = calloc(m->p.kx + m->p.ky + 4, sizeof *m->route)))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating the mesh's flow model");
    return mesh_flow_create(m->n_flow_links, &m->flow, err);
}

/* Link ids of the flow model: router r's output port p is r * NP + p (LOCAL: ejection), r's
 * injection channel is n * NP + r. */
static np_status flow_start(mesh *m, uint32_t id, np_err *err)
{
    const mesh_msg *g = &m->msgs[id];
    uint32_t n = 0, r = g->src;
    m->route[n++] = m->n * NP + g->src;
    for (;;) {
        int op = mesh_route(m, r, g->dst);
        m->route[n++] = r * NP + (uint32_t)op;
        if (op == MESH_PORT_LOCAL)
            break;
        r = (uint32_t)m->nb[(size_t)r * NP + (size_t)op];
    }
    return mesh_flow_start(m->flow, (double)m->cycle, m->route, n, (double)g->flits, INFINITY, 0,
                           id, err);
}

static void flow_ended(void *ctx, uint64_t user, double t_end)
{
    (void)t_end;
    mesh *m = ctx;
    if (m->n_ended == m->cap_ended) {
        uint32_t cap = m->cap_ended ? 2 * m->cap_ended : 16;
        uint64_t *v = realloc(m->ended, cap * sizeof *v);
        if (!v) {
            m->order_errors++;
            return;
        }
        m->ended = v;
        m->cap_ended = cap;
    }
    m->ended[m->n_ended++] = user;
}

/* One cycle of the flow model: message arrivals (flow mode), accesses due, and the flows whose
 * last flit is sent during this cycle (end time in (now, now + 1]). */
static void flow_step(mesh *m)
{
    uint64_t now = m->cycle;
    while (m->arr.n && m->arr.v[0].t <= now) {
        mesh_hent e = mesh_heap_pop(&m->arr);
        m->tot.flits_delivered += m->msgs[e.id].flits;
        msg_done(m, e.id, e.t);
    }
    mesh_mem_due(m, now);
    m->n_ended = 0;
    mesh_flow_advance(m->flow, (double)now + 1.0, flow_ended, m);
    for (uint32_t i = 0; i < m->n_ended; i++) {
        if (m->ended[i] & MESH_USER_ACC) {
            mesh_mem_flow_ended(m, (uint32_t)m->ended[i], now);
            continue;
        }
        uint32_t id = (uint32_t)m->ended[i];
        mesh_msg *g = &m->msgs[id];
        g->sent = g->flits;
        g->t_inject = g->t_create;
        m->tot.flits_injected += g->flits;
        m->tot.packets_created++;
        m->tot.packets_delivered++;
        uint32_t r = g->src;
        for (;;) {
            int op = mesh_route(m, r, g->dst);
            m->links[(size_t)r * NP + (size_t)op]->value += g->flits;
            if (op == MESH_PORT_LOCAL)
                break;
            r = (uint32_t)m->nb[(size_t)r * NP + (size_t)op];
        }
        /* the last flit takes the zero-load head latency from its source */
        uint64_t head = mesh_zero_load_cycles(&m->p, g->src, g->dst, 1);
        if (!mesh_heap_push(&m->arr, now + head, id))
            m->order_errors++;
        if (m->on_sent) {
            mesh_packet info = msg_info(g, now);
            m->on_sent(m->on_sent_ctx, &info);
        }
    }
}

/* The next cycle at which the flow model has something to do (UINT64_MAX: nothing). */
static uint64_t flow_next_cycle(const mesh *m)
{
    uint64_t c = m->arr.n ? m->arr.v[0].t : UINT64_MAX;
    uint64_t cm = mesh_mem_next_cycle(m);
    if (cm < c)
        c = cm;
    double te = mesh_flow_next_end(m->flow);
    if (isfinite(te)) {
        double k = ceil(te - 1e-9) - 1.0; /* the step whose cycle ends it */
        uint64_t kc = k < (double)m->cycle ? m->cycle : (uint64_t)k;
        if (kc < c)
            c = kc;
    }
    return c;
}

void mesh_step(mesh *m)
{
    if (m->p.mode == MESH_MODE_FLIT)
        flit_step(m);
    if (m->flow)
        flow_step(m);
    m->cycle++;
}

/* ---- checks -------------------------------------------------------------------------------- */

np_status mesh_verify(const mesh *m, np_err *err)
{
    if (m->order_errors)
        return np_err_set(err, NP_ERR_INTERNAL, "%" PRIu64 " flits were delivered out of "
                          "order, twice, or lost", m->order_errors);
    if (m->accs_live != m->acc_start.n + m->accs_flowing + m->acc_done.n)
        return np_err_set(err, NP_ERR_INTERNAL, "memory accesses not conserved: %" PRIu64
                          " live != %" PRIu32 " requesting + %" PRIu64 " flowing + %" PRIu32
                          " completing", m->accs_live, m->acc_start.n, m->accs_flowing,
                          m->acc_done.n);
    uint64_t queued = 0;
    for (uint32_t r = 0; r < m->n; r++)
        for (uint32_t id = m->src[r].first; id != NONE; id = m->msgs[id].next)
            queued += m->msgs[id].flits - m->msgs[id].sent;
    if (m->p.mode == MESH_MODE_FLOW) {
        uint64_t active = mesh_flow_active(m->flow) - m->accs_flowing,
                 arriving = m->arr.n;
        if (m->tot.messages_created != active + arriving + m->tot.messages_delivered)
            return np_err_set(err, NP_ERR_INTERNAL, "messages not conserved: %" PRIu64
                              " created != %" PRIu64 " flowing + %" PRIu64 " arriving + %"
                              PRIu64 " delivered", m->tot.messages_created, active, arriving,
                              m->tot.messages_delivered);
        return NP_OK;
    }
    uint32_t V = m->V, B = m->B;
    uint64_t buffered = 0;
    for (uint32_t r = 0; r < m->n; r++) {
        uint64_t occ = 0;
        for (int pt = 0; pt < NP; pt++)
            for (uint32_t v = 0; v < V; v++) {
                size_t vi = vc_index(m, r, pt, v);
                occ += m->ivc[vi].count;
                if (m->ivc[vi].count > B)
                    return np_err_set(err, NP_ERR_INTERNAL, "router %" PRIu32 " port %s VC %"
                                      PRIu32 " holds %" PRIu32 " flits, more than its %" PRIu32,
                                      r, mesh_port_names[pt], v, m->ivc[vi].count, B);
                /* the output VC feeding port pt's VC v at router d, and what it feeds */
                const mesh_ovc *o = &m->ovc[vi];
                int32_t d = pt == MESH_PORT_LOCAL ? -1 : m->nb[(size_t)r * NP + pt];
                if (pt != MESH_PORT_LOCAL && d < 0)
                    continue;
                uint32_t down = d >= 0 ? m->ivc[vc_index(m, (uint32_t)d, pt, v)].count : 0;
                if (o->credits + o->ret_n + down != B)
                    return np_err_set(err, NP_ERR_INTERNAL,
                                      "credits broken at router %" PRIu32 " %s VC %" PRIu32
                                      ": %" PRIu32 " credits + %" PRIu32 " returning + %" PRIu32
                                      " buffered != %" PRIu32,
                                      r, mesh_port_names[pt], v, o->credits, o->ret_n, down, B);
                if (pt == MESH_PORT_LOCAL) {
                    const mesh_ovc *s = &m->inj[(size_t)r * V + v];
                    uint32_t in = m->ivc[vc_index(m, r, MESH_PORT_LOCAL, v)].count;
                    if (s->credits + s->ret_n + in != B)
                        return np_err_set(err, NP_ERR_INTERNAL,
                                          "injection credits broken at node %" PRIu32 " VC %"
                                          PRIu32 ": %" PRIu32 " + %" PRIu32 " + %" PRIu32
                                          " != %" PRIu32, r, v, s->credits, s->ret_n, in, B);
                }
            }
        if (occ != m->occ[r])
            return np_err_set(err, NP_ERR_INTERNAL, "router %" PRIu32 " counts %" PRIu32
                              " flits but holds %" PRIu64, r, m->occ[r], occ);
        buffered += occ;
    }
    if (m->tot.flits_created != queued + buffered + m->ej_n + m->tot.flits_delivered)
        return np_err_set(err, NP_ERR_INTERNAL,
                          "flits not conserved: %" PRIu64 " created != %" PRIu64 " queued + %"
                          PRIu64 " in routers + %" PRIu32 " on ejection links + %" PRIu64
                          " delivered",
                          m->tot.flits_created, queued, buffered, m->ej_n,
                          m->tot.flits_delivered);
    if (m->tot.flits_injected != buffered + m->ej_n + m->tot.flits_delivered)
        return np_err_set(err, NP_ERR_INTERNAL, "injected flits not conserved");
    return NP_OK;
}

/* ---- driving the mesh from an event queue ---------------------------------------------------- */

static void mesh_tick(evq *q, void *ctx, uint64_t arg)
{
    (void)arg;
    mesh *m = ctx;
    uint64_t c = clk_ps_to_cycles(m->clk, evq_now(q));
    if (c > m->cycle)
        m->cycle = c;
    m->in_tick = true; /* a send or access from a callback waits for the wake below */
    mesh_step(m);
    m->in_tick = false;
    m->scheduled = false;
    mesh_wake(m);
}

void mesh_sync(mesh *m)
{
    /* Between ticks nothing is due before the queue's time (a tick would have been earlier),
     * so the mesh may jump to its cycle. */
    if (!m->q || m->in_tick)
        return;
    uint64_t c = clk_cycle_at_or_after(m->clk, evq_now(m->q));
    if (c > m->cycle)
        m->cycle = c;
}

/* Schedules the next tick when attached and there is work: the next cycle (flits in flight),
 * or the next cycle the flow model has something to do (a flow ends, a message arrives, an
 * access is due); an earlier one than the tick pending replaces it. */
static void mesh_wake(mesh *m)
{
    if (!m->q || m->in_tick || mesh_idle(m))
        return;
    uint64_t c = UINT64_MAX;
    if (m->p.mode == MESH_MODE_FLIT && m->tot.messages_created != m->tot.messages_delivered)
        c = m->cycle;
    if (m->flow) {
        uint64_t cf = flow_next_cycle(m);
        if (cf < c)
            c = cf;
    }
    if (c == UINT64_MAX)
        return;
    if (c < m->cycle)
        c = m->cycle;
    if (m->scheduled) {
        if (c >= m->tick_cycle)
            return;
        evq_cancel(m->q, m->tick);
        m->scheduled = false;
    }
    uint64_t t = clk_cycles_to_ps(m->clk, c);
    if (t < evq_now(m->q))
        t = evq_now(m->q);
    np_err e;
    if (evq_schedule_at(m->q, t, mesh_tick, m, 0, &m->tick, &e) == NP_OK) {
        m->scheduled = true;
        m->tick_cycle = c;
    }
}

void mesh_kick(mesh *m) { mesh_wake(m); }

np_status mesh_attach(mesh *m, evq *q, const clk_domain *clk, np_err *err)
{
    (void)err;
    m->q = q;
    m->clk = clk;
    mesh_wake(m);
    return NP_OK;
}
