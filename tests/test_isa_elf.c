/* test_isa_elf.c — the ELF container: writing and loading give back the program; a good file
 * corrupted in every way the loader must notice gives the exact error (through the API and
 * as exit status 2 from npusim); truncations and random mutations never crash the loader and
 * whatever it accepts disassembles and reassembles to the same program; objdump's output;
 * the architecture fingerprint of a config. */
#include <elf.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch.h"
#include "harness.h"
#include "isa.h"
#include "isa_asm.h"
#include "isa_elf.h"
#include "test_isa_gen.h"

static const isa_target tiny = {.array_rows = 4, .array_cols = 4, .cores = 2,
                                .spad_bytes = 64 * 1024, .acc_bytes = 4 * 1024,
                                .dtypes = (1u << ISA_DTYPE_FP32) | (1u << ISA_DTYPE_BF16) |
                                          (1u << ISA_DTYPE_FP16) | (1u << ISA_DTYPE_INT8)};

/* The reference program. Sections: [1] .text.core0 (7 words), [2] .text.core1 (2 words),
 * [3] .data (16 bytes at 0x1000), [4] .bss (64 bytes at 0x2000), [5] .npu.names, [6] .note.npusim,
 * [7] .symtab (null, vec, out, scale, other), [8] .strtab, [9] .shstrtab. */
static const char ref_src[] =
    ".data 0x1000\n"
    "vec: .float 1.0, 2.0, 3.0, 4.0\n"
    ".bss\n"
    "out: .space 64\n"
    ".core 0\n"
    ".kernel scale\n"
    "    dma.copy spad[0], hbm[vec], fp32, 4\n"           /* 0 */
    "    loop 2, r1+=16\n"                                /* 1 */
    "        vpu.muls spad[r1], spad[r1], 0.5, 1, 2, fp32\n" /* 2 */
    "    endloop\n"                                       /* 3 */
    "    trace.begin \"phase\"\n"                         /* 4 */
    "    trace.end \"phase\"\n"                           /* 5 */
    "    halt\n"                                          /* 6 */
    ".core 1\n"
    ".kernel other\n"
    "    nop\n"
    "    halt\n";

typedef struct img {
    uint8_t *b;
    size_t n;
} img;

static isa_program *ref_program(void)
{
    isa_asm_opts o = {&tiny, false};
    isa_program *p = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(isa_asm(ref_src, strlen(ref_src), "ref.s", &o, &p, &e), NP_OK);
    return p;
}

static img ref_image(void)
{
    isa_program *p = ref_program();
    img m = {0};
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(isa_elf_image(p, &m.b, &m.n, &e), NP_OK);
    isa_program_free(p);
    return m;
}

static Elf64_Ehdr ehdr(const img *m)
{
    Elf64_Ehdr h;
    memcpy(&h, m->b, sizeof h);
    return h;
}

static void set_ehdr(img *m, const Elf64_Ehdr *h)
{
    memcpy(m->b, h, sizeof *h);
}

static Elf64_Shdr shdr(const img *m, unsigned i)
{
    Elf64_Shdr s;
    memcpy(&s, m->b + ehdr(m).e_shoff + i * sizeof s, sizeof s);
    return s;
}

static void set_shdr(img *m, unsigned i, const Elf64_Shdr *s)
{
    memcpy(m->b + ehdr(m).e_shoff + i * sizeof *s, s, sizeof *s);
}

/* The name of section i as stored in .shstrtab (writable, to rename sections in place). */
static char *sec_name(img *m, unsigned i)
{
    Elf64_Shdr str = shdr(m, ehdr(m).e_shstrndx);
    return (char *)m->b + str.sh_offset + shdr(m, i).sh_name;
}

static uint8_t *word(img *m, unsigned sec, unsigned insn)
{
    return m->b + shdr(m, sec).sh_offset + insn * ISA_WORD_BYTES;
}

static Elf64_Sym sym(const img *m, unsigned i)
{
    Elf64_Sym s;
    memcpy(&s, m->b + shdr(m, 7).sh_offset + i * sizeof s, sizeof s);
    return s;
}

static void set_sym(img *m, unsigned i, const Elf64_Sym *s)
{
    memcpy(m->b + shdr(m, 7).sh_offset + i * sizeof *s, s, sizeof *s);
}

