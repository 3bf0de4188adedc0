/* mesh_flow.h — fluid flows over a set of unit-capacity links, shared max-min fairly: the
 * engine behind the mesh's flow mode (mesh.h, MESH_MODE_FLOW). Private to noc/.
 *
 * Time is a real number of NoC cycles; every link carries 1 flit per cycle. At every moment
 * the active flows' rates are the max-min fair allocation (water filling: the link with the
 * smallest capacity per unfixed flow fixes its flows at that share, its capacity leaves
 * their other links, repeat). Rates change only when a flow starts or ends; the allocation is
 * then recomputed over all active flows (a chip has few at once).
 *
 *   mesh_flow *f;
 *   mesh_flow_create(n_links, &f, &err);
 *   mesh_flow_start(f, t, links, n, flits, user, &err);   // at time t >= the last time used
 *   mesh_flow_advance(f, t_end, on_end, ctx);             // ends every flow due by t_end
 */
#ifndef NPUSIM_NOC_MESH_FLOW_H
#define NPUSIM_NOC_MESH_FLOW_H

#include <stdint.h>

#include "err.h"

typedef struct mesh_flow mesh_flow;

/* Called for each flow that ends, with its user value and the exact time its last flit was
 * sent (all the flow's flits have crossed every link at its rate). */
typedef void (*mesh_flow_end_fn)(void *ctx, uint64_t user, double t_end);

/* An engine over links 0 .. n_links - 1. NP_ERR_NOMEM; *out untouched on failure. */
np_status mesh_flow_create(uint32_t n_links, mesh_flow **out, np_err *err);
void mesh_flow_free(mesh_flow *f);

/* Brings every flow up to time t (>= the engine's time), then starts a flow of `flits` (> 0)
 * over links[0 .. n) (each < n_links, no repeats) and re-rates. NP_ERR_NOMEM (nothing
 * changed). */
np_status mesh_flow_start(mesh_flow *f, double t, const uint32_t *links, uint32_t n,
                          double flits, uint64_t user, np_err *err);

/* The earliest time an active flow ends; INFINITY when none is active. */
double mesh_flow_next_end(const mesh_flow *f);

/* Advances to time t: every flow that ends at or before t ends, in time order (ties in start
 * order), with fn called for each and the rest re-rated at that moment. */
void mesh_flow_advance(mesh_flow *f, double t, mesh_flow_end_fn fn, void *ctx);

/* Active flows; the rate of the i-th (in start order), flits per cycle. */
uint32_t mesh_flow_active(const mesh_flow *f);
double mesh_flow_rate(const mesh_flow *f, uint32_t i);

#endif
