/* isa_emit.h — building programs through the ISA table: the emitter.
 *
 * Compilers never print assembly and parse it back: they append decoded instructions to the
 * cores of an isa_program through one typed constructor per instruction, generated from
 * isa.def (isa_emit_<NAME>, taking that instruction's operand struct isa_args_<NAME>). Every
 * operand is checked against its field in the table when it is appended (isa_operand_check:
 * kind, address space, range), loops are checked for nesting, and kernels and HBM data are
 * named as the program container wants them. The disassembler (isa_disasm, `npusim disasm`)
 * shows any program built this way.
 *
 * Errors are sticky, like the framework's graph: the first failing call records its error
 * (with the core, the instruction index and the open kernel) and returns it; every later
 * call does nothing and returns the same status, so a generator may emit a whole kernel and
 * check once, with isa_emit_status or isa_emit_finish.
 *
 *   isa_emit *e;
 *   if (isa_emit_new(prog, NULL, &e, &err) != NP_OK) return err.status;
 *   uint64_t x;
 *   isa_emit_bss(e, "X", 4096, 64, &x);               // a .bss symbol in HBM
 *   isa_emit_core(e, 0);                              // append to core 0 from now on
 *   isa_emit_kernel_begin(e, "scale");
 *   ISA_EMIT(e, LI, isa_reg(1), isa_imm((int64_t)x));
 *   ISA_EMIT(e, LOOP, isa_imm(4), isa_step(1, 1024)); // 4 x 1 KiB, r1 stepped
 *   ISA_EMIT(e, DMA_COPY, isa_spad(0, 0), isa_hbm(1, 0), isa_imm(ISA_DTYPE_FP32), isa_imm(256));
 *   ...
 *   ISA_EMIT(e, ENDLOOP);
 *   isa_emit_kernel_end(e);
 *   ISA_EMIT(e, HALT);
 *   np_status st = isa_emit_finish(e, &err);          // the first error, or validation
 *   isa_emit_free(e);
 *
 * ISA_EMIT(e, NAME, operands...) gives the required operands positionally in table order and
 * optional ones positionally after them or by name (.n1 = isa_imm(4)); an optional operand
 * left all zero takes its table default (n1 = 1, scale = 1.0, ...). The one operand whose
 * all-zero value differs from its default, mxu.drain's scale = 0.0, needs isa_emit_insn with
 * a whole isa_insn (isa_insn_init sets the defaults). tests/test_isa_emit.c compiles this
 * example.
 */
#ifndef NPUSIM_ISA_EMIT_H
#define NPUSIM_ISA_EMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "isa.h"
#include "isa_prog.h"

typedef struct isa_emit isa_emit;

/* Where data sections start when the program has none yet (a program that already has a
 * .data or .bss section continues after its last byte). */
#define ISA_EMIT_DATA_BASE 0x10000u  /* 64 KiB: address 0 is never a buffer */
#define ISA_EMIT_BSS_BASE 0x100000u  /* 1 MiB */

typedef struct isa_emit_opts {
    uint64_t data_base; /* .data's HBM address (0: ISA_EMIT_DATA_BASE) */
    uint64_t bss_base;  /* .bss's HBM address (0: ISA_EMIT_BSS_BASE) */
    uint64_t hbm_bytes; /* data must lie below this (0: ISA_HBM_LIMIT), e.g. chip.hbm_bytes */
} isa_emit_opts;

/* An emitter appending to p (not owned; p must outlive it; p's text may already hold
 * instructions, e.g. from the assembler). opts may be NULL (defaults). NP_ERR_NOMEM;
 * *out is NULL on failure. */
np_status isa_emit_new(isa_program *p, const isa_emit_opts *opts, isa_emit **out, np_err *err);
void isa_emit_free(isa_emit *e);

/* NP_OK, or the first error of any call so far (copied into err when not NULL). */
np_status isa_emit_status(const isa_emit *e, np_err *err);

/* Records an error of the caller's own (a compiler's shape check, say) as the emitter's
 * sticky error, unless one is already there; returns the sticky status. */
