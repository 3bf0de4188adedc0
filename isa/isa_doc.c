/* isa_doc.c — docs/isa.md, generated from the table (isa.def) by `npusim asm --doc`.
 *
 * Everything about instructions, kinds and enums is printed from the tables; the prose
 * sections (machine model, assembly language, ELF container) are here, next to the code that
 * implements them. The assembly examples below are part of the manual and are assembled by
 * tests/test_isa_asm.c, so they cannot go stale.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa.h"
#include "isa_util.h"

const char *const isa_doc_examples[] = {
    /* 0: the smallest program */
    ".core 0\n"
    ".kernel hello\n"
    "    li r1, 0x100            ; r1 = 256\n"
    "    nop\n"
    "    halt\n",
    /* 1: constants, data, a DMA feeding the vector unit through a semaphore */
    ".equ ROWS, 4\n"
    ".equ COLS, 8\n"
    ".equ BYTES, ROWS * COLS * 4     ; fp32 tile\n"
    "\n"
    ".data 0x1000\n"
    "x:      .float 1.0, 2.0, 3.0, 4.0\n"
    "        .zero BYTES - 16\n"
    ".bss\n"
    "y:      .space BYTES\n"
    "\n"
    ".core 0\n"
    ".kernel scale\n"
    "    dma.copy spad[0], hbm[x], fp32, COLS, ROWS      ; HBM -> scratchpad\n"
    "    sem.signal dma, s0                              ; after the copy retires\n"
    "    sem.wait vpu, s0\n"
    "    vpu.muls spad[0], spad[0], 0.5, ROWS, COLS, fp32\n"
    "    sem.signal vpu, s1\n"
    "    sem.wait dma, s1\n"
    "    dma.copy hbm[y], spad[0], fp32, COLS, ROWS      ; and back\n"
    "    halt\n",
    /* 2: loops step registers; the stepped registers are restored at loop exit */
    ".core 0\n"
    ".kernel sweep\n"
    "    li r1, 0x10000                ; HBM source\n"
    "    li r2, 0                      ; scratchpad destination\n"
    "    loop 4, r1+=4096              ; 4 row blocks\n"
    "        loop 2, r1+=64, r2+=2048  ; 2 column blocks\n"
    "            dma.copy spad[r2], hbm[r1], bf16, 32, 32, src_s1=1024\n"
    "        endloop                   ; r2 is 0 again here\n"
    "    endloop\n"
    "    fence\n"
    "    halt\n",
    /* 3: the matrix unit with a fused epilogue, trace regions, named operands */
    ".core 0\n"
    ".kernel gemm_tile\n"
    "    trace.begin \"gemm\"\n"
    "    mxu.load spad[0x0], 4, 4, bf16\n"
    "    mxu.mm acc[0], spad[0x100], 16, bf16, mode=set\n"
    "    mxu.drain spad[0x400], acc[0], 16, 4, bf16, act=relu, scale=0.125, bias=spad[0x800]\n"
    "    trace.end \"gemm\"\n"
    "    halt\n",
    /* 4: two cores exchanging a buffer, the receiver adding it into its own */
    ".core 0\n"
    ".kernel ping\n"
    "    comm.send peer(0, 1), spad[0], 1024, 7\n"
    "    barrier 1\n"
    "    halt\n"
    ".core 1\n"
    ".kernel pong\n"
    "    comm.recv peer(0, 0), spad[0], 1024, 7, add, fp32\n"
    "    barrier 1\n"
    "    halt\n",
    /* 5: SPMD: one text for every rank of g0 */
    "; Every chip of group g0 runs this same text: a ring all-gather of 4 KiB per rank.\n"
    "; Slot k (at 0x10000 + k x 4 KiB) ends up holding the block of the rank k places\n"
    "; before this one; slot 0 is this rank's own block. For a group of P ranks, loop P-1.\n"
    ".equ BLOCK, 4096\n"
    ".equ P, 4\n"
    ".core 0\n"
    ".kernel ring_all_gather\n"
    "    li r1, 0x10000                   ; the slot sent: the one received last\n"
    "    li r2, 0x10000 + BLOCK           ; the slot received\n"
    "    loop P - 1, r1+=BLOCK, r2+=BLOCK\n"
    "        comm.send peer(g0[rank+1], 0), hbm[r1], BLOCK, 1\n"
    "        comm.recv peer(g0[rank-1], 0), hbm[r2], BLOCK, 1\n"
    "    endloop\n"
    "    halt\n",
};
const size_t isa_doc_n_examples = sizeof isa_doc_examples / sizeof isa_doc_examples[0];

