/* net.c — the chip-to-chip network's graph and its flow model (see net.h).
 *
 * Flow life cycle (one state machine per transfer):
 *
 *   net_transfer ──► ACTIVE ──(last byte sent: net_flow_finish)──► IN_FLIGHT
 *                      │  ▲  re-rated by net_rerate whenever a flow     │
 *                      └──┘  sharing a link (transitively) starts/ends  │
 *                                            (path latency later: net_flow_deliver) ──► FREE
 *
 * Only ACTIVE flows hold links (appear in their links' flow lists) and have a rate. A flow's
 * remaining bytes are brought up to date (remaining -= rate x elapsed) before every re-rate,
 * and its finish event is rescheduled for the new rate. Re-rating touches only the connected
 * component (links <-> flows) of the flow that started or ended, so independent transfers
 * (a ring's neighbours) cost O(1) each.
 */
#include "net.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NET_INLINE_PATH 6
#define FLINKS(f) ((f)->ext ? (f)->ext : (f)->inline_links)

typedef struct net_link {
    uint32_t from, to;
    double bw;          /* bytes per ps */
    uint64_t lat_ps;
    uint32_t *flows;    /* active flows on this link */
    uint32_t n_flows, cap_flows;
    uint64_t bytes;
    stats_counter *ctr; /* in the registry, or NULL */
    /* water-filling scratch */
    uint64_t mark;
    double cap_rem;
    uint32_t n_unfrozen;
} net_link;

typedef enum net_flow_state { NET_FLOW_FREE, NET_FLOW_ACTIVE, NET_FLOW_IN_FLIGHT } net_flow_state;

typedef struct net_flow {
    uint32_t *ext;   /* the path when longer than NET_INLINE_PATH links, else NULL */
    uint32_t inline_links[NET_INLINE_PATH];
    uint32_t n_links;
    net_flow_state state;
    double remaining, rate; /* bytes; bytes per ps */
    uint64_t t_last, lat_ps, bytes;
    evq_handle fin;
    net_transfer_fn fn;
    void *ctx;
    uint64_t arg;
    uint64_t mark;
    uint8_t frozen;
    uint32_t next_free;
} net_flow;

typedef struct net_scratch {
    uint32_t *v;
    uint32_t n, cap;
    bool oom;
} net_scratch;

struct net {
    net_params p;
    const net_topo_ops *topo;
    void *topo_data;
    evq *q;
    uint32_t n_nodes;
    uint64_t *node_lat; /* per node: switch latency (0 for chips) */
    uint32_t cap_nodes;
    net_link *links;
    uint32_t n_links, cap_links;
    net_flow *flows;
    uint32_t n_flows, cap_flows, free_flow;
    uint32_t active;
    uint64_t started;
    uint64_t epoch;
    net_scratch *path;                 /* route being built */
    uint32_t *comp_links, *comp_flows; /* component scratch */
    uint32_t cap_comp_links, cap_comp_flows;
    bool oom;
};

/* ---- Graph ------------------------------------------------------------------------------- */

void net_params_from_arch(const arch_config *cfg, net_params *p)
{
    const arch_system *s = &cfg->system;
    memset(p, 0, sizeof *p);
    p->topology = s->topology;
    p->chips = (uint32_t)s->chips;
    if (s->topology == ARCH_TOPOLOGY_RING) {
        p->dims[0] = p->chips;
        p->dims[1] = p->dims[2] = 1;
    } else {
        p->dims[0] = (uint32_t)s->torus_x;
        p->dims[1] = (uint32_t)s->torus_y;
        p->dims[2] = s->topology == ARCH_TOPOLOGY_TORUS3D ? (uint32_t)s->torus_z : 1;
    }
    p->island_chips = (uint32_t)s->island_chips;
    p->links_per_chip = (uint32_t)s->links_per_chip;
    p->switch_radix = (uint32_t)s->switch_radix;
    p->link_bytes_per_s = s->link_gb_per_s * 1e9;
    p->link_latency_ps = (uint64_t)llround(s->link_latency_ns * 1000.0);
    p->switch_latency_ps = (uint64_t)llround(s->switch_latency_ns * 1000.0);
    p->scaleout_bytes_per_s = s->scaleout_gb_per_s * 1e9;
    p->scaleout_latency_ps = (uint64_t)llround(s->scaleout_latency_ns * 1000.0);
}