TEST(the_reference_image_has_the_documented_layout)
{
    img m = ref_image();
    Elf64_Ehdr h = ehdr(&m);
    CU_ASSERT_EQUAL(memcmp(h.e_ident, ELFMAG, SELFMAG), 0);
    CU_ASSERT_EQUAL(h.e_ident[EI_CLASS], ELFCLASS64);
    CU_ASSERT_EQUAL(h.e_ident[EI_DATA], ELFDATA2LSB);
    CU_ASSERT_EQUAL(h.e_machine, 0x4e50);
    CU_ASSERT_EQUAL(h.e_type, ET_EXEC);
    CU_ASSERT_EQUAL(h.e_phnum, 0);
    CU_ASSERT_EQUAL_FATAL(h.e_shnum, 10);
    static const char *const names[] = {"",        ".text.core0",  ".text.core1", ".data",
                                        ".bss",    ".npu.names",   ".note.npusim", ".symtab",
                                        ".strtab", ".shstrtab"};
    for (unsigned i = 0; i < 10; i++)
        CU_ASSERT_STRING_EQUAL(sec_name(&m, i), names[i]);
    CU_ASSERT_EQUAL(shdr(&m, 1).sh_size, 7 * 32);
    CU_ASSERT_EQUAL(shdr(&m, 1).sh_flags, SHF_ALLOC | SHF_EXECINSTR);
    CU_ASSERT_EQUAL(shdr(&m, 3).sh_addr, 0x1000);
    CU_ASSERT_EQUAL(shdr(&m, 4).sh_type, SHT_NOBITS);
    CU_ASSERT_EQUAL(shdr(&m, 4).sh_addr, 0x2000);
    CU_ASSERT_EQUAL(shdr(&m, 5).sh_size, 7); /* "\0phase\0" */
    /* The note: namesz 7, descsz 40, type 1, "npusim", then the ISA version, rows 4, cols 4, ... */
    const uint8_t *n = m.b + shdr(&m, 6).sh_offset;
    static const uint8_t note[] = {7, 0, 0, 0, 40, 0, 0, 0, 1, 0, 0, 0, 'n', 'p', 'u', 's', 'i',
                                   'm', 0, 0, ISA_VERSION, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 2, 0, 0, 0,
                                   0x0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0,
                                   0, 0x10, 0, 0, 0, 0, 0, 0};
    CU_ASSERT_EQUAL(shdr(&m, 6).sh_size, sizeof note);
    CU_ASSERT_EQUAL(memcmp(n, note, sizeof note), 0);
    Elf64_Sym s = sym(&m, 3);
    CU_ASSERT_EQUAL(ELF64_ST_TYPE(s.st_info), STT_FUNC);
    CU_ASSERT_EQUAL(s.st_shndx, 1);
    CU_ASSERT_EQUAL(s.st_size, 7 * 32);
    s = sym(&m, 1);
    CU_ASSERT_EQUAL(ELF64_ST_TYPE(s.st_info), STT_OBJECT);
    CU_ASSERT_EQUAL(s.st_value, 0x1000);
    CU_ASSERT_EQUAL(s.st_size, 16);
    /* The first word is the dma.copy: opcode 0x20. */
    CU_ASSERT_EQUAL(word(&m, 1, 0)[0], 0x20);
    free(m.b);
}

TEST(writing_and_loading_give_back_the_same_program_and_the_same_bytes)
{
    isa_program *p = ref_program();
    char path[] = "/tmp/npusim_isa_elf_XXXXXX";
    close(mkstemp(path));
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(isa_elf_write(p, path, &e), NP_OK);
    isa_program *q = NULL;
    CU_ASSERT_EQUAL_FATAL(isa_elf_load(path, &tiny, &q, NULL, &e), NP_OK);
    CU_ASSERT(isa_program_equal(p, q));
    img a = {0}, b = {0};
    CU_ASSERT_EQUAL(isa_elf_image(p, &a.b, &a.n, &e), NP_OK);
    CU_ASSERT_EQUAL(isa_elf_image(q, &b.b, &b.n, &e), NP_OK);
    size_t nf = 0;
    char *file = harness_read_file(path, &nf);
    CU_ASSERT(a.n == b.n && a.n == nf && memcmp(a.b, b.b, a.n) == 0 && memcmp(a.b, file, nf) == 0);
    free(file);
    free(a.b);
    free(b.b);
    isa_program_free(q);
    isa_program_free(p);
    unlink(path);
}