static const char *const doc_example_titles[] = {
    "The smallest program",
    "Constants, data, and a DMA feeding the vector unit through a semaphore",
    "Loops: nested, stepped registers restored at exit",
    "The matrix unit with a fused epilogue; trace regions; name=value operands",
    "Two cores exchanging a buffer (the receiver reduces with add)",
    "SPMD: a ring all-gather every rank of a group runs as one text (peers by group rank)",
};

static void doc_kind_table(isa_buf *b)
{
    isa_buf_printf(b, "| kind | bits | syntax | meaning |\n|---|---|---|---|\n");
    for (int k = 0; k < ISA_KIND_COUNT; k++) {
        const isa_kind_info *ki = &isa_kinds[k];
        char bits[16];
        snprintf(bits, sizeof bits, ki->bits ? "%u" : "per field", ki->bits);
        isa_buf_printf(b, "| %s | %s | `%s` | %s |\n", ki->name, bits, ki->syntax, ki->doc);
    }
}

static void doc_enums(isa_buf *b)
{
    isa_buf_printf(b, "### dtype (kind DTYPE)\n\n| value | name | bytes | meaning |\n"
                      "|---|---|---|---|\n");
    for (int d = 0; d < ISA_DTYPE_COUNT; d++)
        isa_buf_printf(b, "| %d | `%s` | %u | %s |\n", d, isa_dtype_names[d], isa_dtype_size[d],
                       isa_dtype_docs[d]);
    static const struct {
        isa_kind kind;
        const char *title;
    } enums[] = {{ISA_KIND_UNIT, "unit (kind UNIT)"},
                 {ISA_KIND_ACT, "activation (kind ACT)"},
                 {ISA_KIND_BCAST, "broadcast (kind BCAST)"},
                 {ISA_KIND_RED, "reduction (kind RED)"},
                 {ISA_KIND_ACCM, "accumulator mode (kind ACCM)"}};
    static const char *const act_doc[] = {
#define ISA_ACT(NAME, text, doc) doc,
#include "isa.def"
    };
    static const char *const bcast_doc[] = {
#define ISA_BCAST(NAME, text, doc) doc,
#include "isa.def"
    };
    static const char *const red_doc[] = {
#define ISA_RED(NAME, text, doc) doc,
#include "isa.def"
    };
    static const char *const accm_doc[] = {
#define ISA_ACCM(NAME, text, doc) doc,
#include "isa.def"
    };
    for (size_t e = 0; e < sizeof enums / sizeof enums[0]; e++) {
        unsigned n;
        const char *const *names = isa_kind_values_of(enums[e].kind, &n);
        const char *const *docs = enums[e].kind == ISA_KIND_UNIT ? isa_unit_docs
                                  : enums[e].kind == ISA_KIND_ACT ? act_doc
                                  : enums[e].kind == ISA_KIND_BCAST ? bcast_doc
                                  : enums[e].kind == ISA_KIND_RED ? red_doc : accm_doc;
        isa_buf_printf(b, "\n### %s\n\n| value | name | meaning |\n|---|---|---|\n",
                       enums[e].title);
        for (unsigned v = 0; v < n; v++)
            isa_buf_printf(b, "| %u | `%s` | %s |\n", v, names[v], docs[v]);
    }
}