uint32_t net_add_switch(net *n, uint64_t latency_ps)
{
    if (n->n_nodes == n->cap_nodes) {
        uint32_t cap = n->cap_nodes * 2;
        uint64_t *v = realloc(n->node_lat, (size_t)cap * sizeof *v);
        if (!v) {
            n->oom = true;
            return UINT32_MAX;
        }
        n->node_lat = v;
        n->cap_nodes = cap;
    }
    n->node_lat[n->n_nodes] = latency_ps;
    return n->n_nodes++;
}

uint32_t net_add_link(net *n, uint32_t from, uint32_t to, double bytes_per_s, uint64_t lat_ps)
{
    if (n->n_links == n->cap_links) {
        uint32_t cap = n->cap_links ? n->cap_links * 2 : 64;
        net_link *v = realloc(n->links, (size_t)cap * sizeof *v);
        if (!v) {
            n->oom = true;
            return UINT32_MAX;
        }
        n->links = v;
        n->cap_links = cap;
    }
    n->links[n->n_links] = (net_link){.from = from, .to = to, .bw = bytes_per_s / 1e12,
                                      .lat_ps = lat_ps};
    return n->n_links++;
}

uint32_t net_link_between(const net *n, uint32_t a, uint32_t b)
{
    for (uint32_t i = 0; i < n->n_links; i++)
        if (n->links[i].from == a && n->links[i].to == b)
            return i;
    return UINT32_MAX;
}

void net_path_push(const net *n, uint32_t link)
{
    net_scratch *s = n->path;
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 64;
        uint32_t *v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v) {
            s->oom = true;
            return;
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = link;
}

void net_set_topo_data(net *n, void *data) { n->topo_data = data; }
void *net_topo_data(const net *n) { return n->topo_data; }
uint32_t net_chips(const net *n) { return n->p.chips; }
uint32_t net_nodes(const net *n) { return n->n_nodes; }
uint32_t net_links(const net *n) { return n->n_links; }
const net_params *net_get_params(const net *n) { return &n->p; }
evq *net_evq(const net *n) { return n->q; }
uint64_t net_transfers_started(const net *n) { return n->started; }
uint32_t net_flows_active(const net *n) { return n->active; }

char *net_link_name(const net *n, uint32_t link, char *buf, size_t len)
{
    const net_link *l = &n->links[link];
    uint32_t twin = 0; /* earlier links between the same two nodes (a 2-chip ring has two) */
    for (uint32_t i = 0; i < link; i++)
        twin += n->links[i].from == l->from && n->links[i].to == l->to;
    int k = snprintf(buf, len, "%s%" PRIu32 "->%s%" PRIu32, l->from < n->p.chips ? "chip" : "sw",
                     l->from < n->p.chips ? l->from : l->from - n->p.chips,
                     l->to < n->p.chips ? "chip" : "sw",
                     l->to < n->p.chips ? l->to : l->to - n->p.chips);
    if (twin && k >= 0 && (size_t)k < len)
        snprintf(buf + k, len - (size_t)k, "#%" PRIu32, twin);
    return buf;
}

void net_link_get(const net *n, uint32_t link, net_link_info *out)
{
    const net_link *l = &n->links[link];
    *out = (net_link_info){l->from, l->to, l->bw * 1e12, l->lat_ps, l->bytes, l->n_flows};
}

