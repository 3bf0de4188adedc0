/* kc_matmul.h — the GEMM schedule shared by matmul and conv2d (compiler/kc_matmul.c): its tile
 * choice, exposed for the standalone generators (kgen_matmul.h) and the cost model. */
#ifndef NPUSIM_KC_MATMUL_H
#define NPUSIM_KC_MATMUL_H

#include <stdint.h>

#include "arch.h"
#include "err.h"
#include "kernel.h"

/* A GEMM as the tile choice sees it: dimensions, element sizes (A and B: e; C: ce), the cores
 * that share its tiles, and the scratchpad bytes it needs beyond double-buffered A and B
 * tiles and one C tile: extra_mk more TM x TK A tiles (a transposed A's staging), per output
 * element / per TN column / per TM row / in all (the epilogue's operand tiles, a transposed
 * C tile, partial sums), and extra_kn more TK x TN B tiles (a transposed B's staging). */
typedef struct kc_gemm_shape {
    uint64_t m, n, k;
    uint64_t e, ce;
    uint64_t cores;
    uint64_t extra_mk, extra_mn, extra_n, extra_m, extra;
    uint64_t extra_kn;
    uint64_t reuse_k; /* > 0: A's slices replaced by a resident TM x reuse_k slab */
} kc_gemm_shape;

/* Fills the 0 tile sizes among *tm, *tn, *tk for g on cfg with spad scratchpad and acc
 * accumulator bytes free; given sizes are kept. The dimension the dataflow streams through
 * time (os: K, ws: M, is: N) gets the largest tile the accumulators (TM x TN x 4 bytes) and
 * the scratchpad (kc_gemm_spad_bytes) allow; the two spatial ones min(dim, 4 x the array
 * side they map to), so folds stay whole and only the edge tiles are partial. With cores > 1
 * the larger of TM and TN (those not given) is halved until there are at least as many output
 * tiles as cores (or neither can shrink). NP_ERR_RANGE when a dimension is 0 or the tiles
 * cannot fit (the message names the memory and its size); nothing changes on failure. */
np_status kc_gemm_tiles(const arch_config *cfg, const kc_gemm_shape *g, uint64_t spad,
                        uint64_t acc, uint64_t *tm, uint64_t *tn, uint64_t *tk, np_err *err);

/* Scratchpad bytes of the schedule with these tiles. */
uint64_t kc_gemm_spad_bytes(const kc_gemm_shape *g, uint64_t tm, uint64_t tn, uint64_t tk);

#endif
