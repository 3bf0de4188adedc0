/* mesh.h — the on-chip network: a 2D mesh of input-queued virtual-channel routers, simulated
 * flit by flit like BookSim 2's iq_router, or as fluid flows for bulk transfers.
 *
 * Flit mode (docs/noc.md has the full description and the mapping to BookSim, stage by stage):
 *   - kx x ky routers; router r = y * kx + x has one endpoint (a core, an HBM controller or a
 *     link port) on its local port, and links to its +x, -x, +y, -y neighbours.
 *   - Every router input port has `vcs` virtual channels, each a FIFO of `buf_flits` flits
 *     (private buffers). Credit flow control: an output VC (and a source's injection VC) holds
 *     one credit per free slot of the VC it feeds.
 *   - Dimension-order routing: x first, then y.
 *   - A router is a pipeline of BookSim's stages: route computation (R cycles; 0 = lookahead),
 *     VC allocation (1), switch allocation (1), switch traversal (X cycles), with
 *     P = router_cycles = R + 1 + X (X = 1 when P >= 2, R = P - 2 when P >= 3). A head flit
 *     that reaches the front of its input VC at cycle a asks for an output VC at a + R; once it
 *     has one it bids for the switch the next cycle; body flits bid the cycle they reach the
 *     front. VC and switch allocation are separable iSLIP allocators with one iteration
 *     (round-robin grant and accept pointers that move only on an accepted grant); an input
 *     port bids with at most one VC per output port, picked round robin. A flit granted the
 *     switch at s leaves its buffer at s (its credit reaches the upstream router at
 *     s + L + credit_delay, the source at s + L), enters the link at s + X and reaches the next
 *     router, or the endpoint, at s + X + L (L = link_cycles). An output VC is free again once
 *     the packet's tail has been granted the switch (or, with wait_tail_credit, once the
 *     tail's credit is back).
 *   - Endpoints: an unbounded source queue per node; a source injects at most one flit per
 *     cycle into its router's local input (choosing a free injection VC round robin for each
 *     packet); the ejection port has VCs and credits like any output, and the endpoint takes
 *     one flit per cycle and returns its credit over a link of L cycles.
 *   - Messages (mesh_send) are cut into packets of at most max_packet_flits flits, sent back
 *     to back from the source; the message is delivered when its last flit arrives.
 *   - Only routers that hold flits (or have flits on their way in) are stepped, and only
 *     sources with queued messages inject: a cycle costs the routers in use, not the mesh.
 *
 * Input VC states (BookSim's VC::idle, routing, vc_alloc, active), with the functions that
 * make each transition:
 *
 *        flit arrives (ivc_push)                          VC granted (mesh_va)
 *   IDLE ----------------------> ROUTING --(R cycles)--> VC_ALLOC -------------> ACTIVE
 *    ^                                                                         |   |
 *    |            tail granted the switch, buffer empty (mesh_traverse)        |   | body
 *    +-------------------------------------------------------------------------+   | granted
 *                 tail granted, next packet's head waiting: ROUTING again          v  (stays)
 *
 * Zero-load latency of a message of F flits over H router-to-router hops (H + 1 routers), in
 * cycles from mesh_send to the arrival of its last flit at the destination endpoint, when it
 * is one packet (F <= max_packet_flits) and buffers cover the credit loop (buf_flits >=
 * P + 2L + credit_delay):
 *     T0 = (H + 1) * (P + L) + L + (F - 1)
 * which mesh_zero_load_cycles computes and a test checks against the simulation exactly.
 *
 * Flow mode (mode = MESH_MODE_FLOW): each message is one fluid flow over the links of its XY
 * route (injection channel, router outputs, ejection channel; 1 flit per cycle each), links
 * shared max-min fairly and re-rated whenever a flow starts or ends; a message's first flit
 * takes the zero-load head latency and its last arrives T0 - (F - 1) cycles after its last
 * has been sent. A lone message takes exactly T0; no per-cycle work at all (mesh_attach posts
 * events only when a flow ends or a message arrives).
 *
 * Memory controllers (mesh_add_controller) are endpoints too, each at a router beside the
 * router's own endpoint, and memory accesses (mesh_access_start) between a controller and an
 * endpoint are fluid flows over the same links in either mode (see below).
 *
 * The mesh counts its own time in NoC cycles and is advanced one cycle at a time by
 * mesh_step; mesh_attach drives it from an event queue instead, one event per NoC cycle while
 * flits are in flight (flit mode) or one per flow end and delivery (flow mode and accesses).
 */