void net_free(net *n)
{
    if (!n)
        return;
    for (uint32_t i = 0; i < n->n_links; i++)
        free(n->links[i].flows);
    for (uint32_t i = 0; i < n->n_flows; i++)
        free(n->flows[i].ext);
    free(n->links);
    free(n->flows);
    free(n->node_lat);
    if (n->path)
        free(n->path->v);
    free(n->path);
    free(n->comp_links);
    free(n->comp_flows);
    if (n->topo_data) {
        if (n->topo && n->topo->free_data)
            n->topo->free_data(n->topo_data);
        else
            free(n->topo_data);
    }
    free(n);
}

np_status net_create(const net_params *p, evq *q, stats *reg, net **out, np_err *err)
{
    if (p->chips < 1)
        return np_err_set(err, NP_ERR_RANGE, "a chip network needs at least one chip");
    if (!(p->link_bytes_per_s > 0) || !(p->scaleout_bytes_per_s > 0))
        return np_err_set(err, NP_ERR_RANGE, "chip link bandwidths must be positive");
    net *n = calloc(1, sizeof *n);
    if (!n)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating a chip network");
    n->p = *p;
    n->q = q;
    n->free_flow = UINT32_MAX;
    n->topo = net_topo_get(p->topology);
    n->cap_nodes = p->chips + 16;
    n->node_lat = calloc(n->cap_nodes, sizeof *n->node_lat);
    n->path = calloc(1, sizeof *n->path);
    if (!n->topo) {
        net_free(n);
        return np_err_set(err, NP_ERR_RANGE, "unknown topology %d", (int)p->topology);
    }
    if (!n->node_lat || !n->path) {
        net_free(n);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory creating a chip network");
    }
    n->n_nodes = p->chips;
    if (p->chips > 1 && n->topo->build(n, p, err) != NP_OK) {
        net_free(n);
        return err->status;
    }
    if (n->oom) {
        net_free(n);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building a %s of %" PRIu32 " chips",
                          n->topo->name, p->chips);
    }
    for (uint32_t i = 0; reg && i < n->n_links; i++) {
        char name[64], comp[96], desc[128];
        net_link_name(n, i, name, sizeof name);
        snprintf(comp, sizeof comp, "c2c.%s", name);
        snprintf(desc, sizeof desc, "bytes carried on chip network link %s", name);
        n->links[i].ctr = stats_new_counter(reg, comp, "bytes", "bytes", desc, err);
        if (!n->links[i].ctr) {
            net_free(n);
            return err->status;
        }
    }
    *out = n;
    return NP_OK;
}

np_status net_route(net *n, uint32_t src, uint32_t dst, net_path_info *out, np_err *err)
{
    if (src >= n->p.chips || dst >= n->p.chips)
        return np_err_set(err, NP_ERR_RANGE, "chips %" PRIu32 " -> %" PRIu32 ": the network "
                          "has chips 0 .. %" PRIu32, src, dst, n->p.chips - 1);
    n->path->n = 0;
    n->path->oom = false;
    if (src != dst)
        n->topo->route(n, src, dst);
    if (n->path->oom)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory routing");
    out->links = n->path->v;
    out->n_links = n->path->n;
    out->latency_ps = 0;
    out->bytes_per_s = INFINITY;
    for (uint32_t i = 0; i < out->n_links; i++) {
        const net_link *l = &n->links[out->links[i]];
        out->latency_ps += l->lat_ps;
        if (i > 0)
            out->latency_ps += n->node_lat[l->from];
        if (l->bw * 1e12 < out->bytes_per_s)
            out->bytes_per_s = l->bw * 1e12;
    }
    return NP_OK;
}

/* ---- Flows -------------------------------------------------------------------------------- */

static void net_flow_finish(evq *q, void *ctx, uint64_t arg);
static void net_flow_deliver(evq *q, void *ctx, uint64_t arg);

static bool net_comp_reserve(net *n, uint32_t links, uint32_t flows)
{
    if (links > n->cap_comp_links) {
        uint32_t cap = links * 2;
        uint32_t *v = realloc(n->comp_links, (size_t)cap * sizeof *v);
        if (!v)
            return false;
        n->comp_links = v;
        n->cap_comp_links = cap;
    }
    if (flows > n->cap_comp_flows) {
        uint32_t cap = flows * 2;
        uint32_t *v = realloc(n->comp_flows, (size_t)cap * sizeof *v);
        if (!v)
            return false;
        n->comp_flows = v;
        n->cap_comp_flows = cap;
    }
    return true;
}