TEST(random_programs_survive_the_elf_round_trip)
{
    uint64_t seed = 0xe1f;
    for (int k = 0; k < 25; k++) {
        isa_program *p = gen_program(&seed, 80), *q = NULL;
        img m = {0};
        np_err e = {0};
        CU_ASSERT_EQUAL_FATAL(isa_elf_image(p, &m.b, &m.n, &e), NP_OK);
        CU_ASSERT_EQUAL_FATAL(isa_elf_load_mem(m.b, m.n, "gen.elf", &p->target, &q, NULL, &e), NP_OK);
        CU_ASSERT(isa_program_equal(p, q));
        free(m.b);
        isa_program_free(p);
        isa_program_free(q);
    }
}

/* ---- Corrupted files --------------------------------------------------------------------------- */

typedef struct bad_elf {
    const char *what;
    np_status status;
    char msg[512];
    img m;
    const isa_target *expect;
} bad_elf;

static bad_elf *add_case(bad_elf *c, size_t *n, const char *what, np_status st)
{
    bad_elf *b = &c[(*n)++];
    b->what = what;
    b->status = st;
    b->m = ref_image();
    b->expect = NULL;
    return b;
}

/* Every corruption of the reference image, each with the loader's exact message. */
static void corrupt_all(bad_elf *c, size_t *n)
{
    *n = 0;
    bad_elf *b;
#define CASE(desc, st) b = add_case(c, n, desc, st);
    Elf64_Ehdr h;
    Elf64_Shdr s;
    Elf64_Sym y;
    CASE("empty file", NP_ERR_FORMAT) {
        b->m.n = 0;
        snprintf(b->msg, sizeof b->msg, "truncated ELF header: the file has 0 bytes, an ELF64 "
                                        "header needs 64");
    }
    CASE("truncated header", NP_ERR_FORMAT) {
        b->m.n = 10;
        snprintf(b->msg, sizeof b->msg, "truncated ELF header: the file has 10 bytes, an ELF64 "
                                        "header needs 64");
    }
    CASE("bad magic", NP_ERR_FORMAT) {
        b->m.b[1] = 'X';
        snprintf(b->msg, sizeof b->msg, "not an ELF file (bad magic)");
    }
    CASE("32-bit class", NP_ERR_FORMAT) {
        b->m.b[EI_CLASS] = ELFCLASS32;
        snprintf(b->msg, sizeof b->msg, "wrong ELF class ELFCLASS32: npusim programs are ELFCLASS64");
    }
    CASE("big-endian", NP_ERR_FORMAT) {
        b->m.b[EI_DATA] = ELFDATA2MSB;
        snprintf(b->msg, sizeof b->msg, "wrong byte order (big-endian): npusim programs are "
                                        "little-endian");
    }
    CASE("ELF version", NP_ERR_FORMAT) {
        b->m.b[EI_VERSION] = 0;
        snprintf(b->msg, sizeof b->msg, "unknown ELF version 0 (expected 1)");
    }
    CASE("machine x86-64", NP_ERR_FORMAT) {
        h = ehdr(&b->m);
        h.e_machine = EM_X86_64;
        set_ehdr(&b->m, &h);
        snprintf(b->msg, sizeof b->msg, "wrong machine: e_machine 62 (x86-64), npusim programs "
                                        "have 0x4e50");
    }
    CASE("relocatable", NP_ERR_FORMAT) {
        h = ehdr(&b->m);
        h.e_type = ET_REL;
        set_ehdr(&b->m, &h);
        snprintf(b->msg, sizeof b->msg, "ELF type 1 is not an executable (ET_EXEC)");
    }
    CASE("flags", NP_ERR_FORMAT) {
        h = ehdr(&b->m);
        h.e_flags = 1;
        set_ehdr(&b->m, &h);
        snprintf(b->msg, sizeof b->msg, "e_flags is 0x1: no flags are defined");
    }
    CASE("program headers", NP_ERR_FORMAT) {
        h = ehdr(&b->m);
        h.e_phnum = 1;
        set_ehdr(&b->m, &h);
        snprintf(b->msg, sizeof b->msg, "the file has program headers, which npusim programs do "
                                        "not use");
    }
    CASE("truncated section header table", NP_ERR_FORMAT) {
        h = ehdr(&b->m);
        b->m.n = h.e_shoff + 100;
        snprintf(b->msg, sizeof b->msg, "the section header table [0x%lx, +10 x 64) lies outside "
                 "the file (%zu bytes): truncated?", (unsigned long)h.e_shoff, b->m.n);
    }
    CASE("e_shstrndx out of range", NP_ERR_FORMAT) {
        h = ehdr(&b->m);
        h.e_shstrndx = 50;
        set_ehdr(&b->m, &h);
        snprintf(b->msg, sizeof b->msg, "e_shstrndx 50 is not a section (the file has 10)");
    }
    CASE("section outside the file", NP_ERR_FORMAT) {
        s = shdr(&b->m, 3);
        s.sh_size = 0x100000;
        set_shdr(&b->m, 3, &s);
        snprintf(b->msg, sizeof b->msg, "section 3: [0x%lx, +0x100000) lies outside the file "
                 "(%zu bytes): truncated?", (unsigned long)s.sh_offset, b->m.n);
    }
    CASE("overlapping sections", NP_ERR_FORMAT) {
        Elf64_Shdr t0 = shdr(&b->m, 1);
        s = shdr(&b->m, 2);
        s.sh_offset = t0.sh_offset;
        set_shdr(&b->m, 2, &s);
        snprintf(b->msg, sizeof b->msg, "'.text.core1' [0x%lx, 0x%lx) and '.text.core0' [0x%lx, "
                 "0x%lx) overlap in the file", (unsigned long)t0.sh_offset,
                 (unsigned long)t0.sh_offset + 64, (unsigned long)t0.sh_offset,
                 (unsigned long)t0.sh_offset + 7 * 32);
    }
    CASE("text not whole words", NP_ERR_FORMAT) {
        s = shdr(&b->m, 2);
        s.sh_size = 63;
        set_shdr(&b->m, 2, &s);
        snprintf(b->msg, sizeof b->msg, "section '.text.core1': size 63 is not a multiple of the "
                                        "32-byte instruction word");
    }
    CASE("duplicate section names", NP_ERR_FORMAT) {
        sec_name(&b->m, 2)[10] = '0';
        snprintf(b->msg, sizeof b->msg, "two sections are named '.text.core0'");
    }
    CASE("bad core section name", NP_ERR_FORMAT) {
        sec_name(&b->m, 2)[10] = 'x';
        snprintf(b->msg, sizeof b->msg, "section '.text.corex': not a valid core text name "
                                        "(.text.core0 .. .text.core65535)");
    }
    CASE("unexpected section", NP_ERR_FORMAT) {
        sec_name(&b->m, 6)[11] = 'X';
        snprintf(b->msg, sizeof b->msg, "unexpected section '.note.npusiX'");
    }
    CASE("data section of the wrong type", NP_ERR_FORMAT) {
        s = shdr(&b->m, 3);
        s.sh_type = SHT_NOBITS;
        set_shdr(&b->m, 3, &s);
        snprintf(b->msg, sizeof b->msg, "section '.data': type 8 flags 0x3, expected type 1 flags 0x3");
    }
    CASE("corrupt note", NP_ERR_FORMAT) {
        b->m.b[shdr(&b->m, 6).sh_offset + 12] = 'N';
        snprintf(b->msg, sizeof b->msg, "'.note.npusim' is not an npusim target note (want name "
                                        "\"npusim\", type 1, 40-byte descriptor)");
    }
    CASE("another ISA version", NP_ERR_FORMAT) {
        b->m.b[shdr(&b->m, 6).sh_offset + 20] = ISA_VERSION + 1;
        snprintf(b->msg, sizeof b->msg, "the program is for ISA version %u; this npusim "
                                        "implements version %u", ISA_VERSION + 1, ISA_VERSION);
    }
    CASE("another architecture", NP_ERR_INCONSISTENT) {
        static const isa_target big = {.array_rows = 128, .array_cols = 4, .cores = 2,
                                       .spad_bytes = 64 * 1024, .acc_bytes = 4 * 1024,
                                       .dtypes = 0x0f};
        b->expect = &big;
        snprintf(b->msg, sizeof b->msg, "the program was built for another architecture (program "
                                        "vs this one): array_rows 4 vs 128");
    }
    CASE("unknown opcode", NP_ERR_FORMAT) {
        word(&b->m, 2, 0)[0] = 0xff;
        snprintf(b->msg, sizeof b->msg, "section '.text.core1', instruction 0 (offset 0x0): "
                                        "unknown opcode 0xff");
    }
    CASE("reserved bit", NP_ERR_FORMAT) {
        word(&b->m, 1, 6)[31] = 0x80;
        snprintf(b->msg, sizeof b->msg, "section '.text.core0', instruction 6 (offset 0xc0): halt: "
                                        "reserved bit 255 is set (bits 8..255 must be zero)");
    }
    CASE("dtype out of range", NP_ERR_FORMAT) {
        word(&b->m, 1, 0)[12] |= 0x1c; /* dtype = 7 in bits 98..101 */
        snprintf(b->msg, sizeof b->msg, "section '.text.core0', instruction 0 (offset 0x0): "
                                        "operand 'dtype' of dma.copy: 7 is not a DTYPE (0..4)");
    }
    CASE("unbalanced loop", NP_ERR_FORMAT) {
        word(&b->m, 1, 3)[0] = 0x01; /* endloop -> nop */
        snprintf(b->msg, sizeof b->msg, "core 0: 1 loop not closed by endloop");
    }
    CASE("name offset inside a name", NP_ERR_FORMAT) {
        word(&b->m, 1, 4)[1] = 3; /* "phase" is at 1; 3 is "ase" */
        snprintf(b->msg, sizeof b->msg, "core 0, instruction 4 (trace.begin): name offset 3 is "
                                        "not the start of a name in '.npu.names'");
    }
    CASE("unused name", NP_ERR_FORMAT) {
        for (unsigned i = 4; i <= 5; i++) {
            memset(word(&b->m, 1, i), 0, ISA_WORD_BYTES);
            word(&b->m, 1, i)[0] = 0x01; /* nop */
        }
        snprintf(b->msg, sizeof b->msg, "name \"phase\" in '.npu.names' is not used by any "
                                        "instruction");
    }
    CASE("kernel outside its section", NP_ERR_FORMAT) {
        y = sym(&b->m, 3);
        y.st_size = 0x10000;
        set_sym(&b->m, 3, &y);
        snprintf(b->msg, sizeof b->msg, "kernel 'scale' [0x0, +0x10000) is not whole instructions "
                                        "inside '.text.core0'");
    }
    CASE("symbol name outside .strtab", NP_ERR_FORMAT) {
        y = sym(&b->m, 4);
        y.st_name = 0xffff;
        set_sym(&b->m, 4, &y);
        snprintf(b->msg, sizeof b->msg, "symbol 4: name offset 65535 is outside '.strtab'");
    }
    CASE("symbol of another type", NP_ERR_FORMAT) {
        y = sym(&b->m, 1);
        y.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_TLS);
        set_sym(&b->m, 1, &y);
        snprintf(b->msg, sizeof b->msg, "symbol 'vec': type 6 (npusim symbols are STT_FUNC or "
                                        "STT_OBJECT)");
    }
    CASE("local symbol", NP_ERR_FORMAT) {
        y = sym(&b->m, 2);
        y.st_info = ELF64_ST_INFO(STB_LOCAL, STT_OBJECT);
        set_sym(&b->m, 2, &y);
        snprintf(b->msg, sizeof b->msg, "symbol 'out': binding 0 visibility 0 (npusim symbols are "
                                        "global and default)");
    }
    CASE("data sections overlapping in HBM", NP_ERR_FORMAT) {
        s = shdr(&b->m, 4);
        s.sh_addr = 0x1000;
        set_shdr(&b->m, 4, &s);
        y = sym(&b->m, 2);
        y.st_value = 0x1000;
        set_sym(&b->m, 2, &y);
        snprintf(b->msg, sizeof b->msg, "data sections '.data' [0x1000, 0x1010) and '.bss' "
                                        "[0x1000, 0x1040) overlap in HBM");
    }
    CASE("core the target lacks", NP_ERR_FORMAT) {
        sec_name(&b->m, 2)[10] = '7';
        snprintf(b->msg, sizeof b->msg, "text for core 7, but the target has 2 cores");
    }
