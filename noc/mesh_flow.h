/* mesh_flow.h — fluid flows over a set of links, shared max-min fairly: the engine behind the
 * mesh's flow mode and its memory accesses (mesh.h). Private to noc/.
 *
 * Time is a real number of NoC cycles; a link carries `capacity` flits per cycle (1 unless
 * mesh_flow_add_link says otherwise) and a flow may have a cap of its own. At every moment the
 * active flows' rates are the max-min fair allocation (water filling: the tightest constraint
 * — the link with the smallest capacity per unfixed flow, or the smallest cap of an unfixed
 * flow — fixes its flows at that share, its capacity leaves their other links, repeat). Rates
 * change only when a flow starts or ends; the allocation is recomputed over all active flows
 * (a chip has few at once), once for any number of starts at one time.
 *
 * Each flow remembers what fixed its rate (its bottleneck: a link, or MESH_FLOW_CAP). Flows of
 * class 1 (the mesh's memory accesses) add the flits they move to their bottleneck's account
 * (mesh_flow_bound_flits): which resource limited how much of that traffic.
 *
 *   mesh_flow *f;
 *   mesh_flow_create(n_links, &f, &err);
 *   mesh_flow_start(f, t, links, n, flits, INFINITY, 0, user, &err); // t >= the last time
 *   mesh_flow_advance(f, t_end, on_end, ctx);                      // ends every flow due
 */
#ifndef NPUSIM_NOC_MESH_FLOW_H
#define NPUSIM_NOC_MESH_FLOW_H

#include <stdint.h>

#include "err.h"

typedef struct mesh_flow mesh_flow;

#define MESH_FLOW_CAP UINT32_MAX /* the "bottleneck" of a flow held at its own cap */

/* Called for each flow that ends, with its user value and the exact time its last flit was
 * sent (all the flow's flits have crossed every link at its rate). */
typedef void (*mesh_flow_end_fn)(void *ctx, uint64_t user, double t_end);

/* An engine over links 0 .. n_links - 1 of capacity 1. NP_ERR_NOMEM; *out untouched on
 * failure. */
np_status mesh_flow_create(uint32_t n_links, mesh_flow **out, np_err *err);
void mesh_flow_free(mesh_flow *f);

/* Adds a link of `capacity` (> 0) flits per cycle; its id in *id. NP_ERR_NOMEM (nothing
 * changed). */
np_status mesh_flow_add_link(mesh_flow *f, double capacity, uint32_t *id, np_err *err);

/* Brings every flow up to time t (>= the engine's time), then starts a flow of `flits` (> 0)
 * over links[0 .. n) (each a link of f, no repeats), at most cap (> 0; INFINITY: none) flits
 * per cycle, of class klass (0 or 1). NP_ERR_NOMEM (nothing changed). */
np_status mesh_flow_start(mesh_flow *f, double t, const uint32_t *links, uint32_t n,
                          double flits, double cap, unsigned klass, uint64_t user, np_err *err);

/* The earliest time an active flow ends; INFINITY when none is active. */
double mesh_flow_next_end(mesh_flow *f);

/* Advances to time t: every flow that ends at or before t ends, in time order (ties in start
 * order), with fn called for each and the rest re-rated at that moment. */
void mesh_flow_advance(mesh_flow *f, double t, mesh_flow_end_fn fn, void *ctx);

/* Active flows; the rate of the i-th (in start order), flits per cycle, and its bottleneck
 * (a link id, or MESH_FLOW_CAP). */
uint32_t mesh_flow_active(const mesh_flow *f);
double mesh_flow_rate(mesh_flow *f, uint32_t i);
uint32_t mesh_flow_bottleneck(mesh_flow *f, uint32_t i);

/* Flits moved so far by class-1 flows whose rate link `link` fixed (MESH_FLOW_CAP: their own
 * caps), up to the engine's time; and by all flows of class klass. */
double mesh_flow_bound_flits(const mesh_flow *f, uint32_t link);
double mesh_flow_moved_flits(const mesh_flow *f, unsigned klass);

#endif