/* "dma.copy dst, src, dtype, n0 [, n1=1, ...]" */
static void doc_synopsis(isa_buf *b, isa_op op)
{
    const isa_op_info *in = &isa_ops[op];
    isa_buf_printf(b, "%s", in->mnemonic);
    bool first = true, opt = false;
    for (unsigned f = 0; f < in->n_fields; f++) {
        const isa_field *fd = &in->fields[f];
        if (fd->optional && !opt) {
            isa_buf_printf(b, " [");
            opt = true;
        }
        isa_buf_printf(b, "%s%s", first ? (opt ? "" : " ") : ", ", fd->name);
        first = false;
    }
    if (opt)
        isa_buf_printf(b, "]");
}

static void doc_default(isa_buf *b, const isa_field *f)
{
    if (!f->optional) {
        isa_buf_printf(b, "required");
        return;
    }
    if (f->kind == ISA_KIND_F32) {
        isa_opnd o = isa_imm(f->dflt);
        isa_buf_printf(b, "%g", (double)isa_opnd_f32(&o));
    } else if (f->kind == ISA_KIND_SPADOPT) {
        isa_buf_printf(b, "none");
    } else if (f->kind == ISA_KIND_VAL) {
        isa_buf_printf(b, "%" PRId64, f->dflt);
    } else if (f->kind == ISA_KIND_STEP) {
        isa_buf_printf(b, "none (r0+=0)");
    } else {
        unsigned n;
        const char *const *v = isa_kind_values_of(f->kind, &n);
        if (v && f->dflt >= 0 && f->dflt < (int64_t)n)
            isa_buf_printf(b, "%s", v[f->dflt]);
        else
            isa_buf_printf(b, "%" PRId64, f->dflt);
    }
}

static void doc_op(isa_buf *b, isa_op op)
{
    const isa_op_info *in = &isa_ops[op];
    isa_buf_printf(b, "### `%s` — opcode 0x%02x, %s\n\n```\n", in->mnemonic, in->opcode,
                   isa_unit_names[in->unit]);
    doc_synopsis(b, op);
    isa_buf_printf(b, "\n```\n\n%s\n\n*Timing:* %s.\n\n", in->semantics, in->timing);
    static const char *const cost_text[] = {
#define ISA_COST(NAME, text, doc) text,
#include "isa.def"
    };
    static const char *const cost_doc[] = {
#define ISA_COST(NAME, text, doc) doc,
#include "isa.def"
    };
    if (in->cost != ISA_COST_NONE)
        isa_buf_printf(b, "*Vector rate class:* `%s`: %s.\n\n", cost_text[in->cost],
                       cost_doc[in->cost]);
    if (!in->n_fields) {
        isa_buf_printf(b, "No operands; bits 8..255 are reserved.\n\n");
        return;
    }
    isa_buf_printf(b, "| field | kind | bits | default |\n|---|---|---|---|\n");
    unsigned pos = ISA_POS_FIELDS;
    for (unsigned f = 0; f < in->n_fields; f++) {
        const isa_field *fd = &in->fields[f];
        isa_buf_printf(b, "| `%s` | %s | %u..%u | ", fd->name, isa_kinds[fd->kind].name, pos,
                       pos + fd->bits - 1);
        doc_default(b, fd);
        isa_buf_printf(b, " |\n");
        pos += fd->bits;
    }
    if (pos < ISA_WORD_BITS)
        isa_buf_printf(b, "| *reserved* | | %u..%u | 0 |\n", pos, ISA_WORD_BITS - 1);
    isa_buf_printf(b, "\n");
}