#undef CASE
}

TEST(corrupted_elf_files_give_the_exact_error)
{
    bad_elf c[48];
    size_t n;
    corrupt_all(c, &n);
    CU_ASSERT(n >= 30);
    for (size_t k = 0; k < n; k++) {
        isa_program *p = (isa_program *)1;
        isa_elf_info *info = (isa_elf_info *)1;
        np_err e = {0};
        np_status st = isa_elf_load_mem(c[k].m.b, c[k].m.n, "bad.elf", c[k].expect, &p, &info, &e);
        if (st != c[k].status || e.status != st || strcmp(e.msg, c[k].msg) != 0 || p || info ||
            strcmp(e.file, "bad.elf") != 0) {
            fprintf(stderr, "%s: got %s: %s\n  want %s: %s\n", c[k].what, np_status_name(st),
                    e.msg, np_status_name(c[k].status), c[k].msg);
            CU_FAIL("wrong loader error");
        }
        free(c[k].m.b);
    }
}

TEST(corrupted_elf_files_make_npusim_exit_2_with_the_message)
{
    bad_elf c[48];
    size_t n;
    corrupt_all(c, &n);
    char path[] = "/tmp/npusim_isa_bad_elf_XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    for (size_t k = 0; k < n; k++) {
        if (c[k].expect) { /* the architecture check needs --arch: below */
            free(c[k].m.b);
            continue;
        }
        FILE *f = fopen(path, "wb");
        CU_ASSERT_FATAL(f != NULL);
        fwrite(c[k].m.b, 1, c[k].m.n, f);
        fclose(f);
        const char *cmd = k % 2 ? "disasm" : "objdump";
        harness_run r = harness_npusim(cmd, path, NULL);
        char want[1024];
        snprintf(want, sizeof want, "npusim: %s: %s\n", path, c[k].msg);
        if (r.exit_status != 2 || strcmp(r.err, want) != 0 || r.out[0]) {
            fprintf(stderr, "%s (%s): status %d, stderr %s", c[k].what, cmd, r.exit_status, r.err);
            CU_FAIL("npusim did not refuse the file with status 2 and the message");
        }
        harness_run_free(&r);
        free(c[k].m.b);
    }
    /* A program for another architecture, refused by --arch. */
    static const char src[] = ".target rows=8, cols=8, cores=1, spad=1024, acc=1024, dtypes=bf16\n"
                              "    halt\n";
    isa_asm_opts o = {NULL, false};
    isa_program *p = NULL;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(isa_asm(src, strlen(src), "t.s", &o, &p, &e), NP_OK);
    CU_ASSERT_EQUAL_FATAL(isa_elf_write(p, path, &e), NP_OK);
    isa_program_free(p);
    harness_run r = harness_npusim("disasm", "--arch", "tiny", path, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    char want[512];
    snprintf(want, sizeof want, "npusim: %s: the program was built for another architecture "
             "(program vs this one): array_rows 8 vs ", path);
    CU_ASSERT_EQUAL(strncmp(r.err, want, strlen(want)), 0);
    harness_run_free(&r);
    r = harness_npusim("disasm", path, NULL); /* without --arch it loads */
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, ".target rows=8, cols=8, cores=1, spad=0x400, acc=0x400, "
                                         "dtypes=bf16\n"));
    harness_run_free(&r);
    unlink(path);
    r = harness_npusim("objdump", path, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 2);
    harness_run_free(&r);
}

