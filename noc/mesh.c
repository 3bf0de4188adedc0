/* mesh.c — the flit-level mesh (see mesh.h for the model and docs/noc.md for the mapping to
 * BookSim 2).
 *
 * State, per router r, port p (MESH_PORT_*), virtual channel v:
 *   ivc[r][p][v]  input VC: a FIFO of flits (buf_flits deep) plus the route of the packet at
 *                 its front (out_port, out_vc; -1 until computed / allocated).
 *   ovc[r][p][v]  output VC of router r toward port p's neighbour (p != LOCAL): busy while a
 *                 packet holds it; credits = free slots of the downstream ivc; returned
 *                 credits wait in a small ring (ret) until their return cycle.
 *   inj[r][v]     the endpoint's output VCs into r's LOCAL input port, kept like ovc.
 * A flit that crosses a switch (or leaves a source queue) at cycle s is written at once into
 * the downstream ivc with ready = s + L + P (it arrives at s + L and may leave P later), and
 * consumes the credit it occupies; a flit sent to the LOCAL output is queued for delivery at
 * s + L. Since L >= 1, nothing a router does in cycle s is seen by another router before
 * cycle s + 1, so the order in which routers are visited within a cycle does not matter.
 *
 * Invariants (mesh_verify): for every output VC, credits + returns pending + flits in the
 * downstream ivc == buf_flits; flits created == queued at sources + in ivcs + awaiting
 * delivery + delivered; each packet's flits are delivered in order, once each.
 */
#include "mesh.h"

#include "arch.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NP MESH_PORT_COUNT

typedef struct mesh_flit {
    uint32_t pkt; /* index into m->pkts */
    uint32_t seq; /* 0 = head, flits - 1 = tail */
    uint64_t ready;
} mesh_flit;

typedef struct mesh_ivc {
    uint64_t front_ready; /* ready cycle of the front flit (valid while count > 0) */
    uint32_t head, count;
    int8_t out_port; /* -1: the front packet's route is not computed yet */
    int16_t out_vc;  /* -1: no output VC allocated */
} mesh_ivc;

typedef struct mesh_ovc {
    uint32_t credits;
    uint32_t ret_head, ret_n; /* ring of return cycles at m->ret + ret_base */
    uint32_t ret_base;
    uint8_t busy;
    uint8_t draining; /* wait_tail_credit: the tail is sent, the VC frees when credits == B */
} mesh_ovc;

typedef struct mesh_pkt {
    uint32_t src, dst, flits;
    uint32_t sent, recv; /* flits injected / delivered so far */
    int32_t inj_vc;      /* the source's VC while injecting, else -1 */
    uint64_t tag, t_create, t_inject;
    uint32_t next_free;  /* free-list link while unused */
} mesh_pkt;

typedef struct mesh_eject {
    uint64_t t;
    uint32_t pkt, seq;
} mesh_eject;

typedef struct mesh_queue { /* growable ring of packet indices */
    uint32_t *v;
    uint32_t head, n, cap;
} mesh_queue;

struct mesh {
    mesh_params p;
    uint32_t n; /* routers = endpoints */
    uint64_t cycle;

    mesh_ivc *ivc;      /* n * NP * vcs */
    mesh_flit *buf;     /* n * NP * vcs * buf_flits */
    mesh_ovc *ovc;      /* n * NP * vcs (LOCAL entries unused) */
    mesh_ovc *inj;      /* n * vcs */
    uint64_t *ret;      /* (n * NP * vcs + n * vcs) * buf_flits return cycles */
    uint32_t *occ;      /* flits in each router's ivcs */
    uint64_t *vmask;    /* n * NP: bit v set when ivc v of that input port holds flits */
    uint8_t *rr_vc;     /* n * NP: input port's next VC to consider */
    uint8_t *rr_in;     /* n * NP: output port's next input to consider */
    uint8_t *rr_ovc;    /* n * NP: output port's next VC to allocate */
    uint8_t *rr_inj;    /* n: endpoint's next VC to allocate */
    int32_t *nb;        /* n * NP: neighbour router through each port, -1 at the edge */

