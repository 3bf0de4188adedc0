/* core_func.h — functional mode: what instructions do to the bytes of the memories
 * (internal to hw-model; the timing lives in core.c and core_cost.c).
 *
 * Memories: each core's scratchpad (core.sram_bytes) and accumulator SRAM (core.acc_bytes),
 * and the chip's HBM (chip.hbm_bytes, allocated lazily in 64 KiB pages so a 16 GiB HBM costs
 * only what is touched). An instruction's effect is applied, whole, when its unit starts it;
 * programs order producers and consumers with semaphores, which retire after the producer.
 *
 * Arithmetic (docs/hw-model.md, "Functional mode"):
 *   - mxu.mm accumulates a x w into each accumulator element in k order, starting from the
 *     element's value (accum, or first on a later loop iteration) or from 0 (set): fp32 for
 *     float inputs (each product and sum rounded to fp32), int32 (wrapping) for int8;
 *   - mxu.drain reads the accumulators as int32 when its dtype is int8 or int32, else fp32,
 *     computes act(acc x scale + bias[j]) in double and rounds to the dtype;
 *   - vector ops compute in double and round to the dtype; reductions sum in double;
 *   - rounding to fp32/bf16/fp16 is to nearest even (through fp32 for bf16/fp16); to integers
 *     it is to nearest even with saturation.
 */
#ifndef NPUSIM_CORE_FUNC_H
#define NPUSIM_CORE_FUNC_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "err.h"
#include "isa.h"
#include "isa_prog.h"

typedef struct core_func core_func;

/* Memories for the n_cores cores of cfg's chip, HBM loaded with p's data sections.
 * NP_ERR_NOMEM; *out is NULL on failure. */
np_status core_func_create(const arch_config *cfg, const isa_program *p, core_func **out,
                           np_err *err);
void core_func_free(core_func *f);

/* Gives f fresh memories for p's cores (scratchpads and accumulators zero, no stationary
 * tile) and writes p's data sections into the HBM, which keeps every other byte: the next
 * program of the chip. NP_ERR_NOMEM (f is then fit only for another load or core_func_free). */
np_status core_func_load(core_func *f, const isa_program *p, np_err *err);

/* Copies between the host and HBM [addr, addr + n); the caller has checked the range. */
np_status core_func_hbm_write(core_func *f, uint64_t addr, const void *buf, uint64_t n,
                              np_err *err);
np_status core_func_hbm_read(core_func *f, uint64_t addr, void *buf, uint64_t n, np_err *err);

/* Applies resolved instruction in of core index ci (its position in the program). first:
 * the innermost enclosing loop is on its first iteration (or there is none), for
 * mode=first. NP_ERR_NOMEM only (ranges were checked at dispatch). */
np_status core_func_exec(core_func *f, uint32_t ci, const isa_insn *in, bool first, np_err *err);

/* True when the functional model gives op its semantics: an executor for its family and,
 * for the elementwise and reduction families, the op's function (a test checks every op). */
bool core_func_has_semantics(isa_op op);

/* Copies n bytes out of / into space s of core ci (HBM, scratchpad, accumulator) at byte
 * address a (the range must lie inside the space). For comm.send / comm.recv. */
np_status core_func_mem_read(core_func *f, uint32_t ci, isa_space s, uint64_t a, void *buf,
                             uint64_t n, np_err *err);
np_status core_func_mem_write(core_func *f, uint32_t ci, isa_space s, uint64_t a,
                              const void *buf, uint64_t n, np_err *err);

/* Element conversions (exposed for tests): bytes of dtype d to double, and double to the
 * bytes of d with the rounding above. */
double core_elem_get(const uint8_t *p, isa_dtype d);
void core_elem_put(uint8_t *p, isa_dtype d, double v);

#endif