static const char doc_intro[] =
    "# The npusim accelerator ISA\n"
    "\n"
    "> Generated from `isa/isa.def` by `npusim asm --doc`; do not edit. After changing the "
    "table, regenerate with `build/sim/npusim asm --doc > docs/isa.md` (a test fails while "
    "this file is stale).\n"
    "\n"
    "## The machine\n"
    "\n"
    "Each core is a decoupled access/execute machine in the family of TPU and Gemmini. A scalar "
    "**front end** fetches the core's program in order. It runs the control instructions itself "
    "(registers, loops, fences, barriers, trace markers) and dispatches every other instruction "
    "into one of four **in-order queues**: `dma`, `mxu`, `vpu` and `comm`. Instructions of one "
    "queue start and retire in program order (the DMA queue may have several copies in "
    "flight); queues run concurrently and are ordered against each other by **semaphores**: "
    "`sem.signal Q, sN` enters queue Q and, once every earlier instruction of Q has retired, "
    "adds to semaphore sN; `sem.wait Q, sN` stalls queue Q until sN is large enough and takes "
    "from it. A core has 256 semaphores, all starting at 0. Unless the architecture turns it "
    "off (`core.scoreboard: 0`), an operand **scoreboard** also holds an instruction until every "
    "older instruction of its core whose operands overlap its own (one of them writing) has "
    "completed, so data dependences in program order are kept without semaphores.\n"
    "\n"
    "**Registers and addresses.** The front end has sixteen 64-bit registers r0..r15 (r0 "
    "is always zero). Every address operand is a base register plus an unsigned offset, "
    "`spad[r2+0x40]`; the front end adds them when it dispatches the instruction, so the queues "
    "see absolute addresses and the registers are free to change right after. Addresses are "
    "bytes in one of three spaces: `spad` (the core's scratchpad SRAM), `acc` (the "
    "accumulator SRAM beside the systolic array; fp32 or int32 elements) and `hbm` (the "
    "chip's off-chip memory, shared by its cores). Tiles are row-major; a stride operand gives "
    "the bytes between rows (0: packed). A value operand (kind VAL, `r3+16`) is resolved the "
    "same way into a number rather than an address: how a loop hands a queue instruction a "
    "per-iteration counter or position (`vpu.rand`, `vpu.iota`).\n"
    "\n"
    "**Loops.** `loop N, r1+=A, r2+=B` runs the body up to the matching `endloop` N times, "
    "adding A to r1 and B to r2 after every iteration; when the loop ends both registers are "
    "restored to their values at entry. Nested loops therefore address affine tiles, base + "
    "i*A + j*C, with no address arithmetic in the body, and a double-buffered loop is one body "
    "with a ping and a pong half. Loops nest 8 deep. `mxu.mm ... mode=first` overwrites the "
    "accumulator on the first iteration of the innermost loop and accumulates on the others, "
    "which is how a K loop needs no peeled first iteration.\n"
    "\n"
    "**Between cores and chips.** `barrier ID` synchronizes the cores of a chip. "
    "`comm.send peer(chip, core), src, bytes, tag` and `comm.recv peer(chip, core), dst, "
    "bytes, tag [, red, dtype]` move data between any two cores of the system; a receive may "
    "reduce the incoming elements into its destination (add, max, min), which is how "
    "collectives are built from send/recv. A peer may also be named by its rank in a group of "
    "the running chip — `peer(g0[rank+1], 0)` is core 0 of the next rank of group g0 — so that "
    "every rank of a group runs the same text (see [Groups](#groups-spmd-programs)).\n"
    "\n"
    "| unit | what it is |\n|---|---|\n";