    mesh_pkt *pkts;
    uint32_t n_pkts, cap_pkts, free_pkt; /* free_pkt: UINT32_MAX when empty */
    mesh_queue *srcq;   /* n */
    mesh_eject *ej;     /* ring of pending deliveries, in time order */
    uint32_t ej_head, ej_n, ej_cap;

    stats_counter **links;    /* n * NP flit counters: in the registry, else own_links */
    stats_counter *own_links;

    mesh_deliver_fn deliver;
    void *deliver_ctx;
    mesh_deliver_fn on_sent;
    void *on_sent_ctx;

    mesh_totals tot;
    uint64_t order_errors; /* flits delivered out of order or twice */
    uint64_t flits_buffered;

    evq *q; /* mesh_attach */
    const clk_domain *clk;
    bool scheduled;
};

static const char *const mesh_port_names[NP] = {"local", "xplus", "xminus", "yplus", "yminus"};

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
    return NP_OK;
}

void mesh_params_from_arch(const struct arch_config *cfg, mesh_params *p)
{
    const arch_chip *c = &cfg->chip;
    *p = (mesh_params){.kx = (uint32_t)c->mesh_x, .ky = (uint32_t)c->mesh_y,
                       .vcs = (uint32_t)c->noc_vcs, .buf_flits = (uint32_t)c->noc_vc_buf_flits,
                       .router_cycles = (uint32_t)c->noc_router_cycles,
                       .link_cycles = (uint32_t)c->noc_link_cycles};
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
    return ((size_t)r * NP + (size_t)port) * m->p.vcs + v;
}

static uint64_t *ovc_ret(mesh *m, const mesh_ovc *o)
{
    return m->ret + o->ret_base;
}

static void ovc_return_credit(mesh *m, mesh_ovc *o, uint64_t when)
{
    uint64_t *ring = ovc_ret(m, o);
    uint32_t i = o->ret_head + o->ret_n;
    ring[i >= m->p.buf_flits ? i - m->p.buf_flits : i] = when;
    o->ret_n++;
}

/* Collects every credit whose return cycle has come. */
static void ovc_collect(mesh *m, mesh_ovc *o)
{
    uint64_t *ring = ovc_ret(m, o);
    while (o->ret_n && ring[o->ret_head] <= m->cycle) {
        if (++o->ret_head == m->p.buf_flits)
            o->ret_head = 0;
        o->ret_n--;
        o->credits++;
    }
}

/* Whether output VC o can be allocated now (a draining VC frees once all credits are back). */
static bool ovc_free(mesh *m, mesh_ovc *o)
{
    if (o->busy && o->draining) {
        ovc_collect(m, o);
        if (o->credits == m->p.buf_flits)
            o->busy = o->draining = 0;
    }
    return !o->busy;
}

/* Collects credits whose return cycle has come; true when one is available. */
static inline bool ovc_has_credit(mesh *m, mesh_ovc *o)
{
    if (o->credits)
        return true;
    if (o->ret_n == 0)
        return false;
    uint64_t *ring = ovc_ret(m, o);
    while (o->ret_n && ring[o->ret_head] <= m->cycle) {
        if (++o->ret_head == m->p.buf_flits)
            o->ret_head = 0;
        o->ret_n--;
        o->credits++;
    }
    return o->credits > 0;
}

/* Appends f to VC v of router r's input port `port`. */
static void ivc_push(mesh *m, uint32_t r, int port, uint32_t v, mesh_flit f)
{
    size_t vi = vc_index(m, r, port, v);
    mesh_ivc *iv = &m->ivc[vi];
    uint32_t b = m->p.buf_flits, i = iv->head + iv->count;
    m->buf[vi * b + (i >= b ? i - b : i)] = f;
    if (iv->count++ == 0) {
        iv->front_ready = f.ready;
        m->vmask[(size_t)r * NP + (size_t)port] |= 1ULL << v;
    }
    m->flits_buffered++;
}

