/* net.c — the chip-to-chip network's graph and its flow model (see net.h).
 *
 * Flow life cycle (one state machine per transfer):
 *
 *                       ┌──(alone on every link of its path)──► EXCLUSIVE ──┐
 *   net_transfer_ex ────┤                                          │        │
 *                       └──(shares a link)──► SHARED ◄─(a flow joins one of │
 *                                               │  ▲    its links before    │
 *                             re-rated when a   └──┘    its last byte)      │
 *                             flow on its links starts or ends              │
 *        (last byte sent: net_flow_finish for SHARED, its known time       │
 *         for EXCLUSIVE) ──► IN_FLIGHT ──(path latency later: deliver)──► FREE
 *
 * EXCLUSIVE flows are the common case (a ring's neighbours, a torus's dimension-order
 * traffic): no other unsent flow is on any of their links, so their rate is the path's
 * bottleneck bandwidth and their sent and delivery times are known when they start — they
 * cost no re-rating and no event of their own (their delivery is an item in a time batch, and
 * so is their SENT notification when the caller wants one). An EXCLUSIVE flow does not join
 * its links' flow lists: it claims each link until its sent time (busy_until, holder), and
 * its bytes count on the links when it starts. Invariant: a link has either a live claim
 * (busy_until > now) or SHARED flows in its list, never both; a flow that finds a live claim
 * on its path turns the holder SHARED (its bytes so far sent at its old rate, its claims
 * replaced by list entries), and joins as SHARED too.
 *
 * SHARED flows hold max-min fair rates, computed by water filling over the connected
 * component (links <-> flows) of what changed. Re-rating is deferred to the end of the
 * current instant (an event at now scheduled by the first change), so many flows starting or
 * ending at one time cost one re-rating; a flow's remaining bytes are brought up to date
 * (remaining -= rate x elapsed) before every re-rate and its finish event rescheduled.
 *
 * Time batches: every callback at one time (deliveries, SENT notifications, net_timer_at)
 * is one evq event for the whole batch, so a thousand chips acting in lockstep cost one event
 * per instant, not one per message. A batch runs its items in insertion order; an item added
 * for the current instant after its batch started goes into a new batch, behind what the
 * event queue already holds for that instant.
 *
 * Routes are cached per (source, destination) up to NET_RC_MAX pairs.
 */
#include "net.h"
#include "net_impl.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    /* payload rates: the line rate less packet headers, flits and CRC (link_efficiency) */
    p->link_bytes_per_s = s->link_gb_per_s * 1e9 * s->link_efficiency;
    p->link_latency_ps = (uint64_t)llround(s->link_latency_ns * 1000.0);
    p->switch_latency_ps = (uint64_t)llround(s->switch_latency_ns * 1000.0);
    p->scaleout_bytes_per_s = s->scaleout_gb_per_s * 1e9 * s->scaleout_efficiency;
    p->scaleout_latency_ps = (uint64_t)llround(s->scaleout_latency_ns * 1000.0);
}

void net_params_to_arch(const net_params *p, arch_config *cfg)
{
    cfg->system.chips = p->chips;
    cfg->system.topology = p->topology;
    cfg->system.torus_x = p->dims[0];
    cfg->system.torus_y = p->dims[1];
    cfg->system.torus_z = p->dims[2];
    cfg->system.links_per_chip = p->links_per_chip;
    cfg->system.switch_radix = p->switch_radix;
    cfg->system.island_chips = p->island_chips;
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
        if (v)
            n->links = v;
        net_link_aux *w = v ? realloc(n->laux, (size_t)cap * sizeof *w) : NULL;
        if (w)
            n->laux = w;
        net_window_peak *pk = w ? realloc(n->lpeak, (size_t)cap * sizeof *pk) : NULL;
        if (!pk) {
            n->oom = true;
            return UINT32_MAX;
        }
        n->lpeak = pk;
        n->cap_links = cap;
    }
    n->links[n->n_links] = (net_link){.from = from, .to = to, .bw = bytes_per_s / 1e12};
    n->laux[n->n_links] = (net_link_aux){.lat_ps = lat_ps};
    n->lpeak[n->n_links] = (net_window_peak){0};
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
uint64_t net_rerates(const net *n) { return n->rerates; }
uint64_t net_event_bytes(const net *n) { return n->ev_bytes; }

uint32_t net_chip_domain(const net *n, uint32_t chip, uint32_t *domain_chips)
{
    *domain_chips = 0;
    return n->topo->domain && n->p.chips > 1 ? n->topo->domain(n, chip, domain_chips) : 0;
}

uint32_t net_chip_switch(const net *n, uint32_t chip)
{
    return n->topo->switch_of && n->p.chips > 1 && chip < n->p.chips
               ? n->topo->switch_of(n, chip) : UINT32_MAX;
}

bool net_is_scaleout(const net *n, uint32_t a, uint32_t b)
{
    if (n->p.topology != ARCH_TOPOLOGY_HIERARCHICAL || a >= n->p.chips || b >= n->p.chips)
        return false;
    uint32_t per;
    return net_chip_domain(n, a, &per) != net_chip_domain(n, b, &per);
}

/* qsort's order of link indices by (from, to, index); its context, the links (net_create is
 * single-threaded) */
static const net_link *net_twin_links;

static int net_twin_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    const net_link *lx = &net_twin_links[x], *ly = &net_twin_links[y];
    if (lx->from != ly->from)
        return lx->from < ly->from ? -1 : 1;
    if (lx->to != ly->to)
        return lx->to < ly->to ? -1 : 1;
    return (x > y) - (x < y);
}

/* Each link's twin count (net_link_aux.twin): links sorted by their ends, then counted along
 * each run of equal ends, in O(L log L) rather than rescanning the earlier links per link. */
static bool net_count_twins(net *n)
{
    uint32_t *ix = malloc(((size_t)n->n_links + 1) * sizeof *ix);
    if (!ix)
        return false;
    for (uint32_t i = 0; i < n->n_links; i++)
        ix[i] = i;
    net_twin_links = n->links;
    qsort(ix, n->n_links, sizeof *ix, net_twin_cmp);
    for (uint32_t k = 0; k < n->n_links; k++) {
        const net_link *l = &n->links[ix[k]];
        bool same = k > 0 && n->links[ix[k - 1]].from == l->from && n->links[ix[k - 1]].to == l->to;
        n->laux[ix[k]].twin = same ? n->laux[ix[k - 1]].twin + 1 : 0;
    }
    free(ix);
    return true;
}

