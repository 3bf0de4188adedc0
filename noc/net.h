/* net.h — the chip-to-chip network: topologies, routing, and transfers as max-min fair flows.
 *
 * A net is a directed graph of nodes (chips 0 .. chips-1, then switches) and links. Every link
 * has a bandwidth per direction (bytes/s; each direction is its own link) and a latency; every
 * switch adds its latency to paths that pass through it. Topologies plug in through
 * net_topo_ops (a table of function pointers: build the graph, route a pair); see net_topo.c
 * and docs/noc.md for each one's links, bandwidths and routing rule.
 *
 * A transfer of S bytes from chip a to chip b follows the topology's route (a fixed path of
 * links, cached per pair) as one flow. Flows share each link max-min fairly: whenever a flow
 * starts or ends, the rates of the flows that share links with it (transitively) are
 * recomputed by water filling, once per instant however many flows changed. A flow's bytes
 * leave the source at its current rate; when the last byte has left (its "sent" time), the
 * flow releases its links, and its data arrives one path latency later (its "delivered"
 * time). So on an idle path a transfer takes exactly
 *     latency(path) + S / min(bandwidth of the path's links)
 * which is the alpha-beta model with alpha = the path latency and beta = 1 / bandwidth. A
 * flow alone on its links costs no re-rating and no event of its own: the cost of the model
 * grows with the flows that actually share links (net.c explains how).
 */
#ifndef NPUSIM_NOC_NET_H
#define NPUSIM_NOC_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arch.h"
#include "err.h"
#include "evq.h"
#include "stats.h"

typedef struct net net;

/* How transfers move: as max-min fair flows (net.c), or as packets through per-port queues
 * with link-level flow control (net_pkt.c). */
typedef enum net_engine { NET_ENGINE_FLOW, NET_ENGINE_PACKET } net_engine;

/* A link fault (net_fault.c): the link as net_link_name names it ("chip3->chip4", "chip0->sw0")
 * and the share of its bandwidth left: 0 < factor <= 1 slows it, 0 fails it (no traffic; routes
 * that used it go around it where the topology has another path). */
typedef struct net_link_fault {
    char name[32];
    double factor;
} net_link_fault;

/* The resolved parameters of a chip network (from arch_system by net_params_from_arch). */
typedef struct net_params {
    arch_topology topology;
    uint32_t chips;
    uint32_t dims[3];         /* ring: {chips,1,1}; torus2d/3d: torus_x, y, z */
    uint32_t island_chips;    /* hierarchical */
    uint32_t links_per_chip;
    uint32_t switch_radix;
    double link_bytes_per_s;  /* one link, one direction: payload bytes per second */
    uint64_t link_latency_ps;
    uint64_t switch_latency_ps;
    double scaleout_bytes_per_s;
    uint64_t scaleout_latency_ps;
    net_engine engine;        /* NET_ENGINE_FLOW unless chosen */
    uint32_t mtu_bytes;       /* packet engine: largest packet; 0: 4096 */
    uint32_t buf_packets;     /* packet engine: packets a link's far end buffers; 0: 32 (>= 2) */
    const net_link_fault *faults; /* (optional) n_faults slowed or failed links (net_create
                                     copies them; net_get_params points to the copy) */
    uint32_t n_faults;
} net_params;

/* Fills p from cfg.system. Link and scale-out rates are payload rates: the line rate times
 * system.link_efficiency / scaleout_efficiency. */
void net_params_from_arch(const arch_config *cfg, net_params *p);

/* The inverse: cfg->system's topology, chips, dimensions, links per chip, switch radix and
 * island size set to p's, so that what is built from cfg (the core model's network) is the
 * network built from p. Rates and latencies are left as they are. */
void net_params_to_arch(const net_params *p, arch_config *cfg);

/* p resized as `npusim collective --topology KIND[:DIMS] --chips N` asks: spec (NULL: p's own
 * topology) names the kind and optionally its dimensions (a torus each of its, a hierarchical
 * system its island size, the others a count); chips (0: the spec's product or p's) the chips.
 * Then the kind is fitted to the chips: a ring of N, the most square torus2d or most cubic
 * torus3d of N (unless the dimensions given multiply to N), N chips on a switch (radix raised
 * to N) or a fat tree (radix doubled until radix^2/2 >= N), fully connected (links raised to
 * N - 1); a ring or torus gets at least the links its dimensions need. what names the source
 * in errors (e.g. "--topology"). NP_ERR_USAGE: an unknown kind, bad dimensions, chips that are
 * not whole islands. */
np_status net_params_shape(net_params *p, const char *spec, uint32_t chips, const char *what,
                           np_err *err);

