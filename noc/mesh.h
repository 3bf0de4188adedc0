/* mesh.h — the on-chip network: a flit-level 2D mesh of input-queued virtual-channel routers.
 *
 * Model (docs/noc.md has the full description and its mapping to BookSim 2's iq_router):
 *   - kx x ky routers; router r = y * kx + x has one endpoint (a core, an HBM controller or a
 *     link port) on its local port, and links to its +x, -x, +y, -y neighbours.
 *   - Every router input port has `vcs` virtual channels, each a FIFO of `buf_flits` flits.
 *     Flow control is credit based: an upstream output VC holds one credit per free slot of
 *     the downstream VC; a credit returns `link_cycles` after its flit leaves the buffer.
 *   - Dimension-order routing: x first, then y (deadlock free on a mesh).
 *   - A packet of F flits (head ... tail) holds one VC per hop from the cycle its head is
 *     allocated the VC until its tail leaves (wormhole; a VC is reallocated once the tail has
 *     been sent, BookSim's wait_for_tail_credit = 0).
 *   - A flit that arrives in a buffer at cycle a may cross the switch at cycle a + P or later
 *     (P = router_cycles: route computation, VC allocation, switch allocation and traversal
 *     together), then spends L = link_cycles on the link. Per cycle, each input port sends at
 *     most one flit and each output port accepts at most one (separable input-first
 *     round-robin switch allocation); one flit per cycle per endpoint is injected and ejected.
 *   - Endpoints: an unbounded source queue per node; the injection and ejection channels are
 *     links of L cycles like the others.
 *
 * Zero-load latency of a packet over H router-to-router hops (H + 1 routers), in cycles from
 * its creation to the arrival of its tail at the destination endpoint:
 *     T0 = (H + 1) * (P + L) + L + (F - 1)
 * which mesh_zero_load_cycles computes and a test checks against the simulation exactly.
 *
 * The mesh counts its own time in NoC cycles and is advanced one cycle at a time by
 * mesh_step (a cycle loop inside, as base/evq.h allows for clocked components); mesh_attach
 * drives it from an event queue instead, one event per NoC cycle while it has work.
 */
#ifndef NPUSIM_NOC_MESH_H
#define NPUSIM_NOC_MESH_H

#include <stdbool.h>
#include <stdint.h>

#include "clock.h"
#include "err.h"
#include "evq.h"
#include "stats.h"

typedef struct mesh_params {
    uint32_t kx, ky;          /* routers along x and y (1 .. 1024 each) */
    uint32_t vcs;             /* virtual channels per input port (1 .. 64) */
    uint32_t buf_flits;       /* depth of each VC buffer in flits (1 .. 4096) */
    uint32_t router_cycles;   /* P: pipeline depth, arrival to earliest departure (1 .. 64) */
    uint32_t link_cycles;     /* L: cycles on a link, also the credit return delay (1 .. 64) */
    /* BookSim-compatible refinements; zero values give the model described above. */
    uint32_t credit_delay;    /* extra cycles before a returned credit can be used (0 .. 64;
                                 BookSim's credit_delay) */
    uint32_t input_speedup;   /* crossbar inputs per input port (0 or 1: one; up to 6): VC v
                                 uses input v mod speedup, so up to `speedup` flits per cycle
                                 leave one input port (BookSim's input_speedup) */
    bool wait_tail_credit;    /* an output VC is reallocated only once the tail's credit is
                                 back, i.e. the downstream VC is empty (BookSim's
                                 wait_for_tail_credit = 1); default: once the tail is sent */
} mesh_params;

/* What the mesh reports about each delivered packet (times in NoC cycles). */
typedef struct mesh_packet {
    uint32_t src, dst, flits;
    uint64_t tag;        /* the caller's value from mesh_send */
    uint64_t t_create;   /* cycle mesh_send was called */
    uint64_t t_inject;   /* cycle the head flit left the source queue into the network */
    uint64_t t_done;     /* cycle the tail flit reached the destination endpoint */
} mesh_packet;

/* Called once per delivered packet, at the cycle its tail arrives (mesh_cycle == t_done). */
typedef void (*mesh_deliver_fn)(void *ctx, const mesh_packet *p);

typedef struct mesh mesh;