char *net_link_name(const net *n, uint32_t link, char *buf, size_t len)
{
    const net_link *l = &n->links[link];
    uint32_t twin = n->laux[link].twin;
    int k = snprintf(buf, len, "%s%" PRIu32 "->%s%" PRIu32, l->from < n->p.chips ? "chip" : "sw",
                     l->from < n->p.chips ? l->from : l->from - n->p.chips,
                     l->to < n->p.chips ? "chip" : "sw",
                     l->to < n->p.chips ? l->to : l->to - n->p.chips);
    if (twin && k >= 0 && (size_t)k < len)
        snprintf(buf + k, len - (size_t)k, "#%" PRIu32, twin);
    return buf;
}

static bool net_flow_unsent(const net *n, const net_flow *f)
{
    return f->state == NET_FLOW_SHARED || f->state == NET_FLOW_PACKETS ||
           (f->state == NET_FLOW_EXCLUSIVE && f->t_sent > evq_now(n->q));
}

static bool net_link_claimed(const net *n, const net_link *l)
{
    return l->busy_until > evq_now(n->q);
}

void net_link_get(const net *n, uint32_t link, net_link_info *out)
{
    const net_link *l = &n->links[link];
    bool claim = net_link_claimed(n, l);
    uint64_t bytes = l->bytes - (claim ? n->flows[l->holder].bytes : 0); /* counted at start */
    *out = (net_link_info){l->from, l->to, l->bw * 1e12, n->laux[link].lat_ps, bytes,
                           l->n_flows + (claim ? 1 : 0),
                           net_window_most(&n->lpeak[link], l->bw * 1e12)};
}

