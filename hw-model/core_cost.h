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
 *   vpu.*      ceil(elements / (lanes x ops_per_lane)) x (CORE_VPU_TRANSC_FACTOR for
 *              transcendental ops)
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

#define CORE_VPU_TRANSC_FACTOR 4 /* cycles per element-op of exp, log, div, ... */
#define CORE_MAX_RANGES 4

typedef struct core_range {
    isa_space space;
    uint64_t addr;   /* first byte */
    uint64_t extent; /* bytes from addr to the end of the last element */
    uint64_t bytes;  /* bytes actually accessed */
    bool write;
    const char *what; /* operand name */
    /* the shape: planes of rows of row_bytes contiguous bytes */
    uint64_t planes, plane_stride, rows, row_stride, row_bytes;
} core_range;

/* The ranges instruction in touches (resolved; mxu_k, mxu_n: the last mxu.load's tile).
 * Returns how many (<= CORE_MAX_RANGES). */
unsigned core_ranges(const isa_insn *in, uint64_t mxu_k, uint64_t mxu_n,
                     core_range out[CORE_MAX_RANGES]);

/* Scratchpad banks the scratchpad ranges among r[0..n) touch. Addresses interleave over the
 * banks in sram_port_bytes_per_cycle units (bank = addr / port_bytes mod banks). Looks at
 * most CORE_BANK_SCAN_ROWS rows per range (strided rows repeat their pattern). */
#define CORE_BANK_SCAN_ROWS 4096
uint64_t core_spad_banks_touched(const arch_config *cfg, const core_range *r, unsigned n);

/* Whether ranges a and b share a byte: same space, and some row of one meets some row of the
 * other (strided rows and planes exactly; beyond CORE_OVERLAP_SCAN_ROWS rows to compare, any
 * overlap of the two extents counts). */
#define CORE_OVERLAP_SCAN_ROWS 65536
bool core_ranges_overlap(const core_range *a, const core_range *b);

/* Size in bytes of address space s on cfg's cores / chip. */
uint64_t core_space_bytes(const arch_config *cfg, isa_space s);

/* Scratchpad bytes per core cycle (all banks' ports together). */
uint64_t core_spad_bytes_per_cycle(const arch_config *cfg);

/* Compute cycles of an MXU or VPU instruction (0 for mxu.load), without the scratchpad
 * ports; mxu_k/mxu_n as for core_ranges. */
uint64_t core_exec_cycles(const arch_config *cfg, const isa_insn *in, uint64_t mxu_k,
                          uint64_t mxu_n);

/* MXU cycles of an (m, n, k) GEMM at macs_per_pe MACs per PE per cycle (> 0). */
uint64_t core_mxu_cycles(const mxu_array *a, uint64_t m, uint64_t n, uint64_t k,
                         double macs_per_pe);

#endif