TEST(every_truncation_of_a_good_file_is_refused)
{
    img m = ref_image();
    for (size_t n = 0; n < m.n; n++) {
        isa_program *p = NULL;
        np_err e = {0};
        np_status st = isa_elf_load_mem(m.b, n, "t.elf", NULL, &p, NULL, &e);
        CU_ASSERT_EQUAL(st, NP_ERR_FORMAT);
        CU_ASSERT_PTR_NULL(p);
        if (st == NP_OK)
            isa_program_free(p);
    }
    free(m.b);
}

TEST(random_corruptions_never_crash_and_what_loads_round_trips_through_assembly)
{
    img ref = ref_image();
    uint64_t seed = 0xc0ffee;
    unsigned loaded = 0;
    uint8_t *buf = malloc(ref.n);
    for (int k = 0; k < 3000; k++) {
        memcpy(buf, ref.b, ref.n);
        int flips = 1 + (int)gen_below(&seed, 4);
        for (int f = 0; f < flips; f++) {
            size_t at = gen_below(&seed, ref.n);
            buf[at] = gen_below(&seed, 2) ? (uint8_t)gen_u64(&seed) : buf[at] ^ (uint8_t)(1u << gen_below(&seed, 8));
        }
        isa_program *p = NULL;
        isa_elf_info *info = NULL;
        np_err e = {0};
        np_status st = isa_elf_load_mem(buf, ref.n, "m.elf", NULL, &p, &info, &e);
        if (st != NP_OK) {
            CU_ASSERT(st == NP_ERR_FORMAT || st == NP_ERR_INCONSISTENT);
            CU_ASSERT(e.msg[0] != '\0');
            continue;
        }
        loaded++;
        char *text = NULL;
        CU_ASSERT_EQUAL_FATAL(isa_disasm(p, &text, &e), NP_OK);
        isa_asm_opts o = {NULL, false};
        isa_program *q = NULL;
        if (isa_asm(text, strlen(text), "m.s", &o, &q, &e) != NP_OK || !isa_program_equal(p, q)) {
            fprintf(stderr, "%s\n-> %s\n", text, e.msg);
            CU_FAIL("a loadable file does not disassemble and reassemble to the same program");
        }
        isa_program_free(q);
        free(text);
        isa_program_free(p);
        isa_elf_info_free(info);
    }
    CU_ASSERT(loaded > 100); /* flips in data, padding, immediates still load */
    free(buf);
    free(ref.b);
}

