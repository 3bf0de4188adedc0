/* isa_elf.h — programs as ELF files (written and read with libelf).
 *
 * Layout of an npusim ELF (all written by isa_elf_write, all checked by the loader):
 *
 *   ELF header     ELFCLASS64, ELFDATA2LSB, ET_EXEC, e_machine ISA_ELF_MACHINE (0x4e50, "NP":
 *                  not assigned by the ELF registry, chosen for npusim), e_flags 0, no program
 *                  headers
 *   .text.core<N>  PROGBITS, ALLOC|EXECINSTR, address 0: core N's instructions, 32-byte words
 *   .data          PROGBITS, ALLOC|WRITE: initialized HBM contents at sh_addr
 *   .bss           NOBITS, ALLOC|WRITE: zero-filled HBM at sh_addr
 *   .npu.names     STRTAB: names of trace regions ('\0', then sorted unique NUL-terminated
 *                  strings, each used by an instruction)
 *   .note.npusim   NOTE: name "npusim", type ISA_ELF_NOTE_TARGET, 40-byte descriptor
 *                  (little-endian): u32 ISA version, u32 array_rows, u32 array_cols, u32 cores,
 *                  u32 dtypes (bit d: isa_dtype d), u32 reserved (0), u64 spad_bytes,
 *                  u64 acc_bytes
 *   .symtab        STT_FUNC per kernel (in its text section: byte offset, size in bytes);
 *                  STT_OBJECT per data label (HBM address, size); all STB_GLOBAL
 *   .strtab, .shstrtab
 *
 * The loader never trusts the file: every size, offset, index and name is checked before use,
 * and each problem is an NP_ERR_FORMAT (or NP_ERR_INCONSISTENT for an architecture mismatch)
 * naming the file and what is wrong. isa/fuzz/fuzz_elf.c runs it under libFuzzer.
 */
#ifndef NPUSIM_ISA_ELF_H
#define NPUSIM_ISA_ELF_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "isa_prog.h"

#define ISA_ELF_MACHINE 0x4e50u
#define ISA_ELF_NOTE_NAME "npusim"
#define ISA_ELF_NOTE_TARGET 1u
#define ISA_ELF_NOTE_DESC_BYTES 40u
#define ISA_ELF_MAX_SECTIONS 1024u
#define ISA_ELF_MAX_FILE_BYTES ((size_t)1 << 31)

/* What objdump shows besides the program: the headers as found in the file. */
typedef struct isa_elf_section_info {
    char *name;
    uint32_t type, link, info;
    uint64_t flags, addr, offset, size, align, entsize;
} isa_elf_section_info;

typedef struct isa_elf_symbol_info {
    char *name;
    uint8_t type, bind;
    uint16_t shndx;
    uint64_t value, size;
} isa_elf_symbol_info;

typedef struct isa_elf_info {
    uint8_t ei_class, ei_data, ei_version, ei_osabi;
    uint16_t type, machine;
    uint32_t version, flags;
    uint64_t entry, shoff;
    uint16_t shnum, shstrndx;
    isa_elf_section_info *sections; /* all of them, index 0 included */
    uint32_t n_sections;
    isa_elf_symbol_info *symbols;   /* the symbol table, index 0 included */
    uint32_t n_symbols;
    uint32_t isa_version;           /* from the note */
    isa_target target;
} isa_elf_info;

void isa_elf_info_free(isa_elf_info *info);

/* Writes p (checked with isa_program_validate first) as an ELF file at path. The output is a
 * function of p alone: the same program gives the same bytes. NP_ERR_FORMAT (invalid p),
 * NP_ERR_IO (naming path), NP_ERR_NOMEM. On failure the file may be partly written. */
np_status isa_elf_write(const isa_program *p, const char *path, np_err *err);

/* The same bytes in memory: *buf (malloc'd) and *len. */
np_status isa_elf_image(const isa_program *p, uint8_t **buf, size_t *len, np_err *err);

/* Loads the ELF image buf[0..len) (name names it in errors) into a new program (*out), checking
 * everything listed above; with expect non-NULL the note's fingerprint must equal it
 * (NP_ERR_INCONSISTENT otherwise). With info non-NULL the headers are returned too. On
 * failure *out (and *info) are NULL. Never reads outside buf. */
np_status isa_elf_load_mem(const uint8_t *buf, size_t len, const char *name,
                           const isa_target *expect, isa_program **out, isa_elf_info **info,
                           np_err *err);

/* isa_elf_load_mem on the file at path; NP_ERR_IO if it cannot be read. */
np_status isa_elf_load(const char *path, const isa_target *expect, isa_program **out,
                       isa_elf_info **info, np_err *err);

/* isa_elf_load checking the program against an architecture config (base/arch.h): the usual
 * entry point of `npusim sim`. */
struct arch_config;
np_status isa_elf_load_arch(const char *path, const struct arch_config *cfg, isa_program **out,
                            np_err *err);

/* isa_elf_load checked against the architecture named by arch (a preset or file, resolved by
 * arch_resolve) when arch is not NULL, unchecked when it is: what `npusim disasm/objdump
 * --arch` do. info may be NULL. */
np_status isa_elf_load_named_arch(const char *path, const char *arch, isa_program **out,
                                  isa_elf_info **info, np_err *err);

#endif
