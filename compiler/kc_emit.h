/* kc_emit.h — small emission helpers for kernels that are not the GEMM schedule (attention,
 * pooling, convolution gradients; internal to compiler/): semaphores, dma.copy with its HBM
 * bytes counted as emitted times the enclosing loops' trip counts, the vector unit's
 * families by op, and register moves. Strides equal to the packed layout are written as 0
 * (packed), so programs read the same whichever way a kernel states them. Every call records
 * a failure in the emitter's sticky error (kc_status). */
#ifndef NPUSIM_KC_EMIT_H
#define NPUSIM_KC_EMIT_H

#include <stdint.h>

#include "kernel.h"

typedef struct kce {
    kc_ctx *x;
    uint64_t mult;   /* trip count of the loops around what is being emitted */
    uint64_t rd, wr; /* HBM bytes the emitted copies read and write (times mult) */
} kce;

void kce_wait(kce *c, isa_unit u, unsigned sem, unsigned n);
void kce_signal(kce *c, isa_unit u, unsigned sem, unsigned n);

/* dma.copy of n2 planes of n1 rows of n0 elements of dt; strides in bytes (0: packed). */
void kce_dma(kce *c, isa_opnd dst, isa_opnd src, isa_dtype dt, uint64_t n0, uint64_t n1,
             uint64_t n2, uint64_t ds1, uint64_t ss1, uint64_t ds2, uint64_t ss2);

/* The vector families, by op: binary (b broadcast per bcast; b_s for a full b), with an
 * immediate, unary, a row or column reduction, fill, cast; row strides in bytes (0: packed). */
void kce_bin(kce *c, isa_op op, isa_opnd dst, isa_opnd a, isa_opnd b, uint64_t rows,
             uint64_t cols, isa_dtype dt, isa_bcast bcast, uint64_t dst_s, uint64_t a_s,
             uint64_t b_s);
void kce_scal(kce *c, isa_op op, isa_opnd dst, isa_opnd a, float imm, uint64_t rows,
              uint64_t cols, isa_dtype dt, uint64_t dst_s, uint64_t a_s);
void kce_un(kce *c, isa_op op, isa_opnd dst, isa_opnd src, uint64_t rows, uint64_t cols,
            isa_dtype dt, uint64_t dst_s, uint64_t src_s);
void kce_red(kce *c, isa_op op, isa_opnd dst, isa_opnd src, uint64_t rows, uint64_t cols,
             isa_dtype dt, uint64_t src_s);
void kce_fill(kce *c, isa_opnd dst, float v, uint64_t rows, uint64_t cols, isa_dtype dt,
              uint64_t dst_s);
void kce_cast(kce *c, isa_opnd dst, isa_opnd src, uint64_t rows, uint64_t cols, isa_dtype dt,
              isa_dtype src_dt, uint64_t dst_s, uint64_t src_s);

/* rd = rs (addi rd, rs, 0), and rd = rs + imm. */
void kce_mov(kce *c, unsigned rd, unsigned rs);
void kce_addi(kce *c, unsigned rd, unsigned rs, int64_t imm);
/* Swaps registers a and b through t (three moves). */
void kce_swap(kce *c, unsigned a, unsigned b, unsigned t);

/* A walk over an n_outer x n_inner grid of tiles (images x channel blocks, batches x heads)
 * whose registers reg[0 .. n) step by outer[i] / inner[i] from one tile to the next: loops
 * over both (the last tile of each row, and the last row, emitted once after their loop),
 * so body sees, besides each register's offset for its tile (cur), the offsets of the tile
 * after it (next) — to prefetch it before its own stores — or, for the grid's last tile,
 * `after` (a tile beyond the grid: KCE_NEXT_AFTER) or NULL; KCE_ROW_END marks a row's last
 * tile. At most KCE_WALK_REGS registers. */
#define KCE_WALK_REGS 8
#define KCE_NEXT_AFTER 1u
#define KCE_ROW_END 2u
typedef void (*kce_tile_fn)(void *ctx, const int64_t *cur, const int64_t *next, unsigned flags);
void kce_walk(kce *c, unsigned n, const unsigned *reg, const int64_t *outer,
              const int64_t *inner, uint64_t n_outer, uint64_t n_inner, const int64_t *after,
              kce_tile_fn body, void *ctx);

#endif
