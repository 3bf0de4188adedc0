/* isa.h — the npusim accelerator instruction set: instructions, their encoding, and the
 * decoded form that the hardware model executes.
 *
 * Every instruction is defined once, in isa.def; the enums, tables and structs below are
 * generated from it. The machine (see docs/isa.md, generated from the same table):
 *
 *   - a decoupled access/execute core: a scalar front end (CTRL) fetches in program order,
 *     runs the register and loop instructions itself, and dispatches every other instruction
 *     to one of four in-order queues (DMA, MXU, VPU, COMM); queues only order against each
 *     other through semaphores (sem.signal / sem.wait, which enter the queue they name);
 *   - address operands are register + offset, resolved by the front end at dispatch, so the
 *     queues see absolute addresses; loops step registers and restore them at loop exit;
 *   - three address spaces per core: scratchpad SRAM (spad), accumulator SRAM (acc), and the
 *     chip's HBM (hbm, shared by the cores).
 *
 * Encoding. Every instruction is one 256-bit (32-byte) little-endian word: bit i is bit
 * (i % 8) of byte (i / 8). The opcode is the low byte; the operand fields follow in table
 * order from bit 8 upwards, each as wide as the table says; every bit above the last field is
 * reserved and must be zero.
 *
 *   255                                                              8 7          0
 *  +----------------+---------+-- ... --+---------+---------+---------+------------+
 *  | reserved (= 0) | field N |         | field 2 | field 1 | field 0 |   opcode   |
 *  +----------------+---------+-- ... --+---------+---------+---------+------------+
 *
 * Composite operand kinds lay out their parts from the field's lowest bit:
 *
 *            +--------------------------+-------+
 *   SPAD/ACC |   offset (32)            |reg (4)|                           36 bits
 *            +--------------------------+-------+---+
 *   SPADOPT  |   offset (32)            |reg (4)| p |  p: present           37 bits
 *            +--------------------------+-------+---+
 *   MEM      |   offset (40)            |reg (4)| h |  h: 0 spad, 1 hbm     45 bits
 *            +--------------------------+-------+---+
 *   STEP     |   signed step (40)       |reg (4)|                           44 bits
 *            +--------------------------+-------+
 *   PEER     |   core (16)   | chip or offset (20) |reg (4)|grp (4)| f |  f: form (2)  46 bits
 *            +---------------+---------------------+-------+-------+---+
 *
 * Example (hand-encoded in tests/test_isa.c): `li r3, 0x1234` is opcode 0x03, rd = 3 in bits
 * 8..11, imm = 0x1234 in bits 12..75: bytes 03 43 23 01 00 ... 00.
 */
#ifndef NPUSIM_ISA_H
#define NPUSIM_ISA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* ---- Sizes and positions (each derived from the previous, as in Lua's lopcodes.h) -------- */

#define ISA_VERSION 2u          /* bumped whenever an encoding changes; recorded in every ELF
                                   (2: PEER grew group-relative forms, 36 -> 46 bits) */
#define ISA_WORD_BITS 256
#define ISA_WORD_BYTES (ISA_WORD_BITS / 8)
#define ISA_SIZE_OPCODE 8
#define ISA_POS_OPCODE 0
#define ISA_POS_FIELDS (ISA_POS_OPCODE + ISA_SIZE_OPCODE)
#define ISA_FIELD_BITS_MAX (ISA_WORD_BITS - ISA_POS_FIELDS) /* room for operand fields */

#define ISA_N_REGS 16
#define ISA_SIZE_REG 4
#define ISA_SIZE_SPAD_OFF 32 /* SPAD, ACC, SPADOPT offsets */
#define ISA_SIZE_HBM_OFF 40  /* MEM offsets (either space) */
#define ISA_SIZE_STEP 40     /* STEP amounts (signed) */
#define ISA_SIZE_PEER_FORM 2 /* PEER: form (isa_peer_form) */
#define ISA_SIZE_GROUP 4     /* PEER: group */
#define ISA_SIZE_CHIP 20     /* PEER: chip, or a relative form's signed offset */
#define ISA_SIZE_CORE 16     /* PEER: core */
#define ISA_N_GROUPS (1 << ISA_SIZE_GROUP) /* groups g0 .. g15 of relative peers */
#define ISA_N_SEMS 256
#define ISA_LOOP_DEPTH 8   /* nesting limit of loop ... endloop */
#define ISA_MAX_OPNDS 12   /* most operand fields in one instruction */