/* ---- objdump and the architecture fingerprint -------------------------------------------------- */

TEST(objdump_shows_headers_sections_symbols_and_the_note)
{
    isa_program *p = ref_program();
    char path[] = "/tmp/npusim_isa_od_XXXXXX";
    close(mkstemp(path));
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(isa_elf_write(p, path, &e), NP_OK);
    isa_program_free(p);
    harness_run r = harness_npusim("objdump", path, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "machine   0x4e50 (npusim NPU)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "] .text.core1      PROGBITS  AX"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "] .bss             NOBITS    AW    0x0000000000002000"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "224        FUNC    .text.core0    scale\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "  array        4 x 4\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "  dtypes       fp32|bf16|fp16|int8\n"));
    /* the scratchpad of ref_program's target: 64 * 1024 bytes, and the same in KiB */
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "  spad_bytes   65536 (64.0 KiB)\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "  core 1: 2 instructions; kernels other [0, 2)\n"));
    harness_run_free(&r);

    r = harness_npusim("objdump", "--json", path, NULL);
    CU_ASSERT_EQUAL_FATAL(r.exit_status, 0);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(j, "header"), "machine")),
                    0x4e50);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "sections")), 10);
    json_t *t = json_object_get(j, "target");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(t, "isa_version")), ISA_VERSION);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(t, "array_rows")), 4);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(t, "spad_bytes")), 65536);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(t, "dtypes")), "fp32|bf16|fp16|int8");
    json_t *syms = json_object_get(j, "symbols");
    CU_ASSERT_EQUAL_FATAL(json_array_size(syms), 4);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(syms, 0), "name")), "vec");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(syms, 2), "type")), "FUNC");
    json_t *cores = json_object_get(j, "cores");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_array_get(cores, 0), "instructions")), 7);
    json_decref(j);
    harness_run_free(&r);
    unlink(path);
}