/* Removes the front flit of VC v of router r's input port `port`. */
static mesh_flit ivc_pop(mesh *m, uint32_t r, int port, uint32_t v)
{
    size_t vi = vc_index(m, r, port, v);
    mesh_ivc *iv = &m->ivc[vi];
    uint32_t b = m->p.buf_flits;
    mesh_flit f = m->buf[vi * b + iv->head];
    if (++iv->head == b)
        iv->head = 0;
    if (--iv->count == 0)
        m->vmask[(size_t)r * NP + (size_t)port] &= ~(1ULL << v);
    else
        iv->front_ready = m->buf[vi * b + iv->head].ready;
    m->flits_buffered--;
    return f;
}

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
    free(m->rr_vc);
    free(m->rr_in);
    free(m->rr_ovc);
    free(m->rr_inj);
    free(m->nb);
    free(m->pkts);
    if (m->srcq)
        for (uint32_t i = 0; i < m->n; i++)
            free(m->srcq[i].v);
    free(m->srcq);
    free(m->ej);
    free(m->own_links);
    free(m->links);
    free(m);
}

np_status mesh_create(const mesh_params *p, stats *reg, const char *prefix, mesh **out,
                      np_err *err)
{
    if (mesh_params_check(p, err) != NP_OK)
        return err->status;
    if ((double)p->kx * p->ky * (NP + 1) * p->vcs * p->buf_flits > (double)INT32_MAX)
        return np_err_set(err, NP_ERR_RANGE, "a %" PRIu32 "x%" PRIu32 " mesh of %" PRIu32
                          " VCs x %" PRIu32 " flits is too large to simulate", p->kx, p->ky,
                          p->vcs, p->buf_flits);
    mesh *m = calloc(1, sizeof *m);
    if (!m)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating a mesh");
    m->p = *p;
    m->n = p->kx * p->ky;
    size_t nvc = (size_t)m->n * NP * p->vcs;
    m->ivc = calloc(nvc, sizeof *m->ivc);
    m->buf = calloc(nvc * p->buf_flits, sizeof *m->buf);
    m->ovc = calloc(nvc, sizeof *m->ovc);
    m->inj = calloc((size_t)m->n * p->vcs, sizeof *m->inj);
    m->ret = calloc((nvc + (size_t)m->n * p->vcs) * p->buf_flits, sizeof *m->ret);
    m->occ = calloc(m->n, sizeof *m->occ);
    m->vmask = calloc((size_t)m->n * NP, sizeof *m->vmask);
    m->rr_vc = calloc((size_t)m->n * NP, 1);
    m->rr_in = calloc((size_t)m->n * NP, 1);
    m->rr_ovc = calloc((size_t)m->n * NP, 1);
    m->rr_inj = calloc(m->n, 1);
    m->nb = calloc((size_t)m->n * NP, sizeof *m->nb);
    m->srcq = calloc(m->n, sizeof *m->srcq);
    m->free_pkt = UINT32_MAX;
    if (!m->ivc || !m->buf || !m->ovc || !m->inj || !m->ret || !m->occ || !m->vmask ||
        !m->rr_vc || !m->rr_in || !m->rr_ovc || !m->rr_inj || !m->nb || !m->srcq)
        goto nomem;
    for (size_t i = 0; i < nvc; i++) {
        m->ivc[i].out_port = -1;
        m->ivc[i].out_vc = -1;
        m->ovc[i].credits = p->buf_flits;
        m->ovc[i].ret_base = (uint32_t)(i * p->buf_flits);
    }
    for (size_t i = 0; i < (size_t)m->n * p->vcs; i++) {
        m->inj[i].credits = p->buf_flits;
        m->inj[i].ret_base = (uint32_t)((nvc + i) * p->buf_flits);
    }
    for (uint32_t r = 0; r < m->n; r++) {
        uint32_t x = r % p->kx, y = r / p->kx;
        int32_t *nb = &m->nb[(size_t)r * NP];
        nb[MESH_PORT_LOCAL] = -1;
        nb[MESH_PORT_XPLUS] = x + 1 < p->kx ? (int32_t)(r + 1) : -1;
        nb[MESH_PORT_XMINUS] = x > 0 ? (int32_t)(r - 1) : -1;
        nb[MESH_PORT_YPLUS] = y + 1 < p->ky ? (int32_t)(r + p->kx) : -1;
        nb[MESH_PORT_YMINUS] = y > 0 ? (int32_t)(r - p->kx) : -1;
    }
    m->own_links = calloc((size_t)m->n * NP, sizeof *m->own_links);
    m->links = calloc((size_t)m->n * NP, sizeof *m->links);
    if (!m->own_links || !m->links)
        goto nomem;
    for (size_t i = 0; i < (size_t)m->n * NP; i++)
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
    return m->tot.packets_created == m->tot.packets_delivered;
}

