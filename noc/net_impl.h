/* net_impl.h — the chip network's internals, shared by the flow engine (net.c) and the packet
 * engine (net_pkt.c). Not for use outside noc/net*.c. */
#ifndef NPUSIM_NOC_NET_IMPL_H
#define NPUSIM_NOC_NET_IMPL_H

#include "hmap.h"
#include "net.h"

#define NET_RC_MAX (1u << 20)     /* route cache: at most this many (src, dst) pairs */
#define NET_RC_CHUNK (1u << 16)   /* route cache: links stored in chunks of this many */

/* What a flow starting on a link reads and writes: one cache line (the array is aligned). */
typedef struct net_link {
    uint64_t busy_until; /* an EXCLUSIVE flow's claim: its sent time (no claim when <= now) */
    double bw;           /* bytes per ps */
    uint64_t bytes;
    stats_counter *ctr;  /* in the registry, or NULL */
    uint32_t *flows;     /* SHARED flows */
    uint32_t holder;     /* the claim's flow */
    uint32_t n_flows, cap_flows;
    uint32_t from, to;
} net_link;
_Static_assert(sizeof(net_link) == 64, "a link is one cache line");

/* The rest of a link: its latency and the re-rating scratch. */
typedef struct net_link_aux {
    uint64_t lat_ps;
    uint64_t mark;
    double cap_rem;
    uint32_t n_unfrozen;
    uint32_t twin;       /* earlier links between the same two nodes (a 2-chip ring has two):
                            its name's "#k" (net_link_name), counted once at creation */
    bool failed;         /* net_params.faults: carries nothing, routes go around it */
} net_link_aux;

typedef enum net_flow_state {
    NET_FLOW_FREE,
    NET_FLOW_EXCLUSIVE,
    NET_FLOW_SHARED,
    NET_FLOW_IN_FLIGHT,
    NET_FLOW_PACKETS,   /* the packet engine: packets on their way, the last not yet sent */
} net_flow_state;

#define NET_FLOW_NOTIFY 1u  /* call fn at SENT */
#define NET_FLOW_COUNTED 2u /* its bytes are already on its links' counters */
#define NET_FLOW_EXT 4u     /* links is a malloc'd copy (the route was not cached) */

/* What every flow uses: one cache line (the array is aligned). */
typedef struct net_flow {
    const uint32_t *links;
    net_transfer_fn fn;
    void *ctx;
    uint64_t arg;
    uint64_t bytes;
    uint64_t t_sent;     /* EXCLUSIVE, IN_FLIGHT: when its last byte leaves / left */
    uint32_t gen;        /* names this use of the record (net_flow_ref) */
    uint32_t itok;       /* validates batch items: changes when the flow's times change */
    uint16_t n_links;
    uint8_t state, flags;
    uint32_t next_free;
} net_flow;
_Static_assert(sizeof(net_flow) == 64, "a flow is one cache line");

/* The packet engine's state of a flow (net_pkt.c): per hop h of its path, packets that have
 * reached the hop's upstream node and packets sent on its link. */
typedef struct net_pkt_flow {
    uint32_t packets, last_bytes, delivered;
    uint32_t *arrived, *sent; /* n_links each */
    uint8_t *queued;          /* per hop: waiting in the link's round robin */
} net_pkt_flow;

/* What only SHARED (and packet-engine) flows use. */
typedef struct net_flow_cold {
    double remaining, rate; /* bytes left at t_last; bytes per ps */
    uint64_t t_last, lat_ps;
    evq_handle fin;
    uint64_t mark;
    uint8_t frozen;
    net_pkt_flow *pk;       /* packet engine, else NULL */
} net_flow_cold;

/* A link in the packet engine: the packet on the wire, credits for the buffer at its far end,
 * and the flows with packets waiting for it, served round robin one packet at a time. */
typedef struct net_pkt_link {
    bool busy;
    uint32_t credits;
    uint32_t cur_flow, cur_hop, cur_bytes;
    uint32_t ring;          /* torus: dimension and direction; UINT32_MAX elsewhere */
    uint64_t *rr;           /* (hop << 32 | flow) waiting, a circular queue */
    uint32_t rr_head, rr_n, rr_cap;
} net_pkt_link;

typedef struct net_scratch {
    uint32_t *v;
    uint32_t n, cap;
    bool oom;
} net_scratch;

typedef struct net_rc_entry {
    uint64_t key;          /* src << 32 | dst */
    const uint32_t *links;
    uint32_t n_links;
    uint64_t lat_ps;
    double bytes_per_s;
} net_rc_entry;

typedef struct net_item {
    net_timer_fn fn;
    void *ctx;
    uint64_t arg;
    uint32_t next;
} net_item;