/* Reschedules flow f's finish for its (new) rate at time now. */
static void net_flow_schedule(net *n, uint32_t id, uint64_t now)
{
    net_flow *f = &n->flows[id];
    evq_cancel(n->q, f->fin);
    double dt = f->remaining > 0 ? ceil(f->remaining / f->rate) : 0;
    uint64_t t = now + (dt > 1e18 ? (uint64_t)1e18 : (uint64_t)dt);
    np_err e;
    if (evq_schedule_at(n->q, t, net_flow_finish, n, id, &f->fin, &e) != NP_OK)
        n->oom = true;
}

/* Re-rates every active flow in the component reachable from the given links (max-min fair,
 * by water filling) and reschedules their finish events. */
static void net_rerate(net *n, const uint32_t *seed_links, uint32_t n_seed)
{
    uint64_t now = evq_now(n->q);
    uint64_t ep = ++n->epoch;
    uint32_t nl = 0, nf = 0;
    /* Collect the component: BFS over links and flows. */
    if (!net_comp_reserve(n, n_seed + 16, 16)) {
        n->oom = true;
        return;
    }
    for (uint32_t i = 0; i < n_seed; i++) {
        net_link *l = &n->links[seed_links[i]];
        if (l->mark != ep) {
            l->mark = ep;
            n->comp_links[nl++] = seed_links[i];
        }
    }
    for (uint32_t li = 0; li < nl; li++) {
        net_link *l = &n->links[n->comp_links[li]];
        for (uint32_t k = 0; k < l->n_flows; k++) {
            uint32_t fid = l->flows[k];
            net_flow *f = &n->flows[fid];
            if (f->mark == ep)
                continue;
            f->mark = ep;
            if (!net_comp_reserve(n, nl + f->n_links + 1, nf + 1)) {
                n->oom = true;
                return;
            }
            n->comp_flows[nf++] = fid;
            for (uint32_t j = 0; j < f->n_links; j++) {
                net_link *m = &n->links[FLINKS(f)[j]];
                if (m->mark != ep) {
                    m->mark = ep;
                    n->comp_links[nl++] = FLINKS(f)[j];
                }
            }
            l = &n->links[n->comp_links[li]]; /* (comp arrays may have moved; links did not) */
        }
    }
    if (nf == 0)
        return;
    /* Bring the flows' remaining bytes up to now; reset the water-filling state. */
    for (uint32_t i = 0; i < nf; i++) {
        net_flow *f = &n->flows[n->comp_flows[i]];
        f->remaining -= f->rate * (double)(now - f->t_last);
        if (f->remaining < 0)
            f->remaining = 0;
        f->t_last = now;
        f->frozen = 0;
    }
    uint32_t live = 0; /* links with unfrozen flows, packed at the front of comp_links */
    for (uint32_t i = 0; i < nl; i++) {
        net_link *l = &n->links[n->comp_links[i]];
        l->cap_rem = l->bw;
        l->n_unfrozen = l->n_flows;
        if (l->n_flows)
            n->comp_links[live++] = n->comp_links[i];
    }
    while (live > 0) {
        uint32_t best = 0;
        double share = INFINITY;
        for (uint32_t i = 0; i < live; i++) {
            net_link *l = &n->links[n->comp_links[i]];
            double s = l->cap_rem / l->n_unfrozen;
            if (s < share) {
                share = s;
                best = i;
            }
        }
        if (share < 1e-15)
            share = 1e-15; /* rounding: never let a flow stop */
        net_link *bl = &n->links[n->comp_links[best]];
        for (uint32_t k = 0; k < bl->n_flows; k++) {
            net_flow *f = &n->flows[bl->flows[k]];
            if (f->frozen)
                continue;
            f->frozen = 1;
            f->rate = share;
            for (uint32_t j = 0; j < f->n_links; j++) {
                net_link *m = &n->links[FLINKS(f)[j]];
                m->cap_rem -= share;
                m->n_unfrozen--;
            }
        }
        for (uint32_t i = 0; i < live;) { /* drop links whose flows are all frozen */
            if (n->links[n->comp_links[i]].n_unfrozen == 0)
                n->comp_links[i] = n->comp_links[--live];
            else
                i++;
        }
    }
    for (uint32_t i = 0; i < nf; i++)
        net_flow_schedule(n, n->comp_flows[i], now);
}

