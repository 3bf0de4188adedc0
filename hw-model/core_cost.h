/* core_cost.h — what one resolved instruction touches and costs (internal to hw-model).
 *
 * "Resolved" means the front end has added the base registers: every address operand's val
 * is the absolute byte address and its reg is 0. The footprint of an operand is the byte range
 * from its address to the end of its last element (strided rows included); the traffic is the
 * bytes actually read or written. Costs (docs/hw-model.md):
 *
 *   mxu.mm     mxu_timing's cycles for (m, n, k) on the array, with the streaming term T
 *              divided by the dtype's MACs/PE/cycle (rounded up); mxu.load only records k, n
 *   mxu.drain  ceil(m x n / array_cols): one accumulator row of array_cols per cycle
 *   vpu.*      ceil(elements / (lanes x ops_per_lane)), where ops_per_lane is
 *              core.vector_transc_ops_per_lane for the ISA's transcendental class
 *              (isa_ops[op].cost) and core.vector_ops_per_lane for the others
 * These are compute times only: the scratchpad bytes of an instruction also stream through the
 * core's shared port pool and a DMA through the HBM (core.c), and it retires when all are done.
 */
#ifndef NPUSIM_CORE_COST_H
#define NPUSIM_CORE_COST_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "isa.h"
#include "mxu_timing.h"

#define CORE_MAX_RANGES 6

typedef struct core_range {
    isa_space space;
    uint64_t addr;   /* first byte */
    uint64_t extent; /* bytes from addr to the end of the last element */
    uint64_t bytes;  /* bytes actually accessed */
    bool write;
    const char *what; /* operand name */
    /* the shape: planes of rows of row_bytes contiguous bytes */
    uint64_t planes, plane_stride, rows, row_stride, row_bytes;
    /* an indexed table (dma.gather's src, dma.scatter's dst): the shape above is the whole
     * table (its footprint), of which idx_rows rows are accessed at places the data decides;
     * 0 for every other range */
    uint64_t idx_rows;
} core_range;

/* The ranges instruction in touches (resolved; mxu_k, mxu_n: the last mxu.load's tile).
 * Returns how many (<= CORE_MAX_RANGES). */
unsigned core_ranges(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                     core_range out[CORE_MAX_RANGES]);

/* How many of `units` interleaved units (banks, channels; at most 4096) the ranges of address
 * space `space` among r[0..n) touch, when addresses interleave over them every unit_bytes
 * (unit = addr / unit_bytes mod units). Looks at most CORE_BANK_SCAN_ROWS rows per range
 * (strided rows repeat their pattern). All units when no range is in that space. */
#define CORE_BANK_SCAN_ROWS 4096
uint64_t core_units_touched(const core_range *r, unsigned n, isa_space space, uint64_t unit_bytes,
                           uint64_t units);

/* Scratchpad banks touched: interleaved every sram_port_bytes_per_cycle over sram_banks. */
uint64_t core_spad_banks_touched(const arch_config *cfg, const core_range *r, unsigned n);

/* Bytes a memory of `burst`-byte accesses moves for range r: each row pays for every burst
 * it touches (a 40-byte row at offset 16 of 32-byte bursts moves 64); rows (and planes) that
 * follow each other without a gap count as one. Exact when the rows
 * all start at the same offset in a burst or there are at most CORE_BANK_SCAN_ROWS of them;
 * otherwise the scanned rows' average, rounded up. An indexed table (idx_rows) moves idx_rows
 * rows of whole bursts, one burst more per row unless the table and its row stride are
 * burst-aligned (where a row lies is data: the worst case). */
uint64_t core_burst_bytes(const core_range *r, uint64_t burst);

/* Whether ranges a and b share a byte: same space, and some row of one meets some row of the
 * other. Exact for strided rows and planes: each row of the range with fewer rows is tested
 * arithmetically against the planes of the other that can reach it; beyond
 * CORE_OVERLAP_SCAN_ROWS such tests, any overlap of the two extents counts. */
#define CORE_OVERLAP_SCAN_ROWS 65536
bool core_ranges_overlap(const core_range *a, const core_range *b);

/* Size in bytes of address space s on cfg's cores / chip (HBM: with a global buffer,
 * chip.l2_mode buffer, its chip.l2_bytes of addresses after the HBM's too). */
uint64_t core_space_bytes(const arch_config *cfg, isa_space s);

/* Scratchpad bytes per core cycle (all banks' ports together). */
uint64_t core_spad_bytes_per_cycle(const arch_config *cfg);

/* Compute cycles of an MXU or VPU instruction (0 for mxu.load), without the scratchpad
 * ports; mxu_k/mxu_n as for core_ranges. Both this and core_ranges dispatch on the op's
 * operand family (isa.def), never on opcode ranges. */
uint64_t core_exec_cycles(const arch_config *cfg, const isa_insn *in, uint64_t mxu_k,
                          uint64_t mxu_n);

/* True when the model has a footprint and a compute-time entry for family f (a test checks
 * every family of the ISA table). */
bool core_family_modelled(isa_family f);

/* MXU cycles of an (m, n, k) GEMM at macs_per_pe MACs per PE per cycle (> 0): its fold
 * schedule's cycles, the streamed term T of each fold taking ceil(T / macs_per_pe). */
uint64_t core_mxu_cycles(const mxu_array *a, uint64_t m, uint64_t n, uint64_t k,
                         double macs_per_pe);

/* That fold schedule (mxu_timing.h); false (and *out untouched) for an invalid shape or a
 * rate of 0. */
bool core_mxu_sched(const mxu_array *a, uint64_t m, uint64_t n, uint64_t k, double macs_per_pe,
                    mxu_sched *out);

/* The fold schedule of a resolved mxu.mm on cfg's array (mxu_k, mxu_n: the last mxu.load's
 * tile); false when the shape is invalid or the array cannot do its dtype. */
bool core_mxu_insn_sched(const arch_config *cfg, const isa_insn *in, uint64_t mxu_k,
                         uint64_t mxu_n, mxu_sched *out);

#endif