#ifndef NPUSIM_NOC_MESH_H
#define NPUSIM_NOC_MESH_H

#include <stdbool.h>
#include <stdint.h>

#include "clock.h"
#include "err.h"
#include "evq.h"
#include "stats.h"

typedef enum mesh_mode {
    MESH_MODE_FLIT, /* flit-level routers (the reference) */
    MESH_MODE_FLOW, /* fluid flows, max-min fair per link */
    MESH_MODE_COUNT
} mesh_mode;

typedef struct mesh_params {
    uint32_t kx, ky;          /* routers along x and y (1 .. 1024 each) */
    uint32_t vcs;             /* virtual channels per input port (1 .. 64) */
    uint32_t buf_flits;       /* depth of each VC buffer in flits (1 .. 4096) */
    uint32_t router_cycles;   /* P: a head flit's cycles from arrival to departure (1 .. 64) */
    uint32_t link_cycles;     /* L: cycles on a link, and a credit's way back (1 .. 64) */
    /* BookSim-compatible refinements; zero values give BookSim's defaults. */
    uint32_t credit_delay;    /* extra cycles before a router can use a returned credit
                                 (0 .. 64; BookSim's credit_delay) */
    uint32_t input_speedup;   /* crossbar inputs per input port (0 or 1: one; up to 6): VC v
                                 uses input v mod speedup (BookSim's input_speedup) */
    bool wait_tail_credit;    /* an output VC is reallocated only once the tail's credit is
                                 back (BookSim's wait_for_tail_credit = 1); default: once the
                                 tail has been granted the switch */
    uint32_t max_packet_flits; /* longest packet a message is cut into (0: no limit) */
    mesh_mode mode;            /* MESH_MODE_FLIT (0) or MESH_MODE_FLOW */
} mesh_params;

/* The router pipeline P = router_cycles stands for, stage by stage (BookSim's delays). */
typedef struct mesh_stages {
    uint32_t routing;  /* R: routing_delay (0: lookahead routing) */
    uint32_t vc_alloc; /* 1: vc_alloc_delay */
    uint32_t sw_alloc; /* 1: sw_alloc_delay */
    uint32_t crossbar; /* X: st_prepare_delay + st_final_delay (0 only when P = 1) */
} mesh_stages;
void mesh_stages_of(const mesh_params *p, mesh_stages *s);

/* What the mesh reports about each delivered message (times in NoC cycles). */
typedef struct mesh_packet {
    uint32_t src, dst, flits;
    uint64_t tag;        /* the caller's value from mesh_send */
    uint64_t t_create;   /* cycle mesh_send was called */
    uint64_t t_inject;   /* cycle the first flit left the source queue into the network */
    uint64_t t_done;     /* cycle the last flit reached the destination endpoint */
} mesh_packet;

/* Called once per delivered message, at the cycle its last flit arrives (mesh_cycle ==
 * t_done). It may call mesh_send. */
typedef void (*mesh_deliver_fn)(void *ctx, const mesh_packet *p);

typedef struct mesh mesh;

/* Router output ports, also the input ports they feed at the neighbour (an input port is
 * named after the way its flits travel: flits on a router's xplus input came from -x). */
enum { MESH_PORT_LOCAL, MESH_PORT_XPLUS, MESH_PORT_XMINUS, MESH_PORT_YPLUS, MESH_PORT_YMINUS,
       MESH_PORT_COUNT };

/* The mesh of a chip: chip.mesh_x/y, noc_vcs, noc_vc_buf_flits, noc_router_cycles,
 * noc_link_cycles, noc_max_packet_flits, noc_mode. */
struct arch_config;
void mesh_params_from_arch(const struct arch_config *cfg, mesh_params *p);

/* "flit", "flow"; NULL out of range. */
const char *mesh_mode_name(mesh_mode m);

/* Flits of a message of `bytes` bytes with flits of `flit_bytes` (chip.noc_flit_bytes):
 * ceil(bytes / flit_bytes), at least 1 (the head). */
uint32_t mesh_message_flits(uint64_t bytes, uint32_t flit_bytes);