void net_free(net *n)
{
    if (!n)
        return;
    net_fault_free(n);
    for (uint32_t i = 0; i < n->n_links; i++)
        free(n->links[i].flows);
    for (uint32_t i = 0; i < n->n_flows; i++) {
        if (n->flows[i].flags & NET_FLOW_EXT)
            free((void *)n->flows[i].links);
        if (n->cold && n->cold[i].pk)
            net_pkt_flow_free(n, i);
    }
    net_pkt_free(n);
    for (uint32_t i = 0; i < n->rc_n_chunks; i++)
        free(n->rc_chunks[i]);
    free(n->rc_chunks);
    free(n->rc);
    np_hmap_free(&n->rc_index);
    free(n->links);
    free(n->laux);
    free(n->lpeak);
    free(n->flows);
    free(n->cold);
    free(n->node_lat);
    if (n->path)
        free(n->path->v);
    free(n->path);
    free(n->comp_links);
    free(n->comp_flows);
    free(n->heap);
    free(n->dirty);
    free(n->items);
    free(n->batches);
    free(n->bt_key);
    free(n->bt_val);
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
    n->free_flow = n->free_item = n->free_batch = UINT32_MAX;
    n->last_b = UINT32_MAX;
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
    void *aligned = NULL;
    if (!n->oom && n->n_links &&
        posix_memalign(&aligned, 64, (size_t)n->n_links * sizeof *n->links) != 0)
        n->oom = true;
    if (n->oom) {
        net_free(n);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building a %s of %" PRIu32 " chips",
                          n->topo->name, p->chips);
    }
    if (aligned) { /* a link per cache line from here on (no link is added after build) */
        memcpy(aligned, n->links, (size_t)n->n_links * sizeof *n->links);
        free(n->links);
        n->links = aligned;
        n->cap_links = n->n_links;
    }
    if (n->n_links && !net_count_twins(n)) {
        net_free(n);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory building a %s of %" PRIu32 " chips",
                          n->topo->name, p->chips);
    }
    if (n->p.n_faults && net_fault_apply(n, err) != NP_OK) {
        net_free(n);
        return err->status;
    }
    if (p->engine == NET_ENGINE_PACKET && net_pkt_init(n, err) != NP_OK) {
        net_free(n);
        return err->status;
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

/* ---- Routes ------------------------------------------------------------------------------ */

static uint64_t net_hash64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

/* Stores a route in the cache (when there is room); returns its links there, or NULL. */
static const net_rc_entry *net_rc_insert(net *n, uint64_t key, const net_path_info *pi)
{
    if (n->rc_n >= NET_RC_MAX || pi->n_links > NET_RC_CHUNK)
        return NULL;
    if (n->rc_n == n->rc_cap) {
        uint32_t cap = n->rc_cap ? 2 * n->rc_cap : 1024;
        net_rc_entry *t = realloc(n->rc, (size_t)cap * sizeof *t);
        if (!t)
            return NULL;
        n->rc = t;
        n->rc_cap = cap;
    }
    if (!n->rc_n_chunks || n->rc_used + pi->n_links > NET_RC_CHUNK) {
        uint32_t **v = realloc(n->rc_chunks, (size_t)(n->rc_n_chunks + 1) * sizeof *v);
        if (!v)
            return NULL;
        n->rc_chunks = v;
        if (!(v[n->rc_n_chunks] = malloc((size_t)NET_RC_CHUNK * sizeof **v)))
            return NULL;
        n->rc_n_chunks++;
        n->rc_used = 0;
    }
    uint32_t *dst = n->rc_chunks[n->rc_n_chunks - 1] + n->rc_used;
    if (pi->n_links)
        memcpy(dst, pi->links, (size_t)pi->n_links * sizeof *dst);
    n->rc_used += pi->n_links;
    if (!np_hmap_put(&n->rc_index, net_hash64(key), n->rc_n))
        return NULL;
    n->rc[n->rc_n] = (net_rc_entry){key, dst, pi->n_links, pi->latency_ps, pi->bytes_per_s};
    return &n->rc[n->rc_n++];
}

np_status net_route(net *n, uint32_t src, uint32_t dst, net_path_info *out, np_err *err)
{
    bool node = src >= n->p.chips || dst >= n->p.chips; /* an end is a switch */
    uint32_t hop = UINT32_MAX;
    if (node) {
        if (src < n->n_nodes && dst < n->n_nodes && src != dst)
            hop = net_link_between(n, src, dst);
        if (hop == UINT32_MAX)
            return np_err_set(err, NP_ERR_RANGE, "nodes %" PRIu32 " -> %" PRIu32 ": the network "
                              "has chips 0 .. %" PRIu32 ", and a route to or from a switch is "
                              "one link", src, dst, n->p.chips - 1);
    }
    uint64_t key = (uint64_t)src << 32 | dst;
    uint64_t h = net_hash64(key);
    for (uint32_t it = 0, id; (id = np_hmap_next(&n->rc_index, h, &it)) != NP_HMAP_END;)
        if (n->rc[id].key == key) {
            const net_rc_entry *e = &n->rc[id];
            *out = (net_path_info){.links = e->links, .latency_ps = e->lat_ps,
                                   .bytes_per_s = e->bytes_per_s, .n_links = e->n_links,
                                   .stable = true};
            return NP_OK;
        }
    n->path->n = 0;
    n->path->oom = false;
    if (node)
        net_path_push(n, hop);
    else if (src != dst)
        n->topo->route(n, src, dst);
    if (n->path->oom)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory routing");
    if (n->has_failed && net_fault_on_path(n) && net_fault_reroute(n, src, dst, err) != NP_OK)
        return err->status;
    out->links = n->path->v;
    out->n_links = n->path->n;
    out->latency_ps = node && dst >= n->p.chips ? n->node_lat[dst] : 0; /* into the switch */
    out->bytes_per_s = INFINITY;
    out->stable = false;
    for (uint32_t i = 0; i < out->n_links; i++) {
        const net_link *l = &n->links[out->links[i]];
        out->latency_ps += n->laux[out->links[i]].lat_ps;
        if (i > 0)
            out->latency_ps += n->node_lat[l->from];
        if (l->bw * 1e12 < out->bytes_per_s)
            out->bytes_per_s = l->bw * 1e12;
    }
    const net_rc_entry *e = net_rc_insert(n, key, out);
    if (e) {
        out->links = e->links;
        out->stable = true;
    }
    return NP_OK;
}

/* ---- Time batches ------------------------------------------------------------------------ */

static void net_batch_fire(evq *q, void *ctx, uint64_t arg);
static void net_flow_deliver(void *ctx, uint64_t arg);
#define NET_PREFETCH 8 /* batch items looked ahead */

/* The slot of time t in the batch hash (its batch, or the empty slot where it would go). */
static uint32_t net_bt_slot(const net *n, uint64_t t)
{
    uint32_t h = (uint32_t)net_hash64(t) & n->bt_mask;
    while (n->bt_val[h] != UINT32_MAX && n->bt_key[h] != t)
        h = (h + 1) & n->bt_mask;
    return h;
}

static bool net_bt_grow(net *n)
{
    uint32_t cap = n->bt_val ? 2 * (n->bt_mask + 1) : 256;
    uint64_t *k = malloc((size_t)cap * sizeof *k);
    uint32_t *v = malloc((size_t)cap * sizeof *v);
    if (!k || !v) {
        free(k);
        free(v);
        return false;
    }
    for (uint32_t i = 0; i < cap; i++)
        v[i] = UINT32_MAX;
    for (uint32_t i = 0; n->bt_val && i <= n->bt_mask; i++) {
        if (n->bt_val[i] == UINT32_MAX)
            continue;
        uint32_t h = (uint32_t)net_hash64(n->bt_key[i]) & (cap - 1);
        while (v[h] != UINT32_MAX)
            h = (h + 1) & (cap - 1);
        k[h] = n->bt_key[i];
        v[h] = n->bt_val[i];
    }
    free(n->bt_key);
    free(n->bt_val);
    n->bt_key = k;
    n->bt_val = v;
    n->bt_mask = cap - 1;
    return true;
}

/* Removes time t from the batch hash (backward-shift deletion). */
static void net_bt_remove(net *n, uint64_t t)
{
    uint32_t h = net_bt_slot(n, t);
    if (n->bt_val[h] == UINT32_MAX)
        return;
    n->bt_val[h] = UINT32_MAX;
    n->bt_n--;
    for (uint32_t j = (h + 1) & n->bt_mask; n->bt_val[j] != UINT32_MAX;
         j = (j + 1) & n->bt_mask) {
        uint32_t home = (uint32_t)net_hash64(n->bt_key[j]) & n->bt_mask;
        /* move j back to h when h lies cyclically in [home, j) */
        if (((j - home) & n->bt_mask) >= ((j - h) & n->bt_mask)) {
            n->bt_key[h] = n->bt_key[j];
            n->bt_val[h] = n->bt_val[j];
            n->bt_val[j] = UINT32_MAX;
            h = j;
        }
    }
}

/* The batch of time t, made (with its event) if there is none: a slot of n->batches, or
 * UINT32_MAX when out of memory (err filled). */
static __attribute__((noinline)) uint32_t net_batch_of(net *n, uint64_t t, np_err *err)
{
    if (t < evq_now(n->q)) {
        np_err_set(err, NP_ERR_INTERNAL, "net_timer_at: %" PRIu64 " ps is before now (%" PRIu64
                   " ps)", t, evq_now(n->q));
        return UINT32_MAX;
    }
    if ((!n->bt_val || 2 * (n->bt_n + 1) > n->bt_mask + 1) && !net_bt_grow(n)) {
        np_err_set(err, NP_ERR_NOMEM, "out of memory batching events");
        return UINT32_MAX;
    }
    uint32_t b, h = net_bt_slot(n, t);
    if (n->bt_val[h] != UINT32_MAX) {
        b = n->bt_val[h];
    } else {
        if (n->free_batch != UINT32_MAX) {
            b = n->free_batch;
            n->free_batch = n->batches[b].next_free;
        } else {
            if (n->n_batches == n->cap_batches) {
                uint32_t cap = n->cap_batches ? 2 * n->cap_batches : 256;
                net_batch *v = realloc(n->batches, (size_t)cap * sizeof *v);
                if (!v) {
                    np_err_set(err, NP_ERR_NOMEM, "out of memory batching events");
                    return UINT32_MAX;
                }
                n->batches = v;
                n->cap_batches = cap;
            }
            b = n->n_batches++;
        }
        if (evq_schedule_at(n->q, t, net_batch_fire, n, b, NULL, err) != NP_OK) {
            n->batches[b].next_free = n->free_batch;
            n->free_batch = b;
            return UINT32_MAX;
        }
        n->batches[b] = (net_batch){t, UINT32_MAX, UINT32_MAX, UINT32_MAX};
        n->bt_key[h] = t;
        n->bt_val[h] = b;
        n->bt_n++;
    }
    n->last_t = t;
    n->last_b = b;
    return b;
}

/* A new item (UINT32_MAX when out of memory). */
static __attribute__((noinline)) uint32_t net_item_grow(net *n)
{
    if (n->n_items == n->cap_items) {
        uint32_t cap = n->cap_items ? 2 * n->cap_items : 1024;
        net_item *v = realloc(n->items, (size_t)cap * sizeof *v);
        if (!v)
            return UINT32_MAX;
        n->items = v;
        n->cap_items = cap;
    }
    return n->n_items++;
}

np_status net_timer_at(net *n, uint64_t t, net_timer_fn fn, void *ctx, uint64_t arg,
                       np_err *err)
{
    /* callers in lockstep add to one batch after another: the last one is checked first (it
     * is still pending, so t is not in the past) */
    uint32_t b = n->last_b;
    if ((b == UINT32_MAX || n->last_t != t) && (b = net_batch_of(n, t, err)) == UINT32_MAX)
        return err->status;
    uint32_t id = n->free_item;
    if (id != UINT32_MAX)
        n->free_item = n->items[id].next;
    else if ((id = net_item_grow(n)) == UINT32_MAX)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory batching events");
    n->items[id] = (net_item){fn, ctx, arg, UINT32_MAX};
    net_batch *bt = &n->batches[b];
    if (bt->tail == UINT32_MAX)
        bt->head = id;
    else
        n->items[bt->tail].next = id;
    bt->tail = id;
    return NP_OK;
}

static void net_batch_fire(evq *q, void *ctx, uint64_t arg)
{
    (void)q;
    net *n = ctx;
    uint32_t b = (uint32_t)arg;
    net_bt_remove(n, n->batches[b].t);
    if (n->last_b == b)
        n->last_b = UINT32_MAX;
    uint32_t id = n->batches[b].head;
    n->batches[b].next_free = n->free_batch;
    n->free_batch = b;
    /* Items of a big batch are mostly deliveries to as many chips: fetch the flow record of
     * the item a few places ahead while this one runs. */
    uint32_t ahead = id;
    for (int k = 0; k < NET_PREFETCH && ahead != UINT32_MAX; k++)
        ahead = n->items[ahead].next;
    while (id != UINT32_MAX) {
        net_item it = n->items[id];
        if (ahead != UINT32_MAX) {
            const net_item *a = &n->items[ahead];
            if (a->fn == net_flow_deliver)
                __builtin_prefetch(&n->flows[(uint32_t)a->arg]);
            ahead = a->next;
        }
        n->items[id].next = n->free_item;
        n->free_item = id;
        it.fn(it.ctx, it.arg);
        id = it.next;
    }
}

/* ---- Flows -------------------------------------------------------------------------------- */


static void net_flow_finish(evq *q, void *ctx, uint64_t arg);
static void net_flow_deliver(void *ctx, uint64_t arg);
static void net_flow_sent_item(void *ctx, uint64_t arg);

static uint64_t net_item_arg(const net_flow *f, uint32_t id)
{
    return (uint64_t)f->itok << 32 | id;
}

static bool net_reserve(uint32_t **v, uint32_t *cap, uint64_t need)
{
    if (need <= *cap)
        return true;
    if (need > UINT32_MAX / 2)
        return false;
    uint32_t c = (uint32_t)need * 2;
    uint32_t *w = realloc(*v, (size_t)c * sizeof *w);
    if (!w)
        return false;
    *v = w;
    *cap = c;
    return true;
}

static void net_rerate_event(evq *q, void *ctx, uint64_t arg);

/* The flows on these links changed now: re-rate them at the end of this instant. */
static void net_mark_dirty(net *n, const uint32_t *links, uint32_t nl)
{
    if (!net_reserve(&n->dirty, &n->cap_dirty, (uint64_t)n->n_dirty + nl)) {
        n->oom = true;
        return;
    }
    memcpy(n->dirty + n->n_dirty, links, (size_t)nl * sizeof *links);
    n->n_dirty += nl;
    if (!n->rerate_pending) {
        np_err e;
        if (evq_schedule_at(n->q, evq_now(n->q), net_rerate_event, n, 0, &n->rerate_ev, &e) !=
            NP_OK)
            n->oom = true;
        n->rerate_pending = true;
    }
}

/* Reschedules SHARED flow id's finish for its (new) rate at time now. */
static void net_flow_schedule(net *n, uint32_t id, uint64_t now)
{
    net_flow_cold *c = &n->cold[id];
    evq_cancel(n->q, c->fin);
    uint64_t t = now + (c->remaining > 0 ? net_ceil_ps(c->remaining / c->rate) : 0);
    np_err e;
    if (evq_schedule_at(n->q, t, net_flow_finish, n, id, &c->fin, &e) != NP_OK)
        n->oom = true;
}

static void net_heap_push(net *n, uint32_t *len, double share, uint32_t link)
{
    if (*len == n->cap_heap) {
        uint32_t cap = n->cap_heap ? 2 * n->cap_heap : 256;
        net_heap_ent *v = realloc(n->heap, (size_t)cap * sizeof *v);
        if (!v) {
            n->oom = true;
            return;
        }
        n->heap = v;
        n->cap_heap = cap;
    }
    uint32_t i = (*len)++;
    while (i > 0) {
        uint32_t par = (i - 1) / 2;
        if (n->heap[par].share < share ||
            (n->heap[par].share == share && n->heap[par].link < link))
            break;
        n->heap[i] = n->heap[par];
        i = par;
    }
    n->heap[i] = (net_heap_ent){share, link};
}

static net_heap_ent net_heap_pop(net *n, uint32_t *len)
{
    net_heap_ent top = n->heap[0], last = n->heap[--(*len)];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= *len)
            break;
        if (c + 1 < *len && (n->heap[c + 1].share < n->heap[c].share ||
                             (n->heap[c + 1].share == n->heap[c].share &&
                              n->heap[c + 1].link < n->heap[c].link)))
            c++;
        if (last.share < n->heap[c].share ||
            (last.share == n->heap[c].share && last.link <= n->heap[c].link))
            break;
        n->heap[i] = n->heap[c];
        i = c;
    }
    if (*len)
        n->heap[i] = last;
    return top;
}