/* A topology: how to build its graph and route on it. */
typedef struct net_topo_ops {
    const char *name;
    /* Adds the switches and links of this topology for p to n (chips already exist). */
    np_status (*build)(net *n, const net_params *p, np_err *err);
    /* Appends the links of the path src -> dst (src != dst) with net_path_push. */
    void (*route)(const net *n, uint32_t src, uint32_t dst);
    /* (optional) frees the data given to net_set_topo_data; defaults to free(). */
    void (*free_data)(void *data);
    /* (optional) the chip's switch domain (island, leaf switch) and the chips per domain;
     * defaults to none (0 chips per domain). */
    uint32_t (*domain)(const net *n, uint32_t chip, uint32_t *domain_chips);
    /* (optional) the switch the chip's links go to directly (the switch, its island's
     * switch), one link away each way; defaults to none (UINT32_MAX). */
    uint32_t (*switch_of)(const net *n, uint32_t chip);
} net_topo_ops;

/* "chip3->chip4", "chip3->sw1", "sw0->chip2" into buf, with "#k" after the k-th further link
 * between the same two nodes ("chip0->chip1#1": a 2-chip ring's other direction round);
 * returns buf. */
char *net_link_name(const net *n, uint32_t link, char *buf, size_t len);

/* The ops of a topology kind (every arch_topology has one). */
const net_topo_ops *net_topo_get(arch_topology t);

/* Builds the network of p over event queue q (transfers schedule their events there). When
 * reg is not NULL, registers per-link byte counters ("c2c.<link name>.bytes"). NP_ERR_RANGE /
 * NP_ERR_INCONSISTENT for parameters the topology cannot build, NP_ERR_NOMEM. */
np_status net_create(const net_params *p, evq *q, stats *reg, net **out, np_err *err);
void net_free(net *n);

uint32_t net_chips(const net *n);
uint32_t net_nodes(const net *n);
uint32_t net_links(const net *n);
const net_params *net_get_params(const net *n);
evq *net_evq(const net *n);

/* For topology builders: add a switch node (returns its node id) or a link (returns its id,
 * UINT32_MAX when out of memory — build then fails with NP_ERR_NOMEM). */
uint32_t net_add_switch(net *n, uint64_t latency_ps);
uint32_t net_add_link(net *n, uint32_t from, uint32_t to, double bytes_per_s, uint64_t lat_ps);
/* For routers: the link from node a to node b, UINT32_MAX if none (first added wins). */
uint32_t net_link_between(const net *n, uint32_t a, uint32_t b);
/* For routers: append a link to the path being built. */
void net_path_push(const net *n, uint32_t link);
/* Topology-private data (set by build, read by route; freed by net_free with free_data). */
void net_set_topo_data(net *n, void *data);
void *net_topo_data(const net *n);

/* The route from src to dst: its links (valid until the next net_route call), its latency
 * (links and switches) and its bottleneck bandwidth. With failed links (net_params.faults) a
 * route through one is replaced by the shortest path around it (fewest links, lowest link ids
 * first), relaying through chips only where chips route (ring, torus2d, torus3d: their chips
 * are the routers); NP_ERR_INCONSISTENT naming the failed links when there is none. src == dst: 0 links, latency 0. Either
 * end may be a switch one link from the other (net_chip_switch): the route is that link, and
 * into a switch the latency includes the switch's own (what it does with what arrives, e.g.
 * a reduction, is the caller's); transfers take such routes too. */
typedef struct net_path_info {
    const uint32_t *links;
    uint64_t latency_ps;
    double bytes_per_s;
    uint32_t n_links;
    bool stable;        /* links stay valid while the net lives (the route is cached) */
} net_path_info;
np_status net_route(net *n, uint32_t src, uint32_t dst, net_path_info *out, np_err *err);

/* The chip's switch domain — its island (hierarchical) or leaf switch (fat tree) — and, in
 * *domain_chips, the chips per domain; *domain_chips = 0 (and 0 returned) for topologies
 * without domains. */
uint32_t net_chip_domain(const net *n, uint32_t chip, uint32_t *domain_chips);

/* The node id of the switch chip's links go to directly (a switch topology's switch, a
 * hierarchical island's switch), UINT32_MAX when the topology has none. */
uint32_t net_chip_switch(const net *n, uint32_t chip);

/* Whether the route between chips a and b crosses the scale-out network (hierarchical: the
 * chips are in different islands). */
bool net_is_scaleout(const net *n, uint32_t a, uint32_t b);

/* The window of net_link_info.peak_window_bytes: 1 µs, fixed (a link's busiest microsecond,
 * whatever the run's length). */
#define NET_LINK_PEAK_WINDOW_PS 1000000u

/* A link's busiest window, counted as bytes come: the window [k W, (k + 1) W) the last bytes
 * fell in, its bytes so far, the most of any earlier window. The network keeps one per link;
 * a caller that moves bytes past it (a replayed collective) keeps its own the same way. */
typedef struct net_window_peak {
    uint64_t win, bytes, max;
} net_window_peak;

/* Counts bytes at time t (ps; not in a window before the last count's, where they would count
 * in that one). */
static inline void net_window_count(net_window_peak *p, uint64_t t, uint64_t bytes)
{
    uint64_t w = t / NET_LINK_PEAK_WINDOW_PS;
    if (w > p->win) {
        p->max = p->bytes > p->max ? p->bytes : p->max;
        p->win = w;
        p->bytes = 0;
    }
    p->bytes += bytes;
}