uint64_t mesh_link_flits(const mesh *m, uint32_t r, int port)
{
    return m->links[(size_t)r * NP + (size_t)port]->value;
}

void mesh_reset_link_counts(mesh *m)
{
    for (size_t i = 0; i < (size_t)m->n * NP; i++)
        m->links[i]->value = 0;
}

void mesh_get_totals(const mesh *m, mesh_totals *t) { *t = m->tot; }

static void mesh_wake(mesh *m);

np_status mesh_send(mesh *m, uint32_t src, uint32_t dst, uint32_t flits, uint64_t tag,
                    np_err *err)
{
    if (src >= m->n || dst >= m->n)
        return np_err_set(err, NP_ERR_RANGE, "mesh packet %" PRIu32 " -> %" PRIu32
                          ": the mesh has endpoints 0 .. %" PRIu32, src, dst, m->n - 1);
    if (flits == 0)
        return np_err_set(err, NP_ERR_RANGE, "a mesh packet has at least one flit");
    mesh_queue *q = &m->srcq[src];
    if (q->n == q->cap) {
        uint32_t cap = q->cap ? q->cap * 2 : 16;
        uint32_t *v = malloc((size_t)cap * sizeof *v);
        if (!v)
            return np_err_set(err, NP_ERR_NOMEM, "out of memory queueing a packet");
        for (uint32_t i = 0; i < q->n; i++)
            v[i] = q->v[(q->head + i) % q->cap];
        free(q->v);
        q->v = v;
        q->head = 0;
        q->cap = cap;
    }
    uint32_t id = m->free_pkt;
    if (id == UINT32_MAX) {
        if (m->n_pkts == m->cap_pkts) {
            uint32_t cap = m->cap_pkts ? m->cap_pkts * 2 : 256;
            mesh_pkt *v = realloc(m->pkts, (size_t)cap * sizeof *v);
            if (!v)
                return np_err_set(err, NP_ERR_NOMEM, "out of memory creating a packet");
            m->pkts = v;
            m->cap_pkts = cap;
        }
        id = m->n_pkts++;
    } else {
        m->free_pkt = m->pkts[id].next_free;
    }
    if (m->q && !m->scheduled && mesh_idle(m)) {
        uint64_t c = clk_cycle_at_or_after(m->clk, evq_now(m->q));
        if (c > m->cycle)
            m->cycle = c;
    }
    mesh_pkt *p = &m->pkts[id];
    *p = (mesh_pkt){.src = src, .dst = dst, .flits = flits, .inj_vc = -1, .tag = tag,
                    .t_create = m->cycle, .next_free = UINT32_MAX};
    q->v[(q->head + q->n) % q->cap] = id;
    q->n++;
    m->tot.packets_created++;
    m->tot.flits_created += flits;
    mesh_wake(m);
    return NP_OK;
}

/* The XY output port at router r for a packet to dst. */
static int mesh_route(const mesh *m, uint32_t r, uint32_t dst)
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

static void mesh_deliver_due(mesh *m)
{
    while (m->ej_n && m->ej[m->ej_head].t <= m->cycle) {
        mesh_eject e = m->ej[m->ej_head];
        m->ej_head = (m->ej_head + 1) % m->ej_cap;
        m->ej_n--;
        mesh_pkt *p = &m->pkts[e.pkt];
        if (e.seq != p->recv)
            m->order_errors++;
        p->recv++;
        m->tot.flits_delivered++;
        if (p->recv == p->flits) {
            m->tot.packets_delivered++;
            mesh_packet info = {p->src, p->dst, p->flits, p->tag, p->t_create, p->t_inject,
                                e.t};
            p->next_free = m->free_pkt;
            m->free_pkt = e.pkt;
            if (m->deliver)
                m->deliver(m->deliver_ctx, &info);
        }
    }
}