/* Re-rates every SHARED flow in the component reachable from the given links (max-min fair,
 * by water filling with a heap of link shares — a link's share only grows as flows freeze)
 * and reschedules their finish events. */
static void net_rerate(net *n, const uint32_t *seed_links, uint32_t n_seed)
{
    uint64_t now = evq_now(n->q);
    uint64_t ep = ++n->epoch;
    uint32_t nl = 0, nf = 0;
    if (!net_reserve(&n->comp_links, &n->cap_comp_links, (uint64_t)n_seed + 16)) {
        n->oom = true;
        return;
    }
    for (uint32_t i = 0; i < n_seed; i++) {
        net_link_aux *a = &n->laux[seed_links[i]];
        if (a->mark != ep) {
            a->mark = ep;
            n->comp_links[nl++] = seed_links[i];
        }
    }
    for (uint32_t li = 0; li < nl; li++) {
        net_link *l = &n->links[n->comp_links[li]];
        for (uint32_t k = 0; k < l->n_flows; k++) {
            uint32_t fid = l->flows[k];
            net_flow *f = &n->flows[fid];
            if (n->cold[fid].mark == ep)
                continue;
            n->cold[fid].mark = ep;
            if (!net_reserve(&n->comp_links, &n->cap_comp_links, (uint64_t)nl + f->n_links + 1) ||
                !net_reserve(&n->comp_flows, &n->cap_comp_flows, (uint64_t)nf + 1)) {
                n->oom = true;
                return;
            }
            n->comp_flows[nf++] = fid;
            for (uint32_t j = 0; j < f->n_links; j++) {
                net_link_aux *a = &n->laux[f->links[j]];
                if (a->mark != ep) {
                    a->mark = ep;
                    n->comp_links[nl++] = f->links[j];
                }
            }
            l = &n->links[n->comp_links[li]];
        }
    }
    if (nf == 0)
        return;
    n->rerates++;
    /* Bring the flows' remaining bytes up to now; reset the water-filling state. */
    for (uint32_t i = 0; i < nf; i++) {
        net_flow_cold *c = &n->cold[n->comp_flows[i]];
        c->remaining -= c->rate * (double)(now - c->t_last);
        if (c->remaining < 0)
            c->remaining = 0;
        c->t_last = now;
        c->frozen = 0;
    }
    uint32_t hl = 0;
    for (uint32_t i = 0; i < nl; i++) {
        net_link_aux *a = &n->laux[n->comp_links[i]];
        a->cap_rem = n->links[n->comp_links[i]].bw;
        a->n_unfrozen = n->links[n->comp_links[i]].n_flows;
        if (a->n_unfrozen)
            net_heap_push(n, &hl, a->cap_rem / a->n_unfrozen, n->comp_links[i]);
    }
    while (hl > 0 && !n->oom) {
        net_heap_ent top = net_heap_pop(n, &hl);
        net_link *bl = &n->links[top.link];
        net_link_aux *ba = &n->laux[top.link];
        if (ba->n_unfrozen == 0 || top.share != ba->cap_rem / ba->n_unfrozen)
            continue; /* stale: the link's share has grown since, or it is done */
        double share = top.share < 1e-15 ? 1e-15 : top.share; /* rounding: never stop a flow */
        for (uint32_t k = 0; k < bl->n_flows; k++) {
            uint32_t fid = bl->flows[k];
            net_flow_cold *c = &n->cold[fid];
            if (c->frozen)
                continue;
            c->frozen = 1;
            c->rate = share;
            const net_flow *f = &n->flows[fid];
            for (uint32_t j = 0; j < f->n_links; j++) {
                net_link_aux *m = &n->laux[f->links[j]];
                m->cap_rem -= share;
                m->n_unfrozen--;
                if (m != ba && m->n_unfrozen)
                    net_heap_push(n, &hl, m->cap_rem / m->n_unfrozen, f->links[j]);
            }
        }
    }
    for (uint32_t i = 0; i < nf; i++)
        net_flow_schedule(n, n->comp_flows[i], now);
}

