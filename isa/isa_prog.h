/* isa_prog.h — a whole program for one chip: decoded instructions per core, kernel symbols,
 * HBM data sections and data symbols, the name table, and the architecture it was built for.
 *
 * The assembler produces it (isa_asm.h), the ELF writer stores it and the loader gives it
 * back (isa_elf.h), the disassembler prints it. The hardware model runs it: each core's
 * front end walks cores[i].insns from index 0; kernels name instruction ranges (for traces
 * and per-kernel statistics); data sections are HBM contents at load; symbols name HBM
 * buffers (for --input / --dump).
 *
 *   isa_program *p;
 *   np_err e = {0};
 *   if (isa_elf_load("prog.elf", &target, &p, &e) != NP_OK) return e.status;
 *   for (uint32_t c = 0; c < p->n_cores; c++)
 *       for (uint32_t i = 0; i < p->cores[c].n_insns; i++)
 *           issue(p->cores[c].core, &p->cores[c].insns[i]);
 *   isa_program_free(p);
 */
#ifndef NPUSIM_ISA_PROG_H
#define NPUSIM_ISA_PROG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "isa.h"

struct arch_config;

/* The architecture fingerprint a program is built for, recorded in the ELF note; the loader
 * refuses a program whose fingerprint differs from the architecture it is asked to run on. */
typedef struct isa_target {
    uint32_t array_rows, array_cols; /* systolic array */
    uint32_t cores;                  /* cores on the chip */
    uint32_t dtypes;                 /* bit d: the array multiplies isa_dtype d */
    uint64_t spad_bytes;             /* scratchpad SRAM per core */
    uint64_t acc_bytes;              /* accumulator SRAM per core */
} isa_target;

/* Fills *t from an architecture config (base/arch.h): the array's dtypes are those with a
 * nonzero MAC rate. */
void isa_target_from_arch(const struct arch_config *cfg, isa_target *t);

/* True when a and b are the same fingerprint. Otherwise writes the differences to why (e.g.
 * "array_rows 16 vs 128, spad_bytes 262144 vs 16777216"), a first, b second. */
bool isa_target_equal(const isa_target *a, const isa_target *b, char *why, size_t n);

/* The dtypes of a mask as "fp32|bf16" ("none" for 0); returns buf. */
char *isa_dtypes_text(uint32_t mask, char *buf, size_t n);

/* Data sections lie below this HBM address (256 TiB, above any configurable HBM). */
#define ISA_HBM_LIMIT ((uint64_t)1 << 48)

/* A named range of instructions of one core (an ELF STT_FUNC symbol). */
typedef struct isa_kernel {
    char *name;
    uint32_t start, count; /* instruction indices [start, start + count) */
} isa_kernel;

typedef struct isa_core_text {
    uint32_t core;    /* core number on the chip; the ELF section is .text.core<core> */
    isa_insn *insns;
    uint32_t n_insns;
    isa_kernel *kernels; /* ordered by start */
    uint32_t n_kernels;
} isa_core_text;

/* HBM contents at load. */
typedef struct isa_data {
    char *name;     /* ".data" (initialized) or ".bss" (zero) */
    uint64_t addr;  /* HBM byte address */
    uint64_t size;  /* bytes */
    uint8_t *bytes; /* size bytes; NULL for zero-filled sections */
} isa_data;

/* A named HBM buffer (an ELF STT_OBJECT symbol). */
typedef struct isa_symbol {
    char *name;
    uint32_t data;       /* index in data[] */
    uint64_t addr, size; /* HBM bytes [addr, addr + size) inside that section */
} isa_symbol;

typedef struct isa_program {
    isa_target target;
    isa_core_text *cores; /* ascending core numbers */
    uint32_t n_cores;
    isa_data *data;       /* disjoint HBM ranges */
    uint32_t n_data;
    isa_symbol *symbols;  /* ordered by section, then address */
    uint32_t n_symbols;
    char *names;          /* name table of NAME operands: '\0' first, NUL-terminated strings */
    size_t names_len;
} isa_program;

/* An empty program (no cores, data or names) for target t; NULL when out of memory. */
isa_program *isa_program_new(const isa_target *t);
void isa_program_free(isa_program *p);

/* The core's text, or NULL if the program has none for that core. */
const isa_core_text *isa_program_core(const isa_program *p, uint32_t core);

/* The data symbol called name, or NULL. */
const isa_symbol *isa_program_symbol(const isa_program *p, const char *name);

/* The string at offset off of the name table, or NULL if off is not inside it. */
const char *isa_program_name(const isa_program *p, int64_t off);

/* Checks everything a loaded or about-to-be-written program must satisfy: every operand
 * valid; loops balanced and at most ISA_LOOP_DEPTH deep; NAME operands inside the name table;
 * cores ascending and below target.cores; array dtypes supported by the target; kernels
 * ordered, disjoint and inside their core's text; data sections ".data" (bytes) and ".bss"
 * (zero), at most one of each, disjoint, below ISA_HBM_LIMIT; symbols in section-then-address order, inside their
 * section; kernel and symbol names valid (isa_name_ok) and unique. NP_ERR_FORMAT
 * naming the core and instruction (or section, symbol) that breaks a rule. */
np_status isa_program_validate(const isa_program *p, np_err *err);

/* True when s[0..n) can name a kernel or data symbol: an assembler identifier
 * ([A-Za-z_.$][A-Za-z0-9_.$]*) that is not a word of the language (r0.., s0.., spad, hbm, acc,
 * peer, rank, bits, none). */
bool isa_name_ok(const char *s, size_t n);

/* True when a and b hold the same program (every field, instruction, byte and name). */
bool isa_program_equal(const isa_program *a, const isa_program *b);

#endif