/* Queues a flit for delivery at cycle t. The ring grows as needed; on allocation failure the
 * flit is counted as lost, which mesh_verify reports. */
static void mesh_eject_push(mesh *m, uint64_t t, uint32_t pkt, uint32_t seq)
{
    if (m->ej_n == m->ej_cap) {
        uint32_t cap = m->ej_cap ? m->ej_cap * 2 : 256;
        mesh_eject *v = malloc((size_t)cap * sizeof *v);
        if (!v) {
            m->order_errors++;
            return;
        }
        for (uint32_t i = 0; i < m->ej_n; i++)
            v[i] = m->ej[(m->ej_head + i) % m->ej_cap];
        free(m->ej);
        m->ej = v;
        m->ej_head = 0;
        m->ej_cap = cap;
    }
    m->ej[(m->ej_head + m->ej_n) % m->ej_cap] = (mesh_eject){t, pkt, seq};
    m->ej_n++;
}

static void mesh_inject(mesh *m, uint32_t r)
{
    mesh_queue *q = &m->srcq[r];
    if (q->n == 0)
        return;
    uint32_t id = q->v[q->head];
    mesh_pkt *p = &m->pkts[id];
    uint32_t V = m->p.vcs;
    if (p->inj_vc < 0) {
        for (uint32_t i = 0; i < V; i++) {
            uint32_t v = (m->rr_inj[r] + i) % V;
            if (!m->inj[(size_t)r * V + v].busy) {
                p->inj_vc = (int32_t)v;
                m->inj[(size_t)r * V + v].busy = 1;
                m->rr_inj[r] = (uint8_t)((v + 1) % V);
                break;
            }
        }
        if (p->inj_vc < 0)
            return;
    }
    mesh_ovc *o = &m->inj[(size_t)r * V + (uint32_t)p->inj_vc];
    if (!ovc_has_credit(m, o))
        return;
    o->credits--;
    if (p->sent == 0)
        p->t_inject = m->cycle;
    mesh_flit f = {id, p->sent, m->cycle + m->p.link_cycles + m->p.router_cycles};
    ivc_push(m, r, MESH_PORT_LOCAL, (uint32_t)p->inj_vc, f);
    m->occ[r]++;
    m->tot.flits_injected++;
    p->sent++;
    if (p->sent == p->flits) {
        o->busy = 0;
        q->head = (q->head + 1) % q->cap;
        q->n--;
        if (m->on_sent) {
            mesh_packet info = {p->src, p->dst, p->flits, p->tag, p->t_create, p->t_inject,
                                m->cycle};
            m->on_sent(m->on_sent_ctx, &info);
        }
    }
}

static void mesh_traverse(mesh *m, uint32_t r, int ip, uint32_t v, int op)
{
    size_t vi = vc_index(m, r, ip, v);
    mesh_ivc *iv = &m->ivc[vi];
    int16_t ov = iv->out_vc;
    mesh_flit f = ivc_pop(m, r, ip, v);
    m->occ[r]--;
    uint64_t now = m->cycle, L = m->p.link_cycles;
    /* The freed slot's credit goes back upstream. */
    uint64_t back_at = now + L + m->p.credit_delay;
    if (ip == MESH_PORT_LOCAL)
        ovc_return_credit(m, &m->inj[(size_t)r * m->p.vcs + v], back_at);
    else { /* input port ip came in travelling that way: upstream is the other way */
        static const int back[NP] = {MESH_PORT_LOCAL, MESH_PORT_XMINUS, MESH_PORT_XPLUS,
                                     MESH_PORT_YMINUS, MESH_PORT_YPLUS};
        uint32_t up = (uint32_t)m->nb[(size_t)r * NP + (size_t)back[ip]];
        ovc_return_credit(m, &m->ovc[vc_index(m, up, ip, v)], back_at);
    }
    m->links[(size_t)r * NP + (size_t)op]->value++;
    bool tail = f.seq + 1 == m->pkts[f.pkt].flits;
    if (op == MESH_PORT_LOCAL) {
        mesh_eject_push(m, now + L, f.pkt, f.seq);
    } else {
        mesh_ovc *o = &m->ovc[vc_index(m, r, op, (uint32_t)ov)];
        o->credits--;
        uint32_t d = (uint32_t)m->nb[(size_t)r * NP + (size_t)op];
        f.ready = now + L + m->p.router_cycles;
        ivc_push(m, d, op, (uint32_t)ov, f);
        m->occ[d]++;
        if (tail) {
            if (m->p.wait_tail_credit)
                o->draining = 1;
            else
                o->busy = 0;
        }
    }
    if (tail) {
        iv->out_port = -1;
        iv->out_vc = -1;
    }
}