static void net_rerate_event(evq *q, void *ctx, uint64_t arg)
{
    (void)q;
    (void)arg;
    net *n = ctx;
    n->rerate_pending = false;
    n->rerate_ev = EVQ_HANDLE_NONE;
    uint32_t nd = n->n_dirty;
    n->n_dirty = 0;
    net_rerate(n, n->dirty, nd);
}

void net_settle(net *n)
{
    if (!n->rerate_pending)
        return;
    evq_cancel(n->q, n->rerate_ev);
    net_rerate_event(n->q, n, 0);
}

/* A new flow record from the pool, grown when empty (UINT32_MAX: out of memory). */
static uint32_t net_flow_grow(net *n)
{
    if (n->n_flows == n->cap_flows) {
        uint32_t cap = n->cap_flows ? n->cap_flows * 2 : 64;
        void *v = NULL; /* a flow per cache line */
        if (posix_memalign(&v, 64, (size_t)cap * sizeof(net_flow)) != 0)
            return UINT32_MAX;
        if (n->n_flows)
            memcpy(v, n->flows, (size_t)n->n_flows * sizeof(net_flow));
        free(n->flows);
        n->flows = v;
        net_flow_cold *w = realloc(n->cold, (size_t)cap * sizeof *w);
        if (!w)
            return UINT32_MAX;
        n->cold = w;
        n->cap_flows = cap;
    }
    uint32_t id = n->n_flows++;
    n->flows[id] = (net_flow){.links = NULL};
    n->cold[id] = (net_flow_cold){.fin = EVQ_HANDLE_NONE};
    return id;
}