/* ---- Enums generated from isa.def ----------------------------------------------------------- */

typedef enum isa_unit {
#define ISA_UNIT(NAME, text, doc) ISA_UNIT_##NAME,
#include "isa.def"
    ISA_UNIT_COUNT
} isa_unit;
#define ISA_N_QUEUES 4 /* DMA, MXU, VPU, COMM: the units that are queues; a UNIT operand's values */

typedef enum isa_dtype {
#define ISA_DTYPE(NAME, text, bytes, doc) ISA_DTYPE_##NAME,
#include "isa.def"
    ISA_DTYPE_COUNT
} isa_dtype;

typedef enum isa_act {
#define ISA_ACT(NAME, text, doc) ISA_ACT_##NAME,
#include "isa.def"
    ISA_ACT_COUNT
} isa_act;

typedef enum isa_bcast {
#define ISA_BCAST(NAME, text, doc) ISA_BCAST_##NAME,
#include "isa.def"
    ISA_BCAST_COUNT
} isa_bcast;

typedef enum isa_red {
#define ISA_RED(NAME, text, doc) ISA_RED_##NAME,
#include "isa.def"
    ISA_RED_COUNT
} isa_red;

typedef enum isa_accm {
#define ISA_ACCM(NAME, text, doc) ISA_ACCM_##NAME,
#include "isa.def"
    ISA_ACCM_COUNT
} isa_accm;

/* The rate class of a vector-unit instruction (isa_op_info.cost). */
typedef enum isa_cost {
#define ISA_COST(NAME, text, doc) ISA_COST_##NAME,
#include "isa.def"
    ISA_COST_COUNT
} isa_cost;

/* The operand family of an instruction (isa_op_info.family): its footprint and executor. */
typedef enum isa_family {
#define ISA_FAMILY(NAME, text, doc) ISA_FAMILY_##NAME,
#include "isa.def"
    ISA_FAMILY_COUNT
} isa_family;

typedef enum isa_kind {
#define ISA_KIND(NAME, bits, syntax, doc) ISA_KIND_##NAME,
#include "isa.def"
    ISA_KIND_COUNT
} isa_kind;

/* The forms of a PEER operand (isa_opnd.form). */
typedef enum isa_peer_form {
#define ISA_PEER_FORM(NAME, syntax, doc) ISA_PEER_FORM_##NAME,
#include "isa.def"
    ISA_PEER_FORM_COUNT
} isa_peer_form;

typedef enum isa_op {
    ISA_OP_ILLEGAL = 0, /* never decoded; opcode 0x00 is not an instruction */
#define ISA_OP(NAME, mnemonic, opcode, UNIT, FAMILY, COST, fields, semantics, timing) ISA_OP_##NAME,
#include "isa.def"
    ISA_OP_COUNT
} isa_op;

/* Address spaces of address operands. */
typedef enum isa_space {
    ISA_SPACE_NONE = 0, /* SPADOPT absent; every non-address operand */
    ISA_SPACE_SPAD,
    ISA_SPACE_HBM,
    ISA_SPACE_ACC,
    ISA_SPACE_COUNT
} isa_space;

/* ---- Decoded instructions --------------------------------------------------------------------- */

/* One operand, whatever its kind. Members a kind does not use are zero.
 *   REG            reg
 *   UIMM SIMM CNT STRIDE SEM BOOL NAME
 *                  val (NAME: byte offset in the program's name table)
 *   F32            val = the binary32 bit pattern (isa_opnd_f32 reads it as a float)
 *   UNIT DTYPE ACT BCAST RED ACCM
 *                  val = the enum value (isa_unit, isa_dtype, ...)
 *   PEER           form (isa_peer_form), core; CHIP: val = chip; ADD, XOR, RANK: group,
 *                  reg (0: none), val = signed offset (the index is reg's value + val)
 *   SPAD ACC SPADOPT MEM
 *                  space, reg = base register, val = byte offset; the address is
 *                  reg's value + val at dispatch. SPADOPT absent: all zero.
 *   STEP           reg = stepped register, val = signed step */