static void mesh_router_step(mesh *m, uint32_t r)
{
    uint32_t V = m->p.vcs, S = m->p.input_speedup > 1 ? m->p.input_speedup : 1;
    uint64_t all = V == 64 ? ~0ULL : (1ULL << V) - 1;
    int chosen[NP * 6];      /* per crossbar input (ip * S + g): its VC, valid when in `have` */
    uint32_t have = 0;       /* bit (ip * S + g): that crossbar input has a candidate */
    uint32_t req[NP] = {0};  /* bit (ip * S + g) set: that crossbar input requests output */
    for (int ip = 0; ip < NP; ip++) {
        uint64_t mask = m->vmask[(size_t)r * NP + ip];
        if (!mask)
            continue;
        uint32_t start = m->rr_vc[(size_t)r * NP + ip], found = 0;
        size_t base = ((size_t)r * NP + (size_t)ip) * V;
        /* the non-empty VCs in round-robin order from `start` */
        uint64_t rot = start ? ((mask >> start) | (mask << (V - start))) & all : mask;
        while (rot && found < S) {
            uint32_t v = start + (uint32_t)__builtin_ctzll(rot);
            rot &= rot - 1;
            if (v >= V)
                v -= V;
            int slot = ip * (int)S + (S == 1 ? 0 : (int)(v % S));
            if (have & (1u << slot))
                continue;
            size_t vi = base + v;
            mesh_ivc *iv = &m->ivc[vi];
            if (iv->front_ready > m->cycle)
                continue;
            if (iv->out_port < 0) {
                const mesh_flit *f = &m->buf[vi * m->p.buf_flits + iv->head];
                iv->out_port = (int8_t)mesh_route(m, r, m->pkts[f->pkt].dst);
            }
            int op = iv->out_port;
            if (op != MESH_PORT_LOCAL) {
                if (iv->out_vc < 0) { /* VC allocation: the next free output VC */
                    uint8_t *rr = &m->rr_ovc[(size_t)r * NP + op];
                    size_t obase = ((size_t)r * NP + (size_t)op) * V;
                    for (uint32_t k = 0, w = *rr; k < V; k++, w = w + 1 == V ? 0 : w + 1) {
                        mesh_ovc *o = &m->ovc[obase + w];
                        if (ovc_free(m, o)) {
                            o->busy = 1;
                            iv->out_vc = (int16_t)w;
                            *rr = (uint8_t)(w + 1 == V ? 0 : w + 1);
                            break;
                        }
                    }
                    if (iv->out_vc < 0)
                        continue;
                }
                if (!ovc_has_credit(m, &m->ovc[((size_t)r * NP + (size_t)op) * V +
                                               (size_t)iv->out_vc]))
                    continue;
            }
            chosen[slot] = (int)v;
            have |= 1u << slot;
            req[op] |= 1u << slot;
            found++;
        }
    }
    int n_in = NP * (int)S;
    for (int op = 0; op < NP; op++) {
        uint32_t q = req[op];
        if (!q)
            continue;
        uint8_t *rr = &m->rr_in[(size_t)r * NP + op];
        uint32_t above = q >> *rr; /* round robin: the first requester at or after *rr */
        int slot = above ? *rr + __builtin_ctz(above) : __builtin_ctz(q);
        int ip = S == 1 ? slot : slot / (int)S;
        mesh_traverse(m, r, ip, (uint32_t)chosen[slot], op);
        *rr = (uint8_t)(slot + 1 == n_in ? 0 : slot + 1);
        m->rr_vc[(size_t)r * NP + ip] =
            (uint8_t)(chosen[slot] + 1 == (int)V ? 0 : chosen[slot] + 1);
    }
}