static inline uint32_t net_flow_take(net *n)
{
    uint32_t id = n->free_flow;
    if (id != UINT32_MAX)
        n->free_flow = n->flows[id].next_free;
    else if ((id = net_flow_grow(n)) == UINT32_MAX)
        return id;
    n->flows[id].gen++;
    n->flows[id].itok++;
    return id;
}

uint32_t net_flow_alloc(net *n) { return net_flow_take(n); }

static inline void net_flow_put(net *n, uint32_t id)
{
    net_flow *f = &n->flows[id];
    if (n->pk && n->cold[id].pk) /* (the cold record only with packets: no miss per flow) */
        net_pkt_flow_free(n, id);
    if (f->flags & NET_FLOW_EXT)
        free((void *)f->links);
    f->links = NULL;
    f->flags = 0;
    f->state = NET_FLOW_FREE;
    f->itok++;
    f->next_free = n->free_flow;
    n->free_flow = id;
}

void net_flow_release(net *n, uint32_t id) { net_flow_put(n, id); }

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

void net_link_count(net *n, uint32_t link, uint64_t bytes)
{
    net_link *l = &n->links[link];
    l->bytes += bytes;
    if (l->ctr)
        l->ctr->value += bytes;
    net_window_count(&n->lpeak[link], evq_now(n->q), bytes);
}

/* The path's latency and bottleneck bandwidth (bytes per ps). */
static void net_path_facts(const net *n, const uint32_t *links, uint32_t nl, uint64_t *lat,
                           double *bw)
{
    *lat = 0;
    *bw = INFINITY;
    for (uint32_t i = 0; i < nl; i++) {
        const net_link *l = &n->links[links[i]];
        *lat += n->laux[links[i]].lat_ps + (i > 0 ? n->node_lat[l->from] : 0);
        if (l->bw < *bw)
            *bw = l->bw;
    }
}

/* An unsent EXCLUSIVE flow gets company: it becomes SHARED, its bytes so far sent at its old
 * rate, its claims replaced by entries in its links' lists; its batched delivery (and SENT)
 * items no longer apply. false when out of memory. */
static bool net_flow_share(net *n, uint32_t id)
{
    net_flow *f = &n->flows[id];
    net_flow_cold *c = &n->cold[id];
    uint64_t now = evq_now(n->q);
    double bw;
    net_path_facts(n, f->links, f->n_links, &c->lat_ps, &bw);
    uint64_t t_start = f->t_sent - net_ceil_ps((double)f->bytes / bw);
    c->remaining = (double)f->bytes - bw * (double)(now - t_start);
    if (c->remaining < 0)
        c->remaining = 0;
    c->rate = bw;
    c->t_last = now;
    c->fin = EVQ_HANDLE_NONE;
    f->state = NET_FLOW_SHARED;
    f->t_sent = UINT64_MAX;
    f->itok++;
    n->shares++;
    for (uint32_t j = 0; j < f->n_links; j++) {
        net_link *l = &n->links[f->links[j]];
        l->busy_until = 0;
        if (!net_link_add_flow(l, id))
            return false;
    }
    net_mark_dirty(n, f->links, f->n_links);
    return true;
}

/* net_transfer_ex in general: any route, sharing, the packet engine. */
static __attribute__((noinline)) np_status
net_transfer_any(net *n, uint32_t src, uint32_t dst, uint64_t bytes, unsigned flags,
                 const net_path_info *route, net_transfer_fn fn, void *ctx, uint64_t arg,
                 net_flow_ref *ref, np_err *err)
{
    net_path_info routed;
    const net_path_info *path = route;
    if (!route || !route->stable) {
        if (net_route(n, src, dst, &routed, err) != NP_OK)
            return err->status;
        path = &routed;
    }
    uint32_t nlinks = bytes ? path->n_links : 0;
    uint32_t id = net_flow_take(n);
    if (id == UINT32_MAX)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a transfer");
    net_flow *f = &n->flows[id];
    f->flags = flags & NET_XFER_QUIET_SENT ? 0 : NET_FLOW_NOTIFY;
    if (path->stable || nlinks == 0) {
        f->links = path->links;
    } else {
        uint32_t *v = malloc((size_t)nlinks * sizeof *v);
        if (!v) {
            net_flow_put(n, id);
            return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a transfer");
        }
        memcpy(v, path->links, (size_t)nlinks * sizeof *v);
        f->links = v;
        f->flags |= NET_FLOW_EXT;
    }
    f->n_links = (uint16_t)nlinks;
    f->bytes = bytes;
    f->fn = fn;
    f->ctx = ctx;
    f->arg = arg;
    uint64_t now = evq_now(n->q);
    /* A live claim or a shared flow on the path makes this flow SHARED. */
    bool shared = false;
    double bw = INFINITY; /* bytes per ps */
    for (uint32_t j = 0; j < nlinks; j++) {
        net_link *l = &n->links[f->links[j]];
        if (l->busy_until > now && !net_flow_share(n, l->holder)) {
            net_flow_put(n, id);
            return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a transfer");
        }
        shared |= l->n_flows > 0;
        bw = l->bw < bw ? l->bw : bw;
    }
    n->started++;
    np_status st = NP_OK;
    if (nlinks && n->pk) {
        st = net_pkt_start(n, id, err);
        if (st != NP_OK) {
            net_flow_put(n, id);
            return st;
        }
    } else if (nlinks == 0) { /* nothing to share: the last byte is "sent" now */
        f->state = NET_FLOW_IN_FLIGHT;
        f->t_sent = now;
        if (f->flags & NET_FLOW_NOTIFY)
            st = net_timer_at(n, now, net_flow_sent_item, n, net_item_arg(f, id), err);
        if (st == NP_OK)
            st = net_timer_at(n, now + path->latency_ps, net_flow_deliver, n,
                              net_item_arg(f, id), err);
    } else if (!shared) {
        f->state = NET_FLOW_EXCLUSIVE;
        if (bytes != n->memo_bytes || bw != n->memo_bw) {
            n->memo_bytes = bytes;
            n->memo_bw = bw;
            n->memo_ps = net_ceil_ps((double)bytes / bw);
        }
        f->t_sent = now + n->memo_ps;
        f->flags |= NET_FLOW_COUNTED;
        for (uint32_t j = 0; j < nlinks; j++) {
            net_link *l = &n->links[f->links[j]];
            l->busy_until = f->t_sent;
            l->holder = id;
            net_link_count(n, f->links[j], bytes);
        }
        if (f->flags & NET_FLOW_NOTIFY)
            st = net_timer_at(n, f->t_sent, net_flow_sent_item, n, net_item_arg(f, id), err);
        if (st == NP_OK)
            st = net_timer_at(n, f->t_sent + path->latency_ps, net_flow_deliver, n,
                              net_item_arg(f, id), err);
    } else {
        net_flow_cold *c = &n->cold[id];
        f->state = NET_FLOW_SHARED;
        f->t_sent = UINT64_MAX;
        *c = (net_flow_cold){.remaining = (double)bytes, .rate = 0, .t_last = now,
                             .lat_ps = path->latency_ps, .fin = EVQ_HANDLE_NONE};
        for (uint32_t j = 0; j < nlinks; j++)
            if (!net_link_add_flow(&n->links[f->links[j]], id)) {
                n->oom = true;
                break;
            }
        net_mark_dirty(n, f->links, nlinks);
    }
    if (ref)
        *ref = (net_flow_ref){id, f->gen, f->state == NET_FLOW_SHARED || f->state ==
                              NET_FLOW_PACKETS ? UINT64_MAX : f->t_sent, n->shares};
    if (st == NP_OK && n->oom)
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory re-rating flows");
    return st;
}