static const char doc_groups[] =
    "\n## Groups: SPMD programs\n"
    "\n"
    "A PEER operand names a core of a chip either by the chip's number or by its **rank in a "
    "group of the running chip**. Groups are what a parallel strategy's device-mesh axes "
    "become once mapped to chips (tensor, data, pipeline parallel): an ordered list of chips, "
    "as often an arithmetic progression (chips 4, 5, 6, 7; chips 1, 3, 5, 7) as an arbitrary "
    "list when placement follows the topology. A program may use groups g0 .. g15; which "
    "chips form gG around the running chip is not in the program but in the **group table** "
    "the loader is given with it (hw-model/hw_system.h, `core_sim_opts.groups`): instances "
    "of each group id, each its members in rank order, every chip in at most one instance of "
    "an id. A chip's rank in gG is its position in its instance. Without an instance of g0 "
    "the table has one: every chip of the run, in order. So one text runs on every rank of a "
    "group — the next rank is `g0[rank+1]`, the previous `g0[rank-1]`, a recursive-doubling "
    "partner `g0[rank^4]`, a root `g0[0]` — and a register in the index lets a loop walk the "
    "ranks (`g0[rank+r3]` with r3 stepped by the loop).\n"
    "\n"
    "The peer is resolved when the instruction is dispatched (with the register's value "
    "then). A rank outside the group (XOR and RANK forms; ADD wraps around), or a group the "
    "running chip has no instance of, is a fault naming the instruction, the rank arithmetic "
    "and the group's chips. Traces and deadlock reports show the resolved `peer(chip, core)`.\n"
    "\n"
    "| form | syntax | the peer |\n|---|---|---|\n";

static const char doc_groups_after[] =
    "\n`x` is `rN`, an expression, or `rN+expr` / `rN-expr`: the register's value at dispatch "
    "plus a signed offset of 20 bits (`rank-1+2` is `rank+1`: the offset is one expression "
    "with its sign). A register can only be added (`rank-rN` is an error: step a register "
    "downwards instead).\n";

static const char doc_encoding[] =
    "\n## Encoding\n"
    "\n"
    "Every instruction is one **256-bit little-endian word** (32 bytes): bit i is bit i%8 of "
    "byte i/8. The opcode is the low byte. The operand fields follow in the order of the "
    "table, packed upwards from bit 8, each exactly as wide as the table says; all bits above "
    "the last field are **reserved and must be zero** (the decoder rejects a word with a set "
    "reserved bit, an unknown opcode, or a field value its kind does not allow — naming the "
    "reason).\n"
    "\n"
    "```\n"
    "  255                                                              8 7          0\n"
    " +----------------+---------+-- ... --+---------+---------+---------+------------+\n"
    " | reserved (= 0) | field N |         | field 2 | field 1 | field 0 |   opcode   |\n"
    " +----------------+---------+-- ... --+---------+---------+---------+------------+\n"
    "```\n"
    "\n"
    "Composite kinds lay out their parts from the field's lowest bit:\n"
    "\n"
    "```\n"
    "           +--------------------------+-------+\n"
    "  SPAD/ACC |   offset (32)            |reg (4)|                           36 bits\n"
    "           +--------------------------+-------+---+\n"
    "  SPADOPT  |   offset (32)            |reg (4)| p |  p: present           37 bits\n"
    "           +--------------------------+-------+---+\n"
    "  MEM      |   offset (40)            |reg (4)| h |  h: 0 spad, 1 hbm     45 bits\n"
    "           +--------------------------+-------+---+\n"
    "  STEP     |   signed step (40)       |reg (4)|                           44 bits\n"
    "           +--------------------------+-------+\n"
    "  PEER     |   core (16)   | chip or offset (20) |reg (4)|grp (4)| f |  f: form (2)  46 bits\n"
    "           +---------------+---------------------+-------+-------+---+\n"
    "```\n"
    "\n"
    "For example `li r3, 0x1234` is opcode 0x03, rd = 3 in bits 8..11 and imm = 0x1234 in bits "
    "12..75: the bytes are `03 43 23 01 00 ... 00`.\n"
    "\n"
    "### Operand kinds\n\n";