void mesh_step(mesh *m)
{
    mesh_deliver_due(m);
    for (uint32_t r = 0; r < m->n; r++)
        mesh_inject(m, r);
    for (uint32_t r = 0; r < m->n; r++)
        if (m->occ[r])
            mesh_router_step(m, r);
    m->cycle++;
}

np_status mesh_verify(const mesh *m, np_err *err)
{
    uint32_t V = m->p.vcs, B = m->p.buf_flits;
    uint64_t queued = 0, buffered = 0;
    for (uint32_t r = 0; r < m->n; r++) {
        const mesh_queue *q = &m->srcq[r];
        for (uint32_t i = 0; i < q->n; i++) {
            const mesh_pkt *p = &m->pkts[q->v[(q->head + i) % q->cap]];
            queued += p->flits - p->sent;
        }
        uint64_t occ = 0;
        for (int pt = 0; pt < NP; pt++)
            for (uint32_t v = 0; v < V; v++) {
                size_t vi = vc_index(m, r, pt, v);
                occ += m->ivc[vi].count;
                if (m->ivc[vi].count > B)
                    return np_err_set(err, NP_ERR_INTERNAL, "router %" PRIu32 " port %s VC %"
                                      PRIu32 " holds %" PRIu32 " flits, more than its %" PRIu32,
                                      r, mesh_port_names[pt], v, m->ivc[vi].count, B);
                const mesh_ovc *o = pt == MESH_PORT_LOCAL ? &m->inj[(size_t)r * V + v]
                                                          : &m->ovc[vi];
                int32_t d = pt == MESH_PORT_LOCAL ? (int32_t)r : m->nb[(size_t)r * NP + pt];
                if (d < 0)
                    continue;
                uint32_t down = m->ivc[vc_index(m, (uint32_t)d, pt, v)].count;
                if (o->credits + o->ret_n + down != B)
                    return np_err_set(err, NP_ERR_INTERNAL,
                                      "credits broken at router %" PRIu32 " %s VC %" PRIu32
                                      ": %" PRIu32 " credits + %" PRIu32 " returning + %" PRIu32
                                      " buffered != %" PRIu32,
                                      r, mesh_port_names[pt], v, o->credits, o->ret_n, down, B);
            }
        if (occ != m->occ[r])
            return np_err_set(err, NP_ERR_INTERNAL, "router %" PRIu32 " counts %" PRIu32
                              " flits but holds %" PRIu64, r, m->occ[r], occ);
        buffered += occ;
    }
    if (m->order_errors)
        return np_err_set(err, NP_ERR_INTERNAL, "%" PRIu64 " flits were delivered out of "
                          "order, twice, or lost", m->order_errors);
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

/* ---- Driving the mesh from an event queue ---------------------------------------------- */

static void mesh_tick(evq *q, void *ctx, uint64_t arg)
{
    (void)arg;
    mesh *m = ctx;
    uint64_t c = clk_ps_to_cycles(m->clk, evq_now(q));
    if (c > m->cycle)
        m->cycle = c;
    mesh_step(m); /* `scheduled` stays set: a send from a delivery callback waits for below */
    m->scheduled = false;
    mesh_wake(m);
}

/* Schedules the next cycle's tick when attached, not yet scheduled, and there is work. */
static void mesh_wake(mesh *m)
{
    if (!m->q || m->scheduled || mesh_idle(m))
        return;
    uint64_t t = clk_cycles_to_ps(m->clk, m->cycle);
    if (t < evq_now(m->q))
        t = evq_now(m->q);
    np_err e;
    if (evq_schedule_at(m->q, t, mesh_tick, m, 0, NULL, &e) == NP_OK)
        m->scheduled = true;
}

np_status mesh_attach(mesh *m, evq *q, const clk_domain *clk, np_err *err)
{
    (void)err;
    m->q = q;
    m->clk = clk;
    mesh_wake(m);
    return NP_OK;
}