/* Checks p's ranges: NP_ERR_RANGE naming the field. */
np_status mesh_params_check(const mesh_params *p, np_err *err);

/* A new idle mesh at cycle 0. When reg is not NULL, registers per-link flit counters
 * ("<prefix>.rX.<port>_flits") under component prefix (e.g. "noc").
 * NP_ERR_RANGE for bad params, NP_ERR_NOMEM; *out untouched on failure. */
np_status mesh_create(const mesh_params *p, stats *reg, const char *prefix, mesh **out,
                      np_err *err);
void mesh_free(mesh *m);

/* Sets the delivery callback (NULL: none). */
void mesh_set_deliver(mesh *m, mesh_deliver_fn fn, void *ctx);

/* Sets the callback called when a message's last flit has left its source's queue into the
 * network (the message's last byte has left the sender), from inside mesh_step (NULL: none).
 * Its mesh_packet has t_done = that cycle. */
void mesh_set_sent(mesh *m, mesh_deliver_fn fn, void *ctx);

/* Creates a message of `flits` flits from endpoint src to dst at the current cycle and queues
 * it at src (behind the messages already queued there). NP_ERR_RANGE for a bad node or
 * flits == 0; NP_ERR_NOMEM. Nothing changes on failure. */
np_status mesh_send(mesh *m, uint32_t src, uint32_t dst, uint32_t flits, uint64_t tag,
                    np_err *err);

/* Advances one NoC cycle: delivers what arrives this cycle, injects, allocates and moves
 * flits (flit mode) or ends the flows due (flow mode). */
void mesh_step(mesh *m);

/* The current cycle (cycles completed). */
uint64_t mesh_cycle(const mesh *m);

/* True when no message is queued, in the network, or about to be delivered. */
bool mesh_idle(const mesh *m);

uint32_t mesh_nodes(const mesh *m);
const mesh_params *mesh_get_params(const mesh *m);

/* Flits that crossed the link out of router r's output port `port` since creation or the
 * last mesh_reset_link_counts (MESH_PORT_LOCAL: ejected at r). Flow mode counts a message's
 * flits on every link of its route when the message has been sent. */
uint64_t mesh_link_flits(const mesh *m, uint32_t r, int port);
void mesh_reset_link_counts(mesh *m);

/* Flits in router r's input buffers or on their way to them (flit mode; 0 in flow mode). */
uint32_t mesh_router_flits(const mesh *m, uint32_t r);

/* "local", "xplus", "xminus", "yplus", "yminus"; NULL out of range. */
const char *mesh_port_name(int port);

/* Conservation of flits: created == still in source queues + in buffers and on links +
 * delivered; every packet's flits arrived in order, each once; for every output VC, credits +
 * credits on their way back + flits in (or on the way to) the VC it feeds == buf_flits.
 * NP_ERR_INTERNAL naming the first violation. O(routers x ports x VCs); tests call it after
 * every run. */
np_status mesh_verify(const mesh *m, np_err *err);

/* Totals for conservation reports. */
typedef struct mesh_totals {
    uint64_t messages_created, messages_delivered;
    uint64_t packets_created, packets_delivered; /* after cutting messages into packets */
    uint64_t flits_created, flits_injected, flits_delivered;
    uint64_t router_steps; /* routers stepped, summed over cycles (flit mode): the work done */
} mesh_totals;
void mesh_get_totals(const mesh *m, mesh_totals *t);

/* Router-to-router hops of the XY route from src to dst: |dx| + |dy|. */
uint32_t mesh_hops(const mesh_params *p, uint32_t src, uint32_t dst);

/* The zero-load latency formula above, in cycles. */
uint64_t mesh_zero_load_cycles(const mesh_params *p, uint32_t src, uint32_t dst,
                               uint32_t flits);

/* Drives m from q on clock domain clk: events at the NoC cycle edges where m has work, none
 * while it is idle (mesh_send and mesh_access_start wake it, at the cycle of the queue's
 * time). m must outlive q's run. NP_ERR_NOMEM. */
np_status mesh_attach(mesh *m, evq *q, const clk_domain *clk, np_err *err);