static const char doc_asm[] =
    "\n## Assembly language\n"
    "\n"
    "A source file is a sequence of lines; each line holds any number of labels (`name:`) and "
    "then at most one directive or instruction. Comments run from `;`, `#` or `//` to the end of "
    "the line. Names (labels, symbols, kernels) are `[A-Za-z_.$][A-Za-z0-9_.$]*` except the "
    "words of the language: `r0`..`r15` and any `r`+digits, `s`+digits, `spad`, `hbm`, `acc`, "
    "`peer`, `rank`, `bits`, `none`. Mnemonics, directives and enum values are lower case.\n"
    "\n"
    "**Operands** are separated by commas. Required operands come first, in table order; the "
    "optional ones may follow positionally or be given anywhere after as `name=value` (e.g. "
    "`src_s1=4096`), and then take their defaults when absent. The disassembler prints the "
    "optional operands that differ from their defaults as `name=value`, except loop steps, "
    "which it keeps positional.\n"
    "\n"
    "**Expressions** are 64-bit integers (wrapping) or, where a float is wanted (F32 operands, "
    "`.float`, `.bf16`, `.fp16`), decimal floats: numbers `42`, `0x2a`, `0b101010`, `1.5e-3`; "
    "symbols; parentheses; unary `- + ~`; binary `* / %`, `+ -`, `<< >>`, `&`, `^`, `|` with C's "
    "precedence (integer `/` truncates). A label's value is its address: an HBM address in "
    "`.data`/`.bss`, the byte offset of the instruction in a core's text. `.equ` symbols may be "
    "used before their definition, except in the directives that lay out memory (`.core`, "
    "`.data`, `.bss`, `.zero`, `.space`, `.align`), whose values must be known on the spot and "
    "cannot use labels.\n"
    "\n"
    "| directive | meaning |\n|---|---|\n"
    "| `.equ NAME, expr` | defines a symbolic constant |\n"
    "| `.core N` | following instructions are core N's (default: core 0); a core may be "
    "reopened |\n"
    "| `.kernel NAME` | starts a kernel (an ELF function symbol) at the next instruction; it ends "
    "at the next `.kernel`, `.endk` or the end of the core's text. Kernel names are per core |\n"
    "| `.endk` | ends the current kernel |\n"
    "| `.data [ADDR]` | initialized HBM data at ADDR (default 0) |\n"
    "| `.bss [ADDR]` | zero-filled HBM data at ADDR (default: the next 4 KiB boundary after "
    ".data) |\n"
    "| `.byte` `.half` `.word` `.dword` `expr, ...` | 1-, 2-, 4-, 8-byte little-endian integers "
    "(.data) |\n"
    "| `.float` `.bf16` `.fp16` `expr, ...` | floats as fp32, bf16, fp16 (rounded to nearest "
    "even) |\n"
    "| `.zero N`, `.space N` | N zero bytes |\n"
    "| `.align N` | pads to a multiple of N (a power of two up to 65536) |\n"
    "| `.size LABEL, N` | the size of a data label's symbol (default: up to the next label of "
    "its section, or the section's end) |\n"
    "| `.target rows=R, cols=C, cores=N, spad=BYTES, acc=BYTES, dtypes=fp32\\|bf16\\|...` | the "
    "architecture the program is for (else `npusim asm --arch`'s); `dtypes=none` for an array "
    "that multiplies no type |\n"
    "\n"
    "Every data label becomes an ELF object symbol (so `npusim sim --input NAME=FILE` can find "
    "it) and every kernel a function symbol (so traces and statistics can name it).\n"
    "\n"
    "**Errors** name the file, line and column of the offending token and stop the assembly, "
    "for example:\n"
    "\n"
    "```\n"
    "k.s:4:5: unknown mnemonic 'vpu.ad'; did you mean 'vpu.add'?\n"
    "k.s:5:40: operand 'rows' of vpu.exp: 70000 is out of range 1..65535\n"
    "k.s:6:14: operand 'src' of mxu.load: expected a scratchpad address spad[...], got 'hbm[r1]'\n"
    "k.s:7:22: undefined symbol 'tile_a'; did you mean 'tile_b'?\n"
    "```\n"
    "\n"
    "(`npusim asm` prints them after `npusim: ` and exits with status 2.)\n"
    "\n"
    "### Examples\n"
    "\n"
    "These are assembled by the test suite (tests/test_isa_asm.c). Longer programs — a "
    "double-buffered tiled matmul, a softmax, a send/recv pair — are in `isa/examples/`.\n";