TEST(the_fingerprint_of_the_tiny_preset_is_what_asm_records_by_default)
{
    arch_config cfg;
    np_err e = {0};
    CU_ASSERT_EQUAL_FATAL(arch_resolve("tiny", NULL, 0, &cfg, &e), NP_OK);
    isa_target t;
    isa_target_from_arch(&cfg, &t);
    char why[256];
    CU_ASSERT(isa_target_equal(&t, &tiny, why, sizeof why));
    /* And `npusim asm` without --arch records it. */
    char path[] = "/tmp/npusim_isa_fp_XXXXXX";
    close(mkstemp(path));
    harness_run r = harness_npusim("asm", harness_src_path("isa/examples/softmax.s"), "-o", path, NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    harness_run_free(&r);
    isa_program *p = NULL;
    CU_ASSERT_EQUAL(isa_elf_load(path, &tiny, &p, NULL, &e), NP_OK);
    isa_program_free(p);
    CU_ASSERT_EQUAL(isa_elf_load_arch(path, &cfg, &p, &e), NP_OK);
    isa_program_free(p);
    /* --set changes the architecture, and a .target must then agree with it. */
    r = harness_npusim("asm", harness_src_path("isa/examples/softmax.s"), "-o", path, "--set",
                       "core.array_rows=8", NULL);
    CU_ASSERT_EQUAL(r.exit_status, 0);
    harness_run_free(&r);
    CU_ASSERT_EQUAL(isa_elf_load(path, &tiny, &p, NULL, &e), NP_ERR_INCONSISTENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "array_rows 8 vs 4"));
    unlink(path);
}