/* The common case on its own: a stable route whose links are all free, so the flow is
 * EXCLUSIVE — what net_transfer_any does then, with nothing else on the path. */
np_status net_transfer_ex(net *n, uint32_t src, uint32_t dst, uint64_t bytes, unsigned flags,
                          const net_path_info *route, net_transfer_fn fn, void *ctx,
                          uint64_t arg, net_flow_ref *ref, np_err *err)
{
    if (!route || !route->stable || !bytes || !route->n_links || n->pk)
        return net_transfer_any(n, src, dst, bytes, flags, route, fn, ctx, arg, ref, err);
    uint64_t now = evq_now(n->q);
    const uint32_t *ls = route->links;
    uint32_t nl = route->n_links;
    double bw = INFINITY;
    for (uint32_t j = 0; j < nl; j++) {
        const net_link *l = &n->links[ls[j]];
        if (l->busy_until > now || l->n_flows)
            return net_transfer_any(n, src, dst, bytes, flags, route, fn, ctx, arg, ref, err);
        bw = l->bw < bw ? l->bw : bw;
    }
    uint32_t id = net_flow_take(n);
    if (id == UINT32_MAX)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory starting a transfer");
    if (bytes != n->memo_bytes || bw != n->memo_bw) {
        n->memo_bytes = bytes;
        n->memo_bw = bw;
        n->memo_ps = net_ceil_ps((double)bytes / bw);
    }
    net_flow *f = &n->flows[id];
    f->links = ls;
    f->n_links = (uint16_t)nl;
    f->bytes = bytes;
    f->fn = fn;
    f->ctx = ctx;
    f->arg = arg;
    f->state = NET_FLOW_EXCLUSIVE;
    f->flags = (flags & NET_XFER_QUIET_SENT ? 0 : NET_FLOW_NOTIFY) | NET_FLOW_COUNTED;
    f->t_sent = now + n->memo_ps;
    n->started++;
    for (uint32_t j = 0; j < nl; j++) {
        net_link *l = &n->links[ls[j]];
        l->busy_until = f->t_sent;
        l->holder = id;
        net_link_count(n, ls[j], bytes);
    }
    np_status st = NP_OK;
    if (f->flags & NET_FLOW_NOTIFY)
        st = net_timer_at(n, f->t_sent, net_flow_sent_item, n, net_item_arg(f, id), err);
    if (st == NP_OK)
        st = net_timer_at(n, f->t_sent + route->latency_ps, net_flow_deliver, n,
                          net_item_arg(f, id), err);
    if (ref)
        *ref = (net_flow_ref){id, f->gen, f->t_sent, n->shares};
    if (st == NP_OK && n->oom)
        st = np_err_set(err, NP_ERR_NOMEM, "out of memory re-rating flows");
    return st;
}

np_status net_transfer(net *n, uint32_t src, uint32_t dst, uint64_t bytes, net_transfer_fn fn,
                       void *ctx, uint64_t arg, np_err *err)
{
    return net_transfer_ex(n, src, dst, bytes, 0, NULL, fn, ctx, arg, NULL, err);
}

bool net_flow_sent(net *n, net_flow_ref r, bool arm)
{
    if (r.shares == n->shares && r.t_sent <= evq_now(n->q))
        return true; /* no flow lost its exclusivity since: the known time holds */
    net_flow *f = &n->flows[r.id];
    if (f->gen != r.gen || f->state == NET_FLOW_IN_FLIGHT || f->state == NET_FLOW_FREE)
        return true;
    if (f->state == NET_FLOW_EXCLUSIVE && f->t_sent <= evq_now(n->q))
        return true;
    if (arm && !(f->flags & NET_FLOW_NOTIFY)) { /* SHARED, PACKETS: told by their events */
        f->flags |= NET_FLOW_NOTIFY;
        np_err e;
        if (f->state == NET_FLOW_EXCLUSIVE &&
            net_timer_at(n, f->t_sent, net_flow_sent_item, n, net_item_arg(f, r.id), &e) !=
                NP_OK)
            n->oom = true;
    }
    return false;
}