np_status isa_emit_fail(isa_emit *e, np_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The program being built. */
isa_program *isa_emit_program(const isa_emit *e);

/* Makes core the one instructions are appended to, creating its (empty) text in ascending
 * order when it has none. NP_ERR_RANGE when core >= the target's cores. */
np_status isa_emit_core(isa_emit *e, uint32_t core);

/* The current core (UINT32_MAX before the first isa_emit_core), the index the next
 * instruction gets on it, and its open loops. */
uint32_t isa_emit_cur_core(const isa_emit *e);
uint32_t isa_emit_pc(const isa_emit *e);
unsigned isa_emit_loop_depth(const isa_emit *e);

/* Appends in (operands as they are, no defaults filled) to the current core after checking
 * every operand against the table and the loop nesting (loop deeper than ISA_LOOP_DEPTH,
 * endloop without loop). NP_ERR_RANGE / NP_ERR_TYPE (operand), NP_ERR_FORMAT (nesting),
 * NP_ERR_INCONSISTENT (no current core), NP_ERR_RANGE (more than ISA_ASM_MAX_INSNS on the
 * core), NP_ERR_NOMEM. */
np_status isa_emit_insn(isa_emit *e, const isa_insn *in);

/* One typed constructor per instruction, generated from isa.def: isa_emit_DMA_COPY(e, a)
 * appends dma.copy with the operands of a (optional ones all zero: their defaults). */
#define ISA_OP(NAME, mnemonic, opcode, UNIT, FAMILY, COST, fields, semantics, timing) \
    np_status isa_emit_##NAME(isa_emit *e, isa_args_##NAME a);
#include "isa.def"

/* ISA_EMIT(e, NAME, operands...): isa_emit_NAME with its operands given as in an
 * initializer of isa_args_NAME (see the header comment). */
#define ISA_EMIT(...) ISA_EMIT_(__VA_ARGS__, .end_ = 0)
#define ISA_EMIT_(e, NAME, ...) isa_emit_##NAME((e), (isa_args_##NAME){__VA_ARGS__})

/* Operand constructors beyond isa.h's: an enumerated value (dtype, unit, act, bcast, red,
 * accm), a semaphore, and the absent optional scratchpad address. */
static inline isa_opnd isa_enum(int v) { return isa_imm(v); }
static inline isa_opnd isa_sem(unsigned s) { return isa_imm((int64_t)s); }
static inline isa_opnd isa_none(void) { return (isa_opnd){0}; }

/* Opens kernel `name` on the current core at the next instruction; isa_emit_kernel_end
 * closes it (it names the instructions appended in between: traces and per-kernel
 * statistics use it). NP_ERR_TYPE for a name that is not isa_name_ok, NP_ERR_DUPLICATE
 * when the core already has a kernel of that name, NP_ERR_INCONSISTENT when a kernel is
 * open on this core (kernels do not nest) or, at the end, when none is or a loop opened
 * inside it is still open. */
np_status isa_emit_kernel_begin(isa_emit *e, const char *name);
np_status isa_emit_kernel_end(isa_emit *e);

/* True when core already has a kernel (open or closed) called name. */
bool isa_emit_has_kernel(const isa_emit *e, uint32_t core, const char *name);

/* A NAME operand for s (trace.begin/end), added to the program's name table once.
 * NP_ERR_RANGE for a string over ISA_ASM_MAX_NAME bytes, NP_ERR_NOMEM. */
np_status isa_emit_name(isa_emit *e, const char *s, isa_opnd *out);

/* Allocates bytes of zeroed HBM in .bss (isa_emit_bss) or initialized from data in .data
 * (isa_emit_data), aligned to align (a power of two; 0 means 64), and names it with a data
 * symbol when name is not NULL (`npusim sim --input/--dump` find it). *addr is its HBM
 * address. NP_ERR_TYPE (name not isa_name_ok), NP_ERR_DUPLICATE (name taken), NP_ERR_RANGE
 * (0 bytes, bad alignment, the section would reach the other one or the HBM limit),
 * NP_ERR_NOMEM. */
np_status isa_emit_bss(isa_emit *e, const char *name, uint64_t bytes, uint64_t align,
                       uint64_t *addr);
np_status isa_emit_data(isa_emit *e, const char *name, const void *data, uint64_t bytes,
                        uint64_t align, uint64_t *addr);

/* Checks that the program is complete — no kernel or loop left open on any core — and valid
 * (isa_program_validate). Returns the sticky error if there is one. The program stays the
 * caller's; the emitter may go on appending afterwards. */
np_status isa_emit_finish(isa_emit *e, np_err *err);

#endif
