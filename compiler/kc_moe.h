/* kc_moe.h — what the mixture-of-experts kernels share (internal to compiler/): the routing
 * layout of framework/op_moe.c computed from the expert indices on the VPU (kc_moe.c), used by
 * the routing kernels and by the grouped matmul's data-driven schedule (kc_moe_gmm.c). */
#ifndef NPUSIM_KC_MOE_H
#define NPUSIM_KC_MOE_H

#include "kernel.h"

#define KM_F ISA_DTYPE_FP32
#define KM_MAX 65535 /* a tile's rows or columns, a gather's n1 */

/* A semaphore per direction (one shared by two directions would let a unit take its own
 * signal). */
typedef struct km_sems {
    unsigned dv, vd, dd; /* DMA -> VPU, VPU -> DMA, DMA -> DMA */
} km_sems;

/* Three semaphores of the current core. */
np_status km_sems_alloc(kc_ctx *x, km_sems *s);
/* Unit `to` waits until unit `from` has done everything queued before. */
void km_sync(kc_ctx *x, isa_unit from, isa_unit to, const km_sems *s);

/* Attribute name of k (dflt when not given); whether t is dense row-major. */
int64_t km_attr(const kc_kernel *k, const char *name, int64_t dflt);
bool km_dense(const kc_tensor *t);

typedef struct km_route {
    int64_t T, k, E, C, N; /* tokens, choices, experts, capacity (0: dropless), rows */
    int64_t lo, hi;        /* the core's tokens */
    uint64_t si;           /* scratchpad: i32 [k][hi - lo], the row of assignment (t, j) at
                              j (hi - lo) + t - lo; N + 1 when dropped */
    km_sems sem;           /* the kernel's semaphores on the core, at zero */
} km_route;

/* r's E and C from the kernel's experts and capacity attributes, T and k from input ii (the
 * indices), N the layout's rows. */
np_status km_route_of(kc_ctx *x, int ii, km_route *r);
/* The layout of idx (i32 [T, k]) for tokens r->lo .. r->hi into r->si, on the current core
 * (scratchpad and semaphores held to the kernel's or phase's end). Exact in fp32 below 2^24
 * rows. NP_ERR_RANGE when the scratchpad cannot hold it. */
np_status km_slots(kc_ctx *x, const kc_tensor *idx, km_route *r);

/* Cores that get items (tokens, rows) with km_split: of the placement's, those whose share
 * ceil(T / cores) is not empty; core c's share [lo, hi). */
uint32_t km_cores(const kc_ctx *x, int64_t T);
void km_split(int64_t n, uint32_t nc, uint32_t c, int64_t *lo, int64_t *hi);
/* Rows per tile at per_row scratchpad bytes each: 3/4 of the current core's largest free
 * block, at most T and 65535. */
int64_t km_tile_rows(kc_ctx *x, uint64_t per_row, int64_t T);

#endif