/* A printf format: its one conversion is the ISA version. */
static const char doc_elf[] =
    "\n## ELF container\n"
    "\n"
    "`npusim asm` writes, and the loader (`isa_elf_load`, used by `npusim sim`, `disasm` and "
    "`objdump`) reads, ELF files with:\n"
    "\n"
    "| part | contents |\n|---|---|\n"
    "| ELF header | ELFCLASS64, little-endian, ET_EXEC, **e_machine 0x4e50** (\"NP\"; not "
    "assigned by the ELF registry, chosen for npusim), e_flags 0, no program headers |\n"
    "| `.text.core<N>` | PROGBITS, AX, address 0: core N's instruction words |\n"
    "| `.data` | PROGBITS, WA, address = HBM address: initialized data |\n"
    "| `.bss` | NOBITS, WA, address = HBM address: zero-filled data |\n"
    "| `.npu.names` | STRTAB: the names of trace regions (`\\0`, then the used names sorted, "
    "unique) |\n"
    "| `.note.npusim` | NOTE, name `npusim`, type 1, 40-byte descriptor (below) |\n"
    "| `.symtab`, `.strtab` | one global STT_FUNC per kernel (value: byte offset in its text "
    "section, size in bytes) and one global STT_OBJECT per data label (HBM address, size) |\n"
    "| `.shstrtab` | section names |\n"
    "\n"
    "The note's descriptor is the architecture fingerprint, little-endian:\n"
    "\n"
    "| offset | type | field |\n|---|---|---|\n"
    "| 0 | u32 | ISA version (this document: %u) |\n"
    "| 4 | u32 | array_rows |\n"
    "| 8 | u32 | array_cols |\n"
    "| 12 | u32 | cores |\n"
    "| 16 | u32 | dtypes: bit d set when the array multiplies dtype value d |\n"
    "| 20 | u32 | reserved, 0 |\n"
    "| 24 | u64 | spad_bytes (scratchpad per core) |\n"
    "| 32 | u64 | acc_bytes (accumulator SRAM per core) |\n"
    "\n"
    "The loader checks everything and refuses, with a message naming the file and the problem "
    "(exit status 2 from the commands): a truncated file or header; a wrong magic, class, byte "
    "order, version, type or machine; program headers; section headers or sections outside the "
    "file; sections overlapping each other, the ELF header or the section header table; "
    "unknown, duplicate or mistyped sections; a text size that is not whole words; a missing "
    "or malformed note; another ISA version; a fingerprint that differs from the architecture "
    "it is asked to run on (`--arch`); an undecodable word (unknown opcode, reserved bit set, "
    "field out of range); unbalanced or too deep loops; a name table that is not canonical or "
    "has unused names; NAME operands outside it; text for a core the target lacks; array "
    "dtypes the target cannot multiply; symbols of a wrong type or binding, outside their "
    "section or not whole instructions; overlapping kernels or data sections; duplicate "
    "names. It reads only inside the file, whatever the file holds: libFuzzer harnesses for "
    "the loader, the assembler and the decoder (`isa/fuzz/`) check that, run by "
    "`scripts/fuzz.sh [SECONDS]`.\n"
    "\n"
    "Disassembling any file the loader accepts and assembling the output gives the same "
    "program, and for files written by `npusim asm` the same bytes.\n"
    "\n"
    "### `npusim objdump --json`\n"
    "\n"
    "One object: `file`; `header` {`class`, `data`, `type`, `machine`, `version`, `entry`, "
    "`flags`, `shnum`}; `sections` [{`index`, `name`, `type`, `flags`, `address`, `offset`, "
    "`size`, `align`}]; `symbols` [{`name`, `type` (FUNC or OBJECT), `section`, `value`, "
    "`size`}]; `target` {`isa_version`, `array_rows`, `array_cols`, `cores`, `spad_bytes`, "
    "`acc_bytes`, `dtypes`}; `cores` [{`core`, `instructions`, `kernels` [{`name`, `start`, "
    "`count`}]}]. These names are stable.\n";