/* Router output ports, also the input ports they feed at the neighbour. */
enum { MESH_PORT_LOCAL, MESH_PORT_XPLUS, MESH_PORT_XMINUS, MESH_PORT_YPLUS, MESH_PORT_YMINUS,
       MESH_PORT_COUNT };

/* The mesh of a chip: chip.mesh_x/y, noc_vcs, noc_vc_buf_flits, noc_router_cycles,
 * noc_link_cycles. */
struct arch_config;
void mesh_params_from_arch(const struct arch_config *cfg, mesh_params *p);

/* Flits of a message of `bytes` bytes with flits of `flit_bytes` (chip.noc_flit_bytes):
 * ceil(bytes / flit_bytes), at least 1 (the head). */
uint32_t mesh_message_flits(uint64_t bytes, uint32_t flit_bytes);

/* Checks p's ranges: NP_ERR_RANGE naming the field. */
np_status mesh_params_check(const mesh_params *p, np_err *err);

/* A new idle mesh at cycle 0. When reg is not NULL, registers per-link flit counters
 * ("<prefix>.rX.<port>" flits) and packet statistics under component prefix (e.g. "noc").
 * NP_ERR_RANGE for bad params, NP_ERR_NOMEM; *out untouched on failure. */
np_status mesh_create(const mesh_params *p, stats *reg, const char *prefix, mesh **out,
                      np_err *err);
void mesh_free(mesh *m);

/* Sets the delivery callback (NULL: none). */
void mesh_set_deliver(mesh *m, mesh_deliver_fn fn, void *ctx);

/* Sets the callback called when a packet's tail flit has left its source's queue into the
 * network (the packet's last byte has left the sender), from inside mesh_step (NULL: none).
 * Its mesh_packet has t_done = that cycle. */
void mesh_set_sent(mesh *m, mesh_deliver_fn fn, void *ctx);

/* Creates a packet of `flits` flits from endpoint src to dst at the current cycle and queues
 * it at src. NP_ERR_RANGE for a bad node or flits == 0; NP_ERR_NOMEM. Nothing changes on
 * failure. */
np_status mesh_send(mesh *m, uint32_t src, uint32_t dst, uint32_t flits, uint64_t tag,
                    np_err *err);

/* Advances one NoC cycle: delivers flits due this cycle, injects, allocates and moves flits. */
void mesh_step(mesh *m);

/* The current cycle (cycles completed). */
uint64_t mesh_cycle(const mesh *m);

/* True when no packet is queued, in the network, or about to be delivered. */
bool mesh_idle(const mesh *m);

uint32_t mesh_nodes(const mesh *m);
const mesh_params *mesh_get_params(const mesh *m);

/* Flits that crossed the link out of router r's output port `port` since creation or the
 * last mesh_reset_link_counts (MESH_PORT_LOCAL: ejected at r). */
uint64_t mesh_link_flits(const mesh *m, uint32_t r, int port);
void mesh_reset_link_counts(mesh *m);

/* Conservation of flits: created == still in source queues + in buffers and on links +
 * delivered; every packet's flits arrived in order, each once. NP_ERR_INTERNAL naming the
 * first violation. Cheap (O(routers x ports x VCs)); tests call it after every run. */
np_status mesh_verify(const mesh *m, np_err *err);

/* Totals for conservation reports. */
typedef struct mesh_totals {
    uint64_t packets_created, packets_delivered;
    uint64_t flits_created, flits_injected, flits_delivered;
} mesh_totals;
void mesh_get_totals(const mesh *m, mesh_totals *t);

/* Router-to-router hops of the XY route from src to dst: |dx| + |dy|. */
uint32_t mesh_hops(const mesh_params *p, uint32_t src, uint32_t dst);

/* The zero-load latency formula above, in cycles. */
uint64_t mesh_zero_load_cycles(const mesh_params *p, uint32_t src, uint32_t dst,
                               uint32_t flits);

/* Drives m from q on clock domain clk: one event per NoC cycle edge while m has work, none
 * while it is idle (mesh_send wakes it). m must outlive q's run. NP_ERR_NOMEM. */
np_status mesh_attach(mesh *m, evq *q, const clk_domain *clk, np_err *err);

#endif
