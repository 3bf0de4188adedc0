/* coll_topo.h — collectives fitted to the physical topology: the order of a group's ranks
 * round a ring, and the levels of a multi-level (hierarchical) algorithm. Both feed the
 * schedules (coll_sched_desc.order, n_levels, level_ranks), so every engine that runs a
 * schedule — the flow engine, the ISA lowering, the tuner's cost model — sees the same rings.
 *
 * Ring order: on a ring or torus, when the group's chips are the whole torus, or a box of it
 * (the chips with coordinates in an interval per dimension), the order is a Hamiltonian cycle
 * of the box — every step one link — whenever one exists: the first dimension is a ring
 * (the box spans the whole torus dimension, so its wrap-around link closes it) or the next
 * dimension has an even length. It is built dimension by dimension: a cycle C over the lower
 * dimensions times a path of the next one is a cycle that walks C without its first element
 * up and down the path's rows, then returns along that element's column:
 *
 *     c1 c2 .. cm          (row 0)        then the column of c0,
 *     cm .. c2 c1          (row 1)        from the last row back to row 0
 *     c1 c2 .. cm          (row 2) ...
 *
 * the last row ends next to c0 (at cm when the row count is odd, which c0 neighbours in C; at
 * c1 when it is even). Other groups on a torus are ordered along the whole torus's cycle. On
 * switches, fat trees and islands (hierarchical) the ranks are ordered by chip, so a leaf's or
 * an island's chips are consecutive; a fully connected network keeps the rank order.
 *
 * Levels (COLL_ALGO_HIER): on a hierarchical system, the island then the islands, when the
 * group has the same number of chips in each of its islands; on a fat tree, the leaf then the
 * leaves, likewise; on a torus, the dimensions of the group's box (x, y, z: per-dimension rings,
 * as TPU pods run all-reduce); else two levels of the divisor of p nearest sqrt(p) (the
 * schedule's default), over the ring order.
 */
#ifndef NPUSIM_NOC_COLL_TOPO_H
#define NPUSIM_NOC_COLL_TOPO_H

#include <stdbool.h>
#include <stdint.h>

#include "coll_sched.h"
#include "err.h"
#include "net.h"

/* The ring order of the group chips[0 .. p) (distinct chips of n): order[k] is the rank at
 * ring position k. NP_ERR_NOMEM (order untouched on failure). */
np_status coll_topo_ring_order(const net *n, const uint32_t *chips, uint32_t p,
                               uint32_t *order, np_err *err);

/* Channels (NCCL's rings through every NIC): for a ring whose order (from coll_topo_ring_order)
 * crosses between islands of a hierarchical system, the number of rings to run side by side —
 * `want`, at most the group's chips in its smallest island — and their orders in
 * orders[c * p + k]: ring c visits each island's run of the order rotated by c, so it enters
 * the island at the run's c-th chip and leaves from the one before; the hops between islands
 * of the rings leave through different chips' scale-out ports. 1 (orders untouched) when the
 * ring stays in one island, the topology has no islands, or want <= 1. */
uint32_t coll_topo_ring_channels(const net *n, const uint32_t *chips, uint32_t p,
                                 const uint32_t *order, uint32_t want, uint32_t *orders);

/* The levels of the multi-level all-reduce of the group: *n_levels and level_ranks (level 0
 * first, product p) and order[pos] = the rank at mixed-radix position pos (level 0 fastest).
 * *n_levels = 0 when the topology gives no levels (then order is the ring order).
 * NP_ERR_NOMEM. */
np_status coll_topo_levels(const net *n, const uint32_t *chips, uint32_t p, uint32_t *n_levels,
                           uint32_t level_ranks[COLL_MAX_LEVELS], uint32_t *order, np_err *err);

#endif