static uint32_t net_flow_alloc(net *n)
{
    uint32_t id = n->free_flow;
    if (id != UINT32_MAX) {
        n->free_flow = n->flows[id].next_free;
        return id;
    }
    if (n->n_flows == n->cap_flows) {
        uint32_t cap = n->cap_flows ? n->cap_flows * 2 : 64;
        net_flow *v = realloc(n->flows, (size_t)cap * sizeof *v);
        if (!v)
            return UINT32_MAX;
        n->flows = v;
        n->cap_flows = cap;
    }
    id = n->n_flows++;
    n->flows[id] = (net_flow){.ext = NULL};
    return id;
}

static bool net_link_add_flow(net_link *l, uint32_t fid)
{
    if (l->n_flows == l->cap_flows) {
        uint32_t cap = l->cap_flows ? l->cap_flows * 2 : 4;
        uint32_t *v = realloc(l->flows, (size_t)cap * sizeof *v);
        if (!v)
            return false;
        l->flows = v;
        l->cap_flows = cap;
    }
    l->flows[l->n_flows++] = fid;
    return true;
}

static void net_link_remove_flow(net_link *l, uint32_t fid)
{
    for (uint32_t k = 0; k < l->n_flows; k++)
        if (l->flows[k] == fid) {
            l->flows[k] = l->flows[--l->n_flows];
            return;
        }
}

np_status net_transfer(net *n, uint32_t src, uint32_t dst, uint64_t bytes, net_transfer_fn fn,
                       void *ctx, uint64_t arg, np_err *err)
{
    net_path_info path;
    if (net_route(n, src, dst, &path, err) != NP_OK)
        return err->status;
    uint32_t id = net_flow_alloc(n);
    if (id == UINT32_MAX)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a transfer");
    net_flow *f = &n->flows[id];
    uint32_t nlinks = bytes ? path.n_links : 0;
    if (nlinks > NET_INLINE_PATH) {
        f->ext = malloc((size_t)nlinks * sizeof *f->ext);
        if (!f->ext) {
            f->next_free = n->free_flow;
            n->free_flow = id;
            return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a transfer");
        }
    }
    memcpy(FLINKS(f), path.links, (size_t)nlinks * sizeof *path.links);
    f->n_links = nlinks;
    f->state = NET_FLOW_ACTIVE;
    f->remaining = (double)bytes;
    f->bytes = bytes;
    f->rate = 0;
    f->t_last = evq_now(n->q);
    f->lat_ps = path.latency_ps;
    f->fn = fn;
    f->ctx = ctx;
    f->arg = arg;
    f->fin = EVQ_HANDLE_NONE;
    n->started++;
    n->active++;
    for (uint32_t j = 0; j < nlinks; j++)
        if (!net_link_add_flow(&n->links[FLINKS(f)[j]], id)) {
            for (uint32_t k = 0; k < j; k++)
                net_link_remove_flow(&n->links[FLINKS(f)[k]], id);
            free(f->ext);
            f->ext = NULL;
            f->state = NET_FLOW_FREE;
            f->next_free = n->free_flow;
            n->free_flow = id;
            n->active--;
            return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a transfer");
        }
    if (nlinks == 0) {
        /* Nothing to share: the last byte is "sent" now. */
        if (evq_schedule_at(n->q, evq_now(n->q), net_flow_finish, n, id, &f->fin, err) != NP_OK)
            return err->status;
        return NP_OK;
    }
    net_rerate(n, FLINKS(f), nlinks);
    if (n->oom)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory re-rating flows");
    return NP_OK;
}