/* ---- memory controllers and accesses ---------------------------------------------------------
 * A memory controller (an HBM controller) sits at a router beside that router's endpoint, with
 * ports of its own onto the router (one flit per cycle each way) and a bandwidth of
 * flits_per_cycle that every access it serves shares. An access moves `flits` (real: bytes /
 * flit bytes) between controller c and endpoint `node` as one fluid flow over its XY route,
 * whatever the mesh's mode:
 *   read   c's bandwidth, c's port out, the router outputs from c's router to node's (the last
 *          one node's ejection channel);
 *   write  node's injection channel, the router outputs to c's router, c's port in, c's
 *          bandwidth;
 * capped at the access's own cap, and shared max-min fairly with every other access and, in
 * flow mode, with the messages (in flit mode flits and accesses do not see each other's use
 * of the links). With h = mesh_zero_load_cycles(node <-> c's router, 1 flit):
 *   read   the request reaches c h cycles after the start, c spends access_cycles, then the
 *          data flows; the access completes when its last flit reaches node, h after the cycle
 *          its flow ended;
 *   write  the data flows at once; its last flit reaches c h after, c spends access_cycles,
 *          and the completion reaches node h cycles later.
 * Alone at r flits per cycle both take 2h + access_cycles + ceil(flits / r) - 1 cycles. A local
 * access is the same with h = 0 and only the controller's bandwidth on its way. Each
 * flow remembers what limits it (the controller's bandwidth, its port, a mesh link, its own
 * cap), and the flits moved under each are counted (mesh_mem_get_stats): where the memory
 * traffic contends.
 */
typedef struct mesh_access {
    uint32_t ctrl;          /* a controller of the mesh */
    uint32_t node;          /* an endpoint (router) */
    bool write;             /* node -> controller; else controller -> node */
    double flits;           /* > 0 */
    double cap;             /* flits per cycle the access may take at most (INFINITY: none) */
    uint32_t access_cycles; /* the memory's own latency */
    uint64_t tag;           /* the caller's, given back when it completes */
    bool local;             /* between the controller and a buffer beside it at its router (an
                               L2 slice's fill or write-back): only the controller's
                               bandwidth, no port, no link, no hop (node is not used) */
} mesh_access;

/* Called at the cycle an access completes (from inside mesh_step), with its tag. It may start
 * accesses and send messages. */
typedef void (*mesh_access_fn)(void *ctx, uint64_t tag);
void mesh_set_access_done(mesh *m, mesh_access_fn fn, void *ctx);

/* Adds controller number mesh_controllers(m) at router `router` with a bandwidth of
 * flits_per_cycle (> 0). Several may share a router. NP_ERR_RANGE for a bad router or
 * bandwidth, NP_ERR_NOMEM; nothing changes on failure. */
np_status mesh_add_controller(mesh *m, uint32_t router, double flits_per_cycle, np_err *err);
uint32_t mesh_controllers(const mesh *m);
uint32_t mesh_controller_router(const mesh *m, uint32_t ctrl);

/* Starts access *a at the current cycle. NP_ERR_RANGE for a bad controller, node, flit count
 * or cap; NP_ERR_NOMEM. Nothing changes on failure. */
np_status mesh_access_start(mesh *m, const mesh_access *a, np_err *err);

/* What the accesses moved and what limited them, in flits (of the part moved so far). */
typedef struct mesh_mem_stats {
    uint64_t accesses, completed;
    double flits;            /* moved */
    double ctrl_bound_flits; /* ... while a controller's bandwidth fixed their rate */
    double port_bound_flits; /* ... a controller's port */
    double mesh_bound_flits; /* ... a router output or an endpoint's injection channel */
    double cap_bound_flits;  /* ... their own caps */
} mesh_mem_stats;
void mesh_mem_get_stats(const mesh *m, mesh_mem_stats *s);

/* Controller ctrl: its router and bandwidth, the flits of its completed reads and writes, and
 * the flits its bandwidth or its ports limited. */
typedef struct mesh_ctrl_stats {
    uint32_t router;
    double flits_per_cycle;
    double read_flits, write_flits;
    double bound_flits;
} mesh_ctrl_stats;
void mesh_controller_stats(const mesh *m, uint32_t ctrl, mesh_ctrl_stats *s);

/* Flits of accesses whose rate router r's output `port` fixed (MESH_PORT_LOCAL: its ejection
 * channel; MESH_PORT_COUNT: r's injection channel). */
double mesh_link_bound_flits(const mesh *m, uint32_t r, int port);

#endif
