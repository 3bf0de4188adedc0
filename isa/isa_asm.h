/* isa_asm.h — the assembler (text -> isa_program) and the disassembler (isa_program -> text
 * that assembles back to the same program).
 *
 * The language is documented in docs/isa.md ("Assembly language"), generated from
 * isa_doc.c. Errors are positioned values: "file:line:col: message" naming the offending
 * token, e.g. "k.s:3:5: unknown mnemonic 'vpu.ad'; did you mean 'vpu.add'?".
 *
 *   isa_asm_opts o = {.target = &t};
 *   isa_program *p;
 *   if (isa_asm_file("k.s", &o, &p, &err) != NP_OK) ...;
 *   char *text;
 *   isa_disasm(p, &text, &err);   // isa_asm(text) gives a program equal to p
 */
#ifndef NPUSIM_ISA_ASM_H
#define NPUSIM_ISA_ASM_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "isa_prog.h"

typedef struct isa_asm_opts {
    /* The architecture to build for when the source has no .target directive; NULL means the
     * source must have one. */
    const isa_target *target;
    /* When true, a .target in the source must equal *target (NP_ERR_INCONSISTENT at the
     * directive): the user asked for a specific architecture. */
    bool target_strict;
} isa_asm_opts;

/* Limits that keep hostile input bounded. */
#define ISA_ASM_MAX_DATA_BYTES (256u << 20) /* initialized .data */
#define ISA_ASM_MAX_INSNS (1u << 22)        /* per core */
#define ISA_ASM_MAX_NAME 1024               /* bytes of a NAME string */

/* Assembles src[0..len) (file names it in errors) into a new program (*out, free with
 * isa_program_free). On failure *out is NULL and err holds the first error with its file,
 * line and column: NP_ERR_SYNTAX, NP_ERR_UNKNOWN_KEY (mnemonic, directive, symbol, enum value;
 * with a did-you-mean), NP_ERR_TYPE (wrong operand kind), NP_ERR_RANGE (value out of range,
 * with the allowed range), NP_ERR_DUPLICATE, NP_ERR_MISSING, NP_ERR_INCONSISTENT,
 * NP_ERR_NOMEM. */
np_status isa_asm(const char *src, size_t len, const char *file, const isa_asm_opts *opts,
                  isa_program **out, np_err *err);

/* The largest assembly file read (256 MiB: a hundred times the largest program the compiler
 * writes); np_read_file refuses a larger one, a directory or a device with NP_ERR_RANGE or
 * NP_ERR_IO naming the file. */
#define ISA_ASM_MAX_FILE_BYTES (256ull << 20)

/* isa_asm on the contents of the file at path; NP_ERR_IO if it cannot be read. */
np_status isa_asm_file(const char *path, const isa_asm_opts *opts, isa_program **out,
                       np_err *err);

/* The program as assembly text (*text, malloc'd): .target, data sections with their labels,
 * then each core with its kernels, loop bodies indented and each instruction's byte offset
 * in a comment. Assembling the text gives a program equal to p (isa_program_equal), hence
 * the same ELF bytes. NP_ERR_NOMEM only. */
np_status isa_disasm(const isa_program *p, char **text, np_err *err);

/* Float to bf16 / fp16 bits, rounding to nearest even (the .bf16 and .fp16 directives). */
uint16_t isa_f32_to_bf16(float f);
uint16_t isa_f32_to_fp16(float f);

#endif