typedef struct net_batch {
    uint64_t t;
    uint32_t head, tail;
    uint32_t next_free;
} net_batch;

typedef struct net_heap_ent {
    double share;
    uint32_t link;
} net_heap_ent;

struct net {
    net_params p;
    const net_topo_ops *topo;
    void *topo_data;
    evq *q;
    uint32_t n_nodes;
    uint64_t *node_lat; /* per node: switch latency (0 for chips) */
    uint32_t cap_nodes;
    net_link *links;     /* 64-byte aligned once built */
    net_link_aux *laux;
    net_window_peak *lpeak; /* per link: its busiest window */
    uint32_t n_links, cap_links;
    net_flow *flows;
    net_flow_cold *cold;
    uint32_t n_flows, cap_flows, free_flow;
    uint64_t started;
    uint64_t shares;   /* EXCLUSIVE flows turned SHARED so far (net_flow_ref.shares) */
    uint64_t rerates;
    uint64_t ev_bytes; /* the transfer whose callback runs (net_event_bytes) */
    uint64_t epoch;
    net_scratch *path;                 /* route being built */
    uint32_t *comp_links, *comp_flows; /* component scratch */
    uint32_t cap_comp_links, cap_comp_flows;
    net_heap_ent *heap;
    uint32_t cap_heap;
    /* deferred re-rating: links whose flows changed this instant */
    uint32_t *dirty;
    uint32_t n_dirty, cap_dirty;
    bool rerate_pending;
    evq_handle rerate_ev;
    /* route cache */
    net_rc_entry *rc;              /* the cached routes, in the order cached */
    uint32_t rc_n, rc_cap;
    np_hmap rc_index;              /* net_hash64(key) -> rc */
    uint32_t **rc_chunks;
    uint32_t rc_n_chunks, rc_used; /* chunks; links used in the last one */
    /* time batches */
    net_item *items;
    uint32_t n_items, cap_items, free_item;
    net_batch *batches;
    uint32_t n_batches, cap_batches, free_batch;
    uint64_t *bt_key;  /* hash: time -> batch (open addressing, UINT32_MAX empty) */
    uint32_t *bt_val;
    uint32_t bt_mask, bt_n;
    uint64_t last_t;   /* the batch last added to, if still open */
    uint32_t last_b;
    /* the last exclusive flow's size, bandwidth and time on the wire: messages of a
     * collective mostly repeat them (a division saved) */
    uint64_t memo_bytes, memo_ps;
    double memo_bw;
    /* the packet engine (net_pkt.c), when p.engine is NET_ENGINE_PACKET */
    net_pkt_link *pk;
    /* link faults (net_fault.c): any failed link, and the graph's out-links per node (CSR,
     * built at the first reroute) */
    bool has_failed;
    net_link_fault *fault_copy; /* p.faults points here (net_get_params' copy stays valid) */
    uint32_t *adj_start, *adj_link;
    bool oom;
};

/* Applies p.faults to the built links (bandwidths scaled, failed links marked) and keeps a
 * copy of them that p.faults then points to. NP_ERR_UNKNOWN_KEY
 * for a link the network does not have, NP_ERR_RANGE for a factor outside 0 .. 1. */
np_status net_fault_apply(net *n, np_err *err);
/* Whether the path in n->path crosses a failed link. */
bool net_fault_on_path(const net *n);
/* Replaces n->path by the shortest path from src to dst around the failed links.
 * NP_ERR_INCONSISTENT naming them when there is none; NP_ERR_NOMEM. */
np_status net_fault_reroute(net *n, uint32_t src, uint32_t dst, np_err *err);
void net_fault_free(net *n);

/* ceil(x) for 0 <= x, saturated at 1e18 ps (a libm call without SSE4.1; this is the hot
 * path). */
static inline uint64_t net_ceil_ps(double x)
{
    if (!(x < 1e18))
        return (uint64_t)1e18;
    uint64_t t = (uint64_t)x;
    return (double)t < x ? t + 1 : t;
}

/* net.c, for the packet engine */
uint32_t net_flow_alloc(net *n);            /* a flow record; UINT32_MAX when out of memory */
void net_flow_release(net *n, uint32_t id); /* back to the pool */
void net_link_count(net *n, uint32_t link, uint64_t bytes); /* at evq_now */

/* net_pkt.c */
np_status net_pkt_init(net *n, np_err *err);   /* at create, for NET_ENGINE_PACKET */
void net_pkt_free(net *n);
/* Starts flow id (links, bytes, fn set; n_links > 0) as packets now. */
np_status net_pkt_start(net *n, uint32_t id, np_err *err);
/* Frees a packet flow's state (at delivery). */
void net_pkt_flow_free(net *n, uint32_t id);
np_status net_pkt_verify(const net *n, np_err *err);

#endif
