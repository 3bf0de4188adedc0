/* kc_vec.h — the streaming tile engine of the vector kernels (internal to compiler/):
 * elementwise ops and fused chains (kc_elem.c), optimizer updates (kc_optim.c) and
 * broadcast_to (kc_reduce.c) describe their operands and the vector work of one tile; the
 * engine does the rest.
 *
 * The iteration space is the outputs' shape. Every input is broadcast to it (numpy rules,
 * byte strides, 0 on a broadcast dim) and every output covers it. The engine
 *   - drops dims of 1 and merges neighbouring dims wherever every operand (and every
 *     position, below) steps through them as one: a dense tensor, bias or not, becomes one
 *     or two dims;
 *   - cuts the space into tiles of one shape per core — rows x cols elements of the last two
 *     dims (of a single dim, a run of rows x cols consecutive elements), one element of the
 *     outer ones — where the last tile of each dim is shifted back to end at the dim's end
 *     (it overlaps its neighbour, so every tile has the same shape and the edges cost no
 *     code of their own: elementwise results are simply written twice);
 *   - splits one dim's range over the placed cores;
 *   - streams the tiles through two buffer sets per core: per tile, the DMA loads its inputs
 *     (broadcast ones as a row, a column or one element; loop-invariant ones once per core),
 *     then stores the previous tile's outputs, while the vector unit computes this one — so
 *     the load of tile t + 1 and the store of tile t overlap the vector work of tile t + 1
 *     and HBM never waits for the vector unit unless it is the bound:
 *
 *       DMA  wait free[b]; loads of tile t -> in[b]; signal full[b]
 *            wait done[b^1]; stores of tile t - 1 from out[b^1]; signal free[b^1]
 *       VPU  wait full[b]; the tile's work in[b] -> out[b]; signal done[b]
 *
 *     The previous tile's output address is kept in a register copied when the tile is
 *     emitted, so the store needs no knowledge of where the previous tile was;
 *   - emits the tile sequence as loops (one per dim, register-stepped, pairs of tiles where
 *     a body flips the buffer parity an odd number of times), the first tile and the shifted
 *     ones straight: a kernel's size does not grow with its tile count.
 *
 * An output may be an input exactly (an in-place update: same address, strides and dtype)
 * when the space is one dim (dense operands): the shifted last tile then loads what it
 * overlaps before the previous tile's store.
 *
 * Positions. A kernel may ask for positions: a number per element, affine in its indices
 * (pos_stride: elements per index of each dim). The tile callback gets, per position, a VAL
 * operand with the value at the tile's element (0, 0) and its steps per tile row and column
 * (dropout's counter is the row-major index; the causal mask's, column - row).
 */
#ifndef NPUSIM_KC_VEC_H
#define NPUSIM_KC_VEC_H

#include <stdbool.h>
#include <stdint.h>

#include "kernel.h"

#define KV_MAX_IN 12
#define KV_MAX_OUT 4
#define KV_MAX_POS 2
#define KV_MAX_TMP 6

/* A tile as the vector unit sees it: rows x cols elements at addr, packed, unless bcast says
 * it is one row of cols elements (ROW), a column of rows elements (COL) or one element
 * (SCALAR) standing for all of them. */
typedef struct kv_buf {
    uint64_t addr;
    isa_bcast bcast;
    isa_dtype dt;
} kv_buf;

/* What a tile callback works with. */
typedef struct kv_tile {
    uint64_t rows, cols;              /* every tile of the core has this shape */
    kv_buf in[KV_MAX_IN];             /* the inputs' tiles */
    kv_buf out[KV_MAX_OUT];           /* where the outputs' tiles must be (FULL) */
    uint64_t tmp[KV_MAX_TMP];         /* scratch tiles of tmp_bytes[i] x rows x cols bytes */
    isa_opnd pos[KV_MAX_POS];         /* VAL: each position at element (0, 0) */
    int64_t pos_row[KV_MAX_POS], pos_col[KV_MAX_POS]; /* its steps per row and column */
} kv_tile;

/* Emits the vector work of one tile (VPU instructions only; no semaphores). */
typedef void (*kv_tile_fn)(kc_ctx *x, const kv_tile *t, void *ctx);

typedef struct kv_plan {
    int ndim;                         /* the iteration space: the outputs' shape */
    int64_t shape[KC_MAX_DIMS];
    int n_in, n_out;
    kc_tensor in[KV_MAX_IN];          /* inputs; shapes broadcast to the space */
    kc_tensor out[KV_MAX_OUT];        /* outputs; shaped like the space */
    int n_pos;
    int64_t pos_stride[KV_MAX_POS][KC_MAX_DIMS]; /* per dim of the space */
    int n_tmp;
    uint64_t tmp_bytes[KV_MAX_TMP];   /* scratch bytes per tile element */
    int whole;                        /* d + 1: every tile covers dim d of the space whole
                                         (it is the tile's rows or columns): a kernel that
                                         reduces along it; 0: none */
    uint64_t max_tile;                /* elements of a tile at most (0: the engine's choice) */
    int out_over[KV_MAX_OUT];         /* j + 1: output i's tile is written over input j's (same
                                         dtype; the callback reads j first); 0: its own */
    kv_tile_fn tile;
    void *ctx;
    const char *what;                 /* for kc_result.schedule ("add", "adam", ...) */
} kv_plan;

/* Compiles p onto the placed cores of x (fills x->res: hbm bytes, cores, schedule).
 * NP_ERR_INCONSISTENT for shapes that do not broadcast, outputs that overlap inputs other
 * than in place, NP_ERR_RANGE for operands the registers or scratchpad cannot take. */
np_status kv_emit(kc_ctx *x, const kv_plan *p);

/* The row-major element strides of shape (dropout's counter). */
void kv_dense_pos(int ndim, const int64_t *shape, int64_t *stride);

/* ---- helpers for tile callbacks ---- */

/* The elements a buffer of this layout holds for a rows x cols tile. */
uint64_t kv_buf_elems(const kv_tile *t, isa_bcast b);

/* dst (rows x cols, dt) = op(a, b): a vpu.binary op (a FULL, b as it is broadcast). */
void kv_binary(kc_ctx *x, const kv_tile *t, isa_op op, uint64_t dst, kv_buf a, kv_buf b);
/* dst = op(a, imm): a vpu.scalar op (a FULL). */
void kv_scalar(kc_ctx *x, const kv_tile *t, isa_op op, uint64_t dst, kv_buf a, float imm);
/* dst = op(a): a vpu.unary op (a FULL). */
void kv_unary(kc_ctx *x, const kv_tile *t, isa_op op, uint64_t dst, kv_buf a);
/* dst (to) = a converted, in a's layout (a ROW stays a row, ...). */
void kv_cast(kc_ctx *x, const kv_tile *t, uint64_t dst, kv_buf a, isa_dtype to);

#endif