static void net_flow_finish(evq *q, void *ctx, uint64_t arg)
{
    net *n = ctx;
    uint32_t id = (uint32_t)arg;
    net_flow *f = &n->flows[id];
    f->fin = EVQ_HANDLE_NONE;
    f->state = NET_FLOW_IN_FLIGHT;
    f->remaining = 0;
    n->active--;
    for (uint32_t j = 0; j < f->n_links; j++) {
        net_link *l = &n->links[FLINKS(f)[j]];
        net_link_remove_flow(l, id);
        l->bytes += f->bytes;
        if (l->ctr)
            l->ctr->value += f->bytes;
    }
    if (f->n_links)
        net_rerate(n, FLINKS(f), f->n_links);
    np_err e;
    if (evq_schedule_in(q, f->lat_ps, net_flow_deliver, n, id, NULL, &e) != NP_OK)
        n->oom = true;
    if (f->fn)
        f->fn(f->ctx, f->arg, NET_EVENT_SENT);
}

static void net_flow_deliver(evq *q, void *ctx, uint64_t arg)
{
    (void)q;
    net *n = ctx;
    uint32_t id = (uint32_t)arg;
    net_flow *f = &n->flows[id];
    net_transfer_fn fn = f->fn;
    void *fctx = f->ctx;
    uint64_t farg = f->arg;
    free(f->ext);
    f->ext = NULL;
    f->state = NET_FLOW_FREE;
    f->next_free = n->free_flow;
    n->free_flow = id;
    if (fn)
        fn(fctx, farg, NET_EVENT_DELIVERED);
}

uint32_t net_flows_list(const net *n, net_flow_info *out, uint32_t max)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n->n_flows; i++) {
        const net_flow *f = &n->flows[i];
        if (f->state != NET_FLOW_ACTIVE)
            continue;
        if (k < max)
            out[k] = (net_flow_info){f->ctx, f->arg, f->rate * 1e12, f->remaining};
        k++;
    }
    return k;
}

np_status net_verify(const net *n, np_err *err)
{
    if (n->oom)
        return np_err_set(err, NP_ERR_NOMEM, "the flow model ran out of memory");
    uint32_t active = 0;
    for (uint32_t i = 0; i < n->n_flows; i++) {
        const net_flow *f = &n->flows[i];
        if (f->state != NET_FLOW_ACTIVE)
            continue;
        active++;
        if (f->n_links && !(f->rate > 0))
            return np_err_set(err, NP_ERR_INTERNAL, "active flow %" PRIu32 " has rate %g", i,
                              f->rate);
        for (uint32_t j = 0; j < f->n_links; j++) {
            const net_link *l = &n->links[FLINKS(f)[j]];
            bool found = false;
            for (uint32_t k = 0; k < l->n_flows; k++)
                found |= l->flows[k] == i;
            if (!found)
                return np_err_set(err, NP_ERR_INTERNAL, "flow %" PRIu32 " is missing from "
                                  "link %" PRIu32 "'s list", i, FLINKS(f)[j]);
        }
    }
    if (active != n->active)
        return np_err_set(err, NP_ERR_INTERNAL, "%" PRIu32 " active flows counted, %" PRIu32
                          " found", n->active, active);
    for (uint32_t i = 0; i < n->n_links; i++) {
        const net_link *l = &n->links[i];
        double sum = 0;
        for (uint32_t k = 0; k < l->n_flows; k++)
            sum += n->flows[l->flows[k]].rate;
        if (sum > l->bw * (1 + 1e-9))
            return np_err_set(err, NP_ERR_INTERNAL, "link %" PRIu32 " carries %g bytes/ps, "
                              "more than its %g", i, sum, l->bw);
    }
    return NP_OK;
}