char *isa_doc_markdown(void)
{
    isa_buf b = {0};
    isa_buf_printf(&b, "%s", doc_intro);
    for (int u = 0; u < ISA_UNIT_COUNT; u++)
        isa_buf_printf(&b, "| `%s` | %s |\n", isa_unit_names[u], isa_unit_docs[u]);
    isa_buf_printf(&b, "%s", doc_encoding);
    doc_kind_table(&b);
    isa_buf_printf(&b, "\n## Enumerations\n\n");
    doc_enums(&b);
    isa_buf_printf(&b, "%s", doc_groups);
    for (int f = 0; f < ISA_PEER_FORM_COUNT; f++)
        isa_buf_printf(&b, "| %d | `%s` | %s |\n", f, isa_peer_form_syntax[f], isa_peer_form_docs[f]);
    isa_buf_printf(&b, "%s", doc_groups_after);
    int n_ops = ISA_OP_COUNT - 1;
    isa_buf_printf(&b, "\n## Instructions\n\n%d instructions. Each is one table row in "
                   "`isa/isa.def`.\n\n| opcode | mnemonic | unit | operands |\n|---|---|---|---|\n",
                   n_ops);
    for (int op = 1; op < ISA_OP_COUNT; op++) {
        isa_buf_printf(&b, "| 0x%02x | [`%s`](#", isa_ops[op].opcode, isa_ops[op].mnemonic);
        /* GitHub anchor of the heading "`m` — opcode 0xNN, unit". */
        char head[128];
        snprintf(head, sizeof head, "%s--opcode-0x%02x-%s", isa_ops[op].mnemonic,
                 isa_ops[op].opcode, isa_unit_names[isa_ops[op].unit]);
        for (char *h = head; *h; h++)
            if (*h != '.')
                isa_buf_put(&b, h, 1);
        isa_buf_printf(&b, ") | %s | ", isa_unit_names[isa_ops[op].unit]);
        for (unsigned f = 0; f < isa_ops[op].n_fields; f++)
            isa_buf_printf(&b, "%s%s%s", f ? ", " : "", isa_ops[op].fields[f].name,
                           isa_ops[op].fields[f].optional ? "?" : "");
        isa_buf_printf(&b, " |\n");
    }
    isa_buf_printf(&b, "\n(`?`: optional.)\n");
    static const isa_unit order[] = {ISA_UNIT_CTRL, ISA_UNIT_SYNC, ISA_UNIT_DMA, ISA_UNIT_MXU,
                                     ISA_UNIT_VPU, ISA_UNIT_COMM};
    for (size_t u = 0; u < sizeof order / sizeof order[0]; u++) {
        isa_buf_printf(&b, "\n## %s: %s\n\n", isa_unit_names[order[u]], isa_unit_docs[order[u]]);
        for (int op = 1; op < ISA_OP_COUNT; op++)
            if (isa_ops[op].unit == order[u])
                doc_op(&b, (isa_op)op);
    }
    isa_buf_printf(&b, "%s", doc_asm);
    for (size_t e = 0; e < isa_doc_n_examples; e++)
        isa_buf_printf(&b, "\n%s:\n\n```\n%s```\n", doc_example_titles[e], isa_doc_examples[e]);
    isa_buf_printf(&b, doc_elf, ISA_VERSION);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