/* The most bytes of any window of p, at most what bytes_per_s carries in one window. */
static inline double net_window_most(const net_window_peak *p, double bytes_per_s)
{
    double most = (double)(p->bytes > p->max ? p->bytes : p->max),
           fits = bytes_per_s * (double)NET_LINK_PEAK_WINDOW_PS * 1e-12;
    return most < fits ? most : fits;
}

/* Link facts. */
typedef struct net_link_info {
    uint32_t from, to;
    double bytes_per_s;
    uint64_t latency_ps;
    uint64_t bytes;      /* carried so far (flows count when their last byte is sent; the
                            c2c.* statistic counts a quiet flow alone on its links only when
                            the next flow on the link starts or it is delivered) */
    uint32_t flows;      /* unsent now */
    double peak_window_bytes; /* the most bytes counted in one window of
                                 NET_LINK_PEAK_WINDOW_PS (windows [k W, (k + 1) W) from time 0;
                                 a flow's bytes count when its last byte is sent, an exclusive
                                 path's when it starts), at most what the link carries in one
                                 window (bytes_per_s x W) */
} net_link_info;
void net_link_get(const net *n, uint32_t link, net_link_info *out);

typedef enum net_event {
    NET_EVENT_SENT,      /* the last byte left the source: the links are free of this flow */
    NET_EVENT_DELIVERED, /* the data arrived at the destination */
} net_event;

/* Called for each event of a transfer, at its time, with the values given to net_transfer. */
typedef void (*net_transfer_fn)(void *ctx, uint64_t arg, net_event ev);

/* Inside a net_transfer_fn: the bytes of the transfer it is called for. */
uint64_t net_event_bytes(const net *n);

/* Names one transfer for net_flow_sent (a plain value; stays safe to use after the transfer
 * is delivered and its record reused). */
typedef struct net_flow_ref {
    uint32_t id, gen;
    uint64_t t_sent;   /* its sent time as known at its start (UINT64_MAX: not known) */
    uint64_t shares;   /* the net's count of flows that lost their links' exclusivity then */
} net_flow_ref;

/* net_transfer_ex flags. */
#define NET_XFER_QUIET_SENT 1u /* fn is not called at SENT unless net_flow_sent arms it */

/* Starts a transfer of `bytes` from chip src to chip dst now (evq_now). fn (may be NULL) is
 * called at its SENT and then DELIVERED times. src == dst delivers at once (both events at
 * now, scheduled, never called from inside this function). NP_ERR_RANGE for a bad chip,
 * NP_ERR_NOMEM; nothing starts on failure. */
np_status net_transfer(net *n, uint32_t src, uint32_t dst, uint64_t bytes, net_transfer_fn fn,
                       void *ctx, uint64_t arg, np_err *err);
/* net_transfer with flags (NET_XFER_*) and, when route is not NULL, the route src -> dst as
 * net_route gave it (stable: callers that send to one peer again and again keep it); fills
 * *ref (when not NULL) with the transfer's name. */
np_status net_transfer_ex(net *n, uint32_t src, uint32_t dst, uint64_t bytes, unsigned flags,
                          const net_path_info *route, net_transfer_fn fn, void *ctx,
                          uint64_t arg, net_flow_ref *ref, np_err *err);
/* Whether the transfer's last byte has left by now (true for a delivered one). When not and
 * arm is set, its fn will be called at SENT even if it was started quiet. */
bool net_flow_sent(net *n, net_flow_ref ref, bool arm);

/* A callback at a time, batched with every other net callback at that time (one event of q
 * for all of them; net.c): fn(ctx, arg) is called at t_ps (>= now), after those added for
 * t_ps before it. NP_ERR_INTERNAL for a time before now, NP_ERR_NOMEM. */
typedef void (*net_timer_fn)(void *ctx, uint64_t arg);
np_status net_timer_at(net *n, uint64_t t_ps, net_timer_fn fn, void *ctx, uint64_t arg,
                       np_err *err);

/* Does now the re-rating pending for this instant (normally done by an event at now, after
 * what the queue already holds for it). net_flows_list and net_verify settle first. */
void net_settle(net *n);

/* Re-rating passes (water fillings) so far: the model's work on shared links. */
uint64_t net_rerates(const net *n);

/* Transfers started / not yet sent (O(flows)). */
uint64_t net_transfers_started(const net *n);
uint32_t net_flows_active(const net *n);

/* An active flow (a transfer whose last byte has not been sent yet). */
typedef struct net_flow_info {
    void *ctx;           /* as given to net_transfer */
    uint64_t arg;
    double bytes_per_s;  /* its current max-min fair rate */
    double bytes_left;   /* as of the last re-rating */
} net_flow_info;

/* Fills out[0 .. min(n, active)) with the active flows (in no particular order); returns the
 * number of active flows. For tests and reports. */
uint32_t net_flows_list(net *n, net_flow_info *out, uint32_t max);

/* Checks the flow model's invariants: no link carries more than its bandwidth, every unsent
 * flow has a positive rate and is in its links' lists, a link holds either one flow alone or
 * only shared ones. NP_ERR_INTERNAL. */
np_status net_verify(net *n, np_err *err);

#endif