typedef struct isa_opnd {
    int64_t val;
    uint32_t core;
    uint8_t reg;
    uint8_t space;
    uint8_t form;  /* PEER only */
    uint8_t group; /* PEER only */
} isa_opnd;

/* Per-instruction views: isa_args_DMA_COPY has one isa_opnd member per field, in order. */
#define F(name, KIND, bits) isa_opnd name;
#define O(name, KIND, bits, dflt) isa_opnd name;
#define ISA_OP(NAME, mnemonic, opcode, UNIT, FAMILY, COST, fields, semantics, timing) \
    typedef struct isa_args_##NAME { fields char end_; } isa_args_##NAME;
#include "isa.def"

/* A decoded instruction. Read operands by name (in.MXU_MM.m.val) or by field index
 * (in.opnd[i], the order of isa_ops[in.op].fields). */
typedef struct isa_insn {
    isa_op op;
    union {
        isa_opnd opnd[ISA_MAX_OPNDS];
#define ISA_OP(NAME, mnemonic, opcode, UNIT, FAMILY, COST, fields, semantics, timing) isa_args_##NAME NAME;
#include "isa.def"
    };
} isa_insn;

/* ---- The tables ------------------------------------------------------------------------------- */

typedef struct isa_field {
    const char *name; /* "dst" */
    isa_kind kind;
    uint8_t bits;     /* width in the word */
    bool optional;
    int64_t dflt;     /* optional fields: the default val (other members zero) */
} isa_field;

typedef struct isa_op_info {
    const char *name;     /* "DMA_COPY" */
    const char *mnemonic; /* "dma.copy" */
    uint8_t opcode;
    isa_unit unit;
    isa_family family;    /* footprint and executor in the hardware model */
    isa_cost cost;        /* the vector unit's rate class (ISA_COST_NONE: not a vector op) */
    uint8_t n_fields;
    const isa_field *fields;
    const char *semantics;
    const char *timing;
} isa_op_info;

typedef struct isa_kind_info {
    const char *name;   /* "SPAD" */
    uint8_t bits;       /* fixed width, or 0 when each field gives it */
    const char *syntax; /* "spad[rN+expr]" */
    const char *doc;
} isa_kind_info;

extern const isa_op_info isa_ops[ISA_OP_COUNT];   /* [ISA_OP_ILLEGAL] has no mnemonic */
extern const isa_kind_info isa_kinds[ISA_KIND_COUNT];
extern const char *const isa_unit_names[ISA_UNIT_COUNT];   /* "dma", ... */
extern const char *const isa_unit_docs[ISA_UNIT_COUNT];
extern const char *const isa_dtype_names[ISA_DTYPE_COUNT]; /* "fp32", ... */
extern const char *const isa_dtype_docs[ISA_DTYPE_COUNT];
extern const uint8_t isa_dtype_size[ISA_DTYPE_COUNT];      /* bytes per element */
extern const char *const isa_family_names[ISA_FAMILY_COUNT]; /* "vpu.binary", ... */
extern const char *const isa_family_docs[ISA_FAMILY_COUNT];
extern const char *const isa_peer_form_syntax[ISA_PEER_FORM_COUNT]; /* "peer(gG[rank+x], core)" */
extern const char *const isa_peer_form_docs[ISA_PEER_FORM_COUNT];

/* The value names of an enumerated kind (UNIT, DTYPE, ACT, BCAST, RED, ACCM), indexed by
 * value, and their number in *n; NULL and 0 for other kinds. */
const char *const *isa_kind_values_of(isa_kind k, unsigned *n);

/* The op with this mnemonic, or ISA_OP_ILLEGAL. */
isa_op isa_op_find(const char *mnemonic);

/* The op with this opcode, or ISA_OP_ILLEGAL. */
isa_op isa_op_by_opcode(unsigned opcode);

/* Index of the field called name in op's fields, or -1. */
int isa_field_find(isa_op op, const char *name);

/* Bit position of field i of op in the word (fields start at ISA_POS_FIELDS). */
unsigned isa_field_pos(isa_op op, unsigned i);