/* An EXCLUSIVE flow's SENT item, at its t_sent. */
static void net_flow_sent_item(void *ctx, uint64_t arg)
{
    net *n = ctx;
    net_flow *f = &n->flows[(uint32_t)arg];
    if (f->itok != (uint32_t)(arg >> 32))
        return;
    f->state = NET_FLOW_IN_FLIGHT;
    n->ev_bytes = f->bytes;
    if (f->fn)
        f->fn(f->ctx, f->arg, NET_EVENT_SENT);
}

static void net_flow_finish(evq *q, void *ctx, uint64_t arg)
{
    (void)q;
    net *n = ctx;
    uint32_t id = (uint32_t)arg;
    net_flow *f = &n->flows[id];
    net_flow_cold *c = &n->cold[id];
    c->fin = EVQ_HANDLE_NONE;
    c->remaining = 0;
    f->state = NET_FLOW_IN_FLIGHT;
    f->t_sent = evq_now(n->q);
    for (uint32_t j = 0; j < f->n_links; j++) {
        net_link *l = &n->links[f->links[j]];
        for (uint32_t k = 0; k < l->n_flows; k++)
            if (l->flows[k] == id) {
                l->flows[k] = l->flows[--l->n_flows];
                break;
            }
        if (!(f->flags & NET_FLOW_COUNTED))
            net_link_count(n, f->links[j], f->bytes);
    }
    net_mark_dirty(n, f->links, f->n_links);
    np_err e;
    if (net_timer_at(n, f->t_sent + c->lat_ps, net_flow_deliver, n, net_item_arg(f, id), &e) !=
        NP_OK)
        n->oom = true;
    n->ev_bytes = f->bytes;
    if ((f->flags & NET_FLOW_NOTIFY) && f->fn)
        f->fn(f->ctx, f->arg, NET_EVENT_SENT);
}

static void net_flow_deliver(void *ctx, uint64_t arg)
{
    net *n = ctx;
    uint32_t id = (uint32_t)arg;
    net_flow *f = &n->flows[id];
    if (f->itok != (uint32_t)(arg >> 32))
        return;
    net_transfer_fn fn = f->fn;
    void *fctx = f->ctx;
    uint64_t farg = f->arg;
    n->ev_bytes = f->bytes;
    /* A SENT notification asked for after the transfer started (net_flow_sent arming it)
     * sits behind this delivery when the path has no latency: the sender hears first. */
    bool sent_owed = f->state == NET_FLOW_EXCLUSIVE && (f->flags & NET_FLOW_NOTIFY);
    net_flow_put(n, id);
    if (fn && sent_owed)
        fn(fctx, farg, NET_EVENT_SENT);
    if (fn)
        fn(fctx, farg, NET_EVENT_DELIVERED);
}

uint32_t net_flows_active(const net *n)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n->n_flows; i++)
        k += net_flow_unsent(n, &n->flows[i]);
    return k;
}

uint32_t net_flows_list(net *n, net_flow_info *out, uint32_t max)
{
    net_settle(n);
    uint64_t now = evq_now(n->q);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n->n_flows; i++) {
        const net_flow *f = &n->flows[i];
        if (!net_flow_unsent(n, f))
            continue;
        double rate, left;
        if (f->state == NET_FLOW_PACKETS) { /* no rate: packets */
            rate = 0;
            left = (double)f->bytes;
        } else if (f->state == NET_FLOW_SHARED) {
            const net_flow_cold *c = &n->cold[i];
            rate = c->rate;
            left = c->remaining - c->rate * (double)(now - c->t_last);
        } else {
            uint64_t lat;
            net_path_facts(n, f->links, f->n_links, &lat, &rate);
            left = rate * (double)(f->t_sent - now);
        }
        if (k < max)
            out[k] = (net_flow_info){f->ctx, f->arg, rate * 1e12, left > 0 ? left : 0};
        k++;
    }
    return k;
}

np_status net_verify(net *n, np_err *err)
{
    net_settle(n);
    if (n->oom)
        return np_err_set(err, NP_ERR_NOMEM, "the flow model ran out of memory");
    if (n->pk)
        return net_pkt_verify(n, err);
    for (uint32_t i = 0; i < n->n_flows; i++) {
        const net_flow *f = &n->flows[i];
        if (!net_flow_unsent(n, f))
            continue;
        if (f->state == NET_FLOW_SHARED && f->n_links && !(n->cold[i].rate > 0))
            return np_err_set(err, NP_ERR_INTERNAL, "shared flow %" PRIu32 " has rate %g", i,
                              n->cold[i].rate);
        for (uint32_t j = 0; j < f->n_links; j++) {
            const net_link *l = &n->links[f->links[j]];
            bool found = false;
            if (f->state == NET_FLOW_EXCLUSIVE)
                found = net_link_claimed(n, l) && l->holder == i && l->n_flows == 0;
            for (uint32_t k = 0; f->state == NET_FLOW_SHARED && k < l->n_flows; k++)
                found |= l->flows[k] == i;
            if (!found)
                return np_err_set(err, NP_ERR_INTERNAL, "%s flow %" PRIu32 " is not held by "
                                  "link %" PRIu32, f->state == NET_FLOW_SHARED ? "shared"
                                  : "exclusive", i, f->links[j]);
        }
    }
    for (uint32_t i = 0; i < n->n_links; i++) {
        const net_link *l = &n->links[i];
        double sum = 0;
        for (uint32_t k = 0; k < l->n_flows; k++) {
            const net_flow *f = &n->flows[l->flows[k]];
            if (f->state != NET_FLOW_SHARED)
                return np_err_set(err, NP_ERR_INTERNAL, "link %" PRIu32 " lists flow %" PRIu32
                                  ", which is not shared", i, l->flows[k]);
            sum += n->cold[l->flows[k]].rate;
        }
        if (l->n_flows && net_link_claimed(n, l))
            return np_err_set(err, NP_ERR_INTERNAL, "link %" PRIu32 " is claimed by flow %"
                              PRIu32 " and shared by %" PRIu32 " others", i, l->holder,
                              l->n_flows);
        if (sum > l->bw * (1 + 1e-9))
            return np_err_set(err, NP_ERR_INTERNAL, "link %" PRIu32 " carries %g bytes/ps, "
                              "more than its %g", i, sum, l->bw);
    }
    return NP_OK;
}