/* The encoding pattern of op in Spike's terms: a word w is op iff (w & mask) == match, where
 * mask covers the opcode and the reserved bits above op's last field. */
void isa_op_match_mask(isa_op op, uint8_t match[ISA_WORD_BYTES], uint8_t mask[ISA_WORD_BYTES]);

/* The queue that executes in: its unit, or for SYNC instructions the queue named by their
 * unit operand; ISA_UNIT_CTRL for front-end instructions. */
isa_unit isa_insn_queue(const isa_insn *in);

/* ---- Building, encoding, decoding ------------------------------------------------------------- */

/* Sets *in to op with every optional field at its default and every required one zero. */
void isa_insn_init(isa_insn *in, isa_op op);

/* Operand constructors for compilers and tests. */
isa_opnd isa_imm(int64_t v);
isa_opnd isa_reg(unsigned r);
isa_opnd isa_f32(float f);
isa_opnd isa_spad(unsigned reg, uint64_t off);
isa_opnd isa_acc(unsigned reg, uint64_t off);
isa_opnd isa_hbm(unsigned reg, uint64_t off);
isa_opnd isa_peer(uint32_t chip, uint32_t core);
/* A group-relative peer: form ADD, XOR or RANK of group g, index reg's value (reg 0: none) +
 * off, core `core`: isa_peer_rel(ISA_PEER_FORM_ADD, 0, 0, 1, 0) is peer(g0[rank+1], 0). */
isa_opnd isa_peer_rel(isa_peer_form form, unsigned g, unsigned reg, int64_t off, uint32_t core);
isa_opnd isa_step(unsigned reg, int64_t step);
isa_opnd isa_val(unsigned reg, int64_t off); /* VAL: the value of reg at dispatch + off */
float isa_opnd_f32(const isa_opnd *o);

/* Checks operand i of op: kind-appropriate members set, value within the field's range.
 * NP_ERR_RANGE (out of range) or NP_ERR_TYPE (wrong space or stray members) with a message
 * such as "operand 'rows' of vpu.add: 0 is out of range 1..65535"; no position. */
np_status isa_operand_check(isa_op op, unsigned i, const isa_opnd *o, np_err *err);

/* Encodes *in into word. Every operand is checked first (isa_operand_check); on failure err
 * says which and word is untouched. NP_ERR_RANGE / NP_ERR_TYPE / NP_ERR_UNKNOWN_KEY (op). */
np_status isa_encode(const isa_insn *in, uint8_t word[ISA_WORD_BYTES], np_err *err);

/* Decodes word into *out. NP_ERR_FORMAT with the reason for an unknown opcode, a set reserved
 * bit, or a field value that is not valid for its kind (enum out of range, zero count, stray
 * address bits). *out is unspecified on failure. decode(encode(x)) == x for every valid x,
 * and encode(decode(w)) == w for every decodable w. */
np_status isa_decode(const uint8_t word[ISA_WORD_BYTES], isa_insn *out, np_err *err);

/* True if a and b are the same instruction (same op and operands). */
bool isa_insn_equal(const isa_insn *a, const isa_insn *b);

/* ---- Text ------------------------------------------------------------------------------------- */

/* Writes in as one line of assembly (no newline) that the assembler reads back to the same
 * instruction, e.g. "dma.copy spad[r1+0x40], hbm[r2], bf16, 128, 16, src_s1=4096". NAME
 * operands are looked up in names[0..names_len) (the program's name table). Returns the
 * length it needed, like snprintf. */
int isa_format(const isa_insn *in, const char *names, size_t names_len, char *buf, size_t n);

/* Writes a string as an assembly string literal ("..." with \\, \", \n, \t, \xNN escapes);
 * returns the length needed, like snprintf. */
int isa_format_string(const char *s, char *buf, size_t n);

/* The reference manual (docs/isa.md), generated from the table: a malloc'd string, or NULL
 * when out of memory. `npusim asm --doc` prints it. */
char *isa_doc_markdown(void);

/* The assembly examples shown in the manual (each a whole source file); the tests assemble
 * every one of them. */
extern const char *const isa_doc_examples[];
extern const size_t isa_doc_n_examples;

#endif
